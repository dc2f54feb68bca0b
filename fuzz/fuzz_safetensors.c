/* libFuzzer target for the .safetensors reader (mc_safetensors_parse_memory,
 * runtime/safetensors.c, and the JSON reader in support/json.c).
 *
 * On success every tensor the file lists is looked up by name; each one handed out must lie
 * inside the copy of the file, have bytes = numel × element size and a sane rank, and every
 * byte of it is read so ASan sees any out-of-bounds pointer. Names must be sorted and unique.
 * The tensors minic can read are then written again (mc_safetensors_write_stream, to memory:
 * names with every kind of escape, every dtype) and read back, and must come back identical.
 * On failure there must be a message that names the file. A violation traps, which libFuzzer
 * reports as a crash; LeakSanitizer checks the error paths free everything.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

static volatile unsigned sink; /* reading every byte, so ASan checks the whole range */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mc_safetensors *st;
    if (mc_safetensors_parse_memory(data, size, "fuzz.safetensors", &st) != MC_OK) {
        if (st || !strstr(mc_error_message(), "fuzz.safetensors"))
            __builtin_trap();
        return 0;
    }
    int n = mc_safetensors_count(st);
    size_t total = 0;
    const char **names = malloc(((size_t)n + 1) * sizeof *names);
    mc_array *arrays = malloc(((size_t)n + 1) * sizeof *arrays);
    int kept = 0;
    if (!names || !arrays)
        __builtin_trap();
    for (int i = 0; i < n; i++) {
        const char *name = mc_safetensors_name(st, i);
        if (!name || (i > 0 && strcmp(mc_safetensors_name(st, i - 1), name) >= 0))
            __builtin_trap();
        mc_array a;
        if (mc_safetensors_get(st, name, &a) != MC_OK) {
            if (!strstr(mc_error_message(), name))
                __builtin_trap();
            continue;
        }
        if (a.rank < 0 || a.rank > MC_MAX_RANK || a.bytes > size)
            __builtin_trap();
        int64_t numel = 1;
        for (int k = 0; k < a.rank; k++)
            if (a.shape[k] < 0 || mc_mul_overflows(numel, a.shape[k], &numel))
                __builtin_trap();
        if ((uint64_t)numel * mc_dtype_size(a.dtype) != a.bytes)
            __builtin_trap();
        for (size_t k = 0; k < a.bytes; k++)
            sink += ((const unsigned char *)a.data)[k];
        total += a.bytes;
        names[kept] = name;
        arrays[kept++] = a;
    }
    if (total > size) /* tensors do not overlap, so together they fit in the file */
        __builtin_trap();
    /* A lookup of a name not in the list must fail. */
    const char *absent = "\001absent";
    bool listed = false;
    for (int i = 0; i < n; i++)
        listed |= strcmp(mc_safetensors_name(st, i), absent) == 0;
    mc_array none;
    if (!listed && mc_safetensors_get(st, absent, &none) == MC_OK)
        __builtin_trap();

    /* Round trip through the writer. */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        __builtin_trap();
    mc_status s = mc_safetensors_write_stream(f, "fuzz.safetensors", names, arrays, kept);
    fclose(f);
    mc_safetensors *again;
    if (s != MC_OK || mc_safetensors_parse_memory(buf, len, "again", &again) != MC_OK)
        __builtin_trap();
    if (mc_safetensors_count(again) != kept)
        __builtin_trap();
    for (int i = 0; i < kept; i++) {
        mc_array b;
        if (mc_safetensors_get(again, names[i], &b) != MC_OK || b.dtype != arrays[i].dtype ||
            b.rank != arrays[i].rank || b.bytes != arrays[i].bytes ||
            memcmp(b.shape, arrays[i].shape, sizeof b.shape) != 0 ||
            (b.bytes && memcmp(b.data, arrays[i].data, b.bytes) != 0))
            __builtin_trap();
    }
    mc_safetensors_close(again);
    free(buf);
    free(names);
    free(arrays);
    mc_safetensors_close(st);
    return 0;
}
