/* Symbolic dimensions (docs/FORMAT.md §1, issue 23): the `.graph` syntax DIM := INT | NAME |
 * NAME<=INT in types and shape lists, the C API's mc_dim_sym, symbolic shape inference (sums,
 * products and exact quotients of dims), printing that parses back, errors at file:line:col,
 * and specialisation of a symbolic graph to one binding. */
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "passes/passes.h"
#include "runtime/runtime.h"
#include "passes_check.h"
#ifdef MINIC_HAVE_CUDA
#include "backends/cuda/cuda.h"
#include "cuda_sized.h"
#endif

#define SHAPE(...) (int64_t[]){__VA_ARGS__}, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

static mc_graph *parse(const char *text)
{
    mc_graph *g = NULL;
    if (mc_graph_parse_string("sym.graph", text, &g) != MC_OK)
        fail_msg("parse failed: %s", mc_error_message());
    return g;
}

static void parse_fails(const char *text, const char *message)
{
    mc_graph *g = NULL;
    assert_int_equal(mc_graph_parse_string("sym.graph", text, &g), MC_ERR_INPUT);
    assert_null(g);
    if (!strstr(mc_error_message(), message))
        fail_msg("message \"%s\" lacks \"%s\"", mc_error_message(), message);
}

/* The type of the value called name, as "[B, T*2]". */
static const char *type_of(const mc_graph *g, const char *name)
{
    static char buf[256];
    int32_t v = mc_name_map_get(&g->names, name);
    if (v < 0)
        fail_msg("no value %s", name);
    const mc_node *n = &g->nodes[v];
    size_t used = (size_t)snprintf(buf, sizeof buf, "[");
    for (int d = 0; d < n->rank; d++) {
        char dim[96];
        used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%s", d ? ", " : "",
                                 mc_dim_str(g, n->shape[d], dim, sizeof dim));
    }
    snprintf(buf + used, sizeof buf - used, "]");
    return buf;
}

static char *print_graph(const mc_graph *g)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(mc_graph_print(g, f), MC_OK);
    fclose(f);
    return text;
}

static const char *attention_like =
    "graph sym\n"
    "input x : f32[B, T<=64, 32]\n"
    "input mask : f32[T, T]\n"
    "param w : f32[32, 32]\n"
    "h = linear(x, w)\n"
    "heads = reshape(h, shape=[B, T, 4, 8])\n"
    "flat = reshape(h, shape=[-1, 32])\n"
    "back = reshape(flat, shape=[B, -1, 32])\n"
    "tail = slice(x, axis=1, start=1)\n"
    "last = slice(x, axis=1, start=-1)\n"
    "head = slice(x, axis=1, start=0, end=2)\n"
    "twice = concat(x, x, tail, axis=1)\n"
    "m = expand(mask, shape=[B, T, T])\n"
    "pos = iota(shape=[T, T], axis=0)\n"
    "ones = full(shape=[B, 4], value=1)\n"
    "s = add(m, mask)\n"
    "r = sum(h, axis=1)\n"
    "p = pad(x, pads=[0, 1, 0, 0, 2, 0])\n"
    "output heads, flat, back, tail, last, head, twice, s, pos, ones, r, p\n";

static void test_parse_and_infer(void **state)
{
    (void)state;
    mc_graph *g = parse(attention_like);
    assert_int_equal(mc_graph_num_syms(g), 2);
    assert_string_equal(mc_dim_sym_name(g, 0), "B");
    assert_int_equal(mc_dim_sym_max(g, 0), 0);
    assert_int_equal(mc_dim_sym_max(g, 1), 64);
    assert_string_equal(type_of(g, "h"), "[B, T, 32]");
    assert_string_equal(type_of(g, "heads"), "[B, T, 4, 8]");
    assert_string_equal(type_of(g, "flat"), "[B*T, 32]");
    assert_string_equal(type_of(g, "back"), "[B, T, 32]");
    assert_string_equal(type_of(g, "tail"), "[B, T - 1, 32]");
    assert_string_equal(type_of(g, "last"), "[B, 1, 32]");
    assert_string_equal(type_of(g, "head"), "[B, 2, 32]");
    assert_string_equal(type_of(g, "twice"), "[B, T*3 - 1, 32]");
    assert_string_equal(type_of(g, "s"), "[B, T, T]");
    assert_string_equal(type_of(g, "pos"), "[T, T]");
    assert_string_equal(type_of(g, "ones"), "[B, 4]");
    assert_string_equal(type_of(g, "r"), "[B, 32]");
    assert_string_equal(type_of(g, "p"), "[B, T + 3, 32]");
    /* the same expression is the same dim: equality of shapes stays == */
    int32_t back = mc_name_map_get(&g->names, "back"), h = mc_name_map_get(&g->names, "h");
    assert_memory_equal(g->nodes[back].shape, g->nodes[h].shape, 3 * sizeof(int64_t));
    assert_int_equal(mc_graph_verify(g, "test"), MC_OK);
    mc_graph_free(g);
}

/* What mc_graph_print writes parses back to a graph that prints the same; the maximum is written
 * once, where the symbol is first used; a -1 that became an expression is written as -1. */
static void test_print_roundtrip(void **state)
{
    (void)state;
    mc_graph *g = parse(attention_like);
    char *once = print_graph(g);
    assert_non_null(strstr(once, "input x : f32[B, T<=64, 32]\n"));
    assert_non_null(strstr(once, "input mask : f32[T, T]\n"));
    assert_non_null(strstr(once, "flat = reshape(h, shape=[-1, 32])  # f32[B*T, 32]\n"));
    assert_non_null(strstr(once, "# f32[B, T - 1, 32]"));
    mc_graph *again = parse(once);
    char *twice = print_graph(again);
    assert_string_equal(once, twice);
    free(once);
    free(twice);
    mc_graph_free(again);
    mc_graph_free(g);
    /* a maximum given at a later declaration is printed at the first one */
    g = parse("input a : f32[N]\ninput b : f32[N<=9, 2]\noutput a, b\n");
    once = print_graph(g);
    assert_non_null(strstr(once, "input a : f32[N<=9]\ninput b : f32[N, 2]\n"));
    free(once);
    mc_graph_free(g);
}

static void test_errors(void **state)
{
    (void)state;
    parse_fails("input x : f32[B, 4]\ninput y : f32[T, 4]\nz = add(x, y)\noutput z\n",
                "sym.graph:3:5: error: add: shapes [B, 4] and [T, 4] do not broadcast (axis -2: B vs T)");
    parse_fails("input x : f32[B, T]\ninput y : f32[B, 4]\nz = matmul(x, y)\noutput z\n",
                "sym.graph:3:5: error: matmul: inner dimensions differ: [B, T] @ [B, 4]");
    parse_fails("input x : f32[B<=4, 4]\ninput y : f32[B<=5, 4]\noutput x\n",
                "sym.graph:2:15: error: dimension 'B' was declared with maximum 4 at line 1; it cannot also be <= 5");
    parse_fails("input x : f32[B, 4]\nz = reshape(x, shape=[Q, 4])\noutput z\n",
                "sym.graph:2:23: error: 'Q' is not a dimension declared in an input or param type");
    parse_fails("input x : f32[B, 4]\nB = neg(x)\noutput B\n",
                "sym.graph:2:1: error: 'B' is a symbolic dimension; a value cannot have its name");
    parse_fails("input x : f32[x, 4]\noutput x\n", "sym.graph:1:7: error: 'x' is a symbolic dimension");
    parse_fails("input x : f32[4]\ninput y : f32[x]\noutput y\n", "sym.graph:2:15: error: 'x' is a value");
    parse_fails("input x : f32[B, 4]\nz = reshape(x, shape=[-1, 3])\noutput z\n",
                "sym.graph:2:5: error: reshape: cannot reshape [B, 4] (B*4 elements) to [-1, 3]: B*4 is not a "
                "multiple of 3");
    parse_fails("input x : f32[B, 4]\nz = reshape(x, shape=[B, 2])\noutput z\n",
                "(B*4 elements) to [B, 2] (B*2 elements)");
    parse_fails("input x : f32[T]\nz = slice(x, axis=0, start=0, end=8, step=2)\noutput z\n",
                "sym.graph:2:5: error: slice: step=2 over axis 0 of symbolic size T");
    parse_fails("input x : f32[T]\nz = slice(x, axis=0, start=-2, end=8)\noutput z\n", "the slice's size");
    parse_fails("input x : f32[T<=0]\noutput x\n", "must be positive");
    parse_fails("input x : f32[T<=]\noutput x\n", "expected the dimension's maximum");
    parse_fails("input x : f32[f32]\noutput x\n", "reserved word");
    { /* a 300-character name (found by fuzz_parse): a located error, not the C API's message */
        char text[400];
        snprintf(text, sizeof text, "input x : f32[%0300d, 4]\noutput x\n", 0);
        memset(text + 14, 'N', 300);
        parse_fails(text, "sym.graph:1:15: error: a dimension name has 1 to 255 characters; this one has 300");
    }
    parse_fails("input x : f32[1, C, 8]\nparam w : f32[2, 1, 3]\ny = conv(x, w)\noutput y\n",
                "sym.graph:3:5: error: conv: operand 1 has the symbolic dimension C on axis 1");
}

static void test_c_api(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("api");
    int64_t B = mc_dim_sym(g, "B", 0), T = mc_dim_sym(g, "T", 128);
    assert_true(mc_dim_is_sym(B) && mc_dim_is_sym(T) && B != T);
    assert_int_equal(mc_dim_sym(g, "T", 0), T); /* the same name, the same dim */
    assert_int_equal(mc_dim_sym(g, "T", 128), T);
    mc_value x = mc_input(g, "x", MC_F32, SHAPE(B, T, 16));
    mc_value flat = mc_reshape(g, x, SHAPE(-1, 16));
    mc_value pos = mc_iota(g, SHAPE(T), 0, MC_I32);
    mc_value both = mc_concat(g, (mc_value[]){x, x}, 2, 1);
    assert_true(x >= 0 && flat >= 0 && pos >= 0 && both >= 0);
    assert_string_equal(type_of(g, "x"), "[B, T, 16]");
    char buf[64];
    assert_string_equal(mc_dim_str(g, g->nodes[flat].shape[0], buf, sizeof buf), "B*T");
    assert_string_equal(mc_dim_str(g, g->nodes[both].shape[1], buf, sizeof buf), "T*2");
    mc_value w = mc_param(g, "w", MC_F32, SHAPE(8, 16));
    assert_true(w >= 0);
    assert_int_equal(mc_matmul(g, x, w), MC_ERROR); /* [B, T, 16] @ [8, 16] */
    assert_non_null(strstr(mc_error_message(), "inner dimensions differ: [B, T, 16] @ [8, 16]"));
    mc_graph_free(g);

    g = mc_graph_new("bad");
    assert_int_equal(mc_dim_sym(g, "T", 4), mc_dim_sym(g, "T", 0));
    assert_int_equal(mc_dim_sym(g, "T", 5), 0);
    assert_non_null(strstr(mc_error_message(), "declared with maximum 4"));
    assert_int_equal(mc_dim_sym(g, "1x", 0), 0);
    assert_non_null(strstr(mc_error_message(), "not a valid dimension name"));
    assert_int_equal(mc_dim_sym(g, NULL, 0), 0);
    assert_int_equal(mc_dim_sym(g, "N", -3), 0);
    assert_int_equal(mc_dim_sym(NULL, "N", 0), 0);
    /* a dim of no graph's table is refused */
    assert_int_equal(mc_input(g, "x", MC_F32, SHAPE(MC_DIM_SYM_BASE - 99)), MC_ERROR);
    assert_non_null(strstr(mc_error_message(), "not a dimension of this graph"));
    mc_graph_free(g);
}

/* A symbolic graph cloned and specialised to one binding: static shapes, attributes evaluated,
 * the slice's assumption (its start inside the axis) checked. */
static void test_specialize(void **state)
{
    (void)state;
    mc_graph *g = parse(attention_like);
    mc_graph *c = mc_graph_clone(g); /* the clone has its own table */
    mc_graph_free(g);
    g = c;
    mc_graph *s = NULL;
    assert_int_equal(mc_graph_specialize(g, (int64_t[]){3, 5}, &s), MC_OK);
    assert_int_equal(mc_graph_num_syms(s), 0);
    assert_string_equal(type_of(s, "flat"), "[15, 32]");
    assert_string_equal(type_of(s, "twice"), "[3, 14, 32]");
    assert_string_equal(type_of(s, "tail"), "[3, 4, 32]");
    assert_string_equal(type_of(s, "pos"), "[5, 5]");
    assert_string_equal(type_of(s, "p"), "[3, 8, 32]");
    int32_t heads = mc_name_map_get(&s->names, "heads");
    assert_int_equal(s->nodes[heads].attr.list[1], 5);
    assert_int_equal(mc_graph_verify(s, "specialize"), MC_OK);
    mc_graph_free(s);
    /* T=1: `tail` selects nothing */
    assert_int_equal(mc_graph_specialize(g, (int64_t[]){3, 1}, &s), MC_ERR_INPUT);
    assert_null(s);
    assert_non_null(strstr(mc_error_message(), "sym.graph:9:"));
    assert_non_null(strstr(mc_error_message(), "B=3, T=1"));
    mc_graph_free(g);
    /* `head` takes the first two: T=1 has only one, which its type does not allow */
    g = parse("input x : f32[T]\nh = slice(x, axis=0, start=0, end=2)\noutput h\n");
    assert_int_equal(mc_graph_specialize(g, (int64_t[]){1}, &s), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "sym.graph:2:5: error: h: axis 0 has size 1 with T=1, but its type says 2"));
    mc_graph_free(g);
}

