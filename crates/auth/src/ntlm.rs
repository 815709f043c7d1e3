//! NTLMSSP ([MS-NLMP]): the server side of NTLMv2 authentication, a client for ringshare's own
//! tools, and the NTLMSSP signing keys used for the SPNEGO mechListMIC.
//!
//! Only NTLMv2 is accepted; NTLMv1 and LM responses are refused. Every length and offset in a
//! message is checked before it is followed; messages are small and never allocate by a length
//! field beyond the message itself.

use hmac::{Hmac, KeyInit, Mac};
use md5::{Digest, Md5};

use crate::rc4::{rc4_16, Rc4};
use crate::{AuthError, UserLookup};

/// NTLMSSP negotiate flags ([MS-NLMP] 2.2.2.5).
pub mod flags {
    /// A: Unicode strings.
    pub const UNICODE: u32 = 0x0000_0001;
    /// B: OEM strings.
    pub const OEM: u32 = 0x0000_0002;
    /// C: TargetName requested.
    pub const REQUEST_TARGET: u32 = 0x0000_0004;
    /// D: message integrity.
    pub const SIGN: u32 = 0x0000_0010;
    /// E: message confidentiality.
    pub const SEAL: u32 = 0x0000_0020;
    /// G: LAN Manager session key (refused).
    pub const LM_KEY: u32 = 0x0000_0080;
    /// H: NTLM authentication.
    pub const NTLM: u32 = 0x0000_0200;
    /// J: anonymous connection.
    pub const ANONYMOUS: u32 = 0x0000_0800;
    /// M: dummy signatures allowed before signing is set up.
    pub const ALWAYS_SIGN: u32 = 0x0000_8000;
    /// N: TargetName is a domain name.
    pub const TARGET_TYPE_DOMAIN: u32 = 0x0001_0000;
    /// O: TargetName is a server name.
    pub const TARGET_TYPE_SERVER: u32 = 0x0002_0000;
    /// P: NTLM2 session security (extended session security).
    pub const EXTENDED_SESSIONSECURITY: u32 = 0x0008_0000;
    /// S: TargetInfo present.
    pub const TARGET_INFO: u32 = 0x0080_0000;
    /// T: Version field present.
    pub const VERSION: u32 = 0x0200_0000;
    /// U: 128-bit session key.
    pub const NEGOTIATE_128: u32 = 0x2000_0000;
    /// V: explicit key exchange.
    pub const KEY_EXCH: u32 = 0x4000_0000;
    /// W: 56-bit encryption.
    pub const NEGOTIATE_56: u32 = 0x8000_0000;
}
use flags::*;

const SIGNATURE: &[u8; 8] = b"NTLMSSP\0";
const MSG_NEGOTIATE: u32 = 1;
const MSG_CHALLENGE: u32 = 2;
const MSG_AUTHENTICATE: u32 = 3;

/// AV_PAIR ids ([MS-NLMP] 2.2.2.1).
const AV_EOL: u16 = 0;
const AV_NB_COMPUTER: u16 = 1;
const AV_NB_DOMAIN: u16 = 2;
const AV_DNS_COMPUTER: u16 = 3;
const AV_DNS_DOMAIN: u16 = 4;
const AV_FLAGS: u16 = 6;
const AV_TIMESTAMP: u16 = 7;
/// MsvAvFlags bit: the AUTHENTICATE message carries a MIC.
const AV_FLAG_MIC_PRESENT: u32 = 0x2;

/// Offset of the MIC field in an AUTHENTICATE message that has one.
const MIC_OFFSET: usize = 72;
/// Size of an AUTHENTICATE header with Version and MIC.
const AUTH_HEADER_LEN: usize = 88;
/// The size past which no NTLMSSP message is accepted.
pub const NTLM_MESSAGE_SIZE_MAX: usize = 16 * 1024;

/// The Version field we send: Windows 10.0 build 20348, NTLMSSP revision 15.
const OUR_VERSION: [u8; 8] = [10, 0, 0x7C, 0x4F, 0, 0, 0, 0x0F];

/// Flags the server answers when the client offers them.
const SERVER_ECHO_FLAGS: u32 = UNICODE
    | REQUEST_TARGET
    | SIGN
    | SEAL
    | NTLM
    | ALWAYS_SIGN
    | EXTENDED_SESSIONSECURITY
    | VERSION
    | NEGOTIATE_128
    | KEY_EXCH
    | NEGOTIATE_56;

// ---------------------------------------------------------------------------------------------
// Small bounds-checked helpers.

fn le16(b: &[u8], off: usize) -> Option<u16> {
    let s = b.get(off..off.checked_add(2)?)?;
    Some(u16::from_le_bytes([s[0], s[1]]))
}

