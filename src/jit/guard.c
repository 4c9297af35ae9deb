/* Guards: build from a trace, check per call, explain a miss. */
#include "jit/guard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/module_impl.h"
#include "support/strbuf.h"
#include "tgc/autograd.h"

static void input_guard_from(tgc_input_guard *ig, const tgc_tensor *t, const tgc_vinfo *v,
                             const tgc_symtab *syms)
{
    ig->dtype = t->dtype;
    ig->device = t->device;
    ig->ndim = t->ndim;
    ig->contiguous = tgc_tensor_is_contiguous(t);
    for (int d = 0; d < t->ndim; d++) {
        ig->size[d] = t->shape[d];
        ig->sym[d] = -1;
        for (int k = 0; k < tgc_sym_count(syms) && !TGC_SDIM_IS_CONST(v->shape[d]); k++)
            if (tgc_sym_same(tgc_sym_symbol(syms, k), v->shape[d]))
                ig->sym[d] = (int16_t)k;
    }
}

tgc_status tgc_guards_build(tgc_guards *g, tgc_trace *tr, tgc_module *self, tgc_tensor *const *in,
                            int n_in, int module_identity)
{
    memset(g, 0, sizeof *g);
    g->syms = tr->g->syms;
    g->n_syms = tgc_sym_count(g->syms);
    if (g->n_syms > TGC_GUARD_MAX_SYMS)
        return tgc_set_error(TGC_ERR_UNSUPPORTED, "tgc: more than %d dynamic dims",
                             TGC_GUARD_MAX_SYMS);
    g->n_in = n_in;
    g->in = calloc((size_t)(n_in ? n_in : 1), sizeof *g->in);
    g->captured = calloc((size_t)(tr->n_bound ? tr->n_bound : 1), sizeof *g->captured);
    g->values = calloc((size_t)(tr->n_value_guards ? tr->n_value_guards : 1), sizeof *g->values);
    g->module_desc = self ? tgc_module_describe(self) : NULL;
    if (!g->in || !g->captured || !g->values || (self && !g->module_desc)) {
        tgc_guards_free(g);
        return tgc_set_error(TGC_ERR_OOM, "tgc: out of memory building guards");
    }
    for (int i = 0; i < n_in; i++) /* ARG inputs are nodes 0..n_in-1 */
        input_guard_from(&g->in[i], in[i], &tr->g->nodes[i].out, g->syms);
    g->has_module = self != NULL;
    g->module_sig = tgc_module_signature(self);
    g->module_ptr = self;
    g->module_identity = module_identity;
    g->grad_enabled = tgc_grad_enabled();
    for (int i = 0; i < tr->n_bound; i++)
        g->captured[i] = (tgc_captured_guard){tr->bound[i].t, tr->bound[i].version,
                                              tr->bound[i].is_const, tr->bound[i].values_read};
    g->n_captured = tr->n_bound;
    tr->n_bound = 0; /* the guards own those references now */
    if (tr->n_value_guards)
        memcpy(g->values, tr->value_guards, (size_t)tr->n_value_guards * sizeof *g->values);
    g->n_values = tr->n_value_guards;
    g->size_reads = tr->size_reads; /* the guards own them now */
    g->n_size_reads = tr->n_size_reads;
    tr->size_reads = NULL;
    tr->n_size_reads = tr->cap_size_reads = 0;
    return TGC_OK;
}

void tgc_guards_free(tgc_guards *g)
{
    for (int i = 0; i < g->n_captured; i++)
        tgc_tensor_unref(g->captured[i].t);
    free(g->in);
    free(g->captured);
    free(g->values);
    free(g->size_reads);
    free(g->module_desc);
    memset(g, 0, sizeof *g);
}

static int check_input(const tgc_input_guard *ig, const tgc_tensor *t, int64_t *symvals)
{
    if (t->dtype != ig->dtype || t->ndim != ig->ndim || t->device.type != ig->device.type ||
        t->device.index != ig->device.index)
        return 0;
    for (int d = 0; d < ig->ndim; d++) {
        if (ig->sym[d] < 0) {
            if (t->shape[d] != ig->size[d])
                return 0;
        } else {
            if (t->shape[d] < 2)
                return 0;
            symvals[ig->sym[d]] = t->shape[d];
        }
    }
    return tgc_tensor_is_contiguous(t) == ig->contiguous;
}

static int module_ok(const tgc_guards *g, tgc_module *self)
{
    if (!g->has_module)
        return self == NULL;
    if (!self || (g->module_identity && (const void *)self != g->module_ptr))
        return 0;
    return tgc_module_signature(self) == g->module_sig;
}

/* "captured tensor 6 adam.exp_avg[fc1.weight] (f32[4])": the name is the library's own
 * (tgc_tensor_set_debug_name), when the tensor has one */
