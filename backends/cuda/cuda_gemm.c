/* How a GEMM kernel runs on the GPU: cuBLASLt with as much of its epilogue as cuBLASLt can do.
 *
 * cuBLASLt computes D = epilogue(alpha * op(A) op(B) + beta * C) column-major, where the
 * epilogue adds a bias vector along D's rows and then applies ReLU or (tanh) GELU. A kernel's
 * epilogue block is matched against that shape, outermost first:
 *
 *     store( [residual +] act( [bias +] [alpha *] acc ) )     act: relu, gelu_tanh, none
 *
 * with a residual (C, beta = 1) only when there is no activation, since cuBLASLt adds C before
 * the activation. minic's `gelu` (the erf form) is mapped to cuBLASLt's GELU only when the
 * stored dtype is f16 or bf16: the two forms differ by at most 4.7e-4 in absolute value, under
 * 1/20 of bf16's rounding step where it matters, within docs/FORMAT.md §6's 1e-2; f32 outputs
 * keep the exact erf form in a generated kernel. The same holds for `gelu_tanh` itself:
 * cuBLASLt's GELU epilogue is an approximation of the tanh form, harmless under f16/bf16
 * rounding but not in f32, where it tripled GPT-2 small's error against float64 (3.8e-6
 * against Hugging Face's own 1.3e-6, H100, 2026-11-25; a later run with the generated epilogue,
 * whose code was lost, gave 1.18e-6 against 1.28e-6):
 * an f32 gelu_tanh runs in the generated epilogue kernel (tanhf). Anything else (several stores, masks, other
 * operators) makes cuBLASLt write the f32 accumulator to a scratch buffer and a generated
 * pointwise kernel run the whole epilogue.
 *
 * Operands map by their strides: row-major D[M,N] = A[M,K] B[K,N] is column-major
 * D'(N x M) = B'(N x K) A'(K x M); a matrix whose rows are contiguous is "N", one whose
 * columns are contiguous is "T". Batch dimensions collapse into one strided batch where every
 * operand's strides allow; the rest are looped over, one cuBLASLt call per index. A layout
 * that is neither (a broadcast along K, say) makes the whole kernel a generated tiled GEMM.
 */
#include "backends/cuda/cuda.h"

#include <stdlib.h>
#include <string.h>

static bool contains_acc(const kir_kernel *k, int i, int depth)
{
    if (depth > 64)
        return true; /* be conservative */
    const kir_instr *ins = &k->code[i];
    if (ins->kind == KI_ACC)
        return true;
    if (ins->kind != KI_OP)
        return false;
    int nin = ins->op == MC_OP_CAST ? 1 : mc_op_table[ins->op].max_in;
    for (int a = 0; a < nin && a < 3; a++)
        if (contains_acc(k, ins->arg[a], depth + 1))
            return true;
    return false;
}

/* Map an operand whose element (r, c) is at r * sr + c * sc into column-major form with rows
 * `rows` (index r) and cols `cols` (index c). A side of one lets any stride pass along it,
 * unless that side is a symbolic size (`vary`: bit 0 the rows, bit 1 the cols): a layout chosen
 * for one binding's 1 would not hold for the next binding's sizes. */
static bool map_matrix(int64_t rows, int64_t cols, int64_t sr, int64_t sc, mc_lt_matrix *m, int vary)
{
    bool one_row = rows == 1 && !(vary & 1), one_col = cols == 1 && !(vary & 2);
    /* rows contiguous: the stored matrix is rows x cols, op N */
    int64_t ld = one_col ? rows : sc;
    if ((one_row || sr == 1) && ld >= rows && ld > 0) {
        m->trans = false;
        m->rows = rows;
        m->cols = cols;
        m->ld = ld;
        return true;
    }
    /* columns contiguous: the stored matrix is cols x rows, op T */
    ld = one_row ? cols : sr;
    if ((one_col || sc == 1) && ld >= cols && ld > 0) {
        m->trans = true;
        m->rows = cols;
        m->cols = rows;
        m->ld = ld;
        return true;
    }
    return false;
}

static bool is_float_dtype(mc_dtype d)
{
    return d == MC_F32 || d == MC_F16 || d == MC_BF16;
}

