/* .safetensors reading and writing (runtime/safetensors.c, support/json.c): round trips of
 * every dtype and rank, files as other writers make them, and every malformed header, offset
 * and size rejected with a message naming the file and the problem, before any data is read.
 * Runs under ASan/LSan, so a leak on any error path fails. */
#include "testlib.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/runtime.h"

static unsigned char image[1 << 16];

/* A file image: header length (or `lie` when >= 0), the header, then data_len bytes. */
static size_t make_st_lie(const char *header, size_t data_len, long long lie)
{
    size_t n = strlen(header);
    assert_true(8 + n + data_len <= sizeof image);
    unsigned long long declared = lie >= 0 ? (unsigned long long)lie : n;
    for (int i = 0; i < 8; i++)
        image[i] = (unsigned char)(declared >> (8 * i));
    memcpy(image + 8, header, n);
    for (size_t i = 0; i < data_len; i++)
        image[8 + n + i] = (unsigned char)(i * 7 + 1);
    return 8 + n + data_len;
}

static size_t make_st(const char *header, size_t data_len) { return make_st_lie(header, data_len, -1); }

static void expect_open_error(size_t size, const char *expect)
{
    mc_safetensors *st = (mc_safetensors *)1;
    mc_status s = mc_safetensors_parse_memory(image, size, "bad.safetensors", &st);
    if (s == MC_OK) {
        mc_safetensors_close(st);
        fail_msg("accepted a bad file; expected an error containing '%s'", expect);
    }
    assert_int_equal(s, MC_ERR_INPUT);
    assert_null(st);
    const char *msg = mc_error_message();
    if (!strstr(msg, "bad.safetensors") || !strstr(msg, expect))
        fail_msg("message '%s' lacks the file name or '%s'", msg, expect);
}

static void expect_header_error(const char *header, size_t data_len, const char *expect)
{
    expect_open_error(make_st(header, data_len), expect);
}

static mc_safetensors *open_image(size_t size)
{
    mc_safetensors *st;
    if (mc_safetensors_parse_memory(image, size, "ok.safetensors", &st) != MC_OK)
        fail_msg("%s", mc_error_message());
    return st;
}

static const char *path_in_tmp(const char *name)
{
    static char buf[4][4200];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s", mc_test_tmpdir(), name);
    return p;
}

static void assert_no_temporaries(void)
{
    DIR *d = opendir(mc_test_tmpdir());
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));)
        if (strstr(e->d_name, ".tmp-"))
            fail_msg("temporary file left behind: %s", e->d_name);
    closedir(d);
}

static void test_round_trip_every_dtype_and_rank(void **state)
{
    (void)state;
    enum { N = MC_NUM_DTYPES * (MC_MAX_RANK + 1) };
    mc_array arrays[N];
    char name_buf[N][32];
    const char *names[N];
    int n = 0;
    unsigned seed = 1;
    for (int d = 0; d < MC_NUM_DTYPES; d++)
        for (int rank = 0; rank <= MC_MAX_RANK; rank++, n++) {
            mc_array *a = &arrays[n];
            memset(a, 0, sizeof *a);
            a->dtype = (mc_dtype)d;
            a->rank = rank;
            size_t numel = 1;
            for (int i = 0; i < rank; i++) {
                a->shape[i] = (i + rank) % 3 + 1;
                numel *= (size_t)a->shape[i];
            }
            /* An odd element count for bool: the writer must keep the others aligned. */
            a->bytes = numel * mc_dtype_size(a->dtype);
            a->data = malloc(a->bytes);
            for (size_t i = 0; i < a->bytes; i++) {
                seed = seed * 1103515245u + 12345u;
                ((unsigned char *)a->data)[i] =
                    d == MC_BOOL ? (unsigned char)(seed >> 16 & 1) : (unsigned char)(seed >> 16);
            }
            snprintf(name_buf[n], sizeof name_buf[n], "layer.%s.r%d", mc_dtype_name(a->dtype),
                     rank);
            names[n] = name_buf[n];
        }
    const char *path = path_in_tmp("all.safetensors");
    if (mc_safetensors_write(path, names, arrays, n) != MC_OK)
        fail_msg("%s", mc_error_message());
    assert_no_temporaries();

    /* The header is padded so that the data section starts at a multiple of 8. */
    char *file;
    size_t size;
    assert_int_equal(mc_file_read_all(path, &file, &size), MC_OK);
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--)
        header_len = header_len << 8 | (unsigned char)file[i];
    assert_int_equal((8 + header_len) % 8, 0);
    free(file);

    mc_safetensors *st;
    if (mc_safetensors_open(path, &st) != MC_OK)
        fail_msg("%s", mc_error_message());
    assert_int_equal(mc_safetensors_count(st), n);
    for (int i = 1; i < n; i++)
        assert_true(strcmp(mc_safetensors_name(st, i - 1), mc_safetensors_name(st, i)) < 0);
    assert_null(mc_safetensors_name(st, n));
    for (int i = 0; i < n; i++) {
        mc_array b;
        if (mc_safetensors_get(st, names[i], &b) != MC_OK)
            fail_msg("%s: %s", names[i], mc_error_message());
        assert_int_equal(b.dtype, arrays[i].dtype);
        assert_int_equal(b.rank, arrays[i].rank);
        for (int k = 0; k < b.rank; k++)
            assert_int_equal(b.shape[k], arrays[i].shape[k]);
        assert_int_equal(b.bytes, arrays[i].bytes);
        assert_memory_equal(b.data, arrays[i].data, b.bytes);
        /* Every tensor aligned to its element size in memory. */
        assert_int_equal((uintptr_t)b.data % mc_dtype_size(b.dtype), 0);
    }
    mc_safetensors_close(st);
    for (int i = 0; i < n; i++)
        free(arrays[i].data);
}

