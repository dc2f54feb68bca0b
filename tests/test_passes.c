/* The pass pipeline end to end: the example workloads (built through the C API, and parsed
 * from the examples folder when the parser is there) compiled fused, unfused and unplanned, run on
 * the reference backend and compared with the float64 oracle; kernel counts; the passes one by
 * one (decompose, simplify, cse, dce) with the verifier after each. */
#include "testlib.h"

#include "passes_check.h"

static const int64_t S2[] = {2, 3};

/* ---- the examples, built with the C API ------------------------------------------------------ */

static mc_graph *build_pointwise(void)
{
    mc_graph *g = mc_graph_new("pointwise");
    int64_t xs[] = {64, 256}, vs[] = {256};
    mc_value x = mc_input(g, "x", MC_F32, xs, 2);
    mc_value s = mc_param(g, "s", MC_F32, vs, 1), b = mc_param(g, "b", MC_F32, vs, 1);
    mc_value y = mc_add(g, mc_gelu(g, mc_add(g, mc_mul(g, x, s), b)), x);
    mc_graph_set_outputs(g, &y, 1);
    return g;
}

static mc_graph *build_softmax(void)
{
    mc_graph *g = mc_graph_new("softmax");
    int64_t xs[] = {64, 256};
    mc_value x = mc_input(g, "x", MC_F32, xs, 2);
    mc_value y = mc_softmax(g, mc_mul(g, x, mc_scalar(g, 0.125, MC_F32)), -1);
    mc_graph_set_outputs(g, &y, 1);
    return g;
}

static mc_graph *build_layernorm(void)
{
    mc_graph *g = mc_graph_new("layernorm");
    int64_t xs[] = {64, 256}, vs[] = {256};
    mc_value x = mc_input(g, "x", MC_F32, xs, 2);
    mc_value w = mc_param(g, "w", MC_F32, vs, 1), b = mc_param(g, "b", MC_F32, vs, 1);
    mc_value y = mc_layernorm(g, x, w, b, 1e-5);
    mc_graph_set_outputs(g, &y, 1);
    return g;
}

static mc_dtype layer_dtype = MC_F32; /* the dtype linear_layer's params are declared with */

static mc_value linear_layer(mc_graph *g, mc_value x, const char *name, int64_t in, int64_t out)
{
    char wn[32], bn[32];
    snprintf(wn, sizeof wn, "%s.w", name);
    snprintf(bn, sizeof bn, "%s.b", name);
    int64_t ws[] = {out, in}, bs[] = {out};
    return mc_linear(g, x, mc_param(g, wn, layer_dtype, ws, 2), mc_param(g, bn, layer_dtype, bs, 1));
}

static mc_graph *build_mlp(bool ln)
{
    mc_graph *g = mc_graph_new("mlp");
    int64_t xs[] = {32, 128}, vs[] = {128};
    mc_value x = mc_input(g, "x", MC_F32, xs, 2);
    mc_value a = mc_gelu(g, linear_layer(g, x, "fc1", 128, 512));
    mc_value y = mc_add(g, linear_layer(g, a, "fc2", 512, 128), x);
    if (ln)
        y = mc_layernorm(g, y, mc_param(g, "ln.w", MC_F32, vs, 1), mc_param(g, "ln.b", MC_F32, vs, 1), 1e-5);
    mc_graph_set_outputs(g, &y, 1);
    return g;
}

static mc_graph *build_small_mlp(void)
{
    mc_graph *g = mc_graph_new("small_mlp");
    int64_t xs[] = {32, 256};
    mc_value h = mc_input(g, "x", MC_F32, xs, 2);
    for (int l = 0; l < 4; l++) {
        char name[8];
        snprintf(name, sizeof name, "l%d", l);
        h = mc_relu(g, linear_layer(g, h, name, 256, 256));
    }
    mc_graph_set_outputs(g, &h, 1);
    return g;
}

static mc_graph *build_gpt2(void)
{
    mc_graph *g = mc_graph_new("gpt2_block");
    int64_t xs[] = {2, 32, 64}, vs[] = {64};
    mc_value x = mc_input(g, "x", MC_F32, xs, 3);
    mc_value h = mc_layernorm(g, x, mc_param(g, "ln1.w", MC_F32, vs, 1), mc_param(g, "ln1.b", MC_F32, vs, 1), 1e-5);
    mc_value qkv = linear_layer(g, h, "attn", 64, 192);
    int64_t hs[] = {2, 32, 4, 16};
    int pq[] = {0, 2, 1, 3}, pk[] = {0, 2, 3, 1};
    mc_value q = mc_transpose(g, mc_reshape(g, mc_slice(g, qkv, 2, 0, 64), hs, 4), pq, 4);
    mc_value kt = mc_transpose(g, mc_reshape(g, mc_slice(g, qkv, 2, 64, 128), hs, 4), pk, 4);
    mc_value v = mc_transpose(g, mc_reshape(g, mc_slice(g, qkv, 2, 128, 192), hs, 4), pq, 4);
    mc_value s = mc_mul(g, mc_matmul(g, q, kt), mc_scalar(g, 0.25, MC_F32));
    int64_t ss[] = {32, 32};
    mc_value keep = mc_ge(g, mc_iota(g, ss, 2, 0, MC_I32), mc_iota(g, ss, 2, 1, MC_I32));
    mc_value p = mc_softmax(g, mc_where(g, keep, s, mc_scalar(g, -INFINITY, MC_F32)), -1);
    int64_t ys[] = {2, 32, 64};
    mc_value y = mc_reshape(g, mc_transpose(g, mc_matmul(g, p, v), pq, 4), ys, 3);
    mc_value x1 = mc_add(g, x, linear_layer(g, y, "proj", 64, 64));
    mc_value h2 = mc_layernorm(g, x1, mc_param(g, "ln2.w", MC_F32, vs, 1), mc_param(g, "ln2.b", MC_F32, vs, 1), 1e-5);
    mc_value f = mc_gelu(g, linear_layer(g, h2, "fc", 64, 256));
    mc_value x2 = mc_add(g, x1, linear_layer(g, f, "out", 256, 64));
    mc_graph_set_outputs(g, &x2, 1);
    return g;
}

