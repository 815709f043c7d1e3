//! Questions the core cannot answer without waiting on another process or server: whether the
//! domain accepts a user's NTLM response (winbind asks a domain controller), which Unix account a
//! user name is (NSS, which may ask winbindd, sssd or an LDAP server), and what the realm's KDC
//! answers to a KDC request an IAKerb client asked the server to relay, and which Unix ids the
//! domain SIDs of a descriptor are, or which SIDs a file's ids are (the id source, winbind:
//! [`crate::sidcache`]).
//!
//! The core never waits for them on an I/O thread. A command that needs one parks its request
//! and queues `Output::Lookup` (crates/core); the driver runs
//! [`LookupRequest::run`] away from its ring (a thread of its lookup pool) and hands the answer
//! back with `crate::Connection::complete_lookup` (crates/core), as it does file I/O with `complete_io`.
//! Meanwhile the connection's other requests, and every other connection of the ring, go on.
//! The answer is kept for the request that asked ([`DomainAnswer`]) until it runs again.

use std::fmt;
use std::sync::Arc;

use ringshare_auth::krb5::iakerb::KdcRequest;
use ringshare_auth::{DomainNtlm, DomainNtlmRequest, UserLookup};

use crate::domain::DomainLogons;
use crate::identity::{Account, AccountError, Accounts};

use crate::sidcache::{IdAnswers, IdSource, SidName, Xid};

/// The answer to what a request asked, kept for the member that asked until it runs again: the
/// domain's to an NTLM response ([`WithDomain`] gives it to the exchange), a KDC's to an IAKerb
/// client's request (given to the exchange before it steps), or the id source's to a
/// descriptor's SIDs or ids.
pub enum DomainAnswer {
    Ntlm(DomainNtlmRequest, Result<[u8; 16], String>),
    Kdc(
        ringshare_auth::krb5::iakerb::KdcRequest,
        Result<Vec<u8>, String>,
    ),
    /// The id source was asked about the SIDs or ids a request named: its answers are in the
    /// [`SidMap`]'s cache (Ok), or it could not answer (why).
    Ids(Result<(), String>),
    /// NSS's answers to an lsarpc call's questions ([`crate::ipc`]).
    Names(NameAnswers),
    /// A quota source's answer ([`crate::quota`]), or why there is none.
    Quota(Result<crate::quota::QuotaDone, String>),
    /// A file's home's answer to what a request asked before it changed anything (a delete
    /// pending read: [`Lookup::Home`]), or why it gave none.
    Home(Result<Vec<u8>, ringshare_wire::NtStatus>),
    /// A file's home's answers to the questions a request that may ask more than one asked
    /// before it changed anything (each a [`Lookup::Home`], the request parked and ran again
    /// for each), by the tag the request gave each question.
    Homes(HomeAnswers),
    /// What a file system job found ([`Lookup::Fs`]), and the answer the request had been
    /// given before it asked (a file's home's, taken in the same run), kept for it.
    Fs(crate::fsjob::FsDone, Option<Box<DomainAnswer>>),
}

/// A file's home's answers to a request's questions, each by the tag the request gave it
/// ([`DomainAnswer::Homes`]).
pub type HomeAnswers = Vec<(u64, Result<Vec<u8>, ringshare_wire::NtStatus>)>;

/// The local accounts, with the users of `workgroup` checked by the domain: the domain was
/// asked before the exchange went on, away from the I/O thread, and `answer` is what it said
/// (this module). A response of the workgroup without its answer is refused.
pub struct WithDomain<'a> {
    pub local: &'a dyn UserLookup,
    pub workgroup: &'a str,
    pub answer: Option<&'a DomainAnswer>,
}

impl UserLookup for WithDomain<'_> {
    fn nt_hash(&self, user: &str) -> Option<[u8; 16]> {
        self.local.nt_hash(user)
    }

    fn uid(&self, user: &str) -> Option<u32> {
        self.local.uid(user)
    }

    fn domain_ntlm(&self, r: &DomainNtlm<'_>) -> Option<Result<[u8; 16], String>> {
        r.domain
            .eq_ignore_ascii_case(self.workgroup)
            .then(|| match self.answer {
                Some(DomainAnswer::Ntlm(asked, answer)) if asked.is(r) => answer.clone(),
                _ => Err("the domain was not asked".into()),
            })
    }
}

