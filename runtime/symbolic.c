/* Programs of graphs with symbolic dimensions (docs/FORMAT.md §1): binding the symbols at run
 * time, and one compiled program per binding, kept in a small cache.
 *
 * A symbolic program holds the user's graph with its symbols and no kernels. Binding calls
 * (mc_program_set, the file loaders, mc_program_set_dim) check each value against its
 * declared type and *unify*: a size must equal a constant dimension; a symbol takes the size
 * it is given when unbound, and must keep it while the program is being set up for one run. A
 * run binds them for good only until it ends: after a run every binding may change, and a
 * value given before that run whose type uses a symbol that changes is dropped (it has the
 * wrong shape now). Every check happens before anything is stored, so a failed call leaves
 * the program as it was.
 *
 * mc_program_run specialises the graph to the bound sizes (mc_graph_specialize: a static
 * copy) and compiles it as any other program, or takes the program compiled for the same
 * binding before from the cache (at most MC_SPECIALIZED_MAX, least recently run dropped), so a
 * binding seen before compiles nothing; `compilations` counts what was compiled. The values
 * are handed to that program (only when something changed since it last had them), and the
 * outputs, their shapes included, are its. This is step 2 of docs/design/symbolic-dimensions.md:
 * a new size compiles a new program.
 *
 * Step 3, where it applies: mc_symbolic_new compiles the symbolic graph once into kernels
 * whose sizes are expressions of the symbols (kir/kir.h, "Sizes known when the program runs"),
 * and a binding's program is then that kernel list bound to the binding (kir_bind: arithmetic),
 * planned and handed to the backend (mc_program_instantiate), which compiles nothing: a new
 * size compiles nothing. It applies when the backend takes bound kernel lists without a
 * compile (`runtime_sizes`: ref, which interprets them, and cuda and cpu, which generate the
 * kernels from the symbolic list handed along with the binding, mc_program.sized: the same
 * source or IR for every binding; a kernel one has to generate for the binding counts as a
 * compilation) and every
 * operator over a symbol takes symbolic sizes
 * (mc_runsizes_refusal); else, or with MINIC_SPECIALIZE=1, every binding compiles as above,
 * and the program's notes say why. The bound programs share the cache and its LRU. When every
 * symbol has a declared maximum, the intermediates are planned once, at the maxima
 * (plan_at_maxima), and every binding's program uses that one arena (mc_program.arena: its
 * runs never overlap, since a symbolic program runs one binding at a time, synchronously, under
 * its mutex); else each binding plans and allocates its own, as do the programs compiled per
 * binding (their kernel lists differ from binding to binding).
 *
 * The program's mutex is held by every call here (runtime/program.c's public functions take it
 * and dispatch), so the inner programs are used from one thread at a time.
 */
#include "runtime/runtime.h"

#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>

#define MC_SPECIALIZED_MAX 8 /* compiled programs kept per symbolic program */

typedef struct sym_value {
    void *data;                 /* what the caller gave (malloc'd), or NULL */
    size_t bytes;
    int64_t shape[MC_MAX_RANK]; /* its shape */
} sym_value;

typedef struct sym_binding {
    int64_t value[MC_MAX_SYMS]; /* 0: unbound */
    int source[MC_MAX_SYMS];    /* the declaration that bound it, -1: mc_program_set_dim */
    bool firm[MC_MAX_SYMS];     /* bound since the last run: a different size is an error */
} sym_binding;

typedef struct sym_entry {
    int64_t key[MC_MAX_SYMS];
    mc_program *program;
    uint64_t last_run;          /* the clock of its last use, for the LRU */
    uint64_t pushed;            /* the generation of the values it was last given */
} sym_entry;

struct mc_symbolic {
    sym_binding b;
    sym_value *values;          /* per node of p->graph: declarations' values */
    sym_entry cache[MC_SPECIALIZED_MAX];
    int ncache;
    int current;                /* the cache entry of the last run, -1 */
    uint64_t clock;
    uint64_t generation;        /* bumped by every change to values, bindings or the seed */
    int compilations;
    kir_program *sized;         /* the kernels compiled once for every binding (step 3, above),
                                   or NULL: each binding compiles its own program */
    kir_program *at_max;        /* `sized` bound at the symbols' maxima and planned: the memory
                                   plan every binding takes (mc_plan_memory_like), or NULL */
    mc_shared_arena arena;      /* the arena of that plan, shared by the bindings' programs */
};

