/* The driver functions of runtime/cuda.h's table that the CUDA runtime layer itself does not
 * call, for the libcuda stand-in (libcuda_mock.c): present so the table loads, each
 * answering CUDA_ERROR_NOT_SUPPORTED (801). Declared without <cuda.h> (no prototypes to
 * match: the runtime never calls them on the mock). */
#define NOT_SUPPORTED(name)                                                                        \
    __attribute__((visibility("default"))) int name(void);                                         \
    int name(void)                                                                                 \
    {                                                                                              \
        return 801;                                                                                \
    }

NOT_SUPPORTED(cuMemsetD8Async)
NOT_SUPPORTED(cuMemsetD32Async)
NOT_SUPPORTED(cuStreamWaitEvent)
NOT_SUPPORTED(cuEventQuery)
NOT_SUPPORTED(cuEventElapsedTime_v2)
NOT_SUPPORTED(cuModuleLoadData)
NOT_SUPPORTED(cuModuleUnload)
NOT_SUPPORTED(cuModuleGetFunction)
NOT_SUPPORTED(cuFuncSetAttribute)
NOT_SUPPORTED(cuFuncGetAttribute)
NOT_SUPPORTED(cuLaunchKernel)
NOT_SUPPORTED(cuTensorMapEncodeTiled)
NOT_SUPPORTED(cuOccupancyMaxActiveBlocksPerMultiprocessor)
NOT_SUPPORTED(cuGraphInstantiateWithFlags)
NOT_SUPPORTED(cuGraphLaunch)
NOT_SUPPORTED(cuGraphExecDestroy)
NOT_SUPPORTED(cuGraphUpload)