fn le32(b: &[u8], off: usize) -> Option<u32> {
    let s = b.get(off..off.checked_add(4)?)?;
    Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn le64(b: &[u8], off: usize) -> Option<u64> {
    let s = b.get(off..off.checked_add(8)?)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Some(u64::from_le_bytes(a))
}

/// A Len/MaxLen/Offset field at `at`, followed into `msg`.
fn field<'a>(msg: &'a [u8], at: usize, what: &'static str) -> Result<(&'a [u8], usize), AuthError> {
    let len = le16(msg, at).ok_or(AuthError::Malformed(what))? as usize;
    let off = le32(msg, at + 4).ok_or(AuthError::Malformed(what))? as usize;
    if len == 0 {
        return Ok((&[], off));
    }
    let end = off.checked_add(len).ok_or(AuthError::Malformed(what))?;
    let data = msg.get(off..end).ok_or(AuthError::Malformed(what))?;
    Ok((data, off))
}

fn check_header(msg: &[u8], kind: u32, min: usize) -> Result<(), AuthError> {
    if msg.len() > NTLM_MESSAGE_SIZE_MAX {
        return Err(AuthError::Malformed("NTLMSSP message too large"));
    }
    if msg.len() < min || &msg[..8] != SIGNATURE {
        return Err(AuthError::Malformed("not an NTLMSSP message"));
    }
    if le32(msg, 8) != Some(kind) {
        return Err(AuthError::Malformed("unexpected NTLMSSP message type"));
    }
    Ok(())
}

fn utf16le(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(u16::to_le_bytes).collect()
}

fn decode_string(b: &[u8], unicode: bool, what: &'static str) -> Result<String, AuthError> {
    if unicode {
        if !b.len().is_multiple_of(2) {
            return Err(AuthError::Malformed(what));
        }
        let units: Vec<u16> = b
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        String::from_utf16(&units).map_err(|_| AuthError::Malformed(what))
    } else {
        // OEM code page: accept ASCII only.
        if !b.is_ascii() {
            return Err(AuthError::Malformed(what));
        }
        Ok(b.iter().map(|&c| c as char).collect())
    }
}

/// Upper-case the way Windows does for NTOWFv2: one UTF-16 code unit to one, never expanding.
fn upcase(s: &str) -> String {
    s.chars()
        .map(|c| {
            let mut up = c.to_uppercase();
            match (up.next(), up.next()) {
                (Some(u), None) => u,
                _ => c,
            }
        })
        .collect()
}

pub(crate) fn hmac_md5(key: &[u8], parts: &[&[u8]]) -> [u8; 16] {
    let mut mac = <Hmac<Md5> as KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
    for p in parts {
        mac.update(p);
    }
    mac.finalize().into_bytes().into()
}

pub(crate) fn md5(parts: &[&[u8]]) -> [u8; 16] {
    let mut h = Md5::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

/// NTOWFv2 ([MS-NLMP] 3.3.2): HMAC-MD5(NT hash, UNICODE(Uppercase(user) || domain)).
pub fn ntowf_v2(nt_hash: &[u8; 16], user: &str, domain: &str) -> [u8; 16] {
    let mut ud = upcase(user);
    ud.push_str(domain);
    hmac_md5(nt_hash, &[&utf16le(&ud)])
}

fn push_av(out: &mut Vec<u8>, id: u16, value: &[u8]) {
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&(value.len() as u16).to_le_bytes());
    out.extend_from_slice(value);
}

/// Iterate AV pairs; stops at MsvAvEOL. Fails on truncation.
fn av_pairs(mut b: &[u8]) -> Result<Vec<(u16, &[u8])>, AuthError> {
    let mut out = Vec::new();
    loop {
        let id = le16(b, 0).ok_or(AuthError::Malformed("AV pair list truncated"))?;
        let len = le16(b, 2).ok_or(AuthError::Malformed("AV pair list truncated"))? as usize;
        let value = b
            .get(4..4 + len)
            .ok_or(AuthError::Malformed("AV pair past end"))?;
        if id == AV_EOL {
            return Ok(out);
        }
        if out.len() >= 64 {
            return Err(AuthError::Malformed("too many AV pairs"));
        }
        out.push((id, value));
        b = &b[4 + len..];
    }
}

/// Where a payload is placed while building a message.
struct Builder {
    header: Vec<u8>,
    payload: Vec<u8>,
    header_len: usize,
}

