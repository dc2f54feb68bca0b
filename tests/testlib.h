/* Helpers shared by the tests: running the minic command, temporary files, comparing arrays.
 * Every test includes this after the cmocka headers' prerequisites. */
#ifndef MINIC_TESTLIB_H
#define MINIC_TESTLIB_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "minic.h"

/* Run `minic ARGS...` (the built binary, $MINIC_BIN) with a shell command line; capture
 * stdout and stderr (malloc'd, NUL-terminated; free them). Returns the exit status. */
int mc_test_minic(const char *args, char **out, char **err);
/* A fresh directory under the build tree for this test's files; path valid until exit. */
const char *mc_test_tmpdir(void);
/* Write text to dir/name and return the full path (static buffer rotation of 8). */
const char *mc_test_write_file(const char *name, const void *data, size_t size);
/* Path of a file in the source tree ($MINIC_SRC/rel). */
const char *mc_test_src(const char *rel);
/* Relative L2 error ||a-b|| / ||b|| (max-abs when ||b|| is 0); inf when a NaN/inf mismatch. */
double mc_test_rel_error(const double *a, const double *b, int64_t n);
/* True when a CUDA GPU is usable here (the cuda backend's probe). */
bool mc_test_have_gpu(void);
/* The backends a test that runs on each of them covers: $MINIC_TEST_BACKEND (ref, cpu or cuda)
 * alone, else ref, cpu where built and cuda where a GPU is usable ("cuda: skipped: no GPU"
 * printed otherwise). Prints "backend NAME" for each. Returns 0, or the exit status the test's
 * main should return at once: 77 (skipped) for MINIC_TEST_BACKEND=cuda without a GPU, 1 for an
 * unknown name. */
int mc_test_backends(mc_backend_kind out[3], int *n);

/* The CPU target the CPU backend's tests run under: $MINIC_TEST_CPU_TARGET (an LLVM CPU name,
 * set by CTest for the tests registered once per target), NULL (the host) when unset or "host".
 * Read by the test harness only; the library never reads it. */
const char *mc_test_cpu_target(void);
/* mc_options_default() with cpu_target = mc_test_cpu_target(). */
mc_options mc_test_options(void);
/* The graph of `text` (named t.graph in messages); the test fails when it does not parse. */
mc_graph *mc_test_parse(const char *text);

/* Every cmocka test's main ends with `return mc_test_run(tests);`:
 *  - under $MINIC_TEST_CPU_TARGET, first checks that this machine can run code for that CPU,
 *    else prints "skipped: ..." with the reason and exits with 77 (CTest's skip);
 *  - runs the tests (cmocka_run_group_tests);
 *  - when one failed, ends the process at once with _exit(1) after cmocka's report: cmocka
 *    leaves a failed test's allocations behind when it jumps out of it, and LeakSanitizer's
 *    report of them at exit would bury the failure. */
#define mc_test_run(tests) mc_test_run_group(#tests, tests, sizeof(tests) / sizeof((tests)[0]))
int mc_test_run_group(const char *name, const struct CMUnitTest *tests, size_t n);
/* Its two ends, for a main that runs its tests otherwise: the check of $MINIC_TEST_CPU_TARGET,
 * and the exit after `failed` failed tests (returns 0 when none did). */
void mc_test_check_cpu_target(void);
int mc_test_exit(int failed);

/* Allocation failure injection (tests/failalloc.c), for tests named test_*_oom.c only: they are
 * linked so that malloc, calloc and realloc from the test and from libminic go through it.
 * mc_test_fail_alloc(n): the allocation with index n from now on (0 = the next) fails, every
 * other one succeeds; n = -1 turns it off. mc_test_alloc_failed(): whether that one happened. */
void mc_test_fail_alloc(long n);
bool mc_test_alloc_failed(void);

#endif
