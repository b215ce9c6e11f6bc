//! The fuzz targets' checks (`fuzz/checks/`) under plain `cargo test`, without libFuzzer: each
//! over fixed inputs (the edges the targets were written for) and a deterministic sweep of
//! pseudo-random ones, so CI (stable, no fuzzing) keeps them. The fuzzing itself:
//! `cd fuzz && cargo +nightly fuzz run <target>`.
extern crate srb as sized_readback;

#[allow(dead_code, missing_docs)]
#[path = "../../fuzz/checks/mod.rs"]
mod checks;

use checks::input::sweep;

/// Inputs per check in the sweep.
const SWEEP: usize = 3000;

/// Fixed create inputs: function, then the fields in `capi_create::check`'s order.
const CREATE: &[&[u8]] = &[
    &[],
    // srb_create, device 0, small capacity/slots, 1 column of 8 bytes, flags 0.
    &[0, 0, 1, 16, 1, 1, 2, 1, 1, 1, 1, 3, 1, 0, 1],
    // srb_create_append / srb_create_buckets, same.
    &[1, 0, 1, 16, 1, 1, 2, 1, 1, 1, 1, 3, 1, 0, 1],
    &[2, 0, 1, 16, 0, 1, 2, 1, 4, 1, 1, 3, 1, 0, 1],
    // Every field at its maximum.
    &[0xff; 64],
    &[0x02; 64],
    &[0x07; 64],
    // The fuzzer's first find (a fault of the check's model, not of the API): a bucketed
    // readback with the sized copy whose slot size overflows is refused for either reason.
    &[
        2, 2, 2, 2, 255, 255, 255, 255, 255, 255, 255, 255, 2, 196, 255, 61, 196, 196, 196, 2, 2,
        2, 10, 2, 2, 2, 2, 255, 131, 16, 16, 16, 255, 255, 255, 10, 0, 0, 0,
    ],
];

#[test]
fn capi_create_fixed_and_swept() {
    for input in CREATE {
        checks::capi_create::check(input);
    }
    for input in sweep(0x5eed_c4ea, SWEEP, 64) {
        checks::capi_create::check(&input);
    }
}

#[test]
fn capi_calls_fixed_and_swept() {
    // One input per call, then all of them in one sequence.
    let mut all = Vec::new();
    for op in 0..22u8 {
        let input = [op, 2, 0, 0, 0, 0, 1, 1, 1, 4, 4, 0, 0, 0, 0];
        checks::capi_calls::check(&input);
        all.extend_from_slice(&input);
    }
    checks::capi_calls::check(&all);
    for input in sweep(0xca11_5eed, SWEEP, 256) {
        checks::capi_calls::check(&input);
    }
}

#[test]
fn decode_trailer_fixed_and_swept() {
    let mut clean = vec![0u8; 32 + 17 + 8];
    clean[0] = 3; // count_raw
    clean[8] = 3; // count_copied
    clean[20..24].copy_from_slice(&0x3142_5253u32.to_le_bytes());
    clean[24] = 7; // seq
    clean[32] = 7; // expected seq
    clean[40] = 16; // capacity
    clean[49] = 16; // source length
    checks::trailer::check(&clean);
    let mut status = clean.clone();
    status[16] = 1;
    checks::trailer::check(&status);
    let mut over = clean.clone();
    over[40] = 2;
    checks::trailer::check(&over);
    checks::trailer::check(&[0xff; 128]);
    for input in sweep(0x007a_11e5, SWEEP, 128) {
        checks::trailer::check(&input);
    }
}
