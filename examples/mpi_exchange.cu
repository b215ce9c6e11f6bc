// mpi_exchange.cu: particle exchange over MPI with sized-readback's bucketed append, and the
// baseline that particle codes use, in one program.
//
// A periodic unit square is decomposed over the ranks (px x py). Each step a push kernel moves
// every particle of the rank; a particle that leaves the rank's subdomain goes to the bucket of
// the neighbour it moved towards (8 directions, wrapping: with few ranks a neighbour may be the
// rank itself), the others are compacted in place for the next step. Then every bucket is sent
// to its neighbour with MPI_Isend, the particles that arrive are uploaded, and the next step
// begins.
//
// - library:  the push kernel appends the leavers straight into the buckets of a pinned slot
//             (srb::BlockAppendTo); the host waits for the slot's trailer and posts MPI_Isend
//             straight from each bucket's rows in the slot (srb_bucket_data).
// - baseline: the push kernel writes the leavers into per-bucket device buffers with per-bucket
//             device counters (one atomic per block per bucket, as users write it); the host
//             copies the counts, synchronizes, copies each bucket's rows, synchronizes, then
//             posts the same sends (AMReX's, Cabana's and LAMMPS-Kokkos's pattern without
//             GPU-aware MPI).
//
// Receivers size their buffers with MPI_Probe + MPI_Get_count: one message per neighbour and
// step whatever its size (also empty), no separate count exchange round; every message is
// matched by its source and its tag (the direction), so a neighbour that is the rank itself or
// appears twice is no special case.
//
// Every step is verified: the global particle count is conserved, every particle sits in its
// rank's subdomain, and an order-independent checksum of the ids (a sum of mixed ids, computed
// on the device and reduced over the ranks) equals the initial one. The verification is timed
// apart (it is the same in both modes) and left out of the steps per second.
//
// Build (scripts/build-mpi-exchange.sh): nvcc -O3 -std=c++17 -ccbin mpicxx examples/mpi_exchange.cu
//   -Icapi/include -Iinclude libsized_readback.a -lpthread -ldl -lm -lrt -o mpi_exchange
// Run: mpirun -np 4 ./mpi_exchange --particles 1048576 --leave 0.01 --steps 200 --json out.json
#include <mpi.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sized_readback.h"
#include "sized_readback/append.cuh"

struct Particle {
    double x, y, vx, vy;
    unsigned long long id;
};
static_assert(sizeof(Particle) == 40, "40-byte particles");

constexpr int kDirs = 8;
constexpr int kThreads = 256;

struct Geometry {
    int px, py, rx, ry;
};

// The direction of (dx, dy) in {-1, 0, 1}^2 \ {(0, 0)}, in the order of kDx/kDy below.
__host__ __device__ inline int dir_of(int dx, int dy) {
    const int k = (dy + 1) * 3 + (dx + 1);  // 0..8, 4 is (0, 0)
    return k < 4 ? k : k - 1;
}
static const int kDx[kDirs] = {-1, 0, 1, -1, 1, -1, 0, 1};
static const int kDy[kDirs] = {-1, -1, -1, 0, 0, 1, 1, 1};

