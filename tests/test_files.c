/* Files minic reads: special files are refused, weights are mapped and read only where used.
 * Issue 19's repros: a FIFO given as graph, weights or input blocked forever; a weights file was
 * read whole (a 3 GiB tensor the graph does not use cost 3.2 GB of memory and 25 s).
 *
 * A watchdog (alarm) turns a hang into a failure instead of a test that never ends.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testlib.h"

#include "runtime/runtime.h"

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_files: timed out (a read blocked)\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

static const char *GRAPH = "graph g\ninput x : f32[4]\nparam w : f32[4]\ny = add(x, w)\noutput y\n";

static mc_program *compile_ref(void)
{
    mc_graph *g;
    assert_int_equal(mc_graph_parse_string("g.graph", GRAPH, &g), MC_OK);
    mc_options opt = mc_options_default();
    opt.backend = MC_BACKEND_REF;
    mc_program *p;
    assert_int_equal(mc_program_compile(g, &opt, &p), MC_OK);
    mc_graph_free(g);
    return p;
}

static void expect_refused(mc_status st, const char *path, const char *what)
{
    assert_int_equal(st, MC_ERR_INPUT);
    const char *msg = mc_error_message();
    if (!strstr(msg, path) || !strstr(msg, what) || !strstr(msg, "not a regular file"))
        fail_msg("message does not name %s as %s: %s", path, what, msg);
}

/* A FIFO with no writer, a character device, a directory: as a graph, weights and input. Each
 * is an immediate MC_ERR_INPUT naming the file and what it is. */
static void test_special_files_refused(void **state)
{
    (void)state;
    char fifo[4200];
    snprintf(fifo, sizeof fifo, "%s/pipe", mc_test_tmpdir());
    unlink(fifo);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    signal(SIGALRM, on_alarm);
    alarm(30);
    const char *paths[3] = {fifo, "/dev/zero", mc_test_tmpdir()};
    const char *whats[3] = {"FIFO", "character device", "directory"};
    mc_program *p = compile_ref();
    for (int i = 0; i < 3; i++) {
        mc_graph *g = NULL;
        expect_refused(mc_graph_parse_file(paths[i], &g), paths[i], whats[i]);
        assert_null(g);
        expect_refused(mc_program_load_weights(p, paths[i]), paths[i], whats[i]);
        expect_refused(mc_program_load_npy(p, "x", paths[i]), paths[i], whats[i]);
        mc_array a;
        expect_refused(mc_npy_read(paths[i], MC_F32, &a), paths[i], whats[i]);
        mc_safetensors *st = NULL;
        expect_refused(mc_safetensors_open(paths[i], &st), paths[i], whats[i]);
        assert_null(st);
    }
    alarm(0);
    mc_program_free(p);
    /* the command: exit status 1 and the message, not a hang */
    const char *bin = getenv("MINIC_BIN");
    char cmd[9000], graph[4200];
    snprintf(graph, sizeof graph, "%s/ok.graph", mc_test_tmpdir());
    FILE *f = fopen(graph, "w");
    fputs(GRAPH, f);
    fclose(f);
    const char *forms[3] = {"run '%s' --backend ref", "run '%s' --backend ref --weights '%s'",
                            "run '%s' --backend ref --input 'x=%s'"};
    for (int i = 0; i < 3; i++) {
        char args[8500];
        if (i == 0)
            snprintf(args, sizeof args, forms[0], fifo);
        else
            snprintf(args, sizeof args, forms[i], graph, fifo);
        snprintf(cmd, sizeof cmd, "timeout 20 %s %s </dev/null >/dev/null 2>'%s/err.txt'",
                 bin ? bin : "build/minic", args, mc_test_tmpdir());
        int status = system(cmd);
        assert_true(WIFEXITED(status));
        if (WEXITSTATUS(status) != 1)
            fail_msg("`minic %s`: exit status %d (124: it blocked)", args, WEXITSTATUS(status));
    }
    unlink(fifo);
}

static mc_status write_hello(FILE *f, void *ctx)
{
    (void)ctx;
    return fputs("hello\n", f) >= 0 ? MC_OK : MC_ERR_SYSTEM;
}

/* Files minic writes that are not regular files: a FIFO (as /dev/stdout into a pipe) is written
 * in place and stays a FIFO (a temporary renamed over it replaced it, as it would have replaced
 * /dev/null run as root); one with no reader is an error at once, not a wait; a symbolic link
 * stays a link, its target written. */
