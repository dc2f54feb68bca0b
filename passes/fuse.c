/* Fusion: which nodes are computed together, in which kernel, and what is written to memory.
 *
 * Requires: a decomposed graph (primitives, shape operators, matmul). Produces an mc_fusion:
 * every live node is a leaf (input/param buffer), a constant (inlined), a view (a shape operator
 * read through strides of some buffer) or a member of a group; a group becomes one kernel (a
 * concat one per operand).
 *
 * The walk goes from the outputs back (reverse topological order), so when a node is decided all
 * its users already are. A node joins the group of its users when they are all in one group
 * ("inline": it is recomputed wherever the group needs it and never stored); a node with users
 * in several groups, or that is a graph output, is stored: either by one of its users' groups
 * (when it sits there at the group's own coordinates and no cycle appears) or by a group of its
 * own. Every group has a coordinate space; each member knows the coordinate maps (mc_cmap) at
 * which the group evaluates it, derived from its users' maps through broadcasting and shape
 * operators, so a transpose, slice or expand inside a group is index arithmetic, never a copy.
 *
 * Legality lives in one function, can_join(): pointwise nodes and mappable shape operators join
 * any group; a reduction joins a group whose space is its input and which reads its result at
 * the natural row coordinates (softmax and layernorm become one kernel; their prologue is
 * recomputed per loop); a matmul joins a group without a GEMM or reduction that reads it at the
 * group's own coordinates (the group is then its epilogue); a GEMM operand is never computed in
 * the GEMM's kernel: it must be a view of a buffer (require_view), so a transposed weight is
 * strides, and a value that is not is stored first. A gather joins like pointwise work (its
 * indices are read at an affine map, so an embedding lookup, a position embedding and their
 * add are one kernel); its table, like a GEMM operand, is a view of a buffer; it stays out of
 * GEMM epilogues. An allreduce is a barrier: a group of its own (MC_FG_COLLECTIVE) that
 * nothing joins and that joins nothing, reading its operand from a buffer stored contiguously
 * (a collective library sends whole buffers) and writing one of its own. A node marked
 * `materialize` (passes/fold.c's folded weights) never joins its users' group: it anchors its
 * own, so work over params is done once, not per element of its users. With fusion off, every
 * compute node starts its own group and shape operators are still views where strides allow.
 */
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>

#define MAX_MAPS 8
/* The most nodes one group may hold. Lowering evaluates a group's members recursively and
 * memoizes them in a list, so an unbounded group (a chain of 200k adds fuses into one) would
 * overflow the stack and take quadratic time; a long chain becomes several kernels instead. */
#define MC_FUSE_MAX_MEMBERS 256

/* ---- the walk ------------------------------------------------------------------------------ */

typedef struct {
    mc_fusion *f;
    const mc_graph *g;
    bool fuse;
    int *attention_of;       /* per node: the attention chain it is computed in, or -1 */
    int *user_start, *users; /* CSR: users of node i are users[user_start[i] .. user_start[i+1]) */
    bool *is_output, *live;
    int *next_member;        /* per node: the next member of its group (a list per group) */
    int *first_member;       /* per group */
    int *mark;               /* scratch for the cycle check */
    int mark_gen;
} walk;

static bool is_shape(const mc_node *n) { return mc_op_table[n->op].kind == MC_KIND_SHAPE && n->op != MC_OP_CONCAT; }

static bool is_pointwise(const mc_node *n)
{
    switch (mc_op_table[n->op].kind) {
    case MC_KIND_UNARY:
    case MC_KIND_BINARY:
    case MC_KIND_COMPARE:
    case MC_KIND_SELECT:
    case MC_KIND_CAST:
    case MC_KIND_CREATE: return true;
    case MC_KIND_LEAF: case MC_KIND_REDUCE: case MC_KIND_NORM: case MC_KIND_MATMUL:
    case MC_KIND_SHAPE: case MC_KIND_SPATIAL: case MC_KIND_GATHER: case MC_KIND_COLLECTIVE:
        break;
    }
    return false;
}

/* A cumsum is a scan: a reduction along its axis whose result has its operand's shape, each
 * element the running sum up to it (kir/kir.h). */
static bool is_scan(const mc_node *n) { return n->op == MC_OP_CUMSUM; }

static void reduced_axes(const mc_node *r, const mc_node *x, bool *reduced)
{
    if (is_scan(r)) {
        for (int d = 0; d < MC_MAX_RANK; d++)
            reduced[d] = d == r->attr.axis;
        return;
    }
    for (int d = 0; d < MC_MAX_RANK; d++)
        reduced[d] = d < x->rank && !r->attr.has_list;
    for (int i = 0; r->attr.has_list && i < r->attr.nlist; i++)
        reduced[r->attr.list[i]] = true;
}

