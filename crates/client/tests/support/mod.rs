//! An in-process loop: a `ClientConn` talking to the real server core
//! (`ringshare_core::Connection` over an in-memory share). Frames go through
//! the same direct-TCP framing as on a socket; file I/O runs at once.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::Arc;

use ringshare_auth::UserLookup;
use ringshare_client::{ClientConn, ClientError, ClientOptions, Event, Gap, Reply, SmbError};
use ringshare_core::{
    Connection, Entropy, Now, Output, ServerConfig, ServerState, ShareDef, SigningPolicy,
};
use ringshare_vfs::memory::MemShare;
use ringshare_wire::consts::{CreateDisposition, Dialect};
use ringshare_wire::{framing, FileId};

pub const GENERIC_READ_WRITE: u32 = 0xC000_0000;
pub const NON_DIRECTORY: u32 = 0x40;

pub const ALL_DIALECTS: [Dialect; 5] = Dialect::ALL;

struct Users;

impl UserLookup for Users {
    fn nt_hash(&self, user: &str) -> Option<[u8; 16]> {
        user.eq_ignore_ascii_case("alice")
            .then(|| ringshare_auth::nt_hash("secret"))
    }
}

pub struct Counter(pub u64);

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

pub fn server(signing: SigningPolicy) -> Arc<ServerState> {
    server_compressing(signing, ringshare_core::DEFAULT_COMPRESSION.to_vec())
}

/// [`server`] negotiating these compression algorithms (none: compression off).
pub fn server_compressing(
    signing: SigningPolicy,
    compression: Vec<ringshare_wire::consts::CompressionAlgorithm>,
) -> Arc<ServerState> {
    state(server_config(signing, compression))
}

/// A server of this configuration (users: alice, password secret).
pub fn state(config: ServerConfig) -> Arc<ServerState> {
    ServerState::new(config, Arc::new(Users))
}

/// The configuration of [`server_compressing`]'s server.
pub fn server_config(
    signing: SigningPolicy,
    compression: Vec<ringshare_wire::consts::CompressionAlgorithm>,
) -> ServerConfig {
    let mem = MemShare::new();
    ServerConfig {
        dialect_min: 0x0202,
        dialect_max: 0x0311,
        signing,
        encrypt: ringshare_core::EncryptPolicy::IfRequired,
        server_guid: [7; 16],
        netbios_name: "RINGSHARE".into(),
        workgroup: "WORKGROUP".into(),
        dns_name: "ringshare.test".into(),
        map_bad_user_to_guest: false,
        guest_enabled: false,
        shares: vec![Arc::new(ShareDef {
            name: "share".into(),
            comment: String::new(),
            backend: Arc::new(mem),
            read_only: false,
            guest_ok: false,
            encrypt: ringshare_core::EncryptPolicy::IfRequired,
            rules: Default::default(),
            template: None,
            nt_acl_xattr: false,
            durable_handles: true,
            continuous_availability: false,
            root_key: Default::default(),
            change_notify: true,
            smb3_unix_extensions: false,
            compress_data: false,
            posix_locking: true,
            strict_locking: None,
            fs_offload: None,
            streams: true,
            fruit: None,
            shadow: None,
            quota: None,
        })],
        start_filetime: 133_000_000_000_000_000,
        handshake_timeout_ms: 30_000,
        durable_v1_timeout_ms: 960_000,
        idle_timeout_ms: 15 * 60_000,
        multi_channel: true,
        lock_sequence_checking: true,
        directory_leases: true,
        posix_extensions: false,
        io_sizes: Default::default(),
        guest_account: "nobody".into(),
        failed_logon_backoff: 0,
        smb_encryption_over_quic: false,
        compression,
        homes: None,
    }
}

pub fn options(dialect: Dialect) -> ClientOptions {
    ClientOptions {
        user: "alice".into(),
        password: "secret".into(),
        share_unc: "\\\\server\\share".into(),
        dialects: vec![dialect],
        ..ClientOptions::default()
    }
}

/// Rewrites one frame on its way from the server to the client.
pub type Tamper = Box<dyn FnMut(&mut Vec<u8>)>;

