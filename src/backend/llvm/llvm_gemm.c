/* Emits the f32 GEMM / conv2d micro-kernel, packing routines and epilogue functions in LLVM
 * IR (see llvm_gemm.h). The driver that blocks, packs and threads around them is
 * runtime/gemm.c.
 *
 * Micro-kernel: MR x NV accumulators of <VL x float> live in registers through the k loop
 * (unrolled KU times; the A element is broadcast, the B row is NV vector loads from the packed
 * panel). Afterwards they are spilled to a small stack tile and written back row by row in a
 * runtime loop, so the partial-tile and accumulate variants cost a few blocks each instead of
 * MR unrolled copies: the spill is ~2*MR*NV memory operations against kc*MR*NV FMAs. */
#include <stdio.h>
#include <string.h>

#include "backend/llvm/llvm_gemm.h"
#include "support/error.h"

typedef struct gemm_em {
    tgc_llvm_unit *u;
    LLVMBuilderRef b;
    int vl, mr, nv, nr, ku;
    unsigned valign; /* alignment of vectors in packed panels (buffers are 64-byte aligned) */
    LLVMTypeRef tv, tvi32, tvi1;
    LLVMValueRef fn;
} gemm_em;

static LLVMValueRef c64(gemm_em *e, int64_t v)
{
    return LLVMConstInt(e->u->t_i64, (unsigned long long)v, 1);
}
static LLVMValueRef c32(gemm_em *e, int64_t v)
{
    return LLVMConstInt(e->u->t_i32, (unsigned long long)v, 1);
}

static LLVMBasicBlockRef new_block(gemm_em *e, const char *name)
{
    return LLVMAppendBasicBlockInContext(e->u->ctx, e->fn, name);
}

static void at(gemm_em *e, LLVMBasicBlockRef bb)
{
    LLVMPositionBuilderAtEnd(e->b, bb);
}

static LLVMValueRef gep_f32(gemm_em *e, LLVMValueRef p, LLVMValueRef idx)
{
    return LLVMBuildGEP2(e->b, e->u->t_f32, p, &idx, 1, "");
}

static LLVMValueRef load_aligned(gemm_em *e, LLVMTypeRef t, LLVMValueRef p, unsigned align)
{
    LLVMValueRef v = LLVMBuildLoad2(e->b, t, p, "");
    LLVMSetAlignment(v, align);
    return v;
}

static void store_aligned(gemm_em *e, LLVMValueRef v, LLVMValueRef p, unsigned align)
{
    LLVMSetAlignment(LLVMBuildStore(e->b, v, p), align);
}

static LLVMValueRef call_intr(gemm_em *e, const char *name, LLVMTypeRef *ov, int nov,
                              LLVMValueRef *args, unsigned nargs)
{
    LLVMTypeRef ft;
    LLVMValueRef f = tgc_llvm_intrinsic(e->u, name, ov, nov, &ft);
    return LLVMBuildCall2(e->b, ft, f, args, nargs, "");
}

static LLVMValueRef masked_load(gemm_em *e, LLVMValueRef p, LLVMValueRef mask)
{
    LLVMTypeRef ov[2] = {e->tv, e->u->t_ptr};
    LLVMValueRef args[4] = {p, c32(e, 4), mask, LLVMConstNull(e->tv)};
    return call_intr(e, "llvm.masked.load", ov, 2, args, 4);
}

static void masked_store(gemm_em *e, LLVMValueRef v, LLVMValueRef p, LLVMValueRef mask)
{
    LLVMTypeRef ov[2] = {e->tv, e->u->t_ptr};
    LLVMValueRef args[4] = {v, p, c32(e, 4), mask};
    call_intr(e, "llvm.masked.store", ov, 2, args, 4);
}

static LLVMValueRef masked_gather(gemm_em *e, LLVMValueRef ptrs, LLVMValueRef mask)
{
    LLVMTypeRef ov[2] = {e->tv, LLVMVectorType(e->u->t_ptr, (unsigned)e->vl)};
    LLVMValueRef args[4] = {ptrs, c32(e, 4), mask, LLVMConstNull(e->tv)};
    return call_intr(e, "llvm.masked.gather", ov, 2, args, 4);
}

static LLVMValueRef fmuladd(gemm_em *e, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
    LLVMValueRef args[3] = {a, b, c};
    return call_intr(e, "llvm.fmuladd", &e->tv, 1, args, 3);
}

static LLVMValueRef splat(gemm_em *e, LLVMValueRef s, LLVMTypeRef vt)
{
    LLVMValueRef v = LLVMBuildInsertElement(e->b, LLVMGetUndef(vt), s, c32(e, 0), "");
    LLVMTypeRef mt = LLVMVectorType(e->u->t_i32, (unsigned)e->vl);
    return LLVMBuildShuffleVector(e->b, v, LLVMGetUndef(vt), LLVMConstNull(mt), "");
}

/* <base, base+1, ..., base+VL-1> as i32 lanes */
static LLVMValueRef iota(gemm_em *e, int64_t base)
{
    LLVMValueRef l[64];
    for (int i = 0; i < e->vl; i++)
        l[i] = c32(e, base + i);
    return LLVMConstVector(l, (unsigned)e->vl);
}

static LLVMValueRef smin64(gemm_em *e, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, a, b, ""), a, b, "");
}

static LLVMValueRef phi(gemm_em *e, LLVMTypeRef t)
{
    return LLVMBuildPhi(e->b, t, "");
}

static void incoming(LLVMValueRef phi, LLVMValueRef v, LLVMBasicBlockRef bb)
{
    LLVMAddIncoming(phi, &v, &bb, 1);
}

/* A counted loop `for (i = 0; i < n; i++)` whose body the caller emits between loop_begin and
 * loop_end. n must be > 0 or the caller must have guarded it. */
typedef struct em_loop {
    LLVMBasicBlockRef body, exit;
    LLVMValueRef i, n;
} em_loop;

static void loop_begin(gemm_em *e, em_loop *l, LLVMValueRef n, const char *name)
{
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(e->b);
    l->body = new_block(e, name);
    l->exit = new_block(e, "exit");
    l->n = n;
    LLVMBuildCondBr(e->b, LLVMBuildICmp(e->b, LLVMIntSGT, n, c64(e, 0), ""), l->body, l->exit);
    at(e, l->body);
    l->i = phi(e, e->u->t_i64);
    incoming(l->i, c64(e, 0), pre);
}

static void loop_end(gemm_em *e, em_loop *l)
{
    LLVMValueRef next = LLVMBuildAdd(e->b, l->i, c64(e, 1), "");
    incoming(l->i, next, LLVMGetInsertBlock(e->b));
    LLVMBuildCondBr(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, next, l->n, ""), l->body, l->exit);
    at(e, l->exit);
}

static LLVMValueRef begin_fn(gemm_em *e, const char *base, LLVMTypeRef *params, unsigned np)
{
    char name[160];
    tgc_llvm_unit_name(e->u, base, name, sizeof name);
    LLVMTypeRef ft = LLVMFunctionType(e->u->t_void, params, np, 0);
    e->fn = tgc_llvm_add_function(e->u, name, ft);
    at(e, new_block(e, "entry"));
    return e->fn;
}

/* For functions whose hot paths are explicit vectors already: O3's unrolling and
 * re-vectorizing of their loops would only cost JIT time (measured ~2x less code). */
static void mark_optsize(gemm_em *e)
{
    unsigned optsize = LLVMGetEnumAttributeKindForName("optsize", 7);
    LLVMAddAttributeAtIndex(e->fn, LLVMAttributeFunctionIndex,
                            LLVMCreateEnumAttribute(e->u->ctx, optsize, 0));
}

