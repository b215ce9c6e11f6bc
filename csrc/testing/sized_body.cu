// sized_body.cu: the body the sized launch's tests record for every size class. It is
// launched with the class's grid (n_max threads, rounded up to whole blocks) and bounds its
// work by the device count, as a user's kernel in a sized launch does.
#include "sized_readback/slot.h"  // fixed-width integer types under nvcc and NVRTC alike

// out[i] = 2i + 1 for i < min(*count, n_max); meta: [0] n_max, [1] threads launched, [2] the
// class, [3] bodies run (incremented).
extern "C" __global__ void srb_test_sized_body(const int32_t* count, uint64_t n_max, uint32_t klass,
                                               uint64_t* out, uint64_t* meta) {
    const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid == 0) {
        meta[0] = n_max;
        meta[1] = (uint64_t)gridDim.x * blockDim.x;
        meta[2] = klass;
        meta[3] += 1;
    }
    const int64_t n = *count;
    if ((int64_t)tid < n && tid < n_max) out[tid] = 2 * tid + 1;
}
