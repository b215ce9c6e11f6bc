// The ways of sizing a consumer that sized_grid_probe.cu compares, their kernels, how each
// step of each is added to a graph, and the check of every step's rows, grid and values. Part of
// that probe (issue 36's third), not library code; included once, by sized_grid_probe.cu.
#pragma once
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
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

// A refusal the probe records and goes on from (part 1): the call's error, or "yes".
static std::string g_refused;
#define TRY(x)                                                                          \
  do {                                                                                  \
    cudaError_t e_ = (x);                                                               \
    if (e_ != cudaSuccess) {                                                            \
      g_refused = std::string(#x).substr(0, 40) + ": " + cudaGetErrorName(e_);          \
      cudaGetLastError();                                                               \
      return false;                                                                     \
    }                                                                                   \
  } while (0)

static const int K = 6;  // SWITCH classes 2^10, 2^12, ..., 2^20
static const int CAP = 1 << 20;
static const int BLOCK = 256;
static const int MAX_GRID = CAP / BLOCK;  // 4096: the over-launch's grid, and the exact grid's cap
static int cls_of(int c) { return 1 << (10 + 2 * c); }
__host__ __device__ static unsigned grid_for(int n) {
  int g = (n + BLOCK - 1) / BLOCK;
  return (unsigned)(g < 1 ? 1 : (g > MAX_GRID ? MAX_GRID : g));
}

struct Bufs {
  float *x, *y;
  int *count, *counts, *done, *iter, *err;
  unsigned* grids;
};

__host__ __device__ __forceinline__ unsigned class_of(int n) {
  unsigned c = 0;
  while (c < K - 1 && n > (1 << (10 + 2 * c))) ++c;
  return c;
}
__device__ __forceinline__ int step_of(int step, const int* iter) { return iter ? *iter : step; }
__device__ __forceinline__ void note(int* err, cudaError_t e) {
  if (e != cudaSuccess) atomicExch(err, (int)e);
}
// Sets the consumer's grid for n rows, or disables it for none: the resizer's whole work.
__device__ __forceinline__ void resize(cudaGraphDeviceNode_t node, int n, int* err) {
  if (n > 0 && n <= CAP) {
    note(err, cudaGraphKernelNodeSetGridDim(node, dim3(grid_for(n))));
    note(err, cudaGraphKernelNodeSetEnabled(node, true));
  } else {
    note(err, cudaGraphKernelNodeSetEnabled(node, false));
  }
}

// The producer: rows x[i] = (i + step) % 1000 for the step's count, then the count.
__global__ void produce(float* x, int* count, const int* counts, int step, const int* iter) {
  int k = step_of(step, iter), n = counts[k];
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = (float)((i + k) % 1000);
  if (blockIdx.x == 0 && threadIdx.x == 0) *count = n;
}
// The producer that also sizes its consumer. The count is the table's, known to every thread, so
// block 0 does it (a real producer would do it in its last block, once the count is final).
__global__ void produce_resize(float* x, int* count, const int* counts, int step, cudaGraphDeviceNode_t node,
                               int* err) {
  int n = counts[step];
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = (float)((i + step) % 1000);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    *count = n;
    resize(node, n, err);
  }
}
__global__ void resizer(cudaGraphDeviceNode_t node, const int* count, int* err) {
  if (threadIdx.x == 0) resize(node, *count, err);
}
// The same two updates (grid, enable) in one cudaGraphKernelNodeUpdatesApply call.
__global__ void resizer_batch(cudaGraphDeviceNode_t node, const int* count, int* err) {
  if (threadIdx.x != 0) return;
  int n = *count;
  // Raw storage: the struct's union holds a dim3, whose constructor deletes the default one.
  alignas(cudaGraphKernelNodeUpdate) unsigned char raw[2 * sizeof(cudaGraphKernelNodeUpdate)] = {};
  cudaGraphKernelNodeUpdate* u = reinterpret_cast<cudaGraphKernelNodeUpdate*>(raw);
  u[0].node = node;
  u[0].field = cudaGraphKernelNodeFieldEnabled;
  u[0].updateData.isEnabled = n > 0 && n <= CAP;
  if (!u[0].updateData.isEnabled) {
    note(err, cudaGraphKernelNodeUpdatesApply(u, 1));
    return;
  }
  u[1].node = node;
  u[1].field = cudaGraphKernelNodeFieldGridDim;
  u[1].updateData.gridDim = dim3(grid_for(n));
  note(err, cudaGraphKernelNodeUpdatesApply(u, 2));
}
// Resizes only while *flag is set (part 1's persistence check).
__global__ void resizer_once(cudaGraphDeviceNode_t node, const int* flag, unsigned grid, int* err) {
  if (threadIdx.x == 0 && *flag) note(err, cudaGraphKernelNodeSetGridDim(node, dim3(grid)));
}
__global__ void set_class(cudaGraphConditionalHandle h, const int* count) {
  if (threadIdx.x == 0) cudaGraphSetConditional(h, class_of(*count));
}
// The consumer: y[i] = 2 x[i] + 1 for i < *count, grid-stride; it adds the rows it did to
// done[step] (one atomic per block that did any) and records its grid in grids[step].
__global__ void consume(const float* x, float* y, const int* count, int* done, unsigned* grids, int step,
                        const int* iter) {
  __shared__ int rows;
  int k = step_of(step, iter), n = *count, mine = 0;
  if (threadIdx.x == 0) rows = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    y[i] = 2.0f * x[i] + 1.0f;
    ++mine;
  }
  if (mine) atomicAdd(&rows, mine);
  __syncthreads();
  if (threadIdx.x == 0) {
    if (rows) atomicAdd(&done[k], rows);
    if (blockIdx.x == 0) grids[k] = gridDim.x;
  }
}
__global__ void reset_iter(int* iter) { *iter = 0; }
__global__ void next_iter(int* iter, cudaGraphConditionalHandle h, int steps) {
  int k = *iter + 1;
  *iter = k;
  cudaGraphSetConditional(h, k < steps ? 1u : 0u);
}

