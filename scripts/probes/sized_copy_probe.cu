// sized_copy_probe.cu: where the sized staged copy's time goes (issue 21). One producer writes n
// rows and a device count; each variant brings count and rows to the host and is timed from the
// producer's launch to the host seeing the event, p50 over 1000 cycles after 50 of warm-up. The
// variants differ in one thing each, so the table says which part of the library's graph costs:
//   oracle      producer, cudaMemcpyAsync(n rows), event (the host knows n: the floor)
//   whole       pack into the device slot, cudaMemcpyAsync(whole slot), event
//   g_set2      the library's shape: graph [pack sets class] -> SWITCH{body k: rows copy, trailer
//               copy}, cuGraphExecKernelNodeSetParams before every launch
//   g_2         the same graph, no parameter update
//   g_1         one copy per body (trailer first, then rows: one contiguous range), no update
//   g_set1      one copy per body, with the update
//   pack_g1     the pack as a stream launch, then a graph [set class] -> SWITCH{one copy}
//   prefix_hostP   the pack, then one copy of the trailer and the first P rows, event; the host
//               copies the rest itself when the count is past P
//   prefix_graph4096  the pack, a copy of the first 4096 rows, then the graph copies the rest
// results/2026-12-02/probe-sized-copy-538ce8a/run-1.txt also holds g_1_small, a variant of an
// earlier version of this file that is not here; its numbers are not used.
// Build and run on the GPU host: nvcc -O2 -std=c++17 -arch=sm_90 sized_copy_probe.cu -o probe && ./probe
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA error %s at line %d\n", cudaGetErrorString(e), __LINE__); exit(1); } } while (0)
using clk = std::chrono::steady_clock;
constexpr unsigned long long HDR = 4;  // trailer words: count, status, pad, seq

__global__ void produce(double* out, unsigned long long* d_count, unsigned long long n, int k) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n; i += (unsigned long long)gridDim.x * blockDim.x)
    out[i] = (double)i + 0.25 * k;
  if (blockIdx.x == 0 && threadIdx.x == 0) *d_count = n;
}
__device__ __forceinline__ unsigned size_class(unsigned long long n) { return n <= 1 ? 0u : 64u - (unsigned)__clzll(n - 1); }
struct Args { const double* src; const unsigned long long* d_count; double* rows; unsigned long long* trailer; unsigned long long cap; unsigned long long seq; };
// Rows at `rows`, trailer (count, seq) at `trailer`; sets the class when h != 0.
__global__ void pack(Args a, cudaGraphConditionalHandle h) {
  unsigned long long n = *a.d_count; if (n > a.cap) n = a.cap;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n; i += (unsigned long long)gridDim.x * blockDim.x) a.rows[i] = a.src[i];
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    a.trailer[0] = n; a.trailer[3] = a.seq;
    if (h) cudaGraphSetConditional(h, size_class(n));
  }
}
__global__ void set_class(const unsigned long long* trailer, cudaGraphConditionalHandle h) { cudaGraphSetConditional(h, size_class(trailer[0])); }

static double pct(std::vector<double> v, double p) { std::sort(v.begin(), v.end()); return v[std::min(v.size() - 1, (size_t)(p * v.size()))]; }
static unsigned classes(unsigned long long cap) { unsigned k = 0; while ((1ull << k) < cap) ++k; return k + 1; }

struct G { cudaGraphExec_t exec; cudaGraphNode_t kn; cudaKernelNodeParams kp; cudaGraphConditionalHandle h; void* args[2]; unsigned long long* tr; };
// layout 2: rows at slot[0..cap), trailer after them (two copies per body); layout 1: trailer at
// slot[0..HDR), rows after (one copy per body).
static G& build(bool with_pack, int layout, unsigned grid, Args* a, double* hslot, double* dslot, unsigned long long cap) {
  G& g = *new G{}; cudaGraph_t gr; CK(cudaGraphCreate(&gr, 0));
  CK(cudaGraphConditionalHandleCreate(&g.h, gr, 0, cudaGraphCondAssignDefault));
  g.tr = (unsigned long long*)(layout == 1 ? dslot : dslot + cap);
  if (with_pack) g.args[0] = a; else g.args[0] = &g.tr;
  g.args[1] = &g.h;
  g.kp = {}; g.kp.func = with_pack ? (void*)pack : (void*)set_class; g.kp.gridDim = with_pack ? dim3(grid) : dim3(1);
  g.kp.blockDim = dim3(256); g.kp.kernelParams = g.args;
  CK(cudaGraphAddKernelNode(&g.kn, gr, nullptr, 0, &g.kp));
  cudaGraphNodeParams cp = {}; cp.type = cudaGraphNodeTypeConditional; cp.conditional.handle = g.h;
  cp.conditional.type = cudaGraphCondTypeSwitch; cp.conditional.size = classes(cap);
  cudaGraphNode_t cn; CK(cudaGraphAddNode(&cn, gr, &g.kn, nullptr, 1, &cp));
  for (unsigned k = 0; k < classes(cap); ++k) {
    unsigned long long rows = std::min(1ull << k, cap);
    cudaGraphNode_t mn;
    if (layout == 1) {
      CK(cudaGraphAddMemcpyNode1D(&mn, cp.conditional.phGraph_out[k], nullptr, 0, hslot, dslot, (HDR + rows) * 8, cudaMemcpyDeviceToHost));
    } else {
      CK(cudaGraphAddMemcpyNode1D(&mn, cp.conditional.phGraph_out[k], nullptr, 0, hslot, dslot, rows * 8, cudaMemcpyDeviceToHost));
      CK(cudaGraphAddMemcpyNode1D(&mn, cp.conditional.phGraph_out[k], nullptr, 0, hslot + cap, dslot + cap, HDR * 8, cudaMemcpyDeviceToHost));
    }
  }
  CK(cudaGraphInstantiate(&g.exec, gr, 0));
  return g;
}

