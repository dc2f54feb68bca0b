/* The `.graph` parser: docs/FORMAT.md §1's grammar, into a graph through mc_graph_declare and
 * mc_graph_add.
 *
 * The format is one statement per line and has no nesting deeper than an attribute's list, so
 * the parser is a flat recursive-descent one without recursion: a loop over statements, and for
 * each a function per statement form. It keeps one token of lookahead (an argument is an
 * attribute when a name is followed by '='). Every statement is checked completely before
 * anything is added to the graph, so each error names the token at fault: the undefined name,
 * the bad attribute, the second definition, the unexpected character. Type and shape mistakes
 * are found by inference inside mc_graph_add, which reports them at the operator's name.
 *
 * What the parser itself decides:
 *   - names: defined once (SSA), used only after their definition, never a reserved word; one
 *     hash table maps each name to its value. An unknown name sends a scan ahead through the
 *     rest of the text, so the error can say "used before its definition at line N" rather than
 *     just "undefined".
 *   - attributes: which keys each operator takes, the type of each value, defaults, duplicates,
 *     and that operands come before attributes (ops.def's attribute columns).
 *   - number operands: each becomes an MC_OP_CONST node with the dtype of the other value
 *     operand (f32 when every operand is a number); an i32 one must be integral and in range, a
 *     bool one 0 or 1.
 *   - the statement structure: `graph` only first, exactly one `output`, each value named once.
 *
 * Numbers are converted with strtod_l in the C locale, so a host program that set a locale with
 * a decimal comma still reads `1.5` as one and a half. Integers are converted by hand with an
 * overflow check. Everything the parser allocates besides the graph (the name table, operand
 * lists) is freed on every path; on failure the graph is freed too and *out is NULL.
 */
#include "frontend/frontend.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the parser's state ------------------------------------------------------------------- */

typedef struct name_entry {
    const char *name; /* the value's name in the graph's arena; NULL: empty slot */
    size_t len;
    mc_value value;
} name_entry;

typedef struct operand {
    mc_token tok;
    bool is_number;
    mc_value value; /* a name's value, or the CONST node made for a number */
    double number;
} operand;

typedef struct parser {
    mc_graph *g;
    mc_lexer lx;
    mc_token tok;  /* the current token */
    mc_token next; /* one token of lookahead */
    mc_token last; /* the last token that was neither a newline nor the end */
    int statements;
    name_entry *names;
    size_t names_cap, names_count; /* cap: 0 or a power of two */
    operand *operands;
    size_t operands_cap;
    mc_value *outputs;
    int noutputs;
    int output_line; /* 0: no output statement yet */
    locale_t c_locale; /* created on the first decimal number */
    char *scratch;     /* a NUL-terminated copy of a number for strtod_l */
    size_t scratch_cap;
} parser;

/* ---- errors ------------------------------------------------------------------------------- */

/* A token for messages: 'text' (shortened when long), or what a newline or the end means. */
static const char *describe(const mc_token *t, char *buf, size_t size)
{
    switch (t->kind) {
    case MC_TOK_EOF: return "the end of the file";
    case MC_TOK_NEWLINE: return "the end of the line";
    default:
        if (t->len > 40)
            snprintf(buf, size, "'%.*s...'", 37, t->start);
        else
            snprintf(buf, size, "'%.*s'", (int)t->len, t->start);
        return buf;
    }
}

/* A name for messages, quoted and shortened the same way. */
#define NAME_FMT "'%.*s%s'"
#define NAME_ARGS(t) (int)((t)->len > 40 ? 37 : (t)->len), (t)->start, ((t)->len > 40 ? "..." : "")

