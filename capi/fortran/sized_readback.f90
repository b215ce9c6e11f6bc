! sized_readback.f90: the Fortran interface of sized-readback's C API (module sized_readback).
!
! Explicit bind(c) interfaces over every srb_* function of capi/include/sized_readback.h, under
! the C names (capi/tests/fortran/ checks that none is missing), the SRB_* codes, flags and
! count kinds as named constants, the append descriptor as a bind(c) type, a srb_check helper,
! and typed zero-copy views of a readout (srb_data_view, srb_bucket_data_view, srb_spill_view,
! srb_spill_bucket_view) as Fortran pointer arrays over the library's pinned host memory.
! Standard Fortran 2018 (iso_c_binding); no CUDA Fortran, no CUDA module needed.
!
! Build: compile this file with the program (gfortran -std=f2018 -c sized_readback.f90) and link
! libsized_readback.a (by path) plus -lpthread -ldl -lm -lrt, or -lsized_readback. See
! capi/fortran/README.md; the seed program in examples/seed_fortran.f90 uses every part of it.
!
! How the C types map (Fortran has no unsigned integers; no value used here comes near 2**31 or
! 2**63, so the bits are the same):
!   int32_t, uint32_t           integer(c_int32_t)     device, slots, columns, flags, count kinds
!   size_t                      integer(c_size_t)      capacity, spill, element sizes, lengths
!   uint64_t, int64_t           integer(c_int64_t)     sequence numbers, counts, timeouts (ns)
!   srb_devptr                  integer(srb_devptr)    a device address (srb_devptr = c_long_long,
!                                                      unsigned long long in C; CUdeviceptr)
!   struct srb_readback *       type(c_ptr)            the readback handle
!   cudaStream_t / CUstream     type(c_ptr)            a stream, passed by value (c_null_ptr: none)
!   cudaEvent_t / CUevent       type(c_ptr)            an event, passed by value (c_null_ptr: none)
!   const T *array              T, intent(in) :: a(*)  e.g. [d_col] or an array of one per column
!   T *out                      T, intent(out)         a scalar the call writes
!   T *out (may be NULL)        T, optional            leave it out to pass NULL
!   const void * (host data)    type(c_ptr)            use the views instead, or c_f_pointer
!   srb_append_desc             type(srb_append_desc)  bind(c), the fields of sized_readback/slot.h
! Every code is an integer(c_int32_t) result (the same kind as c_int and the constants).
! Literals must have the dummy's kind: 262144_c_size_t, -1_c_int64_t (no timeout); 0 and other
! default integers fit the integer(c_int32_t) arguments.
module sized_readback
  use, intrinsic :: iso_c_binding, only: c_ptr, c_funptr, c_null_ptr, c_associated, c_f_pointer, c_char, &
    c_int, c_int32_t, c_int64_t, c_size_t, c_long_long, c_float, c_double
  use, intrinsic :: iso_fortran_env, only: error_unit
  implicit none
  private

  ! ---- the device address kind ----------------------------------------------------------

  !> The kind of a device address, as the C header's srb_devptr (unsigned long long, CUdeviceptr):
  !> a runtime-API device pointer as an integer, e.g. from cudaMalloc through a C helper.
  integer, parameter, public :: srb_devptr = c_long_long

  ! ---- codes, flags, count kinds (the C header's #defines, same names and values) ----------

  !> Success.
  integer(c_int), parameter, public :: SRB_OK = 0
  !> The readback is still in flight (srb_poll, srb_count, srb_data), or srb_next found another
  !> thread taking a replay (nothing consumed; call it again).
  integer(c_int), parameter, public :: SRB_NOT_READY = 1
  !> A wait ran out of time; the readback stays valid (wait again).
  integer(c_int), parameter, public :: SRB_TIMEOUT = 2
  !> A null pointer, an unknown sequence number, a column out of range, or a call that does not
  !> fit the readback's kind (graph, append).
  integer(c_int), parameter, public :: SRB_ERR_INVALID_ARGUMENT = -1
  !> The CUDA driver library (libcuda) could not be loaded.
  integer(c_int), parameter, public :: SRB_ERR_DRIVER_NOT_FOUND = -2
  !> No CUDA device with that ordinal.
  integer(c_int), parameter, public :: SRB_ERR_NO_DEVICE = -3
  !> A CUDA driver call failed (the message names it), including device errors such as a
  !> faulted kernel.
  integer(c_int), parameter, public :: SRB_ERR_CUDA = -4
  !> Unusable settings (zero capacity or slots, bad element sizes, overflowing sizes,
  !> SRB_FLAG_GRAPH with SRB_FLAG_STAGED); reported the same with or without a GPU.
  integer(c_int), parameter, public :: SRB_ERR_INVALID_CONFIG = -5
  !> The device-resident count exceeded the capacity; nothing was copied (the count is in
  !> srb_wait's / srb_next's count_out).
  integer(c_int), parameter, public :: SRB_ERR_COUNT_EXCEEDS_CAPACITY = -6
  !> The device-resident count was negative (signed count kinds); its bits are in count_out.
  integer(c_int), parameter, public :: SRB_ERR_NEGATIVE_COUNT = -7
  !> The count exceeded a column's source length; nothing was copied.
  integer(c_int), parameter, public :: SRB_ERR_COUNT_EXCEEDS_SOURCE = -8
  !> A stream or pointer belongs to another context or device.
  integer(c_int), parameter, public :: SRB_ERR_FOREIGN_CONTEXT = -9
  !> A null or misaligned device pointer, or an address the driver does not know.
  integer(c_int), parameter, public :: SRB_ERR_BAD_POINTER = -10
  !> Every slot is held: release one first (srb_release).
  integer(c_int), parameter, public :: SRB_ERR_SLOTS_EXHAUSTED = -11
  !> Graph mode: this replay was dropped because the host held its slot; call srb_next again.
  integer(c_int), parameter, public :: SRB_ERR_OVERRUN = -12
  !> A slot's trailer did not match: a bug or memory corruption.
  integer(c_int), parameter, public :: SRB_ERR_CORRUPT = -13
  !> The columns do not match the readback. No srb_ call returns it today (each takes as many
  !> columns as the readback was created with); kept so that every error kind has its own code.
  integer(c_int), parameter, public :: SRB_ERR_SCHEMA_MISMATCH = -14
  !> A host-sequenced enqueue or append was given a stream that is capturing a CUDA graph.
  integer(c_int), parameter, public :: SRB_ERR_STREAM_CAPTURING = -15
  !> Graph mode: srb_next before anything was recorded.
  integer(c_int), parameter, public :: SRB_ERR_NOTHING_RECORDED = -16
  !> Graph mode: a recording whose count kind or source lengths differ from the first, or packs
  !> mixed with append kernels.
  integer(c_int), parameter, public :: SRB_ERR_RECORDING_MISMATCH = -17
  !> An append kernel appended more rows than the capacity: count_out holds the true count; the
  !> slot's capacity rows stay readable until srb_release; srb_fetch_spill brings back the rest.
  integer(c_int), parameter, public :: SRB_ERR_APPEND_OVERFLOW = -18
  !> An append kernel's stream finished without the trailer: a block did not call finish().
  integer(c_int), parameter, public :: SRB_ERR_APPEND_UNFINISHED = -19
  !> An append kernel's BlockAppend did not match the readback (block size or columns).
  integer(c_int), parameter, public :: SRB_ERR_APPEND_MISUSE = -20
  !> A bucketed append named a bucket out of range: those rows were dropped (counted).
  integer(c_int), parameter, public :: SRB_ERR_BAD_BUCKET = -21
  !> A bucket pack found a bucket's count above a bucket's capacity; nothing was copied.
  integer(c_int), parameter, public :: SRB_ERR_BUCKET_OVER_CAPACITY = -22
  !> A bucket pack found a bucket's range past its source's end or into the next bucket's.
  integer(c_int), parameter, public :: SRB_ERR_BUCKET_RANGE = -23
  !> The device's compute capability is below 7.0 (Volta), the oldest the kernels support.
  integer(c_int), parameter, public :: SRB_ERR_UNSUPPORTED_DEVICE = -24
  !> A device buffer holds fewer values than the readback reads (counts, offsets).
  integer(c_int), parameter, public :: SRB_ERR_BUFFER_TOO_SHORT = -25
  !> SRB_FLAG_STAGED_SIZED where the sized copy is unavailable (a driver older than CUDA 12.8
  !> or one that failed to build its graphs, or an append or bucketed readback).
  integer(c_int), parameter, public :: SRB_ERR_SIZED_COPY_UNAVAILABLE = -26
  !> The pack kernel did not know the count kind (kernel images older than the library's count
  !> kinds): it read no count and copied nothing.
  integer(c_int), parameter, public :: SRB_ERR_UNKNOWN_COUNT_KIND = -27
  !> A sized launch cannot be built: it needs a CUDA 12.8 driver, or the driver refused its graph.
  integer(c_int), parameter, public :: SRB_ERR_SIZED_LAUNCH_UNAVAILABLE = -28
  !> A sized launch's body callback returned non-zero for a class, or its work could not be captured.
  integer(c_int), parameter, public :: SRB_ERR_BODY_RECORDING = -29
  !> A Rust panic was caught at the boundary (a bug; please report it).
  integer(c_int), parameter, public :: SRB_ERR_PANIC = -100
  !> srb_create flag: the staged transport (device slot, then one copy), not mapped memory.
  integer(c_int), parameter, public :: SRB_FLAG_STAGED = 1
  !> srb_create flag: a device-sequenced readback for CUDA graphs (srb_record / srb_next).
  integer(c_int), parameter, public :: SRB_FLAG_GRAPH = 2
  !> srb_create_buckets flag: the buckets are filled by append kernels (srb_append_begin).
  integer(c_int), parameter, public :: SRB_FLAG_APPEND = 4
  !> With SRB_FLAG_STAGED: always copy the whole slot.
  integer(c_int), parameter, public :: SRB_FLAG_STAGED_WHOLE = 8
  !> With SRB_FLAG_STAGED: the copy's size follows the count (CUDA 12.8+ drivers), or an error.
  integer(c_int), parameter, public :: SRB_FLAG_STAGED_SIZED = 16
  !> srb_create: mapped and staged slots, chosen per enqueue by the count read back last.
  integer(c_int), parameter, public :: SRB_FLAG_AUTO = 32
  !> srb_staged_copy: mapped, nothing copied (or a null handle).
  integer(c_int), parameter, public :: SRB_COPY_NONE = 0
  !> srb_staged_copy: the staged transport copies the whole slot.
  integer(c_int), parameter, public :: SRB_COPY_WHOLE = 1
  !> srb_staged_copy: the staged transport copies what the count needs.
  integer(c_int), parameter, public :: SRB_COPY_SIZED = 2
  !> Most buckets of one bucketed readback.
  integer(c_int), parameter, public :: SRB_MAX_BUCKETS = 256
  ! BEGIN generated by `cargo xtask regen` from xtask/src/count_kinds.rs: do not edit.
  !> Count kind: int32_t, integer(c_int32_t) on the device, as in the seed program (`int* d_size`).
  integer(c_int), parameter, public :: SRB_COUNT_I32 = 0
  !> Count kind: uint32_t, integer(c_int32_t) on the device.
  integer(c_int), parameter, public :: SRB_COUNT_U32 = 1
  !> Count kind: int64_t, integer(c_int64_t) on the device.
  integer(c_int), parameter, public :: SRB_COUNT_I64 = 2
  !> Count kind: uint64_t, integer(c_int64_t) on the device.
  integer(c_int), parameter, public :: SRB_COUNT_U64 = 3
  ! END generated
  !> Deprecated spellings of the count kinds (the same values), kept so that sources written
  !> against the first release compile.
  integer(c_int), parameter, public :: SRB_COUNT_INT32 = SRB_COUNT_I32
  integer(c_int), parameter, public :: SRB_COUNT_UINT32 = SRB_COUNT_U32
  integer(c_int), parameter, public :: SRB_COUNT_INT64 = SRB_COUNT_I64
  integer(c_int), parameter, public :: SRB_COUNT_UINT64 = SRB_COUNT_U64
  !> Most columns of one readback.
  integer(c_int), parameter, public :: SRB_MAX_COLUMNS = 8

  ! ---- the append descriptor -------------------------------------------------------------

  !> The append descriptor (sized_readback/slot.h): made by srb_append_begin or
  !> srb_append_desc_graph, passed by value to the append kernel (from C/CUDA code); plain data,
  !> never written by hand. Fields as in C, unsigned values in signed kinds of the same size.
  type, bind(c), public :: srb_append_desc
    integer(c_int64_t) :: slots
    integer(c_int64_t) :: slot_stride
    integer(c_int64_t) :: trailer_offset
    integer(c_int64_t) :: capacity
    integer(c_int64_t) :: slot_sync
    integer(c_int64_t) :: spill
    integer(c_int64_t) :: spill_stride
    integer(c_int64_t) :: spill_capacity
    integer(c_int64_t) :: seq
    integer(c_int64_t) :: seq_counter
    integer(c_int64_t) :: ring_ctl
    integer(c_int32_t) :: slot
    integer(c_int32_t) :: num_slots
    integer(c_int32_t) :: num_columns
    integer(c_int32_t) :: num_buckets
    integer(c_int64_t) :: bucket_table
    integer(c_int64_t) :: bucket_counts
    integer(c_int64_t) :: column_offset(SRB_MAX_COLUMNS)
    integer(c_int64_t) :: spill_offset(SRB_MAX_COLUMNS)
    integer(c_int32_t) :: elem_size(SRB_MAX_COLUMNS)
  end type srb_append_desc

  !> The library's allocations alive at one moment (srb_live_allocations): device memory and
  !> page-locked host memory, counts and bytes; back where they were once every handle made since
  !> is destroyed.
  type, bind(c), public :: srb_allocations
    integer(c_size_t) :: device
    integer(c_size_t) :: device_bytes
    integer(c_size_t) :: pinned
    integer(c_size_t) :: pinned_bytes
  end type srb_allocations

  ! ---- the C functions -----------------------------------------------------------------------

  public :: srb_create, srb_create_append, srb_create_buckets, srb_enqueue_buckets, srb_buckets
  public :: srb_staged_copy
  public :: srb_destroy, srb_enqueue, srb_append_begin, srb_append_end, srb_append_desc_graph
  public :: srb_record, srb_poll, srb_wait, srb_next, srb_count, srb_data, srb_bucket_data
  public :: srb_fetch_spill, srb_spill_data, srb_spill_bucket_data, srb_release, srb_capacity
  public :: srb_last_error, srb_live_allocations
  public :: srb_sized_launch_create, srb_sized_launch_enqueue, srb_sized_launch_wait
  public :: srb_sized_launch_create_exact_grid
  public :: srb_sized_launch_recorded, srb_sized_launch_classes, srb_sized_launch_destroy

  ! ---- Fortran helpers -----------------------------------------------------------------------

  public :: srb_check, srb_last_error_string
  public :: srb_data_view, srb_bucket_data_view, srb_spill_view, srb_spill_bucket_view

  interface
    !> Creates a readback in the primary context of device `device` (the CUDA runtime's) for
    !> `num_columns` columns of `elem_sizes(1:num_columns)` bytes per element, `capacity` rows
    !> per slot, `slots` slots (2 for double buffering), filled by the pack kernel (srb_enqueue,
    !> srb_record). `flags`: 0, SRB_FLAG_STAGED or SRB_FLAG_GRAPH. Stores the handle in `out`
    !> (free it with srb_destroy). Bad arguments give SRB_ERR_INVALID_ARGUMENT or
    !> SRB_ERR_INVALID_CONFIG with or without a GPU; no driver: SRB_ERR_DRIVER_NOT_FOUND.
    function srb_create(device, capacity, slots, num_columns, elem_sizes, flags, out) &
        result(code) bind(c, name="srb_create")
      import :: c_int32_t, c_size_t, c_ptr
      integer(c_int32_t), value :: device
      integer(c_size_t), value :: capacity
      integer(c_int32_t), value :: slots, num_columns
      integer(c_size_t), intent(in) :: elem_sizes(*)
      integer(c_int32_t), value :: flags
      type(c_ptr), intent(out) :: out
      integer(c_int32_t) :: code
    end function srb_create

    !> Creates an append readback, filled by the caller's kernels (sized_readback/append.cuh;
    !> srb_append_begin / srb_append_end). As srb_create, plus `spill`: rows per slot of the
    !> device-side region for rows appended past `capacity` (0: none; such rows are counted).
    function srb_create_append(device, capacity, spill, slots, num_columns, elem_sizes, flags, &
        out) result(code) bind(c, name="srb_create_append")
      import :: c_int32_t, c_size_t, c_ptr
      integer(c_int32_t), value :: device
      integer(c_size_t), value :: capacity, spill
      integer(c_int32_t), value :: slots, num_columns
      integer(c_size_t), intent(in) :: elem_sizes(*)
      integer(c_int32_t), value :: flags
      type(c_ptr), intent(out) :: out
      integer(c_int32_t) :: code
    end function srb_create_append

    !> Creates a bucketed readback: `buckets` buckets (1 to SRB_MAX_BUCKETS) of `capacity` rows
    !> of every column per slot, each with its own count; filled by srb_enqueue_buckets or, with
    !> SRB_FLAG_APPEND, by append kernels (rows past a bucket's capacity go to its `spill`
    !> rows). Read a bucket with srb_bucket_data / srb_bucket_data_view. Otherwise as srb_create.
    function srb_create_buckets(device, buckets, capacity, spill, slots, num_columns, &
        elem_sizes, flags, out) result(code) bind(c, name="srb_create_buckets")
      import :: c_int32_t, c_size_t, c_ptr
      integer(c_int32_t), value :: device, buckets
      integer(c_size_t), value :: capacity, spill
      integer(c_int32_t), value :: slots, num_columns
      integer(c_size_t), intent(in) :: elem_sizes(*)
      integer(c_int32_t), value :: flags
      type(c_ptr), intent(out) :: out
      integer(c_int32_t) :: code
    end function srb_create_buckets

    !> Bucket mode: enqueues the readback of every bucket of device data already partitioned:
    !> bucket b's rows are rows offsets[b] .. offsets[b] + counts[b] of each column's source
    !> (`columns(i)`, `lens(i)` elements readable); `counts` and `offsets` are device arrays of
    !> one value per bucket of kind `count_kind`, the offsets rising. Otherwise as srb_enqueue.
    !> Errors about the counts or offsets come from srb_wait, with nothing copied.
    function srb_enqueue_buckets(rb, stream, after, columns, lens, counts, offsets, count_kind, &
        seq_out) result(code) bind(c, name="srb_enqueue_buckets")
      import :: c_ptr, c_size_t, c_int32_t, c_int64_t, srb_devptr
      type(c_ptr), value :: rb, stream, after
      integer(srb_devptr), intent(in) :: columns(*)
      integer(c_size_t), intent(in) :: lens(*)
      integer(srb_devptr), value :: counts, offsets
      integer(c_int32_t), value :: count_kind
      integer(c_int64_t), intent(out) :: seq_out
      integer(c_int32_t) :: code
    end function srb_enqueue_buckets

    !> Buckets of the readback (1 unless bucketed; 0 if `rb` is null).
    function srb_buckets(rb) result(n) bind(c, name="srb_buckets")
      import :: c_ptr, c_int32_t
      type(c_ptr), value :: rb
      integer(c_int32_t) :: n
    end function srb_buckets

    !> How the slots reach the host: SRB_COPY_SIZED, SRB_COPY_WHOLE (staged) or SRB_COPY_NONE.
    function srb_staged_copy(rb) result(mode) bind(c, name="srb_staged_copy")
      import :: c_ptr, c_int32_t
      type(c_ptr), value :: rb
      integer(c_int32_t) :: mode
    end function srb_staged_copy

    !> Destroys a readback (c_null_ptr is ignored), after waiting for its readbacks in flight;
    !> every view of it becomes invalid. Destroy it before the streams it used.
    subroutine srb_destroy(rb) bind(c, name="srb_destroy")
      import :: c_ptr
      type(c_ptr), value :: rb
    end subroutine srb_destroy

    !> Host-sequenced mode: enqueues a readback of `columns(i)` (device addresses, `lens(i)`
    !> elements readable at each) sized by the count at device address `count` (of kind
    !> `count_kind`, e.g. SRB_COUNT_I32), on `stream`, after the event `after` (c_null_ptr if
    !> the producer ran on `stream`). Returns at once; stores the sequence number in `seq_out`.
    !> The sources must stay allocated and unwritten until the readback completes.
    function srb_enqueue(rb, stream, after, columns, lens, count, count_kind, seq_out) &
        result(code) bind(c, name="srb_enqueue")
      import :: c_ptr, c_size_t, c_int32_t, c_int64_t, srb_devptr
      type(c_ptr), value :: rb, stream, after
      integer(srb_devptr), intent(in) :: columns(*)
      integer(c_size_t), intent(in) :: lens(*)
      integer(srb_devptr), value :: count
      integer(c_int32_t), value :: count_kind
      integer(c_int64_t), intent(out) :: seq_out
      integer(c_int32_t) :: code
    end function srb_enqueue

    !> Append mode: reserves a slot for one append kernel on `stream` (after `after`, if not
    !> c_null_ptr), stores its descriptor in `desc_out` (pass it by value to the kernel) and its
    !> sequence number in `seq_out`. Launch exactly one grid with it on `stream`, then call
    !> srb_append_end whatever the launch did.
    function srb_append_begin(rb, stream, after, desc_out, seq_out) result(code) &
        bind(c, name="srb_append_begin")
      import :: c_ptr, c_int32_t, c_int64_t, srb_append_desc
      type(c_ptr), value :: rb, stream, after
      type(srb_append_desc), intent(out) :: desc_out
      integer(c_int64_t), intent(out) :: seq_out
      integer(c_int32_t) :: code
    end function srb_append_begin

    !> Append mode: the kernel of append `seq` was launched (`launch_status` 0: then wait on
    !> `seq` as on any readback) or its launch failed (non-zero: the slot is given back). SRB_OK
    !> in both cases, unless `seq` was not begun.
    function srb_append_end(rb, seq, launch_status) result(code) bind(c, name="srb_append_end")
      import :: c_ptr, c_int32_t, c_int64_t
      type(c_ptr), value :: rb
      integer(c_int64_t), value :: seq
      integer(c_int32_t), value :: launch_status
      integer(c_int32_t) :: code
    end function srb_append_end

    !> Graph append mode (srb_create_append with SRB_FLAG_GRAPH): the descriptor that every
    !> captured append kernel of this readback takes, for every replay.
    function srb_append_desc_graph(rb, desc_out) result(code) &
        bind(c, name="srb_append_desc_graph")
      import :: c_ptr, c_int32_t, srb_append_desc
      type(c_ptr), value :: rb
      type(srb_append_desc), intent(out) :: desc_out
      integer(c_int32_t) :: code
    end function srb_append_desc_graph

    !> Graph mode: records one pack into `stream` (normally under capture), arguments as
    !> srb_enqueue. Every replay produces readback 1, 2, 3, ... in turn: take them with
    !> srb_next. Every recording uses the first one's `count_kind` and `lens`, else
    !> SRB_ERR_RECORDING_MISMATCH.
    function srb_record(rb, stream, after, columns, lens, count, count_kind) result(code) &
        bind(c, name="srb_record")
      import :: c_ptr, c_size_t, c_int32_t, srb_devptr
      type(c_ptr), value :: rb, stream, after
      integer(srb_devptr), intent(in) :: columns(*)
      integer(c_size_t), intent(in) :: lens(*)
      integer(srb_devptr), value :: count
      integer(c_int32_t), value :: count_kind
      integer(c_int32_t) :: code
    end function srb_record

    !> Host-sequenced mode: SRB_OK if readback `seq` is complete, SRB_NOT_READY if in flight, or
    !> the count's error. Never blocks.
    function srb_poll(rb, seq) result(code) bind(c, name="srb_poll")
      import :: c_ptr, c_int32_t, c_int64_t
      type(c_ptr), value :: rb
      integer(c_int64_t), value :: seq
      integer(c_int32_t) :: code
    end function srb_poll

    !> Host-sequenced mode: waits for readback `seq` at most `timeout_ns` nanoseconds (< 0, e.g.
    !> -1_c_int64_t: no limit), then stores its count in `count_out` (optional). SRB_OK,
    !> SRB_TIMEOUT (wait again) or an error; after SRB_ERR_COUNT_EXCEEDS_CAPACITY,
    !> SRB_ERR_COUNT_EXCEEDS_SOURCE or SRB_ERR_APPEND_OVERFLOW the true count is in `count_out`.
    !> The slot stays held (and its views valid) until srb_release.
    function srb_wait(rb, seq, timeout_ns, count_out) result(code) bind(c, name="srb_wait")
      import :: c_ptr, c_int32_t, c_int64_t
      type(c_ptr), value :: rb
      integer(c_int64_t), value :: seq, timeout_ns
      integer(c_int64_t), intent(out), optional :: count_out
      integer(c_int32_t) :: code
    end function srb_wait

    !> Graph mode: waits at most `timeout_ns` (< 0: no limit; 0: just look) for the next
    !> replay's readback, stores its sequence number in `seq_out` and its count in `count_out`
    !> (both optional) and holds its slot until srb_release. SRB_OK, SRB_TIMEOUT, SRB_NOT_READY,
    !> SRB_ERR_OVERRUN (that replay was dropped), a count error, SRB_ERR_APPEND_OVERFLOW (held:
    !> release it) or SRB_ERR_NOTHING_RECORDED.
    function srb_next(rb, timeout_ns, seq_out, count_out) result(code) bind(c, name="srb_next")
      import :: c_ptr, c_int32_t, c_int64_t
      type(c_ptr), value :: rb
      integer(c_int64_t), value :: timeout_ns
      integer(c_int64_t), intent(out), optional :: seq_out, count_out
      integer(c_int32_t) :: code
    end function srb_next

    !> The rows in the slot of complete readback `seq` (after an append overflow: the capacity),
    !> in `count_out`. SRB_NOT_READY while in flight (host mode).
    function srb_count(rb, seq, count_out) result(code) bind(c, name="srb_count")
      import :: c_ptr, c_int32_t, c_int64_t
      type(c_ptr), value :: rb
      integer(c_int64_t), value :: seq
      integer(c_int64_t), intent(out) :: count_out
      integer(c_int32_t) :: code
    end function srb_count

    !> Host address of column `column` (0-based) of complete readback `seq`: srb_count rows in
    !> pinned memory, 16-byte aligned, valid until srb_release(rb, seq). c_null_ptr if not
    !> complete or held, or on an error (srb_last_error). Prefer srb_data_view.
    function srb_data(rb, seq, column) result(p) bind(c, name="srb_data")
      import :: c_ptr, c_int32_t, c_int64_t
      type(c_ptr), value :: rb
      integer(c_int64_t), value :: seq
      integer(c_int32_t), value :: column
      type(c_ptr) :: p
    end function srb_data

    !> Host address of column `column`'s rows of bucket `bucket` (0-based) of complete readback
    !> `seq`, their number in `count_out` (optional); valid until srb_release(rb, seq). Without
    !> buckets, bucket 0 is all of it. c_null_ptr on an error. Prefer srb_bucket_data_view.
    function srb_bucket_data(rb, seq, bucket, column, count_out) result(p) &
        bind(c, name="srb_bucket_data")
      import :: c_ptr, c_int32_t, c_int64_t
      type(c_ptr), value :: rb
      integer(c_int64_t), value :: seq
      integer(c_int32_t), value :: bucket, column
      integer(c_int64_t), intent(out), optional :: count_out
      type(c_ptr) :: p
    end function srb_bucket_data

    !> After SRB_ERR_APPEND_OVERFLOW for `seq`: brings back the rows that went to the spill
    !> region, on `stream`, waiting at most `timeout_ns` (< 0: no limit); their number in
    !> `count_out`. Then srb_spill_data / srb_spill_view give each column's spilled rows.
    function srb_fetch_spill(rb, seq, stream, timeout_ns, count_out) result(code) &
        bind(c, name="srb_fetch_spill")
      import :: c_ptr, c_int32_t, c_int64_t
      type(c_ptr), value :: rb
      integer(c_int64_t), value :: seq
      type(c_ptr), value :: stream
      integer(c_int64_t), value :: timeout_ns
      integer(c_int64_t), intent(out) :: count_out
      integer(c_int32_t) :: code
    end function srb_fetch_spill

    !> Column `column` of the spilled rows srb_fetch_spill brought back for `seq` (all buckets),
    !> valid until srb_release(rb, seq); c_null_ptr if none were fetched.
    function srb_spill_data(rb, seq, column) result(p) bind(c, name="srb_spill_data")
      import :: c_ptr, c_int32_t, c_int64_t
      type(c_ptr), value :: rb
      integer(c_int64_t), value :: seq
      integer(c_int32_t), value :: column
      type(c_ptr) :: p
    end function srb_spill_data

    !> Bucketed append: column `column`'s spilled rows of bucket `bucket` that srb_fetch_spill
    !> brought back for `seq`, their number in `count_out` (optional); valid until
    !> srb_release(rb, seq); c_null_ptr if none were fetched.
    function srb_spill_bucket_data(rb, seq, bucket, column, count_out) result(p) &
        bind(c, name="srb_spill_bucket_data")
      import :: c_ptr, c_int32_t, c_int64_t
      type(c_ptr), value :: rb
      integer(c_int64_t), value :: seq
      integer(c_int32_t), value :: bucket, column
      integer(c_int64_t), intent(out), optional :: count_out
      type(c_ptr) :: p
    end function srb_spill_bucket_data

    !> Releases readback `seq`'s slot for reuse: every address and view of `seq` becomes
    !> invalid (copy what you keep first).
    function srb_release(rb, seq) result(code) bind(c, name="srb_release")
      import :: c_ptr, c_int32_t, c_int64_t
      type(c_ptr), value :: rb
      integer(c_int64_t), value :: seq
      integer(c_int32_t) :: code
    end function srb_release

    !> Stores the library's allocations alive now in `out` (SRB_OK).
    function srb_live_allocations(out) result(code) bind(c, name="srb_live_allocations")
      import :: c_int32_t, srb_allocations
      type(srb_allocations), intent(out) :: out
      integer(c_int32_t) :: code
    end function srb_live_allocations

    !> Sized launch: a GPU step sized by the device-resident count of kind `count_kind` at
    !> `count`. The size classes are n_max(1:num_classes) (ascending, the last `capacity`), or
    !> with num_classes 0 (n_max unused) 1024, 4096, ... up to `capacity`. `body` (a bind(c)
    !> function, c_funloc) is called once per class at creation with (user, stream, class index,
    !> n_max, count) and enqueues that class's work on `stream`, which is capturing; it returns 0,
    !> or non-zero for SRB_ERR_BODY_RECORDING. Needs a CUDA 12.8 driver. The handle in `out`.
    function srb_sized_launch_create(device, count, count_kind, capacity, n_max, num_classes, &
        body, user, out) result(code) bind(c, name="srb_sized_launch_create")
      import :: c_ptr, c_funptr, c_int32_t, c_int64_t, srb_devptr
      integer(c_int32_t), value :: device
      integer(srb_devptr), value :: count
      integer(c_int32_t), value :: count_kind
      integer(c_int64_t), value :: capacity
      integer(c_int64_t), intent(in) :: n_max(*)
      integer(c_int32_t), value :: num_classes
      type(c_funptr), value :: body
      type(c_ptr), value :: user
      type(c_ptr), intent(out) :: out
      integer(c_int32_t) :: code
    end function srb_sized_launch_create

    !> Sized launch, exact-grid form: one class, `capacity`, whose body `body` (as above, called
    !> once) must be one kernel launch of a 1-D grid; at each launch the device sets its grid to
    !> ceil(count / items_per_block) blocks, or skips it for 0 or past the capacity. A graph it
    !> is recorded into must be uploaded before its first launch. Needs a CUDA 12.8 driver. The
    !> handle in `out`, used as srb_sized_launch_create's.
    function srb_sized_launch_create_exact_grid(device, count, count_kind, capacity, &
        items_per_block, body, user, out) result(code) &
        bind(c, name="srb_sized_launch_create_exact_grid")
      import :: c_ptr, c_funptr, c_int32_t, c_int64_t, srb_devptr
      integer(c_int32_t), value :: device
      integer(srb_devptr), value :: count
      integer(c_int32_t), value :: count_kind
      integer(c_int64_t), value :: capacity
      integer(c_int64_t), value :: items_per_block
      type(c_funptr), value :: body
      type(c_ptr), value :: user
      type(c_ptr), intent(out) :: out
      integer(c_int32_t) :: code
    end function srb_sized_launch_create_exact_grid

    !> Launches the sized launch on `stream` after its work: the device picks the count's class
    !> and runs its body. The launch's number in `seq_out` (0 when `stream` is capturing: the
    !> sized launch is recorded into the graph).
    function srb_sized_launch_enqueue(l, stream, seq_out) result(code) &
        bind(c, name="srb_sized_launch_enqueue")
      import :: c_ptr, c_int32_t, c_int64_t
      type(c_ptr), value :: l, stream
      integer(c_int64_t), intent(out) :: seq_out
      integer(c_int32_t) :: code
    end function srb_sized_launch_enqueue

    !> Waits for launch `seq`, its body included (at most `timeout_ns`, < 0: no limit): the count
    !> it read in `count_out`, the class that ran (0-based) in `class_out` (the number of classes
    !> when none ran); SRB_ERR_COUNT_EXCEEDS_CAPACITY (the true count in `count_out`) or
    !> SRB_ERR_NEGATIVE_COUNT when no body ran; SRB_ERR_OVERRUN after 256 later launches.
    function srb_sized_launch_wait(l, seq, timeout_ns, count_out, class_out) result(code) &
        bind(c, name="srb_sized_launch_wait")
      import :: c_ptr, c_int32_t, c_int64_t
      type(c_ptr), value :: l
      integer(c_int64_t), value :: seq, timeout_ns
      integer(c_int64_t), intent(out) :: count_out
      integer(c_int32_t), intent(out) :: class_out
      integer(c_int32_t) :: code
    end function srb_sized_launch_wait

    !> After a replay of a graph the sized launch was recorded into has completed: that replay's
    !> count and class, as srb_sized_launch_wait gives them; SRB_NOT_READY before any replay.
    function srb_sized_launch_recorded(l, count_out, class_out) result(code) &
        bind(c, name="srb_sized_launch_recorded")
      import :: c_ptr, c_int32_t, c_int64_t
      type(c_ptr), value :: l
      integer(c_int64_t), intent(out) :: count_out
      integer(c_int32_t), intent(out) :: class_out
      integer(c_int32_t) :: code
    end function srb_sized_launch_recorded

    !> The number of size classes, their n_max in n_max_out(1:min(classes, len)).
    function srb_sized_launch_classes(l, n_max_out, len) result(n) &
        bind(c, name="srb_sized_launch_classes")
      import :: c_ptr, c_int32_t, c_int64_t
      type(c_ptr), value :: l
      integer(c_int64_t), intent(out) :: n_max_out(*)
      integer(c_int32_t), value :: len
      integer(c_int32_t) :: n
    end function srb_sized_launch_classes

    !> Destroys a sized launch (a null pointer is ignored) after its launches in flight.
    subroutine srb_sized_launch_destroy(l) bind(c, name="srb_sized_launch_destroy")
      import :: c_ptr
      type(c_ptr), value :: l
    end subroutine srb_sized_launch_destroy

    !> Rows per slot of the readback (0 if `rb` is null).
    function srb_capacity(rb) result(n) bind(c, name="srb_capacity")
      import :: c_ptr, c_size_t
      type(c_ptr), value :: rb
      integer(c_size_t) :: n
    end function srb_capacity

    !> This thread's message for its last failed call (empty if none) as a C string, valid until
    !> this thread's next failing srb_ call. srb_last_error_string() gives it as Fortran text.
    function srb_last_error() result(p) bind(c, name="srb_last_error")
      import :: c_ptr
      type(c_ptr) :: p
    end function srb_last_error

    ! The C library's strlen, to convert srb_last_error's text.
    function c_strlen(s) result(n) bind(c, name="strlen")
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: n
    end function c_strlen
  end interface

  !> Typed zero-copy view of one column of a complete readback:
  !>   code = srb_data_view(rb, seq, column, x)
  !> with x a `pointer :: x(:)` of real(c_double), real(c_float), integer(c_int32_t) or
  !> integer(c_int64_t) (the column's element type, as its elem_sizes: the library cannot
  !> check it). On SRB_OK, x points at the srb_count(rb, seq) rows (x(1) is row 0) in the
  !> library's pinned memory, read-only by contract; otherwise x is null and the code is
  !> srb_count's (SRB_NOT_READY while in flight, SRB_ERR_INVALID_ARGUMENT for an unknown or
  !> released seq) or SRB_ERR_INVALID_ARGUMENT (column out of range, a bucketed readback: use
  !> srb_bucket_data_view); srb_last_error_string() says why.
  !> The view is valid until srb_release(rb, seq) (or srb_destroy(rb)); after that, x dangles:
  !> copy the rows you keep (y = x) before releasing.
  interface srb_data_view
    module procedure data_view_f64, data_view_f32, data_view_i32, data_view_i64
  end interface srb_data_view

  !> Typed zero-copy view of column `column`'s rows of bucket `bucket` (both 0-based):
  !>   code = srb_bucket_data_view(rb, seq, bucket, column, x)
  !> types as srb_data_view; size(x) is the bucket's row count (without buckets, bucket 0 is
  !> the whole readout). Errors as srb_data_view (SRB_ERR_INVALID_ARGUMENT also for a bucket
  !> out of range). Valid until srb_release(rb, seq).
  interface srb_bucket_data_view
    module procedure bucket_view_f64, bucket_view_f32, bucket_view_i32, bucket_view_i64
  end interface srb_bucket_data_view

  !> Typed zero-copy view of column `column` of the rows srb_fetch_spill brought back for `seq`:
  !>   code = srb_spill_view(rb, seq, column, count, x)
  !> with `count` the number srb_fetch_spill stored. SRB_ERR_INVALID_ARGUMENT (x null) if no
  !> spill was fetched or on another error (srb_last_error_string). Valid until srb_release.
  interface srb_spill_view
    module procedure spill_view_f64, spill_view_f32, spill_view_i32, spill_view_i64
  end interface srb_spill_view

  !> Bucketed append: typed zero-copy view of column `column`'s spilled rows of bucket `bucket`:
  !>   code = srb_spill_bucket_view(rb, seq, bucket, column, x)
  !> after srb_fetch_spill; size(x) is the bucket's spilled rows. Errors as srb_spill_view.
  !> Valid until srb_release(rb, seq).
  interface srb_spill_bucket_view
    module procedure spill_bucket_view_f64, spill_bucket_view_f32, spill_bucket_view_i32, &
      spill_bucket_view_i64
  end interface srb_spill_bucket_view

