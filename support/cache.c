/* The compile cache: compiled kernels (CPU object code, CUDA cubins) on disk, keyed on
 * everything they depend on, and never trusted further than it can be checked.
 *
 * An entry is one file named after the XXH3-128 of its key (32 hex digits). It holds a magic,
 * the key's and the payload's lengths, the key, the payload, then the XXH3-128 of all that
 * (layout in runtime.h). A lookup reads the whole file into private memory, then checks the
 * framing (the lengths add up to exactly the file's size), the hash and the key, and only then
 * hands the payload out; every byte the caller uses is a byte that was checked, and a file
 * changed after the check cannot change what runs. An entry that fails any check is deleted
 * and reported as a miss, so the caller compiles afresh and stores a good entry in its place;
 * a payload that passes the checks but that LLVM or the driver refuses is deleted by the caller
 * (mc_cache_evict) for the same reason. A corrupted entry thus costs one compile, never a crash
 * or a wrong answer. The hash is xxHash's XXH3-128 (Debian's libxxhash-dev, used header-only),
 * not a cryptographic one: it detects damage, not forgery. Someone who can write files as the
 * same user can write a valid entry (and could as well replace the minic binary); the threat
 * model is in docs/RELIABILITY.md. Built without xxHash, the cache is off: nothing unverified
 * is ever run.
 *
 * The directories ($XDG_CACHE_HOME/minic or ~/.cache/minic, and one per kind under it) are made
 * with mode 0700 and must belong to the user and not be writable by group or others; they are
 * opened once per operation with O_NOFOLLOW and then used through their descriptors (openat,
 * renameat, unlinkat), so a directory swapped for a symlink after the check is not followed.
 * A refused directory turns the cache off with a note (mc_cache_note) for the program to show.
 * Entries are written to a temporary name unique per process and thread, created with
 * O_CREAT|O_EXCL|O_NOFOLLOW and mode 0600 (a planted file or symlink makes the open fail, it
 * is never written through), registered for removal on SIGINT/SIGTERM (fileio.c), removed on
 * any failure, and renamed into place, so readers never see half an entry. No fsync: a torn
 * entry after a crash fails its hash and is recompiled.
 *
 * After each store, one thread at a time sweeps the cache: temporaries of this user older than
 * an hour (interrupted writes) are removed, and when the entries add up to more than the cap
 * (MINIC_CACHE_SIZE, default 256 MiB) the least recently used go first; a hit marks its entry
 * used by setting its mtime. Nothing here is an error and nothing here prints.
 */
#include "support/support.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef MINIC_HAVE_XXHASH
#define XXH_INLINE_ALL
#include <xxhash.h>
#endif

enum {
    NAME_LEN = 32,                     /* hex digits of an entry's name */
    STALE_SECONDS = 3600,              /* a temporary this old belongs to an interrupted write */
    MAX_SCAN = 1 << 16,                /* entries the sweep considers */
};
static const char MAGIC[8] = {'M', 'C', 'C', 'A', 'C', 'H', 'E', '1'};
static const uint64_t DEFAULT_CAPACITY = (uint64_t)256 << 20;
#define MAX_PAYLOAD ((uint64_t)1 << 32) /* the largest payload stored */

void (*mc_cache_before_rename)(const char *temp_path);

