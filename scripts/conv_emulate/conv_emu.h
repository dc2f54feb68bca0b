// Host emulation of what the implicit-GEMM conv kernel uses beyond the attention kernels' subset
// (../attn_emulate/emu.h): f16/bf16 storage types and the prelude's conversions, the vector
// structs, ldmatrix (x4, plain and transposed) and mma.sync m16n8k16 as warp-wide exchanges
// (each lane publishes its operands, a warp barrier, each lane computes its own part from all
// of them, a barrier again). Fragment layouts as PTX's ISA gives them for m16n8k16 .row.col.
#include "emu.h"
#define __restrict__
struct alignas(16) int4 { int x, y, z, w; };
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
struct alignas(8) uint2 { unsigned x, y; };
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
struct alignas(16) uint4 { unsigned x, y, z, w; };
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
// the result's byte i is byte (s >> 4i) & 7 of {y, x} (x bytes 0-3, y bytes 4-7)
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s)
{
  unsigned long long v = (unsigned long long)y << 32 | x;
  unsigned r = 0;
  for (int i = 0; i < 4; i++) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return r;
}
struct alignas(8) float2 { float x, y; };
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float emu_h2f(uint16_t h) { _Float16 f; memcpy(&f, &h, 2); return (float)f; }
inline uint16_t emu_f2h(float x) { _Float16 f = (_Float16)x; uint16_t h; memcpy(&h, &f, 2); return h; }
inline float emu_b2f(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
inline uint16_t emu_f2b(float x) {
  uint32_t u; memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
struct __half { uint16_t b; };
struct __nv_bfloat16 { uint16_t b; };
struct __half2 { __half lo, hi; };
struct __nv_bfloat162 { __nv_bfloat16 lo, hi; };
inline __half2 __floats2half2_rn(float a, float b) { return {{emu_f2h(a)}, {emu_f2h(b)}}; }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return {{emu_f2b(a)}, {emu_f2b(b)}}; }
inline float mc_ld(__half x) { return emu_h2f(x.b); }
inline float mc_ld(__nv_bfloat16 x) { return emu_b2f(x.b); }
inline __half mc_cvt_f16(float x) { return {emu_f2h(x)}; }
inline __nv_bfloat16 mc_cvt_bf16(float x) { return {emu_f2b(x)}; }
inline float mc_sat_f16(float x) { return fabsf(x) >= 65520.0f ? copysignf(MC_INF, x) : x; }
inline float mc_sat_bf16(float x) { return fabsf(x) >= 0x1.ffp127f ? copysignf(MC_INF, x) : x; }
inline float mc_relu(float a) { return a > 0.0f ? a : (a != a ? a : 0.0f); }
template <typename T, int V> struct alignas(sizeof(T) * V) mc_vec { T x[V]; };
extern bool emu_bf16;  // the operands' type (emulate.py sets it per kernel)
extern const void *emu_ptr[32][32];
extern unsigned emu_frag[32][32][6];
inline float emu_lo(unsigned r) { return emu_bf16 ? emu_b2f((uint16_t)r) : emu_h2f((uint16_t)r); }
inline float emu_hi(unsigned r) { return emu_bf16 ? emu_b2f((uint16_t)(r >> 16)) : emu_h2f((uint16_t)(r >> 16)); }
// ldmatrix .x4: lane 8i + r gives row r of matrix i; lane l gets, of matrix i, row l/4,
// columns 2(l%4) and 2(l%4)+1 (transposed: rows 2(l%4), 2(l%4)+1 of column l/4)
inline void emu_ldsm(unsigned *r, const void *p, bool trans)
{
  int t = (int)threadIdx.x, w = t / 32, l = t % 32;
  emu_ptr[w][l] = p;
  pthread_barrier_wait(&emu_warp[w]);
  for (int i = 0; i < 4; i++) {
    uint16_t e[2];
    for (int j = 0; j < 2; j++) {
      int row = trans ? 2 * (l % 4) + j : l / 4, col = trans ? l / 4 : 2 * (l % 4) + j;
      e[j] = ((const uint16_t *)emu_ptr[w][8 * i + row])[col];
    }
    r[i] = (unsigned)e[0] | ((unsigned)e[1] << 16);
  }
  pthread_barrier_wait(&emu_warp[w]);
}
inline void mc_ldsm4(unsigned *r, const void *p) { emu_ldsm(r, p, false); }
inline void mc_ldsm4t(unsigned *r, const void *p) { emu_ldsm(r, p, true); }
// mma m16n8k16: lane (g = l/4, t = l%4) holds A[g][2t..], A[g+8][2t..], A[g][2t+8..],
// A[g+8][2t+8..]; B[2t..][g], B[2t+8..][g]; D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1]
inline void mc_mma(float *d, const unsigned *a, unsigned b0, unsigned b1)
{
  int t = (int)threadIdx.x, w = t / 32, l = t % 32;
  for (int i = 0; i < 4; i++) emu_frag[w][l][i] = a[i];
  emu_frag[w][l][4] = b0;
  emu_frag[w][l][5] = b1;
  pthread_barrier_wait(&emu_warp[w]);
  float A[16][16], B[16][8];
  for (int L = 0; L < 32; L++) {
    int g = L / 4, q = L % 4;
    const unsigned *f = emu_frag[w][L];
    int ar[4] = {g, g + 8, g, g + 8}, ac[4] = {2 * q, 2 * q, 2 * q + 8, 2 * q + 8};
    for (int i = 0; i < 4; i++) { A[ar[i]][ac[i]] = emu_lo(f[i]); A[ar[i]][ac[i] + 1] = emu_hi(f[i]); }
    B[2 * q][g] = emu_lo(f[4]); B[2 * q + 1][g] = emu_hi(f[4]);
    B[2 * q + 8][g] = emu_lo(f[5]); B[2 * q + 9][g] = emu_hi(f[5]);
  }
  pthread_barrier_wait(&emu_warp[w]);
  int g = l / 4, q = l % 4;
  for (int i = 0; i < 4; i++) {
    int row = g + (i >= 2 ? 8 : 0), col = 2 * q + (i & 1);
    float s = d[i];
    for (int k = 0; k < 16; k++) s += A[row][k] * B[k][col];
    d[i] = s;
  }
}
MC_D void mc_cp8(void *dst, const void *src, int bytes) {
  if (bytes) memcpy(dst, src, 8); else memset(dst, 0, 8);
}
