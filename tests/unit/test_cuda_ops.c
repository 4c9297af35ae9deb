/* The CUDA backend's native kernels for opaque ops (src/backend/cuda/cuda_ops.h).
 *
 * Everywhere (NVRTC is in the toolkit; skipped with a printed count when libnvrtc cannot be
 * opened): the whole kernel program compiles for sm_90 and defines every kernel the host
 * launches; tgc_cuda_op_supported answers for every op of ops.def.
 *
 * With a GPU (tgc_cuda_is_available(); otherwise skipped with a printed count): every
 * op family runs through tgc_cuda_op_run on device copies of CPU inputs (strided, permuted,
 * offset and broadcast views included, odd sizes) and equals interp (tgc_interp_run_node on
 * the CPU inputs) within the dtype's tolerance; out-of-range indices and targets give
 * interp's status and message; rand and dropout are bit-equal to interp after the same
 * tgc_rng_seed; batch_norm in training updates the running stats like interp. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gpu_skip.h"
#include "unit_test_util.h"

#ifdef TGC_HAVE_CUDA

#include <math.h>

#include "backend/cuda/cuda_attention.h"
#include "backend/cuda/cuda_nvrtc.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_program.h"
#include "backend/interp/interp.h"
#include "backend/plan.h"
#include "ir/shape_infer.h"
#include "runtime/philox.h"
#include "tensor/copy.h"
#include "tensor/tensor_impl.h"
#include "tgc/cuda.h"
#include "tgc/ops.h"

#ifdef TGC_CUDA_OPS_EMU
void tgc_ops_emu_init(void);
#endif

static int g_nvrtc;
static char g_nvrtc_reason[512];
static int g_nvrtc_skipped;

#define NEED_GPU() GPU_REQUIRE()

/* ---- (a) the program and the support table ---- */

static void test_program_compiles(void **state)
{
    (void)state;
    if (!g_nvrtc) {
        g_nvrtc_skipped++;
        skip();
    }
    char *src = tgc_cuda_ops_source();
    assert_non_null(src);
    int n;
    const char *const *names = tgc_cuda_ops_kernel_names(&n);
    assert_true(n > 10);
    for (int k = 0; k < n; k++) {
        char decl[128];
        snprintf(decl, sizeof decl, "extern \"C\" __global__ void %s(", names[k]);
        if (!strstr(src, decl))
            fail_msg("the program does not define kernel %s", names[k]);
    }
    /* the op numbers the kernels switch on are ops.def's */
    char def[64];
    snprintf(def, sizeof def, "#define OP_CAST %d\n", (int)TGC_OP_CAST);
    assert_non_null(strstr(src, def));
    snprintf(def, sizeof def, "#define DT_BF16 %d\n", (int)TGC_BF16);
    assert_non_null(strstr(src, def));
    const tgc_cuda_program *prog = NULL;
    tgc_status s = tgc_cuda_program_get("tgc_cuda_ops", src, 90, NULL, &prog);
    free(src);
    if (s != TGC_OK)
        fail_msg("NVRTC rejected the native-op program: %s", tgc_last_error());
    size_t size = 0;
    assert_non_null(tgc_cuda_program_image(prog, &size));
    assert_true(size > 1000);
}

static void test_supported_table(void **state)
{
    (void)state;
    for (int op = 0; op < TGC_OP_COUNT; op++) {
        tgc_node nd;
        memset(&nd, 0, sizeof nd);
        nd.op = (tgc_op)op;
        nd.n_in = tgc_op_info_of(nd.op)->min_inputs;
        nd.out.dtype = TGC_F32;
        nd.out.ndim = 1;
        nd.out.shape[0] = 4;
        int want = 1;
        if (op == TGC_OP_INPUT)
            want = 0;
        else if (op == TGC_OP_SDPA)
            want = tgc_cuda_attention_supported(&nd);
        else if (op == TGC_OP_LOGSUMEXP || op == TGC_OP_RMS_NORM || op == TGC_OP_GROUP_NORM)
            want = 0; /* compiled as their decompositions: no native kernel */
        if (tgc_cuda_op_supported(&nd) != want)
            fail_msg("tgc_cuda_op_supported(%s) is %d, expected %d", tgc_op_name(nd.op),
                     tgc_cuda_op_supported(&nd), want);
        /* every dtype of the result */
        for (int dt = 0; want && op != TGC_OP_SDPA && dt < TGC_DTYPE_COUNT; dt++) {
            nd.out.dtype = (tgc_dtype)dt;
            assert_int_equal(tgc_cuda_op_supported(&nd), 1);
        }
    }
    tgc_node nd;
    memset(&nd, 0, sizeof nd);
    nd.op = TGC_OP_NLL_LOSS;
    nd.attrs.i[0] = 7; /* no such reduction */
    assert_int_equal(tgc_cuda_op_supported(&nd), 0);
    assert_int_equal(tgc_cuda_op_supported(NULL), 0);
    /* a host launch env is refused without an error kept */
    nd.attrs.i[0] = TGC_REDUCE_SUM;
    tgc_launch_env env;
    memset(&env, 0, sizeof env);
    env.device = tgc_cpu();
    tgc_tensor *out = (tgc_tensor *)&nd;
    assert_int_equal(tgc_cuda_op_run(&nd, NULL, NULL, &out, &env), TGC_ERR_UNSUPPORTED);
    assert_null(out);
    assert_int_equal(tgc_last_status(), TGC_OK);
}

/* ---- helpers for the GPU tests ---- */

static uint64_t g_lcg = 0x9E3779B97F4A7C15ull;
static double rnd(void)
{
    g_lcg = g_lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(g_lcg >> 11) * 0x1p-53;
}

