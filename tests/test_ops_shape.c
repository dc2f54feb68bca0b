/* Operator conformance, part 2: matmul and linear, the shape operators (transpose, reshape,
 * expand, slice, concat), the creation operators (iota, full) and small whole graphs (an MLP,
 * causal attention, integer chains, softmax and variance written with primitives). Same
 * harness as tests/test_ops.c (tests/ops_conformance.h): every expectation here is computed by
 * explicit loops written for the case's shapes.
 */
#include "ops_conformance.h"

/* ---- matmul: a [.., M, K] @ b [.., K, N], batch dims broadcast ------------------------------ */

typedef struct {
    int64_t a[4], b[4];
    int ra, rb;
    mc_dtype dtype;
} matmul_spec;

static const matmul_spec matmul_specs[] = {
    {{3, 4}, {4, 5}, 2, 2, MC_F32},
    {{2, 3, 4}, {2, 4, 5}, 3, 3, MC_F32},
    {{2, 1, 3, 4}, {3, 4, 5}, 4, 3, MC_F32},
    {{3, 4}, {2, 4, 5}, 2, 3, MC_F32},
    {{4, 8}, {8, 3}, 2, 2, MC_F16},
    {{2, 4, 8}, {8, 3}, 3, 2, MC_BF16},
    {{1, 3, 4}, {2, 4, 2}, 3, 3, MC_F32},
    {{5, 1, 7}, {7, 1}, 3, 2, MC_F32}, /* M = 1, N = 1 */
};

static mc_status build_matmul(const op_case *c, mc_graph *g)
{
    const matmul_spec *s = &matmul_specs[c->variant];
    mc_value a = mc_input(g, "a", s->dtype, s->a, s->ra);
    mc_value b = mc_input(g, "b", s->dtype, s->b, s->rb);
    return OUTPUTS(g, mc_matmul(g, a, b));
}

static void expect_matmul(const op_case *c, double *const *in, double **out)
{
    const matmul_spec *s = &matmul_specs[c->variant];
    /* Batch dims padded on the left to two. */
    int64_t ab[2] = {1, 1}, bb[2] = {1, 1}, ob[2];
    for (int k = 0; k < s->ra - 2; k++)
        ab[2 - (s->ra - 2) + k] = s->a[k];
    for (int k = 0; k < s->rb - 2; k++)
        bb[2 - (s->rb - 2) + k] = s->b[k];
    for (int k = 0; k < 2; k++)
        ob[k] = ab[k] > bb[k] ? ab[k] : bb[k];
    int64_t M = s->a[s->ra - 2], K = s->a[s->ra - 1], N = s->b[s->rb - 1];
    for (int64_t p = 0; p < ob[0]; p++)
        for (int64_t q = 0; q < ob[1]; q++) {
            int64_t abatch = (ab[0] == 1 ? 0 : p) * ab[1] + (ab[1] == 1 ? 0 : q);
            int64_t bbatch = (bb[0] == 1 ? 0 : p) * bb[1] + (bb[1] == 1 ? 0 : q);
            const double *A = in[0] + abatch * M * K, *B = in[1] + bbatch * K * N;
            double *O = out[0] + (p * ob[1] + q) * M * N;
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    double acc = 0;
                    for (int64_t k = K - 1; k >= 0; k--) /* the other order */
                        acc += A[i * K + k] * B[k * N + j];
                    O[i * N + j] = acc;
                }
        }
}

/* ---- linear: x [.., IN] @ w [OUT, IN]^T (+ b) ----------------------------------------------- */

static mc_status build_linear(const op_case *c, mc_graph *g)
{
    mc_value x = c->variant == 2 ? mc_input(g, "x", c->dtype, SHAPE(2, 2, 2, 4))
                                 : mc_input(g, "x", c->dtype, SHAPE(2, 3, 4));
    mc_value w = mc_param(g, "w", c->dtype, SHAPE(5, 4));
    mc_value b = c->variant == 1 ? MC_NONE : mc_param(g, "b", c->dtype, SHAPE(5));
    return OUTPUTS(g, mc_linear(g, x, w, b));
}

static void expect_linear(const op_case *c, double *const *in, double **out)
{
    int rows = c->variant == 2 ? 8 : 6;
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < 5; o++) {
            double acc = c->variant == 1 ? 0 : in[2][o];
            for (int k = 0; k < 4; k++)
                acc += in[0][r * 4 + k] * in[1][o * 4 + k];
            out[0][r * 5 + o] = acc;
        }
}

/* ---- transpose ------------------------------------------------------------------------------ */

static mc_status build_transpose(const op_case *c, mc_graph *g)
{
    if (c->variant == 3) {
        mc_value x = mc_input(g, "x", c->dtype, SHAPE(3, 5));
        return OUTPUTS(g, mc_transpose(g, x, NULL, 0));
    }
    mc_value x = mc_input(g, "x", c->dtype, SHAPE(2, 3, 4));
    switch (c->variant) {
    case 0: return OUTPUTS(g, mc_transpose(g, x, NULL, 0));
    case 1: return OUTPUTS(g, mc_transpose(g, x, AXES(0, 2, 1)));
    default: return OUTPUTS(g, mc_transpose(g, x, AXES(2, 0, 1)));
    }
}

static void expect_transpose(const op_case *c, double *const *in, double **out)
{
    if (c->variant == 3) {
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 5; j++)
                out[0][j * 3 + i] = in[0][i * 5 + j];
        return;
    }
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++) {
                double v = in[0][(i * 3 + j) * 4 + k];
                switch (c->variant) {
                case 0: out[0][(k * 3 + j) * 2 + i] = v; break; /* [4,3,2] */
                case 1: out[0][(i * 4 + k) * 3 + j] = v; break; /* [2,4,3] */
                default: out[0][(k * 2 + i) * 3 + j] = v; break; /* [4,2,3] */
                }
            }
}

/* ---- reshape -------------------------------------------------------------------------------- */

static mc_status build_reshape(const op_case *c, mc_graph *g)
{
    mc_value x = mc_input(g, "x", c->dtype, SHAPE(2, 3, 4));
    switch (c->variant) {
    case 0: return OUTPUTS(g, mc_reshape(g, x, SHAPE(4, -1)));
    case 1: return OUTPUTS(g, mc_reshape(g, x, SHAPE(24)));
    case 2: return OUTPUTS(g, mc_reshape(g, mc_reshape(g, x, SHAPE(6, 4)), SHAPE(2, -1, 1, 4)));
    default: /* a reshape of a transposed value reads it in its new order */
        return OUTPUTS(g, mc_reshape(g, mc_transpose(g, x, AXES(1, 0, 2)), SHAPE(3, 8)));
    }
}

static void expect_reshape(const op_case *c, double *const *in, double **out)
{
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++) {
                int src = (i * 3 + j) * 4 + k;
                out[0][c->variant == 3 ? j * 8 + i * 4 + k : src] = in[0][src];
            }
}

/* ---- expand --------------------------------------------------------------------------------- */

static mc_status build_expand(const op_case *c, mc_graph *g)
{
    switch (c->variant) {
    case 0: return OUTPUTS(g, mc_expand(g, mc_input(g, "x", c->dtype, SHAPE(3, 1)), SHAPE(2, 3, 4)));
    case 1: return OUTPUTS(g, mc_expand(g, mc_input(g, "x", c->dtype, SHAPE(4)), SHAPE(3, 4)));
    case 2: return OUTPUTS(g, mc_expand(g, mc_input(g, "x", c->dtype, SHAPE(1, 1)), SHAPE(2, 5)));
    default: return OUTPUTS(g, mc_expand(g, mc_input(g, "x", c->dtype, NULL, 0), SHAPE(3)));
    }
}

