/* libtgc — compile configuration.
 *
 * Always start from tgc_config_default(), which fills the defaults and then applies the
 * TGC_* environment variables (the only place the library reads them):
 *   TGC_LOG=recompiles,guards,graph,kernels,dynamic,perf,all   log channels (stderr or log_fn)
 *   TGC_BACKEND=auto|llvm|cuda|eager|interp
 *   TGC_CACHE_SIZE_LIMIT=N, TGC_ACCUMULATED_CACHE_SIZE_LIMIT=N, TGC_DYNAMIC=auto|always|never
 *   TGC_MATMUL_PRECISION=highest|high|medium (cfg.matmul_precision)
 *   TGC_DUMP_DIR=dir (graph IR text and DOT per variant; with LLVM also kernel IR and LLVM IR
 *   before and after O3), TGC_CACHE_DIR=dir, TGC_NUM_THREADS=N
 * A value that does not parse (TGC_CACHE_SIZE_LIMIT=abc, TGC_DYNAMIC=sometimes, an unknown
 * TGC_LOG channel, ...) is ignored, with one warning per variable and value (through
 * tgc_set_log_fn's callback, else on stderr) that names the variable, the value and what is
 * accepted; the default stands in for it.
 * Read elsewhere (no config field): TGC_LLVM_CPU / TGC_LLVM_FEATURES (target override),
 * TGC_EAGER=interp (eager ops stay on interp), TGC_STORAGE_CACHE_BYTES (cache of freed large
 * buffers), TGC_PROFILE=1 (per-step times of compiled calls, channel TGC_LOG_PROFILE),
 * TGC_CUDA_DRIVER=path (the CUDA driver library opened instead of libcuda.so.1; read once by
 * runtime/cuda.c when CUDA is first used).
 * A dump_dir or cache_dir that does not exist is created (with its parents, mode 0700) by
 * tgc_compile; one that cannot be is named once, with the reason, as a warning.
 *
 * Structs that grow (ABI). tgc_config and tgc_dist_opts begin with struct_size, which their
 * _default() functions set to sizeof as the caller's header declares it; every other struct
 * the library reads or writes through a pointer (tgc_stats, tgc_cuda_memstats, the optimizer,
 * data-parallel, conv and pool options) reaches it through an inline function of its header
 * that passes sizeof to the exported *_sized entry point. The library reads and writes only
 * that many bytes:
 *  - a struct from an older, smaller header is accepted: the fields it lacks take their
 *    defaults (for tgc_config those of tgc_config_default(), environment included), and a
 *    struct the library fills (the defaults, statistics) is written only as far as it goes;
 *  - a struct from a newer, larger header is accepted when the bytes this library does not
 *    know are all zero (the newer fields at their defaults), else TGC_ERR_UNSUPPORTED; a
 *    struct the library fills gets zeros there;
 *  - a size below the end of the struct's first field (struct_size 0: a struct that did not
 *    start from its _default()) is TGC_ERR_INVALID_ARG.
 * Fields are only ever added at the end; any other change of a public struct or signature
 * changes libtgc.so's SOVERSION. */
#ifndef TGC_CONFIG_H
#define TGC_CONFIG_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tgc_backend_kind {
    TGC_BACKEND_AUTO = 0, /* the best available: LLVM on CPU (when built with LLVM), else interp */
    TGC_BACKEND_LLVM,
    TGC_BACKEND_CUDA,
    TGC_BACKEND_EAGER, /* no graph: every call runs the function eagerly */
    TGC_BACKEND_INTERP /* the reference interpreter over the graph IR */
} tgc_backend_kind;

typedef enum tgc_mode {
    TGC_MODE_DEFAULT = 0,
    TGC_MODE_REDUCE_OVERHEAD, /* CUDA graphs */
    TGC_MODE_MAX_AUTOTUNE     /* CUDA graphs and autotuning (FULL unless cfg.autotune says) */
} tgc_mode;

/* How float32 matrix products (matmul, linear, conv2d, attention) are computed on the GPU;
 * part of the cache key. The CPU always computes HIGHEST. */
typedef enum tgc_matmul_precision {
    TGC_PRECISION_HIGHEST = 0, /* true fp32 (fp32 FMA): PyTorch's default */
    TGC_PRECISION_HIGH,        /* TF32 tensor cores, fp32 accumulation
                                * (torch.set_float32_matmul_precision('high')) */
    TGC_PRECISION_MEDIUM       /* bf16 tensor cores, fp32 accumulation ('medium') */
} tgc_matmul_precision;

/* Autotuning of the GPU's GEMM and convolution kernels: which block tile (and on Hopper
 * whether the warp-specialized TMA kernel) each matrix product of a variant runs with. OFF
 * takes the tile a heuristic picks from the shapes; FAST and FULL measure candidates on the
 * device when the variant compiles (a few per kernel; FULL adds stage counts) and keep the
 * fastest. Measuring runs on scratch buffers, never on the function's tensors. Choices are
 * remembered by the kernel's text for the process and, with cache_dir, on disk, so a shape
 * is measured once. Kernels with symbolic sizes keep the heuristic's tile. A tile does not
 * change the order in which an element's products are summed, so results do not depend on
 * the choice, except for small problems whose kernels split k into a number of parts that
 * depends on the tile (the last bits then differ, as between any two split counts). Not part
 * of the cache key. TGC_AUTOTUNE=off|fast|full; the mode MAX_AUTOTUNE implies FULL when
 * this is OFF. */