/* A contiguous CPU tensor of values fit for dt: floats in [-3, 3), integers in [lo, hi). */
static tgc_tensor *cpu_rand(tgc_dtype dt, const int64_t *shape, int nd, int64_t lo, int64_t hi)
{
    tgc_tensor *t = tgc_empty(shape, nd, dt, tgc_cpu());
    assert_non_null(t);
    int64_t n = tgc_shape_numel(shape, nd);
    for (int64_t i = 0; i < n; i++) {
        double v;
        if (tgc_dtype_is_float(dt))
            v = rnd() * 6.0 - 3.0;
        else if (dt == TGC_BOOL)
            v = rnd() < 0.5;
        else
            v = (double)(lo + (int64_t)(rnd() * (double)(hi - lo)));
        tgc_store(tgc_host_data(t), dt, i, v);
    }
    return t;
}

static tgc_tensor *cpu_f(tgc_dtype dt, const int64_t *shape, int nd)
{
    return cpu_rand(dt, shape, nd, -5, 6);
}

/* A transposed view (last two dims swapped) of a fresh tensor: the result has `shape`. */
static tgc_tensor *cpu_transposed(tgc_dtype dt, const int64_t *shape, int nd)
{
    int64_t bs[TGC_MAX_DIMS], st[TGC_MAX_DIMS];
    memcpy(bs, shape, sizeof(int64_t) * (size_t)nd);
    bs[nd - 1] = shape[nd - 2];
    bs[nd - 2] = shape[nd - 1];
    tgc_tensor *b = cpu_f(dt, bs, nd);
    memcpy(st, b->strides, sizeof st);
    st[nd - 1] = b->strides[nd - 2];
    st[nd - 2] = b->strides[nd - 1];
    return tgc_tensor_view(b, shape, st, nd, 0);
}

/* A view at offset 3 with every stride doubled (an odd, gapped layout). */
static tgc_tensor *cpu_gapped(tgc_dtype dt, const int64_t *shape, int nd)
{
    int64_t n = tgc_shape_numel(shape, nd) * 2 + 8, st[TGC_MAX_DIMS];
    tgc_tensor *b = cpu_f(dt, &n, 1);
    tgc_row_major_strides(shape, nd, st);
    for (int d = 0; d < nd; d++)
        st[d] *= 2;
    return tgc_tensor_view(b, shape, st, nd, 3);
}

/* The same view over a device copy of t's whole storage. */
static tgc_tensor *dev_mirror(tgc_tensor *t)
{
    int64_t n = (int64_t)(t->storage->nbytes / tgc_dtype_size(t->dtype)), one = 1;
    if (n == 0)
        return tgc_to(t, tgc_cuda(0));
    tgc_tensor *flat = tgc_tensor_view(t, &n, &one, 1, 0);
    tgc_tensor *d = tgc_to(flat, tgc_cuda(0));
    assert_non_null(d);
    tgc_tensor *v = tgc_tensor_view(d, t->shape, t->strides, t->ndim, t->offset);
    assert_non_null(v);
    return v;
}

static int g_not_inferred; /* cases shape inference rejects (dtype not taken by the op) */

/* The node of op on inputs in; *ok = 0 when inference rejects the inputs. */
static tgc_node make_node_ok(tgc_op op, tgc_tensor *const *in, int n_in, const tgc_attrs *a,
                             int64_t *shape, int *ok)
{
    tgc_vinfo vin[64];
    for (int k = 0; k < n_in; k++) {
        vin[k].dtype = in[k]->dtype;
        vin[k].ndim = in[k]->ndim;
        for (int d = 0; d < in[k]->ndim; d++)
            vin[k].shape[d] = in[k]->shape[d];
    }
    tgc_node nd;
    memset(&nd, 0, sizeof nd);
    nd.op = op;
    nd.n_in = n_in;
    nd.attrs = *a;
    *ok = tgc_infer(op, vin, n_in, a, NULL, &nd.out) == TGC_OK;
    if (!*ok)
        tgc_clear_error();
    for (int d = 0; *ok && d < nd.out.ndim; d++)
        shape[d] = nd.out.shape[d];
    return nd;
}

static tgc_node make_node(tgc_op op, tgc_tensor *const *in, int n_in, const tgc_attrs *a,
                          int64_t *shape)
{
    int ok;
    tgc_node nd = make_node_ok(op, in, n_in, a, shape, &ok);
    if (!ok)
        fail_msg("inference of %s failed", tgc_op_name(op));
    return nd;
}

static double tol_of(tgc_dtype dt)
{
    switch (dt) {
    case TGC_F64: return 1e-12;
    case TGC_F32: return 2e-6;
    case TGC_F16: return 2e-3;
    case TGC_BF16: return 1.6e-2;
    default: return 0;
    }
}

/* got (contiguous host copy of the GPU result) equals ref (interp's, any layout) */
static void compare(const char *what, const tgc_tensor *ref, const tgc_tensor *got, double tol)
{
    assert_int_equal(got->dtype, ref->dtype);
    assert_int_equal(got->ndim, ref->ndim);
    for (int d = 0; d < ref->ndim; d++)
        assert_int_equal(got->shape[d], ref->shape[d]);
    int64_t n = tgc_shape_numel(ref->shape, ref->ndim);
    for (int64_t i = 0; i < n; i++) {
        double r = tgc_load(tgc_host_data(ref), ref->dtype, tgc_tensor_elem_offset(ref, i));
        double g = tgc_load(tgc_host_data(got), got->dtype, tgc_tensor_elem_offset(got, i));
        if (ref->dtype == TGC_I64) { /* exactly, beyond 2^53 */
            int64_t ri = ((const int64_t *)tgc_host_data(ref))[tgc_tensor_elem_offset(ref, i)];
            int64_t gi = ((const int64_t *)tgc_host_data(got))[tgc_tensor_elem_offset(got, i)];
            if (ri != gi)
                fail_msg("%s: element %lld is %lld, interp has %lld", what, (long long)i,
                         (long long)gi, (long long)ri);
            continue;
        }
        if (isnan(r) && isnan(g))
            continue;
        if (r == g)
            continue;
        if (tol > 0 && !isinf(r) && fabs(g - r) <= tol * (1.0 + fabs(r)))
            continue;
        fail_msg("%s (%s): element %lld is %.17g, interp has %.17g", what,
                 tgc_dtype_name(ref->dtype), (long long)i, g, r);
    }
}

