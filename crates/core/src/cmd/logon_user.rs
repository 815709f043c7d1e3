//! Who a Kerberos logon acts as ([MS-KILE] 3.4.5.3; Samba's member and standalone rules).
//!
//! - **Standalone** (a keytab of an MIT realm): `user@REALM` of the server's realm is the Unix
//!   account `user`, found through NSS as an NTLM user is. A principal with instances
//!   (`alice/admin`), of another realm, or whose ticket carries an Active Directory PAC (logon
//!   information: its groups would be ignored) is refused, as Samba's standalone server refuses.
//! - **Domain member** (`security = ads`): the ticket's PAC names the user `DOMAIN\name` and
//!   gives the SIDs of their token ([`ringshare_auth::krb5::domain`]); the account is looked up
//!   under the names [`crate::domain::DomainMember::account_names`] gives, and the SIDs go with
//!   it. A ticket without logon information (not issued by a domain controller) is refused. A
//!   domain user over NTLM, whose response the domain checked, is looked up the same way.

use std::sync::Arc;

use ringshare_auth::gss::ServerStep;
use ringshare_auth::krb5::domain::domain_logon;
use ringshare_auth::krb5::pac;
use ringshare_auth::AuthError;
use ringshare_wire::security::Sid;

use crate::domain::{DomainMember, SidMap};

/// A domain user's logon: the NSS names to try, in order, and their token's SIDs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DomainUser {
    /// `DOMAIN\name` as the PAC gives it (for log lines).
    pub display: String,
    pub names: Vec<String>,
    pub sids: Arc<[Sid]>,
}

/// Who the Kerberos client of a finished logon acts as: the step with `result.user` set, and
/// for a domain user the names and SIDs of [`DomainUser`]. NTLM logons pass through.
pub(crate) fn kerberos_user(
    step: ServerStep,
    member: Option<&DomainMember>,
    sid_map: &SidMap,
) -> Result<(ServerStep, Option<DomainUser>), AuthError> {
    let ServerStep::Done { token, mut result } = step else {
        return Ok((step, None));
    };
    let Some(k) = &result.kerberos else {
        // NTLM: a domain user checked by the domain acts as the account NSS names for them.
        let user = match member {
            Some(m) if result.by_domain => Some(DomainUser {
                display: format!("{}\\{}", result.domain.to_ascii_uppercase(), result.user),
                names: m.account_names(&result.domain, &result.user),
                sids: Arc::default(),
            }),
            _ => None,
        };
        if let Some(u) = &user {
            result.user = u.names[0].clone();
        }
        return Ok((ServerStep::Done { token, result }, user));
    };
    let name = k.client_name();
    if k.client.len() != 1 || k.client[0].is_empty() {
        return Err(AuthError::Kerberos(format!(
            "principal {name} is not of the form user@REALM"
        )));
    }
    if let Some(member) = member {
        let logon = match k.pac.as_ref().map(domain_logon).transpose()?.flatten() {
            Some(l) => l,
            None => {
                return Err(AuthError::Kerberos(format!(
                    "ticket of {name} has no PAC logon info; a domain member accepts tickets \
                     its domain's controllers issue"
                )))
            }
        };
        sid_map.learn(&logon.domain, &logon.domain_sid);
        let user = DomainUser {
            display: format!("{}\\{}", logon.domain, logon.name),
            names: member.account_names(&logon.domain, &logon.name),
            sids: logon.sids.into(),
        };
        result.user = user.names[0].clone();
        return Ok((ServerStep::Done { token, result }, Some(user)));
    }
    // The acceptor checked that the ticket is for the server's realm; a client of another realm
    // (cross-realm trust) is someone else than the local account of that name.
    let service_realm = k.service.rsplit('@').next().unwrap_or_default();
    if !k.client_realm.eq_ignore_ascii_case(service_realm) {
        return Err(AuthError::Kerberos(format!(
            "principal {name} is of another realm than this server's ({service_realm})"
        )));
    }
    if k.pac
        .as_ref()
        .is_some_and(|p| p.buffer(pac::buffer::LOGON_INFO).is_some())
    {
        return Err(AuthError::Kerberos(format!(
            "ticket of {name} carries an Active Directory PAC (logon info); this server is \
             not a domain member ('security = ads') and accepts tickets of a standalone MIT \
             realm only"
        )));
    }
    result.user = k.client[0].clone();
    Ok((ServerStep::Done { token, result }, None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringshare_auth::krb5::acceptor::Accepted;
    use ringshare_auth::ntlm::{AuthKind, AuthResult};

    fn ticket_of(client: &[&str], realm: &str) -> ServerStep {
        let acc = Accepted {
            client: client.iter().map(|c| c.to_string()).collect(),
            client_realm: realm.into(),
            service: "cifs/fs.rs.test@RS.TEST".into(),
            key_entry: String::new(),
            session_key: vec![1; 32],
            key_etype: 18,
            initiator_key: (vec![2; 32], 18),
            seq: 1,
            token: Vec::new(),
            initiator_seq: None,
            ticket_key: (vec![3; 32], 18),
            auth_time: 0,
            end_time: 0,
            pac: None,
            gss_checksum: Vec::new(),
        };
        ServerStep::Done {
            token: Vec::new(),
            result: AuthResult {
                kind: AuthKind::User,
                user: client.join("/"),
                domain: realm.into(),
                workstation: String::new(),
                session_key: vec![1; 32],
                kerberos: Some(Box::new(acc)),
                by_domain: false,
            },
        }
    }

    fn refusal(step: ServerStep, member: Option<&DomainMember>) -> String {
        match kerberos_user(step, member, &SidMap::default()) {
            Err(AuthError::Kerberos(why)) => why,
            Err(e) => panic!("refused otherwise: {e}"),
            Ok(_) => panic!("accepted"),
        }
    }

    #[test]
    fn a_principal_of_the_servers_realm_acts_as_the_unix_user_of_its_name() {
        let Ok((ServerStep::Done { result, .. }, None)) =
            kerberos_user(ticket_of(&["alice"], "rs.test"), None, &SidMap::default())
        else {
            panic!("refused")
        };
        assert_eq!(result.user, "alice");
    }

    #[test]
    fn a_principal_of_another_realm_or_with_instances_is_refused() {
        assert!(refusal(ticket_of(&["alice"], "OTHER.TEST"), None).contains("another realm"));
        assert!(
            refusal(ticket_of(&["alice", "admin"], "RS.TEST"), None).contains("not of the form")
        );
    }

    #[test]
    fn a_domain_member_refuses_a_ticket_without_pac_logon_info() {
        let member = DomainMember {
            workgroup: "RS".into(),
            separator: '\\',
            default_domain: false,
            rid_ranges: vec![],
            id_ranges: vec![],
        };
        assert!(
            refusal(ticket_of(&["alice"], "RS.TEST"), Some(&member)).contains("no PAC logon info")
        );
    }
}
