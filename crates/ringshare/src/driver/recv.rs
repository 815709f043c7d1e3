//! Receiving: a connection's multishot or single receives, frames cut out of the
//! receive buffer, and a large WRITE's payload taken straight into its own buffer or
//! spliced through pipes into the file.

use super::*;

impl Worker {
    pub(super) fn arm_recv(&mut self, slot: u32) {
        let Some(c) = self.conns.get_mut(slot as usize).and_then(Option::as_mut) else {
            return;
        };
        if c.recv_armed || c.closing || c.held {
            return;
        }
        let tok = token(KIND_RECV, c.gen, slot);
        if matches!(c.rx, Rx::Small) && !c.last_frame_large && self.ring.has_recv_bufs() {
            c.recv_armed = true;
            c.multishot = true;
            c.multishot_ending = false;
            let fd = c.fd.clone();
            self.ring.recv_multishot(&fd, tok);
            return;
        }
        let buf = match &mut c.rx {
            Rx::Small => {
                let mut b = std::mem::take(&mut c.buf);
                if b.capacity() - b.len() < 4096 {
                    b.reserve(RECV_BUF_LEN);
                }
                b
            }
            Rx::Large { frame, .. } => std::mem::take(frame),
            // The payload splice is the receive in flight.
            Rx::Pipe { .. } => return,
        };
        c.recv_armed = true;
        let fd = c.fd.clone();
        // After a large WRITE the next frame is likely one too: receive only
        // as far as its payload, so that none of the payload is copied into
        // memory (and then into the pipe) before its splice.
        let max = match &c.rx {
            Rx::Small if c.last_frame_large && buf.len() < WRITE_HEAD_LEN => {
                WRITE_HEAD_LEN - buf.len()
            }
            _ => usize::MAX,
        };
        self.ring.recv_up_to(&fd, buf, max, tok);
    }

    pub(super) fn on_recv(&mut self, slot: u32, gen: u32, mut comp: Completion) {
        let t = self.clock;
        // Only `self.conns` borrowed (not `conn_mut`): the pool and pipes are used below.
        let Some(c) = conn_in(&mut self.conns, slot, gen) else {
            return;
        };
        if c.multishot {
            if !comp.more {
                c.recv_armed = false;
                c.multishot = false;
            }
            match &comp.result {
                Ok(0) => {
                    self.close(slot);
                    return;
                }
                // After the core asked to close, what else comes is dropped.
                Ok(_) if c.closing => {}
                Ok(_) => {
                    self.multishot_arrivals += 1;
                    c.buf.extend_from_slice(self.ring.received(&comp));
                }
                // Ended on purpose (a large frame follows), or every provided
                // buffer was in use: nothing came; armed again below.
                Err(e) if matches!(e.raw_os_error(), Some(libc::ECANCELED | libc::ENOBUFS)) => {
                    if e.raw_os_error() == Some(libc::ENOBUFS) {
                        self.recv_bufs_exhausted += 1;
                    }
                }
                Err(e) => {
                    tracing::debug!("receive failed: {e}");
                    self.close(slot);
                    return;
                }
            }
            self.cut_frames(slot, gen, t);
            return;
        }
        c.recv_armed = false;
        let buf = comp.take_buf().unwrap_or_default();
        match &mut c.rx {
            Rx::Small => c.buf = buf,
            Rx::Large { frame, .. } => *frame = buf,
            Rx::Pipe {
                moving: 0, waited, ..
            } => {
                // The poll: more of the payload has come, or the peer closed,
                // or TCP wants its queue read (memory pressure, a closing window).
                *waited = true;
                let _ = net::set_rcvlowat(&*c.fd, 1);
                let queued = rustix::io::ioctl_fionread(&*c.fd).unwrap_or(0);
                if comp.result.is_err() || queued == 0 {
                    tracing::debug!("peer closed in the middle of a WRITE payload");
                    self.close(slot);
                    return;
                }
                // Move what came, even if less than a step: TCP may wake the
                // poll early and would wake it again at once (a spin).
                self.pipe_step(slot, gen, 1);
                return;
            }
            Rx::Pipe { rest, moving, .. } => match comp.result {
                Ok(0) => {
                    tracing::debug!("peer closed in the middle of a WRITE payload");
                    self.close(slot);
                    return;
                }
                Ok(n) if n == *moving && n < *rest => {
                    *rest -= n;
                    self.pipe_step(slot, gen, PIPE_STEP);
                    return;
                }
                Ok(n) if n == *moving => *rest -= n,
                Ok(n) => {
                    // The pipe filled up before the payload was in it (small
                    // socket fragments take a pipe slot each): take what it
                    // holds back and receive the rest into memory.
                    *rest -= n;
                    tracing::trace!(n, "WRITE payload: pipe full, into memory");
                    self.writes_spliced[2] += 1;
                    self.pipe_to_memory(slot, gen);
                    return;
                }
                // Full before anything moved.
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {
                    tracing::trace!("WRITE payload: pipe full, into memory");
                    self.writes_spliced[2] += 1;
                    self.pipe_to_memory(slot, gen);
                    return;
                }
                Err(_) => {}
            },
        }
        match comp.result {
            Ok(0) | Err(_) => {
                if let Err(e) = &comp.result {
                    tracing::debug!("receive failed: {e}");
                }
                self.close(slot);
                return;
            }
            Ok(_) => {}
        }
        self.cut_frames(slot, gen, t);
    }

