//! The boundary every C call crosses: its result or error as a code (the message kept as this
//! thread's last error), and no panic across it.
use crate::codes::{code_of, SRB_ERR_INVALID_ARGUMENT, SRB_ERR_PANIC, SRB_NOT_READY, SRB_OK};
use crate::last_error::set_last_error;
use srb::Error;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, MutexGuard};

/// What went wrong in a C call: an `SRB_*` code and its message.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: i32,
    pub(crate) message: String,
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure {
            code: code_of(&e),
            message: e.to_string(),
        }
    }
}

/// `SRB_ERR_INVALID_ARGUMENT` with `message`.
pub(crate) fn invalid(message: impl Into<String>) -> Failure {
    Failure {
        code: SRB_ERR_INVALID_ARGUMENT,
        message: message.into(),
    }
}

/// `SRB_NOT_READY` for readback `seq`.
pub(crate) fn in_flight(seq: u64) -> Failure {
    Failure {
        code: SRB_NOT_READY,
        message: format!("readback {seq} is still in flight"),
    }
}

/// Runs `f`, turning an error or a panic into a code and this thread's last error.
pub(crate) fn guard(f: impl FnOnce() -> Result<i32, Failure>) -> i32 {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(code)) => code,
        Ok(Err(fail)) => {
            set_last_error(&fail.message);
            fail.code
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            set_last_error(&format!("internal error (Rust panic): {what}"));
            SRB_ERR_PANIC
        }
    }
}

/// [`guard`] for the calls that return a pointer: the pointer `f` gives, or null (with this
/// thread's last error set) on an error or a panic.
pub(crate) fn guard_ptr(f: impl FnOnce() -> Result<*const c_void, Failure>) -> *const c_void {
    let mut ptr = std::ptr::null();
    match guard(|| {
        ptr = f()?;
        Ok(SRB_OK)
    }) {
        SRB_OK => ptr,
        _ => std::ptr::null(),
    }
}

/// Locks one of a handle's tables.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The tables are consistent between statements, so a poisoned lock is still usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}
