/* ONNX import, the network operators (frontend/onnx_internal.h): MatMul, Gemm and Einsum as
 * minic's matmul; LayerNormalization, BatchNormalization, InstanceNormalization and
 * MeanVarianceNormalization; Softmax and LogSoftmax on any axis; the two losses; Resize and
 * Upsample as matmuls with weights computed on the host; LRN; RNN, GRU and LSTM unrolled over
 * their (static) sequence; Conv, MaxPool and AveragePool as minic's conv and pools, uneven and
 * auto_pad padding as a pad in front.
 */
#include "frontend/onnx_internal.h"

#ifdef MINIC_HAVE_ONNX
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- linear algebra and normalization ------------------------------------------------------- */

static bool op_matmul(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(a, 0);
    VAL(b, 1);
    const mc_node *an = onnx_vnode(c, a), *bn = onnx_vnode(c, b);
    int ra = an->rank, rb = bn->rank;
    if (ra == 0 || rb == 0)
        return onnx_why(c, "a scalar operand");
    if (ra == 1) {
        int64_t s[2] = {1, an->shape[0]};
        a = mc_reshape(g, a, s, 2);
    }
    if (rb == 1) {
        int64_t s[2] = {bn->shape[0], 1};
        b = mc_reshape(g, b, s, 2);
    }
    mc_value y = mc_matmul(g, a, b);
    if (y >= 0 && (ra == 1 || rb == 1)) {
        const mc_node *yn = onnx_vnode(c, y);
        int64_t s[MC_MAX_RANK];
        int r = 0;
        for (int d = 0; d < yn->rank - 2; d++)
            s[r++] = yn->shape[d];
        if (ra != 1)
            s[r++] = yn->shape[yn->rank - 2];
        if (rb != 1)
            s[r++] = yn->shape[yn->rank - 1];
        y = mc_reshape(g, y, s, r);
    }
    return onnx_set_out(c, n, 0, y);
}

static bool op_gemm(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(a, 0);
    VAL(b, 1);
    if (onnx_attr_i(n, "transA", 0))
        a = mc_transpose(g, a, NULL, 0);
    if (onnx_attr_i(n, "transB", 0))
        b = mc_transpose(g, b, NULL, 0);
    double alpha = onnx_attr_f(n, "alpha", 1.0), beta = onnx_attr_f(n, "beta", 1.0);
    mc_value y = mc_matmul(g, a, b);
    if (y >= 0 && alpha != 1.0)
        y = mc_mul(g, y, onnx_fscalar(c, y, alpha));
    if (onnx_has_in(n, 2) && beta != 0.0) {
        VAL(cc, 2);
        if (beta != 1.0)
            cc = mc_mul(g, cc, onnx_fscalar(c, cc, beta));
        y = mc_add(g, y, cc);
    }
    return onnx_set_out(c, n, 0, y);
}

static bool op_softmax(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    bool log = !strcmp(n->op_type, "LogSoftmax");
    VAL(x, 0);
    const mc_node *xn = onnx_vnode(c, x);
    int rank = xn->rank, ax;
    if (!onnx_norm_axis(c, onnx_attr_i(n, "axis", c->opset >= 13 ? -1 : 1), rank, &ax))
        return false;
    if (c->opset >= 13)
        return onnx_set_out(c, n, 0, log ? mc_log_softmax(g, x, ax) : mc_softmax(g, x, ax));
    /* before opset 13: the input is seen as 2-D, [prod(:axis), prod(axis:)] */
    if (onnx_any_sym(rank, xn->shape))
        return onnx_why(c, "%s before opset 13 over a symbolic dimension", n->op_type);
    int64_t s2[2] = {onnx_numel(ax, xn->shape), onnx_numel(rank - ax, xn->shape + ax)};
    int64_t back[MC_MAX_RANK];
    memcpy(back, xn->shape, sizeof back);
    mc_value y = mc_reshape(g, x, s2, 2);
    y = log ? mc_log_softmax(g, y, 1) : mc_softmax(g, y, 1);
    return onnx_set_out(c, n, 0, mc_reshape(g, y, back, rank));
}

/* mean and variance over the axes from ax on, keepdim */
static bool op_layernorm(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    VAL(w, 1);
    mc_value b = MC_NONE;
    if (onnx_has_in(n, 2)) {
        b = onnx_in_value(c, n, 2);
        if (b < 0)
            return false;
    }
    const mc_node *xn = onnx_vnode(c, x);
    int rank = xn->rank, ax;
    if (!onnx_norm_axis(c, onnx_attr_i(n, "axis", -1), rank, &ax))
        return false;
    double eps = onnx_attr_f(n, "epsilon", 1e-5);
    const mc_node *wn = onnx_vnode(c, w);
    bool simple = ax == rank - 1 && wn->rank == 1 && wn->shape[0] == xn->shape[rank - 1] &&
                  (b == MC_NONE || (onnx_vnode(c, b)->rank == 1 && onnx_vnode(c, b)->shape[0] == wn->shape[0])) &&
                  !onnx_out_present(n, 1) && !onnx_out_present(n, 2);
    if (simple) {
        if (b == MC_NONE)
            b = mc_full(g, wn->shape, 1, 0, wn->dtype);
        return onnx_set_out(c, n, 0, mc_layernorm(g, x, w, b, eps));
    }
    int axes[MC_MAX_RANK], na = 0;
    for (int d = ax; d < rank; d++)
        axes[na++] = d;
    mc_value mean = mc_mean(g, x, axes, na, true);
    mc_value dx = mc_sub(g, x, mean);
    mc_value var = mc_mean(g, mc_mul(g, dx, dx), axes, na, true);
    mc_value inv = mc_rsqrt(g, mc_add(g, var, onnx_fscalar(c, x, eps)));
    mc_value y = mc_mul(g, mc_mul(g, dx, inv), w);
    if (b != MC_NONE)
        y = mc_add(g, y, b);
    return onnx_set_out(c, n, 0, y) && (!onnx_out_present(n, 1) || onnx_set_out(c, n, 1, mean)) &&
           (!onnx_out_present(n, 2) || onnx_set_out(c, n, 2, inv));
}

