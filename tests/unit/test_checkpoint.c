/* Checkpoints (tgc_module_save / tgc_module_load, tgc_optim_save / tgc_optim_load) and the
 * safetensors reader and writer under them (serialize/safetensors.h):
 * - round trips of trees with parameters and buffers of every dtype (bit for bit), under
 *   PyTorch's state_dict names, the file's layout as the format wants it;
 * - a file written by the reference library (tests/unit/fixtures/numpy_written.safetensors,
 *   by make_numpy_fixture.py, which also checks that the library reads a file of ours:
 *   TGC_CHECKPOINT_EXPORT=F test_checkpoint writes that file);
 * - dtype conversion on load; strict on and off;
 * - every rejection with its exact status and a message naming the file and the fault, and
 *   after each failed load the module untouched (values and versions);
 * - random truncations and bit flips of valid files (run it under ASan: no read out of
 *   bounds), every result either a clean load or a rejection that changed nothing;
 * - the write failure paths: no partial file, no temporary file left;
 * - optimizer state: the round trip resumes training identically. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "unit_test_util.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "frontend/module_impl.h"
#include "train/optim_impl.h"
#include "serialize/safetensors.h"
#include "tensor/tensor_impl.h"
#include "tgc/autograd.h"
#include "tgc/compile.h"
#include "tgc/module.h"
#include "tgc/ops.h"
#include "tgc/safetensors.h"
#include "tgc/tensor.h"

#ifndef TGC_CKPT_FIXTURE_DIR
#error "TGC_CKPT_FIXTURE_DIR: tests/CMakeLists.txt defines it"
#endif

#define SHAPE(...) (const int64_t[]){__VA_ARGS__}, (int)(sizeof((int64_t[]){__VA_ARGS__}) / 8)
#define SCALAR     (const int64_t[]){0}, 0

/* ---- files ---- */

static char tmp_dir[256];

/* A path in the test's temporary directory (one of four rotating buffers). */
static const char *tpath(const char *name)
{
    static char bufs[4][512];
    static int k;
    char *b = bufs[k++ % 4];
    snprintf(b, sizeof bufs[0], "%s/%s", tmp_dir, name);
    return b;
}

static void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat s;
        if (lstat(p, &s) == 0 && S_ISDIR(s.st_mode)) {
            chmod(p, 0700);
            remove_tree(p);
        } else {
            unlink(p);
        }
    }
    closedir(d);
    rmdir(dir);
}

static int group_setup(void **state)
{
    (void)state;
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/tgc_test_checkpoint_XXXXXX");
    return mkdtemp(tmp_dir) ? 0 : -1;
}

static int group_teardown(void **state)
{
    remove_tree(tmp_dir);
    return group_shutdown(state);
}

