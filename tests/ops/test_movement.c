/* Views and movement, run eagerly through the public API: reshape (ONNX rules), permute,
 * transpose, expand, squeeze, unsqueeze, slice, flatten, contiguous, cat, stack, pad,
 * embedding, gather, index_select. Each test checks values and geometry (strides, and
 * whether the result shares its input's storage), plus the error paths' status and message. */
#include <stdlib.h>
#include <string.h>

#include "backend/interp/interp.h"
#include "tensor/copy.h"
#include "tensor/tensor_impl.h"
#include "op_test_util.h"
#include "tgc/ops.h"
#include "tgc/tensor.h"

/* ---- helpers ---- */

static tgc_tensor *ints(const int64_t *v, const int64_t *shape, int nd, tgc_dtype dt)
{
    double d[64];
    int64_t n = numel_of(shape, nd);
    assert_true(n <= 64);
    for (int64_t i = 0; i < n; i++)
        d[i] = (double)v[i];
    return from_doubles(d, shape, nd, dt);
}

static void expect_strides(const tgc_tensor *t, const int64_t *strides, int nd)
{
    assert_int_equal(tgc_ndim(t), nd);
    for (int d = 0; d < nd; d++)
        assert_int_equal(tgc_stride(t, d), strides[d]);
}

/* 1 when writing through `view` changes `base`: they share storage. Restores nothing, so
 * call it last on a tensor. */
static int shares_storage(tgc_tensor *view, const tgc_tensor *base)
{
    int64_t shape[TGC_MAX_DIMS];
    int nd = tgc_shape(view, shape);
    double before = tgc_item_f64(base);
    tgc_tensor *marker = tgc_full(shape, nd, -12345.0, tgc_dtype_of(view), tgc_cpu());
    assert_non_null(marker);
    assert_int_equal(tgc_copy_(view, marker), TGC_OK);
    double after = tgc_item_f64(base);
    return before != after;
}

/* ---- reshape ---- */

static void test_reshape_zero_copies_dim_and_minus_one_is_inferred(void **state)
{
    (void)state;
    const int64_t s[] = {2, 3, 4};
    tgc_tensor *x = iota(s, 3, TGC_F32);

    const int64_t t1[] = {0, -1};
    tgc_tensor *a = tgc_reshape(x, t1, 2);
    expect_shape(a, (const int64_t[]){2, 12}, 2);
    expect_strides(a, (const int64_t[]){12, 1}, 2);

    const int64_t t2[] = {-1, 0, 2};
    tgc_tensor *b = tgc_reshape(x, t2, 3);
    expect_shape(b, (const int64_t[]){4, 3, 2}, 3);
    expect_strides(b, (const int64_t[]){6, 2, 1}, 3);

    double want[24];
    for (int i = 0; i < 24; i++)
        want[i] = i;
    expect_elements(a, want, 24);
    expect_elements(b, want, 24);

    const int64_t t3[] = {1, 24, 1};
    tgc_tensor *c = tgc_reshape(x, t3, 3);
    expect_shape(c, t3, 3);
    expect_elements(c, want, 24);
}

static void test_reshape_of_contiguous_is_a_view(void **state)
{
    (void)state;
    const int64_t s[] = {2, 3, 4};
    tgc_tensor *x = iota(s, 3, TGC_F32);
    const int64_t t[] = {6, 4};
    tgc_tensor *v = tgc_reshape(x, t, 2);
    expect_shape(v, t, 2);
    assert_true(tgc_is_contiguous(v));
    assert_true(shares_storage(v, x));
}

static void test_reshape_of_transposed_copies(void **state)
{
    (void)state;
    const int64_t s[] = {2, 3, 4};
    tgc_tensor *x = iota(s, 3, TGC_F32);
    tgc_tensor *xt = tgc_transpose(x, 0, 2); /* [4, 3, 2], xt[i][j][k] = x[k][j][i] */
    const int64_t t[] = {-1};
    tgc_tensor *flat = tgc_reshape(xt, t, 1);
    expect_shape(flat, (const int64_t[]){24}, 1);
    expect_strides(flat, (const int64_t[]){1}, 1);
    double want[24];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 2; k++)
                want[i * 6 + j * 2 + k] = k * 12 + j * 4 + i;
    expect_elements(flat, want, 24);
    assert_false(shares_storage(flat, x));
}

/* A non-contiguous input still reshapes as a view when only dims that are contiguous with
 * each other are merged (PyTorch's computeStride). */
static void test_reshape_of_sliced_input_views_when_chunks_allow(void **state)
{
    (void)state;
    const int64_t s[] = {2, 3, 4};
    tgc_tensor *x = iota(s, 3, TGC_F32);
    tgc_tensor *sl = tgc_slice(x, 2, 0, 2, 1); /* [2, 3, 2], strides [12, 4, 1] */
    expect_strides(sl, (const int64_t[]){12, 4, 1}, 3);

    const int64_t t1[] = {6, 2};
    tgc_tensor *v = tgc_reshape(sl, t1, 2);
    expect_shape(v, t1, 2);
    expect_strides(v, (const int64_t[]){4, 1}, 2);
    const double want[] = {0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21};
    expect_elements(v, want, 12);

    const int64_t t2[] = {12};
    tgc_tensor *c = tgc_reshape(sl, t2, 1);
    expect_strides(c, (const int64_t[]){1}, 1);
    expect_elements(c, want, 12);
    assert_false(shares_storage(c, x));
    assert_true(shares_storage(v, x));
}

