/* Fused attention (passes/attention.c, KIR_ATTENTION): which chains are recognised, what the
 * kernel IR says about them (steps, skipped pairs, FLOPs and bytes), why the others are not
 * fused, and the numbers: every case runs fused and unfused on every backend built here (ref,
 * cpu, cuda where a GPU is present) and is compared with the float64 evaluation of the graph
 * (docs/FORMAT.md §6): causal and not, boolean and additive masks, a key-padding mask that
 * broadcasts, Tq != Tk, sizes that are not multiples of any tile, head dimensions 32, 64, 80 and
 * 128, f32, f16 and bf16, rows with no key left (NaN, as the unfused graph gives) and huge
 * logits. q, k and v come as separate inputs or as views of one QKV projection.
 */
#include "testlib.h"

#include "passes_check.h"

/* ---- graphs ---------------------------------------------------------------------------------- */

typedef enum {
    MASK_NONE,
    MASK_CAUSAL,     /* where(ge(row + (tk - tq), col), s, -inf): bottom-right aligned */
    MASK_BOOL,       /* where(m, s, -inf), m a bool input [tq, tk] */
    MASK_BOOL_DROP,  /* where(m, -inf, s), m a bool input [b, 1, 1, tk] (key padding) */
    MASK_ADD,        /* add(s, m), m an input of the graph's dtype [tq, tk] */
    MASK_WINDOW,     /* two bands: causal and j > i - window */
    MASK_FINITE,     /* causal with fill -1e9: no pair may be skipped */
    MASK_CAUSAL_ADD, /* causal, then an additive mask */
    MASK_POS,        /* where(le(iota([1, tk], axis=1), pos), s, -inf), pos an i32 input: a KV
                        cache read up to a position (examples/gpt2_generate.c's decode step) */
} mask_kind;

typedef struct {
    const char *name;
    mc_dtype dt;
    int64_t b, h, tq, tk, d, dv;
    mask_kind mask;
    double scale;       /* 0: none */
    bool divide;        /* div by 1/scale instead of mul by scale */
    bool mask_first;    /* the mask before the scale */
    bool qkv;           /* q, k, v as slices of one [b, t, 3 h d] projection (tq == tk, d == dv) */
    bool out_bthd;      /* the output transposed back to [b, tq, h dv] and scaled (GPT-2's layout:
                           the attention kernel stores rows h dv apart, columns contiguous) */
    int32_t pos;        /* MASK_POS: the keys 0..pos are read (-1: none, every row NaN) */
} attn_case;

