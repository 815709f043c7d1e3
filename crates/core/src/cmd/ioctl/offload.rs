//! FSCTLs on a share whose calls may wait on a network (issue 33, plan steps 4 and 6: FUSE,
//! CephFS, NFS; [`crate::config::ShareDef::offloaded`]). What such an FSCTL asks of the file
//! system (a stat, the stored attributes, the allocated ranges, a hole punched, the compression
//! flag) is one file system job of the open's order, acting as the open's user, the request
//! parked meanwhile (Err([`ASK_IDS`]); the open's later requests wait behind it). It runs again,
//! makes the same checks of the request and the open (none of them asks the file system), and
//! answers what the job made; what the job changed is told on the I/O thread then, to watchers
//! and to the write time ([`After`]): a job that failed tells nothing.

use ringshare_wire::NtStatus;

use super::OpenRef;
use crate::cmd::ids::ASK_IDS;
use crate::exchange::{ConnCore, Reply};
use crate::fsjob::{Carried, FsJob};
use crate::lookup::Lookup;
use crate::server::lock;

/// What a job changed, for the I/O thread to tell after it.
#[derive(Debug)]
pub(super) enum After {
    Nothing,
    /// The file's attributes (watchers of ATTRIBUTES).
    Attributes,
    /// The file's data (its close reports it MODIFIED; its write time), and its modification
    /// time before the job wrote it when the job read it ([`Base`]).
    Written(Option<ringshare_vfs::FsResult<ringshare_vfs::UnixNanos>>),
}

/// Whether a job that writes an open's file reads its modification time first, for the write
/// time the open shows ([`crate::writetime::wrote`]: the file's first write through it): asked
/// on the I/O thread, read in the job, so that the I/O thread need not stat the file after.
#[derive(Clone, Copy)]
pub(super) struct Base(bool);

impl Base {
    pub(super) fn of(open: &OpenRef) -> Base {
        Base(lock(&open.open.entry).write_time.needs_base())
    }

    /// The file's modification time now (before the job writes), when it is wanted.
    pub(super) fn read(
        self,
        node: &dyn ringshare_vfs::Node,
    ) -> Option<ringshare_vfs::FsResult<ringshare_vfs::UnixNanos>> {
        self.0.then(|| node.stat_without_dos().map(|a| a.mtime))
    }

    /// What a job that wrote (`written`) tells after it, the time `before` read first.
    pub(super) fn after(
        written: bool,
        before: Option<ringshare_vfs::FsResult<ringshare_vfs::UnixNanos>>,
    ) -> After {
        match written {
            true => After::Written(before),
            false => After::Nothing,
        }
    }
}

/// What an FSCTL's job made: its answer's status and IOCTL response body, or the status it
/// failed with, and what it changed.
pub(super) struct Made {
    pub answer: Result<(NtStatus, Vec<u8>), NtStatus>,
    pub after: After,
}

impl Made {
    /// An answer that changed nothing.
    pub(super) fn answer(answer: Result<(NtStatus, Vec<u8>), NtStatus>) -> Made {
        Made {
            answer,
            after: After::Nothing,
        }
    }
}

/// Whether `open`'s FSCTLs make their file system calls in jobs.
pub(super) fn applies(open: &OpenRef) -> bool {
    open.open.share.offloaded()
}

/// `calls` asked as a file system job of `open`'s order ([`FsJob::answer_made`]): the request
/// parks (Err([`ASK_IDS`])) and runs again with what it made ([`answered`]).
pub(super) fn ask(
    core: &mut ConnCore,
    open: &OpenRef,
    what: &'static str,
    calls: impl FnOnce() -> Made + Send + 'static,
) -> Result<Reply, NtStatus> {
    ask_counted(core, (open, open), what, calls)
}

/// [`ask`], the job counted against `counted`'s share in the pool's bound per share and
/// connection (a copy from an offloaded source into a local target waits on the source's: the
/// review of session 47, finding 7).
pub(super) fn ask_counted(
    core: &mut ConnCore,
    (open, counted): (&OpenRef, &OpenRef),
    what: &'static str,
    calls: impl FnOnce() -> Made + Send + 'static,
) -> Result<Reply, NtStatus> {
    let (who, order, _) = crate::cmd::job_of_open(&open.open);
    let share = crate::fsjob::share_key(&counted.open.share.name);
    core.ids_wanted = Some(Lookup::Fs(FsJob::answer_made(
        who,
        order,
        share,
        what,
        move || Carried::new(calls(), false),
    )));
    Err(ASK_IDS)
}

/// What the job this request asked made, when it runs again with it; its changes told here
/// (`open`'s) when it succeeded. `None`: no job was asked yet.
pub(super) fn answered(core: &mut ConnCore, open: &OpenRef) -> Option<Result<Reply, NtStatus>> {
    let made = match crate::cmd::job_made::<Made>(core)? {
        Ok(made) => made,
        Err(s) => Made::answer(Err(s)),
    };
    match made.after {
        After::Nothing => {}
        After::Attributes => {
            crate::notify::modified(&core.server, &open.open, crate::notify::filter::ATTRIBUTES)
        }
        After::Written(before) => super::note_written(&core.server, open, core.now, before),
    }
    Some(
        made.answer
            .map(|(status, body)| Reply::with_status(status, body)),
    )
}
