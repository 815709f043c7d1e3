//! A rename, a hard link and a delete disposition on a share whose calls may wait on a network
//! (issue 33, step 6, second part; docs/cluster-internals.md, "File system calls off the I/O
//! thread"; [`crate::config::ShareDef::offloaded`]: FUSE, CephFS, NFS).
//!
//! A rename or link asks two jobs of the open's order. The first looks ([`Looked`]): the
//! target's directory found case-insensitively, the name's holder and its attributes. The
//! request runs again with that and decides on the I/O thread, as before, everything about the
//! server's shared state: the opens below a directory, the target directory's DELETE opens, the
//! breaks of the file's and the replaced file's handle caching (and the wait for them), whether
//! the replaced file is open, the questions to the files' homes. The second job makes the calls
//! decided ([`Moving`]): the replaced name's removal, the rename or link, an AppleDouble file's
//! rename. When they worked the job itself tells watchers and the directories' leases
//! ([`told`]), as a local share's rename tells them as it is made, so they hear of it also when
//! the SET_INFO's connection went while the job was out (the review of session 47, finding 3);
//! the I/O thread then tells the file's home ([`moved`]).
//!
//! While a rename's job is out the file's entry says so ([`crate::server::FileEntry::renaming`]):
//! another rename of the file (another open's) waits, retried as one that waits for breaks,
//! so two renames of one file are made one after the other, each from the name the other left.
//! The job itself makes the server's table follow the disk once its rename worked: the counts of
//! name changes of the source and the target ([`crate::server::FileTable::name_changed`]: a
//! CREATE that looked either name up looks again, cmd/create/offload.rs `stale`), the
//! entry's path, the paths below a renamed directory, the open's own path, the replaced file's
//! entry marked unlinked; then the entry's mark goes, also when the job failed or never ran.
//! So the table is right even when the SET_INFO's connection went while the job was out; the
//! file's home is told then too ([`Telling`]: by the request's letting go when the job had
//! ended, else by the job as it ends).
//!
//! A delete disposition's questions (the file's attributes: read-only?; a directory's names:
//! empty?) are one job ([`delete_facts`]); the request runs again with them and decides as
//! before.

use std::sync::Arc;

use ringshare_vfs::{FileAttr, FsError, RelPath};
use ringshare_wire::fscc::FileRenameInformation;
use ringshare_wire::NtStatus;

use super::{target_of, Target, WAIT};
use crate::arbiter;
use crate::cmd::home_asks::HomeAsks;
use crate::cmd::ids::ASK_IDS;
use crate::cmd::Handled;
use crate::exchange::{ConnCore, Reply};
use crate::fsjob::{Carried, FsDone, FsJob};
use crate::fsmap::status_of;
use crate::io::Now;
use crate::lookup::DomainAnswer;
use crate::notify;
use crate::server::{lock, FileKey, ServerState};
use crate::state::Open;

/// What the first job of a rename or link found.
pub(crate) struct Looked {
    /// The open's path it looked from (a look made before another rename moved the file is
    /// made again).
    source: RelPath,
    target: Result<Target, NtStatus>,
    /// The target name's holder: the path it is stored at, and its attributes (read when it is
    /// not the source itself, or always for a link).
    holder: Result<Option<Holder>, NtStatus>,
}

/// The holder of a target's name: the path it is stored at, and its attributes when read.
type Holder = (RelPath, Option<Result<FileAttr, NtStatus>>);

/// The answer of a rename's or link's look, when this run carries it (Err: the job could not
/// run).
pub(crate) fn looked(core: &mut ConnCore) -> Option<Result<Looked, NtStatus>> {
    match core.domain_answer.take() {
        Some(DomainAnswer::Fs(FsDone::Made(m), _)) => match m.take::<Looked>() {
            Some(l) => Some(Ok(l)),
            None => {
                core.domain_answer = Some(DomainAnswer::Fs(FsDone::Made(m), None));
                None
            }
        },
        Some(DomainAnswer::Fs(FsDone::Done(Err(e)), _)) => Some(Err(status_of(e))),
        other => {
            core.domain_answer = other;
            None
        }
    }
}

