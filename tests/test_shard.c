/* Tensor-parallel sharding (passes/shard.c): the plan on GPT-2 blocks (fused QKV and separate
 * q/k/v projections, f32 and bf16), a two-layer GPT-2 with its tied LM head, MLPs with `linear`
 * and with [K, N] matmul weights, and graphs where nothing can be split; the refusals and their
 * reasons; param slices against explicit index arithmetic. The numbers: the n rank graphs,
 * evaluated in lockstep by the float64 oracle (mc_graph_eval_ranks: each allreduce sums its
 * operand over the ranks), give the unsharded graph's outputs on every rank, to rounding in
 * exact mode and within docs/FORMAT.md §6 when every value is rounded to its dtype. */
#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"
#include "runtime/runtime.h"

/* ---- graphs ---------------------------------------------------------------------------------- */

static char text[1 << 17];
static size_t text_len;

static void line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void line(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text + text_len, sizeof text - text_len, fmt, ap);
    va_end(ap);
    assert_true(n > 0 && (size_t)n < sizeof text - text_len - 1);
    text_len += (size_t)n;
    text[text_len++] = '\n';
    text[text_len] = '\0';
}

static void begin(const char *name)
{
    text_len = 0;
    text[0] = '\0';
    line("graph %s", name);
}

static mc_graph *parse(void)
{
    mc_graph *g = NULL;
    if (mc_graph_parse_string("t.graph", text, &g) != MC_OK)
        fail_msg("%s\n%s", mc_error_message(), text);
    return g;
}

/* One pre-LayerNorm GPT-2 block as bench/gpu/gpt2_block.graph writes it (prefix p, input x),
 * its params declared by the caller; fused: one QKV projection sliced in three, else three. */
static void block_params(const char *p, const char *dt, int C, bool fused)
{
    line("param %s.ln1.w : %s[%d]", p, dt, C);
    line("param %s.ln1.b : %s[%d]", p, dt, C);
    if (fused) {
        line("param %s.attn.w : %s[%d, %d]", p, dt, 3 * C, C);
        line("param %s.attn.b : %s[%d]", p, dt, 3 * C);
    } else {
        for (const char *q = "qkv"; *q; q++) {
            line("param %s.%c.w : %s[%d, %d]", p, *q, dt, C, C);
            line("param %s.%c.b : %s[%d]", p, *q, dt, C);
        }
    }
    line("param %s.proj.w : %s[%d, %d]", p, dt, C, C);
    line("param %s.proj.b : %s[%d]", p, dt, C);
    line("param %s.ln2.w : %s[%d]", p, dt, C);
    line("param %s.ln2.b : %s[%d]", p, dt, C);
    line("param %s.fc.w : %s[%d, %d]", p, dt, 4 * C, C);
    line("param %s.fc.b : %s[%d]", p, dt, 4 * C);
    line("param %s.out.w : %s[%d, %d]", p, dt, C, 4 * C);
    line("param %s.out.b : %s[%d]", p, dt, C);
}

static void block_body(const char *p, const char *x, int B, int T, int C, int H, bool fused)
{
    int D = C / H;
    line("%s_h = layernorm(%s, %s.ln1.w, %s.ln1.b, eps=1e-5)", p, x, p, p);
    if (fused) {
        line("%s_qkv = linear(%s_h, %s.attn.w, %s.attn.b)", p, p, p, p);
        line("%s_q0 = slice(%s_qkv, axis=2, start=0, end=%d)", p, p, C);
        line("%s_k0 = slice(%s_qkv, axis=2, start=%d, end=%d)", p, p, C, 2 * C);
        line("%s_v0 = slice(%s_qkv, axis=2, start=%d, end=%d)", p, p, 2 * C, 3 * C);
    } else {
        for (const char *q = "qkv"; *q; q++)
            line("%s_%c0 = linear(%s_h, %s.%c.w, %s.%c.b)", p, *q, p, p, *q, p, *q);
    }
    for (const char *q = "qkv"; *q; q++)
        line("%s_%c1 = reshape(%s_%c0, shape=[%d, %d, %d, %d])", p, *q, p, *q, B, T, H, D);
    line("%s_q = transpose(%s_q1, perm=[0, 2, 1, 3])", p, p);
    line("%s_kt = transpose(%s_k1, perm=[0, 2, 3, 1])", p, p);
    line("%s_v = transpose(%s_v1, perm=[0, 2, 1, 3])", p, p);
    line("%s_s0 = matmul(%s_q, %s_kt)", p, p, p);
    line("%s_s = mul(%s_s0, %.17g)", p, p, 1.0 / sqrt((double)D));
    line("%s_sm = where(keep, %s_s, -inf)", p, p);
    line("%s_p = softmax(%s_sm, axis=-1)", p, p);
    line("%s_y0 = matmul(%s_p, %s_v)", p, p, p);
    line("%s_y1 = transpose(%s_y0, perm=[0, 2, 1, 3])", p, p);
    line("%s_y = reshape(%s_y1, shape=[%d, %d, %d])", p, p, B, T, C);
    line("%s_a = linear(%s_y, %s.proj.w, %s.proj.b)", p, p, p, p);
    line("%s_x1 = add(%s, %s_a)", p, x, p);
    line("%s_h2 = layernorm(%s_x1, %s.ln2.w, %s.ln2.b, eps=1e-5)", p, p, p, p);
    line("%s_f = linear(%s_h2, %s.fc.w, %s.fc.b)", p, p, p, p);
    line("%s_g = gelu_tanh(%s_f)", p, p);
    line("%s_o = linear(%s_g, %s.out.w, %s.out.b)", p, p, p, p);
    line("%s_x2 = add(%s_x1, %s_o)", p, p, p);
}

