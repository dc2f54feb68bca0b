/* Symbolic dimensions (docs/FORMAT.md §1, docs/design/symbolic-dimensions.md): the graph's
 * table of symbols and dimension expressions, their arithmetic, printing and evaluation, and
 * specialisation of a symbolic graph to one binding.
 *
 * A dimension stays an int64 everywhere: a value >= 1 is a size, a value <= MC_DIM_SYM_BASE is
 * expression k of the graph's table, encoded MC_DIM_SYM_BASE - k. The tag starts far below
 * reshape's -1 and slice's MC_END, so no reserved value is taken, and a static graph's dims
 * read as before. An expression is a polynomial over the symbols with integer coefficients
 * (sizes come from sums, products and exact quotients: concat adds, reshape multiplies and
 * divides, slice subtracts a constant), kept in one canonical form (terms sorted, zero terms
 * dropped, the whole struct zeroed before it is filled) and interned: the same polynomial is the
 * same k, so two dims are equal exactly when their int64s are, and every `==` on shapes in the
 * passes stays right. A polynomial that is a constant is returned as that constant.
 *
 * The table hangs off the graph by pointer and only ever grows (interning), which is why
 * inference can add to it through a const graph. A graph with no symbols has no table.
 */
#include "ir/ir.h"

#include <stdlib.h>
#include <string.h>

#define MC_DIM_TERMS 8 /* terms of one polynomial: plenty for shapes of real models */

typedef struct dim_term {
    int64_t coef;
    uint8_t pow[MC_MAX_SYMS]; /* exponent of each symbol */
} dim_term;

typedef struct dim_poly {
    int nterms;
    dim_term t[MC_DIM_TERMS]; /* sorted by pow (memcmp, descending); no zero coefficient */
} dim_poly;

typedef struct dim_symbol {
    char *name;
    int64_t max; /* 0: none declared */
    int line, col; /* where the max was declared (0: none, or the C API) */
} dim_symbol;

struct mc_dims {
    dim_symbol syms[MC_MAX_SYMS];
    int nsyms;
    dim_poly *exprs;
    int nexprs, cap;
};

bool mc_dim_is_sym(int64_t d) { return d <= MC_DIM_SYM_BASE; }

static int64_t encode(int k) { return MC_DIM_SYM_BASE - k; }
static int decode(int64_t d) { return (int)(MC_DIM_SYM_BASE - d); }

void mc_dims_free(mc_dims *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->nsyms; i++)
        free(t->syms[i].name);
    free(t->exprs);
    free(t);
}

mc_dims *mc_dims_clone(const mc_dims *t)
{
    if (!t)
        return NULL;
    mc_dims *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    for (int i = 0; i < t->nsyms; i++) {
        c->syms[i] = t->syms[i];
        if (!(c->syms[i].name = strdup(t->syms[i].name)))
            goto oom;
        c->nsyms = i + 1;
    }
    if (t->nexprs) {
        if (!(c->exprs = malloc(sizeof *c->exprs * (size_t)t->nexprs)))
            goto oom;
        memcpy(c->exprs, t->exprs, sizeof *c->exprs * (size_t)t->nexprs);
        c->nexprs = c->cap = t->nexprs;
    }
    return c;
oom:
    mc_dims_free(c);
    return NULL;
}

int mc_graph_num_syms(const mc_graph *g) { return g && g->dims ? g->dims->nsyms : 0; }

const char *mc_dim_sym_name(const mc_graph *g, int k) { return g->dims->syms[k].name; }

int64_t mc_dim_sym_max(const mc_graph *g, int k) { return g->dims->syms[k].max; }

int mc_dim_find_sym(const mc_graph *g, const char *name, size_t len)
{
    for (int k = 0; k < mc_graph_num_syms(g); k++)
        if (strlen(g->dims->syms[k].name) == len && !memcmp(g->dims->syms[k].name, name, len))
            return k;
    return -1;
}

