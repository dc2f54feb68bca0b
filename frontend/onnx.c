/* ONNX import (docs/FORMAT.md §7): a ModelProto read with protobuf-c, turned into a minic graph
 * through the C API's builder.
 *
 * The file is untrusted. Before protobuf-c unpacks it, wire_check walks its wire format with
 * the schema's descriptors and refuses nesting deeper than MAX_DEPTH (protobuf-c's own unpacker
 * recurses without a limit); protobuf-c checks every length against the buffer. After that,
 * every count, dimension, dtype and data length is checked here before use: a tensor's data
 * must be exactly its shape's size, a shape at most MC_MAX_RANK dimensions whose product fits,
 * external data files must lie inside the model's folder.
 *
 * The model's values are of three kinds while the graph is built:
 *   - constants (initializers, Constant nodes, and everything computed from constants and
 *     static shapes: Shape -> Gather -> Concat -> Reshape chains), kept on the host as int64 or
 *     double and evaluated on the host (onnx_fold_* here, the shape operators' folds in
 *     onnx_ops.c);
 *   - runtime values: minic graph values;
 *   - poisoned: the output of a node that could not be imported.
 * A constant becomes a graph value only when a runtime operator uses it: a one-element
 * constant as a number operand, anything else as a param whose value the model carries
 * (initializers are always params). Every node that cannot be imported is reported, one line
 * each, before the import fails; nothing runs.
 *
 * This file is the reader and the node loop; the mapping of each operator lives in onnx_ops.c
 * (elementwise, shape and tensor operators) and onnx_nn.c (network operators), which reach the
 * importer's state through frontend/onnx_internal.h.
 */
#include "frontend/onnx_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef MINIC_HAVE_ONNX

#define MAX_DEPTH 32          /* nesting of protobuf messages (graphs in attributes, ...) */

/* ---- wire-format depth check ----------------------------------------------------------------- */

static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*p >= end)
            return false;
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

/* Walk one message's fields; recurse into sub-messages up to MAX_DEPTH. */
static bool wire_check(const ProtobufCMessageDescriptor *d, const uint8_t *p, const uint8_t *end,
                       int depth, const char **why)
{
    if (depth > MAX_DEPTH) {
        *why = "messages nested too deeply";
        return false;
    }
    while (p < end) {
        uint64_t key;
        if (!read_varint(&p, end, &key)) {
            *why = "a truncated field key";
            return false;
        }
        uint64_t wt = key & 7, num = key >> 3, len;
        switch (wt) {
        case 0:
            if (!read_varint(&p, end, &len)) {
                *why = "a truncated varint";
                return false;
            }
            break;
        case 1:
            if (end - p < 8) {
                *why = "a truncated fixed64";
                return false;
            }
            p += 8;
            break;
        case 5:
            if (end - p < 4) {
                *why = "a truncated fixed32";
                return false;
            }
            p += 4;
            break;
        case 2: {
            if (!read_varint(&p, end, &len) || len > (uint64_t)(end - p)) {
                *why = "a length that runs past the end of its message";
                return false;
            }
            const ProtobufCFieldDescriptor *f =
                d && num <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(d, (unsigned)num) : NULL;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE &&
                !wire_check(f->descriptor, p, p + len, depth + 1, why))
                return false;
            p += len;
            break;
        }
        default:
            *why = "an unsupported wire type (groups)";
            return false;
        }
    }
    return true;
}

const char *onnx_elem_name(int e)
{
    static const char *const names[] = {"UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16",
                                        "INT32", "INT64", "STRING", "BOOL", "FLOAT16", "DOUBLE",
                                        "UINT32", "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
    return e >= 0 && e <= 16 ? names[e] : "an unknown data type";
}

bool onnx_elem_is_int(int e)
{
    return e == T_UINT8 || e == T_INT8 || e == T_UINT16 || e == T_INT16 || e == T_INT32 ||
           e == T_INT64 || e == T_BOOL || e == T_UINT32 || e == T_UINT64;
}

bool onnx_elem_is_float(int e)
{
    return e == T_FLOAT || e == T_FLOAT16 || e == T_DOUBLE || e == T_BFLOAT16;
}

static size_t elem_size(int e)
{
    switch (e) {
    case T_UINT8: case T_INT8: case T_BOOL: return 1;
    case T_UINT16: case T_INT16: case T_FLOAT16: case T_BFLOAT16: return 2;
    case T_FLOAT: case T_INT32: case T_UINT32: return 4;
    case T_INT64: case T_DOUBLE: case T_UINT64: return 8;
    }
    return 0;
}

double onnx_hf(const htensor *t, int64_t k)
{
    if (t->i)
        return (double)t->i[k];
    if (t->f32)
        return t->f32[k];
    return t->f[k];
}

int64_t onnx_hi(const htensor *t, int64_t k)
{
    if (t->i)
        return t->i[k];
    double x = t->f32 ? t->f32[k] : t->f[k];
    if (!(x > -9.2e18 && x < 9.2e18))
        return x > 0 ? INT64_MAX : (x < 0 ? INT64_MIN : 0);
    return (int64_t)x;
}

void *onnx_c_alloc(ctx *c, size_t bytes)
{
    if (c->nallocs == c->capallocs) {
        int cap = c->capallocs ? 2 * c->capallocs : 64;
        void **a = realloc(c->allocs, (size_t)cap * sizeof *a);
        if (!a)
            return NULL;
        c->allocs = a;
        c->capallocs = cap;
    }
    void *p = calloc(1, bytes ? bytes : 1);
    if (p)
        c->allocs[c->nallocs++] = p;
    return p;
}

static bool c_adopt(ctx *c, void *p)
{
    if (c->nallocs == c->capallocs) {
        int cap = c->capallocs ? 2 * c->capallocs : 64;
        void **a = realloc(c->allocs, (size_t)cap * sizeof *a);
        if (!a)
            return false;
        c->allocs = a;
        c->capallocs = cap;
    }
    c->allocs[c->nallocs++] = p;
    return true;
}

/* Take p out of the list freed at the end: its new owner frees it. */
static void c_release(ctx *c, void *p)
{
    for (int k = c->nallocs - 1; k >= 0; k--)
        if (c->allocs[k] == p) {
            c->allocs[k] = NULL;
            return;
        }
}

bool onnx_why(ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof c->why, fmt, ap);
    va_end(ap);
    return false;
}

/* A name from the file, printable: control characters and quotes escaped, cut to a length. */
static const char *shown(const char *s, char *buf, size_t size)
{
    size_t o = 0;
    if (!s)
        s = "";
    for (; *s && o + 5 < size; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch < 0x20 || ch == 0x7f || ch == '\'' || ch == '\\')
            o += (size_t)snprintf(buf + o, size - o, "\\x%02x", ch);
        else
            buf[o++] = (char)ch;
    }
    if (*s && o + 4 < size)
        o += (size_t)snprintf(buf + o, size - o, "...");
    buf[o < size ? o : size - 1] = 0;
    return buf;
}

slot *onnx_new_slot(ctx *c, const char *name)
{
    if (c->nslots == c->cap) {
        int cap = c->cap ? 2 * c->cap : 256;
        slot *s = realloc(c->slots, (size_t)cap * sizeof *s);
        if (!s)
            return NULL;
        c->slots = s;
        c->cap = cap;
    }
    slot *s = &c->slots[c->nslots];
    memset(s, 0, sizeof *s);
    s->name = name;
    s->v = MC_NONE;
    if (!mc_name_map_put(&c->map, name, c->nslots))
        return NULL;
    c->nslots++;
    return s;
}

slot *onnx_find_slot(ctx *c, const char *name)
{
    if (!name || !*name)
        return NULL;
    int32_t k = mc_name_map_get(&c->map, name);
    return k >= 0 ? &c->slots[k] : NULL;
}

static htensor *new_tensor(ctx *c, int elem, int rank, const int64_t *dims)
{
    if (rank < 0 || rank > MC_MAX_RANK) {
        onnx_why(c, "a tensor of rank %d (minic supports at most %d)", rank, MC_MAX_RANK);
        return NULL;
    }
    htensor *t = onnx_c_alloc(c, sizeof *t);
    if (!t) {
        onnx_why(c, "out of memory");
        return NULL;
    }
    t->elem = elem;
    t->rank = rank;
    t->n = 1;
    for (int d = 0; d < rank; d++) {
        if (dims[d] < 0 || mc_mul_overflows(t->n, dims[d], &t->n)) {
            onnx_why(c, "a tensor with an invalid dimension %lld", (long long)dims[d]);
            return NULL;
        }
        t->dims[d] = dims[d];
    }
    if (t->n > ((int64_t)1 << 40)) {
        onnx_why(c, "a tensor of %lld elements is too large", (long long)t->n);
        return NULL;
    }
    return t;
}

/* A tensor whose values the host computes: i or f allocated. */
htensor *onnx_new_fold(ctx *c, int elem, int rank, const int64_t *dims)
{
    htensor *t = new_tensor(c, elem, rank, dims);
    if (!t)
        return NULL;
    if (t->n > MAX_FOLD_ELEMS) {
        onnx_why(c, "a constant of %lld elements is too large to compute at import time", (long long)t->n);
        return NULL;
    }
    c->folded += t->n;
    if (c->folded > MAX_FOLD_TOTAL) {
        onnx_why(c, "the constants computed at import time exceed %d elements", MAX_FOLD_TOTAL);
        return NULL;
    }
    if (onnx_elem_is_int(elem))
        t->i = onnx_c_alloc(c, (size_t)t->n * sizeof *t->i);
    else
        t->f = onnx_c_alloc(c, (size_t)t->n * sizeof *t->f);
    if (!t->i && !t->f) {
        onnx_why(c, "out of memory");
        return NULL;
    }
    return t;
}

