/* The ground floor: what every other folder uses and that knows nothing of graphs or kernels.
 *
 *   error.c       the calling thread's error message (mc_fail, mc_fail_at), MC_ASSERT
 *   arena.c       arenas (memory freed all at once) and checked size arithmetic
 *   json.c        a strict JSON reader (the safetensors header)
 *   fileio.c      whole-file reads, all-or-nothing writes
 *   cache.c       the content-addressed compile cache on disk
 *   threadpool.c  the persistent thread pool the CPU backend runs kernels on
 *   suggest.c     "did you mean": the nearest names by edit distance
 *   clock.c       the monotonic clock, medians, and the one timing loop (warm-up, N runs, median)
 *
 * Everything here includes only the public header and the C library, so any floor may use it.
 */
#ifndef MINIC_SUPPORT_H
#define MINIC_SUPPORT_H

#include "minic.h"

#include <stdarg.h>
#include <stdio.h>

/* ---- errors ------------------------------------------------------------------------------- */

/* Set the calling thread's error (mc_error_message). Returns status, so `return mc_fail(...)`. */
mc_status mc_fail(mc_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
mc_status mc_vfail(mc_status status, const char *fmt, va_list ap);
/* An error at a place in a source text: `file:line:col: error: msg`, the line, and a caret. */
mc_status mc_fail_at(mc_status status, const char *file, const char *text, int line, int col,
                     const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* "Did you mean ...": the names among names[0..n) nearest to word[0..len) by edit distance,
 * written as "'a'" or "'a' or 'b'" into buf; false (and buf "") when none is near enough to
 * be worth offering (support/suggest.c says how near). */
bool mc_suggest(const char *word, size_t len, const char *const *names, int n, char *buf,
                size_t size);

/* Broken internal invariants (never the user's mistakes): file and line, then abort. */
#define MC_ASSERT(cond)                                                                        \
    do {                                                                                       \
        if (!(cond)) mc_internal_error(__FILE__, __LINE__, #cond);                            \
    } while (0)
/* A place control never reaches (a switch over every enum value): unconditional, so compilers
 * know the function does not fall off its end at any optimization level. */
#define MC_UNREACHABLE(what) mc_internal_error(__FILE__, __LINE__, what)
_Noreturn void mc_internal_error(const char *file, int line, const char *what);

/* ---- memory ------------------------------------------------------------------------------- */

typedef struct mc_arena_block mc_arena_block;
typedef struct mc_arena {
    mc_arena_block *head; /* newest block first */
} mc_arena;

void *mc_arena_alloc(mc_arena *a, size_t size);           /* zeroed, 16-aligned; NULL on OOM */
char *mc_arena_strdup(mc_arena *a, const char *s);
char *mc_arena_strndup(mc_arena *a, const char *s, size_t n);
void mc_arena_free(mc_arena *a);

/* Checked size arithmetic: false on overflow (every size computation goes through these). */
bool mc_mul_overflows(int64_t a, int64_t b, int64_t *out);
bool mc_add_overflows(int64_t a, int64_t b, int64_t *out);

/* ---- JSON reading (support/json.c) -------------------------------------------------------- */

/* A strict RFC 8259 reader for small documents (the safetensors header): UTF-8 checked,
 * escapes (\uXXXX with surrogate pairs) decoded, nesting depth limited, duplicate object keys
 * rejected. The tree lives in the caller's arena. Numbers keep their source text, so integers
 * are read exactly with mc_json_int64. */
typedef enum { MC_JSON_NULL, MC_JSON_BOOL, MC_JSON_NUMBER, MC_JSON_STRING, MC_JSON_ARRAY,
               MC_JSON_OBJECT } mc_json_kind;
typedef struct mc_json mc_json;
struct mc_json {
    mc_json_kind kind;
    bool boolean;
    const char *text;   /* STRING: decoded, NUL-terminated (may hold NULs: see len); NUMBER: source */
    size_t len;         /* bytes of text */
    int count;          /* ARRAY, OBJECT: members */
    mc_json *first;     /* ARRAY, OBJECT: first member */
    mc_json *next;      /* the next member of the parent */
    const char *key;    /* member of an OBJECT: its key (decoded) */
    size_t key_len;
};
/* Parse text[0..size) as one JSON value (whitespace around it allowed). Errors (MC_ERR_INPUT)
 * read "NAME: invalid JSON header at byte N: what". */
mc_status mc_json_parse(const char *text, size_t size, const char *name, mc_arena *arena,
                        mc_json **out);
/* The member of an object with this key, or NULL. */
const mc_json *mc_json_get(const mc_json *object, const char *key);
/* A NUMBER that is an integer in int64 range (no fraction or exponent): true and *out. */
bool mc_json_int64(const mc_json *number, int64_t *out);
/* Is s[0..n) well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF)? */
bool mc_json_valid_utf8(const char *s, size_t n);

/* ---- whole files (support/fileio.c) ------------------------------------------------------- */

/* Read a regular file into malloc'd memory (plus a NUL after the end). MC_ERR_INPUT when it
 * cannot be opened or is not a regular file, MC_ERR_SYSTEM when memory or reading fails. */
mc_status mc_file_read_all(const char *path, char **data, size_t *size);
/* Open a file for reading if it is a regular file: *fd and *info (its fstat). A FIFO, device,
 * socket or directory is MC_ERR_INPUT with a message naming the file and what it is; opening
 * never blocks (a FIFO without a writer). */
struct stat;
mc_status mc_file_open_regular(const char *path, int *fd, struct stat *info);
/* Write a file all-or-nothing: `write` fills a temporary file in the same directory, which is
 * then flushed, synced and renamed over path. On any failure the temporary is removed and path
 * is untouched. `write` returns MC_OK or a status with its message already set. */
mc_status mc_file_write_atomic(const char *path, mc_status (*write)(FILE *f, void *ctx),
                               void *ctx);
/* The temporaries of writes in progress, for mc_temp_files_remove (include/minic.h): register
 * a path (at most 4095 bytes) right after creating it, unregister it once renamed or removed.
 * Returns the slot, or -1 when the table is full (the write goes on, unregistered). */
int mc_temp_register(const char *path);
void mc_temp_unregister(int slot);

/* ---- the compile cache (support/cache.c) -------------------------------------------------- */

/* A content-addressed disk cache: $XDG_CACHE_HOME/minic/<kind>/<XXH3-128 of key> (else
 * ~/.cache/minic). The key must contain everything the result depends on: the source or IR,
 * the compiler's version, the target architecture and every option. Each entry holds its key
 * and a XXH3-128 hash of all its bytes, checked before any byte is handed out; an entry that
 * fails any check is deleted (evicted) and reported as a miss. Directories are the user's
 * own, mode 0700 when created, and refused when owned by another user or writable by others;
 * temporaries are unique per process and thread (O_CREAT|O_EXCL|O_NOFOLLOW, 0600); the total
 * size is capped (MINIC_CACHE_SIZE, least recently used entries go first). The cache is an
 * optimization: any failure is a miss, never an error. MINIC_NO_CACHE=1 disables it.
 * docs/RELIABILITY.md has the threat model. */
uint64_t mc_hash64(const void *data, size_t n, uint64_t seed); /* fast, NOT for integrity */
/* The directory of one kind of cached thing ($XDG_CACHE_HOME/minic/<kind>, else
 * ~/.cache/minic/<kind>), created (mode 0700) with its parents when `create`; false when
 * neither variable is set, the path does not fit, or creating it fails. */
bool mc_cache_dir(const char *kind, bool create, char *dir, size_t size);

typedef enum {
    MC_CACHE_MISS,    /* no entry */
    MC_CACHE_HIT,     /* *data (malloc'd) and *size hold the verified payload */
    MC_CACHE_EVICTED, /* there was an entry and it failed a check: it is gone now */
    MC_CACHE_OFF,     /* no cache: MINIC_NO_CACHE, no directory, a refused directory
                         (mc_cache_note says why), or built without xxHash */
} mc_cache_result;
mc_cache_result mc_cache_load(const char *kind, const char *key, void **data, size_t *size);
void mc_cache_store(const char *kind, const char *key, const void *data, size_t size);
/* Delete the entry of key, when a verified payload turned out unusable (LLVM or the driver
 * refused it): the caller then compiles afresh and stores the result. */
void mc_cache_evict(const char *kind, const char *key);
/* The cap on the cache's total size in bytes: MINIC_CACHE_SIZE (a number of bytes with an
 * optional K, M or G suffix, powers of 1024; 0 stores nothing), else 256 MiB. */
uint64_t mc_cache_capacity(void);

/* An entry's bytes: magic "MCCACHE1", key length and payload length (8 bytes each, little
 * endian), the key, the payload, then the XXH3-128 of everything before it (16 bytes,
 * canonical big-endian). Exposed for the tests, which craft and damage entries. */
enum { MC_CACHE_HEADER = 24, MC_CACHE_TRAILER = 16 };
typedef enum { MC_ENTRY_OK, MC_ENTRY_FRAMING, MC_ENTRY_HASH } mc_cache_entry_check;
typedef struct mc_cache_entry {
    const char *key; /* not NUL-terminated */
    size_t key_size;
    const unsigned char *payload;
    size_t payload_size;
} mc_cache_entry;
/* Check an entry's framing (magic, lengths that add up to exactly `size`) and its hash. */
mc_cache_entry_check mc_cache_entry_parse(const void *bytes, size_t size, mc_cache_entry *out);
/* A whole entry for key and payload (malloc'd, *size bytes); NULL when out of memory or when
 * built without xxHash. */
void *mc_cache_entry_encode(const char *key, const void *payload, size_t payload_size,
                            size_t *size);
/* The path of key's entry file (whether or not it exists); false when there is no cache dir. */
bool mc_cache_entry_path(const char *kind, const char *key, char *path, size_t size);
/* Test hook: called (when set) between writing an entry's temporary and renaming it. */
extern void (*mc_cache_before_rename)(const char *temp_path);

/* For `minic cache info|clear`. Counts cover every kind of entry under the root. */
enum { MC_CACHE_MAX_KINDS = 16 };
typedef struct mc_cache_stats {
    char root[4096];     /* $XDG_CACHE_HOME/minic or ~/.cache/minic; "" when neither is set */
    bool enabled;        /* the cache would be used now */
    char why_not[600];   /* when !enabled: why */
    uint64_t capacity;   /* mc_cache_capacity() */
    int nkinds;
    struct {
        char name[64];
        int64_t entries, bytes;
        char refused[300]; /* non-empty: this directory is not used (another user's, ...) */
    } kinds[MC_CACHE_MAX_KINDS];
    int64_t entries, bytes; /* totals */
    int64_t temporaries;    /* temp files of writes in progress or interrupted */
} mc_cache_stats;
mc_status mc_cache_stat(mc_cache_stats *out);
/* Delete every entry and temporary under the root (the peaks file of `minic peaks` stays).
 * MC_ERR_INPUT when the root or a kind's directory is refused (another user's, writable by
 * others): those are left alone. */
mc_status mc_cache_clear(int64_t *entries, int64_t *bytes);

/* ---- the thread pool (support/threadpool.c) ----------------------------------------------- */

/* A persistent pool: threads start in mc_threadpool_new and wait for work until freed, so a
 * kernel launch never starts a thread. The caller runs as thread 0. */
typedef struct mc_threadpool mc_threadpool;
/* Runs indices [begin, end) of a job on thread `thread` (0 .. size-1). */
typedef void (*mc_parallel_fn)(void *ctx, int64_t begin, int64_t end, int thread);
int mc_threadpool_default_threads(void); /* one per core this process may run on */
/* threads == 0: one per core. MC_ERR_INPUT for a negative or absurd count. */
mc_status mc_threadpool_new(int threads, mc_threadpool **out);
int mc_threadpool_size(const mc_threadpool *pool);
/* Run fn over [0, n) and wait for it. grain <= 0: one balanced contiguous range per thread;
 * grain > 0: threads take chunks of `grain` indices until none are left. Not reentrant: one job
 * at a time per pool. A NULL pool runs fn(ctx, 0, n, 0) on the caller. */
void mc_threadpool_run(mc_threadpool *pool, int64_t n, int64_t grain, mc_parallel_fn fn, void *ctx);
void mc_threadpool_free(mc_threadpool *pool);

/* ---- time (support/clock.c) --------------------------------------------------------------- */

double mc_now_ms(void);             /* monotonic clock */
double mc_median(double *t, int n); /* the median of t[0..n) (sorts t in place); n >= 1 */
/* The one timing loop: run(ctx) once as a warm-up, then `iters` times (at least 1), each timed
 * with the monotonic clock; *median_us is the median in µs. Stops at the first failure. */
mc_status mc_time_median(mc_status (*run)(void *ctx), void *ctx, int iters, double *median_us);

/* ---- growable strings (support/strbuf.c) ------------------------------------------------ */

/* A growable string; `oom` records an allocation failure (appends then do nothing). */
typedef struct mc_strbuf {
    char *data;
    size_t len, cap;
    bool oom;
} mc_strbuf;

void mc_sb_printf(mc_strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void mc_sb_vprintf(mc_strbuf *sb, const char *fmt, va_list ap);
void mc_sb_puts(mc_strbuf *sb, const char *s);
void mc_sb_free(mc_strbuf *sb);

#endif
