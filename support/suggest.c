/* "Did you mean ...": the valid names nearest to a misspelt one (docs/FORMAT.md §3).
 *
 * An unknown operator in a .graph file, an unknown option or an unknown command names the
 * nearest valid ones. Nearness is the optimal string alignment distance (insertions,
 * deletions, substitutions, and swaps of two neighbouring letters, each costing one), which
 * catches the usual typing slips: `sofmax`, `lienar`, `--iter`, `rn`. A candidate is offered
 * only when it is close for the word's length (one edit for up to four letters, two up to
 * eight, three beyond), so `frobnicate` suggests nothing rather than something absurd; every
 * candidate at the smallest distance is offered. When none is that close, a candidate that
 * the word begins (`--prof` for `--profile` and `--profile-json`) still is.
 *
 * The parser uses it for operators, the command for options and commands; it lives with the
 * error functions because both are ways of telling the user what went wrong.
 */
#include "support/support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_WORD = 64 }; /* longer words are compared by their first 64 bytes */

/* Optimal string alignment distance between a[0..n) and b[0..m), n, m <= MAX_WORD. */
static int distance(const char *a, size_t n, const char *b, size_t m)
{
    int d[MAX_WORD + 1][MAX_WORD + 1];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int cost = a[i - 1] != b[j - 1];
            int best = d[i - 1][j - 1] + cost;
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m];
}

static int allowed_distance(size_t len)
{
    return len <= 4 ? 1 : len <= 8 ? 2 : 3;
}

bool mc_suggest(const char *word, size_t len, const char *const *names, int n, char *buf,
                size_t size)
{
    if (size == 0)
        return false;
    buf[0] = '\0';
    if (!word || len == 0 || n <= 0)
        return false;
    size_t wn = len < MAX_WORD ? len : MAX_WORD;
    int *dist = malloc((size_t)n * sizeof *dist);
    if (!dist)
        return false; /* a suggestion is a courtesy: no memory, no suggestion */
    int best = allowed_distance(wn) + 1;
    for (int i = 0; i < n; i++) {
        dist[i] = best + 1;
        if (!names[i] || !names[i][0])
            continue;
        size_t nl = strlen(names[i]);
        if (nl == len && memcmp(names[i], word, len) == 0)
            continue; /* the word itself is no suggestion */
        dist[i] = distance(word, wn, names[i], nl < MAX_WORD ? nl : MAX_WORD);
        if (dist[i] < best)
            best = dist[i];
    }
    bool prefix = best > allowed_distance(wn);
    int count = 0, total = 0;
    for (int i = 0; i < n; i++) {
        bool pick = prefix ? len >= 2 && names[i] && strlen(names[i]) > len &&
                                 memcmp(names[i], word, len) == 0
                           : dist[i] == best;
        dist[i] = pick; /* reused: 1 marks a suggestion */
        total += pick;
    }
    size_t used = 0;
    for (int i = 0; i < n && used < size; i++) {
        if (!dist[i])
            continue;
        count++;
        const char *sep = count == 1 ? "" : count == total ? " or " : ", ";
        int w = snprintf(buf + used, size - used, "%s'%s'", sep, names[i]);
        if (w < 0 || (size_t)w >= size - used) {
            buf[used] = '\0'; /* no half name */
            break;
        }
        used += (size_t)w;
    }
    free(dist);
    return used > 0;
}