static mc_graph *gpt2_block(const char *dt, int B, int T, int C, int H, bool fused)
{
    begin("block");
    line("input x : %s[%d, %d, %d]", dt, B, T, C);
    block_params("b", dt, C, fused);
    line("row = iota(shape=[%d, %d], axis=0)", T, T);
    line("col = iota(shape=[%d, %d], axis=1)", T, T);
    line("keep = ge(row, col)");
    block_body("b", "x", B, T, C, H, fused);
    line("output b_x2");
    return parse();
}

/* GPT-2 as bench/models/gpt2.py writes it: L blocks, the final layernorm, the LM head tied to
 * the token embedding (linear(hf, wte)). */
static mc_graph *gpt2_model(int L, int B, int T, int C, int H, int V)
{
    begin("gpt2_small");
    line("input x : f32[%d, %d, %d]", B, T, C);
    char p[16], x[32] = "x";
    for (int i = 0; i < L; i++) {
        snprintf(p, sizeof p, "h%d", i);
        block_params(p, "f32", C, true);
    }
    line("param ln_f.w : f32[%d]", C);
    line("param ln_f.b : f32[%d]", C);
    line("param wte : f32[%d, %d]", V, C);
    line("row = iota(shape=[%d, %d], axis=0)", T, T);
    line("col = iota(shape=[%d, %d], axis=1)", T, T);
    line("keep = ge(row, col)");
    for (int i = 0; i < L; i++) {
        snprintf(p, sizeof p, "h%d", i);
        block_body(p, x, B, T, C, H, true);
        snprintf(x, sizeof x, "%s_x2", p);
    }
    line("hf = layernorm(%s, ln_f.w, ln_f.b, eps=1e-5)", x);
    line("logits = linear(hf, wte)");
    line("output logits");
    return parse();
}

/* An MLP alone: linear (variant 0) or matmul with [K, N] weights and the biases added after
 * (variant 1); variant 2 also outputs the hidden activation, variant 3 reads it with a sum. */
static mc_graph *mlp(int variant, int M, int C, int F)
{
    begin("mlp");
    line("input x : f32[%d, %d]", M, C);
    if (variant == 1) {
        line("param w1 : f32[%d, %d]", C, F);
        line("param b1 : f32[%d]", F);
        line("param w2 : f32[%d, %d]", F, C);
        line("param b2 : f32[%d]", C);
        line("f0 = matmul(x, w1)");
        line("f = add(f0, b1)");
        line("g = relu(f)");
        line("o0 = matmul(g, w2)");
        line("o = add(o0, b2)");
        line("output o");
        return parse();
    }
    line("param fc.w : f32[%d, %d]", F, C);
    line("param fc.b : f32[%d]", F);
    line("param out.w : f32[%d, %d]", C, F);
    line("param out.b : f32[%d]", C);
    line("f = linear(x, fc.w, fc.b)");
    line("g = gelu(f)");
    line("o = linear(g, out.w, out.b)");
    if (variant == 2)
        line("output o, g");
    else if (variant == 3) {
        line("s = sum(f, axis=1)");
        line("output o, s");
    } else {
        line("output o");
    }
    return parse();
}

