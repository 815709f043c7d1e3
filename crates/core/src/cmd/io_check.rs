//! The byte-range lock check of a READ or a WRITE (issue 33): for a file homed on another node
//! when this node holds no I/O grant that decides it, the check is the home's. The request
//! changed nothing before it asked, so it parks while the home is asked, away from the I/O
//! thread ([`crate::lookup::Lookup::Home`], carried by the driver's home-call threads), and
//! runs again with the answer at hand, as a request that asks the id source does
//! ([`crate::cmd::ids::parked`]). The grant the answer brings is kept when it comes in
//! ([`arbiter::io_check_or_ask`]), so the READs and WRITEs after it decide here.
//!
//! A WRITE whose payload the driver received apart (spliced into pipes) parks the same way:
//! the driver keeps the pipes while the WRITE waits ([`crate::Connection::holds_payload`]) and
//! splices them into the file when it runs again, or drops them when it fails or its
//! connection goes. The driver is told to receive a WRITE whole when the check would need the
//! home ([`crate::Connection::detachable_write`]), so only one whose grant was taken back while
//! its payload came in waits so, and a connection holds one such payload at a time.
//!
//! On a share whose file system calls may wait on a network ([`crate::config::ShareDef::offloaded`]: FUSE,
//! CephFS), the check against local POSIX locks and the size a READ on FUSE asks before its
//! read are one file system job ([`crate::fsjob`]), made away from the I/O thread: the request
//! parks and runs again with its answer, as for the home's. A home's answer taken in the run
//! that asks the job is kept for the run after it ([`ConnCore::fs_kept`]), so each is asked
//! once.

use ringshare_wire::NtStatus;

use crate::arbiter::{self, Decision, IoAsk};
use crate::cmd::ids::ASK_IDS;
use crate::exchange::ConnCore;
use crate::files::{locks, oplock};
use crate::fsjob::{FsDone, FsJob, IoFacts, LockProbe};
use crate::fsmap::status_of;
use crate::lookup::{DomainAnswer, Lookup};
use crate::server::lock;
use crate::state::Open;

/// May `io` of `open` happen: `Ok(writers)` (whether an open of the file may write it), or
/// FILE_LOCK_CONFLICT; decided here, or the home's answer when this request asked and runs
/// again; else Err([`ASK_IDS`]) with the question to the home in [`ConnCore::ids_wanted`]
/// (the request parks and runs again when it is answered).
pub(crate) fn io_check(core: &mut ConnCore, open: &Open, io: IoAsk) -> Result<bool, NtStatus> {
    io_check_sized(core, open, io, (false, false)).map(|c| c.writers)
}

/// What [`io_check_sized`] found.
pub(crate) struct Checked {
    /// Whether an open of the file may write it.
    pub writers: bool,
    /// The file's size, asked with the checks on a share whose calls are made away from the
    /// I/O thread; `None` elsewhere (the caller asks the node itself).
    pub size: Option<ringshare_vfs::FsResult<u64>>,
    /// The file's modification time, asked with them there when `want_mtime` (a file's first
    /// WRITE: the write time shown until the update); `None` elsewhere.
    pub mtime: Option<ringshare_vfs::FsResult<ringshare_vfs::UnixNanos>>,
}

/// [`io_check`], and on a share whose calls are made away from the I/O thread, when
/// `want_size`, the file's size asked in the same job, when `want_mtime` its modification time.
pub(crate) fn io_check_sized(
    core: &mut ConnCore,
    open: &Open,
    io: IoAsk,
    (want_size, want_mtime): (bool, bool),
) -> Result<Checked, NtStatus> {
    let offloaded = open.share.offloaded();
    let writers = table_check(core, open, io, offloaded)?;
    if !offloaded {
        local_check(open, &io)?;
        return Ok(Checked {
            writers,
            size: None,
            mtime: None,
        });
    }
    let facts = fs_facts(core, open, &io, (want_size, want_mtime))?;
    if let Some(Ok(true)) = facts.locked {
        return Err(NtStatus::FILE_LOCK_CONFLICT);
    }
    Ok(Checked {
        writers,
        size: facts.size,
        mtime: facts.mtime,
    })
}

/// What a named stream's READ or WRITE job made ([`stream_io`]): the modification time asked
/// before a first WRITE (`None` when not asked), and the I/O's result.
pub(crate) struct StreamIo {
    pub mtime: Option<ringshare_vfs::FsResult<ringshare_vfs::UnixNanos>>,
    pub done: crate::io::IoDone,
}