static mc_status error_at(parser *p, const mc_token *t, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static mc_status error_at(parser *p, const mc_token *t, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return mc_fail_at(MC_ERR_INPUT, p->g->file, p->g->text, t->line, t->col, "%s", what);
}

static mc_status out_of_memory(parser *p)
{
    return mc_fail(MC_ERR_SYSTEM, "out of memory while parsing %s", p->g->file ? p->g->file : "a graph");
}

/* ---- tokens ------------------------------------------------------------------------------- */

static void advance(parser *p)
{
    if (p->tok.kind != MC_TOK_NEWLINE && p->tok.kind != MC_TOK_EOF)
        p->last = p->tok;
    p->tok = p->next;
    if (p->next.kind != MC_TOK_EOF && p->next.kind != MC_TOK_ERROR)
        p->next = mc_lexer_next(&p->lx);
}

/* The error for an unexpected token: the lexer's own message when it could not make one. */
static mc_status expected(parser *p, const char *what)
{
    if (p->tok.kind == MC_TOK_ERROR)
        return error_at(p, &p->tok, "%s", p->lx.error);
    char buf[64];
    return error_at(p, &p->tok, "expected %s, got %s", what, describe(&p->tok, buf, sizeof buf));
}

static bool tok_is(const mc_token *t, const char *word)
{
    size_t n = strlen(word);
    return t->kind != MC_TOK_ERROR && t->len == n && memcmp(t->start, word, n) == 0;
}

static bool word_is_dtype(const char *s, size_t n, mc_dtype *out)
{
    for (int d = 0; d < MC_NUM_DTYPES; d++) {
        const char *name = mc_dtype_name((mc_dtype)d);
        if (strlen(name) == n && memcmp(name, s, n) == 0) {
            *out = (mc_dtype)d;
            return true;
        }
    }
    return false;
}

static bool is_reserved(const mc_token *t)
{
    static const char *const words[] = {"graph", "input", "param", "output",
                                        "inf",   "nan",   "true",  "false"};
    if (t->kind != MC_TOK_NAME && t->kind != MC_TOK_NUMBER)
        return false;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (tok_is(t, words[i]))
            return true;
    mc_dtype d;
    return word_is_dtype(t->start, t->len, &d);
}

/* Expect a name that is not a reserved word; `what` says what the name is for. */
static mc_status expect_name(parser *p, const char *what)
{
    if (is_reserved(&p->tok))
        return error_at(p, &p->tok, NAME_FMT " is a reserved word and cannot be a name",
                        NAME_ARGS(&p->tok));
    if (p->tok.kind != MC_TOK_NAME)
        return expected(p, what);
    return MC_OK;
}

static mc_status expect(parser *p, mc_token_kind kind, const char *what)
{
    if (p->tok.kind != kind)
        return expected(p, what);
    advance(p);
    return MC_OK;
}

/* ---- numbers ------------------------------------------------------------------------------ */

/* An INT token's value; an error when the token is no INT or does not fit in 64 bits. */
static mc_status token_int(parser *p, const mc_token *t, const char *what, int64_t *out)
{
    if (t->kind != MC_TOK_NUMBER || !t->is_int) {
        if (t->kind == MC_TOK_ERROR)
            return error_at(p, t, "%s", p->lx.error);
        char buf[64];
        return error_at(p, t, "expected %s, got %s", what, describe(t, buf, sizeof buf));
    }
    const char *s = t->start, *end = t->start + t->len;
    bool negative = *s == '-';
    if (negative)
        s++;
    int64_t v = 0;
    for (; s < end; s++) {
        int digit = *s - '0';
        /* Accumulate on the negative side, which also holds INT64_MIN. */
        if (v < (INT64_MIN + digit) / 10)
            return error_at(p, t, "integer %.*s%s is out of range", (int)(t->len > 40 ? 37 : t->len),
                            t->start, t->len > 40 ? "..." : "");
        v = v * 10 - digit;
    }
    if (!negative) {
        if (v == INT64_MIN)
            return error_at(p, t, "integer %.*s%s is out of range", (int)(t->len > 40 ? 37 : t->len),
                            t->start, t->len > 40 ? "..." : "");
        v = -v;
    }
    *out = v;
    return MC_OK;
}

/* A NUMBER token's value; an error when it is out of the range of a double. */
static mc_status token_number(parser *p, const mc_token *t, double *out)
{
    const char *s = t->start;
    size_t n = t->len;
    bool negative = n > 0 && *s == '-';
    if (n > 0 && (*s == '-' || *s == '+'))
        s++, n--;
    if (n == 3 && memcmp(s, "inf", 3) == 0) {
        *out = negative ? -INFINITY : INFINITY;
        return MC_OK;
    }
    if (n == 3 && memcmp(s, "nan", 3) == 0) {
        *out = NAN;
        return MC_OK;
    }
    if (t->len + 1 > p->scratch_cap) {
        size_t cap = t->len + 1 < 64 ? 64 : t->len + 1;
        char *q = realloc(p->scratch, cap);
        if (!q)
            return out_of_memory(p);
        p->scratch = q;
        p->scratch_cap = cap;
    }
    memcpy(p->scratch, t->start, t->len);
    p->scratch[t->len] = '\0';
    if (!p->c_locale)
        p->c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    errno = 0;
    char *end;
    double v = p->c_locale ? strtod_l(p->scratch, &end, p->c_locale) : strtod(p->scratch, &end);
    if (end != p->scratch + t->len)
        return error_at(p, t, "invalid number " NAME_FMT, NAME_ARGS(t));
    if (errno == ERANGE && isinf(v))
        return error_at(p, t, "number " NAME_FMT " is out of range (write inf for infinity)",
                        NAME_ARGS(t));
    *out = v;
    return MC_OK;
}

/* ---- names -------------------------------------------------------------------------------- */

static uint64_t hash_name(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h ^ (h >> 29);
}

static name_entry *name_slot(const parser *p, const char *s, size_t n)
{
    size_t mask = p->names_cap - 1;
    for (size_t i = (size_t)hash_name(s, n) & mask;; i = (i + 1) & mask) {
        name_entry *e = &p->names[i];
        if (!e->name || (e->len == n && memcmp(e->name, s, n) == 0))
            return e;
    }
}

static bool lookup(const parser *p, const mc_token *t, mc_value *out)
{
    if (p->names_cap == 0)
        return false;
    name_entry *e = name_slot(p, t->start, t->len);
    if (!e->name)
        return false;
    *out = e->value;
    return true;
}

/* Record name -> value (the name was checked not to be defined yet). */
static mc_status define(parser *p, const char *name, size_t len, mc_value value)
{
    if (2 * (p->names_count + 1) > p->names_cap) { /* keep the table at most half full */
        size_t cap = p->names_cap ? p->names_cap * 2 : 64;
        if (cap < p->names_cap || cap > SIZE_MAX / sizeof(name_entry))
            return out_of_memory(p);
        name_entry *old = p->names;
        size_t old_cap = p->names_cap;
        p->names = calloc(cap, sizeof *p->names);
        if (!p->names) {
            p->names = old;
            return out_of_memory(p);
        }
        p->names_cap = cap;
        for (size_t i = 0; i < old_cap; i++)
            if (old[i].name)
                *name_slot(p, old[i].name, old[i].len) = old[i];
        free(old);
    }
    name_entry *e = name_slot(p, name, len);
    e->name = name;
    e->len = len;
    e->value = value;
    p->names_count++;
    return MC_OK;
}

/* The line of a later statement that defines the name, or 0: used to tell "used before its
 * definition" from "undefined". It looks at the first tokens of each line after `line` (a
 * separate lexer per line, so a line it cannot read is simply not a definition). */
static int later_definition(const parser *p, const mc_token *name, int line)
{
    const char *text = p->g->text, *end = text + strlen(text);
    const char *s = text;
    for (int at = 1; s < end; at++) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *line_end = nl ? nl : end;
        if (at > line) {
            mc_lexer lx;
            mc_lexer_init(&lx, s, (size_t)(line_end - s));
            mc_token t1 = mc_lexer_next(&lx);
            mc_token t2 = t1.kind == MC_TOK_NAME ? mc_lexer_next(&lx) : t1;
            const mc_token *defined = NULL;
            if (t1.kind == MC_TOK_NAME && t2.kind == MC_TOK_EQUALS)
                defined = &t1;
            else if ((tok_is(&t1, "input") || tok_is(&t1, "param")) && t2.kind == MC_TOK_NAME)
                defined = &t2;
            if (defined && defined->len == name->len &&
                memcmp(defined->start, name->start, name->len) == 0)
                return at;
        }
        s = line_end + 1;
    }
    return 0;
}

