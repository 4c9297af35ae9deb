/* tgc_compile / tgc_call: guard check, variant cache, recompiles, limits, fallback. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/eager.h"
#include "autograd/autograd.h"
#include "frontend/module_impl.h"
#include "tensor/scope.h"
#include "jit/jit.h"
#include "support/dirs.h"
#include "support/log.h"
#include "support/struct_size.h"

/* Variants alive in this process, for accumulated_cache_size_limit. */
static atomic_int process_variants;

static char *dup_opt(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

tgc_fn *tgc_compile(tgc_model_fn fn, const char *name, const tgc_config *cfg)
{
    if (!fn) {
        tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_compile: fn is NULL");
        return NULL;
    }
    tgc_config full; /* the caller's struct_size bytes, the defaults after them */
    if (tgc_config_read(cfg, &full) != TGC_OK)
        return NULL;
    cfg = &full;
    tgc_fn *f = calloc(1, sizeof *f);
    if (!f) {
        tgc_set_error(TGC_ERR_OOM, "tgc_compile: out of memory");
        return NULL;
    }
    f->fn = fn;
    f->cfg = *cfg;
    f->name = dup_opt(name && *name ? name : "forward");
    f->cfg.cache_dir = dup_opt(cfg->cache_dir);
    f->cfg.dump_dir = dup_opt(cfg->dump_dir);
    f->backend = tgc_backend_for(cfg);
    if (!f->name || (cfg->cache_dir && !f->cfg.cache_dir) || (cfg->dump_dir && !f->cfg.dump_dir)) {
        free(f->name);
        free((char *)f->cfg.cache_dir);
        free((char *)f->cfg.dump_dir);
        free(f);
        tgc_set_error(TGC_ERR_OOM, "tgc_compile: out of memory");
        return NULL;
    }
    /* directories that do not exist yet are made now, or named with the reason once */
    tgc_dir_ensure(&f->cfg, f->cfg.dump_dir, "cfg.dump_dir (TGC_DUMP_DIR)",
                   "no IR dumps are written");
    tgc_dir_ensure(&f->cfg, f->cfg.cache_dir, "cfg.cache_dir (TGC_CACHE_DIR)",
                   "the compile cache on disk is off");
    atomic_init(&f->signature, -1);
    /* default mutexes: initialization cannot fail on the platforms we build for */
    pthread_mutex_init(&f->lock, NULL);
    pthread_mutex_init(&f->compile_lock, NULL);
    return f;
}

void tgc_fn_free(tgc_fn *f)
{
    if (!f)
        return;
    while (f->variants) {
        tgc_variant *v = f->variants;
        f->variants = v->next;
        tgc_variant_free(f, v);
        atomic_fetch_sub(&process_variants, 1);
    }
    pthread_mutex_destroy(&f->lock);
    pthread_mutex_destroy(&f->compile_lock);
    free(f->seen);
    free(f->seen_ndim);
    free(f->dynamic_dims);
    free(f->name);
    free((char *)f->cfg.cache_dir);
    free((char *)f->cfg.dump_dir);
    free(f);
}

static tgc_status check_call(const tgc_fn *f, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                             int n_out)
{
    if (!f)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_call: fn is NULL");
    if (n_in < 0 || n_out < 0 || (n_in > 0 && !in) || (n_out > 0 && !out))
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_call: '%s' needs in[] with n_in >= 0 and out[] with n_out >= 0 "
                             "(got n_in %d, n_out %d)",
                             f->name, n_in, n_out);
    for (int i = 0; i < n_out; i++)
        out[i] = NULL;
    for (int i = 0; i < n_in; i++) {
        if (!in[i])
            return tgc_keep_error(TGC_ERR_INVALID_ARG, "tgc_call: '%s' in[%d] is NULL", f->name, i);
        if (in[i]->trace && in[i]->trace != tgc_trace_current())
            return tgc_set_error(TGC_ERR_INVALID_ARG,
                                 "tgc_call: '%s' in[%d] is a traced tensor that escaped its trace",
                                 f->name, i);
        if (!tgc_device_equal(in[i]->device, in[0]->device)) { /* one device per call */
            char a[48], b[48]; /* formatted only on failure: this is every call's path */
            return tgc_set_error(TGC_ERR_DEVICE,
                                 "tgc_call: '%s' in[%d] is on %s but in[0] is on %s; a call "
                                 "runs on one device: move them with tgc_to",
                                 f->name, i, tgc_format_device(in[i]->device, a, sizeof a),
                                 tgc_format_device(in[0]->device, b, sizeof b));
        }
    }
    return TGC_OK;
}

