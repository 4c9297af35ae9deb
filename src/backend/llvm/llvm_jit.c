/* One ORC LLJIT per process, host-targeted; units of LLVM IR verified, optimized (O3) and
 * added under their own resource trackers. See llvm_jit.h. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "backend/llvm/llvm_jit.h"
#include "support/error.h"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static tgc_llvm_target g_target;
static LLVMTargetRef g_llvm_target;
static char g_triple[128];
static char g_init_error[512];
static LLVMOrcLLJITRef g_jit;
static atomic_uint_fast64_t g_next_unit = 1;

struct tgc_llvm_code {
    LLVMOrcResourceTrackerRef rt;
    uint64_t id;
    char diag[1024]; /* LLVM diagnostics raised while the JIT generates code */
};

static int has_feature(const char *features, const char *f)
{
    size_t n = strlen(f);
    for (const char *p = features; (p = strstr(p, f)) != NULL; p += n)
        if ((p == features || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return 0;
}

static LLVMTargetMachineRef host_machine(void)
{
    return LLVMCreateTargetMachine(g_llvm_target, g_triple, g_target.cpu, g_target.features,
                                   LLVMCodeGenLevelAggressive, LLVMRelocDefault,
                                   LLVMCodeModelJITDefault);
}

static void set_error_from(LLVMErrorRef e, char *buf, size_t n, const char *what)
{
    char *m = LLVMGetErrorMessage(e);
    snprintf(buf, n, "%s: %s", what, m);
    LLVMDisposeErrorMessage(m);
}

static void init_once(void)
{
    if (LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter()) {
        snprintf(g_init_error, sizeof g_init_error, "LLVM has no native target for this host");
        return;
    }
    char *triple = LLVMGetDefaultTargetTriple();
    snprintf(g_triple, sizeof g_triple, "%s", triple);
    LLVMDisposeMessage(triple);
    const char *cpu_env = getenv("TGC_LLVM_CPU");
    const char *feat_env = getenv("TGC_LLVM_FEATURES");
    char *cpu = LLVMGetHostCPUName();
    char *feat = LLVMGetHostCPUFeatures();
    snprintf(g_target.cpu, sizeof g_target.cpu, "%s", cpu_env && *cpu_env ? cpu_env : cpu);
    /* A CPU override without features means "that CPU's own features". */
    snprintf(g_target.features, sizeof g_target.features, "%s",
             feat_env ? feat_env : (cpu_env && *cpu_env ? "" : feat));
    LLVMDisposeMessage(cpu);
    LLVMDisposeMessage(feat);
    char *err = NULL;
    if (LLVMGetTargetFromTriple(g_triple, &g_llvm_target, &err)) {
        snprintf(g_init_error, sizeof g_init_error, "no LLVM target for %s: %s", g_triple,
                 err ? err : "?");
        LLVMDisposeMessage(err);
        return;
    }
    LLVMTargetMachineRef tm = host_machine();
    if (!tm) {
        snprintf(g_init_error, sizeof g_init_error, "LLVM cannot target cpu '%s'", g_target.cpu);
        return;
    }
    /* The features the CPU name implies count too (TGC_LLVM_CPU=haswell without features). */
    char *tm_feat = LLVMGetTargetMachineFeatureString(tm);
    const char *f = g_target.features[0] ? g_target.features : tm_feat;
    int avx512 = has_feature(f, "+avx512f"), avx2 = has_feature(f, "+avx2");
    if (!g_target.features[0] && !tm_feat[0]) {
        /* CPU name only: ask LLVM whether the CPU has the features (via the subtarget). */
        avx512 = strstr(g_target.cpu, "avx512") || strstr(g_target.cpu, "skylake-avx512") ||
                 strstr(g_target.cpu, "znver4") || strstr(g_target.cpu, "znver5") ||
                 strstr(g_target.cpu, "sapphirerapids") || strstr(g_target.cpu, "icelake");
        avx2 = avx512 || strstr(g_target.cpu, "haswell") || strstr(g_target.cpu, "broadwell") ||
               strstr(g_target.cpu, "skylake") || strstr(g_target.cpu, "znver");
    }
    g_target.vec_bits = avx512 ? 512 : avx2 ? 256 : 128;
    g_target.has_fma = avx2 || has_feature(f, "+fma");
    LLVMDisposeMessage(tm_feat);

    LLVMOrcJITTargetMachineBuilderRef jtmb =
        LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(tm);
    LLVMOrcLLJITBuilderRef builder = LLVMOrcCreateLLJITBuilder();
    LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(builder, jtmb);
    LLVMErrorRef e = LLVMOrcCreateLLJIT(&g_jit, builder);
    if (e) {
        set_error_from(e, g_init_error, sizeof g_init_error, "creating the LLJIT");
        g_jit = NULL;
        return;
    }
    /* Kernels may call libm or memcpy/memset: resolve them from the process. */
    LLVMOrcDefinitionGeneratorRef gen = NULL;
    e = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
        &gen, LLVMOrcLLJITGetGlobalPrefix(g_jit), NULL, NULL);
    if (e) {
        set_error_from(e, g_init_error, sizeof g_init_error, "process symbols");
        return;
    }
    LLVMOrcJITDylibAddGenerator(LLVMOrcLLJITGetMainJITDylib(g_jit), gen);
}

const tgc_llvm_target *tgc_llvm_host(void)
{
    pthread_once(&g_once, init_once);
    if (g_init_error[0] || !g_jit) {
        tgc_set_error(TGC_ERR_COMPILE, "tgc llvm: %s",
                      g_init_error[0] ? g_init_error : "JIT unavailable");
        return NULL;
    }
    return &g_target;
}

tgc_status tgc_llvm_unit_begin(tgc_llvm_unit *u, const char *name)
{
    memset(u, 0, sizeof *u);
    u->target = tgc_llvm_host();
    if (!u->target)
        return TGC_ERR_COMPILE;
    u->id = atomic_fetch_add(&g_next_unit, 1);
    u->tsc = LLVMOrcCreateNewThreadSafeContext();
    u->ctx = LLVMOrcThreadSafeContextGetContext(u->tsc);
    u->mod = LLVMModuleCreateWithNameInContext(name, u->ctx);
    LLVMSetTarget(u->mod, LLVMOrcLLJITGetTripleString(g_jit));
    LLVMSetDataLayout(u->mod, LLVMOrcLLJITGetDataLayoutStr(g_jit));
    u->b = LLVMCreateBuilderInContext(u->ctx);
    u->t_void = LLVMVoidTypeInContext(u->ctx);
    u->t_i1 = LLVMInt1TypeInContext(u->ctx);
    u->t_i8 = LLVMInt8TypeInContext(u->ctx);
    u->t_i16 = LLVMInt16TypeInContext(u->ctx);
    u->t_i32 = LLVMInt32TypeInContext(u->ctx);
    u->t_i64 = LLVMInt64TypeInContext(u->ctx);
    u->t_f16 = LLVMHalfTypeInContext(u->ctx);
    u->t_bf16 = LLVMBFloatTypeInContext(u->ctx);
    u->t_f32 = LLVMFloatTypeInContext(u->ctx);
    u->t_f64 = LLVMDoubleTypeInContext(u->ctx);
    u->t_ptr = LLVMPointerTypeInContext(u->ctx, 0);
    return TGC_OK;
}

void tgc_llvm_unit_abort(tgc_llvm_unit *u)
{
    if (u->b)
        LLVMDisposeBuilder(u->b);
    if (u->mod)
        LLVMDisposeModule(u->mod);
    if (u->tsc)
        LLVMOrcDisposeThreadSafeContext(u->tsc);
    u->b = NULL;
    u->mod = NULL;
    u->tsc = NULL;
}

void tgc_llvm_unit_name(const tgc_llvm_unit *u, const char *base, char *buf, size_t n)
{
    snprintf(buf, n, "%s_u%llu", base, (unsigned long long)u->id);
}

static void add_str_attr(tgc_llvm_unit *u, LLVMValueRef fn, const char *k, const char *v)
{
    LLVMAttributeRef a =
        LLVMCreateStringAttribute(u->ctx, k, (unsigned)strlen(k), v, (unsigned)strlen(v));
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, a);
}