/// How the server reaches the KDCs of its realm, for IAKerb clients that cannot (the binary:
/// the `kdc =` lines of krb5.conf, over UDP and TCP).
pub trait Kdcs: Send + Sync {
    /// Send `request` to a KDC of `realm`; its reply, or why there is none.
    fn exchange(&self, realm: &str, request: &[u8]) -> Result<Vec<u8>, String>;
}

/// The id source and the idmap ranges of the ids it is asked about ([`Lookup::Account`]).
pub type DomainIds = (Arc<dyn IdSource>, Vec<(u32, u32)>);

/// A question and who answers it.
pub struct LookupRequest {
    pub id: u64,
    pub ask: Lookup,
}

/// What to look up.
pub enum Lookup {
    /// Ask the domain whether it accepts an NTLMv2 response ([`DomainLogons::ntlm`]).
    DomainNtlm {
        logons: Arc<dyn DomainLogons>,
        request: DomainNtlmRequest,
    },
    /// The account of the first of `names` that has one ([`Accounts::user`]; the names are
    /// tried in order while the answer is "no such user").
    Account {
        accounts: Arc<dyn Accounts>,
        names: Vec<String>,
        /// A domain user without a PAC (an NTLM logon) on a member whose ids winbind maps:
        /// the SIDs of the account's ids in these idmap ranges join its token
        /// ([`IdSource::sids_of`]).
        domain_ids: Option<DomainIds>,
    },
    /// Relay an IAKerb client's KDC request to a KDC of the server's realm ([`Kdcs::exchange`]).
    Kdc {
        kdcs: Arc<dyn Kdcs>,
        request: KdcRequest,
    },
    /// The names of Unix ids and the ids of names, for an lsarpc call ([`Accounts::user_name`],
    /// [`Accounts::group_name`], [`Accounts::unix_user`], [`Accounts::group`]).
    Names {
        accounts: Arc<dyn Accounts>,
        /// A domain member's id source, for the domain questions ([`NameQuery::DomainSid`],
        /// [`NameQuery::DomainName`]).
        ids: Option<Arc<dyn IdSource>>,
        queries: Vec<NameQuery>,
    },
    /// The Unix ids of domain SIDs and the SIDs of Unix ids ([`IdSource`]; either list may be
    /// empty).
    Ids {
        source: Arc<dyn IdSource>,
        sids: Vec<ringshare_wire::security::Sid>,
        ids: Vec<Xid>,
    },
    /// A share's quotas ([`crate::quota::QuotaSource`]: a `get quota command` is a program
    /// the server runs).
    Quota {
        source: Arc<dyn crate::quota::QuotaSource>,
        ask: crate::quota::QuotaAsk,
    },
    /// What a cluster node asks etcd (a persistent open's record stored or removed: a
    /// consensus write, which waits for an election while the etcd leader is gone), bounded
    /// where it is carried ([`ClusterAsk`]).
    Cluster(ClusterAsk),
    /// A call to the home of a file homed on another node (its share modes, leases, locks
    /// decided there), bounded where it is carried (the peer connection's 2 s) ([`HomeAsk`]).
    Home(HomeAsk),
    /// A file system job of a share whose calls may wait on a network, run by the driver's
    /// file system pool as the request's user ([`crate::fsjob`]).
    Fs(crate::fsjob::FsJob),
}

/// The answer to a [`LookupRequest`].
#[derive(Debug, Clone)]
pub enum LookupDone {
    /// The NTLMv2 session base key, or why the domain refused.
    DomainNtlm(Result<[u8; 16], String>),
    /// The account, or why there is none.
    Account(Result<Account, AccountError>),
    /// The KDC's reply, or why there is none.
    Kdc(Result<Vec<u8>, String>),
    /// The id source's answers, or why it gave none.
    Ids(Result<IdAnswers, String>),
    /// What NSS answered about the ids and names asked (boxed: its maps are the largest
    /// answer).
    Names(Box<NameAnswers>),
    /// What the quota source answered.
    Quota(crate::quota::QuotaDone),
    /// Whether the cluster's store did what it was asked.
    Cluster(Result<(), ringshare_wire::NtStatus>),
    /// What a file's home answered (the encoded message), or why it did not.
    Home(Result<Vec<u8>, ringshare_wire::NtStatus>),
    /// What a file system job found ([`Lookup::Fs`]).
    Fs(crate::fsjob::FsDone),
}

