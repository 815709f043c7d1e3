//! The authentication service (RFC 4120 3.1.2-3.1.3, 5.2.7.2): a user proves it knows its
//! password with PA-ENC-TIMESTAMP, and gets a ticket-granting ticket.

use picky_asn1::wrapper::Asn1SequenceOf;
use picky_asn1_der::application_tag::ApplicationTag;
use picky_krb::data_types::{PaData, PaEncTsEnc};
use picky_krb::messages::{AsReq, KdcReq};

use super::{code, components, der, etype_info2, fail, krb_error, num, pa_data, realm_text};
use super::{encrypted, end_time, is_file_service, is_krbtgt, seal, to_der};
use super::{Fresh, KdcError, LocalKdc, Principals, TicketFacts, UserKey};
use super::{FLAG_INITIAL, FLAG_PRE_AUTHENT, PA_ENC_TIMESTAMP};
use crate::krb5::{etype, unix_time};

/// Key usages: PA-ENC-TIMESTAMP, the AS-REP's encrypted part.
const USAGE_PA_ENC_TIMESTAMP: i32 = 1;
const USAGE_AS_REP: i32 = 3;

/// The user an AS-REQ names, and the service it asks for.
struct Asked {
    user: String,
    sname: Vec<String>,
    realm: String,
}

fn asked(kdc: &LocalKdc, req: &KdcReq) -> Result<Asked, KdcError> {
    let body = &req.req_body.0;
    let realm = realm_text(&body.realm.0);
    if !realm.eq_ignore_ascii_case(&kdc.realm) {
        return Err(fail(
            code::WRONG_REALM,
            format!("AS-REQ for realm {realm:?}; this KDC serves {}", kdc.realm),
        ));
    }
    let cname = body
        .cname
        .0
        .as_ref()
        .map(|c| components(&c.0))
        .ok_or_else(|| fail(code::C_PRINCIPAL_UNKNOWN, "AS-REQ without a client name"))?;
    let user = match cname.as_slice() {
        [one] if !one.is_empty() && !one.contains('@') => one.clone(),
        _ => {
            return Err(fail(
                code::C_PRINCIPAL_UNKNOWN,
                format!("unknown user {:?}@{realm}", cname.join("/")),
            ))
        }
    };
    let sname = body
        .sname
        .0
        .as_ref()
        .map(|s| components(&s.0))
        .unwrap_or_default();
    if !is_krbtgt(&sname, &kdc.realm) && !is_file_service(&sname) {
        return Err(fail(
            code::S_PRINCIPAL_UNKNOWN,
            format!(
                "AS-REQ of {user}@{realm} for {:?}: this KDC issues tickets for krbtgt/{}, \
                 cifs/ and host/ only",
                sname.join("/"),
                kdc.realm
            ),
        ));
    }
    Ok(Asked { user, sname, realm })
}

/// The user's keys this KDC may use (AES; RC4-HMAC when allowed), or why there are none.
fn usable_keys(
    kdc: &LocalKdc,
    users: &dyn Principals,
    a: &Asked,
) -> Result<Vec<UserKey>, KdcError> {
    let who = format!("{}@{}", a.user, a.realm);
    let keys = users
        .keys(&a.user)
        .ok_or_else(|| fail(code::C_PRINCIPAL_UNKNOWN, format!("unknown user {who}")))?;
    let usable: Vec<UserKey> = keys
        .into_iter()
        .filter(|k| kdc.cipher(i64::from(k.etype)).is_some())
        .collect();
    if usable.is_empty() {
        return Err(fail(
            code::ETYPE_NOSUPP,
            format!(
                "user {who} has no AES Kerberos keys (users added before the local KDC existed \
                 have only the NT hash): set the password again with `ringshare user add {}`",
                a.user
            ),
        ));
    }
    Ok(usable)
}

/// The user's keys in the order of the client's enctypes (the ones it does not offer left out).
fn keys_in_client_order<'k>(req: &KdcReq, keys: &'k [UserKey]) -> Vec<&'k UserKey> {
    let mut out = Vec::new();
    for e in &req.req_body.0.etype.0 .0 {
        let Ok(e) = num(e) else { continue };
        for k in keys.iter().filter(|k| i64::from(k.etype) == e) {
            if !out.iter().any(|o: &&UserKey| o.etype == k.etype) {
                out.push(k);
            }
        }
    }
    out
}

/// PA-ENC-TIMESTAMP's encrypted data, if the request has one.
fn enc_timestamp(req: &KdcReq) -> Result<Option<&PaData>, KdcError> {
    let Some(padata) = req.padata.0.as_ref() else {
        return Ok(None);
    };
    for p in &padata.0 .0 {
        if num(&p.padata_type.0)? == PA_ENC_TIMESTAMP {
            return Ok(Some(p));
        }
    }
    Ok(None)
}

