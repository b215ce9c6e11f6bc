// harness.cu: producer kernels of the comparison harness (examples/compare) only.
#include "sized_readback/slot.h"  // fixed-width integer types under nvcc and NVRTC alike

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

// ---------------------------------------------------------------------------------------
// The realistic producer (issue 9): scan `n_cand` candidates (a power of two) and select
// exactly `keep` of them (candidate i iff (i * p) mod n_cand < keep, p odd, so i -> i * p mod
// n_cand is a bijection), value i + 0.5 * cycle, as a particle code's "left the box" pass does.
// Block-aggregated: one atomic per block, as users write it; the rows land in no particular
// order.
#include "sized_readback/append.cuh"

__device__ __forceinline__ bool hx_selected(uint64_t i, uint64_t n, uint64_t keep, uint64_t p) {
    return i < n && ((i * p) & (n - 1)) < keep;
}

// Into device memory plus a device count (*count zeroed before, e.g. cuMemsetD8Async): what the
// copy-based approaches and the pack kernel read back. 256 threads per block.
extern "C" __global__ void __launch_bounds__(256) hx_select_dev(double* out, unsigned long long* count, uint64_t n,
                                                                uint64_t keep, uint64_t p, uint64_t cycle) {
    __shared__ unsigned s_warp[8];
    __shared__ unsigned long long s_base;
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (uint64_t b = (uint64_t)blockIdx.x * 256; b < n; b += (uint64_t)gridDim.x * 256) {
        const uint64_t i = b + threadIdx.x;
        const bool k = hx_selected(i, n, keep, p);
        const unsigned mask = __ballot_sync(0xffffffffu, k);
        if (lane == 0) s_warp[warp] = __popc(mask);
        __syncthreads();
        if (threadIdx.x == 0) {
            unsigned total = 0;
            for (int w = 0; w < 8; ++w) {
                const unsigned c = s_warp[w];
                s_warp[w] = total;
                total += c;
            }
            s_base = total ? atomicAdd(count, (unsigned long long)total) : 0;
        }
        __syncthreads();
        if (k) out[s_base + s_warp[warp] + __popc(mask & ((1u << lane) - 1))] = (double)i + 0.5 * (double)cycle;
        __syncthreads();
    }
}

// The same selection appended straight into a readback slot through the append header.
extern "C" __global__ void __launch_bounds__(256) hx_select_append(srb_append_desc d, uint64_t n, uint64_t keep,
                                                                   uint64_t p, uint64_t cycle) {
    using Append = srb::BlockAppend<256, double>;
    __shared__ Append::TempStorage tmp;
    Append app(tmp, d);
    for (uint64_t b = (uint64_t)blockIdx.x * 256; b < n; b += (uint64_t)gridDim.x * 256) {
        const uint64_t i = b + threadIdx.x;
        const bool k = hx_selected(i, n, keep, p);
        app.append(k, (double)i + 0.5 * (double)cycle);
    }
    app.finish();
}

// The seed's loop on append: every thread appends data[i] = i + 0.5 * cycle for i < n, and the
// last block to finish (after block 0's thread 0 kept the GPU partly busy for `ns` ns, as
// hx_busy_produce does before it stores the count) writes the count and the trailer.
extern "C" __global__ void __launch_bounds__(256) hx_busy_append(srb_append_desc d, uint64_t n, uint64_t cycle,
                                                                 uint64_t ns) {
    using Append = srb::BlockAppend<256, double>;
    __shared__ Append::TempStorage tmp;
    Append app(tmp, d);
    for (uint64_t b = (uint64_t)blockIdx.x * 256; b < n; b += (uint64_t)gridDim.x * 256) {
        const uint64_t i = b + threadIdx.x;
        app.append(i < n, (double)i + 0.5 * (double)cycle);
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        uint64_t t0, t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
        do {
            __nanosleep(256);
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        } while (t - t0 < ns);
    }
    app.finish();
}

// The driver-call floor of one enqueue (examples/compare's costs): a kernel with a parameter
// of the pack kernel's size, launched with programmatic dependent launch as the pack is.
struct hx_param408 {
    unsigned long long w[51];
};
extern "C" __global__ void hx_param408_kernel(const hx_param408 p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    if (threadIdx.x == 0 && p.w[50] == 1) asm volatile("trap;");
}
