/* The minic command's internals, shared by tools/minic.c (arguments, help, errors) and
 * tools/commands.c (what each subcommand does). */
#ifndef MINIC_CLI_H
#define MINIC_CLI_H

#include "minic.h"

typedef struct cli_input {
    const char *name; /* --input NAME=FILE (.npy, or .safetensors: its tensor NAME) */
    const char *path;
} cli_input;

typedef struct cli_args {
    const char *command;      /* "run", "bench", "check", "dump" */
    const char *graph_path;   /* MODEL.graph */
    mc_options opt;           /* --backend, --no-fuse, --no-plan, --cuda-graph, --tf32, ... */
    const char *weights;      /* --weights FILE.safetensors, or NULL */
    cli_input *inputs;        /* --input, in the order given */
    int ninputs;
    uint64_t seed;            /* --seed (default 0) */
    const char *output;       /* --output FILE, or NULL */
    const char *save_inputs;  /* --save-inputs FILE.safetensors, or NULL */
    int iters;                /* --iters N; 0 when not given */
    bool profile;             /* --profile */
    bool verbose;             /* --verbose: where the time to the first result went */
    const char *profile_json; /* --profile-json FILE, or NULL */
    const char *trace;        /* --trace FILE.json, or NULL */
    const char *roofline;     /* --roofline FILE.svg, or NULL */
    const char *stage;        /* dump --stage (default "ir") */
    bool f64_as_f32;          /* --f64-as-f32 (ONNX models) */
    mc_onnx_dim *dims;        /* --dim NAME=SIZE (ONNX models' dim_params), in the order given */
    int ndims;
    const char *out_graph;    /* import -o OUT.graph */
    const char *weights_out;  /* import --weights-out W.safetensors */
} cli_args;

/* Exit codes (docs/FORMAT.md §3). */
enum { CLI_OK = 0, CLI_USER = 1, CLI_SYSTEM = 2 };

/* Print the library's last error (as `FILE:LINE:COL: error: ...` when it is about a place in a
 * graph file, else `minic: error: ...`) and return the exit code for status. */
int cli_library_error(mc_status status);
/* Print `minic: error: ...` and return code. */
int cli_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int cli_run(const cli_args *a);
int cli_bench(const cli_args *a);
int cli_peaks(int argc, char **argv); /* tools/peaks_cmd.c: minic peaks */
int cli_ops(int argc, char **argv);   /* tools/ops_cmd.c: minic ops */
int cli_cache(int argc, char **argv); /* tools/cache_cmd.c: minic cache info|clear */
int cli_check(const cli_args *a);
int cli_dump(const cli_args *a);
int cli_import(const cli_args *a); /* minic import MODEL.onnx -o OUT.graph */

#endif