bool mc_dim_valid(const mc_graph *g, int64_t d)
{
    if (!mc_dim_is_sym(d))
        return d >= 1;
    return g && g->dims && (int64_t)MC_DIM_SYM_BASE - d < g->dims->nexprs;
}

/* ---- polynomials --------------------------------------------------------------------------- */

static const dim_poly *poly_of(const mc_graph *g, int64_t d) { return &g->dims->exprs[decode(d)]; }

static void poly_const(dim_poly *p, int64_t c)
{
    memset(p, 0, sizeof *p);
    if (c != 0) {
        p->nterms = 1;
        p->t[0].coef = c;
    }
}

static void poly_from(const mc_graph *g, int64_t d, dim_poly *p)
{
    if (mc_dim_is_sym(d))
        *p = *poly_of(g, d);
    else
        poly_const(p, d);
}

/* Add coef * (monomial pow) into p, keeping it canonical; false when it overflows or p would
 * have too many terms. */
static bool poly_add_term(dim_poly *p, int64_t coef, const uint8_t *pow)
{
    int i = 0;
    while (i < p->nterms && memcmp(p->t[i].pow, pow, MC_MAX_SYMS) > 0)
        i++;
    if (i < p->nterms && memcmp(p->t[i].pow, pow, MC_MAX_SYMS) == 0) {
        if (mc_add_overflows(p->t[i].coef, coef, &p->t[i].coef))
            return false;
        if (p->t[i].coef == 0) {
            memmove(&p->t[i], &p->t[i + 1], sizeof(dim_term) * (size_t)(p->nterms - i - 1));
            p->nterms--;
            memset(&p->t[p->nterms], 0, sizeof(dim_term));
        }
        return true;
    }
    if (coef == 0)
        return true;
    if (p->nterms == MC_DIM_TERMS)
        return false;
    memmove(&p->t[i + 1], &p->t[i], sizeof(dim_term) * (size_t)(p->nterms - i));
    memset(&p->t[i], 0, sizeof(dim_term));
    p->t[i].coef = coef;
    memcpy(p->t[i].pow, pow, MC_MAX_SYMS);
    p->nterms++;
    return true;
}

/* The dim for polynomial p: a constant as itself (false when it is < 1: no size), else its
 * interned expression. */
static bool intern(const mc_graph *g, const dim_poly *p, int64_t *out)
{
    static const uint8_t zero[MC_MAX_SYMS];
    if (p->nterms == 0)
        return false;
    if (p->nterms == 1 && !memcmp(p->t[0].pow, zero, MC_MAX_SYMS)) {
        *out = p->t[0].coef;
        return *out >= 1;
    }
    mc_dims *t = g->dims;
    for (int k = 0; k < t->nexprs; k++)
        if (!memcmp(&t->exprs[k], p, sizeof *p)) {
            *out = encode(k);
            return true;
        }
    if (t->nexprs == t->cap) {
        int cap = t->cap ? 2 * t->cap : 16;
        dim_poly *e = realloc(t->exprs, sizeof *e * (size_t)cap);
        if (!e)
            return false;
        t->exprs = e;
        t->cap = cap;
    }
    t->exprs[t->nexprs] = *p;
    *out = encode(t->nexprs++);
    return true;
}

bool mc_dim_add(const mc_graph *g, int64_t a, int64_t b, int64_t *out)
{
    if (!mc_dim_is_sym(a) && !mc_dim_is_sym(b))
        return !mc_add_overflows(a, b, out) && *out >= 1;
    dim_poly p, q;
    poly_from(g, a, &p);
    poly_from(g, b, &q);
    for (int i = 0; i < q.nterms; i++)
        if (!poly_add_term(&p, q.t[i].coef, q.t[i].pow))
            return false;
    return intern(g, &p, out);
}

