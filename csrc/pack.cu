// pack.cu: the readback kernel. Reads the device-resident count, copies that many elements of
// every column into one slot, and writes the slot's trailer last.
//
// Launch: SRB_PACK_THREADS threads per block, any grid >= 1. Only the first `active` blocks
// work, where `active` grows with the bytes to copy (SRB_BYTES_PER_BLOCK each, one block up to
// SRB_PACK_SINGLE_BLOCK_BYTES), so a small count costs one block whatever the capacity.
//
// Memory model (PTX ISA, "Memory Consistency Model"; the operations are named in append.cuh):
// - Each working block: all threads store their data, then __syncthreads(). A fence is
//   cumulative: it orders every store that precedes it in causality order, and the barrier puts
//   the other threads' stores there.
// - With several blocks, thread 0 then releases the block's stores with fence.acq_rel.gpu and
//   increments the slot's departure counter; the block that arrives last acquires them all with
//   fence.acq_rel.gpu after its atomic and is the only one to write the trailer, whose
//   system-scope fence releases every block's rows to the host (as append.cuh's finish() does).
//   GPU scope, because a system-scope fence in each block waits for its stores to cross PCIe:
//   scripts/probes/publish_fence_probe.cu measured 0.5 µs at 4096 rows and 1.1 µs at 64K rows
//   of 8 bytes over 132 blocks on the H200, and nothing with one block.
// - The trailer's count and status are stored, then fence.sc.sys, then `seq` with one naturally
//   aligned 8-byte st.relaxed.sys: single-copy atomic (PTX ISA: aligned accesses of up to 8
//   bytes are performed as single accesses), so the host sees the old or the new `seq`, and a
//   host that observes the new one with acquire semantics sees everything before it.
// - Device-sequenced mode (graph replay): the previous readback of the ring published the
//   sequence counter with st.release.gpu after its trailer; this kernel reads it with
//   ld.acquire.gpu, and reads the host's released_seq with ld.acquire.sys (the host stores it
//   with Release order). A dropped readback's overrun word is stored after fence.sc.sys too.
#include "sized_readback/append.cuh"

#define SRB_DEVICE __device__ __forceinline__

// The switch image set (csrc/switch/) compiles this file again with SRB_PACK_SWITCH defined:
// its `srb_pack_switch` takes a CUDA graph conditional handle after the parameters and, from
// block 0's thread 0, sets the staged copy's size class (SRB_PACK_SET_CLASS). Undefined here,
// so the library set's kernels are exactly as before.
#ifndef SRB_PACK_SWITCH
#define SRB_PACK_NAME srb_pack
#define SRB_PACK_EXTRA_PARAMS
#define SRB_PACK_SET_CLASS(copy_n)
#endif

// Copies of at most this many bytes (all columns together) use one block.
#define SRB_PACK_SINGLE_BLOCK_BYTES (8 * SRB_BYTES_PER_BLOCK)

// Programmatic dependent launch (sm_90+): the host may launch this kernel while the previous
// kernel in the stream is still running; wait here until that kernel's memory is visible.
// Without the launch attribute this is a no-op.
SRB_DEVICE void srb_wait_for_producer() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Count i of type T at `ptr`: *raw gets it widened to 64 bits (sign-extended where Signed),
// *n the count (0 if negative).
template <typename T, bool Signed>
SRB_DEVICE uint32_t srb_read_count_as(uint64_t ptr, uint64_t i, uint64_t* raw, uint64_t* n) {
    const T v = reinterpret_cast<const T*>(ptr)[i];
    if constexpr (Signed) {
        const int64_t s = (int64_t)v;
        *raw = (uint64_t)s;
        *n = s < 0 ? 0 : (uint64_t)s;
        return s < 0 ? SRB_STATUS_NEGATIVE : SRB_STATUS_OK;
    }
    *raw = *n = (uint64_t)v;
    return SRB_STATUS_OK;
}