static bool op_batchnorm(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    if (onnx_attr_i(n, "training_mode", 0) || onnx_out_present(n, 1) || onnx_out_present(n, 2))
        return onnx_why(c, "training mode (only inference is supported)");
    VAL(x, 0);
    VAL(scale, 1);
    VAL(bias, 2);
    VAL(mean, 3);
    VAL(var, 4);
    const mc_node *xn = onnx_vnode(c, x);
    if (xn->rank < 2)
        return onnx_why(c, "an input of rank %d", xn->rank);
    /* per-channel vectors as [C, 1, .., 1] */
    int64_t s[MC_MAX_RANK];
    int r = xn->rank - 1;
    s[0] = xn->shape[1];
    for (int d = 1; d < r; d++)
        s[d] = 1;
    mc_value v[4] = {scale, bias, mean, var};
    for (int k = 0; k < 4; k++)
        v[k] = mc_reshape(g, v[k], s, r);
    double eps = onnx_attr_f(n, "epsilon", 1e-5);
    mc_value inv = mc_rsqrt(g, mc_add(g, v[3], onnx_fscalar(c, x, eps)));
    mc_value y = mc_add(g, mc_mul(g, mc_mul(g, mc_sub(g, x, v[2]), inv), v[0]), v[1]);
    return onnx_set_out(c, n, 0, y);
}

static bool op_instance_norm(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    VAL(scale, 1);
    VAL(bias, 2);
    const mc_node *xn = onnx_vnode(c, x);
    int rank = xn->rank;
    if (rank < 3)
        return onnx_why(c, "an input of rank %d", rank);
    int axes[MC_MAX_RANK], na = 0;
    for (int d = 2; d < rank; d++)
        axes[na++] = d;
    int64_t s[MC_MAX_RANK];
    s[0] = xn->shape[1];
    for (int d = 1; d < rank - 1; d++)
        s[d] = 1;
    mc_value mean = mc_mean(g, x, axes, na, true);
    mc_value dx = mc_sub(g, x, mean);
    mc_value var = mc_mean(g, mc_mul(g, dx, dx), axes, na, true);
    mc_value y = mc_mul(g, dx, mc_rsqrt(g, mc_add(g, var, onnx_fscalar(c, x, onnx_attr_f(n, "epsilon", 1e-5)))));
    y = mc_add(g, mc_mul(g, y, mc_reshape(g, scale, s, rank - 1)), mc_reshape(g, bias, s, rank - 1));
    return onnx_set_out(c, n, 0, y);
}

/* NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: the target picks its class through a
 * one-hot mask (iota == target) instead of a gather. */
static bool op_loss(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    bool sce = !strcmp(n->op_type, "SoftmaxCrossEntropyLoss");
    VAL(x, 0);
    VAL(target, 1);
    const mc_node *xn = onnx_vnode(c, x), *tn = onnx_vnode(c, target);
    int rank = xn->rank;
    if (rank < 2 || tn->rank != rank - 1 || tn->dtype != MC_I32)
        return onnx_why(c, "an input of rank %d with a target of rank %d", rank, tn->rank);
    mc_value lp = sce ? mc_log_softmax(g, x, 1) : x;
    int64_t ts[MC_MAX_RANK];
    ts[0] = tn->shape[0];
    ts[1] = 1;
    for (int d = 1; d < tn->rank; d++)
        ts[d + 1] = tn->shape[d];
    mc_value t1 = mc_reshape(g, target, ts, rank);
    mc_value mask = mc_cast(g, mc_eq(g, mc_iota(g, xn->shape, rank, 1, MC_I32), t1), xn->dtype);
    if (onnx_has_in(n, 2)) {
        VAL(w, 2);
        int64_t ws[MC_MAX_RANK];
        for (int d = 0; d < rank; d++)
            ws[d] = d == 1 ? xn->shape[1] : 1;
        mask = mc_mul(g, mask, mc_reshape(g, w, ws, rank));
    }
    const attr_t *ig = onnx_attr(n, "ignore_index");
    if (ig && ig->has_i) {
        if (ig->i < INT32_MIN || ig->i > INT32_MAX)
            return onnx_why(c, "ignore_index %lld outside i32", (long long)ig->i);
        mask = mc_mul(g, mask, mc_cast(g, mc_ne(g, t1, mc_scalar(g, (double)ig->i, MC_I32)), xn->dtype));
    }
    int one_axis[1] = {1};
    mc_value loss = mc_neg(g, mc_sum(g, mc_mul(g, lp, mask), one_axis, 1, false));
    mc_value y;
    if (onnx_attr_is(n, "reduction", "mean", "none"))
        y = loss;
    else if (onnx_attr_is(n, "reduction", "mean", "sum"))
        y = mc_sum(g, loss, NULL, 0, false);
    else if (onnx_attr_is(n, "reduction", "mean", "mean"))
        y = mc_div(g, mc_sum(g, loss, NULL, 0, false), mc_sum(g, mask, NULL, 0, false));
    else
        return onnx_why(c, "an unknown reduction");
    return onnx_set_out(c, n, 0, y) && (!sce || !onnx_out_present(n, 1) || onnx_set_out(c, n, 1, lp));
}

