//! One SESSION_SETUP authentication exchange: SPNEGO around NTLMSSP ([MS-SPNG], [MS-NLMP]).
//!
//! The server accepts SPNEGO-wrapped or raw NTLMSSP tokens. When the SPNEGO exchange carries a
//! mechListMIC, the client's is verified and the server answers with its own: an NTLMSSP signature
//! over the DER MechTypeList as the client sent it, with the signing and sealing keys derived from
//! the exported session key ([MS-NLMP] 3.4.4, 3.4.5; [MS-SPNG] 3.1.5.1).

use std::sync::Arc;

use crate::krb5::acceptor::{self, Accepted, AcceptorConfig, Fresh};
use crate::krb5::iakerb::{self, Iakerb, KdcRequest};
use crate::krb5::mic;
use crate::krb5::replay::ReplayCache;
use crate::ntlm::{self, AuthKind, AuthResult, NtlmClient, NtlmServer};
use crate::spnego::{self, neg_state, NegToken, NegTokenResp, OID_NTLMSSP};
use crate::{AuthError, UserLookup};

/// What one exchange needs to accept Kerberos tickets: the acceptor's configuration, the
/// process-wide replay cache, the time and fresh key material.
#[derive(Clone)]
pub struct Kerberos {
    /// Keytab, realm, skew.
    pub config: Arc<AcceptorConfig>,
    /// Shared by every exchange of the process.
    pub replay: Arc<ReplayCache>,
    /// Unix time of this exchange.
    pub now_unix: i64,
    /// Random bytes for the acceptor subkey and sequence number.
    pub fresh: Fresh,
}

/// The outcome of one server step.
pub enum ServerStep {
    /// Send STATUS_MORE_PROCESSING_REQUIRED with this token.
    Continue(Vec<u8>),
    /// Authentication succeeded: send this (possibly empty) token with STATUS_SUCCESS.
    Done {
        /// The final token (empty for raw NTLMSSP).
        token: Vec<u8>,
        /// Who logged on, and the session key.
        result: AuthResult,
    },
}

