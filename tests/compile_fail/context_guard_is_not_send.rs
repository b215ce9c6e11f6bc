// A context guard restores the current context of the thread that made it: it cannot move to
// another thread (where its drop would bind the context there instead).
fn main() {
    let guard = sized_readback::device::ContextGuard::save();
    std::thread::spawn(move || drop(guard));
}
