/* The one dtype table: name, size, class (float / int / bool), the float promotion rank and
 * the C storage type a renderer declares buffers with. Every layer above reads dtype facts
 * here; none keeps its own list. */
#ifndef TGC_TENSOR_DTYPE_H
#define TGC_TENSOR_DTYPE_H

#include <stddef.h>

#include "tgc/tensor.h"

typedef enum { TGC_DCLASS_FLOAT, TGC_DCLASS_INT, TGC_DCLASS_BOOL } tgc_dtype_class;

typedef struct tgc_dtype_info {
    const char *name; /* "f32", as printed in graphs and messages */
    size_t size;      /* bytes per element */
    tgc_dtype_class cls;
    int float_rank; /* floats: f16 = bf16 = 1 < f32 = 2 < f64 = 3; 0 for the others */
    /* The C type of one stored element (f16 and bf16 are stored as their 16 bits; a renderer
     * that has a native half type maps them itself). */
    const char *c_type;
} tgc_dtype_info;

/* NULL for a value outside the enum. */
const tgc_dtype_info *tgc_dtype_info_of(tgc_dtype dt);
int tgc_dtype_is_float(tgc_dtype dt);
int tgc_dtype_is_int(tgc_dtype dt); /* i32, i64 (not bool) */
/* The dtype of a*b per PyTorch's promotion (bool < ints < floats; f16 with bf16 is f32). */
tgc_dtype tgc_promote(tgc_dtype a, tgc_dtype b);

#endif
