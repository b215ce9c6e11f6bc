/*
 * sized_readback/append.cuh: device-side append for sized-readback. A kernel appends rows (one
 * value per column, any number of columns up to SRB_MAX_COLUMNS, mixed element types) straight
 * into a readback's slot and counts them; the last block to finish writes the count and the
 * trailer. No count in device memory, no second kernel, no memset launch.
 *
 * Plain CUDA C++17 without standard-library includes: compiles with nvcc and with NVRTC (the
 * crate exposes this file, with slot.h, as `sized_readback::append::HEADER`, and its include
 * directory to build scripts as `DEP_SIZED_READBACK_INCLUDE`).
 *
 * Usage (one readback per grid; every thread of every block makes the same calls):
 *
 *     #include <sized_readback/append.cuh>
 *     extern "C" __global__ void left_box(srb_append_desc d, const double3* x, int n, double L) {
 *         using Append = srb::BlockAppend<256, double3, long long>;
 *         __shared__ Append::TempStorage tmp;
 *         Append app(tmp, d);                                   // block-collective
 *         for (int base = blockIdx.x * 256; base < n; base += gridDim.x * 256) {
 *             int i = base + threadIdx.x;                       // uniform trip count per block
 *             bool out = i < n && (x[i].x < 0 || x[i].x >= L);
 *             app.append(out, out ? x[i] : double3{}, (long long)i);   // block-collective
 *         }
 *         app.finish();                                         // block-collective, once
 *     }
 *
 * Rules (CUB's vocabulary: "block-collective" means every thread of the block calls it, with
 * the block converged, the same number of times):
 * - The block has exactly BLOCK_THREADS threads (any 1-, 2- or 3-D shape), a multiple of 32.
 * - Every block of the grid constructs one BlockAppend from the same descriptor, calls append()
 *   any number of times (0 included) and finish() exactly once, at its end. A block that returns
 *   without finish() leaves the readback unfinished: the host reports it once the stream is done
 *   (Error::AppendUnfinished / SRB_ERR_APPEND_UNFINISHED), never a hang. One descriptor serves
 *   exactly one grid; a second grid on the same descriptor is undefined.
 * - The column types are the readback's columns, in order and with the same sizes; a mismatch
 *   (or a block of another size) appends nothing and is reported by the host as misuse.
 * - Rows are stored in no particular order (the order in which blocks win the atomic).
 * - Cost: finish() is one atomic round trip per block at its exit (the last block then writes
 *   the trailer), so launch a grid-stride loop as one wave of resident blocks (multiprocessors
 *   x resident blocks per multiprocessor) rather than one block per 256 items: on an H200, a
 *   selection of 1..4096 of 1M candidates appended in 0.99-1.03x the time of the same kernel
 *   writing to device memory, as one wave (results/2026-12-04/harness-e9af022, -c21f208);
 *   more waves cost more atomic round trips.
 *
 * Where rows go, for the grid's n-th appended row (0-based, n counted over the whole grid):
 * n < capacity: row n of the slot; capacity <= n < capacity + spill_capacity: row
 * n - capacity of the device-side spill region; beyond: dropped, but still counted. The
 * trailer then carries the true count, and the host fetches the spilled rows on request.
 *
 * Memory model (PTX ISA, "Memory Consistency Model"): every block that stored or counted rows
 * releases them with a GPU-scope fence.acq_rel (cumulative over the barrier before it) before
 * it counts itself out with an atomic (one that appended nothing just counts out: the
 * departure atomics form one release sequence); the last block's GPU-scope fence after that
 * atomic is the acquire of every block's release (the atomics and fences are all of one GPU, so
 * morally strong at GPU scope). Its trailer fence, at system scope, is then the one release
 * the host synchronizes with: cumulative over everything the last block has observed, it
 * orders every block's rows, the count and the status before the `seq` store. So a block pays
 * a GPU-scope fence, not a system-scope one that would wait on its stores over PCIe, and the
 * grid pays one system-scope fence, in the last block. A
 * naturally aligned 8-byte store is single-copy atomic (PTX ISA, "Memory Consistency Model":
 * "Vector data types" / "single-copy atomicity" of aligned accesses up to 8 bytes), also in
 * mapped host memory, so the host reads `seq` whole or not at all.
 */