// Reads count i of kind `kind` at `ptr`. Returns srb_status bits; *raw gets the value
// sign-extended to 64 bits, *n the count (0 if negative). The cases come from the count types'
// table (xtask/src/count_kinds.rs, through count_kinds.inc); a kind not in it reads nothing and
// returns SRB_STATUS_BAD_COUNT_KIND with *raw = kind.
SRB_DEVICE uint32_t srb_read_count_at(uint64_t ptr, uint32_t kind, uint64_t i, uint64_t* raw, uint64_t* n) {
    switch (kind) {
#define SRB_COUNT_CASE(KIND, T, SIGNED) \
    case KIND:                          \
        return srb_read_count_as<T, SIGNED>(ptr, i, raw, n);
#include "count_kinds.inc"
#undef SRB_COUNT_CASE
    default:
        *raw = kind;
        *n = 0;
        return SRB_STATUS_BAD_COUNT_KIND;
    }
}

// Whether these kernels know count kind `kind`.
SRB_DEVICE bool srb_count_kind_known(uint32_t kind) {
    switch (kind) {
#define SRB_COUNT_CASE(KIND, T, SIGNED) case KIND:
#include "count_kinds.inc"
#undef SRB_COUNT_CASE
        return true;
    default:
        return false;
    }
}

SRB_DEVICE uint32_t srb_read_count(const srb_pack_params& p, uint64_t* raw, uint64_t* n) {
    return srb_read_count_at(p.count_ptr, p.count_kind, 0, raw, n);
}

// The grid set (grid/size_grid.cu) takes the count readers above and no kernel.
#ifndef SRB_COUNT_READERS_ONLY
// Copies nbytes with words of type W from src to dst (both W-aligned), then the tail bytes.
// Four independent loads are issued before their stores to keep bytes in flight.
template <typename W>
SRB_DEVICE void srb_copy_words(unsigned char* __restrict__ dst, const unsigned char* __restrict__ src,
                               uint64_t nbytes, uint64_t tid, uint64_t stride) {
    const W* __restrict__ s = reinterpret_cast<const W*>(src);
    W* __restrict__ d = reinterpret_cast<W*>(dst);
    const uint64_t nw = nbytes / sizeof(W);
    uint64_t i = tid;
    for (; i + 3 * stride < nw; i += 4 * stride) {
        W a = s[i], b = s[i + stride], c = s[i + 2 * stride], e = s[i + 3 * stride];
        d[i] = a;
        d[i + stride] = b;
        d[i + 2 * stride] = c;
        d[i + 3 * stride] = e;
    }
    for (; i < nw; i += stride) d[i] = s[i];
    for (uint64_t j = nw * sizeof(W) + tid; j < nbytes; j += stride) dst[j] = src[j];
}

// The widest word that the alignments of both dst and src allow.
SRB_DEVICE void srb_copy(unsigned char* dst, const unsigned char* src, uint64_t nbytes, uint64_t tid, uint64_t stride) {
    const uint64_t a = (uint64_t)src | (uint64_t)dst;
    if ((a & 15) == 0)
        srb_copy_words<uint4>(dst, src, nbytes, tid, stride);
    else if ((a & 7) == 0)
        srb_copy_words<uint2>(dst, src, nbytes, tid, stride);
    else if ((a & 3) == 0)
        srb_copy_words<uint32_t>(dst, src, nbytes, tid, stride);
    else if ((a & 1) == 0)
        srb_copy_words<uint16_t>(dst, src, nbytes, tid, stride);
    else
        srb_copy_words<uint8_t>(dst, src, nbytes, tid, stride);
}

