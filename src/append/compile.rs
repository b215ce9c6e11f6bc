//! A kernel that includes the append header, compiled at run time by NVRTC straight to
//! machine code for one device (the `nvrtc` feature).
//!
//! Why machine code and not PTX: the driver loads a cubin without JIT-compiling anything, so
//! the NVRTC found at run time may be newer than the driver (PTX from a newer NVRTC is the usual
//! `CUDA_ERROR_UNSUPPORTED_PTX_VERSION`). Why the header is handed to NVRTC as a named header
//! and not pasted in front of the source: the kernel's source stays the one nvcc compiles with
//! `-I` [`super::INCLUDE_DIR`], and the compile log's line numbers are the source's own.
use cudarc::driver::CudaContext;
use cudarc::nvrtc::result::NvrtcError;
use cudarc::nvrtc::{result, sys, Ptx};
use std::ffi::{c_char, CString};

/// The name NVRTC gives the kernel's source in its log (`kernel.cu(12): error: ...`).
const PROGRAM_NAME: &str = "kernel.cu";

/// The shipped `append.cuh` and `slot.h`, by the names nvcc finds under
/// [`super::INCLUDE_DIR`]. NVRTC matches an include's name exactly, without the includer's
/// folder, so `append.cuh`'s `#include "slot.h"` is renamed in place (the same line, so the log's
/// line numbers stay the header's own) to the full name.
fn headers() -> [(&'static str, String); 2] {
    const APPEND: &str = include_str!("../../include/sized_readback/append.cuh");
    const SLOT: &str = include_str!("../../include/sized_readback/slot.h");
    [
        (
            "sized_readback/append.cuh",
            APPEND.replace("#include \"slot.h\"", "#include \"sized_readback/slot.h\""),
        ),
        ("sized_readback/slot.h", SLOT.to_owned()),
    ]
}

/// The oldest NVRTC with `nvrtcGetCUBIN` (11.1) and `nvrtcGetSupportedArchs` (11.2).
const OLDEST_NVRTC: (i32, i32) = (11, 2);

/// The oldest compute capability the append header compiles for (as the library's kernels).
const OLDEST_CAPABILITY: (u32, u32) = (7, 0);

/// Why [`compile`], [`compile_for`] or [`cubin_for`] gave no module (the `nvrtc` feature).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompileError {
    /// No NVRTC library could be loaded (`libnvrtc.so`, or a versioned name such as
    /// `libnvrtc.so.12`, on the dynamic loader's path).
    #[error(
        "NVRTC could not be loaded: put the folder of a libnvrtc.so (a CUDA toolkit's lib64) or \
         a libnvrtc.so.12 (the nvidia-cuda-nvrtc-cu12 wheel) on LD_LIBRARY_PATH"
    )]
    NvrtcNotFound,
    /// The NVRTC found is older than 11.2 (no `nvrtcGetCUBIN` before 11.1, no
    /// `nvrtcGetSupportedArchs` before 11.2).
    #[error("NVRTC {major}.{minor} is too old: this needs NVRTC 11.2 or newer")]
    NvrtcTooOld {
        /// Its version.
        major: i32,
        /// Its version.
        minor: i32,
    },
    /// The append header needs compute capability 7.0 or newer.
    #[error("compute capability {major}.{minor} is below the append header's 7.0")]
    UnsupportedCapability {
        /// The compute capability asked for.
        major: u32,
        /// The compute capability asked for.
        minor: u32,
    },
    /// The NVRTC found does not know the device's architecture (a device newer than NVRTC,
    /// or one a newer NVRTC dropped); `supported` lists the `sm_XY` it knows, as `XY`.
    #[error("NVRTC {nvrtc} does not know {arch}; it knows sm_{supported:?}")]
    UnknownArchitecture {
        /// The architecture asked for, `sm_XY`.
        arch: String,
        /// The NVRTC's version, `major.minor`.
        nvrtc: String,
        /// The architectures it knows, as `XY` (`nvrtcGetSupportedArchs`).
        supported: Vec<u32>,
    },
    /// The source or an option holds a NUL byte, which NVRTC's C strings cannot carry.
    #[error("the {what} holds a NUL byte at byte {position}")]
    Nul {
        /// `"source"` or `"option N"` (counted from 0).
        what: String,
        /// The byte offset of the first NUL.
        position: usize,
    },
    /// The device's compute capability could not be read.
    #[error("reading the device's compute capability: {0}")]
    Device(#[source] crate::Error),
    /// NVRTC compiled nothing: its log says why (an architecture this NVRTC does not know,
    /// or an unknown option, gives `NVRTC_ERROR_INVALID_OPTION` and says so in the log).
    #[error("NVRTC could not compile the kernel for {arch} ({source}):\n{log}")]
    Compile {
        /// The `--gpu-architecture` compiled for.
        arch: String,
        /// NVRTC's result.
        #[source]
        source: NvrtcError,
        /// The program's log.
        log: String,
    },
    /// NVRTC compiled, but to no machine code: the options asked for PTX (`compute_XY`) or
    /// LTO IR (`-dlto`), which this function does not return.
    #[error("NVRTC gave no machine code for {arch} (an option asked for PTX or LTO IR)")]
    NoMachineCode {
        /// The `--gpu-architecture` compiled for.
        arch: String,
    },
    /// Another NVRTC call failed.
    #[error("{call} failed: {source}")]
    Nvrtc {
        /// The NVRTC function.
        call: &'static str,
        /// NVRTC's result.
        #[source]
        source: NvrtcError,
    },
}

