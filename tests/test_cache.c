/* The compile cache (support/cache.c) on its own, without a compiler: what it hands out, what
 * it refuses and what it leaves on disk. Issue 19's repros: a damaged entry was used as is; a
 * planted symlink was written through; a directory of another user, or writable by others, was
 * used; every thread of a process shared one temporary name; an interrupted store left its
 * temporary forever; nothing capped the size.
 *
 * Every test works in a cache of its own ($XDG_CACHE_HOME set to a fresh directory). Tests that
 * need the process-wide note (mc_cache_note keeps the first reason) run in a child process.
 * Kinds "cpu" and "cuda" share this code; the damage tests run on both, so the CUDA entries'
 * framing and eviction are checked here without a GPU.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"

#include "runtime/runtime.h"

/* A fresh cache root for one test: $XDG_CACHE_HOME = <tmp>/<name>. Returns the root's path
 * (<tmp>/<name>/minic). */
static const char *fresh_cache(const char *name)
{
    static char root[4096];
    char xdg[4096];
    snprintf(xdg, sizeof xdg, "%s/%s", mc_test_tmpdir(), name);
    mkdir(xdg, 0700);
    setenv("XDG_CACHE_HOME", xdg, 1);
    unsetenv("MINIC_NO_CACHE");
    unsetenv("MINIC_CACHE_SIZE");
    snprintf(root, sizeof root, "%s/minic", xdg);
    return root;
}

static bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

#ifdef MINIC_HAVE_XXHASH

/* A file's bytes (support's reader: regular files only, NULL when it cannot be read). */
static unsigned char *read_file(const char *path, size_t *size)
{
    char *data = NULL;
    return mc_file_read_all(path, &data, size) == MC_OK ? (unsigned char *)data : NULL;
}

static void write_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, size, f), size);
    assert_int_equal(fclose(f), 0);
}

/* Files in dir whose name contains `part`. */
static int count_files(const char *dir, const char *part)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d));)
        n += de->d_name[0] != '.' && strstr(de->d_name, part) != NULL;
    if (d)
        closedir(d);
    return n;
}

static void payload_pattern(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(seed * 131 + i * 7 + (i >> 8));
}

/* ---- what is handed out ---------------------------------------------------------------------- */