impl Builder {
    fn new(kind: u32, header_len: usize) -> Self {
        let mut header = Vec::with_capacity(header_len);
        header.extend_from_slice(SIGNATURE);
        header.extend_from_slice(&kind.to_le_bytes());
        Builder {
            header,
            payload: Vec::new(),
            header_len,
        }
    }
    fn u32(&mut self, v: u32) {
        self.header.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, v: &[u8]) {
        self.header.extend_from_slice(v);
    }
    fn field(&mut self, data: &[u8]) {
        let off = if data.is_empty() {
            self.header_len
        } else {
            self.header_len + self.payload.len()
        };
        self.header
            .extend_from_slice(&(data.len() as u16).to_le_bytes());
        self.header
            .extend_from_slice(&(data.len() as u16).to_le_bytes());
        self.header.extend_from_slice(&(off as u32).to_le_bytes());
        self.payload.extend_from_slice(data);
    }
    fn finish(mut self) -> Vec<u8> {
        debug_assert_eq!(self.header.len(), self.header_len);
        self.header.append(&mut self.payload);
        self.header
    }
}

// ---------------------------------------------------------------------------------------------
// Session security: the NTLMSSP signing keys ([MS-NLMP] 3.4.4, 3.4.5).

/// NTLMSSP message signing state for one authenticated context, as used for the SPNEGO
/// mechListMIC. Signatures always use extended session security (the only kind NTLMv2 clients
/// negotiate); with KEY_EXCH the checksum is sealed with the direction's RC4 handle.
#[derive(Clone)]
pub struct SessionSecurity {
    key_exch: bool,
    client_sign: [u8; 16],
    server_sign: [u8; 16],
    client_seal: Rc4,
    server_seal: Rc4,
    /// The sealing keys, for [`SessionSecurity::reset_seal`].
    seal_keys: [[u8; 16]; 2],
    client_seq: u32,
    server_seq: u32,
}

impl SessionSecurity {
    /// Keys from the exported session key and the negotiated flags.
    pub fn new(exported_session_key: &[u8; 16], negotiated: u32) -> Self {
        let k = exported_session_key;
        let sign = |magic: &[u8]| md5(&[k, magic]);
        let seal_len = if negotiated & NEGOTIATE_128 != 0 {
            16
        } else if negotiated & NEGOTIATE_56 != 0 {
            7
        } else {
            5
        };
        let seal = |magic: &[u8]| md5(&[&k[..seal_len], magic]);
        let seal_keys = [
            seal(b"session key to client-to-server sealing key magic constant\0"),
            seal(b"session key to server-to-client sealing key magic constant\0"),
        ];
        SessionSecurity {
            key_exch: negotiated & KEY_EXCH != 0,
            client_sign: sign(b"session key to client-to-server signing key magic constant\0"),
            server_sign: sign(b"session key to server-to-client signing key magic constant\0"),
            client_seal: Rc4::new(&seal_keys[0]),
            server_seal: Rc4::new(&seal_keys[1]),
            seal_keys,
            client_seq: 0,
            server_seq: 0,
        }
    }

    fn mac(sign_key: &[u8; 16], seal: &mut Rc4, key_exch: bool, seq: u32, msg: &[u8]) -> [u8; 16] {
        let digest = hmac_md5(sign_key, &[&seq.to_le_bytes(), msg]);
        let mut checksum = [0u8; 8];
        checksum.copy_from_slice(&digest[..8]);
        if key_exch {
            seal.apply(&mut checksum);
        }
        let mut out = [0u8; 16];
        out[..4].copy_from_slice(&1u32.to_le_bytes());
        out[4..12].copy_from_slice(&checksum);
        out[12..].copy_from_slice(&seq.to_le_bytes());
        out
    }

    /// Signature of a client-to-server message (the client signs, the server verifies).
    pub fn sign_client_to_server(&mut self, msg: &[u8]) -> [u8; 16] {
        let seq = self.client_seq;
        self.client_seq = seq.wrapping_add(1);
        Self::mac(
            &self.client_sign,
            &mut self.client_seal,
            self.key_exch,
            seq,
            msg,
        )
    }

    /// Signature of a server-to-client message.
    pub fn sign_server_to_client(&mut self, msg: &[u8]) -> [u8; 16] {
        let seq = self.server_seq;
        self.server_seq = seq.wrapping_add(1);
        Self::mac(
            &self.server_sign,
            &mut self.server_seal,
            self.key_exch,
            seq,
            msg,
        )
    }

    /// Both directions' RC4 streams start again from their keys; the sequence numbers go on.
    /// What SPNEGO does once its mechListMICs are exchanged (Samba's `ntlmssp_sign_reset`
    /// without resetting the sequence numbers), before DCE/RPC protects PDUs with the keys.
    pub fn reset_seal(&mut self) {
        self.client_seal = Rc4::new(&self.seal_keys[0]);
        self.server_seal = Rc4::new(&self.seal_keys[1]);
    }