/* A fresh handle on out, for the caller's scope: the function's own handle may be one of
 * its inputs, a module tensor or a tensor of the frame, none of which the caller owns. */
static tgc_tensor *fresh_handle(tgc_tensor *t)
{
    if (t->trace)
        return tgc_trace_tensor(t->trace, t->value);
    return tgc_tensor_view(t, t->shape, t->strides, t->ndim, t->offset);
}

/* Runs the function in a scope frame (a barrier it cannot pop or keep past, see
 * tensor/scope.h) and hands fresh output handles to the caller's innermost scope: eagerly,
 * or inlined into the caller's trace when called while tracing. */
static tgc_status call_in_frame(const tgc_fn *f, tgc_module *self, tgc_tensor *const *in, int n_in,
                                tgc_tensor **out, int n_out)
{
    tgc_scope *frame = tgc_scope_frame_push();
    if (!frame)
        return tgc_last_status();
    /* eager ops compute as the function's variants do (its precision, its stream) */
    tgc_eager_opts prev = tgc_eager_opts_push(&f->cfg);
    tgc_status st = f->fn(self, in, n_in, out, n_out);
    tgc_eager_opts_pop(prev);
    int n_given = 0;
    for (int i = 0; i < n_out && st == TGC_OK; i++, n_given++) {
        if (!out[i]) {
            st = tgc_keep_error(TGC_ERR_INVALID_ARG,
                                "tgc_call: '%s' returned TGC_OK but left out[%d] NULL", f->name, i);
            break;
        }
        out[i] = fresh_handle(out[i]);
        if (!out[i]) {
            st = tgc_keep_error(TGC_ERR_OOM, "tgc_call: out of memory");
            break;
        }
        tgc_scope_frame_handoff(frame, out[i]);
    }
    if (st != TGC_OK)
        for (int i = 0; i < n_out; i++) {
            if (i < n_given)
                tgc_tensor_free(out[i]);
            out[i] = NULL;
        }
    tgc_status fst = tgc_scope_frame_pop(frame, f->name, st);
    if (st == TGC_OK && fst != TGC_OK)
        for (int i = 0; i < n_out; i++) {
            tgc_tensor_free(out[i]);
            out[i] = NULL;
        }
    return fst;
}

static tgc_status run_variant(tgc_fn *f, const tgc_variant *v, tgc_module *self,
                              tgc_tensor *const *in, int n_in, tgc_tensor **out, int n_out,
                              const int64_t *symvals)
{
    if (v->is_eager)
        return call_in_frame(f, self, in, n_in, out, n_out);
    (void)n_out;
    tgc_exec_args x = {in, n_in, NULL, 0, v->bound, v->guards.n_captured, symvals};
    if (self)
        x.params = tgc_module_flat(self, &x.n_params);
    for (int i = 0; i < v->n_grad_params; i++) { /* gradients the step accumulates into */
        int p = v->grad_params[i];
        tgc_status st = p < x.n_params ? tgc_autograd_ensure_grad(x.params[p]) : TGC_ERR_INTERNAL;
        if (st != TGC_OK)
            return st;
    }
    return tgc_backend_run(v->backend, v->artifact, v->graph, &x, out);
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e9 * (double)ts.tv_sec + (double)ts.tv_nsec;
}

/* The cache lookup (under the lock): the matching variant moved to the front, or NULL. */
static tgc_variant *lookup(tgc_fn *f, tgc_module *self, tgc_tensor *const *in, int n_in, int n_out,
                           int64_t *symvals)
{
    /* Timing every call would cost as much as the check; sample the first hits, then 1 in 16. */
    int sample = f->guard_samples < 16 || (f->stats.calls & 15) == 0;
    double t0 = sample ? now_ns() : 0;
    tgc_variant *prev = NULL, *v = f->variants;
    for (; v; prev = v, v = v->next)
        if ((v->is_eager || v->graph->n_outputs == n_out) &&
            tgc_guards_check(&v->guards, self, in, n_in, symvals))
            break;
    if (v && prev) { /* most recently hit first */
        prev->next = v->next;
        v->next = f->variants;
        f->variants = v;
    }
    if (sample && v) {
        f->guard_ns_sum += now_ns() - t0;
        f->guard_samples++;
    }
    return v;
}

