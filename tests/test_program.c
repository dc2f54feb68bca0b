/* Programs through the C API (runtime/program.c): options, binding by name with its checks,
 * the generator, running, outputs and output files, on the reference backend.
 *
 * Expected values come from mc_graph_eval (the float64 oracle) on the same inputs, or from
 * the inputs themselves for graphs simple enough to compute by hand.
 */
#include "testlib.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/runtime.h"

static const char *tmp_path(const char *name)
{
    static char paths[8][4200];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, sizeof paths[0], "%s/%s", mc_test_tmpdir(), name);
    return p;
}

/* y = x * w + 1 (x f32[2, 3], w f32[3]); s = sum(y); plus an input nobody reads. */
static mc_graph *small_graph(void)
{
    mc_graph *g = mc_graph_new("small");
    const int64_t xs[] = {2, 3}, ws[] = {3};
    mc_value x = mc_input(g, "x", MC_F32, xs, 2);
    mc_value w = mc_param(g, "w", MC_F32, ws, 1);
    mc_input(g, "unused", MC_I32, ws, 1);
    mc_value y = mc_add(g, mc_mul(g, x, w), mc_scalar(g, 1.0, MC_F32));
    mc_value s = mc_sum(g, y, NULL, 0, false);
    assert_int_equal(mc_value_set_name(g, y, "y"), MC_OK);
    assert_int_equal(mc_value_set_name(g, s, "s"), MC_OK);
    mc_value outs[] = {y, s};
    assert_int_equal(mc_graph_set_outputs(g, outs, 2), MC_OK);
    return g;
}

static mc_program *compile_ref(const mc_graph *g)
{
    mc_options opt = mc_options_default();
    opt.backend = MC_BACKEND_REF;
    mc_program *p = NULL;
    if (mc_program_compile(g, &opt, &p) != MC_OK)
        fail_msg("%s", mc_error_message());
    return p;
}

static void test_options_and_names(void **state)
{
    (void)state;
    mc_options o = mc_options_default();
    assert_int_equal(o.backend, MC_BACKEND_AUTO);
    assert_true(o.fuse);
    assert_true(o.plan_memory);
    assert_int_equal(o.cuda_graph, -1);
    assert_false(o.tf32);
    assert_string_equal(mc_backend_name(MC_BACKEND_AUTO), "auto");
    assert_string_equal(mc_backend_name(MC_BACKEND_CUDA), "cuda");
    assert_string_equal(mc_backend_name(MC_BACKEND_CPU), "cpu");
    assert_string_equal(mc_backend_name(MC_BACKEND_REF), "ref");

    mc_graph *g = small_graph();
    mc_program *p = NULL;
    o.backend = (mc_backend_kind)17;
    assert_int_equal(mc_program_compile(g, &o, &p), MC_ERR_INPUT);
    assert_null(p);
    o = mc_options_default();
    o.threads = -1;
    assert_int_equal(mc_program_compile(g, &o, &p), MC_ERR_INPUT);
    assert_int_equal(mc_program_compile(NULL, NULL, &p), MC_ERR_INPUT);
    mc_graph *empty = mc_graph_new("empty");
    assert_int_equal(mc_program_compile(empty, NULL, &p), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "no outputs"));
    mc_graph_free(empty);

    p = compile_ref(g);
    assert_string_equal(mc_program_backend(p), "ref");
    assert_int_equal(mc_program_num_outputs(p), 2);
    mc_program_free(p);
    mc_graph_free(g);
}

