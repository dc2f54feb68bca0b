/* Fusion decisions, kernel structure, FLOP and byte counts (by hand), and the simplification
 * passes, each on small graphs built through the C API. */
#include "testlib.h"

#include "passes_check.h"

static kir_program *compile(const mc_graph *g, bool fuse)
{
    kir_program *kp = check_kernels(g, fuse);
    assert_non_null(kp);
    return kp;
}

static void assert_matches_oracle(const mc_graph *g)
{
    char why[256];
    if (check_graph(g, 3, 1.0, why, sizeof why))
        fail_msg("%s", why);
}

static bool has_op(const kir_kernel *k, mc_op op)
{
    for (int i = 0; i < k->nops; i++)
        if (k->ops[i] == op)
            return true;
    return false;
}

/* ---- counts ---------------------------------------------------------------------------------- */

static void test_count_matmul(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("mm");
    int64_t as[] = {8, 16}, bs[] = {16, 4};
    mc_value y = mc_matmul(g, mc_input(g, "a", MC_F32, as, 2), mc_param(g, "b", MC_F32, bs, 2));
    mc_graph_set_outputs(g, &y, 1);
    kir_program *kp = compile(g, true);
    assert_int_equal(kp->nkernels, 1);
    const kir_kernel *k = &kp->kernels[0];
    assert_int_equal(k->category, KIR_GEMM);
    assert_int_equal(k->gemm.m, 8);
    assert_int_equal(k->gemm.n, 4);
    assert_int_equal(k->gemm.k, 16);
    assert_int_equal(k->flops, 2 * 8 * 4 * 16);          /* 2MNK, nothing else */
    assert_int_equal(k->bytes, (8 * 16 + 16 * 4 + 8 * 4) * 4); /* a, b read once; y written once */
    kir_program_free(kp);
    assert_matches_oracle(g);
    mc_graph_free(g);
}

static void test_count_batched_matmul_epilogue(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("bmm");
    int64_t as[] = {3, 8, 16}, bs[] = {3, 16, 4}, cs[] = {4};
    mc_value a = mc_input(g, "a", MC_F32, as, 3), b = mc_param(g, "b", MC_F32, bs, 3);
    mc_value y = mc_relu(g, mc_add(g, mc_matmul(g, a, b), mc_param(g, "c", MC_F32, cs, 1)));
    mc_graph_set_outputs(g, &y, 1);
    kir_program *kp = compile(g, true);
    assert_int_equal(kp->nkernels, 1);
    const kir_kernel *k = &kp->kernels[0];
    assert_int_equal(k->category, KIR_GEMM);
    assert_true(strncmp(k->name, "gemm_add_relu_", 14) == 0);
    /* 2*B*M*N*K for the product, then add and relu at each of the B*M*N outputs. */
    assert_int_equal(k->flops, 2 * 3 * 8 * 4 * 16 + 2 * 3 * 8 * 4);
    /* a, b, the bias (4 elements: its view touches only those), y. */
    assert_int_equal(k->bytes, (3 * 8 * 16 + 3 * 16 * 4 + 4 + 3 * 8 * 4) * 4);
    kir_program_free(kp);
    kp = compile(g, false);
    assert_int_equal(kp->nkernels, 3);
    kir_program_free(kp);
    assert_matches_oracle(g);
    mc_graph_free(g);
}

static void test_count_pointwise_chain(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("pw");
    int64_t xs[] = {64, 256}, vs[] = {256};
    mc_value x = mc_input(g, "x", MC_F32, xs, 2);
    mc_value y = mc_add(g, mc_gelu(g, mc_add(g, mc_mul(g, x, mc_param(g, "s", MC_F32, vs, 1)),
                                             mc_param(g, "b", MC_F32, vs, 1))), x);
    mc_graph_set_outputs(g, &y, 1);
    kir_program *kp = compile(g, true);
    assert_int_equal(kp->nkernels, 1);
    const kir_kernel *k = &kp->kernels[0];
    assert_int_equal(k->category, KIR_POINTWISE);
    assert_string_equal(k->name, "pw_fused_mul_add_gelu_0");
    assert_int_equal(k->flops, 4 * 64 * 256); /* mul, add, gelu, add */
    assert_int_equal(k->bytes, (64 * 256 + 256 + 256 + 64 * 256) * 4); /* x once though read twice */
    assert_int_equal(kp->arena_bytes, 0);
    kir_program_free(kp);
    mc_graph_free(g);
}