typedef struct {
    const char *name;
    mc_graph *(*build)(void);
    int fused_kernels; /* exact, or -max for "at most" */
} example;

static mc_graph *build_mlp_plain(void) { return build_mlp(false); }

/* f16 and bf16 storage: the same MLP block with a layernorm, every tensor in the low dtype. */
static mc_graph *build_mlp_low(mc_dtype d)
{
    mc_graph *g = mc_graph_new("mlp_low");
    int64_t xs[] = {16, 64}, vs[] = {64};
    layer_dtype = d;
    mc_value x = mc_input(g, "x", d, xs, 2);
    mc_value a = mc_gelu(g, linear_layer(g, x, "fc1", 64, 96));
    mc_value y = mc_add(g, linear_layer(g, a, "fc2", 96, 64), x);
    y = mc_layernorm(g, y, mc_param(g, "ln.w", d, vs, 1), mc_param(g, "ln.b", d, vs, 1), 1e-5);
    mc_value s = mc_softmax(g, y, 0);
    mc_value outs[] = {y, s};
    mc_graph_set_outputs(g, outs, 2);
    layer_dtype = MC_F32;
    return g;
}

static mc_graph *build_mlp_bf16(void) { return build_mlp_low(MC_BF16); }
static mc_graph *build_mlp_f16(void) { return build_mlp_low(MC_F16); }
static mc_graph *build_mlp_ln(void) { return build_mlp(true); }

static const example examples[] = {
    {"pointwise", build_pointwise, 1}, {"softmax", build_softmax, 1},
    {"layernorm", build_layernorm, 1}, {"small_mlp", build_small_mlp, 4},
    {"mlp", build_mlp_plain, 2},       {"mlp_ln", build_mlp_ln, 3},
    {"gpt2_block", build_gpt2, -11},   {"mlp_bf16", build_mlp_bf16, 4},
    {"mlp_f16", build_mlp_f16, 4},
};

static void test_examples_match_oracle(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof examples / sizeof examples[0]; i++) {
        mc_graph *g = examples[i].build();
        assert_non_null(g);
        char why[256] = "";
        int bad = check_graph(g, 7, 1.0, why, sizeof why);
        if (bad)
            fail_msg("%s: %s", examples[i].name, why);
        mc_graph_free(g);
    }
}

/* The same workloads as the repository's example files, parsed (lines and names as the user
 * wrote them), and the larger benchmark versions' kernel counts (not run: too big for CI). */
static const struct {
    const char *file;
    int kernels; /* exact, or -max */
} files[] = {
    {"examples/pointwise.graph", 1}, {"examples/softmax.graph", 1}, {"examples/layernorm.graph", 1},
    {"examples/small_mlp.graph", 4}, {"examples/mlp.graph", 2},     {"examples/mlp_ln.graph", 3},
    {"examples/gpt2_block.graph", -11},
};

static void test_example_files(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        mc_graph *g = NULL;
        if (mc_graph_parse_file(mc_test_src(files[i].file), &g) != MC_OK)
            fail_msg("%s: %s", files[i].file, mc_error_message());
        char why[256];
        if (check_graph(g, 11, 1.0, why, sizeof why))
            fail_msg("%s: %s", files[i].file, why);
        kir_program *kp = check_kernels(g, true);
        assert_non_null(kp);
        int copies = 0;
        for (int k = 0; k < kp->nkernels; k++) {
            copies += kp->kernels[k].category == KIR_COPY;
            assert_true(kp->kernels[k].nlines > 0); /* every kernel says where it came from */
            assert_true(kp->kernels[k].nops > 0);
        }
        int want = files[i].kernels;
        if ((want > 0 && kp->nkernels != want) || (want < 0 && (kp->nkernels > -want || copies > 1))) {
            kir_print(kp, g, stderr);
            fail_msg("%s: %d kernels (%d copies)", files[i].file, kp->nkernels, copies);
        }
        /* Inputs, params and outputs are found in the user's graph by the runtime. */
        for (int o = 0; o < g->noutputs; o++) {
            int b = kp->graph_buffer[g->outputs[o]];
            assert_true(b >= 0);
            assert_int_equal(kp->buffers[b].kind, KBUF_OUTPUT);
        }
        kir_program_free(kp);
        mc_graph_free(g);
    }
}

static int count_category(const kir_program *kp, kir_category c);