__device__ inline unsigned long long mix64(unsigned long long x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
static unsigned long long mix64_host(unsigned long long x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// Moves particle p one step; returns the direction it left the subdomain in, or -1.
__device__ inline int move(Particle& p, double dt, Geometry g) {
    p.x += p.vx * dt;
    p.y += p.vy * dt;
    const double lx = 1.0 / g.px, ly = 1.0 / g.py;
    const double x0 = g.rx * lx, y0 = g.ry * ly;
    const int dx = p.x < x0 ? -1 : (p.x >= x0 + lx ? 1 : 0);
    const int dy = p.y < y0 ? -1 : (p.y >= y0 + ly ? 1 : 0);
    p.x -= floor(p.x);  // the periodic domain
    p.y -= floor(p.y);
    return dx == 0 && dy == 0 ? -1 : dir_of(dx, dy);
}

// Keeps thread 0 of block 0 busy for `ns` nanoseconds: a push of a costlier physics.
__device__ inline void busy(unsigned long long ns) {
    if (ns == 0 || blockIdx.x != 0 || threadIdx.x != 0) return;
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        __nanosleep(256);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

// Block-aggregated compaction of the particles that stay: one atomic per block.
struct Stay {
    unsigned warp[kThreads / 32];
    unsigned long long base;
};
__device__ inline void stay_block(Stay& s, bool keep, const Particle& p, Particle* out, unsigned long long* count) {
    const unsigned lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const unsigned mask = __ballot_sync(0xffffffffu, keep);
    if (lane == 0) s.warp[w] = __popc(mask);
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned run = 0;
        for (int i = 0; i < kThreads / 32; ++i) {
            const unsigned c = s.warp[i];
            s.warp[i] = run;
            run += c;
        }
        s.base = run ? atomicAdd(count, (unsigned long long)run) : 0;
    }
    __syncthreads();
    if (keep) out[s.base + s.warp[w] + __popc(mask & ((1u << lane) - 1))] = p;
    __syncthreads();
}

// Library: the leavers go straight into the slot's buckets.
__global__ void __launch_bounds__(kThreads) push_append(srb_append_desc d, const Particle* in, Particle* out,
                                                        unsigned long long n, unsigned long long* stay_count,
                                                        double dt, Geometry g, unsigned long long push_ns) {
    using Append = srb::BlockAppendTo<kThreads, kDirs, Particle>;
    __shared__ Append::TempStorage tmp;
    __shared__ Stay stay;
    Append app(tmp, d);
    for (unsigned long long b = (unsigned long long)blockIdx.x * kThreads; b < n; b += (unsigned long long)gridDim.x * kThreads) {
        const unsigned long long i = b + threadIdx.x;
        Particle p{};
        int dir = -1;
        if (i < n) {
            p = in[i];
            dir = move(p, dt, g);
        }
        stay_block(stay, i < n && dir < 0, p, out, stay_count);
        app.append_to(dir < 0 ? 0u : (unsigned)dir, dir >= 0, p);
    }
    busy(push_ns);
    app.finish();
}

// Baseline: the leavers go into per-bucket device buffers, with per-bucket device counters.
__global__ void __launch_bounds__(kThreads) push_dev(const Particle* in, Particle* out, unsigned long long n,
                                                     unsigned long long* stay_count, Particle* buckets,
                                                     unsigned long long* bucket_counts, unsigned long long cap,
                                                     double dt, Geometry g, unsigned long long push_ns) {
    __shared__ Stay stay;
    __shared__ unsigned hist[kDirs];
    __shared__ unsigned long long base[kDirs];
    for (unsigned long long b = (unsigned long long)blockIdx.x * kThreads; b < n; b += (unsigned long long)gridDim.x * kThreads) {
        const unsigned long long i = b + threadIdx.x;
        Particle p{};
        int dir = -1;
        if (i < n) {
            p = in[i];
            dir = move(p, dt, g);
        }
        stay_block(stay, i < n && dir < 0, p, out, stay_count);
        if (threadIdx.x < kDirs) hist[threadIdx.x] = 0;
        __syncthreads();
        const unsigned rank = dir >= 0 ? atomicAdd(&hist[dir], 1u) : 0;
        __syncthreads();
        if (threadIdx.x < kDirs)
            base[threadIdx.x] = hist[threadIdx.x] ? atomicAdd(&bucket_counts[threadIdx.x], (unsigned long long)hist[threadIdx.x]) : 0;
        __syncthreads();
        if (dir >= 0 && base[dir] + rank < cap) buckets[(unsigned long long)dir * cap + base[dir] + rank] = p;
        __syncthreads();
    }
    busy(push_ns);
}

// Verification: the number of particles outside the subdomain and the sum of mixed ids.
__global__ void check_kernel(const Particle* p, unsigned long long n, Geometry g, unsigned long long* out) {
    unsigned long long sum = 0, misplaced = 0;
    const double lx = 1.0 / g.px, ly = 1.0 / g.py;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        sum += mix64(p[i].id);
        const int cx = min((int)(p[i].x / lx), g.px - 1), cy = min((int)(p[i].y / ly), g.py - 1);
        misplaced += (cx != g.rx || cy != g.ry) ? 1 : 0;
    }
    for (int o = 16; o > 0; o >>= 1) {
        sum += __shfl_down_sync(0xffffffffu, sum, o);
        misplaced += __shfl_down_sync(0xffffffffu, misplaced, o);
    }
    if ((threadIdx.x & 31) == 0) {
        atomicAdd(&out[0], sum);
        atomicAdd(&out[1], misplaced);
    }
}

static int g_rank = 0;

#define CUDA_CHECK(call)                                                                          \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess) {                                                                  \
            std::fprintf(stderr, "mpi_exchange rank %d: %s failed: %s\n", g_rank, #call, cudaGetErrorString(e_)); \
            MPI_Abort(MPI_COMM_WORLD, 3);                                                         \
        }                                                                                         \
    } while (0)

