/* examples/mlp.c: the MLP block of examples/mlp.graph, built with minic's C API.
 *
 *     y = linear(gelu(linear(x, fc1.w, fc1.b)), fc2.w, fc2.b) + x
 *
 * It builds the graph, compiles it, fills the input and the weights from the seeded generator
 * (the same values `minic run examples/mlp.graph` uses: they are chosen by seed and name), runs
 * it and prints the output's summary in the same form as `minic run`. Usage:
 *
 *     mlp_example [auto|cuda|cpu|ref]
 *
 * Every call that can fail returns an mc_status; the builders return MC_ERROR instead, and
 * mc_graph_set_outputs reports the first failure, so the graph is checked once, at the end.
 */
#include <stdio.h>
#include <string.h>

#include "minic.h"

static int fail(const char *what)
{
    fprintf(stderr, "mlp_example: %s failed: %s\n", what, mc_error_message());
    return mc_error_status() == MC_ERR_INPUT ? 1 : 2;
}

int main(int argc, char **argv)
{
    mc_options opt = mc_options_default();
    if (argc > 1) {
        const mc_backend_kind kinds[] = {MC_BACKEND_AUTO, MC_BACKEND_CUDA, MC_BACKEND_CPU, MC_BACKEND_REF};
        bool known = false;
        for (int i = 0; i < 4; i++)
            if (strcmp(argv[1], mc_backend_name(kinds[i])) == 0) {
                opt.backend = kinds[i];
                known = true;
            }
        if (!known) {
            fprintf(stderr, "usage: mlp_example [auto|cuda|cpu|ref]\n");
            return 1;
        }
    }

    /* The graph: sizes as in examples/mlp.graph. */
    mc_graph *g = mc_graph_new("mlp");
    if (!g)
        return fail("mc_graph_new");
    const int64_t xs[] = {32, 128}, w1[] = {512, 128}, b1[] = {512}, w2[] = {128, 512}, b2[] = {128};
    mc_value x = mc_input(g, "x", MC_F32, xs, 2);
    mc_value fc1_w = mc_param(g, "fc1.w", MC_F32, w1, 2);
    mc_value fc1_b = mc_param(g, "fc1.b", MC_F32, b1, 1);
    mc_value fc2_w = mc_param(g, "fc2.w", MC_F32, w2, 2);
    mc_value fc2_b = mc_param(g, "fc2.b", MC_F32, b2, 1);
    mc_value h = mc_linear(g, x, fc1_w, fc1_b);
    mc_value a = mc_gelu(g, h);
    mc_value o = mc_linear(g, a, fc2_w, fc2_b);
    mc_value y = mc_add(g, o, x);
    if (y >= 0 && mc_value_set_name(g, y, "y") != MC_OK) {
        mc_graph_free(g);
        return fail("mc_value_set_name");
    }
    if (mc_graph_set_outputs(g, &y, 1) != MC_OK) {
        int rc = fail("building the graph");
        mc_graph_free(g);
        return rc;
    }

    /* Compile, bind, run. */
    mc_program *p = NULL;
    if (mc_program_compile(g, &opt, &p) != MC_OK) {
        int rc = fail("mc_program_compile");
        mc_graph_free(g);
        return rc;
    }
    mc_tensor out;
    if (mc_program_fill_random(p, 0) != MC_OK || mc_program_run(p) != MC_OK ||
        mc_program_output(p, 0, &out) != MC_OK) {
        int rc = fail("running the program");
        mc_program_free(p);
        mc_graph_free(g);
        return rc;
    }

    /* The summary, as `minic run` prints it. */
    int64_t n = (int64_t)(out.bytes / mc_dtype_size(out.dtype));
    const float *v = out.data; /* the output is f32 */
    printf("backend: %s\n", mc_program_backend(p));
    printf("%s: %s[%lld, %lld]\n  values:", out.name, mc_dtype_name(out.dtype),
           (long long)out.shape[0], (long long)out.shape[1]);
    for (int64_t i = 0; i < n && i < 8; i++)
        printf(" %.6g", (double)v[i]);
    printf("%s (%lld elements)\n", n > 8 ? " ..." : "", (long long)n);
    double sum = 0, abs_sum = 0;
    for (int64_t i = 0; i < n; i++) {
        sum += v[i];
        abs_sum += v[i] < 0 ? -(double)v[i] : (double)v[i]; /* no libm needed */
    }
    printf("  checksum: sum=%.9g sum_abs=%.9g\n", sum, abs_sum);

    mc_program_free(p);
    mc_graph_free(g);
    return 0;
}