/* Names in dir containing ".tmp." (temporary files of the writer). */
static int count_temp_files(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

static void write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static unsigned char *read_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc((size_t)len + 1);
    assert_non_null(p);
    assert_int_equal(fread(p, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return p;
}

/* A safetensors file from its header text and data bytes (the header length as given). */
static void write_raw_len(const char *path, uint64_t hlen, const char *json, const void *data,
                          size_t ndata)
{
    size_t nj = strlen(json);
    unsigned char *b = malloc(8 + nj + ndata + 1);
    assert_non_null(b);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(hlen >> (8 * i));
    memcpy(b + 8, json, nj);
    if (ndata)
        memcpy(b + 8 + nj, data, ndata);
    write_bytes(path, b, 8 + nj + ndata);
    free(b);
}

static void write_raw(const char *path, const char *json, const void *data, size_t ndata)
{
    write_raw_len(path, strlen(json), json, data, ndata);
}

/* ---- module snapshots: every tensor's bytes and version ---- */

typedef struct snapshot {
    int n;
    unsigned char *bytes[64];
    size_t nbytes[64];
    uint64_t version[64];
} snapshot;

static tgc_tensor *flat_at(tgc_module *m, int i)
{
    int n;
    tgc_tensor *const *flat = tgc_module_flat(m, &n);
    assert_true(i < n);
    return flat[i];
}

static size_t tensor_nbytes(const tgc_tensor *t)
{
    return (size_t)tgc_numel(t) * tgc_dtype_size(tgc_dtype_of(t));
}

static uint64_t version_of(const tgc_tensor *t)
{
    return atomic_load(&t->storage->version);
}

static void snap_take(tgc_module *m, snapshot *s)
{
    s->n = tgc_module_num_tensors(m);
    assert_true(s->n <= 64);
    for (int i = 0; i < s->n; i++) {
        tgc_tensor *t = flat_at(m, i);
        s->nbytes[i] = tensor_nbytes(t);
        s->bytes[i] = malloc(s->nbytes[i] + 1);
        assert_non_null(s->bytes[i]);
        assert_int_equal(tgc_copy_to_host(t, s->bytes[i], s->nbytes[i]), TGC_OK);
        s->version[i] = version_of(t);
    }
}

static void snap_free(snapshot *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->bytes[i]);
    s->n = 0;
}

/* m's values and versions are those of s. */
static void snap_check_unchanged(tgc_module *m, const snapshot *s)
{
    assert_int_equal(tgc_module_num_tensors(m), s->n);
    for (int i = 0; i < s->n; i++) {
        tgc_tensor *t = flat_at(m, i);
        unsigned char *now = malloc(s->nbytes[i] + 1);
        assert_int_equal(tgc_copy_to_host(t, now, s->nbytes[i]), TGC_OK);
        assert_memory_equal(now, s->bytes[i], s->nbytes[i]);
        free(now);
        assert_int_equal(version_of(t), s->version[i]);
    }
}

/* ---- trees ---- */

static tgc_tensor *from(const void *data, size_t n, const int64_t *shape, int nd, tgc_dtype dt)
{
    tgc_tensor *t = tgc_from_data(data, n, shape, nd, dt, tgc_cpu());
    assert_non_null(t);
    return t;
}

static tgc_tensor *randn(const int64_t *shape, int nd, tgc_dtype dt)
{
    tgc_tensor *t = tgc_randn(shape, nd, dt, tgc_cpu());
    assert_non_null(t);
    return t;
}

static tgc_module *child(tgc_module *parent, const char *name)
{
    tgc_module *c = tgc_module_create(name, NULL);
    assert_non_null(c);
    assert_int_equal(tgc_module_child(parent, name, c), TGC_OK);
    return c;
}

/* Every dtype as a parameter (floats) or a buffer, three levels deep, a 0-d and an empty
 * tensor; values drawn from seed.
 * net { p32 f32[3,4], p16 f16[5], blk { 0 { pb16 bf16[2,3], p64 f64[7], b32 f32[2] (buffer),
 *       b16 f16[] (buffer) }, bb16 bf16[1] (buffer), b64 f64[2,2] (buffer) },
 *       i32 i32[3], i64 i64[2], mask bool[4], empty f32[0,3] (buffers) } */
static tgc_module *build_all_dtypes(uint64_t seed)
{
    tgc_manual_seed(seed);
    tgc_module *net = tgc_module_create("net", NULL);
    assert_non_null(net);
    assert_non_null(tgc_module_param(net, "p32", randn(SHAPE(3, 4), TGC_F32)));
    assert_non_null(tgc_module_param(net, "p16", randn(SHAPE(5), TGC_F16)));
    tgc_module *blk = child(net, "blk"), *b0 = child(blk, "0");
    assert_non_null(tgc_module_param(b0, "pb16", randn(SHAPE(2, 3), TGC_BF16)));
    assert_non_null(tgc_module_param(b0, "p64", randn(SHAPE(7), TGC_F64)));
    assert_non_null(tgc_module_buffer(b0, "b32", randn(SHAPE(2), TGC_F32)));
    assert_non_null(tgc_module_buffer(b0, "b16", randn(SCALAR, TGC_F16)));
    assert_non_null(tgc_module_buffer(blk, "bb16", randn(SHAPE(1), TGC_BF16)));
    assert_non_null(tgc_module_buffer(blk, "b64", randn(SHAPE(2, 2), TGC_F64)));
    int32_t iv[3] = {(int32_t)seed, -7, 1 << 30};
    int64_t lv[2] = {(int64_t)seed << 40, -1};
    uint8_t bv[4] = {1, 0, (uint8_t)(seed & 1), 1};
    assert_non_null(tgc_module_buffer(net, "i32", from(iv, sizeof iv, SHAPE(3), TGC_I32)));
    assert_non_null(tgc_module_buffer(net, "i64", from(lv, sizeof lv, SHAPE(2), TGC_I64)));
    assert_non_null(tgc_module_buffer(net, "mask", from(bv, sizeof bv, SHAPE(4), TGC_BOOL)));
    assert_non_null(tgc_module_buffer(net, "empty", tgc_zeros(SHAPE(0, 3), TGC_F32, tgc_cpu())));
    return net;
}

/* In tgc_module_flat's pre-order: a module's own tensors, then each child's. */
static const char *const all_dtypes_names[] = {
    "p32",      "p16",     "i32",        "i64",       "mask",      "empty",
    "blk.bb16", "blk.b64", "blk.0.pb16", "blk.0.p64", "blk.0.b32", "blk.0.b16",
};
static const char *const all_dtypes_files[] = {"F32",  "F16", "I32",  "I64", "BOOL", "F32",
                                               "BF16", "F64", "BF16", "F64", "F32",  "F16"};

/* ---- round trips ---- */

static void test_roundtrip_every_dtype_bit_for_bit(void **state)
{
    (void)state;
    tgc_module *a = build_all_dtypes(1), *b = build_all_dtypes(2);
    const char *p = tpath("all.safetensors");
    assert_int_equal(tgc_module_save(a, p), TGC_OK);
    snapshot sa, sb;
    snap_take(a, &sa);
    snap_take(b, &sb);
    assert_int_equal(tgc_module_load(b, p, 1), TGC_OK);
    int n = tgc_module_num_tensors(b);
    for (int i = 0; i < n; i++) {
        tgc_tensor *t = flat_at(b, i);
        unsigned char got[256];
        assert_true(sa.nbytes[i] <= sizeof got);
        assert_int_equal(tgc_copy_to_host(t, got, sa.nbytes[i]), TGC_OK);
        assert_memory_equal(got, sa.bytes[i], sa.nbytes[i]);
        /* one write each, through tgc_copy_ */
        assert_int_equal(version_of(t), sb.version[i] + 1);
    }
    /* saving does not write the module */
    snap_check_unchanged(a, &sa);
    /* the same file again: equal bytes (deterministic writer) */
    const char *p2 = tpath("all2.safetensors");
    assert_int_equal(tgc_module_save(b, p2), TGC_OK);
    size_t n1, n2;
    unsigned char *f1 = read_bytes(p, &n1), *f2 = read_bytes(p2, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(f1, f2, n1);
    free(f1);
    free(f2);
    snap_free(&sa);
    snap_free(&sb);
    tgc_module_free(a);
    tgc_module_free(b);
    assert_int_equal(count_temp_files(tmp_dir), 0);
}

/* CRC-32 as zlib computes it, bit by bit (the library's is table-driven). */
static uint32_t ref_crc32(const void *p, uint64_t n)
{
    const unsigned char *b = p;
    uint32_t c = 0xffffffffu;
    for (uint64_t i = 0; i < n; i++) {
        c ^= b[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
    }
    return ~c;
}

/* The file holds PyTorch's state_dict names, dtype spellings and the format's layout: the
 * header padded with spaces to 8 bytes, offsets tiling the data in tree order. */
static void test_file_layout_and_names(void **state)
{
    (void)state;
    tgc_module *a = build_all_dtypes(3);
    const char *p = tpath("layout.safetensors");
    assert_int_equal(tgc_module_save(a, p), TGC_OK);
    tgc_st_file f;
    assert_int_equal(tgc_st_read("test", p, &f), TGC_OK);
    assert_int_equal(f.n_entries, N_OF(all_dtypes_names));
    assert_int_equal(f.n_meta, f.n_entries); /* a checksum per tensor */
    uint64_t at = 0;
    for (int i = 0; i < f.n_entries; i++) {
        const tgc_st_entry *e = &f.entries[i];
        assert_string_equal(e->name, all_dtypes_names[i]);
        char key[128], want[16];
        snprintf(key, sizeof key, "tgc.crc32:%s", e->name);
        snprintf(want, sizeof want, "%08x",
                 (unsigned)ref_crc32(tgc_st_data(&f, e), e->end - e->begin));
        assert_non_null(tgc_st_meta_get(&f, key));
        assert_string_equal(tgc_st_meta_get(&f, key), want);
        assert_ptr_equal(tgc_st_find(&f, e->name), e);
        assert_string_equal(e->dtype_name, all_dtypes_files[i]);
        tgc_tensor *t = tgc_module_flat(a, &(int){0})[i];
        assert_int_equal(e->ndim, tgc_ndim(t));
        for (int d = 0; d < e->ndim; d++)
            assert_int_equal(e->shape[d], tgc_size(t, d));
        assert_int_equal(e->begin, at);
        assert_int_equal(e->end - e->begin, tensor_nbytes(t));
        at = e->end;
    }
    assert_int_equal(at, f.data_size);
    assert_null(tgc_st_find(&f, "blk.0"));
    assert_null(tgc_st_find(&f, "zzz"));
    assert_null(tgc_st_find(&f, ""));
    uint64_t hlen = (uint64_t)(f.data - f.bytes) - 8;
    assert_int_equal((8 + hlen) % 8, 0);
    assert_int_equal(f.bytes[8], '{');
    /* the padding is spaces after the closing brace */
    uint64_t k = hlen;
    while (k > 0 && f.bytes[8 + k - 1] == ' ')
        k--;
    assert_int_equal(f.bytes[8 + k - 1], '}');
    assert_true(hlen - k < 8);
    tgc_st_close(&f);
    tgc_module_free(a);
}

/* An empty tree writes "{}" (padded) and loads from it; a non-empty file does not load into
 * it strictly. */
static void test_empty_tree(void **state)
{
    (void)state;
    tgc_module *e = tgc_module_create("empty", NULL);
    const char *p = tpath("empty.safetensors");
    assert_int_equal(tgc_module_save(e, p), TGC_OK);
    size_t n;
    unsigned char *b = read_bytes(p, &n);
    assert_int_equal(n, 16);
    assert_int_equal(b[0], 8);
    assert_memory_equal(b + 8, "{}      ", 8);
    free(b);
    assert_int_equal(tgc_module_load(e, p, 1), TGC_OK);
    tgc_module *a = build_all_dtypes(4);
    const char *pa = tpath("nonempty.safetensors");
    assert_int_equal(tgc_module_save(a, pa), TGC_OK);
    check_error(tgc_module_load(e, pa, 1), TGC_ERR_INVALID_ARG, "the file has tensor 'p32'");
    assert_int_equal(tgc_module_load(e, pa, 0), TGC_OK);
    tgc_module_free(a);
    tgc_module_free(e);
}

/* A file dtype other than the tensor's converts, as tgc_copy_ does. */
static void test_load_converts_dtypes(void **state)
{
    (void)state;
    const double dv[4] = {0.1, -2.5, 1e10, 3.0};
    const int64_t lv[3] = {5, -6, 7};
    tgc_module *a = tgc_module_create("a", NULL), *b = tgc_module_create("b", NULL);
    assert_non_null(tgc_module_param(a, "w", from(dv, sizeof dv, SHAPE(4), TGC_F64)));
    assert_non_null(tgc_module_buffer(a, "n", from(lv, sizeof lv, SHAPE(3), TGC_I64)));
    assert_non_null(tgc_module_param(b, "w", tgc_zeros(SHAPE(4), TGC_F32, tgc_cpu())));
    assert_non_null(tgc_module_buffer(b, "n", tgc_zeros(SHAPE(3), TGC_F16, tgc_cpu())));
    const char *p = tpath("convert.safetensors");
    assert_int_equal(tgc_module_save(a, p), TGC_OK);
    assert_int_equal(tgc_module_load(b, p, 1), TGC_OK);
    float w[4];
    assert_int_equal(tgc_copy_to_host(tgc_module_get(b, "w"), w, sizeof w), TGC_OK);
    for (int i = 0; i < 4; i++)
        assert_true(w[i] == (float)dv[i]);
    assert_int_equal(tgc_dtype_of(tgc_module_get(b, "w")), TGC_F32);
    uint16_t h[3];
    assert_int_equal(tgc_copy_to_host(tgc_module_get(b, "n"), h, sizeof h), TGC_OK);
    for (int i = 0; i < 3; i++)
        assert_true(tgc_half_to_float(h[i]) == (float)lv[i]);
    assert_true(tgc_requires_grad_of(tgc_module_get(b, "w"))); /* still a parameter */
    tgc_module_free(a);
    tgc_module_free(b);
}

/* ---- the reference library's file ---- */

static double fixture_value(const char *kind, int64_t k)
{
    if (!strcmp(kind, "float"))
        return (double)k * 0.25 - 1.0;
    if (!strcmp(kind, "int"))
        return (double)(3 * k - 2);
    return (double)(k % 2 == 1);
}

/* make_numpy_fixture.py's SPEC as a tree, filled with its values (or zeros). */
static tgc_module *build_fixture_tree(int with_values)
{
    static const struct {
        const char *mod, *name;
        tgc_dtype dt;
        int nd;
        int64_t shape[4];
        const char *kind;
        int buffer;
    } spec[] = {
        {"conv1", "weight", TGC_F32, 4, {2, 1, 3, 3}, "float", 0},
        {"conv1", "bias", TGC_F32, 1, {2}, "float", 0},
        {"bn1", "weight", TGC_F16, 1, {2}, "float", 0},
        {"bn1", "running_mean", TGC_F64, 1, {2}, "float", 1},
        {"bn1", "num_batches_tracked", TGC_I64, 0, {0}, "int", 1},
        {"layer1.0.fc", "weight", TGC_F64, 2, {3, 2}, "float", 0},
        {"layer1.0", "idx", TGC_I32, 1, {4}, "int", 1},
        {"layer1.0", "mask", TGC_BOOL, 1, {5}, "bool", 1},
        {"", "empty", TGC_F32, 2, {0, 3}, "float", 0},
    };
    tgc_module *net = tgc_module_create("net", NULL);
    tgc_module *conv1 = child(net, "conv1"), *bn1 = child(net, "bn1");
    tgc_module *layer1 = child(net, "layer1"), *l0 = child(layer1, "0"), *fc = child(l0, "fc");
    for (int i = 0; i < N_OF(spec); i++) {
        tgc_module *m = !strcmp(spec[i].mod, "conv1")         ? conv1
                        : !strcmp(spec[i].mod, "bn1")         ? bn1
                        : !strcmp(spec[i].mod, "layer1.0.fc") ? fc
                        : !strcmp(spec[i].mod, "layer1.0")    ? l0
                                                              : net;
        tgc_tensor *t = tgc_zeros(spec[i].shape, spec[i].nd, spec[i].dt, tgc_cpu());
        if (with_values) {
            int64_t n = tgc_numel(t);
            tgc_tensor *v = tgc_empty(SHAPE(n > 0 ? n : 1), TGC_F64, tgc_cpu());
            double *d = tgc_host_data(v);
            for (int64_t k = 0; k < n; k++)
                d[k] = fixture_value(spec[i].kind, k);
            if (n > 0)
                assert_int_equal(tgc_copy_(t, tgc_reshape(v, spec[i].shape, spec[i].nd)), TGC_OK);
        }
        assert_non_null(spec[i].buffer ? tgc_module_buffer(m, spec[i].name, t)
                                       : tgc_module_param(m, spec[i].name, t));
    }
    return net;
}

static void test_reads_the_reference_librarys_file(void **state)
{
    (void)state;
    const char *p = TGC_CKPT_FIXTURE_DIR "/numpy_written.safetensors";
    tgc_module *got = build_fixture_tree(0), *want = build_fixture_tree(1);
    assert_int_equal(tgc_module_load(got, p, 1), TGC_OK);
    snapshot sw;
    snap_take(want, &sw);
    for (int i = 0; i < sw.n; i++) {
        unsigned char buf[128];
        assert_int_equal(tgc_copy_to_host(flat_at(got, i), buf, sw.nbytes[i]), TGC_OK);
        assert_memory_equal(buf, sw.bytes[i], sw.nbytes[i]);
    }
    snap_free(&sw);
    tgc_st_file f;
    assert_int_equal(tgc_st_read("test", p, &f), TGC_OK);
    assert_string_equal(tgc_st_meta_get(&f, "format"), "pt");
    assert_string_equal(tgc_st_meta_get(&f, "written_by"), "safetensors.numpy");
    assert_null(tgc_st_meta_get(&f, "nope"));
    tgc_st_close(&f);
    /* the file make_numpy_fixture.py --check reads */
    const char *out = getenv("TGC_CHECKPOINT_EXPORT");
    if (out && *out)
        assert_int_equal(tgc_module_save(want, out), TGC_OK);
    tgc_module_free(got);
    tgc_module_free(want);
}

/* ---- rejections ---- */

/* net { fc { weight f32[2, 3], bias f32[2] }, bn { running_mean f64[2], count i64[] } }:
 * 56 bytes of data in this order. */
static tgc_module *build_small(double base)
{
    tgc_module *net = tgc_module_create("net", NULL);
    tgc_module *fc = child(net, "fc"), *bn = child(net, "bn");
    tgc_tensor *w = tgc_full(SHAPE(2, 3), base, TGC_F32, tgc_cpu());
    assert_non_null(tgc_module_param(fc, "weight", w));
    assert_non_null(tgc_module_param(fc, "bias", tgc_full(SHAPE(2), base + 1, TGC_F32, tgc_cpu())));
    assert_non_null(
        tgc_module_buffer(bn, "running_mean", tgc_full(SHAPE(2), base + 2, TGC_F64, tgc_cpu())));
    assert_non_null(tgc_module_buffer(bn, "count", tgc_full(SCALAR, 7, TGC_I64, tgc_cpu())));
    return net;
}

#define E_W     "\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}"
#define E_B     "\"fc.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]}"
#define E_M     "\"bn.running_mean\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[32,48]}"
#define E_C     "\"bn.count\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[48,56]}"
#define E_EXTRA "\"bn.extra\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[56,60]}"

typedef struct bad_case {
    const char *what;
    const char *json;
    size_t ndata;
    tgc_status want;
    const char *msg;
} bad_case;

static const bad_case bad_cases[] = {
    /* the JSON */
    {"not an object", "[" E_W "]", 56, TGC_ERR_IO, "does not start with '{'"},
    {"leading space", " {" E_W "," E_B "," E_M "," E_C "}", 56, TGC_ERR_IO, "start with '{'"},
    {"unterminated", "{" E_W "," E_B, 32, TGC_ERR_IO, "ends inside an object"},
    {"missing colon", "{\"fc.weight\"{}}", 0, TGC_ERR_IO, "expected ':'"},
    {"trailing comma", "{" E_W ",}", 24, TGC_ERR_IO, "expected a string"},
    {"missing comma", "{" E_W " " E_B "}", 32, TGC_ERR_IO, "expected ',' or '}'"},
    {"bytes after", "{" E_W "," E_B "," E_M "," E_C "}x", 56, TGC_ERR_IO, "bytes after"},
    {"two objects", "{" E_W "," E_B "," E_M "," E_C "}{}", 56, TGC_ERR_IO, "bytes after"},
    {"unterminated string", "{\"fc.weight", 0, TGC_ERR_IO, "unterminated string"},
    {"bad escape", "{\"fc\\q\":{}}", 0, TGC_ERR_IO, "invalid escape"},
    {"NUL escape", "{\"fc\\u0000\":{}}", 0, TGC_ERR_IO, "\\u0000"},
    {"lone surrogate", "{\"fc\\udc00\":{}}", 0, TGC_ERR_IO, "surrogate"},
    {"bad UTF-8", "{\"fc\xc3\x28\":{}}", 0, TGC_ERR_IO, "invalid UTF-8"},
    {"overlong UTF-8", "{\"fc\xc0\xaf\":{}}", 0, TGC_ERR_IO, "invalid UTF-8"},
    {"control char", "{\"fc\n\":{}}", 0, TGC_ERR_IO, "control character"},
    {"entry not object", "{\"fc.weight\":[1]}", 0, TGC_ERR_IO, "expected an object"},
    {"empty name", "{\"\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", 4, TGC_ERR_IO,
     "empty name"},
    /* entries */
    {"unknown dtype",
     "{\"fc.weight\":{\"dtype\":\"F99\",\"shape\":[2,3],\"data_offsets\":[0,24]}," E_B "," E_M
     "," E_C "}",
     56, TGC_ERR_IO, "unknown dtype 'F99'"},
    {"dtype not a string", "{\"fc.weight\":{\"dtype\":32,\"shape\":[2,3],\"data_offsets\":[0,24]}}",
     24, TGC_ERR_IO, "expected a string"},
    {"unknown key",
     "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24],\"x\":1}}", 24,
     TGC_ERR_IO, "unknown key 'x'"},
    {"second key",
     "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"shape\":[6],\"data_offsets\":[0,24]}}",
     24, TGC_ERR_IO, "a second key 'shape'"},
    {"no offsets", "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[2,3]}}", 24, TGC_ERR_IO,
     "has no data_offsets"},
    {"no dtype", "{\"fc.weight\":{\"shape\":[2,3],\"data_offsets\":[0,24]}}", 24, TGC_ERR_IO,
     "has no dtype"},
    {"three offsets",
     "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24,24]}}", 24,
     TGC_ERR_IO, "not [begin, end]"},
    {"one offset", "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0]}}", 24,
     TGC_ERR_IO, "not [begin, end]"},
    {"negative dim", "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[-2,3],\"data_offsets\":[0,24]}}",
     24, TGC_ERR_IO, "negative number"},
    {"fractional dim",
     "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[2.0,3],\"data_offsets\":[0,24]}}", 24,
     TGC_ERR_IO, "not an integer"},
    {"exponent dim",
     "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[2e0,3],\"data_offsets\":[0,24]}}", 24,
     TGC_ERR_IO, "not an integer"},
    {"leading zero", "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[02,3],\"data_offsets\":[0,24]}}",
     24, TGC_ERR_IO, "leading zero"},
    {"dim over 2^56",
     "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[144115188075855872],\"data_offsets\":[0,24]}}",
     24, TGC_ERR_IO, "more than TGC_MAX_NUMEL"},
    {"numel over 2^56",
     "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,"
     "24]}}",
     24, TGC_ERR_IO, "more than TGC_MAX_NUMEL"},
    {"dim over 2^64",
     "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[18446744073709551616],\"data_offsets\":[0,"
     "24]}}",
     24, TGC_ERR_IO, "2^64 or more"},
    {"nine dims",
     "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,2,3],\"data_offsets\":[0,24]}}",
     24, TGC_ERR_IO, "more than 8 dims"},
    {"size mismatch",
     "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}," E_B "," E_M
     "," E_C "}",
     52, TGC_ERR_IO, "needs 24 bytes"},
    {"begin after end",
     "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[24,0]}}", 24, TGC_ERR_IO,
     "negative size"},
    {"overlap",
     "{" E_W ",\"fc.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}," E_M "," E_C
     "}",
     56, TGC_ERR_IO, "no gap or overlap"},
    {"gap", "{" E_W ",\"fc.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[28,36]}}", 36,
     TGC_ERR_IO, "no gap or overlap"},
    {"past the data", "{" E_W "," E_B "," E_M "," E_C "}", 50, TGC_ERR_IO, "truncated"},
    {"trailing data", "{" E_W "," E_B "," E_M "," E_C "}", 60, TGC_ERR_IO, "trailing bytes"},
    {"duplicate name", "{" E_W "," E_W "," E_B "," E_M "," E_C "}", 56, TGC_ERR_IO,
     "tensor 'fc.weight' appears twice"},
    {"bool byte",
     "{" E_W "," E_B "," E_M "," E_C
     ",\"bn.flag\":{\"dtype\":\"BOOL\",\"shape\":[4],\"data_offsets\":[56,60]}}",
     60, TGC_ERR_IO, "BOOL tensor 'bn.flag' has the byte 2"},
    {"odd sub-byte size",
     "{" E_W "," E_B "," E_M "," E_C
     ",\"bn.x\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[56,58]}}",
     58, TGC_ERR_IO, "not whole bytes"},
    /* metadata */
    {"metadata not object", "{\"__metadata__\":[]," E_W "}", 24, TGC_ERR_IO,
     "__metadata__ is not an object"},
    {"metadata number", "{\"__metadata__\":{\"a\":1}," E_W "}", 24, TGC_ERR_IO,
     "metadata 'a' is not a string"},
    {"two metadata", "{\"__metadata__\":{},\"__metadata__\":{}," E_W "}", 24, TGC_ERR_IO,
     "two __metadata__"},
    {"duplicate key", "{\"__metadata__\":{\"a\":\"1\",\"a\":\"2\"}," E_W "}", 24, TGC_ERR_IO,
     "metadata key 'a' appears twice"},
    /* against the module */
    {"missing tensor", "{" E_W "," E_B "," E_M "}", 48, TGC_ERR_INVALID_ARG,
     "tensor 'bn.count' is not in the file (1 of 4 tensors missing)"},
    {"extra tensor (strict)", "{" E_W "," E_B "," E_M "," E_C "," E_EXTRA "}", 60,
     TGC_ERR_INVALID_ARG, "the file has tensor 'bn.extra', which is not here"},
    {"shape mismatch of the last tensor",
     "{" E_W "," E_B "," E_M ",\"bn.count\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":["
     "48,56]}}",
     56, TGC_ERR_SHAPE, "tensor 'bn.count' is [1] in the file but [] here"},
    {"shape mismatch, same numel",
     "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[3,2],\"data_offsets\":[0,24]}," E_B "," E_M
     "," E_C "}",
     56, TGC_ERR_SHAPE, "tensor 'fc.weight' is [3, 2] in the file but [2, 3] here"},
    {"unsupported dtype",
     "{" E_W "," E_B "," E_M ",\"bn.count\":{\"dtype\":\"U64\",\"shape\":[],\"data_offsets\":["
     "48,56]}}",
     56, TGC_ERR_DTYPE, "tensor 'bn.count' is U64 in the file"},
};

static void test_rejections_change_nothing(void **state)
{
    (void)state;
    unsigned char data[64];
    for (int i = 0; i < 64; i++)
        data[i] = (unsigned char)(i * 7 + 1) & 0x7f; /* finite floats, no BOOL byte 0/1 check */
    data[56] = 1, data[57] = 0, data[58] = 2, data[59] = 1;
    tgc_module *m = build_small(3.0);
    snapshot s;
    snap_take(m, &s);
    for (int i = 0; i < N_OF(bad_cases); i++) {
        const bad_case *c = &bad_cases[i];
        char name[64];
        snprintf(name, sizeof name, "bad%02d.safetensors", i);
        const char *p = tpath(name);
        write_raw(p, c->json, data, c->ndata);
        tgc_clear_error();
        tgc_status st = tgc_module_load(m, p, 1);
        if (st != c->want || !strstr(tgc_last_error(), c->msg) || !strstr(tgc_last_error(), p))
            fail_msg("case '%s': status %s, message \"%s\"; wanted %s with \"%s\"", c->what,
                     tgc_status_str(st), tgc_last_error(), tgc_status_str(c->want), c->msg);
        assert_true(strstr(tgc_last_error(), "tgc_module_load: ") == tgc_last_error());
        snap_check_unchanged(m, &s);
    }
    snap_free(&s);
    tgc_module_free(m);
}

/* The framing: too short for the length, a length past the end, a length over the limit,
 * no file, a directory. */
static void test_rejects_bad_framing(void **state)
{
    (void)state;
    tgc_module *m = build_small(1.0);
    snapshot s;
    snap_take(m, &s);
    const char *p = tpath("frame.safetensors");
    write_bytes(p, "\x10\0\0", 3);
    check_error(tgc_module_load(m, p, 1), TGC_ERR_IO, "3 bytes long, too short");
    write_bytes(p, "", 0);
    check_error(tgc_module_load(m, p, 1), TGC_ERR_IO, "0 bytes long");
    const char *j = "{" E_W "}";
    write_raw_len(p, strlen(j) + 1, j, NULL, 0);
    check_error(tgc_module_load(m, p, 1), TGC_ERR_IO, "runs past the end of the file");
    write_raw_len(p, UINT64_MAX, j, NULL, 0);
    check_error(tgc_module_load(m, p, 1), TGC_ERR_IO, "over safetensors' limit");
    write_raw_len(p, TGC_ST_MAX_HEADER + 1, j, NULL, 0);
    check_error(tgc_module_load(m, p, 1), TGC_ERR_IO, "over safetensors' limit");
    check_error(tgc_module_load(m, tpath("no_such_file"), 1), TGC_ERR_IO,
                "cannot open it: No such file or directory");
    check_error(tgc_module_load(m, tmp_dir, 1), TGC_ERR_IO, "is a directory");
    assert_true(strstr(tgc_last_error(), tmp_dir) != NULL);
    snap_check_unchanged(m, &s);
    snap_free(&s);
    tgc_module_free(m);
}

/* Every truncation of a valid file is rejected (all but the full length). */
static void test_every_truncation_is_rejected(void **state)
{
    (void)state;
    tgc_module *a = build_all_dtypes(5), *b = build_all_dtypes(6);
    const char *p = tpath("trunc_src.safetensors"), *q = tpath("trunc.safetensors");
    assert_int_equal(tgc_module_save(a, p), TGC_OK);
    size_t n;
    unsigned char *img = read_bytes(p, &n);
    snapshot s;
    snap_take(b, &s);
    for (size_t len = 0; len < n; len++) {
        tgc_st_file f;
        check_error(tgc_st_parse("parse", "image", img, len, &f), TGC_ERR_IO, "'image'");
        assert_null(f.entries);
        if (len % 7 == 0 || len + 16 > n) { /* through the file too, on a sample */
            write_bytes(q, img, len);
            check_error(tgc_module_load(b, q, 1), TGC_ERR_IO, q);
        }
    }
    snap_check_unchanged(b, &s);
    write_bytes(q, img, n);
    assert_int_equal(tgc_module_load(b, q, 1), TGC_OK);
    free(img);
    snap_free(&s);
    tgc_module_free(a);
    tgc_module_free(b);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Random bit flips and truncations of valid files (ours and the reference library's): the
 * parser either accepts (and then every entry lies inside the data) or rejects with
 * TGC_ERR_IO; a load of a damaged file either succeeds or changes nothing. */
static void test_fuzz_flips_and_truncations(void **state)
{
    (void)state;
    tgc_module *a = build_all_dtypes(7);
    const char *srcs[2] = {tpath("fuzz_src.safetensors"),
                           TGC_CKPT_FIXTURE_DIR "/numpy_written.safetensors"};
    assert_int_equal(tgc_module_save(a, srcs[0]), TGC_OK);
    tgc_module *targets[2] = {build_all_dtypes(8), build_fixture_tree(0)};
    const char *q = tpath("fuzz.safetensors");
    int accepted = 0, rejected = 0;
    for (int s = 0; s < 2; s++) {
        size_t n;
        unsigned char *img = read_bytes(srcs[s], &n);
        uint64_t hlen = 0;
        for (int i = 7; i >= 0; i--)
            hlen = hlen << 8 | img[i];
        unsigned char *mut = malloc(n);
        snapshot snap;
        snap_take(targets[s], &snap);
        for (int it = 0; it < 3000; it++) {
            memcpy(mut, img, n);
            size_t len = n;
            int flips = 1 + (int)(rng() % 4);
            for (int k = 0; k < flips; k++) {
                /* mostly in the length and the header, where the parser looks */
                size_t at = rng() % 4 ? (size_t)(rng() % (8 + hlen)) : (size_t)(rng() % n);
                mut[at] ^= (unsigned char)(1u << (rng() % 8));
            }
            if (rng() % 3 == 0)
                len = (size_t)(rng() % (n + 1));
            tgc_st_file f;
            tgc_clear_error();
            tgc_status st = tgc_st_parse("fuzz", "image", mut, len, &f);
            if (st == TGC_OK) {
                accepted++;
                for (int e = 0; e < f.n_entries; e++)
                    assert_true(f.entries[e].end <= f.data_size);
                tgc_st_close(&f);
            } else {
                rejected++;
                assert_int_equal(st, TGC_ERR_IO);
                assert_true(strstr(tgc_last_error(), "fuzz: 'image': ") == tgc_last_error());
            }
            if (it % 10 == 0) {
                write_bytes(q, mut, len);
                st = tgc_module_load(targets[s], q, 1);
                if (st == TGC_OK) { /* a flip inside the data, or a harmless one */
                    snap_free(&snap);
                    snap_take(targets[s], &snap);
                } else {
                    snap_check_unchanged(targets[s], &snap);
                }
            }
        }
        snap_free(&snap);
        free(mut);
        free(img);
    }
    print_message("fuzz: %d images accepted, %d rejected\n", accepted, rejected);
    assert_true(accepted > 100 && rejected > 1000);
    tgc_module_free(a);
    tgc_module_free(targets[0]);
    tgc_module_free(targets[1]);
}

/* ---- strict ---- */

static void test_strict_on_and_off(void **state)
{
    (void)state;
    unsigned char data[60] = {0};
    const char *p = tpath("extra.safetensors");
    write_raw(p, "{" E_W "," E_B "," E_M "," E_C "," E_EXTRA "}", data, 60);
    tgc_module *m = build_small(2.0);
    snapshot s;
    snap_take(m, &s);
    check_error(tgc_module_load(m, p, 1), TGC_ERR_INVALID_ARG,
                "load with strict 0 to ignore extra names");
    snap_check_unchanged(m, &s);
    assert_int_equal(tgc_module_load(m, p, 0), TGC_OK);
    float w[6];
    assert_int_equal(tgc_copy_to_host(tgc_module_get(m, "fc.weight"), w, sizeof w), TGC_OK);
    for (int i = 0; i < 6; i++)
        assert_true(w[i] == 0.0f);
    /* and ignores extra names of dtypes libtgc lacks */
    write_raw(p,
              "{" E_W "," E_B "," E_M "," E_C
              ",\"u8\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[56,60]}}",
              data, 60);
    assert_int_equal(tgc_module_load(m, p, 0), TGC_OK);
    check_error(tgc_module_load(m, p, 1), TGC_ERR_INVALID_ARG, "the file has tensor 'u8'");
    snap_free(&s);
    tgc_module_free(m);
}

static void check_names(const tgc_load_report *r, int missing, const char *const *want, int n)
{
    int got = missing ? tgc_load_report_num_missing(r) : tgc_load_report_num_unexpected(r);
    assert_int_equal(got, n);
    for (int i = 0; i < n; i++) {
        const char *name =
            missing ? tgc_load_report_missing(r, i) : tgc_load_report_unexpected(r, i);
        assert_non_null(name);
        assert_string_equal(name, want[i]);
    }
    assert_null(missing ? tgc_load_report_missing(r, n) : tgc_load_report_unexpected(r, n));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "is out of range");
    tgc_clear_error();
}

/* strict 0 loads what the file and the tree share, as PyTorch's load_state_dict, and the
 * report lists the tree's tensors the file lacks and the file's tensors the tree lacks. */
static void test_non_strict_loads_what_matches(void **state)
{
    (void)state;
    unsigned char data[56];
    for (int i = 0; i < 56; i++)
        data[i] = 0;
    const char *p = tpath("partial.safetensors");
    /* fc.weight, fc.bias and bn.running_mean as in build_small, bn.count missing, two extra */
    write_raw(p,
              "{" E_W "," E_B "," E_M
              ",\"head.w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[48,52]},"
              "\"aux\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[52,56]}}",
              data, 56);
    tgc_module *m = build_small(2.0);
    snapshot s;
    snap_take(m, &s);
    tgc_tensor *count = tgc_module_get(m, "bn.count");
    uint64_t count_version = version_of(count);

    tgc_load_report *r = (tgc_load_report *)1;
    check_error(tgc_module_load_report(m, p, 1, &r), TGC_ERR_INVALID_ARG,
                "tensor 'bn.count' is not in the file (1 of 4 tensors missing); load with "
                "strict 0 to load the others");
    snap_check_unchanged(m, &s);
    assert_non_null(r); /* a strict refusal for names still lists them all */
    check_names(r, 1, (const char *const[]){"bn.count"}, 1);
    check_names(r, 0, (const char *const[]){"head.w", "aux"}, 2);
    tgc_load_report_free(r);
    check_error(tgc_module_load(m, p, 1), TGC_ERR_INVALID_ARG, "'bn.count' is not in the file");

    r = NULL;
    assert_int_equal(tgc_module_load_report(m, p, 0, &r), TGC_OK);
    assert_non_null(r);
    check_names(r, 1, (const char *const[]){"bn.count"}, 1);
    check_names(r, 0, (const char *const[]){"head.w", "aux"}, 2);
    tgc_load_report_free(r);
    float w[6];
    assert_int_equal(tgc_copy_to_host(tgc_module_get(m, "fc.weight"), w, sizeof w), TGC_OK);
    for (int i = 0; i < 6; i++)
        assert_true(w[i] == 0.0f);
    assert_true(tgc_item_f64(count) == 7.0); /* missing: kept, not written */
    assert_int_equal(version_of(count), count_version);
    /* plain tgc_module_load, strict 0, the same */
    assert_int_equal(tgc_module_load(m, p, 0), TGC_OK);

    /* a file that matches fully: empty lists */
    tgc_module *full_tree = build_small(1.0);
    const char *q = tpath("full.safetensors");
    assert_int_equal(tgc_module_save(full_tree, q), TGC_OK);
    assert_int_equal(tgc_module_load_report(m, q, 1, &r), TGC_OK);
    assert_int_equal(tgc_load_report_num_missing(r), 0);
    assert_int_equal(tgc_load_report_num_unexpected(r), 0);
    tgc_load_report_free(r);

    /* a shape mismatch is an error with strict 0 too, and gives no report */
    write_raw(p,
              "{" E_W "," E_B ",\"bn.running_mean\":{\"dtype\":\"F64\",\"shape\":[1],"
              "\"data_offsets\":[32,40]}}",
              data, 40);
    snap_free(&s);
    snap_take(m, &s);
    r = (tgc_load_report *)1;
    check_error(tgc_module_load_report(m, p, 0, &r), TGC_ERR_SHAPE,
                "tensor 'bn.running_mean' is [1] in the file but [2] here");
    assert_null(r);
    snap_check_unchanged(m, &s);
    /* a missing file: no report */
    r = (tgc_load_report *)1;
    check_error(tgc_module_load_report(m, tpath("nope"), 0, &r), TGC_ERR_IO, "cannot open it");
    assert_null(r);
    /* the report is optional; its readers check their arguments */
    assert_int_equal(tgc_module_load_report(m, q, 0, NULL), TGC_OK);
    assert_int_equal(tgc_load_report_num_missing(NULL), -1);
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG,
                "tgc_load_report_num_missing: report is NULL");
    assert_int_equal(tgc_load_report_num_unexpected(NULL), -1);
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "report is NULL");
    assert_null(tgc_load_report_missing(NULL, 0));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_load_report_missing: report is NULL");
    tgc_load_report_free(NULL);
    snap_free(&s);
    tgc_module_free(full_tree);
    tgc_module_free(m);
}

/* ---- arguments ---- */

static void test_null_arguments(void **state)
{
    (void)state;
    tgc_module *m = build_small(0.0);
    check_error(tgc_module_save(NULL, tpath("x")), TGC_ERR_INVALID_ARG,
                "tgc_module_save: module is NULL");
    check_error(tgc_module_save(m, NULL), TGC_ERR_INVALID_ARG, "tgc_module_save: path is NULL");
    check_error(tgc_module_save(m, ""), TGC_ERR_INVALID_ARG, "path is NULL or empty");
    check_error(tgc_module_load(NULL, tpath("x"), 1), TGC_ERR_INVALID_ARG,
                "tgc_module_load: module is NULL");
    check_error(tgc_module_load(m, NULL, 1), TGC_ERR_INVALID_ARG, "tgc_module_load: path is NULL");
    tgc_module_free(m);
}

/* ---- write failures ---- */

static void test_write_failures_leave_no_file(void **state)
{
    (void)state;
    tgc_module *m = build_all_dtypes(9);
    /* a directory that does not exist, and one that is a file */
    check_error(tgc_module_save(m, tpath("no_dir/x.safetensors")), TGC_ERR_IO,
                "cannot create the temporary file");
    const char *file = tpath("plain_file");
    write_bytes(file, "x", 1);
    char under[600];
    snprintf(under, sizeof under, "%s/x.safetensors", file);
    check_error(tgc_module_save(m, under), TGC_ERR_IO, "Not a directory");
    assert_true(strstr(tgc_last_error(), under) != NULL);
    /* the target is a directory: the temporary file is written, the rename fails, the
     * temporary file is removed */
    char dir[600];
    snprintf(dir, sizeof dir, "%s/sub", tmp_dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    char target[700];
    snprintf(target, sizeof target, "%s/ckpt", dir);
    assert_int_equal(mkdir(target, 0700), 0);
    check_error(tgc_module_save(m, target), TGC_ERR_IO, "renaming the temporary file");
    assert_int_equal(count_temp_files(dir), 0);
    /* a write that fails half way (file size limit): the old file stays as it was */
    snprintf(target, sizeof target, "%s/keep.safetensors", dir);
    write_bytes(target, "old contents", 12);
    struct rlimit old;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = old;
    small.rlim_cur = 100;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    tgc_status st = tgc_module_save(m, target);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, prev);
    check_error(st, TGC_ERR_IO, "writing the temporary file");
    assert_int_equal(count_temp_files(dir), 0);
    size_t n;
    unsigned char *b = read_bytes(target, &n);
    assert_int_equal(n, 12);
    assert_memory_equal(b, "old contents", 12);
    free(b);
    /* without the limit the same save replaces it */
    assert_int_equal(tgc_module_save(m, target), TGC_OK);
    assert_int_equal(count_temp_files(dir), 0);
    tgc_module *back = build_all_dtypes(10);
    assert_int_equal(tgc_module_load(back, target, 1), TGC_OK);
    /* permissions (root writes anywhere: only checked for other users) */
    if (geteuid() != 0) {
        snprintf(dir, sizeof dir, "%s/ro", tmp_dir);
        assert_int_equal(mkdir(dir, 0500), 0);
        snprintf(target, sizeof target, "%s/x.safetensors", dir);
        check_error(tgc_module_save(m, target), TGC_ERR_IO, "Permission denied");
        assert_int_equal(count_temp_files(dir), 0);
    }
    tgc_module_free(back);
    tgc_module_free(m);
}

/* ---- inside a traced function ---- */

static const char *traced_path;
static tgc_status traced_save_st, traced_load_st;
static char traced_msg[512];

static int traced_read_null;
static char traced_read_msg[512];

static tgc_status checkpoint_in_model(tgc_module *self, tgc_tensor *const *in, int n_in,
                                      tgc_tensor **out, int n_out)
{
    (void)n_in;
    (void)n_out;
    traced_save_st = tgc_module_save(self, traced_path);
    traced_load_st = tgc_module_load(self, traced_path, 1);
    snprintf(traced_msg, sizeof traced_msg, "%s", tgc_last_error());
    tgc_safetensors *st = NULL;
    traced_read_null = tgc_safetensors_open(traced_path, &st) == TGC_OK &&
                       tgc_safetensors_read(st, "fc.bias", tgc_cpu()) == NULL;
    snprintf(traced_read_msg, sizeof traced_read_msg, "%s", tgc_last_error());
    tgc_safetensors_close(st);
    tgc_clear_error();
    out[0] = tgc_add_scalar(in[0], 1.0);
    return out[0] ? TGC_OK : tgc_last_status();
}

/* A save, a load or a read of a file in a model function would run once, when it is traced:
 * refused there. */
static void test_refused_while_tracing(void **state)
{
    (void)state;
    tgc_module *m = build_small(4.0);
    const char *p = tpath("traced.safetensors");
    assert_int_equal(tgc_module_save(m, p), TGC_OK);
    snapshot s;
    snap_take(m, &s);
    traced_path = p;
    tgc_fn *f = tgc_compile(checkpoint_in_model, "ckpt_in_model", NULL);
    assert_non_null(f);
    tgc_tensor *x = tgc_zeros(SHAPE(2), TGC_F32, tgc_cpu()), *y = NULL;
    assert_int_equal(tgc_call(f, m, &x, 1, &y, 1), TGC_OK);
    assert_int_equal(traced_save_st, TGC_ERR_INVALID_ARG);
    assert_int_equal(traced_load_st, TGC_ERR_INVALID_ARG);
    if (!strstr(traced_msg, "tgc_module_load: called while a model function is traced"))
        fail_msg("message: %s", traced_msg);
    assert_true(traced_read_null);
    if (!strstr(traced_read_msg, "tgc_safetensors_read: called while a model function is traced"))
        fail_msg("message: %s", traced_read_msg);
    float yv[2];
    assert_int_equal(tgc_copy_to_host(y, yv, sizeof yv), TGC_OK);
    assert_true(yv[0] == 1.0f && yv[1] == 1.0f);
    snap_check_unchanged(m, &s);
    assert_int_equal(tgc_module_load(m, p, 1), TGC_OK); /* eagerly it works */
    tgc_fn_free(f);
    snap_free(&s);
    tgc_module_free(m);
}

/* ---- optimizers ---- */

/* net { w f32[3, 4], fc { weight f32[2, 3], inner { bias f32[2] } }, running (buffer) },
 * values from seed; dt for every parameter. */
static tgc_module *build_train(uint64_t seed, tgc_dtype dt, int64_t inner_size)
{
    tgc_manual_seed(seed);
    tgc_module *net = tgc_module_create("net", NULL);
    tgc_module *fc = child(net, "fc"), *inner = child(fc, "inner");
    assert_non_null(tgc_module_param(net, "w", randn(SHAPE(3, 4), dt)));
    assert_non_null(tgc_module_buffer(net, "running", randn(SHAPE(4), dt)));
    assert_non_null(tgc_module_param(fc, "weight", randn(SHAPE(2, 3), dt)));
    assert_non_null(tgc_module_param(inner, "bias", randn(&inner_size, 1, dt)));
    return net;
}

typedef enum { OPT_SGD, OPT_ADAM, OPT_ADAMW, OPT_ADAM_AMSGRAD, OPT_KINDS } opt_kind;

static tgc_optim *make_optim(tgc_module *m, opt_kind k)
{
    if (k == OPT_SGD) {
        tgc_sgd_opts o = {.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-2, .nesterov = 1};
        return tgc_sgd(m, &o);
    }
    tgc_adam_opts o = {.lr = 0.01,
                       .weight_decay =
                           k == OPT_ADAMW ? TGC_OPTIM_DEFAULT : 1e-3, /* AdamW's: 1e-2 */
                       .amsgrad = k == OPT_ADAM_AMSGRAD};
    return k == OPT_ADAMW ? tgc_adamw(m, &o) : tgc_adam(m, &o);
}

/* One step with the gradient of sum((p - 0.25)^2 * (1 + p^2 / 4)) for every parameter: it
 * depends on the parameters, so later steps depend on earlier ones. */
static void train_step(tgc_optim *o)
{
    tgc_scope_push();
    int n;
    tgc_tensor *const *ps = tgc_optim_params(o, &n);
    tgc_tensor *g[8];
    assert_true(n <= 8);
    for (int i = 0; i < n; i++) {
        tgc_tensor *p = ps[i], *d = tgc_sub_scalar(p, 0.25), *p2 = tgc_mul(p, p);
        tgc_tensor *a =
            tgc_mul(tgc_mul_scalar(d, 2.0), tgc_add_scalar(tgc_mul_scalar(p2, 0.25), 1));
        tgc_tensor *b = tgc_mul(tgc_mul(d, d), tgc_mul_scalar(p, 0.5));
        g[i] = tgc_add(a, b);
        assert_non_null(g[i]);
    }
    assert_int_equal(tgc_optim_step_grads(o, g), TGC_OK);
    assert_int_equal(tgc_scope_pop(), TGC_OK);
}

static void snap_take_optim(const tgc_optim *o, snapshot *s)
{
    s->n = tgc_optim_num_state(o);
    assert_true(s->n <= 64);
    for (int i = 0; i < s->n; i++) {
        tgc_tensor *t = tgc_optim_state(o, i, NULL);
        s->nbytes[i] = tensor_nbytes(t);
        s->bytes[i] = malloc(s->nbytes[i] + 1);
        assert_int_equal(tgc_copy_to_host(t, s->bytes[i], s->nbytes[i]), TGC_OK);
        s->version[i] = version_of(t);
    }
}

static void snap_check_optim_unchanged(const tgc_optim *o, const snapshot *s)
{
    assert_int_equal(tgc_optim_num_state(o), s->n);
    for (int i = 0; i < s->n; i++) {
        tgc_tensor *t = tgc_optim_state(o, i, NULL);
        unsigned char *now = malloc(s->nbytes[i] + 1);
        assert_int_equal(tgc_copy_to_host(t, now, s->nbytes[i]), TGC_OK);
        assert_memory_equal(now, s->bytes[i], s->nbytes[i]);
        free(now);
        assert_int_equal(version_of(t), s->version[i]);
    }
}

/* 3 steps, save module and optimizer, 3 more; against: a fresh module and optimizer loaded
 * from the files, 3 steps: parameters and state equal bit for bit, the learning rate set
 * before the save restored. */
static void test_optim_roundtrip_resumes_training(void **state)
{
    (void)state;
    for (int k = 0; k < OPT_KINDS; k++) {
        tgc_module *a = build_train(11, TGC_F32, 2), *b = build_train(12, TGC_F32, 2);
        tgc_optim *oa = make_optim(a, k), *ob = make_optim(b, k);
        assert_non_null(oa);
        assert_non_null(ob);
        for (int s = 0; s < 3; s++) {
            if (s == 2)
                assert_int_equal(tgc_optim_set_lr(oa, 0.03), TGC_OK);
            train_step(oa);
        }
        const char *pm = tpath("train_model.safetensors"), *po = tpath("train_optim.safetensors");
        assert_int_equal(tgc_module_save(a, pm), TGC_OK);
        assert_int_equal(tgc_optim_save(oa, po), TGC_OK);
        for (int s = 0; s < 3; s++)
            train_step(oa);

        snapshot before;
        snap_take_optim(ob, &before);
        assert_int_equal(tgc_module_load(b, pm, 1), TGC_OK);
        assert_int_equal(tgc_optim_load(ob, po), TGC_OK);
        for (int i = 0; i < before.n; i++) /* every state tensor written once */
            assert_int_equal(version_of(tgc_optim_state(ob, i, NULL)), before.version[i] + 1);
        snap_free(&before);
        assert_true(tgc_optim_lr(ob) == (double)0.03f);
        for (int s = 0; s < 3; s++)
            train_step(ob);

        snapshot sa, sb;
        snap_take(a, &sa);
        snap_take(b, &sb);
        assert_int_equal(sa.n, sb.n);
        for (int i = 0; i < sa.n; i++)
            assert_memory_equal(sa.bytes[i], sb.bytes[i], sa.nbytes[i]);
        snap_free(&sa);
        snap_free(&sb);
        snap_take_optim(oa, &sa);
        snap_take_optim(ob, &sb);
        assert_int_equal(sa.n, sb.n);
        for (int i = 0; i < sa.n; i++)
            assert_memory_equal(sa.bytes[i], sb.bytes[i], sa.nbytes[i]);
        snap_free(&sa);
        snap_free(&sb);
        tgc_optim_free(oa);
        tgc_optim_free(ob);
        tgc_module_free(a);
        tgc_module_free(b);
    }
    assert_int_equal(count_temp_files(tmp_dir), 0);
}

/* ---- resuming a compiled training step ---- */

static tgc_optim *g_opt; /* the optimizer compiled_step updates */

/* zero_grad, backward of sum_i sum(p_i * (p_i * in[i])) (gradient 2 p_i in[i]), step. */
static tgc_status compiled_step(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                                int n_out)
{
    (void)n_out;
    int np;
    tgc_tensor *const *ps = tgc_optim_params(g_opt, &np);
    if (np != n_in)
        return TGC_ERR_INVALID_ARG;
    tgc_status st = tgc_optim_zero_grad(g_opt);
    tgc_tensor *loss = NULL;
    for (int i = 0; i < np && st == TGC_OK; i++) {
        tgc_tensor *term = tgc_sum(tgc_mul(ps[i], tgc_mul(ps[i], in[i])), NULL, 0, 0);
        loss = loss ? tgc_add(loss, term) : term;
    }
    if (st == TGC_OK)
        st = loss ? tgc_backward(loss) : tgc_last_status();
    if (st == TGC_OK)
        st = tgc_optim_step(g_opt);
    if (st != TGC_OK)
        return st;
    out[0] = tgc_mul_scalar(tgc_module_get(self, "w"), 1.0);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void call_compiled(tgc_fn *f, tgc_module *m, int s)
{
    tgc_scope_push();
    int np;
    tgc_tensor *const *ps = tgc_optim_params(g_opt, &np);
    tgc_tensor *k[4], *out = NULL;
    assert_true(np <= 4);
    for (int i = 0; i < np; i++) {
        k[i] = tgc_full(ps[i]->shape, ps[i]->ndim, 0.5 + 0.25 * s + 0.125 * i, TGC_F32, tgc_cpu());
        assert_non_null(k[i]);
    }
    tgc_status st = tgc_call(f, m, k, np, &out, 1);
    if (st != TGC_OK)
        fail_msg("call %d: %s", s, tgc_last_error());
    assert_int_equal(tgc_scope_pop(), TGC_OK);
}

/* The same as test_optim_roundtrip_resumes_training with a compiled step (zero_grad,
 * backward, step in one variant), the files loaded into a module and an optimizer that a
 * compiled step had already run on: it reads the loaded values, with no recompile. */
static void test_compiled_training_resumes(void **state)
{
    (void)state;
    tgc_module *a = build_train(21, TGC_F32, 2), *b = build_train(22, TGC_F32, 2);
    tgc_optim *oa = make_optim(a, OPT_ADAM), *ob = make_optim(b, OPT_ADAM);
    tgc_fn *fa = tgc_compile(compiled_step, "ckpt_train_a", NULL);
    tgc_fn *fb = tgc_compile(compiled_step, "ckpt_train_b", NULL);
    assert_non_null(fa);
    assert_non_null(fb);
    g_opt = oa;
    for (int s = 0; s < 3; s++)
        call_compiled(fa, a, s);
    const char *pm = tpath("compiled_model.safetensors"), *po = tpath("compiled_optim.safetensors");
    assert_int_equal(tgc_module_save(a, pm), TGC_OK);
    assert_int_equal(tgc_optim_save(oa, po), TGC_OK);
    for (int s = 3; s < 6; s++)
        call_compiled(fa, a, s);

    g_opt = ob;
    call_compiled(fb, b, 9); /* b's own step first: compiled, state no longer zero */
    assert_int_equal(tgc_module_load(b, pm, 1), TGC_OK);
    assert_int_equal(tgc_optim_load(ob, po), TGC_OK);
    for (int s = 3; s < 6; s++)
        call_compiled(fb, b, s);

    snapshot sa, sb;
    snap_take(a, &sa);
    snap_take(b, &sb);
    for (int i = 0; i < sa.n; i++)
        assert_memory_equal(sa.bytes[i], sb.bytes[i], sa.nbytes[i]);
    snap_free(&sa);
    snap_free(&sb);
    snap_take_optim(oa, &sa);
    snap_take_optim(ob, &sb);
    for (int i = 0; i < sa.n; i++)
        assert_memory_equal(sa.bytes[i], sb.bytes[i], sa.nbytes[i]);
    snap_free(&sa);
    snap_free(&sb);
    tgc_stats st;
    assert_int_equal(tgc_fn_stats(fb, &st), TGC_OK);
    if (st.compiles != 1 || st.eager_fallbacks != 0)
        fail_msg("compiles %llu, eager fallbacks %llu (want 1 and 0): %s",
                 (unsigned long long)st.compiles, (unsigned long long)st.eager_fallbacks,
                 st.last_recompile_reason);
    tgc_fn_free(fa);
    tgc_fn_free(fb);
    tgc_optim_free(oa);
    tgc_optim_free(ob);
    tgc_module_free(a);
    tgc_module_free(b);
}

/* The file: the state under tgc_optim_state's names, the kind and hyperparameters in the
 * metadata. */
static void test_optim_file_contents(void **state)
{
    (void)state;
    tgc_module *m = build_train(13, TGC_F32, 2);
    tgc_optim *o = make_optim(m, OPT_ADAM_AMSGRAD);
    train_step(o);
    const char *p = tpath("optim_contents.safetensors");
    assert_int_equal(tgc_optim_save(o, p), TGC_OK);
    tgc_st_file f;
    assert_int_equal(tgc_st_read("test", p, &f), TGC_OK);
    assert_string_equal(tgc_st_meta_get(&f, "format"), "tgc-optim");
    assert_string_equal(tgc_st_meta_get(&f, "kind"), "adam");
    char hp[512];
    assert_true(tgc_optim_hparams(o, hp, sizeof hp) < (int)sizeof hp);
    assert_string_equal(tgc_st_meta_get(&f, "hparams"), hp);
    assert_true(strstr(hp, "\"amsgrad\":true") != NULL);
    assert_int_equal(f.n_entries, tgc_optim_num_state(o));
    assert_int_equal(f.n_entries, 2 + 3 * 3);
    static const char *const names[] = {"step",
                                        "lr",
                                        "w.exp_avg",
                                        "w.exp_avg_sq",
                                        "w.max_exp_avg_sq",
                                        "fc.weight.exp_avg",
                                        "fc.weight.exp_avg_sq",
                                        "fc.weight.max_exp_avg_sq",
                                        "fc.inner.bias.exp_avg",
                                        "fc.inner.bias.exp_avg_sq",
                                        "fc.inner.bias.max_exp_avg_sq"};
    for (int i = 0; i < f.n_entries; i++) {
        const char *nm;
        tgc_optim_state(o, i, &nm);
        assert_string_equal(f.entries[i].name, nm);
        assert_string_equal(f.entries[i].name, names[i]);
    }
    const tgc_st_entry *step = tgc_st_find(&f, "step");
    assert_int_equal(step->ndim, 0);
    assert_string_equal(step->dtype_name, "F32");
    float one;
    memcpy(&one, tgc_st_data(&f, step), 4);
    assert_true(one == 1.0f);
    tgc_st_close(&f);
    tgc_optim_free(o);
    tgc_module_free(m);
}

/* Files that do not fit: other kind, a module's file, other structure, other dtype,
 * other options (amsgrad), damaged: each with its status, and the state untouched. */
static void test_optim_rejections_change_nothing(void **state)
{
    (void)state;
    tgc_module *m = build_train(14, TGC_F32, 2);
    tgc_optim *o = make_optim(m, OPT_ADAM);
    train_step(o);
    train_step(o);
    snapshot s;
    snap_take_optim(o, &s);
    double lr = tgc_optim_lr(o);

    /* files to reject, each from another optimizer */
    const char *p = tpath("optim_bad.safetensors");
    tgc_module *m2 = build_train(15, TGC_F32, 2), *m3 = build_train(16, TGC_F32, 5),
               *m4 = build_train(17, TGC_F64, 2);
    tgc_optim *other_kind = make_optim(m2, OPT_ADAMW);
    assert_int_equal(tgc_optim_save(other_kind, p), TGC_OK);
    check_error(tgc_optim_load(o, p), TGC_ERR_INVALID_ARG,
                "holds the state of adamw optimizer, but this one is adam");
    snap_check_optim_unchanged(o, &s);

    assert_int_equal(tgc_module_save(m2, p), TGC_OK);
    check_error(tgc_optim_load(o, p), TGC_ERR_INVALID_ARG, "is not an optimizer checkpoint");
    snap_check_optim_unchanged(o, &s);

    tgc_optim *amsgrad = make_optim(m2, OPT_ADAM_AMSGRAD);
    assert_int_equal(tgc_optim_save(amsgrad, p), TGC_OK);
    check_error(tgc_optim_load(o, p), TGC_ERR_INVALID_ARG,
                "the file has tensor 'w.max_exp_avg_sq', which is not here");
    snap_check_optim_unchanged(o, &s);
    tgc_optim *o_ams = make_optim(m, OPT_ADAM_AMSGRAD);
    assert_int_equal(tgc_optim_save(o, p), TGC_OK);
    check_error(tgc_optim_load(o_ams, p), TGC_ERR_INVALID_ARG,
                "tensor 'w.max_exp_avg_sq' is not in the file");
    tgc_optim_free(o_ams);

    tgc_optim *other_shape = make_optim(m3, OPT_ADAM);
    assert_int_equal(tgc_optim_save(other_shape, p), TGC_OK);
    check_error(tgc_optim_load(o, p), TGC_ERR_SHAPE,
                "tensor 'fc.inner.bias.exp_avg' is [5] in the file but [2] here");
    snap_check_optim_unchanged(o, &s);

    tgc_optim *other_dtype = make_optim(m4, OPT_ADAM);
    assert_int_equal(tgc_optim_save(other_dtype, p), TGC_OK);
    check_error(tgc_optim_load(o, p), TGC_ERR_DTYPE,
                "tensor 'w.exp_avg' is f64 in the file but f32 here");
    snap_check_optim_unchanged(o, &s);

    /* damaged: a truncation, a missing file */
    assert_int_equal(tgc_optim_save(o, p), TGC_OK);
    size_t n;
    unsigned char *img = read_bytes(p, &n);
    write_bytes(p, img, n - 1);
    free(img);
    check_error(tgc_optim_load(o, p), TGC_ERR_IO, "truncated");
    check_error(tgc_optim_load(o, tpath("no_such_optim")), TGC_ERR_IO, "cannot open it");
    snap_check_optim_unchanged(o, &s);
    assert_true(tgc_optim_lr(o) == lr);

    /* arguments */
    check_error(tgc_optim_save(NULL, p), TGC_ERR_INVALID_ARG, "tgc_optim_save: optimizer is NULL");
    check_error(tgc_optim_save(o, NULL), TGC_ERR_INVALID_ARG, "tgc_optim_save: path is NULL");
    check_error(tgc_optim_load(NULL, p), TGC_ERR_INVALID_ARG, "tgc_optim_load: optimizer is NULL");
    check_error(tgc_optim_load(o, NULL), TGC_ERR_INVALID_ARG, "tgc_optim_load: path is NULL");
    check_error(tgc_optim_save(o, tpath("no_dir/o.safetensors")), TGC_ERR_IO,
                "cannot create the temporary file");

    snap_free(&s);
    tgc_optim_free(other_kind);
    tgc_optim_free(amsgrad);
    tgc_optim_free(other_shape);
    tgc_optim_free(other_dtype);
    tgc_optim_free(o);
    tgc_module_free(m);
    tgc_module_free(m2);
    tgc_module_free(m3);
    tgc_module_free(m4);
}

/* ---- durability ---- */

/* The writer's fsync and rename calls, in order (the test links with --wrap of both). */
static char sys_log[16][600];
static int n_sys_log, log_sys;

int __real_fsync(int fd);
int __wrap_fsync(int fd);
int __wrap_fsync(int fd)
{
    if (log_sys && n_sys_log < 16) {
        char link[64], target[512];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t k = readlink(link, target, sizeof target - 1);
        target[k > 0 ? k : 0] = 0;
        snprintf(sys_log[n_sys_log++], sizeof sys_log[0], "fsync %s", target);
    }
    return __real_fsync(fd);
}

int __real_rename(const char *from, const char *to);
int __wrap_rename(const char *from, const char *to);
int __wrap_rename(const char *from, const char *to)
{
    if (log_sys && n_sys_log < 16)
        snprintf(sys_log[n_sys_log++], sizeof sys_log[0], "rename %.280s %.280s", from, to);
    return __real_rename(from, to);
}

/* The temporary file is synced before it is renamed onto the path, the directory after. */
static void test_save_syncs_file_then_directory(void **state)
{
    (void)state;
    tgc_module *m = build_small(1.0);
    const char *p = tpath("synced.safetensors");
    n_sys_log = 0;
    log_sys = 1;
    assert_int_equal(tgc_module_save(m, p), TGC_OK);
    log_sys = 0;
    assert_int_equal(n_sys_log, 3);
    char tmp[600];
    assert_int_equal(sscanf(sys_log[0], "fsync %599s", tmp), 1);
    assert_non_null(strstr(tmp, "synced.safetensors.tmp."));
    char want[1300];
    snprintf(want, sizeof want, "rename %s %s", tmp, p);
    assert_string_equal(sys_log[1], want);
    char *real_dir = realpath(tmp_dir, NULL); /* a buffer of PATH_MAX, or _FORTIFY_SOURCE aborts */
    assert_non_null(real_dir);
    snprintf(want, sizeof want, "fsync %s", real_dir);
    free(real_dir);
    assert_string_equal(sys_log[2], want);
    tgc_module_free(m);
}

/* A file whose tail was zeroed (a torn write the file system kept the length of) is refused,
 * naming the tensor it damaged, and changes nothing. */
static void test_zeroed_tail_is_refused(void **state)
{
    (void)state;
    tgc_module *m = build_small(3.0), *into = build_small(0.0);
    const char *p = tpath("torn.safetensors");
    assert_int_equal(tgc_module_save(m, p), TGC_OK);
    size_t n;
    unsigned char *img = read_bytes(p, &n);
    memset(img + n - 12, 0, 12); /* bn.count (8 bytes) and half of bn.running_mean */
    write_bytes(p, img, n);
    snapshot s;
    snap_take(into, &s);
    check_error(tgc_module_load(into, p, 1), TGC_ERR_IO,
                "tensor 'bn.running_mean' does not match its checksum");
    snap_check_unchanged(into, &s);
    /* a single flipped bit of the data is caught as well */
    free(img);
    assert_int_equal(tgc_module_save(m, p), TGC_OK);
    img = read_bytes(p, &n);
    img[n - 56] ^= 0x10; /* the first byte of fc.weight */
    write_bytes(p, img, n);
    check_error(tgc_module_load(into, p, 1), TGC_ERR_IO,
                "tensor 'fc.weight' does not match its checksum");
    snap_check_unchanged(into, &s);
    /* a checksum that is not 8 hex digits is a malformed file */
    unsigned char data[56] = {0};
    write_raw(p,
              "{\"__metadata__\":{\"tgc.crc32:fc.bias\":\"xyz\"}," E_W "," E_B "," E_M "," E_C "}",
              data, 56);
    check_error(tgc_module_load(into, p, 1), TGC_ERR_IO,
                "the checksum of tensor 'fc.bias' in the metadata is not 8 hex digits");
    snap_check_unchanged(into, &s);
    /* the right checksum (of 8 zero bytes) and one naming no tensor are accepted */
    write_raw(p,
              "{\"__metadata__\":{\"tgc.crc32:fc.bias\":\"6522df69\",\"tgc.crc32:gone\":\"0\"}," E_W
              "," E_B "," E_M "," E_C "}",
              data, 56);
    assert_int_equal(tgc_module_load(into, p, 1), TGC_OK);
    snap_free(&s);
    free(img);
    tgc_module_free(m);
    tgc_module_free(into);
}

/* A PID that no process has now: a child that has exited and been reaped. */
static long dead_pid(void)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return (long)pid;
}

static void touch_aged(const char *path, int age_s)
{
    write_bytes(path, "x", 1);
    struct timespec ts[2];
    clock_gettime(CLOCK_REALTIME, &ts[0]);
    ts[0].tv_sec -= age_s;
    ts[1] = ts[0];
    assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* A save removes the temporary files killed saves to the same path left (process gone, not
 * written for a minute) and keeps every other one. */
static void test_save_removes_stale_temporaries(void **state)
{
    (void)state;
    tgc_module *m = build_small(1.0);
    const char *p = tpath("stale.safetensors");
    long dead = dead_pid();
    char stale[600], recent[600], alive[600], other[600], odd[600];
    snprintf(stale, sizeof stale, "%s.tmp.%ld.3", p, dead);
    snprintf(recent, sizeof recent, "%s.tmp.%ld.4", p, dead);
    snprintf(alive, sizeof alive, "%s.tmp.%ld.0", p, (long)getppid());
    snprintf(other, sizeof other, "%s/other.safetensors.tmp.%ld.0", tmp_dir, dead);
    snprintf(odd, sizeof odd, "%s.tmp.%ld.x", p, dead);
    touch_aged(stale, 3600);
    touch_aged(recent, 0);
    touch_aged(alive, 3600);
    touch_aged(other, 3600);
    touch_aged(odd, 3600);
    assert_int_equal(tgc_module_save(m, p), TGC_OK);
    assert_false(exists(stale));
    assert_true(exists(recent));
    assert_true(exists(alive));
    assert_true(exists(other));
    assert_true(exists(odd));
    unlink(recent);
    unlink(alive);
    unlink(other);
    unlink(odd);
    tgc_module_free(m);
}

/* ---- reading files into new tensors (tgc/safetensors.h) ---- */

/* got has want's dtype, shape and bytes. */
static void check_same_tensor(const tgc_tensor *got, tgc_tensor *want)
{
    assert_non_null(got);
    assert_int_equal(tgc_dtype_of(got), tgc_dtype_of(want));
    assert_int_equal(tgc_ndim(got), tgc_ndim(want));
    for (int d = 0; d < tgc_ndim(want); d++)
        assert_int_equal(tgc_size(got, d), tgc_size(want, d));
    size_t n = tensor_nbytes(want);
    unsigned char *a = malloc(n + 1), *b = malloc(n + 1);
    assert_int_equal(tgc_copy_to_host(got, a, n), TGC_OK);
    assert_int_equal(tgc_copy_to_host(want, b, n), TGC_OK);
    assert_memory_equal(a, b, n);
    free(a);
    free(b);
}

/* The reference library's file, listed and read with no module prepared: names in order,
 * dtypes, shapes, values and metadata. */
static void test_safetensors_reads_the_reference_file(void **state)
{
    (void)state;
    tgc_module *want = build_fixture_tree(1);
    tgc_safetensors *st = NULL;
    assert_int_equal(tgc_safetensors_open(TGC_CKPT_FIXTURE_DIR "/numpy_written.safetensors", &st),
                     TGC_OK);
    assert_non_null(st);
    static const char *const sorted[] = {"bn1.num_batches_tracked",
                                         "bn1.running_mean",
                                         "bn1.weight",
                                         "conv1.bias",
                                         "conv1.weight",
                                         "empty",
                                         "layer1.0.fc.weight",
                                         "layer1.0.idx",
                                         "layer1.0.mask"};
    assert_int_equal(tgc_safetensors_num_tensors(st), N_OF(sorted));
    for (int i = 0; i < N_OF(sorted); i++) {
        const char *name = tgc_safetensors_name(st, i);
        assert_non_null(name);
        assert_string_equal(name, sorted[i]);
        tgc_tensor *w = tgc_module_get(want, name);
        assert_non_null(w);
        tgc_dtype dt = (tgc_dtype)-1;
        int ndim = -1;
        int64_t shape[TGC_MAX_DIMS];
        assert_int_equal(tgc_safetensors_tensor_info(st, name, &dt, &ndim, shape), TGC_OK);
        assert_int_equal(dt, tgc_dtype_of(w));
        assert_int_equal(ndim, tgc_ndim(w));
        for (int d = 0; d < ndim; d++)
            assert_int_equal(shape[d], tgc_size(w, d));
        assert_int_equal(tgc_safetensors_tensor_info(st, name, NULL, NULL, NULL), TGC_OK);
        check_same_tensor(tgc_safetensors_read(st, name, tgc_cpu()), w);
    }
    assert_int_equal(tgc_safetensors_num_metadata(st), 2);
    assert_string_equal(tgc_safetensors_metadata(st, "format"), "pt");
    assert_string_equal(tgc_safetensors_metadata(st, "written_by"), "safetensors.numpy");
    const char *k0 = tgc_safetensors_metadata_key(st, 0), *k1 = tgc_safetensors_metadata_key(st, 1);
    assert_non_null(k0);
    assert_non_null(k1);
    assert_true((!strcmp(k0, "format") && !strcmp(k1, "written_by")) ||
                (!strcmp(k1, "format") && !strcmp(k0, "written_by")));
    assert_int_equal(tgc_last_status(), TGC_OK);
    tgc_safetensors_close(st);
    tgc_module_free(want);
}

/* A file of tgc_module_save read back tensor by tensor: every dtype bit for bit, the
 * checksums visible as metadata; a read tensor outlives the handle. */
static void test_safetensors_reads_a_saved_module(void **state)
{
    (void)state;
    tgc_module *m = build_all_dtypes(11);
    const char *p = tpath("listed.safetensors");
    assert_int_equal(tgc_module_save(m, p), TGC_OK);
    tgc_safetensors *st;
    assert_int_equal(tgc_safetensors_open(p, &st), TGC_OK);
    int n = tgc_module_num_tensors(m);
    assert_int_equal(tgc_safetensors_num_tensors(st), n);
    assert_int_equal(tgc_safetensors_num_metadata(st), n);
    tgc_tensor *kept = NULL;
    for (int i = 0; i < n; i++) {
        char name[128];
        assert_true(tgc_module_tensor_name(m, i, name, sizeof name) < (int)sizeof name);
        tgc_tensor *t = tgc_safetensors_read(st, name, tgc_cpu());
        check_same_tensor(t, tgc_module_tensor_at(m, i, NULL));
        char key[160];
        snprintf(key, sizeof key, "tgc.crc32:%s", name);
        assert_non_null(tgc_safetensors_metadata(st, key));
        if (!strcmp(name, "p32"))
            kept = t;
    }
    tgc_safetensors_close(st);
    assert_non_null(kept);
    check_same_tensor(kept, tgc_module_get(m, "p32"));
    tgc_safetensors_close(NULL);
    tgc_module_free(m);
}

static void test_safetensors_errors(void **state)
{
    (void)state;
    tgc_safetensors *st = (tgc_safetensors *)1;
    check_error(tgc_safetensors_open(tpath("absent.safetensors"), &st), TGC_ERR_IO,
                "tgc_safetensors_open: '");
    assert_null(st);
    check_error(tgc_safetensors_open(NULL, &st), TGC_ERR_INVALID_ARG,
                "tgc_safetensors_open: path is NULL");
    check_error(tgc_safetensors_open(tpath("x"), NULL), TGC_ERR_INVALID_ARG, "out is NULL");
    /* a damaged file is refused at open, naming the tensor */
    tgc_module *m = build_small(4.0);
    const char *p = tpath("damaged.safetensors");
    assert_int_equal(tgc_module_save(m, p), TGC_OK);
    size_t n;
    unsigned char *img = read_bytes(p, &n);
    memset(img + n - 8, 0, 8);
    write_bytes(p, img, n);
    free(img);
    check_error(tgc_safetensors_open(p, &st), TGC_ERR_IO, "tgc_safetensors_open: '" /* path */);
    check_error(tgc_last_status(), TGC_ERR_IO, "tensor 'bn.count' does not match its checksum");
    assert_null(st);
    /* names, dtypes and indexes */
    unsigned char data[60] = {0};
    write_raw(p,
              "{" E_W "," E_B "," E_M "," E_C
              ",\"u8\":{\"dtype\":\"U8\",\"shape\":[2,2],\"data_offsets\":[56,60]}}",
              data, 60);
    assert_int_equal(tgc_safetensors_open(p, &st), TGC_OK);
    int ndim = 0;
    int64_t shape[TGC_MAX_DIMS] = {0};
    check_error(tgc_safetensors_tensor_info(st, "u8", NULL, &ndim, shape), TGC_ERR_DTYPE,
                "tgc_safetensors_tensor_info: '");
    check_error(tgc_last_status(), TGC_ERR_DTYPE,
                "tensor 'u8' is U8, a dtype libtgc does not have");
    assert_int_equal(ndim, 2);
    assert_int_equal(shape[0], 2);
    assert_int_equal(shape[1], 2);
    assert_null(tgc_safetensors_read(st, "u8", tgc_cpu()));
    check_error(tgc_last_status(), TGC_ERR_DTYPE, "tgc_safetensors_read: ");
    assert_null(tgc_safetensors_read(st, "fc.w", tgc_cpu()));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "has no tensor 'fc.w' (5 tensors)");
    check_error(tgc_safetensors_tensor_info(st, "nope", NULL, NULL, NULL), TGC_ERR_INVALID_ARG,
                "tgc_safetensors_tensor_info: '");
    assert_null(tgc_safetensors_read(st, NULL, tgc_cpu()));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_safetensors_read: name is NULL");
    assert_null(tgc_safetensors_read(st, "fc.weight", tgc_cuda(99)));
    check_error(tgc_last_status(), TGC_ERR_DEVICE, "tgc_safetensors_read");
    assert_null(tgc_safetensors_name(st, 5));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG,
                "tgc_safetensors_name: index 5 is out of range");
    assert_null(tgc_safetensors_name(st, -1));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "index -1 is out of range");
    assert_int_equal(tgc_safetensors_num_metadata(st), 0);
    assert_null(tgc_safetensors_metadata(st, "format"));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_safetensors_metadata: '");
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "has no metadata key 'format'");
    assert_null(tgc_safetensors_metadata_key(st, 0));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_safetensors_metadata_key: index 0");
    tgc_safetensors_close(st);
    assert_int_equal(tgc_safetensors_num_tensors(NULL), -1);
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG,
                "tgc_safetensors_num_tensors: the handle is NULL");
    assert_int_equal(tgc_safetensors_num_metadata(NULL), -1);
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_safetensors_num_metadata");
    assert_null(tgc_safetensors_name(NULL, 0));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG, "tgc_safetensors_name: the handle is NULL");
    tgc_module_free(m);
}

