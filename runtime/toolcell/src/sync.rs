//! One way to take a lock, for the core and the crates above it (`toolcell-mcp`,
//! `toolcell-oci`, `toolcell-cli`); hidden from the API an embedder sees.

use std::sync::{Mutex, MutexGuard};

/// `mutex`'s guard, whether or not a thread panicked while holding it.
///
/// A poisoned lock is taken as it is rather than spreading the panic: everything toolcell
/// guards with a mutex (counts, queues, maps of running calls and questions, open files) is
/// changed in steps that each leave it whole, and a server that stops answering because one
/// request panicked would be worse than the state a panic could leave. This is the one place
/// that choice is written down and made.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_is_taken_with_its_data() {
        let mutex = std::sync::Arc::new(Mutex::new(1));
        let held = std::sync::Arc::clone(&mutex);
        let panicked = std::thread::spawn(move || {
            let mut guard = lock(&held);
            *guard = 2;
            panic!("poison it");
        })
        .join();
        assert!(panicked.is_err());
        assert!(mutex.is_poisoned());
        assert_eq!(*lock(&mutex), 2);
    }
}
