/* ONNX import (frontend/onnx.c): models written byte by byte here (a tiny protobuf writer), so
 * that every malformed form can be made: a valid model runs and gives the right numbers; names
 * are made valid and mapped back; truncated files, lying sizes, huge dimensions, deep nesting
 * and external data that leaves the model's folder are input errors naming the file, never a
 * crash; every unsupported node is listed. Skips (77) in a minic built without protobuf-c. */
#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frontend/onnx.h"
#include "runtime/runtime.h"

/* ---- a protobuf writer ---------------------------------------------------------------------- */

typedef struct buf {
    unsigned char b[1 << 15];
    size_t n;
} buf;

static void put_byte(buf *o, unsigned char x)
{
    assert_true(o->n < sizeof o->b);
    o->b[o->n++] = x;
}

static void put_varint(buf *o, uint64_t v)
{
    while (v >= 0x80) {
        put_byte(o, (unsigned char)(v | 0x80));
        v >>= 7;
    }
    put_byte(o, (unsigned char)v);
}

static void field_varint(buf *o, int field, uint64_t v)
{
    put_varint(o, (uint64_t)field << 3);
    put_varint(o, v);
}

static void field_bytes(buf *o, int field, const void *data, size_t len)
{
    put_varint(o, (uint64_t)field << 3 | 2);
    put_varint(o, len);
    for (size_t k = 0; k < len; k++)
        put_byte(o, ((const unsigned char *)data)[k]);
}

static void field_str(buf *o, int field, const char *s) { field_bytes(o, field, s, strlen(s)); }
static void field_msg(buf *o, int field, const buf *m) { field_bytes(o, field, m->b, m->n); }

/* TensorProto: dims 1, data_type 2, name 8, raw_data 9 */
static void tensor(buf *t, const char *name, int dtype, const int64_t *dims, int rank,
                   const void *raw, size_t raw_len)
{
    t->n = 0;
    for (int d = 0; d < rank; d++)
        field_varint(t, 1, (uint64_t)dims[d]);
    field_varint(t, 2, (uint64_t)dtype);
    field_str(t, 8, name);
    if (raw)
        field_bytes(t, 9, raw, raw_len);
}

/* ValueInfoProto { name 1, type 2: TypeProto { tensor_type 1: { elem_type 1, shape 2 } } } */
static void value_info(buf *v, const char *name, int dtype, const int64_t *dims, int rank)
{
    buf shape = {0}, tt = {0}, tp = {0};
    for (int d = 0; d < rank; d++) {
        buf dim = {0};
        field_varint(&dim, 1, (uint64_t)dims[d]);
        field_msg(&shape, 1, &dim);
    }
    field_varint(&tt, 1, (uint64_t)dtype);
    field_msg(&tt, 2, &shape);
    field_msg(&tp, 1, &tt);
    v->n = 0;
    field_str(v, 1, name);
    field_msg(v, 2, &tp);
}

/* NodeProto { input 1, output 2, name 3, op_type 4, attribute 5 } with two inputs */
static void node(buf *nd, const char *op, const char *a, const char *b, const char *out)
{
    nd->n = 0;
    field_str(nd, 1, a);
    if (b)
        field_str(nd, 1, b);
    field_str(nd, 2, out);
    field_str(nd, 3, out);
    field_str(nd, 4, op);
}

/* ModelProto { ir_version 1, graph 7, opset_import 8 { domain 1, version 2 } } */
static void model(buf *m, const buf *graph)
{
    buf opset = {0};
    field_str(&opset, 1, "");
    field_varint(&opset, 2, 17);
    m->n = 0;
    field_varint(m, 1, 8);
    field_msg(m, 7, graph);
    field_msg(m, 8, &opset);
}

/* y = x:0 + w (w an initializer of 4 floats) */
static void add_model(buf *m, const void *raw, size_t raw_len, const int64_t *wdims, int wrank)
{
    buf g = {0}, t = {0}, nd = {0}, in = {0}, out = {0};
    int64_t dims[1] = {4};
    node(&nd, "Add", "x:0", "w", "y/out");
    field_msg(&g, 1, &nd);
    field_str(&g, 2, "g");
    tensor(&t, "w", 1, wdims, wrank, raw, raw_len);
    field_msg(&g, 5, &t);
    value_info(&in, "x:0", 1, dims, 1);
    field_msg(&g, 11, &in);
    value_info(&out, "y/out", 1, dims, 1);
    field_msg(&g, 12, &out);
    model(m, &g);
}

static const float wvals[4] = {1.5f, -2.0f, 0.25f, 8.0f};

static bool skip_without_onnx(void)
{
    if (mc_onnx_available())
        return false;
    printf("skipped: minic built without protobuf-c\n");
    return true;
}

static void expect_error(const buf *m, const char *expect)
{
    mc_onnx *o = (mc_onnx *)1;
    mc_status st = mc_onnx_load_memory(m->b, m->n, "bad.onnx", 0, NULL, NULL, &o);
    if (st == MC_OK) {
        mc_onnx_free(o);
        fail_msg("accepted a bad model; expected an error containing '%s'", expect);
    }
    assert_int_equal(st, MC_ERR_INPUT);
    assert_null(o);
    const char *msg = mc_error_message();
    if (!strstr(msg, "bad.onnx") || !strstr(msg, expect))
        fail_msg("message '%s' lacks the file name or '%s'", msg, expect);
}

/* ---- tests ---------------------------------------------------------------------------------- */

static void test_valid_model_runs(void **state)
{
    (void)state;
    buf m;
    int64_t wd[1] = {4};
    add_model(&m, wvals, sizeof wvals, wd, 1);
    mc_onnx *o;
    if (mc_onnx_load_memory(m.b, m.n, "ok.onnx", 0, NULL, NULL, &o) != MC_OK)
        fail_msg("%s", mc_error_message());
    /* names made valid, and the way back */
    assert_string_equal(mc_onnx_minic_name(o, "x:0"), "x_0");
    assert_string_equal(mc_onnx_minic_name(o, "y/out"), "y_out");
    assert_string_equal(mc_onnx_minic_name(o, "w"), "w");
    assert_null(mc_onnx_minic_name(o, "nothing"));
    mc_options opt = mc_test_options();
    opt.backend = MC_BACKEND_REF;
    mc_program *p;
    assert_int_equal(mc_program_compile(mc_onnx_graph(o), &opt, &p), MC_OK);
    assert_int_equal(mc_onnx_bind(o, p), MC_OK);
    const float x[4] = {1, 2, 3, 4};
    assert_int_equal(mc_program_set(p, "x_0", x, sizeof x), MC_OK);
    assert_int_equal(mc_program_run(p), MC_OK);
    mc_tensor t;
    assert_int_equal(mc_program_output(p, 0, &t), MC_OK);
    assert_string_equal(t.name, "y_out");
    const float *y = t.data;
    for (int k = 0; k < 4; k++)
        assert_true(y[k] == x[k] + wvals[k]);
    /* the weights file holds w under its minic name */
    char path[4096];
    snprintf(path, sizeof path, "%s/w.safetensors", mc_test_tmpdir());
    assert_int_equal(mc_onnx_save_weights(o, path), MC_OK);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    mc_program_free(p);
    mc_onnx_free(o);
}

/* an initializer that became a param is still a constant for the nodes after it */
static void test_initializer_used_twice(void **state)
{
    (void)state;
    buf g = {0}, t = {0}, nd = {0}, in = {0}, out = {0}, m;
    int64_t dims[1] = {4};
    node(&nd, "Add", "x", "w", "y");
    field_msg(&g, 1, &nd);
    node(&nd, "Add", "w", "w", "ww"); /* folded on the host */
    field_msg(&g, 1, &nd);
    node(&nd, "Add", "y", "ww", "z");
    field_msg(&g, 1, &nd);
    tensor(&t, "w", 1, dims, 1, wvals, sizeof wvals);
    field_msg(&g, 5, &t);
    value_info(&in, "x", 1, dims, 1);
    field_msg(&g, 11, &in);
    value_info(&out, "z", 1, dims, 1);
    field_msg(&g, 12, &out);
    model(&m, &g);
    mc_onnx *o;
    if (mc_onnx_load_memory(m.b, m.n, "twice.onnx", 0, NULL, NULL, &o) != MC_OK)
        fail_msg("%s", mc_error_message());
    mc_options opt = mc_test_options();
    opt.backend = MC_BACKEND_REF;
    mc_program *p;
    assert_int_equal(mc_program_compile(mc_onnx_graph(o), &opt, &p), MC_OK);
    assert_int_equal(mc_onnx_bind(o, p), MC_OK);
    const float x[4] = {1, 2, 3, 4};
    assert_int_equal(mc_program_set(p, "x", x, sizeof x), MC_OK);
    assert_int_equal(mc_program_run(p), MC_OK);
    mc_tensor r;
    assert_int_equal(mc_program_output(p, 0, &r), MC_OK);
    for (int k = 0; k < 4; k++)
        assert_true(((const float *)r.data)[k] == x[k] + 3 * wvals[k]);
    mc_program_free(p);
    mc_onnx_free(o);
}

static void test_truncated_and_garbage(void **state)
{
    (void)state;
    buf m;
    int64_t wd[1] = {4};
    add_model(&m, wvals, sizeof wvals, wd, 1);
    /* every prefix: an error or (where the prefix happens to be a whole model) a model, never a crash */
    for (size_t len = 0; len < m.n; len++) {
        mc_onnx *o = NULL;
        if (mc_onnx_load_memory(m.b, len, "cut.onnx", 0, NULL, NULL, &o) == MC_OK)
            mc_onnx_free(o);
        else
            assert_non_null(strstr(mc_error_message(), "cut.onnx"));
    }
    /* every single byte flipped */
    for (size_t k = 0; k < m.n; k++) {
        buf f = m;
        f.b[k] ^= 0xff;
        mc_onnx *o = NULL;
        if (mc_onnx_load_memory(f.b, f.n, "flip.onnx", 0, NULL, NULL, &o) == MC_OK)
            mc_onnx_free(o);
    }
    buf junk = {0};
    for (int k = 0; k < 64; k++)
        put_byte(&junk, (unsigned char)(k * 37 + 11));
    mc_onnx *o = NULL;
    assert_int_not_equal(mc_onnx_load_memory(junk.b, junk.n, "junk.onnx", 0, NULL, NULL, &o), MC_OK);
}

static void test_lying_sizes_and_huge_dims(void **state)
{
    (void)state;
    buf m;
    int64_t wd[1] = {4};
    add_model(&m, wvals, 12, wd, 1); /* 3 floats for a shape of 4 */
    expect_error(&m, "raw data of 12 bytes");
    int64_t huge[2] = {(int64_t)1 << 40, (int64_t)1 << 40};
    add_model(&m, wvals, sizeof wvals, huge, 2);
    expect_error(&m, "invalid dimension");
    int64_t neg[1] = {-4};
    add_model(&m, wvals, sizeof wvals, neg, 1);
    expect_error(&m, "invalid dimension");
    int64_t many[9] = {1, 1, 1, 1, 1, 1, 1, 1, 4};
    add_model(&m, wvals, sizeof wvals, many, 9);
    expect_error(&m, "rank 9");
    /* a length that runs past the end of the file */
    add_model(&m, wvals, sizeof wvals, wd, 1);
    buf cut = m;
    cut.n -= 3;
    expect_error(&cut, "not a valid ONNX model");
}

