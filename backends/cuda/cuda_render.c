/* CUDA C from the kernel IR: one __global__ function per kir_kernel, compiled by NVRTC.
 *
 * Every kernel walks its index space in "chunks" of V consecutive elements along the innermost
 * dimension. V is chosen so that each view that is contiguous there moves 16 bytes per access
 * (mc_vec, an aligned struct the compiler turns into one vector load or store); views with
 * other strides are read element by element, broadcasts once. V falls back to 1 when the
 * innermost size, a view's offset or strides, or a buffer's alignment don't allow it.
 *
 *   pointwise   a grid-stride loop over chunks, grid a multiple of the SM count.
 *   reduction   a row per warp (short rows) or per block (long rows); each thread owns chunks
 *               lane, lane+T, .. of the row; accumulators are f32 (i32 for ints); warps combine
 *               with shuffles, blocks through shared memory. Blocks of the IR run in order for
 *               each row; a view loaded in two loop blocks is kept in registers the first time
 *               (when the thread's share of the row is small enough), so softmax and layernorm
 *               read the row once and write it once.
 *   gemm        either only its epilogue (acc read from cuBLASLt's f32 scratch output, a
 *               pointwise kernel); or, for a GEMM of very few rows (a decoder step), a GEMV that
 *               reads the weights once in 16-byte vectors (render_gemv_n, render_gemv_t);
 *               or, for a small GEMM, warps of dot products along K with
 *               the epilogue inlined; or, where cuBLASLt cannot take the layout, a
 *               shared-memory tiled GEMM with the epilogue inlined.
 *
 * Shapes, strides and offsets are literals in the source, so index arithmetic is divisions by
 * constants; indices are 32-bit unless some offset can reach 2^31. Kernel names come from kir
 * names (generated, never user text) and are sanitized anyway.
 */
#include "backends/cuda/cuda.h"
#include "backends/cuda/cuda_prelude.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CACHE_ELEMS 32 /* per thread and view: registers kept for a row's re-reads */

typedef struct rctx {
    const kir_program *kp;
    const kir_kernel *k;
    const mc_cuda_target *t;
    const int *align;
    mc_strbuf *sb;
    int *view_param;   /* per view: parameter index */
    int *canon;        /* per view: the first view with identical addressing */
    int *instr_block;  /* per instruction: its block */
    bool *cached;      /* per view (canonical): kept in registers across loop blocks */
    bool *cache_filled;/* per view (canonical): an earlier loop block filled the cache */
    bool acc_scratch;
    mc_dtype acc_dtype;
    int acc_param;
    const char *I;     /* index type */
    int V;             /* elements per chunk */
    int j;             /* current element of the chunk; -1 at row scope */
    int u;             /* pointwise: which of the thread's unrolled chunks (vector loads are
                          arrays L<v>[u]); -1 elsewhere */
    int phase;         /* emit_chunk: 0 everything, 1 vector loads only, 2 all but those */
    bool *gather_vec;  /* per instruction: a gather read as one vector per chunk (G<i>) */
    kir_fact *facts;   /* per instruction: what its i32/bool value is known to be (kir_facts):
                          at every point, then (pointwise kernels with V > 1) at element j of
                          the chunk, ncode each (facts_now) */
    bool facts_per_element;
    /* pointwise, written in place (find_in_place): the store's view ip_store takes
     * where(cond, x, load of view ip_view) (ip_keep: x where cond holds; else the mirror),
     * ip_view the same elements of another buffer; -1: none */
    int ip_view, ip_store, ip_cond;
    bool ip_keep;
    int minb;          /* > 0: __launch_bounds__'s minimum blocks per SM */
    bool acc_pair;     /* KI_ACC is accp_[j] (render_conv_mma's epilogue over pairs of outputs) */
    /* Sizes read when the kernel runs (mc_cuda_render_sized): the kernel list's table (NULL:
     * every size a literal, as always) and the binding the launch is for. Each distinct size
     * the source needs is a slot of the kernel's `S_` parameter: a product of dims (in a fixed
     * order) times a constant over a divisor, whose value for this binding goes to
     * mc_cuda_code.sizes. The source depends on the table only, never on the binding. */
    const mc_dims *dims;
    const int64_t *values;
    mc_cuda_sizes z;   /* the slots */
} rctx;

static const char *size_expr(rctx *c, const int64_t *f, int n, int64_t div, char *buf, size_t size)
{
    return mc_cuda_size(&c->z, f, n, div, buf, size);
}

/* The slot of the kernel's S_ whose key is `key` (made on first use, holding `value`: keys
 * never hold a binding, values do), as `S_.v[slot]` in buf. */
static const char *size_slot(mc_cuda_sizes *z, const int64_t *key, int64_t value, char *buf, size_t size)
{
    int slot = 0;
    while (slot < z->out->nsizes && memcmp(z->key[slot], key, sizeof z->key[0]) != 0)
        slot++;
    if (slot == z->out->nsizes) {
        if (slot >= MC_CUDA_MAX_SIZES) {
            z->error = true;
            snprintf(buf, size, "0");
            return buf;
        }
        memcpy(z->key[slot], key, sizeof z->key[0]);
        z->out->sizes[slot] = value;
        z->out->nsizes++;
    }
    snprintf(buf, size, "S_.v[%d]", slot);
    return buf;
}

const char *mc_cuda_size(mc_cuda_sizes *c, const int64_t *f, int n, int64_t div, char *buf, size_t size)
{
    int64_t cst = 1, key[MC_MAX_RANK + 3] = {0};
    int nsym = 0;
    for (int i = 0; i < n; i++) {
        if (!mc_dim_is_sym(f[i])) {
            if (mc_mul_overflows(cst, f[i], &cst))
                c->error = true;
            continue;
        }
        if (nsym >= MC_MAX_RANK) {
            c->error = true;
            break;
        }
        int at = nsym++; /* sorted, so that the same product is the same slot */
        while (at > 0 && key[at] > f[i]) {
            key[at + 1] = key[at];
            at--;
        }
        key[at + 1] = f[i];
    }
    if (nsym == 0 || cst == 0 || !c->dims) {
        snprintf(buf, size, "%lld", (long long)(div > 1 ? cst / div : cst));
        return buf;
    }
    key[0] = nsym;
    key[nsym + 1] = cst;
    key[nsym + 2] = div;
    int64_t v = cst;
    for (int i = 0; i < nsym; i++) {
        int64_t x = 0;
        if (!mc_dims_eval(c->dims, key[1 + i], c->values, &x) || mc_mul_overflows(v, x, &v))
            c->error = true;
    }
    return size_slot(c, key, div > 1 ? v / div : v, buf, size);
}

/* A value of the binding's plan that the source reads when it runs (a conv's K split), as slot
 * `tag` of the kernel's S_ (made on first use) in buf: keyed by the tag alone, so the source is
 * the same for every binding. */
static const char *plan_value(rctx *c, int tag, int64_t value, char *buf, size_t size)
{
    int64_t key[MC_MAX_RANK + 3] = {-1, tag}; /* nsym -1: no product of dims */
    return size_slot(&c->z, key, value, buf, size);
}

/* One dim d, as size_expr prints it. */
static const char *dim_expr(rctx *c, int64_t d, char *buf, size_t size)
{
    return size_expr(c, &d, 1, 1, buf, size);
}

/* Dim d as a literal (as the static source always printed it) or `(I)S_.v[slot]`. */
static const char *cast_expr(rctx *c, int64_t d, char *buf, size_t size)
{
    char x[48];
    dim_expr(c, d, x, sizeof x);
    if (x[0] == 'S')
        snprintf(buf, size, "(%s)%s", c->I, x);
    else
        snprintf(buf, size, "%s", x);
    return buf;
}

/* The value of size f[0..n) / div in the binding being rendered (the same arithmetic). */
static int64_t size_value(const rctx *c, const int64_t *f, int n, int64_t div)
{
    int64_t v = 1;
    for (int i = 0; i < n; i++) {
        int64_t x = f[i];
        if (mc_dim_is_sym(x) && (!c->dims || !mc_dims_eval(c->dims, x, c->values, &x)))
            return 0;
        if (mc_mul_overflows(v, x, &v))
            return 0;
    }
    return div > 1 ? v / div : v;
}

/* Largest value of size f[0..n) over the bindings within the declared maxima; -1: unknown. */
static int64_t size_max(const rctx *c, const int64_t *f, int n)
{
    int64_t v = 1;
    for (int i = 0; i < n; i++) {
        int64_t x = f[i];
        if (mc_dim_is_sym(x) && (!c->dims || !mc_dims_max(c->dims, x, &x)))
            return -1;
        if (mc_mul_overflows(v, x, &v))
            return -1;
    }
    return v;
}

static bool any_sym(const int64_t *f, int n)
{
    for (int i = 0; i < n; i++)
        if (mc_dim_is_sym(f[i]))
            return true;
    return false;
}

/* Measured on an H200 (docs/PERFORMANCE.md): a grid of one chunk group per thread, scheduled
 * by the hardware, beat a persistent grid-stride grid by 10% (its last wave is uneven); more
 * chunks per thread did not help. */
#define PW_UNROLL 1      /* chunks per thread per iteration: their loads are all issued first */
#define BLOCKS_PER_SM -1 /* grid-stride grids capped at this many blocks per SM; -1: no cap */
#define RED_CHUNKS 4     /* a row-per-block reduction gives each thread about this many chunks */

static int64_t grid_cap(const mc_cuda_target *t, int threads)
{
    int per_sm = t->blocks_per_sm ? t->blocks_per_sm : BLOCKS_PER_SM;
    if (per_sm < 0)
        return INT32_MAX;
    return (int64_t)t->num_sms * per_sm * (threads < 256 ? 256 / threads : 1);
}

static const char *storage_type(mc_dtype d)
{
    switch (d) {
    case MC_F16:
        return "__half";
    case MC_BF16:
        return "__nv_bfloat16";
    case MC_I32:
        return "int";
    case MC_BOOL:
        return "bool";
    default:
        return "float";
    }
}

static const char *cvt_fn(mc_dtype d)
{
    switch (d) {
    case MC_F16:
        return "mc_cvt_f16";
    case MC_BF16:
        return "mc_cvt_bf16";
    case MC_I32:
        return "mc_cvt_i32";
    case MC_BOOL:
        return "mc_cvt_bool";
    default:
        return "mc_cvt_f32";
    }
}

static const kir_buffer *view_buffer(const rctx *c, int v)
{
    return &c->kp->buffers[c->k->views[v].buffer];
}

/* Whether product `instr` is an operand of an add or subtract. Such a product is rendered as
 * __fmul_rn, rounded on its own: NVRTC would otherwise contract the two into one fused
 * multiply-add, whose single rounding is not what the graph says where it matters most:
 * softmax's x * s - max, where the product's rounding error at the row's max (1e30 for a
 * product of 1e37) became the result (tests/test_numeric_edges.c; the CPU backend keeps such
 * subtractions apart too). Memory-bound kernels lose nothing measurable by it. */
static bool added_to(const kir_kernel *k, int instr)
{
    for (int i = instr + 1; i < k->ncode; i++) {
        const kir_instr *u = &k->code[i];
        if (u->kind == KI_OP && (u->op == MC_OP_ADD || u->op == MC_OP_SUB) &&
            (u->arg[0] == instr || u->arg[1] == instr))
            return true;
    }
    return false;
}

static void operand_name(mc_strbuf *sb, int instr, void *ctx)
{
    rctx *c = ctx;
    /* per-element values are v<i>_<j>; a reduction's row-block scalars are v<i> */
    bool per_element = c->j >= 0 && (c->k->category != KIR_REDUCTION ||
                                     c->k->blocks[c->instr_block[instr]].loop);
    if (per_element)
        mc_sb_printf(sb, "v%d_%d", instr, c->j);
    else
        mc_sb_printf(sb, "v%d", instr);
}

/* Offset expression of view v: its offset plus coordinates i<d> times strides over dims
 * [d0, d1); `base` (or NULL) names a precomputed partial offset. */
static void view_offset(rctx *c, int v, int d0, int d1, const char *base)
{
    const kir_view *w = &c->k->views[v];
    char x[48];
    if (base)
        mc_sb_printf(c->sb, "%s", base);
    else
        mc_sb_printf(c->sb, "(%s)%s", c->I, dim_expr(c, w->offset, x, sizeof x));
    for (int d = d0; d < d1; d++)
        if (w->stride[d] != 0 && c->k->shape[d] != 1)
            mc_sb_printf(c->sb, " + i%d * (%s)%s", d, c->I, dim_expr(c, w->stride[d], x, sizeof x));
}

/* Decompose flat index `e` into coordinates i<d0>..i<d1-1> of the kernel's shape. */
static void emit_coords(rctx *c, const char *e, int d0, int d1, const char *indent)
{
    if (d0 >= d1)
        return;
    mc_sb_printf(c->sb, "%s%s t_ = %s;\n", indent, c->I, e);
    for (int d = d1 - 1; d >= d0; d--) {
        if (d == d0)
            mc_sb_printf(c->sb, "%sconst %s i%d = t_;\n", indent, c->I, d);
        else {
            char x[64];
            cast_expr(c, c->k->shape[d], x, sizeof x);
            mc_sb_printf(c->sb, "%sconst %s i%d = t_ %% %s; t_ /= %s;\n", indent, c->I, d, x, x);
        }
    }
}

static int64_t shape_prod(const kir_kernel *k, int d0, int d1)
{
    int64_t n = 1;
    for (int d = d0; d < d1; d++)
        n *= k->shape[d];
    return n;
}

/* `+ stride * j` of the current element j of a chunk along the innermost dim (nothing at j 0
 * or a broadcast). */
static void element_step(rctx *c, int64_t s)
{
    if (c->j <= 0 || s == 0)
        return;
    char x[48];
    if (mc_dim_is_sym(s))
        mc_sb_printf(c->sb, " + (%s)%s * %d", c->I, dim_expr(c, s, x, sizeof x), c->j);
    else
        mc_sb_printf(c->sb, " + (%s)%lld", c->I, (long long)(s * c->j));
}

/* Is view v read/written as V-wide vectors along the innermost dimension? */
static bool view_vectorized(const rctx *c, int v)
{
    const kir_kernel *k = c->k;
    return c->V > 1 && k->views[v].stride[k->rank - 1] == 1;
}

/* The largest V (<= 16 bytes per access of every contiguous view) that every view allows. */
static int choose_vec(const kir_program *kp, const kir_kernel *k, const int *align,
                      const bool *used, bool acc_scratch, mc_dtype acc_dtype)
{
    if (k->rank == 0)
        return 1;
    int64_t inner = k->shape[k->rank - 1];
    size_t maxsize = acc_scratch ? mc_dtype_size(acc_dtype) : 0;
    for (int v = 0; v < k->nviews; v++) {
        if (!used[v] || k->views[v].stride[k->rank - 1] != 1)
            continue;
        size_t s = mc_dtype_size(kp->buffers[k->views[v].buffer].dtype);
        if (s > maxsize)
            maxsize = s;
    }
    if (maxsize == 0)
        return 1;
    int V = (int)(16 / maxsize);
    if (V > 8)
        V = 8;
    for (; V > 1; V /= 2) {
        if (!mc_dims_multiple_of(kp->dims, inner, V))
            continue;
        bool ok = true;
        for (int v = 0; v < k->nviews && ok; v++) {
            const kir_view *w = &k->views[v];
            if (!used[v] || w->stride[k->rank - 1] != 1)
                continue;
            size_t s = mc_dtype_size(kp->buffers[w->buffer].dtype);
            if (!mc_dims_multiple_of(kp->dims, w->offset, V) || (size_t)align[w->buffer] < s * (size_t)V)
                ok = false;
            for (int d = 0; d < k->rank - 1 && ok; d++)
                if (!mc_dims_multiple_of(kp->dims, w->stride[d], V) && k->shape[d] != 1)
                    ok = false;
        }
        if (ok)
            return V;
    }
    return 1;
}

/* The value of instruction i at the current element (c->j) or row scope (c->j < 0); k_iter
 * is the unrolled chunk iteration (for register caches), -1 outside chunk loops. */
static bool emit_value_unsaturated(rctx *c, int i, int k_iter);

/* Whether op's result is one of its operands, its negation, its absolute value or zero (or
 * NaN): within a half type's range whenever its operands are. */
static bool keeps_range(mc_op op)
{
    return op == MC_OP_MAXIMUM || op == MC_OP_MINIMUM || op == MC_OP_WHERE || op == MC_OP_NEG ||
           op == MC_OP_ABS || op == MC_OP_RELU;
}

/* Instruction i's value; a half-typed result that is not a rounding cast keeps f32 precision
 * within its type's range (mc_sat_f16 / mc_sat_bf16, as mc_saturate_to_dtype). Every half-typed
 * value is within that range (loads, literals and casts are rounded to the type, other results
 * saturated), so a result that is an operand (a pool's maximum, a where) needs no saturation:
 * the maxpool's 17 mc_sat_f16 per output. */
static bool emit_value(rctx *c, int i, int k_iter)
{
    const kir_instr *ins = &c->k->code[i];
    bool result = (ins->kind == KI_OP && ins->op != MC_OP_CAST && !keeps_range(ins->op)) || ins->kind == KI_ACC ||
                  ins->kind == KI_ROWVAL;
    const char *sat = !result ? NULL : ins->dtype == MC_F16 ? "mc_sat_f16" : ins->dtype == MC_BF16 ? "mc_sat_bf16" : NULL;
    if (sat)
        mc_sb_printf(c->sb, "%s(", sat);
    bool ok = emit_value_unsaturated(c, i, k_iter);
    if (sat)
        mc_sb_puts(c->sb, ")");
    return ok;
}

/* What kir_facts knows at the current element: a pointwise kernel's chunk starts where the
 * innermost index is a multiple of V (choose_vec made V divide its length), so element j's
 * index is j modulo V; elsewhere (rows, GEMM epilogues' pairs) only that it is inside. */
static const kir_fact *facts_now(const rctx *c)
{
    if (!c->facts || !c->facts_per_element || c->j < 0)
        return c->facts;
    return c->facts + (size_t)(1 + c->j) * (size_t)c->k->ncode;
}

/* `+ (I)index * (I)stride` of gather instruction i: the index wrapped and checked by
 * mc_gather_index, or as it is where kir_facts shows it always in [0, size) (a padded pool's
 * clamped window, an iota's position), plus size where always in [-size, 0) (a reversed
 * gather): no check, no error path, no 64-bit arithmetic. */
static void gather_step(rctx *c, int i)
{
    const kir_instr *ins = &c->k->code[i];
    char xs[48], xt[48];
    int proven = c->facts ? kir_gather_proven(c->k, facts_now(c), i) : 0;
    if (proven != 0) {
        mc_sb_printf(c->sb, " + (%s)", c->I);
        if (proven < 0)
            mc_sb_puts(c->sb, "(");
        operand_name(c->sb, ins->arg[0], c);
        if (proven < 0)
            mc_sb_printf(c->sb, " + %s)", dim_expr(c, ins->size, xs, sizeof xs));
    } else {
        mc_sb_printf(c->sb, " + (%s)mc_gather_index(", c->I);
        operand_name(c->sb, ins->arg[0], c);
        mc_sb_printf(c->sb, ", %s%s, mc_err, %d)", dim_expr(c, ins->size, xs, sizeof xs),
                     mc_dim_is_sym(ins->size) ? "" : "LL", ins->check + 1);
    }
    mc_sb_printf(c->sb, " * (%s)%s", c->I, dim_expr(c, ins->stride, xt, sizeof xt));
}

/* An i32 or bool operation as what kir_facts knows of it: a literal where its value is decided
 * (a bounds test the index space passes), the earlier instruction it always equals (a clamp
 * that never clamps, a quotient that is an index), or a plain C division where the divisor is
 * never 0 or -1 (truncation is i32 `div`'s meaning; mc_div's guards and 64-bit path are for
 * those two). False: render it as ops.def says. */
static bool emit_known_int(rctx *c, int i)
{
    const kir_instr *ins = &c->k->code[i];
    if (!c->facts || (ins->dtype != MC_I32 && ins->dtype != MC_BOOL))
        return false;
    const kir_fact *facts = facts_now(c), *f = &facts[i];
    if (f->lo == f->hi) {
        mc_c_literal(c->sb, (double)f->lo, ins->dtype);
        return true;
    }
    if (f->same >= 0) {
        operand_name(c->sb, f->same, c);
        return true;
    }
    const kir_fact *d = ins->op == MC_OP_DIV ? &facts[ins->arg[1]] : NULL;
    if (d && (d->lo >= 1 || d->hi <= -2)) {
        mc_sb_puts(c->sb, "((");
        operand_name(c->sb, ins->arg[0], c);
        mc_sb_puts(c->sb, ") / (");
        operand_name(c->sb, ins->arg[1], c);
        mc_sb_puts(c->sb, "))");
        return true;
    }
    return false;
}

static bool emit_value_unsaturated(rctx *c, int i, int k_iter)
{
    const kir_kernel *k = c->k;
    const kir_instr *ins = &k->code[i];
    mc_strbuf *sb = c->sb;
    switch (ins->kind) {
    case KI_LOAD: {
        int v = ins->view;
        int cv = c->canon[v];
        if (c->j >= 0 && c->cached[cv] && c->cache_filled[cv]) {
            mc_sb_printf(sb, "rc%d[%d]", cv, k_iter * c->V + c->j);
        } else if (c->j >= 0 && view_vectorized(c, v)) {
            if (c->u >= 0)
                mc_sb_printf(sb, "mc_ld(L%d[%d].x[%d])", v, c->u, c->j);
            else
                mc_sb_printf(sb, "mc_ld(L%d.x[%d])", v, c->j);
        } else if (c->j >= 0) {
            mc_sb_printf(sb, "mc_ld(p%d[o%d", c->view_param[v], v);
            element_step(c, k->views[v].stride[k->rank - 1]);
            mc_sb_puts(sb, "])");
        } else {
            mc_sb_printf(sb, "mc_ld(p%d[rb%d])", c->view_param[v], v);
        }
        return true;
    }
    case KI_CONST:
        mc_c_literal(sb, ins->value, ins->dtype);
        return true;
    case KI_SIZE: { /* value / n (value * n), n read when it runs (kir_bind's KI_CONST: the same) */
        bool i32_times = ins->times && ins->dtype == MC_I32;
        if (!c->dims || !(mc_dtype_is_float(ins->dtype) || i32_times))
            return false;
        char x[48];
        dim_expr(c, ins->size, x, sizeof x);
        if (i32_times) {
            mc_sb_printf(sb, "((int)%s * %lld)", x, (long long)ins->value);
            return true;
        }
        const char *round = ins->dtype == MC_F16 ? "mc_round_f16" : ins->dtype == MC_BF16 ? "mc_round_bf16" : "";
        mc_sb_printf(sb, "%s((float)(%a %s (double)%s))", round, ins->value, ins->times ? "*" : "/", x);
        return true;
    }
    case KI_INDEX: {
        const char *cast = ins->dtype == MC_I32 ? "(int)" : ins->dtype == MC_BOOL ? "(bool)" :
                                                                                     "(float)";
        /* an index held in a half type is rounded as that type holds it */
        const char *round = ins->dtype == MC_F16 ? "mc_round_f16" :
                            ins->dtype == MC_BF16 ? "mc_round_bf16" : "";
        if (ins->view == k->rank - 1 && c->j > 0)
            mc_sb_printf(sb, "%s(%s(i%d + %d))", round, cast, ins->view, c->j);
        else
            mc_sb_printf(sb, "%s(%s(i%d))", round, cast, ins->view);
        return true;
    }
    case KI_ROWVAL:
        /* a scan's running value inside its loop block (kir/kir.h): the accumulator itself, before
         * this element is added (render_scan) */
        if (k->reds[ins->view].scan && c->j >= 0 && k->blocks[c->instr_block[i]].loop)
            mc_sb_printf(sb, k->reds[ins->view].dtype == MC_F32 ? "((float)acc%d)" : "acc%d", ins->view);
        else
            mc_sb_printf(sb, "rv%d", ins->view);
        return true;
    case KI_GATHER: {
        int v = ins->view;
        if (c->j >= 0 && c->gather_vec && c->gather_vec[i]) {
            mc_sb_printf(sb, "mc_ld(G%d.x[%d])", i, c->j);
            return true;
        }
        if (c->j >= 0) {
            mc_sb_printf(sb, "mc_ld(p%d[o%d", c->view_param[v], v);
            element_step(c, k->views[v].stride[k->rank - 1]);
        } else {
            mc_sb_printf(sb, "mc_ld(p%d[rb%d", c->view_param[v], v);
        }
        gather_step(c, i);
        mc_sb_puts(sb, "])");
        return true;
    }
    case KI_ACC:
        if (c->acc_scratch && c->V > 1 && c->u >= 0)
            mc_sb_printf(sb, "mc_ld(LA[%d].x[%d])", c->u, c->j);
        else if (c->acc_scratch && c->V > 1)
            mc_sb_printf(sb, "mc_ld(LA.x[%d])", c->j);
        else if (c->acc_scratch)
            mc_sb_printf(sb, "mc_ld(acc_p[e_])");
        else if (c->acc_pair)
            mc_sb_printf(sb, "accp_[%d]", c->j > 0 ? c->j : 0);
        else
            mc_sb_puts(sb, "acc");
        return true;
    case KI_OP:
        if (emit_known_int(c, i))
            return true;
        if (ins->op == MC_OP_MUL && ins->dtype != MC_I32 && added_to(k, (int)(ins - k->code))) {
            mc_sb_puts(sb, "__fmul_rn(");
            operand_name(sb, ins->arg[0], c);
            mc_sb_puts(sb, ", ");
            operand_name(sb, ins->arg[1], c);
            mc_sb_puts(sb, ")");
            return true;
        }
        return mc_c_op_expr(sb, k, ins, operand_name, c);
    }
    return false;
}

