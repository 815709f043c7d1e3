//! Sending: a connection's queued frames go out in order, consecutive in-memory ones
//! in one `sendmsg`, an unsigned READ response's file data spliced from the page cache.
//! In-memory frames are first offered to the socket at once, without waiting
//! ([`send_now`]): what it takes whole needs no SEND on the ring, no completion and no turn
//! of the loop (most replies: the socket has room); the rest goes on the ring from where the
//! socket stopped.

use std::io::IoSlice;

use super::inline_send::{Here, InlineSend, Step};
use super::*;

/// `pin cpus = auto`: how long a thread keeps to its CPU after its last spliced READ reply
/// started (a client reading a file sends the next READ well within it).
pub(super) const KEEP_CPU_MS: u64 = 200;

impl Worker {
    pub(super) fn flush_sends(&mut self, slot: u32) {
        // Parts the socket took whole leave nothing in flight: READs waiting for buffer room may
        // start (as after a send's completion) and the queue goes on.
        while self.flush_once(slot) {
            self.start_reads(slot);
        }
    }

    /// Starts sending the front of the connection's queue. True when in-memory parts went out
    /// whole at once ([`send_now`]): nothing is in flight and the queue may go on.
    fn flush_once(&mut self, slot: u32) -> bool {
        let Some(c) = self.conns.get_mut(slot as usize).and_then(Option::as_mut) else {
            return false;
        };
        if c.sending {
            return false;
        }
        let Some(front) = c.send_queue.front_mut() else {
            if c.closing && c.io_in_flight == 0 {
                self.close(slot);
            } else if c.closing {
                // File I/O still runs (a file system that stopped answering):
                // the client learns now that the connection is over.
                let _ = rustix::net::shutdown(&c.fd, rustix::net::Shutdown::Both);
            }
            return false;
        };
        c.sending = true;
        c.send_since = self.clock.mono_ms;
        let tok = token(KIND_SEND, c.gen, slot);
        let fd = c.fd.clone();
        if let SendItem::File {
            head,
            file,
            offset,
            len,
            who,
            here,
        } = front
        {
            let (head, file, offset, len) = (std::mem::take(head), file.clone(), *offset, *len);
            let who = who.take();
            let here = here.now(&file, offset, len, who.as_ref());
            c.send_queue.pop_front();
            c.sending_file = Some(len);
            if here {
                c.inline = Some(InlineSend::new(head, file, offset, len, who));
                self.keep_cpu();
                self.inline_step(slot);
                return false;
            }
            self.keep_cpu();
            self.ring
                .send_file(&fd, head, &file, offset, len, who.as_ref(), tok);
            return false;
        }
        // A lone large in-memory part may go with SEND_ZC (the kernel sends from its pages).
        let lone = !matches!(c.send_queue.get(1), Some(SendItem::Bytes(_)));
        let large =
            matches!(c.send_queue.front(), Some(SendItem::Bytes(p)) if p.len() >= ZC_SEND_MIN);
        if lone && large && c.zc != Zc::Off {
            if let Some(SendItem::Bytes(p)) = c.send_queue.pop_front() {
                c.sending_bytes = p.len();
                self.zc_sends[0] += 1;
                self.ring.send_zc(&fd, p, 0, tok);
            }
            return false;
        }
        // Consecutive in-memory parts (one or more) go out in one sendmsg, listed in the
        // list the last batch came back in: offered to the socket at once first.
        let mut parts = std::mem::take(&mut c.spare_parts);
        while parts.len() < SEND_BATCH_PARTS_MAX {
            match c.send_queue.front() {
                Some(SendItem::Bytes(_)) => {}
                _ => break,
            }
            if let Some(SendItem::Bytes(b)) = c.send_queue.pop_front() {
                parts.push(b);
            }
        }
        c.sending_bytes = parts.iter().map(Vec::len).sum();
        let sent = send_parts_now(&fd, &parts);
        if sent == 0 {
            c.send_quiet = self.ring.quietly(|r| r.send_vectored(&fd, parts, tok));
            return false;
        }
        // What went whole is done with; a part the socket took some of goes on from there on
        // the ring, and the parts after it go back to the queue's front, in order.
        let (whole, rest) = split_sent(&parts, sent);
        let mut left = parts.drain(whole..);
        // (None also when the parts offered went whole and more were not offered: queued back.)
        let partial = (rest > 0).then(|| left.next()).flatten().map(|p| (p, rest));
        for b in left.rev() {
            c.send_queue.push_front(SendItem::Bytes(b));
        }
        for b in parts.drain(..) {
            give_back(&mut self.pool, Some(&mut c.conn), b);
        }
        c.spare_parts = parts;
        let Some((p, offset)) = partial else {
            (c.sending, c.sending_bytes) = (false, 0);
            return true;
        };
        c.sending_bytes = p.len();
        c.send_quiet = self.ring.quietly(|r| r.send(&fd, p, offset, tok));
        false
    }