/* Resolve a name used as an operand or output; the error says why it is not usable. */
static mc_status resolve(parser *p, const mc_token *t, const mc_token *defining, mc_value *out)
{
    if (lookup(p, t, out))
        return MC_OK;
    if (is_reserved(t))
        return error_at(p, t, NAME_FMT " is a reserved word, not a value", NAME_ARGS(t));
    if (defining && defining->len == t->len && memcmp(defining->start, t->start, t->len) == 0)
        return error_at(p, t, NAME_FMT " is used in its own definition", NAME_ARGS(t));
    int later = later_definition(p, t, t->line);
    if (later)
        return error_at(p, t, NAME_FMT " is used before its definition at line %d", NAME_ARGS(t),
                        later);
    return error_at(p, t, "undefined name " NAME_FMT, NAME_ARGS(t));
}

/* A name about to be defined: not reserved, not defined before. */
static mc_status check_new_name(parser *p, const mc_token *t)
{
    if (mc_dim_find_sym(p->g, t->start, t->len) >= 0)
        return error_at(p, t, NAME_FMT " is a symbolic dimension; a value cannot have its name", NAME_ARGS(t));
    mc_value v;
    if (lookup(p, t, &v)) {
        const mc_node *n = &p->g->nodes[v];
        return error_at(p, t, NAME_FMT " is already defined at line %d", NAME_ARGS(t), n->line);
    }
    return MC_OK;
}

static const char *copy_name(parser *p, const mc_token *t)
{
    return mc_arena_strndup(&p->g->arena, t->start, t->len);
}

/* ---- types -------------------------------------------------------------------------------- */

/* DTYPE at the current token. */
static mc_status parse_dtype(parser *p, mc_dtype *out)
{
    if (p->tok.kind == MC_TOK_NAME && word_is_dtype(p->tok.start, p->tok.len, out)) {
        advance(p);
        return MC_OK;
    }
    if (p->tok.kind == MC_TOK_NAME)
        return error_at(p, &p->tok, "unknown dtype " NAME_FMT " (expected f32, f16, bf16, i32 or bool)",
                        NAME_ARGS(&p->tok));
    return expected(p, "a dtype (f32, f16, bf16, i32 or bool)");
}

/* What a bracketed integer list holds (docs/FORMAT.md §1 DIM): plain integers (axes, perm,
 * pads), dimensions of a declaration (INT, or a symbol NAME, optionally NAME<=INT, which
 * declares it), or dimensions of an attribute (INT or an already declared symbol; `shape` of
 * reshape and expand also -1, checked by the caller). */
typedef enum { LIST_INTS, LIST_DECLARED_DIMS, LIST_ATTR_DIMS, LIST_ATTR_SHAPE } list_kind;

/* '[' [ ENTRY (',' ENTRY)* ] ']' into list; dimensions (every kind but LIST_INTS except
 * LIST_ATTR_SHAPE) are positive and their product fits in 64 bits. `first` gets the '[' token
 * (for errors about the list as a whole). */
static mc_status parse_int_list_max(parser *p, list_kind kind, int64_t *list, int *n, mc_token *first, int max);
static mc_status parse_int_list(parser *p, list_kind kind, int64_t *list, int *n, mc_token *first)
{
    return parse_int_list_max(p, kind, list, n, first, MC_MAX_RANK);
}

/* A symbolic dimension at the current token (a NAME), with its optional `<=` maximum: declared
 * in a declaration's type, looked up (it must be declared already) in an attribute list. */
static mc_status parse_symbol(parser *p, list_kind kind, int64_t *out)
{
    mc_token name = p->tok;
    mc_status st = expect_name(p, "a dimension");
    if (st)
        return st;
    mc_value v;
    if (lookup(p, &name, &v))
        return error_at(p, &name, NAME_FMT " is a value (defined at line %d), not a dimension", NAME_ARGS(&name),
                        p->g->nodes[v].line);
    advance(p);
    if (kind != LIST_DECLARED_DIMS && mc_dim_find_sym(p->g, name.start, name.len) < 0)
        return error_at(p, &name, NAME_FMT " is not a dimension declared in an input or param type", NAME_ARGS(&name));
    /* `NAME<=INT` at any use, an attribute list's too (docs/FORMAT.md §1: DIM in VALUE) */
    int64_t max = 0;
    if (p->tok.kind == MC_TOK_LE) {
        advance(p);
        mc_token bound = p->tok;
        if ((st = token_int(p, &bound, "the dimension's maximum (a positive integer)", &max)))
            return st;
        if (max < 1)
            return error_at(p, &bound, "the maximum of " NAME_FMT " must be positive, not %lld", NAME_ARGS(&name),
                            (long long)max);
        advance(p);
    }
    *out = mc_dim_declare(p->g, name.start, name.len, max, name.line, name.col);
    return *out ? MC_OK : mc_error_status();
}