static int have_fn(gemm_em *e, const char *base)
{
    char name[160];
    tgc_llvm_unit_name(e->u, base, name, sizeof name);
    return LLVMGetNamedFunction(e->u->mod, name) != NULL;
}

/* ---- micro-kernel ---- */

/* acc[i*nv+j] += A[k][i] * B[k][j] for the step at panel offset u */
static void ukr_step(gemm_em *e, LLVMValueRef *acc, LLVMValueRef pa, LLVMValueRef pb, int u)
{
    LLVMValueRef bv[8];
    for (int j = 0; j < e->nv; j++)
        bv[j] = load_aligned(e, e->tv, gep_f32(e, pb, c64(e, (int64_t)u * e->nr + j * e->vl)),
                             e->valign);
    for (int i = 0; i < e->mr; i++) {
        LLVMValueRef a =
            load_aligned(e, e->u->t_f32, gep_f32(e, pa, c64(e, (int64_t)u * e->mr + i)), 4);
        LLVMValueRef s = splat(e, a, e->tv);
        for (int j = 0; j < e->nv; j++)
            acc[i * e->nv + j] = fmuladd(e, s, bv[j], acc[i * e->nv + j]);
    }
}

/* Writes one row of the result tile back to C (adding C's partial sums of earlier k blocks
 * when accumulating); i is the runtime row index. */
typedef struct ukr_io {
    LLVMValueRef tile, crow, accum;
    LLVMValueRef masks[8];
} ukr_io;

static void ukr_row(gemm_em *e, const ukr_io *io, int masked, LLVMValueRef row_base,
                    LLVMBasicBlockRef latch)
{
    int nv = e->nv;
    LLVMValueRef v[8], cp[8];
    for (int j = 0; j < nv; j++) {
        LLVMValueRef idx = LLVMBuildAdd(e->b, row_base, c64(e, j), "");
        v[j] = load_aligned(e, e->tv, LLVMBuildGEP2(e->b, e->tv, io->tile, &idx, 1, ""), 64);
        cp[j] = gep_f32(e, io->crow, c64(e, (int64_t)j * e->vl));
    }
    LLVMBasicBlockRef b0 = LLVMGetInsertBlock(e->b);
    LLVMBasicBlockRef badd = new_block(e, masked ? "addm" : "add");
    LLVMBasicBlockRef bpost = new_block(e, "post");
    LLVMBuildCondBr(e->b, io->accum, badd, bpost);
    at(e, badd);
    LLVMValueRef w[8];
    for (int j = 0; j < nv; j++) {
        LLVMValueRef cv =
            masked ? masked_load(e, cp[j], io->masks[j]) : load_aligned(e, e->tv, cp[j], 4);
        w[j] = LLVMBuildFAdd(e->b, v[j], cv, "");
    }
    LLVMBuildBr(e->b, bpost);
    at(e, bpost);
    for (int j = 0; j < nv; j++) {
        LLVMValueRef x = phi(e, e->tv);
        incoming(x, v[j], b0);
        incoming(x, w[j], badd);
        v[j] = x;
    }
    for (int j = 0; j < nv; j++) {
        if (masked)
            masked_store(e, v[j], cp[j], io->masks[j]);
        else
            store_aligned(e, v[j], cp[j], 4);
    }
    LLVMBuildBr(e->b, latch);
}

static void emit_ukr(gemm_em *e, const char *base)
{
    tgc_llvm_unit *u = e->u;
    LLVMTypeRef P = u->t_ptr, I = u->t_i64;
    LLVMTypeRef params[8] = {I, P, P, P, I, I, I, u->t_i32};
    begin_fn(e, base, params, 8);
    LLVMValueRef kc = LLVMGetParam(e->fn, 0), ap = LLVMGetParam(e->fn, 1),
                 bp = LLVMGetParam(e->fn, 2), cpt = LLVMGetParam(e->fn, 3),
                 ldc = LLVMGetParam(e->fn, 4), mr = LLVMGetParam(e->fn, 5),
                 nr = LLVMGetParam(e->fn, 6), flags = LLVMGetParam(e->fn, 7);
    int nacc = e->mr * e->nv;
    LLVMValueRef tile = LLVMBuildArrayAlloca(e->b, e->tv, c32(e, nacc), "tile");
    LLVMSetAlignment(tile, 64);
    LLVMValueRef zero = LLVMConstNull(e->tv);
    LLVMValueRef nmain = LLVMBuildSDiv(e->b, kc, c64(e, e->ku), "");
    LLVMValueRef rem = LLVMBuildSub(e->b, kc, LLVMBuildMul(e->b, nmain, c64(e, e->ku), ""), "");
    LLVMBasicBlockRef bentry = LLVMGetInsertBlock(e->b);
    LLVMBasicBlockRef bmain = new_block(e, "kmain"), bmid = new_block(e, "kmid"),
                      brem = new_block(e, "krem"), bdone = new_block(e, "kdone");
    LLVMBuildCondBr(e->b, LLVMBuildICmp(e->b, LLVMIntSGT, nmain, c64(e, 0), ""), bmain, bmid);

    LLVMValueRef acc[64], pacc[64];
    /* main loop: KU steps per trip */
    at(e, bmain);
    for (int i = 0; i < nacc; i++) {
        pacc[i] = phi(e, e->tv);
        incoming(pacc[i], zero, bentry);
        acc[i] = pacc[i];
    }
    LLVMValueRef pa = phi(e, P), pb = phi(e, P), it = phi(e, I);
    incoming(pa, ap, bentry);
    incoming(pb, bp, bentry);
    incoming(it, c64(e, 0), bentry);
    for (int s = 0; s < e->ku; s++)
        ukr_step(e, acc, pa, pb, s);
    LLVMValueRef pa2 = gep_f32(e, pa, c64(e, (int64_t)e->ku * e->mr));
    LLVMValueRef pb2 = gep_f32(e, pb, c64(e, (int64_t)e->ku * e->nr));
    LLVMValueRef it2 = LLVMBuildAdd(e->b, it, c64(e, 1), "");
    for (int i = 0; i < nacc; i++)
        incoming(pacc[i], acc[i], bmain);
    incoming(pa, pa2, bmain);
    incoming(pb, pb2, bmain);
    incoming(it, it2, bmain);
    LLVMBuildCondBr(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, it2, nmain, ""), bmain, bmid);
    LLVMValueRef main_acc[64];
    memcpy(main_acc, acc, sizeof(LLVMValueRef) * (size_t)nacc);

    /* after the main loop: remainder steps one at a time */
    at(e, bmid);
    LLVMValueRef macc[64];
    for (int i = 0; i < nacc; i++) {
        macc[i] = phi(e, e->tv);
        incoming(macc[i], zero, bentry);
        incoming(macc[i], main_acc[i], bmain);
    }
    LLVMValueRef mpa = phi(e, P), mpb = phi(e, P);
    incoming(mpa, ap, bentry);
    incoming(mpa, pa2, bmain);
    incoming(mpb, bp, bentry);
    incoming(mpb, pb2, bmain);
    LLVMBuildCondBr(e->b, LLVMBuildICmp(e->b, LLVMIntSGT, rem, c64(e, 0), ""), brem, bdone);

    at(e, brem);
    LLVMValueRef racc[64];
    for (int i = 0; i < nacc; i++) {
        racc[i] = phi(e, e->tv);
        incoming(racc[i], macc[i], bmid);
        acc[i] = racc[i];
    }
    LLVMValueRef rpa = phi(e, P), rpb = phi(e, P), ri = phi(e, I);
    incoming(rpa, mpa, bmid);
    incoming(rpb, mpb, bmid);
    incoming(ri, c64(e, 0), bmid);
    ukr_step(e, acc, rpa, rpb, 0);
    LLVMValueRef rpa2 = gep_f32(e, rpa, c64(e, e->mr)), rpb2 = gep_f32(e, rpb, c64(e, e->nr));
    LLVMValueRef ri2 = LLVMBuildAdd(e->b, ri, c64(e, 1), "");
    for (int i = 0; i < nacc; i++)
        incoming(racc[i], acc[i], brem);
    incoming(rpa, rpa2, brem);
    incoming(rpb, rpb2, brem);
    incoming(ri, ri2, brem);
    LLVMBuildCondBr(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, ri2, rem, ""), brem, bdone);

    /* spill the tile, then write it back row by row */
    at(e, bdone);
    LLVMValueRef fin[64];
    for (int i = 0; i < nacc; i++) {
        fin[i] = phi(e, e->tv);
        incoming(fin[i], macc[i], bmid);
        incoming(fin[i], acc[i], brem);
    }
    for (int i = 0; i < nacc; i++) {
        LLVMValueRef idx = c64(e, i);
        store_aligned(e, fin[i], LLVMBuildGEP2(e->b, e->tv, tile, &idx, 1, ""), 64);
    }
    ukr_io io = {.tile = tile};
    LLVMValueRef fl_accum = LLVMBuildAnd(e->b, flags, c32(e, TGC_GEMM_UKR_ACCUM), "");
    io.accum = LLVMBuildICmp(e->b, LLVMIntNE, fl_accum, c32(e, 0), "");
    LLVMValueRef nrv = splat(e, LLVMBuildTrunc(e->b, nr, u->t_i32, ""), e->tvi32);
    for (int j = 0; j < e->nv; j++)
        io.masks[j] = LLVMBuildICmp(e->b, LLVMIntSLT, iota(e, (int64_t)j * e->vl), nrv, "");
    LLVMValueRef full = LLVMBuildICmp(e->b, LLVMIntEQ, nr, c64(e, e->nr), "");
    em_loop rows;
    loop_begin(e, &rows, mr, "row");
    io.crow = gep_f32(e, cpt, LLVMBuildMul(e->b, rows.i, ldc, ""));
    LLVMValueRef row_base = LLVMBuildMul(e->b, rows.i, c64(e, e->nv), "");
    LLVMBasicBlockRef bfull = new_block(e, "rfull"), bpart = new_block(e, "rpart"),
                      blatch = new_block(e, "rlatch");
    LLVMBuildCondBr(e->b, full, bfull, bpart);
    at(e, bfull);
    ukr_row(e, &io, 0, row_base, blatch);
    at(e, bpart);
    ukr_row(e, &io, 1, row_base, blatch);
    at(e, blatch);
    loop_end(e, &rows);
    LLVMBuildRetVoid(e->b);
}

