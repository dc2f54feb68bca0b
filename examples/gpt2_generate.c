/* examples/gpt2_generate.c: greedy decoding of a GPT-2 through minic's C API, with a KV cache.
 *
 * The model is the one bench/models/gpt2.py writes (Hugging Face's GPT2LMHeadModel: pre-LN
 * blocks, causal attention scaled by 1/sqrt(head size), gelu_tanh, ln_f, the LM head tied to the
 * token embedding), under the same param names (h0.ln_1.w, h0.attn.w, ..., ln_f.w, wte) plus the
 * position embedding `wpe` [positions, d_model], which that graph leaves out (it takes embeddings
 * in) and which gpt2.py writes beside the others. Token ids go in and come out as i32: there is
 * no tokenizer.
 *
 * Two programs, each compiled once:
 *   prefill  ids [B, T] (T = the prompt's length) -> the logits of the last position [B, vocab]
 *            and, per layer, the K and V caches [B, H, max_seq, D]: the prompt's keys and values
 *            at positions 0..T-1 (written with update at pos 0 into zeros);
 *   decode   ids [B, 1], pos (i32[]), the caches -> the logits [B, vocab] and the caches with
 *            this token's keys and values written at pos (update(cache, k, pos, axis=2)); its
 *            attention reads the cache through the mask le(iota(max_seq), pos), so one program
 *            serves every step (docs/FORMAT.md §2, update).
 * The next token is the argmax of the logits (the first on ties), taken in the graph: both
 * programs also output `next` [B, 1] (i32) and `history_out` [B, max_seq] (the ids so far:
 * prefill writes the prompt and its next id into zeros; a decode step writes its next id at
 * pos + 1 into its input `history`), and decode outputs `pos_next` = pos + 1. Prefill's caches,
 * next ids and history go to decode's inputs with mc_program_set_from_output (on cuda a copy on
 * the GPU, on ref and cpu between host arrays). Then every decode output that is the next
 * step's input is declared once with mc_program_feed_back: the caches, `history` and `pos` are
 * written in place (the step's update writes its token's keys and values into the cache input
 * itself), `ids` is copied on the device. Each step is queued with mc_program_run_async: on
 * cuda the host does not wait for the GPU between steps, nothing crosses to the host per step,
 * and the ids are read once at the end (mc_program_wait, then the history). --host-loop is the
 * loop as it was: the host reads the logits, takes their argmax, binds ids and pos, hands the
 * caches on with mc_program_set_from_output and waits for every step.
 *
 * Timing: with more than one decode step, the first is run and waited for alone and printed
 * apart ("first step"): a program's first run is its warm-up (on cuda: each kernel's first
 * launch, then the capture of the CUDA graph every later step replays), paid once like the
 * compile. "decode" is the steps after it (the steady state, as Hugging Face's time is taken
 * after a warm-up generate); the "first step" line also gives the mean with the first step in.
 *
 * --no-cache is the baseline and the check: every step runs a prefill program over the whole
 * sequence so far (compiled for each length) and takes its last row's argmax; tests/gpt2_generate.sh
 * checks that both give the same ids. Run with --help for the options.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "minic.h"

typedef struct {
    const char *weights;   /* .safetensors, or NULL: params from the seeded generator */
    const char *graphs;    /* --write-graphs: where the two graphs are written, or NULL */
    uint64_t seed;
    int layers, heads, dmodel, vocab, positions, max_seq, batch, new_tokens, threads;
    mc_dtype dtype;
    mc_options opt;
    bool no_cache, host_loop, quiet, notes;
    int32_t *prompt;
    int nprompt;
} config;

