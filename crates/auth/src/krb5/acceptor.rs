//! Accepting an AP-REQ (RFC 4120 3.2.3, RFC 4121 4.1, [MS-KILE] 3.4.5.1-3.4.5.3) and answering
//! with an AP-REP that carries a fresh acceptor subkey.
//!
//! One function per step: open the ticket with a key of the keytab, check the ticket, open and
//! check the authenticator, check its GSS checksum, consult the replay cache, check the PAC,
//! and build the AP-REP. Every failure is an [`AuthError`] whose text names the reason, for the
//! server's log line.

use std::sync::Arc;

use picky_asn1::wrapper::{
    ExplicitContextTag0, ExplicitContextTag1, ExplicitContextTag2, ExplicitContextTag3,
    OctetStringAsn1, Optional,
};
use picky_asn1_der::application_tag::ApplicationTag;
use picky_krb::data_types::{
    Authenticator, AuthorizationData, EncApRepPart, EncApRepPartInner, EncTicketPart,
    EncryptedData, EncryptionKey, PrincipalName,
};
use picky_krb::messages::{ApRep, ApRepInner, ApReq};

use super::keytab::{Keytab, KeytabEntry};
use super::pac::Pac;
use super::replay::{ReplayCache, Seen};
use super::{bit, cipher, confounder, encryption_key, gss_unwrap, gss_wrap, int, int_asn1};
use super::{etype, refused, unix_time, Cipher, RC4_REFUSED};
use super::{TOK_AP_REP, TOK_AP_REQ};
use crate::AuthError;

/// Key usages (RFC 4120 7.5.1).
const USAGE_TICKET: i32 = 2;
const USAGE_AUTHENTICATOR: i32 = 11;
const USAGE_AP_REP: i32 = 12;

/// ap-options bit MUTUAL-REQUIRED; ticket flag INVALID.
const AP_MUTUAL_REQUIRED: usize = 2;
const TICKET_INVALID: usize = 7;

/// GSS checksum (RFC 4121 4.1.1): type, flags.
const GSS_CHECKSUM_TYPE: i64 = 0x8003;
const GSS_C_MUTUAL_FLAG: u32 = 0x2;
const GSS_C_DCE_STYLE: u32 = 0x1000;

/// Authorization data types: AD-IF-RELEVANT and AD-WIN2K-PAC.
const AD_IF_RELEVANT: i64 = 1;
const AD_WIN2K_PAC: i64 = 128;

/// What the acceptor accepts.
#[derive(Debug, Clone)]
pub struct AcceptorConfig {
    /// The service's keys.
    pub keytab: Arc<Keytab>,
    /// The realm tickets must be for (empty: any realm the keytab has keys of).
    pub realm: String,
    /// Largest difference between the client's clock and ours, in seconds (RFC 4120: 5 min).
    pub skew_secs: i64,
    /// Whether RC4-HMAC (enctype 23) tickets and keys are accepted besides AES (`kerberos
    /// encryption types = all`); off, they are refused with [`RC4_REFUSED`].
    pub allow_rc4: bool,
}

impl AcceptorConfig {
    /// The cipher of encryption type `e`, if this acceptor takes it.
    fn cipher(&self, e: i64) -> Result<Cipher, AuthError> {
        if e == i64::from(etype::RC4_HMAC) && !self.allow_rc4 {
            return Err(refused(RC4_REFUSED));
        }
        cipher(e)
    }
}

/// Fresh material for one acceptance (random bytes from the caller).
#[derive(Clone, Copy)]
pub struct Fresh {
    /// Bytes of the acceptor subkey (its first 16 for AES-128).
    pub subkey: [u8; 32],
    /// The acceptor's initial sequence number.
    pub seq: u32,
}

