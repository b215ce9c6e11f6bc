/*
 * sized_readback.h: the single source of the slot layout and the pack kernel's parameters.
 *
 * Included by the CUDA kernels in csrc/ and turned into Rust by bindgen (build.rs), so the
 * device and the host cannot disagree on a size or an offset. Plain C, fixed-width types only.
 *
 * A readback owns `num_slots` slots. Slot i starts at byte i * slot_stride of one allocation
 * (pinned, device-mapped host memory for the mapped transport; device memory, mirrored by a
 * pinned host buffer, for the staged one):
 *
 *   +-----------------------+-----+-----------------------+----------------------------+
 *   | column 0: capacity    | pad | column 1 (optional)   | ... | trailer (32 bytes)   |
 *   | elements              |     |                       |     | at trailer_offset    |
 *   +-----------------------+-----+-----------------------+----------------------------+
 *   ^ slot start, SRB_SLOT_ALIGN-aligned; every column starts SRB_COLUMN_ALIGN-aligned
 *
 * The trailer is written last: the kernel stores the count and status, executes a
 * system-scope fence, and only then stores `seq`. A host that reads the expected `seq`
 * (volatile load, then an acquire fence) therefore also sees the count and every data byte.
 */
#ifndef SIZED_READBACK_H
#define SIZED_READBACK_H

#include <stdint.h>

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
/** Value of srb_trailer.magic once a kernel has written the trailer. */
#define SRB_TRAILER_MAGIC 0x31425253u /* "SRB1" little-endian */

/** How the device-resident count is stored. */
enum srb_count_kind {
    SRB_COUNT_I32 = 0,
    SRB_COUNT_U32 = 1,
    SRB_COUNT_I64 = 2,
    SRB_COUNT_U64 = 3,
};

/** Status bits in srb_trailer.status. Any bit set means no data was copied. */
enum srb_status {
    SRB_STATUS_OK = 0,
    /** The count was negative (signed count kinds only). */
    SRB_STATUS_NEGATIVE = 1u << 0,
    /** The count exceeded the slot capacity. */
    SRB_STATUS_OVER_CAPACITY = 1u << 1,
    /** The count exceeded the length of a source column. */
    SRB_STATUS_OVER_SOURCE = 1u << 2,
};

/** The header at the end of every slot (32 bytes, 16-byte aligned). */
typedef struct srb_trailer {
    /** The count read from device memory; signed kinds sign-extended to 64 bits. */
    uint64_t count_raw;
    /** Elements copied into every column (0 unless status == SRB_STATUS_OK). */
    uint64_t count_copied;
    /** srb_status bits. */
    uint32_t status;
    /** SRB_TRAILER_MAGIC. */
    uint32_t magic;
    /** Sequence number of the readback that wrote this slot; stored last, after a system fence. */
    uint64_t seq;
} srb_trailer;

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
 * Control words of a readback whose sequence numbers are assigned on the device
 * (graph replay). Lives in pinned, mapped host memory.
 */
typedef struct srb_ring_ctl {
    /** Written by the host: every sequence number up to this one has been released. */
    uint64_t released_seq;
    /** Written by the device: the newest sequence number dropped because its slot was held. */
    uint64_t overrun_seq;
} srb_ring_ctl;

/** Per-slot scratch in device memory, zero between packs. */
typedef struct srb_slot_sync {
    /** Blocks that have finished copying. */
    uint32_t departures;
    /** Device-sequenced mode: blocks that have started. */
    uint32_t arrivals;
    /** Device-sequenced mode: (seq << 1) | may_write, published by the first block to arrive. */
    uint64_t decision;
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
    /** Device address of a uint64_t counter of finished packs: device-assigned sequence numbers, or 0. */
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

#endif /* SIZED_READBACK_H */
