/* The library never prints (include/minic.h): what it has to tell that is not an error (auto's
 * fallback to another backend, compile progress, a run without a CUDA graph) is a note, kept
 * for mc_program_notes and handed to the options' callback; the command prints notes, the
 * library does not.
 *
 * Each test points file descriptors 1 and 2 at a temporary file around the library calls and
 * asserts that nothing arrived there, on the paths that used to print: `auto` without a GPU
 * (the fallback note), and failures (no GPU for cuda, a bad graph, missing weights). With a
 * GPU here the same test runs the cuda path (NVRTC compile, CUDA graph capture) instead.
 */
#include "testlib.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- capturing stdout and stderr ----------------------------------------------------------- */

typedef struct capture {
    int saved_out, saved_err, fd;
    char path[4200];
} capture;

static void capture_begin(capture *c)
{
    fflush(stdout);
    fflush(stderr);
    snprintf(c->path, sizeof c->path, "%s/captured.txt", mc_test_tmpdir());
    c->fd = open(c->path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    assert_true(c->fd >= 0);
    c->saved_out = dup(1);
    c->saved_err = dup(2);
    assert_true(c->saved_out >= 0 && c->saved_err >= 0);
    assert_true(dup2(c->fd, 1) >= 0 && dup2(c->fd, 2) >= 0);
}

/* Restore fds 1 and 2 and return what was written to them (malloc'd). */
static char *capture_end(capture *c)
{
    fflush(stdout);
    fflush(stderr);
    dup2(c->saved_out, 1);
    dup2(c->saved_err, 2);
    close(c->saved_out);
    close(c->saved_err);
    close(c->fd);
    FILE *f = fopen(c->path, "rb");
    assert_non_null(f);
    char *text = calloc(1, 1 << 16);
    size_t n = fread(text, 1, (1 << 16) - 1, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

#define assert_nothing_printed(text)                                                           \
    do {                                                                                       \
        if ((text)[0])                                                                         \
            fail_msg("the library printed:\n%s", (text));                                     \
    } while (0)

/* ---- the note callback --------------------------------------------------------------------- */

typedef struct heard {
    char text[4096];
    int calls;
} heard;

static void listen(void *ctx, const char *note)
{
    heard *h = ctx;
    h->calls++;
    size_t used = strlen(h->text);
    snprintf(h->text + used, sizeof h->text - used, "%s\n", note);
}

/* ---- tests --------------------------------------------------------------------------------- */

static mc_graph *mlp(void)
{
    mc_graph *g = NULL;
    if (mc_graph_parse_file(mc_test_src("examples/mlp.graph"), &g) != MC_OK)
        fail_msg("%s", mc_error_message());
    return g;
}

/* auto: the fallback (or the GPU path) says nothing itself; the note reaches the caller. */
static void test_auto_prints_nothing(void **state)
{
    (void)state;
    mc_graph *g = mlp();
    heard h = {{0}, 0};
    mc_options opt = mc_options_default();
    opt.note = listen;
    opt.note_ctx = &h;
    mc_program *p = NULL;
    capture c;
    capture_begin(&c);
    mc_status st = mc_program_compile(g, &opt, &p);
    if (st == MC_OK)
        st = mc_program_fill_random(p, 0);
    if (st == MC_OK)
        st = mc_program_run(p);
    if (st == MC_OK)
        st = mc_program_run(p); /* the second run: where cuda captures its graph */
    char *printed = capture_end(&c);
    if (st != MC_OK)
        fail_msg("%s", mc_error_message());
    assert_nothing_printed(printed);
    free(printed);
    /* what the callback heard is what the program kept, note for note */
    assert_string_equal(mc_program_notes(p), h.text);
    if (strcmp(mc_program_backend(p), "cuda") != 0) {
        /* no usable GPU: the fallback is a note that says why and what was chosen */
        char want[64];
        snprintf(want, sizeof want, "; using the %s backend\n", mc_program_backend(p));
        if (!strstr(h.text, want))
            fail_msg("expected \"%s\" in the notes:\n%s", want, h.text);
        assert_int_equal(h.calls, 1);
    }
    mc_program_free(p);

    /* every program that falls back says so: not only the first of the process */
    heard again = {{0}, 0};
    opt.note_ctx = &again;
    assert_int_equal(mc_program_compile(g, &opt, &p), MC_OK);
    assert_string_equal(mc_program_notes(p), again.text);
    if (strcmp(mc_program_backend(p), "cuda") != 0)
        assert_int_equal(again.calls, 1);
    mc_program_free(p);
    mc_graph_free(g);
}

/* quiet: no notes at all, neither kept nor handed over. */
static void test_quiet_keeps_no_notes(void **state)
{
    (void)state;
    mc_graph *g = mlp();
    heard h = {{0}, 0};
    mc_options opt = mc_options_default();
    opt.quiet = true;
    opt.note = listen;
    opt.note_ctx = &h;
    mc_program *p = NULL;
    assert_int_equal(mc_program_compile(g, &opt, &p), MC_OK);
    assert_int_equal(mc_program_fill_random(p, 0), MC_OK);
    assert_int_equal(mc_program_run(p), MC_OK);
    assert_string_equal(mc_program_notes(p), "");
    assert_int_equal(h.calls, 0);
    mc_program_free(p);
    /* and without a callback, notes are still kept */
    opt = mc_options_default();
    assert_int_equal(mc_program_compile(g, &opt, &p), MC_OK);
    if (strcmp(mc_program_backend(p), "cuda") != 0)
        assert_non_null(strstr(mc_program_notes(p), "using the "));
    mc_program_free(p);
    assert_string_equal(mc_program_notes(NULL), "");
    mc_graph_free(g);
}

/* Failures are errors (mc_error_message), never text on a stream. */
static void test_failures_print_nothing(void **state)
{
    (void)state;
    mc_graph *g = mlp();
    capture c;
    capture_begin(&c);
    mc_options opt = mc_options_default();
    opt.backend = MC_BACKEND_CUDA; /* fails without a GPU; compiles and runs with one */
    mc_program *p = NULL;
    mc_status cuda = mc_program_compile(g, &opt, &p);
    if (cuda == MC_OK) {
        mc_program_fill_random(p, 0);
        mc_program_run(p);
        mc_program_run(p);
    }
    mc_program_free(p);
    p = NULL;
    mc_graph *bad = NULL;
    mc_status parse = mc_graph_parse_string("bad.graph", "input x : f32[4]\ny = sofmax(x)\noutput y\n",
                                            &bad);
    opt = mc_options_default();
    opt.backend = MC_BACKEND_REF;
    assert_int_equal(mc_program_compile(g, &opt, &p), MC_OK);
    mc_status weights = mc_program_load_weights(p, "/nonexistent/w.safetensors");
    mc_status npy = mc_program_load_npy(p, "x", "/nonexistent/x.npy");
    mc_status run = mc_program_run(p); /* nothing bound: an error, not a print */
    char *printed = capture_end(&c);
    assert_nothing_printed(printed);
    free(printed);
    assert_int_equal(parse, MC_ERR_INPUT);
    assert_null(bad);
    assert_int_equal(weights, MC_ERR_INPUT);
    assert_int_equal(npy, MC_ERR_INPUT);
    assert_int_equal(run, MC_ERR_INPUT);
    if (cuda != MC_OK)
        assert_int_equal(cuda, MC_ERR_SYSTEM);
    mc_program_free(p);
    mc_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auto_prints_nothing),
        cmocka_unit_test(test_quiet_keeps_no_notes),
        cmocka_unit_test(test_failures_print_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