/* The map at which a reduction's result is read when its input is at the group's identity. */
static void natural_map(const mc_node *r, const mc_node *x, mc_cmap *m)
{
    if (is_scan(r)) { /* element by element, where its operand is */
        mc_cmap_identity(m, x->rank);
        return;
    }
    bool reduced[MC_MAX_RANK];
    reduced_axes(r, x, reduced);
    memset(m, 0, sizeof *m);
    m->rank = r->rank;
    int o = 0;
    for (int d = 0; d < x->rank; d++) {
        if (reduced[d]) {
            if (r->attr.keepdim)
                o++;
            continue;
        }
        m->coef[o++][d] = 1;
    }
}

static bool same_shape(const int64_t *a, int ra, const int64_t *b, int rb)
{
    return ra == rb && memcmp(a, b, sizeof(int64_t) * (size_t)ra) == 0;
}

/* The coordinates at which a stored member of shape (rank, shape) must sit in group G: the
 * group's own (identity), or the natural row coordinates of its reductions. */
static bool canonical_map(const mc_fgroup *G, const mc_node *n, mc_cmap *m)
{
    if (same_shape(n->shape, n->rank, G->shape, G->rank)) {
        mc_cmap_identity(m, G->rank);
        return true;
    }
    if (G->nred == 0 || G->scan) /* a scan group stores element values only */
        return false;
    for (int keep = 0; keep < 2; keep++) {
        mc_node r;
        memset(&r, 0, sizeof r);
        mc_node x;
        memset(&x, 0, sizeof x);
        x.rank = G->rank;
        memcpy(x.shape, G->shape, sizeof x.shape);
        r.attr.has_list = true;
        for (int d = 0; d < G->rank; d++)
            if (G->reduced[d])
                r.attr.list[r.attr.nlist++] = d;
        r.attr.keepdim = keep;
        r.rank = 0;
        for (int d = 0; d < G->rank; d++) {
            if (!G->reduced[d])
                r.shape[r.rank++] = G->shape[d];
            else if (keep)
                r.shape[r.rank++] = 1;
        }
        if (same_shape(n->shape, n->rank, r.shape, r.rank)) {
            natural_map(&r, &x, m);
            return true;
        }
    }
    return false;
}

static mc_fgroup *new_group(walk *w, mc_fgroup_kind kind, int anchor)
{
    mc_fusion *f = w->f;
    if (f->ngroups == f->cap) {
        int cap = f->cap ? f->cap * 2 : 16;
        mc_fgroup *g = realloc(f->groups, sizeof *g * (size_t)cap);
        int *fm = realloc(w->first_member, sizeof *fm * (size_t)cap);
        if (fm)
            w->first_member = fm;
        if (!g || !fm) {
            if (g)
                f->groups = g;
            return NULL;
        }
        f->groups = g;
        f->cap = cap;
    }
    mc_fgroup *G = &f->groups[f->ngroups];
    memset(G, 0, sizeof *G);
    G->kind = kind;
    G->anchor = anchor;
    G->gemm = -1;
    G->out_index = -1;
    w->first_member[f->ngroups] = -1;
    f->ngroups++;
    return G;
}

static bool set_maps(walk *w, int i, const mc_cmap *maps, int n)
{
    mc_fnode *fn = &w->f->nodes[i];
    fn->nmaps = n;
    fn->maps = NULL;
    if (n == 0)
        return true;
    fn->maps = mc_arena_alloc(&w->f->arena, sizeof *maps * (size_t)n);
    if (!fn->maps)
        return false;
    memcpy(fn->maps, maps, sizeof *maps * (size_t)n);
    return true;
}

static void add_member(walk *w, int i, int group, bool stored)
{
    mc_fnode *fn = &w->f->nodes[i];
    fn->kind = MC_FN_MEMBER;
    fn->group = group;
    fn->stored = stored;
    w->f->groups[group].nmembers++;
    if (stored) {
        fn->has_view = true;
        memset(&fn->view, 0, sizeof fn->view);
        fn->view.base = i;
        const mc_node *n = &w->g->nodes[i];
        mc_contiguous_strides(w->g, n->shape, n->rank, fn->view.stride);
    }
    w->next_member[i] = w->first_member[group];
    w->first_member[group] = i;
}

/* Make node j readable through a strided view of some buffer (a GEMM operand, the operand of a
 * reshape that needs strides): shape operators compose their operand's view; anything else, or
 * a shape operator whose strides do not compose, is forced to be stored (contiguously). */
static void require_view(walk *w, int j)
{
    mc_fnode *fn = &w->f->nodes[j];
    if (fn->has_view)
        return;
    const mc_node *n = &w->g->nodes[j];
    if (is_shape(n) && !fn->forced) {
        require_view(w, n->in[0]);
        const mc_fnode *op = &w->f->nodes[n->in[0]];
        if (op->has_view && mc_tview_compose(w->g, j, &op->view, &fn->view)) {
            fn->has_view = true;
            fn->kind = MC_FN_VIEW;
            return;
        }
    }
    fn->forced = true;
    fn->has_view = true;
    memset(&fn->view, 0, sizeof fn->view);
    fn->view.base = j;
    mc_contiguous_strides(w->g, n->shape, n->rank, fn->view.stride);
}

