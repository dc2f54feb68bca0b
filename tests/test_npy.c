/* .npy reading and writing (runtime/npy.c): round trips of every dtype and rank, headers as
 * NumPy and other writers spell them, and every malformed file rejected with a message that
 * names the file and the problem. Runs under ASan/LSan, so a leak on any error path fails. */
#include "testlib.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/runtime.h"

/* A .npy file image: preamble for `major`, the dict padded to 64 like NumPy, then data. The
 * declared header length may be overridden (lie >= 0) to test lying lengths. */
static size_t make_npy(unsigned char *out, size_t cap, int major, const char *dict,
                       const void *data, size_t data_len, long lie)
{
    size_t prefix = major == 1 ? 10 : 12;
    size_t len = strlen(dict) + 1;
    size_t header_len = (prefix + len + 63) / 64 * 64 - prefix;
    assert_true(prefix + header_len + data_len <= cap);
    memcpy(out, "\x93NUMPY", 6);
    out[6] = (unsigned char)major;
    out[7] = 0;
    size_t declared = lie >= 0 ? (size_t)lie : header_len;
    for (size_t i = 0; i < prefix - 8; i++)
        out[8 + i] = (unsigned char)(declared >> (8 * i));
    memset(out + prefix, ' ', header_len);
    memcpy(out + prefix, dict, strlen(dict));
    out[prefix + header_len - 1] = '\n';
    if (data_len)
        memcpy(out + prefix + header_len, data, data_len);
    return prefix + header_len + data_len;
}

static unsigned char image[1 << 16];
static const float six[6] = {1, 2, 3, 4, 5, 6};

/* Parse an image that must fail, check the message contains `expect`; nothing allocated. */
static void expect_parse_error(const void *data, size_t size, mc_dtype want, const char *expect)
{
    mc_array a;
    mc_status st = mc_npy_parse(data, size, "bad.npy", want, &a);
    if (st == MC_OK)
        fail_msg("accepted a bad file; expected an error containing '%s'", expect);
    assert_int_equal(st, MC_ERR_INPUT);
    assert_null(a.data);
    const char *msg = mc_error_message();
    if (!strstr(msg, "bad.npy") || !strstr(msg, expect))
        fail_msg("message '%s' lacks the file name or '%s'", msg, expect);
}

static void expect_dict_error(const char *dict, size_t data_len, const char *expect)
{
    static unsigned char zeros[4096];
    size_t n = make_npy(image, sizeof image, 1, dict, zeros, data_len, -1);
    expect_parse_error(image, n, MC_NUM_DTYPES, expect);
}

static void fill_pattern(mc_array *a, unsigned seed)
{
    unsigned char *p = a->data;
    for (size_t i = 0; i < a->bytes; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = a->dtype == MC_BOOL ? (unsigned char)((seed >> 16) & 1) : (unsigned char)(seed >> 16);
    }
}

/* Make an array of dtype d and rank r, shape (2,1,3,1,2,...) */
static mc_array make_array(mc_dtype d, int rank)
{
    mc_array a = {.dtype = d, .rank = rank};
    size_t numel = 1;
    for (int i = 0; i < rank; i++) {
        a.shape[i] = (i % 3) + 1 + (i == 0);
        numel *= (size_t)a.shape[i];
    }
    a.bytes = numel * mc_dtype_size(d);
    a.data = malloc(a.bytes);
    fill_pattern(&a, (unsigned)(d * 31 + rank));
    return a;
}

static const char *path_in_tmp(const char *name)
{
    static char buf[4][4200];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s", mc_test_tmpdir(), name);
    return p;
}

