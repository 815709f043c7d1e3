//! One SMB2/3 client connection ([MS-SMB2] 3.2): frames out, frames in.
//!
//! The handshake mirrors the server core's `cmd::negotiate` and
//! `cmd::session_setup`: NEGOTIATE (with the 3.1.1 preauth, encryption and
//! signing contexts), SESSION_SETUP legs carrying SPNEGO/NTLMv2 tokens (the
//! 3.1.1 preauth hash runs over every leg but the last response), key
//! derivation, then TREE_CONNECT. After [`Event::Ready`] the caller pipelines
//! requests; each spends its credit charge and every response adds the credits
//! it grants. Requests are signed when signing is on and encrypted (TRANSFORM
//! header) when encryption is on; signed responses are verified and a response
//! to a signed request must itself be signed.
//!
//! Multichannel ([MS-SMB2] 3.2.4.1.7, 3.2.5.3.3): [`ClientConn::bind`] opens
//! a further connection of an existing session. It negotiates the session's
//! dialect with the same client GUID, runs SESSION_SETUP with the BINDING
//! flag (every leg signed with the session's signing key), derives the
//! channel's own signing key (3.1.1: over this connection's preauth hash),
//! and is then ready on the session's tree: any open of the session may be
//! used on it. Encryption uses the session's keys, each channel in its own
//! nonce space.

use std::collections::HashMap;
use std::ops::Range;

use ringshare_auth::gss::ClientAuth;
use ringshare_crypto::encrypt::{Cipher, CipherKey};
use ringshare_crypto::keys;
use ringshare_crypto::preauth::PreauthHash;
use ringshare_crypto::sign::{NonceInfo, SigningAlgorithm as SignAlg, SigningKey};
use ringshare_wire::codec::HEADER_LEN;
use ringshare_wire::consts::{
    AccessMask, Capabilities, Channel, CipherId, CloseFlags, Command, CreateDisposition,
    CreateOptions, Dialect, FileAttributes, HashAlgorithm, HeaderFlags, ImpersonationLevel,
    InfoType, OplockLevel, QueryDirectoryFlags, QueryInfoFlags, ReadFlags, SecurityMode,
    SessionFlags, SessionSetupFlags, ShareAccess, ShareFlags, SigningAlgorithm,
    TransportCapabilityFlags, TreeConnectFlags, WriteFlags,
};
use ringshare_wire::create::{CloseRequest, ContextTag, CreateRequest, CreateResponse};
use ringshare_wire::dir::{QueryDirectoryRequest, QueryDirectoryResponse};
use ringshare_wire::file::{
    FlushRequest, ReadRequest, ReadResponse, WriteRequest, WriteResponse, READ_RESPONSE_DATA_OFFSET,
};
use ringshare_wire::framing;
use ringshare_wire::header::{self, Header, HeaderId, Protocol};
use ringshare_wire::info::{QueryInfoRequest, QueryInfoResponse};
use ringshare_wire::misc::Echo;
use ringshare_wire::negotiate::{NegotiateContext, NegotiateRequest, NegotiateResponse};
use ringshare_wire::session::{LogoffRequest, SessionSetupRequest, SessionSetupResponse};
use ringshare_wire::transform::{split_encrypted, AAD_RANGE, TRANSFORM_HEADER_LEN};
use ringshare_wire::tree::{TreeConnectRequest, TreeConnectResponse};
use ringshare_wire::{FileId, NtStatus, WriteExt};

mod compress;
mod options;

pub use options::ClientOptions;

use crate::credits::{charge_for, Credits};
use crate::error::{ClientError, SmbError};

/// Tag of the requests the connection sends for itself (handshake).
const INTERNAL_TAG: u64 = u64::MAX;
/// ProcessId the client puts in sync headers (as Windows does).
const PROCESS_ID: u32 = 0xFEFF;
/// Bytes of the direct-TCP header.
const FRAME_HDR: usize = framing::FRAME_HEADER_LEN;

/// Bytes of a frame [`ClientConn::receive_read_head`] needs: the SMB2
/// header and the fixed part of a READ response.
pub const READ_HEAD_LEN: usize = READ_RESPONSE_DATA_OFFSET;

/// What a further channel of a session needs from its first connection
/// ([`ClientConn::channel_binding`]).
#[derive(Clone)]
pub struct ChannelBinding {
    pub session_id: u64,
    pub tree_id: u32,
    pub dialect: Dialect,
    client_guid: [u8; 16],
    session_signing_key: SigningKey,
    cipher: Option<Cipher>,
    /// Client-to-server and server-to-client cipher keys of the session.
    cipher_keys: Option<(Vec<u8>, Vec<u8>)>,
    encrypting: bool,
    /// Distinct per channel: the high 16 bits of the channel's nonces.
    nonce_space: u16,
}

impl std::fmt::Debug for ChannelBinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelBinding")
            .field("session_id", &self.session_id)
            .field("dialect", &self.dialect)
            .finish_non_exhaustive()
    }
}

/// What a request produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Create {
        file_id: FileId,
        end_of_file: u64,
        /// The server made the open durable (a DHnQ or DH2Q response).
        durable: bool,
        /// The lease state granted (R 1, H 2, W 4), when the CREATE asked
        /// for a lease and the server answered with one.
        lease: Option<u32>,
    },
    /// The data: a range of the frame given to [`ClientConn::receive`].
    Read {
        data: Range<usize>,
    },
    Write {
        count: u32,
    },
    Close,
    Flush,
    Echo,
    Logoff,
    /// The server took a lease break acknowledgment.
    LeaseBreakAck,
    /// The output buffer: a range of the frame given to `receive`.
    QueryInfo {
        buffer: Range<usize>,
    },
    /// The output buffer: a range of the frame given to `receive`.
    QueryDirectory {
        buffer: Range<usize>,
    },
    /// CHANGE_NOTIFY: the FILE_NOTIFY_INFORMATION chain (a range of the
    /// frame given to `receive`), or `enum_dir` (STATUS_NOTIFY_ENUM_DIR: too
    /// many changes, read the directory again).
    ChangeNotify {
        buffer: Range<usize>,
        enum_dir: bool,
    },
}

/// What [`ClientConn::receive`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Negotiated, authenticated and connected to the share.
    Ready,
    /// A request sent with `tag` finished.
    Done {
        tag: u64,
        command: Command,
        result: Result<Reply, SmbError>,
    },
    /// The server breaks a lease this client holds ([MS-SMB2] 2.2.23.2): its
    /// state becomes `new_state`; `ack_required` asks for
    /// [`ClientConn::lease_break_ack`].
    LeaseBreak {
        lease_key: [u8; 16],
        new_state: u32,
        ack_required: bool,
    },
}