/// Check PA-ENC-TIMESTAMP: it decrypts with one of the user's keys and its time is within the
/// skew. Returns the key it was made with (the reply is encrypted with it).
fn check_timestamp<'k>(
    kdc: &LocalKdc,
    a: &Asked,
    p: &PaData,
    keys: &[&'k UserKey],
    now: i64,
) -> Result<&'k UserKey, KdcError> {
    let who = format!("{}@{}", a.user, a.realm);
    let enc: picky_krb::data_types::EncryptedData = der(&p.padata_data.0 .0, "PA-ENC-TIMESTAMP")?;
    let e = num(&enc.etype.0)?;
    let key = keys
        .iter()
        .find(|k| i64::from(k.etype) == e)
        .copied()
        .ok_or_else(|| {
            fail(
                code::ETYPE_NOSUPP,
                format!("pre-authentication of {who} with enctype {e}, which it has no key of"),
            )
        })?;
    let plain = kdc
        .cipher(e)
        .and_then(|c| c.decrypt(&key.key, USAGE_PA_ENC_TIMESTAMP, &enc.cipher.0 .0))
        .ok_or_else(|| {
            fail(
                code::PREAUTH_FAILED,
                format!("wrong password for {who} (pre-authentication failed)"),
            )
        })?;
    let ts: PaEncTsEnc = der(&plain, "PA-ENC-TS-ENC")?;
    let t = unix_time(&ts.patimestamp.0);
    if (t - now).abs() > kdc.skew_secs {
        return Err(fail(
            code::SKEW,
            format!(
                "pre-authentication of {who} made {}s from our time (more than the {}s \
                 allowed: clocks out of step)",
                t - now,
                kdc.skew_secs
            ),
        ));
    }
    Ok(key)
}

/// Answer an AS-REQ.
pub fn answer(
    kdc: &LocalKdc,
    users: &dyn Principals,
    request: &[u8],
    now: i64,
    fresh: &Fresh,
) -> Result<Vec<u8>, KdcError> {
    let req: AsReq = der(request, "AS-REQ")?;
    let req = req.0;
    if num(&req.pvno.0)? != 5 || num(&req.msg_type.0)? != 10 {
        return Err(fail(code::MSG_TYPE, "not a Kerberos 5 AS-REQ"));
    }
    let a = asked(kdc, &req)?;
    let keys = usable_keys(kdc, users, &a)?;
    let offered = keys_in_client_order(&req, &keys);
    if offered.is_empty() {
        return Err(fail(
            code::ETYPE_NOSUPP,
            format!(
                "the client of {}@{} offers none of the user's key types",
                a.user, a.realm
            ),
        ));
    }
    let Some(p) = enc_timestamp(&req)? else {
        // RFC 4120 3.1.3 / 5.2.7.2: ask for the encrypted timestamp, saying which salts.
        let method_data = Asn1SequenceOf::from(vec![
            pa_data(PA_ENC_TIMESTAMP, Vec::new()),
            etype_info2(&offered)?,
        ]);
        return krb_error(
            kdc,
            code::PREAUTH_REQUIRED,
            now,
            Some(to_der(&method_data, "METHOD-DATA")?),
        );
    };
    let key = check_timestamp(kdc, &a, p, &offered, now)?;
    let body = &req.req_body.0;
    let session_etype = kdc.session_etype(&body.etype.0 .0)?;
    let session_len = if session_etype == etype::AES256 {
        32
    } else {
        16
    };
    let till = unix_time(&body.till.0);
    let end = end_time(kdc, now, till, i64::MAX);
    if end <= now {
        return Err(fail(
            code::GENERIC,
            "AS-REQ for a ticket that ends before it starts",
        ));
    }
    let cname = [a.user.clone()];
    let facts = TicketFacts {
        realm: &a.realm,
        sname: &a.sname,
        crealm: &a.realm,
        cname: &cname,
        flags: &[FLAG_INITIAL, FLAG_PRE_AUTHENT],
        session: (session_etype, &fresh.session_key[..session_len]),
        auth_time: now,
        start: now,
        end,
    };
    let ticket = facts.ticket(kdc, fresh)?;
    let part = ApplicationTag::<_, 25>(facts.rep_part(&body.nonce.0, now)?);
    let sealed = seal(
        key.etype,
        &key.key,
        USAGE_AS_REP,
        &to_der(&part, "EncASRepPart")?,
        fresh,
    )?;
    let rep = facts.rep(
        11,
        vec![etype_info2(&[key])?],
        ticket,
        encrypted(key.etype, Some(key.kvno), sealed),
    )?;
    to_der(&ApplicationTag::<_, 11>(rep), "AS-REP")
}
