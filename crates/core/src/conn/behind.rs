//! Requests behind an open's file system job (issue 33; docs/cluster-internals.md, "File
//! system calls off the I/O thread", "Ordering"). On a share whose calls are made away from the
//! I/O thread ([`crate::fsjob`]), a request that asks a job parks while it runs; a later
//! request of this connection about the same open (its FileId) parks behind it and runs after
//! it, in the order they came, so that a CLOSE, a SET_INFO, a FLUSH or a WRITE that asks no job
//! does not overtake a READ or WRITE waiting for its job (a CLOSE that did gave the WRITE
//! FILE_CLOSED). Nothing is held on a share whose calls are made on the I/O thread: there no
//! job is ever asked, and the check is one test of an empty map. Across connections nothing is
//! ordered, as before.

use std::collections::{HashMap, VecDeque};

use ringshare_wire::codec::HEADER_LEN as HEADER_SIZE;
use ringshare_wire::consts::Command;
use ringshare_wire::header::Header;
use ringshare_wire::NtStatus;

use super::{Connection, Job};
use crate::fsjob::order_of;

/// Requests held behind opens' file system jobs, and what they wait for, by the open's order
/// ([`order_of`]). Each count and queue is kept as it changes, so a check is a hash lookup, not
/// a scan of the lookups, the I/O out or the queue (a deep pipeline of one open's requests
/// looks at each once).
#[derive(Default)]
pub(super) struct Behind {
    /// The jobs waiting, in the order they came, each with whether the member to run first
    /// is a READ; the job's next member is the one about the open.
    waiting: HashMap<u64, VecDeque<(bool, Box<Job>)>>,
    /// The open's file system jobs asked and not answered, and the lookups and file I/O of
    /// requests that waited for one or were let go from behind one: (READs', others').
    out: HashMap<u64, (usize, usize)>,
}

impl Behind {
    /// Every job waiting behind an open's file system job.
    pub(super) fn jobs(&self) -> impl Iterator<Item = &Job> {
        self.waiting.values().flatten().map(|(_, job)| &**job)
    }

    /// [`Behind::jobs`], to change (an interim response sent: [`super::interim`]).
    pub(super) fn jobs_mut(&mut self) -> impl Iterator<Item = &mut Job> {
        self.waiting
            .values_mut()
            .flatten()
            .map(|(_, job)| &mut **job)
    }

    /// A READ, or another request, of the open of order `order` must wait: READs need no order
    /// among themselves (their I/Os overlap, as before the rule), so only what is not a READ
    /// holds a READ.
    fn holds(&self, order: u64, read: bool) -> bool {
        self.out
            .get(&order)
            .is_some_and(|&(reads, others)| others > 0 || (!read && reads > 0))
    }
}

