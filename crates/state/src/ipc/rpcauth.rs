//! DCE/RPC authentication of a connection-oriented association ([MS-RPCE] 2.2.2.11, 3.3.1.5.2):
//! the auth_verifier (sec_trailer and auth_value) at the end of a PDU, the NTLMSSP legs (BIND →
//! BIND_ACK with the CHALLENGE, then AUTH3 or ALTER_CONTEXT with the AUTHENTICATE; raw, type
//! 10, or in SPNEGO, type 9, whose final negTokenResp the ALTER_CONTEXT_RESP carries: the
//! exchange is crates/auth's SESSION_SETUP one, [`ServerAuth`]), and per-PDU
//! protection: at packet integrity (levels 4 and 5) the NTLMSSP signature covers the whole PDU up
//! to the signature (header, body, padding, sec_trailer); at privacy (6) the stub and its padding
//! are also sealed ([MS-NLMP] 3.4.3).
//!
//! Only pipes made with [`super::Pipe::with_auth`] take an auth trailer: the TCP services, and the
//! named pipes of IPC$ (which need none: they ride on their SMB session's authentication, but
//! smbtorture's `sign`/`seal` bindings bind them with NTLMSSP too). Kerberos (type 16) is DCE
//! style ([MS-RPCE] 3.3.1.5.2, RFC 4121 with GSS_C_DCE_STYLE): the BIND's AP-REQ is accepted by
//! crates/auth's acceptor (keytab, replay cache, PAC) and answered with a raw AP-REP in the
//! BIND_ACK, the client's own AP-REP comes in the AUTH3 (or an ALTER_CONTEXT), and PDUs carry
//! RFC 4121 MIC tokens (integrity) or DCE-style Wrap tokens (privacy; [`DceSecurity`]) over the
//! stub, and over the PDU's header and sec_trailer too when the BIND asked for header signing
//! (PFC_SUPPORT_HEADER_SIGN, echoed in the BIND_ACK). Kerberos inside SPNEGO (type 9, what
//! impacket sends) runs the same legs in negTokenResps, with mechListMICs checked and given. A call that fails its check gets nca_s_fault_access_denied and the association
//! ends ([`super::Pipe::closed`]), as Samba's dcesrv does.

use std::sync::Arc;

use ringshare_auth::gss::{Kerberos, ServerAuth, ServerStep};
use ringshare_auth::krb5::acceptor::{self, Accepted};
use ringshare_auth::krb5::dce::{self, DceSecurity};
use ringshare_auth::krb5::is_krb5_oid;
use ringshare_auth::ntlm::{AuthKind, ServerConfig, SessionSecurity};
use ringshare_auth::spnego::{self, neg_state, NegToken, NegTokenResp};
use ringshare_auth::UserLookup;

/// RPC_C_AUTHN_WINNT: NTLMSSP.
pub const AUTHN_WINNT: u8 = 10;
/// RPC_C_AUTHN_GSS_NEGOTIATE: SPNEGO (served when it picks NTLMSSP or Kerberos).
pub const AUTHN_GSS_NEGOTIATE: u8 = 9;
/// RPC_C_AUTHN_GSS_KERBEROS: DCE-style Kerberos.
pub const AUTHN_GSS_KERBEROS: u8 = 16;
/// PFC_SUPPORT_HEADER_SIGN: the BIND offers, and the BIND_ACK accepts, header signing.
pub const PFC_SUPPORT_HEADER_SIGN: u8 = 0x04;
/// RPC_C_AUTHN_LEVEL_CONNECT: authenticated at BIND, nothing per PDU.
pub const LEVEL_CONNECT: u8 = 2;
/// RPC_C_AUTHN_LEVEL_PKT: for connection-oriented RPC the same as integrity.
pub const LEVEL_PKT: u8 = 4;
/// RPC_C_AUTHN_LEVEL_PKT_PRIVACY: signed and sealed.
pub const LEVEL_PRIVACY: u8 = 6;
/// nca_s_fault_access_denied.
pub const FAULT_ACCESS_DENIED: u32 = 5;
/// The NTLMSSP signature's length.
const SIG_LEN: usize = 16;
/// The sec_trailer's length.
const TRAILER_LEN: usize = 8;