/* Match the epilogue; fills epi, alpha, bias, residual view (-1: none). */
static const char *match_epilogue(const kir_program *kp, const kir_kernel *k,
                                  mc_cuda_gemm_plan *p, int *out_view, int *res_view)
{
    *out_view = *res_view = -1;
    if (k->nstores != 1 || k->nblocks != 1)
        return "more than one store";
    int ov = k->stores[0].view;
    mc_dtype dt = kp->buffers[k->views[ov].buffer].dtype;
    if (!is_float_dtype(dt))
        return "non-float output";
    int nb = k->rank - 2;
    int x = k->stores[0].value;
    bool act = false, bias = false;
    /* residual */
    const kir_instr *in = &k->code[x];
    if (in->kind == KI_OP && in->op == MC_OP_ADD) {
        int a0 = in->arg[0], a1 = in->arg[1];
        bool c0 = contains_acc(k, a0, 0), c1 = contains_acc(k, a1, 0);
        int other = c0 && !c1 ? a1 : (!c0 && c1 ? a0 : -1);
        if (other >= 0 && k->code[other].kind == KI_LOAD) {
            const kir_view *w = &k->views[k->code[other].view];
            bool is_bias = true;
            for (int d = 0; d < k->rank - 1; d++)
                if (w->stride[d] != 0 && k->shape[d] != 1)
                    is_bias = false;
            if (!is_bias) {
                if (kp->buffers[w->buffer].dtype != dt)
                    return "residual of another dtype";
                *res_view = k->code[other].view;
                x = c0 ? a0 : a1;
            }
        }
    }
    in = &k->code[x];
    if (in->kind == KI_OP && in->op == MC_OP_GELU_TANH && dt == MC_F32)
        return "gelu_tanh in f32 (cuBLASLt's GELU is an approximation)";
    if (in->kind == KI_OP && (in->op == MC_OP_RELU || in->op == MC_OP_GELU_TANH ||
                              (in->op == MC_OP_GELU && dt != MC_F32))) {
        if (*res_view >= 0)
            return "residual after an activation";
        act = true;
        p->epi = in->op == MC_OP_RELU ? MC_LT_EPI_RELU : MC_LT_EPI_GELU;
        x = in->arg[0];
    }
    in = &k->code[x];
    if (in->kind == KI_OP && in->op == MC_OP_ADD) {
        int a0 = in->arg[0], a1 = in->arg[1];
        bool c0 = contains_acc(k, a0, 0), c1 = contains_acc(k, a1, 0);
        int other = c0 && !c1 ? a1 : (!c0 && c1 ? a0 : -1);
        if (other < 0 || k->code[other].kind != KI_LOAD)
            return "an add cuBLASLt cannot take";
        const kir_view *w = &k->views[k->code[other].view];
        for (int d = 0; d < k->rank - 1; d++)
            if (w->stride[d] != 0 && k->shape[d] != 1)
                return "an add that is not a bias";
        if (w->stride[k->rank - 1] != 1 && k->shape[k->rank - 1] != 1)
            return "a strided bias";
        if (kp->buffers[w->buffer].dtype != dt)
            return "a bias of another dtype";
        bias = true;
        p->bias_buffer = w->buffer;
        p->bias_offset = w->offset;
        x = c0 ? a0 : a1;
    }
    in = &k->code[x];
    if (in->kind == KI_OP && in->op == MC_OP_MUL) {
        int a0 = in->arg[0], a1 = in->arg[1];
        int cst = k->code[a0].kind == KI_CONST ? a0 : (k->code[a1].kind == KI_CONST ? a1 : -1);
        int other = cst == a0 ? a1 : a0;
        if (cst >= 0 && k->code[other].kind == KI_ACC) {
            p->alpha = (float)k->code[cst].value;
            x = other;
        }
    }
    if (k->code[x].kind != KI_ACC)
        return "operators cuBLASLt has no epilogue for";
    (void)nb;
    if (bias)
        p->epi = p->epi == MC_LT_EPI_RELU ? MC_LT_EPI_RELU_BIAS :
                 p->epi == MC_LT_EPI_GELU ? MC_LT_EPI_GELU_BIAS : MC_LT_EPI_BIAS;
    (void)act;
    *out_view = ov;
    return NULL;
}

/* Row-major [M, N] output-like operand (D or C) into cuBLASLt's column-major N x M (`vary` as
 * map_matrix's: bit 0 M symbolic, bit 1 N). */
static bool map_output(const kir_kernel *k, const int64_t *stride, mc_lt_matrix *m, int vary)
{
    int nb = k->rank - 2;
    int64_t M = k->shape[nb], N = k->shape[nb + 1];
    int64_t sm = stride[nb], sn = stride[nb + 1];
    if ((N != 1 || (vary & 2)) && sn != 1)
        return false;
    int64_t ld = M == 1 && !(vary & 1) ? N : sm;
    if (ld < N || ld <= 0)
        return false;
    m->trans = false;
    m->rows = N;
    m->cols = M;
    m->ld = ld;
    return true;
}