static const char usage[] =
    "usage: gpt2_generate --prompt ID,ID,... [options]\n"
    "\n"
    "Greedy decoding of a GPT-2 (bench/models/gpt2.py's model and param names) with a KV cache:\n"
    "one prefill program over the prompt, then one decode program run once per new token, each\n"
    "compiled once. Prints the generated ids and the tokens/s of prefill and decode.\n"
    "\n"
    "  --weights FILE     .safetensors with the params (h0.ln_1.w ... ln_f.b, wte [vocab, dmodel],\n"
    "                     wpe [positions, dmodel]) in --dtype; without it, params come from the\n"
    "                     seeded generator (--seed), as `minic run` makes them\n"
    "  --prompt IDS       comma-separated token ids in [0, vocab) (required)\n"
    "  --new N            tokens to generate (default 16); prompt length + N <= --max-seq\n"
    "  --max-seq N        the caches' length, the longest sequence (default 256; <= --positions)\n"
    "  --layers N         transformer blocks (default 12)\n"
    "  --heads N          attention heads (default 12); --dmodel must be a multiple\n"
    "  --dmodel N         model width (default 768)\n"
    "  --vocab N          vocabulary size (default 50257)\n"
    "  --positions N      rows of wpe (default 1024, GPT-2's n_positions)\n"
    "  --batch N          rows decoded at once, each from the same prompt (default 1)\n"
    "  --dtype D          f32 (default), f16 or bf16: the weights' and computation's dtype\n"
    "  --backend B        auto (default), cuda, cpu or ref\n"
    "  --threads N        CPU threads (default: one per core)\n"
    "  --no-fuse          one kernel per operator\n"
    "  --no-cache         no KV cache: every step runs the whole sequence again (a program per\n"
    "                     length, compiled as it is needed; not timed), the baseline and the check\n"
    "  --host-loop        the host takes each step's argmax from the logits, binds the ids and\n"
    "                     the position and hands the caches on after each step, waiting for\n"
    "                     it (the way before the decode step's loop stayed on the device; for\n"
    "                     comparison)\n"
    "  --seed N           seed of the generated params (default 0)\n"
    "  --write-graphs P   also write the two programs' graphs to P_prefill.graph and\n"
    "                     P_decode.graph (`minic dump`, `minic run --profile` read them;\n"
    "                     not with --no-cache)\n"
    "  --notes            also print the programs' notes (a backend fallen back to, a program\n"
    "                     that runs without a CUDA graph and why, compile progress)\n"
    "  --quiet            print the ids line only\n"
    "  --help             this text\n"
    "\n"
    "Exit status: 0 success, 1 a wrong option, prompt or weights file, 2 a failure of the system.\n";

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "gpt2_generate: error: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (gpt2_generate --help)\n");
    return 1;
}

static int api_fail(const char *what)
{
    fprintf(stderr, "gpt2_generate: error: %s: %s\n", what, mc_error_message());
    return mc_error_status() == MC_ERR_INPUT ? 1 : 2;
}

static bool parse_int(const char *s, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return false;
    *out = (int)v;
    return true;
}

static int parse_prompt(config *c, const char *s)
{
    size_t n = 1;
    for (const char *p = s; *p; p++)
        n += *p == ',';
    c->prompt = malloc(n * sizeof *c->prompt);
    if (!c->prompt) {
        fprintf(stderr, "gpt2_generate: error: out of memory\n");
        return 2;
    }
    c->nprompt = 0;
    const char *p = s;
    for (;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < 0 || v > INT32_MAX || (*end && *end != ','))
            return usage_error("--prompt: expected comma-separated token ids (integers >= 0), got '%s'", s);
        c->prompt[c->nprompt++] = (int32_t)v;
        if (!*end)
            break;
        p = end + 1;
    }
    return 0;
}