static bool add_kernel(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* dep, void* func, unsigned grid,
                       unsigned block, void** args) {
  cudaGraphNodeParams np = {};
  np.type = cudaGraphNodeTypeKernel;
  np.kernel.func = func;
  np.kernel.gridDim = dim3(grid);
  np.kernel.blockDim = dim3(block);
  np.kernel.kernelParams = args;
  TRY(cudaGraphAddNode(out, g, dep, nullptr, dep ? 1 : 0, &np));
  return true;
}
// Opts a kernel node in to device updates and returns its device handle.
static bool make_updatable(cudaGraphNode_t n, cudaGraphDeviceNode_t* dn) {
  cudaKernelNodeAttrValue v = {};
  v.deviceUpdatableKernelNode.deviceUpdatable = 1;
  TRY(cudaGraphKernelNodeSetAttribute(n, cudaLaunchAttributeDeviceUpdatableKernelNode, &v));
  cudaKernelNodeAttrValue got = {};
  TRY(cudaGraphKernelNodeGetAttribute(n, cudaLaunchAttributeDeviceUpdatableKernelNode, &got));
  // The handle as the get returns it, else as the set wrote it back into v.
  *dn = got.deviceUpdatableKernelNode.devNode ? got.deviceUpdatableKernelNode.devNode : v.deviceUpdatableKernelNode.devNode;
  if (!*dn) {
    g_refused = "no device handle after opting in";
    return false;
  }
  return true;
}

// The device-updatable kernel node of a copied graph (a clone, a child graph's copy), with the
// handle a get of its attribute returns, and what that handle is next to the original's `orig`.
static std::string updatable_in_copy(cudaGraph_t copy, cudaGraphDeviceNode_t orig, cudaGraphNode_t* node,
                                     cudaGraphDeviceNode_t* dn) {
  *node = nullptr;
  *dn = nullptr;
  size_t nn = 0;
  std::vector<cudaGraphNode_t> v;
  if (cudaGraphGetNodes(copy, nullptr, &nn) == cudaSuccess) {
    v.resize(nn);
    if (nn && cudaGraphGetNodes(copy, v.data(), &nn) != cudaSuccess) nn = 0;
  }
  for (size_t i = 0; i < nn; ++i) {
    cudaGraphNodeType ty;
    cudaKernelNodeAttrValue a = {};
    if (cudaGraphNodeGetType(v[i], &ty) == cudaSuccess && ty == cudaGraphNodeTypeKernel &&
        cudaGraphKernelNodeGetAttribute(v[i], cudaLaunchAttributeDeviceUpdatableKernelNode, &a) == cudaSuccess &&
        a.deviceUpdatableKernelNode.deviceUpdatable) {
      *node = v[i];
      *dn = a.deviceUpdatableKernelNode.devNode;
    }
  }
  cudaGetLastError();
  if (!*node) return "; the copy's consumer is not device-updatable";
  if (!*dn) return "; the copy's consumer is device-updatable, its handle not returned";
  return *dn == orig ? "; the copy's consumer has the original's handle" : "; the copy's consumer has a handle of its own";
}

// Per-step kernel arguments, kept alive as long as the graph is built.
struct StepArgs {
  float *x, *y;
  int *count, *counts, *done, *err;
  unsigned* grids;
  int step;
  const int* iter;
  cudaGraphConditionalHandle h;
  cudaGraphDeviceNode_t dn;
};