/* At most `max` entries. */
static mc_status parse_int_list_max(parser *p, list_kind kind, int64_t *list, int *n, mc_token *first, int max)
{
    *first = p->tok;
    mc_status st = expect(p, MC_TOK_LBRACKET, "'['");
    if (st)
        return st;
    *n = 0;
    int64_t numel = 1;
    bool dims = kind == LIST_DECLARED_DIMS || kind == LIST_ATTR_DIMS;
    if (p->tok.kind == MC_TOK_RBRACKET) {
        advance(p);
        return MC_OK;
    }
    for (;;) {
        if (*n == max)
            return error_at(p, &p->tok, "too many entries in the list (the most is %d)", max);
        int64_t v;
        if (kind != LIST_INTS && p->tok.kind == MC_TOK_NAME) {
            if ((st = parse_symbol(p, kind, &v)))
                return st;
            list[(*n)++] = v;
        } else {
            if ((st = token_int(p, &p->tok, dims ? "a dimension (a positive integer or a name)" : "an integer", &v)))
                return st;
            if (dims) {
                if (v <= 0)
                    return error_at(p, &p->tok, "dimension %lld must be positive", (long long)v);
                if (mc_mul_overflows(numel, v, &numel))
                    return error_at(p, &p->tok,
                                    "the shape has too many elements (their count overflows 64 bits)");
            }
            list[(*n)++] = v;
            advance(p);
        }
        if (p->tok.kind == MC_TOK_RBRACKET) {
            advance(p);
            return MC_OK;
        }
        if ((st = expect(p, MC_TOK_COMMA, "',' or ']'")))
            return st;
    }
}

/* ---- statements: graph, input/param, output ----------------------------------------------- */

static mc_status parse_graph_statement(parser *p)
{
    mc_token kw = p->tok;
    if (p->statements > 0)
        return error_at(p, &kw, "'graph' must be the first statement");
    advance(p);
    mc_status st = expect_name(p, "the graph's name");
    if (st)
        return st;
    if (!(p->g->name = copy_name(p, &p->tok)))
        return out_of_memory(p);
    advance(p);
    return MC_OK;
}

static mc_status parse_declaration(parser *p)
{
    mc_op op = tok_is(&p->tok, "input") ? MC_OP_INPUT : MC_OP_PARAM;
    advance(p);
    mc_token name = p->tok;
    mc_status st = expect_name(p, op == MC_OP_INPUT ? "the input's name" : "the param's name");
    if (st || (st = check_new_name(p, &name)))
        return st;
    advance(p);
    if ((st = expect(p, MC_TOK_COLON, "':' and a type")))
        return st;
    mc_dtype dtype;
    if ((st = parse_dtype(p, &dtype)))
        return st;
    int64_t shape[MC_MAX_RANK];
    int rank;
    mc_token bracket;
    if ((st = parse_int_list(p, LIST_DECLARED_DIMS, shape, &rank, &bracket)))
        return st;
    if (mc_dim_find_sym(p->g, name.start, name.len) >= 0)
        return error_at(p, &name, NAME_FMT " is a symbolic dimension; a value cannot have its name",
                        NAME_ARGS(&name));
    const char *copy = copy_name(p, &name);
    if (!copy)
        return out_of_memory(p);
    mc_value v = mc_graph_declare(p->g, op, copy, dtype, shape, rank, name.line, name.col);
    if (v < 0)
        return mc_error_status() ? mc_error_status() : MC_ERR_SYSTEM;
    return define(p, copy, name.len, v);
}

static mc_status parse_output(parser *p)
{
    mc_token kw = p->tok;
    if (p->output_line)
        return error_at(p, &kw, "a second 'output' statement (the first is at line %d)",
                        p->output_line);
    advance(p);
    bool *named = calloc((size_t)p->g->nnodes + 1, sizeof *named);
    if (!named)
        return out_of_memory(p);
    mc_status st = MC_OK;
    size_t cap = 0;
    for (;;) {
        mc_token t = p->tok;
        mc_value v;
        if ((st = expect_name(p, "the name of an output")) || (st = resolve(p, &t, NULL, &v)))
            break;
        if (named[v]) {
            st = error_at(p, &t, NAME_FMT " is named twice in 'output'", NAME_ARGS(&t));
            break;
        }
        named[v] = true;
        if ((size_t)p->noutputs == cap) {
            size_t grown = cap ? cap * 2 : 8;
            mc_value *q = grown <= (size_t)INT_MAX ? realloc(p->outputs, grown * sizeof *q) : NULL;
            if (!q) {
                st = out_of_memory(p);
                break;
            }
            p->outputs = q;
            cap = grown;
        }
        p->outputs[p->noutputs++] = v;
        advance(p);
        if (p->tok.kind != MC_TOK_COMMA)
            break;
        advance(p);
    }
    free(named);
    if (st == MC_OK)
        p->output_line = kw.line;
    return st;
}

/* ---- operator statements: attributes ------------------------------------------------------ */

/* Which attributes an operator takes, and which of them it needs, are ops.def's columns
 * (mc_op_table[op].attrs and .required); the keys are ir.h's mc_attr_key. */

/* "axis, keepdim" for messages. */
static void list_keys(unsigned set, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k < MC_NUM_ATTRS; k++)
        if (set & MC_ATTR_BIT(k)) {
            int w = snprintf(buf + used, size - used, "%s%s", used ? ", " : "", mc_attr_names[k]);
            if (w < 0 || (size_t)w >= size - used)
                return;
            used += (size_t)w;
        }
}

