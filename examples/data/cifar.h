/* CIFAR-10 for the libtgc examples, header-only: the binary distribution's reader, a
 * synthetic stand-in written in the same format, per-channel normalization, seeded shuffling
 * per epoch and a prefetch thread that prepares the next batch (and copies it to the device)
 * while the current training step runs.
 *
 * Format (https://www.cs.toronto.edu/~kriz/cifar.html, "binary version"): data_batch_1.bin
 * ... data_batch_5.bin (training) and test_batch.bin, each a sequence of 3073-byte records:
 * one label byte (0..9), then 3072 pixel bytes, channel-major (1024 red, 1024 green, 1024
 * blue, each 32 rows of 32). The real files hold 10000 records each; the reader takes any
 * whole number of records.
 *
 *   cifar_set train, test;
 *   int synthetic;                                  // 1: the files were generated here
 *   cifar_open_dir(dir, 50000, 10000, &synthetic);  // writes a synthetic set if dir lacks one
 *   cifar_load(dir, 1, &train); cifar_load(dir, 0, &test);
 *   cifar_loader ld;                                // the prefetch thread
 *   cifar_loader_start(&ld, &train, 64, seed, tgc_cuda(0), 1, epochs); // shuffled
 *   for (;;) { cifar_batch *b = cifar_loader_next(&ld); ...; cifar_loader_release(&ld, b); }
 *   cifar_loader_stop(&ld); cifar_free(&train);
 *
 * Synthetic set: when the directory has no data_batch_1.bin, cifar_open_dir creates the
 * directory and writes data_batch_1..5.bin and test_batch.bin with the requested record
 * counts, plus a file SYNTHETIC saying so, and sets *synthetic (also on later runs that find
 * that marker). Each class has its own pattern (a colour, a grating of class-dependent
 * orientation and frequency and a bright square at a class-dependent place) under per-image
 * random phase, contrast, shift, brightness, colour jitter and pixel noise: a small CNN
 * learns it within an epoch (a test of the training loop, not of a model). Deterministic (a
 * fixed seed).
 *
 * Normalization: (pixel / 255 - mean[c]) / std[c] with the per-channel statistics of the
 * CIFAR-10 training set commonly used (mean 0.4914, 0.4822, 0.4465; std 0.2470, 0.2435,
 * 0.2616).
 *
 * Batches: training epochs are a permutation of the records drawn from (seed, epoch), cut into
 * full batches (the last partial batch is dropped, as PyTorch's drop_last=True: every step
 * has one shape, so the compiled step never recompiles for it). Evaluation (shuffle 0) visits
 * the records in order and pads the last batch to full size with zero images labelled
 * CIFAR_IGNORE (-100, cross entropy's default ignore_index), so one batch shape covers the
 * whole test set; `valid` counts the real images of a batch.
 *
 * Threading and ownership: the loader's thread makes each batch's tensors in its own root
 * scope (from host memory with tgc_from_data, then tgc_to the device and, for a GPU,
 * tgc_cuda_synchronize of its own stream before handing the batch over, as include/tgc/cuda.h
 * asks for tensors passed between threads). The caller uses a batch between
 * cifar_loader_next and cifar_loader_release and must not free its tensors: the loader's
 * thread frees them after the release. Release a GPU batch only after the work that reads it
 * has finished (read a result on the host first), since its memory goes back to the loader
 * thread's stream. One consumer thread per loader. cifar_set memory is malloc'd and freed by
 * cifar_free. */
#ifndef TGC_EXAMPLES_DATA_CIFAR_H
#define TGC_EXAMPLES_DATA_CIFAR_H

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include <tgc/tgc.h>
#if defined(__has_include)
#if __has_include(<tgc/cuda.h>)
#include <tgc/cuda.h>
#define CIFAR_HAVE_CUDA_H 1
#endif
#endif

#define CIFAR_RECORD  3073
#define CIFAR_PIXELS  3072
#define CIFAR_CLASSES 10
#define CIFAR_IGNORE  (-100)

