// Issue 36's third probe: a consumer's grid set on the device, in the same replay, through a
// device-updatable kernel node (CUDA 12.4+), instead of a SWITCH over size classes. Not library
// code: its measured output is committed under results/, and the library's design follows from it.
//
// The second probe (sized_step_hops_probe.cu) found that a SWITCH's device-side launch of its body
// costs about 7 us of a sized step's 9.8, where the exact grid costs 1.9 and a capped over-launch
// 4.0. A kernel node created with cudaLaunchAttributeDeviceUpdatableKernelNode hands back a
// cudaGraphDeviceNode_t, and a kernel that runs before it in the same graph can set its grid
// (cudaGraphKernelNodeSetGridDim) or disable it (cudaGraphKernelNodeSetEnabled): the consumer then
// runs with the exact grid with no conditional node at all.
//
// Part 1, what the driver accepts (each line says yes, or the error it returned):
//   explicit    nodes added one by one; the consumer opted in with cudaGraphKernelNodeSetAttribute
//               after it was added, the resizer added after it (its parameter is the handle),
//               then the edge resizer -> consumer;
//   capture     stream capture, as a user's capture records a sized step: the resizer is captured
//               first with a null handle, the consumer then launched with the attribute, and the
//               resizer's parameters set once the handle exists (during the capture, else after);
//   capture-add stream capture, the consumer, its opt-in, the resizer and the edge added to the
//               capture's graph explicitly, as SizedLaunch::record adds its setter and SWITCH;
//   twice       a second cudaGraphInstantiate of a graph holding such a node (documented: refused);
//   clone       cudaGraphClone of it (the library clones bodies into SWITCH nodes);
//   child       a child-graph node made from it (a sized step inserted into another graph);
//   persist     whether a device update made in one replay is still in force in the next.
// Part 2, per step inside one graph of S steps, p50 and p99 over replays, every step checked
// (each step's rows counted by the consumer, its grid recorded, the last step's values):
//   exact       the consumer's grid for the step's count, known when the graph was built (the floor);
//   over        the capacity's grid (4096 blocks), blocks past the count exit at once;
//   setter      producer -> one-thread setter -> SWITCH over 6 classes (the library today);
//   resize      producer -> one-thread resizer -> the device-updatable consumer, exact grid;
//   fused       the producer itself sets the consumer's grid once it has written the count;
//               (resize and fused set the grid and enable the node at every step, two device
//               calls where one batched cudaGraphKernelNodeUpdatesApply could do: an upper bound)
//   and the loop forms, the same S steps as iterations of one WHILE node (the count read from a
//   device iteration counter): over-while, setter-while, resize-while (a body's node updated once
//   per iteration, which part 1 cannot show). The loop forms' producer runs the capacity's grid
//   (the count is the iteration's), the others' the step's exact grid: compare a loop form with
//   over-while (per_over), not with exact.
// Count regimes: every step 1000 (the ways' overhead alone); log-uniform in [1, 2^20]; the same
// with every 8th step 0, which the resize ways answer by disabling the consumer (its grid stays
// unrecorded) and, in resize-while, enabling the same node again at the next iteration.
// Build (GPU host): nvcc -O3 -std=c++17 -arch=sm_90 sized_grid_probe.cu -o probe
// Run: ./probe [STEPS REPEATS JSON_PATH]
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

