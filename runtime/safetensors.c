/* Reading and writing .safetensors files, docs/FORMAT.md §4.
 *
 * A safetensors file is an 8-byte little-endian header length N, N bytes of JSON mapping each
 * tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (plus an optional
 * "__metadata__" object of strings), then the data section; offsets are relative to its start.
 *
 * A file is memory-mapped (read-only, private), so only what is used is ever read: the header,
 * and then the bytes of the tensors a program binds; a 3 GiB tensor the graph does not use
 * costs no memory and no time. It is validated completely before anything is handed
 * out: the header length against the file size (and a 100 MiB cap, as the reference
 * implementation has), the JSON by the strict reader in json.c, every entry's fields, offsets
 * ordered and inside the data section, each size equal to numel × element size (checked
 * arithmetic), and no two tensors overlapping. A tensor whose dtype minic has no use for (F64,
 * I8, ...) does not make the file unreadable — weight files often carry such extras — but its
 * offsets and size are validated like the others, and asking for it is a clear error. After
 * that, mc_safetensors_get is a binary search by name returning a pointer into the buffer.
 *
 * A mapping starts on a page, so the data section is 8-byte aligned when the header's length
 * is a multiple of 8 (the format's writers pad it so); a tensor is then aligned to its element
 * size whenever its offset is, which every common writer ensures (this writer by storing
 * tensors in order of decreasing element size, without gaps, as the reference readers
 * require). A file whose data section would be misaligned (or that cannot be mapped) is read
 * into a buffer placed so that its data section starts 64-byte aligned, as before. A mapped
 * file that is truncated while open makes later reads of the lost pages fault (SIGBUS), as
 * with any mapped file: weights are expected to stay as they are while a program loads them.
 *
 * mc_safetensors_parse_memory is the same validation on bytes in memory, for the fuzzer.
 */
#include "runtime/runtime.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum { MAX_HEADER = 100 << 20, DATA_ALIGN = 64 };

typedef struct st_tensor {
    const char *name;  /* decoded JSON key, NUL-free */
    const char *dtype_name;
    int dtype;         /* an mc_dtype, or -1 for a dtype minic does not handle */
    int rank;          /* the file's rank (may exceed MC_MAX_RANK for unused tensors) */
    int64_t shape[MC_MAX_RANK];
    int64_t begin, end; /* byte range in the data section */
} st_tensor;

struct mc_safetensors {
    char *path;                /* for messages */
    unsigned char *buffer;     /* the allocation holding the file, or NULL when mapped */
    void *map;                 /* the file's mapping, or NULL */
    size_t map_size;
    const unsigned char *data; /* the data section */
    size_t data_size;
    st_tensor *tensors; /* sorted by name */
    int n;
    mc_arena arena; /* JSON tree and names */
};

/* Every dtype the format defines with a whole-byte element, so that unused tensors can be
 * size-checked too. */
static const struct {
    const char *name;
    int size;
    int dtype;
} dtype_table[] = {
    {"F32", 4, MC_F32},    {"F16", 2, MC_F16},     {"BF16", 2, MC_BF16},   {"I32", 4, MC_I32},
    {"BOOL", 1, MC_BOOL},  {"F64", 8, -1},         {"I64", 8, -1},         {"U64", 8, -1},
    {"U32", 4, -1},        {"I16", 2, -1},         {"U16", 2, -1},         {"I8", 1, -1},
    {"U8", 1, -1},         {"F8_E4M3", 1, -1},     {"F8_E5M2", 1, -1},     {"F8_E8M0", 1, -1},
    {"C64", 8, -1},
};

static const char *st_dtype_name(mc_dtype d)
{
    for (size_t i = 0; i < sizeof dtype_table / sizeof dtype_table[0]; i++)
        if (dtype_table[i].dtype == (int)d)
            return dtype_table[i].name;
    return NULL;
}