uint64_t mc_hash64(const void *data, size_t n, uint64_t seed)
{
    /* FNV-1a, then a final avalanche (splitmix64's) so nearby keys spread. For seeds and file
     * names that need no protection; cache entries are checked with XXH3-128. */
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

/* ---- the note ------------------------------------------------------------------------------ */

static pthread_mutex_t note_lock = PTHREAD_MUTEX_INITIALIZER;
static char note_text[700];
static atomic_bool note_set;

static void set_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_note(const char *fmt, ...)
{
    pthread_mutex_lock(&note_lock);
    if (!atomic_load(&note_set)) { /* the first reason stays: it is the one that matters */
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(note_text, sizeof note_text, fmt, ap);
        va_end(ap);
        atomic_store(&note_set, true);
    }
    pthread_mutex_unlock(&note_lock);
}

const char *mc_cache_note(void)
{
    return atomic_load(&note_set) ? note_text : NULL;
}

/* ---- directories --------------------------------------------------------------------------- */

static bool cache_disabled(void)
{
    const char *off = getenv("MINIC_NO_CACHE");
    return off && *off && strcmp(off, "0") != 0;
}

static bool root_path(char *dir, size_t size)
{
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int w;
    if (xdg && *xdg)
        w = snprintf(dir, size, "%s/minic", xdg);
    else if (home && *home)
        w = snprintf(dir, size, "%s/.cache/minic", home);
    else
        return false;
    return w > 0 && (size_t)w < size;
}

/* mkdir -p with mode 0700 for what it creates. */
static bool make_dirs(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        bool ok = mkdir(path, 0700) == 0 || errno == EEXIST;
        *p = '/';
        if (!ok)
            return false;
    }
    return mkdir(path, 0700) == 0 || errno == EEXIST;
}

bool mc_cache_dir(const char *kind, bool create, char *dir, size_t size)
{
    if (!root_path(dir, size))
        return false;
    size_t n = strlen(dir);
    int w = snprintf(dir + n, size - n, "/%s", kind);
    return w > 0 && (size_t)w < size - n && (!create || make_dirs(dir));
}

/* Is the open directory fd fit to hold the cache? Else the reason, in why. */
static bool dir_is_safe(int fd, const char *path, char *why, size_t size)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(why, size, "%s: cannot stat: %s", path, strerror(errno));
        return false;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(why, size, "%s is not a directory", path);
        return false;
    }
    if (st.st_uid != geteuid()) {
        snprintf(why, size, "%s belongs to user id %u, not to this user (id %u)", path,
                 (unsigned)st.st_uid, (unsigned)geteuid());
        return false;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(why, size, "%s is writable by %s (mode %03o)", path,
                 st.st_mode & S_IWOTH ? "other users" : "its group", (unsigned)(st.st_mode & 0777));
        return false;
    }
    return true;
}

/* Open (and with `create`, make) directory `name` under parent (AT_FDCWD: a path), checked.
 * -1 when absent (quietly) or refused (why is set). */