static void test_reshape_size_one_empty_and_scalar(void **state)
{
    (void)state;
    const int64_t s0[] = {0, 3};
    tgc_tensor *e = iota(s0, 2, TGC_F32);
    const int64_t t0[] = {0, 1, 3}; /* 0 copies the input's dim 0, which is empty */
    tgc_tensor *r = tgc_reshape(e, t0, 3);
    expect_shape(r, (const int64_t[]){0, 1, 3}, 3);
    assert_int_equal(tgc_numel(r), 0);
    expect_shape(tgc_reshape(e, (const int64_t[]){-1}, 1), (const int64_t[]){0}, 1);
    /* -1 is ambiguous when the known dims hold no elements */
    expect_error(tgc_reshape(e, (const int64_t[]){0, -1}, 2), TGC_ERR_SHAPE, "tgc_reshape");

    const int64_t one[] = {1};
    tgc_tensor *x = iota(one, 1, TGC_I64);
    const int64_t scalar[1] = {0};
    tgc_tensor *sc = tgc_reshape(x, scalar, 0);
    assert_non_null(sc);
    assert_int_equal(tgc_ndim(sc), 0);
    assert_int_equal(tgc_item_i64(sc), 0);
    const int64_t t1[] = {1, -1, 1};
    tgc_tensor *back = tgc_reshape(sc, t1, 3);
    expect_shape(back, (const int64_t[]){1, 1, 1}, 3);
}

static void test_reshape_rejects_bad_targets(void **state)
{
    (void)state;
    const int64_t s[] = {2, 3, 4};
    tgc_tensor *x = iota(s, 3, TGC_F32);
    const int64_t two_infer[] = {-1, -1};
    expect_error(tgc_reshape(x, two_infer, 2), TGC_ERR_INVALID_ARG, "tgc_reshape");
    const int64_t wrong[] = {5, 5};
    expect_error(tgc_reshape(x, wrong, 2), TGC_ERR_SHAPE, "tgc_reshape");
    const int64_t wrong_infer[] = {5, -1};
    expect_error(tgc_reshape(x, wrong_infer, 2), TGC_ERR_SHAPE, "tgc_reshape");
    const int64_t negative[] = {-2, -12};
    expect_error(tgc_reshape(x, negative, 2), TGC_ERR_INVALID_ARG, "tgc_reshape");
    /* a NULL input gives NULL and keeps the first error */
    expect_error(tgc_reshape(NULL, wrong, 2), TGC_ERR_INVALID_ARG, "");
}

/* ---- permute, transpose, expand ---- */

static void test_permute_and_transpose_swap_strides(void **state)
{
    (void)state;
    const int64_t s[] = {2, 3, 4};
    tgc_tensor *x = iota(s, 3, TGC_F32);
    const int perm[] = {2, 0, 1};
    tgc_tensor *p = tgc_permute(x, perm, 3);
    expect_shape(p, (const int64_t[]){4, 2, 3}, 3);
    expect_strides(p, (const int64_t[]){1, 12, 4}, 3);
    assert_false(tgc_is_contiguous(p));
    double want[24];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 3; k++)
                want[i * 6 + j * 3 + k] = j * 12 + k * 4 + i;
    expect_elements(p, want, 24);

    tgc_tensor *t = tgc_transpose(x, -1, 0);
    expect_shape(t, (const int64_t[]){4, 3, 2}, 3);
    expect_strides(t, (const int64_t[]){1, 4, 12}, 3);
    assert_true(shares_storage(p, x));
}

static void test_permute_rejects_non_permutations(void **state)
{
    (void)state;
    const int64_t s[] = {2, 3};
    tgc_tensor *x = iota(s, 2, TGC_F32);
    expect_error(tgc_permute(x, (const int[]){0, 0}, 2), TGC_ERR_INVALID_ARG, "tgc_permute");
    expect_error(tgc_permute(x, (const int[]){0, 2}, 2), TGC_ERR_INVALID_ARG, "tgc_permute");
    expect_error(tgc_permute(x, (const int[]){1, 0, 2}, 3), TGC_ERR_INVALID_ARG, "tgc_permute");
}

static void test_expand_stretches_with_stride_zero(void **state)
{
    (void)state;
    const int64_t s[] = {3, 1};
    tgc_tensor *x = iota(s, 2, TGC_I32);
    const int64_t t[] = {2, -1, 4};
    tgc_tensor *e = tgc_expand(x, t, 3);
    expect_shape(e, (const int64_t[]){2, 3, 4}, 3);
    expect_strides(e, (const int64_t[]){0, 1, 0}, 3);
    double want[24];
    for (int i = 0; i < 24; i++)
        want[i] = (i / 4) % 3;
    expect_elements(e, want, 24);

    tgc_tensor *c = tgc_contiguous(e);
    expect_strides(c, (const int64_t[]){12, 4, 1}, 3);
    expect_elements(c, want, 24);

    const int64_t one[] = {1};
    tgc_tensor *o = iota(one, 1, TGC_F32);
    tgc_tensor *z = tgc_expand(o, (const int64_t[]){0}, 1);
    expect_shape(z, (const int64_t[]){0}, 1);

    expect_error(tgc_expand(x, (const int64_t[]){4, 1}, 2), TGC_ERR_SHAPE, "tgc_expand");
}

/* ---- squeeze, unsqueeze ---- */

static void test_squeeze_removes_size_one_dims(void **state)
{
    (void)state;
    const int64_t s[] = {1, 3, 1, 2};
    tgc_tensor *x = iota(s, 4, TGC_F32);
    const double want[] = {0, 1, 2, 3, 4, 5};

    tgc_tensor *all = tgc_squeeze(x, TGC_ALL_DIMS);
    expect_shape(all, (const int64_t[]){3, 2}, 2);
    expect_strides(all, (const int64_t[]){2, 1}, 2);
    expect_elements(all, want, 6);

    tgc_tensor *first = tgc_squeeze(x, 0);
    expect_shape(first, (const int64_t[]){3, 1, 2}, 3);
    tgc_tensor *neg = tgc_squeeze(x, -2);
    expect_shape(neg, (const int64_t[]){1, 3, 2}, 3);
    expect_elements(neg, want, 6);
    /* a dim that is not of size 1 stays */
    tgc_tensor *keep = tgc_squeeze(x, 1);
    expect_shape(keep, s, 4);

    const int64_t one[] = {1};
    tgc_tensor *o = iota(one, 1, TGC_F32);
    tgc_tensor *sc = tgc_squeeze(o, 0);
    assert_non_null(sc);
    assert_int_equal(tgc_ndim(sc), 0);
    assert_true(shares_storage(all, x));
}

