/* Attention recognition: the chain that fusion turns into one attention kernel.
 *
 * Requires: a decomposed graph (softmax is max, sub, exp, sum and div by now; recognising the
 * decomposed form also finds a softmax written out by hand) and every node's users. Changes
 * nothing: it reports the chains it found, and for chains that look like attention but cannot
 * be fused, why (minic dump --stage fused and --stage fuse print those sentences).
 *
 * The chain, read backwards from the second matmul (docs/FORMAT.md §2, "attention"):
 *
 *     pv = matmul(p, v)                    p maybe through a float cast
 *     p  = div(e, s)   s = sum(e, last axis, keepdim)   e = exp(d)   d = sub(x, m)
 *     m  = max(x, last axis, keepdim)
 *     x  = steps(qk)                       up to KIR_MAX_STEPS of: mul or div by a number,
 *                                          where(mask, x, number) or where(mask, number, x),
 *                                          add(x, mask), float casts
 *     qk = matmul(q, kt)
 *
 * Every intermediate must have its one use in the chain (x: m and d; e: s and p) and not be a
 * graph output, and keep the scores' shape; q, kt, v and mask tensors are read through views
 * (slices, reshapes and transposes of a QKV projection cost nothing). A where's condition that
 * is a comparison of iotas (plus constants) along the query and key axes is a band: lo <= j - i
 * <= hi, with i the query and j the key index (ge(row, col): causal), computed from the indices
 * and never loaded; when its fill is -inf, pairs outside it can be skipped (kir_attention).
 * Head dimensions are limited to MC_ATTENTION_MAX_HEAD, which every backend's kernel supports.
 */
#include "passes/passes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MC_ATTENTION_MAX_HEAD 128 /* D and Dv: the CUDA kernel keeps a row of O in registers */
#define MAX_MEMBERS 32
#define MAX_AFFINE_DEPTH 16
#define EXACT_LIMIT (1 << 22)    /* index arithmetic stays exact in f32 below this */

typedef struct {
    const mc_graph *g;
    const int *user_start, *users;
    const bool *is_output;
    mc_arena *arena;
    mc_attention *found;
    int nfound, capfound;
    const char **notes;
    int nnotes, capnotes;
    bool *claimed;       /* per node: a member of a chain already found */
    bool oom;
} finder;

typedef struct {
    mc_attention a;
    int members[MAX_MEMBERS];
    int nmembers;
    int band[KIR_MAX_STEPS];
    int nband;
    char why[200];
} chain;

static const mc_node *N(const finder *F, int i) { return &F->g->nodes[i]; }

static int nusers(const finder *F, int i) { return F->user_start[i + 1] - F->user_start[i]; }

/* The one user of i, or -1 when it has none, several, or is a graph output. */
static int only_user(const finder *F, int i)
{
    if (F->is_output[i] || nusers(F, i) != 1)
        return -1;
    return F->users[F->user_start[i]];
}

static bool is_scalar_const(const finder *F, int i)
{
    return N(F, i)->op == MC_OP_CONST && N(F, i)->rank == 0 && !N(F, i)->attr.per;
}

static bool same_shape(const mc_node *a, const mc_node *b)
{
    return a->rank == b->rank && memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->rank) == 0;
}

static bool reduces_last_keepdim(const mc_node *r, const mc_node *x)
{
    return r->attr.keepdim && x->rank >= 1 &&
           ((r->attr.has_list && r->attr.nlist == 1 && r->attr.list[0] == x->rank - 1) ||
            (!r->attr.has_list && x->rank == 1));
}

static void add_member(chain *c, int i)
{
    for (int m = 0; m < c->nmembers; m++)
        if (c->members[m] == i)
            return;
    MC_ASSERT(c->nmembers < MAX_MEMBERS);
    c->members[c->nmembers++] = i;
}

static const char *name_of(const finder *F, int i, char *buf, size_t size)
{
    return mc_node_name(F->g, i, buf, size);
}