/* Tensor-core GEMMs (f16/bf16) whose output rows are not 16-byte aligned leave cuBLASLt's
 * fast kernels: measured on an H100 (docs/PERFORMANCE.md, GPT-2's LM head [4096, 768] x
 * [768, N] in bf16): N = 50257 takes 3084 us, N = 50264 456 us; PyTorch 3447 and 549 us. A
 * padded copy into a compact output costs 547 us more (the copy alone, bandwidth-bound), so
 * only an output that nothing else reads is padded: the graph output written whole by this
 * GEMM, whose rows are padded in device memory and dropped by the download. f32 (no tensor
 * cores) runs at the same speed either way (6153 vs 6177 us): not padded.
 * MINIC_CUDA_GEMM_PAD=0 turns it off (for measuring). */
static int64_t pad_output_ld(const kir_program *kp, int ki, int ov)
{
    const kir_kernel *k = &kp->kernels[ki];
    const kir_view *o = &k->views[ov];
    const kir_buffer *buf = &kp->buffers[o->buffer];
    const char *e = getenv("MINIC_CUDA_GEMM_PAD");
    if ((e && strcmp(e, "0") == 0) || buf->kind != KBUF_OUTPUT || o->offset != 0 ||
        (buf->dtype != MC_F16 && buf->dtype != MC_BF16))
        return 0;
    int64_t n = k->shape[k->rank - 1], rows = 1, s = 1;
    for (int d = k->rank - 1; d >= 0; d--) {
        if (k->shape[d] != 1 && o->stride[d] != s)
            return 0; /* not the whole buffer, row-major */
        s *= k->shape[d];
        if (d < k->rank - 1)
            rows *= k->shape[d];
    }
    int per = 16 / (int)mc_dtype_size(buf->dtype);
    if (s != buf->numel || rows < 2 || n % per == 0)
        return 0;
    /* nothing else may see the buffer: no other view of it, in this kernel or another */
    for (int i = 0; i < kp->nkernels; i++)
        for (int v = 0; v < kp->kernels[i].nviews; v++)
            if (kp->kernels[i].views[v].buffer == o->buffer && !(i == ki && v == ov))
                return 0;
    return (n + per - 1) / per * per;
}

/* kp's kernel ki; sk, where given, the same kernel in the symbolic list, whose symbolic M, N
 * and K keep the layout what every binding can take. */