/* No leftover temporary file anywhere in the test directory. */
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
    for (int d = 0; d < MC_NUM_DTYPES; d++)
        for (int rank = 0; rank <= MC_MAX_RANK; rank++) {
            mc_array a = make_array((mc_dtype)d, rank);
            char name[64];
            snprintf(name, sizeof name, "rt_%s_%d.npy", mc_dtype_name((mc_dtype)d), rank);
            const char *path = path_in_tmp(name);
            assert_int_equal(mc_npy_write(path, &a), MC_OK);
            mc_array b;
            if (mc_npy_read(path, (mc_dtype)d, &b) != MC_OK)
                fail_msg("%s: %s", name, mc_error_message());
            assert_int_equal(b.dtype, d);
            assert_int_equal(b.rank, rank);
            for (int i = 0; i < rank; i++)
                assert_int_equal(b.shape[i], a.shape[i]);
            assert_int_equal(b.bytes, a.bytes);
            assert_memory_equal(b.data, a.data, a.bytes);
            /* The file itself: NumPy's layout, data 64-byte aligned, exact size. */
            struct stat sb;
            assert_int_equal(stat(path, &sb), 0);
            assert_int_equal(((size_t)sb.st_size - a.bytes) % 64, 0);
            free(a.data);
            free(b.data);
        }
    assert_no_temporaries();
}

static void test_header_written_like_numpy(void **state)
{
    (void)state;
    float v[3] = {1, 2, 3};
    mc_array a = {.dtype = MC_F32, .rank = 1, .shape = {3}, .data = v, .bytes = sizeof v};
    const char *path = path_in_tmp("numpy_like.npy");
    assert_int_equal(mc_npy_write(path, &a), MC_OK);
    char *file;
    size_t size;
    assert_int_equal(mc_file_read_all(path, &file, &size), MC_OK);
    assert_int_equal(size, 128 + sizeof v);
    assert_memory_equal(file, "\x93NUMPY\x01\x00\x76\x00", 10);
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
    assert_memory_equal(file + 10, dict, strlen(dict));
    assert_int_equal(file[127], '\n');
    free(file);
}

static void test_header_spellings(void **state)
{
    (void)state;
    const char *dicts[] = {
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
        "{\"descr\":\"<f4\",\"fortran_order\":False,\"shape\":(2,3)}",
        "{ 'shape' : ( 2 , 3 , ) , 'descr' : '<f4' , 'fortran_order' : False }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3]}",
        "{'descr':'<f4',\t'fortran_order':False,'shape':(2,3),}",
    };
    for (int major = 1; major <= 2; major++)
        for (size_t i = 0; i < sizeof dicts / sizeof dicts[0]; i++) {
            size_t n = make_npy(image, sizeof image, major, dicts[i], six, sizeof six, -1);
            mc_array a;
            if (mc_npy_parse(image, n, "ok.npy", MC_F32, &a) != MC_OK)
                fail_msg("%s: %s", dicts[i], mc_error_message());
            assert_int_equal(a.rank, 2);
            assert_int_equal(a.shape[0], 2);
            assert_int_equal(a.shape[1], 3);
            assert_memory_equal(a.data, six, sizeof six);
            free(a.data);
        }
    /* Scalars and one-element tuples. */
    size_t n = make_npy(image, sizeof image, 1, "{'descr': '<i4', 'fortran_order': False, "
                                                "'shape': (), }", six, 4, -1);
    mc_array a;
    assert_int_equal(mc_npy_parse(image, n, "s.npy", MC_I32, &a), MC_OK);
    assert_int_equal(a.rank, 0);
    assert_int_equal(a.bytes, 4);
    free(a.data);
    n = make_npy(image, sizeof image, 1, "{'descr': '<f4', 'fortran_order': False, "
                                         "'shape': (6,), }", six, sizeof six, -1);
    assert_int_equal(mc_npy_parse(image, n, "v.npy", MC_NUM_DTYPES, &a), MC_OK);
    assert_int_equal(a.rank, 1);
    assert_int_equal(a.shape[0], 6);
    free(a.data);
}

