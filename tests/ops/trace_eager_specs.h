/* The input specs of the trace-vs-eager cases (grammar at the top of trace_eager_cases.h):
 * parsing a case's variants into inputs (kind, layout, shape with D for the dynamic size,
 * role), and the tests' random number generator. Shared by the CPU suite
 * (tests/ops/test_trace_eager.c) and the GPU one (tests/unit/test_cuda_public.c), which make
 * tensors from the parsed inputs in their own ways. Header only, file-static functions. */
#ifndef TGC_TESTS_TRACE_EAGER_SPECS_H
#define TGC_TESTS_TRACE_EAGER_SPECS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TE_MAX_INPUTS 12

typedef struct te_input {
    int role;  /* 0 argument, 1 module parameter, 2 module buffer */
    char kind; /* n u p h g d b q m v i j */
    int64_t range;
    int range_is_d;
    char layout; /* 0, 'T', 'S', 'E' */
    int ndim;
    int64_t shape[TGC_MAX_DIMS];
    int is_d[TGC_MAX_DIMS];
} te_input;

typedef struct te_variant {
    int n;
    te_input in[TE_MAX_INPUTS];
    int has_d, d_only_in_args;
    char text[256];
} te_variant;

static int te_parse_int(const char **p, int64_t *v, int *is_d)
{
    *is_d = 0;
    if (**p == 'D') {
        (*p)++;
        *is_d = 1;
        *v = 0;
        return 1;
    }
    if (**p < '0' || **p > '9')
        return 0;
    *v = 0;
    while (**p >= '0' && **p <= '9')
        *v = *v * 10 + (*(*p)++ - '0');
    return 1;
}

/* Parses one variant (up to '|' or the end); 0 on a malformed spec. */
static int te_parse_variant(const char **sp, te_variant *v)
{
    const char *p = *sp;
    memset(v, 0, sizeof *v);
    v->d_only_in_args = 1;
    while (*p == ' ')
        p++;
    const char *start = p;
    while (*p && *p != '|') {
        if (v->n == TE_MAX_INPUTS)
            return 0;
        te_input *in = &v->in[v->n++];
        if (*p == '@' || *p == '%')
            in->role = *p++ == '@' ? 1 : 2;
        if (!*p || !strchr("nuphgdbqmvij", *p))
            return 0;
        in->kind = *p++;
        if (in->kind == 'i' || in->kind == 'j') {
            if (!te_parse_int(&p, &in->range, &in->range_is_d))
                return 0;
            v->has_d |= in->range_is_d;
        }
        if (*p == 'T' || *p == 'S' || *p == 'E')
            in->layout = *p++;
        if (*p++ != ':')
            return 0;
        while (*p && *p != ' ' && *p != '|') {
            if (in->ndim == TGC_MAX_DIMS ||
                !te_parse_int(&p, &in->shape[in->ndim], &in->is_d[in->ndim]))
                return 0;
            if (in->is_d[in->ndim]) {
                v->has_d = 1;
                if (in->role != 0 || in->layout == 'E')
                    v->d_only_in_args = 0;
            }
            in->ndim++;
            if (*p == ',')
                p++;
        }
        if (in->layout && in->ndim < (in->layout == 'T' ? 2 : 1))
            return 0;
        while (*p == ' ')
            p++;
    }
    size_t len = (size_t)(p - start);
    while (len && start[len - 1] == ' ')
        len--;
    snprintf(v->text, sizeof v->text, "%.*s", (int)len, start);
    if (*p == '|')
        p++;
    *sp = p;
    return v->n > 0;
}

/* splitmix64 */
static uint64_t te_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

#endif