/* ONNX's own function body: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) */
static bool op_mvn(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    int rank = onnx_vnode(c, x)->rank, axes[MC_MAX_RANK], na = 0;
    const attr_t *a = onnx_attr(n, "axes");
    if (a && a->n_ints) {
        if (a->n_ints > MC_MAX_RANK)
            return onnx_why(c, "%zu axes", a->n_ints);
        for (size_t k = 0; k < a->n_ints; k++)
            if (!onnx_norm_axis(c, a->ints[k], rank, &axes[na++]))
                return false;
    } else {
        if (rank != 4)
            return onnx_why(c, "default axes [0, 2, 3] need rank 4");
        axes[0] = 0, axes[1] = 2, axes[2] = 3, na = 3;
    }
    mc_value mean = mc_mean(g, x, axes, na, true);
    mc_value var = mc_sub(g, mc_mean(g, mc_mul(g, x, x), axes, na, true), mc_mul(g, mean, mean));
    mc_value y = mc_div(g, mc_sub(g, x, mean), mc_add(g, mc_sqrt(g, var), onnx_fscalar(c, x, 1e-9)));
    return onnx_set_out(c, n, 0, y);
}

/* Einsum without repeated letters in one operand or ellipses: every operand moved to one order
 * of all letters (the output's first), multiplied with broadcasting, summed over the rest. */
static bool op_einsum(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    const attr_t *a = onnx_attr(n, "equation");
    if (!a || !a->has_s || a->s.len == 0 || a->s.len > 200)
        return onnx_why(c, "no equation");
    char eq[256], *terms[8];
    size_t o = 0;
    for (size_t k = 0; k < a->s.len; k++)
        if (a->s.data[k] != ' ')
            eq[o++] = (char)a->s.data[k];
    eq[o] = 0;
    if (strstr(eq, "..."))
        return onnx_why(c, "an equation with an ellipsis");
    char *arrow = strstr(eq, "->"), *out = NULL;
    if (arrow) {
        *arrow = 0;
        out = arrow + 2;
    }
    int nt = 0;
    for (char *t = eq; nt < 8; nt++) {
        terms[nt] = t;
        char *comma = strchr(t, ',');
        if (!comma) {
            nt++;
            break;
        }
        *comma = 0;
        t = comma + 1;
    }
    if ((size_t)nt != n->n_input)
        return onnx_why(c, "%d terms for %zu operands", nt, n->n_input);
    int count[128] = {0};
    for (int k = 0; k < nt; k++)
        for (char *p = terms[k]; *p; p++) {
            if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
                return onnx_why(c, "an equation with '%c'", *p);
            if (strchr(p + 1, *p))
                return onnx_why(c, "a letter repeated in one operand (diagonals)");
            count[(int)*p]++;
        }
    char outl[64] = "";
    if (out) {
        if (strlen(out) >= sizeof outl)
            return onnx_why(c, "a long output");
        strcpy(outl, out);
        for (char *p = outl; *p; p++)
            if (*p < 0 || !count[(int)*p] || strchr(p + 1, *p))
                return onnx_why(c, "output letter '%c'", *p);
    } else {
        int k = 0;
        for (int ch = 0; ch < 128; ch++)
            if (count[ch] == 1)
                outl[k++] = (char)ch;
        outl[k] = 0;
    }
    char all[64];
    int nall = (int)strlen(outl);
    strcpy(all, outl);
    for (int k = 0; k < nt; k++)
        for (char *p = terms[k]; *p; p++)
            if (!strchr(all, *p)) {
                all[nall++] = *p;
                all[nall] = 0;
            }
    if (nall > MC_MAX_RANK)
        return onnx_why(c, "%d letters (at most %d)", nall, MC_MAX_RANK);
    mc_value prod = MC_NONE;
    for (int k = 0; k < nt; k++) {
        VAL(x, (size_t)k);
        const mc_node *xn = onnx_vnode(c, x);
        int r = (int)strlen(terms[k]);
        if (xn->rank != r)
            return onnx_why(c, "operand %d has rank %d for '%s'", k, xn->rank, terms[k]);
        int perm[MC_MAX_RANK], np = 0;
        int64_t shape[MC_MAX_RANK];
        for (int u = 0; u < nall; u++) {
            char *p = strchr(terms[k], all[u]);
            shape[u] = p ? xn->shape[p - terms[k]] : 1;
            if (p)
                perm[np++] = (int)(p - terms[k]);
        }
        bool id = true;
        for (int q = 0; q < np; q++)
            id &= perm[q] == q;
        if (!id)
            x = mc_transpose(g, x, perm, np);
        if (nall != r)
            x = mc_reshape(g, x, shape, nall);
        prod = prod == MC_NONE ? x : mc_mul(g, prod, x);
    }
    int nout = (int)strlen(outl), axes[MC_MAX_RANK], na = 0;
    for (int u = nout; u < nall; u++)
        axes[na++] = u;
    if (na)
        prod = mc_sum(g, prod, axes, na, false);
    return onnx_set_out(c, n, 0, prod);
}

/* A constant made on the host (a resize's weights) as a param named after the node. */
static mc_value host_param(ctx *c, const node_t *n, const char *what, htensor *t)
{
    char name[256];
    snprintf(name, sizeof name, "%s.%s", onnx_out_present(n, 0) ? n->output[0] : "resize", what);
    char *copy = mc_arena_strdup(&c->m->arena, name);
    slot *s = copy && !onnx_find_slot(c, copy) ? onnx_new_slot(c, copy) : NULL;
    if (!s) {
        onnx_why(c, "out of memory");
        return MC_ERROR;
    }
    s->state = S_CONST;
    s->c = t;
    s->initializer = true;
    return onnx_as_value(c, s);
}

/* The weights of a 1-D resize from in to out elements, as ONNX's reference computes them: a
 * source coordinate per output, its n nearest inputs (edge-padded), their coefficients. A row
 * of zeros with *extrap set where tf_crop_and_resize falls outside the input. */
