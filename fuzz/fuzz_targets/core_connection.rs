//! The whole server core: a `Connection` over the in-memory backend, fed
//! arbitrary frames. Guest logons are allowed and every share is guest ok, so
//! an anonymous NTLM logon (which needs no secret) reaches TREE_CONNECT,
//! CREATE, READ, WRITE and the rest.
//!
//! Input: a flags byte, then frames, each [u16 LE length][SMB2 message(s)]
//! (the direct-TCP header is the core's caller's business). Flags: bit 0 =
//! hold file I/O completions until the next frame has been received, then
//! complete them newest first; bit 1 = advance the clock 10 s after each
//! frame and fire timers; bit 2 = hand each frame of 116 bytes or more to
//! `receive_detached` as a WRITE head whose payload the driver holds: the
//! frame's last 4 bytes (u32 LE) are the payload length, the rest the head
//! (the core must cope with whatever a driver passes, not only what
//! `detachable_write` allowed).
//!
//! Placeholders for ids the server picks at random (see pcap_to_corpus.py):
//! b"~SESSID~" becomes the last SessionId the server sent, and b"~FILEID~" +
//! k (u64 LE) the FileId of the k-th CREATE response (counting failures, not
//! interim responses). The share starts with the files the corpus was
//! recorded against: `hello.txt` and `sub/a.txt`.
//!
//! Invariants: no panic; every frame sent is well formed (a compressed one
//! once decompressed) and at most the maximum frame size; the core stops
//! producing output (no endless loop); nothing is sent after Close.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringshare_core::{Connection, Entropy, IoRequest, Now, Output};
use ringshare_fuzz::length_prefixed;
use ringshare_vfs::memory::MemShare;
use ringshare_vfs::{OpenMode, OpenOptions, RelPath, Share};
use ringshare_wire::consts::Command;
use ringshare_wire::create::CreateResponse;
use ringshare_wire::header::{split_compound, Header};
use ringshare_wire::NtStatus;

const SESSION_MAGIC: &[u8; 8] = b"~SESSID~";
const FILEID_MAGIC: &[u8; 8] = b"~FILEID~";
/// Outputs one input may cause before the core is deemed to loop.
const OUTPUTS_MAX: usize = 100_000;
/// The in-memory share's capacity: writes past it fail with DISK_FULL.
const SHARE_BYTES_MAX: u64 = 8 << 20;

/// Deterministic entropy, so a crash reproduces.
struct Counter(u64);

impl Entropy for Counter {
    fn fill(&mut self, out: &mut [u8]) {
        for b in out.iter_mut() {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            *b = (self.0 >> 33) as u8;
        }
    }
}

struct Harness {
    conn: Connection,
    now: Now,
    held: Vec<IoRequest>,
    hold_io: bool,
    closed: bool,
    outputs: usize,
    session_id: u64,
    /// FileId of each CREATE response, None for a failed one.
    file_ids: Vec<Option<[u8; 16]>>,
}

impl Harness {
    fn pump(&mut self) {
        while let Some(o) = self.conn.poll_output() {
            self.outputs += 1;
            assert!(
                self.outputs < OUTPUTS_MAX,
                "the core does not stop producing output"
            );
            match o {
                Output::Send(parts) => {
                    assert!(!self.closed, "a frame sent after Close");
                    self.sent(&parts.concat());
                }
                Output::SendFile(sf) => {
                    assert!(!self.closed, "a frame sent after Close");
                    self.sent(&sf.to_bytes());
                }
                Output::Io(req) if self.hold_io => self.held.push(req),
                Output::Io(req) => {
                    let done = req.run_blocking();
                    self.conn.complete_io(self.now, req.id, done);
                }
                Output::Lookup(req) => {
                    let done = req.run();
                    self.conn.complete_lookup(self.now, req.id, done);
                }
                Output::Close => self.closed = true,
            }
        }
    }

