/* What a kernel's integer and boolean values are known to be before it runs (kir_facts).
 *
 * A gather's index is usually arithmetic on iotas: a padded pool's window position clamped
 * into the input, an im2col's row and column, a negative-step slice's reversed index. Its range
 * check, its division by a constant and its compares cost instructions at every point although
 * the index space already decides them: `(i2 * 56 + i3) / 56` is i2 when i3 < 56, and
 * `min(max(2 i2 - 1, 0), 111)` with i2 < 56 never reaches the `min`. So each i32 or bool
 * instruction gets an interval [lo, hi] holding every value it takes at any point of the index
 * space, and, where it is known, an earlier instruction whose value is always the same
 * (`same`). A backend may then leave out what they make useless (cuda_render.c: a gather check
 * that cannot fail, a compare that is decided, a clamp that never clamps); it must keep what
 * they do not decide.
 *
 * Two readings make the intervals tight enough. Plain interval arithmetic over each operand's
 * interval, and affine forms: a value as c + sum coef * leaf, exact over the integers, where
 * a leaf is an instruction that is not affine in its operands (an iota, a load, a clamp). A
 * form is kept only while every value it can take fits in i32, so no step wrapped and the form
 * is the value itself; a difference of forms cancels terms that intervals cannot (v - v is 0).
 * A division by a positive constant c of a form w with w >= 0 splits it into c A + B: where B's
 * interval lies in [0, c), the quotient is A exactly (truncation and floor agree on w >= 0,
 * docs/FORMAT.md: i32 `div` truncates).
 *
 * Every interval holds only where the index space is walked as the IR says: each index in
 * [0, shape[d]) (a symbolic length: below its declared maximum, `T<=1024`). Backends evaluate no other points (their tails are guarded), which the gather
 * checks already rely on: an index computed at a point outside the space would fail them.
 * Anything not understood (loads, reductions' values, float-to-int casts, other operators)
 * is the whole i32 range, so a new operator costs precision, never correctness.
 */
#include "kir/kir.h"

#include <stdint.h>
#include <stdlib.h>

#define TERMS 4 /* leaves of an affine form; more becomes a leaf of its own */

typedef struct affine {
    int n;                 /* terms; -1: not affine (the instruction is its own leaf) */
    int leaf[TERMS];       /* instructions, ascending */
    int64_t coef[TERMS];   /* nonzero */
    int64_t c;
} affine;

static bool fits_i32(int64_t lo, int64_t hi)
{
    return lo >= INT32_MIN && hi <= INT32_MAX;
}

static void set_range(kir_fact *f, int64_t lo, int64_t hi)
{
    f->lo = lo;
    f->hi = hi;
}

/* The interval of form a over its leaves' intervals; false when a product or sum leaves int64
 * (then nothing is known from it). */
static bool form_range(const affine *a, const kir_fact *facts, int64_t *lo, int64_t *hi)
{
    int64_t l = a->c, h = a->c;
    for (int t = 0; t < a->n; t++) {
        int64_t x, y;
        if (mc_mul_overflows(a->coef[t], facts[a->leaf[t]].lo, &x) ||
            mc_mul_overflows(a->coef[t], facts[a->leaf[t]].hi, &y))
            return false;
        if (mc_add_overflows(l, x < y ? x : y, &l) || mc_add_overflows(h, x < y ? y : x, &h))
            return false;
    }
    *lo = l;
    *hi = h;
    return true;
}

/* a + s b into out; false where the result has more than TERMS leaves or a coefficient leaves
 * int64. */
static bool form_add(const affine *a, const affine *b, int64_t s, affine *out)
{
    affine r = {0};
    if (mc_mul_overflows(b->c, s, &r.c) || mc_add_overflows(r.c, a->c, &r.c))
        return false;
    int x = 0, y = 0;
    while (x < a->n || y < b->n) {
        int leaf;
        int64_t coef = 0, t;
        if (y >= b->n || (x < a->n && a->leaf[x] < b->leaf[y])) {
            leaf = a->leaf[x];
            coef = a->coef[x++];
        } else if (x >= a->n || b->leaf[y] < a->leaf[x]) {
            leaf = b->leaf[y];
            if (mc_mul_overflows(b->coef[y++], s, &coef))
                return false;
        } else {
            leaf = a->leaf[x];
            if (mc_mul_overflows(b->coef[y++], s, &t) || mc_add_overflows(a->coef[x++], t, &coef))
                return false;
        }
        if (coef == 0)
            continue;
        if (r.n == TERMS)
            return false;
        r.leaf[r.n] = leaf;
        r.coef[r.n++] = coef;
    }
    *out = r;
    return true;
}