/* The graph text of case c (a buffer of `size` bytes). */
static void graph_text(const attn_case *c, char *buf, size_t size)
{
    const char *dt = mc_dtype_name(c->dt);
    int n = 0;
#define P(...) (n += snprintf(buf + n, size - (size_t)n, __VA_ARGS__))
    P("graph %s\n", c->name);
    if (c->qkv) {
        int64_t hd = c->h * c->d;
        P("input qkv : %s[%lld, %lld, %lld]\n", dt, (long long)c->b, (long long)c->tq, (long long)(3 * hd));
        const char *names[3] = {"q", "k", "v"};
        for (int i = 0; i < 3; i++) {
            P("%s0 = slice(qkv, axis=2, start=%lld, end=%lld)\n", names[i], (long long)(i * hd), (long long)((i + 1) * hd));
            P("%s1 = reshape(%s0, shape=[%lld, %lld, %lld, %lld])\n", names[i], names[i], (long long)c->b,
              (long long)c->tq, (long long)c->h, (long long)c->d);
            P("%s = transpose(%s1, perm=[0, 2, 1, 3])\n", names[i], names[i]);
        }
    } else {
        P("input q : %s[%lld, %lld, %lld, %lld]\n", dt, (long long)c->b, (long long)c->h, (long long)c->tq, (long long)c->d);
        P("input k : %s[%lld, %lld, %lld, %lld]\n", dt, (long long)c->b, (long long)c->h, (long long)c->tk, (long long)c->d);
        P("input v : %s[%lld, %lld, %lld, %lld]\n", dt, (long long)c->b, (long long)c->h, (long long)c->tk, (long long)c->dv);
    }
    P("kt = transpose(k, perm=[0, 1, 3, 2])\n");
    P("s0 = matmul(q, kt)\n");
    const char *cur = "s0";
    char scaled[64], masked[64];
    for (int step = 0; step < 2; step++) {
        bool do_mask = (step == 0) == c->mask_first;
        if (!do_mask) {
            if (c->scale == 0)
                continue;
            if (c->divide)
                P("sc = div(%s, %.17g)\n", cur, 1.0 / c->scale);
            else
                P("sc = mul(%s, %.17g)\n", cur, c->scale);
            snprintf(scaled, sizeof scaled, "sc");
            cur = scaled;
            continue;
        }
        if (c->mask == MASK_NONE)
            continue;
        if (c->mask == MASK_CAUSAL || c->mask == MASK_WINDOW || c->mask == MASK_FINITE || c->mask == MASK_CAUSAL_ADD) {
            P("row = iota(shape=[%lld, %lld], axis=0)\n", (long long)c->tq, (long long)c->tk);
            P("col = iota(shape=[%lld, %lld], axis=1)\n", (long long)c->tq, (long long)c->tk);
            P("row2 = add(row, %lld)\n", (long long)(c->tk - c->tq));
            P("keep = ge(row2, col)\n");
            P("mk = where(keep, %s, %s)\n", cur, c->mask == MASK_FINITE ? "-1e9" : "-inf");
            if (c->mask == MASK_WINDOW) {
                P("dist = sub(row2, col)\n");
                P("near = lt(dist, 5)\n");
                P("mk2 = where(near, mk, -inf)\n");
                snprintf(masked, sizeof masked, "mk2");
            } else if (c->mask == MASK_CAUSAL_ADD) {
                P("input m : %s[%lld, %lld]\n", dt, (long long)c->tq, (long long)c->tk);
                P("mk2 = add(mk, m)\n");
                snprintf(masked, sizeof masked, "mk2");
            } else {
                snprintf(masked, sizeof masked, "mk");
            }
        } else if (c->mask == MASK_POS) {
            P("input pos : i32[]\n");
            P("col = iota(shape=[1, %lld], axis=1)\n", (long long)c->tk);
            P("keep = le(col, pos)\n");
            P("mk = where(keep, %s, -inf)\n", cur);
            snprintf(masked, sizeof masked, "mk");
        } else if (c->mask == MASK_BOOL) {
            P("input m : bool[%lld, %lld]\n", (long long)c->tq, (long long)c->tk);
            P("mk = where(m, %s, -inf)\n", cur);
            snprintf(masked, sizeof masked, "mk");
        } else if (c->mask == MASK_BOOL_DROP) {
            P("input m : bool[%lld, 1, 1, %lld]\n", (long long)c->b, (long long)c->tk);
            P("mk = where(m, -inf, %s)\n", cur);
            snprintf(masked, sizeof masked, "mk");
        } else {
            P("input m : %s[%lld, %lld]\n", dt, (long long)c->tq, (long long)c->tk);
            P("mk = add(%s, m)\n", cur);
            snprintf(masked, sizeof masked, "mk");
        }
        cur = masked;
    }
    P("p = softmax(%s, axis=-1)\n", cur);
    P("y = matmul(p, v)\n");
    if (c->out_bthd) {
        P("yt = transpose(y, perm=[0, 2, 1, 3])\n");
        P("yr = reshape(yt, shape=[%lld, %lld, %lld])\n", (long long)c->b, (long long)c->tq, (long long)(c->h * c->dv));
        P("z = mul(yr, 2)\n");
        P("output z\n");
    } else {
        P("output y\n");
    }
#undef P
}

