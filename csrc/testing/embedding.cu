// embedding.cu: producer kernels for the embedding tests (tests/gpu/embedding.rs). A simulation
// step in structure-of-arrays form whose count and values change on every CUDA graph replay
// although its parameters are frozen in the graph: they come from a device-resident step.
#include "sized_readback/slot.h"  // fixed-width integer types under nvcc and NVRTC alike

// SplitMix64, as srb_mix in producers.cu (own name: every .cu file shares one unit).
__device__ __forceinline__ uint64_t srbe_mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// The count for key k (tests/gpu/embedding.rs mirrors it): mostly mix(k) % (cap + 1), sometimes
// cap + 1 (over capacity) or -3 (negative), so error replays are exercised too.
__device__ __forceinline__ int64_t srbe_count(uint64_t k, uint64_t cap) {
    if (k % 997 == 13) return (int64_t)cap + 1;
    if (k % 991 == 7) return -3;
    return (int64_t)(srbe_mix(k) % (cap + 1));
}

// One step of buffer `tag`: key = 2 * (*step) + tag. Writes n = srbe_count(key, cap) rows
// (none if n is out of range): pos[i] = i + 0.25 * key, id[i] = key * 7 + i,
// vel[i] = {i, key, tag} (3 floats), then the count. *step is only read here; srbe_advance
// moves it on after the readback.
extern "C" __global__ void srbe_step(double* pos, int32_t* id, float* vel, int32_t* count,
                                     const uint64_t* step, uint32_t tag, uint64_t cap) {
    const uint64_t key = 2 * *step + tag;
    const int64_t n = srbe_count(key, cap);
    const uint64_t rows = n < 0 || (uint64_t)n > cap ? 0 : (uint64_t)n;
    const uint64_t i0 = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (uint64_t i = i0; i < rows; i += (uint64_t)gridDim.x * blockDim.x) {
        pos[i] = (double)i + 0.25 * (double)key;
        id[i] = (int32_t)(key * 7 + i);
        vel[3 * i] = (float)i;
        vel[3 * i + 1] = (float)key;
        vel[3 * i + 2] = (float)tag;
    }
    if (i0 == 0) *count = (int32_t)n;
}

// Advances a step counter (one thread).
extern "C" __global__ void srbe_advance(uint64_t* step) {
    if (blockIdx.x == 0 && threadIdx.x == 0) *step += 1;
}
