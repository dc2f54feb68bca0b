/* A compiled program's profile (docs/FORMAT.md §5): per kernel, what it computes (from the kernel
 * IR: name, category, the user's operators and lines, FLOPs and bytes from kir_count), how long
 * it ran (from the backend, where it can time kernels), and the totals.
 *
 * The counts never come from the backend: they are read off the kernel IR, so every backend
 * reports the same FLOPs and bytes for the same kernel list. Times come from the backend's
 * optional `profile` slot (runtime.h), which fills `time_us` and `launches` per kernel and the
 * device's name and peaks; a backend without it still gets the counts, the wall time of a whole
 * execution and the totals, with the kernel times shown as not measured (never as zero).
 *
 * Rates and percentages are derived when the report is printed, from the times and the peaks,
 * so there is one place (mc_profile_kernel_rates) where "achieved" is defined.
 */
#ifndef MINIC_PROFILE_H
#define MINIC_PROFILE_H

#include "runtime/runtime.h"

/* Per-kernel rates derived from a profile (all 0 where the inputs are unknown). */
typedef struct mc_kernel_rates {
    double flops_per_s, bytes_per_s;
    double pct_peak_flops, pct_peak_bw;
    double intensity;          /* FLOPs per byte moved */
    const char *bound;         /* "memory", "compute", "latency", "link" (a collective), or
                                  "unknown" */
    /* A collective (KIR_COLLECTIVE) kernel, as NCCL's tests define them: the bytes of the buffer
     * reduced (count x element size), algbw = those bytes / time, busbw = algbw x 2(n-1)/n for
     * n ranks (the traffic of a ring all-reduce on each link; 0 for one rank). 0 elsewhere. */
    int64_t coll_bytes;
    int ranks;
    double algbw, busbw;       /* bytes/s */
} mc_kernel_rates;

/* Allocate the per-kernel arrays for p's kernels, counts filled (kir_count), times unknown. */
mc_status mc_profile_init(mc_profile *prof, const mc_program *p);
void mc_profile_release(mc_profile *prof);
/* Run p `iters` times after a warm-up: wall time per execution on the host clock, and the
 * backend's per-kernel times where it has a `profile` slot. */
mc_status mc_profile_collect(mc_program *p, int iters, mc_profile *prof);
mc_kernel_rates mc_profile_kernel_rates(const mc_profile *prof, int kernel);
/* The memory ceiling kernel k is held to: on the CPU the copy bandwidth measured at the smallest
 * working set that holds its bytes (its data stays in the caches), else the DRAM copy peak
 * (prof->peak_bytes_per_s). `size` (may be NULL) gets that working set, 0 for DRAM. */
double mc_profile_bw_peak(const mc_profile *prof, int kernel, int64_t *size);
/* Total bytes of the program's memory: inputs, params, outputs and the planned arena. */
int64_t mc_profile_peak_memory(const mc_program *p);
/* The table of docs/FORMAT.md §5 (kernels sorted by time where measured, else in program order) */
void mc_profile_print(const mc_profile *prof, FILE *out);
/* docs/FORMAT.md §5's JSON object, written to a temporary name and renamed. */
mc_status mc_profile_write_json(const mc_profile *prof, const char *path);
/* A Chrome/Perfetto trace (chrome://tracing, ui.perfetto.dev) on one time line from the start
 * of the first measured run: a lane with one event per measured run and device lanes with every
 * kernel of every run at its real timestamps (mc_profile_lanes: kernels that overlap go to a
 * lane of their own), otherData naming the clocks; where the backend gave no timestamps, one
 * run of median times laid end to end, every event marked "synthetic". Written to a temporary
 * name and renamed. */
mc_status mc_profile_write_trace(const mc_profile *prof, const char *path);
/* The trace's lanes: lane[e] for each of n events (times in µs), so that no two events of one
 * lane overlap. Events are taken in start order (ties: the longer first, so a kernel that
 * contains another keeps the lower lane); each goes to the lowest lane whose last event has
 * ended by its start (an event that starts exactly where another ends shares its lane). One
 * stream of kernels one after the other is one lane however large its gaps; kernels of
 * concurrent streams that really overlap get lanes 1, 2, .... Returns the number of lanes (0
 * for no events), or -1 when out of memory. */
int mc_profile_lanes(const mc_profile_event *ev, int n, int *lane);
/* The grouped view: group[k] = the first kernel of k's group, kernels being grouped when they
 * are the same code on the same shapes (a repeated layer: the same name up to its trailing
 * "_N", category, operators, FLOPs and bytes). */
void mc_profile_group_of(const mc_profile *prof, int *group);
/* The length of a kernel name without its trailing "_<digits>". */
size_t mc_profile_base_name_len(const char *name);
/* An SVG roofline (runtime/roofline.c): log-log FLOP/s against FLOP/byte, each distinct
 * compute roof and the memory slope labelled with value and unit, every timed kernel a point
 * whose colour and marker shape are its group's (a repeated layer shares one), numbered
 * labels placed where they overlap nothing, and a legend. */
mc_status mc_profile_write_roofline(const mc_profile *prof, const char *path);

#endif
