// Part 1 of sized_grid_probe.cu: what the driver accepts of device-updatable kernel nodes, one
// line each (explicit build, stream capture, a second instantiation, clone, child graph,
// persistence across replays, host updates of the resizer, launches without a separate upload). Included once, by sized_grid_probe.cu, after sized_grid_ways.cuh.
#pragma once
#include "sized_grid_ways.cuh"

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

// resizer_once(flag, grid) -> consume (built with grid 1, device-updatable), with its executable.
struct FlagGraph {
  cudaGraph_t g = nullptr;
  cudaGraphExec_t e = nullptr;
  cudaGraphNode_t c = nullptr, r = nullptr;
  int step = 0;
  const int* noiter = nullptr;
  unsigned grid = 0;
  bool make(Bufs& b, StepArgs& t, int* flag, unsigned g_) {
    grid = g_;
    CK(cudaGraphCreate(&g, 0));
    void* cargs[] = {&b.x, &b.y, &b.count, &b.done, &b.grids, &step, &noiter};
    if (!add_kernel(&c, g, nullptr, (void*)consume, 1, BLOCK, cargs) || !make_updatable(c, &t.dn)) return false;
    void* rargs[] = {&t.dn, &flag, &grid, &b.err};
    if (!add_kernel(&r, g, nullptr, (void*)resizer_once, 1, 32, rargs)) return false;
    TRY(cudaGraphAddDependencies(g, &r, &c, nullptr, 1));
    return true;
  }
  bool instantiate(cudaStream_t s, bool upload) {
    TRY(cudaGraphInstantiate(&e, g, 0));
    if (upload) TRY(cudaGraphUpload(e, s));
    return true;
  }
  void drop() {
    if (e) cudaGraphExecDestroy(e);
    if (g) cudaGraphDestroy(g);
    cudaGetLastError();
    *this = FlagGraph();
  }
};

// One launch of `e` with *flag = f; the grid its consumer ran with in *seen (0: it never ran).
static bool replay(cudaGraphExec_t e, cudaStream_t s, Bufs& b, int* flag, int f, unsigned* seen) {
  CK(cudaMemcpy(flag, &f, sizeof(int), cudaMemcpyHostToDevice));
  CK(cudaMemset(b.grids, 0, sizeof(unsigned)));
  CK(cudaMemset(b.err, 0, sizeof(int)));
  CK(cudaDeviceSynchronize());  // the legacy stream's copies land before the non-blocking stream's launch
  TRY(cudaGraphLaunch(e, s));
  TRY(cudaStreamSynchronize(s));
  int err = 0;
  CK(cudaMemcpy(seen, b.grids, sizeof(unsigned), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(&err, b.err, sizeof(int), cudaMemcpyDeviceToHost));
  if (err) {
    g_refused = std::string("a device update returned ") + cudaGetErrorName((cudaError_t)err);
    return false;
  }
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

  // The host's side of such a graph, each on a graph of its own (none may be instantiated twice):
  // resizer_once(flag, grid) -> consume, the consumer built with grid 1.
  int* flag;
  CK(cudaMalloc(&flag, sizeof(int)));
  FlagGraph fg;
  std::string d;
  unsigned seen[3] = {0, 0, 0};

  // persist: the grid set to 7 in replay 1 only; what replay 2 runs.
  ok = fg.make(b, t, flag, 7) && fg.instantiate(s, true) && replay(fg.e, s, b, flag, 1, &seen[0]) &&
       replay(fg.e, s, b, flag, 0, &seen[1]);
  if (ok) {
    d = "; built with grid 1, set to 7 in replay 1: replay 1 ran " + std::to_string(seen[0]) +
        ", replay 2 (no update) ran " + std::to_string(seen[1]) +
        (seen[1] == 7 ? " (updates persist)" : " (the built grid is restored)");
    ok = seen[0] == 7;
  }
  say("persist", ok, d, js, &first);
  fg.drop();

  // exec-set: the resizer's own parameter changed on the executable graph between launches (as
  // an enqueue sets its setter's sequence number), without and then with a new upload.
  d.clear();
  ok = fg.make(b, t, flag, 7) && fg.instantiate(s, true) && replay(fg.e, s, b, flag, 1, &seen[0]);
  if (ok) {
    unsigned nine = 9;
    void* rargs[] = {&t.dn, &flag, &nine, &b.err};
    cudaKernelNodeParams kp = {};
    kp.func = (void*)resizer_once;
    kp.gridDim = dim3(1);
    kp.blockDim = dim3(32);
    kp.kernelParams = rargs;
    cudaError_t xe = cudaGraphExecKernelNodeSetParams(fg.e, fg.r, &kp);
    if (xe != cudaSuccess) {
      g_refused = std::string("cudaGraphExecKernelNodeSetParams: ") + cudaGetErrorName(xe);
      cudaGetLastError();
      ok = false;
    }
    ok = ok && replay(fg.e, s, b, flag, 1, &seen[1]);
    ok = ok && cudaGraphUpload(fg.e, s) == cudaSuccess && replay(fg.e, s, b, flag, 1, &seen[2]);
    if (ok) {
      d = "; grid 7, then the resizer's parameter set to 9 on the executable graph: the next launch ran " +
          std::to_string(seen[1]) + ", after a new upload " + std::to_string(seen[2]);
      ok = seen[0] == 7 && seen[1] == 9;
    }
  }
  say("exec-set", ok, d, js, &first);
  fg.drop();

  // no-upload: instantiated and launched with no cudaGraphUpload (the documentation asks for one;
  // a user's own instantiation of a captured graph may skip it).
  d.clear();
  ok = fg.make(b, t, flag, 7) && fg.instantiate(s, false) && replay(fg.e, s, b, flag, 1, &seen[0]);
  if (ok) {
    d = "; set to 7 with no upload: the launch ran " + std::to_string(seen[0]);
    ok = seen[0] == 7;
  }
  say("no-upload", ok, d, js, &first);
  fg.drop();

  // upload-flag: instantiated with cudaGraphInstantiateFlagUpload instead of a separate upload.
  d.clear();
  ok = fg.make(b, t, flag, 7);
  if (ok) {
    cudaGraphInstantiateParams ip = {};
    ip.flags = cudaGraphInstantiateFlagUpload;
    ip.uploadStream = s;
    cudaError_t ie = cudaGraphInstantiateWithParams(&fg.e, fg.g, &ip);
    if (ie != cudaSuccess) {
      g_refused = std::string("cudaGraphInstantiateWithParams: ") + cudaGetErrorName(ie);
      cudaGetLastError();
      fg.e = nullptr;
      ok = false;
    }
    ok = ok && replay(fg.e, s, b, flag, 1, &seen[0]);
    if (ok) {
      d = "; set to 7: the launch ran " + std::to_string(seen[0]);
      ok = seen[0] == 7;
    }
  }
  say("upload-flag", ok, d, js, &first);
  fg.drop();
  CK(cudaFree(flag));
  fprintf(js, "\n ],\n");
}
