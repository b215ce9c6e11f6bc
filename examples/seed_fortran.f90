! seed_fortran.f90: the seed's program (shared/seed/000_22854d1e0a2c547f.txt) with its host code
! in Fortran on the sized_readback module (capi/fortran/sized_readback.f90), as
! examples/seed_capi.cu is in C++: the seed's `communication` and its waits
! (cudaEventSynchronize(copy_done)) are the C API's srb_enqueue and srb_wait; the kernel, the
! streams, the events, the loop and cpuWork are the seed's. The kernel and the thin CUDA runtime
! helpers stay in CUDA C (examples/seed_fortran_kernel.cu, extern "C"). It prints the seed's
! expected output (examples/seed_capi.expected), plus the kernel's own "in kernel:" lines.
!
! Build: scripts/build-seed-fortran.sh [LIBDIR] [OUTPUT] [--run] (gfortran, nvcc for the kernel,
! LIBDIR/libsized_readback.a). On a machine without a driver or GPU it prints the library's error
! and exits 1 before the seed's code touches the runtime.

! The CUDA side (seed_fortran_kernel.cu): the seed's kernel and the runtime calls it makes.
! Each returns the cudaError_t of its call; handles are type(c_ptr), device addresses srb_devptr.
module seed_cuda
  use, intrinsic :: iso_c_binding, only: c_ptr, c_int, c_size_t, c_char
  use sized_readback, only: srb_devptr
  implicit none
  private
  public :: seed_launch_kernel, seed_malloc_host, seed_free_host, seed_malloc, seed_free
  public :: seed_memcpy_htod, seed_stream_create, seed_stream_destroy, seed_event_create
  public :: seed_event_destroy, seed_event_record, seed_device_synchronize
  public :: seed_cuda_error_string, seed_flush_stdout

  interface
    function seed_launch_kernel(d_array, d_size, k, num_blocks, block_size, stream) &
        result(code) bind(c, name="seed_launch_kernel")
      import :: c_ptr, c_int, srb_devptr
      integer(srb_devptr), value :: d_array, d_size
      integer(c_int), value :: k, num_blocks, block_size
      type(c_ptr), value :: stream
      integer(c_int) :: code
    end function seed_launch_kernel
    function seed_malloc_host(ptr, bytes) result(code) bind(c, name="seed_malloc_host")
      import :: c_ptr, c_size_t, c_int
      type(c_ptr), intent(out) :: ptr
      integer(c_size_t), value :: bytes
      integer(c_int) :: code
    end function seed_malloc_host
    function seed_free_host(ptr) result(code) bind(c, name="seed_free_host")
      import :: c_ptr, c_int
      type(c_ptr), value :: ptr
      integer(c_int) :: code
    end function seed_free_host
    function seed_malloc(ptr, bytes) result(code) bind(c, name="seed_malloc")
      import :: c_size_t, c_int, srb_devptr
      integer(srb_devptr), intent(out) :: ptr
      integer(c_size_t), value :: bytes
      integer(c_int) :: code
    end function seed_malloc
    function seed_free(ptr) result(code) bind(c, name="seed_free")
      import :: c_int, srb_devptr
      integer(srb_devptr), value :: ptr
      integer(c_int) :: code
    end function seed_free
    function seed_memcpy_htod(dst, src, bytes) result(code) bind(c, name="seed_memcpy_htod")
      import :: c_ptr, c_size_t, c_int, srb_devptr
      integer(srb_devptr), value :: dst
      type(c_ptr), value :: src
      integer(c_size_t), value :: bytes
      integer(c_int) :: code
    end function seed_memcpy_htod
    function seed_stream_create(stream) result(code) bind(c, name="seed_stream_create")
      import :: c_ptr, c_int
      type(c_ptr), intent(out) :: stream
      integer(c_int) :: code
    end function seed_stream_create
    function seed_stream_destroy(stream) result(code) bind(c, name="seed_stream_destroy")
      import :: c_ptr, c_int
      type(c_ptr), value :: stream
      integer(c_int) :: code
    end function seed_stream_destroy
    function seed_event_create(event) result(code) bind(c, name="seed_event_create")
      import :: c_ptr, c_int
      type(c_ptr), intent(out) :: event
      integer(c_int) :: code
    end function seed_event_create
    function seed_event_destroy(event) result(code) bind(c, name="seed_event_destroy")
      import :: c_ptr, c_int
      type(c_ptr), value :: event
      integer(c_int) :: code
    end function seed_event_destroy
    function seed_event_record(event, stream) result(code) bind(c, name="seed_event_record")
      import :: c_ptr, c_int
      type(c_ptr), value :: event, stream
      integer(c_int) :: code
    end function seed_event_record
    function seed_device_synchronize() result(code) bind(c, name="seed_device_synchronize")
      import :: c_int
      integer(c_int) :: code
    end function seed_device_synchronize
    subroutine seed_cuda_error_string(code, buf, len) bind(c, name="seed_cuda_error_string")
      import :: c_int, c_char, c_size_t
      integer(c_int), value :: code
      character(kind=c_char), intent(out) :: buf(*)
      integer(c_size_t), value :: len
    end subroutine seed_cuda_error_string
    subroutine seed_flush_stdout() bind(c, name="seed_flush_stdout")
    end subroutine seed_flush_stdout
  end interface