typedef struct resize_spec {
    int mode;       /* 0 nearest, 1 linear, 2 cubic */
    int coord;      /* 0 half_pixel, 1 asymmetric, 2 pytorch_half_pixel, 3 align_corners, 4 tf_crop_and_resize */
    int nearest;    /* 0 round_prefer_floor, 1 round_prefer_ceil, 2 floor, 3 ceil */
    double a;       /* cubic_coeff_a */
    bool exclude;   /* exclude_outside */
} resize_spec;

static void resize_weights(const resize_spec *sp, int64_t in, int64_t out, double scale,
                           double roi0, double roi1, double *w /* [in][out] */, bool *extrap)
{
    double out_w = scale * (double)in;
    for (int64_t o = 0; o < out; o++) {
        double x = (double)o, xo;
        extrap[o] = false;
        switch (sp->coord) {
        case 1: xo = x / scale; break;
        case 2: xo = out_w == 1 ? -0.5 : (x + 0.5) / scale - 0.5; break;
        case 3: xo = out_w == 1 ? 0 : x * (double)(in - 1) / (out_w - 1); break;
        case 4:
            xo = out_w == 1 ? (roi1 - roi0) * (double)(in - 1) / 2 : x * (roi1 - roi0) * (double)(in - 1) / (out_w - 1);
            xo += roi0 * (double)(in - 1);
            if (xo < 0 || xo > (double)(in - 1)) {
                extrap[o] = true;
                continue;
            }
            break;
        default: xo = (x + 0.5) / scale - 0.5; break;
        }
        double fl = floor(xo), r = xo == fl ? 1.0 : xo - fl;
        double co[4];
        int nc;
        if (sp->mode == 0) {
            nc = 2;
            bool right = xo == fl ? true : sp->nearest == 0 ? r > 0.5 : sp->nearest == 1 ? r >= 0.5 : sp->nearest == 3;
            co[0] = !right, co[1] = right;
        } else if (sp->mode == 1) {
            nc = 2;
            co[0] = 1 - r, co[1] = r;
        } else {
            double A = sp->a, s1 = r + 1, s2 = 1 - r, s3 = 2 - r;
            nc = 4;
            co[0] = ((A * s1 - 5 * A) * s1 + 8 * A) * s1 - 4 * A;
            co[1] = ((A + 2) * r - (A + 3)) * r * r + 1;
            co[2] = ((A + 2) * s2 - (A + 3)) * s2 * s2 + 1;
            co[3] = ((A * s3 - 5 * A) * s3 + 8 * A) * s3 - 4 * A;
        }
        int64_t first = (int64_t)ceil(xo) - nc / 2; /* the nearest nc, the smaller on ties */
        if (xo == fl)
            first = (int64_t)xo - nc / 2;
        if (sp->exclude) {
            double sum = 0;
            for (int k = 0; k < nc; k++) {
                int64_t i = first + k;
                if (i < 0 || i >= in)
                    co[k] = 0;
                sum += co[k];
            }
            for (int k = 0; k < nc && sum != 0; k++)
                co[k] /= sum;
        }
        for (int k = 0; k < nc; k++) {
            int64_t i = first + k;
            i = i < 0 ? 0 : i >= in ? in - 1 : i;
            w[i * out + o] += co[k];
        }
    }
}

