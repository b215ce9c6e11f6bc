/*
 * sized_readback/slot.h: the slot layout, the kernels' parameters and the append descriptor of
 * sized-readback. The single source of these layouts: the library's kernels and the append
 * header (append.cuh) include it, and the crate's build script turns it into Rust with bindgen,
 * so the device and the host cannot disagree on a size or an offset. Plain C with fixed-width
 * types; it compiles as C99, C++, CUDA and NVRTC (which has no <stdint.h>).
 *
 * A readback owns `num_slots` slots. Slot i starts at byte i * slot_stride of one allocation
 * (pinned, device-mapped host memory for the mapped transport; device memory, mirrored by a
 * pinned host buffer, for the staged one):
 *
 *   +-------------------------+-----+-------------------------+-----+---------------------+
 *   | column 0: capacity rows | pad | column 1 (optional) ... | pad | trailer (32 bytes)  |
 *   +-------------------------+-----+-------------------------+-----+---------------------+
 *   ^ slot start, SRB_SLOT_ALIGN-aligned; every column starts SRB_COLUMN_ALIGN-aligned
 *
 * A bucketed readback (k buckets, e.g. one per MPI neighbour) gives every column k regions of
 * `capacity` rows each (bucket b's rows start at row b * capacity of the column), and puts a
 * bucket table (srb_bucket_table: the true count of each bucket) between the last column and
 * the trailer, whose count is then the total.
 *
 * The trailer is written last: the kernel stores the count and status, executes a system-scope
 * fence, and only then stores `seq` (one naturally aligned 8-byte store). A host that reads the
 * expected `seq` with acquire semantics therefore also sees the count and every data byte.
 */
#ifndef SIZED_READBACK_SLOT_H
#define SIZED_READBACK_SLOT_H

#if defined(__CUDACC_RTC__)
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef int int32_t;
typedef unsigned long long uint64_t;
typedef long long int64_t;
#else
#include <stdint.h>
#endif

/** Most columns one readback can carry (they share one count). */
#define SRB_MAX_COLUMNS 8
/** Each slot starts at a multiple of this many bytes (one 128-byte line). */
#define SRB_SLOT_ALIGN 128
/** Each column's data region starts at a multiple of this many bytes (16-byte vector stores). */
#define SRB_COLUMN_ALIGN 16
/** Threads per block of the pack kernel. */
#define SRB_PACK_THREADS 256
/** A pack block is given at least this many bytes before another block joins in. */
#define SRB_BYTES_PER_BLOCK 4096
/** Most buckets of one bucketed readback (one slot carries every bucket's count and rows). */
#define SRB_MAX_BUCKETS 256
/** Value of srb_trailer.magic once a kernel has written the trailer. */
#define SRB_TRAILER_MAGIC 0x31425253u /* "SRB1" little-endian */

/** How the device-resident count is stored. */
enum srb_count_kind {
    SRB_COUNT_I32 = 0,
    SRB_COUNT_U32 = 1,
    SRB_COUNT_I64 = 2,
    SRB_COUNT_U64 = 3
};

/** Status bits in srb_trailer.status. */
enum srb_status {
    SRB_STATUS_OK = 0,
    /** Pack: the count was negative (signed count kinds only). Nothing was copied. */
    SRB_STATUS_NEGATIVE = 1u << 0,
    /** Pack: the count exceeded the slot capacity. Nothing was copied. */
    SRB_STATUS_OVER_CAPACITY = 1u << 1,
    /** Pack: the count exceeded the length of a source column. Nothing was copied. */
    SRB_STATUS_OVER_SOURCE = 1u << 2,
    /** Append: more rows than the capacity; the first `capacity` rows are in the slot, the next
        ones (up to the spill capacity) in the device-side spill region. */
    SRB_STATUS_SPILLED = 1u << 3,
    /** Append: more rows than capacity + spill capacity; the excess was dropped (counted). */
    SRB_STATUS_DROPPED = 1u << 4,
    /** Append: a block's BlockAppend did not match the readback (block size, number or sizes of
        the columns); that block appended nothing. */
    SRB_STATUS_MISUSE = 1u << 5,
    /** Buckets: a row named a bucket >= num_buckets (append: the row is dropped and counted in
        the bucket table's bad_rows; bad_bucket holds one such index). */
    SRB_STATUS_BAD_BUCKET = 1u << 6,
    /** Bucket pack: a bucket's range [offset, offset + count) runs past its source, or into the
        next bucket's (offsets must rise). Nothing was copied; bad_bucket names the bucket. */
    SRB_STATUS_BAD_OFFSETS = 1u << 7
};

