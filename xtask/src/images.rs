//! The committed kernel images: what is compiled, by which NVRTC, with which options.
//!
//! One image per target rather than one fatbin: the library picks the image for the device
//! itself (`src/raw/images.rs`), so it can name what it loaded and refuse a pre-Volta device
//! with a typed error before any load, and regeneration needs NVRTC alone (no nvfatbin).
use crate::nvrtc::{Nvrtc, Output};
use anyhow::{Context, Result};
use std::fs;
use std::path::{Path, PathBuf};

/// Machine code from NVRTC 12.0 (R525+ drivers run 12.x machine code).
pub const CUBINS_12_0: &[u32] = &[70, 75, 80, 86, 89, 90];
/// Machine code from NVRTC 12.8: Blackwell, whose drivers are R570+.
pub const CUBINS_12_8: &[u32] = &[100, 120];
/// PTX from NVRTC 12.0 (`.version 8.0`): compute_70 for any 7.x/8.x device without machine
/// code here, compute_90 for 9.0 and newer (its code waits with `griddepcontrol.wait`).
pub const PTX: &[u32] = &[70, 90];
/// The newest PTX ISA the committed PTX may use: what CUDA 12.0 (R525) can JIT.
pub const MAX_PTX_VERSION: (u32, u32) = (8, 0);

/// The newest PTX ISA of the switch set's PTX: what NVRTC 12.8 writes (R570+ drivers JIT it).
pub const MAX_PTX_VERSION_SWITCH: (u32, u32) = (8, 7);

/// Which NVRTC compiles a unit's images.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Generators {
    /// NVRTC 12.0 for the PTX and sm_70–sm_90, NVRTC 12.8 for Blackwell: runs on R525+.
    Baseline,
    /// NVRTC 12.8 for every image (device-side graph conditionals need it): the library loads
    /// the unit only on drivers of CUDA 12.8 or newer.
    Nvrtc128,
}

/// A translation unit: every `.cu` file of one folder, included in name order.
pub struct Unit {
    /// `library` (always embedded), `testing` (behind the `testing` feature), `grid` (the
    /// exact-grid form's setter, as `switch`) or `switch` (the
    /// staged transport's sized copy, loaded on CUDA 12.8+ drivers).
    pub name: &'static str,
    pub dir: &'static str,
    /// Options of this unit only.
    pub extra: &'static [&'static str],
    pub generators: Generators,
}

impl Unit {
    /// The newest PTX ISA this unit's PTX may use.
    pub fn max_ptx_version(&self) -> (u32, u32) {
        match self.generators {
            Generators::Baseline => MAX_PTX_VERSION,
            Generators::Nvrtc128 => MAX_PTX_VERSION_SWITCH,
        }
    }
}

pub const UNITS: &[Unit] = &[
    Unit {
        name: "library",
        dir: "csrc",
        extra: &[],
        generators: Generators::Baseline,
    },
    // The append tests' row selection multiplies in 128 bits.
    Unit {
        name: "testing",
        dir: "csrc/testing",
        extra: &["--device-int128"],
        generators: Generators::Baseline,
    },
    // The pack kernel again, as `srb_pack_switch`, which sets the staged copy's size class
    // through cudaGraphSetConditional (a builtin of NVRTC 12.8; NVRTC 12.0 lacks it).
    Unit {
        name: "switch",
        dir: "csrc/switch",
        extra: &[],
        generators: Generators::Nvrtc128,
    },
    // The sized launch's grid setter (its exact-grid form), which sets a device-updatable
    // node's grid (CUDA 12.4 builtins of NVRTC 12.8): a set of its own, so that the switch
    // set's images stay as they were.
    Unit {
        name: "grid",
        dir: "csrc/grid",
        extra: &[],
        generators: Generators::Nvrtc128,
    },
];

