/* The environment switches that are not tgc_config fields, read once per process by
 * config_env.c (the only file that reads the environment; tgc_config_default is in
 * tgc/config.h). */
#ifndef TGC_SUPPORT_CONFIG_ENV_H
#define TGC_SUPPORT_CONFIG_ENV_H

/* 1 when eager ops must run on interp, never on a compiled backend's kernels: TGC_EAGER=interp,
 * or TGC_BACKEND=interp (interp is then the engine of everything). */
int tgc_env_eager_interp(void);
/* 1 with TGC_PROFILE set: the executor prints one line per step and call on stderr (a
 * debugging aid). */
int tgc_env_profile(void);

#endif
