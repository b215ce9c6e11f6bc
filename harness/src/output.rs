//! What a run leaves in `--out`: `compare.json` (the record: every measurement and target; its
//! fields and target names stay those of the committed runs under `results/`, so runs stay
//! comparable, but for what was added since, each named in the test below: the sized staged
//! copy's floor, `bare_sized_graph`, and its targets), `table.txt` (the text report, dated) and
//! `latency.svg` (the plot).
use crate::data::{Costs, Evaluation, GridProbe, LoopResult, Machine, Measurements, Point};
use crate::data::{LoopTrace, SeedCallback, SizedStep, Target};
use crate::stats::Summary;
use crate::{machine, plot, select, sweep};
use anyhow::{Context, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The JSON record of one run (field order as written).
#[derive(Debug, Serialize)]
pub struct Record<'a> {
    pub date_utc: String,
    /// The commit measured (see [`machine::commit`]).
    pub commit: String,
    pub command: String,
    pub machine: &'a Machine,
    pub reps: usize,
    pub sweep: &'a [Point],
    pub bandwidth_at_16m_gbps: BTreeMap<&'static str, f64>,
    pub enqueue_cost_small_n_us: BTreeMap<&'static str, Summary>,
    pub seed_callback: &'a SeedCallback,
    pub seed_loop: &'a [LoopResult],
    pub seed_trace: &'a [LoopTrace],
    /// The realistic producer (select n of 1M candidates, block-aggregated), every approach.
    pub realistic_sweep: &'a [Point],
    pub realistic_bandwidth_at_16m_gbps: BTreeMap<&'static str, f64>,
    /// Host cost of one append reservation + completion (the kernel's launch left out), µs.
    pub append_host_cost_us: Summary,
    pub mapped_grid_probe: &'a [GridProbe],
    pub enqueue_cost_breakdown: &'a Costs,
    pub variant_ratios: &'a [Target],
    pub pack_launch_shape_16m: &'a str,
    /// The seed's loop with its next kernel sized by the device count (issue 36).
    pub sized_step: &'a [SizedStep],
    pub targets: &'a [Target],
    pub notes: Vec<String>,
    pub elapsed_s: f64,
}

/// How to read the record's numbers.
pub fn notes() -> Vec<String> {
    vec![
        "crate = crate_mapped_trailer (the default: mapped transport, trailer polling), enqueued with the safe Readback::enqueue".into(),
        "the producer (hx_produce_f64) signals programmatic launch completion at its start, so the pack kernel (launched with programmatic dependent launch on sm_90) can be resident early; crate_trailer_no_trigger is the same readback after a producer that does not".into(),
        "latency: host clock from before the producer launch to the host holding count and data".into(),
        "schedule: each repetition runs every approach once, in a shuffled order of its own (seeded, the same in every run), each as an untimed settle cycle (its whole readback, none of its data read on the host) then the timed cycle, checked in full; so each timed cycle follows a cycle of its own approach, as each iteration of the criterion bench follows the one before, and no approach always runs after the same other one (in one fixed order the oracle always ran after over_copy's whole-capacity copy); the realistic sweep the same; --settle N and --fixed-order (in command) change it for A/B checks".into(),
        "counts alternate n and n-1 cycle by cycle (n >= 2): a stale size is wrong half the time".into(),
        "enqueue_us: time inside the readback's enqueue calls (for sync it includes the blocking cuStreamSynchronize)".into(),
        "each copy-based approach copies into a pinned destination of its own (as each crate readback has its own slots); oracle_after_host_read is the oracle with its destination's first n elements read by the host just before (what oracle measured while the copy-based approaches shared one destination and it ran right after over_copy's check)".into(),
        format!("oracle_criterion_way: the criterion bench's oracle (benches/readback.rs: srb_produce_f64, one copy of n, cudarc event, one element read), {} iterations back to back per sample, timed as one batch; latency, enqueue and wait are the batch means", sweep::CRITERION_BATCH),
        "realistic_sweep: the producer selects n of 1M candidates (i * p % 1M < n) with one atomic per block; copy-based approaches and crate_pack read its device output and a device count zeroed by cuMemsetD8Async before it; crate_append is the same selection appended into the slot; every cycle checked by count and an order-independent checksum".into(),
    ]
}

/// The record of run `m` with targets `e`, made at `date_utc` of `commit` by `command`, which
/// took `elapsed_s`.
pub fn record<'a>(
    m: &'a Measurements,
    e: &'a Evaluation,
    date_utc: String,
    commit: String,
    command: String,
    elapsed_s: f64,
) -> Record<'a> {
    Record {
        date_utc,
        commit,
        command,
        machine: &m.machine,
        reps: m.reps,
        sweep: &m.sweep,
        bandwidth_at_16m_gbps: sweep::bandwidth_16m(&m.sweep),
        enqueue_cost_small_n_us: sweep::enqueue_cost_small_n(&m.sweep),
        seed_callback: &m.seed_callback,
        seed_loop: &m.seed_loop,
        seed_trace: &m.seed_trace,
        realistic_sweep: &m.realistic,
        realistic_bandwidth_at_16m_gbps: select::bandwidth_16m(&m.realistic),
        append_host_cost_us: m.append_cost,
        mapped_grid_probe: &m.probe,
        enqueue_cost_breakdown: &m.costs,
        variant_ratios: &e.variants,
        pack_launch_shape_16m: &m.shape16,
        sized_step: &m.sized_step,
        targets: &e.targets,
        notes: notes(),
        elapsed_s,
    }
}