/* ---- lockstep evaluation --------------------------------------------------------------------- */

static double tolerance(mc_dtype d) { return d == MC_F32 ? 1e-4 : 1e-2; } /* FORMAT.md §6, with matmul */

/* Plan g for n ranks, build the rank graphs, give every rank its slices of the same random
 * inputs and params, and compare every rank's outputs with g's. A symbolic g is planned and
 * sharded as it is, then g and the rank graphs are evaluated at `binding`. */
static mc_shard_plan *check_sharded_at(const mc_graph *g, int n, int allreduces, const int64_t *binding)
{
    mc_shard_plan *plan = NULL;
    if (mc_shard_plan_make(g, n, &plan) != MC_OK)
        fail_msg("plan: %s", mc_error_message());
    if (mc_shard_plan_allreduces(plan) != allreduces)
        fail_msg("n=%d: %d allreduces, expected %d; notes:\n%s", n, mc_shard_plan_allreduces(plan), allreduces,
                 mc_shard_plan_notes(plan));
    assert_int_equal(mc_shard_plan_ranks(plan), n);
    mc_graph *rg[8] = {NULL};
    assert_true(n <= 8);
    for (int r = 0; r < n; r++) {
        if (mc_shard_graph(g, plan, r, &rg[r]) != MC_OK)
            fail_msg("rank %d: %s\n%s", r, mc_error_message(), mc_shard_plan_notes(plan));
        assert_int_equal(mc_graph_verify(rg[r], "shard"), MC_OK);
        int count = 0;
        for (int i = 0; i < rg[r]->nnodes; i++)
            count += rg[r]->nodes[i].op == MC_OP_ALLREDUCE;
        assert_int_equal(count, allreduces);
        if (binding) {
            mc_graph *s = NULL;
            if (mc_graph_specialize(rg[r], binding, &s) != MC_OK)
                fail_msg("rank %d: %s", r, mc_error_message());
            mc_graph_free(rg[r]);
            rg[r] = s;
        }
    }
    const mc_graph *whole = g;
    mc_graph *specialized = NULL;
    if (binding) {
        assert_int_equal(mc_graph_specialize(g, binding, &specialized), MC_OK);
        whole = specialized;
    }
    /* the full values, then each rank's parts by name */
    void **full = calloc((size_t)g->nnodes, sizeof *full);
    const void **ins[8];
    for (int i = 0; i < g->nnodes; i++) {
        const mc_node *nd = &whole->nodes[i];
        if (nd->op != MC_OP_INPUT && nd->op != MC_OP_PARAM)
            continue;
        full[i] = malloc((size_t)mc_node_numel(nd) * mc_dtype_size(nd->dtype));
        mc_fill_random(full[i], nd->dtype, mc_node_numel(nd), 11, nd->name);
    }
    for (int r = 0; r < n; r++) {
        ins[r] = calloc((size_t)rg[r]->nnodes, sizeof *ins[r]);
        for (int i = 0; i < g->nnodes; i++) {
            if (!full[i])
                continue;
            int j = 0;
            while (j < rg[r]->nnodes && !(rg[r]->nodes[j].name && strcmp(rg[r]->nodes[j].name, g->nodes[i].name) == 0))
                j++;
            assert_true(j < rg[r]->nnodes);
            size_t bytes = (size_t)mc_node_numel(&rg[r]->nodes[j]) * mc_dtype_size(g->nodes[i].dtype);
            if (g->nodes[i].op == MC_OP_PARAM)
                assert_int_equal(mc_shard_param_bytes(plan, g, i, r), bytes);
            void *part = malloc(bytes);
            if (g->nodes[i].op == MC_OP_PARAM)
                mc_shard_param_slice(plan, g, i, r, full[i], part);
            else
                memcpy(part, full[i], bytes); /* an input: whole on every rank */
            ins[r][j] = part;
        }
    }
    int no = g->noutputs;
    for (int exact = 0; exact < 2; exact++) {
        double **ref = calloc((size_t)no, sizeof *ref), **out = calloc((size_t)(n * no), sizeof *out);
        if (mc_graph_eval(whole, (const void *const *)full, exact, ref) != MC_OK)
            fail_msg("eval: %s", mc_error_message());
        if (mc_graph_eval_ranks((const mc_graph *const *)rg, n, (const void *const *const *)ins, exact, out) != MC_OK)
            fail_msg("eval_ranks: %s", mc_error_message());
        for (int p = 0; p < no; p++) {
            const mc_node *o = &whole->nodes[whole->outputs[p]];
            int64_t numel = mc_node_numel(o);
            for (int r = 0; r < n; r++) {
                double err = mc_test_rel_error(out[r * no + p], ref[p], numel);
                double tol = exact ? 1e-9 : tolerance(o->dtype);
                if (!(err <= tol))
                    fail_msg("n=%d rank %d output %d (%s): relative error %g > %g", n, r, p,
                             exact ? "exact" : "rounded", err, tol);
                /* every rank the same, to the bit */
                assert_memory_equal(out[r * no + p], out[p], sizeof(double) * (size_t)numel);
            }
        }
        for (int p = 0; p < no; p++)
            free(ref[p]);
        for (int k = 0; k < n * no; k++)
            free(out[k]);
        free(ref);
        free(out);
    }
    for (int r = 0; r < n; r++) {
        for (int j = 0; j < rg[r]->nnodes; j++)
            free((void *)ins[r][j]);
        free(ins[r]);
        mc_graph_free(rg[r]);
    }
    for (int i = 0; i < g->nnodes; i++)
        free(full[i]);
    free(full);
    mc_graph_free(specialized);
    return plan;
}