/// A job of `open`'s order about its share, acting as its user.
fn job_of(
    open: &Open,
    what: &'static str,
    calls: impl FnOnce() -> Carried + Send + 'static,
) -> FsJob {
    FsJob::answer_made(
        open.node.who().cloned(),
        crate::fsjob::order_of(open.id),
        crate::fsjob::share_key(&open.share.name),
        what,
        calls,
    )
}

/// The first job: the target of `name` from `source` (`link`: the holder's attributes always
/// read).
fn look(open: &Arc<Open>, name: &str, source: RelPath, link: bool) -> FsJob {
    let (o, name) = (Arc::clone(open), name.to_string());
    job_of(open, "the look of a rename or link", move || {
        let target = target_of(&o, &name);
        let holder = match &target {
            Ok(t) => holder_of(&o, t, &source, link),
            Err(_) => Ok(None),
        };
        Carried::new(
            Looked {
                source,
                target,
                holder,
            },
            false,
        )
    })
}

/// Who holds the target's name (case-insensitively; for a POSIX open, exactly), as the I/O
/// thread asks it ([`super::rename`], [`super::link`]).
fn holder_of(
    o: &Open,
    t: &Target,
    source: &RelPath,
    link: bool,
) -> Result<Option<Holder>, NtStatus> {
    let (backend, who) = (&o.share.backend, &o.who);
    let found = match o.posix && !link {
        true => backend.stat(who, &t.path).map(|_| t.name.clone()),
        false => backend.find_name_case_insensitive(who, &t.parent, &t.name),
    };
    match found {
        Ok(stored) => {
            let existing = t.parent.join(&stored).map_err(status_of)?;
            let attr = (link || existing != *source)
                .then(|| backend.stat(who, &existing).map_err(status_of));
            Ok(Some((existing, attr)))
        }
        Err(FsError::NotFound) => Ok(None),
        Err(e) => Err(status_of(e)),
    }
}

/// The look this run carries for `source`, or Err([`ASK_IDS`]) with the look asked.
fn look_or_ask(
    open: &Arc<Open>,
    r: &FileRenameInformation,
    (source, link): (&RelPath, bool),
    looked: Option<Result<Looked, NtStatus>>,
    asks: &mut HomeAsks,
) -> Result<Looked, NtStatus> {
    match looked {
        Some(Ok(l)) if l.source == *source => Ok(l),
        Some(Err(e)) => Err(e),
        _ => {
            asks.want_fs(look(open, &r.file_name, source.clone(), link));
            Err(ASK_IDS)
        }
    }
}

/// What a rename's or link's second job does, and what the I/O thread tells after it.
struct Moving {
    source: RelPath,
    target: RelPath,
    /// The holder of the target's name removed first (another spelling of it).
    unlink: Option<RelPath>,
    replace: bool,
    /// The file a rename replaces.
    replaced: Option<FileKey>,
    /// A link, not a rename.
    link: bool,
    /// A rename's mark on the file's entry, held by the job and by the request until each is
    /// done with it ([`Marked`]).
    marked: Option<Arc<Marked>>,
    /// Who tells the file's home of a rename that worked ([`Telling`]).
    telling: Option<Arc<Telling>>,
}

/// Who tells the file's home (a file homed on another node) of a rename that worked: the
/// request as it goes on with the job's answer ([`moved`]); when its connection went while the
/// job was out, the request's letting go if the job had ended, else the job itself, on its
/// thread, as it ends. Untold, the home would keep the old path for the open until it closes
/// (a durable open kept for its client's reconnect: its reclaim elsewhere would look for the
/// file there).
#[derive(Default)]
struct Telling(std::sync::Mutex<Tell>);

#[derive(Default)]
enum Tell {
    /// The job is out.
    #[default]
    Out,
    /// The job renamed the file to this path; nobody told the home yet.
    Renamed(RelPath),
    /// The home is told (or is the request's to tell: it went on).
    Heard,
    /// The request was let go while the job was out: the job tells.
    Abandoned,
}