static void test_bench_file_kernel_counts(void **state)
{
    (void)state;
    static const char *dirs[] = {"bench/cpu", "bench/gpu"};
    for (int d = 0; d < 2; d++)
        for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
            char path[256];
            snprintf(path, sizeof path, "%s/%s", dirs[d], strrchr(files[i].file, '/') + 1);
            mc_graph *g = NULL;
            if (mc_graph_parse_file(mc_test_src(path), &g) != MC_OK)
                fail_msg("%s: %s", path, mc_error_message());
            kir_program *kp = check_kernels(g, true);
            assert_non_null(kp);
            int want = files[i].kernels;
            assert_true(want > 0 ? kp->nkernels == want : kp->nkernels <= -want);
            if (strstr(path, "gpt2")) {
                /* the plan halves the temporaries of the block with its score matrices, and
                 * fused attention, which has none, needs no more (the MLP sets the peak) */
                kir_program *unattended = check_kernels_with(g, true, false);
                assert_non_null(unattended);
                assert_true(unattended->arena_bytes * 2 < unattended->unplanned_bytes);
                assert_true(kp->arena_bytes <= unattended->arena_bytes);
                assert_true(kp->arena_bytes < kp->unplanned_bytes);
                assert_true(count_category(kp, KIR_ATTENTION) == 1);
                kir_program_free(unattended);
            }
            kir_program_free(kp);
            mc_graph_free(g);
        }
}

static int count_category(const kir_program *kp, kir_category c)
{
    int n = 0;
    for (int k = 0; k < kp->nkernels; k++)
        n += kp->kernels[k].category == c;
    return n;
}

static void test_example_kernel_counts(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof examples / sizeof examples[0]; i++) {
        mc_graph *g = examples[i].build();
        kir_program *kp = check_kernels(g, true);
        assert_non_null(kp);
        int want = examples[i].fused_kernels;
        if (want > 0 && kp->nkernels != want) {
            kir_print(kp, g, stderr);
            fail_msg("%s: %d kernels, want %d", examples[i].name, kp->nkernels, want);
        }
        if (want < 0 && (kp->nkernels > -want || count_category(kp, KIR_COPY) > 1)) {
            kir_print(kp, g, stderr);
            fail_msg("%s: %d kernels (%d copies), want at most %d (1 copy)", examples[i].name,
                     kp->nkernels, count_category(kp, KIR_COPY), -want);
        }
        kir_program *un = check_kernels(g, false);
        assert_non_null(un);
        assert_true(un->nkernels >= kp->nkernels);
        kir_program_free(un);
        kir_program_free(kp);
        mc_graph_free(g);
    }
}

static void test_gpt2_plan_halves_memory(void **state)
{
    (void)state;
    mc_graph *g = build_gpt2();
    kir_program *kp = check_kernels_with(g, true, false); /* with its score matrices */
    assert_non_null(kp);
    assert_true(kp->unplanned_bytes > 0);
    assert_true(kp->arena_bytes * 2 < kp->unplanned_bytes);
    /* No two temps live at the same time overlap. */
    for (int a = 0; a < kp->nbuffers; a++)
        for (int b = a + 1; b < kp->nbuffers; b++) {
            const kir_buffer *x = &kp->buffers[a], *y = &kp->buffers[b];
            if (x->kind != KBUF_TEMP || y->kind != KBUF_TEMP)
                continue;
            bool together = x->first <= y->last && y->first <= x->last;
            bool in_place = x->offset == y->offset && (x->last == y->first || y->last == x->first);
            if (in_place)
                continue; /* one kernel turns one into the other element by element */
            int64_t xe = x->offset + x->numel * (int64_t)mc_dtype_size(x->dtype);
            int64_t ye = y->offset + y->numel * (int64_t)mc_dtype_size(y->dtype);
            assert_false(together && x->offset < ye && y->offset < xe);
        }
    kir_program_free(kp);
    mc_graph_free(g);
}

/* The kernel IR verifier passes the pipeline's output and catches each kind of breakage a pass
 * could make: a view past its buffer, an operand out of reach, a reduction read too early, a
 * temp outside the arena. */
