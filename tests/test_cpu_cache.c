/* The CPU backend's use of the compile cache (backends/cpu/llvm_backend.c + support/cache.c), end to
 * end through mc_program_compile. Issue 19's repros: one flipped bit of a cached entry gave
 * wrong results with exit 0, or crashed (SIGSEGV, SIGILL, an LLVM abort); a crafted entry with
 * the right key ran planted code; the key left out the options and the code generator's
 * settings.
 *
 * test_bit_flips flips 1000 random single bits of a real cached entry, one at a time. For the
 * first MINIC_CACHE_FLIPS of them (default 100) it compiles and runs the program: every run
 * must succeed, recompile (the entry changed) and give outputs bit-identical to the first run.
 * A compile and run costs ~160 ms under ASan, so the other flips go through the cache's load
 * path only, where each must be evicted (that is what makes the compile-and-run path recompile).
 * MINIC_CACHE_FLIPS=1000 runs all of them whole (~160 s under ASan); scripts/cache_bitflip.sh
 * does 1000 through the minic command, for the cpu or the cuda backend.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"

#include "backends/cpu/llvm.h"
#include "runtime/runtime.h"

static const char *GRAPH =
    "graph cached\n"
    "input x : f32[24, 40]\n"
    "param w : f32[40, 56]\n"
    "h = matmul(x, w)\n"
    "s = mul(h, 0.125)\n"
    "p = softmax(s, axis=-1)\n"
    "y = gelu(p)\n"
    "output y\n";

static char cache_dir[4200]; /* $XDG_CACHE_HOME/minic/cpu of the current test */

static void fresh_cache(const char *name)
{
    char xdg[4096];
    snprintf(xdg, sizeof xdg, "%s/%s", mc_test_tmpdir(), name);
    mkdir(xdg, 0700);
    setenv("XDG_CACHE_HOME", xdg, 1);
    unsetenv("MINIC_NO_CACHE");
    unsetenv("MINIC_CACHE_SIZE");
    snprintf(cache_dir, sizeof cache_dir, "%s/minic/cpu", xdg);
}

/* The one entry in the cache directory (the test's cache holds one program). */
static void only_entry(char *path, size_t size)
{
    DIR *d = opendir(cache_dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *de; (de = readdir(d));)
        if (de->d_name[0] != '.' && !strstr(de->d_name, ".tmp")) {
            snprintf(path, size, "%s/%s", cache_dir, de->d_name);
            n++;
        }
    closedir(d);
    assert_int_equal(n, 1);
}

static unsigned char *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *size = (size_t)n;
    return b;
}

static void write_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, size, f), size);
    assert_int_equal(fclose(f), 0);
}

/* Compile text on the cpu backend with opt, run it with seeded inputs, copy the first output
 * into out (a malloc'd buffer; *bytes its size). Returns the kernels compiled (not from the
 * cache), or fails the test. */
static int compile_run(const char *text, mc_options opt, void **out, size_t *bytes)
{
    mc_graph *g;
    if (mc_graph_parse_string("cached.graph", text, &g) != MC_OK)
        fail_msg("parse: %s", mc_error_message());
    opt.backend = MC_BACKEND_CPU;
    opt.quiet = true;
    mc_program *p;
    if (mc_program_compile(g, &opt, &p) != MC_OK)
        fail_msg("compile: %s", mc_error_message());
    assert_int_equal(mc_program_fill_random(p, 7), MC_OK);
    if (mc_program_run(p) != MC_OK)
        fail_msg("run: %s", mc_error_message());
    mc_tensor t;
    assert_int_equal(mc_program_output(p, 0, &t), MC_OK);
    *out = malloc(t.bytes);
    memcpy(*out, t.data, t.bytes);
    *bytes = t.bytes;
    int compiled = p->kernels_compiled;
    mc_program_free(p);
    mc_graph_free(g);
    return compiled;
}

static uint64_t next_random(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 17;
}

/* ---- damaged entries --------------------------------------------------------------------------- */