static void plan_layout(const kir_program *kp, int ki, mc_cuda_gemm_plan *p, bool may_pad, const kir_kernel *sk)
{
    const kir_kernel *k = &kp->kernels[ki];
    int vm = sk && mc_dim_is_sym(sk->gemm.m), vn = sk && mc_dim_is_sym(sk->gemm.n), vk = sk && mc_dim_is_sym(sk->gemm.k);
    memset(p, 0, sizeof *p);
    p->bias_buffer = -1;
    p->pad_buffer = -1;
    p->alpha = 1.0f;
    p->tf32 = k->gemm.tf32;
    int nb = k->rank - 2;
    const kir_gemm *g = &k->gemm;
    const kir_view *A = &k->views[g->a], *B = &k->views[g->b];
    mc_dtype ta = kp->buffers[A->buffer].dtype, tb = kp->buffers[B->buffer].dtype;
    if (nb < 0 || ta != tb || !is_float_dtype(ta) || g->m <= 0 || g->n <= 0 || g->k <= 0)
        return;
    p->m = g->n;
    p->n = g->m;
    p->k = g->k;
    /* cuBLASLt A = minic B: element (n, k) at n * sBn + k * sBk */
    if (!map_matrix(g->n, g->k, B->stride[nb + 1], B->stride[nb], &p->a, vn | vk << 1))
        return;
    /* cuBLASLt B = minic A: element (k, m) at k * sAk + m * sAm */
    if (!map_matrix(g->k, g->m, A->stride[nb + 1], A->stride[nb], &p->b, vk | vm << 1))
        return;
    p->a.buffer = B->buffer, p->a.offset = B->offset, p->a.dtype = tb;
    p->b.buffer = A->buffer, p->b.offset = A->offset, p->b.dtype = ta;

    int out_view, res_view;
    p->why_not_full = match_epilogue(kp, k, p, &out_view, &res_view);
    p->full = p->why_not_full == NULL;
    int64_t dstride[MC_MAX_RANK], cstride[MC_MAX_RANK];
    if (p->full) {
        const kir_view *o = &k->views[out_view];
        memcpy(dstride, o->stride, sizeof dstride);
        int64_t ld = res_view < 0 && may_pad ? pad_output_ld(kp, ki, out_view) : 0;
        if (ld > 0) {
            /* the output as [rows, ld]: row-major strides over the padded rows */
            int64_t s = 1;
            for (int d = k->rank - 1; d >= 0; d--) {
                dstride[d] = s;
                s *= d == k->rank - 1 ? ld : k->shape[d];
            }
            p->pad_buffer = o->buffer;
            p->pad_cols = k->shape[k->rank - 1];
            p->pad_rows = kp->buffers[o->buffer].numel / p->pad_cols;
            p->pad_ld = ld;
        }
        if (!map_output(k, dstride, &p->d, vm | vn << 1)) {
            p->full = false;
            p->why_not_full = "an output layout cuBLASLt cannot write";
            p->pad_buffer = -1;
        } else {
            p->d.buffer = o->buffer;
            p->d.offset = o->offset;
            p->d.dtype = kp->buffers[o->buffer].dtype;
        }
    }
    if (p->full && res_view >= 0) {
        const kir_view *r = &k->views[res_view];
        memcpy(cstride, r->stride, sizeof cstride);
        if (!map_output(k, cstride, &p->c, vm | vn << 1)) {
            p->full = false;
            p->why_not_full = "a residual layout cuBLASLt cannot read";
        } else {
            p->c.buffer = r->buffer;
            p->c.offset = r->offset;
            p->c.dtype = kp->buffers[r->buffer].dtype;
            p->beta = 1.0f;
        }
    }
    if (!p->full)
        p->pad_buffer = -1;
    if (!p->full) {
        /* D is the contiguous scratch [batch.., M, N]; the epilogue kernel does the rest. When
         * every store is to one half type, the scratch holds that type. */
        mc_dtype sd = k->nstores ? kp->buffers[k->views[k->stores[0].view].buffer].dtype : MC_F32;
        for (int s2 = 1; s2 < k->nstores; s2++)
            if (kp->buffers[k->views[k->stores[s2].view].buffer].dtype != sd)
                sd = MC_F32;
        if (sd != MC_F16 && sd != MC_BF16)
            sd = MC_F32;
        p->scratch_dtype = sd;
        p->epi = MC_LT_EPI_DEFAULT;
        p->alpha = 1.0f;
        p->beta = 0.0f;
        p->bias_buffer = -1;
        int64_t s = 1;
        for (int d = k->rank - 1; d >= 0; d--) {
            dstride[d] = s;
            s *= k->shape[d];
        }
        p->scratch_elems = s;
        map_output(k, dstride, &p->d, vm | vn << 1);
        p->d.buffer = -1;
        p->d.offset = 0;
        p->d.dtype = sd;
        res_view = -1;
    }
    if (res_view < 0) {
        p->c = p->d; /* C unused (beta 0) but described like D */
        memcpy(cstride, dstride, sizeof cstride);
    }
    /* batch: collapse from the innermost batch dim outward while every operand agrees */
    const int64_t *st[4] = {B->stride, A->stride, cstride, dstride};
    mc_lt_matrix *mat[4] = {&p->a, &p->b, &p->c, &p->d};
    int inner = -1;
    for (int d = nb - 1; d >= 0; d--)
        if (k->shape[d] != 1) {
            inner = d;
            break;
        }
    p->batch = 1;
    int first_outer = -1; /* dims [0, first_outer] are looped over */
    if (inner >= 0) {
        p->batch = k->shape[inner];
        for (int i = 0; i < 4; i++)
            mat[i]->batch_stride = st[i][inner];
        first_outer = inner - 1;
        for (int d = inner - 1; d >= 0; d--) {
            if (k->shape[d] == 1) {
                first_outer = d - 1;
                continue;
            }
            bool ok = true;
            for (int i = 0; i < 4; i++)
                if (st[i][d] != mat[i]->batch_stride * p->batch)
                    ok = false;
            if (!ok)
                break;
            p->batch *= k->shape[d];
            first_outer = d - 1;
        }
    }
    p->nouter = first_outer + 1;
    p->calls = 1;
    for (int d = 0; d < p->nouter; d++) {
        p->outer_shape[d] = k->shape[d];
        p->calls *= k->shape[d];
        for (int i = 0; i < 4; i++)
            mat[i]->outer_stride[d] = st[i][d];
    }
    if (p->batch > 1 && p->d.batch_stride == 0)
        return; /* several results into one matrix: not a GEMM cuBLASLt can do */
    /* A batch over shared weights whose rows follow each other in memory (a linear layer on
     * [batch, M, K]) is one taller GEMM: fold the batch into M (cuBLASLt's n). */
    if (p->batch > 1 && p->a.batch_stride == 0 && !p->b.trans &&
        p->b.batch_stride == p->n * p->b.ld && p->d.batch_stride == p->n * p->d.ld &&
        p->c.batch_stride == p->n * p->c.ld) {
        p->n *= p->batch;
        p->b.cols *= p->batch;
        p->c.cols *= p->batch;
        p->d.cols *= p->batch;
        p->batch = 1;
        p->a.batch_stride = p->b.batch_stride = p->c.batch_stride = p->d.batch_stride = 0;
    }
    if (p->pad_buffer >= 0 && !p->a.trans && p->a.ld < p->pad_ld) {
        /* A's columns too short to read pad_ld rows from: planned again, unpadded (D's layout
         * above was made for the padded rows; a [K, N] weight of odd N, as a plain matmul's,
         * wrote f16 results with the padded pitch and downloaded them without it) */
        plan_layout(kp, ki, p, false, sk);
        return;
    }
    if (p->pad_buffer >= 0) {
        /* The padded rows are computed too: cuBLASLt's m is pad_ld, a multiple of 8, as the fast
         * kernels want (padding only D's ld measured no faster: 3036 vs 3060 us). A's extra
         * rows (and the bias's extra elements) are read past the operand's end: whatever they
         * hold lands only in D's padding, which is never read; the allocation ends with
         * pad_slack bytes so these reads stay in it. */
        int64_t extra = p->pad_ld - p->m;
        if (p->a.trans)
            p->a.cols = p->pad_ld;
        else
            p->a.rows = p->pad_ld;
        p->m = p->pad_ld;
        p->d.rows = p->c.rows = p->pad_ld;
        p->pad_slack = (extra * (p->a.trans ? p->a.ld : 1) + extra) *
                       (int64_t)mc_dtype_size(p->a.dtype);
    }
    p->use_lt = true;
}