/* Make node j a buffer of its own, contiguous over its shape (an allreduce's operand): as
 * require_view, but a shape operator is stored rather than read through strides. A node that
 * another reader already made a view keeps it (the view is then checked where it is lowered). */
static void require_buffer(walk *w, int j)
{
    mc_fnode *fn = &w->f->nodes[j];
    if (fn->has_view)
        return;
    const mc_node *n = &w->g->nodes[j];
    fn->forced = true;
    fn->has_view = true;
    memset(&fn->view, 0, sizeof fn->view);
    fn->view.base = j;
    mc_contiguous_strides(w->g, n->shape, n->rank, fn->view.stride);
}

/* Would storing node i in group G create a cycle between groups? True when a path leaves i
 * through a user outside G and comes back into G (through any groups). */
static bool creates_cycle(walk *w, int i, int group)
{
    mc_fusion *f = w->f;
    int n = w->g->nnodes;
    int *stack = malloc(sizeof *stack * (size_t)(n > 0 ? n : 1) * 2);
    if (!stack)
        return true; /* refuse rather than risk it */
    int gen = ++w->mark_gen, top = 0;
    for (int u = w->user_start[i]; u < w->user_start[i + 1]; u++) {
        int x = w->users[u];
        if (!(f->nodes[x].kind == MC_FN_MEMBER && f->nodes[x].group == group) && w->mark[x] != gen) {
            w->mark[x] = gen;
            stack[top++] = x;
        }
    }
    bool cycle = false;
    while (top > 0 && !cycle) {
        int x = stack[--top];
        const mc_fnode *fx = &f->nodes[x];
        if (fx->kind == MC_FN_MEMBER && fx->group == group) {
            cycle = true;
            break;
        }
        for (int u = w->user_start[x]; u < w->user_start[x + 1] && top < 2 * n; u++) {
            int y = w->users[u];
            if (w->mark[y] != gen) {
                w->mark[y] = gen;
                stack[top++] = y;
            }
        }
        if (fx->kind == MC_FN_MEMBER)
            for (int y = w->first_member[fx->group]; y >= 0 && top < 2 * n; y = w->next_member[y])
                if (w->mark[y] != gen) {
                    w->mark[y] = gen;
                    stack[top++] = y;
                }
    }
    free(stack);
    return cycle;
}

/* The one legality check: may node i join group `group`, inline or stored? On success the maps
 * at which the group evaluates it are in maps[0..*nmaps). */
/* Whether maps a and b read the same coordinates at every point of G's space. A dimension of
 * size 1 has the one coordinate 0, so what multiplies it does not matter: broadcasting gives
 * such a dimension a zero coefficient where the identity has 1 (a matmul of one row, [1, N],
 * read by its bias add as [1, N]: a decoder step's linear layers, whose bias then stayed a
 * kernel of its own). A reduced (or scanned) dimension, `reduced` (or NULL), is compared even
 * at size 1: lowering tells row values from loop values by the coefficients there (a cumsum over
 * an axis of 1 read at row scope failed its assertion). */
static bool same_on_space(const mc_cmap *a, const mc_cmap *b, const mc_fgroup *G, const bool *reduced)
{
    if (a->rank != b->rank)
        return false;
    for (int d = 0; d < a->rank; d++) {
        if (a->off[d] != b->off[d])
            return false;
        for (int j = 0; j < G->rank; j++)
            if ((G->shape[j] != 1 || (reduced && reduced[j])) && a->coef[d][j] != b->coef[d][j])
                return false;
    }
    return true;
}

