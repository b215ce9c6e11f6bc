//! `cargo xtask packages`: the C API's packages (the guide's "C and C++"). Installs into a
//! temporary prefix, moves the prefix, then builds and runs consumers (capi/tests/consumers/)
//! through each of
//! - CMake `find_package(sized_readback 0.1 CONFIG REQUIRED)` (static and shared targets; a
//!   Fortran program on the installed module source),
//! - pkg-config (`sized_readback-static`, and `sized_readback` for the .so),
//! - a plain cc / c++ command (C99 and C++17, `-Wall -Wextra -Werror -pedantic`; the C++ one
//!   also with the CUDA toolkit's `<cuda.h>` included first, when a toolkit's headers are there);
//!
//! then compiles the C, C++, Fortran and CUDA snippets of README.md and of the guide's
//! chapters against the same prefix (`xtask/scripts/test-readme-snippets.sh`; its header states
//! which blocks and how; CUDA ones need nvcc). Without a driver each consumer must print the library's "driver was not found"
//! error and exit 1; with a GPU it must exit 0. A missing CMake, pkg-config or C compiler
//! skips the task with a message, except under `SRB_CI=1`.
use crate::cmd::{self, TempDir};
use crate::{dev_env, install_capi};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

const STRICT: &[&str] = &["-Wall", "-Wextra", "-Werror", "-pedantic"];
const LINK: &[&str] = &["-lpthread", "-ldl", "-lm", "-lrt"];

fn env_or(var: &str, default: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| default.to_string())
}

