//! The `ringshare` binary's library half: configuration, command line and user management,
//! kept out of `main.rs` so that they can be tested.
//!
//! **Invariant:** no crate names this one: it is where the sans-I/O core meets sockets,
//! clocks, threads and configuration files.
#![forbid(unsafe_code)]

pub mod accounts;
pub mod bench;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod control;
pub mod driver;
pub mod kdc;
pub mod kerberos;
pub mod limit;
pub mod local_kdc;
pub mod logging;
pub mod logwriter;
pub mod mdns;
pub mod metrics;
pub mod quic;
pub mod quota;
pub mod reload;
pub mod sdnotify;
pub mod serve;
pub mod sssd_ids;
pub mod status;
pub mod testparm;
pub mod users;
pub mod winbind;
pub mod winbind_ids;
pub mod witness;
pub mod wsd;

/// Lock a mutex, taking the data even if a panicking thread poisoned it.
pub fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
