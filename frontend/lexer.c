/* The `.graph` lexer: bytes to tokens, with the line and column of each.
 *
 * The format is line-oriented (one statement per line), so a newline is a token of its own and
 * everything else between tokens — spaces, tabs, carriage returns, `#` comments — is skipped.
 * Words are lexed as names whatever they spell, except `inf` and `nan`, which are numbers; the
 * parser decides which words are reserved where. Numbers are only checked for their form here
 * (sign, digits, fraction, exponent, and nothing glued to the end such as `1x` or `1.2.3`);
 * their value is converted by the parser, which knows whether it wants an INT or a NUMBER.
 *
 * The lexer never allocates and never reports: a bad character or number comes back as an
 * MC_TOK_ERROR token whose message sits in the lexer, so the parser can also use the lexer to
 * scan ahead without disturbing the error of the calling thread. mc_text_check runs once over
 * the whole text first, so that the lexer may assume valid UTF-8, no NUL byte, and positions
 * that fit in an int.
 */
#include "frontend/frontend.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

/* ---- the whole-text check ----------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at p (1..4), or 0 if the bytes there are not one. */
static int utf8_sequence(const unsigned char *p, const unsigned char *end, unsigned *code)
{
    if (p >= end)
        return 0;
    unsigned c = p[0];
    if (c < 0x80) {
        *code = c;
        return 1;
    }
    int n;
    unsigned min;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2, min = 0x80, c &= 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3, min = 0x800, c &= 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4, min = 0x10000, c &= 0x07;
    } else {
        return 0; /* a continuation byte, an overlong lead (C0, C1) or F5..FF */
    }
    if (end - p < n)
        return 0;
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        c = (c << 6) | (p[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
        return 0;
    *code = c;
    return n;
}

int mc_utf8_length(const char *p, const char *end)
{
    unsigned code;
    return utf8_sequence((const unsigned char *)p, (const unsigned char *)end, &code);
}

bool mc_text_check(const char *text, size_t len, size_t *bad_offset, char *why, size_t why_size)
{
    if (len >= (size_t)INT_MAX) {
        *bad_offset = 0;
        snprintf(why, why_size, "the file is too large (%zu bytes; the most is %d)", len,
                 INT_MAX - 1);
        return false;
    }
    const unsigned char *p = (const unsigned char *)text, *end = p + len;
    while (p < end) {
        if (*p == 0) {
            *bad_offset = (size_t)(p - (const unsigned char *)text);
            snprintf(why, why_size, "NUL byte in the graph file (it must be UTF-8 text)");
            return false;
        }
        if (*p < 0x80) { /* the common case, without the decoder */
            p++;
            continue;
        }
        unsigned code;
        int n = utf8_sequence(p, end, &code);
        if (n == 0) {
            *bad_offset = (size_t)(p - (const unsigned char *)text);
            snprintf(why, why_size, "invalid UTF-8 (byte 0x%02X): the graph file must be UTF-8 text",
                     *p);
            return false;
        }
        p += n;
    }
    return true;
}

/* ---- tokens ------------------------------------------------------------------------------- */

void mc_lexer_init(mc_lexer *lx, const char *text, size_t len)
{
    lx->pos = text;
    lx->end = text + len;
    lx->line_start = text;
    lx->line = 1;
    lx->error[0] = '\0';
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
        lx->pos += 3; /* a UTF-8 byte-order mark, as some editors write: not a character */
}

static bool is_name_start(int c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
static bool is_digit(int c) { return c >= '0' && c <= '9'; }
static bool is_name_char(int c) { return is_name_start(c) || is_digit(c) || c == '.'; }

static int peek_at(const mc_lexer *lx, const char *p)
{
    return p < lx->end ? (unsigned char)*p : -1;
}

/* Length of the word (name characters) that starts at p. */
static size_t word_length(const mc_lexer *lx, const char *p)
{
    const char *q = p;
    while (q < lx->end && is_name_char((unsigned char)*q))
        q++;
    return (size_t)(q - p);
}

static bool is_inf_or_nan(const char *p, size_t n)
{
    return n == 3 && (memcmp(p, "inf", 3) == 0 || memcmp(p, "nan", 3) == 0);
}

static mc_token make(mc_lexer *lx, mc_token_kind kind, const char *start, size_t len)
{
    mc_token t = {kind, start, len, lx->line, (int)(start - lx->line_start) + 1, false};
    lx->pos = start + len;
    return t;
}

static mc_token lex_error(mc_lexer *lx, const char *start, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static mc_token lex_error(mc_lexer *lx, const char *start, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(lx->error, sizeof lx->error, fmt, ap);
    va_end(ap);
    return make(lx, MC_TOK_ERROR, start, len);
}

/* A number starting at p (a sign, a digit or a '.' followed by a digit). */
static mc_token lex_number(mc_lexer *lx, const char *start)
{
    const char *p = start;
    bool is_int = true;
    if (*p == '+' || *p == '-') {
        if (*p == '+')
            is_int = false; /* INT is "optional '-', decimal digits" */
        p++;
        size_t w = word_length(lx, p);
        if (w > 0 && is_name_start((unsigned char)*p)) {
            if (is_inf_or_nan(p, w)) {
                mc_token t = make(lx, MC_TOK_NUMBER, start, (size_t)(p + w - start));
                return t;
            }
            return lex_error(lx, start, 1, "expected a number after '%c'", *start);
        }
    }
    size_t digits = 0;
    while (is_digit(peek_at(lx, p)))
        p++, digits++;
    if (peek_at(lx, p) == '.') {
        is_int = false;
        p++;
        while (is_digit(peek_at(lx, p)))
            p++, digits++;
    }
    bool ok = digits > 0;
    if (ok && (peek_at(lx, p) == 'e' || peek_at(lx, p) == 'E')) {
        is_int = false;
        p++;
        if (peek_at(lx, p) == '+' || peek_at(lx, p) == '-')
            p++;
        size_t exp_digits = 0;
        while (is_digit(peek_at(lx, p)))
            p++, exp_digits++;
        ok = exp_digits > 0;
    }
    /* Anything glued to the number makes it a bad one: take the whole run for the message. */
    const char *q = p;
    while (q < lx->end && (is_name_char((unsigned char)*q) || *q == '+' || *q == '-'))
        q++;
    if (!ok || q != p) {
        size_t n = (size_t)(q - start);
        if (n == 1)
            return lex_error(lx, start, 1, "expected a number after '%c'", *start);
        return lex_error(lx, start, n, "invalid number '%.*s'", n > 40 ? 40 : (int)n, start);
    }
    mc_token t = make(lx, MC_TOK_NUMBER, start, (size_t)(p - start));
    t.is_int = is_int;
    return t;
}

mc_token mc_lexer_next(mc_lexer *lx)
{
    for (;;) {
        const char *p = lx->pos;
        if (p >= lx->end)
            return make(lx, MC_TOK_EOF, p, 0);
        int c = (unsigned char)*p;
        if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
            lx->pos++;
            continue;
        }
        if (c == '#') {
            const char *nl = memchr(p, '\n', (size_t)(lx->end - p));
            lx->pos = nl ? nl : lx->end;
            continue;
        }
        if (c == '\n') {
            mc_token t = make(lx, MC_TOK_NEWLINE, p, 1);
            lx->line++;
            lx->line_start = lx->pos;
            return t;
        }
        if (is_name_start(c)) {
            size_t n = word_length(lx, p);
            mc_token t = make(lx, is_inf_or_nan(p, n) ? MC_TOK_NUMBER : MC_TOK_NAME, p, n);
            return t;
        }
        int next = peek_at(lx, p + 1);
        if (is_digit(c) || c == '+' || c == '-' || (c == '.' && is_digit(next)))
            return lex_number(lx, p);
        switch (c) {
        case ':': return make(lx, MC_TOK_COLON, p, 1);
        case '=': return make(lx, MC_TOK_EQUALS, p, 1);
        case ',': return make(lx, MC_TOK_COMMA, p, 1);
        case '(': return make(lx, MC_TOK_LPAREN, p, 1);
        case ')': return make(lx, MC_TOK_RPAREN, p, 1);
        case '[': return make(lx, MC_TOK_LBRACKET, p, 1);
        case ']': return make(lx, MC_TOK_RBRACKET, p, 1);
        case '<':
            if (next == '=')
                return make(lx, MC_TOK_LE, p, 2);
            break;
        default: break;
        }
        if (c >= 0x80) {
            unsigned code = 0;
            int n = utf8_sequence((const unsigned char *)p, (const unsigned char *)lx->end, &code);
            if (n == 0)
                n = 1; /* not reached after mc_text_check; kept safe for direct callers */
            return lex_error(lx, p, (size_t)n,
                             "unexpected character U+%04X (names and numbers are ASCII)", code);
        }
        if (c < 0x20 || c == 0x7F)
            return lex_error(lx, p, 1, "unexpected control character 0x%02X", c);
        return lex_error(lx, p, 1, "unexpected character '%c'", c);
    }
}
