/* Operator conformance, part 3: sizes and patterns that small cases miss. Odd sizes that leave
 * tails after a backend's vector width or tile (129, 257, 769, 1025), long rows and columns
 * for the reductions, GEMMs with transposed operands and epilogues, reductions over views,
 * values that are both outputs and operands, an input that is an output; and the example
 * workloads (the graph files of examples/) on every backend against the oracle. Same harness as
 * tests/test_ops.c; every expectation is an explicit loop written for the case's shapes.
 */
#include "ops_conformance.h"

static double gelu_ref(double x) { return 0.5 * x * erfc(-x / sqrt(2.0)); }

/* ---- pointwise with broadcasts over odd sizes: y = gelu(x * s + b) + x ---------------------- */

static mc_status build_pointwise(const op_case *c, mc_graph *g)
{
    mc_value x = mc_input(g, "x", c->dtype, SHAPE(257, 129));
    mc_value s = mc_param(g, "s", c->dtype, SHAPE(129));
    mc_value b = mc_param(g, "b", c->dtype, SHAPE(257, 1));
    return OUTPUTS(g, mc_add(g, mc_gelu(g, mc_add(g, mc_mul(g, x, s), b)), x));
}

static void expect_pointwise(const op_case *c, double *const *in, double **out)
{
    for (int i = 0; i < 257; i++)
        for (int j = 0; j < 129; j++) {
            double x = in[0][i * 129 + j];
            out[0][i * 129 + j] = gelu_ref(x * in[1][j] + in[2][i]) + x;
        }
}

/* ---- softmax over long rows (axis -1) or long columns (axis 0) ------------------------------ */

static mc_status build_long_softmax(const op_case *c, mc_graph *g)
{
    if (c->variant == 0) {
        mc_value x = mc_input(g, "x", c->dtype, SHAPE(3, 1000));
        return OUTPUTS(g, mc_softmax(g, mc_mul(g, x, mc_scalar(g, 4.0, c->dtype)), -1));
    }
    mc_value x = mc_input(g, "x", c->dtype, SHAPE(700, 3));
    return OUTPUTS(g, mc_log_softmax(g, x, 0));
}

static void expect_long_softmax(const op_case *c, double *const *in, double **out)
{
    int rows = 3, len = c->variant == 0 ? 1000 : 700;
    for (int r = 0; r < rows; r++) {
        /* element t of row r: x[r*len + t] (rows) or x[t*3 + r] (columns) */
#define AT(t) (c->variant == 0 ? r * len + (t) : (t) * 3 + r)
        double scale = c->variant == 0 ? 4.0 : 1.0, m = -INFINITY, z = 0;
        for (int t = 0; t < len; t++)
            m = fmax(m, scale * in[0][AT(t)]);
        for (int t = 0; t < len; t++)
            z += exp(scale * in[0][AT(t)] - m);
        double lse = m + log(z);
        for (int t = 0; t < len; t++) {
            double v = scale * in[0][AT(t)] - lse;
            out[0][AT(t)] = c->variant == 0 ? exp(v) : v;
        }
#undef AT
    }
}

/* ---- layernorm over 769, rmsnorm over 1024 -------------------------------------------------- */

static mc_status build_wide_norm(const op_case *c, mc_graph *g)
{
    if (c->variant == 0) {
        mc_value x = mc_input(g, "x", c->dtype, SHAPE(5, 769));
        mc_value w = mc_param(g, "w", c->dtype, SHAPE(769)), b = mc_param(g, "b", c->dtype, SHAPE(769));
        return OUTPUTS(g, mc_layernorm(g, x, w, b, 1e-5));
    }
    mc_value x = mc_input(g, "x", c->dtype, SHAPE(4, 1024));
    mc_value w = mc_param(g, "w", c->dtype, SHAPE(1024));
    return OUTPUTS(g, mc_rmsnorm(g, x, w, 1e-6));
}

