/* Unit tests of the float64 oracle (ir/eval.c) and the seeded generator (runtime/random.c) on
 * graphs whose nodes are written out by hand, so they check the evaluator alone: no builder,
 * no type inference, no passes. Every expectation is computed here by a different route (an
 * explicit loop, a different formula, or by hand). tests/test_ops.c checks every operator again
 * through the public builders and on every backend. The last test checks that a program's
 * seeded inputs (mc_program_fill_random) are the ones mc_fill_random gives by name.
 */
#include "testlib.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "runtime/runtime.h"

/* The out-of-memory test asks for terabytes: under AddressSanitizer malloc must return NULL
 * then, as it does without it, instead of stopping the process. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

/* ---- a hand-built graph ------------------------------------------------------------------- */

typedef struct {
    mc_graph g;
    mc_node nodes[32];
    int32_t operands[32][4];
    int32_t outs[4];
} hand_graph;

static hand_graph *hg_new(void)
{
    hand_graph *h = calloc(1, sizeof *h);
    assert_non_null(h);
    h->g.nodes = h->nodes;
    h->g.cap = 32;
    h->g.outputs = h->outs;
    return h;
}

/* Append a node with the given type; operands -1-terminated through `in` (up to 4). */
static int hg_node(hand_graph *h, mc_op op, mc_dtype dtype, int rank, const int64_t *shape,
                   const int *in, int nin)
{
    int i = h->g.nnodes++;
    assert_true(i < 32 && nin <= 4);
    mc_node *n = &h->nodes[i];
    n->op = op;
    n->origin = op;
    n->dtype = dtype;
    n->rank = rank;
    if (rank)
        memcpy(n->shape, shape, sizeof(int64_t) * (size_t)rank);
    n->nin = nin;
    n->in = h->operands[i];
    for (int k = 0; k < nin; k++)
        n->in[k] = in[k];
    return i;
}

static int hg_input(hand_graph *h, const char *name, mc_dtype dtype, int rank, const int64_t *shape)
{
    int i = hg_node(h, MC_OP_INPUT, dtype, rank, shape, NULL, 0);
    h->nodes[i].name = name;
    return i;
}

static void hg_output(hand_graph *h, int v) { h->outs[h->g.noutputs++] = v; }

/* Evaluate with the given f32 inputs (per node index, NULL for others); one output back. */
static double *eval1(hand_graph *h, const void *const *inputs, bool exact)
{
    double *out[4] = {0};
    assert_int_equal(mc_graph_eval(&h->g, inputs, exact, out), MC_OK);
    assert_non_null(out[0]);
    return out[0];
}

static void fill(float *x, int n, uint64_t seed)
{
    mc_fill_random(x, MC_F32, n, seed, "t");
}

/* ---- tests -------------------------------------------------------------------------------- */

static void test_broadcast_binary(void **state)
{
    (void)state;
    hand_graph *h = hg_new();
    int64_t sa[] = {2, 1, 3}, sb[] = {4, 1}, so[] = {2, 4, 3};
    int a = hg_input(h, "a", MC_F32, 3, sa), b = hg_input(h, "b", MC_F32, 2, sb);
    int sub = hg_node(h, MC_OP_SUB, MC_F32, 3, so, (int[]){a, b}, 2);
    hg_output(h, sub);
    float av[6], bv[4];
    fill(av, 6, 1);
    fill(bv, 4, 2);
    const void *in[32] = {[0] = av, [1] = bv};
    double *r = eval1(h, in, true);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 3; k++)
                assert_true(r[(i * 4 + j) * 3 + k] == (double)av[i * 3 + k] - (double)bv[j]);
    free(r);
    free(h);
}

