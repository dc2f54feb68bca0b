/* The graph IR through the C API: inferred dtypes and shapes for every operator, broadcasting,
 * axes, attributes' normalization, every class of error with its message, naming, outputs,
 * cloning, the verifier, and a large graph built in linear time. */
#include "testlib.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ir/ir.h"

#define SHAPE(...) (int64_t[]){__VA_ARGS__}, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t))
#define NO_SHAPE NULL, 0

static mc_value in(mc_graph *g, const char *name, mc_dtype dt, const int64_t *shape, int rank)
{
    mc_value v = mc_input(g, name, dt, shape, rank);
    if (v < 0)
        fail_msg("mc_input(%s): %s", name, mc_error_message());
    return v;
}

/* Assert that v is a value of type dt[shape]. */
static void check_type(mc_graph *g, mc_value v, mc_dtype dt, const int64_t *shape, int rank)
{
    if (v < 0)
        fail_msg("expected a value, got an error: %s", mc_error_message());
    const mc_node *n = &g->nodes[v];
    assert_int_equal(n->dtype, dt);
    assert_int_equal(n->rank, rank);
    for (int i = 0; i < rank; i++)
        assert_int_equal(n->shape[i], shape[i]);
}

/* Assert that v failed with a message containing phrase. */
static void check_error(mc_value v, const char *phrase)
{
    assert_int_equal(v, MC_ERROR);
    if (!strstr(mc_error_message(), phrase))
        fail_msg("message \"%s\" lacks \"%s\"", mc_error_message(), phrase);
}

/* allreduce: the type of x (floats only); evaluated alone it is x, and over the ranks of a
 * sharded program (mc_graph_eval_ranks) the sum of every rank's operand, on every rank. */
static void test_allreduce(void **state)
{
    (void)state;
    mc_graph *g[2];
    float xs[2][6] = {{1, 2, 3, 4, 5, 6}, {0.5f, -2, 10, 0, 0.25f, 1}};
    for (int r = 0; r < 2; r++) {
        g[r] = mc_graph_new("t");
        mc_value x = in(g[r], "x", MC_F32, SHAPE(2, 3));
        mc_value h = in(g[r], "h", MC_BF16, SHAPE(4));
        mc_value y = mc_allreduce(g[r], mc_mul(g[r], x, mc_scalar(g[r], 2, MC_F32)));
        check_type(g[r], y, MC_F32, SHAPE(2, 3));
        check_type(g[r], mc_allreduce(g[r], h), MC_BF16, SHAPE(4));
        mc_value z = mc_add(g[r], y, x); /* read after the sum: x is rank r's own */
        assert_int_equal(mc_graph_set_outputs(g[r], (mc_value[]){z, y}, 2), MC_OK);
    }
    mc_graph *bad = mc_graph_new("bad");
    check_error(mc_allreduce(bad, in(bad, "i", MC_I32, SHAPE(2))),
                "allreduce: i32 is not supported (allreduce takes f32, f16 or bf16");
    check_error(mc_allreduce(bad, in(bad, "b", MC_BOOL, SHAPE(2))), "allreduce: bool is not supported");
    mc_graph_free(bad);
    const void *in0[3] = {xs[0], NULL, NULL}, *in1[3] = {xs[1], NULL, NULL};
    double *one[2];
    assert_int_equal(mc_graph_eval(g[0], in0, true, one), MC_OK);
    for (int e = 0; e < 6; e++) {
        assert_true(one[1][e] == 2.0 * xs[0][e]);
        assert_true(one[0][e] == 3.0 * xs[0][e]);
    }
    free(one[0]);
    free(one[1]);
    const void *const *ins[2] = {in0, in1};
    double *out[4];
    assert_int_equal(mc_graph_eval_ranks((const mc_graph *const *)g, 2, ins, false, out), MC_OK);
    for (int r = 0; r < 2; r++)
        for (int e = 0; e < 6; e++) {
            double sum = 2.0 * xs[0][e] + 2.0 * xs[1][e];
            assert_true(out[r * 2 + 1][e] == sum);
            assert_true(out[r * 2][e] == (double)(float)(sum + xs[r][e]));
        }
    for (int k = 0; k < 4; k++)
        free(out[k]);
    mc_graph_free(g[1]);
    /* ranks whose graphs differ in structure are refused, naming the rank */
    g[1] = mc_graph_new("t");
    mc_value x = in(g[1], "x", MC_F32, SHAPE(2, 3));
    assert_int_equal(mc_graph_set_outputs(g[1], &x, 1), MC_OK);
    assert_int_equal(mc_graph_eval_ranks((const mc_graph *const *)g, 2, ins, true, out), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "rank 1's graph differs from rank 0's"));
    assert_null(out[0]);
    mc_graph_free(g[0]);
    mc_graph_free(g[1]);
}

