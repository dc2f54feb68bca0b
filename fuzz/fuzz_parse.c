/* libFuzzer target for the `.graph` front end and checker (frontend/lexer.c, frontend/parser.c,
 * then type inference, the verifier and the printer behind them).
 *
 * Each input is parsed as a graph file, bytes as they are (NUL bytes and invalid UTF-8
 * included, through the length-based entry that mc_graph_parse_string and _file share).
 *   - On failure there must be no graph, an input-error status, and a located message
 *     (`fuzz.graph:LINE:COL: error: ...`) that is itself valid UTF-8.
 *   - On success the graph must pass the verifier, and what mc_graph_print writes must parse
 *     again into a graph that prints the same: the printer's output is a valid graph file and
 *     the round trip is a fixed point.
 * A violation traps, which libFuzzer reports as a crash; leaks are found by LeakSanitizer.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"

/* The printed graph, in a malloc'd string (NULL if printing failed). */
static char *print_graph(const mc_graph *g, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f)
        return NULL;
    mc_status st = mc_graph_print(g, f);
    fclose(f);
    if (st != MC_OK) {
        free(buf);
        return NULL;
    }
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mc_graph *g = (mc_graph *)&g; /* must be overwritten */
    mc_status st = mc_graph_parse_text("fuzz.graph", (const char *)data, size, &g);
    if (st != MC_OK) {
        const char *msg = mc_error_message();
        size_t bad;
        char why[64];
        if (g != NULL || (st != MC_ERR_INPUT && st != MC_ERR_SYSTEM))
            __builtin_trap();
        if (strncmp(msg, "fuzz.graph:", 11) != 0 || !strstr(msg, ": error: "))
            __builtin_trap();
        if (!mc_text_check(msg, strlen(msg), &bad, why, sizeof why))
            __builtin_trap();
        return 0;
    }
    if (!g || mc_graph_verify(g, "parse") != MC_OK)
        __builtin_trap();
    size_t len1 = 0, len2 = 0;
    char *text1 = print_graph(g, &len1);
    if (!text1)
        __builtin_trap();
    mc_graph *again = NULL;
    if (mc_graph_parse_text("printed.graph", text1, len1, &again) != MC_OK) {
        fprintf(stderr, "printed graph does not parse: %s\n--- printed:\n%s\n", mc_error_message(),
                text1);
        __builtin_trap();
    }
    char *text2 = print_graph(again, &len2);
    if (!text2 || len1 != len2 || memcmp(text1, text2, len1) != 0) {
        fprintf(stderr, "print(parse(print(g))) differs:\n--- first:\n%s\n--- second:\n%s\n",
                text1, text2 ? text2 : "(failed)");
        __builtin_trap();
    }
    free(text1);
    free(text2);
    mc_graph_free(again);
    mc_graph_free(g);
    return 0;
}
