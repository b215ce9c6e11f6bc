//! NVRTC, loaded from a given `libnvrtc.so` (the pinned wheel's, never whatever is on the
//! system), so each image records exactly which compiler made it.
use anyhow::{bail, Context, Result};
use libloading::{Library, Symbol};
use std::ffi::{c_char, c_int, c_void, CString};
use std::path::Path;

type Program = *mut c_void;

/// One loaded NVRTC library.
pub struct Nvrtc {
    lib: Library,
    version: (i32, i32),
}

/// What a compilation produces: PTX for a `compute_XX` target, a cubin for `sm_XX`.
pub enum Output {
    Ptx,
    Cubin,
}

impl Nvrtc {
    pub fn load(path: &Path) -> Result<Self> {
        // SAFETY: loading NVRTC runs its initializers only; it has no load-time preconditions.
        let lib =
            unsafe { Library::new(path) }.with_context(|| format!("loading {}", path.display()))?;
        let mut nv = Nvrtc {
            lib,
            version: (0, 0),
        };
        let (mut major, mut minor): (c_int, c_int) = (0, 0);
        // SAFETY: nvrtcVersion(int*, int*) with two valid out-pointers.
        let status = unsafe {
            let f: Symbol<unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int> =
                nv.lib.get(b"nvrtcVersion")?;
            f(&mut major, &mut minor)
        };
        if status != 0 {
            bail!("nvrtcVersion failed ({status})");
        }
        nv.version = (major, minor);
        Ok(nv)
    }

    pub fn version(&self) -> (i32, i32) {
        self.version
    }

    /// Compiles `source` (named `name` in messages) with `options`; returns PTX text or a cubin.
    pub fn compile(
        &self,
        name: &str,
        source: &str,
        options: &[String],
        output: Output,
    ) -> Result<Vec<u8>> {
        let src = CString::new(source)?;
        let cname = CString::new(name)?;
        let opts: Vec<CString> = options
            .iter()
            .map(|o| CString::new(o.as_str()))
            .collect::<Result<_, _>>()?;
        let opt_ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
        // SAFETY: every symbol is looked up with NVRTC's documented C signature; the program
        // handle is created here, used only while alive and destroyed once at the end; all
        // strings are NUL-terminated and outlive the calls; buffers are sized by the size calls.
        unsafe {
            let create: Symbol<
                unsafe extern "C" fn(
                    *mut Program,
                    *const c_char,
                    *const c_char,
                    c_int,
                    *const *const c_char,
                    *const *const c_char,
                ) -> c_int,
            > = self.lib.get(b"nvrtcCreateProgram")?;
            let compile: Symbol<
                unsafe extern "C" fn(Program, c_int, *const *const c_char) -> c_int,
            > = self.lib.get(b"nvrtcCompileProgram")?;
            let log_size: Symbol<unsafe extern "C" fn(Program, *mut usize) -> c_int> =
                self.lib.get(b"nvrtcGetProgramLogSize")?;
            let log: Symbol<unsafe extern "C" fn(Program, *mut c_char) -> c_int> =
                self.lib.get(b"nvrtcGetProgramLog")?;
            let (size_fn, get_fn): (&[u8], &[u8]) = match output {
                Output::Ptx => (b"nvrtcGetPTXSize", b"nvrtcGetPTX"),
                Output::Cubin => (b"nvrtcGetCUBINSize", b"nvrtcGetCUBIN"),
            };
            let out_size: Symbol<unsafe extern "C" fn(Program, *mut usize) -> c_int> =
                self.lib.get(size_fn)?;
            let out_get: Symbol<unsafe extern "C" fn(Program, *mut c_char) -> c_int> =
                self.lib.get(get_fn)?;
            let destroy: Symbol<unsafe extern "C" fn(*mut Program) -> c_int> =
                self.lib.get(b"nvrtcDestroyProgram")?;

            let mut prog: Program = std::ptr::null_mut();
            let s = create(
                &mut prog,
                src.as_ptr(),
                cname.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            );
            if s != 0 {
                bail!("nvrtcCreateProgram failed ({s})");
            }
            let status = compile(prog, opt_ptrs.len() as c_int, opt_ptrs.as_ptr());
            let mut n = 0usize;
            if log_size(prog, &mut n) != 0 {
                n = 0;
            }
            let mut text = vec![0u8; n.max(1)];
            if n > 0 && log(prog, text.as_mut_ptr().cast()) != 0 {
                n = 0;
            }
            let text = String::from_utf8_lossy(&text[..n.saturating_sub(1)]).into_owned();
            let result = if status != 0 {
                Err(anyhow::anyhow!(
                    "NVRTC {}.{} could not compile {name} ({options:?}):\n{text}",
                    self.version.0,
                    self.version.1
                ))
            } else {
                let mut n = 0usize;
                let mut bytes = Vec::new();
                let s = out_size(prog, &mut n);
                if s == 0 {
                    bytes = vec![0u8; n];
                }
                let s = if s == 0 {
                    out_get(prog, bytes.as_mut_ptr().cast())
                } else {
                    s
                };
                if s != 0 {
                    destroy(&mut prog);
                    bail!("NVRTC could not hand out the output of {name} ({s})");
                }
                if let Output::Ptx = output {
                    // The size counts the terminating NUL; the committed file is plain text.
                    while bytes.last() == Some(&0) {
                        bytes.pop();
                    }
                }
                Ok(bytes)
            };
            destroy(&mut prog);
            result
        }
    }
}
