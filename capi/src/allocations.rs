//! `srb_live_allocations`: the library's own live memory, for a C or Fortran caller's leak check.
use crate::boundary::{guard, invalid};
use crate::codes::SRB_OK;

/// The library's allocations alive at one moment, over every device (`srb_live_allocations`).
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct srb_allocations {
    /// Device memory (`cuMemAlloc`): the staged transports' device slots and block counters.
    pub device: usize,
    /// Their bytes.
    pub device_bytes: usize,
    /// Page-locked host memory (`cuMemHostAlloc`): the slots, mapped or not.
    pub pinned: usize,
    /// Their bytes.
    pub pinned_bytes: usize,
}

/// Stores in `*out` the device and pinned allocations the library holds now. Once every
/// handle made since is destroyed (`srb_destroy`), the counts are back where they were: a
/// caller's leak check can tell the library's memory from its own. Needs no driver (all zero
/// without one).
///
/// Returns `SRB_OK`; `SRB_ERR_INVALID_ARGUMENT` for a null `out`.
///
/// # Safety
/// `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn srb_live_allocations(out: *mut srb_allocations) -> i32 {
    guard(|| {
        if out.is_null() {
            return Err(invalid("out is null"));
        }
        let a = srb::allocations::live();
        // SAFETY: out is non-null and writable per the contract.
        unsafe {
            *out = srb_allocations {
                device: a.device,
                device_bytes: a.device_bytes,
                pinned: a.pinned,
                pinned_bytes: a.pinned_bytes,
            }
        };
        Ok(SRB_OK)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codes::SRB_ERR_INVALID_ARGUMENT;

    #[test]
    fn a_null_out_is_an_invalid_argument_and_a_valid_one_is_filled() {
        // SAFETY: a null out is allowed.
        let null = unsafe { srb_live_allocations(std::ptr::null_mut()) };
        assert_eq!(null, SRB_ERR_INVALID_ARGUMENT);
        let mut a = srb_allocations {
            device: usize::MAX,
            ..Default::default()
        };
        // SAFETY: a writable local.
        let ok = unsafe { srb_live_allocations(&mut a) };
        assert_eq!(ok, SRB_OK);
        assert_ne!(a.device, usize::MAX, "written");
        assert!(a.device_bytes >= a.device && a.pinned_bytes >= a.pinned);
    }
}
