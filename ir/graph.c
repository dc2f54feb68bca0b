/* The graph: creating, growing, naming, cloning and freeing it.
 *
 * A graph is one growable array of nodes (doubling, so n appends cost O(n)) plus an arena that
 * owns every string and operand list, so freeing a graph is two frees and a walk over the arena's
 * few blocks. Appending goes through mc_graph_add, which runs type inference (ir/infer.c) on the
 * candidate node before it is stored: a node in the array is always well typed, and a failed
 * builder leaves the graph as it was apart from g->failed. User names live in a hash map so
 * that a graph of a million named values is still built in linear time.
 */
#include "ir/ir.h"

#include <stdlib.h>
#include <string.h>

/* ---- the name map ----------------------------------------------------------------------------- */

static uint32_t hash_name(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static bool name_map_grow(mc_name_map *m)
{
    size_t cap = m->cap ? m->cap * 2 : 64;
    const char **keys = calloc(cap, sizeof *keys);
    int32_t *values = calloc(cap, sizeof *values);
    uint32_t *hashes = calloc(cap, sizeof *hashes);
    if (!keys || !values || !hashes) {
        free(keys);
        free(values);
        free(hashes);
        return false;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i])
            continue;
        size_t j = m->hashes[i] & (cap - 1);
        while (keys[j])
            j = (j + 1) & (cap - 1);
        keys[j] = m->keys[i];
        values[j] = m->values[i];
        hashes[j] = m->hashes[i];
    }
    free(m->keys);
    free(m->values);
    free(m->hashes);
    m->keys = keys;
    m->values = values;
    m->hashes = hashes;
    m->cap = cap;
    return true;
}

/* The slot holding key, or the empty slot where it would go. */
static size_t name_map_slot(const mc_name_map *m, const char *key, uint32_t h)
{
    size_t j = h & (m->cap - 1);
    while (m->keys[j] && (m->hashes[j] != h || strcmp(m->keys[j], key) != 0))
        j = (j + 1) & (m->cap - 1);
    return j;
}

bool mc_name_map_put(mc_name_map *m, const char *key, int32_t value)
{
    if ((m->count + 1) * 2 > m->cap && !name_map_grow(m))
        return false;
    uint32_t h = hash_name(key);
    size_t j = name_map_slot(m, key, h);
    if (!m->keys[j]) {
        m->keys[j] = key;
        m->hashes[j] = h;
        m->count++;
    }
    m->values[j] = value;
    return true;
}

int32_t mc_name_map_get(const mc_name_map *m, const char *key)
{
    if (!m->cap)
        return -1;
    size_t j = name_map_slot(m, key, hash_name(key));
    return m->keys[j] ? m->values[j] : -1;
}

void mc_name_map_free(mc_name_map *m)
{
    free(m->keys);
    free(m->values);
    free(m->hashes);
    memset(m, 0, sizeof *m);
}

/* ---- names ------------------------------------------------------------------------------------ */

bool mc_name_is_valid(const char *name)
{
    static const char *const reserved[] = {"graph", "input", "param", "output", "inf", "nan",
                                           "true", "false", "f32", "f16", "bf16", "i32", "bool"};
    if (!name || !((name[0] >= 'A' && name[0] <= 'Z') || (name[0] >= 'a' && name[0] <= 'z') ||
                   name[0] == '_'))
        return false;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '.'))
            return false;
    for (size_t i = 0; i < sizeof reserved / sizeof *reserved; i++)
        if (strcmp(name, reserved[i]) == 0)
            return false;
    return true;
}