static void test_unsqueeze_inserts_size_one_dim(void **state)
{
    (void)state;
    const int64_t s[] = {2, 3, 4};
    tgc_tensor *x = iota(s, 3, TGC_F32);
    tgc_tensor *u = tgc_unsqueeze(x, 1);
    expect_shape(u, (const int64_t[]){2, 1, 3, 4}, 4);
    expect_strides(u, (const int64_t[]){12, 12, 4, 1}, 4);
    tgc_tensor *last = tgc_unsqueeze(x, -1);
    expect_shape(last, (const int64_t[]){2, 3, 4, 1}, 4);
    expect_strides(last, (const int64_t[]){12, 4, 1, 1}, 4);
    tgc_tensor *front = tgc_unsqueeze(x, 0);
    expect_shape(front, (const int64_t[]){1, 2, 3, 4}, 4);
    double want[24];
    for (int i = 0; i < 24; i++)
        want[i] = i;
    expect_elements(last, want, 24);
    expect_error(tgc_unsqueeze(x, 5), TGC_ERR_INVALID_ARG, "tgc_unsqueeze");
}

/* ---- slice ---- */

static void test_slice_follows_python_rules(void **state)
{
    (void)state;
    const int64_t s[] = {10};
    tgc_tensor *x = iota(s, 1, TGC_I64);

    tgc_tensor *a = tgc_slice(x, 0, -7, -1, 2); /* 3, 5, 7 */
    expect_shape(a, (const int64_t[]){3}, 1);
    expect_strides(a, (const int64_t[]){2}, 1);
    expect_elements(a, (const double[]){3, 5, 7}, 3);

    tgc_tensor *b = tgc_slice(x, -1, 2, 100, 3); /* 2, 5, 8 */
    expect_elements(b, (const double[]){2, 5, 8}, 3);

    tgc_tensor *c = tgc_slice(x, 0, -100, 2, 1);
    expect_elements(c, (const double[]){0, 1}, 2);

    tgc_tensor *empty = tgc_slice(x, 0, 8, 3, 1);
    expect_shape(empty, (const int64_t[]){0}, 1);

    tgc_tensor *to_end = tgc_slice(x, 0, 7, INT64_MAX, 1);
    expect_elements(to_end, (const double[]){7, 8, 9}, 3);

    /* a slice of a slice composes offsets and steps */
    tgc_tensor *ss = tgc_slice(b, 0, 1, 3, 1);
    expect_elements(ss, (const double[]){5, 8}, 2);
    expect_strides(ss, (const int64_t[]){3}, 1);

    expect_error(tgc_slice(x, 0, 0, 5, 0), TGC_ERR_INVALID_ARG, "tgc_slice");
    expect_error(tgc_slice(x, 1, 0, 5, 1), TGC_ERR_INVALID_ARG, "tgc_slice");
}

static void test_slice_inner_dim_shares_storage(void **state)
{
    (void)state;
    const int64_t s[] = {2, 3, 4};
    tgc_tensor *x = iota(s, 3, TGC_F32);
    tgc_tensor *m = tgc_slice(x, 1, 1, 3, 1);
    expect_shape(m, (const int64_t[]){2, 2, 4}, 3);
    expect_strides(m, (const int64_t[]){12, 4, 1}, 3);
    const double want[] = {4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19, 20, 21, 22, 23};
    expect_elements(m, want, 16);

    tgc_tensor *odd = tgc_slice(x, 2, 1, 4, 2); /* columns 1 and 3 */
    expect_strides(odd, (const int64_t[]){12, 4, 2}, 3);
    expect_elements(odd, (const double[]){1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23}, 12);

    /* x[0] = 0 is not in the slice: check sharing through an element that is */
    tgc_tensor *first = tgc_slice(x, 0, 0, 1, 1);
    assert_true(shares_storage(first, x));
}

/* ---- flatten, contiguous ---- */

static void test_flatten_views_contiguous_and_copies_otherwise(void **state)
{
    (void)state;
    const int64_t s[] = {2, 3, 4};
    tgc_tensor *x = iota(s, 3, TGC_F32);
    tgc_tensor *f = tgc_flatten(x, 1, 2);
    expect_shape(f, (const int64_t[]){2, 12}, 2);
    expect_strides(f, (const int64_t[]){12, 1}, 2);
    tgc_tensor *all = tgc_flatten(x, 0, -1);
    expect_shape(all, (const int64_t[]){24}, 1);

    tgc_tensor *xt = tgc_transpose(x, 1, 2); /* [2, 4, 3] */
    tgc_tensor *g = tgc_flatten(xt, 1, 2);
    expect_shape(g, (const int64_t[]){2, 12}, 2);
    expect_strides(g, (const int64_t[]){12, 1}, 2);
    double want[24];
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 3; j++)
                want[b * 12 + i * 3 + j] = b * 12 + j * 4 + i;
    expect_elements(g, want, 24);

    /* merging only dim 0 (outer, stride 12) of the transposed tensor is still a view */
    tgc_tensor *h = tgc_flatten(xt, 0, 0);
    expect_strides(h, (const int64_t[]){12, 1, 4}, 3);

    const int64_t one[] = {1}, scalar[1] = {0};
    tgc_tensor *sc = tgc_reshape(iota(one, 1, TGC_F32), scalar, 0);
    tgc_tensor *fs = tgc_flatten(sc, 0, 0);
    expect_shape(fs, one, 1);

    assert_false(shares_storage(g, x));
    assert_true(shares_storage(f, x));
}

static void test_contiguous_returns_view_or_row_major_copy(void **state)
{
    (void)state;
    const int64_t s[] = {3, 4};
    tgc_tensor *x = iota(s, 2, TGC_BF16);
    tgc_tensor *same = tgc_contiguous(x);
    expect_strides(same, (const int64_t[]){4, 1}, 2);

    tgc_tensor *xt = tgc_transpose(x, 0, 1);
    tgc_tensor *c = tgc_contiguous(xt);
    expect_shape(c, (const int64_t[]){4, 3}, 2);
    expect_strides(c, (const int64_t[]){3, 1}, 2);
    assert_true(tgc_is_contiguous(c));
    assert_int_equal(tgc_dtype_of(c), TGC_BF16);
    expect_elements(c, (const double[]){0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}, 12);

    assert_false(shares_storage(c, x));
    assert_true(shares_storage(same, x));
}