/* Nothing compiles a graph with unbound symbols: the passes and the float64 oracle refuse it. */
static void test_unbound_refused(void **state)
{
    (void)state;
    mc_graph *g = parse("input x : f32[N]\ny = exp(x)\noutput y\n");
    double *out[1];
    assert_int_equal(mc_graph_eval(g, (const void *[]){NULL, NULL}, true, out), MC_ERR_INPUT);
    kir_program *kp = NULL;
    assert_int_equal(mc_compile_kernels(g, NULL, &kp), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "symbolic dimensions (N)"));
    mc_graph_free(g);
}

/* ---- running (step 2: one program compiled per binding) ------------------------------------ */

static const char *model =
    "graph model\n"                                  /* 1 */
    "input x : f32[B, T<=16, 4]\n"                    /* 2 */
    "input m : f32[T, T]\n"                           /* 3 */
    "param w : f32[4, 4]\n"                           /* 4 */
    "h = linear(x, w)\n"                              /* 5 */
    "ht = transpose(h, perm=[0, 2, 1])\n"             /* 6 */
    "scores = matmul(h, ht)\n"                        /* 7 */
    "tail = slice(x, axis=1, start=1)\n"              /* 8 */
    "masked = add(scores, m)\n"                       /* 9 */
    "s = softmax(masked, axis=-1)\n"                  /* 10 */
    "flat = reshape(h, shape=[-1, 4])\n"              /* 11 */
    "c = concat(x, tail, axis=1)\n"                   /* 12 */
    "pos = iota(shape=[T, T], axis=1, dtype=f32)\n"   /* 13 */
    "sp = add(s, pos)\n"                              /* 14 */
    "r = mean(sp, axis=2)\n"                          /* 15 */
    "output s, flat, c, r\n";

static mc_backend_kind backends[] = {MC_BACKEND_REF,
#ifdef MINIC_HAVE_CPU_BACKEND
                                     MC_BACKEND_CPU,
#endif
};

static mc_program *compile_for(const mc_graph *g, mc_backend_kind kind)
{
    mc_options o = mc_test_options();
    o.backend = kind;
    o.quiet = true;
    mc_program *p = NULL;
    if (mc_program_compile(g, &o, &p) != MC_OK)
        fail_msg("compile: %s", mc_error_message());
    return p;
}

static float *ramp(int64_t n, float scale)
{
    float *v = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        v[i] = scale * (float)((i * 7) % 11 - 5);
    return v;
}

/* Bind B and T, run, and check every output (its shape and values) against the float64
 * evaluation of the graph specialised to the same sizes. */
static void run_and_check(mc_program *p, const mc_graph *g, int64_t B, int64_t T)
{
    float *x = ramp(B * T * 4, 0.1f), *m = ramp(T * T, 0.2f), *w = ramp(16, 0.05f);
    assert_int_equal(mc_program_set_dim(p, "B", B), MC_OK);
    /* x's size binds T (the one symbol left) */
    if (mc_program_set(p, "x", x, sizeof(float) * (size_t)(B * T * 4)) != MC_OK)
        fail_msg("set x: %s", mc_error_message());
    assert_int_equal(mc_program_set(p, "m", m, sizeof(float) * (size_t)(T * T)), MC_OK);
    assert_int_equal(mc_program_set(p, "w", w, sizeof(float) * 16), MC_OK);
    if (mc_program_run(p) != MC_OK)
        fail_msg("run: %s", mc_error_message());
    mc_graph *s = NULL;
    assert_int_equal(mc_graph_specialize(g, (int64_t[]){B, T}, &s), MC_OK);
    double *want[4];
    const void *inputs[64] = {0};
    inputs[mc_name_map_get(&s->names, "x")] = x;
    inputs[mc_name_map_get(&s->names, "m")] = m;
    inputs[mc_name_map_get(&s->names, "w")] = w;
    assert_int_equal(mc_graph_eval(s, inputs, true, want), MC_OK);
    for (int i = 0; i < 4; i++) {
        mc_tensor t;
        assert_int_equal(mc_program_output(p, i, &t), MC_OK);
        const mc_node *n = &s->nodes[s->outputs[i]];
        assert_int_equal(t.rank, n->rank);
        assert_memory_equal(t.shape, n->shape, sizeof(int64_t) * (size_t)n->rank);
        int64_t count = (int64_t)(t.bytes / sizeof(float));
        assert_int_equal(count, mc_node_numel(n));
        double *got = malloc(sizeof(double) * (size_t)count);
        for (int64_t k = 0; k < count; k++)
            got[k] = ((const float *)t.data)[k];
        double err = mc_test_rel_error(got, want[i], count);
        if (!(err <= 1e-4)) /* docs/FORMAT.md §6: f32 with a matmul */
            fail_msg("output %s with B=%lld, T=%lld: error %g", t.name, (long long)B, (long long)T, err);
        free(got);
        free(want[i]);
    }
    mc_graph_free(s);
    free(x);
    free(m);
    free(w);
}

static void test_run_bindings(void **state)
{
    (void)state;
    mc_graph *g = parse(model);
    size_t nbackends = sizeof backends / sizeof backends[0];
    for (size_t b = 0; b <= nbackends; b++) {
        if (b == nbackends && !mc_test_have_gpu()) {
            printf("cuda: skipped (no usable GPU)\n");
            break;
        }
        setenv("MINIC_SPECIALIZE", "1", 1); /* (the model takes symbolic sizes: compiled once) */
        mc_program *p = compile_for(g, b == nbackends ? MC_BACKEND_CUDA : backends[b]);
        unsetenv("MINIC_SPECIALIZE");
        assert_int_equal(mc_program_compilations(p), 0); /* nothing until a binding runs */
        run_and_check(p, g, 2, 3);
        assert_int_equal(mc_program_compilations(p), 1);
        run_and_check(p, g, 2, 3); /* the same binding: compiles nothing */
        assert_int_equal(mc_program_compilations(p), 1);
        run_and_check(p, g, 1, 7);
        assert_int_equal(mc_program_compilations(p), 2);
        run_and_check(p, g, 2, 3); /* seen before */
        run_and_check(p, g, 1, 7);
        assert_int_equal(mc_program_compilations(p), 2);
        run_and_check(p, g, 3, 16); /* at the maximum */
        assert_int_equal(mc_program_compilations(p), 3);
        mc_program_free(p);
    }
    mc_graph_free(g);
}

/* At most 8 bindings keep their program: the least recently run goes first (compiled per
 * binding: MINIC_SPECIALIZE=1, else ref compiles exp once for every N). */
static void test_cache_bound(void **state)
{
    (void)state;
    mc_graph *g = parse("input x : f32[N]\ny = exp(x)\noutput y\n");
    setenv("MINIC_SPECIALIZE", "1", 1);
    mc_program *p = compile_for(g, MC_BACKEND_REF);
    unsetenv("MINIC_SPECIALIZE");
    float x[12] = {0};
    for (int n = 1; n <= 9; n++) {
        assert_int_equal(mc_program_set(p, "x", x, sizeof(float) * (size_t)n), MC_OK);
        assert_int_equal(mc_program_run(p), MC_OK);
        mc_tensor t;
        assert_int_equal(mc_program_output(p, 0, &t), MC_OK);
        assert_int_equal(t.shape[0], n);
        assert_true(((const float *)t.data)[n - 1] == 1.0f);
    }
    assert_int_equal(mc_program_compilations(p), 9);
    for (int n = 9; n >= 2; n--) { /* the 8 kept */
        assert_int_equal(mc_program_set(p, "x", x, sizeof(float) * (size_t)n), MC_OK);
        assert_int_equal(mc_program_run(p), MC_OK);
    }
    assert_int_equal(mc_program_compilations(p), 9);
    assert_int_equal(mc_program_set(p, "x", x, sizeof(float)), MC_OK); /* N=1 was dropped */
    assert_int_equal(mc_program_run(p), MC_OK);
    assert_int_equal(mc_program_compilations(p), 10);
    mc_program_free(p);
    mc_graph_free(g);
}

/* ---- step 3: kernels compiled once, sizes bound when they run ------------------------------- */

static void ignore_note(void *ctx, const char *note) { (void)ctx, (void)note; }

static mc_program *compile_noting(const mc_graph *g, mc_backend_kind kind)
{
    mc_options o = mc_test_options();
    o.backend = kind;
    o.quiet = false;
    o.note = ignore_note;
    mc_program *p = NULL;
    if (mc_program_compile(g, &o, &p) != MC_OK)
        fail_msg("compile: %s", mc_error_message());
    return p;
}

/* Give every input and param of symbolic graph g a ramp of its size under binding `values`,
 * run, and check every output against the float64 evaluation of g specialised to it. */
static void run_against_oracle(mc_program *p, const mc_graph *g, const int64_t *values, double tolerance)
{
    mc_graph *s = NULL;
    assert_int_equal(mc_graph_specialize(g, values, &s), MC_OK);
    const void *inputs[256] = {0};
    float *owned[256] = {0};
    assert_true(s->nnodes <= 256);
    for (int k = 0; k < mc_graph_num_syms(g); k++)
        assert_int_equal(mc_program_set_dim(p, mc_dim_sym_name(g, k), values[k]), MC_OK);
    for (int i = 0; i < s->nnodes; i++) {
        const mc_node *n = &s->nodes[i];
        if (n->op != MC_OP_INPUT && n->op != MC_OP_PARAM)
            continue;
        int64_t count = mc_node_numel(n);
        owned[i] = ramp(count, n->op == MC_OP_PARAM ? 0.05f : 0.1f);
        if (n->dtype == MC_I32) /* indices: -5..5, within a table of 10 rows either way */
            for (int64_t k = 0; k < count; k++)
                ((int32_t *)owned[i])[k] = (int32_t)((k * 7) % 11 - 5);
        inputs[i] = owned[i];
        if (mc_program_set(p, n->name, owned[i], sizeof(float) * (size_t)count) != MC_OK)
            fail_msg("set %s: %s", n->name, mc_error_message());
    }
    if (mc_program_run(p) != MC_OK)
        fail_msg("run: %s", mc_error_message());
    double *want[16];
    assert_true(s->noutputs <= 16);
    assert_int_equal(mc_graph_eval(s, inputs, true, want), MC_OK);
    for (int o = 0; o < s->noutputs; o++) {
        mc_tensor t;
        assert_int_equal(mc_program_output(p, o, &t), MC_OK);
        const mc_node *n = &s->nodes[s->outputs[o]];
        assert_int_equal(t.rank, n->rank);
        assert_memory_equal(t.shape, n->shape, sizeof(int64_t) * (size_t)n->rank);
        int64_t count = mc_node_numel(n);
        assert_int_equal((int64_t)(t.bytes / sizeof(float)), count);
        double *got = malloc(sizeof(double) * (size_t)count);
        for (int64_t k = 0; k < count; k++)
            got[k] = ((const float *)t.data)[k];
        double err = mc_test_rel_error(got, want[o], count);
        if (!(err <= tolerance))
            fail_msg("output %s: error %g", t.name, err);
        free(got);
        free(want[o]);
    }
    for (int i = 0; i < 256; i++)
        free(owned[i]);
    mc_graph_free(s);
}

/* Pointwise work with broadcasts, mean, softmax and max over the symbolic axis, layernorm and
 * rmsnorm over a fixed one, matmuls with a symbolic M and a symbolic N and K (x times its own
 * transpose), a transpose, an expand, and attention over heads split off and merged back by
 * reshapes that keep B and T whole: every operator that takes symbolic sizes. */
static const char *sized_model =
    "graph sized\n"
    "input x : f32[B, T<=32, 8]\n"
    "input bias : f32[T, 8]\n"
    "param g : f32[8]\n"
    "param b : f32[8]\n"
    "param w : f32[8, 6]\n"
    "param lw : f32[5, 8]\n"
    "xb = add(x, bias)\n"
    "y = gelu(xb)\n"
    "m = mean(y, axis=1, keepdim=true)\n"
    "d = sub(y, m)\n"
    "s = softmax(d, axis=1)\n"
    "ln = layernorm(d, g, b)\n"
    "mm = matmul(ln, w)\n"
    "lin = linear(x, lw)\n"
    "xt = transpose(x, perm=[0, 2, 1])\n"
    "sc = matmul(x, xt)\n"
    "p = softmax(sc, axis=-1)\n"
    "top = max(p, axis=2)\n"
    "rn = rmsnorm(y, g)\n"
    "all = mean(rn)\n"
    "ex = expand(all, shape=[B, T])\n"
    "half = full(shape=[B, T], value=0.5)\n"
    "e = add(ex, half)\n"
    "ls = log_softmax(sc, axis=1)\n"
    "x4 = reshape(x, shape=[B, T, 2, 4])\n"
    "q = transpose(x4, perm=[0, 2, 1, 3])\n"
    "kt = transpose(q, perm=[0, 1, 3, 2])\n"
    "att = matmul(q, kt)\n"
    "row = iota(shape=[T, T], axis=0)\n"
    "col = iota(shape=[T, T], axis=1)\n"
    "causal = le(col, row)\n"
    "attm = where(causal, att, -1e9)\n"
    "pa = softmax(attm, axis=-1)\n"
    "o = matmul(pa, q)\n"
    "ot = transpose(o, perm=[0, 2, 1, 3])\n"
    "om = reshape(ot, shape=[B, T, 8])\n"
    "output s, mm, lin, p, top, e, ls, om\n";

/* Issue 23's "running with a new size compiles nothing": one compile, then every binding is
 * the same kernels with other sizes, with the float64 evaluation's results. */