/* Measured (docs/PERFORMANCE.md): four 32x256x256 f32 GEMMs with bias + ReLU replay in 25.6 us
 * as cuBLASLt calls (H200) and in 12.7 us as warp-dot kernels (H100), about 3 us a layer. The
 * limits are a judgment, not a measured crossover: the warp-dot kernel does no tiling through
 * shared memory, so beyond a few million multiply-adds or a few dozen rows cuBLASLt's tiled
 * kernels should win. */
#define SMALL_ROWS 64
#define SMALL_MACS ((int64_t)1 << 24)

static bool gemm_small(const kir_kernel *k)
{
    int nb = k->rank - 2;
    const kir_gemm *g = &k->gemm;
    if (k->category != KIR_GEMM || nb < 0 || g->m <= 0 || g->n <= 0 || g->k <= 0)
        return false;
    /* both operands contiguous along K: a warp's lanes read consecutive addresses */
    if (k->views[g->a].stride[nb + 1] != 1 || k->views[g->b].stride[nb] != 1)
        return false;
    int64_t rows = g->m;
    for (int d = 0; d < nb; d++)
        rows *= k->shape[d];
    return rows <= SMALL_ROWS && g->n <= SMALL_MACS / rows / g->k;
}

/* A GEMM of few rows (a decoder step: M = batch = 1..8) reads each weight once and does 2M
 * flops per weight element: at M = 1 it is a matrix-vector product, bound by reading B. On an
 * H100 (3.35 TB/s, 67 TFLOP/s f32 on the FMA units) a bf16 weight element arrives every 0.6 ps
 * and 2M flops take 0.03M ps: the FMA units keep up with memory up to M ~ 20 (2 bytes a weight:
 * 67 / 3.35; f32 weights, 4 bytes: M ~ 40), fewer once the conversions and the reduction of
 * the partial sums take their share. cuBLASLt's tensor-core tiles, made for M >= 64, ran these
 * at 116-400 GB/s (GPT-2 small's decode step, batch 1, H100, 2026-11-28: the MLP's
 * [1,768]x[768,3072] bf16 in 40 us, 4.7 MB of weights that take 1.6 us at 3 TB/s). Up to
 * GEMV_MAX_ROWS rows the generated GEMV kernel (cuda_render.c) reads B once with 16-byte loads,
 * accumulates in f32 and runs the kernel's whole epilogue. 16 keeps it within the FMA units'
 * reach for every float dtype; a measured crossover may move it. */