/// What a pipe that takes authentication knows: whose passwords, the names its CHALLENGE gives,
/// the least level a call needs, and this association's challenge and time.
pub struct Acceptor {
    pub users: Arc<dyn UserLookup + Send + Sync>,
    pub names: ServerConfig,
    /// Calls below this level are refused ([`LEVEL_PKT`] for Witness; 0: anonymous allowed).
    pub min_level: u8,
    /// The server challenge (random, per association).
    pub challenge: [u8; 8],
    /// Now, in 100 ns since 1601 (the CHALLENGE's timestamp).
    pub now_filetime: u64,
    /// Kerberos tickets are accepted with this (the SMB logons' keytab and replay cache) when
    /// set; None: Kerberos binds are refused.
    pub kerberos: Option<Kerberos>,
}

/// A PDU's sec_trailer and auth_value.
pub(super) struct Trailer<'a> {
    auth_type: u8,
    level: u8,
    pad: u8,
    ctx_id: u32,
    value: &'a [u8],
}

/// Where a PDU's body ends (its sec_trailer begins), and the trailer if auth_length says one is
/// there; Err when auth_length does not fit the PDU.
pub(super) fn split(pdu: &[u8]) -> Result<(usize, Option<Trailer<'_>>), ()> {
    let auth_len = usize::from(u16::from_le_bytes([pdu[10], pdu[11]]));
    if auth_len == 0 {
        return Ok((pdu.len(), None));
    }
    let at = pdu
        .len()
        .checked_sub(auth_len + TRAILER_LEN)
        .filter(|&at| at >= 16)
        .ok_or(())?;
    let t = &pdu[at..];
    Ok((
        at,
        Some(Trailer {
            auth_type: t[0],
            level: t[1],
            pad: t[2],
            ctx_id: u32::from_le_bytes([t[4], t[5], t[6], t[7]]),
            value: &t[TRAILER_LEN..],
        }),
    ))
}

enum State {
    /// No auth trailer seen.
    None,
    /// CHALLENGE sent; the AUTHENTICATE is awaited: the exchange, its type, level and
    /// auth_context_id.
    Challenged(Box<ServerAuth>, u8, u8, u32),
    /// Kerberos: the AP-REP sent; the client's AP-REP is awaited.
    Replied(Box<Replied>),
    /// Authenticated: the keys, and the type, level and auth_context_id every PDU must carry.
    Done(Keys, u8, u8, u32),
    /// The authentication failed: every call is refused.
    Failed,
}

/// A Kerberos bind answered: the ticket, the trailer's type, level and context, and for SPNEGO
/// (type 9) the MechTypeList as the client sent it (what mechListMICs cover).
struct Replied {
    acc: Accepted,
    ty: u8,
    level: u8,
    ctx: u32,
    mech_types: Option<Vec<u8>>,
}

/// The Kerberos mechanism a SPNEGO NegTokenInit puts first, with its AP-REQ: (the mechanism's
/// OID, the AP-REQ, the MechTypeList's DER). None: not SPNEGO with Kerberos first (NTLMSSP's
/// exchange takes it).
fn spnego_kerberos(token: &[u8]) -> Option<(Vec<u8>, Vec<u8>, Vec<u8>)> {
    let Ok(NegToken::Init(init)) = spnego::decode(token) else {
        return None;
    };
    let first = init.mech_types.first().filter(|m| is_krb5_oid(m))?;
    Some((first.clone(), init.mech_token?, init.mech_types_der))
}

/// The per-PDU keys of an authenticated association.
enum Keys {
    Ntlm(Box<SessionSecurity>),
    Krb(Box<DceSecurity>),
}

/// One association's authentication.
pub(super) struct Auth {
    acceptor: Acceptor,
    state: State,
    /// Header signing was negotiated (Kerberos only: NTLMSSP signs the whole PDU anyway).
    header_signing: bool,
}

/// What a BIND's or ALTER_CONTEXT's auth trailer asks.
pub(super) enum Leg {
    /// Answer with this verifier (sec_trailer and token; empty: none).
    Answer(Vec<u8>),
    /// Refuse the BIND (bind_nak), for this reason.
    Refuse(String),
}

impl Auth {
    pub(super) fn new(acceptor: Acceptor) -> Auth {
        Auth {
            acceptor,
            state: State::None,
            header_signing: false,
        }
    }