static int open_dir_checked(int parent, const char *name, const char *path, bool create,
                            char *why, size_t size)
{
    why[0] = '\0';
    if (create && mkdirat(parent, name, 0700) != 0 && errno != EEXIST) {
        snprintf(why, size, "%s: cannot create: %s", path, strerror(errno));
        return -1;
    }
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ELOOP || errno == ENOTDIR)
            snprintf(why, size, "%s is a symbolic link or not a directory", path);
        else if (errno != ENOENT)
            snprintf(why, size, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    if (!dir_is_safe(fd, path, why, size)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The root directory, checked: its fd, its path in root (4096 bytes). -1 when there is none
 * (why empty) or it is refused (why says why). */
static int open_root(bool create, char *root, char *why, size_t size)
{
    why[0] = '\0';
    if (!root_path(root, 4096))
        return -1;
    if (create) {
        char *slash = strrchr(root, '/');
        *slash = '\0';
        bool ok = root[0] == '\0' || make_dirs(root);
        *slash = '/';
        if (!ok) {
            snprintf(why, size, "%s: cannot create its parent directory: %s", root,
                     strerror(errno));
            return -1;
        }
    }
    return open_dir_checked(AT_FDCWD, root, root, create, why, size);
}

/* The kind's directory, checked, or -1; *refused when it (or the root) was refused, which
 * sets the note. path gets its path. */
static int open_kind(const char *kind, bool create, char *path, size_t size, bool *refused)
{
    char root[4096], why[700];
    int rootfd = open_root(create, root, why, sizeof why);
    int fd = -1;
    if (rootfd >= 0) {
        snprintf(path, size, "%s/%s", root, kind);
        fd = open_dir_checked(rootfd, kind, path, create, why, sizeof why);
        close(rootfd);
    }
    *refused = fd < 0 && why[0];
    if (*refused)
        set_note("the compile cache is off: %s", why);
    return fd;
}

/* ---- entries ------------------------------------------------------------------------------- */

static void entry_name(const char *key, char name[NAME_LEN + 1])
{
#ifdef MINIC_HAVE_XXHASH
    XXH128_hash_t h = XXH3_128bits(key, strlen(key));
    snprintf(name, NAME_LEN + 1, "%016llx%016llx", (unsigned long long)h.high64,
             (unsigned long long)h.low64);
#else
    snprintf(name, NAME_LEN + 1, "%032llx", (unsigned long long)mc_hash64(key, strlen(key), 0));
#endif
}

static bool is_entry_name(const char *name)
{
    size_t n = 0;
    for (; name[n]; n++)
        if (!((name[n] >= '0' && name[n] <= '9') || (name[n] >= 'a' && name[n] <= 'f')))
            return false;
    return n == NAME_LEN;
}

static bool is_temp_name(const char *name)
{
    return strstr(name, ".tmp-") != NULL;
}

static uint64_t read_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

#ifdef MINIC_HAVE_XXHASH
static void write_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
#endif

mc_cache_entry_check mc_cache_entry_parse(const void *bytes, size_t size, mc_cache_entry *out)
{
    memset(out, 0, sizeof *out);
    const unsigned char *b = bytes;
    if (size < MC_CACHE_HEADER + MC_CACHE_TRAILER || memcmp(b, MAGIC, sizeof MAGIC) != 0)
        return MC_ENTRY_FRAMING;
    uint64_t klen = read_le64(b + 8), plen = read_le64(b + 16);
    size_t room = size - MC_CACHE_HEADER - MC_CACHE_TRAILER;
    if (klen > room || plen != room - klen)
        return MC_ENTRY_FRAMING;
#ifdef MINIC_HAVE_XXHASH
    XXH128_canonical_t stored;
    memcpy(&stored, b + size - MC_CACHE_TRAILER, sizeof stored);
    XXH128_hash_t want = XXH128_hashFromCanonical(&stored);
    XXH128_hash_t got = XXH3_128bits(b, size - MC_CACHE_TRAILER);
    if (!XXH128_isEqual(want, got))
        return MC_ENTRY_HASH;
#else
    return MC_ENTRY_HASH; /* nothing can be verified: nothing is accepted */
#endif
    out->key = (const char *)b + MC_CACHE_HEADER;
    out->key_size = (size_t)klen;
    out->payload = b + MC_CACHE_HEADER + klen;
    out->payload_size = (size_t)plen;
    return MC_ENTRY_OK;
}

void *mc_cache_entry_encode(const char *key, const void *payload, size_t payload_size,
                            size_t *size)
{
    *size = 0;
#ifdef MINIC_HAVE_XXHASH
    size_t klen = strlen(key);
    if (payload_size > MAX_PAYLOAD || klen > SIZE_MAX / 2 ||
        payload_size > SIZE_MAX / 2 - klen - MC_CACHE_HEADER - MC_CACHE_TRAILER)
        return NULL;
    size_t total = MC_CACHE_HEADER + klen + payload_size + MC_CACHE_TRAILER;
    unsigned char *b = malloc(total);
    if (!b)
        return NULL;
    memcpy(b, MAGIC, sizeof MAGIC);
    write_le64(b + 8, klen);
    write_le64(b + 16, payload_size);
    memcpy(b + MC_CACHE_HEADER, key, klen);
    if (payload_size)
        memcpy(b + MC_CACHE_HEADER + klen, payload, payload_size);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(b, total - MC_CACHE_TRAILER));
    memcpy(b + total - MC_CACHE_TRAILER, &c, sizeof c);
    *size = total;
    return b;
#else
    (void)key, (void)payload, (void)payload_size;
    return NULL;
#endif
}

bool mc_cache_entry_path(const char *kind, const char *key, char *path, size_t size)
{
    char dir[4096], name[NAME_LEN + 1];
    if (!mc_cache_dir(kind, false, dir, sizeof dir))
        return false;
    entry_name(key, name);
    int w = snprintf(path, size, "%s/%s", dir, name);
    return w > 0 && (size_t)w < size;
}

/* Is the cache usable at all here? (false: why in the note, or MINIC_NO_CACHE) */
static bool cache_usable(void)
{
    if (cache_disabled())
        return false;
#ifndef MINIC_HAVE_XXHASH
    set_note("the compile cache is off: this minic was built without xxHash (libxxhash-dev), "
             "so its entries could not be verified");
    return false;
#else
    return true;
#endif
}

/* Remove name from dir if it is still the file we looked at (not a fresh entry a concurrent
 * writer renamed into place since). */
static void evict_if_same(int dirfd, const char *name, const struct stat *seen)
{
    struct stat now;
    if (fstatat(dirfd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_ino == seen->st_ino &&
        now.st_dev == seen->st_dev)
        (void)unlinkat(dirfd, name, 0);
}

/* Read a whole regular file of `size` bytes (its fstat) from fd into malloc'd memory; NULL
 * when it is shorter or longer now. */
static unsigned char *read_fd(int fd, size_t size)
{
    unsigned char *buf = malloc(size ? size : 1);
    size_t got = 0;
    while (buf && got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            free(buf);
            return NULL;
        }
        got += (size_t)r;
    }
    unsigned char extra;
    if (buf && read(fd, &extra, 1) != 0) { /* grew since fstat: not the file we sized */
        free(buf);
        return NULL;
    }
    return buf;
}

mc_cache_result mc_cache_load(const char *kind, const char *key, void **data, size_t *size)
{
    *data = NULL;
    *size = 0;
    if (!cache_usable())
        return MC_CACHE_OFF;
    char dir[4096], name[NAME_LEN + 1];
    bool refused;
    int dirfd = open_kind(kind, false, dir, sizeof dir, &refused);
    if (dirfd < 0)
        return refused ? MC_CACHE_OFF : MC_CACHE_MISS;
    entry_name(key, name);
    mc_cache_result result = MC_CACHE_EVICTED;
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        if (err == ELOOP) /* a symlink planted under an entry's name: removed, not followed */
            (void)unlinkat(dirfd, name, 0);
        close(dirfd);
        return err == ENOENT ? MC_CACHE_MISS : MC_CACHE_EVICTED;
    }
    struct stat st;
    unsigned char *buf = NULL;
    bool ok = fstat(fd, &st) == 0;
    /* No entry is larger than the cap (a larger one is never stored): a file that is, is not
     * one of ours and is not read into memory. */
    if (ok && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
        (uint64_t)st.st_size >= MC_CACHE_HEADER + MC_CACHE_TRAILER &&
        (uint64_t)st.st_size <= mc_cache_capacity() && (uint64_t)st.st_size < SIZE_MAX)
        buf = read_fd(fd, (size_t)st.st_size);
    mc_cache_entry e;
    size_t want = strlen(key);
    if (buf && mc_cache_entry_parse(buf, (size_t)st.st_size, &e) == MC_ENTRY_OK &&
        e.key_size == want && memcmp(e.key, key, want) == 0) {
        /* Verified: hand out the payload, moved to the front of the buffer. */
        memmove(buf, e.payload, e.payload_size);
        *data = buf;
        *size = e.payload_size;
        buf = NULL;
        (void)futimens(fd, NULL); /* used now: the last to go when the cache is full */
        result = MC_CACHE_HIT;
    } else if (ok) {
        evict_if_same(dirfd, name, &st);
    }
    free(buf);
    close(fd);
    close(dirfd);
    return result;
}

