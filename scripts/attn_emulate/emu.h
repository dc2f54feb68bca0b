// Host emulation of the CUDA subset the attention kernels use: one std thread per CUDA thread,
// shared memory as static locals (CTAs run one at a time), barriers for __syncthreads and shuffles.
#include <cmath>
#include <cstring>
#include <cstdint>
#include <pthread.h>
struct emu_dim3 { unsigned x, y, z; };
extern thread_local emu_dim3 threadIdx, blockIdx;
struct alignas(16) float4 { float x, y, z, w; };
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define MC_D static inline
inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
#define MC_INF __int_as_float(0x7f800000)
inline float mc_ld(float x) { return x; }
inline bool mc_ld(bool x) { return x; }
inline int mc_ld(int x) { return x; }
inline float mc_cvt_f32(float x) { return x; }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline long long min(int a, long long b) { return a < b ? a : b; }
inline long long max(int a, long long b) { return a > b ? a : b; }
extern pthread_barrier_t emu_cta;
extern pthread_barrier_t emu_warp[32];
extern float emu_x[32][32];
extern long emu_oob;
inline void __syncthreads() { pthread_barrier_wait(&emu_cta); }
inline float __shfl_xor_sync(unsigned mask, float v, int m)
{
    (void)mask;
    int t = (int)threadIdx.x, w = t / 32, l = t % 32;
    pthread_barrier_wait(&emu_warp[w]);
    emu_x[w][l] = v;
    pthread_barrier_wait(&emu_warp[w]);
    return emu_x[w][l ^ m];
}
MC_D void mc_cp16(void *dst, const void *src, int bytes) {
  if (bytes) memcpy(dst, src, 16); else memset(dst, 0, 16);
}
MC_D void mc_cp_commit() {}
MC_D void mc_cp_wait1() {}
