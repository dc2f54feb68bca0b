/* Every public function of include/minic.h given NULL where it takes a pointer: an error status
 * (or MC_ERROR, or false) and a message that says what was missing, never a crash, and never a
 * message that prints a NULL string as "(null)". Functions that return no status (free,
 * names) must not crash either.
 *
 * The list follows the header; a new public function with a pointer argument belongs here.
 */
#include "testlib.h"

#include <string.h>

/* The last call failed with MC_ERR_INPUT and a message that names no "(null)". */
static void expect_input_error(const char *what)
{
    const char *msg = mc_error_message();
    if (mc_error_status() != MC_ERR_INPUT)
        fail_msg("%s: status %d, expected MC_ERR_INPUT", what, mc_error_status());
    if (!msg || !msg[0])
        fail_msg("%s: no message", what);
    if (strstr(msg, "(null)"))
        fail_msg("%s: the message prints a NULL string: %s", what, msg);
    if (strstr(msg, "no-such-dtype"))
        fail_msg("%s: failed without a message of its own", what);
}

/* Leave a known message, so that a call that fails without setting its own is caught. */
static void reset(void)
{
    mc_dtype d;
    assert_false(mc_dtype_parse("no-such-dtype", &d));
    assert_non_null(strstr(mc_error_message(), "no-such-dtype"));
}

