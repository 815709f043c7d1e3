//! [MS-SMB2] 3.3.5.5 Receiving an SMB2 SESSION_SETUP Request and
//! 3.3.5.6 Receiving an SMB2 LOGOFF Request.
//!
//! Authentication is SPNEGO-wrapped NTLMSSP (NTLMv2 against the smbpasswd
//! users), anonymous, or guest when the configuration maps unknown users to
//! guest. Keys: 2.x signs with the session key itself (HMAC-SHA256); 3.0/3.0.2
//! derive an AES-CMAC key; 3.1.1 derives keys over the preauth integrity hash
//! and signs with the algorithm negotiated (AES-GMAC when offered).

use std::collections::HashMap;

use ringshare_auth::gss::{ServerAuth, ServerStep};
use ringshare_auth::ntlm::{AuthKind, ServerConfig as NtlmConfig};
use ringshare_auth::AuthError;
use ringshare_crypto::encrypt::CipherKey;
use ringshare_crypto::keys;
use ringshare_crypto::sign::{SigningAlgorithm as SignAlg, SigningKey};
use ringshare_wire::consts::{
    Dialect, SecurityMode, SessionFlags, SessionSetupFlags, SigningAlgorithm,
};
use ringshare_wire::session::{LogoffRequest, SessionSetupRequest, SessionSetupResponse};
use ringshare_wire::{NtStatus, WriteExt};

use crate::cmd::close::close_all_opens;
use crate::conn::{ConnCore, Reply, Req};
use crate::limits;
use crate::server::{EncryptPolicy, SigningPolicy};
use crate::state::Session;

fn ntlm_config(core: &ConnCore) -> NtlmConfig {
    let c = &core.server.config;
    NtlmConfig {
        netbios_domain: c.workgroup.clone(),
        netbios_computer: c.netbios_name.clone(),
        dns_domain: String::new(),
        dns_computer: c.dns_name.clone(),
    }
}

fn body(flags: SessionFlags, token: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; 64];
    SessionSetupResponse {
        session_flags: flags,
        security_buffer: token,
    }
    .encode(&mut out);
    out.split_off(64)
}

fn new_session_id(core: &mut ConnCore) -> u64 {
    loop {
        let id = core.random_u64();
        if id != 0 && id != u64::MAX && !core.sessions.contains_key(&id) {
            return id;
        }
    }
}