static void test_reduce_axes_keepdim_nan(void **state)
{
    (void)state;
    hand_graph *h = hg_new();
    int64_t sx[] = {2, 3, 4}, so[] = {1, 3, 1};
    int x = hg_input(h, "x", MC_F32, 3, sx);
    int s = hg_node(h, MC_OP_SUM, MC_F32, 3, so, (int[]){x}, 1);
    h->nodes[s].attr = (mc_attrs){.list = {0, 2}, .nlist = 2, .has_list = true, .keepdim = true};
    int m = hg_node(h, MC_OP_MAX, MC_F32, 0, NULL, (int[]){x}, 1); /* every axis */
    int mean = hg_node(h, MC_OP_MEAN, MC_F32, 1, (int64_t[]){2}, (int[]){x}, 1);
    h->nodes[mean].attr = (mc_attrs){.list = {1, 2}, .nlist = 2, .has_list = true};
    hg_output(h, s);
    hg_output(h, m);
    hg_output(h, mean);
    float xv[24];
    fill(xv, 24, 3);
    const void *in[32] = {[0] = xv};
    double *out[3];
    assert_int_equal(mc_graph_eval(&h->g, in, true, out), MC_OK);
    double want_max = -INFINITY;
    for (int j = 0; j < 3; j++) {
        double want = 0;
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 4; k++)
                want += xv[(i * 3 + j) * 4 + k];
        assert_true(fabs(out[0][j] - want) < 1e-12);
    }
    for (int i = 0; i < 24; i++)
        want_max = fmax(want_max, xv[i]);
    assert_true(out[1][0] == want_max);
    for (int i = 0; i < 2; i++) {
        double want = 0;
        for (int k = 0; k < 12; k++)
            want += xv[i * 12 + k];
        assert_true(fabs(out[2][i] - want / 12) < 1e-12);
    }
    for (int i = 0; i < 3; i++)
        free(out[i]);
    /* A NaN anywhere makes max NaN. */
    xv[17] = NAN;
    h->g.noutputs = 0;
    hg_output(h, m);
    double *r = eval1(h, in, true);
    assert_true(isnan(r[0]));
    free(r);
    free(h);
}

static void test_softmax_against_logsumexp(void **state)
{
    (void)state;
    hand_graph *h = hg_new();
    int64_t sx[] = {3, 5};
    int x = hg_input(h, "x", MC_F32, 2, sx);
    int sm = hg_node(h, MC_OP_SOFTMAX, MC_F32, 2, sx, (int[]){x}, 1);
    h->nodes[sm].attr.axis = 0;
    int lsm = hg_node(h, MC_OP_LOG_SOFTMAX, MC_F32, 2, sx, (int[]){x}, 1);
    h->nodes[lsm].attr.axis = 1;
    hg_output(h, sm);
    hg_output(h, lsm);
    float xv[15];
    fill(xv, 15, 4);
    xv[0] = 80; /* large values: exp would overflow f32 without the max shift */
    const void *in[32] = {[0] = xv};
    double *out[2];
    assert_int_equal(mc_graph_eval(&h->g, in, true, out), MC_OK);
    for (int j = 0; j < 5; j++) { /* columns: softmax over axis 0 */
        double lse = 0;
        for (int i = 0; i < 3; i++)
            lse += exp(xv[i * 5 + j] - 80.0);
        lse = 80.0 + log(lse);
        for (int i = 0; i < 3; i++)
            assert_true(fabs(out[0][i * 5 + j] - exp(xv[i * 5 + j] - lse)) < 1e-14);
    }
    for (int i = 0; i < 3; i++) { /* rows: log_softmax over axis 1 */
        double lse = 0;
        for (int j = 0; j < 5; j++)
            lse += exp(xv[i * 5 + j] - 80.0);
        lse = 80.0 + log(lse);
        for (int j = 0; j < 5; j++)
            assert_true(fabs(out[1][i * 5 + j] - (xv[i * 5 + j] - lse)) < 1e-12);
    }
    free(out[0]);
    free(out[1]);
    free(h);
}