static void test_kir_verifier(void **state)
{
    (void)state;
    mc_graph *g = build_gpt2();
    kir_program *kp = check_kernels(g, true);
    assert_non_null(kp);
    assert_int_equal(kir_verify(kp, "plan", true), MC_OK);
    int red = -1, ops = -1;
    for (int k = 0; k < kp->nkernels; k++) {
        if (kp->kernels[k].category == KIR_REDUCTION && red < 0)
            red = k;
        for (int i = 0; ops < 0 && i < kp->kernels[k].ncode; i++)
            if (kp->kernels[k].code[i].kind == KI_OP && i > 0)
                ops = k;
    }
    assert_true(red >= 0 && ops >= 0);
    kir_kernel *k = &kp->kernels[red];
    int64_t saved = k->views[0].offset;
    k->views[0].offset = kp->buffers[k->views[0].buffer].numel; /* one past the end */
    assert_int_equal(kir_verify(kp, "test", true), MC_ERR_SYSTEM);
    assert_non_null(strstr(mc_error_message(), "outside its buffer"));
    assert_non_null(strstr(mc_error_message(), k->name));
    k->views[0].offset = saved;
    k = &kp->kernels[ops];
    for (int i = 0; i < k->ncode; i++)
        if (k->code[i].kind == KI_OP) {
            int arg = k->code[i].arg[0];
            k->code[i].arg[0] = i; /* itself: not an earlier instruction */
            assert_int_equal(kir_verify(kp, "test", true), MC_ERR_SYSTEM);
            assert_non_null(strstr(mc_error_message(), "out of its reach"));
            k->code[i].arg[0] = arg;
            break;
        }
    k = &kp->kernels[red];
    for (int i = 0; i < k->ncode; i++)
        if (k->code[i].kind == KI_ROWVAL) {
            int blk = k->reds[k->code[i].view].block;
            k->reds[k->code[i].view].block = k->nblocks; /* done after everything */
            assert_int_equal(kir_verify(kp, "test", true), MC_ERR_SYSTEM);
            k->reds[k->code[i].view].block = blk;
            break;
        }
    for (int b = 0; b < kp->nbuffers; b++)
        if (kp->buffers[b].kind == KBUF_TEMP) {
            kp->buffers[b].offset += kp->arena_bytes;
            assert_int_equal(kir_verify(kp, "test", true), MC_ERR_SYSTEM);
            assert_non_null(strstr(mc_error_message(), "outside the arena"));
            assert_int_equal(kir_verify(kp, "test", false), MC_OK); /* not planned yet: fine */
            kp->buffers[b].offset -= kp->arena_bytes;
            break;
        }
    assert_int_equal(kir_verify(kp, "plan", true), MC_OK);
    kir_program_free(kp);
    mc_graph_free(g);
}

/* Every buffer names the user's value it holds, carried through decomposition: in a graph built
 * through the C API (no names on the intermediates, no lines to match), the temps of an unfused
 * layernorm belong to the layernorm, not to some other node. */
static void test_buffers_carry_user_node(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("carry");
    int64_t xs[2] = {4, 8}, ws[1] = {8};
    mc_value x = mc_input(g, "x", MC_F32, xs, 2);
    mc_value w = mc_param(g, "w", MC_F32, ws, 1);
    mc_value b = mc_param(g, "b", MC_F32, ws, 1);
    mc_value h = mc_layernorm(g, x, w, b, 1e-5);
    mc_value y = mc_add(g, h, x);
    assert_int_equal(mc_graph_set_outputs(g, &y, 1), MC_OK);
    kir_program *kp = check_kernels(g, false);
    assert_non_null(kp);
    int temps = 0;
    for (int i = 0; i < kp->nbuffers; i++) {
        const kir_buffer *buf = &kp->buffers[i];
        if (buf->kind == KBUF_TEMP) {
            assert_int_equal(buf->node, h);
            temps++;
        } else if (buf->kind == KBUF_OUTPUT) {
            assert_int_equal(buf->node, y);
        } else {
            assert_true(buf->node == x || buf->node == w || buf->node == b);
        }
    }
    assert_true(temps >= 3); /* mean, centred values, variance, ... each its own kernel */
    kir_program_free(kp);
    mc_graph_free(g);
}

/* `minic dump --stage` offers every graph pass (mc_dump_stages is written out beside
 * mc_graph_passes in passes/pipeline.c; this keeps the two in step), in pipeline order. */
static void test_dump_stages_name_every_pass(void **state)
{
    (void)state;
    int last = 0;
    for (int i = 0; mc_graph_passes[i]; i++) {
        int at = -1;
        for (int k = 0; mc_dump_stages[k]; k++)
            if (!strcmp(mc_dump_stages[k], mc_graph_passes[i]->name))
                at = k;
        if (at < 0)
            fail_msg("pass '%s' is not a dump stage", mc_graph_passes[i]->name);
        assert_true(at > last);
        last = at;
    }
    /* and mc_dump_stage shows each of them */
    mc_graph *g;
    assert_int_equal(mc_graph_parse_file(mc_test_src("examples/softmax.graph"), &g), MC_OK);
    FILE *sink = fopen("/dev/null", "w");
    for (int k = 0; mc_dump_stages[k]; k++)
        if (mc_dump_stage(g, NULL, mc_dump_stages[k], sink) != MC_OK)
            fail_msg("stage %s: %s", mc_dump_stages[k], mc_error_message());
    assert_int_equal(mc_dump_stage(g, NULL, "nonsense", sink), MC_ERR_INPUT);
    fclose(sink);
    mc_graph_free(g);
}

/* ---- cumsum is a scan: O(n) work per row (passes/fuse.c, passes/lower.c, kir/kir.h) ----------- */

/* Points of kernel k's index space and, summed over the program, the largest one and the FLOPs. */
static int64_t kernel_points(const kir_kernel *k)
{
    int64_t n = 1;
    for (int d = 0; d < k->rank; d++)
        n *= k->shape[d];
    return n;
}

/* y = 0.5 * cumsum(exp(x), axis) (+ relu of it as a second output): a prologue and an epilogue
 * around the scan. */
static mc_graph *build_cumsum(const int64_t *shape, int rank, int axis, bool two_outputs)
{
    mc_graph *g = mc_graph_new("cumsum");
    mc_value x = mc_input(g, "x", MC_F32, shape, rank);
    mc_value y = mc_mul(g, mc_cumsum(g, mc_exp(g, x), axis), mc_scalar(g, 0.5, MC_F32));
    mc_value outs[2] = {y, mc_relu(g, y)};
    assert_int_equal(mc_graph_set_outputs(g, outs, two_outputs ? 2 : 1), MC_OK);
    return g;
}

