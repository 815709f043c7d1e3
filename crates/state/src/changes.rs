//! The decisions of [`crate::decide`] that may break an oplock or lease held by a parked
//! (disconnected) durable open, with those opens closed after ([`crate::durable::purge`]):
//! nobody can hear or acknowledge their break (smbtorture's
//! durable-v2-open.purge-disconnected-rh-with-write and -with-rename). Above both modules, so
//! that deciding does not import the closing of opens.

use std::sync::Mutex;

use ringshare_wire::NtStatus;

use crate::decide::{self, IoAsk, LockAsk, Locked};
use crate::server::{FileEntry, ServerState};

const WHY: &str = "whose oplock or lease a change breaks";

/// [`decide::lock_decided`], then the parked opens its breaks went to closed.
pub fn lock_decided(
    server: &ServerState,
    entry: &Mutex<FileEntry>,
    owner: u64,
    asks: &[LockAsk],
    max: usize,
    now_ms: u64,
) -> Locked {
    let mut parked = Vec::new();
    let r = decide::lock_decided(server, entry, owner, asks, max, now_ms, &mut parked);
    crate::durable::purge(server, &parked, WHY);
    r
}

/// [`decide::io_check_here`], then the parked opens its breaks went to closed.
pub fn io_check_here(
    server: &ServerState,
    entry: &Mutex<FileEntry>,
    io: IoAsk,
) -> Result<bool, NtStatus> {
    let mut parked = Vec::new();
    let r = decide::io_check_here(server, entry, io, &mut parked);
    crate::durable::purge(server, &parked, WHY);
    r
}

/// [`decide::changed_here`], then the parked opens its breaks went to closed.
pub fn changed_here(server: &ServerState, entry: &Mutex<FileEntry>, owner: u64, now_ms: u64) {
    let mut parked = Vec::new();
    decide::changed_here(server, entry, owner, now_ms, &mut parked);
    crate::durable::purge(server, &parked, WHY);
}

/// [`decide::rename_waits_here`], then the parked opens its breaks went to closed (a wait for
/// them ends as they close).
pub fn rename_waits_here(
    server: &ServerState,
    entry: &Mutex<FileEntry>,
    owner: u64,
    conn_id: u64,
    now_ms: u64,
) -> bool {
    let mut parked = Vec::new();
    let r = decide::rename_waits_here(server, entry, owner, conn_id, now_ms, &mut parked);
    crate::durable::purge(server, &parked, WHY);
    r
}
