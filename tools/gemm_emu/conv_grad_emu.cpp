// Runs the conv-grad programs (src/backend/cuda/cuda_conv_grad.c's text, written by
// `test_cuda_grad_ops` when TGC_CG_EMIT_DIR is set) on the CPU emulator (emu.h) and compares
// dgrad and wgrad with a double reference, for a few odd geometries and split counts.
// Build and run: tools/gemm_emu/conv_grad_emu.sh BUILD_DIR.
#include "emu.h"
inline unsigned tgc_umulhi(unsigned a, unsigned b)
{
    return (unsigned)(((unsigned long long)a * b) >> 32);
}
#include TGC_CASE

#include <vector>

static uint64_t rng = 88172645463325252ull;
static float frand()
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

struct cg_case {
    int n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups, splits;
    // 1: also the channels-last entries, 2: the same, and the whole case in the first warp
    // order only (see main)
    int cl;
};

static float round_op(float v)
{
    if (TGC_MODE == 1)
        return __uint_as_float(tgc_to_tf32(v));
    if (TGC_MODE == 2)
        return tgc_bits_f32(tgc_bf16_rn(v), 1);
    return v;
}

struct dg_ctx {
    tgc_cg_geom g;
    const float *dy, *wt;
    float *dx;
    void *ws;
};
static void dg_body(void *p)
{
    dg_ctx *c = (dg_ctx *)p;
    tgc_cg_dgrad(c->g, c->dy, c->wt, c->dx, c->ws);
}
static void dg_cl_body(void *p)
{
    dg_ctx *c = (dg_ctx *)p;
    tgc_cg_dgrad_cl(c->g, c->dy, c->wt, c->dx, c->ws);
}
struct wg_ctx {
    tgc_cg_geom g;
    const float *x, *dy;
    float *dw;
    void *ws;
};
static void wg_body(void *p)
{
    wg_ctx *c = (wg_ctx *)p;
    tgc_cg_wgrad(c->g, c->x, c->dy, c->dw, c->ws);
}
#if TGC_WG_CL
static void wg_cl_body(void *p)
{
    wg_ctx *c = (wg_ctx *)p;
    tgc_cg_wgrad_cl(c->g, c->x, c->dy, c->dw, c->ws);
}
#endif

// a [n][c][h][w] array as [n][h][w][c]
static float *to_nhwc(const float *a, long long n, long long c, long long h, long long w)
{
    float *r = (float *)aligned_alloc(64, (size_t)(n * c * h * w + 16) * 4);
    for (long long b = 0; b < n; b++)
        for (long long ci = 0; ci < c; ci++)
            for (long long y = 0; y < h * w; y++)
                r[(b * h * w + y) * c + ci] = a[(b * c + ci) * h * w + y];
    return r;
}
struct pk_ctx {
    tgc_cg_geom g;
    const float *w;
    float *wt;
};
static void pk_body(void *p)
{
    pk_ctx *c = (pk_ctx *)p;
    tgc_cg_pack(c->g, c->w, (long long)(c->g.c / c->g.groups) * c->g.kh * c->g.kw,
                c->g.kh * c->g.kw, c->g.kw, 1, c->wt);
}

static long long cdiv(long long a, long long b)
{
    return (a + b - 1) / b;
}

