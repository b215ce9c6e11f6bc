//! `sized_readback::auto`'s thresholds follow from the committed run they cite: the Python
//! benchmark at `51a5d22`, whose full 1M-row slot was read back mapped and staged in one run.
use serde_json::Value;
use std::path::Path;

/// The p50 latency (µs) of `approach` at the sweep point of `n` rows.
fn p50(run: &Value, n: u64, approach: &str) -> f64 {
    let point = run["sweep"]
        .as_array()
        .expect("a sweep")
        .iter()
        .find(|p| p["n"] == n)
        .unwrap_or_else(|| panic!("no sweep point at n = {n}"));
    point["approaches"][approach]["latency_us"]["p50"]
        .as_f64()
        .unwrap_or_else(|| panic!("no p50 of {approach} at n = {n}"))
}

#[test]
fn auto_policy_follows_the_committed_run() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../results/2026-12-03/python-51a5d22/bench.json");
    let run: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let cap = run["settings"]["capacity"].as_u64().unwrap();
    let bytes = cap as f64 * 8.0; // f64 rows
    let producer = p50(&run, cap, "producer_only");
    let mapped_gbps = bytes / (p50(&run, cap, "sized_readback") - producer) / 1e3;
    let staged_gbps = bytes / (p50(&run, cap, "sized_readback_staged") - producer) / 1e3;
    assert!(
        staged_gbps > mapped_gbps,
        "staged {staged_gbps:.1} GB/s, mapped {mapped_gbps:.1}"
    );
    // The fill from which staged wins, in thousandths, rounded down.
    let fill = (1000.0 * mapped_gbps / staged_gbps).floor() as usize;
    assert_eq!(fill, sized_readback::auto::STAGED_MIN_FILL_PERMILLE);
    // The fewest bytes of rows at which the run saw staged win: its full slot.
    assert_eq!(bytes as usize, sized_readback::auto::STAGED_MIN_BYTES);
}