static bool form_scale(const affine *a, int64_t s, affine *out)
{
    affine zero = {0};
    return form_add(&zero, a, s, out);
}

/* The quotient of form a (whose values are >= 0) by a constant d > 0, where exact: a = d A + B
 * with B in [0, d) gives A. */
static bool form_div(const affine *a, int64_t d, const kir_fact *facts, affine *out)
{
    affine q = {0}, rem = {0};
    q.c = a->c / d; /* a's constant split too, its remainder kept with B */
    rem.c = a->c % d;
    if (rem.c < 0) {
        rem.c += d;
        q.c -= 1;
    }
    for (int t = 0; t < a->n; t++) {
        affine *to = a->coef[t] % d == 0 ? &q : &rem;
        to->leaf[to->n] = a->leaf[t];
        to->coef[to->n++] = to == &q ? a->coef[t] / d : a->coef[t];
    }
    int64_t lo, hi;
    if (!form_range(&rem, facts, &lo, &hi) || lo < 0 || hi >= d)
        return false;
    *out = q;
    return true;
}

/* The exact difference a - b of two instructions' values, as an interval: from their forms
 * where both have one (terms cancel), else from their intervals. */
static void diff_range(const kir_fact *facts, const affine *forms, int a, int b, int64_t *lo, int64_t *hi)
{
    affine d;
    if (forms[a].n >= 0 && forms[b].n >= 0 && form_add(&forms[a], &forms[b], -1, &d) &&
        form_range(&d, facts, lo, hi))
        return;
    *lo = facts[a].lo - facts[b].hi;
    *hi = facts[a].hi - facts[b].lo;
}

/* The first instruction whose value is always instruction i's. */
static int root(const kir_fact *facts, int i)
{
    return facts[i].same >= 0 ? facts[i].same : i;
}

/* A compare's truth from the interval of a - b: 1 or 0 where decided, else -1. */
static int decide(mc_op op, int64_t lo, int64_t hi)
{
    if (op == MC_OP_LT)
        return hi < 0 ? 1 : lo >= 0 ? 0 : -1;
    if (op == MC_OP_LE)
        return hi <= 0 ? 1 : lo > 0 ? 0 : -1;
    if (op == MC_OP_GT)
        return lo > 0 ? 1 : hi <= 0 ? 0 : -1;
    if (op == MC_OP_GE)
        return lo >= 0 ? 1 : hi < 0 ? 0 : -1;
    if (op == MC_OP_EQ)
        return lo == 0 && hi == 0 ? 1 : (lo > 0 || hi < 0) ? 0 : -1;
    if (op == MC_OP_NE)
        return lo == 0 && hi == 0 ? 0 : (lo > 0 || hi < 0) ? 1 : -1;
    return -1;
}

