/* What the backends share: which one a config gets in this build, and input binding. */
#include "backend/backend.h"
#include "support/error.h"
#ifdef TGC_HAVE_LLVM
#include "backend/llvm/llvm_backend.h"
#include "backend/llvm/llvm_jit.h"
#endif

const tgc_backend *tgc_backend_for(const tgc_config *cfg)
{
    switch (cfg->backend) {
    case TGC_BACKEND_INTERP:
    case TGC_BACKEND_EAGER: return tgc_backend_interp();
    case TGC_BACKEND_CUDA:
        tgc_set_error(TGC_ERR_UNSUPPORTED, "tgc_compile: the CUDA backend is not available in "
                                           "this build; use TGC_BACKEND_AUTO or TGC_BACKEND_LLVM");
        return NULL;
    case TGC_BACKEND_LLVM:
    case TGC_BACKEND_AUTO:
#ifdef TGC_HAVE_LLVM
        if (tgc_llvm_host())
            return tgc_backend_llvm();
        if (cfg->backend == TGC_BACKEND_AUTO) {
            tgc_clear_error();
            return tgc_backend_interp();
        }
        return NULL; /* tgc_llvm_host set the reason */
#else
        if (cfg->backend == TGC_BACKEND_AUTO)
            return tgc_backend_interp();
        tgc_set_error(TGC_ERR_UNSUPPORTED, "tgc_compile: this build has no LLVM backend "
                                           "(configured with TGC_WITH_LLVM=OFF); use "
                                           "TGC_BACKEND_AUTO or TGC_BACKEND_INTERP");
        return NULL;
#endif
    }
    tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_compile: unknown backend %d", (int)cfg->backend);
    return NULL;
}

tgc_tensor *tgc_exec_input(const tgc_graph *g, const tgc_node *nd, const tgc_exec_args *x)
{
    int64_t idx = nd->attrs.i[1];
    switch ((tgc_bind_kind)nd->attrs.i[0]) {
    case TGC_BIND_ARG: return idx < x->n_args ? x->args[idx] : NULL;
    case TGC_BIND_PARAM: return idx < x->n_params ? x->params[idx] : NULL;
    case TGC_BIND_CAPTURED:
    case TGC_BIND_CONST: return idx < x->n_bound ? x->bound[idx] : NULL;
    case TGC_BIND_FOLDED: return idx >= 0 && idx < g->n_consts ? g->consts[idx] : NULL;
    }
    return NULL;
}
