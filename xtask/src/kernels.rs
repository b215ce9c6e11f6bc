//! The committed kernel images and slot bindings: regenerated and checked (`regen`), their PTX
//! assembled by CUDA 12.0's ptxas (`ptxas`), and the append docs' user kernel compiled by NVRTC
//! (`user-kernel`). The only place the build runs NVRTC or bindgen: the library's build runs no
//! tool, so a dependent needs neither a CUDA toolkit nor libclang (`append::compile`, the `nvrtc`
//! feature, loads NVRTC at run time).
use crate::{bindings, count_kinds, images, manifest, nvrtc, toolchain};
use anyhow::{bail, ensure, Context, Result};
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::Command;

fn load_nvrtcs(root: &Path) -> Result<(nvrtc::Nvrtc, nvrtc::Nvrtc)> {
    let a = nvrtc::Nvrtc::load(&toolchain::install(root, &toolchain::NVRTC_12_0)?)?;
    let b = nvrtc::Nvrtc::load(&toolchain::install(root, &toolchain::NVRTC_12_8)?)?;
    ensure!(
        a.version() == (12, 0),
        "NVRTC 12.0 reports {:?}",
        a.version()
    );
    ensure!(
        b.version() == (12, 8),
        "NVRTC 12.8 reports {:?}",
        b.version()
    );
    Ok((a, b))
}

/// Every generated file, path → bytes, compiled from the sources as they are on disk;
/// `sources` are the count kinds' files (already written, unless checking).
fn generate(root: &Path, sources: &BTreeMap<String, Vec<u8>>) -> Result<BTreeMap<String, Vec<u8>>> {
    let (nv0, nv8) = load_nvrtcs(root)?;
    let mut m = manifest::Manifest::default();
    for pin in [&toolchain::NVRTC_12_0, &toolchain::NVRTC_12_8] {
        let generator = format!("nvrtc-{}", &pin.version[..pin.version.rfind('.').unwrap()]);
        m.generators
            .push((generator, format!("{}=={}", pin.package, pin.version)));
    }
    let mut files = BTreeMap::new();
    for unit in images::UNITS {
        let opts = images::options(Path::new(""), unit);
        m.options.push(format!(
            "{} {} --gpu-architecture=<target>",
            unit.name,
            opts.join(" ")
        ));
        for image in images::compile(root, unit, &nv0, &nv8)? {
            m.outputs
                .push((image.path.clone(), image.bytes.clone(), image.generator));
            files.insert(image.path, image.bytes);
        }
    }
    // The libclang version is not recorded: the output is the same from Debian's clang 14 and
    // PyPI's libclang 18, and a manifest naming it would differ between machines.
    let abi = bindings::generate(root)?;
    m.generators.push(("bindgen".into(), "0.72".into()));
    m.outputs.push((
        bindings::OUTPUT.into(),
        abi.clone().into_bytes(),
        "bindgen".into(),
    ));
    files.insert(bindings::OUTPUT.into(), abi.into_bytes());
    let rust = &sources[count_kinds::RUST];
    m.outputs
        .push((count_kinds::RUST.into(), rust.clone(), "xtask".into()));
    let table = images::table().into_bytes();
    m.outputs
        .push((images::TABLE.into(), table.clone(), "xtask".into()));
    files.insert(images::TABLE.into(), table);
    for path in inputs(root)? {
        let bytes = fs::read(root.join(&path))?;
        m.inputs.push((path, bytes));
    }
    files.insert(manifest::PATH.into(), m.render().into_bytes());
    files.extend(sources.clone());
    Ok(files)
}

/// What the generated files are made from: every `.cu` under csrc/ and the shipped headers.
fn inputs(root: &Path) -> Result<Vec<String>> {
    // Every file under csrc/ (the kernels compile with `-I` there, so a header beside them
    // counts), and the shipped headers.
    let mut v = Vec::new();
    for dir in [
        "csrc",
        "csrc/testing",
        "csrc/switch",
        "csrc/grid",
        "include/sized_readback",
    ] {
        for e in fs::read_dir(root.join(dir))? {
            let p = e?.path();
            if p.is_file() {
                v.push(p.strip_prefix(root)?.to_path_buf());
            }
        }
    }
    let mut v: Vec<String> = v.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    v.sort();
    Ok(v)
}

/// Regenerates the committed files, or with `check` fails unless each is byte-identical.
pub fn regen(root: &Path, check: bool) -> Result<()> {
    // The count kinds' files first: the kernels include csrc/count_kinds.inc and slot.h, and
    // bindgen reads slot.h, so they must be current on disk before anything compiles.
    let sources = count_kinds::generate(root)?;
    if !check {
        for (path, bytes) in &sources {
            fs::write(root.join(path), bytes)?;
        }
    }
    let files = generate(root, &sources)?;
    let committed = committed_images(root)?;
    if check {
        let mut stale = Vec::new();
        for (path, bytes) in &files {
            match fs::read(root.join(path)) {
                Ok(b) if &b == bytes => {}
                Ok(_) => stale.push(format!("{path} differs")),
                Err(_) => stale.push(format!("{path} is missing")),
            }
        }
        for path in committed.iter().filter(|p| !files.contains_key(*p)) {
            stale.push(format!("{path} is not generated any more"));
        }
        if !stale.is_empty() {
            bail!(
                "the committed kernel images, bindings or count kinds' files are stale; run `cargo xtask regen`:\n  {}",
                stale.join("\n  ")
            );
        }
        println!(
            "regen --check: {} generated files byte-identical to the committed ones",
            files.len()
        );
        return Ok(());
    }
    for path in committed.iter().filter(|p| !files.contains_key(*p)) {
        fs::remove_file(root.join(path))?;
    }
    for (path, bytes) in &files {
        let dest = root.join(path);
        fs::create_dir_all(dest.parent().unwrap())?;
        fs::write(&dest, bytes)?;
    }
    println!("regen: wrote {} files", files.len());
    Ok(())
}