/* "t47 (sub, line 33)" */
static void describe_node(const finder *F, int i, char *buf, size_t size)
{
    char name[64];
    const mc_node *n = N(F, i);
    const char *op = mc_op_table[n->origin < MC_NUM_OPS ? n->origin : n->op].name;
    if (n->line > 0)
        snprintf(buf, size, "%s (%s, line %d)", name_of(F, i, name, sizeof name), op, n->line);
    else
        snprintf(buf, size, "%s (%s)", name_of(F, i, name, sizeof name), op);
}

static bool reject(chain *c, const finder *F, int node, const char *what)
{
    char d[128];
    describe_node(F, node, d, sizeof d);
    snprintf(c->why, sizeof c->why, "%s %s", d, what);
    return false;
}

/* ---- bands: conditions made of iotas ------------------------------------------------------- */

/* value = c0 + sum_p coef[p] * (coordinate p of the scores' space) */
typedef struct {
    int64_t coef[MC_MAX_RANK];
    int64_t c0;
} affine;

static bool small_integer(double v) { return v == floor(v) && fabs(v) < EXACT_LIMIT; }

/* Node i, read at map m of the scores' space, as an affine function of the coordinates. */
static bool affine_of(const finder *F, int i, const mc_cmap *m, affine *out, int depth)
{
    const mc_node *n = N(F, i);
    memset(out, 0, sizeof *out);
    if (depth > MAX_AFFINE_DEPTH || n->dtype == MC_BOOL)
        return false;
    switch (n->op) {
    case MC_OP_IOTA: {
        int axis = (int)n->attr.axis;
        out->c0 = m->off[axis];
        memcpy(out->coef, m->coef[axis], sizeof out->coef);
        return true;
    }
    case MC_OP_CONST: case MC_OP_FULL:
        if (!small_integer(n->attr.value) || n->attr.per)
            return false;
        out->c0 = (int64_t)n->attr.value;
        return true;
    case MC_OP_ADD: case MC_OP_SUB: {
        affine a, b;
        mc_cmap ma, mb;
        if (!mc_cmap_operand(F->g, i, 0, m, &ma) || !mc_cmap_operand(F->g, i, 1, m, &mb) ||
            !affine_of(F, n->in[0], &ma, &a, depth + 1) || !affine_of(F, n->in[1], &mb, &b, depth + 1))
            return false;
        int64_t sign = n->op == MC_OP_ADD ? 1 : -1;
        out->c0 = a.c0 + sign * b.c0;
        for (int p = 0; p < MC_MAX_RANK; p++)
            out->coef[p] = a.coef[p] + sign * b.coef[p];
        return true;
    }
    case MC_OP_NEG: {
        mc_cmap ma;
        if (!mc_cmap_operand(F->g, i, 0, m, &ma) || !affine_of(F, n->in[0], &ma, out, depth + 1))
            return false;
        out->c0 = -out->c0;
        for (int p = 0; p < MC_MAX_RANK; p++)
            out->coef[p] = -out->coef[p];
        return true;
    }
    case MC_OP_CAST: case MC_OP_TRANSPOSE: case MC_OP_RESHAPE: case MC_OP_EXPAND: case MC_OP_SLICE: {
        mc_cmap ma;
        if (n->op == MC_OP_CAST && N(F, n->in[0])->dtype == MC_BOOL)
            return false;
        return mc_cmap_operand(F->g, i, 0, m, &ma) && affine_of(F, n->in[0], &ma, out, depth + 1);
    }
    case MC_OP_INPUT: case MC_OP_PARAM: case MC_OP_ABS: case MC_OP_EXP: case MC_OP_LOG:
    case MC_OP_SQRT: case MC_OP_RSQRT: case MC_OP_RECIP: case MC_OP_TANH: case MC_OP_SIGMOID:
    case MC_OP_RELU: case MC_OP_GELU: case MC_OP_GELU_TANH: case MC_OP_SILU: case MC_OP_SIN:
    case MC_OP_COS: case MC_OP_ERF:
    case MC_OP_FLOOR: case MC_OP_CEIL: case MC_OP_ROUND: case MC_OP_SIGN: case MC_OP_SOFTPLUS:
    case MC_OP_LEAKY_RELU: case MC_OP_CLIP: case MC_OP_MUL: case MC_OP_DIV: case MC_OP_POW:
    case MC_OP_MAXIMUM: case MC_OP_MINIMUM: case MC_OP_EQ: case MC_OP_NE: case MC_OP_LT:
    case MC_OP_LE: case MC_OP_GT: case MC_OP_GE: case MC_OP_WHERE: case MC_OP_SUM:
    case MC_OP_AND: case MC_OP_OR: case MC_OP_XOR: case MC_OP_NOT:
    case MC_OP_MEAN: case MC_OP_MAX: case MC_OP_MIN: case MC_OP_SOFTMAX: case MC_OP_LOG_SOFTMAX:
    case MC_OP_ARGMAX: case MC_OP_ARGMIN: case MC_OP_CUMSUM: case MC_OP_GATHER: case MC_OP_UPDATE:
    case MC_OP_CONV: case MC_OP_MAXPOOL: case MC_OP_AVGPOOL: case MC_OP_PAD: case MC_OP_BATCHNORM:
    case MC_OP_LAYERNORM: case MC_OP_RMSNORM: case MC_OP_MATMUL: case MC_OP_LINEAR:
    case MC_OP_CONCAT: case MC_OP_ALLREDUCE: case MC_NUM_OPS:
        break;
    }
    return false;
}