/* A transposed copy large enough to take the tiled path, in every element size. */
static void test_large_transposed_copy(void **state)
{
    (void)state;
    const tgc_dtype dts[] = {TGC_F32, TGC_F16, TGC_I64, TGC_BOOL};
    const int64_t s[] = {37, 50}; /* below 2048: exact in f16 */
    for (int k = 0; k < N_OF(dts); k++) {
        tgc_tensor *x = iota(s, 2, dts[k]);
        tgc_tensor *c = tgc_contiguous(tgc_transpose(x, 0, 1));
        double *want = malloc(sizeof(double) * 37 * 50);
        assert_non_null(want);
        for (int i = 0; i < 50; i++)
            for (int j = 0; j < 37; j++)
                want[i * 37 + j] = dts[k] == TGC_BOOL ? (j * 50 + i != 0) : j * 50 + i;
        expect_elements(c, want, 37 * 50);
        free(want);
    }
}

/* ---- cat, stack ---- */

static void test_cat_promotes_dtypes_and_skips_empty_pieces(void **state)
{
    (void)state;
    tgc_tensor *a = iota((const int64_t[]){2, 2}, 2, TGC_F32); /* 0 1 / 2 3 */
    tgc_tensor *b = ints((const int64_t[]){7, 8}, (const int64_t[]){2, 1}, 2, TGC_I32);
    tgc_tensor *e = iota((const int64_t[]){2, 0}, 2, TGC_F32);
    tgc_tensor *h = iota((const int64_t[]){2, 1}, 2, TGC_F16); /* 0 / 1 */
    tgc_tensor *parts[] = {a, e, b, h};
    tgc_tensor *c = tgc_cat(parts, 4, 1);
    expect_shape(c, (const int64_t[]){2, 4}, 2);
    assert_int_equal(tgc_dtype_of(c), TGC_F32);
    expect_elements(c, (const double[]){0, 1, 7, 0, 2, 3, 8, 1}, 8);

    tgc_tensor *e64 = iota((const int64_t[]){0, 2}, 2, TGC_I64);
    tgc_tensor *rows = tgc_cat((tgc_tensor *[]){e64, a, tgc_transpose(a, 0, 1)}, 3, -2);
    expect_shape(rows, (const int64_t[]){4, 2}, 2);
    assert_int_equal(tgc_dtype_of(rows), TGC_F32);
    expect_elements(rows, (const double[]){0, 1, 2, 3, 0, 2, 1, 3}, 8);

    tgc_tensor *b64 = ints((const int64_t[]){5, 6}, (const int64_t[]){2, 1}, 2, TGC_I64);
    tgc_tensor *i64 = tgc_cat((tgc_tensor *[]){b, b64}, 2, 0);
    assert_int_equal(tgc_dtype_of(i64), TGC_I64);
    expect_elements(i64, (const double[]){7, 8, 5, 6}, 4);

    tgc_tensor *flags = ints((const int64_t[]){1, 0}, (const int64_t[]){2}, 1, TGC_BOOL);
    tgc_tensor *four = ints((const int64_t[]){4}, (const int64_t[]){1}, 1, TGC_I32);
    tgc_tensor *bools = tgc_cat((tgc_tensor *[]){flags, four}, 2, 0);
    assert_int_equal(tgc_dtype_of(bools), TGC_I32);
    expect_elements(bools, (const double[]){1, 0, 4}, 3);

    tgc_tensor *none = tgc_cat((tgc_tensor *[]){e, e}, 2, 1);
    expect_shape(none, (const int64_t[]){2, 0}, 2);

    tgc_tensor *one = tgc_cat(&a, 1, 0);
    expect_elements(one, (const double[]){0, 1, 2, 3}, 4);
    assert_false(shares_storage(one, a));

    tgc_tensor *wide = iota((const int64_t[]){3, 3}, 2, TGC_F32);
    expect_error(tgc_cat((tgc_tensor *[]){a, wide}, 2, 1), TGC_ERR_SHAPE, "tgc_cat");
    expect_error(tgc_cat(parts, 2, 2), TGC_ERR_INVALID_ARG, "tgc_cat");
}

static void test_stack_adds_a_dim(void **state)
{
    (void)state;
    tgc_tensor *a = iota((const int64_t[]){2, 3}, 2, TGC_F32);
    tgc_tensor *b =
        ints((const int64_t[]){10, 11, 12, 13, 14, 15}, (const int64_t[]){2, 3}, 2, TGC_I32);
    tgc_tensor *s0 = tgc_stack((tgc_tensor *[]){a, b}, 2, 0);
    expect_shape(s0, (const int64_t[]){2, 2, 3}, 3);
    assert_int_equal(tgc_dtype_of(s0), TGC_F32);
    expect_elements(s0, (const double[]){0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15}, 12);

    tgc_tensor *s2 = tgc_stack((tgc_tensor *[]){a, b}, 2, -1);
    expect_shape(s2, (const int64_t[]){2, 3, 2}, 3);
    expect_elements(s2, (const double[]){0, 10, 1, 11, 2, 12, 3, 13, 4, 14, 5, 15}, 12);

    tgc_tensor *s1 = tgc_stack((tgc_tensor *[]){tgc_transpose(a, 0, 1), a}, 1, 1);
    expect_shape(s1, (const int64_t[]){3, 1, 2}, 3);
    expect_elements(s1, (const double[]){0, 3, 1, 4, 2, 5}, 6);

    tgc_tensor *e = iota((const int64_t[]){0, 3}, 2, TGC_F32);
    tgc_tensor *se = tgc_stack((tgc_tensor *[]){e, e, e}, 3, 1);
    expect_shape(se, (const int64_t[]){0, 3, 3}, 3);

    expect_error(tgc_stack((tgc_tensor *[]){a, tgc_transpose(a, 0, 1)}, 2, 0), TGC_ERR_SHAPE,
                 "tgc_stack");
}