extern "C" __global__ void __launch_bounds__(SRB_PACK_THREADS) SRB_PACK_NAME(const srb_pack_params p SRB_PACK_EXTRA_PARAMS) {
    __shared__ srb::detail::SlotChoice s_choice;
    srb_wait_for_producer();

    uint64_t raw, n;
    uint32_t status = srb_read_count(p, &raw, &n);
    if (status == SRB_STATUS_OK && n > p.capacity) status = SRB_STATUS_OVER_CAPACITY;
    uint64_t row_bytes = 0;
    for (uint32_t c = 0; c < p.num_columns; ++c) {
        if (status == SRB_STATUS_OK && n > p.columns[c].src_len) status = SRB_STATUS_OVER_SOURCE;
        row_bytes += p.columns[c].elem_size;
    }
    const uint64_t copy_n = status == SRB_STATUS_OK ? n : 0;
    if (blockIdx.x == 0 && threadIdx.x == 0) SRB_PACK_SET_CLASS(copy_n);

    // Blocks past `active` have nothing to copy and leave at once.
    // Up to SRB_PACK_SINGLE_BLOCK_BYTES one block does it all: it then needs no departure
    // counter. With a system fence in every block, one block beat 8 at 32 KiB (measured on an
    // H200: 9.9 vs 10.4 us, enqueue to trailer, in the comparison harness's grid probe); with
    // the blocks' GPU-scope release the two are within 0.5 us either way (harness-b1e053b).
    const uint64_t bytes = copy_n * row_bytes;
    const uint64_t want =
        bytes <= SRB_PACK_SINGLE_BLOCK_BYTES ? 1 : (bytes + SRB_BYTES_PER_BLOCK - 1) / SRB_BYTES_PER_BLOCK;
    const uint32_t active = (uint32_t)(want < 1 ? 1 : (want > gridDim.x ? gridDim.x : want));
    if (blockIdx.x >= active) return;

    srb_slot_sync* syncs = reinterpret_cast<srb_slot_sync*>(p.slot_sync);
    if (threadIdx.x == 0)
        s_choice = srb::detail::choose_slot(p.seq, p.slot, p.seq_counter, p.ring_ctl, syncs, p.num_slots);
    __syncthreads();
    const srb::detail::SlotChoice choice = s_choice;
    srb_slot_sync* sync = syncs + choice.slot;
    unsigned char* slot_base = reinterpret_cast<unsigned char*>(p.slots) + (uint64_t)choice.slot * p.slot_stride;

    if (choice.may_write && copy_n != 0) {
        const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
        const uint64_t stride = (uint64_t)active * blockDim.x;
        for (uint32_t c = 0; c < p.num_columns; ++c) {
            const srb_column col = p.columns[c];
            srb_copy(slot_base + col.dst_offset, reinterpret_cast<const unsigned char*>(col.src),
                     copy_n * col.elem_size, tid, stride);
        }
    }
    __syncthreads();
    if (threadIdx.x != 0) return;

    if (active > 1) {
        // Release this block's stores (cumulative over the barrier above) at GPU scope, then
        // count the block out: only the last block to leave goes on, acquires every block's
        // release, and publish()'s system-scope fence releases them all to the host.
        srb::detail::fence_acq_rel_gpu();
        if (atomicAdd(&sync->departures, 1u) != active - 1) return;
        srb::detail::fence_acq_rel_gpu();
    }
    srb::detail::publish(choice, reinterpret_cast<srb_trailer*>(slot_base + p.trailer_offset), raw, copy_n, status,
                         sync, p.seq_counter, p.ring_ctl);
}

