/* More cases of the trace_eager_cases.h grammar (see there), kept in a list of their own
 * that every includer puts after all its other cases: test_cuda_public seeds a case's inputs
 * by its position, so a case added here changes no other case's data. Add new cases at the
 * end of this file. */
/* clang-format off: one case per line */
TE_CASE(sin, "tgc_sin", TE_EXACT, "n:D,5 | nT:3,D | h:D,3 | q:D,2", tgc_sin(A0))
TE_CASE(cos, "tgc_cos", TE_EXACT, "n:D,5 | nE:3,D | g:D,3 | d:D,2", tgc_cos(A0))
TE_CASE(logsumexp, "tgc_logsumexp", TE_REL, "n:3,D,5 | nT:4,5,D | q:D,3 | h:D,4", tgc_logsumexp(A0, DIMS(1), 1, 0))
TE_CASE(logsumexp_keep, "tgc_logsumexp", TE_REL, "n:D,3,4 | nS:2,D,3 | d:D,2,3", tgc_logsumexp(A0, DIMS(0, 2), 2, 1))
TE_CASE(rms_norm, "tgc_rms_norm", TE_REL, "n:D,6 @n:6 | nT:3,D,6 @n:6 | h:D,6 @h:6", tgc_rms_norm(A0, 1, P0, -1.0))
TE_CASE(rms_norm_bare, "tgc_rms_norm", TE_REL, "n:D,3,4 | nS:2,D,3,4", tgc_rms_norm(A0, 2, NULL, 1e-6))
TE_CASE(group_norm, "tgc_group_norm", TE_REL, "n:D,6,3,2 @n:6 @n:6 | nT:2,6,D @n:6 @n:6 | h:D,6,4 @h:6 @h:6", tgc_group_norm(A0, 3, P0, P1, 1e-5))
TE_CASE(group_norm_bare, "tgc_group_norm", TE_REL, "n:D,4,5 | nS:2,4,D", tgc_group_norm(A0, 4, NULL, NULL, 1e-5))
TE_CASE(flip, "tgc_flip", TE_EXACT, "n:D,5,3 | nT:4,D,3 | q:D,3,2 | h:2,D,3 | n:0,D,2", tgc_flip(A0, DIMS(0, 2), 2))
TE_CASE(flip_last, "tgc_flip", TE_EXACT, "n:D,5 | nS:3,D | b:D,3 | m:D,1,4", tgc_flip(A0, DIMS(-1), 1))
TE_CASE(flip_conv_weight, "tgc_flip tgc_permute", TE_EXACT, "n:D,3,3,3 | nE:2,D,1,3 | g:D,2,3,2", tgc_flip(tgc_permute(A0, DIMS(1, 0, 2, 3), 4), DIMS(2, 3), 2))
TE_CASE(pad_crop, "tgc_pad", TE_EXACT, "n:2,D,5 | nT:3,D,6 | h:D,2,4 | g:D,3,3", tgc_pad(A0, SHAPE(-2, 1, 1, -1), 2, 0.25))
TE_CASE(pad_three_dims, "tgc_pad", TE_EXACT, "n:2,D,3,2 | q:D,2,2", tgc_pad(A0, SHAPE(1, 0, 0, 1, 1, 1), 3, -2.0))
TE_CASE(conv2d_dead_taps, "tgc_conv2d", TE_REL, "n:D,4,1,1 @n:5,4,3,3 @n:5 | n:D,3,1,3 @n:4,3,3,3 @n:4", tgc_conv2d(A0, P0, P1, &(tgc_conv2d_opts){.padding = {1, 1}}))
TE_CASE(conv2d_dead_taps_strided, "tgc_conv2d", TE_REL, "n:D,4,2,2 @n:6,4,3,3 | nT:D,4,2,2 @n:6,4,3,3", tgc_conv2d(A0, P0, NULL, &(tgc_conv2d_opts){.stride = {2, 2}, .padding = {1, 1}}))
TE_CASE(conv2d_channels_last, "tgc_conv2d tgc_permute", TE_REL, "n:2,D,7,8 @n:16,3,3,8 @n:16 | n:1,5,D,12 @n:16,3,3,12 @n:16 | n:2,D,5,6 @n:4,3,3,6 @n:4", tgc_conv2d(tgc_permute(A0, DIMS(0, 3, 1, 2), 4), tgc_permute(P0, DIMS(0, 3, 1, 2), 4), P1, &(tgc_conv2d_opts){.padding = {1, 1}}))
TE_CASE(conv2d_channels_last_x, "tgc_conv2d tgc_permute", TE_REL, "n:2,D,6,8 @n:8,8,3,3 | n:1,7,D,4 @n:6,4,3,2", tgc_conv2d(tgc_permute(A0, DIMS(0, 3, 1, 2), 4), P0, NULL, &(tgc_conv2d_opts){.stride = {2, 1}, .padding = {1, 1}}))
#ifdef TGC_FRONTEND_OPS_GRAD_H
TE_CASE(conv2d_grad_input_dead_taps, "tgc_conv2d_grad_input", TE_REL, "n:D,5,1,1 n:5,4,3,3 n:D,4,1,1 | n:D,5,1,3 n:5,4,3,3 n:D,4,1,3", tgc_conv2d_grad_input(A0, A1, TE_CONV_SAME, A2))
TE_CASE(conv2d_grad_weight_dead_taps, "tgc_conv2d_grad_weight", TE_REL, "n:D,4,1,1 n:D,5,1,1 n:5,4,3,3 | n:D,4,1,3 n:D,5,1,3 n:5,4,3,3", tgc_conv2d_grad_weight(A0, A1, TE_CONV_SAME, A2))
#endif
/* clang-format on */
