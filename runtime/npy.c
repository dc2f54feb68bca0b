/* Reading and writing NumPy .npy files (format 1.0 and 2.0), docs/FORMAT.md §4.
 *
 * A .npy file is a 6-byte magic, a version, a little-endian header length (2 bytes in 1.0, 4 in
 * 2.0), a header that is a Python dict literal ({'descr': '<f4', 'fortran_order': False,
 * 'shape': (2, 3), }) padded with spaces and a newline, then the raw C-order data.
 *
 * The reader is split into mc_npy_parse, which works on bytes in memory (so the fuzzer can
 * drive it without touching the disk), and mc_npy_read, which reads the file and runs the
 * same checks (parse_file), then keeps the data in the file's own buffer (one copy in memory).
 * Every field is checked before it is used: the header length against the file, the dict by a
 * small parser for the Python-literal subset NumPy writes (either quote, free spacing,
 * trailing commas, `(n,)` tuples, Python 2 `L` suffixes), each key present exactly once, no
 * Fortran order, only the little-endian dtypes minic has, every dimension product and byte
 * count through checked multiplication, and the data exactly as long as the header says —
 * a short file and trailing bytes are both errors, each with a message naming the file.
 *
 * bf16 has no NumPy dtype; the convention (ml_dtypes, PyTorch's .numpy() on a view) is to
 * store its raw bits as <u2, so <u2 is read as bf16 only when the caller expects bf16.
 * NumPy's default integer is int64 (`np.array([1, 2])` is <i8), so <i8 is read when the caller
 * expects i32, narrowed in place, and refused at the first value outside i32's range (docs/FORMAT.md §4).
 * Writing goes through mc_file_write_atomic: no partial file is ever left behind.
 */
#include "runtime/runtime.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "minic's file formats are little-endian and assume a little-endian host"
#endif

static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* The dtype's descr as written; bf16 is stored as its raw bits. */
static const char *descr_of(mc_dtype d)
{
    switch (d) {
    case MC_F32: return "<f4";
    case MC_F16: return "<f2";
    case MC_BF16: return "<u2";
    case MC_I32: return "<i4";
    case MC_BOOL: return "|b1";
    default: return NULL;
    }
}

/* ---- the header dict ---------------------------------------------------------------------- */

typedef struct header_parser {
    const char *s;
    size_t n, pos;
    const char *name;
} header_parser;

static mc_status bad_header(header_parser *h, const char *what)
{
    return mc_fail(MC_ERR_INPUT, "%s: malformed .npy header at byte %zu of the dict: %s", h->name,
                   h->pos, what);
}

static void skip_space(header_parser *h)
{
    while (h->pos < h->n && (h->s[h->pos] == ' ' || h->s[h->pos] == '\t' ||
                             h->s[h->pos] == '\n' || h->s[h->pos] == '\r'))
        h->pos++;
}

static bool at(header_parser *h, char c) { return h->pos < h->n && h->s[h->pos] == c; }

/* A quoted Python string ('..' or ".."), without escapes, into buf. */
static mc_status parse_string(header_parser *h, char *buf, size_t size)
{
    if (!at(h, '\'') && !at(h, '"'))
        return bad_header(h, "expected a quoted string");
    char quote = h->s[h->pos++];
    size_t k = 0;
    while (h->pos < h->n && h->s[h->pos] != quote) {
        char c = h->s[h->pos];
        if (c == '\\' || c == '\n')
            return bad_header(h, "unsupported character in a string");
        if (k + 1 >= size)
            return bad_header(h, "string too long");
        buf[k++] = c;
        h->pos++;
    }
    if (h->pos >= h->n)
        return bad_header(h, "unterminated string");
    h->pos++;
    buf[k] = '\0';
    return MC_OK;
}

static bool match_word(header_parser *h, const char *word)
{
    size_t n = strlen(word);
    if (h->n - h->pos < n || memcmp(h->s + h->pos, word, n) != 0)
        return false;
    /* The word must end here: "Truex" is not True. */
    size_t end = h->pos + n;
    if (end < h->n && (h->s[end] == '_' || (h->s[end] >= 'a' && h->s[end] <= 'z') ||
                       (h->s[end] >= 'A' && h->s[end] <= 'Z') ||
                       (h->s[end] >= '0' && h->s[end] <= '9')))
        return false;
    h->pos = end;
    return true;
}