static const char *indent_of(int depth)
{
    static const char spaces[] = "                                        ";
    int n = depth * 2;
    if (n > (int)sizeof spaces - 1)
        n = (int)sizeof spaces - 1;
    return spaces + (sizeof spaces - 1 - (size_t)n);
}

static const char *red_name(mc_op op)
{
    return op == MC_OP_MAX ? "max" : op == MC_OP_MIN ? "min" : "sum";
}

static void red_init(mc_strbuf *sb, mc_op op, mc_dtype d)
{
    bool f = d != MC_I32;
    if (op == MC_OP_MAX)
        mc_sb_puts(sb, f ? "(-MC_INF)" : "(-2147483647 - 1)");
    else if (op == MC_OP_MIN)
        mc_sb_puts(sb, f ? "MC_INF" : "2147483647");
    else
        mc_sb_puts(sb, f ? "0.0f" : "0");
}

/* The body of one chunk: vector loads, V copies of the block's instructions, reductions,
 * stores. Coordinates i<d> of the chunk's first element are in scope; o<v> is each used view's
 * element offset there. */
static bool emit_chunk(rctx *c, int b, int k_iter, int depth)
{
    const kir_kernel *k = c->k;
    const kir_block *blk = &k->blocks[b];
    mc_strbuf *sb = c->sb;
    const char *in = indent_of(depth);
    /* vector loads of this block's contiguous views (once per view) */
    bool *done = calloc((size_t)k->nviews + 1, 1);
    if (!done)
        return false;
    for (int i = blk->first; i < blk->first + blk->count && c->phase != 2; i++) {
        const kir_instr *ins = &k->code[i];
        if (ins->kind != KI_LOAD || done[ins->view])
            continue;
        int v = ins->view, cv = c->canon[v];
        done[v] = true;
        if (c->cached[cv] && c->cache_filled[cv])
            continue;
        if (view_vectorized(c, v) && c->u >= 0 && v == c->ip_view)
            mc_sb_printf(sb, "%sL%d[%d] = mc_same_ ? mc_vec<%s, %d>{} : *(const mc_vec<%s, %d> *)(p%d + o%d);\n", in, v,
                         c->u, storage_type(view_buffer(c, v)->dtype), c->V, storage_type(view_buffer(c, v)->dtype),
                         c->V, c->view_param[v], v);
        else if (view_vectorized(c, v) && c->u >= 0)
            mc_sb_printf(sb, "%sL%d[%d] = *(const mc_vec<%s, %d> *)(p%d + o%d);\n", in, v, c->u,
                         storage_type(view_buffer(c, v)->dtype), c->V, c->view_param[v], v);
        else if (view_vectorized(c, v))
            mc_sb_printf(sb, "%sconst mc_vec<%s, %d> L%d = *(const mc_vec<%s, %d> *)(p%d + o%d);\n",
                         in, storage_type(view_buffer(c, v)->dtype), c->V, v,
                         storage_type(view_buffer(c, v)->dtype), c->V, c->view_param[v], v);
    }
    free(done);
    if (c->acc_scratch && c->V > 1 && c->phase != 2) {
        if (c->u >= 0)
            mc_sb_printf(sb, "%sLA[%d] = *(const mc_vec<%s, %d> *)(acc_p + e_);\n", in, c->u,
                         storage_type(c->acc_dtype), c->V);
        else
            mc_sb_printf(sb, "%sconst mc_vec<%s, %d> LA = *(const mc_vec<%s, %d> *)(acc_p + e_);\n",
                         in, storage_type(c->acc_dtype), c->V, storage_type(c->acc_dtype), c->V);
    }
    if (c->phase == 1)
        return true;
    for (int j = 0; j < c->V; j++) {
        c->j = j;
        for (int i = blk->first; i < blk->first + blk->count; i++) {
            const kir_instr *ins = &k->code[i];
            if (j == 0 && c->gather_vec && c->gather_vec[i]) {
                /* the chunk's index is one value: its V elements are one vector load */
                const char *st = storage_type(view_buffer(c, ins->view)->dtype);
                mc_sb_printf(sb, "%sconst mc_vec<%s, %d> G%d = *(const mc_vec<%s, %d> *)(p%d + o%d", in, st, c->V, i,
                             st, c->V, c->view_param[ins->view], ins->view);
                gather_step(c, i);
                mc_sb_puts(sb, ");\n");
            }
            mc_sb_printf(sb, "%sconst %s v%d_%d = ", in, mc_c_arith_type(ins->dtype), i, j);
            if (!emit_value(c, i, k_iter))
                return false;
            mc_sb_puts(sb, ";\n");
        }
        /* fill register caches: the first loop block that loads a cached view */
        if (blk->loop) {
            for (int i = blk->first; i < blk->first + blk->count; i++) {
                const kir_instr *ins = &k->code[i];
                if (ins->kind == KI_LOAD && c->cached[c->canon[ins->view]] &&
                    !c->cache_filled[c->canon[ins->view]]) {
                    bool first = true; /* one fill per canonical view */
                    for (int i2 = blk->first; i2 < i; i2++)
                        if (k->code[i2].kind == KI_LOAD &&
                            c->canon[k->code[i2].view] == c->canon[ins->view])
                            first = false;
                    if (first)
                        mc_sb_printf(sb, "%src%d[%d] = v%d_%d;\n", in, c->canon[ins->view],
                                     k_iter * c->V + j, i, j);
                }
            }
        }
        for (int r = 0; r < k->nreds; r++)
            if (k->reds[r].block == b && k->reds[r].scan && k->reds[r].dtype == MC_F32) {
                /* a float scan's accumulator is a double (kir/kir.h, render_scan) */
                mc_sb_printf(sb, "%sacc%d += (double)", in, r);
                operand_name(sb, k->reds[r].value, c);
                mc_sb_puts(sb, ";\n");
            } else if (k->reds[r].block == b) {
                /* the reduced value may be a row scalar (a sum over a broadcast) */
                mc_sb_printf(sb, "%sacc%d = mc_red_%s(acc%d, ", in, r, red_name(k->reds[r].op), r);
                operand_name(sb, k->reds[r].value, c);
                mc_sb_puts(sb, ");\n");
            }
    }
    /* stores */
    for (int s = 0; s < k->nstores; s++) {
        const kir_store *st = &k->stores[s];
        if (st->block != b)
            continue;
        int v = st->view;
        mc_dtype bd = view_buffer(c, v)->dtype;
        if (v == c->ip_store && c->u >= 0) { /* in place: only where the where takes its other side */
            mc_sb_printf(sb, "%sif (mc_same_) {\n", in);
            for (int j = 0; j < c->V; j++) {
                c->j = j;
                mc_sb_printf(sb, "%s  if (%s", in, c->ip_keep ? "" : "!");
                operand_name(sb, c->ip_cond, c);
                mc_sb_printf(sb, ") p%d[o%d + %d] = %s(", c->view_param[v], v, j, cvt_fn(bd));
                operand_name(sb, st->value, c);
                mc_sb_puts(sb, ");\n");
            }
            mc_sb_printf(sb, "%s} else\n", in);
        }
        if (view_vectorized(c, v)) {
            mc_sb_printf(sb, "%s{\n%s  mc_vec<%s, %d> S_;\n", in, in, storage_type(bd), c->V);
            for (int j = 0; j < c->V; j++) {
                c->j = j;
                mc_sb_printf(sb, "%s  S_.x[%d] = %s(", in, j, cvt_fn(bd));
                operand_name(sb, st->value, c);
                mc_sb_puts(sb, ");\n");
            }
            mc_sb_printf(sb, "%s  *(mc_vec<%s, %d> *)(p%d + o%d) = S_;\n%s}\n", in,
                         storage_type(bd), c->V, c->view_param[v], v, in);
        } else {
            int64_t stride = k->views[v].stride[k->rank - 1];
            for (int j = 0; j < c->V; j++) {
                if (j > 0 && stride == 0)
                    break; /* a broadcast store writes one element */
                c->j = j;
                mc_sb_printf(sb, "%sp%d[o%d + ", in, c->view_param[v], v);
                if (mc_dim_is_sym(stride)) {
                    char x[48];
                    mc_sb_printf(sb, "(%s)%s * %d", c->I, dim_expr(c, stride, x, sizeof x), j);
                } else {
                    mc_sb_printf(sb, "(%s)%lld", c->I, (long long)(stride * j));
                }
                mc_sb_printf(sb, "] = %s(", cvt_fn(bd));
                operand_name(sb, st->value, c);
                mc_sb_puts(sb, ");\n");
            }
        }
    }
    c->j = -1;
    return true;
}

/* Does instruction i have one value across a chunk (nothing it reads moves along the
 * innermost dimension)? */
static bool chunk_uniform(const kir_kernel *k, int i, int depth)
{
    const kir_instr *in = &k->code[i];
    if (depth > 16)
        return false;
    switch (in->kind) {
    case KI_CONST: case KI_SIZE: case KI_ROWVAL: return true;
    case KI_LOAD: return k->views[in->view].stride[k->rank - 1] == 0;
    case KI_INDEX: return in->view != k->rank - 1;
    case KI_ACC: return false;
    case KI_GATHER:
        return k->views[in->view].stride[k->rank - 1] == 0 && chunk_uniform(k, in->arg[0], depth + 1);
    case KI_OP: {
        int nin = in->op == MC_OP_CAST ? 1 : mc_op_table[in->op].min_in;
        for (int a = 0; a < nin; a++)
            if (!chunk_uniform(k, in->arg[a], depth + 1))
                return false;
        return true;
    }
    }
    return false;
}

/* Which views does block b (or, with b < 0, the whole kernel) use? */
static void mark_used(const kir_kernel *k, int b, bool *used)
{
    for (int i = 0; i < k->ncode; i++) {
        bool in = b < 0;
        for (int bb = 0; bb < k->nblocks && !in; bb++)
            if (bb == b && i >= k->blocks[bb].first && i < k->blocks[bb].first + k->blocks[bb].count)
                in = true;
        if (in && (k->code[i].kind == KI_LOAD || k->code[i].kind == KI_GATHER))
            used[k->code[i].view] = true;
    }
    for (int s = 0; s < k->nstores; s++)
        if (b < 0 || k->stores[s].block == b)
            used[k->stores[s].view] = true;
}

/* The row bases rb<v> of every view the kernel uses, at the row's coordinates (reductions and
 * scans, whose loop blocks index from them). False when out of memory. */
static bool emit_row_bases(rctx *c)
{
    const kir_kernel *k = c->k;
    bool *used = calloc((size_t)k->nviews + 1, 1);
    if (!used)
        return false;
    mark_used(k, -1, used);
    for (int v = 0; v < k->nviews; v++) {
        if (!used[v])
            continue;
        mc_sb_printf(c->sb, "    const %s rb%d = ", c->I, v);
        view_offset(c, v, 0, k->nrow, NULL);
        mc_sb_puts(c->sb, ";\n");
    }
    free(used);
    return true;
}

/* Offsets o<v> of every view block b uses, at the chunk's coordinates. */
static void emit_view_offsets(rctx *c, int b, int d0, int depth, bool row_base)
{
    const kir_kernel *k = c->k;
    bool *used = calloc((size_t)k->nviews + 1, 1);
    if (!used) {
        c->sb->oom = true;
        return;
    }
    mark_used(k, b, used);
    for (int v = 0; v < k->nviews; v++) {
        if (!used[v])
            continue;
        int cv = c->canon[v];
        /* a view served from registers needs no address unless something stores through it */
        bool stored = false;
        for (int s = 0; s < k->nstores; s++)
            if (k->stores[s].block == b && k->stores[s].view == v)
                stored = true;
        for (int i = 0; i < k->ncode; i++) /* a gather addresses through o<v> too */
            if (k->code[i].kind == KI_GATHER && k->code[i].view == v)
                stored = true;
        if (c->cached[cv] && c->cache_filled[cv] && !stored)
            continue;
        char base[32];
        snprintf(base, sizeof base, "rb%d", v);
        mc_sb_printf(c->sb, "%sconst %s o%d = ", indent_of(depth), c->I, v);
        view_offset(c, v, d0, k->rank, row_base ? base : NULL);
        mc_sb_puts(c->sb, ";\n");
        (void)cv;
    }
    free(used);
}

static void emit_signature(rctx *c, mc_cuda_code *out, int block_threads)
{
    const kir_kernel *k = c->k;
    const kir_program *kp = c->kp;
    mc_strbuf *sb = c->sb;
    /* restrict only when no two parameters can overlap (temps share the arena), and not where
     * the kernel compares two of them (find_in_place: a compiler may take restrict pointers
     * for different) */
    bool restrict_ok = c->ip_view < 0;
    for (int a = 0; a < out->nparams; a++)
        for (int b = a + 1; b < out->nparams; b++) {
            int ba = out->param[a], bb = out->param[b];
            if (ba < 0 || bb < 0)
                continue;
            const kir_buffer *x = &kp->buffers[ba], *y = &kp->buffers[bb];
            if (x->kind != KBUF_TEMP || y->kind != KBUF_TEMP)
                continue;
            if (c->dims || mc_dim_is_sym(x->numel) || mc_dim_is_sym(y->numel)) {
                /* placed per binding: the source may assume nothing of it */
                restrict_ok = false;
                continue;
            }
            int64_t xe = x->offset + x->numel * (int64_t)mc_dtype_size(x->dtype);
            int64_t ye = y->offset + y->numel * (int64_t)mc_dtype_size(y->dtype);
            if (x->offset < ye && y->offset < xe)
                restrict_ok = false;
        }
    if (c->dims)
        mc_sb_printf(sb, "struct mc_sz { long long v[%d]; };\n", MC_CUDA_MAX_SIZES);
    if (c->minb > 0)
        mc_sb_printf(sb, "extern \"C\" __global__ void __launch_bounds__(%d, %d) %s(", block_threads, c->minb,
                     out->entry);
    else
        mc_sb_printf(sb, "extern \"C\" __global__ void __launch_bounds__(%d) %s(", block_threads,
                     out->entry);
    for (int p = 0; p < out->nparams; p++) {
        int b = out->param[p];
        if (p)
            mc_sb_puts(sb, ", ");
        if (b == MC_CUDA_PARAM_SCRATCH) {
            mc_sb_printf(sb, "const %s *%sacc_p", storage_type(c->acc_dtype),
                         restrict_ok ? "__restrict__ " : "");
            continue;
        }
        if (b == MC_CUDA_PARAM_ERROR) {
            mc_sb_puts(sb, "int *mc_err");
            continue;
        }
        if (b == MC_CUDA_PARAM_SPLITK) {
            mc_sb_puts(sb, "float *mc_ws");
            continue;
        }
        if (b == MC_CUDA_PARAM_SIZES) {
            mc_sb_puts(sb, "const mc_sz S_");
            continue;
        }
        bool written = false;
        for (int s = 0; s < k->nstores; s++)
            if (k->views[k->stores[s].view].buffer == b)
                written = true;
        mc_sb_printf(sb, "%s%s *%sp%d", written ? "" : "const ",
                     storage_type(kp->buffers[b].dtype), restrict_ok ? "__restrict__ " : "", p);
    }
    mc_sb_puts(sb, ")\n{\n");
}

/* The scalars of row block b at row scope: `const T v<i> = ...;`, stores by lane 0. */
static bool emit_row_block(rctx *c, int b, int depth, const char *lane0)
{
    const kir_kernel *k = c->k;
    const kir_block *blk = &k->blocks[b];
    const char *in = indent_of(depth);
    c->j = -1;
    for (int i = blk->first; i < blk->first + blk->count; i++) {
        mc_sb_printf(c->sb, "%sconst %s v%d = ", in, mc_c_arith_type(k->code[i].dtype), i);
        if (!emit_value(c, i, -1))
            return false;
        mc_sb_puts(c->sb, ";\n");
    }
    for (int s = 0; s < k->nstores; s++) {
        const kir_store *st = &k->stores[s];
        if (st->block != b)
            continue;
        mc_sb_printf(c->sb, "%sif (%s) p%d[rb%d] = %s(v%d);\n", in, lane0,
                     c->view_param[st->view], st->view,
                     cvt_fn(view_buffer(c, st->view)->dtype), st->value);
    }
    return true;
}

/* A pointwise kernel whose one store is where(cond, x, y) with y loaded from the very elements
 * the store writes, of another buffer (same dtype, offset and strides: a KV cache's update,
 * y the old cache and the store the new one) and read nowhere else, both as vectors. When the
 * runtime makes the two buffers one (mc_program_feed_back in place, or the memory plan), an
 * element where y is selected would be rewritten with itself: the kernel compares the two
 * addresses (mc_same_) and then neither loads y nor stores those elements, so that an update
 * of one position of a cache moves the position's bytes, not the whole cache twice.
 * MINIC_CUDA_WHERE_IN_PLACE=0: every element loaded and stored, as before 2026-11-28. */
static void find_in_place(rctx *c)
{
    const kir_kernel *k = c->k;
    c->ip_view = c->ip_store = c->ip_cond = -1;
    const char *e = getenv("MINIC_CUDA_WHERE_IN_PLACE");
    if ((e && strcmp(e, "0") == 0) || k->category != KIR_POINTWISE || k->nblocks != 1 || k->nstores != 1 || k->nreds != 0 || c->acc_scratch ||
        c->V <= 1)
        return;
    const kir_store *st = &k->stores[0];
    const kir_instr *w = &k->code[st->value];
    if (w->kind != KI_OP || w->op != MC_OP_WHERE || !view_vectorized(c, st->view))
        return;
    for (int side = 2; side >= 1; side--) {
        int li = w->arg[side];
        const kir_instr *ld = &k->code[li];
        if (ld->kind != KI_LOAD || w->arg[3 - side] == li || w->arg[0] == li)
            continue;
        const kir_view *a = &k->views[ld->view], *b = &k->views[st->view];
        const kir_buffer *ba = &c->kp->buffers[a->buffer], *bb = &c->kp->buffers[b->buffer];
        bool same = a->buffer != b->buffer && ba->dtype == bb->dtype && a->offset == b->offset &&
                    view_vectorized(c, ld->view);
        for (int d = 0; d < k->rank && same; d++)
            same = a->stride[d] == b->stride[d] || k->shape[d] == 1;
        /* y's buffer read by this load only; the load used by the where only, the where by the
         * store only */
        for (int i = 0; i < k->ncode && same; i++) {
            const kir_instr *in = &k->code[i];
            if (in->kind == KI_LOAD && i != li && k->views[in->view].buffer == a->buffer)
                same = false;
            if (in->kind == KI_GATHER && k->views[in->view].buffer == a->buffer)
                same = false;
            int nin = in->kind == KI_GATHER ? 1 : in->kind != KI_OP || i == st->value ? 0
                      : in->op == MC_OP_CAST ? 1 : mc_op_table[in->op].max_in;
            for (int x = 0; x < nin && x < 3; x++)
                if (in->arg[x] == li || in->arg[x] == st->value)
                    same = false;
        }
        if (same) {
            c->ip_view = ld->view;
            c->ip_store = st->view;
            c->ip_cond = w->arg[0];
            c->ip_keep = side == 2;
            return;
        }
    }
}

static bool render_pointwise(rctx *c, mc_cuda_code *out)
{
    const kir_kernel *k = c->k;
    if (k->nblocks != 1)
        return false;
    int64_t chunks = c->dims ? 0 : shape_prod(k, 0, k->rank) / c->V;
    char chunks_x[48];
    if (c->dims) { /* run-time sizes: the count is a slot, the grid for this binding */
        size_expr(c, k->shape, k->rank, c->V, chunks_x, sizeof chunks_x);
        chunks = size_value(c, k->shape, k->rank, c->V);
    } else {
        snprintf(chunks_x, sizeof chunks_x, "%lld", (long long)chunks);
    }
    int threads = 256;
    int U = c->t->pw_unroll > 0 && c->t->pw_unroll <= 8 ? c->t->pw_unroll : PW_UNROLL;
    int64_t blocks = (chunks + (int64_t)threads * U - 1) / ((int64_t)threads * U);
    int64_t cap = grid_cap(c->t, threads);
    out->grid[0] = blocks < cap ? (blocks > 0 ? blocks : 1) : cap;
    out->grid[1] = out->grid[2] = 1;
    out->block = threads;
    out->scheme = "pointwise";
    find_in_place(c);
    emit_signature(c, out, threads);
    mc_strbuf *sb = c->sb;
    if (c->ip_view >= 0)
        mc_sb_printf(sb, "  /* written in place when p%d is p%d: only the elements x is selected for */\n"
                         "  const bool mc_same_ = (const void *)p%d == (const void *)p%d;\n",
                     c->view_param[c->ip_view], c->view_param[c->ip_store], c->view_param[c->ip_view],
                     c->view_param[c->ip_store]);
    /* each iteration: U chunks per thread, a block's threads side by side in each; all their
     * vector loads first (several 16-byte loads in flight), then the arithmetic and stores */
    mc_sb_printf(sb, "  for (%s base_ = (%s)blockIdx.x * %d + threadIdx.x; base_ < (%s)%s;"
                     " base_ += (%s)gridDim.x * %d) {\n",
                 c->I, c->I, threads * U, c->I, chunks_x, c->I, threads * U);
    bool *used = calloc((size_t)k->nviews + 1, 1);
    if (!used)
        return false;
    mark_used(k, 0, used);
    for (int v = 0; v < k->nviews; v++) {
        bool loaded = false;
        for (int i = 0; i < k->ncode; i++)
            if (k->code[i].kind == KI_LOAD && k->code[i].view == v)
                loaded = true;
        if (used[v] && loaded && view_vectorized(c, v))
            mc_sb_printf(sb, "    mc_vec<%s, %d> L%d[%d];\n",
                         storage_type(view_buffer(c, v)->dtype), c->V, v, U);
    }
    free(used);
    if (c->acc_scratch && c->V > 1)
        mc_sb_printf(sb, "    mc_vec<%s, %d> LA[%d];\n", storage_type(c->acc_dtype), c->V, U);
    for (int phase = 1; phase <= 2; phase++) {
        for (int u = 0; u < U; u++) {
            c->u = u;
            c->phase = phase;
            mc_sb_printf(sb, "    { /* chunk %d: %s */\n", u, phase == 1 ? "loads" : "compute");
            mc_sb_printf(sb, "      const %s ch_ = base_ + %d;\n", c->I, u * threads);
            mc_sb_printf(sb, "      if (ch_ < (%s)%s) {\n", c->I, chunks_x);
            mc_sb_printf(sb, "        const %s e_ = ch_ * %d;\n", c->I, c->V);
            emit_coords(c, "e_", 0, k->rank, "        ");
            emit_view_offsets(c, 0, 0, 4, false);
            if (!emit_chunk(c, 0, 0, 4))
                return false;
            mc_sb_puts(sb, "      }\n    }\n");
        }
    }
    c->u = -1;
    c->phase = 0;
    mc_sb_puts(sb, "  }\n}\n");
    return true;
}

