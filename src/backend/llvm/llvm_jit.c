/* One ORC LLJIT per process, host-targeted; units of LLVM IR verified, optimized (O3),
 * compiled to an object file and added under their own resource trackers. See llvm_jit.h.
 *
 * Threads: everything up to the object file happens on the compiling thread with objects of
 * its own (context, module, target machine), so compiles of different units run in
 * parallel. Only the JIT itself is shared, and every call into it (adding an object,
 * looking a symbol up, which links the object, removing a unit) holds g_jit_lock.
 *
 * Why units are not added as IR modules: LLJIT compiles IR modules lazily, on the thread of
 * the first lookup, with ONE TargetMachine it owns (its default compiler, unless
 * LLJITBuilder's concurrent-compilation setting is on, which the C API cannot reach). A
 * TargetMachine is not safe to use from two threads at once: two threads looking up symbols
 * of different units at the same time ran LLVM's code generator concurrently on it and
 * crashed the process or produced corrupt objects ("JIT session error: ... extends past the
 * end of its containing block", "Missing definitions"). Each unit therefore runs its own
 * code generator with its own TargetMachine (LLVMTargetMachineEmitToMemoryBuffer), built
 * from the same settings the JIT would use, and hands the JIT a finished object.
 *
 * The object cache (llvm_jit.h) sits between the verified module and the JIT: the key is the
 * module's text under a header of everything else that shapes the object; the entry's code is
 * the object file's bytes, its data the resource tracker the object was added under (freed
 * with the entry when its last unit goes). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <llvm/Config/llvm-config.h>

#include "backend/llvm/llvm_jit.h"
#include "support/config_env.h"
#include "support/error.h"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static tgc_llvm_target g_target;
static LLVMTargetRef g_llvm_target;
static char g_triple[128];
static char g_data_layout[512];
static char g_init_error[512];
static LLVMOrcLLJITRef g_jit;
/* Serializes every use of g_jit after initialization (see the comment at the top). */
static pthread_mutex_t g_jit_lock = PTHREAD_MUTEX_INITIALIZER;

/* A unit's handle on its entry: the entry's data is the JIT resource tracker, the suffix its
 * functions' symbols end with. */
struct tgc_llvm_code {
    tgc_code_entry *e;
    char suffix[24];
};

/* What the unit names end with until finish renames them. */
#define UNIT_MARK ".tgcu"

static void rt_free(void *rt)
{
    pthread_mutex_lock(&g_jit_lock);
    LLVMErrorRef e = LLVMOrcResourceTrackerRemove(rt);
    if (e)
        LLVMConsumeError(e);
    LLVMOrcReleaseResourceTracker(rt);
    pthread_mutex_unlock(&g_jit_lock);
}

/* Entries go with their last unit (the code leaves the JIT); the disk keeps them for later
 * processes. */
static tgc_code_cache g_objs =
    TGC_CODE_CACHE_INIT("llvm", "o", "compiled LLVM objects are not cached on disk", 1, rt_free);

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
    const char *cpu_env = tgc_env_llvm_cpu();
    const char *feat_env = tgc_env_llvm_features();
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
    snprintf(g_data_layout, sizeof g_data_layout, "%s", LLVMOrcLLJITGetDataLayoutStr(g_jit));
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
    u->ctx = LLVMContextCreate();
    u->mod = LLVMModuleCreateWithNameInContext(name, u->ctx);
    u->b = LLVMCreateBuilderInContext(u->ctx);
    if (!u->ctx || !u->mod || !u->b) {
        tgc_llvm_unit_abort(u);
        return tgc_set_error(TGC_ERR_OOM, "tgc llvm: out of memory creating a module");
    }
    /* Written once by init_once before any unit exists, read-only afterwards. */
    LLVMSetTarget(u->mod, g_triple);
    LLVMSetDataLayout(u->mod, g_data_layout);
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
    if (u->ctx)
        LLVMContextDispose(u->ctx);
    u->b = NULL;
    u->mod = NULL;
    u->ctx = NULL;
}