/* Why the most recent variant does not take this call (computed on a miss only). */
static tgc_miss_kind miss_reason(const tgc_fn *f, tgc_module *self, tgc_tensor *const *in, int n_in,
                                 int n_out, char *buf, size_t n)
{
    const tgc_variant *v = f->variants;
    if (!v) {
        snprintf(buf, n, "first call");
        return TGC_MISS_FIRST_CALL;
    }
    if (!v->is_eager && v->graph->n_outputs != n_out) {
        snprintf(buf, n, "number of outputs changed: expected %d, got %d", v->graph->n_outputs,
                 n_out);
        return TGC_MISS_INPUT_COUNT;
    }
    return tgc_guards_explain(&v->guards, self, in, n_in, buf, n);
}

/* What a user can do about misses of this kind, besides raising the limit. */
static const char *limit_advice(tgc_miss_kind k)
{
    switch (k) {
    case TGC_MISS_SIZE: return "mark dims dynamic (tgc_mark_dynamic or cfg.dynamic)";
    case TGC_MISS_SIZE_READ: return TGC_SIZE_READ_ADVICE;
    case TGC_MISS_LAYOUT:
        return "keep each input's dtype, rank, device and layout stable (tgc_contiguous makes "
               "strided inputs contiguous)";
    case TGC_MISS_INPUT_COUNT: return "call the function with a fixed number of inputs and outputs";
    case TGC_MISS_TRAINING:
        return "compile one tgc_fn for training and one for eval instead of switching "
               "tgc_module_train on one";
    case TGC_MISS_ATTR:
        return "pass a value that changes from call to call as an input tensor instead of a "
               "module attribute";
    case TGC_MISS_STRUCTURE: return "compile one tgc_fn per model structure";
    case TGC_MISS_IDENTITY:
        return "unset cfg.guard_module_identity so that modules of one structure share variants";
    case TGC_MISS_GRAD_MODE: return "compile one tgc_fn per grad mode";
    case TGC_MISS_CAPTURED:
        return "pass the captured tensor as an input instead (a variant keeps the captured "
               "tensor object it traced)";
    case TGC_MISS_VALUE:
        return "pass the value as a tensor the model computes with instead of reading it with "
               "tgc_item_* while tracing";
    case TGC_MISS_FIRST_CALL:
    case TGC_MISS_NONE: break;
    }
    return "free tgc_fns that are no longer used";
}

/* At a cache limit: warn once and run eagerly, or fail in ERROR mode. */
static tgc_status limit_reached(tgc_fn *f, const char *which, int limit, const char *reason,
                                tgc_miss_kind kind)
{
    f->stats.cache_limit_hit = 1;
    if (f->cfg.on_cache_limit == TGC_ON_LIMIT_ERROR)
        return tgc_set_error(TGC_ERR_CACHE_LIMIT,
                             "tgc_call: '%s' hit %s (%d); last reason: %s. Raise cfg.%s, %s, or "
                             "see tgc_fn_explain().",
                             f->name, which, limit, reason, which, limit_advice(kind));
    if (!f->limit_warned) {
        f->limit_warned = 1;
        tgc_log_msg(&f->cfg, 0,
                    "tgc: '%s' hit %s (%d); last reason: %s; running eagerly from now on. Raise "
                    "cfg.%s, %s, or see tgc_fn_explain().",
                    f->name, which, limit, reason, which, limit_advice(kind));
    }
    f->stats.eager_fallbacks++;
    return TGC_OK;
}

/* Links a freshly compiled variant into the cache and counts it (under f->lock). */
static void publish_variant(tgc_fn *f, tgc_variant *v, const char *reason)
{
    f->n_variants++;
    snprintf(v->reason, sizeof v->reason, "%s", reason);
    v->next = f->variants;
    f->variants = v;
    atomic_fetch_add(&process_variants, 1);
    /* a trace that broke compiled nothing: it counts as a graph break, not a compile */
    f->stats.compiles += !v->is_eager;
    f->stats.recompiles += !v->is_eager && v->id > 1;
    f->stats.compile_seconds += v->compile_seconds;
    f->stats.variants = f->n_variants;
    f->stats.kernels_last_variant =
        v->is_eager ? 0 : tgc_backend_kernel_count(v->backend, v->artifact);
    f->stats.graph_breaks += v->is_eager;
}

