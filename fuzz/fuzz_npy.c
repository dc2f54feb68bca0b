/* libFuzzer target for the .npy reader (mc_npy_parse, runtime/npy.c).
 *
 * Each input is parsed three times, expecting any dtype, bf16 (the only case where <u2 is
 * accepted) and i32 (the only case where <i8 is, narrowed), so every path through the dtype
 * check is covered. On success the
 * result must be self-consistent (bytes = numel × element size, rank in range) and every data
 * byte is read, so ASan sees any out-of-bounds copy; on failure there must be a message that
 * names the file. A successful result is written again (mc_npy_write_stream, to memory) and
 * read back, and must come back identical. A violation traps, which libFuzzer reports as a crash. Leaks are found by
 * LeakSanitizer at the end of each run.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

static volatile unsigned sink; /* reading every byte, so ASan checks the whole range */

static void check(const uint8_t *data, size_t size, mc_dtype want)
{
    mc_array a;
    if (mc_npy_parse(data, size, "fuzz.npy", want, &a) != MC_OK) {
        if (!strstr(mc_error_message(), "fuzz.npy"))
            __builtin_trap();
        return;
    }
    if (a.rank < 0 || a.rank > MC_MAX_RANK || !a.data)
        __builtin_trap();
    if (want < MC_NUM_DTYPES && a.dtype != want)
        __builtin_trap();
    int64_t numel = 1;
    for (int i = 0; i < a.rank; i++)
        if (a.shape[i] < 0 || mc_mul_overflows(numel, a.shape[i], &numel))
            __builtin_trap();
    if ((uint64_t)numel * mc_dtype_size(a.dtype) != a.bytes || a.bytes > size)
        __builtin_trap();
    for (size_t i = 0; i < a.bytes; i++)
        sink += ((const unsigned char *)a.data)[i];
    if (a.dtype == MC_BOOL)
        for (size_t i = 0; i < a.bytes; i++)
            if (((const unsigned char *)a.data)[i] > 1)
                __builtin_trap();
    /* Round trip through the writer. */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        __builtin_trap();
    mc_status st = mc_npy_write_stream(f, "fuzz.npy", &a);
    fclose(f);
    mc_array b;
    if (st != MC_OK || mc_npy_parse(buf, len, "again.npy", a.dtype, &b) != MC_OK)
        __builtin_trap();
    if (b.dtype != a.dtype || b.rank != a.rank || b.bytes != a.bytes ||
        memcmp(b.shape, a.shape, sizeof a.shape) != 0 || memcmp(b.data, a.data, a.bytes) != 0)
        __builtin_trap();
    free(b.data);
    free(buf);
    free(a.data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check(data, size, MC_NUM_DTYPES);
    check(data, size, MC_BF16);
    check(data, size, MC_I32);
    return 0;
}