void tgc_llvm_unit_name(const tgc_llvm_unit *u, const char *base, char *buf, size_t n)
{
    (void)u;
    snprintf(buf, n, "%s" UNIT_MARK, base);
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

#define DIAG_MAX 1024

static void diag_handler(LLVMDiagnosticInfoRef di, void *user)
{
    char *buf = user;
    if (LLVMGetDiagInfoSeverity(di) != LLVMDSError)
        return;
    char *d = LLVMGetDiagInfoDescription(di);
    size_t used = strlen(buf);
    if (used + 2 < DIAG_MAX)
        snprintf(buf + used, DIAG_MAX - used, "%s%s", used ? "; " : "", d);
    LLVMDisposeMessage(d);
}

/* Runs the unit's O3 pipeline and code generator with a TargetMachine of its own; on success
 * *obj holds the object file (obj NULL: optimization only). Error diagnostics LLVM raises on
 * the way land in diag (the context's handler writes them there) and fail the unit. */
static tgc_status optimize_and_emit(tgc_llvm_unit *u, const char *diag, char **ir_after,
                                    LLVMMemoryBufferRef *obj)
{
    LLVMTargetMachineRef tm = host_machine();
    if (!tm)
        return tgc_set_error(TGC_ERR_COMPILE, "tgc llvm: LLVM cannot target cpu '%s'",
                             g_target.cpu);
    LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
    LLVMPassBuilderOptionsSetLoopVectorization(opts, 1);
    LLVMPassBuilderOptionsSetSLPVectorization(opts, 1);
    LLVMErrorRef e = LLVMRunPasses(u->mod, "default<O3>", tm, opts);
    LLVMDisposePassBuilderOptions(opts);
    tgc_status st = TGC_OK;
    if (e) {
        char *m = LLVMGetErrorMessage(e);
        st = tgc_set_error(TGC_ERR_COMPILE, "tgc llvm: optimizing: %s", m);
        LLVMDisposeErrorMessage(m);
    } else if (diag[0]) {
        st = tgc_set_error(TGC_ERR_COMPILE, "tgc llvm: %s", diag);
    }
    if (st == TGC_OK && ir_after) {
        char *s = LLVMPrintModuleToString(u->mod);
        *ir_after = strdup(s);
        LLVMDisposeMessage(s);
    }
    char *msg = NULL;
    if (st == TGC_OK && obj &&
        LLVMTargetMachineEmitToMemoryBuffer(tm, u->mod, LLVMObjectFile, &msg, obj)) {
        st = tgc_set_error(TGC_ERR_COMPILE, "tgc llvm: generating code: %s", msg ? msg : "?");
        *obj = NULL;
    } else if (st == TGC_OK && diag[0]) {
        st = tgc_set_error(TGC_ERR_COMPILE, "tgc llvm: %s", diag);
    }
    LLVMDisposeMessage(msg);
    LLVMDisposeTargetMachine(tm);
    if (st != TGC_OK && obj && *obj) {
        LLVMDisposeMemoryBuffer(*obj);
        *obj = NULL;
    }
    return st;
}

/* The object cache's key of u's verified module (see the top of the file); malloc'd. */
static char *unit_key(tgc_llvm_unit *u)
{
    char *text = LLVMPrintModuleToString(u->mod);
    size_t tl = strlen(text);
    char head[4096 + 512];
    int hl =
        snprintf(head, sizeof head,
                 "tgc-llvm-object 1\nllvm %s\ntriple %s\ncpu %s\nfeatures %s\nvec_bits %d\n"
                 "passes default<O3> loop-vectorize slp-vectorize\n"
                 "codegen aggressive reloc-default code-model-jit-default object\n\n",
                 LLVM_VERSION_STRING, g_triple, g_target.cpu, g_target.features, g_target.vec_bits);
    char *key = malloc((size_t)hl + tl + 1);
    if (key) {
        memcpy(key, head, (size_t)hl);
        memcpy(key + hl, text, tl + 1);
    }
    LLVMDisposeMessage(text);
    return key;
}

/* Gives every function of u named by tgc_llvm_unit_name its symbol: the base and suffix. */
static tgc_status rename_functions(tgc_llvm_unit *u, const char *suffix)
{
    const size_t ml = strlen(UNIT_MARK);
    for (LLVMValueRef f = LLVMGetFirstFunction(u->mod); f; f = LLVMGetNextFunction(f)) {
        size_t n = 0;
        const char *name = LLVMGetValueName2(f, &n);
        if (n < ml || memcmp(name + n - ml, UNIT_MARK, ml) != 0)
            continue;
        char buf[512];
        if (n - ml + strlen(suffix) >= sizeof buf)
            return tgc_set_error(TGC_ERR_COMPILE, "tgc llvm: function name too long: %.*s", (int)n,
                                 name);
        snprintf(buf, sizeof buf, "%.*s%s", (int)(n - ml), name, suffix);
        LLVMSetValueName2(f, buf, strlen(buf));
    }
    return TGC_OK;
}

/* The disk files' tag: the CPU, as a file name word. */
static void cpu_tag(char *buf, size_t n)
{
    snprintf(buf, n, "%s", g_target.cpu[0] ? g_target.cpu : "cpu");
    for (char *p = buf; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '-'))
            *p = '_';
}