static void test_bf16_as_u2_and_bool_normalized(void **state)
{
    (void)state;
    uint16_t bits[2] = {0x3F80, 0xC000};
    size_t n = make_npy(image, sizeof image, 1, "{'descr': '<u2', 'fortran_order': False, "
                                                "'shape': (2,), }", bits, sizeof bits, -1);
    mc_array a;
    assert_int_equal(mc_npy_parse(image, n, "b.npy", MC_BF16, &a), MC_OK);
    assert_int_equal(a.dtype, MC_BF16);
    assert_memory_equal(a.data, bits, sizeof bits);
    free(a.data);
    expect_parse_error(image, n, MC_F32, "<u2");
    expect_parse_error(image, n, MC_NUM_DTYPES, "bf16");

    unsigned char b[3] = {0, 1, 7};
    n = make_npy(image, sizeof image, 1, "{'descr': '|b1', 'fortran_order': False, "
                                         "'shape': (3,), }", b, sizeof b, -1);
    assert_int_equal(mc_npy_parse(image, n, "b.npy", MC_BOOL, &a), MC_OK);
    assert_int_equal(((unsigned char *)a.data)[2], 1);
    free(a.data);
    /* The same through the file reader, which keeps the data in the file's buffer. */
    assert_int_equal(mc_npy_read(mc_test_write_file("bools.npy", image, n), MC_BOOL, &a), MC_OK);
    assert_int_equal(a.bytes, 3);
    assert_memory_equal(a.data, "\0\1\1", 3);
    free(a.data);
}

static void test_bad_preamble(void **state)
{
    (void)state;
    size_t n = make_npy(image, sizeof image, 1, "{'descr': '<f4', 'fortran_order': False, "
                                                "'shape': (2, 3), }", six, sizeof six, -1);
    expect_parse_error(image, 0, MC_F32, "bad magic");
    expect_parse_error(image, 5, MC_F32, "bad magic");
    expect_parse_error(image, 9, MC_F32, "bad magic");
    image[1] = 'X';
    expect_parse_error(image, n, MC_F32, "bad magic");
    image[1] = 'N';
    image[6] = 3;
    expect_parse_error(image, n, MC_F32, "unsupported .npy version 3.0");
    image[6] = 1;
    image[7] = 1;
    expect_parse_error(image, n, MC_F32, "unsupported .npy version 1.1");
    image[7] = 0;
    /* Lying header lengths: past the end, and just short of the dict's end. */
    n = make_npy(image, sizeof image, 1, "{'descr': '<f4', 'fortran_order': False, "
                                         "'shape': (2, 3), }", six, sizeof six, 60000);
    expect_parse_error(image, n, MC_F32, "runs past the end");
    n = make_npy(image, sizeof image, 2, "{'descr': '<f4', 'fortran_order': False, "
                                         "'shape': (2, 3), }", six, sizeof six, 0x7FFFFFFF);
    expect_parse_error(image, n, MC_F32, "runs past the end");
    n = make_npy(image, sizeof image, 1, "{'descr': '<f4', 'fortran_order': False, "
                                         "'shape': (2, 3), }", six, sizeof six, 20);
    expect_parse_error(image, n, MC_F32, "malformed .npy header");
    expect_parse_error(image, 11, MC_F32, "runs past the end");
    /* A v2 preamble cut inside its 4-byte length. */
    make_npy(image, sizeof image, 2, "{}", NULL, 0, -1);
    expect_parse_error(image, 11, MC_F32, "truncated");
}