static bool render_reduction(rctx *c, mc_cuda_code *out)
{
    const kir_kernel *k = c->k;
    mc_strbuf *sb = c->sb;
    int64_t nrows = c->dims ? 0 : shape_prod(k, 0, k->nrow);
    int64_t red = c->dims ? 0 : shape_prod(k, k->nrow, k->rank);
    char nrows_x[48], C_x[48];
    bool red_sym = false; /* run-time sizes with a symbolic reduced extent: the schedule is
                             made for its maximum, every chunk guarded */
    if (c->dims) {
        size_expr(c, k->shape, k->nrow, 1, nrows_x, sizeof nrows_x);
        nrows = size_value(c, k->shape, k->nrow, 1);
        size_expr(c, k->shape + k->nrow, k->rank - k->nrow, c->V, C_x, sizeof C_x);
        red_sym = any_sym(k->shape + k->nrow, k->rank - k->nrow);
        red = red_sym ? size_max(c, k->shape + k->nrow, k->rank - k->nrow)
                      : size_value(c, k->shape + k->nrow, k->rank - k->nrow, 1);
        if (red < 1) /* no maximum: a block per row whose threads loop over the chunks */
            red = (int64_t)1 << 40;
    } else {
        snprintf(nrows_x, sizeof nrows_x, "%lld", (long long)nrows);
        snprintf(C_x, sizeof C_x, "%lld", (long long)(red / c->V));
    }
    int64_t C = red / c->V; /* chunks per row (at most, with red_sym) */
    bool warp = C <= 32 * 8;
    int T;
    if (warp) {
        T = 32;
    } else {
        int per = c->t->red_chunks > 0 ? c->t->red_chunks : RED_CHUNKS;
        int64_t want = (C + per - 1) / per;
        T = 64;
        while (T < want && T < 1024)
            T *= 2;
    }
    int64_t K = (C + T - 1) / T;
    bool looped = c->dims && K > 64; /* run-time sizes, more chunks than are worth writing
                                        out (or no maximum): a loop, no caches */
    if (looped)
        K = 1;
    int rpb = warp ? 8 : 1; /* rows per block */
    int threads = warp ? 256 : T;
    /* register caches: views loaded in two or more loop blocks */
    if (K * c->V <= MAX_CACHE_ELEMS && !looped) {
        for (int v = 0; v < k->nviews; v++) {
            int cv = c->canon[v], nblk = 0;
            for (int b = 0; b < k->nblocks; b++) {
                if (!k->blocks[b].loop)
                    continue;
                bool uses = false;
                for (int i = k->blocks[b].first; i < k->blocks[b].first + k->blocks[b].count; i++)
                    if (k->code[i].kind == KI_LOAD && c->canon[k->code[i].view] == cv)
                        uses = true;
                nblk += uses;
            }
            if (nblk >= 2)
                c->cached[cv] = true;
        }
    }
    int64_t blocks = (nrows + rpb - 1) / rpb;
    int64_t cap = grid_cap(c->t, threads) * (warp ? 2 : 1);
    out->grid[0] = blocks < cap ? (blocks > 0 ? blocks : 1) : cap;
    out->grid[1] = out->grid[2] = 1;
    out->block = threads;
    out->scheme = warp ? "row-per-warp" : "row-per-block";
    emit_signature(c, out, threads);
    if (warp) {
        mc_sb_puts(sb, "  const int lane = threadIdx.x & 31;\n");
        mc_sb_printf(sb, "  for (%s row = (%s)blockIdx.x * %d + (threadIdx.x >> 5); row < (%s)%s;"
                         " row += (%s)gridDim.x * %d) {\n",
                     c->I, c->I, rpb, c->I, nrows_x, c->I, rpb);
    } else {
        mc_sb_puts(sb, "  const int lane = threadIdx.x;\n");
        mc_sb_printf(sb, "  for (%s row = blockIdx.x; row < (%s)%s; row += gridDim.x) {\n", c->I,
                     c->I, nrows_x);
    }
    emit_coords(c, "row", 0, k->nrow, "    ");
    if (!emit_row_bases(c))
        return false;
    for (int v = 0; v < k->nviews; v++)
        if (c->cached[v])
            mc_sb_printf(sb, "    float rc%d[%lld];\n", v, (long long)(K * c->V));
    for (int b = 0; b < k->nblocks; b++) {
        const kir_block *blk = &k->blocks[b];
        if (!blk->loop) {
            if (!emit_row_block(c, b, 2, "lane == 0"))
                return false;
            continue;
        }
        for (int r = 0; r < k->nreds; r++) {
            if (k->reds[r].block != b)
                continue;
            const char *at = mc_c_arith_type(k->reds[r].dtype);
            mc_sb_printf(sb, "    %s acc%d = ", at, r);
            red_init(sb, k->reds[r].op, k->reds[r].dtype);
            mc_sb_puts(sb, ";\n");
        }
        /* the chunk loop is written out unrolled, so register caches are indexed with
         * constants and stay in registers */
        for (int64_t kk = 0; kk < K; kk++) {
            if (looped)
                mc_sb_printf(sb, "    for (%s c_ = (%s)lane; c_ < (%s)%s; c_ += %d) {\n", c->I, c->I, c->I, C_x, T);
            else {
                mc_sb_printf(sb, "    { /* chunk %lld */\n", (long long)kk);
                mc_sb_printf(sb, "      const %s c_ = (%s)lane + %lld;\n", c->I, c->I, (long long)(kk * T));
            }
            bool guard = !looped && ((kk + 1) * T > C || red_sym);
            if (guard)
                mc_sb_printf(sb, "      if (c_ < (%s)%s) {\n", c->I, C_x);
            int dep = guard ? 4 : 3;
            mc_sb_printf(sb, "%sconst %s e_ = c_ * %d;\n", indent_of(dep), c->I, c->V);
            emit_coords(c, "e_", k->nrow, k->rank, indent_of(dep));
            emit_view_offsets(c, b, k->nrow, dep, true);
            if (!emit_chunk(c, b, (int)kk, dep))
                return false;
            if (guard)
                mc_sb_puts(sb, "      }\n");
            mc_sb_puts(sb, "    }\n");
        }
        /* later loop blocks read cached views from registers */
        for (int i = blk->first; i < blk->first + blk->count; i++)
            if (k->code[i].kind == KI_LOAD && c->cached[c->canon[k->code[i].view]])
                c->cache_filled[c->canon[k->code[i].view]] = true;
        /* combine the threads' partial results: every thread gets the row's value */
        for (int r = 0; r < k->nreds; r++) {
            if (k->reds[r].block != b)
                continue;
            const char *at = mc_c_arith_type(k->reds[r].dtype);
            const char *nm = red_name(k->reds[r].op);
            if (warp) {
                mc_sb_printf(sb, "    const %s rv%d = mc_warp_%s(acc%d);\n", at, r, nm, r);
            } else {
                mc_sb_printf(sb, "    %s rv%d;\n    {\n", at, r);
                mc_sb_printf(sb, "      __shared__ %s sh%d[32];\n", at, r);
                mc_sb_printf(sb, "      %s w_ = mc_warp_%s(acc%d);\n", at, nm, r);
                mc_sb_printf(sb, "      if ((lane & 31) == 0) sh%d[lane >> 5] = w_;\n", r);
                mc_sb_puts(sb, "      __syncthreads();\n");
                mc_sb_printf(sb, "      w_ = sh%d[0];\n", r);
                mc_sb_printf(sb, "      for (int q = 1; q < %d; q++) w_ = mc_red_%s(w_, sh%d[q]);\n",
                             T / 32, nm, r);
                mc_sb_puts(sb, "      __syncthreads();\n");
                mc_sb_printf(sb, "      rv%d = w_;\n    }\n", r);
            }
        }
    }
    mc_sb_puts(sb, "  }\n}\n");
    return true;
}

/* A scan (kir/kir.h: cumsum): a thread per row walks the row's chunks in order, each chunk's
 * elements in order, the running value in acc0 (emit_chunk adds each element after the
 * instructions that read it). O(n) per row of n; rows run in parallel, one per thread (a first
 * version: a row's elements are not split between threads). */
static bool render_scan(rctx *c, mc_cuda_code *out)
{
    const kir_kernel *k = c->k;
    mc_strbuf *sb = c->sb;
    /* with run-time sizes (c->dims) the rows and chunks are slots, the block size chosen from
     * the rows' maximum (none: 128), so the source is the same for every binding */
    int64_t nrows = c->dims ? size_value(c, k->shape, k->nrow, 1) : shape_prod(k, 0, k->nrow);
    int64_t most = c->dims ? size_max(c, k->shape, k->nrow) : nrows;
    char nrows_x[48], C_x[48]; /* chunks per row */
    size_expr(c, k->shape, k->nrow, 1, nrows_x, sizeof nrows_x);
    size_expr(c, k->shape + k->nrow, k->rank - k->nrow, c->V, C_x, sizeof C_x);
    int threads = most < 0 || most >= 128 ? 128 : 32;
    int64_t blocks = (nrows + threads - 1) / threads;
    int64_t cap = grid_cap(c->t, threads);
    out->grid[0] = blocks < cap ? (blocks > 0 ? blocks : 1) : cap;
    out->grid[1] = out->grid[2] = 1;
    out->block = threads;
    out->scheme = "scan-row-per-thread";
    emit_signature(c, out, threads);
    mc_sb_printf(sb, "  for (%s row = (%s)blockIdx.x * %d + threadIdx.x; row < (%s)%s;"
                     " row += (%s)gridDim.x * %d) {\n",
                 c->I, c->I, threads, c->I, nrows_x, c->I, threads);
    emit_coords(c, "row", 0, k->nrow, "    ");
    if (!emit_row_bases(c))
        return false;
    for (int b = 0; b < k->nblocks; b++) {
        if (!k->blocks[b].loop) {
            if (!emit_row_block(c, b, 2, "true"))
                return false;
            continue;
        }
        for (int r = 0; r < k->nreds; r++) {
            if (k->reds[r].block != b)
                continue;
            if (k->reds[r].dtype == MC_F32) { /* a float scan accumulates in double (kir/kir.h) */
                mc_sb_printf(sb, "    double acc%d = 0.0;\n", r);
                continue;
            }
            mc_sb_printf(sb, "    %s acc%d = ", mc_c_arith_type(k->reds[r].dtype), r);
            red_init(sb, k->reds[r].op, k->reds[r].dtype);
            mc_sb_puts(sb, ";\n");
        }
        mc_sb_printf(sb, "    for (%s c_ = 0; c_ < (%s)%s; c_++) {\n", c->I, c->I, C_x);
        mc_sb_printf(sb, "      const %s e_ = c_ * %d;\n", c->I, c->V);
        emit_coords(c, "e_", k->nrow, k->rank, "      ");
        emit_view_offsets(c, b, k->nrow, 3, true);
        if (!emit_chunk(c, b, 0, 3))
            return false;
        mc_sb_puts(sb, "    }\n");
        for (int r = 0; r < k->nreds; r++)
            if (k->reds[r].block == b)
                mc_sb_printf(sb, "    const %s rv%d = (%s)acc%d;\n", mc_c_arith_type(k->reds[r].dtype), r,
                             mc_c_arith_type(k->reds[r].dtype), r);
    }
    mc_sb_puts(sb, "  }\n}\n");
    return true;
}

/* A whole GEMM's loop over its batch index z_ (grid z, then strided), with the batch
 * coordinates i0.. and the operands' bases ab_ (A) and bb_ (B) at that index. Opens a brace
 * the caller closes. Sizes as literals, or read when the kernel runs (dim_expr). */
static void emit_batch_loop(rctx *c)
{
    const kir_kernel *k = c->k;
    int nb = k->rank - 2;
    char x[48];
    mc_sb_printf(c->sb, "  for (%s z_ = blockIdx.z; z_ < (%s)%s; z_ += gridDim.z) {\n", c->I,
                 c->I, size_expr(c, k->shape, nb, 1, x, sizeof x));
    emit_coords(c, "z_", 0, nb, "    ");
    for (int which = 0; which < 2; which++) {
        const kir_view *w = &k->views[which ? k->gemm.b : k->gemm.a];
        mc_sb_printf(c->sb, "    const %s %s_ = (%s)%s", c->I, which ? "bb" : "ab", c->I,
                     dim_expr(c, w->offset, x, sizeof x));
        for (int d = 0; d < nb; d++)
            if (w->stride[d] && k->shape[d] != 1)
                mc_sb_printf(c->sb, " + i%d * (%s)%s", d, c->I, dim_expr(c, w->stride[d], x, sizeof x));
        mc_sb_puts(c->sb, ";\n");
    }
}

/* The tiled GEMM: 16 x 16 outputs a CTA, A and B staged through shared memory 16 along K at a
 * time, any strides. With run-time sizes M, N, K, the batch and the strides are slots of S_
 * and the grid is the binding's. */
static bool render_gemm_tiled(rctx *c, mc_cuda_code *out)
{
    const kir_kernel *k = c->k;
    mc_strbuf *sb = c->sb;
    const int TS = 16;
    int nb = k->rank - 2;
    int64_t batch = size_value(c, k->shape, nb, 1);
    const kir_gemm *g = &k->gemm;
    const kir_view *A = &k->views[g->a], *B = &k->views[g->b];
    int64_t m = size_value(c, &g->m, 1, 1), n = size_value(c, &g->n, 1, 1);
    out->grid[0] = (n + TS - 1) / TS;
    out->grid[1] = (m + TS - 1) / TS;
    out->grid[2] = batch < 65535 ? (batch > 0 ? batch : 1) : 65535;
    out->block = TS * TS;
    out->scheme = "gemm-tiled";
    char mx[48], nx[48], kx[48], s0[48], s1[48];
    dim_expr(c, g->m, mx, sizeof mx);
    dim_expr(c, g->n, nx, sizeof nx);
    dim_expr(c, g->k, kx, sizeof kx);
    emit_signature(c, out, TS * TS);
    mc_sb_printf(sb, "  __shared__ float As[%d][%d], Bs[%d][%d];\n", TS, TS + 1, TS, TS + 1);
    mc_sb_puts(sb, "  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;\n");
    mc_sb_printf(sb, "  const %s i%d = (%s)blockIdx.y * 16 + ty, i%d = (%s)blockIdx.x * 16 + tx;\n",
                 c->I, nb, c->I, nb + 1, c->I);
    mc_sb_printf(sb, "  const %s am_ = (%s)blockIdx.y * 16 + tx; /* A row loaded by this thread */\n",
                 c->I, c->I);
    emit_batch_loop(c);
    mc_sb_puts(sb, "    float acc = 0.0f;\n");
    mc_sb_printf(sb, "    for (%s k0 = 0; k0 < (%s)%s; k0 += 16) {\n", c->I, c->I, kx);
    /* As[kk][mm] = A(m0 + mm, k0 + kk): thread (tx, ty) loads A(m0 + tx, k0 + ty) */
    mc_sb_printf(sb, "      As[ty][tx] = (am_ < (%s)%s && k0 + ty < (%s)%s) ? "
                     "mc_ld(p%d[ab_ + am_ * (%s)%s + (k0 + ty) * (%s)%s]) : 0.0f;\n",
                 c->I, mx, c->I, kx, c->view_param[g->a], c->I, dim_expr(c, A->stride[nb], s0, sizeof s0), c->I,
                 dim_expr(c, A->stride[nb + 1], s1, sizeof s1));
    mc_sb_printf(sb, "      Bs[ty][tx] = (i%d < (%s)%s && k0 + ty < (%s)%s) ? "
                     "mc_ld(p%d[bb_ + (k0 + ty) * (%s)%s + i%d * (%s)%s]) : 0.0f;\n",
                 nb + 1, c->I, nx, c->I, kx, c->view_param[g->b], c->I, dim_expr(c, B->stride[nb], s0, sizeof s0),
                 nb + 1, c->I, dim_expr(c, B->stride[nb + 1], s1, sizeof s1));
    mc_sb_puts(sb, "      __syncthreads();\n");
    mc_sb_puts(sb, "#pragma unroll\n      for (int kk = 0; kk < 16; kk++) acc += As[kk][ty] * Bs[kk][tx];\n");
    mc_sb_puts(sb, "      __syncthreads();\n    }\n");
    mc_sb_printf(sb, "    if (i%d < (%s)%s && i%d < (%s)%s) {\n", nb, c->I, mx, nb + 1, c->I, nx);
    /* epilogue: the single row block evaluated at (batch.., m, n); V == 1 */
    emit_view_offsets(c, 0, 0, 3, false);
    if (!emit_chunk(c, 0, 0, 3))
        return false;
    mc_sb_puts(sb, "    }\n  }\n}\n");
    return true;
}

/* A small GEMM (the plan's `small`: few rows, both operands contiguous along K), where launch
 * and memory latency, not arithmetic, set the time. Each warp owns a DOT_TM x DOT_TN tile of
 * outputs; its lanes stride along K (so every load instruction of the warp reads consecutive
 * addresses) and keep one partial sum per output. A reduce-scatter butterfly then leaves each
 * output's total in two lanes (16 shuffles for 16 outputs instead of 5 per output), and the
 * even lane of each pair runs the epilogue at that (m, n). Rows and columns past the edge are
 * clamped for the loads and not stored. */
#define DOT_TM 4
#define DOT_TN 4
#define DOT_WARPS 4

static bool render_gemm_dot(rctx *c, mc_cuda_code *out)
{
    const kir_kernel *k = c->k;
    mc_strbuf *sb = c->sb;
    int nb = k->rank - 2;
    int64_t batch = shape_prod(k, 0, nb);
    const kir_gemm *g = &k->gemm;
    const kir_view *A = &k->views[g->a], *B = &k->views[g->b];
    int64_t tiles_n = (g->n + DOT_TN - 1) / DOT_TN;
    int64_t tiles = (g->m + DOT_TM - 1) / DOT_TM * tiles_n;
    out->grid[0] = (tiles + DOT_WARPS - 1) / DOT_WARPS;
    out->grid[1] = 1;
    out->grid[2] = batch < 65535 ? (batch > 0 ? batch : 1) : 65535;
    out->block = 32 * DOT_WARPS;
    out->scheme = "gemm-dot";
    emit_signature(c, out, 32 * DOT_WARPS);
    const char *I = c->I;
    mc_sb_printf(sb, "  const int lane = threadIdx.x & 31;\n"
                     "  const %s tile = (%s)blockIdx.x * %d + (threadIdx.x >> 5);\n"
                     "  if (tile >= (%s)%lld)\n    return;\n"
                     "  const %s m0 = tile / %lld * %d, n0 = tile %% %lld * %d;\n",
                 I, I, DOT_WARPS, I, (long long)tiles, I, (long long)tiles_n, DOT_TM,
                 (long long)tiles_n, DOT_TN);
    emit_batch_loop(c);
    /* row bases, clamped to the last row/column so edge tiles load valid memory */
    for (int r = 0; r < DOT_TM; r++)
        mc_sb_printf(sb, "    const %s ar%d = ab_ + min(m0 + %d, (%s)%lld) * (%s)%lld;\n", I, r,
                     r, I, (long long)g->m - 1, I, (long long)A->stride[nb]);
    for (int q = 0; q < DOT_TN; q++)
        mc_sb_printf(sb, "    const %s bc%d = bb_ + min(n0 + %d, (%s)%lld) * (%s)%lld;\n", I, q,
                     q, I, (long long)g->n - 1, I, (long long)B->stride[nb + 1]);
    int T = DOT_TM * DOT_TN;
    mc_sb_puts(sb, "    float");
    for (int t = 0; t < T; t++)
        mc_sb_printf(sb, "%s s%d = 0.0f", t ? "," : "", t);
    mc_sb_puts(sb, ";\n");
    mc_sb_printf(sb, "#pragma unroll 8\n    for (%s kk = lane; kk < (%s)%lld; kk += 32) {\n", I, I,
                 (long long)g->k);
    for (int r = 0; r < DOT_TM; r++)
        mc_sb_printf(sb, "      const float a%d = mc_ld(p%d[ar%d + kk]);\n", r,
                     c->view_param[g->a], r);
    for (int q = 0; q < DOT_TN; q++)
        mc_sb_printf(sb, "      const float b%d = mc_ld(p%d[bc%d + kk]);\n", q,
                     c->view_param[g->b], q);
    for (int r = 0; r < DOT_TM; r++)
        for (int q = 0; q < DOT_TN; q++)
            mc_sb_printf(sb, "      s%d = fmaf(a%d, b%d, s%d);\n", r * DOT_TN + q, r, q,
                         r * DOT_TN + q);
    mc_sb_puts(sb, "    }\n");
    /* reduce-scatter: at offset o the lanes with bit o set keep the upper half of the sums */
    int h = T / 2;
    for (int o = 16; o >= 1 && h >= 1; o /= 2, h /= 2) {
        mc_sb_printf(sb, "    {\n      const bool up = lane & %d;\n", o);
        for (int t = 0; t < h; t++)
            mc_sb_printf(sb, "      s%d = (up ? s%d : s%d) + __shfl_xor_sync(0xffffffffu, "
                             "up ? s%d : s%d, %d);\n", t, t + h, t, t, t + h, o);
        mc_sb_puts(sb, "    }\n");
    }
    /* T = 16 sums over 32 lanes: one more exchange completes lane pairs (2i, 2i+1) */
    int held_shift = 0;
    for (int n = 32; n > T; n /= 2)
        held_shift++;
    for (int o = 1; o < (1 << held_shift); o *= 2)
        mc_sb_printf(sb, "    s0 += __shfl_xor_sync(0xffffffffu, s0, %d);\n", o);
    mc_sb_printf(sb, "    const int t_out = lane >> %d;\n", held_shift);
    mc_sb_printf(sb, "    const %s i%d = m0 + t_out / %d, i%d = n0 + t_out %% %d;\n", I, nb,
                 DOT_TN, nb + 1, DOT_TN);
    mc_sb_printf(sb, "    if ((lane & %d) == 0 && i%d < (%s)%lld && i%d < (%s)%lld) {\n",
                 (1 << held_shift) - 1, nb, I, (long long)g->m, nb + 1, I, (long long)g->n);
    mc_sb_puts(sb, "      const float acc = s0;\n");
    emit_view_offsets(c, 0, 0, 3, false);
    if (!emit_chunk(c, 0, 0, 3))
        return false;
    mc_sb_puts(sb, "    }\n  }\n}\n");
    return true;
}

/* ---- implicit-GEMM convolution on tensor cores (the plan's conv, kir_gemm.conv) -------------
 *
 * Why this shape. A conv reaches the backend as one GEMM kernel, C_out x (N OH OW) x (C kh kw),
 * whose B operand is the im2col of x described in kir_gemm.conv (kir/kir.h) and never stored
 * (passes/decompose.c: an f16/bf16 conv without groups; grouped and depthwise convs keep the
 * gather + batched cuBLASLt path, and so does everything with MINIC_CUDA_IMPLICIT_CONV=0). The
 * representation is the GEMM kernel the rest of the compiler already knows, plus that
 * description, so the kernel IR, the verifier, the memory plan and the profile (category conv,
 * 2 M N K FLOPs, x read once) see one kernel, and fusion gives it the GEMM's epilogue (bias,
 * activation, residual add, casts), rendered here by emit_chunk at each output like the other
 * generated GEMMs. Before it, the im2col gather wrote cols [N, C kh kw, OH OW], ~9x x for a 3x3
 * conv, and cuBLASLt read it back: that traffic was the gap to PyTorch (docs/PERFORMANCE.md).
 *
 * The kernel. A CTA computes a BM x BN tile of D[C_out, pixels], the pixel axis running over
 * the batch too (n OH OW: layer 4's 7x7 images would waste most of a 128-wide tile), with
 * 2 BM threads: warps in a (BM / 32) x 2 grid, each a 32 x BN/2 tile of m16n8k16 mma.sync
 * (f32 accumulators). K goes by BK = 32: A (the weights [C_out, C kh kw], row-major, contiguous
 * along K) by cp.async 16-byte chunks where its rows allow, element by element otherwise (the
 * 7x7 stem's K = 147); B element by element: each thread owns one pixel column of the tile
 * (consecutive threads, consecutive pixels: coalesced along x's rows for stride 1), decodes
 * that pixel once, then for each of its K rows (c, ky, kx) computes the source element of x or
 * 0 in the padding and loads it to registers; the next K tile's loads are in flight while the
 * tensor cores work on this one, and land in the other half of the double-buffered shared
 * memory (A [BM][BK+8], B [BK][BN+8]: rows padded 16 bytes so ldmatrix is conflict-free; B's
 * fragments by ldmatrix.trans). Tile sizes by shape (mc_cuda_conv_tile): 128 x 128 where there
 * are enough CTAs, 64-row tiles for C_out = 64, 64 x 64 and 64 x 32 for the small late layers.
 *
 * The floor, for ResNet-18's 3x3 64-channel layer at batch 32 (56x56, H200): 2 * 64 * 100352 *
 * 576 = 7.40 GFLOP, 9.9 us at ~750 TFLOP/s dense f16; x and y 12.8 MB each (a residual 12.8 MB
 * more), 25.7 MB / 4.8 TB/s = 5.4 us (8.0 us with a residual): compute-bound, ~10 us. */