#define GEMV_MAX_ROWS 16
/* Except a large weight at more than GEMV_BIG_MAX_ROWS rows: there cuBLASLt's tiles reach the
 * bandwidth and the GEMV's sums (rows x columns a warp, f32, beside the rows of A it holds)
 * leave too few warps per SM to cover memory latency. Measured on an H200 (2026-11-28, bf16,
 * GPT-2's tied LM head [R,768] x [768,50257]^T, 77 MB): at 8 rows the GEMV took 43.65 us,
 * cuBLASLt 21.78; at 1 row (with the argmax in its epilogue) the GEMV 21.2 us, cuBLASLt with its
 * epilogue kernel 31.7 us. 2 to 4 rows are not measured yet: 2 stays with the GEMV (half of the
 * 8-row sums and A registers of 4 rows). Weights below GEMV_BIG_ELEMS (every linear of GPT-2
 * small: at most 2.4M elements) ran 3-10x faster as GEMVs than through cuBLASLt at 1 row and made
 * the 8-row decode step faster too (1.23 -> 0.92 ms, its LM head included). */
#define GEMV_BIG_MAX_ROWS 2
#define GEMV_BIG_ELEMS ((int64_t)1 << 24)

static bool shape_empty(const kir_kernel *k)
{
    for (int d = 0; d < k->rank; d++)
        if (k->shape[d] <= 0)
            return true;
    return false;
}

/* Whether kernel k runs as the GEMV kernel; fills the plan's gemv fields. */
static bool gemm_gemv(const kir_program *kp, const kir_kernel *k, mc_cuda_gemm_plan *p)
{
    int nb = k->rank - 2;
    const kir_gemm *g = &k->gemm;
    const char *e = getenv("MINIC_NO_GEMV");
    if ((e && strcmp(e, "1") == 0) || k->category != KIR_GEMM || nb < 0 || g->m <= 0 ||
        g->n <= 0 || g->k <= 0 || k->nblocks != 1)
        return false;
    const kir_view *A = &k->views[g->a], *B = &k->views[g->b];
    mc_dtype ta = kp->buffers[A->buffer].dtype, tb = kp->buffers[B->buffer].dtype;
    if (ta != tb || !is_float_dtype(ta))
        return false;
    /* B contiguous along N (each thread a 16-byte chunk of a row) or along K (lanes along K) */
    bool n_contig = B->stride[nb + 1] == 1 && g->n > 1;
    bool k_contig = B->stride[nb] == 1;
    if (!n_contig && !k_contig)
        return false;
    /* batch dimensions over which B does not move fold into the rows */
    bool fold = true;
    int64_t rows = g->m;
    for (int d = 0; d < nb; d++) {
        if (k->shape[d] != 1 && B->stride[d] != 0)
            fold = false;
        rows *= k->shape[d];
    }
    if (!fold)
        rows = g->m;
    if (rows > GEMV_MAX_ROWS || shape_empty(k) ||
        (rows > GEMV_BIG_MAX_ROWS && g->n * g->k >= GEMV_BIG_ELEMS))
        return false;
    p->gemv = true;
    p->gemv_t = !n_contig;
    p->gemv_fold = fold;
    p->gemv_rows = rows;
    return true;
}

/* Every size decision about a GEMM is made here, once: its layout for cuBLASLt, whether it has
 * few enough rows for the generated GEMV kernel, or is small enough for the generated warp-dot
 * kernel (then cuBLASLt is not used), and whether it is
 * large enough that timing cuBLASLt's candidate algorithms pays (small GEMMs are launch-bound:
 * event timing can't tell their candidates apart; measured: tuning made small_mlp slower). */
void mc_cuda_gemm_plan_make(const kir_program *kp, int ki, mc_cuda_gemm_plan *p)
{
    mc_cuda_gemm_plan_make_sized(kp, ki, NULL, p);
}

void mc_cuda_gemm_plan_make_sized(const kir_program *kp, int ki, const kir_kernel *sk, mc_cuda_gemm_plan *p)
{
    const kir_kernel *k = &kp->kernels[ki];
    if (k->gemm.conv.on) { /* no cuBLASLt layout reads an im2col that is never stored */
        memset(p, 0, sizeof *p);
        p->bias_buffer = p->pad_buffer = -1;
        p->alpha = 1.0f;
        p->conv = true;
        p->m = k->gemm.n;
        p->n = k->gemm.m;
        p->k = k->gemm.k;
        p->batch = k->shape[0];
        mc_cuda_conv_plan(k, 132, p);
        return; /* (mc_cuda_plan_program plans it again for the target's SM count) */
    }
    plan_layout(kp, ki, p, true, sk);
    if (gemm_gemv(kp, &kp->kernels[ki], p)) {
        p->use_lt = false;
        p->pad_buffer = -1; /* the GEMV kernel writes the output as the graph lays it out */
    } else if (gemm_small(&kp->kernels[ki])) {
        p->use_lt = false;
        p->small = true;
    }
    p->autotune = p->use_lt && 2.0 * (double)p->m * (double)p->n * (double)p->k * (double)p->batch >= 1e9;
}

