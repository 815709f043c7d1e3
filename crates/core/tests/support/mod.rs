//! A sans-I/O test harness: a `ServerState` over an in-memory share, a
//! `Connection` with deterministic entropy and clock, and a tiny client that
//! negotiates, authenticates (NTLM in SPNEGO as alice/secret), tree-connects
//! and sends requests built with the wire crate (or small local builders for
//! the commands whose wire modules are still stubs). File I/O the connection
//! asks for is run at once with `IoRequest::run_blocking`.
#![allow(dead_code)]

use std::sync::Arc;

use ringshare_auth::gss::ClientAuth;
use ringshare_auth::UserLookup;
use ringshare_core::{
    Account, AccountError, Accounts, Connection, EncryptPolicy, Entropy, IoDone, IoOp, IoRequest,
    Now, Output, ServerConfig, ServerState, ShareDef, SigningPolicy,
};
use ringshare_crypto::preauth::PreauthHash;
use ringshare_crypto::sign::{NonceInfo, SigningAlgorithm, SigningKey};
use ringshare_vfs::memory::MemShare;
use ringshare_vfs::Share;
use ringshare_wire::codec::Reader;
use ringshare_wire::consts::{
    AccessMask, Capabilities, Command, CreateDisposition, CreateOptions, Dialect, FileAttributes,
    HashAlgorithm, HeaderFlags, ImpersonationLevel, OplockLevel, SecurityMode, SessionSetupFlags,
    ShareAccess, TreeConnectFlags,
};
use ringshare_wire::create::{CloseRequest, CreateContext, CreateRequest, CreateResponse};
use ringshare_wire::header::{self, Header, HeaderId};
use ringshare_wire::negotiate::{NegotiateContext, NegotiateRequest};
use ringshare_wire::session::{SessionSetupRequest, SessionSetupResponse};
use ringshare_wire::tree::TreeConnectRequest;
use ringshare_wire::utf16::encode_utf16le;
use ringshare_wire::{FileId, NtStatus, WriteExt};

pub const GENERIC_READ: u32 = 0x8000_0000;
pub const GENERIC_WRITE: u32 = 0x4000_0000;
pub const GENERIC_ALL: u32 = 0x1000_0000;
pub const DELETE: u32 = 0x0001_0000;
pub const FILE_READ_ATTRIBUTES: u32 = 0x80;
pub const SHARE_ALL: u32 = 7;

struct Users;

impl UserLookup for Users {
    fn nt_hash(&self, user: &str) -> Option<[u8; 16]> {
        match user.to_ascii_lowercase().as_str() {
            "alice" => Some(ringshare_auth::nt_hash("secret")),
            "carol" => Some(ringshare_auth::nt_hash("carols")),
            _ => None,
        }
    }

    fn uid(&self, user: &str) -> Option<u32> {
        match user.to_ascii_lowercase().as_str() {
            "alice" => Some(ALICE_UID),
            "carol" => Some(CAROL_UID),
            _ => None,
        }
    }
}

/// alice's Unix uid in the test user database.
pub const ALICE_UID: u32 = 1000;
/// carol's (password `carols`): a second user.
pub const CAROL_UID: u32 = 1002;

/// The Unix accounts of the test: alice is uid 1000, the guest account
/// `nobody` 65534 (the in-memory share records owners but checks nothing).
pub struct TestAccounts;

impl Accounts for TestAccounts {
    fn user(&self, name: &str) -> Result<Account, AccountError> {
        let uid = match name {
            n if n.eq_ignore_ascii_case("alice") => ALICE_UID,
            n if n.eq_ignore_ascii_case("carol") => CAROL_UID,
            "nobody" => 65534,
            _ => return Err(AccountError::NoSuchUser),
        };
        Ok(Account {
            name: name.to_ascii_lowercase(),
            who: ringshare_vfs::creds::intern(ringshare_vfs::Creds::new(uid, uid, vec![uid])),
            home: String::new(),
            sids: Default::default(),
        })
    }

    fn group(&self, _name: &str) -> Option<u32> {
        None
    }

    fn group_name(&self, _gid: u32) -> Option<String> {
        None
    }
}

/// An FSCTL_SRV_COPYCHUNK(_WRITE) input: from the open whose resume key is `key`, the chunks
/// (source offset, target offset, length).
pub fn copychunk_input(key: [u8; 24], chunks: &[(u64, u64, u32)]) -> Vec<u8> {
    use ringshare_wire::ioctl::{SrvCopychunk, SrvCopychunkCopy};
    let mut b = Vec::new();
    SrvCopychunkCopy {
        source_key: key,
        chunks: chunks
            .iter()
            .map(|&(s, t, l)| SrvCopychunk {
                source_offset: s,
                target_offset: t,
                length: l,
            })
            .collect(),
    }
    .encode(&mut b);
    b
}

/// `len` bytes whose value tells their offset (from `from`): a copy put in
/// the wrong place reads back different.
pub fn pattern(len: usize, from: usize) -> Vec<u8> {
    (from..from + len).map(|i| (i % 251) as u8).collect()
}

/// The test server over `config`.
pub fn server_for(config: ServerConfig) -> Arc<ServerState> {
    ServerState::with_accounts(config, Arc::new(Users), Arc::new(TestAccounts))
}

/// A counter-driven byte source: deterministic, never repeating within a test.
struct CountingEntropy(u64);

impl Entropy for CountingEntropy {
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

/// One decoded response message (header + body, data appended for READ).
#[derive(Debug, Clone)]
pub struct Resp {
    pub hdr: Header,
    pub msg: Vec<u8>,
}

impl Resp {
    pub fn status(&self) -> NtStatus {
        self.hdr.status
    }
    pub fn body(&self) -> &[u8] {
        &self.msg[64..]
    }
}

pub struct Options {
    pub dialect: Dialect,
    pub signing: SigningPolicy,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            dialect: Dialect::SMB3_1_1,
            signing: SigningPolicy::IfRequired,
        }
    }
}