static void test_layernorm_rmsnorm(void **state)
{
    (void)state;
    hand_graph *h = hg_new();
    int64_t sx[] = {4, 6}, sw[] = {6};
    int x = hg_input(h, "x", MC_F32, 2, sx), w = hg_input(h, "w", MC_F32, 1, sw),
        b = hg_input(h, "b", MC_F32, 1, sw);
    int ln = hg_node(h, MC_OP_LAYERNORM, MC_F32, 2, sx, (int[]){x, w, b}, 3);
    h->nodes[ln].attr.value = 1e-5;
    int rms = hg_node(h, MC_OP_RMSNORM, MC_F32, 2, sx, (int[]){x, w}, 2);
    h->nodes[rms].attr.value = 1e-6;
    hg_output(h, ln);
    hg_output(h, rms);
    float xv[24], wv[6], bv[6];
    fill(xv, 24, 5);
    fill(wv, 6, 6);
    fill(bv, 6, 7);
    const void *in[32] = {[0] = xv, [1] = wv, [2] = bv};
    double *out[2];
    assert_int_equal(mc_graph_eval(&h->g, in, true, out), MC_OK);
    for (int r = 0; r < 4; r++) {
        /* Var = E[x^2] - E[x]^2 (a different formula from the oracle's two passes). */
        double s = 0, s2 = 0;
        for (int j = 0; j < 6; j++) {
            s += xv[r * 6 + j];
            s2 += (double)xv[r * 6 + j] * xv[r * 6 + j];
        }
        double mean = s / 6, var = s2 / 6 - mean * mean;
        for (int j = 0; j < 6; j++) {
            double want = (xv[r * 6 + j] - mean) / sqrt(var + 1e-5) * wv[j] + bv[j];
            assert_true(fabs(out[0][r * 6 + j] - want) < 1e-9);
            double want_rms = xv[r * 6 + j] / sqrt(s2 / 6 + 1e-6) * wv[j];
            assert_true(fabs(out[1][r * 6 + j] - want_rms) < 1e-12);
        }
    }
    free(out[0]);
    free(out[1]);
    free(h);
}

static void test_matmul_batch_broadcast_and_linear(void **state)
{
    (void)state;
    hand_graph *h = hg_new();
    int64_t sa[] = {2, 1, 3, 4}, sb[] = {3, 4, 5}, so[] = {2, 3, 3, 5};
    int a = hg_input(h, "a", MC_F32, 4, sa), b = hg_input(h, "b", MC_F32, 3, sb);
    int mm = hg_node(h, MC_OP_MATMUL, MC_F32, 4, so, (int[]){a, b}, 2);
    int64_t sw[] = {5, 4}, sbias[] = {5}, sl[] = {2, 1, 3, 5};
    int w = hg_input(h, "w", MC_F32, 2, sw), bias = hg_input(h, "bias", MC_F32, 1, sbias);
    int lin = hg_node(h, MC_OP_LINEAR, MC_F32, 4, sl, (int[]){a, w, bias}, 3);
    hg_output(h, mm);
    hg_output(h, lin);
    float av[24], bv[60], wv[20], biasv[5];
    fill(av, 24, 8);
    fill(bv, 60, 9);
    fill(wv, 20, 10);
    fill(biasv, 5, 11);
    const void *in[32] = {[0] = av, [1] = bv, [3] = wv, [4] = biasv};
    double *out[2];
    assert_int_equal(mc_graph_eval(&h->g, in, true, out), MC_OK);
    for (int p = 0; p < 2; p++)
        for (int q = 0; q < 3; q++)
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 5; j++) {
                    double s = 0;
                    for (int k = 0; k < 4; k++)
                        s += (double)av[(p * 3 + i) * 4 + k] * bv[(q * 4 + k) * 5 + j];
                    assert_true(fabs(out[0][((p * 3 + q) * 3 + i) * 5 + j] - s) < 1e-12);
                }
    for (int r = 0; r < 6; r++)
        for (int o = 0; o < 5; o++) {
            double s = biasv[o];
            for (int k = 0; k < 4; k++)
                s += (double)av[r * 4 + k] * wv[o * 4 + k];
            assert_true(fabs(out[1][r * 5 + o] - s) < 1e-12);
        }
    free(out[0]);
    free(out[1]);
    free(h);
}

