//! `sized_readback::auto`'s thresholds follow from the committed runs they cite: the harness's
//! three runs at `b1e053b`, whose realistic sweep read back full slots of 1M and 16M `f64` rows
//! by the mapped pack (`crate_pack`) and by the staged one's whole-slot copy
//! (`crate_pack_staged`), beside the producer alone (`producer_only`).
use serde_json::Value;
use sized_readback::auto::{STAGED_MIN_BYTES, STAGED_MIN_FILL_PERMILLE};
use std::path::Path;

/// The sweep's rows are `f64`.
const ROW_BYTES: u64 = 8;

/// A full slot's p50 latencies (µs) in one run, producer included.
#[derive(Debug)]
struct Full {
    capacity: u64,
    mapped: f64,
    staged: f64,
    producer: f64,
}

/// Run `i`'s realistic sweep at its full slots (`n == capacity`), by capacity.
fn full_slots(i: usize) -> Vec<Full> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
        "../results/2026-12-04/harness-b1e053b/run-{i}/compare.json"
    ));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let run: Value = serde_json::from_str(&text).unwrap();
    let mut full: Vec<Full> = run["realistic_sweep"]
        .as_array()
        .expect("a realistic sweep")
        .iter()
        .filter(|p| p["n"] == p["capacity"])
        .map(|p| {
            let p50 = |a: &str| {
                p["approaches"][a]["latency_us"]["p50"]
                    .as_f64()
                    .unwrap_or_else(|| panic!("run {i}: no p50 of {a} at {}", p["n"]))
            };
            Full {
                capacity: p["capacity"].as_u64().unwrap(),
                mapped: p50("crate_pack"),
                staged: p50("crate_pack_staged"),
                producer: p50("producer_only"),
            }
        })
        .collect();
    full.sort_by_key(|f| f.capacity);
    full
}

#[test]
fn auto_policy_follows_the_committed_runs() {
    let runs: Vec<Vec<Full>> = (1..=3).map(full_slots).collect();
    let caps: Vec<u64> = runs[0].iter().map(|f| f.capacity).collect();
    for run in &runs {
        assert_eq!(run.iter().map(|f| f.capacity).collect::<Vec<_>>(), caps);
    }
    // At 1M rows (8 MiB) the mapped pack won in every run: no staged slots there.
    let one_m = caps
        .iter()
        .position(|&c| c == 1 << 20)
        .expect("a full 1M slot");
    for run in &runs {
        let f = &run[one_m];
        assert!(f.staged > f.mapped, "staged won at 1M: {f:?}");
    }
    // The smallest full slot at which staged won in every run gives the bytes.
    let at = (0..caps.len())
        .find(|&i| runs.iter().all(|run| run[i].staged < run[i].mapped))
        .expect("a full slot at which staged won in every run");
    assert_eq!(caps[at] * ROW_BYTES, STAGED_MIN_BYTES as u64);
    // Beyond the producer the mapped pack's time scales with the count and the whole-slot
    // copy's does not: staged wins from this share of the slot. The largest over the runs,
    // in thousandths rounded up, so that staged is chosen only where it won in every run.
    let fill = runs
        .iter()
        .map(|run| {
            let f = &run[at];
            assert!(f.mapped > f.producer && f.staged > f.producer, "{f:?}");
            (f.staged - f.producer) / (f.mapped - f.producer)
        })
        .fold(0.0, f64::max);
    assert!(fill > 0.0 && fill < 1.0, "fill {fill}");
    assert_eq!((1000.0 * fill).ceil() as usize, STAGED_MIN_FILL_PERMILLE);
}
