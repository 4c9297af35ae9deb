// The emulator's runtime (see emu.h): blocks one after another, each as blockDim.x pthreads;
// between two __syncthreads the warps run one at a time (ascending or descending order by
// barrier interval), cp.async lands at the issuing thread's wait_group.
#include "emu.h"

#include <vector>

thread_local tgc_dim3 threadIdx;
tgc_dim3 blockIdx, gridDim, blockDim;
char *tgc_emu_smem;
tgc_emu_xchg tgc_emu_x[32];
static pthread_barrier_t warp_bar[32];

// ---- warp-serial scheduling ----
// The running warp is order(slot) for the current barrier interval `epoch`; a warp ends its
// part of the interval when each of its lanes is at the barrier or has returned. When the
// last warp ends it, the interval is over: epoch + 1, slot 0.
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static unsigned nwarps, slot, epoch, flip;
static unsigned at_bar[32], gone[32];

static unsigned warp_of_slot(unsigned s)
{
    return ((epoch + flip) & 1) ? nwarps - 1 - s : s;
}

// called with mu held: move past the warps that are done with this interval
static void advance()
{
    for (;;) {
        while (slot < nwarps) {
            unsigned w = warp_of_slot(slot);
            if (at_bar[w] + gone[w] < 32)
                return;
            slot++;
        }
        unsigned live = 0;
        for (unsigned w = 0; w < nwarps; w++)
            live += 32 - gone[w];
        if (!live)
            return;
        epoch++;
        slot = 0;
        memset(at_bar, 0, sizeof at_bar);
        pthread_cond_broadcast(&cv);
    }
}

static void wait_turn(unsigned my_epoch)
{
    unsigned w = threadIdx.x / 32;
    while (epoch == my_epoch || slot >= nwarps || warp_of_slot(slot) != w)
        pthread_cond_wait(&cv, &mu);
}

void tgc_emu_sync()
{
    unsigned w = threadIdx.x / 32;
    pthread_mutex_lock(&mu);
    unsigned e = epoch;
    at_bar[w]++;
    unsigned s0 = slot;
    advance();
    if (slot != s0)
        pthread_cond_broadcast(&cv);
    wait_turn(e);
    pthread_mutex_unlock(&mu);
}
// a wait on an incomplete mbarrier: the lane is at a barrier of the interval, so every other
// warp runs (to its next wait or barrier) before this one looks again
static std::atomic<unsigned long> idle_yields; // yields since an mbarrier last changed
void tgc_emu_yield()
{
    if (++idle_yields > 50u * 1000u * 1000u) {
        fprintf(stderr, "emu: deadlock: every warp waits on an mbarrier nothing arrives at\n");
        abort();
    }
    tgc_emu_sync();
}

// ---- mbarriers, by address ----
struct mbar_state {
    unsigned bar;
    int expected, pending;
    long long tx;
    unsigned phase; // completed phases
};
static std::vector<mbar_state> mbars;
static pthread_mutex_t mbar_mu = PTHREAD_MUTEX_INITIALIZER;
static mbar_state &mbar_of(unsigned bar) // mbar_mu held
{
    for (auto &m : mbars)
        if (m.bar == bar)
            return m;
    fprintf(stderr, "emu: mbarrier %u used before mbarrier.init\n", bar);
    abort();
}
static void mbar_check(mbar_state &m)
{
    if (m.pending < 0 || m.tx < 0) {
        fprintf(stderr, "emu: mbarrier %u: %d arrivals, %lld bytes too many\n", m.bar, -m.pending,
                -m.tx);
        abort();
    }
    if (m.pending == 0 && m.tx == 0) {
        m.phase++;
        m.pending = m.expected;
    }
    idle_yields = 0;
}
void tgc_emu_mbar_init(unsigned bar, unsigned count)
{
    pthread_mutex_lock(&mbar_mu);
    for (auto &m : mbars)
        if (m.bar == bar) {
            m = {bar, (int)count, (int)count, 0, 0};
            pthread_mutex_unlock(&mbar_mu);
            return;
        }
    mbars.push_back({bar, (int)count, (int)count, 0, 0});
    pthread_mutex_unlock(&mbar_mu);
}
void tgc_emu_mbar_arrive(unsigned bar, long long tx)
{
    pthread_mutex_lock(&mbar_mu);
    mbar_state &m = mbar_of(bar);
    m.tx += tx;
    m.pending--;
    mbar_check(m);
    pthread_mutex_unlock(&mbar_mu);
}
void tgc_emu_mbar_complete(unsigned bar, long long bytes)
{
    pthread_mutex_lock(&mbar_mu);
    mbar_state &m = mbar_of(bar);
    m.tx -= bytes;
    mbar_check(m);
    pthread_mutex_unlock(&mbar_mu);
}
// the phase of parity `parity` has completed: the phase in progress has the other parity
bool tgc_emu_mbar_done(unsigned bar, unsigned parity)
{
    pthread_mutex_lock(&mbar_mu);
    bool done = (mbar_of(bar).phase & 1u) != (parity & 1u);
    pthread_mutex_unlock(&mbar_mu);
    return done;
}