static void test_set_and_run(void **state)
{
    (void)state;
    mc_graph *g = small_graph();
    mc_program *p = compile_ref(g);
    mc_graph_free(g); /* the program keeps its own copy */
    const float x[6] = {1, 2, 3, 4, 5, 6}, w[3] = {0.5f, -1, 2};
    mc_tensor t;
    assert_int_equal(mc_program_output(p, 0, &t), MC_ERR_INPUT); /* nothing ran yet */

    assert_int_equal(mc_program_set(p, "x", x, sizeof x - 4), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "f32[2, 3]"));
    assert_int_equal(mc_program_set(p, "nope", x, sizeof x), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "'nope'"));
    assert_int_equal(mc_program_set(p, "x", x, sizeof x), MC_OK);
    /* w not bound: running says so, naming it. */
    assert_int_equal(mc_program_run(p), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "'w'"));
    assert_int_equal(mc_program_set(p, "w", w, sizeof w), MC_OK);
    const int32_t unused[3] = {1, 2, 3};
    assert_int_equal(mc_program_set(p, "unused", unused, sizeof unused), MC_OK); /* dead: fine */
    assert_int_equal(mc_program_run(p), MC_OK);

    assert_int_equal(mc_program_output(p, 0, &t), MC_OK);
    assert_string_equal(t.name, "y");
    assert_int_equal(t.dtype, MC_F32);
    assert_int_equal(t.rank, 2);
    assert_int_equal(t.shape[0], 2);
    assert_int_equal(t.shape[1], 3);
    assert_int_equal(t.bytes, 24);
    const float *y = t.data;
    double total = 0;
    for (int i = 0; i < 6; i++) {
        assert_float_equal(y[i], x[i] * w[i % 3] + 1, 0);
        total += y[i];
    }
    assert_int_equal(mc_program_output(p, 1, &t), MC_OK);
    assert_string_equal(t.name, "s");
    assert_int_equal(t.rank, 0);
    assert_float_equal(*(const float *)t.data, total, 1e-5);
    assert_int_equal(mc_program_output(p, 2, &t), MC_ERR_INPUT);
    assert_int_equal(mc_program_output(p, -1, &t), MC_ERR_INPUT);
    mc_program_free(p);
}

static void test_fill_random_keeps_bound_values(void **state)
{
    (void)state;
    mc_graph *g = small_graph();
    mc_program *p = compile_ref(g);
    const float w[3] = {0, 0, 0};
    assert_int_equal(mc_program_set(p, "w", w, sizeof w), MC_OK);
    assert_int_equal(mc_program_fill_random(p, 3), MC_OK);
    assert_int_equal(mc_program_run(p), MC_OK);
    mc_tensor t;
    assert_int_equal(mc_program_output(p, 0, &t), MC_OK);
    for (int i = 0; i < 6; i++)
        assert_float_equal(((const float *)t.data)[i], 1.0, 0); /* x * 0 + 1: w was kept */
    mc_program_free(p);

    /* The generator's values: the same as mc_fill_random by (seed, name). */
    p = compile_ref(g);
    assert_int_equal(mc_program_fill_random(p, 3), MC_OK);
    assert_int_equal(mc_program_run(p), MC_OK);
    float x[6], ww[3];
    mc_fill_random(x, MC_F32, 6, 3, "x");
    mc_fill_random(ww, MC_F32, 3, 3, "w");
    assert_int_equal(mc_program_output(p, 0, &t), MC_OK);
    for (int i = 0; i < 6; i++)
        assert_float_equal(((const float *)t.data)[i], (float)((double)x[i] * ww[i % 3]) + 1.0f, 1e-6);
    mc_program_free(p);
    mc_graph_free(g);
}