static void expect_expand(const op_case *c, double *const *in, double **out)
{
    switch (c->variant) {
    case 0:
        for (int i = 0; i < 24; i++)
            out[0][i] = in[0][(i / 4) % 3];
        break;
    case 1:
        for (int i = 0; i < 12; i++)
            out[0][i] = in[0][i % 4];
        break;
    case 2:
        for (int i = 0; i < 10; i++)
            out[0][i] = in[0][0];
        break;
    default:
        for (int i = 0; i < 3; i++)
            out[0][i] = in[0][0];
        break;
    }
}

/* ---- slice of x [5, 6] ---------------------------------------------------------------------- */

typedef struct {
    int axis;
    int64_t start, end;
    int r0, r1, c0, c1; /* the rows and columns it keeps, worked out by hand */
} slice_spec;

static const slice_spec slice_specs[] = {
    {0, 1, 4, 1, 4, 0, 6},
    {-1, -4, -1, 0, 5, 2, 5},
    {1, 2, 100, 0, 5, 2, 6},     /* end clamped */
    {0, -100, 2, 0, 2, 0, 6},    /* start clamped */
    {1, 3, MC_END, 0, 5, 3, 6},
    {-2, -1, MC_END, 4, 5, 0, 6}, /* the last row */
    {0, 1, 5, 2, 4, 0, 6},       /* then rows 1..3 of that: see build_slice */
};

static mc_status build_slice(const op_case *c, mc_graph *g)
{
    const slice_spec *s = &slice_specs[c->variant];
    mc_value x = mc_input(g, "x", c->dtype, SHAPE(5, 6));
    mc_value y = mc_slice(g, x, s->axis, s->start, s->end);
    if (c->variant == 6)
        y = mc_slice(g, y, 0, 1, 3);
    return OUTPUTS(g, y);
}

static void expect_slice(const op_case *c, double *const *in, double **out)
{
    const slice_spec *s = &slice_specs[c->variant];
    int n = 0;
    for (int i = s->r0; i < s->r1; i++)
        for (int j = s->c0; j < s->c1; j++)
            out[0][n++] = in[0][i * 6 + j];
}

/* ---- slice with a step, of x [5, 6]: the indices it keeps listed by hand ------------------------ */

typedef struct {
    int axis;
    int64_t start, end, step;
    int nrows, rows[5], ncols, cols[6];
} step_spec;

static const step_spec step_specs[] = {
    {1, MC_END, MC_END, -1, 5, {0, 1, 2, 3, 4}, 6, {5, 4, 3, 2, 1, 0}}, /* reversed */
    {0, MC_END, MC_END, 2, 3, {0, 2, 4}, 6, {0, 1, 2, 3, 4, 5}},
    {1, -2, 0, -2, 5, {0, 1, 2, 3, 4}, 2, {4, 2}},                      /* end excluded */
    {0, 3, -100, -1, 4, {3, 2, 1, 0}, 6, {0, 1, 2, 3, 4, 5}},           /* end clamped */
    {1, 1, 100, 3, 5, {0, 1, 2, 3, 4}, 2, {1, 4}},
    {-1, 10, MC_END, -4, 5, {0, 1, 2, 3, 4}, 2, {5, 1}},                /* start clamped */
    {0, MC_END, MC_END, -1, 5, {4, 3, 2, 1, 0}, 3, {1, 3, 5}},          /* then columns 1::2 */
};

static mc_status build_slice_step(const op_case *c, mc_graph *g)
{
    mc_value x = mc_input(g, "x", c->dtype, SHAPE(5, 6));
    if (c->variant == 7) /* a reversal fused into pointwise work: x[:, ::-1] + x */
        return OUTPUTS(g, mc_add(g, mc_slice_step(g, x, 1, MC_END, MC_END, -1), x));
    const step_spec *s = &step_specs[c->variant];
    mc_value y = mc_slice_step(g, x, s->axis, s->start, s->end, s->step);
    if (c->variant == 6)
        y = mc_slice_step(g, y, 1, 1, MC_END, 2);
    return OUTPUTS(g, y);
}

static void expect_slice_step(const op_case *c, double *const *in, double **out)
{
    if (c->variant == 7) {
        for (int i = 0; i < 5; i++)
            for (int j = 0; j < 6; j++)
                out[0][i * 6 + j] = in[0][i * 6 + 5 - j] + in[0][i * 6 + j];
        return;
    }
    const step_spec *s = &step_specs[c->variant];
    int n = 0;
    for (int i = 0; i < s->nrows; i++)
        for (int j = 0; j < s->ncols; j++)
            out[0][n++] = in[0][s->rows[i] * 6 + s->cols[j]];
}

/* ---- convolution, pooling, pad, batchnorm ---------------------------------------------------- */

typedef struct {
    int kind;                 /* 0 conv, 1 maxpool, 2 avgpool */
    int sr;                   /* spatial axes */
    int64_t n, c, s0, s1;     /* x [n, c, s0(, s1)] */
    int64_t co, k0, k1;       /* conv: w [co, c/groups, k0(, k1)]; pools: the kernel */
    int64_t stride[2], padding[2], dilation[2], groups;
    bool bias, relu;
    int residual;             /* conv: 1 adds an input r of the output's shape before the relu,
                                 2 one of [O1] (broadcast over the rest) */
} window_spec;

