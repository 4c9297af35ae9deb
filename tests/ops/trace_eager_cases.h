/* The case table of tests/ops/test_trace_eager.c: one line per case.
 *
 *   TE_CASE(id, "public op functions it calls", tolerance, "input variants", expression)
 *
 * The expression is the body of a model function: it may use A0..A4 (in[0..4] of tgc_call,
 * the non-module inputs in the order listed) and P0..P6 (the module's tensors p0..p6, in the
 * order listed). Its value is out[0].
 *
 * Input variants are separated by '|'; within a variant, inputs by spaces:
 *
 *   [@|%] kind [N] [T|S|E] : dims
 *
 *   @ a module parameter, % a module buffer (otherwise an argument of tgc_call)
 *   kind  n randn f32        u rand f32 in [0,1)    p rand f32 in [0.5,1.5)
 *         h randn f16        g randn bf16           d randn f64
 *         b bool             q i32 in [-4,4]        m i64 in [-4,4]     v i32 in [1,6]
 *         iN i64 in [0,N)    jN i32 in [0,N)        (N a number or D)
 *   T     a transposed view (made with its last two dims swapped, then transposed back)
 *   S     a strided view (made with the last dim doubled, then sliced with step 2)
 *   E     an expanded view (dim 0 made with size 1, then expanded: stride 0)
 *   dims  comma separated sizes; D is the size that the dynamic pass varies (empty: 0-d)
 *
 * Every case lists at least one variant with D (the dynamic pass needs one). Tolerances:
 * TE_EXACT (bitwise equal values, NaN == NaN) or TE_REL (1e-5 relative, for reductions). */

/* clang-format off: one case per line */
#define A0 (in[0])
#define A1 (in[1])
#define A2 (in[2])
#define A3 (in[3])
#define A4 (in[4])
#define P0 (tgc_module_get(self, "p0"))
#define P1 (tgc_module_get(self, "p1"))
#define P2 (tgc_module_get(self, "p2"))
#define P3 (tgc_module_get(self, "p3"))
#define P4 (tgc_module_get(self, "p4"))
#define P5 (tgc_module_get(self, "p5"))
#define P6 (tgc_module_get(self, "p6"))
#define DIMS(...) ((const int[]){__VA_ARGS__})
#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define TS(...) ((tgc_tensor *const[]){__VA_ARGS__})

/* ---- elementwise, binary (broadcasting, promotion, views) ---- */
TE_CASE(add, "tgc_add", TE_EXACT, "n:D,5 n:5 | nT:5,D n:1,D | n:1,D,1 n:3,1,4 | h:D,3 nS:3 | q:D,3 n:3 | m:D,2 q:D,2 | n:0,5 n:5", tgc_add(A0, A1))
TE_CASE(sub, "tgc_sub", TE_EXACT, "n:D,5 nS:5 | n:4,1,D n:3,1 | nE:3,D n:D | m:D,3 q:3", tgc_sub(A0, A1))
TE_CASE(mul, "tgc_mul", TE_EXACT, "n:D,7 nT:D,7 | nE:3,D n:1 | b:D,3 n:D,3 | g:D,2 h:D,2 | n: n:D,3", tgc_mul(A0, A1))
TE_CASE(div, "tgc_div", TE_EXACT, "n:D,5 p:5 | nT:3,D pS:3,1 | m:D,4 v:D,4 | h:D,3 p:1", tgc_div(A0, A1))
TE_CASE(pow, "tgc_pow", TE_EXACT, "p:D,5 n:5 | pT:4,D u:1 | m:D,3 v:D,3 | p:D,2 q:2", tgc_pow(A0, A1))
TE_CASE(maximum, "tgc_maximum", TE_EXACT, "n:D,5 n:5 | nT:5,D n:5,1 | q:D,3 n:3 | q:1,D m:4,1", tgc_maximum(A0, A1))
TE_CASE(minimum, "tgc_minimum", TE_EXACT, "n:D,5 n:5 | nT:5,D n:5,1 | q:D,3 n:3 | nS:D,1 nE:3,1,D", tgc_minimum(A0, A1))
TE_CASE(eq, "tgc_eq", TE_EXACT, "q:D,6 q:6 | qT:4,D q:1,D | b:D,3 b:3 | m:D,2 q:D,2 | n:D,3 n:D,1", tgc_eq(A0, A1))
TE_CASE(ne, "tgc_ne", TE_EXACT, "q:D,6 q:6 | qT:4,D q:1,D | b:D,3 b:3 | m:D,2 q:D,2", tgc_ne(A0, A1))
TE_CASE(lt, "tgc_lt", TE_EXACT, "n:D,5 n:5 | nT:5,D n:5,1 | q:D,4 q:4 | h:D,3 n:3", tgc_lt(A0, A1))
TE_CASE(le, "tgc_le", TE_EXACT, "n:D,5 n:5 | nT:5,D n:5,1 | q:D,4 q:4 | m:1,D q:3,1", tgc_le(A0, A1))
TE_CASE(gt, "tgc_gt", TE_EXACT, "n:D,5 n:5 | nT:5,D n:5,1 | q:D,4 q:4 | nS:D,3 g:3", tgc_gt(A0, A1))
TE_CASE(ge, "tgc_ge", TE_EXACT, "n:D,5 n:5 | nT:5,D n:5,1 | q:D,4 q:4 | b:D,2 b:1,2", tgc_ge(A0, A1))
TE_CASE(where, "tgc_where", TE_EXACT, "b:D,5 n:D,5 n:5 | b:5,1 nT:5,D n:1 | b:D,3 q:D,3 n:3 | b:D,1,4 m:3,1 q:1", tgc_where(A0, A1, A2))

