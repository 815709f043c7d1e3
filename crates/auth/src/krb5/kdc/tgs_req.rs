//! The ticket-granting service (RFC 4120 3.3, 5.4.1, 7.5.1): a client holding this KDC's
//! ticket-granting ticket asks, with an AP-REQ in PA-TGS-REQ, for a ticket for the file service.

use picky_asn1_der::application_tag::ApplicationTag;
use picky_krb::data_types::{Authenticator, AuthenticatorInner, EncTicketPart, EncTicketPartInner};
use picky_krb::messages::{ApReq, KdcReq, TgsReq};

use super::{code, components, der, fail, malformed, num, realm_text};
use super::{encrypted, end_time, is_file_service, is_krbtgt, seal, to_der};
use super::{Fresh, KdcError, LocalKdc, Principals, TicketFacts};
use super::{FLAG_INITIAL, FLAG_INVALID, PA_TGS_REQ, USAGE_TICKET};
use crate::krb5::{bit, checksum_suite, etype, rc4hmac, unix_time};
use crate::spnego::Der;

/// Key usages: the authenticator's checksum over the request body, the authenticator, and the
/// reply encrypted with the TGT's session key or with the authenticator's subkey.
const USAGE_BODY_CHECKSUM: i32 = 6;
const USAGE_AUTHENTICATOR: i32 = 7;
const USAGE_REP_SESSION: i32 = 8;
const USAGE_REP_SUBKEY: i32 = 9;

/// kdc-options the KDC does not do: FORWARDED, PROXY, ALLOW-POSTDATE and POSTDATED, VALIDATE,
/// RENEW, ENC-TKT-IN-SKEY (user-to-user).
const REFUSED_OPTIONS: [usize; 8] = [2, 4, 5, 6, 30, 31, 28, 14];

/// The request body's bytes as the client sent them (its checksum is over them).
fn raw_body(request: &[u8]) -> Result<&[u8], KdcError> {
    let bad = |_| malformed("TGS-REQ");
    let mut top = Der::new(request).map_err(bad)?;
    let app = top.expect(0x6c, "").map_err(bad)?;
    let mut a = top.enter(&app).map_err(bad)?;
    let seq = a.expect(0x30, "").map_err(bad)?;
    let mut fields = a.enter(&seq).map_err(bad)?;
    while !fields.is_empty() {
        let f = fields.read().map_err(bad)?;
        if f.tag == 0xa4 {
            let mut inner = fields.enter(&f).map_err(bad)?;
            return Ok(inner.read().map_err(bad)?.raw);
        }
    }
    Err(malformed("TGS-REQ without a body"))
}

/// The AP-REQ of PA-TGS-REQ.
fn pa_tgs_req(req: &KdcReq) -> Result<ApReq, KdcError> {
    let padata = req
        .padata
        .0
        .as_ref()
        .ok_or_else(|| fail(code::GENERIC, "TGS-REQ without PA-TGS-REQ"))?;
    for p in &padata.0 .0 {
        if num(&p.padata_type.0)? == PA_TGS_REQ {
            return der(&p.padata_data.0 .0, "PA-TGS-REQ AP-REQ");
        }
    }
    Err(fail(code::GENERIC, "TGS-REQ without PA-TGS-REQ"))
}