static const window_spec window_specs[] = {
    {0, 2, 2, 4, 7, 6, 6, 3, 3, {2, 1}, {1, 1}, {1, 2}, 2, true, true, 0},    /* grouped, strided, dilated */
    {0, 1, 2, 3, 9, 1, 5, 2, 1, {1, 0}, {0, 0}, {1, 1}, 1, false, false, 0},  /* 1-D, no bias */
    {0, 2, 1, 4, 5, 5, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 4, true, false, 0},   /* depthwise */
    {0, 2, 2, 5, 4, 3, 3, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true, true, 0},    /* 1x1 */
    {1, 2, 2, 3, 7, 6, 0, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, false, false, 0},  /* maxpool 3x3 s2 p1 */
    {1, 1, 2, 3, 8, 1, 0, 2, 1, {2, 0}, {0, 0}, {1, 1}, 1, false, false, 0},  /* maxpool 1-D */
    {2, 2, 2, 3, 7, 6, 0, 3, 2, {2, 1}, {1, 1}, {1, 1}, 1, false, false, 0},  /* avgpool, padding left out */
    {2, 1, 2, 3, 9, 1, 0, 3, 1, {1, 0}, {1, 0}, {1, 1}, 1, false, false, 0},  /* avgpool 1-D */
    /* ungrouped, strided, padded, dilated, two images: on the CPU a GEMM that packs its B from
     * the padded x (the im2col copies skipped, backends/cpu/llvm.h llvm_im2col) */
    {0, 2, 2, 3, 9, 20, 5, 3, 2, {2, 1}, {1, 2}, {2, 1}, 1, true, true, 0},
    /* ResNet's block end, relu(conv(x, w, b) + r): one GEMM with the bias, the residual add and
     * the relu in its epilogue (passes/simplify.c computes them in the GEMM's [N, C, H*W]) */
    {0, 2, 2, 3, 6, 5, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, true, 1},
    /* r of [O1] varies along W only: not readable at the GEMM's merged H*W, a kernel of its own */
    {0, 2, 1, 3, 6, 5, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, true, 2},
    /* In f16/bf16 the cuda backend runs these as its implicit GEMM (kir_gemm.conv; ref with
     * MINIC_REF_IMPLICIT_CONV=1), so they cross its tiles: C_out past a 64-row tile, pixels
     * (batch included) past a 128-wide one, K in several 32-deep steps, the last one partial.
     * 11: 3x3 padded, K = 144 (weights in 16-byte chunks), bias, residual, relu */
    {0, 2, 2, 16, 13, 11, 70, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, true, 1},
    /* 12: stride 2, K = 180 (weights element by element), three images */
    {0, 2, 3, 20, 15, 14, 40, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true, true, 0},
    /* 13: dilation 2, padding 2, no relu */
    {0, 2, 2, 8, 12, 12, 24, 3, 3, {1, 1}, {2, 2}, {2, 2}, 1, true, false, 0},
    /* 14: ResNet's 1x1 stride-2 downsample, no bias */
    {0, 2, 2, 24, 10, 10, 48, 1, 1, {2, 2}, {0, 0}, {1, 1}, 1, false, false, 0},
    /* 15: the 7x7 stride-2 stem, padding 3, C = 3 (K = 147) */
    {0, 2, 2, 3, 23, 23, 16, 7, 7, {2, 2}, {3, 3}, {1, 1}, 1, true, true, 0},
    /* 16: 1-D, stride 2, padding 2 */
    {0, 1, 2, 8, 30, 1, 12, 5, 1, {2, 0}, {2, 0}, {1, 1}, 1, true, true, 0},
    /* 17: asymmetric window and strides, padding along H only, residual */
    {0, 2, 2, 8, 9, 17, 20, 3, 5, {2, 1}, {1, 0}, {1, 3}, 1, true, true, 1},
    /* 18: an even number of output pixels (the epilogue's pairs), residual, two pixel tiles */
    {0, 2, 2, 16, 12, 10, 70, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, true, 1},
    /* 19: K = 576 (18 K tiles) over few tiles: on cuda K split in two (the partial sums added
     * up in f32 by the tile's last CTA), residual */
    {0, 2, 2, 64, 9, 9, 40, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, true, 1},
    /* C a multiple of 32, as MINIC_CUDA_CONV_KCHUNK=1 takes K by chunks of 32 channels (one
     * window position a K tile): 20: stride 2, padded, three images, C_out past a 64-row tile;
     * 21: dilated with padding 2, residual; (19 and 14-like 1x1: C = 64) */
    {0, 2, 3, 32, 11, 9, 72, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true, true, 0},
    {0, 2, 2, 64, 10, 9, 24, 3, 3, {1, 1}, {2, 2}, {2, 2}, 1, false, true, 1},
    /* 22: 1x1 stride 2 over 96 channels (three chunks), no bias */
    {0, 2, 2, 96, 9, 10, 40, 1, 1, {2, 2}, {0, 0}, {1, 1}, 1, false, false, 0},
    /* stride 1 along W, W even and OW a multiple of 8 (23) or 4 (24), as MINIC_CUDA_CONV_BROW=1
     * reads rows of 8 or 4 pixels as 4-byte words (the window's first column odd and even, the
     * words past the row's ends off): 23: residual, padded; 24: three images, padding 2 and
     * dilation 2 along H only */
    {0, 2, 2, 64, 10, 16, 72, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, true, 1},
    {0, 2, 3, 32, 11, 12, 40, 3, 3, {1, 1}, {2, 1}, {2, 1}, 1, true, true, 0},
    /* 25: the stem again with rows of 22 outputs, as many as a vector's 16 lanes (the cpu
     * backend packs them from the unpadded input as the even elements of two loads) */
    {0, 2, 2, 3, 9, 44, 16, 7, 7, {2, 2}, {3, 3}, {1, 1}, 1, true, true, 0},
    /* 26: 64 output channels over 7x7 pixels, residual: the cpu backend's GEMM swaps its
     * operands (as for ResNet's layer 4) and packs the im2col matrix from the padded input */
    {0, 2, 1, 8, 7, 7, 64, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, true, 1},
    /* 27: ResNet's maxpool with rows of 40 outputs, past a vector of 32 lanes (the cpu backend
     * loads stride-2 lanes as two vectors and a shuffle) */
    {1, 2, 2, 3, 7, 80, 0, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, false, false, 0},
};

static int64_t window_out(int64_t len, int64_t k, int64_t s, int64_t p, int64_t d)
{
    return (len + 2 * p - d * (k - 1) - 1) / s + 1;
}

static mc_status build_window(const op_case *c, mc_graph *g)
{
    const window_spec *s = &window_specs[c->variant];
    mc_value x = s->sr == 2 ? mc_input(g, "x", c->dtype, SHAPE(s->n, s->c, s->s0, s->s1))
                            : mc_input(g, "x", c->dtype, SHAPE(s->n, s->c, s->s0));
    if (s->kind != 0) {
        int64_t k[2] = {s->k0, s->k1};
        mc_value y = (s->kind == 1 ? mc_maxpool : mc_avgpool)(g, x, k, s->stride, s->padding, s->sr);
        return OUTPUTS(g, y);
    }
    int64_t cg = s->c / s->groups;
    mc_value w = s->sr == 2 ? mc_param(g, "w", c->dtype, SHAPE(s->co, cg, s->k0, s->k1))
                            : mc_param(g, "w", c->dtype, SHAPE(s->co, cg, s->k0));
    mc_value b = s->bias ? mc_param(g, "b", c->dtype, SHAPE(s->co)) : MC_NONE;
    mc_value y = mc_conv(g, x, w, b, s->stride, s->padding, s->dilation, s->sr, s->groups);
    if (s->residual) {
        int64_t ys[MC_MAX_RANK]; /* (copied: adding a node may move the node array) */
        int yr = g->nodes[y].rank;
        memcpy(ys, g->nodes[y].shape, sizeof ys);
        mc_value r = s->residual == 1 ? mc_input(g, "r", c->dtype, ys, yr) : mc_input(g, "r", c->dtype, SHAPE(ys[yr - 1]));
        y = mc_add(g, y, r);
    }
    return OUTPUTS(g, s->relu ? mc_relu(g, y) : y);
}

static void expect_window(const op_case *c, double *const *in, double **out)
{
    const window_spec *s = &window_specs[c->variant];
    int64_t S1 = s->sr == 2 ? s->s1 : 1, K1 = s->sr == 2 ? s->k1 : 1;
    int64_t d0 = s->kind == 0 ? s->dilation[0] : 1, d1 = s->kind == 0 && s->sr == 2 ? s->dilation[1] : 1;
    int64_t st1 = s->sr == 2 ? s->stride[1] : 1, p1 = s->sr == 2 ? s->padding[1] : 0;
    int64_t O0 = window_out(s->s0, s->k0, s->stride[0], s->padding[0], d0);
    int64_t O1 = s->sr == 2 ? window_out(s->s1, K1, st1, p1, d1) : 1;
    int64_t co = s->kind == 0 ? s->co : s->c, cg = s->c / s->groups, og = co / s->groups;
    const double *x = in[0], *w = s->kind == 0 ? in[1] : NULL, *b = s->bias ? in[2] : NULL;
    const double *r = s->residual ? in[s->bias ? 3 : 2] : NULL;
    int e = 0;
    for (int64_t n = 0; n < s->n; n++)
        for (int64_t o = 0; o < co; o++)
            for (int64_t i = 0; i < O0; i++)
                for (int64_t j = 0; j < O1; j++) {
                    double v = s->kind == 1 ? -INFINITY : 0;
                    int inside = 0;
                    for (int64_t ci = 0; ci < (s->kind == 0 ? cg : 1); ci++)
                        for (int64_t u = 0; u < s->k0; u++)
                            for (int64_t t = 0; t < K1; t++) {
                                int64_t r = i * s->stride[0] - s->padding[0] + u * d0, q = j * st1 - p1 + t * d1;
                                int64_t ch = s->kind == 0 ? o / og * cg + ci : o;
                                if (r < 0 || r >= s->s0 || q < 0 || q >= S1)
                                    continue;
                                double xv = x[((n * s->c + ch) * s->s0 + r) * S1 + q];
                                inside++;
                                if (s->kind == 0)
                                    v += xv * w[((o * cg + ci) * s->k0 + u) * K1 + t];
                                else if (s->kind == 1)
                                    v = fmax(v, xv);
                                else
                                    v += xv;
                            }
                    if (s->kind == 0 && b)
                        v += b[o];
                    if (r)
                        v += s->residual == 1 ? r[e] : r[j];
                    if (s->kind == 0 && s->relu)
                        v = v > 0 ? v : 0;
                    out[0][e++] = s->kind == 2 ? v / inside : v;
                }
}