#define CONV_BK 32

/* MINIC_CUDA_CONV_SMALL=1 (for experiments, not measured yet): a conv with fewer 64x64 tiles than
 * four per SM (ResNet-18's layers 3 and 4 at batch 32: 392 and 200) takes 64x64 tiles (warp
 * tiles 32x32: twice the mma per fragment load of 64x32's 32x16) and a K split up to four CTAs
 * per SM (layer 4: 3 ways, 600 CTAs of 48 K tiles; layer 3: 2 ways, 784 CTAs of 36), where by
 * default a grid below two CTAs per SM takes 64x32 tiles (layer 4: 392 CTAs, ~3 an SM, achieved
 * occupancy 18%, Nsight 20:30) and is split only below two per SM. The split's price: each
 * part's f32 sums added into a region of M x pixels floats (red.global.add, in L2; 3.2 MB a
 * part for layer 4), the last CTA of a tile reading them back and zeroing them.
 * MINIC_CUDA_CONV_SMALL=N (2 to 8): N CTAs an SM wanted, not four (the split rounds up: layer 4
 * at N = 3 2 ways, 400 CTAs, one wave at 3 an SM; at N = 4, 600 CTAs, more than the 528 that
 * 4 an SM hold). Returns the CTAs an SM wanted, 0 where the knob is off. */
static int conv_small(void)
{
    const char *e = getenv("MINIC_CUDA_CONV_SMALL");
    int n = e ? atoi(e) : 0;
    return n == 1 ? 4 : n >= 2 && n <= 8 ? n : 0;
}

void mc_cuda_conv_tile(int64_t m, int64_t pixels, int sms, int *bm, int *bn)
{
    /* the first with two tiles per SM or more, else the last: 64x32 for ResNet-18's last stage
     * at batch 32 (392 tiles; 107 us a 3x3 conv against 118.5 with 200 64x64 tiles split in two
     * along K, H200, 13:23 call) */
    static const int tiles[4][2] = {{128, 128}, {64, 128}, {64, 64}, {64, 32}};
    /* MINIC_CUDA_CONV_TILE=BMxBN (BM 32, 64 or 128, BN 32, 64 or 128): one tile for every conv,
     * for experiments */
    const char *e = getenv("MINIC_CUDA_CONV_TILE");
    int em = 0, en = 0;
    if (e && sscanf(e, "%dx%d", &em, &en) == 2 && (em == 32 || em == 64 || em == 128) && (en == 32 || en == 64 || en == 128)) {
        *bm = em;
        *bn = en;
        return;
    }
    if (conv_small() && m > 32 && (m + 63) / 64 * ((pixels + 63) / 64) < conv_small() * (int64_t)sms) {
        *bm = *bn = 64;
        return;
    }
    for (int t = 0; t < 4; t++) {
        *bm = tiles[t][0];
        *bn = tiles[t][1];
        if (*bm == 128 && m <= 64)
            continue;
        if ((m + *bm - 1) / *bm * ((pixels + *bn - 1) / *bn) >= 2 * (int64_t)sms)
            return;
    }
}

/* The K split of conv kernel k with p's tile, and the f32 region it needs. */
static void conv_split_plan(const kir_kernel *k, int sms, mc_cuda_gemm_plan *p)
{
    int64_t pixels = k->gemm.n * k->shape[0];
    int64_t tiles = (k->gemm.m + p->conv_bm - 1) / p->conv_bm * ((pixels + p->conv_bn - 1) / p->conv_bn);
    int64_t ktiles = (k->gemm.k + CONV_BK - 1) / CONV_BK;
    /* Fewer tiles than two per SM (ResNet-18's last stage at batch 32: 200 64x64 tiles, K 4608):
     * K split in up to four, each part at least 8 K tiles, so that every SM has two CTAs or more.
     * MINIC_CUDA_CONV_SPLITK=S: S ways for every conv (1: never), for experiments. */
    const char *e = getenv("MINIC_CUDA_CONV_SPLITK");
    int s = 1, least = 8, per = conv_small() && p->conv_bm == 64 && p->conv_bn == 64 ? conv_small() : 2; /* CTAs an SM */
    if (e && atoi(e) >= 1) {
        s = atoi(e);
        least = 4;
    } else if (tiles < per * (int64_t)sms) {
        s = (int)((per * (int64_t)sms + tiles - 1) / tiles);
    }
    if (s > 8)
        s = 8;
    if (!e && s > 4)
        s = 4;
    while (s > 1 && ktiles / s < least)
        s--;
    p->conv_split = s > 1 ? s : 1;
    p->conv_ws_bytes = p->conv_split > 1 ? (k->gemm.m * pixels + tiles) * 4 : 0;
}

void mc_cuda_conv_plan(const kir_kernel *k, int sms, mc_cuda_gemm_plan *p)
{
    mc_cuda_conv_tile(k->gemm.m, k->gemm.n * k->shape[0], sms, &p->conv_bm, &p->conv_bn);
    conv_split_plan(k, sms, p);
}

bool mc_cuda_sized_conv(void)
{
    const char *e = getenv("MINIC_CUDA_SIZED_CONV");
    return !(e && strcmp(e, "0") == 0);
}

/* The plan of a conv kernel whose batch is read when it runs (a symbolic batch,
 * mc_cuda_render_sized). Its tile is in the source, so it is the same for every binding: the
 * one mc_cuda_conv_tile picks at the batch's declared maximum, at most 8 (8 without one). The
 * K split is the binding's (conv_split_plan on the bound kernel), read by the kernel when it
 * runs, so that a small batch still fills the SMs. ResNet-18 f16 over N<=64 at 224x224 on the
 * H200 (wall us per run at N = 1, 8, 32; the fixed programs 331.6, 633.9, 1421.7): tiles for
 * batch 8 389.8, 666.6, 1602.1; for 32 480.4, 1048.6, 1384.0; for 16 433.8, 941.7, 1482.5; for
 * 1 378.2, 740.7, 1844.8; for 32 splitting only below one tile per SM 478.7, 857.2, 1389.3. */
void mc_cuda_conv_plan_sized(const kir_program *sized, int ki, const kir_kernel *bound, int sms,
                             mc_cuda_gemm_plan *p)
{
    const kir_kernel *k = &sized->kernels[ki];
    int64_t batch = 8;
    if (!mc_dims_max(sized->dims, k->shape[0], &batch) || batch < 1 || batch > 8)
        batch = 8;
    mc_cuda_conv_tile(k->gemm.m, k->gemm.n * batch, sms, &p->conv_bm, &p->conv_bn);
    conv_split_plan(bound, sms, p);
}

/* B pixels per thread in the deeper loop (MINIC_CUDA_CONV_BVEC=1|2|4 for experiments): a thread
 * reads one K table entry for V neighbouring pixels and stores them to shared memory as one
 * 4- or 8-byte word; each pixel keeps its own decoded coordinates (any stride, rows of any
 * length). Needs the K table and V pixels' rows of one pass to divide BK. By default 4 where a
 * thread loads at most 8 B elements a K tile (layer 4's 64x32 tiles), else 2 (more registers
 * for the pixels cost occupancy). H200, S:V:E (stages, V, staged epilogue) in the 15:40 and
 * 16:05 calls: layer 1 (64x128 tiles, 32 elements a thread) 3:2:1 64.5 us, 3:2:0 65.9, 3:4:0
 * 75.4, 2:1:0 (the first kernel) 67.7; layer 4 (64x32, 8 elements) 3:4:0 90.6, 3:2:0 104.1,
 * 4:2:1 92.9, 4:1:0 95.9, 2:1:0 106.4; the stem 3:2:1 165.7, 3:4:0 169.0, 2:1:0 185.9; ResNet-18
 * 3:2:1 1356.7, 3:2:0 1389.2, 3:4:1 1445.0, 4:2:1 1491.0, 2:1:0 1522.8. */
static int conv_bvec(int bn, int t, int bk, bool ktab)
{
    const char *e = getenv("MINIC_CUDA_CONV_BVEC");
    int v = bk * bn / t <= 8 ? 4 : 2;
    if (e && (atoi(e) == 1 || atoi(e) == 2 || atoi(e) == 4))
        v = atoi(e);
    while (v > 1 && (!ktab || bn % v != 0 || t * v < bn || (t * v) % bn != 0 || bk % (t * v / bn) != 0))
        v /= 2;
    return v;
}

/* The main loop's depth: shared-memory buffers, less one. 2 buffers (depth 1;
 * MINIC_CUDA_CONV_STAGES=2) is the first kernel: one K tile's loads in flight while the tensor
 * cores work on the tile before. Deeper, D tiles' loads are in flight: A by cp.async groups
 * (wait_group D - 1), B (and the stem's A) in D register sets, stored to shared memory one tile
 * ahead. By default 3 buffers (4 was slower wherever V > 1, see conv_bvec);
 * MINIC_CUDA_CONV_STAGES=2..4 for experiments. */
static int conv_stages(int bm, int bn, int bk)
{
    const char *e = getenv("MINIC_CUDA_CONV_STAGES");
    int stages = 3;
    if (e && atoi(e) >= 2 && atoi(e) <= 4)
        stages = atoi(e);
    while (stages > 2 && stages * (bm * (bk + 8) + bk * (bn + 8)) * 2 > 200 * 1024)
        stages--;
    return stages - 1;
}

/* K row kk's channel ch and window position (ky, kx), in kir_conv's order: (c, ky, kx), or by
 * chunks of kc channels (c / kc, ky, kx, c % kc) */
static void emit_conv_k_decode(mc_strbuf *sb, const kir_conv *cv)
{
    long long khw = (long long)(cv->kh * cv->kw), kw = (long long)cv->kw, kc = (long long)cv->kc;
    if (kc > 0)
        mc_sb_printf(sb, "        const int q_ = kk / %lld, cc_ = q_ / %lld, r = q_ - cc_ * %lld, "
                         "ch = cc_ * %lld + (kk - q_ * %lld), ky = r / %lld, kx = r - ky * %lld;\n",
                     kc, khw, khw, kc, kc, kw, kw);
    else
        mc_sb_printf(sb, "        const int ch = kk / %lld, r = kk - ch * %lld, ky = r / %lld, kx = r - ky * %lld;\n", khw, khw,
                     kw, kw);
}

/* One B element of K tile kt into rb[j], read through x's window (the implicit im2col): from
 * the K table kt_ where there is one, else K row kk decoded here; zero outside the image and
 * past K. Both conv loops load B so, one element a thread and step. */
static void emit_conv_b_element(mc_strbuf *sb, const kir_conv *cv, const char *I, bool ktab, int BK, int kstep,
                                int64_t K, const kir_view *X, const char *rb)
{
    if (ktab) {
        mc_sb_printf(sb, "      const int4 t = kt_[kt & 1][bk_ + j * %d];\n", kstep);
        mc_sb_puts(sb, "      const int iy = iy1_ + t.y, ix = ix0_ + t.z;\n");
        mc_sb_printf(sb, "      %s[j] = (unsigned)iy < %lluu && (unsigned)ix < %lluu ? xa_[pb_ + t.x] : (unsigned short)0;\n",
                     rb, (unsigned long long)cv->h, (unsigned long long)cv->w);
        return;
    }
    mc_sb_printf(sb, "      const int kk = kt * %d + bk_ + j * %d;\n      unsigned short v = 0;\n", BK, kstep);
    mc_sb_printf(sb, "      if (pv_ && kk < %lld) {\n", (long long)K);
    emit_conv_k_decode(sb, cv);
    mc_sb_printf(sb, "        const int iy = iy0_ + ky * %lld, ix = ix0_ + kx * %lld;\n", (long long)cv->dh,
                 (long long)cv->dw);
    mc_sb_printf(sb, "        if ((unsigned)iy < %lluu && (unsigned)ix < %lluu)\n", (unsigned long long)cv->h,
                 (unsigned long long)cv->w);
    mc_sb_printf(sb, "          v = xa_[xb_ + (%s)ch * (%s)%lld + (%s)iy * (%s)%lld + (%s)ix * (%s)%lld];\n", I, I,
                 (long long)X->stride[1], I, I, (long long)X->stride[2], I, I, (long long)X->stride[3]);
    mc_sb_printf(sb, "      }\n      %s[j] = v;\n", rb);
}

/* what emit_conv_pipelined needs of render_conv_mma's choices */
typedef struct {
    int BM, BN, BK, T, MT, NT, nb_ld, kstep, D;
    const char *S; /* the K split: a literal, or S_.v[i] (render_conv_mma) */
    bool avec, ktab, chunk; /* chunk: emit_conv_chunk's loads (ktab then off) */
    bool clast;             /* x's channels contiguous: emit_conv_clast's B by cp.async, [BN][BK] */
    int brow;               /* conv_brow: rows of 8 or 4 pixels by 4-byte words, 16: of 8 by 16-byte chunks */
    int64_t M, K;
    const char *P; /* the pixels N OH OW: a literal, or S_.v[i] (render_conv_mma) */
    const kir_view *A, *X;
    const kir_conv *cv;
} conv_gen;

static void emit_conv_store_b(mc_strbuf *sb, int n, int rows, int kstep, int V);

/* The B loads' thread map of emit_conv_bvec, _chunk and _brow: thread tid owns V neighbouring
 * pixels bnv_ .. + V - 1 of the tile and K rows bkv_ + j * kstep of a tile, j < rows (returned). */
static int emit_conv_bmap(mc_strbuf *sb, const conv_gen *q, int V, int *kstep)
{
    int TP = q->BN / V;
    *kstep = q->T * V / q->BN;
    mc_sb_printf(sb, "  const int bnv_ = (tid %% %d) * %d, bkv_ = tid / %d;\n", TP, V, TP);
    return q->BK / *kstep;
}


/* load_b and store_b of the deeper loop with V pixels per thread (conv_bvec): thread tid owns
 * pixels n0 + bnv_ .. + V - 1 (each decoded here) and K rows bkv_ + j * kstep of a tile. The
 * register set keeps an element a register (no packing until the store, so that nothing waits
 * on a load before the tensor cores have run). */
static void emit_conv_bvec(rctx *c, const conv_gen *q, int V)
{
    mc_strbuf *sb = c->sb;
    const char *I = c->I;
    const kir_conv *cv = q->cv;
    const kir_view *X = q->X;
    int64_t O = cv->oh * cv->ow;
    int kstep, rows = emit_conv_bmap(sb, q, V, &kstep), n = rows * V;
    mc_sb_printf(sb, "  int iyv_[%d], ixv_[%d], pbv_[%d];\n#pragma unroll\n  for (int e = 0; e < %d; ++e) {\n", V, V, V, V);
    mc_sb_printf(sb, "    const %s pix = n0 + bnv_ + e, img = pix / %lld, o = pix - img * %lld;\n", I, (long long)O,
                 (long long)O);
    mc_sb_printf(sb, "    const int iy = (int)(o / %lld) * %lld - %lld, ix = (int)(o %% %lld) * %lld - %lld;\n",
                 (long long)cv->ow, (long long)cv->sh, (long long)cv->ph, (long long)cv->ow, (long long)cv->sw,
                 (long long)cv->pw);
    mc_sb_printf(sb, "    const bool ok = pix < (%s)%s;\n    iyv_[e] = ok ? iy : -(1 << 28);\n    ixv_[e] = ix;\n", I,
                 q->P);
    mc_sb_printf(sb, "    pbv_[e] = ok ? (%s)%lld + img * (%s)%lld + (%s)iy * (%s)%lld + (%s)ix * (%s)%lld : (%s)0;\n  }\n",
                 I, (long long)X->offset, I, (long long)X->stride[0], I, I, (long long)X->stride[2], I, I,
                 (long long)X->stride[3], I);
    mc_sb_printf(sb, "  auto load_b = [&](int kt, unsigned short (&rb)[%d]) {\n#pragma unroll\n", n);
    mc_sb_printf(sb, "    for (int j = 0; j < %d; ++j) {\n      const int4 t = kt_[kt & 1][bkv_ + j * %d];\n#pragma unroll\n",
                 rows, kstep);
    mc_sb_printf(sb, "      for (int e = 0; e < %d; ++e) {\n", V);
    mc_sb_puts(sb, "        const int iy = iyv_[e] + t.y, ix = ixv_[e] + t.z;\n");
    mc_sb_printf(sb, "        rb[j * %d + e] = (unsigned)iy < %lluu && (unsigned)ix < %lluu ? xa_[pbv_[e] + t.x] : "
                     "(unsigned short)0;\n      }\n    }\n  };\n",
                 V, (unsigned long long)cv->h, (unsigned long long)cv->w);
    emit_conv_store_b(sb, n, rows, kstep, V);
}

/* store_b of emit_conv_bvec and emit_conv_chunk: a thread's `rows` K rows (bkv_ + j * kstep) of
 * its V pixels (bnv_ ..) into the B tile, as one 2-, 4- or 8-byte word a row */
static void emit_conv_store_b(mc_strbuf *sb, int n, int rows, int kstep, int V)
{
    mc_sb_printf(sb, "  auto store_b = [&](int buf, const unsigned short (&rb)[%d]) {\n#pragma unroll\n", n);
    mc_sb_printf(sb, "    for (int j = 0; j < %d; ++j) {\n", rows);
    if (V == 1)
        mc_sb_printf(sb, "      Bs[buf][bkv_ + j * %d][bnv_] = rb[j];\n", kstep);
    else if (V == 2)
        mc_sb_printf(sb, "      *reinterpret_cast<unsigned *>(&Bs[buf][bkv_ + j * %d][bnv_]) = (unsigned)rb[j * 2] | "
                         "((unsigned)rb[j * 2 + 1] << 16);\n", kstep);
    else
        mc_sb_printf(sb, "      *reinterpret_cast<uint2 *>(&Bs[buf][bkv_ + j * %d][bnv_]) = make_uint2((unsigned)rb[j * 4] | "
                         "((unsigned)rb[j * 4 + 1] << 16), (unsigned)rb[j * 4 + 2] | ((unsigned)rb[j * 4 + 3] << 16));\n",
                     kstep);
    mc_sb_puts(sb, "    }\n  };\n");
}

/* The V pixels bnv_ + e of emit_conv_bmap's thread, decoded once: iyv_[e], ixv_[e] their
 * window's first row and column (iyv_ far negative for a pixel past the end: its loads off),
 * pbv_[e] the offset in x of that window origin at channel bkv_ (0 past the end). */
static void emit_conv_pixels(rctx *c, const conv_gen *q, int V)
{
    mc_strbuf *sb = c->sb;
    const char *I = c->I;
    const kir_conv *cv = q->cv;
    const kir_view *X = q->X;
    long long O = (long long)(cv->oh * cv->ow), sc = (long long)X->stride[1];
    mc_sb_printf(sb, "  int iyv_[%d], ixv_[%d];\n  %s pbv_[%d];\n#pragma unroll\n  for (int e = 0; e < %d; ++e) {\n", V, V, I,
                 V, V);
    mc_sb_printf(sb, "    const %s pix = n0 + bnv_ + e, img = pix / %lld, o = pix - img * %lld;\n", I, O, O);
    mc_sb_printf(sb, "    const int iy = (int)(o / %lld) * %lld - %lld, ix = (int)(o %% %lld) * %lld - %lld;\n",
                 (long long)cv->ow, (long long)cv->sh, (long long)cv->ph, (long long)cv->ow, (long long)cv->sw,
                 (long long)cv->pw);
    mc_sb_printf(sb, "    const bool ok = pix < (%s)%s;\n    iyv_[e] = ok ? iy : -(1 << 28);\n    ixv_[e] = ix;\n", I, q->P);
    mc_sb_printf(sb, "    pbv_[e] = ok ? (%s)%lld + img * (%s)%lld + (%s)iy * (%s)%lld + (%s)ix * (%s)%lld + (%s)bkv_ * (%s)%lld : (%s)0;\n  }\n",
                 I, (long long)X->offset, I, (long long)X->stride[0], I, I, (long long)X->stride[2], I, I,
                 (long long)X->stride[3], I, I, sc, I);
}

/* MINIC_CUDA_CONV_BROW=1 (for experiments, not measured yet): where K goes by chunks and the
 * conv steps 1 along x's rows, a thread owns V = 8 (else 4) neighbouring pixels of one output row
 * (OW a multiple of V) and reads each of its channels' V elements as V / 2 + 1 aligned 4-byte
 * words (V / 2 where the window's first element is even), not V 2-byte loads: a word lies
 * wholly inside x's row or wholly outside it (W and the row starts even), so one bounds check a
 * word; store_b shifts each pair out of two words by one byte permute (the selector kept with
 * the register set) and writes the V pixels as one 8- or 16-byte word. Fewer load
 * instructions (5 for 8 elements), fewer registers in flight (5 for 8 elements, where the
 * default keeps one an element), no per-element selects. Returns V, 16 for BROW=2's 16-byte
 * chunks (emit_conv_brow16, 8 pixels; else BROW=1's words), or 0 where neither applies. */
static int conv_brow(const rctx *c, const kir_conv *cv, const kir_view *X, int BN, int T, int BK)
{
    const char *e = getenv("MINIC_CUDA_CONV_BROW");
    if (!(e && (strcmp(e, "1") == 0 || strcmp(e, "2") == 0)) || cv->sw != 1 || cv->w % 2 != 0 || X->stride[3] != 1 ||
        X->offset % 2 != 0 || X->stride[0] % 2 != 0 || X->stride[1] % 2 != 0 || X->stride[2] % 2 != 0 ||
        c->align[X->buffer] < 4)
        return 0;
    /* =2: 16-byte chunks of 8 elements (emit_conv_brow16), where rows and their starts allow */
    if (strcmp(e, "2") == 0 && cv->w % 8 == 0 && X->offset % 8 == 0 && X->stride[0] % 8 == 0 && X->stride[1] % 8 == 0 &&
        X->stride[2] % 8 == 0 && c->align[X->buffer] >= 16 && cv->ow % 8 == 0 && BN % 8 == 0 && (T * 8) % BN == 0 &&
        BK % (T * 8 / BN) == 0)
        return 16;
    for (int V = 8; V >= 4; V /= 2)
        if (cv->ow % V == 0 && BN % V == 0 && (T * V) % BN == 0 && BK % (T * V / BN) == 0)
            return V;
    return 0;
}

/* the words of a register set of emit_conv_brow (q->brow: 8 or 4 pixels by 4-byte words, 16:
 * 8 pixels by 16-byte chunks): a thread's channels of a tile times its words, then the selector */
static int conv_brow_regs(const conv_gen *q)
{
    int V = q->brow == 16 ? 8 : q->brow, rows = q->BK / (q->T * V / q->BN);
    return rows * (q->brow == 16 ? 8 : V / 2 + 1) + 1;
}

/* MINIC_CUDA_CONV_BROW=2 (for experiments, not measured yet): BROW's rows of 8 pixels read as
 * 16-byte chunks, where x's rows are multiples of 8 elements and start 16-byte aligned (W % 8,
 * OW % 8: ResNet's 56x56 layer): the 8 elements from column bx lie in the aligned chunks at e0 =
 * bx & ~7 and e0 + 8 (the second only where s = bx - e0 > 0), each wholly inside or outside the
 * row; store_b shifts them by s elements: word p of the result is the byte permute of words
 * s / 2 + p and s / 2 + p + 1, the word offset s / 2 a switch (s is the same for every thread
 * of a tile: OW % 8 == 0, so no divergence). A warp's loads read each 32-byte sector of its rows
 * once or twice, where BROW=1's 4-byte words read it up to 5 times (L1 was 63% busy on layer 1,
 * Nsight 20:30). The register set: 8 words a channel and s. Continues emit_conv_brow's load_b
 * after its tile lines (cc, dy, bx, rok, the row start rs). */