enum Way { EXACT, OVER, SETTER, RESIZE, FUSED, OVER_WHILE, SETTER_WHILE, RESIZE_WHILE, WAYS };
static const char* way_name[WAYS] = {"exact", "over", "setter", "resize", "fused",
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
    case RESIZE_WHILE: {
      // The consumer first (a root for now), so that its handle exists for the resizer's parameter.
      if (!add_kernel(&c, g, nullptr, (void*)consume, MAX_GRID, BLOCK, cargs)) return false;
      if (!make_updatable(c, &t.dn)) return false;
      cudaGraphNode_t r;
      void* rargs[] = {&t.dn, &t.count, &t.err};
      if (!add_kernel(&p, g, dep, (void*)produce, pgrid, BLOCK, pargs)) return false;
      if (!add_kernel(&r, g, &p, (void*)resizer, 1, 32, rargs)) return false;
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

// ---- Part 1 -------------------------------------------------------------------------------

// A small graph: produce(n) -> resizer -> consume (updatable), built explicitly.
static bool graph_explicit(Bufs& b, cudaGraph_t* out, StepArgs& t) {
  CK(cudaGraphCreate(out, 0));
  cudaGraphNode_t last = nullptr;
  return add_step(RESIZE, *out, &last, t, 0, nullptr);
}

static bool run_exec(cudaGraphExec_t e, Bufs& b, cudaStream_t s, const std::vector<int>& counts, Way w, int* wrong) {
  TRY(cudaGraphUpload(e, s));
  clear(b, (int)counts.size());
  TRY(cudaGraphLaunch(e, s));
  TRY(cudaStreamSynchronize(s));
  *wrong = check(w, b, counts);
  return true;
}
static bool run_once(cudaGraph_t g, Bufs& b, cudaStream_t s, const std::vector<int>& counts, Way w, int* wrong) {
  cudaGraphExec_t e;
  TRY(cudaGraphInstantiate(&e, g, 0));
  bool ok = run_exec(e, b, s, counts, w, wrong);
  cudaGraphExecDestroy(e);
  cudaGetLastError();
  return ok;
}

static void say(const char* what, bool ok, const std::string& detail, FILE* js, bool* first) {
  printf("accept %-11s %s%s%s\n", what, ok ? "yes" : "no: ", ok ? "" : g_refused.c_str(), detail.c_str());
  fprintf(js, "%s\n  {\"what\": \"%s\", \"accepted\": %s, \"detail\": \"%s%s\"}", *first ? "" : ",", what,
          ok ? "true" : "false", ok ? "" : g_refused.c_str(), detail.c_str());
  *first = false;
  g_refused.clear();
}

// As SizedLaunch::record adds its nodes today (raw/switch_graph.rs): the producer captured, then
// the consumer, its opt-in, the resizer and the edge added to the capture's own graph behind the
// capture's dependencies, which then become the consumer.
static bool capture_add_step(Bufs& b, cudaStream_t s, StepArgs& t, cudaGraph_t* g) {
  TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  produce<<<grid_for(CAP), BLOCK, 0, s>>>(b.x, b.count, b.counts, 0, nullptr);
  cudaStreamCaptureStatus st;
  const cudaGraphNode_t* deps = nullptr;
  size_t nd = 0;
  cudaGraph_t cg;
  TRY(cudaStreamGetCaptureInfo(s, &st, nullptr, &cg, &deps, nullptr, &nd));
  std::vector<cudaGraphNode_t> after(deps, deps + nd);
  cudaGraphNode_t c, r;
  void* cargs[] = {&t.x, &t.y, &t.count, &t.done, &t.grids, &t.step, &t.iter};
  if (!add_kernel(&c, cg, nullptr, (void*)consume, MAX_GRID, BLOCK, cargs)) return false;
  if (!make_updatable(c, &t.dn)) return false;
  void* rargs[] = {&t.dn, &t.count, &t.err};
  cudaGraphNodeParams np = {};
  np.type = cudaGraphNodeTypeKernel;
  np.kernel.func = (void*)resizer;
  np.kernel.gridDim = dim3(1);
  np.kernel.blockDim = dim3(32);
  np.kernel.kernelParams = rargs;
  TRY(cudaGraphAddNode(&r, cg, after.data(), nullptr, after.size(), &np));
  TRY(cudaGraphAddDependencies(cg, &r, &c, nullptr, 1));
  TRY(cudaStreamUpdateCaptureDependencies(s, &c, nullptr, 1, cudaStreamSetCaptureDependencies));
  TRY(cudaStreamEndCapture(s, g));
  return true;
}

static bool capture_step(Bufs& b, cudaStream_t s, StepArgs& t, cudaGraph_t* g, bool set_during, std::string* how) {
  TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  produce<<<grid_for(CAP), BLOCK, 0, s>>>(b.x, b.count, b.counts, 0, nullptr);
  cudaGraphDeviceNode_t none = nullptr;
  resizer<<<1, 32, 0, s>>>(none, b.count, b.err);
  cudaStreamCaptureStatus st;
  const cudaGraphNode_t* deps = nullptr;
  size_t nd = 0;
  cudaGraph_t cg;
  TRY(cudaStreamGetCaptureInfo(s, &st, nullptr, &cg, &deps, nullptr, &nd));
  if (nd != 1) {
    g_refused = "capture info: " + std::to_string(nd) + " dependencies";
    return false;
  }
  cudaGraphNode_t rnode = deps[0];
  cudaLaunchAttribute at = {};
  at.id = cudaLaunchAttributeDeviceUpdatableKernelNode;
  at.val.deviceUpdatableKernelNode.deviceUpdatable = 1;
  cudaLaunchConfig_t cf = {};
  cf.gridDim = dim3(MAX_GRID);
  cf.blockDim = dim3(BLOCK);
  cf.stream = s;
  cf.attrs = &at;
  cf.numAttrs = 1;
  TRY(cudaLaunchKernelEx(&cf, consume, (const float*)b.x, b.y, (const int*)b.count, b.done, b.grids, 0,
                         (const int*)nullptr));
  t.dn = at.val.deviceUpdatableKernelNode.devNode;
  if (!t.dn) {
    g_refused = "no device handle from the captured launch";
    return false;
  }
  void* rargs[] = {&t.dn, &t.count, &t.err};
  cudaKernelNodeParams kp = {};
  kp.func = (void*)resizer;
  kp.gridDim = dim3(1);
  kp.blockDim = dim3(32);
  kp.kernelParams = rargs;
  if (set_during) {
    cudaError_t e = cudaGraphKernelNodeSetParams(rnode, &kp);
    *how = e == cudaSuccess ? "; the resizer's handle set during the capture"
                            : std::string("; set during the capture refused (") + cudaGetErrorName(e) + ")";
    cudaGetLastError();
    if (e != cudaSuccess) set_during = false;
  }
  TRY(cudaStreamEndCapture(s, g));
  if (!set_during) TRY(cudaGraphKernelNodeSetParams(rnode, &kp));
  return true;
}

static void part1(Bufs& b, cudaStream_t s, FILE* js) {
  bool first = true;
  std::vector<int> one = {3000};
  CK(cudaMemcpy(b.counts, one.data(), sizeof(int), cudaMemcpyHostToDevice));
  StepArgs t = {b.x, b.y, b.count, b.counts, b.done, b.err, b.grids, 0, nullptr, 0, nullptr};
  int wrong = -1;

  cudaGraph_t g = nullptr;
  bool ok = graph_explicit(b, &g, t) && run_once(g, b, s, one, RESIZE, &wrong);
  say("explicit", ok && wrong == 0, ok ? "; mismatches " + std::to_string(wrong) : "", js, &first);

  if (g) {
    // The same graph once more: a second instantiation, a clone, a child-graph node.
    cudaGraphExec_t e1, e2;
    bool a1 = cudaGraphInstantiate(&e1, g, 0) == cudaSuccess;
    cudaError_t r2 = cudaGraphInstantiate(&e2, g, 0);
    cudaGetLastError();
    g_refused = std::string("second cudaGraphInstantiate: ") + cudaGetErrorName(r2);
    say("twice", r2 == cudaSuccess, a1 ? "" : " (the first instantiation also failed)", js, &first);
    if (r2 == cudaSuccess) CK(cudaGraphExecDestroy(e2));
    if (a1) CK(cudaGraphExecDestroy(e1));
    cudaGraph_t cl;
    cudaError_t rc = cudaGraphClone(&cl, g);
    cudaGetLastError();
    g_refused = std::string("cudaGraphClone: ") + cudaGetErrorName(rc);
    cudaGraphNode_t cn = nullptr;
    cudaGraphDeviceNode_t cdn = nullptr;
    say("clone", rc == cudaSuccess, rc == cudaSuccess ? updatable_in_copy(cl, t.dn, &cn, &cdn) : "", js, &first);
    if (rc == cudaSuccess) CK(cudaGraphDestroy(cl));
    cudaGraph_t parent;
    CK(cudaGraphCreate(&parent, 0));
    cudaGraphNode_t ch;
    cudaError_t rch = cudaGraphAddChildGraphNode(&ch, parent, nullptr, 0, g);
    cudaGetLastError();
    g_refused = std::string("cudaGraphAddChildGraphNode: ") + cudaGetErrorName(rch);
    std::string d;
    bool okc = rch == cudaSuccess;
    if (okc) {
      // The copy's resizer carries the original's handle: run the copy only with a handle that is
      // the copy's own (a device update through a handle of no node in the running graph is not
      // defined, and a fault there would end the whole run).
      cudaGraph_t cg = nullptr;
      okc = cudaGraphChildGraphNodeGetGraph(ch, &cg) == cudaSuccess;
      d = okc ? updatable_in_copy(cg, t.dn, &cn, &cdn) : "; cudaGraphChildGraphNodeGetGraph refused";
      okc = okc && cdn;
      if (okc && cdn != t.dn) {
        // Re-point the copy's resizer (the consumer's one dependency) at the copy's handle.
        cudaGraphNode_t rn = nullptr;
        size_t nd = 1;
        void* rargs[] = {&cdn, &t.count, &t.err};
        cudaKernelNodeParams kp = {};
        kp.func = (void*)resizer;
        kp.gridDim = dim3(1);
        kp.blockDim = dim3(32);
        kp.kernelParams = rargs;
        okc = cudaGraphNodeGetDependencies(cn, &rn, nullptr, &nd) == cudaSuccess && nd == 1 && rn &&
              cudaGraphKernelNodeSetParams(rn, &kp) == cudaSuccess;
        cudaGetLastError();
        d += okc ? ", the copy's resizer re-pointed at it" : ", re-pointing the copy's resizer refused";
      }
      g_refused = "the child's copy";
      if (okc) {
        okc = run_once(parent, b, s, one, RESIZE, &wrong);
        if (okc) d += "; the child's copy resized: mismatches " + std::to_string(wrong);
        okc = okc && wrong == 0;
      }
    }
    say("child", okc, d, js, &first);
    CK(cudaGraphDestroy(parent));
    CK(cudaGraphDestroy(g));
  }

  for (int during = 1; during >= 0; --during) {
    cudaGraph_t cg = nullptr;
    std::string how = during ? "" : "; the resizer's handle set after the capture ended";
    ok = capture_step(b, s, t, &cg, during, &how) && run_once(cg, b, s, one, RESIZE, &wrong);
    if (!ok) {
      cudaStreamCaptureStatus st;
      if (cudaStreamIsCapturing(s, &st) == cudaSuccess && st != cudaStreamCaptureStatusNone) {
        cudaGraph_t junk = nullptr;
        cudaStreamEndCapture(s, &junk);
        if (junk) cudaGraphDestroy(junk);
      }
      cudaGetLastError();
    }
    say(during ? "capture" : "capture-end", ok && wrong == 0, ok ? how + "; mismatches " + std::to_string(wrong) : how,
        js, &first);
    if (cg) CK(cudaGraphDestroy(cg));
    if (ok) break;  // setting the handle after the capture is the fallback
  }

  {
    cudaGraph_t cg = nullptr;
    ok = capture_add_step(b, s, t, &cg) && run_once(cg, b, s, one, RESIZE, &wrong);
    if (!ok) {
      cudaStreamCaptureStatus st;
      if (cudaStreamIsCapturing(s, &st) == cudaSuccess && st != cudaStreamCaptureStatusNone) {
        cudaGraph_t junk = nullptr;
        cudaStreamEndCapture(s, &junk);
        if (junk) cudaGraphDestroy(junk);
      }
      cudaGetLastError();
    }
    say("capture-add", ok && wrong == 0, ok ? "; mismatches " + std::to_string(wrong) : "", js, &first);
    if (cg) CK(cudaGraphDestroy(cg));
  }

  // Persistence: a consumer built with grid 1, resized to 7 in replay 1 only.
  {
    int* flag;
    CK(cudaMalloc(&flag, sizeof(int)));
    cudaGraph_t pg;
    CK(cudaGraphCreate(&pg, 0));
    cudaGraphNode_t c, r;
    int step = 0;
    const int* noiter = nullptr;
    unsigned seven = 7;
    void* cargs[] = {&b.x, &b.y, &b.count, &b.done, &b.grids, &step, &noiter};
    std::string d;
    ok = add_kernel(&c, pg, nullptr, (void*)consume, 1, BLOCK, cargs) && make_updatable(c, &t.dn);
    void* rargs[] = {&t.dn, &flag, &seven, &b.err};
    ok = ok && add_kernel(&r, pg, nullptr, (void*)resizer_once, 1, 32, rargs);
    cudaGraphExec_t e;
    if (ok) {
      cudaError_t re = cudaGraphAddDependencies(pg, &r, &c, nullptr, 1);
      ok = re == cudaSuccess && cudaGraphInstantiate(&e, pg, 0) == cudaSuccess && cudaGraphUpload(e, s) == cudaSuccess;
      if (!ok) g_refused = "persist graph";
    }
    if (ok) {
      unsigned seen[2];
      for (int rep = 0; rep < 2; ++rep) {
        int f = rep == 0;
        CK(cudaMemcpy(flag, &f, sizeof(int), cudaMemcpyHostToDevice));
        CK(cudaMemset(b.grids, 0, sizeof(unsigned)));
        CK(cudaDeviceSynchronize());
        cudaError_t le = cudaGraphLaunch(e, s);
        if (le == cudaSuccess) le = cudaStreamSynchronize(s);
        if (le != cudaSuccess) {
          g_refused = std::string("persist replay: ") + cudaGetErrorName(le);
          cudaGetLastError();
          ok = false;
          break;
        }
        CK(cudaMemcpy(&seen[rep], b.grids, sizeof(unsigned), cudaMemcpyDeviceToHost));
      }
      if (ok) {
        d = "; built with grid 1, set to 7 in replay 1: replay 1 ran " + std::to_string(seen[0]) +
            ", replay 2 (no update) ran " + std::to_string(seen[1]) +
            (seen[1] == 7 ? " (updates persist)" : " (the built grid is restored)");
        ok = seen[0] == 7;
      }
      CK(cudaGraphExecDestroy(e));
    }
    say("persist", ok, d, js, &first);
    CK(cudaGraphDestroy(pg));
    CK(cudaFree(flag));
  }
  fprintf(js, "\n ],\n");
}

int main(int argc, char** argv) {
  int S = argc > 1 ? atoi(argv[1]) : 64;
  int R = argc > 2 ? atoi(argv[2]) : 50;
  const char* json = argc > 3 ? argv[3] : "probe.json";
  int dev = 0, drv = 0, rt = 0;
  CK(cudaSetDevice(dev));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, dev));
  CK(cudaDriverGetVersion(&drv));
  CK(cudaRuntimeGetVersion(&rt));
  printf("device %s, driver API %d, runtime %d, %d SMs; %d steps per graph, %d replays after 5 warm-ups\n", prop.name,
         drv, rt, prop.multiProcessorCount, S, R);
  FILE* js = fopen(json, "w");
  if (!js) {
    printf("FAIL cannot write %s\n", json);
    return 1;
  }
  fprintf(js, "{\n \"device\": \"%s\",\n \"driver_api\": %d,\n \"runtime\": %d,\n \"steps\": %d,\n \"replays\": %d,\n",
          prop.name, drv, rt, S, R);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Bufs b;
  CK(cudaMalloc(&b.x, CAP * sizeof(float)));
  CK(cudaMalloc(&b.y, CAP * sizeof(float)));
  CK(cudaMalloc(&b.count, sizeof(int)));
  CK(cudaMalloc(&b.counts, S * sizeof(int)));
  CK(cudaMalloc(&b.done, S * sizeof(int)));
  CK(cudaMalloc(&b.grids, S * sizeof(unsigned)));
  CK(cudaMalloc(&b.iter, sizeof(int)));
  CK(cudaMalloc(&b.err, sizeof(int)));

  fprintf(js, " \"accepts\": [");
  part1(b, s, js);

  fprintf(js, " \"ways\": [");
  bool first = true;
  const char* regimes[3] = {"n=1000", "log-uniform[1,2^20]", "log-uniform, every 8th 0"};
  for (int r = 0; r < 3; ++r) {
    std::vector<int> counts(S);
    std::mt19937 rng(7);  // regimes 1 and 2 draw the same counts
    std::uniform_real_distribution<double> u(0, std::log((double)CAP));
    for (int k = 0; k < S; ++k) {
      counts[k] = r == 0 ? 1000 : std::max(1, (int)std::exp(u(rng)));
      if (r == 2 && k % 8 == 7) counts[k] = 0;
    }
    std::vector<int> sorted = counts;
    std::sort(sorted.begin(), sorted.end());
    printf("%s: median count %d\n", regimes[r], sorted[S / 2]);
    CK(cudaMemcpy(b.counts, counts.data(), S * sizeof(int), cudaMemcpyHostToDevice));
    double base[WAYS] = {0};
    for (int w = 0; w < WAYS; ++w) {
      cudaGraphExec_t e;
      double build_us = 0;
      if (!build((Way)w, b, counts, s, &e, &build_us)) {
        printf("%-26s %-13s refused: %s\n", regimes[r], way_name[w], g_refused.c_str());
        fprintf(js, "%s\n  {\"regime\": \"%s\", \"way\": \"%s\", \"refused\": \"%s\"}", first ? "" : ",", regimes[r],
                way_name[w], g_refused.c_str());
        first = false;
        g_refused.clear();
        continue;
      }
      cudaEvent_t e0, e1;
      CK(cudaEventCreate(&e0));
      CK(cudaEventCreate(&e1));
      std::vector<double> per;
      int wrong = 0;
      for (int i = 0; i < R + 5; ++i) {
        clear(b, S);
        CK(cudaEventRecord(e0, s));
        CK(cudaGraphLaunch(e, s));
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (i >= 5) per.push_back(1000.0 * ms / S);
        if (i == 0 || i == R + 4) wrong += check((Way)w, b, counts);
      }
      double p50 = pct(per, 0.5), p99 = pct(per, 0.99);
      base[w] = p50;
      double ex = base[EXACT], ov = base[is_loop((Way)w) ? OVER_WHILE : OVER];
      printf("%-26s %-13s per step p50 %7.2f us  p99 %7.2f us  /exact %.3f  /over %.3f  build %8.0f us  wrong %d\n",
             regimes[r], way_name[w], p50, p99, ex > 0 ? p50 / ex : 0.0, ov > 0 ? p50 / ov : 0.0, build_us, wrong);
      fprintf(js,
              "%s\n  {\"regime\": \"%s\", \"way\": \"%s\", \"p50_us\": %.3f, \"p99_us\": %.3f, \"per_exact\": %.4f, "
              "\"per_over\": %.4f, \"build_us\": %.0f, \"wrong\": %d}",
              first ? "" : ",", regimes[r], way_name[w], p50, p99, ex > 0 ? p50 / ex : 0.0, ov > 0 ? p50 / ov : 0.0,
              build_us, wrong);
      first = false;
      CK(cudaGraphExecDestroy(e));
      CK(cudaEventDestroy(e0));
      CK(cudaEventDestroy(e1));
    }
  }
  fprintf(js, "\n ]\n}\n");
  fclose(js);
  printf("done\n");
  return 0;
}
