/* The `.graph` front end (frontend/lexer.c, parser.c): every example and the docs/FORMAT.md §1
 * example parse into the graph they describe; attributes get their defaults; number operands
 * become constants of the right dtype; and every class of mistake is reported at the exact
 * `file:line:col` of the token at fault, with a message that says what is wrong, a status of
 * MC_ERR_INPUT, no graph and no leak. The files in tests/data/parse/ (hand-written cases and
 * every input the fuzzer ever crashed on) are run too: see test_data_files.
 */
#include "testlib.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "ir/ir.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static mc_graph *parse_ok(const char *text)
{
    mc_graph *g = (mc_graph *)1;
    mc_status st = mc_graph_parse_string("t.graph", text, &g);
    if (st != MC_OK)
        fail_msg("expected to parse, got: %s\n--- text:\n%s", mc_error_message(), text);
    assert_non_null(g);
    return g;
}

/* Parse `len` bytes, expect MC_ERR_INPUT with a message that starts with
 * "t.graph:LOCATION: error: " and contains `phrase`; then the source line and a caret. */
static void expect_error_n(const char *text, size_t len, const char *location, const char *phrase)
{
    mc_graph *g = (mc_graph *)1;
    mc_status st = mc_graph_parse_text("t.graph", text, len, &g);
    const char *msg = mc_error_message();
    if (st != MC_ERR_INPUT)
        fail_msg("expected an input error at %s (%s), got status %d: %s", location, phrase, st,
                 st ? msg : "(parsed)");
    assert_null(g);
    assert_int_equal(mc_error_status(), MC_ERR_INPUT);
    char prefix[128];
    snprintf(prefix, sizeof prefix, "t.graph:%s: error: ", location);
    if (strncmp(msg, prefix, strlen(prefix)) != 0 || !strstr(msg, phrase))
        fail_msg("expected '%s...%s', got:\n%s", prefix, phrase, msg);
    /* The line follows, then a caret under the column. */
    const char *nl = strchr(msg, '\n');
    assert_non_null(nl);
    assert_non_null(strchr(nl + 1, '\n'));
    assert_non_null(strchr(nl + 1, '^'));
}

static void expect_error(const char *text, const char *location, const char *phrase)
{
    expect_error_n(text, strlen(text), location, phrase);
}

/* The caret line of the last error: the column of the '^' (1-based, tabs as one). */
static int caret_column(void)
{
    const char *msg = mc_error_message();
    const char *line2 = strchr(msg, '\n');
    assert_non_null(line2);
    const char *line3 = strchr(line2 + 1, '\n');
    assert_non_null(line3);
    const char *caret = strchr(line3 + 1, '^');
    assert_non_null(caret);
    return (int)(caret - (line3 + 1)) - 2 + 1; /* after the two-space indent */
}

static int find_node(const mc_graph *g, const char *name)
{
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].name && strcmp(g->nodes[i].name, name) == 0)
            return i;
    fail_msg("no node named %s", name);
    return -1;
}

#define HEADER "input x : f32[4, 8]\ninput i : i32[4, 8]\ninput b : bool[4, 8]\n"

/* ---- what parses -------------------------------------------------------------------------- */

static void test_examples(void **state)
{
    (void)state;
    const char *dir = mc_test_src("examples");
    DIR *d = opendir(dir);
    assert_non_null(d);
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 7 || strcmp(e->d_name + n - 6, ".graph") != 0)
            continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        mc_graph *g = NULL;
        if (mc_graph_parse_file(path, &g) != MC_OK)
            fail_msg("%s: %s", path, mc_error_message());
        assert_true(g->nnodes > 0);
        assert_true(g->noutputs > 0);
        assert_string_equal(g->file, path);
        assert_non_null(g->text);
        assert_non_null(g->name); /* every example starts with `graph NAME` */
        assert_non_null(strstr(e->d_name, g->name));
        mc_graph_free(g);
        count++;
    }
    closedir(d);
    assert_true(count >= 6);
}

static const char spec_example[] =
    "graph mlp                               # optional; first statement if present\n"
    "input  x      : f32[64, 256]            # a runtime input\n"
    "param  fc1.w  : f32[1024, 256]          # a weight: --weights by name, else seeded random\n"
    "param  fc1.b  : f32[1024]\n"
    "h  = linear(x, fc1.w, fc1.b)\n"
    "a  = gelu(h)\n"
    "y  = add(a, 1.5)                        # a number operand is a scalar constant\n"
    "s  = sum(y, axis=[0, 1], keepdim=false)\n"
    "output y, s                             # one or more outputs, in this order\n";

static void test_spec_example(void **state)
{
    (void)state;
    mc_graph *g = parse_ok(spec_example);
    assert_string_equal(g->name, "mlp");
    assert_string_equal(g->file, "t.graph");
    assert_string_equal(g->text, spec_example);
    int x = find_node(g, "x"), w = find_node(g, "fc1.w"), b = find_node(g, "fc1.b");
    assert_int_equal(g->nodes[x].op, MC_OP_INPUT);
    assert_int_equal(g->nodes[w].op, MC_OP_PARAM);
    assert_int_equal(g->nodes[w].rank, 2);
    assert_int_equal(g->nodes[w].shape[0], 1024);
    assert_int_equal(g->nodes[w].shape[1], 256);
    assert_int_equal(g->nodes[x].line, 2);
    int h = find_node(g, "h");
    assert_int_equal(g->nodes[h].op, MC_OP_LINEAR);
    assert_int_equal(g->nodes[h].nin, 3);
    assert_int_equal(g->nodes[h].in[0], x);
    assert_int_equal(g->nodes[h].in[1], w);
    assert_int_equal(g->nodes[h].in[2], b);
    assert_int_equal(g->nodes[h].line, 5);
    assert_int_equal(g->nodes[h].col, 6); /* the operator's name */
    int y = find_node(g, "y");
    assert_int_equal(g->nodes[y].op, MC_OP_ADD);
    const mc_node *c = &g->nodes[g->nodes[y].in[1]];
    assert_int_equal(c->op, MC_OP_CONST);
    assert_int_equal(c->dtype, MC_F32);
    assert_true(c->attr.value == 1.5);
    assert_int_equal(c->line, 7);
    assert_int_equal(c->col, 13);
    int s = find_node(g, "s");
    assert_int_equal(g->nodes[s].op, MC_OP_SUM);
    assert_true(g->nodes[s].attr.has_list);
    assert_int_equal(g->nodes[s].attr.nlist, 2);
    assert_int_equal(g->nodes[s].attr.list[0], 0);
    assert_int_equal(g->nodes[s].attr.list[1], 1);
    assert_false(g->nodes[s].attr.keepdim);
    assert_int_equal(g->noutputs, 2);
    assert_int_equal(g->outputs[0], y);
    assert_int_equal(g->outputs[1], s);
    mc_graph_free(g);
}