static const float cifar_mean[3] = {0.4914f, 0.4822f, 0.4465f};
static const float cifar_std[3] = {0.2470f, 0.2435f, 0.2616f};
static const char *const cifar_class_names[CIFAR_CLASSES] = {
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"};

typedef struct cifar_set {
    int64_t n;       /* records */
    uint8_t *labels; /* n */
    uint8_t *pixels; /* n * 3072, CHW */
} cifar_set;

/* ---- a small deterministic generator (splitmix64) ---- */
static inline uint64_t cifar_mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline double cifar_uniform(uint64_t *s) /* [0, 1) */
{
    return (double)(cifar_mix(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* ---- files ---- */
static inline int cifar_join(char *buf, size_t n, const char *dir, const char *file)
{
    int k = snprintf(buf, n, "%s/%s", dir, file);
    return k > 0 && (size_t)k < n;
}

static inline int cifar_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* mkdir -p; 1 on success. */
static inline int cifar_mkdirs(const char *dir)
{
    char buf[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof buf)
        return 0;
    memcpy(buf, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == 0) {
            char c = buf[i];
            buf[i] = 0;
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return 0;
            buf[i] = c;
        }
    }
    return 1;
}

/* One synthetic record of class `label` into rec (3073 bytes); rng per image. */
static inline void cifar_synth_record(uint8_t label, uint64_t *rng, uint8_t *rec)
{
    /* class colour (fixed per class), grating angle and frequency, square position */
    static const float color[CIFAR_CLASSES][3] = {
        {0.55f, 0.65f, 0.85f}, {0.80f, 0.30f, 0.30f}, {0.55f, 0.60f, 0.35f}, {0.65f, 0.50f, 0.40f},
        {0.45f, 0.55f, 0.30f}, {0.60f, 0.45f, 0.35f}, {0.35f, 0.55f, 0.35f}, {0.60f, 0.45f, 0.30f},
        {0.35f, 0.45f, 0.70f}, {0.70f, 0.70f, 0.70f}};
    double angle = 3.14159265358979 * (double)label / CIFAR_CLASSES;
    double freq = 0.25 + 0.05 * (double)(label % 5);
    double phase = 6.283185307179586 * cifar_uniform(rng);
    double contrast = 0.15 + 0.15 * cifar_uniform(rng);
    int sx = 4 + (int)(label % 4) * 6 + (int)(cifar_uniform(rng) * 5) - 2;
    int sy = 4 + (int)(label / 4) * 8 + (int)(cifar_uniform(rng) * 5) - 2;
    double ca = cos(angle), sa = sin(angle);
    double bright = 0.4 * (cifar_uniform(rng) - 0.5), jitter[3];
    for (int c = 0; c < 3; c++)
        jitter[c] = 0.2 * (cifar_uniform(rng) - 0.5);
    rec[0] = label;
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < 32; y++)
            for (int x = 0; x < 32; x++) {
                double v = color[label][c] + bright + jitter[c] +
                           contrast * sin(freq * (ca * x + sa * y) + phase);
                if (x >= sx && x < sx + 6 && y >= sy && y < sy + 6)
                    v += c == (int)(label % 3) ? 0.35 : -0.1;
                v += 0.5 * (cifar_uniform(rng) - 0.5); /* pixel noise */
                int p = (int)lrint(255.0 * v);
                rec[1 + c * 1024 + y * 32 + x] = (uint8_t)(p < 0 ? 0 : p > 255 ? 255 : p);
            }
}

/* Writes n synthetic records to path; 1 on success. */
static inline int cifar_write_synthetic(const char *path, int64_t n, uint64_t seed)
{
    FILE *fp = fopen(path, "wb");
    if (!fp)
        return 0;
    uint8_t rec[CIFAR_RECORD];
    uint64_t rng = seed;
    int ok = 1;
    for (int64_t i = 0; i < n && ok; i++) {
        uint8_t label = (uint8_t)(cifar_mix(&rng) % CIFAR_CLASSES);
        cifar_synth_record(label, &rng, rec);
        ok = fwrite(rec, 1, CIFAR_RECORD, fp) == CIFAR_RECORD;
    }
    return fclose(fp) == 0 && ok;
}

/* Makes sure dir holds a CIFAR-10 binary set: when data_batch_1.bin is missing, writes a
 * synthetic one (n_train records over the five training files, n_test in test_batch.bin)
 * and the SYNTHETIC marker. *synthetic: 1 when the set is (or was earlier) generated.
 * Returns 1, or 0 with a message on stderr. */
static inline int cifar_open_dir(const char *dir, int64_t n_train, int64_t n_test, int *synthetic)
{
    char path[4096];
    *synthetic = 0;
    if (!cifar_join(path, sizeof path, dir, "data_batch_1.bin"))
        return 0;
    if (cifar_exists(path)) {
        *synthetic = cifar_join(path, sizeof path, dir, "SYNTHETIC") && cifar_exists(path);
        return 1;
    }
    if (n_train < 5 || n_test < 1 || !cifar_mkdirs(dir)) {
        fprintf(stderr, "cifar: cannot create %s for the synthetic set\n", dir);
        return 0;
    }
    fprintf(stderr,
            "cifar: %s has no CIFAR-10 data: writing a SYNTHETIC set there "
            "(%lld training, %lld test images, class-dependent patterns)\n",
            dir, (long long)n_train, (long long)n_test);
    for (int f = 1; f <= 5; f++) {
        char name[32];
        snprintf(name, sizeof name, "data_batch_%d.bin", f);
        int64_t n = n_train / 5 + (f <= n_train % 5);
        if (!cifar_join(path, sizeof path, dir, name) ||
            !cifar_write_synthetic(path, n, 0xc1fa5eedull + (uint64_t)f)) {
            fprintf(stderr, "cifar: writing %s failed\n", path);
            return 0;
        }
    }
    if (!cifar_join(path, sizeof path, dir, "test_batch.bin") ||
        !cifar_write_synthetic(path, n_test, 0x7e57ull)) {
        fprintf(stderr, "cifar: writing %s failed\n", path);
        return 0;
    }
    FILE *fp = cifar_join(path, sizeof path, dir, "SYNTHETIC") ? fopen(path, "w") : NULL;
    if (!fp ||
        fprintf(fp, "synthetic CIFAR-10 stand-in written by libtgc examples/data/"
                    "cifar.h; not the real data set\n") < 0 ||
        fclose(fp) != 0) {
        fprintf(stderr, "cifar: writing %s/SYNTHETIC failed\n", dir);
        return 0;
    }
    *synthetic = 1;
    return 1;
}

/* Appends the records of one file to s; 1 on success. */
static inline int cifar_read_file(const char *path, cifar_set *s)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "cifar: cannot open %s: %s\n", path, strerror(errno));
        return 0;
    }
    int ok = fseek(fp, 0, SEEK_END) == 0;
    long size = ok ? ftell(fp) : -1;
    ok = ok && size >= 0 && fseek(fp, 0, SEEK_SET) == 0;
    if (!ok || size % CIFAR_RECORD != 0 || size == 0) {
        fprintf(stderr, "cifar: %s: %ld bytes is not a whole number of %d-byte records\n", path,
                size, CIFAR_RECORD);
        fclose(fp);
        return 0;
    }
    int64_t n = size / CIFAR_RECORD, n0 = s->n;
    uint8_t *labels = realloc(s->labels, (size_t)(n0 + n));
    if (labels)
        s->labels = labels;
    uint8_t *pixels = labels ? realloc(s->pixels, (size_t)(n0 + n) * CIFAR_PIXELS) : NULL;
    if (pixels)
        s->pixels = pixels;
    uint8_t *rec = malloc(CIFAR_RECORD);
    ok = labels && pixels && rec;
    for (int64_t i = 0; ok && i < n; i++) {
        ok = fread(rec, 1, CIFAR_RECORD, fp) == CIFAR_RECORD && rec[0] < CIFAR_CLASSES;
        if (!ok) {
            fprintf(stderr, "cifar: %s: record %lld is short or has label %d\n", path, (long long)i,
                    rec[0]);
            break;
        }
        s->labels[n0 + i] = rec[0];
        memcpy(s->pixels + (size_t)(n0 + i) * CIFAR_PIXELS, rec + 1, CIFAR_PIXELS);
    }
    free(rec);
    fclose(fp);
    if (ok)
        s->n = n0 + n;
    return ok;
}

