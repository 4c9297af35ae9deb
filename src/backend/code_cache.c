/* The compile cache of the compiled backends (see code_cache.h): entries made once in memory,
 * and their checked, atomically written disk files. */
#include "backend/code_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/dirs.h"
#include "support/error.h"
#include "support/file.h"

uint64_t tgc_code_hash(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* A second 64-bit hash, of another family than FNV-1a (8-byte words through a multiply-xorshift
 * mix), so that two keys the first confuses are told apart by this one. */
static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t hash2(const char *p, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = mix64(h ^ w) + 0x9e3779b97f4a7c15ull;
    }
    uint64_t w = 0;
    memcpy(&w, p + i, n - i);
    return mix64(h ^ w ^ ((uint64_t)(n - i) << 56));
}

/* ---- memory ---- */

static void entry_free(tgc_code_cache *c, tgc_code_entry *e)
{
    if (e->ext && c->ext_free)
        c->ext_free(e->ext);
    free(e->blob);
    free(e->msg);
    free(e);
}

static void unlink_entry(tgc_code_cache *c, tgc_code_entry *e)
{
    for (tgc_code_entry **p = &c->buckets[e->hash % TGC_CODE_BUCKETS]; *p; p = &(*p)->next)
        if (*p == e) {
            *p = e->next;
            e->next = NULL;
            return;
        }
}

tgc_status tgc_code_cache_acquire(tgc_code_cache *c, const char *key, tgc_code_entry **out,
                                  int *make)
{
    *out = NULL;
    *make = 0;
    size_t len = strlen(key);
    uint64_t h = tgc_code_hash(TGC_CODE_HASH_SEED, key, len), h2 = hash2(key, len);
    pthread_mutex_lock(&c->lock);
    for (tgc_code_entry *e = c->buckets[h % TGC_CODE_BUCKETS]; e; e = e->next)
        if (e->hash == h && e->hash2 == h2 && e->key_len == len) {
            e->users++;
            c->stats.memory_hits++;
            pthread_mutex_unlock(&c->lock);
            *out = e;
            return TGC_OK;
        }
    tgc_code_entry *e = calloc(1, sizeof *e);
    if (!e) {
        pthread_mutex_unlock(&c->lock);
        return tgc_set_error(TGC_ERR_OOM, "tgc: out of memory for a compile cache entry");
    }
    e->key_len = len;
    e->hash = h;
    e->hash2 = h2;
    e->users = 1;
    e->next = c->buckets[h % TGC_CODE_BUCKETS];
    c->buckets[h % TGC_CODE_BUCKETS] = e;
    pthread_mutex_unlock(&c->lock);
    *out = e;
    *make = 1;
    return TGC_OK;
}

void tgc_code_cache_publish(tgc_code_cache *c, tgc_code_entry *e, void *blob, size_t size,
                            void *ext, int from_disk)
{
    pthread_mutex_lock(&c->lock);
    e->blob = blob;
    e->size = size;
    e->ext = ext;
    e->state = 1;
    if (from_disk)
        c->stats.disk_hits++;
    else
        c->stats.compiled++;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

void tgc_code_cache_fail(tgc_code_cache *c, tgc_code_entry *e, tgc_status st)
{
    const char *m = tgc_last_error();
    char *msg = strdup(m && *m ? m : "tgc: compiling failed");
    pthread_mutex_lock(&c->lock);
    unlink_entry(c, e);
    e->state = -1;
    e->status = st == TGC_OK ? TGC_ERR_INTERNAL : st;
    e->msg = msg;
    pthread_cond_broadcast(&c->cond);
    int last = --e->users == 0;
    pthread_mutex_unlock(&c->lock);
    if (last)
        entry_free(c, e);
}

tgc_status tgc_code_cache_wait(tgc_code_cache *c, tgc_code_entry *e)
{
    pthread_mutex_lock(&c->lock);
    while (e->state == 0)
        pthread_cond_wait(&c->cond, &c->lock);
    if (e->state > 0) {
        pthread_mutex_unlock(&c->lock);
        return TGC_OK;
    }
    tgc_status st = e->status;
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", e->msg ? e->msg : "tgc: compiling failed");
    int last = --e->users == 0;
    pthread_mutex_unlock(&c->lock);
    if (last)
        entry_free(c, e);
    return tgc_set_error(st, "%s", msg);
}

void tgc_code_cache_release(tgc_code_cache *c, tgc_code_entry *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&c->lock);
    int drop = --e->users == 0 && c->evict_unused;
    if (drop) {
        unlink_entry(c, e);
        if (e->ext && c->ext_free)
            c->ext_free(e->ext);
        e->ext = NULL;
    }
    pthread_mutex_unlock(&c->lock);
    if (drop)
        entry_free(c, e);
}

void tgc_code_cache_locked(tgc_code_cache *c, tgc_code_entry *e,
                           void (*fn)(tgc_code_entry *e, void *user), void *user)
{
    pthread_mutex_lock(&c->lock);
    fn(e, user);
    pthread_mutex_unlock(&c->lock);
}

