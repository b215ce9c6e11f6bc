//! The seed programs' expected output, as the seed module states it.
use anyhow::{ensure, Context as _, Result};

/// examples/seed_capi.expected (what scripts/build-seed-capi.sh --run and gpu-verify.sh compare
/// the seed programs' output with) must be the seed's expected output of src/testing/seed.rs,
/// and examples/seed_naive.expected what the seed reports its naive version prints.
pub(crate) fn seed_capi_expected_output() -> Result<()> {
    for (file, want) in [
        ("seed_capi.expected", srb::testing::seed::EXPECTED),
        ("seed_naive.expected", srb::testing::seed::NAIVE),
    ] {
        let path = test_support::source_root::source_root()
            .join("examples")
            .join(file);
        let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
        ensure!(
            text == want,
            "examples/{file} differs from the seed module's text"
        );
    }
    Ok(())
}