/// Where the data of a [`ClientConn::write_apart`] goes in the output
/// handed over by [`ClientConn::take_output_with_gaps`]: the caller sends
/// `out[..at]`, then its `len` bytes for the WRITE it queued with `tag`, then
/// the rest (up to the next gap).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    /// Offset in the handed-over output where the data belongs.
    pub at: usize,
    /// Bytes of data the caller sends there.
    pub len: usize,
    /// The tag the WRITE was queued with.
    pub tag: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Negotiating,
    SessionSetup,
    TreeConnect,
    Ready,
    LoggedOff,
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    tag: u64,
    command: Command,
    charge: u16,
    signed: bool,
}

/// An SMB2/3 client connection.
pub struct ClientConn {
    opts: ClientOptions,
    phase: Phase,
    credits: Credits,
    next_mid: u64,
    pending: HashMap<u64, Pending>,
    out: Vec<u8>,
    /// Data the caller sends itself, in `out` order ([`ClientConn::write_apart`]).
    gaps: Vec<Gap>,
    rng: u64,
    dialect: Option<Dialect>,
    large_mtu: bool,
    max_read: u32,
    max_write: u32,
    max_transact: u32,
    server_requires_signing: bool,
    signing_alg_311: Option<SigningAlgorithm>,
    cipher: Option<Cipher>,
    preauth: Option<PreauthHash>,
    session_preauth: Option<PreauthHash>,
    auth: Option<ClientAuth>,
    session_id: u64,
    tree_id: u32,
    signing_key: Option<SigningKey>,
    encrypt_key: Option<CipherKey>,
    decrypt_key: Option<CipherKey>,
    encrypting: bool,
    nonce_counter: u64,
    client_guid: [u8; 16],
    /// Raw cipher keys (client-to-server, server-to-client), kept for channels.
    cipher_keys: Option<(Vec<u8>, Vec<u8>)>,
    /// This connection binds to an existing session.
    binding: Option<ChannelBinding>,
    /// Channels handed out so far (each gets its own nonce space).
    channels_made: u16,
    /// Compression: what was agreed, the last decompressed frame, wire bytes.
    zip: compress::State,
    /// The server accepted transport-level security (SMB over QUIC).
    transport_security: bool,
}

impl ClientConn {
    /// A new connection; the NEGOTIATE request is queued at once.
    pub fn new(opts: ClientOptions) -> ClientConn {
        let mut c = ClientConn {
            credits: Credits::new(opts.credits_target),
            rng: opts.seed ^ 0x9E37_79B9_7F4A_7C15,
            opts,
            phase: Phase::Negotiating,
            next_mid: 0,
            pending: HashMap::new(),
            out: Vec::with_capacity(4096),
            gaps: Vec::new(),
            dialect: None,
            large_mtu: false,
            max_read: 65536,
            max_write: 65536,
            max_transact: 65536,
            server_requires_signing: false,
            signing_alg_311: None,
            cipher: None,
            preauth: None,
            session_preauth: None,
            auth: None,
            session_id: 0,
            tree_id: 0,
            signing_key: None,
            encrypt_key: None,
            decrypt_key: None,
            encrypting: false,
            nonce_counter: 0,
            client_guid: [0; 16],
            cipher_keys: None,
            binding: None,
            channels_made: 0,
            zip: Default::default(),
            transport_security: false,
        };
        c.client_guid = c.random_bytes();
        c.send_negotiate();
        c
    }

    /// What [`ClientConn::bind`] needs to add a channel to this connection's
    /// session: `None` until the session is ready and can sign (guest and
    /// anonymous sessions cannot be bound), or below SMB 3.
    pub fn channel_binding(&mut self) -> Option<ChannelBinding> {
        let dialect = self.dialect.filter(|d| d.is_smb3())?;
        if self.phase != Phase::Ready {
            return None;
        }
        let key = self.signing_key.clone()?;
        self.channels_made = self.channels_made.checked_add(1)?;
        Some(ChannelBinding {
            session_id: self.session_id,
            tree_id: self.tree_id,
            dialect,
            client_guid: self.client_guid,
            session_signing_key: key,
            cipher: self.cipher,
            cipher_keys: self.cipher_keys.clone(),
            encrypting: self.encrypting,
            nonce_space: self.channels_made,
        })
    }

    /// A new connection that binds to `b`'s session as a further channel;
    /// [`Event::Ready`] comes when the binding is done. `opts` gives the
    /// credentials (the session's user) and the seed; its dialects are
    /// replaced by the session's.
    pub fn bind(mut opts: ClientOptions, b: ChannelBinding) -> ClientConn {
        opts.dialects = vec![b.dialect];
        let mut c = ClientConn::new_unsent(opts);
        c.client_guid = b.client_guid;
        c.nonce_counter = u64::from(b.nonce_space) << 48;
        c.binding = Some(b);
        c.send_negotiate();
        c
    }

    fn new_unsent(opts: ClientOptions) -> ClientConn {
        let mut c = ClientConn::new(opts);
        // Drop the NEGOTIATE `new` queued; the caller sends its own.
        c.out.clear();
        c.pending.clear();
        c.next_mid = 0;
        c.credits = Credits::new(c.opts.credits_target);
        c.preauth = None;
        c
    }

    /// True when this connection is a bound channel of another's session.
    pub fn is_bound_channel(&self) -> bool {
        self.binding.is_some()
    }

    // ---- accessors ----

    /// True once the tree is connected.
    pub fn is_ready(&self) -> bool {
        self.phase == Phase::Ready
    }
    pub fn dialect(&self) -> Option<Dialect> {
        self.dialect
    }
    pub fn session_id(&self) -> u64 {
        self.session_id
    }
    pub fn tree_id(&self) -> u32 {
        self.tree_id
    }
    pub fn max_read_size(&self) -> u32 {
        self.max_read
    }
    pub fn max_write_size(&self) -> u32 {
        self.max_write
    }
    pub fn max_transact_size(&self) -> u32 {
        self.max_transact
    }
    /// Requests are signed.
    pub fn is_signing(&self) -> bool {
        self.signs_requests()
    }
    /// The server accepted transport-level security (SMB over QUIC).
    pub fn transport_security(&self) -> bool {
        self.transport_security
    }
    /// Requests are encrypted.
    pub fn is_encrypting(&self) -> bool {
        self.encrypting
    }
    /// The negotiated cipher, if any.
    pub fn cipher(&self) -> Option<Cipher> {
        self.cipher
    }
    /// Credits granted and not yet spent.
    pub fn credits_available(&self) -> u32 {
        self.credits.available()
    }
    /// Requests sent whose final response has not arrived.
    pub fn requests_in_flight(&self) -> usize {
        self.pending.len()
    }
    /// The credit charge of an I/O of `len` bytes on this connection.
    pub fn charge_for(&self, len: usize) -> u16 {
        if self.large_mtu {
            charge_for(len)
        } else {
            1
        }
    }
    /// A request of `len` payload bytes can be sent now.
    pub fn can_send(&self, len: usize) -> bool {
        self.phase == Phase::Ready && self.credits.can_spend(self.charge_for(len))
    }

