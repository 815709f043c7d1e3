//! The per-file arbitration seam (issue 18, docs/research/2026-11-26-cluster-seam.md):
//! the decisions a file's share-mode entry makes for an open — may it
//! happen, what caching it gets, what breaks first, what its close frees —
//! taken here, in one place, instead of by each command.
//!
//! Each decision runs on the file's [`FileEntry`] in this process when the
//! file is homed here (always, outside a cluster: the `*_here` functions of
//! [`crate::decide`], and [`crate::cluster::home`]'s for those that first take
//! back other nodes' I/O grants), and is asked of the file's home node otherwise
//! ([`crate::cluster`]); commands do not know which. A node keeps a
//! *shadow* entry for a file homed elsewhere: its own opens (without
//! caching, so it never breaks anything itself), for what stays local
//! (write times, status).
//!
//! The arbiter is the front of the cluster layer (issue 30): the protocol core's commands call
//! it; it depends on the cluster's modules and on crate::decide below them, and nothing of the
//! cluster layer or below names it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use ringshare_vfs::RelPath;
use ringshare_wire::NtStatus;

use crate::cluster::grant::{self, IoGrant};
use crate::cluster::msg::{self, Answer, Call};
use crate::cluster::{self, shadow, HomeClose};
use crate::decide::{self, home};
pub use crate::decide::{delete_pending, Closed, IoAsk, LockAsk, Locked, OpenAsk};
use crate::files::locks::ByteRangeLock;
use crate::files::oplock::{self, Grant, LeaseId};
use crate::lookup::HomeAsk;
use crate::server::{lock, FileEntry, FileKey, FileTable, NodeState, ServerState};

/// A decision made here at once, or to be asked of the file's home by a call carried away
/// from the I/O thread (the request waits for its answer, the thread does not).
pub enum Decision<T, P = Asking> {
    Made(T),
    /// The call, and what its answer needs.
    Ask(HomeAsk, P),
}

/// An open asked of its file's home away from the I/O thread ([`admit_or_ask`]): if its
/// request goes away before the answer is in ([`Asking::withdraw`]), the open the home may
/// admit meanwhile is closed there.
pub struct Asking {
    withdrawn: Arc<AtomicBool>,
    key: FileKey,
    owner: u64,
    share: String,
    who: Option<ringshare_vfs::Who>,
    /// Asked of this node, the file's home, away from the I/O thread (its decision needed
    /// calls to other nodes: [`cluster::home::admit_away`]): no shadow entry follows the answer.
    here: bool,
}

impl Asking {
    /// The question of open `ask` of file `key`, asked of another node or (`here`) of this one.
    fn of(key: FileKey, ask: &OpenAsk<'_>, here: bool) -> Asking {
        Asking {
            withdrawn: Arc::default(),
            key,
            owner: ask.owner,
            share: ask.share.to_string(),
            who: ask.who.cloned(),
            here,
        }
    }

    /// The open is decided here, the file's home, on a home-call thread (not on another node).
    pub fn decided_here(&self) -> bool {
        self.here
    }

    /// The request that asked went (its connection closed): the open is closed at the file's
    /// home, by the question itself when its answer is still to come (it admitted the open),
    /// and by a close sent until a home takes it ([`crate::cluster::ClusterNode::resend_closes`]:
    /// one that finds no such open is done), which reaches the home after its answer when the
    /// answer came first.
    pub fn withdraw(self, here: &NodeState) {
        self.withdrawn.store(true, Ordering::SeqCst);
        if let Some(who) = self.who {
            lock(&here.unsent_closes).push(cluster::UnsentClose {
                key: self.key,
                owner: self.owner,
                delete_on_close: false,
                share: self.share,
                who,
            });
        }
    }
}