static bool same_matrix(const mc_lt_matrix *a, const mc_lt_matrix *b)
{
    return a->dtype == b->dtype && a->trans == b->trans && a->rows == b->rows &&
           a->cols == b->cols && a->ld == b->ld && a->batch_stride == b->batch_stride &&
           (a->buffer < 0) == (b->buffer < 0);
}

bool mc_cuda_gemm_same_shape(const mc_cuda_gemm_plan *a, const mc_cuda_gemm_plan *b)
{
    if (a->use_lt != b->use_lt || a->full != b->full || a->epi != b->epi || a->alpha != b->alpha ||
        a->beta != b->beta || a->tf32 != b->tf32 || (a->bias_buffer < 0) != (b->bias_buffer < 0) ||
        a->m != b->m || a->n != b->n || a->k != b->k || a->batch != b->batch ||
        a->nouter != b->nouter || a->calls != b->calls || a->autotune != b->autotune ||
        a->scratch_dtype != b->scratch_dtype)
        return false;
    for (int d = 0; d < a->nouter; d++)
        if (a->outer_shape[d] != b->outer_shape[d])
            return false;
    return same_matrix(&a->a, &b->a) && same_matrix(&a->b, &b->b) && same_matrix(&a->c, &b->c) &&
           same_matrix(&a->d, &b->d);
}

void mc_cuda_gemm_plan_describe(const mc_cuda_gemm_plan *p, mc_strbuf *sb)
{
    static const char *epi[] = {"DEFAULT", "BIAS", "RELU", "RELU_BIAS", "GELU", "GELU_BIAS"};
    if (p->gemv) {
        mc_sb_printf(sb, "generated GEMV (%lld rows <= %d: B read once in 16-byte loads where its "
                         "layout allows, f32 sums, the epilogue inlined; B contiguous along %s%s; "
                         "MINIC_NO_GEMV=1 turns it off)",
                     (long long)p->gemv_rows, GEMV_MAX_ROWS, p->gemv_t ? "K" : "N",
                     p->gemv_fold ? "" : ", a batch loop");
        return;
    }
    if (p->conv) {
        mc_sb_printf(sb, "generated implicit-GEMM conv on tensor cores (CTA tile %d x %d%s, the im2col computed "
                         "while loading; MINIC_CUDA_IMPLICIT_CONV=0 turns it off)", p->conv_bm, p->conv_bn,
                     p->conv_split > 1 ? ", K split" : "");
        return;
    }
    if (!p->use_lt) {
        mc_sb_puts(sb, p->small ? "generated warp-dot GEMM (small: launch latency dominates)"
                                : "generated tiled GEMM (layout cuBLASLt cannot take)");
        return;
    }
    mc_sb_printf(sb, "cuBLASLt matmul m=%lld n=%lld k=%lld batch=%lld calls=%lld op(A)=%s "
                     "op(B)=%s epilogue=%s alpha=%g beta=%g%s",
                 (long long)p->m, (long long)p->n, (long long)p->k, (long long)p->batch,
                 (long long)p->calls, p->a.trans ? "T" : "N", p->b.trans ? "T" : "N",
                 epi[p->epi], (double)p->alpha, (double)p->beta, p->tf32 ? " tf32" : "");
    if (!p->full)
        mc_sb_printf(sb, "; f32 scratch then the epilogue kernel (%s)", p->why_not_full);
    if (p->pad_buffer >= 0)
        mc_sb_printf(sb, "; output rows padded to %lld elements (16-byte aligned for tensor "
                         "cores), dropped when read back",
                     (long long)p->pad_ld);
}

void mc_cuda_buffer_align(const kir_program *kp, int *align)
{
    for (int b = 0; b < kp->nbuffers; b++) {
        int64_t off = kp->buffers[b].kind == KBUF_TEMP ? kp->buffers[b].offset : 0;
        int a = 256;
        while (a > 1 && off % a != 0)
            a /= 2;
        align[b] = a;
    }
}

void mc_cuda_plans_free(mc_cuda_kernel_plan *plans, int n)
{
    if (!plans)
        return;
    for (int i = 0; i < n; i++)
        mc_cuda_code_free(&plans[i].code);
    free(plans);
}