static void test_deep_nesting(void **state)
{
    (void)state;
    /* a node whose attribute holds a graph whose node holds a graph ... 200 deep */
    buf *inner = calloc(1, sizeof *inner), *next = calloc(1, sizeof *next);
    for (int d = 0; d < 200; d++) {
        buf attr = {0}, nd = {0};
        field_str(&attr, 1, "body");
        field_varint(&attr, 20, 5);
        if (d)
            field_msg(&attr, 6, inner); /* g */
        field_str(&nd, 4, "If");
        field_msg(&nd, 5, &attr);
        next->n = 0;
        field_msg(next, 1, &nd); /* GraphProto.node */
        if (next->n > sizeof inner->b - 64)
            break;
        buf *t = inner;
        inner = next;
        next = t;
    }
    buf m;
    model(&m, inner);
    expect_error(&m, "nested too deeply");
    free(inner);
    free(next);
}

/* A whole text file, NUL-terminated (free it). */
static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *text = calloc(1, 1 << 20);
    assert_non_null(text);
    size_t n = fread(text, 1, (1 << 20) - 1, f);
    text[n] = 0;
    fclose(f);
    return text;
}

static void write_model(const char *path, const buf *m)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(m->b, 1, m->n, f), m->n);
    fclose(f);
}

/* the initializer w stored in an external file at location loc */
static void external_model(buf *m, const char *loc)
{
    buf g = {0}, t = {0}, nd = {0}, in = {0}, out = {0}, kv = {0};
    int64_t dims[1] = {4};
    node(&nd, "Add", "x", "w", "y");
    field_msg(&g, 1, &nd);
    tensor(&t, "w", 1, dims, 1, NULL, 0);
    field_str(&kv, 1, "location");
    field_str(&kv, 2, loc);
    field_msg(&t, 13, &kv);
    field_varint(&t, 14, 1); /* data_location EXTERNAL */
    field_msg(&g, 5, &t);
    value_info(&in, "x", 1, dims, 1);
    field_msg(&g, 11, &in);
    value_info(&out, "y", 1, dims, 1);
    field_msg(&g, 12, &out);
    model(m, &g);
}

static void test_external_data(void **state)
{
    (void)state;
    char dir[4096], sub[4096], path[4200], data[4200];
    snprintf(dir, sizeof dir, "%s", mc_test_tmpdir());
    snprintf(sub, sizeof sub, "%s/model", dir);
    mkdir(sub, 0755);
    snprintf(data, sizeof data, "%s/w.bin", sub);
    FILE *f = fopen(data, "wb");
    assert_non_null(f);
    fwrite(wvals, 1, sizeof wvals, f);
    fclose(f);
    snprintf(data, sizeof data, "%s/outside.bin", dir);
    f = fopen(data, "wb");
    assert_non_null(f);
    fwrite(wvals, 1, sizeof wvals, f);
    fclose(f);

    buf m;
    mc_onnx *o;
    snprintf(path, sizeof path, "%s/ok.onnx", sub);
    external_model(&m, "w.bin");
    write_model(path, &m);
    if (mc_onnx_load(path, 0, NULL, NULL, &o) != MC_OK)
        fail_msg("%s", mc_error_message());
    assert_int_equal(o->nparams, 1);
    assert_memory_equal(o->params[0].data, wvals, sizeof wvals);
    mc_onnx_free(o);

    const char *bad[] = {"../outside.bin", "/etc/passwd", "a/../../outside.bin", "missing.bin"};
    const char *why[] = {"leaves the model's folder", "leaves the model's folder",
                         "leaves the model's folder", "cannot be opened"};
    for (int k = 0; k < 4; k++) {
        external_model(&m, bad[k]);
        write_model(path, &m);
        o = (mc_onnx *)1;
        assert_int_equal(mc_onnx_load(path, 0, NULL, NULL, &o), MC_ERR_INPUT);
        assert_null(o);
        if (!strstr(mc_error_message(), why[k]))
            fail_msg("%s: '%s'", bad[k], mc_error_message());
    }
    /* a link inside the folder that points outside it */
    snprintf(data, sizeof data, "%s/link.bin", sub);
    unlink(data);
    char target[4200];
    snprintf(target, sizeof target, "%s/outside.bin", dir);
    assert_int_equal(symlink(target, data), 0);
    external_model(&m, "link.bin");
    write_model(path, &m);
    assert_int_equal(mc_onnx_load(path, 0, NULL, NULL, &o), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "outside the model's folder"));
    /* from memory there is no folder */
    external_model(&m, "w.bin");
    expect_error(&m, "read from memory");
}

static int notes;
static void count_note(void *ctx, const char *line)
{
    (void)ctx;
    assert_non_null(strstr(line, "unknown operator"));
    notes++;
}

static void test_every_unsupported_node_listed(void **state)
{
    (void)state;
    buf g = {0}, nd = {0}, in = {0}, out = {0}, m;
    int64_t dims[1] = {4};
    node(&nd, "FancyOp", "x", NULL, "a");
    field_msg(&g, 1, &nd);
    node(&nd, "Relu", "a", NULL, "b"); /* after an unsupported node: not listed again */
    field_msg(&g, 1, &nd);
    node(&nd, "OtherOp", "x", NULL, "c");
    field_msg(&g, 1, &nd);
    node(&nd, "Add", "b", "c", "y");
    field_msg(&g, 1, &nd);
    value_info(&in, "x", 1, dims, 1);
    field_msg(&g, 11, &in);
    value_info(&out, "y", 1, dims, 1);
    field_msg(&g, 12, &out);
    model(&m, &g);
    expect_error(&m, "2 nodes cannot be imported");
    const char *msg = mc_error_message();
    assert_non_null(strstr(msg, "node a (FancyOp, opset 17): unknown operator"));
    assert_non_null(strstr(msg, "node c (OtherOp, opset 17)"));
    notes = 0;
    mc_onnx *o;
    assert_int_equal(mc_onnx_load_memory(m.b, m.n, "bad.onnx", 0, count_note, NULL, &o), MC_ERR_INPUT);
    assert_int_equal(notes, 2);
    assert_non_null(strstr(mc_error_message(), "listed above"));
}

static void test_int64_and_double(void **state)
{
    (void)state;
    /* an INT64 initializer used at run time must fit in i32 */
    buf g = {0}, t = {0}, nd = {0}, in = {0}, out = {0}, m;
    int64_t dims[1] = {2};
    int64_t big[2] = {1, (int64_t)1 << 40};
    node(&nd, "Add", "x", "w", "y");
    field_msg(&g, 1, &nd);
    tensor(&t, "w", 7, dims, 1, big, sizeof big);
    field_msg(&g, 5, &t);
    value_info(&in, "x", 7, dims, 1);
    field_msg(&g, 11, &in);
    value_info(&out, "y", 7, dims, 1);
    field_msg(&g, 12, &out);
    model(&m, &g);
    expect_error(&m, "outside i32");
    /* a DOUBLE input: an error unless MC_ONNX_F64_AS_F32 */
    g.n = 0;
    node(&nd, "Relu", "x", NULL, "y");
    field_msg(&g, 1, &nd);
    value_info(&in, "x", 11, dims, 1);
    field_msg(&g, 11, &in);
    value_info(&out, "y", 11, dims, 1);
    field_msg(&g, 12, &out);
    model(&m, &g);
    expect_error(&m, "DOUBLE");
    mc_onnx *o;
    assert_int_equal(mc_onnx_load_memory(m.b, m.n, "d.onnx", MC_ONNX_F64_AS_F32, NULL, NULL, &o), MC_OK);
    assert_int_equal(o->inputs[0].dtype, MC_F32);
    mc_onnx_free(o);
    /* a DOUBLE initializer: the error names the tensor, not only the node that reads it */
    g.n = t.n = 0;
    const double dvals[2] = {1, 2};
    node(&nd, "Add", "x", "wd", "y");
    field_msg(&g, 1, &nd);
    tensor(&t, "wd", 11, dims, 1, dvals, sizeof dvals);
    field_msg(&g, 5, &t);
    value_info(&in, "x", 1, dims, 1);
    field_msg(&g, 11, &in);
    value_info(&out, "y", 1, dims, 1);
    field_msg(&g, 12, &out);
    model(&m, &g);
    expect_error(&m, "initializer 'wd': unsupported dtype DOUBLE");
    assert_int_equal(mc_onnx_load_memory(m.b, m.n, "d.onnx", MC_ONNX_F64_AS_F32, NULL, NULL, &o), MC_OK);
    assert_int_equal(o->params[0].dtype, MC_F32);
    mc_onnx_free(o);
}

/* Floor, Ceil and Round (composed until minic has them) are exact at the edges: huge values,
 * infinities, NaN, halves (Round: to even), signed zeros */
static void test_rounding_edges(void **state)
{
    (void)state;
    static const float xs[] = {1e10f, -1e10f, INFINITY, -INFINITY, NAN, -2.5f, 2.5f, -0.0f,
                               8388607.5f, -8388607.5f, 0.5f, 1.5f, -1.5f, 3.7f, -3.2f, -0.4f};
    enum { N = sizeof xs / sizeof *xs };
    const char *ops[3] = {"Floor", "Ceil", "Round"};
    for (int k = 0; k < 3; k++) {
        buf g = {0}, nd = {0}, in = {0}, out = {0}, m;
        int64_t dims[1] = {N};
        node(&nd, ops[k], "x", NULL, "y");
        field_msg(&g, 1, &nd);
        value_info(&in, "x", 1, dims, 1);
        field_msg(&g, 11, &in);
        value_info(&out, "y", 1, dims, 1);
        field_msg(&g, 12, &out);
        model(&m, &g);
        mc_onnx *o;
        if (mc_onnx_load_memory(m.b, m.n, "round.onnx", 0, NULL, NULL, &o) != MC_OK)
            fail_msg("%s", mc_error_message());
        mc_options opt = mc_test_options();
        opt.backend = MC_BACKEND_REF;
        mc_program *p;
        assert_int_equal(mc_program_compile(mc_onnx_graph(o), &opt, &p), MC_OK);
        assert_int_equal(mc_program_set(p, "x", xs, sizeof xs), MC_OK);
        assert_int_equal(mc_program_run(p), MC_OK);
        mc_tensor t;
        assert_int_equal(mc_program_output(p, 0, &t), MC_OK);
        const float *y = t.data;
        for (int i = 0; i < N; i++) {
            float want = k == 0 ? floorf(xs[i]) : k == 1 ? ceilf(xs[i]) : nearbyintf(xs[i]);
            bool same = (isnan(want) && isnan(y[i])) || (want == y[i] && signbit(want) == signbit(y[i]));
            if (!same)
                fail_msg("%s(%g) = %g, expected %g", ops[k], xs[i], y[i], want);
        }
        mc_program_free(p);
        mc_onnx_free(o);
    }
}

/* Compile a two-input model (x, i) on ref and set both; NULL with the status on failure */
static mc_program *two_inputs(const buf *m, mc_onnx **o, const void *x, size_t xb, const void *i, size_t ib)
{
    if (mc_onnx_load_memory(m->b, m->n, "g.onnx", 0, NULL, NULL, o) != MC_OK)
        fail_msg("%s", mc_error_message());
    mc_options opt = mc_test_options();
    opt.backend = MC_BACKEND_REF;
    mc_program *p;
    assert_int_equal(mc_program_compile(mc_onnx_graph(*o), &opt, &p), MC_OK);
    assert_int_equal(mc_program_set(p, "x", x, xb), MC_OK);
    assert_int_equal(mc_program_set(p, "i", i, ib), MC_OK);
    return p;
}

static void gather_model(buf *m, const char *op, int xtype, const int64_t *xd, int xr, const int64_t *id, int ir,
                         const int64_t *yd, int yr)
{
    buf g = {0}, nd = {0}, in = {0}, out = {0};
    node(&nd, op, "x", "i", "y");
    field_msg(&g, 1, &nd);
    value_info(&in, "x", xtype, xd, xr);
    field_msg(&g, 11, &in);
    in.n = 0;
    value_info(&in, "i", 7, id, ir); /* INT64 indices, narrowed to i32 */
    field_msg(&g, 11, &in);
    value_info(&out, "y", xtype, yd, yr);
    field_msg(&g, 12, &out);
    model(m, &g);
}

