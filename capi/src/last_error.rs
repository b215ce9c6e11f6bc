//! This thread's message for its last failed call: `srb_last_error`.
use std::cell::Cell;
use std::ffi::c_char;

/// Bytes of the per-thread error buffer, NUL included: longer messages are truncated.
const LAST_ERROR_BYTES: usize = 1024;

thread_local! {
    /// This thread's last error message, NUL-terminated. A fixed buffer, so the address
    /// `srb_last_error` hands out stays valid for the thread's life: a later error rewrites
    /// the text in place instead of freeing it. `const`-initialized and without a
    /// destructor, so it is usable even while the thread's other locals are torn down.
    static LAST_ERROR: Cell<[u8; LAST_ERROR_BYTES]> = const { Cell::new([0; LAST_ERROR_BYTES]) };
}

/// `msg` as a NUL-terminated C string in a `LAST_ERROR_BYTES` buffer: interior NULs become
/// spaces, and a message too long is cut at a UTF-8 character boundary.
fn c_message(msg: &str) -> [u8; LAST_ERROR_BYTES] {
    let mut end = msg.len().min(LAST_ERROR_BYTES - 1);
    while !msg.is_char_boundary(end) {
        end -= 1;
    }
    let mut buf = [0u8; LAST_ERROR_BYTES];
    for (dst, &b) in buf.iter_mut().zip(&msg.as_bytes()[..end]) {
        *dst = if b == 0 { b' ' } else { b };
    }
    buf
}

/// Makes `msg` this thread's last error.
pub(crate) fn set_last_error(msg: &str) {
    // Fails only if the thread-local is gone (thread teardown): the message is dropped.
    let _ = LAST_ERROR.try_with(|e| e.set(c_message(msg)));
}

/// This thread's message for its last failed call (empty if none), NUL-terminated, at most
/// 1023 bytes (longer messages are cut at a UTF-8 character boundary). The text is valid
/// until this thread's next failing `srb_` call, which overwrites it in place (the pointer
/// itself stays dereferenceable for the thread's life, so reading it after another call is
/// no use-after-free); copy it to keep it.
#[no_mangle]
pub extern "C" fn srb_last_error() -> *const c_char {
    LAST_ERROR
        .try_with(|e| e.as_ptr().cast::<c_char>().cast_const())
        // Only during thread teardown: no message then.
        .unwrap_or(c"".as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn last_error() -> String {
        // SAFETY: srb_last_error returns this thread's NUL-terminated buffer.
        unsafe { CStr::from_ptr(srb_last_error()) }
            .to_str()
            .expect("UTF-8")
            .to_owned()
    }

    #[test]
    fn messages_are_nul_terminated_without_interior_nuls() {
        let buf = c_message("bad\0value");
        assert_eq!(&buf[..10], b"bad value\0");
        assert!(buf[10..].iter().all(|&b| b == 0));
        assert_eq!(c_message("")[0], 0);
    }

    #[test]
    fn long_messages_are_cut_at_a_character_boundary() {
        // 1022 ASCII bytes then a 3-byte character: the character does not fit in 1023.
        let msg = format!("{}€tail", "x".repeat(LAST_ERROR_BYTES - 2));
        let buf = c_message(&msg);
        let text = CStr::from_bytes_until_nul(&buf).unwrap().to_str().unwrap();
        assert_eq!(text.len(), LAST_ERROR_BYTES - 2);
        assert!(text.bytes().all(|b| b == b'x'));
        // Exactly 1023 bytes fit whole.
        let fits = "y".repeat(LAST_ERROR_BYTES - 1);
        let buf = c_message(&fits);
        assert_eq!(
            CStr::from_bytes_until_nul(&buf).unwrap().to_str(),
            Ok(&*fits)
        );
    }

    /// A caller may keep the pointer across failures (C code reads it after the next call):
    /// it stays the same and readable, with the newest text, cut to the buffer. (The same
    /// through failing `srb_` calls: capi/tests/capi/arguments.rs, `capi_argument_errors`.)
    #[test]
    fn the_error_pointer_is_stable_across_failures() {
        set_last_error("the readback handle is null");
        let first = srb_last_error();
        assert_eq!(last_error(), "the readback handle is null");
        let too_long = "z".repeat(5000);
        set_last_error(&too_long);
        assert_eq!(srb_last_error(), first, "same buffer");
        assert_eq!(last_error(), too_long[..LAST_ERROR_BYTES - 1]);
        // Another thread has its own buffer and message.
        let other = std::thread::spawn(|| {
            set_last_error("elsewhere");
            (srb_last_error() as usize, last_error())
        })
        .join()
        .unwrap();
        assert_ne!(other.0, first as usize);
        assert_eq!(other.1, "elsewhere");
        assert_eq!(last_error(), too_long[..LAST_ERROR_BYTES - 1]);
    }
}
