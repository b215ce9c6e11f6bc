// bfs.cu: a level-synchronous BFS's expand, the sized launch's real consumer
// (examples/bfs/; its stand-alone probe on the raw driver: scripts/probes/bfs_sized_probe.cu).
//
// Top-down and edge-balanced (Merrill et al.; Gunrock's load-balanced advance): a level's work
// is its frontier's edges, spread over threads, since R-MAT's hubs have 10^5..10^6 edges. A
// frontier entry holds the rank of its vertex's first edge among the frontier's edges (`base`,
// ascending) and the offset that turns a rank into an index of `adj` (`shift`). A frontier's
// count is one 64-bit word: vertices << 32 | edges; its low half, the edge count E (the
// word's first 4 bytes, little-endian), is the device count that sizes the next expand. A
// block takes tiles of SRBT_BFS_TILE edge ranks in a grid-stride loop (any grid is correct):
// two warps find the tile's first and last entries by a 32-way search, the block stages them in
// shared memory, each thread finds its edges' entries by binary search, claims unvisited
// neighbours with atomicCAS on their level, and the block appends what it claimed with one
// 64-bit atomicAdd of (vertices << 32 | their edges) after a block scan: one atomic gives each
// new entry its slot and its base, so the next E is known when the level ends.
#include "sized_readback/slot.h"  // fixed-width integer types under nvcc and NVRTC alike

#define SRBT_BFS_BLOCK 256
#define SRBT_BFS_ITEMS 8
#define SRBT_BFS_TILE (SRBT_BFS_BLOCK * SRBT_BFS_ITEMS)
#define SRBT_ONE_VERTEX (1ull << 32)

// The BFS's device arrays (examples/bfs/ mirrors it: ten 8-byte words).
struct srbt_bfs {
    const int64_t* off;
    const int32_t* adj;
    int32_t* level;
    int64_t* base[2];
    int64_t* shift[2];
    uint64_t* count[2];
    int32_t* depth;
};

__device__ __forceinline__ int64_t srbt_edges_of(uint64_t c) { return (int64_t)(c & 0xffffffffull); }
__device__ __forceinline__ int32_t srbt_vertices_of(uint64_t c) { return (int32_t)(c >> 32); }

// The largest i in [0, n) with a[i] <= x (a nondecreasing, a[0] <= x); a whole warp, same
// arguments, probing 32 places a step.
__device__ int srbt_warp_last_le(const int64_t* a, int n, int64_t x) {
    const unsigned all = 0xffffffffu;
    int lane = threadIdx.x & 31;
    int lo = 0, hi = n;
    while (hi - lo > 1) {
        int probe = lo + (int)(((int64_t)(hi - lo) * lane) >> 5);
        unsigned le = __ballot_sync(all, a[probe] <= x);
        int j = __popc(le) - 1;
        int above = __shfl_sync(all, probe, j < 31 ? j + 1 : 31);
        lo = __shfl_sync(all, probe, j);
        if (j < 31) hi = above;
    }
    return lo;
}

// The largest i in [0, n) with a[i] <= x, one thread.
__device__ __forceinline__ int srbt_last_le(const int64_t* a, int n, int64_t x) {
    int lo = 0, hi = n;
    while (hi - lo > 1) {
        int m = lo + (hi - lo) / 2;
        if (a[m] <= x) lo = m;
        else hi = m;
    }
    return lo;
}

// Exclusive block sum of x over SRBT_BFS_BLOCK threads (8 warps); *total gets the sum. Every
// thread calls it; `warp_sums` is shared, and the caller syncs before its next use.
__device__ uint64_t srbt_block_exclusive_sum(uint64_t x, uint64_t* total, uint64_t* warp_sums) {
    const unsigned all = 0xffffffffu;
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    uint64_t inc = x;
    for (int o = 1; o < 32; o <<= 1) {
        uint64_t y = __shfl_up_sync(all, inc, o);
        if (lane >= o) inc += y;
    }
    if (lane == 31) warp_sums[w] = inc;
    __syncthreads();
    if (w == 0) {
        uint64_t s = lane < SRBT_BFS_BLOCK / 32 ? warp_sums[lane] : 0;
        for (int o = 1; o < SRBT_BFS_BLOCK / 32; o <<= 1) {
            uint64_t y = __shfl_up_sync(all, s, o);
            if (lane >= o) s += y;
        }
        if (lane < SRBT_BFS_BLOCK / 32) warp_sums[lane] = s;
    }
    __syncthreads();
    *total = warp_sums[SRBT_BFS_BLOCK / 32 - 1];
    return (w ? warp_sums[w - 1] : 0) + inc - x;
}

