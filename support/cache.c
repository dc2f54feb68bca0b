/* The compile cache: compiled kernels (cubins, object code) on disk, keyed on everything they
 * depend on.
 *
 * An entry file holds the key's length, the key itself, then the payload; a lookup compares the
 * stored key with the wanted one, so two keys whose hashes collide simply miss. Writes go to a
 * unique temporary name and are renamed into place, so concurrent compiles of the same program
 * never see half an entry. Nothing here is an error: the cache only saves time.
 */
#include "support/support.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

uint64_t mc_hash64(const void *data, size_t n, uint64_t seed)
{
    /* FNV-1a, then a final avalanche (splitmix64's) so nearby keys spread over the file names. */
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

static bool make_dirs(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        bool ok = mkdir(path, 0755) == 0 || errno == EEXIST;
        *p = '/';
        if (!ok)
            return false;
    }
    return mkdir(path, 0755) == 0 || errno == EEXIST;
}

bool mc_cache_dir(const char *kind, bool create, char *dir, size_t size)
{
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int w;
    if (xdg && *xdg)
        w = snprintf(dir, size, "%s/minic/%s", xdg, kind);
    else if (home && *home)
        w = snprintf(dir, size, "%s/.cache/minic/%s", home, kind);
    else
        return false;
    return w > 0 && (size_t)w < size && (!create || make_dirs(dir));
}

static bool entry_path(const char *kind, const char *key, char *path, size_t size, bool create)
{
    const char *off = getenv("MINIC_NO_CACHE");
    if (off && *off && strcmp(off, "0") != 0)
        return false;
    char dir[4096];
    if (!mc_cache_dir(kind, create, dir, sizeof dir))
        return false;
    uint64_t h = mc_hash64(key, strlen(key), 0);
    return snprintf(path, size, "%s/%016llx", dir, (unsigned long long)h) < (int)size;
}

bool mc_cache_load(const char *kind, const char *key, void **data, size_t *size)
{
    char path[4200];
    if (!entry_path(kind, key, path, sizeof path, false))
        return false;
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    bool ok = false;
    uint64_t klen, plen;
    char *stored = NULL;
    void *payload = NULL;
    size_t want = strlen(key);
    if (fread(&klen, 8, 1, f) != 1 || klen != want || fread(&plen, 8, 1, f) != 1 || plen > (1ull << 32))
        goto done;
    stored = malloc(klen + 1);
    payload = malloc(plen ? plen : 1);
    if (!stored || !payload || fread(stored, 1, klen, f) != klen || memcmp(stored, key, klen) != 0 ||
        fread(payload, 1, plen, f) != plen)
        goto done;
    *data = payload;
    *size = plen;
    payload = NULL;
    ok = true;
done:
    free(stored);
    free(payload);
    fclose(f);
    return ok;
}

void mc_cache_store(const char *kind, const char *key, const void *data, size_t size)
{
    char path[4200], tmp[4300];
    if (!entry_path(kind, key, path, sizeof path, true))
        return;
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return;
    uint64_t klen = strlen(key), plen = size;
    bool ok = fwrite(&klen, 8, 1, f) == 1 && fwrite(&plen, 8, 1, f) == 1 &&
              fwrite(key, 1, klen, f) == klen && fwrite(data, 1, size, f) == size;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0)
        unlink(tmp);
}