/* A ResNet basic block and a strided conv padded along H only, against the float64 oracle:
 * z = relu(conv(relu(conv(x, w1, b1)), w2, b2) + x), both 3x3 padded 1 (the second padding's
 * zeros are the first's, shared: on the CPU each GEMM packs its B from the unpadded input and
 * skips the padding's copies, backends/cpu/llvm.h, but the zeros the other reads still run),
 * then conv(z, w3) with a [3, 1] kernel, stride 2, padding [1, 0] (one level of padding). */
static mc_status build_conv_block(const op_case *c, mc_graph *g)
{
    int64_t one[2] = {1, 1}, pad1[2] = {1, 0}, s2[2] = {2, 2};
    mc_value x = mc_input(g, "x", c->dtype, SHAPE(2, 4, 7, 6));
    mc_value w1 = mc_param(g, "w1", c->dtype, SHAPE(4, 4, 3, 3)), b1 = mc_param(g, "b1", c->dtype, SHAPE(4));
    mc_value w2 = mc_param(g, "w2", c->dtype, SHAPE(4, 4, 3, 3)), b2 = mc_param(g, "b2", c->dtype, SHAPE(4));
    mc_value w3 = mc_param(g, "w3", c->dtype, SHAPE(5, 4, 3, 1));
    mc_value y = mc_relu(g, mc_conv(g, x, w1, b1, one, one, one, 2, 1));
    mc_value z = mc_relu(g, mc_add(g, mc_conv(g, y, w2, b2, one, one, one, 2, 1), x));
    return OUTPUTS(g, z, mc_conv(g, z, w3, MC_NONE, s2, pad1, one, 2, 1));
}

/* pad of x [3, 4] (and a rank-3 one), batchnorm of x [2, 3, 4, 5] and [4, 3] */
static mc_status build_pad(const op_case *c, mc_graph *g)
{
    if (c->variant == 2) {
        mc_value x = mc_input(g, "x", c->dtype, SHAPE(2, 1, 3));
        return OUTPUTS(g, mc_pad(g, x, (int64_t[]){0, 2, 0, 1, 0, 3}, 6, 0));
    }
    mc_value x = mc_input(g, "x", c->dtype, SHAPE(3, 4));
    double value = c->dtype == MC_I32 ? -7 : c->dtype == MC_BOOL ? 1 : 0.5;
    return OUTPUTS(g, mc_pad(g, x, c->variant == 0 ? (int64_t[]){1, 0, 2, 3} : (int64_t[]){0, 0, 0, 0}, 4, value));
}

static void expect_pad(const op_case *c, double *const *in, double **out)
{
    if (c->variant == 2) { /* [2, 1, 3] -> [3, 3, 6]: one row after axis 0, two before axis 1, three after axis 2 */
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++)
                for (int d = 0; d < 6; d++)
                    out[0][(a * 3 + b) * 6 + d] = a < 2 && b == 2 && d < 3 ? in[0][a * 3 + d] : 0;
        return;
    }
    double value = c->dtype == MC_I32 ? -7 : c->dtype == MC_BOOL ? 1 : 0.5;
    int b0 = c->variant == 0 ? 1 : 0, b1 = 0, e0 = c->variant == 0 ? 2 : 0, e1 = c->variant == 0 ? 3 : 0;
    int rows = 3 + b0 + e0, cols = 4 + b1 + e1;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            int r = i - b0, q = j - b1;
            out[0][i * cols + j] = r >= 0 && r < 3 && q >= 0 && q < 4 ? in[0][r * 4 + q] : value;
        }
}

static mc_status build_batchnorm(const op_case *c, mc_graph *g)
{
    mc_value x = c->variant ? mc_input(g, "x", c->dtype, SHAPE(4, 3)) : mc_input(g, "x", c->dtype, SHAPE(2, 3, 4, 5));
    mc_value scale = mc_param(g, "scale", c->dtype, SHAPE(3));
    mc_value bias = mc_param(g, "bias", c->dtype, SHAPE(3));
    mc_value mean = mc_param(g, "mean", c->dtype, SHAPE(3));
    mc_value var = mc_param(g, "var", c->dtype, SHAPE(3));
    return OUTPUTS(g, mc_batchnorm(g, x, scale, bias, mean, mc_abs(g, var), c->variant ? 0.25 : 1e-5));
}

static void expect_batchnorm(const op_case *c, double *const *in, double **out)
{
    int inner = c->variant ? 1 : 20, total = c->variant ? 12 : 120;
    double eps = c->variant ? 0.25 : 1e-5;
    for (int e = 0; e < total; e++) {
        int ch = e / inner % 3;
        double sd = sqrt(fabs(in[4][ch]) + eps);
        out[0][e] = in[1][ch] * ((in[0][e] - in[3][ch]) / sd) + in[2][ch];
    }
}

/* ---- concat --------------------------------------------------------------------------------- */

typedef struct {
    int n, axis, rank;
    int64_t shapes[3][3];
    mc_dtype dtype;
} concat_spec;

static const concat_spec concat_specs[] = {
    {2, 0, 2, {{2, 3}, {2, 3}}, MC_F32},
    {3, 1, 2, {{2, 3}, {2, 1}, {2, 2}}, MC_F32},
    {2, -1, 2, {{2, 3}, {2, 2}}, MC_F32},
    {3, 1, 3, {{2, 1, 3}, {2, 2, 3}, {2, 3, 3}}, MC_F16},
    {2, 0, 3, {{1, 2, 3}, {2, 2, 3}}, MC_I32},
    {2, 2, 3, {{2, 2, 1}, {2, 2, 2}}, MC_F32},
    {2, -3, 3, {{1, 2, 2}, {1, 2, 2}}, MC_BOOL},
    {1, 0, 2, {{2, 2}}, MC_F32},
};

static mc_status build_concat(const op_case *c, mc_graph *g)
{
    const concat_spec *s = &concat_specs[c->variant];
    static const char *const names[3] = {"a", "b", "c"};
    mc_value xs[3];
    for (int k = 0; k < s->n; k++)
        xs[k] = mc_input(g, names[k], s->dtype, s->shapes[k], s->rank);
    return OUTPUTS(g, mc_concat(g, xs, s->n, s->axis));
}

/* Scatter every operand element to its place (the oracle gathers: the other direction). */
static void expect_concat(const op_case *c, double *const *in, double **out)
{
    const concat_spec *s = &concat_specs[c->variant];
    int axis = (s->axis + s->rank) % s->rank;
    int64_t dims[3][3], od[3] = {1, 1, 1}, off = 0; /* padded on the left to rank 3 */
    for (int k = 0; k < s->n; k++)
        for (int d = 0; d < 3; d++)
            dims[k][d] = d < 3 - s->rank ? 1 : s->shapes[k][d - (3 - s->rank)];
    int pax = axis + (3 - s->rank);
    for (int d = 0; d < 3; d++)
        od[d] = dims[0][d];
    od[pax] = 0;
    for (int k = 0; k < s->n; k++)
        od[pax] += dims[k][pax];
    for (int k = 0; k < s->n; k++) {
        for (int64_t i = 0; i < dims[k][0]; i++)
            for (int64_t j = 0; j < dims[k][1]; j++)
                for (int64_t l = 0; l < dims[k][2]; l++) {
                    int64_t o[3] = {i, j, l};
                    o[pax] += off;
                    out[0][(o[0] * od[1] + o[1]) * od[2] + o[2]] =
                        in[k][(i * dims[k][1] + j) * dims[k][2] + l];
                }
        off += dims[k][pax];
    }
}

