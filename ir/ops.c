/* The operator table, expanded from ir/ops.def. */
#include "ir/ir.h"

#include <string.h>

const mc_op_info mc_op_table[MC_NUM_OPS] = {
#define X(id, name, kind, min_in, max_in, flops, expr) [MC_OP_##id] = {name, kind, min_in, max_in, flops, expr},
#include "ir/ops.def"
#undef X
};

bool mc_op_parse(const char *name, size_t len, mc_op *out)
{
    for (int i = 0; i < MC_NUM_OPS; i++) {
        const char *n = mc_op_table[i].name;
        if (mc_op_table[i].kind == MC_KIND_LEAF)
            continue; /* input/param/const are statements, not operators */
        if (strlen(n) == len && memcmp(n, name, len) == 0) {
            *out = (mc_op)i;
            return true;
        }
    }
    return false;
}

bool mc_op_is_composite(mc_op op)
{
    return op == MC_OP_SOFTMAX || op == MC_OP_LOG_SOFTMAX || op == MC_OP_LAYERNORM ||
           op == MC_OP_RMSNORM || op == MC_OP_LINEAR || op == MC_OP_MEAN;
}