static int compare_by_name(const void *a, const void *b)
{
    return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

static int compare_by_offset(const void *a, const void *b)
{
    const st_tensor *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

void mc_safetensors_close(mc_safetensors *st)
{
    if (!st)
        return;
    mc_arena_free(&st->arena);
    free(st->tensors);
    free(st->buffer);
    if (st->map)
        munmap(st->map, st->map_size);
    free(st->path);
    free(st);
}

/* Does a member's key equal word exactly (a key may hold NULs)? */
static bool key_is(const mc_json *member, const char *word)
{
    return member->key_len == strlen(word) && memcmp(member->key, word, member->key_len) == 0;
}

static mc_status check_metadata(const mc_safetensors *st, const mc_json *m)
{
    if (m->kind != MC_JSON_OBJECT)
        return mc_fail(MC_ERR_INPUT, "%s: \"__metadata__\" must be an object of strings",
                       st->path);
    for (const mc_json *v = m->first; v; v = v->next)
        if (v->kind != MC_JSON_STRING)
            return mc_fail(MC_ERR_INPUT, "%s: \"__metadata__\" values must be strings", st->path);
    return MC_OK;
}

/* One header entry: fields, dtype, shape, offsets and size. */
static mc_status read_entry(const mc_safetensors *st, const mc_json *e, st_tensor *t)
{
    const char *name = e->key;
    if (strlen(name) != e->key_len)
        return mc_fail(MC_ERR_INPUT, "%s: a tensor name contains a NUL character", st->path);
    t->name = name;
    if (e->kind != MC_JSON_OBJECT)
        return mc_fail(MC_ERR_INPUT, "%s: tensor '%s': entry is not an object", st->path, name);
    for (const mc_json *f = e->first; f; f = f->next)
        if (!key_is(f, "dtype") && !key_is(f, "shape") && !key_is(f, "data_offsets"))
            return mc_fail(MC_ERR_INPUT, "%s: tensor '%s': unknown field \"%s\"", st->path, name,
                           f->key);
    const mc_json *dtype = mc_json_get(e, "dtype"), *shape = mc_json_get(e, "shape"),
                  *offsets = mc_json_get(e, "data_offsets");
    if (!dtype || !shape || !offsets)
        return mc_fail(MC_ERR_INPUT, "%s: tensor '%s': missing \"%s\"", st->path, name,
                       !dtype ? "dtype" : !shape ? "shape" : "data_offsets");

    if (dtype->kind != MC_JSON_STRING)
        return mc_fail(MC_ERR_INPUT, "%s: tensor '%s': \"dtype\" must be a string", st->path,
                       name);
    t->dtype_name = dtype->text;
    t->dtype = -1;
    int elem_size = 0; /* 0: unknown dtype, size not checkable */
    for (size_t i = 0; i < sizeof dtype_table / sizeof dtype_table[0]; i++)
        if (strcmp(dtype->text, dtype_table[i].name) == 0 && strlen(dtype->text) == dtype->len) {
            t->dtype = dtype_table[i].dtype;
            elem_size = dtype_table[i].size;
        }

    if (shape->kind != MC_JSON_ARRAY)
        return mc_fail(MC_ERR_INPUT, "%s: tensor '%s': \"shape\" must be an array", st->path,
                       name);
    int64_t numel = 1;
    t->rank = 0;
    for (const mc_json *d = shape->first; d; d = d->next) {
        int64_t dim;
        if (!mc_json_int64(d, &dim) || dim < 0)
            return mc_fail(MC_ERR_INPUT,
                           "%s: tensor '%s': dimensions must be non-negative integers", st->path,
                           name);
        if (mc_mul_overflows(numel, dim, &numel))
            return mc_fail(MC_ERR_INPUT, "%s: tensor '%s': element count overflows", st->path,
                           name);
        if (t->rank < MC_MAX_RANK)
            t->shape[t->rank] = dim;
        t->rank++;
    }

    int64_t begin, end;
    if (offsets->kind != MC_JSON_ARRAY || offsets->count != 2 ||
        !mc_json_int64(offsets->first, &begin) || !mc_json_int64(offsets->first->next, &end))
        return mc_fail(MC_ERR_INPUT,
                       "%s: tensor '%s': \"data_offsets\" must be two integers [begin, end]",
                       st->path, name);
    if (begin < 0 || end < begin)
        return mc_fail(MC_ERR_INPUT, "%s: tensor '%s': data_offsets [%lld, %lld] are not ordered",
                       st->path, name, (long long)begin, (long long)end);
    if ((uint64_t)end > st->data_size)
        return mc_fail(MC_ERR_INPUT,
                       "%s: tensor '%s': data_offsets [%lld, %lld] run past the data section "
                       "(%zu bytes)",
                       st->path, name, (long long)begin, (long long)end, st->data_size);
    t->begin = begin;
    t->end = end;
    int64_t bytes;
    if (elem_size) {
        if (mc_mul_overflows(numel, elem_size, &bytes))
            return mc_fail(MC_ERR_INPUT, "%s: tensor '%s': byte size overflows", st->path, name);
        if (bytes != end - begin)
            return mc_fail(MC_ERR_INPUT,
                           "%s: tensor '%s': data_offsets span %lld bytes but %s of this shape "
                           "needs %lld",
                           st->path, name, (long long)(end - begin), dtype->text,
                           (long long)bytes);
    }
    return MC_OK;
}

/* Validate the file in st->buffer + pad (size bytes) and fill st. */
static mc_status validate(mc_safetensors *st, const unsigned char *file, size_t size)
{
    if (size < 8)
        return mc_fail(MC_ERR_INPUT,
                       "%s: too short for a safetensors file (%zu bytes, the header length "
                       "alone is 8)",
                       st->path, size);
    if (!memcmp(file, "\x93NUMPY", 6)) /* the usual mix-up: --weights x.npy */
        return mc_fail(MC_ERR_INPUT, "%s: a .npy file, not a .safetensors file (a .npy file gives one "
                       "input or param: --input NAME=%s)", st->path, st->path);
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--)
        header_len = header_len << 8 | file[i];
    if (header_len > size - 8)
        return mc_fail(MC_ERR_INPUT,
                       "%s: header length %llu runs past the end of the file (%zu bytes)",
                       st->path, (unsigned long long)header_len, size);
    if (header_len > MAX_HEADER)
        return mc_fail(MC_ERR_INPUT, "%s: header length %llu is over the %d MiB limit", st->path,
                       (unsigned long long)header_len, MAX_HEADER >> 20);
    if (header_len < 2)
        return mc_fail(MC_ERR_INPUT, "%s: header length %llu is too small for a JSON object",
                       st->path, (unsigned long long)header_len);
    st->data = file + 8 + header_len;
    st->data_size = size - 8 - (size_t)header_len;

    mc_json *root;
    mc_status s = mc_json_parse((const char *)file + 8, (size_t)header_len, st->path, &st->arena,
                                &root);
    if (s != MC_OK)
        return s;
    if (root->kind != MC_JSON_OBJECT)
        return mc_fail(MC_ERR_INPUT, "%s: the header is not a JSON object", st->path);

    st->tensors = calloc((size_t)root->count + 1, sizeof *st->tensors);
    if (!st->tensors)
        return mc_fail(MC_ERR_SYSTEM, "%s: out of memory", st->path);
    for (const mc_json *e = root->first; e; e = e->next) {
        if (key_is(e, "__metadata__")) {
            s = check_metadata(st, e);
        } else {
            s = read_entry(st, e, &st->tensors[st->n]);
            st->n += s == MC_OK;
        }
        if (s != MC_OK)
            return s;
    }

    /* Overlap: sorted by offset, each non-empty tensor starts at or after the previous end. */
    qsort(st->tensors, (size_t)st->n, sizeof *st->tensors, compare_by_offset);
    const st_tensor *last = NULL;
    for (int i = 0; i < st->n; i++) {
        const st_tensor *t = &st->tensors[i];
        if (t->begin == t->end)
            continue;
        if (last && t->begin < last->end)
            return mc_fail(MC_ERR_INPUT,
                           "%s: tensors '%s' [%lld, %lld) and '%s' [%lld, %lld) overlap",
                           st->path, last->name, (long long)last->begin, (long long)last->end,
                           t->name, (long long)t->begin, (long long)t->end);
        last = t;
    }
    qsort(st->tensors, (size_t)st->n, sizeof *st->tensors, compare_by_name);
    return MC_OK;
}

/* Take ownership of `buffer` (holding the file at buffer + pad, size bytes), or of the mapping
 * `map` (the file, size bytes), and validate. */
static mc_status finish_open(const char *name, unsigned char *buffer, size_t pad, void *map,
                             size_t size, mc_safetensors **out)
{
    *out = NULL;
    mc_safetensors *st = calloc(1, sizeof *st);
    char *path = st ? malloc(strlen(name) + 1) : NULL;
    if (!path) {
        free(st);
        free(buffer);
        if (map)
            munmap(map, size);
        return mc_fail(MC_ERR_SYSTEM, "%s: out of memory", name);
    }
    strcpy(path, name);
    st->path = path;
    st->buffer = buffer;
    st->map = map;
    st->map_size = size;
    mc_status s = validate(st, map ? (const unsigned char *)map : buffer + pad, size);
    if (s != MC_OK) {
        mc_safetensors_close(st);
        return s;
    }
    *out = st;
    return MC_OK;
}

/* Where the file must start in a buffer at `base` so that its data section is aligned. */
static size_t alignment_pad(const unsigned char *base, const unsigned char *file, size_t size)
{
    uint64_t header_len = 0;
    if (size >= 8)
        for (int i = 7; i >= 0; i--)
            header_len = header_len << 8 | file[i];
    if (size < 8 || header_len > size - 8)
        return 0;
    uintptr_t data = (uintptr_t)base + 8 + (uintptr_t)header_len;
    return (DATA_ALIGN - data % DATA_ALIGN) % DATA_ALIGN;
}

mc_status mc_safetensors_parse_memory(const void *data, size_t size, const char *name,
                                      mc_safetensors **out)
{
    *out = NULL;
    if (size > SIZE_MAX - DATA_ALIGN)
        return mc_fail(MC_ERR_SYSTEM, "%s: too large", name);
    unsigned char *buffer = malloc(size + DATA_ALIGN);
    if (!buffer)
        return mc_fail(MC_ERR_SYSTEM, "%s: out of memory (%zu bytes)", name, size);
    size_t pad = alignment_pad(buffer, data, size);
    if (size)
        memcpy(buffer + pad, data, size);
    return finish_open(name, buffer, pad, NULL, size, out);
}

/* Read the file on fd (size bytes) into a buffer whose data section starts 64-byte aligned. */
static mc_status read_aligned(const char *path, int fd, size_t size, mc_safetensors **out)
{
    if (size > SIZE_MAX - DATA_ALIGN)
        return mc_fail(MC_ERR_SYSTEM, "%s: too large", path);
    unsigned char *buffer = malloc(size + DATA_ALIGN);
    if (!buffer)
        return mc_fail(MC_ERR_SYSTEM, "%s: out of memory (%zu bytes)", path, size);
    size_t got = 0;
    while (got < size) {
        ssize_t r = pread(fd, buffer + got, size - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            free(buffer);
            return mc_fail(MC_ERR_SYSTEM, "%s: read failed (the file changed while being read?)",
                           path);
        }
        got += (size_t)r;
    }
    size_t pad = alignment_pad(buffer, buffer, size);
    memmove(buffer + pad, buffer, size);
    return finish_open(path, buffer, pad, NULL, size, out);
}

mc_status mc_safetensors_open(const char *path, mc_safetensors **out)
{
    *out = NULL;
    int fd;
    struct stat info;
    mc_status s = mc_file_open_regular(path, &fd, &info);
    if (s != MC_OK)
        return s;
    if ((uint64_t)info.st_size > SIZE_MAX) {
        close(fd);
        return mc_fail(MC_ERR_SYSTEM, "%s: too large", path);
    }
    size_t size = (size_t)info.st_size;
    unsigned char head[8];
    uint64_t header_len = 0;
    bool aligned = size >= 8 && pread(fd, head, 8, 0) == 8;
    for (int i = 7; aligned && i >= 0; i--)
        header_len = header_len << 8 | head[i];
    aligned = aligned && header_len % 8 == 0;
    void *map = aligned ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    if (map == MAP_FAILED) {
        s = read_aligned(path, fd, size, out);
        close(fd);
        return s;
    }
    close(fd); /* the mapping holds the file */
    return finish_open(path, NULL, 0, map, size, out);
}

int mc_safetensors_count(const mc_safetensors *st) { return st->n; }

const char *mc_safetensors_name(const mc_safetensors *st, int index)
{
    return index >= 0 && index < st->n ? st->tensors[index].name : NULL;
}

static const st_tensor *find(const mc_safetensors *st, const char *name)
{
    st_tensor key = {.name = name};
    return bsearch(&key, st->tensors, (size_t)st->n, sizeof *st->tensors, compare_by_name);
}

bool mc_safetensors_describe(const mc_safetensors *st, const char *name, char *buf, size_t size)
{
    const st_tensor *t = find(st, name);
    if (!t || size == 0)
        return false;
    size_t used = (size_t)snprintf(buf, size, "%s[", t->dtype_name);
    for (int d = 0; d < t->rank && d < MC_MAX_RANK && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? ", " : "",
                                 (long long)t->shape[d]);
    if (used < size)
        snprintf(buf + used, size - used, "%s]", t->rank > MC_MAX_RANK ? ", .." : "");
    return true;
}

mc_status mc_safetensors_get(const mc_safetensors *st, const char *name, mc_array *out)
{
    memset(out, 0, sizeof *out);
    const st_tensor *t = find(st, name);
    if (!t)
        return mc_fail(MC_ERR_INPUT, "%s: no tensor named '%s'", st->path, name);
    if (t->dtype < 0)
        return mc_fail(MC_ERR_INPUT,
                       "%s: tensor '%s' has dtype %s, which minic does not support (F32, F16, "
                       "BF16, I32, BOOL)",
                       st->path, name, t->dtype_name);
    if (t->rank > MC_MAX_RANK)
        return mc_fail(MC_ERR_INPUT, "%s: tensor '%s' has %d dimensions; minic allows at most %d",
                       st->path, name, t->rank, MC_MAX_RANK);
    out->dtype = (mc_dtype)t->dtype;
    out->rank = t->rank;
    memcpy(out->shape, t->shape, sizeof t->shape);
    out->data = (void *)(st->data + t->begin);
    out->bytes = (size_t)(t->end - t->begin);
    return MC_OK;
}

/* ---- writing ------------------------------------------------------------------------------ */

typedef struct text {
    char *s;
    size_t len, cap;
    bool failed; /* out of memory */
} text;

static void put(text *t, const char *s, size_t n)
{
    if (t->failed)
        return;
    if (t->cap - t->len <= n) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap - t->len <= n && cap < SIZE_MAX / 2)
            cap *= 2;
        char *p = cap - t->len > n ? realloc(t->s, cap) : NULL;
        if (!p) {
            t->failed = true;
            return;
        }
        t->s = p;
        t->cap = cap;
    }
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->s[t->len] = '\0';
}