static void test_round_trip(void **state)
{
    (void)state;
    const char *root = fresh_cache("round_trip");
    unsigned char payload[3000];
    payload_pattern(payload, sizeof payload, 1);
    void *data;
    size_t size;
    assert_int_equal(mc_cache_load("cpu", "key one", &data, &size), MC_CACHE_MISS);
    mc_cache_store("cpu", "key one", payload, sizeof payload);
    assert_int_equal(mc_cache_load("cpu", "key one", &data, &size), MC_CACHE_HIT);
    assert_int_equal(size, sizeof payload);
    assert_memory_equal(data, payload, size);
    free(data);
    assert_int_equal(mc_cache_load("cpu", "key two", &data, &size), MC_CACHE_MISS);
    /* modes: directories 0700, entries 0600 */
    char path[4200];
    struct stat st;
    assert_int_equal(stat(root, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    snprintf(path, sizeof path, "%s/cpu", root);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_true(mc_cache_entry_path("cpu", "key one", path, sizeof path));
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    /* an empty payload is an entry too */
    mc_cache_store("cpu", "empty", "", 0);
    assert_int_equal(mc_cache_load("cpu", "empty", &data, &size), MC_CACHE_HIT);
    assert_int_equal(size, 0);
    free(data);
}

/* Every single-bit flip, every truncation and an extension of an entry: never handed out, and
 * the file is gone afterwards (so the next compile stores a good one). Both kinds. */
static void damage_every_bit(const char *kind)
{
    unsigned char payload[700];
    payload_pattern(payload, sizeof payload, 2);
    const char *key = "nvrtc 13.0 --gpu-architecture=sm_90 ... the source";
    mc_cache_store(kind, key, payload, sizeof payload);
    char path[4200];
    assert_true(mc_cache_entry_path(kind, key, path, sizeof path));
    size_t size;
    unsigned char *good = read_file(path, &size);
    assert_non_null(good);
    assert_int_equal(size, MC_CACHE_HEADER + strlen(key) + sizeof payload + MC_CACHE_TRAILER);
    unsigned char *bad = malloc(size + 1);
    void *data;
    size_t got;
    int hits = 0;
    for (size_t bit = 0; bit < size * 8; bit++) {
        memcpy(bad, good, size);
        bad[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        write_file(path, bad, size);
        mc_cache_result r = mc_cache_load(kind, key, &data, &got);
        if (r == MC_CACHE_HIT) {
            hits++;
            free(data);
        }
        if (r != MC_CACHE_EVICTED || exists(path))
            fail_msg("%s: bit %zu flipped: result %d, file %s", kind, bit, (int)r,
                     exists(path) ? "still there" : "gone");
    }
    assert_int_equal(hits, 0);
    for (size_t n = 0; n < size; n++) {
        write_file(path, good, n);
        if (mc_cache_load(kind, key, &data, &got) != MC_CACHE_EVICTED || exists(path))
            fail_msg("%s: truncated to %zu bytes: not evicted", kind, n);
    }
    memcpy(bad, good, size);
    bad[size] = 0;
    write_file(path, bad, size + 1);
    assert_int_equal(mc_cache_load(kind, key, &data, &got), MC_CACHE_EVICTED);
    assert_false(exists(path));
    /* and the good bytes are still good */
    write_file(path, good, size);
    assert_int_equal(mc_cache_load(kind, key, &data, &got), MC_CACHE_HIT);
    assert_memory_equal(data, payload, sizeof payload);
    free(data);
    free(good);
    free(bad);
}

static void test_every_bit_flip_is_evicted(void **state)
{
    (void)state;
    fresh_cache("bit_flips");
    damage_every_bit("cpu");
    damage_every_bit("cuda");
}

/* An entry framed right, under the right name and with the right key, but whose hash is not
 * the hash of its bytes, is never handed out (a payload planted without the hash). */
static void test_wrong_hash_never_handed_out(void **state)
{
    (void)state;
    fresh_cache("wrong_hash");
    const char *key = "the right key";
    unsigned char planted[256];
    payload_pattern(planted, sizeof planted, 3);
    size_t size;
    unsigned char *entry = mc_cache_entry_encode(key, planted, sizeof planted, &size);
    assert_non_null(entry);
    mc_cache_entry e;
    assert_int_equal(mc_cache_entry_parse(entry, size, &e), MC_ENTRY_OK);
    entry[size - 1] ^= 0x5a; /* the hash of other bytes */
    assert_int_equal(mc_cache_entry_parse(entry, size, &e), MC_ENTRY_HASH);
    mc_cache_store("cuda", key, "x", 1); /* makes the directory */
    char path[4200];
    assert_true(mc_cache_entry_path("cuda", key, path, sizeof path));
    write_file(path, entry, size);
    void *data;
    size_t got;
    assert_int_equal(mc_cache_load("cuda", key, &data, &got), MC_CACHE_EVICTED);
    assert_null(data);
    assert_false(exists(path));
    /* a valid entry of another key under this key's name: not handed out either */
    free(entry);
    entry = mc_cache_entry_encode("another key", planted, sizeof planted, &size);
    write_file(path, entry, size);
    assert_int_equal(mc_cache_load("cuda", key, &data, &got), MC_CACHE_EVICTED);
    free(entry);
}

/* ---- planted files ---------------------------------------------------------------------------- */

/* A symlink under an entry's name is not followed (it is removed); its target stays. */
static void test_symlink_entry_not_followed(void **state)
{
    (void)state;
    fresh_cache("symlink_entry");
    unsigned char payload[64];
    payload_pattern(payload, sizeof payload, 4);
    mc_cache_store("cpu", "k", payload, sizeof payload);
    char path[4200], target[4200];
    assert_true(mc_cache_entry_path("cpu", "k", path, sizeof path));
    snprintf(target, sizeof target, "%s/elsewhere", mc_test_tmpdir());
    size_t size;
    unsigned char *entry = read_file(path, &size);
    write_file(target, entry, size); /* a valid entry, outside the cache */
    unlink(path);
    assert_int_equal(symlink(target, path), 0);
    void *data;
    size_t got;
    assert_int_equal(mc_cache_load("cpu", "k", &data, &got), MC_CACHE_EVICTED);
    assert_false(exists(path));
    size_t after;
    unsigned char *still = read_file(target, &after);
    assert_int_equal(after, size);
    assert_memory_equal(still, entry, size);
    free(still);
    free(entry);
}

/* Symlinks planted at the temporary names a store would use (the old `<hash>.tmp.<pid>` and the
 * next ones of the new scheme) and at the entry's name: the store never writes through them. */
static void test_store_never_writes_through_symlinks(void **state)
{
    (void)state;
    fresh_cache("symlink_store");
    mc_cache_store("cpu", "warm", "x", 1); /* the directory */
    char path[4200], dir[4200], victim[4200], link[4600];
    assert_true(mc_cache_entry_path("cpu", "victim key", path, sizeof path));
    assert_true(mc_cache_dir("cpu", false, dir, sizeof dir));
    snprintf(victim, sizeof victim, "%s/victim.txt", mc_test_tmpdir());
    write_file(victim, "precious\n", 9);
    const char *name = strrchr(path, '/') + 1;
    snprintf(link, sizeof link, "%s.tmp.%d", path, (int)getpid()); /* the old name */
    assert_int_equal(symlink(victim, link), 0);
    for (int n = 0; n < 64; n++) { /* the next names of this process and thread */
        snprintf(link, sizeof link, "%s/%s.tmp-%ld-%ld-%d", dir, name, (long)getpid(),
                 (long)gettid(), n);
        assert_int_equal(symlink(victim, link), 0);
    }
    assert_int_equal(symlink(victim, path), 0); /* and the entry's own name */
    unsigned char payload[100];
    payload_pattern(payload, sizeof payload, 5);
    mc_cache_store("cpu", "victim key", payload, sizeof payload);
    size_t size;
    unsigned char *v = read_file(victim, &size);
    assert_int_equal(size, 9);
    assert_memory_equal(v, "precious\n", 9);
    free(v);
    /* the entry replaced the symlink (rename does not follow it) and is good */
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    void *data;
    size_t got;
    assert_int_equal(mc_cache_load("cpu", "victim key", &data, &got), MC_CACHE_HIT);
    assert_memory_equal(data, payload, sizeof payload);
    free(data);
}

/* Run fn in a child process (the note is process-wide and keeps its first reason). */
static void in_child(void (*fn)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        fn();
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

#define CHILD_CHECK(cond)                                                                      \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "%s:%d: check failed: %s (note: %s)\n", __FILE__, __LINE__, #cond, \
                    mc_cache_note() ? mc_cache_note() : "none");                              \
            _exit(1);                                                                          \
        }                                                                                      \
    } while (0)

static const char *refused_root;
static const char *refused_words;

/* The cache refuses the directory: nothing stored or loaded, a note naming it and why. */
static void check_refused(void)
{
    void *data;
    size_t size;
    CHILD_CHECK(mc_cache_note() == NULL);
    mc_cache_store("cpu", "refused", "abc", 3);
    CHILD_CHECK(mc_cache_load("cpu", "refused", &data, &size) == MC_CACHE_OFF);
    const char *note = mc_cache_note();
    CHILD_CHECK(note != NULL);
    CHILD_CHECK(strstr(note, refused_root) != NULL);
    CHILD_CHECK(strstr(note, refused_words) != NULL);
    char entry[4300];
    mc_cache_entry_path("cpu", "refused", entry, sizeof entry);
    CHILD_CHECK(!exists(entry));
}

static void test_directories_refused(void **state)
{
    (void)state;
    char kind[4200];
    /* the root writable by others */
    const char *root = fresh_cache("refuse_root_mode");
    assert_int_equal(mkdir(root, 0700), 0);
    assert_int_equal(chmod(root, 0777), 0);
    refused_root = root, refused_words = "writable by other users";
    in_child(check_refused);
    /* the kind's directory writable by its group */
    root = fresh_cache("refuse_kind_mode");
    assert_int_equal(mkdir(root, 0700), 0);
    snprintf(kind, sizeof kind, "%s/cpu", root);
    assert_int_equal(mkdir(kind, 0700), 0);
    assert_int_equal(chmod(kind, 0770), 0);
    refused_root = kind, refused_words = "writable by its group";
    in_child(check_refused);
    /* the kind's directory a symlink to a directory that would do */
    root = fresh_cache("refuse_symlink");
    assert_int_equal(mkdir(root, 0700), 0);
    char real[4200];
    snprintf(real, sizeof real, "%s/real", root);
    assert_int_equal(mkdir(real, 0700), 0);
    snprintf(kind, sizeof kind, "%s/cpu", root);
    assert_int_equal(symlink(real, kind), 0);
    refused_root = kind, refused_words = "symbolic link";
    in_child(check_refused);
    /* another user's root (only root can make one) */
    root = fresh_cache("refuse_owner");
    assert_int_equal(mkdir(root, 0700), 0);
    if (geteuid() == 0) {
        assert_int_equal(chown(root, 65534, 65534), 0);
        refused_root = root, refused_words = "belongs to user id 65534";
        in_child(check_refused);
    } else {
        printf("note: not root: the other-owner case was not checked\n");
    }
}

/* ---- temporaries ------------------------------------------------------------------------------ */

typedef struct store_job {
    int thread;
    size_t sizes[2];
} store_job;

static void *store_many(void *arg)
{
    store_job *j = arg;
    unsigned char *payload = malloc(j->sizes[1]);
    for (int i = 0; i < 40; i++) {
        size_t n = j->sizes[i % 2];
        payload_pattern(payload, n, (unsigned)j->thread);
        mc_cache_store("cpu", "one key, many writers", payload, n);
    }
    free(payload);
    return NULL;
}

/* Eight threads of one process store the same key at once: every load sees one whole payload
 * of one writer, and no temporary is left. (The old single name per process let one thread
 * truncate another's file under it.) */
static void test_concurrent_stores(void **state)
{
    (void)state;
    const char *root = fresh_cache("concurrent");
    pthread_t th[8];
    store_job jobs[8];
    for (int t = 0; t < 8; t++) {
        jobs[t] = (store_job){.thread = t, .sizes = {1000 + (size_t)t * 37, 20000 + (size_t)t * 91}};
        assert_int_equal(pthread_create(&th[t], NULL, store_many, &jobs[t]), 0);
    }
    for (int t = 0; t < 8; t++)
        pthread_join(th[t], NULL);
    void *data;
    size_t size;
    assert_int_equal(mc_cache_load("cpu", "one key, many writers", &data, &size), MC_CACHE_HIT);
    bool matched = false;
    for (int t = 0; t < 8 && !matched; t++)
        for (int k = 0; k < 2 && !matched; k++)
            if (size == jobs[t].sizes[k]) {
                unsigned char *want = malloc(size);
                payload_pattern(want, size, (unsigned)t);
                matched = memcmp(want, data, size) == 0;
                free(want);
            }
    assert_true(matched);
    free(data);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/cpu", root);
    assert_int_equal(count_files(dir, ".tmp"), 0);
}

static char seen_temp[4400];
static bool temp_gone_after_remove;

static void interrupt_before_rename(const char *temp_path)
{
    snprintf(seen_temp, sizeof seen_temp, "%s", temp_path);
    bool was_there = exists(temp_path);
    mc_temp_files_remove(); /* what the command's SIGINT handler calls */
    temp_gone_after_remove = was_there && !exists(temp_path);
}

/* A store interrupted between writing and renaming: the handler's mc_temp_files_remove deletes
 * its temporary, and nothing half-written becomes an entry. */
static void test_interrupted_store_leaves_nothing(void **state)
{
    (void)state;
    const char *root = fresh_cache("interrupted");
    mc_cache_before_rename = interrupt_before_rename;
    mc_cache_store("cpu", "interrupted", "payload", 7);
    mc_cache_before_rename = NULL;
    assert_true(temp_gone_after_remove);
    assert_non_null(strstr(seen_temp, ".tmp-"));
    void *data;
    size_t size;
    assert_int_equal(mc_cache_load("cpu", "interrupted", &data, &size), MC_CACHE_MISS);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/cpu", root);
    assert_int_equal(count_files(dir, ""), 0);
    /* the registry itself: a registered file goes, an unregistered one stays */
    char a[4200], b[4200];
    snprintf(a, sizeof a, "%s/registered.tmp", mc_test_tmpdir());
    snprintf(b, sizeof b, "%s/unregistered.tmp", mc_test_tmpdir());
    write_file(a, "a", 1);
    write_file(b, "b", 1);
    int slot = mc_temp_register(a);
    int other = mc_temp_register(b);
    assert_true(slot >= 0 && other >= 0);
    mc_temp_unregister(other);
    mc_temp_files_remove();
    mc_temp_unregister(slot);
    assert_false(exists(a));
    assert_true(exists(b));
    unlink(b);
}

static void set_age(const char *path, time_t seconds_ago)
{
    struct timespec t[2];
    clock_gettime(CLOCK_REALTIME, &t[0]);
    t[0].tv_sec -= seconds_ago;
    t[1] = t[0];
    assert_int_equal(utimensat(AT_FDCWD, path, t, AT_SYMLINK_NOFOLLOW), 0);
}

/* Temporaries of interrupted writes older than an hour are swept by the next store; fresh ones
 * (a write in progress elsewhere) stay. */
static void test_stale_temporaries_swept(void **state)
{
    (void)state;
    const char *root = fresh_cache("stale");
    mc_cache_store("cpu", "first", "1", 1);
    char stale[4200], fresh[4200], peaks_dir[4200], stale_peaks[4300];
    snprintf(stale, sizeof stale, "%s/cpu/0123456789abcdef0123456789abcdef.tmp-1-1-0", root);
    snprintf(fresh, sizeof fresh, "%s/cpu/0123456789abcdef0123456789abcdef.tmp-1-1-1", root);
    snprintf(peaks_dir, sizeof peaks_dir, "%s/peaks", root);
    mkdir(peaks_dir, 0700);
    snprintf(stale_peaks, sizeof stale_peaks, "%s/host.txt.tmp-1-0", peaks_dir);
    write_file(stale, "half", 4);
    write_file(fresh, "half", 4);
    write_file(stale_peaks, "half", 4);
    set_age(stale, 2 * 3600);
    set_age(stale_peaks, 2 * 3600);
    mc_cache_store("cpu", "second", "2", 1);
    assert_false(exists(stale));
    assert_false(exists(stale_peaks));
    assert_true(exists(fresh));
}

/* ---- the size cap ---------------------------------------------------------------------------- */

static void store_sized(const char *key, size_t n, time_t age)
{
    unsigned char *p = calloc(n, 1);
    mc_cache_store("cpu", key, p, n);
    free(p);
    char path[4200];
    assert_true(mc_cache_entry_path("cpu", key, path, sizeof path));
    if (age)
        set_age(path, age);
}

static bool has_entry(const char *key)
{
    char path[4200];
    return mc_cache_entry_path("cpu", key, path, sizeof path) && exists(path);
}

static void test_size_cap_lru(void **state)
{
    (void)state;
    fresh_cache("cap");
    setenv("MINIC_CACHE_SIZE", "35K", 1);
    assert_int_equal(mc_cache_capacity(), 35 * 1024);
    store_sized("a", 10000, 400); /* oldest */
    store_sized("b", 10000, 300);
    store_sized("c", 10000, 200);
    assert_true(has_entry("a") && has_entry("b") && has_entry("c"));
    void *data;
    size_t size;
    assert_int_equal(mc_cache_load("cpu", "a", &data, &size), MC_CACHE_HIT); /* a: used now */
    free(data);
    store_sized("d", 10000, 0);
    /* b was the least recently used: it went; a, used since, stayed */
    assert_false(has_entry("b"));
    assert_true(has_entry("a") && has_entry("c") && has_entry("d"));
    /* larger than the whole cap: not stored, nothing evicted for it */
    store_sized("huge", 40000, 0);
    assert_false(has_entry("huge"));
    assert_true(has_entry("a") && has_entry("c") && has_entry("d"));
    /* a file larger than the cap under an entry's name is not one of ours: evicted unread */
    char path[4200];
    assert_true(mc_cache_entry_path("cpu", "planted big", path, sizeof path));
    unsigned char *junk = calloc(40000, 1);
    write_file(path, junk, 40000);
    free(junk);
    assert_int_equal(mc_cache_load("cpu", "planted big", &data, &size), MC_CACHE_EVICTED);
    assert_false(exists(path));
    /* 0: nothing is stored */
    setenv("MINIC_CACHE_SIZE", "0", 1);
    store_sized("e", 10, 0);
    assert_false(has_entry("e"));
    setenv("MINIC_CACHE_SIZE", "2G", 1);
    assert_int_equal(mc_cache_capacity(), (uint64_t)2 << 30);
    unsetenv("MINIC_CACHE_SIZE");
    assert_int_equal(mc_cache_capacity(), (uint64_t)256 << 20);
}

static void check_bad_size(void)
{
    setenv("MINIC_CACHE_SIZE", "lots", 1);
    CHILD_CHECK(mc_cache_capacity() == (uint64_t)256 << 20);
    CHILD_CHECK(mc_cache_note() && strstr(mc_cache_note(), "MINIC_CACHE_SIZE='lots'"));
}

static void test_bad_size_is_a_note(void **state)
{
    (void)state;
    fresh_cache("bad_size");
    in_child(check_bad_size);
}

/* ---- off, stat, clear ------------------------------------------------------------------------ */

static void test_no_cache(void **state)
{
    (void)state;
    const char *root = fresh_cache("no_cache");
    setenv("MINIC_NO_CACHE", "1", 1);
    mc_cache_store("cpu", "k", "v", 1);
    void *data;
    size_t size;
    assert_int_equal(mc_cache_load("cpu", "k", &data, &size), MC_CACHE_OFF);
    assert_false(exists(root));
    unsetenv("MINIC_NO_CACHE");
}

static void test_stat_and_clear(void **state)
{
    (void)state;
    const char *root = fresh_cache("clear");
    store_sized("x", 1000, 0);
    store_sized("y", 2000, 0);
    mc_cache_store("cuda", "z", "123", 3);
    char temp[4200], peaks[4200], peaks_file[4300];
    snprintf(temp, sizeof temp, "%s/cpu/0123456789abcdef0123456789abcdef.tmp-1-1-0", root);
    write_file(temp, "t", 1);
    snprintf(peaks, sizeof peaks, "%s/peaks", root);
    mkdir(peaks, 0700);
    snprintf(peaks_file, sizeof peaks_file, "%s/host.txt", peaks);
    write_file(peaks_file, "device host\n", 12);
    mc_cache_stats st;
    assert_int_equal(mc_cache_stat(&st), MC_OK);
    assert_true(st.enabled);
    assert_string_equal(st.root, root);
    assert_int_equal(st.entries, 3);
    assert_int_equal(st.temporaries, 1);
    int64_t cpu_entries = -1;
    for (int k = 0; k < st.nkinds; k++)
        if (!strcmp(st.kinds[k].name, "cpu"))
            cpu_entries = st.kinds[k].entries;
    assert_int_equal(cpu_entries, 2);
    int64_t removed, bytes;
    assert_int_equal(mc_cache_clear(&removed, &bytes), MC_OK);
    assert_int_equal(removed, 3);
    assert_true(bytes > 3000);
    assert_false(exists(temp));
    assert_true(exists(peaks_file)); /* measured peaks are not compiled code */
    assert_int_equal(mc_cache_stat(&st), MC_OK);
    assert_int_equal(st.entries, 0);
    /* a refused directory is left alone, and said */
    char kind[4200];
    snprintf(kind, sizeof kind, "%s/cpu", root);
    store_sized("w", 100, 0);
    assert_int_equal(chmod(kind, 0777), 0);
    assert_int_equal(mc_cache_clear(&removed, &bytes), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "writable by other users"));
    assert_int_equal(chmod(kind, 0700), 0);
    assert_true(has_entry("w"));
}