/* ---- pad ---- */

static void test_pad_constant_and_negative_crop(void **state)
{
    (void)state;
    tgc_tensor *x = iota((const int64_t[]){2, 3}, 2, TGC_F32); /* 0 1 2 / 3 4 5 */

    tgc_tensor *p = tgc_pad(x, (const int64_t[]){1, 2}, 1, 9.0);
    expect_shape(p, (const int64_t[]){2, 6}, 2);
    expect_elements(p, (const double[]){9, 0, 1, 2, 9, 9, 9, 3, 4, 5, 9, 9}, 12);

    tgc_tensor *q = tgc_pad(x, (const int64_t[]){0, 1, 1, 0}, 2, 0.0);
    expect_shape(q, (const int64_t[]){3, 4}, 2);
    expect_elements(q, (const double[]){0, 0, 0, 0, 0, 1, 2, 0, 3, 4, 5, 0}, 12);

    tgc_tensor *crop = tgc_pad(x, (const int64_t[]){-1, 1}, 1, -1.5);
    expect_shape(crop, (const int64_t[]){2, 3}, 2);
    expect_elements(crop, (const double[]){1, 2, -1.5, 4, 5, -1.5}, 6);

    tgc_tensor *both = tgc_pad(x, (const int64_t[]){-1, -1, 1, -1}, 2, 7.0);
    expect_shape(both, (const int64_t[]){2, 1}, 2);
    expect_elements(both, (const double[]){7, 1}, 2);

    tgc_tensor *gone = tgc_pad(x, (const int64_t[]){-3, 0}, 1, 1.0);
    expect_shape(gone, (const int64_t[]){2, 0}, 2);

    /* padding past a fully cropped region leaves only the value */
    tgc_tensor *only = tgc_pad(x, (const int64_t[]){-3, 2}, 1, 4.0);
    expect_elements(only, (const double[]){4, 4, 4, 4}, 4);

    expect_error(tgc_pad(x, (const int64_t[]){-2, -2}, 1, 0.0), TGC_ERR_SHAPE, "tgc_pad");
    expect_error(tgc_pad(x, (const int64_t[]){0, 0, 0, 0, 0, 0}, 3, 0.0), TGC_ERR_INVALID_ARG,
                 "tgc_pad");
}

static void test_pad_integer_and_transposed_input(void **state)
{
    (void)state;
    tgc_tensor *x = iota((const int64_t[]){2, 3}, 2, TGC_I32);
    tgc_tensor *xt = tgc_transpose(x, 0, 1); /* 0 3 / 1 4 / 2 5 */
    tgc_tensor *p = tgc_pad(xt, (const int64_t[]){1, 0, 0, 1}, 2, 7.0);
    expect_shape(p, (const int64_t[]){4, 3}, 2);
    assert_int_equal(tgc_dtype_of(p), TGC_I32);
    expect_elements(p, (const double[]){7, 0, 3, 7, 1, 4, 7, 2, 5, 7, 7, 7}, 12);

    tgc_tensor *z = tgc_pad(x, (const int64_t[]){0, 0}, 1, 3.0);
    expect_elements(z, (const double[]){0, 1, 2, 3, 4, 5}, 6);
}

/* ---- flip ---- */

static void test_flip_reverses_named_dims(void **state)
{
    (void)state;
    tgc_tensor *x = iota((const int64_t[]){2, 3}, 2, TGC_F32); /* 0 1 2 / 3 4 5 */
    expect_elements(tgc_flip(x, (const int[]){1}, 1), (const double[]){2, 1, 0, 5, 4, 3}, 6);
    expect_elements(tgc_flip(x, (const int[]){0}, 1), (const double[]){3, 4, 5, 0, 1, 2}, 6);
    expect_elements(tgc_flip(x, (const int[]){-1, 0}, 2), (const double[]){5, 4, 3, 2, 1, 0}, 6);
    expect_elements(tgc_flip(x, NULL, 0), (const double[]){0, 1, 2, 3, 4, 5}, 6);
    /* a transposed i64 input: its own strides, reversed */
    tgc_tensor *t = tgc_flip(tgc_transpose(iota((const int64_t[]){2, 3}, 2, TGC_I64), 0, 1),
                             (const int[]){0}, 1); /* 2 5 / 1 4 / 0 3 */
    expect_shape(t, (const int64_t[]){3, 2}, 2);
    assert_int_equal(tgc_dtype_of(t), TGC_I64);
    expect_elements(t, (const double[]){2, 5, 1, 4, 0, 3}, 6);
    expect_shape(tgc_flip(iota((const int64_t[]){0, 3}, 2, TGC_F32), (const int[]){0, 1}, 2),
                 (const int64_t[]){0, 3}, 2);

    expect_error(tgc_flip(x, (const int[]){2}, 1), TGC_ERR_INVALID_ARG, "tgc_flip");
    expect_error(tgc_flip(x, (const int[]){1, -1}, 2), TGC_ERR_INVALID_ARG, "tgc_flip");
    expect_error(tgc_flip(x, NULL, 1), TGC_ERR_INVALID_ARG, "tgc_flip");
}

/* ---- embedding, gather, index_select ---- */

static void test_embedding_picks_rows(void **state)
{
    (void)state;
    tgc_tensor *w = iota((const int64_t[]){5, 3}, 2, TGC_F32);
    tgc_tensor *idx = ints((const int64_t[]){4, 0, 2, 2}, (const int64_t[]){2, 2}, 2, TGC_I64);
    tgc_tensor *e = tgc_embedding(w, idx);
    expect_shape(e, (const int64_t[]){2, 2, 3}, 3);
    assert_int_equal(tgc_dtype_of(e), TGC_F32);
    const double want[] = {12, 13, 14, 0, 1, 2, 6, 7, 8, 6, 7, 8};
    expect_elements(e, want, 12);

    /* i32 indices, transposed (non-contiguous) indices and weight */
    tgc_tensor *i32 = ints((const int64_t[]){4, 2, 0, 2}, (const int64_t[]){2, 2}, 2, TGC_I32);
    tgc_tensor *e2 = tgc_embedding(w, tgc_transpose(i32, 0, 1));
    expect_elements(e2, want, 12);

    tgc_tensor *wt = tgc_transpose(iota((const int64_t[]){3, 5}, 2, TGC_F16), 0, 1);
    tgc_tensor *e3 =
        tgc_embedding(wt, ints((const int64_t[]){1, 4}, (const int64_t[]){2}, 1, TGC_I64));
    assert_int_equal(tgc_dtype_of(e3), TGC_F16);
    expect_elements(e3, (const double[]){1, 6, 11, 4, 9, 14}, 6);

    tgc_tensor *none = tgc_embedding(w, iota((const int64_t[]){0}, 1, TGC_I64));
    expect_shape(none, (const int64_t[]){0, 3}, 2);
}