    /// Seals (or unseals: RC4 is its own inverse) client-to-server `data` in place. [MS-NLMP]
    /// 3.4.3 SEAL: the data takes the direction's RC4 stream first, then the signature of the
    /// plaintext (`verify_client_to_server`, `sign_client_to_server`) continues it.
    pub fn seal_client_to_server(&mut self, data: &mut [u8]) {
        self.client_seal.apply(data);
    }

    /// Seals (or unseals) server-to-client `data` in place, before its signature is made.
    pub fn seal_server_to_client(&mut self, data: &mut [u8]) {
        self.server_seal.apply(data);
    }

    /// Check a client-to-server signature (constant-time).
    pub fn verify_client_to_server(&mut self, msg: &[u8], signature: &[u8]) -> bool {
        let want = self.sign_client_to_server(msg);
        ringshare_crypto::ct_eq(&want, signature)
    }

    /// Check a server-to-client signature (constant-time).
    pub fn verify_server_to_client(&mut self, msg: &[u8], signature: &[u8]) -> bool {
        let want = self.sign_server_to_client(msg);
        ringshare_crypto::ct_eq(&want, signature)
    }
}

// ---------------------------------------------------------------------------------------------
// Server.

/// The names the server announces in its CHALLENGE message.
#[derive(Debug, Clone, Default)]
pub struct ServerConfig {
    /// MsvAvNbDomainName (for a standalone server, the workgroup).
    pub netbios_domain: String,
    /// MsvAvNbComputerName and the TargetName.
    pub netbios_computer: String,
    /// MsvAvDnsDomainName.
    pub dns_domain: String,
    /// MsvAvDnsComputerName.
    pub dns_computer: String,
}

/// Who authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthKind {
    /// A named account whose password was verified.
    User,
    /// The anonymous (null) session.
    Anonymous,
}

/// The outcome of a successful AUTHENTICATE.
#[derive(Clone)]
pub struct AuthResult {
    /// User or anonymous.
    pub kind: AuthKind,
    /// The user name as the client sent it (empty when anonymous).
    pub user: String,
    /// The domain name as the client sent it.
    pub domain: String,
    /// The client's workstation name.
    pub workstation: String,
    /// The GSS session key at its full length: NTLM's exported session key (16 bytes), or a
    /// Kerberos acceptor subkey (32 bytes for AES-256). SMB signing takes its first 16 bytes;
    /// AES-256 ciphers derive from all of it ([MS-SMB2] 3.3.5.5.3).
    pub session_key: Vec<u8>,
    /// For a Kerberos logon: the ticket's client, its end and PAC.
    pub kerberos: Option<Box<crate::krb5::acceptor::Accepted>>,
    /// An NTLM logon of a domain user, checked by the domain ([`crate::UserLookup::domain_ntlm`]).
    pub by_domain: bool,
}

impl std::fmt::Debug for AuthResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthResult")
            .field("kind", &self.kind)
            .field("user", &self.user)
            .field("domain", &self.domain)
            .field("workstation", &self.workstation)
            .finish_non_exhaustive()
    }
}

enum ServerState {
    AwaitNegotiate,
    AwaitAuthenticate {
        negotiate: Vec<u8>,
        challenge: Vec<u8>,
    },
    Done,
}

/// The shortest NTLMv2 response: NTProofStr (16) + RespType, HiRespType, Z(6), TimeStamp (8),
/// ChallengeFromClient (8), Z(4).
const NTLMV2_RESPONSE_MIN: usize = 16 + 28;

/// The NTLMv2 check a domain controller makes of `request` for an account whose NT hash is
/// `nt_hash` ([MS-NLMP] 3.3.2): the session base key when the response proves the password.
pub fn check_v2(nt_hash: &[u8; 16], request: &crate::DomainNtlm<'_>) -> Option<[u8; 16]> {
    if request.nt_response.len() < NTLMV2_RESPONSE_MIN {
        return None;
    }
    let (proof, temp) = request.nt_response.split_at(16);
    v2_session_base_key(
        nt_hash,
        request.user,
        request.domain,
        request.challenge,
        proof,
        temp,
    )
}

fn v2_session_base_key(
    nt_hash: &[u8; 16],
    user: &str,
    domain: &str,
    challenge: &[u8; 8],
    proof: &[u8],
    temp: &[u8],
) -> Option<[u8; 16]> {
    let rk = ntowf_v2(nt_hash, user, domain);
    let want = hmac_md5(&rk, &[challenge, temp]);
    ringshare_crypto::ct_eq(&want, proof).then(|| hmac_md5(&rk, &[proof]))
}