/* A comparison of two affine index expressions that holds exactly where lo <= j - i <= hi
 * (i the coordinate along the scores' axis rank-2, j along rank-1), when `holds`; its
 * complement when not. False when the condition is anything else. */
static bool band_of(const finder *F, int cond, const mc_node *scores, bool holds, int64_t *lo,
                    int64_t *hi)
{
    const mc_node *n = N(F, cond);
    mc_op op = n->op;
    if (op != MC_OP_GE && op != MC_OP_GT && op != MC_OP_LE && op != MC_OP_LT)
        return false;
    mc_cmap ma, mb;
    /* the condition's coordinates at the scores' (it broadcasts into them) */
    memset(&ma, 0, sizeof ma);
    ma.rank = n->rank;
    for (int d = 0; d < n->rank; d++) {
        int s = d + scores->rank - n->rank;
        if (n->shape[d] != 1)
            ma.coef[d][s] = 1;
    }
    affine a, b;
    if (!mc_cmap_operand(F->g, cond, 0, &ma, &mb) || !affine_of(F, n->in[0], &mb, &a, 0))
        return false;
    if (!mc_cmap_operand(F->g, cond, 1, &ma, &mb) || !affine_of(F, n->in[1], &mb, &b, 0))
        return false;
    int ri = scores->rank - 2, rj = scores->rank - 1;
    int64_t coef[MC_MAX_RANK];
    for (int p = 0; p < MC_MAX_RANK; p++) {
        coef[p] = a.coef[p] - b.coef[p];
        if (p != ri && p != rj && coef[p] != 0)
            return false;
        if (llabs(a.coef[p]) > 1 || llabs(b.coef[p]) > 1)
            return false;
    }
    int64_t c = coef[rj], k = a.c0 - b.c0;
    if ((c != 1 && c != -1) || coef[ri] != -c || llabs(k) >= EXACT_LIMIT)
        return false;
    /* c (j - i) + k OP 0  <=>  t REL r with t = j - i */
    int64_t r = c == 1 ? -k : k;
    if (c == -1)
        op = op == MC_OP_GE ? MC_OP_LE : op == MC_OP_GT ? MC_OP_LT : op == MC_OP_LE ? MC_OP_GE : MC_OP_GT;
    if (!holds) /* the score is kept where the condition is false */
        op = op == MC_OP_GE ? MC_OP_LT : op == MC_OP_GT ? MC_OP_LE : op == MC_OP_LE ? MC_OP_GT : MC_OP_GE;
    *lo = op == MC_OP_GE ? r : op == MC_OP_GT ? r + 1 : -KIR_BAND_OPEN;
    *hi = op == MC_OP_LE ? r : op == MC_OP_LT ? r - 1 : KIR_BAND_OPEN;
    return true;
}

/* ---- the chain ------------------------------------------------------------------------------ */

