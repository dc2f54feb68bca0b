/* Allocation failure injection for the tests named tests/test_*_oom.c (see testlib.h).
 *
 * Those tests are linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc, so every call to
 * these three from the test and from libminic.a lands here first. The wrappers count the calls
 * and fail exactly one of them when asked; everything else goes to the real allocator (and so
 * through AddressSanitizer and LeakSanitizer as usual). This file sits in its own object of the
 * test library so that only the tests that use it need the --wrap options.
 */
#include "testlib.h"

#include <stdatomic.h>
#include <stdlib.h>

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);

/* Atomics: the cpu backend's pool threads allocate too (its tests use one thread, so the
 * order stays the same from run to run, but the counters must not race). */
static atomic_long fail_at = -1; /* index of the allocation to fail, or -1 */
static atomic_long calls;        /* allocations since mc_test_fail_alloc */
static atomic_bool failed;

void mc_test_fail_alloc(long n)
{
    atomic_store(&fail_at, -1);
    atomic_store(&calls, 0);
    atomic_store(&failed, false);
    atomic_store(&fail_at, n);
}

bool mc_test_alloc_failed(void) { return atomic_load(&failed); }

static bool should_fail(void)
{
    long at = atomic_load(&fail_at);
    if (at < 0)
        return false;
    if (atomic_fetch_add(&calls, 1) == at) {
        atomic_store(&failed, true);
        return true;
    }
    return false;
}

void *__wrap_malloc(size_t size) { return should_fail() ? NULL : __real_malloc(size); }
void *__wrap_calloc(size_t n, size_t size) { return should_fail() ? NULL : __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t size) { return should_fail() ? NULL : __real_realloc(p, size); }