static void test_names_with_escapes_and_empty_file(void **state)
{
    (void)state;
    float v = 2.5f;
    const char *names[] = {"quote\"back\\slash", "new\nline\x01", "caf\xc3\xa9"};
    mc_array arrays[3];
    for (int i = 0; i < 3; i++)
        arrays[i] = (mc_array){.dtype = MC_F32, .rank = 0, .data = &v, .bytes = 4};
    const char *path = path_in_tmp("names.safetensors");
    assert_int_equal(mc_safetensors_write(path, names, arrays, 3), MC_OK);
    mc_safetensors *st;
    assert_int_equal(mc_safetensors_open(path, &st), MC_OK);
    for (int i = 0; i < 3; i++) {
        mc_array b;
        if (mc_safetensors_get(st, names[i], &b) != MC_OK)
            fail_msg("%s", mc_error_message());
        assert_int_equal(b.rank, 0);
        assert_memory_equal(b.data, &v, 4);
    }
    mc_safetensors_close(st);
    /* No tensors at all is a valid file. */
    path = path_in_tmp("empty.safetensors");
    assert_int_equal(mc_safetensors_write(path, NULL, NULL, 0), MC_OK);
    assert_int_equal(mc_safetensors_open(path, &st), MC_OK);
    assert_int_equal(mc_safetensors_count(st), 0);
    mc_safetensors_close(st);
}