static void test_embedding_rejects_out_of_range_indices(void **state)
{
    (void)state;
    tgc_tensor *w = iota((const int64_t[]){5, 3}, 2, TGC_F32);
    tgc_tensor *idx =
        ints((const int64_t[]){0, 1, 2, 3, 7, 4}, (const int64_t[]){2, 3}, 2, TGC_I64);
    assert_null(tgc_embedding(w, idx));
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    assert_string_equal(tgc_last_error(),
                        "tgc_embedding: index 7 out of range [0, 5) at position 4");
    tgc_clear_error();

    tgc_tensor *neg = ints((const int64_t[]){-1}, (const int64_t[]){1}, 1, TGC_I32);
    assert_null(tgc_embedding(w, neg));
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    assert_string_equal(tgc_last_error(),
                        "tgc_embedding: index -1 out of range [0, 5) at position 0");
    tgc_clear_error();

    /* the position counts in idx's row-major order, also for a transposed idx */
    tgc_tensor *t =
        tgc_transpose(ints((const int64_t[]){0, 5, 1, 2}, (const int64_t[]){2, 2}, 2, TGC_I64), 0,
                      1); /* row-major: 0 1 5 2 */
    assert_null(tgc_embedding(w, t));
    assert_string_equal(tgc_last_error(),
                        "tgc_embedding: index 5 out of range [0, 5) at position 2");
    tgc_clear_error();

    expect_error(tgc_embedding(w, iota((const int64_t[]){2}, 1, TGC_F32)), TGC_ERR_DTYPE,
                 "tgc_embedding");
    expect_error(tgc_embedding(iota((const int64_t[]){5}, 1, TGC_F32), idx), TGC_ERR_SHAPE,
                 "tgc_embedding");
}

static void test_gather_along_each_dim(void **state)
{
    (void)state;
    tgc_tensor *t = iota((const int64_t[]){3, 4}, 2, TGC_F32); /* t[i][j] = 4i + j */
    tgc_tensor *i0 =
        ints((const int64_t[]){2, 0, 1, 2, 0, 0, 0, 1}, (const int64_t[]){2, 4}, 2, TGC_I64);
    tgc_tensor *g0 = tgc_gather(t, 0, i0);
    expect_shape(g0, (const int64_t[]){2, 4}, 2);
    expect_elements(g0, (const double[]){8, 1, 6, 11, 0, 1, 2, 7}, 8);

    tgc_tensor *i1 = ints((const int64_t[]){3, 0, 1, 1, 2, 3}, (const int64_t[]){3, 2}, 2, TGC_I32);
    tgc_tensor *g1 = tgc_gather(t, -1, i1);
    expect_elements(g1, (const double[]){3, 0, 5, 5, 10, 11}, 6);

    /* smaller index than input along the other dim, transposed input */
    tgc_tensor *tt = tgc_transpose(t, 0, 1); /* [4, 3], tt[i][j] = 4j + i */
    tgc_tensor *i2 = ints((const int64_t[]){2, 0}, (const int64_t[]){1, 2}, 2, TGC_I64);
    tgc_tensor *g2 = tgc_gather(tt, 0, i2);
    expect_elements(g2, (const double[]){2, 4}, 2);

    tgc_tensor *bad = ints((const int64_t[]){0, 1, 2, 4}, (const int64_t[]){2, 2}, 2, TGC_I64);
    assert_null(tgc_gather(t, 1, bad));
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    assert_string_equal(tgc_last_error(), "tgc_gather: index 4 out of range [0, 4) at position 3");
    tgc_clear_error();

    expect_error(
        tgc_gather(t, 0,
                   ints((const int64_t[]){0, 0, 0, 0, 0}, (const int64_t[]){1, 5}, 2, TGC_I64)),
        TGC_ERR_SHAPE, "tgc_gather");
}

static void test_index_select_picks_positions(void **state)
{
    (void)state;
    tgc_tensor *t = iota((const int64_t[]){3, 4}, 2, TGC_I64);
    tgc_tensor *idx = ints((const int64_t[]){3, 0, 3}, (const int64_t[]){3}, 1, TGC_I32);
    tgc_tensor *c = tgc_index_select(t, 1, idx);
    expect_shape(c, (const int64_t[]){3, 3}, 2);
    expect_elements(c, (const double[]){3, 0, 3, 7, 4, 7, 11, 8, 11}, 9);

    tgc_tensor *r = tgc_index_select(
        tgc_transpose(t, 0, 1), 0, ints((const int64_t[]){1, 1}, (const int64_t[]){2}, 1, TGC_I64));
    expect_shape(r, (const int64_t[]){2, 3}, 2);
    expect_elements(r, (const double[]){1, 5, 9, 1, 5, 9}, 6);

    tgc_tensor *e = tgc_index_select(t, 0, iota((const int64_t[]){0}, 1, TGC_I64));
    expect_shape(e, (const int64_t[]){0, 4}, 2);

    tgc_tensor *neg = ints((const int64_t[]){0, -2}, (const int64_t[]){2}, 1, TGC_I64);
    assert_null(tgc_index_select(t, 0, neg));
    assert_int_equal(tgc_last_status(), TGC_ERR_INVALID_ARG);
    assert_string_equal(tgc_last_error(),
                        "tgc_index_select: index -2 out of range [0, 3) at position 1");
    tgc_clear_error();

    expect_error(tgc_index_select(t, 2, idx), TGC_ERR_INVALID_ARG, "tgc_index_select");
}

