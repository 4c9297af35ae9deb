/* The conv2d backward's JIT kernels, built once per process (see llvm_conv_grad.h). */
#include <pthread.h>
#include <stdio.h>

#include "backend/llvm/llvm_conv_grad.h"
#include "backend/llvm/llvm_gemm.h"
#include "support/error.h"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static tgc_gemm_kernel g_gemm, g_conv;
static tgc_status g_status = TGC_ERR_COMPILE;
/* kept for the life of the process; volatile so the store that keeps it reachable (for
 * LeakSanitizer) is not dropped as dead */
static tgc_llvm_code *volatile g_code;
static char g_msg[256];

static void build(void)
{
    tgc_llvm_unit u;
    tgc_status st = tgc_llvm_unit_begin(&u, "tgc_conv_grad");
    if (st == TGC_OK)
        st = tgc_llvm_gemm_emit(&u, "cg_gemm", NULL, &g_gemm);
    if (st == TGC_OK)
        st = tgc_llvm_conv_emit(&u, "cg_conv", NULL, NULL, &g_conv);
    tgc_llvm_code *code = NULL;
    if (st == TGC_OK)
        st = tgc_llvm_unit_finish(&u, &code, NULL, NULL);
    else
        tgc_llvm_unit_abort(&u);
    g_code = code;
    if (st == TGC_OK)
        st = tgc_gemm_kernel_bind(&g_gemm, code);
    if (st == TGC_OK)
        st = tgc_gemm_kernel_bind(&g_conv, code);
    g_status = st;
    if (st != TGC_OK)
        snprintf(g_msg, sizeof g_msg, "%s", tgc_last_error());
}

tgc_status tgc_llvm_conv_grad_kernels(const tgc_gemm_kernel **gemm, const tgc_gemm_kernel **conv)
{
    pthread_once(&g_once, build);
    if (g_status != TGC_OK)
        return tgc_set_error(g_status, "tgc llvm: cannot build the conv backward kernels: %s",
                             g_msg);
    *gemm = &g_gemm;
    *conv = &g_conv;
    return TGC_OK;
}