static void test_files_from_other_writers(void **state)
{
    (void)state;
    /* As the reference writer does it: metadata, spaces, escapes, a tensor minic does not use,
     * and names that use \u escapes (é, and U+1F600 as a surrogate pair). */
    size_t n = make_st("{\"__metadata__\":{\"format\":\"pt\"}, \"w\": {\"dtype\":\"F32\","
                       "\"shape\":[2,2],\"data_offsets\":[0,16]}, \"caf\\u00e9\":{\"dtype\":"
                       "\"F64\",\"shape\":[1],\"data_offsets\":[16,24]},\"\\ud83d\\ude00\":"
                       "{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[24,28]}}    ", 28);
    mc_safetensors *st = open_image(n);
    assert_int_equal(mc_safetensors_count(st), 3);
    mc_array a;
    assert_int_equal(mc_safetensors_get(st, "w", &a), MC_OK);
    assert_int_equal(a.dtype, MC_F32);
    assert_int_equal(a.rank, 2);
    assert_int_equal(a.bytes, 16);
    assert_int_equal(mc_safetensors_get(st, "\xF0\x9F\x98\x80", &a), MC_OK);
    assert_int_equal(a.dtype, MC_I32);
    assert_int_equal(a.rank, 0);
    assert_int_equal(mc_safetensors_get(st, "caf\xc3\xa9", &a), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "dtype F64"));
    assert_non_null(strstr(mc_error_message(), "does not support"));
    assert_int_equal(mc_safetensors_get(st, "missing", &a), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "no tensor named 'missing'"));
    assert_non_null(strstr(mc_error_message(), "ok.safetensors"));
    /* describe tells "there, in a dtype minic does not read" from "absent" (docs/FORMAT.md §4) */
    char held[64];
    assert_true(mc_safetensors_describe(st, "caf\xc3\xa9", held, sizeof held));
    assert_string_equal(held, "F64[1]");
    assert_true(mc_safetensors_describe(st, "w", held, sizeof held));
    assert_string_equal(held, "F32[2, 2]");
    assert_true(mc_safetensors_describe(st, "\xF0\x9F\x98\x80", held, sizeof held));
    assert_string_equal(held, "I32[]");
    assert_false(mc_safetensors_describe(st, "missing", held, sizeof held));
    mc_safetensors_close(st);

    /* Gaps and unordered entries are allowed; zero-size tensors may sit anywhere. */
    n = make_st("{\"b\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[8,11]},"
                "\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]},"
                "\"z\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[2,2]}}", 16);
    st = open_image(n);
    assert_int_equal(mc_safetensors_get(st, "z", &a), MC_OK);
    assert_int_equal(a.bytes, 0);
    mc_safetensors_close(st);

    /* A tensor of rank 9 of a foreign dtype is fine until asked for. */
    n = make_st("{\"r9\":{\"dtype\":\"BF16\",\"shape\":[1,1,1,1,1,1,1,1,1],"
                "\"data_offsets\":[0,2]}}", 2);
    st = open_image(n);
    assert_int_equal(mc_safetensors_get(st, "r9", &a), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "9 dimensions"));
    char held9[64];
    assert_true(mc_safetensors_describe(st, "r9", held9, sizeof held9));
    assert_string_equal(held9, "BF16[1, 1, 1, 1, 1, 1, 1, 1, ..]");
    mc_safetensors_close(st);
}

static void test_bad_header_length(void **state)
{
    (void)state;
    expect_open_error(0, "too short");
    expect_open_error(7, "too short");
    const char *h = "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    expect_open_error(make_st_lie(h, 4, 1000), "runs past the end");
    expect_open_error(make_st_lie(h, 4, 0x7FFFFFFFFFFFFFFFll), "runs past the end");
    expect_open_error(make_st_lie(h, 4, 0), "too small");
    /* A header length short of the JSON's end: the JSON is cut. */
    expect_open_error(make_st_lie(h, 4, 20), "invalid JSON");
    /* Longer than the JSON: the next bytes (data) become trailing garbage. */
    expect_open_error(make_st_lie(h, 4, (long long)strlen(h) + 2), "invalid JSON");
    /* a .npy file given as weights is named as what it is (it was 'header length 3796... runs
     * past the end of the file') */
    static const char npy[] = "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }";
    memcpy(image, npy, sizeof npy - 1);
    expect_open_error(sizeof npy - 1, "a .npy file, not a .safetensors file");
}