static inline void cifar_free(cifar_set *s)
{
    free(s->labels);
    free(s->pixels);
    memset(s, 0, sizeof *s);
}

/* The training set (the five data_batch files) or the test set; 1 on success. */
static inline int cifar_load(const char *dir, int train, cifar_set *s)
{
    memset(s, 0, sizeof *s);
    char path[4096], name[32];
    for (int f = 1; f <= (train ? 5 : 1); f++) {
        if (train)
            snprintf(name, sizeof name, "data_batch_%d.bin", f);
        else
            snprintf(name, sizeof name, "test_batch.bin");
        if (!cifar_join(path, sizeof path, dir, name) || !cifar_read_file(path, s)) {
            cifar_free(s);
            return 0;
        }
    }
    return 1;
}

/* The permutation of [0, n) for an epoch: Fisher-Yates from (seed, epoch). */
static inline void cifar_permutation(int64_t *perm, int64_t n, uint64_t seed, int64_t epoch)
{
    uint64_t rng = seed ^ (0xa0761d6478bd642full * (uint64_t)(epoch + 1));
    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(cifar_mix(&rng) % (uint64_t)(i + 1));
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

/* Normalized f32 images and i64 labels of records idx[0..count) into x (batch * 3072) and
 * y (batch), padding rows count..batch with zeros and CIFAR_IGNORE. */
static inline void cifar_fill(const cifar_set *s, const int64_t *idx, int count, int batch,
                              float *x, int64_t *y)
{
    float scale[3], shift[3];
    for (int c = 0; c < 3; c++) {
        scale[c] = 1.0f / (255.0f * cifar_std[c]);
        shift[c] = -cifar_mean[c] / cifar_std[c];
    }
    for (int i = 0; i < batch; i++) {
        float *xi = x + (size_t)i * CIFAR_PIXELS;
        if (i >= count) {
            memset(xi, 0, CIFAR_PIXELS * sizeof(float));
            y[i] = CIFAR_IGNORE;
            continue;
        }
        const uint8_t *p = s->pixels + (size_t)idx[i] * CIFAR_PIXELS;
        for (int c = 0; c < 3; c++)
            for (int k = 0; k < 1024; k++)
                xi[c * 1024 + k] = (float)p[c * 1024 + k] * scale[c] + shift[c];
        y[i] = s->labels[idx[i]];
    }
}

/* ---- the prefetch thread ---- */
#define CIFAR_SLOTS 3

typedef struct cifar_batch {
    tgc_tensor *x;  /* f32 [batch, 3, 32, 32] on the loader's device */
    tgc_tensor *y;  /* i64 [batch] */
    int valid;      /* real images (the rest is padding; eval only) */
    int64_t epoch;  /* epoch this batch belongs to */
    int64_t index;  /* batch index within the epoch */
    int last;       /* 1 for the epoch's last batch */
    double host_ms; /* time to normalize on the host */
    double copy_ms; /* tgc_from_data + tgc_to (+ synchronize) */
    int state_;     /* private: 0 free, 1 ready, 2 taken, 3 released */
} cifar_batch;

typedef struct cifar_loader {
    const cifar_set *set;
    int batch, shuffle, epochs; /* epochs <= 0: forever */
    uint64_t seed;
    tgc_device dev;
    int64_t batches_per_epoch;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    cifar_batch slots[CIFAR_SLOTS];
    int next_take; /* slot the consumer takes next */
    int stop, done, failed;
    char error[512];
} cifar_loader;

static inline double cifar_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

/* Frees the tensors of released slots (on the loader's thread). Called with the lock held. */
static inline void cifar_reclaim(cifar_loader *ld)
{
    for (int k = 0; k < CIFAR_SLOTS; k++)
        if (ld->slots[k].state_ == 3) {
            tgc_tensor_free(ld->slots[k].x);
            tgc_tensor_free(ld->slots[k].y);
            ld->slots[k].x = ld->slots[k].y = NULL;
            ld->slots[k].state_ = 0;
        }
}

static inline void *cifar_loader_main(void *arg)
{
    cifar_loader *ld = arg;
    int64_t n = ld->set->n, b = ld->batch;
    int64_t *perm = malloc((size_t)n * sizeof(int64_t));
    float *x = malloc((size_t)b * CIFAR_PIXELS * sizeof(float));
    int64_t *y = malloc((size_t)b * sizeof(int64_t));
    int slot = 0, ok = perm && x && y;
    if (!ok)
        snprintf(ld->error, sizeof ld->error, "out of host memory");
    for (int64_t epoch = 0; ok && (ld->epochs <= 0 || epoch < ld->epochs); epoch++) {
        if (ld->shuffle)
            cifar_permutation(perm, n, ld->seed, epoch);
        else
            for (int64_t i = 0; i < n; i++)
                perm[i] = i;
        for (int64_t bi = 0; ok && bi < ld->batches_per_epoch; bi++) {
            pthread_mutex_lock(&ld->lock);
            for (;;) {
                cifar_reclaim(ld);
                if (ld->stop || ld->slots[slot].state_ == 0)
                    break;
                pthread_cond_wait(&ld->cond, &ld->lock);
            }
            int stop = ld->stop;
            pthread_mutex_unlock(&ld->lock);
            if (stop)
                goto out;
            int64_t start = bi * b, count = n - start < b ? n - start : b;
            double t0 = cifar_now_ms();
            cifar_fill(ld->set, perm + start, (int)count, (int)b, x, y);
            double t1 = cifar_now_ms();
            int64_t xs[4] = {b, 3, 32, 32};
            tgc_tensor *hx = tgc_from_data(x, (size_t)b * CIFAR_PIXELS * sizeof(float), xs, 4,
                                           TGC_F32, tgc_cpu());
            tgc_tensor *hy =
                tgc_from_data(y, (size_t)b * sizeof(int64_t), &b, 1, TGC_I64, tgc_cpu());
            tgc_tensor *dx = hx, *dy = hy;
            if (ld->dev.type != TGC_DEVICE_CPU && hx && hy) {
                dx = tgc_to(hx, ld->dev);
                dy = tgc_to(hy, ld->dev);
                tgc_tensor_free(hx);
                tgc_tensor_free(hy);
#ifdef CIFAR_HAVE_CUDA_H
                if (dx && dy && tgc_cuda_synchronize(ld->dev.index) != TGC_OK)
                    dx = NULL;
#endif
            }
            double t2 = cifar_now_ms();
            if (!dx || !dy) {
                snprintf(ld->error, sizeof ld->error, "making a batch on the device: %s",
                         tgc_last_error());
                ok = 0;
                break;
            }
            pthread_mutex_lock(&ld->lock);
            cifar_batch *s = &ld->slots[slot];
            s->x = dx;
            s->y = dy;
            s->valid = (int)count;
            s->epoch = epoch;
            s->index = bi;
            s->last = bi + 1 == ld->batches_per_epoch;
            s->host_ms = t1 - t0;
            s->copy_ms = t2 - t1;
            s->state_ = 1;
            pthread_cond_broadcast(&ld->cond);
            pthread_mutex_unlock(&ld->lock);
            slot = (slot + 1) % CIFAR_SLOTS;
        }
    }
out:
    pthread_mutex_lock(&ld->lock);
    ld->done = 1;
    ld->failed = !ok;
    pthread_cond_broadcast(&ld->cond);
    /* wait for the consumer to release what it still holds, then free everything here */
    for (;;) {
        cifar_reclaim(ld);
        int busy = 0;
        for (int k = 0; k < CIFAR_SLOTS; k++)
            busy |= ld->slots[k].state_ == 2 || (ld->slots[k].state_ == 1 && !ld->stop);
        if (!busy || ld->stop)
            break;
        pthread_cond_wait(&ld->cond, &ld->lock);
    }
    for (int k = 0; k < CIFAR_SLOTS; k++)
        if (ld->slots[k].state_ == 1 || ld->slots[k].state_ == 3)
            ld->slots[k].state_ = 3;
    cifar_reclaim(ld);
    pthread_mutex_unlock(&ld->lock);
    free(perm);
    free(x);
    free(y);
    return NULL; /* the thread's root scope is freed at its exit */
}

/* Starts the thread. shuffle 1: training order (a permutation per epoch, partial batch
 * dropped); 0: in order, the last batch padded. epochs <= 0 runs until stopped. 1 on
 * success. */
static inline int cifar_loader_start(cifar_loader *ld, const cifar_set *set, int batch,
                                     uint64_t seed, tgc_device dev, int shuffle, int epochs)
{
    memset(ld, 0, sizeof *ld);
    ld->set = set;
    ld->batch = batch;
    ld->shuffle = shuffle;
    ld->epochs = epochs;
    ld->seed = seed;
    ld->dev = dev;
    ld->batches_per_epoch = shuffle ? set->n / batch : (set->n + batch - 1) / batch;
    if (batch < 1 || ld->batches_per_epoch < 1) {
        fprintf(stderr, "cifar: %lld images make no batch of %d\n", (long long)set->n, batch);
        return 0;
    }
    pthread_mutex_init(&ld->lock, NULL);
    pthread_cond_init(&ld->cond, NULL);
    if (pthread_create(&ld->thread, NULL, cifar_loader_main, ld) != 0) {
        fprintf(stderr, "cifar: pthread_create failed\n");
        return 0;
    }
    return 1;
}

/* The next batch, waiting for it; NULL at the end (every epoch delivered) or on a failure
 * (cifar_loader_error says which). */
static inline cifar_batch *cifar_loader_next(cifar_loader *ld)
{
    pthread_mutex_lock(&ld->lock);
    cifar_batch *s = &ld->slots[ld->next_take];
    while (s->state_ != 1 && !ld->done)
        pthread_cond_wait(&ld->cond, &ld->lock);
    if (s->state_ == 1) {
        s->state_ = 2;
        ld->next_take = (ld->next_take + 1) % CIFAR_SLOTS;
    } else {
        s = NULL;
    }
    pthread_mutex_unlock(&ld->lock);
    return s;
}

/* Hands a batch back; its tensors are freed on the loader's thread. */
static inline void cifar_loader_release(cifar_loader *ld, cifar_batch *b)
{
    if (!b)
        return;
    pthread_mutex_lock(&ld->lock);
    b->state_ = 3;
    pthread_cond_broadcast(&ld->cond);
    pthread_mutex_unlock(&ld->lock);
}

static inline const char *cifar_loader_error(const cifar_loader *ld)
{
    return ld->failed ? ld->error : NULL;
}

/* Stops the thread (batches not taken are dropped) and joins it. Release taken batches
 * first. */
static inline void cifar_loader_stop(cifar_loader *ld)
{
    pthread_mutex_lock(&ld->lock);
    ld->stop = 1;
    pthread_cond_broadcast(&ld->cond);
    pthread_mutex_unlock(&ld->lock);
    pthread_join(ld->thread, NULL);
    pthread_mutex_destroy(&ld->lock);
    pthread_cond_destroy(&ld->cond);
}

#endif