void mc_cache_evict(const char *kind, const char *key)
{
    if (cache_disabled())
        return;
    char dir[4096], name[NAME_LEN + 1];
    bool refused;
    int dirfd = open_kind(kind, false, dir, sizeof dir, &refused);
    if (dirfd < 0)
        return;
    entry_name(key, name);
    (void)unlinkat(dirfd, name, 0);
    close(dirfd);
}

/* ---- capacity, sweeping, statistics -------------------------------------------------------- */

static bool parse_size(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    int shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10, end++;
    else if (*end == 'M' || *end == 'm')
        shift = 20, end++;
    else if (*end == 'G' || *end == 'g')
        shift = 30, end++;
    if (errno || *end || (shift && v > (UINT64_MAX >> shift)))
        return false;
    *out = (uint64_t)v << shift;
    return true;
}

uint64_t mc_cache_capacity(void)
{
    const char *s = getenv("MINIC_CACHE_SIZE");
    uint64_t cap;
    if (!s || !*s)
        return DEFAULT_CAPACITY;
    if (parse_size(s, &cap))
        return cap;
    set_note("MINIC_CACHE_SIZE='%.40s' is not a size (bytes, or a number with K, M or G); "
             "the cache keeps its default cap of 256M", s);
    return DEFAULT_CAPACITY;
}