static bool can_join(walk *w, int i, int group, bool stored, mc_cmap *maps, int *nmaps)
{
    const mc_graph *g = w->g;
    const mc_fusion *f = w->f;
    const mc_fgroup *G = &f->groups[group];
    const mc_node *n = &g->nodes[i];
    if (G->kind != MC_FG_POINTWISE && !(G->kind == MC_FG_RESHAPE && !stored))
        return false;
    if (G->nmembers >= MC_FUSE_MAX_MEMBERS)
        return false;
    /* The maps: every use of i by a member of G, at every map of that member. */
    int count = 0;
    for (int u = w->user_start[i]; u < w->user_start[i + 1]; u++) {
        int user = w->users[u];
        const mc_fnode *fu = &f->nodes[user];
        if (fu->kind != MC_FN_MEMBER || fu->group != group)
            continue;
        const mc_node *un = &g->nodes[user];
        if (user == G->gemm)
            return false; /* an operand of the GEMM itself: a view, never computed here */
        bool reshape_anchor = G->kind == MC_FG_RESHAPE && user == G->anchor;
        for (int slot = 0; slot < un->nin; slot++) {
            if (un->in[slot] != i)
                continue;
            for (int k = 0; k < (reshape_anchor ? 1 : fu->nmaps); k++) {
                mc_cmap om;
                if (mc_op_table[un->op].kind == MC_KIND_REDUCE || is_scan(un) || reshape_anchor)
                    mc_cmap_identity(&om, G->rank);
                else if (!mc_cmap_operand(g, user, slot, &fu->maps[k], &om))
                    return false;
                bool dup = false;
                for (int j = 0; j < count && !dup; j++)
                    dup = mc_cmap_equal(&maps[j], &om);
                if (dup)
                    continue;
                if (count == MAX_MAPS)
                    return false; /* too much recomputation */
                maps[count++] = om;
            }
        }
    }
    if (count == 0)
        return false;
    *nmaps = count;
    mc_op_kind kind = mc_op_table[n->op].kind;
    if (is_shape(n)) {
        for (int k = 0; k < count; k++) {
            mc_cmap om;
            if (!mc_cmap_operand(g, i, 0, &maps[k], &om))
                return false;
        }
    } else if (kind == MC_KIND_MATMUL) {
        if (G->kind != MC_FG_POINTWISE || G->gemm >= 0 || G->nred > 0 || G->gathers > 0 || count != 1 ||
            !same_shape(n->shape, n->rank, G->shape, G->rank))
            return false;
        mc_cmap id;
        mc_cmap_identity(&id, G->rank);
        if (!same_on_space(&maps[0], &id, G, NULL)) /* G has no reduction (above) */
            return false;
        maps[0] = id; /* the same points: the GEMM is lowered at the identity */
    } else if (kind == MC_KIND_REDUCE || is_scan(n)) {
        const mc_node *x = &g->nodes[n->in[0]];
        if (G->kind != MC_FG_POINTWISE || G->gemm >= 0 || !same_shape(x->shape, x->rank, G->shape, G->rank))
            return false;
        /* a scan's running value exists only at the element being walked: it shares its kernel
         * with no other reduction, and is read at its own coordinates (natural_map) */
        if (G->scan || (is_scan(n) && G->nred > 0))
            return false;
        bool reduced[MC_MAX_RANK];
        reduced_axes(n, x, reduced);
        if (G->nred > 0 && memcmp(reduced, G->reduced, sizeof reduced) != 0)
            return false;
        mc_cmap nat;
        natural_map(n, x, &nat);
        for (int k = 0; k < count; k++)
            if (!same_on_space(&maps[k], &nat, G, reduced))
                return false;
    } else if (n->op == MC_OP_GATHER) {
        /* a data-dependent load joins like pointwise work (its x is a view, require_view),
         * but not a GEMM's epilogue, whose renderers know only loads through views */
        if (G->gemm >= 0)
            return false;
    } else if (!is_pointwise(n) && n->op != MC_OP_CONST) {
        return false;
    }
    if (stored) {
        mc_cmap canon;
        if (count != 1)
            return false;
        if (kind == MC_KIND_REDUCE || is_scan(n)) {
            /* checked above: the natural map */
        } else if (!canonical_map(G, n, &canon) ||
                   !same_on_space(&canon, &maps[0], G, G->nred > 0 ? G->reduced : NULL)) {
            return false;
        }
        if (creates_cycle(w, i, group))
            return false;
    }
    return true;
}

static void join(walk *w, int i, int group, bool stored, const mc_cmap *maps, int nmaps)
{
    mc_fgroup *G = &w->f->groups[group];
    const mc_node *n = &w->g->nodes[i];
    add_member(w, i, group, stored);
    set_maps(w, i, maps, nmaps);
    if (n->op == MC_OP_MATMUL)
        G->gemm = i;
    if (n->op == MC_OP_GATHER)
        G->gathers++;
    if (mc_op_table[n->op].kind == MC_KIND_REDUCE || is_scan(n)) {
        reduced_axes(n, &w->g->nodes[n->in[0]], G->reduced);
        G->nred++;
        G->scan = is_scan(n);
    }
}

/* Start a group of its own at node i (stored). */
static mc_status anchor(walk *w, int i)
{
    const mc_node *n = &w->g->nodes[i];
    mc_fgroup_kind kind = MC_FG_POINTWISE;
    mc_cmap id;
    mc_cmap_identity(&id, n->rank);
    if (n->op == MC_OP_ALLREDUCE) {
        kind = MC_FG_COLLECTIVE;
    } else if (n->op == MC_OP_CONCAT) {
        kind = MC_FG_CONCAT;
    } else if (is_shape(n)) {
        mc_cmap om;
        if (!mc_cmap_operand(w->g, i, 0, &id, &om))
            kind = MC_FG_RESHAPE;
    }
    mc_fgroup *G = new_group(w, kind, i);
    if (!G)
        return mc_fail(MC_ERR_SYSTEM, "out of memory fusing the graph");
    int gi = w->f->ngroups - 1;
    const mc_node *x = n->nin > 0 ? &w->g->nodes[n->in[0]] : NULL;
    if (kind == MC_FG_RESHAPE) {
        G->rank = x->rank;
        memcpy(G->shape, x->shape, sizeof G->shape);
        add_member(w, i, gi, true);
        return MC_OK;
    }
    G->rank = n->rank;
    memcpy(G->shape, n->shape, sizeof G->shape);
    if (mc_op_table[n->op].kind == MC_KIND_REDUCE || is_scan(n)) {
        G->rank = x->rank;
        memcpy(G->shape, x->shape, sizeof G->shape);
        natural_map(n, x, &id);
    }
    add_member(w, i, gi, true);
    if (kind == MC_FG_CONCAT)
        return MC_OK;
    if (!set_maps(w, i, &id, 1))
        return mc_fail(MC_ERR_SYSTEM, "out of memory fusing the graph");
    if (n->op == MC_OP_MATMUL)
        G->gemm = i;
    if (n->op == MC_OP_GATHER)
        G->gathers++;
    if (mc_op_table[n->op].kind == MC_KIND_REDUCE || is_scan(n)) {
        reduced_axes(n, x, G->reduced);
        G->nred = 1;
        G->scan = is_scan(n);
    }
    return MC_OK;
}

