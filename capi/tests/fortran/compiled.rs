//! Compiled checks with gfortran: the sources compile with `STRICT`, the append descriptor has
//! the C layout, the formatter prints as `std::cout`.
use super::interface::{c_append_desc, c_layout, fortran_append_desc};
use super::{gfortran, ok, root, scratch, skip, Outcome, STRICT};
use libtest_mimic::Completion;
use std::ffi::{c_char, c_int, CStr};
use std::io::Write as _;
use std::path::Path;
use std::process::Command;

/// Compiles the module and the formatter into `dir` (objects and .mod files) with `STRICT`.
pub(crate) fn compile_module(fc: &str, dir: &Path) {
    for (src, obj) in [
        ("capi/fortran/sized_readback.f90", "sized_readback.o"),
        ("examples/cout_format.f90", "cout_format.o"),
    ] {
        ok(Command::new(fc)
            .args(STRICT)
            .arg("-J")
            .arg(dir)
            .arg("-c")
            .arg(root().join(src))
            .arg("-o")
            .arg(dir.join(obj)));
    }
}

pub(crate) fn fortran_sources_compile_with_werror() -> Outcome {
    let Some(fc) = gfortran() else {
        return skip("no gfortran (apt-get install gfortran, or set FC)");
    };
    let dir = scratch("compile");
    compile_module(&fc, &dir);
    // The seed's program (its kernel's helpers are only declared: no nvcc needed to compile).
    ok(Command::new(&fc)
        .args(STRICT)
        .arg("-J")
        .arg(&dir)
        .arg("-c")
        .arg(root().join("examples/seed_fortran.f90"))
        .arg("-o")
        .arg(dir.join("seed_fortran.o")));
    Ok(Completion::Completed)
}

pub(crate) fn fortran_append_desc_has_the_c_layout() -> Outcome {
    let Some(fc) = gfortran() else {
        return skip("no gfortran (apt-get install gfortran, or set FC)");
    };
    let dir = scratch("layout");
    compile_module(&fc, &dir);
    let fields = fortran_append_desc();
    // Uses only the module's type: links without the library.
    let mut prog = String::from(
        "program layout\n  use, intrinsic :: iso_c_binding\n  use sized_readback, only: srb_append_desc\n  \
         implicit none\n  type(srb_append_desc), target :: d\n  integer(c_intptr_t) :: base\n  \
         base = transfer(c_loc(d), base)\n  print '(i0)', c_sizeof(d)\n",
    );
    for (name, _, _) in &fields {
        prog += &format!("  print '(i0)', transfer(c_loc(d%{name}), base) - base\n");
    }
    prog += "end program layout\n";
    std::fs::write(dir.join("layout.f90"), prog).unwrap();
    ok(Command::new(&fc)
        .args(["-std=f2018", "-Wall", "-Werror"])
        .arg("-I")
        .arg(&dir)
        .arg(dir.join("layout.f90"))
        .arg("-o")
        .arg(dir.join("layout")));
    let out = ok(&mut Command::new(dir.join("layout")));
    let got: Vec<usize> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    let (offsets, size) = c_layout(&c_append_desc());
    let mut want = vec![size];
    want.extend(offsets);
    assert_eq!(
        got, want,
        "Fortran's srb_append_desc layout (size, offsets) differs from C's"
    );
    Ok(Completion::Completed)
}

extern "C" {
    fn snprintf(buf: *mut c_char, n: usize, fmt: *const c_char, ...) -> c_int;
}

/// C's `%g` of `x`: what `std::cout << x` prints by default.
fn c_g(x: f64) -> String {
    let mut buf = [0 as c_char; 64];
    // SAFETY: a 64-byte buffer, a literal format taking one double.
    unsafe { snprintf(buf.as_mut_ptr(), buf.len(), c"%g".as_ptr(), x) };
    // SAFETY: snprintf NUL-terminates within the buffer.
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

pub(crate) fn fortran_formatter_prints_like_cout() -> Outcome {
    let Some(fc) = gfortran() else {
        return skip("no gfortran (apt-get install gfortran, or set FC)");
    };
    let dir = scratch("format");
    compile_module(&fc, &dir);
    std::fs::write(
        dir.join("fmt.f90"),
        "program fmt\n  use, intrinsic :: iso_c_binding\n  use cout_format\n  implicit none\n  \
         integer(c_int64_t) :: bits\n  integer :: ios\n  do\n    read(*, *, iostat=ios) bits\n    \
         if (ios /= 0) exit\n    write(*, '(a)') cout_double(transfer(bits, 1.0_c_double))\n  \
         end do\nend program fmt\n",
    )
    .unwrap();
    ok(Command::new(&fc)
        .args(STRICT)
        .arg("-I")
        .arg(&dir)
        .arg(dir.join("fmt.f90"))
        .arg(dir.join("cout_format.o"))
        .arg("-o")
        .arg(dir.join("fmt")));
    // The seed's values (computed as its kernels do: 0.14, then += 1 + (2 + k) * i per launch
    // k on that buffer), the edges of %g's two notations and of rounding, and a spread of
    // pseudo-random magnitudes and digit counts.
    let mut values: Vec<f64> = (0..7)
        .flat_map(|i| {
            let i = f64::from(i);
            let first = 0.14 + (1.0 + 2.0 * i);
            [0.14, first, 0.14 + (1.0 + 3.0 * i), first + (1.0 + 4.0 * i)]
        })
        .collect();
    values.extend([
        0.0,
        -0.0,
        5.0,
        -3.5,
        0.1,
        0.0001,
        0.00001,
        0.000099999995,
        9.999995,
        99999.95,
        123456.5,
        999999.4,
        999999.5,
        1234565.0,
        1234567.0,
        1e100,
        -1.5e-300,
        5e-324,
        f64::MAX,
        f64::MIN_POSITIVE,
    ]);
    let mut s: u64 = 0x9e3779b97f4a7c15;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    for _ in 0..3000 {
        let m = (next() % 2_000_000) as f64 / 1_000_000.0 - 1.0;
        let e = (next() % 31) as i32 - 15;
        values.push(m * 10f64.powi(e));
        let digits = (next() % 8) as i32;
        values.push(((next() % 100_000_000) as f64 / 10f64.powi(digits)).round() / 1e3);
    }
    let input: String = values
        .iter()
        .map(|v| format!("{}\n", v.to_bits() as i64))
        .collect();
    let mut child = Command::new(dir.join("fmt"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("running the formatter");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let got = String::from_utf8_lossy(&out.stdout);
    let got: Vec<&str> = got.lines().collect();
    assert_eq!(got.len(), values.len());
    for (v, g) in values.iter().zip(got) {
        assert_eq!(g, c_g(*v), "cout_double({v:e}) (bits {:#x})", v.to_bits());
    }
    Ok(Completion::Completed)
}