pub struct Client {
    pub conn: Connection,
    pub mem: MemShare,
    pub now: Now,
    pub next_mid: u64,
    pub session_id: u64,
    pub tree_id: u32,
    pub ro_tree_id: u32,
    pub signing: Option<SigningKey>,
    pub closed: bool,
    /// Lookups ([`ringshare_core::lookup`]) are kept here instead of answered at once while set
    /// (the driver answers them later, from another thread).
    pub hold_lookups: bool,
    pub held_lookups: Vec<ringshare_core::LookupRequest>,
    /// File I/O ([`Output::Io`]) is kept here instead of run at once while set (the ring
    /// completes it later).
    pub hold_io: bool,
    pub held_io: Vec<IoRequest>,
    /// The payload of a WRITE received apart ([`Connection::receive_detached`]) that the
    /// driver holds: an [`IoOp::WriteReceived`] writes it (once), as the driver splices it.
    pub received_apart: Option<Vec<u8>>,
    pub dialect: Dialect,
    /// The ClientGuid NEGOTIATE sent.
    pub client_guid: [u8; 16],
    /// 3.1.1: the connection's preauth hash after NEGOTIATE.
    pub preauth: Option<PreauthHash>,
    pub server: Arc<ServerState>,
    /// The capabilities NEGOTIATE offers (none unless a test sets them).
    pub offer: Capabilities,
}

pub fn server(mem: &MemShare, signing: SigningPolicy) -> Arc<ServerState> {
    server_on(Arc::new(mem.clone()), signing)
}

/// The test server with its configuration changed by `change`.
pub fn server_with(mem: &MemShare, change: impl FnOnce(&mut ServerConfig)) -> Arc<ServerState> {
    let mut config = config_on(Arc::new(mem.clone()), SigningPolicy::IfRequired);
    change(&mut config);
    server_for(config)
}

/// The test server where unknown users log on as guest.
pub fn guest_server(mem: &MemShare) -> Arc<ServerState> {
    server_with(mem, |c| {
        c.map_bad_user_to_guest = true;
        c.guest_enabled = true;
    })
}

/// The test server with every share on `backend`.
pub fn server_on(backend: Arc<dyn Share>, signing: SigningPolicy) -> Arc<ServerState> {
    server_from(config_on(backend, signing))
}

/// A server with `config` and the test users.
pub fn server_from(config: ServerConfig) -> Arc<ServerState> {
    server_for(config)
}

/// The test server's configuration with every share on `backend`.
pub fn config_on(backend: Arc<dyn Share>, signing: SigningPolicy) -> ServerConfig {
    let share = |name: &str, read_only: bool, encrypt: EncryptPolicy| {
        Arc::new(ShareDef {
            name: name.to_string(),
            comment: String::new(),
            backend: backend.clone(),
            read_only,
            guest_ok: false,
            rules: Default::default(),
            template: None,
            // Descriptors set in tests are kept (the in-memory share
            // enforces no POSIX permissions).
            nt_acl_xattr: true,
            durable_handles: true,
            continuous_availability: false,
            root_key: Default::default(),
            change_notify: true,
            smb3_unix_extensions: true,
            compress_data: false,
            posix_locking: true,
            strict_locking: None,
            fs_offload: None,
            streams: true,
            fruit: None,
            shadow: None,
            quota: None,
            encrypt,
        })
    };
    ServerConfig {
        dialect_min: 0x0202,
        dialect_max: 0x0311,
        signing,
        encrypt: EncryptPolicy::IfRequired,
        server_guid: [7; 16],
        netbios_name: "RINGSHARE".into(),
        workgroup: "WORKGROUP".into(),
        dns_name: "ringshare.test".into(),
        map_bad_user_to_guest: false,
        guest_enabled: false,
        shares: vec![
            share("share", false, EncryptPolicy::IfRequired),
            share("ro", true, EncryptPolicy::IfRequired),
            share("sealed", false, EncryptPolicy::Required),
        ],
        start_filetime: 133_000_000_000_000_000,
        handshake_timeout_ms: 30_000,
        durable_v1_timeout_ms: 960_000,
        idle_timeout_ms: 15 * 60_000,
        multi_channel: true,
        lock_sequence_checking: true,
        directory_leases: true,
        posix_extensions: true,
        io_sizes: Default::default(),
        guest_account: "nobody".into(),
        failed_logon_backoff: 0,
        smb_encryption_over_quic: false,
        compression: ringshare_core::DEFAULT_COMPRESSION.to_vec(),
        homes: None,
    }
}

impl Client {
    /// The node at share path `path` (its components), opened as the server: what is on the
    /// share, whatever the client may see.
    pub fn server_node(&self, path: &[&str]) -> std::sync::Arc<dyn ringshare_vfs::Node> {
        self.mem
            .open(
                &ringshare_vfs::server_who(),
                &ringshare_vfs::RelPath::from_components(path.iter().copied()).unwrap(),
                &ringshare_vfs::OpenOptions::read_existing(),
            )
            .unwrap()
            .node
    }

    /// Whether share path `path` (its components) exists, as the server sees it.
    pub fn server_sees(&self, path: &[&str]) -> bool {
        let path = ringshare_vfs::RelPath::from_components(path.iter().copied()).unwrap();
        self.mem.stat(&ringshare_vfs::server_who(), &path).is_ok()
    }

    /// A logged-on client with trees on `share` (writable) and `ro` (read-only).
    pub fn new() -> Client {
        Client::with(Options::default())
    }

    pub fn with(opts: Options) -> Client {
        let mem = MemShare::new();
        let server = server(&mem, opts.signing);
        Client::on(server, mem, opts)
    }

    /// A second client of the same server.
    pub fn on(server: Arc<ServerState>, mem: MemShare, opts: Options) -> Client {
        let mut c = Client::negotiated(server, mem, opts.dialect, [9; 16]);
        c.session_setup();
        c.tree_id = c.tree_connect("share");
        c.ro_tree_id = c.tree_connect("ro");
        c
    }

    /// A connection of the same server that has only negotiated `dialect`
    /// with ClientGuid `client_guid`.
    pub fn negotiated(
        server: Arc<ServerState>,
        mem: MemShare,
        dialect: Dialect,
        client_guid: [u8; 16],
    ) -> Client {
        let mut c = Client::fresh(server, mem, dialect, client_guid);
        c.negotiate(dialect);
        c
    }