/// Compiles `source`, CUDA C++ that includes `<sized_readback/append.cuh>`, with NVRTC to
/// machine code for `ctx`'s device, ready for `ctx.load_module`. Needs the crate's `nvrtc`
/// feature, and an NVRTC (11.2 or newer) that the dynamic loader finds at run time.
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let ctx = sized_readback::device::open(0)?;
/// let source = r#"
/// #include <sized_readback/append.cuh>
/// extern "C" __global__ void odd(srb_append_desc d, const unsigned* x, unsigned n) {
///     using Append = srb::BlockAppend<128, unsigned>;
///     __shared__ Append::TempStorage tmp;
///     Append app(tmp, d);
///     for (unsigned b = blockIdx.x * 128; b < n; b += gridDim.x * 128) {
///         unsigned i = b + threadIdx.x;
///         bool keep = i < n && (x[i] & 1);
///         app.append(keep, keep ? x[i] : 0u);
///     }
///     app.finish();
/// }
/// "#;
/// let module = ctx.load_module(sized_readback::append::compile(&ctx, source, &[])?)?;
/// let odd = module.load_function("odd")?;
/// # let _ = odd; Ok(()) }
/// ```
///
/// The options NVRTC gets: `--gpu-architecture=sm_XY` from the device's compute capability
/// and `-std=c++17`, each unless `options` give their own (an `sm_90a`, say), then `options`.
/// The module is a cubin (cudarc calls every module image [`Ptx`]): it loads on devices of the
/// same major architecture and the same or a higher minor one, on a driver of NVRTC's CUDA
/// major version or newer. NVRTC runs inside the calling process.
pub fn compile(ctx: &CudaContext, source: &str, options: &[&str]) -> Result<Ptx, CompileError> {
    let capability = crate::device::compute_capability(ctx).map_err(CompileError::Device)?;
    compile_for(capability, source, options)
}

/// [`compile`] for the compute capability `(major, minor)`, with no device: a module built
/// ahead of time, or for a device other than the one at hand. An NVRTC older than the
/// architecture does not know it (`nvrtcGetSupportedArchs` lists what it knows). Needs the
/// `nvrtc` feature.
pub fn compile_for(
    capability: (u32, u32),
    source: &str,
    options: &[&str],
) -> Result<Ptx, CompileError> {
    cubin_for(capability, source, options).map(Ptx::from_binary)
}