// One tile: edge ranks [t0, t1) of the current frontier, whose entries are tb[0..span),
// ts[0..span).
__device__ __forceinline__ void srbt_expand_tile(const srbt_bfs& d, uint64_t* next_count, int64_t* next_base,
                                                 int64_t* next_shift, int depth, int64_t t0, int64_t t1,
                                                 const int64_t* tb, const int64_t* ts, int span,
                                                 uint64_t* warp_sums, uint64_t* s_at) {
    int v[SRBT_BFS_ITEMS];
#pragma unroll
    for (int k = 0; k < SRBT_BFS_ITEMS; ++k) {
        int64_t r = t0 + k * SRBT_BFS_BLOCK + threadIdx.x;
        v[k] = -1;
        if (r < t1) v[k] = d.adj[ts[srbt_last_le(tb, span, r)] + r];
    }
#pragma unroll
    for (int k = 0; k < SRBT_BFS_ITEMS; ++k)
        if (v[k] >= 0 && *(volatile int32_t*)&d.level[v[k]] != -1) v[k] = -1;  // visited
#pragma unroll
    for (int k = 0; k < SRBT_BFS_ITEMS; ++k)
        if (v[k] >= 0 && atomicCAS(&d.level[v[k]], -1, depth + 1) != -1) v[k] = -1;  // claimed elsewhere
    int64_t start[SRBT_BFS_ITEMS];
    uint64_t deg[SRBT_BFS_ITEMS], mine = 0;
#pragma unroll
    for (int k = 0; k < SRBT_BFS_ITEMS; ++k) {
        start[k] = 0;
        deg[k] = 0;
        if (v[k] >= 0) {
            start[k] = d.off[v[k]];
            deg[k] = (uint64_t)(d.off[v[k] + 1] - start[k]);
            mine += SRBT_ONE_VERTEX + deg[k];
        }
    }
    uint64_t total;
    uint64_t before = srbt_block_exclusive_sum(mine, &total, warp_sums);
    if (threadIdx.x == 0) *s_at = total ? atomicAdd((unsigned long long*)next_count, (unsigned long long)total) : 0;
    __syncthreads();
    uint64_t at = *s_at + before;
#pragma unroll
    for (int k = 0; k < SRBT_BFS_ITEMS; ++k) {
        if (v[k] >= 0) {
            int slot = srbt_vertices_of(at);
            int64_t b = srbt_edges_of(at);
            next_base[slot] = b;
            next_shift[slot] = start[k] - b;
            at += SRBT_ONE_VERTEX + deg[k];
        }
    }
}

// Expands frontier p at level *d.depth into frontier 1 - p. Any grid (grid-stride tiles).
extern "C" __global__ void __launch_bounds__(SRBT_BFS_BLOCK) srbt_bfs_expand(const srbt_bfs d, int p) {
    __shared__ int64_t s_base[SRBT_BFS_TILE], s_shift[SRBT_BFS_TILE];
    __shared__ uint64_t warp_sums[SRBT_BFS_BLOCK / 32];
    __shared__ int s_first, s_last;
    __shared__ uint64_t s_at;
    const uint64_t* count = p ? d.count[1] : d.count[0];
    const int64_t* fb = p ? d.base[1] : d.base[0];
    const int64_t* fs = p ? d.shift[1] : d.shift[0];
    uint64_t* next_count = p ? d.count[0] : d.count[1];
    int64_t* next_base = p ? d.base[0] : d.base[1];
    int64_t* next_shift = p ? d.shift[0] : d.shift[1];
    uint64_t cur = *count;
    int n = srbt_vertices_of(cur);
    int64_t edges = srbt_edges_of(cur);
    int depth = *d.depth;
    for (int64_t t0 = (int64_t)blockIdx.x * SRBT_BFS_TILE; t0 < edges; t0 += (int64_t)gridDim.x * SRBT_BFS_TILE) {
        int64_t t1 = t0 + SRBT_BFS_TILE < edges ? t0 + SRBT_BFS_TILE : edges;
        __syncthreads();
        if (threadIdx.x < 32) {
            int i = srbt_warp_last_le(fb, n, t0);
            if (threadIdx.x == 0) s_first = i;
        } else if (threadIdx.x < 64) {
            int i = srbt_warp_last_le(fb, n, t1 - 1);
            if (threadIdx.x == 32) s_last = i;
        }
        __syncthreads();
        int first = s_first, span = s_last - s_first + 1;
        if (span <= SRBT_BFS_TILE) {
            for (int j = threadIdx.x; j < span; j += SRBT_BFS_BLOCK) {
                s_base[j] = fb[first + j];
                s_shift[j] = fs[first + j];
            }
            __syncthreads();
            srbt_expand_tile(d, next_count, next_base, next_shift, depth, t0, t1, s_base, s_shift, span, warp_sums, &s_at);
        } else {
            srbt_expand_tile(d, next_count, next_base, next_shift, depth, t0, t1, fb + first, fs + first, span, warp_sums,
                             &s_at);
        }
    }
}

// Before level `l`: frontier `next` empty, the depth l; and, when `stamps` is not null, the
// time it ran (%globaltimer, ns) in stamps[l]: the level's start, read on the device by a
// kernel every level runs anyway, so timing adds no node to a graph or stream under test.
extern "C" __global__ void srbt_bfs_prepare(uint64_t* next_count, int32_t* depth, int l, uint64_t* stamps) {
    if (stamps != nullptr) {
        uint64_t t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        stamps[l] = t;
    }
    *next_count = 0;
    *depth = l;
}