end module seed_cuda

program seed_fortran
  use, intrinsic :: iso_c_binding, only: c_ptr, c_null_ptr, c_null_char, c_f_pointer, c_int, &
    c_int64_t, c_size_t, c_double, c_char
  use, intrinsic :: iso_fortran_env, only: output_unit, error_unit
  use sized_readback
  use seed_cuda
  use cout_format, only: cout_double
  implicit none

  ! The seed's bufferSize: each d_array half holds this many doubles, so a slot holds as many.
  integer(c_int), parameter :: bufferSize = 2**18
  integer(c_int), parameter :: blockSize = 256
  ! (bufferSize + blockSize - 1) / blockSize, written so that gfortran sees no truncation.
  integer(c_int), parameter :: numBlocks = &
    bufferSize / blockSize + min(1, mod(bufferSize, blockSize))
  integer(c_int), parameter :: numCycles = 3
  integer(c_size_t), parameter :: kCapacity = int(bufferSize, c_size_t)
  integer(c_size_t), parameter :: sizeof_int = 4, sizeof_double = 8

  ! The readback in flight, and which h_size entry the seed's copy would have written.
  type(c_ptr) :: rb = c_null_ptr
  integer(c_int64_t) :: pending_seq = 0
  integer :: pending_slot = 0

  type(c_ptr) :: h_size_c, h_array_c
  integer(c_int), pointer :: h_size_flat(:), h_size(:)
  real(c_double), pointer :: h_array_flat(:), h_array(:)
  integer(srb_devptr) :: d_size, d_array
  type(c_ptr) :: compute_stream(0:1), copy_stream
  type(c_ptr) :: compute_done(0:1), copy_done
  integer(c_int) :: i, k

  call open_readback() ! added

  call cuda_check(seed_malloc_host(h_size_c, 2 * sizeof_int), "cudaMallocHost")
  call c_f_pointer(h_size_c, h_size_flat, [2])
  h_size(0:1) => h_size_flat
  h_size(0) = 2
  h_size(1) = 7

  call cuda_check(seed_malloc(d_size, 2 * sizeof_int), "cudaMalloc")
  call cuda_check(seed_memcpy_htod(d_size, h_size_c, 2 * sizeof_int), "cudaMemcpy")

  call cuda_check(seed_malloc_host(h_array_c, kCapacity * sizeof_double), "cudaMallocHost")
  call c_f_pointer(h_array_c, h_array_flat, [bufferSize])
  h_array(0:bufferSize - 1) => h_array_flat
  h_array = 0.14_c_double

  call cuda_check(seed_malloc(d_array, 2 * kCapacity * sizeof_double), "cudaMalloc")
  call cuda_check(seed_memcpy_htod(d_array, h_array_c, kCapacity * sizeof_double), "cudaMemcpy")
  call cuda_check(seed_memcpy_htod(array_half(1), h_array_c, kCapacity * sizeof_double), &
    "cudaMemcpy")

  do i = 0, 1
    call cuda_check(seed_stream_create(compute_stream(i)), "cudaStreamCreateWithFlags")
  end do
  call cuda_check(seed_stream_create(copy_stream), "cudaStreamCreateWithFlags")
  do i = 0, 1
    call cuda_check(seed_event_create(compute_done(i)), "cudaEventCreateWithFlags")
  end do
  call cuda_check(seed_event_create(copy_done), "cudaEventCreateWithFlags")
  call cuda_check(seed_device_synchronize(), "cudaDeviceSynchronize")

  ! Launch the first kernel outside the DO loop
  call launch(0)

  do k = 1, numCycles - 1
    ! Communicate D-->H from the previous kernel launch, indexed k-1
    call communication(mod(k - 1, 2), size_entry(mod(k - 1, 2)), array_half(mod(k - 1, 2)), &
      copy_stream, compute_done(mod(k - 1, 2)))

    ! Goal is to have this kernel start "asap" (even before the previous kernel has finished,
    ! if the device has the capacity)
    call launch(k)

    ! Now do stuff on the CPU with h_array received from the (k-1)-th kernel launch
    call wait_for_communication() ! was: cudaEventSynchronize(copy_done)
    call cpu_work(k - 1)
  end do

  ! Get results from the last cycle
  k = numCycles - 1
  call communication(mod(k, 2), size_entry(mod(k, 2)), array_half(mod(k, 2)), copy_stream, &
    compute_done(mod(k, 2)))

  ! Now do work on the CPU with h_array received from the last kernel launch
  call wait_for_communication() ! was: cudaEventSynchronize(copy_done)
  call cpu_work(k)

  ! clean
  call srb_destroy(rb) ! added: the readback goes before the streams it used
  do i = 0, 1
    call cuda_check(seed_event_destroy(compute_done(i)), "cudaEventDestroy")
    call cuda_check(seed_stream_destroy(compute_stream(i)), "cudaStreamDestroy")
  end do
  call cuda_check(seed_event_destroy(copy_done), "cudaEventDestroy")
  call cuda_check(seed_stream_destroy(copy_stream), "cudaStreamDestroy")
  call cuda_check(seed_free(d_array), "cudaFree")
  call cuda_check(seed_free(d_size), "cudaFree")
  call cuda_check(seed_free_host(h_array_c), "cudaFreeHost")
  call cuda_check(seed_free_host(h_size_c), "cudaFreeHost")

