// seed.cu: the kernel of the seed program (shared/seed/000_22854d1e0a2c547f.txt), unchanged
// except that its sleep and its printf are parameters, for examples/seed_pipeline.rs.
#include "sized_readback/slot.h"  // fixed-width integer types under nvcc and NVRTC alike
#ifndef __CUDACC_RTC__  // NVRTC, which builds the committed images, declares printf itself
#include <stdio.h>
#endif

// Sets the count for cycle k (5, 3, 4), keeps thread 0 busy for sleep_ms milliseconds (the seed
// sleeps 3000 x 1 ms), and adds 1 + (2 + k) * i to element i.
extern "C" __global__ void seed_kernel(double* d_array, int* d_size, int k, unsigned sleep_ms, int print) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == 0) {
        if (print) printf("in kernel: d_size = %i\n", *d_size);
        if (k == 0) {
            *d_size = 5;
        } else if (k == 1) {
            *d_size = 3;
        } else {
            *d_size = 4;
        }
        if (print) printf("in kernel: d_size set to %i\n", *d_size);
        for (unsigned s = 0; s < sleep_ms; ++s) __nanosleep(1000000U);
    }
    d_array[i] += (1.0 + (2.0 + k) * i);
}

// The seed's kernel appending its results straight into a readback slot
// (examples/seed_append.rs): no d_size, no copies. It computes as seed_kernel does, thread 0
// keeps the GPU busy for sleep_ms (the seed sleeps before the host may read), then every
// thread with i < the cycle's count (5, 3, 4) appends (d_array[i], i); the last block to
// finish writes the count and the trailer.
#include "sized_readback/append.cuh"

extern "C" __global__ void seed_append_kernel(srb_append_desc d, double* d_array, int k, unsigned sleep_ms) {
    using Append = srb::BlockAppend<256, double, int>;
    __shared__ Append::TempStorage tmp;
    Append app(tmp, d);
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int size = k == 0 ? 5 : (k == 1 ? 3 : 4);
    d_array[i] += (1.0 + (2.0 + k) * i);
    if (i == 0)
        for (unsigned s = 0; s < sleep_ms; ++s) __nanosleep(1000000U);
    app.append(i < size, d_array[i], i);
    app.finish();
}