/// Whether `open`'s READs and WRITEs are made in a file system job with their checks
/// ([`stream_io`]): a named stream whose data has no descriptor for the ring (the POSIX
/// backend keeps it in an extended attribute, read and written with xattr calls) on a share
/// whose calls may wait on a network (the review of session 47, finding 4).
pub(crate) fn stream_io_applies(open: &Open) -> bool {
    open.stream.is_some() && open.share.offloaded() && open.node.shared_fd().is_none()
}

/// [`io_check_sized`] and the I/O of a named stream ([`stream_io_applies`]) in one job: the
/// lock table decided here, as for any READ or WRITE, then the job (acting as the open's
/// user) probes local POSIX locks, reads the modification time when `want_mtime`, and, no
/// lock in the way, makes the I/O (`io`, which answers a [`crate::io::IoDone`]). The request
/// parks (Err([`ASK_IDS`])) and runs again with what the job made: the lock table is not
/// asked again then (the I/O is made; on a local share a lock granted between the check and
/// the ring's I/O does not stop it either). A lock found: FILE_LOCK_CONFLICT, nothing read or
/// written.
pub(crate) fn stream_io(
    core: &mut ConnCore,
    open: &Open,
    io: IoAsk,
    want_mtime: bool,
    make: impl FnOnce() -> crate::io::IoDone + Send + 'static,
) -> Result<StreamIo, NtStatus> {
    match core.domain_answer.take() {
        Some(DomainAnswer::Fs(FsDone::Io(facts), _)) => {
            // No I/O made: the job's probe found a lock in the way.
            let Some(io) = facts.io else {
                return Err(match facts.locked {
                    Some(Ok(true)) => NtStatus::FILE_LOCK_CONFLICT,
                    _ => NtStatus::INTERNAL_ERROR,
                });
            };
            let done = io
                .take::<crate::io::IoDone>()
                .ok_or(NtStatus::INTERNAL_ERROR)?;
            return Ok(StreamIo {
                mtime: facts.mtime,
                done,
            });
        }
        Some(DomainAnswer::Fs(FsDone::Done(r), _)) => {
            return Err(r.err().map_or(NtStatus::INTERNAL_ERROR, status_of))
        }
        other => core.domain_answer = other,
    }
    table_check(core, open, io, true)?;
    core.ids_wanted = Some(Lookup::Fs(FsJob::io_facts_then(
        open.node.clone(),
        (
            crate::fsjob::order_of(open.id),
            crate::fsjob::share_key(&open.share.name),
        ),
        local_probe(open, &io),
        want_mtime,
        move || crate::fsjob::Carried::new(make(), false),
    )));
    Err(ASK_IDS)
}

/// The file system job's answer for this request when it asked and runs again; else
/// Err([`ASK_IDS`]) with the job in [`ConnCore::ids_wanted`] (none when nothing is to be
/// asked: no lock probe and no size).
fn fs_facts(
    core: &mut ConnCore,
    open: &Open,
    io: &IoAsk,
    (want_size, want_mtime): (bool, bool),
) -> Result<IoFacts, NtStatus> {
    match core.domain_answer.take() {
        Some(DomainAnswer::Fs(FsDone::Io(facts), _)) => return Ok(facts),
        Some(DomainAnswer::Fs(FsDone::Done(r), _)) => {
            return Err(r.err().map_or(NtStatus::INTERNAL_ERROR, status_of))
        }
        other => core.domain_answer = other,
    }
    let probe = local_probe(open, io);
    if probe.is_none() && !want_size && !want_mtime {
        return Ok(IoFacts::default());
    }
    core.ids_wanted = Some(Lookup::Fs(FsJob::io_facts(
        open.node.clone(),
        crate::fsjob::order_of(open.id),
        crate::fsjob::share_key(&open.share.name),
        probe,
        (want_size, want_mtime),
    )));
    Err(ASK_IDS)
}

/// With `posix locking` (crates/core/src/cmd/lock/posix.rs), a READ or WRITE the lock table
/// allows is checked against local programs' POSIX locks too (`F_OFD_GETLK` on the open's
/// descriptor: its own locks never conflict, another open's only where the table's do), as
/// Samba 4.22 does with its defaults (`strict locking = Auto`, `posix locking = yes`):
/// FILE_LOCK_CONFLICT when a local lock is in the way. As there, an open whose lease or
/// oplock caches reads (for a READ) or writes (for a WRITE) is not checked: the common case
/// of Windows and macOS clients costs no system call; others' cost one per READ or WRITE
/// (about 0.4 us here, docs/limits.md). `strict locking = yes` checks cached ones too, `no`
/// none (the lock table is checked whatever it says).
fn local_check(open: &Open, io: &IoAsk) -> Result<(), NtStatus> {
    let Some((kind, start, len)) = local_probe(open, io) else {
        return Ok(());
    };
    match open.node.posix_locked(kind, start, len) {
        Ok(true) => Err(NtStatus::FILE_LOCK_CONFLICT),
        _ => Ok(()),
    }
}

