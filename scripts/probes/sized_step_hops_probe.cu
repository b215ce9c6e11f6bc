// Issue 36's second probe: where a sized step's per-step time goes inside one CUDA graph, and
// which way of choosing the SWITCH's class costs least. Not library code: its measured output
// is committed under results/, and the library's design follows from it.
//
// One graph holds S steps; each step is a producer that writes the step's count (from a table on
// the device), then a consumer of that many rows. The ways differ only in how the consumer is
// sized:
//   exact       the consumer's grid for the step's count, known when the graph was built (the
//               floor: what a step costs when the host already knows n);
//   over        the consumer's grid for the capacity, blocks past the count exit at once;
//   setter      producer -> a one-thread setter kernel -> SWITCH{consumer, class grid} (the
//               library's sized launch as it records today);
//   setter-pdl  the same, the setter joined to the producer by a programmatic edge: it launches
//               while the producer runs and waits (griddepcontrol.wait) before it reads the count;
//   fused       the producer itself sets the SWITCH once it has written the count (a
//               device-side class selector called from the user's kernel): no setter node.
// Per step: graph time / S, p50 and p99 over replays; two count regimes: every step 1000
// (the consumer trivial: the ways' overhead alone) and log-uniform in [1, 2^20].
// Build (GPU host): nvcc -O3 -std=c++17 -arch=sm_90 sized_step_hops_probe.cu -o probe
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#define CK(x)                                                                    \
  do {                                                                           \
    cudaError_t e_ = (x);                                                        \
    if (e_ != cudaSuccess) {                                                     \
      printf("FAIL %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__);  \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

static const int K = 6;  // classes 2^10, 2^12, ..., 2^20
static const int CAP = 1 << 20;
static int cls_of(int c) { return 1 << (10 + 2 * c); }
static const int BLOCK = 256;

__device__ __forceinline__ unsigned class_of(int n) {
  unsigned c = 0;
  while (c < K - 1 && n > (1 << (10 + 2 * c))) ++c;
  return c;
}
// The producer: rows x[i] = i % 1000 for the step's count, then the count.
__global__ void produce(float* x, int* count, const int* counts, int step) {
  int n = counts[step];
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = (float)(i % 1000);
  if (blockIdx.x == 0 && threadIdx.x == 0) *count = n;
}
// The producer that also sets the class: the count is the table's, known to every thread, so
// thread 0 of block 0 sets it (a real producer would do it in its last block).
__global__ void produce_select(float* x, int* count, const int* counts, int step, cudaGraphConditionalHandle h) {
  int n = counts[step];
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = (float)(i % 1000);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    *count = n;
    cudaGraphSetConditional(h, class_of(n));
  }
}
__global__ void set_class(cudaGraphConditionalHandle h, const int* count) {
  if (threadIdx.x == 0) cudaGraphSetConditional(h, class_of(*count));
}
__global__ void set_class_pdl(cudaGraphConditionalHandle h, const int* count) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (threadIdx.x == 0) cudaGraphSetConditional(h, class_of(*count));
}
// The consumer: y[i] = 2 x[i] + 1 for i < *count, grid-stride; sum of y into *check.
__global__ void consume(const float* x, float* y, const int* count) {
  int n = *count;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = 2.0f * x[i] + 1.0f;
}

struct Bufs {
  float *x, *y;
  int *count, *counts;
};

static cudaGraphNode_t add_kernel(cudaGraph_t g, const cudaGraphNode_t* dep, void* func, unsigned grid,
                                  unsigned block, void** args, bool programmatic) {
  cudaGraphNodeParams np = {};
  np.type = cudaGraphNodeTypeKernel;
  np.kernel.func = func;
  np.kernel.gridDim = dim3(grid);
  np.kernel.blockDim = dim3(block);
  np.kernel.kernelParams = args;
  cudaGraphEdgeData ed = {};
  if (programmatic) {
    ed.from_port = cudaGraphKernelNodePortProgrammatic;
    ed.type = cudaGraphDependencyTypeProgrammatic;
  }
  cudaGraphNode_t n;
  CK(cudaGraphAddNode(&n, g, dep, dep ? &ed : nullptr, dep ? 1 : 0, &np));
  return n;
}

static unsigned grid_for(int n) { return (unsigned)std::max(1, std::min((n + BLOCK - 1) / BLOCK, 4096)); }

// A SWITCH node after `dep` over K classes, body c = consume with class c's grid.
static cudaGraphNode_t add_switch(cudaGraph_t g, cudaGraphNode_t dep, cudaGraphConditionalHandle h, Bufs& b,
                                  cudaStream_t s) {
  cudaGraphNodeParams cp = {};
  cp.type = cudaGraphNodeTypeConditional;
  cp.conditional.handle = h;
  cp.conditional.type = cudaGraphCondTypeSwitch;
  cp.conditional.size = K;
  cudaGraphNode_t sw;
  CK(cudaGraphAddNode(&sw, g, &dep, nullptr, 1, &cp));
  for (int c = 0; c < K; ++c) {
    CK(cudaStreamBeginCaptureToGraph(s, cp.conditional.phGraph_out[c], nullptr, nullptr, 0,
                                     cudaStreamCaptureModeRelaxed));
    consume<<<grid_for(cls_of(c)), BLOCK, 0, s>>>(b.x, b.y, b.count);
    cudaGraph_t got;
    CK(cudaStreamEndCapture(s, &got));
  }
  return sw;
}

enum Way { EXACT, OVER, SETTER, SETTER_PDL, FUSED, WAYS };
static const char* way_name[WAYS] = {"exact", "over", "setter", "setter-pdl", "fused"};

// Per-step args live as long as the graph (kernelParams are copied at add time, but keep them).
struct StepArgs {
  float *x, *y;
  int *count, *counts;
  int step;
  cudaGraphConditionalHandle h;
};

static cudaGraphExec_t build(Way w, Bufs& b, const std::vector<int>& counts, cudaStream_t s) {
  int S = (int)counts.size();
  cudaGraph_t g;
  CK(cudaGraphCreate(&g, 0));
  std::vector<StepArgs> a(S);
  cudaGraphNode_t last = nullptr;
  for (int k = 0; k < S; ++k) {
    StepArgs& t = a[k];
    t = {b.x, b.y, b.count, b.counts, k, 0};
    const cudaGraphNode_t* dep = last ? &last : nullptr;
    unsigned pgrid = grid_for(counts[k]);
    void* pargs[] = {&t.x, &t.count, &t.counts, &t.step};
    void* cargs[] = {&t.x, &t.y, &t.count};
    switch (w) {
      case EXACT:
      case OVER: {
        cudaGraphNode_t p = add_kernel(g, dep, (void*)produce, pgrid, BLOCK, pargs, false);
        unsigned cg = w == EXACT ? grid_for(counts[k]) : grid_for(CAP);
        last = add_kernel(g, &p, (void*)consume, cg, BLOCK, cargs, false);
        break;
      }
      case SETTER:
      case SETTER_PDL: {
        CK(cudaGraphConditionalHandleCreate(&t.h, g, K, cudaGraphCondAssignDefault));
        cudaGraphNode_t p = add_kernel(g, dep, (void*)produce, pgrid, BLOCK, pargs, false);
        void* sargs[] = {&t.h, &t.count};
        bool pdl = w == SETTER_PDL;
        cudaGraphNode_t st =
            add_kernel(g, &p, pdl ? (void*)set_class_pdl : (void*)set_class, 1, 32, sargs, pdl);
        last = add_switch(g, st, t.h, b, s);
        break;
      }
      case FUSED: {
        CK(cudaGraphConditionalHandleCreate(&t.h, g, K, cudaGraphCondAssignDefault));
        void* fargs[] = {&t.x, &t.count, &t.counts, &t.step, &t.h};
        cudaGraphNode_t p = add_kernel(g, dep, (void*)produce_select, pgrid, BLOCK, fargs, false);
        last = add_switch(g, p, t.h, b, s);
        break;
      }
      default:
        break;
    }
  }
  cudaGraphExec_t e;
  CK(cudaGraphInstantiate(&e, g, 0));
  CK(cudaGraphUpload(e, s));
  CK(cudaGraphDestroy(g));
  return e;
}

static double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, (size_t)(p * v.size()))];
}