/* An attention chain (passes/attention.c) becomes one group, anchored at its second matmul and
 * stored by it; the rest of the chain is computed inside and never stored, and the kernel reads
 * q, k, v and the mask tensors through views, as a GEMM reads its operands. */
static mc_status anchor_attention(walk *w, int index)
{
    const mc_attention *at = &w->f->attention[index];
    const mc_node *pv = &w->g->nodes[at->pv];
    mc_fgroup *G = new_group(w, MC_FG_ATTENTION, at->pv);
    if (!G)
        return mc_fail(MC_ERR_SYSTEM, "out of memory fusing the graph");
    int gi = w->f->ngroups - 1;
    G->rank = pv->rank;
    memcpy(G->shape, pv->shape, sizeof G->shape);
    G->attention = index;
    mc_cmap id;
    mc_cmap_identity(&id, pv->rank);
    add_member(w, at->pv, gi, true);
    if (!set_maps(w, at->pv, &id, 1))
        return mc_fail(MC_ERR_SYSTEM, "out of memory fusing the graph");
    for (int m = 0; m < at->nmembers; m++)
        if (at->members[m] != at->pv)
            add_member(w, at->members[m], gi, false);
    require_view(w, at->q);
    require_view(w, at->kt);
    require_view(w, at->v);
    for (int s = 0; s < at->nsteps; s++)
        if (at->step_node[s] >= 0)
            require_view(w, at->step_node[s]);
    return MC_OK;
}

/* Is pointwise node i the end of a single-use pointwise chain over a matmul (a GEMM's
 * epilogue in waiting)? Such a node is better stored by the GEMM's kernel than recomputed in
 * every loop of a reduction that reads it. */
static bool gemm_epilogue_candidate(walk *w, int i, int depth)
{
    const mc_node *n = &w->g->nodes[i];
    if (!is_pointwise(n) || depth > 8)
        return false;
    for (int k = 0; k < n->nin; k++) {
        int x = n->in[k];
        if (x < 0 || w->f->nodes[x].forced)
            continue;
        int live_users = 0;
        for (int u = w->user_start[x]; u < w->user_start[x + 1]; u++)
            live_users += w->live[w->users[u]];
        if (live_users != 1)
            continue;
        if (w->g->nodes[x].op == MC_OP_MATMUL || gemm_epilogue_candidate(w, x, depth + 1))
            return true;
    }
    return false;
}

/* Is group gi so far only a graph output that reshapes node i to another shape? */
static bool output_reshape_of(const walk *w, int i, int gi)
{
    const mc_fgroup *G = &w->f->groups[gi];
    const mc_node *s = &w->g->nodes[G->anchor];
    return G->kind == MC_FG_POINTWISE && G->nmembers == 1 && s->op == MC_OP_RESHAPE && s->in[0] == i &&
           w->is_output[G->anchor] && !same_shape(s->shape, s->rank, w->g->nodes[i].shape, w->g->nodes[i].rank);
}

