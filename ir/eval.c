/* The float64 evaluation of a graph: the numerical oracle every backend, pass and fusion is
 * checked against (docs/FORMAT.md §6).
 *
 * It walks the nodes in order (a forward walk is a topological order) and computes each live
 * node into a fresh array of doubles, straight from the operator's definition: composites
 * (softmax, layernorm, linear, ...) are computed as the formulas people write on paper, not
 * through the decomposition the passes use, so the two can be checked against each other.
 * Nothing here is clever: every element is found through its multi-index (stepped like an
 * odometer) and per-operand strides (stride 0 broadcasts), at O(rank) per element access. The
 * one concession to speed is the loop order of the GEMM (rows of 8, k outside j), which keeps
 * every sum in its textbook order but lets the oracle get through full-size benchmark graphs.
 *
 * Rounding: with `exact` every float value stays a double (the float64 reference), except that
 * an f16 or bf16 value never leaves its type's range (mc_saturate_to_dtype, as in the
 * backends' fused kernels); without it each node's result is rounded to its dtype as it is
 * stored (the reference backend's rule).
 * i32 and bool always keep their own semantics, exact or not:
 *   - i32 add, sub, mul, neg, abs and sum wrap around (two's complement), as the generated
 *     code of the CPU and CUDA backends does; the arithmetic is done in 64-bit integers and
 *     reduced modulo 2^32, so the oracle itself has no undefined behaviour;
 *   - i32 div truncates toward zero; x / 0 is defined here as 0 (as NumPy returns), and
 *     INT32_MIN / -1 wraps to INT32_MIN;
 *   - cast to i32 truncates toward zero and saturates, NaN -> 0; cast to bool is x != 0 (NaN
 *     is true); bool -> number is 0/1.
 *
 * Memory: only nodes that reach an output are computed, and every intermediate is freed right
 * after its last consumer, so a graph needs about as much memory as its widest cut. Every size
 * is checked; an allocation failure returns MC_ERR_SYSTEM.
 */
#include "ir/ir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- shapes and strides ------------------------------------------------------------------- */

/* Element count of a shape; false when it overflows or does not fit in memory as doubles. */
static bool checked_numel(const int64_t *shape, int rank, int64_t *out)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        if (shape[i] < 0 || mc_mul_overflows(n, shape[i], &n))
            return false;
    int64_t bytes;
    if (mc_mul_overflows(n, (int64_t)sizeof(double), &bytes) || (uint64_t)bytes > SIZE_MAX)
        return false;
    *out = n;
    return true;
}

/* May `bytes` more be allocated? Large requests are checked against MemAvailable first: where
 * the kernel overcommits, malloc succeeds and the process is killed later, when the pages are
 * touched, and `minic bench` runs the oracle on full-size graphs. Unknown: yes. */
static bool memory_available(size_t bytes)
{
    if (bytes < ((size_t)64 << 20))
        return true;
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return true;
    char line[256];
    unsigned long long kb;
    bool ok = true;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
            ok = bytes / 1024 <= kb;
            break;
        }
    fclose(f);
    return ok;
}

/* malloc, or NULL when the memory is not there (see memory_available). */
static double *alloc_doubles(int64_t n)
{
    size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof(double);
    return memory_available(bytes) ? malloc(bytes) : NULL;
}

static int64_t numel_of(const mc_node *n)
{
    int64_t e = 1;
    for (int i = 0; i < n->rank; i++)
        e *= n->shape[i]; /* only for computed nodes: checked_numel passed for them */
    return e;
}

static void contiguous_strides(const int64_t *shape, int rank, int64_t *strides)
{
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        strides[i] = s;
        s *= shape[i];
    }
}

/* Strides that read an array of shape in_shape (rank in_rank, own strides in_strides) at the
 * multi-index of a broadcast result of rank out_rank: NumPy's rule, dimensions aligned on the
 * right, missing and size-1 dimensions read with stride 0. */
static void broadcast_strides(const int64_t *in_shape, const int64_t *in_strides, int in_rank,
                              int out_rank, int64_t *out)
{
    for (int k = 0; k < out_rank; k++) {
        int j = k - (out_rank - in_rank);
        out[k] = (j < 0 || in_shape[j] == 1) ? 0 : in_strides[j];
    }
}

/* Strides of node n read as a broadcast operand of a result of rank out_rank. */
static void operand_strides(const mc_node *n, int out_rank, int64_t *out)
{
    int64_t own[MC_MAX_RANK];
    contiguous_strides(n->shape, n->rank, own);
    broadcast_strides(n->shape, own, n->rank, out_rank, out);
}

static void unravel(int64_t i, const int64_t *shape, int rank, int64_t *idx)
{
    for (int k = rank - 1; k >= 0; k--) {
        idx[k] = i % shape[k];
        i /= shape[k];
    }
}

/* Step a row-major multi-index to the next element (the odometer: no division per element). */
static void next_index(int64_t *idx, const int64_t *shape, int rank)
{
    for (int k = rank - 1; k >= 0; k--) {
        if (++idx[k] < shape[k])
            return;
        idx[k] = 0;
    }
}

static int64_t dot_index(const int64_t *idx, const int64_t *strides, int rank)
{
    int64_t off = 0;
    for (int k = 0; k < rank; k++)
        off += idx[k] * strides[k];
    return off;
}

/* ---- operators ---------------------------------------------------------------------------- */