static void srb_check(int code, const char* what) {
    if (code != SRB_OK) {
        std::fprintf(stderr, "mpi_exchange rank %d: %s failed (%d): %s\n", g_rank, what, code, srb_last_error());
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
}

struct Options {
    unsigned long long particles = 1ull << 20;
    double leave = 0.01;
    unsigned long long push_ns = 0;
    int steps = 200;
    int warmup = 20;
    std::string mode = "both";
    std::string json;
    std::vector<int> gpu_map;
};

static Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&](const char* what) -> std::string {
            if (i + 1 >= argc) {
                if (g_rank == 0) std::fprintf(stderr, "mpi_exchange: %s needs a value\n", what);
                MPI_Finalize();
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--particles") o.particles = std::stoull(next("--particles"));
        else if (a == "--leave") o.leave = std::stod(next("--leave"));
        else if (a == "--push-ns") o.push_ns = std::stoull(next("--push-ns"));
        else if (a == "--steps") o.steps = std::stoi(next("--steps"));
        else if (a == "--warmup") o.warmup = std::stoi(next("--warmup"));
        else if (a == "--mode") o.mode = next("--mode");
        else if (a == "--json") o.json = next("--json");
        else if (a == "--gpu-map") {
            std::string m = next("--gpu-map");
            for (size_t s = 0; s <= m.size();) {
                size_t e = m.find(',', s);
                if (e == std::string::npos) e = m.size();
                o.gpu_map.push_back(std::stoi(m.substr(s, e - s)));
                s = e + 1;
            }
        } else {
            if (g_rank == 0)
                std::fprintf(stderr,
                             "usage: mpi_exchange [--particles N] [--leave FRACTION] [--push-ns NS] [--steps S] "
                             "[--warmup W] [--mode both|library|baseline] [--json PATH] [--gpu-map D0,D1,...]\n");
            MPI_Finalize();
            std::exit(2);
        }
    }
    return o;
}

struct Stats {
    std::vector<double> latency_us, step_us, verify_us, push_us;
    unsigned long long sent = 0, verified = 0;
    double loop_s = 0;
};