static void test_bad_json(void **state)
{
    (void)state;
    expect_header_error("{not json}", 0, "expected a string key");
    expect_header_error("[1, 2]", 0, "not a JSON object");
    expect_header_error("{\"a\":1,}", 0, "expected a string key");
    expect_header_error("{\"a\" 1}", 0, "expected ':'");
    expect_header_error("{\"a\":1 \"b\":2}", 0, "expected ','");
    expect_header_error("{\"a\":[1 2]}", 0, "expected ',' or ']'");
    expect_header_error("{\"a\":\"unterminated}", 0, "unterminated string");
    expect_header_error("{\"a\":\"bad \\q escape\"}", 0, "unknown escape");
    expect_header_error("{\"a\":\"\\u12\"}", 0, "four hex digits");
    expect_header_error("{\"a\":\"\\ud800\"}", 0, "high surrogate");
    expect_header_error("{\"a\":\"\\udc00\"}", 0, "low surrogate");
    expect_header_error("{\"a\":\"tab\there\"}", 0, "control character");
    expect_header_error("{\"a\":\"\xC0\x80\"}", 0, "invalid UTF-8");   /* overlong NUL */
    expect_header_error("{\"a\":\"\xED\xA0\x80\"}", 0, "invalid UTF-8"); /* a surrogate */
    expect_header_error("{\"a\":\"\xF4\x90\x80\x80\"}", 0, "invalid UTF-8");
    expect_header_error("{\"a\":\"\xFF\"}", 0, "invalid UTF-8");
    expect_header_error("{\"a\":01}", 0, "expected ','");
    expect_header_error("{\"a\":-}", 0, "expected a digit");
    expect_header_error("{\"a\":1.}", 0, "after '.'");
    expect_header_error("{\"a\":1e}", 0, "exponent");
    expect_header_error("{\"a\":tru}", 0, "unknown word");
    expect_header_error("{\"a\":@}", 0, "unexpected character");
    expect_header_error("{} {}", 0, "unexpected text after");
    expect_header_error("{\"a\":1,\"a\":2}", 0, "duplicate key \"a\"");
    expect_header_error("{\"x\":{\"dtype\":\"F32\",\"dtype\":\"F32\"}}", 0, "duplicate key");
    /* Deep nesting stops at the limit, without recursion trouble. */
    char deep[400];
    int k = 0;
    deep[k++] = '{';
    memcpy(deep + k, "\"a\":", 4);
    k += 4;
    for (int i = 0; i < 150; i++)
        deep[k++] = '[';
    deep[k] = '\0';
    expect_header_error(deep, 0, "nested too deeply");
}

static void test_bad_entries(void **state)
{
    (void)state;
    expect_header_error("{\"w\":[1]}", 4, "not an object");
    expect_header_error("{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "missing \"dtype\"");
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "missing \"shape\"");
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "missing \"data_offsets\"");
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}",
                        4, "unknown field \"x\"");
    expect_header_error("{\"w\":{\"dtype\":32,\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                        "\"dtype\" must be a string");
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]}}", 4,
                        "\"shape\" must be an array");
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4,
                        "non-negative integers");
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 4,
                        "non-negative integers");
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", 4,
                        "non-negative integers");
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],"
                        "\"data_offsets\":[0,4]}}", 4, "non-negative integers");
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4,
                        "two integers");
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8,
                        "two integers");
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":{}}}", 4,
                        "two integers");
    expect_header_error("{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                        4, "NUL");
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],"
                        "\"dtype\\u0000x\":1}}", 4, "unknown field");
    expect_header_error("{\"__metadata__\":{\"format\":1}}", 0, "must be strings");
    expect_header_error("{\"__metadata__\":[\"pt\"]}", 0, "object of strings");
}

static void test_bad_offsets_and_sizes(void **state)
{
    (void)state;
    /* Past the end of the data section (and of the file). */
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4,
                        "run past the data section");
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 4,
                        "run past the data section");
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],"
                        "\"data_offsets\":[0,9223372036854775807]}}", 4, "run past");
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4,
                        "not ordered");
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4,
                        "not ordered");
    /* Size not equal to numel * element size, both ways; unused dtypes are checked too. */
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 8,
                        "span 4 bytes but F32");
    expect_header_error("{\"w\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8,
                        "span 4 bytes");
    expect_header_error("{\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8,
                        "span 4 bytes but F64");
    /* Dimensions whose product overflows. */
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],"
                        "\"data_offsets\":[0,4]}}", 4, "element count overflows");
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],"
                        "\"data_offsets\":[0,4]}}", 4, "byte size overflows");
    /* Overlapping tensors, including one inside another and one of an unknown dtype. */
    expect_header_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12,
                        "overlap");
    expect_header_error("{\"a\":{\"dtype\":\"U8\",\"shape\":[16],\"data_offsets\":[0,16]},"
                        "\"b\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 16,
                        "overlap");
    expect_header_error("{\"a\":{\"dtype\":\"F4\",\"shape\":[16],\"data_offsets\":[0,8]},"
                        "\"b\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 16,
                        "overlap");
    expect_header_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                        "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                        "overlap");
}