static bool is_float_cast(const finder *F, int i)
{
    const mc_node *n = N(F, i);
    return n->op == MC_OP_CAST && mc_dtype_is_float(n->dtype) && mc_dtype_is_float(N(F, n->in[0])->dtype);
}

/* p = div(e, sum(e)) with e = exp(sub(x, max(x))), all over the last axis: *x and the nodes. */
static bool is_softmax(const finder *F, int p, int *x, int nodes[5])
{
    const mc_node *pn = N(F, p);
    if (pn->op != MC_OP_DIV)
        return false;
    int e = pn->in[0], s = pn->in[1];
    const mc_node *en = N(F, e), *sn = N(F, s);
    if (en->op != MC_OP_EXP || sn->op != MC_OP_SUM || sn->in[0] != e || !reduces_last_keepdim(sn, en))
        return false;
    int d = en->in[0];
    const mc_node *dn = N(F, d);
    if (dn->op != MC_OP_SUB)
        return false;
    int xi = dn->in[0], m = dn->in[1];
    const mc_node *mn = N(F, m);
    if (mn->op != MC_OP_MAX || mn->in[0] != xi || !reduces_last_keepdim(mn, N(F, xi)))
        return false;
    if (!same_shape(pn, N(F, xi)) || !same_shape(en, pn) || !same_shape(dn, pn))
        return false;
    *x = xi;
    nodes[0] = m, nodes[1] = d, nodes[2] = e, nodes[3] = s, nodes[4] = p;
    return true;
}

/* Does node i continue the score chain down to a matmul of the scores' shape (so an add's
 * other operand is the mask)? */
static bool looks_like_scores(const finder *F, int i, const mc_node *shape, int depth)
{
    const mc_node *n = N(F, i);
    if (!same_shape(n, shape) || !mc_dtype_is_float(n->dtype) || depth > KIR_MAX_STEPS + 2)
        return false;
    if (n->op == MC_OP_MATMUL)
        return n->attr.nkernel == 0; /* not a conv's implicit GEMM */
    if (n->op == MC_OP_CAST || n->op == MC_OP_DIV)
        return looks_like_scores(F, n->in[0], shape, depth + 1);
    if (n->op == MC_OP_MUL || n->op == MC_OP_ADD)
        return looks_like_scores(F, n->in[0], shape, depth + 1) || looks_like_scores(F, n->in[1], shape, depth + 1);
    if (n->op == MC_OP_WHERE)
        return looks_like_scores(F, n->in[1], shape, depth + 1) || looks_like_scores(F, n->in[2], shape, depth + 1);
    return false;
}

static bool add_step(chain *c, const finder *F, int node, kir_attn_step st, int mask)
{
    if (c->a.nsteps == KIR_MAX_STEPS)
        return reject(c, F, node, "is one step too many between the matmul and the softmax (at most 4)");
    st.view = -1;
    c->a.step_node[c->a.nsteps] = mask;
    c->a.steps[c->a.nsteps++] = st;
    return true;
}

/* One step of the score chain at node i (whose one user is `user`): records it and sets *next
 * to the node it reads the scores from. */
