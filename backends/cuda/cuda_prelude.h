/* The CUDA prelude: the device-side helpers every generated kernel starts with.
 *
 * ops.def gives each primitive a C expression over `a`, `b`, `c` that names mc_* helpers; this
 * is where those helpers live for CUDA, overloaded for float (f32, f16 and bf16 values are all
 * computed in float), int (i32) and, where it makes sense, bool. Storage types convert through
 * mc_ld (load: to float/int/bool) and mc_cvt_<dtype> (store: rounding to nearest even), and
 * mc_round_f16/bf16 implement a cast to a half type inside f32 arithmetic. The prelude is one C
 * string so that NVRTC gets it from memory; it is part of every kernel's source, so it is part
 * of every cache key, and editing it invalidates the cache by itself.
 */
#ifndef MINIC_CUDA_PRELUDE_H
#define MINIC_CUDA_PRELUDE_H

static const char mc_cuda_prelude[] =
    "#include <cuda_fp16.h>\n"
    "#include <cuda_bf16.h>\n"
    "#define MC_INF __int_as_float(0x7f800000)\n"
    "#define MC_NAN __int_as_float(0x7fc00000)\n"
    "#define MC_D __device__ __forceinline__\n"
    "template <typename T, int V> struct __align__(sizeof(T) * V) mc_vec { T x[V]; };\n"
    /* loads: storage -> arithmetic type */
    "MC_D float mc_ld(float x) { return x; }\n"
    "MC_D float mc_ld(__half x) { return __half2float(x); }\n"
    "MC_D float mc_ld(__nv_bfloat16 x) { return __bfloat162float(x); }\n"
    "MC_D int mc_ld(int x) { return x; }\n"
    "MC_D bool mc_ld(bool x) { return x; }\n"
    /* stores: arithmetic type -> storage, round to nearest even */
    "MC_D float mc_cvt_f32(float x) { return x; }\n"
    "MC_D __half mc_cvt_f16(float x) { return __float2half_rn(x); }\n"
    "MC_D __nv_bfloat16 mc_cvt_bf16(float x) { return __float2bfloat16_rn(x); }\n"
    "MC_D int mc_cvt_i32(int x) { return x; }\n"
    "MC_D bool mc_cvt_bool(bool x) { return x; }\n"
    /* a gather's index (kir.h): wrapped when negative; one outside [-n, n) records check + 1
     * and itself in err[0..1] (the first to get there) and reads index 0 */
    "MC_D long long mc_gather_index(int i, long long n, int *err, int check) {\n"
    "  long long w = i < 0 ? (long long)i + n : (long long)i;\n"
    "  if (w < 0 || w >= n) {\n"
    "    if (atomicCAS(err, 0, check) == 0) err[1] = i;\n"
    "    w = 0;\n"
    "  }\n"
    "  return w;\n"
    "}\n"
    /* casts */
    "MC_D float mc_round_f16(float x) { return __half2float(__float2half_rn(x)); }\n"
    "MC_D float mc_round_bf16(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }\n"
    /* a half-typed value that is not stored: f32 precision, the half type's range */
    "MC_D float mc_sat_f16(float x) { return fabsf(x) >= 65520.0f ? copysignf(MC_INF, x) : x; }\n"
    "MC_D float mc_sat_bf16(float x) {\n"
    "  return fabsf(x) >= 0x1.ffp127f ? copysignf(MC_INF, x) : x;\n"
    "}\n"
    "MC_D int mc_f2i(float x) {\n"
    "  if (x != x) return 0;\n"
    "  if (x >= 2147483647.0f) return 2147483647;\n"
    "  if (x <= -2147483648.0f) return (-2147483647 - 1);\n"
    "  return (int)x;\n"
    "}\n"
    /* float unary: accurate library functions (no fast-math), as the f32 tolerance needs */
    "MC_D float mc_abs(float a) { return fabsf(a); }\n"
    "MC_D int mc_abs(int a) { return a < 0 ? (int)(0u - (unsigned)a) : a; }\n"
    "MC_D float mc_exp(float a) { return expf(a); }\n"
    "MC_D float mc_log(float a) { return logf(a); }\n"
    "MC_D float mc_sqrt(float a) { return sqrtf(a); }\n"
    "MC_D float mc_rsqrt(float a) { return 1.0f / sqrtf(a); }\n"
    /* Division: CUDA's IEEE quotient leaves its fast path for zero or subnormal dividends
     * (softmax's underflowed exponentials: measured 2.7x slower); a * (1/b) with the correctly
     * rounded reciprocal is within about 1 ulp of it wherever b is a moderate normal number. */
    "MC_D float mc_recip(float a) { return __frcp_rn(a); }\n"
    "MC_D float mc_tanh(float a) { return tanhf(a); }\n"
    "MC_D float mc_sigmoid(float a) { return __frcp_rn(1.0f + expf(-a)); }\n"
    "MC_D float mc_relu(float a) { return a > 0.0f ? a : (a != a ? a : 0.0f); }\n"
    "MC_D float mc_gelu(float a) { return 0.5f * a * (1.0f + erff(a * 0.70710678118654752f)); }\n"
    "MC_D float mc_gelu_tanh(float a) {\n"
    "  return 0.5f * a * (1.0f + tanhf(0.79788456080286536f * (a + 0.044715f * a * a * a)));\n"
    "}\n"
    "MC_D float mc_silu(float a) { return a * __frcp_rn(1.0f + expf(-a)); }\n"
    "MC_D float mc_sin(float a) { return sinf(a); }\n"
    "MC_D float mc_cos(float a) { return cosf(a); }\n"
    "MC_D float mc_erf(float a) { return erff(a); }\n"
    "MC_D float mc_floor(float a) { return floorf(a); }\n"
    "MC_D float mc_ceil(float a) { return ceilf(a); }\n"
    "MC_D float mc_round(float a) { return rintf(a); }\n" /* half to even */
    "MC_D float mc_sign(float a) { return a > 0.0f ? 1.0f : (a < 0.0f ? -1.0f : a); }\n"
    "MC_D int mc_sign(int a) { return a > 0 ? 1 : (a < 0 ? -1 : 0); }\n"
    "MC_D float mc_softplus(float a) { return fmaxf(a, 0.0f) + log1pf(expf(-fabsf(a))); }\n"
    /* binary */
    "MC_D float mc_div(float a, float b) {\n"
    "  const float m = fabsf(b);\n"
    "  return (m > 1e-30f && m < 1e30f) ? a * __frcp_rn(b) : a / b;\n"
    "}\n"
    /* i32 division truncates; x / 0 is 0 and INT_MIN / -1 wraps, as the reference defines */
    "MC_D int mc_div(int a, int b) {\n"
    "  if (b == 0) return 0;\n"
    "  return (int)(unsigned)((long long)a / (long long)b);\n"
    "}\n"
    "MC_D float mc_pow(float a, float b) { return powf(a, b); }\n"
    "MC_D int mc_pow(int a, int b) {\n"
    "  double r = pow((double)a, (double)b);\n"
    "  if (r != r) return 0;\n"
    "  if (r >= 2147483647.0) return 2147483647;\n"
    "  if (r <= -2147483648.0) return (-2147483647 - 1);\n"
    "  return (int)r;\n"
    "}\n"
    "MC_D float mc_maximum(float a, float b) { return (a > b || a != a) ? a : b; }\n"
    "MC_D float mc_minimum(float a, float b) { return (a < b || a != a) ? a : b; }\n"
    "MC_D int mc_maximum(int a, int b) { return a > b ? a : b; }\n"
    "MC_D int mc_minimum(int a, int b) { return a < b ? a : b; }\n"
    /* warp reductions (every lane gets the result) */
    "MC_D float mc_warp_sum(float v) {\n"
    "  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n"
    "  return v;\n"
    "}\n"
    "MC_D int mc_warp_sum(int v) {\n"
    "  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n"
    "  return v;\n"
    "}\n"
    "template <typename T> MC_D T mc_warp_max(T v) {\n"
    "  for (int o = 16; o > 0; o >>= 1) v = mc_maximum(v, __shfl_xor_sync(0xffffffffu, v, o));\n"
    "  return v;\n"
    "}\n"
    "template <typename T> MC_D T mc_warp_min(T v) {\n"
    "  for (int o = 16; o > 0; o >>= 1) v = mc_minimum(v, __shfl_xor_sync(0xffffffffu, v, o));\n"
    "  return v;\n"
    "}\n"
    "MC_D float mc_red_sum(float a, float b) { return a + b; }\n"
    "MC_D int mc_red_sum(int a, int b) { return a + b; }\n"
    "MC_D float mc_red_max(float a, float b) { return mc_maximum(a, b); }\n"
    "MC_D int mc_red_max(int a, int b) { return mc_maximum(a, b); }\n"
    "MC_D float mc_red_min(float a, float b) { return mc_minimum(a, b); }\n"
    "MC_D int mc_red_min(int a, int b) { return mc_minimum(a, b); }\n";