static mc_shard_plan *check_sharded(const mc_graph *g, int n, int allreduces)
{
    return check_sharded_at(g, n, allreduces, NULL);
}

static int node_named(const mc_graph *g, const char *name)
{
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].name && strcmp(g->nodes[i].name, name) == 0)
            return i;
    fail_msg("no node '%s'", name);
    return -1;
}

static void assert_notes(const mc_shard_plan *plan, const char *phrase)
{
    if (!strstr(mc_shard_plan_notes(plan), phrase))
        fail_msg("the notes lack \"%s\":\n%s", phrase, mc_shard_plan_notes(plan));
}

/* ---- tests ----------------------------------------------------------------------------------- */

static void test_gpt2_block_fused_qkv(void **state)
{
    (void)state;
    mc_graph *g = gpt2_block("f32", 2, 16, 64, 4, true);
    for (int n = 1; n <= 4; n *= 2) {
        mc_shard_plan *plan = check_sharded(g, n, 2);
        assert_notes(plan, "sharded b.attn.w (columns, 3 sections) / b.proj.w (rows)");
        assert_notes(plan, "sharded b.fc.w (columns) / b.out.w (rows)");
        assert_notes(plan, "4 of 4 linear layers split (2 row-parallel), 2 allreduces per rank");
        assert_int_equal(mc_shard_plan_split_dim(plan, node_named(g, "b.attn.w")), 0);
        assert_int_equal(mc_shard_plan_split_dim(plan, node_named(g, "b.proj.w")), 1);
        assert_int_equal(mc_shard_plan_split_dim(plan, node_named(g, "b.out.w")), 1);
        assert_int_equal(mc_shard_plan_split_dim(plan, node_named(g, "b.proj.b")), -1);
        assert_int_equal(mc_shard_plan_split_dim(plan, node_named(g, "b.ln1.w")), -1);
        assert_int_equal(mc_shard_plan_split_dim(plan, node_named(g, "x")), -1);
        /* rank 0's graph: local shapes, slice bounds, the bias after the sum */
        mc_graph *r0 = NULL;
        assert_int_equal(mc_shard_graph(g, plan, 0, &r0), MC_OK);
        const mc_node *w = &r0->nodes[node_named(r0, "b.attn.w")];
        assert_int_equal(w->shape[0], 3 * 64 / n);
        assert_int_equal(w->shape[1], 64);
        const mc_node *k0 = &r0->nodes[node_named(r0, "b_k0")];
        assert_int_equal(k0->attr.start, 64 / n);
        assert_int_equal(k0->attr.end, 128 / n);
        assert_int_equal(r0->nodes[node_named(r0, "b_q1")].shape[2], 4 / n);
        const mc_node *a = &r0->nodes[node_named(r0, "b_a")];
        assert_int_equal(a->op, MC_OP_ADD);
        assert_int_equal(r0->nodes[a->in[0]].op, MC_OP_ALLREDUCE);
        assert_string_equal(r0->nodes[a->in[1]].name, "b.proj.b");
        mc_graph_free(r0);
        mc_shard_plan_free(plan);
    }
    /* 3 ranks where it divides: d 48, 6 heads, MLP 192 */
    mc_graph *g3 = gpt2_block("f32", 2, 8, 48, 6, true);
    mc_shard_plan_free(check_sharded(g3, 3, 2));
    mc_graph_free(g3);
    mc_graph_free(g);
}