static void emit_conv_brow16(rctx *c, const conv_gen *q, int kstep, int rows, int n)
{
    mc_strbuf *sb = c->sb;
    const char *I = c->I;
    const kir_conv *cv = q->cv;
    const kir_view *X = q->X;
    long long sc = (long long)X->stride[1];
    mc_sb_puts(sb, "    const int e0 = bx & ~7, s = bx - e0;\n");
    mc_sb_printf(sb, "    const uint4 *pw = reinterpret_cast<const uint4 *>(xa_ + (rok ? rs + e0 : (%s)0));\n", I);
    mc_sb_printf(sb, "    const bool ok0 = rok && (unsigned)e0 < %lluu, ok1 = rok && s != 0 && (unsigned)(e0 + 8) < %lluu;\n",
                 (unsigned long long)cv->w, (unsigned long long)cv->w);
    mc_sb_printf(sb, "#pragma unroll\n    for (int j = 0; j < %d; ++j) {\n", rows);
    mc_sb_printf(sb, "      const uint4 a = ok0 ? pw[j * %lld] : make_uint4(0u, 0u, 0u, 0u), b = ok1 ? pw[j * %lld + 1] : "
                     "make_uint4(0u, 0u, 0u, 0u);\n",
                 (long long)kstep * sc / 8, (long long)kstep * sc / 8);
    mc_sb_puts(sb, "      rb[j * 8] = a.x;\n      rb[j * 8 + 1] = a.y;\n      rb[j * 8 + 2] = a.z;\n      rb[j * 8 + 3] = a.w;\n"
                   "      rb[j * 8 + 4] = b.x;\n      rb[j * 8 + 5] = b.y;\n      rb[j * 8 + 6] = b.z;\n      rb[j * 8 + 7] = b.w;\n");
    mc_sb_printf(sb, "    }\n    rb[%d] = (unsigned)s;\n  };\n", n - 1);
    mc_sb_printf(sb, "  auto store_b = [&](int buf, const unsigned (&rb)[%d]) {\n", n);
    mc_sb_printf(sb, "    const unsigned sel = rb[%d] & 1u ? 0x5432u : 0x3210u;\n    switch (rb[%d] >> 1) {\n", n - 1, n - 1);
    for (int k = 0; k < 4; k++) { /* the word offset s / 2: case k (3: default) */
        if (k < 3)
            mc_sb_printf(sb, "    case %d:\n", k);
        else
            mc_sb_puts(sb, "    default:\n");
        mc_sb_printf(sb, "#pragma unroll\n      for (int j = 0; j < %d; ++j)\n", rows);
        mc_sb_printf(sb, "        *reinterpret_cast<uint4 *>(&Bs[buf][bkv_ + j * %d][bnv_]) = make_uint4(", kstep);
        for (int p = 0; p < 4; p++)
            mc_sb_printf(sb, "%s__byte_perm(rb[j * 8 + %d], rb[j * 8 + %d], sel)", p ? ", " : "", k + p, k + p + 1);
        mc_sb_puts(sb, ");\n      break;\n");
    }
    mc_sb_puts(sb, "    }\n  };\n");
}

/* emit_conv_chunk's load_b and store_b by row words (conv_brow): thread tid owns pixels bnv_ ..
 * + V - 1 (one output row: x's elements ix .. + V - 1 of a row for each window position) and
 * channels bkv_ + j * kstep of the chunk; its register set holds NW = V / 2 + 1 words a channel,
 * then the byte permute's selector. */
static void emit_conv_brow(rctx *c, const conv_gen *q, int Vk)
{
    mc_strbuf *sb = c->sb;
    const char *I = c->I;
    const kir_conv *cv = q->cv;
    const kir_view *X = q->X;
    int V = Vk == 16 ? 8 : Vk;
    long long sc = (long long)X->stride[1];
    int kstep, rows = emit_conv_bmap(sb, q, V, &kstep), NW = V / 2 + 1, n = conv_brow_regs(q);
    emit_conv_pixels(c, q, 1); /* the group's first pixel (the others follow along its row) */
    mc_sb_printf(sb, "  auto load_b = [&](int kt, unsigned (&rb)[%d]) {\n", n);
    /* the tile's window position; bx: the first element's column (may be negative); the row
     * start rs: pbv_ is at column ixv_ */
    long long khw = (long long)(cv->kh * cv->kw);
    mc_sb_printf(sb, "    const int cc = kt / %lld, r = kt - cc * %lld, dy = (r / %lld) * %lld, dx = (r %% %lld) * %lld;\n", khw,
                 khw, (long long)cv->kw, (long long)cv->dh, (long long)cv->kw, (long long)cv->dw);
    mc_sb_printf(sb, "    const int bx = ixv_[0] + dx;\n    const bool rok = (unsigned)(iyv_[0] + dy) < %lluu;\n",
                 (unsigned long long)cv->h);
    mc_sb_printf(sb, "    const %s rs = pbv_[0] - ixv_[0] + (%s)cc * (%s)%lld + (%s)dy * (%s)%lld;\n", I, I, I,
                 (long long)q->BK * sc, I, I, (long long)X->stride[2]);
    if (Vk == 16) {
        emit_conv_brow16(c, q, kstep, rows, n);
        return;
    }
    /* e0 the even column at or below bx */
    mc_sb_printf(sb, "    const int e0 = bx & ~1;\n    const unsigned *pw = reinterpret_cast<const unsigned *>(xa_ + (rok ? rs + e0 : (%s)0));\n",
                 I);
    mc_sb_printf(sb, "#pragma unroll\n    for (int i = 0; i < %d; ++i) {\n", NW);
    mc_sb_printf(sb, "      const bool ok = rok && (unsigned)(e0 + 2 * i) < %lluu && (i < %d || (bx & 1));\n",
                 (unsigned long long)cv->w, NW - 1);
    mc_sb_printf(sb, "#pragma unroll\n      for (int j = 0; j < %d; ++j)\n        rb[j * %d + i] = ok ? pw[j * %lld + i] : 0u;\n    }\n",
                 rows, NW, (long long)kstep * sc / 2);
    mc_sb_printf(sb, "    rb[%d] = bx & 1 ? 0x5432u : 0x3210u;\n  };\n", n - 1);
    mc_sb_printf(sb, "  auto store_b = [&](int buf, const unsigned (&rb)[%d]) {\n#pragma unroll\n", n);
    mc_sb_printf(sb, "    for (int j = 0; j < %d; ++j) {\n", rows);
    mc_sb_printf(sb, "      unsigned w_[%d];\n#pragma unroll\n      for (int p = 0; p < %d; ++p)\n", V / 2, V / 2);
    mc_sb_printf(sb, "        w_[p] = __byte_perm(rb[j * %d + p], rb[j * %d + p + 1], rb[%d]);\n", NW, NW, n - 1);
    if (V == 8)
        mc_sb_printf(sb, "      *reinterpret_cast<uint4 *>(&Bs[buf][bkv_ + j * %d][bnv_]) = make_uint4(w_[0], w_[1], w_[2], w_[3]);\n",
                     kstep);
    else
        mc_sb_printf(sb, "      *reinterpret_cast<uint2 *>(&Bs[buf][bkv_ + j * %d][bnv_]) = make_uint2(w_[0], w_[1]);\n", kstep);
    mc_sb_puts(sb, "    }\n  };\n");
}

/* load_b and store_b where K goes by chunks of BK channels (kir_conv.kc = BK): a K tile is one
 * window position (ky, kx) over BK channels, so a pixel's bounds are checked once a tile and
 * its BK elements lie at fixed distances (the channel stride) from one address: one load an
 * element, its offset a constant, where the table's path (emit_conv_bvec) spends a table read,
 * two adds and two compares. Thread tid owns pixels bnv_ .. + V - 1 and channels bkv_ +
 * j * kstep of the chunk. */
static void emit_conv_chunk(rctx *c, const conv_gen *q, int V)
{
    mc_strbuf *sb = c->sb;
    const char *I = c->I;
    const kir_conv *cv = q->cv;
    const kir_view *X = q->X;
    long long khw = (long long)(cv->kh * cv->kw), sc = (long long)X->stride[1];
    int kstep, rows = emit_conv_bmap(sb, q, V, &kstep), n = rows * V;
    emit_conv_pixels(c, q, V);
    mc_sb_printf(sb, "  auto load_b = [&](int kt, unsigned short (&rb)[%d]) {\n", n);
    mc_sb_printf(sb, "    const int cc = kt / %lld, r = kt - cc * %lld, dy = (r / %lld) * %lld, dx = (r %% %lld) * %lld;\n", khw,
                 khw, (long long)cv->kw, (long long)cv->dh, (long long)cv->kw, (long long)cv->dw);
    mc_sb_printf(sb, "    const %s off = (%s)cc * (%s)%lld + (%s)dy * (%s)%lld + (%s)dx * (%s)%lld;\n#pragma unroll\n", I, I, I,
                 (long long)q->BK * sc, I, I, (long long)X->stride[2], I, I, (long long)X->stride[3]);
    mc_sb_printf(sb, "    for (int e = 0; e < %d; ++e) {\n", V);
    mc_sb_printf(sb, "      const bool ok = (unsigned)(iyv_[e] + dy) < %lluu && (unsigned)(ixv_[e] + dx) < %lluu;\n",
                 (unsigned long long)cv->h, (unsigned long long)cv->w);
    mc_sb_puts(sb, "      const unsigned short *px = xa_ + (ok ? pbv_[e] + off : 0);\n#pragma unroll\n");
    mc_sb_printf(sb, "      for (int j = 0; j < %d; ++j)\n        rb[j * %d + e] = ok ? px[j * %lld] : (unsigned short)0;\n    }\n  };\n",
                 rows, V, (long long)kstep * sc);
    emit_conv_store_b(sb, n, rows, kstep, V);
}

/* MINIC_CUDA_CONV_CLAST_MAP=1 (for experiments, not measured yet): emit_conv_clast's loads
 * slot-major: consecutive threads take consecutive slots (channel groups or window positions)
 * of one pixel, so a warp's cp.async reads whole runs of a pixel's channels (the default's
 * consecutive threads take consecutive pixels, 16 bytes each C apart: half of each 32-byte
 * sector, the other half fetched again by the next load, cp.async.cg skipping L1), and a
 * thread's slot is the same for its pixels: the window position decoded once a tile. The
 * NHWC-given 3x3 layers measured slower than the NCHW chunks with the default map (18:52). */
static bool clast_slot_major(void)
{
    const char *e = getenv("MINIC_CUDA_CONV_CLAST_MAP");
    return e && strcmp(e, "1") == 0;
}

/* emit_conv_clast's load_b slot-major (clast_slot_major): thread tid loads slot tid % per of
 * pixels tid / per + e * (T / per) of the tile. */
static void emit_conv_clast_slots(rctx *c, const conv_gen *q, int per, long long ch, long long G)
{
    mc_strbuf *sb = c->sb;
    const char *I = c->I;
    const kir_conv *cv = q->cv;
    const kir_view *X = q->X;
    long long O = (long long)(cv->oh * cv->ow), khw = (long long)(cv->kh * cv->kw);
    int NP = q->BN * per / q->T, PS = q->T / per;
    mc_sb_printf(sb, "  const int ps_ = tid %% %d, pn0_ = tid / %d;\n", per, per);
    mc_sb_printf(sb, "  int piy_[%d], pix_x_[%d];\n  %s pbase_[%d];\n#pragma unroll\n  for (int e = 0; e < %d; ++e) {\n", NP,
                 NP, I, NP, NP);
    mc_sb_printf(sb, "    const %s pxl = n0 + pn0_ + e * %d, pim = pxl / %lld, po = pxl - pim * %lld;\n", I, PS, O, O);
    mc_sb_printf(sb, "    const bool pok = pxl < (%s)%s;\n", I, q->P);
    mc_sb_printf(sb, "    piy_[e] = pok ? (int)(po / %lld) * %lld - %lld : -(1 << 28);\n", (long long)cv->ow,
                 (long long)cv->sh, (long long)cv->ph);
    mc_sb_printf(sb, "    pix_x_[e] = (int)(po %% %lld) * %lld - %lld;\n", (long long)cv->ow, (long long)cv->sw,
                 (long long)cv->pw);
    mc_sb_printf(sb, "    pbase_[e] = pok ? (%s)%lld + pim * (%s)%lld : (%s)0;\n  }\n", I, (long long)X->offset, I,
                 (long long)X->stride[0], I);
    mc_sb_puts(sb, "  auto load_b = [&](int kt, int buf) {\n");
    mc_sb_printf(sb, "    const int gs = kt * %d + ps_, r = gs / %lld, cg = gs - r * %lld, dy = (r / %lld) * %lld, "
                     "dx = (r %% %lld) * %lld;\n",
                 per, G, G, (long long)cv->kw, (long long)cv->dh, (long long)cv->kw, (long long)cv->dw);
    mc_sb_printf(sb, "#pragma unroll\n    for (int e = 0; e < %d; ++e) {\n", NP);
    mc_sb_puts(sb, "      const int iy = piy_[e] + dy, ix = pix_x_[e] + dx;\n");
    mc_sb_printf(sb, "      const bool ok = r < %lld && (unsigned)iy < %lluu && (unsigned)ix < %lluu;\n", khw,
                 (unsigned long long)cv->h, (unsigned long long)cv->w);
    mc_sb_printf(sb, "      mc_cp%lld(&Bs[buf][pn0_ + e * %d][ps_ * %lld], ok ? xa_ + pbase_[e] + (%s)iy * (%s)%lld + "
                     "(%s)ix * (%s)%lld + cg * %lld : xa_, ok ? %lld : 0);\n",
                 2 * ch, PS, ch, I, I, (long long)X->stride[2], I, I, (long long)X->stride[3], ch, 2 * ch);
    mc_sb_puts(sb, "    }\n  };\n");
}

/* The default since the H200 call of 21:13 (the stem layer alone 101.9 us against 109.6; the
 * emulator and the conv rows on the GPU pass); MINIC_CUDA_CONV_CLAST_INC=0 turns it off.
 * emit_conv_clast's window
 * positions decoded once a tile, not once a load, where a slot is a whole window position (the
 * stem: 4 or 8 channels) and a thread's slots of a tile, step apart, wrap to the next window
 * row at most once (the 7x7 stem: 8 consecutive positions): its first position (ky0, kx0) by
 * one division, then each slot's row, column and address from those and a compile-time
 * offset, and one compare for the wrap. The pixel's own row start is computed once. */
static bool clast_inc(void)
{
    const char *e = getenv("MINIC_CUDA_CONV_CLAST_INC");
    return !(e && strcmp(e, "0") == 0);
}

/* emit_conv_clast's load_b by clast_inc (after its per-pixel declarations pn_ .. pbase_) */
static void emit_conv_clast_inc(rctx *c, const conv_gen *q, int per, int step, int slots, long long ch)
{
    mc_strbuf *sb = c->sb;
    const char *I = c->I;
    const kir_conv *cv = q->cv;
    const kir_view *X = q->X;
    long long khw = (long long)(cv->kh * cv->kw), kw = (long long)cv->kw, s2 = (long long)X->stride[2],
              s3 = (long long)X->stride[3];
    /* (the pixel's window origin; 0 for a pixel past the end, whose loads are off) */
    mc_sb_printf(sb, "  const %s pp_ = pok_ ? pbase_ + (%s)piy_ * (%s)%lld + (%s)pix_x_ * (%s)%lld : (%s)0;\n", I, I, I, s2, I, I,
                 s3, I);
    mc_sb_puts(sb, "  auto load_b = [&](int kt, int buf) {\n");
    mc_sb_printf(sb, "    const int r0 = kt * %d + ps_, ky0 = r0 / %lld, kx0 = r0 - ky0 * %lld;\n", per, kw, kw);
    mc_sb_printf(sb, "    const int iy0 = piy_ + ky0 * %lld, ix0 = pix_x_ + kx0 * %lld;\n", (long long)cv->dh,
                 (long long)cv->dw);
    mc_sb_printf(sb, "    const %s p0 = pp_ + (%s)(ky0 * %lld + kx0 * %lld);\n#pragma unroll\n", I, I, (long long)cv->dh * s2,
                 (long long)cv->dw * s3);
    mc_sb_printf(sb, "    for (int j = 0; j < %d; ++j) {\n", slots);
    /* w: this slot past the window row's end, so on the next row */
    mc_sb_printf(sb, "      const bool w = kx0 + j * %d >= %lld;\n", step, kw);
    mc_sb_printf(sb, "      const int iy = iy0 + (w ? %lld : 0), ix = ix0 + j * %lld - (w ? %lld : 0);\n", (long long)cv->dh,
                 (long long)step * cv->dw, kw * cv->dw);
    mc_sb_printf(sb, "      const bool ok = r0 + j * %d < %lld && (unsigned)iy < %lluu && (unsigned)ix < %lluu;\n", step, khw,
                 (unsigned long long)cv->h, (unsigned long long)cv->w);
    mc_sb_printf(sb, "      mc_cp%lld(&Bs[buf][pn_][(ps_ + j * %d) * %lld], ok ? xa_ + p0 + (%s)(j * %lld + (w ? %lld : 0)) : xa_, "
                     "ok ? %lld : 0);\n",
                 2 * ch, step, ch, I, (long long)step * cv->dw * s3, (long long)cv->dh * s2 - kw * cv->dw * s3, 2 * ch);
    mc_sb_puts(sb, "    }\n  };\n");
}

/* load_b where x's channels are contiguous (kir_conv.kc = c, 4 or a multiple of 8, channel
 * stride 1: a channels-last x (MINIC_CUDA_CONV_CLAST=0: none): the padded stem, or an x given
 * as the transpose of an NHWC tensor): K by window positions of c channels, so 4 or 8 channels of a
 * (pixel, window position) are contiguous, one 8- or 16-byte cp.async into B kept as [BN][BK]
 * (k contiguous; mma_tile reads it untransposed), zero-filled in the padding and past K: no
 * registers, no element loads, no table. Thread tid owns pixel tid % BN of the tile and its
 * slots tid / BN + j * (T / BN). */
static void emit_conv_clast(rctx *c, const conv_gen *q)
{
    mc_strbuf *sb = c->sb;
    const char *I = c->I;
    const kir_conv *cv = q->cv;
    const kir_view *X = q->X;
    /* a slot: ch channels (4, or 8 of the groups G of a multiple of 8) at one window position;
     * K tile kt holds slots kt * per .. + per - 1, slot gs at position gs / G, group gs % G */
    long long O = (long long)(cv->oh * cv->ow), ch = cv->c == 4 ? 4 : 8, G = (long long)cv->c / ch;
    long long khw = (long long)(cv->kh * cv->kw);
    int per = q->BK / (int)ch, step = q->T / q->BN, slots = per / step;
    if (clast_slot_major() && q->T % per == 0 && (q->BN * per) % q->T == 0) {
        emit_conv_clast_slots(c, q, per, ch, G);
        return;
    }
    mc_sb_printf(sb, "  const int pn_ = tid %% %d, ps_ = tid / %d;\n", q->BN, q->BN);
    mc_sb_printf(sb, "  const %s pxl_ = n0 + pn_, pim_ = pxl_ / %lld, po_ = pxl_ - pim_ * %lld;\n", I, O, O);
    mc_sb_printf(sb, "  const bool pok_ = pxl_ < (%s)%s;\n", I, q->P);
    mc_sb_printf(sb, "  const int piy_ = pok_ ? (int)(po_ / %lld) * %lld - %lld : -(1 << 28), pix_x_ = (int)(po_ %% %lld) * %lld - %lld;\n",
                 (long long)cv->ow, (long long)cv->sh, (long long)cv->ph, (long long)cv->ow, (long long)cv->sw,
                 (long long)cv->pw);
    mc_sb_printf(sb, "  const %s pbase_ = pok_ ? (%s)%lld + pim_ * (%s)%lld : (%s)0;\n", I, I, (long long)X->offset, I,
                 (long long)X->stride[0], I);
    if (clast_inc() && G == 1 && (slots - 1) * step <= cv->kw) {
        emit_conv_clast_inc(c, q, per, step, slots, ch);
        return;
    }
    mc_sb_puts(sb, "  auto load_b = [&](int kt, int buf) {\n#pragma unroll\n");
    mc_sb_printf(sb, "    for (int j = 0; j < %d; ++j) {\n", slots);
    mc_sb_printf(sb, "      const int s = ps_ + j * %d, gs = kt * %d + s, r = gs / %lld, cg = gs - r * %lld, ky = r / %lld, kx = r - ky * %lld;\n",
                 step, per, G, G, (long long)cv->kw, (long long)cv->kw);
    mc_sb_printf(sb, "      const int iy = piy_ + ky * %lld, ix = pix_x_ + kx * %lld;\n", (long long)cv->dh, (long long)cv->dw);
    mc_sb_printf(sb, "      const bool ok = r < %lld && (unsigned)iy < %lluu && (unsigned)ix < %lluu;\n", khw,
                 (unsigned long long)cv->h, (unsigned long long)cv->w);
    mc_sb_printf(sb, "      mc_cp%lld(&Bs[buf][pn_][s * %lld], ok ? xa_ + pbase_ + (%s)iy * (%s)%lld + (%s)ix * (%s)%lld + cg * %lld : xa_, "
                     "ok ? %lld : 0);\n",
                 2 * ch, ch, I, I, (long long)X->stride[2], I, I, (long long)X->stride[3], ch, 2 * ch);
    mc_sb_puts(sb, "    }\n  };\n");
}

/* The loads, the tensor-core loop and the K loop of render_conv_mma at depth D >= 2 (the
 * buffers As[D + 1], Bs[D + 1], the K table kt_ and its fill_tab, the pixel's decoded
 * coordinates in scope). Relative tile rr = kt - kt0 sits in buffer rr % (D + 1) and, while in
 * flight, in register set rr % D; every iteration commits one cp.async group (empty past the
 * end), so wait_group D - 1 leaves tile rr + 1 complete. */