/* Tensor-core helpers (sm_80 and later) for the kernels that use mma.sync: flash attention
 * (cuda_attention.c) and the implicit-GEMM conv (cuda_render.c). The kernel defines MC_T2 (the
 * two-element vector of its 16-bit type), MC_PACK (two floats into one) and MC_PTX ("f16" or
 * "bf16") first. mc_mma: D += A B, m16n8k16, f32 accumulators; mc_ldsm4 / mc_ldsm4t: four 8x8
 * matrices of 16-bit elements from shared memory (ldmatrix, plain and transposed). */
static const char mc_cuda_mma_helpers[] =
    "MC_D unsigned mc_pack2(float lo, float hi) {\n"
    "  MC_T2 h = MC_PACK(lo, hi);\n"
    "  return *reinterpret_cast<unsigned *>(&h);\n"
    "}\n"
    "MC_D void mc_mma(float *d, const unsigned *a, unsigned b0, unsigned b1) {\n"
    "  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.\" MC_PTX \".\" MC_PTX \".f32 {%0, %1, %2, %3}, \"\n"
    "               \"{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\\n\"\n"
    "               : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])\n"
    "               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b0), \"r\"(b1));\n"
    "}\n"
    "MC_D void mc_ldsm4(unsigned *r, const void *p) {\n"
    "  const unsigned s = (unsigned)__cvta_generic_to_shared(p);\n"
    "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\\n\"\n"
    "               : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(s));\n"
    "}\n"
    "MC_D void mc_ldsm4t(unsigned *r, const void *p) {\n"
    "  const unsigned s = (unsigned)__cvta_generic_to_shared(p);\n"
    "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\\n\"\n"
    "               : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(s));\n"
    "}\n";

/* cp.async (sm_80 and later): 16 bytes from global to shared memory, zeros where bytes is 0 */
static const char mc_cuda_cp_helpers[] =
    "MC_D void mc_cp16(void *dst, const void *src, int bytes) {\n"
    "  const unsigned s = (unsigned)__cvta_generic_to_shared(dst);\n"
    "  asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\\n\" :: \"r\"(s), \"l\"(src), \"r\"(bytes));\n"
    "}\n"
    "MC_D void mc_cp_commit() { asm volatile(\"cp.async.commit_group;\\n\" ::); }\n"
    "MC_D void mc_cp_wait1() { asm volatile(\"cp.async.wait_group 1;\\n\" ::: \"memory\"); }\n";

#endif