/* What one node's computation sees: the node, its operands' nodes and values, its result. */
typedef struct {
    const mc_graph *g;
    const mc_node *n;
    const mc_node *in[3];      /* the operands' nodes (concat, with any number, reads g) */
    const double *const *vals; /* every node's values, by index */
    double *out;
    int64_t numel;
} op_ctx;

static const double *operand(const op_ctx *c, int i) { return c->vals[c->n->in[i]]; }

/* Binary, compare and where: every operand broadcast to the result's shape. */
static void eval_broadcast(const op_ctx *c)
{
    const mc_node *n = c->n;
    int64_t strides[3][MC_MAX_RANK], idx[MC_MAX_RANK];
    for (int i = 0; i < n->nin; i++)
        operand_strides(c->in[i], n->rank, strides[i]);
    mc_dtype operand_dtype = c->in[n->nin - 1]->dtype; /* where: a and b; others: both */
    memset(idx, 0, sizeof idx);
    for (int64_t e = 0; e < c->numel; e++, next_index(idx, n->shape, n->rank)) {
        double v[3] = {0, 0, 0}; /* all set below; the initializer quiets -O2's maybe-uninitialized */
        for (int i = 0; i < n->nin; i++)
            v[i] = operand(c, i)[dot_index(idx, strides[i], n->rank)];
        c->out[e] = mc_op_apply(n->op, operand_dtype, n->dtype, v[0], v[1], v[2]);
    }
}

static void eval_unary(const op_ctx *c)
{
    const double *x = operand(c, 0);
    const mc_attrs *at = &c->n->attr;
    for (int64_t e = 0; e < c->numel; e++) {
        double v = x[e];
        if (c->n->op == MC_OP_LEAKY_RELU) { /* NaN: NaN */
            c->out[e] = v < 0 ? v * at->alpha : v;
        } else if (c->n->op == MC_OP_CLIP) { /* NaN: NaN; min > max: max (NumPy, PyTorch) */
            if (at->has_lo && v < at->lo)
                v = at->lo;
            if (at->has_hi && v > at->hi)
                v = at->hi;
            c->out[e] = v;
        } else {
            c->out[e] = mc_op_apply(c->n->op, c->n->dtype, c->n->dtype, v, 0, 0);
        }
    }
}

static void eval_cast(const op_ctx *c)
{
    const double *x = operand(c, 0);
    for (int64_t e = 0; e < c->numel; e++) /* i32/bool targets are rounded when stored */
        c->out[e] = x[e];
}

/* sum, mean, max, min over a set of axes (attr.has_list false: all of them). */
static mc_status eval_reduce(const op_ctx *c)
{
    const mc_node *n = c->n, *x = c->in[0];
    bool reduced[MC_MAX_RANK] = {false};
    for (int k = 0; k < x->rank; k++)
        reduced[k] = !n->attr.has_list;
    for (int i = 0; n->attr.has_list && i < n->attr.nlist; i++)
        reduced[n->attr.list[i]] = true;
    /* Strides into the result for every axis of x: 0 along reduced axes. The result's layout
     * is the same with or without keepdim (size-1 axes do not move anything). */
    int64_t kept_shape[MC_MAX_RANK], kept_strides[MC_MAX_RANK], out_strides[MC_MAX_RANK];
    for (int k = 0; k < x->rank; k++)
        kept_shape[k] = reduced[k] ? 1 : x->shape[k];
    contiguous_strides(kept_shape, x->rank, kept_strides);
    for (int k = 0; k < x->rank; k++)
        out_strides[k] = reduced[k] ? 0 : kept_strides[k];

    for (int64_t e = 0; e < c->numel; e++)
        c->out[e] = mc_reduce_identity(n->op);
    const double *xv = operand(c, 0);
    int64_t xn = numel_of(x), idx[MC_MAX_RANK] = {0};
    for (int64_t e = 0; e < xn; e++, next_index(idx, x->shape, x->rank)) {
        double *acc = &c->out[dot_index(idx, out_strides, x->rank)];
        *acc = mc_reduce_step(n->op, x->dtype, *acc, xv[e]);
    }
    if (n->op == MC_OP_MEAN) {
        double count = (double)(xn / c->numel);
        for (int64_t o = 0; o < c->numel; o++)
            c->out[o] /= count;
    }
    return MC_OK;
}

/* argmax, argmin along attr.list[0]: the first index of the largest (smallest) value, or of
 * the first NaN. The result's layout is the same with or without keepdim. */
static void eval_argextreme(const op_ctx *c)
{
    const mc_node *n = c->n, *x = c->in[0];
    int64_t axis = n->attr.list[0], len = x->shape[axis], inner = 1, outer = 1;
    for (int k = 0; k < axis; k++)
        outer *= x->shape[k];
    for (int k = (int)axis + 1; k < x->rank; k++)
        inner *= x->shape[k];
    const double *xv = operand(c, 0);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const double *row = xv + o * len * inner + i;
            int64_t best = 0;
            for (int64_t j = 0; j < len && !isnan(row[best * inner]); j++) {
                double v = row[j * inner], b = row[best * inner];
                if (isnan(v) || (n->op == MC_OP_ARGMAX ? v > b : v < b))
                    best = j;
            }
            c->out[o * inner + i] = (double)best;
        }
}