/* Runs op on the CPU inputs with interp and on device mirrors with tgc_cuda_op_run; both
 * succeed and agree within tol (< 0: the dtype's tolerance), or both fail alike. Returns the
 * GPU result copied to the host (NULL when both failed). */
static tgc_tensor *check_op_tol(const char *what, tgc_op op, tgc_tensor *const *in, int n_in,
                                const tgc_attrs *a, double tol)
{
    int64_t shape[TGC_MAX_DIMS];
    int ok;
    tgc_node nd = make_node_ok(op, in, n_in, a, shape, &ok);
    if (!ok) {
        g_not_inferred++;
        return NULL;
    }
    tgc_clear_error();
    tgc_tensor *ref = tgc_interp_run_node(&nd, in, shape);
    tgc_status rs = ref ? TGC_OK : tgc_last_status();
    char rmsg[512];
    snprintf(rmsg, sizeof rmsg, "%s", tgc_last_error());
    tgc_tensor *dev[64];
    for (int k = 0; k < n_in; k++)
        dev[k] = dev_mirror(in[k]);
    tgc_launch_env env;
    memset(&env, 0, sizeof env);
    env.device = tgc_cuda(0);
    tgc_tensor *out = NULL;
    tgc_clear_error();
    tgc_status s = tgc_cuda_op_run(&nd, dev, shape, &out, &env);
    if (rs != TGC_OK) {
        if (s != rs || strcmp(rmsg, tgc_last_error()) != 0)
            fail_msg("%s: GPU gave %s \"%s\", interp %s \"%s\"", what, tgc_status_str(s),
                     tgc_last_error(), tgc_status_str(rs), rmsg);
        assert_null(out);
        tgc_clear_error();
        return NULL;
    }
    if (s != TGC_OK)
        fail_msg("%s: tgc_cuda_op_run failed: %s %s", what, tgc_status_str(s), tgc_last_error());
    assert_non_null(out);
    assert_int_equal(out->device.type, TGC_DEVICE_CUDA);
    assert_true(tgc_tensor_is_contiguous(out));
    tgc_tensor *host = tgc_to(out, tgc_cpu());
    assert_non_null(host);
    compare(what, ref, host, tol < 0 ? tol_of(ref->dtype) : tol);
    return host;
}

static tgc_tensor *check_op(const char *what, tgc_op op, tgc_tensor *const *in, int n_in,
                            const tgc_attrs *a)
{
    return check_op_tol(what, op, in, n_in, a, -1);
}

static tgc_attrs attrs_i(int ni, const int64_t *iv, int nf, const double *fv)
{
    tgc_attrs a;
    memset(&a, 0, sizeof a);
    a.ni = ni;
    a.nf = nf;
    for (int k = 0; k < ni; k++)
        a.i[k] = iv[k];
    for (int k = 0; k < nf; k++)
        a.f[k] = fv[k];
    return a;
}

static const tgc_dtype all_dt[] = {TGC_F32, TGC_F16, TGC_BF16, TGC_I32, TGC_I64, TGC_BOOL, TGC_F64};

/* ---- (b) GPU tests ---- */

static void test_gpu_pointwise(void **state)
{
    (void)state;
    NEED_GPU();
    const int64_t s3[3] = {3, 5, 7}, s_b[2] = {1, 7}, s2[2] = {5, 7};
    tgc_attrs none;
    memset(&none, 0, sizeof none);
    static const tgc_op bin[] = {TGC_OP_ADD,     TGC_OP_SUB,     TGC_OP_MUL, TGC_OP_DIV, TGC_OP_POW,
                                 TGC_OP_MAXIMUM, TGC_OP_MINIMUM, TGC_OP_EQ,  TGC_OP_NE,  TGC_OP_LT,
                                 TGC_OP_LE,      TGC_OP_GT,      TGC_OP_GE};
    for (size_t o = 0; o < sizeof bin / sizeof bin[0]; o++)
        for (size_t i = 0; i < sizeof all_dt / sizeof all_dt[0]; i++) {
            tgc_dtype da = all_dt[i], db = all_dt[(i + 3) % 7];
            if (da == TGC_BOOL && db == TGC_BOOL)
                continue;
            tgc_tensor *in[2] = {cpu_transposed(da, s3, 3), cpu_gapped(db, s_b, 2)};
            char what[96];
            snprintf(what, sizeof what, "%s(%s, %s)", tgc_op_name(bin[o]), tgc_dtype_name(da),
                     tgc_dtype_name(db));
            check_op(what, bin[o], in, 2, &none);
            tgc_tensor *same[2] = {cpu_f(da, s2, 2), cpu_transposed(da, s2, 2)};
            if (da != TGC_BOOL)
                check_op(what, bin[o], same, 2, &none);
        }
    static const tgc_op un[] = {TGC_OP_NEG,  TGC_OP_ABS,   TGC_OP_EXP,       TGC_OP_LOG,
                                TGC_OP_SQRT, TGC_OP_RSQRT, TGC_OP_TANH,      TGC_OP_SIGMOID,
                                TGC_OP_RELU, TGC_OP_GELU,  TGC_OP_GELU_TANH, TGC_OP_SILU,
                                TGC_OP_ERF};
    for (size_t o = 0; o < sizeof un / sizeof un[0]; o++)
        for (size_t i = 0; i < sizeof all_dt / sizeof all_dt[0]; i++) {
            if (all_dt[i] == TGC_BOOL && un[o] == TGC_OP_NEG)
                continue;
            tgc_tensor *in[1] = {cpu_transposed(all_dt[i], s3, 3)};
            char what[96];
            snprintf(what, sizeof what, "%s(%s)", tgc_op_name(un[o]), tgc_dtype_name(all_dt[i]));
            check_op(what, un[o], in, 1, &none);
        }
    static const tgc_op sc[] = {TGC_OP_ADD_SCALAR, TGC_OP_SUB_SCALAR, TGC_OP_MUL_SCALAR,
                                TGC_OP_DIV_SCALAR, TGC_OP_POW_SCALAR, TGC_OP_CLAMP};
    static const double scal[][2] = {{2.0, 4.0}, {-1.5, 1.25}, {NAN, 1.0}, {1e300, -1e300}};
    for (size_t o = 0; o < sizeof sc / sizeof sc[0]; o++)
        for (size_t i = 0; i < sizeof all_dt / sizeof all_dt[0]; i++)
            for (size_t v = 0; v < 4; v++) {
                tgc_attrs a = attrs_i(0, NULL, 2, scal[v]);
                tgc_tensor *in[1] = {cpu_gapped(all_dt[i], s3, 3)};
                char what[96];
                snprintf(what, sizeof what, "%s(%s, %g)", tgc_op_name(sc[o]),
                         tgc_dtype_name(all_dt[i]), scal[v][0]);
                tgc_vinfo vi = {all_dt[i], 3, {3, 5, 7}}, vo;
                if (tgc_infer(sc[o], &vi, 1, &a, NULL, &vo) != TGC_OK) {
                    tgc_clear_error();
                    continue;
                }
                check_op(what, sc[o], in, 1, &a);
            }
    /* where with broadcast condition and mixed value dtypes */
    for (size_t i = 0; i < sizeof all_dt / sizeof all_dt[0]; i++) {
        tgc_tensor *in[3] = {cpu_f(TGC_BOOL, s_b, 2), cpu_transposed(all_dt[i], s2, 2),
                             cpu_f(all_dt[(i + 1) % 7], s2, 2)};
        check_op("where", TGC_OP_WHERE, in, 3, &none);
    }
}

