/* A strict, small JSON reader (RFC 8259) for the safetensors header.
 *
 * The header is untrusted input that decides where every later read goes, so the reader
 * accepts exactly JSON and nothing more: UTF-8 is validated (no overlong forms, no surrogates
 * encoded directly, nothing past U+10FFFF), escapes are decoded, \u surrogate pairs must be
 * complete, control characters inside strings are refused, numbers follow the JSON grammar,
 * nesting is limited to MAX_DEPTH so a hostile file cannot exhaust the stack, and an object
 * with the same key twice is an error (otherwise two readers could disagree on which value
 * counts). Duplicate keys are found by sorting the keys, so a header with n tensors costs
 * O(n log n), not O(n²).
 *
 * The tree is built in the caller's arena as linked members (first/next), which needs no
 * growable arrays; numbers keep their source text so that sizes and offsets are read exactly
 * as integers (mc_json_int64) instead of through a double.
 */
#include "support/support.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_DEPTH = 64 };

typedef struct parser {
    const unsigned char *s;
    size_t n, pos;
    const char *name; /* the file, for messages */
    mc_arena *arena;
    int depth;
} parser;

static mc_status fail(parser *p, const char *what)
{
    return mc_fail(MC_ERR_INPUT, "%s: invalid JSON header at byte %zu: %s", p->name, p->pos,
                   what);
}

static mc_status out_of_memory(parser *p)
{
    return mc_fail(MC_ERR_SYSTEM, "%s: out of memory parsing the JSON header", p->name);
}

