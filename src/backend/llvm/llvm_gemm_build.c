/* One-call GEMM / conv kernel builder (see llvm_gemm_build.h). */
#include "backend/llvm/llvm_gemm.h"
#include "backend/llvm/llvm_gemm_build.h"
#include "support/error.h"

tgc_status tgc_llvm_gemm_build(int kind, const tgc_conv_params *static_params,
                               const tgc_gemm_config *cfg, tgc_gemm_kernel *k, void **code)
{
    if (!k || !code)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "tgc_llvm_gemm_build: NULL kernel or code");
    *code = NULL;
    tgc_llvm_unit u;
    tgc_status st = tgc_llvm_unit_begin(&u, "tgc_gemm");
    if (st != TGC_OK)
        return st;
    if (kind == TGC_GEMM_KIND_GEMM)
        st = tgc_llvm_gemm_emit_cfg(&u, "gemm", NULL, cfg, k);
    else if (kind == TGC_GEMM_KIND_CONV)
        st = tgc_llvm_conv_emit_cfg(&u, "conv", static_params, NULL, cfg, k);
    else
        st = tgc_set_error(TGC_ERR_INVALID_ARG,
                           "tgc_llvm_gemm_build: kind %d is neither "
                           "TGC_GEMM_KIND_GEMM nor TGC_GEMM_KIND_CONV",
                           kind);
    if (st != TGC_OK) {
        tgc_llvm_unit_abort(&u);
        return st;
    }
    tgc_llvm_code *c = NULL;
    st = tgc_llvm_unit_finish(&u, &c, NULL, NULL);
    if (st != TGC_OK)
        return st;
    st = tgc_gemm_kernel_bind(k, c);
    if (st != TGC_OK) {
        tgc_llvm_code_free(c);
        return st;
    }
    *code = c;
    return TGC_OK;
}

void tgc_llvm_gemm_build_free(void *code)
{
    tgc_llvm_code_free(code);
}
