/* The environment switches that are not tgc_config fields, read by config_env.c, the only
 * file of src/ that reads the environment (tgc_config_default is in tgc/config.h). runtime/,
 * which includes nothing of src/, reads its one variable itself (TGC_STORAGE_CACHE_BYTES,
 * runtime/host_alloc.c). */
#ifndef TGC_SUPPORT_CONFIG_ENV_H
#define TGC_SUPPORT_CONFIG_ENV_H

/* 1 when eager ops must run on interp, never on a compiled backend's kernels: TGC_EAGER=interp,
 * or TGC_BACKEND=interp (interp is then the engine of everything). */
int tgc_env_eager_interp(void);
/* 1 with TGC_PROFILE set: the executor prints one line per step and call on stderr (a
 * debugging aid). */
int tgc_env_profile(void);
/* TGC_LLVM_CPU / TGC_LLVM_FEATURES: the LLVM backend's target CPU and features instead of the
 * host's; NULL when unset. */
const char *tgc_env_llvm_cpu(void);
const char *tgc_env_llvm_features(void);

#endif
