//! `srb_release`: gives a held readback's slot back.
use crate::boundary::{guard, lock};
use crate::codes::SRB_OK;
use crate::handle::{handle, not_held, srb_readback, table};

/// Releases readback `seq`'s slot for reuse; its data pointers become invalid. A readback
/// released before it completes is still waited for on the device before its slot is reused.
///
/// # Safety
/// `rb` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn srb_release(rb: *const srb_readback, seq: u64) -> i32 {
    guard(|| {
        // SAFETY: per the contract.
        let h = unsafe { handle(rb)? };
        let released = {
            let mut table = lock(table(h));
            let at = table
                .iter()
                .position(|t| t.seq() == seq)
                .ok_or_else(|| not_held(h, seq, ""))?;
            table.swap_remove(at)
        };
        // Outside the table's lock: the last hold of a ticket or replay gives its slot back.
        drop(released);
        Ok(SRB_OK)
    })
}
