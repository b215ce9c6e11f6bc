// Issue 34's probe: what the trailer's publication costs with each way to order the rows
// before `seq`. A kernel stores n 8-byte rows into pinned mapped host memory (one block, or
// 132 blocks with a departure counter and the last block publishing), then the count, then
// `seq` the host spins on. Ways, interleaved per sample:
//   sc       fence.sc.sys; st.relaxed.sys seq         (the library at d20c7db)
//   acq_rel  fence.acq_rel.sys; st.relaxed.sys seq
//   release  st.release.sys seq                       (a release store, no separate fence)
// With many blocks each block releases its rows before its departure atomic: fence.sc.sys
// (d20c7db's pack) for `sc`, fence.acq_rel.gpu (the append's) for the other two, whose last
// block then acquires with fence.acq_rel.gpu. p50/p99 of launch-to-seen host latency.
// Build (GPU host): nvcc -O3 -std=c++17 -arch=sm_90 publish_fence_probe.cu -o probe
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                   \
  do {                                                                          \
    cudaError_t e_ = (x);                                                       \
    if (e_ != cudaSuccess) {                                                    \
      printf("FAIL %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)

enum Way { SC, ACQ_REL, RELEASE, WAYS };
static const char* names[WAYS] = {"sc", "acq_rel", "release"};

struct Out {
  unsigned long long count;
  unsigned long long seq;
};

template <int W>
__device__ __forceinline__ void publish(Out* o, unsigned long long n, unsigned long long seq) {
  o->count = n;
  if (W == SC) {
    asm volatile("fence.sc.sys;" ::: "memory");
    asm volatile("st.relaxed.sys.u64 [%0], %1;" ::"l"(&o->seq), "l"(seq) : "memory");
  } else if (W == ACQ_REL) {
    asm volatile("fence.acq_rel.sys;" ::: "memory");
    asm volatile("st.relaxed.sys.u64 [%0], %1;" ::"l"(&o->seq), "l"(seq) : "memory");
  } else {
    asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(&o->seq), "l"(seq) : "memory");
  }
}

template <int W>
__global__ void k_pack(unsigned long long* rows, unsigned long long n, Out* o, unsigned* departures,
                       unsigned long long seq) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x)
    rows[i] = seq * 1000003ull + i;
  __syncthreads();
  if (threadIdx.x != 0) return;
  if (gridDim.x > 1) {
    if (W == SC)
      asm volatile("fence.sc.sys;" ::: "memory");
    else
      asm volatile("fence.acq_rel.gpu;" ::: "memory");
    if (atomicAdd(departures, 1u) != gridDim.x - 1) return;
    if (W != SC) asm volatile("fence.acq_rel.gpu;" ::: "memory");
    *departures = 0;
  }
  publish<W>(o, n, seq);
}

static double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, (size_t)(p * (v.size() - 1)))];
}

int main(int argc, char** argv) {
  int samples = argc > 1 ? atoi(argv[1]) : 2000;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("device %s; %d samples per way and case after 200 warm-ups, interleaved\n", prop.name, samples);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const unsigned long long max_n = 1 << 16;
  unsigned long long* rows;
  Out* o;
  CK(cudaHostAlloc(&rows, max_n * 8, cudaHostAllocMapped | cudaHostAllocPortable));
  CK(cudaHostAlloc(&o, sizeof(Out), cudaHostAllocMapped | cudaHostAllocPortable));
  unsigned* departures;
  CK(cudaMalloc(&departures, 4));
  CK(cudaMemset(departures, 0, 4));
  o->seq = 0;
  struct Case {
    unsigned long long n;
    int blocks;
  } cases[] = {{1, 1}, {4096, 1}, {4096, 132}, {65536, 132}};
  unsigned long long seq = 0;
  for (auto c : cases) {
    std::vector<double> t[WAYS];
    for (int i = 0; i < samples + 200; ++i) {
      for (int w0 = 0; w0 < WAYS; ++w0) {
        int w = (w0 + i) % WAYS;
        ++seq;
        auto t0 = std::chrono::steady_clock::now();
        if (w == SC) k_pack<SC><<<c.blocks, 256, 0, s>>>(rows, c.n, o, departures, seq);
        if (w == ACQ_REL) k_pack<ACQ_REL><<<c.blocks, 256, 0, s>>>(rows, c.n, o, departures, seq);
        if (w == RELEASE) k_pack<RELEASE><<<c.blocks, 256, 0, s>>>(rows, c.n, o, departures, seq);
        while (__atomic_load_n(&o->seq, __ATOMIC_ACQUIRE) != seq) {
        }
        auto t1 = std::chrono::steady_clock::now();
        if (o->count != c.n || rows[c.n - 1] != seq * 1000003ull + c.n - 1 || rows[0] != seq * 1000003ull) {
          printf("FAIL %s n=%llu: stale rows or count after seq\n", names[w], c.n);
          return 1;
        }
        if (i >= 200) t[w].push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
    }
    CK(cudaStreamSynchronize(s));
    for (int w = 0; w < WAYS; ++w)
      printf("n %6llu blocks %3d  %-8s p50 %7.2f us  p99 %7.2f us  minus sc %6.2f us\n", c.n, c.blocks, names[w],
             pct(t[w], 0.5), pct(t[w], 0.99), pct(t[w], 0.5) - pct(t[SC], 0.5));
  }
  printf("done\n");
  return 0;
}