/* ---- TensorProto -> htensor ---------------------------------------------------------------- */

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) { return (uint32_t)rd16(p) | (uint32_t)rd16(p + 2) << 16; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* Fill t from n little-endian elements of its type at p. */
static void from_raw(htensor *t, const uint8_t *p)
{
    for (int64_t k = 0; k < t->n; k++) {
        switch (t->elem) {
        case T_UINT8: t->i[k] = p[k]; break;
        case T_INT8: t->i[k] = (int8_t)p[k]; break;
        case T_BOOL: t->i[k] = p[k] != 0; break;
        case T_UINT16: t->i[k] = rd16(p + 2 * k); break;
        case T_INT16: t->i[k] = (int16_t)rd16(p + 2 * k); break;
        case T_INT32: t->i[k] = (int32_t)rd32(p + 4 * k); break;
        case T_UINT32: t->i[k] = rd32(p + 4 * k); break;
        case T_INT64: t->i[k] = (int64_t)rd64(p + 8 * k); break;
        case T_UINT64: {
            uint64_t u = rd64(p + 8 * k);
            t->i[k] = u > INT64_MAX ? INT64_MAX : (int64_t)u;
            break;
        }
        case T_FLOAT16: t->f[k] = mc_f16_to_double(rd16(p + 2 * k)); break;
        case T_BFLOAT16: t->f[k] = mc_bf16_to_double(rd16(p + 2 * k)); break;
        case T_FLOAT: {
            uint32_t u = rd32(p + 4 * k);
            memcpy(&t->f32[k], &u, 4);
            break;
        }
        case T_DOUBLE: {
            uint64_t u = rd64(p + 8 * k);
            memcpy(&t->f[k], &u, 8);
            break;
        }
        }
    }
}

static bool alloc_values(ctx *c, htensor *t)
{
    if (onnx_elem_is_int(t->elem))
        t->i = onnx_c_alloc(c, (size_t)t->n * sizeof *t->i);
    else if (t->elem == T_FLOAT)
        t->f32 = onnx_c_alloc(c, (size_t)t->n * sizeof *t->f32);
    else
        t->f = onnx_c_alloc(c, (size_t)t->n * sizeof *t->f);
    return t->i || t->f32 || t->f ? true : onnx_why(c, "out of memory");
}

/* Does rel stay inside its folder? No absolute path, no '..' component, no empty name. */
static bool relative_inside(const char *rel)
{
    if (!*rel || rel[0] == '/' || strlen(rel) > 1024)
        return false;
    const char *p = rel;
    while (*p) {
        const char *e = strchr(p, '/');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == 2 && p[0] == '.' && p[1] == '.')
            return false;
        p += len;
        if (*p == '/')
            p++;
    }
    return true;
}