typedef enum tgc_autotune {
    TGC_AUTOTUNE_OFF = 0,
    TGC_AUTOTUNE_FAST,
    TGC_AUTOTUNE_FULL
} tgc_autotune;

typedef enum tgc_on_cache_limit {
    TGC_ON_LIMIT_FALLBACK_EAGER = 0, /* one warning, then eager for calls that miss */
    TGC_ON_LIMIT_ERROR               /* tgc_call returns TGC_ERR_CACHE_LIMIT */
} tgc_on_cache_limit;

typedef enum tgc_dynamic {
    TGC_DYNAMIC_AUTO = 0, /* static first; a size that changes becomes symbolic */
    TGC_DYNAMIC_ALWAYS,   /* every size symbolic (0 and 1 stay specialized) */
    TGC_DYNAMIC_NEVER     /* every size specialized, even tgc_mark_dynamic ones */
} tgc_dynamic;

/* Log channels (bit flags). */
enum {
    TGC_LOG_RECOMPILES = 1u << 0,
    TGC_LOG_GUARDS = 1u << 1,
    TGC_LOG_GRAPH = 1u << 2,
    TGC_LOG_DYNAMIC = 1u << 3,
    TGC_LOG_PERF = 1u << 4,
    TGC_LOG_KERNELS = 1u << 5,
    /* Not a switch: the channel of the per-step lines of TGC_PROFILE=1, which the
     * environment turns on (cfg.log does not filter them). */
    TGC_LOG_PROFILE = 1u << 6,
    TGC_LOG_ALL = 0xffffu
};

/* Receives every message of an enabled channel, and every warning (channel 0). message is
 * one line or several, without a final newline, valid during the call only. */
typedef void (*tgc_log_fn)(unsigned channel, const char *message, void *user);

/* The process-wide log callback: every message the library emits goes to it, messages of
 * no function included (warnings about the TGC_* environment, TGC_PROFILE lines, a root
 * scope that grows without bound), unless it belongs to a function compiled with a config
 * whose log_fn is set: cfg.log_fn takes precedence for that function's messages. NULL
 * (the default): stderr, one message per line. The library never writes to stdout or
 * stderr otherwise. Callable at any time from any thread; the callback may be called from
 * any thread (one that compiles, calls or runs eager ops), concurrently, so it must be
 * thread-safe; it may call tgc_set_log_fn but should not call other libtgc functions.
 * A message being delivered while the callback is replaced may still reach the old one. */
TGC_API void tgc_set_log_fn(tgc_log_fn fn, void *user);

typedef struct tgc_config {
    size_t struct_size; /* sizeof(tgc_config), set by tgc_config_default */
    tgc_backend_kind backend;
    tgc_mode mode;
    int cache_size_limit;             /* variants per function; default 8 */
    int accumulated_cache_size_limit; /* variants per process; default 256 */
    tgc_on_cache_limit on_cache_limit;
    tgc_dynamic dynamic;
    int guard_module_identity; /* guard on the module object itself, not its structure */
    int fullgraph;             /* a graph break is TGC_ERR_GRAPH_BREAK, not an eager call */
    const char *cache_dir;     /* persistent compile cache (NULL: none); copied */
    const char *dump_dir;      /* per-variant IR dumps (NULL: none); copied */
    int num_threads;           /* threads of compiled kernels; 0: all cores */
    unsigned log;              /* TGC_LOG_* channels */
    tgc_log_fn log_fn;         /* NULL: tgc_set_log_fn's callback, else stderr */
    void *log_user;
    tgc_matmul_precision matmul_precision; /* TGC_MATMUL_PRECISION=highest|high|medium */
    /* CUDA: the stream (a CUstream) a compiled function launches on; NULL: the calling
     * thread's stream for the inputs' device (tgc_cuda_set_stream, else its own). */
    void *cuda_stream;
    /* Where a call runs when nothing gives it a device: a function called without tensor
     * inputs whose module (if any) holds no tensor (it only creates tensors). Ignored
     * otherwise: a call runs on its inputs' device, else its module's. Tensors the function
     * creates must name this device. Default tgc_cpu(); tgc_cuda(i) runs it on GPU i. */
    tgc_device device;
    tgc_autotune autotune; /* default OFF (TGC_AUTOTUNE) */
} tgc_config;

/* Fills *cfg (size bytes: sizeof(tgc_config) of the caller's header) with the defaults,
 * then the TGC_* environment, and sets struct_size = size. NULL cfg or a size below the end
 * of backend: TGC_ERR_INVALID_ARG, nothing written. Call tgc_config_default() instead. */
TGC_API tgc_status tgc_config_default_sized(tgc_config *cfg, size_t size);
static inline tgc_config tgc_config_default(void)
{
    tgc_config c;
    tgc_config_default_sized(&c, sizeof c);
    return c;
}

#ifdef __cplusplus
}
#endif
#endif