/* ---- packing ---- */

/* A full MR-row panel of a row-major A (cs == 1): VL k values of every row are loaded as
 * vectors and transposed in registers (log2(VL) stages of two-source shuffles, which swap
 * the off-diagonal blocks of ever smaller sub-squares), then each k's MR values are stored
 * with one masked store. Several times faster than element-by-element copying, which
 * dominates tall-skinny GEMMs such as M=65536 N=64 K=576, where every A element feeds only
 * 2N flops. The k tail (kc % VL) is copied element by element. */
static void pack_a_transposed(gemm_em *e, LLVMValueRef src, LLVMValueRef rs, LLVMValueRef kc,
                              LLVMValueRef dst)
{
    tgc_llvm_unit *u = e->u;
    int vl = e->vl;
    LLVMValueRef nch = LLVMBuildSDiv(e->b, kc, c64(e, vl), "");
    LLVMValueRef mmask_l[16];
    for (int l = 0; l < vl; l++)
        mmask_l[l] = LLVMConstInt(u->t_i1, l < e->mr, 0);
    LLVMValueRef mmask = LLVMConstVector(mmask_l, (unsigned)vl);
    em_loop cl, tl;
    loop_begin(e, &cl, nch, "chunk");
    LLVMValueRef k0 = LLVMBuildMul(e->b, cl.i, c64(e, vl), "");
    LLVMValueRef r[16];
    for (int i = 0; i < vl; i++)
        r[i] = i < e->mr
                   ? load_aligned(
                         e, e->tv,
                         gep_f32(e, src,
                                 LLVMBuildAdd(e->b, LLVMBuildMul(e->b, c64(e, i), rs, ""), k0, "")),
                         4)
                   : LLVMConstNull(e->tv);
    for (int bsz = vl / 2; bsz >= 1; bsz /= 2) {
        LLVMValueRef mx[16], my[16];
        for (int l = 0; l < vl; l++) {
            mx[l] = c32(e, (l & bsz) ? vl + l - bsz : l);
            my[l] = c32(e, (l & bsz) ? vl + l : l + bsz);
        }
        LLVMValueRef maskx = LLVMConstVector(mx, (unsigned)vl),
                     masky = LLVMConstVector(my, (unsigned)vl);
        for (int i = 0; i < vl; i++) {
            if (i & bsz)
                continue;
            LLVMValueRef x = r[i], y = r[i + bsz];
            r[i] = LLVMBuildShuffleVector(e->b, x, y, maskx, "");
            r[i + bsz] = LLVMBuildShuffleVector(e->b, x, y, masky, "");
        }
    }
    for (int kk = 0; kk < vl; kk++) {
        LLVMValueRef off =
            LLVMBuildMul(e->b, LLVMBuildAdd(e->b, k0, c64(e, kk), ""), c64(e, e->mr), "");
        masked_store(e, r[kk], gep_f32(e, dst, off), mmask);
    }
    loop_end(e, &cl);
    LLVMValueRef kt = LLVMBuildMul(e->b, nch, c64(e, vl), "");
    loop_begin(e, &tl, LLVMBuildSub(e->b, kc, kt, ""), "ktail");
    LLVMValueRef k = LLVMBuildAdd(e->b, kt, tl.i, "");
    for (int i = 0; i < e->mr; i++) {
        LLVMValueRef v = load_aligned(
            e, u->t_f32,
            gep_f32(e, src, LLVMBuildAdd(e->b, LLVMBuildMul(e->b, c64(e, i), rs, ""), k, "")), 4);
        store_aligned(
            e, v,
            gep_f32(e, dst,
                    LLVMBuildAdd(e->b, LLVMBuildMul(e->b, k, c64(e, e->mr), ""), c64(e, i), "")),
            4);
    }
    loop_end(e, &tl);
}

/* pack_a(a, rs, cs, mc, kc, ap): panels [kc][MR]. Rows are read along k (contiguous for a
 * row-major A) and written with stride MR; rows past mc are zeros. */
