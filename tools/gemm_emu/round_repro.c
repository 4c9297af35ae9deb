/* test_cuda_public's matrix-product cases without a GPU: for one case (every input variant,
 * the static D, the very inputs the test draws from its seeds), the interp reference and the
 * ideal result of a given precision, i.e. interp run on the inputs rounded as the GPU's
 * template rounds its operands (bf16 round-to-nearest-even for MEDIUM, tf32 ties-away for
 * HIGH), compared with tests/gpu_test_util.h's rule. A correct GPU kernel reproduces these
 * counts and first elements up to fp32 accumulation (the H200's MEDIUM failures of big_matmul,
 * big_linear, big_conv_stem and big_conv_strided match them element for element). Inputs
 * that also feed a non-matmul op (a residual) get rounded there too, so such cases are only
 * approximated. A development tool, not part of the library; from the repository root:
 *   cc -O1 -DTGC_HAVE_CUDA=1 -Isrc -I. -Itests -Iinclude -isystem /usr/local/cuda/include \
 *      -D_GNU_SOURCE -std=c11 tools/gemm_emu/round_repro.c -o round_repro BUILD/libtgc.a \
 *      -lcmocka -lm -ldl -lpthread -fopenmp
 *   ./round_repro CASE [MASK [TOL [bf16|tf32]]]
 * MASK: bit k rounds input k (default 0x3), TOL: the row-rms tolerance (default 1e-2);
 * FLAT=1 in the environment compares with the rms of the whole output instead of its rows. */
#define main te_public_main
#include "unit/test_cuda_public.c"
#undef main

static int g_tf32;

static tgc_tensor *round_operand(tgc_tensor *t)
{
    if (tgc_dtype_of(t) != TGC_F32)
        return t;
    if (!g_tf32)
        return tgc_cast(tgc_cast(t, TGC_BF16), TGC_F32);
    int64_t n = tgc_numel(t), sh[TGC_MAX_DIMS];
    int nd = tgc_shape(t, sh);
    float *v = malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (!v || tgc_copy_to_host(t, v, sizeof(float) * (size_t)n) != TGC_OK) {
        free(v);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        u = (u + 0x1000u) & 0xffffe000u; /* cvt.rna.tf32.f32 */
        memcpy(&v[i], &u, 4);
    }
    tgc_tensor *r = tgc_from_data(v, sizeof(float) * (size_t)n, sh, nd, TGC_F32, tgc_cpu());
    free(v);
    return r;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s CASE [MASK [TOL [bf16|tf32]]]\n", argv[0]);
        return 2;
    }
    unsigned mask = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 0) : 0x3;
    double tol = argc > 3 ? atof(argv[3]) : 1e-2;
    g_tf32 = argc > 4 && !strcmp(argv[4], "tf32");
    int found = 0;
    for (int ci = 0; ci < N_OF(te_cases); ci++) {
        const te_case *c = &te_cases[ci];
        if (strcmp(c->name, argv[1]))
            continue;
        found = 1;
        const char *sp = c->specs;
        for (int vi = 0; *sp; vi++) {
            te_variant v;
            te_ctx x = {c, NULL, vi, "round_repro", 0, 0};
            if (!te_parse_variant(&sp, &v))
                return 1;
            x.v = &v;
            tgc_scope_push();
            tgc_fn *f = te_compile(&x, TGC_BACKEND_INTERP, TGC_MODE_DEFAULT, TGC_PRECISION_HIGHEST);
            x.D = c->d[0] ? c->d[0] : 5;
            uint64_t seed = te_seed(ci, vi, x.D);
            te_inputs ins, rins;
            te_result ref = {0}, ideal = {0};
            if (!f || !te_make_inputs(&x, seed, &ins) || !te_reference(&x, f, &ins, seed, &ref))
                return 1;
            rins = ins;
            for (int k = 0; k < ins.n; k++)
                if (mask >> k & 1)
                    rins.base[k] = round_operand(ins.base[k]);
            if (!te_reference(&x, f, &rins, seed, &ideal))
                return 1;
            tgc_tensor *io = ideal.out, *ro = ref.out;
            if (getenv("FLAT")) {
                int64_t all = -1;
                io = tgc_reshape(io, &all, 1);
                ro = tgc_reshape(ro, &all, 1);
            }
            gpu_cmp r = gpu_compare(io, ro, tol, 1.0);
            char sh[128];
            gpu_shape_str(ref.out, sh, sizeof sh);
            printf("%s variant %d \"%s\" %s: ideal %s vs interp, tol %g: %lld bad, first %lld: got "
                   "%.9g want %.9g; worst %.2f of allowed\n",
                   c->name, vi, v.text, sh, g_tf32 ? "tf32" : "bf16", tol, (long long)r.bad,
                   (long long)r.first, r.got, r.want, r.worst);
            te_free(&ref);
            te_free(&ideal);
            tgc_fn_free(f);
            tgc_scope_pop();
        }
    }
    if (!found)
        fprintf(stderr, "%s: no case %s\n", argv[0], argv[1]);
    return found ? 0 : 1;
}