static void captured_label(const tgc_captured_guard *c, int i, char *buf, size_t n)
{
    char dims[160];
    tgc_format_dims(c->t->shape, c->t->ndim, dims, sizeof dims);
    snprintf(buf, n, "captured tensor %d%s%s (%s%s)", i, c->t->debug_name ? " " : "",
             c->t->debug_name ? c->t->debug_name : "", tgc_dtype_name(c->t->dtype), dims);
}

static int captured_ok(const tgc_captured_guard *c)
{
    return c->is_const || (!(c->t->flags & TGC_T_DEAD) &&
                           (!c->values_read || atomic_load(&c->t->storage->version) == c->version));
}

static int value_ok(const tgc_value_guard *v, tgc_tensor *const *in)
{
    const tgc_tensor *t = in[v->input];
    return tgc_shape_numel(t->shape, t->ndim) > 0 &&
           tgc_load(tgc_host_data(t), t->dtype, t->offset) == v->value;
}

static int assumptions_ok(const tgc_guards *g, const int64_t *symvals)
{
    for (int k = 0; k < tgc_sym_n_assumptions(g->syms); k++)
        if (!tgc_sym_assumption_holds(g->syms, k, symvals))
            return 0;
    return 1;
}

int tgc_guards_check(const tgc_guards *g, tgc_module *self, tgc_tensor *const *in, int n_in,
                     int64_t *symvals)
{
    if (n_in != g->n_in || !module_ok(g, self) || tgc_grad_enabled() != g->grad_enabled)
        return 0;
    for (int i = 0; i < n_in; i++)
        if (!check_input(&g->in[i], in[i], symvals))
            return 0;
    for (int i = 0; i < g->n_captured; i++)
        if (!captured_ok(&g->captured[i]))
            return 0;
    for (int i = 0; i < g->n_values; i++)
        if (!value_ok(&g->values[i], in))
            return 0;
    return assumptions_ok(g, symvals);
}

/* ---- explaining a miss ---- */

/* The first failing guard of input i, or TGC_MISS_NONE. */
static tgc_miss_kind explain_input(const tgc_input_guard *ig, const tgc_tensor *t, int i, char *buf,
                                   size_t n)
{
    if (t->dtype != ig->dtype) {
        snprintf(buf, n, "input %d dtype changed: expected %s, got %s", i,
                 tgc_dtype_name(ig->dtype), tgc_dtype_name(t->dtype));
        return TGC_MISS_LAYOUT;
    }
    if (t->device.type != ig->device.type || t->device.index != ig->device.index) {
        snprintf(buf, n, "input %d device changed", i);
        return TGC_MISS_LAYOUT;
    }
    if (t->ndim != ig->ndim) {
        snprintf(buf, n, "input %d rank changed: expected %d, got %d", i, ig->ndim, t->ndim);
        return TGC_MISS_LAYOUT;
    }
    for (int d = 0; d < ig->ndim; d++) {
        if (ig->sym[d] < 0 && t->shape[d] != ig->size[d]) {
            snprintf(buf, n, "input %d size mismatch at dim %d: expected %lld, got %lld", i, d,
                     (long long)ig->size[d], (long long)t->shape[d]);
            return TGC_MISS_SIZE;
        }
        if (ig->sym[d] >= 0 && t->shape[d] < 2) {
            snprintf(buf, n,
                     "input %d size at dim %d is %lld; dynamic dim s%d covers sizes >= 2 "
                     "(0 and 1 are specialized)",
                     i, d, (long long)t->shape[d], ig->sym[d]);
            return TGC_MISS_SIZE;
        }
    }
    if (tgc_tensor_is_contiguous(t) != ig->contiguous) {
        snprintf(buf, n, "input %d layout changed: expected %s, got %s", i,
                 ig->contiguous ? "contiguous" : "strided",
                 ig->contiguous ? "strided" : "contiguous");
        return TGC_MISS_LAYOUT;
    }
    return TGC_MISS_NONE;
}

/* The key of a description line: "self.fc.weight" of "self.fc.weight: param ...", "self.k"
 * of "self.k = 3". */
static size_t line_key(const char *line, size_t len)
{
    size_t k = 0;
    while (k < len && line[k] != ':' && !(line[k] == ' ' && k + 1 < len && line[k + 1] == '='))
        k++;
    return k;
}

/* 1 when text (a description) has a line whose key is key[0..len). */
static int has_key(const char *text, const char *key, size_t len)
{
    while (*text) {
        size_t l = strcspn(text, "\n");
        if (line_key(text, l) == len && strncmp(text, key, len) == 0)
            return 1;
        text += l + (text[l] == '\n');
    }
    return 0;
}

