/* The environment switches that are not tgc_config fields, read by config_env.c, the only
 * file of src/ that reads the environment (tgc_config_default is in tgc/config.h). runtime/,
 * which includes nothing of src/, reads its one variable itself (TGC_STORAGE_CACHE_BYTES,
 * runtime/host_alloc.c). */
#ifndef TGC_SUPPORT_CONFIG_ENV_H
#define TGC_SUPPORT_CONFIG_ENV_H

/* 1 when eager ops must run on interp, never on a compiled backend's kernels: TGC_EAGER=interp,
 * or TGC_BACKEND=interp (interp is then the engine of everything). */
int tgc_env_eager_interp(void);
/* 1 with TGC_PROFILE set: the executor logs one line per step and call (TGC_LOG_PROFILE; a
 * debugging aid). */
int tgc_env_profile(void);
/* TGC_CUDA_TMA: 1 (the default) when sm_90a GEMM programs get the warp-specialized TMA entry,
 * 0 when the variable is 0. */
int tgc_env_cuda_tma(void);
/* TGC_CHANNELS_LAST: 1 (the default) when GPU variants keep activations between convolutions
 * channels-last, 0 when the variable is 0. */
int tgc_env_channels_last(void);
/* TGC_CHANNELS_LAST_GRAD: 1 when the variable is 1 (and TGC_CHANNELS_LAST is not 0): the
 * activations that conv gradients read may be channels-last too (a training step's), on
 * targets whose conv-gradient kernels read them in place; 0 (the default) keeps those NCHW. */
int tgc_env_channels_last_grad(void);
/* TGC_CUDA_BATCH: 1 (the default) when CUDA variants launch independent pointwise kernels as
 * batches (backend/batch.c), 0 when the variable is 0 (each kernel launched on its own). */
int tgc_env_cuda_batch(void);
/* TGC_LLVM_CPU / TGC_LLVM_FEATURES: the LLVM backend's target CPU and features instead of the
 * host's; NULL when unset. */
const char *tgc_env_llvm_cpu(void);
const char *tgc_env_llvm_features(void);

/* Process groups (include/tgc/dist.h): the rank, the world size and the local rank the
 * launcher gave this process, from the first of these that is set:
 *   rank:       TGC_RANK, RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID
 *   world size: TGC_WORLD_SIZE, WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS
 *   local rank: TGC_LOCAL_RANK, LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID
 * Each returns the value (>= 0), -1 when none is set, -2 when the first set one is not a
 * non-negative decimal integer (*name, when not NULL, is the variable it read). */
int tgc_env_dist_rank(const char **name);
int tgc_env_dist_world(const char **name);
int tgc_env_dist_local_rank(const char **name);
/* TGC_DIST_ID (the unique id as text) and TGC_DIST_ID_FILE; NULL when unset or empty. */
const char *tgc_env_dist_id(void);
const char *tgc_env_dist_id_file(void);

#endif