static mc_graph *parse_case(const attn_case *c)
{
    char text[4096];
    graph_text(c, text, sizeof text);
    mc_graph *g = NULL;
    if (mc_graph_parse_string(c->name, text, &g) != MC_OK)
        fail_msg("%s: %s\n%s", c->name, mc_error_message(), text);
    return g;
}

static mc_graph *parse(const char *text)
{
    mc_graph *g = NULL;
    if (mc_graph_parse_string("t.graph", text, &g) != MC_OK)
        fail_msg("%s\n%s", mc_error_message(), text);
    return g;
}

static int attention_kernels(const kir_program *kp)
{
    int n = 0;
    for (int k = 0; k < kp->nkernels; k++)
        n += kp->kernels[k].category == KIR_ATTENTION;
    return n;
}

static const kir_kernel *attention_kernel(const kir_program *kp)
{
    for (int k = 0; k < kp->nkernels; k++)
        if (kp->kernels[k].category == KIR_ATTENTION)
            return &kp->kernels[k];
    fail_msg("no attention kernel");
    return NULL;
}

static bool has_note(const kir_program *kp, const char *text)
{
    for (int n = 0; n < kp->nnotes; n++)
        if (strstr(kp->notes[n], text))
            return true;
    return false;
}

/* ---- recognition ----------------------------------------------------------------------------- */

static void test_recognises_causal_block(void **state)
{
    (void)state;
    attn_case c = {"causal", MC_F32, 2, 3, 37, 37, 32, 32, MASK_CAUSAL, 0.125, false, false, true, false, 0};
    mc_graph *g = parse_case(&c);
    kir_program *kp = check_kernels(g, true);
    assert_non_null(kp);
    assert_int_equal(attention_kernels(kp), 1);
    assert_int_equal(kp->nkernels, 1); /* the output is stored in place of the transpose */
    const kir_kernel *k = attention_kernel(kp);
    const kir_attention *a = &k->attn;
    assert_int_equal(a->tq, 37);
    assert_int_equal(a->tk, 37);
    assert_int_equal(a->d, 32);
    assert_int_equal(a->nsteps, 2);
    assert_int_equal(a->steps[0].kind, KIR_STEP_MUL);
    assert_int_equal(a->steps[1].kind, KIR_STEP_BAND);
    assert_true(a->steps[1].hi == 0 && a->steps[1].lo == -KIR_BAND_OPEN);
    assert_true(a->skip && a->skip_hi == 0);
    /* the causal half: 37 * 38 / 2 pairs; FLOPs 2 (d + dv) + 2 steps + 5 per pair and head */
    int64_t pairs = 37 * 38 / 2;
    assert_int_equal(kir_attention_pairs(k), pairs);
    assert_int_equal(k->flops, 2 * 3 * pairs * (2 * (32 + 32) + 2 + 5));
    /* bytes: q, k, v (slices of one qkv buffer, each read once) and y */
    assert_int_equal(k->bytes, (2 * 37 * 3 * 96 + 2 * 3 * 37 * 32) * 4);
    /* q, k and v are strided views of the projection: no copy kernel */
    assert_int_equal(k->views[a->q].buffer, k->views[a->v].buffer);
    assert_int_equal(k->views[a->q].stride[3], 1);
    assert_int_equal(k->views[a->q].stride[2], 3 * 96);
    /* without fusion: the chain as it was */
    kir_program *un = check_kernels(g, false);
    assert_int_equal(attention_kernels(un), 0);
    kir_program_free(un);
    kir_program_free(kp);
    mc_graph_free(g);
}

