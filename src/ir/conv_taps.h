/* Which taps of a convolution can read its input: along one axis of input size n, kernel k,
 * stride s, padding p (both sides) and dilation d, the output o = (n + 2p - d (k - 1) - 1) / s
 * + 1 positions read input index i * s - p + r * d for tap r. A tap none of whose reads lands
 * in [0, n) reads only padding and adds nothing; on small images (a 3x3 convolution of
 * padding 1 on a 1x1 image) most taps are such. The live taps form one run [first, first +
 * count). Pure arithmetic: used by the graph pass that drops dead taps (passes/decompose.c)
 * and by the eager signatures that must decide the same way (backend/eager.c). */
#ifndef TGC_IR_CONV_TAPS_H
#define TGC_IR_CONV_TAPS_H

#include <stdint.h>

#include "ir/op.h"

/* 1 when the convolution along this axis equals one over the taps [*first, *first + *count)
 * alone with padding *pad (the same output size, the same reads), and that run is shorter
 * than k; 0 otherwise (every tap live, no tap live, or a shorter run that no symmetric
 * padding reproduces), with *first = 0, *count = k, *pad = p. Sizes must be positive. */
int tgc_conv_axis_trim(int64_t n, int64_t k, int64_t s, int64_t p, int64_t d, int64_t *first,
                       int64_t *count, int64_t *pad);

/* Both axes' runs: [0] rows, [1] columns (for an axis that does not trim, the whole kernel
 * and the padding as they were). */
typedef struct tgc_conv_taps {
    int64_t first[2], count[2], pad[2];
} tgc_conv_taps;

/* tgc_conv_axis_trim along both axes of a conv2d, conv2d_grad_input or conv2d_grad_weight
 * node (their attribute layouts start with conv2d's geometry fields, read through
 * a->conv2d) over an image of h x w and a kernel of kh x kw: 1 when either axis trims. */
int tgc_conv_trim(const tgc_attrs *a, int64_t h, int64_t w, int64_t kh, int64_t kw,
                  tgc_conv_taps *t);

#endif