/* ---- batch norm's num_batches_tracked ---- */

static int64_t batches_of(tgc_module *m)
{
    tgc_tensor *n = tgc_module_get(m, "bn.num_batches_tracked");
    assert_non_null(n);
    return (int64_t)tgc_item_f64(n);
}

static tgc_status bn_forward(tgc_module *self, tgc_tensor *const *in, int n_in, tgc_tensor **out,
                             int n_out)
{
    (void)n_in;
    (void)n_out;
    out[0] = tgc_module_batch_norm(tgc_module_get_child(self, "bn"), in[0], 0.1, 1e-5);
    return out[0] ? TGC_OK : tgc_last_status();
}

static void bn_call(tgc_fn *f, tgc_module *m, tgc_tensor *x)
{
    tgc_scope_push();
    tgc_tensor *out = NULL;
    tgc_status st = f ? tgc_call(f, m, &x, 1, &out, 1) : bn_forward(m, &x, 1, &out, 1);
    if (st != TGC_OK)
        fail_msg("%s", tgc_last_error());
    assert_int_equal(tgc_scope_pop(), TGC_OK);
}

/* tgc_module_add_batch_norm makes PyTorch's BatchNorm2d state, so its state_dict loads
 * strictly; training batches are counted eagerly and in a compiled function (in place, one
 * variant), evaluation ones are not, and the count saves under PyTorch's name and dtype. */