/* cumsum along attr.axis: the running sum in order (i32: wrapped, as sum's). */
static void eval_cumsum(const op_ctx *c)
{
    const mc_node *n = c->n;
    int64_t axis = n->attr.axis, len = n->shape[axis], inner = 1, outer = 1;
    for (int k = 0; k < axis; k++)
        outer *= n->shape[k];
    for (int k = (int)axis + 1; k < n->rank; k++)
        inner *= n->shape[k];
    const double *x = operand(c, 0);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double s = 0;
            for (int64_t j = 0; j < len; j++) {
                int64_t e = o * len * inner + i + j * inner;
                s = mc_reduce_step(MC_OP_SUM, n->dtype, s, x[e]);
                c->out[e] = s;
            }
        }
}

/* softmax and log_softmax along attr.axis: rows of `len` elements `inner` apart. */
static void eval_softmax(const op_ctx *c)
{
    const mc_node *n = c->n;
    int64_t axis = n->attr.axis, len = n->shape[axis], inner = 1, outer = 1;
    for (int k = 0; k < axis; k++)
        outer *= n->shape[k];
    for (int k = (int)axis + 1; k < n->rank; k++)
        inner *= n->shape[k];
    const double *x = operand(c, 0);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * len * inner + i;
            double m = -INFINITY;
            for (int64_t j = 0; j < len; j++) {
                double v = x[base + j * inner];
                m = isnan(v) || isnan(m) ? NAN : (v > m ? v : m);
            }
            double s = 0;
            for (int64_t j = 0; j < len; j++)
                s += exp(x[base + j * inner] - m);
            for (int64_t j = 0; j < len; j++) {
                double d = x[base + j * inner] - m;
                c->out[base + j * inner] = n->op == MC_OP_SOFTMAX ? exp(d) / s : d - log(s);
            }
        }
}

/* layernorm (biased variance, eps inside the square root) and rmsnorm over the last axis. */
static void eval_norm(const op_ctx *c)
{
    const mc_node *n = c->n;
    int64_t len = n->shape[n->rank - 1], rows = c->numel / len;
    double eps = n->attr.value;
    const double *x = operand(c, 0), *w = operand(c, 1);
    const double *b = n->op == MC_OP_LAYERNORM ? operand(c, 2) : NULL;
    for (int64_t r = 0; r < rows; r++) {
        const double *row = x + r * len;
        double *out = c->out + r * len;
        if (n->op == MC_OP_LAYERNORM) {
            double mean = 0, var = 0;
            for (int64_t j = 0; j < len; j++)
                mean += row[j];
            mean /= (double)len;
            for (int64_t j = 0; j < len; j++)
                var += (row[j] - mean) * (row[j] - mean);
            var /= (double)len;
            double inv = 1.0 / sqrt(var + eps);
            for (int64_t j = 0; j < len; j++)
                out[j] = (row[j] - mean) * inv * w[j] + b[j];
        } else {
            double ms = 0;
            for (int64_t j = 0; j < len; j++)
                ms += row[j] * row[j];
            double inv = 1.0 / sqrt(ms / (double)len + eps);
            for (int64_t j = 0; j < len; j++)
                out[j] = row[j] * inv * w[j];
        }
    }
}

/* out[M][N] = a[M][K] @ b[K][N], every array contiguous. Each out[i][j] is the plain sum of
 * a[i][k] * b[k][j] in order k = 0, 1, .., K-1, exactly as the textbook triple loop computes
 * it; only the loop nest differs: k outside j, so both operands are read along rows, and rows
 * of out in blocks of 8, so that each row of b is reused from cache (the oracle has to get
 * through the full-size benchmark graphs of `minic bench`). */
static void gemm(const double *a, const double *b, double *out, int64_t M, int64_t N, int64_t K)
{
    for (int64_t i0 = 0; i0 < M; i0 += 8) {
        int64_t i1 = M - i0 > 8 ? i0 + 8 : M;
        for (int64_t e = i0 * N; e < i1 * N; e++)
            out[e] = 0;
        for (int64_t k = 0; k < K; k++) {
            const double *restrict brow = b + k * N;
            for (int64_t i = i0; i < i1; i++) {
                double aik = a[i * K + k], *restrict orow = out + i * N;
                for (int64_t j = 0; j < N; j++)
                    orow[j] += aik * brow[j];
            }
        }
    }
}

/* matmul: [batch.., M, K] @ [batch.., K, N] with the batch dimensions broadcast. */
static void eval_matmul(const op_ctx *c)
{
    const mc_node *n = c->n, *a = c->in[0], *b = c->in[1];
    int nb = n->rank - 2;
    int64_t M = n->shape[nb], N = n->shape[nb + 1], K = a->shape[a->rank - 1];
    int64_t a_own[MC_MAX_RANK], b_own[MC_MAX_RANK], a_bs[MC_MAX_RANK], b_bs[MC_MAX_RANK];
    contiguous_strides(a->shape, a->rank, a_own);
    contiguous_strides(b->shape, b->rank, b_own);
    broadcast_strides(a->shape, a_own, a->rank - 2, nb, a_bs);
    broadcast_strides(b->shape, b_own, b->rank - 2, nb, b_bs);
    int64_t batches = c->numel / (M * N), idx[MC_MAX_RANK];
    const double *av = operand(c, 0), *bv = operand(c, 1);
    for (int64_t t = 0; t < batches; t++) {
        unravel(t, n->shape, nb, idx);
        gemm(av + dot_index(idx, a_bs, nb), bv + dot_index(idx, b_bs, nb), c->out + t * M * N,
             M, N, K);
    }
}