static bool is_declaration(const mc_node *n) { return n->op == MC_OP_INPUT || n->op == MC_OP_PARAM; }
static const char *kind_word(const mc_node *n) { return n->op == MC_OP_PARAM ? "param" : "input"; }

/* "f32[B, T<=64, 4]" as declared. */
static const char *declared_type(const mc_graph *g, const mc_node *n, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "%s[", mc_dtype_name(n->dtype));
    for (int d = 0; d < n->rank && used < size; d++) {
        char dim[96];
        used += (size_t)snprintf(buf + used, size - used, "%s%s", d ? ", " : "",
                                 mc_dim_str(g, n->shape[d], dim, sizeof dim));
    }
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}

/* Symbol k is bound by nothing at a run: the error names it and the first input or param whose
 * type uses it (docs/FORMAT.md §1: an input error naming the input and the dimension). */
static mc_status unbound(const mc_graph *g, int k)
{
    const char *name = mc_dim_sym_name(g, k);
    char uses[512] = "";
    for (int i = 0; i < g->nnodes && !uses[0]; i++)
        for (int d = 0; is_declaration(&g->nodes[i]) && d < g->nodes[i].rank && !uses[0]; d++)
            if (mc_dim_is_sym(g->nodes[i].shape[d]) && mc_dim_as_sym(g, g->nodes[i].shape[d]) == k) {
                char type[256];
                snprintf(uses, sizeof uses, "; %s '%s' (declared %s) uses it and was not given",
                         kind_word(&g->nodes[i]), g->nodes[i].name, declared_type(g, &g->nodes[i], type, sizeof type));
            }
    return mc_fail(MC_ERR_INPUT, "dimension '%s' is unbound: give an input whose type uses it, or --dim %s=INT "
                   "(mc_program_set_dim)%s", name, name, uses);
}

static const char *array_type(mc_dtype dtype, const int64_t *shape, int rank, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "%s[", mc_dtype_name(dtype));
    for (int d = 0; d < rank && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}

static int find_declaration(const mc_graph *g, const char *name)
{
    for (int i = 0; name && i < g->nnodes; i++)
        if (is_declaration(&g->nodes[i]) && g->nodes[i].name && !strcmp(g->nodes[i].name, name))
            return i;
    return -1;
}

/* Who bound symbol k, for messages: "input 'ids'" or "mc_program_set_dim (--dim)". */
static const char *bound_by(const mc_program *p, const sym_binding *b, int k, char *buf, size_t size)
{
    if (b->source[k] < 0)
        return "--dim (mc_program_set_dim)";
    const mc_node *n = &p->graph->nodes[b->source[k]];
    snprintf(buf, size, "%s '%s'", kind_word(n), n->name);
    return buf;
}

/* Bind symbol k to size for declaration `source` (-1: set_dim) in b, or fail naming both. */
static mc_status bind_symbol(const mc_program *p, sym_binding *b, int k, int64_t size, int source, int axis)
{
    const mc_graph *g = p->graph;
    const char *sym = mc_dim_sym_name(g, k);
    char who[300] = "--dim (mc_program_set_dim)", other[300];
    if (source >= 0)
        snprintf(who, sizeof who, "%s '%s'", kind_word(&g->nodes[source]), g->nodes[source].name);
    char where[48] = "";
    if (axis >= 0)
        snprintf(where, sizeof where, " (axis %d)", axis);
    if (size < 1)
        return mc_fail(MC_ERR_INPUT, "%s has %s=%lld%s: dimensions must be positive", who, sym, (long long)size, where);
    int64_t max = mc_dim_sym_max(g, k);
    if (max && size > max)
        return mc_fail(MC_ERR_INPUT, "%s has %s=%lld%s, above the maximum %s<=%lld the graph declares", who, sym,
                       (long long)size, where, sym, (long long)max);
    if (b->value[k] && b->value[k] != size && b->firm[k])
        return mc_fail(MC_ERR_INPUT, "%s has %s=%lld%s but %s bound %s=%lld", who, sym, (long long)size, where,
                       bound_by(p, b, k, other, sizeof other), sym, (long long)b->value[k]);
    if (b->value[k] != size || source < 0)
        b->source[k] = source;
    b->value[k] = size;
    b->firm[k] = true;
    return MC_OK;
}