static bool score_step(chain *c, const finder *F, int i, const mc_node *scores, int *next)
{
    const mc_node *n = N(F, i);
    kir_attn_step st = {.lo = -KIR_BAND_OPEN, .hi = KIR_BAND_OPEN};
    if (!same_shape(n, scores) || !mc_dtype_is_float(n->dtype))
        return reject(c, F, i, "changes the scores' shape or dtype");
    if (n->op == MC_OP_CAST) {
        if (!is_float_cast(F, i))
            return reject(c, F, i, "is not a cast between float types");
        *next = n->in[0];
        return true;
    }
    if (n->op == MC_OP_MUL) {
        for (int k = 0; k < 2; k++)
            if (is_scalar_const(F, n->in[k]) && isfinite(N(F, n->in[k])->attr.value)) {
                st.kind = KIR_STEP_MUL;
                st.value = N(F, n->in[k])->attr.value;
                *next = n->in[1 - k];
                return add_step(c, F, i, st, -1);
            }
        return reject(c, F, i, "multiplies by a tensor, not by a number");
    }
    if (n->op == MC_OP_DIV) {
        if (is_scalar_const(F, n->in[1]) && isfinite(N(F, n->in[1])->attr.value)) {
            st.kind = KIR_STEP_DIV;
            st.value = N(F, n->in[1])->attr.value;
            *next = n->in[0];
            return add_step(c, F, i, st, -1);
        }
        return reject(c, F, i, "divides by a tensor, not by a number");
    }
    if (n->op == MC_OP_WHERE) {
        int cond = n->in[0], keep_slot = -1;
        for (int k = 1; k < 3; k++)
            if (is_scalar_const(F, n->in[k]) && !is_scalar_const(F, n->in[3 - k]))
                keep_slot = 3 - k;
        if (keep_slot < 0)
            return reject(c, F, i, "does not choose between the scores and a number");
        st.value = N(F, n->in[3 - keep_slot])->attr.value;
        *next = n->in[keep_slot];
        if (band_of(F, cond, scores, keep_slot == 1, &st.lo, &st.hi)) {
            st.kind = KIR_STEP_BAND;
            if (c->nband < KIR_MAX_STEPS)
                c->band[c->nband++] = cond;
            return add_step(c, F, i, st, -1);
        }
        st.kind = KIR_STEP_WHERE;
        st.keep = keep_slot == 1;
        return add_step(c, F, i, st, cond);
    }
    if (n->op == MC_OP_ADD) {
        int chain_slot = looks_like_scores(F, n->in[0], scores, 0) ? 0 : looks_like_scores(F, n->in[1], scores, 0) ? 1 : -1;
        if (chain_slot < 0 || is_scalar_const(F, n->in[1 - chain_slot]))
            return reject(c, F, i, "adds something other than a mask tensor to the scores");
        st.kind = KIR_STEP_ADD;
        *next = n->in[chain_slot];
        return add_step(c, F, i, st, n->in[1 - chain_slot]);
    }
    return reject(c, F, i, "stands between the matmul and the softmax");
}

/* A symbolic Tq or Tk (a program compiled once for every binding, kir/kir.h) is checked
 * against the limits and bounds the skipped pairs at its largest value: every symbol at its
 * declared maximum. False when one of its symbols has none. */
static bool largest(const mc_graph *g, int64_t *size)
{
    if (!mc_dim_is_sym(*size))
        return true;
    int64_t most[MC_MAX_SYMS] = {0};
    for (int k = 0; k < mc_graph_num_syms(g); k++)
        if (!(most[k] = mc_dim_sym_max(g, k)) && mc_dim_uses_sym(g, *size, k))
            return false;
    return mc_dim_eval(g, *size, most, size);
}

/* Which pairs can be skipped: those outside a band whose fill is -inf, when every later step
 * keeps -inf at -inf (a positive finite scale; a where whose own fill is -inf). */
static void plan_skip(mc_attention *a, int64_t tq, int64_t tk)
{
    a->skip = false;
    int64_t lo = -tq, hi = tk; /* wider than any j - i */
    for (int s = 0; s < a->nsteps; s++) {
        const kir_attn_step *st = &a->steps[s];
        if (st->kind != KIR_STEP_BAND || !(isinf(st->value) && st->value < 0))
            continue;
        bool keeps = true;
        for (int t = s + 1; t < a->nsteps && keeps; t++) {
            const kir_attn_step *u = &a->steps[t];
            switch (u->kind) {
            case KIR_STEP_MUL: case KIR_STEP_DIV: keeps = u->value > 0 && isfinite(u->value); break;
            case KIR_STEP_BAND: case KIR_STEP_WHERE: keeps = isinf(u->value) && u->value < 0; break;
            case KIR_STEP_ADD: keeps = false; break; /* -inf + inf is NaN */
            }
        }
        if (!keeps)
            continue;
        a->skip = true;
        if (st->lo > lo)
            lo = st->lo;
        if (st->hi < hi)
            hi = st->hi;
    }
    if (a->skip) {
        a->skip_lo = lo < -tq ? -tq : lo > tk ? tk : lo;
        a->skip_hi = hi > tk ? tk : hi < -tq ? -tq : hi;
    }
}

