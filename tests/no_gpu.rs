//! Runs everywhere: without a driver or a device, opening one is an error value, not a panic.
use sized_readback::{device, Error};

#[test]
fn opening_a_device_never_panics() {
    match device::open(0) {
        Ok(ctx) => assert_eq!(ctx.ordinal(), 0),
        Err(Error::DriverNotFound) | Err(Error::NoDevice { ordinal: 0, .. }) => {}
        Err(e) => panic!("unexpected error: {e}"),
    }
    match device::count() {
        Ok(n) => assert!(
            device::open(n).is_err(),
            "ordinal {n} of {n} devices opened"
        ),
        Err(e) => assert!(matches!(e, Error::DriverNotFound), "{e}"),
    }
}

/// Each readback type's `check` refuses bad settings before any driver call, so a binding
/// answers the same with or without a GPU; good settings pass.
#[test]
fn settings_are_checked_without_a_driver() {
    use sized_readback::{
        AppendReadback, BucketReadback, ColumnReadback, ColumnSchema, GraphReadback,
        ReadbackConfig, Result, Transport, WaitMode,
    };
    let mut schema = ColumnSchema::new();
    schema.column::<f64>();
    schema.raw_column(4);
    let good = ReadbackConfig::new(1024);
    ColumnReadback::check(&schema, &good).unwrap();
    BucketReadback::check(&schema, &good.clone().buckets(4)).unwrap();
    AppendReadback::check(&schema, &good.clone().buckets(4).spill(0)).unwrap();
    GraphReadback::check(&schema, &good).unwrap();
    let refused = |r: Result<()>, what: &str, says: &str| match r {
        Err(Error::InvalidConfig { reason }) => {
            assert!(reason.contains(says), "{what}: {reason}");
            // C and Python show the same text: settings in words, not Rust items.
            for item in ["::", "Readback", "StagedCopy", "WaitMode", "max_blocks("] {
                assert!(!reason.contains(item), "{what} names {item}: {reason}");
            }
        }
        other => panic!("{what}: {other:?}"),
    };
    let zero = ReadbackConfig::new(0);
    refused(ColumnReadback::check(&schema, &zero), "pack", "capacity");
    refused(
        BucketReadback::check(&schema, &zero),
        "bucket pack",
        "capacity",
    );
    refused(AppendReadback::check(&schema, &zero), "append", "capacity");
    refused(GraphReadback::check(&schema, &zero), "graph", "capacity");
    refused(
        ColumnReadback::check(&ColumnSchema::new(), &good),
        "no columns",
        "1 to 8 columns",
    );
    refused(
        ColumnReadback::check(&schema, &good.clone().buckets(4)),
        "buckets on a pack",
        "only bucket-pack readbacks",
    );
    refused(
        ColumnReadback::check(&schema, &good.clone().spill(64)),
        "a spill on a pack",
        "only append readbacks",
    );
    refused(
        BucketReadback::check(&schema, &good.clone().buckets(4).spill(64)),
        "a spill on a bucket pack",
        "only append readbacks",
    );
    ColumnReadback::check(&schema, &good.clone().spill(0)).unwrap();
    refused(
        ColumnReadback::check(&schema, &good.clone().max_blocks(0)),
        "no blocks",
        "at least one block",
    );
    refused(
        AppendReadback::check(&schema, &good.clone().max_blocks(0)),
        "no blocks for an append readback's pack",
        "at least one block",
    );
    refused(
        BucketReadback::check(&schema, &good.clone().buckets(257)),
        "257 buckets",
        "1 to 256 buckets",
    );
    refused(
        AppendReadback::check(&schema, &good.clone().spill(usize::MAX)),
        "a spill that overflows",
        "overflows",
    );
    refused(
        ColumnReadback::check(&schema, &good.clone().slots(0)),
        "no slots",
        "at least 1 slot",
    );
    refused(
        ColumnReadback::check(
            &schema,
            &good
                .clone()
                .transport(Transport::Staged)
                .wait(WaitMode::Trailer),
        ),
        "staged trailer waits",
        "mapped transport",
    );
    refused(
        GraphReadback::check(&schema, &good.clone().transport(Transport::Staged)),
        "a staged graph",
        "mapped transport",
    );
    refused(
        GraphReadback::check(&schema, &good.clone().programmatic_launch(true)),
        "a programmatic graph",
        "programmatic launch",
    );
}