static void test_compiles_once(void **state)
{
    (void)state;
    mc_graph *g = parse(sized_model);
    mc_program *p = compile_noting(g, MC_BACKEND_REF);
    assert_int_equal(mc_program_compilations(p), 1); /* at compile time */
    assert_non_null(strstr(mc_program_notes(p), "compiled once"));
    const int64_t bindings[][2] = {{2, 3}, {1, 7}, {3, 32}, {1, 1}, {2, 3}, {4, 5}};
    for (size_t i = 0; i < sizeof bindings / sizeof bindings[0]; i++) {
        run_against_oracle(p, g, bindings[i], 1e-4); /* docs/FORMAT.md §6: f32 with a matmul */
        assert_int_equal(mc_program_compilations(p), 1);
    }
    /* the kernels of a run are the compiled ones with this binding's sizes */
    mc_program *ran = mc_program_ran(p);
    assert_non_null(ran);
    bool saw_t = false;
    for (int k = 0; k < ran->kp->nkernels; k++)
        for (int d = 0; d < ran->kp->kernels[k].rank; d++) {
            assert_true(ran->kp->kernels[k].shape[d] >= 1);
            saw_t |= ran->kp->kernels[k].shape[d] == 5;
        }
    assert_true(saw_t);
    assert_null(ran->kp->dims);
    bool attention = false; /* the causal chain over the heads is one kernel, Tq = Tk = T */
    for (int k = 0; k < ran->kp->nkernels; k++)
        if (ran->kp->kernels[k].category == KIR_ATTENTION) {
            attention = true;
            assert_int_equal(ran->kp->kernels[k].attn.tq, 5);
            assert_int_equal(ran->kp->kernels[k].attn.tk, 5);
        }
    assert_true(attention);
    mc_program_free(p);
    /* the same with MINIC_SPECIALIZE=1: one compile per binding, the same numbers */
    setenv("MINIC_SPECIALIZE", "1", 1);
    p = compile_noting(g, MC_BACKEND_REF);
    unsetenv("MINIC_SPECIALIZE");
    assert_non_null(strstr(mc_program_notes(p), "compiled per binding (MINIC_SPECIALIZE=1)"));
    run_against_oracle(p, g, bindings[0], 1e-4);
    run_against_oracle(p, g, bindings[1], 1e-4);
    assert_int_equal(mc_program_compilations(p), 2);
    mc_program_free(p);
    mc_graph_free(g);
}

#ifdef MINIC_HAVE_CPU_BACKEND
/* What the cpu backend generates with its sizes read at run time (backends/cpu/llvm_backend.c
 * sized_refusal): most of the model above, GEMMs of a symbolic M whose B is an input packed
 * per call (one batched over B with K > KC), x x^T (N = T: several column blocks at T = 300)
 * and its product with x (K = T: several K blocks, A's rows T apart). */
static const char *cpu_sized_model =
    "graph cpu_sized\n"
    "input x : f32[B, T<=320, 8]\n"
    "input bias : f32[T, 8]\n"
    "param g : f32[8]\n"
    "param b : f32[8]\n"
    "param w : f32[8, 6]\n"
    "param lw : f32[5, 8]\n"
    "input wi : f32[8, 300]\n"
    "input wb : f32[B, 300, 7]\n"
    "xb = add(x, bias)\n"
    "y = gelu(xb)\n"
    "m = mean(y, axis=1, keepdim=true)\n"
    "d = sub(y, m)\n"
    "s = softmax(d, axis=1)\n"
    "ln = layernorm(d, g, b)\n"
    "mm = matmul(ln, w)\n"
    "lin = linear(x, lw)\n"
    "mi = matmul(x, wi)\n"
    "mb = matmul(mi, wb)\n"
    "xt = transpose(x, perm=[0, 2, 1])\n"
    "top = max(xt, axis=2)\n"
    "sc = matmul(x, xt)\n"
    "pv = matmul(sc, x)\n"
    "rn = rmsnorm(y, g)\n"
    "all = mean(rn)\n"
    "ex = expand(all, shape=[B, T])\n"
    "half = full(shape=[B, T], value=0.5)\n"
    "e = add(ex, half)\n"
    "ls = log_softmax(xb, axis=1)\n"
    "x4 = reshape(x, shape=[B, T, 2, 4])\n"
    "q = transpose(x4, perm=[0, 2, 1, 3])\n"
    "sq = exp(q)\n"
    "row = iota(shape=[T, T], axis=0)\n"
    "col = iota(shape=[T, T], axis=1)\n"
    "causal = le(col, row)\n"
    "cm = where(causal, 1.0, 0.0)\n"
    "output s, mm, lin, top, e, ls, sq, cm, xt, mb, pv\n";

static const int64_t cpu_bindings[][2] = {{2, 3}, {1, 7}, {3, 48}, {1, 1}, {2, 3}, {4, 17}, {1, 300}, {1, 320}};

/* setenv(name, value), keeping the value it had (NULL: unset) for env_restore: a test that
 * changes the environment leaves it as it found it (CI may set MINIC_NO_CACHE itself). */
static char *env_set(const char *name, const char *value)
{
    const char *old = getenv(name);
    char *saved = old ? strdup(old) : NULL;
    setenv(name, value, 1);
    return saved;
}

static void env_restore(const char *name, char *saved)
{
    if (saved)
        setenv(name, saved, 1);
    else
        unsetenv(name);
    free(saved);
}

/* The same on the cpu backend: one compile, the kernels read their sizes when they run. */
static void test_cpu_compiles_once(void **state)
{
    (void)state;
    mc_graph *g = parse(cpu_sized_model);
    mc_program *p = compile_noting(g, MC_BACKEND_CPU);
    if (!strstr(mc_program_notes(p), "compiled once"))
        fail_msg("notes: %s", mc_program_notes(p));
    const mc_program *first = NULL; /* the first binding's program (its cache entry) */
    for (size_t i = 0; i < sizeof cpu_bindings / sizeof cpu_bindings[0]; i++) {
        run_against_oracle(p, g, cpu_bindings[i], 1e-4);
        mc_program *ran = mc_program_ran(p);
        if (mc_program_compilations(p) != 1)
            fail_msg("binding %zu: %d compilations; notes: %s", i, mc_program_compilations(p), mc_program_notes(ran));
        assert_int_equal(ran->kernels_specialized, 0);
        if (i == 0)
            first = ran;
        else if (ran != first) /* the same code as the first binding's: nothing compiled */
            assert_int_equal(ran->kernels_compiled, 0);
    }
    /* the generated code reads its sizes: loads of the run-time size slots */
    char *code = NULL;
    size_t code_size = 0;
    FILE *f = open_memstream(&code, &code_size);
    assert_int_equal(mc_program_ran(p)->backend->dump_code(mc_program_ran(p), f), MC_OK);
    fclose(f);
    assert_non_null(strstr(code, "%size0 = load i64"));
    free(code);
    mc_program_free(p);
    /* without the disk cache, a new binding takes the objects the first one compiled, in memory */
    char *saved = env_set("MINIC_NO_CACHE", "1");
    p = compile_noting(g, MC_BACKEND_CPU);
    run_against_oracle(p, g, cpu_bindings[0], 1e-4);
    assert_int_not_equal(mc_program_ran(p)->kernels_compiled, 0);
    run_against_oracle(p, g, cpu_bindings[1], 1e-4);
    assert_int_equal(mc_program_ran(p)->kernels_compiled, 0);
    assert_int_equal(mc_program_compilations(p), 1);
    env_restore("MINIC_NO_CACHE", saved);
    mc_program_free(p);
    /* MINIC_SPECIALIZE=1: one compile per binding, the same numbers */
    saved = env_set("MINIC_SPECIALIZE", "1");
    p = compile_noting(g, MC_BACKEND_CPU);
    env_restore("MINIC_SPECIALIZE", saved);
    assert_non_null(strstr(mc_program_notes(p), "compiled per binding (MINIC_SPECIALIZE=1)"));
    run_against_oracle(p, g, cpu_bindings[0], 1e-4);
    run_against_oracle(p, g, cpu_bindings[1], 1e-4);
    assert_int_equal(mc_program_compilations(p), 2);
    mc_program_free(p);
    mc_graph_free(g);
}
#endif

#ifdef MINIC_HAVE_CPU_BACKEND
/* A GPT-2 block (bench/gpu/gpt2_block.graph at C = 96, 3 heads of 32) over symbolic B and T on
 * cpu: K = 384 > KC and M up to 384 > MC (several K and row blocks in the GEMMs), N = 384 > NC,
 * causal attention over T up to 128 (several query and key blocks). Compiled once. */
static const char *gpt2_block_model =
    "graph gpt2_block\n"
    "input x : f32[B, T<=128, 96]\n"
    "param ln1.w : f32[96]\n"
    "param ln1.b : f32[96]\n"
    "param attn.w : f32[288, 96]\n"
    "param attn.b : f32[288]\n"
    "param proj.w : f32[96, 96]\n"
    "param proj.b : f32[96]\n"
    "param ln2.w : f32[96]\n"
    "param ln2.b : f32[96]\n"
    "param fc.w : f32[384, 96]\n"
    "param fc.b : f32[384]\n"
    "param out.w : f32[96, 384]\n"
    "param out.b : f32[96]\n"
    "h = layernorm(x, ln1.w, ln1.b, eps=1e-5)\n"
    "qkv = linear(h, attn.w, attn.b)\n"
    "q0 = slice(qkv, axis=2, start=0, end=96)\n"
    "k0 = slice(qkv, axis=2, start=96, end=192)\n"
    "v0 = slice(qkv, axis=2, start=192, end=288)\n"
    "q1 = reshape(q0, shape=[B, T, 3, 32])\n"
    "k1 = reshape(k0, shape=[B, T, 3, 32])\n"
    "v1 = reshape(v0, shape=[B, T, 3, 32])\n"
    "q = transpose(q1, perm=[0, 2, 1, 3])\n"
    "kt = transpose(k1, perm=[0, 2, 3, 1])\n"
    "v = transpose(v1, perm=[0, 2, 1, 3])\n"
    "s0 = matmul(q, kt)\n"
    "s = mul(s0, 0.125)\n"
    "row = iota(shape=[T, T], axis=0)\n"
    "col = iota(shape=[T, T], axis=1)\n"
    "keep = ge(row, col)\n"
    "sm = where(keep, s, -inf)\n"
    "p = softmax(sm, axis=-1)\n"
    "y0 = matmul(p, v)\n"
    "y1 = transpose(y0, perm=[0, 2, 1, 3])\n"
    "y = reshape(y1, shape=[B, T, 96])\n"
    "a = linear(y, proj.w, proj.b)\n"
    "x1 = add(x, a)\n"
    "h2 = layernorm(x1, ln2.w, ln2.b, eps=1e-5)\n"
    "f = linear(h2, fc.w, fc.b)\n"
    "g = gelu(f)\n"
    "o = linear(g, out.w, out.b)\n"
    "x2 = add(x1, o)\n"
    "output x2\n"
;

static void test_cpu_block(void **state)
{
    (void)state;
    mc_graph *g = parse(gpt2_block_model);
    mc_program *p = compile_noting(g, MC_BACKEND_CPU);
    if (!strstr(mc_program_notes(p), "compiled once"))
        fail_msg("notes: %s", mc_program_notes(p));
    const int64_t bindings[][2] = {{2, 5}, {1, 128}, {3, 100}, {1, 1}, {2, 33}};
    for (int i = 0; i < 5; i++) {
        run_against_oracle(p, g, bindings[i], 1e-4);
        const mc_program *ran = mc_program_ran(p);
        bool attention = false;
        for (int k = 0; k < ran->kp->nkernels; k++)
            attention |= ran->kp->kernels[k].category == KIR_ATTENTION;
        assert_true(attention); /* one fused kernel, reading Tq = Tk = T when it runs */
        if (mc_program_compilations(p) != 1 || ran->kernels_specialized != 0 || (i > 0 && ran->kernels_compiled != 0))
            fail_msg("binding %d: %d compilations; notes: %s", i, mc_program_compilations(p), mc_program_notes(ran));
    }
    mc_program_free(p);
    mc_graph_free(g);
}
#endif

/* Slices from a fixed start and concats over symbolic axes: offsets that are expressions
 * (start * stride, and the sizes of the parts before); an embedding's gather of [B, T] ids. */
static void test_compiles_once_offsets(void **state)
{
    (void)state;
    mc_graph *g = parse("input x : f32[B, T<=16, 4]\n"
                        "input y : f32[B, S, 4]\n"
                        "tail = slice(x, axis=1, start=1)\n"
                        "c = concat(x, tail, y, axis=1)\n"
                        "mid = slice(c, axis=2, start=1, end=3)\n"
                        "e = exp(mid)\n"
                        "first = slice(y, axis=1, start=0, end=1)\n"
                        "z = add(x, first)\n"
                        "input ids : i32[B, T]\n"
                        "param table : f32[10, 4]\n"
                        "emb = gather(table, ids, axis=0)\n"
                        "ze = add(z, emb)\n"
                        "output c, e, ze\n");
#ifdef MINIC_HAVE_CPU_BACKEND
    const int nbackends = 2; /* ref, then cpu (its LLVM kernels read the offsets at run time) */
#else
    const int nbackends = 1;
#endif
    for (int be = 0; be < nbackends; be++) {
        mc_program *p = compile_noting(g, be == 0 ? MC_BACKEND_REF : MC_BACKEND_CPU);
        if (!strstr(mc_program_notes(p), "compiled once"))
            fail_msg("notes: %s", mc_program_notes(p));
        const int64_t bindings[][3] = {{2, 3, 1}, {1, 16, 5}, {3, 2, 2}};
        for (size_t i = 0; i < sizeof bindings / sizeof bindings[0]; i++) {
            run_against_oracle(p, g, bindings[i], 1e-6);
            assert_int_equal(mc_program_compilations(p), 1);
    }
    /* an index past the table is the run's input error, checked against the bound size */
    int32_t bad[3 * 2] = {0, 1, 2, 10, 4, 5};
    if (mc_program_set(p, "ids", bad, sizeof bad) != MC_OK) /* B=3, T=2 as the last run */
        fail_msg("set ids: %s", mc_error_message());
    assert_int_equal(mc_program_run(p), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "index 10 is outside [-10, 10)"));
    bad[3] = -10;
    assert_int_equal(mc_program_set(p, "ids", bad, sizeof bad), MC_OK);
    assert_int_equal(mc_program_run(p), MC_OK); /* after a run, T may change */
    /* a binding that leaves the slice nothing is the input error it always was */
    float x1[3 * 4] = {0};
    assert_int_equal(mc_program_set(p, "x", x1, sizeof x1), MC_OK); /* B=3: T=1 */
    assert_int_equal(mc_program_run(p), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "sym.graph:3:8: error: slice: start=1, end=1 select nothing"));
    mc_program_free(p);
    }
    mc_graph_free(g);
}