static void test_batch_norm_keeps_num_batches_tracked(void **state)
{
    (void)state;
    tgc_module *net = tgc_module_create("net", NULL);
    tgc_module *bn = child(net, "bn");
    assert_int_equal(tgc_module_add_batch_norm(bn, 3, TGC_F32, tgc_cpu()), TGC_OK);
    static const char *const names[] = {"bn.weight", "bn.bias", "bn.running_mean", "bn.running_var",
                                        "bn.num_batches_tracked"};
    assert_int_equal(tgc_module_num_tensors(net), 5);
    for (int i = 0; i < 5; i++) {
        char name[64];
        int is_buffer;
        tgc_tensor *t = tgc_module_tensor_at(net, i, &is_buffer);
        tgc_module_tensor_name(net, i, name, sizeof name);
        assert_string_equal(name, names[i]);
        assert_int_equal(is_buffer, i >= 2);
        assert_int_equal(tgc_dtype_of(t), i == 4 ? TGC_I64 : TGC_F32);
        assert_int_equal(tgc_ndim(t), i == 4 ? 0 : 1);
    }
    assert_true(tgc_item_f64(tgc_module_get(net, "bn.running_var")) == 1.0);
    assert_int_equal(batches_of(net), 0);

    /* BatchNorm2d(3).state_dict() as safetensors.torch.save_file writes it (its order) */
    float fdata[12] = {1, 1, 1, 0, 0, 0, 0.5f, 0.5f, 0.5f, 2, 2, 2};
    unsigned char data[56];
    memcpy(data, fdata, 48);
    int64_t five = 5;
    memcpy(data + 48, &five, 8);
    const char *p = tpath("torch_bn.safetensors");
    write_raw(p,
              "{\"__metadata__\":{\"format\":\"pt\"},"
              "\"bn.weight\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]},"
              "\"bn.bias\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[12,24]},"
              "\"bn.running_mean\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[24,36]},"
              "\"bn.running_var\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[36,48]},"
              "\"bn.num_batches_tracked\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[48,"
              "56]}}",
              data, 56);
    assert_int_equal(tgc_module_load(net, p, 1), TGC_OK);
    assert_int_equal(batches_of(net), 5);

    tgc_manual_seed(3);
    tgc_tensor *x = tgc_randn(SHAPE(4, 3, 2, 2), TGC_F32, tgc_cpu());
    assert_non_null(x);
    bn_call(NULL, net, x); /* eager */
    bn_call(NULL, net, x);
    assert_int_equal(batches_of(net), 7);
    tgc_module_train(net, 0);
    bn_call(NULL, net, x);
    assert_int_equal(batches_of(net), 7);
    tgc_module_train(net, 1);

    tgc_fn *f = tgc_compile(bn_forward, "bn_count", NULL);
    assert_non_null(f);
    tgc_tensor *count = tgc_module_get(net, "bn.num_batches_tracked");
    for (int i = 0; i < 3; i++)
        bn_call(f, net, x);
    assert_int_equal(batches_of(net), 10);
    assert_ptr_equal(tgc_module_get(net, "bn.num_batches_tracked"), count);
    tgc_module_train(net, 0);
    bn_call(f, net, x);
    assert_int_equal(batches_of(net), 10);
    tgc_stats stats;
    assert_int_equal(tgc_fn_stats(f, &stats), TGC_OK);
    assert_int_equal(stats.compiles, 2); /* training and evaluation */
    assert_int_equal(stats.eager_fallbacks, 0);
    tgc_fn_free(f);

    /* saved under PyTorch's name, i64 0-d, and read back */
    const char *q = tpath("bn_saved.safetensors");
    assert_int_equal(tgc_module_save(net, q), TGC_OK);
    tgc_safetensors *st;
    assert_int_equal(tgc_safetensors_open(q, &st), TGC_OK);
    tgc_tensor *n = tgc_safetensors_read(st, "bn.num_batches_tracked", tgc_cpu());
    assert_non_null(n);
    assert_int_equal(tgc_dtype_of(n), TGC_I64);
    assert_int_equal(tgc_ndim(n), 0);
    assert_true(tgc_item_f64(n) == 10.0);
    tgc_safetensors_close(st);

    /* refusals add nothing */
    check_error(tgc_module_add_batch_norm(bn, 3, TGC_F32, tgc_cpu()), TGC_ERR_INVALID_ARG,
                "tgc_module_add_batch_norm: module 'bn' already has a member named 'weight'");
    tgc_module *other = child(net, "other");
    assert_int_equal(tgc_module_set_i64(other, "running_var", 1), TGC_OK);
    check_error(tgc_module_add_batch_norm(other, 3, TGC_F32, tgc_cpu()), TGC_ERR_INVALID_ARG,
                "already has a member named 'running_var'");
    check_error(tgc_module_add_batch_norm(other, 0, TGC_F32, tgc_cpu()), TGC_ERR_INVALID_ARG,
                "num_features is 0");
    check_error(tgc_module_add_batch_norm(other, 3, TGC_I32, tgc_cpu()), TGC_ERR_DTYPE,
                "dtype i32 is not floating point");
    check_error(tgc_module_add_batch_norm(NULL, 3, TGC_F32, tgc_cpu()), TGC_ERR_INVALID_ARG,
                "module is NULL");
    assert_int_equal(tgc_module_num_tensors(other), 0);
    assert_null(tgc_module_batch_norm(other, x, 0.1, 1e-5));
    check_error(tgc_last_status(), TGC_ERR_INVALID_ARG,
                "tgc_module_batch_norm: module 'other' has no 'weight'");
    tgc_module_free(net);
}

