/* The host communicator: what the ranks of a tensor-parallel program (runtime/parallel.c), each
 * run on a thread of its own, use to meet and to sum their partial values (KIR_COLLECTIVE on
 * the ref and cpu backends).
 *
 * It lives on the backends' floor, not the runtime's, because the backends call it while they
 * run a kernel and includes only run downward; the runtime creates it, one per parallel
 * program, and hands it to every rank (mc_program.comm).
 *
 * Every rank calls the same collectives in the same order. mc_comm_allreduce gives every rank
 * the same result, bit for bit: the sum over ranks 0, 1, .., n-1 in that order, accumulated in
 * f32 for f32, f16 and bf16 (each rank's value converted, the sum rounded once to the dtype
 * when stored), in i32 for i32. A rank that fails calls mc_comm_abort so that the others,
 * waiting for it, return an error instead of waiting forever; mc_comm_reset makes the
 * communicator usable again once every rank has returned.
 */
#ifndef MINIC_COMM_H
#define MINIC_COMM_H

#include "ir/ir.h"

typedef struct mc_comm mc_comm;

/* A communicator for n ranks (n >= 1). MC_ERR_SYSTEM when out of memory. */
mc_status mc_comm_new(int n, mc_comm **out);
void mc_comm_free(mc_comm *c);
int mc_comm_size(const mc_comm *c);
/* Wait until every rank has called it. MC_ERR_SYSTEM when the communicator was aborted. */
mc_status mc_comm_barrier(mc_comm *c, int rank);
/* out[i] = sum over ranks r in order of rank r's in[i], i < count, on every rank. in and out
 * are rank's own arrays of dtype `dtype`; they may be the same array (in place), never partly
 * overlapping ones. Each rank sums a share of the elements for everyone, so the work is split
 * over the ranks' threads. MC_ERR_SYSTEM when aborted; MC_ERR_INPUT for bool (nothing to sum)
 * or when the ranks disagree on count or dtype (a bug of the caller: every rank is told). */
mc_status mc_comm_allreduce(mc_comm *c, int rank, const void *in, void *out, int64_t count,
                            mc_dtype dtype);
/* Wake every rank that waits, and make every collective fail until mc_comm_reset. */
void mc_comm_abort(mc_comm *c);
bool mc_comm_aborted(mc_comm *c);
/* Make an aborted communicator usable again. Only while no rank is inside a collective. */
void mc_comm_reset(mc_comm *c);

#endif