/// The fields of an AUTHENTICATE_MESSAGE ([MS-NLMP] 2.2.1.3), bounds-checked, nothing verified.
struct Authenticate<'a> {
    lm: &'a [u8],
    nt: &'a [u8],
    user: String,
    domain: String,
    workstation: String,
    enc_key: &'a [u8],
    auth_flags: u32,
    /// (length, offset) of each payload field, for the MIC's room check.
    offsets: [(usize, usize); 6],
}

impl<'a> Authenticate<'a> {
    /// `server_flags`: the flags of the CHALLENGE sent (for the strings' encoding).
    fn parse(msg: &'a [u8], server_flags: u32) -> Result<Self, AuthError> {
        check_header(msg, MSG_AUTHENTICATE, 64)?;
        let (lm, lm_off) = field(msg, 12, "LmChallengeResponse")?;
        let (nt, nt_off) = field(msg, 20, "NtChallengeResponse")?;
        let (domain_b, d_off) = field(msg, 28, "DomainName")?;
        let (user_b, u_off) = field(msg, 36, "UserName")?;
        let (ws_b, w_off) = field(msg, 44, "Workstation")?;
        let (enc_key, k_off) = field(msg, 52, "EncryptedRandomSessionKey")?;
        let auth_flags = le32(msg, 60).ok_or(AuthError::Malformed("AUTHENTICATE flags"))?;
        let unicode = auth_flags & UNICODE != 0 || server_flags & UNICODE != 0;
        Ok(Authenticate {
            lm,
            nt,
            user: decode_string(user_b, unicode, "UserName")?,
            domain: decode_string(domain_b, unicode, "DomainName")?,
            workstation: decode_string(ws_b, unicode, "Workstation")?,
            enc_key,
            auth_flags,
            offsets: [
                (lm.len(), lm_off),
                (nt.len(), nt_off),
                (domain_b.len(), d_off),
                (user_b.len(), u_off),
                (ws_b.len(), w_off),
                (enc_key.len(), k_off),
            ],
        })
    }
}

/// The server side of one NTLM exchange: NEGOTIATE → CHALLENGE, then AUTHENTICATE.
pub struct NtlmServer {
    cfg: ServerConfig,
    server_challenge: [u8; 8],
    now_filetime: u64,
    version: [u8; 8],
    flags: u32,
    state: ServerState,
    security: Option<SessionSecurity>,
}

impl NtlmServer {
    /// A server that will send `server_challenge` and announce `now_filetime` (100 ns since 1601)
    /// as MsvAvTimestamp.
    pub fn new(cfg: &ServerConfig, server_challenge: [u8; 8], now_filetime: u64) -> Self {
        NtlmServer {
            cfg: cfg.clone(),
            server_challenge,
            now_filetime,
            version: OUR_VERSION,
            flags: 0,
            state: ServerState::AwaitNegotiate,
            security: None,
        }
    }

    /// Announce a different Version field (tests replaying captured exchanges use this).
    pub fn set_version(&mut self, version: [u8; 8]) {
        self.version = version;
    }

    /// The flags sent in the CHALLENGE message (0 before it).
    pub fn negotiated_flags(&self) -> u32 {
        self.flags
    }

    /// NTLMSSP signing state after a successful `authenticate` (None before, and for anonymous).
    pub fn session_security(&mut self) -> Option<&mut SessionSecurity> {
        self.security.as_mut()
    }

    /// What the domain would be asked to check if `authenticate` were this exchange's
    /// AUTHENTICATE: an NTLMv2 response of a named user, answering this server's challenge.
    /// Nothing changes (the exchange goes on with [`NtlmServer::authenticate`]); None for
    /// anything else (anonymous, NTLMv1, out of sequence, malformed).
    pub fn domain_request(&self, authenticate: &[u8]) -> Option<crate::DomainNtlmRequest> {
        if !matches!(self.state, ServerState::AwaitAuthenticate { .. }) {
            return None;
        }
        let a = Authenticate::parse(authenticate, self.flags).ok()?;
        if a.user.is_empty() || a.nt.len() < NTLMV2_RESPONSE_MIN {
            return None;
        }
        Some(crate::DomainNtlmRequest {
            user: a.user,
            domain: a.domain,
            workstation: a.workstation,
            challenge: self.server_challenge,
            nt_response: a.nt.to_vec(),
            lm_response: a.lm.to_vec(),
        })
    }