/* `true` or `false` at the current token. */
static mc_status parse_bool(parser *p, const char *key, bool *out)
{
    if (tok_is(&p->tok, "true") || tok_is(&p->tok, "false")) {
        *out = tok_is(&p->tok, "true");
        advance(p);
        return MC_OK;
    }
    char what[64];
    snprintf(what, sizeof what, "true or false for '%s'", key);
    return expected(p, what);
}

/* One `KEY=VALUE` at the current token (a name followed by '='), into attrs. */
static mc_status parse_attribute(parser *p, mc_op op, unsigned *seen, mc_attrs *attrs)
{
    mc_token key = p->tok;
    int k = 0;
    while (k < MC_NUM_ATTRS && !tok_is(&key, mc_attr_names[k]))
        k++;
    unsigned allowed = mc_op_table[op].attrs;
    const char *opname = mc_op_table[op].name;
    if (k == MC_NUM_ATTRS || !(allowed & MC_ATTR_BIT(k))) {
        char keys[128];
        list_keys(allowed, keys, sizeof keys);
        if (!allowed)
            return error_at(p, &key, "unknown attribute " NAME_FMT ": '%s' takes no attributes",
                            NAME_ARGS(&key), opname);
        return error_at(p, &key, "unknown attribute " NAME_FMT " for '%s' (it takes %s)",
                        NAME_ARGS(&key), opname, keys);
    }
    if (*seen & MC_ATTR_BIT(k))
        return error_at(p, &key, "duplicate attribute '%s'", mc_attr_names[k]);
    *seen |= MC_ATTR_BIT(k);
    advance(p); /* the key */
    advance(p); /* '=' */
    mc_status st = MC_OK;
    mc_token first;
    char what[96];
    switch ((mc_attr_key)k) {
    case MC_ATTR_AXIS:
        if (mc_op_table[op].kind == MC_KIND_REDUCE && p->tok.kind == MC_TOK_LBRACKET) {
            int n;
            if ((st = parse_int_list(p, LIST_INTS, attrs->list, &n, &first)))
                return st;
            if (n == 0)
                return error_at(p, &first, "'axis' is an empty list: leave 'axis' out to reduce "
                                           "every axis");
            attrs->nlist = n;
            attrs->has_list = true;
            return MC_OK;
        }
        snprintf(what, sizeof what, "an integer for 'axis'%s",
                 mc_op_table[op].kind == MC_KIND_REDUCE ? " (or a list of them)" : "");
        if ((st = token_int(p, &p->tok, what, &attrs->axis)))
            return st;
        if (mc_op_table[op].kind == MC_KIND_REDUCE) {
            attrs->list[0] = attrs->axis;
            attrs->nlist = 1;
            attrs->has_list = true;
        }
        advance(p);
        return MC_OK;
    case MC_ATTR_START:
    case MC_ATTR_END:
    case MC_ATTR_STEP: {
        snprintf(what, sizeof what, "an integer for '%s'", mc_attr_names[k]);
        int64_t *to = k == MC_ATTR_START ? &attrs->start : k == MC_ATTR_END ? &attrs->end : &attrs->step;
        if ((st = token_int(p, &p->tok, what, to)))
            return st;
        if (k == MC_ATTR_STEP && *to == 0)
            return error_at(p, &p->tok, "'step' must not be 0");
        advance(p);
        return MC_OK;
    }
    case MC_ATTR_KEEPDIM:
        return parse_bool(p, "keepdim", &attrs->keepdim);
    case MC_ATTR_PERM:
    case MC_ATTR_SHAPE: {
        int n;
        bool dims = k == MC_ATTR_SHAPE && (op == MC_OP_IOTA || op == MC_OP_FULL);
        list_kind kind = k != MC_ATTR_SHAPE ? LIST_INTS : dims ? LIST_ATTR_DIMS : LIST_ATTR_SHAPE;
        if ((st = parse_int_list(p, kind, attrs->list, &n, &first)))
            return st;
        if (k == MC_ATTR_SHAPE && !dims) /* reshape and expand: -1 is allowed, 0 never */
            for (int i = 0; i < n; i++)
                if (!mc_dim_is_sym(attrs->list[i]) && (attrs->list[i] == 0 || attrs->list[i] < -1))
                    return error_at(p, &first, "dimension %lld in 'shape' must be positive (or -1)",
                                    (long long)attrs->list[i]);
        attrs->nlist = n;
        attrs->has_list = true;
        return MC_OK;
    }
    case MC_ATTR_EPS:
    case MC_ATTR_VALUE:
        if (p->tok.kind != MC_TOK_NUMBER) {
            snprintf(what, sizeof what, "a number for '%s'", mc_attr_names[k]);
            return expected(p, what);
        }
        if ((st = token_number(p, &p->tok, &attrs->value)))
            return st;
        advance(p);
        return MC_OK;
    case MC_ATTR_TO:
    case MC_ATTR_DTYPE:
        return parse_dtype(p, &attrs->dtype);
    case MC_ATTR_PADS:
    case MC_ATTR_KERNEL:
    case MC_ATTR_STRIDE:
    case MC_ATTR_PADDING:
    case MC_ATTR_DILATION: {
        int n, max = k == MC_ATTR_PADS ? 2 * MC_MAX_RANK : 2;
        int64_t *to = k == MC_ATTR_PADS ? attrs->pads : k == MC_ATTR_KERNEL ? attrs->kernel
                    : k == MC_ATTR_STRIDE ? attrs->stride : k == MC_ATTR_PADDING ? attrs->padding : attrs->dilation;
        if ((st = parse_int_list_max(p, LIST_INTS, to, &n, &first, max)))
            return st;
        bool zero_ok = k == MC_ATTR_PADS || k == MC_ATTR_PADDING;
        for (int i = 0; i < n; i++)
            if (to[i] < (zero_ok ? 0 : 1))
                return error_at(p, &first, "'%s' must hold integers >= %d, not %lld", mc_attr_names[k],
                                zero_ok ? 0 : 1, (long long)to[i]);
        *(k == MC_ATTR_PADS ? &attrs->npads : k == MC_ATTR_KERNEL ? &attrs->nkernel
          : k == MC_ATTR_STRIDE ? &attrs->nstride : k == MC_ATTR_PADDING ? &attrs->npadding : &attrs->ndilation) = n;
        return MC_OK;
    }
    case MC_ATTR_GROUPS:
        if ((st = token_int(p, &p->tok, "an integer for 'groups'", &attrs->groups)))
            return st;
        if (attrs->groups < 1)
            return error_at(p, &p->tok, "'groups' must be at least 1");
        advance(p);
        return MC_OK;
    case MC_ATTR_ALPHA:
    case MC_ATTR_MIN:
    case MC_ATTR_MAX: {
        if (p->tok.kind != MC_TOK_NUMBER) {
            snprintf(what, sizeof what, "a number for '%s'", mc_attr_names[k]);
            return expected(p, what);
        }
        double *to = k == MC_ATTR_ALPHA ? &attrs->alpha : k == MC_ATTR_MIN ? &attrs->lo : &attrs->hi;
        if ((st = token_number(p, &p->tok, to)))
            return st;
        if (k == MC_ATTR_MIN)
            attrs->has_lo = true;
        if (k == MC_ATTR_MAX)
            attrs->has_hi = true;
        advance(p);
        return MC_OK;
    }
    case MC_NUM_ATTRS:
        break;
    }
    return MC_OK;
}

