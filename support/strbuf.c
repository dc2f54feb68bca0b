/* A growable string (support.h): generated source, plan notes, anything appended piece by piece.
 * An allocation failure sets `oom`, after which appends do nothing, so a caller checks once at
 * the end instead of after every append.
 */
#include "support/support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mc_sb_vprintf(mc_strbuf *sb, const char *fmt, va_list ap)
{
    if (sb->oom)
        return;
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) {
        sb->oom = true;
        return;
    }
    if (sb->len + (size_t)n + 1 > sb->cap) {
        size_t cap = sb->cap ? sb->cap : 4096;
        while (cap < sb->len + (size_t)n + 1)
            cap *= 2;
        char *d = realloc(sb->data, cap);
        if (!d) {
            sb->oom = true;
            return;
        }
        sb->data = d;
        sb->cap = cap;
    }
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    sb->len += (size_t)n;
}

void mc_sb_printf(mc_strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mc_sb_vprintf(sb, fmt, ap);
    va_end(ap);
}

void mc_sb_puts(mc_strbuf *sb, const char *s)
{
    mc_sb_printf(sb, "%s", s);
}

void mc_sb_free(mc_strbuf *sb)
{
    free(sb->data);
    memset(sb, 0, sizeof *sb);
}
