//! The JSON record an example writes for `results/`, as `scripts/verify-summarize.py` and
//! `results/README.md` read them: the run's date, commit and machine (`SRB_DATE`, `SRB_COMMIT`,
//! `SRB_MACHINE`, as `scripts/gpu-verify.sh` sets them), its command and note, what it
//! measured per way, and its targets. Shared by the examples that measure (`#[path]`).
use anyhow::{Context, Result};
use serde::Serialize;
use std::path::Path;

/// `x` to `places` decimals: the figures as the records print them.
pub(crate) fn round(x: f64, places: i32) -> f64 {
    let k = 10f64.powi(places);
    (x * k).round() / k
}

/// A target: `measured` against `limit` by `comparison` (`"<="` or `">="`); `why` is kept
/// where it misses.
#[derive(Debug, Serialize)]
pub(crate) struct Target {
    pub(crate) name: String,
    pub(crate) measured: f64,
    limit: f64,
    comparison: &'static str,
    holds: bool,
    why: Option<String>,
}

impl Target {
    pub(crate) fn new(
        name: impl Into<String>,
        measured: f64,
        limit: f64,
        comparison: &'static str,
        why: Option<String>,
    ) -> Self {
        let holds = match comparison {
            "<=" => measured <= limit,
            _ => measured >= limit,
        };
        Target {
            name: name.into(),
            measured: round(measured, 3),
            limit,
            comparison,
            holds,
            why: if holds { None } else { why },
        }
    }
}

#[derive(Serialize)]
struct Record<'a, W> {
    date: String,
    commit: String,
    machine: String,
    command: &'a str,
    note: &'a str,
    ways: &'a [W],
    targets: &'a [Target],
}

/// Writes the record of one run to `path`.
pub(crate) fn write<W: Serialize>(
    path: &Path,
    command: &str,
    note: &str,
    ways: &[W],
    targets: &[Target],
) -> Result<()> {
    let env = |key: &str, default: &str| std::env::var(key).unwrap_or_else(|_| default.into());
    let record = Record {
        date: env("SRB_DATE", ""),
        commit: env("SRB_COMMIT", "unknown"),
        machine: env("SRB_MACHINE", ""),
        command,
        note,
        ways,
        targets,
    };
    let text = serde_json::to_string_pretty(&record)? + "\n";
    std::fs::write(path, text).with_context(|| path.display().to_string())
}