static void put_str(text *t, const char *s) { put(t, s, strlen(s)); }

static void put_json_string(text *t, const char *s)
{
    put(t, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\', esc[1] = (char)c;
            put(t, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            put(t, esc, 6);
        } else {
            put(t, s, 1);
        }
    }
    put(t, "\"", 1);
}

/* A file ready to be written: the tensors in data order and the padded header. */
typedef struct st_writer {
    const char *path;
    const mc_array *arrays;
    int *order; /* data order, malloc'd */
    int n;
    text header;
} st_writer;

static void writer_free(st_writer *w)
{
    free(w->order);
    free(w->header.s);
}

static mc_status write_safetensors(FILE *f, void *ctx)
{
    st_writer *w = ctx;
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)((uint64_t)w->header.len >> (8 * i));
    bool ok = fwrite(len, 1, 8, f) == 8 &&
              fwrite(w->header.s, 1, w->header.len, f) == w->header.len;
    for (int i = 0; i < w->n && ok; i++) {
        const mc_array *a = &w->arrays[w->order[i]];
        ok = !a->bytes || fwrite(a->data, 1, a->bytes, f) == a->bytes;
    }
    if (!ok)
        return mc_fail(MC_ERR_SYSTEM, "%s: write failed: %s", w->path, strerror(errno));
    return MC_OK;
}