static bool op_resize(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    bool upsample = !strcmp(n->op_type, "Upsample");
    VAL(x, 0);
    const mc_node *xn = onnx_vnode(c, x);
    int rank = xn->rank;
    if (!mc_dtype_is_float(xn->dtype) || rank == 0)
        return onnx_why(c, "a %s input of rank %d", mc_dtype_name(xn->dtype), rank);
    resize_spec sp = {0};
    sp.a = onnx_attr_f(n, "cubic_coeff_a", -0.75);
    sp.exclude = onnx_attr_i(n, "exclude_outside", 0) != 0;
    if (onnx_attr_is(n, "mode", "nearest", "linear") || onnx_attr_is(n, "mode", "nearest", "bilinear"))
        sp.mode = 1;
    else if (onnx_attr_is(n, "mode", "nearest", "cubic"))
        sp.mode = 2;
    else if (!onnx_attr_is(n, "mode", "nearest", "nearest"))
        return onnx_why(c, "an unknown mode");
    bool old = upsample || c->opset < 11;
    const char *ct = old ? "asymmetric" : "half_pixel";
    static const char *const coords[] = {"half_pixel", "asymmetric", "pytorch_half_pixel",
                                         "align_corners", "tf_crop_and_resize"};
    sp.coord = -1;
    for (int k = 0; k < 5; k++)
        if (onnx_attr_is(n, "coordinate_transformation_mode", ct, coords[k]))
            sp.coord = k;
    static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    sp.nearest = -1;
    for (int k = 0; k < 4; k++) /* Upsample and Resize-10 pick the floor */
        if (onnx_attr_is(n, "nearest_mode", old ? "floor" : "round_prefer_floor", nearests[k]))
            sp.nearest = k;
    if (sp.coord < 0 || sp.nearest < 0)
        return onnx_why(c, "an unsupported coordinate_transformation_mode or nearest_mode");
    /* scales and sizes */
    double scales[MC_MAX_RANK], roi[2 * MC_MAX_RANK];
    int64_t outl[MC_MAX_RANK];
    size_t si = old ? 1 : 2, zi = 3, ri = 1;
    htensor *st = onnx_has_in(n, si) ? onnx_in_const(c, n, si) : NULL, *zt = !old && onnx_has_in(n, zi) ? onnx_in_const(c, n, zi) : NULL;
    if (upsample && !onnx_has_in(n, 1)) {
        const attr_t *a = onnx_attr(n, "scales");
        if (!a || a->n_floats != (size_t)rank)
            return onnx_why(c, "no scales");
        htensor *t = onnx_new_fold(c, T_FLOAT, 1, (int64_t[]){rank});
        if (!t)
            return false;
        for (int d = 0; d < rank; d++)
            t->f[d] = a->floats[d];
        st = t;
    }
    if ((onnx_has_in(n, si) && !st) || (!old && onnx_has_in(n, zi) && !zt))
        return onnx_why(c, "scales and sizes must be constants");
    if (zt && zt->n == rank) {
        for (int d = 0; d < rank; d++) {
            outl[d] = onnx_hi(zt, d);
            scales[d] = (double)outl[d] / (double)xn->shape[d];
        }
    } else if (st && st->n == rank) {
        for (int d = 0; d < rank; d++) {
            scales[d] = onnx_hf(st, d);
            if (!(scales[d] > 0) || scales[d] > 1024)
                return onnx_why(c, "scale %g", scales[d]);
            outl[d] = (int64_t)(scales[d] * (double)xn->shape[d]);
        }
    } else {
        return onnx_why(c, "neither scales nor sizes for every axis");
    }
    for (int d = 0; d < 2 * rank; d++)
        roi[d] = d < rank ? 0 : 1;
    if (sp.coord == 4) {
        htensor *rt = onnx_has_in(n, ri) ? onnx_in_const(c, n, ri) : NULL;
        if (!rt || rt->n != 2 * rank)
            return onnx_why(c, "tf_crop_and_resize without a constant roi");
        for (int d = 0; d < 2 * rank; d++)
            roi[d] = onnx_hf(rt, d);
    }
    double extrap_value = onnx_attr_f(n, "extrapolation_value", 0.0);
    for (int d = rank - 1; d >= 0; d--) { /* the innermost axis first, as ONNX's reference */
        int64_t in = xn->shape[d], out = outl[d];
        if (out < 1 || out > 65536 || in > 65536)
            return onnx_why(c, "a resize of axis %d from %lld to %lld", d, (long long)in, (long long)out);
        htensor *w = onnx_new_fold(c, T_FLOAT, 2, (int64_t[]){in, out});
        bool *ex = onnx_c_alloc(c, (size_t)out * sizeof *ex);
        if (!w || !ex)
            return w ? onnx_why(c, "out of memory") : false;
        resize_weights(&sp, in, out, scales[d], roi[d], roi[rank + d], w->f, ex);
        bool identity = in == out, any_ex = false;
        for (int64_t i = 0; i < in && identity; i++)
            for (int64_t o = 0; o < out && identity; o++)
                identity = w->f[i * out + o] == (i == o);
        for (int64_t o = 0; o < out; o++)
            any_ex |= ex[o];
        if (identity && !any_ex)
            continue;
        char what[32];
        snprintf(what, sizeof what, "resize_w%d", d);
        mc_value wv = host_param(c, n, what, w);
        if (wv < 0)
            return false;
        if (onnx_vnode(c, wv)->dtype != xn->dtype)
            wv = mc_cast(g, wv, xn->dtype);
        int back[MC_MAX_RANK];
        int r = onnx_vnode(c, x)->rank;
        mc_value xt = onnx_axis_last(c, x, d, back);
        if (r == 1)
            xt = mc_reshape(g, xt, (int64_t[]){1, in}, 2);
        mc_value y = mc_matmul(g, xt, wv);
        if (r == 1)
            y = mc_reshape(g, y, &out, 1);
        if (any_ex) {
            htensor *b = onnx_new_fold(c, T_FLOAT, 1, &out);
            if (!b)
                return false;
            for (int64_t o = 0; o < out; o++)
                b->f[o] = ex[o] ? extrap_value : 0;
            snprintf(what, sizeof what, "resize_b%d", d);
            mc_value bv = host_param(c, n, what, b);
            if (bv < 0)
                return false;
            if (onnx_vnode(c, bv)->dtype != xn->dtype)
                bv = mc_cast(g, bv, xn->dtype);
            y = mc_add(g, y, bv);
        }
        x = d == r - 1 || y < 0 ? y : mc_transpose(g, y, back, r);
        if (x < 0)
            return onnx_set_out(c, n, 0, x);
    }
    return onnx_set_out(c, n, 0, x);
}

/* LRN: the sum of squares over a window of channels as a product with a 0/1 band matrix. */
static bool op_lrn(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    const mc_node *xn = onnx_vnode(c, x);
    int rank = xn->rank, back[MC_MAX_RANK];
    int64_t size = onnx_attr_i(n, "size", 0), C = rank >= 2 ? xn->shape[1] : 0;
    if (rank < 2 || size < 1 || size > 4096 || C > 4096)
        return onnx_why(c, "size %lld over %lld channels", (long long)size, (long long)C);
    double alpha = onnx_attr_f(n, "alpha", 1e-4), beta = onnx_attr_f(n, "beta", 0.75), bias = onnx_attr_f(n, "bias", 1.0);
    int64_t lo = (size - 1) / 2, hi_ = size - 1 - lo, sq[2] = {C, C};
    /* band[c'][c] = 1 where c - lo <= c' <= c + hi */
    mc_value d = mc_sub(g, mc_iota(g, sq, 2, 0, MC_I32), mc_iota(g, sq, 2, 1, MC_I32));
    mc_value band = mc_where(g, mc_ge(g, d, mc_scalar(g, (double)-lo, MC_I32)),
                             mc_le(g, d, mc_scalar(g, (double)hi_, MC_I32)), mc_scalar(g, 0, MC_BOOL));
    mc_value xt = onnx_axis_last(c, mc_mul(g, x, x), 1, back);
    mc_value sum = mc_matmul(g, xt, mc_cast(g, band, xn->dtype));
    if (rank > 2)
        sum = mc_transpose(g, sum, back, rank);
    mc_value den = mc_pow(g, mc_add(g, mc_mul(g, sum, onnx_fscalar(c, x, alpha / (double)size)), onnx_fscalar(c, x, bias)),
                          onnx_fscalar(c, x, beta));
    return onnx_set_out(c, n, 0, mc_div(g, x, den));
}