static void test_bit_flips(void **state)
{
    (void)state;
    fresh_cache("flips");
    void *want, *got;
    size_t want_bytes, got_bytes;
    int cold = compile_run(GRAPH, mc_options_default(), &want, &want_bytes);
    assert_true(cold > 0);
    assert_int_equal(compile_run(GRAPH, mc_options_default(), &got, &got_bytes), 0); /* a hit */
    assert_memory_equal(got, want, want_bytes);
    free(got);
    char path[4400];
    only_entry(path, sizeof path);
    size_t size;
    unsigned char *good = read_file(path, &size);
    unsigned char *bad = malloc(size);
    /* MINIC_CACHE_FLIPS flips through the whole program (compile, run, compare), the rest of
     * the 1000 through the cache's load path only (each must be evicted) */
    const char *count = getenv("MINIC_CACHE_FLIPS");
    int full = count ? atoi(count) : 100, total = full > 1000 ? full : 1000;
    uint64_t seed = (uint64_t)time(NULL);
    printf("bit flips: %d in an entry of %zu bytes (%d compiled and run), seed %llu\n", total,
           size, full, (unsigned long long)seed);
    char *key = NULL;
    {
        mc_cache_entry e;
        assert_int_equal(mc_cache_entry_parse(good, size, &e), MC_ENTRY_OK);
        key = strndup(e.key, e.key_size);
    }
    double t0 = mc_now_ms();
    for (int i = 0; i < total; i++) {
        size_t bit = (size_t)(next_random(&seed) % (size * 8));
        memcpy(bad, good, size);
        bad[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        write_file(path, bad, size);
        if (i >= full) {
            void *data;
            size_t data_size;
            mc_cache_result r = mc_cache_load("cpu", key, &data, &data_size);
            if (r != MC_CACHE_EVICTED || access(path, F_OK) == 0)
                fail_msg("flip %d (bit %zu of %zu): load gave %d, entry %s", i, bit, size * 8,
                         (int)r, access(path, F_OK) == 0 ? "kept" : "evicted");
            continue;
        }
        int compiled = compile_run(GRAPH, mc_options_default(), &got, &got_bytes);
        if (compiled != cold || got_bytes != want_bytes || memcmp(got, want, want_bytes) != 0)
            fail_msg("flip %d (bit %zu of %zu): %d kernels compiled (want %d), outputs %s", i, bit,
                     size * 8, compiled, cold,
                     memcmp(got, want, want_bytes) ? "differ" : "equal");
        free(got);
    }
    printf("bit flips: all %d evicted; the %d compiled and run gave identical outputs (%.1f s)\n",
           total, full, (mc_now_ms() - t0) / 1000);
    free(key);
    free(good);
    free(bad);
    free(want);
}

/* The same graph with a different constant: the same kernels (names, buffers), other code. */
static char *with_scale(const char *scale)
{
    char *text = malloc(strlen(GRAPH) + 32);
    const char *at = strstr(GRAPH, "0.125");
    snprintf(text, strlen(GRAPH) + 32, "%.*s%s%s", (int)(at - GRAPH), GRAPH, scale, at + 5);
    return text;
}

/* A crafted entry under the program's own key, holding another program's object code. With a
 * wrong hash it is never run: the program recompiles and gives its own outputs. With a valid
 * hash it does run (control: this is the documented limit, someone who can write the cache as
 * the same user can compute the hash; it also shows that the test can see planted code run). */
static void test_crafted_entry(void **state)
{
    (void)state;
    fresh_cache("crafted");
    char *other = with_scale("0.5");
    void *own, *planted, *got;
    size_t own_bytes, planted_bytes, got_bytes;
    compile_run(GRAPH, mc_options_default(), &own, &own_bytes);
    char path[4400];
    only_entry(path, sizeof path);
    size_t size;
    unsigned char *own_entry = read_file(path, &size);
    mc_cache_entry own_parsed;
    assert_int_equal(mc_cache_entry_parse(own_entry, size, &own_parsed), MC_ENTRY_OK);
    char *key = strndup(own_parsed.key, own_parsed.key_size);
    unlink(path);
    compile_run(other, mc_options_default(), &planted, &planted_bytes);
    assert_memory_not_equal(own, planted, own_bytes); /* the planted code computes otherwise */
    char other_path[4400];
    only_entry(other_path, sizeof other_path);
    size_t other_size;
    unsigned char *other_entry = read_file(other_path, &other_size);
    mc_cache_entry parsed;
    assert_int_equal(mc_cache_entry_parse(other_entry, other_size, &parsed), MC_ENTRY_OK);

    size_t crafted_size;
    unsigned char *crafted = mc_cache_entry_encode(key, parsed.payload, parsed.payload_size,
                                                   &crafted_size);
    assert_non_null(crafted);
    crafted[crafted_size - 3] ^= 0x10; /* a wrong hash */
    write_file(path, crafted, crafted_size);
    assert_true(compile_run(GRAPH, mc_options_default(), &got, &got_bytes) > 0);
    assert_memory_equal(got, own, own_bytes); /* its own code, not the planted one */
    free(got);

    crafted[crafted_size - 3] ^= 0x10; /* the valid hash: the documented limit */
    write_file(path, crafted, crafted_size);
    assert_int_equal(compile_run(GRAPH, mc_options_default(), &got, &got_bytes), 0);
    assert_memory_equal(got, planted, own_bytes);
    free(got);

    /* a verified entry whose payload is not object code LLVM accepts: evicted, recompiled */
    free(crafted);
    crafted = mc_cache_entry_encode(key, "not object code", 15, &crafted_size);
    write_file(path, crafted, crafted_size);
    assert_true(compile_run(GRAPH, mc_options_default(), &got, &got_bytes) > 0);
    assert_memory_equal(got, own, own_bytes);
    free(got);
    assert_int_equal(compile_run(GRAPH, mc_options_default(), &got, &got_bytes), 0); /* good again */
    free(got);

    free(crafted);
    free(other_entry);
    free(own_entry);
    free(key);
    free(own);
    free(planted);
    free(other);
}

/* ---- the key ------------------------------------------------------------------------------------ */

/* Each part of the key, changed alone, gives another key, hence a miss. */
static void test_key_parts(void **state)
{
    (void)state;
    fresh_cache("key_parts");
    llvm_key_parts base = {.minic_version = "0.1.0", .codegen_version = "minic-cpu-4",
                           .llvm_version = "14.0.6", .triple = "x86_64-pc-linux-gnu",
                           .cpu = "znver3", .features = "+avx2,+fma", .passes = "always-inline",
                           .machine = "opt-level aggressive", .options = "fuse 1 plan_memory 1 tf32 0",
                           .kernels = "kernel k0 units 4\n", .ir = "define void @k0() {}\n"};
    char *base_key = llvm_cache_key(&base);
    assert_non_null(base_key);
    mc_cache_store("cpu", base_key, "object", 6);
    const char **fields[] = {&base.minic_version, &base.codegen_version, &base.llvm_version,
                             &base.triple, &base.cpu, &base.features, &base.passes,
                             &base.machine, &base.options, &base.kernels, &base.ir};
    const char *changed[] = {"0.1.1", "minic-cpu-5", "14.0.7", "aarch64-linux-gnu", "znver4",
                             "+avx2,+fma,+avx512f", "always-inline,gvn", "opt-level default",
                             "fuse 0 plan_memory 1 tf32 0", "kernel k0 units 8\n",
                             "define void @k0() { ret void }\n"};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        llvm_key_parts variant = base;
        const char **field = (const char **)((char *)&variant + ((char *)fields[i] - (char *)&base));
        *field = changed[i];
        char *key = llvm_cache_key(&variant);
        assert_string_not_equal(key, base_key);
        void *data;
        size_t size;
        if (mc_cache_load("cpu", key, &data, &size) != MC_CACHE_MISS)
            fail_msg("key part %zu changed to '%s': not a miss", i, changed[i]);
        free(key);
    }
    /* a part cannot run into the next: moving text across a boundary changes the key */
    llvm_key_parts shifted = base;
    shifted.cpu = "znver3 features +avx2,+fma";
    shifted.features = "";
    char *key = llvm_cache_key(&shifted);
    assert_string_not_equal(key, base_key);
    free(key);
    void *data;
    size_t size;
    assert_int_equal(mc_cache_load("cpu", base_key, &data, &size), MC_CACHE_HIT);
    free(data);
    free(base_key);
}