static void expect_wide_norm(const op_case *c, double *const *in, double **out)
{
    int rows = c->variant == 0 ? 5 : 4, n = c->variant == 0 ? 769 : 1024;
    for (int r = 0; r < rows; r++) {
        const double *x = in[0] + r * n;
        double s = 0, s2 = 0;
        for (int j = 0; j < n; j++) {
            s += x[j];
            s2 += x[j] * x[j];
        }
        double mean = s / n, var = s2 / n - mean * mean;
        for (int j = 0; j < n; j++)
            out[0][r * n + j] = c->variant == 0 ? (x[j] - mean) / sqrt(var + 1e-5) * in[1][j] + in[2][j]
                                                : x[j] / sqrt(s2 / n + 1e-6) * in[1][j];
    }
}

/* ---- GEMMs: odd sizes, batches, transposed operands, epilogues ------------------------------ */

/* C[i][j] = sum_k A(i, k) B(k, j) with A and B given by their element functions' strides. */
static void gemm_ref(const double *a, int64_t a_si, int64_t a_sk, const double *b, int64_t b_sk,
                     int64_t b_sj, double *out, int M, int N, int K)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double acc = 0;
            for (int k = 0; k < K; k++)
                acc += a[i * a_si + k * a_sk] * b[k * b_sk + j * b_sj];
            out[i * N + j] = acc;
        }
}

static mc_status build_gemm(const op_case *c, mc_graph *g)
{
    mc_dtype d = c->dtype;
    switch (c->variant) {
    case 0: { /* [67,33] @ [33,45] (declared one by one: argument order is unspecified) */
        mc_value a = mc_input(g, "a", d, SHAPE(67, 33));
        mc_value b = mc_input(g, "b", d, SHAPE(33, 45));
        return OUTPUTS(g, mc_matmul(g, a, b));
    }
    case 1: { /* [3,70,65] @ [65,31] */
        mc_value a = mc_input(g, "a", d, SHAPE(3, 70, 65));
        mc_value b = mc_input(g, "b", d, SHAPE(65, 31));
        return OUTPUTS(g, mc_matmul(g, a, b));
    }
    case 2: { /* a^T @ b with a [33,67] */
        mc_value a = mc_input(g, "a", d, SHAPE(33, 67));
        mc_value b = mc_input(g, "b", d, SHAPE(33, 45));
        return OUTPUTS(g, mc_matmul(g, mc_transpose(g, a, NULL, 0), b));
    }
    default: { /* relu(x @ w^T * 0.5 + bias) + r, and x @ w^T as a second output */
        mc_value x = mc_input(g, "x", d, SHAPE(40, 48)), w = mc_param(g, "w", d, SHAPE(56, 48));
        mc_value bias = mc_param(g, "bias", d, SHAPE(56)), r = mc_input(g, "r", d, SHAPE(40, 56));
        mc_value mm = mc_matmul(g, x, mc_transpose(g, w, NULL, 0));
        mc_value y = mc_add(g, mc_relu(g, mc_add(g, mc_mul(g, mm, mc_scalar(g, 0.5, d)), bias)), r);
        return OUTPUTS(g, y, mm);
    }
    }
}

static void expect_gemm(const op_case *c, double *const *in, double **out)
{
    switch (c->variant) {
    case 0: gemm_ref(in[0], 33, 1, in[1], 45, 1, out[0], 67, 45, 33); break;
    case 1:
        for (int t = 0; t < 3; t++)
            gemm_ref(in[0] + t * 70 * 65, 65, 1, in[1], 31, 1, out[0] + t * 70 * 31, 70, 31, 65);
        break;
    case 2: gemm_ref(in[0], 1, 67, in[1], 45, 1, out[0], 67, 45, 33); break;
    default:
        gemm_ref(in[0], 48, 1, in[1], 1, 48, out[1], 40, 56, 48);
        for (int i = 0; i < 40; i++)
            for (int j = 0; j < 56; j++)
                out[0][i * 56 + j] = fmax(out[1][i * 56 + j] * 0.5 + in[2][j], 0.0) + in[3][i * 56 + j];
        break;
    }
}

