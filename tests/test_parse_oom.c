/* Parsing when memory runs out: every allocation that parsing a graph makes is failed in turn
 * (tests/failalloc.c), and each time the parser must return MC_ERR_SYSTEM with an "out of
 * memory" message, no graph, and nothing leaked (LeakSanitizer checks at exit). Inputs cover
 * the paths that allocate: a whole graph (names past the first table growth, operand lists,
 * constants, outputs), errors that allocate on their way out (a bad byte, a late definition),
 * and reading a file.
 */
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"

/* Fail allocation 0, 1, 2, ... of parsing `text` until one run makes no failing allocation;
 * that run must give `final` (MC_OK or the input's own error). Returns how many ran. */
static long fail_each_allocation(const char *file, const char *text, size_t len, mc_status final)
{
    for (long n = 0;; n++) {
        mc_graph *g = (mc_graph *)1;
        mc_test_fail_alloc(n);
        mc_status st = file ? mc_graph_parse_file(file, &g) : mc_graph_parse_text("t.graph", text, len, &g);
        bool failed = mc_test_alloc_failed();
        mc_test_fail_alloc(-1);
        if (!failed) {
            if (st != final)
                fail_msg("without failures: status %d, want %d: %s", st, final, mc_error_message());
            if (st == MC_OK) {
                assert_non_null(g);
                FILE *null = fopen("/dev/null", "w");
                assert_int_equal(mc_graph_print(g, null), MC_OK);
                fclose(null);
                mc_graph_free(g);
            }
            return n;
        }
        if (st != MC_ERR_SYSTEM || g != NULL || !strstr(mc_error_message(), "out of memory")) {
            if (st == MC_OK)
                mc_graph_free(g);
            fail_msg("allocation %ld failed: status %d, graph %s, message: %s", n, st,
                     g ? "set" : "NULL", mc_error_message());
        }
        if (n > 100000)
            fail_msg("parsing never ran without failing an allocation");
    }
}

static void test_whole_graph(void **state)
{
    (void)state;
    char *text = malloc(1 << 16), *p = text;
    assert_non_null(text);
    p += sprintf(p, "graph oom\ninput x : f32[4, 8]\ninput i : i32[4, 8]\n");
    for (int k = 0; k < 80; k++) /* past the first growth of the name table */
        p += sprintf(p, "param w%d : f32[8]\n", k);
    p += sprintf(p, "a = add(x, 1.5)\nb = concat(a, a, a, a, a, a, a, a, a, a, a, axis=1)\n"
                    "m = lt(a, 0)\nc = where(m, a, 0)\nd = sum(c, axis=[0, 1], keepdim=true)\n"
                    "e = add(i, 2)\nf = layernorm(a, w0, w1)\noutput b, d, e, f, w79\n");
    long n = fail_each_allocation(NULL, text, (size_t)(p - text), MC_OK);
    assert_true(n > 10);
    free(text);
}

static void test_errors(void **state)
{
    (void)state;
    const char *cases[] = {
        "input x : f32[2]\ny = relu(x) # \xFF\noutput y\n",        /* the bad line is copied */
        "input x : f32[2]\ny = add(x, z)\nz = relu(x)\noutput y\n", /* the scan for z */
        "input x : f32[2]\ny = add(x, 1e999)\noutput y\n",          /* a number's scratch copy */
        "input x : f32[2]\noutput x, x\n",
        "input x : f32[2]\ny = relu(x)\n",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        fail_each_allocation(NULL, cases[i], strlen(cases[i]), MC_ERR_INPUT);
}

static void test_file(void **state)
{
    (void)state;
    fail_each_allocation(mc_test_src("examples/gpt2_block.graph"), NULL, 0, MC_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_graph),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_file),
    };
    return mc_test_run(tests);
}