typedef struct scanned {
    int dir;        /* index into the scan's directory fds */
    char name[NAME_LEN + 1];
    int64_t bytes;
    struct timespec used;
} scanned;

typedef struct scan {
    int fds[MC_CACHE_MAX_KINDS];
    int nfds;
    scanned *entries;
    int n, cap;
    mc_cache_stats *stats; /* optional: per-kind counts */
    bool remove_all;       /* clear: remove every entry and temporary */
    int64_t removed, removed_bytes;
} scan;

static void scan_free(scan *s)
{
    for (int i = 0; i < s->nfds; i++)
        close(s->fds[i]);
    free(s->entries);
}

static void scan_kind(scan *s, int rootfd, const char *kind, time_t now)
{
    if (s->nfds == MC_CACHE_MAX_KINDS)
        return;
    int fd = openat(rootfd, kind, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    char why[300];
    if (fd < 0 || !dir_is_safe(fd, kind, why, sizeof why)) {
        if (fd >= 0)
            close(fd);
        else
            snprintf(why, sizeof why, "%s: cannot open: %s", kind, strerror(errno));
        if (s->stats && s->stats->nkinds < MC_CACHE_MAX_KINDS) { /* said, never touched */
            int k = s->stats->nkinds++;
            snprintf(s->stats->kinds[k].name, sizeof s->stats->kinds[k].name, "%s", kind);
            snprintf(s->stats->kinds[k].refused, sizeof s->stats->kinds[k].refused, "%s", why);
        }
        return;
    }
    int index = s->nfds++;
    s->fds[index] = fd;
    int64_t kind_entries = 0, kind_bytes = 0;
    int listfd = dup(fd);
    DIR *d = listfd >= 0 ? fdopendir(listfd) : NULL;
    if (!d && listfd >= 0)
        close(listfd);
    for (struct dirent *de; d && (de = readdir(d));) {
        struct stat st;
        bool entry = is_entry_name(de->d_name), temp = is_temp_name(de->d_name);
        if ((!entry && !temp) || fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            st.st_uid != geteuid() || S_ISDIR(st.st_mode))
            continue;
        if (temp) {
            if (s->stats)
                s->stats->temporaries++;
            if (s->remove_all || now - st.st_mtime > STALE_SECONDS) {
                if (unlinkat(fd, de->d_name, 0) == 0 && s->stats)
                    s->stats->temporaries--;
            }
            continue;
        }
        if (s->remove_all) {
            if (unlinkat(fd, de->d_name, 0) == 0) {
                s->removed++;
                s->removed_bytes += st.st_size;
            }
            continue;
        }
        kind_entries++;
        kind_bytes += st.st_size;
        if (s->n == s->cap) {
            if (s->cap >= MAX_SCAN)
                continue;
            int cap = s->cap ? 2 * s->cap : 64;
            scanned *grown = realloc(s->entries, (size_t)cap * sizeof *grown);
            if (!grown)
                continue;
            s->entries = grown;
            s->cap = cap;
        }
        scanned *e = &s->entries[s->n++];
        e->dir = index;
        memcpy(e->name, de->d_name, NAME_LEN + 1);
        e->bytes = st.st_size;
        e->used = st.st_mtim;
    }
    if (d)
        closedir(d);
    if (s->stats && s->stats->nkinds < MC_CACHE_MAX_KINDS) {
        int k = s->stats->nkinds++;
        snprintf(s->stats->kinds[k].name, sizeof s->stats->kinds[k].name, "%s", kind);
        s->stats->kinds[k].entries = kind_entries;
        s->stats->kinds[k].bytes = kind_bytes;
        s->stats->entries += kind_entries;
        s->stats->bytes += kind_bytes;
    }
}

/* Every kind directory under the root (one level). */
static void scan_root(scan *s, int rootfd)
{
    time_t now = time(NULL);
    int listfd = dup(rootfd);
    DIR *d = listfd >= 0 ? fdopendir(listfd) : NULL;
    if (!d) {
        if (listfd >= 0)
            close(listfd);
        return;
    }
    for (struct dirent *de; (de = readdir(d));) {
        struct stat st;
        if (de->d_name[0] == '.' || fstatat(rootfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISDIR(st.st_mode))
            continue;
        scan_kind(s, rootfd, de->d_name, now);
    }
    closedir(d);
}

static int older_first(const void *a, const void *b)
{
    const struct timespec *x = &((const scanned *)a)->used, *y = &((const scanned *)b)->used;
    if (x->tv_sec != y->tv_sec)
        return x->tv_sec < y->tv_sec ? -1 : 1;
    return (x->tv_nsec > y->tv_nsec) - (x->tv_nsec < y->tv_nsec);
}

static pthread_mutex_t sweep_lock = PTHREAD_MUTEX_INITIALIZER;

/* Remove stale temporaries, then the least recently used entries until the total fits. */
static void sweep(int rootfd, uint64_t capacity)
{
    if (pthread_mutex_trylock(&sweep_lock) != 0)
        return; /* another thread is at it */
    scan s = {0};
    scan_root(&s, rootfd);
    uint64_t total = 0;
    for (int i = 0; i < s.n; i++)
        total += (uint64_t)s.entries[i].bytes;
    if (total > capacity) {
        qsort(s.entries, (size_t)s.n, sizeof *s.entries, older_first);
        for (int i = 0; i < s.n && total > capacity; i++)
            if (unlinkat(s.fds[s.entries[i].dir], s.entries[i].name, 0) == 0)
                total -= (uint64_t)s.entries[i].bytes;
    }
    scan_free(&s);
    pthread_mutex_unlock(&sweep_lock);
}

/* ---- storing ------------------------------------------------------------------------------- */

static atomic_uint temp_counter;

void mc_cache_store(const char *kind, const char *key, const void *data, size_t size)
{
    if (!cache_usable())
        return;
    uint64_t capacity = mc_cache_capacity();
    size_t bytes;
    void *entry = (uint64_t)size + strlen(key) + MC_CACHE_HEADER + MC_CACHE_TRAILER <= capacity
                      ? mc_cache_entry_encode(key, data, size, &bytes)
                      : NULL;
    if (!entry)
        return; /* larger than the whole cache, or out of memory */
    char root[4096], why[700], dir[4200];
    int rootfd = open_root(true, root, why, sizeof why);
    int dirfd = -1;
    if (rootfd >= 0) {
        snprintf(dir, sizeof dir, "%s/%s", root, kind);
        dirfd = open_dir_checked(rootfd, kind, dir, true, why, sizeof why);
    }
    if (dirfd < 0) {
        if (why[0])
            set_note("the compile cache is off: %s", why);
        if (rootfd >= 0)
            close(rootfd);
        free(entry);
        return;
    }
    char name[NAME_LEN + 1], temp[NAME_LEN + 64], temp_path[4400];
    entry_name(key, name);
    /* Registered before the open, as in mc_file_write_atomic: no moment where the file exists
     * and a SIGINT would not remove it. */
    int fd = -1, slot = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(temp, sizeof temp, "%s.tmp-%ld-%ld-%u", name, (long)getpid(), (long)gettid(),
                 atomic_fetch_add(&temp_counter, 1));
        snprintf(temp_path, sizeof temp_path, "%s/%s", dir, temp);
        slot = mc_temp_register(temp_path);
        fd = openat(dirfd, temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
            int err = errno;
            mc_temp_unregister(slot);
            slot = -1;
            if (err != EEXIST)
                break;
        }
    }
    if (fd >= 0) {
        size_t done = 0;
        while (done < bytes) {
            ssize_t w = write(fd, (const char *)entry + done, bytes - done);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                break;
            done += (size_t)w;
        }
        bool ok = close(fd) == 0 && done == bytes;
        if (ok && mc_cache_before_rename)
            mc_cache_before_rename(temp_path);
        if (!ok || renameat(dirfd, temp, dirfd, name) != 0)
            (void)unlinkat(dirfd, temp, 0);
        mc_temp_unregister(slot);
    }
    free(entry);
    close(dirfd);
    sweep(rootfd, capacity);
    close(rootfd);
}

/* ---- info and clear ------------------------------------------------------------------------ */

mc_status mc_cache_stat(mc_cache_stats *out)
{
    memset(out, 0, sizeof *out);
    out->capacity = mc_cache_capacity();
    char why[700];
    int rootfd = open_root(false, out->root, why, sizeof why);
    out->enabled = rootfd >= 0 || !why[0]; /* absent: made on the first store */
    if (!root_path(out->root, sizeof out->root)) {
        out->root[0] = '\0';
        out->enabled = false;
        snprintf(out->why_not, sizeof out->why_not, "neither XDG_CACHE_HOME nor HOME is set");
    } else if (!out->enabled) {
        snprintf(out->why_not, sizeof out->why_not, "%s", why);
    }
#ifndef MINIC_HAVE_XXHASH
    out->enabled = false;
    snprintf(out->why_not, sizeof out->why_not,
             "this minic was built without xxHash (libxxhash-dev), so entries could not be verified");
#endif
    if (cache_disabled()) {
        out->enabled = false;
        snprintf(out->why_not, sizeof out->why_not, "MINIC_NO_CACHE is set");
    }
    if (rootfd >= 0) {
        scan s = {.stats = out};
        scan_root(&s, rootfd);
        scan_free(&s);
        close(rootfd);
    }
    return MC_OK;
}

mc_status mc_cache_clear(int64_t *entries, int64_t *bytes)
{
    *entries = *bytes = 0;
    char root[4096], why[700];
    int rootfd = open_root(false, root, why, sizeof why);
    if (rootfd < 0) {
        if (why[0])
            return mc_fail(MC_ERR_INPUT, "not clearing the cache: %s", why);
        return MC_OK; /* nothing there */
    }
    mc_cache_stats stats;
    memset(&stats, 0, sizeof stats);
    scan s = {.stats = &stats, .remove_all = true};
    scan_root(&s, rootfd);
    *entries = s.removed;
    *bytes = s.removed_bytes;
    scan_free(&s);
    close(rootfd);
    for (int k = 0; k < stats.nkinds; k++)
        if (stats.kinds[k].refused[0])
            return mc_fail(MC_ERR_INPUT, "not clearing the cache: %s/%s", root,
                           stats.kinds[k].refused);
    return MC_OK;
}