static void test_cumsum_is_linear(void **state)
{
    (void)state;
    /* rows of 4097 along the last axis, and along axis 0 (not last) */
    const int64_t shapes[2][2] = {{4, 4097}, {4097, 4}};
    for (int c = 0; c < 4; c++) {
        const int64_t *shape = shapes[c & 1];
        int axis = c & 1 ? 0 : 1;
        mc_graph *g = build_cumsum(shape, 2, axis, c >= 2);
        kir_program *kp = check_kernels(g, true);
        assert_non_null(kp);
        /* one kernel: exp, the scan, the multiply (and relu) together, a scan over rows of 4097 */
        assert_int_equal(kp->nkernels, 1);
        const kir_kernel *k = &kp->kernels[0];
        assert_int_equal(k->category, KIR_REDUCTION);
        assert_true(kir_kernel_scans(k));
        assert_int_equal(k->rank - k->nrow, 1);
        assert_int_equal(k->shape[k->rank - 1], 4097);
        assert_int_equal(k->nstores, c >= 2 ? 2 : 1);
        /* O(n): every point once, a handful of operations each (not n per point) */
        int64_t numel = 4 * 4097;
        assert_int_equal(kernel_points(k), numel);
        if (k->flops > 8 * numel)
            fail_msg("case %d: %lld FLOPs for %lld elements", c, (long long)k->flops, (long long)numel);
        kir_program_free(kp);
        /* unfused: the scan is a kernel of its own, still over the elements once */
        kp = check_kernels(g, false);
        assert_non_null(kp);
        int scans = 0;
        for (int i = 0; i < kp->nkernels; i++) {
            scans += kir_kernel_scans(&kp->kernels[i]);
            if (kernel_points(&kp->kernels[i]) > numel)
                fail_msg("unfused case %d: kernel %s has %lld points", c, kp->kernels[i].name,
                         (long long)kernel_points(&kp->kernels[i]));
        }
        assert_int_equal(scans, 1);
        kir_program_free(kp);
        mc_graph_free(g);
    }
    /* The quadratic first version (MINIC_QUADRATIC_CUMSUM=1) fails the same checks: what they
     * catch is real. */
    assert_int_equal(setenv("MINIC_QUADRATIC_CUMSUM", "1", 1), 0);
    mc_graph *g = build_cumsum(shapes[0], 2, 1, false);
    kir_program *kp = check_kernels(g, true);
    unsetenv("MINIC_QUADRATIC_CUMSUM");
    assert_non_null(kp);
    int64_t most = 0, flops = 0;
    for (int i = 0; i < kp->nkernels; i++) {
        assert_false(kir_kernel_scans(&kp->kernels[i]));
        most = kernel_points(&kp->kernels[i]) > most ? kernel_points(&kp->kernels[i]) : most;
        flops += kp->kernels[i].flops;
    }
    assert_true(most >= (int64_t)4 * 4097 * 4097);
    assert_true(flops > 8 * 4 * 4097);
    kir_program_free(kp);
    mc_graph_free(g);
}

/* The scan's values along each axis, fused, unfused and unplanned, against the float64
 * evaluator (passes_check.h: the ref backend, or MINIC_TEST_BACKEND's). */
static void test_cumsum_scan_runs(void **state)
{
    (void)state;
    const int64_t shape[3] = {3, 1500, 2};
    for (int axis = 0; axis < 3; axis++) {
        mc_graph *g = build_cumsum(shape, 3, axis, true);
        char why[256] = "";
        if (check_graph(g, 7, 1.0, why, sizeof why) != 0)
            fail_msg("cumsum along axis %d: %s", axis, why);
        mc_graph_free(g);
    }
}

/* ---- batchnorm folded into the conv before it (passes/fold.c) -------------------------------- */

typedef enum { BN_FOLD, BN_FOLD_NO_BIAS, BN_VAR_INPUT, BN_VAR_COMPUTED, BN_CONV_OUTPUT, BN_CONV_USED, BN_BIG_WEIGHTS } bn_case;

/* relu(batchnorm(conv(x, w, b), s, bb, m, v)), x [2, 3, 6, 5], w [4, 3, 3, 3]: foldable, or one of
 * the shapes that must not fold (a statistic that is an input or computed, a conv read elsewhere,
 * x [1, 3, 2, 2]: an output of 16 elements beside 108 weights). */