/* Check an array of `dtype` and `shape` against declaration `node` and bind its symbols in b. */
static mc_status unify(const mc_program *p, sym_binding *b, int node, mc_dtype dtype, const int64_t *shape, int rank,
                       const char *path)
{
    const mc_graph *g = p->graph;
    const mc_node *n = &g->nodes[node];
    char want[256], got[256];
    bool same = dtype == n->dtype && rank == n->rank;
    for (int d = 0; same && d < rank; d++)
        same = mc_dim_is_sym(n->shape[d]) || n->shape[d] == shape[d];
    if (!same)
        return mc_fail(MC_ERR_INPUT, "%s%s%s '%s' is declared %s but %s %s", path ? path : "", path ? ": " : "",
                       kind_word(n), n->name, declared_type(g, n, want, sizeof want),
                       path ? "the file holds" : "was given", array_type(dtype, shape, rank, got, sizeof got));
    for (int d = 0; d < rank; d++) {
        if (!mc_dim_is_sym(n->shape[d]))
            continue;
        int k = mc_dim_as_sym(g, n->shape[d]);
        MC_ASSERT(k >= 0); /* declarations hold plain symbols */
        mc_status st = bind_symbol(p, b, k, shape[d], node, d);
        if (st != MC_OK) {
            if (!path)
                return st;
            char why[1024];
            snprintf(why, sizeof why, "%s", mc_error_message());
            return mc_fail(st, "%s: %s", path, why);
        }
    }
    return MC_OK;
}

/* Does declaration n's type use symbol k? */
static bool uses_symbol(const mc_graph *g, const mc_node *n, int k)
{
    for (int d = 0; d < n->rank; d++)
        if (mc_dim_is_sym(n->shape[d]) && mc_dim_as_sym(g, n->shape[d]) == k)
            return true;
    return false;
}

/* Take binding b: values given under sizes that changed are dropped (their shape is wrong
 * now), except `keep`, which is being stored under b. */
static void commit(mc_program *p, const sym_binding *b, int keep)
{
    mc_symbolic *s = p->sym;
    for (int k = 0; k < mc_graph_num_syms(p->graph); k++) {
        if (s->b.value[k] == 0 || s->b.value[k] == b->value[k])
            continue;
        for (int i = 0; i < p->graph->nnodes; i++)
            if (i != keep && s->values[i].data && uses_symbol(p->graph, &p->graph->nodes[i], k)) {
                free(s->values[i].data);
                s->values[i].data = NULL;
            }
    }
    s->b = *b;
    s->generation++;
}

/* Keep a copy of a checked value. */
static mc_status store(mc_program *p, int node, const void *data, size_t bytes, const int64_t *shape)
{
    sym_value *v = &p->sym->values[node];
    void *copy = malloc(bytes ? bytes : 1);
    if (!copy)
        return mc_fail(MC_ERR_SYSTEM, "out of memory (%zu bytes)", bytes);
    if (bytes)
        memcpy(copy, data, bytes);
    free(v->data);
    v->data = copy;
    v->bytes = bytes;
    memcpy(v->shape, shape, sizeof v->shape);
    p->sym->generation++;
    return MC_OK;
}

/* Bytes of an array of dtype with shape; false on overflow. */
static bool array_bytes(mc_dtype dtype, const int64_t *shape, int rank, size_t *out)
{
    int64_t n = (int64_t)mc_dtype_size(dtype);
    for (int d = 0; d < rank; d++)
        if (mc_mul_overflows(n, shape[d], &n))
            return false;
    if ((uint64_t)n > SIZE_MAX)
        return false;
    *out = (size_t)n;
    return true;
}

/* ---- kernels compiled once, bound per binding (step 3) ------------------------------------- */

/* Why this program cannot compile once for every binding, into why; "" when it can. */
static void sized_refusal(const mc_program *p, char *why, size_t size)
{
    const char *force = getenv("MINIC_SPECIALIZE");
    why[0] = '\0';
    if (force && strcmp(force, "1") == 0)
        snprintf(why, size, "MINIC_SPECIALIZE=1");
    else if (!p->backend->runtime_sizes)
        snprintf(why, size, "the %s backend does not take sizes at run time yet", p->backend->name);
    else if (p->backend->runtime_sizes_off && p->backend->runtime_sizes_off())
        snprintf(why, size, "%s", p->backend->runtime_sizes_off());
    else
        mc_runsizes_refusal(p->graph, why, size);
}

