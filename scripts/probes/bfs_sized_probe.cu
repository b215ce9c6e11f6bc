// Issue 36's consumer, as a probe before the library API: a level-synchronous BFS whose expand
// kernel is sized by the device count of the previous frontier, against the ways users size it
// today. Checked against a host BFS on every vertex. Not library code: its output is committed
// under results/ and the API is judged against it.
//
// The graph: R-MAT (Graph500's a=0.57, b=0.19, c=0.19, d=0.05, edge factor 16), 2^scale
// vertices, made undirected, as CSR; generated on the host from a fixed seed (splitmix64).
// Four ways to run the levels (top-down; one thread per frontier vertex appends the newly
// reached neighbours to the next frontier with an atomic counter):
//   sync    copy the frontier's count to the host, synchronize, launch the exact grid;
//   over    launch the grid of the whole vertex set every level, threads past the count exit
//           (the number of levels taken from the host BFS: no host read in the loop);
//   sized   a one-thread kernel sets a SWITCH over 7 size classes (2^10..2^22 threads, x4)
//           from the device count; body c launches class c's grid (levels as for over);
//   while   one graph: WHILE(frontier not empty) { SWITCH as sized ; swap }: the device also
//           decides when to stop.
// Per level: the time between consecutive levels' start events (the host's gaps included);
// the report gives each way's per-level time at the level of the median frontier and the
// total, p50 over repeats.
// Build (GPU host): nvcc -O3 -std=c++17 -arch=sm_90 bfs_sized_probe.cu -o bfs_sized_probe
// Run: ./bfs_sized_probe [scale=22] [repeats=20]
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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

static const int K = 7;  // size classes 2^10, 2^12, ..., 2^22 threads
static const int BLOCK = 256;

static uint64_t splitmix(uint64_t &s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

struct Csr {
  int n;
  std::vector<int64_t> off;
  std::vector<int> adj;
};

static Csr rmat(int scale, int edge_factor, uint64_t seed) {
  int n = 1 << scale;
  int64_t m = (int64_t)n * edge_factor;
  std::vector<int> src(m), dst(m);
  uint64_t s = seed;
  const double a = 0.57, b = 0.19, c = 0.19;
  for (int64_t e = 0; e < m; ++e) {
    int u = 0, v = 0;
    for (int bit = 0; bit < scale; ++bit) {
      double r = (splitmix(s) >> 11) * (1.0 / 9007199254740992.0);
      int ub = r >= a + b, vb = (r >= a && r < a + b) || r >= a + b + c;
      u |= ub << bit;
      v |= vb << bit;
    }
    src[e] = u;
    dst[e] = v;
  }
  // Scramble vertex ids (Graph500 does) so that degree does not follow the id.
  std::vector<int> perm(n);
  for (int i = 0; i < n; ++i) perm[i] = i;
  for (int i = n - 1; i > 0; --i) std::swap(perm[i], perm[splitmix(s) % (uint64_t)(i + 1)]);
  Csr g;
  g.n = n;
  g.off.assign(n + 1, 0);
  for (int64_t e = 0; e < m; ++e)
    if (src[e] != dst[e]) ++g.off[perm[src[e]] + 1], ++g.off[perm[dst[e]] + 1];
  for (int i = 0; i < n; ++i) g.off[i + 1] += g.off[i];
  g.adj.resize(g.off[n]);
  std::vector<int64_t> at(g.off.begin(), g.off.end() - 1);
  for (int64_t e = 0; e < m; ++e) {
    if (src[e] == dst[e]) continue;
    int u = perm[src[e]], v = perm[dst[e]];
    g.adj[at[u]++] = v;
    g.adj[at[v]++] = u;
  }
  return g;
}

static std::vector<int> host_bfs(const Csr &g, int root) {
  std::vector<int> level(g.n, -1), q;
  q.reserve(g.n);
  level[root] = 0;
  q.push_back(root);
  for (size_t h = 0; h < q.size(); ++h) {
    int u = q[h];
    for (int64_t e = g.off[u]; e < g.off[u + 1]; ++e)
      if (level[g.adj[e]] < 0) level[g.adj[e]] = level[u] + 1, q.push_back(g.adj[e]);
  }
  return level;
}

struct Dev {
  const int64_t *off;
  const int *adj;
  int *level;
  int *front[2];
  int *count[2];  // count[p]: the size of front[p]
  int *depth;     // the level being expanded (device-driven loops)
};

// Expands frontier `p` at level `depth`: its vertices' unvisited neighbours get depth + 1 and
// are appended to frontier 1 - p.
__global__ void expand(Dev d, int p, const int *depth_ptr, int host_depth) {
  int n = *d.count[p];
  int depth = depth_ptr ? *depth_ptr : host_depth;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    int u = d.front[p][i];
    for (int64_t e = d.off[u]; e < d.off[u + 1]; ++e) {
      int v = d.adj[e];
      if (atomicCAS(&d.level[v], -1, depth + 1) == -1) d.front[1 - p][atomicAdd(d.count[1 - p], 1)] = v;
    }
  }
}
// Host-driven loops, before level l: the next frontier empty, the depth l.
__global__ void prepare(int *next_count, int *depth, int l) {
  *next_count = 0;
  *depth = l;
}
__global__ void set_class(cudaGraphConditionalHandle h, const int *count) {
  int n = *count, c = 0;
  while (c < K - 1 && n > (1 << (10 + 2 * c))) ++c;
  cudaGraphSetConditional(h, c);
}
// After a device-driven level: the next frontier becomes the current one (copied into slot
// 0, so the graph's parameters stay fixed: `advance_copy`, every thread), then one thread moves
// the count and the depth and lets the loop go on while the new frontier is not empty
// (`advance_step`: a second kernel, so that no block of the copy reads a reset count).
__global__ void advance_copy(Dev d) {
  int n = *d.count[1];
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x) d.front[0][j] = d.front[1][j];
}
__global__ void advance_step(Dev d, cudaGraphConditionalHandle loop) {
  int n = *d.count[1];
  *d.count[0] = n;
  *d.count[1] = 0;
  *d.depth += 1;
  cudaGraphSetConditional(loop, n > 0 ? 1 : 0);
}