/* Finds the first line that differs between two module descriptions (module.c writes them:
 * "path = value" for the training flag and attributes, "path: ..." for tensors). */
static tgc_miss_kind explain_module(const char *was, const char *now, char *buf, size_t n)
{
    const char *was0 = was, *now0 = now;
    while (*was && *now) {
        size_t la = strcspn(was, "\n"), lb = strcspn(now, "\n");
        if (la != lb || strncmp(was, now, la) != 0) {
            size_t ka = line_key(was, la), kb = line_key(now, lb);
            int val_a = ka + 3 <= la && was[ka] == ' ', val_b = kb + 3 <= lb && now[kb] == ' ';
            if (ka == kb && strncmp(was, now, ka) == 0 && val_a && val_b) {
                snprintf(buf, n, "%.*s changed (%.*s -> %.*s)", (int)ka, was, (int)(la - ka - 3),
                         was + ka + 3, (int)(lb - kb - 3), now + kb + 3);
                size_t tl = strlen(".training");
                return ka >= tl && strncmp(was + ka - tl, ".training", tl) == 0 ? TGC_MISS_TRAINING
                                                                                : TGC_MISS_ATTR;
            }
            if (!has_key(was0, now, kb))
                snprintf(buf, n, "self structure changed: %.*s was added", (int)kb, now);
            else if (!has_key(now0, was, ka))
                snprintf(buf, n, "self structure changed: %.*s is gone", (int)ka, was);
            else
                snprintf(buf, n, "self structure changed: '%.*s' became '%.*s'", (int)la, was,
                         (int)lb, now);
            return TGC_MISS_STRUCTURE;
        }
        was += la + (was[la] == '\n');
        now += lb + (now[lb] == '\n');
    }
    if (*was)
        snprintf(buf, n, "self structure changed: %.*s is gone",
                 (int)line_key(was, strcspn(was, "\n")), was);
    else
        snprintf(buf, n, "self structure changed: %.*s was added",
                 (int)line_key(now, strcspn(now, "\n")), now);
    return TGC_MISS_STRUCTURE;
}

static tgc_miss_kind explain_self(const tgc_guards *g, tgc_module *self, char *buf, size_t n)
{
    if (!g->has_module || !self) {
        snprintf(buf, n, "self changed from %s to %s", g->has_module ? "a module" : "NULL",
                 self ? "a module" : "NULL");
        return TGC_MISS_STRUCTURE;
    }
    if (g->module_identity && (const void *)self != g->module_ptr) {
        snprintf(buf, n,
                 "self is a different module object (cfg.guard_module_identity is set; unset it "
                 "to share variants between modules of one structure)");
        return TGC_MISS_IDENTITY;
    }
    char *now = tgc_module_describe(self);
    tgc_miss_kind k = TGC_MISS_STRUCTURE;
    if (now)
        k = explain_module(g->module_desc, now, buf, n);
    else
        snprintf(buf, n, "self structure changed");
    free(now);
    return k;
}