/* RNN, GRU and LSTM, one direction (forward or reverse), default activations: the recurrence
 * unrolled over the sequence at import time (a matmul per step and gate block). */
static bool op_rnn(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    const char *op = n->op_type;
    int G = !strcmp(op, "LSTM") ? 4 : !strcmp(op, "GRU") ? 3 : 1;
    if (onnx_attr(n, "activations") || onnx_attr(n, "clip") || onnx_attr_i(n, "input_forget", 0))
        return onnx_why(c, "activations, clip or input_forget (only the defaults are supported)");
    bool reverse = onnx_attr_is(n, "direction", "forward", "reverse");
    if (!reverse && !onnx_attr_is(n, "direction", "forward", "forward"))
        return onnx_why(c, "a bidirectional %s", op);
    int layout = (int)onnx_attr_i(n, "layout", 0);
    VAL(X, 0);
    VAL(W, 1);
    VAL(R, 2);
    const mc_node *xn = onnx_vnode(c, X), *wn = onnx_vnode(c, W);
    if (xn->rank != 3 || wn->rank != 3 || wn->shape[0] != 1)
        return onnx_why(c, "X of rank %d and W of rank %d", xn->rank, wn->rank);
    int64_t T = layout ? xn->shape[1] : xn->shape[0], B = layout ? xn->shape[0] : xn->shape[1];
    int64_t I = xn->shape[2], GH = wn->shape[1], H = GH / G;
    if (GH % G || T > 1024 || (onnx_attr(n, "hidden_size") && onnx_attr_i(n, "hidden_size", 0) != H))
        return onnx_why(c, "hidden sizes that disagree, or a sequence of %lld steps", (long long)T);
    if (onnx_has_in(n, 4)) {
        htensor *sl = onnx_in_const(c, n, 4);
        if (!sl)
            return onnx_why(c, "sequence_lens computed at run time");
        for (int64_t k = 0; k < sl->n; k++)
            if (onnx_hi(sl, k) != T)
                return onnx_why(c, "sequence_lens shorter than the sequence");
    }
    mc_dtype d = xn->dtype;
    int64_t s2[2] = {GH, I}, r2[2] = {GH, H}, bh[2] = {B, H}, b2[2] = {2, GH};
    mc_value Wt = mc_transpose(g, mc_reshape(g, W, s2, 2), NULL, 0); /* [I, GH] */
    mc_value Rt = mc_transpose(g, mc_reshape(g, R, r2, 2), NULL, 0); /* [H, GH] */
    mc_value wb = mc_full(g, &GH, 1, 0, d), rb = wb;
    if (onnx_has_in(n, 3)) {
        VAL(Bv, 3);
        mc_value b = mc_reshape(g, Bv, b2, 2);
        wb = mc_reshape(g, mc_slice(g, b, 0, 0, 1), &GH, 1);
        rb = mc_reshape(g, mc_slice(g, b, 0, 1, 2), &GH, 1);
    }
    mc_value Ht = mc_full(g, bh, 2, 0, d), Ct = Ht;
    if (onnx_has_in(n, 5)) {
        VAL(h0, 5);
        Ht = mc_reshape(g, h0, bh, 2);
    }
    mc_value P = MC_NONE;
    if (G == 4 && onnx_has_in(n, 6)) {
        VAL(c0, 6);
        Ct = mc_reshape(g, c0, bh, 2);
    }
    if (G == 4 && onnx_has_in(n, 7)) {
        VAL(pv, 7);
        P = mc_reshape(g, pv, (int64_t[]){3 * H}, 1);
    }
    bool lbr = onnx_attr_i(n, "linear_before_reset", 0) != 0;
    mc_value ys[1024];
    int64_t xs[2] = {B, I};
    for (int64_t k = 0; k < T; k++) {
        int64_t t = reverse ? T - 1 - k : k;
        mc_value x = mc_reshape(g, mc_slice(g, X, layout ? 1 : 0, t, t + 1), xs, 2);
        mc_value xw = mc_add(g, mc_matmul(g, x, Wt), wb); /* [B, GH] */
#define PART(v, a, b_) mc_slice(g, (v), 1, (a) * H, (b_) * H)
#define VPART(v, a, b_) mc_slice(g, (v), 0, (a) * H, (b_) * H)
        if (G == 1) {
            Ht = mc_tanh(g, mc_add(g, xw, mc_add(g, mc_matmul(g, Ht, Rt), rb)));
        } else if (G == 3) {
            mc_value hzr = mc_add(g, mc_matmul(g, Ht, PART(Rt, 0, 2)), VPART(rb, 0, 2));
            mc_value z = mc_sigmoid(g, mc_add(g, PART(xw, 0, 1), PART(hzr, 0, 1)));
            mc_value r = mc_sigmoid(g, mc_add(g, PART(xw, 1, 2), PART(hzr, 1, 2)));
            mc_value hh;
            if (lbr)
                hh = mc_mul(g, r, mc_add(g, mc_matmul(g, Ht, PART(Rt, 2, 3)), VPART(rb, 2, 3)));
            else
                hh = mc_add(g, mc_matmul(g, mc_mul(g, r, Ht), PART(Rt, 2, 3)), VPART(rb, 2, 3));
            mc_value h = mc_tanh(g, mc_add(g, PART(xw, 2, 3), hh));
            Ht = mc_add(g, mc_mul(g, mc_sub(g, mc_scalar(g, 1, d), z), h), mc_mul(g, z, Ht));
        } else {
            mc_value gates = mc_add(g, xw, mc_add(g, mc_matmul(g, Ht, Rt), rb)); /* i, o, f, c */
            mc_value ig = PART(gates, 0, 1), og = PART(gates, 1, 2), fg = PART(gates, 2, 3);
            if (P != MC_NONE) {
                ig = mc_add(g, ig, mc_mul(g, VPART(P, 0, 1), Ct));
                fg = mc_add(g, fg, mc_mul(g, VPART(P, 2, 3), Ct));
            }
            mc_value C = mc_add(g, mc_mul(g, mc_sigmoid(g, fg), Ct),
                                mc_mul(g, mc_sigmoid(g, ig), mc_tanh(g, PART(gates, 3, 4))));
            if (P != MC_NONE)
                og = mc_add(g, og, mc_mul(g, VPART(P, 1, 2), C));
            Ht = mc_mul(g, mc_sigmoid(g, og), mc_tanh(g, C));
            Ct = C;
        }
#undef PART
#undef VPART
        ys[t] = Ht;
    }
    /* Y: [T, 1, B, H] (layout 0) or [B, T, 1, H]; Y_h, Y_c: [1, B, H] or [B, 1, H] */
    int64_t y1[4] = {1, 1, B, H}, y1l[4] = {B, 1, 1, H}, hs[3] = {1, B, H}, hsl[3] = {B, 1, H};
    if (onnx_out_present(n, 0)) {
        for (int64_t t = 0; t < T; t++)
            ys[t] = mc_reshape(g, ys[t], layout ? y1l : y1, 4);
        if (!onnx_set_out(c, n, 0, T == 1 ? ys[0] : mc_concat(g, ys, (int)T, layout ? 1 : 0)))
            return false;
    }
    if (onnx_out_present(n, 1) && !onnx_set_out(c, n, 1, mc_reshape(g, Ht, layout ? hsl : hs, 3)))
        return false;
    if (G == 4 && onnx_out_present(n, 2) && !onnx_set_out(c, n, 2, mc_reshape(g, Ct, layout ? hsl : hs, 3)))
        return false;
    return true;
}

