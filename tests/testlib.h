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

/* Allocation failure injection (tests/failalloc.c), for tests named test_*_oom.c only: they are
 * linked so that malloc, calloc and realloc from the test and from libminic go through it.
 * mc_test_fail_alloc(n): the allocation with index n from now on (0 = the next) fails, every
 * other one succeeds; n = -1 turns it off. mc_test_alloc_failed(): whether that one happened. */
void mc_test_fail_alloc(long n);
bool mc_test_alloc_failed(void);

#endif
