//! File I/O the core asks for: started on the ring (or run in this thread when it is
//! small and the page cache has it), and its completion handed back to the connection.

use super::*;

impl Worker {
    pub(super) fn start_io(&mut self, slot: u32, req: IoRequest) {
        let Some(c) = self.conns.get_mut(slot as usize).and_then(Option::as_mut) else {
            return;
        };
        let gen = c.gen;
        let fd = match req.node.shared_fd() {
            // No descriptor (in-memory backend), or small I/O on tmpfs: here and now.
            Some(fd) if !in_place(&req, &fd) => fd,
            _ => {
                let id = req.id;
                let done = run_here(&mut self.pool, &mut c.conn, req);
                let t = self.clock;
                c.conn.complete_io(t, id, done);
                return;
            }
        };
        let receiving = matches!(req.op, IoOp::WriteReceived { .. });
        let mut loaded = if receiving {
            c.pipe_loaded.take()
        } else {
            None
        };
        if receiving && loaded.is_none() {
            // Cannot happen: the core asks for it only while the driver holds
            // the payload. Fail the WRITE rather than report nothing written.
            let t = self.clock;
            c.conn
                .complete_io(t, req.id, IoDone::Write(Err(FsError::Io)));
            return;
        }
        c.io_in_flight += 1;
        let id = self.next_io;
        self.next_io += 1;
        let tok = (KIND_IO << 56) | (id & 0x00FF_FFFF_FFFF_FFFF);
        let mut held_len = 0;
        let mut piped = None;
        // Every file operation runs as the open's user (its io_uring
        // personality), inline or in an io_uring worker.
        let who = req.node.who().cloned();
        // Where an inline try of a READ or WRITE would wait for the file system in this thread
        // (FUSE in direct I/O mode), it goes to an io_uring worker at once.
        let punt = req.node.ring_io_may_block();
        let kind = match req.op {
            IoOp::Read {
                offset,
                len,
                headroom,
            } => {
                let mut buf = read_buf(&mut self.pool, &mut c.conn, headroom + len);
                buf.resize(headroom, 0);
                self.ring.punted(punt, |ring| {
                    ring.read_at(&fd, buf, len, offset, who.as_ref(), tok)
                });
                if len >= POOL_BUF_MIN {
                    c.reads_in_flight += 1;
                    c.read_bytes_in_flight += len;
                    held_len = len;
                }
                IoKind::Read
            }
            IoOp::Write {
                offset,
                buf,
                start,
                end,
            } => {
                self.ring.punted(punt, |ring| {
                    ring.write_at(&fd, buf, start..end, offset, who.as_ref(), tok)
                });
                IoKind::Write
            }
            IoOp::WriteReceived { offset, len } => {
                let pipes = loaded.take().expect("checked above");
                let w = PipedWrite {
                    pipes,
                    file: fd.clone(),
                    offset,
                    len,
                    next: 0,
                    written: 0,
                    who,
                };
                self.ring.splice(
                    &w.pipes[0].read,
                    None,
                    &fd,
                    Some(offset),
                    w.piece(0),
                    w.who.as_ref(),
                    tok,
                );
                piped = Some(w);
                IoKind::Write
            }
            IoOp::Sync => {
                self.ring.fsync(&fd, who.as_ref(), tok);
                IoKind::Sync
            }
        };
        self.ios.insert(
            tok,
            PendingIo {
                slot,
                gen,
                core_id: req.id,
                kind,
                held_len,
                pipes: piped,
            },
        );
    }

    pub(super) fn on_io(&mut self, mut comp: Completion) {
        let Some(mut p) = self.ios.remove(&comp.user_data) else {
            return;
        };
        // A spliced payload goes into the file pipe after pipe: on to the next
        // once one was written whole.
        if let (Some(w), Ok(n)) = (p.pipes.as_mut(), &comp.result) {
            if *n == w.piece(w.next) {
                w.written += n;
                w.next += 1;
                if w.next < w.pipes.len() {
                    let (i, at) = (w.next, w.offset + w.written as u64);
                    let (read, file) = (w.pipes[i].read.clone(), w.file.clone());
                    let (piece, who) = (w.piece(i), w.who.clone());
                    self.ring.splice(
                        &read,
                        None,
                        &file,
                        Some(at),
                        piece,
                        who.as_ref(),
                        comp.user_data,
                    );
                    self.ios.insert(comp.user_data, p);
                    return;
                }
            }
        }
        let t = self.clock;
        let err = |e: &io::Error| FsError::from_errno(e.raw_os_error().unwrap_or(5));
        let done = match p.kind {
            IoKind::Read => IoDone::Read(match &comp.result {
                Ok(_) => Ok(comp.take_buf().unwrap_or_default()),
                Err(e) => Err(err(e)),
            }),
            IoKind::Write => {
                // The frame the payload was written from can serve again.
                if let Some(b) = comp.take_buf() {
                    let conn = conn_in(&mut self.conns, p.slot, p.gen).map(|c| &mut c.conn);
                    give_back(&mut self.pool, conn, b);
                }
                // So can the pipes that were emptied (a short write leaves
                // bytes in the last one written).
                match p.pipes.take() {
                    Some(w) => {
                        let whole = w.next == w.pipes.len();
                        let emptied = w.next;
                        let mut list = w.pipes;
                        keep_pipes(&mut self.pipes, list.drain(..emptied.min(list.len())));
                        list.clear();
                        if self.pipe_lists.len() < PIPE_LISTS_KEPT_MAX {
                            self.pipe_lists.push(list);
                        }
                        match &comp.result {
                            Ok(_) if whole => IoDone::Write(Ok(w.written)),
                            // Short: what was written before, and this pipe's part.
                            Ok(n) => IoDone::Write(Ok(w.written + n)),
                            Err(e) if w.written > 0 => {
                                tracing::debug!(
                                    "spliced WRITE failed after {} bytes: {e}",
                                    w.written
                                );
                                IoDone::Write(Ok(w.written))
                            }
                            Err(e) => IoDone::Write(Err(err(e))),
                        }
                    }
                    None => IoDone::Write(comp.result.as_ref().map(|n| *n).map_err(err)),
                }
            }
            IoKind::Sync => IoDone::Sync(comp.result.as_ref().map(|_| ()).map_err(err)),
        };
        let Some(c) = self.conn_mut(p.slot, p.gen) else {
            if let IoDone::Read(Ok(b)) = done {
                self.pool.give(b);
            }
            return;
        };
        c.io_in_flight -= 1;
        if p.held_len > 0 {
            c.reads_in_flight -= 1;
            c.read_bytes_in_flight -= p.held_len;
        }
        c.conn.complete_io(t, p.core_id, done);
        self.drain(p.slot);
    }
}