/// A ticket that was accepted.
#[derive(Clone)]
pub struct Accepted {
    /// The client's principal name components.
    pub client: Vec<String>,
    /// The client's realm.
    pub client_realm: String,
    /// The service principal the ticket named, `cifs/name@REALM`.
    pub service: String,
    /// The keytab entry that opened the ticket.
    pub key_entry: String,
    /// The GSS session key: the acceptor subkey when mutual authentication sent one, else the
    /// initiator's subkey, else the ticket's key ([MS-KILE] 3.1.1.2). Full length (32 bytes for
    /// AES-256).
    pub session_key: Vec<u8>,
    /// The session key's encryption type.
    pub key_etype: i32,
    /// The initiator's subkey (else the ticket's key) and its type: what an initiator's MIC is
    /// made with when it does not use the acceptor subkey.
    pub initiator_key: (Vec<u8>, i32),
    /// The acceptor's initial sequence number (in the AP-REP).
    pub seq: u32,
    /// The GSS token to send back (an AP-REP), empty when the client asked for none.
    pub token: Vec<u8>,
    /// The initiator's initial sequence number (the authenticator's), if it gave one.
    pub initiator_seq: Option<u32>,
    /// The ticket's session key and its type (a DCE-style client's AP-REP is encrypted with it).
    pub ticket_key: (Vec<u8>, i32),
    /// The ticket's auth time and end time (Unix seconds).
    pub auth_time: i64,
    /// When the ticket ends; the session ends with it.
    pub end_time: i64,
    /// The PAC, when the ticket had one (its server signature verified).
    pub pac: Option<Pac>,
    /// The authenticator's GSS checksum (RFC 4121 4.1.1) as sent: IAKerb's finished checksum
    /// is one of its extensions ([`super::iakerb`]).
    pub gss_checksum: Vec<u8>,
}

impl std::fmt::Debug for Accepted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Accepted")
            .field("client", &self.client_name())
            .field("service", &self.service)
            .field("end_time", &self.end_time)
            .finish_non_exhaustive()
    }
}

impl Accepted {
    /// `name@REALM`.
    pub fn client_name(&self) -> String {
        format!("{}@{}", self.client.join("/"), self.client_realm)
    }
}

fn principal(p: &PrincipalName) -> Vec<String> {
    p.name_string
        .0
         .0
        .iter()
        .map(|s| String::from_utf8_lossy(s.0.as_bytes()).into_owned())
        .collect()
}

fn realm_of(r: &picky_krb::data_types::Realm) -> String {
    String::from_utf8_lossy(r.0.as_bytes()).into_owned()
}

fn der<'a, T: serde::Deserialize<'a>>(b: &'a [u8], what: &'static str) -> Result<T, AuthError> {
    super::from_der(b, what)
}

/// The ticket opened: its decrypted part and the keytab entry that opened it.
struct OpenTicket<'k> {
    part: picky_krb::data_types::EncTicketPartInner,
    entry: &'k KeytabEntry,
    service: String,
}

/// Step 1: the ticket's service and realm, and a key of the keytab that decrypts it.
fn open_ticket<'k>(
    cfg: &'k AcceptorConfig,
    req: &picky_krb::messages::ApReqInner,
) -> Result<OpenTicket<'k>, AuthError> {
    let ticket = &req.ticket.0 .0;
    if int(&ticket.tkt_vno.0)? != 5 {
        return Err(refused("ticket version is not 5"));
    }
    let realm = realm_of(&ticket.realm.0);
    if !cfg.realm.is_empty() && !realm.eq_ignore_ascii_case(&cfg.realm) {
        return Err(refused(format!(
            "ticket for realm {realm}, this server is in {}",
            cfg.realm
        )));
    }
    let sname = principal(&ticket.sname.0);
    let service = format!("{}@{realm}", sname.join("/"));
    let svc_ok = sname.len() == 2
        && ["cifs", "host"]
            .iter()
            .any(|s| sname[0].eq_ignore_ascii_case(s));
    if !svc_ok {
        return Err(refused(format!(
            "ticket for service {service}, not cifs/ or host/"
        )));
    }
    let enc = &ticket.enc_part.0;
    let e = int(&enc.etype.0)?;
    let cipher = cfg.cipher(e)?;
    let kvno = match &enc.kvno.0 {
        Some(k) => Some(u32::try_from(int(&k.0)?).map_err(|_| refused("ticket kvno"))?),
        None => None,
    };
    let mut tried = 0;
    for entry in cfg.keytab.keys_for(&realm, e as i32, kvno) {
        tried += 1;
        if let Some(plain) = cipher.decrypt(&entry.key, USAGE_TICKET, &enc.cipher.0 .0) {
            let part: EncTicketPart = der(&plain, "EncTicketPart")?;
            return Ok(OpenTicket {
                part: part.0,
                entry,
                service,
            });
        }
    }
    let kvno = kvno.map_or("none".to_string(), |k| k.to_string());
    Err(refused(if tried == 0 {
        format!("no key in the keytab for {service} with enctype {e} and kvno {kvno}")
    } else {
        format!(
            "the keytab's keys for {service} (enctype {e}, kvno {kvno}) do not decrypt the \
             ticket: the keytab is out of date or the ticket was not made for this server"
        )
    }))
}