pub struct Pair {
    pub client: ClientConn,
    pub server: Connection,
    pub now: Now,
    pub events: Vec<Event>,
    pub server_closed: bool,
    /// Every frame payload the client sent.
    pub sent: Vec<Vec<u8>>,
    /// Every frame payload the client received whole (not by
    /// `receive_read_head`), as it came.
    pub received: Vec<Vec<u8>>,
    pub tamper: Option<Tamper>,
    /// The data of READ / QUERY_INFO / QUERY_DIRECTORY replies, by tag.
    pub payloads: HashMap<u64, Vec<u8>>,
    /// The data of WRITEs queued with `write_apart`, in order, spliced in
    /// where the client's gaps say.
    pub apart: Vec<Vec<u8>>,
    /// The gaps of every output the client handed over.
    pub gaps_seen: Vec<Gap>,
    /// Offer every frame's first bytes (this many at most) to
    /// `receive_read_head` first, as a client taking READ data in pieces
    /// does; `heads_taken` counts the frames it took.
    pub read_heads: Option<usize>,
    pub heads_taken: usize,
    /// Bytes the server asked its file system to read (every READ I/O).
    pub file_bytes_read: u64,
    buf: Vec<u8>,
    gaps: Vec<Gap>,
}

impl Pair {
    pub fn new(opts: ClientOptions, signing: SigningPolicy) -> Pair {
        Pair::on(server(signing), opts)
    }

    pub fn on(state: Arc<ServerState>, opts: ClientOptions) -> Pair {
        Pair {
            client: ClientConn::new(opts),
            server: Connection::new(state, "test".into(), Box::new(Counter(1))),
            now: Now {
                mono_ms: 1000,
                filetime: 133_500_000_000_000_000,
            },
            events: Vec::new(),
            server_closed: false,
            sent: Vec::new(),
            received: Vec::new(),
            tamper: None,
            payloads: HashMap::new(),
            apart: Vec::new(),
            gaps_seen: Vec::new(),
            read_heads: None,
            heads_taken: 0,
            file_bytes_read: 0,
            buf: Vec::new(),
            gaps: Vec::new(),
        }
    }

    /// A pair whose client is connected to the share.
    pub fn ready(opts: ClientOptions, signing: SigningPolicy) -> Pair {
        let mut p = Pair::new(opts, signing);
        p.pump().expect("handshake");
        assert!(p.client.is_ready(), "client not ready: {:?}", p.events);
        assert!(p.take_events().contains(&Event::Ready));
        p
    }

    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// The single result of the request with `tag` among the events so far.
    pub fn result(&mut self, tag: u64) -> Result<Reply, SmbError> {
        let events = self.take_events();
        let mut found = events.into_iter().filter_map(|e| match e {
            Event::Done { tag: t, result, .. } if t == tag => Some(result),
            _ => None,
        });
        let r = found.next().expect("a reply for the tag");
        assert!(found.next().is_none(), "one reply per request");
        r
    }

    /// Open (or create) `name` for reading and writing, as request tag 1.
    pub fn open(&mut self, name: &str) -> FileId {
        self.client
            .create(
                1,
                name,
                GENERIC_READ_WRITE,
                CreateDisposition::OPEN_IF,
                NON_DIRECTORY,
            )
            .unwrap();
        self.pump().unwrap();
        match self.result(1) {
            Ok(Reply::Create { file_id, .. }) => file_id,
            other => panic!("create {name}: {other:?}"),
        }
    }

    /// WRITE `data` with its bytes sent apart from the request (spliced in
    /// by `pump`).
    pub fn write_apart(
        &mut self,
        tag: u64,
        file: ringshare_wire::FileId,
        offset: u64,
        data: &[u8],
    ) -> Result<u64, ClientError> {
        let mid = self.client.write_apart(tag, file, offset, data.len())?;
        self.apart.push(data.to_vec());
        Ok(mid)
    }

