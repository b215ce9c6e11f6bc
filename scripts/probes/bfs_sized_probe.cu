// Issue 36's consumer, as a probe before the library API: a level-synchronous BFS whose expand
// kernel is sized by a device count of the previous level's output, against the ways users size
// it today. Checked against a host BFS on every vertex. Not library code: its output is
// committed under results/ and the API is judged against it.
//
// The graph: R-MAT (Graph500's a=0.57, b=0.19, c=0.19, d=0.05, edge factor 16), 2^scale
// vertices, made undirected, as CSR; generated on the host from a fixed seed (splitmix64).
//
// The expand (top-down, edge-balanced as in Merrill et al. and Gunrock's load-balanced
// advance): a level's work is the frontier's edges, not its vertices, and R-MAT's hubs have
// 10^5..10^6 edges, so threads are spread over edges. A frontier entry holds the rank of its
// vertex's first edge among the frontier's edges (`base`, ascending) and the offset that turns
// such a rank into an index of `adj` (`shift`); the frontier's count is one 64-bit word, the
// number of vertices in the high half and of their edges (E) in the low half. A block takes a
// tile of TILE consecutive edge ranks: two warps find the tile's first and last entries by a
// 32-way search over `base`, the block stages those entries in shared memory, each thread
// finds each of its ITEMS edges' entry by a binary search there (coalesced reads of `adj`),
// claims unvisited neighbours with atomicCAS on their level (a relaxed load filters the
// visited ones first), and the block appends its claimed vertices with one 64-bit atomicAdd of
// (vertices << 32 | their edges) after a block scan of the same pairs: one atomic gives every
// new entry both its slot and its base, so the next level needs no scan of degrees and its E is
// known when this level ends. Blocks loop over tiles with a grid stride, so any grid is
// correct; the grid only sets how many tiles run at once.
//
// The expand's grid is sized from E, the device count of the frontier's edges (the frontier's
// vertex count, in the same word, sizes no launch: a vertex-sized grid would leave a level of a
// few hubs on a few SMs), four ways:
//   sync    copy the count word to the host, synchronize, launch ceil(E / TILE) blocks;
//   over    launch the grid of every edge of the graph (the capacity) every level, blocks past
//           E exit (the number of levels taken from the host BFS: no host read in the loop);
//   sized   a one-thread kernel sets a SWITCH over 7 size classes (2^10..2^22 threads, x4,
//           each thread ITEMS edges per pass) from the device's E; body c launches class c's
//           grid (levels as for over);
//   while   one graph: WHILE(frontier not empty) { SWITCH as sized ; move frontier 1 to 0 }:
//           the device also decides when to stop.
// Per level: the time between consecutive levels' start events (the host's gaps included); for
// while, which has no host-side level boundaries, the device's %globaltimer read at the end of
// each loop iteration (its resolution is about a microsecond). The report gives each way's
// per-level time at the level of the median frontier, at every level, and the total, p50 over
// repeats.
// Build (GPU host): nvcc -O3 -std=c++17 -arch=sm_90 bfs_sized_probe.cu -o bfs_sized_probe
// Run: ./bfs_sized_probe [scale=22] [repeats=20]
#include <cuda_runtime.h>
#include <cub/block/block_scan.cuh>
#include <cuda/atomic>
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
static const int ITEMS = 8;                 // edges per thread per tile
static const int TILE = BLOCK * ITEMS;      // edges per block per tile
static const unsigned long long ONE_VERTEX = 1ull << 32;  // a count word's vertex unit
static int class_threads(int c) { return 1 << (10 + 2 * c); }

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
  long long *base[2];            // base[p][i]: rank of entry i's first edge among frontier p's edges
  long long *shift[2];           // shift[p][i]: adj index of the entry's edge of rank r is shift + r
  unsigned long long *count[2];  // count[p]: frontier p's vertices << 32 | its edges
  int *depth;                    // the level being expanded
};

__host__ __device__ inline long long edges_of(unsigned long long c) { return (long long)(c & 0xffffffffull); }
__host__ __device__ inline int vertices_of(unsigned long long c) { return (int)(c >> 32); }

// The largest i in [0, n) with a[i] <= x, for a nondecreasing a with a[0] <= x; the whole warp
// calls it with the same arguments and probes 32 places a step (lane k at k/32 of the range).
__device__ int warp_last_le(const long long *a, int n, long long x) {
  const unsigned all = 0xffffffffu;
  int lane = threadIdx.x & 31;
  int lo = 0, hi = n;  // a[lo] <= x; hi == n or a[hi] > x
  while (hi - lo > 1) {
    int probe = lo + (int)(((long long)(hi - lo) * lane) >> 5);  // nondecreasing in lane, < hi
    unsigned le = __ballot_sync(all, a[probe] <= x);           // a prefix of the lanes, lane 0 in it
    int j = __popc(le) - 1;
    int above = __shfl_sync(all, probe, j < 31 ? j + 1 : 31);
    lo = __shfl_sync(all, probe, j);
    if (j < 31) hi = above;
  }
  return lo;
}