/// Step 2: the ticket's flags and validity period.
fn check_ticket(
    part: &picky_krb::data_types::EncTicketPartInner,
    now: i64,
    skew: i64,
) -> Result<(i64, i64), AuthError> {
    if bit(&part.flags.0 .0, TICKET_INVALID) {
        return Err(refused(
            "ticket is flagged INVALID (postdated, not yet validated)",
        ));
    }
    let auth_time = unix_time(&part.auth_time.0);
    let start = part
        .starttime
        .0
        .as_ref()
        .map_or(auth_time, |t| unix_time(&t.0));
    let end = unix_time(&part.endtime.0);
    if start > now + skew {
        return Err(refused(format!(
            "ticket not valid yet (starts {}s from now; clocks out of step?)",
            start - now
        )));
    }
    if end < now - skew {
        return Err(refused(format!("ticket expired {}s ago", now - end)));
    }
    Ok((auth_time, end))
}

/// Step 3: the authenticator, decrypted with the ticket's session key, names the ticket's
/// client and was made within the clock skew.
fn open_authenticator(
    cfg: &AcceptorConfig,
    req: &picky_krb::messages::ApReqInner,
    part: &picky_krb::data_types::EncTicketPartInner,
    now: i64,
    skew: i64,
) -> Result<picky_krb::data_types::AuthenticatorInner, AuthError> {
    let key = &part.key.0;
    let enc = &req.authenticator.0;
    let plain = cfg
        .cipher(int(&key.key_type.0)?)?
        .decrypt(&key.key_value.0 .0, USAGE_AUTHENTICATOR, &enc.cipher.0 .0)
        .ok_or_else(|| refused("authenticator does not decrypt with the ticket's session key"))?;
    let auth: Authenticator = der(&plain, "Authenticator")?;
    let auth = auth.0;
    if int(&auth.authenticator_vno.0)? != 5 {
        return Err(refused("authenticator version is not 5"));
    }
    if realm_of(&auth.crealm.0) != realm_of(&part.crealm.0)
        || principal(&auth.cname.0) != principal(&part.cname.0)
    {
        return Err(refused(
            "authenticator names another client than the ticket",
        ));
    }
    let ctime = unix_time(&auth.ctime.0);
    if (ctime - now).abs() > skew {
        return Err(refused(format!(
            "authenticator time is {}s from ours (more than the {skew}s allowed: clocks out of step)",
            ctime - now
        )));
    }
    Ok(auth)
}

/// Step 4: the GSS checksum (RFC 4121 4.1.1): no channel bindings (SMB and DCE/RPC over TCP
/// have none), DCE style exactly when `dce` (a DCE/RPC bind, [`accept_dce`]); returns the GSS
/// flags and the checksum's bytes.
fn check_gss_checksum(
    auth: &picky_krb::data_types::AuthenticatorInner,
    dce: bool,
) -> Result<(u32, Vec<u8>), AuthError> {
    let ck = auth
        .cksum
        .0
        .as_ref()
        .ok_or(refused("authenticator without a GSS checksum"))?;
    if int(&ck.0.cksumtype.0)? != GSS_CHECKSUM_TYPE {
        return Err(refused(
            "authenticator checksum is not a GSS checksum (0x8003)",
        ));
    }
    let c = &ck.0.checksum.0 .0;
    if c.len() < 24 {
        return Err(refused("GSS checksum too short"));
    }
    let lgth = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    if lgth != 16 {
        return Err(refused("GSS checksum with a bad binding length"));
    }
    if c[4..20].iter().any(|b| *b != 0) {
        return Err(refused(
            "channel bindings sent for a channel this server does not bind",
        ));
    }
    let flags = u32::from_le_bytes([c[20], c[21], c[22], c[23]]);
    if flags & GSS_C_DCE_STYLE != 0 && !dce {
        return Err(refused("DCE-style Kerberos is not used by SMB"));
    }
    if dce && flags & (GSS_C_DCE_STYLE | GSS_C_MUTUAL_FLAG) != GSS_C_DCE_STYLE | GSS_C_MUTUAL_FLAG {
        return Err(refused(
            "a DCE/RPC bind's ticket without the DCE-style and mutual flags",
        ));
    }
    Ok((flags, c.clone()))
}