/* Logs what a compile made (no lock needed: v is not shared yet or never changes). */
static void log_variant(const tgc_fn *f, const tgc_variant *v)
{
    if (v->is_eager) {
        tgc_log_msg(&f->cfg, TGC_LOG_RECOMPILES,
                    "tgc: graph break in '%s': %s; calls like this one run eagerly (set "
                    "cfg.fullgraph to make this an error)",
                    f->name, v->break_reason);
    } else {
        tgc_log_msg(&f->cfg, TGC_LOG_PERF, "tgc: compiled '%s' variant %d in %.2f ms (%d nodes)",
                    f->name, v->id, 1e3 * v->compile_seconds, v->graph->n_nodes);
    }
    if (f->cfg.log & TGC_LOG_GUARDS) {
        tgc_strbuf sb = {0};
        tgc_guards_describe(&v->guards, &sb);
        char *text = tgc_sb_take(&sb);
        if (text)
            tgc_log_msg(&f->cfg, TGC_LOG_GUARDS, "tgc: guards of '%s' variant %d:\n%s", f->name,
                        v->id, text);
        free(text);
    }
}

/* A call no variant took. Called with f->compile_lock held and f->lock not held: looks again
 * (a compile that finished meanwhile may take it), then decides between the cache limits
 * and a compile, which runs without f->lock so that hits on other variants go on. */
static tgc_status compile_miss(tgc_fn *f, tgc_module *self, tgc_tensor *const *in, int n_in,
                               int n_out, int64_t *symvals, tgc_variant **hit, int *eager)
{
    char reason[256];
    pthread_mutex_lock(&f->lock);
    tgc_variant *v = lookup(f, self, in, n_in, n_out, symvals);
    if (v) {
        f->stats.cache_hits++;
        v->hits++;
        pthread_mutex_unlock(&f->lock);
        *hit = v;
        return TGC_OK;
    }
    tgc_miss_kind kind = miss_reason(f, self, in, n_in, n_out, reason, sizeof reason);
    tgc_status st = TGC_OK;
    if (f->variants)
        snprintf(f->stats.last_recompile_reason, sizeof f->stats.last_recompile_reason, "%s",
                 reason);
    if (f->variants && f->n_variants >= f->cfg.cache_size_limit) {
        *eager = 1;
        st = limit_reached(f, "cache_size_limit", f->cfg.cache_size_limit, reason, kind);
    } else if (atomic_load(&process_variants) >= f->cfg.accumulated_cache_size_limit) {
        *eager = 1;
        st = limit_reached(f, "accumulated_cache_size_limit", f->cfg.accumulated_cache_size_limit,
                           reason, kind);
    }
    int id = f->n_variants + 1, first = !f->variants;
    pthread_mutex_unlock(&f->lock);
    if (*eager || st != TGC_OK)
        return st;
    if (!first)
        tgc_log_msg(&f->cfg, TGC_LOG_RECOMPILES, "tgc: recompiling '%s' (variant %d of %d): %s",
                    f->name, id, f->cfg.cache_size_limit, reason);
    st = tgc_variant_compile(f, id, self, in, n_in, n_out, &v);
    if (st != TGC_OK) {
        if (st == TGC_ERR_GRAPH_BREAK) { /* cfg.fullgraph: the call fails, the break counts */
            pthread_mutex_lock(&f->lock);
            f->stats.graph_breaks++;
            pthread_mutex_unlock(&f->lock);
        }
        return st;
    }
    log_variant(f, v);
    if (!v->is_eager && !tgc_guards_check(&v->guards, self, in, n_in, symvals)) {
        tgc_variant_free(f, v);
        return tgc_set_error(TGC_ERR_INTERNAL,
                             "tgc_call: '%s' variant %d does not accept the inputs it was "
                             "traced with",
                             f->name, id);
    }
    pthread_mutex_lock(&f->lock);
    publish_variant(f, v, reason);
    pthread_mutex_unlock(&f->lock);
    *hit = v;
    return TGC_OK;
}

/* A tgc_fn has one signature: the n_in and n_out of its first successful call (the first
 * trace's, or the first eager call's with backend EAGER). Anything else is a mistake of the
 * caller that would otherwise pass silently (extra inputs) or fail inside an op. */