static void test_recognises_steps(void **state)
{
    (void)state;
    /* mask before the scale, a division, an inverted boolean mask that broadcasts */
    attn_case c = {"steps", MC_F32, 2, 2, 5, 9, 16, 24, MASK_BOOL_DROP, 0.5, true, true, false, false, 0};
    mc_graph *g = parse_case(&c);
    kir_program *kp = check_kernels(g, true);
    const kir_kernel *k = attention_kernel(kp);
    const kir_attention *a = &k->attn;
    assert_int_equal(a->nsteps, 2);
    assert_int_equal(a->steps[0].kind, KIR_STEP_WHERE);
    assert_false(a->steps[0].keep);
    assert_true(isinf(a->steps[0].value) && a->steps[0].value < 0);
    assert_int_equal(a->steps[1].kind, KIR_STEP_DIV);
    assert_true(a->steps[1].value == 2.0);
    assert_false(a->skip);
    const kir_view *m = &k->views[a->steps[0].view];
    assert_int_equal(m->stride[1], 0); /* heads */
    assert_int_equal(m->stride[2], 0); /* queries */
    assert_int_equal(m->stride[3], 1); /* keys */
    assert_int_equal(m->stride[0], 9); /* batch */
    assert_int_equal(kir_attention_pairs(k), 5 * 9);
    /* the mask is read once: b * tk bools */
    assert_int_equal(k->bytes, (2 * 2 * 5 * 16 + 2 * 2 * 9 * 16 + 2 * 2 * 9 * 24 + 2 * 2 * 5 * 24) * 4 + 2 * 9);
    kir_program_free(kp);
    mc_graph_free(g);

    /* a sliding window: two bands, both skipping */
    attn_case w = {"window", MC_F32, 1, 1, 20, 20, 8, 8, MASK_WINDOW, 0, false, false, false, false, 0};
    g = parse_case(&w);
    kp = check_kernels(g, true);
    k = attention_kernel(kp);
    assert_int_equal(k->attn.nsteps, 2);
    assert_true(k->attn.skip && k->attn.skip_lo == -4 && k->attn.skip_hi == 0);
    assert_int_equal(kir_attention_pairs(k), 5 * 20 - (1 + 2 + 3 + 4));
    kir_program_free(kp);
    mc_graph_free(g);

    /* a finite fill, or an additive mask after the band: nothing may be skipped */
    attn_case f = {"finite", MC_F32, 1, 1, 6, 6, 8, 8, MASK_FINITE, 0, false, false, false, false, 0};
    g = parse_case(&f);
    kp = check_kernels(g, true);
    assert_false(attention_kernel(kp)->attn.skip);
    assert_int_equal(kir_attention_pairs(attention_kernel(kp)), 36);
    kir_program_free(kp);
    mc_graph_free(g);
    attn_case ca = {"causal_add", MC_F32, 1, 1, 6, 6, 8, 8, MASK_CAUSAL_ADD, 0, false, false, false, false, 0};
    g = parse_case(&ca);
    kp = check_kernels(g, true);
    assert_int_equal(attention_kernel(kp)->attn.nsteps, 2);
    assert_false(attention_kernel(kp)->attn.skip);
    kir_program_free(kp);
    mc_graph_free(g);
}

/* The read of a KV cache up to a position (le(iota, pos) as a where mask, gpt2_generate's decode
 * step): one query, a boolean mask step loaded from the mask tensor, no pair skipped. */
static void test_recognises_position_bound(void **state)
{
    (void)state;
    attn_case c = {"pos", MC_F32, 2, 3, 1, 256, 64, 64, MASK_POS, 0.125, false, false, false, true, 9};
    mc_graph *g = parse_case(&c);
    kir_program *kp = check_kernels(g, true);
    const kir_kernel *k = attention_kernel(kp);
    const kir_attention *a = &k->attn;
    assert_int_equal(a->tq, 1);
    assert_int_equal(a->tk, 256);
    assert_int_equal(a->nsteps, 2);
    assert_int_equal(a->steps[0].kind, KIR_STEP_MUL);
    assert_int_equal(a->steps[1].kind, KIR_STEP_WHERE);
    assert_true(a->steps[1].keep);
    assert_false(a->skip);
    const kir_view *m = &k->views[a->steps[1].view];
    assert_int_equal(m->stride[0], 0);
    assert_int_equal(m->stride[1], 0);
    assert_int_equal(m->stride[3], 1);
    kir_program_free(kp);
    mc_graph_free(g);
}