/* Comments, blank lines, free whitespace, CRLF, tabs, a byte-order mark, no final newline,
 * scientific literals, inf and nan. */
static void test_layout_and_numbers(void **state)
{
    (void)state;
    mc_graph *g = parse_ok("\xEF\xBB\xBF# only a comment\r\n\r\n   \t\n"
                           "input\tx:f32[ 4 ,8 ]   # é ü comments may hold any UTF-8\r\n"
                           "a=add(x,2.5e-3)\n"
                           "b = mul( a , -1E2 )\n"
                           "c = maximum(b, -inf)\n"
                           "d = minimum(c, inf)\n"
                           "e = add(d, nan)\n"
                           "f = add(e, .5)\n"
                           "h = add(f, +3.)\n"
                           "output h, a\t# trailing comment, no final newline");
    assert_null(g->name);
    const double want[] = {2.5e-3, -1e2, -INFINITY, INFINITY, NAN, 0.5, 3.0};
    const char *names[] = {"a", "b", "c", "d", "e", "f", "h"};
    for (int i = 0; i < 7; i++) {
        const mc_node *n = &g->nodes[find_node(g, names[i])];
        const mc_node *k = &g->nodes[n->in[1]];
        assert_int_equal(k->op, MC_OP_CONST);
        if (isnan(want[i]))
            assert_true(isnan(k->attr.value));
        else
            assert_true(k->attr.value == want[i]);
    }
    assert_int_equal(g->nodes[find_node(g, "c")].line, 7);
    mc_graph_free(g);
}

static void test_attribute_defaults(void **state)
{
    (void)state;
    mc_graph *g = parse_ok(HEADER
                           "param w : f32[8]\n"
                           "param v : f32[8]\n"
                           "param m : f32[16, 8]\n"
                           "sm = softmax(x)\n"
                           "ln = layernorm(x, w, v)\n"
                           "rn = rmsnorm(x, w)\n"
                           "sl = slice(x, axis=1)\n"
                           "cc = concat(x, x)\n"
                           "io = iota(shape=[3, 5], axis=1)\n"
                           "fu = full(shape=[2], value=7)\n"
                           "tr = transpose(x)\n"
                           "li = linear(x, m)\n"
                           "su = sum(x)\n"
                           "ca = cast(x, to=bf16)\n"
                           "output sm, ln, rn, sl, cc, io, fu, tr, li, su, ca\n");
    const mc_node *n = &g->nodes[find_node(g, "sm")];
    assert_int_equal(n->attr.axis, 1); /* -1, normalized by inference */
    assert_true(g->nodes[find_node(g, "ln")].attr.value == 1e-5);
    assert_true(g->nodes[find_node(g, "rn")].attr.value == 1e-6);
    n = &g->nodes[find_node(g, "sl")];
    assert_int_equal(n->attr.start, 0);
    assert_int_equal(n->attr.end, 8); /* MC_END, clamped to the axis */
    assert_int_equal(n->shape[1], 8);
    n = &g->nodes[find_node(g, "cc")];
    assert_int_equal(n->attr.axis, 0);
    assert_int_equal(n->shape[0], 8);
    n = &g->nodes[find_node(g, "io")];
    assert_int_equal(n->dtype, MC_I32);
    assert_int_equal(n->attr.axis, 1);
    assert_int_equal(n->rank, 2);
    n = &g->nodes[find_node(g, "fu")];
    assert_int_equal(n->dtype, MC_F32);
    assert_true(n->attr.value == 7);
    n = &g->nodes[find_node(g, "tr")];
    assert_false(n->attr.has_list);
    assert_int_equal(n->shape[0], 8);
    assert_int_equal(n->shape[1], 4);
    n = &g->nodes[find_node(g, "li")];
    assert_int_equal(n->nin, 2);
    assert_int_equal(n->shape[1], 16);
    n = &g->nodes[find_node(g, "su")];
    assert_false(n->attr.has_list);
    assert_int_equal(n->rank, 0);
    n = &g->nodes[find_node(g, "ca")];
    assert_int_equal(n->dtype, MC_BF16);
    mc_graph_free(g);
}

static void test_attributes_as_written(void **state)
{
    (void)state;
    mc_graph *g = parse_ok(HEADER
                           "a = max(x, axis=-1, keepdim=true)\n"
                           "bm = mean(x, axis=[0])\n"
                           "c = log_softmax(x, axis=0)\n"
                           "d = transpose(x, perm=[1, 0])\n"
                           "e = reshape(x, shape=[2, -1])\n"
                           "f = expand(bm, shape=[3, 8])\n"
                           "s = slice(x, axis=-1, start=-3, end=100)\n"
                           "k = concat(x, x, x, axis=1)\n"
                           "z = full(shape=[2, 2], value=-2.5, dtype=f16)\n"
                           "j = iota(shape=[6], axis=0, dtype=f32)\n"
                           "output a, bm, c, d, e, f, s, k, z, j\n");
    const mc_node *n = &g->nodes[find_node(g, "a")];
    assert_true(n->attr.keepdim && n->attr.has_list && n->attr.nlist == 1);
    assert_int_equal(n->attr.list[0], 1);
    assert_int_equal(n->rank, 2);
    assert_int_equal(n->shape[1], 1);
    n = &g->nodes[find_node(g, "e")];
    assert_int_equal(n->shape[0], 2);
    assert_int_equal(n->shape[1], 16);
    n = &g->nodes[find_node(g, "s")];
    assert_int_equal(n->attr.start, 5);
    assert_int_equal(n->attr.end, 8);
    assert_int_equal(g->nodes[find_node(g, "k")].shape[1], 24);
    n = &g->nodes[find_node(g, "z")];
    assert_int_equal(n->dtype, MC_F16);
    assert_true(n->attr.value == -2.5);
    assert_int_equal(g->nodes[find_node(g, "j")].dtype, MC_F32);
    assert_int_equal(g->nodes[find_node(g, "d")].attr.nlist, 2);
    mc_graph_free(g);
}