// The largest i in [0, n) with a[i] <= x (a[0] <= x), one thread.
__device__ __forceinline__ int last_le(const long long *a, int n, long long x) {
  int lo = 0, hi = n;
  while (hi - lo > 1) {
    int m = lo + (hi - lo) / 2;
    if (a[m] <= x) lo = m;
    else hi = m;
  }
  return lo;
}

__device__ __forceinline__ int load_relaxed(int *x) {
  return cuda::atomic_ref<int, cuda::thread_scope_device>(*x).load(cuda::memory_order_relaxed);
}

using BlockScan = cub::BlockScan<unsigned long long, BLOCK>;

// The next frontier's arrays, picked without indexing Dev's arrays by a runtime parity (which
// would put Dev in local memory).
struct Next {
  unsigned long long *count;
  long long *base, *shift;
};

// One tile: edge ranks [t0, t1) of frontier p, whose entries are tb[0..span), ts[0..span)
// (shared memory, or global when they do not fit). Phases over the thread's ITEMS edges, so that
// each phase's loads are independent and in flight together.
__device__ __forceinline__ void expand_tile(const Dev &d, const Next &next, int depth, long long t0, long long t1,
                                            const long long *tb, const long long *ts, int span,
                                            BlockScan::TempStorage &scan_tmp, unsigned long long &s_at) {
  int v[ITEMS];
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    long long r = t0 + k * BLOCK + threadIdx.x;  // consecutive threads, consecutive edges
    v[k] = -1;
    if (r < t1) v[k] = d.adj[ts[last_le(tb, span, r)] + r];
  }
#pragma unroll
  for (int k = 0; k < ITEMS; ++k)
    if (v[k] >= 0 && load_relaxed(&d.level[v[k]]) != -1) v[k] = -1;  // visited: skip the atomic
#pragma unroll
  for (int k = 0; k < ITEMS; ++k)
    if (v[k] >= 0 && atomicCAS(&d.level[v[k]], -1, depth + 1) != -1) v[k] = -1;  // another claimed it
  // v[k] >= 0 now: this thread alone claimed v[k] (atomicCAS), so it is appended once.
  long long start[ITEMS];
  unsigned long long deg[ITEMS], mine = 0;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    start[k] = 0;
    deg[k] = 0;
    if (v[k] >= 0) {
      start[k] = d.off[v[k]];
      deg[k] = (unsigned long long)(d.off[v[k] + 1] - start[k]);
      mine += ONE_VERTEX + deg[k];
    }
  }
  // Packed (vertices << 32 | edges) sums: the edge half never carries, as a level's edges are
  // at most the graph's, checked < 2^32 on the host.
  unsigned long long before, total;
  BlockScan(scan_tmp).ExclusiveSum(mine, before, total);
  if (threadIdx.x == 0) s_at = total ? atomicAdd(next.count, total) : 0;
  __syncthreads();
  unsigned long long at = s_at + before;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    if (v[k] >= 0) {
      // Slots are distinct and below the vertex count: each vertex is claimed once per BFS.
      int slot = vertices_of(at);
      long long b = edges_of(at);
      next.base[slot] = b;
      next.shift[slot] = start[k] - b;
      at += ONE_VERTEX + deg[k];
    }
  }
}