static void emit_pack_a(gemm_em *e, const char *base)
{
    tgc_llvm_unit *u = e->u;
    LLVMTypeRef P = u->t_ptr, I = u->t_i64;
    LLVMTypeRef params[6] = {P, I, I, I, I, P};
    begin_fn(e, base, params, 6);
    mark_optsize(e);
    LLVMValueRef a = LLVMGetParam(e->fn, 0), rs = LLVMGetParam(e->fn, 1),
                 cs = LLVMGetParam(e->fn, 2), mc = LLVMGetParam(e->fn, 3),
                 kc = LLVMGetParam(e->fn, 4), ap = LLVMGetParam(e->fn, 5);
    LLVMValueRef np =
        LLVMBuildSDiv(e->b, LLVMBuildAdd(e->b, mc, c64(e, e->mr - 1), ""), c64(e, e->mr), "");
    em_loop pl, il, kl;
    loop_begin(e, &pl, np, "panel");
    LLVMValueRef r0 = LLVMBuildMul(e->b, pl.i, c64(e, e->mr), "");
    LLVMValueRef mrv = smin64(e, c64(e, e->mr), LLVMBuildSub(e->b, mc, r0, ""));
    LLVMValueRef dst = gep_f32(e, ap, LLVMBuildMul(e->b, r0, kc, ""));
    LLVMValueRef src = gep_f32(e, a, LLVMBuildMul(e->b, r0, rs, ""));
    LLVMBasicBlockRef bpnext = new_block(e, "pnext");
    if (e->mr <= e->vl && (e->vl == 8 || e->vl == 16)) {
        LLVMValueRef fast =
            LLVMBuildAnd(e->b, LLVMBuildICmp(e->b, LLVMIntEQ, cs, c64(e, 1), ""),
                         LLVMBuildICmp(e->b, LLVMIntEQ, mrv, c64(e, e->mr), ""), "");
        LLVMBasicBlockRef bvec = new_block(e, "atrans"), brows = new_block(e, "arows");
        LLVMBuildCondBr(e->b, fast, bvec, brows);
        at(e, bvec);
        pack_a_transposed(e, src, rs, kc, dst);
        LLVMBuildBr(e->b, bpnext);
        at(e, brows);
    }
    loop_begin(e, &il, c64(e, e->mr), "row");
    LLVMValueRef live = LLVMBuildICmp(e->b, LLVMIntSLT, il.i, mrv, "");
    LLVMValueRef srow = gep_f32(e, src, LLVMBuildMul(e->b, il.i, rs, ""));
    LLVMValueRef drow = gep_f32(e, dst, il.i);
    LLVMBasicBlockRef bcopy = new_block(e, "copy"), bzero = new_block(e, "zero"),
                      bnext = new_block(e, "next");
    LLVMBuildCondBr(e->b, live, bcopy, bzero);
    at(e, bcopy);
    loop_begin(e, &kl, kc, "k");
    LLVMValueRef v =
        load_aligned(e, u->t_f32, gep_f32(e, srow, LLVMBuildMul(e->b, kl.i, cs, "")), 4);
    store_aligned(e, v, gep_f32(e, drow, LLVMBuildMul(e->b, kl.i, c64(e, e->mr), "")), 4);
    loop_end(e, &kl);
    LLVMBuildBr(e->b, bnext);
    at(e, bzero);
    loop_begin(e, &kl, kc, "kz");
    store_aligned(e, LLVMConstNull(u->t_f32),
                  gep_f32(e, drow, LLVMBuildMul(e->b, kl.i, c64(e, e->mr), "")), 4);
    loop_end(e, &kl);
    LLVMBuildBr(e->b, bnext);
    at(e, bnext);
    loop_end(e, &il);
    LLVMBuildBr(e->b, bpnext);
    at(e, bpnext);
    loop_end(e, &pl);
    LLVMBuildRetVoid(e->b);
}

/* pack_b(b, rs, cs, kc, nc, bp): panels [kc][NR]. Contiguous rows (cs == 1) are copied with
 * vector loads, masked on the last panel; other layouts (a transposed weight) go column by
 * column, reading along k. */
static void emit_pack_b(gemm_em *e, const char *base)
{
    tgc_llvm_unit *u = e->u;
    LLVMTypeRef P = u->t_ptr, I = u->t_i64;
    LLVMTypeRef params[6] = {P, I, I, I, I, P};
    begin_fn(e, base, params, 6);
    mark_optsize(e);
    LLVMValueRef b = LLVMGetParam(e->fn, 0), rs = LLVMGetParam(e->fn, 1),
                 cs = LLVMGetParam(e->fn, 2), kc = LLVMGetParam(e->fn, 3),
                 nc = LLVMGetParam(e->fn, 4), bp = LLVMGetParam(e->fn, 5);
    LLVMValueRef np =
        LLVMBuildSDiv(e->b, LLVMBuildAdd(e->b, nc, c64(e, e->nr - 1), ""), c64(e, e->nr), "");
    em_loop pl, kl, jl;
    loop_begin(e, &pl, np, "panel");
    LLVMValueRef n0 = LLVMBuildMul(e->b, pl.i, c64(e, e->nr), "");
    LLVMValueRef nrv = smin64(e, c64(e, e->nr), LLVMBuildSub(e->b, nc, n0, ""));
    LLVMValueRef dst = gep_f32(e, bp, LLVMBuildMul(e->b, n0, kc, ""));
    LLVMValueRef src = gep_f32(e, b, LLVMBuildMul(e->b, n0, cs, ""));
    LLVMValueRef masks[8];
    LLVMValueRef nrv32 = splat(e, LLVMBuildTrunc(e->b, nrv, u->t_i32, ""), e->tvi32);
    for (int j = 0; j < e->nv; j++)
        masks[j] = LLVMBuildICmp(e->b, LLVMIntSLT, iota(e, (int64_t)j * e->vl), nrv32, "");
    LLVMValueRef unit = LLVMBuildICmp(e->b, LLVMIntEQ, cs, c64(e, 1), "");
    LLVMValueRef full = LLVMBuildICmp(e->b, LLVMIntEQ, nrv, c64(e, e->nr), "");
    LLVMBasicBlockRef bvec = new_block(e, "vec"), bvf = new_block(e, "vfull"),
                      bvm = new_block(e, "vmask"), bgen = new_block(e, "gen"),
                      bnext = new_block(e, "next");
    LLVMBuildCondBr(e->b, unit, bvec, bgen);
    at(e, bvec);
    LLVMBuildCondBr(e->b, full, bvf, bvm);
    for (int masked = 0; masked < 2; masked++) {
        at(e, masked ? bvm : bvf);
        loop_begin(e, &kl, kc, "k");
        LLVMValueRef s = gep_f32(e, src, LLVMBuildMul(e->b, kl.i, rs, ""));
        LLVMValueRef d = gep_f32(e, dst, LLVMBuildMul(e->b, kl.i, c64(e, e->nr), ""));
        for (int j = 0; j < e->nv; j++) {
            LLVMValueRef sp = gep_f32(e, s, c64(e, (int64_t)j * e->vl));
            LLVMValueRef v = masked ? masked_load(e, sp, masks[j]) : load_aligned(e, e->tv, sp, 4);
            store_aligned(e, v, gep_f32(e, d, c64(e, (int64_t)j * e->vl)), e->valign);
        }
        loop_end(e, &kl);
        LLVMBuildBr(e->b, bnext);
    }
    at(e, bgen);
    loop_begin(e, &jl, c64(e, e->nr), "col");
    LLVMValueRef live = LLVMBuildICmp(e->b, LLVMIntSLT, jl.i, nrv, "");
    LLVMValueRef scol = gep_f32(e, src, LLVMBuildMul(e->b, jl.i, cs, ""));
    LLVMValueRef dcol = gep_f32(e, dst, jl.i);
    LLVMBasicBlockRef bcopy = new_block(e, "copy"), bzero = new_block(e, "zero"),
                      bcn = new_block(e, "cnext");
    LLVMBuildCondBr(e->b, live, bcopy, bzero);
    at(e, bcopy);
    loop_begin(e, &kl, kc, "k");
    LLVMValueRef v =
        load_aligned(e, u->t_f32, gep_f32(e, scol, LLVMBuildMul(e->b, kl.i, rs, "")), 4);
    store_aligned(e, v, gep_f32(e, dcol, LLVMBuildMul(e->b, kl.i, c64(e, e->nr), "")), 4);
    loop_end(e, &kl);
    LLVMBuildBr(e->b, bcn);
    at(e, bzero);
    loop_begin(e, &kl, kc, "kz");
    store_aligned(e, LLVMConstNull(u->t_f32),
                  gep_f32(e, dcol, LLVMBuildMul(e->b, kl.i, c64(e, e->nr), "")), 4);
    loop_end(e, &kl);
    LLVMBuildBr(e->b, bcn);
    at(e, bcn);
    loop_end(e, &jl);
    LLVMBuildBr(e->b, bnext);
    at(e, bnext);
    loop_end(e, &pl);
    LLVMBuildRetVoid(e->b);
}