/* docs/FORMAT.md §1's grammar: DIM (`SYM<=INT` too) in an attribute's list, for a symbol an
 * input or param declared; a different second maximum is the usual error, at the list. (The
 * parser refused `<=` there: "expected ',' or ']', got '<='".) */
static void test_symbol_maximum_in_attribute(void **state)
{
    (void)state;
    mc_graph *g = parse_ok("input x : f32[B, T]\n"
                           "y = reshape(x, shape=[B, T<=8, 1])\n"
                           "z = iota(shape=[T <= 8], axis=0)\n"
                           "output y, z\n");
    int k = mc_dim_find_sym(g, "T", 1);
    assert_true(k >= 0);
    assert_int_equal(mc_dim_sym_max(g, k), 8);
    assert_int_equal(mc_dim_sym_max(g, mc_dim_find_sym(g, "B", 1)), 0);
    mc_graph_free(g);
    expect_error("input x : f32[B, T<=4]\ny = reshape(x, shape=[B, T<=8])\noutput y\n", "2:26",
                 "dimension 'T' was declared with maximum 4 at line 1; it cannot also be <= 8");
    expect_error("input x : f32[B, T]\ny = reshape(x, shape=[B, Q<=8])\noutput y\n", "2:26",
                 "'Q' is not a dimension declared in an input or param type");
    expect_error("input x : f32[B, T]\ny = reshape(x, shape=[B, T<=0])\noutput y\n", "2:29",
                 "the maximum of 'T' must be positive, not 0");
}

/* A number takes the dtype of the other value operand; f32 when there is none. */
static void test_number_operands(void **state)
{
    (void)state;
    mc_graph *g = parse_ok(HEADER
                           "input h : f16[4, 8]\n"
                           "a = add(i, 3)\n"
                           "c = mul(-2.0, i)\n"
                           "d = add(1, 2)\n"
                           "e = where(b, 1, h)\n"
                           "f = where(b, 1, 0)\n"
                           "k = where(1, x, x)\n"
                           "m = eq(b, 1)\n"
                           "n = lt(x, 1e3)\n"
                           "output a, c, d, e, f, k, m, n\n");
    struct { const char *name; int operand; mc_dtype dtype; double value; } want[] = {
        {"a", 1, MC_I32, 3},  {"c", 0, MC_I32, -2}, {"d", 0, MC_F32, 1}, {"d", 1, MC_F32, 2},
        {"e", 1, MC_F16, 1},  {"f", 1, MC_F32, 1},  {"f", 2, MC_F32, 0}, {"k", 0, MC_BOOL, 1},
        {"m", 1, MC_BOOL, 1}, {"n", 1, MC_F32, 1e3},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const mc_node *n = &g->nodes[find_node(g, want[i].name)];
        const mc_node *k = &g->nodes[n->in[want[i].operand]];
        assert_int_equal(k->op, MC_OP_CONST);
        assert_int_equal(k->rank, 0);
        if (k->dtype != want[i].dtype || k->attr.value != want[i].value)
            fail_msg("%s operand %d: %s %g", want[i].name, want[i].operand,
                     mc_dtype_name(k->dtype), k->attr.value);
    }
    assert_int_equal(g->nodes[find_node(g, "a")].dtype, MC_I32);
    assert_int_equal(g->nodes[find_node(g, "m")].dtype, MC_BOOL);
    mc_graph_free(g);
}

/* Long names and lines, many operands, a long chain: all fine, and linear in time. */
static void test_large_inputs(void **state)
{
    (void)state;
    size_t long_name = 100000, operands = 20000, chain = 20000;
    size_t size = 2 * long_name + operands * 4 + chain * 40 + 1000;
    char *text = malloc(size), *p = text;
    assert_non_null(text);
    p += sprintf(p, "input x : f32[1]\ninput ");
    memset(p, 'n', long_name), p += long_name;
    p += sprintf(p, " : f32[2]\nc = concat(");
    for (size_t i = 0; i < operands; i++)
        p += sprintf(p, "%s", i ? ", x" : "x");
    p += sprintf(p, ")\nv0 = add(c, 1)\n");
    for (size_t i = 1; i < chain; i++)
        p += sprintf(p, "v%zu = mul(v%zu, 0.5)\n", i, i - 1);
    p += sprintf(p, "output v%zu, ", chain - 1);
    memset(p, 'n', long_name), p += long_name;
    *p = '\0';
    assert_true((size_t)(p - text) < size);
    mc_graph *g = parse_ok(text);
    assert_int_equal(g->nodes[find_node(g, "c")].nin, (int)operands);
    assert_int_equal(g->nodes[find_node(g, "c")].shape[0], (int64_t)operands);
    assert_int_equal(g->noutputs, 2);
    assert_int_equal(strlen(g->nodes[g->outputs[1]].name), long_name);
    mc_graph_free(g);
    free(text);
}

/* ---- every class of error, at its exact place --------------------------------------------- */

static void test_syntax_errors(void **state)
{
    (void)state;
    expect_error("input x : f32[2]\ny = add(x x)\noutput y\n", "2:11", "expected ',' or ')'");
    expect_error("input x : f32[2]\ny = add(x, x\noutput y\n", "2:13", "expected ',' or ')', got the end of the line");
    expect_error("input x : f32[2]\ny = add(x, )\noutput y\n", "2:12", "expected an operand");
    expect_error("input x : f32[2]\ny add(x)\n", "2:3", "expected '=' after the name");
    expect_error("input x : f32[2]\ny = (x)\n", "2:5", "expected an operator name");
    expect_error("input x : f32[2]\ny = relu x\n", "2:10", "expected '(' after the operator");
    expect_error("input x f32[2]\n", "1:9", "expected ':'");
    expect_error("input x : f32[2\n", "1:16", "expected ',' or ']'");
    expect_error("input x : f32 2]\n", "1:15", "expected '['");
    expect_error("input x : f32[2] y\n", "1:18", "unexpected 'y' after the statement");
    expect_error("input x : f32[2]\n  = relu(x)\n", "2:3", "expected a statement");
    expect_error("input x : f32[2]\n@\n", "2:1", "unexpected character '@'");
    expect_error("input x : f32[2]\ny = relu(x) $\n", "2:13", "unexpected character '$'");
    expect_error("input x : f32[2]\ny = relu(x)\x07\n", "2:12", "control character 0x07");
    expect_error("input x : f32[2]\ny = relu(\xC3\xA9)\n", "2:10", "U+00E9");
    expect_error("input x : f32[2]\noutput x,\n", "2:10", "expected the name of an output");
    expect_error("input x : f32[2]\ny = add(x, -)\n", "2:12", "expected a number after '-'");
}