/* ---- convolution, pooling, padding (minic's conv, maxpool, avgpool, pad) ---------------------- */

/* The window of a Conv or pool over x's spatial axes: kernel (from kernel_shape, else `wk`),
 * strides, dilations, and the padding before and after each axis, auto_pad resolved. */
typedef struct window {
    int ns;                            /* spatial axes: 1 or 2 */
    int64_t k[2], stride[2], dil[2], begin[2], end[2];
} window;

/* An attribute list of `want` entries in [0, 2^20] (ints_of reads it), `def` each when absent. */
static bool list_attr(ctx *c, const node_t *n, const char *name, int64_t *out, int want, int64_t def)
{
    int count;
    bool given;
    if (!onnx_ints_of(c, n, n->n_input, name, out, &count, want, &given))
        return false;
    for (int i = 0; i < want && !given; i++)
        out[i] = def;
    if (given && count != want)
        return onnx_why(c, "%s has %d entries for %d spatial axes", name, count, want);
    for (int i = 0; i < want; i++)
        if (out[i] < 0 || out[i] > (1 << 20))
            return onnx_why(c, "%s entry %lld", name, (long long)out[i]);
    return true;
}

static bool get_window(ctx *c, const node_t *n, const mc_node *x, const int64_t *wk, window *w)
{
    w->ns = x->rank - 2;
    if (w->ns < 1 || w->ns > 2)
        return onnx_why(c, "%d spatial axes (minic's conv and pools take 1 or 2)", w->ns);
    int64_t pads[4];
    if (!list_attr(c, n, "kernel_shape", w->k, w->ns, 0) || !list_attr(c, n, "strides", w->stride, w->ns, 1) ||
        !list_attr(c, n, "dilations", w->dil, w->ns, 1) || !list_attr(c, n, "pads", pads, 2 * w->ns, 0))
        return false;
    for (int i = 0; i < w->ns; i++) {
        if (w->k[i] == 0 && wk)
            w->k[i] = wk[i];
        if (w->k[i] < 1 || w->stride[i] < 1 || w->dil[i] < 1)
            return onnx_why(c, "a kernel, stride or dilation below 1");
        w->begin[i] = pads[i];
        w->end[i] = pads[w->ns + i];
    }
    if (!onnx_attr_is(n, "auto_pad", "NOTSET", "NOTSET")) {
        bool valid = onnx_attr_is(n, "auto_pad", "NOTSET", "VALID"), lower = onnx_attr_is(n, "auto_pad", "NOTSET", "SAME_LOWER");
        if (!valid && !lower && !onnx_attr_is(n, "auto_pad", "NOTSET", "SAME_UPPER"))
            return onnx_why(c, "auto_pad is not NOTSET, VALID, SAME_UPPER or SAME_LOWER");
        for (int i = 0; i < w->ns; i++) {
            int64_t L = x->shape[2 + i], out = (L + w->stride[i] - 1) / w->stride[i];
            int64_t total = (out - 1) * w->stride[i] + (w->k[i] - 1) * w->dil[i] + 1 - L;
            if (valid || total < 0)
                total = 0;
            w->begin[i] = lower ? total - total / 2 : total / 2;
            w->end[i] = total - w->begin[i];
        }
    }
    return true;
}

/* x padded with `value` as the window says, where `always` or the padding is not the same on
 * both sides of an axis (minic's conv and pools pad symmetrically, and count what they pad as
 * outside the input); `sym` gets the padding left for them. */
static mc_value pad_window(ctx *c, mc_value x, const window *w, double value, bool always, int64_t *sym)
{
    const mc_node *xn = onnx_vnode(c, x);
    bool even = !always;
    for (int i = 0; i < w->ns; i++)
        even = even && w->begin[i] == w->end[i];
    for (int i = 0; i < w->ns; i++)
        sym[i] = even ? w->begin[i] : 0;
    if (even)
        return x;
    int64_t pads[2 * MC_MAX_RANK] = {0};
    for (int i = 0; i < w->ns; i++) {
        pads[2 + i] = w->begin[i];
        pads[xn->rank + 2 + i] = w->end[i];
    }
    return mc_pad(c->g, x, pads, 2 * xn->rank, value);
}

