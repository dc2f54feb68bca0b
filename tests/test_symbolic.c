/* Symbolic dimensions (docs/FORMAT.md §1, issue 23): the `.graph` syntax DIM := INT | NAME |
 * NAME<=INT in types and shape lists, the C API's mc_dim_sym, symbolic shape inference (sums,
 * products and exact quotients of dims), printing that parses back, errors at file:line:col,
 * and specialisation of a symbolic graph to one binding. */
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

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
    mc_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_and_infer), cmocka_unit_test(test_print_roundtrip),
        cmocka_unit_test(test_errors),          cmocka_unit_test(test_c_api),
        cmocka_unit_test(test_specialize),      cmocka_unit_test(test_unbound_refused),
    };
    return mc_test_run(tests);
}