/* The most bytes of intermediates planned at the maxima (and allocated at the first binding):
 * MINIC_ARENA_AT_MAXIMA_BYTES, else 1 GiB. */
static int64_t arena_limit(void)
{
    const char *e = getenv("MINIC_ARENA_AT_MAXIMA_BYTES");
    char *end = NULL;
    long long v = e ? strtoll(e, &end, 10) : -1;
    return e && end != e && !*end && v >= 0 ? (int64_t)v : (int64_t)1 << 30;
}

/* Plan the intermediates once, at the symbols' maxima, for every binding to share: the kernel
 * list bound at the maxima and planned; a binding takes its offsets when they are valid for its
 * sizes (mc_plan_memory_like: every temp no larger, the same overlaps in place), and its
 * program then uses the one arena (mc_program.arena) instead of allocating its own. A symbol
 * without a maximum leaves each binding to plan and allocate its own, as before. */
static void plan_at_maxima(mc_program *p, bool share)
{
    mc_symbolic *s = p->sym;
    const mc_graph *g = p->graph;
    int64_t max[MC_MAX_SYMS] = {0};
    char list[256] = "";
    size_t used = 0;
    for (int k = 0; k < mc_graph_num_syms(g); k++) {
        max[k] = mc_dim_sym_max(g, k);
        if (!max[k]) {
            mc_program_note(p, "symbolic dimensions: memory planned per binding ('%s' has no maximum; declare "
                            "%s<=N to plan it once)", mc_dim_sym_name(g, k), mc_dim_sym_name(g, k));
            return;
        }
        if (used < sizeof list)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s=%lld", k ? ", " : "", mc_dim_sym_name(g, k),
                                     (long long)max[k]);
    }
    if (!share) {
        mc_program_note(p, "symbolic dimensions: memory planned per binding (memory planning is off)");
        return;
    }
    kir_program *kp = kir_bind(s->sized, max);
    if (!kp) {
        mc_program_note(p, "symbolic dimensions: memory planned per binding (at the maxima: %s)", mc_error_message());
        return;
    }
    mc_plan_memory(kp, true);
    int64_t limit = arena_limit();
    if (kp->arena_bytes > limit) { /* a maximum far above the sizes used would hold memory for nothing */
        mc_program_note(p, "symbolic dimensions: memory planned per binding (the plan at the maxima (%s) needs %lld "
                        "bytes of intermediates, above the %lld of MINIC_ARENA_AT_MAXIMA_BYTES)", list,
                        (long long)kp->arena_bytes, (long long)limit);
        kir_program_free(kp);
        return;
    }
    s->at_max = kp;
    s->arena.bytes = kp->arena_bytes;
    mc_program_note(p, "symbolic dimensions: memory planned once at the maxima (%s): %lld bytes of intermediates, "
                    "one arena shared by every binding", list, (long long)kp->arena_bytes);
}

/* Compile the kernels once with symbolic sizes where the backend and the graph allow it. */
static mc_status compile_sized(mc_program *p)
{
    char why[MC_COMPILE_REFUSED];
    sized_refusal(p, why, sizeof why);
    if (!why[0]) {
        mc_compile_options co = mc_compile_options_for_backend(&p->opt, p->backend);
        co.symbolic = true;
        co.refused = why;
        mc_status st = mc_compile_kernels(p->graph, &co, &p->sym->sized);
        if (st != MC_OK)
            return st;
        if (p->sym->sized) {
            p->sym->compilations = 1;
            mc_program_note(p, "symbolic dimensions: compiled once, sizes bound when it runs");
            mc_program_note_prep(p, p->sym->sized);
            plan_at_maxima(p, co.plan_memory);
            return MC_OK;
        }
    }
    mc_program_note(p, "symbolic dimensions: compiled per binding (%s); each binding plans and allocates its own "
                    "memory", why);
    return MC_OK;
}

/* The program for the current binding from the kernels compiled once: bound, planned and
 * counted here, prepared by the backend without a compile. */