/* ---- randomized view chains ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static int64_t rnd(int64_t n) /* uniform in [0, n) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (int64_t)(rng_state % (uint64_t)n);
}

/* The i-th row-major element of t, read through its own strides (the oracle). */
static double elem(const tgc_tensor *t, int64_t i)
{
    return tgc_load(tgc_host_data(t), t->dtype, tgc_tensor_elem_offset(t, i));
}

static void expect_same_elements(const tgc_tensor *got, const tgc_tensor *want)
{
    assert_non_null(got);
    int64_t n = tgc_numel(want);
    assert_int_equal(tgc_numel(got), n);
    for (int64_t i = 0; i < n; i++)
        if (elem(got, i) != elem(want, i))
            fail_msg("element %lld: got %g, want %g", (long long)i, elem(got, i), elem(want, i));
}

/* One random view op applied to t (t itself when the draw does not apply). */
static tgc_tensor *random_view(tgc_tensor *t)
{
    int nd = tgc_ndim(t);
    int64_t shape[TGC_MAX_DIMS];
    tgc_shape(t, shape);
    switch (rnd(6)) {
    case 0: {
        int perm[TGC_MAX_DIMS];
        for (int d = 0; d < nd; d++)
            perm[d] = d;
        for (int d = nd - 1; d > 0; d--) {
            int j = (int)rnd(d + 1), x = perm[d];
            perm[d] = perm[j];
            perm[j] = x;
        }
        return tgc_permute(t, perm, nd);
    }
    case 1: {
        if (nd == 0)
            return t;
        int d = (int)rnd(nd);
        int64_t start = rnd(2 * shape[d] + 3) - shape[d] - 1; /* in and out of range */
        return tgc_slice(t, d, start, rnd(2) ? INT64_MAX : rnd(8) - 2, 1 + rnd(3));
    }
    case 2: return nd < TGC_MAX_DIMS - 1 ? tgc_unsqueeze(t, (int)rnd(nd + 1)) : t;
    case 3: return tgc_squeeze(t, nd && rnd(2) ? (int)rnd(nd) : TGC_ALL_DIMS);
    case 4: {
        int64_t to[TGC_MAX_DIMS];
        int lead = nd < TGC_MAX_DIMS - 1 ? (int)rnd(2) : 0;
        for (int d = 0; d < lead; d++)
            to[d] = 1 + rnd(3);
        for (int d = 0; d < nd; d++)
            to[lead + d] = shape[d] == 1 ? 1 + rnd(4) : -1;
        return tgc_expand(t, to, nd + lead);
    }
    default: return nd >= 2 ? tgc_transpose(t, (int)rnd(nd), (int)rnd(nd)) : t;
    }
}

static void test_random_view_chains_copy_like_elementwise_reads(void **state)
{
    (void)state;
    const tgc_dtype dts[] = {TGC_F32, TGC_I64, TGC_F16, TGC_I32, TGC_BOOL, TGC_BF16};
    for (int iter = 0; iter < 400; iter++) {
        tgc_scope_push();
        int nd = 1 + (int)rnd(4);
        int64_t shape[TGC_MAX_DIMS];
        for (int d = 0; d < nd; d++)
            shape[d] = rnd(10) == 0 ? 0 : 1 + rnd(6);
        tgc_tensor *v = iota(shape, nd, dts[rnd(N_OF(dts))]);
        for (int k = 1 + (int)rnd(4); k > 0; k--)
            v = random_view(v);
        assert_non_null(v);

        tgc_tensor *c = tgc_contiguous(v);
        assert_true(tgc_is_contiguous(c));
        expect_same_elements(c, v);
        expect_same_elements(tgc_reshape(v, (const int64_t[]){-1}, 1), v);

        /* a random factorization of numel: a view when the chunks allow, else a copy */
        int64_t n = tgc_numel(v), to[TGC_MAX_DIMS], rem = n;
        int nt = 0;
        while (rem > 1 && nt < TGC_MAX_DIMS - 2) {
            int64_t f = 1 + rnd(rem);
            while (rem % f)
                f--;
            to[nt++] = f;
            rem /= f;
            if (rnd(3) == 0)
                to[nt++] = 1;
        }
        to[nt++] = rem;
        if (n > 0)
            expect_same_elements(tgc_reshape(v, to, nt), v);

        if (tgc_ndim(v) > 0) {
            tgc_tensor *two = tgc_cat((tgc_tensor *[]){v, c}, 2, 0);
            assert_non_null(two);
            for (int64_t i = 0; i < n; i++) {
                assert_true(elem(two, i) == elem(v, i));
                assert_true(elem(two, n + i) == elem(v, i));
            }
        }
        assert_int_equal(tgc_scope_pop(), TGC_OK);
    }
}

/* ---- the kernel entry points, called directly ---- */

