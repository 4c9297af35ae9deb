/* The safetensors reader and writer (serialize/safetensors.h).
 *
 * The reader parses the header with a small JSON parser that knows the format's one shape
 * (an object of objects, the tensor entries' three keys, string-to-string metadata) and
 * bounds every read by the header's end, so no input makes it look past the bytes it was
 * given; a file is accepted only when every entry is consistent with the data section. */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "serialize/safetensors.h"
#include "support/checked.h"
#include "support/error.h"
#include "support/file.h"
#include "support/strbuf.h"
#include "tensor/tensor_impl.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c moves tensor bytes as they are: safetensors data is little-endian"
#endif

/* ---- the format's dtypes ---- */

typedef struct st_dtype {
    const char *name;
    int bits;
    int supported;
    tgc_dtype dtype;
} st_dtype;

/* Every dtype of the format; those libtgc has are mapped, the others are known so that a
 * file holding them is still checked (and can be read with strict off). */
static const st_dtype st_dtypes[] = {
    {"F32", 32, 1, TGC_F32},    {"F16", 16, 1, TGC_F16},    {"BF16", 16, 1, TGC_BF16},
    {"F64", 64, 1, TGC_F64},    {"I32", 32, 1, TGC_I32},    {"I64", 64, 1, TGC_I64},
    {"BOOL", 8, 1, TGC_BOOL},   {"U8", 8, 0, TGC_F32},      {"I8", 8, 0, TGC_F32},
    {"I16", 16, 0, TGC_F32},    {"U16", 16, 0, TGC_F32},    {"U32", 32, 0, TGC_F32},
    {"U64", 64, 0, TGC_F32},    {"C64", 64, 0, TGC_F32},    {"F8_E5M2", 8, 0, TGC_F32},
    {"F8_E4M3", 8, 0, TGC_F32}, {"F8_E8M0", 8, 0, TGC_F32}, {"F6_E2M3", 6, 0, TGC_F32},
    {"F6_E3M2", 6, 0, TGC_F32}, {"F4", 4, 0, TGC_F32},
};

static const st_dtype *dtype_by_name(const char *s)
{
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (strcmp(st_dtypes[i].name, s) == 0)
            return &st_dtypes[i];
    return NULL;
}

static const char *dtype_file_name(tgc_dtype dt)
{
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (st_dtypes[i].supported && st_dtypes[i].dtype == dt)
            return st_dtypes[i].name;
    return NULL;
}

/* ---- checksums: CRC-32 (zlib's, so `zlib.crc32` of a tensor's bytes checks a file) ---- */

static uint32_t crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
        crc_tab[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (int i = 0; i < 256; i++)
            crc_tab[t][i] = (crc_tab[t - 1][i] >> 8) ^ crc_tab[0][crc_tab[t - 1][i] & 0xff];
}

/* Slice-by-8: eight table lookups per 8 bytes (about 2 GB/s), so checking a checkpoint costs
 * little next to reading it. */