static void test_malformed_dicts(void **state)
{
    (void)state;
    expect_dict_error("{'descr': '<f4', 'fortran_order': False}", 4, "missing 'shape'");
    expect_dict_error("{'shape': (1,), 'fortran_order': False}", 4, "missing 'descr'");
    expect_dict_error("{'descr': '<f4', 'shape': (1,)}", 4, "missing 'fortran_order'");
    expect_dict_error("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", 4,
                      "key given twice");
    expect_dict_error("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", 4,
                      "unknown key");
    expect_dict_error("{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}", 4,
                      "malformed .npy header");
    expect_dict_error("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,)}", 4,
                      "True or False");
    expect_dict_error("{'descr': '<f4', 'fortran_order': Falsey, 'shape': (1,)}", 4,
                      "True or False");
    expect_dict_error("{'descr': '<f4', 'fortran_order': False, 'shape': 1}", 4, "tuple");
    expect_dict_error("{'descr': '<f4', 'fortran_order': False, 'shape': (1,,)}", 4,
                      "expected a dimension");
    expect_dict_error("{'descr': '<f4', 'fortran_order': False, 'shape': (1 2)}", 4,
                      "expected ','");
    expect_dict_error("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", 4,
                      "negative dimension");
    expect_dict_error("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} junk", 4,
                      "unexpected text after the dict");
    expect_dict_error("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)", 4,
                      "expected ',' or '}'");
    expect_dict_error("['descr', '<f4']", 4, "expected '{'");
    expect_dict_error("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", 4,
                      "structured dtypes");
    expect_dict_error("{'descr': '<f\\x34', 'fortran_order': False, 'shape': (1,)}", 4,
                      "unsupported character");
    expect_dict_error("", 0, "expected '{'");
}

static void test_unsupported_content(void **state)
{
    (void)state;
    expect_dict_error("{'descr': '<f4', 'fortran_order': True, 'shape': (1,)}", 4, "Fortran-order");
    expect_dict_error("{'descr': '>f4', 'fortran_order': False, 'shape': (1,)}", 4, "big-endian");
    expect_dict_error("{'descr': '<f8', 'fortran_order': False, 'shape': (1,)}", 8,
                      "unsupported dtype '<f8'");
    expect_dict_error("{'descr': '|u1', 'fortran_order': False, 'shape': (1,)}", 1,
                      "unsupported dtype '|u1'");
    /* A dtype that is supported but not the one wanted. */
    size_t n = make_npy(image, sizeof image, 1, "{'descr': '<f2', 'fortran_order': False, "
                                                "'shape': (3,), }", six, 6, -1);
    expect_parse_error(image, n, MC_F32, "holds f16 data");
}

/* docs/FORMAT.md §4: <i8 (NumPy's default integer) is read for i32 when every value fits, narrowed; the
 * first value that does not is named; <i8 is never read as anything else. */
static void test_int64_for_i32(void **state)
{
    (void)state;
    const int64_t fits[6] = {0, -1, 7, INT32_MAX, INT32_MIN, 123456789};
    const char *dict = "{'descr': '<i8', 'fortran_order': False, 'shape': (3, 2), }";
    size_t n = make_npy(image, sizeof image, 1, dict, fits, sizeof fits, -1);
    mc_array a;
    assert_int_equal(mc_npy_parse(image, n, "i8.npy", MC_I32, &a), MC_OK);
    assert_int_equal(a.dtype, MC_I32);
    assert_int_equal(a.rank, 2);
    assert_int_equal(a.shape[0], 3);
    assert_int_equal(a.shape[1], 2);
    assert_int_equal(a.bytes, 6 * sizeof(int32_t));
    for (int i = 0; i < 6; i++)
        assert_int_equal(((const int32_t *)a.data)[i], fits[i]);
    free(a.data);
    /* the same through a file (narrowed in the file's own buffer) */
    const char *path = path_in_tmp("i8.npy");
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(image, 1, n, f), n);
    fclose(f);
    assert_int_equal(mc_npy_read(path, MC_I32, &a), MC_OK);
    assert_int_equal(a.bytes, 6 * sizeof(int32_t));
    for (int i = 0; i < 6; i++)
        assert_int_equal(((const int32_t *)a.data)[i], fits[i]);
    free(a.data);
    const int64_t too_big[6] = {1, 2, 3, (int64_t)INT32_MIN - 1, (int64_t)INT32_MAX + 1, 6};
    n = make_npy(image, sizeof image, 1, dict, too_big, sizeof too_big, -1);
    expect_parse_error(image, n, MC_I32, "int64 value -2147483649 at element 3 [1, 1]");
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(image, 1, n, f), n);
    fclose(f);
    assert_int_equal(mc_npy_read(path, MC_I32, &a), MC_ERR_INPUT);
    assert_null(a.data);
    assert_non_null(strstr(mc_error_message(), "-2147483649"));
    /* an empty array has nothing to narrow */
    n = make_npy(image, sizeof image, 1, "{'descr': '<i8', 'fortran_order': False, "
                                         "'shape': (0, 4), }", NULL, 0, -1);
    assert_int_equal(mc_npy_parse(image, n, "empty.npy", MC_I32, &a), MC_OK);
    assert_int_equal(a.bytes, 0);
    free(a.data);
    /* the size check counts 8 bytes per element on disk */
    n = make_npy(image, sizeof image, 1, dict, fits, 6 * 4, -1);
    expect_parse_error(image, n, MC_I32, "file truncated");
    /* anything but i32 wanted: refused, as before */
    n = make_npy(image, sizeof image, 1, dict, fits, sizeof fits, -1);
    expect_parse_error(image, n, MC_F32, "unsupported dtype '<i8'");
    expect_parse_error(image, n, MC_NUM_DTYPES, "unsupported dtype '<i8'");
}