static int run_case(const cg_case &k, int cl)
{
    tgc_cg_geom g;
    memset(&g, 0, sizeof g);
    g.n = k.n;
    g.c = k.c;
    g.h = k.h;
    g.w = k.w;
    g.o = k.o;
    g.kh = k.kh;
    g.kw = k.kw;
    g.sh = k.sh;
    g.sw = k.sw;
    g.ph = k.ph;
    g.pw = k.pw;
    g.dh = k.dh;
    g.dw = k.dw;
    g.groups = k.groups;
    g.oh = (k.h + 2 * k.ph - k.dh * (k.kh - 1) - 1) / k.sh + 1;
    g.ow = (k.w + 2 * k.pw - k.dw * (k.kw - 1) - 1) / k.sw + 1;
    const long long cg = k.c / k.groups, og = k.o / k.groups;
    const long long nx = (long long)k.n * k.c * k.h * k.w, ny = (long long)k.n * k.o * g.oh * g.ow,
                    nw = (long long)k.o * cg * k.kh * k.kw;
    float *x = (float *)aligned_alloc(64, (size_t)(nx + 16) * 4),
          *dy = (float *)aligned_alloc(64, (size_t)(ny + 16) * 4),
          *w = (float *)aligned_alloc(64, (size_t)(nw + 16) * 4),
          *wt = (float *)aligned_alloc(64, (size_t)(nw + 16) * 4),
          *dx = (float *)aligned_alloc(64, (size_t)(nx + 16) * 4),
          *dw = (float *)aligned_alloc(64, (size_t)(nw + 16) * 4),
          *dx_cl = (float *)aligned_alloc(64, (size_t)(nx + 16) * 4),
          *dw_cl = (float *)aligned_alloc(64, (size_t)(nw + 16) * 4);
    for (long long i = 0; i < nx; i++)
        x[i] = frand();
    for (long long i = 0; i < ny; i++)
        dy[i] = frand();
    for (long long i = 0; i < nw; i++)
        w[i] = frand();
    for (long long i = 0; i < nx; i++)
        dx[i] = dx_cl[i] = NAN;
    for (long long i = 0; i < nw; i++)
        dw[i] = dw_cl[i] = wt[i] = NAN;
    // the channels-last entries read the same values NHWC (dx and dw keep their layouts)
    float *x_cl = to_nhwc(x, k.n, k.c, k.h, k.w), *dy_cl = to_nhwc(dy, k.n, k.o, g.oh, g.ow);
    // pack + dgrad
    unsigned pg[3] = {(unsigned)cdiv(nw, 256), 1, 1};
    pk_ctx pc = {g, w, wt};
    tgc_emu_launch(pg, 256, 0, pk_body, &pc);
    for (long long i = 0; i < nw; i++)
        if (wt[i] != wt[i]) {
            printf("pack: element %lld never written\n", i);
            return 1;
        }
    const long long tiles_dg =
        cdiv(cg, TGC_BM) * cdiv(k.n * cdiv(k.h, k.sh) * cdiv(k.w, k.sw), TGC_BN);
    const long long z_dg = (long long)k.groups * k.sh * k.sw;
    const long long tiles_wg = cdiv(og, TGC_BM) * cdiv(cg * k.kh * k.kw, TGC_BN);
    size_t wsb = 0;
    std::vector<char> ws;
    // passes: dgrad, wgrad, then both over channels-last operands (no wgrad_cl for wgmma tiles)
    for (int pass = 0; pass < 4; pass++) {
        if ((pass >= 2 && !cl) || (pass == 3 && !TGC_WG_CL))
            continue;
        long long tiles = pass % 2 ? tiles_wg : tiles_dg, z = pass % 2 ? k.groups : z_dg;
        int splits = k.splits;
        wsb = splits > 1 ? (size_t)((tiles * z * 4 + 255) / 256 * 256) +
                               (size_t)(tiles * z * splits) * TGC_BM * TGC_BN * 4
                         : 0;
        ws.assign(wsb + 16, 0);
        unsigned grid[3] = {(unsigned)tiles, (unsigned)splits, (unsigned)z};
        if (pass % 2 == 0) {
            dg_ctx c = {g, pass ? dy_cl : dy, wt, pass ? dx_cl : dx, wsb ? ws.data() : nullptr};
            tgc_emu_launch(grid, TGC_NT, 200 * 1024, pass ? dg_cl_body : dg_body, &c);
        } else if (pass == 1) {
            wg_ctx c = {g, x, dy, dw, wsb ? ws.data() : nullptr};
            tgc_emu_launch(grid, TGC_NT, 200 * 1024, wg_body, &c);
        } else {
#if TGC_WG_CL
            wg_ctx c = {g, x_cl, dy_cl, dw_cl, wsb ? ws.data() : nullptr};
            tgc_emu_launch(grid, TGC_NT, 200 * 1024, wg_cl_body, &c);
#endif
        }
        for (size_t i = 0; wsb && i < (size_t)(tiles * z); i++)
            if (((unsigned *)ws.data())[i]) {
                printf("split-K counter %zu left at %u\n", i, ((unsigned *)ws.data())[i]);
                return 1;
            }
    }
    // references from the rounded operands (the mma's inputs), double sums
    std::vector<double> rx(nx), ry(ny), rw(nw);
    for (long long i = 0; i < nx; i++)
        rx[i] = round_op(x[i]);
    for (long long i = 0; i < ny; i++)
        ry[i] = round_op(dy[i]);
    for (long long i = 0; i < nw; i++)
        rw[i] = round_op(w[i]);
    std::vector<double> gx(nx, 0.0), ax(nx, 0.0), gw(nw, 0.0), aw(nw, 0.0);
    for (int b = 0; b < k.n; b++)
        for (int oc = 0; oc < k.o; oc++)
            for (int oh = 0; oh < g.oh; oh++)
                for (int ow = 0; ow < g.ow; ow++) {
                    double d = ry[((b * (long long)k.o + oc) * g.oh + oh) * g.ow + ow];
                    long long gi = oc / og;
                    for (int ci = 0; ci < cg; ci++)
                        for (int r = 0; r < k.kh; r++)
                            for (int s = 0; s < k.kw; s++) {
                                int ih = oh * k.sh - k.ph + r * k.dh,
                                    iw = ow * k.sw - k.pw + s * k.dw;
                                if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w)
                                    continue;
                                long long xi =
                                    ((b * (long long)k.c + gi * cg + ci) * k.h + ih) * k.w + iw;
                                long long wi = ((oc * cg + ci) * (long long)k.kh + r) * k.kw + s;
                                gx[xi] += d * rw[wi];
                                ax[xi] += fabs(d * rw[wi]);
                                gw[wi] += d * rx[xi];
                                aw[wi] += fabs(d * rx[xi]);
                            }
                }
    int bad = 0;
    static const char *const what[4] = {"dx", "dw", "dx (cl)", "dw (cl)"};
    for (int pass = 0; pass < 4; pass++) {
        if ((pass >= 2 && !cl) || (pass == 3 && !TGC_WG_CL))
            continue;
        const float *const outs[4] = {dx, dw, dx_cl, dw_cl};
        const float *got = outs[pass];
        const std::vector<double> &want = pass % 2 ? gw : gx, &mag = pass % 2 ? aw : ax;
        long long n = pass % 2 ? nw : nx;
        for (long long i = 0; i < n; i++) {
            double err = fabs((double)got[i] - want[i]), lim = 1e-5 * mag[i] + 1e-30;
            if (!(err <= lim)) {
                if (bad < 5)
                    printf("  %s element %lld: got %.9g want %.9g (limit %.3g)\n", what[pass], i,
                           got[i], want[i], lim);
                bad++;
            }
        }
    }
    printf("%-8s n%d c%d %dx%d o%d k%dx%d s%d,%d p%d,%d d%d,%d g%d splits %d%s: %s\n", TGC_NAME,
           k.n, k.c, k.h, k.w, k.o, k.kh, k.kw, k.sh, k.sw, k.ph, k.pw, k.dh, k.dw, k.groups,
           k.splits, cl ? " (and channels-last)" : "", bad ? "FAIL" : "ok");
    free(x);
    free(dy);
    free(w);
    free(wt);
    free(dx);
    free(dw);
    free(dx_cl);
    free(dw_cl);
    free(x_cl);
    free(dy_cl);
    return bad != 0;
}