/* matmul of a [M, C kh kw] and the im2col of x [N, C, *S] (ir/infer.c): each image's columns
 * [C kh kw, O] built in a scratch copy (0 in the padding), then the same gemm. */
static mc_status eval_matmul_im2col(const op_ctx *c)
{
    const mc_node *n = c->n, *x = c->in[1];
    const mc_attrs *at = &n->attr;
    int sr = at->nkernel;
    int64_t M = n->shape[1], O = n->shape[2], C = x->shape[1];
    int64_t L[2] = {x->shape[2], sr > 1 ? x->shape[3] : 1}, kk[2] = {at->kernel[0], sr > 1 ? at->kernel[1] : 1};
    int64_t s[2] = {at->stride[0], sr > 1 ? at->stride[1] : 1}, p[2] = {at->padding[0], sr > 1 ? at->padding[1] : 0};
    int64_t d[2] = {at->dilation[0], sr > 1 ? at->dilation[1] : 1};
    int64_t ow = sr > 1 ? (L[1] + 2 * p[1] - d[1] * (kk[1] - 1) - 1) / s[1] + 1 : 1, K = C * kk[0] * kk[1];
    double *cols = alloc_doubles(K * O);
    if (!cols)
        return mc_fail(MC_ERR_SYSTEM, "out of memory evaluating the graph");
    const double *av = operand(c, 0), *xv = operand(c, 1);
    for (int64_t b = 0; b < x->shape[0]; b++) {
        const double *xb = xv + b * C * L[0] * L[1];
        for (int64_t k = 0; k < K; k++) {
            int64_t ch = k / (kk[0] * kk[1]), ky = k / kk[1] % kk[0], kx = k % kk[1];
            if (at->kchunk > 0) { /* (c / kc, ky, kx, c % kc) */
                int64_t q = k / at->kchunk, r = q % (kk[0] * kk[1]);
                ch = q / (kk[0] * kk[1]) * at->kchunk + k % at->kchunk;
                ky = r / kk[1];
                kx = r % kk[1];
            }
            for (int64_t o = 0; o < O; o++) {
                int64_t iy = o / ow * s[0] - p[0] + ky * d[0], ix = o % ow * s[1] - p[1] + kx * d[1];
                bool in = iy >= 0 && iy < L[0] && ix >= 0 && ix < L[1];
                cols[k * O + o] = in ? xb[(ch * L[0] + iy) * L[1] + ix] : 0.0;
            }
        }
        gemm(av, cols, c->out + b * M * O, M, O, K);
    }
    free(cols);
    return MC_OK;
}

/* linear: x [.., IN] @ w[OUT, IN]^T + b[OUT]: w transposed once into a scratch copy, then the
 * same gemm (sums over k in order), then the bias. */
static mc_status eval_linear(const op_ctx *c)
{
    const mc_node *n = c->n, *x = c->in[0];
    int64_t in = x->shape[x->rank - 1], out = n->shape[n->rank - 1], rows = c->numel / out;
    const double *xv = operand(c, 0), *w = operand(c, 1);
    const double *b = n->nin > 2 && n->in[2] >= 0 ? operand(c, 2) : NULL;
    double *wt = alloc_doubles(in * out); /* w's own size: already checked */
    if (!wt)
        return mc_fail(MC_ERR_SYSTEM, "out of memory evaluating the graph");
    memset(wt, 0, sizeof(double) * (size_t)(in * out)); /* quiets -O2's maybe-uninitialized */
    for (int64_t o = 0; o < out; o++)
        for (int64_t k = 0; k < in; k++)
            wt[k * out + o] = w[o * in + k];
    gemm(xv, wt, c->out, rows, out, in);
    free(wt);
    for (int64_t r = 0; b && r < rows; r++)
        for (int64_t o = 0; o < out; o++)
            c->out[r * out + o] += b[o];
    return MC_OK;
}