static void test_shape_and_size_checks(void **state)
{
    (void)state;
    /* Dimensions whose product overflows int64, and bytes that overflow after the product. */
    expect_dict_error("{'descr': '<f4', 'fortran_order': False, "
                      "'shape': (4294967296, 4294967296, 16)}", 4, "overflows");
    expect_dict_error("{'descr': '<f4', 'fortran_order': False, "
                      "'shape': (4611686018427387904, 2)}", 4, "overflows");
    expect_dict_error("{'descr': '<f4', 'fortran_order': False, "
                      "'shape': (2305843009213693952,)}", 4, "byte size overflows");
    expect_dict_error("{'descr': '<f4', 'fortran_order': False, "
                      "'shape': (99999999999999999999999999,)}", 4, "dimension too large");
    expect_dict_error("{'descr': '<f4', 'fortran_order': False, "
                      "'shape': (1,1,1,1,1,1,1,1,1)}", 4, "more than 8 dimensions");
    /* Data shorter and longer than the header says. */
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    size_t n = make_npy(image, sizeof image, 1, dict, six, sizeof six - 1, -1);
    expect_parse_error(image, n, MC_F32, "file truncated");
    n = make_npy(image, sizeof image, 1, dict, six, 0, -1);
    expect_parse_error(image, n, MC_F32, "file truncated");
    n = make_npy(image, sizeof image, 1, dict, six, sizeof six, -1);
    image[n] = 0;
    expect_parse_error(image, n + 1, MC_F32, "trailing bytes");
    /* Zero-size arrays are valid files. */
    n = make_npy(image, sizeof image, 1, "{'descr': '<f4', 'fortran_order': False, "
                                         "'shape': (0, 3), }", NULL, 0, -1);
    mc_array a;
    assert_int_equal(mc_npy_parse(image, n, "empty.npy", MC_F32, &a), MC_OK);
    assert_int_equal(a.bytes, 0);
    free(a.data);
    expect_dict_error("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3)}", 1,
                      "trailing bytes");
}

static void test_file_errors(void **state)
{
    (void)state;
    mc_array a;
    assert_int_equal(mc_npy_read(path_in_tmp("does_not_exist.npy"), MC_F32, &a), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "does_not_exist.npy"));
    assert_non_null(strstr(mc_error_message(), "cannot open"));
    assert_null(a.data);
    assert_int_equal(mc_npy_read(mc_test_tmpdir(), MC_F32, &a), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "not a regular file"));
    /* A bad file on disk: the message names its path. */
    size_t n = make_npy(image, sizeof image, 1, "{'descr': '<f4', 'fortran_order': False, "
                                                "'shape': (2, 3), }", six, 8, -1);
    const char *path = mc_test_write_file("short.npy", image, n);
    assert_int_equal(mc_npy_read(path, MC_F32, &a), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), path));
    assert_non_null(strstr(mc_error_message(), "truncated"));
}