/* Interval (and sameness) of i32 or bool KI_OP i from its operands'; forms[i] set where affine. */
static void op_fact(const kir_kernel *k, kir_fact *facts, affine *forms, int i)
{
    const kir_instr *in = &k->code[i];
    kir_fact *f = &facts[i];
    const int *a = in->arg;
    mc_op op = in->op;
    bool ints = k->code[a[0]].dtype == MC_I32; /* every KI_OP has an operand */
    if (op == MC_OP_ADD || op == MC_OP_SUB) {
        set_range(f, facts[a[0]].lo + (op == MC_OP_ADD ? facts[a[1]].lo : -facts[a[1]].hi),
                  facts[a[0]].hi + (op == MC_OP_ADD ? facts[a[1]].hi : -facts[a[1]].lo));
        if (forms[a[0]].n >= 0 && forms[a[1]].n >= 0)
            form_add(&forms[a[0]], &forms[a[1]], op == MC_OP_ADD ? 1 : -1, &forms[i]);
    } else if (op == MC_OP_MUL) {
        int64_t p[4] = {facts[a[0]].lo * facts[a[1]].lo, facts[a[0]].lo * facts[a[1]].hi,
                        facts[a[0]].hi * facts[a[1]].lo, facts[a[0]].hi * facts[a[1]].hi};
        set_range(f, p[0], p[0]);
        for (int t = 1; t < 4; t++)
            set_range(f, p[t] < f->lo ? p[t] : f->lo, p[t] > f->hi ? p[t] : f->hi);
        for (int s = 0; s < 2; s++)
            if (forms[a[s]].n == 0 && forms[a[1 - s]].n >= 0 && form_scale(&forms[a[1 - s]], forms[a[s]].c, &forms[i]))
                break;
    } else if (op == MC_OP_NEG) {
        set_range(f, -facts[a[0]].hi, -facts[a[0]].lo);
        if (forms[a[0]].n >= 0)
            form_scale(&forms[a[0]], -1, &forms[i]);
    } else if (op == MC_OP_DIV && facts[a[1]].lo == facts[a[1]].hi && facts[a[1]].lo > 0) {
        int64_t d = facts[a[1]].lo; /* truncation is monotone for d > 0 */
        set_range(f, facts[a[0]].lo / d, facts[a[0]].hi / d);
        if (facts[a[0]].lo >= 0 && forms[a[0]].n >= 0)
            form_div(&forms[a[0]], d, facts, &forms[i]);
    } else if (op == MC_OP_MAXIMUM || op == MC_OP_MINIMUM) {
        int64_t lo, hi;
        diff_range(facts, forms, a[0], a[1], &lo, &hi);
        bool first = op == MC_OP_MAXIMUM ? lo >= 0 : hi <= 0; /* a[0] is always the result */
        bool second = op == MC_OP_MAXIMUM ? hi <= 0 : lo >= 0;
        if (first || second) {
            f->same = root(facts, a[first ? 0 : 1]);
        } else if (op == MC_OP_MAXIMUM) {
            set_range(f, facts[a[0]].lo > facts[a[1]].lo ? facts[a[0]].lo : facts[a[1]].lo,
                      facts[a[0]].hi > facts[a[1]].hi ? facts[a[0]].hi : facts[a[1]].hi);
        } else {
            set_range(f, facts[a[0]].lo < facts[a[1]].lo ? facts[a[0]].lo : facts[a[1]].lo,
                      facts[a[0]].hi < facts[a[1]].hi ? facts[a[0]].hi : facts[a[1]].hi);
        }
    } else if (op == MC_OP_ABS && facts[a[0]].lo >= 0) {
        f->same = root(facts, a[0]);
    } else if (op == MC_OP_WHERE) {
        if (facts[a[0]].lo == 1 || facts[a[0]].hi == 0)
            f->same = root(facts, a[facts[a[0]].lo == 1 ? 1 : 2]);
        else
            set_range(f, facts[a[1]].lo < facts[a[2]].lo ? facts[a[1]].lo : facts[a[2]].lo,
                      facts[a[1]].hi > facts[a[2]].hi ? facts[a[1]].hi : facts[a[2]].hi);
    } else if (ints && (op == MC_OP_LT || op == MC_OP_LE || op == MC_OP_GT || op == MC_OP_GE || op == MC_OP_EQ ||
                        op == MC_OP_NE)) {
        int64_t lo, hi;
        diff_range(facts, forms, a[0], a[1], &lo, &hi);
        int t = decide(op, lo, hi);
        if (t >= 0)
            set_range(f, t, t);
    } else if (op == MC_OP_AND || op == MC_OP_OR) {
        int64_t absorb = op == MC_OP_AND ? 0 : 1; /* false && x, true || x */
        if (facts[a[0]].lo == absorb && facts[a[0]].hi == absorb)
            set_range(f, absorb, absorb);
        else if (facts[a[1]].lo == absorb && facts[a[1]].hi == absorb)
            set_range(f, absorb, absorb);
        else if (facts[a[1]].lo == 1 - absorb && facts[a[1]].hi == 1 - absorb) /* x && true, x || false */
            f->same = root(facts, a[0]);
        else if (facts[a[0]].lo == 1 - absorb && facts[a[0]].hi == 1 - absorb)
            f->same = root(facts, a[1]);
        else if (root(facts, a[0]) == root(facts, a[1]))
            f->same = root(facts, a[0]);
    } else if (op == MC_OP_NOT && facts[a[0]].lo == facts[a[0]].hi) {
        set_range(f, 1 - facts[a[0]].lo, 1 - facts[a[0]].lo);
    } else if (op == MC_OP_CAST && (k->code[a[0]].dtype == MC_BOOL || k->code[a[0]].dtype == MC_I32) &&
               in->dtype == MC_I32) {
        set_range(f, facts[a[0]].lo, facts[a[0]].hi); /* bool is 0 or 1; i32 to i32 is itself */
        if (k->code[a[0]].dtype == MC_I32)
            f->same = root(facts, a[0]);
    } else if (op == MC_OP_CAST && ints && in->dtype == MC_BOOL) {
        if (facts[a[0]].lo > 0 || facts[a[0]].hi < 0)
            set_range(f, 1, 1);
        else if (facts[a[0]].lo == 0 && facts[a[0]].hi == 0)
            set_range(f, 0, 0);
    }
}