/* A batch norm built by hand keeps working; with a num_batches_tracked buffer of its own it
 * is counted too. */
static void test_batch_norm_counts_a_hand_built_buffer(void **state)
{
    (void)state;
    tgc_module *m = tgc_module_create("bn", NULL);
    tgc_tensor *rm = tgc_module_buffer(m, "running_mean", tgc_zeros(SHAPE(2), TGC_F32, tgc_cpu()));
    tgc_tensor *rv = tgc_module_buffer(m, "running_var", tgc_ones(SHAPE(2), TGC_F32, tgc_cpu()));
    tgc_tensor *x = tgc_randn(SHAPE(3, 2), TGC_F32, tgc_cpu());
    assert_non_null(tgc_batch_norm(x, rm, rv, NULL, NULL, 1, 0.1, 1e-5));
    assert_int_equal(tgc_module_num_tensors(m), 2);
    tgc_tensor *n =
        tgc_module_buffer(m, "num_batches_tracked", tgc_zeros(SCALAR, TGC_I64, tgc_cpu()));
    assert_non_null(tgc_batch_norm(x, rm, rv, NULL, NULL, 1, 0.1, 1e-5));
    assert_non_null(tgc_batch_norm(x, rm, rv, NULL, NULL, 0, 0.1, 1e-5));
    assert_true(tgc_item_f64(n) == 1.0);
    /* running stats that are not a module's: nothing to count */
    tgc_tensor *frm = tgc_zeros(SHAPE(2), TGC_F32, tgc_cpu()),
               *frv = tgc_ones(SHAPE(2), TGC_F32, tgc_cpu());
    assert_non_null(tgc_batch_norm(x, frm, frv, NULL, NULL, 1, 0.1, 1e-5));
    assert_true(tgc_item_f64(n) == 1.0);
    tgc_module_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_roundtrip_every_dtype_bit_for_bit, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_file_layout_and_names, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_empty_tree, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_load_converts_dtypes, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_reads_the_reference_librarys_file, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_rejections_change_nothing, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_rejects_bad_framing, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_every_truncation_is_rejected, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_fuzz_flips_and_truncations, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_strict_on_and_off, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_non_strict_loads_what_matches, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_null_arguments, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_write_failures_leave_no_file, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_refused_while_tracing, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_optim_roundtrip_resumes_training, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_compiled_training_resumes, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_optim_file_contents, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_optim_rejections_change_nothing, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_safetensors_reads_the_reference_file, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_safetensors_reads_a_saved_module, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_safetensors_errors, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_batch_norm_keeps_num_batches_tracked, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_batch_norm_counts_a_hand_built_buffer, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_save_syncs_file_then_directory, scoped_setup,
                                        scoped_teardown),
        cmocka_unit_test_setup_teardown(test_zeroed_tail_is_refused, scoped_setup, scoped_teardown),
        cmocka_unit_test_setup_teardown(test_save_removes_stale_temporaries, scoped_setup,
                                        scoped_teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