static void test_failed_writes_leave_nothing(void **state)
{
    (void)state;
    mc_array a = {.dtype = MC_F32, .rank = 2, .shape = {2, 3}, .data = (void *)six,
                  .bytes = sizeof six};
    const char *path = path_in_tmp("no_such_dir/out.npy");
    assert_int_equal(mc_npy_write(path, &a), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "out.npy"));
    assert_int_equal(access(path, F_OK), -1);
    /* The destination is a directory: the rename fails after the data was written. */
    const char *dir = path_in_tmp("a_directory.npy");
    assert_int_equal(mkdir(dir, 0777), 0);
    assert_int_not_equal(mc_npy_write(dir, &a), MC_OK);
    assert_non_null(strstr(mc_error_message(), "a_directory.npy"));
    /* An array whose byte count does not match its shape is refused before any file exists. */
    mc_array bad = a;
    bad.bytes = 20;
    path = path_in_tmp("bad_array.npy");
    assert_int_equal(mc_npy_write(path, &bad), MC_ERR_INPUT);
    assert_int_equal(access(path, F_OK), -1);
    bad = a;
    bad.rank = 9;
    assert_int_equal(mc_npy_write(path, &bad), MC_ERR_INPUT);
    bad = a;
    bad.shape[0] = -2;
    assert_int_equal(mc_npy_write(path, &bad), MC_ERR_INPUT);
    assert_int_equal(access(path, F_OK), -1);
    /* Overwriting an existing file replaces it whole. */
    path = mc_test_write_file("replace.npy", "old", 3);
    assert_int_equal(mc_npy_write(path, &a), MC_OK);
    mc_array b;
    assert_int_equal(mc_npy_read(path, MC_F32, &b), MC_OK);
    assert_memory_equal(b.data, six, sizeof six);
    free(b.data);
    assert_no_temporaries();
}

static void test_stream_writer_matches_file(void **state)
{
    (void)state;
    mc_array a = make_array(MC_I32, 3);
    const char *path = path_in_tmp("stream.npy");
    assert_int_equal(mc_npy_write(path, &a), MC_OK);
    char *file, *buf = NULL;
    size_t size, len = 0;
    assert_int_equal(mc_file_read_all(path, &file, &size), MC_OK);
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(mc_npy_write_stream(f, "mem.npy", &a), MC_OK);
    fclose(f);
    assert_int_equal(len, size);
    assert_memory_equal(buf, file, size);
    free(buf);
    free(file);
    mc_array bad = a;
    bad.bytes--;
    f = open_memstream(&buf, &len);
    assert_int_equal(mc_npy_write_stream(f, "mem.npy", &bad), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "mem.npy"));
    fclose(f);
    assert_int_equal(len, 0);
    free(buf);
    free(a.data);
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
        {"\x93NUMPY\x01\x00\x00\x00", 10},
        {"\x93NUMPY\x02\x00\x00\x00\x00\x00", 12},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mc_array a;
        mc_status st = mc_npy_parse(cases[i].bytes, cases[i].size, "fuzz.npy", MC_NUM_DTYPES, &a);
        if (st == MC_OK)
            free(a.data);
        else
            assert_non_null(strstr(mc_error_message(), "fuzz.npy"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_every_dtype_and_rank),
        cmocka_unit_test(test_header_written_like_numpy),
        cmocka_unit_test(test_header_spellings),
        cmocka_unit_test(test_bf16_as_u2_and_bool_normalized),
        cmocka_unit_test(test_bad_preamble),
        cmocka_unit_test(test_malformed_dicts),
        cmocka_unit_test(test_unsupported_content),
        cmocka_unit_test(test_int64_for_i32),
        cmocka_unit_test(test_shape_and_size_checks),
        cmocka_unit_test(test_file_errors),
        cmocka_unit_test(test_failed_writes_leave_nothing),
        cmocka_unit_test(test_stream_writer_matches_file),
        cmocka_unit_test(test_fuzz_regressions),
    };
    return mc_test_run(tests);
}
