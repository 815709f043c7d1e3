//! Locking as the whole crate does it.

use std::sync::{Mutex, RwLock};

/// Lock a mutex, recovering the data if a panicking thread poisoned it (the
/// data of these tables stays consistent at every await-free step).
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A copy of what a read-write lock holds (a value replaced whole, so a
/// poisoned lock still holds a whole one).
pub fn snapshot<T: Clone>(l: &RwLock<T>) -> T {
    l.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Replace what a read-write lock holds.
pub fn replace<T>(l: &RwLock<T>, v: T) {
    *l.write().unwrap_or_else(|e| e.into_inner()) = v;
}