static int parse_args(config *c, int argc, char **argv)
{
    c->layers = 12, c->heads = 12, c->dmodel = 768, c->vocab = 50257, c->positions = 1024;
    c->max_seq = 256, c->batch = 1, c->new_tokens = 16, c->threads = 0, c->dtype = MC_F32;
    c->opt = mc_options_default();
    const char *prompt = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            exit(0);
        }
        if (!strcmp(a, "--no-fuse")) {
            c->opt.fuse = false;
            continue;
        }
        if (!strcmp(a, "--no-cache")) {
            c->no_cache = true;
            continue;
        }
        if (!strcmp(a, "--notes")) {
            c->notes = true;
            continue;
        }
        if (!strcmp(a, "--host-loop")) {
            c->host_loop = true;
            continue;
        }
        if (!strcmp(a, "--quiet")) {
            c->quiet = true;
            continue;
        }
        if (a[0] != '-' || a[1] != '-')
            return usage_error("unexpected argument '%s'", a);
        if (i + 1 >= argc)
            return usage_error("%s needs a value", a);
        const char *v = argv[++i];
        struct {
            const char *name;
            int *to;
            long lo, hi;
        } ints[] = {
            {"--layers", &c->layers, 1, 1000},      {"--heads", &c->heads, 1, 4096},
            {"--dmodel", &c->dmodel, 1, 1 << 20},   {"--vocab", &c->vocab, 1, INT32_MAX},
            {"--positions", &c->positions, 1, INT32_MAX}, {"--max-seq", &c->max_seq, 1, INT32_MAX},
            {"--batch", &c->batch, 1, 1 << 20},     {"--new", &c->new_tokens, 1, INT32_MAX},
            {"--threads", &c->threads, 0, 1024},
        };
        bool done = false;
        for (size_t k = 0; k < sizeof ints / sizeof ints[0] && !done; k++)
            if (!strcmp(a, ints[k].name)) {
                if (!parse_int(v, ints[k].lo, ints[k].hi, ints[k].to)) {
                    fprintf(stderr, "gpt2_generate: error: %s: expected an integer in [%ld, %ld], got '%s' "
                                    "(gpt2_generate --help)\n", a, ints[k].lo, ints[k].hi, v);
                    return 1;
                }
                done = true;
            }
        if (done)
            continue;
        if (!strcmp(a, "--weights")) {
            c->weights = v;
        } else if (!strcmp(a, "--write-graphs")) {
            c->graphs = v;
        } else if (!strcmp(a, "--prompt")) {
            prompt = v;
        } else if (!strcmp(a, "--seed")) {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            if (errno || end == v || *end || v[0] == '-')
                return usage_error("--seed: expected an integer >= 0, got '%s'", v);
            c->seed = s;
        } else if (!strcmp(a, "--dtype")) {
            if (!mc_dtype_parse(v, &c->dtype) || !(c->dtype == MC_F32 || c->dtype == MC_F16 || c->dtype == MC_BF16))
                return usage_error("--dtype: expected f32, f16 or bf16, got '%s'", v);
        } else if (!strcmp(a, "--backend")) {
            const mc_backend_kind kinds[] = {MC_BACKEND_AUTO, MC_BACKEND_CUDA, MC_BACKEND_CPU, MC_BACKEND_REF};
            bool known = false;
            for (int k = 0; k < 4; k++)
                if (!strcmp(v, mc_backend_name(kinds[k]))) {
                    c->opt.backend = kinds[k];
                    known = true;
                }
            if (!known)
                return usage_error("--backend: expected auto, cuda, cpu or ref, got '%s'", v);
        } else {
            return usage_error("unknown option '%s'", a);
        }
    }
    c->opt.threads = c->threads;
    c->opt.quiet = !c->notes;
    if (!prompt)
        return usage_error("%s", "--prompt is required");
    int rc = parse_prompt(c, prompt);
    if (rc)
        return rc;
    if (c->dmodel % c->heads)
        return usage_error("%s", "--dmodel must be a multiple of --heads");
    for (int i = 0; i < c->nprompt; i++)
        if (c->prompt[i] >= c->vocab) {
            fprintf(stderr, "gpt2_generate: error: --prompt: token id %" PRId32 " is outside [0, %d) (--vocab)\n",
                    c->prompt[i], c->vocab);
            return 1;
        }
    if (c->max_seq > c->positions) {
        fprintf(stderr, "gpt2_generate: error: --max-seq %d is more than the %d positions of wpe (--positions)\n",
                c->max_seq, c->positions);
        return 1;
    }
    if ((int64_t)c->nprompt + c->new_tokens > c->max_seq) {
        fprintf(stderr, "gpt2_generate: error: the prompt's %d tokens and %d new ones do not fit --max-seq %d\n",
                c->nprompt, c->new_tokens, c->max_seq);
        return 1;
    }
    return 0;
}

/* ---- the graphs ----------------------------------------------------------------------------- */

static mc_value param(mc_graph *g, const config *c, const char *layer, const char *name, int64_t d0, int64_t d1)
{
    char full[64];
    snprintf(full, sizeof full, "%s%s", layer, name);
    int64_t shape[2] = {d0, d1};
    return mc_param(g, full, c->dtype, shape, d1 ? 2 : 1);
}

static mc_value named(mc_graph *g, mc_value v, const char *fmt, int layer)
{
    char name[64];
    snprintf(name, sizeof name, fmt, layer);
    if (v >= 0 && mc_value_set_name(g, v, name) != MC_OK)
        return MC_ERROR;
    return v;
}

/* GPT-2 over T positions. decode: T = 1, inputs pos and each layer's caches, which this token's
 * keys and values are written into at pos, and attention over the cache masked to keys 0..pos.
 * Otherwise (prefill) causal attention over the T positions themselves; with caches, each
 * layer's keys and values are also returned written at 0 into zero caches of max_seq. Outputs:
 * the logits of the last position [B, vocab], then (caches) k and v of every layer. */