/* ---- scalar forms ---- */
TE_CASE(add_scalar, "tgc_add_scalar", TE_EXACT, "n:D,5 | nT:4,D | q:D,3 | h:1,D", tgc_add_scalar(A0, 2.5))
TE_CASE(add_scalar_int, "tgc_add_scalar", TE_EXACT, "q:D,3 | m:D,2 | b:D,3", tgc_add_scalar(A0, 3))
TE_CASE(sub_scalar, "tgc_sub_scalar", TE_EXACT, "n:D,5 | nS:4,D | m:D,3", tgc_sub_scalar(A0, 0.75))
TE_CASE(mul_scalar, "tgc_mul_scalar", TE_EXACT, "n:D,5 | nT:4,D | q:D,3 | g:D,2", tgc_mul_scalar(A0, -1.5))
TE_CASE(div_scalar, "tgc_div_scalar", TE_EXACT, "n:D,5 | nE:4,D | q:D,3", tgc_div_scalar(A0, 3.0))
TE_CASE(pow_scalar, "tgc_pow_scalar", TE_EXACT, "p:D,5 | pT:4,D | q:D,3", tgc_pow_scalar(A0, 3.0))
TE_CASE(pow_scalar_frac, "tgc_pow_scalar", TE_EXACT, "p:D,5 | pS:1,D", tgc_pow_scalar(A0, 0.5))
TE_CASE(clamp, "tgc_clamp", TE_EXACT, "n:D,5 | nT:4,D | q:D,3 | h:D,1", tgc_clamp(A0, -0.5, 1.0))

/* ---- elementwise, unary ---- */
TE_CASE(neg, "tgc_neg", TE_EXACT, "n:D,5 | nT:3,D | m:D,3 | h:1,D,1", tgc_neg(A0))
TE_CASE(abs, "tgc_abs", TE_EXACT, "n:D,5 | nS:3,D | q:D,3 | g:D,2", tgc_abs(A0))
TE_CASE(exp, "tgc_exp", TE_EXACT, "n:D,5 | nT:3,D | q:D,3 | h:D,1", tgc_exp(A0))
TE_CASE(log, "tgc_log", TE_EXACT, "p:D,5 | pT:3,D | v:D,3 | n:D,2", tgc_log(A0))
TE_CASE(sqrt, "tgc_sqrt", TE_EXACT, "p:D,5 | pE:3,D | v:D,3", tgc_sqrt(A0))
TE_CASE(rsqrt, "tgc_rsqrt", TE_EXACT, "p:D,5 | pT:3,D | v:D,3", tgc_rsqrt(A0))
TE_CASE(tanh, "tgc_tanh", TE_EXACT, "n:D,5 | nT:3,D | q:D,3", tgc_tanh(A0))
TE_CASE(sigmoid, "tgc_sigmoid", TE_EXACT, "n:D,5 | nS:3,D | h:D,3", tgc_sigmoid(A0))
TE_CASE(relu, "tgc_relu", TE_EXACT, "n:D,5 | nT:3,D | q:D,3 | n:1,D,1 | n:", tgc_relu(A0))
TE_CASE(gelu, "tgc_gelu", TE_EXACT, "n:D,5 | nT:3,D | q:D,3", tgc_gelu(A0))
TE_CASE(gelu_tanh, "tgc_gelu_tanh", TE_EXACT, "n:D,5 | nS:3,D | g:D,3", tgc_gelu_tanh(A0))
TE_CASE(silu, "tgc_silu", TE_EXACT, "n:D,5 | nT:3,D | q:D,3", tgc_silu(A0))
TE_CASE(erf, "tgc_erf", TE_EXACT, "n:D,5 | nE:3,D | h:D,3", tgc_erf(A0))
TE_CASE(cast_i32, "tgc_cast", TE_EXACT, "n:D,5 | nT:3,D | m:D,2", tgc_cast(tgc_mul_scalar(A0, 3.0), TGC_I32))
TE_CASE(cast_i64, "tgc_cast", TE_EXACT, "n:D,5 | q:D,3 | b:D,2", tgc_cast(A0, TGC_I64))
TE_CASE(cast_f16, "tgc_cast", TE_EXACT, "n:D,5 | nS:3,D | q:D,2 | g:D,2", tgc_cast(A0, TGC_F16))
TE_CASE(cast_bf16, "tgc_cast", TE_EXACT, "n:D,5 | nT:3,D | h:D,2", tgc_cast(A0, TGC_BF16))
TE_CASE(cast_bool, "tgc_cast", TE_EXACT, "q:D,5 | qT:3,D | n:D,2", tgc_cast(A0, TGC_BOOL))
TE_CASE(cast_f32, "tgc_cast", TE_EXACT, "m:D,5 | b:D,3 | h:D,2 | d:D,2 | n:D,2", tgc_cast(A0, TGC_F32))
TE_CASE(cast_f64, "tgc_cast", TE_EXACT, "n:D,5 | q:D,3 | g:D,2", tgc_cast(A0, TGC_F64))