/* Every operator takes symbolic sizes now (reshapes that merge symbols, slices from the end,
 * update, cumsum, the spatial composites: 2026-11-28); MINIC_SPECIALIZE=1 still compiles per
 * binding, as before, and says why. */
static void test_sized_fallbacks(void **state)
{
    (void)state;
    setenv("MINIC_SPECIALIZE", "1", 1);
    mc_graph *g = parse("input x : f32[B, 2, 3]\ny = reshape(x, shape=[-1, 3])\nz = cumsum(y, axis=0)\noutput z\n");
    mc_program *p = compile_noting(g, MC_BACKEND_REF);
    unsetenv("MINIC_SPECIALIZE");
    if (!strstr(mc_program_notes(p), "compiled per binding (MINIC_SPECIALIZE=1)"))
        fail_msg("notes: %s", mc_program_notes(p));
    assert_int_equal(mc_program_compilations(p), 0);
    run_against_oracle(p, g, (int64_t[]){2}, 1e-5);
    run_against_oracle(p, g, (int64_t[]){3}, 1e-5);
    assert_int_equal(mc_program_compilations(p), 2);
    mc_program_free(p);
    mc_graph_free(g);
    /* cpu generated one kernel of the step-3 model per binding until 2026-11-28 (a log_softmax
     * over [B, T, T]'s middle axis): it compiles once now (test_vector_stride_compiles_once), as
     * GEMMs and attention with symbolic strides do (test_strided_gemm_compiles_once) */
}

static void expect_error(mc_status st, const char *phrase)
{
    assert_int_equal(st, MC_ERR_INPUT);
    if (!strstr(mc_error_message(), phrase))
        fail_msg("message \"%s\" lacks \"%s\"", mc_error_message(), phrase);
}

static void test_bad_bindings(void **state)
{
    (void)state;
    mc_graph *g = parse(model);
    mc_program *p = compile_for(g, MC_BACKEND_REF);
    float buf[16 * 16 * 4] = {0};
    expect_error(mc_program_set(p, "x", buf, sizeof(float) * 24),
                 "input 'x' (f32[B, T, 4]): 96 bytes do not tell its shape");
    expect_error(mc_program_set_dim(p, "Q", 3), "the graph has no symbolic dimension 'Q' (it has B, T)");
    expect_error(mc_program_set_dim(p, "T", 17), "--dim (mc_program_set_dim) has T=17, above the maximum T<=16");
    expect_error(mc_program_set_dim(p, "T", 0), "T=0: dimensions must be positive");
    expect_error(mc_program_run(p), "dimension 'B' is unbound: give an input whose type uses it, or --dim B=INT");
    assert_int_equal(mc_program_set_dim(p, "B", 2), MC_OK);
    assert_int_equal(mc_program_set(p, "x", buf, sizeof(float) * 2 * 3 * 4), MC_OK); /* T=3 */
    expect_error(mc_program_set(p, "m", buf, sizeof(float) * 16), "input 'm' is f32[T, T] = f32[3, 3] (36 bytes) but 64 bytes were given");
    expect_error(mc_program_set(p, "x", buf, sizeof(float) * 2 * 3 * 5), "(96 bytes) but 120 bytes were given");
    expect_error(mc_program_set_dim(p, "T", 5), "--dim (mc_program_set_dim) has T=5 but input 'x' bound T=3");
    expect_error(mc_program_set(p, "nope", buf, 4), "no input or param named 'nope'");
    expect_error(mc_program_run(p), "input 'm' has no value");
    /* a failed call changed nothing: m at T=3 completes the binding */
    assert_int_equal(mc_program_set(p, "m", buf, sizeof(float) * 9), MC_OK);
    assert_int_equal(mc_program_fill_random(p, 1), MC_OK); /* w */
    assert_int_equal(mc_program_run(p), MC_OK);
    /* after a run the sizes may change: x with T=5 drops m (T=3), which the generator fills */
    assert_int_equal(mc_program_set(p, "x", buf, sizeof(float) * 2 * 5 * 4), MC_OK);
    assert_int_equal(mc_program_run(p), MC_OK);
    mc_tensor t;
    assert_int_equal(mc_program_output(p, 0, &t), MC_OK);
    assert_int_equal(t.shape[1], 5);
    assert_int_equal(mc_program_compilations(p), 1); /* compiled once: the new T compiled nothing */
    mc_program_free(p);

    /* a slice that the binding empties: an input error naming the line and the binding */
    p = compile_for(g, MC_BACKEND_REF);
    assert_int_equal(mc_program_set_dim(p, "B", 1), MC_OK);
    assert_int_equal(mc_program_set_dim(p, "T", 1), MC_OK);
    assert_int_equal(mc_program_fill_random(p, 0), MC_OK);
    expect_error(mc_program_run(p), "sym.graph:8:");
    assert_non_null(strstr(mc_error_message(), "B=1, T=1"));
    mc_program_free(p);
    mc_graph_free(g);

    /* a graph without symbols has none to bind */
    g = parse("input x : f32[2]\noutput x\n");
    p = compile_for(g, MC_BACKEND_REF);
    expect_error(mc_program_set_dim(p, "T", 2), "the graph has no symbolic dimensions");
    assert_int_equal(mc_program_compilations(p), 1);
    mc_program_free(p);
    mc_graph_free(g);
}

/* Files bind by their shapes; a file that disagrees names the file, the input and the size. */
static void test_files(void **state)
{
    (void)state;
    mc_graph *g = parse(model);
    mc_program *p = compile_for(g, MC_BACKEND_REF);
    float data[2 * 6 * 4] = {0};
    char x_path[512], m_path[512], bad_path[512];
    snprintf(x_path, sizeof x_path, "%s/x.npy", mc_test_tmpdir());
    snprintf(m_path, sizeof m_path, "%s/m.npy", mc_test_tmpdir());
    snprintf(bad_path, sizeof bad_path, "%s/bad.npy", mc_test_tmpdir());
    mc_array x = {MC_F32, 3, {2, 6, 4}, data, sizeof(float) * 48};
    mc_array m = {MC_F32, 2, {5, 5}, data, sizeof(float) * 25};
    mc_array bad = {MC_F32, 3, {2, 6, 3}, data, sizeof(float) * 36};
    assert_int_equal(mc_npy_write(x_path, &x), MC_OK);
    assert_int_equal(mc_npy_write(m_path, &m), MC_OK);
    assert_int_equal(mc_npy_write(bad_path, &bad), MC_OK);
    expect_error(mc_program_load_file(p, "x", bad_path), "input 'x' is declared f32[B, T, 4] but the file holds f32[2, 6, 3]");
    assert_int_equal(mc_program_load_file(p, "x", x_path), MC_OK); /* B=2, T=6 */
    expect_error(mc_program_load_file(p, "m", m_path), "m.npy: input 'm' has T=5 (axis 0) but input 'x' bound T=6");
    assert_int_equal(mc_program_fill_random(p, 3), MC_OK);
    assert_int_equal(mc_program_run(p), MC_OK);
    mc_tensor t;
    assert_int_equal(mc_program_output(p, 2, &t), MC_OK);
    assert_int_equal(t.rank, 3);
    assert_int_equal(t.shape[0], 2);
    assert_int_equal(t.shape[1], 11);
    char saved[512];
    snprintf(saved, sizeof saved, "%s/inputs.safetensors", mc_test_tmpdir());
    assert_int_equal(mc_program_save_inputs(p, saved), MC_OK);
    mc_program_free(p);
    /* the saved file repeats the run: its x binds B and T, its w is the generated one */
    p = compile_for(g, MC_BACKEND_REF);
    assert_int_equal(mc_program_load_weights(p, saved), MC_OK);
    assert_int_equal(mc_program_load_file(p, "x", saved), MC_OK);
    assert_int_equal(mc_program_load_file(p, "m", saved), MC_OK);
    assert_int_equal(mc_program_run(p), MC_OK);
    mc_tensor u;
    assert_int_equal(mc_program_output(p, 2, &u), MC_OK);
    assert_int_equal(u.shape[1], 11);
    mc_program_free(p);
    mc_graph_free(g);
}

/* `minic run --dim`, and what check, dump and bench do with --dim. */
static void test_cli(void **state)
{
    (void)state;
    const char *path = mc_test_write_file("model.graph", model, strlen(model));
    char args[1024], *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "run %s --backend ref --dim B=2 --dim T=5", path);
    assert_int_equal(mc_test_minic(args, &out, &err), 0);
    assert_non_null(strstr(out, "s: f32[2, 5, 5]"));
    assert_non_null(strstr(out, "c: f32[2, 9, 4]"));
    free(out);
    free(err);
    snprintf(args, sizeof args, "run %s --backend ref --dim B=2 --dim T=17", path);
    assert_int_equal(mc_test_minic(args, &out, &err), 1);
    assert_non_null(strstr(err, "T=17, above the maximum T<=16"));
    free(out);
    free(err);
    snprintf(args, sizeof args, "run %s --backend ref --dim B=2", path);
    assert_int_equal(mc_test_minic(args, &out, &err), 1);
    assert_non_null(strstr(err, "dimension 'T' is unbound"));
    free(out);
    free(err);
    snprintf(args, sizeof args, "run %s --backend ref --dim B=2 --dim S=2", path);
    assert_int_equal(mc_test_minic(args, &out, &err), 1);
    assert_non_null(strstr(err, "no symbolic dimension 'S' (it has B, T)"));
    free(out);
    free(err);
    /* an input file binds T; a --dim that disagrees is named with the input */
    char npy[512];
    snprintf(npy, sizeof npy, "%s/cli_x.npy", mc_test_tmpdir());
    float data[1 * 3 * 4] = {0};
    mc_array x = {MC_F32, 3, {1, 3, 4}, data, sizeof data};
    assert_int_equal(mc_npy_write(npy, &x), MC_OK);
    snprintf(args, sizeof args, "run %s --backend ref --input x=%s", path, npy);
    assert_int_equal(mc_test_minic(args, &out, &err), 0);
    assert_non_null(strstr(out, "r: f32[1, 3]"));
    free(out);
    free(err);
    snprintf(args, sizeof args, "run %s --backend ref --dim T=4 --input x=%s", path, npy);
    assert_int_equal(mc_test_minic(args, &out, &err), 1);
    assert_non_null(strstr(err, "input 'x' has T=3 (axis 1) but --dim (mc_program_set_dim) bound T=4"));
    free(out);
    free(err);
    /* check: symbolic types; with --dim, the specialised graph */
    snprintf(args, sizeof args, "check %s", path);
    assert_int_equal(mc_test_minic(args, &out, &err), 0);
    assert_non_null(strstr(out, "input x : f32[B, T<=16, 4]"));
    assert_non_null(strstr(out, "# f32[B*T, 4]"));
    free(out);
    free(err);
    snprintf(args, sizeof args, "check %s --dim B=3 --dim T=2", path);
    assert_int_equal(mc_test_minic(args, &out, &err), 0);
    assert_non_null(strstr(out, "input x : f32[3, 2, 4]"));
    assert_non_null(strstr(out, "# f32[6, 4]"));
    free(out);
    free(err);
    snprintf(args, sizeof args, "dump %s --stage fused", path);
    assert_int_equal(mc_test_minic(args, &out, &err), 1);
    assert_non_null(strstr(err, "symbolic dimensions"));
    free(out);
    free(err);
    snprintf(args, sizeof args, "dump %s --stage fused --dim B=1 --dim T=4", path);
    assert_int_equal(mc_test_minic(args, &out, &err), 0);
    assert_non_null(strstr(out, "kernels:"));
    free(out);
    free(err);
    snprintf(args, sizeof args, "bench %s --backend ref --iters 1", path);
    assert_int_equal(mc_test_minic(args, &out, &err), 1);
    assert_non_null(strstr(err, "dimension 'B' is unbound: give its size with --dim B=SIZE"));
    free(out);
    free(err);
    snprintf(args, sizeof args, "bench %s --backend ref --iters 1 --dim B=1 --dim T=4", path);
    assert_int_equal(mc_test_minic(args, &out, &err), 0);
    assert_non_null(strstr(out, "agree"));
    free(out);
    free(err);
    assert_int_equal(mc_test_minic("run --help", &out, &err), 0);
    assert_non_null(strstr(out, "--dim"));
    assert_non_null(strstr(out, "bind the symbolic dimension NAME"));
    free(out);
    free(err);
}

/* ---- step 3 on cuda: kernels that read their sizes when they run ------------------------- */

/* A transformer block's kernel kinds over [B, T, C]: layernorm, GEMMs with M = B*T (cuBLASLt
 * per binding, a generated epilogue), gelu, a residual, softmax over C and over a symbolic
 * axis (x times its own transpose: a batched GEMM of T x T), mean over T. */
static const char *block_model =
    "graph blk\n"
    "input x : f32[B, T<=64, 32]\n"
    "param g1 : f32[32]\n"
    "param b1 : f32[32]\n"
    "param w1 : f32[32, 64]\n"
    "param c1 : f32[64]\n"
    "param w2 : f32[64, 32]\n"
    "h = layernorm(x, g1, b1)\n"
    "u = matmul(h, w1)\n"
    "ub = add(u, c1)\n"
    "a = gelu(ub)\n"
    "d = matmul(a, w2)\n"
    "r = add(x, d)\n"
    "s = softmax(r, axis=-1)\n"
    "m = mean(r, axis=1)\n"
    "xt = transpose(x, perm=[0, 2, 1])\n"
    "sc = matmul(x, xt)\n"
    "p = softmax(sc, axis=-1)\n"
    "output r, s, m, p\n";