static void test_count_softmax(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("softmax");
    int64_t xs[] = {64, 256};
    mc_value y = mc_softmax(g, mc_mul(g, mc_input(g, "x", MC_F32, xs, 2), mc_scalar(g, 0.125, MC_F32)), -1);
    mc_graph_set_outputs(g, &y, 1);
    kir_program *kp = compile(g, true);
    assert_int_equal(kp->nkernels, 1);
    const kir_kernel *k = &kp->kernels[0];
    assert_int_equal(k->category, KIR_REDUCTION);
    assert_true(strncmp(k->name, "red_fused_mul_softmax_", 22) == 0);
    assert_true(has_op(k, MC_OP_SOFTMAX) && has_op(k, MC_OP_MUL));
    assert_int_equal(k->nrow, 1);
    assert_int_equal(k->nreds, 2);
    int loops = 0;
    for (int b = 0; b < k->nblocks; b++)
        loops += k->blocks[b].loop;
    assert_int_equal(loops, 3); /* max; exp-sum; normalize and store */
    /* Per element: loop 1 mul + max (2), loop 2 mul sub exp + sum (4), loop 3 mul sub exp div
     * (4): the prologue is recomputed in every loop, and counted where it runs. */
    assert_int_equal(k->flops, 10 * 64 * 256);
    assert_int_equal(k->bytes, 2 * 64 * 256 * 4);
    kir_program_free(kp);
    assert_matches_oracle(g);
    mc_graph_free(g);
}

static void test_count_layernorm(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("layernorm");
    int64_t xs[] = {64, 256}, vs[] = {256};
    mc_value y = mc_layernorm(g, mc_input(g, "x", MC_F32, xs, 2), mc_param(g, "w", MC_F32, vs, 1),
                              mc_param(g, "b", MC_F32, vs, 1), 1e-5);
    mc_graph_set_outputs(g, &y, 1);
    kir_program *kp = compile(g, true);
    assert_int_equal(kp->nkernels, 1);
    const kir_kernel *k = &kp->kernels[0];
    assert_int_equal(k->category, KIR_REDUCTION);
    assert_true(strncmp(k->name, "red_fused_layernorm_", 20) == 0);
    /* Per element: x * 2^-8, |.|, two sums (4); *r, sub, square, sum (4); *r, sub, *rstd, *w,
     * +b (5). Per row: the scale r (three compares and wheres, 6); the mean, sum * r (2^8 / n is
     * 1 here: 1); the variance's 1/n, eps*r*r, +, max with the floor, rsqrt (6). */
    assert_int_equal(k->flops, 13 * 64 * 256 + 13 * 64);
    assert_int_equal(k->bytes, (64 * 256 + 256 + 256 + 64 * 256) * 4);
    kir_program_free(kp);
    assert_matches_oracle(g);
    mc_graph_free(g);
}

/* A decoder step's rows are [1, 1, C]: a dimension of size 1, which broadcasting reads with a
 * zero coefficient where the identity has 1. The same points: layernorm stays one reduction and
 * each linear takes its bias, activation and residual into its GEMM, as at M > 1 (they were 7
 * kernels per layernorm and a bias kernel per linear). */