/// The PAC inside AD-IF-RELEVANT, if any.
fn find_pac(ad: Option<&AuthorizationData>) -> Result<Option<Vec<u8>>, AuthError> {
    let Some(ad) = ad else { return Ok(None) };
    let mut found = None;
    for el in &ad.0 {
        if int(&el.ad_type.0)? != AD_IF_RELEVANT {
            continue;
        }
        let inner: AuthorizationData = der(&el.ad_data.0 .0, "AD-IF-RELEVANT")?;
        for i in &inner.0 {
            if int(&i.ad_type.0)? == AD_WIN2K_PAC {
                if found.is_some() {
                    return Err(refused("ticket carries two PACs"));
                }
                found = Some(i.ad_data.0 .0.clone());
            }
        }
    }
    Ok(found)
}

/// Step 6: the AP-REP with the acceptor subkey `subkey` (type, bytes), if any, encrypted with
/// the ticket's session key.
fn ap_rep(
    cfg: &AcceptorConfig,
    auth: &picky_krb::data_types::AuthenticatorInner,
    ticket_key: &EncryptionKey,
    subkey: Option<(i64, &[u8])>,
    fresh: &Fresh,
) -> Result<Vec<u8>, AuthError> {
    let part: EncApRepPart = ApplicationTag(EncApRepPartInner {
        ctime: ExplicitContextTag0::from(auth.ctime.0.clone()),
        cusec: ExplicitContextTag1::from(auth.cusec.0.clone()),
        subkey: Optional::from(
            subkey.map(|(ty, key)| ExplicitContextTag2::from(encryption_key(ty, key))),
        ),
        seq_number: Optional::from(Some(ExplicitContextTag3::from(int_asn1(fresh.seq as i64)))),
    });
    let plain = picky_asn1_der::to_vec(&part).map_err(|_| refused("encoding EncAPRepPart"))?;
    let cipher = cfg.cipher(int(&ticket_key.key_type.0)?)?.encrypt(
        &ticket_key.key_value.0 .0,
        USAGE_AP_REP,
        &plain,
        &confounder(&fresh.subkey, b"AP-REP"),
    )?;
    let rep: ApRep = ApplicationTag(ApRepInner {
        pvno: ExplicitContextTag0::from(int_asn1(5)),
        msg_type: ExplicitContextTag1::from(int_asn1(15)),
        enc_part: ExplicitContextTag2::from(EncryptedData {
            etype: ExplicitContextTag0::from(ticket_key.key_type.0.clone()),
            kvno: Optional::from(None),
            cipher: ExplicitContextTag2::from(OctetStringAsn1::from(cipher)),
        }),
    });
    picky_asn1_der::to_vec(&rep).map_err(|_| refused("encoding AP-REP"))
}

/// Accept a GSS Kerberos token (an AP-REQ) at Unix time `now`.
pub fn accept(
    cfg: &AcceptorConfig,
    token: &[u8],
    now: i64,
    fresh: &Fresh,
    replay: &ReplayCache,
) -> Result<Accepted, AuthError> {
    let (tok_id, msg) = gss_unwrap(token)?;
    if tok_id != TOK_AP_REQ {
        return Err(AuthError::Malformed("Kerberos token is not an AP-REQ"));
    }
    let mut acc = accept_ap_req(cfg, msg, now, fresh, replay, false)?;
    if !acc.token.is_empty() {
        acc.token = gss_wrap(TOK_AP_REP, &acc.token);
    }
    Ok(acc)
}