/* Batch and sequence symbolic (input x : f32[B, T, C]): split all the same. */
static void test_symbolic_block(void **state)
{
    (void)state;
    begin("block");
    line("input x : f32[B, T, 32]");
    block_params("b", "f32", 32, true);
    line("row = iota(shape=[T, T], axis=0)");
    line("col = iota(shape=[T, T], axis=1)");
    line("keep = ge(row, col)");
    size_t mark = text_len;
    block_body("b", "x", 1, 1, 32, 4, true); /* reshapes written [1, 1, ..]: made symbolic below */
    for (char *s = strstr(text + mark, "shape=[1, 1, "); s; s = strstr(s, "shape=[1, 1, "))
        memcpy(s, "shape=[B, T, ", 13);
    line("output b_x2");
    mc_graph *g = parse();
    const int64_t binding[] = {2, 5}; /* B, T in the order they are declared */
    for (int n = 1; n <= 4; n *= 2)
        mc_shard_plan_free(check_sharded_at(g, n, 2, binding));
    mc_graph_free(g);
}

static void test_gpt2_block_separate_qkv_bf16(void **state)
{
    (void)state;
    mc_graph *g = gpt2_block("f32", 2, 16, 64, 4, false);
    for (int n = 1; n <= 4; n *= 2) {
        mc_shard_plan *plan = check_sharded(g, n, 2);
        assert_notes(plan, "sharded b.q.w (columns), b.k.w (columns), b.v.w (columns) / b.proj.w (rows)");
        mc_shard_plan_free(plan);
    }
    mc_graph_free(g);
    g = gpt2_block("bf16", 2, 16, 64, 4, true);
    for (int n = 2; n <= 4; n *= 2)
        mc_shard_plan_free(check_sharded(g, n, 2));
    mc_graph_free(g);
}

/* bench/gpu/gpt2_block.graph itself (8 x 1024 x 768, 12 heads): planned and built, not evaluated. */
static void test_bench_block_files(void **state)
{
    (void)state;
    const char *files[] = {"bench/gpu/gpt2_block.graph", "bench/gpu/gpt2_block_bf16.graph"};
    for (int f = 0; f < 2; f++) {
        mc_graph *g = NULL;
        assert_int_equal(mc_graph_parse_file(mc_test_src(files[f]), &g), MC_OK);
        for (int n = 1; n <= 4; n++) {
            mc_shard_plan *plan = NULL;
            assert_int_equal(mc_shard_plan_make(g, n, &plan), MC_OK);
            assert_int_equal(mc_shard_plan_allreduces(plan), 2);
            mc_graph *r = NULL;
            assert_int_equal(mc_shard_graph(g, plan, n - 1, &r), MC_OK);
            assert_int_equal(r->nodes[node_named(r, "fc.w")].shape[0], 3072 / n);
            assert_int_equal(r->nodes[node_named(r, "q1")].shape[2], 12 / n);
            mc_graph_free(r);
            mc_shard_plan_free(plan);
        }
        /* 5 ranks divide neither 768 nor 12 heads: nothing is split */
        mc_shard_plan *plan = NULL;
        assert_int_equal(mc_shard_plan_make(g, 5, &plan), MC_OK);
        assert_int_equal(mc_shard_plan_allreduces(plan), 0);
        assert_notes(plan, "proj.w stays replicated: dimension 2 of 'y' (size 768) does not divide among 5 ranks");
        mc_shard_plan_free(plan);
        mc_graph_free(g);
    }
}

static void test_gpt2_model_tied_head(void **state)
{
    (void)state;
    mc_graph *g = gpt2_model(2, 1, 8, 32, 4, 50);
    for (int n = 1; n <= 4; n *= 2) {
        mc_shard_plan *plan = check_sharded(g, n, 4);
        assert_notes(plan, "wte stays replicated: its input is normalized over the split dimension (layernorm 'hf'");
        assert_notes(plan, "sharded h1.fc.w (columns) / h1.out.w (rows)");
        assert_int_equal(mc_shard_plan_split_dim(plan, node_named(g, "wte")), -1);
        mc_shard_plan_free(plan);
    }
    mc_graph_free(g);
}