static void test_i32_and_cast_semantics(void **state)
{
    (void)state;
    hand_graph *h = hg_new();
    int64_t s[] = {6};
    int a = hg_input(h, "a", MC_I32, 1, s), b = hg_input(h, "b", MC_I32, 1, s);
    int d = hg_node(h, MC_OP_DIV, MC_I32, 1, s, (int[]){a, b}, 2);
    int m = hg_node(h, MC_OP_MUL, MC_I32, 1, s, (int[]){a, b}, 2);
    int f = hg_input(h, "f", MC_F32, 1, s);
    int c = hg_node(h, MC_OP_CAST, MC_I32, 1, s, (int[]){f}, 1);
    h->nodes[c].attr.dtype = MC_I32;
    int cb = hg_node(h, MC_OP_CAST, MC_BOOL, 1, s, (int[]){f}, 1);
    h->nodes[cb].attr.dtype = MC_BOOL;
    hg_output(h, d);
    hg_output(h, m);
    hg_output(h, c);
    hg_output(h, cb);
    int32_t av[] = {7, -7, 7, -7, 5, INT32_MIN}, bv[] = {2, 2, -2, 0, 0, -1};
    float fv[] = {2.7f, -2.7f, NAN, 3e9f, -3e9f, 0.0f};
    const void *in[32] = {[0] = av, [1] = bv, [4] = fv};
    double *out[4];
    assert_int_equal(mc_graph_eval(&h->g, in, true, out), MC_OK);
    double want_div[] = {3, -3, -3, 0, 0, INT32_MIN}; /* toward zero; /0 -> 0; wraps */
    double want_mul[] = {14, -14, -14, 0, 0, INT32_MIN};
    double want_cast[] = {2, -2, 0, INT32_MAX, INT32_MIN, 0};
    double want_bool[] = {1, 1, 1, 1, 1, 0};
    for (int i = 0; i < 6; i++) {
        assert_true(out[0][i] == want_div[i]);
        assert_true(out[1][i] == want_mul[i]);
        assert_true(out[2][i] == want_cast[i]);
        assert_true(out[3][i] == want_bool[i]);
    }
    for (int i = 0; i < 4; i++)
        free(out[i]);
    free(h);
}

static void test_rounding_exact_vs_stored(void **state)
{
    (void)state;
    hand_graph *h = hg_new();
    int64_t s[] = {3};
    int x = hg_input(h, "x", MC_F16, 1, s);
    int e = hg_node(h, MC_OP_EXP, MC_F16, 1, s, (int[]){x}, 1);
    int t = hg_node(h, MC_OP_MUL, MC_F16, 1, s, (int[]){e, e}, 2);
    hg_output(h, t);
    uint16_t xv[3];
    mc_fill_random(xv, MC_F16, 3, 12, "x");
    const void *in[32] = {[0] = xv};
    double *exact = eval1(h, in, true), *stored = eval1(h, in, false);
    for (int i = 0; i < 3; i++) {
        double xd = mc_f16_to_double(xv[i]);
        assert_true(fabs(exact[i] - exp(2 * xd)) < 1e-12 * exp(2 * xd));
        double ed = mc_round_to_dtype(exp(xd), MC_F16);
        assert_true(stored[i] == mc_round_to_dtype(ed * ed, MC_F16));
    }
    free(exact);
    free(stored);
    free(h);
}

