//! [MS-SMB2] 3.3.5.3.1 Receiving an SMB_COM_NEGOTIATE (multi-protocol) and
//! 3.3.5.4 Receiving an SMB2 NEGOTIATE Request.

use ringshare_auth::spnego;
use ringshare_crypto::encrypt::Cipher;
use ringshare_crypto::preauth::PreauthHash;
use ringshare_wire::consts::{
    Capabilities, CipherId, Command, Dialect, HashAlgorithm, NegotiateContextType, SecurityMode,
    SigningAlgorithm, TransportCapabilityFlags,
};
use ringshare_wire::header::Header;
use ringshare_wire::negotiate::{NegotiateContext, NegotiateRequest, NegotiateResponse};
use ringshare_wire::smb1::Smb1Negotiate;
use ringshare_wire::NtStatus;

use crate::exchange::{compress, handles};
use crate::exchange::{ConnCore, Negotiated, Reply, Req};
use crate::server::{EncryptPolicy, SigningPolicy, Transport};

/// Dialects we implement, highest first.
const DIALECTS: [Dialect; 5] = [
    Dialect::SMB3_1_1,
    Dialect::SMB3_0_2,
    Dialect::SMB3_0,
    Dialect::SMB2_1,
    Dialect::SMB2_0_2,
];

fn server_security_mode(core: &ConnCore) -> SecurityMode {
    let mut m = SecurityMode::SIGNING_ENABLED;
    if core.server.config.signing == SigningPolicy::Required {
        m.insert(SecurityMode::SIGNING_REQUIRED);
    }
    m
}

fn allowed(core: &ConnCore, d: Dialect) -> bool {
    d.0 >= core.server.config.dialect_min
        && d.0 <= core.server.config.dialect_max
        // [MS-SMB2] 2.1: "SMB2 dialect 3.1.1 allows operation over QUIC".
        && (core.transport == Transport::Tcp || d == Dialect::SMB3_1_1)
}

/// The server's capabilities for dialect `d`; `client`: what the client
/// offered. Multichannel when the server supports it and the client offered
/// it ([MS-SMB2] 3.3.5.4); directory leasing from 3.0 on under `smb3
/// directory leases` when the client offered it (as Samba 4.22 answers).
fn capabilities_for(
    core: &ConnCore,
    d: Dialect,
    cipher: Option<Cipher>,
    client: Capabilities,
) -> Capabilities {
    let multi_channel =
        core.server.config.multi_channel && client.contains(Capabilities::MULTI_CHANNEL);
    let three = d.0 >= Dialect::SMB3_0.0 && d != Dialect::WILDCARD;
    // Leases from 2.1 on ([MS-SMB2] 3.3.5.4).
    let mut c = if d == Dialect::SMB2_0_2 {
        Capabilities::empty()
    } else {
        Capabilities::LARGE_MTU | Capabilities::LEASING
    };
    if three
        && core.server.config.directory_leases
        && client.contains(Capabilities::DIRECTORY_LEASING)
    {
        c.insert(Capabilities::DIRECTORY_LEASING);
    }
    // 3.0/3.0.2 announce encryption with the capability; 3.1.1 with the context.
    if cipher.is_some() && (d == Dialect::SMB3_0 || d == Dialect::SMB3_0_2) {
        c.insert(Capabilities::ENCRYPTION);
    }
    if multi_channel && three {
        c.insert(Capabilities::MULTI_CHANNEL);
    }
    // Persistent handles from 3.0 on, when a share is continuously available.
    if three && core.server.persistent_handles() {
        c.insert(Capabilities::PERSISTENT_HANDLES);
    }
    c
}

/// Ciphers in the order the server prefers them ([MS-SMB2] 3.3.5.4: the server
/// picks the first of its list the client offers).
const CIPHERS: [CipherId; 4] = [
    CipherId::AES_128_GCM,
    CipherId::AES_128_CCM,
    CipherId::AES_256_GCM,
    CipherId::AES_256_CCM,
];

fn response_body(
    core: &ConnCore,
    dialect: Dialect,
    cipher: Option<Cipher>,
    client: Capabilities,
    contexts: Vec<NegotiateContext>,
) -> Vec<u8> {
    let hint = spnego::negotiate_hint_for(core.server.logons.kerberos().is_some());
    let io = handles::io_sizes_for(core, Some(dialect));
    let resp = NegotiateResponse {
        security_mode: server_security_mode(core),
        dialect,
        server_guid: core.server.config.server_guid,
        capabilities: if dialect == Dialect::WILDCARD {
            Capabilities::LARGE_MTU
        } else {
            capabilities_for(core, dialect, cipher, client)
        },
        max_transact_size: io.trans,
        max_read_size: io.read,
        max_write_size: io.write,
        system_time: core.now.filetime,
        server_start_time: 0,
        security_buffer: &hint,
        contexts,
    };
    // Encoders expect the header before the body; encode after a placeholder
    // header and return the body only.
    let mut out = vec![0u8; 64];
    resp.encode(&mut out);
    out.split_off(64)
}