    /// NEGOTIATE_MESSAGE in, CHALLENGE_MESSAGE out.
    pub fn challenge(&mut self, negotiate: &[u8]) -> Result<Vec<u8>, AuthError> {
        if !matches!(self.state, ServerState::AwaitNegotiate) {
            return Err(AuthError::Malformed("NEGOTIATE out of sequence"));
        }
        check_header(negotiate, MSG_NEGOTIATE, 16)?;
        let offered = le32(negotiate, 12).ok_or(AuthError::Malformed("NEGOTIATE flags"))?;
        if offered & UNICODE == 0 {
            return Err(AuthError::Unsupported("NTLM without Unicode"));
        }
        let flags = (offered & SERVER_ECHO_FLAGS) | NTLM | TARGET_INFO | TARGET_TYPE_SERVER;
        self.flags = flags;

        let mut info = Vec::new();
        push_av(&mut info, AV_NB_DOMAIN, &utf16le(&self.cfg.netbios_domain));
        push_av(
            &mut info,
            AV_NB_COMPUTER,
            &utf16le(&self.cfg.netbios_computer),
        );
        push_av(&mut info, AV_DNS_DOMAIN, &utf16le(&self.cfg.dns_domain));
        push_av(&mut info, AV_DNS_COMPUTER, &utf16le(&self.cfg.dns_computer));
        push_av(&mut info, AV_TIMESTAMP, &self.now_filetime.to_le_bytes());
        push_av(&mut info, AV_EOL, &[]);

        let target_name = if flags & REQUEST_TARGET != 0 {
            utf16le(&self.cfg.netbios_computer)
        } else {
            Vec::new()
        };
        let mut b = Builder::new(MSG_CHALLENGE, 56);
        b.field(&target_name);
        b.u32(flags);
        b.bytes(&self.server_challenge);
        b.bytes(&[0; 8]);
        b.field(&info);
        b.bytes(if flags & VERSION != 0 {
            &self.version
        } else {
            &[0; 8]
        });
        let challenge = b.finish();
        self.state = ServerState::AwaitAuthenticate {
            negotiate: negotiate.to_vec(),
            challenge: challenge.clone(),
        };
        Ok(challenge)
    }

    /// The NTLMv2 session base key of a local account's response: NTProofStr checked against
    /// the account's NT hash, the domain as sent or empty ([MS-NLMP] 3.3.2).
    fn local_session_base_key(
        &self,
        users: &dyn UserLookup,
        user: &str,
        domain: &str,
        proof: &[u8],
        temp: &[u8],
    ) -> Result<[u8; 16], AuthError> {
        let hash = users
            .nt_hash(user)
            .ok_or_else(|| AuthError::NoSuchUser(user.to_string()))?;
        for dom in [domain, ""] {
            if let Some(key) =
                v2_session_base_key(&hash, user, dom, &self.server_challenge, proof, temp)
            {
                return Ok(key);
            }
            if domain.is_empty() {
                break;
            }
        }
        Err(AuthError::WrongPassword(user.to_string()))
    }