    /// A connection of the same server that has not negotiated yet.
    pub fn fresh(
        server: Arc<ServerState>,
        mem: MemShare,
        dialect: Dialect,
        client_guid: [u8; 16],
    ) -> Client {
        let conn = Connection::new(server.clone(), "test".into(), Box::new(CountingEntropy(42)));
        Client {
            conn,
            mem,
            now: Now {
                mono_ms: 1_000,
                filetime: 133_500_000_000_000_000,
            },
            next_mid: 0,
            session_id: 0,
            tree_id: 0,
            ro_tree_id: 0,
            signing: None,
            closed: false,
            hold_lookups: false,
            held_lookups: Vec::new(),
            hold_io: false,
            held_io: Vec::new(),
            received_apart: None,
            dialect,
            client_guid,
            preauth: None,
            server,
            offer: Capabilities::empty(),
        }
    }

    /// A logged-on 3.1.1 client of the same server that offers directory
    /// leasing (SMB2_GLOBAL_CAP_DIRECTORY_LEASING).
    pub fn leasing_dirs(server: Arc<ServerState>, mem: MemShare, client_guid: [u8; 16]) -> Client {
        let mut c = Client::fresh(server, mem, Dialect::SMB3_1_1, client_guid);
        c.offer = Capabilities::DIRECTORY_LEASING;
        c.negotiate(Dialect::SMB3_1_1);
        c.session_setup();
        c.tree_id = c.tree_connect("share");
        c.ro_tree_id = c.tree_connect("ro");
        c
    }

    fn negotiate(&mut self, dialect: Dialect) {
        self.negotiate_adding(dialect, Vec::new());
    }

    /// NEGOTIATE of `dialect` with the contexts `extra` too; the response.
    pub fn negotiate_adding(&mut self, dialect: Dialect, extra: Vec<NegotiateContext>) -> Resp {
        let (m, r) = self.negotiate_offering_with(vec![dialect], extra);
        assert_eq!(r.status(), NtStatus::SUCCESS, "negotiate");
        if dialect == Dialect::SMB3_1_1 {
            let mut p = PreauthHash::zero();
            p.update(&m);
            p.update(&r.msg);
            self.preauth = Some(p);
        }
        r
    }

    /// Sends a NEGOTIATE offering `dialects` (with a preauth context when
    /// 3.1.1 is among them): the request sent and the response.
    pub fn negotiate_offering(&mut self, dialects: Vec<Dialect>) -> (Vec<u8>, Resp) {
        self.negotiate_offering_with(dialects, Vec::new())
    }

    /// [`Client::negotiate_offering`] with the contexts `extra` after the preauth one.
    pub fn negotiate_offering_with(
        &mut self,
        dialects: Vec<Dialect>,
        extra: Vec<NegotiateContext>,
    ) -> (Vec<u8>, Resp) {
        let mut contexts = if dialects.contains(&Dialect::SMB3_1_1) {
            vec![NegotiateContext::PreauthIntegrity {
                hash_algorithms: vec![HashAlgorithm::SHA_512],
                salt: vec![1; 32],
            }]
        } else {
            Vec::new()
        };
        contexts.extend(extra);
        let req = NegotiateRequest {
            security_mode: SecurityMode::SIGNING_ENABLED,
            capabilities: self.offer,
            client_guid: self.client_guid,
            client_start_time: 0,
            dialects,
            contexts,
        };
        let m = self.message(Command::NEGOTIATE, 0, |o| req.encode(o));
        let mut rs = self.send_frame(m.clone());
        assert!(!rs.is_empty(), "no response to NEGOTIATE");
        (m, rs.remove(0))
    }

    pub fn session_setup(&mut self) {
        self.session_setup_after(0);
    }

    /// A new session for alice naming `previous` as PreviousSessionId.
    pub fn session_setup_after(&mut self, previous: u64) {
        let status = self.log_on("alice", "secret", previous);
        assert_eq!(status, NtStatus::SUCCESS, "session setup failed");
    }

    /// SESSION_SETUP as `user` with `password` (on this client's session when
    /// it has one: a re-authentication) to the end; the last status.
    pub fn log_on(&mut self, user: &str, password: &str, previous: u64) -> NtStatus {
        let mut others = Vec::new();
        self.log_on_seeing(user, password, previous, &mut others)
    }

    /// [`Client::log_on`], collecting in `others` the responses to other
    /// requests that came with the SESSION_SETUP replies.
    pub fn log_on_seeing(
        &mut self,
        user: &str,
        password: &str,
        previous: u64,
        others: &mut Vec<Resp>,
    ) -> NtStatus {
        let mut auth = ClientAuth::new(user, "", password);
        let mut server_token: Option<Vec<u8>> = None;
        loop {
            let token = auth
                .step(server_token.as_deref(), [5; 24], self.now.filetime)
                .expect("client auth step");
            let Some(token) = token else {
                return NtStatus::SUCCESS;
            };
            let mut rs = self.session_setup_leg(&token, previous);
            let at = rs
                .iter()
                .position(|r| r.hdr.command == Command::SESSION_SETUP)
                .expect("a SESSION_SETUP response");
            let r = rs.remove(at);
            others.extend(rs);
            if r.status() != NtStatus::SUCCESS && r.status() != NtStatus::MORE_PROCESSING_REQUIRED {
                return r.status();
            }
            self.session_id = r.hdr.session_id;
            let resp = SessionSetupResponse::decode(&r.msg).expect("session setup response");
            server_token = Some(resp.security_buffer.to_vec());
            if r.status() == NtStatus::SUCCESS {
                let _ = auth.step(server_token.as_deref(), [5; 24], self.now.filetime);
                if self.dialect == Dialect::SMB2_0_2 || self.dialect == Dialect::SMB2_1 {
                    if let Some(k) = auth.session_key() {
                        self.signing = Some(SigningKey::new(SigningAlgorithm::HmacSha256, k));
                    }
                }
                return NtStatus::SUCCESS;
            }
        }
    }

