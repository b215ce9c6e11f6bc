//! The committed kernel images and bindings against their sources, without a GPU or any CUDA
//! tool: `kernels/MANIFEST` (written by `cargo xtask regen`) records the SHA-256 of every input
//! and output, and these tests fail when a source changed without a regeneration, or a
//! generated file was edited by hand. CI also regenerates and compares byte for byte.
use sha2::{Digest, Sha256};
use sized_readback::{Error, ImageKind, KernelImage, KERNEL_TARGETS};
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    test_support::source_root::source_root()
}
const REGEN: &str = "run `cargo xtask regen` and commit what it writes";

fn sha256(path: &Path) -> String {
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The manifest's lines of one kind, split into fields after the kind.
fn manifest(kind: &str) -> Vec<Vec<String>> {
    let text = fs::read_to_string(root().join("kernels/MANIFEST")).expect("kernels/MANIFEST");
    text.lines()
        .filter_map(|l| l.strip_prefix(kind)?.strip_prefix(' '))
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect()
}

fn files_under(dir: &str, keep: impl Fn(&Path) -> bool) -> BTreeSet<String> {
    fs::read_dir(root().join(dir))
        .unwrap_or_else(|e| panic!("reading {dir}: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|p| keep(p))
        .map(|p| {
            p.strip_prefix(root())
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

#[test]
fn every_source_hashes_as_when_the_images_were_made() {
    let inputs = manifest("input");
    let recorded: BTreeSet<String> = inputs.iter().map(|f| f[1].clone()).collect();
    // Every file beside the kernels counts (they compile with -I there), headers included.
    let is_file = |p: &Path| p.is_file();
    let mut sources = files_under("csrc", is_file);
    sources.extend(files_under("csrc/testing", is_file));
    sources.extend(files_under("csrc/switch", is_file));
    sources.extend(files_under("csrc/grid", is_file));
    sources.extend(files_under("include/sized_readback", is_file));
    assert_eq!(
        recorded, sources,
        "the manifest's inputs are not the kernel sources: {REGEN}"
    );
    for f in &inputs {
        let (hash, path) = (&f[0], &f[1]);
        assert_eq!(
            &sha256(&root().join(path)),
            hash,
            "{path} changed since the images were made: {REGEN}"
        );
    }
}

#[test]
fn every_generated_file_hashes_as_recorded() {
    let outputs = manifest("output");
    let recorded: BTreeSet<String> = outputs.iter().map(|f| f[1].clone()).collect();
    for dir in ["kernels/library", "kernels/testing", "kernels/switch"] {
        for f in files_under(dir, |_| true) {
            assert!(
                recorded.contains(&f),
                "{f} is not in kernels/MANIFEST: {REGEN}"
            );
        }
    }
    for needed in [
        "src/raw/generated/slot_abi.rs",
        "src/raw/generated/images.rs",
        "kernels/library/sm_90.cubin",
        "kernels/switch/sm_90.cubin",
    ] {
        assert!(recorded.contains(needed), "kernels/MANIFEST lacks {needed}");
    }
    for f in &outputs {
        let (hash, path) = (&f[0], &f[1]);
        assert_eq!(
            &sha256(&root().join(path)),
            hash,
            "{path} is not what `cargo xtask regen` wrote: {REGEN}"
        );
    }
}

/// The PTX is what an R525 driver (CUDA 12.0) can JIT: `.version` 8.0 at most, and for the
/// virtual architecture its name says. The switch set (the staged sized copy), which the
/// library loads only on CUDA 12.8+ drivers, may use PTX ISA 8.7 (NVRTC 12.8).
#[test]
fn committed_ptx_is_for_drivers_from_r525() {
    check_ptx(&["kernels/library", "kernels/testing"], (8, 0));
}

#[test]
fn switch_ptx_is_for_drivers_from_r570() {
    check_ptx(&["kernels/switch"], (8, 7));
}

fn check_ptx(dirs: &[&str], max: (u32, u32)) {
    let ptx: Vec<PathBuf> = dirs
        .iter()
        .flat_map(|d| files_under(d, |p| p.extension().is_some_and(|x| x == "ptx")))
        .map(|f| root().join(f))
        .collect();
    assert_eq!(
        ptx.len(),
        2 * dirs.len(),
        "compute_70 and compute_90 per unit"
    );
    for p in ptx {
        let text = fs::read_to_string(&p).unwrap();
        let field = |key: &str| {
            text.lines()
                .find_map(|l| l.trim().strip_prefix(key).map(|v| v.trim().to_string()))
                .unwrap_or_else(|| panic!("{} has no {key}", p.display()))
        };
        let version = field(".version");
        let (major, minor) = version.split_once('.').unwrap();
        let v: (u32, u32) = (major.parse().unwrap(), minor.parse().unwrap());
        assert!(
            v <= max,
            "{}: PTX .version {version}, newer than {max:?}",
            p.display()
        );
        let stem = p
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .replace("compute_", "sm_");
        assert_eq!(field(".target"), stem, "{}", p.display());
    }
}

#[test]
fn the_targets_cover_volta_to_blackwell() {
    assert_eq!(
        KERNEL_TARGETS,
        "sm_70,sm_75,sm_80,sm_86,sm_89,sm_90,sm_100,sm_120 +compute_70,compute_90"
    );
}

/// Machine code of the device's major architecture and the newest minor not above its own;
/// else the newest PTX not above it; forced PTX takes the PTX; below 7.0 a typed error.
#[test]
fn each_device_gets_the_image_it_can_run() {
    use ImageKind::{MachineCode as Sm, Ptx};
    let cases = [
        ((7, 0), false, Sm, 70),   // V100
        ((7, 2), false, Sm, 70),   // Xavier
        ((7, 5), false, Sm, 75),   // T4
        ((8, 0), false, Sm, 80),   // A100
        ((8, 6), false, Sm, 86),   // A10, RTX 30
        ((8, 7), false, Sm, 86),   // Orin
        ((8, 9), false, Sm, 89),   // L4, L40S
        ((9, 0), false, Sm, 90),   // H100, H200
        ((10, 0), false, Sm, 100), // B200
        ((10, 3), false, Sm, 100), // B300
        ((11, 0), false, Ptx, 90), // Thor: no machine code here, PTX JIT
        ((12, 0), false, Sm, 120), // RTX 50
        ((8, 6), true, Ptx, 70),
        ((9, 0), true, Ptx, 90),
        ((12, 0), true, Ptx, 90),
        ((7, 9), false, Sm, 75),
        ((9, 9), false, Sm, 90),
        ((10, 1), false, Sm, 100),
        ((12, 9), false, Sm, 120),
        ((13, 0), false, Ptx, 90), // a generation after these images: the newest PTX
        ((99, 99), false, Ptx, 90),
        ((u32::MAX, u32::MAX), false, Ptx, 90),
    ];
    for ((major, minor), force, kind, arch) in cases {
        let image = KernelImage::choose(major, minor, force).unwrap();
        assert_eq!(
            (image.kind(), image.arch()),
            (kind, arch),
            "{major}.{minor} force_ptx={force}"
        );
        assert!(image.bytes() > 10_000, "{image}");
    }
    let image = KernelImage::choose(9, 0, false).unwrap();
    assert_eq!(
        image.to_string(),
        format!("sm_90 (machine code, {} bytes)", image.bytes())
    );
    for (major, minor) in [(6, 1), (5, 2), (3, 5), (0, 0), (6, 9), (0, u32::MAX)] {
        let e = KernelImage::choose(major, minor, false).unwrap_err();
        assert!(
            matches!(e, Error::UnsupportedDevice { major: a, minor: b } if (a, b) == (major, minor)),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            format!("the device's compute capability {major}.{minor} is not supported: the kernels run on 7.0 (Volta) and newer")
        );
    }
}
