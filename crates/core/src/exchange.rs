//! One exchange as a command sees it: the request ([`Req`]), its reply ([`Reply`]), what the
//! connection negotiated ([`Negotiated`]) and the connection's state a command works on
//! ([`ConnCore`]); finding the open a request names ([`handles`]); what compression was agreed
//! and whether a READ asks for it ([`compress`]).
//!
//! This module knows nothing of the connection driver (frames, compound chains, jobs, waits:
//! [`crate::conn`]) nor of any command ([`crate::cmd`]): the commands work on what is here, and
//! the driver, on top, builds it and dispatches to them.

use std::sync::Arc;

use ringshare_crypto::encrypt::{Cipher, CipherKey};
use ringshare_crypto::preauth::PreauthHash;
use ringshare_crypto::sign::{NonceInfo, SigningKey};
use ringshare_vfs::Node;
use ringshare_wire::consts::{Command, Dialect};
use ringshare_wire::header::Header;
use ringshare_wire::NtStatus;

use crate::idmap::IdMap;
use crate::io::{Entropy, Now};
use crate::lookup::DomainAnswer;
use crate::server::{lock, ServerState};
use crate::spare::SpareBufs;
use crate::state::{Channel, SessionRef};

pub(crate) mod compress;
pub(crate) mod handles;

/// What the connection negotiated.
#[derive(Debug, Clone)]
pub(crate) struct Negotiated {
    pub dialect: Dialect,
    pub client_guid: [u8; 16],
    pub client_capabilities: u32,
    pub client_security_mode: u16,
    pub server_security_mode: u16,
    pub server_capabilities: u32,
    pub client_dialects: Vec<u16>,
    /// 3.1.1: signing algorithm from the SIGNING_CAPABILITIES context.
    pub signing_algorithm: Option<u16>,
    /// SMB 3.x: the cipher sessions encrypt with, when the client can encrypt.
    pub cipher: Option<Cipher>,
    /// 3.1.1: what SMB2_COMPRESSION_CAPABILITIES agreed on (empty: none).
    pub compression: compress::Compression,
    /// Connection.AcceptTransportSecurity ([MS-SMB2] 3.3.5.4): over QUIC, the
    /// client offered SMB2_ACCEPT_TRANSPORT_LEVEL_SECURITY and the server
    /// agreed; no SMB encryption is asked for on this connection.
    pub transport_security: bool,
    /// 3.1.1: the client offered the SMB3 POSIX extensions and `smb3 unix
    /// extensions` is on in `[global]`: the server answered their context.
    pub posix: bool,
}

/// Connection-level state the command modules work on.
pub(crate) struct ConnCore {
    pub server: Arc<ServerState>,
    pub peer: String,
    /// TCP or QUIC ([`crate::Connection::set_transport`]).
    pub transport: crate::server::Transport,
    /// The peer's address, which log limits and the logon backoff go by.
    pub peer_ip: Option<std::net::IpAddr>,
    /// The member just run asks for its answer to wait until then ([`crate::backoff`]).
    pub hold_reply_until_ms: Option<u64>,
    /// The open the member just run named by its FileId ([`handles::find`]): the file a
    /// related member after it works on when this one made none ([MS-SMB2] 3.3.5.2.7.2).
    pub named_file: Option<(u64, u64)>,
    pub negotiated: Option<Negotiated>,
    /// True once an SMB2 NEGOTIATE answered with 0x02FF (the client must negotiate again).
    pub wildcard_sent: bool,
    /// 3.1.1: the connection's preauth hash (NEGOTIATE request + response).
    pub preauth: Option<PreauthHash>,
    /// This connection's channels, by SessionId ([MS-SMB2] Connection.SessionTable).
    pub sessions: IdMap<u64, Channel>,
    /// Server-wide id of this connection (its entry in Session.ChannelList).
    pub conn_id: u64,
    /// A session was authenticated on this connection (the handshake is over).
    pub authenticated: bool,
    /// A user (not a guest, not anonymous) logged on on this connection: only then
    /// are encrypted messages taken, an anonymous session's included, as Windows
    /// and Samba do ([MS-SMB2] Connection.ConstrainedConnection, reversed).
    pub user_logged_on: bool,
    pub entropy: Box<dyn Entropy>,
    pub now: Now,
    /// The driver can send READ data from a file without copying it
    /// ([`crate::io::Output::SendFile`]).
    pub send_file: bool,
    /// Small buffers reused for bodies, frame heads, request frames and
    /// small READs' data (crates/core/src/spare.rs).
    pub spare: SpareBufs,
    /// What the AAPL create context turned on ([`crate::fruit`]).
    pub aapl: crate::fruit::Aapl,
    /// The ring's request counters (`metrics listen`), when on.
    pub metrics: Option<Arc<crate::metrics::Metrics>>,
    /// The domain's answer for the SESSION_SETUP that asked it, while it runs again (or the id
    /// source's, for the request that asked it).
    pub domain_answer: Option<DomainAnswer>,
    /// What a command returning [`crate::cmd::ids::ASK_IDS`] asks the id source.
    pub ids_wanted: Option<crate::lookup::Lookup>,
    /// With a [`crate::lookup::Lookup::Home`] in `ids_wanted`: the tag of its question and the
    /// answers the request was given before, kept for it when it runs again
    /// ([`crate::cmd::Asked::Homes`]).
    pub home_kept: Option<(u64, crate::lookup::HomeAnswers)>,
    /// With a [`crate::lookup::Lookup::Fs`] in `ids_wanted`: the answer the request took in
    /// this run (a file's home's), kept for it when it runs again ([`crate::cmd::Asked::Fs`]).
    pub fs_kept: Option<DomainAnswer>,
    /// Questions to the cluster whose answer nobody waits for (the record of an open that
    /// closed before it was answered goes from the cluster's store; the closes of a logoff, a
    /// tree disconnect or a connection's end reach the homes of files homed elsewhere and
    /// remove persistent opens' records): asked as lookups after the request.
    pub cluster_posts: Vec<crate::lookup::Lookup>,
    /// The CREATE (its MessageId) parked on its file's home that was told to wait for breaks:
    /// run again, it goes async at once ([`crate::cmd::create::handle`]).
    pub create_waits: Option<u64>,
    /// CREATEs (MessageId, when they first met it) waiting for a local program to give up its
    /// kernel lease on their file ([`crate::cmd::create`]'s `lease_wait`).
    pub lease_waits: Vec<(u64, u64)>,
    /// This connection's quota handles (crate::cmd::quota).
    pub quota_handles: crate::quota::QuotaHandles,
}

