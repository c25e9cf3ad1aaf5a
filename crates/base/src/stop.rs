//! The stop flag: one `AtomicBool` that a stage's threads watch and any of them (or Ctrl-C) raises
//! to end the stage. The guards raise it when a thread leaves, so that a thread that ends early,
//! by an error or a panic, never leaves the others waiting for it; `panic_message` turns the
//! payload of a panic that was caught into words for the error that reports it.

use std::sync::atomic::{AtomicBool, Ordering};

/// Raises the flag when dropped, unwinding included: "when this thread ends, everybody stops".
pub struct RaiseOnDrop<'a>(pub &'a AtomicBool);

impl Drop for RaiseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Raises the flag when dropped while its thread panics: "if this thread dies, everybody stops".
pub struct RaiseOnPanic<'a>(pub &'a AtomicBool);

impl Drop for RaiseOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::SeqCst);
        }
    }
}

/// The message of a caught panic (`&str` or `String` payloads; anything else has none).
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drop_guard_raises_the_flag_on_a_plain_return() {
        let flag = AtomicBool::new(false);
        drop(RaiseOnDrop(&flag));
        assert!(flag.load(Ordering::SeqCst));
    }

    #[test]
    fn a_panic_guard_raises_the_flag_only_while_unwinding() {
        let flag = AtomicBool::new(false);
        drop(RaiseOnPanic(&flag));
        assert!(!flag.load(Ordering::SeqCst), "a thread that returns normally does not stop the others");
        let caught = std::panic::catch_unwind(|| {
            let _guard = RaiseOnPanic(&flag);
            panic!("worker 3 failed");
        });
        assert!(flag.load(Ordering::SeqCst));
        assert_eq!(panic_message(caught.unwrap_err().as_ref()), "worker 3 failed");
        let formatted = std::panic::catch_unwind(|| panic!("worker {} failed", 4)).unwrap_err();
        assert_eq!(panic_message(formatted.as_ref()), "worker 4 failed");
        assert_eq!(panic_message(&7_u32), "no message");
    }
}