static void emit_conv_pipelined(rctx *c, const conv_gen *q)
{
    mc_strbuf *sb = c->sb;
    const char *I = c->I;
    const kir_conv *cv = q->cv;
    int D = q->D, NB = D + 1, BK = q->BK, NA = q->BM * BK / q->T;
    int V = conv_bvec(q->BN, q->T, BK, q->ktab || q->chunk);
    bool cpa = q->avec || q->clast; /* a cp.async group a tile */
    if (q->clast)
        emit_conv_clast(c, q);
    else if (q->brow)
        emit_conv_brow(c, q, q->brow);
    else if (q->chunk)
        emit_conv_chunk(c, q, V);
    else if (V > 1)
        emit_conv_bvec(c, q, V);
    else {
        mc_sb_printf(sb, "  auto load_b = [&](int kt, unsigned short (&rb)[%d]) {\n#pragma unroll\n", q->nb_ld);
        mc_sb_printf(sb, "    for (int j = 0; j < %d; ++j) {\n", q->nb_ld);
        emit_conv_b_element(sb, cv, I, q->ktab, BK, q->kstep, q->K, q->X, "rb");
        mc_sb_puts(sb, "    }\n  };\n");
        mc_sb_printf(sb, "  auto store_b = [&](int buf, const unsigned short (&rb)[%d]) {\n#pragma unroll\n", q->nb_ld);
        mc_sb_printf(sb, "    for (int j = 0; j < %d; ++j) Bs[buf][bk_ + j * %d][bn_] = rb[j];\n  };\n", q->nb_ld, q->kstep);
    }
    const kir_view *A = q->A;
    if (q->avec) {
        mc_sb_puts(sb, "  auto load_a = [&](int kt, int buf) {\n#pragma unroll\n");
        mc_sb_printf(sb, "    for (int j = 0; j < %d; ++j) {\n", q->BM * BK / 8 / q->T);
        mc_sb_printf(sb, "      const int q = tid + j * %d, r = q >> 2, kc = (q & 3) * 8;\n", q->T);
        mc_sb_printf(sb, "      const %s m = m0 + r, kk = (%s)kt * %d + kc;\n", I, I, BK);
        mc_sb_printf(sb, "      const bool ok = m < (%s)%lld && kk < (%s)%lld;\n", I, (long long)q->M, I, (long long)q->K);
        /* (K not a multiple of 8, rows that are: the last chunk's bytes past K read as 0) */
        char bytes[128] = "16";
        if (q->K % 8 != 0)
            snprintf(bytes, sizeof bytes, "(kk + 8 <= (%s)%lld ? 16 : (int)((%s)%lld - kk) * 2)", I, (long long)q->K, I,
                     (long long)q->K);
        mc_sb_printf(sb, "      mc_cp16(&As[buf][r][kc], ok ? wa_ + (%s)%lld + m * (%s)%lld + kk : wa_, ok ? %s : 0);\n",
                     I, (long long)A->offset, I, (long long)A->stride[1], bytes);
        mc_sb_puts(sb, "    }\n  };\n");
    } else {
        mc_sb_printf(sb, "  auto load_a = [&](int kt, unsigned short (&ra)[%d]) {\n#pragma unroll\n", NA);
        mc_sb_printf(sb, "    for (int j = 0; j < %d; ++j) {\n", NA);
        mc_sb_printf(sb, "      const int e = tid + j * %d, r = e / %d, kc = e %% %d;\n", q->T, BK, BK);
        mc_sb_printf(sb, "      const %s m = m0 + r, kk = (%s)kt * %d + kc;\n", I, I, BK);
        mc_sb_printf(sb, "      ra[j] = m < (%s)%lld && kk < (%s)%lld ? wa_[(%s)%lld + m * (%s)%lld + kk * (%s)%lld] : "
                         "(unsigned short)0;\n    }\n  };\n",
                     I, (long long)q->M, I, (long long)q->K, I, (long long)A->offset, I, (long long)A->stride[1], I,
                     (long long)A->stride[2]);
        mc_sb_printf(sb, "  auto store_a = [&](int buf, const unsigned short (&ra)[%d]) {\n#pragma unroll\n", NA);
        mc_sb_printf(sb, "    for (int j = 0; j < %d; ++j) {\n", NA);
        mc_sb_printf(sb, "      const int e = tid + j * %d;\n      As[buf][e / %d][e %% %d] = ra[j];\n    }\n  };\n", q->T,
                     BK, BK);
    }
    mc_sb_printf(sb, "  float acc_[%d][%d][4];\n", q->MT, q->NT);
    mc_sb_printf(sb, "#pragma unroll\n  for (int a = 0; a < %d; ++a)\n#pragma unroll\n    for (int b = 0; b < %d; ++b)\n"
                     "#pragma unroll\n      for (int r = 0; r < 4; ++r) acc_[a][b][r] = 0.0f;\n", q->MT, q->NT);
    mc_sb_puts(sb, "  auto mma_tile = [&](int cur) {\n");
    mc_sb_printf(sb, "#pragma unroll\n    for (int ks = 0; ks < %d; ++ks) {\n", BK / 16);
    mc_sb_printf(sb, "      unsigned af[%d][4];\n#pragma unroll\n      for (int mt = 0; mt < %d; ++mt)\n", q->MT, q->MT);
    mc_sb_puts(sb, "        mc_ldsm4(af[mt], &As[cur][wm0 + mt * 16 + (lane & 15)][ks * 16 + (lane >> 4) * 8]);\n");
    mc_sb_printf(sb, "#pragma unroll\n      for (int nt = 0; nt < %d; ++nt) {\n", q->NT / 2);
    if (q->clast) /* B as [BN][BK]: k contiguous, so the fragments come untransposed */
        mc_sb_puts(sb, "        unsigned bf[4];\n"
                       "        mc_ldsm4(bf, &Bs[cur][wn0 + nt * 16 + (lane >> 4) * 8 + (lane & 7)][ks * 16 + ((lane >> 3) & 1) * 8]);\n");
    else
        mc_sb_puts(sb, "        unsigned bf[4];\n"
                       "        mc_ldsm4t(bf, &Bs[cur][ks * 16 + (lane & 15)][wn0 + nt * 16 + (lane >> 4) * 8]);\n");
    mc_sb_printf(sb, "#pragma unroll\n        for (int mt = 0; mt < %d; ++mt) {\n", q->MT);
    mc_sb_puts(sb, "          mc_mma(acc_[mt][2 * nt], af[mt], bf[0], bf[1]);\n"
                   "          mc_mma(acc_[mt][2 * nt + 1], af[mt], bf[2], bf[3]);\n"
                   "        }\n      }\n    }\n  };\n");
    int64_t nk = (q->K + BK - 1) / BK;
    mc_sb_printf(sb, "  const int kt0 = bs_ * %lld / %s, kt1 = (bs_ + 1) * %lld / %s, nkt = kt1 - kt0;\n", (long long)nk,
                 q->S, (long long)nk, q->S);
    for (int u = 0; u < D; u++) {
        if (q->brow) /* (emit_conv_brow's words and selector) */
            mc_sb_printf(sb, "  unsigned rb%d_[%d];\n", u, conv_brow_regs(q));
        else if (!q->clast)
            mc_sb_printf(sb, "  unsigned short rb%d_[%d];\n", u, q->nb_ld);
        if (!q->avec)
            mc_sb_printf(sb, "  unsigned short ra%d_[%d];\n", u, NA);
    }
    /* the prologue: tiles 0 .. D - 1 in flight (their K tables one by one), tile 0 stored */
    for (int i = 0; i < D; i++) {
        if (q->ktab)
            mc_sb_printf(sb, "  fill_tab(kt0 + %d, (kt0 + %d) & 1);\n  __syncthreads();\n", i, i);
        mc_sb_printf(sb, "  if (%d < nkt) {\n", i);
        if (q->avec)
            mc_sb_printf(sb, "    load_a(kt0 + %d, %d);\n", i, i);
        else
            mc_sb_printf(sb, "    load_a(kt0 + %d, ra%d_);\n", i, i);
        if (q->clast)
            mc_sb_printf(sb, "    load_b(kt0 + %d, %d);\n  }\n", i, i);
        else
            mc_sb_printf(sb, "    load_b(kt0 + %d, rb%d_);\n  }\n", i, i);
        if (cpa)
            mc_sb_puts(sb, "  mc_cp_commit();\n");
    }
    if (q->ktab)
        mc_sb_printf(sb, "  fill_tab(kt0 + %d, (kt0 + %d) & 1);\n", D, D);
    if (!q->clast)
        mc_sb_puts(sb, "  store_b(0, rb0_);\n");
    if (!q->avec)
        mc_sb_puts(sb, "  store_a(0, ra0_);\n");
    if (cpa)
        mc_sb_printf(sb, "  asm volatile(\"cp.async.wait_group %d;\\n\" ::: \"memory\");\n", D - 1);
    mc_sb_puts(sb, "  __syncthreads();\n");
    /* the loop, unrolled D times so that every register set is named. MINIC_CUDA_CONV_EARLY=1 (for
     * experiments, not measured yet): tile rr + 1's registers stored before tile rr's mma, not
     * after (its buffer is free: it held tile rr - D, read before the last sync; its loads were
     * issued an iteration ago), so that one register set, not two, is live across the mma, where
     * the mma's sums already take 64 (layer 1's 165 registers left 3 CTAs an SM). ptxas left
     * alone keeps ~165 either way; what drops is the need: with MINIC_CUDA_CONV_MINB=4 and BROW
     * layer 1 spills 24 bytes, not 40. The price: the store waits for loads one mma tile old,
     * not two. */
    const char *ee = getenv("MINIC_CUDA_CONV_EARLY");
    bool early = ee && strcmp(ee, "1") == 0 && !(q->clast && q->avec);
    mc_sb_printf(sb, "  for (int r0 = 0; r0 < nkt; r0 += %d) {\n", D);
    for (int u = 0; u < D; u++) {
        int un = (u + 1) % D;
        mc_sb_printf(sb, "    {\n      const int rr = r0 + %d, kt = kt0 + rr, cur = rr %% %d;\n      if (rr >= nkt)\n        break;\n",
                     u, NB);
        mc_sb_printf(sb, "      if (rr + %d < nkt) {\n", D);
        if (q->avec)
            mc_sb_printf(sb, "        load_a(kt + %d, (rr + %d) %% %d);\n", D, D, NB);
        else
            mc_sb_printf(sb, "        load_a(kt + %d, ra%d_);\n", D, u);
        if (q->clast)
            mc_sb_printf(sb, "        load_b(kt + %d, (rr + %d) %% %d);\n      }\n", D, D, NB);
        else
            mc_sb_printf(sb, "        load_b(kt + %d, rb%d_);\n      }\n", D, u);
        if (cpa)
            mc_sb_puts(sb, "      mc_cp_commit();\n");
        if (q->ktab) /* the other parity: load_b above read kt + D's */
            mc_sb_printf(sb, "      fill_tab(kt + %d, (kt + %d) & 1);\n", D + 1, D + 1);
        if (!early)
            mc_sb_puts(sb, "      mma_tile(cur);\n");
        mc_sb_puts(sb, "      if (rr + 1 < nkt) {\n");
        if (!q->clast)
            mc_sb_printf(sb, "        store_b((rr + 1) %% %d, rb%d_);\n", NB, un);
        if (!q->avec)
            mc_sb_printf(sb, "        store_a((rr + 1) %% %d, ra%d_);\n", NB, un);
        mc_sb_puts(sb, "      }\n");
        if (early)
            mc_sb_puts(sb, "      mma_tile(cur);\n");
        if (cpa)
            mc_sb_printf(sb, "      asm volatile(\"cp.async.wait_group %d;\\n\" ::: \"memory\");\n", D - 1);
        mc_sb_puts(sb, "      __syncthreads();\n    }\n");
    }
    mc_sb_puts(sb, "  }\n");
}

/* The conv's epilogue through shared memory (the deeper loop's buffers, free after its last
 * sync): the warps write their f32 sums as a BM x BN tile, then each thread takes runs of V
 * neighbouring pixels of one output channel (V = 4 or 8: OH OW a multiple of V, so a run stays
 * in one image) and runs the epilogue on them as one vector: 8- or 16-byte loads and stores of
 * the views contiguous along the pixels, the threads of a row side by side. */
static bool emit_conv_staged_epilogue(rctx *c, int BM, int BN, int T, int MT, int NT, int V, int64_t M, const char *P,
                                      int64_t O)
{
    mc_strbuf *sb = c->sb;
    const char *I = c->I;
    int pitch = BN + 8, runs = BN / V;
    mc_sb_printf(sb, "  __syncthreads();\n  float *cs_ = reinterpret_cast<float *>(smem_);\n");
    mc_sb_printf(sb, "#pragma unroll\n  for (int mt = 0; mt < %d; ++mt)\n#pragma unroll\n    for (int nt = 0; nt < %d; ++nt)\n"
                     "#pragma unroll\n      for (int h = 0; h < 2; ++h)\n",
                 MT, NT);
    mc_sb_printf(sb, "        *reinterpret_cast<float2 *>(&cs_[(wm0 + mt * 16 + g + h * 8) * %d + wn0 + nt * 8 + t4 * 2]) = "
                     "make_float2(acc_[mt][nt][h * 2], acc_[mt][nt][h * 2 + 1]);\n  __syncthreads();\n",
                 pitch);
    mc_sb_printf(sb, "  for (int q_ = tid; q_ < %d; q_ += %d) {\n", BM * runs, T);
    mc_sb_printf(sb, "    const int r_ = q_ / %d, c_ = (q_ %% %d) * %d;\n", runs, runs, V);
    mc_sb_printf(sb, "    const %s pp_ = n0 + c_, i1 = m0 + r_;\n", I);
    mc_sb_printf(sb, "    if (pp_ >= (%s)%s || i1 >= (%s)%lld) continue;\n", I, P, I, (long long)M);
    mc_sb_printf(sb, "    const %s i0 = pp_ / %lld, i2 = pp_ - i0 * %lld;\n", I, (long long)O, (long long)O);
    mc_sb_printf(sb, "    float accp_[%d];\n#pragma unroll\n    for (int e = 0; e < %d; e += 4)\n", V, V);
    mc_sb_printf(sb, "    {\n      const float4 v_ = *reinterpret_cast<const float4 *>(&cs_[r_ * %d + c_ + e]);\n", pitch);
    mc_sb_puts(sb, "      accp_[e] = v_.x;\n      accp_[e + 1] = v_.y;\n      accp_[e + 2] = v_.z;\n      accp_[e + 3] = v_.w;\n    }\n");
    c->V = V;
    c->acc_pair = true;
    emit_view_offsets(c, 0, 0, 2, false);
    if (!emit_chunk(c, 0, 0, 2))
        return false;
    mc_sb_puts(sb, "  }\n  (void)xb_;\n}\n");
    return true;
}