/* Adds object bytes (copied) to the JIT under a new resource tracker. */
static tgc_status jit_add(const void *obj, size_t size, LLVMOrcResourceTrackerRef *out)
{
    *out = NULL;
    LLVMMemoryBufferRef buf =
        LLVMCreateMemoryBufferWithMemoryRangeCopy(obj, size, "tgc-llvm-object");
    if (!buf)
        return tgc_set_error(TGC_ERR_OOM, "tgc llvm: out of memory for an object file");
    pthread_mutex_lock(&g_jit_lock);
    LLVMOrcResourceTrackerRef rt =
        LLVMOrcJITDylibCreateResourceTracker(LLVMOrcLLJITGetMainJITDylib(g_jit));
    LLVMErrorRef e = LLVMOrcLLJITAddObjectFileWithRT(g_jit, rt, buf); /* takes buf */
    if (e)
        LLVMOrcReleaseResourceTracker(rt);
    pthread_mutex_unlock(&g_jit_lock);
    if (e) {
        char *m = LLVMGetErrorMessage(e);
        tgc_status st =
            tgc_set_error(TGC_ERR_COMPILE, "tgc llvm: adding an object to the JIT: %s", m);
        LLVMDisposeErrorMessage(m);
        return st;
    }
    *out = rt;
    return TGC_OK;
}

/* The maker of entry e: its object from the cache directory, else optimized and generated now
 * (ir_after printed on the way when asked and not done yet), added to the JIT and published;
 * written to the directory when it was generated. On failure e is failed. */
static tgc_status make_object(tgc_llvm_unit *u, tgc_code_entry *e, const char *key,
                              const char *diag, char **ir_after)
{
    char tag[80];
    cpu_tag(tag, sizeof tag);
    void *blob = NULL;
    size_t size = 0;
    int from_disk = !ir_after && tgc_code_disk_load(&g_objs, u->cache_dir, tag, key, &blob, &size);
    tgc_status st = TGC_OK;
    if (!from_disk) {
        LLVMMemoryBufferRef obj = NULL;
        st = optimize_and_emit(u, diag, ir_after, &obj);
        if (st == TGC_OK) {
            size = LLVMGetBufferSize(obj);
            blob = malloc(size ? size : 1);
            if (blob)
                memcpy(blob, LLVMGetBufferStart(obj), size);
            else
                st = tgc_set_error(TGC_ERR_OOM, "tgc llvm: out of memory for an object file");
            LLVMDisposeMemoryBuffer(obj);
        }
    }
    LLVMOrcResourceTrackerRef rt = NULL;
    if (st == TGC_OK)
        st = jit_add(blob, size, &rt);
    if (st != TGC_OK) {
        free(blob);
        tgc_code_cache_fail(&g_objs, e, st);
        return st;
    }
    if (!from_disk)
        tgc_code_disk_store(&g_objs, u->cache_dir, tag, key, blob, size);
    tgc_code_cache_publish(&g_objs, e, blob, size, rt, from_disk);
    return TGC_OK;
}

