// Runs one case written by `bench_cuda_gemm emit DIR` on the CPU emulator and compares every
// output element with a double reference from the template geometry (the same tolerances as
// bench_cuda_gemm). Build: see run.sh (the case file is included through TGC_CASE).
#include "emu.h"
#include TGC_CASE

static uint64_t rng = 88172645463325252ull;
static float frand()
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

struct ctx_t {
    TGC_KB b;
    TGC_KS s;
    void *ws;
#ifdef TGC_TMA
    tgc_tmap ta, tb;
    void *tws; // the TMA entry's split-K workspace
#endif
};
static void body(void *p)
{
    ctx_t *c = (ctx_t *)p;
    TGC_KERNEL(c->b, c->s, TGC_GEOM, c->ws);
}
#ifdef TGC_TMA
static void body_tma(void *p)
{
    ctx_t *c = (ctx_t *)p;
    TGC_KERNEL_TMA(c->b, c->s, TGC_GEOM, c->ta, c->tb, c->tws, TGC_TMA_SPLITS);
}
static tgc_tmap map_of(const ctx_t &c, const long long *d)
{
    tgc_tmap m;
    m.base = (const char *)c.b.p[d[0]] + d[1];
    m.es = d[2];
    for (int i = 0; i < 3; i++)
        m.dims[i] = d[3 + i];
    m.strides[0] = d[6];
    m.strides[1] = d[7];
    m.box[0] = (unsigned)d[8];
    m.box[1] = (unsigned)d[9];
    return m;
}
#endif
static int check(const ctx_t &c, float *const *f, const char *entry, const unsigned *grid,
                 unsigned nt, const void *ws);

int main()
{
    ctx_t c;
    memset(&c, 0, sizeof c);
    float *f[8];
    for (int i = 0; i < TGC_NB; i++) {
        size_t n = (size_t)TGC_NUMEL[i], es = TGC_DT[i] ? 2 : 4;
        void *raw = aligned_alloc(256, (n * es + 255) / 256 * 256 + 256);
        f[i] = (float *)malloc(n * sizeof(float));
        for (size_t j = 0; j < n; j++) {
            float x = i == TGC_OUT ? NAN : frand();
            if (es == 2) {
                unsigned short h = i == TGC_OUT ? 0x7e00 : tgc_f32_bits(x, TGC_DT[i] == 2);
                ((unsigned short *)raw)[j] = h;
                f[i][j] = tgc_bits_f32(h, TGC_DT[i] == 2);
            } else {
                ((float *)raw)[j] = x;
                f[i][j] = x;
            }
        }
        c.b.p[i] = raw;
    }
    c.ws = TGC_WS ? calloc(1, TGC_WS) : nullptr;
    tgc_emu_launch(TGC_GRID, TGC_NT, TGC_SMEM, body, &c);
    int bad = check(c, f, "", TGC_GRID, TGC_NT, c.ws);
#ifdef TGC_TMA
    { // the TMA entry, on an output of NaNs again
        size_t n = (size_t)TGC_NUMEL[TGC_OUT], es = TGC_DT[TGC_OUT] ? 2 : 4;
        memset(c.b.p[TGC_OUT], 0xff, n * es);
        c.ta = map_of(c, TGC_TMAP[0]);
        c.tb = map_of(c, TGC_TMAP[1]);
        unsigned grid[3] = {TGC_TMA_GRID, 1, 1};
        c.tws = TGC_TMA_WS ? calloc(1, TGC_TMA_WS) : nullptr;
        tgc_emu_launch(grid, 384, TGC_TMA_SMEM, body_tma, &c);
        char entry[32];
        snprintf(entry, sizeof entry, " tma%s", TGC_TMA_SPLITS > 1 ? " split-K" : "");
        bad |= check(c, f, entry, grid, 384, c.tws);
    }
#endif
    return bad;
}

