/* Layers whose state libtgc makes itself, under PyTorch's state_dict names (tgc/module.h). */
#include "frontend/module_impl.h"
#include "support/error.h"
#include "tensor/dtype.h"
#include "tensor/tensor_impl.h"
#include "tgc/module.h"
#include "tgc/ops.h"

static const char *const bn_names[] = {"weight", "bias", "running_mean", "running_var",
                                       "num_batches_tracked"};

tgc_status tgc_module_add_batch_norm(tgc_module *m, int64_t num_features, tgc_dtype dtype,
                                     tgc_device dev)
{
    const char *fn = "tgc_module_add_batch_norm";
    if (!m)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: module is NULL", fn);
    if (num_features <= 0)
        return tgc_set_error(TGC_ERR_INVALID_ARG, "%s: num_features is %lld; give at least 1", fn,
                             (long long)num_features);
    if (!tgc_dtype_device_check(fn, dtype, dev))
        return tgc_last_status();
    if (!tgc_dtype_is_float(dtype))
        return tgc_set_error(TGC_ERR_DTYPE,
                             "%s: dtype %s is not floating point (weight and bias are trained)", fn,
                             tgc_dtype_name(dtype));
    /* every name free first, so that a refusal adds nothing */
    for (int i = 0; i < 5; i++)
        if (tgc_module_name_taken(m, bn_names[i]))
            return tgc_set_error(TGC_ERR_INVALID_ARG,
                                 "%s: module '%s' already has a member named '%s'", fn,
                                 tgc_module_name(m), bn_names[i]);
    tgc_scope_push();
    int64_t c = num_features;
    tgc_status st = TGC_OK;
    if (!tgc_module_param(m, "weight", tgc_ones(&c, 1, dtype, dev)) ||
        !tgc_module_param(m, "bias", tgc_zeros(&c, 1, dtype, dev)) ||
        !tgc_module_buffer(m, "running_mean", tgc_zeros(&c, 1, dtype, dev)) ||
        !tgc_module_buffer(m, "running_var", tgc_ones(&c, 1, dtype, dev)) ||
        !tgc_module_buffer(m, "num_batches_tracked", tgc_zeros(NULL, 0, TGC_I64, dev)))
        st = tgc_last_status();
    tgc_scope_pop();
    return st;
}

tgc_tensor *tgc_module_batch_norm(tgc_module *bn, tgc_tensor *x, double momentum, double eps)
{
    if (!bn) {
        tgc_keep_error(TGC_ERR_INVALID_ARG, "tgc_module_batch_norm: module is NULL");
        return NULL;
    }
    tgc_tensor *t[4];
    for (int i = 0; i < 4; i++)
        if (!(t[i] = tgc_module_find_local(bn, bn_names[i]))) {
            tgc_set_error(TGC_ERR_INVALID_ARG,
                          "tgc_module_batch_norm: module '%s' has no '%s' (make its state with "
                          "tgc_module_add_batch_norm)",
                          tgc_module_name(bn), bn_names[i]);
            return NULL;
        }
    return tgc_batch_norm(x, t[2], t[3], t[0], t[1], tgc_module_is_training(bn), momentum, eps);
}
