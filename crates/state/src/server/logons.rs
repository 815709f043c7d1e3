//! Who may log on and whom they act as: the users, the Unix accounts, the
//! Kerberos acceptor, the domain a member server belongs to and how it is
//! asked (winbind, the realm's KDCs, the id source), the domain SIDs' id
//! ranges, the replay cache and the failed-logon backoff. It knows nothing
//! of files, connections or the cluster; the driver sets it at start and
//! on reload, SESSION_SETUP and the identity mappings read it.

use std::sync::{Arc, RwLock};

use ringshare_auth::krb5::acceptor::AcceptorConfig;
use ringshare_auth::UserLookup;

use crate::sync::{replace, snapshot};

/// Logon and identity state of the server ([`crate::server::ServerState::logons`]).
pub struct Logons {
    /// The users who may log on now ([`Logons::users`]).
    users: RwLock<Arc<dyn UserLookup + Send + Sync>>,
    /// Unix accounts the users act as.
    pub accounts: Arc<dyn crate::identity::Accounts>,
    /// Kerberos: the keytab and realm tickets are accepted with, when configured
    /// ([`Logons::set_kerberos`]).
    kerberos: RwLock<Option<Arc<AcceptorConfig>>>,
    /// `security = ads`: the member-server rules ([`Logons::set_domain`]).
    domain: RwLock<Option<Arc<crate::domain::DomainMember>>>,
    /// How a domain member asks its domain (winbind), when it can ([`Logons::set_domain_logons`]).
    domain_logons: RwLock<Option<Arc<dyn crate::domain::DomainLogons>>>,
    /// How IAKerb clients' KDC requests reach the realm's KDCs ([`Logons::set_kdcs`]).
    kdcs: RwLock<Option<Arc<dyn crate::lookup::Kdcs>>>,
    /// Who maps domain SIDs the rid ranges do not to Unix ids (winbind;
    /// [`Logons::set_id_source`]).
    id_source: RwLock<Option<Arc<dyn crate::sidcache::IdSource>>>,
    /// Domain SIDs and the rid ranges their ids come from ([`crate::domain::SidMap`]).
    pub sid_map: crate::domain::SidMap,
    /// Every authenticator accepted, for the whole process (a replay may come on any
    /// connection).
    pub replay_cache: Arc<ringshare_auth::krb5::replay::ReplayCache>,
    /// Failed logons by address ([`crate::backoff`]).
    pub backoff: crate::backoff::LogonBackoff,
}

impl Logons {
    pub fn new(
        users: Arc<dyn UserLookup + Send + Sync>,
        accounts: Arc<dyn crate::identity::Accounts>,
        failed_logon_backoff: u32,
    ) -> Logons {
        Logons {
            users: RwLock::new(users),
            accounts,
            kerberos: RwLock::new(None),
            domain: RwLock::new(None),
            domain_logons: RwLock::new(None),
            kdcs: RwLock::new(None),
            id_source: RwLock::new(None),
            sid_map: Default::default(),
            replay_cache: Default::default(),
            backoff: crate::backoff::LogonBackoff::new(failed_logon_backoff),
        }
    }

    /// The accounts and domain SIDs NT ACLs are mapped with ([`crate::ntsd`]), at `now_ms`
    /// (monotonic: the id source's answers expire).
    pub fn ids(&self, now_ms: u64) -> crate::ntsd::Ids<'_> {
        crate::ntsd::Ids {
            groups: crate::identity::Membership(self.accounts.as_ref()),
            sids: &self.sid_map,
            now_ms,
        }
    }

    /// The users who may log on now.
    pub fn users(&self) -> Arc<dyn UserLookup + Send + Sync> {
        snapshot(&self.users)
    }

    /// Let these users log on from now on (a reload); sessions already set
    /// up stay as they are.
    pub fn replace_users(&self, users: Arc<dyn UserLookup + Send + Sync>) {
        replace(&self.users, users);
    }

    /// Accept Kerberos tickets with this keytab and realm from now on (None: NTLM only). At
    /// start, on reload and when the keytab file changes; logons in progress keep theirs.
    pub fn set_kerberos(&self, k: Option<AcceptorConfig>) {
        replace(&self.kerberos, k.map(Arc::new));
    }

    /// The Kerberos acceptor's configuration, when Kerberos is on.
    pub fn kerberos(&self) -> Option<Arc<AcceptorConfig>> {
        snapshot(&self.kerberos)
    }

    /// Act as a member of an Active Directory domain (`security = ads`) from now on, or not
    /// (None). At start and on reload.
    pub fn set_domain(&self, d: Option<crate::domain::DomainMember>) {
        self.sid_map
            .set_ranges(d.as_ref().map(|d| d.rid_ranges.clone()).unwrap_or_default());
        self.sid_map
            .set_id_ranges(d.as_ref().map(|d| d.id_ranges.clone()).unwrap_or_default());
        replace(&self.domain, d.map(Arc::new));
    }

    /// The member-server rules, when the server is a domain member.
    pub fn domain(&self) -> Option<Arc<crate::domain::DomainMember>> {
        snapshot(&self.domain)
    }

    /// Check domain users' NTLM responses with `d` from now on (None: domain users can log on
    /// with Kerberos only).
    pub fn set_domain_logons(&self, d: Option<Arc<dyn crate::domain::DomainLogons>>) {
        replace(&self.domain_logons, d);
    }

    /// How the domain is asked, when the server is a member that can.
    pub fn domain_logons(&self) -> Option<Arc<dyn crate::domain::DomainLogons>> {
        snapshot(&self.domain_logons)
    }

    /// Relay IAKerb clients' KDC requests with `k` from now on (None: IAKerb logons are
    /// refused).
    pub fn set_kdcs(&self, k: Option<Arc<dyn crate::lookup::Kdcs>>) {
        replace(&self.kdcs, k);
    }

    /// How the realm's KDCs are reached, when they can be.
    pub fn kdcs(&self) -> Option<Arc<dyn crate::lookup::Kdcs>> {
        snapshot(&self.kdcs)
    }

    /// Ask `s` for the ids of domain SIDs (and the SIDs of ids) that no rid range maps, from now
    /// on (None: such SIDs get no POSIX ACL entries).
    pub fn set_id_source(&self, s: Option<Arc<dyn crate::sidcache::IdSource>>) {
        replace(&self.id_source, s);
    }

    /// The id source, when there is one.
    pub fn id_source(&self) -> Option<Arc<dyn crate::sidcache::IdSource>> {
        snapshot(&self.id_source)
    }

    /// `failed logon backoff` as a reload sets it (0 = off).
    pub fn set_failed_logon_backoff(&self, after: u32) {
        self.backoff.set_after(after);
    }
}