int main(int argc, char** argv) {
  int S = argc > 1 ? atoi(argv[1]) : 64;
  int R = argc > 2 ? atoi(argv[2]) : 50;
  int dev = 0, drv = 0;
  CK(cudaSetDevice(dev));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, dev));
  CK(cudaDriverGetVersion(&drv));
  printf("device %s, driver API %d, %d SMs; %d steps per graph, %d replays after 5 warm-ups\n", prop.name, drv,
         prop.multiProcessorCount, S, R);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Bufs b;
  CK(cudaMalloc(&b.x, CAP * sizeof(float)));
  CK(cudaMalloc(&b.y, CAP * sizeof(float)));
  CK(cudaMalloc(&b.count, sizeof(int)));
  CK(cudaMalloc(&b.counts, S * sizeof(int)));
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0, std::log((double)CAP));
  const char* regimes[2] = {"n=1000", "log-uniform[1,2^20]"};
  for (int r = 0; r < 2; ++r) {
    std::vector<int> counts(S);
    for (int k = 0; k < S; ++k) counts[k] = r == 0 ? 1000 : std::max(1, (int)std::exp(u(rng)));
    CK(cudaMemcpy(b.counts, counts.data(), S * sizeof(int), cudaMemcpyHostToDevice));
    double exact_p50 = 0;
    for (int w = 0; w < WAYS; ++w) {
      cudaGraphExec_t e = build((Way)w, b, counts, s);
      cudaEvent_t e0, e1;
      CK(cudaEventCreate(&e0));
      CK(cudaEventCreate(&e1));
      std::vector<double> per;
      int wrong = 0;
      for (int i = 0; i < R + 5; ++i) {
        CK(cudaMemset(b.y, 0, CAP * sizeof(float)));
        CK(cudaDeviceSynchronize());
        CK(cudaEventRecord(e0, s));
        CK(cudaGraphLaunch(e, s));
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (i >= 5) per.push_back(1000.0 * ms / S);
        if (i == 0) {  // the last step's rows: y[i] = 2 (i % 1000) + 1 below its count
          int n = counts[S - 1];
          std::vector<float> y(n);
          CK(cudaMemcpy(y.data(), b.y, n * sizeof(float), cudaMemcpyDeviceToHost));
          for (int j = 0; j < n; ++j) wrong += y[j] != 2.0f * (float)(j % 1000) + 1.0f;
        }
      }
      double p50 = pct(per, 0.5), p99 = pct(per, 0.99);
      if (w == EXACT) exact_p50 = p50;
      printf("%-22s %-11s per step p50 %7.2f us  p99 %7.2f us  /exact %.3f  wrong %d\n", regimes[r], way_name[w], p50,
             p99, p50 / exact_p50, wrong);
      CK(cudaGraphExecDestroy(e));
      CK(cudaEventDestroy(e0));
      CK(cudaEventDestroy(e1));
    }
  }
  printf("done\n");
  return 0;
}