/// An SMB1 NEGOTIATE offering SMB2: answer with an SMB2 NEGOTIATE response
/// (the whole message, header included), or `None` to drop the connection.
pub(crate) fn handle_smb1(core: &mut ConnCore, frame: &[u8]) -> Option<Vec<u8>> {
    let neg = Smb1Negotiate::decode(frame).ok()?;
    let dialect =
        if neg.offers_smb2_wildcard() && core.server.config.dialect_max >= Dialect::SMB2_1.0 {
            Dialect::WILDCARD
        } else if neg.offers_smb2_002() && allowed(core, Dialect::SMB2_0_2) {
            Dialect::SMB2_0_2
        } else {
            return None;
        };
    let body = response_body(core, dialect, None, Capabilities::empty(), Vec::new());
    if dialect == Dialect::WILDCARD {
        core.wildcard_sent = true;
    } else {
        core.server
            .mail
            .note_negotiated(core.conn_id, dialect.0, "HMAC-SHA256", None);
        core.negotiated = Some(Negotiated {
            dialect,
            client_guid: [0; 16],
            client_capabilities: 0,
            client_security_mode: 0,
            server_security_mode: server_security_mode(core).0,
            server_capabilities: capabilities_for(core, dialect, None, Capabilities::empty()).0,
            client_dialects: vec![Dialect::SMB2_0_2.0],
            signing_algorithm: None,
            cipher: None,
            compression: Default::default(),
            transport_security: false,
            posix: false,
        });
    }
    let mut hdr = Header::response_to(&Header::request(Command::NEGOTIATE, 0), NtStatus::SUCCESS);
    hdr.credits = 1;
    let mut msg = Vec::with_capacity(64 + body.len());
    hdr.encode(&mut msg);
    msg.extend_from_slice(&body);
    Some(msg)
}