static mc_graph *build_conv_bn(bn_case k)
{
    mc_graph *g = mc_graph_new("conv_bn");
    int64_t xs[4] = {2, 3, 6, 5}, ws[4] = {4, 3, 3, 3}, cs[1] = {4};
    if (k == BN_BIG_WEIGHTS)
        xs[0] = 1, xs[2] = xs[3] = 2;
    mc_value x = mc_input(g, "x", MC_F32, xs, 4);
    mc_value w = mc_param(g, "w", MC_F32, ws, 4);
    mc_value b = k == BN_FOLD_NO_BIAS ? MC_NONE : mc_param(g, "b", MC_F32, cs, 1);
    mc_value s = mc_param(g, "s", MC_F32, cs, 1), bb = mc_param(g, "bb", MC_F32, cs, 1);
    mc_value m = mc_param(g, "m", MC_F32, cs, 1);
    mc_value v = k == BN_VAR_INPUT ? mc_input(g, "v", MC_F32, cs, 1) : mc_param(g, "v", MC_F32, cs, 1);
    if (k == BN_VAR_COMPUTED)
        v = mc_abs(g, v);
    mc_value c = mc_conv(g, x, w, b, NULL, (int64_t[]){1, 1}, NULL, 2, 1);
    mc_value y = mc_relu(g, mc_batchnorm(g, c, s, bb, m, v, 1e-3));
    mc_value outs[2] = {y, k == BN_CONV_USED ? mc_add(g, y, c) : c};
    if (k == BN_CONV_USED)
        outs[0] = outs[1];
    assert_int_equal(mc_graph_set_outputs(g, outs, k == BN_CONV_OUTPUT ? 2 : 1), MC_OK);
    return g;
}

static int count_op(const mc_graph *g, mc_op op)
{
    int n = 0;
    for (int i = 0; i < g->nnodes; i++)
        n += g->nodes[i].op == op;
    return n;
}

/* The largest kernel space that computes part of a batchnorm (0: none). */
static int64_t batchnorm_kernel_numel(const mc_graph *g)
{
    kir_program *kp = check_kernels(g, true);
    assert_non_null(kp);
    int64_t most = 0;
    for (int k = 0; k < kp->nkernels; k++) {
        const kir_kernel *K = &kp->kernels[k];
        bool bn = false;
        for (int o = 0; o < K->nops; o++)
            bn |= K->ops[o] == MC_OP_BATCHNORM;
        int64_t numel = 1;
        for (int d = 0; d < K->rank; d++)
            numel *= K->shape[d];
        if (bn && numel > most)
            most = numel;
    }
    kir_program_free(kp);
    return most;
}

/* Run g on backend with fixed values (var positive), output 0 as doubles. */
static double *run_conv_bn(const mc_graph *g, mc_backend_kind backend, int *n)
{
    mc_options opt = mc_test_options();
    opt.backend = backend;
    opt.quiet = true;
    mc_program *p;
    if (mc_program_compile(g, &opt, &p) != MC_OK)
        fail_msg("compile: %s", mc_error_message());
    float x[2 * 3 * 6 * 5], w[4 * 27], c[4];
    for (int i = 0; i < 180; i++)
        x[i] = (float)sin(0.37 * i);
    for (int i = 0; i < 108; i++)
        w[i] = (float)cos(0.91 * i) * 0.5f;
    assert_int_equal(mc_program_set(p, "x", x, sizeof x), MC_OK);
    assert_int_equal(mc_program_set(p, "w", w, sizeof w), MC_OK);
    const char *names[] = {"b", "s", "bb", "m", "v"};
    for (int k = 0; k < 5; k++) {
        for (int i = 0; i < 4; i++)
            c[i] = k == 4 ? 0.25f + 0.5f * (float)i : (float)sin(1.3 * (k * 4 + i)) * (k == 1 ? 2.0f : 1.0f);
        mc_status st = mc_program_set(p, names[k], c, sizeof c);
        assert_true(st == MC_OK || k == 0); /* no b: the conv without a bias */
    }
    assert_int_equal(mc_program_run(p), MC_OK);
    mc_tensor t;
    assert_int_equal(mc_program_output(p, 0, &t), MC_OK);
    *n = (int)(t.bytes / sizeof(float));
    double *out = malloc(sizeof(double) * (size_t)*n);
    for (int i = 0; i < *n; i++)
        out[i] = ((const float *)t.data)[i];
    mc_program_free(p);
    return out;
}

