/* What the backend interface gives every backend besides the structures: the one way to tell
 * the user something that is not an error (the library never prints).
 */
#include "backends/backend.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mc_program_note(mc_program *p, const char *fmt, ...)
{
    if (!p || p->opt.quiet)
        return;
    char note[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(note, sizeof note, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t len = strlen(note);
    /* Kept best-effort: a note that finds no memory is still handed to the callback. */
    char *grown = realloc(p->notes, p->notes_len + len + 2);
    if (grown) {
        memcpy(grown + p->notes_len, note, len);
        grown[p->notes_len + len] = '\n';
        grown[p->notes_len + len + 1] = '\0';
        p->notes = grown;
        p->notes_len += len + 1;
    }
    if (p->opt.note)
        p->opt.note(p->opt.note_ctx, note);
}