/* Chains that look like attention but are not fused say why; the results stay right. */
static void test_not_fused_says_why(void **state)
{
    (void)state;
    static const struct {
        const char *graph, *why;
    } cases[] = {
        {"graph a\ninput q : f32[2, 4, 8]\ninput k : f32[2, 8, 4]\ninput v : f32[2, 4, 8]\n"
         "s = matmul(q, k)\np = softmax(s)\ny = matmul(p, v)\noutput y, s\n",
         "is used outside the softmax or is an output"},
        {"graph a\ninput q : f32[2, 4, 8]\ninput k : f32[2, 8, 4]\ninput v : f32[2, 4, 8]\n"
         "s = matmul(q, k)\nr = relu(s)\np = softmax(r)\ny = matmul(p, v)\noutput y\n",
         "r (relu, line 6) stands between the matmul and the softmax"},
        {"graph a\ninput q : f32[2, 4, 160]\ninput k : f32[2, 160, 4]\ninput v : f32[2, 4, 8]\n"
         "s = matmul(q, k)\np = softmax(s)\ny = matmul(p, v)\noutput y\n",
         "head dimension 160 is over 128"},
        {"graph a\ninput q : f32[2, 4, 8]\ninput k : f32[2, 8, 4]\ninput v : f32[2, 4, 8]\ninput w : f32[4, 4]\n"
         "s = matmul(q, k)\nt = mul(s, w)\np = softmax(t)\ny = matmul(p, v)\noutput y\n",
         "multiplies by a tensor"},
        {"graph a\ninput q : f32[2, 4, 8]\ninput k : f32[2, 8, 4]\ninput v : f32[2, 4, 8]\n"
         "s = matmul(q, k)\np = softmax(s)\ny = matmul(p, v)\nz = add(p, 1)\noutput y, z\n",
         "is used elsewhere or is an output"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mc_graph *g = parse(cases[i].graph);
        kir_program *kp = check_kernels(g, true);
        assert_non_null(kp);
        if (attention_kernels(kp) != 0 || !has_note(kp, cases[i].why)) {
            kir_print(kp, g, stderr);
            fail_msg("case %zu: expected no attention kernel and a note '%s'", i, cases[i].why);
        }
        /* minic dump --stage fused prints it */
        char *text = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&text, &len);
        kir_print(kp, g, out);
        fclose(out);
        assert_non_null(strstr(text, "# attention not fused: softmax p (softmax"));
        free(text);
        char why[256];
        if (check_graph(g, 5, 1.0, why, sizeof why))
            fail_msg("case %zu: %s", i, why);
        kir_program_free(kp);
        mc_graph_free(g);
    }
    /* a softmax that does not feed a matmul is no candidate: no note */
    mc_graph *g = parse("graph a\ninput x : f32[4, 8]\np = softmax(x)\noutput p\n");
    kir_program *kp = check_kernels(g, true);
    assert_int_equal(kp->nnotes, 0);
    kir_program_free(kp);
    mc_graph_free(g);
}

/* The causal mask's iotas and compare are not computed when only the kernel needed them; a
 * mask shared by two attention chains (two layers) is not computed either. */
static void test_band_mask_costs_nothing(void **state)
{
    (void)state;
    mc_graph *g = parse("graph two\ninput q : f32[2, 6, 8]\ninput k : f32[2, 8, 6]\ninput v : f32[2, 6, 8]\n"
                        "row = iota(shape=[6, 6], axis=0)\ncol = iota(shape=[6, 6], axis=1)\nkeep = ge(row, col)\n"
                        "s = matmul(q, k)\nm = where(keep, s, -inf)\np = softmax(m)\ny = matmul(p, v)\n"
                        "s2 = matmul(y, k)\nm2 = where(keep, s2, -inf)\np2 = softmax(m2)\ny2 = matmul(p2, v)\n"
                        "output y2\n");
    kir_program *kp = check_kernels(g, true);
    assert_int_equal(attention_kernels(kp), 2);
    assert_int_equal(kp->nkernels, 2);
    kir_program_free(kp);
    char why[256];
    if (check_graph(g, 9, 1.0, why, sizeof why))
        fail_msg("%s", why);
    mc_graph_free(g);
}

