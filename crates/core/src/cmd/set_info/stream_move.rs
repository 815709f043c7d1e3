//! A named stream's rename (FileRenameInformation on a stream open, [MS-FSA] 2.1.5.14.11) on a
//! share whose calls may wait on a network (issue 33; FUSE, CephFS): its calls (the target's
//! look-up, the rename of the stream's extended attribute) are made in one file system job of
//! the open's order, the request parked meanwhile, with the steps and answers of the I/O
//! thread's rename ([`crate::cmd::stream::rename_made`], which both run).
//!
//! What the review of session 48 found in the first such jobs: with the open's share-mode entry
//! moved to the new name's key while the job was out, another client's open of the old name
//! escaped share modes (and kept an open of a stream no longer there), and an open of the new
//! name joined the renaming open's entry. Here, before the job is asked, the file's entry is
//! marked with both keys ([`ringshare_files::FileEntry::stream_moving`]): a CREATE of either
//! stream waits, as for a break, until the job ended (crates/core's cmd/create/admission.rs),
//! and another rename of a stream of the file waits too. The job makes the table follow the
//! disk itself (the entry's key moved before the rename and back when it failed, the open's
//! name, the watchers told), so that a rename finished after its connection ended leaves the
//! table as the disk is; the mark goes when the job ends or is dropped unrun
//! ([`Marked`]).

use std::sync::Arc;

use ringshare_wire::fscc::FileRenameInformation;
use ringshare_wire::NtStatus;

use super::WAIT;
use crate::cmd::stream::{rename_made, table_facts, target_of};
use crate::cmd::Handled;
use crate::exchange::Reply;
use crate::fsjob::{Carried, FsJob};
use crate::io::Now;
use crate::server::{lock, FileKey, ServerState};
use crate::state::Open;

/// [`crate::cmd::stream::rename`] in a job (the request parks: `Some`); `Ok(None)`: the
/// stream's own name, nothing to do.
pub(super) fn rename(
    server: &Arc<ServerState>,
    now: Now,
    open: &Arc<Open>,
    r: &FileRenameInformation,
) -> Result<Option<Handled>, NtStatus> {
    let Some(s) = &open.stream else {
        return Err(NtStatus::INTERNAL_ERROR);
    };
    let to = target_of(r)?;
    let (from, key) = lock(&s.now).clone();
    if to == from {
        return Ok(None);
    }
    let new_key = key.base().stream(&to);
    // Read here, under the mark below unchanged until the job ends: whether someone has the
    // target open, whether others have this stream open (answered after the target's checks,
    // in the job, as on the I/O thread).
    let (open_now, shared) = table_facts(server, open, (&from, &to), new_key);
    {
        let mut e = lock(&s.file_entry);
        if e.stream_moving.is_some() {
            // Another rename of one of the file's streams is out: this one waits for it.
            return Err(WAIT);
        }
        e.stream_moving = Some((key, new_key));
    }
    let marked = Marked(Arc::clone(open), Arc::clone(server), key.base());
    let replace = r.replace_if_exists;
    let (o, srv) = (Arc::clone(open), Arc::clone(server));
    let (who, order, share) = crate::cmd::job_of_open(open);
    let job = FsJob::answer_made(who, order, share, "a named stream's rename", move || {
        let r = match &o.stream {
            Some(s) => rename_made(
                &srv,
                (&o, s),
                (from, to),
                (key, new_key),
                (open_now, shared, replace),
            ),
            None => Err(NtStatus::INTERNAL_ERROR),
        };
        drop(marked);
        Carried::new::<Result<(), NtStatus>>(r, false)
    });
    let then: super::job::Then =
        Box::new(move |_, _, _, r| r.map(|()| Handled::Reply(Reply::ok(super::ok_body()))));
    Ok(Some(super::job::moved(open, now, (then, None), job)))
}

/// The file's entry's mark of a stream's rename out ([`rename`]), let go when the job's calls
/// ended or the job was dropped without running; the entry (at the file's key) is forgotten
/// then when no open is left on it (the mark kept it: `FileTable::drop_if_unused`).
struct Marked(Arc<Open>, Arc<ServerState>, FileKey);

impl Drop for Marked {
    fn drop(&mut self) {
        if let Some(s) = &self.0.stream {
            lock(&s.file_entry).stream_moving = None;
        }
        self.1.files.drop_if_unused(self.2);
    }
}