/// The machine code [`compile_for`] wraps, as bytes: for a cache on disk
/// (`Ptx::from_binary(bytes)` loads it again). Needs the `nvrtc` feature.
pub fn cubin_for(
    (major, minor): (u32, u32),
    source: &str,
    options: &[&str],
) -> Result<Vec<u8>, CompileError> {
    if (major, minor) < OLDEST_CAPABILITY {
        return Err(CompileError::UnsupportedCapability { major, minor });
    }
    let src = c_string(source, || "source".to_owned())?;
    for (i, o) in options.iter().enumerate() {
        c_string(o, || format!("option {i}"))?; // cudarc's compile_program panics on a NUL
    }
    let given = |names: &[&str]| {
        options
            .iter()
            .find(|o| names.iter().any(|n| o.starts_with(n)))
            .copied()
    };
    let user_arch = given(&["--gpu-architecture", "-arch"]);
    let arch = match user_arch {
        Some(o) => o.rsplit(['=', ' ']).next().unwrap_or(o).trim().to_owned(),
        None => format!("sm_{major}{minor}"),
    };
    let mut opts: Vec<String> = Vec::with_capacity(options.len() + 2);
    if user_arch.is_none() {
        opts.push(format!("--gpu-architecture={arch}"));
    }
    if given(&["--std", "-std"]).is_none() {
        opts.push("-std=c++17".to_owned());
    }
    opts.extend(options.iter().map(|o| (*o).to_owned()));
    if !nvrtc_present() {
        return Err(CompileError::NvrtcNotFound);
    }
    let (vmajor, vminor) = nvrtc_version()?;
    if (vmajor, vminor) < OLDEST_NVRTC {
        return Err(CompileError::NvrtcTooOld {
            major: vmajor,
            minor: vminor,
        });
    }
    if user_arch.is_none() {
        let supported = supported_archs()?;
        if !supported.contains(&(major * 10 + minor)) {
            return Err(CompileError::UnknownArchitecture {
                arch,
                nvrtc: format!("{vmajor}.{vminor}"),
                supported,
            });
        }
    }
    let prog = Program::new(&src)?;
    prog.compile(&opts, &arch)?;
    prog.cubin(&arch)
}

/// Whether an NVRTC library loads: cudarc panics at its first call without one.
fn nvrtc_present() -> bool {
    // SAFETY: only tries to dlopen the library's names; no NVRTC state is touched.
    unsafe { sys::is_culib_present() }
}

/// The loaded NVRTC's version (call [`nvrtc_present`] first).
fn nvrtc_version() -> Result<(i32, i32), CompileError> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: NVRTC is loaded (the caller checked) and nvrtcVersion, in every NVRTC, writes two
    // ints through valid pointers.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|source| CompileError::Nvrtc {
            call: "nvrtcVersion",
            source,
        })?;
    Ok((major, minor))
}

/// The architectures the loaded NVRTC knows, as `XY` of `sm_XY` (NVRTC 11.2 or newer).
fn supported_archs() -> Result<Vec<u32>, CompileError> {
    let nvrtc = |call| move |source| CompileError::Nvrtc { call, source };
    let mut n: std::ffi::c_int = 0;
    // SAFETY: NVRTC >= 11.2 is loaded (the caller checked); one int written through a valid
    // pointer.
    unsafe { sys::nvrtcGetNumSupportedArchs(&mut n) }
        .result()
        .map_err(nvrtc("nvrtcGetNumSupportedArchs"))?;
    let mut archs: Vec<std::ffi::c_int> = vec![0; n.max(0) as usize];
    // SAFETY: as above; `archs` has the `n` ints NVRTC writes.
    unsafe { sys::nvrtcGetSupportedArchs(archs.as_mut_ptr()) }
        .result()
        .map_err(nvrtc("nvrtcGetSupportedArchs"))?;
    Ok(archs.into_iter().map(|a| a.max(0) as u32).collect())
}

/// `s` as a C string, or the error naming `what()` and its first NUL.
fn c_string(s: &str, what: impl FnOnce() -> String) -> Result<CString, CompileError> {
    CString::new(s).map_err(|e| CompileError::Nul {
        what: what(),
        position: e.nul_position(),
    })
}

/// An NVRTC program, destroyed on drop (also when a panic unwinds past it).
struct Program(sys::nvrtcProgram);

impl Program {
    /// A program of `src` named [`PROGRAM_NAME`], with [`headers`] includable. NVRTC must be
    /// loaded and at least [`OLDEST_NVRTC`].
    fn new(src: &CString) -> Result<Self, CompileError> {
        let name = c_string(PROGRAM_NAME, String::new)?;
        let headers = headers();
        let mut bodies = Vec::with_capacity(headers.len());
        let mut names = Vec::with_capacity(headers.len());
        for (n, body) in &headers {
            bodies.push(c_string(body, || format!("header {n}"))?);
            names.push(c_string(n, String::new)?);
        }
        let body_ptrs: Vec<*const c_char> = bodies.iter().map(|c| c.as_ptr()).collect();
        let name_ptrs: Vec<*const c_char> = names.iter().map(|c| c.as_ptr()).collect();
        let mut prog = std::mem::MaybeUninit::uninit();
        // SAFETY: NVRTC is loaded (the caller's contract); every pointer is a NUL-terminated
        // string that outlives the call, and the two header arrays have headers.len() entries
        // each. NVRTC keeps copies of the strings, not the pointers (nvrtcCreateProgram).
        unsafe {
            sys::nvrtcCreateProgram(
                prog.as_mut_ptr(),
                src.as_ptr(),
                name.as_ptr(),
                headers.len() as std::ffi::c_int,
                body_ptrs.as_ptr(),
                name_ptrs.as_ptr(),
            )
            .result()
            .map_err(|source| CompileError::Nvrtc {
                call: "nvrtcCreateProgram",
                source,
            })?;
            // SAFETY: written by the successful call.
            Ok(Program(prog.assume_init()))
        }
    }