int main() {
  CK(cudaSetDeviceFlags(cudaDeviceMapHost));
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t ev; CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  cudaEvent_t ev2, evA; CK(cudaEventCreateWithFlags(&ev2, cudaEventDisableTiming)); CK(cudaEventCreateWithFlags(&evA, cudaEventDisableTiming));
  cudaStream_t s2; CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  bool only_g1 = getenv("PROBE_ONLY_G1") != nullptr;
  int reps = 1000, warm = 50;
  for (unsigned long long cap : {1ull << 20, 1ull << 24}) {
    double *d_out, *d_slot, *h_slot, *h_copy; unsigned long long* d_count;
    CK(cudaMalloc(&d_out, cap * 8)); CK(cudaMalloc(&d_count, 8)); CK(cudaMalloc(&d_slot, (cap + HDR) * 8));
    CK(cudaHostAlloc(&h_slot, (cap + HDR) * 8, cudaHostAllocMapped)); CK(cudaHostAlloc(&h_copy, cap * 8, 0));
    Args a2{d_out, d_count, d_slot, (unsigned long long*)(d_slot + cap), cap, 0};
    Args a1{d_out, d_count, d_slot + HDR, (unsigned long long*)d_slot, cap, 0};
    G& g2 = build(true, 2, 528, &a2, h_slot, d_slot, cap);
    G& g1 = build(true, 1, 528, &a1, h_slot, d_slot, cap);
    G& gs = build(false, 1, 1, &a1, h_slot, d_slot, cap);
    if (only_g1) {
      for (int r = 0; r < 20; ++r) { produce<<<528, 256, 0, s>>>(d_out, d_count, cap, r); CK(cudaGraphLaunch(g1.exec, s)); CK(cudaMemcpyAsync(h_copy, d_out, cap * 8, cudaMemcpyDeviceToHost, s)); }
      CK(cudaStreamSynchronize(s));
      return 0;
    }
    auto update = [&](G& g, Args* a, unsigned long long seq) { a->seq = seq; CK(cudaGraphExecKernelNodeSetParams(g.exec, g.kn, &g.kp)); };
    auto check1 = [&](unsigned long long n, int k, const double* rows, const unsigned long long* tr) {
      if (tr && tr[0] != n) return false;
      for (unsigned long long i : {0ull, n / 2, n - 1}) if (n && rows[i] != (double)i + 0.25 * k) return false;
      return true;
    };
    std::vector<unsigned long long> ns = cap == (1ull << 20) ? std::vector<unsigned long long>{1, 4096, 65536, 1ull << 20} : std::vector<unsigned long long>{4096, 1ull << 24};
    for (unsigned long long n : ns) {
      printf("cap %llu n %llu:", cap, n);
      auto run = [&](const char* name, std::function<void(int)> issue, std::function<bool(int)> ok, bool second = false, bool wait_a = false) {
        std::vector<double> v; int bad = 0;
        for (int r = 0; r < reps + warm; ++r) {
          CK(cudaStreamSynchronize(s));
          auto t0 = clk::now();
          produce<<<528, 256, 0, s>>>(d_out, d_count, n, r);
          issue(r);
          CK(cudaEventRecord(ev, s));
          if (wait_a) {
            while (cudaEventQuery(evA) == cudaErrorNotReady) {}
            if (((volatile unsigned long long*)h_slot)[0] > 4096) while (cudaEventQuery(ev) == cudaErrorNotReady) {}
          } else {
            while (cudaEventQuery(ev) == cudaErrorNotReady) {}
          }
          bool good = second ? ok(r) : true;
          auto t1 = clk::now();
          if (second || wait_a) good = check1(n, r, h_slot + HDR, (unsigned long long*)h_slot);
          else good = ok(r);
          if (wait_a) CK(cudaStreamSynchronize(s));
          if (!good) ++bad;
          if (r >= warm) v.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        }
        printf("  %s %.2f/%.2f%s", name, pct(v, 0.5), pct(v, 0.99), bad ? " WRONG" : "");
        fflush(stdout);
      };
      auto ok2 = [&](int r) { return check1(n, r, h_slot, (unsigned long long*)(h_slot + cap)); };
      auto ok1 = [&](int r) { return check1(n, r, h_slot + HDR, (unsigned long long*)h_slot); };
      run("oracle", [&](int) { CK(cudaMemcpyAsync(h_copy, d_out, n * 8, cudaMemcpyDeviceToHost, s)); }, [&](int r) { return check1(n, r, h_copy, nullptr); });
      run("whole", [&](int r) { a2.seq = r; pack<<<528, 256, 0, s>>>(a2, 0); CK(cudaMemcpyAsync(h_slot, d_slot, (cap + HDR) * 8, cudaMemcpyDeviceToHost, s)); }, ok2);
      run("g_set2", [&](int r) { update(g2, &a2, r); CK(cudaGraphLaunch(g2.exec, s)); }, ok2);
      run("g_2", [&](int) { CK(cudaGraphLaunch(g2.exec, s)); }, ok2);
      run("g_1", [&](int) { CK(cudaGraphLaunch(g1.exec, s)); }, ok1);
      run("g_set1", [&](int r) { update(g1, &a1, r); CK(cudaGraphLaunch(g1.exec, s)); }, ok1);
      run("pack_g1", [&](int r) { a1.seq = r; pack<<<528, 256, 0, s>>>(a1, 0); CK(cudaGraphLaunch(gs.exec, s)); }, ok1);
      // prefix_host P: one CE copy of the trailer and the first P rows, event A; the waiter reads
      // the count and, past P, copies the rest itself on a stream of its own (event B).
      for (unsigned long long P : {4096ull, 32768ull}) {
        char name[32]; snprintf(name, sizeof name, "prefix_host%llu", P);
        run(name, [&](int r) {
          a1.seq = r; pack<<<528, 256, 0, s>>>(a1, 0);
          CK(cudaMemcpyAsync(h_slot, d_slot, (HDR + std::min(P, cap)) * 8, cudaMemcpyDeviceToHost, s));
        }, [&](int r) {
          // (run() has already seen event A.) The rest, if any.
          unsigned long long c = ((volatile unsigned long long*)h_slot)[0];
          if (c > P) {
            CK(cudaMemcpyAsync(h_slot + HDR + P, d_slot + HDR + P, (c - P) * 8, cudaMemcpyDeviceToHost, s2));
            CK(cudaEventRecord(ev2, s2));
            while (cudaEventQuery(ev2) == cudaErrorNotReady) {}
          }
          return true;
        }, true);
      }
      // prefix_graph: prefix copy, event A, then the graph copies the rest (its body 0 empty).
      run("prefix_graph4096", [&](int r) {
        a1.seq = r; pack<<<528, 256, 0, s>>>(a1, 0);
        CK(cudaMemcpyAsync(h_slot, d_slot, (HDR + std::min(4096ull, cap)) * 8, cudaMemcpyDeviceToHost, s));
        CK(cudaEventRecord(evA, s));
        CK(cudaGraphLaunch(gs.exec, s));
      }, [&](int r) { return true; }, false, true);
      printf("\n");
    }
    // Host cost of issuing each (no producer), p50 over 1000.
    auto hc = [&](const char* name, std::function<void(int)> issue) {
      std::vector<double> v;
      for (int r = 0; r < reps + warm; ++r) { CK(cudaStreamSynchronize(s)); auto t0 = clk::now(); issue(r); CK(cudaEventRecord(ev, s)); auto t1 = clk::now(); if (r >= warm) v.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count()); }
      printf("  host %s %.2f", name, pct(v, 0.5));
    };
    printf("cap %llu host cost:", cap);
    hc("pack_launch", [&](int r) { a2.seq = r; pack<<<528, 256, 0, s>>>(a2, 0); });
    hc("graph_launch", [&](int) { CK(cudaGraphLaunch(g2.exec, s)); });
    hc("update+graph_launch", [&](int r) { update(g2, &a2, r); CK(cudaGraphLaunch(g2.exec, s)); });
    hc("pack+prefix_copy", [&](int r) { a1.seq = r; pack<<<528, 256, 0, s>>>(a1, 0); CK(cudaMemcpyAsync(h_slot, d_slot, (HDR + 4096) * 8, cudaMemcpyDeviceToHost, s)); });
    printf("\n");
    CK(cudaStreamSynchronize(s));
    CK(cudaFree(d_out)); CK(cudaFree(d_count)); CK(cudaFree(d_slot)); CK(cudaFreeHost(h_slot)); CK(cudaFreeHost(h_copy));
  }
  return 0;
}
