//! The fuzz targets' checks, in plain functions of the fuzz bytes: the targets under
//! `fuzz_targets/` run them under libFuzzer (`cargo +nightly fuzz run <target>`), and
//! `capi/tests/fuzz_replay.rs` replays them over fixed and pseudo-random inputs under plain
//! `cargo test`, so CI (stable, no fuzzing) keeps them.
pub mod capi_calls;
pub mod capi_create;
pub mod input;
pub mod last_error;
pub mod trailer;