static void test_one_row_epilogues(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("one_row");
    int64_t xs[] = {1, 1, 64}, cs[] = {64}, w1s[] = {96, 64}, b1s[] = {96}, w2s[] = {64, 96};
    mc_value x = mc_input(g, "x", MC_F32, xs, 3);
    mc_value h = mc_layernorm(g, x, mc_param(g, "ln.w", MC_F32, cs, 1), mc_param(g, "ln.b", MC_F32, cs, 1), 1e-5);
    mc_value u = mc_gelu_tanh(g, mc_linear(g, h, mc_param(g, "fc.w", MC_F32, w1s, 2),
                                           mc_param(g, "fc.b", MC_F32, b1s, 1)));
    mc_value y = mc_add(g, mc_linear(g, u, mc_param(g, "out.w", MC_F32, w2s, 2),
                                     mc_param(g, "out.b", MC_F32, cs, 1)), x);
    int64_t as[] = {1, 64}, bs[] = {64, 48}, cb[] = {48};
    mc_value z = mc_relu(g, mc_add(g, mc_matmul(g, mc_input(g, "a", MC_F32, as, 2), mc_param(g, "b", MC_F32, bs, 2)),
                                   mc_param(g, "c", MC_F32, cb, 1)));
    mc_value outs[2] = {y, z};
    mc_graph_set_outputs(g, outs, 2);
    kir_program *kp = compile(g, true);
    assert_int_equal(kp->nkernels, 4);
    assert_int_equal(kp->kernels[0].category, KIR_REDUCTION);
    for (int i = 1; i < 4; i++)
        assert_int_equal(kp->kernels[i].category, KIR_GEMM);
    assert_true(has_op(&kp->kernels[1], MC_OP_GELU_TANH));
    assert_true(has_op(&kp->kernels[3], MC_OP_RELU));
    kir_program_free(kp);
    assert_matches_oracle(g);
    mc_graph_free(g);
}

/* ---- decisions ------------------------------------------------------------------------------- */

static void test_output_intermediate_is_stored(void **state)
{
    (void)state;
    /* y is an output and also feeds the reduction: stored by the same kernel. */
    mc_graph *g = mc_graph_new("t");
    int64_t xs[] = {5, 7};
    mc_value x = mc_input(g, "x", MC_F32, xs, 2);
    mc_value y = mc_exp(g, mc_tanh(g, x));
    int ax = 1;
    mc_value z = mc_sum(g, y, &ax, 1, false);
    mc_value outs[] = {z, y};
    mc_graph_set_outputs(g, outs, 2);
    kir_program *kp = compile(g, true);
    assert_int_equal(kp->nkernels, 1);
    assert_int_equal(kp->kernels[0].nstores, 2);
    int outputs = 0;
    for (int b = 0; b < kp->nbuffers; b++)
        outputs += kp->buffers[b].kind == KBUF_OUTPUT;
    assert_int_equal(outputs, 2);
    kir_program_free(kp);
    assert_matches_oracle(g);
    mc_graph_free(g);
}

static void test_transposed_operand_is_strides(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("t");
    int64_t xs[] = {6, 10}, ws[] = {12, 10}, bs[] = {12};
    mc_value x = mc_input(g, "x", MC_F32, xs, 2);
    mc_value y = mc_gelu(g, mc_linear(g, x, mc_param(g, "w", MC_F32, ws, 2), mc_param(g, "b", MC_F32, bs, 1)));
    mc_graph_set_outputs(g, &y, 1);
    kir_program *kp = compile(g, true);
    assert_int_equal(kp->nkernels, 1);
    const kir_kernel *k = &kp->kernels[0];
    assert_string_equal(k->name, "gemm_bias_gelu_0");
    assert_true(has_op(k, MC_OP_LINEAR) && has_op(k, MC_OP_GELU));
    const kir_view *b = &k->views[k->gemm.b];
    assert_int_equal(b->stride[0], 1);  /* along K: w is [out, in], read transposed */
    assert_int_equal(b->stride[1], 10); /* along N */
    kir_program_free(kp);
    assert_matches_oracle(g);
    mc_graph_free(g);
}

