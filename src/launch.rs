//! The launch shape of a pack kernel.

/// Grid and block of a pack launch, and whether it may overlap the previous kernel's tail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LaunchShape {
    /// Blocks (x only).
    pub grid: u32,
    /// Threads per block (x only).
    pub block: u32,
    /// Programmatic dependent launch (sm_90+): the kernel may start before the previous
    /// kernel in the stream finishes, and waits for it with `griddepcontrol.wait`.
    pub programmatic: bool,
}