#ifndef SRB_PACK_SWITCH
// The bucket pack: k buckets of device data the user already partitioned (k counts and k rising
// offsets into every column's source). Every block checks every bucket (one thread per bucket)
// so all agree on the status; on an error nothing is copied and the bucket table names the first
// offending bucket. Block b copies bucket b (and b + gridDim.x, ...) into its region; the last
// block to leave writes the bucket table and the trailer.
extern "C" __global__ void __launch_bounds__(SRB_PACK_THREADS) srb_pack_buckets(const srb_pack_buckets_params p) {
    __shared__ uint32_t s_bad_kind[3];  // the first bucket of each kind of error (k if none):
                                        // a negative count, one over capacity, bad offsets
    __shared__ uint32_t s_last;
    // A count kind these kernels do not know: no count or offset is read, nothing is copied,
    // and the trailer says so (its count_raw is the kind).
    const bool unknown_kind = !srb_count_kind_known(p.count_kind);
    srb_wait_for_producer();
    const unsigned k = p.num_buckets;
    if (threadIdx.x == 0)
        for (int i = 0; i < 3; ++i) s_bad_kind[i] = k;
    __syncthreads();
    uint64_t min_src = ~0ull;
    for (uint32_t c = 0; c < p.num_columns; ++c) min_src = p.columns[c].src_len < min_src ? p.columns[c].src_len : min_src;
    for (unsigned b = unknown_kind ? k : threadIdx.x; b < k; b += blockDim.x) {
        uint64_t raw, n, oraw, off;
        uint32_t st = srb_read_count_at(p.counts_ptr, p.count_kind, b, &raw, &n);
        st |= srb_read_count_at(p.offsets_ptr, p.count_kind, b, &oraw, &off);
        if (st != SRB_STATUS_OK) {
            atomicMin(&s_bad_kind[0], b);
        } else if (n > p.capacity) {
            atomicMin(&s_bad_kind[1], b);
        } else {
            uint64_t limit = min_src;
            if (b + 1 < k) {
                uint64_t nraw, next;
                if (srb_read_count_at(p.offsets_ptr, p.count_kind, b + 1, &nraw, &next) == SRB_STATUS_OK && next < limit)
                    limit = next;
            }
            if (off > limit || n > limit - off) atomicMin(&s_bad_kind[2], b);
        }
    }
    __syncthreads();
    uint32_t status = SRB_STATUS_OK;
    if (s_bad_kind[0] < k) status |= SRB_STATUS_NEGATIVE;
    if (s_bad_kind[1] < k) status |= SRB_STATUS_OVER_CAPACITY;
    if (s_bad_kind[2] < k) status |= SRB_STATUS_BAD_OFFSETS;
    if (unknown_kind) status = SRB_STATUS_BAD_COUNT_KIND;
    // Named in order of precedence: a negative count, then one over the capacity, then offsets.
    const unsigned bad = s_bad_kind[0] < k ? s_bad_kind[0] : (s_bad_kind[1] < k ? s_bad_kind[1] : s_bad_kind[2]);

    unsigned char* slot_base = reinterpret_cast<unsigned char*>(p.slots) + (uint64_t)p.slot * p.slot_stride;
    if (status == SRB_STATUS_OK) {
        for (unsigned b = blockIdx.x; b < k; b += gridDim.x) {
            uint64_t raw, n, oraw, off;
            srb_read_count_at(p.counts_ptr, p.count_kind, b, &raw, &n);
            srb_read_count_at(p.offsets_ptr, p.count_kind, b, &oraw, &off);
            for (uint32_t c = 0; c < p.num_columns; ++c) {
                const srb_column col = p.columns[c];
                srb_copy(slot_base + col.dst_offset + (uint64_t)b * p.capacity * col.elem_size,
                         reinterpret_cast<const unsigned char*>(col.src) + off * col.elem_size, n * col.elem_size,
                         threadIdx.x, blockDim.x);
            }
        }
    }
    __syncthreads();
    srb_slot_sync* sync = reinterpret_cast<srb_slot_sync*>(p.slot_sync) + p.slot;
    if (threadIdx.x == 0) {
        srb::detail::fence_acq_rel_gpu();  // this block's rows, cumulative over the barrier
        s_last = atomicAdd(&sync->departures, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!s_last) return;
    // The last block: the bucket table (every count as read), then the trailer.
    srb_bucket_table* table = reinterpret_cast<srb_bucket_table*>(slot_base + p.bucket_table);
    __shared__ unsigned long long s_sum[2];
    if (threadIdx.x == 0) {
        srb::detail::fence_acq_rel_gpu();  // acquire every block's release (GPU scope)
        s_sum[0] = s_sum[1] = 0;
    }
    __syncthreads();
    for (unsigned b = threadIdx.x; b < k; b += blockDim.x) {
        uint64_t raw, n;
        srb_read_count_at(p.counts_ptr, p.count_kind, b, &raw, &n);
        table->counts[b] = raw;
        atomicAdd(&s_sum[0], (unsigned long long)n);
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    table->bad_rows = 0;
    table->bad_bucket = bad;
    table->bad_offset = 0;
    table->bad_limit = 0;
    if (status & SRB_STATUS_BAD_OFFSETS && bad == s_bad_kind[2]) {
        uint64_t raw, n, next = ~0ull;
        srb_read_count_at(p.offsets_ptr, p.count_kind, bad, &raw, &n);
        table->bad_offset = n;
        uint64_t limit = min_src;
        if (bad + 1 < k && srb_read_count_at(p.offsets_ptr, p.count_kind, bad + 1, &raw, &next) == SRB_STATUS_OK &&
            next < limit)
            limit = next;
        table->bad_limit = limit;
    }
    const uint64_t copied = status == SRB_STATUS_OK ? s_sum[0] : 0;
    srb::detail::SlotChoice choice;
    choice.seq = p.seq;
    choice.slot = p.slot;
    choice.may_write = 1;
    const uint64_t count_raw = unknown_kind ? (uint64_t)p.count_kind : s_sum[0];
    srb::detail::publish(choice, reinterpret_cast<srb_trailer*>(slot_base + p.trailer_offset), count_raw, copied,
                         status, sync, 0, 0);
}
#endif  // SRB_PACK_SWITCH
#endif  // SRB_COUNT_READERS_ONLY
