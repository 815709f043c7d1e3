//! A named stream's rename (SET_INFO FileRenameInformation on a stream open, `file:stream` to
//! `:other`) on a share whose calls may wait on a network (issue 33; docs/cluster-internals.md,
//! "File system calls off the I/O thread"; [`crate::config::ShareDef::offloaded`]: FUSE,
//! CephFS, NFS). As a file's rename (cmd/set_info/moves.rs), two jobs of the open's order,
//! acting as its user. The first looks ([`Look`]): the stream the target names, as the back end
//! stores it (the POSIX backend lists the file's extended attributes). The request runs again
//! with that and decides on the I/O thread, as before ([`crate::cmd::stream::decide`]): a
//! collision, a target open or holding data, other opens of the stream, and the open's
//! share-mode entry moved to the new name's key. The second job renames the stream and, as the
//! rename's job of a file does, makes the server's table follow ([`crate::cmd::stream::renamed`]:
//! the open's stream name and key, or the entry's old key back when the back end refused) and
//! tells watchers, so that this holds also when the SET_INFO's connection went while the job
//! was out; a job dropped unrun gives the old key back ([`Renaming`]'s drop).
//!
//! Between the look and the rename another client may make the target stream: without
//! ReplaceIfExists the back end refuses (OBJECT_NAME_COLLISION); with it, an open of the new
//! stream holds the key the decision wanted (SHARING_VIOLATION), one closed again is replaced
//! (as on a local share between two I/O threads, where the window is microseconds).

use std::sync::Arc;

use ringshare_wire::NtStatus;

use crate::cmd::ids::ASK_IDS;
use crate::cmd::Handled;
use crate::exchange::{ConnCore, Reply};
use crate::fsjob::{Carried, FsJob};
use crate::fsmap::status_of;
use crate::lookup::Lookup;
use crate::server::{lock, FileKey, ServerState};
use crate::state::Open;

/// Whether `open`'s renames are made here: a stream open on a share whose calls may wait on a
/// network.
pub(super) fn applies(open: &Open) -> bool {
    open.stream.is_some() && open.share.offloaded()
}

/// What the first job found: the names it looked with and the stream `to` names.
struct Look {
    from: String,
    to: String,
    found: Result<Option<ringshare_vfs::StreamInfo>, NtStatus>,
}

/// A job of `open`'s order about its share, acting as its user.
fn job_of(
    open: &Open,
    what: &'static str,
    calls: impl FnOnce() -> Carried + Send + 'static,
) -> FsJob {
    let (who, order, share) = crate::cmd::job_of_open(open);
    FsJob::answer_made(who, order, share, what, calls)
}

/// FileRenameInformation (`buf`) of stream open `open`: the checks [`super::set_file`] and
/// [`super::rename`] make first (in their order), then the look asked, or with it the decision
/// and the rename's job (the request parks).
pub(super) fn rename(
    core: &mut ConnCore,
    open: &Arc<Open>,
    buf: &[u8],
    read_only: bool,
) -> Result<Handled, NtStatus> {
    if read_only {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let r = super::name_info(buf)?;
    if open.access & crate::files::access::DELETE == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if r.root_directory != 0 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let Some(s) = &open.stream else {
        return Err(NtStatus::INTERNAL_ERROR);
    };
    let to = crate::cmd::stream::rename_target(&r)?;
    let (from, key) = lock(&s.now).clone();
    if to == from {
        return Ok(Handled::Reply(Reply::ok(super::ok_body())));
    }
    let found = match ringshare_vfs::stream_names_match(&to, &from) {
        true => None,
        false => looked(core, open, (&from, &to))??,
    };
    let server = &core.server;
    let replace = r.replace_if_exists;
    let new_key = crate::cmd::stream::decide(server, open, (&from, key), &to, found, replace)?;
    let renaming = Renaming {
        server: Arc::clone(server),
        open: Arc::clone(open),
        names: ((from, key), (to, new_key)),
        done: false,
    };
    let node = Arc::clone(&open.node);
    let job = job_of(open, "a named stream's rename", move || {
        let mut renaming = renaming;
        let ((from, _), (to, _)) = &renaming.names;
        let r = node.rename_stream(from, to, replace).map_err(status_of);
        Carried::new(renaming.end(r), false)
    });
    let then: super::job::Then =
        Box::new(|_, _, _, r| r.map(|()| Handled::Reply(Reply::ok(super::ok_body()))));
    Ok(super::job::moved(open, core.now, then, job))
}

/// The look's answer when this run carries one made with these names; else Err([`ASK_IDS`])
/// with the look asked.
fn looked(
    core: &mut ConnCore,
    open: &Arc<Open>,
    (from, to): (&str, &str),
) -> Result<Result<Option<ringshare_vfs::StreamInfo>, NtStatus>, NtStatus> {
    if let Some(l) = crate::cmd::job_made::<Look>(core) {
        let l = l?;
        if l.from == from && l.to == to {
            return Ok(l.found);
        }
    }
    let (node, from, to) = (Arc::clone(&open.node), from.to_string(), to.to_string());
    core.ids_wanted = Some(Lookup::Fs(job_of(
        open,
        "the look of a named stream's rename",
        move || {
            let found = node.find_stream(&to).map_err(status_of);
            Carried::new(Look { from, to, found }, false)
        },
    )));
    Err(ASK_IDS)
}

/// A stream rename decided, its job out: ended by the job with how the back end's rename went
/// ([`crate::cmd::stream::renamed`]), or, dropped unrun, its entry's old key given back.
struct Renaming {
    server: Arc<ServerState>,
    open: Arc<Open>,
    names: ((String, FileKey), (String, FileKey)),
    done: bool,
}

impl Renaming {
    fn end(&mut self, r: Result<(), NtStatus>) -> Result<(), NtStatus> {
        self.done = true;
        let Some(s) = &self.open.stream else {
            return Err(NtStatus::INTERNAL_ERROR);
        };
        let ((from, key), (to, new_key)) = &self.names;
        let names = ((from.as_str(), *key), (to.as_str(), *new_key));
        crate::cmd::stream::renamed(&self.server, &self.open, s, names, r)
    }
}

impl Drop for Renaming {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.end(Err(NtStatus::CANCELLED));
        }
    }
}
