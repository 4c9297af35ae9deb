/* tgc_fn_explain and tgc_fn_graph: what a compiled function holds and why. */
#include <stdio.h>
#include <string.h>

#include "jit/jit.h"

/* The backends the compiled variants run on, most recently hit first ("cuda", or
 * "cuda, llvm" for a function called on both devices); with none compiled yet, the one the
 * config resolved to. Called with f->lock held. */
static void variant_backends(const tgc_fn *f, char *buf, size_t n, int *count)
{
    const char *seen[8];
    int k = 0;
    for (const tgc_variant *v = f->variants; v && k < 8; v = v->next) {
        int dup = v->is_eager || !v->backend;
        for (int i = 0; i < k && !dup; i++)
            dup = seen[i] == v->backend->name;
        if (!dup)
            seen[k++] = v->backend->name;
    }
    if (!k)
        seen[k++] = f->cfg.backend == TGC_BACKEND_EAGER ? tgc_backend_kind_name(TGC_BACKEND_EAGER)
                                                        : f->backend->name;
    buf[0] = '\0';
    for (int i = 0; i < k; i++)
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", i ? ", " : "", seen[i]);
    *count = k;
}

char *tgc_fn_explain(const tgc_fn *cf)
{
    if (!cf) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_fn_explain: fn is NULL");
        return NULL;
    }
    tgc_fn *f = (tgc_fn *)cf;
    tgc_stats s;
    tgc_fn_stats(f, &s);
    tgc_strbuf sb = {0};
    pthread_mutex_lock(&f->lock);
    char backends[96];
    int n_backends;
    variant_backends(f, backends, sizeof backends, &n_backends);
    tgc_sb_printf(&sb,
                  "tgc_fn '%s' (backend%s %s): %llu calls, %llu cache hits, %llu compiles "
                  "(%llu recompiles), %llu eager calls, %llu graph breaks\n",
                  f->name, n_backends > 1 ? "s" : "", backends, (unsigned long long)s.calls,
                  (unsigned long long)s.cache_hits, (unsigned long long)s.compiles,
                  (unsigned long long)s.recompiles, (unsigned long long)s.eager_fallbacks,
                  (unsigned long long)s.graph_breaks);
    tgc_sb_printf(&sb,
                  "  %d of cache_size_limit %d variants%s; compile time %.2f ms in all; guard "
                  "check %.0f ns per call\n",
                  f->n_variants, f->cfg.cache_size_limit,
                  s.cache_limit_hit ? " (limit reached: calls that miss run eagerly)" : "",
                  1e3 * s.compile_seconds, s.guard_ns_per_call);
    static const char *const dyn[] = {"auto", "always", "never"};
    tgc_sb_printf(&sb, "  dynamic = %s\n", dyn[f->cfg.dynamic]);
    for (const tgc_variant *v = f->variants; v; v = v->next) {
        tgc_sb_printf(&sb, "variant %d%s: compiled because: %s\n", v->id,
                      v == f->variants ? " (most recently hit)" : "", v->reason);
        if (v->is_eager)
            tgc_sb_printf(&sb, "  runs eagerly: graph break: %s\n", v->break_reason);
        else {
            char d[48];
            tgc_sb_printf(&sb, "  %d graph nodes, %d kernels (%s backend, on %s)\n",
                          v->graph->n_nodes, tgc_backend_kernel_count(v->backend, v->artifact),
                          v->backend->name, tgc_format_device(v->device, d, sizeof d));
            tgc_strbuf fb = {0};
            int n_fb = tgc_backend_describe_fallbacks(v->backend, v->artifact, &fb, "    ");
            char *fb_text = tgc_sb_take(&fb);
            if (n_fb)
                tgc_sb_printf(&sb, "  %d step%s on interp:\n%s", n_fb, n_fb == 1 ? "" : "s",
                              fb_text ? fb_text : "");
            else if (!v->backend->graph)
                tgc_sb_puts(&sb, "  no step on interp\n");
            tgc_free(fb_text);
            tgc_backend_describe_layout(v->backend, v->artifact, &sb, "  ");
            int n_launches = 0,
                n_batched = tgc_backend_batched(v->backend, v->artifact, &n_launches);
            if (n_batched)
                tgc_sb_printf(&sb,
                              "  %d independent pointwise kernels run in %d batched launch%s\n",
                              n_batched, n_launches, n_launches == 1 ? "" : "es");
            int n_kept_values = 0,
                n_kept = tgc_backend_kept_steps(v->backend, v->artifact, &n_kept_values);
            if (n_kept)
                tgc_sb_printf(&sb,
                              "  steps 0-%d read only module tensors and constants: their %d "
                              "result%s kept between calls, recomputed when one of those "
                              "tensors changes\n",
                              n_kept - 1, n_kept_values, n_kept_values == 1 ? " is" : "s are");
            int writes = 0, grads = 0, reduces = 0;
            double reduce_mib = 0;
            for (int32_t i = 0; i < v->graph->n_nodes; i++) {
                const tgc_node *nd = &v->graph->nodes[i];
                writes += nd->op == TGC_OP_ASSIGN;
                grads += nd->op == TGC_OP_INPUT && nd->attrs.input.kind == TGC_BIND_GRAD;
                if (nd->op == TGC_OP_ALL_REDUCE) {
                    double n = (double)tgc_dtype_size(nd->out.dtype) / (1024.0 * 1024.0);
                    for (int d = 0; d < nd->out.ndim; d++)
                        n *= (double)tgc_sym_hint(v->graph->syms, nd->out.shape[d]);
                    reduces++;
                    reduce_mib += n;
                }
            }
            if (reduces)
                tgc_sb_printf(&sb,
                              "  collectives: %d all_reduce (%.2f MiB at the traced sizes), each "
                              "overlapped with the work before its comm_wait\n",
                              reduces, reduce_mib);
            size_t arena = tgc_backend_arena_bytes(v->backend, v->artifact);
            if (writes)
                tgc_sb_printf(&sb,
                              "  training step: %d in-place writes (parameters, gradients, "
                              "optimizer state), %d gradients bound by position\n",
                              writes, grads);
            if (arena)
                tgc_sb_printf(&sb,
                              "  memory plan: %.2f MiB of intermediates (peak of the "
                              "latest call)\n",
                              (double)arena / (1024.0 * 1024.0));
        }
        tgc_sb_printf(&sb, "  hits %llu, compile %.2f ms\n  guards:\n", (unsigned long long)v->hits,
                      1e3 * v->compile_seconds);
        tgc_guards_describe(&v->guards, &sb);
    }
    pthread_mutex_unlock(&f->lock);
    char *text = tgc_sb_take(&sb);
    if (!text)
        tgc_set_error(TGC_ERR_OOM, "tgc_fn_explain: out of memory");
    return text;
}

char *tgc_fn_graph(const tgc_fn *cf, int variant, int dot)
{
    if (!cf) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_fn_graph: fn is NULL");
        return NULL;
    }
    tgc_fn *f = (tgc_fn *)cf;
    char *text = NULL;
    pthread_mutex_lock(&f->lock);
    const tgc_variant *v = f->variants;
    for (int i = 0; v && i < variant; i++)
        v = v->next;
    if (v && !v->is_eager && variant >= 0)
        text = dot ? tgc_graph_to_dot(v->graph) : tgc_graph_to_text(v->graph);
    pthread_mutex_unlock(&f->lock);
    if (!text)
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_fn_graph: '%s' has no compiled variant %d", f->name,
                      variant);
    return text;
}
