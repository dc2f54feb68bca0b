/* The `.graph` front end's internal interface: the lexer that frontend/parser.c drives, and the
 * length-based parse entry point that mc_graph_parse_file, mc_graph_parse_string and the fuzz
 * target share.
 *
 * The lexer works on one text that the caller has already checked (mc_text_check: valid UTF-8,
 * no NUL bytes, shorter than INT_MAX bytes, so every line and column fits in an int). It hands
 * out one token at a time; tokens point into the text, so nothing is copied. Its errors are
 * returned as a TOK_ERROR token carrying the message, never reported directly: the parser
 * decides what to do with them (report them, or ignore them while it scans ahead for a
 * definition).
 */
#ifndef MINIC_FRONTEND_H
#define MINIC_FRONTEND_H

#include "ir/ir.h"

typedef enum {
    MC_TOK_EOF,
    MC_TOK_NEWLINE,
    MC_TOK_NAME,     /* [A-Za-z_][A-Za-z0-9_.]*, reserved words included */
    MC_TOK_NUMBER,   /* a decimal or scientific literal, optionally signed; inf, nan, -inf */
    MC_TOK_COLON,
    MC_TOK_EQUALS,
    MC_TOK_COMMA,
    MC_TOK_LPAREN,
    MC_TOK_RPAREN,
    MC_TOK_LBRACKET,
    MC_TOK_RBRACKET,
    MC_TOK_LE,       /* '<=': a symbolic dimension's maximum, T<=1024 */
    MC_TOK_ERROR,    /* the lexer's message is in mc_lexer.error */
} mc_token_kind;

typedef struct mc_token {
    mc_token_kind kind;
    const char *start; /* into the text; not NUL-terminated */
    size_t len;
    int line, col;     /* 1-based; col counts bytes */
    bool is_int;       /* NUMBER: INT form (optional '-', decimal digits only) */
} mc_token;

typedef struct mc_lexer {
    const char *pos, *end;
    const char *line_start;
    int line;
    char error[160]; /* the message of the last MC_TOK_ERROR */
} mc_lexer;

void mc_lexer_init(mc_lexer *lx, const char *text, size_t len);
mc_token mc_lexer_next(mc_lexer *lx);

/* Check a whole text before lexing: at most INT_MAX - 1 bytes, valid UTF-8 (no overlong forms,
 * surrogates or code points past U+10FFFF), no NUL byte. On a problem, returns false with its
 * byte offset and a message. */
bool mc_text_check(const char *text, size_t len, size_t *bad_offset, char *why, size_t why_size);

/* Length (1..4) of the valid UTF-8 sequence at p, before end; 0 when it is not one. */
int mc_utf8_length(const char *p, const char *end);

/* Parse `len` bytes of text (NUL bytes are reported, not taken as the end). filename may be
 * NULL. On success *out is the graph; on failure *out is NULL and the error is set. */
mc_status mc_graph_parse_text(const char *filename, const char *text, size_t len, mc_graph **out);

#endif