/* The kernels bound to the current binding, planned (at the maxima's offsets when *shared and
 * they fit it: *shared says whether they were taken), verified and counted; NULL on failure. */
static kir_program *bind_kernels(mc_program *p, bool *shared, mc_status *st)
{
    mc_symbolic *s = p->sym;
    kir_program *kp = kir_bind(s->sized, s->b.value);
    if (!kp) {
        *st = mc_error_status();
        return NULL;
    }
    mc_compile_options co = mc_compile_options_for(&p->opt);
    char why[200] = "";
    *shared = *shared && s->at_max && mc_plan_memory_like(kp, s->at_max, why, sizeof why);
    if (!*shared)
        mc_plan_memory(kp, co.plan_memory);
    if (s->at_max && !*shared && why[0])
        mc_program_note(p, "symbolic dimensions: a binding planned its own memory (the plan at the maxima does not "
                        "fit it: %s)", why);
    if (co.verify && (*st = kir_verify(kp, "bind", true)) != MC_OK) {
        kir_program_free(kp);
        return NULL;
    }
    for (int k = 0; k < kp->nkernels; k++)
        kir_count(kp, &kp->kernels[k]);
    *st = MC_OK;
    return kp;
}

static mc_status bound_program(mc_program *p, mc_program **out)
{
    mc_symbolic *s = p->sym;
    mc_graph *sg = NULL;
    mc_status st = mc_graph_specialize(p->graph, s->b.value, &sg); /* types, for the checks */
    if (st != MC_OK)
        return st;
    mc_options o = p->opt;
    o.backend = mc_program_backend_kind(p);
    o.note = mc_program_forward_note;
    o.note_ctx = p;
    bool shared = true;
    kir_program *kp = bind_kernels(p, &shared, &st);
    if (kp)
        st = mc_program_instantiate(sg, kp, s->sized, s->b.value, shared ? &s->arena : NULL, &o, out);
    if (st != MC_OK && shared && s->arena.failed) {
        /* the arena planned at the maxima could not be allocated: every binding plans its own */
        char why[512];
        snprintf(why, sizeof why, "%s", mc_error_message());
        mc_program_note(p, "symbolic dimensions: memory planned per binding (the %lld bytes planned at the maxima "
                        "could not be allocated: %s)", (long long)s->arena.bytes, why);
        if (s->arena.release)
            s->arena.release(&s->arena);
        kir_program_free(s->at_max);
        s->at_max = NULL;
        memset(&s->arena, 0, sizeof s->arena);
        shared = false;
        if ((kp = bind_kernels(p, &shared, &st)))
            st = mc_program_instantiate(sg, kp, s->sized, s->b.value, NULL, &o, out);
    }
    mc_graph_free(sg);
    if (st == MC_OK && (*out)->kernels_specialized > 0)
        s->compilations++; /* the backend rendered kernels for this binding (its notes say why) */
    return st;
}

/* ---- the calls runtime/program.c dispatches to ------------------------------------------- */

mc_status mc_symbolic_new(mc_program *p)
{
    mc_symbolic *s = calloc(1, sizeof *s);
    if (!s || !(s->values = calloc((size_t)(p->graph->nnodes > 0 ? p->graph->nnodes : 1), sizeof *s->values))) {
        free(s);
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    }
    s->current = -1;
    p->sym = s;
    return compile_sized(p);
}

void mc_symbolic_free(mc_program *p)
{
    mc_symbolic *s = p->sym;
    if (!s)
        return;
    for (int i = 0; i < s->ncache; i++)
        mc_program_free(s->cache[i].program);
    if (s->arena.release) /* after every binding's program: none uses it any more */
        s->arena.release(&s->arena);
    kir_program_free(s->at_max);
    for (int i = 0; s->values && i < p->graph->nnodes; i++)
        free(s->values[i].data);
    kir_program_free(s->sized);
    free(s->values);
    free(s);
    p->sym = NULL;
}

