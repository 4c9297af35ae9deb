/* The compile cache of the compiled backends: compiled code (a CUDA program's cubin, an LLVM
 * unit's object file) by a key that is the full text it was compiled from plus everything
 * else that changes the code (compiler version, target, options), held in memory for the
 * process and, when a directory is given (cfg.cache_dir, TGC_CACHE_DIR), on disk for later
 * processes. Each backend keeps one cache (cuda_program.c, llvm_jit.c) and builds its key; this
 * file does the rest for both:
 *
 *  - memory: an entry per key, made once however many threads ask at the same time. The first
 *    asker gets it to make (acquire answers make = 1: it loads it from disk or compiles it, then
 *    publishes it or reports the failure); the others wait for it (tgc_code_cache_wait). A
 *    failure is given to every waiter and forgotten, so a later ask tries again. Entries are
 *    told apart by the key's length and two independent 64-bit hashes of it (a key is the
 *    whole source text: keeping it would double the memory of every cached program); the key
 *    itself is compared on disk.
 *  - disk: one file per key, <dir>/tgc-<kind>-<tag>-<hash of the key>.<suffix>: a magic line,
 *    the key's and the code's lengths, a checksum (64-bit FNV-1a over key and code), then the
 *    key and the code. An entry is checked in full before its code is used (magic, lengths
 *    against the file's size, the key byte for byte, the checksum), so a file of another key, a
 *    truncated or corrupt one is a miss (counted as rejected) and the compile that follows
 *    writes it again. Files are written under a temporary name in the same directory and
 *    renamed over the entry: a reader sees the old entry or the new one, never part of one.
 *    A missing directory is created (with parents, mode 0700); one that cannot be is named
 *    once as a warning and nothing is stored. Best effort: a file that cannot be read or
 *    written costs a compile, never an error.
 *
 * Thread-safety: every function may be called from any thread; one mutex per cache guards its
 * entries (held only to find, add or finish one, never while compiling or doing I/O). */
#ifndef TGC_BACKEND_CODE_CACHE_H
#define TGC_BACKEND_CODE_CACHE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "tgc/tensor.h"

/* What a cache did since the process started (tests and diagnostics). */
typedef struct tgc_code_cache_stats {
    uint64_t compiled;      /* entries the backend compiled (published with from_disk 0) */
    uint64_t memory_hits;   /* asks answered by an entry in memory (ready or being made) */
    uint64_t disk_hits;     /* entries loaded from a disk file */
    uint64_t disk_rejected; /* disk files found but refused (another key, truncated, corrupt) */
    uint64_t disk_writes;   /* disk files written */
} tgc_code_cache_stats;

/* One entry. blob, size and ext are the entry's and read-only once it is ready. */
typedef struct tgc_code_entry {
    size_t key_len;
    uint64_t hash, hash2; /* tgc_code_hash of the key, and a second, independent hash */
    void *blob;           /* the code (malloc'd, the cache's) */
    size_t size;
    void *ext; /* the backend's data for the entry (ext_free frees it with the entry) */
    /* private to code_cache.c */
    int state; /* 0 being made, 1 ready, -1 failed */
    tgc_status status;
    char *msg;
    int users;
    struct tgc_code_entry *next;
} tgc_code_entry;

#define TGC_CODE_BUCKETS 512

typedef struct tgc_code_cache {
    const char *kind;        /* file name part: "cuda", "llvm" */
    const char *suffix;      /* file extension: "cubin", "o" */
    const char *consequence; /* the warning's end when the directory cannot be made */
    /* 1: an entry goes with its last user (tgc_code_cache_release); 0: entries stay for the
     * life of the process */
    int evict_unused;
    void (*ext_free)(void *ext); /* called under the cache's lock; NULL: nothing to free */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    tgc_code_entry *buckets[TGC_CODE_BUCKETS];
    tgc_code_cache_stats stats;
} tgc_code_cache;

#define TGC_CODE_CACHE_INIT(kind, suffix, consequence, evict, ext_free)                            \
    {                                                                                              \
        kind, suffix, consequence, evict, ext_free, PTHREAD_MUTEX_INITIALIZER,                     \
            PTHREAD_COND_INITIALIZER, {0},                                                         \
        {                                                                                          \
            0                                                                                      \
        }                                                                                          \
    }

/* 64-bit FNV-1a of n bytes, continuing from h (start with TGC_CODE_HASH_SEED). */
#define TGC_CODE_HASH_SEED 1469598103934665603ull
uint64_t tgc_code_hash(uint64_t h, const void *p, size_t n);

/* Finds the entry of key (NUL-terminated; not kept) or adds it. *e: the entry, used by the caller
 * until tgc_code_cache_release. *make = 1: the entry is new and the caller makes it (from disk
 * or a compile) and must end with tgc_code_cache_publish or tgc_code_cache_fail; *make = 0: it
 * exists (call tgc_code_cache_wait before reading it). TGC_ERR_OOM (error set). */
tgc_status tgc_code_cache_acquire(tgc_code_cache *c, const char *key, tgc_code_entry **e,
                                  int *make);
/* The maker: e is ready with code blob (malloc'd, taken) of size bytes and ext (may be NULL).
 * from_disk: 1 when it came from a disk file (counts a disk hit), 0 when compiled. */
void tgc_code_cache_publish(tgc_code_cache *c, tgc_code_entry *e, void *blob, size_t size,
                            void *ext, int from_disk);
/* The maker: making e failed with status st and the calling thread's error message; e leaves
 * the cache (a later acquire makes it again); its waiters get st and the message. The maker's
 * use of e ends here (no release). */
void tgc_code_cache_fail(tgc_code_cache *c, tgc_code_entry *e, tgc_status st);
/* Waits until e is made: TGC_OK when ready, else the maker's status with its message set on
 * this thread, and the caller's use of e has ended (no release). */
tgc_status tgc_code_cache_wait(tgc_code_cache *c, tgc_code_entry *e);
/* Ends the caller's use of a ready entry (an evicting cache frees it with its last user). */
void tgc_code_cache_release(tgc_code_cache *c, tgc_code_entry *e);
/* Runs fn(e, user) under the cache's lock (for ext data the backend changes after publish). */
void tgc_code_cache_locked(tgc_code_cache *c, tgc_code_entry *e,
                           void (*fn)(tgc_code_entry *e, void *user), void *user);
void tgc_code_cache_stats_get(tgc_code_cache *c, tgc_code_cache_stats *s);

/* The disk file of key in dir: "<dir>/tgc-<kind>-<tag>-<hash>.<suffix>" (tag: a short word
 * for people reading the directory, e.g. "sm90"; the key decides what matches). */
void tgc_code_disk_path(const tgc_code_cache *c, const char *dir, const char *tag, const char *key,
                        char *buf, size_t n);
/* 1 and a malloc'd copy of the code in *blob (*size bytes) when dir holds a valid entry of key;
 * 0 otherwise (no file, or one refused: counted in disk_rejected). dir NULL or "": 0. */
int tgc_code_disk_load(tgc_code_cache *c, const char *dir, const char *tag, const char *key,
                       void **blob, size_t *size);
/* Writes key's entry into dir atomically (temporary file, then rename); best effort. Creates
 * a missing dir (tgc_dir_ensure: "compile cache directory (cfg.cache_dir, TGC_CACHE_DIR)" and
 * c->consequence in its warning). dir NULL or "": nothing. */
void tgc_code_disk_store(tgc_code_cache *c, const char *dir, const char *tag, const char *key,
                         const void *blob, size_t size);

#endif
