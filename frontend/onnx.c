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
 *     double and evaluated here (fold_*);
 *   - runtime values: minic graph values;
 *   - poisoned: the output of a node that could not be imported.
 * A constant becomes a graph value only when a runtime operator uses it: a one-element
 * constant as a number operand, anything else as a param whose value the model carries
 * (initializers are always params). Every node that cannot be imported is reported, one line
 * each, before the import fails; nothing runs.
 */
#include "frontend/onnx.h"

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
#include <onnx.pb-c.h>

#define MAX_DEPTH 32          /* nesting of protobuf messages (graphs in attributes, ...) */
#define MAX_FOLD_ELEMS (1 << 24) /* host-evaluated constants stay small */
#define MAX_FOLD_TOTAL (1 << 26) /* and all of them together (a hostile file's memory) */

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

/* ---- host constants ------------------------------------------------------------------------- */

enum {
    T_FLOAT = 1, T_UINT8 = 2, T_INT8 = 3, T_UINT16 = 4, T_INT16 = 5, T_INT32 = 6, T_INT64 = 7,
    T_STRING = 8, T_BOOL = 9, T_FLOAT16 = 10, T_DOUBLE = 11, T_UINT32 = 12, T_UINT64 = 13,
    T_COMPLEX64 = 14, T_COMPLEX128 = 15, T_BFLOAT16 = 16,
};