/// Admit an open of `key` (whose entry is `entry`): `Ok(Some(grant))` when it joined the
/// file's opens with that caching; `Ok(None)` when it must wait for breaks (sent; the
/// connection is woken to try again); `Err(status)` when the file refuses it (DELETE_PENDING,
/// a sharing violation, streams open that do not share delete). The call to the file's home
/// (when the file is homed on another node) is carried away from the I/O thread:
/// [`Decision::Ask`], whose answer [`admit_answered`] takes; so is the decision of a file homed
/// here that must first call other nodes ([`Asking::decided_here`]).
pub fn admit_or_ask(
    server: &Arc<ServerState>,
    key: FileKey,
    entry: &Arc<Mutex<FileEntry>>,
    ask: &OpenAsk<'_>,
) -> Decision<Result<Option<Grant>, NtStatus>> {
    let node = match home(&server.node, key) {
        Ok(None) => return admit_at_home(server, key, entry, ask),
        Ok(Some(node)) => node,
        Err(s) => return Decision::Made(Err(s)),
    };
    let Some(link) = server.node.link().cloned() else {
        return Decision::Made(Err(NtStatus::INTERNAL_ERROR));
    };
    let asking = Asking::of(key, ask, false);
    let (withdrawn, owner) = (Arc::clone(&asking.withdrawn), ask.owner);
    let message = cluster::call_bytes(&*link, node, Call::Admit(key, Box::new(msg::Ask::of(ask))));
    let entry = Arc::clone(entry);
    let order = cluster::order_of(key);
    let mut ask = HomeAsk::wire(Arc::clone(&link), node, order, message);
    let answered = move |answer: &crate::lookup::HomeResult| {
        let admitted = match cluster::answer_of(answer.clone()) {
            Ok(Answer::Admitted(_, io)) => {
                // Kept as the answer comes in, where the call is carried (as the I/O thread
                // did when it carried it): a revocation the home sends after it answered,
                // before the CREATE runs again, finds the grant here and takes it back, and
                // the CREATE does not store it again.
                lock(&entry).grants.held = IoGrant(io);
                true
            }
            _ => false,
        };
        // Withdrawn while it was asked: the open the home admitted is closed there, a call
        // that follows this one (before the next about the file).
        (admitted && withdrawn.load(Ordering::SeqCst)).then(|| {
            let close = Call::Close {
                key,
                owner,
                delete_on_close: false,
            };
            HomeAsk::wire(link, node, order, msg::Message::Call(close).encode())
        })
    };
    if let crate::lookup::Carry::Wire(w) = &mut ask.carry {
        w.then(Box::new(answered));
    }
    Decision::Ask(ask, asking)
}

/// [`admit_or_ask`] of a file homed here: decided on this (the I/O) thread unless deciding
/// calls other nodes ([`cluster::home::admit_in_place`]); then a home-call thread decides it
/// ([`cluster::home::admit_away`]) and the CREATE waits for that answer as for a peer's.
fn admit_at_home(
    server: &Arc<ServerState>,
    key: FileKey,
    entry: &Arc<Mutex<FileEntry>>,
    ask: &OpenAsk<'_>,
) -> Decision<Result<Option<Grant>, NtStatus>> {
    if let Some(r) = cluster::home::admit_in_place(server, key, entry, ask) {
        return Decision::Made(r);
    }
    let asking = Asking::of(key, ask, true);
    let withdrawn = Arc::clone(&asking.withdrawn);
    match cluster::home::admit_away(server, key, entry, ask, withdrawn) {
        Ok(call) => Decision::Ask(call, asking),
        Err(s) => Decision::Made(Err(s)),
    }
}