static void test_gpu_cast(void **state)
{
    (void)state;
    NEED_GPU();
    const int64_t s[2] = {9, 13};
    for (size_t i = 0; i < 7; i++)
        for (size_t j = 0; j < 7; j++) {
            tgc_tensor *x = cpu_transposed(all_dt[i], s, 2);
            /* specials: NaN, infinities, huge and negative values */
            if (tgc_dtype_is_float(all_dt[i])) {
                static const double sp[] = {NAN,  INFINITY, -INFINITY, 3e9,     -3e9, 1e20,
                                            -0.0, 65519.0,  65520.0,   70000.0, 2.5,  -2.5};
                for (size_t k = 0; k < sizeof sp / sizeof sp[0]; k++)
                    tgc_store(tgc_host_data(x), all_dt[i],
                              tgc_tensor_elem_offset(x, (int64_t)k * 7), sp[k]);
            } else if (all_dt[i] == TGC_I64) {
                ((int64_t *)tgc_host_data(x))[tgc_tensor_elem_offset(x, 0)] = INT64_MAX;
                ((int64_t *)tgc_host_data(x))[tgc_tensor_elem_offset(x, 1)] = INT64_MIN + 1;
                ((int64_t *)tgc_host_data(x))[tgc_tensor_elem_offset(x, 2)] = 5000000000ll;
            }
            tgc_attrs a;
            memset(&a, 0, sizeof a);
            a.dtype = all_dt[j];
            char what[64];
            snprintf(what, sizeof what, "cast %s -> %s", tgc_dtype_name(all_dt[i]),
                     tgc_dtype_name(all_dt[j]));
            check_op_tol(what, TGC_OP_CAST, &x, 1, &a, 0); /* conversions are exact */
        }
}

static void test_gpu_views_and_movement(void **state)
{
    (void)state;
    NEED_GPU();
    const int64_t s3[3] = {4, 3, 5};
    tgc_tensor *x = cpu_transposed(TGC_F32, s3, 3);
    int64_t perm[3] = {2, 0, 1};
    tgc_attrs a = attrs_i(3, perm, 0, NULL);
    check_op("permute copy", TGC_OP_PERMUTE, &x, 1, &a);
    int64_t tgt[2] = {12, 5};
    a = attrs_i(2, tgt, 0, NULL);
    check_op("reshape copy", TGC_OP_RESHAPE, &x, 1, &a);
    tgc_attrs none;
    memset(&none, 0, sizeof none);
    check_op("contiguous", TGC_OP_CONTIGUOUS, &x, 1, &none);
    /* cat: mixed dtypes, a permuted piece, an empty piece, along each dim */
    for (int dim = 0; dim < 3; dim++) {
        int64_t sa[3] = {4, 3, 5}, sb[3] = {4, 3, 5}, se[3] = {4, 3, 5};
        sa[dim] = 2;
        sb[dim] = 3;
        se[dim] = 0;
        tgc_tensor *in[3] = {cpu_transposed(TGC_F32, sa, 3), cpu_f(TGC_I32, se, 3),
                             cpu_gapped(TGC_I64, sb, 3)};
        int64_t d = dim;
        a = attrs_i(1, &d, 0, NULL);
        check_op("cat", TGC_OP_CAT, in, 3, &a);
        tgc_tensor *bf[2] = {cpu_f(TGC_BF16, sa, 3), cpu_gapped(TGC_BF16, sa, 3)};
        check_op("cat bf16", TGC_OP_CAT, bf, 2, &a);
    }
    /* cat of many dense pieces along the outer dim (one launch per 32 pieces): 1-d of odd
     * sizes (4-byte words), multiples of 4 floats (16-byte words), f16 odd sizes (bytes),
     * an empty piece, 2-d pieces */
    for (int variant = 0; variant < 4; variant++) {
        tgc_tensor *in[45];
        int n = variant == 3 ? 5 : 45;
        for (int k = 0; k < n; k++) {
            int64_t sz[2] = {variant == 1 ? 4 * (k % 7 + 1) : k % 9 == 4 ? 0 : 1 + 2 * (k % 5), 3};
            tgc_dtype dt = variant == 2 ? TGC_F16 : TGC_F32;
            in[k] = cpu_f(dt, sz, variant == 3 ? 2 : 1);
        }
        int64_t d = 0;
        a = attrs_i(1, &d, 0, NULL);
        check_op("cat of many dense pieces", TGC_OP_CAT, in, n, &a);
    }
    for (int dim = 0; dim < 4; dim++) {
        tgc_tensor *in[3] = {cpu_transposed(TGC_F16, s3, 3), cpu_f(TGC_F16, s3, 3),
                             cpu_gapped(TGC_F16, s3, 3)};
        int64_t d = dim;
        a = attrs_i(1, &d, 0, NULL);
        check_op("stack", TGC_OP_STACK, in, 3, &a);
    }
    /* pad: positive, negative (crop), a value, on bool and int */
    int64_t pads[7] = {3, 1, 2, -1, 2, 0, 1};
    for (size_t i = 0; i < 7; i++) {
        double v = all_dt[i] == TGC_BOOL ? 1.0 : -7.0;
        a = attrs_i(7, pads, 1, &v);
        tgc_tensor *in[1] = {cpu_transposed(all_dt[i], s3, 3)};
        check_op("pad", TGC_OP_PAD, in, 1, &a);
    }
    /* flip (the native fallback): reversed dims of transposed inputs, every dtype */
    for (size_t i = 0; i < 7; i++) {
        int64_t mask = i % 2 ? 5 : 2;
        a = attrs_i(1, &mask, 0, NULL);
        tgc_tensor *in[1] = {cpu_transposed(all_dt[i], s3, 3)};
        check_op("flip", TGC_OP_FLIP, in, 1, &a);
    }
}