static void test_special_destinations(void **state)
{
    (void)state;
    signal(SIGALRM, on_alarm);
    alarm(30);
    char fifo[4200], got[64] = "";
    snprintf(fifo, sizeof fifo, "%s/out_pipe", mc_test_tmpdir());
    unlink(fifo);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    mc_status st = mc_file_write_atomic(fifo, write_hello, NULL); /* no reader */
    assert_int_equal(st, MC_ERR_INPUT);
    if (!strstr(mc_error_message(), "no reader"))
        fail_msg("%s", mc_error_message());
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        int fd = open(fifo, O_RDONLY);
        char buf[64] = "";
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        _exit(n == 6 && !strcmp(buf, "hello\n") ? 0 : 3);
    }
    for (int tries = 0; tries < 200; tries++) { /* until the child has it open for reading */
        st = mc_file_write_atomic(fifo, write_hello, NULL);
        if (st == MC_OK)
            break;
        usleep(10000);
    }
    assert_int_equal(st, MC_OK);
    int status;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    struct stat sb;
    assert_int_equal(lstat(fifo, &sb), 0);
    assert_true(S_ISFIFO(sb.st_mode));
    unlink(fifo);
    alarm(0);

    char target[4200], link[4200];
    snprintf(target, sizeof target, "%s/target.txt", mc_test_tmpdir());
    snprintf(link, sizeof link, "%s/link.txt", mc_test_tmpdir());
    FILE *f = fopen(target, "w");
    fputs("old\n", f);
    fclose(f);
    unlink(link);
    assert_int_equal(symlink("target.txt", link), 0);
    assert_int_equal(mc_file_write_atomic(link, write_hello, NULL), MC_OK);
    assert_int_equal(lstat(link, &sb), 0);
    assert_true(S_ISLNK(sb.st_mode));
    f = fopen(target, "r");
    assert_non_null(fgets(got, sizeof got, f));
    fclose(f);
    assert_string_equal(got, "hello\n");
}

static long peak_rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

/* A weights file with a 3 GiB tensor the graph does not use (a hole: the file takes no disk
 * space) and the small one it does: loading reads the small one only. */
static void test_unused_tensor_costs_nothing(void **state)
{
    (void)state;
    const uint64_t big = (uint64_t)3 << 30;
    char header[512];
    int n = snprintf(header, sizeof header,
                     "{\"big\":{\"dtype\":\"F32\",\"shape\":[%llu],\"data_offsets\":[0,%llu]},"
                     "\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[%llu,%llu]}}",
                     (unsigned long long)(big / 4), (unsigned long long)big,
                     (unsigned long long)big, (unsigned long long)big + 16);
    while (n % 8)
        header[n++] = ' ';
    char path[4200];
    snprintf(path, sizeof path, "%s/sparse.safetensors", mc_test_tmpdir());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)((uint64_t)n >> (8 * i));
    const float w[4] = {1.5f, -2, 3, 0.25f};
    assert_int_equal(pwrite(fd, len, 8, 0), 8);
    assert_int_equal(pwrite(fd, header, (size_t)n, 8), n);
    assert_int_equal(pwrite(fd, w, sizeof w, (off_t)(8 + (uint64_t)n + big)), (ssize_t)sizeof w);
    close(fd);

    mc_program *p = compile_ref();
    long before = peak_rss_kb();
    double t0 = mc_now_ms();
    if (mc_program_load_weights(p, path) != MC_OK)
        fail_msg("load: %s", mc_error_message());
    double ms = mc_now_ms() - t0;
    long grown = peak_rss_kb() - before;
    printf("3 GiB unused tensor: loading took %.1f ms, peak memory grew %ld kB\n", ms, grown);
    assert_true(before > 0);
    assert_true(grown < 64 * 1024); /* 3 GiB read whole would be 3,145,728 kB */
    assert_int_equal(mc_program_fill_random(p, 0), MC_OK);
    assert_int_equal(mc_program_run(p), MC_OK);
    mc_tensor y;
    assert_int_equal(mc_program_output(p, 0, &y), MC_OK);
    const float *x = p->host[mc_program_find(p, "x")];
    for (int i = 0; i < 4; i++)
        assert_true(((const float *)y.data)[i] == x[i] + w[i]);
    mc_program_free(p);
    unlink(path);
}

/* A header whose length is not a multiple of 8 leaves the data section misaligned in a mapping:
 * such a file is read into an aligned buffer instead, and its tensors are aligned. */
static void test_unaligned_header_read_aligned(void **state)
{
    (void)state;
    const char *header = "{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}";
    size_t n = strlen(header);
    assert_true(n % 8 != 0);
    unsigned char file[256];
    for (int i = 0; i < 8; i++)
        file[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(file + 8, header, n);
    const float w[4] = {1, 2, 3, 4};
    memcpy(file + 8 + n, w, sizeof w);
    const char *path = mc_test_write_file("unaligned.safetensors", file, 8 + n + sizeof w);
    mc_safetensors *st;
    assert_int_equal(mc_safetensors_open(path, &st), MC_OK);
    mc_array a;
    assert_int_equal(mc_safetensors_get(st, "w", &a), MC_OK);
    assert_int_equal((uintptr_t)a.data % 4, 0);
    assert_memory_equal(a.data, w, sizeof w);
    mc_safetensors_close(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_special_files_refused),
        cmocka_unit_test(test_special_destinations),
        cmocka_unit_test(test_unused_tensor_costs_nothing),
        cmocka_unit_test(test_unaligned_header_read_aligned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