    /// Compiles with `opts` (no NUL in any: checked by the caller), or the error with the log.
    fn compile(&self, opts: &[String], arch: &str) -> Result<(), CompileError> {
        // SAFETY: the program is live until drop.
        let Err(source) = (unsafe { result::compile_program(self.0, opts) }) else {
            return Ok(());
        };
        // SAFETY: as above.
        let log = unsafe { result::get_program_log(self.0) }.unwrap_or_default();
        let log: Vec<u8> = log
            .iter()
            .map(|&c| c as u8)
            .take_while(|&b| b != 0)
            .collect();
        Err(CompileError::Compile {
            arch: arch.to_owned(),
            source,
            log: String::from_utf8_lossy(&log).into_owned(),
        })
    }

    /// The compiled program's machine code; an error if it holds none (PTX or LTO IR).
    fn cubin(&self, arch: &str) -> Result<Vec<u8>, CompileError> {
        let nvrtc = |call| move |source| CompileError::Nvrtc { call, source };
        let mut size = 0usize;
        // SAFETY: the program is live and compiled; NVRTC >= 11.1 has nvrtcGetCUBINSize.
        unsafe { sys::nvrtcGetCUBINSize(self.0, &mut size) }
            .result()
            .map_err(nvrtc("nvrtcGetCUBINSize"))?;
        if size == 0 {
            // cuModuleLoadData reads an image without its size: an empty one crashes it.
            return Err(CompileError::NoMachineCode {
                arch: arch.to_owned(),
            });
        }
        let mut cubin = vec![0u8; size];
        // SAFETY: as above; `cubin` has the `size` bytes NVRTC reported.
        unsafe { sys::nvrtcGetCUBIN(self.0, cubin.as_mut_ptr().cast()) }
            .result()
            .map_err(nvrtc("nvrtcGetCUBIN"))?;
        Ok(cubin)
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the program was created by nvrtcCreateProgram and is destroyed once, here.
        // Its only failure is an invalid program, which this one is not.
        let _ = unsafe { result::destroy_program(self.0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ODD: &str = r#"
#include <sized_readback/append.cuh>
extern "C" __global__ void odd(srb_append_desc d, const unsigned* x, unsigned n) {
    using Append = srb::BlockAppend<128, unsigned>;
    __shared__ Append::TempStorage tmp;
    Append app(tmp, d);
    for (unsigned b = blockIdx.x * 128; b < n; b += gridDim.x * 128) {
        unsigned i = b + threadIdx.x;
        bool keep = i < n && (x[i] & 1);
        app.append(keep, keep ? x[i] : 0u);
    }
    app.finish();
}
"#;

    #[test]
    fn bad_input_is_refused_before_nvrtc_is_needed() {
        let e = cubin_for((9, 0), "int a;\0", &[]).unwrap_err();
        assert!(
            matches!(&e, CompileError::Nul { what, position: 6 } if what == "source"),
            "{e:?}"
        );
        let e = cubin_for((9, 0), "int a;", &["-DA=1", "-DB\0"]).unwrap_err();
        assert!(
            matches!(&e, CompileError::Nul { what, position: 3 } if what == "option 1"),
            "{e:?}"
        );
        let e = cubin_for((6, 1), ODD, &[]).unwrap_err();
        assert!(
            matches!(
                e,
                CompileError::UnsupportedCapability { major: 6, minor: 1 }
            ),
            "{e:?}"
        );
    }

    /// A machine-code image: ELF, e_machine (bytes 18..20) EM_CUDA (190).
    fn assert_cubin(bytes: &[u8]) {
        assert_eq!(&bytes[..4], b"\x7fELF", "an ELF cubin");
        assert_eq!(u16::from_le_bytes([bytes[18], bytes[19]]), 190);
    }

    /// The first ```cuda block of the append module's docs: the kernel users copy.
    fn docs_kernel() -> String {
        let docs = include_str!("../append.rs");
        let lines: Vec<&str> = docs
            .lines()
            .map(|l| l.trim_start().trim_start_matches("//!"))
            .map(|l| l.strip_prefix(' ').unwrap_or(l))
            .collect();
        let start = lines.iter().position(|l| l.trim() == "```cuda").unwrap();
        let len = lines[start + 1..]
            .iter()
            .position(|l| l.trim() == "```")
            .unwrap();
        lines[start + 1..start + 1 + len].join("\n")
    }

    /// With NVRTC on the loader's path, every case below; without, the error says NVRTC is
    /// missing. `cargo xtask ci` runs it again with the pinned NVRTC 12.0 on LD_LIBRARY_PATH
    /// and `SRB_REQUIRE_NVRTC=12.0` (the version it must find), so that both halves run in CI.
    #[test]
    fn compiles_through_the_header_or_says_nvrtc_is_missing() {
        let required = std::env::var("SRB_REQUIRE_NVRTC").ok();
        if !nvrtc_present() {
            assert!(
                required.is_none(),
                "SRB_REQUIRE_NVRTC is set but no NVRTC loads (LD_LIBRARY_PATH={:?})",
                std::env::var_os("LD_LIBRARY_PATH")
            );
            let e = cubin_for((9, 0), ODD, &[]).unwrap_err();
            assert!(matches!(e, CompileError::NvrtcNotFound), "{e:?}");
            return;
        }
        if let Some(want) = required {
            let (a, b) = nvrtc_version().unwrap();
            assert_eq!(format!("{a}.{b}"), want, "the NVRTC the loader found");
        }
        assert_cubin(&cubin_for((9, 0), ODD, &["-DUNUSED=1"]).unwrap());
        // The docs' kernel, for the oldest architecture this NVRTC knows from 7.0 (NVRTC 13
        // dropped sm_70) and for Hopper; an architecture it does not know is named as such.
        let supported = supported_archs().unwrap();
        let oldest = *supported.iter().filter(|&&a| a >= 70).min().unwrap();
        for cc in [(oldest / 10, oldest % 10), (9, 0)] {
            assert_cubin(&cubin_for(cc, &docs_kernel(), &[]).unwrap());
        }
        let e = cubin_for((9, 9), ODD, &[]).unwrap_err();
        assert!(
            matches!(&e, CompileError::UnknownArchitecture { arch, supported: s, .. }
                if arch == "sm_99" && s == &supported),
            "{e:?}"
        );
        // The user's own -std and architecture replace the defaults.
        assert_cubin(&cubin_for((9, 0), ODD, &["-std=c++20"]).unwrap());
        assert_cubin(&cubin_for((9, 9), ODD, &["--gpu-architecture=sm_90"]).unwrap());
        // Options that ask for no machine code give an error, never an empty image.
        for opts in [&["-dlto"][..], &["--gpu-architecture=compute_90"][..]] {
            let e = cubin_for((9, 0), ODD, opts).unwrap_err();
            assert!(
                matches!(e, CompileError::NoMachineCode { .. }),
                "{opts:?}: {e:?}"
            );
        }

        // The log's line numbers are the source's own, and the header's own.
        let broken =
            "#include <sized_readback/append.cuh>\n__global__ void k() { undeclared_name = 1; }\n";
        let e = cubin_for((9, 0), broken, &[]).unwrap_err();
        let CompileError::Compile { arch, log, .. } = &e else {
            panic!("{e:?}")
        };
        assert_eq!(arch, "sm_90");
        assert!(
            log.contains("kernel.cu(2)") && log.contains("undeclared_name"),
            "{log}"
        );
        let misuse = "#include <sized_readback/append.cuh>\n__global__ void k(srb_append_desc d) {\n    using A = srb::BlockAppend<100, unsigned>;\n    __shared__ A::TempStorage t;\n    A a(t, d);\n}\n";
        let header = include_str!("../../include/sized_readback/append.cuh");
        let line = 1 + header
            .lines()
            .position(|l| l.contains("static_assert(BLOCK_THREADS % 32 == 0"))
            .unwrap();
        let e = cubin_for((9, 0), misuse, &[]).unwrap_err();
        let CompileError::Compile { log, .. } = &e else {
            panic!("{e:?}")
        };
        assert!(
            log.contains(&format!("sized_readback/append.cuh({line})"))
                && log.contains("BLOCK_THREADS must be a multiple of 32"),
            "line {line}: {log}"
        );
        let e = cubin_for((9, 0), ODD, &["--no-such-option"]).unwrap_err();
        assert!(matches!(e, CompileError::Compile { .. }), "{e:?}");
    }
}