static void test_gpu_indexing(void **state)
{
    (void)state;
    NEED_GPU();
    const int64_t ws[2] = {11, 6}, is[2] = {3, 4};
    tgc_attrs none;
    memset(&none, 0, sizeof none);
    for (size_t i = 0; i < 7; i++) {
        tgc_tensor *in[2] = {cpu_transposed(all_dt[i], ws, 2),
                             cpu_rand(i % 2 ? TGC_I32 : TGC_I64, is, 2, 0, 11)};
        check_op("embedding", TGC_OP_EMBEDDING, in, 2, &none);
    }
    /* out of range: interp's status and message */
    tgc_tensor *bad[2] = {cpu_f(TGC_F32, ws, 2), cpu_rand(TGC_I64, is, 2, 0, 11)};
    ((int64_t *)tgc_host_data(bad[1]))[5] = 11;
    ((int64_t *)tgc_host_data(bad[1]))[9] = -1;
    assert_null(check_op("embedding out of range", TGC_OP_EMBEDDING, bad, 2, &none));
    const int64_t ts[3] = {5, 7, 4}, ones[1] = {9};
    for (int dim = 0; dim < 3; dim++) {
        int64_t d = dim;
        tgc_attrs a = attrs_i(1, &d, 0, NULL);
        tgc_tensor *in[2] = {cpu_gapped(TGC_F64, ts, 3), cpu_rand(TGC_I32, ones, 1, 0, ts[dim])};
        check_op("index_select", TGC_OP_INDEX_SELECT, in, 2, &a);
        ((int32_t *)tgc_host_data(in[1]))[7] = (int32_t)ts[dim];
        assert_null(check_op("index_select out of range", TGC_OP_INDEX_SELECT, in, 2, &a));
        int64_t gs[3] = {4, 6, 3};
        tgc_tensor *g[2] = {cpu_transposed(TGC_I64, ts, 3), cpu_rand(TGC_I64, gs, 3, 0, ts[dim])};
        check_op("gather", TGC_OP_GATHER, g, 2, &a);
        ((int64_t *)tgc_host_data(g[1]))[13] = -3;
        assert_null(check_op("gather out of range", TGC_OP_GATHER, g, 2, &a));
    }
}

static void test_gpu_reductions(void **state)
{
    (void)state;
    NEED_GPU();
    const int64_t s[4] = {3, 5, 2, 37};
    static const tgc_op ops[] = {TGC_OP_SUM, TGC_OP_MEAN, TGC_OP_MAX, TGC_OP_VAR};
    for (size_t o = 0; o < 4; o++)
        for (size_t i = 0; i < 7; i++)
            for (int64_t mask = 1; mask < 16; mask += 3)
                for (int keep = 0; keep < 2; keep++) {
                    int64_t iv[3] = {mask, keep, ops[o] == TGC_OP_VAR ? keep : 0};
                    tgc_attrs a = attrs_i(3, iv, 0, NULL);
                    tgc_tensor *x = cpu_rand(all_dt[i], s, 4, -1000000, 1000000);
                    tgc_tensor *xt = cpu_transposed(all_dt[i], s, 4);
                    char what[96];
                    snprintf(what, sizeof what, "%s(%s, mask %lld)", tgc_op_name(ops[o]),
                             tgc_dtype_name(all_dt[i]), (long long)mask);
                    check_op(what, ops[o], &x, 1, &a);
                    check_op(what, ops[o], &xt, 1, &a);
                }
    /* i64 sums beyond 2^53 wrap exactly; argmax with NaN and ties */
    const int64_t v[1] = {1000};
    tgc_tensor *big = cpu_rand(TGC_I64, v, 1, 0, 1);
    for (int k = 0; k < 1000; k++)
        ((int64_t *)tgc_host_data(big))[k] = INT64_MAX - k;
    int64_t iv[2] = {1, 0};
    tgc_attrs a = attrs_i(2, iv, 0, NULL);
    check_op("sum i64 wraps", TGC_OP_SUM, &big, 1, &a);
    for (size_t i = 0; i < 7; i++)
        for (int dim = 0; dim < 4; dim++) {
            int64_t ai[2] = {dim, dim & 1};
            tgc_attrs aa = attrs_i(2, ai, 0, NULL);
            tgc_tensor *x = cpu_rand(all_dt[i], s, 4, -3, 3); /* many ties */
            if (tgc_dtype_is_float(all_dt[i]) && dim == 3)
                for (int k = 5; k < 40; k += 9)
                    tgc_store(tgc_host_data(x), all_dt[i], k, NAN);
            check_op("argmax", TGC_OP_ARGMAX, &x, 1, &aa);
            tgc_tensor *xt = cpu_transposed(all_dt[i], s, 4);
            check_op("argmax transposed", TGC_OP_ARGMAX, &xt, 1, &aa);
        }
    /* softmax / log_softmax along every dim, strided, odd sizes, long rows */
    const int64_t ls[2] = {3, 3001};
    for (size_t i = 0; i < 7; i++)
        for (int dim = 0; dim < 4; dim++) {
            int64_t d = dim;
            tgc_attrs sa = attrs_i(1, &d, 0, NULL);
            tgc_tensor *x = cpu_transposed(all_dt[i], s, 4);
            check_op("softmax", TGC_OP_SOFTMAX, &x, 1, &sa);
            check_op("log_softmax", TGC_OP_LOG_SOFTMAX, &x, 1, &sa);
        }
    int64_t d1 = 1;
    tgc_attrs sa = attrs_i(1, &d1, 0, NULL);
    tgc_tensor *lx = cpu_f(TGC_F32, ls, 2);
    check_op("softmax long row", TGC_OP_SOFTMAX, &lx, 1, &sa);
    check_op("log_softmax long row", TGC_OP_LOG_SOFTMAX, &lx, 1, &sa);
}