/// Accept the AP-REQ of a DCE/RPC bind (RFC 4121 with GSS_C_DCE_STYLE, [MS-KILE] 3.4.5.1,
/// [MS-RPCE] 3.3.1.5.2): the AP-REQ raw or GSS-framed, the DCE-style and mutual flags set;
/// the AP-REP in [`Accepted::token`] is raw (no GSS framing), and the client's own AP-REP
/// comes next ([`check_dce_ap_rep`]).
pub fn accept_dce(
    cfg: &AcceptorConfig,
    token: &[u8],
    now: i64,
    fresh: &Fresh,
    replay: &ReplayCache,
) -> Result<Accepted, AuthError> {
    let msg = match gss_unwrap(token) {
        Ok((TOK_AP_REQ, msg)) => msg,
        Ok(_) => return Err(AuthError::Malformed("Kerberos token is not an AP-REQ")),
        Err(_) => token,
    };
    accept_ap_req(cfg, msg, now, fresh, replay, true)
}

/// The DCE-style third leg: the client's AP-REP, encrypted with the ticket's session key,
/// gives back the sequence number of ours ([MS-KILE] 3.4.5.1; what Windows and Heimdal check).
pub fn check_dce_ap_rep(
    cfg: &AcceptorConfig,
    acc: &Accepted,
    token: &[u8],
) -> Result<(), AuthError> {
    let msg = match gss_unwrap(token) {
        Ok((TOK_AP_REP, msg)) => msg,
        Ok(_) => return Err(AuthError::Malformed("Kerberos token is not an AP-REP")),
        Err(_) => token,
    };
    let rep: ApRep = der(msg, "AP-REP")?;
    let rep = rep.0;
    if int(&rep.pvno.0)? != 5 || int(&rep.msg_type.0)? != 15 {
        return Err(AuthError::Malformed("not a Kerberos 5 AP-REP"));
    }
    let (key, key_type) = &acc.ticket_key;
    let plain = cfg
        .cipher(i64::from(*key_type))?
        .decrypt(key, USAGE_AP_REP, &rep.enc_part.0.cipher.0 .0)
        .ok_or_else(|| {
            refused("the client's AP-REP does not decrypt with the ticket's session key")
        })?;
    let part: EncApRepPart = der(&plain, "EncAPRepPart")?;
    let seq = match &part.0.seq_number.0 {
        Some(s) => int(&s.0)?,
        None => return Err(refused("the client's AP-REP has no sequence number")),
    };
    if seq != i64::from(acc.seq) {
        return Err(refused(format!(
            "the client's AP-REP gives sequence number {seq}, ours was {}",
            acc.seq
        )));
    }
    Ok(())
}

/// An AP-REQ (its DER, no GSS framing) accepted; `dce`: a DCE/RPC bind's.
fn accept_ap_req(
    cfg: &AcceptorConfig,
    msg: &[u8],
    now: i64,
    fresh: &Fresh,
    replay: &ReplayCache,
    dce: bool,
) -> Result<Accepted, AuthError> {
    let req: ApReq = der(msg, "AP-REQ")?;
    let req = req.0;
    if int(&req.pvno.0)? != 5 || int(&req.msg_type.0)? != 14 {
        return Err(AuthError::Malformed("not a Kerberos 5 AP-REQ"));
    }
    let opened = open_ticket(cfg, &req)?;
    // Past this point the ticket names its client: refusals say whose ticket it was.
    let who = format!(
        "{}@{}",
        principal(&opened.part.cname.0).join("/"),
        realm_of(&opened.part.crealm.0)
    );
    accept_opened(cfg, &req, opened, now, fresh, replay, dce).map_err(|e| match e {
        AuthError::Kerberos(why) => AuthError::Kerberos(format!("{why} (ticket of {who})")),
        other => other,
    })
}

