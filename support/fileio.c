/* Whole-file reading and all-or-nothing writing, shared by the .npy and .safetensors code.
 *
 * docs/FORMAT.md §3 promises never to leave a partial output file, so every writer goes through
 * mc_file_write_atomic: the bytes go to a fresh temporary file next to the destination (same
 * directory, hence same file system, so rename() is atomic), which is flushed, synced and then
 * renamed over the destination. Any failure on the way removes the temporary. The temporary is
 * created with open(O_EXCL, 0666) rather than mkstemp so that the final file gets the usual
 * permissions under the user's umask.
 *
 * Two destinations are not renamed over: a device, FIFO or socket (`--profile-json /dev/null`,
 * `--trace /dev/stdout`) is written in place, since a rename would put a regular file where the
 * device node was; and a symbolic link keeps being a link, its target replaced.
 *
 * Errors name the file the user gave, never the temporary. A missing directory, a permission
 * problem or a destination that is a directory are the user's mistakes (MC_ERR_INPUT); a full
 * disk or an I/O error is the system's (MC_ERR_SYSTEM).
 *
 * Reading: only regular files. A FIFO, a device or a socket given as a graph, weights or input
 * is refused with an error naming the file and what it is, before a byte is read: the file is
 * opened with O_NONBLOCK (so that opening a FIFO with no writer does not wait forever) and
 * checked with fstat on the descriptor that is then read (no window between check and use).
 *
 * Temporaries of writes in progress (these and the compile cache's) are registered in a small
 * table that mc_temp_files_remove walks: a SIGINT/SIGTERM handler installed by the program (the
 * minic command has one; the library installs none) calls it, so an interrupted write leaves no
 * temporary behind. The table is fixed-size and lock-free so that the handler may read it.
 */
#include "support/support.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static mc_status errno_status(int err)
{
    switch (err) {
    case ENOENT: case ENOTDIR: case EACCES: case EPERM: case EISDIR: case EROFS:
    case ENAMETOOLONG: case ELOOP: case EEXIST: case EINVAL:
        return MC_ERR_INPUT;
    default:
        return MC_ERR_SYSTEM;
    }
}

static const char *file_kind(mode_t mode)
{
    return S_ISDIR(mode) ? "a directory" : S_ISFIFO(mode) ? "a FIFO (named pipe)"
           : S_ISCHR(mode) ? "a character device" : S_ISBLK(mode) ? "a block device"
           : S_ISSOCK(mode) ? "a socket" : "a special file";
}

mc_status mc_file_open_regular(const char *path, int *fd_out, struct stat *info)
{
    *fd_out = -1;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        struct stat st;
        if (err == ENXIO && stat(path, &st) == 0) /* a socket cannot be opened at all */
            return mc_fail(MC_ERR_INPUT, "%s: not a regular file (%s); minic reads only regular files",
                           path, file_kind(st.st_mode));
        return mc_fail(errno_status(err), "%s: cannot open: %s", path, strerror(err));
    }
    if (fstat(fd, info) != 0) {
        int err = errno;
        close(fd);
        return mc_fail(MC_ERR_SYSTEM, "%s: cannot stat: %s", path, strerror(err));
    }
    if (!S_ISREG(info->st_mode)) {
        close(fd);
        return mc_fail(MC_ERR_INPUT, "%s: not a regular file (%s); minic reads only regular files",
                       path, file_kind(info->st_mode));
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0)
        (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    *fd_out = fd;
    return MC_OK;
}

mc_status mc_file_read_all(const char *path, char **data, size_t *size)
{
    *data = NULL;
    *size = 0;
    int fd;
    struct stat st;
    mc_status status = mc_file_open_regular(path, &fd, &st);
    if (status != MC_OK)
        return status;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int err = errno;
        close(fd);
        return mc_fail(MC_ERR_SYSTEM, "%s: cannot read: %s", path, strerror(err));
    }
    if ((uint64_t)st.st_size >= SIZE_MAX) {
        fclose(f);
        return mc_fail(MC_ERR_SYSTEM, "%s: too large to read", path);
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        fclose(f);
        return mc_fail(MC_ERR_SYSTEM, "%s: out of memory reading %zu bytes", path, n);
    }
    size_t got = fread(buf, 1, n, f);
    bool failed = ferror(f) != 0;
    /* A file that grew while we read it: more bytes than fstat said means our view is stale. */
    bool grew = !failed && got == n && fgetc(f) != EOF;
    fclose(f);
    if (failed || got != n || grew) {
        free(buf);
        return mc_fail(MC_ERR_SYSTEM, "%s: read failed (the file changed while being read?)",
                       path);
    }
    buf[n] = '\0';
    *data = buf;
    *size = n;
    return MC_OK;
}

/* ---- temporaries of writes in progress ---------------------------------------------------- */

enum { TEMP_SLOTS = 64, TEMP_PATH_MAX = 4096 };
enum { SLOT_FREE, SLOT_BUSY, SLOT_LIVE }; /* BUSY: being filled or emptied, not to be read */

static struct {
    atomic_int state;
    char path[TEMP_PATH_MAX];
} temp_slots[TEMP_SLOTS];