/// Runs the consumers against a moved prefix installed from `libdir` (built first when `None`).
pub fn check(root: &Path, libdir: Option<PathBuf>) -> Result<()> {
    let (cc, cxx) = (env_or("CC", "cc"), env_or("CXX", "c++"));
    for tool in ["cmake", "pkg-config", cc.as_str()] {
        if cmd::which(tool).is_none() && !cmd::in_ci() {
            println!("packages: no {tool} here (apt-get install cmake pkg-config gcc): skipped");
            return Ok(());
        }
    }
    let work = TempDir::new("packages")?;
    let w = work.path();
    install_capi::install(root, &w.join("staging"), libdir)?;
    std::fs::rename(w.join("staging"), w.join("moved"))?;
    let prefix = w.join("moved");
    let src = root.join("capi/tests/consumers");
    let mut c = Consumers {
        gpu: cmd::gpu_present(),
        failed: false,
    };

    // SONAME, and the .so the shared consumers record.
    let soname = dynamic(&prefix.join("lib/libsized_readback.so.0.1.0"), "SONAME")?;
    c.expect(
        soname == "libsized_readback.so.0",
        &format!("SONAME is '{soname}'"),
    );

    // 1. CMake
    let flags = STRICT.join(" ");
    let configured = cmd::output(
        Command::new("cmake")
            .arg("-S")
            .arg(&src)
            .arg("-B")
            .arg(w.join("cmake"))
            .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix.display()))
            .arg("-DCMAKE_BUILD_TYPE=Release")
            .arg(format!("-DCMAKE_C_FLAGS={flags}"))
            .arg(format!("-DCMAKE_CXX_FLAGS={flags}")),
    )?;
    if let Some(found) = configured
        .lines()
        .find_map(|l| l.find("sized_readback ").map(|i| &l[i..]))
        .filter(|l| l.contains(" from "))
    {
        println!("packages: cmake found {found}");
    }
    cmd::output(Command::new("cmake").arg("--build").arg(w.join("cmake")))?;
    c.check(
        "cmake sized_readback::sized_readback (static, C99)",
        &w.join("cmake/consumer_static"),
        &[],
    )?;
    let shared = w.join("cmake/consumer_shared");
    let needed = dynamic(&shared, "NEEDED")?;
    c.expect(
        needed == "libsized_readback.so.0",
        &format!("consumer_shared records '{needed}'"),
    );
    c.check(
        &format!("cmake sized_readback::shared (C++17, records {needed})"),
        &shared,
        &[],
    )?;
    let fc = env_or("FC", "gfortran");
    if cmd::which(&fc).is_some() || cmd::in_ci() {
        let dir = w.join("cmake-f");
        cmd::output(
            Command::new("cmake")
                .env("FC", &fc)
                .arg("-S")
                .arg(src.join("fortran"))
                .arg("-B")
                .arg(&dir)
                .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix.display())),
        )?;
        cmd::output(Command::new("cmake").arg("--build").arg(&dir))?;
        c.check(
            "cmake, Fortran, the module from sized_readback_FORTRAN_MODULE_SOURCE",
            &dir.join("consumer_fortran"),
            &[],
        )?;
    } else {
        println!("packages: no gfortran: skipped the Fortran consumer");
    }

    // 2. pkg-config
    let pc_path = prefix.join("lib/pkgconfig");
    let pkg_config = |args: &[&str]| {
        cmd::output(
            Command::new("pkg-config")
                .env("PKG_CONFIG_PATH", &pc_path)
                .args(args),
        )
    };
    pkg_config(&["--exact-version", "0.1.0", "sized_readback-static"])?;
    let consumer_c = src.join("consumer.c");
    for (name, module) in [
        ("pc_static", "sized_readback-static"),
        ("pc_shared", "sized_readback"),
    ] {
        let flags = pkg_config(&["--cflags", "--libs", module])?;
        cmd::run(
            Command::new(&cc)
                .args(["-std=c99"])
                .args(STRICT)
                .arg("-o")
                .arg(w.join(name))
                .arg(&consumer_c)
                .args(flags.split_whitespace()),
        )?;
    }
    let links_so = cmd::output(Command::new("readelf").arg("-d").arg(w.join("pc_static")))?
        .contains("libsized_readback");
    c.expect(!links_so, "pc_static links the .so");
    c.check(
        "pkg-config sized_readback-static",
        &w.join("pc_static"),
        &[],
    )?;
    let lib = prefix.join("lib");
    c.check(
        "pkg-config sized_readback (shared, LD_LIBRARY_PATH)",
        &w.join("pc_shared"),
        &[("LD_LIBRARY_PATH", lib.as_os_str())],
    )?;

    // 3. plain commands
    let include = format!("-I{}", prefix.join("include").display());
    let archive = prefix.join("lib/libsized_readback.a");
    let plain = |compiler: &str, std: &str, out: &Path, source: &Path, extra: &[String]| {
        cmd::run(
            Command::new(compiler)
                .arg(std)
                .args(STRICT)
                .args(extra)
                .arg("-o")
                .arg(out)
                .arg(source)
                .arg(&include)
                .arg(&archive)
                .args(LINK),
        )
    };
    plain(&cc, "-std=c99", &w.join("cc_static"), &consumer_c, &[])?;
    c.check("cc -std=c99 -pedantic", &w.join("cc_static"), &[])?;
    let consumer_cpp = src.join("consumer.cpp");
    plain(
        &cxx,
        "-std=c++17",
        &w.join("cxx_static"),
        &consumer_cpp,
        &[],
    )?;
    c.check("c++ -std=c++17 -pedantic", &w.join("cxx_static"), &[])?;
    match cuda_include(root) {
        Some(inc) => {
            let isystem = ["-isystem".to_string(), inc.display().to_string()];
            let extra = [&["-DSRB_WITH_CUDA_H".to_string()][..], &isystem].concat();
            plain(
                &cxx,
                "-std=c++17",
                &w.join("cxx_cuda"),
                &consumer_cpp,
                &extra,
            )?;
            c.check(
                &format!("c++ with <cuda.h> from {}", inc.display()),
                &w.join("cxx_cuda"),
                &[],
            )?;
            cmd::run(
                Command::new(&cc)
                    .arg("-std=c99")
                    .args(STRICT)
                    .args(["-fsyntax-only", "-include", "cuda.h"])
                    .args(&isystem)
                    .arg(&include)
                    .arg(&consumer_c),
            )?;
            println!("packages: cc with <cuda.h> included first: compiles");
        }
        None => println!(
            "packages: no CUDA toolkit headers found: skipped the <cuda.h> compatibility build"
        ),
    }

    // 4. The C, C++, Fortran and CUDA code of README.md and of the guide's chapters (compile
    // only), against the moved prefix.
    for page in snippet_pages(root)? {
        if let Err(e) = cmd::run(
            cmd::bash(root, "xtask/scripts/test-readme-snippets.sh")
                .arg(&prefix)
                .arg(&page),
        ) {
            eprintln!("packages: {e:#}");
            c.failed = true;
        }
    }
    if c.failed {
        bail!("packages: some consumers or README snippets failed (above)");
    }
    println!("packages: all consumers and README snippets ok (prefix installed, moved, used)");
    Ok(())
}

