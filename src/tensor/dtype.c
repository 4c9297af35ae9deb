/* The dtype table (tensor/dtype.h). */
#include "tensor/dtype.h"

static const tgc_dtype_info dtype_table[] = {
    [TGC_F32] = {"f32", 4, TGC_DCLASS_FLOAT, 2, "float"},
    [TGC_F16] = {"f16", 2, TGC_DCLASS_FLOAT, 1, "uint16_t"},
    [TGC_BF16] = {"bf16", 2, TGC_DCLASS_FLOAT, 1, "uint16_t"},
    [TGC_I32] = {"i32", 4, TGC_DCLASS_INT, 0, "int32_t"},
    [TGC_I64] = {"i64", 8, TGC_DCLASS_INT, 0, "int64_t"},
    [TGC_BOOL] = {"bool", 1, TGC_DCLASS_BOOL, 0, "uint8_t"},
    [TGC_F64] = {"f64", 8, TGC_DCLASS_FLOAT, 3, "double"},
};
_Static_assert(sizeof(dtype_table) / sizeof(dtype_table[0]) == TGC_DTYPE_COUNT,
               "dtype table out of sync with tgc_dtype");

const tgc_dtype_info *tgc_dtype_info_of(tgc_dtype dt)
{
    return (unsigned)dt < TGC_DTYPE_COUNT ? &dtype_table[dt] : NULL;
}

const char *tgc_dtype_name(tgc_dtype dt)
{
    return (unsigned)dt < TGC_DTYPE_COUNT ? dtype_table[dt].name : "?";
}

size_t tgc_dtype_size(tgc_dtype dt)
{
    return (unsigned)dt < TGC_DTYPE_COUNT ? dtype_table[dt].size : 0;
}

int tgc_dtype_is_float(tgc_dtype dt)
{
    return (unsigned)dt < TGC_DTYPE_COUNT && dtype_table[dt].cls == TGC_DCLASS_FLOAT;
}

int tgc_dtype_is_int(tgc_dtype dt)
{
    return (unsigned)dt < TGC_DTYPE_COUNT && dtype_table[dt].cls == TGC_DCLASS_INT;
}

tgc_dtype tgc_promote(tgc_dtype a, tgc_dtype b)
{
    if (a == b || b == TGC_BOOL)
        return a;
    if (a == TGC_BOOL)
        return b;
    int fa = tgc_dtype_is_float(a), fb = tgc_dtype_is_float(b);
    if (!fa && !fb)
        return TGC_I64; /* i32 with i64 */
    if (fa != fb)
        return fa ? a : b;
    int ra = dtype_table[a].float_rank, rb = dtype_table[b].float_rank;
    if (ra == rb)
        return TGC_F32; /* f16 with bf16 */
    return ra > rb ? a : b;
}