static void test_unknown_operator(void **state)
{
    (void)state;
    expect_error("input x : f32[2]\ny = frobnicate(x)\noutput y\n", "2:5",
                 "unknown operator 'frobnicate'");
    expect_error("input x : f32[2]\ny = input(x)\noutput y\n", "2:5", "unknown operator 'input'");
    expect_error("input x : f32[2]\ny = const(x)\noutput y\n", "2:5", "unknown operator 'const'");
}

static void test_attribute_errors(void **state)
{
    (void)state;
    const char *h = "input x : f32[2, 3]\n";
    char text[512];
#define ATTR_ERROR(stmt, loc, phrase)                                      \
    do {                                                                   \
        snprintf(text, sizeof text, "%s%s\noutput y\n", h, stmt);          \
        expect_error(text, loc, phrase);                                   \
    } while (0)
    ATTR_ERROR("y = softmax(x, dim=1)", "2:16", "unknown attribute 'dim' for 'softmax' (it takes axis)");
    ATTR_ERROR("y = relu(x, axis=1)", "2:13", "'relu' takes no attributes");
    ATTR_ERROR("y = sum(x, eps=1)", "2:12", "unknown attribute 'eps' for 'sum' (it takes axis, keepdim)");
    ATTR_ERROR("y = softmax(x, axis=1, axis=0)", "2:24", "duplicate attribute 'axis'");
    ATTR_ERROR("y = concat(x, axis=0, x)", "2:23", "operand after an attribute");
    ATTR_ERROR("y = sum(x, keepdim=1)", "2:20", "expected true or false for 'keepdim'");
    ATTR_ERROR("y = softmax(x, axis=1.5)", "2:21", "expected an integer for 'axis'");
    ATTR_ERROR("y = softmax(x, axis=[1])", "2:21", "expected an integer for 'axis'");
    ATTR_ERROR("y = sum(x, axis=[])", "2:17", "'axis' is an empty list");
    ATTR_ERROR("y = sum(x, axis=[0, 1.0])", "2:21", "expected an integer");
    ATTR_ERROR("y = sum(x, axis=true)", "2:17", "expected an integer for 'axis' (or a list of them)");
    ATTR_ERROR("y = cast(x, to=f64)", "2:16", "unknown dtype 'f64'");
    ATTR_ERROR("y = cast(x, to=1)", "2:16", "expected a dtype");
    ATTR_ERROR("y = cast(x)", "2:5", "'cast' needs the attribute to");
    ATTR_ERROR("y = reshape(x)", "2:5", "'reshape' needs the attribute shape");
    ATTR_ERROR("y = slice(x, start=1)", "2:5", "'slice' needs the attribute axis");
    ATTR_ERROR("y = full(dtype=f32)", "2:5", "'full' needs the attributes shape, value");
    ATTR_ERROR("y = layernorm(x, x, x, eps=small)", "2:28", "expected a number for 'eps'");
    ATTR_ERROR("y = transpose(x, perm=1)", "2:23", "expected '['");
    ATTR_ERROR("y = reshape(x, shape=[3, 0])", "2:22", "must be positive (or -1)");
    ATTR_ERROR("y = iota(shape=[3, -1], axis=0)", "2:20", "dimension -1 must be positive");
    ATTR_ERROR("y = full(shape=[1,2,3,4,5,6,7,8,9], value=0)", "2:33", "too many entries");
    ATTR_ERROR("y = softmax(x, axis=)", "2:21", "expected an integer for 'axis', got ')'");
#undef ATTR_ERROR
}

/* The operators of docs/FORMAT.md §2's newer rows (issue 20): attributes and type rules. */
/* update (docs/FORMAT.md §2): operand types and shapes, the axis, a pos known when read. */
static void test_update_errors(void **state)
{
    (void)state;
    const char *h = "input c : f32[2, 6, 3]\ninput n : f32[2, 2, 3]\ninput p : i32[]\ninput q : i32[1]\n"
                    "input h : f16[2, 2, 3]\ninput b : bool[2, 6, 3]\ninput f : f32[]\n";
    char text[512];
#define OP_ERROR(stmt, loc, phrase)                                        \
    do {                                                                   \
        snprintf(text, sizeof text, "%s%s\noutput y\n", h, stmt);          \
        expect_error(text, loc, phrase);                                   \
    } while (0)
    OP_ERROR("y = update(c, n, p)", "8:5", "'update' needs the attribute axis");
    OP_ERROR("y = update(c, n, p, axis=3)", "8:5", "update: axis=3 is out of range for rank 3 (expected -3..2)");
    OP_ERROR("y = update(c, h, p, axis=1)", "8:5", "update: new is f16 but cache is f32 (use cast)");
    OP_ERROR("y = update(c, n, q, axis=1)", "8:5", "update: pos must be an i32 scalar (i32[]), not i32[1]");
    OP_ERROR("y = update(c, n, f, axis=1)", "8:5", "update: pos must be an i32 scalar (i32[]), not f32[]");
    OP_ERROR("y = update(c, n, 1.5, axis=1)", "8:18", "number '1.5' is used with an i32 operand and must be an integer");
    OP_ERROR("y = update(c, n, p, axis=0)", "8:5", "update: new [2, 2, 3] and cache [2, 6, 3] differ on axis 1 (only axis 0 may differ)");
    OP_ERROR("y = update(n, c, p, axis=1)", "8:5", "update: new [2, 6, 3] has 6 entries along axis 1, more than cache [2, 2, 3] holds (2)");
    OP_ERROR("y = update(c, q, p, axis=0)", "8:5", "update: new is i32 but cache is f32");
    OP_ERROR("y = update(b, b, p, axis=1)", "8:5", "update: bool is not supported (update takes f32, f16, bf16 or i32");
    OP_ERROR("y = update(c, p, p, axis=0)", "8:5", "update: new is i32 but cache is f32");
    OP_ERROR("y = update(c, f, p, axis=0)", "8:5", "update: new [] has rank 0 but cache [2, 6, 3] has rank 3");
    OP_ERROR("y = update(c, n, 5, axis=1)", "8:5", "update: pos 5 is outside [0, 4]: 2 entries from pos would not fit axis 1 of 6");
    OP_ERROR("y = update(c, n, -1, axis=-2)", "8:5", "update: pos -1 is outside [0, 4]");
    OP_ERROR("y = update(c, n, axis=1)", "8:5", "'update' takes 3 operands, got 2");
    OP_ERROR("y = update(c, n, p, keepdim=true)", "8:21", "unknown attribute 'keepdim' for 'update' (it takes axis)");
#undef OP_ERROR
    /* fine: pos a number inside the range, the whole axis at pos 0 */
    snprintf(text, sizeof text, "%sy = update(c, n, 4, axis=1)\nz = update(n, n, 0, axis=-2)\noutput y, z\n", h);
    mc_graph_free(parse_ok(text));
}

