/* Live taps of a convolution axis: conv_taps.h. */
#include "ir/conv_taps.h"

/* 1 when tap r reads some input index in [0, n) for an output position in [0, o) */
static int tap_live(int64_t n, int64_t o, int64_t s, int64_t p, int64_t d, int64_t r)
{
    int64_t lo = r * d - p; /* the index output 0 reads */
    int64_t i = lo >= 0 ? 0 : (-lo + s - 1) / s;
    return i < o && lo + i * s < n;
}

int tgc_conv_axis_trim(int64_t n, int64_t k, int64_t s, int64_t p, int64_t d, int64_t *first,
                       int64_t *count, int64_t *pad)
{
    *first = 0;
    *count = k;
    *pad = p;
    if (n < 1 || k < 1 || s < 1 || d < 1 || p < 0)
        return 0;
    int64_t span = n + 2 * p - d * (k - 1) - 1;
    if (span < 0)
        return 0;
    int64_t o = span / s + 1, r0 = 0, r1 = k - 1;
    while (r0 < k && !tap_live(n, o, s, p, d, r0))
        r0++;
    if (r0 == k)
        return 0; /* every tap reads padding: the output is the bias alone, left as it is */
    while (!tap_live(n, o, s, p, d, r1))
        r1--;
    int64_t kk = r1 - r0 + 1, pp = p - r0 * d;
    if (kk == k || pp < 0)
        return 0;
    int64_t span2 = n + 2 * pp - d * (kk - 1) - 1;
    if (span2 < 0 || span2 / s + 1 != o)
        return 0;
    *first = r0;
    *count = kk;
    *pad = pp;
    return 1;
}

int tgc_conv_trim(const tgc_attrs *a, int64_t h, int64_t w, int64_t kh, int64_t kw,
                  tgc_conv_taps *t)
{
    const tgc_conv2d_attrs *c = &a->conv2d;
    int tr = tgc_conv_axis_trim(h, kh, c->stride_h, c->pad_h, c->dil_h, &t->first[0], &t->count[0],
                                &t->pad[0]);
    int ts = tgc_conv_axis_trim(w, kw, c->stride_w, c->pad_w, c->dil_w, &t->first[1], &t->count[1],
                                &t->pad[1]);
    return tr || ts;
}
