// Issue 36's probe: which GPU steps can a device-resident count size through a SWITCH conditional
// node over size classes 2^k, what do they cost, and how does a loop whose count changes every step
// compare with the ways users size the next step today. Not library code: its measured output is
// committed under results/ and the design decision is taken from it.
//
// Bodies tried (one SWITCH per kind, classes 2^10 .. 2^22, step 4x):
//   kernel   a user kernel launched with the class's grid, bounded by the device count;
//   scan     cub::DeviceScan::InclusiveSum over the class (pad rows set to 0);
//   select   cub::DeviceSelect::Flagged over the class (pad flags 0) with its device count out;
//   gemm     cublasSgemm with the class's row count (built with -DWITH_CUBLAS);
//   pack     this library's graph-mode pack (srb_record, mapped slot) recorded in every body,
//            built with -DWITH_SRB against libsized_readback.a.
// For each: capture + instantiate time, host cost of cudaGraphLaunch, and exactness over counts.
//
// The loop (kernel body): S steps, the producer of step k writes a count that changes every step
// (log-uniform in [1, 2^22]); the consumer processes count rows. Four ways, per-step p50 and p99
// over repeats:
//   sync    count copied to the host, stream synchronized, consumer launched with the exact grid;
//   over    consumer launched with the capacity's grid, blocks past the count exit at once;
//   sized   a one-thread kernel sets the SWITCH to the count's class; body = consumer, class grid;
//   while   one graph: a WHILE node whose body is producer + grid-stride consumer (fixed grid of
//           4 blocks per SM) + a step counter that ends the loop: no host in the loop at all.
// Build (GPU host): nvcc -O3 -std=c++17 -arch=sm_90 sized_launch_probe.cu -lcuda [-DWITH_CUBLAS -lcublas]
//   [-DWITH_SRB -I capi/include -I include .gpu-capi/libsized_readback.a -lpthread -ldl -lm -lrt]
#include <cub/cub.cuh>
#include <cuda.h>
#include <cuda_runtime.h>
#ifdef WITH_CUBLAS
#include <cublas_v2.h>
#endif
#ifdef WITH_SRB
#include "sized_readback.h"
#endif
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#define CK(x)                                                                                   \
  do {                                                                                          \
    cudaError_t e_ = (x);                                                                       \
    if (e_ != cudaSuccess) {                                                                    \
      printf("FAIL %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__);                 \
      exit(1);                                                                                  \
    }                                                                                           \
  } while (0)

static const int K = 7;  // classes 2^10, 2^12, ..., 2^22
static int cls_of(int c) { return 1 << (10 + 2 * c); }
static const int CAP = 1 << 22;
using clk = std::chrono::steady_clock;
static double us(clk::time_point a, clk::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}
static double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, (size_t)(p * v.size()))];
}

__global__ void set_class(cudaGraphConditionalHandle h, const int *count) {
  int n = *count, c = 0;
  while (c < K - 1 && n > (1 << (10 + 2 * c))) ++c;
  cudaGraphSetConditional(h, c);
}
// The producer of step `step`: count from the device-side table, rows x[i] = i.
__global__ void produce(float *x, int *count, const int *counts, const int *step_ptr, int fixed_step) {
  int step = step_ptr ? *step_ptr : fixed_step;
  int n = counts[step];
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = (float)(i % 1000);
  if (blockIdx.x == 0 && threadIdx.x == 0) *count = n;
}
// The consumer: a few FMAs per row, rows [0, *count); one thread per row or grid-stride.
__global__ void consume(const float *x, float *y, const int *count) {
  int n = *count;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float v = x[i];
#pragma unroll
    for (int k = 0; k < 8; ++k) v = v * 1.0001f + 0.5f;
    y[i] = v;
  }
}
__global__ void pad_f(float *x, const int *count, int cls, float v) {
  for (int i = *count + blockIdx.x * blockDim.x + threadIdx.x; i < cls; i += gridDim.x * blockDim.x) x[i] = v;
}
__global__ void pad_flags(char *f, const float *x, const int *count, int cls) {
  int n = *count;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < cls; i += gridDim.x * blockDim.x)
    f[i] = i < n && ((int)x[i] % 3 == 0);
}
__global__ void loop_step(cudaGraphConditionalHandle h, int *step, int steps) {
  int s = ++*step;
  cudaGraphSetConditional(h, s < steps ? 1 : 0);
}