    /// Whether the BIND_ACK says PFC_SUPPORT_HEADER_SIGN.
    pub(super) fn header_signing(&self) -> bool {
        self.header_signing
    }

    /// The level every request and response is protected at (0: none).
    pub(super) fn level(&self) -> u8 {
        match self.state {
            State::Done(_, _, level, _) => level,
            _ => 0,
        }
    }

    /// A BIND or ALTER_CONTEXT (whose pfc_flags are `pfc`) with an auth trailer: the first leg
    /// (NEGOTIATE → CHALLENGE; AP-REQ → AP-REP) or, in an ALTER_CONTEXT, the third
    /// (AUTHENTICATE; the client's AP-REP).
    pub(super) fn bind(&mut self, t: &Trailer<'_>, is_bind: bool, pfc: u8) -> Leg {
        match (&self.state, is_bind) {
            (State::None, true) if t.auth_type == AUTHN_GSS_KERBEROS => {
                return self.kerberos_bind(t, t.value, None, pfc & PFC_SUPPORT_HEADER_SIGN != 0);
            }
            (State::None, true) if t.auth_type == AUTHN_GSS_NEGOTIATE => {
                if let Some((mech, ap_req, mechs)) =
                    spnego_kerberos(t.value).filter(|_| self.acceptor.kerberos.is_some())
                {
                    let signing = pfc & PFC_SUPPORT_HEADER_SIGN != 0;
                    return self.kerberos_bind(t, &ap_req, Some((mech, mechs)), signing);
                }
            }
            (State::None, true) => {}
            (State::Challenged(..) | State::Replied(..), false) => {
                return match self.authenticate(t) {
                    Ok(token) if token.is_empty() => Leg::Answer(Vec::new()),
                    Ok(token) => Leg::Answer(verifier(t.auth_type, t.level, 0, t.ctx_id, &token)),
                    Err(why) => Leg::Refuse(why),
                };
            }
            (State::Done(_, ty, level, ctx), false)
                if t.auth_type == *ty && t.level == *level && t.ctx_id == *ctx =>
            {
                return Leg::Answer(Vec::new());
            }
            _ => return Leg::Refuse("an auth trailer out of sequence".into()),
        }
        if t.auth_type != AUTHN_WINNT && t.auth_type != AUTHN_GSS_NEGOTIATE {
            self.state = State::Failed;
            return Leg::Refuse(format!(
                "authentication type {} (NTLMSSP, 10, SPNEGO with NTLMSSP, 9, and Kerberos, 16, \
                 are served)",
                t.auth_type
            ));
        }
        if !(LEVEL_CONNECT..=LEVEL_PRIVACY).contains(&t.level) {
            self.state = State::Failed;
            return Leg::Refuse(format!("authentication level {}", t.level));
        }
        let a = &self.acceptor;
        let mut exchange = ServerAuth::new(&a.names, a.challenge, a.now_filetime);
        match exchange.step(t.value, a.users.as_ref()) {
            Ok(ServerStep::Continue(token)) => {
                let out = verifier(t.auth_type, t.level, 0, t.ctx_id, &token);
                self.state = State::Challenged(Box::new(exchange), t.auth_type, t.level, t.ctx_id);
                Leg::Answer(out)
            }
            Ok(ServerStep::Done { .. }) => {
                self.state = State::Failed;
                Leg::Refuse("an exchange that ended at its first leg".into())
            }
            Err(e) => {
                self.state = State::Failed;
                Leg::Refuse(format!("the BIND's token: {e}"))
            }
        }
    }

    /// AUTH3: the third leg; no answer, a failure refuses the calls that follow.
    pub(super) fn auth3(&mut self, t: &Trailer<'_>) -> Result<(), String> {
        self.authenticate(t).map(|_| ())
    }