LLVMValueRef tgc_llvm_add_function(tgc_llvm_unit *u, const char *name, LLVMTypeRef fn_type)
{
    LLVMValueRef fn = LLVMAddFunction(u->mod, name, fn_type);
    add_str_attr(u, fn, "target-cpu", u->target->cpu);
    if (u->target->features[0])
        add_str_attr(u, fn, "target-features", u->target->features);
    char w[16];
    snprintf(w, sizeof w, "%d", u->target->vec_bits);
    /* Some CPUs prefer 256-bit vectors for auto-vectorization; our explicit vectors are as
     * wide as the registers, so tell the backend they are legal and wanted. */
    add_str_attr(u, fn, "min-legal-vector-width", w);
    add_str_attr(u, fn, "prefer-vector-width", w);
    unsigned nounwind = LLVMGetEnumAttributeKindForName("nounwind", 8);
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                            LLVMCreateEnumAttribute(u->ctx, nounwind, 0));
    return fn;
}

LLVMValueRef tgc_llvm_intrinsic(tgc_llvm_unit *u, const char *name, LLVMTypeRef *types, int n_types,
                                LLVMTypeRef *fn_type)
{
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    if (fn_type)
        *fn_type = LLVMIntrinsicGetType(u->ctx, id, types, (size_t)n_types);
    return LLVMGetIntrinsicDeclaration(u->mod, id, types, (size_t)n_types);
}

tgc_status tgc_llvm_verify(LLVMModuleRef m)
{
    char *msg = NULL;
    if (LLVMVerifyModule(m, LLVMReturnStatusAction, &msg)) {
        tgc_status st =
            tgc_set_error(TGC_ERR_COMPILE, "tgc llvm: invalid LLVM IR: %s", msg ? msg : "?");
        LLVMDisposeMessage(msg);
        return st;
    }
    LLVMDisposeMessage(msg);
    return TGC_OK;
}