int mc_temp_register(const char *path)
{
    size_t n = strlen(path);
    if (n >= TEMP_PATH_MAX)
        return -1;
    for (int i = 0; i < TEMP_SLOTS; i++) {
        int expected = SLOT_FREE;
        if (atomic_compare_exchange_strong(&temp_slots[i].state, &expected, SLOT_BUSY)) {
            memcpy(temp_slots[i].path, path, n + 1);
            atomic_store(&temp_slots[i].state, SLOT_LIVE);
            return i;
        }
    }
    return -1; /* table full: the write goes on unregistered (the cache's sweep removes it later) */
}

void mc_temp_unregister(int slot)
{
    if (slot >= 0 && slot < TEMP_SLOTS)
        atomic_store(&temp_slots[slot].state, SLOT_FREE);
}

void mc_temp_files_remove(void)
{
    /* Async-signal-safe: lock-free atomics and unlink(2) only. */
    for (int i = 0; i < TEMP_SLOTS; i++)
        if (atomic_load(&temp_slots[i].state) == SLOT_LIVE)
            (void)unlink(temp_slots[i].path);
}

static mc_status write_atomic(const char *path, const char *dest, mc_status (*write)(FILE *f, void *ctx),
                              void *ctx);

/* A destination that is a device, a FIFO or a socket (/dev/null, /dev/stdout on a terminal or
 * a pipe) is written in place: renaming a temporary over it would replace the device node with
 * a regular file (as root, /dev/null itself). There is nothing to keep whole there. A FIFO with
 * no reader is an error, not a wait. */
static mc_status write_in_place(const char *path, mc_status (*write)(FILE *f, void *ctx), void *ctx)
{
    int fd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        if (err == ENXIO)
            return mc_fail(MC_ERR_INPUT, "%s: cannot write: a FIFO with no reader", path);
        return mc_fail(errno_status(err), "%s: cannot write: %s", path, strerror(err));
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0)
        (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        int err = errno;
        close(fd);
        return mc_fail(MC_ERR_SYSTEM, "%s: cannot write: %s", path, strerror(err));
    }
    mc_status st = write(f, ctx);
    errno = 0;
    int err = st == MC_OK && (fflush(f) != 0 || ferror(f)) ? (errno ? errno : EIO) : 0;
    if (fclose(f) != 0 && st == MC_OK && !err)
        err = errno ? errno : EIO;
    if (st == MC_OK && err)
        st = mc_fail(MC_ERR_SYSTEM, "%s: write failed: %s", path, strerror(err));
    return st;
}

mc_status mc_file_write_atomic(const char *path, mc_status (*write)(FILE *f, void *ctx),
                               void *ctx)
{
    struct stat dest;
    if (stat(path, &dest) == 0 && !S_ISREG(dest.st_mode) && !S_ISDIR(dest.st_mode))
        return write_in_place(path, write, ctx);
    /* A symbolic link to a file: the file is replaced, the link kept (renaming over the link
     * would turn it into a regular file). A dangling link is replaced as a file would be. */
    char *target = NULL;
    if (lstat(path, &dest) == 0 && S_ISLNK(dest.st_mode))
        target = realpath(path, NULL);
    mc_status st = write_atomic(path, target ? target : path, write, ctx);
    free(target);
    return st;
}

/* Write through a temporary beside `dest` renamed over it; messages name `path`, the name the
 * user gave. */
static mc_status write_atomic(const char *path, const char *dest, mc_status (*write)(FILE *f, void *ctx),
                              void *ctx)
{
    static _Atomic unsigned counter;
    size_t len = strlen(dest) + 64;
    char *tmp = malloc(len);
    if (!tmp)
        return mc_fail(MC_ERR_SYSTEM, "%s: out of memory", path);
    /* The name is registered (for mc_temp_files_remove on SIGINT/SIGTERM) before the file is
     * created: a signal between the open and a later registration would leave it behind. A
     * name whose open fails is unregistered at once. */
    int fd = -1, slot = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(tmp, len, "%s.tmp-%ld-%u", dest, (long)getpid(), counter++);
        slot = mc_temp_register(tmp);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0) {
            int err = errno;
            mc_temp_unregister(slot);
            slot = -1;
            errno = err;
            if (err != EEXIST)
                break;
        }
    }
    if (fd < 0) {
        int err = errno;
        free(tmp);
        return mc_fail(errno_status(err), "%s: cannot create: %s", path, strerror(err));
    }
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        int err = errno;
        close(fd);
        unlink(tmp);
        mc_temp_unregister(slot);
        free(tmp);
        return mc_fail(MC_ERR_SYSTEM, "%s: cannot write: %s", path, strerror(err));
    }
    mc_status st = write(f, ctx);
    int err = 0;
    errno = 0;
    if (st == MC_OK && (fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0))
        err = errno ? errno : EIO;
    if (fclose(f) != 0 && st == MC_OK && !err)
        err = errno ? errno : EIO;
    if (st == MC_OK && err)
        st = mc_fail(MC_ERR_SYSTEM, "%s: write failed: %s", path, strerror(err));
    if (st == MC_OK && rename(tmp, dest) != 0) {
        err = errno;
        st = mc_fail(errno_status(err), "%s: cannot write: %s", path, strerror(err));
    }
    if (st != MC_OK)
        unlink(tmp);
    mc_temp_unregister(slot);
    free(tmp);
    return st;
}
