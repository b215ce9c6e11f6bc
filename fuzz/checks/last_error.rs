//! `srb_last_error` as the checks see it: this thread's buffer, which must stay where it is,
//! NUL-terminated within its 1024 bytes, in UTF-8.
use sized_readback_capi as capi;
use std::ffi::c_char;

/// Bytes of the C API's message buffer, NUL included.
const BYTES: usize = 1024;

/// This thread's message buffer, as first seen.
pub struct LastError {
    at: *const c_char,
}

impl LastError {
    /// The buffer's address now.
    pub fn new() -> Self {
        LastError {
            at: capi::srb_last_error(),
        }
    }

    /// The message (checked to be NUL-terminated within the buffer and UTF-8).
    pub fn text(&self) -> String {
        let p = capi::srb_last_error();
        // SAFETY: the C API's thread buffer is BYTES long and lives as long as the thread.
        let bytes = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), BYTES) };
        let end = bytes
            .iter()
            .position(|&b| b == 0)
            .expect("srb_last_error is not NUL-terminated within its 1024 bytes");
        std::str::from_utf8(&bytes[..end])
            .expect("srb_last_error is not UTF-8")
            .to_owned()
    }

    /// After a failing call: a message was left.
    pub fn check_failure(&self, what: &dyn Fn() -> String) {
        assert!(!self.text().is_empty(), "no message: {}", what());
    }

    /// The buffer has not moved.
    pub fn check_stable(&self) {
        assert_eq!(capi::srb_last_error(), self.at, "srb_last_error moved");
    }
}