using clk = std::chrono::steady_clock;
static double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, (size_t)(p * v.size()))];
}

// A SWITCH over the K classes whose body c expands frontier `p` with class c's grid; with
// `loop`, inside that WHILE body, followed by `advance`.
static void add_sized_expand(cudaGraph_t g, cudaGraphNode_t *dep, int ndep, Dev d, int p, cudaGraphNode_t *out,
                             cudaStream_t s) {
  cudaGraphConditionalHandle h;
  CK(cudaGraphConditionalHandleCreate(&h, g, 0, 0));
  cudaKernelNodeParams kp = {};
  void *args[] = {&h, &d.count[p]};
  kp.func = (void *)set_class;
  kp.gridDim = 1;
  kp.blockDim = 1;
  kp.kernelParams = args;
  cudaGraphNode_t setn;
  CK(cudaGraphAddKernelNode(&setn, g, dep, ndep, &kp));
  cudaGraphNodeParams cp = {};
  cp.type = cudaGraphNodeTypeConditional;
  cp.conditional.handle = h;
  cp.conditional.type = cudaGraphCondTypeSwitch;
  cp.conditional.size = K;
  CK(cudaGraphAddNode(out, g, &setn, nullptr, 1, &cp));
  for (int c = 0; c < K; ++c) {
    CK(cudaStreamBeginCaptureToGraph(s, cp.conditional.phGraph_out[c], nullptr, nullptr, 0,
                                     cudaStreamCaptureModeRelaxed));
    int threads = 1 << (10 + 2 * c);
    expand<<<(threads + BLOCK - 1) / BLOCK, BLOCK, 0, s>>>(d, p, d.depth, 0);
    cudaGraph_t got;
    CK(cudaStreamEndCapture(s, &got));
  }
}