/* One geometry value: a constant when the conv was emitted for static params, else a load. */
static LLVMValueRef geom(gemm_em *e, const int64_t *st, LLVMValueRef gp, int i)
{
    if (st)
        return c64(e, st[i]);
    return load_aligned(e, e->u->t_i64,
                        LLVMBuildGEP2(e->b, e->u->t_i64, gp, (LLVMValueRef[]){c64(e, i)}, 1, ""),
                        8);
}

/* Per-vector state of an im2col panel: which output pixels its lanes are. */
typedef struct cvec {
    LLVMValueRef ih0v, iw0v, valid; /* <VL x i32> window origins, <VL x i1> live lanes */
    LLVMValueRef cont, ih0s, iw0s;  /* contiguous fast path: one output row, stride_w 1 */
    LLVMValueRef pix0;              /* first pixel of the vector (i64) */
    LLVMValueRef ohv, oh0;          /* output rows of the lanes, of the first lane */
} cvec;

static LLVMValueRef vsplat32(gemm_em *e, LLVMValueRef s64)
{
    return splat(e, LLVMBuildTrunc(e->b, s64, e->u->t_i32, ""), e->tvi32);
}

/* in [0, hi) as one unsigned compare (negative values wrap to large) */
static LLVMValueRef in_range(gemm_em *e, LLVMValueRef v, LLVMValueRef hi)
{
    return LLVMBuildICmp(e->b, LLVMIntULT, v, hi, "");
}

/* conv_pack_b(x, geom, k0, kc, p0, nc, bp): the im2col rows [k0,k0+kc) x pixels [p0,p0+nc)
 * of one image and group. A vector of pixels inside one output row with stride_w 1 reads a
 * contiguous input row (masked at the padding); anything else is a masked gather. */