static mc_graph *build(const config *c, int64_t T, bool decode, bool caches)
{
    mc_graph *g = mc_graph_new(decode ? "gpt2_decode" : "gpt2_prefill");
    if (!g)
        return NULL;
    const int64_t B = c->batch, d = c->dmodel, H = c->heads, D = d / H, S = c->max_seq, V = c->vocab;
    const mc_dtype dt = c->dtype;
    mc_value ids = mc_input(g, "ids", MC_I32, (const int64_t[]){B, T}, 2);
    mc_value pos = decode ? mc_input(g, "pos", MC_I32, NULL, 0) : MC_NONE;
    mc_value history = decode ? mc_input(g, "history", MC_I32, (const int64_t[]){B, c->max_seq}, 2) : MC_NONE;
    mc_value *kc = calloc((size_t)c->layers * 2, sizeof *kc);
    mc_value *outs = calloc((size_t)c->layers * 2 + 4, sizeof *outs);
    if (!kc || !outs) {
        free(kc);
        free(outs);
        mc_graph_free(g);
        return NULL;
    }
    const int64_t cache_shape[4] = {B, H, S, D};
    for (int l = 0; decode && l < c->layers; l++) {
        char name[64];
        snprintf(name, sizeof name, "k_cache.%d", l);
        kc[2 * l] = mc_input(g, name, dt, cache_shape, 4);
        snprintf(name, sizeof name, "v_cache.%d", l);
        kc[2 * l + 1] = mc_input(g, name, dt, cache_shape, 4);
    }
    mc_value wte = param(g, c, "", "wte", V, d), wpe = param(g, c, "", "wpe", c->positions, d);
    /* token and position embeddings */
    mc_value x = mc_gather(g, wte, ids, 0); /* [B, T, d] */
    mc_value p = decode ? mc_gather(g, wpe, pos, 0) /* [d] */
                        : mc_gather(g, wpe, mc_iota(g, (const int64_t[]){T}, 1, 0, MC_I32), 0); /* [T, d] */
    x = mc_add(g, x, p);
    mc_value keep; /* which keys each query sees */
    if (decode)
        keep = mc_le(g, mc_iota(g, (const int64_t[]){1, S}, 2, 1, MC_I32), pos);
    else
        keep = mc_ge(g, mc_iota(g, (const int64_t[]){T, T}, 2, 0, MC_I32),
                     mc_iota(g, (const int64_t[]){T, T}, 2, 1, MC_I32));
    const double scale = 1.0 / sqrt((double)D);
    const int to_heads[4] = {0, 2, 1, 3}, to_keys_t[4] = {0, 1, 3, 2};
    for (int l = 0; l < c->layers; l++) {
        char h[16];
        snprintf(h, sizeof h, "h%d.", l);
        mc_value ln1w = param(g, c, h, "ln_1.w", d, 0), ln1b = param(g, c, h, "ln_1.b", d, 0);
        mc_value aw = param(g, c, h, "attn.w", 3 * d, d), ab = param(g, c, h, "attn.b", 3 * d, 0);
        mc_value pw = param(g, c, h, "proj.w", d, d), pb = param(g, c, h, "proj.b", d, 0);
        mc_value ln2w = param(g, c, h, "ln_2.w", d, 0), ln2b = param(g, c, h, "ln_2.b", d, 0);
        mc_value fw = param(g, c, h, "fc.w", 4 * d, d), fb = param(g, c, h, "fc.b", 4 * d, 0);
        mc_value ow = param(g, c, h, "out.w", d, 4 * d), ob = param(g, c, h, "out.b", d, 0);
        mc_value qkv = mc_linear(g, mc_layernorm(g, x, ln1w, ln1b, 1e-5), aw, ab); /* [B, T, 3d] */
        const int64_t split[4] = {B, T, H, D};
        mc_value q = mc_transpose(g, mc_reshape(g, mc_slice(g, qkv, 2, 0, d), split, 4), to_heads, 4);
        mc_value k = mc_transpose(g, mc_reshape(g, mc_slice(g, qkv, 2, d, 2 * d), split, 4), to_heads, 4);
        mc_value v = mc_transpose(g, mc_reshape(g, mc_slice(g, qkv, 2, 2 * d, 3 * d), split, 4), to_heads, 4);
        mc_value ka = k, va = v; /* the keys and values attention reads: [B, H, T or S, D] */
        if (decode) {
            ka = outs[1 + 2 * l] = mc_update(g, kc[2 * l], k, pos, 2);
            va = outs[2 + 2 * l] = mc_update(g, kc[2 * l + 1], v, pos, 2);
        } else if (caches) {
            mc_value zero = mc_full(g, cache_shape, 4, 0.0, dt), at0 = mc_scalar(g, 0.0, MC_I32);
            outs[1 + 2 * l] = mc_update(g, zero, k, at0, 2);
            outs[2 + 2 * l] = mc_update(g, zero, v, at0, 2);
        }
        if (caches) {
            outs[1 + 2 * l] = named(g, outs[1 + 2 * l], "k_out.%d", l);
            outs[2 + 2 * l] = named(g, outs[2 + 2 * l], "v_out.%d", l);
        }
        mc_value s = mc_mul(g, mc_matmul(g, q, mc_transpose(g, ka, to_keys_t, 4)), mc_scalar(g, scale, dt));
        s = mc_where(g, keep, s, mc_scalar(g, -INFINITY, dt));
        mc_value y = mc_matmul(g, mc_softmax(g, s, -1), va); /* [B, H, T, D] */
        y = mc_reshape(g, mc_transpose(g, y, to_heads, 4), (const int64_t[]){B, T, d}, 3);
        x = mc_add(g, x, mc_linear(g, y, pw, pb));
        mc_value f = mc_gelu_tanh(g, mc_linear(g, mc_layernorm(g, x, ln2w, ln2b, 1e-5), fw, fb));
        x = mc_add(g, x, mc_linear(g, f, ow, ob));
    }
    mc_value lnfw = param(g, c, "", "ln_f.w", d, 0), lnfb = param(g, c, "", "ln_f.b", d, 0);
    /* the LM head (tied to wte) on the last position only */
    mc_value last = mc_reshape(g, mc_slice(g, x, 1, T - 1, T), (const int64_t[]){B, d}, 2);
    outs[0] = named(g, mc_linear(g, mc_layernorm(g, last, lnfw, lnfb, 1e-5), wte, MC_NONE), "logits", 0);
    int nouts = caches ? 1 + 2 * c->layers : 1;
    if (caches) { /* the next ids on the GPU, and the ids so far written into history at their positions */
        mc_value next = named(g, mc_argmax(g, outs[0], 1, true), "next", 0); /* [B, 1] */
        outs[nouts++] = next;
        if (decode) {
            mc_value pos1 = named(g, mc_add(g, pos, mc_scalar(g, 1, MC_I32)), "pos_next", 0);
            outs[nouts++] = pos1;
            outs[nouts++] = named(g, mc_update(g, history, next, pos1, 1), "history_out", 0);
        } else {
            mc_value h = mc_update(g, mc_full(g, (const int64_t[]){B, S}, 2, 0, MC_I32), ids, mc_scalar(g, 0, MC_I32), 1);
            outs[nouts++] = named(g, mc_update(g, h, next, mc_scalar(g, (double)T, MC_I32), 1), "history_out", 0);
        }
    }
    mc_status st = mc_graph_set_outputs(g, outs, nouts);
    free(kc);
    free(outs);
    if (st != MC_OK) {
        mc_graph_free(g);
        return NULL;
    }
    return g;
}

