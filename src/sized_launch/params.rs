//! The class setter's kernel parameter and status entry, as `csrc/switch/size_switch.cu`
//! lays them out (sizes and offsets tested below).

/// `SRB_SIZE_CLASSES_MAX`: the bounds one kernel parameter holds.
pub(crate) const CLASSES_MAX: usize = 32;

/// `srb_size_switch_params`, passed by value.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct SizeSwitchParams {
    pub(crate) count_ptr: u64,
    pub(crate) status_ptr: u64,
    pub(crate) seq: u64,
    pub(crate) count_kind: u32,
    pub(crate) classes: u32,
    pub(crate) n_max: [u64; CLASSES_MAX],
}

/// `srb_size_status`: one launch's outcome in pinned mapped host memory, read after the launch.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SizeStatus {
    pub(crate) raw: u64,
    pub(crate) status: u32,
    pub(crate) class: u32,
    pub(crate) seq: u64,
    pub(crate) reserved: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn layouts_match_size_switch_cu() {
        assert_eq!(size_of::<SizeSwitchParams>(), 288);
        assert_eq!(offset_of!(SizeSwitchParams, count_kind), 24);
        assert_eq!(offset_of!(SizeSwitchParams, n_max), 32);
        assert_eq!(size_of::<SizeStatus>(), 32);
        assert_eq!(offset_of!(SizeStatus, class), 12);
        assert_eq!(offset_of!(SizeStatus, seq), 16);
    }
}