/* (d0, d1, ...) with an optional trailing comma; [..] is taken too. */
static mc_status parse_shape(header_parser *h, int *rank, int64_t *shape)
{
    if (!at(h, '(') && !at(h, '['))
        return bad_header(h, "'shape' must be a tuple of integers");
    char close = h->s[h->pos] == '(' ? ')' : ']';
    h->pos++;
    *rank = 0;
    for (;;) {
        skip_space(h);
        if (at(h, close)) {
            h->pos++;
            return MC_OK;
        }
        if (h->pos >= h->n || h->s[h->pos] < '0' || h->s[h->pos] > '9')
            return bad_header(h, at(h, '-') ? "negative dimension in 'shape'"
                                            : "expected a dimension in 'shape'");
        int64_t d = 0;
        while (h->pos < h->n && h->s[h->pos] >= '0' && h->s[h->pos] <= '9') {
            if (mc_mul_overflows(d, 10, &d) || mc_add_overflows(d, h->s[h->pos] - '0', &d))
                return bad_header(h, "dimension too large");
            h->pos++;
        }
        if (at(h, 'L') || at(h, 'l')) /* Python 2 long */
            h->pos++;
        if (*rank == MC_MAX_RANK)
            return mc_fail(MC_ERR_INPUT, "%s: more than %d dimensions", h->name, MC_MAX_RANK);
        shape[(*rank)++] = d;
        skip_space(h);
        if (at(h, ',')) {
            h->pos++;
            continue;
        }
        if (!at(h, close))
            return bad_header(h, "expected ',' or the end of 'shape'");
    }
}

typedef struct npy_header {
    char descr[32];
    bool fortran_order;
    int rank;
    int64_t shape[MC_MAX_RANK];
} npy_header;

static mc_status parse_dict(header_parser *h, npy_header *out)
{
    bool seen_descr = false, seen_order = false, seen_shape = false;
    skip_space(h);
    if (!at(h, '{'))
        return bad_header(h, "expected '{'");
    h->pos++;
    for (;;) {
        skip_space(h);
        if (at(h, '}')) {
            h->pos++;
            break;
        }
        char key[32];
        mc_status st = parse_string(h, key, sizeof key);
        if (st != MC_OK)
            return st;
        skip_space(h);
        if (!at(h, ':'))
            return bad_header(h, "expected ':' after a key");
        h->pos++;
        skip_space(h);
        bool *seen;
        if (strcmp(key, "descr") == 0) {
            seen = &seen_descr;
            if (at(h, '['))
                return mc_fail(MC_ERR_INPUT, "%s: structured dtypes are not supported", h->name);
            st = parse_string(h, out->descr, sizeof out->descr);
        } else if (strcmp(key, "fortran_order") == 0) {
            seen = &seen_order;
            if (match_word(h, "True"))
                out->fortran_order = true;
            else if (match_word(h, "False"))
                out->fortran_order = false;
            else
                st = bad_header(h, "'fortran_order' must be True or False");
        } else if (strcmp(key, "shape") == 0) {
            seen = &seen_shape;
            st = parse_shape(h, &out->rank, out->shape);
        } else {
            return bad_header(h, "unknown key (expected 'descr', 'fortran_order', 'shape')");
        }
        if (st != MC_OK)
            return st;
        if (*seen)
            return bad_header(h, "key given twice");
        *seen = true;
        skip_space(h);
        if (at(h, ',')) {
            h->pos++;
            continue;
        }
        if (!at(h, '}'))
            return bad_header(h, "expected ',' or '}'");
    }
    skip_space(h);
    if (h->pos != h->n)
        return bad_header(h, "unexpected text after the dict");
    if (!seen_descr || !seen_order || !seen_shape)
        return mc_fail(MC_ERR_INPUT, "%s: malformed .npy header: missing '%s'", h->name,
                       !seen_descr ? "descr" : !seen_order ? "fortran_order" : "shape");
    return MC_OK;
}