static const char *ops_model, *slices_model; /* below: update, argmax, cumsum, layernorm; slices */

#ifdef MINIC_HAVE_CUDA
/* Without a GPU: the kernels of a symbolic program rendered for several bindings are the same
 * source (what the disk cache and the loaded modules key on), with the binding's sizes only in
 * their launch (grid, the S_ parameter), and that source compiles with NVRTC. Kernels that
 * cannot read sizes yet (attention over a symbolic T) are rendered per binding and say so. */
static void check_sized_sources(const char *text, int want_specialized, const char *why_part, int want_with_sizes)
{
    mc_graph *g = parse(text);
    mc_options o = mc_test_options();
    o.backend = MC_BACKEND_CUDA;
    mc_compile_options co = mc_compile_options_of_backend(&o); /* cuda's convs: gather, implicit GEMM */
    char refused[MC_COMPILE_REFUSED] = "";
    co.symbolic = true;
    co.refused = refused;
    kir_program *sized = NULL;
    if (mc_compile_kernels(g, &co, &sized) != MC_OK || !sized)
        fail_msg("compile: %s %s", mc_error_message(), refused);
    const mc_cuda_target t = {.sm = 90, .num_sms = 132};
    /* a third symbol: ops_model's L (at most its S), spatial_model's W; ones first (a size of 1
     * must not decide a layout the later bindings cannot take: a strided GEMM's M of 1 went to
     * cuBLASLt, then the tiled kernel was compiled at the second binding) */
    const int64_t bindings[][3] = {{1, 1, 1}, {2, 5, 3}, {1, 7, 2}, {3, 32, 9}, {2, 17, 1}};
    char **first = calloc((size_t)sized->nkernels + 1, sizeof *first);
    assert_non_null(first);
    int with_sizes = 0;
    for (size_t b = 0; b < sizeof bindings / sizeof bindings[0]; b++) {
        mc_cuda_kernel_plan *pl = NULL;
        int specialized = -1;
        char why[200];
        kir_program *kp = cuda_plan_binding(sized, bindings[b], co.plan_memory, &t, &pl, &specialized, why, sizeof why);
        if (specialized != want_specialized)
            fail_msg("%d kernels rendered for binding %zu (%s)", specialized, b, why);
        if (why_part && !strstr(why, why_part))
            fail_msg("why: %s", why);
        for (int k = 0; k < kp->nkernels; k++) {
            if (!pl[k].has_code || (want_specialized && sized->kernels[k].category == KIR_ATTENTION))
                continue;
            if (b == 0) {
                first[k] = strdup(pl[k].code.src.data);
                with_sizes += strstr(first[k], "S_.v[") != NULL;
            } else {
                assert_non_null(first[k]);
                assert_string_equal(pl[k].code.src.data, first[k]); /* nothing to compile */
            }
            assert_true(pl[k].code.grid[0] >= 1);
        }
        if (b == 0) { /* every source of the first binding compiles */
            const char *srcs[64], *entries[64];
            void *cubins[64] = {0};
            size_t sizes[64];
            int n = 0, compiled = 0;
            for (int k = 0; k < kp->nkernels && n < 64; k++)
                if (pl[k].has_code) {
                    srcs[n] = pl[k].code.src.data;
                    entries[n++] = pl[k].code.entry;
                }
            if (mc_cuda_compile(srcs, entries, n, t.sm, NULL, NULL, cubins, sizes, &compiled) != MC_OK)
                fail_msg("NVRTC: %s", mc_error_message());
            for (int i = 0; i < n; i++)
                free(cubins[i]);
        }
        mc_cuda_plans_free(pl, kp->nkernels);
        kir_program_free(kp);
    }
    assert_true(with_sizes >= want_with_sizes);
    for (int k = 0; k < sized->nkernels; k++)
        free(first[k]);
    free(first);
    kir_program_free(sized);
    mc_graph_free(g);
}

static void test_cuda_sized_sources(void **state)
{
    (void)state;
    if (!mc_cuda_have_nvrtc()) {
        printf("cuda: skipped: no NVRTC (%s)\n", mc_error_message());
        return;
    }
    check_sized_sources(block_model, 0, NULL, 2);
    check_sized_sources(sized_model, 0, NULL, 2); /* attention over T too (f32: on the FMA units) */
    /* bf16 causal attention over T: the tensor-core kernel */
    check_sized_sources("input q : bf16[B, 2, T<=128, 64]\ninput k : bf16[B, 2, T, 64]\ninput v : bf16[B, 2, T, 64]\n"
                        "kt = transpose(k, perm=[0, 1, 3, 2])\ns0 = matmul(q, kt)\ns = mul(s0, 0.125)\n"
                        "row = iota(shape=[T, T], axis=0)\ncol = iota(shape=[T, T], axis=1)\nkeep = ge(row, col)\n"
                        "sm = where(keep, s, -inf)\np = softmax(sm, axis=-1)\ny = matmul(p, v)\noutput y\n",
                        0, NULL, 1);
    /* one query over symbolic keys: the decode kernel, its key range and chunks read when it runs */
    check_sized_sources("input q : f32[B, 2, 1, 16]\ninput k : f32[B, 2, S<=64, 16]\ninput v : f32[B, 2, S, 16]\n"
                        "kt = transpose(k, perm=[0, 1, 3, 2])\ns0 = matmul(q, kt)\np = softmax(s0, axis=-1)\n"
                        "y = matmul(p, v)\noutput y\n",
                        0, NULL, 1);
    check_sized_sources(ops_model, 0, NULL, 6); /* update, argmax, cumsum (scans), layernorm */
    check_sized_sources(slices_model, 0, NULL, 3); /* slices from the end: gathers */
    setenv("MINIC_CUDA_SIZED_ATTENTION", "0", 1); /* the previous path: attention per binding */
    check_sized_sources(sized_model, 1, "attention over symbolic lengths", 2);
    unsetenv("MINIC_CUDA_SIZED_ATTENTION");
}
#endif

/* On a GPU: a symbolic program compiles once and every binding runs its kernels with the
 * binding's sizes, against the float64 evaluation; each binding's CUDA graph lives with its
 * program in the cache (8), so the graphs stay bounded. MINIC_SPECIALIZE=1 and
 * MINIC_CUDA_SIZED=0 compile per binding, with the same numbers. */
static void test_cuda_compiles_once(void **state)
{
    (void)state;
#ifdef MINIC_HAVE_CUDA
    if (!mc_test_have_gpu()) {
        printf("cuda: skipped: no GPU\n");
        return;
    }
    mc_graph *g = parse(block_model);
    mc_program *p = compile_noting(g, MC_BACKEND_CUDA);
    if (!strstr(mc_program_notes(p), "compiled once"))
        fail_msg("notes: %s", mc_program_notes(p));
    const int64_t bindings[][2] = {{2, 3}, {1, 7}, {3, 64}, {1, 1}, {2, 3}, {4, 5}, {5, 9}, {1, 33}, {2, 17},
                                   {7, 2}, {3, 3}, {1, 64}, {2, 3}};
    int graphs_before = mc_cuda_live_graphs();
    mc_program *first = NULL;
    for (size_t i = 0; i < sizeof bindings / sizeof bindings[0]; i++) {
        run_against_oracle(p, g, bindings[i], 2e-3); /* f32 GEMMs on cuBLASLt */
        if (mc_program_compilations(p) != 1)
            fail_msg("binding %zu: %d compilations; notes: %s", i, mc_program_compilations(p), mc_program_notes(p));
        mc_program *ran = mc_program_ran(p);
        assert_non_null(ran);
        assert_int_equal(ran->kernels_specialized, 0);
        /* the first binding's program compiled (or took from the disk cache) every kernel;
         * every other one (binding (2, 3) again runs the first one's) compiled nothing */
        if (i == 0)
            first = ran;
        else if (ran != first && ran->kernels_compiled != 0)
            fail_msg("binding %zu: %d kernels compiled", i, ran->kernels_compiled);
        assert_true(mc_symbolic_cached(p) <= 8);
        assert_true(mc_cuda_live_graphs() - graphs_before <= 8);
    }
    assert_int_equal(mc_symbolic_cached(p), 8);
    mc_program_free(p);
    assert_int_equal(mc_cuda_live_graphs(), graphs_before);
    /* without the disk cache too: the second binding loads nothing, its modules are shared */
    setenv("MINIC_NO_CACHE", "1", 1);
    p = compile_noting(g, MC_BACKEND_CUDA);
    run_against_oracle(p, g, bindings[0], 2e-3);
    run_against_oracle(p, g, bindings[1], 2e-3);
    unsetenv("MINIC_NO_CACHE");
    assert_int_equal(mc_program_ran(p)->kernels_compiled, 0);
    assert_int_equal(mc_program_compilations(p), 1);
    mc_program_free(p);
    /* every operator that takes symbolic sizes, attention over a symbolic T among them */
    mc_graph *ga = parse(sized_model);
    p = compile_noting(ga, MC_BACKEND_CUDA);
    const int64_t abind[][2] = {{2, 3}, {1, 7}, {3, 32}, {1, 1}, {2, 3}, {4, 5}};
    for (size_t i = 0; i < sizeof abind / sizeof abind[0]; i++) {
        run_against_oracle(p, ga, abind[i], 2e-3);
        if (mc_program_compilations(p) != 1)
            fail_msg("binding %zu: %d compilations; notes: %s", i, mc_program_compilations(p), mc_program_notes(p));
    }
    mc_program_free(p);
    /* MINIC_CUDA_SIZED_ATTENTION=0: the attention kernel per binding (the previous path) */
    setenv("MINIC_CUDA_SIZED_ATTENTION", "0", 1);
    p = compile_noting(ga, MC_BACKEND_CUDA);
    run_against_oracle(p, ga, abind[0], 2e-3);
    run_against_oracle(p, ga, abind[1], 2e-3);
    unsetenv("MINIC_CUDA_SIZED_ATTENTION");
    if (!strstr(mc_program_notes(p), "attention over symbolic lengths"))
        fail_msg("notes: %s", mc_program_notes(p));
    assert_int_equal(mc_program_compilations(p), 3);
    mc_program_free(p);
    mc_graph_free(ga);
    /* the previous path, for comparison: a compile per binding */
    setenv("MINIC_CUDA_SIZED", "0", 1);
    p = compile_noting(g, MC_BACKEND_CUDA);
    unsetenv("MINIC_CUDA_SIZED");
    if (!strstr(mc_program_notes(p), "compiled per binding (MINIC_CUDA_SIZED=0)"))
        fail_msg("notes: %s", mc_program_notes(p));
    run_against_oracle(p, g, bindings[0], 2e-3);
    run_against_oracle(p, g, bindings[1], 2e-3);
    assert_int_equal(mc_program_compilations(p), 2);
    mc_program_free(p);
    setenv("MINIC_SPECIALIZE", "1", 1);
    p = compile_noting(g, MC_BACKEND_CUDA);
    unsetenv("MINIC_SPECIALIZE");
    run_against_oracle(p, g, bindings[0], 2e-3);
    run_against_oracle(p, g, bindings[1], 2e-3);
    assert_int_equal(mc_program_compilations(p), 2);
    mc_program_free(p);
    mc_graph_free(g);
#else
    printf("cuda: skipped: not built\n");
#endif
}

/* sized_model with a maximum for B as well: its memory can be planned once, at B=4, T=32. */
static mc_graph *sized_model_bounded(void)
{
    char text[4096];
    const char *at = strstr(sized_model, "f32[B, T<=32, 8]");
    assert_non_null(at);
    snprintf(text, sizeof text, "%.*sf32[B<=4, T<=32, 8]%s", (int)(at - sized_model), sized_model,
             at + strlen("f32[B, T<=32, 8]"));
    return parse(text);
}

/* Issue 23's "memory planning for the maxima": with every symbol bounded, the intermediates are
 * planned once at the maxima and every binding's program uses that one arena (allocated once,
 * by the first binding, kept when the cache drops the program that allocated it), with the
 * float64 evaluation's results; a size above a maximum is still the input error it was. */
