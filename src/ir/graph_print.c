/* Text and DOT forms of the graph IR. */
#include <stddef.h>
#include <stdio.h>

#include "ir/graph.h"
#include "support/strbuf.h"

static const char *bind_names[] = {"arg", "param", "captured", "const", "folded", "grad"};

/* The index in i[] of a layout's integer field. */
#define WORD(layout, field) ((int)(offsetof(tgc_##layout##_attrs, field) / sizeof(int64_t)))

/* Attribute k holds a tgc_sdim (ops.def: ARANGE's count, symbolic RESHAPE/EXPAND targets,
 * the forward sizes of the backward ops). */
static int attr_is_sdim(const tgc_node *nd, int k)
{
    if (TGC_SDIM_IS_CONST(nd->attrs.i[k]))
        return 0;
    switch (nd->op) {
    case TGC_OP_ARANGE: return 1;
    case TGC_OP_RESHAPE:
    case TGC_OP_EXPAND: return nd->attrs.nf == 1 && nd->attrs.shape.symbolic == 1.0;
    case TGC_OP_CONV2D_GRAD_INPUT: return k >= WORD(conv2d_grad_input, h);
    case TGC_OP_CONV2D_GRAD_WEIGHT: return k >= WORD(conv2d_grad_weight, kh);
    case TGC_OP_AVG_POOL2D_GRAD: return k >= WORD(pool_grad, h);
    case TGC_OP_ADAPTIVE_AVG_POOL2D_GRAD: return k >= WORD(adaptive_pool_grad, h);
    case TGC_OP_EMBEDDING_GRAD: return k == WORD(embedding_grad, num);
    case TGC_OP_GATHER_GRAD: return k >= WORD(gather_grad, shape);
    case TGC_OP_INDEX_SELECT_GRAD: return k == WORD(index_select_grad, size);
    default: return 0;
    }
}

static void print_attrs(tgc_strbuf *sb, const tgc_graph *g, const tgc_node *nd)
{
    if (nd->op == TGC_OP_INPUT) {
        int k = (int)nd->attrs.input.kind;
        tgc_sb_printf(sb, " {%s %lld}", (k >= 0 && k < 6) ? bind_names[k] : "?",
                      (long long)nd->attrs.input.index);
        return;
    }
    if (nd->op == TGC_OP_CAST) {
        tgc_sb_printf(sb, " {to=%s}", tgc_dtype_name(nd->attrs.dtype));
        return;
    }
    if (nd->attrs.ni == 0 && nd->attrs.nf == 0)
        return;
    tgc_sb_puts(sb, " {");
    for (int i = 0; i < nd->attrs.ni; i++) {
        char d[128];
        if (attr_is_sdim(nd, i) && g->syms)
            tgc_sym_format(g->syms, nd->attrs.i[i], d, sizeof d);
        else
            snprintf(d, sizeof d, "%lld", (long long)nd->attrs.i[i]);
        tgc_sb_printf(sb, "%s%s", i ? "," : "i=", d);
    }
    for (int i = 0; i < nd->attrs.nf; i++)
        tgc_sb_printf(sb, "%s%g", i ? "," : (nd->attrs.ni ? " f=" : "f="), nd->attrs.f[i]);
    tgc_sb_puts(sb, "}");
}

static void print_type(tgc_strbuf *sb, const tgc_graph *g, const tgc_vinfo *v)
{
    char shape[512];
    tgc_vinfo_format_shape(g->syms, v, shape, sizeof shape);
    tgc_sb_printf(sb, "%s%s", tgc_dtype_name(v->dtype), shape);
}

char *tgc_graph_to_text(const tgc_graph *g)
{
    tgc_strbuf sb = {0};
    int n_syms = tgc_sym_count(g->syms);
    if (n_syms) {
        tgc_sb_puts(&sb, "symbols:");
        for (int k = 0; k < n_syms; k++) {
            int in, dim;
            tgc_sym_origin(g->syms, k, &in, &dim);
            tgc_sb_printf(&sb, " s%d=in%d.size(%d)", k, in, dim);
        }
        tgc_sb_puts(&sb, "\n");
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const tgc_node *nd = &g->nodes[i];
        tgc_sb_printf(&sb, "%%%d = %s(", i, tgc_op_name(nd->op));
        for (int k = 0; k < nd->n_in; k++)
            tgc_sb_printf(&sb, "%s%%%d", k ? ", " : "", nd->in[k]);
        tgc_sb_puts(&sb, ")");
        print_attrs(&sb, g, nd);
        tgc_sb_puts(&sb, " : ");
        print_type(&sb, g, &nd->out);
        tgc_sb_puts(&sb, (nd->flags & TGC_NODE_MUTATES) ? "  ; writes its inputs\n" : "\n");
    }
    tgc_sb_puts(&sb, "return");
    for (int i = 0; i < g->n_outputs; i++)
        tgc_sb_printf(&sb, "%s%%%d", i ? ", " : " ", g->outputs[i]);
    tgc_sb_puts(&sb, "\n");
    return tgc_sb_take(&sb);
}

char *tgc_graph_to_dot(const tgc_graph *g)
{
    tgc_strbuf sb = {0};
    tgc_sb_puts(&sb, "digraph tgc {\n  node [shape=box, fontname=\"monospace\"];\n");
    for (int i = 0; i < g->n_nodes; i++) {
        const tgc_node *nd = &g->nodes[i];
        tgc_sb_printf(&sb, "  n%d [label=\"%%%d %s\\n", i, i, tgc_op_name(nd->op));
        print_type(&sb, g, &nd->out);
        tgc_sb_printf(&sb, "\"%s];\n",
                      nd->op == TGC_OP_INPUT ? ", style=filled, fillcolor=lightgrey" : "");
        for (int k = 0; k < nd->n_in; k++)
            tgc_sb_printf(&sb, "  n%d -> n%d;\n", nd->in[k], i);
    }
    for (int i = 0; i < g->n_outputs; i++)
        tgc_sb_printf(&sb, "  out%d [shape=oval, label=\"out %d\"];\n  n%d -> out%d;\n", i, i,
                      g->outputs[i], i);
    tgc_sb_puts(&sb, "}\n");
    return tgc_sb_take(&sb);
}