/* The chain ending at matmul pv, whose first operand is (a cast of) softmax p. */
static bool match(chain *c, const finder *F, int pv, int p, const int soft[5], int x)
{
    memset(&c->a, 0, sizeof c->a);
    c->a.pv = pv;
    add_member(c, pv);
    const mc_node *pvn = N(F, pv);
    /* p and its casts up to pv */
    for (int i = pvn->in[0]; i != p; i = N(F, i)->in[0]) {
        if (!is_float_cast(F, i))
            return reject(c, F, i, "stands between the softmax and the matmul");
        if (only_user(F, i) < 0)
            return reject(c, F, i, "is used elsewhere or is an output");
        add_member(c, i);
    }
    /* the softmax: each of its values used only inside it */
    const int expect[5][2] = {{soft[1], -1}, {soft[2], -1}, {soft[3], soft[4]}, {soft[4], -1}, {-1, -1}};
    for (int k = 0; k < 5; k++) {
        int i = soft[k];
        add_member(c, i);
        if (F->is_output[i])
            return reject(c, F, i, "is a graph output");
        int want = expect[k][1] >= 0 ? 2 : 1;
        if (k == 4) /* p: used by pv or the cast before it */
            continue;
        if (nusers(F, i) != want)
            return reject(c, F, i, "is used outside the softmax");
    }
    if (only_user(F, p) < 0)
        return reject(c, F, p, "is used elsewhere or is an output");
    /* x: read by the max and the sub only */
    if (F->is_output[x] || nusers(F, x) != 2)
        return reject(c, F, x, "(the scores) is used outside the softmax or is an output");
    const mc_node *scores = N(F, x);
    int i = x;
    while (N(F, i)->op != MC_OP_MATMUL) {
        add_member(c, i);
        if (i != x && only_user(F, i) < 0)
            return reject(c, F, i, "is used elsewhere or is an output");
        int next = -1;
        if (!score_step(c, F, i, scores, &next))
            return false;
        i = next;
    }
    if (i != x && only_user(F, i) < 0)
        return reject(c, F, i, "(the scores' matmul) is used elsewhere or is an output");
    if (!same_shape(N(F, i), scores))
        return reject(c, F, i, "is broadcast to a larger shape by a mask");
    add_member(c, i);
    c->a.qk = i;
    /* the steps were found backwards */
    for (int s = 0; s < c->a.nsteps / 2; s++) {
        int t = c->a.nsteps - 1 - s;
        kir_attn_step tmp = c->a.steps[s];
        c->a.steps[s] = c->a.steps[t];
        c->a.steps[t] = tmp;
        int tn = c->a.step_node[s];
        c->a.step_node[s] = c->a.step_node[t];
        c->a.step_node[t] = tn;
    }
    const mc_node *qk = N(F, i);
    c->a.q = qk->in[0];
    c->a.kt = qk->in[1];
    c->a.v = pvn->in[1];
    const mc_node *q = N(F, c->a.q), *v = N(F, c->a.v);
    int64_t d = q->shape[q->rank - 1], dv = v->shape[v->rank - 1];
    int64_t tq = qk->shape[qk->rank - 2], tk = qk->shape[qk->rank - 1];
    if (mc_dim_is_sym(d) || mc_dim_is_sym(dv)) {
        snprintf(c->why, sizeof c->why, "its head dimension is symbolic");
        return false;
    }
    if (!largest(F->g, &tq) || !largest(F->g, &tk)) {
        snprintf(c->why, sizeof c->why, "its queries or keys are symbolic without a declared maximum");
        return false;
    }
    if (d > MC_ATTENTION_MAX_HEAD || dv > MC_ATTENTION_MAX_HEAD) {
        snprintf(c->why, sizeof c->why, "head dimension %lld is over %d",
                 (long long)(d > dv ? d : dv), MC_ATTENTION_MAX_HEAD);
        return false;
    }
    if (tq >= INT32_MAX || tk >= INT32_MAX || tq >= EXACT_LIMIT || tk >= EXACT_LIMIT) {
        snprintf(c->why, sizeof c->why, "%lld queries or keys are too many", (long long)(tq > tk ? tq : tk));
        return false;
    }
    if (pvn->rank - 2 < qk->rank - 2) {
        snprintf(c->why, sizeof c->why, "the scores have more batch dimensions than the output");
        return false;
    }
    for (int m = 0; m < c->nmembers; m++) /* one kernel per node: chains found earlier win */
        if (F->claimed[c->members[m]])
            return reject(c, F, c->members[m], "belongs to another attention chain");
    plan_skip(&c->a, tq, tk);
    return true;
}

