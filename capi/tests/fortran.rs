//! The Fortran interface (`capi/fortran/sized_readback.f90`) against the C header, and the
//! seed's Fortran port (`examples/seed_fortran.f90`). Runs without a GPU (CI).
//!
//! - Always: every `srb_*` function the header declares has a `bind(c, name="srb_...")`
//!   interface under its C name, public, and no interface binds a name the header lacks; every
//!   `#define SRB_*` is a parameter of the same name and value; the module's `srb_append_desc`
//!   has `sized_readback/slot.h`'s fields, in order, of the same sizes.
//! - With gfortran (`FC`, default `gfortran`): the module, the formatter and the seed's program
//!   compile with `-std=f2018 -Wall -Wextra -Werror -pedantic`; the module's `srb_append_desc`
//!   has the C layout (sizes and offsets, run); the formatter prints as C's `%g` (so as
//!   `std::cout`) on a few thousand values.
//! - With gfortran, nvcc (`NVCC`, which `cargo xtask ci` sets from `cargo xtask dev-env`) and
//!   the static library (`SRB_LIBDIR`, else `<target>/release/`):
//!   `scripts/build-seed-fortran.sh` builds the seed,
//!   which without a driver or GPU must exit 1 with the library's own message (the one
//!   `srb_create` gives in this process), and with one print the seed's expected output.
//!
//! A missing tool skips that test, reported as ignored with the reason, except under
//! `SRB_CI=1` (CI installs them), where it fails; under `SRB_CI=1` a missing library is built with cargo (the release
//! build `cargo xtask ci` makes next anyway).
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{c_char, c_int, CStr};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    test_support::source_root::source_root()
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}

fn in_ci() -> bool {
    std::env::var("SRB_CI").is_ok_and(|v| v == "1")
}

/// What a test ends with: completed, or ignored at run time with the reason (a tool or the
/// library is missing here); a failed assertion panics, which the harness reports as a failure.
type Outcome = Result<Completion, Failed>;

/// Skips the rest of a test, reported as *ignored* with the reason (never as passed), or fails
/// it under SRB_CI=1, where every tool is installed.
fn skip(why: &str) -> Outcome {
    if in_ci() {
        return Err(Failed::from(format!("SRB_CI=1 and {why}")));
    }
    Ok(Completion::ignored_with(format!("skipped: {why}")))
}

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fortran-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("creating the scratch directory");
    d
}

fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"))
}

fn ok(cmd: &mut Command) -> Output {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `FC` (default gfortran) if it runs.
fn gfortran() -> Option<String> {
    let fc = std::env::var("FC").unwrap_or_else(|_| "gfortran".into());
    let works = Command::new(&fc)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    works.then_some(fc)
}

const STRICT: [&str; 5] = ["-std=f2018", "-Wall", "-Wextra", "-Werror", "-pedantic"];

// ---- static checks: the module against the C header --------------------------------------

/// The functions the C header declares (`srb_name(` outside comments and preprocessor lines).
fn header_functions() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in read("capi/include/sized_readback.h").lines() {
        let t = line.trim_start();
        if t.starts_with("//") || t.starts_with('#') || t.starts_with('*') || t.starts_with("/*") {
            continue;
        }
        let mut rest = t;
        while let Some(i) = rest.find("srb_") {
            let tail = &rest[i..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len());
            if tail[end..].starts_with('(') {
                names.insert(tail[..end].to_string());
            }
            rest = &tail[end..];
        }
    }
    names
}

/// `(name, value)` pairs whose value is a number or the name of another pair: each name with
/// its number.
fn resolve(pairs: &[(String, String)]) -> BTreeMap<String, i64> {
    let mut out: BTreeMap<String, i64> = pairs
        .iter()
        .filter_map(|(n, v)| Some((n.clone(), v.parse().ok()?)))
        .collect();
    for (n, v) in pairs {
        if let Some(&x) = out.get(v) {
            out.insert(n.clone(), x);
        }
    }
    out
}