    /// True when frames are waiting to be sent.
    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }

    /// Hand over the frames to send: afterwards `buf` holds them (direct-TCP
    /// framed, back to back) and the connection keeps `buf`'s old allocation,
    /// cleared, for the next ones. Swapping two buffers back and forth costs
    /// no allocation.
    ///
    /// For callers that never use [`ClientConn::write_apart`]: with its data
    /// queued, the frames here would lack that data, so this hands over
    /// nothing and returns `false` (use
    /// [`ClientConn::take_output_with_gaps`]).
    pub fn take_output(&mut self, buf: &mut Vec<u8>) -> bool {
        buf.clear();
        if !self.gaps.is_empty() {
            return false;
        }
        std::mem::swap(&mut self.out, buf);
        true
    }

    /// [`ClientConn::take_output`] for callers that send WRITE data apart:
    /// `gaps` receives (cleared first) where in `buf` each such WRITE's data
    /// belongs, in order; the caller sends the bytes of `buf` and the data in
    /// that order, as one stream.
    pub fn take_output_with_gaps(&mut self, buf: &mut Vec<u8>, gaps: &mut Vec<Gap>) {
        buf.clear();
        gaps.clear();
        std::mem::swap(&mut self.out, buf);
        std::mem::swap(&mut self.gaps, gaps);
    }

    // ---- requests ----

    /// CREATE `name` (relative to the share root). Share access is read|write|delete.
    pub fn create(
        &mut self,
        tag: u64,
        name: &str,
        access: u32,
        disposition: CreateDisposition,
        options: u32,
    ) -> Result<u64, ClientError> {
        let req = create_request(
            name,
            access,
            disposition,
            options,
            OplockLevel::NONE,
            Vec::new(),
        );
        self.request(tag, Command::CREATE, 1, |o| req.encode(o))
    }

    /// READ `len` bytes at `offset`.
    pub fn read(
        &mut self,
        tag: u64,
        file_id: FileId,
        offset: u64,
        len: u32,
    ) -> Result<u64, ClientError> {
        if len > self.max_read {
            return Err(ClientError::TooLarge {
                len: len as usize,
                max: self.max_read,
            });
        }
        let charge = self.charge_for(len as usize);
        let req = ReadRequest {
            padding: 0x50,
            flags: if self.zip.on() && !self.zip.reads_plain {
                ReadFlags::REQUEST_COMPRESSED
            } else {
                ReadFlags(0)
            },
            length: len,
            offset,
            file_id,
            minimum_count: 0,
            channel: Channel::NONE,
            remaining_bytes: 0,
            channel_info: &[],
        };
        self.request(tag, Command::READ, charge, |o| req.encode(o))
    }

    /// The WRITE request for `len` data bytes at `offset` (`data`: those
    /// bytes, or empty when they go apart) and its credit charge; `TooLarge`
    /// past the server's MaxWriteSize.
    fn write_request<'a>(
        &self,
        file_id: FileId,
        offset: u64,
        data: &'a [u8],
        len: usize,
    ) -> Result<(WriteRequest<'a>, u16), ClientError> {
        if len > self.max_write as usize {
            return Err(ClientError::TooLarge {
                len,
                max: self.max_write,
            });
        }
        let req = WriteRequest {
            offset,
            file_id,
            channel: Channel::NONE,
            remaining_bytes: 0,
            flags: WriteFlags(0),
            channel_info: &[],
            data,
        };
        Ok((req, self.charge_for(len)))
    }

    /// WRITE `data` at `offset` (copied into the send buffer).
    pub fn write(
        &mut self,
        tag: u64,
        file_id: FileId,
        offset: u64,
        data: &[u8],
    ) -> Result<u64, ClientError> {
        let (req, charge) = self.write_request(file_id, offset, data, data.len())?;
        self.request(tag, Command::WRITE, charge, |o| req.encode(o))
    }

    /// True when [`ClientConn::write_apart`] can be used: requests are
    /// neither signed nor sealed nor compressed (a signature, cipher or
    /// compressor covers the data, so those WRITEs carry it in the output:
    /// [`ClientConn::write`]).
    pub fn can_write_apart(&self) -> bool {
        self.phase == Phase::Ready && !self.signs_requests() && !self.encrypting && !self.zip.on()
    }

    /// WRITE `len` bytes at `offset` whose data the caller sends itself, from
    /// its own buffer: only the frame and WRITE headers are queued, and the
    /// next [`ClientConn::take_output_with_gaps`] says where the data goes.
    /// Refused (`Unsupported`) when requests are signed or sealed
    /// ([`ClientConn::can_write_apart`]).
    pub fn write_apart(
        &mut self,
        tag: u64,
        file_id: FileId,
        offset: u64,
        len: usize,
    ) -> Result<u64, ClientError> {
        if self.phase != Phase::Ready {
            return Err(ClientError::NotReady);
        }
        if !self.can_write_apart() {
            return Err(ClientError::Unsupported(
                "a signed or sealed WRITE carries its data in the output".into(),
            ));
        }
        let (req, charge) = self.write_request(file_id, offset, &[], len)?;
        let (mid, msg) = self.send_apart(tag, Command::WRITE, charge, len, |o| {
            req.encode_head(o, len)
        })?;
        self.gaps.push(Gap {
            at: msg.end,
            len,
            tag,
        });
        Ok(mid)
    }

    pub fn close(&mut self, tag: u64, file_id: FileId) -> Result<u64, ClientError> {
        let req = CloseRequest {
            flags: CloseFlags(0),
            file_id,
        };
        self.request(tag, Command::CLOSE, 1, |o| req.encode(o))
    }

    pub fn flush(&mut self, tag: u64, file_id: FileId) -> Result<u64, ClientError> {
        let req = FlushRequest { file_id };
        self.request(tag, Command::FLUSH, 1, |o| req.encode(o))
    }

    /// QUERY_DIRECTORY with `class` (e.g. 0x25 FileIdBothDirectoryInformation).
    pub fn query_directory(
        &mut self,
        tag: u64,
        dir: FileId,
        class: u8,
        pattern: &str,
        restart: bool,
        out_len: u32,
    ) -> Result<u64, ClientError> {
        let req = QueryDirectoryRequest {
            info_class: class,
            flags: if restart {
                QueryDirectoryFlags::RESTART_SCANS
            } else {
                QueryDirectoryFlags(0)
            },
            file_index: 0,
            file_id: dir,
            pattern: pattern.to_string(),
            output_buffer_length: out_len.min(self.max_transact),
        };
        let charge = self.charge_for(req.output_buffer_length as usize);
        self.request(tag, Command::QUERY_DIRECTORY, charge, |o| req.encode(o))
    }

    /// QUERY_INFO of `info_type`/`class` (e.g. FILE/0x12 FileAllInformation).
    pub fn query_info(
        &mut self,
        tag: u64,
        file_id: FileId,
        info_type: InfoType,
        class: u8,
        out_len: u32,
    ) -> Result<u64, ClientError> {
        let req = QueryInfoRequest {
            info_type,
            info_class: class,
            output_buffer_length: out_len.min(self.max_transact),
            additional_information: 0,
            flags: QueryInfoFlags(0),
            file_id,
            input: &[],
        };
        self.request(tag, Command::QUERY_INFO, 1, |o| req.encode(o))
    }

    /// CHANGE_NOTIFY on directory `dir` ([MS-SMB2] 2.2.35); the server
    /// answers when something changes (an interim first).
    pub fn change_notify(
        &mut self,
        tag: u64,
        dir: FileId,
        filter: u32,
        watch_tree: bool,
        out_len: u32,
    ) -> Result<u64, ClientError> {
        let req = ringshare_wire::misc::ChangeNotifyRequest {
            flags: ringshare_wire::consts::ChangeNotifyFlags(u16::from(watch_tree)),
            output_buffer_length: out_len.min(self.max_transact),
            file_id: dir,
            completion_filter: ringshare_wire::consts::CompletionFilter(filter),
        };
        let charge = self.charge_for(req.output_buffer_length as usize);
        self.request(tag, Command::CHANGE_NOTIFY, charge, |o| req.encode(o))
    }

    pub fn echo(&mut self, tag: u64) -> Result<u64, ClientError> {
        self.request(tag, Command::ECHO, 1, |o| Echo.encode(o))
    }

    pub fn logoff(&mut self, tag: u64) -> Result<u64, ClientError> {
        self.request(tag, Command::LOGOFF, 1, |o| LogoffRequest.encode(o))
    }

    pub(crate) fn request(
        &mut self,
        tag: u64,
        command: Command,
        charge: u16,
        body: impl FnOnce(&mut Vec<u8>),
    ) -> Result<u64, ClientError> {
        if self.phase != Phase::Ready {
            return Err(ClientError::NotReady);
        }
        self.send(tag, command, charge, body).map(|(mid, _)| mid)
    }

    // ---- framing, signing, encryption ----

    fn signs_requests(&self) -> bool {
        self.signing_key.is_some()
            && (self.opts.sign || self.server_requires_signing)
            && !self.encrypting
    }

    /// Encode one request (framed, signed or sealed) into the output.
    /// Returns its message id and the range of the plain message in `out`
    /// (valid only when not encrypted: for the preauth hash).
    fn send(
        &mut self,
        tag: u64,
        command: Command,
        charge: u16,
        body: impl FnOnce(&mut Vec<u8>),
    ) -> Result<(u64, Range<usize>), ClientError> {
        self.send_apart(tag, command, charge, 0, body)
    }

    /// [`ClientConn::send`] of a message whose last `apart` bytes the caller
    /// sends itself: the frame header counts them, `out` does not hold them.
    /// Such a message is neither signed nor sealed.
    fn send_apart(
        &mut self,
        tag: u64,
        command: Command,
        charge: u16,
        apart: usize,
        body: impl FnOnce(&mut Vec<u8>),
    ) -> Result<(u64, Range<usize>), ClientError> {
        let charge = if self.large_mtu { charge.max(1) } else { 1 };
        if !self.credits.can_spend(charge) {
            return Err(ClientError::NoCredits {
                needed: charge,
                available: self.credits.available(),
            });
        }
        let mid = self.next_mid;
        let mut hdr = Header::request(command, mid);
        hdr.credit_charge = if self.large_mtu { charge } else { 0 };
        hdr.credits = self.credits.request_for(charge);
        hdr.session_id = self.session_id;
        let with_tree = !matches!(
            command,
            Command::NEGOTIATE | Command::SESSION_SETUP | Command::TREE_CONNECT
        );
        hdr.id = HeaderId::Sync {
            process_id: PROCESS_ID,
            tree_id: if with_tree { self.tree_id } else { 0 },
        };
        // [MS-SMB2] 3.2.4.1.1: a 3.1.1 TREE_CONNECT is always signed (unless sealed).
        let tcon_311 = command == Command::TREE_CONNECT
            && self.dialect == Some(Dialect::SMB3_1_1)
            && self.signing_key.is_some()
            && !self.encrypting;
        // [MS-SMB2] 3.2.4.1.1: the legs of a binding are signed with the
        // session's key; other SESSION_SETUPs are not signed.
        let binding_key = match (&self.binding, command) {
            (Some(b), Command::SESSION_SETUP) => Some(b.session_signing_key.clone()),
            _ => None,
        };
        let sign = binding_key.is_some()
            || ((self.signs_requests() || tcon_311) && command != Command::SESSION_SETUP);
        if sign {
            hdr.flags.insert(HeaderFlags::SIGNED);
        }
        let seal = self.encrypting && command != Command::SESSION_SETUP;
        if apart > 0 && (sign || seal) {
            return Err(ClientError::Unsupported(
                "a signed or sealed message carries all its bytes".into(),
            ));
        }
        let start = self.out.len();
        self.out.put_zeros(FRAME_HDR);
        if seal {
            self.out.put_zeros(TRANSFORM_HEADER_LEN);
        }
        let hdr_at = self.out.len();
        hdr.encode(&mut self.out);
        body(&mut self.out);
        let end = self.out.len();
        if sign && !seal {
            if let Some(key) = binding_key.as_ref().or(self.signing_key.as_ref()) {
                let sig = key.sign(
                    &[&self.out[hdr_at..end]],
                    NonceInfo {
                        message_id: mid,
                        server_to_client: false,
                        cancel: false,
                    },
                );
                header::patch_signature(&mut self.out, hdr_at, &sig);
            }
        }
        // Sign, compress, encrypt ([MS-SMB2] 3.2.4.1.9, 3.1.4.4).
        if command == Command::WRITE && apart == 0 && self.zip.on() {
            self.compress_write(hdr_at);
        }
        if seal {
            self.seal(start + FRAME_HDR, hdr_at)?;
        }
        let end = self.out.len();
        self.zip.wire_out += (end - start + apart) as u64;
        let h = framing::frame_header(end - start - FRAME_HDR + apart)?;
        self.out[start..start + FRAME_HDR].copy_from_slice(&h);
        let spent = self.credits.spend(charge);
        debug_assert!(spent);
        self.next_mid += u64::from(charge);
        self.pending.insert(
            mid,
            Pending {
                tag,
                command,
                charge,
                // Responses to SESSION_SETUP legs are checked by the handshake.
                signed: sign && command != Command::SESSION_SETUP,
            },
        );
        Ok((mid, hdr_at..end))
    }

    /// Encrypt `out[msg_at..]` in place and fill in the transform header at `th_at`.
    fn seal(&mut self, th_at: usize, msg_at: usize) -> Result<(), ClientError> {
        let key = self.encrypt_key.as_ref().ok_or(ClientError::NotReady)?;
        self.nonce_counter += 1;
        let mut nonce = [0u8; 16];
        nonce[..8].copy_from_slice(&self.nonce_counter.to_le_bytes());
        let len = u32::try_from(self.out.len() - msg_at)
            .map_err(|_| ClientError::Malformed("message too long".into()))?;
        let mut th = [0u8; TRANSFORM_HEADER_LEN];
        th[..4].copy_from_slice(&header::TRANSFORM_MAGIC);
        th[20..36].copy_from_slice(&nonce);
        th[36..40].copy_from_slice(&len.to_le_bytes());
        th[42..44].copy_from_slice(&1u16.to_le_bytes());
        th[44..52].copy_from_slice(&self.session_id.to_le_bytes());
        let n = key.cipher().nonce_len();
        let tag = key
            .encrypt_in_place(&nonce[..n], &th[AAD_RANGE], &mut self.out[msg_at..])
            .map_err(|_| ClientError::Decrypt)?;
        th[4..20].copy_from_slice(&tag);
        self.out[th_at..th_at + TRANSFORM_HEADER_LEN].copy_from_slice(&th);
        Ok(())
    }

    fn random_bytes<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        for chunk in out.chunks_mut(8) {
            // splitmix64
            self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.rng;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            let b = z.to_le_bytes();
            chunk.copy_from_slice(&b[..chunk.len()]);
        }
        out
    }

    // ---- receiving ----

    /// One received frame payload (without the 4-byte direct-TCP header).
    /// Encrypted frames are decrypted in place; [`Reply`] ranges index `frame`.
    /// An `Err` means the connection cannot go on.
    pub fn receive(
        &mut self,
        frame: &mut [u8],
        events: &mut Vec<Event>,
    ) -> Result<(), ClientError> {
        let mut base = 0;
        let mut encrypted = false;
        self.zip.inflated = None;
        self.zip.wire_in += (FRAME_HDR + frame.len()) as u64;
        if header::protocol_of(frame) == Protocol::Transform {
            let (th, _, _) = split_encrypted(frame)?;
            if th.session_id != self.session_id {
                return Err(ClientError::Malformed(
                    "encrypted response for another session".into(),
                ));
            }
            let key = self.decrypt_key.as_ref().ok_or(ClientError::Decrypt)?;
            let mut aad = [0u8; 32];
            aad.copy_from_slice(&frame[AAD_RANGE]);
            let n = key.cipher().nonce_len();
            key.decrypt_in_place(
                &th.nonce[..n],
                &aad,
                &mut frame[TRANSFORM_HEADER_LEN..],
                &th.signature,
            )
            .map_err(|_| ClientError::Decrypt)?;
            base = TRANSFORM_HEADER_LEN;
            encrypted = true;
        }
        // Decrypt first, then decompress.
        if header::protocol_of(&frame[base..]) == Protocol::Compressed {
            let mut plain = self.inflate(&frame[base..])?;
            let r = self.receive_plain(&mut plain, 0, encrypted, events);
            self.zip.inflated = Some(plain);
            return r;
        }
        self.receive_plain(frame, base, encrypted, events)
    }

    /// The SMB2 messages of a received frame from `base` on.
    fn receive_plain(
        &mut self,
        frame: &mut [u8],
        base: usize,
        encrypted: bool,
        events: &mut Vec<Event>,
    ) -> Result<(), ClientError> {
        let mut pos = base;
        loop {
            let rest = &frame[pos..];
            let hdr = Header::decode(rest)?;
            let next = hdr.next_command as usize;
            let end = if next == 0 {
                frame.len()
            } else if next >= HEADER_LEN && next.is_multiple_of(8) && next < rest.len() {
                pos + next
            } else {
                return Err(ClientError::Malformed("NextCommand".into()));
            };
            self.handle(&hdr, &mut frame[pos..end], pos, encrypted, events)?;
            if next == 0 {
                return Ok(());
            }
            pos = end;
        }
    }

    /// A READ response taken in pieces: `head` is the start of a frame
    /// payload of `frame_len` bytes (at least [`READ_HEAD_LEN`] bytes of it).
    /// When the frame is the successful, unsigned, unsealed response to an
    /// unsigned READ, alone in its frame, the connection takes it as
    /// answered, pushes its [`Event::Done`] (whose [`Reply::Read`] range
    /// indexes the frame) and returns the data's range: the caller then
    /// takes the data from the stream in whatever pieces it likes and skips
    /// the rest of the frame. Otherwise (sealed, signed, an error, a compound,
    /// anything unexpected) it returns `None`, changes nothing, and the
    /// frame goes whole to [`ClientConn::receive`], which checks it.
    pub fn receive_read_head(
        &mut self,
        head: &[u8],
        frame_len: usize,
        events: &mut Vec<Event>,
    ) -> Option<Range<usize>> {
        let head = head.get(..READ_HEAD_LEN)?;
        if frame_len < READ_HEAD_LEN
            || self.encrypting
            || header::protocol_of(head) != Protocol::Smb2
        {
            return None;
        }
        let hdr = Header::decode(head).ok()?;
        if !hdr.is_response()
            || hdr.command != Command::READ
            || hdr.status != NtStatus::SUCCESS
            || hdr.next_command != 0
            || (hdr.is_signed() && self.signing_key.is_some())
        {
            return None;
        }
        let p = self.pending.get(&hdr.message_id).copied()?;
        if p.command != Command::READ || p.signed {
            return None;
        }
        // The fixed part ([MS-SMB2] 2.2.20): StructureSize, DataOffset,
        // Reserved, DataLength, ...
        let body = &head[HEADER_LEN..];
        if u16::from_le_bytes([body[0], body[1]]) != ReadResponse::STRUCTURE_SIZE {
            return None;
        }
        let len = u32::from_le_bytes([body[4], body[5], body[6], body[7]]) as usize;
        let off = if len == 0 {
            READ_HEAD_LEN
        } else {
            usize::from(body[2])
        };
        if off < READ_HEAD_LEN || off.checked_add(len)? > frame_len {
            return None;
        }
        self.pending.remove(&hdr.message_id);
        self.credits.on_response(hdr.credits, Some(p.charge));
        self.zip.wire_in += (FRAME_HDR + frame_len) as u64;
        let data = off..off + len;
        events.push(Event::Done {
            tag: p.tag,
            command: Command::READ,
            result: Ok(Reply::Read { data: data.clone() }),
        });
        Some(data)
    }

    fn handle(
        &mut self,
        hdr: &Header,
        msg: &mut [u8],
        at: usize,
        encrypted: bool,
        events: &mut Vec<Event>,
    ) -> Result<(), ClientError> {
        if !hdr.is_response() {
            return Err(ClientError::Malformed("a request from the server".into()));
        }
        if hdr.message_id == u64::MAX && hdr.command == Command::OPLOCK_BREAK {
            // A break notification: a lease's is told (this client takes no oplocks).
            self.credits.on_response(hdr.credits, None);
            return crate::durable::lease_break(msg, events);
        }
        let Some(p) = self.pending.get(&hdr.message_id).copied() else {
            return Err(ClientError::Malformed(format!(
                "response to unknown message id {}",
                hdr.message_id
            )));
        };
        if p.command != hdr.command {
            return Err(ClientError::Malformed(format!(
                "{:?} response to a {:?} request",
                hdr.command, p.command
            )));
        }
        if hdr.status == NtStatus::PENDING && hdr.is_async() {
            // Interim response: credits granted now, the final one follows.
            self.credits.on_response(hdr.credits, None);
            return Ok(());
        }
        self.pending.remove(&hdr.message_id);
        self.credits.on_response(hdr.credits, Some(p.charge));

        if p.command == Command::SESSION_SETUP && hdr.status == NtStatus::SUCCESS {
            // Keys first: the final SESSION_SETUP response is signed with them.
            if self.binding.is_some() {
                return self.binding_done(hdr, msg, events);
            }
            return self.session_done(hdr, msg);
        }
        if !encrypted {
            self.check_signature(hdr, msg, p.signed)?;
        }
        match p.command {
            Command::NEGOTIATE => self.negotiated(hdr, msg),
            Command::SESSION_SETUP => self.session_step(hdr, msg),
            Command::TREE_CONNECT if p.tag == INTERNAL_TAG => self.tree_connected(hdr, msg, events),
            _ => {
                let result = if p.command == Command::CHANGE_NOTIFY && hdr.status.is_success() {
                    let r = ringshare_wire::misc::ChangeNotifyResponse::decode(msg)?;
                    let off = r.buffer.as_ptr() as usize - msg.as_ptr() as usize + at;
                    Ok(Reply::ChangeNotify {
                        buffer: off..off + r.buffer.len(),
                        enum_dir: hdr.status == NtStatus::NOTIFY_ENUM_DIR,
                    })
                } else if hdr.status.is_success() {
                    Ok(self.reply(p.command, msg, at)?)
                } else {
                    Err(SmbError {
                        status: hdr.status,
                        command: p.command,
                        message_id: hdr.message_id,
                    })
                };
                if p.command == Command::LOGOFF && result.is_ok() {
                    self.phase = Phase::LoggedOff;
                }
                events.push(Event::Done {
                    tag: p.tag,
                    command: p.command,
                    result,
                });
                Ok(())
            }
        }
    }

    /// [MS-SMB2] 3.2.5.1.3: verify a signed response; a response to a signed
    /// request must be signed.
    fn check_signature(
        &self,
        hdr: &Header,
        msg: &mut [u8],
        request_signed: bool,
    ) -> Result<(), ClientError> {
        let bad = || ClientError::BadSignature {
            command: hdr.command,
            message_id: hdr.message_id,
        };
        match (&self.signing_key, hdr.is_signed()) {
            (Some(key), true) => {
                if verify(key, hdr, msg) {
                    Ok(())
                } else {
                    Err(bad())
                }
            }
            // A session ended (e.g. logged off on another channel) leaves
            // the server no key to sign with.
            (_, false) if hdr.status == NtStatus::USER_SESSION_DELETED => Ok(()),
            (_, false) if request_signed => Err(bad()),
            _ => Ok(()),
        }
    }

    fn reply(&self, command: Command, msg: &[u8], at: usize) -> Result<Reply, ClientError> {
        let range = |sub: &[u8]| {
            let off = sub.as_ptr() as usize - msg.as_ptr() as usize + at;
            off..off + sub.len()
        };
        Ok(match command {
            Command::CREATE => {
                let r = CreateResponse::decode(msg)?;
                Reply::Create {
                    file_id: r.file_id,
                    end_of_file: r.end_of_file,
                    durable: r.contexts.iter().any(|c| {
                        matches!(
                            c.tag(),
                            ContextTag::DurableHandleRequest | ContextTag::DurableHandleRequestV2
                        )
                    }),
                    lease: crate::durable::lease_granted(&r.contexts),
                }
            }
            Command::READ => Reply::Read {
                data: range(ReadResponse::decode(msg)?.data),
            },
            Command::WRITE => Reply::Write {
                count: WriteResponse::decode(msg)?.count,
            },
            Command::CLOSE => Reply::Close,
            Command::FLUSH => Reply::Flush,
            Command::ECHO => Reply::Echo,
            Command::LOGOFF => Reply::Logoff,
            Command::OPLOCK_BREAK => Reply::LeaseBreakAck,
            Command::QUERY_INFO => Reply::QueryInfo {
                buffer: range(QueryInfoResponse::decode(msg)?.buffer),
            },
            Command::QUERY_DIRECTORY => Reply::QueryDirectory {
                buffer: range(QueryDirectoryResponse::decode(msg)?.buffer),
            },
            other => {
                return Err(ClientError::Malformed(format!(
                    "unexpected {other:?} response"
                )))
            }
        })
    }

    // ---- handshake ----

    fn handshake_error(hdr: &Header) -> ClientError {
        ClientError::Handshake(SmbError {
            status: hdr.status,
            command: hdr.command,
            message_id: hdr.message_id,
        })
    }

    fn send_negotiate(&mut self) {
        let offers_311 = self.opts.dialects.contains(&Dialect::SMB3_1_1);
        let mut contexts = Vec::new();
        if offers_311 {
            let salt: [u8; 32] = self.random_bytes();
            contexts.push(NegotiateContext::PreauthIntegrity {
                hash_algorithms: vec![HashAlgorithm::SHA_512],
                salt: salt.to_vec(),
            });
            if self.opts.encrypt {
                contexts.push(NegotiateContext::Encryption {
                    ciphers: vec![
                        CipherId::AES_128_GCM,
                        CipherId::AES_128_CCM,
                        CipherId::AES_256_GCM,
                        CipherId::AES_256_CCM,
                    ],
                });
            }
            contexts.push(NegotiateContext::Signing {
                algorithms: vec![
                    SigningAlgorithm::AES_GMAC,
                    SigningAlgorithm::AES_CMAC,
                    SigningAlgorithm::HMAC_SHA256,
                ],
            });
            contexts.extend(compress::offer(&self.opts.compression));
            if self.opts.transport_security {
                contexts.push(NegotiateContext::Transport {
                    flags: TransportCapabilityFlags::ACCEPT_TRANSPORT_LEVEL_SECURITY,
                });
            }
        }
        let mut security_mode = SecurityMode::SIGNING_ENABLED;
        if self.opts.sign {
            security_mode.insert(SecurityMode::SIGNING_REQUIRED);
        }
        // Directory leasing is offered (as Windows does); a directory lease
        // is asked for only through `create_leased`.
        let mut capabilities =
            Capabilities::LARGE_MTU | Capabilities::MULTI_CHANNEL | Capabilities::DIRECTORY_LEASING;
        if self.opts.encrypt || self.binding.as_ref().is_some_and(|b| b.cipher.is_some()) {
            capabilities.insert(Capabilities::ENCRYPTION);
        }
        let req = NegotiateRequest {
            security_mode,
            capabilities,
            client_guid: self.client_guid,
            client_start_time: 0,
            dialects: self.opts.dialects.clone(),
            contexts,
        };
        // The first request of a connection always has its one credit.
        if let Ok((_, msg)) = self.send(INTERNAL_TAG, Command::NEGOTIATE, 1, |o| req.encode(o)) {
            if offers_311 {
                let mut p = PreauthHash::zero();
                p.update(&self.out[msg]);
                self.preauth = Some(p);
            }
        }
    }

    fn negotiated(&mut self, hdr: &Header, msg: &[u8]) -> Result<(), ClientError> {
        if hdr.status != NtStatus::SUCCESS {
            return Err(Self::handshake_error(hdr));
        }
        let resp = NegotiateResponse::decode(msg)?;
        if !self.opts.dialects.contains(&resp.dialect) {
            return Err(ClientError::Unsupported(format!(
                "server chose dialect {:?}, not offered",
                resp.dialect
            )));
        }
        let d = resp.dialect;
        self.dialect = Some(d);
        self.large_mtu =
            d != Dialect::SMB2_0_2 && resp.capabilities.contains(Capabilities::LARGE_MTU);
        self.max_read = resp.max_read_size.max(65536);
        self.max_write = resp.max_write_size.max(65536);
        self.max_transact = resp.max_transact_size.max(65536);
        if d == Dialect::SMB2_0_2 {
            self.max_read = self.max_read.min(65536);
            self.max_write = self.max_write.min(65536);
            self.max_transact = self.max_transact.min(65536);
        }
        self.server_requires_signing = resp.security_mode.contains(SecurityMode::SIGNING_REQUIRED);
        if d == Dialect::SMB3_1_1 {
            let mut preauth_ok = false;
            for c in &resp.contexts {
                match c {
                    NegotiateContext::PreauthIntegrity {
                        hash_algorithms, ..
                    } => preauth_ok = hash_algorithms.as_slice() == [HashAlgorithm::SHA_512],
                    NegotiateContext::Encryption { ciphers } => {
                        self.cipher = ciphers.first().and_then(|c| Cipher::from_id(c.0));
                    }
                    NegotiateContext::Signing { algorithms } => {
                        self.signing_alg_311 = algorithms.first().copied();
                    }
                    NegotiateContext::Compression { flags, algorithms } => {
                        self.zip
                            .agreed(&self.opts.compression, *flags, algorithms)?;
                    }
                    NegotiateContext::Transport { flags } => {
                        self.transport_security = self.opts.transport_security
                            && flags.contains(
                                TransportCapabilityFlags::ACCEPT_TRANSPORT_LEVEL_SECURITY,
                            );
                    }
                    _ => {}
                }
            }
            if !preauth_ok {
                return Err(ClientError::Unsupported(
                    "3.1.1 without SHA-512 preauth integrity".into(),
                ));
            }
            match self.preauth.as_mut() {
                Some(p) => p.update(msg),
                None => return Err(ClientError::Malformed("no preauth hash".into())),
            }
        } else {
            self.preauth = None;
            if d.is_smb3() && resp.capabilities.contains(Capabilities::ENCRYPTION) {
                self.cipher = Some(Cipher::Aes128Ccm);
            }
        }
        if let Some(b) = &self.binding {
            if b.dialect != d {
                return Err(ClientError::Unsupported(format!(
                    "the channel negotiated {d:?}, the session is {:?}",
                    b.dialect
                )));
            }
            // A channel encrypts with the session's cipher and keys.
            self.cipher = b.cipher;
        }
        if self.opts.encrypt && self.cipher.is_none() {
            return Err(ClientError::Unsupported(format!(
                "encryption requested but dialect {d:?} negotiated no cipher"
            )));
        }
        self.phase = Phase::SessionSetup;
        self.auth = Some(match (&self.opts.relay, &self.opts.kerberos) {
            (Some(relay), _) => ClientAuth::relayed(relay.clone()),
            (None, Some(ticket)) => ClientAuth::kerberos(ticket.clone()),
            (None, None) => {
                ClientAuth::new(&self.opts.user, &self.opts.domain, &self.opts.password)
            }
        });
        self.session_step_send(None)
    }

    fn session_step_send(&mut self, server_token: Option<&[u8]>) -> Result<(), ClientError> {
        let rand: [u8; 24] = self.random_bytes();
        let now = self.opts.now_filetime;
        let auth = self.auth.as_mut().ok_or(ClientError::NotReady)?;
        let Some(token) = auth
            .step(server_token, rand, now)
            .map_err(ClientError::Auth)?
        else {
            return Err(ClientError::Malformed(
                "authentication finished before the server accepted".into(),
            ));
        };
        let mut security_mode = SecurityMode::SIGNING_ENABLED;
        if self.opts.sign {
            security_mode.insert(SecurityMode::SIGNING_REQUIRED);
        }
        let flags = if self.binding.is_some() {
            SessionSetupFlags::BINDING
        } else {
            SessionSetupFlags::empty()
        };
        if let Some(b) = &self.binding {
            self.session_id = b.session_id;
        }
        let req = SessionSetupRequest {
            flags,
            security_mode,
            capabilities: Capabilities::empty(),
            channel: 0,
            previous_session_id: 0,
            security_buffer: &token,
        };
        let (_, msg) = self.send(INTERNAL_TAG, Command::SESSION_SETUP, 1, |o| req.encode(o))?;
        if self.dialect == Some(Dialect::SMB3_1_1) {
            if self.session_preauth.is_none() {
                self.session_preauth = self.preauth.clone();
            }
            if let Some(p) = self.session_preauth.as_mut() {
                p.update(&self.out[msg]);
            }
        }
        Ok(())
    }

    fn session_step(&mut self, hdr: &Header, msg: &[u8]) -> Result<(), ClientError> {
        if hdr.status != NtStatus::MORE_PROCESSING_REQUIRED {
            return Err(Self::handshake_error(hdr));
        }
        self.session_id = hdr.session_id;
        if let Some(p) = self.session_preauth.as_mut() {
            p.update(msg);
        }
        let resp = SessionSetupResponse::decode(msg)?;
        self.session_step_send(Some(resp.security_buffer))
    }

    fn session_done(&mut self, hdr: &Header, msg: &mut [u8]) -> Result<(), ClientError> {
        self.session_id = hdr.session_id;
        let resp = SessionSetupResponse::decode(msg)?;
        let dialect = self.dialect.ok_or(ClientError::NotReady)?;
        let mut auth = self.auth.take().ok_or(ClientError::NotReady)?;
        // Checks the server's mechListMIC.
        auth.step(Some(resp.security_buffer), [0; 24], self.opts.now_filetime)
            .map_err(ClientError::Auth)?;
        let anonymous_or_guest = resp
            .session_flags
            .intersects(SessionFlags::IS_GUEST | SessionFlags::IS_NULL);
        if let Some(key) = auth.session_key().filter(|_| !anonymous_or_guest) {
            let preauth = self.session_preauth.take().map(|p| p.0);
            let cipher_len = self.cipher.map_or(16, Cipher::key_len);
            let k = keys::derive(dialect.0, &key, preauth.as_ref(), cipher_len);
            let alg = match dialect {
                Dialect::SMB2_0_2 | Dialect::SMB2_1 => SignAlg::HmacSha256,
                Dialect::SMB3_1_1 => match self.signing_alg_311 {
                    Some(SigningAlgorithm::AES_GMAC) => SignAlg::AesGmac,
                    Some(SigningAlgorithm::HMAC_SHA256) => SignAlg::HmacSha256,
                    _ => SignAlg::AesCmac,
                },
                _ => SignAlg::AesCmac,
            };
            self.signing_key = Some(SigningKey::new(alg, k.signing));
            if let Some(cipher) = self.cipher {
                // The client encrypts with the key the server decrypts with.
                self.encrypt_key = CipherKey::new(cipher, &k.decrypt_client_to_server).ok();
                self.decrypt_key = CipherKey::new(cipher, &k.encrypt_server_to_client).ok();
                self.cipher_keys = Some((
                    k.decrypt_client_to_server.clone(),
                    k.encrypt_server_to_client.clone(),
                ));
            }
        } else if self.opts.sign || self.opts.encrypt {
            return Err(ClientError::Unsupported(
                "signing or encryption requested but the session is guest or anonymous".into(),
            ));
        }
        // [MS-SMB2] 3.2.5.3.1: the final 3.1.1 response must be signed.
        let must_sign = self.signing_key.is_some()
            && (dialect == Dialect::SMB3_1_1 || self.opts.sign || self.server_requires_signing);
        let server_wants_encryption = resp.session_flags.contains(SessionFlags::ENCRYPT_DATA);
        self.check_signature(hdr, msg, must_sign)?;
        if (self.opts.encrypt || server_wants_encryption) && self.encrypt_key.is_some() {
            self.encrypting = true;
        }
        self.phase = Phase::TreeConnect;
        let req = TreeConnectRequest {
            flags: TreeConnectFlags::empty(),
            path: self.opts.share_unc.clone(),
            extension: None,
        };
        self.send(INTERNAL_TAG, Command::TREE_CONNECT, 1, |o| req.encode(o))?;
        Ok(())
    }

    /// [MS-SMB2] 3.2.5.3.3: the binding succeeded. The channel's signing key
    /// comes from this exchange's session key (3.1.1: and its preauth hash);
    /// the final response must be signed with it. The channel then works on
    /// the session's tree with the session's cipher keys.
    fn binding_done(
        &mut self,
        hdr: &Header,
        msg: &mut [u8],
        events: &mut Vec<Event>,
    ) -> Result<(), ClientError> {
        let b = self.binding.clone().ok_or(ClientError::NotReady)?;
        let resp = SessionSetupResponse::decode(msg)?;
        if resp.session_flags.contains(SessionFlags::IS_GUEST) {
            return Err(ClientError::Unsupported(
                "the server bound the channel as guest".into(),
            ));
        }
        let mut auth = self.auth.take().ok_or(ClientError::NotReady)?;
        auth.step(Some(resp.security_buffer), [0; 24], self.opts.now_filetime)
            .map_err(ClientError::Auth)?;
        let key = auth
            .session_key()
            .ok_or_else(|| ClientError::Unsupported("binding without a session key".into()))?;
        let preauth = self.session_preauth.take().map(|p| p.0);
        let k = keys::derive(b.dialect.0, &key, preauth.as_ref(), 16);
        let alg = b.session_signing_key.algorithm();
        self.signing_key = Some(SigningKey::new(alg, k.signing));
        self.check_signature(hdr, msg, true)?;
        if let (Some(cipher), Some((c2s, s2c))) = (b.cipher, &b.cipher_keys) {
            self.encrypt_key = CipherKey::new(cipher, c2s).ok();
            self.decrypt_key = CipherKey::new(cipher, s2c).ok();
            self.cipher_keys = b.cipher_keys.clone();
        }
        self.encrypting = b.encrypting && self.encrypt_key.is_some();
        self.session_id = b.session_id;
        self.tree_id = b.tree_id;
        self.phase = Phase::Ready;
        events.push(Event::Ready);
        Ok(())
    }

    fn tree_connected(
        &mut self,
        hdr: &Header,
        msg: &[u8],
        events: &mut Vec<Event>,
    ) -> Result<(), ClientError> {
        if hdr.status != NtStatus::SUCCESS {
            return Err(Self::handshake_error(hdr));
        }
        let resp = TreeConnectResponse::decode(msg)?;
        self.tree_id = hdr.tree_id().unwrap_or(0);
        if resp.share_flags.contains(ShareFlags::ENCRYPT_DATA) && self.encrypt_key.is_some() {
            self.encrypting = true;
        }
        self.zip.share_compresses = resp.share_flags.contains(ShareFlags::COMPRESS_DATA);
        self.phase = Phase::Ready;
        events.push(Event::Ready);
        Ok(())
    }
}

/// Checks the signature where the message lies (one pass over one slice: a
/// gathered check would first copy a 1 MiB READ into scratch).
fn verify(key: &SigningKey, hdr: &Header, msg: &mut [u8]) -> bool {
    key.verify_in_place(
        msg,
        NonceInfo {
            message_id: hdr.message_id,
            server_to_client: true,
            cancel: false,
        },
    )
}

/// A CREATE of `name` sharing everything, as the bench and tests make them.
pub(crate) fn create_request(
    name: &str,
    access: u32,
    disposition: CreateDisposition,
    options: u32,
    oplock: OplockLevel,
    contexts: Vec<ringshare_wire::create::CreateContext<'static>>,
) -> CreateRequest<'static> {
    CreateRequest {
        security_flags: 0,
        requested_oplock_level: oplock,
        impersonation_level: ImpersonationLevel::IMPERSONATION,
        smb_create_flags: 0,
        desired_access: AccessMask(access),
        file_attributes: FileAttributes(0),
        share_access: ShareAccess(7),
        create_disposition: disposition,
        create_options: CreateOptions(options),
        name: name.to_string(),
        contexts,
    }
}