/** The header at the end of every slot (32 bytes, 16-byte aligned). */
typedef struct srb_trailer {
    /** The count: read from device memory (pack; signed kinds sign-extended to 64 bits), or the
        number of rows appended (append, which keeps counting past the capacity). */
    uint64_t count_raw;
    /** Rows in every column of the slot: count_raw, or 0 (pack errors), or capacity (append
        overflow). */
    uint64_t count_copied;
    /** srb_status bits. */
    uint32_t status;
    /** SRB_TRAILER_MAGIC. */
    uint32_t magic;
    /** Sequence number of the readback that wrote this slot; stored last, after a system fence. */
    uint64_t seq;
} srb_trailer;

/**
 * The table of a bucketed slot, between its last column and its trailer (16-byte aligned):
 * written by the last block before the trailer.
 */
typedef struct srb_bucket_table {
    /** Append: rows that named a bucket out of range (dropped). */
    uint64_t bad_rows;
    /** The bucket an error names (SRB_STATUS_BAD_BUCKET: one index out of range;
        SRB_STATUS_OVER_CAPACITY or SRB_STATUS_BAD_OFFSETS: the first offending bucket). */
    uint64_t bad_bucket;
    /** Bucket pack with SRB_STATUS_BAD_OFFSETS: the bad bucket's offset, and the end of the
        range it may not pass (its source length or the next bucket's offset). */
    uint64_t bad_offset;
    uint64_t bad_limit;
    /** Each bucket's true count (append: rows appended to it, also past the capacity; pack:
        the count read). num_buckets entries. */
    uint64_t counts[1];
} srb_bucket_table;

/** One source column of a pack. */
typedef struct srb_column {
    /** Device address of element 0 (any alignment). */
    uint64_t src;
    /** Elements readable at src. */
    uint64_t src_len;
    /** Byte offset of this column's region within a slot (multiple of SRB_COLUMN_ALIGN). */
    uint64_t dst_offset;
    /** Bytes per element. */
    uint32_t elem_size;
    uint32_t reserved;
} srb_column;

/**
 * Control words of a readback whose sequence numbers are assigned on the device (graph replay).
 * Lives in pinned, mapped host memory.
 */
typedef struct srb_ring_ctl {
    /** Written by the host (release): every sequence number up to this one has been released. */
    uint64_t released_seq;
    /** Written by the device (release, system scope): the newest sequence number dropped because
        its slot was still held. */
    uint64_t overrun_seq;
} srb_ring_ctl;

/** Per-slot scratch in device memory. Zero between readbacks, except `spilled`. */
typedef struct srb_slot_sync {
    /** Blocks that have finished (pack: copying; append: srb::BlockAppend::finish). */
    uint32_t departures;
    /** Device-sequenced mode: blocks that have started. */
    uint32_t arrivals;
    /** Device-sequenced mode: (seq << 1) | may_write, published by the first block to arrive. */
    uint64_t decision;
    /** Append: rows appended so far (keeps counting past the capacity). */
    uint64_t count;
    /** Append: rows that went to the spill region in the last finished append into this slot
        (the count the spill fetch reads; kept until the next append into the slot finishes). */
    uint64_t spilled;
    /** Append: set (atomicOr) by a block whose BlockAppend does not match the readback. */
    uint32_t flags;
    uint32_t reserved;
    /** Bucketed append: rows that named a bucket out of range, and one such bucket. */
    uint64_t bad_rows;
    uint64_t bad_bucket;
} srb_slot_sync;