    /// One SESSION_SETUP request carrying `token` (naming `previous` as PreviousSessionId):
    /// every response it produced.
    pub fn session_setup_leg(&mut self, token: &[u8], previous: u64) -> Vec<Resp> {
        let req = SessionSetupRequest {
            flags: SessionSetupFlags::empty(),
            security_mode: SecurityMode::SIGNING_ENABLED,
            capabilities: Capabilities::empty(),
            channel: 0,
            previous_session_id: previous,
            security_buffer: token,
        };
        self.call_all(Command::SESSION_SETUP, 0, |o| req.encode(o))
    }

    pub fn tree_connect(&mut self, share: &str) -> u32 {
        let req = TreeConnectRequest {
            flags: TreeConnectFlags::empty(),
            path: format!("\\\\server\\{share}"),
            extension: None,
        };
        let r = self.call(Command::TREE_CONNECT, 0, |o| req.encode(o));
        assert_eq!(r.status(), NtStatus::SUCCESS, "tree connect {share}");
        r.hdr.tree_id().unwrap_or(0)
    }

    /// The server this client talks to.
    pub fn conn_server(&self) -> Arc<ServerState> {
        self.server.clone()
    }

    /// Build one request message (header + body) on `tree`.
    pub fn message(&mut self, cmd: Command, tree: u32, body: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut h = Header::request(cmd, self.next_mid);
        self.next_mid += 1;
        h.credits = 256;
        h.credit_charge = 1;
        h.session_id = self.session_id;
        h.id = HeaderId::Sync {
            process_id: 0xFEFF,
            tree_id: tree,
        };
        let mut out = Vec::new();
        h.encode(&mut out);
        body(&mut out);
        out
    }

    /// Sign a message in place with the client's key, if it has one.
    pub fn sign(&self, msg: &mut [u8]) {
        if let Some(k) = &self.signing {
            let mut flags = u32::from_le_bytes([msg[16], msg[17], msg[18], msg[19]]);
            flags |= HeaderFlags::SIGNED.0;
            msg[16..20].copy_from_slice(&flags.to_le_bytes());
            msg[48..64].fill(0);
            let mid = u64::from_le_bytes(msg[24..32].try_into().unwrap());
            let sig = k.sign(
                &[msg],
                NonceInfo {
                    message_id: mid,
                    server_to_client: false,
                    cancel: false,
                },
            );
            header::patch_signature(msg, 0, &sig);
        }
    }

    /// Send one request and return every response produced (usually one).
    pub fn call(&mut self, cmd: Command, tree: u32, body: impl FnOnce(&mut Vec<u8>)) -> Resp {
        let mut m = self.message(cmd, tree, body);
        self.sign(&mut m);
        let mut rs = self.send_frame(m);
        assert!(!rs.is_empty(), "no response to {cmd:?}");
        rs.remove(0)
    }

    /// Send one request and return every response it brought (in order).
    pub fn call_all(
        &mut self,
        cmd: Command,
        tree: u32,
        body: impl FnOnce(&mut Vec<u8>),
    ) -> Vec<Resp> {
        let mut m = self.message(cmd, tree, body);
        self.sign(&mut m);
        self.send_frame(m)
    }

    /// Send several messages as one compound frame (each after the first related
    /// when `related`), padded to 8 bytes and signed each.
    pub fn compound(&mut self, mut msgs: Vec<Vec<u8>>, related: bool) -> Vec<Resp> {
        let n = msgs.len();
        let mut frame = Vec::new();
        for (i, m) in msgs.iter_mut().enumerate() {
            if related && i > 0 {
                let mut flags = u32::from_le_bytes([m[16], m[17], m[18], m[19]]);
                flags |= HeaderFlags::RELATED_OPERATIONS.0;
                m[16..20].copy_from_slice(&flags.to_le_bytes());
            }
            if i + 1 < n {
                let padded = m.len().next_multiple_of(8);
                m.resize(padded, 0);
                header::patch_next_command(m, 0, padded as u32);
            }
            self.sign(m);
            frame.extend_from_slice(m);
        }
        self.send_frame(frame)
    }

    /// Feed a frame and run the connection until it has nothing more to do.
    pub fn send_frame(&mut self, frame: Vec<u8>) -> Vec<Resp> {
        // As the driver does: a frame is cut into a buffer the connection had spare.
        let mut buf = self.conn.spare_buf(frame.len());
        buf.extend_from_slice(&frame);
        conn_receive(&mut self.conn, self.now, buf);
        self.pump()
    }

    /// Run I/O and collect sent responses.
    pub fn pump(&mut self) -> Vec<Resp> {
        let mut out = Vec::new();
        if self.conn.has_mail() {
            self.conn.handle_mail(self.now);
        }
        while let Some(o) = conn_poll_output(&mut self.conn) {
            let o = match o {
                Output::SendFile(sf) => Output::Send(ringshare_core::Frame::One(sf.to_bytes())),
                o => o,
            };
            match o {
                Output::SendFile(_) => unreachable!("turned into Send above"),
                Output::Send(frame) => {
                    // As the driver does, each sent buffer goes back to the connection.
                    let bufs = match frame {
                        ringshare_core::Frame::One(b) => vec![b],
                        ringshare_core::Frame::Parts(p) => p,
                    };
                    let bytes = if bufs.len() == 1 {
                        std::borrow::Cow::Borrowed(&bufs[0][..])
                    } else {
                        std::borrow::Cow::Owned(bufs.concat())
                    };
                    for m in header::split_compound(&bytes[4..]) {
                        let m = m.expect("well-formed response compound");
                        let hdr = Header::decode(m).expect("response header");
                        let len = if hdr.next_command == 0 {
                            m.len()
                        } else {
                            hdr.next_command as usize
                        };
                        out.push(Resp {
                            hdr,
                            msg: m[..len.min(m.len())].to_vec(),
                        });
                    }
                    drop(bytes);
                    for b in bufs {
                        if b.capacity() < 64 * 1024 {
                            self.conn.recycle(b);
                        }
                    }
                }
                Output::Io(req) if self.hold_io => self.held_io.push(req),
                Output::Io(req) => self.run_io(req),
                Output::Lookup(req) if self.hold_lookups => self.held_lookups.push(*req),
                Output::Lookup(req) => {
                    let done = off_io_thread(|| req.run());
                    self.conn.complete_lookup(self.now, req.id, done);
                }
                Output::Close => self.closed = true,
            }
        }
        out
    }