/* Decide node i (all its users are decided). */
static mc_status decide(walk *w, int i)
{
    const mc_graph *g = w->g;
    mc_fnode *fn = &w->f->nodes[i];
    const mc_node *n = &g->nodes[i];
    if (n->op == MC_OP_INPUT || n->op == MC_OP_PARAM) {
        fn->kind = MC_FN_LEAF;
        fn->has_view = true;
        fn->view.base = i;
        mc_contiguous_strides(w->g, n->shape, n->rank, fn->view.stride);
        return MC_OK;
    }
    if (!w->live[i])
        return MC_OK;
    if (fn->kind == MC_FN_VIEW)
        return MC_OK; /* a consumer already made it a view */
    if (w->attention_of[i] >= 0)
        return w->f->attention[w->attention_of[i]].pv == i ? anchor_attention(w, w->attention_of[i])
                                                             : MC_OK; /* joined with its anchor */
    if (n->op == MC_OP_CONST && !fn->forced) {
        fn->kind = MC_FN_CONST;
        return MC_OK;
    }
    if (n->op == MC_OP_MATMUL) {
        require_view(w, n->in[0]);
        require_view(w, n->in[1]);
    }
    if (n->op == MC_OP_GATHER)
        require_view(w, n->in[0]); /* the table is read through strides, never computed here */
    if (n->op == MC_OP_CONCAT) {
        for (int k = 0; k < n->nin; k++)
            require_view(w, n->in[k]);
        return anchor(w, i);
    }
    if (n->op == MC_OP_ALLREDUCE) {
        require_buffer(w, n->in[0]);
        return anchor(w, i);
    }
    if (!fn->forced && w->fuse && !n->materialize) {
        /* The groups of the users; a user that is not a member (a view of i) forces i. */
        int groups[64], ng = 0;
        bool ok = true;
        for (int u = w->user_start[i]; u < w->user_start[i + 1] && ok; u++) {
            if (!w->live[w->users[u]])
                continue;
            const mc_fnode *fu = &w->f->nodes[w->users[u]];
            if (fu->kind != MC_FN_MEMBER) {
                ok = false;
                break;
            }
            bool seen = false;
            for (int k = 0; k < ng; k++)
                seen |= groups[k] == fu->group;
            if (!seen) {
                if (ng == 64)
                    ok = false;
                else
                    groups[ng++] = fu->group;
            }
        }
        /* A GEMM epilogue stays with its GEMM rather than joining a reduction, or the reshape
         * of it that is a graph output (a conv's [N, C, H*W] seen as [N, C, H, W]): that one's
         * copy is then elided (elide_copies), the GEMM's kernel storing into the output. */
        if (ok && ng >= 1 && w->f->groups[groups[0]].nred > 0 && gemm_epilogue_candidate(w, i, 0))
            ok = false;
        if (ok && ng == 1 && output_reshape_of(w, i, groups[0]) &&
            (n->op == MC_OP_MATMUL || gemm_epilogue_candidate(w, i, 0)))
            ok = false;
        mc_cmap maps[MAX_MAPS];
        int nmaps = 0;
        if (ok && ng == 1 && !w->is_output[i] && can_join(w, i, groups[0], false, maps, &nmaps)) {
            join(w, i, groups[0], false, maps, nmaps);
            return MC_OK;
        }
        if (ok && !is_shape(n))
            for (int k = 0; k < ng; k++)
                if (can_join(w, i, groups[k], true, maps, &nmaps)) {
                    join(w, i, groups[k], true, maps, nmaps);
                    return MC_OK;
                }
    }
    if (is_shape(n) && !fn->forced && !w->is_output[i]) {
        require_view(w, i);
        if (fn->kind == MC_FN_VIEW)
            return MC_OK;
    }
    return anchor(w, i);
}

/* ---- copies stored straight into place ------------------------------------------------------ */

static int live_users(const walk *w, int i, int *only)
{
    int n = 0;
    for (int u = w->user_start[i]; u < w->user_start[i + 1]; u++)
        if (w->live[w->users[u]]) {
            n++;
            *only = w->users[u];
        }
    return n;
}

/* A group that only moves data (a reshape that is not a view, a transpose made contiguous for
 * a GEMM operand) of a value that nothing else reads: the value's own kernel can store it
 * straight into the copy's buffer through the inverse of the shape operators, and the copy
 * disappears. This is how the attention output's transpose+reshape costs nothing. */
static void elide_copies(walk *w)
{
    mc_fusion *f = w->f;
    const mc_graph *g = w->g;
    for (int gi = 0; gi < f->ngroups; gi++) {
        mc_fgroup *G = &f->groups[gi];
        int s = G->anchor;
        if ((G->kind != MC_FG_RESHAPE && G->kind != MC_FG_POINTWISE) || !is_shape(&g->nodes[s]))
            continue;
        bool only_shapes = true;
        for (int m = w->first_member[gi]; m >= 0; m = w->next_member[m])
            only_shapes = only_shapes && is_shape(&g->nodes[m]);
        if (!only_shapes)
            continue;
        /* Walk down from the anchor, inverting each step into a view of the anchor's buffer. */
        mc_tview v;
        memset(&v, 0, sizeof v);
        v.base = s;
        mc_contiguous_strides(g, g->nodes[s].shape, g->nodes[s].rank, v.stride);
        int x = s;
        bool ok = true;
        while (ok && is_shape(&g->nodes[x])) {
            const mc_node *n = &g->nodes[x];
            mc_tview inv;
            ok = mc_tview_invert(g, x, &v, &inv);
            int user = -1;
            if (ok && x != s)
                ok = live_users(w, x, &user) == 1;
            v = inv;
            x = n->in[0];
        }
        mc_fnode *src = &f->nodes[x];
        int user = -1;
        /* an output reshape only of a GEMM's kernel (decide() kept its epilogue out of it) */
        if (!ok || src->kind != MC_FN_MEMBER || !src->stored || src->group == gi || w->is_output[x] ||
            live_users(w, x, &user) != 1 ||
            (f->groups[src->group].kind != MC_FG_POINTWISE && f->groups[src->group].kind != MC_FG_ATTENTION) ||
            (w->is_output[s] && (f->groups[src->group].gemm < 0 || x != g->nodes[s].in[0])))
            continue;
        src->view = v;
        G->kind = MC_FG_ELIDED;
    }
}

/* ---- execution order ------------------------------------------------------------------------ */