static void test_shape_ops_inside_pointwise(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("t");
    int64_t xs[] = {4, 6}, bs[] = {4};
    mc_value x = mc_input(g, "x", MC_F32, xs, 2);
    mc_value t = mc_transpose(g, mc_exp(g, mc_tanh(g, x)), NULL, 0);   /* [6, 4] */
    int64_t rs[] = {3, 2, 4};
    mc_value r = mc_reshape(g, t, rs, 3);                                /* a split: a map */
    mc_value y = mc_add(g, mc_slice(g, r, 1, 1, 2), mc_param(g, "b", MC_F32, bs, 1));
    mc_graph_set_outputs(g, &y, 1);
    kir_program *kp = compile(g, true);
    assert_int_equal(kp->nkernels, 1);
    assert_int_equal(kp->kernels[0].category, KIR_POINTWISE);
    kir_program_free(kp);
    assert_matches_oracle(g);
    mc_graph_free(g);
}

static void test_merge_of_transposed_is_one_copy(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("t");
    int64_t xs[] = {4, 6}, ws[] = {24, 5}, rs[] = {1, 24};
    mc_value x = mc_input(g, "x", MC_F32, xs, 2);
    mc_value t = mc_reshape(g, mc_transpose(g, x, NULL, 0), rs, 2); /* merge: not a view */
    mc_value y = mc_matmul(g, t, mc_param(g, "w", MC_F32, ws, 2));
    mc_graph_set_outputs(g, &y, 1);
    kir_program *kp = compile(g, true);
    assert_int_equal(kp->nkernels, 2);
    assert_int_equal(kp->kernels[0].category, KIR_COPY);
    assert_int_equal(kp->kernels[1].category, KIR_GEMM);
    kir_program_free(kp);
    assert_matches_oracle(g);
    mc_graph_free(g);
}

static void test_copy_elided_into_producer(void **state)
{
    (void)state;
    /* The attention pattern: a batched product, transposed and merged back, feeding a GEMM. */
    mc_graph *g = mc_graph_new("t");
    int64_t as[] = {2, 3, 5, 4}, bs[] = {2, 3, 4, 6}, rs[] = {2, 5, 18}, ws[] = {18, 7};
    int perm[] = {0, 2, 1, 3};
    mc_value m = mc_matmul(g, mc_input(g, "a", MC_F32, as, 4), mc_param(g, "b", MC_F32, bs, 4));
    mc_value y = mc_reshape(g, mc_transpose(g, m, perm, 4), rs, 3);
    mc_value z = mc_matmul(g, y, mc_param(g, "w", MC_F32, ws, 2));
    mc_graph_set_outputs(g, &z, 1);
    kir_program *kp = compile(g, true);
    assert_int_equal(kp->nkernels, 2);
    assert_int_equal(kp->kernels[0].category, KIR_GEMM);
    assert_int_equal(kp->kernels[1].category, KIR_GEMM);
    /* The first GEMM stores through a permuted view: not contiguous. */
    const kir_kernel *k = &kp->kernels[0];
    const kir_view *st = &k->views[k->stores[0].view];
    assert_int_equal(st->stride[1], 6);  /* along the head dim: 6 elements apart in y */
    assert_int_equal(st->stride[2], 18); /* along the row dim */
    kir_program_free(kp);
    kp = compile(g, false);
    assert_int_equal(kp->nkernels, 3); /* unfused: the copy stays */
    kir_program_free(kp);
    assert_matches_oracle(g);
    mc_graph_free(g);
}

/* conv + bias (+ residual) + relu: the GEMM's index space is [N, C_out, H*W] and the user's
 * work after the conv is at [N, C_out, H, W]; simplify computes it before the reshape, so it is
 * the GEMM's epilogue: no pointwise kernel after the GEMM, and the graph output (a reshape of
 * the GEMM's result) is stored by the GEMM itself. Both im2col forms (copies: cpu, ref; one
 * gather: cuda). r2 varies along W only, so it cannot be read at the merged H*W: its add and
 * relu stay a kernel of their own. */
static int count_category(const kir_program *kp, kir_category c)
{
    int n = 0;
    for (int k = 0; k < kp->nkernels; k++)
        n += kp->kernels[k].category == c;
    return n;
}