/// Writes `compare.json`, `table.txt` (`text`, dated) and `latency.svg` of run `m` into `dir`;
/// the run started at `started`.
pub fn write(
    dir: &Path,
    m: &Measurements,
    e: &Evaluation,
    text: &str,
    started: std::time::Instant,
) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let date = machine::date_utc();
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let elapsed = started.elapsed().as_secs_f64();
    let rec = record(m, e, date.clone(), machine::commit(), command, elapsed);
    std::fs::write(
        dir.join("compare.json"),
        serde_json::to_string_pretty(&rec)?,
    )?;
    std::fs::write(dir.join("table.txt"), format!("{date}\n{text}"))?;
    plot::latency(&dir.join("latency.svg"), m, &date)?;
    eprintln!(
        "compare: wrote {}/{{compare.json,table.txt,latency.svg}} in {elapsed:.1} s",
        dir.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{fixture, targets};
    use serde_json::Value;
    use std::collections::BTreeSet;

    /// The newest committed harness run: the record must keep its fields and targets, so
    /// that runs stay comparable (what changed since is listed in the test).
    const COMMITTED: &str =
        include_str!("../../results/2026-12-03/harness-4a804c3/run-1/compare.json");

    /// Every field's path, `/`-joined; an array's elements are `[]` (all of them merged), and
    /// a map's keys (approaches, calls) are fields like any other.
    fn paths(v: &Value, at: &str, out: &mut BTreeSet<String>) {
        match v {
            Value::Object(o) => {
                for (k, x) in o {
                    let p = format!("{at}/{k}");
                    out.insert(p.clone());
                    paths(x, &p, out);
                }
            }
            Value::Array(a) => a.iter().for_each(|x| paths(x, &format!("{at}[]"), out)),
            _ => {}
        }
    }

    fn all_paths(v: &Value) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        paths(v, "", &mut out);
        out
    }

    /// The top-level keys in the order a pretty-printed record lists them.
    fn top_keys(json: &str) -> Vec<String> {
        json.lines()
            .filter_map(|l| l.strip_prefix("  \""))
            .filter_map(|l| l.split('"').next().map(str::to_string))
            .collect()
    }

    /// (name, limit, comparison) of each target of list `list`, in order.
    fn targets_of(v: &Value, list: &str) -> Vec<(String, f64, String)> {
        v[list]
            .as_array()
            .expect("a list of targets")
            .iter()
            .map(|t| {
                (
                    t["name"].as_str().expect("a name").to_string(),
                    t["limit"].as_f64().expect("a limit"),
                    t["comparison"].as_str().expect("a comparison").to_string(),
                )
            })
            .collect()
    }

    #[test]
    fn the_record_keeps_the_committed_fields_and_targets() {
        let committed: Value = serde_json::from_str(COMMITTED).expect("committed JSON");
        let m = fixture::measurements();
        let e = targets::evaluate(&m);
        let rec = record(
            &m,
            &e,
            "2026-12-03T00:00:00Z".into(),
            "0000000".into(),
            "compare".into(),
            60.0,
        );
        let json = serde_json::to_string_pretty(&rec).expect("serializes");
        let ours: Value = serde_json::from_str(&json).expect("parses back");

        let our_keys: Vec<String> = top_keys(&json)
            .into_iter()
            .filter(|k| k != "seed_trace" && k != "sized_step")
            .collect();
        assert_eq!(our_keys, top_keys(COMMITTED));
        // Added since: the realistic producer's sized staged pack (issue 34), its rows and its
        // two targets; the traced cycles of the seed loop (the timeline picture's source); the
        // sized step (issue 36), its rows and its ten variants (four of the exact-grid form).
        let added = "crate_pack_staged_sized";
        let sized_step = "next kernel sized by the device count";
        let ours_paths: BTreeSet<String> = all_paths(&ours)
            .into_iter()
            .filter(|p| {
                !p.contains(added) && !p.starts_with("/seed_trace") && !p.starts_with("/sized_step")
            })
            .collect();
        assert_eq!(ours_paths, all_paths(&committed));
        // Changed since: the floor's guard against the oracle, re-derived once the floor took
        // its slots in turn as the readback does.
        let floor_guard = "n 1..64K, cap 1M: bare_sized_graph p50 / oracle p50 (worst n)";
        let want: Vec<_> = targets_of(&committed, "targets")
            .into_iter()
            .map(|(name, limit, cmp)| {
                if name == floor_guard {
                    assert_eq!(limit, 2.2);
                    (name, 2.3, cmp)
                } else {
                    (name, limit, cmp)
                }
            })
            .collect();
        let (new, kept): (Vec<_>, Vec<_>) = targets_of(&ours, "targets")
            .into_iter()
            .partition(|t| t.0.contains(added));
        assert_eq!(kept, want);
        let limits: Vec<f64> = new.iter().map(|t| t.1).collect();
        assert_eq!(limits, [1.15, 1.10]);
        let mut want = targets_of(&committed, "variant_ratios");
        let (sized_variants, mut ours_variants): (Vec<_>, Vec<_>) =
            targets_of(&ours, "variant_ratios")
                .into_iter()
                .partition(|t| t.0.contains(sized_step));
        let limits: Vec<f64> = sized_variants.iter().map(|t| t.1).collect();
        assert_eq!(limits, [0.8, 1.0, 0.8, 1.0, 0.8, 1.0, 0.8, 1.0, 1.0, 1.0]);
        let key = |t: &(String, f64, String)| t.0.clone();
        ours_variants.sort_by_key(key);
        want.sort_by_key(key);
        assert_eq!(ours_variants, want);
        assert_eq!(e.targets.len(), 28);
        assert_eq!(e.variants.len(), 30);
    }
}