/// The images now under kernels/ (not the manifest).
fn committed_images(root: &Path) -> Result<Vec<String>> {
    let mut v = Vec::new();
    for unit in images::UNITS {
        let dir = root.join("kernels").join(unit.name);
        if let Ok(rd) = fs::read_dir(&dir) {
            for e in rd {
                v.push(e?.path().strip_prefix(root)?.to_string_lossy().into_owned());
            }
        }
    }
    Ok(v)
}

/// Assembles the committed PTX with CUDA 12.0's ptxas.
pub fn ptxas(root: &Path) -> Result<()> {
    let ptxas = toolchain::install(root, &toolchain::PTXAS_12_0)?;
    let out = Command::new(&ptxas).arg("--version").output()?;
    let version = String::from_utf8_lossy(&out.stdout);
    let version = version.lines().last().unwrap_or_default().to_string();
    // The switch set's PTX is ISA 8.7, loaded only on CUDA 12.8+ drivers: not for R525's JIT.
    for unit in images::UNITS
        .iter()
        .filter(|u| u.generators == images::Generators::Baseline)
    {
        for (ptx, sm) in [("compute_70", "sm_70"), ("compute_90", "sm_90")] {
            let file = root.join(format!("kernels/{}/{ptx}.ptx", unit.name));
            let cubin = std::env::temp_dir().join(format!("srb-ptxas-{}-{sm}.cubin", unit.name));
            let o = Command::new(&ptxas)
                .arg(format!("-arch={sm}"))
                .arg(&file)
                .arg("-o")
                .arg(&cubin)
                .output()?;
            if !o.status.success() {
                bail!(
                    "ptxas ({version}) rejects {}: {}",
                    file.display(),
                    String::from_utf8_lossy(&o.stderr)
                );
            }
            let bytes = fs::metadata(&cubin)?.len();
            let _ = fs::remove_file(&cubin);
            println!(
                "ptxas 12.0 ({version}): kernels/{}/{ptx}.ptx -> {sm}: ok ({bytes} bytes)",
                unit.name
            );
        }
    }
    Ok(())
}

/// Compiles the append docs' user kernel with NVRTC to machine code, and runs the tests of
/// `append::compile` with NVRTC 12.0.
pub fn user_kernel(root: &Path) -> Result<()> {
    let docs = fs::read_to_string(root.join("src/append.rs"))?;
    let kernel = cuda_block(&docs).context("src/append.rs has no ```cuda block")?;
    let (nv0, nv8) = load_nvrtcs(root)?;
    let opts = |sm: u32| {
        vec![
            "-std=c++17".to_string(),
            format!("-I{}", root.join("include").display()),
            format!("--gpu-architecture=sm_{sm}"),
        ]
    };
    for (nv, sm) in [(&nv0, 70), (&nv0, 90), (&nv8, 120)] {
        let cubin = nv.compile("user_kernel.cu", &kernel, &opts(sm), nvrtc::Output::Cubin)?;
        ensure!(
            cubin.starts_with(b"\x7fELF"),
            "NVRTC gave no ELF cubin for sm_{sm}"
        );
        let (a, b) = nv.version();
        println!(
            "user kernel (src/append.rs docs): NVRTC {a}.{b} -> sm_{sm} cubin, {} bytes",
            cubin.len()
        );
    }
    // The library's own NVRTC path (`append::compile`, the `nvrtc` feature), whose tests take
    // the "NVRTC missing" branch on a machine without a toolkit: here with NVRTC 12.0 on the
    // loader's path, required at that version (the docs' kernel among them).
    let lib = toolchain::install(root, &toolchain::NVRTC_12_0)?;
    let dir = lib.parent().context("NVRTC's library has no directory")?;
    let mut dirs = vec![dir.to_path_buf()];
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
        dirs.extend(std::env::split_paths(&old).filter(|d| !d.as_os_str().is_empty()));
    }
    let path = std::env::join_paths(dirs)?;
    crate::cmd::run(
        crate::cmd::cargo(root)
            .args([
                "test",
                "--locked",
                "-p",
                "sized-readback",
                "--lib",
                "append::compile",
            ])
            .env("LD_LIBRARY_PATH", path)
            .env("SRB_REQUIRE_NVRTC", "12.0"),
    )
}

/// The first ```cuda block of a Rust module doc (`//! ` lines).
fn cuda_block(docs: &str) -> Option<String> {
    let lines: Vec<&str> = docs
        .lines()
        .map(|l| {
            l.trim_start()
                .trim_start_matches("//!")
                .strip_prefix(' ')
                .unwrap_or("")
        })
        .collect();
    let start = lines.iter().position(|l| l.trim() == "```cuda")?;
    let len = lines[start + 1..].iter().position(|l| l.trim() == "```")?;
    Some(lines[start + 1..start + 1 + len].join("\n") + "\n")
}