static void test_more_operator_errors(void **state)
{
    (void)state;
    const char *h = "input x : f32[2, 3]\ninput i : i32[2]\ninput b : bool[2]\n";
    char text[512];
#define OP_ERROR(stmt, loc, phrase)                                        \
    do {                                                                   \
        snprintf(text, sizeof text, "%s%s\noutput y\n", h, stmt);          \
        expect_error(text, loc, phrase);                                   \
    } while (0)
    OP_ERROR("y = clip(x)", "4:5", "clip: expected a bound: 'min', 'max' or both");
    OP_ERROR("y = leaky_relu(x, alpha=big)", "4:25", "expected a number for 'alpha', got 'big'");
    OP_ERROR("y = clip(i, min=0.5)", "4:5", "'min' of an i32 operand must be an integer in the range of i32, got 0.5");
    OP_ERROR("y = clip(i, max=3e9)", "4:5", "'max' of an i32 operand must be an integer");
    OP_ERROR("y = clip(x, min=nan)", "4:5", "clip: 'min' is NaN");
    OP_ERROR("y = clip(x, min=1, min=2)", "4:20", "duplicate attribute 'min'");
    OP_ERROR("y = floor(i)", "4:5", "floor: i32 is not supported (floor takes f32, f16 or bf16; use cast)");
    OP_ERROR("y = round(b)", "4:5", "round: bool is not supported");
    OP_ERROR("y = softplus(b)", "4:5", "softplus: bool is not supported");
    OP_ERROR("y = sign(b)", "4:5", "sign: bool is not supported (sign takes f32, f16, bf16 or i32");
    OP_ERROR("y = leaky_relu(i)", "4:5", "leaky_relu: i32 is not supported");
    OP_ERROR("y = leaky_relu(x, min=1)", "4:19", "unknown attribute 'min' for 'leaky_relu' (it takes alpha)");
    OP_ERROR("y = ceil(x, alpha=1)", "4:13", "'ceil' takes no attributes");
    OP_ERROR("y = and(x, x)", "4:5", "and: f32 is not supported (and takes bool; use cast)");
    OP_ERROR("y = or(b, i)", "4:5", "or: operand dtypes differ: bool and i32 (use cast)");
    OP_ERROR("y = not(i)", "4:5", "not: i32 is not supported (not takes bool; use cast)");
    OP_ERROR("y = xor(b, 1.5)", "4:12", "number '1.5' is used as a bool and must be 0 or 1");
    OP_ERROR("y = where(b, i, x)", "4:5", "where: operand dtypes differ: i32 and f32 (use cast)");
    OP_ERROR("y = slice(x, axis=1, step=0)", "4:27", "'step' must not be 0");
    OP_ERROR("y = slice(x, axis=0, step=1.5)", "4:27", "expected an integer for 'step', got '1.5'");
    OP_ERROR("y = slice(x, axis=1, start=1, end=2, step=-1)", "4:5",
             "slice: start=1, end=2, step=-1 select nothing from axis 1 of size 3");
    OP_ERROR("y = relu(x, step=1)", "4:13", "'relu' takes no attributes");
    OP_ERROR("y = argmax(x)", "4:5", "'argmax' needs the attribute axis");
    OP_ERROR("y = argmax(x, axis=[0, 1])", "4:5", "argmax: expected one axis, got 2");
    OP_ERROR("y = argmin(b, axis=0)", "4:5", "argmin: bool is not supported (argmin takes f32, f16, bf16 or i32");
    OP_ERROR("y = argmin(x, axis=2)", "4:5", "argmin: axis=2 is out of range for rank 2");
    OP_ERROR("y = argmax(x, axis=0, eps=1)", "4:23", "unknown attribute 'eps' for 'argmax' (it takes axis, keepdim)");
    OP_ERROR("y = cumsum(x)", "4:5", "'cumsum' needs the attribute axis");
    OP_ERROR("y = cumsum(x, axis=2)", "4:5", "cumsum: axis=2 is out of range for rank 2 (expected -2..1)");
    OP_ERROR("y = cumsum(b, axis=0)", "4:5", "cumsum: bool is not supported");
    OP_ERROR("y = gather(x, x)", "4:5", "gather: idx must be i32, not f32 (use cast)");
    OP_ERROR("y = gather(x, i, axis=2)", "4:5", "gather: axis=2 is out of range for rank 2 (expected -2..1)");
    OP_ERROR("y = gather(b, i)", "4:5", "gather: bool is not supported (gather takes f32, f16, bf16 or i32");
    OP_ERROR("y = gather(x, 1.5)", "4:15", "number '1.5' is used with an i32 operand and must be an integer");
    OP_ERROR("y = gather(x, i, keepdim=true)", "4:18", "unknown attribute 'keepdim' for 'gather' (it takes axis)");
    OP_ERROR("y = gather(x)", "4:5", "gather");
    OP_ERROR("y = allreduce(i)", "4:5", "allreduce: i32 is not supported (allreduce takes f32, f16 or bf16; use cast)");
    OP_ERROR("y = allreduce(b)", "4:5", "allreduce: bool is not supported");
    OP_ERROR("y = allreduce(x, axis=0)", "4:18", "'allreduce' takes no attributes");
    OP_ERROR("y = allreduce(x, x)", "4:18", "'allreduce' takes 1 operand, got 2");
    OP_ERROR("y = allreduce()", "4:5", "allreduce");
#undef OP_ERROR
    h = "input x : f32[2, 3]\ninput i : i32[2]\ninput q : f32[1, 4, 5, 5]\nparam w : f32[3, 4, 3]\n"
        "param w2 : f32[6, 2, 3, 3]\nparam s : f32[4]\n";
#define OP_ERROR(stmt, loc, phrase)                                        \
    do {                                                                   \
        snprintf(text, sizeof text, "%s%s\noutput y\n", h, stmt);          \
        expect_error(text, loc, phrase);                                   \
    } while (0)
    OP_ERROR("y = pad(x, pads=[1, 1])", "7:5", "pad: 'pads' has 2 entries; a rank-2 x needs 4 (the begins, then the ends)");
    OP_ERROR("y = pad(x, pads=[1, -1, 0, 0])", "7:17", "'pads' must hold integers >= 0, not -1");
    OP_ERROR("y = pad(i, pads=[1, 1], value=0.5)", "7:5", "pad: 'value' of an i32 operand must be an integer");
    OP_ERROR("y = maxpool(x, kernel=[2])", "7:5", "maxpool: x must be [N, C, L] or [N, C, H, W] (channels first), not [2, 3]");
    OP_ERROR("y = maxpool(q, kernel=[3, 3], padding=[2, 2])", "7:5", "maxpool: padding 2 is more than half the kernel 3");
    OP_ERROR("y = maxpool(q, kernel=[3, 0])", "7:23", "'kernel' must hold integers >= 1, not 0");
    OP_ERROR("y = maxpool(q, kernel=[3])", "7:5", "maxpool: 'kernel' has 1 entries; x has 2 spatial axes");
    OP_ERROR("y = maxpool(q)", "7:5", "'maxpool' needs the attribute kernel");
    OP_ERROR("y = maxpool(q, kernel=[1, 2, 3])", "7:30", "too many entries in the list (the most is 2)");
    OP_ERROR("y = conv(q, w)", "7:5", "conv: w must be [C_out, C_in/groups, kh, kw], not [3, 4, 3]");
    OP_ERROR("y = conv(q, w2, groups=3)", "7:5", "conv: groups=3 must divide x's 4 channels and w's 6 output channels");
    OP_ERROR("y = conv(q, w2, groups=0)", "7:24", "'groups' must be at least 1");
    OP_ERROR("y = conv(q, w2)", "7:5", "conv: w has 2 input channels per group; x's 4 channels in 1 groups need 4");
    OP_ERROR("y = conv(q, w2, groups=2, stride=[1])", "7:5", "conv: 'stride' has 1 entries; x has 2 spatial axes");
    OP_ERROR("y = conv(q, w2, s, groups=2)", "7:5", "conv: b must have shape [6] (w's output channels), not [4]");
    OP_ERROR("y = batchnorm(q, s, s, s, i)", "7:5", "batchnorm: operand dtypes differ: f32 and i32 (use cast)");
    OP_ERROR("y = batchnorm(q, s, s, s, x)", "7:5", "batchnorm: var must have shape [4] (x's channels), not [2, 3]");
    OP_ERROR("y = avgpool(q, kernel=[9, 9])", "7:5", "avgpool: the window (9) is larger than spatial axis 0 (5 with padding)");
#undef OP_ERROR
}