    /// Run the I/O held ([`Client::hold_io`]) and what follows from it; the responses sent.
    pub fn run_held_io(&mut self) -> Vec<Resp> {
        for req in std::mem::take(&mut self.held_io) {
            self.run_io(req);
        }
        self.pump()
    }

    fn run_io(&mut self, req: IoRequest) {
        if let IoOp::WriteReceived { offset, len } = req.op {
            let data = self.received_apart.take().expect("a payload held");
            assert_eq!(data.len(), len, "the payload received apart");
            let done = IoDone::Write(off_io_thread(|| req.node.write_at(&data, offset)));
            conn_complete_io(&mut self.conn, self.now, req.id, done);
            return;
        }
        // The ring's I/O: on a share that may wait on a network an io_uring worker's.
        let done = off_io_thread(|| req.run_blocking());
        conn_complete_io(&mut self.conn, self.now, req.id, done);
    }

    /// Advance the clock and fire timers.
    pub fn tick(&mut self, ms: u64) -> Vec<Resp> {
        self.now.mono_ms += ms;
        self.conn.handle_timeout(self.now);
        self.pump()
    }

    // ---- CREATE / CLOSE through the wire crate ----

    pub fn create_msg(
        &mut self,
        tree: u32,
        name: &str,
        access: u32,
        share: u32,
        disposition: CreateDisposition,
        options: u32,
    ) -> Vec<u8> {
        self.create_msg_ctx(
            tree,
            name,
            access,
            share,
            disposition,
            options,
            0,
            Vec::new(),
        )
    }

    #[allow(clippy::too_many_arguments)]
    pub fn create_msg_ctx(
        &mut self,
        tree: u32,
        name: &str,
        access: u32,
        share: u32,
        disposition: CreateDisposition,
        options: u32,
        attributes: u32,
        contexts: Vec<CreateContext<'static>>,
    ) -> Vec<u8> {
        let req = CreateRequest {
            security_flags: 0,
            requested_oplock_level: OplockLevel::NONE,
            impersonation_level: ImpersonationLevel::IMPERSONATION,
            smb_create_flags: 0,
            desired_access: AccessMask(access),
            file_attributes: FileAttributes(attributes),
            share_access: ShareAccess(share),
            create_disposition: disposition,
            create_options: CreateOptions(options),
            name: name.to_string(),
            contexts,
        };
        self.message(Command::CREATE, tree, |o| req.encode(o))
    }

    pub fn create_on(
        &mut self,
        tree: u32,
        name: &str,
        access: u32,
        share: u32,
        disposition: CreateDisposition,
        options: u32,
    ) -> Result<FileId, NtStatus> {
        let mut m = self.create_msg(tree, name, access, share, disposition, options);
        self.sign(&mut m);
        let r = self.send_frame(m).remove(0);
        if r.status() != NtStatus::SUCCESS {
            return Err(r.status());
        }
        Ok(CreateResponse::decode(&r.msg)
            .expect("create response")
            .file_id)
    }

    pub fn create(
        &mut self,
        name: &str,
        access: u32,
        disposition: CreateDisposition,
        options: u32,
    ) -> Result<FileId, NtStatus> {
        let tree = self.tree_id;
        self.create_on(tree, name, access, SHARE_ALL, disposition, options)
    }

    /// Create (or open) a file with data in it, and close it.
    pub fn put_file(&mut self, name: &str, data: &[u8]) {
        let f = self
            .create(
                name,
                GENERIC_READ | GENERIC_WRITE,
                CreateDisposition::OVERWRITE_IF,
                0x40,
            )
            .expect("create for put_file");
        if !data.is_empty() {
            let r = self.write(f, 0, data);
            assert_eq!(r.status(), NtStatus::SUCCESS);
        }
        assert_eq!(self.close(f).status(), NtStatus::SUCCESS);
    }

    pub fn close_msg(&mut self, f: FileId, flags: u16) -> Vec<u8> {
        let req = CloseRequest {
            flags: ringshare_wire::consts::CloseFlags(flags),
            file_id: f,
        };
        let tree = self.tree_id;
        self.message(Command::CLOSE, tree, |o| req.encode(o))
    }

    /// A CHANGE_NOTIFY request (unsigned), charged for `len`.
    pub fn change_notify_msg(&mut self, f: FileId, filter: u32, tree: bool, len: u32) -> Vec<u8> {
        let t = self.tree_id;
        let mut m = self.message(Command::CHANGE_NOTIFY, t, |o| {
            ringshare_wire::misc::ChangeNotifyRequest {
                flags: ringshare_wire::consts::ChangeNotifyFlags(u16::from(tree)),
                output_buffer_length: len,
                file_id: f,
                completion_filter: ringshare_wire::consts::CompletionFilter(filter),
            }
            .encode(o)
        });
        self.charge(&mut m, len as usize);
        m
    }

    /// CANCEL the request `interim` is the interim response of; what came back.
    pub fn cancel_async(&mut self, interim: &Resp) -> Vec<Resp> {
        let mut h = Header::request(Command::CANCEL, interim.hdr.message_id);
        h.flags = HeaderFlags::ASYNC_COMMAND;
        h.id = HeaderId::Async {
            async_id: interim.hdr.async_id().expect("interim carries an async id"),
        };
        h.session_id = self.session_id;
        let mut m = Vec::new();
        h.encode(&mut m);
        ringshare_wire::misc::CancelRequest.encode(&mut m);
        self.sign(&mut m);
        self.send_frame(m)
    }

    pub fn close(&mut self, f: FileId) -> Resp {
        let tree = self.tree_id;
        self.call(Command::CLOSE, tree, |o| {
            CloseRequest {
                flags: ringshare_wire::consts::CloseFlags(0),
                file_id: f,
            }
            .encode(o)
        })
    }

    // ---- commands with local request builders ----

    /// A READ request charged one credit per 64 KiB ([MS-SMB2] 3.1.5.2), so
    /// it may ask for more than 64 KiB.
    pub fn read_msg(&mut self, f: FileId, offset: u64, len: u32) -> Vec<u8> {
        let tree = self.tree_id;
        let mut msg = self.message(Command::READ, tree, |o| read_body(o, f, offset, len, 0));
        self.charge(&mut msg, len as usize);
        msg
    }