/* ---- numbers on every backend ------------------------------------------------------------------ */

static const attn_case cases[] = {
    {"causal_f32_d32", MC_F32, 2, 3, 37, 37, 32, 32, MASK_CAUSAL, 0.17677669529663687, false, false, false, false, 0},
    {"plain_tq_ne_tk_d64", MC_F32, 1, 2, 17, 45, 64, 64, MASK_NONE, 0.125, true, false, false, false, 0},
    {"bool_mask_d80", MC_F32, 2, 2, 19, 23, 80, 80, MASK_BOOL, 0.11180339887498948, false, false, false, false, 0},
    {"key_padding_d64", MC_F32, 3, 2, 9, 70, 64, 48, MASK_BOOL_DROP, 0.125, false, true, false, false, 0},
    {"additive_d128", MC_F32, 1, 2, 33, 40, 128, 128, MASK_ADD, 0.08838834764831845, false, false, false, false, 0},
    {"causal_f16_d64", MC_F16, 2, 2, 70, 70, 64, 64, MASK_CAUSAL, 0.125, false, false, false, false, 0},
    {"causal_bf16_qkv", MC_BF16, 2, 2, 33, 33, 64, 64, MASK_CAUSAL, 0.125, false, false, true, false, 0},
    {"causal_f32_qkv_d80", MC_F32, 1, 3, 65, 65, 80, 80, MASK_CAUSAL, 0.11180339887498948, false, false, true, false, 0},
    {"empty_rows", MC_F32, 1, 2, 24, 10, 32, 32, MASK_CAUSAL, 0.17677669529663687, false, false, false, false, 0},
    /* scores up to a few hundred: exp overflows f32 without the max subtracted (larger ones
     * would measure f32's rounding of the scores, unfused as much as fused) */
    {"huge_logits", MC_F32, 2, 2, 40, 40, 32, 32, MASK_CAUSAL, 30.0, false, false, false, false, 0},
    /* long enough for whole key tiles below the diagonal, where the CUDA kernels keep raw scores
     * and fold the scale into the exponent (mc_full): FMA (f32) and tensor-core (f16) kernels */
    {"huge_logits_full_tiles", MC_F32, 1, 2, 100, 100, 64, 64, MASK_CAUSAL, 30.0, false, false, false, false, 0},
    {"huge_logits_f16_d64", MC_F16, 1, 2, 140, 140, 64, 64, MASK_CAUSAL, 30.0, false, false, false, false, 0},
    {"window_f32", MC_F32, 1, 2, 50, 50, 32, 32, MASK_WINDOW, 0.17677669529663687, false, false, false, false, 0},
    {"finite_fill", MC_F32, 1, 2, 21, 21, 32, 32, MASK_FINITE, 0.17677669529663687, false, false, false, false, 0},
    {"causal_add_bf16", MC_BF16, 1, 2, 30, 30, 32, 64, MASK_CAUSAL_ADD, 0.17677669529663687, false, false, false, false, 0},
    {"additive_f16_d128", MC_F16, 1, 1, 130, 130, 128, 128, MASK_ADD, 0.08838834764831845, false, false, false, false, 0},
    {"bool_bf16_d32", MC_BF16, 2, 1, 64, 64, 32, 32, MASK_BOOL, 0.17677669529663687, false, false, false, false, 0},
    /* the output in [b, t, h dv] (stored transposed, columns along the vector lanes): whole
     * query blocks and a partial last one; dv 40 leaves columns past the last whole vector */
    {"gpt2_layout_qkv", MC_F32, 2, 3, 100, 100, 64, 64, MASK_CAUSAL, 0.125, false, false, true, true, 0},
    {"gpt2_layout_dv40", MC_F32, 1, 3, 70, 70, 32, 40, MASK_CAUSAL, 0.17677669529663687, false, false, false, true, 0},
    /* key blocks cut into segments by the first query vector that keeps their keys, with the
     * diagonal off the blocks' corners (Tq < Tk: j - i <= 30) and a band with two sides */
    {"causal_tq_lt_tk", MC_F32, 1, 2, 100, 130, 64, 64, MASK_CAUSAL, 0.125, false, false, false, false, 0},
    {"window_long", MC_F32, 1, 2, 150, 150, 32, 32, MASK_WINDOW, 0.17677669529663687, false, false, false, false, 0},
    {"gpt2_layout_bf16_d80", MC_BF16, 1, 2, 64, 64, 80, 80, MASK_NONE, 0.11180339887498948, false, false, true, true, 0},
    /* decode-shaped (a few queries over a long KV cache: CUDA's decode kernel, split over the
     * keys, in f32 and in the 16-bit types): GPT-2's decode step (one query, the cache read up
     * to pos, the output in [b, 1, h dv]), a position inside the last chunk, none (every row
     * NaN), huge logits, 3 and 4 queries, causal, a boolean mask, d 80 and 128 */
    {"decode_pos_f32", MC_F32, 2, 3, 1, 1024, 64, 64, MASK_POS, 0.125, false, false, false, true, 700},
    {"decode_pos_bf16", MC_BF16, 2, 3, 1, 1024, 64, 64, MASK_POS, 0.125, false, false, false, true, 1000},
    {"decode_pos_last_f16", MC_F16, 1, 2, 1, 256, 64, 64, MASK_POS, 0.125, false, false, false, false, 255},
    {"decode_pos_none", MC_F32, 1, 2, 1, 256, 64, 64, MASK_POS, 0.125, false, false, false, false, -1},
    {"decode_pos_none_bf16", MC_BF16, 2, 2, 1, 130, 64, 64, MASK_POS, 0.125, false, false, false, false, -1},
    {"decode_huge_logits", MC_F32, 1, 2, 1, 777, 64, 64, MASK_POS, 30.0, false, false, false, false, 776},
    {"decode_tq3_d128_f16", MC_F16, 1, 2, 3, 300, 128, 128, MASK_POS, 0.08838834764831845, false, false, false, false, 150},
    {"decode_causal_tq4_d80", MC_F32, 2, 2, 4, 500, 80, 80, MASK_CAUSAL, 0.11180339887498948, false, false, false, true, 0},
    {"decode_bool_tq2_bf16", MC_BF16, 2, 2, 2, 333, 32, 32, MASK_BOOL, 0.17677669529663687, false, false, false, false, 0},
    {"decode_add_tq1_d80_bf16", MC_BF16, 1, 3, 1, 2000, 80, 80, MASK_ADD, 0.11180339887498948, false, false, false, false, 0},
};

