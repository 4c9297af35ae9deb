/* sin, cos, logsumexp, rms_norm and group_norm on cuda:0 (cases: ops_modern_cases.h): eager
 * ops on device tensors and compiled calls on the CUDA backend, both against the interp
 * oracle on the host (itself checked against double loops). Skipped without a GPU. */
#include "gpu_skip.h"
#include "ops/ops_modern_cases.h"

static void test_cases_cuda(void **state)
{
    (void)state;
    GPU_REQUIRE();
    for (int ci = 0; ci < N_OF(m_cases); ci++) {
        const m_case *c = &m_cases[ci];
        tgc_scope_push();
        m_inputs in = m_inputs_of(c, ci);
        double *want;
        int64_t nw;
        m_oracle(c, &in, &want, &nw);
        tgc_tensor *dev[3];
        for (int k = 0; k < in.n; k++) {
            dev[k] = tgc_to(in.t[k], tgc_cuda(0));
            if (!dev[k])
                fail_msg("%s: to cuda: %s", c->name, tgc_last_error());
        }
        m_expect_near("eager (cuda)", c, m_apply(c, dev, in.n), want, nw);
        m_expect_near("compiled (cuda)", c, m_compiled(c, TGC_BACKEND_CUDA, dev, in.n), want, nw);
        free(want);
        tgc_scope_pop();
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cases_cuda, scope_setup, scope_teardown),
    };
    int rc = gpu_skip_finish(cmocka_run_group_tests(tests, NULL, NULL));
    tgc_shutdown();
    return rc;
}