/* ---- iota and full -------------------------------------------------------------------------- */

static mc_status build_create(const op_case *c, mc_graph *g)
{
    switch (c->variant) {
    case 0: return OUTPUTS(g, mc_iota(g, SHAPE(3, 4), 1, MC_I32));
    case 1: return OUTPUTS(g, mc_iota(g, SHAPE(3, 4), 0, MC_F32));
    case 2: return OUTPUTS(g, mc_iota(g, SHAPE(2, 3, 4), -1, MC_BF16));
    case 3: return OUTPUTS(g, mc_full(g, SHAPE(2, 3), 1.5, MC_F32));
    case 4: return OUTPUTS(g, mc_full(g, SHAPE(4), 7, MC_I32));
    case 5: return OUTPUTS(g, mc_full(g, SHAPE(2, 2), 0.1, MC_BF16));
    case 6: return OUTPUTS(g, mc_full(g, SHAPE(3), -INFINITY, MC_F32));
    default: /* full and iota feeding arithmetic with an input */
    {
        mc_value x = mc_input(g, "x", MC_F32, SHAPE(3, 4));
        mc_value y = mc_add(g, mc_mul(g, x, mc_full(g, SHAPE(3, 4), 2.0, MC_F32)),
                            mc_iota(g, SHAPE(4), 0, MC_F32));
        return OUTPUTS(g, y);
    }
    }
}

static void expect_create(const op_case *c, double *const *in, double **out)
{
    switch (c->variant) {
    case 0:
    case 1:
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++)
                out[0][i * 4 + j] = c->variant == 0 ? j : i;
        break;
    case 2:
        for (int i = 0; i < 24; i++)
            out[0][i] = i % 4;
        break;
    case 3:
        for (int i = 0; i < 6; i++)
            out[0][i] = 1.5;
        break;
    case 4:
        for (int i = 0; i < 4; i++)
            out[0][i] = 7;
        break;
    case 5:
        for (int i = 0; i < 4; i++)
            out[0][i] = 0.1; /* exact: unrounded; the rounded check sees bf16(0.1) */
        break;
    case 6:
        for (int i = 0; i < 3; i++)
            out[0][i] = -INFINITY;
        break;
    default:
        for (int i = 0; i < 12; i++)
            out[0][i] = in[0][i] * 2 + i % 4;
        break;
    }
}

/* ---- whole graphs --------------------------------------------------------------------------- */

static double gelu_ref(double x) { return 0.5 * x * erfc(-x / sqrt(2.0)); }

/* y = linear(gelu(linear(x, w1, b1)), w2, b2) + x */
static mc_status build_mlp(const op_case *c, mc_graph *g)
{
    mc_dtype d = c->dtype;
    mc_value x = mc_input(g, "x", d, SHAPE(4, 8));
    mc_value w1 = mc_param(g, "fc1.w", d, SHAPE(16, 8)), b1 = mc_param(g, "fc1.b", d, SHAPE(16));
    mc_value w2 = mc_param(g, "fc2.w", d, SHAPE(8, 16)), b2 = mc_param(g, "fc2.b", d, SHAPE(8));
    mc_value h = mc_gelu(g, mc_linear(g, x, w1, b1));
    return OUTPUTS(g, mc_add(g, mc_linear(g, h, w2, b2), x));
}

static void expect_mlp(const op_case *c, double *const *in, double **out)
{
    double h[4][16];
    for (int r = 0; r < 4; r++)
        for (int o = 0; o < 16; o++) {
            double acc = in[2][o];
            for (int k = 0; k < 8; k++)
                acc += in[0][r * 8 + k] * in[1][o * 8 + k];
            h[r][o] = gelu_ref(acc);
        }
    for (int r = 0; r < 4; r++)
        for (int o = 0; o < 8; o++) {
            double acc = in[4][o];
            for (int k = 0; k < 16; k++)
                acc += h[r][k] * in[3][o * 16 + k];
            out[0][r * 8 + o] = acc + in[0][r * 8 + o];
        }
}

/* Causal attention: p = softmax(where(i >= j, q k^T / sqrt(8), -inf)), o = p v. */
static mc_status build_attention(const op_case *c, mc_graph *g)
{
    mc_dtype d = c->dtype;
    mc_value q = mc_input(g, "q", d, SHAPE(2, 4, 8));
    mc_value k = mc_input(g, "k", d, SHAPE(2, 4, 8));
    mc_value v = mc_input(g, "v", d, SHAPE(2, 4, 8));
    mc_value s = mc_mul(g, mc_matmul(g, q, mc_transpose(g, k, AXES(0, 2, 1))),
                        mc_scalar(g, 1.0 / sqrt(8.0), d));
    mc_value mask = mc_ge(g, mc_iota(g, SHAPE(4, 4), 0, MC_I32), mc_iota(g, SHAPE(4, 4), 1, MC_I32));
    mc_value p = mc_softmax(g, mc_where(g, mask, s, mc_scalar(g, -INFINITY, d)), -1);
    return OUTPUTS(g, mc_matmul(g, p, v), p);
}

static void expect_attention(const op_case *c, double *const *in, double **out)
{
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 4; i++) {
            const double *q = in[0] + (b * 4 + i) * 8;
            double sc[4], m = -INFINITY, z = 0;
            for (int j = 0; j <= i; j++) { /* only j <= i: the masked ones are exp(-inf) = 0 */
                const double *k = in[1] + (b * 4 + j) * 8;
                sc[j] = 0;
                for (int t = 0; t < 8; t++)
                    sc[j] += q[t] * k[t];
                sc[j] *= 1.0 / sqrt(8.0);
                m = fmax(m, sc[j]);
            }
            for (int j = 0; j <= i; j++)
                z += exp(sc[j] - m);
            double *p = out[1] + (b * 4 + i) * 4, *o = out[0] + (b * 4 + i) * 8;
            for (int j = 0; j < 4; j++)
                p[j] = j <= i ? exp(sc[j] - m) / z : 0.0;
            for (int t = 0; t < 8; t++) {
                o[t] = 0;
                for (int j = 0; j <= i; j++)
                    o[t] += p[j] * in[2][(b * 4 + j) * 8 + t];
            }
        }
}

/* i32 arithmetic, a compare and a cast back: y = (a*3)/2 - iota, lt(y, 5), sum(cast(lt)). */
static mc_status build_int_chain(const op_case *c, mc_graph *g)
{
    mc_value a = mc_input(g, "a", MC_I32, SHAPE(3, 4));
    mc_value y = mc_sub(g, mc_div(g, mc_mul(g, a, mc_scalar(g, 3, MC_I32)), mc_scalar(g, 2, MC_I32)),
                        mc_iota(g, SHAPE(3, 4), 1, MC_I32));
    mc_value lt = mc_lt(g, y, mc_scalar(g, 5, MC_I32));
    mc_value n = mc_sum(g, mc_cast(g, lt, MC_F32), NULL, 0, false);
    mc_value m = mc_max(g, y, AXES(0), true);
    return OUTPUTS(g, y, lt, n, m);
}