int main()
{
    static const cg_case cases[] = {
        // n  c  h  w   o  kh kw sh sw ph pw dh dw g splits cl
        {2, 5, 7, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},
        {2, 6, 9, 7, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0},
        {1, 4, 8, 8, 6, 1, 1, 2, 2, 0, 0, 1, 1, 2, 1, 0},
        {2, 6, 7, 9, 4, 3, 2, 1, 1, 2, 0, 2, 3, 2, 3, 1},
        {3, 3, 5, 11, 5, 2, 3, 3, 2, 1, 2, 1, 1, 1, 2, 0},
        {2, 8, 8, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8, 2, 0},
        // several m / n tiles and k tiles (the vector loads, the pipeline's stage reuse)
        {2, 70, 6, 6, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0},
        {3, 20, 9, 11, 130, 3, 3, 2, 2, 1, 1, 1, 1, 1, 2, 0},
        // channel counts of multiples of 4 (the channels-last loaders' 16-byte chunks): several
        // n tiles of (tap, channel) columns, groups of 4 channels, a strided dgrad
        {2, 36, 5, 6, 136, 3, 3, 2, 2, 1, 1, 1, 1, 1, 2, 2},
        {2, 8, 7, 7, 8, 3, 3, 2, 2, 1, 1, 1, 1, 2, 1, 2},
        {2, 16, 6, 6, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 2, 2},
    };
    // the channels-last entries on the cases marked cl (both loader paths: channel counts of
    // multiples of 4 and others), in the first warp order only: the two orders run the same
    // pipeline and compute, which the NCHW entries check in both, and emulating every case
    // in both orders made this the suite's longest test
    const char *flip = getenv("TGC_EMU_FLIP");
    const int first_order = !flip || strcmp(flip, "1") != 0;
    int fails = 0;
    for (const cg_case &k : cases)
        if (first_order || k.cl < 2)
            fails += run_case(k, k.cl && first_order);
    return fails != 0;
}