impl std::fmt::Debug for ServerStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServerStep::Continue(t) => write!(f, "Continue({} bytes)", t.len()),
            ServerStep::Done { token, result } => {
                write!(f, "Done({} bytes, {result:?})", token.len())
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ServerState {
    Start,
    /// SPNEGO picked NTLMSSP but the client's first token was not an NTLM NEGOTIATE.
    AwaitNegotiate,
    /// SPNEGO picked Kerberos, and the client sent no optimistic AP-REQ.
    AwaitApReq,
    /// Kerberos was a downgrade: the AP-REP and the server's mechListMIC went out, the client's
    /// mechListMIC is awaited.
    AwaitMic,
    AwaitAuthenticate,
    /// IAKerb: relaying the client's KDC exchanges until its AP-REQ ([`iakerb`]); `true` when
    /// the tokens come in SPNEGO.
    Iakerb(bool),
    Done,
}

/// The server side of one SESSION_SETUP exchange.
pub struct ServerAuth {
    ntlm: NtlmServer,
    state: ServerState,
    /// None for raw NTLMSSP.
    spnego: Option<SpnegoCtx>,
    /// Set when the server accepts Kerberos.
    kerberos: Option<Kerberos>,
    /// Kerberos was not the client's first choice: mechListMICs must be exchanged.
    mic_required: bool,
    /// The accepted ticket while the client's mechListMIC is awaited.
    pending: Option<Box<Accepted>>,
    /// The IAKerb exchange, once the client chose IAKerb.
    iakerb: Option<Box<Iakerb>>,
    /// A KDC's answer for the next IAKerb step ([`ServerAuth::kdc_answered`]).
    kdc_answer: Option<(KdcRequest, Result<Vec<u8>, String>)>,
}

struct SpnegoCtx {
    mech_types_der: Vec<u8>,
    /// NTLMSSP was the client's first choice (else a mechListMIC is required).
    ntlm_preferred: bool,
}

fn is_ntlmssp(token: &[u8], kind: u32) -> bool {
    token.len() >= 12 && &token[..8] == b"NTLMSSP\0" && token[8..12] == kind.to_le_bytes()
}

impl ServerAuth {
    /// A server exchange that will send `server_challenge` and announce `now_filetime`.
    pub fn new(cfg: &ntlm::ServerConfig, server_challenge: [u8; 8], now_filetime: u64) -> Self {
        ServerAuth {
            ntlm: NtlmServer::new(cfg, server_challenge, now_filetime),
            state: ServerState::Start,
            spnego: None,
            kerberos: None,
            mic_required: false,
            pending: None,
            iakerb: None,
            kdc_answer: None,
        }
    }

    /// Accept Kerberos tickets too (SPNEGO's MS-KRB5 and KRB5 mechanisms).
    pub fn with_kerberos(mut self, k: Kerberos) -> Self {
        self.kerberos = Some(k);
        self
    }

    /// Accept an AP-REQ and give the final SPNEGO answer: accept-completed with the AP-REP
    /// ([MS-SPNG] 3.3.5.1; `mech` names the mechanism when this is the first answer).
    fn accept_kerberos(
        &mut self,
        ap_req: &[u8],
        mech: Option<Vec<u8>>,
    ) -> Result<ServerStep, AuthError> {
        let acc = self.accept_ticket(ap_req)?;
        if self.mic_required {
            // RFC 4178 5: the server's MIC goes with the AP-REP; the client's comes next.
            let mechs = self.mech_types_der()?;
            let our_mic = Self::acceptor_mic(&acc, &mechs)?;
            let token = spnego::encode_resp(&NegTokenResp {
                neg_state: Some(neg_state::ACCEPT_INCOMPLETE),
                supported_mech: mech,
                response_token: (!acc.token.is_empty()).then(|| acc.token.clone()),
                mech_list_mic: Some(our_mic),
            });
            self.pending = Some(Box::new(acc));
            self.state = ServerState::AwaitMic;
            return Ok(ServerStep::Continue(token));
        }
        self.state = ServerState::Done;
        let token = spnego::encode_resp(&NegTokenResp {
            neg_state: Some(neg_state::ACCEPT_COMPLETED),
            supported_mech: mech,
            response_token: (!acc.token.is_empty()).then(|| acc.token.clone()),
            mech_list_mic: None,
        });
        Ok(Self::kerberos_done(acc, token))
    }

    /// The server's mechListMIC over `mechs`: an RFC 4121 MIC token with the acceptor subkey
    /// (else the initiator's key), or for an RC4-HMAC session key an RFC 4757 one.
    fn acceptor_mic(acc: &Accepted, mechs: &[u8]) -> Result<Vec<u8>, AuthError> {
        if acc.key_etype == crate::krb5::etype::RC4_HMAC {
            return Ok(mic::make_rc4(
                &acc.session_key,
                mic::Sender::Acceptor,
                acc.seq,
                mechs,
            ));
        }
        let flags = mic::FLAG_SENT_BY_ACCEPTOR
            | if acc.token.is_empty() {
                0
            } else {
                mic::FLAG_ACCEPTOR_SUBKEY
            };
        let key = if acc.token.is_empty() {
            &acc.initiator_key.0
        } else {
            &acc.session_key
        };
        mic::make(
            key,
            acc.key_etype,
            mic::USAGE_ACCEPTOR_SIGN,
            flags,
            u64::from(acc.seq),
            mechs,
        )
    }

    /// Accept an AP-REQ with the configured keytab.
    fn accept_ticket(&self, ap_req: &[u8]) -> Result<Accepted, AuthError> {
        let k = self
            .kerberos
            .as_ref()
            .ok_or(AuthError::Unsupported("Kerberos is not configured"))?;
        acceptor::accept(&k.config, ap_req, k.now_unix, &k.fresh, &k.replay)
    }

    fn mech_types_der(&self) -> Result<Vec<u8>, AuthError> {
        Ok(self
            .spnego
            .as_ref()
            .ok_or(AuthError::Malformed("SPNEGO state lost"))?
            .mech_types_der
            .clone())
    }

    /// The client's mechListMIC after a downgrade to Kerberos: made with the acceptor subkey
    /// (or its own key, as its flags say) for the initiator's usage.
    fn check_kerberos_mic(&mut self, client_mic: Option<Vec<u8>>) -> Result<ServerStep, AuthError> {
        let acc = self
            .pending
            .take()
            .ok_or(AuthError::Malformed("Kerberos state lost"))?;
        let client_mic = client_mic.ok_or(AuthError::BadMic)?;
        let mechs = self.mech_types_der()?;
        if acc.key_etype == crate::krb5::etype::RC4_HMAC {
            // RFC 4757 7.2; its sequence number is not checked (nor is an RFC 4121 token's).
            mic::verify_rc4(
                &acc.session_key,
                mic::Sender::Initiator,
                &mechs,
                &client_mic,
            )?;
        } else {
            Self::check_cfx_mic(&acc, &mechs, &client_mic)?;
        }
        self.state = ServerState::Done;
        let token = spnego::encode_resp(&NegTokenResp {
            neg_state: Some(neg_state::ACCEPT_COMPLETED),
            supported_mech: None,
            response_token: None,
            mech_list_mic: None,
        });
        Ok(Self::kerberos_done(*acc, token))
    }

    /// An RFC 4121 MIC token from the initiator over `mechs`, made with the acceptor subkey or
    /// its own key as its flags say.
    fn check_cfx_mic(acc: &Accepted, mechs: &[u8], client_mic: &[u8]) -> Result<(), AuthError> {
        let flags = mic::flags_of(client_mic)?;
        if flags & mic::FLAG_SENT_BY_ACCEPTOR != 0 {
            return Err(AuthError::BadMic);
        }
        let (key, etype) = if flags & mic::FLAG_ACCEPTOR_SUBKEY != 0 {
            (&acc.session_key, acc.key_etype)
        } else {
            (&acc.initiator_key.0, acc.initiator_key.1)
        };
        mic::verify(key, etype, mic::USAGE_INITIATOR_SIGN, mechs, client_mic)
    }

    fn kerberos_done(acc: Accepted, token: Vec<u8>) -> ServerStep {
        let result = AuthResult {
            kind: AuthKind::User,
            user: acc.client.join("/"),
            domain: acc.client_realm.clone(),
            workstation: String::new(),
            session_key: acc.session_key.clone(),
            kerberos: Some(Box::new(acc)),
            by_domain: false,
        };
        ServerStep::Done { token, result }
    }

    /// Whether the first mechanism of the client's list that this server supports is Kerberos.
    fn picks_kerberos(&self, mech_types: &[Vec<u8>]) -> bool {
        self.kerberos.is_some()
            && mech_types
                .iter()
                .find(|m| crate::krb5::is_krb5_oid(m) || m.as_slice() == OID_NTLMSSP)
                .is_some_and(|m| crate::krb5::is_krb5_oid(m))
    }

    /// The NTLMSSP signing and sealing state of an exchange NTLM finished (raw or in SPNEGO),
    /// its sequence numbers past the mechListMICs: what DCE/RPC protects its PDUs with.
    pub fn ntlm_security(&mut self) -> Option<&mut ntlm::SessionSecurity> {
        self.ntlm.session_security()
    }

    /// Announce a different NTLMSSP Version field (for replaying captured exchanges).
    pub fn set_ntlm_version(&mut self, version: [u8; 8]) {
        self.ntlm.set_version(version);
    }

    /// The NTLM response the domain must check before `token` can be stepped: Some when this
    /// exchange awaits an NTLM AUTHENTICATE and `token` carries one of a named user (raw or in a
    /// negTokenResp). Nothing changes; a domain member asks the domain apart from the I/O thread
    /// and then steps with the answer ([`crate::UserLookup::domain_ntlm`]).
    pub fn domain_request(&self, token: &[u8]) -> Option<crate::DomainNtlmRequest> {
        if self.state != ServerState::AwaitAuthenticate {
            return None;
        }
        if token.starts_with(b"NTLMSSP\0") {
            return self
                .spnego
                .is_none()
                .then(|| self.ntlm.domain_request(token))
                .flatten();
        }
        match spnego::decode(token).ok()? {
            NegToken::Resp(resp) if self.spnego.is_some() => {
                self.ntlm.domain_request(resp.response_token.as_deref()?)
            }
            _ => None,
        }
    }

    /// Process one client token.
    pub fn step(&mut self, token: &[u8], users: &dyn UserLookup) -> Result<ServerStep, AuthError> {
        let state = self.state;
        // Any error ends the exchange.
        self.state = ServerState::Done;
        let out = self.step_inner(state, token, users);
        if out.is_err() {
            self.state = ServerState::Done;
        }
        out
    }

    fn step_inner(
        &mut self,
        state: ServerState,
        token: &[u8],
        users: &dyn UserLookup,
    ) -> Result<ServerStep, AuthError> {
        let bare_iakerb =
            state == ServerState::Start && self.kerberos.is_some() && iakerb::is_iakerb(token);
        if bare_iakerb || state == ServerState::Iakerb(false) {
            // IAKerb without SPNEGO ([`iakerb_leg`]).
            return self.iakerb_leg(Some(token), false, false);
        }
        if token.starts_with(b"NTLMSSP\0") {
            return self.step_raw(state, token, users);
        }
        if state == ServerState::Start
            && self.kerberos.is_some()
            && crate::krb5::gss_unwrap(token).is_ok()
        {
            // A bare Kerberos token, without SPNEGO (pyspnego's `kerberos` protocol sends one;
            // Windows and Samba accept it): the answer is the bare AP-REP.
            let acc = self.accept_ticket(token)?;
            self.state = ServerState::Done;
            let ap_rep = acc.token.clone();
            return Ok(Self::kerberos_done(acc, ap_rep));
        }
        let msg = spnego::decode(token)?;
        match (state, msg) {
            (ServerState::Start, NegToken::Init(init)) if self.picks_iakerb(&init.mech_types) => {
                self.spnego = Some(SpnegoCtx {
                    mech_types_der: init.mech_types_der,
                    ntlm_preferred: false,
                });
                self.iakerb_leg(init.mech_token.as_deref(), true, true)
            }
            (ServerState::Iakerb(true), NegToken::Resp(resp)) => {
                let t = resp
                    .response_token
                    .ok_or(AuthError::Malformed("negTokenResp without an IAKerb token"))?;
                self.iakerb_leg(Some(&t), true, false)
            }
            (ServerState::Start, NegToken::Init(init)) if self.picks_kerberos(&init.mech_types) => {
                // The answer names the Kerberos OID the client listed (Windows lists MS-KRB5
                // first and expects it back). When Kerberos is the client's first choice no
                // mechListMIC is needed; otherwise (NEGOEX listed first, or IAKerb after another) the optimistic
                // token is another mechanism's, and MICs are exchanged after the AP-REQ.
                let first_choice = init
                    .mech_types
                    .first()
                    .is_some_and(|m| crate::krb5::is_krb5_oid(m));
                let chosen = init
                    .mech_types
                    .iter()
                    .find(|m| crate::krb5::is_krb5_oid(m))
                    .cloned()
                    .unwrap_or_else(|| crate::krb5::OID_KRB5.to_vec());
                self.spnego = Some(SpnegoCtx {
                    mech_types_der: init.mech_types_der,
                    ntlm_preferred: false,
                });
                self.mic_required = !first_choice;
                match init.mech_token.filter(|_| first_choice) {
                    Some(t) => self.accept_kerberos(&t, Some(chosen)),
                    None => {
                        self.state = ServerState::AwaitApReq;
                        Ok(ServerStep::Continue(spnego::encode_resp(&NegTokenResp {
                            neg_state: Some(if first_choice {
                                neg_state::ACCEPT_INCOMPLETE
                            } else {
                                neg_state::REQUEST_MIC
                            }),
                            supported_mech: Some(chosen),
                            response_token: None,
                            mech_list_mic: None,
                        })))
                    }
                }
            }
            (ServerState::AwaitApReq, NegToken::Resp(resp)) => {
                let t = resp
                    .response_token
                    .ok_or(AuthError::Malformed("negTokenResp without an AP-REQ"))?;
                self.accept_kerberos(&t, None)
            }
            (ServerState::AwaitMic, NegToken::Resp(resp)) => {
                self.check_kerberos_mic(resp.mech_list_mic)
            }
            (ServerState::Start, NegToken::Init(init)) => {
                if !init.mech_types.iter().any(|m| m == OID_NTLMSSP) {
                    return Err(AuthError::Unsupported("no NTLMSSP in SPNEGO mechTypes"));
                }
                let preferred = init.mech_types.first().is_some_and(|m| m == OID_NTLMSSP);
                self.spnego = Some(SpnegoCtx {
                    mech_types_der: init.mech_types_der,
                    ntlm_preferred: preferred,
                });
                match init.mech_token {
                    Some(t) if preferred && is_ntlmssp(&t, 1) => {
                        let challenge = self.ntlm.challenge(&t)?;
                        self.state = ServerState::AwaitAuthenticate;
                        Ok(ServerStep::Continue(spnego::encode_resp(&NegTokenResp {
                            neg_state: Some(neg_state::ACCEPT_INCOMPLETE),
                            supported_mech: Some(OID_NTLMSSP.to_vec()),
                            response_token: Some(challenge),
                            mech_list_mic: None,
                        })))
                    }
                    _ => {
                        // Another mechanism's optimistic token, or none: select NTLMSSP and ask
                        // for its first token (RFC 4178 5).
                        self.state = ServerState::AwaitNegotiate;
                        Ok(ServerStep::Continue(spnego::encode_resp(&NegTokenResp {
                            neg_state: Some(if preferred {
                                neg_state::ACCEPT_INCOMPLETE
                            } else {
                                neg_state::REQUEST_MIC
                            }),
                            supported_mech: Some(OID_NTLMSSP.to_vec()),
                            response_token: None,
                            mech_list_mic: None,
                        })))
                    }
                }
            }
            (ServerState::AwaitNegotiate, NegToken::Resp(resp)) => {
                let t = resp
                    .response_token
                    .ok_or(AuthError::Malformed("negTokenResp without NTLM NEGOTIATE"))?;
                let challenge = self.ntlm.challenge(&t)?;
                self.state = ServerState::AwaitAuthenticate;
                Ok(ServerStep::Continue(spnego::encode_resp(&NegTokenResp {
                    neg_state: Some(neg_state::ACCEPT_INCOMPLETE),
                    supported_mech: None,
                    response_token: Some(challenge),
                    mech_list_mic: None,
                })))
            }
            (ServerState::AwaitAuthenticate, NegToken::Resp(resp)) => {
                if resp.neg_state == Some(neg_state::REJECT) {
                    return Err(AuthError::Unsupported("client rejected the negotiation"));
                }
                let t = resp.response_token.ok_or(AuthError::Malformed(
                    "negTokenResp without NTLM AUTHENTICATE",
                ))?;
                let result = self.ntlm.authenticate(&t, users)?;
                let ctx = self
                    .spnego
                    .as_ref()
                    .ok_or(AuthError::Malformed("SPNEGO state lost"))?;
                let mut mic = None;
                if result.kind == AuthKind::User {
                    let sec = self
                        .ntlm
                        .session_security()
                        .ok_or(AuthError::Malformed("no NTLM session"))?;
                    let verified = match &resp.mech_list_mic {
                        Some(client_mic) => {
                            sec.verify_client_to_server(&ctx.mech_types_der, client_mic)
                        }
                        // Without a MIC the mechanism list is protected only when NTLMSSP was
                        // the client's first choice anyway.
                        None => ctx.ntlm_preferred,
                    };
                    if !verified {
                        return Err(AuthError::BadMic);
                    }
                    if resp.mech_list_mic.is_some() || !ctx.ntlm_preferred {
                        mic = Some(sec.sign_server_to_client(&ctx.mech_types_der).to_vec());
                    }
                }
                self.state = ServerState::Done;
                let token = spnego::encode_resp(&NegTokenResp {
                    neg_state: Some(neg_state::ACCEPT_COMPLETED),
                    supported_mech: None,
                    response_token: None,
                    mech_list_mic: mic,
                });
                Ok(ServerStep::Done { token, result })
            }
            (ServerState::Done, _) => {
                Err(AuthError::Malformed("token after the exchange finished"))
            }
            _ => Err(AuthError::Malformed("SPNEGO token out of sequence")),
        }
    }

    fn step_raw(
        &mut self,
        state: ServerState,
        token: &[u8],
        users: &dyn UserLookup,
    ) -> Result<ServerStep, AuthError> {
        match state {
            ServerState::Start if self.spnego.is_none() => {
                let challenge = self.ntlm.challenge(token)?;
                self.state = ServerState::AwaitAuthenticate;
                Ok(ServerStep::Continue(challenge))
            }
            ServerState::AwaitAuthenticate if self.spnego.is_none() => {
                let result = self.ntlm.authenticate(token, users)?;
                self.state = ServerState::Done;
                Ok(ServerStep::Done {
                    token: Vec::new(),
                    result,
                })
            }
            _ => Err(AuthError::Malformed("raw NTLMSSP token out of sequence")),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientState {
    Start,
    SentNegotiate,
    SentAuthenticate,
    Done,
}

/// GSS tokens another implementation makes (another process: a test drives MIT's IAKerb
/// initiator through ringshare's client this way), relayed by [`ClientAuth::relayed`].
pub trait TokenSource: Send {
    /// The token answering the server's `server_token` (None at first); None once the exchange
    /// is finished.
    fn step(&mut self, server_token: Option<&[u8]>) -> Result<Option<Vec<u8>>, AuthError>;
    /// The session key, once the exchange is finished.
    fn session_key(&self) -> Option<Vec<u8>>;
}

/// A shared [`TokenSource`] (client options are cloned).
#[derive(Clone)]
pub struct Relay(pub Arc<std::sync::Mutex<dyn TokenSource>>);

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Relay")
    }
}

impl Relay {
    fn lock(&self) -> std::sync::MutexGuard<'_, dyn TokenSource + 'static> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The client side: SPNEGO-wrapped NTLMSSP, or Kerberos with a ticket from a credential cache,
/// for ringshare's own client.
pub struct ClientAuth {
    ntlm: NtlmClient,
    state: ClientState,
    mech_types_der: Vec<u8>,
    kerberos: Option<KerberosClient>,
    relay: Option<Relay>,
}

/// A Kerberos logon in progress: the service ticket, then the key the AP-REP gives.
struct KerberosClient {
    ticket: crate::krb5::ccache::Credential,
    key: Option<Vec<u8>>,
}

impl ClientAuth {
    /// A client for `domain\user`; empty user and password log on anonymously.
    pub fn new(user: &str, domain: &str, password: &str) -> Self {
        ClientAuth {
            ntlm: NtlmClient::new(user, domain, password, "RINGSHARE"),
            state: ClientState::Start,
            mech_types_der: spnego::mech_type_list(&[OID_NTLMSSP]),
            kerberos: None,
            relay: None,
        }
    }

    /// A client whose tokens `relay` makes: sent as they are, the server's handed back.
    pub fn relayed(relay: Relay) -> Self {
        let mut c = ClientAuth::new("", "", "");
        c.relay = Some(relay);
        c
    }

    /// A client that logs on with `ticket` (a service ticket for the server, from a credential
    /// cache): one round trip, mutual authentication, the AP-REP's subkey as session key.
    pub fn kerberos(ticket: crate::krb5::ccache::Credential) -> Self {
        ClientAuth {
            ntlm: NtlmClient::new("", "", "", "RINGSHARE"),
            state: ClientState::Start,
            mech_types_der: spnego::mech_type_list(&[crate::krb5::OID_KRB5]),
            kerberos: Some(KerberosClient { ticket, key: None }),
            relay: None,
        }
    }

    /// The Kerberos legs of [`ClientAuth::step`].
    fn kerberos_step(
        &mut self,
        server_token: Option<&[u8]>,
        rand: [u8; 24],
        now_filetime: u64,
    ) -> Result<Option<Vec<u8>>, AuthError> {
        let k = self
            .kerberos
            .as_mut()
            .ok_or(AuthError::Malformed("no ticket"))?;
        let key = (k.ticket.key.0, k.ticket.key.1.as_slice());
        match self.state {
            ClientState::Start => {
                let unix_100ns = now_filetime.saturating_sub(116_444_736_000_000_000);
                let params = crate::krb5::initiator::AuthenticatorParams {
                    client: k.ticket.client.0.clone(),
                    realm: k.ticket.client.1.clone(),
                    ctime: (unix_100ns / 10_000_000) as i64,
                    cusec: ((unix_100ns / 10) % 1_000_000) as i64,
                    subkey: None,
                    seq: u32::from_le_bytes([rand[0], rand[1], rand[2], rand[3]]) & 0x7fff_ffff,
                    bindings: [0; 16],
                    // Mutual, confidentiality, integrity (what SMB clients ask for).
                    gss_flags: 0x2 | 0x10 | 0x20,
                    mutual: true,
                };
                let ap_req = crate::krb5::initiator::ap_req(&k.ticket.ticket, key, &params)?;
                self.state = ClientState::SentAuthenticate;
                Ok(Some(spnego::encode_init(
                    &self.mech_types_der,
                    Some(&ap_req),
                    None,
                )))
            }
            ClientState::SentAuthenticate => {
                self.state = ClientState::Done;
                let resp = Self::resp(server_token)?;
                if resp.neg_state != Some(neg_state::ACCEPT_COMPLETED) {
                    return Err(AuthError::Unsupported(
                        "server did not complete the Kerberos logon",
                    ));
                }
                let rep = resp
                    .response_token
                    .ok_or(AuthError::Malformed("no AP-REP from the server"))?;
                let (subkey, _) = crate::krb5::initiator::read_ap_rep(key, &rep)?;
                k.key = Some(subkey.map_or_else(|| k.ticket.key.1.clone(), |(_, s)| s));
                Ok(None)
            }
            _ => Ok(None),
        }
    }

    /// Process the server's token (None or the NEGOTIATE hint at first) and produce the next
    /// token to send; `Ok(None)` means the exchange is finished. `rand` supplies the client
    /// challenge (bytes 0..8) and the random session key (8..24).
    pub fn step(
        &mut self,
        server_token: Option<&[u8]>,
        rand: [u8; 24],
        now_filetime: u64,
    ) -> Result<Option<Vec<u8>>, AuthError> {
        if let Some(r) = &self.relay {
            return r.lock().step(server_token);
        }
        if self.kerberos.is_some() {
            return self.kerberos_step(server_token, rand, now_filetime);
        }
        match self.state {
            ClientState::Start => {
                let neg = self.ntlm.negotiate();
                self.state = ClientState::SentNegotiate;
                Ok(Some(spnego::encode_init(
                    &self.mech_types_der,
                    Some(&neg),
                    None,
                )))
            }
            ClientState::SentNegotiate => {
                let resp = Self::resp(server_token)?;
                if resp
                    .supported_mech
                    .as_deref()
                    .is_some_and(|m| m != OID_NTLMSSP)
                {
                    return Err(AuthError::Unsupported("server selected another mechanism"));
                }
                let challenge = resp
                    .response_token
                    .ok_or(AuthError::Malformed("no NTLM CHALLENGE from server"))?;
                let mut cc = [0u8; 8];
                cc.copy_from_slice(&rand[..8]);
                let mut key = [0u8; 16];
                key.copy_from_slice(&rand[8..]);
                let auth = self.ntlm.authenticate(&challenge, cc, key, now_filetime)?;
                let mic = self
                    .ntlm
                    .session_security()
                    .map(|s| s.sign_client_to_server(&self.mech_types_der).to_vec());
                self.state = ClientState::SentAuthenticate;
                Ok(Some(spnego::encode_resp(&NegTokenResp {
                    neg_state: Some(neg_state::ACCEPT_INCOMPLETE),
                    supported_mech: None,
                    response_token: Some(auth),
                    mech_list_mic: mic,
                })))
            }
            ClientState::SentAuthenticate => {
                self.state = ClientState::Done;
                let Some(token) = server_token else {
                    return Ok(None);
                };
                if token.is_empty() {
                    return Ok(None);
                }
                let resp = Self::resp(Some(token))?;
                if resp.neg_state != Some(neg_state::ACCEPT_COMPLETED) {
                    return Err(AuthError::Unsupported(
                        "server did not complete the negotiation",
                    ));
                }
                // A mechListMIC the server sends must verify. One it leaves out is
                // accepted (as Samba's and Windows' clients do for older servers): it
                // only protects the choice of mechanism, and this client offers
                // NTLMSSP alone, so there is no weaker mechanism to be downgraded to.
                let verified = match (resp.mech_list_mic, self.ntlm.session_security()) {
                    (Some(mic), Some(sec)) => {
                        sec.verify_server_to_client(&self.mech_types_der, &mic)
                    }
                    _ => true,
                };
                if !verified {
                    return Err(AuthError::BadMic);
                }
                Ok(None)
            }
            ClientState::Done => Ok(None),
        }
    }

    fn resp(token: Option<&[u8]>) -> Result<NegTokenResp, AuthError> {
        let t = token.ok_or(AuthError::Malformed("server token missing"))?;
        match spnego::decode(t)? {
            NegToken::Resp(r) if r.neg_state == Some(neg_state::REJECT) => {
                Err(AuthError::Unsupported("server rejected"))
            }
            NegToken::Resp(r) => Ok(r),
            NegToken::Init(_) => Err(AuthError::Malformed("expected negTokenResp")),
        }
    }

    /// The session key once known, at most its first 16 bytes (what SMB signing keys derive
    /// from): NTLM's exported session key once the AUTHENTICATE has been produced (None for
    /// anonymous), or the Kerberos key the AP-REP gave.
    pub fn session_key(&self) -> Option<[u8; 16]> {
        if let Some(r) = &self.relay {
            return r.lock().session_key()?.get(..16)?.try_into().ok();
        }
        match &self.kerberos {
            Some(k) => k
                .key
                .as_ref()
                .and_then(|key| key.get(..16)?.try_into().ok()),
            None => self.ntlm.session_key(),
        }
    }
}

mod iakerb_leg;
#[cfg(test)]
mod iakerb_tests;
#[cfg(test)]
mod tests;