/* The group that produces what node j's readers see, or -1 (leaf, constant). */
static int producer_group(const mc_fusion *f, int j)
{
    const mc_fnode *fn = &f->nodes[j];
    if (fn->kind == MC_FN_MEMBER)
        return fn->group;
    if (fn->kind == MC_FN_VIEW)
        return producer_group(f, fn->view.base);
    return -1;
}

static mc_status order_groups(walk *w)
{
    mc_fusion *f = w->f;
    const mc_graph *g = w->g;
    int ng = f->ngroups;
    /* Edges as a dense-ish list: for every member, every operand's producer group. */
    int *indeg = calloc((size_t)ng + 1, sizeof *indeg);
    int *estart = calloc((size_t)ng + 2, sizeof *estart);
    f->order = mc_arena_alloc(&f->arena, sizeof *f->order * (size_t)(ng + 1));
    int nedges = 0;
    for (int i = 0; i < g->nnodes; i++)
        nedges += g->nodes[i].nin + 1;
    int *efrom = malloc(sizeof *efrom * (size_t)(nedges + 1)), *eto = malloc(sizeof *eto * (size_t)(nedges + 1));
    int *adj = malloc(sizeof *adj * (size_t)(nedges + 1)), *queue = malloc(sizeof *queue * (size_t)(ng + 1));
    mc_status st = MC_OK;
    if (!indeg || !estart || !f->order || !efrom || !eto || !adj || !queue) {
        st = mc_fail(MC_ERR_SYSTEM, "out of memory fusing the graph");
        goto done;
    }
    int ne = 0;
    for (int i = 0; i < g->nnodes; i++) {
        const mc_fnode *fn = &f->nodes[i];
        if (fn->kind != MC_FN_MEMBER)
            continue;
        for (int k = 0; k < g->nodes[i].nin; k++) {
            if (g->nodes[i].in[k] < 0)
                continue;
            int p = producer_group(f, g->nodes[i].in[k]);
            if (p >= 0 && p != fn->group) {
                efrom[ne] = p;
                eto[ne++] = fn->group;
            }
        }
    }
    for (int gi = 0; gi < ng; gi++)
        if (f->groups[gi].kind == MC_FG_OUTPUT) {
            int p = producer_group(f, f->groups[gi].anchor);
            if (p >= 0) {
                efrom[ne] = p;
                eto[ne++] = gi;
            }
        }
    for (int e = 0; e < ne; e++) {
        estart[efrom[e] + 1]++;
        indeg[eto[e]]++;
    }
    for (int gi = 0; gi < ng; gi++)
        estart[gi + 1] += estart[gi];
    int *fill = calloc((size_t)ng + 1, sizeof *fill);
    if (!fill) {
        st = mc_fail(MC_ERR_SYSTEM, "out of memory fusing the graph");
        goto done;
    }
    for (int e = 0; e < ne; e++)
        adj[estart[efrom[e]] + fill[efrom[e]]++] = eto[e];
    free(fill);
    /* Kahn's algorithm, taking ready groups in the order of their anchors (graph order). */
    int head = 0, tail = 0, done_count = 0;
    for (int gi = ng - 1; gi >= 0; gi--)
        if (indeg[gi] == 0)
            queue[tail++] = gi;
    while (head < tail) {
        /* pick the ready group with the smallest anchor for a stable, readable order */
        int best = head;
        for (int q = head + 1; q < tail; q++)
            if (f->groups[queue[q]].anchor < f->groups[queue[best]].anchor ||
                (f->groups[queue[q]].anchor == f->groups[queue[best]].anchor && queue[q] < queue[best]))
                best = q;
        int gi = queue[best];
        queue[best] = queue[head++];
        f->order[done_count++] = gi;
        for (int e = estart[gi]; e < estart[gi + 1]; e++)
            if (--indeg[adj[e]] == 0)
                queue[tail++] = adj[e];
    }
    if (done_count != ng)
        st = mc_fail(MC_ERR_SYSTEM, "internal error: fusion made a cycle between kernels");
done:
    free(indeg);
    free(estart);
    free(efrom);
    free(eto);
    free(adj);
    free(queue);
    return st;
}

/* ---- entry -------------------------------------------------------------------------------- */

void mc_fusion_free(mc_fusion *f)
{
    free(f->groups);
    free(f->nodes);
    mc_arena_free(&f->arena);
    memset(f, 0, sizeof *f);
}

/* Liveness from the outputs back; a node of an attention chain keeps alive only what its
 * kernel reads (the chain, q, k, v, mask tensors), so a causal mask's iotas and compare, which
 * the kernel computes from its indices, are not computed at all unless something else needs
 * them. */
static void mark_live(walk *w)
{
    const mc_graph *g = w->g;
    for (int o = 0; o < g->noutputs; o++)
        w->live[g->outputs[o]] = true;
    for (int i = g->nnodes - 1; i >= 0; i--) {
        if (!w->live[i])
            continue;
        int a = w->attention_of[i];
        for (int k = 0; k < g->nodes[i].nin; k++) {
            int x = g->nodes[i].in[k];
            if (x < 0)
                continue;
            if (a >= 0 && w->attention_of[x] != a) {
                const mc_attention *at = &w->f->attention[a];
                bool read = x == at->q || x == at->kt || x == at->v;
                for (int s = 0; s < at->nsteps; s++)
                    read = read || x == at->step_node[s];
                if (!read)
                    continue;
            }
            w->live[x] = true;
        }
    }
}