/* ---- running -------------------------------------------------------------------------------- */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Compile the graph and, with load, bind its params from --weights (the caller generates them
 * otherwise); with --write-graphs and a role, write it first as PREFIX_ROLE.graph. */
static int compile(const config *c, mc_graph *g, const char *role, bool load, mc_program **out)
{
    if (!g)
        return api_fail("building the graph");
    if (c->graphs && role) {
        char path[4096];
        snprintf(path, sizeof path, "%s_%s.graph", c->graphs, role);
        FILE *f = fopen(path, "w");
        mc_status st = f ? mc_graph_print(g, f) : MC_ERR_INPUT;
        if (!f || fclose(f) != 0 || st != MC_OK) {
            fprintf(stderr, "gpt2_generate: error: cannot write %s\n", path);
            mc_graph_free(g);
            return 1;
        }
    }
    mc_status st = mc_program_compile(g, &c->opt, out);
    mc_graph_free(g);
    if (st != MC_OK)
        return api_fail("compiling");
    if (load && c->weights && mc_program_load_weights(*out, c->weights) != MC_OK)
        return api_fail(c->weights);
    return 0;
}

/* The argmax of each of the B rows of logits [B, V] (f32, f16 or bf16 bits): the first on ties,
 * a NaN above everything (as minic's argmax). */