bool mc_dim_add_const(const mc_graph *g, int64_t a, int64_t c, int64_t *out)
{
    static const uint8_t zero[MC_MAX_SYMS];
    if (!mc_dim_is_sym(a))
        return !mc_add_overflows(a, c, out) && *out >= 1;
    dim_poly p;
    poly_from(g, a, &p);
    return poly_add_term(&p, c, zero) && intern(g, &p, out);
}

bool mc_dim_mul(const mc_graph *g, int64_t a, int64_t b, int64_t *out)
{
    if (!mc_dim_is_sym(a) && !mc_dim_is_sym(b))
        return !mc_mul_overflows(a, b, out);
    dim_poly p, q, r;
    poly_from(g, a, &p);
    poly_from(g, b, &q);
    poly_const(&r, 0);
    for (int i = 0; i < p.nterms; i++)
        for (int j = 0; j < q.nterms; j++) {
            int64_t coef;
            uint8_t pow[MC_MAX_SYMS];
            if (mc_mul_overflows(p.t[i].coef, q.t[j].coef, &coef))
                return false;
            for (int s = 0; s < MC_MAX_SYMS; s++) {
                if (p.t[i].pow[s] + q.t[j].pow[s] > 255)
                    return false;
                pow[s] = (uint8_t)(p.t[i].pow[s] + q.t[j].pow[s]);
            }
            if (!poly_add_term(&r, coef, pow))
                return false;
        }
    return intern(g, &r, out);
}

/* a / b where b divides a exactly as polynomials: b a single term (a size, a symbol, a product
 * of them) that divides every term of a, or b equal to a. False when that cannot be shown. */
bool mc_dim_div_exact(const mc_graph *g, int64_t a, int64_t b, int64_t *out)
{
    if (a == b) {
        *out = 1;
        return true;
    }
    if (!mc_dim_is_sym(a) && !mc_dim_is_sym(b)) {
        if (b < 1 || a % b)
            return false;
        *out = a / b;
        return true;
    }
    dim_poly p, q, r;
    poly_from(g, a, &p);
    poly_from(g, b, &q);
    if (q.nterms != 1 || q.t[0].coef == 0)
        return false;
    poly_const(&r, 0);
    for (int i = 0; i < p.nterms; i++) {
        if (p.t[i].coef % q.t[0].coef)
            return false;
        uint8_t pow[MC_MAX_SYMS];
        for (int s = 0; s < MC_MAX_SYMS; s++) {
            if (p.t[i].pow[s] < q.t[0].pow[s])
                return false;
            pow[s] = (uint8_t)(p.t[i].pow[s] - q.t[0].pow[s]);
        }
        if (!poly_add_term(&r, p.t[i].coef / q.t[0].coef, pow))
            return false;
    }
    return intern(g, &r, out);
}

bool mc_dim_eval(const mc_graph *g, int64_t d, const int64_t *values, int64_t *out)
{
    if (!mc_dim_is_sym(d)) {
        *out = d;
        return true;
    }
    if (!mc_dim_valid(g, d))
        return false;
    const dim_poly *p = poly_of(g, d);
    int64_t sum = 0;
    for (int i = 0; i < p->nterms; i++) {
        int64_t term = p->t[i].coef;
        for (int s = 0; s < g->dims->nsyms; s++)
            for (int e = 0; e < p->t[i].pow[s]; e++)
                if (mc_mul_overflows(term, values[s], &term))
                    return false;
        if (mc_add_overflows(sum, term, &sum))
            return false;
    }
    *out = sum;
    return true;
}

bool mc_dim_uses_sym(const mc_graph *g, int64_t d, int k)
{
    if (!mc_dim_is_sym(d) || !mc_dim_valid(g, d))
        return false;
    const dim_poly *p = poly_of(g, d);
    for (int i = 0; i < p->nterms; i++)
        if (p->t[i].pow[k])
            return true;
    return false;
}