static void skip_space(parser *p)
{
    while (p->pos < p->n && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
                             p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
        p->pos++;
}

static int hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Four hex digits at p->pos; -1 if they are not there. */
static long read_hex4(parser *p)
{
    if (p->n - p->pos < 4)
        return -1;
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hex_value(p->s[p->pos + i]);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    p->pos += 4;
    return v;
}

static size_t put_utf8(unsigned char *out, unsigned long c)
{
    if (c < 0x80) {
        out[0] = (unsigned char)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (unsigned char)(0xC0 | (c >> 6));
        out[1] = (unsigned char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (c >> 12));
        out[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | (c >> 18));
    out[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
    out[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
    out[3] = (unsigned char)(0x80 | (c & 0x3F));
    return 4;
}

/* Length of the well-formed UTF-8 sequence at s[0..avail), or 0 if it is not one. */
static size_t utf8_length(const unsigned char *s, size_t avail)
{
    unsigned char c = s[0];
    size_t len;
    unsigned long min, cp;
    if (c < 0x80)
        return 1;
    if ((c & 0xE0) == 0xC0) {
        len = 2, min = 0x80, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
        len = 3, min = 0x800, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
        len = 4, min = 0x10000, cp = c & 0x07;
    } else {
        return 0;
    }
    if (avail < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

/* A string starting at the opening quote: decoded into the arena. */
static mc_status parse_string(parser *p, const char **text, size_t *len)
{
    p->pos++; /* the quote */
    /* First find the closing quote, to size the buffer: the decoded form is never longer. */
    size_t end = p->pos;
    while (end < p->n && p->s[end] != '"')
        end += p->s[end] == '\\' ? 2 : 1;
    if (end >= p->n)
        return fail(p, "unterminated string");
    unsigned char *out = mc_arena_alloc(p->arena, end - p->pos + 1);
    if (!out)
        return out_of_memory(p);
    size_t k = 0;
    while (p->s[p->pos] != '"') {
        unsigned char c = p->s[p->pos];
        if (c < 0x20)
            return fail(p, "control character in a string");
        if (c != '\\') {
            size_t ulen = utf8_length(p->s + p->pos, p->n - p->pos);
            if (ulen == 0)
                return fail(p, "invalid UTF-8 in a string");
            memcpy(out + k, p->s + p->pos, ulen);
            k += ulen;
            p->pos += ulen;
            continue;
        }
        p->pos++;
        char e = (char)p->s[p->pos++];
        switch (e) {
        case '"': out[k++] = '"'; break;
        case '\\': out[k++] = '\\'; break;
        case '/': out[k++] = '/'; break;
        case 'b': out[k++] = '\b'; break;
        case 'f': out[k++] = '\f'; break;
        case 'n': out[k++] = '\n'; break;
        case 'r': out[k++] = '\r'; break;
        case 't': out[k++] = '\t'; break;
        case 'u': {
            long c1 = read_hex4(p);
            if (c1 < 0)
                return fail(p, "\\u needs four hex digits");
            unsigned long cp = (unsigned long)c1;
            if (c1 >= 0xDC00 && c1 <= 0xDFFF)
                return fail(p, "unpaired low surrogate in \\u escape");
            if (c1 >= 0xD800 && c1 <= 0xDBFF) {
                if (p->n - p->pos < 2 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u')
                    return fail(p, "high surrogate not followed by a \\u low surrogate");
                p->pos += 2;
                long c2 = read_hex4(p);
                if (c2 < 0xDC00 || c2 > 0xDFFF)
                    return fail(p, "high surrogate not followed by a \\u low surrogate");
                cp = 0x10000 + (((unsigned long)c1 - 0xD800) << 10) + ((unsigned long)c2 - 0xDC00);
            }
            k += put_utf8(out + k, cp);
            break;
        }
        default:
            p->pos--;
            return fail(p, "unknown escape sequence");
        }
    }
    p->pos++; /* the closing quote */
    out[k] = '\0';
    *text = (const char *)out;
    *len = k;
    return MC_OK;
}

static bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static mc_status parse_number(parser *p, mc_json *v)
{
    size_t start = p->pos;
    if (p->pos < p->n && p->s[p->pos] == '-')
        p->pos++;
    if (p->pos >= p->n || !is_digit(p->s[p->pos]))
        return fail(p, "expected a digit");
    if (p->s[p->pos] == '0') {
        p->pos++;
    } else {
        while (p->pos < p->n && is_digit(p->s[p->pos]))
            p->pos++;
    }
    if (p->pos < p->n && p->s[p->pos] == '.') {
        p->pos++;
        if (p->pos >= p->n || !is_digit(p->s[p->pos]))
            return fail(p, "expected a digit after '.'");
        while (p->pos < p->n && is_digit(p->s[p->pos]))
            p->pos++;
    }
    if (p->pos < p->n && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
        p->pos++;
        if (p->pos < p->n && (p->s[p->pos] == '+' || p->s[p->pos] == '-'))
            p->pos++;
        if (p->pos >= p->n || !is_digit(p->s[p->pos]))
            return fail(p, "expected a digit in the exponent");
        while (p->pos < p->n && is_digit(p->s[p->pos]))
            p->pos++;
    }
    v->kind = MC_JSON_NUMBER;
    v->len = p->pos - start;
    v->text = mc_arena_strndup(p->arena, (const char *)p->s + start, v->len);
    return v->text ? MC_OK : out_of_memory(p);
}

static int compare_keys(const void *a, const void *b)
{
    const mc_json *x = *(const mc_json *const *)a, *y = *(const mc_json *const *)b;
    size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(x->key, y->key, n);
    if (c)
        return c;
    return (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

/* A key made printable for a message: at most 60 bytes, odd bytes as '?'. */
static void printable(const char *s, size_t n, char *buf, size_t size)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 4 < size; i++) {
        if (i == 60) {
            memcpy(buf + k, "...", 3);
            k += 3;
            break;
        }
        unsigned char c = (unsigned char)s[i];
        buf[k++] = c >= 0x20 && c < 0x7F ? (char)c : '?';
    }
    buf[k] = '\0';
}

static mc_status check_duplicates(parser *p, mc_json *object)
{
    if (object->count < 2)
        return MC_OK;
    mc_json **members = malloc((size_t)object->count * sizeof *members);
    if (!members)
        return out_of_memory(p);
    int i = 0;
    for (mc_json *m = object->first; m; m = m->next)
        members[i++] = m;
    qsort(members, (size_t)object->count, sizeof *members, compare_keys);
    mc_status st = MC_OK;
    for (i = 1; i < object->count && st == MC_OK; i++)
        if (compare_keys(&members[i - 1], &members[i]) == 0) {
            char key[80], what[128];
            printable(members[i]->key, members[i]->key_len, key, sizeof key);
            snprintf(what, sizeof what, "duplicate key \"%s\"", key);
            st = fail(p, what);
        }
    free(members);
    return st;
}

static mc_status parse_value(parser *p, mc_json **out);

/* An array or object starting at its bracket. */
static mc_status parse_container(parser *p, mc_json *v, bool object)
{
    if (++p->depth > MAX_DEPTH)
        return fail(p, "nested too deeply");
    char close = object ? '}' : ']';
    v->kind = object ? MC_JSON_OBJECT : MC_JSON_ARRAY;
    p->pos++;
    skip_space(p);
    mc_json **tail = &v->first;
    if (p->pos < p->n && p->s[p->pos] == close) {
        p->pos++;
        p->depth--;
        return MC_OK;
    }
    for (;;) {
        const char *key = NULL;
        size_t key_len = 0;
        skip_space(p);
        if (object) {
            if (p->pos >= p->n || p->s[p->pos] != '"')
                return fail(p, "expected a string key");
            mc_status st = parse_string(p, &key, &key_len);
            if (st != MC_OK)
                return st;
            skip_space(p);
            if (p->pos >= p->n || p->s[p->pos] != ':')
                return fail(p, "expected ':' after a key");
            p->pos++;
        }
        mc_json *m;
        mc_status st = parse_value(p, &m);
        if (st != MC_OK)
            return st;
        m->key = key;
        m->key_len = key_len;
        *tail = m;
        tail = &m->next;
        if (v->count == INT32_MAX)
            return fail(p, "too many members");
        v->count++;
        skip_space(p);
        if (p->pos < p->n && p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->n && p->s[p->pos] == close) {
            p->pos++;
            break;
        }
        return fail(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
    p->depth--;
    return object ? check_duplicates(p, v) : MC_OK;
}

static bool match_word(parser *p, const char *word)
{
    size_t n = strlen(word);
    if (p->n - p->pos < n || memcmp(p->s + p->pos, word, n) != 0)
        return false;
    p->pos += n;
    return true;
}

static mc_status parse_value(parser *p, mc_json **out)
{
    skip_space(p);
    if (p->pos >= p->n)
        return fail(p, "unexpected end of the header");
    mc_json *v = mc_arena_alloc(p->arena, sizeof *v);
    if (!v)
        return out_of_memory(p);
    *out = v;
    unsigned char c = p->s[p->pos];
    switch (c) {
    case '{':
    case '[':
        return parse_container(p, v, c == '{');
    case '"':
        v->kind = MC_JSON_STRING;
        return parse_string(p, &v->text, &v->len);
    case 't':
    case 'f':
    case 'n':
        if (match_word(p, "true") || match_word(p, "false")) {
            v->kind = MC_JSON_BOOL;
            v->boolean = c == 't';
            return MC_OK;
        }
        if (match_word(p, "null")) {
            v->kind = MC_JSON_NULL;
            return MC_OK;
        }
        return fail(p, "unknown word");
    default:
        if (c == '-' || is_digit(c))
            return parse_number(p, v);
        return fail(p, "unexpected character");
    }
}

mc_status mc_json_parse(const char *text, size_t size, const char *name, mc_arena *arena,
                        mc_json **out)
{
    parser p = {(const unsigned char *)text, size, 0, name, arena, 0};
    *out = NULL;
    mc_json *v;
    mc_status st = parse_value(&p, &v);
    if (st != MC_OK)
        return st;
    skip_space(&p);
    if (p.pos != p.n)
        return fail(&p, "unexpected text after the JSON value");
    *out = v;
    return MC_OK;
}

const mc_json *mc_json_get(const mc_json *object, const char *key)
{
    if (!object || object->kind != MC_JSON_OBJECT)
        return NULL;
    size_t n = strlen(key);
    for (const mc_json *m = object->first; m; m = m->next)
        if (m->key_len == n && memcmp(m->key, key, n) == 0)
            return m;
    return NULL;
}

bool mc_json_int64(const mc_json *v, int64_t *out)
{
    if (!v || v->kind != MC_JSON_NUMBER)
        return false;
    const char *s = v->text;
    bool negative = *s == '-';
    if (negative)
        s++;
    int64_t x = 0;
    for (; *s; s++) {
        if (!is_digit((unsigned char)*s))
            return false; /* a fraction or an exponent */
        /* Accumulate negatively so INT64_MIN is representable. */
        if (mc_mul_overflows(x, 10, &x) || mc_add_overflows(x, -(*s - '0'), &x))
            return false;
    }
    if (!negative && x == INT64_MIN)
        return false;
    *out = negative ? x : -x;
    return true;
}

bool mc_json_valid_utf8(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t len = utf8_length(u + i, n - i);
        if (len == 0)
            return false;
        i += len;
    }
    return true;
}