impl Telling {
    /// The job renamed `o`'s file to `target`: told here if the request was let go.
    fn renamed(&self, server: &ServerState, o: &Open, target: &RelPath) {
        let mut t = lock(&self.0);
        if matches!(*t, Tell::Abandoned) {
            *t = Tell::Heard;
            drop(t);
            // A call waited for on the file system pool's thread: nobody else is left to make
            // it (rare: a rename whose connection went while its job was out).
            if let Some(ask) = arbiter::moved_posted(&server.node, o.key, &o.entry, target) {
                let _ = ask.run();
            }
            return;
        }
        *t = Tell::Renamed(target.clone());
    }

    /// The request goes on with the job's answer: it tells the home itself.
    fn heard(&self) {
        *lock(&self.0) = Tell::Heard;
    }

    /// The request is let go: a rename the job made is told now (posted), else by the job.
    fn abandoned(&self, core: &mut ConnCore, open: &Open) {
        let mut t = lock(&self.0);
        match std::mem::replace(&mut *t, Tell::Heard) {
            Tell::Renamed(target) => {
                drop(t);
                let server = Arc::clone(&core.server);
                let ask = arbiter::moved_posted(&server.node, open.key, &open.entry, &target);
                core.cluster_posts
                    .extend(ask.map(crate::lookup::Lookup::Home));
            }
            Tell::Out => *t = Tell::Abandoned,
            Tell::Heard | Tell::Abandoned => {}
        }
    }
}