struct Bufs {
  float *x, *y;
  int *count, *counts, *step, *sel_n;
  char *flags;
  void *tmp;
  size_t tmp_bytes;
};

// A graph: set_class -> SWITCH{K bodies, body c captured by `body(c, stream)`}.
struct Switch {
  cudaGraphExec_t exec = nullptr;
  double build_us = 0;
  std::string status = "ok";
};
static Switch build_switch(Bufs &b, cudaStream_t s, const std::function<cudaError_t(int, cudaStream_t)> &body) {
  Switch out;
  auto t0 = clk::now();
  cudaGraph_t g;
  CK(cudaGraphCreate(&g, 0));
  cudaGraphConditionalHandle h;
  CK(cudaGraphConditionalHandleCreate(&h, g, 0, 0));
  cudaGraphNode_t setn;
  cudaKernelNodeParams kp = {};
  void *args[] = {&h, &b.count};
  kp.func = (void *)set_class;
  kp.gridDim = 1;
  kp.blockDim = 1;
  kp.kernelParams = args;
  CK(cudaGraphAddKernelNode(&setn, g, nullptr, 0, &kp));
  cudaGraphNodeParams cp = {};
  cp.type = cudaGraphNodeTypeConditional;
  cp.conditional.handle = h;
  cp.conditional.type = cudaGraphCondTypeSwitch;
  cp.conditional.size = K;
  cudaGraphNode_t sw;
  CK(cudaGraphAddNode(&sw, g, &setn, nullptr, 1, &cp));
  for (int c = 0; c < K; ++c) {
    cudaGraph_t bodyg = cp.conditional.phGraph_out[c];
    CK(cudaStreamBeginCaptureToGraph(s, bodyg, nullptr, nullptr, 0, cudaStreamCaptureModeRelaxed));
    cudaError_t e = body(c, s);
    cudaGraph_t got;
    cudaError_t e2 = cudaStreamEndCapture(s, &got);
    if (e != cudaSuccess || e2 != cudaSuccess) {
      out.status = std::string("capture: ") + cudaGetErrorString(e != cudaSuccess ? e : e2);
      cudaGetLastError();
      return out;
    }
  }
  cudaError_t ie = cudaGraphInstantiate(&out.exec, g, 0);
  if (ie != cudaSuccess) {
    out.status = std::string("instantiate: ") + cudaGetErrorString(ie);
    out.exec = nullptr;
    cudaGetLastError();
    return out;
  }
  CK(cudaGraphUpload(out.exec, s));
  CK(cudaStreamSynchronize(s));
  out.build_us = us(t0, clk::now());
  return out;
}

// Host cost of one cudaGraphLaunch (p50 over 200, stream drained between batches of 10).
static double launch_cost(cudaGraphExec_t e, cudaStream_t s) {
  std::vector<double> v;
  for (int r = 0; r < 20; ++r) {
    for (int i = 0; i < 10; ++i) {
      auto t0 = clk::now();
      CK(cudaGraphLaunch(e, s));
      v.push_back(us(t0, clk::now()));
    }
    CK(cudaStreamSynchronize(s));
  }
  return pct(v, 0.5);
}

static int set_count(Bufs &b, cudaStream_t s, int n) {
  std::vector<int> one = {n};
  CK(cudaMemcpyAsync(b.counts, one.data(), 4, cudaMemcpyHostToDevice, s));
  produce<<<1024, 256, 0, s>>>(b.x, b.count, b.counts, nullptr, 0);
  return n;
}