impl LookupDone {
    /// The cluster's answer ([`Lookup::Cluster`]); another answer is an error.
    pub fn cluster(self) -> Result<(), ringshare_wire::NtStatus> {
        match self {
            LookupDone::Cluster(r) => r,
            _ => Err(ringshare_wire::NtStatus::INTERNAL_ERROR),
        }
    }

    /// A file's home's answer ([`Lookup::Home`]); another answer is an error.
    pub fn home(self) -> Result<Vec<u8>, ringshare_wire::NtStatus> {
        match self {
            LookupDone::Home(r) => r,
            _ => Err(ringshare_wire::NtStatus::INTERNAL_ERROR),
        }
    }
}

/// A cluster node's question to etcd ([`Lookup::Cluster`]): what it is (for the log) and the
/// call that asks it, which waits for the answer within its own bound (crates/cluster-home
/// makes it; the driver's `ClusterLink` carries it).
pub struct ClusterAsk {
    pub what: String,
    pub run: Box<dyn Fn() -> Result<(), ringshare_wire::NtStatus> + Send + Sync>,
}

/// A call to a file's home ([`Lookup::Home`]): the node asked, and how the call is carried
/// ([`Carry`]): bytes the driver sends that node itself (on its ring), or a job a thread of
/// its lookup pool runs.
pub struct HomeAsk {
    pub node: u16,
    /// Calls with the same order (of the file they are about; 0: none) are carried one after
    /// another, in the order they were asked: a LOCK, the UNLOCK after it and a CLOSE of the
    /// file reach its home in the order they were sent.
    pub order: u64,
    pub carry: Carry,
}

/// The answer of a call to a file's home, or why none came.
pub type HomeResult = Result<Vec<u8>, ringshare_wire::NtStatus>;

/// What runs as a [`HomeWire`]'s answer comes in (or why none came): it may return a call that
/// must follow (a post, asked before the next call about the file).
pub type Answered = Box<dyn FnOnce(&HomeResult) -> Option<HomeAsk> + Send>;

/// How a [`HomeAsk`] is carried.
pub enum Carry {
    /// One call: these bytes to the node, then its answer ([`HomeWire`]). The driver may
    /// send it on its ring ([`LookupRequest::run`] carries it on a thread).
    Wire(HomeWire),
    /// A job that may call several nodes or decide here (a takeover, a decision at this
    /// node's home that must call others first): always run on a thread.
    Job(Box<dyn Fn() -> HomeResult + Send + Sync>),
}

/// One call to a file's home: the link that carries it on a thread, the message, and what
/// runs once as its answer comes in, before the request that asked runs again, even if that
/// request's connection went (it belongs to the call).
pub struct HomeWire {
    pub link: Arc<dyn crate::link::ClusterLink>,
    pub message: Vec<u8>,
    pub answered: std::sync::Mutex<Option<Answered>>,
}

impl HomeWire {
    /// `message` to be sent on `link`, nothing run on its answer.
    pub fn new(link: Arc<dyn crate::link::ClusterLink>, message: Vec<u8>) -> HomeWire {
        HomeWire {
            link,
            message,
            answered: std::sync::Mutex::new(None),
        }
    }

    /// Runs what is to run on `answer` (once: later calls do nothing) and gives the call
    /// that must follow, if any.
    pub fn answered(&self, answer: &HomeResult) -> Option<HomeAsk> {
        let hook = self
            .answered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()?;
        hook(answer)
    }

    /// `then` runs on the answer after what already runs on it; the call that must follow
    /// is the first's, else `then`'s.
    pub fn then(&mut self, then: Answered) {
        let slot = self
            .answered
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let first = slot.take();
        *slot = Some(Box::new(move |a: &HomeResult| {
            let follow = first.and_then(|f| f(a));
            let next = then(a);
            follow.or(next)
        }));
    }
}

impl HomeAsk {
    /// The call of `message` to `node`, of order `order`, carried as one call.
    pub fn wire(
        link: Arc<dyn crate::link::ClusterLink>,
        node: u16,
        order: u64,
        message: Vec<u8>,
    ) -> HomeAsk {
        HomeAsk {
            node,
            order,
            carry: Carry::Wire(HomeWire::new(link, message)),
        }
    }