pub(crate) fn handle(core: &mut ConnCore, req: &Req<'_>) -> Result<Reply, NtStatus> {
    if core.negotiated.is_some() {
        // A second NEGOTIATE on a negotiated connection: [MS-SMB2] 3.3.5.4 says disconnect.
        let mut r = Reply::with_status(NtStatus::INVALID_PARAMETER, Vec::new());
        r.rare().disconnect = true;
        return Ok(r);
    }
    let neg = NegotiateRequest::decode(req.msg).map_err(|e| e.status())?;
    if neg.dialects.is_empty() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let Some(dialect) = DIALECTS
        .iter()
        .copied()
        .find(|d| allowed(core, *d) && neg.dialects.contains(d))
    else {
        let mut r = Reply::with_status(NtStatus::NOT_SUPPORTED, Vec::new());
        r.rare().disconnect = true;
        return Ok(r);
    };
    let mut contexts = Vec::new();
    let mut signing_algorithm = None;
    let mut cipher = None;
    let mut cipher_ctx = None;
    let mut agreed = compress::Compression::default();
    let mut transport_security = false;
    let mut posix = false;
    // `server smb encrypt = off` everywhere: no cipher is offered.
    let offer = core.server.config.encrypt != EncryptPolicy::Off
        || core
            .server
            .shares()
            .shares
            .iter()
            .any(|s| s.encrypt != EncryptPolicy::Off);
    if offer
        && (dialect == Dialect::SMB3_0 || dialect == Dialect::SMB3_0_2)
        && neg.capabilities.contains(Capabilities::ENCRYPTION)
    {
        cipher = Some(Cipher::Aes128Ccm);
    }
    if dialect == Dialect::SMB3_1_1 {
        let mut preauth_ok = false;
        let mut compression = None;
        for c in &neg.contexts {
            match c {
                NegotiateContext::PreauthIntegrity {
                    hash_algorithms, ..
                } => {
                    if !hash_algorithms.contains(&HashAlgorithm::SHA_512) {
                        return Err(NtStatus::SMB_NO_PREAUTH_INTEGRITY_HASH_OVERLAP);
                    }
                    preauth_ok = true;
                }
                NegotiateContext::Encryption { ciphers } => {
                    // No common cipher: answer with the single cipher 0.
                    let pick = CIPHERS
                        .into_iter()
                        .find(|c| offer && ciphers.contains(c))
                        .unwrap_or(CipherId::NONE);
                    cipher_ctx = Some(pick);
                    cipher = Cipher::from_id(pick.0);
                }
                NegotiateContext::Signing { algorithms } => {
                    let pick = [
                        SigningAlgorithm::AES_GMAC,
                        SigningAlgorithm::AES_CMAC,
                        SigningAlgorithm::HMAC_SHA256,
                    ]
                    .into_iter()
                    .find(|a| algorithms.contains(a));
                    signing_algorithm = pick.map(|a| a.0);
                }
                NegotiateContext::Compression { flags, algorithms } => {
                    // One such context at most, with at least one algorithm
                    // ([MS-SMB2] 3.3.5.4); ignored when compression is off.
                    if compression.is_some() {
                        return Err(NtStatus::INVALID_PARAMETER);
                    }
                    let server = &core.server.config.compression;
                    compression = Some(compress::negotiate(server, *flags, algorithms)?);
                }
                // [MS-SMB2] 3.3.5.4: only over QUIC, and unless `server smb
                // encryption over quic` asks for SMB encryption there too.
                NegotiateContext::Transport { flags } => {
                    transport_security = core.transport == Transport::Quic
                        && flags
                            .contains(TransportCapabilityFlags::ACCEPT_TRANSPORT_LEVEL_SECURITY)
                        && !core.server.config.smb_encryption_over_quic;
                }
                // The SMB3 POSIX extensions, under `smb3 unix extensions` (read
                // in [global], as Samba does; not looked at while it is off).
                NegotiateContext::Unknown { context_type, data }
                    if *context_type == NegotiateContextType::POSIX_EXTENSIONS_AVAILABLE
                        && core.server.config.posix_extensions =>
                {
                    posix |= ringshare_wire::posix::negotiate_offers_posix(data)
                        .map_err(|_| NtStatus::INVALID_PARAMETER)?;
                }
                _ => {}
            }
        }
        if !preauth_ok {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        let salt: [u8; 32] = core.random_bytes();
        contexts.push(NegotiateContext::PreauthIntegrity {
            hash_algorithms: vec![HashAlgorithm::SHA_512],
            salt: salt.to_vec(),
        });
        if let Some(c) = cipher_ctx {
            contexts.push(NegotiateContext::Encryption { ciphers: vec![c] });
        }
        if let Some(a) = signing_algorithm {
            contexts.push(NegotiateContext::Signing {
                algorithms: vec![SigningAlgorithm(a)],
            });
        }
        if let Some(c) = compression.filter(|_| !core.server.config.compression.is_empty()) {
            contexts.push(compress::response_context(&c));
            agreed = c;
        }
        if transport_security {
            contexts.push(NegotiateContext::Transport {
                flags: TransportCapabilityFlags::ACCEPT_TRANSPORT_LEVEL_SECURITY,
            });
        }
        if posix {
            contexts.push(NegotiateContext::Unknown {
                context_type: NegotiateContextType::POSIX_EXTENSIONS_AVAILABLE,
                data: ringshare_wire::create::tag::POSIX.to_vec(),
            });
        }
    }
    let body = response_body(core, dialect, cipher, neg.capabilities, contexts);
    core.negotiated = Some(Negotiated {
        dialect,
        client_guid: neg.client_guid,
        client_capabilities: neg.capabilities.0,
        client_security_mode: neg.security_mode.0,
        server_security_mode: server_security_mode(core).0,
        server_capabilities: capabilities_for(core, dialect, cipher, neg.capabilities).0,
        client_dialects: neg.dialects.iter().map(|d| d.0).collect(),
        signing_algorithm,
        cipher,
        compression: agreed,
        transport_security,
        posix,
    });
    if dialect == Dialect::SMB3_1_1 {
        let mut p = PreauthHash::zero();
        p.update(req.msg);
        core.preauth = Some(p);
    }
    let signing = match signing_algorithm {
        _ if dialect.0 < Dialect::SMB3_0.0 => "HMAC-SHA256",
        Some(0) => "HMAC-SHA256",
        Some(2) => "AES-128-GMAC",
        _ => "AES-128-CMAC",
    };
    let cipher_name = cipher.map(|c| match c {
        Cipher::Aes128Ccm => "AES-128-CCM",
        Cipher::Aes128Gcm => "AES-128-GCM",
        Cipher::Aes256Ccm => "AES-256-CCM",
        Cipher::Aes256Gcm => "AES-256-GCM",
    });
    core.server
        .mail
        .note_negotiated(core.conn_id, dialect.0, signing, cipher_name);
    let mut reply = Reply::ok(body);
    reply.rare().preauth_connection = dialect == Dialect::SMB3_1_1;
    Ok(reply)
}