/* ---- reading ------------------------------------------------------------------------------ */

/* *wide is set when the file holds <i8 to be narrowed to i32 (8 bytes per element on disk). */
static mc_status dtype_of(const char *name, const char *descr, mc_dtype want, mc_dtype *out,
                          bool *wide)
{
    *wide = false;
    if (descr[0] == '>')
        return mc_fail(MC_ERR_INPUT, "%s: big-endian data ('%s') is not supported", name, descr);
    mc_dtype d;
    if (strcmp(descr, "<f4") == 0)
        d = MC_F32;
    else if (strcmp(descr, "<f2") == 0)
        d = MC_F16;
    else if (strcmp(descr, "<i4") == 0)
        d = MC_I32;
    else if (strcmp(descr, "<i8") == 0 && want == MC_I32) {
        d = MC_I32;
        *wide = true;
    } else if (strcmp(descr, "|b1") == 0)
        d = MC_BOOL;
    else if (strcmp(descr, "<u2") == 0) {
        if (want != MC_BF16)
            return mc_fail(MC_ERR_INPUT,
                           "%s: dtype '<u2' is read only as raw bf16 bits, when bf16 is expected",
                           name);
        d = MC_BF16;
    } else {
        return mc_fail(MC_ERR_INPUT,
                       "%s: unsupported dtype '%s' (minic reads <f4, <f2, <i4, |b1, <u2 as bf16 "
                       "and <i8 as i32)",
                       name, descr);
    }
    if (want < MC_NUM_DTYPES && d != want)
        return mc_fail(MC_ERR_INPUT, "%s: holds %s data ('%s') but %s is expected", name,
                       mc_dtype_name(d), descr, mc_dtype_name(want));
    *out = d;
    return MC_OK;
}