    /// `pin cpus = auto`: a spliced READ reply starts, so this thread and its io-wq workers
    /// keep to its CPU (already so while replies follow each other).
    fn keep_cpu(&mut self) {
        let Some(k) = self.keep.as_mut() else { return };
        if let Err(e) = k.hold(&mut self.ring, self.clock.mono_ms) {
            tracing::info!(
                "pin cpus = auto: I/O thread {} cannot keep to CPU {} ({e}); it runs free from now on",
                self.index,
                k.home()
            );
            self.keep = None;
        }
    }

    /// `pin cpus = auto`: the thread is free again once no spliced READ reply started for
    /// [`KEEP_CPU_MS`] (the loop's wait ends by then: `next_timeout`).
    pub(super) fn let_cpu_go(&mut self, now_ms: u64) {
        let Some(k) = self.keep.as_mut() else { return };
        if let Err(e) = k.let_go_if_idle(&mut self.ring, now_ms) {
            tracing::warn!(
                "pin cpus = auto: I/O thread {} could not leave CPU {} ({e}); it stays there",
                self.index,
                k.home()
            );
            self.keep = None;
        }
    }

    /// At the end of a turn, for a connection the turn touched: a quiet send in flight whose
    /// end something now waits for (replies queued behind it, READs waiting for buffer room,
    /// the close) ends the loop's wait when it completes.
    pub(super) fn need_send_end(&mut self, slot: u32) {
        let Some(c) = self.conns.get_mut(slot as usize).and_then(Option::as_mut) else {
            return;
        };
        // (`send_quiet` is set only while its send is in flight: `on_send` clears it.)
        let waits = !c.send_queue.is_empty() || !c.reads_waiting.is_empty() || c.closing;
        if let Some(key) = c.send_quiet.take_if(|_| waits) {
            self.ring.need(key);
        }
    }

    /// Moves what it can of the connection's inline READ reply; when the socket is full, waits
    /// for it to take more ([`Ring::poll_writable`]), else reports the reply's end as the ring
    /// would ([`Ring::done_here`]: `on_send` takes it).
    fn inline_step(&mut self, slot: u32) {
        let Some(c) = self.conns.get_mut(slot as usize).and_then(Option::as_mut) else {
            return;
        };
        let Some(mut st) = c.inline.take() else {
            return;
        };
        let tok = token(KIND_SEND, c.gen, slot);
        let piped = if st.needs_pipe() {
            let pipe = match self.pipes.pop() {
                Some(p) => Ok(p),
                None => self
                    .ring
                    .new_splice_pipe()
                    .map(|p| Pipe::new(p, &self.pipes_live)),
            };
            pipe.map(|p| st.give_pipe(p))
        } else {
            Ok(())
        };
        // As the reader of the file, as the ring's splices run (the pipe is made before: it is
        // the server's). A failed switch refuses the reply: it never runs as someone else.
        let ready = piped
            .and_then(|()| act_for(st.who()))
            .and_then(|()| Ok(rustix::io::ioctl_fionbio(&*c.fd, true)?));
        let step = match ready {
            Ok(()) => {
                let step = st.step(&*c.fd);
                if let Err(e) = rustix::io::ioctl_fionbio(&*c.fd, false) {
                    tracing::debug!("a socket stays non-blocking: {e}");
                }
                step
            }
            Err(e) => st.fail(e),
        };
        match step {
            Step::Blocked => {
                c.inline = Some(st);
                self.ring.poll_writable(&c.fd, tok);
            }
            Step::Done(result, head, pipe) => {
                if let Some(p) = pipe {
                    keep_pipes(&mut self.pipes, [p]);
                }
                self.ring.done_here(tok, result, Some(head));
            }
        }
    }

    pub(super) fn on_send(&mut self, slot: u32, gen: u32, mut comp: Completion) {
        if let Some(c) = conn_in(&mut self.conns, slot, gen) {
            if c.inline.is_some() {
                // The socket can take more (or failed: the splice says so).
                if comp.result.is_ok() {
                    return self.inline_step(slot);
                }
                c.inline = None;
            }
        }
        self.zc_sends[1] += u64::from(comp.zc_copied);
        let buf = comp.take_buf();
        let mut bufs = comp.bufs.take().unwrap_or_default();
        // (If the connection is gone, its large buffers still serve others.)
        let mut c = conn_in(&mut self.conns, slot, gen);
        for b in buf.into_iter().chain(bufs.drain(..)) {
            give_back(&mut self.pool, c.as_mut().map(|c| &mut c.conn), b);
        }
        let Some(c) = c else {
            return;
        };
        if bufs.capacity() > 0 {
            c.spare_parts = bufs;
        }
        if comp.zc_copied && c.zc == Zc::Auto {
            tracing::debug!("zero-copy send was copied by the kernel on this connection; plain sends from now on");
            c.zc = Zc::Off;
        }
        c.sending = false;
        c.send_quiet = None;
        c.sending_bytes = 0;
        let owed = c.sending_file.take();
        match comp.result {
            Err(e) => {
                tracing::debug!("send failed: {e}");
                self.close(slot);
                return;
            }
            Ok(n) => {
                if let Some(len) = owed.filter(|len| n < *len) {
                    // The file shrank after the core sized the reply: the frame
                    // length is on the wire, so fill it up (as a concurrent
                    // truncate would read: zeros).
                    tracing::debug!(
                        sent = n,
                        promised = len,
                        "file shrank under a READ; padding"
                    );
                    c.send_queue.push_front(SendItem::Bytes(vec![0u8; len - n]));
                }
            }
        }
        // Starts waiting READs (one may complete at once, read in this
        // thread) and sends what is queued.
        self.drain(slot);
    }
}

