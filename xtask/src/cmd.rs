//! Running the tools the tasks orchestrate: a command echoed, then run with its status checked
//! or its output captured; where the repository and cargo's target folder are; whether a tool
//! is on PATH; a temporary folder removed when dropped.
use anyhow::{bail, Context, Result};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root (xtask/ lies below it).
pub fn root() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    dir.parent().expect("xtask/ has a parent").to_path_buf()
}

/// Cargo's target folder: `CARGO_TARGET_DIR`, else `target/` in the root.
pub fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
}

/// A command for cargo (the one running this task, as cargo sets `CARGO`), in the root.
pub fn cargo(root: &Path) -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.current_dir(root);
    c
}

/// `bash SCRIPT ARGS...` for a script of the repository, in the root.
pub fn bash(root: &Path, script: &str) -> Command {
    let mut c = Command::new("bash");
    c.arg(root.join(script)).current_dir(root);
    c
}

/// Under CI (`SRB_CI=1`) a missing tool is an error; elsewhere a step that needs it is skipped
/// with a message.
pub fn in_ci() -> bool {
    std::env::var("SRB_CI").is_ok_and(|v| v == "1")
}

/// The first `name` on PATH.
pub fn which(name: impl AsRef<OsStr>) -> Option<PathBuf> {
    let name = name.as_ref();
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The command line as a shell would show it.
fn shown(c: &Command) -> String {
    std::iter::once(c.get_program())
        .chain(c.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `c` (echoed to stderr first) and fails unless it exits 0.
pub fn run(c: &mut Command) -> Result<()> {
    let line = shown(c);
    eprintln!("+ {line}");
    let status = c.status().with_context(|| format!("running {line}"))?;
    if !status.success() {
        bail!("{line}: {status}");
    }
    Ok(())
}

/// Runs `c` and returns its standard output, failing unless it exits 0 (what it printed then
/// goes into the message).
pub fn output(c: &mut Command) -> Result<String> {
    let o = capture(c)?;
    if !o.status.success() {
        bail!(
            "{}: {}\n{}{}",
            shown(c),
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Runs `c` and returns what it did, whatever its status.
pub fn capture(c: &mut Command) -> Result<Output> {
    c.output().with_context(|| format!("running {}", shown(c)))
}

/// Whether a CUDA driver the loader finds and a device nvidia-smi lists are here.
pub fn gpu_present() -> bool {
    driver_present()
        && Command::new("nvidia-smi")
            .arg("-L")
            .output()
            .is_ok_and(|o| o.status.success())
}

/// Whether the dynamic loader knows `libcuda.so.1`.
pub fn driver_present() -> bool {
    Command::new("ldconfig")
        .arg("-p")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("libcuda.so.1"))
}

/// A fresh temporary folder, removed with its contents when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(what: &str) -> Result<Self> {
        let base = std::env::temp_dir();
        for i in 0..1000u32 {
            let p = base.join(format!("srb-xtask-{what}-{}-{i}", std::process::id()));
            if std::fs::create_dir(&p).is_ok() {
                return Ok(TempDir(p));
            }
        }
        bail!("could not make a temporary folder in {}", base.display())
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `sudo` unless this process runs as root (for apt-get).
pub fn as_root(program: &str) -> Command {
    let root_user = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if root_user {
        Command::new(program)
    } else {
        let mut c = Command::new("sudo");
        c.arg(program);
        c
    }
}

/// `apt-get update` and `apt-get install -y PACKAGES`, quietly, as root.
pub fn apt_install(packages: &[&str]) -> Result<()> {
    let quiet = |c: &mut Command| {
        c.env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(std::process::Stdio::null());
    };
    let mut update = as_root("apt-get");
    update.args(["update", "-qq"]);
    quiet(&mut update);
    run(&mut update)?;
    let mut install = as_root("apt-get");
    install.args(["install", "-y", "-qq"]).args(packages);
    quiet(&mut install);
    run(&mut install)
}