// A SWITCH node after `dep` over K classes, body c = consume with class c's grid.
static bool add_switch(cudaGraphNode_t* out, cudaGraph_t g, cudaGraphNode_t dep, StepArgs& t, cudaStream_t s) {
  cudaGraphNodeParams cp = {};
  cp.type = cudaGraphNodeTypeConditional;
  cp.conditional.handle = t.h;
  cp.conditional.type = cudaGraphCondTypeSwitch;
  cp.conditional.size = K;
  TRY(cudaGraphAddNode(out, g, &dep, nullptr, 1, &cp));
  for (int c = 0; c < K; ++c) {
    TRY(cudaStreamBeginCaptureToGraph(s, cp.conditional.phGraph_out[c], nullptr, nullptr, 0,
                                      cudaStreamCaptureModeRelaxed));
    consume<<<grid_for(cls_of(c)), BLOCK, 0, s>>>(t.x, t.y, t.count, t.done, t.grids, t.step, t.iter);
    cudaGraph_t got;
    TRY(cudaStreamEndCapture(s, &got));
  }
  return true;
}

enum Way { EXACT, OVER, SETTER, RESIZE, RESIZE_BATCH, FUSED, OVER_WHILE, SETTER_WHILE, RESIZE_WHILE, WAYS };
static const char* way_name[WAYS] = {"exact", "over", "setter", "resize", "resize-batch", "fused",
                                     "over-while", "setter-while", "resize-while"};
static bool is_loop(Way w) { return w >= OVER_WHILE; }

// One step of way `w` into graph g after *last (null: a root). Loop ways read the step from b.iter.
static bool add_step(Way w, cudaGraph_t g, cudaGraphNode_t* last, StepArgs& t, int n_known, cudaStream_t s) {
  const cudaGraphNode_t* dep = *last ? last : nullptr;
  void* pargs[] = {&t.x, &t.count, &t.counts, &t.step, &t.iter};
  void* cargs[] = {&t.x, &t.y, &t.count, &t.done, &t.grids, &t.step, &t.iter};
  unsigned pgrid = is_loop(w) ? MAX_GRID : grid_for(n_known);
  cudaGraphNode_t p, c;
  switch (w) {
    case EXACT:
    case OVER:
    case OVER_WHILE:
      if (!add_kernel(&p, g, dep, (void*)produce, pgrid, BLOCK, pargs)) return false;
      return add_kernel(last, g, &p, (void*)consume, w == EXACT ? grid_for(n_known) : MAX_GRID, BLOCK, cargs);
    case SETTER:
    case SETTER_WHILE: {
      TRY(cudaGraphConditionalHandleCreate(&t.h, g, K, cudaGraphCondAssignDefault));
      cudaGraphNode_t st;
      void* sargs[] = {&t.h, &t.count};
      if (!add_kernel(&p, g, dep, (void*)produce, pgrid, BLOCK, pargs)) return false;
      if (!add_kernel(&st, g, &p, (void*)set_class, 1, 32, sargs)) return false;
      return add_switch(last, g, st, t, s);
    }
    case RESIZE:
    case RESIZE_BATCH:
    case RESIZE_WHILE: {
      // The consumer first (a root for now), so that its handle exists for the resizer's parameter.
      if (!add_kernel(&c, g, nullptr, (void*)consume, MAX_GRID, BLOCK, cargs)) return false;
      if (!make_updatable(c, &t.dn)) return false;
      cudaGraphNode_t r;
      void* rargs[] = {&t.dn, &t.count, &t.err};
      void* rfunc = w == RESIZE_BATCH ? (void*)resizer_batch : (void*)resizer;
      if (!add_kernel(&p, g, dep, (void*)produce, pgrid, BLOCK, pargs)) return false;
      if (!add_kernel(&r, g, &p, rfunc, 1, 32, rargs)) return false;
      TRY(cudaGraphAddDependencies(g, &r, &c, nullptr, 1));
      *last = c;
      return true;
    }
    case FUSED: {
      if (!add_kernel(&c, g, nullptr, (void*)consume, MAX_GRID, BLOCK, cargs)) return false;
      if (!make_updatable(c, &t.dn)) return false;
      void* fargs[] = {&t.x, &t.count, &t.counts, &t.step, &t.dn, &t.err};
      if (!add_kernel(&p, g, dep, (void*)produce_resize, pgrid, BLOCK, fargs)) return false;
      TRY(cudaGraphAddDependencies(g, &p, &c, nullptr, 1));
      *last = c;
      return true;
    }
    default:
      return false;
  }
}