/* GPT-2 small at full size (12 layers, d 768, 12 heads, the 50257-token tied head): planned
 * and rank 1's graph built, not evaluated. */
static void test_gpt2_small_plan(void **state)
{
    (void)state;
    mc_graph *g = gpt2_model(12, 1, 64, 768, 12, 50257);
    for (int n = 2; n <= 4; n++) {
        mc_shard_plan *plan = NULL;
        assert_int_equal(mc_shard_plan_make(g, n, &plan), MC_OK);
        assert_int_equal(mc_shard_plan_allreduces(plan), 24);
        assert_notes(plan, "48 of 49 linear layers split (24 row-parallel), 24 allreduces per rank");
        assert_notes(plan, "wte stays replicated");
        mc_graph *r = NULL;
        assert_int_equal(mc_shard_graph(g, plan, 1, &r), MC_OK);
        assert_int_equal(r->nodes[node_named(r, "h11.attn.w")].shape[0], 3 * 768 / n);
        assert_int_equal(r->nodes[node_named(r, "wte")].shape[0], 50257);
        assert_int_equal(r->nodes[node_named(r, "logits")].shape[2], 50257);
        mc_graph_free(r);
        mc_shard_plan_free(plan);
    }
    mc_graph_free(g);
}

static void test_mlp(void **state)
{
    (void)state;
    for (int variant = 0; variant < 2; variant++) {
        mc_graph *g = mlp(variant, 12, 16, 64);
        for (int n = 1; n <= 4; n *= 2) {
            mc_shard_plan *plan = check_sharded(g, n, 1);
            if (variant == 1) {
                assert_notes(plan, "sharded w1 (columns) / w2 (rows)");
                assert_int_equal(mc_shard_plan_split_dim(plan, node_named(g, "w1")), 1);
                assert_int_equal(mc_shard_plan_split_dim(plan, node_named(g, "b1")), 0);
                assert_int_equal(mc_shard_plan_split_dim(plan, node_named(g, "w2")), 0);
                assert_int_equal(mc_shard_plan_split_dim(plan, node_named(g, "b2")), -1);
            } else {
                assert_notes(plan, "sharded fc.w (columns) / out.w (rows)");
            }
            mc_shard_plan_free(plan);
        }
        mc_graph_free(g);
    }
}

/* A split value that is also an output, or also read whole: the pair stays replicated. */
static void test_region_boundaries(void **state)
{
    (void)state;
    mc_graph *g = mlp(2, 8, 16, 32);
    mc_shard_plan *plan = check_sharded(g, 2, 0);
    assert_notes(plan, "out.w stays replicated: 'g' would be split but is a graph output");
    mc_shard_plan_free(plan);
    mc_graph_free(g);
    g = mlp(3, 8, 16, 32);
    plan = check_sharded(g, 2, 0);
    assert_notes(plan, "out.w stays replicated: 'f' would be split but sum 's' (line 10) reads it whole");
    mc_shard_plan_free(plan);
    mc_graph_free(g);
}

/* Three linears in a row: the first two pair up; the third would need the pair's sum split. */
static void test_three_linears(void **state)
{
    (void)state;
    begin("chain");
    line("input x : f32[4, 16]");
    line("param w1 : f32[32, 16]");
    line("param w2 : f32[16, 32]");
    line("param w3 : f32[8, 16]");
    line("h1 = linear(x, w1)");
    line("g1 = relu(h1)");
    line("h2 = linear(g1, w2)");
    line("g2 = relu(h2)");
    line("h3 = linear(g2, w3)");
    line("output h3");
    mc_graph *g = parse();
    mc_shard_plan *plan = check_sharded(g, 2, 1);
    assert_notes(plan, "sharded w1 (columns) / w2 (rows)");
    assert_notes(plan, "w3 stays replicated: the split reaches 'h2', a row-parallel linear's sum, which every rank "
                       "holds whole");
    mc_shard_plan_free(plan);
    mc_graph_free(g);
}