/* transpose, expand, slice: the result read through strides into the operand. */
static void eval_view(const op_ctx *c)
{
    const mc_node *n = c->n, *x = c->in[0];
    int64_t own[MC_MAX_RANK], strides[MC_MAX_RANK], idx[MC_MAX_RANK], offset = 0;
    contiguous_strides(x->shape, x->rank, own);
    switch (n->op) {
    case MC_OP_TRANSPOSE:
        for (int k = 0; k < n->rank; k++) {
            int64_t from = n->attr.has_list ? n->attr.list[k] : n->rank - 1 - k;
            strides[k] = own[from];
        }
        break;
    case MC_OP_EXPAND: broadcast_strides(x->shape, own, x->rank, n->rank, strides); break;
    case MC_OP_SLICE:
        memcpy(strides, own, sizeof(int64_t) * (size_t)x->rank);
        offset = n->attr.start * own[n->attr.axis];
        strides[n->attr.axis] *= n->attr.step;
        break;
    case MC_OP_INPUT: case MC_OP_PARAM: case MC_OP_CONST: case MC_OP_NEG: case MC_OP_ABS:
    case MC_OP_EXP: case MC_OP_LOG: case MC_OP_SQRT: case MC_OP_RSQRT: case MC_OP_RECIP:
    case MC_OP_TANH: case MC_OP_SIGMOID: case MC_OP_RELU: case MC_OP_GELU: case MC_OP_GELU_TANH:
    case MC_OP_SILU: case MC_OP_SIN: case MC_OP_COS: case MC_OP_ERF:
    case MC_OP_FLOOR: case MC_OP_CEIL: case MC_OP_ROUND: case MC_OP_SIGN: case MC_OP_SOFTPLUS:
    case MC_OP_LEAKY_RELU: case MC_OP_CLIP: case MC_OP_ADD:
    case MC_OP_SUB: case MC_OP_MUL: case MC_OP_DIV: case MC_OP_POW: case MC_OP_MAXIMUM:
    case MC_OP_MINIMUM: case MC_OP_EQ: case MC_OP_NE: case MC_OP_LT: case MC_OP_LE: case MC_OP_GT:
    case MC_OP_GE: case MC_OP_WHERE: case MC_OP_CAST: case MC_OP_SUM: case MC_OP_MEAN:
    case MC_OP_AND: case MC_OP_OR: case MC_OP_XOR: case MC_OP_NOT:
    case MC_OP_MAX: case MC_OP_MIN: case MC_OP_SOFTMAX: case MC_OP_LOG_SOFTMAX:
    case MC_OP_ARGMAX: case MC_OP_ARGMIN: case MC_OP_CUMSUM: case MC_OP_GATHER: case MC_OP_UPDATE:
    case MC_OP_CONV: case MC_OP_MAXPOOL: case MC_OP_AVGPOOL: case MC_OP_PAD: case MC_OP_BATCHNORM:
    case MC_OP_LAYERNORM: case MC_OP_RMSNORM: case MC_OP_MATMUL: case MC_OP_LINEAR:
    case MC_OP_RESHAPE: case MC_OP_CONCAT: case MC_OP_IOTA: case MC_OP_FULL: case MC_OP_ALLREDUCE:
    case MC_NUM_OPS:
        MC_UNREACHABLE("not a view operator");
    }
    const double *xv = operand(c, 0);
    memset(idx, 0, sizeof idx);
    for (int64_t e = 0; e < c->numel; e++, next_index(idx, n->shape, n->rank))
        c->out[e] = xv[offset + dot_index(idx, strides, n->rank)];
}

/* pad, the pools, conv and batchnorm from their definitions (docs/FORMAT.md §2). */
static void eval_pad(const op_ctx *c)
{
    const mc_node *n = c->n, *x = c->in[0];
    int64_t idx[MC_MAX_RANK], own[MC_MAX_RANK];
    contiguous_strides(x->shape, x->rank, own);
    const double *xv = operand(c, 0);
    for (int64_t e = 0; e < c->numel; e++) {
        unravel(e, n->shape, n->rank, idx);
        int64_t off = 0;
        bool inside = true;
        for (int d = 0; d < n->rank; d++) {
            int64_t i = idx[d] - n->attr.pads[d];
            inside = inside && i >= 0 && i < x->shape[d];
            off += i * own[d];
        }
        c->out[e] = inside ? xv[off] : n->attr.value;
    }
}

/* One output element of a pool or a convolution at (b, o) over window positions: x [N, C, *S]. */
static void eval_window(const op_ctx *c)
{
    const mc_node *n = c->n, *x = c->in[0];
    const mc_attrs *at = &n->attr;
    int sr = x->rank - 2;
    int64_t S[2] = {x->shape[2], sr > 1 ? x->shape[3] : 1}, O[2] = {n->shape[2], sr > 1 ? n->shape[3] : 1};
    int64_t st[2] = {at->stride[0], sr > 1 ? at->stride[1] : 1}, pd[2] = {at->padding[0], sr > 1 ? at->padding[1] : 0};
    bool conv = n->op == MC_OP_CONV;
    const mc_node *w = conv ? c->in[1] : NULL;
    int64_t K[2] = {conv ? w->shape[2] : at->kernel[0], sr > 1 ? (conv ? w->shape[3] : at->kernel[1]) : 1};
    int64_t dl[2] = {conv ? at->dilation[0] : 1, sr > 1 && conv ? at->dilation[1] : 1};
    int64_t N = x->shape[0], C = x->shape[1], Co = n->shape[1], G = conv ? at->groups : 1;
    int64_t cpg = C / G, opg = Co / G;
    const double *xv = operand(c, 0), *wv = conv ? operand(c, 1) : NULL;
    const double *bv = conv && n->nin > 2 && n->in[2] >= 0 ? operand(c, 2) : NULL;
    for (int64_t b = 0; b < N; b++)
        for (int64_t o = 0; o < Co; o++)
            for (int64_t p = 0; p < O[0]; p++)
                for (int64_t q = 0; q < O[1]; q++) {
                    double acc = conv ? (bv ? bv[o] : 0.0) : (n->op == MC_OP_MAXPOOL ? -INFINITY : 0.0);
                    int64_t count = 0;
                    int64_t cfirst = conv ? (o / opg) * cpg : o, clast = conv ? cfirst + cpg : o + 1;
                    for (int64_t ci = cfirst; ci < clast; ci++)
                        for (int64_t u = 0; u < K[0]; u++)
                            for (int64_t v = 0; v < K[1]; v++) {
                                int64_t h = p * st[0] - pd[0] + u * dl[0], ww = q * st[1] - pd[1] + v * dl[1];
                                if (h < 0 || h >= S[0] || ww < 0 || ww >= S[1])
                                    continue; /* padding: 0 for conv, left out of a pool */
                                double xval = xv[((b * C + ci) * S[0] + h) * S[1] + ww];
                                count++;
                                if (conv)
                                    acc += xval * wv[((o * cpg + (ci - cfirst)) * K[0] + u) * K[1] + v];
                                else if (n->op == MC_OP_MAXPOOL)
                                    acc = isnan(xval) || isnan(acc) ? NAN : (xval > acc ? xval : acc);
                                else
                                    acc += xval;
                            }
                    if (n->op == MC_OP_AVGPOOL)
                        acc /= (double)count;
                    c->out[((b * Co + o) * O[0] + p) * O[1] + q] = acc;
                }
}