/* batch_norm on x of shape xs [N, 3 or 4, H, W] (transposed: a strided view; offset added to
 * every x value), the running stats / weight / bias that bits name, against interp */
static void check_batch_norm(tgc_dtype dt, const int64_t *xs, int training, int bits,
                             int transposed, double offset)
{
    const int64_t cs[1] = {xs[1]};
    int64_t iv[2] = {training, bits};
    double fv[2] = {0.1, 1e-5};
    tgc_attrs a = attrs_i(2, iv, 2, fv);
    tgc_tensor *in[5];
    int n = 0;
    in[n++] = transposed ? cpu_transposed(dt, xs, 4) : cpu_f(dt, xs, 4);
    if (offset != 0) {
        int64_t numel = (int64_t)(in[0]->storage->nbytes / tgc_dtype_size(dt));
        for (int64_t e = 0; e < numel; e++)
            tgc_store(tgc_host_data(in[0]), dt, e,
                      tgc_load(tgc_host_data(in[0]), dt, e) / 5.0 + offset);
    }
    if (bits & TGC_BN_HAS_STATS) {
        in[n++] = cpu_f(dt, cs, 1);
        in[n] = cpu_f(dt, cs, 1);
        for (int k = 0; k < cs[0]; k++) /* variances are positive */
            tgc_store(tgc_host_data(in[n]), dt, k, 0.5 + k);
        n++;
    }
    if (bits & TGC_BN_HAS_WEIGHT)
        in[n++] = cpu_gapped(dt, cs, 1);
    if (bits & TGC_BN_HAS_BIAS)
        in[n++] = cpu_f(dt, cs, 1);
    int64_t shape[TGC_MAX_DIMS];
    tgc_node nd = make_node(TGC_OP_BATCH_NORM, in, n, &a, shape);
    tgc_tensor *dev[5];
    for (int k = 0; k < n; k++)
        dev[k] = dev_mirror(in[k]);
    uint64_t v1 = n > 1 ? dev[1]->storage->version : 0;
    tgc_tensor *ref = tgc_interp_run_node(&nd, in, shape);
    assert_non_null(ref);
    tgc_launch_env env;
    memset(&env, 0, sizeof env);
    env.device = tgc_cuda(0);
    tgc_tensor *out = NULL;
    tgc_status st = tgc_cuda_op_run(&nd, dev, shape, &out, &env);
    if (st != TGC_OK)
        fail_msg("batch_norm: %s", tgc_last_error());
    /* far from zero, interp's plain sums of x lose about 1e-12 of the mean in f64 */
    const double tol = offset != 0 && tol_of(dt) < 1e-9 ? 1e-9 : tol_of(dt);
    compare("batch_norm", ref, tgc_to(out, tgc_cpu()), tol);
    if (bits & TGC_BN_HAS_STATS) {
        /* the running stats, updated in place in training */
        compare("running_mean", in[1], tgc_to(dev[1], tgc_cpu()), tol);
        compare("running_var", in[2], tgc_to(dev[2], tgc_cpu()), tol);
        if (training)
            assert_true(dev[1]->storage->version > v1);
    }
}

static void test_gpu_norms(void **state)
{
    (void)state;
    NEED_GPU();
    const tgc_dtype fdt[] = {TGC_F32, TGC_F16, TGC_BF16, TGC_F64};
    const int64_t s[3] = {4, 6, 33};
    for (size_t i = 0; i < 4; i++)
        for (int n_norm = 1; n_norm <= 2; n_norm++)
            for (int bits = 0; bits < 4; bits++) {
                int64_t iv[2] = {n_norm, bits};
                double eps = 1e-5;
                tgc_attrs a = attrs_i(2, iv, 1, &eps);
                tgc_tensor *in[3];
                int n = 0;
                in[n++] = cpu_transposed(fdt[i], s, 3);
                if (bits & TGC_LN_HAS_WEIGHT)
                    in[n++] = cpu_f(fdt[i], s + 3 - n_norm, n_norm);
                if (bits & TGC_LN_HAS_BIAS)
                    in[n++] = cpu_gapped(fdt[i], s + 3 - n_norm, n_norm);
                check_op("layer_norm", TGC_OP_LAYER_NORM, in, n, &a);
            }
    const int64_t xs[4] = {5, 3, 7, 9};
    for (size_t i = 0; i < 4; i++)
        for (int training = 0; training < 2; training++)
            for (int bits = 0; bits < 8; bits++)
                if (training || (bits & TGC_BN_HAS_STATS))
                    check_batch_norm(fdt[i], xs, training, bits, 1, 0);
    /* channels of 19008 values: the statistics in several parts per channel, contiguous
     * f32 through the float4 paths (S % 4 == 0), and a mean far from zero (100 standard
     * deviations) that a sum of squares would cancel */
    const int64_t big[4] = {16, 4, 33, 36};
    for (int bits = 0; bits < 8; bits++) {
        check_batch_norm(TGC_F32, big, 1, bits, 0, 100.0);
        check_batch_norm(TGC_F64, big, 1, bits, 1, 100.0);
    }
    check_batch_norm(TGC_F32, big, 0, TGC_BN_HAS_STATS | TGC_BN_HAS_WEIGHT, 0, 0);
}