static void diag_handler(LLVMDiagnosticInfoRef di, void *user)
{
    char *buf = user;
    if (LLVMGetDiagInfoSeverity(di) != LLVMDSError)
        return;
    char *d = LLVMGetDiagInfoDescription(di);
    size_t used = strlen(buf);
    if (used + 2 < 1024)
        snprintf(buf + used, 1024 - used, "%s%s", used ? "; " : "", d);
    LLVMDisposeMessage(d);
}

tgc_status tgc_llvm_unit_finish(tgc_llvm_unit *u, tgc_llvm_code **out, char **ir_before,
                                char **ir_after)
{
    *out = NULL;
    tgc_llvm_code *c = calloc(1, sizeof *c);
    if (!c) {
        tgc_llvm_unit_abort(u);
        return tgc_set_error(TGC_ERR_OOM, "tgc llvm: out of memory");
    }
    c->id = u->id;
    LLVMContextSetDiagnosticHandler(u->ctx, diag_handler, c->diag);
    LLVMDisposeBuilder(u->b);
    u->b = NULL;
    if (ir_before)
        *ir_before = NULL;
    if (ir_after)
        *ir_after = NULL;
    tgc_status st = tgc_llvm_verify(u->mod);
    if (st == TGC_OK && ir_before) {
        char *s = LLVMPrintModuleToString(u->mod);
        *ir_before = strdup(s);
        LLVMDisposeMessage(s);
    }
    if (st == TGC_OK) {
        LLVMTargetMachineRef tm = host_machine();
        LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
        LLVMPassBuilderOptionsSetLoopVectorization(opts, 1);
        LLVMPassBuilderOptionsSetSLPVectorization(opts, 1);
        LLVMErrorRef e = LLVMRunPasses(u->mod, "default<O3>", tm, opts);
        LLVMDisposePassBuilderOptions(opts);
        LLVMDisposeTargetMachine(tm);
        if (e) {
            char *m = LLVMGetErrorMessage(e);
            st = tgc_set_error(TGC_ERR_COMPILE, "tgc llvm: optimizing: %s", m);
            LLVMDisposeErrorMessage(m);
        } else if (c->diag[0]) {
            st = tgc_set_error(TGC_ERR_COMPILE, "tgc llvm: %s", c->diag);
        }
    }
    if (st == TGC_OK && ir_after) {
        char *s = LLVMPrintModuleToString(u->mod);
        *ir_after = strdup(s);
        LLVMDisposeMessage(s);
    }
    if (st != TGC_OK) {
        tgc_llvm_unit_abort(u);
        free(c);
        return st;
    }
    LLVMOrcJITDylibRef jd = LLVMOrcLLJITGetMainJITDylib(g_jit);
    c->rt = LLVMOrcJITDylibCreateResourceTracker(jd);
    LLVMOrcThreadSafeModuleRef tsm = LLVMOrcCreateNewThreadSafeModule(u->mod, u->tsc);
    u->mod = NULL; /* owned by tsm now */
    LLVMErrorRef e = LLVMOrcLLJITAddLLVMIRModuleWithRT(g_jit, c->rt, tsm);
    LLVMOrcDisposeThreadSafeContext(u->tsc); /* the module keeps its own reference */
    u->tsc = NULL;
    if (e) {
        char *m = LLVMGetErrorMessage(e);
        st = tgc_set_error(TGC_ERR_COMPILE, "tgc llvm: adding a module to the JIT: %s", m);
        LLVMDisposeErrorMessage(m);
        LLVMOrcReleaseResourceTracker(c->rt);
        free(c);
        return st;
    }
    *out = c;
    return TGC_OK;
}

void *tgc_llvm_code_lookup(tgc_llvm_code *c, const char *base)
{
    char name[256];
    snprintf(name, sizeof name, "%s_u%llu", base, (unsigned long long)c->id);
    LLVMOrcExecutorAddress addr = 0;
    LLVMErrorRef e = LLVMOrcLLJITLookup(g_jit, &addr, name);
    if (e) {
        char *m = LLVMGetErrorMessage(e);
        tgc_set_error(TGC_ERR_COMPILE, "tgc llvm: %s%s%s", m, c->diag[0] ? "; " : "", c->diag);
        LLVMDisposeErrorMessage(m);
        return NULL;
    }
    if (c->diag[0]) {
        tgc_set_error(TGC_ERR_COMPILE, "tgc llvm: %s", c->diag);
        return NULL;
    }
    return (void *)(uintptr_t)addr;
}

void tgc_llvm_code_free(tgc_llvm_code *c)
{
    if (!c)
        return;
    LLVMErrorRef e = LLVMOrcResourceTrackerRemove(c->rt);
    if (e)
        LLVMConsumeError(e);
    LLVMOrcReleaseResourceTracker(c->rt);
    free(c);
}
