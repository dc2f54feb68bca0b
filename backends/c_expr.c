/* C-like rendering of kernel IR values (see c_expr.h): types, literals, operator expressions.
 *
 * Operator expressions come from ops.def, so adding an operator there with an expression and
 * a prelude helper is all a C-family backend needs. Substitution is textual but exact: `a`,
 * `b` and `c` are replaced only where they stand alone (not inside an identifier such as
 * mc_abs), and each operand is parenthesized by the expression itself.
 */
#include "backends/c_expr.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *mc_c_arith_type(mc_dtype d)
{
    switch (d) {
    case MC_I32:
        return "int";
    case MC_BOOL:
        return "bool";
    default:
        return "float";
    }
}

void mc_c_literal(mc_strbuf *sb, double value, mc_dtype d)
{
    if (d == MC_BOOL) {
        mc_sb_puts(sb, value != 0 ? "true" : "false");
    } else if (d == MC_I32) {
        double r = mc_round_to_dtype(value, MC_I32);
        if (r <= -2147483648.0)
            mc_sb_puts(sb, "(-2147483647 - 1)");
        else
            mc_sb_printf(sb, "%d", (int)r);
    } else if (isnan(value)) {
        mc_sb_puts(sb, "MC_NAN");
    } else if (isinf(value)) {
        mc_sb_puts(sb, value > 0 ? "MC_INF" : "(-MC_INF)");
    } else {
        /* Hexadecimal floats are exact; the value is what the graph's dtype holds. */
        float f = (float)mc_round_to_dtype(value, d);
        mc_sb_printf(sb, "%af", (double)f);
    }
}

void mc_c_cast_expr(mc_strbuf *sb, mc_dtype from, mc_dtype to, const char *x)
{
    bool ffrom = mc_dtype_is_float(from), fto = mc_dtype_is_float(to);
    if (to == MC_BOOL) {
        if (from == MC_BOOL)
            mc_sb_printf(sb, "(%s)", x);
        else
            mc_sb_printf(sb, "((%s) != 0)", x);
        return;
    }
    if (to == MC_I32) {
        if (ffrom)
            mc_sb_printf(sb, "mc_f2i(%s)", x);
        else
            mc_sb_printf(sb, "((int)(%s))", x);
        return;
    }
    /* float targets: convert, then round to the target's precision */
    const char *round = to == MC_F16 ? "mc_round_f16" : to == MC_BF16 ? "mc_round_bf16" : "";
    if (!ffrom)
        mc_sb_printf(sb, "%s((float)(%s))", round, x);
    else if (from == to || to == MC_F32)
        mc_sb_printf(sb, "(%s)", x);
    else
        mc_sb_printf(sb, "%s(%s)", round, x);
    (void)fto;
}

static bool is_ident_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

bool mc_c_op_expr(mc_strbuf *sb, const kir_kernel *k, const kir_instr *ins,
                  mc_c_operand_fn operand, void *ctx)
{
    if (ins->op == MC_OP_CAST) {
        mc_strbuf x = {0};
        operand(&x, ins->arg[0], ctx);
        if (x.oom) {
            sb->oom = true;
        } else {
            mc_c_cast_expr(sb, k->code[ins->arg[0]].dtype, ins->dtype, x.data);
        }
        mc_sb_free(&x);
        return true;
    }
    if ((int)ins->op < 0 || ins->op >= MC_NUM_OPS)
        return false;
    const char *e = mc_op_table[ins->op].expr;
    if (!e)
        return false;
    for (size_t i = 0; e[i]; i++) {
        char c = e[i];
        bool alone = (c == 'a' || c == 'b' || c == 'c') && (i == 0 || !is_ident_char(e[i - 1])) &&
                     !is_ident_char(e[i + 1]);
        if (alone)
            operand(sb, ins->arg[c - 'a'], ctx);
        else
            mc_sb_printf(sb, "%c", c);
    }
    return true;
}
