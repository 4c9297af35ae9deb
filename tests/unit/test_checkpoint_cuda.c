/* Checkpoints of tensors on the GPU (tgc_cuda(0)): a module on the device saves the same
 * bytes as its copy on the host, loads from a host-written file (with a dtype conversion)
 * straight into device memory, changes nothing on a failed load, and an optimizer on the
 * device resumes training identically after a round trip. Skipped without a GPU
 * (tests/gpu_skip.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpu_skip.h"
#include "unit_test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frontend/module_impl.h"
#include "train/optim_impl.h"
#include "tensor/tensor_impl.h"
#include "tgc/autograd.h"
#include "tgc/compile.h"
#include "tgc/module.h"
#include "tgc/ops.h"
#include "tgc/safetensors.h"
#include "tgc/tensor.h"

#define SHAPE(...) (const int64_t[]){__VA_ARGS__}, (int)(sizeof((int64_t[]){__VA_ARGS__}) / 8)

static char tmp_dir[256];

static const char *tpath(const char *name)
{
    static char bufs[4][512];
    static int k;
    char *b = bufs[k++ % 4];
    snprintf(b, sizeof bufs[0], "%s/%s", tmp_dir, name);
    return b;
}

static int group_setup(void **state)
{
    (void)state;
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/tgc_test_checkpoint_cuda_XXXXXX");
    return mkdtemp(tmp_dir) ? 0 : -1;
}

static const char *const files[] = {"m.safetensors",   "m2.safetensors", "f64.safetensors",
                                    "bad.safetensors", "o.safetensors",  "r.safetensors",
                                    "bn.safetensors"};

static int group_teardown(void **state)
{
    for (int i = 0; i < N_OF(files); i++)
        unlink(tpath(files[i]));
    rmdir(tmp_dir);
    return group_shutdown(state);
}

static unsigned char *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc((size_t)len + 1);
    assert_int_equal(fread(p, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return p;
}

static tgc_tensor *randn(const int64_t *shape, int nd, tgc_dtype dt)
{
    tgc_tensor *t = tgc_randn(shape, nd, dt, tgc_cpu());
    assert_non_null(t);
    return t;
}

/* net { w f32[3, 4], h f16[5], fc { weight bf16[2, 3], bias f64[2], count i64[2] (buffer),
 * mask bool[3] (buffer) } }, on the host. */
static tgc_module *build(uint64_t seed)
{
    tgc_manual_seed(seed);
    tgc_module *net = tgc_module_create("net", NULL), *fc = tgc_module_create("fc", NULL);
    assert_non_null(tgc_module_param(net, "w", randn(SHAPE(3, 4), TGC_F32)));
    assert_non_null(tgc_module_param(net, "h", randn(SHAPE(5), TGC_F16)));
    assert_non_null(tgc_module_param(fc, "weight", randn(SHAPE(2, 3), TGC_BF16)));
    assert_non_null(tgc_module_param(fc, "bias", randn(SHAPE(2), TGC_F64)));
    int64_t cv[2] = {(int64_t)seed, -3};
    uint8_t mv[3] = {1, (uint8_t)(seed & 1), 0};
    assert_non_null(
        tgc_module_buffer(fc, "count", tgc_from_data(cv, sizeof cv, SHAPE(2), TGC_I64, tgc_cpu())));
    assert_non_null(
        tgc_module_buffer(fc, "mask", tgc_from_data(mv, sizeof mv, SHAPE(3), TGC_BOOL, tgc_cpu())));
    assert_int_equal(tgc_module_child(net, "fc", fc), TGC_OK);
    return net;
}

/* Every tensor of a and b has the same bytes. */
static void check_same(tgc_module *a, tgc_module *b)
{
    int na, nb;
    tgc_tensor *const *fa = tgc_module_flat(a, &na);
    tgc_tensor *const *fb = tgc_module_flat(b, &nb);
    assert_int_equal(na, nb);
    for (int i = 0; i < na; i++) {
        size_t n = (size_t)tgc_numel(fa[i]) * tgc_dtype_size(tgc_dtype_of(fa[i]));
        unsigned char x[256], y[256];
        assert_true(n <= sizeof x);
        assert_int_equal(tgc_copy_to_host(fa[i], x, n), TGC_OK);
        assert_int_equal(tgc_copy_to_host(fb[i], y, n), TGC_OK);
        assert_memory_equal(x, y, n);
    }
}