/* Gather and GatherElements with run-time indices are minic's gather: bools, negative indices,
 * indices smaller than the data; an index out of range fails the run with an input error (it
 * neither reads a neighbour nor gives zeros) */
static void test_gather_runtime(void **state)
{
    (void)state;
    buf m;
    mc_onnx *o;
    mc_tensor t;
    /* Gather: bool x[4], INT64 indices [2, 2] */
    int64_t x4[1] = {4}, i22[2] = {2, 2};
    gather_model(&m, "Gather", 9, x4, 1, i22, 2, i22, 2);
    const bool xb[4] = {true, false, false, true};
    int32_t iv[4] = {3, -3, 0, -4};
    mc_program *p = two_inputs(&m, &o, xb, sizeof xb, iv, sizeof iv);
    assert_int_equal(mc_program_run(p), MC_OK);
    assert_int_equal(mc_program_output(p, 0, &t), MC_OK);
    assert_int_equal(t.dtype, MC_BOOL);
    const bool want[4] = {true, false, true, true};
    for (int k = 0; k < 4; k++)
        assert_true(((const bool *)t.data)[k] == want[k]);
    iv[2] = 4;
    assert_int_equal(mc_program_set(p, "i", iv, sizeof iv), MC_OK);
    assert_int_equal(mc_program_run(p), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "outside [-4, 4)"));
    mc_program_free(p);
    mc_onnx_free(o);
    /* GatherElements, axis 0: x[2, 3], indices [2, 2] (smaller than x on axis 1) */
    int64_t x23[2] = {2, 3};
    gather_model(&m, "GatherElements", 1, x23, 2, i22, 2, i22, 2);
    const float xf[6] = {1, 2, 3, 4, 5, 6};
    int32_t ie[4] = {1, 0, -2, -1};
    p = two_inputs(&m, &o, xf, sizeof xf, ie, sizeof ie);
    assert_int_equal(mc_program_run(p), MC_OK);
    assert_int_equal(mc_program_output(p, 0, &t), MC_OK);
    const float wantf[4] = {4, 2, 1, 5};
    for (int k = 0; k < 4; k++)
        assert_true(((const float *)t.data)[k] == wantf[k]);
    ie[1] = -3; /* flat position -2 would be a valid gather index (the 5): out of range of the axis */
    assert_int_equal(mc_program_set(p, "i", ie, sizeof ie), MC_OK);
    assert_int_equal(mc_program_run(p), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "gather"));
    ie[1] = INT32_MAX; /* far out of range: no overflow in the flat position */
    assert_int_equal(mc_program_set(p, "i", ie, sizeof ie), MC_OK);
    assert_int_equal(mc_program_run(p), MC_ERR_INPUT);
    mc_program_free(p);
    mc_onnx_free(o);
}

/* a dim_param is a symbolic dimension (docs/FORMAT.md §1, §7); mc_onnx_load_with_dims fixes it */
static void test_symbolic_dims(void **state)
{
    (void)state;
    buf g = {0}, nd = {0}, in = {0}, out = {0}, m, shape = {0}, dim = {0}, tt = {0}, tp = {0};
    field_str(&dim, 2, "N"); /* Dimension.dim_param */
    field_msg(&shape, 1, &dim);
    field_varint(&tt, 1, 1);
    field_msg(&tt, 2, &shape);
    field_msg(&tp, 1, &tt);
    field_str(&in, 1, "x");
    field_msg(&in, 2, &tp);
    node(&nd, "Relu", "x", NULL, "y");
    field_msg(&g, 1, &nd);
    field_msg(&g, 11, &in);
    field_str(&out, 1, "y");
    field_msg(&g, 12, &out);
    model(&m, &g);
    char path[4200];
    snprintf(path, sizeof path, "%s/dyn.onnx", mc_test_tmpdir());
    write_model(path, &m);
    mc_onnx *o;
    assert_int_equal(mc_onnx_load(path, 0, NULL, NULL, &o), MC_OK);
    const mc_graph *gr = mc_onnx_graph(o);
    assert_int_equal(mc_graph_num_syms(gr), 1);
    assert_string_equal(mc_dim_sym_name(gr, 0), "N");
    assert_int_equal(mc_dim_as_sym(gr, o->inputs[0].shape[0]), 0);
    mc_onnx_free(o);
    mc_onnx_dim dims[1] = {{"N", 7}};
    assert_int_equal(mc_onnx_load_with_dims(path, 0, dims, 1, NULL, NULL, &o), MC_OK);
    assert_int_equal(o->inputs[0].rank, 1);
    assert_int_equal(o->inputs[0].shape[0], 7);
    assert_int_equal(mc_graph_num_syms(mc_onnx_graph(o)), 0);
    mc_onnx_free(o);
    dims[0].size = 0;
    assert_int_equal(mc_onnx_load_with_dims(path, 0, dims, 1, NULL, NULL, &o), MC_ERR_INPUT);
    char args[8400], *sout, *serr;
    snprintf(args, sizeof args, "run %s --dim N=5 --backend ref --quiet", path);
    assert_int_equal(mc_test_minic(args, &sout, &serr), 0);
    assert_non_null(strstr(sout, "y: f32[5]"));
    free(sout);
    free(serr);
    snprintf(args, sizeof args, "check %s", path);
    assert_int_equal(mc_test_minic(args, &sout, &serr), 0);
    if (!strstr(sout, "input x : f32[N]"))
        fail_msg("check printed: %s", sout);
    free(sout);
    free(serr);
}

/* ---- dynamic axes: a model as PyTorch exports one (dim_params and shape chains) ------------- */

/* NodeProto with nin inputs and the attributes given as encoded AttributeProtos */
static void nodev(buf *nd, const char *op, const char *const *ins, int nin, const char *out,
                  const buf *attrs, int nattrs)
{
    nd->n = 0;
    for (int k = 0; k < nin; k++)
        field_str(nd, 1, ins[k]);
    field_str(nd, 2, out);
    field_str(nd, 3, out);
    field_str(nd, 4, op);
    for (int k = 0; k < nattrs; k++)
        field_msg(nd, 5, &attrs[k]);
}

/* AttributeProto { name 1, i 3, ints 8, type 20 (INT 2, INTS 7) } */
static void attr_int(buf *a, const char *name, int64_t v)
{
    a->n = 0;
    field_str(a, 1, name);
    field_varint(a, 3, (uint64_t)v);
    field_varint(a, 20, 2);
}

static void attr_ints(buf *a, const char *name, const int64_t *v, int n)
{
    a->n = 0;
    field_str(a, 1, name);
    for (int k = 0; k < n; k++)
        field_varint(a, 8, (uint64_t)v[k]);
    field_varint(a, 20, 7);
}

/* an input whose dims are sizes (> 0) or dim_params (names[d] where dims[d] is 0) */
static void dyn_input(buf *v, const char *name, const int64_t *dims, const char *const *names, int rank)
{
    buf shape = {0}, tt = {0}, tp = {0};
    for (int d = 0; d < rank; d++) {
        buf dm = {0};
        if (dims[d])
            field_varint(&dm, 1, (uint64_t)dims[d]);
        else
            field_str(&dm, 2, names[d]);
        field_msg(&shape, 1, &dm);
    }
    field_varint(&tt, 1, 1);
    field_msg(&tt, 2, &shape);
    field_msg(&tp, 1, &tt);
    v->n = 0;
    field_str(v, 1, name);
    field_msg(v, 2, &tp);
}

static void int64_init(buf *g, const char *name, const int64_t *v, int n, bool scalar)
{
    buf t = {0};
    int64_t d[1] = {n};
    tensor(&t, name, 7, d, scalar ? 0 : 1, v, sizeof *v * (size_t)n);
    field_msg(g, 5, &t);
}

/* x: f32[B, T, 8], m: f32[T];
 *   z    = Transpose(Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), Unsqueeze(Gather(.., 1)), [2, 4])))
 *   flat = Reshape(x, Concat(Unsqueeze(B * T), [-1]))                       [B*T, 8]
 *   pos  = Cast(Range(0, T, 1), FLOAT) + m                                   [T]
 *   ones = Expand(1, Where(Equal(Shape(x)[0:2], -1), 1, Shape(x)[0:2]))      [B, T] (torch's expand)
 *   cut  = Slice(tri, [T - T, T - T], [T, T])        [T, T] of a constant [8, 8] (a causal mask's cut)
 *   ev   = x[:, :, ::2]   last = x[:, -1]   rest = x[:, 1:]   (a fixed axis; the symbolic axis T)
 *   tl   = Tile(x, [1, 2, 1])  [B, 2*T, 8]         am = ArgMax(x, axis 2)  [B, T]
 *   rev  = x[:, :, ::-1] (ends INT64_MIN: a number, never read as a symbolic dimension)
 * `bad` adds a node whose mapping does not take symbolic dimensions (ReduceProd). */
static void dynamic_model(buf *m, bool bad)
{
    buf g = {0}, nd = {0}, v = {0}, a[2] = {{{0}, 0}, {{0}, 0}};
    const char *BT[3] = {"B", "T", NULL};
    int64_t zero = 0, one = 1, ax0 = 0, tail[2] = {2, 4}, minus1 = -1, two = 2;
    int64_t perm[4] = {0, 2, 1, 3};
#define N(op, out, na, ...)                                                        \
    do {                                                                           \
        const char *ins_[] = {__VA_ARGS__};                                        \
        nodev(&nd, op, ins_, (int)(sizeof ins_ / sizeof *ins_), out, a, na);       \
        field_msg(&g, 1, &nd);                                                     \
    } while (0)
    N("Shape", "s", 0, "x");
    N("Gather", "b", 0, "s", "zero");
    N("Gather", "t", 0, "s", "one");
    N("Unsqueeze", "bu", 0, "b", "ax0");
    N("Unsqueeze", "tu", 0, "t", "ax0");
    attr_int(&a[0], "axis", 0);
    N("Concat", "shp", 1, "bu", "tu", "tail");
    N("Reshape", "y", 0, "x", "shp");
    attr_ints(&a[0], "perm", perm, 4);
    N("Transpose", "z", 1, "y");
    N("Mul", "bt", 0, "b", "t");
    N("Unsqueeze", "btu", 0, "bt", "ax0");
    attr_int(&a[0], "axis", 0);
    N("Concat", "shp2", 1, "btu", "minus1");
    N("Reshape", "flat", 0, "x", "shp2");
    N("Range", "r", 0, "zero", "t", "one");
    attr_int(&a[0], "to", 1);
    N("Cast", "rf", 1, "r");
    N("Add", "pos", 0, "rf", "m");
    N("Slice", "s2", 0, "s", "zero1", "two1");
    N("Equal", "eq", 0, "s2", "minus1");
    N("Where", "s3", 0, "eq", "one", "s2");
    N("Expand", "ones", 0, "onef", "s3");
    attr_int(&a[0], "axis", 0);
    N("Concat", "tt", 1, "tu", "tu");
    N("Sub", "d0", 0, "t", "t"); /* Hugging Face's key_length - query_length: starts 0 */
    N("Unsqueeze", "d0u", 0, "d0", "ax0");
    attr_int(&a[0], "axis", 0);
    N("Concat", "st2", 1, "d0u", "d0u");
    N("Slice", "cut", 0, "tri", "st2", "tt");
    N("Slice", "ev", 0, "x", "zero1", "big1", "two1", "two1");
    attr_int(&a[0], "axis", 1);
    N("Gather", "last", 1, "x", "minus1s");
    N("Slice", "rest", 0, "x", "one1", "big1", "one1");
    N("Tile", "tl", 0, "x", "reps");
    N("Slice", "rev", 0, "x", "minus1", "lowest", "two1", "minus1"); /* x[:, :, ::-1] */
    attr_int(&a[0], "axis", 2);
    attr_int(&a[1], "keepdims", 0);
    N("ArgMax", "am", 2, "x");
    if (bad) {
        attr_ints(&a[0], "axes", (int64_t[]){2}, 1);
        N("ReduceProd", "prod", 1, "x"); /* its mapping computes with the sizes */
    }
#undef N
    int64_init(&g, "zero", &zero, 1, true);
    int64_init(&g, "one", &one, 1, true);
    int64_init(&g, "ax0", &ax0, 1, false);
    int64_init(&g, "tail", tail, 2, false);
    int64_init(&g, "minus1", &minus1, 1, false);
    int64_init(&g, "zero1", &zero, 1, false);
    int64_init(&g, "two1", &two, 1, false);
    int64_init(&g, "big1", (int64_t[]){INT64_MAX}, 1, false);
    int64_init(&g, "reps", (int64_t[]){1, 2, 1}, 3, false);
    int64_init(&g, "lowest", (int64_t[]){INT64_MIN}, 1, false); /* below the symbols' encoding */
    int64_init(&g, "one1", &one, 1, false);
    int64_init(&g, "minus1s", &minus1, 1, true);
    {
        buf t = {0};
        const float onev = 1;
        tensor(&t, "onef", 1, NULL, 0, &onev, sizeof onev);
        field_msg(&g, 5, &t);
        float tri[64];
        for (int k = 0; k < 64; k++)
            tri[k] = (float)k;
        tensor(&t, "tri", 1, (int64_t[]){8, 8}, 2, tri, sizeof tri);
        field_msg(&g, 5, &t);
    }
    dyn_input(&v, "x", (int64_t[]){0, 0, 8}, BT, 3);
    field_msg(&g, 11, &v);
    dyn_input(&v, "m", (int64_t[]){0}, BT + 1, 1);
    field_msg(&g, 11, &v);
    const char *outs[] = {"z", "flat", "pos", "ones", "cut", "ev", "last", "rest", "tl", "am", "rev", "prod"};
    for (int k = 0; k < (bad ? 12 : 11); k++) {
        v.n = 0;
        field_str(&v, 1, outs[k]);
        field_msg(&g, 12, &v);
    }
    model(m, &g);
}

