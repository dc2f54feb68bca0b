/* Whole-file reading and all-or-nothing writing, shared by the .npy and .safetensors code.
 *
 * docs/FORMAT.md §3 promises never to leave a partial output file, so every writer goes through
 * mc_file_write_atomic: the bytes go to a fresh temporary file next to the destination (same
 * directory, hence same file system, so rename() is atomic), which is flushed, synced and then
 * renamed over the destination. Any failure on the way removes the temporary. The temporary is
 * created with open(O_EXCL, 0666) rather than mkstemp so that the final file gets the usual
 * permissions under the user's umask.
 *
 * Errors name the file the user gave, never the temporary. A missing directory, a permission
 * problem or a destination that is a directory are the user's mistakes (MC_ERR_INPUT); a full
 * disk or an I/O error is the system's (MC_ERR_SYSTEM).
 */
#include "support/support.h"

#include <errno.h>
#include <fcntl.h>
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

mc_status mc_file_read_all(const char *path, char **data, size_t *size)
{
    *data = NULL;
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return mc_fail(errno_status(errno), "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        int err = errno;
        fclose(f);
        return mc_fail(MC_ERR_SYSTEM, "%s: cannot stat: %s", path, strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        fclose(f);
        return mc_fail(MC_ERR_INPUT, "%s: not a regular file", path);
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

mc_status mc_file_write_atomic(const char *path, mc_status (*write)(FILE *f, void *ctx),
                               void *ctx)
{
    static _Atomic unsigned counter;
    size_t len = strlen(path) + 64;
    char *tmp = malloc(len);
    if (!tmp)
        return mc_fail(MC_ERR_SYSTEM, "%s: out of memory", path);
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(tmp, len, "%s.tmp-%ld-%u", path, (long)getpid(), counter++);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
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
    if (st == MC_OK && rename(tmp, path) != 0) {
        err = errno;
        st = mc_fail(errno_status(err), "%s: cannot write: %s", path, strerror(err));
    }
    if (st != MC_OK)
        unlink(tmp);
    free(tmp);
    return st;
}