static int check(const ctx_t &c, float *const *f, const char *entry, const unsigned *grid,
                 unsigned nt, const void *ws)
{
    if (ws) { // the counters must be back to zero
        for (size_t i = 0; i < 256 / 4; i++)
            if (((const unsigned *)ws)[i]) {
                printf("%s: split-K counter %zu left at %u\n", TGC_NAME, i, ((const unsigned *)ws)[i]);
                return 1;
            }
    }
    const tgc_gemm_geom &G = TGC_GEOM;
    const float *A = f[TGC_A], *B = f[TGC_B];
    if (TGC_MODE == 2 && !*entry) { // bf16x: the reference sees the operands rounded to bf16
        for (int o = 0; o < 2; o++) {
            int i = o ? TGC_B : TGC_A;
            for (long long j = 0; j < TGC_NUMEL[i]; j++)
                f[i][j] = tgc_bits_f32(tgc_bf16_rn(f[i][j]), 1);
        }
    }
    int odt = TGC_DT[TGC_OUT];
    // bf16x: products of bf16 values are exact, so only the fp32 accumulation differs
    double ts = TGC_MODE == 0 ? 1e-5 : TGC_MODE == 1 ? 2e-3 : 1e-5;
    double to = odt == 1 ? 1.0 / 1024 : odt == 2 ? 1.0 / 128 : 0;
    size_t n = (size_t)TGC_NUMEL[TGC_OUT], bad = 0;
    double worst = 0;
    for (size_t idx = 0; idx < n; idx++) {
        double s = 0, as = 0;
        if (TGC_CONV) {
            long long ohw = G.oh * G.ow, img = (long long)idx / (G.co * ohw);
            long long co = ((long long)idx / ohw) % G.co, q = (long long)idx % ohw;
            long long groups = TGC_ATTR[6], cg = G.cc / groups, og = G.co / groups, gi = co / og;
            long long oh = q / G.ow, ow = q % G.ow;
            for (long long ci = 0; ci < cg; ci++)
                for (long long r = 0; r < G.kh; r++)
                    for (long long t = 0; t < G.kw; t++) {
                        long long ih = oh * TGC_ATTR[0] - TGC_ATTR[2] + r * TGC_ATTR[4];
                        long long iw = ow * TGC_ATTR[1] - TGC_ATTR[3] + t * TGC_ATTR[5];
                        if (ih < 0 || ih >= G.ch || iw < 0 || iw >= G.cw)
                            continue;
                        // channels-last (TGC_CL): x NHWC, w OHWI
                        double p = TGC_CL ? (double)A[((img * G.ch + ih) * G.cw + iw) * G.cc + gi * cg + ci] *
                                                (double)B[((co * G.kh + r) * G.kw + t) * cg + ci]
                                          : (double)A[((img * G.cc + gi * cg + ci) * G.ch + ih) * G.cw + iw] *
                                                (double)B[((co * cg + ci) * G.kh + r) * G.kw + t];
                        s += p;
                        as += fabs(p);
                    }
        } else {
            long long b = G.c_bs ? (long long)idx / G.c_bs : 0, rem = (long long)idx - b * G.c_bs;
            long long m = rem / G.c_rs, nn = rem % G.c_rs;
            for (long long k = 0; k < G.K; k++) {
                double p = (double)A[G.a_off + b * G.a_bs + m * G.a_rs + k * G.a_cs] *
                           (double)B[G.b_off + b * G.b_bs + k * G.b_rs + nn * G.b_cs];
                s += p;
                as += fabs(p);
            }
        }
        long long chan = TGC_CONV ? ((long long)idx / (G.oh * G.ow)) % G.co
                                  : (long long)idx % G.c_rs;
        if (TGC_EPI == 1 || TGC_EPI == 2)
            s += f[TGC_BIAS][chan];
        if (TGC_EPI == 2)
            s += f[TGC_RES][idx];
        if (TGC_EPI == 1 || TGC_EPI == 2)
            s = s < 0 ? 0 : s;
        if (TGC_EPI == 3)
            s *= 0.125;
        double mag = fabs(s);
        if (TGC_EPI && to > 0) // every 16-bit epilogue op rounds
            mag = 2 * (as + (TGC_EPI == 1 || TGC_EPI == 2) + (TGC_EPI == 2));
        size_t oidx = idx; // channels-last output (TGC_OCL): [n, oh, ow, co]
        if (TGC_CONV && TGC_OCL) {
            long long ohw = G.oh * G.ow, img = (long long)idx / (G.co * ohw);
            oidx = (size_t)((img * ohw + (long long)idx % ohw) * G.co + ((long long)idx / ohw) % G.co);
        }
        double got = odt ? tgc_bits_f32(((unsigned short *)c.b.p[TGC_OUT])[oidx], odt == 2)
                         : ((float *)c.b.p[TGC_OUT])[oidx];
        double err = fabs(got - s), lim = ts * as + to * mag + 1e-30;
        if (!(err <= lim)) {
            if (bad < 5)
                printf("%s: element %zu: got %.9g want %.9g (limit %.3g)\n", TGC_NAME, idx, got, s,
                       lim);
            bad++;
        }
        if (err / lim > worst)
            worst = err / lim;
    }
    const char *fl = getenv("TGC_EMU_FLIP");
    printf("%-34s%s %s: %zu/%zu bad, worst %.3f of limit (grid %u x %u x %u, %u threads, order "
           "%c)\n",
           TGC_NAME, entry, bad ? "FAIL" : "ok", bad, n, worst, grid[0], grid[1], grid[2], nt,
           fl && *fl == '1' ? '1' : '0');
    return bad != 0;
}