static void test_name_errors(void **state)
{
    (void)state;
    expect_error("input x : f32[2]\ny = relu(z)\noutput y\n", "2:10", "undefined name 'z'");
    expect_error("input x : f32[2]\ny = add(x, z)\nz = relu(x)\noutput y\n", "2:12",
                 "'z' is used before its definition at line 3");
    expect_error("input x : f32[2]\noutput z\nz = relu(x)\n", "2:8",
                 "'z' is used before its definition at line 3");
    expect_error("input x : f32[2]\noutput y\ninput y : f32[1]\n", "2:8",
                 "'y' is used before its definition at line 3");
    expect_error("input x : f32[2]\ny = add(x, y)\noutput y\n", "2:12",
                 "'y' is used in its own definition");
    expect_error("input x : f32[2]\nx = relu(x)\noutput x\n", "2:1",
                 "'x' is already defined at line 1");
    expect_error("input x : f32[2]\ny = relu(x)\nparam y : f32[2]\noutput y\n", "3:7",
                 "'y' is already defined at line 2");
    /* Reserved words are not names. */
    expect_error("input f32 : f32[2]\n", "1:7", "'f32' is a reserved word");
    expect_error("input x : f32[2]\ntrue = relu(x)\n", "2:1", "'true' is a reserved word");
    expect_error("input x : f32[2]\ninf = relu(x)\n", "2:1", "'inf' is a reserved word");
    expect_error("input x : f32[2]\ninput = relu(x)\n", "2:1", "'input' is a reserved word");
    expect_error("input x : f32[2]\noutput = relu(x)\n", "2:1", "'output' is a reserved word");
    expect_error("input x : f32[2]\ngraph = relu(x)\n", "2:1", "'graph' is a reserved word");
    expect_error("graph nan\n", "1:7", "'nan' is a reserved word");
    expect_error("param bool : f32[2]\n", "1:7", "'bool' is a reserved word");
    expect_error("input x : f32[2]\ny = relu(false)\n", "2:10", "'false' is a reserved word");
    expect_error("input x : f32[2]\noutput param\n", "2:8", "'param' is a reserved word");
}

static void test_output_errors(void **state)
{
    (void)state;
    expect_error("input x : f32[2]\ny = relu(x)\n", "2:12", "missing 'output' statement");
    expect_error("input x : f32[2]\ny = relu(x)   # done\n\n", "2:12", "missing 'output' statement");
    expect_error("", "1:1", "missing 'output' statement");
    expect_error("# nothing\n\n", "1:1", "missing 'output' statement");
    expect_error("input x : f32[2]\noutput x\noutput x\n", "3:1",
                 "a second 'output' statement (the first is at line 2)");
    expect_error("input x : f32[2]\ny = relu(x)\noutput y, x, y\n", "3:14", "'y' is named twice");
    expect_error("input x : f32[2]\noutput x, q\n", "2:11", "undefined name 'q'");
    expect_error("input x : f32[2]\noutput\n", "2:7", "expected the name of an output");
}

static void test_graph_statement_errors(void **state)
{
    (void)state;
    expect_error("input x : f32[2]\ngraph g\noutput x\n", "2:1", "'graph' must be the first statement");
    expect_error("graph g\ngraph h\n", "2:1", "'graph' must be the first statement");
    expect_error("graph\n", "1:6", "expected the graph's name");
    expect_error("graph a b\n", "1:9", "unexpected 'b' after the statement");
    /* Comments and blank lines before it are fine. */
    mc_graph *g = parse_ok("# header\n\ngraph g.v2\ninput x : f32[2]\noutput x\n");
    assert_string_equal(g->name, "g.v2");
    mc_graph_free(g);
}