/// [`super::rename`]'s part after the checks on the server's state alone (made on the I/O
/// thread before, as on a local share): the look asked, or with it the decision, and the
/// rename's job asked (the request parks: `Some`). Two renames of one file: the second waits.
pub(super) fn rename(
    server: &Arc<ServerState>,
    (now, conn_id): (Now, u64),
    open: &Arc<Open>,
    r: &FileRenameInformation,
    asks: &mut HomeAsks,
    looked: Option<Result<Looked, NtStatus>>,
) -> Result<Option<Handled>, NtStatus> {
    let (source, renaming) = {
        let e = lock(&open.entry);
        (e.path.clone(), e.renaming)
    };
    if renaming {
        return Err(WAIT);
    }
    // Other clients give up caching handles of the file first, before the look is asked: the
    // breaks are sent while this request is handled, before the answer to any later request
    // of the connection, as on the I/O thread (a later CREATE's job may be done before the
    // look; smbtorture smb2.lease.rename_wait acknowledges the break it saw by then). Samba
    // too breaks them whatever the target turns out to be. Asked again below with the look.
    let now_ms = now.mono_ms;
    if !source.is_root()
        && asks.rename_waits(server, open.key, &open.entry, open.id, (conn_id, now_ms))?
    {
        return Err(WAIT);
    }
    let l = look_or_ask(open, r, (&source, false), looked, asks)?;
    let Target {
        parent_attr: pattr,
        path: target,
        ..
    } = l.target?;
    if source.is_root() {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if target == source {
        return Ok(None);
    }
    super::parent_refuses(server, (pattr, open), (now_ms, conn_id), asks)?;
    if asks.rename_waits(server, open.key, &open.entry, open.id, (conn_id, now_ms))? {
        return Err(WAIT);
    }
    let (mut replaced, mut unlink) = (None, None);
    if let Some((existing, attr)) = l.holder? {
        if existing != source {
            if !r.replace_if_exists {
                return Err(NtStatus::OBJECT_NAME_COLLISION);
            }
            let a = attr.unwrap_or(Err(NtStatus::INTERNAL_ERROR))?;
            if a.is_dir() {
                return Err(NtStatus::ACCESS_DENIED);
            }
            if super::target_is_open(server, &a, open.id, (now_ms, conn_id), asks)? {
                return Err(NtStatus::ACCESS_DENIED);
            }
            replaced = Some(server.node.file_key(&a));
            unlink = (existing != target).then_some(existing);
        }
    }
    // Marked in one step with the test (another I/O thread's rename of the file may have
    // decided meanwhile, or made its rename: then this one waits and looks again). The mark
    // is let go only by the [`Marked`] made after it.
    {
        let mut e = lock(&open.entry);
        if e.renaming || e.path != source {
            return Err(WAIT);
        }
        e.renaming = true;
    }
    let m = Moving {
        source,
        target,
        unlink,
        replace: r.replace_if_exists,
        replaced,
        link: false,
        marked: Some(Arc::new(Marked(Arc::clone(open), Arc::clone(server)))),
        telling: Some(Arc::new(Telling::default())),
    };
    let job = moving_job(server, open, &m, now.mono_ms);
    let telling = m.telling.clone();
    let then: super::job::Then = Box::new(move |core, open, _, r| moved(core, open, m, r));
    let abandoned: super::job::Abandoned = Box::new(move |core, open| {
        if let Some(t) = telling {
            t.abandoned(core, open);
        }
    });
    Ok(Some(super::job::moved(
        open,
        now,
        (then, Some(abandoned)),
        job,
    )))
}

/// [`super::link`]'s part after its checks of the request: the look asked, or with it the
/// decision, and the link's job asked (the request parks: `Some`).
pub(super) fn link(
    server: &Arc<ServerState>,
    (now, conn_id): (Now, u64),
    open: &Arc<Open>,
    r: &FileRenameInformation,
    asks: &mut HomeAsks,
    looked: Option<Result<Looked, NtStatus>>,
) -> Result<Option<Handled>, NtStatus> {
    let source = lock(&open.entry).path.clone();
    let l = look_or_ask(open, r, (&source, true), looked, asks)?;
    let target = l.target?.path;
    let (mut unlink, mut replaced) = (None, None);
    if let Some((existing, attr)) = l.holder? {
        if !r.replace_if_exists {
            return Err(NtStatus::OBJECT_NAME_COLLISION);
        }
        let a = attr.unwrap_or(Err(NtStatus::INTERNAL_ERROR))?;
        if a.is_dir() {
            return Err(NtStatus::FILE_IS_A_DIRECTORY);
        }
        if super::target_is_open(server, &a, open.id, (now.mono_ms, conn_id), asks)? {
            return Err(NtStatus::ACCESS_DENIED);
        }
        unlink = Some(existing);
        replaced = Some(server.node.file_key(&a));
    }
    let m = Moving {
        source,
        target,
        unlink,
        replace: r.replace_if_exists,
        replaced,
        link: true,
        marked: None,
        telling: None,
    };
    let job = moving_job(server, open, &m, now.mono_ms);
    let then: super::job::Then = Box::new(move |core, open, _, r| moved(core, open, m, r));
    Ok(Some(super::job::moved(open, now, (then, None), job)))
}

/// Lets the entry's rename mark go once both the job's calls ended (or the job was dropped
/// without running: its user could not be acted as) and the request told what it did (or was
/// let go with its connection): only while the entry is still the file's.
pub(crate) struct Marked(Arc<Open>, Arc<ServerState>);

impl Drop for Marked {
    fn drop(&mut self) {
        let (o, server) = (&self.0, &self.1);
        if let Some(e) = server.files.existing(o.key) {
            if Arc::ptr_eq(&e, &o.entry) {
                lock(&e).renaming = false;
            }
        }
    }
}

/// The second job: `m`'s calls, and for a rename that worked the table made to follow the disk
/// (see the module's notes).
fn moving_job(server: &Arc<ServerState>, open: &Arc<Open>, m: &Moving, now_ms: u64) -> FsJob {
    let (o, server) = (Arc::clone(open), Arc::clone(server));
    let (source, target, unlink) = (m.source.clone(), m.target.clone(), m.unlink.clone());
    let (replace, replaced, link) = (m.replace, m.replaced, m.link);
    let what = match link {
        true => "the link of a SET_INFO",
        false => "the rename of a SET_INFO",
    };
    let (marked, telling) = (m.marked.clone(), m.telling.clone());
    job_of(open, what, move || {
        let (backend, who) = (&o.share.backend, &o.who);
        // The calls; Ok with the file replaced (its key), if one was.
        let calls = || -> Result<Option<FileKey>, NtStatus> {
            // A file to replace that was opened since the decision is refused before anything
            // is removed (the review of session 47, finding 1: its other spelling was removed
            // first, under the new open).
            if replaced.is_some_and(|k| opened_since(&server, k)) {
                return Err(NtStatus::ACCESS_DENIED);
            }
            if let Some(x) = &unlink {
                backend.unlink(who, x).map_err(status_of)?;
                server.files.name_changed(&o.share.name, x);
            }
            if link {
                backend.link(who, &source, &target).map_err(status_of)?;
                return Ok(replaced);
            }
            // The look found the name free: a file made there since (a CREATE meanwhile) is
            // not replaced unseen. Open: refused as Samba refuses a rename onto an open file;
            // closed again: replaced, as a look now would decide (and its entry, kept by POSIX
            // opens, marked unlinked as a replaced file's is). The file itself at the target (a
            // case-only rename on a back end that ignores case) is renamed, not refused for the
            // renaming open (the review of session 47, finding 6).
            let free = replace && replaced.is_none();
            match backend.rename(who, &source, &target, replace && !free) {
                Err(FsError::Exists) if free => {
                    let a = backend.stat(who, &target).map_err(status_of)?;
                    let k = server.node.file_key(&a);
                    if k == o.key {
                        backend
                            .rename(who, &source, &target, true)
                            .map_err(status_of)?;
                        return Ok(None);
                    }
                    if opened_since(&server, k) {
                        return Err(NtStatus::ACCESS_DENIED);
                    }
                    backend
                        .rename(who, &source, &target, true)
                        .map_err(status_of)?;
                    Ok(Some(k))
                }
                r => r.map(|()| replaced).map_err(status_of),
            }
        };
        let (r, replaced) = match calls() {
            Ok(k) => (Ok(()), k),
            Err(e) => (Err(e), None),
        };
        // The names changed, counted before anything else is told (a CREATE that looked one
        // up in its job meanwhile looks again: cmd/create/offload.rs `stale`): a link's or
        // rename's target, a rename's source (the holder's other spelling when it was removed).
        if r.is_ok() {
            server.files.name_changed(&o.share.name, &target);
            if !link {
                server.files.name_changed(&o.share.name, &source);
            }
        }
        if r.is_ok() {
            // The POSIX opens of the file replaced keep it without a name.
            if let Some(e) = replaced.and_then(|k| server.files.existing(k)) {
                lock(&e).unlinked = true;
            }
        }
        if r.is_ok() && !link {
            appledouble_follows(&o, &source, &target);
            if let Some(e) = server.files.existing(o.key) {
                if Arc::ptr_eq(&e, &o.entry) {
                    lock(&e).path = target.clone();
                }
            }
            if o.is_dir {
                server.files.moved_below(&o.share.name, &source, &target);
            }
            lock(&o.state).path = target.clone();
        }
        if r.is_ok() {
            told(&server, &o, (&source, &target), link, now_ms);
        }
        if let (Ok(()), Some(t)) = (&r, &telling) {
            t.renamed(&server, &o, &target);
        }
        drop(marked);
        Carried::new(r, false)
    })
}

/// Whether the file a rename's job would replace, `key`, has a Windows open (through this
/// node) now: one opened after the rename was decided (the decision refused one open then,
/// [`super::target_is_open`]; POSIX opens keep a replaced file without a name).
fn opened_since(server: &ServerState, key: FileKey) -> bool {
    server
        .files
        .existing(key)
        .is_some_and(|e| lock(&e).opens.iter().any(|o| !o.posix))
}

/// fruit: the file's AppleDouble `._` file (its resource fork) follows it.
fn appledouble_follows(o: &Open, source: &RelPath, target: &RelPath) {
    if !o.is_dir && crate::fruit::keeps_appledouble(&o.share) {
        let ads =
            crate::fruit::adouble::sidecar(source).zip(crate::fruit::adouble::sidecar(target));
        if let Some((from, to)) = ads {
            match o.share.backend.rename(&o.who, &from, &to, true) {
                Ok(()) | Err(FsError::NotFound) => {}
                Err(e) => tracing::debug!("AppleDouble file not renamed with its file: {e}"),
            }
        }
    }
}

/// A rename's or link's calls worked (in its job): watchers of the rename (or of the link's new
/// name) hear of it, and the leases of the directories break but the open's own parent lease,
/// as on the I/O thread ([`super::rename`], [`super::link`]).
fn told(
    server: &ServerState,
    open: &Open,
    (source, target): (&RelPath, &RelPath),
    link: bool,
    now_ms: u64,
) {
    let except = crate::dirlease::parent_key(open);
    let share = &open.share.name;
    if link {
        let change = notify::Change {
            action: notify::ADDED,
            filter: notify::filter::FILE_NAME,
            path: target,
            stream: None,
        };
        notify::report(server, &open.share, &[change]);
        crate::dirlease::entry_changed(server, share, target, except, Some(now_ms));
        return;
    }
    notify::renamed(server, &open.share, source, target, open.is_dir);
    crate::dirlease::entry_changed(server, share, source, except, Some(now_ms));
    if source.parent() != target.parent() {
        crate::dirlease::entry_changed(server, share, target, except, Some(now_ms));
    }
}

/// A rename's or link's job answered: when a rename worked, the file's home hears of the new
/// path (by a call nobody waits for) and the open reports the file modified at its close (its
/// job told watchers and directory leases: [`told`]); when it failed, its status is answered.
fn moved(
    core: &mut ConnCore,
    open: &Open,
    m: Moving,
    r: Result<(), NtStatus>,
) -> Result<Handled, NtStatus> {
    if let Some(t) = &m.telling {
        t.heard();
    }
    r?;
    if m.link {
        return Ok(Handled::Reply(Reply::ok(super::ok_body())));
    }
    let server = Arc::clone(&core.server);
    let mut asks = HomeAsks::of(core);
    asks.moved(&server, open.key, &open.entry, &m.target);
    asks.done(core);
    if !open.is_dir {
        // Windows reports a renamed file MODIFIED too, when it is closed.
        lock(&open.state).notify_on_close |= notify::filter::ATTRIBUTES | notify::filter::CREATION;
    }
    Ok(Handled::Reply(Reply::ok(super::ok_body())))
}

/// What a delete disposition asks of the file system: the file's attributes, and whether a
/// directory is empty.
pub(crate) struct DeleteFacts {
    pub attr: Result<FileAttr, NtStatus>,
    pub empty: Option<Result<bool, NtStatus>>,
}

/// A delete disposition's facts, when this run carries them, or Err([`ASK_IDS`]) with their
/// job asked (a job of the open's order: the request runs again with them).
pub(super) fn delete_facts(core: &mut ConnCore, open: &Arc<Open>) -> Result<DeleteFacts, NtStatus> {
    match core.domain_answer.take() {
        Some(DomainAnswer::Fs(FsDone::Made(m), _)) => {
            m.take::<DeleteFacts>().ok_or(NtStatus::INTERNAL_ERROR)
        }
        Some(DomainAnswer::Fs(FsDone::Done(Err(e)), _)) => Err(status_of(e)),
        Some(DomainAnswer::Fs(..)) => Err(NtStatus::INTERNAL_ERROR),
        other => {
            core.domain_answer = other;
            let o = Arc::clone(open);
            let job = job_of(open, "a delete disposition's look", move || {
                let attr = o.node.stat().map_err(status_of);
                let empty = (o.is_dir && attr.is_ok())
                    .then(|| o.node.list_names().map(|n| n.is_empty()).map_err(status_of));
                Carried::new(DeleteFacts { attr, empty }, false)
            });
            core.ids_wanted = Some(crate::lookup::Lookup::Fs(job));
            Err(ASK_IDS)
        }
    }
}