/* A padded pool (ResNet's 3x3 stride-2 maxpool, an avgpool) where the backend gathers
 * (conv_gather, the cuda backend's choice): one kernel that reads x and writes y, the relu after
 * it in the same kernel; without, the padded copies. Both equal the oracle. */
static void test_padded_pool_one_kernel(void **state)
{
    (void)state;
    for (int avg = 0; avg < 2; avg++)
        for (int gather = 0; gather < 2; gather++) {
            mc_graph *g = mc_graph_new("pool");
            int64_t xs[] = {2, 3, 9, 8}, k[] = {3, 3}, s[] = {2, 2}, p[] = {1, 1};
            mc_value x = mc_input(g, "x", MC_F32, xs, 4);
            mc_value y = mc_relu(g, (avg ? mc_avgpool : mc_maxpool)(g, x, k, s, p, 2));
            mc_graph_set_outputs(g, &y, 1);
            mc_compile_options co = {.fuse = true, .plan_memory = true, .verify = true, .conv_gather = gather};
            kir_program *kp = NULL;
            assert_int_equal(mc_compile_kernels(g, &co, &kp), MC_OK);
            if (gather) {
                assert_int_equal(kp->nkernels, 1);
                assert_int_equal(kp->kernels[0].category, KIR_POINTWISE);
                assert_true(has_op(&kp->kernels[0], avg ? MC_OP_AVGPOOL : MC_OP_MAXPOOL));
                assert_true(has_op(&kp->kernels[0], MC_OP_RELU));
                /* x read and y written once: no padded temporary */
                assert_int_equal(kp->kernels[0].bytes, (2 * 3 * 9 * 8 + 2 * 3 * 5 * 4) * 4);
            } else {
                assert_true(count_category(kp, KIR_COPY) >= 2); /* the padding's concats */
            }
            kir_program_free(kp);
            assert_matches_oracle(g);
            mc_graph_free(g);
        }
}

static void test_conv_epilogue(void **state)
{
    (void)state;
    for (int variant = 0; variant < 3; variant++)
        for (int gather = 0; gather < 2; gather++) {
            mc_graph *g = mc_graph_new("conv_epilogue");
            int64_t xs[] = {2, 3, 6, 5}, ws[] = {4, 3, 3, 3}, bs[] = {4}, rs[] = {2, 4, 6, 5}, r2s[] = {5};
            int64_t one[] = {1, 1};
            mc_value x = mc_input(g, "x", MC_F32, xs, 4), w = mc_param(g, "w", MC_F32, ws, 4);
            mc_value y = mc_conv(g, x, w, mc_param(g, "b", MC_F32, bs, 1), one, one, one, 2, 1);
            if (variant == 1)
                y = mc_add(g, y, mc_input(g, "r", MC_F32, rs, 4));
            if (variant == 2)
                y = mc_add(g, y, mc_input(g, "r2", MC_F32, r2s, 1));
            y = mc_relu(g, y);
            mc_graph_set_outputs(g, &y, 1);
            mc_compile_options co = {.fuse = true, .plan_memory = true, .verify = true, .conv_gather = gather};
            kir_program *kp = NULL;
            assert_int_equal(mc_compile_kernels(g, &co, &kp), MC_OK);
            assert_int_equal(count_category(kp, KIR_GEMM), 1);
            const kir_kernel *last = &kp->kernels[kp->nkernels - 1];
            if (variant < 2) {
                assert_int_equal(last->category, KIR_GEMM); /* nothing after it */
                assert_true(has_op(last, MC_OP_CONV)); /* the user's operators it computes */
                assert_true(has_op(last, MC_OP_RELU));
                assert_int_equal(has_op(last, MC_OP_ADD), variant == 1);
                assert_int_equal(last->nstores, 1);
                /* stored straight into the output, [2, 4, 30] contiguous */
                const kir_view *sv = &last->views[last->stores[0].view];
                assert_int_equal(kp->buffers[sv->buffer].kind, KBUF_OUTPUT);
                assert_int_equal(sv->stride[0], 4 * 30);
                assert_int_equal(sv->stride[1], 30);
                assert_int_equal(sv->stride[2], 1);
                /* 2MNK, then the bias add and the relu (and the residual add) per output */
                assert_int_equal(last->flops, 2 * 2 * 4 * 30 * 27 + (variant == 1 ? 3 : 2) * 2 * 4 * 30);
            } else {
                assert_int_equal(last->category, KIR_POINTWISE);
                assert_true(has_op(last, MC_OP_RELU));
            }
            kir_program_free(kp);
            assert_matches_oracle(g);
            mc_graph_free(g);
        }
}

