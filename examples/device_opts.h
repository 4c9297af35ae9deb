/* Command-line options the examples share: --device, --precision, --mode (header only).
 *
 *   --device cpu|cuda|cuda:N   where the model's module (tgc_module_to) and its inputs live;
 *                              cfg.backend AUTO then compiles for that device
 *   --precision highest|high|medium   cfg.matmul_precision (GPU matrix products: fp32,
 *                              TF32, bf16 inputs; the CPU always computes fp32)
 *   --mode default|reduce-overhead    cfg.mode (reduce-overhead: CUDA graphs)
 *
 * GPU calls are asynchronous; example_sync(t) waits for t by reading one element on the
 * host, so that a timing covers the work (a no-op for CPU tensors). */
#ifndef TGC_EXAMPLES_DEVICE_OPTS_H
#define TGC_EXAMPLES_DEVICE_OPTS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tgc/tgc.h>

#define EXAMPLE_DEVICE_USAGE                                                                       \
    "          [--device cpu|cuda|cuda:N] [--precision highest|high|medium]\n"                     \
    "          [--mode default|reduce-overhead]\n"

static inline int example_parse_device(const char *s, tgc_device *out)
{
    if (strcmp(s, "cpu") == 0) {
        *out = tgc_cpu();
        return 1;
    }
    if (strcmp(s, "cuda") == 0 || strcmp(s, "gpu") == 0) {
        *out = tgc_cuda(0);
        return 1;
    }
    if (strncmp(s, "cuda:", 5) == 0 && s[5] >= '0' && s[5] <= '9') {
        *out = tgc_cuda(atoi(s + 5));
        return 1;
    }
    return 0;
}

static inline int example_parse_precision(const char *s, tgc_matmul_precision *out)
{
    static const char *const names[3] = {"highest", "high", "medium"};
    for (int i = 0; i < 3; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = (tgc_matmul_precision)i;
            return 1;
        }
    return 0;
}

static inline int example_parse_mode(const char *s, tgc_mode *out)
{
    if (strcmp(s, "default") == 0)
        *out = TGC_MODE_DEFAULT;
    else if (strcmp(s, "reduce-overhead") == 0 || strcmp(s, "reduce_overhead") == 0)
        *out = TGC_MODE_REDUCE_OVERHEAD;
    else
        return 0;
    return 1;
}

/* Handles argv[*i] when it is one of the three options (consuming its value). 1: handled;
 * 0: not one of them; -1: one of them with a missing or bad value. */
static inline int example_device_option(int argc, char **argv, int *i, tgc_device *dev,
                                        tgc_matmul_precision *prec, tgc_mode *mode)
{
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    int ok;
    if (strcmp(a, "--device") == 0)
        ok = v && example_parse_device(v, dev);
    else if (strcmp(a, "--precision") == 0)
        ok = v && example_parse_precision(v, prec);
    else if (strcmp(a, "--mode") == 0)
        ok = v && example_parse_mode(v, mode);
    else
        return 0;
    if (!ok)
        return -1;
    (*i)++;
    return 1;
}

static inline const char *example_device_name(tgc_device d, char *buf, size_t n)
{
    if (d.type == TGC_DEVICE_CPU)
        snprintf(buf, n, "cpu");
    else
        snprintf(buf, n, "cuda:%d", d.index);
    return buf;
}

/* Waits for t's device to finish computing t (reads one element). */
static inline void example_sync(tgc_tensor *t)
{
    if (t && tgc_device_of(t).type != TGC_DEVICE_CPU)
        (void)tgc_item_f64(t);
}

/* t moved to dev (t itself when dev is the CPU and t is there); NULL on error. */
static inline tgc_tensor *example_to(tgc_tensor *t, tgc_device dev)
{
    return t && (dev.type != tgc_device_of(t).type || dev.index != tgc_device_of(t).index)
               ? tgc_to(t, dev)
               : t;
}

#endif