static double element(const mc_tensor *t, int64_t i)
{
    if (t->dtype == MC_F32)
        return ((const float *)t->data)[i];
    uint16_t h = ((const uint16_t *)t->data)[i];
    if (t->dtype == MC_BF16) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    int e = (h >> 10) & 31, m = h & 1023; /* f16 */
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return h & 0x8000 ? -v : v;
}

static void argmax_rows(const mc_tensor *logits, int B, int V, int32_t *next)
{
    for (int b = 0; b < B; b++) {
        int best = 0;
        double bv = element(logits, (int64_t)b * V);
        for (int i = 1; i < V && !isnan(bv); i++) {
            double x = element(logits, (int64_t)b * V + i);
            if (x > bv || isnan(x)) {
                bv = x;
                best = i;
            }
        }
        next[b] = best;
    }
}

/* Run p after binding ids (B x T); its logits' argmax into next. */
static int run_step(mc_program *p, const int32_t *ids, size_t nids, int B, int V, int32_t *next)
{
    mc_tensor logits;
    if (mc_program_set(p, "ids", ids, nids * sizeof *ids) != MC_OK)
        return api_fail("binding ids");
    if (mc_program_run(p) != MC_OK)
        return api_fail("running");
    if (mc_program_output(p, 0, &logits) != MC_OK)
        return api_fail("reading the logits");
    argmax_rows(&logits, B, V, next);
    return 0;
}

/* Hand each cache output of `from` (outputs 1..2L) to `to`'s input of the same cache (from may
 * be to: a decode step's caches for its next step). */
static int pass_caches(const config *c, mc_program *from, mc_program *to)
{
    for (int i = 0; i < 2 * c->layers; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s_cache.%d", i % 2 ? "v" : "k", i / 2);
        if (mc_program_set_from_output(to, name, from, 1 + i) != MC_OK)
            return api_fail("passing the caches");
    }
    return 0;
}