void tgc_code_cache_stats_get(tgc_code_cache *c, tgc_code_cache_stats *s)
{
    pthread_mutex_lock(&c->lock);
    *s = c->stats;
    pthread_mutex_unlock(&c->lock);
}

/* ---- disk ---- */

#define DISK_MAGIC     "tgc-code-cache 1\n"
#define DISK_MAGIC_LEN (sizeof DISK_MAGIC - 1)
/* magic, then three u64: key length, code length, checksum */
#define DISK_HEAD (DISK_MAGIC_LEN + 3 * sizeof(uint64_t))

void tgc_code_disk_path(const tgc_code_cache *c, const char *dir, const char *tag, const char *key,
                        char *buf, size_t n)
{
    uint64_t h = tgc_code_hash(TGC_CODE_HASH_SEED, key, strlen(key));
    snprintf(buf, n, "%s/tgc-%s-%s-%016llx.%s", dir, c->kind, tag, (unsigned long long)h,
             c->suffix);
}

static void count(tgc_code_cache *c, uint64_t *field)
{
    pthread_mutex_lock(&c->lock);
    (*field)++;
    pthread_mutex_unlock(&c->lock);
}

int tgc_code_disk_load(tgc_code_cache *c, const char *dir, const char *tag, const char *key,
                       void **blob, size_t *size)
{
    *blob = NULL;
    *size = 0;
    if (!dir || !*dir)
        return 0;
    char path[4096];
    tgc_code_disk_path(c, dir, tag, key, path, sizeof path);
    size_t fsize = 0;
    int fd = tgc_file_open_read(path, &fsize, NULL); /* a pipe or a device there is a miss */
    if (fd < 0)
        return 0;
    const size_t klen = strlen(key);
    unsigned char head[DISK_HEAD];
    uint64_t kl = 0, cl = 0, sum = 0;
    int ok = fsize >= DISK_HEAD && tgc_file_read_all(fd, head, DISK_HEAD, NULL) &&
             memcmp(head, DISK_MAGIC, DISK_MAGIC_LEN) == 0;
    if (ok) {
        memcpy(&kl, head + DISK_MAGIC_LEN, sizeof kl);
        memcpy(&cl, head + DISK_MAGIC_LEN + 8, sizeof cl);
        memcpy(&sum, head + DISK_MAGIC_LEN + 16, sizeof sum);
        /* the file holds exactly what its header says: nothing missing, nothing after */
        ok = kl == klen && cl > 0 && cl <= fsize && fsize - DISK_HEAD - kl == cl;
    }
    char *k = ok ? malloc(klen ? klen : 1) : NULL;
    void *b = ok && k ? malloc((size_t)cl) : NULL;
    ok = ok && b && tgc_file_read_all(fd, k, klen, NULL) && memcmp(k, key, klen) == 0 &&
         tgc_file_read_all(fd, b, (size_t)cl, NULL);
    close(fd);
    if (ok) {
        uint64_t h = tgc_code_hash(TGC_CODE_HASH_SEED, k, klen);
        ok = tgc_code_hash(h, b, (size_t)cl) == sum;
    }
    free(k);
    if (!ok) {
        free(b);
        count(c, &c->stats.disk_rejected);
        return 0;
    }
    *blob = b;
    *size = (size_t)cl;
    return 1;
}

static atomic_uint g_tmp_seq;

void tgc_code_disk_store(tgc_code_cache *c, const char *dir, const char *tag, const char *key,
                         const void *blob, size_t size)
{
    if (!dir || !*dir || !blob || !size)
        return;
    if (!tgc_dir_ensure(NULL, dir, "the compile cache directory (cfg.cache_dir, TGC_CACHE_DIR)",
                        c->consequence))
        return;
    char path[4096], tmp[4200];
    tgc_code_disk_path(c, dir, tag, key, path, sizeof path);
    /* unique per process and write, in the entry's directory (rename stays on one file
     * system); O_EXCL never reuses a leftover */
    snprintf(tmp, sizeof tmp, "%s.%ld.%u.tmp", path, (long)getpid(),
             atomic_fetch_add(&g_tmp_seq, 1));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    const size_t klen = strlen(key);
    uint64_t kl = klen, cl = size;
    uint64_t sum = tgc_code_hash(tgc_code_hash(TGC_CODE_HASH_SEED, key, klen), blob, size);
    unsigned char head[DISK_HEAD];
    memcpy(head, DISK_MAGIC, DISK_MAGIC_LEN);
    memcpy(head + DISK_MAGIC_LEN, &kl, sizeof kl);
    memcpy(head + DISK_MAGIC_LEN + 8, &cl, sizeof cl);
    memcpy(head + DISK_MAGIC_LEN + 16, &sum, sizeof sum);
    int ok = tgc_file_write_all(fd, head, sizeof head) && tgc_file_write_all(fd, key, klen) &&
             tgc_file_write_all(fd, blob, size);
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return;
    }
    count(c, &c->stats.disk_writes);
}
