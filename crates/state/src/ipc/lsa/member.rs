//! The domain's SIDs and names on a domain member ([`MemberFacts`]), as Samba's smbd joined the
//! same way answers them. The member's id source names them where it can (winbindd's
//! LOOKUPSIDS and LOOKUPNAME, which smbd asks too: the domain's spelling and types); else a
//! domain SID becomes its Unix id through the id source (sssd) and that id its name through
//! NSS (`DOMAIN\user`), answered as `user` in domain `DOMAIN`, and a name goes the other way.
//! Neither is asked here: the call says what it needs ([`Resolver`]) and runs again with the
//! lookup threads' answers ([`crate::lookup::NameAnswers::ask`]).

use ringshare_wire::security::Sid;

use super::{Named, USE_DOMAIN, USE_UNKNOWN};
use crate::ipc::local::Resolver;
use crate::ipc::MemberFacts;
use crate::lookup::DomainAccount;
use crate::sidcache::is_domain_sid;

/// `sid` without its last sub-authority: the SID of an account's domain.
fn domain_of(sid: &Sid) -> Sid {
    let mut d = sid.clone();
    d.sub_authorities.pop();
    d
}

/// The domain and the name of an account NSS names `full`: `DOMAIN` and `user` of
/// `DOMAIN<separator>user`; a name without the separator is the member's own domain's
/// (`winbind use default domain`, sssd's short names).
fn split<'a>(full: &'a str, m: &'a MemberFacts) -> (&'a str, &'a str) {
    full.split_once(m.naming.separator)
        .unwrap_or((m.naming.workgroup.as_str(), full))
}

/// `account`, of SID `sid`, as LookupSids and LookupNames give it.
fn named(sid: &Sid, account: &DomainAccount, m: &MemberFacts) -> Named {
    let (domain, name) = match &account.domain {
        Some(d) => (d.as_str(), account.name.as_str()),
        None => split(&account.name, m),
    };
    let domain_sid = if account.kind == USE_DOMAIN {
        sid.clone()
    } else {
        domain_of(sid)
    };
    Named {
        domain: domain.to_string(),
        domain_sid,
        name: name.to_string(),
        kind: account.kind,
    }
}

/// A domain a logon stated, by its SID: the domain itself (no name of its own, as Samba
/// answers it).
fn known_domain(m: &MemberFacts, found: impl Fn(&(String, Sid)) -> bool) -> Option<Named> {
    let (name, sid) = m.domains.iter().find(|d| found(d))?;
    Some(Named {
        domain: name.clone(),
        domain_sid: sid.clone(),
        name: String::new(),
        kind: USE_DOMAIN,
    })
}

/// The name of domain SID `s`, if the id source gives it an id that NSS names.
pub(super) fn name_of(s: &Sid, m: &MemberFacts, names: &mut Resolver<'_>) -> Option<Named> {
    if let Some(d) = known_domain(m, |(_, d)| d == s) {
        return Some(d);
    }
    if !is_domain_sid(s) {
        return None;
    }
    let account = names.domain_account(s)?;
    (account.kind != USE_UNKNOWN).then(|| named(s, &account, m))
}

/// The SID of `name` in `domain` (None: not qualified), if NSS knows it by the member's
/// spelling of domain accounts and the id source gives its id a domain SID. A name with `@`
/// (`user@realm`) is asked as it is, as winbind takes it.
pub(super) fn sid_of(
    domain: Option<&str>,
    name: &str,
    m: &MemberFacts,
    names: &mut Resolver<'_>,
) -> Option<(Sid, Named)> {
    if domain.is_none() {
        let found = known_domain(m, |(d, _)| d.eq_ignore_ascii_case(name));
        if let Some(d) = found {
            return Some((d.domain_sid.clone(), d));
        }
    }
    let spellings = match domain {
        None if name.contains('@') => vec![name.to_string()],
        _ => m
            .naming
            .account_names(domain.unwrap_or(&m.naming.workgroup), name),
    };
    // Every spelling is asked at once; the first NSS and the id source know wins.
    let mut first = None;
    for spelling in spellings {
        if let Some((sid, account)) = names.domain_sid(&spelling) {
            let domain_itself = account.kind == USE_DOMAIN;
            let usable = account.kind != USE_UNKNOWN && (domain_itself || is_domain_sid(&sid));
            if first.is_none() && usable {
                first = Some((sid.clone(), named(&sid, &account, m)));
            }
        }
    }
    first
}
