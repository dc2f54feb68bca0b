/* `minic cache info|clear`: what the compile cache holds, and emptying it (support/cache.c).
 *
 * The cache lives in $XDG_CACHE_HOME/minic (else ~/.cache/minic), one directory per kind of
 * compiled code (cpu: object code, cuda: cubins). `info` says where it is, whether it is used
 * (and why not), its entries and bytes per kind against the cap, and the temporaries of writes
 * in progress or interrupted; `clear` deletes every entry and temporary (not the measured peaks
 * of `minic peaks`). Both refuse to touch a directory that is not the user's own.
 */
#include "tools/cli.h"

#include <stdio.h>
#include <string.h>

#include "runtime/runtime.h"

static const char CACHE_HELP[] =
    "usage: minic cache info|clear\n\n"
    "the compile cache: compiled kernels kept on disk so that the next run of the same program\n"
    "skips code generation. It lives in $XDG_CACHE_HOME/minic, else ~/.cache/minic. Every\n"
    "entry is checked (framing, key and an XXH3-128 hash) before it is used; a damaged entry is\n"
    "deleted and the code compiled again. The directory must be yours and not writable by\n"
    "others, else the cache is not used.\n\n"
    "commands:\n"
    "  info   where the cache is, whether it is used, its entries and size per kind\n"
    "  clear  delete every entry (the measured peaks of `minic peaks` are kept)\n\n"
    "environment:\n"
    "  MINIC_CACHE_SIZE  the cap on its total size: bytes, or a number with K, M or G\n"
    "                    (default 256M); the least recently used entries go first; 0 stores\n"
    "                    nothing\n"
    "  MINIC_NO_CACHE=1  do not use the cache at all\n";

static void print_bytes(int64_t bytes)
{
    if (bytes >= (int64_t)1 << 30)
        printf("%.1f GiB", (double)bytes / (double)((int64_t)1 << 30));
    else if (bytes >= 1 << 20)
        printf("%.1f MiB", (double)bytes / (double)(1 << 20));
    else if (bytes >= 1 << 10)
        printf("%.1f KiB", (double)bytes / 1024.0);
    else
        printf("%lld bytes", (long long)bytes);
}

static int cache_info(void)
{
    mc_cache_stats st;
    mc_cache_stat(&st);
    if (!st.root[0])
        return cli_error(CLI_USER, "cache: no cache directory (%s)", st.why_not);
    printf("directory: %s\n", st.root);
    if (st.enabled)
        printf("state: in use\n");
    else
        printf("state: not used: %s\n", st.why_not);
    const char *note = mc_cache_note(); /* e.g. a bad MINIC_CACHE_SIZE */
    if (note)
        printf("note: %s\n", note);
    printf("cap: ");
    print_bytes((int64_t)st.capacity);
    printf(" (MINIC_CACHE_SIZE)\n");
    for (int k = 0; k < st.nkinds; k++) {
        if (st.kinds[k].refused[0]) {
            printf("%s: not used: %s/%s\n", st.kinds[k].name, st.root, st.kinds[k].refused);
            continue;
        }
        if (!st.kinds[k].entries && !strcmp(st.kinds[k].name, "peaks"))
            continue; /* measured peaks, not compiled code */
        printf("%s: %lld %s, ", st.kinds[k].name, (long long)st.kinds[k].entries,
               st.kinds[k].entries == 1 ? "entry" : "entries");
        print_bytes(st.kinds[k].bytes);
        putchar('\n');
    }
    printf("total: %lld %s, ", (long long)st.entries, st.entries == 1 ? "entry" : "entries");
    print_bytes(st.bytes);
    printf("\ntemporary files: %lld\n", (long long)st.temporaries);
    return CLI_OK;
}

static int cache_clear(void)
{
    int64_t entries, bytes;
    mc_status s = mc_cache_clear(&entries, &bytes);
    if (s != MC_OK)
        return cli_library_error(s);
    printf("removed %lld %s (", (long long)entries, entries == 1 ? "entry" : "entries");
    print_bytes(bytes);
    printf(")\n");
    return CLI_OK;
}

int cli_cache(int argc, char **argv)
{
    if (argc == 1 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
        fputs(CACHE_HELP, stdout);
        return CLI_OK;
    }
    if (argc == 1 && !strcmp(argv[0], "info"))
        return cache_info();
    if (argc == 1 && !strcmp(argv[0], "clear"))
        return cache_clear();
    static const char *const names[] = {"info", "clear"};
    char near[64];
    if (argc == 1 && mc_suggest(argv[0], strlen(argv[0]), names, 2, near, sizeof near))
        return cli_error(CLI_USER, "cache: unknown command '%s' (did you mean %s? usage: minic cache info|clear)",
                         argv[0], near);
    fputs(CACHE_HELP, stderr);
    return cli_error(CLI_USER, "cache: expected 'info' or 'clear'%s%s%s", argc ? ", got '" : "",
                     argc ? argv[0] : "", argc ? "'" : "");
}