static void test_batchnorm_folds_into_conv(void **state)
{
    (void)state;
    mc_compile_options co = {.fuse = true, .plan_memory = true, .verify = true};
    const struct {
        bn_case k;
        bool folds;
    } cases[] = {{BN_FOLD, true}, {BN_FOLD_NO_BIAS, true}, {BN_VAR_INPUT, false},
                 {BN_VAR_COMPUTED, false}, {BN_CONV_OUTPUT, false}, {BN_CONV_USED, false},
                 {BN_BIG_WEIGHTS, false}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        mc_graph *g = build_conv_bn(cases[c].k);
        mc_graph *f;
        assert_int_equal(mc_run_passes(g, &co, "fold", &f), MC_OK);
        if (count_op(f, MC_OP_BATCHNORM) != (cases[c].folds ? 0 : 1))
            fail_msg("case %d: %d batchnorms after fold", (int)cases[c].k, count_op(f, MC_OP_BATCHNORM));
        assert_int_equal(count_op(f, MC_OP_CONV), 1);
        mc_graph_free(f);
        /* folded: batchnorm's arithmetic is over the weights (4 * 27), not the conv's 2*4*6*5 */
        int64_t numel = batchnorm_kernel_numel(g);
        if (cases[c].folds ? numel > 4 * 27 : numel < (cases[c].k == BN_BIG_WEIGHTS ? 4 * 2 * 2 : 2 * 4 * 6 * 5))
            fail_msg("case %d: a batchnorm kernel over %lld elements", (int)cases[c].k, (long long)numel);
        if (!cases[c].folds) {
            mc_graph_free(g);
            continue;
        }
        /* the same values as the unfolded graph (v an input), on ref and cpu */
        mc_graph *u = build_conv_bn(cases[c].k == BN_FOLD_NO_BIAS ? BN_FOLD_NO_BIAS : BN_VAR_INPUT);
        if (cases[c].k == BN_FOLD_NO_BIAS) { /* unfolded twin: the same graph with v an input */
            mc_graph_free(u);
            u = mc_graph_new("conv_bn_nb");
            int64_t xs[4] = {2, 3, 6, 5}, ws[4] = {4, 3, 3, 3}, cs[1] = {4};
            mc_value x = mc_input(u, "x", MC_F32, xs, 4), w = mc_param(u, "w", MC_F32, ws, 4);
            mc_value s = mc_param(u, "s", MC_F32, cs, 1), bb = mc_param(u, "bb", MC_F32, cs, 1);
            mc_value m = mc_param(u, "m", MC_F32, cs, 1), v = mc_input(u, "v", MC_F32, cs, 1);
            mc_value cv = mc_conv(u, x, w, MC_NONE, NULL, (int64_t[]){1, 1}, NULL, 2, 1);
            mc_value y = mc_relu(u, mc_batchnorm(u, cv, s, bb, m, v, 1e-3));
            assert_int_equal(mc_graph_set_outputs(u, &y, 1), MC_OK);
        }
        mc_backend_kind backends[2] = {MC_BACKEND_REF, MC_BACKEND_CPU};
#ifdef MINIC_HAVE_CPU_BACKEND
        int nb = 2;
#else
        int nb = 1;
#endif
        for (int bi = 0; bi < nb; bi++) {
            int n1, n2;
            double *a = run_conv_bn(g, backends[bi], &n1), *e = run_conv_bn(u, backends[bi], &n2);
            assert_int_equal(n1, n2);
            double worst = 0;
            for (int i = 0; i < n1; i++) {
                double err = fabs(a[i] - e[i]) / (1 + fabs(e[i]));
                worst = err > worst ? err : worst;
            }
            if (!(worst <= 1e-4)) /* docs/FORMAT.md §6: f32 with a matmul */
                fail_msg("case %d on %s: off by %g", (int)cases[c].k, mc_backend_name(backends[bi]), worst);
            free(a);
            free(e);
        }
        mc_graph_free(u);
        mc_graph_free(g);
    }
}

static void assert_facts_hold(const kir_kernel *k, const kir_fact *f, int vstep, int at)
{
    char why[256];
    if (!check_facts_hold(k, f, vstep, at, 65536, why, sizeof why))
        fail_msg("%s", why);
}

/* The kernel list of a graph in text, compiled as the cuda backend compiles it (pools and
 * im2col as gathers). */
static kir_program *gathered_kernels(const char *text)
{
    mc_graph *g;
    if (mc_graph_parse_string("f.graph", text, &g) != MC_OK)
        fail_msg("%s", mc_error_message());
    mc_compile_options co = {.fuse = true, .plan_memory = true, .verify = true, .conv_gather = true};
    kir_program *kp;
    assert_int_equal(mc_compile_kernels(g, &co, &kp), MC_OK);
    mc_graph_free(g);
    assert_int_equal(kp->nkernels, 1);
    return kp;
}

/* kir_facts (kir/range.c): what a padded pool's window indices are, from the index space alone;
 * and gathers whose index nothing bounds stay unproven. */