/* run the dynamic model on backend `be` with B and T; compare with values computed here */
static void run_dynamic(mc_onnx *o, mc_program *p, int B, int T)
{
    float x[4 * 6 * 8], mv[6];
    for (int k = 0; k < B * T * 8; k++)
        x[k] = (float)(k * 7 % 23) - 11.0f + 0.25f * (float)B;
    for (int t = 0; t < T; t++)
        mv[t] = 0.5f * (float)t - (float)B;
    assert_int_equal(mc_program_set_dim(p, "B", B), MC_OK);
    assert_int_equal(mc_program_set(p, "x", x, sizeof(float) * (size_t)(B * T * 8)), MC_OK); /* T from the size */
    assert_int_equal(mc_program_set(p, "m", mv, sizeof(float) * (size_t)T), MC_OK);
    assert_int_equal(mc_onnx_bind(o, p), MC_OK);
    if (mc_program_run(p) != MC_OK)
        fail_msg("B=%d T=%d: %s", B, T, mc_error_message());
    mc_tensor z, flat, pos, ones, cut, ev, last, rest, tl, am, rev;
    assert_int_equal(mc_program_output(p, 0, &z), MC_OK);
    assert_int_equal(mc_program_output(p, 1, &flat), MC_OK);
    assert_int_equal(mc_program_output(p, 2, &pos), MC_OK);
    assert_int_equal(mc_program_output(p, 3, &ones), MC_OK);
    assert_int_equal(mc_program_output(p, 4, &cut), MC_OK);
    assert_int_equal(mc_program_output(p, 5, &ev), MC_OK);
    assert_int_equal(mc_program_output(p, 6, &last), MC_OK);
    assert_int_equal(mc_program_output(p, 7, &rest), MC_OK);
    assert_int_equal(mc_program_output(p, 8, &tl), MC_OK);
    assert_int_equal(mc_program_output(p, 9, &am), MC_OK);
    assert_int_equal(mc_program_output(p, 10, &rev), MC_OK);
    for (int k = 0; k < B * T * 8; k++)
        assert_true(((const float *)rev.data)[k] == x[k - k % 8 + 7 - k % 8]);
    assert_true(tl.rank == 3 && tl.shape[0] == B && tl.shape[1] == 2 * T && tl.shape[2] == 8);
    assert_true(am.rank == 2 && am.shape[0] == B && am.shape[1] == T && am.dtype == MC_I32);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int best = 0;
            for (int j = 0; j < 8; j++) {
                float v = x[(b * T + t) * 8 + j];
                best = v > x[(b * T + t) * 8 + best] ? j : best;
                for (int r = 0; r < 2; r++)
                    assert_true(((const float *)tl.data)[(b * 2 * T + r * T + t) * 8 + j] == v);
            }
            assert_int_equal(((const int32_t *)am.data)[b * T + t], best);
        }
    assert_true(ev.rank == 3 && ev.shape[0] == B && ev.shape[1] == T && ev.shape[2] == 4);
    assert_true(last.rank == 2 && last.shape[0] == B && last.shape[1] == 8);
    assert_true(rest.rank == 3 && rest.shape[0] == B && rest.shape[1] == T - 1 && rest.shape[2] == 8);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < 8; j++) {
                float v = x[(b * T + t) * 8 + j];
                if (j % 2 == 0)
                    assert_true(((const float *)ev.data)[(b * T + t) * 4 + j / 2] == v);
                if (t == T - 1)
                    assert_true(((const float *)last.data)[b * 8 + j] == v);
                if (t > 0)
                    assert_true(((const float *)rest.data)[(b * (T - 1) + t - 1) * 8 + j] == v);
            }
    assert_true(cut.rank == 2 && cut.shape[0] == T && cut.shape[1] == T);
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++)
            assert_true(((const float *)cut.data)[i * T + j] == (float)(i * 8 + j));
    assert_int_equal(z.rank, 4);
    assert_true(z.shape[0] == B && z.shape[1] == 2 && z.shape[2] == T && z.shape[3] == 4);
    assert_true(flat.rank == 2 && flat.shape[0] == B * T && flat.shape[1] == 8);
    assert_true(pos.rank == 1 && pos.shape[0] == T);
    assert_true(ones.rank == 2 && ones.shape[0] == B && ones.shape[1] == T);
    const float *zf = z.data, *ff = flat.data, *pf = pos.data, *of = ones.data;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < 2; i++)
            for (int t = 0; t < T; t++)
                for (int j = 0; j < 4; j++)
                    assert_true(zf[((b * 2 + i) * T + t) * 4 + j] == x[(b * T + t) * 8 + i * 4 + j]);
    for (int k = 0; k < B * T * 8; k++)
        assert_true(ff[k] == x[k]);
    for (int t = 0; t < T; t++)
        assert_true(pf[t] == (float)t + mv[t]);
    for (int k = 0; k < B * T; k++)
        assert_true(of[k] == 1.0f);
}

static void test_dynamic_axes(void **state)
{
    (void)state;
    buf m;
    dynamic_model(&m, false);
    mc_onnx *o;
    if (mc_onnx_load_memory(m.b, m.n, "dyn.onnx", 0, NULL, NULL, &o) != MC_OK)
        fail_msg("%s", mc_error_message());
    const mc_graph *g = mc_onnx_graph(o);
    assert_int_equal(mc_graph_num_syms(g), 2);
    /* the printed types are symbolic */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(mc_graph_print(g, f), MC_OK);
    fclose(f);
    const char *want[] = {"input x : f32[B, T, 8]", "input m : f32[T]", "f32[B, 2, T, 4]", "f32[B*T, 8]",
                          "iota(shape=[T]", "f32[B, T]"};
    for (size_t k = 0; k < sizeof want / sizeof *want; k++)
        if (!strstr(text, want[k]))
            fail_msg("the graph lacks '%s':\n%s", want[k], text);
    free(text);
    /* ref always; cpu where this build has it; cuda where a GPU is usable */
    mc_backend_kind kinds[3] = {MC_BACKEND_REF};
    int nkinds = 1;
#ifdef MINIC_HAVE_CPU_BACKEND
    kinds[nkinds++] = MC_BACKEND_CPU;
#endif
    if (mc_test_have_gpu())
        kinds[nkinds++] = MC_BACKEND_CUDA;
    for (int b = 0; b < nkinds; b++) {
        mc_options opt = mc_test_options();
        opt.backend = kinds[b];
        mc_program *p;
        if (mc_program_compile(g, &opt, &p) != MC_OK)
            fail_msg("%s", mc_error_message());
        run_dynamic(o, p, 2, 3);
        run_dynamic(o, p, 1, 5);
        run_dynamic(o, p, 4, 6);
        run_dynamic(o, p, 2, 3); /* a binding seen before: nothing compiled */
        /* one compile for every binding: its merging reshape ([B*T, 8]) and cut slices take
         * symbolic sizes (three, one a binding, before 2026-11-28) */
        assert_int_equal(mc_program_compilations(p), 1);
        /* T beyond the constant that cut slices: an input error when it runs, not a clamped cut */
        float big[2 * 9 * 8] = {0};
        assert_int_equal(mc_program_set_dim(p, "B", 2), MC_OK);
        assert_int_equal(mc_program_set(p, "x", big, sizeof big), MC_OK);
        assert_int_equal(mc_program_set(p, "m", big, sizeof(float) * 9), MC_OK);
        assert_int_equal(mc_program_run(p), MC_ERR_INPUT);
        assert_non_null(strstr(mc_error_message(), "gather"));
        mc_program_free(p);
        /* a bad binding: an input error naming the input and the dimension */
        if (mc_program_compile(g, &opt, &p) != MC_OK)
            fail_msg("%s", mc_error_message());
        assert_int_equal(mc_program_set_dim(p, "B", 2), MC_OK);
        assert_int_equal(mc_program_set(p, "x", big, sizeof(float) * 2 * 3 * 8), MC_OK);
        assert_int_equal(mc_program_set(p, "m", big, sizeof(float) * 4), MC_ERR_INPUT);
        if (!strstr(mc_error_message(), "input 'm'") || !strstr(mc_error_message(), "f32[T] = f32[3]"))
            fail_msg("%s", mc_error_message());
        mc_program_free(p);
    }
    mc_onnx_free(o);
}

/* a constant below -2^62 joined with symbolic dimensions is refused, not read as one */
static void test_dynamic_axes_low_constant(void **state)
{
    (void)state;
    buf g = {0}, nd = {0}, v = {0}, m, a[1] = {{{0}, 0}};
    const char *BT[2] = {"B", "T"};
    const char *i1[] = {"x"}, *i2[] = {"s", "lowest"}, *i3[] = {"x", "shp"};
    nodev(&nd, "Shape", i1, 1, "s", NULL, 0);
    field_msg(&g, 1, &nd);
    attr_int(&a[0], "axis", 0);
    nodev(&nd, "Concat", i2, 2, "shp", a, 1);
    field_msg(&g, 1, &nd);
    nodev(&nd, "Reshape", i3, 2, "y", NULL, 0);
    field_msg(&g, 1, &nd);
    int64_init(&g, "lowest", (int64_t[]){MC_DIM_SYM_BASE - 1}, 1, false);
    dyn_input(&v, "x", (int64_t[]){0, 0}, BT, 2);
    field_msg(&g, 11, &v);
    v.n = 0;
    field_str(&v, 1, "y");
    field_msg(&g, 12, &v);
    model(&m, &g);
    expect_error(&m, "joined with symbolic dimensions (too negative for a size)");
}