static uint32_t load_le(const unsigned char *p, int bytes)
{
    uint32_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Parse and check everything; on success out holds dtype, rank and shape, and the data is
 * bytes [*data_offset, size) of the input (out->data not set). *wide: the data is <i8 that
 * narrow_i64 turns into out's i32 (out->bytes is then the file's, twice the result's). */
static mc_status parse_file(const void *data, size_t size, const char *name, mc_dtype want,
                            mc_array *out, size_t *data_offset, bool *wide)
{
    memset(out, 0, sizeof *out);
    const unsigned char *b = data;
    if (size < 10 || memcmp(b, npy_magic, sizeof npy_magic) != 0)
        return mc_fail(MC_ERR_INPUT, "%s: not a .npy file (bad magic)", name);
    int major = b[6], minor = b[7];
    if ((major != 1 && major != 2) || minor != 0)
        return mc_fail(MC_ERR_INPUT, "%s: unsupported .npy version %d.%d (minic reads 1.0 and 2.0)",
                       name, major, minor);
    size_t prefix = major == 1 ? 10 : 12;
    if (size < prefix)
        return mc_fail(MC_ERR_INPUT, "%s: truncated .npy preamble", name);
    size_t header_len = load_le(b + 8, major == 1 ? 2 : 4);
    if (header_len > size - prefix)
        return mc_fail(MC_ERR_INPUT,
                       "%s: header length %zu runs past the end of the file (%zu bytes)", name,
                       header_len, size);

    npy_header hd;
    memset(&hd, 0, sizeof hd);
    header_parser h = {(const char *)b + prefix, header_len, 0, name};
    mc_status st = parse_dict(&h, &hd);
    if (st != MC_OK)
        return st;
    if (hd.fortran_order)
        return mc_fail(MC_ERR_INPUT, "%s: Fortran-order arrays are not supported", name);
    mc_dtype dtype = MC_F32; /* set by dtype_of; initialized for GCC -O2 */
    st = dtype_of(name, hd.descr, want, &dtype, wide);
    if (st != MC_OK)
        return st;

    int64_t numel = 1, bytes;
    for (int i = 0; i < hd.rank; i++)
        if (mc_mul_overflows(numel, hd.shape[i], &numel))
            return mc_fail(MC_ERR_INPUT, "%s: shape's element count overflows", name);
    if (mc_mul_overflows(numel, *wide ? 8 : (int64_t)mc_dtype_size(dtype), &bytes))
        return mc_fail(MC_ERR_INPUT, "%s: shape's byte size overflows", name);
    size_t have = size - prefix - header_len;
    if ((uint64_t)bytes != have)
        return mc_fail(MC_ERR_INPUT, "%s: data is %zu bytes but the header's shape needs %lld (%s)",
                       name, have, (long long)bytes,
                       have < (uint64_t)bytes ? "file truncated" : "trailing bytes");

    out->dtype = dtype;
    out->rank = hd.rank;
    memcpy(out->shape, hd.shape, sizeof hd.shape);
    out->bytes = have;
    *data_offset = prefix + header_len;
    return MC_OK;
}

/* <i8 into i32, in place (element i moves from byte 8i to 4i: never over one not read yet);
 * an input error at the first value that does not fit. */
static mc_status narrow_i64(const char *name, mc_array *a)
{
    size_t n = a->bytes / 8;
    unsigned char *p = a->data;
    for (size_t i = 0; i < n; i++) {
        int64_t v;
        memcpy(&v, p + 8 * i, 8);
        if (v < INT32_MIN || v > INT32_MAX) {
            char where[160] = "";
            if (a->rank > 1) { /* the multi-index too: "[1, 0, 3]" */
                size_t rest = i, used = 0;
                int64_t idx[MC_MAX_RANK];
                for (int d = a->rank - 1; d >= 0; d--) {
                    idx[d] = (int64_t)(rest % (size_t)a->shape[d]);
                    rest /= (size_t)a->shape[d];
                }
                used += (size_t)snprintf(where, sizeof where, " [");
                for (int d = 0; d < a->rank && used < sizeof where; d++)
                    used += (size_t)snprintf(where + used, sizeof where - used, "%s%lld",
                                             d ? ", " : "", (long long)idx[d]);
                if (used < sizeof where)
                    snprintf(where + used, sizeof where - used, "]");
            }
            return mc_fail(MC_ERR_INPUT,
                           "%s: int64 value %lld at element %zu%s does not fit in i32 (<i8 is "
                           "read as i32 only when every value fits)",
                           name, (long long)v, i, where);
        }
        int32_t w = (int32_t)v;
        memcpy(p + 4 * i, &w, 4);
    }
    a->bytes = n * 4;
    return MC_OK;
}

/* NumPy bools are 0/1; any other byte means true. */
static void normalize_bools(mc_array *a)
{
    if (a->dtype == MC_BOOL)
        for (size_t i = 0; i < a->bytes; i++)
            ((unsigned char *)a->data)[i] = ((unsigned char *)a->data)[i] != 0;
}

mc_status mc_npy_parse(const void *data, size_t size, const char *name, mc_dtype want,
                       mc_array *out)
{
    size_t offset;
    bool wide;
    mc_status st = parse_file(data, size, name, want, out, &offset, &wide);
    if (st != MC_OK)
        return st;
    out->data = malloc(out->bytes ? out->bytes : 1);
    if (!out->data) {
        memset(out, 0, sizeof *out);
        return mc_fail(MC_ERR_SYSTEM, "%s: out of memory", name);
    }
    memcpy(out->data, (const unsigned char *)data + offset, out->bytes);
    if (wide && (st = narrow_i64(name, out)) != MC_OK) {
        free(out->data);
        memset(out, 0, sizeof *out);
        return st;
    }
    normalize_bools(out);
    return MC_OK;
}

mc_status mc_npy_read(const char *path, mc_dtype want, mc_array *out)
{
    memset(out, 0, sizeof *out);
    char *data;
    size_t size, offset;
    bool wide;
    mc_status st = mc_file_read_all(path, &data, &size);
    if (st != MC_OK)
        return st;
    st = parse_file(data, size, path, want, out, &offset, &wide);
    if (st != MC_OK) {
        free(data);
        return st;
    }
    /* Slide the data to the front of the file's buffer rather than holding two copies. */
    memmove(data, data + offset, out->bytes);
    out->data = data;
    if (wide && (st = narrow_i64(path, out)) != MC_OK) {
        free(data);
        memset(out, 0, sizeof *out);
        return st;
    }
    char *shrunk = realloc(data, out->bytes ? out->bytes : 1);
    out->data = shrunk ? shrunk : data;
    normalize_bools(out);
    return MC_OK;
}

/* ---- writing ------------------------------------------------------------------------------ */

typedef struct npy_writer {
    const char *path;
    const mc_array *a;
    char header[256]; /* the dict, padded; rank <= 8 keeps it far below this */
    size_t header_len;
} npy_writer;

static mc_status write_npy(FILE *f, void *ctx)
{
    npy_writer *w = ctx;
    unsigned char pre[10];
    memcpy(pre, npy_magic, sizeof npy_magic);
    pre[6] = 1;
    pre[7] = 0;
    pre[8] = (unsigned char)(w->header_len & 0xFF);
    pre[9] = (unsigned char)(w->header_len >> 8);
    if (fwrite(pre, 1, sizeof pre, f) != sizeof pre ||
        fwrite(w->header, 1, w->header_len, f) != w->header_len ||
        (w->a->bytes && fwrite(w->a->data, 1, w->a->bytes, f) != w->a->bytes))
        return mc_fail(MC_ERR_SYSTEM, "%s: write failed: %s", w->path, strerror(errno));
    return MC_OK;
}

mc_status mc_array_check(const char *path, const char *what, const mc_array *a)
{
    if (!descr_of(a->dtype))
        return mc_fail(MC_ERR_INPUT, "%s: %s: invalid dtype", path, what);
    if (a->rank < 0 || a->rank > MC_MAX_RANK)
        return mc_fail(MC_ERR_INPUT, "%s: %s: rank %d is out of range", path, what, a->rank);
    int64_t numel = 1, bytes;
    for (int i = 0; i < a->rank; i++)
        if (a->shape[i] < 0 || mc_mul_overflows(numel, a->shape[i], &numel))
            return mc_fail(MC_ERR_INPUT, "%s: %s: invalid shape", path, what);
    if (mc_mul_overflows(numel, (int64_t)mc_dtype_size(a->dtype), &bytes) ||
        (uint64_t)bytes != a->bytes)
        return mc_fail(MC_ERR_INPUT, "%s: %s: %zu bytes of data do not match its shape", path,
                       what, a->bytes);
    if (a->bytes && !a->data)
        return mc_fail(MC_ERR_INPUT, "%s: %s: no data", path, what);
    return MC_OK;
}

/* The padded header dict for a (already checked). */
static void build_header(npy_writer *w, const mc_array *a)
{
    char shape[8 * 24 + 8] = "";
    size_t k = 0;
    for (int i = 0; i < a->rank; i++)
        k += (size_t)snprintf(shape + k, sizeof shape - k, i ? ", %lld" : "%lld",
                              (long long)a->shape[i]);
    if (a->rank == 1)
        snprintf(shape + k, sizeof shape - k, ",");
    int n = snprintf(w->header, sizeof w->header,
                     "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr_of(a->dtype),
                     shape);
    /* Pad with spaces and a final newline so the data starts at a multiple of 64 bytes. */
    size_t len = (size_t)n + 1;
    size_t total = (10 + len + 63) / 64 * 64;
    len = total - 10;
    MC_ASSERT(len < sizeof w->header);
    memset(w->header + n, ' ', len - (size_t)n - 1);
    w->header[len - 1] = '\n';
    w->header_len = len;
}

mc_status mc_npy_write(const char *path, const mc_array *a)
{
    mc_status st = mc_array_check(path, "array", a);
    if (st != MC_OK)
        return st;
    npy_writer w = {.path = path, .a = a};
    build_header(&w, a);
    return mc_file_write_atomic(path, write_npy, &w);
}

mc_status mc_npy_write_stream(FILE *f, const char *name, const mc_array *a)
{
    mc_status st = mc_array_check(name, "array", a);
    if (st != MC_OK)
        return st;
    npy_writer w = {.path = name, .a = a};
    build_header(&w, a);
    return write_npy(f, &w);
}