static uint32_t crc32_of(const void *p, size_t n)
{
    pthread_once(&crc_once, crc_init);
    const unsigned char *b = p;
    uint32_t c = 0xffffffffu;
    for (; n >= 8; n -= 8, b += 8) {
        uint32_t lo = c ^ ((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                           (uint32_t)b[3] << 24);
        c = crc_tab[7][lo & 0xff] ^ crc_tab[6][(lo >> 8) & 0xff] ^ crc_tab[5][(lo >> 16) & 0xff] ^
            crc_tab[4][lo >> 24] ^ crc_tab[3][b[4]] ^ crc_tab[2][b[5]] ^ crc_tab[1][b[6]] ^
            crc_tab[0][b[7]];
    }
    for (; n; n--, b++)
        c = crc_tab[0][(c ^ *b) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

/* ---- errors ---- */

typedef struct st_ctx {
    const char *fn, *path;
} st_ctx;

static tgc_status st_fail(const st_ctx *c, tgc_status s, const char *fmt, ...) TGC_PRINTF(3, 4);
static tgc_status st_fail(const st_ctx *c, tgc_status s, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return tgc_set_error(s, "%s: '%s': %s", c->fn, c->path, what);
}

/* A name from a file, as messages quote it: at most 80 bytes, control bytes as '?'. */
static const char *shown(const char *s, char *buf, size_t n)
{
    size_t k = 0;
    for (; s[k] && k + 4 < n && k < 80; k++)
        buf[k] = (unsigned char)s[k] < 0x20 ? '?' : s[k];
    if (s[k] && k + 4 < n) {
        memcpy(buf + k, "...", 3);
        k += 3;
    }
    buf[k] = 0;
    return buf;
}

/* ---- the JSON of the header ---- */

typedef struct jparser {
    const st_ctx *c;
    const unsigned char *p, *begin, *end;
} jparser;

static tgc_status jfail(jparser *j, const char *what)
{
    return st_fail(j->c, TGC_ERR_IO, "malformed header JSON at byte %zu of the header: %s",
                   (size_t)(j->p - j->begin), what);
}

static void jskip_ws(jparser *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

/* Skips white space, then consumes ch or fails. */
static tgc_status jexpect(jparser *j, char ch, const char *what)
{
    jskip_ws(j);
    if (j->p >= j->end || *j->p != (unsigned char)ch)
        return jfail(j, what);
    j->p++;
    return TGC_OK;
}

static int hex_val(unsigned char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

static int read_hex4(jparser *j, unsigned *out)
{
    if (j->end - j->p < 4)
        return 0;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hex_val(j->p[i]);
        if (h < 0)
            return 0;
        v = v * 16 + (unsigned)h;
    }
    j->p += 4;
    *out = v;
    return 1;
}

/* Length of the valid UTF-8 sequence at p (at most end - p bytes), 0 when invalid
 * (overlong forms, surrogates and code points above U+10FFFF are invalid). */
static int utf8_len(const unsigned char *p, const unsigned char *end)
{
    unsigned char b = p[0];
    int n;
    unsigned cp;
    if (b < 0x80)
        return 1;
    if (b >= 0xc2 && b <= 0xdf) {
        n = 2;
        cp = b & 0x1f;
    } else if (b >= 0xe0 && b <= 0xef) {
        n = 3;
        cp = b & 0x0f;
    } else if (b >= 0xf0 && b <= 0xf4) {
        n = 4;
        cp = b & 0x07;
    } else {
        return 0;
    }
    if (end - p < n)
        return 0;
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

static void put_utf8(tgc_strbuf *sb, unsigned cp)
{
    char u[5] = {0};
    if (cp < 0x80) {
        u[0] = (char)cp;
    } else if (cp < 0x800) {
        u[0] = (char)(0xc0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        u[0] = (char)(0xe0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[2] = (char)(0x80 | (cp & 0x3f));
    } else {
        u[0] = (char)(0xf0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[3] = (char)(0x80 | (cp & 0x3f));
    }
    tgc_sb_puts(sb, u);
}

/* A JSON string into *out (malloc'd, NUL-terminated). \u0000 is refused: names and
 * metadata are C strings. */
static tgc_status jstring(jparser *j, char **out)
{
    *out = NULL;
    jskip_ws(j);
    if (j->p >= j->end || *j->p != '"')
        return jfail(j, "expected a string");
    j->p++;
    tgc_strbuf sb = {0};
    tgc_sb_puts(&sb, "");
    for (;;) {
        if (j->p >= j->end) {
            tgc_sb_free(&sb);
            return jfail(j, "unterminated string");
        }
        unsigned char ch = *j->p;
        if (ch == '"') {
            j->p++;
            break;
        }
        if (ch < 0x20) {
            tgc_sb_free(&sb);
            return jfail(j, "control character in a string");
        }
        if (ch != '\\') {
            int n = utf8_len(j->p, j->end);
            if (!n) {
                tgc_sb_free(&sb);
                return jfail(j, "invalid UTF-8 in a string");
            }
            char u[5] = {0};
            memcpy(u, j->p, (size_t)n);
            tgc_sb_puts(&sb, u);
            j->p += n;
            continue;
        }
        j->p++;
        if (j->p >= j->end) {
            tgc_sb_free(&sb);
            return jfail(j, "unterminated escape");
        }
        ch = *j->p++;
        const char *simple = NULL;
        switch (ch) {
        case '"': simple = "\""; break;
        case '\\': simple = "\\"; break;
        case '/': simple = "/"; break;
        case 'b': simple = "\b"; break;
        case 'f': simple = "\f"; break;
        case 'n': simple = "\n"; break;
        case 'r': simple = "\r"; break;
        case 't': simple = "\t"; break;
        case 'u': break;
        default: tgc_sb_free(&sb); return jfail(j, "invalid escape in a string");
        }
        if (simple) {
            tgc_sb_puts(&sb, simple);
            continue;
        }
        unsigned cp;
        if (!read_hex4(j, &cp)) {
            tgc_sb_free(&sb);
            return jfail(j, "invalid \\u escape");
        }
        if (cp >= 0xdc00 && cp <= 0xdfff) {
            tgc_sb_free(&sb);
            return jfail(j, "lone low surrogate in a \\u escape");
        }
        if (cp >= 0xd800 && cp <= 0xdbff) {
            unsigned lo;
            if (j->end - j->p < 2 || j->p[0] != '\\' || j->p[1] != 'u') {
                tgc_sb_free(&sb);
                return jfail(j, "high surrogate without its low half");
            }
            j->p += 2;
            if (!read_hex4(j, &lo) || lo < 0xdc00 || lo > 0xdfff) {
                tgc_sb_free(&sb);
                return jfail(j, "high surrogate without its low half");
            }
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        }
        if (cp == 0) {
            tgc_sb_free(&sb);
            return jfail(j, "\\u0000 in a string (names and metadata are C strings)");
        }
        put_utf8(&sb, cp);
    }
    *out = tgc_sb_take(&sb);
    if (!*out)
        return st_fail(j->c, TGC_ERR_OOM, "out of memory reading the header");
    return TGC_OK;
}

/* A JSON number that must be a non-negative integer below 2^64. `what` names the field. */
static tgc_status juint(jparser *j, uint64_t *out, const char *what)
{
    jskip_ws(j);
    const unsigned char *s = j->p;
    int neg = 0;
    if (j->p < j->end && *j->p == '-') {
        neg = 1;
        j->p++;
    }
    const unsigned char *digits = j->p;
    uint64_t v = 0;
    int overflow = 0;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        unsigned d = (unsigned)(*j->p - '0');
        if (v > (UINT64_MAX - d) / 10)
            overflow = 1;
        else
            v = v * 10 + d;
        j->p++;
    }
    size_t nd = (size_t)(j->p - digits);
    if (nd == 0) {
        j->p = s;
        char m[96];
        snprintf(m, sizeof m, "expected a number in %s", what);
        return jfail(j, m);
    }
    if (nd > 1 && digits[0] == '0') {
        j->p = s;
        return jfail(j, "number with a leading zero");
    }
    int frac = j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E');
    char m[128];
    if (frac) {
        snprintf(m, sizeof m, "%s holds a number that is not an integer", what);
        return jfail(j, m);
    }
    if (neg) {
        snprintf(m, sizeof m, "%s holds a negative number", what);
        return jfail(j, m);
    }
    if (overflow) {
        snprintf(m, sizeof m, "%s holds a number of 2^64 or more", what);
        return jfail(j, m);
    }
    *out = v;
    return TGC_OK;
}

/* [u, u, ...] into vals (at most cap values; *n gets the count; more is an error `toomany`). */
static tgc_status juint_array(jparser *j, uint64_t *vals, int cap, int *n, const char *what,
                              const char *toomany)
{
    tgc_status st = jexpect(j, '[', what);
    if (st != TGC_OK)
        return st;
    *n = 0;
    jskip_ws(j);
    if (j->p < j->end && *j->p == ']') {
        j->p++;
        return TGC_OK;
    }
    for (;;) {
        uint64_t v = 0;
        if ((st = juint(j, &v, what)) != TGC_OK)
            return st;
        if (*n == cap)
            return jfail(j, toomany);
        vals[(*n)++] = v;
        jskip_ws(j);
        if (j->p < j->end && *j->p == ',') {
            j->p++;
            continue;
        }
        return jexpect(j, ']', "expected ',' or ']' in an array");
    }
}

/* Reads "{" ... "}" members one at a time: *more is 0 at the closing brace. */
static tgc_status jnext_member(jparser *j, int first, int *more)
{
    jskip_ws(j);
    if (j->p >= j->end)
        return jfail(j, "the header ends inside an object");
    if (*j->p == '}') {
        j->p++;
        *more = 0;
        return TGC_OK;
    }
    if (!first) {
        if (*j->p != ',')
            return jfail(j, "expected ',' or '}' in an object");
        j->p++;
    }
    *more = 1;
    return TGC_OK;
}

/* One tensor entry's object: exactly the keys dtype, shape and data_offsets. */
static tgc_status jentry(jparser *j, tgc_st_entry *e)
{
    char nb[96];
    const char *nm = shown(e->name, nb, sizeof nb);
    tgc_status st = jexpect(j, '{', "expected an object for a tensor");
    if (st != TGC_OK)
        return st;
    int have_dtype = 0, have_shape = 0, have_offsets = 0, more = 1;
    for (int first = 1;; first = 0) {
        if ((st = jnext_member(j, first, &more)) != TGC_OK || !more)
            break;
        char *key;
        if ((st = jstring(j, &key)) != TGC_OK)
            return st;
        if ((st = jexpect(j, ':', "expected ':' after a key")) != TGC_OK) {
            free(key);
            return st;
        }
        if (strcmp(key, "dtype") == 0 && !have_dtype) {
            have_dtype = 1;
            char *dt;
            if ((st = jstring(j, &dt)) != TGC_OK) {
                free(key);
                return st;
            }
            const st_dtype *d = dtype_by_name(dt);
            if (!d) {
                char db[96];
                st = st_fail(j->c, TGC_ERR_IO, "tensor '%s' has an unknown dtype '%s'", nm,
                             shown(dt, db, sizeof db));
                free(dt);
                free(key);
                return st;
            }
            free(dt);
            e->dtype_name = d->name;
            e->supported = d->supported;
            e->dtype = d->dtype;
        } else if (strcmp(key, "shape") == 0 && !have_shape) {
            have_shape = 1;
            uint64_t dims[TGC_MAX_DIMS] = {0};
            char what[160], toomany[160];
            snprintf(what, sizeof what, "the shape of tensor '%s'", nm);
            snprintf(toomany, sizeof toomany,
                     "tensor '%s' has more than %d dims (libtgc's TGC_MAX_DIMS)", nm, TGC_MAX_DIMS);
            if ((st = juint_array(j, dims, TGC_MAX_DIMS, &e->ndim, what, toomany)) != TGC_OK) {
                free(key);
                return st;
            }
            for (int i = 0; i < e->ndim; i++) {
                if (dims[i] > (uint64_t)TGC_MAX_NUMEL) {
                    free(key);
                    return st_fail(j->c, TGC_ERR_IO,
                                   "tensor '%s' has a dim of %llu, more than TGC_MAX_NUMEL (2^56)",
                                   nm, (unsigned long long)dims[i]);
                }
                e->shape[i] = (int64_t)dims[i];
            }
        } else if (strcmp(key, "data_offsets") == 0 && !have_offsets) {
            have_offsets = 1;
            uint64_t offs[2] = {0, 0};
            int n;
            char what[160], toomany[160];
            snprintf(what, sizeof what, "the data_offsets of tensor '%s'", nm);
            snprintf(toomany, sizeof toomany,
                     "the data_offsets of tensor '%s' are not [begin, end]", nm);
            if ((st = juint_array(j, offs, 2, &n, what, toomany)) != TGC_OK) {
                free(key);
                return st;
            }
            if (n != 2) {
                free(key);
                return st_fail(j->c, TGC_ERR_IO,
                               "the data_offsets of tensor '%s' are not [begin, end]", nm);
            }
            e->begin = offs[0];
            e->end = offs[1];
        } else {
            char kb[96];
            int known =
                !strcmp(key, "dtype") || !strcmp(key, "shape") || !strcmp(key, "data_offsets");
            st = st_fail(j->c, TGC_ERR_IO, "tensor '%s' has %s key '%s'", nm,
                         known ? "a second" : "an unknown", shown(key, kb, sizeof kb));
            free(key);
            return st;
        }
        free(key);
    }
    if (st != TGC_OK)
        return st;
    if (!have_dtype || !have_shape || !have_offsets)
        return st_fail(j->c, TGC_ERR_IO, "tensor '%s' has no %s", nm,
                       !have_dtype   ? "dtype"
                       : !have_shape ? "shape"
                                     : "data_offsets");
    return TGC_OK;
}

/* "__metadata__": {"k": "v", ...} */
static tgc_status jmetadata(jparser *j, tgc_st_file *f)
{
    tgc_status st = jexpect(j, '{', "__metadata__ is not an object");
    if (st != TGC_OK)
        return st;
    int more = 1, cap = 0;
    for (int first = 1;; first = 0) {
        if ((st = jnext_member(j, first, &more)) != TGC_OK || !more)
            return st;
        if (f->n_meta == cap) {
            cap = cap ? cap * 2 : 8;
            tgc_st_meta *p = realloc(f->meta, (size_t)cap * sizeof *p);
            if (!p)
                return st_fail(j->c, TGC_ERR_OOM, "out of memory reading the header");
            f->meta = p;
        }
        tgc_st_meta *m = &f->meta[f->n_meta];
        *m = (tgc_st_meta){0};
        if ((st = jstring(j, &m->key)) != TGC_OK)
            return st;
        f->n_meta++;
        if ((st = jexpect(j, ':', "expected ':' after a key")) != TGC_OK)
            return st;
        jskip_ws(j);
        if (j->p < j->end && *j->p != '"') {
            char kb[96];
            return st_fail(j->c, TGC_ERR_IO,
                           "metadata '%s' is not a string (safetensors metadata maps strings "
                           "to strings)",
                           shown(m->key, kb, sizeof kb));
        }
        if ((st = jstring(j, &m->value)) != TGC_OK)
            return st;
    }
}

static tgc_status parse_header(jparser *j, tgc_st_file *f)
{
    /* safetensors' own rule: the header starts with '{' */
    if (j->p >= j->end || *j->p != '{')
        return jfail(j, "the header does not start with '{'");
    j->p++;
    int more = 1, cap = 0, have_meta = 0;
    tgc_status st;
    for (int first = 1;; first = 0) {
        if ((st = jnext_member(j, first, &more)) != TGC_OK)
            return st;
        if (!more)
            break;
        char *name;
        if ((st = jstring(j, &name)) != TGC_OK)
            return st;
        if ((st = jexpect(j, ':', "expected ':' after a key")) != TGC_OK) {
            free(name);
            return st;
        }
        if (strcmp(name, "__metadata__") == 0) {
            free(name);
            if (have_meta)
                return st_fail(j->c, TGC_ERR_IO, "the header has two __metadata__ objects");
            have_meta = 1;
            if ((st = jmetadata(j, f)) != TGC_OK)
                return st;
            continue;
        }
        if (!*name) {
            free(name);
            return st_fail(j->c, TGC_ERR_IO, "a tensor has an empty name");
        }
        if (f->n_entries == cap) {
            cap = cap ? cap * 2 : 16;
            tgc_st_entry *p = realloc(f->entries, (size_t)cap * sizeof *p);
            if (!p) {
                free(name);
                return st_fail(j->c, TGC_ERR_OOM, "out of memory reading the header");
            }
            f->entries = p;
        }
        tgc_st_entry *e = &f->entries[f->n_entries++];
        *e = (tgc_st_entry){0};
        e->name = name;
        if ((st = jentry(j, e)) != TGC_OK)
            return st;
    }
    jskip_ws(j);
    if (j->p != j->end)
        return jfail(j, "bytes after the header's object");
    return TGC_OK;
}

/* ---- checks of the whole file ---- */

static int cmp_names(const void *a, const void *b)
{
    return strcmp((*(const tgc_st_entry *const *)a)->name, (*(const tgc_st_entry *const *)b)->name);
}

static int cmp_keys(const void *a, const void *b)
{
    return strcmp((*(const tgc_st_meta *const *)a)->key, (*(const tgc_st_meta *const *)b)->key);
}

static int cmp_offsets(const void *a, const void *b)
{
    const tgc_st_entry *x = *(const tgc_st_entry *const *)a, *y = *(const tgc_st_entry *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return 0;
}

/* Names and keys unique; each entry's size matches its dtype and shape; the entries tile the
 * data section exactly; BOOL bytes are 0 or 1. */
static tgc_status check_entries(const st_ctx *c, tgc_st_file *f)
{
    int n = f->n_entries;
    size_t np = (size_t)(n > f->n_meta ? n : f->n_meta) + 1;
    void **ptrs = malloc(np * sizeof *ptrs);
    if (!ptrs)
        return st_fail(c, TGC_ERR_OOM, "out of memory checking the header");
    tgc_status st = TGC_OK;
    char nb[96];
    for (int i = 0; i < f->n_meta; i++)
        ptrs[i] = &f->meta[i];
    qsort(ptrs, (size_t)f->n_meta, sizeof *ptrs, cmp_keys);
    for (int i = 1; i < f->n_meta && st == TGC_OK; i++)
        if (cmp_keys(&ptrs[i - 1], &ptrs[i]) == 0)
            st = st_fail(c, TGC_ERR_IO, "metadata key '%s' appears twice",
                         shown(((tgc_st_meta *)ptrs[i])->key, nb, sizeof nb));
    for (int i = 0; i < n; i++)
        ptrs[i] = &f->entries[i];
    qsort(ptrs, (size_t)n, sizeof *ptrs, cmp_names);
    for (int i = 1; i < n && st == TGC_OK; i++)
        if (cmp_names(&ptrs[i - 1], &ptrs[i]) == 0)
            st = st_fail(c, TGC_ERR_IO, "tensor '%s' appears twice",
                         shown(((tgc_st_entry *)ptrs[i])->name, nb, sizeof nb));
    if (st == TGC_OK && !(f->by_name = malloc((size_t)n * sizeof *f->by_name + 1)))
        st = st_fail(c, TGC_ERR_OOM, "out of memory checking the header");
    for (int i = 0; i < n && st == TGC_OK; i++)
        f->by_name[i] = (int)((tgc_st_entry *)ptrs[i] - f->entries);
    for (int i = 0; i < n && st == TGC_OK; i++) {
        tgc_st_entry *e = &f->entries[i];
        const char *nm = shown(e->name, nb, sizeof nb);
        int64_t extent, numel = 1;
        if (!tgc_extent_ok(e->shape, e->ndim, &extent) || extent > TGC_MAX_NUMEL) {
            st =
                st_fail(c, TGC_ERR_IO,
                        "tensor '%s' has more than TGC_MAX_NUMEL (2^56) elements in its shape", nm);
            break;
        }
        for (int d = 0; d < e->ndim; d++)
            numel *= e->shape[d];
        e->numel = numel;
        const st_dtype *d = dtype_by_name(e->dtype_name);
        uint64_t bits = (uint64_t)numel * (uint64_t)d->bits; /* < 2^62 */
        if (bits % 8) {
            st = st_fail(c, TGC_ERR_IO, "tensor '%s' of %s has %lld elements: not whole bytes", nm,
                         e->dtype_name, (long long)numel);
            break;
        }
        if (e->begin > e->end || e->end - e->begin != bits / 8) {
            st = st_fail(c, TGC_ERR_IO,
                         "tensor '%s' (%s, %lld elements) needs %llu bytes, but its data_offsets "
                         "[%llu, %llu] span %s",
                         nm, e->dtype_name, (long long)numel, (unsigned long long)(bits / 8),
                         (unsigned long long)e->begin, (unsigned long long)e->end,
                         e->begin > e->end ? "a negative size" : "another size");
            break;
        }
    }
    if (st == TGC_OK) {
        for (int i = 0; i < n; i++)
            ptrs[i] = &f->entries[i];
        qsort(ptrs, (size_t)n, sizeof *ptrs, cmp_offsets);
        uint64_t at = 0;
        for (int i = 0; i < n && st == TGC_OK; i++) {
            const tgc_st_entry *e = ptrs[i];
            if (e->begin != at)
                st = st_fail(c, TGC_ERR_IO,
                             "tensor '%s' starts at data byte %llu, but %s at %llu (tensors "
                             "must tile the data section with no gap or overlap)",
                             shown(e->name, nb, sizeof nb), (unsigned long long)e->begin,
                             i ? "the tensor before it ends" : "the data section starts",
                             (unsigned long long)at);
            else if (e->end > f->data_size)
                st = st_fail(c, TGC_ERR_IO,
                             "tensor '%s' ends at data byte %llu, past the end of the data "
                             "(%llu bytes): the file is truncated",
                             shown(e->name, nb, sizeof nb), (unsigned long long)e->end,
                             (unsigned long long)f->data_size);
            at = e->end;
        }
        if (st == TGC_OK && at != f->data_size)
            st = st_fail(c, TGC_ERR_IO,
                         "the data section has %llu bytes, but its tensors cover %llu (trailing "
                         "bytes)",
                         (unsigned long long)f->data_size, (unsigned long long)at);
    }
    for (int i = 0; i < n && st == TGC_OK; i++) {
        const tgc_st_entry *e = &f->entries[i];
        if (!e->supported || e->dtype != TGC_BOOL)
            continue;
        const unsigned char *b = f->data + e->begin;
        for (uint64_t k = 0; k < e->end - e->begin; k++)
            if (b[k] > 1) {
                st = st_fail(c, TGC_ERR_IO, "BOOL tensor '%s' has the byte %u (not 0 or 1)",
                             shown(e->name, nb, sizeof nb), b[k]);
                break;
            }
    }
    free(ptrs);
    return st;
}

/* Each "tgc.crc32:<name>" metadata value (8 hex digits) against the CRC-32 of that tensor's
 * bytes. A file without them (another writer's) is not checked; a key naming no tensor is
 * ignored (a tool that dropped a tensor and kept the metadata). */
static tgc_status check_checksums(const st_ctx *c, const tgc_st_file *f)
{
    const size_t np = strlen(TGC_ST_CRC_PREFIX);
    char nb[96];
    for (int i = 0; i < f->n_meta; i++) {
        const tgc_st_meta *m = &f->meta[i];
        if (strncmp(m->key, TGC_ST_CRC_PREFIX, np) != 0)
            continue;
        const tgc_st_entry *e = tgc_st_find(f, m->key + np);
        if (!e)
            continue;
        uint32_t want = 0;
        int ok = strlen(m->value) == 8;
        for (int k = 0; ok && k < 8; k++) {
            int h = hex_val((unsigned char)m->value[k]);
            ok = h >= 0;
            want = want << 4 | (uint32_t)(h < 0 ? 0 : h);
        }
        if (!ok)
            return st_fail(c, TGC_ERR_IO,
                           "the checksum of tensor '%s' in the metadata is not 8 hex digits",
                           shown(e->name, nb, sizeof nb));
        uint32_t got = crc32_of(tgc_st_data(f, e), (size_t)(e->end - e->begin));
        if (got != want)
            return st_fail(c, TGC_ERR_IO,
                           "tensor '%s' does not match its checksum (CRC-32 %08x, the file was "
                           "written with %08x): the file is damaged (a torn or zeroed write?)",
                           shown(e->name, nb, sizeof nb), (unsigned)got, (unsigned)want);
    }
    return TGC_OK;
}

/* f->bytes / f->size set: check the framing, parse and check the header. */
static tgc_status parse_image(const st_ctx *c, tgc_st_file *f)
{
    if (f->size < 8)
        return st_fail(c, TGC_ERR_IO,
                       "the file is %zu bytes long, too short for the 8-byte header length "
                       "(truncated, or not a safetensors file)",
                       f->size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | f->bytes[i];
    if (hlen > TGC_ST_MAX_HEADER)
        return st_fail(c, TGC_ERR_IO,
                       "header length %llu is over safetensors' limit of %llu bytes (not a "
                       "safetensors file?)",
                       (unsigned long long)hlen, (unsigned long long)TGC_ST_MAX_HEADER);
    if (hlen > f->size - 8)
        return st_fail(c, TGC_ERR_IO,
                       "header length %llu runs past the end of the file (%zu bytes): the file "
                       "is truncated",
                       (unsigned long long)hlen, f->size);
    f->data = f->bytes + 8 + hlen;
    f->data_size = f->size - 8 - hlen;
    jparser j = {c, f->bytes + 8, f->bytes + 8, f->bytes + 8 + hlen};
    tgc_status st = parse_header(&j, f);
    if (st == TGC_OK)
        st = check_entries(c, f);
    if (st == TGC_OK)
        st = check_checksums(c, f);
    return st;
}

static tgc_status init_file(const st_ctx *c, tgc_st_file *f)
{
    *f = (tgc_st_file){0};
    size_t n = strlen(c->path) + 1;
    f->path = malloc(n);
    if (!f->path)
        return st_fail(c, TGC_ERR_OOM, "out of memory");
    memcpy(f->path, c->path, n);
    return TGC_OK;
}

tgc_status tgc_st_parse(const char *fn, const char *path, const void *bytes, size_t size,
                        tgc_st_file *f)
{
    if (!f)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: no file to fill", fn);
    *f = (tgc_st_file){0};
    if (!path || (!bytes && size))
        return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: %s is NULL", fn, path ? "bytes" : "path");
    st_ctx c = {fn, path};
    tgc_status st = init_file(&c, f);
    if (st != TGC_OK)
        return st;
    f->bytes = malloc(size ? size : 1);
    if (!f->bytes) {
        tgc_st_close(f);
        return st_fail(&c, TGC_ERR_OOM, "out of memory for %zu bytes", size);
    }
    if (size)
        memcpy(f->bytes, bytes, size);
    f->size = size;
    if ((st = parse_image(&c, f)) != TGC_OK)
        tgc_st_close(f);
    return st;
}

tgc_status tgc_st_read(const char *fn, const char *path, tgc_st_file *f)
{
    if (!f)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: no file to fill", fn);
    *f = (tgc_st_file){0};
    if (!path)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: path is NULL", fn);
    st_ctx c = {fn, path};
    const char *why = NULL;
    size_t size = 0;
    int fd = tgc_file_open_read(path, &size, &why); /* a named pipe is refused, not waited on */
    if (fd < 0)
        return st_fail(&c, TGC_ERR_IO, "%s%s",
                       errno == EISDIR || errno == EINVAL ? "" : "cannot open it: ", why);
    tgc_status st = init_file(&c, f);
    if (st == TGC_OK && !(f->bytes = malloc(size ? size : 1)))
        st = st_fail(&c, TGC_ERR_OOM, "out of memory for its %zu bytes", size);
    size_t got = 0;
    if (st == TGC_OK && !tgc_file_read_all(fd, f->bytes, size, &got))
        st = st_fail(&c, TGC_ERR_IO, "read failed after %zu of %zu bytes: %s", got, size,
                     errno ? strerror(errno) : "the file shrank while being read");
    close(fd);
    f->size = got;
    if (st == TGC_OK)
        st = parse_image(&c, f);
    if (st != TGC_OK)
        tgc_st_close(f);
    return st;
}

void tgc_st_close(tgc_st_file *f)
{
    if (!f)
        return;
    for (int i = 0; i < f->n_entries; i++)
        free(f->entries[i].name);
    for (int i = 0; i < f->n_meta; i++) {
        free(f->meta[i].key);
        free(f->meta[i].value);
    }
    free(f->entries);
    free(f->by_name);
    free(f->meta);
    free(f->bytes);
    free(f->path);
    *f = (tgc_st_file){0};
}

const tgc_st_entry *tgc_st_find(const tgc_st_file *f, const char *name)
{
    if (!f || !name || !f->by_name)
        return NULL;
    int lo = 0, hi = f->n_entries - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const tgc_st_entry *e = &f->entries[f->by_name[mid]];
        int c = strcmp(e->name, name);
        if (c == 0)
            return e;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

const char *tgc_st_meta_get(const tgc_st_file *f, const char *key)
{
    for (int i = 0; f && key && i < f->n_meta; i++)
        if (strcmp(f->meta[i].key, key) == 0)
            return f->meta[i].value;
    return NULL;
}

/* ---- writing ---- */

/* s with JSON escapes, without the quotes */
static void put_json_chars(tgc_strbuf *sb, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            tgc_sb_printf(sb, "\\%c", *p);
        else if (*p < 0x20)
            tgc_sb_printf(sb, "\\u%04x", *p);
        else
            tgc_sb_printf(sb, "%c", *p);
    }
}

static void put_json_string(tgc_strbuf *sb, const char *s)
{
    tgc_sb_puts(sb, "\"");
    put_json_chars(sb, s);
    tgc_sb_puts(sb, "\"");
}

/* The header JSON, padded with spaces so that the data starts 8-byte aligned; *hlen gets
 * its length. NULL with the error set. */
static char *build_header(const st_ctx *c, const tgc_st_out *ts, int n, const tgc_st_meta *meta,
                          int n_meta, const uint32_t *crcs, size_t *hlen)
{
    tgc_strbuf sb = {0};
    tgc_sb_puts(&sb, "{");
    if (n_meta + n > 0) {
        tgc_sb_puts(&sb, "\"__metadata__\":{");
        for (int i = 0; i < n_meta; i++) {
            if (i)
                tgc_sb_puts(&sb, ",");
            put_json_string(&sb, meta[i].key);
            tgc_sb_puts(&sb, ":");
            put_json_string(&sb, meta[i].value);
        }
        /* fixed width: the header is written before the data and rewritten in place after */
        for (int i = 0; i < n; i++) {
            tgc_sb_puts(&sb, n_meta > 0 || i ? ",\"" TGC_ST_CRC_PREFIX : "\"" TGC_ST_CRC_PREFIX);
            put_json_chars(&sb, ts[i].name);
            tgc_sb_printf(&sb, "\":\"%08x\"", (unsigned)crcs[i]);
        }
        tgc_sb_puts(&sb, "}");
    }
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        const char *dn = dtype_file_name(ts[i].dtype);
        int64_t numel = tgc_shape_numel(ts[i].shape, ts[i].ndim);
        uint64_t nbytes = (uint64_t)numel * tgc_dtype_size(ts[i].dtype);
        if (!dn) {
            tgc_sb_free(&sb);
            st_fail(c, TGC_ERR_DTYPE, "tensor '%s' has no safetensors dtype", ts[i].name);
            return NULL;
        }
        tgc_sb_puts(&sb, n_meta + n > 0 || i ? "," : ""); /* after __metadata__ */
        put_json_string(&sb, ts[i].name);
        tgc_sb_printf(&sb, ":{\"dtype\":\"%s\",\"shape\":[", dn);
        for (int d = 0; d < ts[i].ndim; d++)
            tgc_sb_printf(&sb, "%s%lld", d ? "," : "", (long long)ts[i].shape[d]);
        tgc_sb_printf(&sb, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)at,
                      (unsigned long long)(at + nbytes));
        at += nbytes;
    }
    tgc_sb_puts(&sb, "}");
    while (!sb.failed && (8 + sb.len) % 8)
        tgc_sb_puts(&sb, " ");
    size_t len = sb.len;
    char *h = tgc_sb_take(&sb);
    if (!h) {
        st_fail(c, TGC_ERR_OOM, "out of memory building the header");
        return NULL;
    }
    *hlen = len;
    return h;
}

static tgc_status write_all(const st_ctx *c, int fd, const char *tmp, const void *p, size_t n)
{
    if (!tgc_file_write_all(fd, p, n))
        return st_fail(c, TGC_ERR_IO, "writing the temporary file '%s' failed: %s", tmp,
                       errno ? strerror(errno) : "no progress");
    return TGC_OK;
}

/* Makes each temporary name unique within the process; O_EXCL makes it unique across. */
static atomic_uint tmp_counter;

/* How long a temporary file of a dead process must have been left untouched before a save
 * removes it: a process on another machine sharing the directory has a PID this host cannot
 * see, and a writer that is alive keeps its file's time fresh. */
#define STALE_TMP_SECONDS 60

/* The directory of path ("." for a bare name) into buf; 0 when it does not fit. */
static int dir_of(const char *path, char *buf, size_t n)
{
    const char *slash = strrchr(path, '/');
    size_t k = !slash ? 1 : slash == path ? 1 : (size_t)(slash - path);
    if (k + 1 > n)
        return 0;
    memcpy(buf, !slash ? "." : path, k);
    buf[k] = 0;
    return 1;
}

/* 1 when name is "<base>.tmp.<pid>.<n>" (what tgc_st_write creates for base), with *pid. */
static int tmp_name_pid(const char *name, const char *base, long *pid)
{
    size_t bl = strlen(base);
    if (strncmp(name, base, bl) != 0 || strncmp(name + bl, ".tmp.", 5) != 0)
        return 0;
    const char *p = name + bl + 5, *q = p;
    long v = 0;
    for (; *q >= '0' && *q <= '9' && q - p < 10; q++)
        v = v * 10 + (*q - '0');
    if (q == p || *q != '.' || !q[1])
        return 0;
    for (const char *r = q + 1; *r; r++)
        if (*r < '0' || *r > '9')
            return 0;
    *pid = v;
    return 1;
}

/* Removes the temporary files of earlier saves to path that a killed process left: those
 * whose process no longer exists on this host and that nobody wrote for STALE_TMP_SECONDS.
 * Best effort: what cannot be read or removed is left as it is. */
static void remove_stale_tmps(const char *path)
{
    char dir[4096];
    if (!dir_of(path, dir, sizeof dir))
        return;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!*base)
        return;
    DIR *d = opendir(dir);
    if (!d)
        return;
    int dfd = dirfd(d);
    time_t now = time(NULL);
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        long pid;
        struct stat sb;
        if (!tmp_name_pid(de->d_name, base, &pid) || pid <= 0 || pid == (long)getpid())
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* alive, or not ours to ask about (EPERM): not stale */
        if (fstatat(dfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode) ||
            now - sb.st_mtime < STALE_TMP_SECONDS)
            continue;
        unlinkat(dfd, de->d_name, 0);
    }
    closedir(d);
}

/* fsync of path's directory, so that the rename itself survives a crash. File systems that
 * cannot sync a directory (EINVAL) have nothing to sync. */
static tgc_status sync_dir(const st_ctx *c, const char *path)
{
    char dir[4096];
    if (!dir_of(path, dir, sizeof dir))
        return st_fail(c, TGC_ERR_IO,
                       "the file is in place, but its directory name is too long "
                       "to sync the directory");
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return st_fail(c, TGC_ERR_IO,
                       "the file is in place, but its directory '%s' cannot be opened to sync "
                       "it: %s",
                       dir, strerror(errno));
    int r = fsync(dfd), err = errno;
    close(dfd);
    if (r != 0 && err != EINVAL)
        return st_fail(c, TGC_ERR_IO,
                       "the file is in place, but syncing its directory '%s' failed (the rename "
                       "may not survive a crash): %s",
                       dir, strerror(err));
    return TGC_OK;
}

/* Writes the data of every tensor after the header, with the CRC-32 of each into crcs. */
static tgc_status write_data(const st_ctx *c, int fd, const char *tmp, const tgc_st_out *ts, int n,
                             tgc_st_fill_fn fill, void *ctx, uint32_t *crcs)
{
    size_t maxb = 0;
    for (int i = 0; i < n; i++) {
        size_t b = (size_t)tgc_shape_numel(ts[i].shape, ts[i].ndim) * tgc_dtype_size(ts[i].dtype);
        maxb = b > maxb ? b : maxb;
    }
    void *buf = malloc(maxb ? maxb : 1);
    if (!buf)
        return st_fail(c, TGC_ERR_OOM, "out of memory for a tensor of %zu bytes", maxb);
    tgc_status st = TGC_OK;
    for (int i = 0; i < n && st == TGC_OK; i++) {
        size_t b = (size_t)tgc_shape_numel(ts[i].shape, ts[i].ndim) * tgc_dtype_size(ts[i].dtype);
        crcs[i] = 0; /* the CRC-32 of no bytes */
        if (b && (st = fill(ctx, i, buf, b)) == TGC_OK) {
            crcs[i] = crc32_of(buf, b);
            st = write_all(c, fd, tmp, buf, b);
        }
    }
    free(buf);
    return st;
}

/* The header again, with the checksums now known (the same length: they are fixed width),
 * over the placeholder written first. */
static tgc_status rewrite_header(const st_ctx *c, int fd, const char *tmp, const tgc_st_out *ts,
                                 int n, const tgc_st_meta *meta, int n_meta, const uint32_t *crcs,
                                 size_t hlen)
{
    size_t len;
    char *header = build_header(c, ts, n, meta, n_meta, crcs, &len);
    if (!header)
        return tgc_last_status();
    tgc_status st = TGC_OK;
    if (len != hlen)
        st = st_fail(c, TGC_ERR_INTERNAL, "the header changed length (%zu, then %zu bytes)", hlen,
                     len);
    for (size_t at = 0; st == TGC_OK && at < len;) {
        ssize_t w = pwrite(fd, header + at, len - at, (off_t)(8 + at));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            st = st_fail(c, TGC_ERR_IO, "writing the temporary file '%s' failed: %s", tmp,
                         w < 0 ? strerror(errno) : "no progress");
        else
            at += (size_t)w;
    }
    free(header);
    return st;
}

tgc_status tgc_st_write(const char *fn, const char *path, const tgc_st_out *ts, int n,
                        const tgc_st_meta *meta, int n_meta, tgc_st_fill_fn fill, void *ctx)
{
    if (!path || !*path || (n > 0 && (!ts || !fill)) || n < 0 || n_meta < 0 ||
        (n_meta > 0 && !meta))
        return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: %s", fn,
                             !path || !*path ? "path is NULL or empty" : "bad tensor list");
    st_ctx c = {fn, path};
    uint32_t *crcs = calloc((size_t)n + 1, sizeof *crcs);
    if (!crcs)
        return st_fail(&c, TGC_ERR_OOM, "out of memory");
    size_t hlen;
    char *header = build_header(&c, ts, n, meta, n_meta, crcs, &hlen);
    size_t tlen = strlen(path) + 64;
    char *tmp = header ? malloc(tlen) : NULL;
    if (!tmp) {
        free(header);
        free(crcs);
        return header ? st_fail(&c, TGC_ERR_OOM, "out of memory") : tgc_last_status();
    }
    remove_stale_tmps(path);
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(tmp, tlen, "%s.tmp.%ld.%u", path, (long)getpid(),
                 atomic_fetch_add(&tmp_counter, 1));
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        tgc_status st = st_fail(&c, TGC_ERR_IO, "cannot create the temporary file '%s': %s", tmp,
                                strerror(errno));
        free(tmp);
        free(header);
        free(crcs);
        return st;
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    tgc_status st = write_all(&c, fd, tmp, len8, 8);
    if (st == TGC_OK)
        st = write_all(&c, fd, tmp, header, hlen);
    free(header);
    if (st == TGC_OK)
        st = write_data(&c, fd, tmp, ts, n, fill, ctx, crcs);
    if (st == TGC_OK && n > 0)
        st = rewrite_header(&c, fd, tmp, ts, n, meta, n_meta, crcs, hlen);
    free(crcs);
    /* the data reaches the disk before the name does: a crash after the rename finds the
     * whole new file, a crash before it the whole old one */
    if (st == TGC_OK && fsync(fd) != 0)
        st = st_fail(&c, TGC_ERR_IO, "flushing the temporary file '%s' failed: %s", tmp,
                     strerror(errno));
    if (close(fd) != 0 && st == TGC_OK)
        st = st_fail(&c, TGC_ERR_IO, "closing the temporary file '%s' failed: %s", tmp,
                     strerror(errno));
    if (st == TGC_OK && rename(tmp, path) != 0)
        st = st_fail(&c, TGC_ERR_IO, "renaming the temporary file '%s' onto it failed: %s", tmp,
                     strerror(errno));
    if (st != TGC_OK)
        unlink(tmp);
    else
        st = sync_dir(&c, path);
    free(tmp);
    return st;
}