/* ---- reductions ---- */
TE_CASE(sum, "tgc_sum", TE_REL, "n:3,D,5 | nT:4,5,D | nS:D,1,5 | q:D,3,2 | b:D,3,2 | h:D,4,1 | n:2,0,3", tgc_sum(A0, DIMS(1), 1, 0))
TE_CASE(sum_all, "tgc_sum", TE_REL, "n:D,5 | nT:3,D | m:D,4,1 | n:1,D | n:", tgc_sum(A0, NULL, 0, 0))
TE_CASE(mean, "tgc_mean", TE_REL, "n:3,D,5 | nT:4,5,D | q:D,3,2 | nE:3,1,D", tgc_mean(A0, DIMS(0, 2), 2, 1))
TE_CASE(max, "tgc_max", TE_REL, "n:3,D,5 | nT:4,5,D | q:D,3,2 | h:D,1,3", tgc_max(A0, DIMS(-1), 1, 0))
TE_CASE(max_all, "tgc_max", TE_REL, "n:D,5 | nS:3,D | m:D,4 | n:", tgc_max(A0, NULL, 0, 1))
TE_CASE(argmax, "tgc_argmax", TE_EXACT, "n:3,D,5 | nT:4,5,D | q:D,3,2 | n:D,1,3", tgc_argmax(A0, 1, 1))
TE_CASE(argmax_last, "tgc_argmax", TE_EXACT, "n:D,7 | nS:4,D | b:D,3", tgc_argmax(A0, -1, 0))
TE_CASE(var, "tgc_var", TE_REL, "n:3,D,5 | nT:4,5,D | q:D,3,2 | n:D,1,3", tgc_var(A0, DIMS(1), 1, 1, 0))
TE_CASE(var_all, "tgc_var", TE_REL, "n:D,5 | nE:3,D | h:D,4", tgc_var(A0, NULL, 0, 0, 1))
TE_CASE(softmax, "tgc_softmax", TE_REL, "n:3,D,5 | nT:4,5,D | q:D,3 | n:D,1", tgc_softmax(A0, -1))
TE_CASE(softmax_dim0, "tgc_softmax", TE_REL, "n:D,5 | nS:D,3 | h:D,2", tgc_softmax(A0, 0))
TE_CASE(log_softmax, "tgc_log_softmax", TE_REL, "n:3,D,5 | nT:4,5,D | q:D,3 | n:D,1,2", tgc_log_softmax(A0, 1))