static void test_gpu_pools(void **state)
{
    (void)state;
    NEED_GPU();
    const tgc_dtype fdt[] = {TGC_F32, TGC_F16, TGC_BF16, TGC_F64};
    const int64_t s[4] = {2, 3, 11, 9};
    for (size_t i = 0; i < 4; i++)
        for (int excl = 0; excl < 2; excl++) {
            int64_t iv[7] = {3, 2, 2, 3, 1, 1, excl};
            tgc_attrs a = attrs_i(7, iv, 0, NULL);
            tgc_tensor *x = cpu_transposed(fdt[i], s, 4);
            check_op("max_pool2d", TGC_OP_MAX_POOL2D, &x, 1, &a);
            check_op("avg_pool2d", TGC_OP_AVG_POOL2D, &x, 1, &a);
            int64_t ov[2] = {excl ? 4 : 1, excl ? 7 : 1};
            tgc_attrs aa = attrs_i(2, ov, 0, NULL);
            check_op("adaptive_avg_pool2d", TGC_OP_ADAPTIVE_AVG_POOL2D, &x, 1, &aa);
        }
    const int64_t s3[3] = {3, 8, 8};
    int64_t iv[7] = {2, 2, 2, 2, 0, 0, 0};
    tgc_attrs a = attrs_i(7, iv, 0, NULL);
    tgc_tensor *x = cpu_gapped(TGC_F32, s3, 3);
    tgc_store(tgc_host_data(x), TGC_F32, 5, NAN);
    check_op("max_pool2d 3-d with NaN", TGC_OP_MAX_POOL2D, &x, 1, &a);
}

static void test_gpu_losses(void **state)
{
    (void)state;
    NEED_GPU();
    const tgc_dtype fdt[] = {TGC_F32, TGC_F16, TGC_BF16, TGC_F64};
    const int64_t xs[3] = {6, 37, 3}, ts[2] = {6, 3}, x1[1] = {37}, x2[2] = {5, 37}, t2[1] = {5};
    for (size_t i = 0; i < 4; i++)
        for (int red = 0; red < 3; red++)
            for (int ce = 0; ce < 2; ce++) {
                int64_t iv[2] = {red, 4};
                double eps = ce ? 0.1 : 0.0;
                tgc_attrs a = attrs_i(2, iv, 1, &eps);
                tgc_op op = ce ? TGC_OP_CROSS_ENTROPY : TGC_OP_NLL_LOSS;
                tgc_tensor *in[2] = {cpu_transposed(fdt[i], xs, 3),
                                     cpu_rand(TGC_I64, ts, 2, 0, 37)};
                ((int64_t *)tgc_host_data(in[1]))[2] = 4; /* ignored */
                check_op(tgc_op_name(op), op, in, 2, &a);
                tgc_tensor *j[2] = {cpu_gapped(fdt[i], x2, 2), cpu_rand(TGC_I32, t2, 1, 0, 37)};
                check_op(tgc_op_name(op), op, j, 2, &a);
                tgc_tensor *k[2] = {cpu_f(fdt[i], x1, 1), cpu_rand(TGC_I64, t2, 0, 0, 37)};
                check_op(tgc_op_name(op), op, k, 2, &a);
                /* every target ignored: mean is 0/0 */
                tgc_tensor *all[2] = {cpu_f(fdt[i], x2, 2), cpu_rand(TGC_I64, t2, 1, 4, 5)};
                check_op("all ignored", op, all, 2, &a);
                /* a target out of range */
                ((int64_t *)tgc_host_data(in[1]))[4] = 37;
                assert_null(check_op("target out of range", op, in, 2, &a));
            }
}