mc_status mc_cuda_plan_program(const kir_program *kp, const mc_cuda_target *t, const int *align,
                               mc_cuda_kernel_plan **out)
{
    *out = NULL;
    mc_cuda_kernel_plan *plans = calloc((size_t)kp->nkernels + 1, sizeof *plans);
    if (!plans)
        return mc_fail(MC_ERR_SYSTEM, "out of memory planning CUDA kernels");
    for (int i = 0; i < kp->nkernels; i++) {
        mc_cuda_kernel_plan *pl = &plans[i];
        if (kp->kernels[i].category == KIR_COLLECTIVE)
            continue; /* NCCL's, no code of ours (cuda_backend.c) */
        if (kp->kernels[i].category == KIR_GEMM) {
            pl->is_gemm = true;
            mc_cuda_gemm_plan_make(kp, i, &pl->gemm);
            if (pl->gemm.conv)
                mc_cuda_conv_plan(&kp->kernels[i], t->num_sms > 0 ? t->num_sms : 1, &pl->gemm);
            if (pl->gemm.use_lt && pl->gemm.full)
                continue; /* cuBLASLt does it all */
        }
        mc_status st = mc_cuda_render(kp, i, t, align, pl->is_gemm ? &pl->gemm : NULL, &pl->code);
        if (st != MC_OK) {
            mc_cuda_plans_free(plans, kp->nkernels);
            return st;
        }
        pl->has_code = true;
    }
    *out = plans;
    return MC_OK;
}

mc_status mc_cuda_plan_program_sized(const kir_program *kp, const kir_program *sized, const int64_t *values,
                                     const mc_cuda_target *t, const int *align, mc_cuda_kernel_plan **out,
                                     int *specialized, char *why, size_t why_size)
{
    *out = NULL;
    *specialized = 0;
    why[0] = '\0';
    mc_cuda_kernel_plan *plans = calloc((size_t)kp->nkernels + 1, sizeof *plans);
    if (!plans)
        return mc_fail(MC_ERR_SYSTEM, "out of memory planning CUDA kernels");
    for (int i = 0; i < kp->nkernels; i++) {
        mc_cuda_kernel_plan *pl = &plans[i];
        if (kp->kernels[i].category == KIR_COLLECTIVE)
            continue;
        if (kp->kernels[i].category == KIR_GEMM) {
            pl->is_gemm = true;
            const kir_kernel *sk = mc_cuda_kernel_sized(&sized->kernels[i]) ? &sized->kernels[i] : NULL;
            mc_cuda_gemm_plan_make_sized(kp, i, sk, &pl->gemm);
            int sms = t->num_sms > 0 ? t->num_sms : 1;
            if (pl->gemm.conv && mc_cuda_kernel_sized(&sized->kernels[i]) && mc_cuda_sized_conv())
                mc_cuda_conv_plan_sized(sized, i, &kp->kernels[i], sms, &pl->gemm); /* batch read when it runs */
            else if (pl->gemm.conv)
                mc_cuda_conv_plan(&kp->kernels[i], sms, &pl->gemm); /* as mc_cuda_plan_program */
            if ((pl->gemm.gemv || pl->gemm.small) && mc_cuda_kernel_sized(&sized->kernels[i])) {
                /* a kernel made for this size would be compiled for this binding: cuBLASLt, or
                 * where it cannot take the layout the tiled GEMM, which reads its sizes */
                mc_cuda_gemm_plan lt;
                memset(&lt, 0, sizeof lt);
                plan_layout(kp, i, &lt, true, sk);
                if (lt.use_lt)
                    lt.autotune = 2.0 * (double)lt.m * (double)lt.n * (double)lt.k * (double)lt.batch >= 1e9;
                pl->gemm = lt;
            }
            if (pl->gemm.use_lt && pl->gemm.full)
                continue;
        }
        char reason[160];
        mc_status st = mc_cuda_render_sized(sized, values, i, t, align, pl->is_gemm ? &pl->gemm : NULL, &pl->code,
                                            reason, sizeof reason);
        if (st == MC_OK && reason[0]) {
            if (!why[0])
                snprintf(why, why_size, "%s: %s", kp->kernels[i].name, reason);
            (*specialized)++;
            st = mc_cuda_render(kp, i, t, align, pl->is_gemm ? &pl->gemm : NULL, &pl->code);
        }
        if (st != MC_OK) {
            mc_cuda_plans_free(plans, kp->nkernels);
            return st;
        }
        pl->has_code = true;
    }
    *out = plans;
    return MC_OK;
}