/* ---- views and movement ---- */
TE_CASE(reshape, "tgc_reshape", TE_EXACT, "n:D,3,4 | nT:2,3,D | nS:D,2,2 | q:1,D,2 | nE:3,D,2", tgc_reshape(A0, SHAPE(0, -1), 2))
TE_CASE(reshape_split, "tgc_reshape", TE_EXACT, "n:D,6 | nT:D,6 | h:D,6", tgc_reshape(A0, SHAPE(-1, 3, 2), 3))
TE_CASE(reshape_merge, "tgc_reshape", TE_EXACT, "n:2,3,D | nT:2,D,3", tgc_reshape(A0, SHAPE(6, -1), 2))
TE_CASE(permute, "tgc_permute", TE_EXACT, "n:3,D,4 | nT:2,4,D | b:D,2,3 | n:1,D,1 | nE:2,D,3", tgc_permute(A0, DIMS(2, 0, 1), 3))
TE_CASE(transpose, "tgc_transpose", TE_EXACT, "n:3,D,4 | nT:2,4,D | m:D,2,3", tgc_transpose(A0, 0, 2))
TE_CASE(transpose_last, "tgc_transpose", TE_EXACT, "n:D,4 | nT:3,D | nS:1,D", tgc_transpose(A0, -1, -2))
TE_CASE(reshape_sym, "tgc_reshape_sym", TE_EXACT, "n:D,6 | nT:D,6 | q:D,6", tgc_reshape_sym(A0, ((const tgc_symint[]){tgc_symint_const(3), tgc_sym_size(A0, 0), tgc_symint_const(2)}), 3))
TE_CASE(reshape_as, "tgc_reshape_as", TE_EXACT, "n:D,6 n:6,D | nT:D,4 n:2,D,2", tgc_reshape_as(A0, A1))
TE_CASE(expand, "tgc_expand", TE_EXACT, "n:D,1 | nS:D,1 | q:1,1", tgc_expand(A0, SHAPE(3, -1, 4), 3))
TE_CASE(expand_sym, "tgc_expand_sym", TE_EXACT, "n:D,1 | nS:D,1 | q:D,1", tgc_expand_sym(A0, ((const tgc_symint[]){tgc_symint_const(2), tgc_symint_const(-1), tgc_symint_mul(tgc_sym_size(A0, 0), tgc_symint_const(2))}), 3))
TE_CASE(expand_as, "tgc_expand_as", TE_EXACT, "n:1,3 n:D,3 | nT:D,1 n:2,D,4", tgc_expand_as(A0, A1))
TE_CASE(arange_sym, "tgc_add tgc_unsqueeze", TE_EXACT, "n:D,3 | nT:D,2", tgc_add(A0, tgc_unsqueeze(tgc_arange_sym(-2, tgc_symint_sub(tgc_symint_mul(tgc_sym_size(A0, 0), tgc_symint_const(3)), tgc_symint_const(2)), 3, TGC_F32, tgc_cpu()), 1)))
TE_CASE(expand_same, "tgc_expand", TE_EXACT, "n:1,D | nT:1,D", tgc_expand(A0, SHAPE(4, -1), 2))
TE_CASE(squeeze, "tgc_squeeze", TE_EXACT, "n:D,1,3 | nT:D,1,3 | n:1,1,1", tgc_squeeze(A0, 1))
TE_CASE(squeeze_all, "tgc_squeeze", TE_EXACT, "n:1,D,1,3 | nS:1,D,1,1 | q:D,4", tgc_squeeze(A0, TGC_ALL_DIMS))
TE_CASE(unsqueeze, "tgc_unsqueeze", TE_EXACT, "n:D,3 | nT:D,3 | b:D", tgc_unsqueeze(A0, -1))
TE_CASE(unsqueeze_front, "tgc_unsqueeze", TE_EXACT, "n:D,3 | nS:D,3 | n:", tgc_unsqueeze(A0, 0))
TE_CASE(slice, "tgc_slice", TE_EXACT, "n:3,D | nT:4,D | q:2,D,3 | n:1,D", tgc_slice(A0, 1, 1, -1, 2))
TE_CASE(slice_neg, "tgc_slice", TE_EXACT, "n:D,4 | nS:D,3 | m:D,2", tgc_slice(A0, 0, -3, 100, 1))
TE_CASE(flatten, "tgc_flatten", TE_EXACT, "n:2,D,3,4 | nT:2,3,4,D | nS:1,D,2,3 | nE:2,D,1,3", tgc_flatten(A0, 1, -1))
TE_CASE(flatten_front, "tgc_flatten", TE_EXACT, "n:D,3,2 | nT:D,3,2", tgc_flatten(A0, 0, 1))
TE_CASE(contiguous, "tgc_contiguous", TE_EXACT, "nT:3,D | n:D,3 | nS:D,4 | nE:3,D | b:D,2", tgc_contiguous(A0))
TE_CASE(cat, "tgc_cat", TE_EXACT, "n:3,D n:3,2 nT:3,4 | n:1,D n:1,1 nS:1,3 | q:2,D m:2,3 n:2,1 | n:3,D n:3,0 n:3,2", tgc_cat(TS(A0, A1, A2), 3, 1))
TE_CASE(cat_dim0, "tgc_cat", TE_EXACT, "n:D,3 nT:2,3 | h:D,2 n:D,2", tgc_cat(TS(A0, A1), 2, 0))
TE_CASE(stack, "tgc_stack", TE_EXACT, "n:D,3 nT:D,3 | n:1,D nS:1,D | b:D,2 q:D,2", tgc_stack(TS(A0, A1), 2, -1))
TE_CASE(stack_front, "tgc_stack", TE_EXACT, "n:D,3 nE:D,3 n:D,3", tgc_stack(TS(A0, A1, A2), 3, 0))
TE_CASE(pad, "tgc_pad", TE_EXACT, "n:2,D,3 | nT:2,3,D | q:D,1,1 | n:1,D,1", tgc_pad(A0, SHAPE(1, 2, 0, 3), 2, 0.5))
TE_CASE(pad_last, "tgc_pad", TE_EXACT, "n:D,3 | nS:D,3 | h:D,2", tgc_pad(A0, SHAPE(2, 1), 1, -1.0))