contains

  ! &d_size[b] and &d_array[b*bufferSize], as device addresses.
  function size_entry(b) result(p)
    integer(c_int), intent(in) :: b
    integer(srb_devptr) :: p
    p = d_size + int(b, srb_devptr) * int(sizeof_int, srb_devptr)
  end function size_entry

  function array_half(b) result(p)
    integer(c_int), intent(in) :: b
    integer(srb_devptr) :: p
    p = d_array + int(b, srb_devptr) * int(kCapacity * sizeof_double, srb_devptr)
  end function array_half

  ! kernel<<<numBlocks, blockSize, 0, compute_stream[k%2]>>>(&d_array[(k%2)*bufferSize],
  ! &d_size[k%2], k); cudaEventRecord(compute_done[k%2], compute_stream[k%2]);
  subroutine launch(kk)
    integer(c_int), intent(in) :: kk
    integer(c_int) :: b
    b = mod(kk, 2)
    call cuda_check(seed_launch_kernel(array_half(b), size_entry(b), kk, numBlocks, blockSize, &
      compute_stream(b)), "kernel launch")
    call cuda_check(seed_event_record(compute_done(b), compute_stream(b)), "cudaEventRecord")
  end subroutine launch

  ! ---- changed: communication and the wait -----------------------------------------------

  ! One small kernel on copy_stream, after compute_done, reads *d_size on the device and copies
  ! that many doubles into pinned memory: no host read of the size, no host synchronization.
  ! (`slot` says which h_size entry receives the count: the seed passed &h_size[slot].)
  ! The seed's copy_done is not passed: the readback's own completion takes its place.
  subroutine communication(slot, d_size_b, d_array_b, copy_stream_, compute_done_)
    integer(c_int), intent(in) :: slot
    integer(srb_devptr), intent(in) :: d_size_b, d_array_b
    type(c_ptr), intent(in) :: copy_stream_, compute_done_
    call srb_check(srb_enqueue(rb, copy_stream_, compute_done_, [d_array_b], [kCapacity], &
      d_size_b, SRB_COUNT_I32, pending_seq), "srb_enqueue")
    pending_slot = slot
  end subroutine communication

  ! Added at the top of the program: one column of doubles, two slots, mapped pinned memory,
  ! device 0 (the seed's). Without a driver or GPU this prints the library's error and stops
  ! with status 1 before the seed's code touches the runtime.
  subroutine open_readback()
    call srb_check(srb_create(0, kCapacity, 2, 1, [sizeof_double], 0, rb), "srb_create")
  end subroutine open_readback

  ! Replaces cudaEventSynchronize(copy_done): waits for the readback, then puts the count and the
  ! data where the seed's two cudaMemcpyAsync calls would have put them. The view x points into
  ! the readback's slot: it is used before srb_release, never after.
  subroutine wait_for_communication()
    integer(c_int64_t) :: n
    real(c_double), pointer :: x(:)
    call srb_check(srb_wait(rb, pending_seq, -1_c_int64_t, n), "srb_wait")
    call srb_check(srb_data_view(rb, pending_seq, 0, x), "srb_data_view")
    h_array(0:n - 1) = x
    h_size(pending_slot) = int(n, c_int)
    call srb_check(srb_release(rb, pending_seq), "srb_release")
  end subroutine wait_for_communication

  ! ---- the seed's code ---------------------------------------------------------------------

  subroutine cpu_work(kk)
    integer(c_int), intent(in) :: kk
    integer :: j
    ! here we check the values in h_array
    call seed_flush_stdout() ! the kernel's printf lines so far go first
    write(output_unit, '(a, i0)') 'From kernel launch ', kk
    flush(output_unit)
    do j = 0, 6
      write(output_unit, '(a, i0, a, a)') 'h_array[', j, '] = ', cout_double(h_array(j))
      flush(output_unit)
    end do
    write(output_unit, '(a, i0, a, i0)') 'h_size[', mod(kk, 2), '] = ', h_size(mod(kk, 2))
    flush(output_unit)
  end subroutine cpu_work

  ! The seed checks no CUDA call; this port stops on the first that fails, with its name.
  subroutine cuda_check(code, what)
    integer(c_int), intent(in) :: code
    character(len=*), intent(in) :: what
    character(kind=c_char, len=256) :: msg
    integer :: nul
    if (code == 0) return
    call seed_cuda_error_string(code, msg, len(msg, c_size_t))
    nul = index(msg, c_null_char)
    if (nul > 0) msg(nul:) = ''
    write(error_unit, '(a, " failed (", i0, "): ", a)') what, code, trim(msg)
    stop 1, quiet=.true.
  end subroutine cuda_check

end program seed_fortran