static void arena_at_maxima(mc_backend_kind kind, double tolerance, bool compiles_once)
{
    mc_graph *g = sized_model_bounded();
    mc_program *p = compile_noting(g, kind);
    if (!strstr(mc_program_notes(p), "memory planned once at the maxima (B=4, T=32)"))
        fail_msg("notes: %s", mc_program_notes(p));
    int allocations = -1;
    int64_t bytes = mc_symbolic_arena(p, &allocations);
    assert_true(bytes > 0);
    assert_int_equal(allocations, 0); /* nothing ran yet */
    /* more bindings than the cache keeps (8): programs are dropped, the arena stays */
    const int64_t bindings[][2] = {{2, 3}, {1, 7}, {4, 32}, {1, 1}, {3, 5}, {2, 3}, {4, 1}, {1, 32},
                                   {2, 9}, {3, 17}, {4, 31}, {2, 2}, {1, 7}, {4, 32}};
    for (size_t i = 0; i < sizeof bindings / sizeof bindings[0]; i++) {
        run_against_oracle(p, g, bindings[i], tolerance);
        if (compiles_once)
            assert_int_equal(mc_program_compilations(p), 1);
        assert_int_equal(mc_symbolic_arena(p, &allocations), bytes);
        if (allocations != 1)
            fail_msg("binding %zu: the arena was allocated %d times", i, allocations);
        mc_program *ran = mc_program_ran(p);
        assert_non_null(ran);
        if (!ran->arena) /* this binding's temps lie in the shared arena */
            fail_msg("binding %zu: an arena of its own; notes: %s", i, mc_program_notes(p));
        assert_int_equal(ran->arena->bytes, bytes);
        assert_int_equal(ran->kp->arena_bytes, bytes);
        assert_true(ran->kp->unplanned_bytes >= 0);
    }
    assert_int_equal(mc_symbolic_cached(p), 8);
    /* above a maximum: an input error naming the input and the dimension, nothing allocated */
    assert_int_equal(mc_program_set_dim(p, "B", 1), MC_OK);
    size_t over = sizeof(float) * 1 * 33 * 8;
    float *data = calloc(1, over);
    expect_error(mc_program_set(p, "x", data, over), "input 'x' has T=33 (axis 1), above the maximum T<=32");
    expect_error(mc_program_set_dim(p, "B", 5), "B=5, above the maximum B<=4");
    free(data);
    run_against_oracle(p, g, bindings[0], tolerance); /* still usable */
    assert_int_equal(mc_symbolic_arena(p, &allocations), bytes);
    assert_int_equal(allocations, 1);
    mc_program_free(p);
    mc_graph_free(g);
    /* above MINIC_ARENA_AT_MAXIMA_BYTES: each binding plans its own, and the note says so */
    setenv("MINIC_ARENA_AT_MAXIMA_BYTES", "256", 1);
    g = sized_model_bounded();
    p = compile_noting(g, kind);
    unsetenv("MINIC_ARENA_AT_MAXIMA_BYTES");
    if (!strstr(mc_program_notes(p), "above the 256 of MINIC_ARENA_AT_MAXIMA_BYTES"))
        fail_msg("notes: %s", mc_program_notes(p));
    run_against_oracle(p, g, bindings[1], tolerance);
    assert_int_equal(mc_symbolic_arena(p, &allocations), 0);
    assert_null(mc_program_ran(p)->arena);
    mc_program_free(p);
    mc_graph_free(g);
    /* a symbol without a maximum: each binding plans its own memory, and the note says so */
    g = parse(sized_model);
    p = compile_noting(g, kind);
    if (!strstr(mc_program_notes(p), "memory planned per binding ('B' has no maximum"))
        fail_msg("notes: %s", mc_program_notes(p));
    run_against_oracle(p, g, bindings[0], tolerance);
    assert_int_equal(mc_symbolic_arena(p, &allocations), 0);
    assert_null(mc_program_ran(p)->arena);
    mc_program_free(p);
    mc_graph_free(g);
}

/* passes/plan.c mc_plan_memory_like on its own: a binding within the maxima takes the plan made
 * at them (same offsets, the same arena), and one beyond them is refused, saying which temp. */
static void test_plan_like(void **state)
{
    (void)state;
    mc_graph *g = sized_model_bounded();
    mc_options o = mc_test_options();
    mc_compile_options co = mc_compile_options_for(&o);
    co.symbolic = true;
    char why[400] = "";
    co.refused = why;
    kir_program *sized = NULL;
    assert_int_equal(mc_compile_kernels(g, &co, &sized), MC_OK);
    if (!sized)
        fail_msg("not compiled once: %s", why);
    kir_program *at_max = kir_bind(sized, (int64_t[]){4, 32}), *small = kir_bind(sized, (int64_t[]){2, 3});
    kir_program *tiny = kir_bind(sized, (int64_t[]){1, 1});
    assert_true(at_max && small && tiny);
    mc_plan_memory(at_max, true);
    mc_plan_memory(tiny, true);
    assert_true(mc_plan_memory_like(small, at_max, why, sizeof why));
    assert_int_equal(small->arena_bytes, at_max->arena_bytes);
    int temps = 0;
    for (int b = 0; b < small->nbuffers; b++)
        if (small->buffers[b].kind == KBUF_TEMP) {
            assert_int_equal(small->buffers[b].offset, at_max->buffers[b].offset);
            temps++;
        }
    assert_true(temps > 0);
    assert_int_equal(kir_verify(small, "like", true), MC_OK);
    /* the plan of (1, 1) does not hold (4, 32): its temps are larger */
    kir_program *big = kir_bind(sized, (int64_t[]){4, 32});
    assert_false(mc_plan_memory_like(big, tiny, why, sizeof why));
    if (!strstr(why, "more than its"))
        fail_msg("why: %s", why);
    kir_program_free(big);
    kir_program_free(tiny);
    kir_program_free(small);
    kir_program_free(at_max);
    kir_program_free(sized);
    mc_graph_free(g);
}

static void test_arena_at_maxima(void **state)
{
    (void)state;
    arena_at_maxima(MC_BACKEND_REF, 1e-4, true);
#ifdef MINIC_HAVE_CPU_BACKEND
    if (mc_backend_cpu.runtime_sizes) /* when the cpu backend takes sizes at run time */
        arena_at_maxima(MC_BACKEND_CPU, 1e-4, false); /* cpu renders some kernels per binding */
    else
        printf("cpu: compiled per binding, each binding plans its own memory\n");
#endif
}

static void test_cuda_arena_at_maxima(void **state)
{
    (void)state;
#ifdef MINIC_HAVE_CUDA
    if (!mc_test_have_gpu()) {
        printf("cuda: skipped: no GPU\n");
        return;
    }
    arena_at_maxima(MC_BACKEND_CUDA, 2e-3, true);
#else
    printf("cuda: skipped: not built\n");
#endif
}

/* The block on ref: the same graph compiles once there too (the oracle agrees). */
static void test_block_ref(void **state)
{
    (void)state;
    mc_graph *g = parse(block_model);
    mc_program *p = compile_noting(g, MC_BACKEND_REF);
    if (!strstr(mc_program_notes(p), "compiled once"))
        fail_msg("notes: %s", mc_program_notes(p));
    run_against_oracle(p, g, (int64_t[]){2, 3}, 1e-4);
    run_against_oracle(p, g, (int64_t[]){1, 9}, 1e-4);
    assert_int_equal(mc_program_compilations(p), 1);
    mc_program_free(p);
    mc_graph_free(g);
}

/* ---- update, argmax/argmin, cumsum, layernorm over symbolic sizes ------------------------------ */

/* The KV-cache write over a symbolic batch and cache length S, with a new block of symbolic
 * length L too (pos = |-5| = 5: the i32 ramp's first value; pos <= S - L in every binding below),
 * argmax/argmin over the symbolic axis and over a fixed one, cumsum along S and along a fixed
 * axis, layernorm over a symbolic last axis (eps = 0 and rows of 1e30 and 1e-35: its scaled
 * paths). (The oracle check reads f32 outputs: the indices are cast.) Every one takes run-time sizes: one compile (pipeline.c takes_symbols). */
static const char *ops_model =
    "graph sym_ops\n"
    "input cache : f32[B, 2, S<=32, 4]\n"
    "input new : f32[B, 2, 1, 4]\n"
    "input block : f32[B, 2, L, 4]\n"
    "input at : i32[]\n"
    "input x : f32[B, S]\n"
    "input w : f32[S]\n"
    "input b : f32[S]\n"
    "pos = abs(at)\n"
    "u = update(cache, new, pos, axis=2)\n"
    "ub = update(cache, block, pos, axis=2)\n"
    "am = argmax(cache, axis=2)\n"
    "an = argmin(cache, axis=3, keepdim=true)\n"
    "ax = argmax(x, axis=1)\n"
    "ax2 = reshape(ax, shape=[B, 1, 1])\n"
    "ax3 = expand(ax2, shape=[B, 2, 1])\n"
    "cs = cumsum(cache, axis=2)\n"
    "cf = cumsum(cache, axis=3)\n"
    "ids = concat(am, ax3, axis=2)\n"
    "idf = cast(ids, to=f32)\n"
    "anf = cast(an, to=f32)\n"
    "ln = layernorm(x, w, b, eps=1e-5)\n"
    "big = mul(x, 1e30)\n"
    "lb = layernorm(big, w, b, eps=0)\n"
    "tiny = mul(x, 1e-35)\n"
    "lt = layernorm(tiny, w, b, eps=0)\n"
    "output u, ub, idf, anf, cs, cf, ln, lb, lt\n";

static const int64_t ops_bindings[][3] = {{2, 7, 2}, {1, 9, 4}, {3, 24, 1}, {1, 6, 1}, {2, 7, 2}, {4, 13, 8}};

/* g compiled on `kind` once, then run at each of n bindings (the values of binding i at
 * bindings + i * stride) against the float64 evaluation: one compilation in all, no kernel
 * rendered for a binding, nothing compiled after the first binding; with `attention`, a fused
 * attention kernel of one query per batch entry. Returns the program (the caller frees it). */
static mc_program *runs_compiled_once(const mc_graph *g, mc_backend_kind kind, const int64_t *bindings, int stride,
                                      int n, double tolerance, bool attention)
{
    mc_program *p = compile_noting(g, kind);
    if (!strstr(mc_program_notes(p), "compiled once"))
        fail_msg("%s: notes: %s", mc_backend_name(kind), mc_program_notes(p));
    const mc_program *first = NULL;
    for (int i = 0; i < n; i++) {
        run_against_oracle(p, g, bindings + (size_t)i * (size_t)stride, tolerance);
        mc_program *ran = mc_program_ran(p);
        assert_non_null(ran);
        if (mc_program_compilations(p) != 1 || ran->kernels_specialized != 0)
            fail_msg("%s, binding %d: %d compilations, %d kernels for the binding; notes: %s", mc_backend_name(kind), i,
                     mc_program_compilations(p), ran->kernels_specialized, mc_program_notes(ran));
        if (i == 0)
            first = ran;
        else if (ran != first && ran->kernels_compiled != 0)
            fail_msg("%s, binding %d: %d kernels compiled", mc_backend_name(kind), i, ran->kernels_compiled);
        bool decodes = false;
        for (int k = 0; k < ran->kp->nkernels; k++)
            decodes |= ran->kp->kernels[k].category == KIR_ATTENTION && ran->kp->kernels[k].attn.tq == 1;
        assert_true(decodes || !attention);
    }
    return p;
}

/* Slices decompose rewrites (decompose.c slice_symbolic): a missing start over a symbolic axis,
 * starts from its end (gathers at run-time indices; of a bool too), backward steps over a fixed
 * axis of a symbolic operand. */
static const char *slices_model = "input x : f32[B, T<=16, 3]\n"
                                  "head = slice(x, axis=1, end=2)\n"
                                  "last = slice(x, axis=1, start=-1)\n"
                                  "tail = slice(x, axis=1, start=-3, end=-1)\n"
                                  "e = exp(tail)\n"
                                  "rev = slice(x, axis=2, step=-1)\n"
                                  "odd = slice(x, axis=2, start=2, end=0, step=-2)\n"
                                  "s = add(rev, x)\n"
                                  "pos = gt(x, 0)\n"
                                  "late = slice(pos, axis=1, start=-2)\n"
                                  "yb = where(late, 1.0, 0.0)\n"
                                  "output head, last, e, rev, odd, s, yb\n";

/* ops_model and slices_model on every backend here (MINIC_TEST_BACKEND picks one; cuda where
 * there is a GPU): one compile, nothing generated per binding, the float64 evaluation's
 * results; a pos past S - L, and a T too short for start=-3, are the run's input errors,
 * checked with the bound sizes. */
static void test_ops_compile_once(void **state)
{
    (void)state;
    mc_backend_kind kinds[3];
    int nk = 0;
    if (mc_test_backends(kinds, &nk) == 77)
        return;
    mc_graph *g = parse(ops_model), *gs = parse(slices_model);
    char *text = print_graph(gs); /* a missing start prints as it was written */
    assert_non_null(strstr(text, "head = slice(x, axis=1, end=2)  # f32[B, 2, 3]\n"));
    free(text);
    for (int be = 0; be < nk; be++) {
        mc_program *p = runs_compiled_once(g, kinds[be], ops_bindings[0], 3, 6, kinds[be] == MC_BACKEND_CUDA ? 1e-4 : 1e-5,
                                          false);
        /* S = 6, L = 2: pos 5 leaves one entry for a block of two */
        assert_int_equal(mc_program_set_dim(p, "S", 6), MC_OK);
        assert_int_equal(mc_program_set_dim(p, "L", 2), MC_OK);
        float *zeros = calloc(4 * 2 * 24 * 4, sizeof(float));
        int32_t at = -5;
        const struct { const char *name; size_t bytes; const void *data; } in[] = {
            {"cache", 2 * 6 * 4 * sizeof(float), zeros}, {"new", 2 * 4 * sizeof(float), zeros},
            {"block", 2 * 2 * 4 * sizeof(float), zeros}, {"at", sizeof at, &at},
            {"x", 6 * sizeof(float), zeros}, {"w", 6 * sizeof(float), zeros}, {"b", 6 * sizeof(float), zeros}};
        for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
            assert_int_equal(mc_program_set(p, in[i].name, in[i].data, in[i].bytes), MC_OK);
        assert_int_equal(mc_program_run(p), MC_ERR_INPUT);
        if (!strstr(mc_error_message(), "update: pos 5 is outside [0, 4]: 2 entries from pos would not fit axis 2 of 6"))
            fail_msg("%s: %s", mc_backend_name(kinds[be]), mc_error_message());
        free(zeros);
        assert_int_equal(mc_program_compilations(p), 1);
        mc_program_free(p);
        const int64_t slice_bindings[][2] = {{2, 5}, {1, 3}, {3, 16}, {2, 5}, {1, 9}};
        p = runs_compiled_once(gs, kinds[be], slice_bindings[0], 2, 5, 1e-6, false);
        float x[2 * 3] = {0}; /* B=1, T=2 */
        assert_int_equal(mc_program_set(p, "x", x, sizeof x), MC_OK);
        assert_int_equal(mc_program_run(p), MC_ERR_INPUT);
        if (!strstr(mc_error_message(), "tail: axis 1 has size 1 with B=1, T=2, but its type says 2"))
            fail_msg("%s", mc_error_message());
        mc_program_free(p);
    }
    mc_graph_free(g);
    mc_graph_free(gs);
}