/// The TGT, opened with the krbtgt key, its flags and times checked.
fn open_tgt(kdc: &LocalKdc, ap: &ApReq, now: i64) -> Result<EncTicketPartInner, KdcError> {
    let ticket = &ap.0.ticket.0 .0;
    let realm = realm_text(&ticket.realm.0);
    let sname = components(&ticket.sname.0);
    if !realm.eq_ignore_ascii_case(&kdc.realm) || !is_krbtgt(&sname, &kdc.realm) {
        return Err(fail(
            code::WRONG_REALM,
            format!(
                "TGS-REQ with a ticket for {}@{realm}, not this KDC's krbtgt/{}",
                sname.join("/"),
                kdc.realm
            ),
        ));
    }
    let enc = &ticket.enc_part.0;
    if num(&enc.etype.0)? != i64::from(etype::AES256) {
        return Err(fail(
            code::MODIFIED,
            "a ticket-granting ticket this KDC did not make",
        ));
    }
    let plain = kdc
        .cipher(i64::from(etype::AES256))
        .and_then(|c| c.decrypt(&kdc.keys.krbtgt, USAGE_TICKET, &enc.cipher.0 .0))
        .ok_or_else(|| {
            fail(
                code::MODIFIED,
                "the ticket-granting ticket does not decrypt with this KDC's key (changed, \
                 forged, or issued with another key)",
            )
        })?;
    let part: EncTicketPart = der(&plain, "EncTicketPart")?;
    let part = part.0;
    if bit(&part.flags.0 .0, FLAG_INVALID) {
        return Err(fail(code::TKT_NYV, "the ticket-granting ticket is INVALID"));
    }
    let start = part
        .starttime
        .0
        .as_ref()
        .map_or_else(|| unix_time(&part.auth_time.0), |t| unix_time(&t.0));
    let end = unix_time(&part.endtime.0);
    if end < now - kdc.skew_secs {
        return Err(fail(
            code::TKT_EXPIRED,
            format!("the ticket-granting ticket expired {}s ago", now - end),
        ));
    }
    if start > now + kdc.skew_secs {
        return Err(fail(
            code::TKT_NYV,
            "the ticket-granting ticket is not valid yet",
        ));
    }
    Ok(part)
}

/// The authenticator, opened with the TGT's session key: the TGT's client, within the skew, its
/// checksum over the request body right.
fn open_authenticator(
    kdc: &LocalKdc,
    ap: &ApReq,
    tgt: &EncTicketPartInner,
    body: &[u8],
    now: i64,
) -> Result<AuthenticatorInner, KdcError> {
    let who = format!(
        "{}@{}",
        components(&tgt.cname.0).join("/"),
        realm_text(&tgt.crealm.0)
    );
    let key = &tgt.key.0;
    let ke = num(&key.key_type.0)?;
    let kv = &key.key_value.0 .0;
    let c = kdc
        .cipher(ke)
        .ok_or_else(|| fail(code::ETYPE_NOSUPP, "TGT session key of a refused type"))?;
    let plain = c
        .decrypt(kv, USAGE_AUTHENTICATOR, &ap.0.authenticator.0.cipher.0 .0)
        .ok_or_else(|| {
            fail(
                code::BAD_INTEGRITY,
                format!("the TGS-REQ authenticator of {who} does not decrypt with the TGT's key"),
            )
        })?;
    let auth: Authenticator = der(&plain, "Authenticator")?;
    let auth = auth.0;
    if components(&auth.cname.0) != components(&tgt.cname.0)
        || realm_text(&auth.crealm.0) != realm_text(&tgt.crealm.0)
    {
        return Err(fail(
            code::BAD_INTEGRITY,
            format!("the TGS-REQ authenticator names another client than the TGT of {who}"),
        ));
    }
    let t = unix_time(&auth.ctime.0);
    if (t - now).abs() > kdc.skew_secs {
        return Err(fail(
            code::SKEW,
            format!(
                "the TGS-REQ authenticator of {who} is {}s from our time (more than the {}s \
                 allowed: clocks out of step)",
                t - now,
                kdc.skew_secs
            ),
        ));
    }
    let ck = auth.cksum.0.as_ref().ok_or_else(|| {
        fail(
            code::BAD_INTEGRITY,
            "TGS-REQ authenticator without a checksum",
        )
    })?;
    let (ty, sum) = (num(&ck.0.cksumtype.0)?, &ck.0.checksum.0 .0);
    let want = match ke as i32 {
        etype::RC4_HMAC if ty == -138 => rc4hmac::checksum(kv, USAGE_BODY_CHECKSUM, body).to_vec(),
        e @ (etype::AES128 | etype::AES256) if ty == if e == etype::AES128 { 15 } else { 16 } => {
            let mut s = checksum_suite(e)
                .map_err(|_| fail(code::GENERIC, "checksum"))?
                .hasher()
                .checksum(kv, USAGE_BODY_CHECKSUM, body)
                .map_err(|_| fail(code::GENERIC, "checksum"))?;
            s.truncate(12);
            s
        }
        _ => {
            return Err(fail(
                code::BAD_INTEGRITY,
                format!("TGS-REQ body checksum of type {ty} for a session key of type {ke}"),
            ))
        }
    };
    if !ringshare_crypto::ct_eq(&want, sum) {
        return Err(fail(
            code::MODIFIED,
            format!("the TGS-REQ of {who} was changed on the way (its body checksum is wrong)"),
        ));
    }
    Ok(auth)
}