#ifndef SIZED_READBACK_APPEND_CUH
#define SIZED_READBACK_APPEND_CUH

#ifndef SIZED_READBACK_SLOT_H
#include "slot.h"
#endif

namespace srb {
namespace detail {

/* Memory-model operations, named as in the PTX ISA. The .sys scope includes the host. */

/** fence.sc.sys: what __threadfence_system() emits. */
__device__ __forceinline__ void fence_sc_sys() { asm volatile("fence.sc.sys;" ::: "memory"); }

/** fence.acq_rel.gpu: a release or acquire pattern with an atomic, among blocks of this GPU. */
__device__ __forceinline__ void fence_acq_rel_gpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }

/** ld.acquire.sys: reads a word the host writes with a release store (mapped memory). */
__device__ __forceinline__ uint64_t ld_acquire_sys(const uint64_t* p) {
    uint64_t v;
    asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

/** st.relaxed.sys: one single-copy-atomic 8-byte store, visible to the host; ordered after
    earlier stores by a preceding fence_sc_sys(). */
__device__ __forceinline__ void st_relaxed_sys(uint64_t* p, uint64_t v) {
    asm volatile("st.relaxed.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/** ld.acquire.gpu: reads a word another kernel of this device wrote with st_release_gpu. */
__device__ __forceinline__ uint64_t ld_acquire_gpu(const uint64_t* p) {
    uint64_t v;
    asm volatile("ld.acquire.gpu.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

/** st.release.gpu: publishes a word (and every store before it) to later kernels. */
__device__ __forceinline__ void st_release_gpu(uint64_t* p, uint64_t v) {
    asm volatile("st.release.gpu.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/** ld.relaxed.gpu: a plain atomic read of a counter other blocks update. */
__device__ __forceinline__ uint64_t ld_relaxed_gpu(const uint64_t* p) {
    uint64_t v;
    asm volatile("ld.relaxed.gpu.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

/** The state one block of a readback kernel needs: which readback, which slot, whether it may
    write (device-sequenced mode: whether the host released the slot). */
struct SlotChoice {
    uint64_t seq;
    uint32_t slot;
    uint32_t may_write;
};

/**
 * Thread 0 of each block: the readback's sequence number and slot. Host-sequenced: from the
 * parameters. Device-sequenced (seq_counter != 0): seq = counter + 1, slot = (seq - 1) %
 * num_slots, and the first block to arrive decides for all whether the host has released the
 * slot's previous readback (seq - num_slots), since the host may release it meanwhile.
 */
__device__ __forceinline__ SlotChoice choose_slot(uint64_t host_seq, uint32_t host_slot, uint64_t seq_counter,
                                                  uint64_t ring_ctl, srb_slot_sync* sync_base, uint32_t num_slots) {
    SlotChoice c;
    if (seq_counter == 0) {
        c.seq = host_seq;
        c.slot = host_slot;
        c.may_write = 1;
        return c;
    }
    // The previous readback's last block published the counter with st.release.gpu.
    c.seq = ld_acquire_gpu(reinterpret_cast<const uint64_t*>(seq_counter)) + 1;
    c.slot = (uint32_t)((c.seq - 1) % num_slots);
    srb_slot_sync* sync = sync_base + c.slot;
    if (atomicAdd(&sync->arrivals, 1u) == 0) {
        const srb_ring_ctl* ctl = reinterpret_cast<const srb_ring_ctl*>(ring_ctl);
        // The host stores released_seq with Release order after reading the slot: acquire it.
        const uint64_t released = ld_acquire_sys(&ctl->released_seq);
        c.may_write = c.seq <= released + num_slots ? 1u : 0u;
        // Release: the blocks that read the decision are ordered after the acquire above, so
        // their stores into the slot come after the host's reads of it.
        fence_acq_rel_gpu();
        atomicExch(reinterpret_cast<unsigned long long*>(&sync->decision),
                   (unsigned long long)((c.seq << 1) | c.may_write));
    } else {
        // The deciding block did its atomicAdd first, so it is resident: this cannot deadlock.
        uint64_t d;
        while (((d = ld_acquire_gpu(&sync->decision)) >> 1) != c.seq) __nanosleep(32);
        c.may_write = (uint32_t)(d & 1);
    }
    return c;
}

/**
 * The last block's thread 0: writes the trailer (or, when the slot was not released, the
 * overrun word), resets the slot's scratch for the next readback and, device-sequenced, moves
 * the sequence counter on. `t` may be null when !may_write.
 */
__device__ __forceinline__ void publish(const SlotChoice& c, srb_trailer* t, uint64_t count_raw, uint64_t copied,
                                        uint32_t status, srb_slot_sync* sync, uint64_t seq_counter,
                                        uint64_t ring_ctl) {
    if (c.may_write) {
        t->count_raw = count_raw;
        t->count_copied = copied;
        t->status = status;
        t->magic = SRB_TRAILER_MAGIC;
        fence_sc_sys();  // every block's data, count and status before seq: the host's release
        st_relaxed_sys(&t->seq, c.seq);
    } else {
        srb_ring_ctl* ctl = reinterpret_cast<srb_ring_ctl*>(ring_ctl);
        // The host takes overrun_seq >= seq to mean that readback seq is final: order every
        // earlier readback's trailer (seen through the counter's acquire) before it.
        fence_sc_sys();
        st_relaxed_sys(&ctl->overrun_seq, c.seq);
    }
    // Scratch back to zero for the next readback into this slot (ordered by kernel boundaries).
    sync->departures = 0;
    sync->arrivals = 0;
    sync->count = 0;
    if (seq_counter != 0) st_release_gpu(reinterpret_cast<uint64_t*>(seq_counter), c.seq);
}

/** Staging storage for one value of each column per thread, as nested members. */
template <int N, typename... Ts>
struct Rows;
template <int N>
struct Rows<N> {};
template <int N, typename T, typename... Ts>
struct Rows<N, T, Ts...> {
    T v[N];
    Rows<N, Ts...> rest;
};

template <int N>
__device__ __forceinline__ void stage(Rows<N>&, unsigned) {}
template <int N, typename T, typename... Ts>
__device__ __forceinline__ void stage(Rows<N, T, Ts...>& r, unsigned i, const T& x, const Ts&... xs) {
    r.v[i] = x;
    stage<N, Ts...>(r.rest, i, xs...);
}

template <int N>
__device__ __forceinline__ bool sizes_match(const srb_append_desc&, unsigned) { return true; }
template <int N, typename T, typename... Ts>
__device__ __forceinline__ bool sizes_match(const srb_append_desc& d, unsigned c) {
    return d.elem_size[c] == sizeof(T) && sizes_match<N, Ts...>(d, c + 1);
}

/** Row i of the staging to row `at` of column c (and on) of the region at `base`. */
template <int N>
__device__ __forceinline__ void flush_row(const Rows<N>&, unsigned, unsigned char*, const uint64_t*, unsigned,
                                          uint64_t) {}
template <int N, typename T, typename... Ts>
__device__ __forceinline__ void flush_row(const Rows<N, T, Ts...>& r, unsigned i, unsigned char* base,
                                          const uint64_t* offsets, unsigned c, uint64_t at) {
    reinterpret_cast<T*>(base + offsets[c])[at] = r.v[i];
    flush_row<N, Ts...>(r.rest, i, base, offsets, c + 1, at);
}

__device__ __forceinline__ unsigned thread_rank() {
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

/**
 * The block-collective append of BlockAppend (MAX_BUCKETS 1) and BlockAppendTo (rows to named
 * buckets). See those classes; this one holds their shared code.
 */
template <int BLOCK_THREADS, int MAX_BUCKETS, typename... Cols>
class AppendCore {
    static_assert(BLOCK_THREADS % 32 == 0 && BLOCK_THREADS >= 32 && BLOCK_THREADS <= 1024,
                  "BLOCK_THREADS must be a multiple of 32 from 32 to 1024");
    static_assert(sizeof...(Cols) >= 1 && sizeof...(Cols) <= SRB_MAX_COLUMNS,
                  "a readback has 1 to SRB_MAX_COLUMNS columns");
    static_assert(MAX_BUCKETS >= 1 && MAX_BUCKETS <= SRB_MAX_BUCKETS && MAX_BUCKETS <= BLOCK_THREADS,
                  "MAX_BUCKETS must be 1 to SRB_MAX_BUCKETS and at most BLOCK_THREADS");
    static constexpr int WARPS = BLOCK_THREADS / 32;

  public:
    struct TempStorage {
        Rows<BLOCK_THREADS, Cols...> rows;
        uint32_t warp_offset[WARPS];
        /** Buckets: rows of this call per bucket, then their exclusive scan. */
        uint32_t hist[MAX_BUCKETS];
        uint32_t offs[MAX_BUCKETS];
        /** Buckets: each bucket's first row of this call (its counter before the atomic). */
        uint64_t bases[MAX_BUCKETS];
        /** Buckets: the bucket of each staged row. */
        uint16_t row_bucket[MAX_BUCKETS > 1 ? BLOCK_THREADS : 1];
        uint64_t base;
        uint64_t sums[3];
        uint32_t total;
        uint32_t ok;
        uint32_t last;
        /** What this block did: 1 stored rows into the slot, 2 into the spill region, 4 counted
            rows (took part in the count's atomics) or set a flag the last block reads (misuse,
            a bad bucket). Nonzero: finish() releases the block's stores before it counts out. */
        uint32_t wrote;
        uint32_t status;
        SlotChoice choice;
    };

    __device__ __forceinline__ AppendCore(TempStorage& temp, const srb_append_desc& desc) : s_(temp), d_(desc) {
        if (thread_rank() == 0) {
            const bool shape = blockDim.x * blockDim.y * blockDim.z == (unsigned)BLOCK_THREADS;
            const bool cols = desc.num_columns == sizeof...(Cols) && sizes_match<BLOCK_THREADS, Cols...>(desc, 0);
            const unsigned k = desc.num_buckets == 0 ? 1 : desc.num_buckets;
            // A bucketed readback needs a bucketed BlockAppendTo big enough; BlockAppend's rows
            // go to a readback of one bucket.
            const bool buckets = MAX_BUCKETS == 1 ? k == 1 : (k <= (unsigned)MAX_BUCKETS);
            srb_slot_sync* syncs = reinterpret_cast<srb_slot_sync*>(desc.slot_sync);
            s_.choice = choose_slot(desc.seq, desc.slot, desc.seq_counter, desc.ring_ctl, syncs, desc.num_slots);
            s_.ok = shape && cols && buckets;
            s_.wrote = 0;
            if (!s_.ok) {
                atomicOr(&syncs[s_.choice.slot].flags, 1u);
                s_.wrote |= 4u;  // the misuse flag is published like a count: released in finish()
            }
        }
        __syncthreads();
    }

    /** One bucket: the rows of the threads that keep one (ballot, one warp-scan, one atomic). */
    __device__ __forceinline__ void append_one(bool keep, const Cols&... values) {
        if (!s_.ok) return;  // uniform over the block
        const unsigned tid = thread_rank();
        const unsigned lane = tid & 31, warp = tid >> 5;
        const unsigned mask = __ballot_sync(0xffffffffu, keep);
        if (lane == 0) s_.warp_offset[warp] = __popc(mask);
        __syncthreads();
        if (warp == 0) {
            const unsigned mine = lane < (unsigned)WARPS ? s_.warp_offset[lane] : 0;
            unsigned incl = mine;
            for (int o = 1; o < 32; o <<= 1) {
                const unsigned up = __shfl_up_sync(0xffffffffu, incl, o);
                if (lane >= (unsigned)o) incl += up;
            }
            if (lane < (unsigned)WARPS) s_.warp_offset[lane] = incl - mine;
            if (lane == 31) {
                s_.total = incl;
                srb_slot_sync* sync = reinterpret_cast<srb_slot_sync*>(d_.slot_sync) + s_.choice.slot;
                s_.base = incl == 0 ? 0
                                    : (uint64_t)atomicAdd(reinterpret_cast<unsigned long long*>(&sync->count),
                                                          (unsigned long long)incl);
                if (incl != 0) {
                    s_.wrote |= 4u;
                    if (s_.choice.may_write) {
                        const uint64_t cap = d_.capacity;
                        s_.wrote |= (s_.base < cap ? 1u : 0u) | (s_.base + incl > cap ? 2u : 0u);
                    }
                }
            }
        }
        __syncthreads();
        if (keep) stage<BLOCK_THREADS, Cols...>(s_.rows, s_.warp_offset[warp] + __popc(mask & ((1u << lane) - 1)), values...);
        __syncthreads();
        const unsigned total = s_.total;
        if (s_.choice.may_write && total != 0) {
            const uint64_t cap = d_.capacity, spill_cap = d_.spill == 0 ? 0 : d_.spill_capacity;
            unsigned char* slot = reinterpret_cast<unsigned char*>(d_.slots) + (uint64_t)s_.choice.slot * d_.slot_stride;
            unsigned char* spill = reinterpret_cast<unsigned char*>(d_.spill) + (uint64_t)s_.choice.slot * d_.spill_stride;
            for (unsigned r = tid; r < total; r += BLOCK_THREADS) {
                const uint64_t n = s_.base + r;
                if (n < cap)
                    flush_row<BLOCK_THREADS, Cols...>(s_.rows, r, slot, d_.column_offset, 0, n);
                else if (n - cap < spill_cap)
                    flush_row<BLOCK_THREADS, Cols...>(s_.rows, r, spill, d_.spill_offset, 0, n - cap);
            }
        }
        __syncthreads();  // the staging is free again
    }

    /** Buckets: each kept row to the bucket it names (shared-memory histogram, a block scan, one
        atomic per bucket that got rows). A bucket out of range drops the row and counts it. */
    __device__ __forceinline__ void append_to(unsigned bucket, bool keep, const Cols&... values) {
        if (!s_.ok) return;
        const unsigned tid = thread_rank();
        const unsigned lane = tid & 31, warp = tid >> 5;
        const unsigned k = d_.num_buckets;
        srb_slot_sync* sync = reinterpret_cast<srb_slot_sync*>(d_.slot_sync) + s_.choice.slot;
        unsigned long long* counters =
            reinterpret_cast<unsigned long long*>(d_.bucket_counts) + (uint64_t)s_.choice.slot * 2 * k;
        for (unsigned b = tid; b < k; b += BLOCK_THREADS) s_.hist[b] = 0;
        __syncthreads();
        const bool valid = keep && bucket < k;
        if (keep && !valid) {
            atomicAdd(reinterpret_cast<unsigned long long*>(&sync->bad_rows), 1ull);
            atomicExch(reinterpret_cast<unsigned long long*>(&sync->bad_bucket), (unsigned long long)bucket);
            atomicOr(&s_.wrote, 4u);  // released in finish(), as counted rows are
        }
        const unsigned rank = valid ? atomicAdd(&s_.hist[bucket], 1u) : 0u;
        __syncthreads();
        // Exclusive scan of the histogram: warp w scans entries [32w, 32w + 32).
        const unsigned h = tid < k ? s_.hist[tid] : 0u;
        unsigned incl = h;
        for (int o = 1; o < 32; o <<= 1) {
            const unsigned up = __shfl_up_sync(0xffffffffu, incl, o);
            if (lane >= (unsigned)o) incl += up;
        }
        if (lane == 31) s_.warp_offset[warp] = incl;
        if (tid < k) s_.bases[tid] = h == 0 ? 0 : (uint64_t)atomicAdd(&counters[tid], (unsigned long long)h);
        __syncthreads();
        if (tid == 0) {
            unsigned run = 0;
            for (unsigned w = 0; w * 32 < k; ++w) {
                const unsigned c = s_.warp_offset[w];
                s_.warp_offset[w] = run;
                run += c;
            }
            s_.total = run;
            if (run != 0) s_.wrote |= s_.choice.may_write ? 7u : 4u;
        }
        __syncthreads();
        if (tid < k) s_.offs[tid] = s_.warp_offset[warp] + incl - h;
        __syncthreads();
        if (valid) {
            const unsigned at = s_.offs[bucket] + rank;
            stage<BLOCK_THREADS, Cols...>(s_.rows, at, values...);
            s_.row_bucket[at] = (uint16_t)bucket;
        }
        __syncthreads();
        const unsigned total = s_.total;
        if (s_.choice.may_write && total != 0) {
            const uint64_t cap = d_.capacity, spill_cap = d_.spill == 0 ? 0 : d_.spill_capacity;
            unsigned char* slot = reinterpret_cast<unsigned char*>(d_.slots) + (uint64_t)s_.choice.slot * d_.slot_stride;
            unsigned char* spill = reinterpret_cast<unsigned char*>(d_.spill) + (uint64_t)s_.choice.slot * d_.spill_stride;
            for (unsigned r = tid; r < total; r += BLOCK_THREADS) {
                const unsigned b = s_.row_bucket[r];
                const uint64_t n = s_.bases[b] + (r - s_.offs[b]);
                if (n < cap)
                    flush_row<BLOCK_THREADS, Cols...>(s_.rows, r, slot, d_.column_offset, 0, (uint64_t)b * cap + n);
                else if (n - cap < spill_cap)
                    flush_row<BLOCK_THREADS, Cols...>(s_.rows, r, spill, d_.spill_offset, 0,
                                                      (uint64_t)b * spill_cap + (n - cap));
            }
        }
        __syncthreads();
    }

    __device__ __forceinline__ void finish() {
        const unsigned tid = thread_rank();
        srb_slot_sync* sync = reinterpret_cast<srb_slot_sync*>(d_.slot_sync) + s_.choice.slot;
        __syncthreads();
        if (tid == 0) {
            // Release this block's stores (cumulative over the barrier), then count it out, at
            // GPU scope: the last block acquires them there and releases them all to the host
            // at system scope before `seq` (file comment). A block that appended nothing has
            // nothing to release (its departure is just counted).
            if (s_.wrote != 0) fence_acq_rel_gpu();
            const unsigned blocks = gridDim.x * gridDim.y * gridDim.z;
            s_.last = atomicAdd(&sync->departures, 1u) == blocks - 1;
        }
        __syncthreads();
        if (!s_.last) return;  // uniform over the block
        const uint64_t cap = d_.capacity, spill_cap = d_.spill == 0 ? 0 : d_.spill_capacity;
        unsigned char* slot = reinterpret_cast<unsigned char*>(d_.slots) + (uint64_t)s_.choice.slot * d_.slot_stride;
        if (d_.num_buckets <= 1) {
            if (tid != 0) return;
            fence_acq_rel_gpu();  // acquire every block's release (GPU scope)
            const uint64_t count = ld_relaxed_gpu(&sync->count);
            uint32_t status = SRB_STATUS_OK;
            uint64_t spilled = 0;
            if (count > cap) {
                status |= SRB_STATUS_SPILLED;
                spilled = count - cap < spill_cap ? count - cap : spill_cap;
                if (count - cap > spill_cap) status |= SRB_STATUS_DROPPED;
            }
            if (sync->flags != 0) status |= SRB_STATUS_MISUSE;
            sync->spilled = spilled;
            sync->flags = 0;
            publish(s_.choice, reinterpret_cast<srb_trailer*>(slot + d_.trailer_offset), count,
                    count < cap ? count : cap, status, sync, d_.seq_counter, d_.ring_ctl);
            return;
        }
        // Buckets: the whole last block reads the counters, writes the bucket table, keeps each
        // bucket's spilled rows for the spill fetch and resets the counters.
        const unsigned k = d_.num_buckets;
        unsigned long long* counters =
            reinterpret_cast<unsigned long long*>(d_.bucket_counts) + (uint64_t)s_.choice.slot * 2 * k;
        srb_bucket_table* table = reinterpret_cast<srb_bucket_table*>(slot + d_.bucket_table);
        if (tid == 0) {
            fence_acq_rel_gpu();  // acquire every block's release (GPU scope)
            s_.sums[0] = s_.sums[1] = 0;
            s_.status = SRB_STATUS_OK;
        }
        __syncthreads();
        for (unsigned b = tid; b < k; b += BLOCK_THREADS) {
            const uint64_t c = ld_relaxed_gpu(reinterpret_cast<const uint64_t*>(&counters[b]));
            const uint64_t over = c > cap ? c - cap : 0;
            if (s_.choice.may_write) table->counts[b] = c;
            counters[k + b] = over < spill_cap ? over : spill_cap;
            counters[b] = 0;
            atomicAdd(reinterpret_cast<unsigned long long*>(&s_.sums[0]), (unsigned long long)c);
            atomicAdd(reinterpret_cast<unsigned long long*>(&s_.sums[1]), (unsigned long long)(c < cap ? c : cap));
            if (over > 0) atomicOr(&s_.status, over > spill_cap ? SRB_STATUS_SPILLED | SRB_STATUS_DROPPED : SRB_STATUS_SPILLED);
        }
        __syncthreads();
        if (tid != 0) return;
        uint32_t status = s_.status;
        const uint64_t bad_rows = ld_relaxed_gpu(&sync->bad_rows);
        if (bad_rows != 0) status |= SRB_STATUS_BAD_BUCKET;
        if (sync->flags != 0) status |= SRB_STATUS_MISUSE;
        if (s_.choice.may_write) {
            table->bad_rows = bad_rows;
            table->bad_bucket = ld_relaxed_gpu(&sync->bad_bucket);
            table->bad_offset = 0;
            table->bad_limit = 0;
        }
        sync->bad_rows = 0;
        sync->bad_bucket = 0;
        sync->flags = 0;
        publish(s_.choice, reinterpret_cast<srb_trailer*>(slot + d_.trailer_offset), s_.sums[0], s_.sums[1], status,
                sync, d_.seq_counter, d_.ring_ctl);
    }

  private:
    TempStorage& s_;
    const srb_append_desc& d_;
};

}  // namespace detail

/**
 * Block-collective append of rows into one readback slot (a readback of one bucket).
 *
 * \tparam BLOCK_THREADS threads per block (a multiple of 32, at most 1024), as launched.
 * \tparam Cols          the element type of each column, in the readback's column order (1 to
 *                       SRB_MAX_COLUMNS types; trivially copyable, alignment at most 16 bytes).
 *
 * Shared memory: sizeof(TempStorage) = BLOCK_THREADS * (sum of sizeof(Cols)) + about 200 bytes.
 */
template <int BLOCK_THREADS, typename... Cols>
class BlockAppend {
    using Core = detail::AppendCore<BLOCK_THREADS, 1, Cols...>;

  public:
    /** Shared memory of one block's BlockAppend: declare it `__shared__`. */
    using TempStorage = typename Core::TempStorage;

    /**
     * Block-collective. Binds this block to the readback of `desc` and (device-sequenced mode)
     * decides its sequence number and slot. Contains a barrier.
     *
     * \param[in] temp shared memory for this block (not used by anything else while in use)
     * \param[in] desc the readback's descriptor, the same value in every block of the grid
     */
    __device__ __forceinline__ BlockAppend(TempStorage& temp, const srb_append_desc& desc) : core_(temp, desc) {}

    /**
     * Block-collective. Appends one row per thread whose `keep` is true: column c gets the c-th
     * value. Contains barriers; one atomic per block per call (none if no thread keeps a row).
     *
     * \param[in] keep   whether this thread's row is appended
     * \param[in] values this thread's row, one value per column (ignored when !keep)
     *
     * Output: the block's kept rows, in no particular order, at rows [base, base + k) of the
     * grid's sequence of rows, where k is the number of kept rows and base is taken with one
     * atomicAdd; see the file comment for where row n lands.
     */
    __device__ __forceinline__ void append(bool keep, const Cols&... values) { core_.append_one(keep, values...); }

    /**
     * Block-collective, exactly once per block, after its last append(). The last block of the
     * grid to get here writes the true count, the status and the trailer (`seq` last, after a
     * system-scope fence) and resets the slot's scratch. Contains barriers; the threads of the
     * other blocks return from it at once.
     */
    __device__ __forceinline__ void finish() { core_.finish(); }

  private:
    Core core_;
};

/**
 * Block-collective append of rows into the buckets of one bucketed readback slot (k buckets,
 * e.g. one per MPI neighbour): each kept row goes to the bucket its thread names.
 *
 * \tparam BLOCK_THREADS threads per block (a multiple of 32, at most 1024), as launched.
 * \tparam MAX_BUCKETS   at least the readback's bucket count (at most SRB_MAX_BUCKETS and
 *                       BLOCK_THREADS); a readback with more buckets is reported as misuse.
 * \tparam Cols          the element type of each column, as for BlockAppend.
 *
 * Bucket b's n-th row (0-based, counted over the whole grid) lands at row n of bucket b's region
 * if n < capacity (the capacity is per bucket), else at row n - capacity of bucket b's spill
 * region if that is below the spill capacity, else it is dropped but counted. A row whose bucket
 * is >= the readback's bucket count is dropped and counted as bad (the host reports the index).
 *
 * Shared memory: BLOCK_THREADS * (sum of sizeof(Cols) + 2) + 16 * MAX_BUCKETS + about 200 bytes.
 */
template <int BLOCK_THREADS, int MAX_BUCKETS, typename... Cols>
class BlockAppendTo {
    using Core = detail::AppendCore<BLOCK_THREADS, MAX_BUCKETS, Cols...>;

  public:
    /** Shared memory of one block's BlockAppendTo: declare it `__shared__`. */
    using TempStorage = typename Core::TempStorage;

    /** Block-collective; as BlockAppend's. */
    __device__ __forceinline__ BlockAppendTo(TempStorage& temp, const srb_append_desc& desc) : core_(temp, desc) {}

    /**
     * Block-collective. Appends one row per thread whose `keep` is true to bucket `bucket`.
     * Contains barriers; one atomic per bucket that gets rows from this call.
     *
     * \param[in] bucket the row's bucket, 0 to the readback's bucket count - 1 (ignored when !keep)
     * \param[in] keep   whether this thread's row is appended
     * \param[in] values this thread's row, one value per column (ignored when !keep)
     */
    __device__ __forceinline__ void append_to(unsigned bucket, bool keep, const Cols&... values) {
        core_.append_to(bucket, keep, values...);
    }

    /** Block-collective, exactly once per block, after its last append_to(); as BlockAppend's.
        The last block also writes the bucket table (every bucket's true count). */
    __device__ __forceinline__ void finish() { core_.finish(); }

  private:
    Core core_;
};

}  // namespace srb

#endif /* SIZED_READBACK_APPEND_CUH */