    /// Cuts the complete frames received and feeds them to the core, starts
    /// the receive of a large frame's rest, and receives on.
    pub(super) fn cut_frames(&mut self, slot: u32, gen: u32, t: Now) {
        // How far the small frames fed so far reach into the receive buffer:
        // they are dropped from it at once when the next frame is not all
        // there (not once per frame, which moved the rest of a burst down
        // every time).
        let mut cut = 0;
        loop {
            // Only `self.conns` borrowed (not `conn_mut`): the pool and pipes are used below.
            let Some(c) = conn_in(&mut self.conns, slot, gen) else {
                return;
            };
            match &mut c.rx {
                Rx::Pipe { rest: 0, .. } => {
                    let Rx::Pipe {
                        head,
                        len,
                        pipes,
                        waited,
                        ..
                    } = std::mem::replace(&mut c.rx, Rx::Small)
                    else {
                        break;
                    };
                    self.writes_spliced[usize::from(waited)] += 1;
                    c.pipe_loaded = Some(pipes);
                    tracing::trace!(len, "WRITE payload in its pipe");
                    c.conn.receive_detached(t, head, len);
                    self.drain(slot);
                    // Not taken by a WriteReceived: kept while the WRITE waits
                    // for its file's home, else it failed and its payload goes
                    // with the pipes.
                    if let Some(c) = self.conns.get_mut(slot as usize).and_then(Option::as_mut) {
                        drop_unheld_payload(c);
                    }
                    continue;
                }
                // Still splicing (not reached: the splice or poll in flight
                // is the receive).
                Rx::Pipe { .. } => break,
                Rx::Large { frame, len } => {
                    if frame.len() < *len {
                        break;
                    }
                    // A pooled buffer may hold more than the frame: what came
                    // after it goes back to the small-frame buffer.
                    if frame.len() > *len {
                        c.buf.extend_from_slice(&frame[*len..]);
                        frame.truncate(*len);
                    }
                    let f = std::mem::take(frame);
                    c.rx = Rx::Small;
                    c.conn.receive(t, f);
                }
                Rx::Small => {
                    let Some(hdr) = c.buf.get(cut..cut + 4) else {
                        c.buf.drain(..cut);
                        break;
                    };
                    let hdr = [hdr[0], hdr[1], hdr[2], hdr[3]];
                    let len = match framing::frame_len(hdr) {
                        Ok(l) if l <= c.conn.frame_len_max() => l,
                        _ => {
                            tracing::debug!(peer = ?slot, "bad or oversized frame header; closing");
                            self.close(slot);
                            return;
                        }
                    };
                    if c.buf.len() >= cut + 4 + len
                        && !fed_one(c, self.turns, &mut self.feeders, self.feeders_before)
                    {
                        // This connection's frames for this turn are fed: the rest wait
                        // for the next, the multishot receive (if any) ended meanwhile.
                        c.buf.drain(..cut);
                        if !c.held {
                            c.held = true;
                            self.held.push(slot);
                        }
                        end_multishot(&mut self.ring, c, slot);
                        break;
                    }
                    if let Some(body) = c.buf.get(cut + 4..cut + 4 + len) {
                        c.last_frame_large = len > DIRECT_FRAME_MIN;
                        // Cut into a buffer the connection had spare (its
                        // last frames come back to it): no allocation.
                        let mut frame = c.conn.spare_buf(len);
                        frame.extend_from_slice(body);
                        cut += 4 + len;
                        c.conn.receive(t, frame);
                    } else if cut > 0 {
                        // The frames fed leave the buffer at once; this one
                        // is looked at again from its front.
                        c.buf.drain(..cut);
                        cut = 0;
                        continue;
                    } else if len > DIRECT_FRAME_MIN {
                        if c.multishot {
                            // The rest goes into a buffer of its own (or a
                            // pipe) once the multishot receive has ended;
                            // what it still brings is appended meanwhile.
                            end_multishot(&mut self.ring, c, slot);
                            break;
                        }
                        c.last_frame_large = true;
                        if let Some(rx) = detach_write(
                            c,
                            &mut self.pipes,
                            &self.pipes_live,
                            &mut self.pipe_size_max,
                            &mut self.ring,
                            &mut self.pipe_lists,
                            len,
                        ) {
                            self.write_prefix_bytes +=
                                c.buf.len().saturating_sub(WRITE_HEAD_LEN) as u64;
                            c.buf.clear();
                            c.rx = rx;
                            self.pipe_step(slot, gen, PIPE_STEP);
                            return;
                        }
                        let mut frame = self.pool.take(len);
                        frame.extend_from_slice(&c.buf[4..]);
                        c.buf.clear();
                        c.rx = Rx::Large { frame, len };
                        break;
                    } else {
                        break;
                    }
                }
            }
            self.drain(slot);
        }
        self.drain(slot);
        self.arm_recv(slot);
    }