tgc_status tgc_llvm_unit_finish(tgc_llvm_unit *u, tgc_llvm_code **out, char **ir_before,
                                char **ir_after)
{
    *out = NULL;
    if (ir_before)
        *ir_before = NULL;
    if (ir_after)
        *ir_after = NULL;
    tgc_llvm_code *c = calloc(1, sizeof *c);
    if (!c) {
        tgc_llvm_unit_abort(u);
        return tgc_set_error(TGC_ERR_OOM, "tgc llvm: out of memory");
    }
    char diag[DIAG_MAX] = "";
    LLVMContextSetDiagnosticHandler(u->ctx, diag_handler, diag);
    LLVMDisposeBuilder(u->b);
    u->b = NULL;
    tgc_status st = tgc_llvm_verify(u->mod);
    char *key = st == TGC_OK ? unit_key(u) : NULL;
    if (st == TGC_OK && !key)
        st = tgc_set_error(TGC_ERR_OOM, "tgc llvm: out of memory for a module's cache key");
    if (st == TGC_OK) {
        uint64_t h = tgc_code_hash(TGC_CODE_HASH_SEED, key, strlen(key));
        snprintf(c->suffix, sizeof c->suffix, "_h%016llx", (unsigned long long)h);
        st = rename_functions(u, c->suffix);
    }
    if (st == TGC_OK && ir_before) {
        char *s = LLVMPrintModuleToString(u->mod);
        *ir_before = strdup(s);
        LLVMDisposeMessage(s);
    }
    int make = 0;
    if (st == TGC_OK)
        st = tgc_code_cache_acquire(&g_objs, key, &c->e, &make);
    if (st == TGC_OK && make) {
        st = make_object(u, c->e, key, diag, ir_after);
    } else if (st == TGC_OK) {
        /* made (or being made) by an equal unit: only the optimized text, when asked */
        if (ir_after)
            st = optimize_and_emit(u, diag, ir_after, NULL);
        tgc_status w = tgc_code_cache_wait(&g_objs, c->e);
        if (w != TGC_OK)
            st = w; /* the entry has gone */
        else if (st != TGC_OK)
            tgc_code_cache_release(&g_objs, c->e);
    }
    free(key);
    tgc_llvm_unit_abort(u); /* the object file is all the JIT needs */
    if (st != TGC_OK) {
        if (ir_before) {
            free(*ir_before);
            *ir_before = NULL;
        }
        if (ir_after) {
            free(*ir_after);
            *ir_after = NULL;
        }
        free(c);
        return st;
    }
    *out = c;
    return TGC_OK;
}

void *tgc_llvm_code_lookup(tgc_llvm_code *c, const char *base)
{
    char name[256];
    snprintf(name, sizeof name, "%s%s", base, c->suffix);
    LLVMOrcExecutorAddress addr = 0;
    /* The first lookup of a unit links its object into memory. */
    pthread_mutex_lock(&g_jit_lock);
    LLVMErrorRef e = LLVMOrcLLJITLookup(g_jit, &addr, name);
    pthread_mutex_unlock(&g_jit_lock);
    if (e) {
        char *m = LLVMGetErrorMessage(e);
        tgc_set_error(TGC_ERR_COMPILE, "tgc llvm: %s", m);
        LLVMDisposeErrorMessage(m);
        return NULL;
    }
    return (void *)(uintptr_t)addr;
}

void tgc_llvm_code_free(tgc_llvm_code *c)
{
    if (!c)
        return;
    tgc_code_cache_release(&g_objs, c->e); /* the last unit of the key frees the JIT's copy */
    free(c);
}

void tgc_llvm_object_cache_stats(tgc_code_cache_stats *s)
{
    tgc_code_cache_stats_get(&g_objs, s);
}