// Expands frontier p at level *d.depth: its vertices' unvisited neighbours get depth + 1 and are
// appended to frontier 1 - p. Any grid is correct (tiles in a grid-stride loop).
__global__ void __launch_bounds__(BLOCK) expand(Dev d, int p) {
  __shared__ long long s_base[TILE], s_shift[TILE];
  __shared__ BlockScan::TempStorage scan_tmp;
  __shared__ int s_first, s_last;
  __shared__ unsigned long long s_at;
  const unsigned long long *count = p ? d.count[1] : d.count[0];
  const long long *fb = p ? d.base[1] : d.base[0], *fs = p ? d.shift[1] : d.shift[0];
  const Next next = p ? Next{d.count[0], d.base[0], d.shift[0]} : Next{d.count[1], d.base[1], d.shift[1]};
  unsigned long long cur = *count;  // frontier p is not appended to in this kernel
  int n = vertices_of(cur);
  long long edges = edges_of(cur);
  int depth = *d.depth;
  for (long long t0 = (long long)blockIdx.x * TILE; t0 < edges; t0 += (long long)gridDim.x * TILE) {
    long long t1 = t0 + TILE < edges ? t0 + TILE : edges;
    __syncthreads();  // the previous tile is done with the shared arrays
    if (threadIdx.x < 32) {
      int i = warp_last_le(fb, n, t0);
      if (threadIdx.x == 0) s_first = i;
    } else if (threadIdx.x < 64) {
      int i = warp_last_le(fb, n, t1 - 1);
      if (threadIdx.x == 32) s_last = i;
    }
    __syncthreads();
    int first = s_first, span = s_last - s_first + 1;
    // Every frontier vertex has an edge (reached through one, or the root), so a tile spans at
    // most TILE entries; the global path keeps a graph with isolated frontier vertices correct.
    if (span <= TILE) {
      for (int j = threadIdx.x; j < span; j += BLOCK) {
        s_base[j] = fb[first + j];
        s_shift[j] = fs[first + j];
      }
      __syncthreads();
      expand_tile(d, next, depth, t0, t1, s_base, s_shift, span, scan_tmp, s_at);
    } else {
      expand_tile(d, next, depth, t0, t1, fb + first, fs + first, span, scan_tmp, s_at);
    }
  }
}
// Host-driven loops, before level l: the next frontier empty, the depth l.
__global__ void prepare(unsigned long long *next_count, int *depth, int l) {
  *next_count = 0;
  *depth = l;
}
// The class of the smallest grid that covers the frontier's edges in one pass; the last class
// takes any E (more passes).
__global__ void set_class(cudaGraphConditionalHandle h, const unsigned long long *count) {
  long long edges = edges_of(*count);
  int c = 0;
  while (c < K - 1 && edges > (long long)ITEMS << (10 + 2 * c)) ++c;
  cudaGraphSetConditional(h, c);
}
__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__global__ void stamp_start(unsigned long long *stamp) { stamp[0] = globaltimer(); }
// After a device-driven level: the next frontier becomes the current one (copied into slot
// 0, so the graph's parameters stay fixed: `advance_copy`, every thread), then one thread moves
// the count and the depth, stamps the level's end, and lets the loop go on while the new
// frontier is not empty (`advance_step`: a second kernel, so that no block of the copy reads a
// reset count).
__global__ void advance_copy(Dev d) {
  int n = vertices_of(*d.count[1]);
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x) {
    d.base[0][j] = d.base[1][j];
    d.shift[0][j] = d.shift[1][j];
  }
}
__global__ void advance_step(Dev d, cudaGraphConditionalHandle loop, unsigned long long *stamp, int stamps) {
  unsigned long long c = *d.count[1];
  *d.count[0] = c;
  *d.count[1] = 0;
  int depth = *d.depth + 1;
  *d.depth = depth;
  if (depth < stamps) stamp[depth] = globaltimer();
  cudaGraphSetConditional(loop, vertices_of(c) > 0 ? 1 : 0);
}

using clk = std::chrono::steady_clock;
static double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, (size_t)(p * v.size()))];
}

// A SWITCH over the K classes whose body c expands frontier `p` with class c's grid, after a
// one-thread kernel that picks the class from the frontier's edge count.
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
    expand<<<class_threads(c) / BLOCK, BLOCK, 0, s>>>(d, p);
    CK(cudaGetLastError());
    cudaGraph_t got;
    CK(cudaStreamEndCapture(s, &got));
  }
}