    /// A job for a thread.
    pub fn job(node: u16, order: u64, job: Box<dyn Fn() -> HomeResult + Send + Sync>) -> HomeAsk {
        HomeAsk {
            node,
            order,
            carry: Carry::Job(job),
        }
    }

    /// Carry it on this thread, waiting: a call sent on its link, then what runs on its answer
    /// and the call that must follow (carried the same way); or the job.
    pub fn run(&self) -> HomeResult {
        match &self.carry {
            Carry::Job(job) => job(),
            Carry::Wire(w) => {
                let answer = w.link.call(self.node, w.message.clone());
                if let Some(follow) = w.answered(&answer) {
                    let _ = follow.run();
                }
                answer
            }
        }
    }

    /// `then` runs on the answer (a [`Carry::Wire`]'s, before the request runs again; a job's
    /// after it ran, on its thread).
    pub fn then(self, then: Box<dyn FnOnce(&HomeResult) + Send>) -> HomeAsk {
        match self.carry {
            Carry::Wire(mut w) => {
                w.then(Box::new(move |a: &HomeResult| {
                    then(a);
                    None
                }));
                HomeAsk {
                    carry: Carry::Wire(w),
                    ..self
                }
            }
            Carry::Job(job) => {
                let then = std::sync::Mutex::new(Some(then));
                let run = move || {
                    let answer = job();
                    let t = then
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .take();
                    if let Some(t) = t {
                        t(&answer);
                    }
                    answer
                };
                HomeAsk {
                    carry: Carry::Job(Box::new(run)),
                    ..self
                }
            }
        }
    }
}

/// A question to NSS an lsarpc call asks ([`Lookup::Names`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NameQuery {
    /// The user name of a uid.
    Uid(u32),
    /// The group name of a gid.
    Gid(u32),
    /// The uid of a user name.
    User(String),
    /// The gid of a group name.
    Group(String),
    /// The name NSS gives a user name and its GECOS field (samr's full name of the
    /// account).
    Passwd(String),
    /// A domain account's SID: its Unix id from the id source, then that id's name from NSS
    /// (a domain member's LookupSids).
    DomainSid(ringshare_wire::security::Sid),
    /// A domain account's name as NSS spells it: its Unix id from NSS, then that id's SID from
    /// the id source (a domain member's LookupNames).
    DomainName(String),
}

/// A domain account as the id source or NSS names it: its domain when the source named it
/// (else `name` is as NSS gives its id, `DOMAIN\user` as winbind spells it), and its
/// SID_NAME_USE (from NSS: a user or a domain group).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainAccount {
    pub domain: Option<String>,
    pub name: String,
    pub kind: u16,
}

impl From<SidName> for DomainAccount {
    fn from(n: SidName) -> DomainAccount {
        DomainAccount {
            domain: Some(n.domain),
            name: n.name,
            kind: n.kind,
        }
    }
}

/// NSS's answers ([`NameQuery`]): None where it knows no such id or name.
#[derive(Debug, Clone, Default)]
pub struct NameAnswers {
    pub users: std::collections::HashMap<u32, Option<String>>,
    pub groups: std::collections::HashMap<u32, Option<String>>,
    pub user_ids: std::collections::HashMap<String, Option<u32>>,
    pub group_ids: std::collections::HashMap<String, Option<u32>>,
    pub passwd: std::collections::HashMap<String, Option<(String, String)>>,
    /// [`NameQuery::DomainSid`]: the account of a domain SID.
    pub domain_sids:
        std::collections::HashMap<ringshare_wire::security::Sid, Option<DomainAccount>>,
    /// [`NameQuery::DomainName`]: the SID of a domain account's name, and its account.
    pub domain_names:
        std::collections::HashMap<String, Option<(ringshare_wire::security::Sid, DomainAccount)>>,
}