static bool render_conv_mma(rctx *c, const mc_cuda_gemm_plan *pl, mc_cuda_code *out)
{
    const kir_kernel *k = c->k;
    mc_strbuf *sb = c->sb;
    const kir_gemm *g = &k->gemm;
    const kir_conv *cv = &g->conv;
    const kir_view *A = &k->views[g->a], *X = &k->views[g->b];
    const char *I = c->I;
    mc_dtype dt = view_buffer(c, g->a)->dtype;
    if (k->rank != 3 || (dt != MC_F16 && dt != MC_BF16) || view_buffer(c, g->b)->dtype != dt ||
        (A->stride[0] != 0 && k->shape[0] != 1) || c->t->sm < 80)
        return false;
    int BM = pl->conv_bm > 0 ? pl->conv_bm : 64, BN = pl->conv_bn > 0 ? pl->conv_bn : 64;
    /* warps: BM / 32 along C_out, WARPS_N along the pixels (2; MINIC_CUDA_CONV_WARPS_N=4 for
     * experiments, where BN / 4 >= 16); MINIC_CUDA_CONV_MINB=N asks for N CTAs per SM */
    const char *ew = getenv("MINIC_CUDA_CONV_WARPS_N"), *eb = getenv("MINIC_CUDA_CONV_MINB");
    int WARPS_N = ew && atoi(ew) == 4 && BN / 4 >= 16 ? 4 : 2;
    if (BM / 32 * WARPS_N * 32 < BN) /* every thread one pixel column of B: a 32-row tile takes 4 */
        WARPS_N = 4;
    if (eb && atoi(eb) > 0 && atoi(eb) <= 8)
        c->minb = atoi(eb);
    int T = 32 * (BM / 32) * WARPS_N, WN = BN / WARPS_N, MT = 2, NT = WN / 8, BK = CONV_BK;
    int64_t M = g->m, K = g->k, O = g->n;
    /* the pixels N OH OW: a literal, or read when the kernel runs where the batch is symbolic
     * (mc_cuda_render_sized, with a plan that is the same for every binding:
     * mc_cuda_conv_plan_sized); P is this binding's, for the grid */
    int64_t pf[2] = {k->shape[0], O}, P = size_value(c, pf, 2, 1);
    char Ps[48], imgs[24];
    bool psized = size_expr(c, pf, 2, 1, Ps, sizeof Ps)[0] == 'S';
    snprintf(imgs, sizeof imgs, psized ? "?" : "%lld", (long long)k->shape[0]);
    if (c->dims && (any_sym(&M, 1) || any_sym(&K, 1) || any_sym(&O, 1) || mc_dim_is_sym(A->offset) ||
                    mc_dim_is_sym(X->offset) || any_sym(A->stride, 3) || any_sym(X->stride, 4)))
        return false; /* only the batch is read at run time: the rest is the bound kernel's */
    int64_t mtiles = (M + BM - 1) / BM, ptiles = (P + BN - 1) / BN;
    /* A in 16-byte chunks: contiguous along K, rows and offset multiples of 8 elements, the
     * buffer 16-byte aligned */
    int D = conv_stages(BM, BN, BK);
    /* (the deeper loop reads a last partial chunk of K, so K need not be a multiple of 8 there
     * where the rows are: the channels-last stem's weights) */
    bool avec = A->stride[2] == 1 && (K % 8 == 0 || D > 1) && A->stride[1] % 8 == 0 && A->offset % 8 == 0 &&
                c->align[A->buffer] >= 16;
    /* x's channels contiguous in runs of 4 or 8 (decompose's channels-last stem or an x given
     * channels-last; MINIC_CUDA_CONV_CLAST=0: neither): emit_conv_clast, B by cp.async */
    int64_t cc8 = cv->c == 4 ? 4 : 8; /* channels a cp.async */
    bool clast = D > 1 && cv->kc == cv->c && cv->c % cc8 == 0 && X->stride[1] == 1 && X->offset % cc8 == 0 &&
                 X->stride[0] % cc8 == 0 && X->stride[2] % cc8 == 0 && X->stride[3] % cc8 == 0 &&
                 c->align[X->buffer] >= 2 * cc8 && T % BN == 0 && (BK / cc8) % (T / BN) == 0;
    bool bf = dt == MC_BF16;
    /* MINIC_CUDA_CONV_KTAB=0: each thread decodes its K rows itself (three divisions an element) */
    const char *ek = getenv("MINIC_CUDA_CONV_KTAB");
    bool ktab = !(ek && strcmp(ek, "0") == 0);
    int S = pl->conv_split > 1 ? pl->conv_split : 1;
    out->grid[0] = mtiles * ptiles * S;
    out->grid[1] = out->grid[2] = 1;
    out->block = T;
    out->scheme = "conv-implicit-mma";
    /* the K split and the tiles per split, literals, or the binding's read when the kernel runs
     * (the split's code always there, taken where the split is > 1) */
    char Ss[48], Ts[48], S1s[64], MPs[48];
    snprintf(Ss, sizeof Ss, "%d", S);
    snprintf(S1s, sizeof S1s, "%du", S - 1);
    snprintf(MPs, sizeof MPs, "%lld", (long long)(M * P));
    if (psized) {
        char v[48];
        plan_value(c, 0, S, v, sizeof v);
        snprintf(Ss, sizeof Ss, "(int)%s", v);
        snprintf(S1s, sizeof S1s, "(unsigned)(%s - 1)", v);
        plan_value(c, 1, mtiles * ptiles, Ts, sizeof Ts);
        size_expr(c, (int64_t[]){k->shape[0], O * M}, 2, 1, MPs, sizeof MPs);
    }
    bool split = S > 1 || psized;
    if (split)
        out->param[out->nparams++] = MC_CUDA_PARAM_SPLITK;
    mc_sb_printf(sb, "typedef %s mc_t;\n#define MC_T2 %s\n#define MC_PACK %s\n#define MC_PTX \"%s\"\n",
                 bf ? "__nv_bfloat16" : "__half", bf ? "__nv_bfloat162" : "__half2",
                 bf ? "__floats2bfloat162_rn" : "__floats2half2_rn", bf ? "bf16" : "f16");
    mc_sb_puts(sb, mc_cuda_mma_helpers);
    mc_sb_puts(sb, mc_cuda_cp_helpers);
    if (clast && cc8 == 4) /* a pixel's 4 channels: 8 bytes (cp.async.cg takes only 16) */
        mc_sb_puts(sb, "MC_D void mc_cp8(void *dst, const void *src, int bytes) {\n"
                       "  const unsigned s = (unsigned)__cvta_generic_to_shared(dst);\n"
                       "  asm volatile(\"cp.async.ca.shared.global [%0], [%1], 8, %2;\\n\" :: \"r\"(s), \"l\"(src), \"r\"(bytes));\n"
                       "}\n");
    mc_sb_printf(sb, "/* implicit GEMM: C_out %lld x pixels %s (%s images of %lldx%lld) x K %lld (C %lld, window "
                     "%lldx%lld, stride %lld %lld, padding %lld %lld, dilation %lld %lld, x %lldx%lld); tile %dx%dx%d, "
                     "A by %s */\n",
                 (long long)M, Ps, imgs, (long long)cv->oh, (long long)cv->ow,
                 (long long)K, (long long)cv->c, (long long)cv->kh, (long long)cv->kw, (long long)cv->sh,
                 (long long)cv->sw, (long long)cv->ph, (long long)cv->pw, (long long)cv->dh, (long long)cv->dw,
                 (long long)cv->h, (long long)cv->w, BM, BN, BK, avec ? "cp.async" : "element loads");
    emit_signature(c, out, T);
    int pa = c->view_param[g->a], px = c->view_param[g->b];
    /* K by chunks of BK channels (the default; MINIC_CUDA_CONV_KCHUNK=0: not): the deeper loop's loads by
     * emit_conv_chunk, no K table; the first loop decodes each row (emit_conv_k_decode) */
    bool chunk = cv->kc == BK && D > 1;
    if (chunk || clast)
        ktab = false;
    if (D > 1) {
        /* D + 1 buffers, in dynamic shared memory (beyond 48 KB for the larger tiles); B as
         * [BK][BN], or [BN][BK] where emit_conv_clast fills it */
        int br = clast ? BN : BK, bc = clast ? BK : BN;
        int abytes = BM * (BK + 8) * 2, bbytes = br * (bc + 8) * 2;
        out->smem = (D + 1) * (abytes + bbytes);
        mc_sb_puts(sb, "  extern __shared__ __align__(16) unsigned short smem_[];\n");
        mc_sb_printf(sb, "  unsigned short (*As)[%d][%d] = reinterpret_cast<unsigned short (*)[%d][%d]>(smem_);\n", BM,
                     BK + 8, BM, BK + 8);
        mc_sb_printf(sb, "  unsigned short (*Bs)[%d][%d] = reinterpret_cast<unsigned short (*)[%d][%d]>(smem_ + %d);\n", br,
                     bc + 8, br, bc + 8, (D + 1) * abytes / 2);
    } else {
        mc_sb_printf(sb, "  __shared__ __align__(16) unsigned short As[2][%d][%d];\n", BM, BK + 8);
        mc_sb_printf(sb, "  __shared__ __align__(16) unsigned short Bs[2][%d][%d];\n", BK, BN + 8);
    }
    mc_sb_printf(sb, "  const unsigned short *wa_ = reinterpret_cast<const unsigned short *>(p%d);\n", pa);
    mc_sb_printf(sb, "  const unsigned short *xa_ = reinterpret_cast<const unsigned short *>(p%d);\n", px);
    mc_sb_puts(sb, "  const int tid = (int)threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;\n");
    /* CTA: its tile (C_out tiles the fastest: neighbours read the same pixels), its K split */
    if (psized)
        mc_sb_printf(sb, "  const int bt_ = (int)(blockIdx.x %% (unsigned)%s), bs_ = (int)(blockIdx.x / (unsigned)%s);\n",
                     Ts, Ts);
    else
        mc_sb_printf(sb, "  const int bt_ = (int)(blockIdx.x %% %lldu), bs_ = (int)(blockIdx.x / %lldu);\n",
                     (long long)(mtiles * ptiles), (long long)(mtiles * ptiles));
    mc_sb_printf(sb, "  const %s m0 = (%s)(bt_ %% %lld) * %d, n0 = (%s)(bt_ / %lld) * %d;\n", I, I,
                 (long long)mtiles, BM, I, (long long)mtiles, BN);
    mc_sb_printf(sb, "  const int wm0 = (warp / %d) * 32, wn0 = (warp %% %d) * %d;\n", WARPS_N, WARPS_N, WN);
    /* this thread's pixel column of B: decoded once */
    mc_sb_printf(sb, "  const int bn_ = tid %% %d, bk_ = tid / %d;\n", BN, BN);
    mc_sb_printf(sb, "  const %s pix_ = n0 + bn_;\n  const bool pv_ = pix_ < (%s)%s;\n", I, I, Ps);
    mc_sb_printf(sb, "  const %s img_ = pix_ / %lld, o_ = pix_ - img_ * %lld;\n", I, (long long)O, (long long)O);
    mc_sb_printf(sb, "  const int iy0_ = (int)(o_ / %lld) * %lld - %lld, ix0_ = (int)(o_ %% %lld) * %lld - %lld;\n",
                 (long long)cv->ow, (long long)cv->sh, (long long)cv->ph, (long long)cv->ow, (long long)cv->sw,
                 (long long)cv->pw);
    mc_sb_printf(sb, "  const %s xb_ = (%s)%lld + img_ * (%s)%lld;\n", I, I, (long long)X->offset, I,
                 (long long)X->stride[0]);
    if (ktab) {
        /* K row kk's (c, ky, kx) as an offset into x and a displacement in y and x, for the K
         * tile's BK rows, computed by BK threads two tiles ahead (the whole CTA reads the same
         * rows: one shared-memory broadcast per element instead of three divisions); rows past
         * K displace y by 2^24, a pixel past the end has y at -2^28: both read 0 */
        mc_sb_printf(sb, "  __shared__ int4 kt_[2][%d];\n", BK);
        mc_sb_puts(sb, "  auto fill_tab = [&](int kt, int buf) {\n");
        mc_sb_printf(sb, "    if (tid < %d) {\n      const int kk = kt * %d + tid;\n      int4 t = make_int4(0, 1 << 24, 0, 0);\n",
                     BK, BK);
        mc_sb_printf(sb, "      if (kk < %lld) {\n", (long long)K);
        emit_conv_k_decode(sb, cv);
        mc_sb_printf(sb, "        t = make_int4(ch * %lld + ky * %lld + kx * %lld, ky * %lld, kx * %lld, 0);\n",
                     (long long)X->stride[1], (long long)(cv->dh * X->stride[2]), (long long)(cv->dw * X->stride[3]),
                     (long long)cv->dh, (long long)cv->dw);
        mc_sb_puts(sb, "      }\n      kt_[buf][tid] = t;\n    }\n  };\n");
        mc_sb_puts(sb, "  const int iy1_ = pv_ ? iy0_ : -(1 << 28);\n");
        mc_sb_printf(sb, "  const %s pb_ = pv_ ? xb_ + (%s)iy0_ * (%s)%lld + (%s)ix0_ * (%s)%lld : (%s)0;\n", I, I, I,
                     (long long)X->stride[2], I, I, (long long)X->stride[3], I);
    }
    int nb_ld = BK * BN / T; /* B elements per thread per tile */
    int kstep = T / BN;
    if (D > 1) {
        const conv_gen q = {.BM = BM, .BN = BN, .BK = BK, .T = T, .MT = MT, .NT = NT, .nb_ld = nb_ld, .kstep = kstep,
                            .S = Ss, .D = D, .avec = avec, .ktab = ktab, .chunk = chunk, .clast = clast,
                            .brow = chunk ? conv_brow(c, cv, X, BN, T, BK) : 0, .M = M,
                            .K = K, .P = Ps, .A = A, .X = X, .cv = cv};
        emit_conv_pipelined(c, &q);
    } else {
        mc_sb_printf(sb, "  unsigned short rb_[%d];\n", nb_ld);
        /* B: global to registers for K tile kt */
        mc_sb_puts(sb, "  auto load_b = [&](int kt) {\n#pragma unroll\n");
        mc_sb_printf(sb, "    for (int j = 0; j < %d; ++j) {\n", nb_ld);
        emit_conv_b_element(sb, cv, I, ktab, BK, kstep, K, X, "rb_");
        mc_sb_puts(sb, "    }\n  };\n");
        mc_sb_puts(sb, "  auto store_b = [&](int buf) {\n#pragma unroll\n");
        mc_sb_printf(sb, "    for (int j = 0; j < %d; ++j) Bs[buf][bk_ + j * %d][bn_] = rb_[j];\n  };\n", nb_ld, kstep);
        /* A: global to shared memory for K tile kt */
        if (!avec)
            mc_sb_printf(sb, "  unsigned short ra_[%d];\n", BM * BK / T);
        mc_sb_puts(sb, "  auto load_a = [&](int kt, int buf) {\n#pragma unroll\n");
        if (avec) {
            mc_sb_printf(sb, "    for (int j = 0; j < %d; ++j) {\n", BM * BK / 8 / T);
            mc_sb_printf(sb, "      const int q = tid + j * %d, r = q >> 2, kc = (q & 3) * 8;\n", T);
            mc_sb_printf(sb, "      const %s m = m0 + r, kk = (%s)kt * %d + kc;\n", I, I, BK);
            mc_sb_printf(sb, "      const bool ok = m < (%s)%lld && kk < (%s)%lld;\n", I, (long long)M, I, (long long)K);
            mc_sb_printf(sb, "      mc_cp16(&As[buf][r][kc], ok ? wa_ + (%s)%lld + m * (%s)%lld + kk : wa_, ok ? 16 : 0);\n",
                         I, (long long)A->offset, I, (long long)A->stride[1]);
            mc_sb_puts(sb, "    }\n    mc_cp_commit();\n  };\n");
        } else {
            /* to registers, stored by store_a after this tile's mma (like B) */
            mc_sb_printf(sb, "    for (int j = 0; j < %d; ++j) {\n", BM * BK / T);
            mc_sb_printf(sb, "      const int e = tid + j * %d, r = e / %d, kc = e %% %d;\n", T, BK, BK);
            mc_sb_printf(sb, "      const %s m = m0 + r, kk = (%s)kt * %d + kc;\n", I, I, BK);
            mc_sb_printf(sb, "      ra_[j] = m < (%s)%lld && kk < (%s)%lld ? wa_[(%s)%lld + m * (%s)%lld + kk * (%s)%lld] : "
                             "(unsigned short)0;\n",
                         I, (long long)M, I, (long long)K, I, (long long)A->offset, I, (long long)A->stride[1], I,
                         (long long)A->stride[2]);
            mc_sb_puts(sb, "    }\n    (void)buf;\n  };\n");
        }
        mc_sb_puts(sb, "  auto store_a = [&](int buf) {\n");
        if (!avec) {
            mc_sb_printf(sb, "#pragma unroll\n    for (int j = 0; j < %d; ++j) {\n", BM * BK / T);
            mc_sb_printf(sb, "      const int e = tid + j * %d;\n      As[buf][e / %d][e %% %d] = ra_[j];\n    }\n", T, BK, BK);
        }
        mc_sb_puts(sb, "    (void)buf;\n  };\n");
        mc_sb_printf(sb, "  float acc_[%d][%d][4];\n", MT, NT);
        mc_sb_printf(sb, "#pragma unroll\n  for (int a = 0; a < %d; ++a)\n#pragma unroll\n    for (int b = 0; b < %d; ++b)\n"
                         "#pragma unroll\n      for (int r = 0; r < 4; ++r) acc_[a][b][r] = 0.0f;\n", MT, NT);
        /* this CTA's K tiles [kt0, kt1) (all of them without a split); buffers by the tile's parity */
        mc_sb_printf(sb, "  const int kt0 = bs_ * %lld / %s, kt1 = (bs_ + 1) * %lld / %s;\n", (long long)((K + BK - 1) / BK), Ss,
                     (long long)((K + BK - 1) / BK), Ss);
        if (ktab)
            mc_sb_puts(sb, "  fill_tab(kt0, kt0 & 1);\n  fill_tab(kt0 + 1, (kt0 + 1) & 1);\n  __syncthreads();\n");
        mc_sb_puts(sb, "  load_a(kt0, kt0 & 1);\n  load_b(kt0);\n  store_a(kt0 & 1);\n  store_b(kt0 & 1);\n");
        if (avec)
            mc_sb_puts(sb, "  asm volatile(\"cp.async.wait_all;\\n\" ::: \"memory\");\n");
        mc_sb_puts(sb, "  __syncthreads();\n");
        mc_sb_puts(sb, "  for (int kt = kt0; kt < kt1; ++kt) {\n"
                       "    const int cur = kt & 1;\n"
                       "    if (kt + 1 < kt1) {\n      load_a(kt + 1, cur ^ 1);\n      load_b(kt + 1);\n    }\n");
        if (ktab) /* tile kt's table was read by load_b(kt) in the last iteration, before its sync */
            mc_sb_puts(sb, "    fill_tab(kt + 2, cur);\n");
        mc_sb_printf(sb, "#pragma unroll\n    for (int ks = 0; ks < %d; ++ks) {\n", BK / 16);
        mc_sb_printf(sb, "      unsigned af[%d][4];\n#pragma unroll\n      for (int mt = 0; mt < %d; ++mt)\n", MT, MT);
        mc_sb_puts(sb, "        mc_ldsm4(af[mt], &As[cur][wm0 + mt * 16 + (lane & 15)][ks * 16 + (lane >> 4) * 8]);\n");
        mc_sb_printf(sb, "#pragma unroll\n      for (int nt = 0; nt < %d; ++nt) {\n", NT / 2);
        mc_sb_puts(sb, "        unsigned bf[4];\n"
                       "        mc_ldsm4t(bf, &Bs[cur][ks * 16 + (lane & 15)][wn0 + nt * 16 + (lane >> 4) * 8]);\n");
        mc_sb_printf(sb, "#pragma unroll\n        for (int mt = 0; mt < %d; ++mt) {\n", MT);
        mc_sb_puts(sb, "          mc_mma(acc_[mt][2 * nt], af[mt], bf[0], bf[1]);\n"
                       "          mc_mma(acc_[mt][2 * nt + 1], af[mt], bf[2], bf[3]);\n"
                       "        }\n      }\n    }\n");
        mc_sb_puts(sb, "    if (kt + 1 < kt1) {\n      store_a(cur ^ 1);\n      store_b(cur ^ 1);\n    }\n");
        if (avec)
            mc_sb_puts(sb, "    asm volatile(\"cp.async.wait_all;\\n\" ::: \"memory\");\n");
        mc_sb_puts(sb, "    __syncthreads();\n  }\n");
    }
    if (split) {
        /* split K: every CTA of the tile adds its sums into the f32 region (red.global.add),
         * the last to finish (a counter per tile) reads the totals back, leaves zeros behind,
         * resets the counter and runs the epilogue */
        if (psized)
            mc_sb_printf(sb, "  if (%s > 1) {\n", Ss);
        mc_sb_printf(sb, "  unsigned *cnt_ = reinterpret_cast<unsigned *>(mc_ws + %s);\n", MPs);
        mc_sb_printf(sb, "#pragma unroll\n  for (int nt = 0; nt < %d; ++nt)\n#pragma unroll\n    for (int e = 0; e < 2; ++e)\n"
                         "#pragma unroll\n      for (int mt = 0; mt < %d; ++mt)\n#pragma unroll\n        for (int h = 0; h < 2; ++h) {\n",
                     NT, MT);
        mc_sb_printf(sb, "          const %s pp_ = n0 + wn0 + nt * 8 + t4 * 2 + e, mm_ = m0 + wm0 + mt * 16 + g + h * 8;\n", I);
        mc_sb_printf(sb, "          if (pp_ < (%s)%s && mm_ < (%s)%lld) atomicAdd(mc_ws + mm_ * (%s)%s + pp_, acc_[mt][nt][h * 2 + e]);\n",
                     I, Ps, I, (long long)M, I, Ps);
        mc_sb_puts(sb, "        }\n  __threadfence();\n  __syncthreads();\n  __shared__ int last_;\n");
        mc_sb_printf(sb, "  if (tid == 0) last_ = atomicAdd(cnt_ + bt_, 1u) == %s;\n  __syncthreads();\n  if (!last_) return;\n"
                         "  __threadfence();\n", S1s);
        mc_sb_printf(sb, "#pragma unroll\n  for (int nt = 0; nt < %d; ++nt)\n#pragma unroll\n    for (int e = 0; e < 2; ++e)\n"
                         "#pragma unroll\n      for (int mt = 0; mt < %d; ++mt)\n#pragma unroll\n        for (int h = 0; h < 2; ++h) {\n",
                     NT, MT);
        mc_sb_printf(sb, "          const %s pp_ = n0 + wn0 + nt * 8 + t4 * 2 + e, mm_ = m0 + wm0 + mt * 16 + g + h * 8;\n", I);
        mc_sb_printf(sb, "          if (pp_ < (%s)%s && mm_ < (%s)%lld) {\n", I, Ps, I, (long long)M);
        mc_sb_printf(sb, "            float *w_ = mc_ws + mm_ * (%s)%s + pp_;\n", I, Ps);
        mc_sb_puts(sb, "            acc_[mt][nt][h * 2 + e] = __ldcg(w_);\n            __stcg(w_, 0.0f);\n          }\n        }\n");
        mc_sb_puts(sb, "  if (tid == 0) cnt_[bt_] = 0u;\n");
        if (psized)
            mc_sb_puts(sb, "  }\n");
    }
    /* the epilogue over each pair of accumulators (two neighbouring pixels, the same image where
     * OH OW is even): (i0, i1, i2) = (image, output channel, pixel); the views contiguous along
     * the pixels are read and written two elements at a time where their offsets and alignment
     * allow (MINIC_CUDA_CONV_PAIR=0: one at a time) */
    bool *eused = calloc((size_t)k->nviews + 1, 1);
    if (!eused)
        return false;
    mark_used(k, 0, eused);
    const char *ep = getenv("MINIC_CUDA_CONV_PAIR");
    int ev = choose_vec(c->kp, k, c->align, eused, false, MC_F32);
    bool pair = !(ep && strcmp(ep, "0") == 0) && O % 2 == 0 && ev >= 2;
    free(eused);
    /* the deeper loop: the tile staged through shared memory where the pixels come in runs of 4
     * or 8 (ResNet-18 1356.7 us against 1389.2 without, 16:05 call; MINIC_CUDA_CONV_SEPI=0: not) */
    const char *es = getenv("MINIC_CUDA_CONV_SEPI");
    if (D > 1 && !(es && strcmp(es, "0") == 0) && ev >= 4 && O % ev == 0 && BN % ev == 0) {
        int need = BM * (BN + 8) * 4;
        if (out->smem < need)
            out->smem = need;
        out->vec = ev;
        return emit_conv_staged_epilogue(c, BM, BN, T, MT, NT, ev, M, Ps, O);
    }
    if (pair) {
        c->V = 2;
        c->acc_pair = true;
        out->vec = 2;
        mc_sb_printf(sb, "#pragma unroll\n  for (int nt = 0; nt < %d; ++nt) {\n", NT);
        mc_sb_printf(sb, "    const %s pp_ = n0 + wn0 + nt * 8 + t4 * 2;\n", I);
        mc_sb_printf(sb, "    if (pp_ >= (%s)%s) continue;\n", I, Ps);
        mc_sb_printf(sb, "    const %s i0 = pp_ / %lld, i2 = pp_ - i0 * %lld;\n", I, (long long)O, (long long)O);
        mc_sb_printf(sb, "#pragma unroll\n    for (int mt = 0; mt < %d; ++mt)\n#pragma unroll\n      for (int h = 0; h < 2; ++h) {\n",
                     MT);
        mc_sb_printf(sb, "        const %s i1 = m0 + wm0 + mt * 16 + g + h * 8;\n", I);
        mc_sb_printf(sb, "        if (i1 < (%s)%lld) {\n", I, (long long)M);
        mc_sb_puts(sb, "          const float accp_[2] = {acc_[mt][nt][h * 2], acc_[mt][nt][h * 2 + 1]};\n");
        emit_view_offsets(c, 0, 0, 5, false);
        if (!emit_chunk(c, 0, 0, 5))
            return false;
        mc_sb_puts(sb, "        }\n      }\n  }\n  (void)xb_;\n}\n");
        return true;
    }
    mc_sb_printf(sb, "#pragma unroll\n  for (int nt = 0; nt < %d; ++nt)\n#pragma unroll\n    for (int e = 0; e < 2; ++e) {\n",
                 NT);
    mc_sb_printf(sb, "      const %s pp_ = n0 + wn0 + nt * 8 + t4 * 2 + e;\n", I);
    mc_sb_printf(sb, "      if (pp_ >= (%s)%s) continue;\n", I, Ps);
    mc_sb_printf(sb, "      const %s i0 = pp_ / %lld, i2 = pp_ - i0 * %lld;\n", I, (long long)O, (long long)O);
    mc_sb_printf(sb, "#pragma unroll\n      for (int mt = 0; mt < %d; ++mt)\n#pragma unroll\n        for (int h = 0; h < 2; ++h) {\n",
                 MT);
    mc_sb_printf(sb, "          const %s i1 = m0 + wm0 + mt * 16 + g + h * 8;\n", I);
    mc_sb_printf(sb, "          if (i1 < (%s)%lld) {\n", I, (long long)M);
    mc_sb_puts(sb, "            const float acc = acc_[mt][nt][h * 2 + e];\n");
    emit_view_offsets(c, 0, 0, 6, false);
    if (!emit_chunk(c, 0, 0, 6))
        return false;
    mc_sb_puts(sb, "          }\n        }\n    }\n");
    mc_sb_puts(sb, "  (void)xb_;\n}\n");
    return true;
}

/* ---- GEMV: a GEMM of few rows (the plan's gemv, cuda_gemm.c) ---------------------------------
 * Bound by reading B once: every B element is loaded by one thread, in 16-byte vectors where
 * B's offset, strides, extent and alignment allow (else element by element, still once), and
 * multiplied into the f32 sums of up to GEMV_MR rows (grid y walks groups of rows; a second
 * group reads B again, mostly from L2). The rows are the kernel's M times the batch dimensions
 * over which B does not move (folded, the plan's gemv_fold); a B that moves gets a batch loop
 * over grid z. Every sum is reduced in a fixed order (shuffles, then shared memory warp by
 * warp): results do not change from run to run. The epilogue is the kernel's own block,
 * rendered by emit_chunk at each output (m, n), as the other generated GEMMs do.
 *
 *   gemv-n  B [K, N] contiguous along N (a linear layer's weight). A CTA owns CPT chunks of VW
 *           columns; its lanes take the chunks side by side and K rows 32 / CPT apart, its
 *           warps further K rows: each thread walks K with stride T / CPT, one vector of B per
 *           step, A's element broadcast. Lanes of one chunk reduce by shuffles, warps through
 *           shared memory. CPT shrinks (down to one 16-byte chunk a row, the other half of a
 *           32-byte sector read by the next CTA while in L2) until there are a CTA per SM;
 *           the CTA grows to 1024 threads while each thread has more than GEMV_ITERS steps.
 *   gemv-t  B given as [N, K] contiguous along K (the tied LM head's embedding read
 *           transposed). A warp owns NC output columns, its lanes walk K in vectors (A's rows
 *           loaded the same way, from L1), one f32 sum per (row, column); a reduce-scatter
 *           butterfly leaves each sum in its own lane group, which runs the epilogue. */
#define GEMV_MR 8       /* rows per CTA: a thread's sums are GEMV_MR x VW (gemv-n) */
#define GEMV_SMEM 32768 /* bytes of shared memory for gemv-n's partial sums */
#define GEMV_ITERS 8    /* gemv-n: K steps per thread beyond which the CTA grows */
#define GEMV_UNROLL 8   /* K steps unrolled: their loads in flight together */

/* The widest vector (elements, 16 bytes at most) for reading view v along a dimension of
 * stride 1 and extent n: v's offset, its buffer's alignment, n, its batch strides and its
 * stride along dimension `other` (when `other_used`) must be multiples of it. */
static int gemv_vec(const rctx *c, int v, int64_t n, int other, bool other_used)
{
    const kir_kernel *k = c->k;
    const kir_view *w = &k->views[v];
    int nb = k->rank - 2;
    size_t s = mc_dtype_size(view_buffer(c, v)->dtype);
    for (int V = (int)(16 / s); V > 1; V /= 2) {
        bool ok = n % V == 0 && w->offset % V == 0 && (size_t)c->align[w->buffer] >= s * (size_t)V &&
                  (!other_used || w->stride[other] % V == 0);
        for (int d = 0; d < nb && ok; d++)
            if (k->shape[d] != 1 && w->stride[d] % V != 0)
                ok = false;
        if (ok)
            return V;
    }
    return 1;
}

/* Opens the scope of one GEMV (a brace the caller closes): bb_ (B's base) and, with a batch
 * loop, ab_ and the batch coordinates; then the row bases ar<m> of A for rows m0 + m,
 * m < MR, clamped to the last row (their sums are not stored). */
static void gemv_open(rctx *c, const mc_cuda_gemm_plan *pl, int MR)
{
    const kir_kernel *k = c->k;
    int nb = k->rank - 2;
    const char *I = c->I;
    if (pl->gemv_fold)
        mc_sb_printf(c->sb, "  {\n    const %s bb_ = (%s)%lld;\n", I, I,
                     (long long)k->views[k->gemm.b].offset);
    else
        emit_batch_loop(c);
    int d0 = pl->gemv_fold ? 0 : nb;
    for (int m = 0; m < MR; m++) {
        mc_sb_printf(c->sb, "    %s ar%d;\n    {\n      const %s r_ = min(m0 + %d, (%s)%lld);\n",
                     I, m, I, m, I, (long long)pl->gemv_rows - 1);
        emit_coords(c, "r_", d0, nb + 1, "      ");
        mc_sb_printf(c->sb, "      ar%d = ", m);
        view_offset(c, k->gemm.a, d0, nb + 1, pl->gemv_fold ? NULL : "ab_");
        mc_sb_puts(c->sb, ";\n    }\n");
    }
}

/* The epilogue at row r_ and column n_ (in scope) with the sum `sum`, where `cond` holds. */
static bool gemv_epilogue(rctx *c, const mc_cuda_gemm_plan *pl, const char *cond, const char *sum,
                          int depth)
{
    const kir_kernel *k = c->k;
    int nb = k->rank - 2;
    const char *in = indent_of(depth), *in1 = indent_of(depth + 1);
    mc_sb_printf(c->sb, "%sif (%s && r_ < (%s)%lld && n_ < (%s)%lld) {\n", in, cond, c->I,
                 (long long)pl->gemv_rows, c->I, (long long)k->gemm.n);
    emit_coords(c, "r_", pl->gemv_fold ? 0 : nb, nb + 1, in1);
    mc_sb_printf(c->sb, "%sconst %s i%d = n_;\n%sconst float acc = %s;\n", in1, c->I, nb + 1, in1,
                 sum);
    emit_view_offsets(c, 0, 0, depth + 1, false);
    if (!emit_chunk(c, 0, 0, depth + 1))
        return false;
    mc_sb_printf(c->sb, "%s}\n", in);
    return true;
}

static bool render_gemv_n(rctx *c, const mc_cuda_gemm_plan *pl, mc_cuda_code *out)
{
    const kir_kernel *k = c->k;
    mc_strbuf *sb = c->sb;
    const char *I = c->I;
    int nb = k->rank - 2;
    const kir_gemm *g = &k->gemm;
    const kir_view *A = &k->views[g->a], *B = &k->views[g->b];
    int64_t R = pl->gemv_rows, N = g->n, K = g->k;
    int64_t batch = pl->gemv_fold ? 1 : shape_prod(k, 0, nb);
    int VW = gemv_vec(c, g->b, N, nb, K > 1);
    int64_t nch = N / VW;
    int MR = R < GEMV_MR ? (int)R : GEMV_MR;
    int64_t groups = (R + MR - 1) / MR, zb = batch < 65535 ? batch : 65535;
    int sms = c->t->num_sms > 0 ? c->t->num_sms : 1;
    int T = 256, CPT = 32;
    while (CPT > 1 && CPT / 2 >= nch)
        CPT /= 2;
    while (CPT > 1 && ((int64_t)(T / 32) * MR * CPT * VW * 4 > GEMV_SMEM ||
                       (nch + CPT - 1) / CPT * groups * zb < sms))
        CPT /= 2;
    int maxT = MR * VW <= 16 ? 1024 : MR * VW <= 32 ? 512 : 256; /* registers for the sums */
    while (T < maxT && K > (int64_t)GEMV_ITERS * (T / CPT) &&
           (int64_t)(2 * T / 32) * MR * CPT * VW * 4 <= GEMV_SMEM)
        T *= 2;
    int W = T / 32, KW = 32 / CPT, KS = T / CPT, TW = CPT * VW;
    int64_t tiles = (nch + CPT - 1) / CPT;
    out->grid[0] = tiles;
    out->grid[1] = groups;
    out->grid[2] = zb;
    out->block = T;
    out->scheme = "gemv-n";
    emit_signature(c, out, T);
    const char *bt = storage_type(view_buffer(c, g->b)->dtype);
    mc_sb_printf(sb, "  /* %d rows per CTA, %d columns (%d chunks of %d), K in steps of %d */\n",
                 MR, TW, CPT, VW, KS);
    mc_sb_printf(sb, "  __shared__ float red_[%d];\n", W * MR * TW);
    mc_sb_printf(sb, "  const int lane = threadIdx.x & 31, w_ = threadIdx.x >> 5;\n"
                     "  const %s ch_ = min((%s)blockIdx.x * %d + (%s)(lane %% %d), (%s)%lld);\n"
                     "  const %s ks_ = (%s)(w_ * %d + lane / %d);\n"
                     "  const %s m0 = (%s)blockIdx.y * %d;\n",
                 I, I, CPT, I, CPT, I, (long long)nch - 1, I, I, KW, CPT, I, I, MR);
    gemv_open(c, pl, MR);
    mc_sb_printf(sb, "    const %s bc_ = bb_ + ch_ * %d;\n    float", I, VW);
    for (int m = 0; m < MR; m++)
        for (int j = 0; j < VW; j++)
            mc_sb_printf(sb, "%s s%d_%d = 0.0f", m || j ? "," : "", m, j);
    mc_sb_puts(sb, ";\n");
    /* a trip count known to the compiler: the unrolled steps' loads are issued together */
    int64_t iters = (K + KS - 1) / KS;
    mc_sb_printf(sb, "#pragma unroll %d\n    for (int it_ = 0; it_ < %lld; it_++) {\n"
                     "      const %s kk = ks_ + (%s)it_ * %d;\n",
                 iters < GEMV_UNROLL ? (int)iters : GEMV_UNROLL, (long long)iters, I, I, KS);
    /* past K (a ragged last step): the loads and sums predicated off, not a break, which
     * would keep the compiler from issuing the later steps' loads early */
    bool guard = K % KS != 0;
    if (guard)
        mc_sb_printf(sb, "      if (kk < (%s)%lld) {\n", I, (long long)K);
    mc_sb_printf(sb, "      const mc_vec<%s, %d> b_ = *(const mc_vec<%s, %d> *)(p%d + bc_ + kk * (%s)%lld);\n",
                 bt, VW, bt, VW, c->view_param[g->b], I, (long long)B->stride[nb]);
    for (int j = 0; j < VW; j++)
        mc_sb_printf(sb, "      const float b%d = mc_ld(b_.x[%d]);\n", j, j);
    for (int m = 0; m < MR; m++) {
        mc_sb_printf(sb, "      const float a%d = mc_ld(p%d[ar%d + kk * (%s)%lld]);\n", m,
                     c->view_param[g->a], m, I, (long long)A->stride[nb + 1]);
        for (int j = 0; j < VW; j++)
            mc_sb_printf(sb, "      s%d_%d = fmaf(a%d, b%d, s%d_%d);\n", m, j, m, j, m, j);
    }
    mc_sb_puts(sb, guard ? "      }\n    }\n" : "    }\n");
    /* lanes of one chunk (lane % CPT equal) hold the same outputs */
    for (int o = CPT; o < 32; o *= 2)
        for (int m = 0; m < MR; m++)
            for (int j = 0; j < VW; j++)
                mc_sb_printf(sb, "    s%d_%d += __shfl_xor_sync(0xffffffffu, s%d_%d, %d);\n", m, j,
                             m, j, o);
    mc_sb_printf(sb, "    if (lane < %d) {\n", CPT);
    for (int m = 0; m < MR; m++)
        for (int j = 0; j < VW; j++)
            mc_sb_printf(sb, "      red_[(w_ * %d + %d) * %d + lane * %d + %d] = s%d_%d;\n", MR, m,
                         TW, VW, j, m, j);
    mc_sb_puts(sb, "    }\n    __syncthreads();\n");
    mc_sb_printf(sb, "    for (int e_ = threadIdx.x; e_ < %d; e_ += %d) {\n"
                     "      const int m_ = e_ / %d, q_ = e_ %% %d;\n"
                     "      float sum_ = 0.0f;\n"
                     "      for (int w2 = 0; w2 < %d; w2++)\n"
                     "        sum_ += red_[(w2 * %d + m_) * %d + q_];\n"
                     "      const %s r_ = m0 + m_, n_ = (%s)blockIdx.x * %d + q_;\n",
                 MR * TW, T, TW, TW, W, MR, TW, I, I, TW);
    if (!gemv_epilogue(c, pl, "true", "sum_", 3))
        return false;
    mc_sb_puts(sb, "    }\n    __syncthreads();\n  }\n}\n");
    return true;
}