static void test_nothing_to_split(void **state)
{
    (void)state;
    begin("norms");
    line("input x : f32[4, 16]");
    line("param w1 : f32[16, 16]");
    line("param w2 : f32[8, 16]");
    line("param s : f32[16]");
    line("h = linear(x, w1)");
    line("n = rmsnorm(h, s)");
    line("y = linear(n, w2)");
    line("output y");
    mc_graph *g = parse();
    for (int n = 1; n <= 2; n++) {
        mc_shard_plan *plan = check_sharded(g, n, 0);
        assert_notes(plan, "w1 stays replicated: the split reaches input 'x'");
        assert_notes(plan, "w2 stays replicated: its input is normalized over the split dimension (rmsnorm 'n', line 7)");
        assert_notes(plan, "0 of 2 linear layers split (0 row-parallel), 0 allreduces per rank");
        mc_shard_plan_free(plan);
    }
    mc_graph_free(g);
    begin("pointwise");
    line("input x : f32[4, 16]");
    line("y = exp(x)");
    line("output y");
    g = parse();
    mc_shard_plan *plan = check_sharded(g, 2, 0);
    assert_notes(plan, "nothing to split: no linear or matmul has a param weight; 0 allreduces");
    mc_shard_plan_free(plan);
    mc_graph_free(g);
}

/* 8 ranks: 64 features divide, 4 heads do not. The MLP still splits. */
static void test_heads_not_divisible(void **state)
{
    (void)state;
    mc_graph *g = gpt2_block("f32", 1, 4, 64, 4, true);
    mc_shard_plan *plan = NULL;
    assert_int_equal(mc_shard_plan_make(g, 8, &plan), MC_OK);
    assert_int_equal(mc_shard_plan_allreduces(plan), 1);
    assert_notes(plan, "b.proj.w stays replicated: dimension 2 of 'b_y1' has 4 entries (the heads, where it is "
                       "reshaped), which do not divide among 8 ranks");
    assert_notes(plan, "sharded b.fc.w (columns) / b.out.w (rows): 8 ranks");
    mc_shard_plan_free(plan);
    mc_graph_free(g);
}

static void test_param_slices(void **state)
{
    (void)state;
    int C = 8, n = 2;
    mc_graph *g = gpt2_block("f32", 1, 2, C, 2, true);
    mc_shard_plan *plan = NULL;
    assert_int_equal(mc_shard_plan_make(g, n, &plan), MC_OK);
    int aw = node_named(g, "b.attn.w"), ab = node_named(g, "b.attn.b"), ow = node_named(g, "b.out.w");
    int ln = node_named(g, "b.ln1.w");
    float full[3 * 8 * 4 * 8], part[3 * 8 * 4 * 8];
    for (int i = 0; i < 3 * 8 * 4 * 8; i++)
        full[i] = (float)i;
    for (int r = 0; r < n; r++) {
        /* attn.w [3C, C]: rows [3][n][C/n]; rank r's row i is section i / (C/n), row r*(C/n) + i % (C/n) */
        assert_int_equal(mc_shard_param_bytes(plan, g, aw, r), sizeof(float) * 3 * C * C / n);
        mc_shard_param_slice(plan, g, aw, r, full, part);
        for (int i = 0; i < 3 * C / n; i++)
            for (int j = 0; j < C; j++) {
                int row = (i / (C / n)) * C + r * (C / n) + i % (C / n);
                assert_true(part[i * C + j] == full[row * C + j]);
            }
        mc_shard_param_slice(plan, g, ab, r, full, part);
        for (int i = 0; i < 3 * C / n; i++)
            assert_true(part[i] == full[(i / (C / n)) * C + r * (C / n) + i % (C / n)]);
        /* out.w [C, 4C]: columns [n][4C/n] */
        assert_int_equal(mc_shard_param_bytes(plan, g, ow, r), sizeof(float) * 4 * C * C / n);
        mc_shard_param_slice(plan, g, ow, r, full, part);
        for (int i = 0; i < C; i++)
            for (int j = 0; j < 4 * C / n; j++)
                assert_true(part[i * (4 * C / n) + j] == full[i * 4 * C + r * (4 * C / n) + j]);
        /* a replicated param: all of it */
        assert_int_equal(mc_shard_param_bytes(plan, g, ln, r), sizeof(float) * C);
        mc_shard_param_slice(plan, g, ln, r, full, part);
        assert_memory_equal(part, full, sizeof(float) * C);
    }
    /* not a param, or out of range: 0 */
    assert_int_equal(mc_shard_param_bytes(plan, g, node_named(g, "b_h"), 0), 0);
    assert_int_equal(mc_shard_param_bytes(plan, g, aw, n), 0);
    assert_int_equal(mc_shard_param_bytes(plan, g, -1, 0), 0);
    mc_shard_plan_free(plan);
    mc_graph_free(g);
}