static void test_outputs_that_are_inputs_or_views(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("t");
    int64_t xs[] = {3, 4};
    mc_value x = mc_input(g, "x", MC_F32, xs, 2);
    mc_value outs[] = {mc_transpose(g, x, NULL, 0), x, mc_mul(g, x, mc_scalar(g, 1.0, MC_F32))};
    mc_graph_set_outputs(g, outs, 3);
    for (int fuse = 0; fuse < 2; fuse++) {
        kir_program *kp = compile(g, fuse);
        int outputs = 0;
        for (int b = 0; b < kp->nbuffers; b++)
            outputs += kp->buffers[b].kind == KBUF_OUTPUT;
        assert_int_equal(outputs, 3);
        kir_program_free(kp);
    }
    assert_matches_oracle(g);
    mc_graph_free(g);
}

static void test_concat_and_creation(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("t");
    int64_t xs[] = {3, 4};
    mc_value x = mc_input(g, "x", MC_F32, xs, 2);
    mc_value parts[] = {mc_exp(g, x), x, mc_full(g, xs, 2, 2.5, MC_F32)};
    mc_value c = mc_concat(g, parts, 3, 0);
    int64_t cs[] = {9, 4};
    mc_value y = mc_add(g, c, mc_cast(g, mc_iota(g, cs, 2, 0, MC_I32), MC_F32));
    mc_graph_set_outputs(g, &y, 1);
    kir_program *kp = compile(g, true);
    int copies = 0;
    for (int k = 0; k < kp->nkernels; k++)
        copies += kp->kernels[k].category == KIR_COPY;
    assert_int_equal(copies, 3);
    kir_program_free(kp);
    assert_matches_oracle(g);
    mc_graph_free(g);
}

/* ---- the graph passes ------------------------------------------------------------------------ */

static int count_op(const mc_graph *g, mc_op op)
{
    int n = 0;
    for (int i = 0; i < g->nnodes; i++)
        n += g->nodes[i].op == op;
    return n;
}

static mc_graph *passes(const mc_graph *g, const char *stop)
{
    mc_compile_options co = {.fuse = true, .plan_memory = true, .verify = true};
    mc_graph *out = NULL;
    mc_status st = mc_run_passes(g, &co, stop, &out);
    if (st != MC_OK)
        fail_msg("passes: %s", mc_error_message());
    return out;
}

static void test_simplify_identities(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("t");
    int64_t xs[] = {3, 4}, rs[] = {12}, rs2[] = {2, 6};
    mc_value x = mc_input(g, "x", MC_F32, xs, 2);
    mc_input(g, "unused", MC_F32, xs, 2);
    mc_value one = mc_scalar(g, 1.0, MC_F32), zero = mc_scalar(g, 0.0, MC_F32);
    mc_value a = mc_add(g, mc_mul(g, mc_neg(g, mc_neg(g, x)), one), zero);          /* x */
    mc_value t = mc_transpose(g, mc_transpose(g, a, NULL, 0), NULL, 0);               /* x */
    mc_value r = mc_reshape(g, mc_reshape(g, t, rs, 1), rs2, 2);                      /* one reshape */
    mc_value c = mc_add(g, mc_scalar(g, 2.0, MC_F32), mc_scalar(g, 3.0, MC_F32));   /* 5 */
    mc_value e = mc_add(g, mc_exp(g, r), mc_exp(g, r));                               /* one exp */
    mc_sin(g, x);                                                                       /* dead */
    mc_value y = mc_mul(g, e, c);
    mc_graph_set_outputs(g, &y, 1);
    mc_graph *s = passes(g, NULL);
    assert_int_equal(count_op(s, MC_OP_NEG), 0);
    assert_int_equal(count_op(s, MC_OP_TRANSPOSE), 0);
    assert_int_equal(count_op(s, MC_OP_RESHAPE), 1);
    assert_int_equal(count_op(s, MC_OP_EXP), 1);
    assert_int_equal(count_op(s, MC_OP_SIN), 0);
    assert_int_equal(count_op(s, MC_OP_INPUT), 2); /* unused inputs stay: bound by name */
    int fives = 0;
    for (int i = 0; i < s->nnodes; i++)
        fives += s->nodes[i].op == MC_OP_CONST && s->nodes[i].attr.value == 5.0;
    assert_int_equal(fives, 1);
    assert_int_equal(s->nnodes, 2 + 1 + 1 + 1 + 1 + 1); /* inputs, reshape, exp, add, 5, mul */
    mc_graph_free(s);
    assert_matches_oracle(g);
    mc_graph_free(g);
}