/// README.md and the guide's chapters (`docs/guide/src/*.md`) that hold a `c`, `cpp`,
/// `fortran` or `cuda` block: the pages whose code test-readme-snippets.sh compiles (it fails
/// on a page without one).
fn snippet_pages(root: &Path) -> Result<Vec<PathBuf>> {
    let mut chapters: Vec<PathBuf> = std::fs::read_dir(root.join("docs/guide/src"))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    chapters.retain(|p| p.extension().is_some_and(|e| e == "md"));
    chapters.sort();
    let mut pages = vec![root.join("README.md")];
    for page in chapters {
        let text = std::fs::read_to_string(&page)?;
        if text
            .lines()
            .any(|l| matches!(l.trim(), "```c" | "```cpp" | "```fortran" | "```cuda"))
        {
            pages.push(page);
        }
    }
    Ok(pages)
}

/// The consumers' verdicts; a failure is reported and the rest still run.
struct Consumers {
    gpu: bool,
    failed: bool,
}

impl Consumers {
    fn expect(&mut self, ok: bool, what: &str) {
        if !ok {
            eprintln!("packages: {what}");
            self.failed = true;
        }
    }

    /// Runs `exe`: with a GPU it must exit 0; without one it must exit 1 with the library's
    /// "driver was not found" message.
    fn check(&mut self, label: &str, exe: &Path, env: &[(&str, &std::ffi::OsStr)]) -> Result<()> {
        let mut command = Command::new(exe);
        command.envs(env.iter().copied());
        let o = cmd::capture(&mut command)?;
        let out = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        let out = out.trim_end();
        match (self.gpu, o.status.code()) {
            (true, Some(0)) => println!("packages: {label}: ok (ran on the GPU: {out})"),
            (false, Some(1)) if out.contains("driver library (libcuda) was not found") => {
                let tail = out.rsplit(": ").next().unwrap_or(out);
                println!("packages: {label}: ok (no driver: exit 1, \"{tail}\")");
            }
            (_, code) => {
                eprintln!("packages: {label}: FAILED (exit {code:?}): {out}");
                self.failed = true;
            }
        }
        Ok(())
    }
}

/// One bracketed value of `readelf -d FILE`'s lines of `tag` (SONAME, NEEDED of the library).
fn dynamic(file: &Path, tag: &str) -> Result<String> {
    let text = cmd::output(Command::new("readelf").arg("-d").arg(file))?;
    text.lines()
        .filter(|l| l.contains(&format!("({tag})")))
        .filter_map(|l| Some(&l[l.find('[')? + 1..l.rfind(']')?]))
        .find(|v| tag != "NEEDED" || v.starts_with("libsized_readback"))
        .map(str::to_string)
        .with_context(|| format!("no {tag} in {}", file.display()))
}

/// A CUDA toolkit's include folder (with cuda.h and cuda_runtime_api.h): CUDA_HOME's,
/// /usr/local/cuda's, or that of the nvcc scripts/find-nvcc.sh finds.
fn cuda_include(root: &Path) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(h) = std::env::var_os("CUDA_HOME") {
        dirs.push(PathBuf::from(h).join("include"));
    }
    dirs.push("/usr/local/cuda/include".into());
    if let Some(nvcc) = dev_env::find_nvcc(root) {
        if let Some(toolkit) = nvcc.parent().and_then(Path::parent) {
            dirs.push(toolkit.join("include"));
        }
    }
    dirs.into_iter()
        .find(|d| d.join("cuda.h").is_file() && d.join("cuda_runtime_api.h").is_file())
}
