! cout_format.f90: doubles as C++'s `std::cout << x` prints them by default (printf's %g with 6
! significant digits: 0.14, 1.14, 20.14, 123457, 1.23457e+06, 1e-05), for the seed's Fortran port
! (examples/seed_fortran.f90), whose output must match the C++ seed's line for line.
! capi/tests/fortran/compiled.rs compares it with the crate's reference (format_like_cout) on many values.
module cout_format
  use, intrinsic :: iso_c_binding, only: c_double
  use, intrinsic :: ieee_arithmetic, only: ieee_is_nan, ieee_is_finite
  implicit none
  private
  public :: cout_double

  ! Significant digits of %g without a precision.
  integer, parameter :: digits = 6

contains

  !> `x` as `std::cout << x` (%g) prints it: `digits` significant digits, fixed notation when
  !> the decimal exponent X (after rounding) satisfies -4 <= X < 6, else d.ddddde+XX; trailing
  !> zeros and a trailing point removed; "inf", "-inf", "nan" for non-finite values.
  function cout_double(x) result(s)
    real(c_double), intent(in) :: x
    character(len=:), allocatable :: s
    character(len=64) :: buf, mant
    character(len=16) :: fmt
    integer :: e, epos
    if (ieee_is_nan(x)) then
      s = 'nan'
      return
    end if
    if (.not. ieee_is_finite(x)) then
      s = 'inf'
      if (x < 0) s = '-inf'
      return
    end if
    if (.not. (x > 0 .or. x < 0)) then ! zero (NaN is handled above; no == on reals)
      s = '0'
      if (sign(1.0_c_double, x) < 0) s = '-0'
      return
    end if
    ! The exponent after rounding to `digits` significant digits, as %e would print it.
    write(buf, '(ES30.5E4)') x
    buf = adjustl(buf)
    epos = index(buf, 'E')
    read(buf(epos+1:), *) e
    if (e >= -4 .and. e < digits) then
      write(fmt, '(a, i0, a)') '(F40.', digits - 1 - e, ')'
      write(buf, fmt) x
      s = trim_zeros(lead_zero(trim(adjustl(buf))))
    else
      mant = trim_zeros(buf(:epos-1))
      write(buf, '(i2.2)') abs(e) ! at least two exponent digits, as %g
      if (abs(e) >= 100) write(buf, '(i0)') abs(e)
      s = trim(mant) // 'e' // merge('-', '+', e < 0) // trim(buf)
    end if
  end function cout_double

  ! "0.14" from ".14" and "-0.14" from "-.14" (Fortran may leave out the zero).
  function lead_zero(t) result(r)
    character(len=*), intent(in) :: t
    character(len=:), allocatable :: r
    r = t
    if (len(t) == 0) return
    if (t(1:1) == '.') then
      r = '0' // t
    else if (len(t) > 1) then
      if (t(1:2) == '-.') r = '-0' // t(2:)
    end if
  end function lead_zero

  ! Removes trailing zeros after a decimal point, then a trailing point.
  function trim_zeros(t) result(r)
    character(len=*), intent(in) :: t
    character(len=:), allocatable :: r
    integer :: n
    r = trim(t)
    if (index(r, '.') == 0) return
    n = len(r)
    do while (n > 1 .and. r(n:n) == '0')
      n = n - 1
    end do
    if (r(n:n) == '.') n = n - 1
    r = r(:n)
  end function trim_zeros

end module cout_format