/* ---- kernels that were rendered per binding (issue 23: "running with a new size compiles
 * nothing"), now from the symbolic list ---------------------------------------------------- */

/* The backends the tests below run on: $MINIC_TEST_BACKEND alone (cuda only with a GPU), else
 * cpu where built and cuda where a GPU is usable. */
static int sized_backends(mc_backend_kind out[2])
{
    const char *only = getenv("MINIC_TEST_BACKEND");
    bool gpu = mc_test_have_gpu();
    int n = 0;
    if (only && *only) {
        if (!strcmp(only, "cpu")) {
#ifdef MINIC_HAVE_CPU_BACKEND
            out[n++] = MC_BACKEND_CPU;
#endif
        } else if (!strcmp(only, "cuda") && gpu) {
            out[n++] = MC_BACKEND_CUDA;
        }
        return n;
    }
#ifdef MINIC_HAVE_CPU_BACKEND
    out[n++] = MC_BACKEND_CPU;
#endif
    if (gpu)
        out[n++] = MC_BACKEND_CUDA;
    else
        printf("cuda: skipped: no GPU\n");
    return n;
}

/* Graph `text` (nsyms symbols) through runs_compiled_once on `kind`. */
static void compiles_once_on(mc_backend_kind kind, const char *text, const int64_t *bindings, int nsyms, int n,
                             double tolerance, bool attention)
{
    mc_graph *g = parse(text);
    assert_int_equal(mc_graph_num_syms(g), nsyms);
    mc_program_free(runs_compiled_once(g, kind, bindings, nsyms, n, tolerance, attention));
    mc_graph_free(g);
}

/* compiles_once_on for every backend of sized_backends. */
static void compiles_once_everywhere(const char *text, const int64_t *bindings, int nsyms, int n, double tolerance,
                                     bool attention)
{
    mc_backend_kind kinds[2];
    int nk = sized_backends(kinds);
    for (int i = 0; i < nk; i++)
        compiles_once_on(kinds[i], text, bindings, nsyms, n, tolerance, attention);
}

/* KV-cache decoding over a symbolic key length (cuda: the decode kernel, whose key range and
 * chunks are read when it runs; its partial sums merged across chunks at S = 100 and 512): one
 * query per head, a scale and an additive mask over the keys, as a decoder step has them. */
static void test_decode_compiles_once(void **state)
{
    (void)state;
    static const char *decode =
        "graph decode\n"
        "input q : f32[B, 4, 1, 32]\n"
        "input k : f32[B, 4, S<=512, 32]\n"
        "input v : f32[B, 4, S, 32]\n"
        "input mask : f32[B, 1, 1, S]\n"
        "kt = transpose(k, perm=[0, 1, 3, 2])\n"
        "s0 = matmul(q, kt)\n"
        "s1 = mul(s0, 0.17677669)\n"
        "s = add(s1, mask)\n"
        "p = softmax(s, axis=-1)\n"
        "y = matmul(p, v)\n"
        "output y\n";
    const int64_t bindings[][2] = {{1, 7}, {2, 100}, {1, 512}, {3, 33}, {1, 1}, {2, 100}};
    compiles_once_everywhere(decode, &bindings[0][0], 2, 6, 1e-4, true);
    /* two queries and a band that keeps keys j <= i + 40: the key range ends at min(S, 42),
     * computed when the kernel runs */
    static const char *banded =
        "graph banded\n"
        "input q : f32[B, 4, 2, 32]\n"
        "input k : f32[B, 4, S<=512, 32]\n"
        "input v : f32[B, 4, S, 32]\n"
        "kt = transpose(k, perm=[0, 1, 3, 2])\n"
        "s0 = matmul(q, kt)\n"
        "row = iota(shape=[2, S], axis=0)\n"
        "col = iota(shape=[2, S], axis=1)\n"
        "rs = add(row, 40)\n"
        "keep = le(col, rs)\n"
        "sm = where(keep, s0, -inf)\n"
        "p = softmax(sm, axis=-1)\n"
        "y = matmul(p, v)\n"
        "output y\n";
    compiles_once_everywhere(banded, &bindings[0][0], 2, 5, 1e-4, false);
}

/* Views stepping by a symbolic stride along the vector axis (cpu: read lane by lane with the
 * stride read when the kernel runs): a log_softmax and a sum over the middle axis of [B, T, T],
 * a matrix plus its transpose, the max over the first axis of [T, T]. */
static void test_vector_stride_compiles_once(void **state)
{
    (void)state;
    static const char *strided =
        "graph strided\n"
        "input x : f32[B, T<=80, 8]\n"
        "input m : f32[T, T]\n"
        "xt = transpose(x, perm=[0, 2, 1])\n"
        "sc = matmul(x, xt)\n"
        "ls = log_softmax(sc, axis=1)\n"
        "cs = sum(sc, axis=1)\n"
        "sct = transpose(sc, perm=[0, 2, 1])\n"
        "sym = add(sc, sct)\n"
        "mx = max(m, axis=0)\n"
        "mt = transpose(m, perm=[1, 0])\n"
        "e = exp(mt)\n"
        "output ls, cs, sym, mx, e\n";
    const int64_t bindings[][2] = {{2, 3}, {1, 17}, {3, 80}, {1, 1}, {2, 9}};
    compiles_once_everywhere(strided, &bindings[0][0], 2, 5, 1e-4, false);
}

/* A GEMM whose A steps by 2 along K, a layout no cuBLASLt matrix takes (cuda: the tiled GEMM,
 * M, K, the batch and the strides read when it runs; at B = T = 1 the bound program would have
 * chosen the GEMV, made for one size), with its epilogue. */
static void test_tiled_gemm_compiles_once(void **state)
{
    (void)state;
    static const char *tiled =
        "graph tiled\n"
        "input x : f32[B, T<=64, 40]\n"
        "param w : f32[20, 24]\n"
        "param bias : f32[24]\n"
        "xs = slice(x, axis=2, start=0, end=40, step=2)\n"
        "y = matmul(xs, w)\n"
        "yb = add(y, bias)\n"
        "z = relu(yb)\n"
        "output z\n";
    const int64_t bindings[][2] = {{1, 1}, {2, 5}, {1, 40}, {3, 64}, {2, 17}};
    compiles_once_everywhere(tiled, &bindings[0][0], 2, 5, 1e-4, false);
}

/* One kernel that reads more than 48 distinct sizes (cpu took at most 48 before): six symbols
 * and fourteen transposed rank-6 inputs, whose strides are products of different sets of them. */
static const char *many_sizes =
    "graph many\n"
    "input x : f32[A<=3, B<=3, C<=3, D<=3, E<=3, F<=3]\n"
    "input y1 : f32[F, E, D, C, B, A]\n"
    "input y2 : f32[B, A, D, C, F, E]\n"
    "input y3 : f32[C, D, E, F, A, B]\n"
    "input y4 : f32[E, F, A, B, C, D]\n"
    "input y5 : f32[D, A, F, B, E, C]\n"
    "input y6 : f32[F, C, A, E, B, D]\n"
    "input y7 : f32[A, E, B, C, D, F]\n"
    "input y8 : f32[A, F, B, C, D, E]\n"
    "input y9 : f32[A, C, D, E, B, F]\n"
    "input y10 : f32[D, E, A, B, C, F]\n"
    "input y11 : f32[D, F, C, A, B, E]\n"
    "input y12 : f32[B, C, D, E, A, F]\n"
    "input y13 : f32[B, F, C, D, A, E]\n"
    "input y14 : f32[B, E, C, F, A, D]\n"
    "t1 = transpose(y1, perm=[5, 4, 3, 2, 1, 0])\n"
    "t2 = transpose(y2, perm=[1, 0, 3, 2, 5, 4])\n"
    "t3 = transpose(y3, perm=[4, 5, 0, 1, 2, 3])\n"
    "t4 = transpose(y4, perm=[2, 3, 4, 5, 0, 1])\n"
    "t5 = transpose(y5, perm=[1, 3, 5, 0, 4, 2])\n"
    "t6 = transpose(y6, perm=[2, 4, 1, 5, 3, 0])\n"
    "t7 = transpose(y7, perm=[0, 2, 3, 4, 1, 5])\n"
    "t8 = transpose(y8, perm=[0, 2, 3, 4, 5, 1])\n"
    "t9 = transpose(y9, perm=[0, 4, 1, 2, 3, 5])\n"
    "t10 = transpose(y10, perm=[2, 3, 4, 0, 1, 5])\n"
    "t11 = transpose(y11, perm=[3, 4, 2, 0, 5, 1])\n"
    "t12 = transpose(y12, perm=[4, 0, 1, 2, 3, 5])\n"
    "t13 = transpose(y13, perm=[4, 0, 2, 3, 5, 1])\n"
    "t14 = transpose(y14, perm=[4, 0, 2, 5, 1, 3])\n"
    "s1 = add(x, t1)\n"
    "s2 = add(s1, t2)\n"
    "s3 = add(s2, t3)\n"
    "s4 = add(s3, t4)\n"
    "s5 = add(s4, t5)\n"
    "s6 = add(s5, t6)\n"
    "s7 = add(s6, t7)\n"
    "s8 = add(s7, t8)\n"
    "s9 = add(s8, t9)\n"
    "s10 = add(s9, t10)\n"
    "s11 = add(s10, t11)\n"
    "s12 = add(s11, t12)\n"
    "s13 = add(s12, t13)\n"
    "s14 = add(s13, t14)\n"
    "output s14\n";

static void test_many_sizes_compiles_once(void **state)
{
    (void)state;
    mc_backend_kind kinds[2];
    int n = sized_backends(kinds);
    if (n > 0 && kinds[n - 1] == MC_BACKEND_CUDA)
        n--; /* cuda: at most MC_CUDA_MAX_SIZES (16) a kernel, this one rendered per binding */
    const int64_t bindings[][6] = {{2, 3, 2, 3, 2, 3}, {1, 1, 1, 1, 1, 1}, {3, 2, 3, 1, 3, 2}, {3, 3, 3, 3, 3, 3}};
    for (int i = 0; i < n; i++) {
        mc_graph *g = parse(many_sizes);
        mc_program *p = compile_noting(g, kinds[i]);
        for (int b = 0; b < 4; b++) {
            run_against_oracle(p, g, bindings[b], 1e-5);
            mc_program *ran = mc_program_ran(p);
            if (mc_program_compilations(p) != 1 || ran->kernels_specialized != 0 || (b > 0 && ran->kernels_compiled))
                fail_msg("%s, binding %d: %d compilations; notes: %s", mc_backend_name(kinds[i]), b,
                         mc_program_compilations(p), mc_program_notes(ran));
        }
        char *code = NULL; /* the kernel loads its 49th size and more */
        size_t code_size = 0;
        FILE *f = open_memstream(&code, &code_size);
        assert_int_equal(mc_program_ran(p)->backend->dump_code(mc_program_ran(p), f), MC_OK);
        fclose(f);
        assert_non_null(strstr(code, "%size48 = load i64"));
        free(code);
        mc_program_free(p);
        mc_graph_free(g);
    }
}

/* GEMMs and attention whose operands step by symbolic strides (cpu: packed, or read, at strides
 * read when the kernel runs): B transposed (its N stride is T), B at a symbolic offset (a slice
 * after T rows), attention over heads of a symbolic size (left unfused: its GEMMs have K = D and
 * N = D), a fused attention whose keys come transposed (stride T along the columns) with a
 * [T, T] mask (stride T along the queries). */
static void test_strided_gemm_compiles_once(void **state)
{
    (void)state;
    static const char *gemms =
        "graph gemms\n"
        "input a : f32[B, 3, T<=64]\n"
        "input z : f32[B, 4, T]\n"
        "input w : f32[2, T, 4]\n"
        "zt = transpose(z, perm=[0, 2, 1])\n"
        "r = matmul(a, zt)\n"
        "w1 = slice(w, axis=0, start=1, end=2)\n"
        "w2 = reshape(w1, shape=[T, 4])\n"
        "r2 = matmul(a, w2)\n"
        "output r, r2\n";
    const int64_t gb[][2] = {{2, 3}, {1, 40}, {3, 64}, {1, 1}};
    static const char *heads =
        "graph heads\n"
        "input q : f32[B, 2, T<=64, D<=32]\n"
        "input k : f32[B, 2, T, D]\n"
        "input v : f32[B, 2, T, D]\n"
        "kt = transpose(k, perm=[0, 1, 3, 2])\n"
        "s0 = matmul(q, kt)\n"
        "p = softmax(s0, axis=-1)\n"
        "y = matmul(p, v)\n"
        "output y\n";
    const int64_t hb[][3] = {{2, 5, 8}, {1, 33, 32}, {3, 1, 1}, {1, 64, 17}};
    static const char *keys =
        "graph keys\n"
        "input q : f32[B, 2, T<=64, 16]\n"
        "input kx : f32[B, 2, 16, T]\n"
        "input v : f32[B, 2, T, 16]\n"
        "input m : f32[T, T]\n"
        "s0 = matmul(q, kx)\n"
        "s1 = mul(s0, 0.25)\n"
        "s = add(s1, m)\n"
        "p = softmax(s, axis=-1)\n"
        "y = matmul(p, v)\n"
        "output y\n";
    compiles_once_everywhere(gemms, &gb[0][0], 2, 4, 1e-4, false);
    compiles_once_everywhere(heads, &hb[0][0], 3, 4, 1e-4, false);
    compiles_once_everywhere(keys, &gb[0][0], 2, 4, 1e-4, false);
}

#ifdef MINIC_HAVE_CUDA
/* Without a GPU, the kernels of the tests above rendered as one source over 4 bindings, which
 * NVRTC compiles: nothing rendered for a binding. */