    /// AUTHENTICATE_MESSAGE in: verify NTLMv2, unwrap KEY_EXCH, check the MIC.
    pub fn authenticate(
        &mut self,
        authenticate: &[u8],
        users: &dyn UserLookup,
    ) -> Result<AuthResult, AuthError> {
        let (negotiate, challenge) = match std::mem::replace(&mut self.state, ServerState::Done) {
            ServerState::AwaitAuthenticate {
                negotiate,
                challenge,
            } => (negotiate, challenge),
            other => {
                self.state = other;
                return Err(AuthError::Malformed("AUTHENTICATE out of sequence"));
            }
        };
        let msg = authenticate;
        let Authenticate {
            lm,
            nt,
            user,
            domain,
            workstation,
            enc_key,
            auth_flags,
            offsets,
        } = Authenticate::parse(msg, self.flags)?;
        let key_exch = auth_flags & KEY_EXCH != 0 && self.flags & KEY_EXCH != 0;
        let negotiated = auth_flags & self.flags;
        if key_exch && !enc_key.is_empty() && enc_key.len() != 16 {
            return Err(AuthError::Malformed("EncryptedRandomSessionKey length"));
        }
        let unwrap_key = |kek: &[u8; 16]| -> [u8; 16] {
            match (key_exch, <&[u8; 16]>::try_from(enc_key)) {
                (true, Ok(enc)) => rc4_16(kek, enc),
                _ => *kek,
            }
        };

        // Anonymous: empty user, empty NT response, LM response empty or Z(1).
        if user.is_empty() && nt.is_empty() && (lm.is_empty() || lm == [0]) {
            return Ok(AuthResult {
                kind: AuthKind::Anonymous,
                user,
                domain,
                workstation,
                session_key: unwrap_key(&[0; 16]).to_vec(),
                kerberos: None,
                by_domain: false,
            });
        }
        if nt.is_empty() {
            return Err(AuthError::Unsupported("LM authentication"));
        }
        if nt.len() == 24 {
            return Err(AuthError::Unsupported("NTLMv1"));
        }
        if nt.len() < NTLMV2_RESPONSE_MIN {
            return Err(AuthError::Malformed("NTLMv2 response too short"));
        }
        let (proof, temp) = nt.split_at(16);
        if temp[0] != 1 {
            return Err(AuthError::Unsupported("NTLMv2 response version"));
        }
        let client_pairs = av_pairs(&temp[28..])?;
        let av_flags = client_pairs
            .iter()
            .find(|(id, _)| *id == AV_FLAGS)
            .and_then(|(_, v)| le32(v, 0))
            .unwrap_or(0);

        let request = crate::DomainNtlm {
            user: &user,
            domain: &domain,
            workstation: &workstation,
            challenge: &self.server_challenge,
            nt_response: nt,
            lm_response: lm,
        };
        let by_domain = users.domain_ntlm(&request);
        let checked_by_domain = by_domain.is_some();
        let session_base_key = match by_domain {
            Some(answer) => {
                answer.map_err(|why| AuthError::Domain(format!("{domain}\\{user}"), why))?
            }
            None => self.local_session_base_key(users, &user, &domain, proof, temp)?,
        };
        let exported = unwrap_key(&session_base_key);

        if av_flags & AV_FLAG_MIC_PRESENT != 0 {
            // The MIC sits between the fixed header and the payload: every payload offset in use
            // must be at or past the end of the 88-byte header.
            if msg.len() < AUTH_HEADER_LEN
                || offsets
                    .iter()
                    .any(|(len, o)| *len != 0 && *o < AUTH_HEADER_LEN)
            {
                return Err(AuthError::Malformed("MIC flagged but no room for it"));
            }
            let mut copy = msg.to_vec();
            let sent: [u8; 16] = msg[MIC_OFFSET..MIC_OFFSET + 16]
                .try_into()
                .expect("length checked");
            copy[MIC_OFFSET..MIC_OFFSET + 16].fill(0);
            let mic = hmac_md5(&exported, &[&negotiate, &challenge, &copy]);
            if !ringshare_crypto::ct_eq(&mic, &sent) {
                return Err(AuthError::BadMic);
            }
        }

        self.security = Some(SessionSecurity::new(&exported, negotiated));
        Ok(AuthResult {
            kind: AuthKind::User,
            user,
            domain,
            workstation,
            session_key: exported.to_vec(),
            kerberos: None,
            by_domain: checked_by_domain,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Client.

const CLIENT_FLAGS: u32 = UNICODE
    | REQUEST_TARGET
    | SIGN
    | NTLM
    | ALWAYS_SIGN
    | EXTENDED_SESSIONSECURITY
    | VERSION
    | NEGOTIATE_128
    | KEY_EXCH
    | NEGOTIATE_56;

/// The client side of NTLMv2, for ringshare's own client (benchmarks, tests).
pub struct NtlmClient {
    user: String,
    domain: String,
    password: String,
    workstation: String,
    negotiate: Option<Vec<u8>>,
    session_key: Option<[u8; 16]>,
    security: Option<SessionSecurity>,
}

impl NtlmClient {
    /// A client; an empty user and password mean an anonymous logon.
    pub fn new(user: &str, domain: &str, password: &str, workstation: &str) -> Self {
        NtlmClient {
            user: user.to_string(),
            domain: domain.to_string(),
            password: password.to_string(),
            workstation: workstation.to_string(),
            negotiate: None,
            session_key: None,
            security: None,
        }
    }

    fn anonymous(&self) -> bool {
        self.user.is_empty() && self.password.is_empty()
    }

    /// The NEGOTIATE_MESSAGE.
    pub fn negotiate(&mut self) -> Vec<u8> {
        let mut f = CLIENT_FLAGS;
        if self.anonymous() {
            f |= ANONYMOUS;
        }
        let mut b = Builder::new(MSG_NEGOTIATE, 40);
        b.u32(f);
        b.field(&[]);
        b.field(&[]);
        b.bytes(&OUR_VERSION);
        let m = b.finish();
        self.negotiate = Some(m.clone());
        m
    }

    /// CHALLENGE_MESSAGE in, AUTHENTICATE_MESSAGE out.
    pub fn authenticate(
        &mut self,
        challenge: &[u8],
        client_challenge: [u8; 8],
        random_session_key: [u8; 16],
        now_filetime: u64,
    ) -> Result<Vec<u8>, AuthError> {
        let negotiate = self
            .negotiate
            .clone()
            .ok_or(AuthError::Malformed("authenticate before negotiate"))?;
        check_header(challenge, MSG_CHALLENGE, 48)?;
        let server_flags = le32(challenge, 20).ok_or(AuthError::Malformed("CHALLENGE flags"))?;
        let server_challenge: [u8; 8] = challenge[24..32].try_into().expect("length checked");
        let (target_info, _) = field(challenge, 40, "TargetInfo")?;
        if server_flags & UNICODE == 0 {
            return Err(AuthError::Unsupported("server without Unicode"));
        }
        let flags = server_flags & (CLIENT_FLAGS | ANONYMOUS);
        let key_exch = flags & KEY_EXCH != 0;

        let user = utf16le(&self.user);
        let domain = utf16le(&self.domain);
        let ws = utf16le(&self.workstation);

        let (lm, nt, enc_key, exported, mic_wanted) = if self.anonymous() {
            (vec![0u8], Vec::new(), Vec::new(), None, false)
        } else {
            let pairs = av_pairs(target_info)?;
            let server_time = pairs
                .iter()
                .find(|(id, _)| *id == AV_TIMESTAMP)
                .and_then(|(_, v)| le64(v, 0));
            let mut info = Vec::new();
            for (id, v) in &pairs {
                if *id != AV_FLAGS {
                    push_av(&mut info, *id, v);
                }
            }
            if server_time.is_some() {
                push_av(&mut info, AV_FLAGS, &AV_FLAG_MIC_PRESENT.to_le_bytes());
            }
            push_av(&mut info, AV_EOL, &[]);

            let rk = ntowf_v2(&crate::nt_hash(&self.password), &self.user, &self.domain);
            let ts = server_time.unwrap_or(now_filetime);
            let mut temp = vec![1u8, 1, 0, 0, 0, 0, 0, 0];
            temp.extend_from_slice(&ts.to_le_bytes());
            temp.extend_from_slice(&client_challenge);
            temp.extend_from_slice(&[0; 4]);
            temp.extend_from_slice(&info);
            temp.extend_from_slice(&[0; 4]);
            let proof = hmac_md5(&rk, &[&server_challenge, &temp]);
            let mut nt = proof.to_vec();
            nt.extend_from_slice(&temp);
            let lm = if server_time.is_some() {
                vec![0u8; 24]
            } else {
                let mut lm = hmac_md5(&rk, &[&server_challenge, &client_challenge]).to_vec();
                lm.extend_from_slice(&client_challenge);
                lm
            };
            let base = hmac_md5(&rk, &[&proof]);
            let (enc, exported) = if key_exch {
                (
                    rc4_16(&base, &random_session_key).to_vec(),
                    random_session_key,
                )
            } else {
                (Vec::new(), base)
            };
            (lm, nt, enc, Some(exported), server_time.is_some())
        };

        let mut b = Builder::new(MSG_AUTHENTICATE, AUTH_HEADER_LEN);
        // Payload order as Windows sends it: domain, user, workstation, LM, NT, key.
        let order = [&domain, &user, &ws, &lm, &nt, &enc_key];
        let mut offsets = [0usize; 6];
        let mut off = AUTH_HEADER_LEN;
        for (i, d) in order.iter().enumerate() {
            offsets[i] = off;
            off += d.len();
        }
        let put = |b: &mut Builder, i: usize, d: &[u8]| {
            b.bytes(&(d.len() as u16).to_le_bytes());
            b.bytes(&(d.len() as u16).to_le_bytes());
            b.bytes(&(offsets[i] as u32).to_le_bytes());
        };
        put(&mut b, 3, &lm);
        put(&mut b, 4, &nt);
        put(&mut b, 0, &domain);
        put(&mut b, 1, &user);
        put(&mut b, 2, &ws);
        put(&mut b, 5, &enc_key);
        b.u32(flags);
        b.bytes(&OUR_VERSION);
        b.bytes(&[0; 16]);
        for d in order {
            b.payload.extend_from_slice(d);
        }
        let mut msg = b.finish();
        if let (Some(exported), true) = (exported, mic_wanted) {
            let mic = hmac_md5(&exported, &[&negotiate, challenge, &msg]);
            msg[MIC_OFFSET..MIC_OFFSET + 16].copy_from_slice(&mic);
        }
        self.session_key = exported;
        self.security = exported.map(|k| SessionSecurity::new(&k, flags));
        Ok(msg)
    }

    /// The exported session key once `authenticate` has run (None for anonymous).
    pub fn session_key(&self) -> Option<[u8; 16]> {
        self.session_key
    }

    /// NTLMSSP signing state once `authenticate` has run (None for anonymous).
    pub fn session_security(&mut self) -> Option<&mut SessionSecurity> {
        self.security.as_mut()
    }
}

#[cfg(test)]
mod tests;