/* An error at (line, col) of the graph's file when the node came from one. */
static mc_status graph_fail_at(const mc_graph *g, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static mc_status graph_vfail_at(const mc_graph *g, int line, int col, const char *fmt, va_list ap)
{
    char msg[900];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (g && line > 0)
        return mc_fail_at(MC_ERR_INPUT, g->file, g->text, line, col, "%s", msg);
    return mc_fail(MC_ERR_INPUT, "%s", msg);
}

static mc_status graph_fail_at(const mc_graph *g, int line, int col, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mc_status st = graph_vfail_at(g, line, col, fmt, ap);
    va_end(ap);
    return st;
}

/* The node currently holding `name`, or -1 (entries of the map may be stale after a pass). */
static int32_t find_name(const mc_graph *g, const char *name)
{
    int32_t i = mc_name_map_get(&g->names, name);
    if (i >= 0 && i < g->nnodes && g->nodes[i].name && strcmp(g->nodes[i].name, name) == 0)
        return i;
    return -1;
}

/* Check and claim a name for node `index` (not yet set on the node). */
static mc_status claim_name(mc_graph *g, int32_t index, const char *name, int line, int col)
{
    if (!name)
        return graph_fail_at(g, line, col, "no name given (NULL)");
    if (!mc_name_is_valid(name))
        return graph_fail_at(g, line, col,
                             "'%s' is not a valid name (expected [A-Za-z_][A-Za-z0-9_.]*, not a "
                             "reserved word)", name);
    int32_t other = find_name(g, name);
    if (other >= 0 && other != index)
        return graph_fail_at(g, line, col, "'%s' is already defined (names are defined once)",
                             name);
    return MC_OK;
}

static bool set_name(mc_graph *g, int32_t index, const char *name)
{
    char *copy = mc_arena_strdup(&g->arena, name);
    if (!copy || !mc_name_map_put(&g->names, copy, index))
        return false;
    g->nodes[index].name = copy;
    return true;
}

mc_status mc_value_set_name(mc_graph *g, mc_value v, const char *name)
{
    if (!g)
        return mc_fail(MC_ERR_INPUT, "mc_value_set_name: no graph");
    if (v < 0 || v >= g->nnodes)
        return mc_fail(MC_ERR_INPUT, "mc_value_set_name: %d is not a value of this graph", v);
    mc_status st = claim_name(g, v, name, 0, 0);
    if (st)
        return st;
    if (!set_name(g, v, name))
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    return MC_OK;
}

const char *mc_node_name(const mc_graph *g, int index, char *buf, size_t size)
{
    if (index >= 0 && index < g->nnodes && g->nodes[index].name)
        return g->nodes[index].name;
    snprintf(buf, size, "t%d", index);
    return buf;
}

int64_t mc_node_numel(const mc_node *n)
{
    int64_t numel = 1;
    for (int i = 0; i < n->rank; i++) {
        MC_ASSERT(!mc_dim_is_sym(n->shape[i])); /* a symbolic graph is specialised first */
        numel *= n->shape[i];
    }
    return numel;
}

/* ---- the graph ------------------------------------------------------------------------------- */

mc_graph *mc_graph_new(const char *name)
{
    mc_graph *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    if (name && !(g->name = mc_arena_strdup(&g->arena, name))) {
        free(g);
        return NULL;
    }
    return g;
}

void mc_graph_free(mc_graph *g)
{
    if (!g)
        return;
    free(g->nodes);
    mc_name_map_free(&g->names);
    mc_arena_free(&g->arena);
    mc_dims_free(g->dims);
    free(g);
}

/* Append n (already inferred), copying its operand list into the arena. */
static mc_value append(mc_graph *g, const mc_node *n)
{
    if (g->nnodes == g->cap) {
        if (g->cap >= INT32_MAX / 2) {
            mc_fail(MC_ERR_INPUT, "the graph has too many nodes (at most %d)", INT32_MAX / 2);
            return MC_ERROR;
        }
        int cap = g->cap ? g->cap * 2 : 64;
        mc_node *nodes = realloc(g->nodes, sizeof *nodes * (size_t)cap);
        if (!nodes)
            goto oom;
        g->nodes = nodes;
        g->cap = cap;
    }
    mc_node *dst = &g->nodes[g->nnodes];
    *dst = *n;
    dst->in = NULL;
    dst->name = NULL;
    if (n->nin > 0) {
        dst->in = mc_arena_alloc(&g->arena, sizeof(int32_t) * (size_t)n->nin);
        if (!dst->in)
            goto oom;
        memcpy(dst->in, n->in, sizeof(int32_t) * (size_t)n->nin);
    }
    return g->nnodes++;
oom:
    mc_fail(MC_ERR_SYSTEM, "out of memory building the graph");
    return MC_ERROR;
}

mc_value mc_graph_add(mc_graph *g, mc_op op, const mc_value *in, int nin, const mc_attrs *attr,
                      int line, int col)
{
    if (!g) {
        mc_fail(MC_ERR_INPUT, "no graph (NULL)");
        return MC_ERROR;
    }
    if ((unsigned)op >= MC_NUM_OPS) {
        g->failed = true;
        graph_fail_at(g, line, col, "invalid operator %d", (int)op);
        return MC_ERROR;
    }
    const char *opname = mc_op_table[op].name;
    if (op == MC_OP_INPUT || op == MC_OP_PARAM) {
        g->failed = true;
        graph_fail_at(g, line, col, "%s: declared with mc_graph_declare, not added", opname);
        return MC_ERROR;
    }
    if (nin < 0 || (nin > 0 && !in)) {
        g->failed = true;
        graph_fail_at(g, line, col, "%s: no operand list", opname);
        return MC_ERROR;
    }
    for (int i = 0; i < nin; i++)
        if (in[i] == MC_ERROR) { /* an earlier builder failed and said why */
            g->failed = true;
            return MC_ERROR;
        }
    for (int i = 0; i < nin; i++)
        if (in[i] < 0 || in[i] >= g->nnodes) {
            g->failed = true;
            if (in[i] == MC_NONE)
                graph_fail_at(g, line, col, "%s: operand %d is missing (MC_NONE)", opname, i + 1);
            else
                graph_fail_at(g, line, col, "%s: operand %d (%d) is not a value of this graph",
                              opname, i + 1, in[i]);
            return MC_ERROR;
        }
    mc_node n = {0};
    n.op = op;
    n.nin = nin;
    n.in = (int32_t *)in;
    if (attr)
        n.attr = *attr;
    n.line = line;
    n.col = col;
    n.origin = op;
    n.user = g->nnodes; /* its own index: append() gives it the next one */
    mc_value v = MC_ERROR;
    if (mc_node_infer(g, &n) == MC_OK)
        v = append(g, &n);
    if (v == MC_ERROR)
        g->failed = true;
    return v;
}

mc_value mc_graph_declare(mc_graph *g, mc_op op, const char *name, mc_dtype dtype,
                          const int64_t *shape, int rank, int line, int col)
{
    if (!g) {
        mc_fail(MC_ERR_INPUT, "no graph (NULL)");
        return MC_ERROR;
    }
    bool failed_before = g->failed;
    g->failed = true; /* until it succeeds */
    const char *what = op == MC_OP_PARAM ? "param" : "input";
    if (!name) {
        graph_fail_at(g, line, col, "%s: no name given (NULL)", what);
        return MC_ERROR;
    }
    if (op != MC_OP_INPUT && op != MC_OP_PARAM) {
        graph_fail_at(g, line, col, "mc_graph_declare: operator must be input or param");
        return MC_ERROR;
    }
    if (rank < 0 || rank > MC_MAX_RANK) {
        graph_fail_at(g, line, col, "%s %s: rank %d is above the maximum of %d", what, name,
                      rank, MC_MAX_RANK);
        return MC_ERROR;
    }
    if (rank > 0 && !shape) {
        graph_fail_at(g, line, col, "%s %s: no shape", what, name);
        return MC_ERROR;
    }
    if (claim_name(g, g->nnodes, name, line, col))
        return MC_ERROR;
    mc_node n = {0};
    n.op = op;
    n.dtype = dtype;
    n.rank = rank;
    if (rank > 0)
        memcpy(n.shape, shape, sizeof(int64_t) * (size_t)rank);
    n.line = line;
    n.col = col;
    n.origin = op;
    n.user = g->nnodes;
    n.name = name; /* so that inference's messages say `input x:` */
    if (mc_node_infer(g, &n))
        return MC_ERROR;
    mc_value v = append(g, &n);
    if (v == MC_ERROR)
        return MC_ERROR;
    if (!set_name(g, v, name)) {
        g->nnodes--;
        mc_fail(MC_ERR_SYSTEM, "out of memory building the graph");
        return MC_ERROR;
    }
    g->failed = failed_before;
    return v;
}

mc_status mc_graph_set_outputs(mc_graph *g, const mc_value *values, int n)
{
    if (!g)
        return mc_fail(MC_ERR_INPUT, "mc_graph_set_outputs: no graph (NULL)");
    if (g->failed)
        return mc_fail(MC_ERR_INPUT, "cannot set the outputs: an earlier call that built this "
                                     "graph failed (check the first failing builder's message)");
    if (n < 1 || !values)
        return mc_fail(MC_ERR_INPUT, "a graph needs at least one output");
    for (int i = 0; i < n; i++) {
        if (values[i] < 0 || values[i] >= g->nnodes)
            return mc_fail(MC_ERR_INPUT, "output %d (%d) is not a value of this graph", i + 1,
                           values[i]);
        for (int j = 0; j < i; j++)
            if (values[j] == values[i]) {
                char buf[32];
                return mc_fail(MC_ERR_INPUT, "output %s is listed twice (each value once)",
                               mc_node_name(g, values[i], buf, sizeof buf));
            }
    }
    int32_t *outputs = mc_arena_alloc(&g->arena, sizeof(int32_t) * (size_t)n);
    if (!outputs)
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    memcpy(outputs, values, sizeof(int32_t) * (size_t)n);
    g->outputs = outputs;
    g->noutputs = n;
    return MC_OK;
}

static bool copy_str(mc_arena *a, const char **dst, const char *src)
{
    *dst = NULL;
    return !src || (*dst = mc_arena_strdup(a, src)) != NULL;
}

mc_graph *mc_graph_clone(const mc_graph *g)
{
    if (!g)
        return NULL;
    mc_graph *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->failed = g->failed;
    if (g->dims && !(c->dims = mc_dims_clone(g->dims)))
        goto oom;
    if (!copy_str(&c->arena, &c->name, g->name) || !copy_str(&c->arena, &c->file, g->file) ||
        !copy_str(&c->arena, &c->text, g->text))
        goto oom;
    if (g->nnodes > 0) {
        c->nodes = malloc(sizeof *c->nodes * (size_t)g->nnodes);
        if (!c->nodes)
            goto oom;
        c->cap = g->nnodes;
    }
    for (int i = 0; i < g->nnodes; i++) {
        const mc_node *s = &g->nodes[i];
        mc_node *d = &c->nodes[i];
        *d = *s;
        c->nnodes = i + 1;
        d->in = NULL;
        d->name = NULL;
        if (s->nin > 0) {
            if (!(d->in = mc_arena_alloc(&c->arena, sizeof(int32_t) * (size_t)s->nin)))
                goto oom;
            memcpy(d->in, s->in, sizeof(int32_t) * (size_t)s->nin);
        }
        if (s->name && !set_name(c, i, s->name))
            goto oom;
    }
    if (g->noutputs > 0) {
        int32_t *outputs = mc_arena_alloc(&c->arena, sizeof(int32_t) * (size_t)g->noutputs);
        if (!outputs)
            goto oom;
        memcpy(outputs, g->outputs, sizeof(int32_t) * (size_t)g->noutputs);
        c->outputs = outputs;
        c->noutputs = g->noutputs;
    }
    return c;
oom:
    mc_graph_free(c);
    return NULL;
}