/* a size computed from dim_params used as a tensor at run time (Hugging Face's GPT-2 multiplies
 * an index tensor by the sequence length): y = x * float(T - 1) + float(B * T), at several
 * bindings, on every backend here; 4 - T has no least value over the bindings: refused */
static void dyn_size_model(buf *m, bool negative)
{
    buf g = {0}, nd = {0}, v = {0}, a[1] = {{{0}, 0}};
    const char *BT[2] = {"B", "T"};
    const char *i1[] = {"x"}, *i2[] = {"s", "i1"}, *i3[] = {"s", "i0"}, *i4[] = {"t", "one"},
               *i4n[] = {"four", "t"}, *i5[] = {"b", "t"}, *i6[] = {"tm1"}, *i7[] = {"bt"},
               *i8[] = {"x", "f1"}, *i9[] = {"xm", "f2"};
    nodev(&nd, "Shape", i1, 1, "s", NULL, 0);
    field_msg(&g, 1, &nd);
    nodev(&nd, "Gather", i2, 2, "t", NULL, 0);
    field_msg(&g, 1, &nd);
    nodev(&nd, "Gather", i3, 2, "b", NULL, 0);
    field_msg(&g, 1, &nd);
    nodev(&nd, "Sub", negative ? i4n : i4, 2, "tm1", NULL, 0);
    field_msg(&g, 1, &nd);
    nodev(&nd, "Mul", i5, 2, "bt", NULL, 0);
    field_msg(&g, 1, &nd);
    attr_int(&a[0], "to", 1);
    nodev(&nd, "Cast", i6, 1, "f1", a, 1);
    field_msg(&g, 1, &nd);
    nodev(&nd, "Cast", i7, 1, "f2", a, 1);
    field_msg(&g, 1, &nd);
    nodev(&nd, "Mul", i8, 2, "xm", NULL, 0);
    field_msg(&g, 1, &nd);
    nodev(&nd, "Add", i9, 2, "y", NULL, 0);
    field_msg(&g, 1, &nd);
    int64_init(&g, "i0", (int64_t[]){0}, 1, true);
    int64_init(&g, "i1", (int64_t[]){1}, 1, true);
    int64_init(&g, "one", (int64_t[]){1}, 1, true);
    int64_init(&g, "four", (int64_t[]){4}, 1, true);
    dyn_input(&v, "x", (int64_t[]){0, 0}, BT, 2);
    field_msg(&g, 11, &v);
    v.n = 0;
    field_str(&v, 1, "y");
    field_msg(&g, 12, &v);
    model(m, &g);
}

static void test_dynamic_axes_size_as_tensor(void **state)
{
    (void)state;
    buf m;
    dyn_size_model(&m, true);
    expect_error(&m, "4 - T is not a size");
    dyn_size_model(&m, false);
    mc_onnx *o;
    if (mc_onnx_load_memory(m.b, m.n, "size.onnx", 0, NULL, NULL, &o) != MC_OK)
        fail_msg("%s", mc_error_message());
    mc_backend_kind kinds[3] = {MC_BACKEND_REF};
    int nkinds = 1;
#ifdef MINIC_HAVE_CPU_BACKEND
    kinds[nkinds++] = MC_BACKEND_CPU;
#endif
    if (mc_test_have_gpu())
        kinds[nkinds++] = MC_BACKEND_CUDA;
    for (int b = 0; b < nkinds; b++) {
        mc_options opt = mc_test_options();
        opt.backend = kinds[b];
        mc_program *p;
        if (mc_program_compile(mc_onnx_graph(o), &opt, &p) != MC_OK)
            fail_msg("%s", mc_error_message());
        const int sizes[4][2] = {{1, 1}, {2, 3}, {3, 7}, {1, 1}};
        for (int k = 0; k < 4; k++) {
            int B = sizes[k][0], T = sizes[k][1];
            float x[21];
            for (int e = 0; e < B * T; e++)
                x[e] = 0.5f * (float)e - 2.0f;
            assert_int_equal(mc_program_set_dim(p, "B", B), MC_OK);
            assert_int_equal(mc_program_set(p, "x", x, sizeof(float) * (size_t)(B * T)), MC_OK);
            assert_int_equal(mc_onnx_bind(o, p), MC_OK);
            if (mc_program_run(p) != MC_OK)
                fail_msg("%s B=%d T=%d: %s", mc_backend_name(kinds[b]), B, T, mc_error_message());
            mc_tensor y;
            assert_int_equal(mc_program_output(p, 0, &y), MC_OK);
            assert_true(y.rank == 2 && y.shape[0] == B && y.shape[1] == T);
            for (int e = 0; e < B * T; e++)
                if (((const float *)y.data)[e] != x[e] * (float)(T - 1) + (float)(B * T))
                    fail_msg("%s B=%d T=%d: y[%d] = %g", mc_backend_name(kinds[b]), B, T, e,
                             (double)((const float *)y.data)[e]);
        }
        mc_program_free(p);
    }
    mc_onnx_free(o);
}

/* the command line: check prints symbolic types; run binds from --input files or --dim; a
 * disagreeing binding names the input and the dimension; a chain the importer cannot compute
 * over symbols names the node, and runs with --dim (the sizes fixed at import) */
static void test_dynamic_axes_cli(void **state)
{
    (void)state;
    buf m;
    dynamic_model(&m, false);
    char path[4200], args[16384], xnpy[4200], mnpy[4200];
    snprintf(path, sizeof path, "%s/dynamic.onnx", mc_test_tmpdir());
    write_model(path, &m);
    char *out, *err;
    snprintf(args, sizeof args, "check %s", path);
    assert_int_equal(mc_test_minic(args, &out, &err), 0);
    assert_non_null(strstr(out, "input x : f32[B, T, 8]"));
    assert_non_null(strstr(out, "f32[B, 2, T, 4]"));
    free(out);
    free(err);
    snprintf(args, sizeof args, "check %s --dim B=2 --dim T=3", path);
    assert_int_equal(mc_test_minic(args, &out, &err), 0);
    assert_non_null(strstr(out, "input x : f32[2, 3, 8]"));
    free(out);
    free(err);
    float xv[2 * 3 * 8] = {0}, mv[4] = {0};
    mc_array xa = {MC_F32, 3, {2, 3, 8}, xv, sizeof xv}, ma = {MC_F32, 1, {4}, mv, sizeof mv};
    snprintf(xnpy, sizeof xnpy, "%s/dyn_x.npy", mc_test_tmpdir());
    snprintf(mnpy, sizeof mnpy, "%s/dyn_m.npy", mc_test_tmpdir());
    assert_int_equal(mc_npy_write(xnpy, &xa), MC_OK);
    assert_int_equal(mc_npy_write(mnpy, &ma), MC_OK);
#ifdef MINIC_HAVE_CPU_BACKEND
    const char *backend = "cpu";
#else
    const char *backend = "ref";
#endif
    if (mc_test_have_gpu())
        backend = "cuda";
    snprintf(args, sizeof args, "run %s --backend %s --quiet --input x=%s", path, backend, xnpy);
    assert_int_equal(mc_test_minic(args, &out, &err), 0);
    if (!strstr(out, "z: f32[2, 2, 3, 4]") || !strstr(out, "flat: f32[6, 8]") || !strstr(out, "pos: f32[3]"))
        fail_msg("%s", out);
    free(out);
    free(err);
    snprintf(args, sizeof args, "run %s --backend ref --quiet --dim B=3 --dim T=5", path);
    assert_int_equal(mc_test_minic(args, &out, &err), 0);
    assert_non_null(strstr(out, "z: f32[3, 2, 5, 4]"));
    free(out);
    free(err);
    snprintf(args, sizeof args, "run %s --backend ref --quiet --input x=%s --input m=%s", path, xnpy, mnpy);
    assert_int_equal(mc_test_minic(args, &out, &err), 1);
    if (!strstr(err, "input 'm' has T=4") || !strstr(err, "input 'x' bound T=3"))
        fail_msg("%s", err);
    free(out);
    free(err);
    /* import keeps the symbols: the text graph, run on the same inputs, gives the same outputs */
    snprintf(args, sizeof args, "import %s -o %s/dynamic.graph --weights-out %s/dynamic.safetensors --quiet", path,
             mc_test_tmpdir(), mc_test_tmpdir());
    assert_int_equal(mc_test_minic(args, &out, &err), 0);
    free(out);
    free(err);
    char gpath[4300], *out2;
    snprintf(gpath, sizeof gpath, "%s/dynamic.graph", mc_test_tmpdir());
    FILE *gf = fopen(gpath, "r");
    assert_non_null(gf);
    char text[8192] = "";
    size_t got = fread(text, 1, sizeof text - 1, gf);
    text[got] = 0;
    fclose(gf);
    assert_non_null(strstr(text, "input x : f32[B, T, 8]"));
    snprintf(args, sizeof args, "run %s --weights %s/dynamic.safetensors --backend ref --quiet --seed 3 --input x=%s",
             gpath, mc_test_tmpdir(), xnpy);
    assert_int_equal(mc_test_minic(args, &out2, &err), 0);
    free(err);
    snprintf(args, sizeof args, "run %s --backend ref --quiet --seed 3 --input x=%s", path, xnpy);
    assert_int_equal(mc_test_minic(args, &out, &err), 0);
    free(err);
    /* after the first line (the file's name, the compile time) */
    if (!strchr(out, '\n') || !strchr(out2, '\n') || strcmp(strchr(out, '\n'), strchr(out2, '\n')))
        fail_msg("the model:\n%s\nits import:\n%s", out, out2);
    free(out);
    free(out2);
    /* a chain that is not computed over symbols: the node named; with --dim, fixed sizes */
    dynamic_model(&m, true);
    write_model(path, &m);
    snprintf(args, sizeof args, "run %s --backend ref", path);
    assert_int_equal(mc_test_minic(args, &out, &err), 1);
    if (!strstr(err, "minic: unsupported: node prod (ReduceProd, opset 17): operand 0 has the shape [B, T, 8]"))
        fail_msg("%s", err);
    free(out);
    free(err);
    snprintf(args, sizeof args, "run %s --backend ref --dim B=2 --dim T=3", path);
    if (mc_test_minic(args, &out, &err) != 0 || !strstr(out, "prod: f32[2, 3, 1]"))
        fail_msg("%s%s", out, err);
    assert_non_null(strstr(err, "imported with the --dim sizes fixed"));
    free(out);
    free(err);
}

/* ---- more operators over symbolic dimensions ------------------------------------------------ */

/* the backends a test runs on: ref always; cpu where this build has it; cuda where a GPU is
 * usable. Returns their count. */
static int test_backends(mc_backend_kind kinds[3])
{
    int n = 0;
    kinds[n++] = MC_BACKEND_REF;
#ifdef MINIC_HAVE_CPU_BACKEND
    kinds[n++] = MC_BACKEND_CPU;
#endif
    if (mc_test_have_gpu())
        kinds[n++] = MC_BACKEND_CUDA;
    return n;
}

/* x: f32[B, T, 8], past: f32[B, P, 8], e: f32[B, 2, 8];
 *   tril = Trilu(x, k=1, upper=0)   triu = Trilu(x)          over the symbolic T rows
 *   cs   = CumSum(x, axis 1, exclusive, reverse)               a symbolic axis reversed
 *   h1, h2 = Split(Concat(x, x), 2 parts, axis 1)              equal parts of 2*T
 *   pa, xa = Split(Concat(past, x), [P, T], axis 1)            both bounds symbolic
 *   e2, x2 = Split(Concat(e, x), [2, T], axis 1)               fixed bounds from the start/end
 *   ks   = Slice(Concat(past, x), starts [P], ends [big], axes [1])  (a KV cache's new rows: x)
 *   mask = Slice(tri [16, 16], starts [P], ends [P + T], axes [0])   [T, 16] of a constant
 *   xm   = x + Cast(Mod(4 * T + 3, 4))  (= x + 3)    xmod = Mod(x, 2.5, fmod=1)
 *   al   = ArgMax(x, axis 1, select_last_index)  [B, 1, 8]: T - 1 - the argmax of x reversed */