static void test_unary(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("t");
    mc_value x = in(g, "x", MC_F32, SHAPE(3, 4));
    mc_value h = in(g, "h", MC_BF16, SHAPE(2));
    mc_value i = in(g, "i", MC_I32, SHAPE(5));
    mc_value b = in(g, "b", MC_BOOL, SHAPE(5));
#define CHECK_UNARY(op)                                                                        \
    check_type(g, mc_##op(g, x), MC_F32, SHAPE(3, 4));                                         \
    check_type(g, mc_##op(g, h), MC_BF16, SHAPE(2));                                           \
    check_error(mc_##op(g, b), #op ": bool is not supported");
    MC_UNARY_BUILDERS(CHECK_UNARY)
#undef CHECK_UNARY
    check_type(g, mc_neg(g, i), MC_I32, SHAPE(5));
    check_type(g, mc_abs(g, i), MC_I32, SHAPE(5));
    check_error(mc_exp(g, i), "exp: i32 is not supported (exp takes f32, f16 or bf16; use cast)");
    check_error(mc_relu(g, i), "relu: i32 is not supported");
    mc_graph_free(g);
}

static void test_binary_broadcasting(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("t");
    mc_value a = in(g, "a", MC_F32, SHAPE(3, 1));
    mc_value b = in(g, "b", MC_F32, SHAPE(1, 4));
    mc_value c = in(g, "c", MC_F32, SHAPE(5));
    mc_value d = in(g, "d", MC_F32, SHAPE(2, 5));
    mc_value s = in(g, "s", MC_F32, NO_SHAPE);
    mc_value e = in(g, "e", MC_F32, SHAPE(4, 1, 3));
    mc_value f = in(g, "f", MC_F32, SHAPE(5, 1));
#define CHECK_BINARY(op)                                                                       \
    {                                                                                          \
        mc_op id;                                                                              \
        assert_true(mc_op_parse(#op, strlen(#op), &id));                                       \
        mc_dtype rt = mc_op_table[id].kind == MC_KIND_COMPARE ? MC_BOOL : MC_F32;              \
        check_type(g, mc_##op(g, a, b), rt, SHAPE(3, 4));                                      \
        check_type(g, mc_##op(g, c, d), rt, SHAPE(2, 5));                                      \
        check_type(g, mc_##op(g, d, c), rt, SHAPE(2, 5));                                      \
        check_type(g, mc_##op(g, s, d), rt, SHAPE(2, 5));                                      \
        check_type(g, mc_##op(g, s, s), rt, NO_SHAPE);                                         \
        check_type(g, mc_##op(g, e, f), rt, SHAPE(4, 5, 3));                                   \
        check_error(mc_##op(g, b, c), #op ": shapes [1, 4] and [5] do not broadcast");        \
    }
    MC_BINARY_BUILDERS(CHECK_BINARY)
#undef CHECK_BINARY
    mc_value bad = mc_add(g, d, in(g, "g", MC_F32, SHAPE(3, 5)));
    check_error(bad, "axis -2: 2 vs 3");
    mc_graph_free(g);
}

static void test_binary_dtypes(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("t");
    mc_value x = in(g, "x", MC_F32, SHAPE(4));
    mc_value h = in(g, "h", MC_F16, SHAPE(4));
    mc_value i = in(g, "i", MC_I32, SHAPE(4));
    mc_value b = in(g, "b", MC_BOOL, SHAPE(4));
    check_error(mc_add(g, x, h), "add: operand dtypes differ: f32 and f16 (use cast)");
    check_error(mc_lt(g, i, x), "lt: operand dtypes differ: i32 and f32");
    mc_value (*i32_ok[])(mc_graph *, mc_value, mc_value) = {mc_add, mc_sub, mc_mul, mc_div,
                                                            mc_maximum, mc_minimum};
    for (size_t k = 0; k < sizeof i32_ok / sizeof *i32_ok; k++)
        check_type(g, i32_ok[k](g, i, i), MC_I32, SHAPE(4));
    mc_value (*compares[])(mc_graph *, mc_value, mc_value) = {mc_eq, mc_ne, mc_lt,
                                                              mc_le, mc_gt, mc_ge};
    for (size_t k = 0; k < 6; k++) {
        check_type(g, compares[k](g, i, i), MC_BOOL, SHAPE(4));
        check_type(g, compares[k](g, h, h), MC_BOOL, SHAPE(4));
    }
    check_error(mc_pow(g, i, i), "pow: i32 is not supported");
    check_type(g, mc_eq(g, b, b), MC_BOOL, SHAPE(4));
    check_type(g, mc_ne(g, b, b), MC_BOOL, SHAPE(4));
    check_error(mc_lt(g, b, b), "lt: bool is not supported");
    check_error(mc_add(g, b, b), "add: bool is not supported");
    check_error(mc_maximum(g, b, b), "maximum: bool is not supported");
    mc_value c = mc_scalar(g, 3, MC_I32);
    check_type(g, mc_mul(g, i, c), MC_I32, SHAPE(4));
    check_error(mc_scalar(g, 2.5, MC_I32), "not an integer");
    check_error(mc_scalar(g, 2, MC_BOOL), "not 0 or 1");
    check_type(g, mc_scalar(g, -INFINITY, MC_F16), MC_F16, NO_SHAPE);
    mc_graph_free(g);
}

static void test_where_and_cast(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("t");
    mc_value c = in(g, "c", MC_BOOL, SHAPE(3, 1));
    mc_value x = in(g, "x", MC_F32, SHAPE(4));
    mc_value y = in(g, "y", MC_F32, SHAPE(2, 1, 1));
    mc_value i = in(g, "i", MC_I32, SHAPE(4));
    check_type(g, mc_where(g, c, x, y), MC_F32, SHAPE(2, 3, 4));
    check_type(g, mc_where(g, c, c, c), MC_BOOL, SHAPE(3, 1));
    check_error(mc_where(g, x, x, x), "where: condition must be bool, not f32");
    check_error(mc_where(g, c, x, i), "where: operand dtypes differ: f32 and i32");
    check_type(g, mc_where(g, c, i, i), MC_I32, SHAPE(3, 4)); /* any one dtype (docs/FORMAT.md §2) */
    check_error(mc_where(g, c, x, in(g, "z", MC_F32, SHAPE(5))), "do not broadcast");
    check_type(g, mc_cast(g, x, MC_I32), MC_I32, SHAPE(4));
    check_type(g, mc_cast(g, c, MC_F16), MC_F16, SHAPE(3, 1));
    check_type(g, mc_cast(g, i, MC_BOOL), MC_BOOL, SHAPE(4));
    check_error(mc_cast(g, x, (mc_dtype)17), "cast: invalid target dtype");
    mc_graph_free(g);
}

static void test_reductions(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("t");
    mc_value x = in(g, "x", MC_F32, SHAPE(2, 3, 4));
    mc_value i = in(g, "i", MC_I32, SHAPE(2, 3));
    mc_value b = in(g, "b", MC_BOOL, SHAPE(2, 3));
    mc_value s = mc_sum(g, x, NULL, 0, false);
    check_type(g, s, MC_F32, NO_SHAPE);
    assert_false(g->nodes[s].attr.has_list);
    assert_int_equal(g->nodes[s].attr.nlist, 3); /* every axis, spelled out */
    check_type(g, mc_sum(g, x, NULL, 0, true), MC_F32, SHAPE(1, 1, 1));
    mc_value m = mc_max(g, x, (int[]){-1}, 1, true);
    check_type(g, m, MC_F32, SHAPE(2, 3, 1));
    assert_int_equal(g->nodes[m].attr.list[0], 2);
    mc_value n = mc_mean(g, x, (int[]){-1, 0}, 2, false);
    check_type(g, n, MC_F32, SHAPE(3));
    assert_int_equal(g->nodes[n].attr.nlist, 2);
    assert_int_equal(g->nodes[n].attr.list[0], 0); /* normalized and sorted */
    assert_int_equal(g->nodes[n].attr.list[1], 2);
    check_type(g, mc_min(g, x, (int[]){1}, 1, false), MC_F32, SHAPE(2, 4));
    check_type(g, mc_sum(g, i, (int[]){0}, 1, false), MC_I32, SHAPE(3));
    check_type(g, mc_max(g, i, NULL, 0, false), MC_I32, NO_SHAPE);
    check_type(g, mc_sum(g, mc_sum(g, x, NULL, 0, false), NULL, 0, false), MC_F32, NO_SHAPE);
    check_error(mc_mean(g, i, NULL, 0, false), "mean: i32 is not supported");
    check_error(mc_sum(g, b, NULL, 0, false), "sum: bool is not supported");
    check_error(mc_sum(g, x, (int[]){0}, 0, false), "sum: axis=[] reduces nothing");
    check_error(mc_sum(g, x, (int[]){3}, 1, false), "sum: axis=3 is out of range for rank 3");
    check_error(mc_max(g, x, (int[]){-4}, 1, false), "out of range");
    check_error(mc_sum(g, x, (int[]){1, 1}, 2, false), "axis 1 appears twice");
    check_error(mc_sum(g, x, (int[]){1, -2}, 2, false), "axes 1 and -2 are the same axis");
    mc_graph_free(g);
}

static void test_normalizations(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("t");
    mc_value x = in(g, "x", MC_F16, SHAPE(2, 3, 8));
    mc_value w = in(g, "w", MC_F16, SHAPE(8));
    mc_value b = in(g, "b", MC_F16, SHAPE(8));
    mc_value w7 = in(g, "w7", MC_F16, SHAPE(7));
    mc_value w32 = in(g, "w32", MC_F32, SHAPE(8));
    mc_value sm = mc_softmax(g, x, -1);
    check_type(g, sm, MC_F16, SHAPE(2, 3, 8));
    assert_int_equal(g->nodes[sm].attr.axis, 2);
    check_type(g, mc_log_softmax(g, x, 0), MC_F16, SHAPE(2, 3, 8));
    check_error(mc_softmax(g, x, 3), "softmax: axis=3 is out of range for rank 3 (expected -3..2)");
    check_error(mc_softmax(g, in(g, "i", MC_I32, SHAPE(3)), 0), "softmax: i32 is not supported");
    check_type(g, mc_layernorm(g, x, w, b, 1e-5), MC_F16, SHAPE(2, 3, 8));
    check_type(g, mc_rmsnorm(g, x, w, 1e-6), MC_F16, SHAPE(2, 3, 8));
    check_error(mc_layernorm(g, x, w7, b, 1e-5), "layernorm: w must have shape [8]");
    check_error(mc_layernorm(g, x, w, w7, 1e-5), "layernorm: b must have shape [8]");
    check_error(mc_rmsnorm(g, x, w32, 1e-6), "rmsnorm: operand dtypes differ: f16 and f32");
    check_error(mc_layernorm(g, x, w, b, -1), "eps must be");
    check_error(mc_layernorm(g, x, w, MC_NONE, 1e-5), "operand 3 is missing");
    mc_graph_free(g);
}

static void test_matmul_and_linear(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("t");
    mc_value a = in(g, "a", MC_F32, SHAPE(4, 8));
    mc_value b = in(g, "b", MC_F32, SHAPE(8, 3));
    mc_value c = in(g, "c", MC_F32, SHAPE(5, 3));
    mc_value ba = in(g, "ba", MC_F32, SHAPE(2, 1, 4, 8));
    mc_value bb = in(g, "bb", MC_F32, SHAPE(3, 8, 5));
    mc_value bc = in(g, "bc", MC_F32, SHAPE(4, 5, 2));
    mc_value v = in(g, "v", MC_F32, SHAPE(8));
    check_type(g, mc_matmul(g, a, b), MC_F32, SHAPE(4, 3));
    check_type(g, mc_matmul(g, ba, bb), MC_F32, SHAPE(2, 3, 4, 5));
    check_type(g, mc_matmul(g, a, bb), MC_F32, SHAPE(3, 4, 5));
    check_error(mc_matmul(g, a, c), "matmul: inner dimensions differ: [4, 8] @ [5, 3]");
    check_error(mc_matmul(g, a, v), "matmul: operands must have rank >= 2");
    check_error(mc_matmul(g, bb, bc), "batch dimensions do not broadcast");
    mc_value i = in(g, "i", MC_I32, SHAPE(8, 8));
    check_error(mc_matmul(g, i, i), "matmul: i32 is not supported");

    mc_value x = in(g, "x", MC_BF16, SHAPE(2, 5, 16));
    mc_value w = in(g, "w", MC_BF16, SHAPE(32, 16));
    mc_value bias = in(g, "bias", MC_BF16, SHAPE(32));
    check_type(g, mc_linear(g, x, w, bias), MC_BF16, SHAPE(2, 5, 32));
    mc_value nb = mc_linear(g, x, w, MC_NONE);
    check_type(g, nb, MC_BF16, SHAPE(2, 5, 32));
    assert_int_equal(g->nodes[nb].nin, 2);
    check_error(mc_linear(g, x, in(g, "w2", MC_BF16, SHAPE(32, 15)), bias),
                "linear: w is [32, 15] but x has 16 input features");
    check_error(mc_linear(g, x, w, in(g, "b2", MC_BF16, SHAPE(31))), "b must have shape [32]");
    check_error(mc_linear(g, x, in(g, "w3", MC_BF16, SHAPE(16)), MC_NONE), "w must be [out, in]");
    mc_graph_free(g);
}

static void test_shape_operators(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("t");
    mc_value x = in(g, "x", MC_F32, SHAPE(2, 3, 4));
    mc_value t = mc_transpose(g, x, NULL, 0);
    check_type(g, t, MC_F32, SHAPE(4, 3, 2));
    assert_int_equal(g->nodes[t].attr.list[0], 2);
    check_type(g, mc_transpose(g, x, (int[]){0, 2, 1}, 3), MC_F32, SHAPE(2, 4, 3));
    check_type(g, mc_transpose(g, x, (int[]){-1, 0, 1}, 3), MC_F32, SHAPE(4, 2, 3));
    check_error(mc_transpose(g, x, (int[]){0, 0, 1}, 3), "transpose: perm is not a permutation");
    check_error(mc_transpose(g, x, (int[]){1, 0}, 2), "perm has 2 entries but x has rank 3");

    mc_value r = mc_reshape(g, x, (int64_t[]){-1, 4}, 2);
    check_type(g, r, MC_F32, SHAPE(6, 4));
    assert_int_equal(g->nodes[r].attr.list[0], 6); /* -1 resolved */
    check_type(g, mc_reshape(g, x, (int64_t[]){24}, 1), MC_F32, SHAPE(24));
    check_type(g, mc_reshape(g, in(g, "one", MC_I32, SHAPE(1, 1)), NULL, 0), MC_I32, NO_SHAPE);
    check_error(mc_reshape(g, x, (int64_t[]){-1, -1}, 2), "reshape: shape has more than one -1");
    check_error(mc_reshape(g, x, (int64_t[]){5, 5}, 2),
                "cannot reshape [2, 3, 4] (24 elements) to [5, 5] (25 elements)");
    check_error(mc_reshape(g, x, (int64_t[]){-1, 5}, 2), "not a multiple");
    check_error(mc_reshape(g, x, (int64_t[]){0, 24}, 2), "not positive");

    mc_value y = in(g, "y", MC_BOOL, SHAPE(3, 1));
    check_type(g, mc_expand(g, y, (int64_t[]){2, 3, 4}, 3), MC_BOOL, SHAPE(2, 3, 4));
    check_error(mc_expand(g, x, (int64_t[]){2, 5, 4}, 3), "expand: cannot expand [2, 3, 4] to [2, 5, 4]");
    check_error(mc_expand(g, x, (int64_t[]){3, 4}, 2), "fewer axes");

    mc_value s = mc_slice(g, x, -1, 1, MC_END);
    check_type(g, s, MC_F32, SHAPE(2, 3, 3));
    assert_int_equal(g->nodes[s].attr.axis, 2);
    assert_int_equal(g->nodes[s].attr.end, 4);
    s = mc_slice(g, x, 1, -2, 100); /* negative start, end clamped */
    check_type(g, s, MC_F32, SHAPE(2, 2, 4));
    assert_int_equal(g->nodes[s].attr.start, 1);
    assert_int_equal(g->nodes[s].attr.end, 3);
    check_type(g, mc_slice(g, x, 0, -100, -1), MC_F32, SHAPE(1, 3, 4));
    check_error(mc_slice(g, x, 1, 2, 2), "slice: start=2, end=2 select nothing from axis 1");
    check_error(mc_slice(g, x, 1, 5, MC_END), "select nothing");
    check_error(mc_slice(g, x, 3, 0, 1), "slice: axis=3 is out of range");

    mc_value p = in(g, "p", MC_F32, SHAPE(2, 5, 4));
    mc_value q = in(g, "q", MC_F32, SHAPE(2, 1, 4));
    check_type(g, mc_concat(g, (mc_value[]){x, p, q}, 3, 1), MC_F32, SHAPE(2, 9, 4));
    check_type(g, mc_concat(g, (mc_value[]){x, x}, 2, -1), MC_F32, SHAPE(2, 3, 8));
    check_type(g, mc_concat(g, (mc_value[]){x}, 1, 0), MC_F32, SHAPE(2, 3, 4));
    check_error(mc_concat(g, (mc_value[]){x, p}, 2, 0), "concat: shapes [2, 3, 4] and [2, 5, 4] differ on axis 1");
    check_error(mc_concat(g, (mc_value[]){x, y}, 2, 0), "concat: operand dtypes differ: f32 and bool");
    check_error(mc_concat(g, (mc_value[]){x, in(g, "r3", MC_F32, SHAPE(2, 3))}, 2, 0), "rank");
    check_error(mc_concat(g, NULL, 0, 0), "concat: expected at least 1 operand");
    mc_graph_free(g);
}

static void test_create(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("t");
    mc_value i = mc_iota(g, (int64_t[]){3, 4}, 2, -1, MC_I32);
    check_type(g, i, MC_I32, SHAPE(3, 4));
    assert_int_equal(g->nodes[i].attr.axis, 1);
    check_type(g, mc_iota(g, (int64_t[]){5}, 1, 0, MC_F16), MC_F16, SHAPE(5));
    check_error(mc_iota(g, (int64_t[]){5}, 1, 0, MC_BOOL), "iota: bool is not supported");
    check_error(mc_iota(g, (int64_t[]){5}, 1, 1, MC_I32), "iota: axis=1 is out of range");
    check_error(mc_iota(g, (int64_t[]){5, 0}, 2, 0, MC_I32), "dimensions must be positive");
    check_type(g, mc_full(g, (int64_t[]){2, 2}, 2, 1.5, MC_F32), MC_F32, SHAPE(2, 2));
    check_type(g, mc_full(g, NULL, 0, INFINITY, MC_BF16), MC_BF16, NO_SHAPE);
    check_type(g, mc_full(g, (int64_t[]){3}, 1, -7, MC_I32), MC_I32, SHAPE(3));
    check_type(g, mc_full(g, (int64_t[]){3}, 1, 1, MC_BOOL), MC_BOOL, SHAPE(3));
    check_error(mc_full(g, (int64_t[]){3}, 1, 2.5, MC_I32), "full: value 2.5 is not an integer");
    check_error(mc_full(g, (int64_t[]){3}, 1, NAN, MC_I32), "not an integer");
    check_error(mc_full(g, (int64_t[]){1, 2, 3, 4, 5, 6, 7, 8, 9}, 9, 0, MC_F32), "at most 8");
    mc_graph_free(g);
}

static void test_declarations(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("t");
    check_type(g, mc_param(g, "fc1.w", MC_F32, SHAPE(4, 2)), MC_F32, SHAPE(4, 2));
    check_type(g, mc_input(g, "_s", MC_BOOL, NO_SHAPE), MC_BOOL, NO_SHAPE);
    check_error(mc_input(g, "fc1.w", MC_F32, SHAPE(1)), "'fc1.w' is already defined");
    check_error(mc_input(g, "1x", MC_F32, SHAPE(1)), "'1x' is not a valid name");
    check_error(mc_input(g, "inf", MC_F32, SHAPE(1)), "not a valid name");
    check_error(mc_input(g, "f16", MC_F32, SHAPE(1)), "not a valid name");
    check_error(mc_input(g, "a-b", MC_F32, SHAPE(1)), "not a valid name");
    check_error(mc_input(g, NULL, MC_F32, SHAPE(1)), "no name given (NULL)");
    check_error(mc_input(g, "z", MC_F32, SHAPE(1, 1, 1, 1, 1, 1, 1, 1, 1)),
                "rank 9 is above the maximum of 8");
    check_error(mc_input(g, "z", MC_F32, SHAPE(3, 0)),
                "input z: dimension 1 is 0: dimensions must be positive");
    check_error(mc_param(g, "z", MC_F32, SHAPE(-2)), "param z: dimension 0 is -2");
    check_error(mc_input(g, "z", MC_F32, SHAPE(1LL << 40, 1LL << 40)), "overflows int64");
    check_error(mc_input(g, "z", (mc_dtype)9, SHAPE(2)), "invalid dtype");
    /* Broadcasting two valid shapes into one too large to count. */
    mc_value a = in(g, "a", MC_F32, SHAPE(1LL << 31, 1));
    mc_value b = in(g, "b", MC_F32, SHAPE(1, 1LL << 31));
    check_error(mc_add(g, a, b), "overflows int64");
    mc_graph_free(g);
}

static void test_errors_chain_and_outputs(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("t");
    mc_value x = in(g, "x", MC_F32, SHAPE(4));
    mc_value y = in(g, "y", MC_F16, SHAPE(4));
    assert_false(g->failed);
    assert_int_equal(mc_graph_set_outputs(g, (mc_value[]){x, x}, 2), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "listed twice"));
    assert_int_equal(mc_graph_set_outputs(g, NULL, 0), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "at least one output"));
    assert_int_equal(mc_graph_set_outputs(g, (mc_value[]){99}, 1), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "not a value of this graph"));
    assert_int_equal(mc_graph_set_outputs(g, (mc_value[]){y, x}, 2), MC_OK);
    assert_int_equal(g->noutputs, 2);
    assert_int_equal(g->outputs[0], y);

    check_error(mc_exp(g, 42), "exp: operand 1 (42) is not a value of this graph");
    assert_true(g->failed);
    int before = g->nnodes;
    mc_value bad = mc_add(g, x, y);
    check_error(bad, "add: operand dtypes differ: f32 and f16");
    char first[256];
    snprintf(first, sizeof first, "%s", mc_error_message());
    /* Every builder given MC_ERROR fails quietly: the first message stays. */
    mc_value chain = mc_gelu(g, mc_sum(g, mc_reshape(g, mc_transpose(g, bad, NULL, 0),
                                                     (int64_t[]){-1}, 1), NULL, 0, false));
    chain = mc_concat(g, (mc_value[]){x, chain}, 2, 0);
    chain = mc_where(g, bad, chain, chain);
    chain = mc_linear(g, chain, bad, MC_NONE);
    assert_int_equal(chain, MC_ERROR);
    assert_string_equal(mc_error_message(), first);
    assert_int_equal(g->nnodes, before);
    in(g, "later", MC_F32, SHAPE(2)); /* a later success does not clear the failure */
    assert_true(g->failed);
    assert_int_equal(mc_graph_set_outputs(g, (mc_value[]){x}, 1), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "an earlier call that built this graph failed"));
    assert_int_equal(mc_error_status(), MC_ERR_INPUT);
    mc_graph_free(g);
}

static void test_names(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("t");
    mc_value x = in(g, "x", MC_F32, SHAPE(4));
    mc_value e = mc_exp(g, x);
    char buf[32];
    assert_string_equal(mc_node_name(g, e, buf, sizeof buf), "t1");
    assert_int_equal(mc_value_set_name(g, e, "ex"), MC_OK);
    assert_string_equal(mc_node_name(g, e, buf, sizeof buf), "ex");
    assert_int_equal(mc_value_set_name(g, e, "ex"), MC_OK); /* the same name again */
    mc_value l = mc_log(g, x);
    assert_int_equal(mc_value_set_name(g, l, "x"), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "'x' is already defined"));
    assert_int_equal(mc_value_set_name(g, l, "nan"), MC_ERR_INPUT);
    assert_int_equal(mc_value_set_name(g, 77, "q"), MC_ERR_INPUT);
    assert_int_equal(mc_node_numel(&g->nodes[x]), 4);
    mc_graph_free(g);
}

/* Errors of nodes that came from a graph file carry file:line:col and a caret. */
static void test_error_location(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("t");
    g->file = mc_arena_strdup(&g->arena, "m.graph");
    g->text = mc_arena_strdup(&g->arena, "input x : f32[4]\ninput y : f16[4]\nz = add(x, y)\n");
    mc_value x = mc_graph_declare(g, MC_OP_INPUT, "x", MC_F32, (int64_t[]){4}, 1, 1, 7);
    mc_value y = mc_graph_declare(g, MC_OP_INPUT, "y", MC_F16, (int64_t[]){4}, 1, 2, 7);
    mc_value z = mc_graph_add(g, MC_OP_ADD, (mc_value[]){x, y}, 2, NULL, 3, 5);
    check_error(z, "m.graph:3:5: error: add: operand dtypes differ: f32 and f16 (use cast)\n"
                   "  z = add(x, y)\n      ^");
    z = mc_graph_declare(g, MC_OP_PARAM, "x", MC_F32, (int64_t[]){4}, 1, 2, 7);
    check_error(z, "m.graph:2:7: error: 'x' is already defined");
    mc_graph_free(g);
}

static void test_attrs_through_graph_add(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("t");
    mc_value x = in(g, "x", MC_F32, SHAPE(2, 3));
    check_error(mc_graph_add(g, MC_OP_ADD, (mc_value[]){x}, 1, NULL, 0, 0),
                "add: expected 2 operands, got 1");
    check_error(mc_graph_add(g, MC_OP_LINEAR, (mc_value[]){x, x, x, x}, 4, NULL, 0, 0),
                "linear: expected 2 to 3 operands, got 4");
    check_error(mc_graph_add(g, MC_OP_CONCAT, NULL, 0, &(mc_attrs){0}, 0, 0),
                "concat: expected at least 1 operand, got 0");
    check_error(mc_graph_add(g, MC_OP_RESHAPE, (mc_value[]){x}, 1, &(mc_attrs){0}, 0, 0),
                "reshape: shape=[..] is required");
    check_error(mc_graph_add(g, MC_OP_INPUT, NULL, 0, NULL, 0, 0), "mc_graph_declare");
    mc_attrs c = {.value = 0.25, .dtype = MC_F32};
    mc_value k = mc_graph_add(g, MC_OP_CONST, NULL, 0, &c, 0, 0);
    check_type(g, k, MC_F32, NO_SHAPE);
    assert_int_equal(g->nodes[k].origin, MC_OP_CONST);
    mc_value m = mc_graph_add(g, MC_OP_MUL, (mc_value[]){x, k}, 2, NULL, 0, 0);
    check_type(g, m, MC_F32, SHAPE(2, 3));
    assert_int_equal(g->nodes[m].origin, MC_OP_MUL);
    mc_graph_free(g);
}

static mc_graph *build_mlp(void)
{
    mc_graph *g = mc_graph_new("mlp");
    mc_value x = in(g, "x", MC_F32, SHAPE(32, 128));
    mc_value w1 = mc_param(g, "fc1.w", MC_F32, SHAPE(512, 128));
    mc_value b1 = mc_param(g, "fc1.b", MC_F32, SHAPE(512));
    mc_value h = mc_linear(g, x, w1, b1);
    mc_value_set_name(g, h, "h");
    mc_value a = mc_gelu(g, h);
    mc_value m = mc_mul(g, a, mc_scalar(g, 1.5, MC_F32));
    mc_value y = mc_add(g, m, mc_scalar(g, -INFINITY, MC_F32));
    mc_value s = mc_sum(g, y, (int[]){-1}, 1, true);
    mc_value_set_name(g, s, "s");
    mc_value_set_name(g, y, "y");
    assert_int_equal(mc_graph_set_outputs(g, (mc_value[]){y, s}, 2), MC_OK);
    return g;
}

static void test_verify(void **state)
{
    (void)state;
    mc_graph *g = build_mlp();
    assert_int_equal(mc_graph_verify(g, "decompose"), MC_OK);

    mc_graph *c = mc_graph_clone(g);
    c->nodes[4].shape[0] = 31; /* a pass that got a shape wrong */
    assert_int_equal(mc_graph_verify(c, "fuse"), MC_ERR_SYSTEM);
    assert_non_null(strstr(mc_error_message(), "after fuse"));
    assert_non_null(strstr(mc_error_message(), "its operands give f32[32, 512]"));
    mc_graph_free(c);

    c = mc_graph_clone(g);
    c->nodes[3].in[0] = 4; /* an operand defined after its user */
    assert_int_equal(mc_graph_verify(c, "simplify"), MC_ERR_SYSTEM);
    assert_non_null(strstr(mc_error_message(), "defined before their users"));
    mc_graph_free(c);

    c = mc_graph_clone(g);
    c->outputs[1] = 1000;
    assert_int_equal(mc_graph_verify(c, "plan"), MC_ERR_SYSTEM);
    assert_non_null(strstr(mc_error_message(), "output 2"));
    mc_graph_free(c);

    c = mc_graph_clone(g);
    c->nodes[4].dtype = MC_F16;
    assert_int_equal(mc_graph_verify(c, NULL), MC_ERR_SYSTEM);
    assert_non_null(strstr(mc_error_message(), "after building"));
    mc_graph_free(c);

    c = mc_graph_clone(g);
    c->nodes[4].name = c->nodes[0].name; /* two values named x */
    assert_int_equal(mc_graph_verify(c, "cse"), MC_ERR_SYSTEM);
    assert_non_null(strstr(mc_error_message(), "the name 'x'"));
    mc_graph_free(c);

    c = mc_graph_clone(g);
    c->nodes[9].attr.list[0] = -1; /* sum(y, axis=[-1]) written by hand, not normalized */
    assert_int_equal(mc_graph_verify(c, "decompose"), MC_ERR_SYSTEM);
    assert_non_null(strstr(mc_error_message(), "not normalized"));
    mc_graph_free(c);

    c = mc_graph_clone(g);
    c->nodes[3].nin = 1; /* linear with one operand */
    assert_int_equal(mc_graph_verify(c, "decompose"), MC_ERR_SYSTEM);
    assert_non_null(strstr(mc_error_message(), "expected 2 to 3 operands"));
    mc_graph_free(c);
    mc_graph_free(g);
}

static void test_clone(void **state)
{
    (void)state;
    mc_graph *g = build_mlp();
    mc_graph *c = mc_graph_clone(g);
    assert_non_null(c);
    assert_int_equal(c->nnodes, g->nnodes);
    assert_string_equal(c->name, "mlp");
    for (int i = 0; i < g->nnodes; i++) {
        assert_int_equal(c->nodes[i].op, g->nodes[i].op);
        assert_int_equal(c->nodes[i].nin, g->nodes[i].nin);
        assert_true(c->nodes[i].nin == 0 || c->nodes[i].in != g->nodes[i].in);
        if (g->nodes[i].name) {
            assert_string_equal(c->nodes[i].name, g->nodes[i].name);
            assert_ptr_not_equal(c->nodes[i].name, g->nodes[i].name);
        }
    }
    assert_int_equal(c->noutputs, 2);
    /* The clone keeps building on its own, with its own names. */
    assert_int_equal(mc_value_set_name(c, mc_exp(c, 0), "e"), MC_OK);
    check_error(mc_input(c, "h", MC_F32, SHAPE(1)), "already defined");
    assert_int_equal(g->nnodes + 1, c->nnodes);
    mc_graph_free(g);
    assert_int_equal(mc_graph_verify(c, "clone"), MC_OK);
    mc_graph_free(c);
}

static char *print_to_string(const mc_graph *g)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    assert_non_null(f);
    assert_int_equal(mc_graph_print(g, f), MC_OK);
    fclose(f);
    return text;
}

static void expect_line(const char *text, const char *line)
{
    if (!strstr(text, line))
        fail_msg("printed graph lacks \"%s\":\n%s", line, text);
}

static void test_print(void **state)
{
    (void)state;
    mc_graph *g = build_mlp();
    char *text = print_to_string(g);
    expect_line(text, "graph mlp\ninput x : f32[32, 128]\nparam fc1.w : f32[512, 128]\n");
    expect_line(text, "h = linear(x, fc1.w, fc1.b)  # f32[32, 512]\n");
    expect_line(text, "t4 = gelu(h)  # f32[32, 512]\n");
    expect_line(text, "t6 = mul(t4, 1.5)  # f32[32, 512]\n");
    expect_line(text, "y = add(t6, -inf)  # f32[32, 512]\n");
    expect_line(text, "s = sum(y, axis=[1], keepdim=true)  # f32[32, 1]\n");
    expect_line(text, "output y, s\n");
    free(text);
    mc_graph_free(g);

    /* Every attribute written out; odd numbers; constants that can't be inlined. */
    g = mc_graph_new(NULL);
    mc_value x = in(g, "x", MC_F16, SHAPE(2, 3, 4));
    mc_value i = in(g, "t3", MC_I32, SHAPE(3)); /* a user name that looks like an auto one */
    mc_value v[12];
    v[0] = mc_transpose(g, x, NULL, 0);
    v[1] = mc_reshape(g, x, (int64_t[]){-1, 4}, 2);
    v[2] = mc_slice(g, x, -1, -3, MC_END);
    v[3] = mc_concat(g, (mc_value[]){x, x}, 2, -2);
    v[4] = mc_iota(g, (int64_t[]){3}, 1, 0, MC_I32);
    v[5] = mc_full(g, (int64_t[]){2}, 1, 0.1, MC_F32);
    v[6] = mc_layernorm(g, x, in(g, "w", MC_F16, SHAPE(4)), in(g, "b", MC_F16, SHAPE(4)), 1e-5);
    v[7] = mc_softmax(g, x, -1);
    v[8] = mc_cast(g, i, MC_BF16);
    v[9] = mc_neg(g, mc_scalar(g, 2, MC_I32)); /* a lone i32 number: not inlinable */
    v[10] = mc_mul(g, i, mc_scalar(g, 3, MC_I32));
    v[11] = mc_expand(g, mc_max(g, x, NULL, 0, false), (int64_t[]){2, 2}, 2);
    assert_int_equal(mc_graph_set_outputs(g, v, 12), MC_OK);
    assert_int_equal(mc_graph_verify(g, NULL), MC_OK);
    text = print_to_string(g);
    assert_null(strstr(text, "graph "));
    expect_line(text, "input t3 : i32[3]\n");
    expect_line(text, "t2 = transpose(x, perm=[2, 1, 0])  # f16[4, 3, 2]\n");
    expect_line(text, "t3_ = reshape(x, shape=[6, 4])  # f16[6, 4]\n");
    expect_line(text, "t4 = slice(x, axis=2, start=1, end=4)  # f16[2, 3, 3]\n");
    expect_line(text, "t5 = concat(x, x, axis=1)  # f16[2, 6, 4]\n");
    expect_line(text, "t6 = iota(shape=[3], axis=0, dtype=i32)  # i32[3]\n");
    expect_line(text, "t7 = full(shape=[2], value=0.1, dtype=f32)  # f32[2]\n");
    expect_line(text, "t10 = layernorm(x, w, b, eps=1e-05)  # f16[2, 3, 4]\n");
    expect_line(text, "t11 = softmax(x, axis=2)  # f16[2, 3, 4]\n");
    expect_line(text, "t12 = cast(t3, to=bf16)  # bf16[3]\n");
    expect_line(text, "t13 = full(shape=[], value=2, dtype=i32)  # i32[]\n");
    expect_line(text, "t14 = neg(t13)  # i32[]\n");
    expect_line(text, "t16 = mul(t3, 3)  # i32[3]\n");
    expect_line(text, "t17 = max(x, keepdim=false)  # f16[]\n");
    expect_line(text, "t18 = expand(t17, shape=[2, 2])  # f16[2, 2]\n");
    expect_line(text, "output t2, t3_, t4, t5, t6, t7, t10, t11, t12, t14, t16, t18\n");
    free(text);

    /* A write that fails is the system's error, not a crash or a silent success. */
    FILE *full = fopen("/dev/full", "w");
    if (full) {
        assert_int_equal(mc_graph_print(g, full), MC_ERR_SYSTEM);
        assert_non_null(strstr(mc_error_message(), "could not write"));
        fclose(full);
    }
    assert_int_equal(mc_graph_print(NULL, stdout), MC_ERR_INPUT);
    mc_graph_free(g);
}

/* A long chain: building, verifying, cloning and printing stay linear. */
static void test_large_graph(void **state)
{
    (void)state;
    enum { N = 100000 };
    clock_t start = clock();
    mc_graph *g = mc_graph_new("big");
    mc_value x = in(g, "x", MC_F32, SHAPE(4, 4));
    mc_value v = x;
    for (int i = 0; i < N; i++) {
        v = i % 3 == 0 ? mc_add(g, v, x) : i % 3 == 1 ? mc_mul(g, v, mc_scalar(g, 0.5, MC_F32)) : mc_tanh(g, v);
        if (i % 1000 == 0) {
            char name[32];
            snprintf(name, sizeof name, "v%d", i);
            assert_int_equal(mc_value_set_name(g, v, name), MC_OK);
        }
    }
    assert_true(v >= N);
    assert_int_equal(mc_graph_set_outputs(g, &v, 1), MC_OK);
    assert_int_equal(mc_graph_verify(g, "big"), MC_OK);
    mc_graph *c = mc_graph_clone(g);
    assert_non_null(c);
    assert_int_equal(mc_graph_verify(c, "clone"), MC_OK);
    FILE *devnull = fopen("/dev/null", "w");
    assert_int_equal(mc_graph_print(c, devnull), MC_OK);
    fclose(devnull);
    double seconds = (double)(clock() - start) / CLOCKS_PER_SEC;
    print_message("100,000-operator graph: built, verified, cloned, printed in %.3f s (%d nodes)\n",
                  seconds, g->nnodes);
    assert_true(seconds < 10); /* quadratic would be minutes */
    mc_graph_free(c);
    mc_graph_free(g);
}

/* Random operators, operands and attributes (many of them nonsense) never crash inference, and
 * every node it accepts leaves a graph that verifies and prints. UBSan checks the arithmetic. */
static uint64_t rng_state = 12345;
static int64_t rnd(int64_t n)
{
    rng_state = rng_state * 6364136223846793005u + 1442695040888963407u;
    return (int64_t)((rng_state >> 33) % (uint64_t)n);
}

static int64_t interesting(void)
{
    static const int64_t values[] = {0, 1, 2, 3, 4, -1, -2, -3, -5, 7, 100, INT64_MAX, INT64_MIN,
                                     INT64_MAX - 1, -INT64_MAX, 1LL << 40, 8, 9};
    return values[rnd(sizeof values / sizeof *values)];
}

static void test_random_attributes(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("fuzz");
    in(g, "a", MC_F32, SHAPE(2, 3, 4));
    in(g, "b", MC_F32, SHAPE(4));
    in(g, "c", MC_BOOL, SHAPE(3, 1));
    in(g, "d", MC_I32, SHAPE(1, 3, 4));
    in(g, "e", MC_F16, SHAPE(4, 4));
    int accepted = 0;
    for (int iter = 0; iter < 20000; iter++) {
        mc_op op = (mc_op)(MC_OP_CONST + rnd(MC_NUM_OPS - MC_OP_CONST));
        mc_value ops[5];
        int nin = (int)rnd(5);
        for (int k = 0; k < nin; k++)
            ops[k] = rnd(20) == 0 ? (mc_value)interesting() : (mc_value)rnd(g->nnodes);
        mc_attrs at = {0};
        at.has_list = rnd(4) != 0;
        at.nlist = rnd(10) == 0 ? (int)interesting() : (int)rnd(5);
        for (int k = 0; k < MC_MAX_RANK; k++)
            at.list[k] = rnd(3) ? rnd(7) - 3 : interesting();
        at.keepdim = rnd(2);
        at.axis = rnd(3) ? rnd(7) - 3 : interesting();
        at.start = interesting();
        at.end = rnd(3) ? interesting() : MC_END;
        at.value = rnd(4) ? (double)(rnd(5) - 2) : rnd(2) ? 0.5 : NAN;
        at.dtype = (mc_dtype)(rnd(12) == 0 ? 7 : rnd(MC_NUM_DTYPES));
        int before = g->nnodes;
        mc_value v = mc_graph_add(g, op, ops, nin, &at, 0, 0);
        if (v == MC_ERROR) {
            assert_int_equal(g->nnodes, before);
            assert_true(strlen(mc_error_message()) > 0);
            assert_int_equal(mc_error_status(), MC_ERR_INPUT);
        } else {
            assert_int_equal(v, before);
            accepted++;
        }
    }
    g->failed = false;
    mc_value last = g->nnodes - 1;
    assert_int_equal(mc_graph_set_outputs(g, &last, 1), MC_OK);
    assert_int_equal(mc_graph_verify(g, "fuzz"), MC_OK);
    FILE *devnull = fopen("/dev/null", "w");
    assert_int_equal(mc_graph_print(g, devnull), MC_OK);
    fclose(devnull);
    print_message("random attributes: %d of 20000 nodes accepted\n", accepted);
    assert_true(accepted > 1000);
    mc_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary),
        cmocka_unit_test(test_binary_broadcasting),
        cmocka_unit_test(test_binary_dtypes),
        cmocka_unit_test(test_where_and_cast),
        cmocka_unit_test(test_reductions),
        cmocka_unit_test(test_normalizations),
        cmocka_unit_test(test_matmul_and_linear),
        cmocka_unit_test(test_shape_operators),
        cmocka_unit_test(test_create),
        cmocka_unit_test(test_declarations),
        cmocka_unit_test(test_errors_chain_and_outputs),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_error_location),
        cmocka_unit_test(test_attrs_through_graph_add),
        cmocka_unit_test(test_verify),
        cmocka_unit_test(test_allreduce),
        cmocka_unit_test(test_clone),
        cmocka_unit_test(test_print),
        cmocka_unit_test(test_large_graph),
        cmocka_unit_test(test_random_attributes),
    };
    return mc_test_run(tests);
}
