//! The module and the seed's Fortran port linked against the library, built and run.
use super::compiled::compile_module;
use super::{gfortran, in_ci, ok, read, root, run, scratch, skip, Outcome, STRICT};
use libtest_mimic::Completion;
use std::ffi::CStr;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The directory holding libsized_readback.a: SRB_LIBDIR, else `<target>/release`; under
/// SRB_CI=1 built there with cargo when missing.
fn library_dir() -> Option<PathBuf> {
    let has = |d: &Path| d.join("libsized_readback.a").is_file();
    if let Some(d) = std::env::var_os("SRB_LIBDIR") {
        let d = PathBuf::from(d);
        assert!(
            has(&d),
            "SRB_LIBDIR={} holds no libsized_readback.a",
            d.display()
        );
        return Some(d);
    }
    // This test runs as <target>/<profile>/deps/fortran-<hash>.
    let exe = std::env::current_exe().ok()?;
    let target = exe.parent()?.parent()?.parent()?.to_path_buf();
    let release = target.join("release");
    if has(&release) {
        return Some(release);
    }
    if !in_ci() {
        return None;
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    ok(Command::new(cargo)
        .args([
            "build",
            "--release",
            "--locked",
            "-p",
            "sized-readback-clib",
            "--target-dir",
        ])
        .arg(&target)
        .current_dir(root()));
    has(&release).then_some(release)
}

/// Calls through the module that need no GPU: a refused configuration, views of a null handle.
const CALLS: &str = "program calls
  use, intrinsic :: iso_c_binding
  use sized_readback
  implicit none
  type(c_ptr) :: rb
  real(c_double), pointer :: x(:)
  integer(c_int64_t), pointer :: y(:)
  integer(c_int32_t) :: code
  code = srb_create(0, 0_c_size_t, 2, 1, [8_c_size_t], 0, rb)
  print '(i0, 1x, a)', code, srb_last_error_string()
  code = srb_data_view(c_null_ptr, 1_c_int64_t, 0, x)
  print '(i0, 1x, l1, 1x, a)', code, associated(x), srb_last_error_string()
  code = srb_bucket_data_view(c_null_ptr, 1_c_int64_t, 0, 0, y)
  print '(i0, 1x, l1, 1x, a)', code, associated(y), srb_last_error_string()
  print '(i0, 1x, i0)', srb_capacity(c_null_ptr), srb_buckets(c_null_ptr)
  call srb_destroy(c_null_ptr)
  call srb_check(srb_release(c_null_ptr, 1_c_int64_t), 'srb_release')
  print '(a)', 'not reached'
end program calls
";

/// The library's message for its last failed call in this thread.
fn last_error() -> String {
    // SAFETY: a NUL-terminated string owned by this thread.
    unsafe { CStr::from_ptr(sized_readback_capi::srb_last_error()) }
        .to_string_lossy()
        .into_owned()
}

pub(crate) fn fortran_module_calls_the_library() -> Outcome {
    let Some(fc) = gfortran() else {
        return skip("no gfortran (apt-get install gfortran, or set FC)");
    };
    let Some(libdir) = library_dir() else {
        return skip(
            "no libsized_readback.a (set SRB_LIBDIR, or `cargo build --release -p \
             sized-readback-clib`): the module's calls are not run",
        );
    };
    let dir = scratch("calls");
    compile_module(&fc, &dir);
    std::fs::write(dir.join("calls.f90"), CALLS).unwrap();
    ok(Command::new(&fc)
        .args(STRICT)
        .arg("-I")
        .arg(&dir)
        .arg(dir.join("calls.f90"))
        .arg(dir.join("sized_readback.o"))
        .arg(libdir.join("libsized_readback.a"))
        .args(["-lpthread", "-ldl", "-lm", "-lrt", "-o"])
        .arg(dir.join("calls")));
    let out = run(&mut Command::new(dir.join("calls")));
    // The same calls in this process give the messages to expect.
    let sizes = [8usize];
    let mut rb: *mut sized_readback_capi::srb_readback = std::ptr::null_mut();
    // SAFETY: valid pointers, or nulls the API must reject.
    let (create, data, release) = unsafe {
        let c = sized_readback_capi::srb_create(0, 0, 2, 1, sizes.as_ptr(), 0, &mut rb);
        let create = format!("{c} {}", last_error());
        assert!(sized_readback_capi::srb_data(std::ptr::null(), 1, 0).is_null());
        let data = last_error();
        let r = sized_readback_capi::srb_release(std::ptr::null(), 1);
        (
            create,
            data,
            format!("srb_release failed ({r}): {}", last_error()),
        )
    };
    let want = format!("{create}\n-1 F {data}\n-1 F {data}\n0 0\n");
    assert_eq!(String::from_utf8_lossy(&out.stdout), want);
    assert_eq!(out.status.code(), Some(1), "srb_check stops with status 1");
    assert_eq!(String::from_utf8_lossy(&out.stderr).trim_end(), release);
    Ok(Completion::Completed)
}

/// What `srb_create` says in this process for the seed's readback: `None` if it succeeds (a
/// GPU), else the line the seed's srb_check must print.
fn seed_create_error() -> Option<String> {
    let sizes = [8usize];
    let mut rb: *mut sized_readback_capi::srb_readback = std::ptr::null_mut();
    // SAFETY: valid pointers; a handle made here is destroyed here.
    let code =
        unsafe { sized_readback_capi::srb_create(0, 1 << 18, 2, 1, sizes.as_ptr(), 0, &mut rb) };
    if code == sized_readback_capi::SRB_OK {
        // SAFETY: a live handle, destroyed once.
        unsafe { sized_readback_capi::srb_destroy(rb) };
        return None;
    }
    // SAFETY: a NUL-terminated string owned by this thread.
    let msg = unsafe { CStr::from_ptr(sized_readback_capi::srb_last_error()) }
        .to_string_lossy()
        .into_owned();
    Some(format!("srb_create failed ({code}): {msg}"))
}

pub(crate) fn fortran_seed_builds_and_runs() -> Outcome {
    let Some(fc) = gfortran() else {
        return skip(
            "no gfortran (apt-get install gfortran, or set FC): the Fortran seed is not built",
        );
    };
    let nvcc_works = std::env::var("NVCC").is_ok_and(|n| {
        Command::new(n)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if !nvcc_works {
        return skip("NVCC is not set to a working nvcc (eval \"$(cargo xtask dev-env)\"): the Fortran seed is not built");
    }
    let Some(libdir) = library_dir() else {
        return skip(
            "no libsized_readback.a (set SRB_LIBDIR, or `cargo build --release -p sized-readback-clib`): \
             the Fortran seed is not built",
        );
    };
    let dir = scratch("seed");
    let exe = dir.join("seed_fortran");
    ok(Command::new("bash")
        .arg(root().join("scripts/build-seed-fortran.sh"))
        .arg(&libdir)
        .arg(&exe)
        .env("FC", &fc)
        .env("FFLAGS", STRICT.join(" ")));
    let out = run(&mut Command::new(&exe));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    match seed_create_error() {
        Some(line) => {
            assert_eq!(
                out.status.code(),
                Some(1),
                "without a GPU the seed must stop with status 1 ({}); stderr: {stderr}",
                out.status
            );
            assert_eq!(
                stderr.trim_end(),
                line,
                "the seed's error is not the library's"
            );
            assert!(
                stdout.is_empty(),
                "nothing on stdout before the readback is open: {stdout}"
            );
            let _ = writeln!(
                std::io::stderr(),
                "fortran: seed without a GPU: exit 1, \"{line}\" (ok)"
            );
        }
        None => {
            assert!(
                out.status.success(),
                "the seed failed on a GPU ({}): {stderr}",
                out.status
            );
            let lines: String = stdout
                .lines()
                .filter(|l| !l.starts_with("in kernel:"))
                .map(|l| format!("{l}\n"))
                .collect();
            assert_eq!(
                lines,
                read("examples/seed_capi.expected"),
                "the Fortran seed's output"
            );
        }
    }
    Ok(Completion::Completed)
}