static void eval_batchnorm(const op_ctx *c)
{
    const mc_node *n = c->n;
    int64_t C = n->shape[1], inner = 1;
    for (int d = 2; d < n->rank; d++)
        inner *= n->shape[d];
    const double *x = operand(c, 0), *scale = operand(c, 1), *bias = operand(c, 2), *mean = operand(c, 3),
                 *var = operand(c, 4);
    for (int64_t e = 0; e < c->numel; e++) {
        int64_t ch = e / inner % C;
        c->out[e] = (x[e] - mean[ch]) / sqrt(var[ch] + n->attr.value) * scale[ch] + bias[ch];
    }
}

static void eval_concat(const op_ctx *c)
{
    const mc_node *n = c->n;
    int64_t axis = n->attr.axis, idx[MC_MAX_RANK] = {0}; /* {0}: quiets -O2's maybe-uninitialized */
    for (int64_t e = 0; e < c->numel; e++) {
        unravel(e, n->shape, n->rank, idx);
        int64_t pos = idx[axis];
        for (int i = 0; i < n->nin; i++) { /* find the operand this position falls in */
            const mc_node *x = &c->g->nodes[n->in[i]];
            if (pos < x->shape[axis]) {
                int64_t own[MC_MAX_RANK];
                contiguous_strides(x->shape, x->rank, own);
                idx[axis] = pos;
                c->out[e] = operand(c, i)[dot_index(idx, own, x->rank)];
                break;
            }
            pos -= x->shape[axis];
        }
    }
}

static void eval_create(const op_ctx *c)
{
    const mc_node *n = c->n;
    int64_t idx[MC_MAX_RANK];
    for (int64_t e = 0; e < c->numel; e++) {
        if (n->op == MC_OP_IOTA) {
            unravel(e, n->shape, n->rank, idx);
            c->out[e] = (double)idx[n->attr.axis];
        } else {
            c->out[e] = n->attr.value;
        }
    }
}

/* gather: element (a.., j.., b..) of the result is x[a.., idx[j..] (+ n when negative), b..];
 * an index outside [-n, n) is an input error naming the operator's place. */
static mc_status eval_gather(const op_ctx *c)
{
    const mc_node *n = c->n, *x = c->in[0], *ix = c->in[1];
    int axis = (int)n->attr.axis, ir = ix->rank;
    int64_t size = x->shape[axis], xs[MC_MAX_RANK], is[MC_MAX_RANK], idx[MC_MAX_RANK];
    contiguous_strides(x->shape, x->rank, xs);
    contiguous_strides(ix->shape, ix->rank, is);
    const double *xv = operand(c, 0), *iv = operand(c, 1);
    memset(idx, 0, sizeof idx);
    for (int64_t e = 0; e < c->numel; e++, next_index(idx, n->shape, n->rank)) {
        int64_t io = 0, xo = 0;
        for (int d = 0; d < ir; d++)
            io += idx[axis + d] * is[d];
        int64_t i = (int64_t)iv[io];
        if (i < -size || i >= size) {
            if (n->line > 0)
                return mc_fail_at(MC_ERR_INPUT, c->g->file, c->g->text, n->line, n->col,
                                  "gather: index %lld is outside [%lld, %lld)", (long long)i,
                                  (long long)-size, (long long)size);
            return mc_fail(MC_ERR_INPUT, "gather: index %lld is outside [%lld, %lld)", (long long)i,
                           (long long)-size, (long long)size);
        }
        if (i < 0)
            i += size;
        for (int d = 0; d < axis; d++)
            xo += idx[d] * xs[d];
        xo += i * xs[axis];
        for (int d = axis + 1; d < x->rank; d++)
            xo += idx[d - 1 + ir] * xs[d];
        c->out[e] = xv[xo];
    }
    return MC_OK;
}

/* update: cache, with new at [pos, pos + len) along axis; a pos outside [0, n - len] is an
 * input error naming the operator's place (the message every backend gives). */
static mc_status eval_update(const op_ctx *c)
{
    const mc_node *n = c->n, *cache = c->in[0], *nw = c->in[1];
    int axis = (int)n->attr.axis, r = cache->rank;
    int64_t size = cache->shape[axis], len = nw->shape[axis], idx[MC_MAX_RANK], ns[MC_MAX_RANK];
    double p = operand(c, 2)[0];
    if (p < 0 || p > (double)(size - len))
        return mc_update_pos_fail(c->g, n->line, n->col, (int64_t)p, 0, len, size, axis);
    int64_t pos = (int64_t)p;
    contiguous_strides(nw->shape, r, ns);
    const double *cv = operand(c, 0), *nv = operand(c, 1);
    memset(idx, 0, sizeof idx);
    for (int64_t e = 0; e < c->numel; e++, next_index(idx, n->shape, n->rank)) {
        int64_t j = idx[axis] - pos;
        if (j < 0 || j >= len) {
            c->out[e] = cv[e];
            continue;
        }
        int64_t o = 0;
        for (int d = 0; d < r; d++)
            o += (d == axis ? j : idx[d]) * ns[d];
        c->out[e] = nv[o];
    }
    return MC_OK;
}