typedef struct {
    mc_backend_kind backend;
    const char *name;
} backend_choice;

/* Run c fused or not on backend b; compare with the float64 graph evaluation. Returns false
 * when the backend is not available here. */
static bool check_case(const attn_case *c, mc_backend_kind backend, bool fuse, uint64_t seed)
{
    mc_graph *g = parse_case(c);
    mc_options opt = mc_test_options();
    opt.backend = backend;
    opt.fuse = fuse;
    opt.quiet = true;
    mc_program *p = NULL;
    mc_status st = mc_program_compile(g, &opt, &p);
    if (st != MC_OK) {
        mc_graph_free(g);
        if (st == MC_ERR_SYSTEM)
            return false;
        fail_msg("%s: compile: %s", c->name, mc_error_message());
    }
    /* fused: one attention kernel wherever the backend runs them */
    if (fuse && p->backend->attention && attention_kernels(p->kp) != 1)
        fail_msg("%s on %s: %d attention kernels", c->name, mc_backend_name(backend), attention_kernels(p->kp));
    assert_int_equal(mc_program_fill_random(p, seed), MC_OK);
    if (c->mask == MASK_POS)
        assert_int_equal(mc_program_set(p, "pos", &c->pos, sizeof c->pos), MC_OK);
    assert_int_equal(mc_program_run(p), MC_OK);
    const void **inputs = calloc((size_t)g->nnodes, sizeof *inputs);
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].op == MC_OP_INPUT) {
            int b = mc_program_find(p, g->nodes[i].name);
            assert_true(b >= 0);
            inputs[i] = p->host[b];
        }
    double *ref = NULL;
    assert_int_equal(mc_graph_eval(g, inputs, true, &ref), MC_OK);
    mc_tensor t;
    assert_int_equal(mc_program_output(p, 0, &t), MC_OK);
    int64_t n = mc_node_numel(&g->nodes[g->outputs[0]]);
    double *got = malloc(sizeof *got * (size_t)n);
    int nan_rows = 0;
    for (int64_t e = 0; e < n; e++) {
        got[e] = mc_load_element(t.data, t.dtype, e);
        ref[e] = mc_round_to_dtype(ref[e], c->dt);
        nan_rows += isnan(ref[e]);
    }
    double err = mc_test_rel_error(got, ref, n);
    double tol = c->dt == MC_F32 ? 1e-4 : 1e-2;
    if (!(err <= tol))
        fail_msg("%s on %s, %s: relative error %.3g > %.3g", c->name, mc_backend_name(backend),
                 fuse ? "fused" : "unfused", err, tol);
    if (strcmp(c->name, "empty_rows") == 0) /* rows 0..13 have no key: NaN, as unfused */
        assert_int_equal(nan_rows, 1 * 2 * 14 * 32);
    else if (c->mask == MASK_POS && c->pos < 0) /* no key at all: every row NaN */
        assert_int_equal(nan_rows, n);
    else if (c->mask != MASK_BOOL && c->mask != MASK_BOOL_DROP)
        assert_int_equal(nan_rows, 0);
    free(got);
    free(ref);
    free(inputs);
    mc_program_free(p);
    mc_graph_free(g);
    return true;
}