/* The names compare_indices_by_name sorts by (qsort has no context argument). */
static _Thread_local const char *const *thread_names;

static int compare_indices_by_name(const void *a, const void *b)
{
    return strcmp(thread_names[*(const int *)a], thread_names[*(const int *)b]);
}

/* Check names and arrays, choose the data order and build the header; nothing is written. */
static mc_status prepare(st_writer *w, const char *path, const char *const *names,
                         const mc_array *arrays, int n)
{
    memset(w, 0, sizeof *w);
    w->path = path;
    w->arrays = arrays;
    w->n = n;
    if (n < 0 || (n > 0 && (!names || !arrays)))
        return mc_fail(MC_ERR_INPUT, "%s: invalid tensor list", path);
    for (int i = 0; i < n; i++) {
        if (!names[i] || strcmp(names[i], "__metadata__") == 0 ||
            !mc_json_valid_utf8(names[i], strlen(names[i])))
            return mc_fail(MC_ERR_INPUT, "%s: invalid tensor name '%s'", path,
                           names[i] ? names[i] : "(null)");
        char what[300];
        snprintf(what, sizeof what, "tensor '%s'", names[i]);
        mc_status s = mc_array_check(path, what, &arrays[i]);
        if (s != MC_OK)
            return s;
    }
    int *by_name = malloc(((size_t)n + 1) * sizeof *by_name);
    w->order = malloc(((size_t)n + 1) * sizeof *w->order);
    if (!by_name || !w->order) {
        free(by_name);
        return mc_fail(MC_ERR_SYSTEM, "%s: out of memory", path);
    }
    for (int i = 0; i < n; i++)
        by_name[i] = i;
    thread_names = names;
    qsort(by_name, (size_t)n, sizeof *by_name, compare_indices_by_name);
    for (int i = 1; i < n; i++)
        if (strcmp(names[by_name[i - 1]], names[by_name[i]]) == 0) {
            mc_status s = mc_fail(MC_ERR_INPUT, "%s: tensor name '%s' given twice", path,
                                  names[by_name[i]]);
            free(by_name);
            return s;
        }
    /* Data order: larger elements first (then by name), so every tensor stays aligned to its
     * element size with no gaps between tensors. A stable pass over the name order. */
    int k = 0;
    for (size_t size = 8; size >= 1; size /= 2)
        for (int i = 0; i < n; i++)
            if (mc_dtype_size(arrays[by_name[i]].dtype) == size)
                w->order[k++] = by_name[i];
    MC_ASSERT(k == n);
    free(by_name);

    text *h = &w->header;
    put_str(h, "{");
    int64_t offset = 0;
    for (int i = 0; i < n; i++) {
        const mc_array *a = &arrays[w->order[i]];
        char buf[64];
        if (i)
            put_str(h, ",");
        put_json_string(h, names[w->order[i]]);
        put_str(h, ":{\"dtype\":\"");
        put_str(h, st_dtype_name(a->dtype));
        put_str(h, "\",\"shape\":[");
        for (int d = 0; d < a->rank; d++) {
            snprintf(buf, sizeof buf, d ? ",%lld" : "%lld", (long long)a->shape[d]);
            put_str(h, buf);
        }
        int64_t end;
        if (a->bytes > INT64_MAX || mc_add_overflows(offset, (int64_t)a->bytes, &end))
            return mc_fail(MC_ERR_INPUT, "%s: total size overflows", path);
        snprintf(buf, sizeof buf, "],\"data_offsets\":[%lld,%lld]}", (long long)offset,
                 (long long)end);
        put_str(h, buf);
        offset = end;
    }
    put_str(h, "}");
    /* pad with spaces so the data section starts 8-aligned (a failed put adds nothing) */
    while (!h->failed && (8 + h->len) % 8)
        put_str(h, " ");
    if (h->failed)
        return mc_fail(MC_ERR_SYSTEM, "%s: out of memory", path);
    return MC_OK;
}

mc_status mc_safetensors_write(const char *path, const char *const *names, const mc_array *arrays,
                               int n)
{
    st_writer w;
    mc_status s = prepare(&w, path, names, arrays, n);
    if (s == MC_OK)
        s = mc_file_write_atomic(path, write_safetensors, &w);
    writer_free(&w);
    return s;
}

mc_status mc_safetensors_write_stream(FILE *f, const char *name, const char *const *names,
                                      const mc_array *arrays, int n)
{
    st_writer w;
    mc_status s = prepare(&w, name, names, arrays, n);
    if (s == MC_OK)
        s = write_safetensors(f, &w);
    writer_free(&w);
    return s;
}
