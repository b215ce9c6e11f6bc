//! The checked-in C header (`capi/include/sized_readback.h`) must be what cbindgen generates from
//! this crate (`capi/src/`) with `capi/cbindgen.toml`. Runs without a GPU (CI). To update the header
//! after changing the C API: `SRB_BLESS=1 cargo test -p sized-readback-capi --test c_header`.
use std::path::Path;

fn generate(root: &Path) -> String {
    let config = cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_crate(root)
        .generate()
        .expect("cbindgen could not parse capi/src/");
    let mut out = Vec::new();
    bindings.write(&mut out);
    let text = String::from_utf8(out).expect("cbindgen writes UTF-8");
    // Negative constants in parentheses, so `x-SRB_ERR_CUDA` and the like parse as meant.
    text.lines()
        .map(
            |l| match l.strip_prefix("#define ").and_then(|r| r.split_once(" -")) {
                Some((name, value)) => format!("#define {name} (-{value})"),
                None => l.to_string(),
            },
        )
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

#[test]
fn c_header_matches_capi_src() {
    let root = &test_support::source_root::source_root().join("capi");
    let fresh = generate(root);
    let path = root.join("include/sized_readback.h");
    if std::env::var_os("SRB_BLESS").is_some() {
        std::fs::write(&path, &fresh).expect("writing include/sized_readback.h");
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    if checked_in != fresh {
        let line = checked_in
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .map_or_else(
                || "at the end".to_string(),
                |i| format!("at line {}", i + 1),
            );
        panic!(
            "capi/include/sized_readback.h differs from what capi/src/ generates ({line}): \
             run `SRB_BLESS=1 cargo test -p sized-readback-capi --test c_header` and commit it"
        );
    }
}

#[test]
fn c_header_declares_the_whole_api() {
    let root = &test_support::source_root::source_root().join("capi");
    let header = generate(root);
    for f in [
        "srb_create",
        "srb_create_append",
        "srb_destroy",
        "srb_enqueue",
        "srb_append_begin",
        "srb_append_end",
        "srb_append_desc_graph",
        "srb_record",
        "srb_poll",
        "srb_wait",
        "srb_next",
        "srb_count",
        "srb_data",
        "srb_fetch_spill",
        "srb_spill_data",
        "srb_release",
        "srb_capacity",
        "srb_last_error",
    ] {
        assert!(
            header.contains(&format!("{f}(")),
            "{f} missing from the header"
        );
    }
    assert!(header.contains("typedef struct srb_readback srb_readback;"));
    assert!(header.contains("#define SRB_ERR_OVERRUN (-12)"));
    assert!(
        header.contains("CUstream_st *stream"),
        "streams as struct CUstream_st pointers, so no CUDA header is needed"
    );
    assert!(
        !header.contains("cuda.h"),
        "the header needs no CUDA header"
    );
}