#define EXPECT_STATUS(call)                                                                    \
    do {                                                                                       \
        reset();                                                                               \
        mc_status st_ = (call);                                                                \
        if (st_ != MC_ERR_INPUT)                                                               \
            fail_msg("%s: returned %d, expected MC_ERR_INPUT", #call, st_);                    \
        expect_input_error(#call);                                                             \
    } while (0)

#define EXPECT_VALUE_ERROR(call)                                                               \
    do {                                                                                       \
        reset();                                                                               \
        mc_value v_ = (call);                                                                  \
        if (v_ != MC_ERROR)                                                                    \
            fail_msg("%s: returned %d, expected MC_ERROR", #call, v_);                         \
        expect_input_error(#call);                                                             \
    } while (0)

static void test_dtypes(void **state)
{
    (void)state;
    mc_dtype d = MC_F32;
    reset();
    assert_false(mc_dtype_parse(NULL, &d));
    expect_input_error("mc_dtype_parse(NULL, &d)");
    reset();
    assert_false(mc_dtype_parse("f16", NULL));
    expect_input_error("mc_dtype_parse(\"f16\", NULL)");
    assert_true(mc_dtype_parse("f16", &d));
    assert_int_equal(d, MC_F16);
    /* out-of-range dtypes: a name and a size that say so, no crash */
    assert_string_equal(mc_dtype_name((mc_dtype)99), "?");
    assert_int_equal(mc_dtype_size((mc_dtype)-1), 0);
    assert_non_null(mc_error_message());
}

static void test_graphs(void **state)
{
    (void)state;
    mc_graph *out = (mc_graph *)1;
    EXPECT_STATUS(mc_graph_parse_file(NULL, &out));
    assert_null(out);
    EXPECT_STATUS(mc_graph_parse_file("x.graph", NULL));
    out = (mc_graph *)1;
    EXPECT_STATUS(mc_graph_parse_string("f", NULL, &out));
    assert_null(out);
    EXPECT_STATUS(mc_graph_parse_string("f", "graph g\n", NULL));
    mc_value one = 0;
    EXPECT_STATUS(mc_graph_set_outputs(NULL, &one, 1));
    EXPECT_STATUS(mc_graph_print(NULL, stdout));
    EXPECT_STATUS(mc_value_set_name(NULL, 0, "x"));
    mc_graph_free(NULL);

    mc_graph *g = mc_graph_new(NULL); /* a graph may be unnamed */
    assert_non_null(g);
    EXPECT_STATUS(mc_graph_print(g, NULL));
    EXPECT_STATUS(mc_graph_set_outputs(g, NULL, 1));
    int64_t shape[1] = {4};
    mc_value x = mc_input(g, "x", MC_F32, shape, 1);
    assert_true(x >= 0);
    EXPECT_STATUS(mc_value_set_name(g, x, NULL));
    mc_graph_free(g);
}

static void test_declarations(void **state)
{
    (void)state;
    int64_t shape[2] = {2, 3};
    EXPECT_VALUE_ERROR(mc_input(NULL, "x", MC_F32, shape, 2));
    EXPECT_VALUE_ERROR(mc_param(NULL, "w", MC_F32, shape, 2));
    EXPECT_VALUE_ERROR(mc_scalar(NULL, 1.0, MC_F32));
    mc_graph *g = mc_graph_new("g");
    EXPECT_VALUE_ERROR(mc_input(g, NULL, MC_F32, shape, 2));
    EXPECT_VALUE_ERROR(mc_param(g, NULL, MC_F32, shape, 2));
    EXPECT_VALUE_ERROR(mc_input(g, "y", MC_F32, NULL, 2));
    reset();
    assert_int_equal(mc_dim_sym(NULL, "T", 0), 0);
    expect_input_error("mc_dim_sym(NULL, ...)");
    reset();
    assert_int_equal(mc_dim_sym(g, NULL, 0), 0);
    expect_input_error("mc_dim_sym(g, NULL, 0)");
    mc_graph_free(g);
}

static void test_builders(void **state)
{
    (void)state;
    /* every builder with no graph */
#define UNARY(op) EXPECT_VALUE_ERROR(mc_##op(NULL, 0));
#define BINARY(op) EXPECT_VALUE_ERROR(mc_##op(NULL, 0, 0));
    MC_UNARY_BUILDERS(UNARY)
    MC_BINARY_BUILDERS(BINARY)
#undef UNARY
#undef BINARY
    int axes[1] = {0};
    int64_t shape[2] = {2, 3};
    EXPECT_VALUE_ERROR(mc_where(NULL, 0, 0, 0));
    EXPECT_VALUE_ERROR(mc_cast(NULL, 0, MC_F16));
    EXPECT_VALUE_ERROR(mc_sum(NULL, 0, axes, 1, false));
    EXPECT_VALUE_ERROR(mc_mean(NULL, 0, NULL, 0, false));
    EXPECT_VALUE_ERROR(mc_max(NULL, 0, axes, 1, true));
    EXPECT_VALUE_ERROR(mc_min(NULL, 0, NULL, 0, true));
    EXPECT_VALUE_ERROR(mc_softmax(NULL, 0, -1));
    EXPECT_VALUE_ERROR(mc_log_softmax(NULL, 0, -1));
    EXPECT_VALUE_ERROR(mc_layernorm(NULL, 0, 0, 0, 1e-5));
    EXPECT_VALUE_ERROR(mc_rmsnorm(NULL, 0, 0, 1e-5));
    EXPECT_VALUE_ERROR(mc_matmul(NULL, 0, 0));
    EXPECT_VALUE_ERROR(mc_linear(NULL, 0, 0, MC_NONE));
    EXPECT_VALUE_ERROR(mc_transpose(NULL, 0, NULL, 0));
    EXPECT_VALUE_ERROR(mc_reshape(NULL, 0, shape, 2));
    EXPECT_VALUE_ERROR(mc_expand(NULL, 0, shape, 2));
    EXPECT_VALUE_ERROR(mc_slice(NULL, 0, 0, 0, MC_END));
    mc_value xs[2] = {0, 0};
    EXPECT_VALUE_ERROR(mc_concat(NULL, xs, 2, 0));
    EXPECT_VALUE_ERROR(mc_iota(NULL, shape, 2, 0, MC_I32));
    EXPECT_VALUE_ERROR(mc_full(NULL, shape, 2, 1.0, MC_F32));

    /* NULL lists with entries, on a real graph */
    mc_graph *g = mc_graph_new("g");
    mc_value x = mc_input(g, "x", MC_F32, shape, 2);
    assert_true(x >= 0);
    EXPECT_VALUE_ERROR(mc_transpose(g, x, NULL, 2));
    EXPECT_VALUE_ERROR(mc_reshape(g, x, NULL, 2));
    EXPECT_VALUE_ERROR(mc_expand(g, x, NULL, 2));
    EXPECT_VALUE_ERROR(mc_concat(g, NULL, 2, 0));
    EXPECT_VALUE_ERROR(mc_iota(g, NULL, 2, 0, MC_I32));
    EXPECT_VALUE_ERROR(mc_full(g, NULL, 2, 1.0, MC_F32));
    mc_graph_free(g);
}

static void test_programs(void **state)
{
    (void)state;
    mc_program *p = (mc_program *)1;
    mc_options opt = mc_options_default();
    opt.backend = MC_BACKEND_REF;
    opt.quiet = true;
    EXPECT_STATUS(mc_program_compile(NULL, &opt, &p));
    assert_null(p);
    mc_program_free(NULL);
    reset();
    assert_string_equal(mc_program_backend(NULL), "none");
    expect_input_error("mc_program_backend(NULL)");
    EXPECT_STATUS(mc_program_set(NULL, "x", NULL, 0));
    EXPECT_STATUS(mc_program_load_npy(NULL, "x", "x.npy"));
    EXPECT_STATUS(mc_program_load_weights(NULL, "w.safetensors"));
    EXPECT_STATUS(mc_program_fill_random(NULL, 0));
    EXPECT_STATUS(mc_program_run(NULL));
    EXPECT_STATUS(mc_program_set_dim(NULL, "T", 1));
    reset();
    assert_int_equal(mc_program_compilations(NULL), 0);
    expect_input_error("mc_program_compilations(NULL)");
    reset();
    assert_int_equal(mc_program_num_outputs(NULL), 0);
    expect_input_error("mc_program_num_outputs(NULL)");
    mc_tensor t;
    EXPECT_STATUS(mc_program_output(NULL, 0, &t));
    float buf[4];
    EXPECT_STATUS(mc_program_read_output(NULL, 0, buf, sizeof buf));
    EXPECT_STATUS(mc_program_save_outputs(NULL, "y.npy"));

    /* a real program, NULL everywhere else */
    mc_graph *g = NULL;
    assert_int_equal(mc_graph_parse_string("g", "graph g\ninput x : f32[4]\ny = neg(x)\noutput y\n", &g),
                     MC_OK);
    EXPECT_STATUS(mc_program_compile(g, &opt, NULL));
    assert_int_equal(mc_program_compile(g, NULL, &p), MC_OK); /* NULL options: the defaults */
    mc_program_free(p);
    assert_int_equal(mc_program_compile(g, &opt, &p), MC_OK);
    EXPECT_STATUS(mc_program_set(p, NULL, buf, sizeof buf));
    EXPECT_STATUS(mc_program_set(p, "x", NULL, sizeof buf));
    EXPECT_STATUS(mc_program_load_npy(p, NULL, "x.npy"));
    EXPECT_STATUS(mc_program_load_npy(p, "x", NULL));
    EXPECT_STATUS(mc_program_load_weights(p, NULL));
    EXPECT_STATUS(mc_program_set_dim(p, NULL, 1));
    assert_int_equal(mc_program_set(p, "x", (float[4]){1, 2, 3, 4}, 4 * sizeof(float)), MC_OK);
    assert_int_equal(mc_program_run(p), MC_OK);
    EXPECT_STATUS(mc_program_output(p, 0, NULL));
    EXPECT_STATUS(mc_program_read_output(p, 0, NULL, sizeof buf));
    EXPECT_STATUS(mc_program_read_output(p, 0, buf, 3)); /* wrong size */
    assert_int_equal(mc_program_read_output(p, 0, buf, sizeof buf), MC_OK);
    assert_true(buf[0] == -1 && buf[3] == -4);
    EXPECT_STATUS(mc_program_save_outputs(p, NULL));
    mc_program_free(p);
    mc_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtypes),
        cmocka_unit_test(test_graphs),
        cmocka_unit_test(test_declarations),
        cmocka_unit_test(test_builders),
        cmocka_unit_test(test_programs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