int main(int argc, char **argv) {
  int steps = argc > 1 ? atoi(argv[1]) : 64, repeats = argc > 2 ? atoi(argv[2]) : 30;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  int drv = 0;
  CK(cudaDriverGetVersion(&drv));
  printf("device %s, driver API %d, %d SMs\n", prop.name, drv, prop.multiProcessorCount);
  Bufs b;
  CK(cudaMalloc(&b.x, CAP * 4));
  CK(cudaMalloc(&b.y, CAP * 4));
  CK(cudaMalloc(&b.count, 4));
  CK(cudaMalloc(&b.sel_n, 4));
  CK(cudaMalloc(&b.step, 4));
  CK(cudaMalloc(&b.flags, CAP));
  CK(cudaMalloc(&b.counts, 4096 * 4));
  size_t t1 = 0, t2 = 0;
  cub::DeviceScan::InclusiveSum(nullptr, t1, b.x, b.y, CAP);
  cub::DeviceSelect::Flagged(nullptr, t2, b.x, b.flags, b.y, b.sel_n, CAP);
  b.tmp_bytes = std::max(t1, t2);
  CK(cudaMalloc(&b.tmp, b.tmp_bytes));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::vector<float> hx(CAP), hy(CAP);
  const int probe_ns[] = {1, 1000, 1024, 1025, 70000, 300000, 1 << 22};

  // ---- bodies ----
  printf("\n# bodies: SWITCH over %d classes 2^10..2^22\n", K);
  auto report = [&](const char *name, Switch &sw, const std::function<bool(int)> &check) {
    if (!sw.exec) {
      printf("body %-7s REFUSED (%s)\n", name, sw.status.c_str());
      return;
    }
    int wrong = 0;
    for (int n : probe_ns) {
      set_count(b, s, n);
      CK(cudaGraphLaunch(sw.exec, s));
      CK(cudaStreamSynchronize(s));
      if (!check(n)) ++wrong, printf("  %s n=%d WRONG\n", name, n);
    }
    printf("body %-7s accepted: build %.0f us, launch (host) %.2f us, %d of %zu counts wrong\n", name, sw.build_us,
           launch_cost(sw.exec, s), wrong, sizeof(probe_ns) / sizeof(probe_ns[0]));
  };
  auto y_is = [&](int n, const std::function<float(int)> &f) {
    CK(cudaMemcpy(hy.data(), b.y, (size_t)n * 4, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i)
      if (std::fabs(hy[i] - f(i)) > 1e-3f * std::max(1.0f, std::fabs(f(i)))) return false;
    return true;
  };
  auto ref_consume = [](int i) {
    float v = (float)(i % 1000);
    for (int k = 0; k < 8; ++k) v = v * 1.0001f + 0.5f;
    return v;
  };
  Switch kernel_sw = build_switch(b, s, [&](int c, cudaStream_t st) {
    consume<<<(cls_of(c) + 255) / 256, 256, 0, st>>>(b.x, b.y, b.count);
    return cudaGetLastError();
  });
  report("kernel", kernel_sw, [&](int n) { return y_is(n, ref_consume); });
  Switch scan_sw = build_switch(b, s, [&](int c, cudaStream_t st) {
    pad_f<<<256, 256, 0, st>>>(b.x, b.count, cls_of(c), 0.0f);
    size_t tb = b.tmp_bytes;
    return cub::DeviceScan::InclusiveSum(b.tmp, tb, b.x, b.y, cls_of(c), st);
  });
  report("scan", scan_sw, [&](int n) {
    CK(cudaMemcpy(hy.data(), b.y, (size_t)n * 4, cudaMemcpyDeviceToHost));
    double acc = 0;
    for (int i = 0; i < n; ++i) {
      acc += i % 1000;
      if (std::fabs(hy[i] - acc) > 1e-4 * std::max(1.0, acc)) return false;
    }
    return true;
  });
  Switch select_sw = build_switch(b, s, [&](int c, cudaStream_t st) {
    pad_flags<<<256, 256, 0, st>>>(b.flags, b.x, b.count, cls_of(c));
    size_t tb = b.tmp_bytes;
    return cub::DeviceSelect::Flagged(b.tmp, tb, b.x, b.flags, b.y, b.sel_n, cls_of(c), st);
  });
  report("select", select_sw, [&](int n) {
    int got = 0;
    CK(cudaMemcpy(&got, b.sel_n, 4, cudaMemcpyDeviceToHost));
    int want = 0;
    for (int i = 0; i < n; ++i) want += (i % 1000) % 3 == 0;
    if (got != want) return false;
    CK(cudaMemcpy(hy.data(), b.y, (size_t)got * 4, cudaMemcpyDeviceToHost));
    for (int i = 0, j = 0; i < n; ++i)
      if ((i % 1000) % 3 == 0 && hy[j++] != (float)(i % 1000)) return false;
    return true;
  });
#ifdef WITH_CUBLAS
  {
    // C[m x 64] = A[m x 64] * B[64 x 64], column-major, m = the class's rows (A = x, C = y).
    cublasHandle_t hb;
    cublasCreate(&hb);
    void *ws;
    CK(cudaMalloc(&ws, 32 << 20));
    cublasSetWorkspace(hb, ws, 32 << 20);
    float *B;
    CK(cudaMalloc(&B, 64 * 64 * 4));
    std::vector<float> hB(64 * 64, 0.0f);
    for (int i = 0; i < 64; ++i) hB[i * 64 + i] = 2.0f;  // 2 I
    CK(cudaMemcpy(B, hB.data(), hB.size() * 4, cudaMemcpyHostToDevice));
    const int cols = 64;
    Switch gemm_sw = build_switch(b, s, [&](int c, cudaStream_t st) {
      int m = std::min(cls_of(c), CAP / cols);
      cublasSetStream(hb, st);
      float one = 1, zero = 0;
      cublasStatus_t r = cublasSgemm(hb, CUBLAS_OP_N, CUBLAS_OP_N, m, cols, cols, &one, b.x, m, B, cols, &zero, b.y, m);
      return r == CUBLAS_STATUS_SUCCESS ? cudaSuccess : cudaErrorUnknown;
    });
    report("gemm", gemm_sw, [&](int n) {
      // Rows [0, n) of column 0 of C equal 2 x; x's column 0 has leading dimension m of the class.
      int c = 0;
      while (c < K - 1 && n > cls_of(c)) ++c;
      int m = std::min(cls_of(c), CAP / cols);
      int rows = std::min(n, m);
      CK(cudaMemcpy(hy.data(), b.y, (size_t)rows * 4, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(hx.data(), b.x, (size_t)rows * 4, cudaMemcpyDeviceToHost));
      for (int i = 0; i < rows; ++i)
        if (hy[i] != 2 * hx[i]) return false;
      return true;
    });
  }
#else
  printf("body gemm    NOT BUILT (no -DWITH_CUBLAS)\n");
#endif
#ifdef WITH_SRB
  {
    srb_readback *rb = nullptr;
    size_t es = 4;
    int rc = srb_create(0, CAP, 4, 1, &es, SRB_FLAG_GRAPH, &rb);
    if (rc != SRB_OK) {
      printf("body pack    REFUSED (srb_create %d: %s)\n", rc, srb_last_error());
    } else {
      srb_devptr col = (srb_devptr)b.x;
      size_t len = CAP;
      Switch pack_sw = build_switch(b, s, [&](int c, cudaStream_t st) {
        consume<<<(cls_of(c) + 255) / 256, 256, 0, st>>>(b.x, b.y, b.count);
        int r = srb_record(rb, (CUstream_st *)st, nullptr, &col, &len, (srb_devptr)b.count, SRB_COUNT_I32);
        if (r != SRB_OK) printf("  srb_record in body %d: %d %s\n", c, r, srb_last_error());
        return r == SRB_OK ? cudaGetLastError() : cudaErrorUnknown;
      });
      report("pack", pack_sw, [&](int n) {
        uint64_t seq = 0, cnt = 0;
        int r = srb_next(rb, 5000000000LL, &seq, &cnt);
        if (r != SRB_OK || cnt != (uint64_t)n) return printf("  srb_next %d count %llu\n", r, (unsigned long long)cnt), false;
        const float *d = (const float *)srb_data(rb, seq, 0);
        bool ok = d != nullptr;
        for (int i = 0; ok && i < n; ++i) ok = d[i] == (float)(i % 1000);
        srb_release(rb, seq);
        return ok;
      });
      // launch_cost ran 200 replays: take them so the ring is empty again.
      for (uint64_t seq, cnt; srb_next(rb, 0, &seq, &cnt) != SRB_TIMEOUT;) srb_release(rb, seq);
    }
  }
#else
  printf("body pack    NOT BUILT (no -DWITH_SRB)\n");
#endif

  // ---- the loop ----
  std::mt19937 rng(7);
  std::vector<int> counts(steps);
  for (auto &n : counts) n = std::max(1, (int)std::exp2(std::uniform_real_distribution<double>(0, 22)(rng)));
  CK(cudaMemcpy(b.counts, counts.data(), steps * 4, cudaMemcpyHostToDevice));
  std::vector<int> sorted = counts;
  std::sort(sorted.begin(), sorted.end());
  printf("\n# loop: %d steps, count log-uniform in [1, 2^22] (median %d), %d repeats; per-step us\n", steps,
         sorted[steps / 2], repeats);
  int *h_count;
  CK(cudaMallocHost(&h_count, 4));
  // The WHILE graph: step = 0; WHILE { produce(step) ; consume grid-stride ; step++ }
  cudaGraphExec_t while_exec;
  double while_build;
  {
    auto t0 = clk::now();
    cudaGraph_t g;
    CK(cudaGraphCreate(&g, 0));
    cudaGraphConditionalHandle h;
    CK(cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault));
    cudaGraphNodeParams cp = {};
    cp.type = cudaGraphNodeTypeConditional;
    cp.conditional.handle = h;
    cp.conditional.type = cudaGraphCondTypeWhile;
    cp.conditional.size = 1;
    cudaGraphNode_t wn;
    CK(cudaGraphAddNode(&wn, g, nullptr, nullptr, 0, &cp));
    CK(cudaStreamBeginCaptureToGraph(s, cp.conditional.phGraph_out[0], nullptr, nullptr, 0, cudaStreamCaptureModeRelaxed));
    produce<<<1024, 256, 0, s>>>(b.x, b.count, b.counts, b.step, 0);
    consume<<<4 * prop.multiProcessorCount, 256, 0, s>>>(b.x, b.y, b.count);
    loop_step<<<1, 1, 0, s>>>(h, b.step, steps);
    cudaGraph_t got;
    CK(cudaStreamEndCapture(s, &got));
    CK(cudaGraphInstantiate(&while_exec, g, 0));
    CK(cudaGraphUpload(while_exec, s));
    while_build = us(t0, clk::now());
  }
  // The sized step as one graph of its own: produce(step k) is launched by the host, then the SWITCH.
  std::vector<double> t_sync, t_over, t_sized, t_while;
  double over_grid = (CAP + 255) / 256;
  int wrong = 0;
  auto check_last = [&](const char *name) {
    int n = counts[steps - 1];
    if (!y_is(n, ref_consume)) ++wrong, printf("  loop %s: last step WRONG\n", name);
  };
  // One way's run of the loop: y cleared, `steps` steps timed per step (after two warm-ups),
  // the last step's rows checked on the first.
  auto way = [&](int r, const char *name, std::vector<double> &t, const std::function<void()> &run) {
    CK(cudaMemsetAsync(b.y, 0, CAP * 4, s));
    CK(cudaMemsetAsync(b.step, 0, 4, s));
    CK(cudaStreamSynchronize(s));
    auto t0 = clk::now();
    run();
    CK(cudaStreamSynchronize(s));
    if (r >= 2) t.push_back(us(t0, clk::now()) / steps);
    if (r == 0) check_last(name);
  };
  for (int r = 0; r < repeats + 2; ++r) {
    way(r, "sync", t_sync, [&] {
      for (int k = 0; k < steps; ++k) {
        produce<<<1024, 256, 0, s>>>(b.x, b.count, b.counts, nullptr, k);
        CK(cudaMemcpyAsync(h_count, b.count, 4, cudaMemcpyDeviceToHost, s));
        CK(cudaStreamSynchronize(s));
        int n = *h_count;
        consume<<<(n + 255) / 256, 256, 0, s>>>(b.x, b.y, b.count);
      }
    });
    way(r, "over", t_over, [&] {
      for (int k = 0; k < steps; ++k) {
        produce<<<1024, 256, 0, s>>>(b.x, b.count, b.counts, nullptr, k);
        consume<<<(int)over_grid, 256, 0, s>>>(b.x, b.y, b.count);
      }
    });
    way(r, "sized", t_sized, [&] {
      for (int k = 0; k < steps; ++k) {
        produce<<<1024, 256, 0, s>>>(b.x, b.count, b.counts, nullptr, k);
        CK(cudaGraphLaunch(kernel_sw.exec, s));
      }
    });
    way(r, "while", t_while, [&] { CK(cudaGraphLaunch(while_exec, s)); });
  }
  auto line = [&](const char *name, std::vector<double> &v) {
    printf("loop %-6s p50 %8.2f  p99 %8.2f  /sync %.3f  /over %.3f\n", name, pct(v, 0.5), pct(v, 0.99),
           pct(v, 0.5) / pct(t_sync, 0.5), pct(v, 0.5) / pct(t_over, 0.5));
  };
  line("sync", t_sync);
  line("over", t_over);
  line("sized", t_sized);
  line("while", t_while);
  printf("while graph build %.0f us; loop results wrong: %d\n", while_build, wrong);
  printf("done\n");
  return 0;
}