/// The constants C sees: the header's `#define SRB_NAME value` constants (negative ones are in
/// parentheses; an alias names another constant), and the count kinds, `enum srb_count_kind`
/// of `sized_readback/slot.h`, which the header includes.
fn header_constants() -> BTreeMap<String, i64> {
    let mut pairs: Vec<(String, String)> = read("capi/include/sized_readback.h")
        .lines()
        .filter_map(|l| l.strip_prefix("#define SRB_"))
        .filter_map(|r| {
            let (name, value) = r.split_once(' ')?;
            let v = value.trim().trim_start_matches('(').trim_end_matches(')');
            Some((format!("SRB_{name}"), v.to_string()))
        })
        .collect();
    let slot = read("include/sized_readback/slot.h");
    let kinds = slot
        .split("enum srb_count_kind {")
        .nth(1)
        .and_then(|r| r.split("};").next())
        .expect("slot.h declares enum srb_count_kind");
    for l in kinds.lines() {
        if let Some((name, value)) = l.trim().trim_end_matches(',').split_once(" = ") {
            pairs.push((name.to_string(), value.to_string()));
        }
    }
    resolve(&pairs)
}

/// The module's source, lowercased, with `!` comments removed (no string in it holds a `!`).
fn module_code() -> String {
    read("capi/fortran/sized_readback.f90")
        .lines()
        .map(|l| l.split('!').next().unwrap_or("").to_ascii_lowercase())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The binding labels of the module's bind(c) interfaces.
fn module_bindings(code: &str) -> BTreeSet<String> {
    let squeezed: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    squeezed
        .split("bind(c,name=")
        .skip(1)
        .filter_map(|r| {
            let q = r.chars().next()?;
            let r = &r[1..];
            Some(r[..r.find(q)?].to_string())
        })
        .collect()
}

/// Names made public by `public :: a, b` statements and `, public ::` declarations.
fn module_publics(code: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for l in code.lines() {
        let t = l.trim();
        if let Some(list) = t.strip_prefix("public ::") {
            names.extend(list.split(',').map(|n| n.trim().to_string()));
        } else if let Some((decl, rest)) = t.split_once("::") {
            if decl.contains(", public") {
                let name = rest.split(['=', '(']).next().unwrap_or("").trim();
                names.insert(name.to_string());
            }
        }
    }
    names
}

fn fortran_module_binds_every_c_function() -> Outcome {
    let functions = header_functions();
    assert!(
        functions.len() >= 23
            && functions.contains("srb_create")
            && functions.contains("srb_last_error"),
        "the header parse found only {functions:?}"
    );
    let code = module_code();
    let bound = module_bindings(&code);
    let missing: Vec<_> = functions.difference(&bound).collect();
    assert!(
        missing.is_empty(),
        "capi/fortran/sized_readback.f90 has no bind(c, name=\"...\") interface for {missing:?}"
    );
    let stale: Vec<_> = bound
        .iter()
        .filter(|b| b.starts_with("srb_") && !functions.contains(*b))
        .collect();
    assert!(
        stale.is_empty(),
        "the module binds {stale:?}, which the header does not declare"
    );
    // Under the C name, and public.
    let publics = module_publics(&code);
    for f in &functions {
        assert!(
            code.contains(&format!("function {f}(")) || code.contains(&format!("subroutine {f}(")),
            "{f}'s interface is not named {f}"
        );
        assert!(publics.contains(f), "{f} is not public in the module");
    }
    Ok(Completion::Completed)
}

fn fortran_module_has_every_c_constant() -> Outcome {
    let constants = header_constants();
    assert!(
        constants.len() >= 30,
        "the header parse found only {constants:?}"
    );
    let code = module_code();
    let mut pairs = Vec::new();
    for l in code.lines() {
        let Some((decl, rest)) = l.split_once("::") else {
            continue;
        };
        if !decl.contains("parameter") {
            continue;
        }
        if let Some((name, value)) = rest.split_once('=') {
            let (name, value) = (
                name.trim().to_ascii_uppercase(),
                value.trim().to_ascii_uppercase(),
            );
            // A number, or another parameter's name (srb_devptr, a kind parameter, is neither).
            let constant = value.parse::<i64>().is_ok() || value.starts_with("SRB_");
            if name.starts_with("SRB_") && constant {
                assert!(
                    decl.contains("integer(c_int)") && decl.contains("public"),
                    "{name} is not an integer(c_int), parameter, public: {l}"
                );
                pairs.push((name, value));
            }
        }
    }
    let found = resolve(&pairs);
    assert_eq!(
        found.len(),
        pairs.len(),
        "a parameter of the module has no value: {pairs:?}"
    );
    assert_eq!(
        found, constants,
        "the module's SRB_ parameters (left) differ from the header's constants (right)"
    );
    Ok(Completion::Completed)
}

/// `srb_append_desc`'s fields in `sized_readback/slot.h`: (name, bytes per element, elements).
fn c_append_desc() -> Vec<(String, usize, usize)> {
    let slot = read("include/sized_readback/slot.h");
    let body = slot
        .split("typedef struct srb_append_desc {")
        .nth(1)
        .and_then(|r| r.split("} srb_append_desc;").next())
        .expect("slot.h declares srb_append_desc");
    let mut fields = Vec::new();
    for l in body.lines() {
        let t = l.trim();
        let size = if t.starts_with("uint64_t ") {
            8
        } else if t.starts_with("uint32_t ") {
            4
        } else {
            assert!(
                t.is_empty() || t.starts_with("/*") || t.starts_with('*') || !t.ends_with(';'),
                "an srb_append_desc field of a type this test does not know: {t}"
            );
            continue;
        };
        let decl = t[9..].trim_end_matches(';').trim();
        let (name, n) = match decl.split_once('[') {
            Some((name, dim)) => {
                let dim = dim.trim_end_matches(']');
                let n = if dim == "SRB_MAX_COLUMNS" {
                    8
                } else {
                    dim.parse().expect("a dimension")
                };
                (name, n)
            }
            None => (decl, 1),
        };
        fields.push((name.to_string(), size, n));
    }
    fields
}

/// The module's `type, bind(c) :: srb_append_desc` fields, as `c_append_desc` gives C's.
fn fortran_append_desc() -> Vec<(String, usize, usize)> {
    let code = module_code();
    let body = code
        .split(":: srb_append_desc\n")
        .nth(1)
        .and_then(|r| r.split("end type srb_append_desc").next())
        .expect("the module declares type srb_append_desc");
    body.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (kind, decl) = l.split_once("::").expect("a component declaration");
            let size = match kind.trim() {
                "integer(c_int64_t)" => 8,
                "integer(c_int32_t)" => 4,
                k => panic!("srb_append_desc component of kind {k}"),
            };
            let decl = decl.trim();
            let (name, n) = match decl.split_once('(') {
                Some((name, dim)) => {
                    let dim = dim.trim_end_matches(')');
                    let n = if dim == "srb_max_columns" {
                        8
                    } else {
                        dim.parse().expect("a dimension")
                    };
                    (name, n)
                }
                None => (decl, 1),
            };
            (name.to_string(), size, n)
        })
        .collect()
}

