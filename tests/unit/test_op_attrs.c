/* The op descriptors' attribute layouts (ir/ops.def LAYOUT / ATTRS, ir/op.h): every named
 * field is the raw word at its position, tgc_attrs_of gives each op its layout's counts, and
 * a node built through the named fields hashes and prints as one built through the raw
 * words (the canonical text is positional). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ir/graph.h"
#include "ir/op.h"

static void named_fields_overlay_raw_words(void **state)
{
    (void)state;
    tgc_attrs a = tgc_attrs_of(TGC_OP_CONV2D);
    a.conv2d.stride_h = 2;
    a.conv2d.stride_w = 3;
    a.conv2d.pad_h = 4;
    a.conv2d.pad_w = 5;
    a.conv2d.dil_h = 6;
    a.conv2d.dil_w = 7;
    a.conv2d.groups = 8;
    for (int k = 0; k < 7; k++)
        assert_int_equal(a.i[k], k + 2);
    assert_int_equal(a.ni, 7);
    assert_int_equal(a.nf, 0);

    tgc_attrs b = tgc_attrs_of(TGC_OP_BATCH_NORM);
    b.batch_norm.training = 1;
    b.batch_norm.has = TGC_BN_HAS_STATS | TGC_BN_HAS_WEIGHT;
    b.batch_norm.momentum = 0.1;
    b.batch_norm.eps = 1e-5;
    assert_int_equal(b.ni, 2);
    assert_int_equal(b.nf, 2);
    assert_int_equal(b.i[1], TGC_BN_HAS_STATS | TGC_BN_HAS_WEIGHT);
    assert_true(b.f[0] == 0.1 && b.f[1] == 1e-5);

    /* floats start at f[0] whatever the number of integer fields */
    tgc_attrs s = tgc_attrs_of(TGC_OP_SDPA);
    s.sdpa.dropout_p = 0.25;
    s.sdpa.scale = 0.125;
    s.sdpa.causal = 1;
    assert_true(s.f[0] == 0.25 && s.f[1] == 0.125 && s.i[0] == 1);
    tgc_attrs c = tgc_attrs_of(TGC_OP_CLAMP);
    c.clamp.lo = -1.0;
    c.clamp.hi = 2.0;
    assert_int_equal(c.ni, 0);
    assert_int_equal(c.nf, 2);
    assert_true(c.f[0] == -1.0 && c.f[1] == 2.0);

    /* arrays follow the fields before them */
    tgc_attrs p = tgc_attrs_of(TGC_OP_PAD);
    p.pad.n_pairs = 2;
    p.pad.pads[0] = 9;
    p.pad.pads[3] = 11;
    p.pad.value = 0.5;
    assert_int_equal(p.i[0], 2);
    assert_int_equal(p.i[1], 9);
    assert_int_equal(p.i[4], 11);
    assert_true(p.f[0] == 0.5);

    /* designated initializers reach the named fields */
    tgc_attrs d = {.ni = 2, .reduce = {.mask = 6, .keepdim = 1}};
    assert_int_equal(d.i[0], 6);
    assert_int_equal(d.i[1], 1);
    assert_int_equal(d.ni, 2);
}

static void every_op_has_a_layout(void **state)
{
    (void)state;
    for (int op = 0; op < TGC_OP_COUNT; op++) {
        tgc_attrs a = tgc_attrs_of((tgc_op)op);
        assert_true(a.ni >= 0 && a.ni <= TGC_MAX_IATTR);
        assert_true(a.nf >= 0 && a.nf <= TGC_MAX_FATTR);
        for (int k = 0; k < TGC_MAX_IATTR; k++)
            assert_int_equal(a.i[k], 0);
        assert_non_null(tgc_op_layout_name((tgc_op)op));
        assert_string_not_equal(tgc_op_layout_name((tgc_op)op), "?");
    }
    assert_string_equal(tgc_op_layout_name(TGC_OP_CONV2D), "conv2d");
    assert_string_equal(tgc_op_layout_name(TGC_OP_AVG_POOL2D), "pool");
    assert_string_equal(tgc_op_layout_name(TGC_OP_ADD), "none");
    assert_string_equal(tgc_op_layout_name(TGC_OP_COUNT), "?");
    tgc_attrs bad = tgc_attrs_of(TGC_OP_COUNT);
    assert_int_equal(bad.ni, 0);
    assert_int_equal(bad.nf, 0);
    /* the counts ops.def's comments promise */
    assert_int_equal(tgc_attrs_of(TGC_OP_SUM).ni, 3);
    assert_int_equal(tgc_attrs_of(TGC_OP_LAYER_NORM).ni, 2);
    assert_int_equal(tgc_attrs_of(TGC_OP_LAYER_NORM).nf, 1);
    assert_int_equal(tgc_attrs_of(TGC_OP_CONV2D_GRAD_INPUT).ni, 9);
    assert_int_equal(tgc_attrs_of(TGC_OP_ARANGE).nf, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(named_fields_overlay_raw_words),
        cmocka_unit_test(every_op_has_a_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