static void test_missing_input_and_dead_nodes(void **state)
{
    (void)state;
    hand_graph *h = hg_new();
    int64_t s[] = {2};
    int x = hg_input(h, "x", MC_F32, 1, s), y = hg_input(h, "y", MC_F32, 1, s);
    hg_node(h, MC_OP_NEG, MC_F32, 1, s, (int[]){y}, 1); /* dead: y need not be given */
    int r = hg_node(h, MC_OP_RELU, MC_F32, 1, s, (int[]){x}, 1);
    hg_output(h, r);
    float xv[] = {-1.5f, NAN};
    const void *in[32] = {[0] = xv};
    double *v = eval1(h, in, true);
    assert_true(v[0] == 0 && isnan(v[1]));
    free(v);
    double *out[1] = {0};
    const void *none[32] = {0};
    assert_int_equal(mc_graph_eval(&h->g, none, true, out), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "'x'"));
    assert_null(out[0]);
    free(h);
}

static void test_sizes_and_failures(void **state)
{
    (void)state;
    double *out[1] = {0};
    /* A graph with no outputs, and one whose builder failed. */
    hand_graph *h = hg_new();
    int64_t s[] = {2};
    int x = hg_input(h, "x", MC_F32, 1, s);
    assert_int_equal(mc_graph_eval(&h->g, NULL, true, out), MC_ERR_INPUT);
    hg_output(h, x);
    h->g.failed = true;
    assert_int_equal(mc_graph_eval(&h->g, NULL, true, out), MC_ERR_INPUT);
    free(h);
    /* An element count that overflows: refused before anything is allocated. */
    h = hg_new();
    int64_t huge[] = {INT64_C(1) << 40, INT64_C(1) << 40};
    int f = hg_node(h, MC_OP_FULL, MC_F32, 2, huge, NULL, 0);
    hg_output(h, f);
    assert_int_equal(mc_graph_eval(&h->g, NULL, true, out), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "too large"));
    assert_null(out[0]);
    free(h);
    /* A count that fits in size_t but in no address space (2^59 doubles = 4 EiB, so malloc
     * fails even where memory is overcommitted): MC_ERR_SYSTEM, and what was allocated before
     * is freed (LeakSanitizer checks). */
    h = hg_new();
    int64_t big[] = {INT64_C(1) << 59};
    float xv[2] = {1, 2};
    int small = hg_input(h, "x", MC_F32, 1, s);
    int e = hg_node(h, MC_OP_EXP, MC_F32, 1, s, (int[]){small}, 1);
    int b = hg_node(h, MC_OP_FULL, MC_F32, 1, big, NULL, 0);
    hg_output(h, e);
    hg_output(h, b);
    const void *in[32] = {[0] = xv};
    double *outs[2] = {0};
    assert_int_equal(mc_graph_eval(&h->g, in, true, outs), MC_ERR_SYSTEM);
    assert_null(outs[0]);
    assert_null(outs[1]);
    /* 2^38 doubles (2 TiB): an address space holds it, no machine's memory here does; the
     * check against MemAvailable refuses it before malloc could overcommit it. */
    h->nodes[b].shape[0] = INT64_C(1) << 38;
    assert_int_equal(mc_graph_eval(&h->g, in, true, outs), MC_ERR_SYSTEM);
    assert_non_null(strstr(mc_error_message(), "out of memory"));
    free(h);
}