/// Steps 2-6 for a ticket the keytab opened.
fn accept_opened(
    cfg: &AcceptorConfig,
    req: &picky_krb::messages::ApReqInner,
    opened: OpenTicket<'_>,
    now: i64,
    fresh: &Fresh,
    replay: &ReplayCache,
    dce: bool,
) -> Result<Accepted, AuthError> {
    let part = &opened.part;
    let (auth_time, end_time) = check_ticket(part, now, cfg.skew_secs)?;
    let auth = open_authenticator(cfg, req, part, now, cfg.skew_secs)?;
    let (gss_flags, gss_checksum) = check_gss_checksum(&auth, dce)?;
    let client = principal(&part.cname.0);
    let client_realm = realm_of(&part.crealm.0);
    let pac = match find_pac(part.authorization_data.0.as_ref().map(|a| &a.0))? {
        Some(raw) => {
            let pac = Pac::parse(&raw)?;
            pac.verify_server_signature(&opened.entry.key, opened.entry.enctype)?;
            pac.check_client_info(&client.join("/"), auth_time)?;
            Some(pac)
        }
        None => None,
    };
    // Step 5, last of the checks so that a forged or broken request cannot fill the cache.
    let forget_at = now + 2 * cfg.skew_secs;
    match replay.check(&req.authenticator.0.cipher.0 .0, forget_at, now) {
        Seen::New => {}
        Seen::Replay => {
            return Err(refused(
                "replayed authenticator (the AP-REQ was seen before)",
            ))
        }
        Seen::Full => return Err(refused("replay cache full; refusing until entries expire")),
    }
    let ticket_key = &part.key.0;
    let initiator_seq = match &auth.seq_number.0 {
        // Kerberos sequence numbers are 32-bit; a negative INTEGER is one of the upper half.
        Some(s) => Some(int(&s.0)? as u32),
        None => None,
    };
    let mutual =
        bit(&req.ap_options.0 .0, AP_MUTUAL_REQUIRED) || gss_flags & GSS_C_MUTUAL_FLAG != 0;
    let initiator = auth.subkey.0.as_ref().map_or(ticket_key, |k| &k.0);
    let initiator_key = (
        initiator.key_value.0 .0.clone(),
        int(&initiator.key_type.0)? as i32,
    );
    let sub_type = int(&initiator.key_type.0)?;
    let sub_cipher = cfg.cipher(sub_type)?;
    if initiator_key.0.len() != sub_cipher.key_size() {
        return Err(refused(format!(
            "the initiator's key of enctype {sub_type} is {} bytes long",
            initiator_key.0.len()
        )));
    }
    let (session_key, key_etype, token) = if mutual && matches!(sub_cipher, Cipher::Rc4) {
        // RC4-HMAC (no RFC 4121 acceptor subkey): the AP-REP carries the initiator's subkey
        // back, as Windows does and Heimdal copies, and the session key is that key. MIT's
        // initiator ignores an acceptor subkey of its own subkey's type and Heimdal's takes
        // it: with the same bytes both end with one key. Without an initiator subkey the
        // AP-REP has none and the ticket's key is the session key.
        let echoed = auth
            .subkey
            .0
            .as_ref()
            .map(|_| (sub_type, &initiator_key.0[..]));
        let token = ap_rep(cfg, &auth, ticket_key, echoed, fresh)?;
        (initiator_key.0.clone(), initiator_key.1, token)
    } else if mutual {
        // The acceptor subkey has the type of the initiator's subkey, else the ticket key's.
        let len = sub_cipher.key_size();
        let subkey = fresh.subkey[..len.min(32)].to_vec();
        let token = ap_rep(cfg, &auth, ticket_key, Some((sub_type, &subkey)), fresh)?;
        (subkey, sub_type as i32, token)
    } else {
        (initiator_key.0.clone(), initiator_key.1, Vec::new())
    };
    Ok(Accepted {
        client,
        client_realm,
        service: opened.service,
        key_entry: format!("{:?}", opened.entry),
        session_key,
        key_etype,
        initiator_key,
        seq: fresh.seq,
        token,
        initiator_seq,
        ticket_key: (
            ticket_key.key_value.0 .0.clone(),
            int(&ticket_key.key_type.0)? as i32,
        ),
        auth_time,
        end_time,
        pac,
        gss_checksum,
    })
}