int main(int argc, char **argv)
{
    config c;
    memset(&c, 0, sizeof c);
    int rc = parse_args(&c, argc, argv);
    if (rc) {
        free(c.prompt);
        return rc;
    }
    const int B = c.batch, T0 = c.nprompt, N = c.new_tokens, total = T0 + N;
    int32_t *seq = malloc((size_t)B * (size_t)total * sizeof *seq), *next = malloc((size_t)B * sizeof *next);
    mc_program *pre = NULL, *dec = NULL;
    char backend[16] = "";
    double t_compile = 0, t_prefill = 0, t_decode = 0, t_queue = -1; /* t_queue: the host's queueing */
    /* With a cache and more than one decode step, the first step is timed alone (t_first) and
     * t_decode holds the steps after it: a program's first run is its warm-up (on cuda: every
     * kernel's first launch, then the capture of the CUDA graph that the later steps replay),
     * a cost paid once, like the compile, and no part of a step in the steady state. */
    double t_first = -1;
    int timed_steps = N - 1;
    int shared = 0; /* params the decode program shares with the prefill program */
    int in_place_count = 0; /* decode outputs fed back in place (the rest: copied on the device) */
    if (!seq || !next) {
        fprintf(stderr, "gpt2_generate: error: out of memory\n");
        rc = 2;
        goto done;
    }
    /* seq: row b holds its tokens so far, B rows of `total` */
    for (int b = 0; b < B; b++)
        memcpy(seq + (size_t)b * total, c.prompt, (size_t)T0 * sizeof *seq);

    if (c.no_cache) { /* every step: the whole sequence so far, without a cache */
        for (int t = T0; t < total; t++) {
            double t0 = now();
            if ((rc = compile(&c, build(&c, t, false, false), NULL, true, &pre)))
                goto done;
            if (!c.weights && mc_program_fill_random(pre, c.seed) != MC_OK) {
                rc = api_fail("generating the params");
                goto done;
            }
            double t1 = now();
            int32_t *ids = malloc((size_t)B * (size_t)t * sizeof *ids);
            if (!ids) {
                rc = 2;
                goto done;
            }
            for (int b = 0; b < B; b++)
                memcpy(ids + (size_t)b * t, seq + (size_t)b * total, (size_t)t * sizeof *ids);
            rc = run_step(pre, ids, (size_t)B * t, B, c.vocab, next);
            free(ids);
            if (rc)
                goto done;
            double t2 = now();
            snprintf(backend, sizeof backend, "%s", mc_program_backend(pre));
            t_compile += t1 - t0;
            if (t == T0)
                t_prefill += t2 - t1;
            else
                t_decode += t2 - t1;
            for (int b = 0; b < B; b++)
                seq[(size_t)b * total + t] = next[b];
            mc_program_free(pre);
            pre = NULL;
        }
    } else {
        double t0 = now();
        if ((rc = compile(&c, build(&c, T0, false, true), "prefill", true, &pre)) ||
            (rc = compile(&c, build(&c, 1, true, true), "decode", false, &dec)))
            goto done;
        /* the prefill program's params (the file's, else generated), then the decode program's:
         * the same ones, shared (on ref and cpu the weights are held once; on cuda each program
         * has its own copy on the GPU, the file read once) */
        if (!c.weights && (mc_program_fill_random(pre, c.seed) != MC_OK)) {
            rc = api_fail("generating the params");
            goto done;
        }
        if (mc_program_share_params(dec, pre, &shared) != MC_OK) {
            rc = api_fail("sharing the params");
            goto done;
        }
        t_compile = now() - t0;
        snprintf(backend, sizeof backend, "%s", mc_program_backend(dec));
        t0 = now();
        int32_t *ids = malloc((size_t)B * (size_t)T0 * sizeof *ids); /* the prompt, B rows */
        if (!ids) {
            rc = 2;
            goto done;
        }
        for (int b = 0; b < B; b++)
            memcpy(ids + (size_t)b * T0, c.prompt, (size_t)T0 * sizeof *ids);
        const int L2 = 2 * c.layers, NEXT = 1 + L2; /* outputs: logits, the caches, next, ... */
        int32_t pos = T0;
        rc = run_step(pre, ids, (size_t)B * T0, B, c.vocab, next);
        free(ids);
        if (rc || (rc = pass_caches(&c, pre, dec)))
            goto done;
        /* decode's first ids, its ids so far and the position, from prefill's outputs */
        if (mc_program_set_from_output(dec, "ids", pre, NEXT) != MC_OK ||
            mc_program_set_from_output(dec, "history", pre, NEXT + 1) != MC_OK ||
            mc_program_set(dec, "pos", &pos, sizeof pos) != MC_OK) {
            rc = api_fail("passing the ids");
            goto done;
        }
        t_prefill = now() - t0;
        for (int b = 0; b < B; b++)
            seq[(size_t)b * total + T0] = next[b];
        t0 = now();
        if (c.host_loop) { /* the host's argmax and bindings each step, waiting for each */
            for (int t = T0 + 1; t < total; t++) { /* feed token t-1 at position t-1 */
                pos = t - 1;
                for (int b = 0; b < B; b++)
                    next[b] = seq[(size_t)b * total + t - 1];
                if (mc_program_set(dec, "pos", &pos, sizeof pos) != MC_OK) {
                    rc = api_fail("binding pos");
                    goto done;
                }
                if ((rc = run_step(dec, next, (size_t)B, B, c.vocab, next)) || (rc = pass_caches(&c, dec, dec)))
                    goto done;
                for (int b = 0; b < B; b++)
                    seq[(size_t)b * total + t] = next[b];
                if (t == T0 + 1 && N > 2) { /* the first step: the program's warm-up */
                    t_first = now() - t0;
                    timed_steps = N - 2;
                    t0 = now();
                }
            }
        } else {
            /* Each step's outputs become its next step's inputs on the device: the caches
             * (in place: the step writes its token's keys and values into them), the next ids
             * (the argmax of the logits), pos + 1 and the ids so far. A step is queued without
             * waiting for the one before; the ids are read once, at the end. */
            const struct {
                const char *input;
                int output;
            } fb[] = {{"ids", NEXT}, {"pos", NEXT + 1}, {"history", NEXT + 2}};
            for (int i = 0; i < L2 + 3; i++) {
                char name[64];
                snprintf(name, sizeof name, "%s_cache.%d", i % 2 ? "v" : "k", i / 2);
                bool in_place = false;
                if (mc_program_feed_back(dec, i < L2 ? name : fb[i - L2].input, i < L2 ? 1 + i : fb[i - L2].output,
                                         &in_place) != MC_OK) {
                    rc = api_fail("feeding the outputs back");
                    goto done;
                }
                in_place_count += in_place;
            }
            int t = T0 + 1;
            if (N > 2) { /* the first step alone, waited for: the program's warm-up */
                if (mc_program_run_async(dec) != MC_OK || mc_program_wait(dec) != MC_OK) {
                    rc = api_fail("running");
                    goto done;
                }
                t_first = now() - t0;
                timed_steps = N - 2;
                t++;
                t0 = now();
            }
            for (; t < total; t++)
                if (mc_program_run_async(dec) != MC_OK) {
                    rc = api_fail("running");
                    goto done;
                }
            t_queue = now() - t0;
            mc_program *last = N > 1 ? dec : pre; /* the history: prefill's if no step ran */
            int32_t *hist = malloc((size_t)B * (size_t)c.max_seq * sizeof *hist);
            if (!hist) {
                rc = 2;
                goto done;
            }
            if (mc_program_wait(dec) != MC_OK ||
                mc_program_read_output(last, N > 1 ? NEXT + 2 : NEXT + 1, hist,
                                       (size_t)B * (size_t)c.max_seq * sizeof *hist) != MC_OK) {
                free(hist);
                rc = api_fail("reading the ids");
                goto done;
            }
            for (int b = 0; b < B; b++)
                memcpy(seq + (size_t)b * total, hist + (size_t)b * c.max_seq, (size_t)total * sizeof *seq);
            free(hist);
        }
        t_decode = now() - t0;
    }

    printf("ids:");
    for (int t = T0; t < total; t++)
        printf("%s%" PRId32, t == T0 ? " " : ",", seq[t]);
    printf("\n");
    for (int b = 1; b < B; b++) /* rows with the same prompt give the same ids */
        if (memcmp(seq + (size_t)b * total, seq, (size_t)total * sizeof *seq) != 0)
            printf("row %d differs from row 0\n", b);
    if (!c.quiet) {
        printf("backend %s%s, %s, batch %d, %d layers, d %d, %d heads, vocab %d, prompt %d, new %d, max-seq %d%s\n",
               backend, c.opt.fuse ? "" : " (unfused)",
               mc_dtype_name(c.dtype), B, c.layers, c.dmodel, c.heads, c.vocab, T0, N, c.max_seq,
               c.no_cache ? ", no cache" : "");
        if (c.no_cache)
            printf("compile: %.1f ms (one program per length)\n", 1e3 * t_compile);
        else
            printf("compile: %.1f ms (two programs; %d params shared)\n", 1e3 * t_compile, shared);
        printf("prefill: %.2f ms, %.1f tokens/s (%d tokens)\n", 1e3 * t_prefill,
               t_prefill > 0 ? B * T0 / t_prefill : 0.0, B * T0);
        if (N > 1)
            printf("decode:  %.2f ms per step, %.1f tokens/s (%d steps of %d token%s%s)\n", 1e3 * t_decode / timed_steps,
                   t_decode > 0 ? B * timed_steps / t_decode : 0.0, timed_steps, B, B == 1 ? "" : "s",
                   t_first >= 0 ? ", after the first" : "");
        if (t_first >= 0)
            printf("first step: %.2f ms (the decode program's first run: its warm-up%s; with it, %.2f ms per step)\n",
                   1e3 * t_first, strcmp(backend, "cuda") == 0 ? " and the capture of its CUDA graph" : "",
                   1e3 * (t_first + t_decode) / (N - 1));
        if (!c.no_cache)
            printf("loop: %s\n", c.host_loop ? "on the host (argmax, ids and pos bound, caches handed on, each step waited for)"
                                              : "on the device");
        if (!c.no_cache && !c.host_loop) {
            printf("fed back: %d outputs, %d in place\n", 2 * c.layers + 3, in_place_count);
            if (N > 1) /* well below the step's time: the GPU sets the pace, the host waits for it */
                printf("host: %.3f ms per step to queue it\n", 1e3 * t_queue / timed_steps);
        }
        if (c.notes) /* what the library noted (a program running without a CUDA graph, ...) */
            printf("notes:\n%s%s", pre ? mc_program_notes(pre) : "", dec ? mc_program_notes(dec) : "");
    }
done:
    mc_program_free(pre);
    mc_program_free(dec);
    free(seq);
    free(next);
    free(c.prompt);
    return rc;
}
