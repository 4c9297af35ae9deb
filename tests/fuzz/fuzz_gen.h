/* libtgc random-program fuzzer: the generator, the runner that compares backends, the printer.
 *
 * Written against the public API only (the headers in include/tgc). A program is a list of
 * instructions over values: leaves (tensors passed to tgc_call, module parameters, module buffers)
 * and op results. The generator draws instructions from a seeded PRNG (or from a fuzzer's bytes)
 * and runs each one eagerly while it generates, so every choice is made against the real shapes and
 * dtypes; an op that fails eagerly is dropped and redrawn, except the deliberately invalid ones
 * (extreme sizes), which end the program so that its status is compared on every path.
 *
 * The runner turns a program into a tgc_model_fn (the program is reached through the module's
 * userdata), compiles it with backend EAGER, INTERP (the oracle) and LLVM (when the build and
 * the host have it), calls each 1..4 times with the sizes of each call (a dim that changes
 * under dynamic = AUTO, dims marked with tgc_mark_dynamic, and identical repeat calls), and
 * compares statuses, output shapes, dtypes and values, and the module buffers (batch-norm
 * running statistics) after each call. See tests/fuzz/README.md for the tolerances.
 *
 * Threading: one program at a time per process (the generator and runner use the calling
 * thread's scopes and the process-wide random stream). */
#ifndef TGC_FUZZ_GEN_H
#define TGC_FUZZ_GEN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <tgc/tgc.h>

#define FZ_MAX_SIZES  5
#define FZ_MAX_CALLS  4
#define FZ_MAX_LEAVES 40
#define FZ_MAX_INS    96
#define FZ_MAX_OUT    4
#define FZ_MAX_IV     12

/* The PRNG: splitmix64 from a seed; with data, each draw first consumes the fuzzer's bytes. */
typedef struct fz_rng {
    uint64_t s;
    const uint8_t *data;
    size_t len, pos;
} fz_rng;

void fz_rng_seed(fz_rng *r, uint64_t seed);
void fz_rng_bytes(fz_rng *r, const uint8_t *data, size_t len);

/* ARG: in[arg_index] of tgc_call; PARAM / BUF: a module parameter / buffer; CAP: a tensor the
 * model function captures (reached through the module's userdata, as a static would be). */
typedef enum fz_class { FZ_ARG, FZ_PARAM, FZ_BUF, FZ_CAP } fz_class;
typedef enum fz_data { FZ_NORMAL, FZ_POS, FZ_INT, FZ_BOOL } fz_data;
typedef enum fz_layout { FZ_CONTIG, FZ_TRANSPOSED, FZ_STRIDED, FZ_EXPANDED } fz_layout;

typedef struct fz_leaf {
    fz_class cls;
    tgc_dtype dt;
    fz_data data;
    int64_t lo, hi; /* FZ_INT: values in [lo, hi); hi_ref >= 0: hi = that size (+ hi) */
    int hi_ref;
    fz_layout layout;
    int ndim;
    int ref[TGC_MAX_DIMS]; /* >= 0: size-table entry; < 0: the constant in cst */
    int64_t cst[TGC_MAX_DIMS];
    unsigned dyn_mask; /* dims marked with tgc_mark_dynamic before each call */
    int arg_index;     /* FZ_ARG: its position in tgc_call's inputs */
    uint64_t seed;
} fz_leaf;

typedef struct fz_ins {
    int op;
    int a[5]; /* operand values, -1: none (an optional operand given as NULL) */
    int64_t iv[FZ_MAX_IV];
    int niv;
    double dv[3];
    int leaf; /* FZ_OP_LEAF */
} fz_ins;

typedef struct fz_prog {
    uint64_t seed;
    int nsizes, ncalls;
    int64_t sizes[FZ_MAX_CALLS][FZ_MAX_SIZES];
    tgc_dynamic dynamic;
    int nleaves, nargs;
    fz_leaf leaves[FZ_MAX_LEAVES];
    int nins;
    fz_ins ins[FZ_MAX_INS];
    int nout;
    int outs[FZ_MAX_OUT];
    int bad_op; /* 1 when the program ends in a deliberately invalid op */
} fz_prog;

/* Generates a program (needs libtgc; runs ops eagerly). progress, when not NULL, is rewritten
 * with the program text before each eager step, so a crash leaves its program behind. */
void fz_generate(fz_rng *r, fz_prog *p, const char *progress);
/* Writes the program as C-like text (deterministic: no addresses). */
void fz_print(const fz_prog *p, FILE *f);

typedef enum fz_verdict { FZ_PASS = 0, FZ_MISMATCH = 1, FZ_INTERNAL = 2 } fz_verdict;

/* Runs the program on every available path and compares; writes what differed to report
 * (one line per difference). */
fz_verdict fz_run(const fz_prog *p, FILE *report);
/* A smaller program with the same verdict: fewer outputs, fewer calls, instructions replaced
 * by their operands (dead ones removed), marks and layouts dropped. Runs p many times. */
void fz_reduce(const fz_prog *p, fz_prog *out);
/* 1 when this build and host compile with the LLVM backend. */
int fz_have_llvm(void);

#endif