static bool build(Way w, Bufs& b, const std::vector<int>& counts, cudaStream_t s, cudaGraphExec_t* exec,
                  double* build_us) {
  auto t0 = std::chrono::steady_clock::now();
  int S = (int)counts.size();
  cudaGraph_t g;
  CK(cudaGraphCreate(&g, 0));
  std::vector<StepArgs> a(S);
  cudaGraphNode_t last = nullptr;
  bool ok = true;
  if (!is_loop(w)) {
    for (int k = 0; k < S && ok; ++k) {
      a[k] = {b.x, b.y, b.count, b.counts, b.done, b.err, b.grids, k, nullptr, 0, nullptr};
      ok = add_step(w, g, &last, a[k], counts[k], s);
    }
  } else {
    // reset (iter = 0) -> WHILE { step(iter) -> next_iter (iter += 1, loop while iter < S) }
    cudaGraphConditionalHandle wh;
    CK(cudaGraphConditionalHandleCreate(&wh, g, 1, cudaGraphCondAssignDefault));
    cudaGraphNode_t r, wn;
    void* rargs[] = {&b.iter};
    ok = add_kernel(&r, g, nullptr, (void*)reset_iter, 1, 1, rargs);
    cudaGraphNodeParams cp = {};
    cp.type = cudaGraphNodeTypeConditional;
    cp.conditional.handle = wh;
    cp.conditional.type = cudaGraphCondTypeWhile;
    cp.conditional.size = 1;
    cudaError_t we = ok ? cudaGraphAddNode(&wn, g, &r, nullptr, 1, &cp) : cudaSuccess;
    if (we != cudaSuccess) {
      g_refused = std::string("WHILE node: ") + cudaGetErrorName(we);
      ok = false;
    }
    if (ok) {
      cudaGraph_t body = cp.conditional.phGraph_out[0];
      a[0] = {b.x, b.y, b.count, b.counts, b.done, b.err, b.grids, 0, b.iter, 0, nullptr};
      ok = add_step(w, body, &last, a[0], 0, s);
      cudaGraphNode_t nx;
      void* nargs[] = {&b.iter, &wh, &S};
      ok = ok && add_kernel(&nx, body, &last, (void*)next_iter, 1, 1, nargs);
    }
  }
  cudaError_t ie = ok ? cudaGraphInstantiate(exec, g, 0) : cudaSuccess;
  if (ie != cudaSuccess) {
    g_refused = std::string("cudaGraphInstantiate: ") + cudaGetErrorName(ie);
    ok = false;
  }
  cudaError_t ue = ok ? cudaGraphUpload(*exec, s) : cudaSuccess;
  if (ue != cudaSuccess) {
    g_refused = std::string("cudaGraphUpload: ") + cudaGetErrorName(ue);
    cudaGraphExecDestroy(*exec);
    ok = false;
  }
  CK(cudaStreamSynchronize(s));
  cudaGetLastError();
  CK(cudaGraphDestroy(g));
  *build_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  return ok;
}

// Checks every step of one replay: rows done, the grid the consumer ran with, the last step's
// values, and the device API's error word. Returns the number of mismatches.
static int check(Way w, Bufs& b, const std::vector<int>& counts) {
  int S = (int)counts.size(), wrong = 0;
  std::vector<int> done(S);
  std::vector<unsigned> grids(S);
  int err = 0;
  CK(cudaMemcpy(done.data(), b.done, S * sizeof(int), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(grids.data(), b.grids, S * sizeof(unsigned), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(&err, b.err, sizeof(int), cudaMemcpyDeviceToHost));
  for (int k = 0; k < S; ++k) {
    int n = counts[k];
    wrong += done[k] != n;
    unsigned want = 0;
    bool checked = true;
    switch (w) {
      case EXACT: want = grid_for(n); break;
      case OVER:
      case OVER_WHILE: want = MAX_GRID; break;
      case RESIZE:
      case RESIZE_BATCH:
      case FUSED:
      case RESIZE_WHILE: want = n == 0 ? 0 : grid_for(n); break;  // 0: disabled, never ran
      case SETTER:
      case SETTER_WHILE: want = grid_for(cls_of((int)class_of(n))); break;  // the SWITCH's class grid
      default: checked = false;
    }
    wrong += checked && grids[k] != want;
  }
  // The last step that wrote rows (with every 8th step 0 the last step writes none).
  int k = S - 1;
  while (k > 0 && counts[k] == 0) --k;
  int n = counts[k];
  std::vector<float> y(std::max(n, 1));
  CK(cudaMemcpy(y.data(), b.y, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int j = 0; j < n; ++j) wrong += y[j] != 2.0f * (float)((j + k) % 1000) + 1.0f;
  return wrong + (err != 0);
}

static void clear(Bufs& b, int S) {
  CK(cudaMemset(b.done, 0, S * sizeof(int)));
  CK(cudaMemset(b.grids, 0, S * sizeof(unsigned)));
  CK(cudaMemset(b.err, 0, sizeof(int)));
  CK(cudaMemset(b.y, 0, CAP * sizeof(float)));
  CK(cudaDeviceSynchronize());
}

static double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, (size_t)(p * v.size()))];
}