static void emit_conv_pack(gemm_em *e, const char *base, const int64_t *st)
{
    tgc_llvm_unit *u = e->u;
    LLVMTypeRef P = u->t_ptr, I = u->t_i64;
    LLVMTypeRef params[7] = {P, P, I, I, I, I, P};
    begin_fn(e, base, params, 7);
    mark_optsize(e);

    LLVMValueRef x = LLVMGetParam(e->fn, 0), gp = LLVMGetParam(e->fn, 1),
                 k0 = LLVMGetParam(e->fn, 2), kc = LLVMGetParam(e->fn, 3),
                 p0 = LLVMGetParam(e->fn, 4), nc = LLVMGetParam(e->fn, 5),
                 bp = LLVMGetParam(e->fn, 6);
    LLVMValueRef H = geom(e, st, gp, TGC_CG_H), W = geom(e, st, gp, TGC_CG_W),
                 KH = geom(e, st, gp, TGC_CG_KH), KW = geom(e, st, gp, TGC_CG_KW),
                 SH = geom(e, st, gp, TGC_CG_SH), SW = geom(e, st, gp, TGC_CG_SW),
                 PH = geom(e, st, gp, TGC_CG_PH), PW = geom(e, st, gp, TGC_CG_PW),
                 DH = geom(e, st, gp, TGC_CG_DH), DW = geom(e, st, gp, TGC_CG_DW),
                 OW = geom(e, st, gp, TGC_CG_OW);
    LLVMValueRef HW = LLVMBuildMul(e->b, H, W, "");
    LLVMValueRef KHW = LLVMBuildMul(e->b, KH, KW, "");
    LLVMValueRef c_start = LLVMBuildSDiv(e->b, k0, KHW, "");
    LLVMValueRef krem = LLVMBuildSRem(e->b, k0, KHW, "");
    LLVMValueRef kh_start = LLVMBuildSDiv(e->b, krem, KW, "");
    LLVMValueRef kw_start = LLVMBuildSRem(e->b, krem, KW, "");
    LLVMValueRef Hv = vsplat32(e, H), Wv = vsplat32(e, W), OWv = vsplat32(e, OW);
    LLVMValueRef SHv = vsplat32(e, SH), SWv = vsplat32(e, SW), PHv = vsplat32(e, PH),
                 PWv = vsplat32(e, PW);
    LLVMValueRef np =
        LLVMBuildSDiv(e->b, LLVMBuildAdd(e->b, nc, c64(e, e->nr - 1), ""), c64(e, e->nr), "");
    LLVMValueRef sw1 = LLVMBuildICmp(e->b, LLVMIntEQ, SW, c64(e, 1), "");
    /* stride 1 with "same" width (OW == W): consecutive output pixels read consecutive
     * input elements even across rows, so a vector spanning rows (small images) is one
     * masked load, the padding lanes masked off, instead of a gather */
    LLVMValueRef flat = LLVMBuildAnd(
        e->b, LLVMBuildAnd(e->b, sw1, LLVMBuildICmp(e->b, LLVMIntEQ, SH, c64(e, 1), ""), ""),
        LLVMBuildICmp(e->b, LLVMIntEQ, OW, W, ""), "");
    /* stride_w 1 and rows of at least half a vector: a vector of pixels spans at most
     * three output rows, each a contiguous input run: three masked loads, not a gather */
    LLVMValueRef seg = LLVMBuildAnd(
        e->b, sw1,
        LLVMBuildICmp(e->b, LLVMIntSGE, LLVMBuildMul(e->b, OW, c64(e, 2), ""), c64(e, e->vl), ""),
        "");
    em_loop pl;
    loop_begin(e, &pl, np, "panel");
    LLVMValueRef off = LLVMBuildMul(e->b, pl.i, c64(e, e->nr), "");
    LLVMValueRef pp = LLVMBuildAdd(e->b, p0, off, "");
    LLVMValueRef nrv = smin64(e, c64(e, e->nr), LLVMBuildSub(e->b, nc, off, ""));
    LLVMValueRef dst = gep_f32(e, bp, LLVMBuildMul(e->b, off, kc, ""));
    LLVMValueRef nrv32 = vsplat32(e, nrv);
    cvec cv[8];
    for (int j = 0; j < e->nv; j++) {
        LLVMValueRef pix0 = LLVMBuildAdd(e->b, pp, c64(e, (int64_t)j * e->vl), "");
        LLVMValueRef pixv = LLVMBuildAdd(e->b, vsplat32(e, pix0), iota(e, 0), "");
        LLVMValueRef ohv = LLVMBuildUDiv(e->b, pixv, OWv, "");
        LLVMValueRef owv = LLVMBuildSub(e->b, pixv, LLVMBuildMul(e->b, ohv, OWv, ""), "");
        cv[j].ih0v = LLVMBuildSub(e->b, LLVMBuildMul(e->b, ohv, SHv, ""), PHv, "");
        cv[j].iw0v = LLVMBuildSub(e->b, LLVMBuildMul(e->b, owv, SWv, ""), PWv, "");
        cv[j].valid = LLVMBuildICmp(e->b, LLVMIntSLT, iota(e, (int64_t)j * e->vl), nrv32, "");
        LLVMValueRef oh0 = LLVMBuildSDiv(e->b, pix0, OW, "");
        LLVMValueRef ow0 = LLVMBuildSub(e->b, pix0, LLVMBuildMul(e->b, oh0, OW, ""), "");
        LLVMValueRef fits =
            LLVMBuildICmp(e->b, LLVMIntSLE, LLVMBuildAdd(e->b, ow0, c64(e, e->vl), ""), OW, "");
        LLVMValueRef whole =
            LLVMBuildICmp(e->b, LLVMIntSLE, c64(e, (int64_t)(j + 1) * e->vl), nrv, "");
        cv[j].cont = LLVMBuildAnd(e->b, sw1, LLVMBuildAnd(e->b, fits, whole, ""), "");
        cv[j].pix0 = pix0;
        cv[j].ohv = ohv;
        cv[j].oh0 = oh0;
        cv[j].ih0s = LLVMBuildSub(e->b, LLVMBuildMul(e->b, oh0, SH, ""), PH, "");
        cv[j].iw0s = LLVMBuildSub(e->b, ow0, PW, "");
    }
    /* k loop with (c, kh, kw) stepped incrementally */
    LLVMBasicBlockRef bpre = LLVMGetInsertBlock(e->b);
    LLVMBasicBlockRef bk = new_block(e, "k"), bkexit = new_block(e, "kexit");
    LLVMBuildCondBr(e->b, LLVMBuildICmp(e->b, LLVMIntSGT, kc, c64(e, 0), ""), bk, bkexit);
    at(e, bk);
    LLVMValueRef kk = phi(e, I), cc = phi(e, I), kh = phi(e, I), kw = phi(e, I);
    incoming(kk, c64(e, 0), bpre);
    incoming(cc, c_start, bpre);
    incoming(kh, kh_start, bpre);
    incoming(kw, kw_start, bpre);
    LLVMValueRef xc = gep_f32(e, x, LLVMBuildMul(e->b, cc, HW, ""));
    LLVMValueRef dh = LLVMBuildMul(e->b, kh, DH, ""), dw = LLVMBuildMul(e->b, kw, DW, "");
    LLVMValueRef dhv = vsplat32(e, dh), dwv = vsplat32(e, dw);
    LLVMValueRef drow = gep_f32(e, dst, LLVMBuildMul(e->b, kk, c64(e, e->nr), ""));
    for (int j = 0; j < e->nv; j++) {
        LLVMBasicBlockRef bc = new_block(e, "cont"), bg = new_block(e, "gather"),
                          bj = new_block(e, "join");
        LLVMBuildCondBr(e->b, cv[j].cont, bc, bg);
        at(e, bc);
        LLVMValueRef ih = LLVMBuildAdd(e->b, cv[j].ih0s, dh, "");
        LLVMValueRef iw = LLVMBuildAdd(e->b, cv[j].iw0s, dw, "");
        LLVMValueRef rowok = in_range(e, ih, H);
        LLVMValueRef iwv = LLVMBuildAdd(e->b, vsplat32(e, iw), iota(e, 0), "");
        LLVMValueRef m1 = LLVMBuildAnd(e->b, in_range(e, iwv, Wv), splat(e, rowok, e->tvi1), "");
        LLVMValueRef src =
            gep_f32(e, xc, LLVMBuildAdd(e->b, LLVMBuildMul(e->b, ih, W, ""), iw, ""));
        LLVMValueRef v1 = masked_load(e, src, m1);
        LLVMBasicBlockRef bc_end = LLVMGetInsertBlock(e->b);
        LLVMBuildBr(e->b, bj);
        at(e, bg);
        LLVMValueRef ihv = LLVMBuildAdd(e->b, cv[j].ih0v, dhv, "");
        LLVMValueRef iwv2 = LLVMBuildAdd(e->b, cv[j].iw0v, dwv, "");
        LLVMValueRef m2 =
            LLVMBuildAnd(e->b, cv[j].valid,
                         LLVMBuildAnd(e->b, in_range(e, ihv, Hv), in_range(e, iwv2, Wv), ""), "");
        LLVMBasicBlockRef bf = new_block(e, "flat"), bgg = new_block(e, "gathr");
        LLVMBuildCondBr(e->b, flat, bf, bgg);
        at(e, bf);
        LLVMValueRef fofs = LLVMBuildAdd(
            e->b, cv[j].pix0,
            LLVMBuildAdd(e->b, LLVMBuildMul(e->b, LLVMBuildSub(e->b, dh, PH, ""), W, ""),
                         LLVMBuildSub(e->b, dw, PW, ""), ""),
            "");
        LLVMValueRef v3 = masked_load(e, gep_f32(e, xc, fofs), m2);
        LLVMBasicBlockRef bf_end = LLVMGetInsertBlock(e->b);
        LLVMBuildBr(e->b, bj);
        at(e, bgg);
        LLVMBasicBlockRef bs = new_block(e, "segs"), bga = new_block(e, "gather");
        LLVMBuildCondBr(e->b, seg, bs, bga);
        at(e, bs);
        LLVMValueRef v4 = LLVMConstNull(e->tv);
        for (int sgi = 0; sgi < 3; sgi++) {
            LLVMValueRef ohs = LLVMBuildAdd(e->b, cv[j].oh0, c64(e, sgi), "");
            LLVMValueRef ms = LLVMBuildAnd(
                e->b, m2, LLVMBuildICmp(e->b, LLVMIntEQ, cv[j].ohv, vsplat32(e, ohs), ""), "");
            /* lane l of row ohs reads input (ohs*SH - PH + dh, pix0 + l - ohs*OW - PW + dw) */
            LLVMValueRef row = LLVMBuildSub(
                e->b, LLVMBuildAdd(e->b, LLVMBuildMul(e->b, ohs, SH, ""), dh, ""), PH, "");
            LLVMValueRef col = LLVMBuildSub(
                e->b, LLVMBuildAdd(e->b, cv[j].pix0, LLVMBuildSub(e->b, dw, PW, ""), ""),
                LLVMBuildMul(e->b, ohs, OW, ""), "");
            LLVMValueRef so = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, row, W, ""), col, "");
            LLVMValueRef ls = masked_load(e, gep_f32(e, xc, so), ms);
            v4 = LLVMBuildSelect(e->b, ms, ls, v4, "");
        }
        LLVMBasicBlockRef bs_end = LLVMGetInsertBlock(e->b);
        LLVMBuildBr(e->b, bj);
        at(e, bga);
        LLVMValueRef offv = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, ihv, Wv, ""), iwv2, "");
        offv = LLVMBuildSExt(e->b, offv, LLVMVectorType(I, (unsigned)e->vl), "");
        LLVMValueRef ptrs = LLVMBuildGEP2(e->b, u->t_f32, xc, &offv, 1, "");
        LLVMValueRef v2 = masked_gather(e, ptrs, m2);
        LLVMBasicBlockRef bg_end = LLVMGetInsertBlock(e->b);
        LLVMBuildBr(e->b, bj);
        at(e, bj);
        LLVMValueRef v = phi(e, e->tv);
        incoming(v, v1, bc_end);
        incoming(v, v3, bf_end);
        incoming(v, v4, bs_end);
        incoming(v, v2, bg_end);
        store_aligned(e, v, gep_f32(e, drow, c64(e, (int64_t)j * e->vl)), e->valign);
    }
    /* kw++, carrying into kh and c */
    LLVMValueRef kw1 = LLVMBuildAdd(e->b, kw, c64(e, 1), "");
    LLVMValueRef wrapw = LLVMBuildICmp(e->b, LLVMIntEQ, kw1, KW, "");
    LLVMValueRef kh1 = LLVMBuildSelect(e->b, wrapw, LLVMBuildAdd(e->b, kh, c64(e, 1), ""), kh, "");
    LLVMValueRef wraph = LLVMBuildICmp(e->b, LLVMIntEQ, kh1, KH, "");
    LLVMValueRef c1 = LLVMBuildSelect(e->b, wraph, LLVMBuildAdd(e->b, cc, c64(e, 1), ""), cc, "");
    kw1 = LLVMBuildSelect(e->b, wrapw, c64(e, 0), kw1, "");
    kh1 = LLVMBuildSelect(e->b, wraph, c64(e, 0), kh1, "");
    LLVMValueRef kk1 = LLVMBuildAdd(e->b, kk, c64(e, 1), "");
    LLVMBasicBlockRef bend = LLVMGetInsertBlock(e->b);
    incoming(kk, kk1, bend);
    incoming(cc, c1, bend);
    incoming(kh, kh1, bend);
    incoming(kw, kw1, bend);
    LLVMBuildCondBr(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, kk1, kc, ""), bk, bkexit);
    at(e, bkexit);
    loop_end(e, &pl);
    LLVMBuildRetVoid(e->b);
}