pub(crate) fn handle(core: &mut ConnCore, req: &Req<'_>) -> Result<Reply, NtStatus> {
    let Some(dialect) = core.dialect() else {
        return Err(NtStatus::INVALID_PARAMETER);
    };
    let setup = SessionSetupRequest::decode(req.msg).map_err(|e| e.status())?;
    if setup.flags.contains(SessionSetupFlags::BINDING) {
        // Multichannel binding is not offered (no MULTI_CHANNEL capability).
        return Err(NtStatus::REQUEST_NOT_ACCEPTED);
    }
    let session_id = if req.hdr.session_id == 0 {
        if core.sessions.len() >= limits::SESSIONS_PER_CONNECTION_MAX {
            return Err(NtStatus::INSUFFICIENT_RESOURCES);
        }
        let id = new_session_id(core);
        let preauth = if dialect == Dialect::SMB3_1_1 {
            core.preauth.clone()
        } else {
            None
        };
        core.sessions.insert(
            id,
            Session {
                id,
                encrypt_key: None,
                decrypt_key: None,
                nonce_counter: 0,
                encrypt_required: false,
                valid: false,
                auth: None,
                user: String::new(),
                uid: None,
                is_guest: false,
                is_anonymous: false,
                signing_key: None,
                signing_required: false,
                preauth,
                trees: HashMap::new(),
                next_tree_id: 1,
                opens: HashMap::new(),
                pipes: HashMap::new(),
            },
        );
        id
    } else {
        let s = core
            .sessions
            .get_mut(&req.hdr.session_id)
            .ok_or(NtStatus::USER_SESSION_DELETED)?;
        if s.auth.is_none() && dialect == Dialect::SMB3_1_1 {
            // Re-authentication starts a new preauth hash from the connection's.
            s.preauth = core.preauth.clone();
        }
        req.hdr.session_id
    };
    let challenge: [u8; 8] = core.random_bytes();
    let cfg = ntlm_config(core);
    let now = core.now.filetime;
    let users = core.server.users.clone();
    let session = core
        .sessions
        .get_mut(&session_id)
        .ok_or(NtStatus::USER_SESSION_DELETED)?;
    if let Some(p) = session.preauth.as_mut() {
        p.update(req.msg);
    }
    let auth = session
        .auth
        .get_or_insert_with(|| Box::new(ServerAuth::new(&cfg, challenge, now)));
    let step = auth.step(setup.security_buffer, users.as_ref());
    match step {
        Ok(ServerStep::Continue(token)) => {
            let mut r = Reply::with_status(
                NtStatus::MORE_PROCESSING_REQUIRED,
                body(SessionFlags::empty(), &token),
            );
            r.session_id = Some(session_id);
            r.preauth_session = (dialect == Dialect::SMB3_1_1).then_some(session_id);
            Ok(r)
        }
        Ok(ServerStep::Done { token, result }) => {
            session.auth = None;
            let anonymous = result.kind == AuthKind::Anonymous;
            finish(
                core,
                session_id,
                dialect,
                setup.security_mode.0,
                &token,
                result.user,
                anonymous,
                false,
                Some(result.session_key),
            )
        }
        Err(AuthError::NoSuchUser(user))
            if core.server.config.map_bad_user_to_guest && core.server.config.guest_enabled =>
        {
            session.auth = None;
            finish(
                core,
                session_id,
                dialect,
                setup.security_mode.0,
                &[],
                user,
                false,
                true,
                None,
            )
        }
        Err(e) => {
            tracing::info!(peer = %core.peer, "authentication failed: {}", describe(&e));
            let was_valid = session.valid;
            session.auth = None;
            if !was_valid {
                core.sessions.remove(&session_id);
            }
            Err(NtStatus::LOGON_FAILURE)
        }
    }
}

fn describe(e: &AuthError) -> String {
    match e {
        AuthError::NoSuchUser(u) => format!("unknown user {u:?}"),
        AuthError::WrongPassword(u) => format!("wrong password for {u:?}"),
        other => format!("{other:?}"),
    }
}