/// Whether `io` of `open` asks a file system job for its lock check (its share's calls are
/// made away from the I/O thread and a probe is made): the driver then receives such a WRITE
/// whole ([`crate::Connection::detachable_write`]).
pub(crate) fn asks_fs_job(open: &Open, io: &IoAsk) -> bool {
    open.share.offloaded() && local_probe(open, io).is_some()
}

/// The lock probe [`local_check`] makes, or `None` when it makes none.
pub(crate) fn local_probe(open: &Open, io: &IoAsk) -> Option<LockProbe> {
    let strict = open.share.strict_locking;
    if !open.share.posix_locking || open.is_dir || strict == Some(false) {
        return None;
    }
    let (start, len) = locks::posix_range(io.offset, io.length)?;
    if strict.is_none() && oplock::caches(&lock(&open.entry), open.id, io.write) {
        return None;
    }
    let kind = if io.write {
        ringshare_vfs::OfdLock::Write
    } else {
        ringshare_vfs::OfdLock::Read
    };
    Some((kind, start, len))
}

/// The lock table's part of [`io_check`]. On a share whose calls are made away from the I/O
/// thread (`offloaded`), a home's answer taken here is kept for the run after a file system
/// job ([`ConnCore::fs_kept`]), and one kept so is taken.
fn table_check(
    core: &mut ConnCore,
    open: &Open,
    io: IoAsk,
    offloaded: bool,
) -> Result<bool, NtStatus> {
    match core.domain_answer.take() {
        Some(DomainAnswer::Home(answer)) => {
            if offloaded {
                core.fs_kept = Some(DomainAnswer::Home(answer.clone()));
            }
            return arbiter::io_check_answered(answer);
        }
        Some(DomainAnswer::Fs(done, Some(kept))) => {
            core.domain_answer = Some(DomainAnswer::Fs(done, None));
            if let DomainAnswer::Home(answer) = *kept {
                return arbiter::io_check_answered(answer);
            }
        }
        other => core.domain_answer = other,
    }
    match arbiter::io_check_or_ask(&core.server, open.key, &open.entry, io) {
        Decision::Made(r) => r,
        Decision::Ask(ask, ()) => {
            core.ids_wanted = Some(Lookup::Home(ask));
            Err(ASK_IDS)
        }
    }
}

/// [`io_check`] for a request that may make several checks, each of which may ask the home
/// (a copychunk's source and destination, chunk after chunk): the answers of the checks that
/// asked are kept, each by its question's tag (the file and the I/O), while the request parks
/// for the next one and runs again ([`crate::cmd::Asked::Homes`]), so that each check asks
/// once. A check whose answer is kept takes it; one decided here (a grant a kept answer
/// brought) asks nothing.
pub(crate) fn io_check_kept(core: &mut ConnCore, open: &Open, io: IoAsk) -> Result<bool, NtStatus> {
    let writers = table_check_kept(core, open, io)?;
    local_check(open, &io)?;
    Ok(writers)
}

/// The lock table's part of [`io_check_kept`].
pub(crate) fn table_check_kept(
    core: &mut ConnCore,
    open: &Open,
    io: IoAsk,
) -> Result<bool, NtStatus> {
    let tag = tag_of(open, &io);
    let kept = match core.domain_answer.take() {
        Some(DomainAnswer::Homes(kept)) => kept,
        other => {
            core.domain_answer = other;
            Vec::new()
        }
    };
    let answer = kept.iter().find(|(t, _)| *t == tag).map(|(_, a)| a.clone());
    if let Some(answer) = answer {
        core.domain_answer = Some(DomainAnswer::Homes(kept));
        return arbiter::io_check_answered(answer);
    }
    match arbiter::io_check_or_ask(&core.server, open.key, &open.entry, io) {
        Decision::Made(r) => {
            if !kept.is_empty() {
                core.domain_answer = Some(DomainAnswer::Homes(kept));
            }
            r
        }
        Decision::Ask(ask, ()) => {
            core.ids_wanted = Some(Lookup::Home(ask));
            core.home_kept = Some((tag, kept));
            Err(ASK_IDS)
        }
    }
}

/// The tag of an I/O check's question: its file, open and range, and whether it writes.
fn tag_of(open: &Open, io: &IoAsk) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (
        open.key, io.owner, io.offset, io.length, io.write, io.change,
    )
        .hash(&mut h);
    h.finish()
}