/* ---- kernels ---- */

static void default_config(const tgc_llvm_target *t, tgc_gemm_config *c)
{
    memset(c, 0, sizeof *c);
    if (t->vec_bits >= 512) {
        /* 14x32: 28 zmm accumulators + 2 B vectors + 1 broadcast of the 32 registers.
         * KC 512 / MC 336 measured best for 1024..4096-sized GEMMs (2048^3: 0.93-0.94x
         * OpenBLAS against 0.89-0.90x with KC 384; A block ~0.7 MiB of the 1 MiB L2) */
        c->mr = 14, c->nr_vec = 2, c->ku = 4, c->kc = 512, c->mc = 336, c->nc = 4096;
    } else if (t->vec_bits >= 256) {
        /* 6x16: 12 ymm accumulators of 16 */
        c->mr = 6, c->nr_vec = 2, c->ku = 4, c->kc = 256, c->mc = 144, c->nc = 4096;
    } else {
        c->mr = 6, c->nr_vec = 2, c->ku = 4, c->kc = 256, c->mc = 144, c->nc = 2048;
    }
}

static tgc_status setup(tgc_llvm_unit *u, const char *base, const tgc_gemm_config *cfg,
                        tgc_gemm_kernel *k, gemm_em *e, const char *fn, int is_conv)
{
    if (!u || !u->mod || !k || !base || !base[0] || strlen(base) + 16 > TGC_GEMM_NAME_MAX)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "%s: needs a started unit, a kernel and a base name of 1..%d "
                             "characters",
                             fn, TGC_GEMM_NAME_MAX - 16);
    tgc_gemm_config c;
    default_config(u->target, &c);
    if (is_conv && c.kc > 256) {
        /* conv GEMMs have few rows (output channels per group): a smaller KC keeps the B
         * micro-panel well inside L1 (measured: 64->64 3x3 at K=576 runs 3 x 192 faster
         * than 2 x 288) */
        c.kc = 256;
        c.mc = c.mr * 12;
    }
    if (cfg) {
        if (cfg->mr)
            c.mr = cfg->mr;
        if (cfg->nr_vec)
            c.nr_vec = cfg->nr_vec;
        if (cfg->ku)
            c.ku = cfg->ku;
        if (cfg->kc)
            c.kc = cfg->kc;
        if (cfg->mc)
            c.mc = cfg->mc;
        if (cfg->nc)
            c.nc = cfg->nc;
    }
    if (c.mr < 1 || c.nr_vec < 1 || c.nr_vec > 8 || c.mr * c.nr_vec > 64 || c.ku < 1 || c.ku > 16 ||
        c.kc < 1 || c.mc < 1 || c.nc < 1)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "%s: bad blocking mr=%d nr_vec=%d ku=%d kc=%d mc=%d nc=%d "
                             "(need mr*nr_vec <= 64, nr_vec <= 8, ku <= 16)",
                             fn, c.mr, c.nr_vec, c.ku, c.kc, c.mc, c.nc);
    memset(k, 0, sizeof *k);
    memset(e, 0, sizeof *e);
    e->u = u;
    e->b = u->b;
    e->vl = u->target->vec_bits / 32;
    e->mr = c.mr;
    e->nv = c.nr_vec;
    e->nr = e->nv * e->vl;
    e->ku = c.ku;
    e->valign = (unsigned)(e->vl * 4 > 64 ? 64 : e->vl * 4);
    e->tv = LLVMVectorType(u->t_f32, (unsigned)e->vl);
    e->tvi32 = LLVMVectorType(u->t_i32, (unsigned)e->vl);
    e->tvi1 = LLVMVectorType(u->t_i1, (unsigned)e->vl);
    k->mr = e->mr;
    k->nr = e->nr;
    k->vl = e->vl;
    k->ku = e->ku;
    k->kc = (c.kc + 7) / 8 * 8;
    k->mc = (c.mc + e->mr - 1) / e->mr * e->mr;
    k->nc = (c.nc + e->nr - 1) / e->nr * e->nr;
    return TGC_OK;
}

/* Emits the ukr and the shared packing routines; the builder's position is restored so a
 * caller may emit us between its own functions. */
/* ep_tile(c, ldc, mr, nr, args, batch, m0, n0): C[i, j] = ep(C[i, j]) over rows [0,mr) and
 * columns [0,nr) of the tile at c, whose first element is C[m0, n0]. The driver calls it on
 * each tile right after the micro-kernel stored the tile's final sums, while the tile is in
 * L1. Keeping the epilogue out of the micro-kernel lets every kernel of a unit share one
 * micro-kernel: each kernel adds only this small function, which keeps JIT time low. */
static void emit_ep_tile(gemm_em *e, const char *base, const tgc_gemm_epilogue *ep)
{
    tgc_llvm_unit *u = e->u;
    LLVMTypeRef P = u->t_ptr, I = u->t_i64;
    LLVMTypeRef params[8] = {P, I, I, I, P, I, I, I};
    begin_fn(e, base, params, 8);
    mark_optsize(e);
    LLVMValueRef c = LLVMGetParam(e->fn, 0), ldc = LLVMGetParam(e->fn, 1),
                 mr = LLVMGetParam(e->fn, 2), nr = LLVMGetParam(e->fn, 3);
    LLVMValueRef nvec =
        LLVMBuildSDiv(e->b, LLVMBuildAdd(e->b, nr, c64(e, e->vl - 1), ""), c64(e, e->vl), "");
    em_loop rows, cols;
    loop_begin(e, &rows, mr, "row");
    LLVMValueRef crow = gep_f32(e, c, LLVMBuildMul(e->b, rows.i, ldc, ""));
    LLVMValueRef m = LLVMBuildAdd(e->b, LLVMGetParam(e->fn, 6), rows.i, "");
    loop_begin(e, &cols, nvec, "col");
    LLVMValueRef j0 = LLVMBuildMul(e->b, cols.i, c64(e, e->vl), "");
    LLVMValueRef cp = gep_f32(e, crow, j0);
    LLVMValueRef left = LLVMBuildSub(e->b, nr, j0, "");
    LLVMBasicBlockRef bfull = new_block(e, "full"), bpart = new_block(e, "part"),
                      bnext = new_block(e, "next");
    LLVMBuildCondBr(e->b, LLVMBuildICmp(e->b, LLVMIntSGE, left, c64(e, e->vl), ""), bfull, bpart);
    for (int masked = 0; masked < 2; masked++) {
        at(e, masked ? bpart : bfull);
        LLVMValueRef mask = NULL;
        if (masked)
            mask = LLVMBuildICmp(e->b, LLVMIntSLT, iota(e, 0), vsplat32(e, left), "");
        LLVMValueRef v = masked ? masked_load(e, cp, mask) : load_aligned(e, e->tv, cp, 4);
        tgc_gemm_ep_pos pos = {
            .args = LLVMGetParam(e->fn, 4),
            .batch = LLVMGetParam(e->fn, 5),
            .m = m,
            .n0 = LLVMBuildAdd(e->b, LLVMGetParam(e->fn, 7), j0, ""),
            .mask = mask,
            .vl = e->vl,
            .c_ptr = cp,
        };
        v = ep->emit(ep->ctx, u, v, &pos);
        if (masked)
            masked_store(e, v, cp, mask);
        else
            store_aligned(e, v, cp, 4);
        LLVMBuildBr(e->b, bnext);
    }
    at(e, bnext);
    loop_end(e, &cols);
    loop_end(e, &rows);
    LLVMBuildRetVoid(e->b);
}