impl NameAnswers {
    /// Ask `accounts` every question of `queries`, and `ids` (the member's id source) the
    /// domain questions among them (none without one).
    pub fn ask(
        accounts: &dyn Accounts,
        ids: Option<&dyn IdSource>,
        queries: &[NameQuery],
    ) -> NameAnswers {
        let mut a = NameAnswers::default();
        domain_answers(&mut a, accounts, ids, queries);
        for q in queries {
            match q {
                NameQuery::DomainSid(_) | NameQuery::DomainName(_) => {}
                NameQuery::Uid(u) => {
                    a.users.insert(*u, accounts.user_name(*u));
                }
                NameQuery::Gid(g) => {
                    a.groups.insert(*g, accounts.group_name(*g));
                }
                NameQuery::User(n) => {
                    a.user_ids.insert(n.clone(), accounts.unix_user(n));
                }
                NameQuery::Group(n) => {
                    a.group_ids.insert(n.clone(), accounts.group(n));
                }
                NameQuery::Passwd(n) => {
                    a.passwd.insert(n.clone(), accounts.passwd(n));
                }
            }
        }
        a
    }
}

/// The name NSS gives uid `u`, or gid `g` (a [`Xid::Both`] is a user when NSS knows such a
/// user: winbind answers a group SID's id as no user).
fn account_of(accounts: &dyn Accounts, x: Xid) -> Option<DomainAccount> {
    let user = x
        .uid()
        .and_then(|u| accounts.user_name(u))
        .map(|name| DomainAccount {
            domain: None,
            name,
            kind: 1,
        });
    user.or_else(|| {
        let name = accounts.group_name(x.gid()?)?;
        Some(DomainAccount {
            domain: None,
            name,
            kind: 2,
        })
    })
}

/// The domain questions of `queries` ([`NameQuery::DomainSid`], [`NameQuery::DomainName`]):
/// the id source is asked once for all the SIDs and once for all the ids NSS gave the names.
/// A source that cannot answer leaves them all unknown (logged).
fn domain_answers(
    a: &mut NameAnswers,
    accounts: &dyn Accounts,
    ids: Option<&dyn IdSource>,
    queries: &[NameQuery],
) {
    let mut sids = Vec::new();
    let mut names = Vec::new();
    for q in queries {
        match q {
            NameQuery::DomainSid(s) => {
                a.domain_sids.insert(s.clone(), None);
                sids.push(s.clone());
            }
            NameQuery::DomainName(n) => {
                a.domain_names.insert(n.clone(), None);
                names.push(n.clone());
            }
            _ => {}
        }
    }
    let Some(source) = ids else {
        return;
    };
    if !sids.is_empty() {
        if let Some(named) = source.names_of(&sids) {
            match named {
                Ok(got) if got.len() == sids.len() => {
                    for (s, n) in sids.iter().zip(got) {
                        a.domain_sids.insert(s.clone(), n.map(DomainAccount::from));
                    }
                }
                Ok(got) => {
                    tracing::warn!("the id source named {} of {} SIDs", got.len(), sids.len())
                }
                Err(why) => tracing::warn!("the id source named no SIDs for lsarpc: {why}"),
            }
            sids.clear();
        }
    }
    if !names.is_empty() {
        if let Some(found) = source.sids_of_names(&names) {
            match found {
                Ok(got) if got.len() == names.len() => {
                    for (n, f) in names.iter().zip(got) {
                        let f = f.map(|(s, n)| (s, DomainAccount::from(n)));
                        a.domain_names.insert(n.clone(), f);
                    }
                }
                Ok(got) => {
                    tracing::warn!("the id source found {} of {} names", got.len(), names.len())
                }
                Err(why) => tracing::warn!("the id source found no names for lsarpc: {why}"),
            }
            names.clear();
        }
    }
    if !sids.is_empty() {
        match source.ids_of(&sids) {
            Ok(got) if got.len() == sids.len() => {
                for (s, x) in sids.into_iter().zip(got) {
                    let account = x.and_then(|x| account_of(accounts, x));
                    a.domain_sids.insert(s, account);
                }
            }
            Ok(got) => tracing::warn!(
                "the id source gave {} ids for {} SIDs",
                got.len(),
                sids.len()
            ),
            Err(why) => tracing::warn!("the id source gave no ids for lsarpc's SIDs: {why}"),
        }
    }
    // Each name's Unix id as NSS gives it: a user's, else a group's.
    let found: Vec<(String, Xid)> = names
        .into_iter()
        .filter_map(|n| {
            let x = match accounts.unix_user(&n) {
                Some(u) => Xid::Uid(u),
                None => Xid::Gid(accounts.group(&n)?),
            };
            Some((n, x))
        })
        .collect();
    if found.is_empty() {
        return;
    }
    let xids: Vec<Xid> = found.iter().map(|(_, x)| *x).collect();
    match source.sids_of(&xids) {
        Ok(got) if got.len() == xids.len() => {
            for ((n, x), s) in found.into_iter().zip(got) {
                let answer = s.and_then(|s| Some((s, account_of(accounts, x)?)));
                a.domain_names.insert(n, answer);
            }
        }
        Ok(got) => tracing::warn!(
            "the id source gave {} SIDs for {} ids",
            got.len(),
            xids.len()
        ),
        Err(why) => tracing::warn!("the id source gave no SIDs for lsarpc's names: {why}"),
    }
}