impl Job {
    /// The header of the member a job waiting here runs first when it goes on (decoded when
    /// the request first ran: one that did not decode ended the connection then).
    pub(super) fn waiting_header(&self) -> Option<Header> {
        let &(start, end) = self.members.get(self.next)?;
        Header::decode(&self.frame[start..end]).ok()
    }
}

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
    /// A lookup or file I/O of a request ordered behind the open of order `order` went out
    /// (`read`: the request is a READ) ([`Connection::ordered_ended`] when it is answered).
    pub(super) fn ordered_began(&mut self, order: u64, read: bool) {
        let (reads, others) = self.behind.out.entry(order).or_default();
        *if read { reads } else { others } += 1;
    }

    /// [`Connection::ordered_began`]'s lookup or I/O is answered.
    pub(super) fn ordered_ended(&mut self, order: u64, read: bool) {
        let Some(counts) = self.behind.out.get_mut(&order) else {
            return;
        };
        let n = if read { &mut counts.0 } else { &mut counts.1 };
        *n = n.saturating_sub(1);
        if *counts == (0, 0) {
            self.behind.out.remove(&order);
        }
    }

    /// Member `idx` of `job` (a `command`, inheriting the open `related`) is about an open
    /// whose file system job is out (or the I/O of a request ordered after one), or behind
    /// which others wait: its order, and the job is to wait behind them
    /// ([`Connection::park_behind`]). A READ waits only for what is not a READ, and for those
    /// already waiting. One that runs again after its own job, or let go from behind, is not
    /// held again.
    pub(super) fn behind_order(
        &self,
        job: &mut Job,
        idx: usize,
        command: Command,
        related: Option<(u64, u64)>,
    ) -> Option<u64> {
        if job.resumes.take() == Some(idx)
            || (self.behind.out.is_empty() && self.behind.waiting.is_empty())
        {
            return None;
        }
        let (start, end) = job.members[idx];
        let order = order_of(named_open(command, &job.frame[start..end], related)?);
        let read = command == Command::READ;
        // A compound's later member about an open an earlier member held came before those
        // waiting behind it: held only by what is out ([`Connection::park_behind`] puts it
        // first).
        let first = job.came_first == Some(order);
        (self.behind.holds(order, read) || (!first && self.behind.waiting.contains_key(&order)))
            .then_some(order)
    }

    /// Whether anything of the open of order `order` is out or waits behind it: a WRITE about
    /// it is received whole, not spliced (parked behind, it would hold its pipes as long).
    pub(super) fn open_is_ordered(&self, order: u64) -> bool {
        self.behind.out.contains_key(&order) || self.behind.waiting.contains_key(&order)
    }

    /// `job` waits behind the file system job of the open of order `order`, its member `idx`
    /// (a `command`) to run first when it goes on: at the back of those waiting, or at the
    /// front when an earlier member of it held that open (they all came after it).
    pub(super) fn park_behind(
        &mut self,
        order: u64,
        mut job: Box<Job>,
        idx: usize,
        command: Command,
    ) {
        job.next = idx;
        // Waiting here long, it gets an interim response as one parked on its own job does.
        self.parks(&mut job);
        let read = command == Command::READ;
        let first = job.came_first == Some(order);
        let queue = self.behind.waiting.entry(order).or_default();
        if first {
            queue.push_front((read, job));
        } else {
            queue.push_back((read, job));
        }
    }

    /// A file system job of the open of order `order` was answered, or an ordered I/O done:
    /// the jobs behind it run, in the order they came, until one is held again (one that asks
    /// a job about the open, or parks on I/O or a lookup: those after it wait for that; a READ
    /// goes on while only READs are out).
    pub(super) fn run_behind(&mut self, order: u64) {
        while !self.closing {
            let first = self.behind.waiting.get(&order).and_then(VecDeque::front);
            let Some(&(read, _)) = first else {
                self.behind.waiting.remove(&order);
                return;
            };
            if self.behind.holds(order, read) {
                return;
            }
            let Some(queue) = self.behind.waiting.get_mut(&order) else {
                return;
            };
            let Some((_, mut job)) = queue.pop_front() else {
                return;
            };
            if queue.is_empty() {
                self.behind.waiting.remove(&order);
            }
            // Let go, it is ordered as one that waited for the open's job: the I/O or lookup it
            // parks on holds the requests still behind (a CLOSE behind a WRITE let go here
            // waits for the WRITE's I/O, not only for the job the WRITE waited behind).
            job.resumes = Some(job.next);
            job.fs_order = Some(order);
            self.run(job);
        }
    }

    /// Whether a job waiting behind another holds a WRITE's payload received apart.
    pub(super) fn behind_holds_payload(&self) -> bool {
        self.behind
            .waiting
            .values()
            .flatten()
            .any(|(_, j)| j.detached.is_some())
    }

    /// A CANCEL ([MS-SMB2] 3.3.5.16) of a request alone in its frame that waits behind another
    /// request's job (`hdr`: by its AsyncId once it had its interim response, else by its
    /// MessageId; of the same session): it leaves the queue unrun, answered STATUS_CANCELLED,
    /// the rest behind the open keeping their order. False when no such request waits here.
    pub(super) fn cancel_behind(&mut self, hdr: &Header) -> bool {
        let asked = |job: &Job| -> Option<Header> {
            let m = job.waiting_header().filter(|_| job.members.len() == 1)?;
            let named = match (hdr.async_id(), job.went_async) {
                (Some(aid), Some((_, went))) => aid == went,
                (Some(_), None) => false,
                (None, _) => m.message_id == hdr.message_id,
            };
            (named && m.session_id == hdr.session_id).then_some(m)
        };
        let found = self.behind.waiting.iter_mut().find_map(|(&order, queue)| {
            let (at, m) = queue
                .iter()
                .enumerate()
                .find_map(|(at, (_, job))| asked(job).map(|m| (at, m)))?;
            Some((order, queue.remove(at)?.1, m))
        });
        let Some((order, mut job, m)) = found else {
            return false;
        };
        if self
            .behind
            .waiting
            .get(&order)
            .is_some_and(VecDeque::is_empty)
        {
            self.behind.waiting.remove(&order);
        }
        job.next += 1;
        self.member_failed(&mut job, &m, m.session_id, false, NtStatus::CANCELLED);
        self.run(job);
        true
    }

    /// Whether jobs wait behind others.
    pub(super) fn behind_waits(&self) -> bool {
        !self.behind.waiting.is_empty()
    }

    /// The connection went: the jobs behind others are dropped, unanswered.
    pub(super) fn abandon_behind(&mut self) {
        self.behind = Behind::default();
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
