/* The printer against the parser: what mc_graph_print writes parses back to the same graph
 * (operators, types, attributes, names, constants, outputs), and printing that graph again
 * gives the same text. Checked on every example, after each graph pass (decomposition makes
 * constants of every dtype), and on a graph that uses every operator. */
#include "testlib.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "passes/passes.h"

static char *print_to_string(const mc_graph *g)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    assert_non_null(f);
    assert_int_equal(mc_graph_print(g, f), MC_OK);
    fclose(f);
    return text;
}

static bool same_number(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

/* Compare the attributes an operator reads, in their normalized form. */
static void check_same_attrs(const mc_node *a, const mc_node *b)
{
    assert_int_equal(a->attr.nlist, b->attr.nlist);
    for (int k = 0; k < a->attr.nlist; k++)
        assert_int_equal(a->attr.list[k], b->attr.list[k]);
    switch (a->op) {
    case MC_OP_SUM: case MC_OP_MEAN: case MC_OP_MAX: case MC_OP_MIN:
        assert_int_equal(a->attr.keepdim, b->attr.keepdim);
        break;
    case MC_OP_SLICE:
        assert_int_equal(a->attr.start, b->attr.start);
        assert_int_equal(a->attr.end, b->attr.end);
        /* fall through */
    case MC_OP_SOFTMAX: case MC_OP_LOG_SOFTMAX: case MC_OP_CONCAT:
        assert_int_equal(a->attr.axis, b->attr.axis);
        break;
    case MC_OP_LAYERNORM: case MC_OP_RMSNORM:
        assert_true(same_number(a->attr.value, b->attr.value));
        break;
    case MC_OP_IOTA:
        assert_int_equal(a->attr.axis, b->attr.axis);
        /* fall through */
    case MC_OP_CAST:
        assert_int_equal(a->attr.dtype, b->attr.dtype);
        break;
    case MC_OP_FULL:
        assert_int_equal(a->attr.dtype, b->attr.dtype);
        assert_true(same_number(a->attr.value, b->attr.value));
        break;
    default:
        break;
    }
}

/* a and b are the same graph up to where constants sit in the node order. */
static void check_same_graph(const mc_graph *a, const mc_graph *b)
{
    int32_t *map = calloc((size_t)a->nnodes + 1, sizeof *map); /* a's index -> b's */
    assert_non_null(map);
    int j = 0;
    for (int i = 0; i < a->nnodes; i++) {
        const mc_node *x = &a->nodes[i];
        if (x->op == MC_OP_CONST)
            continue;
        while (j < b->nnodes && b->nodes[j].op == MC_OP_CONST)
            j++;
        assert_true(j < b->nnodes);
        const mc_node *y = &b->nodes[j];
        map[i] = j++;
        if (x->op != y->op)
            fail_msg("node %d: %s became %s", i, mc_op_table[x->op].name, mc_op_table[y->op].name);
        assert_int_equal(x->dtype, y->dtype);
        assert_int_equal(x->rank, y->rank);
        for (int k = 0; k < x->rank; k++)
            assert_int_equal(x->shape[k], y->shape[k]);
        assert_int_equal(x->nin, y->nin);
        if (x->name)
            assert_string_equal(x->name, y->name);
        check_same_attrs(x, y);
        for (int k = 0; k < x->nin; k++) {
            const mc_node *xo = &a->nodes[x->in[k]], *yo = &b->nodes[y->in[k]];
            if (xo->op == MC_OP_CONST) {
                assert_int_equal(yo->op, MC_OP_CONST);
                assert_int_equal(xo->dtype, yo->dtype);
                assert_true(same_number(xo->attr.value, yo->attr.value));
            } else {
                assert_int_equal(map[x->in[k]], y->in[k]);
            }
        }
    }
    while (j < b->nnodes && b->nodes[j].op == MC_OP_CONST)
        j++;
    assert_int_equal(j, b->nnodes);
    assert_int_equal(a->noutputs, b->noutputs);
    for (int k = 0; k < a->noutputs; k++)
        assert_int_equal(map[a->outputs[k]], b->outputs[k]);
    free(map);
}

/* print(g) parses to g, and printing that again gives the same text. */
static void check_round_trip(const mc_graph *g, const char *what)
{
    char *text = print_to_string(g);
    mc_graph *back = NULL;
    if (mc_graph_parse_string("printed.graph", text, &back) != MC_OK)
        fail_msg("%s: the printed graph does not parse: %s\n%s", what, mc_error_message(), text);
    assert_int_equal(mc_graph_verify(back, "parse"), MC_OK);
    check_same_graph(g, back);
    char *again = print_to_string(back);
    if (strcmp(text, again) != 0)
        fail_msg("%s: printing twice differs:\n%s\n---\n%s", what, text, again);
    free(again);
    free(text);
    mc_graph_free(back);
}

static void test_examples(void **state)
{
    (void)state;
    const char *dirs[] = {"examples", "bench/cpu"};
    int count = 0;
    for (int d = 0; d < 2; d++) {
        char path[1024];
        snprintf(path, sizeof path, "%s", mc_test_src(dirs[d]));
        DIR *dir = opendir(path);
        assert_non_null(dir);
        for (struct dirent *e; (e = readdir(dir));) {
            size_t len = strlen(e->d_name);
            if (len < 7 || strcmp(e->d_name + len - 6, ".graph") != 0)
                continue;
            char file[1300];
            snprintf(file, sizeof file, "%s/%s", path, e->d_name);
            mc_graph *g = NULL;
            if (mc_graph_parse_file(file, &g) != MC_OK)
                fail_msg("%s: %s", file, mc_error_message());
            check_round_trip(g, file);
            for (int p = 0; mc_graph_passes[p]; p++) {
                mc_compile_options opt = {.fuse = true, .plan_memory = true, .verify = true};
                mc_graph *after = NULL;
                if (mc_run_passes(g, &opt, mc_graph_passes[p]->name, &after) != MC_OK)
                    fail_msg("%s: %s", file, mc_error_message());
                char what[1400];
                snprintf(what, sizeof what, "%s after %s", file, mc_graph_passes[p]->name);
                check_round_trip(after, what);
                mc_graph_free(after);
            }
            mc_graph_free(g);
            count++;
        }
        closedir(dir);
    }
    assert_true(count >= 9);
}

/* Every operator, built through the C API, with attributes in their less usual forms. */
static void test_every_operator(void **state)
{
    (void)state;
    mc_graph *g = mc_graph_new("all_ops");
    mc_value x = mc_input(g, "x", MC_F32, (int64_t[]){2, 3, 4}, 3);
    mc_value h = mc_param(g, "h.w", MC_F16, (int64_t[]){4}, 1);
    mc_value i = mc_input(g, "i", MC_I32, (int64_t[]){3, 4}, 2);
    mc_value w = mc_param(g, "w", MC_F32, (int64_t[]){5, 4}, 2);
    mc_value bias = mc_param(g, "bias", MC_F32, (int64_t[]){5}, 1);
    mc_value n4 = mc_param(g, "n4", MC_F32, (int64_t[]){4}, 1);
    mc_value outs[96];
    int n = 0;
#define UNARY(op) outs[n++] = mc_##op(g, x);
#define BINARY(op) outs[n++] = mc_##op(g, x, n4);
    MC_UNARY_BUILDERS(UNARY)
    MC_BINARY_BUILDERS(BINARY)
#undef UNARY
#undef BINARY
    outs[n++] = mc_mul(g, x, mc_scalar(g, 0.1, MC_F32));
    outs[n++] = mc_add(g, mc_scalar(g, -INFINITY, MC_F32), x);
    outs[n++] = mc_maximum(g, x, mc_scalar(g, NAN, MC_F32));
    outs[n++] = mc_sub(g, i, mc_scalar(g, -7, MC_I32));
    outs[n++] = mc_mul(g, h, mc_scalar(g, 1e-30, MC_F16));
    mc_value cond = mc_gt(g, x, mc_scalar(g, 0, MC_F32));
    outs[n++] = mc_where(g, cond, x, mc_scalar(g, 1e300, MC_F32));
    outs[n++] = mc_where(g, mc_scalar(g, 1, MC_BOOL), mc_scalar(g, 2, MC_F16), h);
    outs[n++] = mc_eq(g, cond, mc_scalar(g, 0, MC_BOOL));
    outs[n++] = mc_cast(g, i, MC_BF16);
    outs[n++] = mc_sum(g, x, NULL, 0, false);
    outs[n++] = mc_mean(g, x, (int[]){-1, 0}, 2, true);
    outs[n++] = mc_max(g, i, (int[]){1}, 1, false);
    outs[n++] = mc_min(g, x, NULL, 0, true);
    outs[n++] = mc_softmax(g, x, -2);
    outs[n++] = mc_log_softmax(g, x, 0);
    outs[n++] = mc_layernorm(g, x, n4, n4, 1e-5);
    outs[n++] = mc_rmsnorm(g, mc_cast(g, x, MC_F16), h, 0.3);
    outs[n++] = mc_matmul(g, x, mc_transpose(g, w, NULL, 0));
    outs[n++] = mc_linear(g, x, w, bias);
    outs[n++] = mc_linear(g, x, w, MC_NONE);
    outs[n++] = mc_transpose(g, x, (int[]){1, -1, 0}, 3);
    outs[n++] = mc_reshape(g, x, (int64_t[]){4, -1}, 2);
    outs[n++] = mc_expand(g, n4, (int64_t[]){7, 3, 4}, 3);
    outs[n++] = mc_slice(g, x, -1, -3, MC_END);
    outs[n++] = mc_concat(g, (mc_value[]){x, x, x}, 3, 1);
    outs[n++] = mc_iota(g, (int64_t[]){3, 5}, 2, -1, MC_I32);
    outs[n++] = mc_iota(g, (int64_t[]){6}, 1, 0, MC_BF16);
    outs[n++] = mc_full(g, (int64_t[]){2, 2}, 2, 2.5e-8, MC_F32);
    outs[n++] = mc_full(g, NULL, 0, 1, MC_BOOL);
    outs[n++] = mc_leaky_relu(g, x, 0.3);
    outs[n++] = mc_clip(g, x, &(double){-0.25}, NULL);
    outs[n++] = mc_clip(g, i, &(double){-2}, &(double){7});
    outs[n++] = mc_and(g, cond, mc_scalar(g, 1, MC_BOOL));
    outs[n++] = mc_or(g, cond, mc_lt(g, x, n4));
    outs[n++] = mc_xor(g, cond, cond);
    outs[n++] = mc_not(g, cond);
    outs[n++] = mc_where(g, mc_gt(g, i, mc_scalar(g, 3, MC_I32)), i, mc_scalar(g, -1, MC_I32));
    outs[n++] = mc_slice_step(g, x, 2, MC_END, MC_END, -1);
    outs[n++] = mc_slice_step(g, x, 1, -1, 0, -2);
    outs[n++] = mc_slice_step(g, x, 2, 1, MC_END, 2);
    outs[n++] = mc_slice_step(g, x, 0, 1, -100, -1);
    mc_value im = mc_input(g, "im", MC_F32, (int64_t[]){2, 4, 7, 6}, 4);
    mc_value kw = mc_param(g, "kw", MC_F32, (int64_t[]){6, 2, 3, 3}, 4);
    outs[n++] = mc_conv(g, im, kw, MC_NONE, (int64_t[]){2, 1}, (int64_t[]){1, 0}, NULL, 2, 2);
    outs[n++] = mc_maxpool(g, im, (int64_t[]){3, 2}, NULL, (int64_t[]){1, 1}, 2);
    outs[n++] = mc_avgpool(g, im, (int64_t[]){2, 2}, (int64_t[]){1, 2}, NULL, 2);
    outs[n++] = mc_pad(g, x, (int64_t[]){0, 1, 2, 3, 0, 1}, 6, -1.5);
    outs[n++] = mc_batchnorm(g, im, n4, n4, n4, n4, 1e-3);
    outs[n++] = mc_argmax(g, x, 1, true);
    outs[n++] = mc_argmin(g, i, -1, false);
    outs[n++] = mc_cumsum(g, x, 2);
    mc_value pos = mc_input(g, "pos", MC_I32, NULL, 0);
    outs[n++] = mc_update(g, x, mc_slice(g, x, 1, 0, 1), pos, 1);
    outs[n++] = mc_update(g, i, mc_slice(g, i, 0, 1, 3), mc_scalar(g, 1, MC_I32), -2);
    assert_true(n <= 96);
    mc_value_set_name(g, outs[3], "ex.p");
    assert_int_equal(mc_graph_set_outputs(g, outs, n), MC_OK);
    check_round_trip(g, "every operator");
    mc_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_examples),
        cmocka_unit_test(test_every_operator),
    };
    return mc_test_run(tests);
}