void tgc_emu_warp_sync()
{
    pthread_barrier_wait(&warp_bar[threadIdx.x / 32]);
}

// ---- cp.async, deferred ----
struct cp_pending {
    char *dst;
    unsigned char data[16];
    int n;
    long group;
};
static thread_local std::vector<cp_pending> cp_q;
static thread_local long cp_group; // the open group's number

void tgc_emu_cp_async(void *dst, const void *src, int cp_size, int bytes)
{
    cp_pending p;
    p.dst = (char *)dst;
    p.n = cp_size;
    p.group = cp_group;
    memset(p.data, 0, sizeof p.data);
    if (bytes)
        memcpy(p.data, src, (size_t)bytes);
    memset(dst, 0xff, (size_t)cp_size); // not there yet
    cp_q.push_back(p);
}
void tgc_emu_cp_commit()
{
    cp_group++;
}
// retire every committed group but the newest n
void tgc_emu_cp_wait(int n)
{
    long last = cp_group - 1 - n; // groups 0 .. cp_group - 1 are committed
    size_t keep = 0;
    for (size_t i = 0; i < cp_q.size(); i++) {
        if (cp_q[i].group <= last)
            memcpy(cp_q[i].dst, cp_q[i].data, (size_t)cp_q[i].n);
        else
            cp_q[keep++] = cp_q[i];
    }
    cp_q.resize(keep);
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
    cp_q.clear();
    cp_group = 0;
    pthread_mutex_lock(&mu);
    wait_turn((unsigned)-1);
    pthread_mutex_unlock(&mu);
    a->body(a->ctx);
    if (!cp_q.empty()) {
        fprintf(stderr, "emu: thread %u returned with %zu cp.async copies never waited for\n",
                a->tid, cp_q.size());
        abort();
    }
    pthread_mutex_lock(&mu);
    gone[a->tid / 32]++;
    unsigned s0 = slot, e0 = epoch;
    advance();
    if (slot != s0 || epoch != e0)
        pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    return nullptr;
}

void tgc_emu_launch(unsigned grid[3], unsigned nt, size_t smem, tgc_emu_body body, void *ctx)
{
    if (nt % 32 || nt / 32 > 32) {
        fprintf(stderr, "emu: %u threads per block (whole warps, at most 1024)\n", nt);
        abort();
    }
    const char *fl = getenv("TGC_EMU_FLIP");
    flip = fl && *fl == '1';
    gridDim = {grid[0], grid[1], grid[2]};
    blockDim = {nt, 1, 1};
    nwarps = nt / 32;
    tgc_emu_smem = (char *)aligned_alloc(1024, (smem + 1023) / 1024 * 1024 + 1024);
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
                epoch = slot = 0;
                memset(at_bar, 0, sizeof at_bar);
                memset(gone, 0, sizeof gone);
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