static mc_status build_linear_odd(const op_case *c, mc_graph *g)
{
    mc_value x = mc_input(g, "x", c->dtype, SHAPE(70, 130));
    mc_value w = mc_param(g, "w", c->dtype, SHAPE(90, 130)), b = mc_param(g, "b", c->dtype, SHAPE(90));
    return OUTPUTS(g, mc_gelu(g, mc_linear(g, x, w, b)));
}

static void expect_linear_odd(const op_case *c, double *const *in, double **out)
{
    gemm_ref(in[0], 130, 1, in[1], 1, 130, out[0], 70, 90, 130);
    for (int i = 0; i < 70; i++)
        for (int j = 0; j < 90; j++)
            out[0][i * 90 + j] = gelu_ref(out[0][i * 90 + j] + in[2][j]);
}

/* ---- allreduce: in one program (one rank) the sum over ranks is its operand ------------------ */

static mc_status build_allreduce(const op_case *c, mc_graph *g)
{
    mc_dtype d = c->dtype;
    if (c->variant == 0) { /* a row-parallel linear's shape: allreduce(x @ w) + b, and of a leaf */
        mc_value x = mc_input(g, "x", d, SHAPE(24, 40));
        mc_value w = mc_param(g, "w", d, SHAPE(40, 36));
        mc_value b = mc_param(g, "b", d, SHAPE(36));
        mc_value y = mc_add(g, mc_allreduce(g, mc_matmul(g, x, w)), b);
        return OUTPUTS(g, y, mc_allreduce(g, x));
    }
    /* of a transposed view (stored before it is reduced), read by a transpose and an exp */
    mc_value x = mc_input(g, "x", d, SHAPE(33, 17));
    mc_value s = mc_allreduce(g, mc_transpose(g, x, NULL, 0));
    return OUTPUTS(g, mc_exp(g, mc_transpose(g, s, NULL, 0)), s);
}

static void expect_allreduce(const op_case *c, double *const *in, double **out)
{
    if (c->variant == 0) {
        gemm_ref(in[0], 40, 1, in[1], 36, 1, out[0], 24, 36, 40);
        for (int i = 0; i < 24; i++)
            for (int j = 0; j < 36; j++)
                out[0][i * 36 + j] += in[2][j];
        memcpy(out[1], in[0], sizeof(double) * 24 * 40);
        return;
    }
    for (int i = 0; i < 33; i++)
        for (int j = 0; j < 17; j++) {
            out[0][i * 17 + j] = exp(in[0][i * 17 + j]);
            out[1][j * 33 + i] = in[0][i * 17 + j];
        }
}

/* ---- reductions: long columns and rows, middle axes, over views ----------------------------- */

static mc_status build_long_reduce(const op_case *c, mc_graph *g)
{
    switch (c->variant) {
    case 0: return OUTPUTS(g, mc_sum(g, mc_input(g, "x", c->dtype, SHAPE(1000, 7)), AXES(0), false));
    case 1: {
        mc_value x = mc_input(g, "x", c->dtype, SHAPE(7, 1025));
        return OUTPUTS(g, mc_max(g, x, AXES(-1), true), mc_min(g, x, AXES(1), false));
    }
    case 2: return OUTPUTS(g, mc_mean(g, mc_input(g, "x", c->dtype, SHAPE(6, 300, 5)), AXES(1), false));
    case 3: { /* sum(expand(x)) over the expanded axis, plus sum(slice(y)) */
        mc_value x = mc_input(g, "x", c->dtype, SHAPE(1, 50)), y = mc_input(g, "y", c->dtype, SHAPE(60, 50));
        mc_value a = mc_sum(g, mc_expand(g, x, SHAPE(40, 50)), AXES(0), false);
        mc_value b = mc_sum(g, mc_slice(g, y, 0, 10, 50), AXES(0), false);
        return OUTPUTS(g, mc_add(g, a, b));
    }
    default: { /* i32 */
        mc_value x = mc_input(g, "x", MC_I32, SHAPE(300, 41));
        return OUTPUTS(g, mc_sum(g, x, AXES(1), false), mc_max(g, x, AXES(0), false));
    }
    }
}

