/* The CUDA backend: being assembled (issue 9); until its parts land it reports itself
 * unavailable. */
#include "backend/cuda/cuda_backend.h"

#include "support/error.h"

const tgc_backend *tgc_backend_cuda(void)
{
    tgc_set_error(TGC_ERR_DEVICE, "the CUDA backend is not available in this build yet");
    return NULL;
}