    /// The client's output with the data sent apart spliced in, as a socket
    /// would carry it.
    fn stream(&mut self) -> Vec<u8> {
        self.client
            .take_output_with_gaps(&mut self.buf, &mut self.gaps);
        assert_eq!(self.gaps.len(), self.apart.len(), "one gap per WRITE apart");
        let mut stream = Vec::new();
        let mut from = 0;
        for (g, data) in self.gaps.iter().zip(self.apart.drain(..)) {
            assert_eq!(g.len, data.len(), "gap length");
            stream.extend_from_slice(&self.buf[from..g.at]);
            stream.extend_from_slice(&data);
            from = g.at;
        }
        stream.extend_from_slice(&self.buf[from..]);
        self.gaps_seen.extend_from_slice(&self.gaps);
        stream
    }

    /// Move frames both ways until neither side has anything to say.
    pub fn pump(&mut self) -> Result<(), ClientError> {
        loop {
            let mut progressed = false;
            // What other connections sent this one (a lease break), as the driver hands it.
            if self.server.has_mail() {
                self.server.handle_mail(self.now);
            }
            if self.client.has_output() {
                progressed = true;
                let stream = self.stream();
                let mut rest = &stream[..];
                while rest.len() >= 4 {
                    let len = framing::frame_len([rest[0], rest[1], rest[2], rest[3]])
                        .expect("client framing");
                    let frame = rest[4..4 + len].to_vec();
                    rest = &rest[4 + len..];
                    self.sent.push(frame.clone());
                    self.server.receive(self.now, frame);
                }
                assert!(rest.is_empty(), "client framing left bytes");
            }
            while let Some(o) = self.server.poll_output() {
                progressed = true;
                let o = match o {
                    Output::SendFile(sf) => Output::Send(ringshare_core::Frame::One(sf.to_bytes())),
                    o => o,
                };
                match o {
                    Output::SendFile(_) => unreachable!("turned into Send above"),
                    Output::Send(parts) => {
                        let bytes = parts.concat();
                        let len = framing::frame_len([bytes[0], bytes[1], bytes[2], bytes[3]])
                            .expect("server framing");
                        assert_eq!(len + 4, bytes.len());
                        let mut frame = bytes[4..].to_vec();
                        if let Some(t) = self.tamper.as_mut() {
                            t(&mut frame);
                        }
                        let first = self.events.len();
                        if let Some(n) = self.read_heads {
                            let head = &frame[..frame.len().min(n)];
                            if let Some(data) =
                                self.client
                                    .receive_read_head(head, frame.len(), &mut self.events)
                            {
                                let Some(Event::Done { tag, .. }) = self.events.last() else {
                                    panic!("a READ head taken without its event");
                                };
                                self.payloads.insert(*tag, frame[data].to_vec());
                                self.heads_taken += 1;
                                continue;
                            }
                            assert_eq!(self.events.len(), first, "a refused head adds no event");
                        }
                        self.received.push(frame.clone());
                        self.client.receive(&mut frame, &mut self.events)?;
                        // A compressed frame's events index what it held.
                        let inflated = self.client.take_inflated();
                        let frame = inflated.as_deref().unwrap_or(&frame);
                        for e in &self.events[first..] {
                            if let Event::Done {
                                tag,
                                result:
                                    Ok(
                                        Reply::Read { data: r }
                                        | Reply::QueryInfo { buffer: r }
                                        | Reply::QueryDirectory { buffer: r },
                                    ),
                                ..
                            } = e
                            {
                                self.payloads.insert(*tag, frame[r.clone()].to_vec());
                            }
                        }
                    }
                    Output::Io(req) => {
                        if let ringshare_core::IoOp::Read { len, .. } = req.op {
                            self.file_bytes_read += len as u64;
                        }
                        let done = req.run_blocking();
                        self.server.complete_io(self.now, req.id, done);
                    }
                    Output::Lookup(req) => {
                        let done = req.run();
                        self.server.complete_lookup(self.now, req.id, done);
                    }
                    Output::Close => self.server_closed = true,
                }
            }
            if !progressed {
                return Ok(());
            }
        }
    }
}

/// Bytes that do not compress (xorshift).
pub fn random(len: usize) -> Vec<u8> {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