static void expect_int_chain(const op_case *c, double *const *in, double **out)
{
    out[2][0] = 0;
    for (int j = 0; j < 4; j++)
        out[3][j] = -1e300;
    for (int i = 0; i < 12; i++) {
        double y = floor(in[0][i] * 3 / 2) - i % 4; /* a >= 0: floor == truncation */
        out[0][i] = y;
        out[1][i] = y < 5;
        out[2][0] += y < 5;
        out[3][i % 4] = fmax(out[3][i % 4], y);
    }
}

/* Variance by primitives: y = x - mean(x, -1, keepdim), v = sum(y * y, 1) / 5; and softmax
 * spelled out: exp(x - max) / sum. */
static mc_status build_primitives(const op_case *c, mc_graph *g)
{
    mc_value x = mc_input(g, "x", c->dtype, SHAPE(3, 5));
    mc_value y = mc_sub(g, x, mc_mean(g, x, AXES(-1), true));
    mc_value v = mc_div(g, mc_sum(g, mc_mul(g, y, y), AXES(1), false), mc_scalar(g, 5, c->dtype));
    mc_value e = mc_exp(g, mc_sub(g, x, mc_max(g, x, AXES(-1), true)));
    mc_value sm = mc_div(g, e, mc_sum(g, e, AXES(-1), true));
    return OUTPUTS(g, y, v, sm);
}

static void expect_primitives(const op_case *c, double *const *in, double **out)
{
    for (int r = 0; r < 3; r++) {
        const double *x = in[0] + r * 5;
        double s = 0, s2 = 0, lse = 0;
        for (int j = 0; j < 5; j++) {
            s += x[j];
            s2 += x[j] * x[j];
            lse += exp(x[j]); /* inputs in [-1, 1): no shift needed here */
        }
        lse = log(lse);
        for (int j = 0; j < 5; j++) {
            out[0][r * 5 + j] = x[j] - s / 5;
            out[2][r * 5 + j] = exp(x[j] - lse);
        }
        out[1][r] = s2 / 5 - (s / 5) * (s / 5);
    }
}

/* A chain of views: transpose, reshape, slice, then a broadcast add of a param. */
static mc_status build_view_chain(const op_case *c, mc_graph *g)
{
    mc_value x = mc_input(g, "x", c->dtype, SHAPE(2, 3, 4));
    mc_value p = mc_param(g, "p", c->dtype, SHAPE(4));
    mc_value t = mc_reshape(g, mc_transpose(g, x, AXES(1, 0, 2)), SHAPE(3, 8));
    mc_value s = mc_slice(g, t, 1, 2, 6);
    return OUTPUTS(g, mc_add(g, s, p), mc_neg(g, x));
}

static void expect_view_chain(const op_case *c, double *const *in, double **out)
{
    /* t[j][i*4 + k] = x[i][j][k]; columns 2..5 of t: (i, k) = (0, 2..3), (1, 0..1) */
    for (int j = 0; j < 3; j++)
        for (int col = 2; col < 6; col++) {
            int i = col / 4, k = col % 4;
            out[0][j * 4 + (col - 2)] = in[0][(i * 3 + j) * 4 + k] + in[1][col - 2];
        }
    for (int e = 0; e < 24; e++)
        out[1][e] = -in[0][e];
}

/* ---- gather ---------------------------------------------------------------------------------- */

/* gather(x, idx, axis) cases: x's shape, idx's shape (rank 0: a scalar index), the axis, the
 * indices (negative ones among them); family 1: an embedding plus a position embedding and their
 * add (one kernel); family 2: a row sum of a gather (a gather in a reduction's loop). */
typedef struct {
    int family;
    int64_t xs[3];
    int xr;
    int64_t is[2];
    int ir;
    int axis;
    int idx[8];
} gather_spec;

static const gather_spec gather_specs[] = {
    {0, {5, 4}, 2, {3}, 1, 0, {4, -1, 0}},
    {0, {3, 6, 2}, 3, {2, 2}, 2, 1, {-6, 5, 0, -1}},
    {0, {4, 7}, 2, {0}, 0, -1, {-2}},
    {1, {10, 8}, 2, {2, 3}, 2, 0, {9, 0, -10, 3, 3, -1}},
    {2, {6, 5}, 2, {2, 2}, 2, 0, {5, -6, 2, 2}},
};

static mc_status build_gather(const op_case *c, mc_graph *g)
{
    const gather_spec *s = &gather_specs[c->variant];
    if (s->family == 1) {
        mc_value ids = mc_input(g, "ids", MC_I32, s->is, s->ir);
        mc_value wte = mc_param(g, "wte", c->dtype, s->xs, s->xr);
        mc_value wpe = mc_param(g, "wpe", c->dtype, SHAPE(3, 8));
        mc_value pos = mc_iota(g, s->is, s->ir, 1, MC_I32);
        return OUTPUTS(g, mc_add(g, mc_gather(g, wte, ids, 0), mc_gather(g, wpe, pos, 0)));
    }
    mc_value x = mc_input(g, "x", c->dtype, s->xs, s->xr);
    mc_value idx = mc_input(g, "idx", MC_I32, s->is, s->ir);
    mc_value y = mc_gather(g, x, idx, s->axis);
    return OUTPUTS(g, s->family == 2 ? mc_sum(g, y, AXES(-1), false) : y);
}

static void prepare_gather(const op_case *c, void *const *in)
{
    const gather_spec *s = &gather_specs[c->variant];
    int64_t n = 1;
    for (int d = 0; d < s->ir; d++)
        n *= s->is[d];
    for (int64_t i = 0; i < n; i++)
        mc_store_element(in[s->family == 1 ? 0 : 1], MC_I32, i, s->idx[i]);
}

/* x[a.., idx[j..], b..] from the definition, one output element at a time. */
static void gather_ref(const double *x, const int64_t *xs, int xr, const double *idx, const int64_t *is, int ir,
                       int axis, double *out)
{
    int64_t outer = 1, inner = 1, ni = 1;
    for (int d = 0; d < axis; d++)
        outer *= xs[d];
    for (int d = axis + 1; d < xr; d++)
        inner *= xs[d];
    for (int d = 0; d < ir; d++)
        ni *= is[d];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < ni; j++) {
            int64_t i = (int64_t)idx[j];
            if (i < 0)
                i += xs[axis];
            for (int64_t b = 0; b < inner; b++)
                out[(o * ni + j) * inner + b] = x[(o * xs[axis] + i) * inner + b];
        }
}

static void expect_gather(const op_case *c, double *const *in, double **out)
{
    const gather_spec *s = &gather_specs[c->variant];
    int axis = s->axis < 0 ? s->axis + s->xr : s->axis;
    if (s->family == 1) {
        double t[6 * 8], p[6 * 8], pos[6];
        for (int e = 0; e < 6; e++)
            pos[e] = e % 3;
        gather_ref(in[1], s->xs, s->xr, in[0], s->is, s->ir, 0, t);
        gather_ref(in[2], (const int64_t[]){3, 8}, 2, pos, s->is, s->ir, 0, p);
        for (int e = 0; e < 48; e++)
            out[0][e] = t[e] + p[e];
        return;
    }
    if (s->family == 2) {
        double y[4 * 5];
        gather_ref(in[0], s->xs, s->xr, in[1], s->is, s->ir, axis, y);
        for (int r = 0; r < 4; r++) {
            out[0][r] = 0;
            for (int k = 0; k < 5; k++)
                out[0][r] += y[r * 5 + k];
        }
        return;
    }
    gather_ref(in[0], s->xs, s->xr, in[1], s->is, s->ir, axis, out[0]);
}

/* ---- update ---------------------------------------------------------------------------------- */

/* update(cache, new, pos, axis) cases: the cache's shape, the length of new along the axis, the
 * axis (as written: negative ones too) and pos (at the start, in the middle, at the end). Family
 * 1 is a decode step of attention: the K and V caches updated at pos with one token's k and v,
 * the scores masked to the first pos + 1 keys (le(iota, pos)) before the softmax; its outputs
 * are the attention's result and both caches. */