    /// Check one sent frame and learn the ids the placeholders stand for.
    fn sent(&mut self, frame: &[u8]) {
        assert!(frame.len() >= 4, "a frame without its header");
        let len = u32::from_be_bytes([0, frame[1], frame[2], frame[3]]) as usize;
        assert_eq!(frame[0], 0, "direct-TCP frame type");
        assert_eq!(len, frame.len() - 4, "the frame header's length");
        assert!(
            len <= self.conn.frame_len_max().max(1 << 24),
            "frame too long: {len}"
        );
        let mut body = &frame[4..];
        if body.starts_with(b"\xfdSMB") {
            return; // encrypted
        }
        // A READ reply the client asked to have compressed: it must
        // decompress (any algorithm, the largest READ) to a well-formed reply.
        let inflated;
        if body.starts_with(b"\xfcSMB") {
            use ringshare_wire::consts::CompressionAlgorithm as A;
            let all = [A::LZNT1, A::LZ77, A::LZ77_HUFFMAN, A::PATTERN_V1, A::LZ4];
            let limit = ringshare_compress::message::size_limit(8 << 20, 8 << 20, 8 << 20);
            inflated = ringshare_compress::decompress_message(body, &all, limit)
                .expect("the server's compressed reply decompresses");
            body = &inflated;
        }
        for m in split_compound(body) {
            let m = m.expect("the server's compound chain is well formed");
            let h = Header::decode(m).expect("the server's header decodes");
            if h.session_id != 0 {
                self.session_id = h.session_id;
            }
            if h.command == Command::CREATE && h.status != NtStatus::PENDING {
                let id = CreateResponse::decode(m).ok().map(|c| {
                    let mut id = [0u8; 16];
                    id[..8].copy_from_slice(&c.file_id.persistent.to_le_bytes());
                    id[8..].copy_from_slice(&c.file_id.volatile.to_le_bytes());
                    id
                });
                self.file_ids.push(id);
            }
        }
    }

    fn substitute(&self, frame: &mut [u8]) {
        let mut i = 0;
        while i + 8 <= frame.len() {
            if &frame[i..i + 8] == SESSION_MAGIC {
                frame[i..i + 8].copy_from_slice(&self.session_id.to_le_bytes());
                i += 8;
            } else if &frame[i..i + 8] == FILEID_MAGIC && i + 16 <= frame.len() {
                let k = u64::from_le_bytes(frame[i + 8..i + 16].try_into().unwrap());
                let id = usize::try_from(k).ok().and_then(|k| self.file_ids.get(k));
                if let Some(Some(id)) = id {
                    frame[i..i + 16].copy_from_slice(id);
                }
                i += 16;
            } else {
                i += 1;
            }
        }
    }

    fn complete_held(&mut self) {
        while let Some(req) = self.held.pop() {
            let done = req.run_blocking();
            self.conn.complete_io(self.now, req.id, done);
            self.pump();
        }
    }
}

/// The files the seed corpus was recorded against.
fn populate(mem: &MemShare) {
    let create = |path: &[&str], directory: bool| {
        let opts = OpenOptions {
            mode: OpenMode::CreateNew,
            read: true,
            write: true,
            directory,
            non_directory: !directory,
            create_mode: if directory { 0o755 } else { 0o644 },
            best_effort: false,
            no_follow: false,
        };
        let path = RelPath::from_components(path.iter().copied()).expect("a valid path");
        mem.open(&ringshare_vfs::server_who(), &path, &opts)
            .expect("create a seed file")
            .node
    };
    create(&["hello.txt"], false)
        .write_at(b"hello\n", 0)
        .expect("write hello.txt");
    create(&["sub"], true);
    create(&["sub", "a.txt"], false)
        .write_at(b"data\n", 0)
        .expect("write sub/a.txt");
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, frames)) = data.split_first() else {
        return;
    };
    let mem = MemShare::new().with_capacity_bytes(SHARE_BYTES_MAX);
    populate(&mem);
    let conn = Connection::new(
        ringshare_fuzz::guest_server(&mem),
        "fuzz".into(),
        Box::new(Counter(42)),
    );
    let mut h = Harness {
        conn,
        now: Now {
            mono_ms: 1_000,
            filetime: 133_500_000_000_000_000,
        },
        held: Vec::new(),
        hold_io: flags & 1 != 0,
        closed: false,
        outputs: 0,
        session_id: 0,
        file_ids: Vec::new(),
    };
    h.conn.accepted(h.now);
    h.pump();
    for frame in length_prefixed(frames) {
        if h.closed {
            break;
        }
        let mut frame = frame.to_vec();
        h.substitute(&mut frame);
        if flags & 4 != 0 && frame.len() >= 116 {
            let at = frame.len() - 4;
            let len = u32::from_le_bytes(frame[at..].try_into().unwrap()) as usize;
            frame.truncate(at);
            h.conn.receive_detached(h.now, frame, len);
        } else {
            h.conn.receive(h.now, frame);
        }
        h.pump();
        h.complete_held();
        if flags & 2 != 0 {
            h.now.mono_ms += 10_000;
            h.now.filetime += 100_000_000;
            h.conn.handle_timeout(h.now);
            h.pump();
        }
    }
    h.hold_io = false;
    h.complete_held();
    // Time passes: handshake and idle timers fire.
    h.now.mono_ms += 60 * 60_000;
    h.conn.handle_timeout(h.now);
    h.pump();
    h.conn.shutdown(h.now);
});
