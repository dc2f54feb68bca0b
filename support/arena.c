/* Arenas and checked size arithmetic.
 *
 * A graph, a kernel program and a pass's scratch each own an arena: everything allocated from
 * it is freed at once with it, so passes never track individual frees. Blocks grow
 * geometrically, so an arena holding n bytes costs O(n) and O(log n) blocks.
 */
#include "support/support.h"

#include <stdlib.h>
#include <string.h>

struct mc_arena_block {
    mc_arena_block *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

void *mc_arena_alloc(mc_arena *a, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    mc_arena_block *b = a->head;
    if (!b || b->size - b->used < size) {
        size_t want = b ? b->size * 2 : 4096;
        if (want > ((size_t)64 << 20))
            want = (size_t)64 << 20;
        if (want < size)
            want = size;
        b = malloc(sizeof *b + want);
        if (!b)
            return NULL;
        b->size = want;
        b->used = 0;
        b->next = a->head;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += size;
    memset(p, 0, size);
    return p;
}

char *mc_arena_strndup(mc_arena *a, const char *s, size_t n)
{
    char *p = mc_arena_alloc(a, n + 1);
    if (p)
        memcpy(p, s, n);
    return p;
}

char *mc_arena_strdup(mc_arena *a, const char *s) { return mc_arena_strndup(a, s, strlen(s)); }

void mc_arena_free(mc_arena *a)
{
    for (mc_arena_block *b = a->head, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    a->head = NULL;
}

bool mc_mul_overflows(int64_t a, int64_t b, int64_t *out) { return __builtin_mul_overflow(a, b, out); }
bool mc_add_overflows(int64_t a, int64_t b, int64_t *out) { return __builtin_add_overflow(a, b, out); }