impl ConnCore {
    /// What closes whose answers nobody waits for (a logoff, a tree disconnect, a connection's
    /// end: [`crate::opens::close_all`]) ask of the cluster: the calls that close opens of
    /// files homed elsewhere, the removal of persistent opens' records. Asked after the
    /// request ([`ConnCore::cluster_posts`]).
    pub(crate) fn post_closes(&mut self, asks: Vec<crate::lookup::Lookup>) {
        self.cluster_posts.extend(asks);
    }

    pub fn dialect(&self) -> Option<Dialect> {
        self.negotiated.as_ref().map(|n| n.dialect)
    }

    /// The transport encrypts and the client trusts it (QUIC with
    /// SMB2_ACCEPT_TRANSPORT_LEVEL_SECURITY agreed): SMB encryption is not
    /// asked for, nor unencrypted requests refused, on this connection.
    pub fn transport_secure(&self) -> bool {
        self.negotiated
            .as_ref()
            .is_some_and(|n| n.transport_security)
    }

    /// An `smb encrypt` policy as it applies on this connection
    /// ([`EncryptPolicy::over_secure_transport`]).
    pub fn encrypt_policy(&self, p: crate::server::EncryptPolicy) -> crate::server::EncryptPolicy {
        p.over_secure_transport(self.transport_secure())
    }

    /// The session a request names, when this connection is a bound channel
    /// of it (a binding in progress does not count). The caller locks it.
    pub fn session(&self, id: u64) -> Option<SessionRef> {
        self.sessions
            .get(&id)
            .filter(|c| !c.binding)
            .map(|c| Arc::clone(&c.session))
    }

    /// [`ConnCore::session`] as a request's error: USER_SESSION_DELETED.
    pub fn session_or_deleted(&self, id: u64) -> Result<SessionRef, NtStatus> {
        self.session(id).ok_or(NtStatus::USER_SESSION_DELETED)
    }

    pub fn random_u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        self.entropy.fill(&mut b);
        u64::from_le_bytes(b)
    }

    pub fn random_bytes<const N: usize>(&mut self) -> [u8; N] {
        let mut b = [0u8; N];
        self.entropy.fill(&mut b);
        b
    }
}

impl ConnCore {
    /// [MS-SMB2] 3.3.4.1.1: the key a response is signed with: the session
    /// requires signing or the request was signed (`forced`: sign with that
    /// session's key regardless, e.g. the final SESSION_SETUP response).
    pub(crate) fn reply_signing_key(
        &self,
        req_hdr: &Header,
        session_id: u64,
        forced: Option<u64>,
        status: NtStatus,
    ) -> Option<&SigningKey> {
        if let Some(sid) = forced {
            return self.sessions.get(&sid).and_then(|c| c.signing_key.as_ref());
        }
        if status == NtStatus::MORE_PROCESSING_REQUIRED {
            return None;
        }
        let ch = self.sessions.get(&session_id).filter(|c| !c.binding)?;
        let sign = {
            let s = lock(&ch.session);
            s.is_valid() && (s.signing_required || req_hdr.is_signed())
        };
        // Channel.SigningKey ([MS-SMB2] 3.3.4.1.1).
        ch.signing_key.as_ref().filter(|_| sign)
    }
}