typedef struct {
    int family;
    int64_t cs[4];
    int cr;
    int64_t len;
    int axis;
    int pos;
} update_spec;

static const update_spec update_specs[] = {
    {0, {2, 6, 3}, 3, 2, 1, 0},  {0, {2, 6, 3}, 3, 2, 1, 2},  {0, {2, 6, 3}, 3, 2, -2, 4},
    {0, {4, 5}, 2, 1, 0, 3},     {0, {1, 2, 8, 4}, 4, 1, 2, 7}, {0, {3, 4}, 2, 4, 1, 0},
    {0, {7}, 1, 3, 0, 2},        {1, {1, 2, 8, 4}, 4, 1, 2, 0}, {1, {1, 2, 8, 4}, 4, 1, 2, 5},
    {1, {1, 2, 8, 4}, 4, 1, 2, 7},
};

static int update_axis(const update_spec *s) { return s->axis < 0 ? s->axis + s->cr : s->axis; }

static void update_new_shape(const update_spec *s, int64_t *ns)
{
    memcpy(ns, s->cs, sizeof s->cs);
    ns[update_axis(s)] = s->len;
}

static mc_status build_update(const op_case *c, mc_graph *g)
{
    const update_spec *s = &update_specs[c->variant];
    int64_t ns[4];
    update_new_shape(s, ns);
    if (s->family == 1) { /* q, the caches and the new token's k and v, pos */
        mc_value q = mc_input(g, "q", c->dtype, ns, 4);
        mc_value kc = mc_input(g, "k_cache", c->dtype, s->cs, 4);
        mc_value vc = mc_input(g, "v_cache", c->dtype, s->cs, 4);
        mc_value kn = mc_input(g, "k_new", c->dtype, ns, 4);
        mc_value vn = mc_input(g, "v_new", c->dtype, ns, 4);
        mc_value pos = mc_input(g, "pos", MC_I32, NULL, 0);
        mc_value k = mc_update(g, kc, kn, pos, 2), v = mc_update(g, vc, vn, pos, 2);
        mc_value sc = mc_mul(g, mc_matmul(g, q, mc_transpose(g, k, (const int[]){0, 1, 3, 2}, 4)),
                             mc_scalar(g, 0.5, c->dtype));
        mc_value keep = mc_le(g, mc_iota(g, SHAPE(1, s->cs[2]), 1, MC_I32), pos);
        mc_value p = mc_softmax(g, mc_where(g, keep, sc, mc_scalar(g, -INFINITY, c->dtype)), -1);
        return OUTPUTS(g, mc_matmul(g, p, v), k, v);
    }
    mc_value cache = mc_input(g, "cache", c->dtype, s->cs, s->cr);
    mc_value nw = mc_input(g, "new", c->dtype, ns, s->cr);
    mc_value pos = mc_input(g, "pos", MC_I32, NULL, 0);
    return OUTPUTS(g, mc_update(g, cache, nw, pos, s->axis));
}

static void prepare_update(const op_case *c, void *const *in)
{
    const update_spec *s = &update_specs[c->variant];
    mc_store_element(in[s->family == 1 ? 5 : 2], MC_I32, 0, s->pos);
}

/* The cache, then new's entries written over it one by one at pos along the axis. */
static void update_ref(const update_spec *s, const double *cache, const double *nw, double *out)
{
    int axis = update_axis(s);
    int64_t outer = 1, inner = 1, n = s->cs[axis], numel = 1;
    for (int d = 0; d < s->cr; d++) {
        numel *= s->cs[d];
        if (d < axis)
            outer *= s->cs[d];
        if (d > axis)
            inner *= s->cs[d];
    }
    memcpy(out, cache, sizeof(double) * (size_t)numel);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < s->len; j++)
            for (int64_t b = 0; b < inner; b++)
                out[(o * n + s->pos + j) * inner + b] = nw[(o * s->len + j) * inner + b];
}

static void expect_update(const op_case *c, double *const *in, double **out)
{
    const update_spec *s = &update_specs[c->variant];
    if (s->family == 0) {
        update_ref(s, in[0], in[1], out[0]);
        return;
    }
    /* attention over keys 0..pos of the updated caches, per head: softmax(q.k / 2) v */
    update_ref(s, in[1], in[3], out[1]);
    update_ref(s, in[2], in[4], out[2]);
    int64_t H = s->cs[1], T = s->cs[2], D = s->cs[3];
    for (int64_t h = 0; h < H; h++) {
        double w[8], m = -INFINITY, sum = 0;
        for (int64_t t = 0; t <= s->pos; t++) {
            w[t] = 0;
            for (int64_t d = 0; d < D; d++)
                w[t] += in[0][h * D + d] * out[1][(h * T + t) * D + d];
            w[t] *= 0.5;
            m = w[t] > m ? w[t] : m;
        }
        for (int64_t t = 0; t <= s->pos; t++)
            sum += (w[t] = exp(w[t] - m));
        for (int64_t d = 0; d < D; d++) {
            double y = 0;
            for (int64_t t = 0; t <= s->pos; t++)
                y += w[t] / sum * out[2][(h * T + t) * D + d];
            out[0][h * D + d] = y;
        }
    }
}

/* ---- the table ------------------------------------------------------------------------------ */