static void test_fill_random(void **state)
{
    (void)state;
    enum { N = 4096 };
    float a[N], b[N], c[N];
    mc_fill_random(a, MC_F32, N, 0, "x");
    mc_fill_random(b, MC_F32, N, 0, "x");
    mc_fill_random(c, MC_F32, N, 0, "y");
    assert_memory_equal(a, b, sizeof a);
    int same = 0, neg = 0;
    for (int i = 0; i < N; i++) {
        assert_true(a[i] >= -1.0f && a[i] < 1.0f);
        same += a[i] == c[i];
        neg += a[i] < 0;
    }
    assert_true(same < 4);
    assert_true(neg > N / 2 - 200 && neg < N / 2 + 200);
    mc_fill_random(c, MC_F32, N, 1, "x");
    assert_memory_not_equal(a, c, sizeof a);
    uint16_t hb[N];
    mc_fill_random(hb, MC_BF16, N, 3, "w");
    for (int i = 0; i < N; i++) {
        double v = mc_bf16_to_double(hb[i]);
        assert_true(v >= -1.0 && v < 1.0);
    }
    int32_t iv[N];
    int counts[10] = {0};
    mc_fill_random(iv, MC_I32, N, 0, "i");
    for (int i = 0; i < N; i++) {
        assert_true(iv[i] >= 0 && iv[i] <= 9);
        counts[iv[i]]++;
    }
    for (int k = 0; k < 10; k++)
        assert_true(counts[k] > N / 10 - 120 && counts[k] < N / 10 + 120);
    uint8_t bv[N];
    int ones = 0;
    mc_fill_random(bv, MC_BOOL, N, 0, "b");
    for (int i = 0; i < N; i++) {
        assert_true(bv[i] <= 1);
        ones += bv[i];
    }
    assert_true(ones > N / 2 - 200 && ones < N / 2 + 200);
    double t0 = mc_now_ms(), t1 = mc_now_ms();
    assert_true(t1 >= t0 && t0 > 0);
}

/* The program's generator (mc_program_fill_random, --seed) gives every input and param the
 * values mc_fill_random gives it by name: what the oracle is fed in the conformance tests. */
static void test_program_fill_matches_by_name(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("fill");
    assert_non_null(g);
    const mc_dtype dtypes[4] = {MC_F32, MC_BF16, MC_I32, MC_BOOL};
    const char *names[4] = {"x", "layer.w", "i", "mask"};
    mc_value v[4];
    for (int k = 0; k < 4; k++)
        v[k] = k == 1 ? mc_param(g, names[k], dtypes[k], (int64_t[]){3, 7}, 2)
                      : mc_input(g, names[k], dtypes[k], (int64_t[]){3, 7}, 2);
    mc_value outs[4] = {mc_neg(g, v[0]), mc_cast(g, v[1], MC_F32), mc_neg(g, v[2]),
                        mc_cast(g, v[3], MC_I32)};
    assert_int_equal(mc_graph_set_outputs(g, outs, 4), MC_OK);
    mc_options opt = mc_options_default();
    opt.backend = MC_BACKEND_REF;
    opt.quiet = true;
    mc_program *p;
    assert_int_equal(mc_program_compile(g, &opt, &p), MC_OK);
    assert_int_equal(mc_program_fill_random(p, 42), MC_OK);
    assert_int_equal(mc_program_run(p), MC_OK);
    for (int k = 0; k < 4; k++) {
        unsigned char data[21 * 4];
        mc_fill_random(data, dtypes[k], 21, 42, names[k]);
        mc_tensor t;
        assert_int_equal(mc_program_output(p, k, &t), MC_OK);
        for (int e = 0; e < 21; e++) {
            double x = mc_load_element(data, dtypes[k], e);
            double want = (k == 0 || k == 2) ? -x : x;
            assert_true(mc_load_element(t.data, t.dtype, e) == want);
        }
    }
    mc_program_free(p);
    mc_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_broadcast_binary),
        cmocka_unit_test(test_reduce_axes_keepdim_nan),
        cmocka_unit_test(test_softmax_against_logsumexp),
        cmocka_unit_test(test_layernorm_rmsnorm),
        cmocka_unit_test(test_matmul_batch_broadcast_and_linear),
        cmocka_unit_test(test_i32_and_cast_semantics),
        cmocka_unit_test(test_rounding_exact_vs_stored),
        cmocka_unit_test(test_missing_input_and_dead_nodes),
        cmocka_unit_test(test_sizes_and_failures),
        cmocka_unit_test(test_fill_random),
        cmocka_unit_test(test_program_fill_matches_by_name),
    };
    return mc_test_run(tests);
}