static void test_files(void **state)
{
    (void)state;
    mc_graph *g = small_graph();
    mc_program *p = compile_ref(g);
    const int32_t unused[3] = {0, 0, 0};
    assert_int_equal(mc_program_set(p, "unused", unused, sizeof unused), MC_OK);
    /* .npy: dtype and shape must match; errors name the file and the input. */
    float xs[6] = {1, 1, 1, 1, 1, 1};
    mc_array a = {.dtype = MC_F32, .rank = 2, .shape = {2, 3}, .data = xs, .bytes = sizeof xs};
    const char *good = tmp_path("x.npy"), *wrong = tmp_path("x_wrong.npy");
    assert_int_equal(mc_npy_write(good, &a), MC_OK);
    a.rank = 1;
    a.shape[0] = 6;
    assert_int_equal(mc_npy_write(wrong, &a), MC_OK);
    assert_int_equal(mc_program_load_npy(p, "x", wrong), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), wrong));
    assert_non_null(strstr(mc_error_message(), "'x'"));
    assert_int_equal(mc_program_load_npy(p, "x", good), MC_OK);

    /* .safetensors: every param present, extra tensors ignored; a failure binds nothing. */
    float wv[3] = {2, 2, 2}, extra[1] = {9};
    mc_array arrays[2] = {{.dtype = MC_F32, .rank = 1, .shape = {3}, .data = wv, .bytes = sizeof wv},
                          {.dtype = MC_F32, .rank = 1, .shape = {1}, .data = extra, .bytes = sizeof extra}};
    const char *names[2] = {"w", "something.else"};
    const char *weights = tmp_path("w.safetensors"), *missing = tmp_path("missing.safetensors");
    assert_int_equal(mc_safetensors_write(weights, names, arrays, 2), MC_OK);
    assert_int_equal(mc_safetensors_write(missing, names + 1, arrays + 1, 1), MC_OK);
    assert_int_equal(mc_program_load_weights(p, missing), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "'w'"));
    assert_int_equal(mc_program_run(p), MC_ERR_INPUT); /* w is still unbound */
    assert_int_equal(mc_program_load_weights(p, weights), MC_OK);
    assert_int_equal(mc_program_run(p), MC_OK);

    /* Output files: .safetensors with both; .npy refused for two outputs; nothing else. */
    const char *out = tmp_path("out.safetensors"), *npy = tmp_path("out.npy");
    assert_int_equal(mc_program_save_outputs(p, out), MC_OK);
    assert_int_equal(mc_program_save_outputs(p, npy), MC_ERR_INPUT);
    assert_int_not_equal(access(npy, F_OK), 0);
    assert_int_equal(mc_program_save_outputs(p, tmp_path("out.txt")), MC_ERR_INPUT);
    mc_safetensors *st;
    assert_int_equal(mc_safetensors_open(out, &st), MC_OK);
    mc_array y, s;
    assert_int_equal(mc_safetensors_get(st, "y", &y), MC_OK);
    assert_int_equal(mc_safetensors_get(st, "s", &s), MC_OK);
    assert_int_equal(y.rank, 2);
    assert_int_equal(s.rank, 0);
    for (int i = 0; i < 6; i++)
        assert_float_equal(((const float *)y.data)[i], 3.0, 0); /* 1 * 2 + 1 */
    assert_float_equal(*(const float *)s.data, 18.0, 0);
    mc_safetensors_close(st);
    mc_program_free(p);
    mc_graph_free(g);
}

/* Every example on ref, fused and unfused, against the float64 oracle (docs/FORMAT.md §6). */
/* mc_program_save_inputs writes every declaration's value (bound, generated, or never read by a
 * kernel); loading that file into a fresh program repeats the run bit for bit. */
static void test_save_inputs(void **state)
{
    (void)state;
    mc_graph *g = small_graph();
    mc_program *p = compile_ref(g);
    const float x[6] = {1, 2, 3, 4, 5, 6};
    const char *saved = tmp_path("inputs.safetensors");
    unlink(saved);
    assert_int_equal(mc_program_set(p, "x", x, sizeof x), MC_OK);
    assert_int_equal(mc_program_save_inputs(p, saved), MC_ERR_INPUT); /* w has no value yet */
    assert_non_null(strstr(mc_error_message(), "'w'"));
    assert_int_not_equal(access(saved, F_OK), 0);
    assert_int_equal(mc_program_fill_random(p, 5), MC_OK);
    assert_int_equal(mc_program_save_inputs(p, tmp_path("inputs.npy")), MC_ERR_INPUT);
    assert_int_equal(mc_program_save_inputs(p, saved), MC_OK);
    assert_int_equal(mc_program_run(p), MC_OK);

    mc_safetensors *st;
    assert_int_equal(mc_safetensors_open(saved, &st), MC_OK);
    assert_int_equal(mc_safetensors_count(st), 3);
    mc_array a;
    assert_int_equal(mc_safetensors_get(st, "x", &a), MC_OK);
    assert_memory_equal(a.data, x, sizeof x);
    float w[3];
    int32_t unused[3];
    mc_fill_random(w, MC_F32, 3, 5, "w");
    mc_fill_random(unused, MC_I32, 3, 5, "unused");
    assert_int_equal(mc_safetensors_get(st, "w", &a), MC_OK);
    assert_memory_equal(a.data, w, sizeof w);
    assert_int_equal(mc_safetensors_get(st, "unused", &a), MC_OK); /* no kernel reads it */
    assert_int_equal(a.dtype, MC_I32);
    assert_memory_equal(a.data, unused, sizeof unused);
    mc_safetensors_close(st);

    /* A fresh program from the file alone: the same outputs, bit for bit. */
    mc_program *q = compile_ref(g);
    assert_int_equal(mc_program_load_weights(q, saved), MC_OK);
    assert_int_equal(mc_program_load_file(q, "x", saved), MC_OK);
    assert_int_equal(mc_program_load_file(q, "unused", saved), MC_OK);
    assert_int_equal(mc_program_run(q), MC_OK);
    for (int i = 0; i < 2; i++) {
        mc_tensor tp, tq;
        assert_int_equal(mc_program_output(p, i, &tp), MC_OK);
        assert_int_equal(mc_program_output(q, i, &tq), MC_OK);
        assert_int_equal(tp.bytes, tq.bytes);
        assert_memory_equal(tp.data, tq.data, tp.bytes);
    }
    /* load_file: a tensor the file lacks, or of another shape, is refused and named. */
    assert_int_equal(mc_program_load_file(q, "nope", saved), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "'nope'"));
    const char *outputs = tmp_path("outputs.safetensors");
    assert_int_equal(mc_program_save_outputs(q, outputs), MC_OK);
    assert_int_equal(mc_program_load_file(q, "x", outputs), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), outputs));

    /* An unread declaration keeps the value it was bound to. */
    const int32_t given[3] = {7, 8, 9};
    assert_int_equal(mc_program_set(q, "unused", given, sizeof given), MC_OK);
    assert_int_equal(mc_program_save_inputs(q, saved), MC_OK);
    assert_int_equal(mc_safetensors_open(saved, &st), MC_OK);
    assert_int_equal(mc_safetensors_get(st, "unused", &a), MC_OK);
    assert_memory_equal(a.data, given, sizeof given);
    mc_safetensors_close(st);
    mc_program_free(q);
    mc_program_free(p);
    mc_graph_free(g);
}

