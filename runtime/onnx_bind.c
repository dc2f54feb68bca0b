/* The runtime's side of an imported ONNX model (frontend/onnx.c): binding its params' values
 * to a program, and writing them to a .safetensors file (`minic import --weights-out`). */
#include "frontend/onnx.h"
#include "runtime/runtime.h"

#include <stdlib.h>

mc_status mc_onnx_bind(const mc_onnx *m, mc_program *p)
{
    if (!m || !p)
        return mc_fail(MC_ERR_INPUT, "mc_onnx_bind: %s is NULL", m ? "program" : "model");
    for (int k = 0; k < m->nparams; k++) {
        mc_status st = mc_program_set(p, m->params[k].name, m->params[k].data, m->params[k].bytes);
        if (st != MC_OK)
            return st;
    }
    return MC_OK;
}

mc_status mc_onnx_save_weights(const mc_onnx *m, const char *path)
{
    if (!m || !path)
        return mc_fail(MC_ERR_INPUT, "mc_onnx_save_weights: %s is NULL", m ? "path" : "model");
    int n = m->nparams;
    const char **names = calloc((size_t)(n ? n : 1), sizeof *names);
    mc_array *arrays = calloc((size_t)(n ? n : 1), sizeof *arrays);
    mc_status st = MC_OK;
    if (!names || !arrays)
        st = mc_fail(MC_ERR_SYSTEM, "out of memory");
    for (int k = 0; k < n && st == MC_OK; k++) {
        const mc_onnx_tensor *t = &m->params[k];
        names[k] = t->name;
        arrays[k].dtype = t->dtype;
        arrays[k].rank = t->rank;
        for (int d = 0; d < t->rank; d++)
            arrays[k].shape[d] = t->shape[d];
        arrays[k].data = t->data;
        arrays[k].bytes = t->bytes;
    }
    if (st == MC_OK)
        st = mc_safetensors_write(path, names, arrays, n);
    free(names);
    free(arrays);
    return st;
}