static void expect_long_reduce(const op_case *c, double *const *in, double **out)
{
    switch (c->variant) {
    case 0:
        for (int j = 0; j < 7; j++) {
            out[0][j] = 0;
            for (int i = 0; i < 1000; i++)
                out[0][j] += in[0][i * 7 + j];
        }
        break;
    case 1:
        for (int i = 0; i < 7; i++) {
            double hi = -INFINITY, lo = INFINITY;
            for (int j = 0; j < 1025; j++) {
                hi = fmax(hi, in[0][i * 1025 + j]);
                lo = fmin(lo, in[0][i * 1025 + j]);
            }
            out[0][i] = hi;
            out[1][i] = lo;
        }
        break;
    case 2:
        for (int i = 0; i < 6; i++)
            for (int k = 0; k < 5; k++) {
                double s = 0;
                for (int j = 0; j < 300; j++)
                    s += in[0][(i * 300 + j) * 5 + k];
                out[0][i * 5 + k] = s / 300;
            }
        break;
    case 3:
        for (int j = 0; j < 50; j++) {
            double s = 40 * in[0][j];
            for (int i = 10; i < 50; i++)
                s += in[1][i * 50 + j];
            out[0][j] = s;
        }
        break;
    default:
        for (int i = 0; i < 300; i++) {
            out[0][i] = 0;
            for (int j = 0; j < 41; j++)
                out[0][i] += in[0][i * 41 + j]; /* 0..9 each: no wrap */
        }
        for (int j = 0; j < 41; j++) {
            out[1][j] = -1;
            for (int i = 0; i < 300; i++)
                out[1][j] = fmax(out[1][j], in[0][i * 41 + j]);
        }
        break;
    }
}

/* ---- data movement -------------------------------------------------------------------------- */

static mc_status build_movement(const op_case *c, mc_graph *g)
{
    mc_dtype d = c->dtype;
    switch (c->variant) {
    case 0: { /* concat of computed values, then a scale */
        mc_value a = mc_input(g, "a", d, SHAPE(30, 20)), b = mc_input(g, "b", d, SHAPE(30, 7));
        mc_value cat = mc_concat(g, (const mc_value[]){mc_exp(g, a), mc_neg(g, b)}, 2, 1);
        return OUTPUTS(g, mc_mul(g, cat, mc_scalar(g, 2.0, d)));
    }
    case 1: /* a large transpose, then + 1 */
        return OUTPUTS(g, mc_add(g, mc_transpose(g, mc_input(g, "x", d, SHAPE(65, 33)), NULL, 0),
                                 mc_scalar(g, 1.0, d)));
    case 2: { /* an input that is an output, and a value that is an output and an operand */
        mc_value x = mc_input(g, "x", d, SHAPE(17, 9));
        mc_value e = mc_exp(g, x);
        return OUTPUTS(g, x, e, mc_mul(g, e, x));
    }
    default: { /* a reshape between two computations (a view of an intermediate) */
        mc_value x = mc_input(g, "x", d, SHAPE(6, 35));
        mc_value t = mc_reshape(g, mc_sigmoid(g, x), SHAPE(3, 2, 35));
        return OUTPUTS(g, mc_sum(g, t, AXES(1), false));
    }
    }
}