    /// Sets `msg`'s CreditCharge for a payload of `len` bytes (one credit,
    /// and one message id, per 64 KiB) and skips the extra message ids.
    pub fn charge(&mut self, msg: &mut [u8], len: usize) {
        let old = u16::from_le_bytes([msg[6], msg[7]]).max(1);
        let charge = len.div_ceil(65_536).max(1) as u16;
        msg[6..8].copy_from_slice(&charge.to_le_bytes());
        self.next_mid = self.next_mid + u64::from(charge) - u64::from(old);
    }

    pub fn read(&mut self, f: FileId, offset: u64, len: u32) -> Resp {
        let mut m = self.read_msg(f, offset, len);
        self.sign(&mut m);
        let mut rs = self.send_frame(m);
        assert!(!rs.is_empty(), "no response to READ");
        rs.remove(0)
    }

    /// A WRITE charged one credit per 64 KiB, so it may carry more.
    pub fn write(&mut self, f: FileId, offset: u64, data: &[u8]) -> Resp {
        let tree = self.tree_id;
        let mut m = self.message(Command::WRITE, tree, |o| write_body(o, f, offset, data));
        self.charge(&mut m, data.len());
        self.sign(&mut m);
        let mut rs = self.send_frame(m);
        assert!(!rs.is_empty(), "no response to WRITE");
        rs.remove(0)
    }

    pub fn flush(&mut self, f: FileId) -> Resp {
        let mut m = self.flush_msg(f);
        self.sign(&mut m);
        let mut rs = self.send_frame(m);
        assert!(!rs.is_empty(), "no response to FLUSH");
        rs.remove(0)
    }

    pub fn flush_msg(&mut self, f: FileId) -> Vec<u8> {
        let tree = self.tree_id;
        self.message(Command::FLUSH, tree, |o| {
            o.put_u16(24);
            o.put_u16(0);
            o.put_u32(0);
            f.write(o);
        })
    }

    pub fn lock(&mut self, f: FileId, elements: &[(u64, u64, u32)]) -> Resp {
        let tree = self.tree_id;
        self.call(Command::LOCK, tree, |o| lock_body(o, f, elements))
    }

    /// A LOCK of these (offset, length, flags) elements, not sent.
    pub fn lock_msg(&mut self, f: FileId, elements: &[(u64, u64, u32)]) -> Vec<u8> {
        let tree = self.tree_id;
        self.message(Command::LOCK, tree, |o| lock_body(o, f, elements))
    }

    pub fn query_directory(
        &mut self,
        f: FileId,
        class: u8,
        flags: u8,
        pattern: &str,
        out_len: u32,
    ) -> Resp {
        let tree = self.tree_id;
        self.call(Command::QUERY_DIRECTORY, tree, |o| {
            o.put_u16(33);
            o.put_u8(class);
            o.put_u8(flags);
            o.put_u32(0);
            f.write(o);
            let mut name = Vec::new();
            encode_utf16le(pattern, &mut name);
            o.put_u16(if name.is_empty() { 0 } else { 96 });
            o.put_u16(name.len() as u16);
            o.put_u32(out_len);
            o.put_bytes(&name);
            if name.is_empty() {
                o.put_u8(0);
            }
        })
    }

    pub fn query_info(
        &mut self,
        f: FileId,
        info_type: u8,
        class: u8,
        additional: u32,
        out_len: u32,
    ) -> Resp {
        let tree = self.tree_id;
        self.call(Command::QUERY_INFO, tree, |o| {
            query_info_body(o, f, info_type, class, additional, out_len)
        })
    }

    /// A QUERY_INFO request (unsigned), for sending without waiting for its answer.
    pub fn query_info_msg(&mut self, f: FileId, info_type: u8, class: u8, out_len: u32) -> Vec<u8> {
        let tree = self.tree_id;
        self.message(Command::QUERY_INFO, tree, |o| {
            query_info_body(o, f, info_type, class, 0, out_len)
        })
    }

    /// A QUERY_INFO request with an AdditionalInformation (security parts), not sent.
    pub fn query_info_additional_msg(
        &mut self,
        f: FileId,
        (info_type, class, additional): (u8, u8, u32),
        out_len: u32,
    ) -> Vec<u8> {
        let tree = self.tree_id;
        self.message(Command::QUERY_INFO, tree, |o| {
            query_info_body(o, f, info_type, class, additional, out_len)
        })
    }

    pub fn set_info(&mut self, f: FileId, info_type: u8, class: u8, buf: &[u8]) -> Resp {
        let tree = self.tree_id;
        self.call(Command::SET_INFO, tree, |o| {
            set_info_body(o, f, info_type, class, buf)
        })
    }

    /// A SET_INFO, not sent.
    pub fn set_info_msg(&mut self, f: FileId, info_type: u8, class: u8, buf: &[u8]) -> Vec<u8> {
        let tree = self.tree_id;
        self.message(Command::SET_INFO, tree, |o| {
            set_info_body(o, f, info_type, class, buf)
        })
    }

    /// SET_INFO with an AdditionalInformation (security parts).
    pub fn set_info_additional(
        &mut self,
        f: FileId,
        info_type: u8,
        additional: u32,
        buf: &[u8],
    ) -> Resp {
        let tree = self.tree_id;
        self.call(Command::SET_INFO, tree, |o| {
            o.put_u16(33);
            o.put_u8(info_type);
            o.put_u8(0);
            o.put_u32(buf.len() as u32);
            o.put_u16(96);
            o.put_u16(0);
            o.put_u32(additional);
            f.write(o);
            o.put_bytes(buf);
        })
    }

    pub fn ioctl(&mut self, f: FileId, ctl: u32, input: &[u8], max_out: u32, flags: u32) -> Resp {
        let tree = self.tree_id;
        self.call(Command::IOCTL, tree, |o| {
            ioctl_body(o, f, (ctl, flags), input, max_out)
        })
    }

