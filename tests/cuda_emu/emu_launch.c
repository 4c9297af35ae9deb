/* The C half of the CPU emulation (see emu_kernels.cpp): tgc_ops_launch / _sync / _capturing
 * in place of cuda_ops_launch.c's, and a fake CUDA allocator of host memory. */
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_ops_impl.h"
#include "runtime/alloc.h"
#include "support/error.h"

int tgc_emu_launch(const char *name, int shape, long long work, void **p);

tgc_status tgc_ops_launch(const ops_ctx *c, ops_kernel k, ops_shape shape, int64_t work, int block,
                          void **params)
{
    (void)c;
    (void)block; /* the emulation picks its own small blocks */
    if (work <= 0)
        return TGC_OK;
    int n;
    const char *const *names = tgc_cuda_ops_kernel_names(&n);
    if ((int)k < 0 || (int)k >= n || !tgc_emu_launch(names[k], (int)shape, work, params))
        return tgc_set_error(TGC_ERR_INTERNAL, "emu: no kernel %d", (int)k);
    return TGC_OK;
}

tgc_status tgc_ops_sync(const ops_ctx *c)
{
    (void)c;
    return TGC_OK;
}

int tgc_ops_capturing(const ops_ctx *c)
{
    (void)c;
    return 0;
}

static int fk_count(void *ctx)
{
    (void)ctx;
    return 1;
}
static tgc_block fk_alloc(void *ctx, int index, size_t n)
{
    (void)ctx;
    (void)index;
    size_t cap = (n + 63) / 64 * 64 + 64;
    void *p = aligned_alloc(64, cap);
    /* poison: a kernel that forgets to write an element shows it */
    if (p)
        memset(p, 0xA5, cap);
    return (tgc_block){p, p ? cap : 0};
}
static void fk_free(void *ctx, int index, tgc_block b)
{
    (void)ctx;
    (void)index;
    free(b.ptr);
}
static tgc_status fk_copy(void *ctx, void *d, tgc_device dd, const void *s, tgc_device sd, size_t n)
{
    (void)ctx;
    (void)dd;
    (void)sd;
    memcpy(d, s, n);
    return TGC_OK;
}
static tgc_mem_stats fk_stats(void *ctx, int index)
{
    (void)ctx;
    (void)index;
    return (tgc_mem_stats){0, 0, 0};
}
static void fk_empty(void *ctx)
{
    (void)ctx;
}

void tgc_ops_emu_init(void)
{
    static tgc_allocator a;
    a.name = "cuda";
    a.device_count = fk_count;
    a.alloc = fk_alloc;
    a.free = fk_free;
    a.copy = fk_copy;
    a.stats = fk_stats;
    a.empty_cache = fk_empty;
    tgc_allocator_register(TGC_DEVICE_CUDA, &a);
}