/// One request as a command module sees it.
pub(crate) struct Req<'a> {
    pub hdr: Header,
    /// The whole message: header and body (sliced to NextCommand in a compound).
    pub msg: &'a [u8],
    /// Where `msg` starts in the received frame (after the transform header
    /// of a decrypted frame, at the NextCommand offset in a compound).
    pub msg_offset: usize,
    /// The WRITE's payload is not in `msg`: the driver holds these many bytes
    /// of it ([`crate::Connection::receive_detached`]).
    pub detached: Option<usize>,
    /// Session and tree after compound-related substitution.
    pub session_id: u64,
    pub tree_id: u32,
    /// A related compound's FileId from the previous command, if it made one.
    pub related_file_id: Option<(u64, u64)>,
    /// True when this request is the only one in its frame (the frame may be
    /// moved into a WRITE without a copy).
    pub sole: bool,
    /// The request arrived inside a TRANSFORM_HEADER (not signed, but
    /// authenticated by the cipher).
    pub encrypted: bool,
}

/// File data a reply carries by reference: node, offset, length.
pub(crate) type FileRange = (Arc<dyn Node>, u64, usize);

/// The reply of one command.
pub(crate) struct Reply {
    pub status: NtStatus,
    pub body: Vec<u8>,
    /// File data sent after the body without copying (READ).
    pub data: Option<Vec<u8>>,
    /// Bytes at the front of `data` that are room for the headers, not data:
    /// a reply alone in its frame is then laid out and signed in place. (A `u32` beside
    /// `status`: a `Reply` of 128 bytes is moved with inline stores, one of 136 by a
    /// `memcpy` call, and every reply is moved several times on its way out.)
    pub data_headroom: u32,
    /// File data the driver sends straight from the file (an unsigned READ
    /// that is alone in its frame): node, offset, length.
    pub file: Option<FileRange>,
    /// A FileId this command produced, for related compounds (CREATE).
    pub file_id: Option<(u64, u64)>,
    /// What only the session, negotiate, logoff and tree commands set (kept
    /// out of line: every reply is moved several times on its way out).
    pub rare: Option<Box<RareReply>>,
    /// A READ's data that its client asked to get compressed
    /// ([`compress::read_asks`]): compressed when the reply is alone in its frame
    /// and compressing pays; the open learns whether it did.
    pub compress: Option<Box<compress::CompressAsk>>,
}

impl Reply {
    pub fn ok(body: Vec<u8>) -> Reply {
        Reply::with_status(NtStatus::SUCCESS, body)
    }

    pub fn with_status(status: NtStatus, body: Vec<u8>) -> Reply {
        Reply {
            status,
            body,
            data: None,
            data_headroom: 0,
            file: None,
            file_id: None,
            rare: None,
            compress: None,
        }
    }

    /// The reply's rare fields, made on first use.
    pub fn rare(&mut self) -> &mut RareReply {
        self.rare.get_or_insert_with(Box::default)
    }

    /// The connection closes after this reply.
    pub fn disconnects(&self) -> bool {
        self.rare.as_ref().is_some_and(|r| r.disconnect)
    }
}

/// The fields of a [`Reply`] that few commands set.
#[derive(Default)]
pub(crate) struct RareReply {
    /// 3.1.1 SESSION_SETUP: add the response to this session's preauth hash.
    pub preauth_session: Option<u64>,
    /// 3.1.1 NEGOTIATE: add the response to the connection's preauth hash.
    pub preauth_connection: bool,
    /// Sign the response with this session's key even if it is not yet valid
    /// (the final SESSION_SETUP response).
    pub sign_with_session: Option<u64>,
    /// Seal with this key and nonce counter (LOGOFF of an encrypted session: the
    /// session is gone by the time the frame is encrypted).
    pub seal: Option<(Arc<CipherKey>, u64)>,
    /// Sign with this key (LOGOFF: the session is gone by the time the reply is built).
    pub sign_key: Option<SigningKey>,
    /// SESSION_SETUP creates the session; the header must carry the new id.
    pub session_id: Option<u64>,
    /// TREE_CONNECT creates the tree; the header must carry the new id.
    pub tree_id: Option<u32>,
    /// Close the connection after this reply (e.g. a failed negotiate).
    pub disconnect: bool,
}

/// The request's signature verifies with `key` ([MS-SMB2] 3.3.5.2.4).
pub(crate) fn signature_ok(key: &SigningKey, req: &Req<'_>) -> bool {
    let (Some(head), Some(sig), Some(tail)) =
        (req.msg.get(..48), req.msg.get(48..64), req.msg.get(64..))
    else {
        return false;
    };
    let mut s = [0u8; 16];
    s.copy_from_slice(sig);
    let nonce = NonceInfo {
        message_id: req.hdr.message_id,
        server_to_client: false,
        cancel: req.hdr.command == Command::CANCEL,
    };
    key.verify(&[head, &[0u8; 16], tail], nonce, &s)
}

#[cfg(test)]
mod tests {
    /// A reply is moved several times between its command and its frame, and an output twice
    /// more (queued, then taken by the driver). At 128 bytes or less a move is a few inline
    /// stores; past it, a `memcpy` call (the x86-64 baseline's inline limit): 136-byte replies
    /// and 152-byte outputs cost an ECHO 59 instructions more in the core (bench/instructions).
    #[test]
    fn a_reply_and_an_output_are_moved_without_a_memcpy_call() {
        assert!(std::mem::size_of::<super::Reply>() <= 128);
        assert!(std::mem::size_of::<crate::io::Output>() <= 128);
    }
}