#else /* built without xxHash: the cache must be off, never unverified */

static void test_without_xxhash_the_cache_is_off(void **state)
{
    (void)state;
    const char *root = fresh_cache("no_xxhash");
    mc_cache_store("cpu", "k", "v", 1);
    void *data;
    size_t size;
    assert_int_equal(mc_cache_load("cpu", "k", &data, &size), MC_CACHE_OFF);
    assert_false(exists(root));
    assert_non_null(mc_cache_note());
    assert_non_null(strstr(mc_cache_note(), "xxHash"));
}

#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
#ifdef MINIC_HAVE_XXHASH
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_every_bit_flip_is_evicted),
        cmocka_unit_test(test_wrong_hash_never_handed_out),
        cmocka_unit_test(test_symlink_entry_not_followed),
        cmocka_unit_test(test_store_never_writes_through_symlinks),
        cmocka_unit_test(test_directories_refused),
        cmocka_unit_test(test_concurrent_stores),
        cmocka_unit_test(test_interrupted_store_leaves_nothing),
        cmocka_unit_test(test_stale_temporaries_swept),
        cmocka_unit_test(test_size_cap_lru),
        cmocka_unit_test(test_bad_size_is_a_note),
        cmocka_unit_test(test_no_cache),
        cmocka_unit_test(test_stat_and_clear),
#else
        cmocka_unit_test(test_without_xxhash_the_cache_is_off),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
