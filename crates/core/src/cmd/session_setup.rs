//! [MS-SMB2] 3.3.5.5 Receiving an SMB2 SESSION_SETUP Request and
//! 3.3.5.6 Receiving an SMB2 LOGOFF Request.
//!
//! Authentication is SPNEGO-wrapped NTLMSSP (NTLMv2 against the smbpasswd
//! users), anonymous, or guest when the configuration maps unknown users to
//! guest. Keys: 2.x signs with the session key itself (HMAC-SHA256); 3.0/3.0.2
//! derive an AES-CMAC key; 3.1.1 derives keys over the preauth integrity hash
//! and signs with the algorithm negotiated (AES-GMAC when offered).

use std::sync::Arc;

use ringshare_auth::gss::{Kerberos, ServerAuth, ServerStep};
use ringshare_auth::krb5::acceptor::Fresh;
use ringshare_auth::ntlm::{AuthKind, ServerConfig as NtlmConfig};
use ringshare_auth::AuthError;
use ringshare_crypto::encrypt::CipherKey;
use ringshare_crypto::keys;
use ringshare_crypto::sign::{SigningAlgorithm as SignAlg, SigningKey};
use ringshare_wire::consts::{
    Dialect, SecurityMode, SessionFlags, SessionSetupFlags, SigningAlgorithm,
};
use ringshare_wire::fscc::FileTime;
use ringshare_wire::session::{LogoffRequest, SessionSetupRequest, SessionSetupResponse};
use ringshare_wire::{NtStatus, WriteExt};

use crate::cmd::logon_user::{kerberos_user, DomainUser};
use crate::cmd::{Asked, Handled, LookupCont};
use crate::exchange::{signature_ok, ConnCore, Reply, Req};
use crate::identity::{Account, AccountError};
use crate::limits;
use crate::loglimit::{FailedLogon, LogKind};
use crate::lookup::DomainAnswer;
use crate::lookup::{Lookup, LookupDone};
use crate::peers::PeerIp;
use crate::server::{lock, EncryptPolicy, ServerState, SigningPolicy};
use crate::state::{Channel, Session, SessionRef};

pub(crate) fn ntlm_config(core: &ConnCore) -> NtlmConfig {
    let c = &core.server.config;
    NtlmConfig {
        netbios_domain: c.workgroup.clone(),
        netbios_computer: c.netbios_name.clone(),
        dns_domain: String::new(),
        dns_computer: c.dns_name.clone(),
    }
}

