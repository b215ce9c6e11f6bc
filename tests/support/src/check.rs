//! Checks the GPU tests share: an expected error, and a readout's bytes.
use anyhow::{bail, Result};
use sized_readback::{Element, Error};

/// `r` must be an error for which `ok` holds; `what` names the case in the failure.
pub fn expect_err<T>(
    r: std::result::Result<T, Error>,
    what: &str,
    ok: impl Fn(&Error) -> bool,
) -> Result<()> {
    match r {
        Ok(_) => bail!("{what}: accepted"),
        Err(e) if ok(&e) => Ok(()),
        Err(e) => bail!("{what}: wrong error {e}"),
    }
}

/// The bytes of a slice of elements.
pub fn as_bytes<T: Element>(s: &[T]) -> &[u8] {
    // SAFETY: Element types are plain old data without padding requirements on reads.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), std::mem::size_of_val(s)) }
}