static tgc_status check_arity(tgc_fn *f, int n_in, int n_out)
{
    int64_t sig = atomic_load_explicit(&f->signature, memory_order_relaxed);
    int ai = (int)(sig >> 32), ao = (int)(sig & 0xffffffff);
    if (sig < 0 || (ai == n_in && ao == n_out))
        return TGC_OK;
    const char *how = f->cfg.backend == TGC_BACKEND_EAGER ? "first called" : "traced";
    int in_bad = ai != n_in;
    int want = in_bad ? ai : ao, got = in_bad ? n_in : n_out;
    return tgc_set_error(TGC_ERR_INVALID_ARG,
                         "tgc_call: '%s' was %s with %d %s%s, called with %d (n_%s); a tgc_fn "
                         "takes the same number of inputs and outputs on every call: compile "
                         "one tgc_fn per signature",
                         f->name, how, want, in_bad ? "input" : "output", want == 1 ? "" : "s", got,
                         in_bad ? "in" : "out");
}

static tgc_status call_checked(tgc_fn *f, tgc_module *self, tgc_tensor *const *in, int n_in,
                               tgc_tensor **out, int n_out)
{
    tgc_status st = TGC_OK;
    if (tgc_trace_current()) /* called from a traced function: inline into that trace */
        return call_in_frame(f, self, in, n_in, out, n_out);
    if (f->cfg.backend == TGC_BACKEND_EAGER) {
        pthread_mutex_lock(&f->lock);
        f->stats.calls++;
        pthread_mutex_unlock(&f->lock);
        return call_in_frame(f, self, in, n_in, out, n_out);
    }
    int64_t symvals[TGC_GUARD_MAX_SYMS];
    int eager = 0;
    pthread_mutex_lock(&f->lock);
    f->stats.calls++;
    tgc_variant *v = lookup(f, self, in, n_in, n_out, symvals);
    if (v) {
        f->stats.cache_hits++;
        f->stats.eager_fallbacks += v->is_eager;
        v->hits++;
    }
    pthread_mutex_unlock(&f->lock);
    if (!v) { /* compile_miss may find one after all; the eager fallback is counted below */
        pthread_mutex_lock(&f->compile_lock);
        st = compile_miss(f, self, in, n_in, n_out, symvals, &v, &eager);
        pthread_mutex_unlock(&f->compile_lock);
        if (st == TGC_OK && v && v->is_eager) {
            pthread_mutex_lock(&f->lock);
            f->stats.eager_fallbacks++;
            pthread_mutex_unlock(&f->lock);
        }
    }
    if (st != TGC_OK)
        return st;
    if (eager)
        return call_in_frame(f, self, in, n_in, out, n_out);
    return run_variant(f, v, self, in, n_in, out, n_out, symvals);
}

tgc_status tgc_call(tgc_fn *f, tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                    int n_out)
{
    tgc_status st = check_call(f, in, n_in, out, n_out);
    if (st == TGC_OK)
        st = check_arity(f, n_in, n_out);
    if (st == TGC_OK)
        st = call_checked(f, self, in, n_in, out, n_out);
    int64_t unset = -1; /* n_in, n_out >= 0 (check_call): the packed value is never -1 */
    if (st == TGC_OK && atomic_load_explicit(&f->signature, memory_order_relaxed) < 0)
        atomic_compare_exchange_strong(&f->signature, &unset, (int64_t)n_in << 32 | n_out);
    return st;
}

tgc_status tgc_fn_stats_sized(const tgc_fn *f, tgc_stats *user, size_t out_size)
{
    if (!f || !user)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_fn_stats: %s is NULL", f ? "out" : "fn");
    tgc_stats full, *out = &full; /* copied out as far as the caller's struct goes */
    tgc_fn *m = (tgc_fn *)f;      /* the lock guards the counters, not the object's meaning */
    pthread_mutex_lock(&m->lock);
    *out = f->stats;
    out->variants = f->n_variants;
    out->guard_ns_per_call = f->guard_samples ? f->guard_ns_sum / (double)f->guard_samples : 0;
    /* the backend the most recently used compiled variant runs on (a CUDA variant of an AUTO
     * function reports "cuda"), else the one the config resolved to */
    const tgc_variant *mru = f->variants && !f->variants->is_eager ? f->variants : NULL;
    snprintf(out->backend, sizeof out->backend, "%s",
             f->cfg.backend == TGC_BACKEND_EAGER ? tgc_backend_kind_name(TGC_BACKEND_EAGER)
             : mru && mru->backend               ? mru->backend->name
                                                 : f->backend->name);
    pthread_mutex_unlock(&m->lock);
    return tgc_struct_write("tgc_fn_stats", "out_size", user, out_size, &full, sizeof full,
                            TGC_FIELD_END(tgc_stats, calls));
}