/// The interim reply of an authentication leg that goes on: the server's
/// token, the session id, and (3.1.1) the response counted in the session's
/// preauth hash.
fn more_processing(session_id: u64, dialect: Dialect, token: &[u8]) -> Reply {
    let mut r = Reply::with_status(
        NtStatus::MORE_PROCESSING_REQUIRED,
        body(SessionFlags::empty(), token),
    );
    r.rare().session_id = Some(session_id);
    r.rare().preauth_session = (dialect == Dialect::SMB3_1_1).then_some(session_id);
    r
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

/// Put a new InProgress session in the GlobalSessionTable under a fresh
/// random id and give this connection its first channel.
fn new_session(core: &mut ConnCore, dialect: Dialect) -> u64 {
    loop {
        let id = core.random_u64();
        if id == 0 || id == u64::MAX {
            continue;
        }
        let session = Session::new(id, dialect.0, core.conn_id);
        let Some(sref) = core.server.sessions.insert(session) else {
            continue;
        };
        let preauth = (dialect == Dialect::SMB3_1_1)
            .then(|| core.preauth.clone())
            .flatten();
        core.sessions.insert(
            id,
            Channel {
                session: sref,
                signing_key: None,
                auth: None,
                preauth,
                binding: false,
                client_encrypts: false,
            },
        );
        return id;
    }
}

/// Drop this connection's channel of a session whose setup failed; a
/// session that never became valid leaves the server too.
fn abandon(core: &mut ConnCore, session_id: u64) {
    if let Some(ch) = core.sessions.remove(&session_id) {
        let asks = leave_channel(&core.server, &ch.session, core.conn_id, core.now.mono_ms);
        core.post_closes(asks);
    }
}

/// Connection `conn_id` leaves a session (it closed, or its setup failed).
/// The session ends with its last channel, or at once when it never became
/// valid: its opens are closed and it leaves the GlobalSessionTable. What the closes ask of the
/// cluster is returned, to be asked ([`ConnCore::post_closes`]).
#[must_use = "the closes' questions to the cluster are to be asked"]
pub(crate) fn leave_channel(
    server: &Arc<ServerState>,
    sref: &SessionRef,
    conn_id: u64,
    now_ms: u64,
) -> Vec<Lookup> {
    let gone = {
        let mut s = lock(sref);
        s.channels.retain(|c| *c != conn_id);
        let gone = !s.closed && (s.channels.is_empty() || !s.valid);
        if gone {
            s.closed = true;
        }
        gone.then(|| (s.id, crate::opens::take_where(&mut s, |_| true)))
    };
    let Some((id, opens)) = gone else {
        return Vec::new();
    };
    // Durable opens wait for their client to reconnect ([MS-SMB2] 3.3.7.1).
    let asks = crate::durable::park_or_close_all(server, opens, now_ms);
    server.sessions.remove(id);
    asks
}

/// `logon_waits`: a SESSION_SETUP of this session waits for a lookup
/// ([`crate::cmd::LookupCont`]); another is not accepted meanwhile.
pub(crate) fn handle(
    core: &mut ConnCore,
    req: &Req<'_>,
    logon_waits: bool,
) -> Result<Handled, NtStatus> {
    let Some(dialect) = core.dialect() else {
        return Err(NtStatus::INVALID_PARAMETER);
    };
    let setup = SessionSetupRequest::decode(req.msg).map_err(|e| e.status())?;
    if logon_waits {
        // The exchange's last step is being checked: one request at a time.
        return Err(NtStatus::REQUEST_NOT_ACCEPTED);
    }
    if let Some((request, logons)) =
        domain_question(core, req.hdr.session_id, setup.security_buffer)
    {
        // The domain checks the response before the exchange changes anything; the request
        // then runs again with the answer ([`crate::cmd::LookupCont::Again`]).
        return Ok(Handled::lookup(
            Lookup::DomainNtlm {
                logons,
                request: request.clone(),
            },
            LookupCont::Again(Asked::Ntlm(request)),
        ));
    }
    if let Some((request, kdcs)) = kdc_question(core, req.hdr.session_id, setup.security_buffer) {
        // An IAKerb client's KDC request: a KDC of the realm answers it away from the I/O
        // thread, and the request runs again with the reply at hand.
        return Ok(Handled::lookup(
            Lookup::Kdc {
                kdcs,
                request: request.clone(),
            },
            LookupCont::Again(Asked::Kdc(request)),
        ));
    }
    if setup.flags.contains(SessionSetupFlags::BINDING) && req.hdr.session_id != 0 {
        return bind(core, req, dialect, setup.security_buffer).map(Handled::Reply);
    }
    let session_id = leg_session(core, req, dialect)?;
    // Re-authentication of a valid session: its keys stay, and every answer
    // is signed with this channel's key ([MS-SMB2] 3.3.5.5.3).
    let reauth = core
        .sessions
        .get(&session_id)
        .is_some_and(|ch| ch.signing_key.is_some() && lock(&ch.session).valid);
    match auth_leg(core, session_id, req.msg, setup.security_buffer)? {
        Ok((ServerStep::Continue(token), _)) => {
            let mut r = more_processing(session_id, dialect, &token);
            if reauth {
                r.rare().sign_with_session = Some(session_id);
            }
            Ok(Handled::Reply(r))
        }
        Ok((ServerStep::Done { token, result }, domain_user)) => {
            core.logon_ended(false);
            let anonymous = result.kind == AuthKind::Anonymous;
            let expires = result
                .kerberos
                .as_ref()
                .map(|k| FileTime::from_unix_nanos(i128::from(k.end_time) * 1_000_000_000).0);
            if let Some(k) = &result.kerberos {
                let domain_user = domain_user.as_ref().map(|d| d.display.as_str());
                tracing::info!(peer = %core.peer, client = %k.client_name(), service = %k.service,
                    key = %k.key_entry, domain_user, "Kerberos logon");
            }
            Ok(ask_account(
                core,
                Finishing {
                    session_id,
                    dialect,
                    client_security_mode: setup.security_mode.0,
                    token,
                    user: result.user,
                    anonymous,
                    guest: false,
                    session_key: Some(result.session_key),
                    domain: domain_user,
                    expires,
                    previous_session_id: setup.previous_session_id,
                },
            ))
        }
        Err(AuthError::NoSuchUser(user))
            if core.server.config.map_bad_user_to_guest && core.server.shares().guest_enabled =>
        {
            core.logon_ended(false);
            Ok(ask_account(
                core,
                Finishing {
                    session_id,
                    dialect,
                    client_security_mode: setup.security_mode.0,
                    token: Vec::new(),
                    user,
                    anonymous: false,
                    guest: true,
                    session_key: None,
                    domain: None,
                    expires: None,
                    previous_session_id: 0,
                },
            ))
        }
        Err(e) => leg_failed(core, session_id, e),
    }
}

/// The session a SESSION_SETUP leg is for: a new one (SessionId 0), or one of this
/// connection's going on with its exchange or re-authenticating ([MS-SMB2] 3.3.5.5).
fn leg_session(core: &mut ConnCore, req: &Req<'_>, dialect: Dialect) -> Result<u64, NtStatus> {
    Ok(if req.hdr.session_id == 0 {
        if core.sessions.len() >= limits::SESSIONS_PER_CONNECTION_MAX {
            return Err(NtStatus::INSUFFICIENT_RESOURCES);
        }
        new_session(core, dialect)
    } else {
        if !core.sessions.contains_key(&req.hdr.session_id) {
            // Not a session of this connection ([MS-SMB2] 3.3.5.5); the
            // answer to a signed request is signed with the session's key
            // when the server has it (`Connection::session_deleted_key`).
            return Err(NtStatus::USER_SESSION_DELETED);
        }
        if core
            .sessions
            .get(&req.hdr.session_id)
            .is_some_and(|ch| lock(&ch.session).closed)
        {
            // Ended on another channel (or by a failed re-authentication).
            core.sessions.remove(&req.hdr.session_id);
            return Err(NtStatus::USER_SESSION_DELETED);
        }
        let ch = core
            .sessions
            .get_mut(&req.hdr.session_id)
            .ok_or(NtStatus::USER_SESSION_DELETED)?;
        if ch.binding {
            // A binding goes on with the BINDING flag on every leg.
            return Err(NtStatus::INVALID_PARAMETER);
        }
        if ch.auth.is_none() && dialect == Dialect::SMB3_1_1 {
            // Re-authentication starts a new preauth hash from the connection's.
            ch.preauth = core.preauth.clone();
        }
        req.hdr.session_id
    })
}

/// A leg the exchange refused: LOGON_FAILURE (INVALID_PARAMETER for a token that does not
/// parse) with the failed-logon line. A session that never became valid goes; a failed
/// re-authentication ends the session on every channel, answered signed with the key the
/// client knows.
fn leg_failed(core: &mut ConnCore, session_id: u64, e: AuthError) -> Result<Handled, NtStatus> {
    // A token that does not parse is a bad parameter, not a wrong password.
    let status = match e {
        AuthError::Malformed(_) => NtStatus::INVALID_PARAMETER,
        _ => NtStatus::LOGON_FAILURE,
    };
    log_failed_logon(core, &e, status, "");
    core.logon_ended(true);
    let was_valid = core
        .sessions
        .get(&session_id)
        .is_some_and(|ch| lock(&ch.session).valid);
    if !was_valid {
        abandon(core, session_id);
        return Err(status);
    }
    // A failed re-authentication ends the session on every channel
    // (its files close); the answer is still signed with the key the
    // client knows.
    // The channel stays in this connection's table until its next
    // request, which then gets USER_SESSION_DELETED signed with it.
    let ended = core.sessions.get(&session_id).map(|ch| {
        let asks = end_session(&core.server, &ch.session);
        (asks, ch.signing_key.clone())
    });
    let key = ended.and_then(|(asks, key)| {
        core.post_closes(asks);
        key
    });
    let mut r = Reply::with_status(status, Vec::new());
    r.rare().sign_key = key;
    Ok(Handled::Reply(r))
}

/// A logon whose exchange ended, waiting for the account it acts as ([`ask_account`]).
pub(crate) struct Finishing {
    session_id: u64,
    dialect: Dialect,
    client_security_mode: u16,
    /// The exchange's final token.
    token: Vec<u8>,
    user: String,
    anonymous: bool,
    guest: bool,
    session_key: Option<Vec<u8>>,
    domain: Option<DomainUser>,
    /// A Kerberos session's end (its ticket's), as a FILETIME.
    expires: Option<u64>,
    previous_session_id: u64,
}

impl Finishing {
    /// The session the logon sets up (a new one's id was made by the request that asked).
    pub(crate) fn session_id(&self) -> u64 {
        self.session_id
    }
}

/// The NTLM response the domain must check before the SESSION_SETUP leg of `session_id` that
/// carries `token` can go on, on a domain member ([`ServerAuth::domain_request`]), and who
/// checks it; None when there is none, or its answer is at hand ([`ConnCore::domain_answer`]).
fn domain_question(
    core: &ConnCore,
    session_id: u64,
    token: &[u8],
) -> Option<(
    ringshare_auth::DomainNtlmRequest,
    Arc<dyn crate::domain::DomainLogons>,
)> {
    if session_id == 0 {
        return None;
    }
    let member = core.server.logons.domain()?;
    let logons = core.server.logons.domain_logons()?;
    let asked = core
        .sessions
        .get(&session_id)?
        .auth
        .as_ref()?
        .domain_request(token)?;
    let answered = matches!(&core.domain_answer, Some(DomainAnswer::Ntlm(r, _)) if *r == asked);
    (asked.domain.eq_ignore_ascii_case(&member.workgroup) && !answered).then_some((asked, logons))
}

/// The KDC exchange an IAKerb client's `token` (the SESSION_SETUP leg of `session_id`, 0 for a
/// new session) asks the server to relay to its realm's KDC ([`ServerAuth::kdc_request`]), and
/// how the KDCs are reached; None when there is none, or its answer is at hand.
fn kdc_question(
    core: &ConnCore,
    session_id: u64,
    token: &[u8],
) -> Option<(
    ringshare_auth::krb5::iakerb::KdcRequest,
    Arc<dyn crate::lookup::Kdcs>,
)> {
    let kdcs = core.server.logons.kdcs()?;
    let config = core.server.logons.kerberos()?;
    let exchange = core
        .sessions
        .get(&session_id)
        .filter(|_| session_id != 0)
        .and_then(|ch| ch.auth.as_ref());
    let asked = match exchange {
        Some(auth) => auth.kdc_request(token)?,
        None => ServerAuth::first_kdc_request(&config, token)?,
    };
    let answered = matches!(&core.domain_answer, Some(DomainAnswer::Kdc(r, _)) if *r == asked);
    (!answered).then_some((asked, kdcs))
}

/// Ask for the Unix account `fin` acts as: the user's own, or for guest and anonymous logons
/// the `guest account`; a domain user's is the first of the names winbind or sssd may give it
/// that NSS knows. The logon goes on in [`resume`].
fn ask_account(core: &mut ConnCore, fin: Finishing) -> Handled {
    let names = match (&fin.domain, fin.guest || fin.anonymous) {
        (_, true) => vec![core.server.config.guest_account.clone()],
        (Some(d), false) => d.names.clone(),
        (None, false) => vec![fin.user.clone()],
    };
    // A domain user without a PAC (NTLM) gets the SIDs of their ids from winbind with the
    // account, where no rid range computes them.
    let no_pac = fin.domain.as_ref().is_some_and(|d| d.sids.is_empty()) && !fin.guest;
    let domain_ids = core
        .server
        .logons
        .id_source()
        .filter(|_| no_pac)
        .map(|s| (s, core.server.logons.sid_map.id_ranges()))
        .filter(|(_, r)| !r.is_empty());
    Handled::lookup(
        Lookup::Account {
            accounts: Arc::clone(&core.server.logons.accounts),
            names,
            domain_ids,
        },
        LookupCont::Logon(Box::new(fin)),
    )
}

/// The logon `fin` goes on with the answer to [`ask_account`].
pub(crate) fn resume(
    core: &mut ConnCore,
    fin: Finishing,
    done: LookupDone,
) -> Result<Reply, NtStatus> {
    let found = match done {
        LookupDone::Account(a) => a,
        LookupDone::DomainNtlm(_)
        | LookupDone::Kdc(_)
        | LookupDone::Ids(_)
        | LookupDone::Names(_)
        | LookupDone::Quota(_)
        | LookupDone::Cluster(_)
        | LookupDone::Home(_)
        | LookupDone::Fs(_) => Err(AccountError::Lookup("not an account's answer".into())),
    };
    let account = account_from(core, &fin, found);
    let (session_id, expires, previous) = (fin.session_id, fin.expires, fin.previous_session_id);
    let r = finish(core, fin, account)?;
    if let Some(sref) = core.session(session_id) {
        // A Kerberos session ends with its ticket; a re-authentication sets the new
        // ticket's end (or none, over NTLM).
        lock(&sref).expires_filetime = expires;
    }
    if previous != 0 && previous != session_id {
        end_previous_session(core, session_id, previous);
    }
    Ok(r)
}

/// The account `fin` acts as, from what NSS answered: a domain user's gets the SIDs of their
/// PAC. A user without an account is refused, as Samba refuses an smbpasswd entry without a
/// Unix account, with one log line saying what to do.
fn account_from(
    core: &ConnCore,
    fin: &Finishing,
    found: Result<Account, AccountError>,
) -> Result<Account, NtStatus> {
    let guest_like = fin.guest || fin.anonymous;
    let e = match (found, &fin.domain) {
        (Ok(mut a), Some(d)) if !guest_like => {
            // The PAC's SIDs, and those of the account's ids where rid ranges hold them
            // (all a domain user logged on over NTLM has).
            let mut sids = d.sids.to_vec();
            // Those winbind gave with the account (NTLM on a non-rid member).
            let computed =
                core.server
                    .logons
                    .sid_map
                    .sids_of(a.who.uid(), a.who.groups(), core.now.mono_ms);
            for s in a.sids.iter().cloned().chain(computed) {
                if !sids.contains(&s) {
                    sids.push(s);
                }
            }
            a.sids = sids.into();
            return Ok(a);
        }
        (Ok(a), _) => return Ok(a),
        (Err(e), _) => e,
    };
    if !core.log_ok(LogKind::RefusedLogon) {
        return Err(NtStatus::LOGON_FAILURE);
    }
    let (user, name) = (&fin.user, &core.server.config.guest_account);
    match (&e, &fin.domain, guest_like) {
        (AccountError::NoSuchUser, Some(d), false) => tracing::warn!(
            "refusing the logon of {}: NSS knows no account named {}; a domain member needs \
             winbind or sssd in nsswitch.conf's passwd and group lines",
            d.display,
            d.names.join(" or ")
        ),
        (AccountError::NoSuchUser, None, false) => tracing::warn!(
            "refusing the logon of {user:?}: no Unix account of that name; \
             every user needs one to act as (create it with `useradd -M -s /usr/sbin/nologin {user}`)"
        ),
        (AccountError::NoSuchUser, _, true) => tracing::warn!(
            "refusing a guest logon: the guest account {name:?} does not exist \
             (set 'guest account' to an existing account)"
        ),
        (e, Some(d), false) => tracing::warn!("refusing the logon of {}: {e}", d.display),
        (e, _, _) => tracing::warn!("refusing the logon of {user:?}: {e}"),
    }
    Err(NtStatus::LOGON_FAILURE)
}

/// Who the session acts for: the user and its account, or guest or anonymous.
fn act_for(session: &mut Session, who: Who) {
    session.account = Some(who.account);
    session.user = who.user;
    session.is_guest = who.guest;
    session.is_anonymous = who.anonymous;
}

/// End a session everywhere: every channel finds it gone, its files close (what the closes
/// ask of the cluster is returned, to be asked).
#[must_use = "the closes' questions to the cluster are to be asked"]
fn end_session(server: &Arc<ServerState>, sref: &SessionRef) -> Vec<Lookup> {
    let (id, opens) = {
        let mut s = lock(sref);
        s.closed = true;
        s.channels.clear();
        (s.id, crate::opens::take_where(&mut s, |_| true))
    };
    let asks = crate::opens::close_all(server, opens);
    server.sessions.remove(id);
    asks
}

/// [MS-SMB2] 3.3.5.5 (binding) and 3.3.5.5.2: add this connection as a
/// channel of an existing session. The NTLM exchange runs on this
/// connection; every leg is signed with Session.SigningKey; the channel's
/// own signing key is derived from the key of this exchange (3.1.1: over
/// this exchange's preauth hash) and signs the final response.
fn bind(
    core: &mut ConnCore,
    req: &Req<'_>,
    dialect: Dialect,
    token: &[u8],
) -> Result<Reply, NtStatus> {
    // Once a binding request proves it holds the session's key, its error
    // responses are signed with that key too: clients take an unsigned
    // answer to a signed request for a forgery.
    // The session's key and algorithm, whatever this connection negotiated:
    // a client binding from a 2.x connection still checks the answer with it.
    let proven = core
        .server
        .sessions
        .find(req.hdr.session_id)
        .and_then(|s| lock(&s).signing_key.clone())
        .filter(|k| req.hdr.is_signed() && signature_ok(k, req));
    match bind_checked(core, req, dialect, token) {
        Err(status) if proven.is_some() => {
            let mut r = Reply::with_status(status, Vec::new());
            r.rare().sign_key = proven;
            Ok(r)
        }
        other => other,
    }
}

/// Whether a new channel may bind to session `s` ([MS-SMB2] 3.3.5.5), the
/// checks in the order Windows makes them: `(dialect, algorithm, cipher)` are
/// this connection's.
fn may_bind(
    core: &ConnCore,
    req: &Req<'_>,
    s: &Session,
    (dialect, algorithm, cipher): (Dialect, SignAlg, Option<ringshare_crypto::encrypt::Cipher>),
) -> Result<(), NtStatus> {
    // The checks in the order Windows makes them ([MS-SMB2]
    // 3.3.5.5; the signing-algorithm ones are Windows behaviour that
    // smbtorture's bind_negative tests check): AES-GMAC on one side
    // only, then the dialect family, the signature, the dialect, the
    // cipher. A client bound from another ClientGuid is accepted, as
    // Windows does (one process holds every session here).
    let session_alg = s.signing_key.as_ref().map(SigningKey::algorithm);
    let gmac = |a: Option<SignAlg>| a == Some(SignAlg::AesGmac);
    if gmac(session_alg) && algorithm != SignAlg::AesGmac {
        return Err(NtStatus::REQUEST_OUT_OF_SEQUENCE);
    }
    if algorithm == SignAlg::AesGmac && session_alg.is_some() && !gmac(session_alg) {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    if dialect.0 < Dialect::SMB3_0.0 || !core.server.config.multi_channel {
        return Err(NtStatus::REQUEST_NOT_ACCEPTED);
    }
    if !req.hdr.is_signed() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if s.dialect != dialect.0 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if s.encrypt_key.as_ref().map(|k| k.cipher()) != cipher {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if !s.valid {
        return Err(NtStatus::REQUEST_NOT_ACCEPTED);
    }
    if s.is_guest || s.is_anonymous {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    if s.channels.len() >= limits::CHANNELS_PER_SESSION_MAX {
        return Err(NtStatus::INSUFFICIENT_RESOURCES);
    }
    Ok(())
}

fn bind_checked(
    core: &mut ConnCore,
    req: &Req<'_>,
    dialect: Dialect,
    token: &[u8],
) -> Result<Reply, NtStatus> {
    let session_id = req.hdr.session_id;
    // GlobalSessionTable, not this connection's table: the session lives elsewhere.
    let sref = core
        .server
        .sessions
        .find(session_id)
        .ok_or(NtStatus::USER_SESSION_DELETED)?;
    let continuing = match core.sessions.get(&session_id) {
        Some(ch) if ch.binding => true,
        // Already a channel of this session on this connection.
        Some(_) => return Err(NtStatus::REQUEST_NOT_ACCEPTED),
        None => false,
    };
    let algorithm = signing_algorithm(core, dialect);
    let cipher = core.negotiated.as_ref().and_then(|n| n.cipher);
    let (session_key, user) = {
        let s = lock(&sref);
        if s.closed {
            return Err(NtStatus::USER_SESSION_DELETED);
        }
        if !continuing {
            may_bind(core, req, &s, (dialect, algorithm, cipher))?;
        }
        let key = s.signing_key.clone().ok_or(NtStatus::NOT_SUPPORTED)?;
        (key, s.user.clone())
    };
    if !req.hdr.is_signed() || !signature_ok(&session_key, req) {
        tracing::debug!(peer = %core.peer, "binding request not signed with the session's key");
        if continuing {
            abandon(core, session_id);
        }
        return Err(NtStatus::ACCESS_DENIED);
    }
    if !continuing {
        let preauth = (dialect == Dialect::SMB3_1_1)
            .then(|| core.preauth.clone())
            .flatten();
        core.sessions.insert(
            session_id,
            Channel {
                session: Arc::clone(&sref),
                signing_key: None,
                auth: None,
                preauth,
                binding: true,
                client_encrypts: false,
            },
        );
    }
    match auth_leg(core, session_id, req.msg, token)? {
        Ok((ServerStep::Continue(token), _)) => {
            let mut r = more_processing(session_id, dialect, &token);
            // The request was signed with Session.SigningKey and so is the
            // interim response: the channel has no key of its own yet
            // (clients refuse an unsigned response to a signed request).
            r.rare().sign_key = Some(session_key);
            Ok(r)
        }
        Ok((ServerStep::Done { token, result }, domain_user)) => {
            core.logon_ended(false);
            // [MS-SMB2] 3.3.5.5.3: the binding must be by the session's user.
            let same_user = match &domain_user {
                Some(d) => d.names.iter().any(|n| n.eq_ignore_ascii_case(&user)),
                None => result.user.eq_ignore_ascii_case(&user),
            };
            if result.kind == AuthKind::Anonymous || !same_user {
                if core.log_ok(LogKind::RefusedLogon) {
                    tracing::info!(peer = %core.peer, "logon refused: a binding by another user than the session's");
                }
                abandon(core, session_id);
                return Err(NtStatus::ACCESS_DENIED);
            }
            let ch = core
                .sessions
                .get_mut(&session_id)
                .ok_or(NtStatus::USER_SESSION_DELETED)?;
            let preauth = ch.preauth.take().map(|p| p.0);
            let derived = keys::derive(dialect.0, &result.session_key, preauth.as_ref(), 16);
            ch.signing_key = Some(SigningKey::new(algorithm, derived.signing));
            ch.binding = false;
            let sref = Arc::clone(&ch.session);
            let encrypt_data = {
                let mut s = lock(&sref);
                if s.closed {
                    drop(s);
                    abandon(core, session_id);
                    return Err(NtStatus::USER_SESSION_DELETED);
                }
                s.channels.push(core.conn_id);
                s.encrypt_key.is_some()
                    && matches!(
                        core.encrypt_policy(core.server.config.encrypt),
                        EncryptPolicy::Desired | EncryptPolicy::Required
                    )
            };
            core.authenticated = true;
            core.user_logged_on = true;
            tracing::debug!(peer = %core.peer, session = session_id, conn = core.conn_id, "channel bound");
            let mut flags = SessionFlags::empty();
            if encrypt_data {
                flags.insert(SessionFlags::ENCRYPT_DATA);
            }
            let mut r = Reply::ok(body(flags, &token));
            r.rare().session_id = Some(session_id);
            // Signed with the new Channel.SigningKey.
            r.rare().sign_with_session = Some(session_id);
            Ok(r)
        }
        Err(e) => {
            log_failed_logon(core, &e, NtStatus::LOGON_FAILURE, "; binding a channel");
            core.logon_ended(true);
            abandon(core, session_id);
            Err(NtStatus::LOGON_FAILURE)
        }
    }
}

/// One leg of the NTLM/SPNEGO exchange on the channel `session_id` (a new
/// session, a re-authentication or a binding): the request joins the channel's
/// preauth hash and `token` goes to the exchange, started on the first leg.
/// Once the exchange ends, done or failed, the channel forgets it; a finished
/// one comes with whom it acts as ([`kerberos_user`]: a domain user's names
/// and SIDs).
fn auth_leg(
    core: &mut ConnCore,
    session_id: u64,
    msg: &[u8],
    token: &[u8],
) -> Result<Result<(ServerStep, Option<DomainUser>), AuthError>, NtStatus> {
    let challenge: [u8; 8] = core.random_bytes();
    let cfg = ntlm_config(core);
    let now = core.now.filetime;
    let users = core.server.logons.users();
    let member = core
        .server
        .logons
        .domain()
        .filter(|_| core.server.logons.domain_logons().is_some());
    let (answer, kdc_answer) = match core.domain_answer.take() {
        Some(DomainAnswer::Kdc(request, reply)) => (None, Some((request, reply))),
        ntlm => (ntlm, None),
    };
    let kerberos = kerberos(core);
    let ch = core
        .sessions
        .get_mut(&session_id)
        .ok_or(NtStatus::USER_SESSION_DELETED)?;
    if let Some(p) = ch.preauth.as_mut() {
        p.update(msg);
    }
    let auth = ch.auth.get_or_insert_with(|| {
        let a = ServerAuth::new(&cfg, challenge, now);
        Box::new(match kerberos {
            Some(k) => a.with_kerberos(k),
            None => a,
        })
    });
    if let Some((request, reply)) = kdc_answer {
        auth.kdc_answered(request, reply);
    }
    let step = match &member {
        Some(m) => {
            let lookup = crate::lookup::WithDomain {
                local: users.as_ref(),
                workgroup: &m.workgroup,
                answer: answer.as_ref(),
            };
            auth.step(token, &lookup)
        }
        None => auth.step(token, users.as_ref()),
    };
    if !matches!(step, Ok(ServerStep::Continue(_))) {
        ch.auth = None;
    }
    // Who a finished logon acts as ([`kerberos_user`]).
    Ok(step.and_then(|s| kerberos_user(s, member.as_deref(), &core.server.logons.sid_map)))
}

/// The signing algorithm sessions of this connection use.
fn signing_algorithm(core: &ConnCore, dialect: Dialect) -> SignAlg {
    match dialect {
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
    }
}

/// The one line of a failed logon ([`FailedLogon`]; fail2ban matches it),
/// within the peer's log budget.
fn log_failed_logon(core: &ConnCore, e: &AuthError, status: NtStatus, more: &str) {
    if !core.log_ok(LogKind::FailedLogon) {
        return;
    }
    let (user, why) = match e {
        AuthError::NoSuchUser(u) => (u.as_str(), "unknown user".to_string()),
        AuthError::WrongPassword(u) => (u.as_str(), "wrong password".to_string()),
        AuthError::Domain(u, why) => (u.as_str(), format!("the domain refused it: {why}")),
        other => ("", other.to_string()),
    };
    let line = FailedLogon {
        peer: PeerIp(core.peer_ip),
        user,
        status,
        why: &format!("{why}{more}"),
    };
    tracing::warn!("{line}");
}

/// A logon with its account: the session's keys, signing and encryption, and whom it acts for.
fn finish(
    core: &mut ConnCore,
    fin: Finishing,
    account: Result<Account, NtStatus>,
) -> Result<Reply, NtStatus> {
    let Finishing {
        session_id,
        dialect,
        client_security_mode,
        token,
        user,
        anonymous,
        guest,
        session_key,
        domain,
        ..
    } = fin;
    let token = token.as_slice();
    let account = match account {
        Ok(a) => a,
        Err(status) => return refuse(core, session_id, None, status),
    };
    // A domain user is known by the name NSS gives their account (`DOMAIN\name`).
    let who = Who {
        user: if domain.is_some() {
            account.name.clone()
        } else {
            user
        },
        account,
        guest,
        anonymous,
    };
    let keying = Keying {
        dialect,
        signing_alg: signing_algorithm(core, dialect),
        cipher: core.negotiated.as_ref().and_then(|n| n.cipher),
        policy: core.server.config.signing,
        client_requires: (client_security_mode
            | core
                .negotiated
                .as_ref()
                .map_or(0, |n| n.client_security_mode))
            & SecurityMode::SIGNING_REQUIRED.0
            != 0,
        anonymous,
    };
    let encrypt = core.server.config.encrypt;
    // A user's session signs and may encrypt; an anonymous one gets the keys of
    // its (zero-based) session key too, as Windows Server 2022 and Samba 4.19+
    // give them: a signed request on it is checked, an unsigned one taken, and an
    // encrypted one taken once a user logged on on the connection. Guests have none.
    let can_sign = !anonymous && !guest && session_key.is_some();
    let keyed = !guest && session_key.is_some();
    let ch = core
        .sessions
        .get_mut(&session_id)
        .ok_or(NtStatus::USER_SESSION_DELETED)?;
    let sref = Arc::clone(&ch.session);
    let preauth = ch.preauth.take().map(|p| p.0);
    let mut session = lock(&sref);
    if session.valid && ch.signing_key.is_some() {
        drop(session);
        return Ok(reauthenticated(
            core, &sref, session_id, who, can_sign, token,
        ));
    }
    if keying.policy == SigningPolicy::Required && !can_sign {
        if core.log_ok(LogKind::RefusedLogon) {
            tracing::info!(peer = %core.peer, "logon refused: a guest or anonymous session, and server signing is mandatory");
        }
        let valid = session.valid;
        drop(session);
        return refuse(core, session_id, Some(valid), NtStatus::ACCESS_DENIED);
    }
    ch.signing_key = match session_key.filter(|_| keyed) {
        Some(key) => give_keys(&mut session, &keying, &key, preauth.as_ref()),
        None => {
            session.signing_key = None;
            session.signing_required = false;
            None
        }
    };
    // [MS-SMB2] 3.3.5.5.3: Session.EncryptData from the server's policy.
    let can_encrypt = session.encrypt_key.is_some() && !anonymous;
    // Over a trusted QUIC transport nothing more is asked for on this
    // connection; the session keeps the server's policy for its other channels.
    let asked = core.encrypt_policy(encrypt);
    if asked == EncryptPolicy::Required && !can_encrypt {
        if core.log_ok(LogKind::RefusedLogon) {
            tracing::info!(
                peer = %core.peer,
                "logon refused: a session that cannot be encrypted ({}), and 'server smb encrypt = required'",
                if guest || anonymous {
                    "guest and anonymous sessions are not encrypted"
                } else {
                    "the client does not encrypt"
                }
            );
        }
        let valid = session.valid;
        drop(session);
        return refuse(core, session_id, Some(valid), NtStatus::ACCESS_DENIED);
    }
    let encrypt_data =
        can_encrypt && matches!(asked, EncryptPolicy::Desired | EncryptPolicy::Required);
    session.encrypt_required = can_encrypt && encrypt == EncryptPolicy::Required;
    act_for(&mut session, who);
    session.valid = true;
    let signing_required = session.signing_required;
    drop(session);
    core.authenticated = true;
    if can_sign {
        core.user_logged_on = true;
    }
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
    r.rare().session_id = Some(session_id);
    // The final response is signed when the session can sign and either the
    // dialect is 3.1.1 or signing is required ([MS-SMB2] 3.3.5.5.3).
    if can_sign && (dialect == Dialect::SMB3_1_1 || signing_required) {
        r.rare().sign_with_session = Some(session_id);
    }
    Ok(r)
}

/// A refused logon: a session that never became valid goes (`valid` as read under its lock,
/// or looked up when not known), and the client gets `status`.
fn refuse(
    core: &mut ConnCore,
    session_id: u64,
    valid: Option<bool>,
    status: NtStatus,
) -> Result<Reply, NtStatus> {
    let valid = valid.unwrap_or_else(|| {
        core.sessions
            .get(&session_id)
            .is_some_and(|ch| lock(&ch.session).valid)
    });
    if !valid {
        abandon(core, session_id);
    }
    Err(status)
}

/// Whom a finished logon acts for.
struct Who {
    user: String,
    account: Account,
    guest: bool,
    anonymous: bool,
}

/// What a new session's keys are derived with.
struct Keying {
    dialect: Dialect,
    signing_alg: SignAlg,
    cipher: Option<ringshare_crypto::encrypt::Cipher>,
    policy: SigningPolicy,
    client_requires: bool,
    anonymous: bool,
}

/// Re-authentication ([MS-SMB2] 3.3.5.5.3): the session keeps its keys, signing and
/// encryption; only who it acts for changes (an anonymous re-authentication included). The
/// answer is signed with this channel's key, which the client still holds.
fn reauthenticated(
    core: &mut ConnCore,
    sref: &SessionRef,
    session_id: u64,
    who: Who,
    can_sign: bool,
    token: &[u8],
) -> Reply {
    let mut session = lock(sref);
    let same = session
        .account
        .as_ref()
        .is_some_and(|a| a.who == who.account.who)
        && session.user == who.user
        && (session.is_guest, session.is_anonymous) == (who.guest, who.anonymous);
    act_for(&mut session, who);
    if !same {
        crate::cmd::tree::follow_new_user(core.server.logons.accounts.as_ref(), &mut session);
    }
    let encrypt_data = session.encrypt_key.is_some()
        && matches!(
            core.encrypt_policy(core.server.config.encrypt),
            EncryptPolicy::Desired | EncryptPolicy::Required
        );
    drop(session);
    if can_sign {
        core.user_logged_on = true;
    }
    let mut flags = SessionFlags::empty();
    if encrypt_data {
        flags.insert(SessionFlags::ENCRYPT_DATA);
    }
    let mut r = Reply::ok(body(flags, token));
    r.rare().session_id = Some(session_id);
    r.rare().sign_with_session = Some(session_id);
    r
}

/// A new session's keys from its session key: 2.x signs with Session.SessionKey, the key's
/// first 16 bytes (zero-padded); 3.x derives from it, and AES-256 ciphers from the whole key.
/// Returns the first channel's signing key, the session's own ([MS-SMB2] 3.3.5.5.3).
fn give_keys(
    session: &mut Session,
    k: &Keying,
    key: &[u8],
    preauth: Option<&[u8; 64]>,
) -> Option<SigningKey> {
    let signing = keys::derive(k.dialect.0, key, preauth, 16).signing;
    let signing = SigningKey::new(k.signing_alg, signing);
    session.signing_key = Some(signing.clone());
    if let Some(cipher) = k.cipher {
        let d = keys::derive(k.dialect.0, key, preauth, cipher.key_len());
        session.encrypt_key = CipherKey::new(cipher, &d.encrypt_server_to_client)
            .ok()
            .map(Arc::new);
        session.decrypt_key = CipherKey::new(cipher, &d.decrypt_client_to_server)
            .ok()
            .map(Arc::new);
    }
    session.signing_required = !k.anonymous
        && (k.policy == SigningPolicy::Required
            || k.client_requires
            || k.policy == SigningPolicy::Desired);
    Some(signing)
}

/// [MS-SMB2] 3.3.5.5.3: a client that reconnects names its previous
/// session; when the same user owned it, that session ends (its durable
/// opens are kept for a reconnect, the others close) and its other channels
/// find it gone.
fn end_previous_session(core: &mut ConnCore, session_id: u64, previous: u64) {
    let server = core.server.clone();
    let Some(sref) = core.session(session_id) else {
        return;
    };
    let user = lock(&sref).user.clone();
    let Some(old) = server.sessions.find(previous) else {
        return;
    };
    {
        let o = lock(&old);
        if !o.is_valid() || o.is_anonymous || o.is_guest || !o.user.eq_ignore_ascii_case(&user) {
            return;
        }
    }
    tracing::debug!(previous, "a reconnecting client ends its previous session");
    // Its durable opens wait for the client to reconnect them.
    let (id, channels, opens) = {
        let mut s = lock(&old);
        s.closed = true;
        let channels = std::mem::take(&mut s.channels);
        (s.id, channels, crate::opens::take_where(&mut s, |_| true))
    };
    let asks = crate::durable::park_or_close_all(&server, opens, core.now.mono_ms);
    core.post_closes(asks);
    server.sessions.remove(id);
    core.sessions.remove(&previous);
    // Its connections answer what waits on it (CHANGE_NOTIFY: NOTIFY_CLEANUP).
    for conn_id in channels {
        server.mail.post(
            conn_id,
            crate::server::Notice::SessionEnded { session_id: id },
        );
    }
}

/// [MS-SMB2] 3.3.5.6: LOGOFF on any channel ends the session everywhere:
/// its opens close, it leaves the GlobalSessionTable, and the other
/// channels find it gone on their next request.
pub(crate) fn logoff(core: &mut ConnCore, req: &Req<'_>) -> Result<Reply, NtStatus> {
    LogoffRequest::decode(req.msg).map_err(|e| e.status())?;
    let server = core.server.clone();
    let ch = core
        .sessions
        .remove(&req.session_id)
        .ok_or(NtStatus::USER_SESSION_DELETED)?;
    let (signing_required, seal, opens) = {
        let mut session = lock(&ch.session);
        session.closed = true;
        session.channels.clear();
        let opens = crate::opens::take_where(&mut session, |_| true);
        // An encrypted LOGOFF is answered encrypted ([MS-SMB2] 3.3.4.1.4), but the
        // session is gone once the reply is sealed: reserve its key and a nonce now.
        let key = session.encrypt_key.clone().filter(|_| req.encrypted);
        let counter = session.nonce_counter.checked_add(1);
        let seal = match (key, counter) {
            (Some(key), Some(n)) => {
                session.nonce_counter = n;
                Some((key, n))
            }
            _ => None,
        };
        (session.signing_required, seal, opens)
    };
    // Durable opens outlive a LOGOFF too, as on Samba (smbtorture
    // smb2.durable-open.reopen4): the client may reconnect them.
    let asks = crate::durable::park_or_close_all(&server, opens, core.now.mono_ms);
    core.post_closes(asks);
    server.sessions.remove(req.session_id);
    let mut b = Vec::with_capacity(4);
    b.put_u16(4);
    b.put_u16(0);
    let mut r = Reply::ok(b);
    if signing_required || req.hdr.is_signed() {
        r.rare().sign_key = ch.signing_key.clone();
    }
    r.rare().seal = seal;
    Ok(r)
}

/// What an exchange accepts Kerberos tickets with (the keytab, the process's replay cache, now
/// and fresh key material), when Kerberos is on: SESSION_SETUP's, and IPC$ pipes' DCE/RPC binds.
pub(crate) fn kerberos(core: &mut ConnCore) -> Option<Kerberos> {
    let now = core.now.filetime;
    core.server.logons.kerberos().map(|config| Kerberos {
        config,
        replay: Arc::clone(&core.server.logons.replay_cache),
        now_unix: (FileTime(now).to_unix_nanos() / 1_000_000_000) as i64,
        fresh: Fresh {
            subkey: core.random_bytes(),
            seq: u32::from_le_bytes(core.random_bytes()) & 0x7fff_ffff,
        },
    })
}