/* ---- operator statements: operands -------------------------------------------------------- */

static mc_status push_operand(parser *p, size_t n, const operand *o)
{
    if (n == p->operands_cap) {
        size_t cap = p->operands_cap ? p->operands_cap * 2 : 8;
        if (cap > (size_t)INT_MAX)
            return error_at(p, &o->tok, "too many operands");
        operand *q = realloc(p->operands, cap * sizeof *q);
        if (!q)
            return out_of_memory(p);
        p->operands = q;
        p->operands_cap = cap;
    }
    p->operands[n] = *o;
    return MC_OK;
}

/* Turn each number operand into a CONST node with the dtype of the other value operand. */
static mc_status make_constants(parser *p, mc_op op, size_t n)
{
    bool select = op == MC_OP_WHERE;
    mc_dtype other = MC_F32;
    for (size_t i = select ? 1 : 0; i < n; i++)
        if (!p->operands[i].is_number) {
            other = p->g->nodes[p->operands[i].value].dtype;
            break;
        }
    for (size_t i = 0; i < n; i++) {
        operand *o = &p->operands[i];
        if (!o->is_number)
            continue;
        mc_dtype dtype = select && i == 0 ? MC_BOOL : (op == MC_OP_GATHER && i == 1) || (op == MC_OP_UPDATE && i == 2) ? MC_I32 : other;
        double x = o->number;
        if (dtype == MC_I32 && !(x == trunc(x) && x >= INT32_MIN && x <= INT32_MAX))
            return error_at(p, &o->tok,
                            "number " NAME_FMT " is used with an i32 operand and must be an integer "
                            "in the range of i32", NAME_ARGS(&o->tok));
        if (dtype == MC_BOOL && !(x == 0 || x == 1))
            return error_at(p, &o->tok,
                            "number " NAME_FMT " is used as a bool and must be 0 or 1",
                            NAME_ARGS(&o->tok));
        mc_attrs attrs = {0};
        attrs.value = x;
        attrs.dtype = dtype;
        mc_value v = mc_graph_add(p->g, MC_OP_CONST, NULL, 0, &attrs, o->tok.line, o->tok.col);
        if (v < 0)
            return mc_error_status() ? mc_error_status() : MC_ERR_SYSTEM;
        o->value = v;
    }
    return MC_OK;
}

/* "takes 2 operands", "takes 2 or 3 operands", "takes at least 1 operand", "takes no operands" */
static void describe_arity(const mc_op_info *info, char *buf, size_t size)
{
    if (info->max_in < 0)
        snprintf(buf, size, "at least %d operand%s", info->min_in, info->min_in == 1 ? "" : "s");
    else if (info->max_in == 0)
        snprintf(buf, size, "no operands");
    else if (info->min_in == info->max_in)
        snprintf(buf, size, "%d operand%s", info->min_in, info->min_in == 1 ? "" : "s");
    else
        snprintf(buf, size, "%d or %d operands", info->min_in, info->max_in);
}

/* "unknown operator 'sofmax' (did you mean 'softmax'?)" */
static mc_status unknown_operator(parser *p, const mc_token *tok)
{
    const char *names[MC_NUM_OPS];
    int n = 0;
    for (int i = 0; i < MC_NUM_OPS; i++)
        if (mc_op_table[i].kind != MC_KIND_LEAF)
            names[n++] = mc_op_table[i].name;
    char near[256];
    if (mc_suggest(tok->start, tok->len, names, n, near, sizeof near))
        return error_at(p, tok, "unknown operator " NAME_FMT " (did you mean %s?)", NAME_ARGS(tok),
                        near);
    return error_at(p, tok, "unknown operator " NAME_FMT, NAME_ARGS(tok));
}

