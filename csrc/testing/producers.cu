// producers.cu: producer kernels for tests, the comparison harness and the benches. They play
// the part of a simulation kernel that writes a count and that many results.
#include "sized_readback/slot.h"  // fixed-width integer types under nvcc and NVRTC alike

// SplitMix64: the pattern every test checks on the host (src/pattern.rs has the same function).
__device__ __forceinline__ uint64_t srb_mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// Byte i of the buffer is byte (i % 8) of srb_mix(seed + i / 8), little-endian.
extern "C" __global__ void srb_fill_pattern(unsigned char* dst, uint64_t nbytes, uint64_t seed) {
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < nbytes; i += (uint64_t)gridDim.x * blockDim.x)
        dst[i] = (unsigned char)(srb_mix(seed + i / 8) >> (8 * (i % 8)));
}

// Stores `value` as a count of the given srb_count_kind (0 i32, 1 u32, 2 i64, 3 u64).
extern "C" __global__ void srb_store_count(void* dst, int kind, uint64_t value) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    switch (kind) {
    case 0: *(int32_t*)dst = (int32_t)value; break;
    case 1: *(uint32_t*)dst = (uint32_t)value; break;
    case 2: *(int64_t*)dst = (int64_t)value; break;
    default: *(uint64_t*)dst = value; break;
    }
}

// A simulation step in miniature: writes n doubles (value i + cycle * 0.5) and then the count.
extern "C" __global__ void srb_produce_f64(double* data, int32_t* count, uint64_t n, uint64_t cycle) {
    uint64_t i0 = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (uint64_t i = i0; i < n; i += (uint64_t)gridDim.x * blockDim.x) data[i] = (double)i + 0.5 * (double)cycle;
    if (i0 == 0) *count = (int32_t)n;
}

// Keeps one thread busy for `ns` nanoseconds of %globaltimer, then stores the count: a kernel
// that holds little of the GPU for a long time, as in the seed's loop.
extern "C" __global__ void srb_busy_then_count(int32_t* count, int32_t n, uint64_t ns) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    uint64_t t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        __nanosleep(500);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
    *count = n;
}

// Writes through a null-based illegal address: a producer that faults (reliability tests).
extern "C" __global__ void srb_fault(uint64_t offset) {
    if (threadIdx.x == 0) *(volatile int*)(offset | 0x8) = 1;
}