impl LookupRequest {
    /// Ask, waiting for the answer: call it where waiting stalls no client (the driver's lookup
    /// threads), or in tests.
    pub fn run(&self) -> LookupDone {
        match &self.ask {
            Lookup::DomainNtlm { logons, request } => {
                LookupDone::DomainNtlm(logons.ntlm(&request.as_request()))
            }
            Lookup::Account {
                accounts,
                names,
                domain_ids,
            } => {
                let mut answer = Err(AccountError::NoSuchUser);
                for name in names {
                    answer = accounts.user(name);
                    if !matches!(answer, Err(AccountError::NoSuchUser)) {
                        break;
                    }
                }
                if let (Ok(a), Some((source, ranges))) = (&mut answer, domain_ids) {
                    add_domain_sids(a, source.as_ref(), ranges);
                }
                LookupDone::Account(answer)
            }
            Lookup::Kdc { kdcs, request } => {
                LookupDone::Kdc(kdcs.exchange(&request.realm, &request.request))
            }
            Lookup::Ids { source, sids, ids } => {
                LookupDone::Ids(ask_ids(source.as_ref(), sids, ids))
            }
            Lookup::Names {
                accounts,
                ids,
                queries,
            } => LookupDone::Names(Box::new(NameAnswers::ask(
                accounts.as_ref(),
                ids.as_deref(),
                queries,
            ))),
            Lookup::Quota { source, ask } => LookupDone::Quota(ask.run(source)),
            Lookup::Cluster(ask) => LookupDone::Cluster((ask.run)()),
            Lookup::Home(ask) => LookupDone::Home(ask.run()),
            Lookup::Fs(job) => LookupDone::Fs(job.run()),
        }
    }
}

/// Add to `a`'s token the SIDs `source` gives its uid and groups that lie in `ranges`. A source
/// that cannot answer leaves the token as it was (logged): the logon goes on, and the POSIX ACL
/// still decides what the kernel grants.
fn add_domain_sids(a: &mut Account, source: &dyn IdSource, ranges: &[(u32, u32)]) {
    let in_range = |id: u32| ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&id));
    let mut ids: Vec<Xid> = Vec::new();
    let uid = a.who.uid();
    if in_range(uid) {
        ids.push(Xid::Uid(uid));
    }
    for &g in std::iter::once(&a.who.gid()).chain(a.who.groups()) {
        if in_range(g) && !ids.contains(&Xid::Gid(g)) {
            ids.push(Xid::Gid(g));
        }
    }
    if ids.is_empty() {
        return;
    }
    match source.sids_of(&ids) {
        Ok(found) => {
            let mut sids = a.sids.to_vec();
            for s in found.into_iter().flatten() {
                if !sids.contains(&s) {
                    sids.push(s);
                }
            }
            a.sids = sids.into();
        }
        Err(why) => tracing::warn!(
            "the id source (winbind) gave no SIDs for {}'s ids: {why}",
            a.name
        ),
    }
}

/// Ask `source` about `sids` and `ids`; answers that do not match the questions one for one are
/// no answer.
fn ask_ids(
    source: &dyn IdSource,
    sids: &[ringshare_wire::security::Sid],
    ids: &[Xid],
) -> Result<IdAnswers, String> {
    let mut a = IdAnswers::default();
    if !sids.is_empty() {
        let got = source.ids_of(sids)?;
        if got.len() != sids.len() {
            return Err(format!("{} answers for {} SIDs", got.len(), sids.len()));
        }
        a.sids = sids.iter().cloned().zip(got).collect();
    }
    if !ids.is_empty() {
        let got = source.sids_of(ids)?;
        if got.len() != ids.len() {
            return Err(format!("{} answers for {} ids", got.len(), ids.len()));
        }
        a.ids = ids.iter().copied().zip(got).collect();
    }
    Ok(a)
}