static double pct(std::vector<double> v, double q) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t k = (size_t)std::ceil(q * v.size());
    return v[std::min(v.size() - 1, k == 0 ? 0 : k - 1)];
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    Options o = parse(argc, argv);

    // Rank to GPU: --gpu-map, else the rank on its node modulo the node's GPUs.
    int devices = 0;
    cudaError_t de = cudaGetDeviceCount(&devices);
    if (de != cudaSuccess || devices == 0) {
        if (g_rank == 0)
            std::fprintf(stderr,
                         "mpi_exchange: no usable CUDA device (cudaGetDeviceCount: %s; without an NVIDIA driver the "
                         "runtime reports an insufficient driver): this program needs a GPU\n",
                         de != cudaSuccess ? cudaGetErrorString(de) : "0 devices");
        MPI_Finalize();
        return 2;
    }
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &node);
    int local = 0;
    MPI_Comm_rank(node, &local);
    const int device = o.gpu_map.empty() ? local % devices : o.gpu_map[g_rank % o.gpu_map.size()];
    CUDA_CHECK(cudaSetDevice(device));

    // The decomposition: px * py = size, px the largest divisor of size not above its root.
    Geometry g{1, size, 0, 0};
    for (int d = 1; d * d <= size; ++d)
        if (size % d == 0) g = Geometry{size / d, d, 0, 0};
    g.rx = g_rank % g.px;
    g.ry = g_rank / g.px;
    int nbr[kDirs];
    for (int d = 0; d < kDirs; ++d)
        nbr[d] = ((g.ry + kDy[d] + g.py) % g.py) * g.px + (g.rx + kDx[d] + g.px) % g.px;
    const double lx = 1.0 / g.px, ly = 1.0 / g.py;
    // Displacements uniform in [-a, a] per axis: a fraction of about a / (2 L) leaves across
    // each axis, so a = 2 F / (1 / lx + 1 / ly) leaves a fraction F in all.
    const double a = 2.0 * o.leave / (1.0 / lx + 1.0 / ly);

    const unsigned long long n0 = o.particles;
    const unsigned long long cap_local = 2 * n0 + 1024;
    // A bucket holds up to 8x the expected leavers of one direction, and spills beyond.
    const unsigned long long bucket_cap = std::max<unsigned long long>(4096, (unsigned long long)(8.0 * n0 * o.leave / 2));
    std::vector<Particle> h(n0);
    unsigned long long seed = 0x5eedull + g_rank;
    auto uni = [&]() { return (double)(mix64_host(seed++) >> 11) / (double)(1ull << 53); };
    for (unsigned long long i = 0; i < n0; ++i) {
        h[i].x = (g.rx + uni()) * lx;
        h[i].y = (g.ry + uni()) * ly;
        h[i].vx = (2 * uni() - 1) * a;
        h[i].vy = (2 * uni() - 1) * a;
        h[i].id = (unsigned long long)g_rank * n0 + i;
    }
    Particle *d_a, *d_b, *d_buckets;
    unsigned long long *d_stay, *d_bucket_counts, *d_check;
    CUDA_CHECK(cudaMalloc(&d_a, cap_local * sizeof(Particle)));
    CUDA_CHECK(cudaMalloc(&d_b, cap_local * sizeof(Particle)));
    CUDA_CHECK(cudaMalloc(&d_buckets, kDirs * bucket_cap * sizeof(Particle)));
    CUDA_CHECK(cudaMalloc(&d_stay, 8));
    CUDA_CHECK(cudaMalloc(&d_bucket_counts, kDirs * 8));
    CUDA_CHECK(cudaMalloc(&d_check, 16));
    CUDA_CHECK(cudaMemcpy(d_a, h.data(), n0 * sizeof(Particle), cudaMemcpyHostToDevice));
    Particle *h_send, *h_recv;
    unsigned long long *h_counts, *h_check;
    CUDA_CHECK(cudaHostAlloc(&h_send, kDirs * bucket_cap * sizeof(Particle), cudaHostAllocDefault));
    CUDA_CHECK(cudaHostAlloc(&h_recv, kDirs * 4 * bucket_cap * sizeof(Particle), cudaHostAllocDefault));
    CUDA_CHECK(cudaHostAlloc(&h_counts, kDirs * 8, cudaHostAllocDefault));
    CUDA_CHECK(cudaHostAlloc(&h_check, 16, cudaHostAllocDefault));
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    // The push kernel's own time on the GPU, to tell it apart from the exchange around it.
    cudaEvent_t push_start, push_end;
    CUDA_CHECK(cudaEventCreate(&push_start));
    CUDA_CHECK(cudaEventCreate(&push_end));

    // The library's bucketed readback: 8 buckets of one 40-byte column, 2 slots.
    size_t elem = sizeof(Particle);
    srb_readback* rb = nullptr;
    srb_check(srb_create_buckets(device, kDirs, bucket_cap, bucket_cap, 2, 1, &elem, SRB_FLAG_APPEND, &rb),
              "srb_create_buckets");

    unsigned long long n = n0;
    unsigned long long global_n = 0, check0 = 0;
    const int blocks = (int)std::min<unsigned long long>((n0 + kThreads - 1) / kThreads, 132 * 16);

    // The initial checksum and count.
    auto verify = [&](unsigned long long* sum_out, unsigned long long* misplaced_out, unsigned long long* count_out) {
        CUDA_CHECK(cudaMemsetAsync(d_check, 0, 16, stream));
        check_kernel<<<std::max(1, (int)std::min<unsigned long long>((n + 255) / 256, 1056)), 256, 0, stream>>>(d_a, n, g, d_check);
        CUDA_CHECK(cudaMemcpyAsync(h_check, d_check, 16, cudaMemcpyDeviceToHost, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        unsigned long long local_v[3] = {h_check[0], h_check[1], n}, global_v[3];
        MPI_Allreduce(local_v, global_v, 3, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        *sum_out = global_v[0];
        *misplaced_out = global_v[1];
        *count_out = global_v[2];
    };
    unsigned long long misplaced0 = 0;
    verify(&check0, &misplaced0, &global_n);
    if (misplaced0 != 0 || global_n != n0 * size) {
        std::fprintf(stderr, "mpi_exchange: bad initial state\n");
        MPI_Abort(MPI_COMM_WORLD, 4);
    }

    MPI_Request req[kDirs];
    uint64_t counts[kDirs];
    int failures = 0;
    auto step = [&](bool library, Stats& st, bool timed) {
        const double t0 = MPI_Wtime();
        CUDA_CHECK(cudaMemsetAsync(d_stay, 0, 8, stream));
        Particle* send_base[kDirs];
        uint64_t seq = 0, total = 0;
        if (library) {
            srb_append_desc desc;
            srb_check(srb_append_begin(rb, stream, nullptr, &desc, &seq), "srb_append_begin");
            CUDA_CHECK(cudaEventRecord(push_start, stream));
            push_append<<<blocks, kThreads, 0, stream>>>(desc, d_a, d_b, n, d_stay, 1.0, g, o.push_ns);
            CUDA_CHECK(cudaEventRecord(push_end, stream));
            srb_check(srb_append_end(rb, seq, cudaPeekAtLastError() == cudaSuccess ? 0 : 1), "srb_append_end");
            srb_check(srb_wait(rb, seq, -1, &total), "srb_wait");
            for (int d = 0; d < kDirs; ++d) {
                send_base[d] = (Particle*)srb_bucket_data(rb, seq, d, 0, &counts[d]);
                if (send_base[d] == nullptr) srb_check(-1, "srb_bucket_data");
            }
        } else {
            CUDA_CHECK(cudaMemsetAsync(d_bucket_counts, 0, kDirs * 8, stream));
            CUDA_CHECK(cudaEventRecord(push_start, stream));
            push_dev<<<blocks, kThreads, 0, stream>>>(d_a, d_b, n, d_stay, d_buckets, d_bucket_counts, bucket_cap, 1.0, g,
                                                      o.push_ns);
            CUDA_CHECK(cudaEventRecord(push_end, stream));
            CUDA_CHECK(cudaMemcpyAsync(h_counts, d_bucket_counts, kDirs * 8, cudaMemcpyDeviceToHost, stream));
            CUDA_CHECK(cudaStreamSynchronize(stream));
            for (int d = 0; d < kDirs; ++d) {
                counts[d] = h_counts[d];
                if (counts[d] > bucket_cap) {
                    std::fprintf(stderr, "mpi_exchange: bucket %d overflowed (%llu)\n", d, (unsigned long long)counts[d]);
                    MPI_Abort(MPI_COMM_WORLD, 5);
                }
                send_base[d] = h_send + d * bucket_cap;
                total += counts[d];
                if (counts[d])
                    CUDA_CHECK(cudaMemcpyAsync(send_base[d], d_buckets + d * bucket_cap, counts[d] * sizeof(Particle),
                                               cudaMemcpyDeviceToHost, stream));
            }
            CUDA_CHECK(cudaStreamSynchronize(stream));
        }
        for (int d = 0; d < kDirs; ++d)
            MPI_Isend(send_base[d], (int)(counts[d] * sizeof(Particle)), MPI_BYTE, nbr[d], d, MPI_COMM_WORLD, &req[d]);
        const double t1 = MPI_Wtime();
        // Receive what the neighbours sent towards this rank: direction d comes from the
        // neighbour in the opposite direction.
        unsigned long long got = 0;
        for (int d = 0; d < kDirs; ++d) {
            MPI_Status s;
            int bytes = 0;
            MPI_Probe(nbr[kDirs - 1 - d], d, MPI_COMM_WORLD, &s);
            MPI_Get_count(&s, MPI_BYTE, &bytes);
            MPI_Recv(h_recv + got, bytes, MPI_BYTE, nbr[kDirs - 1 - d], d, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            got += bytes / sizeof(Particle);
        }
        const unsigned long long stay = n - total;
        if (got)
            CUDA_CHECK(cudaMemcpyAsync(d_b + stay, h_recv, got * sizeof(Particle), cudaMemcpyHostToDevice, stream));
        MPI_Waitall(kDirs, req, MPI_STATUSES_IGNORE);
        if (library) srb_check(srb_release(rb, seq), "srb_release");  // the slot was the send buffer
        n = stay + got;
        std::swap(d_a, d_b);
        CUDA_CHECK(cudaStreamSynchronize(stream));  // the upload before the host's buffers are reused
        const double t2 = MPI_Wtime();
        float push_ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&push_ms, push_start, push_end));
        // Verification, timed apart.
        unsigned long long sum = 0, misplaced = 0, count = 0;
        verify(&sum, &misplaced, &count);
        const double t3 = MPI_Wtime();
        if (sum != check0 || misplaced != 0 || count != global_n) ++failures;
        if (timed) {
            st.latency_us.push_back((t1 - t0) * 1e6);
            st.step_us.push_back((t2 - t0) * 1e6);
            st.verify_us.push_back((t3 - t2) * 1e6);
            st.push_us.push_back(push_ms * 1e3);
            st.loop_s += t2 - t0;
            st.sent += total;
            st.verified += (sum == check0 && misplaced == 0 && count == global_n) ? 1 : 0;
        }
    };

    const bool run_lib = o.mode != "baseline", run_base = o.mode != "library";
    Stats lib, base, junk;
    for (int i = 0; i < o.warmup; ++i) {
        if (run_lib) step(true, junk, false);
        if (run_base) step(false, junk, false);
    }
    // Alternate blocks of 10 steps, so drift affects both modes alike.
    for (int done = 0; done < o.steps; done += 10) {
        const int k = std::min(10, o.steps - done);
        if (run_lib)
            for (int i = 0; i < k; ++i) step(true, lib, true);
        if (run_base)
            for (int i = 0; i < k; ++i) step(false, base, true);
    }

    // Per step, the slowest rank's latency and step time; the whole loop's slowest rank.
    auto reduce_max = [&](std::vector<double>& v) {
        std::vector<double> out(v.size());
        MPI_Allreduce(v.data(), out.data(), (int)v.size(), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        v = out;
    };
    std::string json = "{\"ranks\": " + std::to_string(size) + ", \"decomposition\": \"" + std::to_string(g.px) + "x" +
                       std::to_string(g.py) + "\", \"particles_per_rank\": " + std::to_string(n0) +
                       ", \"leave_fraction\": " + std::to_string(o.leave) + ", \"push_ns\": " + std::to_string(o.push_ns) +
                       ", \"steps\": " + std::to_string(o.steps) + ", \"warmup\": " + std::to_string(o.warmup) +
                       ", \"devices_seen\": " + std::to_string(devices) + ", \"device\": " + std::to_string(device) +
                       ", \"push_grid\": {\"threads\": " + std::to_string(kThreads) + ", \"blocks\": " +
                       std::to_string(blocks) + "}, \"modes\": {";
    bool first = true;
    for (auto [name, st] : {std::pair<const char*, Stats*>{"library", &lib}, {"baseline", &base}}) {
        if (st->step_us.empty()) continue;
        reduce_max(st->latency_us);
        reduce_max(st->step_us);
        reduce_max(st->verify_us);
        reduce_max(st->push_us);
        double loop = 0, sent_sum = 0;
        MPI_Allreduce(&st->loop_s, &loop, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        double sent = (double)st->sent;
        MPI_Allreduce(&sent, &sent_sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        unsigned long long verified = 0;
        MPI_Allreduce(&st->verified, &verified, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
        const double steps = (double)st->step_us.size();
        char buf[1024];
        std::snprintf(buf, sizeof buf,
                      "%s\"%s\": {\"exchange_latency_us\": {\"p50\": %.2f, \"p99\": %.2f}, \"step_us\": {\"p50\": %.2f, "
                      "\"p99\": %.2f}, \"verify_us_p50\": %.2f, \"push_kernel_us\": {\"p50\": %.2f, \"p99\": %.2f}, \"steps_per_s\": %.1f, \"steps\": %d, \"verified_steps\": %llu, "
                      "\"left_per_step_per_rank\": %.1f}",
                      first ? "" : ", ", name, pct(st->latency_us, 0.5), pct(st->latency_us, 0.99), pct(st->step_us, 0.5),
                      pct(st->step_us, 0.99), pct(st->verify_us, 0.5), pct(st->push_us, 0.5), pct(st->push_us, 0.99), steps / loop, (int)steps, verified,
                      sent_sum / steps / size);
        json += buf;
        first = false;
        if (g_rank == 0)
            std::printf("mpi_exchange %s: %d ranks (%dx%d), %llu particles/rank, %.3f leave: exchange p50 %.2f us p99 %.2f us, "
                        "push kernel p50 %.2f us, step p50 %.2f us, %.1f steps/s, %llu/%d steps verified, %.0f left/step/rank\n",
                        name, size, g.px, g.py, n0, o.leave, pct(st->latency_us, 0.5), pct(st->latency_us, 0.99),
                        pct(st->push_us, 0.5), pct(st->step_us, 0.5), steps / loop, verified, (int)steps, sent_sum / steps / size);
    }
    json += "}, \"failed_steps\": " + std::to_string(failures) + "}";
    int all_failures = 0;
    MPI_Allreduce(&failures, &all_failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0) {
        std::printf("mpi_exchange: %s (%d failed step checks over all ranks)\n", all_failures ? "VERIFY FAILED" : "every step verified",
                    all_failures);
        if (!o.json.empty()) {
            FILE* f = std::fopen(o.json.c_str(), "w");
            if (f) {
                std::fprintf(f, "%s\n", json.c_str());
                std::fclose(f);
            }
        }
    }
    srb_destroy(rb);
    cudaFreeHost(h_send);
    cudaFreeHost(h_recv);
    cudaFreeHost(h_counts);
    cudaFreeHost(h_check);
    cudaFree(d_a);
    cudaFree(d_b);
    cudaFree(d_buckets);
    cudaFree(d_stay);
    cudaFree(d_bucket_counts);
    cudaFree(d_check);
    cudaEventDestroy(push_start);
    cudaEventDestroy(push_end);
    cudaStreamDestroy(stream);
    MPI_Comm_free(&node);
    MPI_Finalize();
    return all_failures ? 1 : 0;
}