    /// An IOCTL of `ctl` on `f` (flags `flags`), not sent.
    pub fn ioctl_msg(
        &mut self,
        f: FileId,
        ctl: u32,
        input: &[u8],
        max_out: u32,
        flags: u32,
    ) -> Vec<u8> {
        let tree = self.tree_id;
        self.message(Command::IOCTL, tree, |o| {
            ioctl_body(o, f, (ctl, flags), input, max_out)
        })
    }
}

/// An IOCTL request body: `ctl` with `flags` on `f`, `input` after the header.
fn ioctl_body(o: &mut Vec<u8>, f: FileId, (ctl, flags): (u32, u32), input: &[u8], max_out: u32) {
    o.put_u16(57);
    o.put_u16(0);
    o.put_u32(ctl);
    f.write(o);
    o.put_u32(if input.is_empty() { 0 } else { 120 });
    o.put_u32(input.len() as u32);
    o.put_u32(0);
    o.put_u32(0);
    o.put_u32(0);
    o.put_u32(max_out);
    o.put_u32(flags);
    o.put_u32(0);
    o.put_bytes(input);
}

pub fn read_body(o: &mut Vec<u8>, f: FileId, offset: u64, len: u32, min: u32) {
    o.put_u16(49);
    o.put_u8(0);
    o.put_u8(0);
    o.put_u32(len);
    o.put_u64(offset);
    f.write(o);
    o.put_u32(min);
    o.put_u32(0);
    o.put_u32(0);
    o.put_u16(0);
    o.put_u16(0);
    o.put_u8(0);
}

pub fn write_body(o: &mut Vec<u8>, f: FileId, offset: u64, data: &[u8]) {
    o.put_u16(49);
    o.put_u16(112);
    o.put_u32(data.len() as u32);
    o.put_u64(offset);
    f.write(o);
    o.put_u32(0);
    o.put_u32(0);
    o.put_u16(0);
    o.put_u16(0);
    o.put_u32(0);
    o.put_bytes(data);
}

/// The data of a READ response.
pub fn read_data(r: &Resp) -> Vec<u8> {
    let mut rd = Reader::new(r.body());
    assert_eq!(rd.u16().unwrap(), 17);
    let off = rd.u8().unwrap() as usize;
    rd.u8().unwrap();
    let len = rd.u32().unwrap() as usize;
    r.msg[off..off + len].to_vec()
}

/// The output buffer of a QUERY_INFO / QUERY_DIRECTORY response.
pub fn output_buffer(r: &Resp) -> Vec<u8> {
    let mut rd = Reader::new(r.body());
    assert_eq!(rd.u16().unwrap(), 9);
    let off = rd.u16().unwrap() as usize;
    let len = rd.u32().unwrap() as usize;
    if len == 0 {
        return Vec::new();
    }
    r.msg[off..off + len].to_vec()
}

pub mod fuse;

/// Makes `path` (slash-separated) on `mem` with `data`, its directories too, as the server.
pub fn make_file(mem: &MemShare, path: &str, data: &[u8]) {
    use ringshare_vfs::{OpenMode, OpenOptions, RelPath};
    let parts: Vec<&str> = path.split('/').collect();
    let who = ringshare_vfs::server_who();
    for i in 1..parts.len() {
        let dir = RelPath::from_components(parts[..i].iter().copied()).unwrap();
        let opts = OpenOptions {
            mode: OpenMode::OpenOrCreate,
            directory: true,
            ..OpenOptions::read_existing()
        };
        mem.open(&who, &dir, &opts).unwrap();
    }
    let opts = OpenOptions {
        mode: OpenMode::TruncateOrCreate,
        write: true,
        ..OpenOptions::read_existing()
    };
    let file = RelPath::from_components(parts.iter().copied()).unwrap();
    let node = mem.open(&who, &file, &opts).unwrap().node;
    node.write_at(data, 0).unwrap();
}

