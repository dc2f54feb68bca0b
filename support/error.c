/* Errors: one message per thread, set by the failing call and read with mc_error_message().
 *
 * A library must not print or exit on its caller's mistakes, so every fallible function returns
 * an mc_status and leaves its message here. mc_fail_at formats the compiler-style message for a
 * place in a graph file: `file:line:col: error: msg`, the source line, and a caret.
 */
#include "support/support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char message[4096];
static _Thread_local mc_status last_status;

const char *mc_error_message(void) { return message; }
mc_status mc_error_status(void) { return last_status; }

mc_status mc_vfail(mc_status status, const char *fmt, va_list ap)
{
    vsnprintf(message, sizeof message, fmt, ap);
    last_status = status;
    return status;
}

mc_status mc_fail(mc_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mc_vfail(status, fmt, ap);
    va_end(ap);
    return status;
}

/* Copy line `line` (1-based) of text into buf, tabs kept so the caret lines up. */
static void source_line(const char *text, int line, char *buf, size_t size)
{
    buf[0] = '\0';
    if (!text || line < 1)
        return;
    const char *p = text;
    for (int i = 1; i < line && p; i++) {
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    if (!p)
        return;
    size_t n = strcspn(p, "\r\n");
    if (n >= size) {
        n = size - 1;
        /* (parser) Cut a long line between UTF-8 characters, never inside one, so that the
         * message stays valid UTF-8. */
        while (n > 0 && ((unsigned char)p[n] & 0xC0) == 0x80)
            n--;
    }
    memcpy(buf, p, n);
    buf[n] = '\0';
}

mc_status mc_fail_at(mc_status status, const char *file, const char *text, int line, int col,
                     const char *fmt, ...)
{
    char what[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);

    char src[512];
    source_line(text, line, src, sizeof src);
    char caret[520];
    int n = 0;
    for (int i = 0; i + 1 < col && n < (int)sizeof caret - 2 && src[i]; i++)
        caret[n++] = src[i] == '\t' ? '\t' : ' ';
    caret[n++] = '^';
    caret[n] = '\0';
    if (src[0] || text)
        return mc_fail(status, "%s:%d:%d: error: %s\n  %s\n  %s", file ? file : "<graph>", line,
                       col, what, src, caret);
    return mc_fail(status, "%s:%d:%d: error: %s", file ? file : "<graph>", line, col, what);
}

_Noreturn void mc_internal_error(const char *file, int line, const char *what)
{
    fprintf(stderr, "minic: internal error at %s:%d: %s\n", file, line, what);
    abort();
}
