// The emulator's runtime (see emu.h): blocks one after another, each as blockDim.x pthreads.
#include "emu.h"

thread_local tgc_dim3 threadIdx;
tgc_dim3 blockIdx, gridDim, blockDim;
char *tgc_emu_smem;
tgc_emu_xchg tgc_emu_x[32];
static pthread_barrier_t block_bar, warp_bar[32];

void tgc_emu_sync()
{
    pthread_barrier_wait(&block_bar);
}
void tgc_emu_warp_sync()
{
    pthread_barrier_wait(&warp_bar[threadIdx.x / 32]);
}

struct targ {
    unsigned tid;
    tgc_emu_body body;
    void *ctx;
};
static void *trampoline(void *p)
{
    targ *a = (targ *)p;
    threadIdx = {a->tid, 0, 0};
    a->body(a->ctx);
    return nullptr;
}

void tgc_emu_launch(unsigned grid[3], unsigned nt, size_t smem, tgc_emu_body body, void *ctx)
{
    gridDim = {grid[0], grid[1], grid[2]};
    blockDim = {nt, 1, 1};
    tgc_emu_smem = (char *)aligned_alloc(128, (smem + 127) / 128 * 128 + 128);
    pthread_barrier_init(&block_bar, nullptr, nt);
    for (unsigned w = 0; w < nt / 32; w++)
        pthread_barrier_init(&warp_bar[w], nullptr, 32);
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 1 << 20);
    pthread_t *th = new pthread_t[nt];
    targ *args = new targ[nt];
    for (unsigned z = 0; z < grid[2]; z++)
        for (unsigned y = 0; y < grid[1]; y++)
            for (unsigned x = 0; x < grid[0]; x++) {
                blockIdx = {x, y, z};
                memset(tgc_emu_smem, 0xff, smem); // garbage, as on a GPU (NaN floats)
                for (unsigned t = 0; t < nt; t++) {
                    args[t] = {t, body, ctx};
                    pthread_create(&th[t], &at, trampoline, &args[t]);
                }
                for (unsigned t = 0; t < nt; t++)
                    pthread_join(th[t], nullptr);
            }
    delete[] th;
    delete[] args;
    free(tgc_emu_smem);
}
