//! `kernels/MANIFEST`: what made the committed images and bindings, from which inputs. Plain
//! lines, so the crate's own test (tests/kernel_images.rs) reads it without a parser:
//! `generator NAME DETAIL`, `input SHA256 PATH`, `output SHA256 PATH GENERATOR`.
use sha2::{Digest, Sha256};
use std::fmt::Write;

pub const PATH: &str = "kernels/MANIFEST";

pub fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

#[derive(Default)]
pub struct Manifest {
    pub generators: Vec<(String, String)>,
    pub options: Vec<String>,
    pub inputs: Vec<(String, Vec<u8>)>,
    pub outputs: Vec<(String, Vec<u8>, String)>,
}

impl Manifest {
    pub fn render(&self) -> String {
        let mut m = String::from(
            "# Written by `cargo xtask regen`; do not edit. tests/kernel_images.rs fails when an\n\
             # input or output below no longer hashes as recorded.\n",
        );
        for (name, detail) in &self.generators {
            let _ = writeln!(m, "generator {name} {detail}");
        }
        for o in &self.options {
            let _ = writeln!(m, "options {o}");
        }
        for (path, bytes) in &self.inputs {
            let _ = writeln!(m, "input {} {path}", sha256(bytes));
        }
        for (path, bytes, generator) in &self.outputs {
            let _ = writeln!(m, "output {} {path} {generator}", sha256(bytes));
        }
        m
    }
}