static void test_module_on_the_device(void **state)
{
    (void)state;
    GPU_REQUIRE();
    tgc_device gpu = tgc_cuda(0);
    tgc_module *host = build(1), *dev = build(2);
    assert_int_equal(tgc_module_to(dev, gpu), TGC_OK);
    const char *p = tpath(files[0]), *p2 = tpath(files[1]);
    assert_int_equal(tgc_module_save(host, p), TGC_OK);
    int n;
    tgc_tensor *const *fd = tgc_module_flat(dev, &n);
    uint64_t v0 = atomic_load(&fd[0]->storage->version);
    assert_int_equal(tgc_module_load(dev, p, 1), TGC_OK);
    fd = tgc_module_flat(dev, &n);
    for (int i = 0; i < n; i++)
        assert_int_equal(tgc_device_of(fd[i]).type, TGC_DEVICE_CUDA);
    assert_int_equal(atomic_load(&fd[0]->storage->version), v0 + 1);
    check_same(host, dev);
    /* saved from the device: the same file */
    assert_int_equal(tgc_module_save(dev, p2), TGC_OK);
    size_t n1, n2;
    unsigned char *f1 = read_file(p, &n1), *f2 = read_file(p2, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(f1, f2, n1);
    free(f1);
    free(f2);

    /* a file of other dtypes converts on its way to the device */
    tgc_module *wide = tgc_module_create("net", NULL), *narrow = tgc_module_create("net", NULL);
    const double dv[4] = {0.1, -2.5, 3.25, 1e-3};
    assert_non_null(
        tgc_module_param(wide, "w", tgc_from_data(dv, sizeof dv, SHAPE(4), TGC_F64, tgc_cpu())));
    assert_non_null(tgc_module_param(narrow, "w", tgc_zeros(SHAPE(4), TGC_F32, gpu)));
    const char *pf = tpath(files[2]);
    assert_int_equal(tgc_module_save(wide, pf), TGC_OK);
    assert_int_equal(tgc_module_load(narrow, pf, 1), TGC_OK);
    float w[4];
    assert_int_equal(tgc_copy_to_host(tgc_module_get(narrow, "w"), w, sizeof w), TGC_OK);
    for (int i = 0; i < 4; i++)
        assert_true(w[i] == (float)dv[i]);

    /* a failed load leaves the device tensors as they were */
    tgc_module *other = build(3);
    assert_non_null(tgc_module_param(other, "extra", randn(SHAPE(1), TGC_F32)));
    const char *pb = tpath(files[3]);
    assert_int_equal(tgc_module_save(other, pb), TGC_OK);
    check_error(tgc_module_load(dev, pb, 1), TGC_ERR_INVALID_ARG, "the file has tensor 'extra'");
    check_same(host, dev);
    tgc_tensor *nw = tgc_module_get(narrow, "w");
    uint64_t v1 = atomic_load(&nw->storage->version);
    check_error(tgc_module_load(narrow, p, 1), TGC_ERR_SHAPE, "tensor 'w' is [3, 4] in the file");
    assert_int_equal(atomic_load(&nw->storage->version), v1);
    float w2[4];
    assert_int_equal(tgc_copy_to_host(nw, w2, sizeof w2), TGC_OK);
    assert_memory_equal(w, w2, sizeof w);

    tgc_module_free(other);
    tgc_module_free(wide);
    tgc_module_free(narrow);
    tgc_module_free(host);
    tgc_module_free(dev);
}

static void grads_step(tgc_optim *o)
{
    tgc_scope_push();
    int n;
    tgc_tensor *const *ps = tgc_optim_params(o, &n);
    tgc_tensor *g[8];
    assert_true(n <= 8);
    for (int i = 0; i < n; i++) {
        g[i] = tgc_mul(tgc_sub_scalar(ps[i], 0.25), tgc_add_scalar(tgc_mul(ps[i], ps[i]), 1));
        assert_non_null(g[i]);
    }
    assert_int_equal(tgc_optim_step_grads(o, g), TGC_OK);
    assert_int_equal(tgc_scope_pop(), TGC_OK);
}

/* net { w f32[3, 4], fc { weight f32[2, 3] } } on the device. */
static tgc_module *build_train(uint64_t seed)
{
    tgc_manual_seed(seed);
    tgc_module *net = tgc_module_create("net", NULL), *fc = tgc_module_create("fc", NULL);
    assert_non_null(tgc_module_param(net, "w", randn(SHAPE(3, 4), TGC_F32)));
    assert_non_null(tgc_module_param(fc, "weight", randn(SHAPE(2, 3), TGC_F32)));
    assert_int_equal(tgc_module_child(net, "fc", fc), TGC_OK);
    assert_int_equal(tgc_module_to(net, tgc_cuda(0)), TGC_OK);
    return net;
}

static void test_optimizer_on_the_device_resumes(void **state)
{
    (void)state;
    GPU_REQUIRE();
    tgc_adam_opts ao = {.lr = 0.01, .amsgrad = 1};
    tgc_module *a = build_train(5), *b = build_train(6);
    tgc_optim *oa = tgc_adam(a, &ao), *ob = tgc_adam(b, &ao);
    assert_non_null(oa);
    assert_non_null(ob);
    for (int s = 0; s < 3; s++)
        grads_step(oa);
    const char *pm = tpath(files[0]), *po = tpath(files[4]);
    assert_int_equal(tgc_module_save(a, pm), TGC_OK);
    assert_int_equal(tgc_optim_save(oa, po), TGC_OK);
    for (int s = 0; s < 3; s++)
        grads_step(oa);
    assert_int_equal(tgc_module_load(b, pm, 1), TGC_OK);
    assert_int_equal(tgc_optim_load(ob, po), TGC_OK);
    for (int i = 0; i < tgc_optim_num_state(ob); i++)
        assert_int_equal(tgc_device_of(tgc_optim_state(ob, i, NULL)).type, TGC_DEVICE_CUDA);
    for (int s = 0; s < 3; s++)
        grads_step(ob);
    check_same(a, b);
    tgc_optim_free(oa);
    tgc_optim_free(ob);
    tgc_module_free(a);
    tgc_module_free(b);
}

/* tgc_safetensors_read straight onto the device: every tensor of a host-written file. */
static void test_file_read_onto_the_device(void **state)
{
    (void)state;
    GPU_REQUIRE();
    tgc_module *host = build(3);
    const char *p = tpath(files[5]);
    assert_int_equal(tgc_module_save(host, p), TGC_OK);
    tgc_safetensors *st;
    assert_int_equal(tgc_safetensors_open(p, &st), TGC_OK);
    int n = tgc_module_num_tensors(host);
    assert_int_equal(tgc_safetensors_num_tensors(st), n);
    for (int i = 0; i < n; i++) {
        const char *name = tgc_safetensors_name(st, i);
        tgc_tensor *want = tgc_module_get(host, name),
                   *got = tgc_safetensors_read(st, name, tgc_cuda(0));
        assert_non_null(want);
        assert_non_null(got);
        assert_int_equal(tgc_device_of(got).type, TGC_DEVICE_CUDA);
        assert_int_equal(tgc_dtype_of(got), tgc_dtype_of(want));
        size_t nb = (size_t)tgc_numel(want) * tgc_dtype_size(tgc_dtype_of(want));
        unsigned char x[256], y[256];
        assert_true(nb <= sizeof x);
        assert_int_equal(tgc_copy_to_host(got, x, nb), TGC_OK);
        assert_int_equal(tgc_copy_to_host(want, y, nb), TGC_OK);
        assert_memory_equal(x, y, nb);
    }
    tgc_safetensors_close(st);
    tgc_module_free(host);
}

static tgc_status bn_forward(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                             int n_out)
{
    (void)n_in;
    (void)n_out;
    out[0] = tgc_module_batch_norm(tgc_module_get_child(self, "bn"), in[0], 0.1, 1e-5);
    return out[0] ? TGC_OK : tgc_last_status();
}

static int64_t batches_of(tgc_module *m)
{
    return (int64_t)tgc_item_f64(tgc_module_get(m, "bn.num_batches_tracked"));
}

/* A batch norm on the device counts its training batches, eagerly and compiled. */
static void test_batch_norm_counts_on_the_device(void **state)
{
    (void)state;
    GPU_REQUIRE();
    tgc_device gpu = tgc_cuda(0);
    tgc_module *net = tgc_module_create("net", NULL), *bn = tgc_module_create("bn", NULL);
    assert_int_equal(tgc_module_child(net, "bn", bn), TGC_OK);
    assert_int_equal(tgc_module_add_batch_norm(bn, 4, TGC_F32, gpu), TGC_OK);
    assert_int_equal(tgc_device_of(tgc_module_get(net, "bn.num_batches_tracked")).type,
                     TGC_DEVICE_CUDA);
    tgc_tensor *x = tgc_randn(SHAPE(8, 4, 3, 3), TGC_F32, gpu), *y = NULL;
    assert_non_null(x);
    for (int i = 0; i < 2; i++) {
        tgc_scope_push();
        assert_int_equal(bn_forward(net, &x, 1, &y, 1), TGC_OK);
        assert_int_equal(tgc_scope_pop(), TGC_OK);
    }
    assert_int_equal(batches_of(net), 2);
    tgc_fn *f = tgc_compile(bn_forward, "bn_count_cuda", NULL);
    assert_non_null(f);
    for (int i = 0; i < 3; i++) {
        tgc_scope_push();
        if (tgc_call(f, net, &x, 1, &y, 1) != TGC_OK)
            fail_msg("%s", tgc_last_error());
        assert_int_equal(tgc_scope_pop(), TGC_OK);
    }
    assert_int_equal(batches_of(net), 5);
    tgc_stats s;
    assert_int_equal(tgc_fn_stats(f, &s), TGC_OK);
    assert_string_equal(s.backend, "cuda");
    assert_int_equal(s.eager_fallbacks, 0);
    const char *p = tpath(files[6]);
    assert_int_equal(tgc_module_save(net, p), TGC_OK);
    tgc_module *back = tgc_module_create("net", NULL), *bn2 = tgc_module_create("bn", NULL);
    assert_int_equal(tgc_module_child(back, "bn", bn2), TGC_OK);
    assert_int_equal(tgc_module_add_batch_norm(bn2, 4, TGC_F32, tgc_cpu()), TGC_OK);
    assert_int_equal(tgc_module_load(back, p, 1), TGC_OK);
    assert_int_equal(batches_of(back), 5);
    tgc_fn_free(f);
    tgc_module_free(back);
    tgc_module_free(net);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_module_on_the_device, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_optimizer_on_the_device_resumes, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_file_read_onto_the_device, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_batch_norm_counts_on_the_device, scoped_setup,
                                        scoped_teardown),
    };
    return gpu_skip_finish(cmocka_run_group_tests(tests, group_setup, group_teardown));
}