/* The options that change code are a miss when changed (then a hit when repeated). The thread
 * count shapes the GEMMs' split into units (llvm_gemm.c), which is code too: the same count is
 * a hit, and another count, hit or miss, gives the same outputs bit for bit (the split never
 * changes the order of a sum). */
static void test_options_change_the_key(void **state)
{
    (void)state;
    fresh_cache("options");
    void *out;
    size_t bytes;
    mc_options base = mc_options_default();
    base.threads = 2;
    void *want;
    size_t want_bytes;
    assert_true(compile_run(GRAPH, base, &want, &want_bytes) > 0);
    mc_options variants[3] = {base, base, base};
    variants[0].fuse = false;
    variants[1].plan_memory = false;
    variants[2].tf32 = true;
    const char *names[3] = {"fuse", "plan_memory", "tf32"};
    for (int i = 0; i < 3; i++) {
        if (compile_run(GRAPH, variants[i], &out, &bytes) == 0)
            fail_msg("option %s changed: served from the cache", names[i]);
        free(out);
        assert_int_equal(compile_run(GRAPH, variants[i], &out, &bytes), 0);
        free(out);
    }
    assert_int_equal(compile_run(GRAPH, base, &out, &bytes), 0);
    free(out);
    for (int t = 1; t <= 5; t += 2) {
        mc_options threads = base;
        threads.threads = t;
        assert_true(compile_run(GRAPH, threads, &out, &bytes) >= 0);
        assert_int_equal(bytes, want_bytes);
        assert_memory_equal(out, want, want_bytes);
        free(out);
    }
    free(want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_parts),
        cmocka_unit_test(test_options_change_the_key),
        cmocka_unit_test(test_crafted_entry),
        cmocka_unit_test(test_bit_flips),
    };
#ifndef MINIC_HAVE_XXHASH
    printf("skipped: built without xxHash, the cache is off (tests/test_cache.c checks that)\n");
    return 77;
#endif
    return cmocka_run_group_tests(tests, NULL, NULL);
}
