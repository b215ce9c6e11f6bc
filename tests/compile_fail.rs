//! The lifetime rules of the API, proven by programs that must not compile (trybuild checks
//! each one's error against its `.stderr`; `TRYBUILD=overwrite cargo test --test compile_fail`
//! updates them). Runs without a GPU.
#[test]
fn lifetimes_that_must_not_compile() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/compile_fail/*.rs");
}
