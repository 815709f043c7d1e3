//! Requests behind an open's file system job (issue 33; docs/cluster-internals.md, "File
//! system calls off the I/O thread", "Ordering"). On a share whose calls are made away from the
//! I/O thread ([`crate::fsjob`]), a request that asks a job parks while it runs; a later
//! request of this connection about the same open (its FileId) parks behind it and runs after
//! it, in the order they came, so that a CLOSE, a SET_INFO, a FLUSH or a WRITE that asks no job
//! does not overtake a READ or WRITE waiting for its job (a CLOSE that did gave the WRITE
//! FILE_CLOSED). Nothing is held on a share whose calls are made on the I/O thread: there no
//! job is ever asked, and the check is one test of an empty map. Across connections nothing is
//! ordered, as before.

use ringshare_wire::codec::HEADER_LEN as HEADER_SIZE;
use ringshare_wire::consts::Command;

use super::{Connection, Job};
use crate::fsjob::order_of;

/// Jobs waiting behind an open's file system job: the open's order ([`order_of`]) and the
/// job, whose next member is the one about it.
#[derive(Default)]
pub(super) struct Behind(Vec<(u64, Box<Job>)>);

/// Where a request's FileId is in its body, for the commands that name one.
fn file_id_offset(command: Command) -> Option<usize> {
    Some(match command {
        Command::CLOSE
        | Command::FLUSH
        | Command::LOCK
        | Command::IOCTL
        | Command::QUERY_DIRECTORY
        | Command::CHANGE_NOTIFY => 8,
        Command::READ | Command::WRITE | Command::SET_INFO => 16,
        Command::QUERY_INFO => 24,
        _ => return None,
    })
}

/// The open (its volatile id) member `msg` of a `command` names; `related`: the one a related
/// member inherits.
fn named_open(command: Command, msg: &[u8], related: Option<(u64, u64)>) -> Option<u64> {
    let at = HEADER_SIZE + file_id_offset(command)?;
    let id = msg.get(at..at + 16)?;
    let persistent = u64::from_le_bytes(id[..8].try_into().ok()?);
    let volatile = u64::from_le_bytes(id[8..].try_into().ok()?);
    if persistent == u64::MAX && volatile == u64::MAX {
        return related.map(|(_, v)| v);
    }
    Some(volatile)
}

impl Connection {
    /// Whether a file system job about the open of order `order` is asked and not answered,
    /// or the file I/O of a request that waited for one is not done.
    fn fs_job_out(&self, order: u64) -> bool {
        self.lookups.values().any(|p| p.fs_order() == Some(order))
            || (self.ordered_io > 0
                && self
                    .parked
                    .values()
                    .any(|(_, _, _, r0)| r0.fs_order == Some(order)))
    }

    /// Member `idx` of `job` (a `command`, inheriting the open `related`) is about an open
    /// whose file system job is out, or behind which others wait: its order, and the job is to
    /// wait behind them ([`Connection::park_behind`]). One that runs again after its own job,
    /// or let go from behind, is not held again.
    pub(super) fn behind_order(
        &self,
        job: &mut Job,
        idx: usize,
        command: Command,
        related: Option<(u64, u64)>,
    ) -> Option<u64> {
        if job.resumes.take() == Some(idx) || (self.lookups.is_empty() && self.ordered_io == 0) {
            return None;
        }
        let (start, end) = job.members[idx];
        let order = order_of(named_open(command, &job.frame[start..end], related)?);
        (self.fs_job_out(order) || self.behind.0.iter().any(|(o, _)| *o == order)).then_some(order)
    }

    /// `job` waits behind the file system job of the open of order `order`, its member `idx`
    /// to run first when it goes on.
    pub(super) fn park_behind(&mut self, order: u64, mut job: Box<Job>, idx: usize) {
        job.next = idx;
        self.behind.0.push((order, job));
    }

    /// A file system job of the open of order `order` was answered: the jobs behind it run, in
    /// the order they came, until one asks a job about it again (those after it wait for that).
    pub(super) fn run_behind(&mut self, order: u64) {
        while !self.closing && !self.fs_job_out(order) {
            let Some(at) = self.behind.0.iter().position(|(o, _)| *o == order) else {
                return;
            };
            let (_, mut job) = self.behind.0.remove(at);
            job.resumes = Some(job.next);
            self.run(job);
        }
    }

    /// Whether a job waiting behind another holds a WRITE's payload received apart.
    pub(super) fn behind_holds_payload(&self) -> bool {
        self.behind.0.iter().any(|(_, j)| j.detached.is_some())
    }

    /// Whether jobs wait behind others.
    pub(super) fn behind_waits(&self) -> bool {
        !self.behind.0.is_empty()
    }

    /// The connection went: the jobs behind others are dropped, unanswered.
    pub(super) fn abandon_behind(&mut self) {
        self.behind.0.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The FileId is read where each command's body has it ([MS-SMB2] 2.2.15-2.2.39).
    #[test]
    fn a_requests_open_is_read_where_its_command_keeps_its_file_id() {
        let msg = |at: usize| {
            let mut m = vec![0u8; HEADER_SIZE + 48];
            m[HEADER_SIZE + at..HEADER_SIZE + at + 8].copy_from_slice(&7u64.to_le_bytes());
            m[HEADER_SIZE + at + 8..HEADER_SIZE + at + 16].copy_from_slice(&42u64.to_le_bytes());
            m
        };
        assert_eq!(named_open(Command::CLOSE, &msg(8), None), Some(42));
        assert_eq!(named_open(Command::WRITE, &msg(16), None), Some(42));
        assert_eq!(named_open(Command::QUERY_INFO, &msg(24), None), Some(42));
        assert_eq!(named_open(Command::CREATE, &msg(8), None), None);
        let any = {
            let mut m = vec![0u8; HEADER_SIZE + 48];
            m[HEADER_SIZE + 8..HEADER_SIZE + 24].fill(0xff);
            m
        };
        assert_eq!(named_open(Command::FLUSH, &any, Some((1, 9))), Some(9));
        assert_eq!(named_open(Command::FLUSH, &any, None), None);
        assert_eq!(
            named_open(Command::READ, &msg(16)[..HEADER_SIZE + 20], None),
            None
        );
    }
}