int main(int argc, char **argv) {
  int scale = argc > 1 ? atoi(argv[1]) : 22, repeats = argc > 2 ? atoi(argv[2]) : 20;
  if (scale < 1 || scale > 30 || repeats < 1) {
    printf("usage: %s [scale 1..30] [repeats >= 1]\n", argv[0]);
    return 2;
  }
  auto t0 = clk::now();
  Csr g = rmat(scale, 16, 0x5eed);
  int root = 0;
  while (g.off[root + 1] == g.off[root]) ++root;  // a vertex with edges
  const long long m = (long long)g.off[g.n];
  if (m >= (1ll << 32)) {  // a count word's edge half is 32 bits
    printf("FAIL %lld directed edges: the count word holds fewer than 2^32\n", m);
    return 1;
  }
  std::vector<int> want = host_bfs(g, root);
  int depth_max = *std::max_element(want.begin(), want.end());
  std::vector<int64_t> frontier(depth_max + 1, 0), frontier_edges(depth_max + 1, 0);
  for (int v = 0; v < g.n; ++v)
    if (want[v] >= 0) ++frontier[want[v]], frontier_edges[want[v]] += g.off[v + 1] - g.off[v];
  printf("R-MAT scale %d: %d vertices, %lld directed edges, root %d, %d levels, built in %.1f s\n", scale, g.n, m,
         root, depth_max + 1, std::chrono::duration<double>(clk::now() - t0).count());
  printf("frontier per level:");
  for (auto f : frontier) printf(" %lld", (long long)f);
  printf("\n");
  printf("edges scanned per level:");
  for (auto f : frontier_edges) printf(" %lld", (long long)f);
  printf("\n");
  // The level whose frontier is the median of the levels' frontiers.
  std::vector<int64_t> sorted = frontier;
  std::sort(sorted.begin(), sorted.end());
  int median_level = (int)(std::find(frontier.begin(), frontier.end(), sorted[sorted.size() / 2]) - frontier.begin());
  printf("median frontier: level %d, %lld vertices\n", median_level, (long long)frontier[median_level]);
  printf("median level scans %lld edges: %lld tiles of %d\n", (long long)frontier_edges[median_level],
         (long long)((frontier_edges[median_level] + TILE - 1) / TILE), TILE);

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
  for (int p = 0; p < 2; ++p) {
    CK(cudaMalloc(&d.base[p], g.n * sizeof(long long)));
    CK(cudaMalloc(&d.shift[p], g.n * sizeof(long long)));
    CK(cudaMalloc(&d.count[p], sizeof(unsigned long long)));
  }
  CK(cudaMalloc(&d.depth, sizeof(int)));
  int levels = depth_max + 1;  // expansions: the last one finds nothing
  int stamps = levels + 1;     // the while loop's start and each iteration's end
  unsigned long long *d_stamp;
  CK(cudaMalloc(&d_stamp, stamps * sizeof(unsigned long long)));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  unsigned long long *h_count;
  CK(cudaMallocHost(&h_count, sizeof(unsigned long long)));

  // Frontier 0 = {root}: one vertex, its edges, base 0, shift = its adjacency's start.
  const unsigned long long root_count = ONE_VERTEX + (unsigned long long)(g.off[root + 1] - g.off[root]);
  const long long root_shift = g.off[root];
  auto reset = [&]() {
    CK(cudaMemsetAsync(d.level, 0xFF, g.n * sizeof(int), s));
    int zero = 0;
    long long zero_ll = 0;
    unsigned long long none = 0;
    CK(cudaMemcpyAsync(d.level + root, &zero, sizeof(int), cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyAsync(d.base[0], &zero_ll, sizeof(long long), cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyAsync(d.shift[0], &root_shift, sizeof(long long), cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyAsync(d.count[0], &root_count, sizeof(unsigned long long), cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyAsync(d.count[1], &none, sizeof(unsigned long long), cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyAsync(d.depth, &zero, sizeof(int), cudaMemcpyHostToDevice, s));
    CK(cudaMemsetAsync(d_stamp, 0, stamps * sizeof(unsigned long long), s));
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
  // The device-driven loop: stamp; WHILE { set_class + SWITCH(expand frontier 0) ; advance }.
  cudaGraphExec_t while_exec;
  {
    cudaGraph_t gg;
    CK(cudaGraphCreate(&gg, 0));
    cudaKernelNodeParams kp = {};
    void *stamp_args[] = {&d_stamp};
    kp.func = (void *)stamp_start;
    kp.gridDim = 1;
    kp.blockDim = 1;
    kp.kernelParams = stamp_args;
    cudaGraphNode_t start_node;
    CK(cudaGraphAddKernelNode(&start_node, gg, nullptr, 0, &kp));
    cudaGraphConditionalHandle loop;
    CK(cudaGraphConditionalHandleCreate(&loop, gg, 1, cudaGraphCondAssignDefault));
    cudaGraphNodeParams cp = {};
    cp.type = cudaGraphNodeTypeConditional;
    cp.conditional.handle = loop;
    cp.conditional.type = cudaGraphCondTypeWhile;
    cp.conditional.size = 1;
    cudaGraphNode_t wn;
    CK(cudaGraphAddNode(&wn, gg, &start_node, nullptr, 1, &cp));
    cudaGraph_t body = cp.conditional.phGraph_out[0];
    cudaGraphNode_t sw;
    add_sized_expand(body, nullptr, 0, d, 0, &sw, s);
    void *copy_args[] = {&d};
    kp.func = (void *)advance_copy;
    kp.gridDim = 1024;
    kp.blockDim = BLOCK;
    kp.kernelParams = copy_args;
    cudaGraphNode_t copy_node, step_node;
    CK(cudaGraphAddKernelNode(&copy_node, body, &sw, 1, &kp));
    void *step_args[] = {&d, &loop, &d_stamp, &stamps};
    kp.func = (void *)advance_step;
    kp.gridDim = 1;
    kp.blockDim = 1;
    kp.kernelParams = step_args;
    CK(cudaGraphAddKernelNode(&step_node, body, &copy_node, 1, &kp));
    CK(cudaGraphInstantiate(&while_exec, gg, 0));
  }

  const char *names[] = {"sync", "over", "sized", "while"};
  // per_level[w][l]: way w's time for level l over the repeats.
  std::vector<std::vector<std::vector<double>>> per_level(4, std::vector<std::vector<double>>(levels));
  std::vector<std::vector<double>> total(4);
  long long wrong_total = 0;
  std::vector<cudaEvent_t> ev(levels + 1);
  for (auto &e : ev) CK(cudaEventCreate(&e));
  std::vector<unsigned long long> h_stamp(stamps);
  const unsigned over_blocks = (unsigned)((m + TILE - 1) / TILE);  // every edge of the graph
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
            CK(cudaMemcpyAsync(h_count, d.count[p], sizeof(unsigned long long), cudaMemcpyDeviceToHost, s));
            CK(cudaStreamSynchronize(s));
            long long edges = edges_of(*h_count);
            prepare<<<1, 1, 0, s>>>(d.count[1 - p], d.depth, l);
            if (edges > 0) expand<<<(unsigned)((edges + TILE - 1) / TILE), BLOCK, 0, s>>>(d, p);
          } else if (w == 1) {
            prepare<<<1, 1, 0, s>>>(d.count[1 - p], d.depth, l);
            expand<<<over_blocks, BLOCK, 0, s>>>(d, p);
          } else {
            prepare<<<1, 1, 0, s>>>(d.count[1 - p], d.depth, l);
            CK(cudaGraphLaunch(sized_exec[p], s));
          }
        }
        CK(cudaEventRecord(ev[levels], s));
      }
      CK(cudaStreamSynchronize(s));
      CK(cudaGetLastError());
      double host_total = std::chrono::duration<double, std::micro>(clk::now() - h0).count();
      if (r < 2) {
        if (r == 0) wrong_total += check(names[w]);
        continue;
      }
      total[w].push_back(host_total);
      if (w != 3) {
        for (int l = 0; l < levels; ++l) {
          float ms = 0;
          CK(cudaEventElapsedTime(&ms, ev[l], ev[l + 1]));
          per_level[w][l].push_back(ms * 1e3);
        }
      } else {
        CK(cudaMemcpy(h_stamp.data(), d_stamp, stamps * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
        for (int l = 0; l < levels; ++l) per_level[w][l].push_back((double)(h_stamp[l + 1] - h_stamp[l]) * 1e-3);
      }
    }
  }
  printf("\n# %d repeats after 2 warm-ups; us, p50 (p99)\n", repeats);
  for (int w = 0; w < 4; ++w) {
    if (w != 3)
      printf("%-6s level %d (median frontier): %8.2f (%8.2f)   whole BFS: %9.1f (%9.1f)\n", names[w], median_level,
             pct(per_level[w][median_level], 0.5), pct(per_level[w][median_level], 0.99), pct(total[w], 0.5),
             pct(total[w], 0.99));
    else
      printf("%-6s (device-driven, no per-level times)        whole BFS: %9.1f (%9.1f)\n", names[w],
             pct(total[w], 0.5), pct(total[w], 0.99));
  }
  double sized_m = pct(per_level[2][median_level], 0.5);
  printf("sized / sync at the median frontier: %.3f; sized / over: %.3f\n",
         sized_m / pct(per_level[0][median_level], 0.5), sized_m / pct(per_level[1][median_level], 0.5));
  printf("whole BFS: sized / sync %.3f, sized / over %.3f, while / sync %.3f\n",
         pct(total[2], 0.5) / pct(total[0], 0.5), pct(total[2], 0.5) / pct(total[1], 0.5),
         pct(total[3], 0.5) / pct(total[0], 0.5));
  printf("\n# per level, us p50, levels 0..%d (sync/over/sized: event to event, host gaps included; while: device "
         "%%globaltimer at each iteration's end)\n",
         levels - 1);
  for (int w = 0; w < 4; ++w) {
    printf("%-6s per level:", names[w]);
    for (int l = 0; l < levels; ++l) printf(" %9.2f", pct(per_level[w][l], 0.5));
    printf("\n");
  }
  printf("levels wrong over the four ways: %lld\ndone\n", wrong_total);
  return wrong_total != 0;
}