impl fmt::Debug for LookupRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.ask {
            Lookup::DomainNtlm { request, .. } => write!(
                f,
                "Lookup {{ id: {}, domain NTLM of {}\\{} }}",
                self.id, request.domain, request.user
            ),
            Lookup::Account { names, .. } => {
                write!(f, "Lookup {{ id: {}, account of {names:?} }}", self.id)
            }
            Lookup::Ids { sids, ids, .. } => write!(
                f,
                "Lookup {{ id: {}, ids of {} SIDs and SIDs of {:?} }}",
                self.id,
                sids.len(),
                ids
            ),
            Lookup::Names { queries, .. } => {
                write!(f, "Lookup {{ id: {}, names of {queries:?} }}", self.id)
            }
            Lookup::Quota { ask, .. } => {
                write!(f, "Lookup {{ id: {}, quota: {ask:?} }}", self.id)
            }
            Lookup::Cluster(ask) => write!(f, "Lookup {{ id: {}, {} }}", self.id, ask.what),
            Lookup::Home(ask) => write!(
                f,
                "Lookup {{ id: {}, a call to node {} }}",
                self.id, ask.node
            ),
            Lookup::Fs(job) => write!(f, "Lookup {{ id: {}, {job:?} }}", self.id),
            Lookup::Kdc { request, .. } => write!(
                f,
                "Lookup {{ id: {}, KDC of realm {} ({} bytes) }}",
                self.id,
                request.realm,
                request.request.len()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringshare_wire::security::Sid;

    /// winbind with autorid: the user's uid and two of their groups are domain ids.
    struct Winbind;

    impl IdSource for Winbind {
        fn ids_of(&self, sids: &[Sid]) -> Result<Vec<Option<Xid>>, String> {
            Ok(vec![None; sids.len()])
        }

        fn sids_of(&self, ids: &[Xid]) -> Result<Vec<Option<Sid>>, String> {
            Ok(ids
                .iter()
                .map(|x| match x {
                    Xid::Uid(1_101_104) => "S-1-5-21-1-2-3-1104".parse().ok(),
                    Xid::Gid(1_101_106) => "S-1-5-21-1-2-3-1106".parse().ok(),
                    Xid::Gid(1_100_513) => "S-1-5-21-1-2-3-513".parse().ok(),
                    _ => None,
                })
                .collect())
        }
    }

    struct Nss;

    impl Accounts for Nss {
        fn user(&self, name: &str) -> Result<Account, AccountError> {
            Ok(Account {
                name: name.to_string(),
                who: Arc::new(ringshare_engine::creds::Creds::new(
                    1_101_104,
                    1_100_513,
                    vec![1_100_513, 1_101_106, 100],
                )),
                home: String::new(),
                sids: Default::default(),
            })
        }

        fn group(&self, _: &str) -> Option<u32> {
            None
        }

        fn group_name(&self, _: u32) -> Option<String> {
            None
        }
    }

    #[test]
    fn an_ntlm_domain_users_token_gets_the_sids_winbind_gives_their_ids() {
        let ask = |domain_ids| LookupRequest {
            id: 1,
            ask: Lookup::Account {
                accounts: Arc::new(Nss),
                names: vec!["RSAD\\rscarol".into()],
                domain_ids,
            },
        };
        let source: Arc<dyn IdSource> = Arc::new(Winbind);
        let LookupDone::Account(Ok(a)) = ask(Some((source, vec![(1_000_000, 19_999_999)]))).run()
        else {
            panic!("an account")
        };
        let sids: Vec<String> = a.sids.iter().map(|s| s.to_string()).collect();
        assert_eq!(
            sids,
            [
                "S-1-5-21-1-2-3-1104",
                "S-1-5-21-1-2-3-513",
                "S-1-5-21-1-2-3-1106"
            ],
            "the user's, then their groups' (gid 100 is local: not asked)"
        );
        let LookupDone::Account(Ok(a)) = ask(None).run() else {
            panic!("an account")
        };
        assert!(a.sids.is_empty(), "not asked without an id source");
    }
}