static void test_gpu_create_random(void **state)
{
    (void)state;
    NEED_GPU();
    for (size_t i = 0; i < 7; i++) {
        if (all_dt[i] == TGC_BOOL)
            continue;
        int64_t n = 1001;
        tgc_attrs a;
        memset(&a, 0, sizeof a);
        a.ni = 1;
        a.i[0] = n;
        a.nf = 2;
        a.f[0] = -3.5;
        a.f[1] = 0.75;
        a.dtype = all_dt[i];
        check_op_tol("arange", TGC_OP_ARANGE, NULL, 0, &a, 0);
    }
    const tgc_dtype fdt[] = {TGC_F32, TGC_F16, TGC_BF16, TGC_F64};
    for (size_t i = 0; i < 4; i++)
        for (int normal = 0; normal < 2; normal++) {
            tgc_attrs a;
            memset(&a, 0, sizeof a);
            a.ni = 3;
            a.i[0] = 7;
            a.i[1] = 5;
            a.i[2] = 129;
            a.nf = 1;
            a.f[0] = normal;
            a.dtype = fdt[i];
            int64_t shape[TGC_MAX_DIMS];
            tgc_node nd = make_node(TGC_OP_RAND, NULL, 0, &a, shape);
            tgc_rng_seed(1234 + i);
            (void)tgc_rng_draw(77, NULL); /* a stream offset that is not 0 */
            tgc_tensor *ref = tgc_interp_run_node(&nd, NULL, shape);
            uint64_t after_cpu = tgc_rng_draw(0, NULL);
            tgc_rng_seed(1234 + i);
            (void)tgc_rng_draw(77, NULL);
            tgc_launch_env env;
            memset(&env, 0, sizeof env);
            env.device = tgc_cuda(0);
            tgc_tensor *out = NULL;
            assert_int_equal(tgc_cuda_op_run(&nd, NULL, shape, &out, &env), TGC_OK);
            assert_int_equal(tgc_rng_draw(0, NULL), after_cpu);
            compare("rand bits", ref, tgc_to(out, tgc_cpu()), 0);
        }
    const int64_t s[3] = {3, 17, 33};
    for (size_t i = 0; i < 4; i++)
        for (int pi = 0; pi < 3; pi++) {
            double p = pi == 0 ? 0.3 : pi == 1 ? 0.9 : 1.0;
            tgc_attrs a = attrs_i(0, NULL, 1, &p);
            tgc_tensor *x = cpu_transposed(fdt[i], s, 3);
            int64_t shape[TGC_MAX_DIMS];
            tgc_node nd = make_node(TGC_OP_DROPOUT, &x, 1, &a, shape);
            tgc_rng_seed(99);
            tgc_tensor *ref = tgc_interp_run_node(&nd, &x, shape);
            uint64_t after_cpu = tgc_rng_draw(0, NULL);
            tgc_rng_seed(99);
            tgc_tensor *dx = dev_mirror(x);
            tgc_launch_env env;
            memset(&env, 0, sizeof env);
            env.device = tgc_cuda(0);
            tgc_tensor *out = NULL;
            assert_int_equal(tgc_cuda_op_run(&nd, &dx, shape, &out, &env), TGC_OK);
            assert_int_equal(tgc_rng_draw(0, NULL), after_cpu);
            compare("dropout bits", ref, tgc_to(out, tgc_cpu()), 0);
        }
}

static void test_gpu_linalg(void **state)
{
    (void)state;
    NEED_GPU();
    const tgc_dtype fdt[] = {TGC_F64, TGC_F32, TGC_F16, TGC_BF16};
    tgc_attrs none;
    memset(&none, 0, sizeof none);
    for (size_t i = 0; i < 4; i++) {
        const int64_t as[3] = {2, 5, 7}, bs[4] = {3, 1, 7, 6}, v[1] = {7};
        tgc_tensor *in[2] = {cpu_transposed(fdt[i], as, 3), cpu_gapped(fdt[i], bs, 4)};
        check_op("matmul batched", TGC_OP_MATMUL, in, 2, &none);
        tgc_tensor *mv[2] = {in[0], cpu_f(fdt[i], v, 1)};
        check_op("matmul vector", TGC_OP_MATMUL, mv, 2, &none);
        tgc_tensor *vm[2] = {cpu_f(fdt[i], v, 1), cpu_f(fdt[i], bs, 4)};
        check_op("vector matmul", TGC_OP_MATMUL, vm, 2, &none);
        const int64_t xs[3] = {3, 4, 9}, ws[2] = {5, 9}, bz[1] = {5};
        tgc_tensor *lin[3] = {cpu_transposed(fdt[i], xs, 3), cpu_transposed(fdt[i], ws, 2),
                              cpu_gapped(fdt[i], bz, 1)};
        check_op("linear", TGC_OP_LINEAR, lin, 2, &none);
        check_op("linear bias", TGC_OP_LINEAR, lin, 3, &none);
        const int64_t cx[4] = {2, 4, 9, 11}, cw[4] = {6, 2, 3, 2}, cb[1] = {6};
        int64_t iv[7] = {2, 1, 1, 2, 1, 2, 2};
        tgc_attrs a = attrs_i(7, iv, 0, NULL);
        tgc_tensor *cv[3] = {cpu_transposed(fdt[i], cx, 4), cpu_gapped(fdt[i], cw, 4),
                             cpu_f(fdt[i], cb, 1)};
        check_op("conv2d", TGC_OP_CONV2D, cv, 3, &a);
        check_op("conv2d no bias", TGC_OP_CONV2D, cv, 2, &a);
    }
}

int main(void)
{
    g_nvrtc = tgc_nvrtc_load() == TGC_OK;
    snprintf(g_nvrtc_reason, sizeof g_nvrtc_reason, "%s", g_nvrtc ? "" : tgc_last_error());
    tgc_clear_error();
#ifdef TGC_CUDA_OPS_EMU /* tests/cuda_emu: the kernels on the CPU, device memory on the host */
    tgc_ops_emu_init();
    gpu_skip_probed_ = 1;
#endif
    int gpu = gpu_available();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_program_compiles, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_supported_table, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_gpu_pointwise, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_gpu_cast, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_gpu_views_and_movement, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_gpu_indexing, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_gpu_reductions, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_gpu_norms, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_gpu_pools, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_gpu_losses, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_gpu_create_random, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_gpu_linalg, scoped_setup, scoped_teardown),
    };
    int rc = cmocka_run_group_tests_name("cuda_ops", tests, NULL, group_shutdown);
    if (g_nvrtc_skipped)
        printf("%d NVRTC test skipped: %s\n", g_nvrtc_skipped, g_nvrtc_reason);
    if (gpu)
        printf("%d op/dtype cases not run: shape inference rejects them (as interp)\n",
               g_not_inferred);
    return gpu_skip_finish(rc);
}

#else /* no CUDA in this build: the GPU cases skip through gpu_skip.h */

static void test_no_cuda(void **state)
{
    (void)state;
    GPU_REQUIRE();
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_no_cuda)};
    return gpu_skip_finish(cmocka_run_group_tests_name("cuda_ops", tests, NULL, NULL));
}

#endif