static bool read_external(ctx *c, const Onnx__TensorProto *tp, htensor *t, size_t esize)
{
    const char *loc = NULL;
    int64_t offset = 0, length = -1;
    for (size_t k = 0; k < tp->n_external_data; k++) {
        const Onnx__StringStringEntryProto *e = tp->external_data[k];
        if (!e || !e->key || !e->value)
            continue;
        char *endp;
        if (!strcmp(e->key, "location"))
            loc = e->value;
        else if (!strcmp(e->key, "offset") || !strcmp(e->key, "length")) {
            errno = 0;
            long long v = strtoll(e->value, &endp, 10);
            if (errno || *endp || v < 0 || endp == e->value)
                return onnx_why(c, "external data: invalid %s '%s'", e->key, e->value);
            if (!strcmp(e->key, "offset"))
                offset = v;
            else
                length = v;
        }
    }
    char buf[200];
    if (!loc)
        return onnx_why(c, "external data without a location");
    if (!c->dir)
        return onnx_why(c, "external data ('%s') in a model read from memory", shown(loc, buf, sizeof buf));
    if (!relative_inside(loc))
        return onnx_why(c, "external data path '%s' leaves the model's folder", shown(loc, buf, sizeof buf));
    size_t need = (size_t)t->n * esize;
    if (length >= 0 && (uint64_t)length != need)
        return onnx_why(c, "external data length %lld, but the shape needs %zu bytes", (long long)length, need);
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", c->dir, loc) >= (int)sizeof path)
        return onnx_why(c, "external data path too long");
    /* symlinks could still leave the folder: the resolved path must lie under the resolved dir */
    char *rdir = realpath(c->dir, NULL), *rpath = realpath(path, NULL);
    bool inside = rdir && rpath && strncmp(rpath, rdir, strlen(rdir)) == 0 &&
                  rpath[strlen(rdir)] == '/';
    free(rdir);
    if (!inside) {
        free(rpath);
        return onnx_why(c, "external data file '%s' %s", shown(loc, buf, sizeof buf),
                        rpath ? "resolves outside the model's folder" : "cannot be opened");
    }
    int fd;
    struct stat st;
    mc_status s = mc_file_open_regular(rpath, &fd, &st);
    free(rpath);
    if (s != MC_OK)
        return onnx_why(c, "external data: %s", mc_error_message());
    bool ok = false;
    uint8_t *raw = NULL;
    if ((uint64_t)offset > (uint64_t)st.st_size || need > (uint64_t)st.st_size - (uint64_t)offset)
        onnx_why(c, "external data '%s': offset %lld + %zu bytes runs past its end (%lld bytes)",
                 shown(loc, buf, sizeof buf), (long long)offset, need, (long long)st.st_size);
    else if (!(raw = malloc(need ? need : 1)))
        onnx_why(c, "out of memory");
    else {
        size_t got = 0;
        while (got < need) {
            ssize_t r = pread(fd, raw + got, need - got, (off_t)((uint64_t)offset + got));
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        if (got != need)
            onnx_why(c, "external data '%s': read failed", shown(loc, buf, sizeof buf));
        else if (alloc_values(c, t)) {
            from_raw(t, raw);
            ok = true;
        }
    }
    free(raw);
    close(fd);
    return ok;
}

/* A TensorProto's value. tp may lie: every count is checked against the shape. When steal is
 * set, FLOAT raw data is taken from the message (which then no longer holds it). */
htensor *onnx_load_tensor(ctx *c, Onnx__TensorProto *tp, bool steal)
{
    if (!tp) {
        onnx_why(c, "a missing tensor");
        return NULL;
    }
    if (tp->n_dims > MC_MAX_RANK) {
        onnx_why(c, "a tensor of rank %zu (minic supports at most %d)", tp->n_dims, MC_MAX_RANK);
        return NULL;
    }
    int elem = tp->has_data_type ? tp->data_type : 0;
    size_t esize = elem_size(elem);
    if (!esize) {
        onnx_why(c, "a tensor of data type %s (unsupported)", onnx_elem_name(elem));
        return NULL;
    }
    htensor *t = new_tensor(c, elem, (int)tp->n_dims, tp->dims);
    if (!t)
        return NULL;
    if (tp->segment) {
        onnx_why(c, "a segmented tensor (unsupported)");
        return NULL;
    }
    if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return read_external(c, tp, t, esize) ? t : NULL;
    if (tp->has_raw_data) {
        if ((uint64_t)tp->raw_data.len != (uint64_t)t->n * esize) {
            onnx_why(c, "raw data of %zu bytes, but the shape needs %llu", tp->raw_data.len,
                     (unsigned long long)((uint64_t)t->n * esize));
            return NULL;
        }
        if (steal && elem == T_FLOAT && t->n > 0 && ((uintptr_t)tp->raw_data.data & 3) == 0) {
            /* little-endian host: the bytes are the floats */
            t->f32 = (float *)tp->raw_data.data;
            if (!c_adopt(c, t->f32)) {
                onnx_why(c, "out of memory");
                return NULL;
            }
            tp->raw_data.data = NULL;
            tp->raw_data.len = 0;
            tp->has_raw_data = 0;
            return t;
        }
        if (!alloc_values(c, t))
            return NULL;
        from_raw(t, tp->raw_data.data);
        return t;
    }
    size_t have;
    switch (elem) {
    case T_FLOAT: have = tp->n_float_data; break;
    case T_INT64: have = tp->n_int64_data; break;
    case T_DOUBLE: have = tp->n_double_data; break;
    case T_UINT32: case T_UINT64: have = tp->n_uint64_data; break;
    default: have = tp->n_int32_data; break;
    }
    if ((uint64_t)have != (uint64_t)t->n) {
        onnx_why(c, "%zu stored values, but the shape has %lld elements", have, (long long)t->n);
        return NULL;
    }
    if (!alloc_values(c, t))
        return NULL;
    for (int64_t k = 0; k < t->n; k++) {
        switch (elem) {
        case T_FLOAT: t->f32[k] = tp->float_data[k]; break;
        case T_INT64: t->i[k] = tp->int64_data[k]; break;
        case T_DOUBLE: t->f[k] = tp->double_data[k]; break;
        case T_UINT32: case T_UINT64:
            t->i[k] = tp->uint64_data[k] > INT64_MAX ? INT64_MAX : (int64_t)tp->uint64_data[k];
            break;
        case T_FLOAT16: t->f[k] = mc_f16_to_double((uint16_t)tp->int32_data[k]); break;
        case T_BFLOAT16: t->f[k] = mc_bf16_to_double((uint16_t)tp->int32_data[k]); break;
        case T_BOOL: t->i[k] = tp->int32_data[k] != 0; break;
        default: t->i[k] = tp->int32_data[k]; break;
        }
    }
    return t;
}

/* ---- dtypes and names ----------------------------------------------------------------------- */

bool onnx_map_dtype(ctx *c, int elem, mc_dtype *out)
{
    switch (elem) {
    case T_FLOAT: *out = MC_F32; return true;
    case T_FLOAT16: *out = MC_F16; return true;
    case T_BFLOAT16: *out = MC_BF16; return true;
    case T_BOOL: *out = MC_BOOL; return true;
    case T_INT32: case T_INT64: case T_INT8: case T_UINT8: case T_INT16: case T_UINT16:
    case T_UINT32: case T_UINT64:
        *out = MC_I32;
        return true;
    case T_DOUBLE:
        if (c->flags & MC_ONNX_F64_AS_F32) {
            *out = MC_F32;
            return true;
        }
        return onnx_why(c, "unsupported dtype DOUBLE (--f64-as-f32 reads it as f32)");
    }
    return onnx_why(c, "unsupported dtype %s", onnx_elem_name(elem));
}

static int elem_of(mc_dtype d)
{
    switch (d) {
    case MC_F32: return T_FLOAT;
    case MC_F16: return T_FLOAT16;
    case MC_BF16: return T_BFLOAT16;
    case MC_I32: return T_INT32;
    case MC_BOOL: return T_BOOL;
    case MC_NUM_DTYPES: break;
    }
    return 0;
}

/* A valid, unused minic name for an ONNX name: invalid characters to '_', a leading digit or
 * a reserved word prefixed or suffixed, a clash suffixed with _1, _2, ... */
static const char *minic_name(ctx *c, const char *onnx)
{
    char base[160];
    size_t o = 0;
    if (!onnx || !*onnx)
        onnx = "v";
    if (!((onnx[0] >= 'A' && onnx[0] <= 'Z') || (onnx[0] >= 'a' && onnx[0] <= 'z') || onnx[0] == '_'))
        base[o++] = '_';
    for (const char *p = onnx; *p && o < sizeof base - 1; p++) {
        char ch = *p;
        bool ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
                  ch == '_' || ch == '.';
        base[o++] = ok ? ch : '_';
    }
    base[o] = 0;
    char name[192];
    snprintf(name, sizeof name, "%s", base);
    for (int k = 1; k < 1000000; k++) {
        bool temp_like = name[0] == 't' && name[1] && strspn(name + 1, "0123456789") == strlen(name + 1);
        if (mc_name_is_valid(name) && !temp_like && mc_name_map_get(&c->g->names, name) < 0 &&
            mc_dim_find_sym(c->g, name, strlen(name)) < 0) /* a value may not share a dimension's name */
            return mc_arena_strdup(&c->m->arena, name);
        snprintf(name, sizeof name, "%s_%d", base, k);
    }
    return NULL;
}

static bool grow_list(void **list, int *cap, int n, size_t size)
{
    if (n < *cap)
        return true;
    int ncap = *cap ? 2 * *cap : 16;
    void *p = realloc(*list, (size_t)ncap * size);
    if (!p)
        return false;
    *list = p;
    *cap = ncap;
    return true;
}

/* ---- constants as graph values -------------------------------------------------------------- */

static bool fits_i32(ctx *c, const htensor *t, const char *name)
{
    for (int64_t k = 0; k < t->n; k++) {
        int64_t v = onnx_hi(t, k);
        if (v < INT32_MIN || v > INT32_MAX) {
            char buf[160];
            return onnx_why(c, "%s '%s' holds %lld at element %lld, outside i32 (minic narrows INT64 to i32)",
                            onnx_elem_name(t->elem), shown(name, buf, sizeof buf), (long long)v, (long long)k);
        }
    }
    return true;
}

/* Host data of dtype d for t (malloc'ed into *data, or t's own floats moved when stealable). */
static bool tensor_bytes(ctx *c, htensor *t, mc_dtype d, void **data, size_t *bytes)
{
    *bytes = (size_t)t->n * mc_dtype_size(d);
    if (d == MC_F32 && t->f32 && !t->f32_given) {
        /* the param owns the floats from now on; t still reads them (the model outlives the
         * import, and nothing writes them) */
        *data = t->f32;
        c_release(c, t->f32);
        t->f32_given = true;
        return true;
    }
    void *p = malloc(*bytes ? *bytes : 1);
    if (!p)
        return onnx_why(c, "out of memory");
    for (int64_t k = 0; k < t->n; k++) {
        if (d == MC_I32)
            ((int32_t *)p)[k] = (int32_t)onnx_hi(t, k);
        else if (d == MC_BOOL)
            ((uint8_t *)p)[k] = onnx_hf(t, k) != 0;
        else
            mc_store_element(p, d, k, onnx_hf(t, k));
    }
    *data = p;
    return true;
}

/* onnx_map_dtype for a named tensor: the reason names it (docs/FORMAT.md §7: a DOUBLE tensor is
 * an error naming the tensor, not only the node that reads it). */
static bool map_tensor_dtype(ctx *c, const slot *s, mc_dtype *d)
{
    if (onnx_map_dtype(c, s->c->elem, d))
        return true;
    char why[sizeof c->why], buf[160];
    snprintf(why, sizeof why, "%s", c->why);
    return onnx_why(c, "%s '%s': %s", s->initializer ? "initializer" : "tensor", shown(s->name, buf, sizeof buf),
                    why);
}

static mc_value declare_param(ctx *c, slot *s)
{
    htensor *t = s->c;
    mc_dtype d;
    if (!map_tensor_dtype(c, s, &d))
        return MC_ERROR;
    if (t->n == 0) {
        onnx_why(c, "a zero-size tensor (minic has no zero-size dimensions)");
        return MC_ERROR;
    }
    if (d == MC_I32 && !fits_i32(c, t, s->name))
        return MC_ERROR;
    if (!grow_list((void **)&c->m->params, &c->m->cap_params, c->m->nparams, sizeof *c->m->params)) {
        onnx_why(c, "out of memory");
        return MC_ERROR;
    }
    const char *name = minic_name(c, s->name);
    const char *onnx = mc_arena_strdup(&c->m->arena, s->name);
    if (!name || !onnx) {
        onnx_why(c, "out of memory");
        return MC_ERROR;
    }
    mc_value v = mc_param(c->g, name, d, t->dims, t->rank);
    if (v < 0) {
        onnx_why(c, "%s", mc_error_message());
        return MC_ERROR;
    }
    mc_onnx_tensor *w = &c->m->params[c->m->nparams];
    memset(w, 0, sizeof *w);
    w->name = name;
    w->onnx_name = onnx;
    w->dtype = d;
    w->rank = t->rank;
    memcpy(w->shape, t->dims, sizeof w->shape);
    if (!tensor_bytes(c, t, d, &w->data, &w->bytes))
        return MC_ERROR;
    c->m->nparams++;
    return v;
}

static const char *sym_values_str(ctx *c, const htensor *t, char *buf, size_t size);

/* Dimension e (a size or an expression of the symbols) as an i32 scalar the run computes:
 * a constant as it is; an expression as sum(full([e + shift], 1)) - shift, with shift making
 * the least value e takes over every binding at least 1 (a size). MC_ERROR, with no error
 * set, when e cannot be shown to have a least value (`4 - T`). */
mc_value onnx_dim_value(ctx *c, int64_t e)
{
    if (!mc_dim_is_sym(e))
        return mc_scalar(c->g, (double)e, MC_I32);
    int64_t lo;
    if (!mc_dim_lower_bound(c->g, e, &lo))
        return MC_ERROR;
    int64_t shift = lo < 1 ? 1 - lo : 0, size = e;
    if (shift && !mc_dim_add_const(c->g, e, shift, &size))
        return MC_ERROR;
    mc_value ones = mc_full(c->g, &size, 1, 1.0, MC_I32);
    int axis = 0;
    mc_value v = mc_sum(c->g, ones, &axis, 1, false);
    return shift && v >= 0 ? mc_sub(c->g, v, mc_scalar(c->g, (double)shift, MC_I32)) : v;
}

/* A tensor of integers computed from symbolic dimensions at import (a sequence length, `seq *
 * 4`) used as a tensor at run time (HF's GPT-2 multiplies an index tensor by it): each element
 * through onnx_dim_value, joined and shaped as t. MC_ERROR, with no error set, when an element
 * cannot be computed: the caller reports the value as unsupported then. */
static mc_value sym_as_value(ctx *c, const htensor *t)
{
    mc_dtype d;
    if (t->n < 1 || t->n > 64 || !onnx_map_dtype(c, t->elem, &d) || d != MC_I32)
        return MC_ERROR;
    mc_value parts[64];
    for (int64_t k = 0; k < t->n; k++) {
        int64_t e = t->i[k];
        if (!mc_dim_is_sym(e) && (e < INT32_MIN || e > INT32_MAX))
            return MC_ERROR;
        parts[k] = onnx_dim_value(c, e);
        if (parts[k] < 0)
            return MC_ERROR;
        int64_t one = 1;
        parts[k] = mc_reshape(c->g, parts[k], &one, 1);
    }
    mc_value v = t->n == 1 ? parts[0] : mc_concat(c->g, parts, (int)t->n, 0);
    return v < 0 ? MC_ERROR : mc_reshape(c->g, v, t->dims, t->rank);
}

mc_value onnx_as_value(ctx *c, slot *s)
{
    if (!s) {
        onnx_why(c, "a missing operand");
        return MC_ERROR;
    }
    if (s->state == S_POISON)
        return MC_ERROR;
    if (s->v != MC_NONE)
        return s->v;
    htensor *t = s->c;
    if (t->sym) {
        mc_value v = sym_as_value(c, t);
        if (v >= 0)
            return s->v = v;
        char buf[160], vals[300];
        onnx_why(c, "'%s' holds %s, computed from symbolic dimensions at import time; minic uses such values "
                    "only as shapes, sizes and bounds (Reshape, Expand, ConstantOfShape, Range, Slice), not as a "
                    "tensor at run time (give the dim_params' sizes at load: --dim NAME=SIZE)",
                 shown(s->name, buf, sizeof buf), sym_values_str(c, t, vals, sizeof vals));
        return MC_ERROR;
    }
    if (!s->initializer && t->n == 1) {
        mc_dtype d;
        if (!map_tensor_dtype(c, s, &d))
            return MC_ERROR;
        if (d == MC_I32 && !fits_i32(c, t, s->name))
            return MC_ERROR;
        double x = onnx_hf(t, 0);
        if (d == MC_F16 || d == MC_BF16)
            x = mc_round_to_dtype(x, d);
        mc_value v = mc_scalar(c->g, d == MC_I32 ? (double)onnx_hi(t, 0) : x, d);
        if (t->rank > 0)
            v = mc_reshape(c->g, v, t->dims, t->rank);
        if (v < 0) {
            onnx_why(c, "%s", mc_error_message());
            return MC_ERROR;
        }
        return s->v = v;
    }
    mc_value v = declare_param(c, s);
    if (v >= 0)
        s->v = v;
    return v;
}

const attr_t *onnx_attr(const node_t *n, const char *name)
{
    for (size_t k = 0; k < n->n_attribute; k++)
        if (n->attribute[k] && n->attribute[k]->name && !strcmp(n->attribute[k]->name, name))
            return n->attribute[k];
    return NULL;
}

int64_t onnx_attr_i(const node_t *n, const char *name, int64_t def)
{
    const attr_t *a = onnx_attr(n, name);
    return a && a->has_i ? a->i : def;
}

double onnx_attr_f(const node_t *n, const char *name, double def)
{
    const attr_t *a = onnx_attr(n, name);
    return a && a->has_f ? a->f : def;
}

/* ---- node inputs and outputs ---------------------------------------------------------------- */

slot *onnx_in_slot(ctx *c, const node_t *n, size_t k)
{
    return k < n->n_input ? onnx_find_slot(c, n->input[k]) : NULL;
}

bool onnx_has_in(const node_t *n, size_t k)
{
    return k < n->n_input && n->input[k] && n->input[k][0];
}

htensor *onnx_in_const(ctx *c, const node_t *n, size_t k)
{
    htensor *t = onnx_in_sconst(c, n, k);
    return t && !t->sym ? t : NULL;
}

htensor *onnx_in_sconst(ctx *c, const node_t *n, size_t k)
{
    slot *s = onnx_in_slot(c, n, k);
    return s && s->state == S_CONST ? s->c : NULL;
}

bool onnx_any_sym(int rank, const int64_t *dims)
{
    for (int d = 0; d < rank; d++)
        if (mc_dim_is_sym(dims[d]))
            return true;
    return false;
}

const char *onnx_dims_str(ctx *c, int rank, const int64_t *dims, char *buf, size_t size)
{
    size_t o = 0;
    buf[0] = 0;
    o += (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < rank && o < size; d++) {
        char one[96];
        o += (size_t)snprintf(buf + o, size - o, "%s%s", d ? ", " : "", mc_dim_str(c->g, dims[d], one, sizeof one));
    }
    if (o < size)
        snprintf(buf + o, size - o, "]");
    return buf;
}

/* The symbolic values of a host tensor, for messages: "[B, T*12]" (at most 8 shown). */
static const char *sym_values_str(ctx *c, const htensor *t, char *buf, size_t size)
{
    int64_t v[8];
    int n = t->n < 8 ? (int)t->n : 8;
    for (int k = 0; k < n; k++)
        v[k] = t->i[k];
    return onnx_dims_str(c, n, v, buf, size);
}

mc_value onnx_in_value(ctx *c, const node_t *n, size_t k)
{
    slot *s = onnx_in_slot(c, n, k);
    if (!s) {
        onnx_why(c, "input %zu is missing", k);
        return MC_ERROR;
    }
    return onnx_as_value(c, s);
}

/* The static type of a slot: dtype (ONNX), rank, dims. */
void onnx_slot_type(ctx *c, const slot *s, int *elem, int *rank, int64_t *dims)
{
    if (s->state == S_CONST) {
        *elem = s->c->elem;
        *rank = s->c->rank;
        memcpy(dims, s->c->dims, sizeof s->c->dims);
    } else {
        const mc_node *nd = &c->g->nodes[s->v];
        *elem = elem_of(nd->dtype);
        *rank = nd->rank;
        memcpy(dims, nd->shape, sizeof nd->shape);
    }
}

bool onnx_out_present(const node_t *n, size_t k)
{
    return k < n->n_output && n->output[k] && n->output[k][0];
}

bool onnx_set_slot(ctx *c, const node_t *n, size_t k, int state, mc_value v, htensor *t)
{
    if (!onnx_out_present(n, k))
        return true;
    slot *s = onnx_find_slot(c, n->output[k]);
    if (s) {
        char buf[160];
        return onnx_why(c, "output '%s' is already defined (SSA)", shown(n->output[k], buf, sizeof buf));
    }
    s = onnx_new_slot(c, n->output[k]);
    if (!s)
        return onnx_why(c, "out of memory");
    s->state = state;
    s->v = v;
    s->c = t;
    return true;
}

bool onnx_set_out(ctx *c, const node_t *n, size_t k, mc_value v)
{
    if (v < 0)
        return c->why[0] ? false : onnx_why(c, "%s", mc_error_message());
    return onnx_set_slot(c, n, k, S_RUNTIME, v, NULL);
}

bool onnx_set_const(ctx *c, const node_t *n, size_t k, htensor *t)
{
    if (t && t->sym) { /* exactly those that hold one (Gather(Shape(x), 1) may be a plain size) */
        t->sym = false;
        for (int64_t e = 0; e < t->n; e++) {
            if (mc_dim_is_sym(t->i[e]) && !mc_dim_valid(c->g, t->i[e]))
                return onnx_why(c, "internal: %lld among symbolic dimensions", (long long)t->i[e]);
            t->sym |= mc_dim_is_sym(t->i[e]);
        }
    }
    return t ? onnx_set_slot(c, n, k, S_CONST, MC_NONE, t) : false;
}

/* ints from a constant input or an attribute (opsets moved many attributes to inputs) */
bool onnx_ints_of(ctx *c, const node_t *n, size_t input, const char *attr_name, int64_t *out,
                    int *count, int max, bool *given)
{
    *given = false;
    *count = 0;
    if (onnx_has_in(n, input)) {
        htensor *t = onnx_in_sconst(c, n, input);
        if (t && t->sym) {
            char vals[300];
            return onnx_why(c, "input %zu (%s) is %s, which depends on symbolic dimensions; this operator needs "
                               "it fixed at import time (give the dim_params' sizes at load: --dim NAME=SIZE)",
                            input, attr_name, sym_values_str(c, t, vals, sizeof vals));
        }
        if (!t)
            return onnx_why(c, "input %zu (%s) must be a constant known at import time", input, attr_name);
        if (t->n > max)
            return onnx_why(c, "%s has %lld entries (at most %d)", attr_name, (long long)t->n, max);
        for (int64_t k = 0; k < t->n; k++)
            out[k] = onnx_hi(t, k);
        *count = (int)t->n;
        *given = true;
        return true;
    }
    const attr_t *a = onnx_attr(n, attr_name);
    if (a && a->n_ints > 0) {
        if (a->n_ints > (size_t)max)
            return onnx_why(c, "%s has %zu entries (at most %d)", attr_name, a->n_ints, max);
        for (size_t k = 0; k < a->n_ints; k++)
            out[k] = a->ints[k];
        *count = (int)a->n_ints;
        *given = true;
    }
    return true;
}

bool onnx_dims_of(ctx *c, const node_t *n, size_t input, const char *attr_name, int64_t *out,
                  int *count, int max, bool *given)
{
    htensor *t = onnx_has_in(n, input) ? onnx_in_sconst(c, n, input) : NULL;
    if (!t || !t->sym) {
        if (!onnx_ints_of(c, n, input, attr_name, out, count, max, given))
            return false;
        for (int k = 0; k < *count; k++) /* a number that low (INT64_MIN: "from before the start")
                                             must not read as a symbolic dimension */
            if (mc_dim_is_sym(out[k]))
                out[k] = MC_DIM_SYM_BASE + 1;
        return true;
    }
    if (t->n > max)
        return onnx_why(c, "%s has %lld entries (at most %d)", attr_name, (long long)t->n, max);
    for (int64_t k = 0; k < t->n; k++)
        out[k] = t->i[k];
    *count = (int)t->n;
    *given = true;
    return true;
}

bool onnx_norm_axis(ctx *c, int64_t axis, int rank, int *out)
{
    *out = 0;
    if (axis < -rank || axis >= (rank ? rank : 1))
        return onnx_why(c, "axis %lld out of range for rank %d", (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return true;
}

const mc_node *onnx_vnode(ctx *c, mc_value v) { return &c->g->nodes[v]; }

/* ---- host evaluation of constants (shape chains) -------------------------------------------- */

/* NumPy broadcast of two shapes. */
bool onnx_broadcast(ctx *c, int ra, const int64_t *a, int rb, const int64_t *b, int *r, int64_t *out)
{
    *r = ra > rb ? ra : rb;
    for (int d = 0; d < *r; d++) {
        int64_t x = d - (*r - ra) >= 0 ? a[d - (*r - ra)] : 1;
        int64_t y = d - (*r - rb) >= 0 ? b[d - (*r - rb)] : 1;
        char xs[96], ys[96];
        if (x != y && x != 1 && y != 1)
            return onnx_why(c, "shapes do not broadcast (%s vs %s at axis %d%s)", mc_dim_str(c->g, x, xs, sizeof xs),
                            mc_dim_str(c->g, y, ys, sizeof ys), d,
                            mc_dim_is_sym(x) || mc_dim_is_sym(y) ? ": symbolic dimensions must be equal or meet 1" : "");
        out[d] = x == 1 ? y : x;
    }
    return true;
}

/* flat index into t of output index `k` of a broadcast shape */
int64_t onnx_bidx(const htensor *t, int r, const int64_t *shape, int64_t k)
{
    int64_t idx = 0, stride = 1;
    for (int d = r - 1; d >= 0; d--) {
        int64_t coord = k % shape[d];
        k /= shape[d];
        int td = d - (r - t->rank);
        if (td >= 0) {
            if (t->dims[td] != 1)
                idx += coord * stride;
            stride *= t->dims[td];
        }
    }
    return idx;
}

htensor *onnx_fold_binary(ctx *c, binop op, const htensor *a, const htensor *b)
{
    int r;
    int64_t shape[MC_MAX_RANK];
    if (!onnx_broadcast(c, a->rank, a->dims, b->rank, b->dims, &r, shape))
        return NULL;
    bool cmp = op >= B_EQ && op <= B_GE;
    bool logic = op == B_AND || op == B_OR;
    int elem = cmp || logic ? T_BOOL : a->elem;
    htensor *t = onnx_new_fold(c, elem, r, shape);
    if (!t)
        return NULL;
    bool ints = onnx_elem_is_int(a->elem) && onnx_elem_is_int(b->elem);
    for (int64_t k = 0; k < t->n; k++) {
        int64_t ia = onnx_bidx(a, r, shape, k), ib = onnx_bidx(b, r, shape, k);
        if (ints) {
            int64_t x = onnx_hi(a, ia), y = onnx_hi(b, ib), z = 0;
            switch (op) {
            case B_ADD: z = (int64_t)((uint64_t)x + (uint64_t)y); break;
            case B_SUB: z = (int64_t)((uint64_t)x - (uint64_t)y); break;
            case B_MUL: z = (int64_t)((uint64_t)x * (uint64_t)y); break;
            case B_DIV:
                if (y == 0 || (x == INT64_MIN && y == -1)) {
                    onnx_why(c, "integer division by zero in a constant");
                    return NULL;
                }
                z = x / y;
                break;
            case B_EQ: z = x == y; break;
            case B_LT: z = x < y; break;
            case B_GT: z = x > y; break;
            case B_LE: z = x <= y; break;
            case B_GE: z = x >= y; break;
            case B_MAX: z = x > y ? x : y; break;
            case B_MIN: z = x < y ? x : y; break;
            case B_AND: z = x && y; break;
            case B_OR: z = x || y; break;
            }
            t->i[k] = z;
        } else {
            double x = onnx_hf(a, ia), y = onnx_hf(b, ib), z = 0;
            switch (op) {
            case B_ADD: z = x + y; break;
            case B_SUB: z = x - y; break;
            case B_MUL: z = x * y; break;
            case B_DIV: z = x / y; break;
            case B_EQ: z = x == y; break;
            case B_LT: z = x < y; break;
            case B_GT: z = x > y; break;
            case B_LE: z = x <= y; break;
            case B_GE: z = x >= y; break;
            case B_MAX: z = x > y ? x : y; break;
            case B_MIN: z = x < y ? x : y; break;
            case B_AND: z = x && y; break;
            case B_OR: z = x || y; break;
            }
            if (t->i)
                t->i[k] = (int64_t)z;
            else
                t->f[k] = z;
        }
    }
    return t;
}

htensor *onnx_fold_copy(ctx *c, const htensor *a, int elem, int rank, const int64_t *dims)
{
    htensor *t = onnx_new_fold(c, elem, rank, dims);
    if (!t)
        return NULL;
    if (t->n != a->n) {
        onnx_why(c, "cannot reshape %lld elements to %lld", (long long)a->n, (long long)t->n);
        return NULL;
    }
    for (int64_t k = 0; k < t->n; k++) {
        if (t->i)
            t->i[k] = elem == T_BOOL ? onnx_hf(a, k) != 0 : onnx_hi(a, k);
        else
            t->f[k] = onnx_hf(a, k);
    }
    return t;
}

bool onnx_all_const(ctx *c, const node_t *n)
{
    for (size_t k = 0; k < n->n_input; k++)
        if (onnx_has_in(n, k) && !onnx_in_const(c, n, k))
            return false;
    return true;
}

mc_value onnx_fscalar(ctx *c, mc_value like, double x)
{
    if (like < 0) /* a builder failed before: its error stands */
        return like;
    return mc_scalar(c->g, x, onnx_vnode(c, like)->dtype);
}

bool onnx_attr_is(const node_t *n, const char *name, const char *def, const char *value)
{
    const attr_t *a = onnx_attr(n, name);
    if (!a || !a->has_s)
        return !strcmp(def, value);
    return a->s.len == strlen(value) && !memcmp(a->s.data, value, a->s.len);
}

/* ---- the node table ------------------------------------------------------------------------- */

static op_fn find_op(const char *name)
{
    const onnx_op *const tables[] = {onnx_tensor_ops, onnx_nn_ops};
    for (size_t t = 0; t < sizeof tables / sizeof *tables; t++)
        for (const onnx_op *o = tables[t]; o->name; o++)
            if (!strcmp(o->name, name))
                return o->fn;
    return NULL;
}

static void report(ctx *c, const node_t *n, int index, const char *reason)
{
    char nm[120], ty[80], line[900];
    const char *name = n->name && *n->name ? n->name : NULL;
    char fallback[32];
    if (!name) {
        snprintf(fallback, sizeof fallback, "#%d", index);
        name = fallback;
    }
    snprintf(line, sizeof line, "node %s (%s, opset %lld): %s", shown(name, nm, sizeof nm),
             shown(n->op_type, ty, sizeof ty), (long long)c->opset, reason);
    c->nbad++;
    if (c->note)
        c->note(c->note_ctx, line);
    size_t len = strlen(line);
    if (c->report_len + len + 2 < sizeof c->report) {
        memcpy(c->report + c->report_len, "\n  ", 3);
        memcpy(c->report + c->report_len + 3, line, len + 1);
        c->report_len += len + 3;
    }
}

/* Operand k of op is one the importer needs as a constant (a shape, axes, indices, bounds). */
static bool static_operand(const char *op, size_t k)
{
    static const char *const second[] = {"Reshape", "Expand", "Tile", "Squeeze", "Unsqueeze",
                                         "Split", "Trilu", "ReduceSum", "ReduceMean",
                                         "ReduceMax", "ReduceMin", "ReduceSumSquare", "ReduceL1",
                                         "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
                                         "ReduceProd"};
    for (size_t i = 0; i < sizeof second / sizeof *second; i++)
        if (!strcmp(op, second[i]))
            return k == 1;
    if (!strcmp(op, "Pad"))
        return k == 1 || k == 3;
    if (!strcmp(op, "Slice") || !strcmp(op, "Dropout"))
        return k >= 1;
    if (!strcmp(op, "OneHot"))
        return k >= 1;
    if (!strcmp(op, "RNN") || !strcmp(op, "GRU") || !strcmp(op, "LSTM"))
        return k == 4;
    if (!strcmp(op, "CumSum") || !strcmp(op, "Upsample") || !strcmp(op, "Compress"))
        return k == 1;
    if (!strcmp(op, "Resize"))
        return k >= 1;
    return !strcmp(op, "ConstantOfShape") || !strcmp(op, "Range") || strstr(op, "Window");
}

/* Operators through which a value that only feeds shapes still only feeds shapes. */
static bool shape_arithmetic(const char *op)
{
    static const char *const ops_[] = {"Cast", "Add", "Sub", "Mul", "Div", "Neg", "Squeeze",
                                       "Unsqueeze", "Concat", "Reshape", "Identity", "Max", "Min"};
    for (size_t i = 0; i < sizeof ops_ / sizeof *ops_; i++)
        if (!strcmp(op, ops_[i]))
            return true;
    return false;
}

/* Does the value called name decide a shape: is it, directly or through shape arithmetic, an
 * operand the importer needs as a constant? Such an input's value must be known when the model
 * is read (minic compiles for fixed shapes); given, it is a constant in all its uses. */
static bool decides_shape(const Onnx__GraphProto *gp, const char *name, int depth)
{
    if (depth > 8)
        return false;
    for (size_t k = 0; k < gp->n_node; k++) {
        const node_t *n = gp->node[k];
        for (size_t i = 0; n && n->op_type && i < n->n_input; i++)
            if (n->input[i] && !strcmp(n->input[i], name)) {
                if (static_operand(n->op_type, i))
                    return true;
                if (shape_arithmetic(n->op_type) && n->n_output == 1 && n->output[0] &&
                    decides_shape(gp, n->output[0], depth + 1))
                    return true;
            }
    }
    return false;
}

static htensor *read_tensor_file(ctx *c, const char *path)
{
    char *data;
    size_t size;
    if (mc_file_read_all(path, &data, &size) != MC_OK) {
        onnx_why(c, "%s", mc_error_message());
        return NULL;
    }
    const char *why_ = "";
    Onnx__TensorProto *tp = NULL;
    if (!wire_check(&onnx__tensor_proto__descriptor, (uint8_t *)data, (uint8_t *)data + size, 0, &why_))
        onnx_why(c, "%s: not a TensorProto: %s", path, why_);
    else if (!(tp = onnx__tensor_proto__unpack(NULL, size, (uint8_t *)data)))
        onnx_why(c, "%s: not a TensorProto", path);
    free(data);
    htensor *t = tp ? onnx_load_tensor(c, tp, false) : NULL;
    if (tp)
        onnx__tensor_proto__free_unpacked(tp, NULL);
    return t;
}

/* An input's dim_param: the size given for it at load (mc_onnx_load_with_dims), else a symbolic
 * dimension of the graph under its name, bound when the program runs (docs/FORMAT.md §1, §7).
 * A name that is not a valid dimension name has its invalid characters made '_' (as values'). */
static mc_status dim_param(ctx *c, const char *param, const char *input, size_t axis, int64_t *out)
{
    char pbuf[80];
    for (int k = 0; k < c->ndims; k++)
        if (c->dims[k].name && param && !strcmp(c->dims[k].name, param)) {
            int64_t size = c->dims[k].size;
            if (size < 1 || size > ((int64_t)1 << 40))
                return mc_fail(MC_ERR_INPUT, "%s: --dim %s=%lld: a size must be positive", c->file,
                               shown(param, pbuf, sizeof pbuf), (long long)size);
            *out = size;
            return MC_OK;
        }
    char name[200];
    size_t o = 0;
    if (!param || !*param)
        param = "d";
    if (!((param[0] >= 'A' && param[0] <= 'Z') || (param[0] >= 'a' && param[0] <= 'z') || param[0] == '_'))
        name[o++] = '_';
    for (const char *p = param; *p && o < 120; p++) {
        char ch = *p;
        bool ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '.';
        name[o++] = ok ? ch : '_';
    }
    name[o] = 0;
    if (!mc_name_is_valid(name)) /* a reserved word */
        snprintf(name + o, sizeof name - o, "_");
    int64_t d = mc_dim_declare(c->g, name, strlen(name), 0, 0, 0);
    if (!d)
        return mc_fail(mc_error_status() == MC_ERR_SYSTEM ? MC_ERR_SYSTEM : MC_ERR_INPUT,
                       "%s: input '%s': dimension %zu ('%s'): %s", c->file, input, axis,
                       shown(param, pbuf, sizeof pbuf), mc_error_message());
    *out = d;
    return MC_OK;
}

/* Does an operator's mapping read its operands' shapes only in ways that hold for symbolic
 * dimensions (copied into shape lists, compared with ==, computed with mc_dim_*), or not at all?
 * Others are refused for operands with symbolic dimensions, before they compute a size from one. */
static bool sym_aware(const char *op, bool *batch_only)
{
    static const char *const ops_[] = {
        "Neg", "Abs", "Exp", "Log", "Sqrt", "Reciprocal", "Tanh", "Sigmoid", "Relu", "Erf", "Sin",
        "Cos", "Add", "Sub", "Mul", "Div", "Equal", "Less", "Greater", "LessOrEqual",
        "GreaterOrEqual", "Pow", "Max", "Min", "Sum", "Mean", "And", "Or", "Xor", "Not", "Where",
        "LeakyRelu", "PRelu", "Elu", "Selu", "Celu", "ThresholdedRelu", "HardSigmoid", "HardSwish",
        "Softsign", "Softplus", "Mish", "Shrink", "IsNaN", "IsInf", "Tan", "Sinh", "Cosh", "Asinh",
        "Acosh", "Atanh", "Sign", "Floor", "Ceil", "Round", "Clip", "Reshape", "Flatten", "Squeeze",
        "Unsqueeze", "Identity", "Dropout", "Transpose", "Concat", "Split", "Slice", "Expand",
        "Gather", "Shape", "Size", "Constant", "ConstantOfShape", "Range", "Cast", "ReduceSum",
        "ReduceMean", "ReduceMax", "ReduceMin", "ReduceSumSquare", "ReduceL1", "ReduceL2",
        "ReduceLogSum", "ReduceLogSumExp", "GlobalAveragePool", "GlobalMaxPool", "MatMul", "Gemm",
        "Softmax", "LogSoftmax", "LayerNormalization", "Tile", "ArgMax", "ArgMin", "Hardmax", "Trilu",
        "CumSum", "Mod"};
    static const char *const batch[] = {"Conv", "MaxPool", "AveragePool", "BatchNormalization"};
    *batch_only = false;
    for (size_t i = 0; i < sizeof ops_ / sizeof *ops_; i++)
        if (!strcmp(op, ops_[i]))
            return true;
    for (size_t i = 0; i < sizeof batch / sizeof *batch; i++)
        if (!strcmp(op, batch[i]))
            return *batch_only = true;
    return false;
}

/* false (the reason set) when node n's operator cannot take the symbolic dimensions that reach
 * it: a mapping that computes sizes from shapes would compute them from the encoding. */
static bool sym_check(ctx *c, const node_t *n)
{
    if (!mc_graph_num_syms(c->g))
        return true;
    bool batch_only, aware = sym_aware(n->op_type, &batch_only);
    if (aware && !batch_only)
        return true;
    for (size_t k = 0; k < n->n_input; k++) {
        slot *s = onnx_has_in(n, k) ? onnx_find_slot(c, n->input[k]) : NULL;
        if (!s || s->state == S_POISON)
            continue;
        char buf[300];
        if (s->state == S_CONST && s->c->sym)
            return onnx_why(c, "operand %zu is %s, computed from symbolic dimensions; this operator does not take "
                               "symbolic values (give the dim_params' sizes at load: --dim NAME=SIZE)",
                            k, sym_values_str(c, s->c, buf, sizeof buf));
        if (s->state != S_RUNTIME)
            continue;
        const mc_node *nd = &c->g->nodes[s->v];
        for (int d = batch_only && k == 0 ? 1 : 0; d < nd->rank; d++)
            if (mc_dim_is_sym(nd->shape[d]))
                return onnx_why(c, "operand %zu has the shape %s: this operator does not take a symbolic dimension%s "
                                   "(give the dim_params' sizes at load: --dim NAME=SIZE)",
                                k, onnx_dims_str(c, nd->rank, nd->shape, buf, sizeof buf),
                                batch_only ? " except on the batch axis of its input" : "");
    }
    return true;
}

static mc_status import_graph(ctx *c, Onnx__ModelProto *mp)
{
    Onnx__GraphProto *gp = mp->graph;
    char buf[200];
    if (!gp)
        return mc_fail(MC_ERR_INPUT, "%s: the model has no graph", c->file);
    c->opset = -1;
    for (size_t k = 0; k < mp->n_opset_import; k++) {
        Onnx__OperatorSetIdProto *o = mp->opset_import[k];
        if (o && (!o->domain || !*o->domain || !strcmp(o->domain, "ai.onnx")))
            c->opset = o->has_version ? o->version : 1;
    }
    if (c->opset < 0)
        return mc_fail(MC_ERR_INPUT, "%s: the model imports no opset of the default domain", c->file);
    c->g = mc_graph_new(gp->name && *gp->name && mc_name_is_valid(gp->name) ? gp->name : NULL);
    if (!c->g)
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    c->m->graph = c->g;
    /* initializers */
    for (size_t k = 0; k < gp->n_initializer; k++) {
        Onnx__TensorProto *tp = gp->initializer[k];
        if (!tp || !tp->name || !*tp->name)
            return mc_fail(MC_ERR_INPUT, "%s: initializer %zu has no name", c->file, k);
        if (onnx_find_slot(c, tp->name))
            return mc_fail(MC_ERR_INPUT, "%s: initializer '%s' is defined twice", c->file, shown(tp->name, buf, sizeof buf));
        c->why[0] = 0;
        htensor *t = onnx_load_tensor(c, tp, true);
        if (!t)
            return mc_fail(MC_ERR_INPUT, "%s: initializer '%s': %s", c->file, shown(tp->name, buf, sizeof buf), c->why);
        slot *s = onnx_new_slot(c, tp->name);
        if (!s)
            return mc_fail(MC_ERR_SYSTEM, "out of memory");
        s->state = S_CONST;
        s->c = t;
        s->initializer = true;
    }
    /* the inputs' dim_params first, so that no value takes a dimension's name */
    for (size_t k = 0, position = 0; k < gp->n_input; k++) {
        Onnx__ValueInfoProto *vi = gp->input[k];
        if (!vi || !vi->name || !*vi->name || onnx_find_slot(c, vi->name))
            continue;
        bool frozen = (int)position < c->nfrozen && c->frozen[position] && decides_shape(gp, vi->name, 0);
        position++;
        Onnx__TypeProto *tp = vi->type;
        if (frozen || !tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type ||
            !tp->tensor_type->shape || tp->tensor_type->shape->n_dim > MC_MAX_RANK)
            continue;
        for (size_t dd = 0; dd < tp->tensor_type->shape->n_dim; dd++) {
            Onnx__TensorShapeProto__Dimension *dim = tp->tensor_type->shape->dim[dd];
            int64_t size;
            mc_status st;
            if (dim && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                (st = dim_param(c, dim->dim_param, shown(vi->name, buf, sizeof buf), dd, &size)) != MC_OK)
                return st;
        }
    }
    /* inputs (those that are not initializers) */
    int position = -1;
    for (size_t k = 0; k < gp->n_input; k++) {
        Onnx__ValueInfoProto *vi = gp->input[k];
        if (!vi || !vi->name || !*vi->name)
            return mc_fail(MC_ERR_INPUT, "%s: graph input %zu has no name", c->file, k);
        if (onnx_find_slot(c, vi->name))
            continue;
        position++;
        shown(vi->name, buf, sizeof buf);
        if (position < c->nfrozen && c->frozen[position] && decides_shape(gp, vi->name, 0)) {
            /* a shape, axes or indices input whose value is given: a constant */
            c->why[0] = 0;
            htensor *t = read_tensor_file(c, c->frozen[position]);
            if (!t)
                return mc_fail(MC_ERR_INPUT, "%s: input '%s': %s", c->file, buf, c->why);
            slot *s = onnx_new_slot(c, vi->name);
            if (!s)
                return mc_fail(MC_ERR_SYSTEM, "out of memory");
            s->state = S_CONST;
            s->c = t;
            continue;
        }
        Onnx__TypeProto *tp = vi->type;
        if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
            return mc_fail(MC_ERR_INPUT, "%s: input '%s' is not a tensor (sequences, maps and optionals are unsupported)", c->file, buf);
        Onnx__TypeProto__Tensor *tt = tp->tensor_type;
        mc_dtype d;
        c->why[0] = 0;
        if (!onnx_map_dtype(c, tt->has_elem_type ? tt->elem_type : 0, &d))
            return mc_fail(MC_ERR_INPUT, "%s: input '%s': %s", c->file, buf, c->why);
        if (!tt->shape)
            return mc_fail(MC_ERR_INPUT, "%s: input '%s' has no shape", c->file, buf);
        if (tt->shape->n_dim > MC_MAX_RANK)
            return mc_fail(MC_ERR_INPUT, "%s: input '%s' has rank %zu (at most %d)", c->file, buf, tt->shape->n_dim, MC_MAX_RANK);
        int64_t dims[MC_MAX_RANK];
        for (size_t dd = 0; dd < tt->shape->n_dim; dd++) {
            Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[dd];
            if (dim && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM) {
                mc_status st = dim_param(c, dim->dim_param, buf, dd, &dims[dd]);
                if (st != MC_OK)
                    return st;
                continue;
            }
            if (!dim || dim->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
                return mc_fail(MC_ERR_INPUT, "%s: input '%s': dimension %zu has no size", c->file, buf, dd);
            if (dim->dim_value <= 0 || dim->dim_value > ((int64_t)1 << 40))
                return mc_fail(MC_ERR_INPUT, "%s: input '%s': dimension %zu is %lld (minic needs positive sizes)", c->file, buf, dd, (long long)dim->dim_value);
            dims[dd] = dim->dim_value;
        }
        const char *name = minic_name(c, vi->name);
        const char *onnx = mc_arena_strdup(&c->m->arena, vi->name);
        if (!name || !onnx || !grow_list((void **)&c->m->inputs, &c->m->cap_inputs, c->m->ninputs, sizeof *c->m->inputs))
            return mc_fail(MC_ERR_SYSTEM, "out of memory");
        mc_value v = mc_input(c->g, name, d, dims, (int)tt->shape->n_dim);
        if (v < 0)
            return mc_error_status();
        mc_onnx_tensor *in = &c->m->inputs[c->m->ninputs++];
        memset(in, 0, sizeof *in);
        in->name = name;
        in->onnx_name = onnx;
        in->position = position;
        in->dtype = d;
        in->rank = (int)tt->shape->n_dim;
        memcpy(in->shape, dims, sizeof in->shape);
        slot *s = onnx_new_slot(c, vi->name);
        if (!s)
            return mc_fail(MC_ERR_SYSTEM, "out of memory");
        s->state = S_RUNTIME;
        s->v = v;
    }
    /* nodes, in order (ONNX graphs are topologically sorted) */
    for (size_t k = 0; k < gp->n_node; k++) {
        node_t *n = gp->node[k];
        if (!n || !n->op_type)
            return mc_fail(MC_ERR_INPUT, "%s: node %zu has no operator", c->file, k);
        c->why[0] = 0;
        bool poisoned = false, missing = false;
        for (size_t i = 0; i < n->n_input; i++) {
            if (!onnx_has_in(n, i))
                continue;
            slot *s = onnx_find_slot(c, n->input[i]);
            if (!s) {
                missing = true;
                onnx_why(c, "input '%s' is not defined before it is used", shown(n->input[i], buf, sizeof buf));
            } else if (s->state == S_POISON)
                poisoned = true;
        }
        op_fn fn = NULL;
        bool ok = false;
        if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx"))
            onnx_why(c, "unknown domain '%s'", shown(n->domain, buf, sizeof buf));
        else if (!(fn = find_op(n->op_type)))
            onnx_why(c, "unknown operator (minic has no equivalent yet)");
        else if (!missing && !poisoned)
            ok = sym_check(c, n) && fn(c, n);
        if (!ok) {
            if (!poisoned || !fn)
                report(c, n, (int)k, c->why[0] ? c->why : mc_error_message());
            for (size_t o = 0; o < n->n_output; o++)
                if (onnx_out_present(n, o) && !onnx_find_slot(c, n->output[o])) {
                    slot *s = onnx_new_slot(c, n->output[o]);
                    if (!s)
                        return mc_fail(MC_ERR_SYSTEM, "out of memory");
                    s->state = S_POISON;
                }
            continue;
        }
        for (size_t o = 0; o < n->n_output; o++)
            if (onnx_out_present(n, o) && !onnx_find_slot(c, n->output[o])) {
                c->why[0] = 0;
                report(c, n, (int)k, "an output this importer did not produce");
                slot *s = onnx_new_slot(c, n->output[o]);
                if (!s)
                    return mc_fail(MC_ERR_SYSTEM, "out of memory");
                s->state = S_POISON;
            }
    }
    if (c->nbad && c->note)
        return mc_fail(MC_ERR_INPUT, "%s: %d node%s cannot be imported (listed above)", c->file,
                       c->nbad, c->nbad == 1 ? "" : "s");
    if (c->nbad)
        return mc_fail(MC_ERR_INPUT, "%s: %d node%s cannot be imported:%s%s", c->file, c->nbad,
                       c->nbad == 1 ? "" : "s", c->report,
                       c->report_len + 200 >= sizeof c->report ? "\n  ... and more" : "");
    /* outputs */
    if (gp->n_output < 1 || gp->n_output > 4096)
        return mc_fail(MC_ERR_INPUT, "%s: the graph has %zu outputs", c->file, gp->n_output);
    mc_value outs[4096];
    c->m->out_onnx = mc_arena_alloc(&c->m->arena, gp->n_output * sizeof *c->m->out_onnx);
    if (!c->m->out_onnx)
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    for (size_t k = 0; k < gp->n_output; k++) {
        Onnx__ValueInfoProto *vi = gp->output[k];
        slot *s = vi ? onnx_find_slot(c, vi->name) : NULL;
        if (!s)
            return mc_fail(MC_ERR_INPUT, "%s: output %zu ('%s') is not computed by the graph", c->file, k,
                           vi ? shown(vi->name, buf, sizeof buf) : "");
        c->why[0] = 0;
        mc_value v = onnx_as_value(c, s);
        if (v < 0)
            return mc_fail(MC_ERR_INPUT, "%s: output '%s': %s", c->file, shown(vi->name, buf, sizeof buf),
                           c->why[0] ? c->why : mc_error_message());
        bool reused = c->g->nodes[v].name != NULL || c->g->nodes[v].op == MC_OP_CONST;
        for (size_t j = 0; j < k; j++)
            reused |= outs[j] == v;
        if (reused) /* an output of its own, under its own name */
            v = mc_reshape(c->g, v, c->g->nodes[v].shape, c->g->nodes[v].rank);
        const char *name = v >= 0 ? minic_name(c, vi->name) : NULL;
        if (v < 0 || !name || mc_value_set_name(c->g, v, name) != MC_OK)
            return v < 0 || name ? mc_error_status() : mc_fail(MC_ERR_SYSTEM, "out of memory");
        outs[k] = v;
        c->m->out_onnx[k] = mc_arena_strdup(&c->m->arena, vi->name);
        if (!c->m->out_onnx[k])
            return mc_fail(MC_ERR_SYSTEM, "out of memory");
    }
    c->m->noutputs = (int)gp->n_output;
    return mc_graph_set_outputs(c->g, outs, (int)gp->n_output);
}

static mc_status unpack(const char *file, const void *data, size_t size, Onnx__ModelProto **out)
{
    const char *why_ = "";
    if (!wire_check(&onnx__model_proto__descriptor, data, (const uint8_t *)data + size, 0, &why_))
        return mc_fail(MC_ERR_INPUT, "%s: not a valid ONNX model: %s", file, why_);
    *out = onnx__model_proto__unpack(NULL, size, data);
    if (!*out)
        return mc_fail(MC_ERR_INPUT, "%s: not a valid ONNX model (protobuf-c could not decode it)", file);
    return MC_OK;
}

static mc_status load(const char *file, const char *dir, void *data, size_t size, unsigned flags,
                      mc_note_fn note, void *note_ctx, bool free_data, const char *const *frozen,
                      int nfrozen, const mc_onnx_dim *dims, int ndims, mc_onnx **out)
{
    Onnx__ModelProto *mp = NULL;
    mc_status st = unpack(file, data, size, &mp);
    if (free_data)
        free(data);
    if (st != MC_OK)
        return st;
    mc_onnx *m = calloc(1, sizeof *m);
    ctx c = {.m = m, .file = file, .flags = flags, .note = note, .note_ctx = note_ctx,
             .frozen = frozen, .nfrozen = nfrozen, .dims = dims, .ndims = dims ? ndims : 0};
    if (dir)
        c.dir = strdup(dir);
    if (!m || (dir && !c.dir))
        st = mc_fail(MC_ERR_SYSTEM, "out of memory");
    else
        st = import_graph(&c, mp);
    for (int k = 0; k < c.nallocs; k++)
        free(c.allocs[k]);
    free(c.allocs);
    free(c.slots);
    free(c.dir);
    mc_name_map_free(&c.map);
    onnx__model_proto__free_unpacked(mp, NULL);
    if (st != MC_OK) {
        mc_onnx_free(m);
        return st;
    }
    *out = m;
    return MC_OK;
}

mc_status mc_onnx_load_memory(const void *data, size_t size, const char *name, unsigned flags,
                              mc_note_fn note, void *note_ctx, mc_onnx **out)
{
    if (!out)
        return mc_fail(MC_ERR_INPUT, "mc_onnx_load_memory: out is NULL");
    *out = NULL;
    if (!data && size)
        return mc_fail(MC_ERR_INPUT, "mc_onnx_load_memory: data is NULL");
    return load(name ? name : "<memory>", NULL, (void *)data, size, flags, note, note_ctx, false,
                NULL, 0, NULL, 0, out);
}

mc_status mc_onnx_load(const char *path, unsigned flags, mc_note_fn note, void *note_ctx, mc_onnx **out)
{
    return mc_onnx_load_frozen(path, flags, note, note_ctx, NULL, 0, out);
}

static mc_status load_path(const char *path, unsigned flags, mc_note_fn note, void *note_ctx,
                           const char *const *frozen, int nfrozen, const mc_onnx_dim *dims,
                           int ndims, mc_onnx **out);

mc_status mc_onnx_load_frozen(const char *path, unsigned flags, mc_note_fn note, void *note_ctx,
                              const char *const *frozen, int nfrozen, mc_onnx **out)
{
    return load_path(path, flags, note, note_ctx, frozen, nfrozen, NULL, 0, out);
}

mc_status mc_onnx_load_with_dims(const char *path, unsigned flags, const mc_onnx_dim *dims,
                                 int ndims, mc_note_fn note, void *note_ctx, mc_onnx **out)
{
    if (ndims < 0 || (ndims > 0 && !dims))
        return mc_fail(MC_ERR_INPUT, "mc_onnx_load_with_dims: %d dims at %p", ndims, (const void *)dims);
    return load_path(path, flags, note, note_ctx, NULL, 0, dims, ndims, out);
}

static mc_status load_path(const char *path, unsigned flags, mc_note_fn note, void *note_ctx,
                           const char *const *frozen, int nfrozen, const mc_onnx_dim *dims,
                           int ndims, mc_onnx **out)
{
    if (!out || !path)
        return mc_fail(MC_ERR_INPUT, "mc_onnx_load: %s is NULL", out ? "path" : "out");
    *out = NULL;
    char *data;
    size_t size;
    mc_status st = mc_file_read_all(path, &data, &size);
    if (st != MC_OK)
        return st;
    char *dir = strdup(path);
    if (!dir) {
        free(data);
        return mc_fail(MC_ERR_SYSTEM, "out of memory");
    }
    char *slash = strrchr(dir, '/');
    if (slash)
        slash == dir ? (void)(dir[1] = 0) : (void)(*slash = 0);
    else
        strcpy(dir, ".");
    st = load(path, dir, data, size, flags, note, note_ctx, true, frozen, nfrozen, dims, ndims, out);
    free(dir);
    return st;
}

mc_status mc_onnx_read_tensor_file(const char *path, bool f64_as_f32, mc_onnx_tensor *out)
{
    memset(out, 0, sizeof *out);
    char *data;
    size_t size;
    mc_status st = mc_file_read_all(path, &data, &size);
    if (st != MC_OK)
        return st;
    const char *why_ = "";
    if (!wire_check(&onnx__tensor_proto__descriptor, (uint8_t *)data, (uint8_t *)data + size, 0, &why_)) {
        free(data);
        return mc_fail(MC_ERR_INPUT, "%s: not a TensorProto: %s", path, why_);
    }
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, size, (uint8_t *)data);
    free(data);
    if (!tp)
        return mc_fail(MC_ERR_INPUT, "%s: not a TensorProto", path);
    mc_onnx m = {0};
    ctx c = {.m = &m, .file = path, .flags = f64_as_f32 ? MC_ONNX_F64_AS_F32 : 0};
    htensor *t = onnx_load_tensor(&c, tp, false);
    mc_dtype d;
    st = MC_OK;
    if (!t || !onnx_map_dtype(&c, t->elem, &d) || (d == MC_I32 && !fits_i32(&c, t, path)))
        st = mc_fail(MC_ERR_INPUT, "%s: %s", path, c.why);
    else if (!tensor_bytes(&c, t, d, &out->data, &out->bytes))
        st = mc_fail(MC_ERR_SYSTEM, "%s", c.why);
    else {
        out->dtype = d;
        out->rank = t->rank;
        memcpy(out->shape, t->dims, sizeof out->shape);
    }
    for (int k = 0; k < c.nallocs; k++)
        free(c.allocs[k]);
    free(c.allocs);
    onnx__tensor_proto__free_unpacked(tp, NULL);
    return st;
}

bool mc_onnx_available(void) { return true; }

#else /* no protobuf-c: the importer is left out */

static mc_status unavailable(void)
{
    return mc_fail(MC_ERR_SYSTEM, "ONNX import is not built into this minic (it needs protobuf-c: "
                                  "Debian's libprotobuf-c-dev and protobuf-c-compiler at configure time)");
}

mc_status mc_onnx_load(const char *path, unsigned flags, mc_note_fn note, void *note_ctx, mc_onnx **out)
{
    if (out)
        *out = NULL;
    return unavailable();
}

mc_status mc_onnx_load_memory(const void *data, size_t size, const char *name, unsigned flags,
                              mc_note_fn note, void *note_ctx, mc_onnx **out)
{
    if (out)
        *out = NULL;
    return unavailable();
}

mc_status mc_onnx_read_tensor_file(const char *path, bool f64_as_f32, mc_onnx_tensor *out)
{
    memset(out, 0, sizeof *out);
    return unavailable();
}

mc_status mc_onnx_load_frozen(const char *path, unsigned flags, mc_note_fn note, void *note_ctx,
                              const char *const *frozen, int nfrozen, mc_onnx **out)
{
    if (out)
        *out = NULL;
    return unavailable();
}

mc_status mc_onnx_load_with_dims(const char *path, unsigned flags, const mc_onnx_dim *dims,
                                 int ndims, mc_note_fn note, void *note_ctx, mc_onnx **out)
{
    if (out)
        *out = NULL;
    return unavailable();
}

bool mc_onnx_available(void) { return false; }

#endif

void mc_onnx_free(mc_onnx *m)
{
    if (!m)
        return;
    for (int k = 0; k < m->nparams; k++)
        free(m->params[k].data);
    free(m->params);
    free(m->inputs);
    mc_graph_free(m->graph);
    mc_arena_free(&m->arena);
    free(m);
}

const mc_graph *mc_onnx_graph(const mc_onnx *m) { return m ? m->graph : NULL; }

const char *mc_onnx_minic_name(const mc_onnx *m, const char *onnx_name)
{
    if (!m || !onnx_name)
        return NULL;
    for (int k = 0; k < m->nparams; k++)
        if (!strcmp(m->params[k].onnx_name, onnx_name))
            return m->params[k].name;
    for (int k = 0; k < m->ninputs; k++)
        if (!strcmp(m->inputs[k].onnx_name, onnx_name))
            return m->inputs[k].name;
    for (int k = 0; k < m->noutputs; k++)
        if (!strcmp(m->out_onnx[k], onnx_name))
            return m->graph->nodes[m->graph->outputs[k]].name;
    return NULL;
}