/* allreduce is a barrier: two of one value stay two (cse), one of a constant is not folded
 * (simplify), the GEMM before it keeps no epilogue and the add after it is a kernel of its
 * own, and its operand is a contiguous buffer even where it is a transpose (a copy first). */
static void test_allreduce_is_a_barrier(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("t");
    int64_t xs[] = {6, 8}, ws[] = {8, 5}, bs[] = {5};
    mc_value x = mc_input(g, "x", MC_F32, xs, 2);
    mc_value w = mc_param(g, "w", MC_F32, ws, 2), b = mc_param(g, "b", MC_F32, bs, 1);
    mc_value mm = mc_matmul(g, x, w);
    mc_value s1 = mc_allreduce(g, mm), s2 = mc_allreduce(g, mm);
    mc_value c = mc_allreduce(g, mc_scalar(g, 2.0, MC_F32));
    mc_value y = mc_mul(g, mc_add(g, mc_add(g, s1, s2), b), c);
    mc_value t = mc_allreduce(g, mc_transpose(g, y, NULL, 0));
    mc_graph_set_outputs(g, &t, 1);
    mc_graph *s = passes(g, NULL);
    assert_int_equal(count_op(s, MC_OP_ALLREDUCE), 4);
    mc_graph_free(s);
    kir_program *kp = compile(g, true);
    /* gemm; 2 collectives; the scalar and its collective; add-add-mul-transpose; collective */
    int gemms = 0, copies = 0, collectives = 0;
    for (int k = 0; k < kp->nkernels; k++) {
        const kir_kernel *kk = &kp->kernels[k];
        gemms += kk->category == KIR_GEMM;
        copies += kk->category == KIR_COPY;
        collectives += kk->category == KIR_COLLECTIVE;
        if (kk->category == KIR_GEMM)
            assert_int_equal(kk->nops, 1); /* the matmul alone: nothing fused across the sum */
        if (has_op(kk, MC_OP_ALLREDUCE)) {
            assert_int_equal(kk->nops, 1);
            assert_int_equal(kk->category, KIR_COLLECTIVE);
            /* two contiguous runs of the operand's size: the operand read in place */
            const kir_view *in = &kk->views[kk->coll.in], *out = &kk->views[kk->coll.out];
            assert_int_equal(in->stride[0], 1);
            assert_int_equal(out->stride[0], 1);
            assert_int_equal(in->offset, 0);
            assert_int_equal(kk->coll.count, kk->shape[0]);
            assert_int_equal(kk->rank, 1);
        }
    }
    assert_int_equal(gemms, 1);
    assert_int_equal(collectives, 4);
    assert_int_equal(copies, 0); /* the transpose is stored by the add-add-mul kernel, contiguously */
    kir_program_free(kp);
    assert_matches_oracle(g);
    mc_graph_free(g);
}