mc_status mc_symbolic_set_dim(mc_program *p, const char *name, int64_t size)
{
    const mc_graph *g = p->graph;
    int k = mc_dim_find_sym(g, name, strlen(name));
    if (k < 0) {
        char list[512] = "";
        size_t used = 0;
        for (int i = 0; i < mc_graph_num_syms(g) && used < sizeof list; i++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", mc_dim_sym_name(g, i));
        return mc_fail(MC_ERR_INPUT, "--dim %s=%lld: the graph has no symbolic dimension '%s' (it has %s)", name,
                       (long long)size, name, list);
    }
    sym_binding b = p->sym->b;
    if (b.value[k] != size && b.firm[k] && b.source[k] < 0)
        b.firm[k] = false; /* a later set_dim overrides an earlier one */
    mc_status st = bind_symbol(p, &b, k, size, -1, -1);
    if (st != MC_OK)
        return st;
    commit(p, &b, -1);
    return MC_OK;
}

/* The shape of a value of `bytes` for declaration n: constants and symbols bound since the last
 * run as they are; of the others, every one bound before at its size if that fits, else the one
 * whose size `bytes` alone tells (an unbound symbol, or one bound before the last run whose
 * size changed), the rest at their sizes. False when no such one is there, or more than one. */
static bool shape_from_bytes(const mc_program *p, const mc_node *n, size_t bytes, int64_t *shape)
{
    const mc_graph *g = p->graph;
    const sym_binding *b = &p->sym->b;
    int unbound = -1, nunbound = 0;
    bool complete = true;
    for (int d = 0; d < n->rank; d++) {
        int k = mc_dim_is_sym(n->shape[d]) ? mc_dim_as_sym(g, n->shape[d]) : -1;
        shape[d] = k < 0 ? n->shape[d] : b->value[k];
        if (k >= 0 && !b->value[k] && unbound != k) {
            unbound = k;
            nunbound++;
        }
        complete &= shape[d] >= 1;
    }
    size_t want = 0; /* array_bytes may fail before setting it; the message then says 0 */
    if (complete && array_bytes(n->dtype, shape, n->rank, &want) && want == bytes)
        return true;
    int found = -1;
    int64_t found_size = 0;
    for (int k = 0; k < mc_graph_num_syms(g); k++) {
        if (b->firm[k] || (nunbound > 0 && k != unbound) || nunbound > 1)
            continue;
        int64_t known = (int64_t)mc_dtype_size(n->dtype);
        int occurrences = 0;
        bool overflow = false;
        for (int d = 0; d < n->rank; d++) {
            if (mc_dim_is_sym(n->shape[d]) && mc_dim_as_sym(g, n->shape[d]) == k)
                occurrences++;
            else
                overflow |= mc_mul_overflows(known, shape[d], &known);
        }
        if (occurrences != 1 || overflow || known < 1 || bytes == 0 || bytes % (size_t)known)
            continue;
        if (found >= 0)
            return false; /* two ways to read it */
        found = k;
        found_size = (int64_t)(bytes / (size_t)known);
    }
    if (found < 0)
        return complete; /* bound: the caller's size check says what is wrong */
    for (int d = 0; d < n->rank; d++)
        if (mc_dim_is_sym(n->shape[d]) && mc_dim_as_sym(g, n->shape[d]) == found)
            shape[d] = found_size;
    return true;
}

mc_status mc_symbolic_set(mc_program *p, const char *name, const void *data, size_t bytes)
{
    const mc_graph *g = p->graph;
    int node = find_declaration(g, name);
    if (node < 0)
        return mc_program_undeclared(p, name, NULL);
    const mc_node *n = &g->nodes[node];
    if (!data && bytes)
        return mc_fail(MC_ERR_INPUT, "mc_program_set: no data for '%s'", name);
    const sym_binding *b = &p->sym->b;
    int64_t shape[MC_MAX_RANK];
    if (!shape_from_bytes(p, n, bytes, shape)) {
        char type[256];
        return mc_fail(MC_ERR_INPUT, "%s '%s' (%s): %zu bytes do not tell its shape: bind its dimensions first "
                       "(mc_program_set_dim), or give the value from a file, whose shape binds them",
                       kind_word(n), name, declared_type(g, n, type, sizeof type), bytes);
    }
    size_t want = 0; /* array_bytes may fail before setting it; the message then says 0 */
    sym_binding nb = *b;
    mc_status st = unify(p, &nb, node, n->dtype, shape, n->rank, NULL);
    if (st != MC_OK)
        return st;
    if (!array_bytes(n->dtype, shape, n->rank, &want) || want != bytes) {
        char type[256], got[256];
        return mc_fail(MC_ERR_INPUT, "%s '%s' is %s = %s (%zu bytes) but %zu bytes were given", kind_word(n), name,
                       declared_type(g, n, type, sizeof type), array_type(n->dtype, shape, n->rank, got, sizeof got),
                       want, bytes);
    }
    commit(p, &nb, node);
    return store(p, node, data, bytes, shape);
}

mc_status mc_symbolic_set_array(mc_program *p, int node, mc_dtype dtype, const int64_t *shape, int rank,
                                const void *data, size_t bytes)
{
    sym_binding b = p->sym->b;
    mc_status st = unify(p, &b, node, dtype, shape, rank, NULL);
    if (st != MC_OK)
        return st;
    int64_t full[MC_MAX_RANK] = {0};
    memcpy(full, shape, sizeof(int64_t) * (size_t)rank);
    commit(p, &b, node);
    return store(p, node, data, bytes, full);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* name's array from a .safetensors file; MC_OK with a pointing into st. */
static mc_status safetensors_array(const mc_program *p, const mc_safetensors *st, int node, const char *path,
                                   mc_array *a)
{
    const mc_node *n = &p->graph->nodes[node];
    char type[256], held[160];
    if (!mc_safetensors_describe(st, n->name, held, sizeof held))
        return mc_fail(MC_ERR_INPUT, "%s: %s '%s' (%s) is missing from the file", path, kind_word(n), n->name,
                       declared_type(p->graph, n, type, sizeof type));
    if (mc_safetensors_get(st, n->name, a) != MC_OK)
        return mc_fail(MC_ERR_INPUT, "%s: %s '%s' is declared %s but the file holds %s", path, kind_word(n),
                       n->name, declared_type(p->graph, n, type, sizeof type), held);
    return MC_OK;
}

mc_status mc_symbolic_load_file(mc_program *p, const char *name, const char *path)
{
    int node = find_declaration(p->graph, name);
    if (node < 0)
        return mc_program_undeclared(p, name, path);
    const mc_node *n = &p->graph->nodes[node];
    mc_array a = {0};
    mc_safetensors *file = NULL;
    mc_status st;
    if (ends_with(path, ".safetensors")) {
        st = mc_safetensors_open(path, &file);
        if (st == MC_OK)
            st = safetensors_array(p, file, node, path, &a);
    } else {
        st = mc_npy_read(path, n->dtype, &a);
        if (st != MC_OK) {
            char why[2048], type[256];
            snprintf(why, sizeof why, "%s", mc_error_message());
            st = mc_fail(st, "%s (for %s '%s', declared %s)", why, kind_word(n), name,
                         declared_type(p->graph, n, type, sizeof type));
        }
    }
    sym_binding b = p->sym->b;
    if (st == MC_OK)
        st = unify(p, &b, node, a.dtype, a.shape, a.rank, path);
    if (st == MC_OK) {
        commit(p, &b, node);
        st = store(p, node, a.data, a.bytes, a.shape);
    }
    if (file)
        mc_safetensors_close(file);
    else
        free(a.data);
    return st;
}

mc_status mc_symbolic_load_weights(mc_program *p, const char *path)
{
    mc_safetensors *file = NULL;
    mc_status st = mc_safetensors_open(path, &file);
    sym_binding b = p->sym->b;
    /* every param checked and unified first, then stored: a failure binds nothing */
    for (int pass = 0; pass < 2 && st == MC_OK; pass++) {
        if (pass == 1)
            commit(p, &b, -1);
        for (int i = 0; i < p->graph->nnodes && st == MC_OK; i++) {
            if (p->graph->nodes[i].op != MC_OP_PARAM)
                continue;
            mc_array a;
            st = safetensors_array(p, file, i, path, &a);
            if (st == MC_OK && pass == 0)
                st = unify(p, &b, i, a.dtype, a.shape, a.rank, path);
            if (st == MC_OK && pass == 1)
                st = store(p, i, a.data, a.bytes, a.shape);
        }
    }
    if (file)
        mc_safetensors_close(file);
    return st;
}

mc_status mc_symbolic_fill_random(mc_program *p, uint64_t seed)
{
    p->seeded = true;
    p->seed = seed;
    p->sym->generation++;
    return MC_OK;
}


/* A program compiled for the current binding (step 2, above). */
static mc_status compiled_program(mc_program *p, mc_program **out)
{
    mc_graph *sg = NULL;
    mc_status st = mc_graph_specialize(p->graph, p->sym->b.value, &sg);
    if (st != MC_OK)
        return st;
    mc_options o = p->opt;
    o.backend = mc_program_backend_kind(p);
    o.note = mc_program_forward_note;
    o.note_ctx = p;
    st = mc_program_compile(sg, &o, out);
    mc_graph_free(sg);
    if (st == MC_OK)
        p->sym->compilations++;
    return st;
}

/* The compiled program for the current binding, from the cache or compiled now, with every
 * value handed to it: what run and save_inputs work on. */
static mc_status specialised(mc_program *p, sym_entry **out)
{
    mc_symbolic *s = p->sym;
    const mc_graph *g = p->graph;
    int nsyms = mc_graph_num_syms(g);
    for (int k = 0; k < nsyms; k++)
        if (!s->b.value[k])
            return unbound(g, k);
    sym_entry *e = NULL;
    for (int i = 0; i < s->ncache && !e; i++)
        if (!memcmp(s->cache[i].key, s->b.value, sizeof(int64_t) * (size_t)nsyms))
            e = &s->cache[i];
    if (!e) {
        mc_program *inner = NULL;
        mc_status st = s->sized ? bound_program(p, &inner) : compiled_program(p, &inner);
        if (st != MC_OK)
            return st;
        if (s->ncache == MC_SPECIALIZED_MAX) { /* drop the least recently run */
            int lru = 0;
            for (int i = 1; i < s->ncache; i++)
                if (s->cache[i].last_run < s->cache[lru].last_run)
                    lru = i;
            mc_program_free(s->cache[lru].program);
            s->cache[lru] = s->cache[--s->ncache];
            if (s->current == lru)
                s->current = -1;
            else if (s->current == s->ncache)
                s->current = lru;
        }
        e = &s->cache[s->ncache++];
        memset(e, 0, sizeof *e);
        memcpy(e->key, s->b.value, sizeof(int64_t) * (size_t)nsyms);
        e->program = inner;
    }
    if (e->pushed != s->generation || e->pushed == 0) {
        mc_program_unbind(e->program);
        for (int i = 0; i < g->nnodes; i++) {
            const sym_value *v = &s->values[i];
            if (!v->data)
                continue;
            mc_status st = mc_program_set(e->program, g->nodes[i].name, v->data, v->bytes);
            if (st != MC_OK)
                return st;
        }
        if (p->seeded) {
            mc_status st = mc_program_fill_random(e->program, p->seed);
            if (st != MC_OK)
                return st;
        }
        e->pushed = s->generation;
    }
    *out = e;
    return MC_OK;
}

mc_status mc_symbolic_run(mc_program *p)
{
    sym_entry *e;
    mc_status st = specialised(p, &e);
    if (st == MC_OK)
        st = mc_program_run(e->program);
    if (st != MC_OK)
        return st;
    mc_symbolic *s = p->sym;
    e->last_run = ++s->clock;
    s->current = (int)(e - s->cache);
    for (int k = 0; k < MC_MAX_SYMS; k++) /* from now on every binding may change */
        s->b.firm[k] = false;
    p->runs++;
    return MC_OK;
}

mc_status mc_symbolic_save_inputs(mc_program *p, const char *path)
{
    sym_entry *e;
    mc_status st = specialised(p, &e);
    return st == MC_OK ? mc_program_save_inputs(e->program, path) : st;
}

mc_program *mc_symbolic_current(const mc_program *p)
{
    return p->sym->current >= 0 ? p->sym->cache[p->sym->current].program : NULL;
}

int mc_symbolic_compilations(const mc_program *p) { return p->sym->compilations; }

int64_t mc_symbolic_arena(const mc_program *p, int *allocations)
{
    if (allocations)
        *allocations = p->sym && p->sym->at_max ? p->sym->arena.allocations : 0;
    return p->sym && p->sym->at_max ? p->sym->arena.bytes : 0;
}

int mc_symbolic_cached(const mc_program *p) { return p->sym ? p->sym->ncache : 0; }