/* The kernel's own epilogue function plus the unit's shared micro-kernel and packing
 * routines (emitted by the first kernel that needs them). */
static void emit_common(gemm_em *e, const char *base, const tgc_gemm_epilogue *ep,
                        tgc_gemm_kernel *k)
{
    snprintf(k->ukr_name, sizeof k->ukr_name, "tgc_gemm_ukr_%dx%d_u%d", e->mr, e->nr, e->ku);
    snprintf(k->pack_a_name, sizeof k->pack_a_name, "tgc_gemm_pack_a_mr%d", e->mr);
    snprintf(k->pack_b_name, sizeof k->pack_b_name, "tgc_gemm_pack_b_nr%d", e->nr);
    if (!have_fn(e, k->ukr_name))
        emit_ukr(e, k->ukr_name);
    if (!have_fn(e, k->pack_a_name))
        emit_pack_a(e, k->pack_a_name);
    if (!have_fn(e, k->pack_b_name))
        emit_pack_b(e, k->pack_b_name);
    if (ep && ep->emit) {
        snprintf(k->ep_name, sizeof k->ep_name, "%s_ep", base);
        emit_ep_tile(e, k->ep_name, ep);
    }
}

tgc_status tgc_llvm_gemm_emit_cfg(tgc_llvm_unit *u, const char *base, const tgc_gemm_epilogue *ep,
                                  const tgc_gemm_config *cfg, tgc_gemm_kernel *k)
{
    gemm_em e;
    tgc_status st = setup(u, base, cfg, k, &e, "tgc_llvm_gemm_emit", 0);
    if (st != TGC_OK)
        return st;
    LLVMBasicBlockRef saved = LLVMGetInsertBlock(u->b);
    k->kind = TGC_GEMM_KIND_GEMM;
    emit_common(&e, base, ep, k);
    if (saved)
        LLVMPositionBuilderAtEnd(u->b, saved);
    return TGC_OK;
}

tgc_status tgc_llvm_gemm_emit(tgc_llvm_unit *u, const char *base, const tgc_gemm_epilogue *ep,
                              tgc_gemm_kernel *k)
{
    return tgc_llvm_gemm_emit_cfg(u, base, ep, NULL, k);
}

tgc_status tgc_llvm_conv_emit_cfg(tgc_llvm_unit *u, const char *base,
                                  const tgc_conv_params *static_params, const tgc_gemm_epilogue *ep,
                                  const tgc_gemm_config *cfg, tgc_gemm_kernel *k)
{
    gemm_em e;
    tgc_status st = setup(u, base, cfg, k, &e, "tgc_llvm_conv_emit", 1);
    if (st != TGC_OK)
        return st;
    int64_t g[TGC_CONV_GEOM_COUNT];
    if (static_params) {
        tgc_conv_params p = *static_params;
        if (p.n < 1)
            p.n = 1; /* n is never baked in */
        st = tgc_conv_params_check(&p);
        if (st != TGC_OK)
            return st;
        k->has_static = 1;
        k->static_params = *static_params;
        int64_t cg = p.c / p.groups;
        int64_t vals[TGC_CONV_GEOM_COUNT] = {
            [TGC_CG_C] = cg,
            [TGC_CG_H] = p.h,
            [TGC_CG_W] = p.w,
            [TGC_CG_KH] = p.kh,
            [TGC_CG_KW] = p.kw,
            [TGC_CG_SH] = p.stride_h,
            [TGC_CG_SW] = p.stride_w,
            [TGC_CG_PH] = p.pad_h,
            [TGC_CG_PW] = p.pad_w,
            [TGC_CG_DH] = p.dil_h,
            [TGC_CG_DW] = p.dil_w,
            [TGC_CG_OH] = tgc_conv_out_h(&p),
            [TGC_CG_OW] = tgc_conv_out_w(&p),
        };
        memcpy(g, vals, sizeof g);
    }
    LLVMBasicBlockRef saved = LLVMGetInsertBlock(u->b);
    k->kind = TGC_GEMM_KIND_CONV;
    emit_common(&e, base, ep, k);
    if (static_params) {
        /* named by geometry, so a model's repeated conv shapes share one routine */
        snprintf(k->conv_pack_name, sizeof k->conv_pack_name,
                 "tgc_im2col_nr%d_%lldx%lld_k%lldx%lld_s%lldx%lld_p%lldx%lld_d%lldx%lld", e.nr,
                 (long long)g[TGC_CG_H], (long long)g[TGC_CG_W], (long long)g[TGC_CG_KH],
                 (long long)g[TGC_CG_KW], (long long)g[TGC_CG_SH], (long long)g[TGC_CG_SW],
                 (long long)g[TGC_CG_PH], (long long)g[TGC_CG_PW], (long long)g[TGC_CG_DH],
                 (long long)g[TGC_CG_DW]);
        if (!have_fn(&e, k->conv_pack_name))
            emit_conv_pack(&e, k->conv_pack_name, g);
    } else {
        snprintf(k->conv_pack_name, sizeof k->conv_pack_name, "tgc_conv_pack_b_nr%d", e.nr);
        if (!have_fn(&e, k->conv_pack_name))
            emit_conv_pack(&e, k->conv_pack_name, NULL);
    }
    if (saved)
        LLVMPositionBuilderAtEnd(u->b, saved);
    return TGC_OK;
}

tgc_status tgc_llvm_conv_emit(tgc_llvm_unit *u, const char *base,
                              const tgc_conv_params *static_params, const tgc_gemm_epilogue *ep,
                              tgc_gemm_kernel *k)
{
    return tgc_llvm_conv_emit_cfg(u, base, static_params, ep, NULL, k);
}

tgc_status tgc_gemm_kernel_bind(tgc_gemm_kernel *k, tgc_llvm_code *code)
{
    if (!k || !code || !k->kind)
        return tgc_set_error(TGC_ERR_INVALID_ARG,
                             "tgc_gemm_kernel_bind: needs an emitted kernel and its code");
    k->ukr = (tgc_gemm_ukr_fn)tgc_llvm_code_lookup(code, k->ukr_name);
    k->pack_a = (tgc_gemm_pack_a_fn)tgc_llvm_code_lookup(code, k->pack_a_name);
    k->pack_b = (tgc_gemm_pack_b_fn)tgc_llvm_code_lookup(code, k->pack_b_name);
    if (k->kind == TGC_GEMM_KIND_CONV)
        k->conv_pack_b = (tgc_conv_pack_b_fn)tgc_llvm_code_lookup(code, k->conv_pack_name);
    if (k->ep_name[0])
        k->ep = (tgc_gemm_ep_fn)tgc_llvm_code_lookup(code, k->ep_name);
    if (!k->ukr || !k->pack_a || !k->pack_b || (k->kind == TGC_GEMM_KIND_CONV && !k->conv_pack_b) ||
        (k->ep_name[0] && !k->ep)) {
        k->ukr = NULL;
        return TGC_ERR_COMPILE; /* the lookup set the message */
    }
    return TGC_OK;
}