#[allow(clippy::too_many_arguments)]
fn finish(
    core: &mut ConnCore,
    session_id: u64,
    dialect: Dialect,
    client_security_mode: u16,
    token: &[u8],
    user: String,
    anonymous: bool,
    guest: bool,
    session_key: Option<[u8; 16]>,
) -> Result<Reply, NtStatus> {
    let policy = core.server.config.signing;
    let users = core.server.users.clone();
    let client_requires = (client_security_mode
        | core
            .negotiated
            .as_ref()
            .map_or(0, |n| n.client_security_mode))
        & SecurityMode::SIGNING_REQUIRED.0
        != 0;
    let signing_alg = match dialect {
        Dialect::SMB2_0_2 | Dialect::SMB2_1 => SignAlg::HmacSha256,
        Dialect::SMB3_1_1 => match core
            .negotiated
            .as_ref()
            .and_then(|n| n.signing_algorithm)
            .map(SigningAlgorithm)
        {
            Some(SigningAlgorithm::AES_GMAC) => SignAlg::AesGmac,
            Some(SigningAlgorithm::HMAC_SHA256) => SignAlg::HmacSha256,
            _ => SignAlg::AesCmac,
        },
        _ => SignAlg::AesCmac,
    };
    let core_cipher = core.negotiated.as_ref().and_then(|n| n.cipher);
    let core_encrypt = core.server.config.encrypt;
    let session = core
        .sessions
        .get_mut(&session_id)
        .ok_or(NtStatus::USER_SESSION_DELETED)?;
    let can_sign = !anonymous && !guest && session_key.is_some();
    if policy == SigningPolicy::Required && !can_sign {
        tracing::info!("refusing a guest or anonymous session: server signing is mandatory");
        if !session.valid {
            core.sessions.remove(&session_id);
        }
        return Err(NtStatus::ACCESS_DENIED);
    }
    if let Some(key) = session_key.filter(|_| can_sign) {
        let signing = match dialect {
            Dialect::SMB2_0_2 | Dialect::SMB2_1 => key,
            _ => {
                let preauth = session.preauth.as_ref().map(|p| p.0);
                keys::derive(dialect.0, &key, preauth.as_ref(), 16).signing
            }
        };
        session.signing_key = Some(SigningKey::new(signing_alg, signing));
        if let Some(cipher) = core_cipher {
            let k = keys::derive(
                dialect.0,
                &key,
                session.preauth.as_ref().map(|p| p.0).as_ref(),
                cipher.key_len(),
            );
            session.encrypt_key = CipherKey::new(cipher, &k.encrypt_server_to_client).ok();
            session.decrypt_key = CipherKey::new(cipher, &k.decrypt_client_to_server).ok();
        }
        session.signing_required = policy == SigningPolicy::Required
            || client_requires
            || policy == SigningPolicy::Desired;
    } else {
        session.signing_key = None;
        session.signing_required = false;
    }
    // [MS-SMB2] 3.3.5.5.3: Session.EncryptData from the server's policy.
    let encrypt = core_encrypt;
    let can_encrypt = session.encrypt_key.is_some();
    if encrypt == EncryptPolicy::Required && !can_encrypt {
        tracing::info!(
            "refusing a session that cannot be encrypted ({}): 'server smb encrypt = required'",
            if guest || anonymous {
                "guest and anonymous logons have no keys"
            } else {
                "the client does not encrypt"
            }
        );
        if !session.valid {
            core.sessions.remove(&session_id);
        }
        return Err(NtStatus::ACCESS_DENIED);
    }
    let encrypt_data =
        can_encrypt && matches!(encrypt, EncryptPolicy::Desired | EncryptPolicy::Required);
    session.encrypt_required = can_encrypt && encrypt == EncryptPolicy::Required;
    session.uid = if guest || anonymous {
        None
    } else {
        users.uid(&user)
    };
    session.user = user;
    session.is_guest = guest;
    session.is_anonymous = anonymous;
    session.valid = true;
    session.preauth = None;
    let mut flags = SessionFlags::empty();
    if guest {
        flags.insert(SessionFlags::IS_GUEST);
    }
    if anonymous {
        flags.insert(SessionFlags::IS_NULL);
    }
    if encrypt_data {
        flags.insert(SessionFlags::ENCRYPT_DATA);
    }
    let mut r = Reply::ok(body(flags, token));
    r.session_id = Some(session_id);
    // The final response is signed when the session can sign and either the
    // dialect is 3.1.1 or signing is required ([MS-SMB2] 3.3.5.5.3).
    if can_sign && (dialect == Dialect::SMB3_1_1 || session.signing_required) {
        r.sign_with_session = Some(session_id);
    }
    Ok(r)
}

pub(crate) fn logoff(core: &mut ConnCore, req: &Req<'_>) -> Result<Reply, NtStatus> {
    LogoffRequest::decode(req.msg).map_err(|e| e.status())?;
    let server = core.server.clone();
    let mut session = core
        .sessions
        .remove(&req.session_id)
        .ok_or(NtStatus::USER_SESSION_DELETED)?;
    close_all_opens(&server, &mut session);
    let mut b = Vec::with_capacity(4);
    b.put_u16(4);
    b.put_u16(0);
    let mut r = Reply::ok(b);
    if session.signing_required || req.hdr.is_signed() {
        r.sign_key = session.signing_key.clone();
    }
    Ok(r)
}