contains

  !> This thread's last error message (srb_last_error) as a Fortran string (a copy: it stays
  !> valid after later calls); '' if none.
  function srb_last_error_string() result(msg)
    character(len=:), allocatable :: msg
    type(c_ptr) :: p
    character(kind=c_char), pointer :: chars(:)
    integer(c_size_t) :: n, i
    p = srb_last_error()
    if (.not. c_associated(p)) then
      msg = ''
      return
    end if
    n = c_strlen(p)
    allocate(character(len=n) :: msg)
    if (n == 0) return
    call c_f_pointer(p, chars, [n])
    do i = 1, n
      msg(i:i) = chars(i)
    end do
  end function srb_last_error_string

  !> Stops the program if `code` is not SRB_OK: prints
  !>   <what> failed (<code>): <srb_last_error message>
  !> to the standard error unit and stops with exit status 1 (quietly: no "STOP" line, no
  !> backtrace). Returns normally on SRB_OK. For codes the caller handles (SRB_TIMEOUT,
  !> SRB_NOT_READY, SRB_ERR_APPEND_OVERFLOW) test the code itself instead.
  subroutine srb_check(code, what)
    integer(c_int32_t), intent(in) :: code
    character(len=*), intent(in) :: what
    if (code == SRB_OK) return
    write(error_unit, '(a, " failed (", i0, "): ", a)') what, code, srb_last_error_string()
    flush(error_unit)
    stop 1, quiet=.true.
  end subroutine srb_check

  ! ---- the views: one address-and-rows helper per kind of view, then c_f_pointer per type ---

  ! srb_count, then srb_data: the address and rows of a column, or an error with p null.
  function data_address(rb, seq, column, p, n) result(code)
    type(c_ptr), intent(in) :: rb
    integer(c_int64_t), intent(in) :: seq
    integer(c_int32_t), intent(in) :: column
    type(c_ptr), intent(out) :: p
    integer(c_int64_t), intent(out) :: n
    integer(c_int32_t) :: code
    p = c_null_ptr
    n = 0
    code = srb_count(rb, seq, n)
    if (code /= SRB_OK) then
      n = 0
      return
    end if
    p = srb_data(rb, seq, column)
    if (.not. c_associated(p)) then
      n = 0
      code = SRB_ERR_INVALID_ARGUMENT
    end if
  end function data_address

  ! srb_bucket_data; on null, srb_count's code (the readback's state) or
  ! SRB_ERR_INVALID_ARGUMENT.
  function bucket_address(rb, seq, bucket, column, p, n) result(code)
    type(c_ptr), intent(in) :: rb
    integer(c_int64_t), intent(in) :: seq
    integer(c_int32_t), intent(in) :: bucket, column
    type(c_ptr), intent(out) :: p
    integer(c_int64_t), intent(out) :: n
    integer(c_int32_t) :: code
    integer(c_int64_t) :: total
    n = 0
    p = srb_bucket_data(rb, seq, bucket, column, n)
    if (c_associated(p)) then
      code = SRB_OK
      return
    end if
    n = 0
    code = srb_count(rb, seq, total)
    if (code == SRB_OK) code = SRB_ERR_INVALID_ARGUMENT
  end function bucket_address

  ! srb_spill_data with the count srb_fetch_spill gave.
  function spill_address(rb, seq, column, count, p, n) result(code)
    type(c_ptr), intent(in) :: rb
    integer(c_int64_t), intent(in) :: seq, count
    integer(c_int32_t), intent(in) :: column
    type(c_ptr), intent(out) :: p
    integer(c_int64_t), intent(out) :: n
    integer(c_int32_t) :: code
    p = srb_spill_data(rb, seq, column)
    n = 0
    code = SRB_ERR_INVALID_ARGUMENT
    if (c_associated(p)) then
      n = max(count, 0_c_int64_t)
      code = SRB_OK
    end if
  end function spill_address

  ! srb_spill_bucket_data.
  function spill_bucket_address(rb, seq, bucket, column, p, n) result(code)
    type(c_ptr), intent(in) :: rb
    integer(c_int64_t), intent(in) :: seq
    integer(c_int32_t), intent(in) :: bucket, column
    type(c_ptr), intent(out) :: p
    integer(c_int64_t), intent(out) :: n
    integer(c_int32_t) :: code
    n = 0
    p = srb_spill_bucket_data(rb, seq, bucket, column, n)
    code = SRB_OK
    if (.not. c_associated(p)) then
      n = 0
      code = SRB_ERR_INVALID_ARGUMENT
    end if
  end function spill_bucket_address

  function data_view_f64(rb, seq, column, x) result(code)
    type(c_ptr), intent(in) :: rb
    integer(c_int64_t), intent(in) :: seq
    integer(c_int32_t), intent(in) :: column
    real(c_double), pointer, intent(out) :: x(:)
    integer(c_int32_t) :: code
    type(c_ptr) :: p
    integer(c_int64_t) :: n
    x => null()
    code = data_address(rb, seq, column, p, n)
    if (code == SRB_OK) call c_f_pointer(p, x, [n])
  end function data_view_f64

  function data_view_f32(rb, seq, column, x) result(code)
    type(c_ptr), intent(in) :: rb
    integer(c_int64_t), intent(in) :: seq
    integer(c_int32_t), intent(in) :: column
    real(c_float), pointer, intent(out) :: x(:)
    integer(c_int32_t) :: code
    type(c_ptr) :: p
    integer(c_int64_t) :: n
    x => null()
    code = data_address(rb, seq, column, p, n)
    if (code == SRB_OK) call c_f_pointer(p, x, [n])
  end function data_view_f32

  function data_view_i32(rb, seq, column, x) result(code)
    type(c_ptr), intent(in) :: rb
    integer(c_int64_t), intent(in) :: seq
    integer(c_int32_t), intent(in) :: column
    integer(c_int32_t), pointer, intent(out) :: x(:)
    integer(c_int32_t) :: code
    type(c_ptr) :: p
    integer(c_int64_t) :: n
    x => null()
    code = data_address(rb, seq, column, p, n)
    if (code == SRB_OK) call c_f_pointer(p, x, [n])
  end function data_view_i32

  function data_view_i64(rb, seq, column, x) result(code)
    type(c_ptr), intent(in) :: rb
    integer(c_int64_t), intent(in) :: seq
    integer(c_int32_t), intent(in) :: column
    integer(c_int64_t), pointer, intent(out) :: x(:)
    integer(c_int32_t) :: code
    type(c_ptr) :: p
    integer(c_int64_t) :: n
    x => null()
    code = data_address(rb, seq, column, p, n)
    if (code == SRB_OK) call c_f_pointer(p, x, [n])
  end function data_view_i64

  function bucket_view_f64(rb, seq, bucket, column, x) result(code)
    type(c_ptr), intent(in) :: rb
    integer(c_int64_t), intent(in) :: seq
    integer(c_int32_t), intent(in) :: bucket, column
    real(c_double), pointer, intent(out) :: x(:)
    integer(c_int32_t) :: code
    type(c_ptr) :: p
    integer(c_int64_t) :: n
    x => null()
    code = bucket_address(rb, seq, bucket, column, p, n)
    if (code == SRB_OK) call c_f_pointer(p, x, [n])
  end function bucket_view_f64

  function bucket_view_f32(rb, seq, bucket, column, x) result(code)
    type(c_ptr), intent(in) :: rb
    integer(c_int64_t), intent(in) :: seq
    integer(c_int32_t), intent(in) :: bucket, column
    real(c_float), pointer, intent(out) :: x(:)
    integer(c_int32_t) :: code
    type(c_ptr) :: p
    integer(c_int64_t) :: n
    x => null()
    code = bucket_address(rb, seq, bucket, column, p, n)
    if (code == SRB_OK) call c_f_pointer(p, x, [n])
  end function bucket_view_f32

  function bucket_view_i32(rb, seq, bucket, column, x) result(code)
    type(c_ptr), intent(in) :: rb
    integer(c_int64_t), intent(in) :: seq
    integer(c_int32_t), intent(in) :: bucket, column
    integer(c_int32_t), pointer, intent(out) :: x(:)
    integer(c_int32_t) :: code
    type(c_ptr) :: p
    integer(c_int64_t) :: n
    x => null()
    code = bucket_address(rb, seq, bucket, column, p, n)
    if (code == SRB_OK) call c_f_pointer(p, x, [n])
  end function bucket_view_i32

  function bucket_view_i64(rb, seq, bucket, column, x) result(code)
    type(c_ptr), intent(in) :: rb
    integer(c_int64_t), intent(in) :: seq
    integer(c_int32_t), intent(in) :: bucket, column
    integer(c_int64_t), pointer, intent(out) :: x(:)
    integer(c_int32_t) :: code
    type(c_ptr) :: p
    integer(c_int64_t) :: n
    x => null()
    code = bucket_address(rb, seq, bucket, column, p, n)
    if (code == SRB_OK) call c_f_pointer(p, x, [n])
  end function bucket_view_i64

  function spill_view_f64(rb, seq, column, count, x) result(code)
    type(c_ptr), intent(in) :: rb
    integer(c_int64_t), intent(in) :: seq, count
    integer(c_int32_t), intent(in) :: column
    real(c_double), pointer, intent(out) :: x(:)
    integer(c_int32_t) :: code
    type(c_ptr) :: p
    integer(c_int64_t) :: n
    x => null()
    code = spill_address(rb, seq, column, count, p, n)
    if (code == SRB_OK) call c_f_pointer(p, x, [n])
  end function spill_view_f64

  function spill_view_f32(rb, seq, column, count, x) result(code)
    type(c_ptr), intent(in) :: rb
    integer(c_int64_t), intent(in) :: seq, count
    integer(c_int32_t), intent(in) :: column
    real(c_float), pointer, intent(out) :: x(:)
    integer(c_int32_t) :: code
    type(c_ptr) :: p
    integer(c_int64_t) :: n
    x => null()
    code = spill_address(rb, seq, column, count, p, n)
    if (code == SRB_OK) call c_f_pointer(p, x, [n])
  end function spill_view_f32

  function spill_view_i32(rb, seq, column, count, x) result(code)
    type(c_ptr), intent(in) :: rb
    integer(c_int64_t), intent(in) :: seq, count
    integer(c_int32_t), intent(in) :: column
    integer(c_int32_t), pointer, intent(out) :: x(:)
    integer(c_int32_t) :: code
    type(c_ptr) :: p
    integer(c_int64_t) :: n
    x => null()
    code = spill_address(rb, seq, column, count, p, n)
    if (code == SRB_OK) call c_f_pointer(p, x, [n])
  end function spill_view_i32

  function spill_view_i64(rb, seq, column, count, x) result(code)
    type(c_ptr), intent(in) :: rb
    integer(c_int64_t), intent(in) :: seq, count
    integer(c_int32_t), intent(in) :: column
    integer(c_int64_t), pointer, intent(out) :: x(:)
    integer(c_int32_t) :: code
    type(c_ptr) :: p
    integer(c_int64_t) :: n
    x => null()
    code = spill_address(rb, seq, column, count, p, n)
    if (code == SRB_OK) call c_f_pointer(p, x, [n])
  end function spill_view_i64

  function spill_bucket_view_f64(rb, seq, bucket, column, x) result(code)
    type(c_ptr), intent(in) :: rb
    integer(c_int64_t), intent(in) :: seq
    integer(c_int32_t), intent(in) :: bucket, column
    real(c_double), pointer, intent(out) :: x(:)
    integer(c_int32_t) :: code
    type(c_ptr) :: p
    integer(c_int64_t) :: n
    x => null()
    code = spill_bucket_address(rb, seq, bucket, column, p, n)
    if (code == SRB_OK) call c_f_pointer(p, x, [n])
  end function spill_bucket_view_f64

  function spill_bucket_view_f32(rb, seq, bucket, column, x) result(code)
    type(c_ptr), intent(in) :: rb
    integer(c_int64_t), intent(in) :: seq
    integer(c_int32_t), intent(in) :: bucket, column
    real(c_float), pointer, intent(out) :: x(:)
    integer(c_int32_t) :: code
    type(c_ptr) :: p
    integer(c_int64_t) :: n
    x => null()
    code = spill_bucket_address(rb, seq, bucket, column, p, n)
    if (code == SRB_OK) call c_f_pointer(p, x, [n])
  end function spill_bucket_view_f32

  function spill_bucket_view_i32(rb, seq, bucket, column, x) result(code)
    type(c_ptr), intent(in) :: rb
    integer(c_int64_t), intent(in) :: seq
    integer(c_int32_t), intent(in) :: bucket, column
    integer(c_int32_t), pointer, intent(out) :: x(:)
    integer(c_int32_t) :: code
    type(c_ptr) :: p
    integer(c_int64_t) :: n
    x => null()
    code = spill_bucket_address(rb, seq, bucket, column, p, n)
    if (code == SRB_OK) call c_f_pointer(p, x, [n])
  end function spill_bucket_view_i32

  function spill_bucket_view_i64(rb, seq, bucket, column, x) result(code)
    type(c_ptr), intent(in) :: rb
    integer(c_int64_t), intent(in) :: seq
    integer(c_int32_t), intent(in) :: bucket, column
    integer(c_int64_t), pointer, intent(out) :: x(:)
    integer(c_int32_t) :: code
    type(c_ptr) :: p
    integer(c_int64_t) :: n
    x => null()
    code = spill_bucket_address(rb, seq, bucket, column, p, n)
    if (code == SRB_OK) call c_f_pointer(p, x, [n])
  end function spill_bucket_view_i64

end module sized_readback