static mc_status eval_leaf(const mc_graph *g, int i, const void *const *inputs, const op_ctx *c)
{
    const mc_node *n = c->n;
    if (n->op == MC_OP_CONST) {
        for (int64_t e = 0; e < c->numel; e++)
            c->out[e] = n->attr.value;
        return MC_OK;
    }
    if (!inputs || !inputs[i])
        return mc_fail(MC_ERR_INPUT, "mc_graph_eval: %s '%s' has no value",
                       n->op == MC_OP_PARAM ? "param" : "input", n->name ? n->name : "?");
    for (int64_t e = 0; e < c->numel; e++)
        c->out[e] = mc_load_element(inputs[i], n->dtype, e);
    return MC_OK;
}

static mc_status eval_node(const mc_graph *g, int i, const void *const *inputs, const double *const *vals,
                           double *out, int64_t numel)
{
    const mc_node *n = &g->nodes[i];
    op_ctx c = {.g = g, .n = n, .vals = vals, .out = out, .numel = numel};
    for (int k = 0; k < n->nin && k < 3; k++)
        c.in[k] = n->in[k] >= 0 ? &g->nodes[n->in[k]] : NULL;
    switch (mc_op_table[n->op].kind) {
    case MC_KIND_LEAF: return eval_leaf(g, i, inputs, &c);
    case MC_KIND_UNARY: eval_unary(&c); break;
    case MC_KIND_BINARY:
    case MC_KIND_COMPARE:
    case MC_KIND_SELECT: eval_broadcast(&c); break;
    case MC_KIND_CAST: eval_cast(&c); break;
    case MC_KIND_REDUCE:
        if (n->op == MC_OP_ARGMAX || n->op == MC_OP_ARGMIN) {
            eval_argextreme(&c);
            break;
        }
        return eval_reduce(&c);
    case MC_KIND_NORM:
        if (n->op == MC_OP_CUMSUM)
            eval_cumsum(&c);
        else if (n->op == MC_OP_SOFTMAX || n->op == MC_OP_LOG_SOFTMAX)
            eval_softmax(&c);
        else
            eval_norm(&c);
        break;
    case MC_KIND_MATMUL:
        if (n->op != MC_OP_MATMUL)
            return eval_linear(&c);
        if (n->attr.nkernel > 0)
            return eval_matmul_im2col(&c);
        eval_matmul(&c);
        break;
    case MC_KIND_SHAPE:
        if (n->op == MC_OP_RESHAPE)
            memcpy(out, vals[n->in[0]], (size_t)numel * sizeof(double));
        else if (n->op == MC_OP_CONCAT)
            eval_concat(&c);
        else
            eval_view(&c);
        break;
    case MC_KIND_CREATE: eval_create(&c); break;
    case MC_KIND_SPATIAL:
        if (n->op == MC_OP_PAD)
            eval_pad(&c);
        else if (n->op == MC_OP_BATCHNORM)
            eval_batchnorm(&c);
        else
            eval_window(&c);
        break;
    case MC_KIND_GATHER: return n->op == MC_OP_UPDATE ? eval_update(&c) : eval_gather(&c);
    case MC_KIND_COLLECTIVE: MC_UNREACHABLE("allreduce is evaluated across the ranks");
    }
    return MC_OK;
}

/* ---- the walk ----------------------------------------------------------------------------- */

/* allreduce: the sum over the ranks of operand x, in rank order (the same doubles on every
 * rank); one rank: x itself. vals[r] is rank r's value array. */
static void eval_allreduce(double *const *const *vals, int nranks, int x, double *out, int64_t numel)
{
    memcpy(out, vals[0][x], (size_t)numel * sizeof(double));
    for (int r = 1; r < nranks; r++)
        for (int64_t e = 0; e < numel; e++)
            out[e] += vals[r][x][e];
}

/* Do the rank graphs have the one node structure the lockstep walk needs? */
static mc_status check_ranks(const mc_graph *const *g, int nranks)
{
    for (int r = 0; r < nranks; r++) {
        if (!g[r] || g[r]->failed || g[r]->noutputs == 0)
            return mc_fail(MC_ERR_INPUT, "mc_graph_eval: rank %d's graph is missing or has no outputs", r);
        if (mc_graph_num_syms(g[r]) > 0)
            return mc_fail(MC_ERR_INPUT,
                           "mc_graph_eval: the graph has symbolic dimensions (mc_graph_specialize it)");
        if (r == 0)
            continue;
        bool same = g[r]->nnodes == g[0]->nnodes && g[r]->noutputs == g[0]->noutputs &&
                    memcmp(g[r]->outputs, g[0]->outputs, sizeof(int32_t) * (size_t)g[0]->noutputs) == 0;
        for (int i = 0; same && i < g[0]->nnodes; i++) {
            const mc_node *a = &g[0]->nodes[i], *b = &g[r]->nodes[i];
            same = a->op == b->op && a->nin == b->nin &&
                   (a->nin == 0 || memcmp(a->in, b->in, sizeof(int32_t) * (size_t)a->nin) == 0);
        }
        if (!same)
            return mc_fail(MC_ERR_INPUT, "mc_graph_eval_ranks: rank %d's graph differs from rank 0's in its "
                           "nodes, operands or outputs", r);
    }
    return MC_OK;
}

