// append.cu: append kernels for the tests (tests/gpu/append.rs), through the shipped header
// include/sized_readback/append.cuh, in every shape the tests need.
//
// Candidate i (0 <= i < n) is kept iff (i * p) % n < count, with p coprime to n, so exactly
// `count` of them are kept, scattered over the blocks. A kept row's column c holds the bytes
// of srbt_mix(seed + 8 * i + c) (as many as the column's type has), so the host knows every
// row and compares the readback with it as a multiset.
#include "sized_readback/append.cuh"

__device__ __forceinline__ uint64_t srbt_mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

struct srbt_b12 {
    uint32_t v[3];
};
struct __align__(16) srbt_b16 {
    uint64_t v[2];
};

// The value of column c of row i: the first sizeof(T) bytes of two mixed words.
template <typename T>
__device__ __forceinline__ T srbt_value(uint64_t seed, uint64_t i, unsigned c) {
    uint64_t w[2] = {srbt_mix(seed + 8 * i + c), srbt_mix(seed + 8 * i + c + 0x1000000)};
    T t;
    unsigned char* dst = reinterpret_cast<unsigned char*>(&t);
    const unsigned char* src = reinterpret_cast<const unsigned char*>(w);
    for (unsigned b = 0; b < sizeof(T); ++b) dst[b] = src[b];
    return t;
}

__device__ __forceinline__ bool srbt_keep(uint64_t i, uint64_t n, uint64_t count, uint64_t p) {
    return i < n && (unsigned __int128)i * p % n < count;
}

template <unsigned... Cs>
struct srbt_idx {};

// Every thread calls append once per round; rounds are uniform per block. With `early`, block
// early - 1 returns before finish() (a kernel that does not finish).
template <int B, typename I, typename... Ts>
struct srbt_runner;
template <int B, unsigned... Cs, typename... Ts>
struct srbt_runner<B, srbt_idx<Cs...>, Ts...> {
    static __device__ __forceinline__ void run(const srb_append_desc& d, uint64_t n, uint64_t count, uint64_t p,
                                               uint64_t seed, unsigned early) {
        using Append = srb::BlockAppend<B, Ts...>;
        __shared__ typename Append::TempStorage tmp;
        Append app(tmp, d);
        const unsigned bid = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
        const unsigned blocks = gridDim.x * gridDim.y * gridDim.z;
        const unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
        for (uint64_t base = (uint64_t)bid * B; base < n; base += (uint64_t)blocks * B) {
            const uint64_t i = base + tid;
            const bool keep = srbt_keep(i, n, count, p);
            app.append(keep, srbt_value<Ts>(seed, i, Cs)...);
        }
        if (early != 0 && bid == early - 1) return;
        app.finish();
    }
};

#define SRBT_ONE(NAME, B, T)                                                                            \
    extern "C" __global__ void NAME(srb_append_desc d, uint64_t n, uint64_t count, uint64_t p, uint64_t seed, \
                                    unsigned early) {                                                   \
        srbt_runner<B, srbt_idx<0u>, T>::run(d, n, count, p, seed, early);                              \
    }

// One column of each element size, 256 threads.
SRBT_ONE(srbt_append_u8, 256, uint8_t)
SRBT_ONE(srbt_append_u16, 256, uint16_t)
SRBT_ONE(srbt_append_u32, 256, uint32_t)
SRBT_ONE(srbt_append_u64, 256, uint64_t)
SRBT_ONE(srbt_append_b12, 256, srbt_b12)
SRBT_ONE(srbt_append_b16, 256, srbt_b16)
// One u64 column, every block size from 32 to 1024.
SRBT_ONE(srbt_append_u64_b32, 32, uint64_t)
SRBT_ONE(srbt_append_u64_b64, 64, uint64_t)
SRBT_ONE(srbt_append_u64_b128, 128, uint64_t)
SRBT_ONE(srbt_append_u64_b512, 512, uint64_t)
SRBT_ONE(srbt_append_u64_b1024, 1024, uint64_t)

// Four columns of mixed types (f64 bits, i32 bits, 12-byte, u8), 256 threads in any 3-D shape.
extern "C" __global__ void srbt_append_mixed(srb_append_desc d, uint64_t n, uint64_t count, uint64_t p,
                                             uint64_t seed, unsigned early) {
    srbt_runner<256, srbt_idx<0u, 1u, 2u, 3u>, uint64_t, uint32_t, srbt_b12, uint8_t>::run(d, n, count, p, seed, early);
}

// One replay of a graph: the count of step *step is srbt_step_count(*step, cap_hint), the
// seed is the step, so every replay's rows differ although its parameters are frozen.
__device__ __forceinline__ uint64_t srbt_step_count(uint64_t step, uint64_t max_count) {
    return srbt_mix(step) % (max_count + 1);
}
extern "C" __global__ void srbt_append_step(srb_append_desc d, uint64_t n, uint64_t max_count, uint64_t p,
                                            const uint64_t* step) {
    const uint64_t s = *step;
    srbt_runner<256, srbt_idx<0u, 1u>, uint64_t, uint32_t>::run(d, n, srbt_step_count(s, max_count), p, s, 0);
}

// Buckets: candidate i (kept as above) goes to bucket srbt_bucket(seed, i, named) of a bucketed
// readback; with `named` above the readback's buckets, some rows name a bucket out of range.
// Columns: u64 and u32 values of the row, as srbt_value.
__device__ __forceinline__ unsigned srbt_bucket(uint64_t seed, uint64_t i, unsigned named) {
    return (unsigned)(srbt_mix(seed + 0x5555 + i) % named);
}
extern "C" __global__ void srbt_append_buckets(srb_append_desc d, uint64_t n, uint64_t count, uint64_t p,
                                               uint64_t seed, unsigned named) {
    using Append = srb::BlockAppendTo<256, 256, uint64_t, uint32_t>;
    __shared__ Append::TempStorage tmp;
    Append app(tmp, d);
    for (uint64_t base = (uint64_t)blockIdx.x * 256; base < n; base += (uint64_t)gridDim.x * 256) {
        const uint64_t i = base + threadIdx.x;
        const bool keep = srbt_keep(i, n, count, p);
        app.append_to(srbt_bucket(seed, i, named), keep, srbt_value<uint64_t>(seed, i, 0),
                      srbt_value<uint32_t>(seed, i, 1));
    }
    app.finish();
}
