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