#define CASE(name, family, dt, v) \
    {name, build_##family, expect_##family, NULL, MC_##dt, 0, NULL, NULL, NULL, NULL, v, false, 0, NULL}

#define GATHER(name, dt, v) \
    {name, build_gather, expect_gather, prepare_gather, MC_##dt, 0, NULL, NULL, NULL, NULL, v, false, 0, NULL}

#define UPDATE(name, dt, v) \
    {name, build_update, expect_update, prepare_update, MC_##dt, 0, NULL, NULL, NULL, NULL, v, false, 0, NULL}

static const op_case cases[] = {
    UPDATE("update_pos_start", F32, 0), UPDATE("update_pos_middle", F32, 1),
    UPDATE("update_pos_end_axis_neg", F32, 2), UPDATE("update_axis0_i32", I32, 3),
    UPDATE("update_kv_cache_last_f16", F16, 4), UPDATE("update_whole_axis_bf16", BF16, 5),
    UPDATE("update_rank1", F32, 6), UPDATE("update_decode_attention_pos0", F32, 7),
    UPDATE("update_decode_attention_pos5", F32, 8), UPDATE("update_decode_attention_last_bf16", BF16, 9),
    GATHER("gather_axis0", F32, 0), GATHER("gather_axis1_rank2_idx_negative", F32, 1),
    GATHER("gather_scalar_index_last_axis", F32, 2), GATHER("gather_embedding_plus_position", F32, 3),
    GATHER("gather_then_sum", F32, 4), GATHER("gather_i32", I32, 1), GATHER("gather_f16", F16, 0),
    GATHER("gather_bf16_embedding", BF16, 3),
    CASE("matmul_2d", matmul, F32, 0), CASE("matmul_batched", matmul, F32, 1),
    CASE("matmul_batch_broadcast", matmul, F32, 2), CASE("matmul_rank2_by_rank3", matmul, F32, 3),
    CASE("matmul_f16", matmul, F16, 4), CASE("matmul_bf16_rank3_by_rank2", matmul, BF16, 5),
    CASE("matmul_batch1_left", matmul, F32, 6), CASE("matmul_m1_n1", matmul, F32, 7),
    CASE("linear_bias", linear, F32, 0), CASE("linear_no_bias", linear, F32, 1),
    CASE("linear_rank4", linear, F32, 2), CASE("linear_bf16", linear, BF16, 0),
    CASE("linear_f16", linear, F16, 1),

    CASE("transpose_default", transpose, F32, 0), CASE("transpose_021", transpose, F32, 1),
    CASE("transpose_201", transpose, F32, 2), CASE("transpose_2d_default", transpose, F32, 3),
    CASE("transpose_i32", transpose, I32, 1), CASE("transpose_bool", transpose, BOOL, 2),
    CASE("transpose_f16", transpose, F16, 0),
    CASE("reshape_minus1", reshape, F32, 0), CASE("reshape_flat", reshape, F32, 1),
    CASE("reshape_twice_minus1", reshape, F32, 2), CASE("reshape_of_transpose", reshape, F32, 3),
    CASE("reshape_i32", reshape, I32, 0), CASE("reshape_of_transpose_bf16", reshape, BF16, 3),
    CASE("expand_3d", expand, F32, 0), CASE("expand_rank1", expand, F32, 1),
    CASE("expand_ones", expand, F32, 2), CASE("expand_scalar", expand, F32, 3),
    CASE("expand_bool", expand, BOOL, 0), CASE("expand_i32", expand, I32, 1),
    CASE("slice_rows", slice, F32, 0), CASE("slice_negative_bounds", slice, F32, 1),
    CASE("slice_end_clamped", slice, F32, 2), CASE("slice_start_clamped", slice, F32, 3),
    CASE("slice_to_end", slice, F32, 4), CASE("slice_last_row_neg_axis", slice, F32, 5),
    CASE("slice_of_slice", slice, F32, 6), CASE("slice_i32", slice, I32, 1),
    CASE("slice_f16", slice, F16, 2),
    CASE("slice_reversed", slice_step, F32, 0), CASE("slice_step2", slice_step, F32, 1),
    CASE("slice_neg_step_end", slice_step, F32, 2), CASE("slice_neg_step_clamped", slice_step, I32, 3),
    CASE("slice_step3_end_clamped", slice_step, F16, 4), CASE("slice_neg_step_start_clamped", slice_step, BF16, 5),
    CASE("slice_reversed_then_stepped", slice_step, F32, 6), CASE("slice_reversed_bool", slice_step, BOOL, 0),
    CASE("slice_reversed_plus_x", slice_step, F32, 7),
    CASE("conv2d_grouped_strided_dilated_bias_relu", window, F32, 0), CASE("conv1d_no_bias", window, F32, 1),
    CASE("conv2d_depthwise", window, F32, 2), CASE("conv2d_1x1_bias_relu", window, F32, 3),
    CASE("conv2d_f16", window, F16, 0), CASE("conv1d_bf16", window, BF16, 1),
    CASE("conv2d_strided_padded_dilated_batch2", window, F32, 8),
    CASE("conv2d_bias_residual_relu", window, F32, 9), CASE("conv2d_bias_residual_relu_bf16", window, BF16, 9),
    CASE("conv2d_bias_row_residual_relu", window, F32, 10),
    CASE("conv2d_implicit_3x3_residual_relu_f16", window, F16, 11),
    CASE("conv2d_implicit_3x3_residual_relu_bf16", window, BF16, 11),
    CASE("conv2d_implicit_stride2_f16", window, F16, 12), CASE("conv2d_implicit_stride2_bf16", window, BF16, 12),
    CASE("conv2d_implicit_dilated_f16", window, F16, 13), CASE("conv2d_implicit_dilated_bf16", window, BF16, 13),
    CASE("conv2d_implicit_1x1_stride2_f16", window, F16, 14), CASE("conv2d_implicit_1x1_stride2_bf16", window, BF16, 14),
    CASE("conv2d_implicit_stem7x7_f16", window, F16, 15), CASE("conv2d_implicit_stem7x7_bf16", window, BF16, 15),
    CASE("conv1d_implicit_f16", window, F16, 16), CASE("conv1d_implicit_bf16", window, BF16, 16),
    CASE("conv2d_implicit_asymmetric_residual_f16", window, F16, 17),
    CASE("conv2d_implicit_asymmetric_residual_bf16", window, BF16, 17),
    CASE("conv2d_implicit_asymmetric_residual_f32", window, F32, 17),
    CASE("conv2d_implicit_even_residual_f16", window, F16, 18),
    CASE("conv2d_implicit_even_residual_bf16", window, BF16, 18),
    CASE("conv2d_implicit_split_k_f16", window, F16, 19), CASE("conv2d_implicit_split_k_bf16", window, BF16, 19),
    CASE("conv2d_implicit_c32_stride2_f16", window, F16, 20), CASE("conv2d_implicit_c64_dilated_residual_bf16", window, BF16, 21),
    CASE("conv2d_implicit_1x1_c96_f16", window, F16, 22),
    CASE("conv2d_implicit_rows8_residual_f16", window, F16, 23),
    CASE("conv2d_implicit_rows4_dilated_bf16", window, BF16, 24),
    CASE("conv2d_stem7x7_wide_rows", window, F32, 25), CASE("conv2d_small_pixels_many_channels_residual", window, F32, 26),
    {"graph_conv_block_padded", build_conv_block, NULL, NULL, MC_F32, 0, NULL, NULL, NULL, NULL, 0, false, 0, NULL},
    CASE("maxpool2d", window, F32, 4), CASE("maxpool1d", window, F32, 5), CASE("maxpool2d_bf16", window, BF16, 4),
    CASE("maxpool2d_wide_rows", window, F32, 27), CASE("maxpool2d_wide_rows_bf16", window, BF16, 27),
    CASE("avgpool2d_padded", window, F32, 6), CASE("avgpool1d_padded", window, F32, 7),
    CASE("avgpool2d_f16", window, F16, 6),
    CASE("pad_2d", pad, F32, 0), CASE("pad_nothing", pad, F32, 1), CASE("pad_3d_zero", pad, F32, 2),
    CASE("pad_i32", pad, I32, 0), CASE("pad_bool", pad, BOOL, 0), CASE("pad_f16", pad, F16, 0),
    CASE("batchnorm_4d", batchnorm, F32, 0), CASE("batchnorm_2d_eps", batchnorm, F32, 1),
    CASE("batchnorm_bf16", batchnorm, BF16, 0),
    CASE("concat_axis0", concat, F32, 0), CASE("concat_axis1_three", concat, F32, 1),
    CASE("concat_axis_neg1", concat, F32, 2), CASE("concat_3d_axis1_f16", concat, F16, 3),
    CASE("concat_3d_axis0_i32", concat, I32, 4), CASE("concat_3d_axis2", concat, F32, 5),
    CASE("concat_bool_axis_neg3", concat, BOOL, 6), CASE("concat_one_operand", concat, F32, 7),

    CASE("iota_i32_axis1", create, I32, 0), CASE("iota_f32_axis0", create, F32, 1),
    CASE("iota_bf16_axis_neg1", create, BF16, 2), CASE("full_f32", create, F32, 3),
    CASE("full_i32", create, I32, 4), CASE("full_bf16_rounds", create, BF16, 5),
    CASE("full_neg_inf", create, F32, 6), CASE("full_and_iota_with_input", create, F32, 7),

    CASE("graph_mlp", mlp, F32, 0), CASE("graph_mlp_bf16", mlp, BF16, 0),
    CASE("graph_causal_attention", attention, F32, 0),
    CASE("graph_causal_attention_f16", attention, F16, 0),
    CASE("graph_int_chain", int_chain, I32, 0),
    CASE("graph_primitives", primitives, F32, 0), CASE("graph_primitives_f16", primitives, F16, 0),
    CASE("graph_view_chain", view_chain, F32, 0), CASE("graph_view_chain_bf16", view_chain, BF16, 0),
};

int main(void)
{
    return ops_run_table("test_ops_shape", cases, (int)(sizeof cases / sizeof cases[0]));
}