/* ---- indexing ---- */
TE_CASE(embedding, "tgc_embedding", TE_EXACT, "@n:7,4 i7:D,3 | @n:7,4 j7:D | @n:7,4 i7:1,D,1", tgc_embedding(P0, A0))
TE_CASE(embedding_arg, "tgc_embedding", TE_EXACT, "n:7,D i7:3,2 | nT:7,D j7:5 | h:D,3 j2:D", tgc_embedding(A0, A1))
TE_CASE(gather, "tgc_gather", TE_EXACT, "n:3,D iD:3,4 | nT:3,D jD:2,2 | q:3,D iD:1,D", tgc_gather(A0, 1, A1))
TE_CASE(gather_dim0, "tgc_gather", TE_EXACT, "n:D,4 iD:3,4 | nS:D,4 jD:D,1", tgc_gather(A0, 0, A1))
TE_CASE(index_select, "tgc_index_select", TE_EXACT, "n:D,5 iD:4 | nT:6,D j6:D | m:D,2 iD:1", tgc_index_select(A0, 0, A1))
TE_CASE(index_select_last, "tgc_index_select", TE_EXACT, "n:3,D iD:D | nS:3,D j2:5", tgc_index_select(A0, -1, A1))

/* ---- linear algebra ---- */
TE_CASE(matmul, "tgc_matmul", TE_REL, "n:D,5 n:5,3 | n:2,D,5 nT:5,4 | n:5 n:3,5,D | n:D,4 n:4 | n:2,1,D,3 n:4,3,2 | nT:D,5 nS:5,D | n:1,D n:D,1 | n:D,0 n:0,3", tgc_matmul(A0, A1))
TE_CASE(linear, "tgc_linear", TE_REL, "n:D,6 @n:4,6 @n:4 | nT:3,D,6 @n:4,6 @n:4 | n:6 @n:1,6 @n:1", tgc_linear(A0, P0, P1))
TE_CASE(linear_nobias, "tgc_linear", TE_REL, "n:D,6 n:4,6 | n:2,D,6 nT:4,6 | nS:D,6 n:D,6", tgc_linear(A0, A1, NULL))