bool kir_facts(const kir_kernel *k, const mc_dims *dims, int step, int at, kir_fact *facts)
{
    int inner = k->rank - 1;
    affine *forms = malloc((size_t)(k->ncode > 0 ? k->ncode : 1) * sizeof *forms);
    if (!forms)
        return false;
    for (int i = 0; i < k->ncode; i++) {
        const kir_instr *in = &k->code[i];
        kir_fact *f = &facts[i];
        f->same = -1;
        forms[i].n = -1;
        if (in->dtype == MC_BOOL)
            set_range(f, 0, 1);
        else
            set_range(f, INT32_MIN, INT32_MAX);
        if (in->dtype != MC_I32 && in->dtype != MC_BOOL)
            continue;
        if (in->kind == KI_CONST) {
            set_range(f, (int64_t)in->value, (int64_t)in->value);
        } else if (in->kind == KI_INDEX && in->dtype != MC_I32) {
            /* an iota held as bool: (bool)i, 0 or 1 as set above */
        } else if (in->kind == KI_INDEX && in->view < k->rank && !mc_dim_is_sym(k->shape[in->view]) &&
                   k->shape[in->view] - 1 <= INT32_MAX) {
            int64_t n = k->shape[in->view];
            if (in->view == inner && step > 1 && n % step == 0) /* at, at + step, .. */
                set_range(f, at, n - step + at);
            else
                set_range(f, 0, n > 0 ? n - 1 : 0);
        } else if (in->kind == KI_INDEX) {
            /* a symbolic length: below its declared maximum (a binding above it is refused,
             * runtime/symbolic.c), or at least not negative */
            int64_t most = 0;
            if (in->view >= k->rank || !dims || !mc_dims_max(dims, k->shape[in->view], &most) || most - 1 > INT32_MAX)
                most = (int64_t)INT32_MAX + 1;
            set_range(f, in->view == inner && step > 1 ? at : 0, most > 0 ? most - 1 : 0);
        } else if (in->kind == KI_OP) {
            op_fact(k, facts, forms, i);
        }
        if (f->same >= 0) { /* the same value: the same interval and form */
            int s = f->same;
            *f = facts[s];
            f->same = s;
            forms[i] = forms[s];
            continue;
        }
        int64_t lo, hi;
        if (forms[i].n >= 0 && form_range(&forms[i], facts, &lo, &hi) && fits_i32(lo, hi)) {
            /* exact: narrow the interval to the form's */
            set_range(f, lo > f->lo ? lo : f->lo, hi < f->hi ? hi : f->hi);
        } else {
            forms[i].n = -1;
        }
        if (!fits_i32(f->lo, f->hi)) { /* it may wrap: anything */
            set_range(f, INT32_MIN, INT32_MAX);
            forms[i].n = -1;
        }
        if (f->lo == f->hi) { /* a constant */
            forms[i].n = 0;
            forms[i].c = f->lo;
        } else if (forms[i].n < 0) { /* its own leaf */
            forms[i].n = 1;
            forms[i].leaf[0] = i;
            forms[i].coef[0] = 1;
            forms[i].c = 0;
        } else if (forms[i].n == 1 && forms[i].coef[0] == 1 && forms[i].c == 0 && forms[i].leaf[0] != i) {
            f->same = forms[i].leaf[0]; /* a leaf, plus nothing: that leaf */
        }
    }
    free(forms);
    return true;
}

int kir_gather_proven(const kir_kernel *k, const kir_fact *facts, int i)
{
    const kir_instr *in = &k->code[i];
    if (in->kind != KI_GATHER || mc_dim_is_sym(in->size))
        return 0;
    const kir_fact *x = &facts[in->arg[0]];
    if (x->lo >= 0 && x->hi < in->size)
        return 1;
    if (x->lo >= -in->size && x->hi < 0) /* counted from the end (a reversed gather) */
        return -1;
    return 0;
}