static void test_stages(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("t");
    int64_t xs[] = {3, 4};
    mc_value y = mc_softmax(g, mc_input(g, "x", MC_F32, xs, 2), -1);
    mc_graph_set_outputs(g, &y, 1);
    mc_graph *ir = passes(g, "ir");
    assert_int_equal(count_op(ir, MC_OP_SOFTMAX), 1);
    mc_graph *d = passes(g, "decompose");
    assert_int_equal(count_op(d, MC_OP_SOFTMAX), 0);
    assert_int_equal(count_op(d, MC_OP_MAX), 1);
    assert_int_equal(count_op(d, MC_OP_SUM), 1);
    for (int i = 0; i < d->nnodes; i++)
        if (d->nodes[i].op != MC_OP_INPUT)
            assert_int_equal(d->nodes[i].origin, MC_OP_SOFTMAX);
    mc_graph_free(ir);
    mc_graph_free(d);
    mc_compile_options co = {.fuse = true, .plan_memory = true, .verify = true};
    mc_graph *bad = NULL;
    assert_int_equal(mc_run_passes(g, &co, "nonsense", &bad), MC_ERR_INPUT);
    assert_null(bad);
    assert_non_null(strstr(mc_error_message(), "nonsense"));
    for (int i = 0; mc_graph_passes[i]; i++) {
        mc_graph *s = passes(g, mc_graph_passes[i]->name);
        assert_int_equal(mc_graph_verify(s, "test"), MC_OK);
        mc_graph_free(s);
    }
    mc_graph_free(g);
}

static void test_unplanned_gives_every_temp_its_own_range(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("t");
    int64_t xs[] = {8, 8};
    mc_value h = mc_input(g, "x", MC_F32, xs, 2);
    for (int i = 0; i < 4; i++)
        h = mc_matmul(g, mc_tanh(g, h), mc_param(g, i ? (i == 1 ? "w1" : i == 2 ? "w2" : "w3") : "w0", MC_F32, xs, 2));
    mc_graph_set_outputs(g, &h, 1);
    mc_compile_options co = {.fuse = false, .plan_memory = false, .verify = true};
    kir_program *kp = NULL;
    assert_int_equal(mc_compile_kernels(g, &co, &kp), MC_OK);
    assert_int_equal(kp->arena_bytes, kp->unplanned_bytes);
    int64_t end = 0;
    for (int b = 0; b < kp->nbuffers; b++)
        if (kp->buffers[b].kind == KBUF_TEMP) {
            assert_true(kp->buffers[b].offset >= end); /* in order, disjoint */
            end = kp->buffers[b].offset + kp->buffers[b].numel * 4;
            assert_int_equal(kp->buffers[b].offset % 256, 0);
        }
    kir_program_free(kp);
    co.plan_memory = true;
    assert_int_equal(mc_compile_kernels(g, &co, &kp), MC_OK);
    assert_true(kp->arena_bytes < kp->unplanned_bytes);
    kir_program_free(kp);
    mc_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_count_matmul),
        cmocka_unit_test(test_one_row_epilogues),
        cmocka_unit_test(test_count_batched_matmul_epilogue),
        cmocka_unit_test(test_count_pointwise_chain),
        cmocka_unit_test(test_count_softmax),
        cmocka_unit_test(test_count_layernorm),
        cmocka_unit_test(test_output_intermediate_is_stored),
        cmocka_unit_test(test_transposed_operand_is_strides),
        cmocka_unit_test(test_shape_ops_inside_pointwise),
        cmocka_unit_test(test_merge_of_transposed_is_one_copy),
        cmocka_unit_test(test_copy_elided_into_producer),
        cmocka_unit_test(test_outputs_that_are_inputs_or_views),
        cmocka_unit_test(test_conv_epilogue),
        cmocka_unit_test(test_padded_pool_one_kernel),
        cmocka_unit_test(test_concat_and_creation),
        cmocka_unit_test(test_simplify_identities),
        cmocka_unit_test(test_allreduce_is_a_barrier),
        cmocka_unit_test(test_stages),
        cmocka_unit_test(test_unplanned_gives_every_temp_its_own_range),
    };
    return mc_test_run(tests);
}