/// C's natural layout of the fields: each field's offset, and the size.
fn c_layout(fields: &[(String, usize, usize)]) -> (Vec<usize>, usize) {
    let mut off: usize = 0;
    let mut offsets = Vec::new();
    let mut align = 1;
    for (_, size, n) in fields {
        off = off.next_multiple_of(*size);
        offsets.push(off);
        off += size * n;
        align = align.max(*size);
    }
    (offsets, off.next_multiple_of(align))
}

fn fortran_append_desc_matches_slot_h() -> Outcome {
    let c = c_append_desc();
    let f = fortran_append_desc();
    assert_eq!(
        f, c,
        "the module's srb_append_desc (left) differs from slot.h's (right)"
    );
    let (_, size) = c_layout(&c);
    assert_eq!(
        size,
        std::mem::size_of::<srb::AppendDesc>(),
        "slot.h's srb_append_desc as this test lays it out differs from the library's"
    );
    Ok(Completion::Completed)
}

// ---- compiled checks ----------------------------------------------------------------------

/// Compiles the module and the formatter into `dir` (objects and .mod files) with `STRICT`.
fn compile_module(fc: &str, dir: &Path) {
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

fn fortran_sources_compile_with_werror() -> Outcome {
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

fn fortran_append_desc_has_the_c_layout() -> Outcome {
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

fn fortran_formatter_prints_like_cout() -> Outcome {
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

// ---- the seed's Fortran port, built and run -------------------------------------------------

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

fn fortran_module_calls_the_library() -> Outcome {
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

fn fortran_seed_builds_and_runs() -> Outcome {
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

/// Each test under its function's name (libtest-mimic, so that a skip shows as ignored).
macro_rules! trials {
    ($($name:ident),* $(,)?) => {
        vec![$(Trial::ignorable_test(stringify!($name), $name)),*]
    };
}

fn main() {
    let args = Arguments::from_args();
    let trials = trials![
        fortran_module_binds_every_c_function,
        fortran_module_has_every_c_constant,
        fortran_append_desc_matches_slot_h,
        fortran_sources_compile_with_werror,
        fortran_append_desc_has_the_c_layout,
        fortran_formatter_prints_like_cout,
        fortran_module_calls_the_library,
        fortran_seed_builds_and_runs,
    ];
    libtest_mimic::run(&args, trials).exit();
}
