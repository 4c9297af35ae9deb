/* Shape and dtype inference, shared by eager execution and tracing.
 *
 * Given the inputs' dtypes and (symbolic) shapes, and the node's attributes, computes the
 * output's dtype and shape, or fails with TGC_ERR_SHAPE / TGC_ERR_DTYPE /
 * TGC_ERR_INVALID_ARG and a message that names the public op ("tgc_matmul: inner dims
 * differ: a is [64, 512], b is [256, 10]"). syms is NULL in eager mode (all dims constant);
 * while tracing, data-dependent decisions on symbolic dims are recorded as assumptions in
 * syms (tgc_sym_unify / tgc_sym_specialize). */
#ifndef TGC_IR_SHAPE_INFER_H
#define TGC_IR_SHAPE_INFER_H

#include "ir/graph.h"
#include "tensor/dtype.h" /* tgc_promote, tgc_dtype_is_float */

tgc_status tgc_infer(tgc_op op, const tgc_vinfo *in, int n_in, const tgc_attrs *a,
                     tgc_symtab *syms, tgc_vinfo *out);


#endif