/* ---- convolution and pooling ---- */
TE_CASE(conv2d, "tgc_conv2d", TE_REL, "n:2,3,D,7 @n:4,3,3,3 @n:4 | nT:1,3,7,D @n:4,3,3,3 @n:4 | n:1,3,D,1 @n:4,3,3,1 @n:4", tgc_conv2d(A0, P0, P1, &(tgc_conv2d_opts){.padding = {1, 1}}))
TE_CASE(conv2d_strided, "tgc_conv2d", TE_REL, "n:2,4,D,9 @n:6,2,3,2 | nS:1,4,D,8 @n:6,2,3,2", tgc_conv2d(A0, P0, NULL, &(tgc_conv2d_opts){.stride = {2, 1}, .padding = {1, 2}, .dilation = {2, 1}, .groups = 2}))
TE_CASE(conv2d_depthwise, "tgc_conv2d", TE_REL, "n:2,3,D,6 n:3,1,3,3 n:3 | nT:1,3,5,D n:3,1,3,3 n:3", tgc_conv2d(A0, A1, A2, &(tgc_conv2d_opts){.stride = {2, 2}, .padding = {1, 1}, .groups = 3}))
TE_CASE(max_pool2d, "tgc_max_pool2d", TE_REL, "n:2,3,D,8 | nT:1,2,9,D | h:1,1,D,5", tgc_max_pool2d(A0, &(tgc_pool2d_opts){.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}))
TE_CASE(max_pool2d_k2, "tgc_max_pool2d", TE_REL, "n:2,3,D,8 | nS:1,2,D,7", tgc_max_pool2d(A0, &(tgc_pool2d_opts){.kernel = {2, 2}}))
TE_CASE(avg_pool2d, "tgc_avg_pool2d", TE_REL, "n:2,3,D,8 | nT:1,2,9,D | n:1,1,D,2", tgc_avg_pool2d(A0, &(tgc_pool2d_opts){.kernel = {3, 2}, .stride = {2, 1}, .padding = {1, 0}}))
TE_CASE(adaptive_avg_pool2d, "tgc_adaptive_avg_pool2d", TE_REL, "n:2,3,D,7 | nT:1,2,8,D | nS:1,1,D,3", tgc_adaptive_avg_pool2d(A0, 3, 2))

/* ---- normalization, dropout ---- */
TE_CASE(batch_norm_train, "tgc_batch_norm", TE_REL, "n:D,3,4,5 %n:3 %p:3 @n:3 @n:3 | nT:D,3,5,4 %n:3 %p:3 @n:3 @n:3 | n:D,3 %n:3 %p:3 @n:3 @n:3", tgc_batch_norm(A0, P0, P1, P2, P3, 1, 0.1, 1e-5))
TE_CASE(batch_norm_train_bare, "tgc_batch_norm", TE_REL, "n:D,3,4 | nS:D,2,5,3", tgc_batch_norm(A0, NULL, NULL, NULL, NULL, 1, 0.1, 1e-5))
TE_CASE(batch_norm_eval, "tgc_batch_norm", TE_REL, "n:D,3,4,5 %n:3 %p:3 @n:3 @n:3 | nT:D,3,5,4 %n:3 %p:3 @n:3 @n:3 | n:D,3 %n:3 %p:3 @n:3 @n:3", tgc_batch_norm(A0, P0, P1, P2, P3, 0, 0.1, 1e-5))
TE_CASE(layer_norm, "tgc_layer_norm", TE_REL, "n:D,6 @n:6 @n:6 | nT:3,D,6 @n:6 @n:6 | h:D,6 @h:6 @h:6", tgc_layer_norm(A0, 1, P0, P1, 1e-5))
TE_CASE(layer_norm_bare, "tgc_layer_norm", TE_REL, "n:D,3,4 | nS:2,D,3,4 | n:D,1,1", tgc_layer_norm(A0, 2, NULL, NULL, 1e-5))
TE_CASE(dropout, "tgc_dropout", TE_EXACT, "n:D,50 | nT:40,D | nS:D,3,7 | h:D,9", tgc_dropout(A0, 0.3, 1))
TE_CASE(dropout_twice, "tgc_dropout", TE_EXACT, "n:D,20 | nT:9,D", tgc_add(tgc_dropout(A0, 0.5, 1), tgc_dropout(A0, 0.25, 1)))
TE_CASE(dropout_eval, "tgc_dropout", TE_EXACT, "n:D,20 | nT:9,D", tgc_dropout(A0, 0.3, 0))

/* ---- losses ---- */
TE_CASE(cross_entropy, "tgc_cross_entropy", TE_REL, "n:D,5 i5:D | nT:D,5 j5:D | n:D,4,3 i4:D,3", tgc_cross_entropy(A0, A1, TGC_REDUCE_MEAN, -100, 0.0))
TE_CASE(cross_entropy_smooth, "tgc_cross_entropy", TE_REL, "n:D,5 i5:D | nS:D,5 j5:D | n:2,4,D i4:2,D", tgc_cross_entropy(A0, A1, TGC_REDUCE_MEAN, 2, 0.1))
TE_CASE(cross_entropy_none, "tgc_cross_entropy", TE_REL, "n:D,5 i5:D | nT:D,5 j5:D | n:D,4,3 i4:D,3", tgc_cross_entropy(A0, A1, TGC_REDUCE_NONE, 1, 0.0))
TE_CASE(cross_entropy_sum, "tgc_cross_entropy", TE_REL, "n:D,5 i5:D | n:D,4,3 i4:D,3", tgc_cross_entropy(A0, A1, TGC_REDUCE_SUM, -100, 0.2))
TE_CASE(nll_loss, "tgc_nll_loss", TE_REL, "n:D,5 i5:D | nT:D,5 j5:D", tgc_nll_loss(A0, A1, TGC_REDUCE_MEAN, -100))
TE_CASE(nll_loss_none, "tgc_nll_loss", TE_REL, "n:D,5 i5:D | nS:D,5 j5:D", tgc_nll_loss(A0, A1, TGC_REDUCE_NONE, 3))
TE_CASE(nll_loss_sum, "tgc_nll_loss", TE_REL, "n:D,5 i5:D | nT:D,5 j5:D", tgc_nll_loss(tgc_log_softmax(A0, 1), A1, TGC_REDUCE_SUM, 0))

