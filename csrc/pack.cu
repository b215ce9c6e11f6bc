// pack.cu: the readback kernel. Reads the device-resident count, copies that many elements
// of every column into one slot, and writes the slot's trailer last.
//
// Launch: SRB_PACK_THREADS threads per block, any grid >= 1. Only the first `active` blocks
// work, where `active` grows with the bytes to copy (SRB_BYTES_PER_BLOCK each, one block up
// to SRB_PACK_SINGLE_BLOCK_BYTES), so a small count costs one block whatever the capacity.
//
// Memory model (PTX ISA, "Memory Consistency Model"):
// - Each working block: all threads store their data, __syncthreads(), then thread 0 runs a
//   system-scope fence (with one block, the trailer's fence below is that fence). A fence is
//   cumulative: it orders every store that precedes it in causality order, and the barrier
//   puts the other threads' stores there. This is the pattern of cooperative groups' grid
//   sync, at system scope.
// - With several blocks, thread 0 then increments the slot's departure counter; the block
//   that arrives last is the only one to write the trailer (its trailer fence is also the
//   acquire of the other blocks' releases).
// - The trailer's count and status are stored, then a system fence, then `seq` with a
//   volatile store. A host that observes `seq` sees everything before it.
#include "sized_readback.h"

#define SRB_DEVICE __device__ __forceinline__

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

// Reads the count. Returns srb_status bits; *raw gets the value sign-extended to 64 bits.
SRB_DEVICE uint32_t srb_read_count(const srb_pack_params& p, uint64_t* raw, uint64_t* n) {
    switch (p.count_kind) {
    case SRB_COUNT_I32: {
        int64_t v = *reinterpret_cast<const int32_t*>(p.count_ptr);
        *raw = (uint64_t)v;
        *n = v < 0 ? 0 : (uint64_t)v;
        return v < 0 ? SRB_STATUS_NEGATIVE : SRB_STATUS_OK;
    }
    case SRB_COUNT_U32:
        *raw = *n = *reinterpret_cast<const uint32_t*>(p.count_ptr);
        return SRB_STATUS_OK;
    case SRB_COUNT_I64: {
        int64_t v = *reinterpret_cast<const int64_t*>(p.count_ptr);
        *raw = (uint64_t)v;
        *n = v < 0 ? 0 : (uint64_t)v;
        return v < 0 ? SRB_STATUS_NEGATIVE : SRB_STATUS_OK;
    }
    default:
        *raw = *n = *reinterpret_cast<const uint64_t*>(p.count_ptr);
        return SRB_STATUS_OK;
    }
}

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

// dst is SRB_COLUMN_ALIGN-aligned; the source alignment picks the widest word both allow.
SRB_DEVICE void srb_copy(unsigned char* dst, const unsigned char* src, uint64_t nbytes, uint64_t tid,
                         uint64_t stride) {
    const uint64_t a = (uint64_t)src;
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

extern "C" __global__ void __launch_bounds__(SRB_PACK_THREADS) srb_pack(const srb_pack_params p) {
    __shared__ uint32_t s_may_write;
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

    // Blocks past `active` have nothing to copy and leave at once.
    // Up to SRB_PACK_SINGLE_BLOCK_BYTES one block does it all: it then needs one system fence
    // and no departure counter, which beats 8 blocks at 32 KiB (measured on an H200: 9.9 vs
    // 10.4 us, enqueue to trailer, in examples/compare's grid probe).
    const uint64_t bytes = copy_n * row_bytes;
    const uint64_t want =
        bytes <= SRB_PACK_SINGLE_BLOCK_BYTES ? 1 : (bytes + SRB_BYTES_PER_BLOCK - 1) / SRB_BYTES_PER_BLOCK;
    const uint32_t active = (uint32_t)(want < 1 ? 1 : (want > gridDim.x ? gridDim.x : want));
    if (blockIdx.x >= active) return;

    // Device-sequenced mode (graph replay): the kernel before this one on the same readback
    // stored its sequence number in seq_counter; kernel boundaries make it visible here.
    const bool device_seq = p.seq_counter != 0;
    const uint64_t seq = device_seq ? *reinterpret_cast<const volatile uint64_t*>(p.seq_counter) + 1 : p.seq;
    const uint32_t slot = device_seq ? (uint32_t)((seq - 1) % p.num_slots) : p.slot;
    srb_slot_sync* sync = reinterpret_cast<srb_slot_sync*>(p.slot_sync) + slot;
    unsigned char* slot_base = reinterpret_cast<unsigned char*>(p.slots) + (uint64_t)slot * p.slot_stride;

    if (threadIdx.x == 0) {
        uint32_t may_write = 1;
        if (device_seq) {
            // The host may release a slot while this kernel runs, so blocks must not each read
            // the release word: the first block to arrive decides for all and publishes it.
            if (atomicAdd(&sync->arrivals, 1u) == 0) {
                const srb_ring_ctl* ctl = reinterpret_cast<const srb_ring_ctl*>(p.ring_ctl);
                uint64_t released = *reinterpret_cast<const volatile uint64_t*>(&ctl->released_seq);
                may_write = seq <= released + p.num_slots ? 1u : 0u;
                __threadfence();
                atomicExch(reinterpret_cast<unsigned long long*>(&sync->decision),
                           (unsigned long long)((seq << 1) | may_write));
            } else {
                // The deciding block is already resident, so this wait cannot deadlock.
                uint64_t d;
                while (((d = *reinterpret_cast<volatile uint64_t*>(&sync->decision)) >> 1) != seq) __nanosleep(32);
                may_write = (uint32_t)(d & 1);
            }
        }
        s_may_write = may_write;
    }
    __syncthreads();
    const bool may_write = s_may_write != 0;

    if (may_write && copy_n != 0) {
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
        // Release this block's stores (cumulative over the barrier above) at system scope,
        // then count the block out: only the last block to leave goes on.
        __threadfence_system();
        if (atomicAdd(&sync->departures, 1u) != active - 1) return;
    }

    // Last (or only) block, thread 0: the trailer. One system fence orders everything before
    // `seq`: this block's data (cumulative over the barrier above), the trailer's other
    // fields and, with several blocks, the other blocks' data (each released by its block's
    // fence before its atomicAdd, which this block's atomicAdd read, so this fence is also
    // the acquire). A single block thus pays one system fence, several blocks two in a row.
    srb_trailer* t = reinterpret_cast<srb_trailer*>(slot_base + p.trailer_offset);
    if (may_write) {
        t->count_raw = raw;
        t->count_copied = copy_n;
        t->status = status;
        t->magic = SRB_TRAILER_MAGIC;
        __threadfence_system(); // data (every block's), count and status before seq
        *reinterpret_cast<volatile uint64_t*>(&t->seq) = seq;
    } else {
        srb_ring_ctl* ctl = reinterpret_cast<srb_ring_ctl*>(p.ring_ctl);
        *reinterpret_cast<volatile uint64_t*>(&ctl->overrun_seq) = seq;
    }
    // Scratch back to zero for the next pack into this slot (ordered by the kernel boundary).
    sync->departures = 0;
    sync->arrivals = 0;
    if (device_seq) *reinterpret_cast<volatile uint64_t*>(p.seq_counter) = seq;
}