static void run_cases(mc_backend_kind backend)
{
    int ran = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int fuse = 1; fuse >= 0; fuse--)
            ran += check_case(&cases[i], backend, fuse, 11 + i);
    if (ran == 0) {
        print_message("skipped: the %s backend is not usable here\n", mc_backend_name(backend));
        skip();
    }
}

/* Under a pinned CPU target (test_attention@x86-64-v3, @x86-64-v4) only the CPU backend's cases
 * run: the others do not depend on it. */
static bool skip_under_pinned_target(void)
{
    if (!mc_test_cpu_target())
        return false;
    print_message("skipped: under MINIC_TEST_CPU_TARGET the CPU backend's cases only\n");
    return true;
}

static void test_ref_backend(void **state)
{
    (void)state;
    if (skip_under_pinned_target())
        skip();
    run_cases(MC_BACKEND_REF);
}

static void test_cpu_backend(void **state)
{
    (void)state;
#ifdef MINIC_HAVE_CPU_BACKEND
    run_cases(MC_BACKEND_CPU);
#else
    print_message("skipped: built without the CPU backend\n");
    skip();
#endif
}

static void test_cuda_backend(void **state)
{
    (void)state;
    if (skip_under_pinned_target())
        skip();
    if (!mc_test_have_gpu()) {
        print_message("skipped: no usable GPU\n");
        skip();
    }
    run_cases(MC_BACKEND_CUDA);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recognises_causal_block),
        cmocka_unit_test(test_recognises_steps),
        cmocka_unit_test(test_recognises_position_bound),
        cmocka_unit_test(test_not_fused_says_why),
        cmocka_unit_test(test_band_mask_costs_nothing),
        cmocka_unit_test(test_ref_backend),
        cmocka_unit_test(test_cpu_backend),
        cmocka_unit_test(test_cuda_backend),
    };
    return mc_test_run(tests);
}