thread_local! {
    /// Whether what runs now on this thread runs as the driver's file system pool or an io_uring
    /// worker would run it, not on the I/O thread ([`off_io_thread`]).
    static OFF_IO_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `f` run as the driver's file system pool (a lookup's or a file system job's run) or an
/// io_uring worker (the ring's I/O) runs it: the calls a FUSE-like share counts meanwhile are
/// not the I/O thread's ([`fuse::Calls::on_io_thread`]).
pub fn off_io_thread<T>(f: impl FnOnce() -> T) -> T {
    let was = OFF_IO_THREAD.with(|c| c.replace(true));
    let r = f();
    OFF_IO_THREAD.with(|c| c.set(was));
    r
}

/// Whether a call made now is the I/O thread's ([`off_io_thread`]).
pub fn on_the_io_thread() -> bool {
    !OFF_IO_THREAD.with(std::cell::Cell::get)
}
pub mod posix;

// ---- leases, breaks, renames: shared by the oplock, cluster and durable tests ----

/// Oplock and lease levels and the access masks lease tests open with.
#[allow(dead_code)]
pub mod caching {
    /// RequestedOplockLevel asking for a lease.
    pub const LEASE: u8 = 0xFF;
    pub const R: u32 = 1;
    pub const H: u32 = 2;
    pub const W: u32 = 4;
    /// FILE_GENERIC_READ.
    pub const READ: u32 = 0x0012_0089;
    /// FILE_ALL_ACCESS.
    pub const ALL: u32 = 0x001F_01FF;
}

/// A version-2 lease request: key `key` repeated, state `state` (R=1, H=2, W=4).
pub fn lease_v2(key: u8, state: u32) -> ringshare_wire::create::Lease {
    ringshare_wire::create::Lease {
        key: [key; 16],
        state: ringshare_wire::consts::LeaseState(state),
        flags: ringshare_wire::consts::LeaseFlags::empty(),
        duration: 0,
        v2: Some(ringshare_wire::create::LeaseV2 {
            parent_key: [0; 16],
            epoch: 0,
        }),
    }
}

/// The lease a successful CREATE granted.
pub fn granted_lease(r: &Resp) -> ringshare_wire::create::Lease {
    assert_eq!(r.status(), NtStatus::SUCCESS, "create");
    let cr = CreateResponse::decode(&r.msg).expect("create response");
    let c = cr
        .contexts
        .iter()
        .find(|c| c.tag() == ringshare_wire::create::ContextTag::RequestLease)
        .expect("lease response context");
    ringshare_wire::create::Lease::decode(&c.data).expect("lease context")
}

/// The body of an ECHO, LOGOFF or TREE_DISCONNECT request (StructureSize 4, Reserved).
pub fn empty_body(o: &mut Vec<u8>) {
    o.extend_from_slice(&[4, 0, 0, 0]);
}

/// FileRenameInformation ([MS-FSCC] 2.4.42, SMB2 form) to `to`, root 0.
pub fn rename_info(to: &str, replace: bool) -> Vec<u8> {
    let name: Vec<u8> = to.encode_utf16().flat_map(u16::to_le_bytes).collect();
    let mut b = vec![0u8; 20];
    b[0] = u8::from(replace);
    b[16..20].copy_from_slice(&(name.len() as u32).to_le_bytes());
    b.extend_from_slice(&name);
    b
}

impl Client {
    /// A CREATE on the writable tree asking for oplock `level` (0xFF: a
    /// lease, with `lease`).
    pub fn create_msg_caching(
        &mut self,
        name: &str,
        access: u32,
        share: u32,
        disposition: CreateDisposition,
        level: u8,
        lease: Option<ringshare_wire::create::Lease>,
    ) -> Vec<u8> {
        let contexts = lease
            .map(|l| {
                vec![CreateContext::new(
                    ringshare_wire::create::tag::REQUEST_LEASE,
                    l.encode(),
                )]
            })
            .unwrap_or_default();
        self.create_msg_caching_ctx(name, access, share, disposition, level, contexts)
    }

    /// [`Client::create_msg_caching`] with any create contexts.
    pub fn create_msg_caching_ctx(
        &mut self,
        name: &str,
        access: u32,
        share: u32,
        disposition: CreateDisposition,
        level: u8,
        contexts: Vec<CreateContext<'static>>,
    ) -> Vec<u8> {
        let req = CreateRequest {
            security_flags: 0,
            requested_oplock_level: OplockLevel(level),
            impersonation_level: ImpersonationLevel::IMPERSONATION,
            smb_create_flags: 0,
            desired_access: AccessMask(access),
            file_attributes: FileAttributes(0),
            share_access: ShareAccess(share),
            create_disposition: disposition,
            create_options: CreateOptions(0),
            name: name.to_string(),
            contexts,
        };
        let tree = self.tree_id;
        self.message(Command::CREATE, tree, |o| req.encode(o))
    }

    /// The break notifications waiting for this client.
    pub fn breaks(&mut self) -> Vec<ringshare_wire::misc::OplockBreak> {
        self.pump()
            .into_iter()
            .map(|r| {
                assert_eq!(r.hdr.command, Command::OPLOCK_BREAK);
                assert_eq!(r.hdr.message_id, u64::MAX, "a notification");
                assert_eq!(r.hdr.session_id, 0);
                ringshare_wire::misc::OplockBreak::decode(&r.msg).expect("break body")
            })
            .collect()
    }

    /// Acknowledge a lease break of the lease with key `key` repeated.
    pub fn ack_lease(&mut self, key: u8, state: u32) -> Resp {
        let tree = self.tree_id;
        self.call(Command::OPLOCK_BREAK, tree, |o| {
            lease_ack(key, state).encode(o)
        })
    }

    /// The same acknowledgment as a message (unsigned), for sending without waiting.
    pub fn ack_lease_msg(&mut self, key: u8, state: u32) -> Vec<u8> {
        let tree = self.tree_id;
        self.message(Command::OPLOCK_BREAK, tree, |o| {
            lease_ack(key, state).encode(o)
        })
    }
}

/// A LOCK request's body: these (offset, length, flags) elements of `f`.
fn lock_body(o: &mut Vec<u8>, f: FileId, elements: &[(u64, u64, u32)]) {
    o.put_u16(48);
    o.put_u16(elements.len() as u16);
    o.put_u32(0);
    f.write(o);
    for (off, len, flags) in elements {
        o.put_u64(*off);
        o.put_u64(*len);
        o.put_u32(*flags);
        o.put_u32(0);
    }
}

/// A SET_INFO request's body: `buf` of class `class` of `info_type` for `f`.
pub fn set_info_body(o: &mut Vec<u8>, f: FileId, info_type: u8, class: u8, buf: &[u8]) {
    o.put_u16(33);
    o.put_u8(info_type);
    o.put_u8(class);
    o.put_u32(buf.len() as u32);
    o.put_u16(96);
    o.put_u16(0);
    o.put_u32(0);
    f.write(o);
    o.put_bytes(buf);
}

/// The body of a QUERY_INFO request.
fn query_info_body(
    o: &mut Vec<u8>,
    f: FileId,
    info_type: u8,
    class: u8,
    additional: u32,
    out_len: u32,
) {
    o.put_u16(41);
    o.put_u8(info_type);
    o.put_u8(class);
    o.put_u32(out_len);
    o.put_u16(0);
    o.put_u16(0);
    o.put_u32(0);
    o.put_u32(additional);
    o.put_u32(0);
    f.write(o);
    o.put_u8(0);
}

/// A lease break acknowledgment of the lease with key `key` repeated, at `state`.
fn lease_ack(key: u8, state: u32) -> ringshare_wire::misc::OplockBreak {
    ringshare_wire::misc::OplockBreak::LeaseAck {
        flags: 0,
        lease_key: [key; 16],
        lease_state: ringshare_wire::consts::LeaseState(state),
        lease_duration: 0,
    }
}

// The connection's three ways in, each a function of its own: bench/instructions counts what
// runs inside these (callgrind --toggle-collect), also in a release build whose link-time
// optimization inlines `Connection::receive` and `poll_output` into their callers.
#[inline(never)]
fn conn_receive(conn: &mut Connection, now: Now, frame: Vec<u8>) {
    conn.receive(now, frame)
}

#[inline(never)]
fn conn_poll_output(conn: &mut Connection) -> Option<Output> {
    conn.poll_output()
}

#[inline(never)]
fn conn_complete_io(conn: &mut Connection, now: Now, id: u64, done: IoDone) {
    conn.complete_io(now, id, done)
}