    /// The next move of a WRITE payload into its pipe: splice what is queued
    /// in the socket if that is at least `step` bytes (or all that is left),
    /// else poll until it is (`SO_RCVLOWAT`).
    pub(super) fn pipe_step(&mut self, slot: u32, gen: u32, step: usize) {
        let Some(c) = conn_in(&mut self.conns, slot, gen) else {
            return;
        };
        let Rx::Pipe {
            len,
            rest,
            moving,
            pipes,
            ..
        } = &mut c.rx
        else {
            return;
        };
        let queued =
            usize::try_from(rustix::io::ioctl_fionread(&*c.fd).unwrap_or(0)).unwrap_or(usize::MAX);
        let step = (*rest).min(step);
        tracing::trace!(queued, step, rest = *rest, "pipe step");
        let tok = token(KIND_RECV, gen, slot);
        c.recv_armed = true;
        if queued >= step {
            // Into the pipe whose share of the payload is being filled, up to its end.
            let at = *len - *rest;
            let current = at / PIPE_STEP;
            let room = (current * PIPE_STEP + piece_len(*len, current)) - at;
            let Some(pipe) = pipes.get(current) else {
                c.recv_armed = false;
                self.pipe_to_memory(slot, gen);
                return;
            };
            *moving = queued.min(room);
            self.ring
                .splice_until_full(&c.fd, &pipe.write, *moving, tok);
            return;
        }
        *moving = 0;
        if net::set_rcvlowat(&*c.fd, step).is_ok() {
            self.ring.poll_readable(&c.fd, tok);
            return;
        }
        c.recv_armed = false;
        self.writes_spliced[2] += 1;
        self.pipe_to_memory(slot, gen);
    }

    /// Give up splicing a WRITE payload: the frame's head and the payload
    /// bytes the pipe holds go into a buffer of the frame's size, and the rest
    /// of the frame is received into it as usual.
    pub(super) fn pipe_to_memory(&mut self, slot: u32, gen: u32) {
        let Some(c) = conn_in(&mut self.conns, slot, gen) else {
            return;
        };
        let Rx::Pipe {
            head,
            len,
            rest,
            pipes,
            ..
        } = std::mem::replace(&mut c.rx, Rx::Small)
        else {
            return;
        };
        let mut frame = self.pool.take(head.len() + len);
        frame.extend_from_slice(&head);
        let held = len - rest;
        for (i, pipe) in pipes.iter().enumerate() {
            if !read_exact_into(&pipe.read, &mut frame, piece_len(held, i)) {
                self.close(slot);
                return;
            }
        }
        keep_pipes(&mut self.pipes, pipes);
        c.rx = Rx::Large {
            frame,
            len: head.len() + len,
        };
        self.arm_recv(slot);
    }
}

/// Counts a small frame `c` feeds in loop turn `turn` (and `c` in `feeders`, the connections
/// that fed frames this turn, at its first); false when it has fed its share this turn already
/// ([`FRAMES_PER_TURN_SHARED`], or [`FRAMES_PER_TURN_ALONE`] when the turn before fed one
/// connection's frames at most: `feeders_before`).
fn fed_one(c: &mut Conn, turn: u64, feeders: &mut u32, feeders_before: u32) -> bool {
    if c.fed_turn != turn {
        c.fed_turn = turn;
        c.fed = 0;
        *feeders += 1;
    }
    let max = if feeders_before > 1 {
        FRAMES_PER_TURN_SHARED
    } else {
        FRAMES_PER_TURN_ALONE
    };
    if c.fed >= max {
        return false;
    }
    c.fed += 1;
    true
}