static void test_kir_facts(void **state)
{
    (void)state;
    struct {
        const char *graph;
        int in_range, reversed, gathers; /* gathers proven in [0, n), in [-n, 0), of all */
        bool clamp_kept;                 /* some minimum still clamps (a window passes the edge) */
    } cases[] = {
        {"graph a\ninput x : f16[2,4,112,112]\ny = maxpool(x, kernel=[3,3], stride=[2,2], padding=[1,1])\noutput y\n",
         9, 0, 9, false},
        {"graph a\ninput x : f32[2,4,9,11]\ny = maxpool(x, kernel=[3,3], stride=[2,2], padding=[1,1])\noutput y\n",
         9, 0, 9, true},
        {"graph a\ninput x : f32[2,4,13]\ny = avgpool(x, kernel=[3], stride=[2], padding=[1])\noutput y\n", 3, 0, 3,
         true},
        {"graph a\ninput w : f32[10,8]\ninput ids : i32[3,5]\ny = gather(w, ids)\noutput y\n", 0, 0, 1, false},
        {"graph a\ninput w : f32[10,8]\ni = iota(shape=[10], axis=0)\ny = gather(w, i)\noutput y\n", 1, 0, 1, false},
        /* -1 - i: the rows backwards, counted from the end */
        {"graph a\ninput w : f32[10,8]\ni = iota(shape=[10], axis=0)\nm = full(shape=[10], value=-1, dtype=i32)\n"
         "j = sub(m, i)\ny = gather(w, j)\noutput y\n", 0, 1, 1, false},
        /* i - 1: -1 (the last row) and 0..8, neither side alone: the check stays */
        {"graph a\ninput w : f32[10,8]\ni = iota(shape=[10], axis=0)\none = full(shape=[10], value=1, dtype=i32)\n"
         "j = sub(i, one)\ny = gather(w, j)\noutput y\n", 0, 0, 1, false},
        /* 11 rows from a table of 10, forwards or backwards: one is out of range */
        {"graph a\ninput w : f32[10,8]\ni = iota(shape=[11], axis=0)\ny = gather(w, i)\noutput y\n", 0, 0, 1, false},
        {"graph a\ninput w : f32[10,8]\ni = iota(shape=[11], axis=0)\nm = full(shape=[11], value=-1, dtype=i32)\n"
         "j = sub(m, i)\ny = gather(w, j)\noutput y\n", 0, 0, 1, false},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        kir_program *kp = gathered_kernels(cases[c].graph);
        const kir_kernel *k = &kp->kernels[0];
        kir_fact *f = calloc((size_t)k->ncode, sizeof *f);
        assert_non_null(f);
        assert_true(kir_facts(k, kp->dims, 1, 0, f));
        int in_range = 0, gathers = 0, reversed = 0;
        bool clamp_kept = false;
        for (int i = 0; i < k->ncode; i++) {
            const kir_instr *in = &k->code[i];
            gathers += in->kind == KI_GATHER;
            in_range += kir_gather_proven(k, f, i) == 1;
            reversed += kir_gather_proven(k, f, i) == -1;
            if (in->kind == KI_OP && in->op == MC_OP_MINIMUM && in->dtype == MC_I32 && f[i].same < 0)
                clamp_kept = true;
            if (in->kind == KI_OP && in->op == MC_OP_DIV && in->dtype == MC_I32) {
                /* o / OW with o = i2 OW + i3: the output row, i2 itself */
                assert_true(f[i].same >= 0);
                assert_int_equal(k->code[f[i].same].kind, KI_INDEX);
                assert_int_equal(k->code[f[i].same].view, 2);
            }
            if (in->dtype == MC_I32 || in->dtype == MC_BOOL)
                assert_true(f[i].lo <= f[i].hi);
        }
        assert_facts_hold(k, f, 1, 0);
        if (in_range != cases[c].in_range || reversed != cases[c].reversed || gathers != cases[c].gathers ||
            clamp_kept != cases[c].clamp_kept)
            fail_msg("case %d: %d of %d gathers in range, %d backwards, clamp %s", (int)c, in_range, gathers, reversed,
                     clamp_kept ? "kept" : "gone");
        free(f);
        kir_program_free(kp);
    }
    /* index arithmetic of every sign: each kernel's facts hold at every point */
    static const char *const more[] = {
        "graph a\ninput x : f32[7,5]\ni = iota(shape=[7,5], axis=1)\nj = iota(shape=[7,5], axis=0)\n"
        "a = mul(i, 3)\nb = sub(a, j)\nc = div(b, 4)\nd = div(b, -3)\ne = maximum(c, d)\nf = minimum(e, 2)\n"
        "g = neg(f)\nh = abs(g)\nk = add(h, c)\nl = lt(k, 3)\nm = ge(j, 0)\nn = and(l, m)\no = where(n, k, b)\n"
        "p = cast(o, to=f32)\ny = add(x, p)\noutput y\n",
        "graph a\ninput x : f32[4,6]\ni = iota(shape=[4,6], axis=1)\nj = iota(shape=[4,6], axis=0)\n"
        "a = mul(j, 6)\nb = add(a, i)\nc = div(b, 6)\nd = mul(c, 6)\ne = sub(b, d)\nf = eq(e, i)\ng = eq(c, j)\n"
        "h = and(f, g)\nk = cast(h, to=i32)\nl = sub(k, 1)\nm = div(l, 2)\nn = cast(m, to=f32)\ny = add(x, n)\noutput y\n",
        "graph a\ninput x : f32[2,3,8,9]\ny = avgpool(x, kernel=[3,2], stride=[2,3], padding=[1,1])\noutput y\n",
        "graph a\ninput x : f32[1,2,10]\ny = maxpool(x, kernel=[5], stride=[1], padding=[2])\noutput y\n",
    };
    for (size_t c = 0; c < sizeof more / sizeof more[0]; c++) {
        kir_program *kp = gathered_kernels(more[c]);
        const kir_kernel *k = &kp->kernels[0];
        kir_fact *f = calloc((size_t)k->ncode, sizeof *f);
        assert_non_null(f);
        assert_true(kir_facts(k, kp->dims, 1, 0, f));
        assert_facts_hold(k, f, 1, 0);
        for (int at = 0; at < 2 && k->shape[k->rank - 1] % 2 == 0; at++) { /* a chunk's two elements */
            assert_true(kir_facts(k, kp->dims, 2, at, f));
            assert_facts_hold(k, f, 2, at);
        }
        free(f);
        kir_program_free(kp);
    }
}

int main(void)
{
    (void)S2;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_examples_match_oracle),
        cmocka_unit_test(test_example_kernel_counts),
        cmocka_unit_test(test_gpt2_plan_halves_memory),
        cmocka_unit_test(test_kir_verifier),
        cmocka_unit_test(test_buffers_carry_user_node),
        cmocka_unit_test(test_example_files),
        cmocka_unit_test(test_dump_stages_name_every_pass),
        cmocka_unit_test(test_cumsum_is_linear),
        cmocka_unit_test(test_cumsum_scan_runs),
        cmocka_unit_test(test_batchnorm_folds_into_conv),
        cmocka_unit_test(test_kir_facts),
        cmocka_unit_test(test_bench_file_kernel_counts),
    };
    return mc_test_run(tests);
}