static void test_type_errors(void **state)
{
    (void)state;
    expect_error("input x : f64[2]\n", "1:11", "unknown dtype 'f64'");
    expect_error("input x : float[2]\n", "1:11", "unknown dtype 'float'");
    expect_error("input x : [2]\n", "1:11", "expected a dtype");
    expect_error("input x : f32[2, 0]\n", "1:18", "dimension 0 must be positive");
    expect_error("param w : f32[-3]\n", "1:15", "dimension -3 must be positive");
    expect_error("input x : f32[2.5]\n", "1:15", "expected a dimension");
    expect_error("input x : f32[1,1,1,1,1,1,1,1,1]\n", "1:31", "too many entries in the list (the most is 8)");
    /* Scalars. */
    mc_graph *g = parse_ok("input s : f32[]\ninput t : i32[ ]\noutput s, t\n");
    assert_int_equal(g->nodes[0].rank, 0);
    assert_int_equal(g->nodes[1].dtype, MC_I32);
    mc_graph_free(g);
}

static void test_number_errors(void **state)
{
    (void)state;
    expect_error("input x : f32[2]\ny = add(x, 1.2.3)\n", "2:12", "invalid number '1.2.3'");
    expect_error("input x : f32[2]\ny = add(x, 1e)\n", "2:12", "invalid number '1e'");
    expect_error("input x : f32[2]\ny = add(x, 2x)\n", "2:12", "invalid number '2x'");
    expect_error("input x : f32[2]\ny = add(x, 1e999)\n", "2:12", "number '1e999' is out of range");
    expect_error("input x : f32[2]\ny = add(x, -infinity)\n", "2:12", "expected a number after '-'");
    expect_error("input x : f32[2]\ny = add(x, .)\n", "2:12", "unexpected character '.'");
    /* Integer overflow: dimensions, their product, attributes. */
    expect_error("input x : f32[99999999999999999999]\n", "1:15", "integer 99999999999999999999 is out of range");
    expect_error("input x : f32[4294967296, 4294967296]\n", "1:27", "overflows 64 bits");
    expect_error("input x : f32[2]\ny = softmax(x, axis=9223372036854775808)\n", "2:21", "is out of range");
    expect_error("input x : f32[2]\ny = slice(x, axis=0, start=-9223372036854775809)\n", "2:28", "is out of range");
    /* INT64_MIN itself is an integer (then an axis out of range for inference). */
    mc_graph *g = parse_ok("input x : f32[4]\ny = slice(x, axis=0, start=-9223372036854775808)\noutput y\n");
    assert_int_equal(g->nodes[1].attr.start, 0);
    mc_graph_free(g);
}

static void test_operand_count(void **state)
{
    (void)state;
    expect_error("input x : f32[2]\ny = add(x)\noutput y\n", "2:5", "'add' takes 2 operands, got 1");
    expect_error("input x : f32[2]\ny = relu(x, x)\noutput y\n", "2:13", "'relu' takes 1 operand, got 2");
    expect_error("input x : f32[2]\ny = linear(x)\noutput y\n", "2:5", "'linear' takes 2 or 3 operands, got 1");
    expect_error("input x : f32[2]\ny = concat(axis=0)\noutput y\n", "2:5", "'concat' takes at least 1 operand, got 0");
    expect_error("input x : f32[2]\ny = iota(x, shape=[2], axis=0)\noutput y\n", "2:10", "'iota' takes no operands, got 1");
    expect_error("input x : f32[2]\ny = where(x, x, x, x)\noutput y\n", "2:20", "'where' takes 3 operands, got 4");
}

/* A number used with an i32 operand must be an integer in range; with bool 0 or 1. */
static void test_number_dtype_errors(void **state)
{
    (void)state;
    expect_error(HEADER "y = add(i, 2.5)\n", "4:12", "must be an integer");
    expect_error(HEADER "y = mul(0.1, i)\n", "4:9", "must be an integer");
    expect_error(HEADER "y = add(i, 3e9)\n", "4:12", "must be an integer in the range of i32");
    expect_error(HEADER "y = add(i, nan)\n", "4:12", "must be an integer");
    expect_error(HEADER "y = eq(b, 2)\n", "4:11", "must be 0 or 1");
    expect_error(HEADER "y = where(0.5, x, x)\n", "4:11", "must be 0 or 1");
}

/* Type and shape errors found by inference (mc_graph_add), at the operator's name. */
static void test_inference_errors(void **state)
{
    (void)state;
    expect_error(HEADER "y = add(x, i)\noutput y\n", "4:5", "");
    assert_non_null(strstr(mc_error_message(), "i32"));
    expect_error(HEADER "input z : f32[3]\ny = mul(x, z)\noutput y\n", "5:5", "");
    expect_error(HEADER "y = exp(i)\noutput y\n", "4:5", "");
    expect_error(HEADER "y = where(x, x, x)\noutput y\n", "4:5", "");
    expect_error(HEADER "y = softmax(x, axis=2)\noutput y\n", "4:5", "");
    expect_error(HEADER "y = sum(x, axis=[0, 0])\noutput y\n", "4:5", "");
    expect_error(HEADER "y = matmul(x, x)\noutput y\n", "4:5", "");
    expect_error(HEADER "y = reshape(x, shape=[5, -1])\noutput y\n", "4:5", "");
    expect_error(HEADER "y = transpose(x, perm=[0, 0])\noutput y\n", "4:5", "");
}

static void test_encoding_errors(void **state)
{
    (void)state;
    expect_error("input x : f32[2]\ny = relu(x) # bad \xFF byte\noutput y\n", "2:19", "invalid UTF-8");
    /* The message stays valid UTF-8: the bad byte is shown as '?'. */
    const char *msg = mc_error_message();
    size_t bad;
    char why[64];
    assert_true(mc_text_check(msg, strlen(msg), &bad, why, sizeof why));
    assert_non_null(strstr(msg, "# bad ? byte"));
    assert_int_equal(caret_column(), 19);
    expect_error("a\xC0\x80", "1:2", "invalid UTF-8");                /* overlong NUL */
    expect_error("# \xED\xA0\x80 surrogate\n", "1:3", "invalid UTF-8");
    expect_error("# \xF4\x90\x80\x80 past U+10FFFF\n", "1:3", "invalid UTF-8");
    expect_error("\n\n# cut \xE2\x82", "3:7", "invalid UTF-8");          /* truncated at the end */
    static const char nul[] = "input x : f32[2]\noutput x\0 more";
    expect_error_n(nul, sizeof nul - 1, "2:9", "NUL byte");
    msg = mc_error_message();
    assert_true(mc_text_check(msg, strlen(msg), &bad, why, sizeof why));
}