static void dynamic_ops_model(buf *m)
{
    buf g = {0}, nd = {0}, v = {0}, a[2] = {{{0}, 0}, {{0}, 0}};
    const char *names[3] = {"B", "T", NULL}, *bp[2] = {"B", "P"};
    int64_t one = 1, zero = 0, four = 4, three = 3, two = 2;
#define N(op, out, na, ...)                                                        \
    do {                                                                           \
        const char *ins_[] = {__VA_ARGS__};                                        \
        nodev(&nd, op, ins_, (int)(sizeof ins_ / sizeof *ins_), out, a, na);       \
        field_msg(&g, 1, &nd);                                                     \
    } while (0)
#define N2(op, out1, out2, na, ...)                                                \
    do {                                                                           \
        const char *ins_[] = {__VA_ARGS__};                                        \
        nodev(&nd, op, ins_, (int)(sizeof ins_ / sizeof *ins_), out1, a, na);      \
        field_str(&nd, 2, out2);                                                   \
        field_msg(&g, 1, &nd);                                                     \
    } while (0)
    attr_int(&a[0], "upper", 0);
    N("Trilu", "tril", 1, "x", "one");
    N("Trilu", "triu", 0, "x");
    attr_int(&a[0], "exclusive", 1);
    attr_int(&a[1], "reverse", 1);
    N("CumSum", "cs", 2, "x", "one");
    attr_int(&a[0], "axis", 1);
    N("Concat", "xx", 1, "x", "x");
    N2("Split", "h1", "h2", 1, "xx");
    N("Concat", "kv", 1, "past", "x");
    N("Concat", "ex", 1, "e", "x");
    N("Shape", "sp", 0, "past");
    N("Shape", "sx", 0, "x");
    attr_int(&a[0], "axis", 0);
    N("Gather", "P", 1, "sp", "one");
    N("Gather", "T", 1, "sx", "one");
    N("Unsqueeze", "Pu", 0, "P", "zero1");
    N("Unsqueeze", "Tu", 0, "T", "zero1");
    N("Concat", "PT", 1, "Pu", "Tu");
    N("Concat", "twoT", 1, "two1", "Tu");
    attr_int(&a[0], "axis", 1);
    N2("Split", "pa", "xa", 1, "kv", "PT");
    N2("Split", "e2", "x2", 1, "ex", "twoT");
    N("Slice", "ks", 0, "kv", "Pu", "big1", "one1");
    N("Add", "PpT", 0, "Pu", "Tu");
    N("Slice", "mask", 0, "tri", "Pu", "PpT", "zero1");
    N("Mul", "T4", 0, "T", "four");
    N("Add", "T43", 0, "T4", "three");
    N("Mod", "r", 0, "T43", "four");
    attr_int(&a[0], "to", 1);
    N("Cast", "rf", 1, "r");
    N("Add", "xm", 0, "x", "rf");
    attr_int(&a[0], "fmod", 1);
    N("Mod", "xmod", 1, "x", "twohalf");
    attr_int(&a[0], "axis", 1);
    attr_int(&a[1], "select_last_index", 1);
    N("ArgMax", "al", 2, "x"); /* keepdims: [B, 1, 8] */
#undef N
#undef N2
    int64_init(&g, "one", &one, 1, true);
    int64_init(&g, "four", &four, 1, true);
    int64_init(&g, "three", &three, 1, true);
    int64_init(&g, "zero1", &zero, 1, false);
    int64_init(&g, "one1", &one, 1, false);
    int64_init(&g, "two1", &two, 1, false);
    int64_init(&g, "big1", (int64_t[]){INT64_MAX}, 1, false);
    {
        buf t = {0};
        const float th = 2.5f;
        tensor(&t, "twohalf", 1, NULL, 0, &th, sizeof th);
        field_msg(&g, 5, &t);
        float tri[256];
        for (int k = 0; k < 256; k++)
            tri[k] = (float)k;
        tensor(&t, "tri", 1, (int64_t[]){16, 16}, 2, tri, sizeof tri);
        field_msg(&g, 5, &t);
    }
    dyn_input(&v, "x", (int64_t[]){0, 0, 8}, names, 3);
    field_msg(&g, 11, &v);
    dyn_input(&v, "past", (int64_t[]){0, 0, 8}, bp, 3);
    field_msg(&g, 11, &v);
    dyn_input(&v, "e", (int64_t[]){0, 2, 8}, names, 3);
    field_msg(&g, 11, &v);
    const char *outs[] = {"tril", "triu", "cs", "h1", "h2", "pa", "xa", "e2", "x2", "ks", "mask", "xm", "xmod", "al"};
    for (size_t k = 0; k < sizeof outs / sizeof *outs; k++) {
        v.n = 0;
        field_str(&v, 1, outs[k]);
        field_msg(&g, 12, &v);
    }
    model(m, &g);
}

/* output k of p: its shape (rank 3 or 2: d2 0) and values as floats */
static const float *dyn_out(mc_program *p, int k, int64_t d0, int64_t d1, int64_t d2)
{
    mc_tensor t;
    assert_int_equal(mc_program_output(p, k, &t), MC_OK);
    assert_int_equal(t.dtype, MC_F32);
    if (t.rank != (d2 ? 3 : 2) || t.shape[0] != d0 || t.shape[1] != d1 || (d2 && t.shape[2] != d2))
        fail_msg("output %d: rank %d [%lld, %lld, ..], expected [%lld, %lld, %lld]", k, t.rank,
                 (long long)t.shape[0], (long long)t.shape[1], (long long)d0, (long long)d1, (long long)d2);
    return t.data;
}

static void run_dynamic_ops(mc_onnx *o, mc_program *p, int B, int T, int P)
{
    float x[3 * 6 * 8], past[3 * 8 * 8], e[3 * 2 * 8];
    for (int k = 0; k < B * T * 8; k++)
        x[k] = 0.25f * (float)(k * 7 % 29) - 3.0f + (float)B;
    for (int k = 0; k < B * P * 8; k++)
        past[k] = 100.0f + (float)k;
    for (int k = 0; k < B * 2 * 8; k++)
        e[k] = -50.0f - (float)k;
    assert_int_equal(mc_program_set_dim(p, "B", B), MC_OK); /* T and P from the sizes */
    assert_int_equal(mc_program_set(p, "x", x, sizeof(float) * (size_t)(B * T * 8)), MC_OK);
    assert_int_equal(mc_program_set(p, "past", past, sizeof(float) * (size_t)(B * P * 8)), MC_OK);
    assert_int_equal(mc_program_set(p, "e", e, sizeof(float) * (size_t)(B * 2 * 8)), MC_OK);
    assert_int_equal(mc_onnx_bind(o, p), MC_OK);
    if (mc_program_run(p) != MC_OK)
        fail_msg("B=%d T=%d P=%d: %s", B, T, P, mc_error_message());
    const float *tril = dyn_out(p, 0, B, T, 8), *triu = dyn_out(p, 1, B, T, 8), *cs = dyn_out(p, 2, B, T, 8);
    const float *h1 = dyn_out(p, 3, B, T, 8), *h2 = dyn_out(p, 4, B, T, 8), *pa = dyn_out(p, 5, B, P, 8);
    const float *xa = dyn_out(p, 6, B, T, 8), *e2 = dyn_out(p, 7, B, 2, 8), *x2 = dyn_out(p, 8, B, T, 8);
    const float *ks = dyn_out(p, 9, B, T, 8), *mask = dyn_out(p, 10, T, 16, 0), *xm = dyn_out(p, 11, B, T, 8);
    const float *xmod = dyn_out(p, 12, B, T, 8);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < 8; j++) {
                int k = (b * T + t) * 8 + j;
                float later = 0;
                for (int u = t + 1; u < T; u++)
                    later += x[(b * T + u) * 8 + j];
                if (tril[k] != (j - t <= 1 ? x[k] : 0) || triu[k] != (j >= t ? x[k] : 0) || cs[k] != later)
                    fail_msg("B=%d T=%d at [%d, %d, %d]: tril %g triu %g cs %g (x %g, later %g)", B, T, b, t, j,
                             tril[k], triu[k], cs[k], x[k], later);
                if (h1[k] != x[k] || h2[k] != x[k] || xa[k] != x[k] || x2[k] != x[k] || ks[k] != x[k] ||
                    xm[k] != x[k] + 3 || fabsf(xmod[k] - fmodf(x[k], 2.5f)) > 1e-6f)
                    fail_msg("B=%d T=%d P=%d at [%d, %d, %d]: h1 %g h2 %g xa %g x2 %g ks %g xm %g xmod %g, x %g", B, T,
                             P, b, t, j, h1[k], h2[k], xa[k], x2[k], ks[k], xm[k], xmod[k], x[k]);
            }
    mc_tensor al;
    assert_int_equal(mc_program_output(p, 13, &al), MC_OK);
    assert_true(al.dtype == MC_I32 && al.rank == 3 && al.shape[0] == B && al.shape[1] == 1 && al.shape[2] == 8);
    for (int b = 0; b < B; b++)
        for (int j = 0; j < 8; j++) {
            int best = 0; /* the last of the largest */
            for (int t = 1; t < T; t++)
                best = x[(b * T + t) * 8 + j] >= x[(b * T + best) * 8 + j] ? t : best;
            if (((const int32_t *)al.data)[b * 8 + j] != best)
                fail_msg("B=%d T=%d: al[%d, %d] = %d, expected %d", B, T, b, j, ((const int32_t *)al.data)[b * 8 + j],
                         best);
        }
    for (int k = 0; k < B * P * 8; k++)
        assert_true(pa[k] == past[k]);
    for (int k = 0; k < B * 2 * 8; k++)
        assert_true(e2[k] == e[k]);
    for (int t = 0; t < T; t++)
        for (int j = 0; j < 16; j++)
            assert_true(mask[t * 16 + j] == (float)((P + t) * 16 + j));
}

/* Trilu, CumSum (exclusive, reverse), Split (equal parts, symbolic sizes, fixed bounds), Mod
 * (a symbolic size's remainder folded; at run time) and Slice with a symbolic start over a
 * symbolic axis and over a constant's axis: several bindings on ref and cpu (and cuda where
 * there is a GPU), against values computed here; P + T beyond the constant is the run's input
 * error. T mod 2 runs; what cannot be expressed for every binding is refused, naming the node. */