static bool render_gemv_t(rctx *c, const mc_cuda_gemm_plan *pl, mc_cuda_code *out)
{
    const kir_kernel *k = c->k;
    mc_strbuf *sb = c->sb;
    const char *I = c->I;
    int nb = k->rank - 2;
    const kir_gemm *g = &k->gemm;
    const kir_view *A = &k->views[g->a], *B = &k->views[g->b];
    int64_t R = pl->gemv_rows, N = g->n, K = g->k;
    int64_t batch = pl->gemv_fold ? 1 : shape_prod(k, 0, nb);
    int VW = gemv_vec(c, g->b, K, nb + 1, N > 1);
    /* A's rows in vectors too when contiguous along K and as aligned as B */
    bool avec = VW > 1 && A->stride[nb + 1] == 1 &&
                gemv_vec(c, g->a, K, nb, k->shape[nb] > 1) >= VW;
    int MR = R < GEMV_MR ? (int)R : GEMV_MR, MRP = 1;
    while (MRP < MR)
        MRP *= 2;
    int64_t groups = (R + MR - 1) / MR, zb = batch < 65535 ? batch : 65535;
    int sms = c->t->num_sms > 0 ? c->t->num_sms : 1;
    /* fewer columns a warp, more warps, down to NC = MRP / 2: every warp reads A's rows again
     * (from L1) at every step, MRP vectors beside B's NC; this keeps them at most twice B's */
    int NC = 32 / MRP < 8 ? 32 / MRP : 8, nc_min = MRP / 2 > 1 ? MRP / 2 : 1;
    while (NC > nc_min && (N + NC - 1) / NC * groups * zb < 8 * (int64_t)sms)
        NC /= 2;
    int64_t tiles = (N + NC - 1) / NC;
    int W = 8;
    while (W > 1 && (tiles + W - 1) / W * groups * zb < sms)
        W /= 2;
    int S = MRP * NC; /* sums per lane, a power of two <= 32 */
    out->grid[0] = (tiles + W - 1) / W;
    out->grid[1] = groups;
    out->grid[2] = zb;
    out->block = 32 * W;
    out->scheme = "gemv-t";
    emit_signature(c, out, 32 * W);
    const char *bt = storage_type(view_buffer(c, g->b)->dtype);
    const char *at = storage_type(view_buffer(c, g->a)->dtype);
    mc_sb_printf(sb, "  /* a warp per %d columns x %d rows, K in vectors of %d */\n", NC, MR, VW);
    mc_sb_printf(sb, "  const int lane = threadIdx.x & 31;\n"
                     "  const %s tile = (%s)blockIdx.x * %d + (threadIdx.x >> 5);\n"
                     "  if (tile >= (%s)%lld)\n    return;\n"
                     "  const %s n0 = tile * %d, m0 = (%s)blockIdx.y * %d;\n",
                 I, I, W, I, (long long)tiles, I, NC, I, MR);
    gemv_open(c, pl, MR);
    for (int q = 0; q < NC; q++)
        mc_sb_printf(sb, "    const %s bc%d = bb_ + min(n0 + %d, (%s)%lld) * (%s)%lld;\n", I, q, q, I,
                     (long long)N - 1, I, (long long)B->stride[nb + 1]);
    mc_sb_puts(sb, "    float");
    for (int t = 0; t < S; t++)
        mc_sb_printf(sb, "%s s%d = 0.0f", t ? "," : "", t);
    mc_sb_puts(sb, ";\n");
    /* steps unrolled: as many as keep about 96 registers of loaded vectors in flight */
    int64_t kcs = K / VW, iters = (kcs + 31) / 32;
    int words = (NC + MR) * ((VW * (int)mc_dtype_size(view_buffer(c, g->b)->dtype) + 3) / 4);
    int U = 96 / words < 1 ? 1 : 96 / words;
    if (U > iters)
        U = (int)iters;
    mc_sb_printf(sb, "#pragma unroll %d\n    for (int it_ = 0; it_ < %lld; it_++) {\n"
                     "      const %s kc = (%s)lane + (%s)it_ * 32;\n",
                 U, (long long)iters, I, I, I);
    bool guard = kcs % 32 != 0; /* as in render_gemv_n */
    if (guard)
        mc_sb_printf(sb, "      if (kc < (%s)%lld) {\n", I, (long long)kcs);
    mc_sb_printf(sb, "      const %s kk = kc * %d;\n", I, VW);
    for (int q = 0; q < NC; q++)
        mc_sb_printf(sb, "      const mc_vec<%s, %d> b%d_ = *(const mc_vec<%s, %d> *)(p%d + bc%d + kk);\n",
                     bt, VW, q, bt, VW, c->view_param[g->b], q);
    for (int m = 0; m < MR; m++) {
        if (avec)
            mc_sb_printf(sb, "      const mc_vec<%s, %d> a%d_ = *(const mc_vec<%s, %d> *)(p%d + ar%d + kk);\n",
                         at, VW, m, at, VW, c->view_param[g->a], m);
        for (int j = 0; j < VW; j++) {
            if (avec)
                mc_sb_printf(sb, "      const float a%d_%d = mc_ld(a%d_.x[%d]);\n", m, j, m, j);
            else
                mc_sb_printf(sb, "      const float a%d_%d = mc_ld(p%d[ar%d + (kk + %d) * (%s)%lld]);\n",
                             m, j, c->view_param[g->a], m, j, I, (long long)A->stride[nb + 1]);
        }
    }
    for (int q = 0; q < NC; q++)
        for (int j = 0; j < VW; j++) {
            mc_sb_printf(sb, "      {\n        const float b = mc_ld(b%d_.x[%d]);\n", q, j);
            for (int m = 0; m < MR; m++)
                mc_sb_printf(sb, "        s%d = fmaf(a%d_%d, b, s%d);\n", m * NC + q, m, j,
                             m * NC + q);
            mc_sb_puts(sb, "      }\n");
        }
    mc_sb_puts(sb, guard ? "      }\n    }\n" : "    }\n");
    /* reduce-scatter: at offset o the lanes with bit o set keep the upper half of the sums;
     * then lane groups of 32 / S complete theirs */
    int h = S / 2;
    for (int o = 16; o >= 1 && h >= 1; o /= 2, h /= 2) {
        mc_sb_printf(sb, "    {\n      const bool up = lane & %d;\n", o);
        for (int t = 0; t < h; t++)
            mc_sb_printf(sb, "      s%d = (up ? s%d : s%d) + __shfl_xor_sync(0xffffffffu, "
                             "up ? s%d : s%d, %d);\n", t, t + h, t, t, t + h, o);
        mc_sb_puts(sb, "    }\n");
    }
    int held_shift = 0;
    for (int n = 32; n > S; n /= 2)
        held_shift++;
    for (int o = 1; o < (1 << held_shift); o *= 2)
        mc_sb_printf(sb, "    s0 += __shfl_xor_sync(0xffffffffu, s0, %d);\n", o);
    mc_sb_printf(sb, "    const int t_out = lane >> %d;\n"
                     "    const %s r_ = m0 + t_out / %d, n_ = n0 + t_out %% %d;\n",
                 held_shift, I, NC, NC);
    char cond[96];
    snprintf(cond, sizeof cond, "(lane & %d) == 0 && t_out / %d < %d", (1 << held_shift) - 1, NC, MR);
    if (!gemv_epilogue(c, pl, cond, "s0", 2))
        return false;
    mc_sb_puts(sb, "  }\n}\n");
    return true;
}

static void sanitize_name(const char *in, char *out, size_t size)
{
    size_t n = 0;
    for (; in[n] && n + 1 < size; n++) {
        char ch = in[n];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '_';
        out[n] = ok ? ch : '_';
    }
    out[n] = '\0';
    if (n == 0 || (out[0] >= '0' && out[0] <= '9'))
        snprintf(out, size, "k_%s", in[0] ? "kernel" : "anon");
}

void mc_cuda_code_free(mc_cuda_code *c)
{
    mc_sb_free(&c->src);
    free(c->param);
    memset(c, 0, sizeof *c);
}

/* A pointwise kernel with a gather whose index moves along the innermost axis (a padded
 * pool's window, the stem's maxpool) takes one element a thread: its V consecutive outputs
 * gather from V scattered places, so with V = 8 a warp's load touches 8 times the cache lines
 * that neighbouring threads on neighbouring outputs do (the maxpool after ResNet's stem: 74 us
 * against a ~14 us floor; ResNet-18 1092.0 us against 1102.5, H200 18:52 call).
 * MINIC_CUDA_GATHER_VEC=0: the vector width choose_vec picks, as before; =2 or =4: at most that
 * many (a stride-2 pool's two neighbouring windows share a column: 15 loads for 2 outputs
 * instead of 18, the index arithmetic once for both). 2 is the default since the H200 call of
 * 21:13: the maxpool alone 26.9 us at 2, 32.5 at 1 and 34.4 at 4 (it was 66.8 us before the
 * gathers lost their checks); =1 gives one a thread. Returns the cap, 0: none. */
static int scattered_gathers_cap(void)
{
    const char *e = getenv("MINIC_CUDA_GATHER_VEC");
    if (e && strcmp(e, "0") == 0)
        return 0;
    if (e && (strcmp(e, "1") == 0 || strcmp(e, "4") == 0))
        return e[0] - '0';
    return 2;
}

/* The gathers of a pointwise kernel whose chunk reads V consecutive elements at one index (an
 * embedding's row): one vector load each. choose_vec already made the view's offset and
 * strides multiples of V; the gathered axis's stride must be one too. */
static void plan_gather_vectors(rctx *c)
{
    const kir_kernel *k = c->k;
    for (int i = 0; i < k->ncode; i++) {
        const kir_instr *in = &k->code[i];
        c->gather_vec[i] = in->kind == KI_GATHER && view_vectorized(c, in->view) &&
                           mc_dims_multiple_of(c->kp->dims, in->stride, c->V) &&
                           chunk_uniform(k, in->arg[0], 0);
    }
}

bool mc_cuda_kernel_sized(const kir_kernel *k)
{
    bool sym = any_sym(k->shape, k->rank);
    for (int v = 0; v < k->nviews && !sym; v++)
        sym = mc_dim_is_sym(k->views[v].offset) || any_sym(k->views[v].stride, k->rank);
    for (int i = 0; i < k->ncode && !sym; i++)
        sym = k->code[i].kind == KI_SIZE ||
              (k->code[i].kind == KI_GATHER && (mc_dim_is_sym(k->code[i].size) || mc_dim_is_sym(k->code[i].stride)));
    if (k->category == KIR_GEMM)
        sym |= mc_dim_is_sym(k->gemm.m) || mc_dim_is_sym(k->gemm.n) || mc_dim_is_sym(k->gemm.k);
    if (k->category == KIR_ATTENTION)
        sym |= mc_dim_is_sym(k->attn.tq) || mc_dim_is_sym(k->attn.tk) || mc_dim_is_sym(k->attn.d) ||
               mc_dim_is_sym(k->attn.dv);
    return sym;
}

static mc_status render(const kir_program *kp, int ki, const mc_cuda_target *t, const int *align,
                        const mc_cuda_gemm_plan *gemm, const int64_t *values, mc_cuda_code *out);

mc_status mc_cuda_render(const kir_program *kp, int ki, const mc_cuda_target *t, const int *align,
                         const mc_cuda_gemm_plan *gemm, mc_cuda_code *out)
{
    return render(kp, ki, t, align, gemm, NULL, out);
}

mc_status mc_cuda_render_sized(const kir_program *sized, const int64_t *values, int ki, const mc_cuda_target *t,
                               const int *align, const mc_cuda_gemm_plan *gemm, mc_cuda_code *out, char *why,
                               size_t why_size)
{
    const kir_kernel *k = &sized->kernels[ki];
    why[0] = '\0';
    memset(out, 0, sizeof *out);
    if (!mc_cuda_kernel_sized(k)) /* its source cannot depend on the binding: rendered as always */
        return render(sized, ki, t, align, gemm, NULL, out);
    const char *ea = getenv("MINIC_CUDA_SIZED_ATTENTION");
    if (k->category == KIR_ATTENTION && ea && strcmp(ea, "0") == 0)
        snprintf(why, why_size, "attention over symbolic lengths with MINIC_CUDA_SIZED_ATTENTION=0");
    else if (k->category == KIR_ATTENTION && (mc_dim_is_sym(k->attn.d) || mc_dim_is_sym(k->attn.dv)))
        snprintf(why, why_size, "attention over a symbolic head size");
    else if (k->category == KIR_GEMM && gemm && gemm->conv && !mc_cuda_sized_conv())
        snprintf(why, why_size, "a conv over a symbolic batch with MINIC_CUDA_SIZED_CONV=0");
    else if (k->category == KIR_GEMM && gemm && !gemm->use_lt && (gemm->gemv || gemm->small))
        snprintf(why, why_size, "a GEMM run by a generated kernel made for one size (%s)",
                 gemm->gemv ? "GEMV" : "warp-dot");
    if (why[0])
        return MC_OK;
    mc_status st = render(sized, ki, t, align, gemm, values, out);
    if (st == MC_OK && out->nsizes < 0) { /* render's mark for a size it could not hold */
        mc_cuda_code_free(out);
        snprintf(why, why_size, "more than %d run-time sizes, or one past 2^63", MC_CUDA_MAX_SIZES);
    } else if (st != MC_OK) { /* IR it cannot render with run-time sizes: the bound kernel, noted */
        snprintf(why, why_size, "%s", mc_error_message());
        st = MC_OK;
    }
    return st;
}

static mc_status render(const kir_program *kp, int ki, const mc_cuda_target *t, const int *align,
                        const mc_cuda_gemm_plan *gemm, const int64_t *values, mc_cuda_code *out)
{
    bool acc_scratch = gemm && gemm->use_lt;
    mc_dtype acc_dtype = acc_scratch ? gemm->scratch_dtype : MC_F32;
    memset(out, 0, sizeof *out);
    const kir_kernel *k = &kp->kernels[ki];
    if (k->category == KIR_ATTENTION)
        return mc_cuda_render_attention(kp, ki, t, align, values, out);
    rctx c = {.kp = kp, .k = k, .t = t, .align = align, .sb = &out->src, .j = -1, .u = -1,
              .acc_scratch = acc_scratch, .acc_dtype = acc_dtype, .ip_view = -1, .ip_store = -1, .ip_cond = -1,
              .dims = values ? kp->dims : NULL, .values = values,
              .z = {.dims = values ? kp->dims : NULL, .values = values, .out = out}};
    int nv = k->nviews + 1;
    c.view_param = calloc((size_t)nv, sizeof(int));
    c.canon = calloc((size_t)nv, sizeof(int));
    c.cached = calloc((size_t)nv, 1);
    c.cache_filled = calloc((size_t)nv, 1);
    c.instr_block = calloc((size_t)k->ncode + 1, sizeof(int));
    out->param = calloc((size_t)nv + 2, sizeof(int));
    bool *used = calloc((size_t)nv, 1);
    mc_status st = MC_OK;
    if (!c.view_param || !c.canon || !c.cached || !c.cache_filled || !c.instr_block || !out->param || !used) {
        st = mc_fail(MC_ERR_SYSTEM, "out of memory rendering CUDA kernel %s", k->name);
        goto done;
    }
    for (int b = 0; b < k->nblocks; b++)
        for (int i = k->blocks[b].first; i < k->blocks[b].first + k->blocks[b].count; i++)
            if (i >= 0 && i < k->ncode)
                c.instr_block[i] = b;
    /* canonical views: identical addressing is one view (loaded once, cached once) */
    for (int v = 0; v < k->nviews; v++) {
        c.canon[v] = v;
        for (int u = 0; u < v; u++) {
            const kir_view *a = &k->views[u], *b = &k->views[v];
            bool same = a->buffer == b->buffer && a->offset == b->offset;
            for (int d = 0; d < k->rank && same; d++)
                if (a->stride[d] != b->stride[d])
                    same = false;
            if (same) {
                c.canon[v] = u;
                break;
            }
        }
    }
    /* parameters: each buffer once, in order of first use; then the scratch accumulator */
    bool is_gemm_whole = k->category == KIR_GEMM && !acc_scratch;
    mark_used(k, -1, used);
    if (is_gemm_whole)
        used[k->gemm.a] = used[k->gemm.b] = true;
    for (int v = 0; v < k->nviews; v++) {
        if (!used[v])
            continue;
        int p = 0;
        while (p < out->nparams && out->param[p] != k->views[v].buffer)
            p++;
        if (p == out->nparams)
            out->param[out->nparams++] = k->views[v].buffer;
        c.view_param[v] = p;
    }
    if (acc_scratch) {
        c.acc_param = out->nparams;
        out->param[out->nparams++] = MC_CUDA_PARAM_SCRATCH;
    }
    bool gathers = false;
    for (int i = 0; i < k->ncode; i++)
        gathers |= k->code[i].kind == KI_GATHER;
    if (gathers)
        out->param[out->nparams++] = MC_CUDA_PARAM_ERROR;
    if (c.dims)
        out->param[out->nparams++] = MC_CUDA_PARAM_SIZES;
    /* 32-bit indices unless an offset can pass 2^31 (at the maxima; unknown ones can) */
    int64_t maxoff = c.dims ? size_max(&c, k->shape, k->rank) : shape_prod(k, 0, k->rank);
    for (int v = 0; v < k->nviews && maxoff >= 0; v++) {
        int64_t n = kp->buffers[k->views[v].buffer].numel;
        if (c.dims && (n = size_max(&c, &n, 1)) < 0)
            maxoff = -1;
        else if (n > maxoff)
            maxoff = n;
    }
    c.I = maxoff < 0 || maxoff + ((int64_t)1 << 24) >= ((int64_t)1 << 31) ? "long long" : "int";
    if (k->category == KIR_GEMM && !acc_scratch) {
        c.V = 1;
    } else {
        bool *vused = calloc((size_t)nv, 1);
        if (!vused) {
            st = mc_fail(MC_ERR_SYSTEM, "out of memory rendering CUDA kernel %s", k->name);
            goto done;
        }
        /* for reductions only the loop blocks' accesses move along the innermost dim */
        if (k->category == KIR_REDUCTION) {
            for (int b = 0; b < k->nblocks; b++)
                if (k->blocks[b].loop)
                    mark_used(k, b, vused);
        } else {
            mark_used(k, -1, vused);
        }
        c.V = k->category == KIR_REDUCTION && k->nrow == k->rank
                  ? 1
                  : choose_vec(kp, k, align, vused, acc_scratch, acc_dtype);
        free(vused);
    }
    int cap = scattered_gathers_cap();
    if (gathers && cap > 0 && c.V > cap && k->category == KIR_POINTWISE)
        for (int i = 0; i < k->ncode; i++)
            if (k->code[i].kind == KI_GATHER && !chunk_uniform(k, k->code[i].arg[0], 0))
                c.V = cap;
    out->vec = c.V;
    c.facts_per_element = k->category == KIR_POINTWISE && c.V > 1;
    int nfacts = c.facts_per_element ? c.V + 1 : 1;
    c.facts = calloc((size_t)nfacts * (size_t)(k->ncode + 1), sizeof *c.facts);
    bool facts_ok = c.facts != NULL;
    for (int j = 0; j < nfacts && facts_ok; j++)
        facts_ok = kir_facts(k, kp->dims, j == 0 ? 1 : c.V, j == 0 ? 0 : j - 1, c.facts + (size_t)j * (size_t)k->ncode);
    if (!facts_ok) {
        st = mc_fail(MC_ERR_SYSTEM, "out of memory rendering CUDA kernel %s", k->name);
        goto done;
    }
    if (gathers && c.V > 1 && k->category == KIR_POINTWISE) {
        c.gather_vec = calloc((size_t)k->ncode, sizeof *c.gather_vec);
        if (!c.gather_vec) {
            st = mc_fail(MC_ERR_SYSTEM, "out of memory rendering CUDA kernel %s", k->name);
            goto done;
        }
        plan_gather_vectors(&c);
    }
    sanitize_name(k->name, out->entry, sizeof out->entry);
    mc_strbuf *sb = &out->src;
    mc_sb_puts(sb, mc_cuda_prelude);
    out->body = sb->len;
    mc_sb_printf(sb, "/* minic kernel %s (%s", out->entry,
                 k->category == KIR_GEMM ? "gemm" : k->category == KIR_REDUCTION ? "reduction" :
                 k->category == KIR_COPY ? "copy" : "pointwise");
    if (acc_scratch)
        mc_sb_puts(sb, " epilogue after cuBLASLt");
    mc_sb_puts(sb, "): shape [");
    for (int d = 0; d < k->rank; d++) /* a symbolic size as `?`: the source holds no binding */
        mc_sb_printf(sb, mc_dim_is_sym(k->shape[d]) ? "%s?" : "%s%lld", d ? ", " : "", (long long)k->shape[d]);
    mc_sb_printf(sb, "], %d row dims, vector width %d */\n", k->nrow, c.V);
    bool ok;
    if (k->category == KIR_GEMM && !acc_scratch)
        ok = gemm && gemm->conv ? render_conv_mma(&c, gemm, out)
             : gemm && gemm->gemv ? (gemm->gemv_t ? render_gemv_t(&c, gemm, out) : render_gemv_n(&c, gemm, out))
             : gemm && gemm->small ? render_gemm_dot(&c, out) : render_gemm_tiled(&c, out);
    else if (k->category == KIR_REDUCTION && kir_kernel_scans(k))
        ok = render_scan(&c, out);
    else if (k->category == KIR_REDUCTION)
        ok = render_reduction(&c, out);
    else
        ok = render_pointwise(&c, out);
    if (sb->oom)
        st = mc_fail(MC_ERR_SYSTEM, "out of memory rendering CUDA kernel %s", k->name);
    else if (!ok)
        st = mc_fail(MC_ERR_SYSTEM, "internal error: kernel %s has IR the CUDA renderer cannot "
                                    "express", k->name);
    else if (c.z.error)
        out->nsizes = -1; /* mc_cuda_render_sized falls back */
done:
    free(c.facts);
    free(c.gather_vec);
    free(c.view_param);
    free(c.canon);
    free(c.cached);
    free(c.cache_filled);
    free(c.instr_block);
    free(used);
    if (st != MC_OK)
        mc_cuda_code_free(out);
    return st;
}