static void test_files(void **state)
{
    (void)state;
    mc_graph *g = (mc_graph *)1;
    assert_int_equal(mc_graph_parse_file("/nonexistent/dir/m.graph", &g), MC_ERR_INPUT);
    assert_null(g);
    assert_string_equal(mc_error_message(), "cannot read /nonexistent/dir/m.graph: No such file or directory");
    assert_int_equal(mc_graph_parse_file(mc_test_tmpdir(), &g), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "cannot read"));
    assert_null(g);
    /* A file with a NUL byte: the error names the file and the place. */
    static const char nul[] = "input x : f32[2]\n\0output x\n";
    const char *path = mc_test_write_file("nul.graph", nul, sizeof nul - 1);
    assert_int_equal(mc_graph_parse_file(path, &g), MC_ERR_INPUT);
    char prefix[4300];
    snprintf(prefix, sizeof prefix, "%s:2:1: error: NUL byte", path);
    assert_true(strncmp(mc_error_message(), prefix, strlen(prefix)) == 0);
    /* A good file keeps its path and text for later carets. */
    path = mc_test_write_file("ok.graph", spec_example, sizeof spec_example - 1);
    assert_int_equal(mc_graph_parse_file(path, &g), MC_OK);
    assert_string_equal(g->file, path);
    assert_string_equal(g->text, spec_example);
    mc_graph_free(g);
    /* NULL arguments are errors, not crashes. */
    assert_int_equal(mc_graph_parse_string("x", NULL, &g), MC_ERR_INPUT);
    assert_int_equal(mc_graph_parse_string("x", "", NULL), MC_ERR_INPUT);
    assert_int_equal(mc_graph_parse_file(NULL, &g), MC_ERR_INPUT);
    /* No file name: errors still have a location. */
    assert_int_equal(mc_graph_parse_string(NULL, "input x : f32[0]\n", &g), MC_ERR_INPUT);
    assert_true(strncmp(mc_error_message(), "<graph>:1:15: error: ", 21) == 0);
}

/* The caret sits under the column, with tabs kept. */
static void test_caret(void **state)
{
    (void)state;
    expect_error("input x : f32[2]\n\ty =\trelu(q)\noutput y\n", "2:11", "undefined name 'q'");
    const char *msg = mc_error_message();
    assert_non_null(strstr(msg, "\n  \ty =\trelu(q)\n  \t   \t     ^"));
}

/* Every file in tests/data/parse: `ok_*` must parse; `err_*` must fail where their first line
 * says (`# expect: LINE:COL phrase`); anything else (inputs the fuzzer found) must either parse
 * or fail cleanly with a located message. */
static void test_data_files(void **state)
{
    (void)state;
    const char *dir = mc_test_src("tests/data/parse");
    DIR *d = opendir(dir);
    assert_non_null(d);
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        mc_graph *g = (mc_graph *)1;
        mc_status st = mc_graph_parse_file(path, &g);
        const char *msg = mc_error_message();
        count++;
        if (strncmp(e->d_name, "ok_", 3) == 0) {
            if (st != MC_OK)
                fail_msg("%s: %s", path, msg);
            FILE *null = fopen("/dev/null", "w");
            assert_int_equal(mc_graph_print(g, null), MC_OK);
            fclose(null);
            mc_graph_free(g);
            continue;
        }
        if (st == MC_OK) {
            assert_true(strncmp(e->d_name, "err_", 4) != 0);
            FILE *null = fopen("/dev/null", "w");
            assert_int_equal(mc_graph_print(g, null), MC_OK);
            fclose(null);
            mc_graph_free(g);
            continue;
        }
        assert_int_equal(st, MC_ERR_INPUT);
        assert_null(g);
        size_t n = strlen(path);
        if (strncmp(msg, path, n) != 0 || msg[n] != ':' || !strstr(msg, ": error: "))
            fail_msg("%s: not a located error: %s", path, msg);
        size_t bad;
        char why[64];
        assert_true(mc_text_check(msg, strlen(msg), &bad, why, sizeof why));
        if (strncmp(e->d_name, "err_", 4) == 0) {
            FILE *f = fopen(path, "rb");
            assert_non_null(f);
            char first[256] = "";
            assert_non_null(fgets(first, sizeof first, f));
            fclose(f);
            char location[64], phrase[200];
            if (sscanf(first, "# expect: %63s %199[^\n]", location, phrase) != 2)
                fail_msg("%s: first line is not '# expect: LINE:COL phrase'", path);
            char prefix[4300];
            snprintf(prefix, sizeof prefix, "%s:%s: error: ", path, location);
            if (strncmp(msg, prefix, strlen(prefix)) != 0 || !strstr(msg, phrase))
                fail_msg("%s: expected '%s...%s', got:\n%s", path, prefix, phrase, msg);
        }
    }
    closedir(d);
    assert_true(count > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_examples),
        cmocka_unit_test(test_spec_example),
        cmocka_unit_test(test_layout_and_numbers),
        cmocka_unit_test(test_attribute_defaults),
        cmocka_unit_test(test_attributes_as_written),
        cmocka_unit_test(test_symbol_maximum_in_attribute),
        cmocka_unit_test(test_number_operands),
        cmocka_unit_test(test_large_inputs),
        cmocka_unit_test(test_syntax_errors),
        cmocka_unit_test(test_unknown_operator),
        cmocka_unit_test(test_attribute_errors),
        cmocka_unit_test(test_more_operator_errors),
        cmocka_unit_test(test_update_errors),
        cmocka_unit_test(test_name_errors),
        cmocka_unit_test(test_output_errors),
        cmocka_unit_test(test_graph_statement_errors),
        cmocka_unit_test(test_type_errors),
        cmocka_unit_test(test_number_errors),
        cmocka_unit_test(test_operand_count),
        cmocka_unit_test(test_number_dtype_errors),
        cmocka_unit_test(test_inference_errors),
        cmocka_unit_test(test_encoding_errors),
        cmocka_unit_test(test_files),
        cmocka_unit_test(test_caret),
        cmocka_unit_test(test_data_files),
    };
    return mc_test_run(tests);
}
