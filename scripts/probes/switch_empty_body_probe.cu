// Issue 34's probe: does a SWITCH whose chosen body is empty cost what one
// that launches a body does (about 7 µs a step on driver 580, probe-sized-step-hops-1e59097)?
// If not, the staged sized copy could copy its smallest class with a copy-engine node outside
// the conditional and leave that class's body empty, so small counts would pay no device-side
// body launch. Not library code: its output is to be committed under results/.
//
// One graph launch per sample, from the host, on an idle stream, then an event wait: host
// latency p50/p99 over samples after a warm-up, per graph:
//   copy-small   [k] -> memcpy 4 KiB D2H                     (the floor: no conditional)
//   switch-copy  [k sets 0] -> SWITCH{0: memcpy 4 KiB, 1: memcpy 8 MiB}   (today's sized copy, small n)
//   switch-empty [k sets 0] -> SWITCH{0: empty, 1: memcpy 8 MiB}
//   split        [k sets 0] -> memcpy 4 KiB -> SWITCH{0: empty, 1: memcpy the rest}   (the idea)
//   if-false     [k sets 0] -> IF{memcpy 8 MiB}
//   par-empty    [k sets 0] -> memcpy 4 KiB  and  [k] -> SWITCH{0: empty, 1: memcpy the rest}
//   par-rest     [k sets 1] -> memcpy 4 KiB  and  [k] -> SWITCH{0: empty, 1: memcpy 60 KiB}
//   switch-64k   [k sets 1] -> SWITCH{0: memcpy 4 KiB, 1: memcpy 64 KiB}   (today's, class 1)
//   copy-64k     [k] -> memcpy 64 KiB                                     (its floor)
// Build (GPU host): nvcc -O3 -std=c++17 -arch=sm_90 switch_empty_body_probe.cu -o probe
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                    \
  do {                                                                           \
    cudaError_t e_ = (x);                                                        \
    if (e_ != cudaSuccess) {                                                     \
      printf("FAIL %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__);  \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

static const size_t SMALL = 4096, BIG = 8u << 20, MID = 64u << 10;

__global__ void k_plain(unsigned* p) {
  if (threadIdx.x == 0) *p = 1;
}
__global__ void k_set(unsigned* p, cudaGraphConditionalHandle h, unsigned v) {
  if (threadIdx.x == 0) {
    *p = 1;
    cudaGraphSetConditional(h, v);
  }
}

struct Bufs {
  char* dev;
  char* host;
  unsigned* flag;
};

static cudaGraphNode_t kernel_node(cudaGraph_t g, const cudaGraphNode_t* dep, void* f, void** args) {
  cudaKernelNodeParams kp = {};
  kp.func = f;
  kp.gridDim = dim3(1);
  kp.blockDim = dim3(32);
  kp.kernelParams = args;
  cudaGraphNode_t n;
  CK(cudaGraphAddKernelNode(&n, g, dep, dep ? 1 : 0, &kp));
  return n;
}
static cudaGraphNode_t copy_node(cudaGraph_t g, const cudaGraphNode_t* dep, Bufs& b, size_t off, size_t bytes) {
  cudaGraphNode_t n;
  CK(cudaGraphAddMemcpyNode1D(&n, g, dep, dep ? 1 : 0, b.host + off, b.dev + off, bytes, cudaMemcpyDeviceToHost));
  return n;
}
// A conditional node after `dep`; its bodies are returned for filling.
static cudaGraph_t* cond_node(cudaGraph_t g, cudaGraphNode_t dep, cudaGraphConditionalHandle h,
                              cudaGraphConditionalNodeType type, unsigned size) {
  cudaGraphNodeParams cp = {};
  cp.type = cudaGraphNodeTypeConditional;
  cp.conditional.handle = h;
  cp.conditional.type = type;
  cp.conditional.size = size;
  cudaGraphNode_t n;
  CK(cudaGraphAddNode(&n, g, &dep, nullptr, 1, &cp));
  return cp.conditional.phGraph_out;
}

enum Way { COPY_SMALL, SWITCH_COPY, SWITCH_EMPTY, SPLIT, IF_FALSE, PAR_EMPTY, PAR_REST, SWITCH_64K, COPY_64K, WAYS };
static const char* names[WAYS] = {"copy-small", "switch-copy", "switch-empty", "split",   "if-false",
                                  "par-empty",  "par-rest",    "switch-64k",   "copy-64k"};

static cudaGraphExec_t build(Way w, Bufs& b, cudaStream_t s) {
  cudaGraph_t g;
  CK(cudaGraphCreate(&g, 0));
  static cudaGraphConditionalHandle h[WAYS];
  static unsigned zero = 0, one = 1;
  static void* plain_args[1];
  static void* set_args[WAYS][3];
  plain_args[0] = &b.flag;
  set_args[w][0] = &b.flag;
  set_args[w][1] = &h[w];
  set_args[w][2] = (w == PAR_REST || w == SWITCH_64K) ? &one : &zero;
  if (w == COPY_SMALL || w == COPY_64K) {
    cudaGraphNode_t k = kernel_node(g, nullptr, (void*)k_plain, plain_args);
    copy_node(g, &k, b, 0, w == COPY_SMALL ? SMALL : MID);
  } else {
    CK(cudaGraphConditionalHandleCreate(&h[w], g, 0, cudaGraphCondAssignDefault));
    cudaGraphNode_t k = kernel_node(g, nullptr, (void*)k_set, set_args[w]);
    if (w == IF_FALSE) {
      cudaGraph_t* body = cond_node(g, k, h[w], cudaGraphCondTypeIf, 1);
      copy_node(body[0], nullptr, b, 0, BIG);
    } else if (w == PAR_EMPTY || w == PAR_REST) {
      copy_node(g, &k, b, 0, SMALL);
      cudaGraph_t* body = cond_node(g, k, h[w], cudaGraphCondTypeSwitch, 2);
      copy_node(body[1], nullptr, b, SMALL, (w == PAR_REST ? MID : BIG) - SMALL);
    } else if (w == SWITCH_64K) {
      cudaGraph_t* body = cond_node(g, k, h[w], cudaGraphCondTypeSwitch, 2);
      copy_node(body[0], nullptr, b, 0, SMALL);
      copy_node(body[1], nullptr, b, 0, MID);
    } else {
      cudaGraphNode_t before = k;
      if (w == SPLIT) before = copy_node(g, &k, b, 0, SMALL);
      cudaGraph_t* body = cond_node(g, before, h[w], cudaGraphCondTypeSwitch, 2);
      if (w == SWITCH_COPY) copy_node(body[0], nullptr, b, 0, SMALL);
      size_t off = w == SPLIT ? SMALL : 0;
      copy_node(body[1], nullptr, b, off, BIG - off);
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
  return v[std::min(v.size() - 1, (size_t)(p * (v.size() - 1)))];
}

int main(int argc, char** argv) {
  int samples = argc > 1 ? atoi(argv[1]) : 2000;
  int drv = 0;
  CK(cudaDriverGetVersion(&drv));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("device %s, driver API %d; %d samples per way after 200 warm-ups, interleaved\n", prop.name, drv, samples);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Bufs b;
  CK(cudaMalloc(&b.dev, BIG));
  CK(cudaMemset(b.dev, 7, BIG));
  CK(cudaMallocHost(&b.host, BIG));
  CK(cudaMalloc(&b.flag, sizeof(unsigned)));
  cudaGraphExec_t e[WAYS];
  for (int w = 0; w < WAYS; ++w) e[w] = build((Way)w, b, s);
  cudaEvent_t done;
  CK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  std::vector<double> t[WAYS];
  for (int i = 0; i < samples + 200; ++i) {
    for (int w = 0; w < WAYS; ++w) {
      int way = (w + i) % WAYS;  // a rotating order: each way after each other in turn
      b.host[0] = 0;
      b.host[MID - 1] = 0;
      auto t0 = std::chrono::steady_clock::now();
      CK(cudaGraphLaunch(e[way], s));
      CK(cudaEventRecord(done, s));
      CK(cudaEventSynchronize(done));
      auto t1 = std::chrono::steady_clock::now();
      if (i >= 200) t[way].push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      bool copied = b.host[0] == 7;
      bool want = way != SWITCH_EMPTY && way != IF_FALSE;
      if (copied != want) {
        printf("FAIL %s: the first byte %s copied\n", names[way], copied ? "was" : "was not");
        return 1;
      }
      bool mid = way == PAR_REST || way == SWITCH_64K || way == COPY_64K;
      if ((b.host[MID - 1] == 7) != mid) {
        printf("FAIL %s: the 64 KiB copy's last byte %s copied\n", names[way], mid ? "was not" : "was");
        return 1;
      }
    }
  }
  double base = pct(t[COPY_SMALL], 0.5);
  for (int w = 0; w < WAYS; ++w)
    printf("%-13s host latency p50 %7.2f us  p99 %7.2f us  minus copy-small %6.2f us\n", names[w], pct(t[w], 0.5),
           pct(t[w], 0.99), pct(t[w], 0.5) - base);
  printf("done\n");
  return 0;
}
