/* Autotuning of the CUDA templates: candidates, remembered choices, timing (see
 * cuda_autotune.h). */
#include "backend/cuda/cuda_autotune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/code_cache.h"
#include "backend/cuda/cuda_program.h"
#include "support/error.h"
#include "support/strbuf.h"
#include "tgc/tgc.h"

/* ---- candidates ---- */

static int add(tgc_cuda_tune_cand *out, int n, int max, const tgc_cuda_tpl *t, int tma)
{
    if (n >= max)
        return n;
    for (int i = 0; i < n; i++) /* the same tile twice is measured once */
        if (out[i].tma == tma && out[i].force.bm == t->bm && out[i].force.bn == t->bn &&
            out[i].force.bk == t->bk && out[i].force.wg == t->wg && out[i].force.wm == t->wm &&
            out[i].force.wn == t->wn && out[i].force.stages == t->stages &&
            out[i].force.tma_bn == t->tma_bn && out[i].force.tma_stages == t->tma_stages)
            return n;
    out[n].force = *t;
    out[n].tma = tma;
    return n + 1;
}

/* One block tile: bm x bn with warps wm x wn (mma.sync), or wg warpgroups wn of them along
 * N (wgmma). */
typedef struct tile {
    int bm, bn, wg, wm, wn;
} tile;

int tgc_cuda_tune_candidates(const tgc_cuda_tpl *chosen, tgc_autotune level,
                             tgc_cuda_tune_cand *out, int max)
{
    if (max < 1)
        return 0;
    const tgc_cuda_tpl c = *chosen;
    int n = add(out, 0, max, &c, c.tma_bn != 0);
    if (level == TGC_AUTOTUNE_OFF)
        return n;
    const int full = level == TGC_AUTOTUNE_FULL;
    tgc_cuda_tpl t = c;
    t.tma_bn = t.tma_stages = 0; /* the block tile alone; the TMA entry as chosen */
    if (c.mode == TGC_CUDA_TPL_SIMT) {
        static const int bks[2] = {8, 16};
        for (int b = 0; b < 2; b++)
            for (int st = full ? 2 : 3; st <= (full ? 6 : 4); st++) {
                t.bk = bks[b];
                t.stages = st;
                n = add(out, n, max, &t, 0);
            }
        return n;
    }
    /* wgmma: 64 x BN slabs per warpgroup; mma.sync: warp tiles of 32 or 64 */
    static const tile wgt[] = {
        {128, 128, 2, 0, 1}, {128, 256, 2, 0, 1}, {64, 128, 1, 0, 1},
        {64, 256, 1, 0, 1},  {64, 256, 2, 0, 2},  {128, 64, 2, 0, 1},
    };
    static const tile mst[] = {
        {128, 128, 0, 2, 4}, {128, 256, 0, 2, 4}, {64, 128, 0, 1, 4},
        {128, 64, 0, 2, 2},  {64, 64, 0, 2, 2},
    };
    const tile *ts = c.wg ? wgt : mst;
    const int nts = c.wg ? (int)(sizeof wgt / sizeof *wgt) : (int)(sizeof mst / sizeof *mst);
    for (int i = 0; i < nts; i++) {
        t = c;
        t.tma_bn = t.tma_stages = 0;
        t.bm = ts[i].bm;
        t.bn = ts[i].bn;
        t.wg = ts[i].wg;
        t.wm = ts[i].wm;
        t.wn = ts[i].wn;
        for (int ds = full ? -1 : 0; ds <= (full ? 1 : 0); ds++) {
            t.stages = c.stages + ds;
            n = add(out, n, max, &t, 0); /* NAME alone: the block tile measured */
        }
    }
    if (c.tma_bn && c.wg) { /* the TMA entry's widths beside a wgmma NAME as chosen */
        static const int bns[3] = {128, 192, 256};
        for (int i = 0; i < 3; i++) {
            t = c;
            t.tma_bn = bns[i];
            t.tma_stages = 0; /* as many as fit */
            n = add(out, n, max, &t, 1);
        }
    }
    return n;
}

void tgc_cuda_tune_format(const tgc_cuda_tune_cand *c, char *buf, size_t n)
{
    const tgc_cuda_tpl *t = &c->force;
    snprintf(buf, n, "%d %d %d %d %d %d %d %d %d %d", t->bm, t->bn, t->bk, t->wg, t->wm, t->wn,
             t->stages, t->tma_bn, t->tma_stages, c->tma);
}

int tgc_cuda_tune_parse(const char *text, size_t len, tgc_cuda_tune_cand *c)
{
    char buf[128];
    if (len == 0 || len >= sizeof buf)
        return 0;
    memcpy(buf, text, len);
    buf[len] = 0;
    int v[10], used = 0;
    if (sscanf(buf, "%d %d %d %d %d %d %d %d %d %d%n", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
               &v[6], &v[7], &v[8], &v[9], &used) != 10 ||
        used != (int)len)
        return 0;
    for (int i = 0; i < 10; i++)
        if (v[i] < 0 || v[i] > 4096)
            return 0;
    memset(c, 0, sizeof *c);
    c->force.bm = v[0];
    c->force.bn = v[1];
    c->force.bk = v[2];
    c->force.wg = v[3];
    c->force.wm = v[4];
    c->force.wn = v[5];
    c->force.stages = v[6];
    c->force.tma_bn = v[7];
    c->force.tma_stages = v[8];
    c->tma = v[9] != 0;
    return 1;
}

/* ---- remembered choices ---- */