/* ---- attention ---- */
TE_CASE(sdpa, "tgc_scaled_dot_product_attention", TE_REL, "n:2,D,8 n:2,6,8 n:2,6,4 | nT:2,D,8 nS:2,6,8 n:1,6,4 | n:D,8 n:6,8 n:6,3", tgc_scaled_dot_product_attention(A0, A1, A2, NULL, 0.0, 0, 0.0))
TE_CASE(sdpa_bool_mask, "tgc_scaled_dot_product_attention", TE_REL, "n:2,D,8 n:2,6,8 n:2,6,4 b:D,6 | n:2,3,D,4 n:2,3,5,4 n:2,3,5,4 b:2,1,D,5", tgc_scaled_dot_product_attention(A0, A1, A2, A3, 0.0, 0, 0.0))
TE_CASE(sdpa_float_mask, "tgc_scaled_dot_product_attention", TE_REL, "n:2,D,8 n:2,6,8 n:2,6,4 n:D,6 | nT:2,D,4 n:2,5,4 n:2,5,4 n:2,1,5", tgc_scaled_dot_product_attention(A0, A1, A2, A3, 0.0, 0, 0.5))
TE_CASE(sdpa_causal, "tgc_scaled_dot_product_attention", TE_REL, "n:2,D,8 n:2,D,8 n:2,D,4 | n:2,D,4 n:2,7,4 nT:2,7,3", tgc_scaled_dot_product_attention(A0, A1, A2, NULL, 0.0, 1, 0.0))
TE_CASE(sdpa_dropout, "tgc_scaled_dot_product_attention", TE_REL, "n:2,D,8 n:2,6,8 n:2,6,4 | n:2,D,4 n:2,D,4 nS:2,D,4", tgc_scaled_dot_product_attention(A0, A1, A2, NULL, 0.2, 1, 0.0))

/* ---- composites: several ops in one graph (intermediates, module tensors, constants) ---- */
#define TE_HEADS(x, w) tgc_transpose(tgc_reshape(tgc_linear((x), (w), NULL), SHAPE(0, 0, 2, -1), 4), 1, 2)
TE_CASE(mlp_block, "tgc_layer_norm tgc_linear tgc_gelu tgc_dropout tgc_add", TE_REL, "n:D,6 @n:6 @n:6 @n:8,6 @n:8 @n:6,8 | nT:2,D,6 @n:6 @n:6 @n:8,6 @n:8 @n:6,8", tgc_add(A0, tgc_dropout(tgc_linear(tgc_gelu(tgc_linear(tgc_layer_norm(A0, 1, P0, P1, 1e-5), P2, P3)), P4, NULL), 0.1, 1)))
TE_CASE(conv_classifier, "tgc_conv2d tgc_batch_norm tgc_relu tgc_max_pool2d tgc_adaptive_avg_pool2d tgc_flatten tgc_linear tgc_cross_entropy", TE_REL, "n:D,3,9,8 i5:D @n:4,3,3,3 %n:4 %p:4 @n:4 @n:4 @n:5,16 @n:5 | nS:D,3,7,7 j5:D @n:4,3,3,3 %n:4 %p:4 @n:4 @n:4 @n:5,16 @n:5", tgc_cross_entropy(tgc_linear(tgc_flatten(tgc_adaptive_avg_pool2d(tgc_max_pool2d(tgc_relu(tgc_batch_norm(tgc_conv2d(A0, P0, NULL, &(tgc_conv2d_opts){.padding = {1, 1}}), P1, P2, P3, P4, 1, 0.1, 1e-5)), &(tgc_pool2d_opts){.kernel = {2, 2}}), 2, 2), 1, -1), P5, P6), A1, TGC_REDUCE_MEAN, -100, 0.1))
TE_CASE(attention_block, "tgc_linear tgc_reshape tgc_transpose tgc_scaled_dot_product_attention tgc_flatten", TE_REL, "n:2,D,8 @n:8,8 @n:8,8 @n:8,8 @n:8,8 | nT:1,D,8 @n:8,8 @n:8,8 @n:8,8 @n:8,8", tgc_linear(tgc_flatten(tgc_transpose(tgc_scaled_dot_product_attention(TE_HEADS(A0, P0), TE_HEADS(A0, P1), TE_HEADS(A0, P2), NULL, 0.1, 1, 0.0), 1, 2), 2, 3), P3, NULL))
#define TE_EVEN_COLS(x) tgc_index_select((x), 1, tgc_arange(0, 4, 2, TGC_I64, tgc_cpu()))
TE_CASE(trace_constants, "tgc_index_select tgc_add tgc_where tgc_gt", TE_EXACT, "n:D,5 | nT:3,D", tgc_where(tgc_gt(TE_EVEN_COLS(A0), tgc_zeros(SHAPE(1), 1, TGC_F32, tgc_cpu())), tgc_add(TE_EVEN_COLS(A0), tgc_ones(SHAPE(1, 2), 2, TGC_F32, tgc_cpu())), tgc_full(SHAPE(1), 1, -7.0, TGC_F32, tgc_cpu())))