static void test_file_errors_and_failed_writes(void **state)
{
    (void)state;
    mc_safetensors *st;
    assert_int_equal(mc_safetensors_open(path_in_tmp("nope.safetensors"), &st), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "nope.safetensors"));
    assert_null(st);
    /* A truncated file on disk: the message names its path. */
    size_t n = make_st("{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 10);
    const char *path = mc_test_write_file("cut.safetensors", image, n);
    assert_int_equal(mc_safetensors_open(path, &st), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), path));

    float v[2] = {1, 2};
    mc_array a = {.dtype = MC_F32, .rank = 1, .shape = {2}, .data = v, .bytes = sizeof v};
    const char *names[] = {"x", "x"};
    path = path_in_tmp("missing_dir/out.safetensors");
    assert_int_equal(mc_safetensors_write(path, names, &a, 1), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "out.safetensors"));
    assert_int_equal(access(path, F_OK), -1);
    mc_array two[2] = {a, a};
    path = path_in_tmp("dup.safetensors");
    assert_int_equal(mc_safetensors_write(path, names, two, 2), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "given twice"));
    assert_int_equal(access(path, F_OK), -1);
    const char *meta[] = {"__metadata__"};
    assert_int_equal(mc_safetensors_write(path, meta, &a, 1), MC_ERR_INPUT);
    const char *bad_utf8[] = {"\xFF"};
    assert_int_equal(mc_safetensors_write(path, bad_utf8, &a, 1), MC_ERR_INPUT);
    mc_array wrong = a;
    wrong.bytes = 7;
    assert_int_equal(mc_safetensors_write(path, names, &wrong, 1), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "tensor 'x'"));
    assert_int_equal(access(path, F_OK), -1);
    const char *dir = path_in_tmp("dir.safetensors");
    assert_int_equal(mkdir(dir, 0777), 0);
    assert_int_not_equal(mc_safetensors_write(dir, names, &a, 1), MC_OK);
    assert_no_temporaries();
}

static void test_stream_writer_matches_file(void **state)
{
    (void)state;
    float v[3] = {1, 2, 3};
    unsigned char b[1] = {1};
    mc_array arrays[2] = {{.dtype = MC_BOOL, .rank = 1, .shape = {1}, .data = b, .bytes = 1},
                          {.dtype = MC_F32, .rank = 1, .shape = {3}, .data = v, .bytes = 12}};
    const char *names[] = {"flag", "v"};
    const char *path = path_in_tmp("stream.safetensors");
    assert_int_equal(mc_safetensors_write(path, names, arrays, 2), MC_OK);
    char *file, *buf = NULL;
    size_t size, len = 0;
    assert_int_equal(mc_file_read_all(path, &file, &size), MC_OK);
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(mc_safetensors_write_stream(f, "mem.safetensors", names, arrays, 2), MC_OK);
    fclose(f);
    assert_int_equal(len, size);
    assert_memory_equal(buf, file, size);
    /* The f32 tensor comes first in the data, so it starts aligned. */
    mc_safetensors *st;
    assert_int_equal(mc_safetensors_parse_memory(buf, len, "mem.safetensors", &st), MC_OK);
    mc_array a;
    assert_int_equal(mc_safetensors_get(st, "v", &a), MC_OK);
    assert_ptr_equal(a.data, (void *)(((uintptr_t)a.data + 63) / 64 * 64));
    mc_safetensors_close(st);
    free(buf);
    free(file);
}

/* Regression inputs: every input a fuzzer ever found crashing goes here (docs/RELIABILITY.md).
 * No finding so far; these edge inputs (shortest preambles, smallest headers) hold the place. */
static void test_fuzz_regressions(void **state)
{
    (void)state;
    static const struct {
        const char *bytes;
        size_t size;
    } cases[] = {
        {"\x02\0\0\0\0\0\0\0{}", 10},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mc_safetensors *st;
        if (mc_safetensors_parse_memory(cases[i].bytes, cases[i].size, "fuzz.safetensors", &st) ==
            MC_OK)
            mc_safetensors_close(st);
        else
            assert_non_null(strstr(mc_error_message(), "fuzz.safetensors"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_every_dtype_and_rank),
        cmocka_unit_test(test_names_with_escapes_and_empty_file),
        cmocka_unit_test(test_files_from_other_writers),
        cmocka_unit_test(test_bad_header_length),
        cmocka_unit_test(test_bad_json),
        cmocka_unit_test(test_bad_entries),
        cmocka_unit_test(test_bad_offsets_and_sizes),
        cmocka_unit_test(test_file_errors_and_failed_writes),
        cmocka_unit_test(test_stream_writer_matches_file),
        cmocka_unit_test(test_fuzz_regressions),
    };
    return mc_test_run(tests);
}