int main(int argc, char **argv) {
  int scale = argc > 1 ? atoi(argv[1]) : 22, repeats = argc > 2 ? atoi(argv[2]) : 20;
  auto t0 = clk::now();
  Csr g = rmat(scale, 16, 0x5eed);
  int root = 0;
  while (g.off[root + 1] == g.off[root]) ++root;  // a vertex with edges
  std::vector<int> want = host_bfs(g, root);
  int depth_max = *std::max_element(want.begin(), want.end());
  std::vector<int64_t> frontier(depth_max + 1, 0);
  for (int l : want)
    if (l >= 0) ++frontier[l];
  printf("R-MAT scale %d: %d vertices, %lld directed edges, root %d, %d levels, built in %.1f s\n", scale, g.n,
         (long long)g.off[g.n], root, depth_max + 1, std::chrono::duration<double>(clk::now() - t0).count());
  printf("frontier per level:");
  for (auto f : frontier) printf(" %lld", (long long)f);
  printf("\n");
  // The level whose frontier is the median of the levels' frontiers.
  std::vector<int64_t> sorted = frontier;
  std::sort(sorted.begin(), sorted.end());
  int median_level = (int)(std::find(frontier.begin(), frontier.end(), sorted[sorted.size() / 2]) - frontier.begin());
  printf("median frontier: level %d, %lld vertices\n", median_level, (long long)frontier[median_level]);

  Dev d;
  int64_t *off;
  int *adj;
  CK(cudaMalloc(&off, (g.n + 1) * sizeof(int64_t)));
  CK(cudaMalloc(&adj, g.adj.size() * sizeof(int)));
  CK(cudaMemcpy(off, g.off.data(), (g.n + 1) * sizeof(int64_t), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(adj, g.adj.data(), g.adj.size() * sizeof(int), cudaMemcpyHostToDevice));
  d.off = off;
  d.adj = adj;
  CK(cudaMalloc(&d.level, g.n * sizeof(int)));
  for (int p = 0; p < 2; ++p) CK(cudaMalloc(&d.front[p], g.n * sizeof(int)));
  for (int p = 0; p < 2; ++p) CK(cudaMalloc(&d.count[p], sizeof(int)));
  CK(cudaMalloc(&d.depth, sizeof(int)));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int *h_count;
  CK(cudaMallocHost(&h_count, sizeof(int)));

  auto reset = [&]() {
    CK(cudaMemsetAsync(d.level, 0xFF, g.n * sizeof(int), s));
    int zero = 0, one = 1;
    CK(cudaMemcpyAsync(d.level + root, &zero, sizeof(int), cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyAsync(d.front[0], &root, sizeof(int), cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyAsync(d.count[0], &one, sizeof(int), cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyAsync(d.count[1], &zero, sizeof(int), cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyAsync(d.depth, &zero, sizeof(int), cudaMemcpyHostToDevice, s));
    CK(cudaStreamSynchronize(s));
  };
  std::vector<int> got(g.n);
  auto check = [&](const char *name) {
    CK(cudaMemcpy(got.data(), d.level, g.n * sizeof(int), cudaMemcpyDeviceToHost));
    long long wrong = 0;
    for (int i = 0; i < g.n; ++i) wrong += got[i] != want[i];
    if (wrong) printf("  %s: %lld vertices with the wrong level\n", name, wrong);
    return wrong;
  };

  // The sized step for frontier p (host-driven loops): set_class + SWITCH, one graph per parity;
  // every way reads the depth on the device (`prepare` sets it in the host-driven loops).
  cudaGraphExec_t sized_exec[2];
  for (int p = 0; p < 2; ++p) {
    cudaGraph_t gg;
    CK(cudaGraphCreate(&gg, 0));
    cudaGraphNode_t sw;
    add_sized_expand(gg, nullptr, 0, d, p, &sw, s);
    CK(cudaGraphInstantiate(&sized_exec[p], gg, 0));
  }
  // The device-driven loop: WHILE { set_class + SWITCH(expand frontier 0 at *depth) ; advance }.
  cudaGraphExec_t while_exec;
  {
    cudaGraph_t gg;
    CK(cudaGraphCreate(&gg, 0));
    cudaGraphConditionalHandle loop;
    CK(cudaGraphConditionalHandleCreate(&loop, gg, 1, cudaGraphCondAssignDefault));
    cudaGraphNodeParams cp = {};
    cp.type = cudaGraphNodeTypeConditional;
    cp.conditional.handle = loop;
    cp.conditional.type = cudaGraphCondTypeWhile;
    cp.conditional.size = 1;
    cudaGraphNode_t wn;
    CK(cudaGraphAddNode(&wn, gg, nullptr, nullptr, 0, &cp));
    cudaGraph_t body = cp.conditional.phGraph_out[0];
    cudaGraphNode_t sw;
    add_sized_expand(body, nullptr, 0, d, 0, &sw, s);
    cudaKernelNodeParams kp = {};
    void *copy_args[] = {&d};
    kp.func = (void *)advance_copy;
    kp.gridDim = 1024;
    kp.blockDim = BLOCK;
    kp.kernelParams = copy_args;
    cudaGraphNode_t copy_node, step_node;
    CK(cudaGraphAddKernelNode(&copy_node, body, &sw, 1, &kp));
    void *step_args[] = {&d, &loop};
    kp.func = (void *)advance_step;
    kp.gridDim = 1;
    kp.blockDim = 1;
    kp.kernelParams = step_args;
    CK(cudaGraphAddKernelNode(&step_node, body, &copy_node, 1, &kp));
    CK(cudaGraphInstantiate(&while_exec, gg, 0));
  }

  const char *names[] = {"sync", "over", "sized", "while"};
  std::vector<std::vector<double>> at_median(4), total(4);
  long long wrong_total = 0;
  int levels = depth_max + 1;  // expansions: the last one finds nothing
  std::vector<cudaEvent_t> ev(levels + 1);
  for (auto &e : ev) CK(cudaEventCreate(&e));
  for (int r = 0; r < repeats + 2; ++r) {
    for (int w = 0; w < 4; ++w) {
      reset();
      auto h0 = clk::now();
      if (w == 3) {
        CK(cudaEventRecord(ev[0], s));
        CK(cudaGraphLaunch(while_exec, s));
        CK(cudaEventRecord(ev[levels], s));
      } else {
        for (int l = 0; l < levels; ++l) {
          int p = l % 2;
          CK(cudaEventRecord(ev[l], s));
          if (w == 0) {
            CK(cudaMemcpyAsync(h_count, d.count[p], sizeof(int), cudaMemcpyDeviceToHost, s));
            CK(cudaStreamSynchronize(s));
            int n = *h_count;
            prepare<<<1, 1, 0, s>>>(d.count[1 - p], d.depth, l);
            if (n > 0) expand<<<(n + BLOCK - 1) / BLOCK, BLOCK, 0, s>>>(d, p, d.depth, 0);
          } else if (w == 1) {
            prepare<<<1, 1, 0, s>>>(d.count[1 - p], d.depth, l);
            expand<<<(g.n + BLOCK - 1) / BLOCK, BLOCK, 0, s>>>(d, p, d.depth, 0);
          } else {
            prepare<<<1, 1, 0, s>>>(d.count[1 - p], d.depth, l);
            CK(cudaGraphLaunch(sized_exec[p], s));
          }
        }
        CK(cudaEventRecord(ev[levels], s));
      }
      CK(cudaStreamSynchronize(s));
      double host_total = std::chrono::duration<double, std::micro>(clk::now() - h0).count();
      if (r < 2) {
        if (r == 0) wrong_total += check(names[w]);
        continue;
      }
      total[w].push_back(host_total);
      if (w != 3) {
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, ev[median_level], ev[median_level + 1]));
        at_median[w].push_back(ms * 1e3);
      }
    }
  }
  printf("\n# %d repeats after 2 warm-ups; us, p50 (p99)\n", repeats);
  for (int w = 0; w < 4; ++w) {
    if (w != 3)
      printf("%-6s level %d (median frontier): %8.2f (%8.2f)   whole BFS: %9.1f (%9.1f)\n", names[w], median_level,
             pct(at_median[w], 0.5), pct(at_median[w], 0.99), pct(total[w], 0.5), pct(total[w], 0.99));
    else
      printf("%-6s (device-driven, no per-level times)        whole BFS: %9.1f (%9.1f)\n", names[w],
             pct(total[w], 0.5), pct(total[w], 0.99));
  }
  printf("sized / sync at the median frontier: %.3f; sized / over: %.3f\n", pct(at_median[2], 0.5) / pct(at_median[0], 0.5),
         pct(at_median[2], 0.5) / pct(at_median[1], 0.5));
  printf("whole BFS: sized / sync %.3f, sized / over %.3f, while / sync %.3f\n", pct(total[2], 0.5) / pct(total[0], 0.5),
         pct(total[2], 0.5) / pct(total[1], 0.5), pct(total[3], 0.5) / pct(total[0], 0.5));
  printf("levels wrong over the four ways: %lld\ndone\n", wrong_total);
  return wrong_total != 0;
}