/* The interp copies any view op into a preallocated out when a backend asks it to. */
static void test_interp_copies_any_view_op_into_out(void **state)
{
    (void)state;
    tgc_tensor *x = iota((const int64_t[]){2, 1, 4}, 3, TGC_F32);
    tgc_tensor *views[] = {
        tgc_permute(x, (const int[]){2, 0, 1}, 3),
        tgc_expand(x, (const int64_t[]){3, 2, 3, 4}, 4),
        tgc_squeeze(x, 1),
        tgc_unsqueeze(x, 3),
        tgc_slice(x, 2, 1, 4, 2),
        tgc_flatten(x, 0, 1),
        tgc_contiguous(x),
        tgc_reshape(x, (const int64_t[]){4, 2}, 2),
    };
    const tgc_op ops[] = {TGC_OP_PERMUTE, TGC_OP_EXPAND,  TGC_OP_SQUEEZE,    TGC_OP_UNSQUEEZE,
                          TGC_OP_SLICE,   TGC_OP_FLATTEN, TGC_OP_CONTIGUOUS, TGC_OP_RESHAPE};
    tgc_attrs at[N_OF(ops)];
    memset(at, 0, sizeof at);
    at[0].i[0] = 2, at[0].i[1] = 0, at[0].i[2] = 1, at[0].ni = 3;
    at[1].i[0] = 3, at[1].i[1] = 2, at[1].i[2] = 3, at[1].i[3] = 4, at[1].ni = 4;
    at[2].i[0] = 1, at[2].ni = 1;
    at[3].i[0] = 3, at[3].ni = 1;
    at[4].i[0] = 2, at[4].i[1] = 1, at[4].i[2] = 4, at[4].i[3] = 2, at[4].ni = 4;
    at[5].i[0] = 0, at[5].i[1] = 1, at[5].ni = 2;
    at[7].i[0] = 4, at[7].i[1] = 2, at[7].ni = 2;
    for (int k = 0; k < N_OF(ops); k++) {
        int64_t shape[TGC_MAX_DIMS];
        int nd = tgc_shape(views[k], shape);
        tgc_tensor *out = tgc_tensor_new(shape, nd, TGC_F32, tgc_cpu());
        assert_non_null(out);
        assert_int_equal(tgc_interp_movement(ops[k], &x, 1, &at[k], out), TGC_OK);
        expect_same_elements(out, views[k]);
    }
}

/* Overlapping source and destination (x[1:] = x[:-1]) read the source before writing. */
static void test_interp_copy_handles_overlap_and_reshaped_layouts(void **state)
{
    (void)state;
    tgc_tensor *x = iota((const int64_t[]){6}, 1, TGC_I32);
    tgc_tensor *hi = tgc_slice(x, 0, 1, 6, 1), *lo = tgc_slice(x, 0, 0, 5, 1);
    assert_int_equal(tgc_tensor_copy(hi, lo), TGC_OK);
    expect_elements(x, (const double[]){0, 0, 1, 2, 3, 4}, 6);
    assert_int_equal(tgc_tensor_copy(x, x), TGC_OK);
    expect_elements(x, (const double[]){0, 0, 1, 2, 3, 4}, 6);

    /* in place transpose of a square tensor */
    tgc_tensor *m = iota((const int64_t[]){3, 3}, 2, TGC_F32);
    assert_int_equal(tgc_tensor_copy(m, tgc_transpose(m, 0, 1)), TGC_OK);
    expect_elements(m, (const double[]){0, 3, 6, 1, 4, 7, 2, 5, 8}, 9);

    /* both sides strided with different shapes: element order is row-major on each side */
    tgc_tensor *a = iota((const int64_t[]){4, 3}, 2, TGC_F32);
    tgc_tensor *b = tgc_zeros((const int64_t[]){4, 2}, 2, TGC_I64, tgc_cpu());
    tgc_tensor *bt = tgc_transpose(b, 0, 1);   /* [2, 4], bt[i][j] = b[j][i] */
    tgc_tensor *a2 = tgc_slice(a, 1, 0, 2, 1); /* 0 1 3 4 6 7 9 10 */
    assert_int_equal(tgc_tensor_copy(bt, a2), TGC_OK);
    expect_elements(b, (const double[]){0, 6, 1, 7, 3, 9, 4, 10}, 8);

    assert_int_equal(tgc_tensor_copy(a, x), TGC_ERR_SHAPE);
    tgc_clear_error();
}

static void test_interp_movement_rejects_other_ops(void **state)
{
    (void)state;
    tgc_tensor *x = iota((const int64_t[]){2, 2}, 2, TGC_F32);
    tgc_tensor *out = tgc_tensor_new((const int64_t[]){2, 2}, 2, TGC_F32, tgc_cpu());
    tgc_attrs at;
    memset(&at, 0, sizeof at);
    assert_int_equal(tgc_interp_movement(TGC_OP_NEG, &x, 1, &at, out), TGC_ERR_INTERNAL);
    assert_non_null(strstr(tgc_last_error(), "neg"));
    tgc_clear_error();
    /* an output that does not fit the inputs is reported, never written out of bounds */
    tgc_tensor *small = tgc_tensor_new((const int64_t[]){2, 3}, 2, TGC_F32, tgc_cpu());
    at.i[0] = 1;
    assert_int_equal(tgc_interp_movement(TGC_OP_CAT, (tgc_tensor *[]){x, x}, 2, &at, small),
                     TGC_ERR_INTERNAL);
    tgc_clear_error();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, scope_setup, scope_teardown)
        T(test_reshape_zero_copies_dim_and_minus_one_is_inferred),
        T(test_reshape_of_contiguous_is_a_view),
        T(test_reshape_of_transposed_copies),
        T(test_reshape_of_sliced_input_views_when_chunks_allow),
        T(test_reshape_size_one_empty_and_scalar),
        T(test_reshape_rejects_bad_targets),
        T(test_permute_and_transpose_swap_strides),
        T(test_permute_rejects_non_permutations),
        T(test_expand_stretches_with_stride_zero),
        T(test_squeeze_removes_size_one_dims),
        T(test_unsqueeze_inserts_size_one_dim),
        T(test_slice_follows_python_rules),
        T(test_slice_inner_dim_shares_storage),
        T(test_flatten_views_contiguous_and_copies_otherwise),
        T(test_contiguous_returns_view_or_row_major_copy),
        T(test_large_transposed_copy),
        T(test_cat_promotes_dtypes_and_skips_empty_pieces),
        T(test_stack_adds_a_dim),
        T(test_pad_constant_and_negative_crop),
        T(test_pad_integer_and_transposed_input),
        T(test_flip_reverses_named_dims),
        T(test_embedding_picks_rows),
        T(test_embedding_rejects_out_of_range_indices),
        T(test_gather_along_each_dim),
        T(test_index_select_picks_positions),
        T(test_random_view_chains_copy_like_elementwise_reads),
        T(test_interp_copies_any_view_op_into_out),
        T(test_interp_copy_handles_overlap_and_reshaped_layouts),
        T(test_interp_movement_rejects_other_ops),
#undef T
    };
    return cmocka_run_group_tests(tests, NULL, group_teardown);
}