/* The attention chains of g (when fusing), each member's chain in attention_of. */
static mc_status find_attention(walk *w, const mc_compile_options *opt)
{
    mc_fusion *f = w->f;
    for (int i = 0; i < w->g->nnodes; i++)
        w->attention_of[i] = -1;
    if (!opt->fuse || opt->no_attention)
        return MC_OK;
    mc_status st = mc_attention_find(w->g, w->user_start, w->users, w->is_output, &f->arena,
                                     &f->attention, &f->nattention, &f->notes, &f->nnotes);
    for (int a = 0; a < f->nattention && st == MC_OK; a++)
        for (int m = 0; m < f->attention[a].nmembers; m++)
            w->attention_of[f->attention[a].members[m]] = a;
    return st;
}

mc_status mc_fuse(const mc_graph *g, const mc_compile_options *opt, mc_fusion *f)
{
    bool fuse = opt->fuse;
    memset(f, 0, sizeof *f);
    f->g = g;
    int n = g->nnodes;
    size_t nn = (size_t)(n > 0 ? n : 1);
    walk w = {.f = f, .g = g, .fuse = fuse};
    f->nodes = calloc(nn, sizeof *f->nodes);
    w.user_start = calloc(nn + 1, sizeof *w.user_start);
    w.is_output = calloc(nn, sizeof *w.is_output);
    w.live = calloc(nn, sizeof *w.live);
    w.next_member = calloc(nn, sizeof *w.next_member);
    w.mark = calloc(nn, sizeof *w.mark);
    w.attention_of = calloc(nn, sizeof *w.attention_of);
    int nuse = 0;
    for (int i = 0; i < n; i++)
        nuse += g->nodes[i].nin;
    w.users = calloc((size_t)nuse + 1, sizeof *w.users);
    mc_status st = MC_OK;
    if (!f->nodes || !w.user_start || !w.is_output || !w.live || !w.next_member || !w.mark || !w.users ||
        !w.attention_of) {
        st = mc_fail(MC_ERR_SYSTEM, "out of memory fusing the graph");
        goto done;
    }
    for (int i = 0; i < n; i++)
        for (int k = 0; k < g->nodes[i].nin; k++)
            if (g->nodes[i].in[k] >= 0)
                w.user_start[g->nodes[i].in[k] + 1]++;
    for (int i = 0; i < n; i++)
        w.user_start[i + 1] += w.user_start[i];
    int *fill = calloc(nn, sizeof *fill);
    if (!fill) {
        st = mc_fail(MC_ERR_SYSTEM, "out of memory fusing the graph");
        goto done;
    }
    for (int i = 0; i < n; i++)
        for (int k = 0; k < g->nodes[i].nin; k++) {
            int x = g->nodes[i].in[k];
            if (x >= 0)
                w.users[w.user_start[x] + fill[x]++] = i;
        }
    free(fill);
    for (int o = 0; o < g->noutputs; o++)
        w.is_output[g->outputs[o]] = true;
    st = find_attention(&w, opt);
    if (st != MC_OK)
        goto done;
    mark_live(&w);
    for (int i = 0; i < n; i++)
        f->nodes[i].group = -1;
    for (int i = n - 1; i >= 0 && st == MC_OK; i--)
        st = decide(&w, i);
    if (st == MC_OK && fuse)
        elide_copies(&w);
    /* Outputs that no kernel writes (inputs, constants, views, a value listed twice) are
     * copied into buffers of their own. */
    bool *claimed = calloc(nn, sizeof *claimed);
    if (!claimed && st == MC_OK)
        st = mc_fail(MC_ERR_SYSTEM, "out of memory fusing the graph");
    for (int o = 0; o < g->noutputs && st == MC_OK; o++) {
        int x = g->outputs[o];
        const mc_fnode *fx = &f->nodes[x];
        if (fx->kind == MC_FN_MEMBER && fx->stored && !claimed[x]) {
            claimed[x] = true;
            continue;
        }
        mc_fgroup *G = new_group(&w, MC_FG_OUTPUT, x);
        if (!G) {
            st = mc_fail(MC_ERR_SYSTEM, "out of memory fusing the graph");
            break;
        }
        G->rank = g->nodes[x].rank;
        memcpy(G->shape, g->nodes[x].shape, sizeof G->shape);
        G->out_index = o;
    }
    free(claimed);
    if (st == MC_OK)
        st = order_groups(&w);
done:
    free(w.user_start);
    free(w.users);
    free(w.is_output);
    free(w.live);
    free(w.next_member);
    free(w.first_member);
    free(w.mark);
    free(w.attention_of);
    if (st != MC_OK)
        mc_fusion_free(f);
    return st;
}