mc_status mc_graph_eval_ranks(const mc_graph *const *g, int nranks, const void *const *const *inputs,
                              bool exact, double **outputs)
{
    if (!g || nranks < 1 || !outputs)
        return mc_fail(MC_ERR_INPUT, "mc_graph_eval: no graph or no output array");
    for (int r = 0; r < nranks; r++)
        for (int p = 0; g[r] && p < g[r]->noutputs; p++)
            outputs[r * g[0]->noutputs + p] = NULL;
    mc_status st = check_ranks(g, nranks);
    if (st != MC_OK)
        return st;
    int nn = g[0]->nnodes, no = g[0]->noutputs;
    double ***vals = calloc((size_t)nranks, sizeof *vals);
    int *last_use = malloc(((size_t)nn + 1) * sizeof *last_use); /* -1: dead */
    bool ok = vals && last_use;
    for (int r = 0; ok && r < nranks; r++)
        ok = (vals[r] = calloc((size_t)nn + 1, sizeof *vals[r])) != NULL;
    if (!ok) {
        st = mc_fail(MC_ERR_SYSTEM, "out of memory evaluating the graph");
        goto done;
    }
    /* Liveness, backwards from the outputs: last_use[j] is the last node that reads j. */
    for (int i = 0; i < nn; i++)
        last_use[i] = -1;
    for (int p = 0; p < no; p++) {
        MC_ASSERT(g[0]->outputs[p] >= 0 && g[0]->outputs[p] < nn);
        last_use[g[0]->outputs[p]] = g[0]->outputs[p];
    }
    for (int i = nn - 1; i >= 0; i--) {
        if (last_use[i] < 0)
            continue;
        const mc_node *n = &g[0]->nodes[i];
        for (int k = 0; k < n->nin; k++)
            if (n->in[k] >= 0 && last_use[n->in[k]] < i)
                last_use[n->in[k]] = i;
    }
    for (int i = 0; i < nn; i++) {
        if (last_use[i] < 0)
            continue;
        for (int r = 0; r < nranks; r++) {
            const mc_node *n = &g[r]->nodes[i];
            int64_t numel;
            if (!checked_numel(n->shape, n->rank, &numel)) {
                st = mc_fail(MC_ERR_INPUT, "mc_graph_eval: value %d is too large to evaluate", i);
                goto done;
            }
            vals[r][i] = alloc_doubles(numel);
            if (!vals[r][i]) {
                st = mc_fail(MC_ERR_SYSTEM, "out of memory evaluating the graph (%lld elements)",
                             (long long)numel);
                goto done;
            }
            if (n->op == MC_OP_ALLREDUCE)
                continue; /* when every rank has its operand */
            st = eval_node(g[r], i, inputs ? inputs[r] : NULL, (const double *const *)vals[r], vals[r][i], numel);
            if (st != MC_OK)
                goto done;
        }
        for (int r = 0; r < nranks; r++) {
            const mc_node *n = &g[r]->nodes[i];
            int64_t numel = mc_node_numel(n);
            if (n->op == MC_OP_ALLREDUCE)
                eval_allreduce((double *const *const *)vals, nranks, n->in[0], vals[r][i], numel);
            double *v = vals[r][i];
            bool round_it = !exact || !mc_dtype_is_float(n->dtype);
            if (round_it && n->op != MC_OP_INPUT && n->op != MC_OP_PARAM)
                for (int64_t e = 0; e < numel; e++)
                    v[e] = mc_round_to_dtype(v[e], n->dtype);
            else if (n->dtype == MC_F16 || n->dtype == MC_BF16) /* exact, but within the type's range */
                for (int64_t e = 0; e < numel; e++)
                    v[e] = mc_saturate_to_dtype(v[e], n->dtype);
            for (int p = 0; p < no; p++) {
                if (g[r]->outputs[p] != i)
                    continue;
                double **o = &outputs[r * no + p];
                *o = alloc_doubles(numel);
                if (!*o) {
                    st = mc_fail(MC_ERR_SYSTEM, "out of memory evaluating the graph");
                    goto done;
                }
                memcpy(*o, v, (size_t)numel * sizeof(double));
            }
        }
        /* Free what this node was the last reader of (and itself, if nothing reads it). */
        const mc_node *n = &g[0]->nodes[i];
        for (int r = 0; r < nranks; r++) {
            for (int k = 0; k < n->nin; k++) {
                int j = n->in[k];
                if (j >= 0 && last_use[j] == i) {
                    free(vals[r][j]);
                    vals[r][j] = NULL;
                }
            }
            if (last_use[i] == i) {
                free(vals[r][i]);
                vals[r][i] = NULL;
            }
        }
    }
done:
    for (int r = 0; vals && r < nranks; r++) {
        for (int i = 0; vals[r] && i < nn; i++)
            free(vals[r][i]);
        free(vals[r]);
    }
    if (st != MC_OK)
        for (int p = 0; p < nranks * no; p++) {
            free(outputs[p]);
            outputs[p] = NULL;
        }
    free(vals);
    free(last_use);
    return st;
}

mc_status mc_graph_eval(const mc_graph *g, const void *const *inputs, bool exact, double **outputs)
{
    if (!g || !outputs)
        return mc_fail(MC_ERR_INPUT, "mc_graph_eval: no graph or no output array");
    for (int p = 0; p < g->noutputs; p++)
        outputs[p] = NULL;
    if (g->failed || g->noutputs == 0)
        return mc_fail(MC_ERR_INPUT, "mc_graph_eval: the graph has no outputs");
    return mc_graph_eval_ranks(&g, 1, &inputs, exact, outputs);
}