/// The home answered the call [`admit_or_ask`] made for `ask` (the bytes that came back, or
/// why none did): [`admit_or_ask`]'s result. `here`: asked of this node, the file's home
/// ([`Asking::decided_here`]): the entry is the file's own, already decided.
pub fn admit_answered(
    files: &FileTable,
    key: FileKey,
    entry: &Arc<Mutex<FileEntry>>,
    (ask, here): (&OpenAsk<'_>, bool),
    answer: Result<Vec<u8>, NtStatus>,
) -> Result<Option<Grant>, NtStatus> {
    let answer = cluster::answer_of(answer);
    match (here, answer) {
        (true, Ok(Answer::Admitted(g, _))) => Ok(Some(g)),
        (_, answer) => admitted(files, key, entry, ask, answer),
    }
}

/// The home's answer to an open it was asked for: the shadow entry follows it (the node's
/// I/O grant it brings was kept as the answer came in: [`admit_or_ask`]).
fn admitted(
    files: &FileTable,
    key: FileKey,
    entry: &Arc<Mutex<FileEntry>>,
    ask: &OpenAsk<'_>,
    answer: Result<Answer, NtStatus>,
) -> Result<Option<Grant>, NtStatus> {
    match answer? {
        Answer::Admitted(g, _) => {
            shadow::admitted(&mut lock(entry), ask, &g);
            if let (Some(lid), oplock::LEVEL_LEASE) = (ask.wish.lease, g.level) {
                files.set_lease_file(lid, key);
            }
            Ok(Some(g))
        }
        Answer::Wait => Ok(None),
        Answer::Refused(s) => Err(s),
        a => Err(cluster::unexpected(&a)),
    }
}

/// An admitted open leaves before it was ever used (its CREATE failed
/// after [`admit_or_ask`]): a close that asked for nothing (it holds no locks). A file homed
/// on another node lets it go from its shadow entry at once, and its home hears of it by a
/// close sent until a home takes it ([`crate::cluster::ClusterNode::resend_closes`]), not by a
/// call the calling thread waits for (an I/O thread, on a CREATE's failure paths: the review
/// of session 46, finding 9).
pub fn withdraw(
    server: &ServerState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    owner: u64,
    who: &ringshare_vfs::Who,
) {
    match home(&server.node, key) {
        Ok(Some(_)) => HomeClose::new(key, entry, owner, false, who).withdraw(&server.node),
        _ => {
            decide::close(server, key, entry, owner, false, who);
        }
    }
}

/// Open `owner` of `key` closes (crate::decide::close), its call to the file's home (when the
/// file is homed on another node) carried away from the I/O thread: [`Decision::Ask`], whose
/// answer [`close_answered`] takes. The shadow entry lets the open go at once.
pub fn close_or_ask(
    server: &ServerState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    owner: u64,
    delete_on_close: bool,
    who: &ringshare_vfs::Who,
) -> Decision<Closed, HomeClose> {
    let Ok(Some(node)) = home(&server.node, key) else {
        return Decision::Made(decide::close(
            server,
            key,
            entry,
            owner,
            delete_on_close,
            who,
        ));
    };
    let c = HomeClose::new(key, entry, owner, delete_on_close, who);
    match cluster::to_ask(&server.node, node, c.call()) {
        Ok(ask) => Decision::Ask(ask, c),
        Err(s) => Decision::Made(c.answered(server, Err(s))),
    }
}

/// The home answered the close [`close_or_ask`] asked (the bytes that came back, or why none
/// did): what the close leaves.
pub fn close_answered(
    server: &ServerState,
    c: HomeClose,
    answer: Result<Vec<u8>, NtStatus>,
) -> Closed {
    c.answered(server, cluster::answer_of(answer))
}

/// Open `owner` locks these ranges of file `key`, all or none: a lock
/// first breaks other opens' read caching. At most `max` locks per open. The call to the
/// file's home (when the file is homed on another node) is carried away from the I/O thread:
/// [`Decision::Ask`], whose answer [`lock_answered`] takes; so is the decision of a file homed
/// here that must first take back other nodes' I/O grants (`Decision::Ask(_, true)`: decided
/// here, on a home-call thread).
pub fn lock_or_ask(
    server: &Arc<ServerState>,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    owner: u64,
    asks: &[LockAsk],
    max: usize,
    now_ms: u64,
) -> Decision<Locked, bool> {
    let node = match home(&server.node, key) {
        Ok(None) => {
            let here = cluster::home::lock_ranges_in_place(server, entry, owner, asks, max, now_ms);
            if let Some(locked) = here {
                return Decision::Made(locked);
            }
            // Other nodes hold grants the lock ends: a home-call thread takes them back.
            return match cluster::home::lock_away(server, key, owner, asks, max, now_ms) {
                Ok(call) => Decision::Ask(call, true),
                Err(s) => Decision::Made(Locked::Refused(s)),
            };
        }
        Ok(Some(node)) => node,
        Err(s) => return Decision::Made(Locked::Refused(s)),
    };
    let call = Call::Lock {
        key,
        owner,
        asks: asks.iter().map(|a| (a.lock, a.fail_immediately)).collect(),
        max: max.min(u32::MAX as usize) as u32,
        now_ms,
    };
    match cluster::to_ask(&server.node, node, call) {
        Ok(ask) => Decision::Ask(ask, false),
        Err(s) => Decision::Made(Locked::Refused(s)),
    }
}

/// The home answered the LOCK [`lock_or_ask`] asked for open `owner` (the bytes that came
/// back, or why none did): the locks granted join the shadow entry while the open is there.
/// `here`: asked of this node, the file's home ([`lock_or_ask`]'s `Decision::Ask(_, true)`):
/// the locks are in the file's own entry already.
pub fn lock_answered(
    entry: &Mutex<FileEntry>,
    (owner, here): (u64, bool),
    asks: &[LockAsk],
    answer: Result<Vec<u8>, NtStatus>,
) -> Locked {
    match cluster::answer_of(answer) {
        Ok(Answer::Done) if here => Locked::Granted,
        Ok(Answer::Done) => {
            let mut e = lock(entry);
            // A close of the open ran meanwhile: the home frees its locks with it.
            if e.opens.iter().any(|o| o.owner == owner) {
                shadow::locked(&mut e, asks.iter().filter_map(|a| a.lock.ok()));
            }
            Locked::Granted
        }
        Ok(Answer::Wait) => match asks {
            [LockAsk { lock: Ok(l), .. }] => Locked::Wait(*l),
            _ => Locked::Refused(NtStatus::INTERNAL_ERROR),
        },
        Ok(Answer::Refused(s)) | Err(s) => Locked::Refused(s),
        Ok(a) => Locked::Refused(cluster::unexpected(&a)),
    }
}

/// A waiting lock tries its range again: `Made(true)` when it is now held. The call to the
/// file's home (when the file is homed on another node) is carried away from the I/O thread:
/// [`Decision::Ask`], whose answer [`retry_answered`] takes.
pub fn retry_lock_or_ask(
    here: &NodeState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    l: ByteRangeLock,
) -> Decision<bool, ()> {
    match home(here, key) {
        Ok(None) => Decision::Made(lock(entry).locks.try_lock(l)),
        Ok(Some(node)) => match cluster::to_ask(here, node, Call::RetryLock(key, l)) {
            Ok(ask) => Decision::Ask(ask, ()),
            Err(_) => Decision::Made(false),
        },
        Err(_) => Decision::Made(false),
    }
}

/// The home answered the retry [`retry_lock_or_ask`] asked: true when the lock is held now
/// (it joins the shadow entry while its open is there; a close of the open that ran
/// meanwhile reaches the home after the retry and frees it there).
pub fn retry_answered(
    entry: &Mutex<FileEntry>,
    l: ByteRangeLock,
    answer: Result<Vec<u8>, NtStatus>,
) -> bool {
    let held = matches!(cluster::answer_of(answer), Ok(Answer::Flag(true)));
    if held {
        let mut e = lock(entry);
        if e.opens.iter().any(|o| o.owner == l.owner) {
            shadow::locked(&mut e, [l]);
        }
    }
    held
}

/// Whether the file's delete is pending; with `set`, make it so (or not) first
/// ([`delete_pending`]). The call to the file's home (when the file is homed on another node)
/// is carried away from the I/O thread: [`Decision::Ask`], whose answer
/// [`delete_pending_answered`] takes.
pub fn delete_pending_or_ask(
    here: &NodeState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    set: Option<bool>,
) -> Decision<Result<(bool, bool), NtStatus>, ()> {
    match home(here, key) {
        Ok(None) => Decision::Made(Ok(decide::delete_pending_here(entry, set))),
        Ok(Some(node)) => match cluster::to_ask(here, node, Call::DeletePending(key, set)) {
            Ok(ask) => Decision::Ask(ask, ()),
            Err(s) => Decision::Made(Err(s)),
        },
        Err(s) => Decision::Made(Err(s)),
    }
}

/// The home answered the question [`delete_pending_or_ask`] asked: `Ok((pending, newly))`, the
/// shadow entry following it.
pub fn delete_pending_answered(
    entry: &Mutex<FileEntry>,
    answer: Result<Vec<u8>, NtStatus>,
) -> Result<(bool, bool), NtStatus> {
    shadow::delete_pending(entry, cluster::answer_of(answer))
}

/// The (offset, length) ranges an UNLOCK names, in order (a bad element: its status).
pub type Ranges = Vec<Result<(u64, u64), NtStatus>>;

/// Open `owner` unlocks these (offset, length) ranges, in order; the first
/// that is refused (a bad element: its status) or that it does not hold
/// (RANGE_NOT_LOCKED) ends the request, and those before it stay unlocked
/// ([MS-SMB2] 3.3.5.14.1 processes the elements in order). The call to the file's home (when
/// the file is homed on another node) is carried away from the I/O thread: [`Decision::Ask`],
/// whose answer [`unlock_answered`] takes.
pub fn unlock_or_ask(
    here: &NodeState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    owner: u64,
    ranges: Ranges,
) -> Decision<Result<(), NtStatus>, Ranges> {
    let node = match home(here, key) {
        Ok(None) => {
            let ranges = ranges.into_iter();
            return Decision::Made(decide::unlock_ranges_here(entry, owner, ranges));
        }
        Ok(Some(node)) => node,
        Err(s) => return Decision::Made(Err(s)),
    };
    let call = Call::Unlock {
        key,
        owner,
        ranges: ranges.clone(),
    };
    match cluster::to_ask(here, node, call) {
        Ok(ask) => Decision::Ask(ask, ranges),
        Err(s) => Decision::Made(Err(s)),
    }
}

/// The home answered the UNLOCK [`unlock_or_ask`] asked for open `owner`: the ranges leave
/// the shadow entry.
pub fn unlock_answered(
    entry: &Mutex<FileEntry>,
    owner: u64,
    ranges: &[Result<(u64, u64), NtStatus>],
    answer: Result<Vec<u8>, NtStatus>,
) -> Result<(), NtStatus> {
    match cluster::answer_of(answer)? {
        Answer::Done => {
            shadow::unlocked(&mut lock(entry), owner, ranges);
            Ok(())
        }
        Answer::Refused(s) => Err(s),
        a => Err(cluster::unexpected(&a)),
    }
}

/// The call asking the home about an I/O.
fn io_call(key: FileKey, io: IoAsk) -> Call {
    Call::Io {
        key,
        owner: io.owner,
        offset: io.offset,
        length: io.length,
        write: io.write,
        change: io.change,
        now_ms: io.now_ms,
    }
}

/// What the home's answer to an I/O check says of the I/O.
fn io_decided(answer: Answer) -> Result<bool, NtStatus> {
    match answer {
        Answer::Io { conflict: true, .. } => Err(NtStatus::FILE_LOCK_CONFLICT),
        Answer::Io { writers, .. } => Ok(writers),
        Answer::Refused(s) => Err(s),
        a => Err(cluster::unexpected(&a)),
    }
}

/// Whether [`io_check_or_ask`] decides this I/O without a call (the file is homed here, or
/// this node holds the I/O grant it needs): a WRITE whose payload the driver would receive
/// apart is received so only then (its pipes are kept while it waits for the home only when
/// the grant went while the payload came in).
pub fn io_decided_here(
    here: &NodeState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    io: IoAsk,
) -> bool {
    match home(here, key) {
        Ok(None) => true,
        Ok(Some(_)) => grant::local_io(&lock(entry), io.owner, io.write, io.change).is_some(),
        Err(_) => false,
    }
}

/// May this I/O happen (no other open's byte-range lock covers it: FILE_LOCK_CONFLICT
/// otherwise)? `Ok(writers)`: whether an open of the file (this one too) may write it. Decided
/// here when the file is homed here or this node's I/O grant decides it; else the call to the
/// file's home is carried away from the I/O thread: [`Decision::Ask`], whose answer
/// [`io_check_answered`] takes. The grant the answer brings is kept as the answer comes in,
/// on the thread that carried the call (as when the I/O thread carried it): a revocation the
/// home sends after it answered finds it there and takes it back.
pub fn io_check_or_ask(
    server: &ServerState,
    key: FileKey,
    entry: &Arc<Mutex<FileEntry>>,
    io: IoAsk,
) -> Decision<Result<bool, NtStatus>, ()> {
    let node = match home(&server.node, key) {
        Ok(None) => return Decision::Made(crate::changes::io_check_here(server, entry, io)),
        Ok(Some(node)) => node,
        Err(s) => return Decision::Made(Err(s)),
    };
    if let Some(writers) = grant::local_io(&lock(entry), io.owner, io.write, io.change) {
        return Decision::Made(Ok(writers));
    }
    match cluster::to_ask(&server.node, node, io_call(key, io)) {
        Ok(ask) => {
            let entry = Arc::clone(entry);
            let ask = ask.then(Box::new(move |answer: &crate::lookup::HomeResult| {
                if let Ok(Answer::Io { grant, .. }) = cluster::answer_of(answer.clone()) {
                    lock(&entry).grants.held = IoGrant(grant);
                }
            }));
            Decision::Ask(ask, ())
        }
        Err(s) => Decision::Made(Err(s)),
    }
}

/// The home answered the I/O check [`io_check_or_ask`] asked: `Ok(writers)`, or
/// FILE_LOCK_CONFLICT (or why the home gave no answer).
pub fn io_check_answered(answer: Result<Vec<u8>, NtStatus>) -> Result<bool, NtStatus> {
    io_decided(cluster::answer_of(answer)?)
}

/// Open `owner` changed the file other than by a WRITE (its size): other opens' read caching
/// breaks. Decided at once when the file is homed here; the call that tells the file's home
/// (another node) is posted: nobody waits for it (its answer says nothing), and the home's
/// calls about one file are carried in the order asked, so a later CLOSE or CREATE of the file
/// reaches the home after it.
pub fn changed_posted(
    server: &ServerState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    owner: u64,
    now_ms: u64,
) -> Option<HomeAsk> {
    match home(&server.node, key) {
        Ok(None) => {
            crate::changes::changed_here(server, entry, owner, now_ms);
            None
        }
        Ok(Some(node)) => {
            let call = Call::Changed { key, owner, now_ms };
            match cluster::to_ask(&server.node, node, call) {
                Ok(ask) => Some(ask),
                Err(s) => {
                    tracing::warn!(?key, %s, "a file's home did not hear of a change");
                    None
                }
            }
        }
        Err(_) => None,
    }
}

/// Before open `owner` renames its file: others give up caching handles. True when the
/// rename must wait for their acknowledgments (connection `conn_id` is woken to try again).
/// The call to the file's home (a file homed on another node) is carried away from the I/O
/// thread: [`Decision::Ask`], whose answer [`rename_waits_answered`] takes.
pub fn rename_waits_or_ask(
    server: &ServerState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    owner: u64,
    conn_id: u64,
    now_ms: u64,
) -> Decision<Result<bool, NtStatus>, ()> {
    let node = match home(&server.node, key) {
        Ok(None) => {
            let waits = crate::changes::rename_waits_here(server, entry, owner, conn_id, now_ms);
            return Decision::Made(Ok(waits));
        }
        Ok(Some(node)) => node,
        Err(s) => return Decision::Made(Err(s)),
    };
    let call = Call::Rename {
        key,
        owner,
        conn_id,
        now_ms,
    };
    match cluster::to_ask(&server.node, node, call) {
        Ok(ask) => Decision::Ask(ask, ()),
        Err(s) => Decision::Made(Err(s)),
    }
}

/// The home answered the question [`rename_waits_or_ask`] asked: whether the rename waits.
pub fn rename_waits_answered(answer: Result<Vec<u8>, NtStatus>) -> Result<bool, NtStatus> {
    match cluster::answer_of(answer)? {
        Answer::Flag(waits) => Ok(waits),
        Answer::Refused(s) => Err(s),
        a => Err(cluster::unexpected(&a)),
    }
}

/// The file now lives at `to` (a rename): where its last close removes it. The call that
/// tells the file's home (a file homed on another node) is posted: nobody waits for it (the
/// home's calls about one file are carried in the order asked).
pub fn moved_posted(
    here: &NodeState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    to: &RelPath,
) -> Option<HomeAsk> {
    lock(entry).path = to.clone();
    let Ok(Some(node)) = home(here, key) else {
        return None;
    };
    match cluster::to_ask(here, node, Call::Moved(key, to.clone())) {
        Ok(ask) => Some(ask),
        Err(s) => {
            tracing::warn!(?key, %s, "a file's home did not hear of a rename");
            None
        }
    }
}

/// Open `owner` acknowledges an oplock break to `level`: the level it now holds. Opens waiting
/// on the file try again. The call to the file's home (a file homed on another node) is
/// carried away from the I/O thread: [`Decision::Ask`], whose answer [`ack_oplock_answered`]
/// takes.
pub fn ack_oplock_or_ask(
    server: &ServerState,
    key: FileKey,
    entry: &Mutex<FileEntry>,
    owner: u64,
    level: u8,
) -> Decision<Result<u8, NtStatus>, ()> {
    match home(&server.node, key) {
        Ok(None) => Decision::Made(decide::ack_oplock_here(server, entry, owner, level)),
        Ok(Some(node)) => {
            match cluster::to_ask(&server.node, node, Call::AckOplock { key, owner, level }) {
                Ok(ask) => Decision::Ask(ask, ()),
                Err(s) => Decision::Made(Err(s)),
            }
        }
        Err(s) => Decision::Made(Err(s)),
    }
}

/// The home answered the acknowledgment [`ack_oplock_or_ask`] asked: the level open `owner`
/// now holds, the shadow entry following it.
pub fn ack_oplock_answered(
    entry: &Mutex<FileEntry>,
    owner: u64,
    answer: Result<Vec<u8>, NtStatus>,
) -> Result<u8, NtStatus> {
    let l = level_of(cluster::answer_of(answer)?)?;
    shadow::oplock_now(&mut lock(entry), owner, l as u8);
    Ok(l as u8)
}

/// Lease `id` on file `key` is acknowledged at `state`: the state it now has. Opens waiting on
/// the file try again. The call to the file's home (a file homed on another node) is carried
/// away from the I/O thread: [`Decision::Ask`], whose answer [`ack_lease_answered`] takes.
pub fn ack_lease_or_ask(
    server: &ServerState,
    key: FileKey,
    id: LeaseId,
    state: u32,
    now_ms: u64,
) -> Decision<Result<u32, NtStatus>, ()> {
    let node = match home(&server.node, key) {
        Ok(None) => return Decision::Made(decide::ack_lease_here(server, key, id, state, now_ms)),
        Ok(Some(node)) => node,
        Err(s) => return Decision::Made(Err(s)),
    };
    let call = Call::AckLease {
        key,
        id,
        state,
        now_ms,
    };
    match cluster::to_ask(&server.node, node, call) {
        Ok(ask) => Decision::Ask(ask, ()),
        Err(s) => Decision::Made(Err(s)),
    }
}

/// The home answered the acknowledgment [`ack_lease_or_ask`] asked: the state lease `id` of
/// file `key` now has, the shadow entry following it.
pub fn ack_lease_answered(
    files: &FileTable,
    key: FileKey,
    id: LeaseId,
    answer: Result<Vec<u8>, NtStatus>,
) -> Result<u32, NtStatus> {
    let l = level_of(cluster::answer_of(answer)?)?;
    if let Some(e) = files.existing(key) {
        shadow::lease_now(&mut lock(&e), id, l);
    }
    Ok(l)
}

/// The level (or lease state) an acknowledgment's answer gives, or the home's refusal.
fn level_of(answer: Answer) -> Result<u32, NtStatus> {
    match answer {
        Answer::Refused(s) => Err(s),
        a => a.level().ok_or_else(|| cluster::unexpected(&a)),
    }
}