/** The pack kernel's only parameter, passed by value. */
typedef struct srb_pack_params {
    /** Device address of the count (naturally aligned for its kind). */
    uint64_t count_ptr;
    /** Device-visible address of slot 0. */
    uint64_t slots;
    /** Bytes from one slot to the next (multiple of SRB_SLOT_ALIGN). */
    uint64_t slot_stride;
    /** Bytes from a slot's start to its trailer. */
    uint64_t trailer_offset;
    /** Elements per column that a slot holds. */
    uint64_t capacity;
    /** Host-assigned sequence number; ignored when seq_counter != 0. */
    uint64_t seq;
    /** Device address of a uint64_t counter of finished readbacks (device-assigned sequence
        numbers), or 0. */
    uint64_t seq_counter;
    /** Device-visible address of the srb_ring_ctl (device-sequenced mode), or 0. */
    uint64_t ring_ctl;
    /** Device address of num_slots srb_slot_sync records. */
    uint64_t slot_sync;
    /** Host-assigned slot; ignored when seq_counter != 0 (then slot = (seq - 1) % num_slots). */
    uint32_t slot;
    uint32_t num_slots;
    /** srb_count_kind. */
    uint32_t count_kind;
    uint32_t num_columns;
    srb_column columns[SRB_MAX_COLUMNS];
} srb_pack_params;

/** The bucket pack kernel's only parameter: a slot of k buckets filled from device data the
    user already partitioned (k counts and k offsets, as CUB's DevicePartition or an exclusive
    scan leaves them). */
typedef struct srb_pack_buckets_params {
    /** Device address of k counts (srb_count_kind count_kind). */
    uint64_t counts_ptr;
    /** Device address of k element offsets into every column's source, rising, of the same
        kind as the counts. */
    uint64_t offsets_ptr;
    /** Device-visible address of slot 0. */
    uint64_t slots;
    uint64_t slot_stride;
    uint64_t trailer_offset;
    /** Byte offset of the srb_bucket_table within a slot. */
    uint64_t bucket_table;
    /** Rows per bucket. */
    uint64_t capacity;
    uint64_t seq;
    /** Device address of num_slots srb_slot_sync records. */
    uint64_t slot_sync;
    uint32_t slot;
    uint32_t num_slots;
    uint32_t count_kind;
    uint32_t num_buckets;
    uint32_t num_columns;
    uint32_t reserved;
    /** dst_offset: the column's region (bucket b at b * capacity * elem_size within it). */
    srb_column columns[SRB_MAX_COLUMNS];
} srb_pack_buckets_params;

/**
 * The append descriptor: everything a kernel needs to append rows into one readback's slot.
 * Plain data, passed by value as a kernel parameter; made by the host (Rust:
 * `AppendReadback::append`, C: `srb_append_begin`), never written by hand. Valid for one grid.
 */
typedef struct srb_append_desc {
    /** Device-visible address of slot 0 (mapped host memory, or the staged transport's device
        slots). */
    uint64_t slots;
    /** Bytes from one slot to the next. */
    uint64_t slot_stride;
    /** Bytes from a slot's start to its trailer. */
    uint64_t trailer_offset;
    /** Rows per column that a slot holds. */
    uint64_t capacity;
    /** Device address of num_slots srb_slot_sync records. */
    uint64_t slot_sync;
    /** Device address of slot 0's spill region (device memory), or 0 when there is none. */
    uint64_t spill;
    /** Bytes from one slot's spill region to the next. */
    uint64_t spill_stride;
    /** Rows per column that a slot's spill region holds. */
    uint64_t spill_capacity;
    /** Host-assigned sequence number; 0 in device-sequenced mode (graph replay). */
    uint64_t seq;
    /** Device-sequenced mode: device address of the uint64_t counter of finished readbacks. */
    uint64_t seq_counter;
    /** Device-sequenced mode: device-visible address of the srb_ring_ctl. */
    uint64_t ring_ctl;
    /** Host-assigned slot (ignored in device-sequenced mode). */
    uint32_t slot;
    uint32_t num_slots;
    uint32_t num_columns;
    /** Buckets: 1, or k > 1 for a bucketed readback (capacity is then per bucket). */
    uint32_t num_buckets;
    /** Bucketed: byte offset of the srb_bucket_table within a slot. */
    uint64_t bucket_table;
    /** Bucketed: device address of num_slots * 2 * num_buckets uint64_t: per slot, the
        buckets' counters (zero between appends), then the rows each spilled (kept for the
        spill fetch). */
    uint64_t bucket_counts;
    /** Byte offset of each column's region within a slot. */
    uint64_t column_offset[SRB_MAX_COLUMNS];
    /** Byte offset of each column's region within a slot's spill region. */
    uint64_t spill_offset[SRB_MAX_COLUMNS];
    /** Bytes per element of each column. */
    uint32_t elem_size[SRB_MAX_COLUMNS];
} srb_append_desc;

#endif /* SIZED_READBACK_SLOT_H */