static bool op_conv(ctx *c, const node_t *n)
{
    VAL(x, 0);
    VAL(wt, 1);
    mc_value b = MC_NONE;
    if (onnx_has_in(n, 2)) {
        VAL(bias, 2);
        b = bias;
    }
    const mc_node *wn = onnx_vnode(c, wt);
    if (wn->rank < 3)
        return onnx_why(c, "a weight of rank %d", wn->rank);
    window w;
    if (!get_window(c, n, onnx_vnode(c, x), wn->shape + 2, &w))
        return false;
    int64_t sym[2];
    mc_value xp = pad_window(c, x, &w, 0, false, sym);
    if (xp < 0)
        return onnx_set_out(c, n, 0, xp);
    return onnx_set_out(c, n, 0, mc_conv(c->g, xp, wt, b, w.stride, sym, w.dil, w.ns, onnx_attr_i(n, "group", 1)));
}

/* x padded along its spatial axes: begin[i] before and end[i] after axis 2 + i */
static mc_value pad_spatial(ctx *c, mc_value x, int ns, const int64_t *begin, const int64_t *end, double value)
{
    int rank = onnx_vnode(c, x)->rank;
    int64_t pads[2 * MC_MAX_RANK] = {0};
    for (int i = 0; i < ns; i++) {
        pads[2 + i] = begin[i];
        pads[rank + 2 + i] = end[i];
    }
    return mc_pad(c->g, x, pads, 2 * rank, value);
}

/* MaxPool and AveragePool. minic's pools pad evenly, at most half the kernel, and an average
 * counts only the input's elements; anything else pads first: with -inf for a max; for an
 * average with zeros, divided by the same pool of a 0/1 mask of what counts (the input, or with
 * count_include_pad the input and its explicit padding). ceil_mode adds padding at the end for
 * the last window that starts inside the input or its padding (never counted). */
static bool op_pool(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    bool max = !strcmp(n->op_type, "MaxPool");
    if (onnx_out_present(n, 1))
        return onnx_why(c, "the Indices output");
    VAL(x, 0);
    const mc_node *xn = onnx_vnode(c, x);
    window w;
    if (!get_window(c, n, xn, NULL, &w))
        return false;
    bool include = !max && onnx_attr_i(n, "count_include_pad", 0);
    bool native = !include;
    int64_t extra[2] = {0, 0}, end[2], zero[2] = {0, 0};
    for (int i = 0; i < w.ns; i++) {
        if (w.dil[i] != 1)
            return onnx_why(c, "dilations other than 1 in a pool");
        if (onnx_attr_i(n, "ceil_mode", 0)) {
            int64_t L = xn->shape[2 + i], span = L + w.begin[i] + w.end[i] - w.k[i];
            if (span < 0)
                return onnx_why(c, "a kernel larger than the padded input");
            int64_t out = (span + w.stride[i] - 1) / w.stride[i] + 1;
            if ((out - 1) * w.stride[i] >= L + w.begin[i])
                out--;
            extra[i] = (out - 1) * w.stride[i] + w.k[i] - (L + w.begin[i] + w.end[i]);
            if (extra[i] < 0)
                extra[i] = 0;
        }
        end[i] = w.end[i] + extra[i];
        native = native && !extra[i] && w.begin[i] == w.end[i] && 2 * w.begin[i] <= w.k[i];
    }
    if (native) {
        mc_value y = max ? mc_maxpool(g, x, w.k, w.stride, w.begin, w.ns) : mc_avgpool(g, x, w.k, w.stride, w.begin, w.ns);
        return onnx_set_out(c, n, 0, y);
    }
    mc_value xp = pad_spatial(c, x, w.ns, w.begin, end, max ? -INFINITY : 0);
    if (max)
        return onnx_set_out(c, n, 0, mc_maxpool(g, xp, w.k, w.stride, zero, w.ns));
    mc_value sum = mc_avgpool(g, xp, w.k, w.stride, zero, w.ns);
    if (include && !extra[0] && !extra[1])
        return onnx_set_out(c, n, 0, sum); /* every window lies in the input and its padding */
    int64_t one[MC_MAX_RANK] = {1, 1, 1, 1};
    for (int i = 0; i < w.ns; i++)
        one[2 + i] = xn->shape[2 + i] + (include ? w.begin[i] + w.end[i] : 0);
    mc_value ones = mc_full(g, one, xn->rank, 1, xn->dtype);
    mc_value mask = include ? pad_spatial(c, ones, w.ns, zero, extra, 0) : pad_spatial(c, ones, w.ns, w.begin, end, 0);
    return onnx_set_out(c, n, 0, mc_div(g, sum, mc_avgpool(g, mask, w.k, w.stride, zero, w.ns)));
}

/* ---- the table ---------------------------------------------------------------------------- */

const onnx_op onnx_nn_ops[] = {
    {"MatMul", op_matmul}, {"Gemm", op_gemm}, {"Softmax", op_softmax}, {"LogSoftmax", op_softmax},
    {"LayerNormalization", op_layernorm}, {"BatchNormalization", op_batchnorm},
    {"InstanceNormalization", op_instance_norm}, {"NegativeLogLikelihoodLoss", op_loss},
    {"SoftmaxCrossEntropyLoss", op_loss}, {"MeanVarianceNormalization", op_mvn},
    {"Einsum", op_einsum}, {"Resize", op_resize}, {"Upsample", op_resize}, {"LRN", op_lrn},
    {"RNN", op_rnn}, {"GRU", op_rnn}, {"LSTM", op_rnn}, {"Conv", op_conv}, {"MaxPool", op_pool},
    {"AveragePool", op_pool},
    {NULL, NULL},
};

#endif /* MINIC_HAVE_ONNX */