tgc_miss_kind tgc_guards_explain(const tgc_guards *g, tgc_module *self, tgc_tensor *const *in,
                                 int n_in, char *buf, size_t n)
{
    int64_t symvals[TGC_GUARD_MAX_SYMS];
    if (n_in != g->n_in) {
        snprintf(buf, n, "number of inputs changed: expected %d, got %d", g->n_in, n_in);
        return TGC_MISS_INPUT_COUNT;
    }
    for (int i = 0; i < n_in; i++) {
        tgc_miss_kind k = explain_input(&g->in[i], in[i], i, buf, n);
        if (k != TGC_MISS_NONE)
            return k;
    }
    if (!module_ok(g, self))
        return explain_self(g, self, buf, n);
    if (tgc_grad_enabled() != g->grad_enabled) {
        snprintf(buf, n, "grad mode changed (%s -> %s)", g->grad_enabled ? "enabled" : "disabled",
                 g->grad_enabled ? "disabled" : "enabled");
        return TGC_MISS_GRAD_MODE;
    }
    for (int i = 0; i < g->n_captured; i++) {
        const tgc_captured_guard *c = &g->captured[i];
        if (captured_ok(c))
            continue;
        char what[400];
        captured_label(c, i, what, sizeof what);
        if (c->t->flags & TGC_T_DEAD)
            snprintf(buf, n, "%s was freed", what);
        else
            snprintf(buf, n,
                     "%s was written in place after the trace read its value with tgc_item_* "
                     "(version %llu -> %llu)",
                     what, (unsigned long long)c->version,
                     (unsigned long long)atomic_load(&c->t->storage->version));
        return TGC_MISS_CAPTURED;
    }
    for (int i = 0; i < g->n_values; i++)
        if (!value_ok(&g->values[i], in)) {
            const tgc_tensor *t = in[g->values[i].input];
            snprintf(buf, n,
                     "value of input %d (read with tgc_item_*) changed: expected %g, got %g",
                     g->values[i].input, g->values[i].value,
                     tgc_shape_numel(t->shape, t->ndim)
                         ? tgc_load(tgc_host_data(t), t->dtype, t->offset)
                         : 0.0);
            return TGC_MISS_VALUE;
        }
    for (int i = 0; i < n_in; i++) /* binds the symbols for the assumption report */
        check_input(&g->in[i], in[i], symvals);
    for (int k = 0; k < tgc_sym_n_assumptions(g->syms); k++) {
        if (tgc_sym_assumption_holds(g->syms, k, symvals))
            continue;
        tgc_sdim a, b;
        const char *rel = tgc_sym_assumption(g->syms, k, &a, &b) == TGC_ASSUME_EQ ? "==" : ">=";
        for (int r = 0; r < g->n_size_reads; r++)
            if (tgc_sym_same(g->size_reads[r].dim, a) && *rel == '=' &&
                tgc_sym_same(g->size_reads[r].value, b)) {
                snprintf(buf, n, "%s and is now %lld; " TGC_SIZE_READ_ADVICE,
                         g->size_reads[r].what, (long long)tgc_sym_eval(g->syms, a, symvals));
                return TGC_MISS_SIZE_READ;
            }
        char sa[128], sb[128];
        tgc_sym_format(g->syms, a, sa, sizeof sa);
        tgc_sym_format(g->syms, b, sb, sizeof sb);
        snprintf(buf, n, "shape relation %s %s %s no longer holds (%lld vs %lld)", sa, rel, sb,
                 (long long)tgc_sym_eval(g->syms, a, symvals),
                 (long long)tgc_sym_eval(g->syms, b, symvals));
        return TGC_MISS_SIZE;
    }
    snprintf(buf, n, "no guard failed");
    return TGC_MISS_NONE;
}

void tgc_guards_describe(const tgc_guards *g, tgc_strbuf *sb)
{
    for (int i = 0; i < g->n_in; i++) {
        const tgc_input_guard *ig = &g->in[i];
        tgc_sb_printf(sb, "    input %d: %s [", i, tgc_dtype_name(ig->dtype));
        for (int d = 0; d < ig->ndim; d++) {
            if (ig->sym[d] >= 0)
                tgc_sb_printf(sb, "%ss%d", d ? ", " : "", ig->sym[d]);
            else
                tgc_sb_printf(sb, "%s%lld", d ? ", " : "", (long long)ig->size[d]);
        }
        tgc_sb_printf(sb, "] %s %s\n", ig->contiguous ? "contiguous" : "strided",
                      ig->device.type == TGC_DEVICE_CPU ? "cpu" : "cuda");
    }
    for (int k = 0; k < g->n_syms; k++) {
        int in, dim;
        tgc_sym_origin(g->syms, k, &in, &dim);
        tgc_sb_printf(sb, "    s%d = input %d size(%d), s%d >= 2\n", k, in, dim, k);
    }
    for (int k = 0; k < tgc_sym_n_assumptions(g->syms); k++) {
        tgc_sdim a, b;
        char sa[128], sbuf[128];
        int eq = tgc_sym_assumption(g->syms, k, &a, &b) == TGC_ASSUME_EQ;
        tgc_sym_format(g->syms, a, sa, sizeof sa);
        tgc_sym_format(g->syms, b, sbuf, sizeof sbuf);
        tgc_sb_printf(sb, "    %s %s %s\n", sa, eq ? "==" : ">=", sbuf);
    }
    if (g->has_module)
        tgc_sb_printf(sb, "    self: structure signature %016llx%s\n",
                      (unsigned long long)g->module_sig,
                      g->module_identity ? " and this exact module object" : "");
    else
        tgc_sb_puts(sb, "    self: NULL\n");
    tgc_sb_printf(sb, "    grad mode: %s\n", g->grad_enabled ? "enabled" : "disabled");
    for (int i = 0; i < g->n_captured; i++) {
        const tgc_captured_guard *c = &g->captured[i];
        if (c->is_const)
            continue;
        char what[400];
        captured_label(c, i, what, sizeof what);
        tgc_sb_printf(sb, "    %s: this object, alive", what);
        if (c->values_read)
            tgc_sb_printf(sb, ", version %llu (its value was read while tracing)",
                          (unsigned long long)c->version);
        tgc_sb_puts(sb, "\n");
    }
    for (int i = 0; i < g->n_values; i++)
        tgc_sb_printf(sb, "    value of input %d == %g\n", g->values[i].input, g->values[i].value);
}