static void test_examples_against_oracle(void **state)
{
    (void)state;
    const char *examples[] = {"pointwise", "mlp", "layernorm", "softmax", "small_mlp", "mlp_ln",
                              "gpt2_block"};
    for (int e = 0; e < 7; e++) {
        char rel[128];
        snprintf(rel, sizeof rel, "examples/%s.graph", examples[e]);
        mc_graph *g;
        assert_int_equal(mc_graph_parse_file(mc_test_src(rel), &g), MC_OK);
        for (int fuse = 0; fuse < 2; fuse++) {
            mc_options opt = mc_options_default();
            opt.backend = MC_BACKEND_REF;
            opt.fuse = fuse;
            mc_program *p;
            if (mc_program_compile(g, &opt, &p) != MC_OK)
                fail_msg("%s: %s", rel, mc_error_message());
            assert_int_equal(mc_program_fill_random(p, 1), MC_OK);
            assert_int_equal(mc_program_run(p), MC_OK);
            const void **inputs = calloc((size_t)g->nnodes, sizeof *inputs);
            for (int i = 0; i < g->nnodes; i++)
                if (g->nodes[i].op == MC_OP_INPUT || g->nodes[i].op == MC_OP_PARAM) {
                    int b = mc_program_find(p, g->nodes[i].name);
                    assert_true(b >= 0);
                    inputs[i] = p->host[b];
                }
            double **ref = calloc((size_t)g->noutputs, sizeof *ref);
            assert_int_equal(mc_graph_eval(g, inputs, true, ref), MC_OK);
            for (int o = 0; o < g->noutputs; o++) {
                mc_tensor t;
                assert_int_equal(mc_program_output(p, o, &t), MC_OK);
                int64_t n = (int64_t)(t.bytes / mc_dtype_size(t.dtype));
                double *got = malloc((size_t)n * sizeof *got);
                for (int64_t i = 0; i < n; i++)
                    got[i] = mc_load_element(t.data, t.dtype, i);
                double err = mc_test_rel_error(got, ref[o], n);
                if (!(err <= 1e-4))
                    fail_msg("%s (%s): output %s error %g", rel, fuse ? "fused" : "unfused", t.name, err);
                free(got);
                free(ref[o]);
            }
            free(ref);
            free(inputs);
            mc_program_free(p);
        }
        mc_graph_free(g);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_options_and_names),
        cmocka_unit_test(test_set_and_run),
        cmocka_unit_test(test_fill_random_keeps_bound_values),
        cmocka_unit_test(test_files),
        cmocka_unit_test(test_save_inputs),
        cmocka_unit_test(test_examples_against_oracle),
    };
    return mc_test_run(tests);
}