static bool note(finder *F, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool note(finder *F, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (F->nnotes == F->capnotes) {
        int cap = F->capnotes ? F->capnotes * 2 : 8;
        const char **n = mc_arena_alloc(F->arena, sizeof *n * (size_t)cap);
        if (!n)
            return F->oom = true, false;
        if (F->nnotes)
            memcpy(n, F->notes, sizeof *n * (size_t)F->nnotes);
        F->notes = n;
        F->capnotes = cap;
    }
    const char *s = mc_arena_strdup(F->arena, buf);
    if (!s)
        return F->oom = true, false;
    F->notes[F->nnotes++] = s;
    return true;
}

static bool keep(finder *F, chain *c)
{
    if (F->nfound == F->capfound) {
        int cap = F->capfound ? F->capfound * 2 : 4;
        mc_attention *n = mc_arena_alloc(F->arena, sizeof *n * (size_t)cap);
        if (!n)
            return F->oom = true, false;
        if (F->nfound)
            memcpy(n, F->found, sizeof *n * (size_t)F->nfound);
        F->found = n;
        F->capfound = cap;
    }
    mc_attention *a = &F->found[F->nfound];
    *a = c->a;
    a->members = mc_arena_alloc(F->arena, sizeof *a->members * (size_t)c->nmembers);
    a->band_nodes = mc_arena_alloc(F->arena, sizeof *a->band_nodes * (size_t)(c->nband > 0 ? c->nband : 1));
    if (!a->members || !a->band_nodes)
        return F->oom = true, false;
    memcpy(a->members, c->members, sizeof *a->members * (size_t)c->nmembers);
    a->nmembers = c->nmembers;
    memcpy(a->band_nodes, c->band, sizeof *a->band_nodes * (size_t)c->nband);
    a->nband_nodes = c->nband;
    for (int m = 0; m < c->nmembers; m++)
        F->claimed[c->members[m]] = true;
    F->nfound++;
    return true;
}

mc_status mc_attention_find(const mc_graph *g, const int *user_start, const int *users,
                            const bool *is_output, mc_arena *arena, mc_attention **found,
                            int *nfound, const char ***notes, int *nnotes)
{
    finder F = {.g = g, .user_start = user_start, .users = users, .is_output = is_output, .arena = arena};
    chain *c = malloc(sizeof *c);
    F.claimed = calloc((size_t)(g->nnodes > 0 ? g->nnodes : 1), sizeof *F.claimed);
    if (!c || !F.claimed) {
        free(c);
        free(F.claimed);
        return mc_fail(MC_ERR_SYSTEM, "out of memory finding attention");
    }
    for (int pv = 0; pv < g->nnodes && !F.oom; pv++) {
        const mc_node *n = &g->nodes[pv];
        if (n->op != MC_OP_MATMUL || n->attr.nkernel > 0)
            continue;
        int p = n->in[0];
        while (is_float_cast(&F, p))
            p = N(&F, p)->in[0];
        int x, soft[5];
        if (!is_softmax(&F, p, &x, soft))
            continue;
        memset(c, 0, sizeof *c);
        if (match(c, &F, pv, p, soft, x)) {
            keep(&F, c);
            continue;
        }
        char mm[128], sm[128];
        describe_node(&F, pv, mm, sizeof mm);
        describe_node(&F, p, sm, sizeof sm);
        note(&F, "attention not fused: softmax %s into matmul %s: %s", sm, mm, c->why);
    }
    free(c);
    free(F.claimed);
    if (F.oom)
        return mc_fail(MC_ERR_SYSTEM, "out of memory finding attention");
    *found = F.found;
    *nfound = F.nfound;
    *notes = F.notes;
    *nnotes = F.nnotes;
    return MC_OK;
}