/* The graph functions only read g->dims: a graph that is nothing but the table stands in. */
bool mc_dims_eval(const mc_dims *t, int64_t d, const int64_t *values, int64_t *out)
{
    const mc_graph shell = {.dims = (mc_dims *)t};
    return mc_dim_eval(&shell, d, values, out);
}

const char *mc_dims_str(const mc_dims *t, int64_t d, char *buf, size_t size)
{
    const mc_graph shell = {.dims = (mc_dims *)t};
    return mc_dim_str(&shell, d, buf, size);
}

int mc_dims_num_syms(const mc_dims *t) { return t ? t->nsyms : 0; }

bool mc_dims_multiple_of(const mc_dims *t, int64_t d, int64_t m)
{
    if (m <= 1)
        return true;
    if (!mc_dim_is_sym(d))
        return d % m == 0;
    const mc_graph shell = {.dims = (mc_dims *)t};
    if (!mc_dim_valid(&shell, d))
        return false;
    const dim_poly *p = poly_of(&shell, d);
    for (int i = 0; i < p->nterms; i++) /* every binding's value is a sum of these terms */
        if (p->t[i].coef % m != 0)
            return false;
    return true;
}

bool mc_dims_max(const mc_dims *t, int64_t d, int64_t *out)
{
    if (!mc_dim_is_sym(d)) {
        *out = d;
        return true;
    }
    const mc_graph shell = {.dims = (mc_dims *)t};
    if (!mc_dim_valid(&shell, d))
        return false;
    const dim_poly *p = poly_of(&shell, d);
    int64_t at[MC_MAX_SYMS] = {0};
    for (int i = 0; i < p->nterms; i++) {
        if (p->t[i].coef < 0)
            return false; /* not increasing in its symbols: no bound shown this way */
        for (int s = 0; s < t->nsyms; s++)
            if (p->t[i].pow[s]) {
                if (t->syms[s].max <= 0)
                    return false;
                at[s] = t->syms[s].max;
            }
    }
    return mc_dim_eval(&shell, d, at, out);
}

bool mc_dim_lower_bound(const mc_graph *g, int64_t d, int64_t *lo)
{
    static const uint8_t zero[MC_MAX_SYMS];
    if (mc_dim_is_sym(d) && mc_dim_valid(g, d)) {
        const dim_poly *p = poly_of(g, d);
        /* a symbol's term with a negative coefficient falls without bound as the symbol grows */
        for (int i = 0; i < p->nterms; i++)
            if (p->t[i].coef < 0 && memcmp(p->t[i].pow, zero, MC_MAX_SYMS))
                return false;
    }
    int64_t ones[MC_MAX_SYMS]; /* otherwise the least value is at every symbol 1 */
    for (int s = 0; s < MC_MAX_SYMS; s++)
        ones[s] = 1;
    return mc_dim_eval(g, d, ones, lo);
}

int mc_dim_as_sym(const mc_graph *g, int64_t d)
{
    if (!mc_dim_valid(g, d) || !mc_dim_is_sym(d))
        return -1;
    const dim_poly *p = poly_of(g, d);
    if (p->nterms != 1 || p->t[0].coef != 1)
        return -1;
    int k = -1;
    for (int s = 0; s < MC_MAX_SYMS; s++) {
        if (p->t[0].pow[s] == 0)
            continue;
        if (p->t[0].pow[s] != 1 || k >= 0)
            return -1;
        k = s;
    }
    return k;
}