/* NAME '=' OP '(' args ')' with the current token at NAME. */
static mc_status parse_assignment(parser *p)
{
    mc_token name = p->tok;
    mc_status st = expect_name(p, "a statement");
    if (st || (st = check_new_name(p, &name)))
        return st;
    advance(p);
    if ((st = expect(p, MC_TOK_EQUALS, "'=' after the name")))
        return st;
    mc_token optok = p->tok;
    if (optok.kind != MC_TOK_NAME)
        return expected(p, "an operator name");
    mc_op op;
    if (!mc_op_parse(optok.start, optok.len, &op))
        return unknown_operator(p, &optok);
    const mc_op_info *info = &mc_op_table[op];
    advance(p);
    if ((st = expect(p, MC_TOK_LPAREN, "'(' after the operator")))
        return st;

    size_t n = 0;
    unsigned seen = 0;
    mc_attrs attrs = mc_op_default_attrs(op);
    mc_token extra = {0}; /* the first operand past the operator's maximum */
    if (p->tok.kind != MC_TOK_RPAREN) {
        for (;;) {
            if (p->tok.kind == MC_TOK_NAME && p->next.kind == MC_TOK_EQUALS) {
                if ((st = parse_attribute(p, op, &seen, &attrs)))
                    return st;
            } else if (p->tok.kind == MC_TOK_NAME || p->tok.kind == MC_TOK_NUMBER) {
                if (seen)
                    return error_at(p, &p->tok,
                                    "operand after an attribute: operands come first");
                operand o = {.tok = p->tok, .is_number = p->tok.kind == MC_TOK_NUMBER};
                if (o.is_number)
                    st = token_number(p, &o.tok, &o.number);
                else
                    st = resolve(p, &o.tok, &name, &o.value);
                if (st || (st = push_operand(p, n, &o)))
                    return st;
                if (info->max_in >= 0 && n == (size_t)info->max_in && !extra.start)
                    extra = o.tok;
                n++;
                advance(p);
            } else {
                return expected(p, "an operand or an attribute");
            }
            if (p->tok.kind == MC_TOK_RPAREN)
                break;
            if ((st = expect(p, MC_TOK_COMMA, "',' or ')'")))
                return st;
        }
    }
    advance(p); /* ')' */

    char arity[48];
    describe_arity(info, arity, sizeof arity);
    if (extra.start)
        return error_at(p, &extra, "'%s' takes %s, got %zu", info->name, arity, n);
    if (n < (size_t)info->min_in)
        return error_at(p, &optok, "'%s' takes %s, got %zu", info->name, arity, n);
    unsigned missing = info->required & ~seen;
    if (missing) {
        char keys[128];
        list_keys(missing, keys, sizeof keys);
        return error_at(p, &optok, "'%s' needs the attribute%s %s", info->name,
                        (missing & (missing - 1)) ? "s" : "", keys);
    }
    if ((st = make_constants(p, op, n)))
        return st;

    mc_value *values = malloc((n ? n : 1) * sizeof *values);
    if (!values)
        return out_of_memory(p);
    for (size_t i = 0; i < n; i++)
        values[i] = p->operands[i].value;
    mc_value v = mc_graph_add(p->g, op, values, (int)n, &attrs, optok.line, optok.col);
    free(values);
    if (v < 0)
        return mc_error_status() ? mc_error_status() : MC_ERR_SYSTEM;
    const char *copy = copy_name(p, &name);
    if (!copy)
        return out_of_memory(p);
    if ((st = mc_value_set_name(p->g, v, copy)))
        return st;
    return define(p, p->g->nodes[v].name, name.len, v);
}

/* ---- the file ----------------------------------------------------------------------------- */

static mc_status parse_statement(parser *p)
{
    mc_status st;
    if (tok_is(&p->tok, "graph") && p->tok.kind == MC_TOK_NAME && p->next.kind != MC_TOK_EQUALS)
        st = parse_graph_statement(p);
    else if ((tok_is(&p->tok, "input") || tok_is(&p->tok, "param")) && p->tok.kind == MC_TOK_NAME &&
             p->next.kind != MC_TOK_EQUALS)
        st = parse_declaration(p);
    else if (tok_is(&p->tok, "output") && p->tok.kind == MC_TOK_NAME && p->next.kind != MC_TOK_EQUALS)
        st = parse_output(p);
    else if (p->tok.kind == MC_TOK_NAME || is_reserved(&p->tok))
        st = parse_assignment(p); /* a reserved word before '=' is reported there */
    else
        return expected(p, "a statement");
    if (st)
        return st;
    p->statements++;
    if (p->tok.kind != MC_TOK_NEWLINE && p->tok.kind != MC_TOK_EOF) {
        if (p->tok.kind == MC_TOK_ERROR)
            return error_at(p, &p->tok, "%s", p->lx.error);
        char buf[64];
        return error_at(p, &p->tok, "unexpected %s after the statement (one statement per line)",
                        describe(&p->tok, buf, sizeof buf));
    }
    return MC_OK;
}

static mc_status parse_all(parser *p)
{
    mc_lexer_init(&p->lx, p->g->text, strlen(p->g->text));
    p->tok = mc_lexer_next(&p->lx);
    p->next = p->tok.kind == MC_TOK_EOF || p->tok.kind == MC_TOK_ERROR ? p->tok
                                                                        : mc_lexer_next(&p->lx);
    for (;;) {
        while (p->tok.kind == MC_TOK_NEWLINE)
            advance(p);
        if (p->tok.kind == MC_TOK_EOF)
            break;
        mc_status st = parse_statement(p);
        if (st)
            return st;
    }
    if (!p->output_line) {
        mc_token at = p->last;
        if (!at.start) {
            at.line = 1, at.col = 1;
        } else {
            at.col += (int)at.len;
        }
        return error_at(p, &at, "missing 'output' statement: a graph names its results with "
                                "`output NAME, ...`");
    }
    /* The list is already checked (defined values, each once): set it directly rather than
     * through mc_graph_set_outputs, whose pairwise check would be quadratic in the outputs. */
    int32_t *outputs = mc_arena_alloc(&p->g->arena, sizeof(int32_t) * (size_t)p->noutputs);
    if (!outputs)
        return out_of_memory(p);
    memcpy(outputs, p->outputs, sizeof(int32_t) * (size_t)p->noutputs);
    p->g->outputs = outputs;
    p->g->noutputs = p->noutputs;
    return MC_OK;
}

