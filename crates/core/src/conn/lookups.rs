//! Requests parked on a lookup ([`crate::lookup`]): the domain's NTLM check, the KDC's answer
//! to an IAKerb client's request, the account a logon acts as, and the Unix ids of a
//! descriptor's domain SIDs (or the SIDs of a file's ids). The request's job waits here while the driver asks, away from the I/O thread;
//! the connection's other jobs go on meanwhile.

use ringshare_wire::consts::Command;
use ringshare_wire::header::Header;

use super::{Connection, Job};
use crate::cmd::{self, LookupCont};
use crate::io::{Now, Output};
use crate::lookup::{Lookup, LookupDone, LookupRequest};

/// A job parked on a lookup.
pub(super) struct Parked {
    job: Box<Job>,
    hdr: Header,
    /// The member's index in the job, its session and whether it was related.
    member: usize,
    session_id: u64,
    related: bool,
    cont: LookupCont,
    /// The order of the open whose file system job this is ([`crate::fsjob::FsJob::order`]).
    fs_order: Option<u64>,
}

impl Connection {
    /// Member `member` of `job` asked `ask`: the job parks until the answer is in. `ordered`:
    /// the order of the open whose file system job the member waited for, or behind which it
    /// was let go ([`super::behind`]): what it parks on now holds the requests behind it too,
    /// as a file system job of the open does.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn park_on_lookup(
        &mut self,
        mut job: Box<Job>,
        hdr: Header,
        member: usize,
        (session_id, related): (u64, bool),
        mut ask: Lookup,
        cont: LookupCont,
        ordered: Option<u64>,
    ) {
        // What earlier members posted (a LOCK's POSIX locks set back, a let-go) reaches the
        // pool before this: it runs one open's jobs in the order asked (the review of session
        // 46, finding 2: an UNLOCK's release behind the next member's take undid it).
        self.post_to_cluster();
        let id = self.next_io_id;
        self.next_io_id += 1;
        let read = hdr.command == Command::READ;
        let fs_order = match &mut ask {
            Lookup::Fs(j) if j.order != 0 => {
                // Held behind what is not a READ here, and that behind it: the pool need
                // not order it after the open's other READs' jobs.
                j.among_reads = read;
                Some(j.order)
            }
            _ => ordered,
        };
        if let Some(order) = fs_order {
            self.ordered_began(order, read);
            job.came_first = Some(order);
        }
        self.parks(&mut job);
        self.outputs
            .push_back(Output::Lookup(Box::new(LookupRequest { id, ask })));
        let parked = Parked {
            job,
            hdr,
            member,
            session_id,
            related,
            cont,
            fs_order,
        };
        self.lookups.insert(id, parked);
    }

    /// The answer to lookup `id` ([`Output::Lookup`]) is in: its request goes on, then the
    /// rest of its job.
    pub fn complete_lookup(&mut self, now: Now, id: u64, done: LookupDone) {
        let order = self.lookups.get(&id).and_then(|p| p.fs_order);
        self.lookup_answered(now, id, done);
        // The requests that waited behind an open's file system job go on after it.
        if let Some(order) = order {
            self.run_behind(order);
        }
    }

    /// [`Connection::complete_lookup`] but for the requests behind it.
    fn lookup_answered(&mut self, now: Now, id: u64, done: LookupDone) {
        self.core.now = now;
        let Some(p) = self.lookups.remove(&id) else {
            self.async_answered(id, done);
            return;
        };
        if let Some(order) = p.fs_order {
            self.ordered_ended(order, p.hdr.command == Command::READ);
        }
        if self.closing {
            match p.cont {
                // The home took the close: it finishes (a pending delete happens), unanswered.
                // What it asks next is asked all the same, nobody waiting: the persistent
                // open's record's removal, or on an offloaded share the last-close job (the
                // descriptor let go on the pool) and, through its abandon, that removal.
                LookupCont::Close(fin) => {
                    if let Ok(cmd::Handled::Lookup(parked)) =
                        cmd::close::answered(&self.core, *fin, done)
                    {
                        let cmd::Parked { ask, cont } = *parked;
                        if matches!(ask, Lookup::Cluster(_) | Lookup::Fs(_)) {
                            self.core.cluster_posts.push(ask);
                        }
                        cmd::abandon(&mut self.core, cont);
                    }
                }
                _ => {
                    // A CREATE's file system job's open nobody takes now goes on the pool.
                    if let LookupDone::Fs(done) = done {
                        cmd::create::let_go_unused(&mut self.core, done);
                    }
                    p.abandon(&mut self.core)
                }
            }
            self.post_to_cluster();
            return;
        }
        let job = p.job;
        match p.cont {
            LookupCont::Again(asked) => {
                let answer = cmd::answer_of(&self.core, asked, done);
                self.core.domain_answer = Some(answer);
                let mut job = job;
                job.next = p.member;
                job.resumes = Some(p.member);
                job.fs_order = p.fs_order;
                self.run(job);
                // Taken by the member when it ran again; not kept for another. One nobody took
                // (the member failed before it: its session or tree went) lets what it made go
                // now, not with this connection's next request.
                cmd::drop_answer(&mut self.core);
                self.post_to_cluster();
            }
            cont @ (LookupCont::Admit(_)
            | LookupCont::Changed(_)
            | LookupCont::Close(_)
            | LookupCont::Lock(_)
            | LookupCont::Disposition(_)
            | LookupCont::SetInfo(_)
            | LookupCont::Takeover(_)
            | LookupCont::Stat(_)
            | LookupCont::Undo(_)) => {
                let (handled, closed) = match cont {
                    LookupCont::Lock(fin) => {
                        (cmd::lock::answered(&mut self.core, *fin, done), None)
                    }
                    LookupCont::Disposition(fin) => {
                        (cmd::set_info::disposed(&self.core, *fin, done), None)
                    }
                    LookupCont::SetInfo(fin) => {
                        (cmd::set_info::changed(&mut self.core, *fin, done), None)
                    }
                    LookupCont::Admit(fin) => {
                        (cmd::create::admitted(&mut self.core, fin, done), None)
                    }
                    LookupCont::Changed(fin) => {
                        (cmd::create::changed(&mut self.core, *fin, done), None)
                    }
                    LookupCont::Close(fin) => {
                        let ids = fin.ids;
                        (cmd::close::answered(&self.core, *fin, done), Some(ids))
                    }
                    LookupCont::Takeover(fin) => {
                        (cmd::create::durable::taken_over(&mut self.core, *fin), None)
                    }
                    LookupCont::Stat(fin) => (
                        cmd::create::durable::statted(&mut self.core, *fin, done),
                        None,
                    ),
                    LookupCont::Undo(fin) => (cmd::create::undone(fin), None),
                    _ => return,
                };
                let mut job = job;
                match handled {
                    Ok(cmd::Handled::Lookup(parked)) => {
                        let cmd::Parked { ask, cont } = *parked;
                        let (member, session_id, related) = (p.member, p.session_id, p.related);
                        let ids = (session_id, related);
                        self.park_on_lookup(job, p.hdr, member, ids, ask, cont, p.fs_order);
                    }
                    Ok(cmd::Handled::Async(work)) => {
                        // A blocking lock that must wait: STATUS_PENDING, as one told so at once.
                        self.go_async(&mut job, p.hdr, p.session_id, *work);
                        self.run(job);
                    }
                    Ok(cmd::Handled::WaitForBreaks) => {
                        // Run again, the CREATE goes async as one told to wait at once does.
                        self.core.create_waits = Some(p.hdr.message_id);
                        job.next = p.member;
                        self.run(job);
                        self.core.create_waits = None;
                    }
                    answered => {
                        let answered = answered.and_then(|h| match h {
                            cmd::Handled::Reply(r) => Ok(r),
                            _ => Err(ringshare_wire::NtStatus::INTERNAL_ERROR),
                        });
                        let (hdr, session_id, related) = (&p.hdr, p.session_id, p.related);
                        self.answered_after_lookup(job, hdr, session_id, related, closed, answered);
                    }
                }
            }
            cont => {
                let (answered, closed) = match cont {
                    LookupCont::Logon(fin) => {
                        (cmd::session_setup::resume(&mut self.core, *fin, done), None)
                    }
                    LookupCont::Create(fin) => {
                        (cmd::create::resume(&mut self.core, *fin, done), None)
                    }
                    LookupCont::Answer { reply, closed } => (Ok(reply), closed),
                    LookupCont::Again(_)
                    | LookupCont::Admit(_)
                    | LookupCont::Changed(_)
                    | LookupCont::Close(_)
                    | LookupCont::Lock(_)
                    | LookupCont::Disposition(_)
                    | LookupCont::SetInfo(_)
                    | LookupCont::Takeover(_)
                    | LookupCont::Stat(_)
                    | LookupCont::Undo(_) => return,
                };
                self.answered_after_lookup(job, &p.hdr, p.session_id, p.related, closed, answered);
            }
        }
    }

    /// A parked request is answered: its reply goes with its job's, and the job goes on.
    fn answered_after_lookup(
        &mut self,
        job: Box<Job>,
        hdr: &Header,
        session_id: u64,
        related: bool,
        closed: Option<(u64, u64)>,
        answered: Result<crate::exchange::Reply, ringshare_wire::NtStatus>,
    ) {
        let Some(job) = self.member_done(job, hdr, session_id, related, closed, answered) else {
            return;
        };
        match self.core.hold_reply_until_ms.take() {
            Some(until) => self.hold(job, until),
            None => self.run(job),
        }
    }

    /// The connection went: answers still to come find nothing to go on with, and an open
    /// made for a CREATE that waits for its record closes (no client will hear of it).
    pub(super) fn abandon_lookups(&mut self) {
        for (_, p) in std::mem::take(&mut self.lookups) {
            p.abandon(&mut self.core);
        }
        self.abandon_behind();
        self.post_to_cluster();
    }

    /// Ask the cluster what nobody waits for ([`crate::exchange::ConnCore::cluster_posts`]):
    /// lookups no request is parked on (their answers find nothing to go on with).
    pub(super) fn post_to_cluster(&mut self) {
        // And the file system jobs that add kernel watches (crate::notify::kernel), asked by
        // this connection's requests or by another's, or by the kernel's events.
        let watches = self.core.server.take_kernel_jobs();
        self.core
            .cluster_posts
            .extend(watches.into_iter().map(Lookup::Fs));
        for ask in std::mem::take(&mut self.core.cluster_posts) {
            let id = self.next_io_id;
            self.next_io_id += 1;
            self.outputs
                .push_back(Output::Lookup(Box::new(LookupRequest { id, ask })));
        }
    }

    /// Whether a WRITE whose payload the driver received apart waits for a lookup (its byte-range
    /// lock check, asked of the file's home after the I/O grant that let the payload be received
    /// apart was taken back while it came in: cmd/io_check.rs). The driver keeps the payload
    /// meanwhile ([`crate::IoOp::WriteReceived`] takes it when the WRITE runs again) and drops
    /// it once this is false and nothing took it: the WRITE failed, or its connection went
    /// ([`Connection::abandon_lookups`]). A CANCEL does not end the wait (the WRITE is not
    /// async); the call's own bound (2 s) does.
    pub fn holds_payload(&self) -> bool {
        self.lookups.values().any(|p| p.job.detached.is_some()) || self.behind_holds_payload()
    }

    /// Lookups this connection waits for.
    pub(super) fn looking_up(&self) -> bool {
        !self.lookups.is_empty()
    }

    /// Whether a SESSION_SETUP of session `session_id` waits for a lookup.
    pub(super) fn logon_waits(&self, session_id: u64) -> bool {
        session_id != 0 && self.lookups.values().any(|p| p.session() == session_id)
    }
}