    /// A Kerberos BIND: its AP-REQ accepted DCE style, the raw AP-REP to send back (in a
    /// NegTokenResp, accept-incomplete, for SPNEGO: `spnego` has the mechanism's OID and the
    /// MechTypeList).
    fn kerberos_bind(
        &mut self,
        t: &Trailer<'_>,
        ap_req: &[u8],
        spnego: Option<(Vec<u8>, Vec<u8>)>,
        header_signing: bool,
    ) -> Leg {
        self.state = State::Failed;
        let Some(k) = &self.acceptor.kerberos else {
            return Leg::Refuse("a Kerberos bind, and Kerberos is not configured".into());
        };
        if !(LEVEL_CONNECT..=LEVEL_PRIVACY).contains(&t.level) {
            return Leg::Refuse(format!("authentication level {}", t.level));
        }
        let acc = match acceptor::accept_dce(&k.config, ap_req, k.now_unix, &k.fresh, &k.replay) {
            Ok(acc) => acc,
            Err(e) => return Leg::Refuse(format!("the BIND's Kerberos ticket: {e}")),
        };
        if acc.key_etype == ringshare_auth::krb5::etype::RC4_HMAC {
            return Leg::Refuse(format!(
                "a Kerberos bind of {} with an RC4-HMAC session key (AES only for DCE/RPC)",
                acc.client_name()
            ));
        }
        let (token, mech_types) = match spnego {
            Some((mech, mechs)) => (
                spnego::encode_resp(&NegTokenResp {
                    neg_state: Some(neg_state::ACCEPT_INCOMPLETE),
                    supported_mech: Some(mech),
                    response_token: Some(acc.token.clone()),
                    mech_list_mic: None,
                }),
                Some(mechs),
            ),
            None => (acc.token.clone(), None),
        };
        let out = verifier(t.auth_type, t.level, 0, t.ctx_id, &token);
        self.header_signing = header_signing;
        self.state = State::Replied(Box::new(Replied {
            acc,
            ty: t.auth_type,
            level: t.level,
            ctx: t.ctx_id,
            mech_types,
        }));
        Leg::Answer(out)
    }

    /// The last leg: the token to send back (SPNEGO's final negTokenResp; empty for NTLMSSP
    /// and Kerberos).
    fn authenticate(&mut self, t: &Trailer<'_>) -> Result<Vec<u8>, String> {
        let state = std::mem::replace(&mut self.state, State::Failed);
        if let State::Replied(r) = state {
            return self.kerberos_done(*r, t);
        }
        let State::Challenged(mut exchange, ty, level, ctx) = state else {
            return Err("an AUTHENTICATE out of sequence".into());
        };
        if t.auth_type != ty || t.level != level || t.ctx_id != ctx {
            return Err("the AUTHENTICATE's trailer differs from the BIND's".into());
        }
        let step = exchange
            .step(t.value, self.acceptor.users.as_ref())
            .map_err(|e| e.to_string())?;
        let ServerStep::Done { token, result } = step else {
            return Err("an exchange longer than NTLMSSP's".into());
        };
        if result.kind == AuthKind::Anonymous || result.kerberos.is_some() {
            return Err("an anonymous or Kerberos logon (per-PDU keys only for NTLMSSP)".into());
        }
        let mut sec = exchange
            .ntlm_security()
            .ok_or("no NTLMSSP session keys")?
            .clone();
        if ty == AUTHN_GSS_NEGOTIATE {
            // The mechListMICs used the RC4 streams; SPNEGO starts them again (sequence
            // numbers go on), as Samba's gensec_spnego does.
            sec.reset_seal();
        }
        tracing::debug!(user = %result.user, level, "rpc: an association authenticated");
        self.state = State::Done(Keys::Ntlm(Box::new(sec)), ty, level, ctx);
        Ok(token)
    }