static void test_cuda_sized_sources_more(void **state)
{
    (void)state;
    if (!mc_cuda_have_nvrtc()) {
        printf("cuda: skipped: no NVRTC (%s)\n", mc_error_message());
        return;
    }
    /* A read with a step along K, which no cuBLASLt layout takes: the tiled GEMM, its M, K and
     * strides read when it runs (at B = 1, T = 1 the GEMV's, had it not been sized) */
    check_sized_sources("input x : f32[B, T<=64, 16]\nparam w : f32[8, 6]\n"
                        "xs = slice(x, axis=2, start=0, end=16, step=2)\ny = matmul(xs, w)\nz = relu(y)\noutput z\n",
                        0, NULL, 1);
    /* decode attention with a scale and an additive mask over the keys, in bf16 (16-byte loads
     * of 8 halves) and f32 */
    check_sized_sources("input q : bf16[B, 4, 1, 64]\ninput k : bf16[B, 4, S<=512, 64]\ninput v : bf16[B, 4, S, 64]\n"
                        "input mask : bf16[B, 1, 1, S]\nkt = transpose(k, perm=[0, 1, 3, 2])\ns0 = matmul(q, kt)\n"
                        "s1 = mul(s0, 0.125)\ns = add(s1, mask)\np = softmax(s, axis=-1)\ny = matmul(p, v)\noutput y\n",
                        0, NULL, 1);
    /* decode under a band: the key range's end read when it runs */
    check_sized_sources("input q : f32[B, 4, 2, 32]\ninput k : f32[B, 4, S<=512, 32]\ninput v : f32[B, 4, S, 32]\n"
                        "kt = transpose(k, perm=[0, 1, 3, 2])\ns0 = matmul(q, kt)\nrow = iota(shape=[2, S], axis=0)\n"
                        "col = iota(shape=[2, S], axis=1)\nrs = add(row, 40)\nkeep = le(col, rs)\n"
                        "sm = where(keep, s0, -inf)\np = softmax(sm, axis=-1)\ny = matmul(p, v)\noutput y\n",
                        0, NULL, 1);
    /* GEMMs with B transposed (N stride T) and at a symbolic offset; attention whose keys come
     * transposed, with a [T, T] mask */
    check_sized_sources("input a : f32[B, 3, T<=64]\ninput z : f32[B, 4, T]\ninput w : f32[2, T, 4]\n"
                        "zt = transpose(z, perm=[0, 2, 1])\nr = matmul(a, zt)\nw1 = slice(w, axis=0, start=1, end=2)\n"
                        "w2 = reshape(w1, shape=[T, 4])\nr2 = matmul(a, w2)\noutput r, r2\n",
                        0, NULL, 0);
    check_sized_sources("input q : f32[B, 2, T<=64, 16]\ninput kx : f32[B, 2, 16, T]\ninput v : f32[B, 2, T, 16]\n"
                        "input m : f32[T, T]\ns0 = matmul(q, kx)\ns1 = mul(s0, 0.25)\ns = add(s1, m)\n"
                        "p = softmax(s, axis=-1)\ny = matmul(p, v)\noutput y\n",
                        0, NULL, 1);
}
#endif

/* ---- the spatial composites and reshapes over symbols ---------------------------------------- */

/* Compile symbolic graph `text` once on the backend of MINIC_TEST_BACKEND and run it at every
 * binding: one compilation, nothing compiled after the first binding, the float64 results. */
static void compiles_once_at(const char *text, const int64_t (*bindings)[3], size_t nbindings, double tolerance)
{
    mc_backend_kind kind = check_backend();
#ifndef MINIC_HAVE_CPU_BACKEND
    if (kind == MC_BACKEND_CPU)
        return;
#endif
    if (kind == MC_BACKEND_CUDA && !mc_test_have_gpu()) {
        printf("cuda: skipped: no GPU\n");
        return;
    }
    if (kind == MC_BACKEND_CUDA && tolerance < 2e-3)
        tolerance = 2e-3; /* f32 GEMMs on cuBLASLt, as in test_cuda_compiles_once */
    mc_graph *g = parse(text);
    mc_program_free(runs_compiled_once(g, kind, bindings[0], 3, (int)nbindings, tolerance, false));
    mc_graph_free(g);
}

/* A small channels-first conv net over a symbolic batch: conv (strided, padded; grouped and
 * dilated; 1x1), batchnorm folded into its conv and not, relu, maxpool, avgpool, pad, a 1-d conv
 * and pool. */
static const char *conv_net_model =
    "graph convnet\n"
    "input x : f32[N, 3, 12, 10]\n"
    "input x1 : f32[N, 4, 9]\n"
    "param w1 : f32[8, 3, 3, 3]\n"
    "param b1 : f32[8]\n"
    "param s : f32[8]\n"
    "param bb : f32[8]\n"
    "param mu : f32[8]\n"
    "param var : f32[8]\n"
    "param w2 : f32[6, 4, 3, 3]\n"
    "param w3 : f32[5, 6, 1, 1]\n"
    "param w4 : f32[2, 4, 3]\n"
    "c1 = conv(x, w1, b1, stride=[2, 2], padding=[1, 1])\n"
    "n1 = batchnorm(c1, s, bb, mu, var, eps=1.0)\n"
    "r1 = relu(n1)\n"
    "m1 = maxpool(r1, kernel=[3, 3], stride=[2, 2], padding=[1, 1])\n"
    "p1 = pad(m1, pads=[0, 0, 1, 0, 0, 0, 1, 2], value=0.25)\n"
    "c2 = conv(p1, w2, padding=[1, 1], dilation=[1, 2], groups=2)\n"
    "ev = exp(var)\n"
    "n2 = batchnorm(r1, s, bb, mu, ev)\n"
    "a2 = avgpool(n2, kernel=[2, 3], stride=[2, 2], padding=[1, 1])\n"
    "c3 = conv(c2, w3)\n"
    "c4 = conv(x1, w4, padding=[1])\n"
    "m4 = maxpool(c4, kernel=[2], stride=[2])\n"
    "output c3, a2, m4\n";

/* f16 convs as the CUDA backend runs them: the implicit GEMM (MINIC_REF_IMPLICIT_CONV=1 has the
 * ref interpreter run its kernel IR), a 7x7 stem, a 3x3 layer with its residual and a 1x1
 * stride-2 downsample, the batch symbolic. */
static const char *conv_f16_model =
    "graph conv_f16\n"
    "input x : f32[N<=8, 3, 20, 18]\n"
    "param w1 : f32[8, 3, 7, 7]\n"
    "param b1 : f32[8]\n"
    "param w2 : f32[8, 8, 3, 3]\n"
    "param w3 : f32[16, 8, 1, 1]\n"
    "xh = cast(x, to=f16)\n"
    "w1h = cast(w1, to=f16)\n"
    "b1h = cast(b1, to=f16)\n"
    "w2h = cast(w2, to=f16)\n"
    "w3h = cast(w3, to=f16)\n"
    "c1 = conv(xh, w1h, b1h, stride=[2, 2], padding=[3, 3])\n"
    "r1 = relu(c1)\n"
    "c2 = conv(r1, w2h, padding=[1, 1])\n"
    "s2 = add(c2, r1)\n"
    "r2 = relu(s2)\n"
    "c3 = conv(r2, w3h, stride=[2, 2])\n"
    "m3 = maxpool(c3, kernel=[3, 3], stride=[2, 2], padding=[1, 1])\n"
    "y = cast(m3, to=f32)\n"
    "output y\n";

/* pad and batchnorm over symbolic spatial axes (an image of any size), a global average pool as
 * a mean over them. */
static const char *spatial_model =
    "graph spatial\n"
    "input x : f32[N, 3, H<=40, W]\n"
    "param s : f32[3]\n"
    "param bb : f32[3]\n"
    "param mu : f32[3]\n"
    "param var : f32[3]\n"
    "p = pad(x, pads=[0, 0, 1, 2, 0, 0, 2, 1], value=-0.5)\n"
    "n = batchnorm(p, s, bb, mu, var, eps=1.0)\n"
    "r = relu(n)\n"
    "g = mean(r, axis=[2, 3])\n"
    "output r, g\n";

static void test_conv_compiles_once(void **state)
{
    (void)state;
    const int64_t bindings[][3] = {{2}, {1}, {5}, {3}, {2}};
    compiles_once_at(conv_net_model, bindings, sizeof bindings / sizeof bindings[0], 1e-4);
    const int64_t spatial[][3] = {{2, 5, 7}, {1, 1, 1}, {3, 40, 9}, {2, 5, 7}};
    compiles_once_at(spatial_model, spatial, 4, 1e-4);
    /* the other im2col: the gather where the backend copies, the copies where it gathers */
    const char *b = getenv("MINIC_TEST_BACKEND");
    bool gathers = b && strcmp(b, "cuda") == 0;
    setenv("MINIC_CONV_GATHER", gathers ? "0" : "1", 1);
    compiles_once_at(conv_net_model, bindings, 3, 1e-4);
    unsetenv("MINIC_CONV_GATHER");
    setenv("MINIC_REF_IMPLICIT_CONV", "1", 1);
    compiles_once_at(conv_f16_model, bindings, sizeof bindings / sizeof bindings[0], 1e-2);
    unsetenv("MINIC_REF_IMPLICIT_CONV");
}

/* Reshapes that merge symbols into one axis and split them back ([B, T, 8] as [B*T, 8] and
 * back, [B, T, 2, 4] as [B, T*8]), around a matmul over the merged rows, and ones that regroup
 * them ([B, T, 2, 4] as [2, B, T, 4], [B, T, 8] as [T, B, 8]). */
static const char *reshape_model =
    "graph merge_split\n"
    "input x : f32[B, T<=32, 8]\n"
    "param w : f32[8, 6]\n"
    "rows = reshape(x, shape=[-1, 8])\n"
    "h = matmul(rows, w)\n"
    "g = gelu(h)\n"
    "back = reshape(g, shape=[B, T, 6])\n"
    "y = softmax(back, axis=1)\n"
    "x4 = reshape(x, shape=[B, T, 2, 4])\n"
    "flat = reshape(x4, shape=[B, -1])\n"
    "e = exp(flat)\n"
    "all = reshape(x, shape=[-1])\n"
    "ea = exp(all)\n"
    "t = reshape(ea, shape=[B, -1, 4])\n"
    "x2 = reshape(x, shape=[B, T, 2, 4])\n"
    "sw = reshape(x2, shape=[2, B, T, 4])\n"
    "tw = reshape(x, shape=[T, B, 8])\n"
    "tr = transpose(tw, perm=[1, 0, 2])\n"
    "output y, e, t, sw, tr\n";

#ifdef MINIC_HAVE_CUDA
/* Without a GPU: the conv nets' kernels (the f16 implicit GEMMs among them) and the reshapes'
 * are each one source for every binding, and compile. */
static void test_cuda_conv_sized_sources(void **state)
{
    (void)state;
    if (!mc_cuda_have_nvrtc()) {
        printf("cuda: skipped: no NVRTC (%s)\n", mc_error_message());
        return;
    }
    check_sized_sources(conv_net_model, 0, NULL, 4);
    setenv("MINIC_CONV_GATHER", "0", 1); /* the copies (test_conv_compiles_once takes them on cuda too) */
    check_sized_sources(conv_net_model, 0, NULL, 4);
    unsetenv("MINIC_CONV_GATHER");
    check_sized_sources(conv_f16_model, 0, NULL, 4);
    check_sized_sources(reshape_model, 0, NULL, 2);
    check_sized_sources(spatial_model, 0, NULL, 2);
}
#endif

static void test_reshape_compiles_once(void **state)
{
    (void)state;
    const int64_t bindings[][3] = {{2, 3}, {1, 7}, {3, 32}, {1, 1}, {4, 5}};
    compiles_once_at(reshape_model, bindings, sizeof bindings / sizeof bindings[0], 1e-4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_and_infer), cmocka_unit_test(test_print_roundtrip),
        cmocka_unit_test(test_errors),          cmocka_unit_test(test_c_api),
        cmocka_unit_test(test_specialize),      cmocka_unit_test(test_unbound_refused),
        cmocka_unit_test(test_run_bindings),    cmocka_unit_test(test_cache_bound),
        cmocka_unit_test(test_bad_bindings),    cmocka_unit_test(test_files),
        cmocka_unit_test(test_cli),             cmocka_unit_test(test_compiles_once),
        cmocka_unit_test(test_compiles_once_offsets), cmocka_unit_test(test_sized_fallbacks),
#ifdef MINIC_HAVE_CPU_BACKEND
        cmocka_unit_test(test_cpu_compiles_once), cmocka_unit_test(test_cpu_block),
#endif
        cmocka_unit_test(test_block_ref),       cmocka_unit_test(test_cuda_compiles_once),
        cmocka_unit_test(test_arena_at_maxima), cmocka_unit_test(test_cuda_arena_at_maxima),
        cmocka_unit_test(test_plan_like),       cmocka_unit_test(test_ops_compile_once),
        cmocka_unit_test(test_conv_compiles_once), cmocka_unit_test(test_reshape_compiles_once),
#ifdef MINIC_HAVE_CUDA
        cmocka_unit_test(test_cuda_conv_sized_sources),
#endif
#ifdef MINIC_HAVE_CUDA
        cmocka_unit_test(test_cuda_sized_sources),
#endif
        cmocka_unit_test(test_decode_compiles_once), cmocka_unit_test(test_vector_stride_compiles_once),
        cmocka_unit_test(test_tiled_gemm_compiles_once), cmocka_unit_test(test_many_sizes_compiles_once),
        cmocka_unit_test(test_strided_gemm_compiles_once),
#ifdef MINIC_HAVE_CUDA
        cmocka_unit_test(test_cuda_sized_sources_more),
#endif
    };
    return mc_test_run(tests);
}
