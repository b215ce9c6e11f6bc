! consumer.f90: a Fortran program on the installed package (module source from
! sized_readback_FORTRAN_MODULE_SOURCE, built by `cargo xtask packages` through CMake).
! Exit 0: a readback was created (a GPU). Exit 1: srb_check printed the library's error (no
! driver or GPU: what CI expects). Exit 2: a check that needs no GPU went wrong.
program consumer
  use iso_c_binding
  use sized_readback
  implicit none
  type(c_ptr) :: rb
  integer(c_int32_t) :: code
  code = srb_create(0, 0_c_size_t, 2, 1, [8_c_size_t], 0, rb)
  if (code /= SRB_ERR_INVALID_CONFIG) then
    write (*, '(a, i0)') 'consumer.f90: zero capacity gave ', code
    stop 2
  end if
  call srb_check(srb_create(0, 1024_c_size_t, 2, 1, [8_c_size_t], 0, rb), 'consumer.f90: srb_create')
  write (*, '(a, i0)') 'consumer.f90: a readback of capacity ', srb_capacity(rb)
  call srb_destroy(rb)
end program consumer