/* The rank graphs go through the whole pipeline: one collective group per allreduce. */
static void test_rank_graph_compiles(void **state)
{
    (void)state;
    mc_graph *g = gpt2_block("f32", 2, 16, 64, 4, true);
    mc_shard_plan *plan = NULL;
    assert_int_equal(mc_shard_plan_make(g, 2, &plan), MC_OK);
    mc_graph *r = NULL;
    assert_int_equal(mc_shard_graph(g, plan, 1, &r), MC_OK);
    mc_options o = mc_test_options();
    mc_compile_options co = mc_compile_options_for(&o);
    co.verify = true;
    kir_program *kp = NULL;
    if (mc_compile_kernels(r, &co, &kp) != MC_OK)
        fail_msg("%s", mc_error_message());
    int collectives = 0, attention = 0;
    for (int k = 0; k < kp->nkernels; k++) {
        for (int i = 0; i < kp->kernels[k].nops; i++)
            collectives += kp->kernels[k].ops[i] == MC_OP_ALLREDUCE;
        attention += kp->kernels[k].category == KIR_ATTENTION;
    }
    assert_int_equal(collectives, 2);
    assert_int_equal(attention, 1); /* the rank's 2 heads are still one attention chain */
    kir_program_free(kp);
    mc_graph_free(r);
    mc_shard_plan_free(plan);
    mc_graph_free(g);
}

/* What `minic dump --stage shard` prints: the notes as comments, then rank 0's graph. */
static void test_print(void **state)
{
    (void)state;
    mc_graph *g = mlp(0, 4, 8, 16);
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    assert_non_null(f);
    assert_int_equal(mc_shard_print(g, 2, 0, f), MC_OK);
    fclose(f);
    assert_non_null(strstr(buf, "# sharded over 2 ranks: rank 0's graph\n# sharded fc.w (columns) / out.w (rows)"));
    assert_non_null(strstr(buf, "param fc.w : f32[8, 8]\n"));
    assert_non_null(strstr(buf, " = allreduce("));
    assert_non_null(strstr(buf, "o = add("));
    free(buf);
    mc_graph_free(g);
}

static void test_errors(void **state)
{
    (void)state;
    mc_graph *g = mlp(0, 4, 8, 16);
    mc_shard_plan *plan = NULL;
    assert_int_equal(mc_shard_plan_make(g, 0, &plan), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "0 ranks: expected 1 to 1024"));
    assert_null(plan);
    assert_int_equal(mc_shard_plan_make(NULL, 2, &plan), MC_ERR_INPUT);
    assert_int_equal(mc_shard_plan_make(g, 2, NULL), MC_ERR_INPUT);
    assert_int_equal(mc_shard_plan_make(g, 2, &plan), MC_OK);
    mc_graph *r = NULL;
    assert_int_equal(mc_shard_graph(g, plan, 2, &r), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "rank 2 of 2"));
    assert_null(r);
    mc_graph *other = mlp(1, 4, 8, 16);
    assert_int_equal(mc_shard_graph(other, plan, 0, &r), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "a plan made for another graph"));
    assert_int_equal(mc_shard_graph(g, NULL, 0, &r), MC_ERR_INPUT);
    assert_string_equal(mc_shard_plan_notes(NULL), "");
    assert_int_equal(mc_shard_plan_allreduces(NULL), 0);
    mc_shard_plan_free(NULL);
    mc_graph_free(other);
    mc_shard_plan_free(plan);
    mc_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2_block_fused_qkv),
        cmocka_unit_test(test_gpt2_block_separate_qkv_bf16),
        cmocka_unit_test(test_symbolic_block),
        cmocka_unit_test(test_bench_block_files),
        cmocka_unit_test(test_gpt2_model_tied_head),
        cmocka_unit_test(test_gpt2_small_plan),
        cmocka_unit_test(test_mlp),
        cmocka_unit_test(test_region_boundaries),
        cmocka_unit_test(test_three_linears),
        cmocka_unit_test(test_nothing_to_split),
        cmocka_unit_test(test_heads_not_divisible),
        cmocka_unit_test(test_param_slices),
        cmocka_unit_test(test_rank_graph_compiles),
        cmocka_unit_test(test_print),
        cmocka_unit_test(test_errors),
    };
    return mc_test_run(tests);
}