static const char *elem_name(int e)
{
    static const char *const names[] = {"UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16",
                                        "INT32", "INT64", "STRING", "BOOL", "FLOAT16", "DOUBLE",
                                        "UINT32", "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
    return e >= 0 && e <= 16 ? names[e] : "an unknown data type";
}

static bool elem_is_int(int e)
{
    return e == T_UINT8 || e == T_INT8 || e == T_UINT16 || e == T_INT16 || e == T_INT32 ||
           e == T_INT64 || e == T_BOOL || e == T_UINT32 || e == T_UINT64;
}

static bool elem_is_float(int e)
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

/* A constant on the host: integers (and bools) in i, floats in f (f32 data kept as float). */
typedef struct htensor {
    int elem;
    int rank;
    int64_t dims[MC_MAX_RANK];
    int64_t n;
    int64_t *i;
    double *f;
    float *f32;
    bool f32_given; /* f32 belongs to a param now (a second param of it copies) */
} htensor;

static double hf(const htensor *t, int64_t k)
{
    if (t->i)
        return (double)t->i[k];
    if (t->f32)
        return t->f32[k];
    return t->f[k];
}

static int64_t hi(const htensor *t, int64_t k)
{
    if (t->i)
        return t->i[k];
    double x = t->f32 ? t->f32[k] : t->f[k];
    if (!(x > -9.2e18 && x < 9.2e18))
        return x > 0 ? INT64_MAX : (x < 0 ? INT64_MIN : 0);
    return (int64_t)x;
}

/* ---- the importer's state ------------------------------------------------------------------- */

enum { S_RUNTIME, S_CONST, S_POISON };

typedef struct slot {
    const char *name; /* the ONNX name (in the unpacked model) */
    int state;
    mc_value v;       /* runtime value, or a constant made a graph value; MC_NONE until then */
    htensor *c;
    bool initializer;
} slot;

typedef struct ctx {
    mc_onnx *m;
    mc_graph *g;
    const char *file;  /* for messages */
    char *dir;         /* the model's folder (external data), or NULL: none allowed */
    unsigned flags;
    int64_t opset;
    slot *slots;
    int nslots, cap;
    mc_name_map map;   /* ONNX name -> slot */
    void **allocs;     /* host memory freed at the end (NULL where ownership moved) */
    int nallocs, capallocs;
    char why[512];     /* the reason the current node failed */
    int nbad;          /* nodes reported */
    char report[3000]; /* the first reports, for the error message */
    size_t report_len;
    mc_note_fn note;
    void *note_ctx;
    const char *const *frozen; /* TensorProto files of the graph's inputs, in order, or NULL */
    int nfrozen;
    int64_t folded;    /* elements of the constants computed so far (MAX_FOLD_TOTAL at most) */
    const mc_onnx_dim *dims; /* sizes given for the inputs' dim_params */
    int ndims;
} ctx;

static void *c_alloc(ctx *c, size_t bytes)
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

static bool why(ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool why(ctx *c, const char *fmt, ...)
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

static slot *new_slot(ctx *c, const char *name)
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

static slot *find_slot(ctx *c, const char *name)
{
    if (!name || !*name)
        return NULL;
    int32_t k = mc_name_map_get(&c->map, name);
    return k >= 0 ? &c->slots[k] : NULL;
}

static htensor *new_tensor(ctx *c, int elem, int rank, const int64_t *dims)
{
    if (rank < 0 || rank > MC_MAX_RANK) {
        why(c, "a tensor of rank %d (minic supports at most %d)", rank, MC_MAX_RANK);
        return NULL;
    }
    htensor *t = c_alloc(c, sizeof *t);
    if (!t) {
        why(c, "out of memory");
        return NULL;
    }
    t->elem = elem;
    t->rank = rank;
    t->n = 1;
    for (int d = 0; d < rank; d++) {
        if (dims[d] < 0 || mc_mul_overflows(t->n, dims[d], &t->n)) {
            why(c, "a tensor with an invalid dimension %lld", (long long)dims[d]);
            return NULL;
        }
        t->dims[d] = dims[d];
    }
    if (t->n > ((int64_t)1 << 40)) {
        why(c, "a tensor of %lld elements is too large", (long long)t->n);
        return NULL;
    }
    return t;
}

/* A tensor whose values the host computes: i or f allocated. */
static htensor *new_fold(ctx *c, int elem, int rank, const int64_t *dims)
{
    htensor *t = new_tensor(c, elem, rank, dims);
    if (!t)
        return NULL;
    if (t->n > MAX_FOLD_ELEMS) {
        why(c, "a constant of %lld elements is too large to compute at import time", (long long)t->n);
        return NULL;
    }
    c->folded += t->n;
    if (c->folded > MAX_FOLD_TOTAL) {
        why(c, "the constants computed at import time exceed %d elements", MAX_FOLD_TOTAL);
        return NULL;
    }
    if (elem_is_int(elem))
        t->i = c_alloc(c, (size_t)t->n * sizeof *t->i);
    else
        t->f = c_alloc(c, (size_t)t->n * sizeof *t->f);
    if (!t->i && !t->f) {
        why(c, "out of memory");
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
    if (elem_is_int(t->elem))
        t->i = c_alloc(c, (size_t)t->n * sizeof *t->i);
    else if (t->elem == T_FLOAT)
        t->f32 = c_alloc(c, (size_t)t->n * sizeof *t->f32);
    else
        t->f = c_alloc(c, (size_t)t->n * sizeof *t->f);
    return t->i || t->f32 || t->f ? true : why(c, "out of memory");
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
                return why(c, "external data: invalid %s '%s'", e->key, e->value);
            if (!strcmp(e->key, "offset"))
                offset = v;
            else
                length = v;
        }
    }
    char buf[200];
    if (!loc)
        return why(c, "external data without a location");
    if (!c->dir)
        return why(c, "external data ('%s') in a model read from memory", shown(loc, buf, sizeof buf));
    if (!relative_inside(loc))
        return why(c, "external data path '%s' leaves the model's folder", shown(loc, buf, sizeof buf));
    size_t need = (size_t)t->n * esize;
    if (length >= 0 && (uint64_t)length != need)
        return why(c, "external data length %lld, but the shape needs %zu bytes", (long long)length, need);
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", c->dir, loc) >= (int)sizeof path)
        return why(c, "external data path too long");
    /* symlinks could still leave the folder: the resolved path must lie under the resolved dir */
    char *rdir = realpath(c->dir, NULL), *rpath = realpath(path, NULL);
    bool inside = rdir && rpath && strncmp(rpath, rdir, strlen(rdir)) == 0 &&
                  rpath[strlen(rdir)] == '/';
    free(rdir);
    if (!inside) {
        free(rpath);
        return why(c, "external data file '%s' %s", shown(loc, buf, sizeof buf),
                   rpath ? "resolves outside the model's folder" : "cannot be opened");
    }
    int fd;
    struct stat st;
    mc_status s = mc_file_open_regular(rpath, &fd, &st);
    free(rpath);
    if (s != MC_OK)
        return why(c, "external data: %s", mc_error_message());
    bool ok = false;
    uint8_t *raw = NULL;
    if ((uint64_t)offset > (uint64_t)st.st_size || need > (uint64_t)st.st_size - (uint64_t)offset)
        why(c, "external data '%s': offset %lld + %zu bytes runs past its end (%lld bytes)",
            shown(loc, buf, sizeof buf), (long long)offset, need, (long long)st.st_size);
    else if (!(raw = malloc(need ? need : 1)))
        why(c, "out of memory");
    else {
        size_t got = 0;
        while (got < need) {
            ssize_t r = pread(fd, raw + got, need - got, (off_t)((uint64_t)offset + got));
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        if (got != need)
            why(c, "external data '%s': read failed", shown(loc, buf, sizeof buf));
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
static htensor *load_tensor(ctx *c, Onnx__TensorProto *tp, bool steal)
{
    if (!tp) {
        why(c, "a missing tensor");
        return NULL;
    }
    if (tp->n_dims > MC_MAX_RANK) {
        why(c, "a tensor of rank %zu (minic supports at most %d)", tp->n_dims, MC_MAX_RANK);
        return NULL;
    }
    int elem = tp->has_data_type ? tp->data_type : 0;
    size_t esize = elem_size(elem);
    if (!esize) {
        why(c, "a tensor of data type %s (unsupported)", elem_name(elem));
        return NULL;
    }
    htensor *t = new_tensor(c, elem, (int)tp->n_dims, tp->dims);
    if (!t)
        return NULL;
    if (tp->segment) {
        why(c, "a segmented tensor (unsupported)");
        return NULL;
    }
    if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return read_external(c, tp, t, esize) ? t : NULL;
    if (tp->has_raw_data) {
        if ((uint64_t)tp->raw_data.len != (uint64_t)t->n * esize) {
            why(c, "raw data of %zu bytes, but the shape needs %llu", tp->raw_data.len,
                (unsigned long long)((uint64_t)t->n * esize));
            return NULL;
        }
        if (steal && elem == T_FLOAT && t->n > 0 && ((uintptr_t)tp->raw_data.data & 3) == 0) {
            /* little-endian host: the bytes are the floats */
            t->f32 = (float *)tp->raw_data.data;
            if (!c_adopt(c, t->f32)) {
                why(c, "out of memory");
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
        why(c, "%zu stored values, but the shape has %lld elements", have, (long long)t->n);
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

static bool map_dtype(ctx *c, int elem, mc_dtype *out)
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
        return why(c, "unsupported dtype DOUBLE (--f64-as-f32 reads it as f32)");
    }
    return why(c, "unsupported dtype %s", elem_name(elem));
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
        if (mc_name_is_valid(name) && !temp_like && mc_name_map_get(&c->g->names, name) < 0)
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
        int64_t v = hi(t, k);
        if (v < INT32_MIN || v > INT32_MAX) {
            char buf[160];
            return why(c, "%s '%s' holds %lld at element %lld, outside i32 (minic narrows INT64 to i32)",
                       elem_name(t->elem), shown(name, buf, sizeof buf), (long long)v, (long long)k);
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
        return why(c, "out of memory");
    for (int64_t k = 0; k < t->n; k++) {
        if (d == MC_I32)
            ((int32_t *)p)[k] = (int32_t)hi(t, k);
        else if (d == MC_BOOL)
            ((uint8_t *)p)[k] = hf(t, k) != 0;
        else
            mc_store_element(p, d, k, hf(t, k));
    }
    *data = p;
    return true;
}

static mc_value as_value(ctx *c, slot *s);

static mc_value declare_param(ctx *c, slot *s)
{
    htensor *t = s->c;
    mc_dtype d;
    if (!map_dtype(c, t->elem, &d))
        return MC_ERROR;
    if (t->n == 0) {
        why(c, "a zero-size tensor (minic has no zero-size dimensions)");
        return MC_ERROR;
    }
    if (d == MC_I32 && !fits_i32(c, t, s->name))
        return MC_ERROR;
    if (!grow_list((void **)&c->m->params, &c->m->cap_params, c->m->nparams, sizeof *c->m->params)) {
        why(c, "out of memory");
        return MC_ERROR;
    }
    const char *name = minic_name(c, s->name);
    const char *onnx = mc_arena_strdup(&c->m->arena, s->name);
    if (!name || !onnx) {
        why(c, "out of memory");
        return MC_ERROR;
    }
    mc_value v = mc_param(c->g, name, d, t->dims, t->rank);
    if (v < 0) {
        why(c, "%s", mc_error_message());
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

static mc_value as_value(ctx *c, slot *s)
{
    if (!s) {
        why(c, "a missing operand");
        return MC_ERROR;
    }
    if (s->state == S_POISON)
        return MC_ERROR;
    if (s->v != MC_NONE)
        return s->v;
    htensor *t = s->c;
    if (!s->initializer && t->n == 1) {
        mc_dtype d;
        if (!map_dtype(c, t->elem, &d))
            return MC_ERROR;
        if (d == MC_I32 && !fits_i32(c, t, s->name))
            return MC_ERROR;
        double x = hf(t, 0);
        if (d == MC_F16 || d == MC_BF16)
            x = mc_round_to_dtype(x, d);
        mc_value v = mc_scalar(c->g, d == MC_I32 ? (double)hi(t, 0) : x, d);
        if (t->rank > 0)
            v = mc_reshape(c->g, v, t->dims, t->rank);
        if (v < 0) {
            why(c, "%s", mc_error_message());
            return MC_ERROR;
        }
        return s->v = v;
    }
    mc_value v = declare_param(c, s);
    if (v >= 0)
        s->v = v;
    return v;
}

/* ---- attributes ----------------------------------------------------------------------------- */

typedef Onnx__NodeProto node_t;
typedef Onnx__AttributeProto attr_t;

static const attr_t *attr(const node_t *n, const char *name)
{
    for (size_t k = 0; k < n->n_attribute; k++)
        if (n->attribute[k] && n->attribute[k]->name && !strcmp(n->attribute[k]->name, name))
            return n->attribute[k];
    return NULL;
}

static int64_t attr_i(const node_t *n, const char *name, int64_t def)
{
    const attr_t *a = attr(n, name);
    return a && a->has_i ? a->i : def;
}

static double attr_f(const node_t *n, const char *name, double def)
{
    const attr_t *a = attr(n, name);
    return a && a->has_f ? a->f : def;
}

/* ---- node inputs and outputs ---------------------------------------------------------------- */

static slot *in_slot(ctx *c, const node_t *n, size_t k)
{
    return k < n->n_input ? find_slot(c, n->input[k]) : NULL;
}

static bool has_in(const node_t *n, size_t k)
{
    return k < n->n_input && n->input[k] && n->input[k][0];
}

static htensor *in_const(ctx *c, const node_t *n, size_t k)
{
    slot *s = in_slot(c, n, k);
    return s && s->state == S_CONST ? s->c : NULL;
}

static mc_value in_value(ctx *c, const node_t *n, size_t k)
{
    slot *s = in_slot(c, n, k);
    if (!s) {
        why(c, "input %zu is missing", k);
        return MC_ERROR;
    }
    return as_value(c, s);
}

/* The static type of a slot: dtype (ONNX), rank, dims. */
static void slot_type(ctx *c, const slot *s, int *elem, int *rank, int64_t *dims)
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

static bool out_present(const node_t *n, size_t k)
{
    return k < n->n_output && n->output[k] && n->output[k][0];
}

static bool set_slot(ctx *c, const node_t *n, size_t k, int state, mc_value v, htensor *t)
{
    if (!out_present(n, k))
        return true;
    slot *s = find_slot(c, n->output[k]);
    if (s) {
        char buf[160];
        return why(c, "output '%s' is already defined (SSA)", shown(n->output[k], buf, sizeof buf));
    }
    s = new_slot(c, n->output[k]);
    if (!s)
        return why(c, "out of memory");
    s->state = state;
    s->v = v;
    s->c = t;
    return true;
}

static bool set_out(ctx *c, const node_t *n, size_t k, mc_value v)
{
    if (v < 0)
        return c->why[0] ? false : why(c, "%s", mc_error_message());
    return set_slot(c, n, k, S_RUNTIME, v, NULL);
}

static bool set_const(ctx *c, const node_t *n, size_t k, htensor *t)
{
    return t ? set_slot(c, n, k, S_CONST, MC_NONE, t) : false;
}

/* ints from a constant input or an attribute (opsets moved many attributes to inputs) */
static bool ints_of(ctx *c, const node_t *n, size_t input, const char *attr_name, int64_t *out,
                    int *count, int max, bool *given)
{
    *given = false;
    *count = 0;
    if (has_in(n, input)) {
        htensor *t = in_const(c, n, input);
        if (!t)
            return why(c, "input %zu (%s) must be a constant known at import time", input, attr_name);
        if (t->n > max)
            return why(c, "%s has %lld entries (at most %d)", attr_name, (long long)t->n, max);
        for (int64_t k = 0; k < t->n; k++)
            out[k] = hi(t, k);
        *count = (int)t->n;
        *given = true;
        return true;
    }
    const attr_t *a = attr(n, attr_name);
    if (a && a->n_ints > 0) {
        if (a->n_ints > (size_t)max)
            return why(c, "%s has %zu entries (at most %d)", attr_name, a->n_ints, max);
        for (size_t k = 0; k < a->n_ints; k++)
            out[k] = a->ints[k];
        *count = (int)a->n_ints;
        *given = true;
    }
    return true;
}

static bool norm_axis(ctx *c, int64_t axis, int rank, int *out)
{
    *out = 0;
    if (axis < -rank || axis >= (rank ? rank : 1))
        return why(c, "axis %lld out of range for rank %d", (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return true;
}

static const mc_node *vnode(ctx *c, mc_value v) { return &c->g->nodes[v]; }

/* ---- host evaluation of constants (shape chains) -------------------------------------------- */

/* NumPy broadcast of two shapes. */
static bool broadcast(ctx *c, int ra, const int64_t *a, int rb, const int64_t *b, int *r, int64_t *out)
{
    *r = ra > rb ? ra : rb;
    for (int d = 0; d < *r; d++) {
        int64_t x = d - (*r - ra) >= 0 ? a[d - (*r - ra)] : 1;
        int64_t y = d - (*r - rb) >= 0 ? b[d - (*r - rb)] : 1;
        if (x != y && x != 1 && y != 1)
            return why(c, "shapes do not broadcast (%lld vs %lld at axis %d)", (long long)x, (long long)y, d);
        out[d] = x == 1 ? y : x;
    }
    return true;
}

/* flat index into t of output index `k` of a broadcast shape */
static int64_t bidx(const htensor *t, int r, const int64_t *shape, int64_t k)
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

typedef enum { B_ADD, B_SUB, B_MUL, B_DIV, B_EQ, B_LT, B_GT, B_LE, B_GE, B_MAX, B_MIN, B_AND, B_OR } binop;

static htensor *fold_binary(ctx *c, binop op, const htensor *a, const htensor *b)
{
    int r;
    int64_t shape[MC_MAX_RANK];
    if (!broadcast(c, a->rank, a->dims, b->rank, b->dims, &r, shape))
        return NULL;
    bool cmp = op >= B_EQ && op <= B_GE;
    bool logic = op == B_AND || op == B_OR;
    int elem = cmp || logic ? T_BOOL : a->elem;
    htensor *t = new_fold(c, elem, r, shape);
    if (!t)
        return NULL;
    bool ints = elem_is_int(a->elem) && elem_is_int(b->elem);
    for (int64_t k = 0; k < t->n; k++) {
        int64_t ia = bidx(a, r, shape, k), ib = bidx(b, r, shape, k);
        if (ints) {
            int64_t x = hi(a, ia), y = hi(b, ib), z = 0;
            switch (op) {
            case B_ADD: z = (int64_t)((uint64_t)x + (uint64_t)y); break;
            case B_SUB: z = (int64_t)((uint64_t)x - (uint64_t)y); break;
            case B_MUL: z = (int64_t)((uint64_t)x * (uint64_t)y); break;
            case B_DIV:
                if (y == 0 || (x == INT64_MIN && y == -1)) {
                    why(c, "integer division by zero in a constant");
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
            double x = hf(a, ia), y = hf(b, ib), z = 0;
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

static htensor *fold_copy(ctx *c, const htensor *a, int elem, int rank, const int64_t *dims)
{
    htensor *t = new_fold(c, elem, rank, dims);
    if (!t)
        return NULL;
    if (t->n != a->n) {
        why(c, "cannot reshape %lld elements to %lld", (long long)a->n, (long long)t->n);
        return NULL;
    }
    for (int64_t k = 0; k < t->n; k++) {
        if (t->i)
            t->i[k] = elem == T_BOOL ? hf(a, k) != 0 : hi(a, k);
        else
            t->f[k] = hf(a, k);
    }
    return t;
}

/* ---- the operators -------------------------------------------------------------------------- */

typedef bool (*op_fn)(ctx *c, const node_t *n);

static bool all_const(ctx *c, const node_t *n)
{
    for (size_t k = 0; k < n->n_input; k++)
        if (has_in(n, k) && !in_const(c, n, k))
            return false;
    return true;
}

#define VAL(var, k)                       \
    mc_value var = in_value(c, n, (k));   \
    if (var < 0)                          \
        return false;

typedef mc_value (*unary_fn)(mc_graph *, mc_value);
typedef mc_value (*binary_fn)(mc_graph *, mc_value, mc_value);

static const struct { const char *name; unary_fn fn; } unary_ops[] = {
    {"Neg", mc_neg}, {"Abs", mc_abs}, {"Exp", mc_exp}, {"Log", mc_log}, {"Sqrt", mc_sqrt},
    {"Reciprocal", mc_recip}, {"Tanh", mc_tanh}, {"Sigmoid", mc_sigmoid}, {"Relu", mc_relu},
    {"Erf", mc_erf}, {"Sin", mc_sin}, {"Cos", mc_cos},
};

static const struct { const char *name; binary_fn fn; binop fold; } binary_ops[] = {
    {"Add", mc_add, B_ADD}, {"Sub", mc_sub, B_SUB}, {"Mul", mc_mul, B_MUL}, {"Div", mc_div, B_DIV},
    {"Equal", mc_eq, B_EQ}, {"Less", mc_lt, B_LT}, {"Greater", mc_gt, B_GT},
    {"LessOrEqual", mc_le, B_LE}, {"GreaterOrEqual", mc_ge, B_GE},
};

static mc_value fscalar(ctx *c, mc_value like, double x)
{
    return mc_scalar(c->g, x, vnode(c, like)->dtype);
}

/* where(cond, a, b), also for i32 (minic's where takes floats and bools): b + (a - b) * cond */
static mc_value sel(ctx *c, mc_value cond, mc_value a, mc_value b)
{
    mc_graph *g = c->g;
    if (a >= 0 && vnode(c, a)->dtype == MC_I32)
        return mc_add(g, b, mc_mul(g, mc_sub(g, a, b), mc_cast(g, cond, MC_I32)));
    return mc_where(g, cond, a, b);
}

static bool attr_is(const node_t *n, const char *name, const char *def, const char *value)
{
    const attr_t *a = attr(n, name);
    if (!a || !a->has_s)
        return !strcmp(def, value);
    return a->s.len == strlen(value) && !memcmp(a->s.data, value, a->s.len);
}

static bool op_unary(ctx *c, const node_t *n)
{
    for (size_t k = 0; k < sizeof unary_ops / sizeof *unary_ops; k++)
        if (!strcmp(n->op_type, unary_ops[k].name)) {
            if (!strcmp(n->op_type, "Neg") && all_const(c, n) && in_const(c, n, 0)) {
                htensor *a = in_const(c, n, 0);
                htensor *z = fold_copy(c, a, a->elem, a->rank, a->dims);
                if (!z)
                    return false;
                for (int64_t e = 0; e < z->n; e++) {
                    if (z->i)
                        z->i[e] = -z->i[e];
                    else
                        z->f[e] = -z->f[e];
                }
                return set_const(c, n, 0, z);
            }
            VAL(x, 0);
            return set_out(c, n, 0, unary_ops[k].fn(c->g, x));
        }
    return why(c, "internal: no unary operator");
}

static bool op_binary(ctx *c, const node_t *n)
{
    for (size_t k = 0; k < sizeof binary_ops / sizeof *binary_ops; k++)
        if (!strcmp(n->op_type, binary_ops[k].name)) {
            htensor *a = in_const(c, n, 0), *b = in_const(c, n, 1);
            if (a && b && a->n <= MAX_FOLD_ELEMS && b->n <= MAX_FOLD_ELEMS &&
                elem_is_int(a->elem) == elem_is_int(b->elem))
                return set_const(c, n, 0, fold_binary(c, binary_ops[k].fold, a, b));
            VAL(x, 0);
            VAL(y, 1);
            return set_out(c, n, 0, binary_ops[k].fn(c->g, x, y));
        }
    return why(c, "internal: no binary operator");
}

static bool op_pow(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    VAL(y, 1);
    mc_dtype dx = vnode(c, x)->dtype;
    if (dx == MC_I32) /* integer powers through f32 (exact for the values an i32 holds at that size) */
        return set_out(c, n, 0, mc_cast(g, mc_pow(g, mc_cast(g, x, MC_F32), vnode(c, y)->dtype == MC_F32 ? y : mc_cast(g, y, MC_F32)), MC_I32));
    if (vnode(c, y)->dtype != dx)
        y = mc_cast(g, y, dx);
    return set_out(c, n, 0, mc_pow(g, x, y));
}

/* Max, Min, Sum, Mean: any number of operands */
static bool op_variadic(ctx *c, const node_t *n)
{
    binary_fn fn = !strcmp(n->op_type, "Max") ? mc_maximum : !strcmp(n->op_type, "Min") ? mc_minimum : mc_add;
    if (n->n_input < 1)
        return why(c, "no operands");
    VAL(acc, 0);
    for (size_t k = 1; k < n->n_input; k++) {
        VAL(x, k);
        acc = fn(c->g, acc, x);
    }
    if (!strcmp(n->op_type, "Mean") && n->n_input > 1)
        acc = mc_div(c->g, acc, fscalar(c, acc, (double)n->n_input));
    return set_out(c, n, 0, acc);
}

static bool op_logic(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(a, 0);
    if (!strcmp(n->op_type, "Not"))
        return set_out(c, n, 0, mc_eq(g, a, mc_scalar(g, 0, MC_BOOL)));
    VAL(b, 1);
    if (!strcmp(n->op_type, "Xor"))
        return set_out(c, n, 0, mc_ne(g, a, b));
    /* where(a, b, false) / where(a, true, b), broadcast by where */
    if (!strcmp(n->op_type, "And"))
        return set_out(c, n, 0, mc_where(g, a, b, mc_scalar(g, 0, MC_BOOL)));
    return set_out(c, n, 0, mc_where(g, a, mc_scalar(g, 1, MC_BOOL), b));
}

static bool op_where(ctx *c, const node_t *n)
{
    VAL(cond, 0);
    VAL(a, 1);
    VAL(b, 2);
    return set_out(c, n, 0, sel(c, cond, a, b));
}

/* Elu-style activations, composed from minic's operators. */
static bool op_activation(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    const char *op = n->op_type;
    VAL(x, 0);
    mc_value zero = fscalar(c, x, 0), one = fscalar(c, x, 1), y;
    if (!strcmp(op, "LeakyRelu")) {
        double alpha = attr_f(n, "alpha", 0.01);
        y = mc_where(g, mc_lt(g, x, zero), mc_mul(g, x, fscalar(c, x, alpha)), x);
    } else if (!strcmp(op, "PRelu")) {
        VAL(slope, 1);
        y = mc_where(g, mc_lt(g, x, zero), mc_mul(g, x, slope), x);
    } else if (!strcmp(op, "Elu")) {
        double alpha = attr_f(n, "alpha", 1.0);
        y = mc_where(g, mc_gt(g, x, zero), x, mc_mul(g, mc_sub(g, mc_exp(g, x), one), fscalar(c, x, alpha)));
    } else if (!strcmp(op, "Selu")) {
        double alpha = attr_f(n, "alpha", 1.67326319217681884765625);
        double gamma = attr_f(n, "gamma", 1.05070102214813232421875);
        y = mc_where(g, mc_gt(g, x, zero), x, mc_mul(g, mc_sub(g, mc_exp(g, x), one), fscalar(c, x, alpha)));
        y = mc_mul(g, y, fscalar(c, x, gamma));
    } else if (!strcmp(op, "Celu")) {
        double alpha = attr_f(n, "alpha", 1.0);
        mc_value e = mc_mul(g, mc_sub(g, mc_exp(g, mc_div(g, x, fscalar(c, x, alpha))), one), fscalar(c, x, alpha));
        y = mc_add(g, mc_maximum(g, x, zero), mc_minimum(g, e, zero));
    } else if (!strcmp(op, "ThresholdedRelu")) {
        double alpha = attr_f(n, "alpha", 1.0);
        y = mc_where(g, mc_gt(g, x, fscalar(c, x, alpha)), x, zero);
    } else if (!strcmp(op, "HardSigmoid") || !strcmp(op, "HardSwish")) {
        bool swish = !strcmp(op, "HardSwish");
        double alpha = swish ? 1.0 / 6 : attr_f(n, "alpha", 0.2), beta = swish ? 0.5 : attr_f(n, "beta", 0.5);
        y = mc_add(g, mc_mul(g, x, fscalar(c, x, alpha)), fscalar(c, x, beta));
        y = mc_maximum(g, mc_minimum(g, y, one), zero);
        if (swish)
            y = mc_mul(g, x, y);
    } else if (!strcmp(op, "Softsign")) {
        y = mc_div(g, x, mc_add(g, mc_abs(g, x), one));
    } else if (!strcmp(op, "Softplus") || !strcmp(op, "Mish")) {
        /* log(1 + exp(x)) = max(x, 0) + log(1 + exp(-|x|)), without overflow */
        mc_value sp = mc_add(g, mc_maximum(g, x, zero), mc_log(g, mc_add(g, mc_exp(g, mc_neg(g, mc_abs(g, x))), one)));
        y = !strcmp(op, "Mish") ? mc_mul(g, x, mc_tanh(g, sp)) : sp;
    } else if (!strcmp(op, "Shrink")) {
        double lambd = attr_f(n, "lambd", 0.5), bias = attr_f(n, "bias", 0.0);
        y = mc_where(g, mc_lt(g, x, fscalar(c, x, -lambd)), mc_add(g, x, fscalar(c, x, bias)),
                     mc_where(g, mc_gt(g, x, fscalar(c, x, lambd)), mc_sub(g, x, fscalar(c, x, bias)), zero));
    } else if (!strcmp(op, "Tan")) {
        y = mc_div(g, mc_sin(g, x), mc_cos(g, x));
    } else if (!strcmp(op, "Sinh") || !strcmp(op, "Cosh")) {
        mc_value a = mc_exp(g, x), b = mc_exp(g, mc_neg(g, x));
        y = mc_mul(g, !strcmp(op, "Sinh") ? mc_sub(g, a, b) : mc_add(g, a, b), fscalar(c, x, 0.5));
    } else if (!strcmp(op, "Asinh")) {
        y = mc_log(g, mc_add(g, x, mc_sqrt(g, mc_add(g, mc_mul(g, x, x), one))));
    } else if (!strcmp(op, "Acosh")) {
        y = mc_log(g, mc_add(g, x, mc_sqrt(g, mc_sub(g, mc_mul(g, x, x), one))));
    } else if (!strcmp(op, "Atanh")) {
        y = mc_mul(g, mc_log(g, mc_div(g, mc_add(g, one, x), mc_sub(g, one, x))), fscalar(c, x, 0.5));
    } else if (!strcmp(op, "Sign")) {
        y = sel(c, mc_gt(g, x, zero), one, sel(c, mc_lt(g, x, zero), fscalar(c, x, -1), zero));
        if (vnode(c, x)->dtype != MC_I32)
            y = mc_where(g, mc_ne(g, x, x), x, y);
    } else if (!strcmp(op, "IsNaN")) {
        y = mc_ne(g, x, x);
    } else if (!strcmp(op, "IsInf")) {
        bool pos = attr_i(n, "detect_positive", 1) != 0, neg = attr_i(n, "detect_negative", 1) != 0;
        mc_value inf = fscalar(c, x, INFINITY);
        if (pos && neg)
            y = mc_eq(g, mc_abs(g, x), inf);
        else if (pos)
            y = mc_eq(g, x, inf);
        else if (neg)
            y = mc_eq(g, x, fscalar(c, x, -INFINITY));
        else
            y = mc_lt(g, x, fscalar(c, x, -INFINITY)); /* never */
    } else {
        return why(c, "internal: no activation");
    }
    return set_out(c, n, 0, y);
}

/* ---- shape operators ------------------------------------------------------------------------ */

/* Output 0 is input 0 with a new shape: a constant stays one. */
static bool reshape_to(ctx *c, const node_t *n, int rank, const int64_t *dims)
{
    htensor *a = in_const(c, n, 0);
    if (a && a->n <= MAX_FOLD_ELEMS)
        return set_const(c, n, 0, fold_copy(c, a, a->elem, rank, dims));
    VAL(x, 0);
    for (int d = 0; d < rank; d++)
        if (dims[d] == 0)
            return why(c, "a zero-size result (minic has no zero-size dimensions)");
    return set_out(c, n, 0, mc_reshape(c->g, x, dims, rank));
}

static bool in_type(ctx *c, const node_t *n, size_t k, int *elem, int *rank, int64_t *dims)
{
    *elem = 0;
    *rank = 0;
    slot *s = in_slot(c, n, k);
    if (!s)
        return why(c, "input %zu is missing", k);
    if (s->state == S_POISON)
        return false;
    slot_type(c, s, elem, rank, dims);
    return true;
}

static int64_t numel(int rank, const int64_t *dims)
{
    int64_t p = 1;
    for (int d = 0; d < rank; d++)
        p *= dims[d];
    return p;
}

static bool op_reshape(ctx *c, const node_t *n)
{
    int elem, rank;
    int64_t dims[MC_MAX_RANK], spec[MC_MAX_RANK], out[MC_MAX_RANK];
    if (!in_type(c, n, 0, &elem, &rank, dims))
        return false;
    int ns;
    bool given;
    if (!ints_of(c, n, 1, "shape", spec, &ns, MC_MAX_RANK, &given))
        return false;
    if (!given)
        return why(c, "no shape");
    bool allowzero = attr_i(n, "allowzero", 0) != 0;
    int infer = -1;
    int64_t known = 1, total = numel(rank, dims);
    for (int k = 0; k < ns; k++) {
        if (spec[k] == 0 && !allowzero) {
            if (k >= rank)
                return why(c, "shape entry %d is 0 (copy), but the input has rank %d", k, rank);
            out[k] = dims[k];
        } else if (spec[k] == -1) {
            if (infer >= 0)
                return why(c, "two -1 entries in the shape");
            infer = k;
            out[k] = 1;
        } else if (spec[k] < 0) {
            return why(c, "shape entry %lld", (long long)spec[k]);
        } else {
            out[k] = spec[k];
        }
        if (k != infer && mc_mul_overflows(known, out[k], &known))
            return why(c, "the shape's size overflows");
    }
    if (infer >= 0) {
        if (known == 0 || total % known)
            return why(c, "cannot infer -1: %lld elements into blocks of %lld", (long long)total, (long long)known);
        out[infer] = total / known;
    } else if (known != total) {
        return why(c, "cannot reshape %lld elements to %lld", (long long)total, (long long)known);
    }
    return reshape_to(c, n, ns, out);
}

static bool op_flatten(ctx *c, const node_t *n)
{
    int elem, rank;
    int64_t dims[MC_MAX_RANK];
    if (!in_type(c, n, 0, &elem, &rank, dims))
        return false;
    int64_t axis = attr_i(n, "axis", 1);
    if (axis < -rank || axis > rank)
        return why(c, "axis %lld out of range for rank %d", (long long)axis, rank);
    if (axis < 0)
        axis += rank;
    int64_t out[2] = {numel((int)axis, dims), numel(rank - (int)axis, dims + axis)};
    return reshape_to(c, n, 2, out);
}

static bool op_squeeze(ctx *c, const node_t *n)
{
    int elem, rank;
    int64_t dims[MC_MAX_RANK], axes[MC_MAX_RANK], out[MC_MAX_RANK];
    if (!in_type(c, n, 0, &elem, &rank, dims))
        return false;
    int na;
    bool given;
    if (!ints_of(c, n, 1, "axes", axes, &na, MC_MAX_RANK, &given))
        return false;
    bool drop[MC_MAX_RANK] = {0};
    for (int k = 0; k < na; k++) {
        int a;
        if (!norm_axis(c, axes[k], rank, &a))
            return false;
        if (dims[a] != 1)
            return why(c, "cannot squeeze axis %d of size %lld", a, (long long)dims[a]);
        drop[a] = true;
    }
    int r = 0;
    for (int d = 0; d < rank; d++)
        if (!(given ? drop[d] : dims[d] == 1))
            out[r++] = dims[d];
    return reshape_to(c, n, r, out);
}

static bool op_unsqueeze(ctx *c, const node_t *n)
{
    int elem, rank;
    int64_t dims[MC_MAX_RANK], axes[MC_MAX_RANK], out[MC_MAX_RANK];
    if (!in_type(c, n, 0, &elem, &rank, dims))
        return false;
    int na;
    bool given;
    if (!ints_of(c, n, 1, "axes", axes, &na, MC_MAX_RANK, &given))
        return false;
    int r = rank + na;
    if (r > MC_MAX_RANK)
        return why(c, "a result of rank %d (at most %d)", r, MC_MAX_RANK);
    bool ins[MC_MAX_RANK] = {0};
    for (int k = 0; k < na; k++) {
        int a;
        if (!norm_axis(c, axes[k], r, &a))
            return false;
        if (ins[a])
            return why(c, "axis %d given twice", a);
        ins[a] = true;
    }
    for (int d = 0, s = 0; d < r; d++)
        out[d] = ins[d] ? 1 : dims[s++];
    return reshape_to(c, n, r, out);
}

static bool op_identity(ctx *c, const node_t *n)
{
    slot *s = in_slot(c, n, 0);
    if (!s)
        return why(c, "input 0 is missing");
    if (!strcmp(n->op_type, "Dropout")) {
        htensor *tm = in_const(c, n, 2);
        if (has_in(n, 2) && (!tm || (tm->n > 0 && hi(tm, 0))))
            return why(c, "training_mode (only inference is supported)");
        if (out_present(n, 1)) {
            int elem, rank;
            int64_t dims[MC_MAX_RANK];
            slot_type(c, s, &elem, &rank, dims);
            if (!set_out(c, n, 1, mc_full(c->g, dims, rank, 1, MC_BOOL)))
                return false;
        }
    }
    return set_slot(c, n, 0, s->state, s->v, s->c);
}

static bool op_transpose(ctx *c, const node_t *n)
{
    VAL(x, 0);
    const attr_t *a = attr(n, "perm");
    int perm[MC_MAX_RANK];
    int np = 0;
    if (a && a->n_ints) {
        if (a->n_ints > MC_MAX_RANK)
            return why(c, "perm has %zu entries", a->n_ints);
        for (size_t k = 0; k < a->n_ints; k++) {
            if (a->ints[k] < -MC_MAX_RANK || a->ints[k] >= MC_MAX_RANK)
                return why(c, "perm entry %lld", (long long)a->ints[k]);
            perm[k] = (int)a->ints[k];
        }
        np = (int)a->n_ints;
    }
    return set_out(c, n, 0, mc_transpose(c->g, x, np ? perm : NULL, np));
}

static bool op_concat(ctx *c, const node_t *n)
{
    if (n->n_input < 1 || n->n_input > 4096)
        return why(c, "%zu operands", n->n_input);
    int64_t axis = attr_i(n, "axis", 0);
    if (all_const(c, n)) {
        htensor *first = in_const(c, n, 0);
        if (!first)
            return why(c, "input 0 is missing");
        int r = first->rank, ax;
        if (r < 1) /* ONNX's Concat needs rank >= 1; a scalar has no axis to join along */
            return why(c, "operands of rank 0");
        if (!norm_axis(c, axis, r, &ax))
            return false;
        int64_t dims[MC_MAX_RANK];
        memcpy(dims, first->dims, sizeof dims);
        dims[ax] = 0;
        for (size_t k = 0; k < n->n_input; k++) {
            htensor *t = in_const(c, n, k);
            if (!t)
                continue;
            if (t->rank != r)
                return why(c, "operands of ranks %d and %d", r, t->rank);
            for (int d = 0; d < r; d++)
                if (d != ax && t->dims[d] != first->dims[d])
                    return why(c, "operand shapes differ at axis %d", d);
            dims[ax] += t->dims[ax];
        }
        int elem = first->elem;
        htensor *z = new_fold(c, elem, r, dims);
        if (!z)
            return false;
        int64_t outer = numel(ax, dims), pos = 0;
        for (int64_t o = 0; o < outer; o++)
            for (size_t k = 0; k < n->n_input; k++) {
                htensor *t = in_const(c, n, k);
                if (!t)
                    continue;
                int64_t inner = numel(r - ax, t->dims + ax);
                for (int64_t e = 0; e < inner; e++, pos++) {
                    if (z->i)
                        z->i[pos] = hi(t, o * inner + e);
                    else
                        z->f[pos] = hf(t, o * inner + e);
                }
            }
        return set_const(c, n, 0, z);
    }
    mc_value xs[4096];
    int nx = 0;
    for (size_t k = 0; k < n->n_input; k++) {
        if (!has_in(n, k))
            continue;
        VAL(x, k);
        xs[nx++] = x;
    }
    int ax;
    if (!norm_axis(c, axis, vnode(c, xs[0])->rank, &ax))
        return false;
    return set_out(c, n, 0, nx == 1 ? xs[0] : mc_concat(c->g, xs, nx, ax));
}

/* Python-style bounds of a step-1 slice over a dimension of size dim */
static void clamp_range(int64_t dim, int64_t *start, int64_t *end)
{
    int64_t s = *start, e = *end;
    if (s < 0)
        s = s < -dim ? 0 : s + dim;
    if (s > dim)
        s = dim;
    if (e < 0)
        e = e < -dim ? 0 : e + dim;
    if (e > dim)
        e = dim;
    *start = s;
    *end = e;
}

static bool op_split(ctx *c, const node_t *n)
{
    VAL(x, 0);
    const mc_node *xn = vnode(c, x);
    int ax;
    if (!norm_axis(c, attr_i(n, "axis", 0), xn->rank, &ax))
        return false;
    int64_t sizes[64];
    int ns;
    bool given;
    if (n->n_output > 64)
        return why(c, "%zu outputs (at most 64)", n->n_output);
    if (!ints_of(c, n, 1, "split", sizes, &ns, 64, &given))
        return false;
    int64_t dim = xn->shape[ax];
    int nout = (int)n->n_output;
    if (!given) {
        if (nout < 1)
            return why(c, "no outputs");
        int64_t part = (dim + nout - 1) / nout;
        for (int k = 0; k < nout; k++)
            sizes[k] = k < nout - 1 ? part : dim - part * (nout - 1);
        ns = nout;
    }
    if (ns != nout)
        return why(c, "%d split sizes for %d outputs", ns, nout);
    int64_t start = 0;
    for (int k = 0; k < nout; k++) {
        if (sizes[k] <= 0 || sizes[k] > dim - start)
            return why(c, "split sizes do not fit axis %d of size %lld", ax, (long long)dim);
        if (!set_out(c, n, (size_t)k, mc_slice(c->g, x, ax, start, start + sizes[k])))
            return false;
        start += sizes[k];
    }
    if (start != dim)
        return why(c, "split sizes add up to %lld, not %lld", (long long)start, (long long)dim);
    return true;
}

/* a general strided slice of a constant: per axis start, step, count */
static htensor *fold_slice(ctx *c, const htensor *a, const int64_t *start, const int64_t *step, const int64_t *count)
{
    htensor *z = new_fold(c, a->elem, a->rank, count);
    if (!z)
        return NULL;
    for (int64_t k = 0; k < z->n; k++) {
        int64_t rem = k, src = 0, stride = 1;
        for (int d = a->rank - 1; d >= 0; d--) {
            int64_t coord = rem % count[d];
            rem /= count[d];
            src += (start[d] + coord * step[d]) * stride;
            stride *= a->dims[d];
        }
        if (z->i)
            z->i[k] = hi(a, src);
        else
            z->f[k] = hf(a, src);
    }
    return z;
}

static bool op_slice(ctx *c, const node_t *n)
{
    int elem, rank;
    int64_t dims[MC_MAX_RANK];
    if (!in_type(c, n, 0, &elem, &rank, dims))
        return false;
    int64_t starts[MC_MAX_RANK], ends[MC_MAX_RANK], axes[MC_MAX_RANK], steps[MC_MAX_RANK];
    int ns, ne, na, nst;
    bool gs, ge, ga, gst;
    if (!ints_of(c, n, 1, "starts", starts, &ns, MC_MAX_RANK, &gs) ||
        !ints_of(c, n, 2, "ends", ends, &ne, MC_MAX_RANK, &ge) ||
        !ints_of(c, n, 3, "axes", axes, &na, MC_MAX_RANK, &ga) ||
        !ints_of(c, n, 4, "steps", steps, &nst, MC_MAX_RANK, &gst))
        return false;
    if (!gs || !ge || ns != ne || (ga && na != ns) || (gst && nst != ns))
        return why(c, "starts, ends, axes and steps disagree");
    int64_t st[MC_MAX_RANK], sp[MC_MAX_RANK], cnt[MC_MAX_RANK];
    bool seen[MC_MAX_RANK] = {0};
    for (int d = 0; d < rank; d++)
        st[d] = 0, sp[d] = 1, cnt[d] = dims[d];
    for (int k = 0; k < ns; k++) {
        int ax;
        if (!norm_axis(c, ga ? axes[k] : k, rank, &ax))
            return false;
        if (seen[ax])
            return why(c, "axis %d sliced twice", ax);
        seen[ax] = true;
        int64_t step = gst ? steps[k] : 1, dim = dims[ax], s = starts[k], e = ends[k];
        if (step == 0)
            return why(c, "a step of 0");
        if (step > 0) {
            clamp_range(dim, &s, &e);
            cnt[ax] = e > s ? (e - s + step - 1) / step : 0;
        } else {
            /* Python: negative steps clamp to [-1, dim - 1] */
            s = s < 0 ? (s < -dim ? -1 : s + dim) : (s > dim - 1 ? dim - 1 : s);
            e = e < 0 ? (e < -dim ? -1 : e + dim) : (e > dim - 1 ? dim - 1 : e);
            cnt[ax] = s > e ? (s - e + (-step) - 1) / (-step) : 0;
        }
        st[ax] = s;
        sp[ax] = step;
    }
    htensor *a = in_const(c, n, 0);
    if (a && a->n <= MAX_FOLD_ELEMS)
        return set_const(c, n, 0, fold_slice(c, a, st, sp, cnt));
    VAL(x, 0);
    for (int d = 0; d < rank; d++) {
        if (cnt[d] == 0)
            return why(c, "an empty slice (minic has no zero-size dimensions)");
        if (sp[d] != 1)
            return why(c, "a slice with step %lld (minic's slice takes step 1)", (long long)sp[d]);
        if (cnt[d] != dims[d])
            x = mc_slice(c->g, x, d, st[d], st[d] + cnt[d]);
    }
    return set_out(c, n, 0, x);
}

static bool op_expand(ctx *c, const node_t *n)
{
    int elem, rank;
    int64_t dims[MC_MAX_RANK], spec[MC_MAX_RANK], out[MC_MAX_RANK];
    if (!in_type(c, n, 0, &elem, &rank, dims))
        return false;
    int ns;
    bool given;
    if (!ints_of(c, n, 1, "shape", spec, &ns, MC_MAX_RANK, &given))
        return false;
    int r;
    if (!broadcast(c, rank, dims, ns, spec, &r, out))
        return false;
    htensor *a = in_const(c, n, 0);
    if (a && numel(r, out) <= 4096) {
        htensor *z = new_fold(c, a->elem, r, out);
        if (!z)
            return false;
        for (int64_t k = 0; k < z->n; k++) {
            if (z->i)
                z->i[k] = hi(a, bidx(a, r, out, k));
            else
                z->f[k] = hf(a, bidx(a, r, out, k));
        }
        return set_const(c, n, 0, z);
    }
    VAL(x, 0);
    if (r == rank && !memcmp(out, dims, (size_t)r * sizeof *out))
        return set_out(c, n, 0, x);
    return set_out(c, n, 0, mc_expand(c->g, x, out, r));
}

static bool op_tile(ctx *c, const node_t *n)
{
    VAL(x, 0);
    int64_t reps[MC_MAX_RANK];
    int nr;
    bool given;
    if (!ints_of(c, n, 1, "repeats", reps, &nr, MC_MAX_RANK, &given))
        return false;
    if (nr != vnode(c, x)->rank)
        return why(c, "%d repeats for rank %d", nr, vnode(c, x)->rank);
    for (int d = 0; d < nr; d++) {
        if (reps[d] < 1 || reps[d] > 256)
            return why(c, "repeat count %lld (1..256 supported)", (long long)reps[d]);
        if (reps[d] > 1) {
            mc_value xs[256];
            for (int k = 0; k < reps[d]; k++)
                xs[k] = x;
            x = mc_concat(c->g, xs, (int)reps[d], d);
        }
    }
    return set_out(c, n, 0, x);
}

/* Gather with indices known only at run time, until minic has a gather: the rows picked by a
 * one-hot matrix product, y = x (moved so the gathered axis is last) @ onehot(idx)^T. Exact for
 * finite data (each sum is one product by 1 plus zeros); an infinity or NaN elsewhere in the
 * gathered axis poisons the sum (0 * inf). An index outside [-n, n) gives zeros. */
static bool gather_onehot(ctx *c, const node_t *n, int ax)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    VAL(idx, 1);
    const mc_node *xn = vnode(c, x), *in = vnode(c, idx);
    int rank = xn->rank, ki = in->rank;
    if (rank - 1 + ki > MC_MAX_RANK || rank + ki > MC_MAX_RANK)
        return why(c, "a result of rank %d", rank - 1 + ki);
    int64_t dim = xn->shape[ax], K = numel(ki, in->shape), R = numel(rank, xn->shape) / dim;
    if (dim > 65536 * 16 || K > 65536 || K * dim > ((int64_t)1 << 28))
        return why(c, "a run-time gather of %lld indices from %lld (minic has no gather yet)", (long long)K, (long long)dim);
    mc_dtype d = xn->dtype;
    if (d == MC_BOOL)
        return why(c, "a run-time gather of bools (minic has no gather yet)");
    int perm[MC_MAX_RANK], np = 0;
    for (int k = 0; k < rank; k++)
        if (k != ax)
            perm[np++] = k;
    perm[np++] = ax;
    mc_value xt = ax == rank - 1 ? x : mc_transpose(g, x, perm, rank);
    int64_t s2[2] = {R, dim}, kk[2] = {K, dim}, k1[2] = {K, 1};
    xt = mc_reshape(g, xt, s2, 2);
    if (d == MC_I32)
        xt = mc_cast(g, xt, MC_F32);
    if (in->dtype != MC_I32)
        idx = mc_cast(g, idx, MC_I32);
    mc_value dv = mc_scalar(g, (double)dim, MC_I32);
    idx = sel(c, mc_lt(g, idx, mc_scalar(g, 0, MC_I32)), mc_add(g, idx, dv), idx);
    mc_dtype fd = d == MC_I32 ? MC_F32 : d;
    mc_value hot = mc_cast(g, mc_eq(g, mc_iota(g, kk, 2, 1, MC_I32), mc_reshape(g, idx, k1, 2)), fd);
    mc_value y = mc_matmul(g, xt, mc_transpose(g, hot, NULL, 0)); /* [R, K] */
    if (d == MC_I32)
        y = mc_cast(g, y, MC_I32);
    /* [rest.., idx..] then the idx axes moved to where the gathered axis was */
    int64_t s3[MC_MAX_RANK];
    int r3 = 0;
    for (int k = 0; k < rank; k++)
        if (k != ax)
            s3[r3++] = xn->shape[k];
    for (int k = 0; k < ki; k++)
        s3[r3++] = in->shape[k];
    y = mc_reshape(g, y, s3, r3);
    int p3[MC_MAX_RANK], q = 0;
    for (int k = 0; k < ax; k++)
        p3[q++] = k;
    for (int k = 0; k < ki; k++)
        p3[q++] = rank - 1 + k;
    for (int k = ax; k < rank - 1; k++)
        p3[q++] = k;
    bool identity = true;
    for (int k = 0; k < r3; k++)
        identity &= p3[k] == k;
    return set_out(c, n, 0, identity || r3 == 0 ? y : mc_transpose(g, y, p3, r3));
}

static bool op_gather(ctx *c, const node_t *n)
{
    int elem, rank;
    int64_t dims[MC_MAX_RANK];
    if (!in_type(c, n, 0, &elem, &rank, dims))
        return false;
    if (rank == 0)
        return why(c, "a scalar data operand");
    htensor *idx = in_const(c, n, 1);
    int ax;
    if (!norm_axis(c, attr_i(n, "axis", 0), rank, &ax))
        return false;
    if (!idx)
        return gather_onehot(c, n, ax);
    int r = rank - 1 + idx->rank;
    if (r > MC_MAX_RANK)
        return why(c, "a result of rank %d", r);
    int64_t out[MC_MAX_RANK];
    int o = 0;
    for (int d = 0; d < ax; d++)
        out[o++] = dims[d];
    for (int d = 0; d < idx->rank; d++)
        out[o++] = idx->dims[d];
    for (int d = ax + 1; d < rank; d++)
        out[o++] = dims[d];
    for (int64_t k = 0; k < idx->n; k++) {
        int64_t i = hi(idx, k);
        if (i < -dims[ax] || i >= dims[ax])
            return why(c, "index %lld out of range for axis %d of size %lld", (long long)i, ax, (long long)dims[ax]);
    }
    htensor *a = in_const(c, n, 0);
    if (a && numel(r, out) <= MAX_FOLD_ELEMS) {
        htensor *z = new_fold(c, a->elem, r, out);
        if (!z)
            return false;
        int64_t outer = numel(ax, dims), inner = numel(rank - ax - 1, dims + ax + 1), pos = 0;
        for (int64_t p = 0; p < outer; p++)
            for (int64_t k = 0; k < idx->n; k++) {
                int64_t i = hi(idx, k);
                if (i < 0)
                    i += dims[ax];
                for (int64_t e = 0; e < inner; e++, pos++) {
                    int64_t src = (p * dims[ax] + i) * inner + e;
                    if (z->i)
                        z->i[pos] = hi(a, src);
                    else
                        z->f[pos] = hf(a, src);
                }
            }
        return set_const(c, n, 0, z);
    }
    if (idx->n > 256)
        return why(c, "%lld constant indices (minic has no gather yet; up to 256 become slices)", (long long)idx->n);
    VAL(x, 0);
    mc_value parts[256];
    for (int64_t k = 0; k < idx->n; k++) {
        int64_t i = hi(idx, k);
        if (i < 0)
            i += dims[ax];
        parts[k] = mc_slice(c->g, x, ax, i, i + 1);
    }
    mc_value y = idx->n == 1 ? parts[0] : mc_concat(c->g, parts, (int)idx->n, ax);
    if (y < 0)
        return set_out(c, n, 0, y);
    return set_out(c, n, 0, mc_reshape(c->g, y, out, r));
}

/* ---- constants and shapes ------------------------------------------------------------------- */

static htensor *ints_tensor(ctx *c, const int64_t *v, int64_t count, bool scalar)
{
    int64_t dims[1] = {count};
    htensor *t = new_fold(c, T_INT64, scalar ? 0 : 1, dims);
    if (t)
        for (int64_t k = 0; k < count; k++)
            t->i[k] = v[k];
    return t;
}

static bool op_shape(ctx *c, const node_t *n)
{
    int elem, rank;
    int64_t dims[MC_MAX_RANK];
    if (!in_type(c, n, 0, &elem, &rank, dims))
        return false;
    if (!strcmp(n->op_type, "Size")) {
        int64_t total = numel(rank, dims);
        return set_const(c, n, 0, ints_tensor(c, &total, 1, true));
    }
    int64_t s = attr_i(n, "start", 0), e = attr_i(n, "end", rank);
    clamp_range(rank, &s, &e);
    return set_const(c, n, 0, ints_tensor(c, dims + s, e > s ? e - s : 0, false));
}

static bool op_constant(ctx *c, const node_t *n)
{
    const attr_t *a;
    if ((a = attr(n, "value")) && a->t)
        return set_const(c, n, 0, load_tensor(c, a->t, false));
    if ((a = attr(n, "value_float")) && a->has_f) {
        htensor *t = new_fold(c, T_FLOAT, 0, NULL);
        if (t)
            t->f[0] = a->f;
        return set_const(c, n, 0, t);
    }
    if ((a = attr(n, "value_floats"))) {
        int64_t d[1] = {(int64_t)a->n_floats};
        htensor *t = new_fold(c, T_FLOAT, 1, d);
        if (t)
            for (size_t k = 0; k < a->n_floats; k++)
                t->f[k] = a->floats[k];
        return set_const(c, n, 0, t);
    }
    if ((a = attr(n, "value_int")) && a->has_i)
        return set_const(c, n, 0, ints_tensor(c, &a->i, 1, true));
    if ((a = attr(n, "value_ints")))
        return set_const(c, n, 0, ints_tensor(c, a->ints, (int64_t)a->n_ints, false));
    return why(c, "a constant that is not a tensor, float(s) or int(s) (sparse or string)");
}

static bool op_constant_of_shape(ctx *c, const node_t *n)
{
    int64_t dims[MC_MAX_RANK];
    int r;
    bool given;
    if (!ints_of(c, n, 0, "shape", dims, &r, MC_MAX_RANK, &given))
        return false;
    const attr_t *a = attr(n, "value");
    htensor *v = a && a->t ? load_tensor(c, a->t, false) : NULL;
    if (a && !v)
        return false;
    if (v && v->n != 1)
        return why(c, "a value of %lld elements (expected 1)", (long long)v->n);
    int elem = v ? v->elem : T_FLOAT;
    double x = v ? hf(v, 0) : 0;
    for (int d = 0; d < r; d++)
        if (dims[d] < 0)
            return why(c, "shape entry %lld", (long long)dims[d]);
    if (numel(r, dims) <= 4096) {
        htensor *t = new_fold(c, elem, r, dims);
        if (!t)
            return false;
        for (int64_t k = 0; k < t->n; k++) {
            if (t->i)
                t->i[k] = v ? hi(v, 0) : 0;
            else
                t->f[k] = x;
        }
        return set_const(c, n, 0, t);
    }
    mc_dtype d;
    if (!map_dtype(c, elem, &d))
        return false;
    return set_out(c, n, 0, mc_full(c->g, dims, r, x, d));
}

static bool op_range(ctx *c, const node_t *n)
{
    htensor *s = in_const(c, n, 0), *l = in_const(c, n, 1), *d = in_const(c, n, 2);
    if (!s || !l || !d || s->n != 1 || l->n != 1 || d->n != 1)
        return why(c, "start, limit and delta must be scalar constants");
    double start = hf(s, 0), limit = hf(l, 0), delta = hf(d, 0);
    if (delta == 0 || !isfinite(start) || !isfinite(limit) || !isfinite(delta))
        return why(c, "a range with delta 0 or a non-finite bound");
    double cnt = ceil((limit - start) / delta);
    if (cnt < 0)
        cnt = 0;
    if (cnt > MAX_FOLD_ELEMS)
        return why(c, "a range of %.0f elements", cnt);
    int64_t dims[1] = {(int64_t)cnt};
    htensor *t = new_fold(c, s->elem, 1, dims);
    if (!t)
        return false;
    for (int64_t k = 0; k < t->n; k++) {
        if (t->i)
            t->i[k] = (int64_t)((uint64_t)hi(s, 0) + (uint64_t)k * (uint64_t)hi(d, 0));
        else
            t->f[k] = start + (double)k * delta;
    }
    return set_const(c, n, 0, t);
}

static bool op_cast(ctx *c, const node_t *n)
{
    int to = (int)attr_i(n, "to", 0);
    htensor *a = in_const(c, n, 0);
    if (a && a->n <= MAX_FOLD_ELEMS && (elem_is_int(to) || elem_is_float(to))) {
        htensor *z = new_fold(c, to, a->rank, a->dims);
        if (!z)
            return false;
        for (int64_t k = 0; k < z->n; k++) {
            double x = hf(a, k);
            if (to == T_BOOL)
                z->i[k] = x != 0;
            else if (z->i)
                z->i[k] = elem_is_int(a->elem) ? hi(a, k) : (isnan(x) ? 0 : hi(a, k));
            else if (to == T_FLOAT)
                z->f[k] = mc_f32_from_double(x);
            else if (to == T_FLOAT16)
                z->f[k] = mc_round_to_dtype(x, MC_F16);
            else if (to == T_BFLOAT16)
                z->f[k] = mc_round_to_dtype(x, MC_BF16);
            else
                z->f[k] = x;
        }
        return set_const(c, n, 0, z);
    }
    mc_dtype d;
    if (!map_dtype(c, to, &d))
        return false;
    VAL(x, 0);
    if (vnode(c, x)->dtype == d)
        return set_out(c, n, 0, x);
    return set_out(c, n, 0, mc_cast(c->g, x, d));
}

/* ---- linear algebra and normalization ------------------------------------------------------- */

static bool op_matmul(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(a, 0);
    VAL(b, 1);
    const mc_node *an = vnode(c, a), *bn = vnode(c, b);
    int ra = an->rank, rb = bn->rank;
    if (ra == 0 || rb == 0)
        return why(c, "a scalar operand");
    if (ra == 1) {
        int64_t s[2] = {1, an->shape[0]};
        a = mc_reshape(g, a, s, 2);
    }
    if (rb == 1) {
        int64_t s[2] = {bn->shape[0], 1};
        b = mc_reshape(g, b, s, 2);
    }
    mc_value y = mc_matmul(g, a, b);
    if (y >= 0 && (ra == 1 || rb == 1)) {
        const mc_node *yn = vnode(c, y);
        int64_t s[MC_MAX_RANK];
        int r = 0;
        for (int d = 0; d < yn->rank - 2; d++)
            s[r++] = yn->shape[d];
        if (ra != 1)
            s[r++] = yn->shape[yn->rank - 2];
        if (rb != 1)
            s[r++] = yn->shape[yn->rank - 1];
        y = mc_reshape(g, y, s, r);
    }
    return set_out(c, n, 0, y);
}

static bool op_gemm(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(a, 0);
    VAL(b, 1);
    if (attr_i(n, "transA", 0))
        a = mc_transpose(g, a, NULL, 0);
    if (attr_i(n, "transB", 0))
        b = mc_transpose(g, b, NULL, 0);
    double alpha = attr_f(n, "alpha", 1.0), beta = attr_f(n, "beta", 1.0);
    mc_value y = mc_matmul(g, a, b);
    if (y >= 0 && alpha != 1.0)
        y = mc_mul(g, y, fscalar(c, y, alpha));
    if (has_in(n, 2) && beta != 0.0) {
        VAL(cc, 2);
        if (beta != 1.0)
            cc = mc_mul(g, cc, fscalar(c, cc, beta));
        y = mc_add(g, y, cc);
    }
    return set_out(c, n, 0, y);
}

static bool op_softmax(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    bool log = !strcmp(n->op_type, "LogSoftmax");
    VAL(x, 0);
    const mc_node *xn = vnode(c, x);
    int rank = xn->rank, ax;
    if (!norm_axis(c, attr_i(n, "axis", c->opset >= 13 ? -1 : 1), rank, &ax))
        return false;
    if (c->opset >= 13)
        return set_out(c, n, 0, log ? mc_log_softmax(g, x, ax) : mc_softmax(g, x, ax));
    /* before opset 13: the input is seen as 2-D, [prod(:axis), prod(axis:)] */
    int64_t s2[2] = {numel(ax, xn->shape), numel(rank - ax, xn->shape + ax)};
    int64_t back[MC_MAX_RANK];
    memcpy(back, xn->shape, sizeof back);
    mc_value y = mc_reshape(g, x, s2, 2);
    y = log ? mc_log_softmax(g, y, 1) : mc_softmax(g, y, 1);
    return set_out(c, n, 0, mc_reshape(g, y, back, rank));
}

/* mean and variance over the axes from ax on, keepdim */
static bool op_layernorm(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    VAL(w, 1);
    mc_value b = MC_NONE;
    if (has_in(n, 2)) {
        b = in_value(c, n, 2);
        if (b < 0)
            return false;
    }
    const mc_node *xn = vnode(c, x);
    int rank = xn->rank, ax;
    if (!norm_axis(c, attr_i(n, "axis", -1), rank, &ax))
        return false;
    double eps = attr_f(n, "epsilon", 1e-5);
    const mc_node *wn = vnode(c, w);
    bool simple = ax == rank - 1 && wn->rank == 1 && wn->shape[0] == xn->shape[rank - 1] &&
                  (b == MC_NONE || (vnode(c, b)->rank == 1 && vnode(c, b)->shape[0] == wn->shape[0])) &&
                  !out_present(n, 1) && !out_present(n, 2);
    if (simple) {
        if (b == MC_NONE)
            b = mc_full(g, wn->shape, 1, 0, wn->dtype);
        return set_out(c, n, 0, mc_layernorm(g, x, w, b, eps));
    }
    int axes[MC_MAX_RANK], na = 0;
    for (int d = ax; d < rank; d++)
        axes[na++] = d;
    mc_value mean = mc_mean(g, x, axes, na, true);
    mc_value dx = mc_sub(g, x, mean);
    mc_value var = mc_mean(g, mc_mul(g, dx, dx), axes, na, true);
    mc_value inv = mc_rsqrt(g, mc_add(g, var, fscalar(c, x, eps)));
    mc_value y = mc_mul(g, mc_mul(g, dx, inv), w);
    if (b != MC_NONE)
        y = mc_add(g, y, b);
    return set_out(c, n, 0, y) && (!out_present(n, 1) || set_out(c, n, 1, mean)) &&
           (!out_present(n, 2) || set_out(c, n, 2, inv));
}

static bool op_batchnorm(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    if (attr_i(n, "training_mode", 0) || out_present(n, 1) || out_present(n, 2))
        return why(c, "training mode (only inference is supported)");
    VAL(x, 0);
    VAL(scale, 1);
    VAL(bias, 2);
    VAL(mean, 3);
    VAL(var, 4);
    const mc_node *xn = vnode(c, x);
    if (xn->rank < 2)
        return why(c, "an input of rank %d", xn->rank);
    /* per-channel vectors as [C, 1, .., 1] */
    int64_t s[MC_MAX_RANK];
    int r = xn->rank - 1;
    s[0] = xn->shape[1];
    for (int d = 1; d < r; d++)
        s[d] = 1;
    mc_value v[4] = {scale, bias, mean, var};
    for (int k = 0; k < 4; k++)
        v[k] = mc_reshape(g, v[k], s, r);
    double eps = attr_f(n, "epsilon", 1e-5);
    mc_value inv = mc_rsqrt(g, mc_add(g, v[3], fscalar(c, x, eps)));
    mc_value y = mc_add(g, mc_mul(g, mc_mul(g, mc_sub(g, x, v[2]), inv), v[0]), v[1]);
    return set_out(c, n, 0, y);
}

static bool op_reduce(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    const char *op = n->op_type;
    VAL(x, 0);
    int rank = vnode(c, x)->rank;
    int64_t axes64[MC_MAX_RANK];
    int na;
    bool given;
    if (!strncmp(op, "Global", 6)) {
        if (rank < 3)
            return why(c, "an input of rank %d (expected N, C, spatial..)", rank);
        na = rank - 2;
        for (int d = 0; d < na; d++)
            axes64[d] = d + 2;
        given = true;
    } else if (!ints_of(c, n, 1, "axes", axes64, &na, MC_MAX_RANK, &given)) {
        return false;
    }
    bool keep = attr_i(n, "keepdims", 1) != 0 || !strncmp(op, "Global", 6);
    if (given && na == 0)
        given = false;
    if (!given && attr_i(n, "noop_with_empty_axes", 0))
        return set_out(c, n, 0, x);
    int axes[MC_MAX_RANK];
    for (int k = 0; k < na; k++)
        if (!norm_axis(c, axes64[k], rank, &axes[k]))
            return false;
    const int *ax = given ? axes : NULL;
    int nax = given ? na : 0;
    if (rank == 0)
        return set_out(c, n, 0, x);
    mc_value y;
    if (!strcmp(op, "ReduceSum"))
        y = mc_sum(g, x, ax, nax, keep);
    else if (!strcmp(op, "ReduceMean") || !strcmp(op, "GlobalAveragePool"))
        y = mc_mean(g, x, ax, nax, keep);
    else if (!strcmp(op, "ReduceMax") || !strcmp(op, "GlobalMaxPool"))
        y = mc_max(g, x, ax, nax, keep);
    else if (!strcmp(op, "ReduceMin"))
        y = mc_min(g, x, ax, nax, keep);
    else if (!strcmp(op, "ReduceSumSquare"))
        y = mc_sum(g, mc_mul(g, x, x), ax, nax, keep);
    else if (!strcmp(op, "ReduceL1"))
        y = mc_sum(g, mc_abs(g, x), ax, nax, keep);
    else if (!strcmp(op, "ReduceL2"))
        y = mc_sqrt(g, mc_sum(g, mc_mul(g, x, x), ax, nax, keep));
    else if (!strcmp(op, "ReduceLogSum"))
        y = mc_log(g, mc_sum(g, x, ax, nax, keep));
    else if (!strcmp(op, "ReduceLogSumExp"))
        y = mc_log(g, mc_sum(g, mc_exp(g, x), ax, nax, keep));
    else
        return why(c, "internal: no reduction");
    return set_out(c, n, 0, y);
}

static bool op_clip(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    mc_value lo = MC_NONE, hi_ = MC_NONE;
    if (c->opset < 11) {
        const attr_t *a = attr(n, "min"), *b = attr(n, "max");
        if (a && a->has_f)
            lo = fscalar(c, x, a->f);
        if (b && b->has_f)
            hi_ = fscalar(c, x, b->f);
    } else {
        if (has_in(n, 1) && (lo = in_value(c, n, 1)) < 0)
            return false;
        if (has_in(n, 2) && (hi_ = in_value(c, n, 2)) < 0)
            return false;
    }
    mc_value y = x;
    if (lo != MC_NONE)
        y = mc_maximum(g, y, lo);
    if (hi_ != MC_NONE)
        y = mc_minimum(g, y, hi_);
    return set_out(c, n, 0, y);
}

static bool op_trilu(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    const mc_node *xn = vnode(c, x);
    if (xn->rank < 2)
        return why(c, "an input of rank %d", xn->rank);
    int64_t k = 0;
    if (has_in(n, 1)) {
        htensor *t = in_const(c, n, 1);
        if (!t || t->n != 1)
            return why(c, "k must be a scalar constant");
        k = hi(t, 0);
    }
    int64_t s[2] = {xn->shape[xn->rank - 2], xn->shape[xn->rank - 1]};
    if (k < -s[0] - s[1] || k > s[0] + s[1])
        k = k < 0 ? -s[0] - s[1] : s[0] + s[1];
    mc_value row = mc_iota(g, s, 2, 0, MC_I32), col = mc_iota(g, s, 2, 1, MC_I32);
    mc_value diff = mc_sub(g, col, row), kk = mc_scalar(g, (double)k, MC_I32);
    mc_value keep = attr_i(n, "upper", 1) ? mc_ge(g, diff, kk) : mc_le(g, diff, kk);
    return set_out(c, n, 0, sel(c, keep, x, mc_scalar(g, 0, xn->dtype)));
}

static bool op_cast_like(ctx *c, const node_t *n)
{
    int elem, rank;
    int64_t dims[MC_MAX_RANK];
    if (!in_type(c, n, 1, &elem, &rank, dims))
        return false;
    mc_dtype d;
    if (!map_dtype(c, elem, &d))
        return false;
    VAL(x, 0);
    return set_out(c, n, 0, vnode(c, x)->dtype == d ? x : mc_cast(c->g, x, d));
}

static bool op_eye_like(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    int elem, rank;
    int64_t dims[MC_MAX_RANK];
    if (!in_type(c, n, 0, &elem, &rank, dims))
        return false;
    if (rank != 2)
        return why(c, "an input of rank %d (expected 2)", rank);
    mc_dtype d;
    if (!map_dtype(c, (int)attr_i(n, "dtype", elem), &d))
        return false;
    int64_t k = attr_i(n, "k", 0);
    if (k < -dims[0] - dims[1] || k > dims[0] + dims[1])
        k = k < 0 ? -dims[0] - dims[1] : dims[0] + dims[1];
    mc_value diff = mc_sub(g, mc_iota(g, dims, 2, 1, MC_I32), mc_iota(g, dims, 2, 0, MC_I32));
    return set_out(c, n, 0, mc_cast(g, mc_eq(g, diff, mc_scalar(g, (double)k, MC_I32)), d));
}

static bool op_instance_norm(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    VAL(scale, 1);
    VAL(bias, 2);
    const mc_node *xn = vnode(c, x);
    int rank = xn->rank;
    if (rank < 3)
        return why(c, "an input of rank %d", rank);
    int axes[MC_MAX_RANK], na = 0;
    for (int d = 2; d < rank; d++)
        axes[na++] = d;
    int64_t s[MC_MAX_RANK];
    s[0] = xn->shape[1];
    for (int d = 1; d < rank - 1; d++)
        s[d] = 1;
    mc_value mean = mc_mean(g, x, axes, na, true);
    mc_value dx = mc_sub(g, x, mean);
    mc_value var = mc_mean(g, mc_mul(g, dx, dx), axes, na, true);
    mc_value y = mc_mul(g, dx, mc_rsqrt(g, mc_add(g, var, fscalar(c, x, attr_f(n, "epsilon", 1e-5)))));
    y = mc_add(g, mc_mul(g, y, mc_reshape(g, scale, s, rank - 1)), mc_reshape(g, bias, s, rank - 1));
    return set_out(c, n, 0, y);
}

static bool op_depth_space(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    const mc_node *xn = vnode(c, x);
    if (xn->rank != 4)
        return why(c, "an input of rank %d (expected 4)", xn->rank);
    int64_t b = attr_i(n, "blocksize", 0), N = xn->shape[0], C = xn->shape[1], H = xn->shape[2], W = xn->shape[3];
    if (b < 1 || b > 1024)
        return why(c, "blocksize %lld", (long long)b);
    if (!strcmp(n->op_type, "SpaceToDepth")) {
        if (H % b || W % b)
            return why(c, "height and width not multiples of the block size");
        int64_t s1[6] = {N, C, H / b, b, W / b, b}, s2[4] = {N, C * b * b, H / b, W / b};
        int perm[6] = {0, 3, 5, 1, 2, 4};
        return set_out(c, n, 0, mc_reshape(g, mc_transpose(g, mc_reshape(g, x, s1, 6), perm, 6), s2, 4));
    }
    if (C % (b * b))
        return why(c, "channels not a multiple of blocksize^2");
    bool crd = attr_is(n, "mode", "DCR", "CRD");
    int64_t s1d[6] = {N, b, b, C / (b * b), H, W}, s1c[6] = {N, C / (b * b), b, b, H, W};
    int pd[6] = {0, 3, 4, 1, 5, 2}, pc[6] = {0, 1, 4, 2, 5, 3};
    int64_t s2[4] = {N, C / (b * b), H * b, W * b};
    return set_out(c, n, 0, mc_reshape(g, mc_transpose(g, mc_reshape(g, x, crd ? s1c : s1d, 6), crd ? pc : pd, 6), s2, 4));
}

/* NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: the target picks its class through a
 * one-hot mask (iota == target) instead of a gather. */
static bool op_loss(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    bool sce = !strcmp(n->op_type, "SoftmaxCrossEntropyLoss");
    VAL(x, 0);
    VAL(target, 1);
    const mc_node *xn = vnode(c, x), *tn = vnode(c, target);
    int rank = xn->rank;
    if (rank < 2 || tn->rank != rank - 1 || tn->dtype != MC_I32)
        return why(c, "an input of rank %d with a target of rank %d", rank, tn->rank);
    mc_value lp = sce ? mc_log_softmax(g, x, 1) : x;
    int64_t ts[MC_MAX_RANK];
    ts[0] = tn->shape[0];
    ts[1] = 1;
    for (int d = 1; d < tn->rank; d++)
        ts[d + 1] = tn->shape[d];
    mc_value t1 = mc_reshape(g, target, ts, rank);
    mc_value mask = mc_cast(g, mc_eq(g, mc_iota(g, xn->shape, rank, 1, MC_I32), t1), xn->dtype);
    if (has_in(n, 2)) {
        VAL(w, 2);
        int64_t ws[MC_MAX_RANK];
        for (int d = 0; d < rank; d++)
            ws[d] = d == 1 ? xn->shape[1] : 1;
        mask = mc_mul(g, mask, mc_reshape(g, w, ws, rank));
    }
    const attr_t *ig = attr(n, "ignore_index");
    if (ig && ig->has_i) {
        if (ig->i < INT32_MIN || ig->i > INT32_MAX)
            return why(c, "ignore_index %lld outside i32", (long long)ig->i);
        mask = mc_mul(g, mask, mc_cast(g, mc_ne(g, t1, mc_scalar(g, (double)ig->i, MC_I32)), xn->dtype));
    }
    int one_axis[1] = {1};
    mc_value loss = mc_neg(g, mc_sum(g, mc_mul(g, lp, mask), one_axis, 1, false));
    mc_value y;
    if (attr_is(n, "reduction", "mean", "none"))
        y = loss;
    else if (attr_is(n, "reduction", "mean", "sum"))
        y = mc_sum(g, loss, NULL, 0, false);
    else if (attr_is(n, "reduction", "mean", "mean"))
        y = mc_div(g, mc_sum(g, loss, NULL, 0, false), mc_sum(g, mask, NULL, 0, false));
    else
        return why(c, "an unknown reduction");
    return set_out(c, n, 0, y) && (!sce || !out_present(n, 1) || set_out(c, n, 1, lp));
}

/* floor(x) until minic has one: t = trunc(x) through i32, minus one where that rounded up. Exact:
 * a float of magnitude 2^23 or more (and inf, NaN) is already an integer and is kept. */
static mc_value floor_of(ctx *c, mc_value x)
{
    mc_graph *g = c->g;
    mc_dtype d = vnode(c, x)->dtype;
    mc_value xf = d == MC_F32 ? x : mc_cast(g, x, MC_F32);
    mc_value t = mc_cast(g, mc_cast(g, xf, MC_I32), MC_F32);
    mc_value fl = mc_sub(g, t, mc_cast(g, mc_lt(g, xf, t), MC_F32));
    mc_value zero = mc_scalar(g, 0, MC_F32);
    fl = mc_where(g, mc_eq(g, fl, zero), mc_mul(g, xf, zero), fl); /* -0.0 stays -0.0 */
    mc_value y = mc_where(g, mc_lt(g, mc_abs(g, xf), mc_scalar(g, 8388608.0, MC_F32)), fl, xf);
    return d == MC_F32 ? y : mc_cast(g, y, d);
}

static bool op_mod(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    VAL(y, 1);
    bool fmod = attr_i(n, "fmod", 0) != 0;
    mc_dtype d = vnode(c, x)->dtype;
    if (d != MC_I32) {
        if (!fmod)
            return why(c, "a float Mod needs fmod=1");
        /* x - trunc(x / y) * y, trunc(q) = sign(q) floor(|q|) exactly (floor_of) */
        mc_value q = mc_div(g, x, y);
        mc_value tq = mc_where(g, mc_lt(g, q, fscalar(c, x, 0)), mc_neg(g, floor_of(c, mc_neg(g, q))), floor_of(c, q));
        return set_out(c, n, 0, mc_sub(g, x, mc_mul(g, tq, y)));
    }
    mc_value r = mc_sub(g, x, mc_mul(g, mc_div(g, x, y), y)); /* C's %: the sign of x */
    if (!fmod) {                                               /* Python's: the sign of y */
        mc_value zero = mc_scalar(g, 0, MC_I32);
        mc_value fix = mc_where(g, mc_ne(g, r, zero), mc_ne(g, mc_lt(g, r, zero), mc_lt(g, y, zero)),
                                mc_scalar(g, 0, MC_BOOL));
        r = sel(c, fix, mc_add(g, r, y), r);
    }
    return set_out(c, n, 0, r);
}

static bool op_reduce_prod(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    const mc_node *xn = vnode(c, x);
    int rank = xn->rank;
    int64_t axes64[MC_MAX_RANK], shape[MC_MAX_RANK];
    int na;
    bool given, red[MC_MAX_RANK] = {0};
    if (!ints_of(c, n, 1, "axes", axes64, &na, MC_MAX_RANK, &given))
        return false;
    if (given && na == 0 && attr_i(n, "noop_with_empty_axes", 0))
        return set_out(c, n, 0, x);
    for (int k = 0; k < na; k++) {
        int a;
        if (!norm_axis(c, axes64[k], rank, &a))
            return false;
        red[a] = true;
    }
    memcpy(shape, xn->shape, sizeof shape);
    int r = 0;
    int64_t out[MC_MAX_RANK];
    for (int d = 0; d < rank; d++) {
        if (na && !red[d]) {
            out[r++] = shape[d];
            continue;
        }
        if (shape[d] > 256)
            return why(c, "a product over an axis of %lld (up to 256 supported)", (long long)shape[d]);
        mc_value p = mc_slice(g, x, d, 0, 1);
        for (int64_t k = 1; k < shape[d]; k++)
            p = mc_mul(g, p, mc_slice(g, x, d, k, k + 1));
        x = p;
        if (attr_i(n, "keepdims", 1))
            out[r++] = 1;
    }
    if (x < 0)
        return set_out(c, n, 0, x);
    return set_out(c, n, 0, r == rank ? x : mc_reshape(g, x, out, r));
}

static bool op_onehot(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(idx, 0);
    htensor *depth = in_const(c, n, 1), *values = in_const(c, n, 2);
    if (!depth || depth->n != 1 || !values || values->n != 2)
        return why(c, "depth and values must be constants (1 and 2 elements)");
    int64_t dep = hi(depth, 0);
    if (dep < 1 || dep > INT32_MAX)
        return why(c, "depth %lld", (long long)dep);
    mc_dtype d;
    if (!map_dtype(c, values->elem, &d))
        return false;
    const mc_node *in = vnode(c, idx);
    int r = in->rank + 1, ax;
    if (r > MC_MAX_RANK)
        return why(c, "a result of rank %d", r);
    if (!norm_axis(c, attr_i(n, "axis", -1), r, &ax))
        return false;
    if (in->dtype != MC_I32)
        idx = mc_cast(g, idx, MC_I32);
    mc_value dv = mc_scalar(g, (double)dep, MC_I32);
    idx = sel(c, mc_lt(g, idx, mc_scalar(g, 0, MC_I32)), mc_add(g, idx, dv), idx);
    int64_t out[MC_MAX_RANK], us[MC_MAX_RANK];
    for (int k = 0, s = 0; k < r; k++) {
        out[k] = k == ax ? dep : in->shape[s];
        us[k] = k == ax ? 1 : in->shape[s];
        if (k != ax)
            s++;
    }
    mc_value hot = mc_eq(g, mc_iota(g, out, r, ax, MC_I32), mc_reshape(g, idx, us, r));
    double off = hf(values, 0), on = hf(values, 1);
    return set_out(c, n, 0, sel(c, hot, mc_full(g, out, r, on, d), mc_scalar(g, off, d)));
}

/* ONNX's own function body: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) */
static bool op_mvn(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    int rank = vnode(c, x)->rank, axes[MC_MAX_RANK], na = 0;
    const attr_t *a = attr(n, "axes");
    if (a && a->n_ints) {
        if (a->n_ints > MC_MAX_RANK)
            return why(c, "%zu axes", a->n_ints);
        for (size_t k = 0; k < a->n_ints; k++)
            if (!norm_axis(c, a->ints[k], rank, &axes[na++]))
                return false;
    } else {
        if (rank != 4)
            return why(c, "default axes [0, 2, 3] need rank 4");
        axes[0] = 0, axes[1] = 2, axes[2] = 3, na = 3;
    }
    mc_value mean = mc_mean(g, x, axes, na, true);
    mc_value var = mc_sub(g, mc_mean(g, mc_mul(g, x, x), axes, na, true), mc_mul(g, mean, mean));
    mc_value y = mc_div(g, mc_sub(g, x, mean), mc_add(g, mc_sqrt(g, var), fscalar(c, x, 1e-9)));
    return set_out(c, n, 0, y);
}

/* ArgMax, ArgMin and Hardmax until minic has an argmax: the first (or last) index where x equals
 * its extreme along the axis, as a min (max) reduction over iota. */
static bool op_argmax(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    bool hard = !strcmp(n->op_type, "Hardmax"), argmin = !strcmp(n->op_type, "ArgMin");
    if (hard && c->opset < 13)
        return why(c, "Hardmax before opset 13 (the 2-D form)");
    VAL(x, 0);
    const mc_node *xn = vnode(c, x);
    int rank = xn->rank, ax;
    if (rank == 0)
        return why(c, "a scalar input");
    if (!norm_axis(c, attr_i(n, "axis", hard ? -1 : 0), rank, &ax))
        return false;
    bool last = attr_i(n, "select_last_index", 0) != 0;
    int one[1] = {ax};
    mc_value ext = argmin ? mc_min(g, x, one, 1, true) : mc_max(g, x, one, 1, true);
    mc_value iota = mc_iota(g, xn->shape, rank, ax, MC_I32);
    mc_value none = mc_scalar(g, last ? -1.0 : (double)xn->shape[ax], MC_I32);
    mc_value cand = sel(c, mc_eq(g, x, ext), iota, none);
    bool keep = hard || attr_i(n, "keepdims", 1) != 0;
    mc_value idx = last ? mc_max(g, cand, one, 1, keep) : mc_min(g, cand, one, 1, keep);
    if (!hard)
        return set_out(c, n, 0, idx);
    return set_out(c, n, 0, mc_cast(g, mc_eq(g, iota, idx), xn->dtype));
}

/* Einsum without repeated letters in one operand or ellipses: every operand moved to one order
 * of all letters (the output's first), multiplied with broadcasting, summed over the rest. */
static bool op_einsum(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    const attr_t *a = attr(n, "equation");
    if (!a || !a->has_s || a->s.len == 0 || a->s.len > 200)
        return why(c, "no equation");
    char eq[256], *terms[8];
    size_t o = 0;
    for (size_t k = 0; k < a->s.len; k++)
        if (a->s.data[k] != ' ')
            eq[o++] = (char)a->s.data[k];
    eq[o] = 0;
    if (strstr(eq, "..."))
        return why(c, "an equation with an ellipsis");
    char *arrow = strstr(eq, "->"), *out = NULL;
    if (arrow) {
        *arrow = 0;
        out = arrow + 2;
    }
    int nt = 0;
    for (char *t = eq; nt < 8; nt++) {
        terms[nt] = t;
        char *comma = strchr(t, ',');
        if (!comma) {
            nt++;
            break;
        }
        *comma = 0;
        t = comma + 1;
    }
    if ((size_t)nt != n->n_input)
        return why(c, "%d terms for %zu operands", nt, n->n_input);
    int count[128] = {0};
    for (int k = 0; k < nt; k++)
        for (char *p = terms[k]; *p; p++) {
            if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
                return why(c, "an equation with '%c'", *p);
            if (strchr(p + 1, *p))
                return why(c, "a letter repeated in one operand (diagonals)");
            count[(int)*p]++;
        }
    char outl[64] = "";
    if (out) {
        if (strlen(out) >= sizeof outl)
            return why(c, "a long output");
        strcpy(outl, out);
        for (char *p = outl; *p; p++)
            if (*p < 0 || !count[(int)*p] || strchr(p + 1, *p))
                return why(c, "output letter '%c'", *p);
    } else {
        int k = 0;
        for (int ch = 0; ch < 128; ch++)
            if (count[ch] == 1)
                outl[k++] = (char)ch;
        outl[k] = 0;
    }
    char all[64];
    int nall = (int)strlen(outl);
    strcpy(all, outl);
    for (int k = 0; k < nt; k++)
        for (char *p = terms[k]; *p; p++)
            if (!strchr(all, *p)) {
                all[nall++] = *p;
                all[nall] = 0;
            }
    if (nall > MC_MAX_RANK)
        return why(c, "%d letters (at most %d)", nall, MC_MAX_RANK);
    mc_value prod = MC_NONE;
    for (int k = 0; k < nt; k++) {
        VAL(x, (size_t)k);
        const mc_node *xn = vnode(c, x);
        int r = (int)strlen(terms[k]);
        if (xn->rank != r)
            return why(c, "operand %d has rank %d for '%s'", k, xn->rank, terms[k]);
        int perm[MC_MAX_RANK], np = 0;
        int64_t shape[MC_MAX_RANK];
        for (int u = 0; u < nall; u++) {
            char *p = strchr(terms[k], all[u]);
            shape[u] = p ? xn->shape[p - terms[k]] : 1;
            if (p)
                perm[np++] = (int)(p - terms[k]);
        }
        bool id = true;
        for (int q = 0; q < np; q++)
            id &= perm[q] == q;
        if (!id)
            x = mc_transpose(g, x, perm, np);
        if (nall != r)
            x = mc_reshape(g, x, shape, nall);
        prod = prod == MC_NONE ? x : mc_mul(g, prod, x);
    }
    int nout = (int)strlen(outl), axes[MC_MAX_RANK], na = 0;
    for (int u = nout; u < nall; u++)
        axes[na++] = u;
    if (na)
        prod = mc_sum(g, prod, axes, na, false);
    return set_out(c, n, 0, prod);
}

/* x moved so that `axis` is last (a transpose), and the permutation that moves it back */
static mc_value axis_last(ctx *c, mc_value x, int axis, int *back)
{
    int rank = vnode(c, x)->rank, perm[MC_MAX_RANK], np = 0;
    for (int k = 0; k < rank; k++)
        if (k != axis)
            perm[np++] = k;
    perm[np++] = axis;
    for (int k = 0; k < rank; k++)
        back[perm[k]] = k;
    return axis == rank - 1 ? x : mc_transpose(c->g, x, perm, rank);
}

/* CumSum until minic has one: a product with a triangular 0/1 matrix along the axis. */
static bool op_cumsum(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    htensor *at = in_const(c, n, 1);
    if (!at || at->n != 1)
        return why(c, "the axis must be a constant");
    const mc_node *xn = vnode(c, x);
    int rank = xn->rank, ax, back[MC_MAX_RANK];
    if (!norm_axis(c, hi(at, 0), rank, &ax))
        return false;
    int64_t len = xn->shape[ax];
    if (len > 4096)
        return why(c, "a cumulative sum over %lld elements (minic has no cumsum yet)", (long long)len);
    mc_dtype d = xn->dtype, fd = d == MC_I32 ? MC_F32 : d;
    mc_value xt = axis_last(c, x, ax, back);
    if (d == MC_I32)
        xt = mc_cast(g, xt, MC_F32);
    int64_t sq[2] = {len, len};
    /* m[i][j] = 1 where input i counts toward output j */
    mc_value i = mc_iota(g, sq, 2, 0, MC_I32), j = mc_iota(g, sq, 2, 1, MC_I32);
    bool excl = attr_i(n, "exclusive", 0) != 0, rev = attr_i(n, "reverse", 0) != 0;
    mc_value m = rev ? (excl ? mc_gt(g, i, j) : mc_ge(g, i, j)) : (excl ? mc_lt(g, i, j) : mc_le(g, i, j));
    mc_value y;
    if (rank == 1) /* matmul needs rank 2: [len] @ [len, len] as [1, len] */
        y = mc_reshape(g, mc_matmul(g, mc_reshape(g, xt, (int64_t[]){1, len}, 2), mc_cast(g, m, fd)), &len, 1);
    else
        y = mc_matmul(g, xt, mc_cast(g, m, fd));
    if (d == MC_I32)
        y = mc_cast(g, y, MC_I32);
    return set_out(c, n, 0, ax == rank - 1 || y < 0 ? y : mc_transpose(g, y, back, rank));
}

/* GatherElements with indices known at run time: a one-hot mask along the axis, summed. */
static bool op_gather_elements(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    VAL(idx, 1);
    const mc_node *xn = vnode(c, x), *in = vnode(c, idx);
    int rank = xn->rank, ax, back[MC_MAX_RANK];
    if (in->rank != rank || rank == 0 || rank + 1 > MC_MAX_RANK)
        return why(c, "indices of rank %d for data of rank %d", in->rank, rank);
    if (!norm_axis(c, attr_i(n, "axis", 0), rank, &ax))
        return false;
    int64_t len = xn->shape[ax];
    mc_dtype d = xn->dtype;
    if (d == MC_BOOL || len > 4096)
        return why(c, "a gather of %s over %lld elements (minic has no gather yet)", mc_dtype_name(d), (long long)len);
    int64_t ishape[MC_MAX_RANK];
    memcpy(ishape, in->shape, sizeof ishape);
    for (int k = 0; k < rank; k++) {
        if (k != ax && ishape[k] > xn->shape[k])
            return why(c, "indices larger than the data at axis %d", k);
        if (k != ax && ishape[k] < xn->shape[k])
            x = mc_slice(g, x, k, 0, ishape[k]);
    }
    /* data: the axis moved last, and a 1 where the indices' axis goes: [.., 1, .., len] */
    mc_value xt = axis_last(c, x, ax, back);
    int64_t xs[MC_MAX_RANK + 1], hs[MC_MAX_RANK + 1], is[MC_MAX_RANK + 1];
    for (int k = 0; k < rank; k++) {
        xs[k] = k == ax ? 1 : ishape[k];
        hs[k] = ishape[k];
        is[k] = ishape[k];
    }
    xs[rank] = len, hs[rank] = len, is[rank] = 1;
    /* xt is [dims except ax.., len]: reshape to put a 1 at ax */
    xt = mc_reshape(g, xt, xs, rank + 1);
    if (in->dtype != MC_I32)
        idx = mc_cast(g, idx, MC_I32);
    idx = sel(c, mc_lt(g, idx, mc_scalar(g, 0, MC_I32)), mc_add(g, idx, mc_scalar(g, (double)len, MC_I32)), idx);
    mc_value hot = mc_eq(g, mc_iota(g, hs, rank + 1, rank, MC_I32), mc_reshape(g, idx, is, rank + 1));
    int last[1] = {rank};
    mc_value y;
    if (d == MC_I32)
        y = mc_sum(g, mc_mul(g, xt, mc_cast(g, hot, MC_I32)), last, 1, false);
    else
        y = mc_sum(g, mc_where(g, hot, xt, mc_scalar(g, 0, d)), last, 1, false);
    return set_out(c, n, 0, y);
}

/* BitShift on unsigned values held in i32 (no wrap-around past the type's width) */
static bool op_bitshift(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    VAL(y, 1);
    if (vnode(c, x)->dtype != MC_I32)
        return why(c, "a non-integer operand");
    mc_value p2 = mc_cast(g, mc_pow(g, mc_scalar(g, 2, MC_F32), mc_cast(g, y, MC_F32)), MC_I32);
    bool left = attr_is(n, "direction", "", "LEFT");
    if (!left && !attr_is(n, "direction", "", "RIGHT"))
        return why(c, "no direction");
    return set_out(c, n, 0, left ? mc_mul(g, x, p2) : mc_div(g, x, p2));
}

/* A constant made on the host (a resize's weights) as a param named after the node. */
static mc_value host_param(ctx *c, const node_t *n, const char *what, htensor *t)
{
    char name[256];
    snprintf(name, sizeof name, "%s.%s", out_present(n, 0) ? n->output[0] : "resize", what);
    char *copy = mc_arena_strdup(&c->m->arena, name);
    slot *s = copy && !find_slot(c, copy) ? new_slot(c, copy) : NULL;
    if (!s) {
        why(c, "out of memory");
        return MC_ERROR;
    }
    s->state = S_CONST;
    s->c = t;
    s->initializer = true;
    return as_value(c, s);
}

/* The weights of a 1-D resize from in to out elements, as ONNX's reference computes them: a
 * source coordinate per output, its n nearest inputs (edge-padded), their coefficients. A row
 * of zeros with *extrap set where tf_crop_and_resize falls outside the input. */
typedef struct resize_spec {
    int mode;       /* 0 nearest, 1 linear, 2 cubic */
    int coord;      /* 0 half_pixel, 1 asymmetric, 2 pytorch_half_pixel, 3 align_corners, 4 tf_crop_and_resize */
    int nearest;    /* 0 round_prefer_floor, 1 round_prefer_ceil, 2 floor, 3 ceil */
    double a;       /* cubic_coeff_a */
    bool exclude;   /* exclude_outside */
} resize_spec;

static void resize_weights(const resize_spec *sp, int64_t in, int64_t out, double scale,
                           double roi0, double roi1, double *w /* [in][out] */, bool *extrap)
{
    double out_w = scale * (double)in;
    for (int64_t o = 0; o < out; o++) {
        double x = (double)o, xo;
        extrap[o] = false;
        switch (sp->coord) {
        case 1: xo = x / scale; break;
        case 2: xo = out_w == 1 ? -0.5 : (x + 0.5) / scale - 0.5; break;
        case 3: xo = out_w == 1 ? 0 : x * (double)(in - 1) / (out_w - 1); break;
        case 4:
            xo = out_w == 1 ? (roi1 - roi0) * (double)(in - 1) / 2 : x * (roi1 - roi0) * (double)(in - 1) / (out_w - 1);
            xo += roi0 * (double)(in - 1);
            if (xo < 0 || xo > (double)(in - 1)) {
                extrap[o] = true;
                continue;
            }
            break;
        default: xo = (x + 0.5) / scale - 0.5; break;
        }
        double fl = floor(xo), r = xo == fl ? 1.0 : xo - fl;
        double co[4];
        int nc;
        if (sp->mode == 0) {
            nc = 2;
            bool right = xo == fl ? true : sp->nearest == 0 ? r > 0.5 : sp->nearest == 1 ? r >= 0.5 : sp->nearest == 3;
            co[0] = !right, co[1] = right;
        } else if (sp->mode == 1) {
            nc = 2;
            co[0] = 1 - r, co[1] = r;
        } else {
            double A = sp->a, s1 = r + 1, s2 = 1 - r, s3 = 2 - r;
            nc = 4;
            co[0] = ((A * s1 - 5 * A) * s1 + 8 * A) * s1 - 4 * A;
            co[1] = ((A + 2) * r - (A + 3)) * r * r + 1;
            co[2] = ((A + 2) * s2 - (A + 3)) * s2 * s2 + 1;
            co[3] = ((A * s3 - 5 * A) * s3 + 8 * A) * s3 - 4 * A;
        }
        int64_t first = (int64_t)ceil(xo) - nc / 2; /* the nearest nc, the smaller on ties */
        if (xo == fl)
            first = (int64_t)xo - nc / 2;
        if (sp->exclude) {
            double sum = 0;
            for (int k = 0; k < nc; k++) {
                int64_t i = first + k;
                if (i < 0 || i >= in)
                    co[k] = 0;
                sum += co[k];
            }
            for (int k = 0; k < nc && sum != 0; k++)
                co[k] /= sum;
        }
        for (int k = 0; k < nc; k++) {
            int64_t i = first + k;
            i = i < 0 ? 0 : i >= in ? in - 1 : i;
            w[i * out + o] += co[k];
        }
    }
}

static bool op_resize(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    bool upsample = !strcmp(n->op_type, "Upsample");
    VAL(x, 0);
    const mc_node *xn = vnode(c, x);
    int rank = xn->rank;
    if (!mc_dtype_is_float(xn->dtype) || rank == 0)
        return why(c, "a %s input of rank %d", mc_dtype_name(xn->dtype), rank);
    resize_spec sp = {0};
    sp.a = attr_f(n, "cubic_coeff_a", -0.75);
    sp.exclude = attr_i(n, "exclude_outside", 0) != 0;
    if (attr_is(n, "mode", "nearest", "linear") || attr_is(n, "mode", "nearest", "bilinear"))
        sp.mode = 1;
    else if (attr_is(n, "mode", "nearest", "cubic"))
        sp.mode = 2;
    else if (!attr_is(n, "mode", "nearest", "nearest"))
        return why(c, "an unknown mode");
    bool old = upsample || c->opset < 11;
    const char *ct = old ? "asymmetric" : "half_pixel";
    static const char *const coords[] = {"half_pixel", "asymmetric", "pytorch_half_pixel",
                                         "align_corners", "tf_crop_and_resize"};
    sp.coord = -1;
    for (int k = 0; k < 5; k++)
        if (attr_is(n, "coordinate_transformation_mode", ct, coords[k]))
            sp.coord = k;
    static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    sp.nearest = -1;
    for (int k = 0; k < 4; k++) /* Upsample and Resize-10 pick the floor */
        if (attr_is(n, "nearest_mode", old ? "floor" : "round_prefer_floor", nearests[k]))
            sp.nearest = k;
    if (sp.coord < 0 || sp.nearest < 0)
        return why(c, "an unsupported coordinate_transformation_mode or nearest_mode");
    /* scales and sizes */
    double scales[MC_MAX_RANK], roi[2 * MC_MAX_RANK];
    int64_t outl[MC_MAX_RANK];
    size_t si = old ? 1 : 2, zi = 3, ri = 1;
    htensor *st = has_in(n, si) ? in_const(c, n, si) : NULL, *zt = !old && has_in(n, zi) ? in_const(c, n, zi) : NULL;
    if (upsample && !has_in(n, 1)) {
        const attr_t *a = attr(n, "scales");
        if (!a || a->n_floats != (size_t)rank)
            return why(c, "no scales");
        htensor *t = new_fold(c, T_FLOAT, 1, (int64_t[]){rank});
        if (!t)
            return false;
        for (int d = 0; d < rank; d++)
            t->f[d] = a->floats[d];
        st = t;
    }
    if ((has_in(n, si) && !st) || (!old && has_in(n, zi) && !zt))
        return why(c, "scales and sizes must be constants");
    if (zt && zt->n == rank) {
        for (int d = 0; d < rank; d++) {
            outl[d] = hi(zt, d);
            scales[d] = (double)outl[d] / (double)xn->shape[d];
        }
    } else if (st && st->n == rank) {
        for (int d = 0; d < rank; d++) {
            scales[d] = hf(st, d);
            if (!(scales[d] > 0) || scales[d] > 1024)
                return why(c, "scale %g", scales[d]);
            outl[d] = (int64_t)(scales[d] * (double)xn->shape[d]);
        }
    } else {
        return why(c, "neither scales nor sizes for every axis");
    }
    for (int d = 0; d < 2 * rank; d++)
        roi[d] = d < rank ? 0 : 1;
    if (sp.coord == 4) {
        htensor *rt = has_in(n, ri) ? in_const(c, n, ri) : NULL;
        if (!rt || rt->n != 2 * rank)
            return why(c, "tf_crop_and_resize without a constant roi");
        for (int d = 0; d < 2 * rank; d++)
            roi[d] = hf(rt, d);
    }
    double extrap_value = attr_f(n, "extrapolation_value", 0.0);
    for (int d = rank - 1; d >= 0; d--) { /* the innermost axis first, as ONNX's reference */
        int64_t in = xn->shape[d], out = outl[d];
        if (out < 1 || out > 65536 || in > 65536)
            return why(c, "a resize of axis %d from %lld to %lld", d, (long long)in, (long long)out);
        htensor *w = new_fold(c, T_FLOAT, 2, (int64_t[]){in, out});
        bool *ex = c_alloc(c, (size_t)out * sizeof *ex);
        if (!w || !ex)
            return w ? why(c, "out of memory") : false;
        resize_weights(&sp, in, out, scales[d], roi[d], roi[rank + d], w->f, ex);
        bool identity = in == out, any_ex = false;
        for (int64_t i = 0; i < in && identity; i++)
            for (int64_t o = 0; o < out && identity; o++)
                identity = w->f[i * out + o] == (i == o);
        for (int64_t o = 0; o < out; o++)
            any_ex |= ex[o];
        if (identity && !any_ex)
            continue;
        char what[32];
        snprintf(what, sizeof what, "resize_w%d", d);
        mc_value wv = host_param(c, n, what, w);
        if (wv < 0)
            return false;
        if (vnode(c, wv)->dtype != xn->dtype)
            wv = mc_cast(g, wv, xn->dtype);
        int back[MC_MAX_RANK];
        int r = vnode(c, x)->rank;
        mc_value xt = axis_last(c, x, d, back);
        if (r == 1)
            xt = mc_reshape(g, xt, (int64_t[]){1, in}, 2);
        mc_value y = mc_matmul(g, xt, wv);
        if (r == 1)
            y = mc_reshape(g, y, &out, 1);
        if (any_ex) {
            htensor *b = new_fold(c, T_FLOAT, 1, &out);
            if (!b)
                return false;
            for (int64_t o = 0; o < out; o++)
                b->f[o] = ex[o] ? extrap_value : 0;
            snprintf(what, sizeof what, "resize_b%d", d);
            mc_value bv = host_param(c, n, what, b);
            if (bv < 0)
                return false;
            if (vnode(c, bv)->dtype != xn->dtype)
                bv = mc_cast(g, bv, xn->dtype);
            y = mc_add(g, y, bv);
        }
        x = d == r - 1 || y < 0 ? y : mc_transpose(g, y, back, r);
        if (x < 0)
            return set_out(c, n, 0, x);
    }
    return set_out(c, n, 0, x);
}

/* LRN: the sum of squares over a window of channels as a product with a 0/1 band matrix. */
static bool op_lrn(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    const mc_node *xn = vnode(c, x);
    int rank = xn->rank, back[MC_MAX_RANK];
    int64_t size = attr_i(n, "size", 0), C = rank >= 2 ? xn->shape[1] : 0;
    if (rank < 2 || size < 1 || size > 4096 || C > 4096)
        return why(c, "size %lld over %lld channels", (long long)size, (long long)C);
    double alpha = attr_f(n, "alpha", 1e-4), beta = attr_f(n, "beta", 0.75), bias = attr_f(n, "bias", 1.0);
    int64_t lo = (size - 1) / 2, hi_ = size - 1 - lo, sq[2] = {C, C};
    /* band[c'][c] = 1 where c - lo <= c' <= c + hi */
    mc_value d = mc_sub(g, mc_iota(g, sq, 2, 0, MC_I32), mc_iota(g, sq, 2, 1, MC_I32));
    mc_value band = mc_where(g, mc_ge(g, d, mc_scalar(g, (double)-lo, MC_I32)),
                             mc_le(g, d, mc_scalar(g, (double)hi_, MC_I32)), mc_scalar(g, 0, MC_BOOL));
    mc_value xt = axis_last(c, mc_mul(g, x, x), 1, back);
    mc_value sum = mc_matmul(g, xt, mc_cast(g, band, xn->dtype));
    if (rank > 2)
        sum = mc_transpose(g, sum, back, rank);
    mc_value den = mc_pow(g, mc_add(g, mc_mul(g, sum, fscalar(c, x, alpha / (double)size)), fscalar(c, x, bias)),
                          fscalar(c, x, beta));
    return set_out(c, n, 0, mc_div(g, x, den));
}

/* ScatterElements (and Scatter before opset 11) with reduction none or add: the updates summed
 * through a one-hot mask along the axis; positions no index hits keep the data. */
static bool op_scatter_elements(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    VAL(idx, 1);
    VAL(upd, 2);
    const mc_node *xn = vnode(c, x), *in = vnode(c, idx), *un = vnode(c, upd);
    int rank = xn->rank, ax, back[MC_MAX_RANK];
    if (rank == 0 || in->rank != rank || un->rank != rank || rank + 1 > MC_MAX_RANK)
        return why(c, "indices and updates of another rank than the data");
    if (!norm_axis(c, attr_i(n, "axis", 0), rank, &ax))
        return false;
    bool add = attr_is(n, "reduction", "none", "add");
    if (!add && !attr_is(n, "reduction", "none", "none"))
        return why(c, "reduction other than none or add");
    for (int k = 0; k < rank; k++)
        if (in->shape[k] != un->shape[k] || (k != ax && in->shape[k] != xn->shape[k]))
            return why(c, "indices smaller than the data off the axis");
    int64_t len = xn->shape[ax], ta = in->shape[ax];
    mc_dtype d = xn->dtype;
    if (d == MC_BOOL || len > 4096 || ta > 4096)
        return why(c, "a scatter of %s over %lld elements", mc_dtype_name(d), (long long)len);
    if (in->dtype != MC_I32)
        idx = mc_cast(g, idx, MC_I32);
    idx = sel(c, mc_lt(g, idx, mc_scalar(g, 0, MC_I32)), mc_add(g, idx, mc_scalar(g, (double)len, MC_I32)), idx);
    /* [.., ta, 1] against iota [.., ta, len] */
    mc_value it = axis_last(c, idx, ax, back), ut = axis_last(c, upd, ax, back);
    int64_t s1[MC_MAX_RANK + 1], s2[MC_MAX_RANK + 1];
    int r = 0;
    for (int k = 0; k < rank; k++)
        if (k != ax)
            s1[r] = s2[r] = in->shape[k], r++;
    s1[r] = s2[r] = ta;
    s1[r + 1] = 1, s2[r + 1] = len;
    mc_value hot = mc_eq(g, mc_iota(g, s2, rank + 1, rank, MC_I32), mc_reshape(g, it, s1, rank + 1));
    mc_value hotv = mc_cast(g, hot, d == MC_I32 ? MC_I32 : d);
    int along[1] = {rank - 1};
    mc_value val = mc_sum(g, mc_mul(g, mc_reshape(g, ut, s1, rank + 1), hotv), along, 1, false);
    mc_value hits = mc_sum(g, mc_cast(g, hot, MC_I32), along, 1, false); /* [.., len] */
    if (ax != rank - 1) {
        val = mc_transpose(g, val, back, rank);
        hits = mc_transpose(g, hits, back, rank);
    }
    if (add)
        val = mc_add(g, val, x);
    return set_out(c, n, 0, sel(c, mc_gt(g, hits, mc_scalar(g, 0, MC_I32)), val, x));
}

/* RNN, GRU and LSTM, one direction (forward or reverse), default activations: the recurrence
 * unrolled over the sequence at import time (a matmul per step and gate block). */
static bool op_rnn(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    const char *op = n->op_type;
    int G = !strcmp(op, "LSTM") ? 4 : !strcmp(op, "GRU") ? 3 : 1;
    if (attr(n, "activations") || attr(n, "clip") || attr_i(n, "input_forget", 0))
        return why(c, "activations, clip or input_forget (only the defaults are supported)");
    bool reverse = attr_is(n, "direction", "forward", "reverse");
    if (!reverse && !attr_is(n, "direction", "forward", "forward"))
        return why(c, "a bidirectional %s", op);
    int layout = (int)attr_i(n, "layout", 0);
    VAL(X, 0);
    VAL(W, 1);
    VAL(R, 2);
    const mc_node *xn = vnode(c, X), *wn = vnode(c, W);
    if (xn->rank != 3 || wn->rank != 3 || wn->shape[0] != 1)
        return why(c, "X of rank %d and W of rank %d", xn->rank, wn->rank);
    int64_t T = layout ? xn->shape[1] : xn->shape[0], B = layout ? xn->shape[0] : xn->shape[1];
    int64_t I = xn->shape[2], GH = wn->shape[1], H = GH / G;
    if (GH % G || T > 1024 || (attr(n, "hidden_size") && attr_i(n, "hidden_size", 0) != H))
        return why(c, "hidden sizes that disagree, or a sequence of %lld steps", (long long)T);
    if (has_in(n, 4)) {
        htensor *sl = in_const(c, n, 4);
        if (!sl)
            return why(c, "sequence_lens computed at run time");
        for (int64_t k = 0; k < sl->n; k++)
            if (hi(sl, k) != T)
                return why(c, "sequence_lens shorter than the sequence");
    }
    mc_dtype d = xn->dtype;
    int64_t s2[2] = {GH, I}, r2[2] = {GH, H}, bh[2] = {B, H}, b2[2] = {2, GH};
    mc_value Wt = mc_transpose(g, mc_reshape(g, W, s2, 2), NULL, 0); /* [I, GH] */
    mc_value Rt = mc_transpose(g, mc_reshape(g, R, r2, 2), NULL, 0); /* [H, GH] */
    mc_value wb = mc_full(g, &GH, 1, 0, d), rb = wb;
    if (has_in(n, 3)) {
        VAL(Bv, 3);
        mc_value b = mc_reshape(g, Bv, b2, 2);
        wb = mc_reshape(g, mc_slice(g, b, 0, 0, 1), &GH, 1);
        rb = mc_reshape(g, mc_slice(g, b, 0, 1, 2), &GH, 1);
    }
    mc_value Ht = mc_full(g, bh, 2, 0, d), Ct = Ht;
    if (has_in(n, 5)) {
        VAL(h0, 5);
        Ht = mc_reshape(g, h0, bh, 2);
    }
    mc_value P = MC_NONE;
    if (G == 4 && has_in(n, 6)) {
        VAL(c0, 6);
        Ct = mc_reshape(g, c0, bh, 2);
    }
    if (G == 4 && has_in(n, 7)) {
        VAL(pv, 7);
        P = mc_reshape(g, pv, (int64_t[]){3 * H}, 1);
    }
    bool lbr = attr_i(n, "linear_before_reset", 0) != 0;
    mc_value ys[1024];
    int64_t xs[2] = {B, I};
    for (int64_t k = 0; k < T; k++) {
        int64_t t = reverse ? T - 1 - k : k;
        mc_value x = mc_reshape(g, mc_slice(g, X, layout ? 1 : 0, t, t + 1), xs, 2);
        mc_value xw = mc_add(g, mc_matmul(g, x, Wt), wb); /* [B, GH] */
#define PART(v, a, b_) mc_slice(g, (v), 1, (a) * H, (b_) * H)
#define VPART(v, a, b_) mc_slice(g, (v), 0, (a) * H, (b_) * H)
        if (G == 1) {
            Ht = mc_tanh(g, mc_add(g, xw, mc_add(g, mc_matmul(g, Ht, Rt), rb)));
        } else if (G == 3) {
            mc_value hzr = mc_add(g, mc_matmul(g, Ht, PART(Rt, 0, 2)), VPART(rb, 0, 2));
            mc_value z = mc_sigmoid(g, mc_add(g, PART(xw, 0, 1), PART(hzr, 0, 1)));
            mc_value r = mc_sigmoid(g, mc_add(g, PART(xw, 1, 2), PART(hzr, 1, 2)));
            mc_value hh;
            if (lbr)
                hh = mc_mul(g, r, mc_add(g, mc_matmul(g, Ht, PART(Rt, 2, 3)), VPART(rb, 2, 3)));
            else
                hh = mc_add(g, mc_matmul(g, mc_mul(g, r, Ht), PART(Rt, 2, 3)), VPART(rb, 2, 3));
            mc_value h = mc_tanh(g, mc_add(g, PART(xw, 2, 3), hh));
            Ht = mc_add(g, mc_mul(g, mc_sub(g, mc_scalar(g, 1, d), z), h), mc_mul(g, z, Ht));
        } else {
            mc_value gates = mc_add(g, xw, mc_add(g, mc_matmul(g, Ht, Rt), rb)); /* i, o, f, c */
            mc_value ig = PART(gates, 0, 1), og = PART(gates, 1, 2), fg = PART(gates, 2, 3);
            if (P != MC_NONE) {
                ig = mc_add(g, ig, mc_mul(g, VPART(P, 0, 1), Ct));
                fg = mc_add(g, fg, mc_mul(g, VPART(P, 2, 3), Ct));
            }
            mc_value C = mc_add(g, mc_mul(g, mc_sigmoid(g, fg), Ct),
                                mc_mul(g, mc_sigmoid(g, ig), mc_tanh(g, PART(gates, 3, 4))));
            if (P != MC_NONE)
                og = mc_add(g, og, mc_mul(g, VPART(P, 1, 2), C));
            Ht = mc_mul(g, mc_sigmoid(g, og), mc_tanh(g, C));
            Ct = C;
        }
#undef PART
#undef VPART
        ys[t] = Ht;
    }
    /* Y: [T, 1, B, H] (layout 0) or [B, T, 1, H]; Y_h, Y_c: [1, B, H] or [B, 1, H] */
    int64_t y1[4] = {1, 1, B, H}, y1l[4] = {B, 1, 1, H}, hs[3] = {1, B, H}, hsl[3] = {B, 1, H};
    if (out_present(n, 0)) {
        for (int64_t t = 0; t < T; t++)
            ys[t] = mc_reshape(g, ys[t], layout ? y1l : y1, 4);
        if (!set_out(c, n, 0, T == 1 ? ys[0] : mc_concat(g, ys, (int)T, layout ? 1 : 0)))
            return false;
    }
    if (out_present(n, 1) && !set_out(c, n, 1, mc_reshape(g, Ht, layout ? hsl : hs, 3)))
        return false;
    if (G == 4 && out_present(n, 2) && !set_out(c, n, 2, mc_reshape(g, Ct, layout ? hsl : hs, 3)))
        return false;
    return true;
}

/* HannWindow, HammingWindow, BlackmanWindow: constants (the size must be known) */
static bool op_window(ctx *c, const node_t *n)
{
    htensor *sz = in_const(c, n, 0);
    if (!sz || sz->n != 1)
        return why(c, "the size must be a scalar constant");
    int64_t len = hi(sz, 0);
    if (len < 1 || len > MAX_FOLD_ELEMS)
        return why(c, "a window of %lld elements", (long long)len);
    double a0 = 0.5, a1 = 0.5, a2 = 0;
    if (!strcmp(n->op_type, "HammingWindow"))
        a0 = 25.0 / 46, a1 = 21.0 / 46;
    else if (!strcmp(n->op_type, "BlackmanWindow"))
        a0 = 0.42, a1 = 0.5, a2 = 0.08;
    int elem = (int)attr_i(n, "output_datatype", T_FLOAT);
    if (!elem_is_float(elem) && !elem_is_int(elem))
        return why(c, "output_datatype %s", elem_name(elem));
    htensor *t = new_fold(c, elem, 1, &len);
    if (!t)
        return false;
    double N = attr_i(n, "periodic", 1) ? (double)len : (double)len - 1, pi = 3.14159265358979323846;
    for (int64_t k = 0; k < len; k++) {
        double x = N > 0 ? a0 - a1 * cos(2 * pi * (double)k / N) + a2 * cos(4 * pi * (double)k / N) : a0 - a1 + a2;
        if (t->i)
            t->i[k] = (int64_t)x;
        else
            t->f[k] = elem == T_FLOAT ? mc_f32_from_double(x) : x;
    }
    return set_const(c, n, 0, t);
}

static bool op_rounding(ctx *c, const node_t *n)
{
    mc_graph *g = c->g;
    VAL(x, 0);
    if (!mc_dtype_is_float(vnode(c, x)->dtype))
        return why(c, "a non-float operand");
    if (!strcmp(n->op_type, "Floor"))
        return set_out(c, n, 0, floor_of(c, x));
    if (!strcmp(n->op_type, "Ceil"))
        return set_out(c, n, 0, mc_neg(g, floor_of(c, mc_neg(g, x))));
    /* Round: half to even */
    mc_value t = floor_of(c, x), half = fscalar(c, x, 0.5), one = fscalar(c, x, 1);
    mc_value frac = mc_sub(g, x, t);
    mc_value odd = mc_ne(g, mc_sub(g, t, mc_mul(g, floor_of(c, mc_mul(g, t, half)), fscalar(c, x, 2))), fscalar(c, x, 0));
    mc_value up = mc_where(g, mc_gt(g, frac, half), mc_scalar(g, 1, MC_BOOL),
                           mc_where(g, mc_eq(g, frac, half), odd, mc_scalar(g, 0, MC_BOOL)));
    mc_value y = mc_where(g, up, mc_add(g, t, one), t);
    mc_value zero = fscalar(c, x, 0);
    return set_out(c, n, 0, mc_where(g, mc_eq(g, y, zero), mc_mul(g, x, zero), y)); /* round(-0.4) is -0.0 */
}

/* ---- convolution, pooling, padding (minic's conv, maxpool, avgpool, pad) ---------------------- */

/* The window of a Conv or pool over x's spatial axes: kernel (from kernel_shape, else `wk`),
 * strides, dilations, and the padding before and after each axis, auto_pad resolved. */
typedef struct window {
    int ns;                            /* spatial axes: 1 or 2 */
    int64_t k[2], stride[2], dil[2], begin[2], end[2];
} window;

/* An attribute list of `want` entries in [0, 2^20] (ints_of reads it), `def` each when absent. */
static bool list_attr(ctx *c, const node_t *n, const char *name, int64_t *out, int want, int64_t def)
{
    int count;
    bool given;
    if (!ints_of(c, n, n->n_input, name, out, &count, want, &given))
        return false;
    for (int i = 0; i < want && !given; i++)
        out[i] = def;
    if (given && count != want)
        return why(c, "%s has %d entries for %d spatial axes", name, count, want);
    for (int i = 0; i < want; i++)
        if (out[i] < 0 || out[i] > (1 << 20))
            return why(c, "%s entry %lld", name, (long long)out[i]);
    return true;
}

static bool get_window(ctx *c, const node_t *n, const mc_node *x, const int64_t *wk, window *w)
{
    w->ns = x->rank - 2;
    if (w->ns < 1 || w->ns > 2)
        return why(c, "%d spatial axes (minic's conv and pools take 1 or 2)", w->ns);
    int64_t pads[4];
    if (!list_attr(c, n, "kernel_shape", w->k, w->ns, 0) || !list_attr(c, n, "strides", w->stride, w->ns, 1) ||
        !list_attr(c, n, "dilations", w->dil, w->ns, 1) || !list_attr(c, n, "pads", pads, 2 * w->ns, 0))
        return false;
    for (int i = 0; i < w->ns; i++) {
        if (w->k[i] == 0 && wk)
            w->k[i] = wk[i];
        if (w->k[i] < 1 || w->stride[i] < 1 || w->dil[i] < 1)
            return why(c, "a kernel, stride or dilation below 1");
        w->begin[i] = pads[i];
        w->end[i] = pads[w->ns + i];
    }
    if (!attr_is(n, "auto_pad", "NOTSET", "NOTSET")) {
        bool valid = attr_is(n, "auto_pad", "NOTSET", "VALID"), lower = attr_is(n, "auto_pad", "NOTSET", "SAME_LOWER");
        if (!valid && !lower && !attr_is(n, "auto_pad", "NOTSET", "SAME_UPPER"))
            return why(c, "auto_pad is not NOTSET, VALID, SAME_UPPER or SAME_LOWER");
        for (int i = 0; i < w->ns; i++) {
            int64_t L = x->shape[2 + i], out = (L + w->stride[i] - 1) / w->stride[i];
            int64_t total = (out - 1) * w->stride[i] + (w->k[i] - 1) * w->dil[i] + 1 - L;
            if (valid || total < 0)
                total = 0;
            w->begin[i] = lower ? total - total / 2 : total / 2;
            w->end[i] = total - w->begin[i];
        }
    }
    return true;
}

/* x padded with `value` as the window says, where `always` or the padding is not the same on
 * both sides of an axis (minic's conv and pools pad symmetrically, and count what they pad as
 * outside the input); `sym` gets the padding left for them. */
static mc_value pad_window(ctx *c, mc_value x, const window *w, double value, bool always, int64_t *sym)
{
    const mc_node *xn = vnode(c, x);
    bool even = !always;
    for (int i = 0; i < w->ns; i++)
        even = even && w->begin[i] == w->end[i];
    for (int i = 0; i < w->ns; i++)
        sym[i] = even ? w->begin[i] : 0;
    if (even)
        return x;
    int64_t pads[2 * MC_MAX_RANK] = {0};
    for (int i = 0; i < w->ns; i++) {
        pads[2 + i] = w->begin[i];
        pads[xn->rank + 2 + i] = w->end[i];
    }
    return mc_pad(c->g, x, pads, 2 * xn->rank, value);
}

static bool op_conv(ctx *c, const node_t *n)
{
    VAL(x, 0);
    VAL(wt, 1);
    mc_value b = MC_NONE;
    if (has_in(n, 2)) {
        VAL(bias, 2);
        b = bias;
    }
    const mc_node *wn = vnode(c, wt);
    if (wn->rank < 3)
        return why(c, "a weight of rank %d", wn->rank);
    window w;
    if (!get_window(c, n, vnode(c, x), wn->shape + 2, &w))
        return false;
    int64_t sym[2];
    mc_value xp = pad_window(c, x, &w, 0, false, sym);
    if (xp < 0)
        return set_out(c, n, 0, xp);
    return set_out(c, n, 0, mc_conv(c->g, xp, wt, b, w.stride, sym, w.dil, w.ns, attr_i(n, "group", 1)));
}

static bool op_pool(ctx *c, const node_t *n)
{
    bool max = !strcmp(n->op_type, "MaxPool");
    if (out_present(n, 1))
        return why(c, "the Indices output");
    if (attr_i(n, "ceil_mode", 0))
        return why(c, "ceil_mode=1");
    VAL(x, 0);
    window w;
    if (!get_window(c, n, vnode(c, x), NULL, &w))
        return false;
    for (int i = 0; i < w.ns; i++)
        if (w.dil[i] != 1)
            return why(c, "dilations other than 1 in a pool");
    bool include = !max && attr_i(n, "count_include_pad", 0); /* the padded zeros count */
    for (int i = 0; i < w.ns && !max && !include; i++)
        if (w.begin[i] != w.end[i])
            return why(c, "uneven padding with count_include_pad=0");
    int64_t sym[2];
    mc_value xp = pad_window(c, x, &w, max ? -INFINITY : 0, include, sym);
    if (xp < 0)
        return set_out(c, n, 0, xp);
    mc_value y = max ? mc_maxpool(c->g, xp, w.k, w.stride, sym, w.ns) : mc_avgpool(c->g, xp, w.k, w.stride, sym, w.ns);
    return set_out(c, n, 0, y);
}

static bool op_pad(ctx *c, const node_t *n)
{
    if (!attr_is(n, "mode", "constant", "constant"))
        return why(c, "mode other than constant");
    VAL(x, 0);
    const mc_node *xn = vnode(c, x);
    int64_t pads[2 * MC_MAX_RANK];
    int np = 0;
    bool given;
    if (!ints_of(c, n, 1, "pads", pads, &np, 2 * MC_MAX_RANK, &given))
        return false;
    if (has_in(n, 3))
        return why(c, "the axes input");
    if (np != 2 * xn->rank)
        return why(c, "%d pads for rank %d", np, xn->rank);
    for (int i = 0; i < np; i++)
        if (pads[i] < 0)
            return why(c, "negative pads (cropping)");
    double value = attr_f(n, "value", 0);
    if (has_in(n, 2)) {
        htensor *v = in_const(c, n, 2);
        if (!v)
            return why(c, "constant_value must be a constant known at import time");
        if (v->n != 1)
            return why(c, "constant_value of %lld elements", (long long)v->n);
        value = hf(v, 0);
    }
    return set_out(c, n, 0, mc_pad(c->g, x, pads, np, value));
}

/* ---- the node table ------------------------------------------------------------------------- */

static const struct { const char *name; op_fn fn; } ops[] = {
    {"Neg", op_unary}, {"Abs", op_unary}, {"Exp", op_unary}, {"Log", op_unary}, {"Sqrt", op_unary},
    {"Reciprocal", op_unary}, {"Tanh", op_unary}, {"Sigmoid", op_unary}, {"Relu", op_unary},
    {"Erf", op_unary}, {"Sin", op_unary}, {"Cos", op_unary},
    {"Add", op_binary}, {"Sub", op_binary}, {"Mul", op_binary}, {"Div", op_binary},
    {"Equal", op_binary}, {"Less", op_binary}, {"Greater", op_binary},
    {"LessOrEqual", op_binary}, {"GreaterOrEqual", op_binary}, {"Pow", op_pow},
    {"Max", op_variadic}, {"Min", op_variadic}, {"Sum", op_variadic}, {"Mean", op_variadic},
    {"And", op_logic}, {"Or", op_logic}, {"Xor", op_logic}, {"Not", op_logic}, {"Where", op_where},
    {"LeakyRelu", op_activation}, {"PRelu", op_activation}, {"Elu", op_activation},
    {"Selu", op_activation}, {"Celu", op_activation}, {"ThresholdedRelu", op_activation},
    {"HardSigmoid", op_activation}, {"HardSwish", op_activation}, {"Softsign", op_activation},
    {"Softplus", op_activation}, {"Mish", op_activation}, {"Shrink", op_activation},
    {"IsNaN", op_activation}, {"IsInf", op_activation},
    {"Reshape", op_reshape}, {"Flatten", op_flatten}, {"Squeeze", op_squeeze},
    {"Unsqueeze", op_unsqueeze}, {"Identity", op_identity}, {"Dropout", op_identity},
    {"Transpose", op_transpose}, {"Concat", op_concat}, {"Split", op_split}, {"Slice", op_slice},
    {"Expand", op_expand}, {"Tile", op_tile}, {"Gather", op_gather}, {"Shape", op_shape},
    {"Size", op_shape}, {"Constant", op_constant}, {"ConstantOfShape", op_constant_of_shape},
    {"Range", op_range}, {"Cast", op_cast}, {"MatMul", op_matmul}, {"Gemm", op_gemm},
    {"Softmax", op_softmax}, {"LogSoftmax", op_softmax}, {"LayerNormalization", op_layernorm},
    {"BatchNormalization", op_batchnorm}, {"ReduceSum", op_reduce}, {"ReduceMean", op_reduce},
    {"ReduceMax", op_reduce}, {"ReduceMin", op_reduce}, {"ReduceSumSquare", op_reduce},
    {"ReduceL1", op_reduce}, {"ReduceL2", op_reduce}, {"ReduceLogSum", op_reduce},
    {"ReduceLogSumExp", op_reduce}, {"GlobalAveragePool", op_reduce}, {"GlobalMaxPool", op_reduce},
    {"Clip", op_clip}, {"Trilu", op_trilu}, {"Tan", op_activation}, {"Sinh", op_activation},
    {"Cosh", op_activation}, {"Asinh", op_activation}, {"Acosh", op_activation},
    {"Atanh", op_activation}, {"Sign", op_activation}, {"CastLike", op_cast_like},
    {"EyeLike", op_eye_like}, {"InstanceNormalization", op_instance_norm},
    {"DepthToSpace", op_depth_space}, {"SpaceToDepth", op_depth_space},
    {"NegativeLogLikelihoodLoss", op_loss}, {"SoftmaxCrossEntropyLoss", op_loss}, {"Mod", op_mod},
    {"ReduceProd", op_reduce_prod}, {"OneHot", op_onehot}, {"MeanVarianceNormalization", op_mvn},
    {"ArgMax", op_argmax}, {"ArgMin", op_argmax}, {"Hardmax", op_argmax}, {"Einsum", op_einsum},
    {"CumSum", op_cumsum}, {"GatherElements", op_gather_elements}, {"BitShift", op_bitshift},
    {"Resize", op_resize}, {"Upsample", op_resize}, {"LRN", op_lrn},
    {"ScatterElements", op_scatter_elements}, {"Scatter", op_scatter_elements},
    {"RNN", op_rnn}, {"GRU", op_rnn}, {"LSTM", op_rnn}, {"HannWindow", op_window},
    {"HammingWindow", op_window}, {"BlackmanWindow", op_window}, {"Floor", op_rounding},
    {"Ceil", op_rounding}, {"Round", op_rounding}, {"Conv", op_conv}, {"MaxPool", op_pool},
    {"AveragePool", op_pool}, {"Pad", op_pad},
};

static op_fn find_op(const char *name)
{
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++)
        if (!strcmp(ops[k].name, name))
            return ops[k].fn;
    return NULL;
}

/* ---- the model ------------------------------------------------------------------------------ */

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
    if (!strcmp(op, "Slice") || !strcmp(op, "Dropout"))
        return k >= 1;
    if (!strcmp(op, "OneHot"))
        return k >= 1;
    if (!strcmp(op, "RNN") || !strcmp(op, "GRU") || !strcmp(op, "LSTM"))
        return k == 4;
    if (!strcmp(op, "CumSum") || !strcmp(op, "Upsample"))
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
        why(c, "%s", mc_error_message());
        return NULL;
    }
    const char *why_ = "";
    Onnx__TensorProto *tp = NULL;
    if (!wire_check(&onnx__tensor_proto__descriptor, (uint8_t *)data, (uint8_t *)data + size, 0, &why_))
        why(c, "%s: not a TensorProto: %s", path, why_);
    else if (!(tp = onnx__tensor_proto__unpack(NULL, size, (uint8_t *)data)))
        why(c, "%s: not a TensorProto", path);
    free(data);
    htensor *t = tp ? load_tensor(c, tp, false) : NULL;
    if (tp)
        onnx__tensor_proto__free_unpacked(tp, NULL);
    return t;
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
        if (find_slot(c, tp->name))
            return mc_fail(MC_ERR_INPUT, "%s: initializer '%s' is defined twice", c->file, shown(tp->name, buf, sizeof buf));
        c->why[0] = 0;
        htensor *t = load_tensor(c, tp, true);
        if (!t)
            return mc_fail(MC_ERR_INPUT, "%s: initializer '%s': %s", c->file, shown(tp->name, buf, sizeof buf), c->why);
        slot *s = new_slot(c, tp->name);
        if (!s)
            return mc_fail(MC_ERR_SYSTEM, "out of memory");
        s->state = S_CONST;
        s->c = t;
        s->initializer = true;
    }
    /* inputs (those that are not initializers) */
    int position = -1;
    for (size_t k = 0; k < gp->n_input; k++) {
        Onnx__ValueInfoProto *vi = gp->input[k];
        if (!vi || !vi->name || !*vi->name)
            return mc_fail(MC_ERR_INPUT, "%s: graph input %zu has no name", c->file, k);
        if (find_slot(c, vi->name))
            continue;
        position++;
        shown(vi->name, buf, sizeof buf);
        if (position < c->nfrozen && c->frozen[position] && decides_shape(gp, vi->name, 0)) {
            /* a shape, axes or indices input whose value is given: a constant */
            c->why[0] = 0;
            htensor *t = read_tensor_file(c, c->frozen[position]);
            if (!t)
                return mc_fail(MC_ERR_INPUT, "%s: input '%s': %s", c->file, buf, c->why);
            slot *s = new_slot(c, vi->name);
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
        if (!map_dtype(c, tt->has_elem_type ? tt->elem_type : 0, &d))
            return mc_fail(MC_ERR_INPUT, "%s: input '%s': %s", c->file, buf, c->why);
        if (!tt->shape)
            return mc_fail(MC_ERR_INPUT, "%s: input '%s' has no shape", c->file, buf);
        if (tt->shape->n_dim > MC_MAX_RANK)
            return mc_fail(MC_ERR_INPUT, "%s: input '%s' has rank %zu (at most %d)", c->file, buf, tt->shape->n_dim, MC_MAX_RANK);
        int64_t dims[MC_MAX_RANK];
        for (size_t dd = 0; dd < tt->shape->n_dim; dd++) {
            Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[dd];
            if (dim && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM) {
                int64_t size = -1;
                for (int k = 0; k < c->ndims; k++)
                    if (c->dims[k].name && dim->dim_param && !strcmp(c->dims[k].name, dim->dim_param))
                        size = c->dims[k].size;
                char pbuf[80];
                if (size < 0)
                    return mc_fail(MC_ERR_INPUT, "%s: input '%s': dimension %zu is symbolic ('%s'): give its size (--dim %s=SIZE)",
                                   c->file, buf, dd, shown(dim->dim_param, pbuf, sizeof pbuf), pbuf);
                if (size < 1 || size > ((int64_t)1 << 40))
                    return mc_fail(MC_ERR_INPUT, "%s: --dim %s=%lld: a size must be positive", c->file,
                                   shown(dim->dim_param, pbuf, sizeof pbuf), (long long)size);
                dims[dd] = size;
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
        slot *s = new_slot(c, vi->name);
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
            if (!has_in(n, i))
                continue;
            slot *s = find_slot(c, n->input[i]);
            if (!s) {
                missing = true;
                why(c, "input '%s' is not defined before it is used", shown(n->input[i], buf, sizeof buf));
            } else if (s->state == S_POISON)
                poisoned = true;
        }
        op_fn fn = NULL;
        bool ok = false;
        if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx"))
            why(c, "unknown domain '%s'", shown(n->domain, buf, sizeof buf));
        else if (!(fn = find_op(n->op_type)))
            why(c, "unknown operator (minic has no equivalent yet)");
        else if (!missing && !poisoned)
            ok = fn(c, n);
        if (!ok) {
            if (!poisoned || !fn)
                report(c, n, (int)k, c->why[0] ? c->why : mc_error_message());
            for (size_t o = 0; o < n->n_output; o++)
                if (out_present(n, o) && !find_slot(c, n->output[o])) {
                    slot *s = new_slot(c, n->output[o]);
                    if (!s)
                        return mc_fail(MC_ERR_SYSTEM, "out of memory");
                    s->state = S_POISON;
                }
            continue;
        }
        for (size_t o = 0; o < n->n_output; o++)
            if (out_present(n, o) && !find_slot(c, n->output[o])) {
                c->why[0] = 0;
                report(c, n, (int)k, "an output this importer did not produce");
                slot *s = new_slot(c, n->output[o]);
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
        slot *s = vi ? find_slot(c, vi->name) : NULL;
        if (!s)
            return mc_fail(MC_ERR_INPUT, "%s: output %zu ('%s') is not computed by the graph", c->file, k,
                           vi ? shown(vi->name, buf, sizeof buf) : "");
        c->why[0] = 0;
        mc_value v = as_value(c, s);
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
    htensor *t = load_tensor(&c, tp, false);
    mc_dtype d;
    st = MC_OK;
    if (!t || !map_dtype(&c, t->elem, &d) || (d == MC_I32 && !fits_i32(&c, t, path)))
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