impl Parked {
    /// The job parked.
    pub(super) fn job(&self) -> &Job {
        &self.job
    }

    /// What its member goes on with.
    pub(super) fn cont(&self) -> &LookupCont {
        &self.cont
    }

    /// The member's request header.
    pub(super) fn hdr(&self) -> &Header {
        &self.hdr
    }

    /// What an interim response for it needs: the job, the member's header, its session.
    pub(super) fn interim_parts(&mut self) -> (&mut Job, Header, u64) {
        (&mut self.job, self.hdr.clone(), self.session_id)
    }

    /// The session whose SESSION_SETUP waits (0: a request of the cluster's store, which
    /// holds no logon up).
    fn session(&self) -> u64 {
        match &self.cont {
            LookupCont::Logon(fin) => fin.session_id(),
            LookupCont::Again(_) => self.session_id,
            LookupCont::Create(_)
            | LookupCont::Admit(_)
            | LookupCont::Changed(_)
            | LookupCont::Close(_)
            | LookupCont::Lock(_)
            | LookupCont::Disposition(_)
            | LookupCont::SetInfo(_)
            | LookupCont::Takeover(_)
            | LookupCont::Stat(_)
            | LookupCont::Undo(_)
            | LookupCont::Answer { .. } => 0,
        }
    }

    /// Its request will not go on: what it made goes ([`cmd::abandon`]).
    fn abandon(self, core: &mut crate::exchange::ConnCore) {
        cmd::abandon(core, self.cont);
    }
}