/* "B*T*12 + 1", "T - 1": monomials as products of names, the coefficient last. */
const char *mc_dim_str(const mc_graph *g, int64_t d, char *buf, size_t size)
{
    if (!size)
        return buf;
    buf[0] = '\0';
    if (!mc_dim_is_sym(d)) {
        snprintf(buf, size, "%lld", (long long)d);
        return buf;
    }
    if (!mc_dim_valid(g, d)) {
        snprintf(buf, size, "<bad dimension %lld>", (long long)d);
        return buf;
    }
    const dim_poly *p = poly_of(g, d);
    size_t used = 0;
#define PUT(...) (used += used < size ? (size_t)snprintf(buf + used, size - used, __VA_ARGS__) : 0)
    for (int i = 0; i < p->nterms; i++) {
        int64_t c = p->t[i].coef;
        if (i > 0)
            PUT(c < 0 ? " - " : " + ");
        else if (c < 0)
            PUT("-");
        uint64_t mag = c < 0 ? (uint64_t)0 - (uint64_t)c : (uint64_t)c;
        bool first = true;
        for (int s = 0; s < g->dims->nsyms; s++)
            for (int e = 0; e < p->t[i].pow[s]; e++) {
                PUT("%s%s", first ? "" : "*", g->dims->syms[s].name);
                first = false;
            }
        if (first)
            PUT("%llu", (unsigned long long)mag);
        else if (mag != 1)
            PUT("*%llu", (unsigned long long)mag);
    }
#undef PUT
    return buf;
}

/* ---- declaring symbols ------------------------------------------------------------------------ */

int64_t mc_dim_declare(mc_graph *g, const char *name, size_t len, int64_t max, int line, int col)
{
    if (!g) {
        mc_fail(MC_ERR_INPUT, "mc_dim_sym: no graph (NULL)");
        return 0;
    }
    char copy[256];
    if (!name || len == 0 || len >= sizeof copy) {
        g->failed = true;
        if (line > 0) /* from a graph file: say where (the fuzzer found a 300-character name) */
            mc_fail_at(MC_ERR_INPUT, g->file, g->text, line, col,
                       "a dimension name has 1 to 255 characters; this one has %zu", len);
        else
            mc_fail(MC_ERR_INPUT, "mc_dim_sym: a symbolic dimension needs a name (1 to 255 characters)");
        return 0;
    }
    memcpy(copy, name, len);
    copy[len] = '\0';
    if (!mc_name_is_valid(copy)) {
        g->failed = true;
        mc_fail_at(MC_ERR_INPUT, g->file, g->text, line, col,
                   "'%s' is not a valid dimension name ([A-Za-z_][A-Za-z0-9_.]*, not a reserved word)", copy);
        return 0;
    }
    if (max < 0) {
        g->failed = true;
        mc_fail_at(MC_ERR_INPUT, g->file, g->text, line, col,
                   "the maximum of dimension '%s' must be a positive integer, not %lld", copy, (long long)max);
        return 0;
    }
    if (!g->dims && !(g->dims = calloc(1, sizeof *g->dims)))
        goto oom;
    mc_dims *t = g->dims;
    int k = mc_dim_find_sym(g, copy, len);
    if (k >= 0) {
        dim_symbol *s = &t->syms[k];
        if (max && s->max && s->max != max) {
            g->failed = true;
            char first[64] = "";
            if (s->line > 0)
                snprintf(first, sizeof first, " at line %d", s->line);
            mc_fail_at(MC_ERR_INPUT, g->file, g->text, line, col,
                       "dimension '%s' was declared with maximum %lld%s; it cannot also be <= %lld", copy,
                       (long long)s->max, first, (long long)max);
            return 0;
        }
        if (max && !s->max) {
            s->max = max;
            s->line = line;
            s->col = col;
        }
    } else {
        if (t->nsyms == MC_MAX_SYMS) {
            g->failed = true;
            mc_fail_at(MC_ERR_INPUT, g->file, g->text, line, col,
                       "too many symbolic dimensions: '%s' would be number %d (at most %d)", copy,
                       MC_MAX_SYMS + 1, MC_MAX_SYMS);
            return 0;
        }
        k = t->nsyms;
        if (!(t->syms[k].name = strdup(copy)))
            goto oom;
        t->syms[k].max = max;
        t->syms[k].line = max ? line : 0;
        t->syms[k].col = max ? col : 0;
        t->nsyms++;
    }
    dim_poly p;
    poly_const(&p, 0);
    p.nterms = 1;
    p.t[0].coef = 1;
    p.t[0].pow[k] = 1;
    int64_t d;
    if (!intern(g, &p, &d))
        goto oom;
    return d;
oom:
    g->failed = true;
    mc_fail(MC_ERR_SYSTEM, "out of memory");
    return 0;
}