static void expect_movement(const op_case *c, double *const *in, double **out)
{
    switch (c->variant) {
    case 0:
        for (int i = 0; i < 30; i++)
            for (int j = 0; j < 27; j++)
                out[0][i * 27 + j] = 2 * (j < 20 ? exp(in[0][i * 20 + j]) : -in[1][i * 7 + j - 20]);
        break;
    case 1:
        for (int i = 0; i < 65; i++)
            for (int j = 0; j < 33; j++)
                out[0][j * 65 + i] = in[0][i * 33 + j] + 1;
        break;
    case 2:
        for (int i = 0; i < 17 * 9; i++) {
            out[0][i] = in[0][i];
            out[1][i] = exp(in[0][i]);
            out[2][i] = exp(in[0][i]) * in[0][i];
        }
        break;
    default:
        for (int p = 0; p < 3; p++)
            for (int j = 0; j < 35; j++)
                out[0][p * 35 + j] = 1 / (1 + exp(-in[0][(2 * p) * 35 + j])) +
                                     1 / (1 + exp(-in[0][(2 * p + 1) * 35 + j]));
        break;
    }
}

/* ---- the table ------------------------------------------------------------------------------ */

#define CASE(name, family, dt, v) \
    {name, build_##family, expect_##family, NULL, MC_##dt, 0, NULL, NULL, NULL, NULL, v, false, 0, NULL}

static const op_case cases[] = {
    CASE("pointwise_257x129", pointwise, F32, 0), CASE("pointwise_257x129_f16", pointwise, F16, 0),
    CASE("pointwise_257x129_bf16", pointwise, BF16, 0),
    CASE("softmax_rows_1000", long_softmax, F32, 0), CASE("log_softmax_columns_700", long_softmax, F32, 1),
    CASE("softmax_rows_1000_bf16", long_softmax, BF16, 0),
    CASE("layernorm_769", wide_norm, F32, 0), CASE("layernorm_769_f16", wide_norm, F16, 0),
    CASE("rmsnorm_1024", wide_norm, F32, 1), CASE("rmsnorm_1024_bf16", wide_norm, BF16, 1),
    CASE("matmul_67x33x45", gemm, F32, 0), CASE("matmul_batched_3x70x65x31", gemm, F32, 1),
    CASE("matmul_transposed_a", gemm, F32, 2), CASE("matmul_transposed_b_epilogue", gemm, F32, 3),
    CASE("matmul_67x33x45_f16", gemm, F16, 0), CASE("matmul_transposed_b_epilogue_bf16", gemm, BF16, 3),
    CASE("linear_gelu_70x130x90", linear_odd, F32, 0), CASE("linear_gelu_70x130x90_bf16", linear_odd, BF16, 0),
    CASE("sum_columns_1000", long_reduce, F32, 0), CASE("max_min_rows_1025", long_reduce, F32, 1),
    CASE("mean_middle_axis_300", long_reduce, F32, 2), CASE("sum_over_expand_and_slice", long_reduce, F32, 3),
    CASE("sum_columns_1000_f16", long_reduce, F16, 0), CASE("i32_sum_and_max_300x41", long_reduce, I32, 4),
    CASE("concat_of_computed", movement, F32, 0), CASE("transpose_65x33", movement, F32, 1),
    CASE("output_is_input_and_operand", movement, F32, 2), CASE("reshape_of_intermediate", movement, F32, 3),
    CASE("concat_of_computed_bf16", movement, BF16, 0), CASE("transpose_65x33_i32", movement, I32, 1),
    CASE("allreduce_row_parallel_24x40x36", allreduce, F32, 0), CASE("allreduce_of_transpose", allreduce, F32, 1),
    CASE("allreduce_row_parallel_f16", allreduce, F16, 0), CASE("allreduce_of_transpose_bf16", allreduce, BF16, 1),

    /* The example workloads on every backend against the oracle (part b only). */
#define EXAMPLE(name) {"example_" name, NULL, NULL, NULL, 0, 0, NULL, NULL, NULL, NULL, 0, false, 0, "examples/" name ".graph"}
    EXAMPLE("pointwise"), EXAMPLE("softmax"), EXAMPLE("layernorm"), EXAMPLE("small_mlp"),
    EXAMPLE("mlp"), EXAMPLE("mlp_ln"), EXAMPLE("gpt2_block"),
};

int main(void)
{
    return ops_run_table("test_ops_graphs", cases, (int)(sizeof cases / sizeof cases[0]));
}