static tgc_code_cache tunes = TGC_CODE_CACHE_INIT(
    "cuda", "tune", "autotuning choices are measured again by each process", 0, NULL);

char *tgc_cuda_tune_key(const char *text, int sm, int dev, tgc_autotune level)
{
    char *pk = tgc_cuda_program_key(text, sm);
    if (!pk)
        return NULL;
    const tgc_cuda_props *pr = tgc_cuda_props_of(dev);
    const tgc_cuda_driver *drv = tgc_cuda_drv();
    tgc_strbuf sb = {0};
    tgc_sb_printf(&sb, "tgc-cuda-tune 1\nlevel %d\ndevice %s\ndriver %d\nlibrary %s\n", (int)level,
                  pr ? pr->name : "?", drv ? drv->version : 0, tgc_version());
    tgc_sb_puts(&sb, pk);
    free(pk);
    char *key = tgc_sb_take(&sb);
    if (!key)
        tgc_set_error(TGC_ERR_OOM, "tgc cuda: out of memory for an autotuning key");
    return key;
}

static void tag_of(const char *key, char *tag, size_t n)
{
    const char *s = strstr(key, "\nsm ");
    snprintf(tag, n, "sm%d", s ? atoi(s + 4) : 0);
}

int tgc_cuda_tune_recall(const char *key, const char *dir, tgc_cuda_tune_cand *c)
{
    tgc_code_entry *e;
    int make;
    if (tgc_code_cache_acquire(&tunes, key, &e, &make) != TGC_OK) {
        tgc_clear_error();
        return 0;
    }
    if (make) {
        char tag[16];
        tag_of(key, tag, sizeof tag);
        void *blob = NULL;
        size_t size = 0;
        if (dir && tgc_code_disk_load(&tunes, dir, tag, key, &blob, &size)) {
            if (tgc_cuda_tune_parse(blob, size, c)) {
                tgc_code_cache_publish(&tunes, e, blob, size, NULL, 1);
                tgc_code_cache_release(&tunes, e);
                return 1;
            }
            free(blob);
        }
        /* not known: the caller measures and remembers; this entry goes */
        tgc_code_cache_fail(&tunes, e, TGC_ERR_UNSUPPORTED);
        tgc_clear_error();
        return 0;
    }
    if (tgc_code_cache_wait(&tunes, e) != TGC_OK) {
        tgc_clear_error();
        return 0;
    }
    int ok = tgc_cuda_tune_parse(e->blob, e->size, c);
    tgc_code_cache_release(&tunes, e);
    return ok;
}

void tgc_cuda_tune_remember(const char *key, const char *dir, const tgc_cuda_tune_cand *c)
{
    char line[96];
    tgc_cuda_tune_format(c, line, sizeof line);
    size_t len = strlen(line);
    tgc_code_entry *e;
    int make;
    if (tgc_code_cache_acquire(&tunes, key, &e, &make) != TGC_OK) {
        tgc_clear_error();
        return;
    }
    if (make) {
        char *blob = malloc(len);
        if (!blob) {
            tgc_code_cache_fail(&tunes, e, TGC_ERR_OOM);
            tgc_clear_error();
            return;
        }
        memcpy(blob, line, len);
        tgc_code_cache_publish(&tunes, e, blob, len, NULL, 0);
    } else if (tgc_code_cache_wait(&tunes, e) != TGC_OK) {
        tgc_clear_error();
        return; /* another thread's entry failed: nothing kept */
    }
    tgc_code_cache_release(&tunes, e);
    if (dir) {
        char tag[16];
        tag_of(key, tag, sizeof tag);
        tgc_code_disk_store(&tunes, dir, tag, key, line, len);
    }
}

/* ---- timing ---- */

tgc_status tgc_cuda_tune_time(CUfunction fn, const unsigned grid[3], const unsigned block[3],
                              unsigned smem, void **params, CUstream s, double *us)
{
    const tgc_cuda_driver *d = tgc_cuda_drv();
    CUevent e0 = NULL, e1 = NULL;
    CUresult r = d->cuEventCreate(&e0, CU_EVENT_DEFAULT);
    if (r == CUDA_SUCCESS)
        r = d->cuEventCreate(&e1, CU_EVENT_DEFAULT);
    int reps = 2;
    float ms = 0;
    /* two warm-up launches, timed: they say how many launches fill about a millisecond */
    for (int round = 0; round < 2 && r == CUDA_SUCCESS; round++) {
        r = d->cuEventRecord(e0, s);
        for (int i = 0; i < reps && r == CUDA_SUCCESS; i++)
            r = d->cuLaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1], block[2], smem,
                                  s, params, NULL);
        if (r == CUDA_SUCCESS)
            r = d->cuEventRecord(e1, s);
        if (r == CUDA_SUCCESS)
            r = d->cuEventSynchronize(e1);
        if (r == CUDA_SUCCESS)
            r = d->cuEventElapsedTime(&ms, e0, e1);
        if (r == CUDA_SUCCESS && round == 0) {
            double per = ms / reps;
            reps = per > 0 ? (int)(1.0 / per) : 100;
            reps = reps < 3 ? 3 : reps > 200 ? 200 : reps;
        }
    }
    if (e0)
        d->cuEventDestroy(e0);
    if (e1)
        d->cuEventDestroy(e1);
    if (r != CUDA_SUCCESS)
        return tgc_cuda_error(r, "tgc cuda: timing an autotuning candidate");
    *us = (double)ms * 1000.0 / reps;
    return TGC_OK;
}