    /// A REQUEST PDU's body (header stripped; stub unsealed, its padding dropped) when its
    /// protection is what the association's authentication asks; else why not.
    pub(super) fn request(
        &mut self,
        pdu: &[u8],
        body_end: usize,
        t: Option<&Trailer<'_>>,
    ) -> Result<Vec<u8>, String> {
        let min = self.acceptor.min_level;
        let (sec, ty, level, ctx) = match &mut self.state {
            State::None if t.is_none() && min == 0 => return Ok(pdu[16..body_end].to_vec()),
            State::None if t.is_none() => {
                return Err(format!(
                    "an unauthenticated call (level {min}, packet integrity, is needed)"
                ))
            }
            State::Done(sec, ty, level, ctx) => (sec, *ty, *level, *ctx),
            State::Failed => return Err("a call after its authentication failed".into()),
            _ => return Err("a call before its authentication finished".into()),
        };
        if level < min {
            return Err(format!(
                "a call at authentication level {level} (level {min}, packet integrity, is needed)"
            ));
        }
        if level < LEVEL_PKT {
            return match t {
                None => Ok(pdu[16..body_end].to_vec()),
                Some(_) => Err("an auth trailer at connect level".into()),
            };
        }
        let Some(t) = t else {
            return Err("a call without its signature".into());
        };
        if t.auth_type != ty || t.level != level || t.ctx_id != ctx {
            return Err("a call whose auth trailer differs from its BIND's".into());
        }
        let pad = usize::from(t.pad);
        if !sec.takes_sig_len(level, t.value.len()) || body_end < 24 + pad || pad >= 16 {
            return Err("a call with a malformed auth trailer".into());
        }
        let signed = pdu.len() - t.value.len();
        let mut copy = pdu[..signed].to_vec();
        let checked = match sec {
            Keys::Ntlm(sec) => {
                if level == LEVEL_PRIVACY {
                    sec.seal_client_to_server(&mut copy[24..body_end]);
                }
                sec.verify_client_to_server(&copy, t.value)
                    .then_some(())
                    .ok_or_else(|| "a call whose signature does not verify".to_string())
            }
            Keys::Krb(sec) => {
                let (before, payload, after) = parts(&mut copy, body_end, self.header_signing);
                if level == LEVEL_PRIVACY {
                    sec.unwrap(before, payload, after, t.value)
                } else {
                    sec.verify_mic(&[before, &payload[..], after].concat(), t.value)
                }
                .map_err(|e| e.to_string())
            }
        };
        if let Err(why) = checked {
            self.state = State::Failed;
            return Err(why);
        }
        copy.truncate(body_end - pad);
        copy.drain(..16);
        Ok(copy)
    }

    /// The Kerberos third leg: the client's AP-REP (in a NegTokenResp for SPNEGO, with the
    /// client's mechListMIC when it sends one); for SPNEGO the final NegTokenResp to send back
    /// (accept-completed, with our mechListMIC when the client sent one).
    fn kerberos_done(&mut self, r: Replied, t: &Trailer<'_>) -> Result<Vec<u8>, String> {
        if t.auth_type != r.ty || t.level != r.level || t.ctx_id != r.ctx {
            return Err("the client's AP-REP's trailer differs from the BIND's".into());
        }
        let k = self
            .acceptor
            .kerberos
            .as_ref()
            .ok_or("Kerberos state lost")?;
        let (ap_rep, client_mic) = match &r.mech_types {
            None => (t.value.to_vec(), None),
            Some(_) => match spnego::decode(t.value) {
                Ok(NegToken::Resp(resp)) => (
                    resp.response_token
                        .ok_or("a NegTokenResp without the client's AP-REP")?,
                    resp.mech_list_mic,
                ),
                _ => return Err("the third leg is not a SPNEGO NegTokenResp".into()),
            },
        };
        acceptor::check_dce_ap_rep(&k.config, &r.acc, &ap_rep).map_err(|e| e.to_string())?;
        let mut sec = DceSecurity::new(&r.acc).map_err(|e| e.to_string())?;
        let token = match (&r.mech_types, client_mic) {
            (None, _) => Vec::new(),
            (Some(mechs), mic) => {
                let our_mic = match mic {
                    Some(mic) => {
                        sec.verify_mic(mechs, &mic)
                            .map_err(|e| format!("mechListMIC: {e}"))?;
                        Some(sec.make_mic(mechs).map_err(|e| e.to_string())?)
                    }
                    None => None,
                };
                spnego::encode_resp(&NegTokenResp {
                    neg_state: Some(neg_state::ACCEPT_COMPLETED),
                    supported_mech: None,
                    response_token: None,
                    mech_list_mic: our_mic,
                })
            }
        };
        tracing::debug!(
            user = %r.acc.client_name(),
            level = r.level,
            auth_type = r.ty,
            "rpc: an association authenticated (Kerberos)"
        );
        self.state = State::Done(Keys::Krb(Box::new(sec)), r.ty, r.level, r.ctx);
        Ok(token)
    }

