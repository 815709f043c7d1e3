//! A job member's first steps ([MS-SMB2] 3.3.5.2): its header checked, the session, tree and
//! file id it runs with (a related member inherits them), and parking on file I/O.

use super::*;

impl Connection {
    /// Member `idx`'s header, checked as [MS-SMB2] 3.3.5.2 wants before anything runs: it
    /// decodes, is a request, its credits are charged once (3.3.5.2.3; CANCEL consumes no
    /// message id), and nothing but NEGOTIATE comes before NEGOTIATE. `None` when the
    /// connection closes for it (without a reply).
    pub(super) fn member_header(&mut self, job: &mut Job, idx: usize) -> Option<Header> {
        let (start, end) = job.members[idx];
        let hdr = match Header::decode(&job.frame[start..end]) {
            Ok(h) => h,
            Err(e) => {
                self.disconnect(&format!("bad header: {e}"));
                return None;
            }
        };
        if hdr.is_response() {
            self.disconnect("response flag set on a request");
            return None;
        }
        if hdr.command != Command::CANCEL && idx >= job.charged {
            job.charged = idx + 1;
            let charge = if self.large_mtu() {
                hdr.credit_charge
            } else {
                1
            };
            // A charge above what the largest payload needs is only
            // wasteful (smbtorture smb2.notify.valid-req charges 129 for a
            // buffer one byte too big and expects INVALID_PARAMETER from
            // the command); the window below bounds it.
            if let Err(e) = self.credits.consume(hdr.message_id, charge) {
                self.disconnect(&format!("credit check failed: {e:?}"));
                return None;
            }
        }
        if self.core.negotiated.is_none() && hdr.command != Command::NEGOTIATE {
            self.disconnect("request before NEGOTIATE");
            return None;
        }
        Some(hdr)
    }

    /// The session, tree and file id member `idx` runs with: its own, or for a related
    /// member the previous member's ([MS-SMB2] 3.3.5.2.7.2). `None` when it was answered
    /// with the status it inherits instead: a first member marked related (it and every
    /// related member after it fail with INVALID_PARAMETER), a related member after a
    /// failed CREATE, or one whose inherited session never existed.
    pub(super) fn member_ids(
        &mut self,
        job: &mut Job,
        hdr: &Header,
        idx: usize,
    ) -> Option<MemberIds> {
        let related = hdr.is_related() && idx > 0;
        if hdr.is_related() && idx == 0 {
            job.related_error = Some(NtStatus::INVALID_PARAMETER);
            let reply = Reply::with_status(NtStatus::INVALID_PARAMETER, Vec::new());
            self.push_reply(job, hdr, hdr.session_id, reply);
            return None;
        }
        let ids = if related {
            (job.last_session, job.last_tree, job.last_file)
        } else {
            (hdr.session_id, hdr.tree_id().unwrap_or(0), None)
        };
        let orphan = related && !self.core.sessions.contains_key(&ids.0);
        let inherited = if orphan {
            Some(NtStatus::INVALID_PARAMETER)
        } else {
            job.related_error
        };
        if let Some(status) =
            inherited.filter(|_| related && (orphan || hdr.command != Command::CREATE))
        {
            let reply = Reply::with_status(status, Vec::new());
            self.push_reply(job, hdr, ids.0, reply);
            return None;
        }
        Some(ids)
    }

    /// A member waits for file I/O: the request goes out, and the job parks until it is done.
    /// A WRITE whose payload is still in the frame takes it (the whole frame when it is the
    /// only member).
    pub(super) fn park_on_io(
        &mut self,
        mut job: Box<Job>,
        hdr: Header,
        r0: Req0,
        node: Arc<dyn Node>,
        mut op: IoOp,
        cont: Cont,
    ) {
        let id = self.next_io_id;
        self.next_io_id += 1;
        if let IoOp::Write {
            buf,
            start: s,
            end: e,
            ..
        } = &mut op
        {
            if buf.is_empty() {
                if job.members.len() == 1 {
                    *buf = std::mem::take(&mut job.frame);
                } else {
                    *buf = job.frame[*s..*e].to_vec();
                    *e -= *s;
                    *s = 0;
                }
            }
        }
        if let Some(order) = r0.fs_order {
            self.ordered_began(order, hdr.command == Command::READ);
            job.came_first = Some(order);
        }
        self.parks(&mut job);
        self.outputs
            .push_back(Output::Io(IoRequest { id, node, op }));
        self.parked.insert(id, (job, hdr, cont, r0));
    }
}