/// The bytes of `parts`, in order, that the socket takes at once without waiting (0 when it
/// takes none or the send fails: the ring's SEND of them then reports the failure).
pub(super) fn send_now(fd: &SharedFd, parts: &[IoSlice<'_>]) -> usize {
    use rustix::net::{SendAncillaryBuffer, SendFlags};
    let flags = SendFlags::DONTWAIT | SendFlags::NOSIGNAL;
    let mut none = SendAncillaryBuffer::default();
    rustix::net::sendmsg(&**fd, parts, &mut none, flags).unwrap_or(0)
}

/// Buffers [`send_parts_now`] offers at once at most (a batch longer than that sends the rest
/// after them: [`Worker::flush_sends`] goes on with what it queued back).
const SEND_NOW_PARTS_MAX: usize = 64;

/// [`send_now`] of the first [`SEND_NOW_PARTS_MAX`] of `parts`, listed on the stack (a
/// warmed-up server allocates nothing per reply).
fn send_parts_now(fd: &SharedFd, parts: &[Vec<u8>]) -> usize {
    let mut list = [IoSlice::new(&[]); SEND_NOW_PARTS_MAX];
    let n = parts.len().min(SEND_NOW_PARTS_MAX);
    for (slot, p) in list.iter_mut().zip(parts) {
        *slot = IoSlice::new(p);
    }
    send_now(fd, &list[..n])
}

/// After `sent` bytes of `parts` went out: how many parts went whole, and how far into the
/// next one the socket got.
fn split_sent(parts: &[Vec<u8>], mut sent: usize) -> (usize, usize) {
    for (i, p) in parts.iter().enumerate() {
        if sent < p.len() {
            return (i, sent);
        }
        sent -= p.len();
    }
    (parts.len(), 0)
}

/// A send-file frame as a queue item; read into memory if the node has no
/// descriptor (a backend the core should not have offered it for).
pub(super) fn file_item(sf: SendFile) -> SendItem {
    match sf.node.shared_fd() {
        Some(file) => SendItem::File {
            head: sf.head,
            file,
            offset: sf.offset,
            len: sf.len,
            who: sf.node.who().cloned(),
            here: Here::of(&*sf.node),
        },
        None => SendItem::Bytes(sf.to_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parts_a_send_took_whole_are_told_from_the_one_it_stopped_in() {
        let parts = vec![vec![1u8; 10], vec![2; 20], vec![3; 30]];
        assert_eq!(split_sent(&parts, 0), (0, 0));
        assert_eq!(split_sent(&parts, 9), (0, 9));
        assert_eq!(split_sent(&parts, 10), (1, 0));
        assert_eq!(split_sent(&parts, 25), (1, 15));
        assert_eq!(split_sent(&parts, 60), (3, 0));
    }

    #[test]
    fn parts_the_socket_takes_whole_are_sent_at_once_in_order_and_the_rest_is_left() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let fd: SharedFd = Arc::new(OwnedFd::from(a));
        let parts: Vec<Vec<u8>> = (0u8..3).map(|i| vec![i; 1000]).collect();
        assert_eq!(send_parts_now(&fd, &parts), 3000);
        let mut got = vec![0u8; 3000];
        std::io::Read::read_exact(&mut &b, &mut got).unwrap();
        assert!(got
            .chunks(1000)
            .enumerate()
            .all(|(i, c)| c.iter().all(|&x| x == i as u8)));
        // A peer that does not read: the socket takes what it has room for, then nothing.
        let big: Vec<Vec<u8>> = (0..64).map(|_| vec![7u8; 64 << 10]).collect();
        let took = send_parts_now(&fd, &big);
        assert!(took > 0 && took < 64 * (64 << 10), "took {took}");
        assert_eq!(send_parts_now(&fd, &big), 0);
    }

    #[test]
    fn a_batch_longer_than_the_list_is_offered_up_to_the_list_and_the_rest_left_whole() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let fd: SharedFd = Arc::new(OwnedFd::from(a));
        let parts: Vec<Vec<u8>> = (0..100).map(|_| vec![1u8; 10]).collect();
        let sent = send_parts_now(&fd, &parts);
        assert_eq!(sent, SEND_NOW_PARTS_MAX * 10);
        assert_eq!(split_sent(&parts, sent), (SEND_NOW_PARTS_MAX, 0));
    }
}
