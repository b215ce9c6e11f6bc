// harness.cu: producer kernels of the comparison harness (examples/compare) only.
#include <stdint.h>

// The seed's loop in miniature: every thread writes data[i] = i + 0.5 * cycle (grid-stride),
// and thread 0 keeps the GPU only partly busy for `ns` nanoseconds of %globaltimer before it
// stores the count, as the seed's kernel sleeps before the host may read its result.
extern "C" __global__ void hx_busy_produce(double* data, int32_t* count, uint64_t n, uint64_t cycle, uint64_t ns) {
    const uint64_t i0 = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (uint64_t i = i0; i < n; i += (uint64_t)gridDim.x * blockDim.x) data[i] = (double)i + 0.5 * (double)cycle;
    if (i0 != 0) return;
    uint64_t t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        __nanosleep(256);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
    *count = (int32_t)n;
}

// The harness's producer: data[i] = i + 0.5 * cycle for i < n, then *count = n (as
// srb_produce_f64). With `trigger`, every block first signals programmatic launch completion
// (sm_90+), so a kernel launched after it with programmatic dependent launch (the pack) may
// become resident while this one runs; its griddepcontrol.wait still waits for this whole
// grid and its memory. No effect on anything else that follows (copies, events).
extern "C" __global__ void hx_produce_f64(double* data, int32_t* count, uint64_t n, uint64_t cycle, int trigger) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (trigger) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
    const uint64_t i0 = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (uint64_t i = i0; i < n; i += (uint64_t)gridDim.x * blockDim.x) data[i] = (double)i + 0.5 * (double)cycle;
    if (i0 == 0) *count = (int32_t)n;
}