    /// A RESPONSE fragment (`body`: its 8-byte header and stub) as a whole PDU, signed, and
    /// sealed at privacy; None when its token cannot be made (the association then ends).
    pub(super) fn response(&mut self, flags: u8, call_id: u32, body: &[u8]) -> Option<Vec<u8>> {
        let State::Done(sec, ty, level, ctx) = &mut self.state else {
            unreachable!("only an authenticated association protects its responses")
        };
        let sig_len = sec.sig_len(*level);
        let pad = (16 - (body.len() - 8) % 16) % 16;
        let len = 16 + body.len() + pad + TRAILER_LEN + sig_len;
        let mut pdu = super::header(super::PTYPE_RESPONSE, flags, len as u16, call_id);
        pdu[10..12].copy_from_slice(&(sig_len as u16).to_le_bytes());
        pdu.extend_from_slice(body);
        pdu.resize(16 + body.len() + pad, 0);
        pdu.extend_from_slice(&verifier(*ty, *level, pad as u8, *ctx, &[]));
        let body_end = pdu.len() - TRAILER_LEN;
        let signature = match sec {
            Keys::Ntlm(sec) if *level == LEVEL_PRIVACY => {
                let plain = pdu.clone();
                sec.seal_server_to_client(&mut pdu[24..body_end]);
                sec.sign_server_to_client(&plain).to_vec()
            }
            Keys::Ntlm(sec) => sec.sign_server_to_client(&pdu).to_vec(),
            Keys::Krb(sec) => {
                let (before, payload, after) = parts(&mut pdu, body_end, self.header_signing);
                let token = if *level == LEVEL_PRIVACY {
                    sec.wrap(before, payload, after)
                } else {
                    sec.make_mic(&[before, &payload[..], after].concat())
                };
                match token {
                    Ok(t) => t,
                    Err(e) => {
                        tracing::warn!("rpc: a response not protected: {e}");
                        return None;
                    }
                }
            }
        };
        pdu.extend_from_slice(&signature);
        Some(pdu)
    }

    /// Room a RESPONSE fragment's verifier (trailer, signature and up to 15 bytes of padding)
    /// takes.
    pub(super) fn overhead(&self) -> usize {
        match &self.state {
            State::Done(sec, _, level, _) if *level >= LEVEL_PKT => {
                TRAILER_LEN + sec.sig_len(*level) + 15
            }
            _ => 0,
        }
    }
}

impl Keys {
    /// Whether a client's signature may be `len` bytes long at `level`: a Wrap token's filler
    /// (EC) is up to a block long (MIT and Windows send 16 bytes of it, impacket as many as
    /// the stub needs to fill its last block: often none).
    fn takes_sig_len(&self, level: u8, len: usize) -> bool {
        match self {
            Keys::Krb(_) if level == LEVEL_PRIVACY => {
                (dce::WRAP_LEN - 16..=dce::WRAP_LEN).contains(&len)
            }
            _ => len == self.sig_len(level),
        }
    }

    /// The length of our signature (auth_value) at `level`.
    fn sig_len(&self, level: u8) -> usize {
        match self {
            Keys::Ntlm(_) => SIG_LEN,
            Keys::Krb(_) if level == LEVEL_PRIVACY => dce::WRAP_LEN,
            Keys::Krb(_) => dce::MIC_LEN,
        }
    }
}

/// A request or response PDU (without its signature) whose stub and padding end at `body_end`:
/// what a Kerberos token signs before the payload, the payload (stub and padding: sealed at
/// privacy), and what it signs after (the sec_trailer); the header and trailer only with
/// header signing.
fn parts(pdu: &mut [u8], body_end: usize, header_signing: bool) -> (&[u8], &mut [u8], &[u8]) {
    let (head, rest) = pdu.split_at_mut(24);
    let (payload, trailer) = rest.split_at_mut(body_end - 24);
    if header_signing {
        (head, payload, trailer)
    } else {
        (&[], payload, &[])
    }
}

/// A sec_trailer followed by `token`.
pub(super) fn verifier(auth_type: u8, level: u8, pad: u8, ctx_id: u32, token: &[u8]) -> Vec<u8> {
    let mut v = vec![auth_type, level, pad, 0];
    v.extend_from_slice(&ctx_id.to_le_bytes());
    v.extend_from_slice(token);
    v
}

#[cfg(test)]
mod tests;
