/* The ONNX front end's internal interface (frontend/onnx.c; docs/FORMAT.md §7).
 *
 * An imported model is a graph built through the same builder as the C API, the values of its
 * params (the model's initializers and the constants that became params), and the names: every
 * input, param and output keeps its ONNX name beside the minic name it was given. The public
 * face is include/minic.h's mc_onnx_*; tests (tests/onnx_node/) read the input order and the
 * tensor files of ONNX's node tests through the functions here.
 */
#ifndef MINIC_FRONTEND_ONNX_H
#define MINIC_FRONTEND_ONNX_H

#include "ir/ir.h"

typedef struct mc_onnx_tensor {
    const char *name;      /* minic's name of the param (or input) */
    const char *onnx_name; /* the model's name */
    mc_dtype dtype;
    int rank;
    int64_t shape[MC_MAX_RANK];
    void *data;            /* host memory of the dtype, bytes long; owned by the model */
    size_t bytes;
    int position;          /* inputs: the place among the graph's inputs that are not
                              initializers (input_<position>.pb of a node test) */
} mc_onnx_tensor;

struct mc_onnx {
    mc_graph *graph;
    mc_onnx_tensor *params; /* every param of graph with its value */
    int nparams, cap_params;
    mc_onnx_tensor *inputs; /* the graph's inputs in the model's order (data NULL) */
    int ninputs, cap_inputs;
    const char **out_onnx;  /* the outputs' ONNX names, in order (graph->outputs) */
    int noutputs;
    mc_arena arena;         /* names */
};

/* Read one TensorProto file (ONNX's node tests keep inputs and outputs so: input_0.pb, ...)
 * into host memory as minic's dtype (INT64 and the small integers narrowed to i32 with a range
 * check, DOUBLE to f32 when f64_as_f32). On success *data is malloc'ed (the caller frees it). */
mc_status mc_onnx_read_tensor_file(const char *path, bool f64_as_f32, mc_onnx_tensor *out);

/* mc_onnx_load, where the values of some graph inputs are known at import time: frozen[k] is
 * the TensorProto file of the k-th graph input that is not an initializer (NULL: none). Such an
 * input becomes a constant when it decides a shape: when it reaches, directly or through shape
 * arithmetic (Cast, Add, Concat, ...), an operand the importer needs as a constant (a shape,
 * axes, split sizes, slice bounds, a range's bounds, pads, a Compress condition). ONNX's node
 * tests pass those as inputs; minic compiles for fixed shapes. Other inputs stay inputs (m->inputs, with their positions). */
mc_status mc_onnx_load_frozen(const char *path, unsigned flags, mc_note_fn note, void *note_ctx,
                              const char *const *frozen, int nfrozen, mc_onnx **out);

#endif
