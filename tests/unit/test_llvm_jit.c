/* The LLVM JIT wrapper: host target, a unit built with the C API and called, verifier and
 * lookup errors as TGC_ERR_COMPILE, code removal. Skipped when built without LLVM. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#ifdef TGC_HAVE_LLVM
#include "backend/llvm/llvm_jit.h"
#include "support/error.h"

static void test_host_target(void **state)
{
    (void)state;
    const tgc_llvm_target *t = tgc_llvm_host();
    assert_non_null(t);
    assert_true(t->cpu[0] != '\0');
    assert_true(t->vec_bits == 128 || t->vec_bits == 256 || t->vec_bits == 512);
}

/* i64 f(i64 a, i64 b) { return a * b + 7; } */
static LLVMValueRef build_muladd(tgc_llvm_unit *u)
{
    LLVMTypeRef params[2] = {u->t_i64, u->t_i64};
    char name[64];
    tgc_llvm_unit_name(u, "muladd", name, sizeof name);
    LLVMValueRef fn = tgc_llvm_add_function(u, name, LLVMFunctionType(u->t_i64, params, 2, 0));
    LLVMPositionBuilderAtEnd(u->b, LLVMAppendBasicBlockInContext(u->ctx, fn, "entry"));
    LLVMValueRef m = LLVMBuildMul(u->b, LLVMGetParam(fn, 0), LLVMGetParam(fn, 1), "m");
    LLVMBuildRet(u->b, LLVMBuildAdd(u->b, m, LLVMConstInt(u->t_i64, 7, 0), "r"));
    return fn;
}

static void test_unit_runs(void **state)
{
    (void)state;
    tgc_llvm_unit u;
    assert_int_equal(tgc_llvm_unit_begin(&u, "t"), TGC_OK);
    build_muladd(&u);
    tgc_llvm_code *c = NULL;
    char *before = NULL, *after = NULL;
    assert_int_equal(tgc_llvm_unit_finish(&u, &c, &before, &after), TGC_OK);
    assert_non_null(strstr(before, "mul i64"));
    assert_non_null(strstr(after, "define"));
    free(before);
    free(after);
    int64_t (*f)(int64_t, int64_t) =
        (int64_t(*)(int64_t, int64_t))tgc_llvm_code_lookup(c, "muladd");
    assert_non_null(f);
    assert_int_equal(f(6, 7), 49);
    assert_int_equal(f(-3, 5), -8);
    assert_null(tgc_llvm_code_lookup(c, "absent"));
    assert_int_equal(tgc_last_status(), TGC_ERR_COMPILE);
    tgc_llvm_code_free(c);
}

static void test_two_units_same_base_name(void **state)
{
    (void)state;
    tgc_llvm_unit a, b;
    tgc_llvm_code *ca = NULL, *cb = NULL;
    assert_int_equal(tgc_llvm_unit_begin(&a, "a"), TGC_OK);
    assert_int_equal(tgc_llvm_unit_begin(&b, "b"), TGC_OK);
    build_muladd(&a);
    build_muladd(&b);
    assert_int_equal(tgc_llvm_unit_finish(&a, &ca, NULL, NULL), TGC_OK);
    assert_int_equal(tgc_llvm_unit_finish(&b, &cb, NULL, NULL), TGC_OK);
    void *fa = tgc_llvm_code_lookup(ca, "muladd"), *fb = tgc_llvm_code_lookup(cb, "muladd");
    assert_non_null(fa);
    assert_non_null(fb);
    assert_ptr_not_equal(fa, fb);
    tgc_llvm_code_free(ca);
    tgc_llvm_code_free(cb);
}

static void test_invalid_ir_is_compile_error(void **state)
{
    (void)state;
    tgc_llvm_unit u;
    assert_int_equal(tgc_llvm_unit_begin(&u, "bad"), TGC_OK);
    LLVMValueRef fn = tgc_llvm_add_function(&u, "bad", LLVMFunctionType(u.t_i64, NULL, 0, 0));
    LLVMPositionBuilderAtEnd(u.b, LLVMAppendBasicBlockInContext(u.ctx, fn, "entry"));
    LLVMBuildRetVoid(u.b); /* wrong return type: the verifier must reject it */
    tgc_llvm_code *c = (tgc_llvm_code *)1;
    assert_int_equal(tgc_llvm_unit_finish(&u, &c, NULL, NULL), TGC_ERR_COMPILE);
    assert_null(c);
    assert_non_null(strstr(tgc_last_error(), "invalid LLVM IR"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_target),
        cmocka_unit_test(test_unit_runs),
        cmocka_unit_test(test_two_units_same_base_name),
        cmocka_unit_test(test_invalid_ir_is_compile_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
static void test_llvm_absent(void **state)
{
    (void)state;
    skip();
}
int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_llvm_absent)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