/* ---- backward ops (what autograd's rules emit): forward sizes taken from a like tensor
 * (symbolic in the dynamic passes). Last, so the cases above keep their seeds (the seed is
 * the case's index). Their builders are internal (frontend/ops_grad.h): only a suite that
 * includes that header gets these cases (test_trace_eager.c, not the GPU suite of the public
 * API). ---- */
#ifdef TGC_FRONTEND_OPS_GRAD_H
#define TE_CONV_SAME (&(tgc_attrs){.i = {1, 1, 1, 1, 1, 1, 1}, .ni = 7})
#define TE_POOL_SAME(excl) (&(tgc_attrs){.i = {3, 3, 1, 1, 1, 1, (excl)}, .ni = 7})
TE_CASE(conv2d_grad_input, "tgc_conv2d_grad_input", TE_REL, "n:2,4,D,5 n:4,3,3,3 n:2,3,D,5 | nT:1,4,5,D n:4,3,3,3 n:1,3,5,D", tgc_conv2d_grad_input(A0, A1, TE_CONV_SAME, A2))
TE_CASE(conv2d_grad_weight, "tgc_conv2d_grad_weight", TE_REL, "n:2,3,D,5 n:2,4,D,5 n:4,3,3,3 | n:1,3,5,D nT:1,4,5,D n:4,3,3,3", tgc_conv2d_grad_weight(A0, A1, TE_CONV_SAME, A2))
TE_CASE(max_pool2d_grad, "tgc_max_pool2d_grad", TE_REL, "n:2,3,D,6 n:2,3,D,6 | nT:1,2,5,D n:1,2,5,D", tgc_max_pool2d_grad(A0, A1, TE_POOL_SAME(0)))
TE_CASE(avg_pool2d_grad, "tgc_avg_pool2d_grad", TE_REL, "n:2,3,D,6 n:2,3,D,6 | nS:1,2,5,D n:1,2,5,D", tgc_avg_pool2d_grad(A0, TE_POOL_SAME(1), A1))
TE_CASE(adaptive_avg_pool2d_grad, "tgc_adaptive_avg_pool2d_grad", TE_REL, "n:2,3,3,2 n:2,3,D,7 | n:1,3,2 n:1,D,5", tgc_adaptive_avg_pool2d_grad(A0, &(tgc_attrs){.i = {3, 2}, .ni = 2}, A1))
TE_CASE(embedding_grad, "tgc_embedding_grad", TE_REL, "n:D,3,4 i7:D,3 n:7,4 | nT:D,4 j7:D n:7,4", tgc_embedding_grad(A0, A1, A2))
TE_CASE(gather_grad, "tgc_gather_grad", TE_REL, "n:3,D i7:3,D n:3,7 | nT:2,D j7:2,D n:3,7", tgc_gather_grad(A0, A1, 1, A2))
TE_CASE(index_select_grad, "tgc_index_select_grad", TE_REL, "n:D,4 j6:D n:6,4 | nS:D,4 iD:D n:D,4", tgc_index_select_grad(A0, A1, 0, A2))
#endif
