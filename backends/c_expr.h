/* C-like rendering of kernel IR values, shared by every backend that emits C-family source.
 *
 * A backend that generates C or CUDA C needs the same three things for each instruction: the
 * arithmetic type of a dtype, a literal for a constant, and the expression of an operator over
 * its operands (ops.def's `expr`, with `a`, `b`, `c` substituted, or a cast rendered per dtype
 * pair). Those live here, over a growable string buffer; what differs between backends (names
 * of storage types, how an index is computed, the kernel's signature) stays in each backend.
 * The mc_* helpers the expressions name must be defined by the backend's prelude
 * (backends/cuda/cuda_prelude.h for CUDA).
 */
#ifndef MINIC_C_EXPR_H
#define MINIC_C_EXPR_H

#include "kir/kir.h"

#include <stdarg.h>

/* The arithmetic type a value of dtype d is computed in: "float", "int" or "bool". */
const char *mc_c_arith_type(mc_dtype d);
/* A literal of `value` as dtype d (MC_INF / MC_NAN for non-finite floats). */
void mc_c_literal(mc_strbuf *sb, double value, mc_dtype d);
/* Writes the name of instruction `instr`'s value as the backend declared it ("v12", "v12_3"). */
typedef void (*mc_c_operand_fn)(mc_strbuf *sb, int instr, void *ctx);
/* The expression of KI_OP instruction `ins`, each operand written by `operand`. Fails (false)
 * only for an operator without an expression, which the passes never emit. */
bool mc_c_op_expr(mc_strbuf *sb, const kir_kernel *k, const kir_instr *ins,
                  mc_c_operand_fn operand, void *ctx);
/* The conversion of expression `x` (arithmetic type of `from`) to dtype `to`'s arithmetic type,
 * rounding to f16/bf16 precision when `to` is one of them. */
void mc_c_cast_expr(mc_strbuf *sb, mc_dtype from, mc_dtype to, const char *x);

#endif
