/* libFuzzer target for the ONNX reader and importer (mc_onnx_load_memory, frontend/onnx.c,
 * and protobuf-c's unpacker behind it).
 *
 * On success the graph must print, every param's bytes must be exactly its shape's size (each
 * byte is read, so ASan sees a bad pointer), and the names must map back. On failure there must
 * be a message naming the file. A violation traps, which libFuzzer reports as a crash;
 * LeakSanitizer checks that the error paths free everything.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/onnx.h"

static volatile unsigned sink;

static void ignore_note(void *ctx, const char *line)
{
    (void)ctx;
    sink += (unsigned)strlen(line);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mc_onnx *m = NULL;
    if (mc_onnx_load_memory(data, size, "fuzz.onnx", size & 1 ? MC_ONNX_F64_AS_F32 : 0,
                            size & 2 ? ignore_note : NULL, NULL, &m) != MC_OK) {
        if (m || !strstr(mc_error_message(), "fuzz.onnx"))
            __builtin_trap();
        return 0;
    }
    FILE *null = fopen("/dev/null", "w");
    if (null) {
        if (mc_graph_print(mc_onnx_graph(m), null) != MC_OK)
            __builtin_trap();
        fclose(null);
    }
    for (int k = 0; k < m->nparams; k++) {
        const mc_onnx_tensor *t = &m->params[k];
        int64_t n = 1;
        for (int d = 0; d < t->rank; d++)
            n *= t->shape[d];
        if ((size_t)n * mc_dtype_size(t->dtype) != t->bytes)
            __builtin_trap();
        for (size_t b = 0; b < t->bytes; b++)
            sink += ((const unsigned char *)t->data)[b];
        const char *back = mc_onnx_minic_name(m, t->onnx_name);
        if (!back || strcmp(back, t->name))
            __builtin_trap();
    }
    mc_onnx_free(m);
    return 0;
}