/// Answer a TGS-REQ.
pub fn answer(
    kdc: &LocalKdc,
    users: &dyn Principals,
    request: &[u8],
    now: i64,
    fresh: &Fresh,
) -> Result<Vec<u8>, KdcError> {
    let req: TgsReq = der(request, "TGS-REQ")?;
    let req = req.0;
    if num(&req.pvno.0)? != 5 || num(&req.msg_type.0)? != 12 {
        return Err(fail(code::MSG_TYPE, "not a Kerberos 5 TGS-REQ"));
    }
    let body_raw = raw_body(request)?;
    let ap = pa_tgs_req(&req)?;
    let tgt = open_tgt(kdc, &ap, now)?;
    let auth = open_authenticator(kdc, &ap, &tgt, body_raw, now)?;
    let cname = components(&tgt.cname.0);
    let crealm = realm_text(&tgt.crealm.0);
    let who = format!("{}@{crealm}", cname.join("/"));
    // A user removed since the TGT was issued gets no more tickets.
    match cname.as_slice() {
        [user] if users.keys(user).is_some() => {}
        _ => {
            return Err(fail(
                code::C_PRINCIPAL_UNKNOWN,
                format!("unknown user {who}"),
            ))
        }
    }
    let body = &req.req_body.0;
    let options = &body.kdc_options.0 .0;
    if let Some(o) = REFUSED_OPTIONS.iter().find(|o| bit(options, **o)) {
        return Err(fail(
            code::BADOPTION,
            format!("TGS-REQ of {who} with kdc-option {o}"),
        ));
    }
    let realm = realm_text(&body.realm.0);
    let sname = body
        .sname
        .0
        .as_ref()
        .map(|s| components(&s.0))
        .unwrap_or_default();
    if !realm.eq_ignore_ascii_case(&kdc.realm) || !is_file_service(&sname) {
        return Err(fail(
            code::S_PRINCIPAL_UNKNOWN,
            format!(
                "{who} asked for a ticket for {}@{realm}; this KDC issues tickets for cifs/ and \
                 host/ of {} only",
                sname.join("/"),
                kdc.realm
            ),
        ));
    }
    let session_etype = kdc.session_etype(&body.etype.0 .0)?;
    let session_len = if session_etype == etype::AES256 {
        32
    } else {
        16
    };
    let tgt_end = unix_time(&tgt.endtime.0);
    let end = end_time(kdc, now, unix_time(&body.till.0), tgt_end);
    if end <= now {
        return Err(fail(
            code::TKT_EXPIRED,
            format!("the TGT of {who} ends now"),
        ));
    }
    // The service ticket keeps the TGT's flags but INITIAL.
    let flags: Vec<usize> = (0..32)
        .filter(|i| *i != FLAG_INITIAL && bit(&tgt.flags.0 .0, *i))
        .collect();
    let facts = TicketFacts {
        realm: &kdc.realm,
        sname: &sname,
        crealm: &crealm,
        cname: &cname,
        flags: &flags,
        session: (session_etype, &fresh.session_key[..session_len]),
        auth_time: unix_time(&tgt.auth_time.0),
        start: now,
        end,
    };
    let ticket = facts.ticket(kdc, fresh)?;
    let part = ApplicationTag::<_, 26>(facts.rep_part(&body.nonce.0, now)?);
    let (key, usage) = match auth.subkey.0.as_ref() {
        Some(k) => (&k.0, USAGE_REP_SUBKEY),
        None => (&tgt.key.0, USAGE_REP_SESSION),
    };
    let ke = num(&key.key_type.0)? as i32;
    match kdc.cipher(i64::from(ke)) {
        Some(c) if c.key_size() == key.key_value.0 .0.len() => {}
        _ => {
            return Err(fail(
                code::ETYPE_NOSUPP,
                format!("a subkey of type {ke} refused"),
            ))
        }
    }
    let sealed = seal(
        ke,
        &key.key_value.0 .0,
        usage,
        &to_der(&part, "EncTGSRepPart")?,
        fresh,
    )?;
    let rep = facts.rep(13, Vec::new(), ticket, encrypted(ke, None, sealed))?;
    to_der(&ApplicationTag::<_, 13>(rep), "TGS-REP")
}