/* An error in a text that mc_text_check refused. The message shows the bad line with its bad
 * bytes as '?', so the message itself stays valid UTF-8 without NUL bytes; mc_fail_at finds a
 * line by counting newlines, so it gets (line - 1) newlines and then that cleaned line. */
static mc_status text_error(const char *filename, const char *text, size_t len, size_t offset,
                            const char *why)
{
    if (len >= (size_t)INT_MAX)
        return mc_fail(MC_ERR_INPUT, "cannot read %s: %s", filename ? filename : "the graph", why);
    size_t line = 1, line_start = 0;
    for (size_t i = 0; i < offset; i++)
        if (text[i] == '\n')
            line++, line_start = i + 1;
    size_t line_end = line_start;
    while (line_end < len && text[line_end] != '\n')
        line_end++;
    size_t n = line_end - line_start;
    char *shown = malloc(line - 1 + n + 1);
    if (!shown)
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    memset(shown, '\n', line - 1);
    char *clean = shown + line - 1;
    const char *src = text + line_start, *src_end = text + line_end;
    for (size_t i = 0; i < n;) {
        int k = src[i] == 0 ? 0 : (unsigned char)src[i] < 0x80 ? 1 : mc_utf8_length(src + i, src_end);
        if (k == 0) {
            clean[i++] = '?';
            continue;
        }
        memcpy(clean + i, src + i, (size_t)k);
        i += (size_t)k;
    }
    clean[n] = '\0';
    mc_status st = mc_fail_at(MC_ERR_INPUT, filename, shown, (int)line,
                              (int)(offset - line_start) + 1, "%s", why);
    free(shown);
    return st;
}

mc_status mc_graph_parse_text(const char *filename, const char *text, size_t len, mc_graph **out)
{
    if (!out)
        return mc_fail(MC_ERR_INPUT, "mc_graph_parse: out is NULL");
    *out = NULL;
    if (!text)
        return mc_fail(MC_ERR_INPUT, "mc_graph_parse: no text given");
    size_t bad;
    char why[128];
    if (!mc_text_check(text, len, &bad, why, sizeof why))
        return text_error(filename, text, len, bad, why);

    parser p = {0};
    p.g = mc_graph_new(NULL);
    if (!p.g)
        return mc_fail(MC_ERR_SYSTEM, "out of memory while parsing %s", filename ? filename : "a graph");
    mc_status st = MC_OK;
    if (filename && !(p.g->file = mc_arena_strdup(&p.g->arena, filename)))
        st = out_of_memory(&p);
    if (!st && !(p.g->text = mc_arena_strndup(&p.g->arena, text, len)))
        st = out_of_memory(&p);
    if (!st)
        st = parse_all(&p);
    free(p.names);
    free(p.operands);
    free(p.outputs);
    free(p.scratch);
    if (p.c_locale)
        freelocale(p.c_locale);
    if (st) {
        mc_graph_free(p.g);
        return st;
    }
    *out = p.g;
    return MC_OK;
}

mc_status mc_graph_parse_string(const char *filename, const char *text, mc_graph **out)
{
    return mc_graph_parse_text(filename, text, text ? strlen(text) : 0, out);
}

mc_status mc_graph_parse_file(const char *path, mc_graph **out)
{
    if (!out)
        return mc_fail(MC_ERR_INPUT, "mc_graph_parse_file: out is NULL");
    *out = NULL;
    if (!path)
        return mc_fail(MC_ERR_INPUT, "mc_graph_parse_file: no path given");
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; only regular files are read (a
     * FIFO or a device could block or never end), checked on the descriptor that is read. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return mc_fail(MC_ERR_INPUT, "cannot read %s: %s", path, strerror(errno));
    struct stat info;
    if (fstat(fd, &info) != 0) {
        int err = errno;
        close(fd);
        return mc_fail(MC_ERR_SYSTEM, "cannot read %s: %s", path, strerror(err));
    }
    if (!S_ISREG(info.st_mode)) {
        const char *what = S_ISDIR(info.st_mode)    ? "a directory"
                           : S_ISFIFO(info.st_mode) ? "a FIFO (named pipe)"
                           : S_ISCHR(info.st_mode)  ? "a character device"
                           : S_ISBLK(info.st_mode)  ? "a block device"
                                                    : "a special file";
        close(fd);
        return mc_fail(MC_ERR_INPUT, "cannot read %s: not a regular file (%s); minic reads only regular files",
                       path, what);
    }
    if (info.st_size >= INT_MAX) {
        close(fd);
        return mc_fail(MC_ERR_INPUT, "cannot read %s: the file is too large (%lld bytes)", path,
                       (long long)info.st_size);
    }
    (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return mc_fail(MC_ERR_SYSTEM, "out of memory reading %s", path);
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    mc_status st = MC_OK;
    while (buf) {
        if (len == cap) {
            if (cap >= (size_t)INT_MAX) { /* mc_text_check refuses it; stop reading here */
                break;
            }
            char *q = realloc(buf, cap * 2);
            if (!q) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = q;
            cap *= 2;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f))
                st = mc_fail(MC_ERR_INPUT, "cannot read %s: %s", path, strerror(errno));
            break;
        }
    }
    fclose(f);
    if (!buf)
        return mc_fail(MC_ERR_SYSTEM, "out of memory reading %s", path);
    if (!st)
        st = mc_graph_parse_text(path, buf, len, out);
    free(buf);
    return st;
}