static void test_dynamic_ops(void **state)
{
    (void)state;
    buf m;
    dynamic_ops_model(&m);
    mc_onnx *o;
    if (mc_onnx_load_memory(m.b, m.n, "dynops.onnx", 0, NULL, NULL, &o) != MC_OK)
        fail_msg("%s", mc_error_message());
    assert_int_equal(mc_graph_num_syms(mc_onnx_graph(o)), 3);
    mc_backend_kind kinds[3];
    int nkinds = test_backends(kinds);
    for (int b = 0; b < nkinds; b++) {
        mc_options opt = mc_test_options();
        opt.backend = kinds[b];
        mc_program *p;
        if (mc_program_compile(mc_onnx_graph(o), &opt, &p) != MC_OK)
            fail_msg("%s", mc_error_message());
        run_dynamic_ops(o, p, 2, 3, 1);
        run_dynamic_ops(o, p, 1, 5, 4);
        run_dynamic_ops(o, p, 3, 2, 7);
        run_dynamic_ops(o, p, 2, 3, 1);
        assert_int_equal(mc_program_compilations(p), 1); /* compiled once (three before 2026-11-28) */
        /* P + T = 17 rows of the [16, 16] constant: the gather's input error, not a clamped mask */
        float big[8 * 13] = {0};
        assert_int_equal(mc_program_set_dim(p, "B", 1), MC_OK);
        assert_int_equal(mc_program_set(p, "x", big, sizeof(float) * 5 * 8), MC_OK);
        assert_int_equal(mc_program_set(p, "past", big, sizeof(float) * 12 * 8), MC_OK);
        assert_int_equal(mc_program_set(p, "e", big, sizeof(float) * 2 * 8), MC_OK);
        assert_int_equal(mc_onnx_bind(o, p), MC_OK);
        assert_int_equal(mc_program_run(p), MC_ERR_INPUT);
        assert_non_null(strstr(mc_error_message(), "gather"));
        mc_program_free(p);
    }
    mc_onnx_free(o);
    /* what depends on the binding: T mod 2 is computed when the program runs; a split of T
     * into 2 equal parts and a symbolic start with an end that is a number are refused */
    const char *T1[1] = {"T"};
    const char *cases[3][2] = {{"Mod", NULL},
                               {"Split", "a split of axis 0 of symbolic size T into 2 equal parts"},
                               {"Slice", "minic takes a symbolic start with step 1 and an end that lies after it"}};
    for (int k = 0; k < 3; k++) {
        buf g = {0}, nd = {0}, v = {0}, a = {0};
        int64_t two = 2;
        const char *shape_in[] = {"x"}, *mod_in[] = {"s", "two"}, *slice_in[] = {"x", "s", "two"};
        nodev(&nd, "Shape", shape_in, 1, "s", NULL, 0);
        field_msg(&g, 1, &nd);
        if (k == 0)
            nodev(&nd, "Mod", mod_in, 2, "y", NULL, 0);
        else if (k == 1) {
            attr_int(&a, "axis", 0);
            nodev(&nd, "Split", shape_in, 1, "y", &a, 1);
            field_str(&nd, 2, "y2");
        } else
            nodev(&nd, "Slice", slice_in, 3, "y", NULL, 0);
        field_msg(&g, 1, &nd);
        int64_init(&g, "two", &two, 1, k != 0);
        dyn_input(&v, "x", (int64_t[]){0}, T1, 1);
        field_msg(&g, 11, &v);
        v.n = 0;
        field_str(&v, 1, "y");
        field_msg(&g, 12, &v);
        model(&m, &g);
        if (!cases[k][1]) { /* Mod: y = [T % 2] at every binding */
            if (mc_onnx_load_memory(m.b, m.n, "dynops.onnx", 0, NULL, NULL, &o) != MC_OK)
                fail_msg("%s", mc_error_message());
            for (int b = 0; b < nkinds; b++) {
                mc_options opt = mc_test_options();
                opt.backend = kinds[b];
                mc_program *p;
                if (mc_program_compile(mc_onnx_graph(o), &opt, &p) != MC_OK)
                    fail_msg("%s", mc_error_message());
                for (int T = 1; T <= 4; T++) {
                    const float xs[4] = {0};
                    mc_tensor t;
                    assert_int_equal(mc_program_set(p, "x", xs, sizeof(float) * (size_t)T), MC_OK);
                    assert_int_equal(mc_onnx_bind(o, p), MC_OK);
                    if (mc_program_run(p) != MC_OK)
                        fail_msg("T=%d: %s", T, mc_error_message());
                    assert_int_equal(mc_program_output(p, 0, &t), MC_OK);
                    assert_true(t.dtype == MC_I32 && t.rank == 1 && t.shape[0] == 1);
                    assert_int_equal(((const int32_t *)t.data)[0], T % 2);
                }
                mc_program_free(p);
            }
            mc_onnx_free(o);
            continue;
        }
        char want[200];
        snprintf(want, sizeof want, "(%s, opset 17): ", cases[k][0]);
        assert_int_equal(mc_onnx_load_memory(m.b, m.n, "dynops.onnx", 0, NULL, NULL, &o), MC_ERR_INPUT);
        if (!strstr(mc_error_message(), want) || !strstr(mc_error_message(), cases[k][1]))
            fail_msg("%s", mc_error_message());
    }
}

/* a CumSum with reverse whose cumsum fails (bool x: fuzz_onnx found flip reading the failed
 * value's node) is reported, naming the node */
static void test_cumsum_reverse_refused(void **state)
{
    (void)state;
    buf g = {0}, nd = {0}, v = {0}, a = {0}, m;
    int64_t zero = 0;
    const char *T1[1] = {"T"}, *ins[] = {"x", "ax"};
    attr_int(&a, "reverse", 1);
    nodev(&nd, "CumSum", ins, 2, "y", &a, 1);
    field_msg(&g, 1, &nd);
    int64_init(&g, "ax", &zero, 1, true);
    for (int sym = 0; sym < 2; sym++) {
        buf g2 = g;
        if (sym) /* f32[T] */
            dyn_input(&v, "x", (int64_t[]){0}, T1, 1);
        else
            value_info(&v, "x", 9, (int64_t[]){3}, 1); /* bool[3] */
        field_msg(&g2, 11, &v);
        v.n = 0;
        field_str(&v, 1, "y");
        field_msg(&g2, 12, &v);
        model(&m, &g2);
        mc_onnx *o;
        if (sym) { /* f32 over a symbolic axis imports */
            if (mc_onnx_load_memory(m.b, m.n, "cs.onnx", 0, NULL, NULL, &o) != MC_OK)
                fail_msg("%s", mc_error_message());
            mc_onnx_free(o);
        } else {
            assert_int_equal(mc_onnx_load_memory(m.b, m.n, "cs.onnx", 0, NULL, NULL, &o), MC_ERR_INPUT);
            if (!strstr(mc_error_message(), "node y (CumSum, opset 17): cumsum: bool is not supported"))
                fail_msg("%s", mc_error_message());
        }
    }
}

/* GatherND(x, i, batch_dims=bd) with x of ONNX type xtype and INT64 indices */
static void gather_nd_model(buf *m, int xtype, const int64_t *xd, int xr, const int64_t *id, int ir,
                            const int64_t *yd, int yr, int64_t bd)
{
    buf g = {0}, nd = {0}, in = {0}, out = {0}, a = {0};
    attr_int(&a, "batch_dims", bd);
    nodev(&nd, "GatherND", (const char *[]){"x", "i"}, 2, "y", &a, 1);
    field_msg(&g, 1, &nd);
    value_info(&in, "x", xtype, xd, xr);
    field_msg(&g, 11, &in);
    in.n = 0;
    value_info(&in, "i", 7, id, ir);
    field_msg(&g, 11, &in);
    value_info(&out, "y", xtype, yd, yr);
    field_msg(&g, 12, &out);
    model(m, &g);
}

/* run a GatherND model on backend kind with x (f32 or bool) and indices iv; check y's shape and
 * values (want: floats; for bool data, 0/1), then iv[bad_at], a coordinate on an axis of len
 * entries, out of range: the run's input error */
static void gather_nd_check(const buf *m, mc_backend_kind kind, const void *x, size_t xb, int32_t *iv, size_t ib,
                            const int64_t *yd, int yr, const float *want, int bad_at, int len)
{
    mc_onnx *o;
    if (mc_onnx_load_memory(m->b, m->n, "gnd.onnx", 0, NULL, NULL, &o) != MC_OK)
        fail_msg("%s", mc_error_message());
    mc_options opt = mc_test_options();
    opt.backend = kind;
    mc_program *p;
    if (mc_program_compile(mc_onnx_graph(o), &opt, &p) != MC_OK)
        fail_msg("%s", mc_error_message());
    assert_int_equal(mc_program_set(p, "x", x, xb), MC_OK);
    assert_int_equal(mc_program_set(p, "i", iv, ib), MC_OK);
    if (mc_program_run(p) != MC_OK)
        fail_msg("%s", mc_error_message());
    mc_tensor t;
    assert_int_equal(mc_program_output(p, 0, &t), MC_OK);
    assert_int_equal(t.rank, yr);
    int64_t n = 1;
    for (int d = 0; d < yr; d++) {
        assert_int_equal(t.shape[d], yd[d]);
        n *= yd[d];
    }
    for (int64_t k = 0; k < n; k++) {
        float v = t.dtype == MC_BOOL ? (float)((const bool *)t.data)[k] : ((const float *)t.data)[k];
        if (v != want[k])
            fail_msg("backend %d: y[%lld] = %g, expected %g", (int)kind, (long long)k, v, want[k]);
    }
    int32_t keep = iv[bad_at];
    for (int r = 0; r < 3; r++) { /* past the end, before the start, far out (no i32 overflow) */
        iv[bad_at] = r == 0 ? len : r == 1 ? -len - 1 : INT32_MIN + 1;
        assert_int_equal(mc_program_set(p, "i", iv, ib), MC_OK);
        assert_int_equal(mc_program_run(p), MC_ERR_INPUT);
        assert_non_null(strstr(mc_error_message(), "gather"));
    }
    iv[bad_at] = keep;
    mc_program_free(p);
    mc_onnx_free(o);
}

/* GatherND (a gather over the indexed axes made one): batch_dims 0, 1 and 2, tuples that pick
 * rows or elements, negative coordinates, bool data, indices of rank 1 (a scalar result); an
 * index out of range fails the run with gather's input error, on ref and cpu */
static void test_gather_nd(void **state)
{
    (void)state;
    float x[24];
    for (int k = 0; k < 24; k++)
        x[k] = (float)k; /* x[a][b][c] = 12a + 4b + c, shape [2, 3, 4]; axes 0..1 hold 3 entries at most */
    mc_backend_kind kinds[3];
    int nkinds = test_backends(kinds);
    for (int b = 0; b < nkinds; b++) {
        buf m;
        /* batch_dims 0, pairs: rows x[i0, i1, :] -> [2, 4] */
        gather_nd_model(&m, 1, (int64_t[]){2, 3, 4}, 3, (int64_t[]){2, 2}, 2, (int64_t[]){2, 4}, 2, 0);
        int32_t i0[4] = {1, 2, -1, -3}; /* (1, 2), (1, 0) */
        float w0[8];
        for (int c = 0; c < 4; c++)
            w0[c] = (float)(12 + 8 + c), w0[4 + c] = (float)(12 + c);
        gather_nd_check(&m, kinds[b], x, sizeof x, i0, sizeof i0, (int64_t[]){2, 4}, 2, w0, 1, 3);
        /* batch_dims 1, full tuples: y[b, j] = x[b, i0, i1] -> [2, 2] */
        gather_nd_model(&m, 1, (int64_t[]){2, 3, 4}, 3, (int64_t[]){2, 2, 2}, 3, (int64_t[]){2, 2}, 2, 1);
        int32_t i1[8] = {0, 3, 2, -1, 1, 1, -3, 0};
        const float w1[4] = {3, 11, 12 + 5, 12};
        gather_nd_check(&m, kinds[b], x, sizeof x, i1, sizeof i1, (int64_t[]){2, 2}, 2, w1, 2, 3);
        /* batch_dims 2, single coordinates: y[a, b] = x[a, b, i] -> [2, 3] */
        gather_nd_model(&m, 1, (int64_t[]){2, 3, 4}, 3, (int64_t[]){2, 3, 1}, 3, (int64_t[]){2, 3}, 2, 2);
        int32_t i2[6] = {0, 1, 2, 3, -1, -4};
        const float w2[6] = {0, 5, 10, 15, 19, 20};
        gather_nd_check(&m, kinds[b], x, sizeof x, i2, sizeof i2, (int64_t[]){2, 3}, 2, w2, 4, 4);
        /* indices of rank 1: one element, a scalar */
        gather_nd_model(&m, 1, (int64_t[]){2, 3, 4}, 3, (int64_t[]){3}, 1, NULL, 0, 0);
        int32_t i3[3] = {1, -1, 2};
        const float w3[1] = {12 + 8 + 2};
        gather_nd_check(&m, kinds[b], x, sizeof x, i3, sizeof i3, NULL, 0, w3, 1, 3);
        /* bool data [3, 2], batch_dims 0, one coordinate: rows */
        const bool xb[6] = {true, false, false, false, true, true};
        gather_nd_model(&m, 9, (int64_t[]){3, 2}, 2, (int64_t[]){2, 1}, 2, (int64_t[]){2, 2}, 2, 0);
        int32_t i4[2] = {-1, 0};
        const float w4[4] = {1, 1, 1, 0};
        gather_nd_check(&m, kinds[b], xb, sizeof xb, i4, sizeof i4, (int64_t[]){2, 2}, 2, w4, 0, 3);
    }
    /* what GatherND cannot take: named reasons */
    buf m;
    mc_onnx *o;
    gather_nd_model(&m, 1, (int64_t[]){2, 3, 4}, 3, (int64_t[]){2, 4}, 2, (int64_t[]){2}, 1, 0);
    assert_int_equal(mc_onnx_load_memory(m.b, m.n, "gnd.onnx", 0, NULL, NULL, &o), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "index tuples of 4 coordinates into data of rank 3"));
    gather_nd_model(&m, 1, (int64_t[]){2, 3, 4}, 3, (int64_t[]){3, 1}, 2, (int64_t[]){3}, 1, 1);
    assert_int_equal(mc_onnx_load_memory(m.b, m.n, "gnd.onnx", 0, NULL, NULL, &o), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "batch axis 0 has 3 entries in the indices but 2 in the data"));
    gather_nd_model(&m, 1, (int64_t[]){2, 3, 4}, 3, (int64_t[]){2, 1}, 2, (int64_t[]){2}, 1, 2);
    assert_int_equal(mc_onnx_load_memory(m.b, m.n, "gnd.onnx", 0, NULL, NULL, &o), MC_ERR_INPUT);
    assert_non_null(strstr(mc_error_message(), "batch_dims 2 for data of rank 3 and indices of rank 2"));
}

