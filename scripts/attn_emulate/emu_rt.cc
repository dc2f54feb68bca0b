// The emulation's globals (emu.h).
#include "emu.h"
#include <cstdio>
#include <cstdlib>
thread_local emu_dim3 threadIdx, blockIdx;
pthread_barrier_t emu_cta;
pthread_barrier_t emu_warp[32];
float emu_x[32][32];
long emu_oob;