/// The `.cu` files of `dir`, sorted, relative to `root`.
pub fn cu_files(root: &Path, dir: &str) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = fs::read_dir(root.join(dir))
        .with_context(|| format!("reading {dir}"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .map(|p| p.strip_prefix(root).expect("under root").to_path_buf())
        .collect();
    files.sort();
    Ok(files)
}

/// The options every image is compiled with, besides its target.
pub fn options(root: &Path, unit: &Unit) -> Vec<String> {
    let mut o = vec![
        "-std=c++17".into(),
        format!("-I{}", root.join(unit.dir).display()),
        format!("-I{}", root.join("include").display()),
    ];
    o.extend(unit.extra.iter().map(|s| s.to_string()));
    o
}

/// One compiled image: its path under the crate root, its bytes, and which NVRTC made it.
pub struct Image {
    pub path: String,
    pub bytes: Vec<u8>,
    pub generator: String,
}

/// Compiles every image of `unit`.
pub fn compile(
    root: &Path,
    unit: &Unit,
    nvrtc_12_0: &Nvrtc,
    nvrtc_12_8: &Nvrtc,
) -> Result<Vec<Image>> {
    let mut source = String::from("// one translation unit of every .cu file in the folder\n");
    for f in cu_files(root, unit.dir)? {
        source.push_str(&format!(
            "#include \"{}\"\n",
            f.file_name().unwrap().to_string_lossy()
        ));
    }
    let opts = options(root, unit);
    let program = format!("{}.cu", unit.name);
    let mut out = Vec::new();
    let mut build = |nv: &Nvrtc, target: String, output: Output, ext: &str| -> Result<()> {
        let mut o = opts.clone();
        o.push(format!("--gpu-architecture={target}"));
        let is_ptx = matches!(output, Output::Ptx);
        let bytes = nv.compile(&program, &source, &o, output)?;
        if is_ptx {
            check_ptx_version(&bytes, &target, unit.max_ptx_version())?;
        }
        let (major, minor) = nv.version();
        out.push(Image {
            path: format!("kernels/{}/{target}.{ext}", unit.name),
            bytes,
            generator: format!("nvrtc-{major}.{minor}"),
        });
        Ok(())
    };
    let early = match unit.generators {
        Generators::Baseline => nvrtc_12_0,
        Generators::Nvrtc128 => nvrtc_12_8,
    };
    for a in CUBINS_12_0 {
        build(early, format!("sm_{a}"), Output::Cubin, "cubin")?;
    }
    for a in CUBINS_12_8 {
        build(nvrtc_12_8, format!("sm_{a}"), Output::Cubin, "cubin")?;
    }
    for a in PTX {
        build(early, format!("compute_{a}"), Output::Ptx, "ptx")?;
    }
    Ok(out)
}

/// Fails unless the PTX's `.version` is at most `max` and its `.target` is `target`.
fn check_ptx_version(ptx: &[u8], target: &str, max: (u32, u32)) -> Result<()> {
    let text = String::from_utf8_lossy(ptx);
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(key).map(|v| v.trim().to_string()))
    };
    let version = field(".version").context("PTX without .version")?;
    let (major, minor) = version.split_once('.').context("malformed .version")?;
    let v: (u32, u32) = (major.parse()?, minor.parse()?);
    anyhow::ensure!(v <= max, "PTX .version {version} is newer than {max:?}");
    let t = field(".target").context("PTX without .target")?;
    anyhow::ensure!(
        t == target.replace("compute_", "sm_"),
        "PTX .target {t}, expected {target}"
    );
    Ok(())
}

/// Where [`table`] goes.
pub const TABLE: &str = "src/raw/generated/images.rs";

/// The Rust table the library embeds the images through (`src/raw/generated/images.rs`).
pub fn table() -> String {
    let mut t = String::from(
        "// @generated by `cargo xtask regen`: the committed kernel images (kernels/), embedded.\n\
         // Do not edit; see kernels/README.md.\n",
    );
    let sm: Vec<String> = CUBINS_12_0
        .iter()
        .chain(CUBINS_12_8)
        .map(|a| format!("sm_{a}"))
        .collect();
    let ptx: Vec<String> = PTX.iter().map(|a| format!("compute_{a}")).collect();
    t.push_str(&format!(
        "pub(crate) const TARGETS: &str = \"{} +{}\";\n",
        sm.join(","),
        ptx.join(",")
    ));
    for unit in UNITS {
        let upper = unit.name.to_uppercase();
        if unit.name == "testing" {
            t.push_str("#[cfg(feature = \"testing\")]\n");
        }
        t.push_str(&format!(
            "pub(crate) static {upper}: ImageSet = ImageSet {{\n    cubins: &[\n"
        ));
        for a in CUBINS_12_0.iter().chain(CUBINS_12_8) {
            t.push_str(&format!(
                "        Cubin {{\n            arch: {a},\n            bytes: &Aligned(*include_bytes!(concat!(\n                env!(\"CARGO_MANIFEST_DIR\"),\n                \"/kernels/{}/sm_{a}.cubin\"\n            ))),\n        }},\n",
                unit.name
            ));
        }
        t.push_str("    ],\n    ptx: &[\n");
        for a in PTX {
            t.push_str(&format!(
                "        Ptx {{\n            arch: {a},\n            text: concat!(\n                include_str!(concat!(\n                    env!(\"CARGO_MANIFEST_DIR\"),\n                    \"/kernels/{}/compute_{a}.ptx\"\n                )),\n                \"\\0\"\n            ),\n        }},\n",
                unit.name
            ));
        }
        t.push_str("    ],\n};\n");
    }
    t
}