/* ---- specialisation ------------------------------------------------------------------------ */

/* "B=2, T=7" */
static const char *binding_str(const mc_graph *g, const int64_t *values, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k < g->dims->nsyms && used < size; k++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s=%lld", k ? ", " : "", g->dims->syms[k].name,
                                 (long long)values[k]);
    return buf;
}

static mc_status eval_list(const mc_graph *g, int64_t *list, int n, const int64_t *values, const char *binding)
{
    for (int i = 0; i < n; i++) {
        if (!mc_dim_is_sym(list[i]))
            continue;
        char expr[128];
        int64_t v;
        if (!mc_dim_eval(g, list[i], values, &v) || v < 1)
            return mc_fail(MC_ERR_INPUT, "dimension %s is not a positive size with %s",
                           mc_dim_str(g, list[i], expr, sizeof expr), binding);
        list[i] = v;
    }
    return MC_OK;
}

mc_status mc_graph_specialize(const mc_graph *g, const int64_t *values, mc_graph **out)
{
    *out = NULL;
    char binding[512];
    binding_str(g, values, binding, sizeof binding);
    mc_graph *s = mc_graph_clone(g);
    if (!s)
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    mc_status st = MC_OK;
    for (int i = 0; i < s->nnodes && st == MC_OK; i++) {
        mc_node *n = &s->nodes[i];
        const mc_node *sym = &g->nodes[i];
        bool list_is_dims = n->op == MC_OP_RESHAPE || n->op == MC_OP_EXPAND || n->op == MC_OP_IOTA ||
                            n->op == MC_OP_FULL;
        if (list_is_dims && (st = eval_list(g, n->attr.list, n->attr.nlist, values, binding)))
            break;
        if (n->op == MC_OP_INPUT || n->op == MC_OP_PARAM) {
            if ((st = eval_list(g, n->shape, n->rank, values, binding)))
                break;
        }
        if (n->op != MC_OP_INPUT && n->op != MC_OP_PARAM && n->op != MC_OP_CONST) {
            st = mc_node_infer(s, n);
            if (st != MC_OK) {
                char why[1500];
                snprintf(why, sizeof why, "%s", mc_error_message());
                st = mc_fail(MC_ERR_INPUT, "%s\n(with the dimensions bound to %s)", why, binding);
                break;
            }
        }
        /* What inference assumed of the symbols (a slice's end inside a symbolic axis) must
         * hold for this binding: the specialised shape is the symbolic one evaluated. */
        for (int d = 0; d < n->rank; d++) {
            int64_t want;
            char expr[128], name[64];
            if (mc_dim_eval(g, sym->shape[d], values, &want) && want == n->shape[d])
                continue;
            const char *what = mc_node_name(g, i, name, sizeof name);
            st = sym->line > 0
                     ? mc_fail_at(MC_ERR_INPUT, g->file, g->text, sym->line, sym->col,
                                  "%s: axis %d has size %lld with %s, but its type says %s", what, d,
                                  (long long)n->shape[d], binding, mc_dim_str(g, sym->shape[d], expr, sizeof expr))
                     : mc_fail(MC_ERR_INPUT, "%s: axis %d has size %lld with %s, but its type says %s", what, d,
                               (long long)n->shape[d], binding, mc_dim_str(g, sym->shape[d], expr, sizeof expr));
            break;
        }
    }
    if (st != MC_OK) {
        mc_graph_free(s);
        return st;
    }
    mc_dims_free(s->dims);
    s->dims = NULL;
    *out = s;
    return MC_OK;
}