static void test_cli(void **state)
{
    (void)state;
    buf m;
    int64_t wd[1] = {4};
    add_model(&m, wvals, sizeof wvals, wd, 1);
    char path[4200], args[16384];
    snprintf(path, sizeof path, "%s/cli.onnx", mc_test_tmpdir());
    write_model(path, &m);
    char *out, *err;
    snprintf(args, sizeof args, "run %s --backend ref --quiet", path);
    assert_int_equal(mc_test_minic(args, &out, &err), 0);
    assert_non_null(strstr(out, "y_out: f32[4]"));
    free(out);
    free(err);
    snprintf(args, sizeof args, "check %s", path);
    assert_int_equal(mc_test_minic(args, &out, &err), 0);
    assert_non_null(strstr(out, "# onnx input x_0 = 'x:0'"));
    free(out);
    free(err);
    snprintf(args, sizeof args, "import %s -o %s/cli.graph --weights-out %s/cli.safetensors --quiet",
             path, mc_test_tmpdir(), mc_test_tmpdir());
    assert_int_equal(mc_test_minic(args, &out, &err), 0);
    free(out);
    free(err);
    /* the text graph keeps the way back to the model's names (as check prints them) */
    char gpath[4200];
    snprintf(gpath, sizeof gpath, "%s/cli.graph", mc_test_tmpdir());
    char *text = read_text(gpath);
    if (!strstr(text, "\n# onnx input x_0 = 'x:0'\n"))
        fail_msg("the imported graph lacks the ONNX input's name:\n%s", text);
    free(text);
    /* both files or neither: weights that cannot be written take the graph back */
    remove(gpath);
    snprintf(args, sizeof args, "import %s -o %s --weights-out %s/no_such_dir/w.safetensors --quiet", path,
             gpath, mc_test_tmpdir());
    assert_int_equal(mc_test_minic(args, &out, &err), 1);
    assert_non_null(strstr(err, "no_such_dir/w.safetensors"));
    assert_int_equal(access(gpath, F_OK), -1);
    free(out);
    free(err);
    snprintf(args, sizeof args, "import %s -o %s/cli.graph --weights-out %s/cli.safetensors --quiet",
             path, mc_test_tmpdir(), mc_test_tmpdir());
    assert_int_equal(mc_test_minic(args, &out, &err), 0);
    free(out);
    free(err);
    /* the text graph with its weights gives the model's outputs */
    snprintf(args, sizeof args, "run %s/cli.graph --weights %s/cli.safetensors --backend ref --quiet",
             mc_test_tmpdir(), mc_test_tmpdir());
    char *out2;
    assert_int_equal(mc_test_minic(args, &out2, &err), 0);
    free(err);
    snprintf(args, sizeof args, "run %s --backend ref --quiet", path);
    assert_int_equal(mc_test_minic(args, &out, &err), 0);
    free(err);
    assert_non_null(strstr(out2, strstr(out, "checksum")));
    free(out);
    free(out2);
    /* --weights overrides an initializer under its ONNX name (onnx::w, minic's onnx__w) */
    {
        buf g2 = {0}, t2 = {0}, n2 = {0}, i2 = {0}, o3 = {0};
        node(&n2, "Add", "x", "onnx::w", "y");
        field_msg(&g2, 1, &n2);
        tensor(&t2, "onnx::w", 1, wd, 1, wvals, sizeof wvals);
        field_msg(&g2, 5, &t2);
        value_info(&i2, "x", 1, wd, 1);
        field_msg(&g2, 11, &i2);
        value_info(&o3, "y", 1, wd, 1);
        field_msg(&g2, 12, &o3);
        model(&m, &g2);
        write_model(path, &m);
        const char header[] = "{\"onnx::w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}";
        const float wnew[4] = {10, 20, 30, 40};
        char st[4200];
        snprintf(st, sizeof st, "%s/onnx_names.safetensors", mc_test_tmpdir());
        FILE *f = fopen(st, "wb");
        assert_non_null(f);
        uint64_t len = sizeof header - 1;
        for (int k = 0; k < 8; k++)
            fputc((int)(len >> (8 * k)) & 0xff, f);
        fwrite(header, 1, len, f);
        fwrite(wnew, 1, sizeof wnew, f);
        fclose(f);
        const float zeros[4] = {0, 0, 0, 0};
        char xnpy[4200];
        snprintf(xnpy, sizeof xnpy, "%s/x0.npy", mc_test_tmpdir());
        f = fopen(xnpy, "wb");
        assert_non_null(f);
        const char npyh[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }";
        char hdr[118]; /* 10 + 118 = 128 bytes of header */
        memset(hdr, ' ', sizeof hdr);
        memcpy(hdr, npyh, sizeof npyh - 1);
        hdr[117] = '\n';
        fwrite("\x93NUMPY\x01\x00\x76\x00", 1, 10, f);
        fwrite(hdr, 1, sizeof hdr, f);
        fwrite(zeros, 1, sizeof zeros, f);
        fclose(f);
        snprintf(args, sizeof args, "run %s --backend ref --quiet --weights %s --input x=%s", path, st, xnpy);
        assert_int_equal(mc_test_minic(args, &out, &err), 0);
        if (!strstr(out, "values: 10 20 30 40"))
            fail_msg("expected the overriding weights: %s %s", out, err);
        free(out);
        free(err);
        /* ... and under its minic name, as `minic import --weights-out` writes it (it was
         * ignored: the override looked up ONNX names only) */
        const char header2[] = "{\"onnx__w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}";
        const float wnew2[4] = {5, 6, 7, 8};
        snprintf(st, sizeof st, "%s/minic_names.safetensors", mc_test_tmpdir());
        f = fopen(st, "wb");
        assert_non_null(f);
        len = sizeof header2 - 1;
        for (int k = 0; k < 8; k++)
            fputc((int)(len >> (8 * k)) & 0xff, f);
        fwrite(header2, 1, len, f);
        fwrite(wnew2, 1, sizeof wnew2, f);
        fclose(f);
        snprintf(args, sizeof args, "run %s --backend ref --quiet --weights %s --input x=%s", path, st, xnpy);
        assert_int_equal(mc_test_minic(args, &out, &err), 0);
        if (!strstr(out, "values: 5 6 7 8"))
            fail_msg("expected the weights under their minic name: %s %s", out, err);
        free(out);
        free(err);
    }
    /* an ONNX name holding a newline cannot end its comment and add a statement to the file
     * (it was written as it is: `# onnx input x_output_y = 'x` then a line `output y'`) */
    {
        buf g2 = {0}, n2 = {0}, i2 = {0}, o3 = {0};
        node(&n2, "Relu", "x\noutput y", NULL, "y");
        field_msg(&g2, 1, &n2);
        value_info(&i2, "x\noutput y", 1, wd, 1);
        field_msg(&g2, 11, &i2);
        value_info(&o3, "y", 1, wd, 1);
        field_msg(&g2, 12, &o3);
        model(&m, &g2);
        write_model(path, &m);
        char gpath2[4200];
        snprintf(gpath2, sizeof gpath2, "%s/evil.graph", mc_test_tmpdir());
        snprintf(args, sizeof args, "import %s -o %s --quiet", path, gpath2);
        assert_int_equal(mc_test_minic(args, &out, &err), 0);
        free(out);
        free(err);
        char *etext = read_text(gpath2);
        if (!strstr(etext, "# onnx input x_output_y = 'x\\x0aoutput y'\n"))
            fail_msg("the name is not escaped:\n%s", etext);
        free(etext);
        snprintf(args, sizeof args, "check %s", gpath2); /* one output statement, still */
        assert_int_equal(mc_test_minic(args, &out, &err), 0);
        free(out);
        free(err);
    }
    /* an unsupported model: exit 1 with the list */
    buf g = {0}, nd = {0}, in = {0}, o2 = {0};
    node(&nd, "FancyOp", "x", NULL, "y");
    field_msg(&g, 1, &nd);
    value_info(&in, "x", 1, wd, 1);
    field_msg(&g, 11, &in);
    value_info(&o2, "y", 1, wd, 1);
    field_msg(&g, 12, &o2);
    model(&m, &g);
    write_model(path, &m);
    snprintf(args, sizeof args, "run %s --backend ref", path);
    assert_int_equal(mc_test_minic(args, &out, &err), 1);
    assert_non_null(strstr(err, "minic: unsupported: node y (FancyOp, opset 17): unknown operator"));
    free(out);
    free(err);
}

int main(void)
{
    if (skip_without_onnx())
        return 77;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_model_runs),
        cmocka_unit_test(test_initializer_used_twice),
        cmocka_unit_test(test_truncated_and_garbage),
        cmocka_unit_test(test_lying_sizes_and_huge_dims),
        cmocka_unit_test(test_deep_nesting),
        cmocka_unit_test(test_external_data),
        cmocka_unit_test(test_every_unsupported_node_listed),
        cmocka_unit_test(test_int64_and_double),
        cmocka_unit_test(test_rounding_edges),
        cmocka_unit_test(test_gather_runtime),
        cmocka_unit_test(test_symbolic_dims),
        cmocka_unit_test(test_dynamic_axes),
        cmocka_unit_test(test_dynamic_axes_cli),
        cmocka_unit_test(test_dynamic_axes_low_constant),
        cmocka_unit_test(test_dynamic_axes_size_as_tensor),
        cmocka_unit_test(test_dynamic_ops),
        cmocka_unit_test(test_cumsum_reverse_refused),
        cmocka_unit_test(test_gather_nd),
        cmocka_unit_test(test_cli),
    };
    return mc_test_run(tests);
}
