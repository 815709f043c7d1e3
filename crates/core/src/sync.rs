//! Locking as the whole crate does it.

use std::sync::Mutex;

/// Lock a mutex, recovering the data if a panicking thread poisoned it (the
/// data of these tables stays consistent at every await-free step).
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
