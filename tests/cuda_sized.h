/* A symbolic kernel list (compiled once: mc_compile_options.symbolic) bound to one binding and
 * planned and rendered for a CUDA target as the backend does when that binding runs
 * (mc_cuda_plan_program_sized), without a GPU. Header-only, included by tests/test_symbolic.c
 * and tests/test_cuda_compile.c. */
#ifndef MINIC_CUDA_SIZED_H
#define MINIC_CUDA_SIZED_H

#include <stdlib.h>

#include "backends/cuda/cuda.h"
#include "passes/passes.h"

/* The bound list (the caller frees it and *plans); *specialized and why as
 * mc_cuda_plan_program_sized says. Fails the test where the plan fails. */
static inline kir_program *cuda_plan_binding(const kir_program *sized, const int64_t *values, bool share,
                                             const mc_cuda_target *t, mc_cuda_kernel_plan **plans,
                                             int *specialized, char *why, size_t why_size)
{
    kir_program *kp = kir_bind(sized, values);
    assert_non_null(kp);
    mc_plan_memory(kp, share);
    int *align = calloc((size_t)kp->nbuffers + 1, sizeof(int));
    assert_non_null(align);
    mc_cuda_buffer_align(kp, align);
    if (mc_cuda_plan_program_sized(kp, sized, values, t, align, plans, specialized, why, why_size) != MC_OK)
        fail_msg("plan: %s", mc_error_message());
    free(align);
    return kp;
}

#endif
