//! The accounts of the server's user database as the `lsarpc` and `samr` pipes show them,
//! and the NSS answers their calls wait for ([`Resolver`]).

use super::ServerFacts;
use crate::localsam;
use ringshare_wire::security::Sid;

use crate::lookup::{DomainAccount, NameAnswers, NameQuery};

/// Why a call could not finish yet: NSS must be asked these first.
pub struct Needs(pub Vec<NameQuery>);

/// Answers from NSS, and the questions this call still has to ask.
pub(crate) struct Resolver<'a> {
    answers: &'a NameAnswers,
    last: bool,
    missing: Vec<NameQuery>,
    /// What `missing` holds, to find it at once (a call may ask 20,480 questions).
    asked: std::collections::HashSet<NameQuery>,
}

impl<'a> Resolver<'a> {
    /// `answers` holds what was asked for this call; `last` says it was (so what it lacks
    /// is not found).
    pub(crate) fn new((answers, last): (&'a NameAnswers, bool)) -> Resolver<'a> {
        Resolver {
            answers,
            last,
            missing: Vec::new(),
            asked: std::collections::HashSet::new(),
        }
    }

    /// Whether the call asked something NSS has not answered yet.
    pub(crate) fn pending(&self) -> bool {
        !self.missing.is_empty()
    }

    /// The call is done, or must wait for NSS's answers to what it asked.
    pub(crate) fn finish(self) -> Result<(), Needs> {
        if self.missing.is_empty() {
            Ok(())
        } else {
            Err(Needs(self.missing))
        }
    }

    fn ask<T: Clone>(&mut self, found: Option<&Option<T>>, q: NameQuery) -> Option<T> {
        match found {
            Some(v) => v.clone(),
            None => {
                if !self.last && self.asked.insert(q.clone()) {
                    self.missing.push(q);
                }
                None
            }
        }
    }

    pub(crate) fn user_name(&mut self, uid: u32) -> Option<String> {
        self.ask(self.answers.users.get(&uid), NameQuery::Uid(uid))
    }

    pub(crate) fn group_name(&mut self, gid: u32) -> Option<String> {
        self.ask(self.answers.groups.get(&gid), NameQuery::Gid(gid))
    }

    pub(crate) fn user(&mut self, name: &str) -> Option<u32> {
        let q = NameQuery::User(name.to_string());
        self.ask(self.answers.user_ids.get(name), q)
    }

    pub(crate) fn group(&mut self, name: &str) -> Option<u32> {
        let q = NameQuery::Group(name.to_string());
        self.ask(self.answers.group_ids.get(name), q)
    }

    /// The account of domain SID `s` (its id from the member's id source, that id's name from
    /// NSS).
    pub(crate) fn domain_account(&mut self, s: &Sid) -> Option<DomainAccount> {
        let q = NameQuery::DomainSid(s.clone());
        self.ask(self.answers.domain_sids.get(s), q)
    }

    /// The SID and account of the domain account NSS knows as `name`.
    pub(crate) fn domain_sid(&mut self, name: &str) -> Option<(Sid, DomainAccount)> {
        let q = NameQuery::DomainName(name.to_string());
        self.ask(self.answers.domain_names.get(name), q)
    }

    /// The name NSS gives Unix user `name`, and its full name ([`full_name`] of its GECOS
    /// field).
    pub(crate) fn passwd(&mut self, name: &str) -> Option<(String, String)> {
        let q = NameQuery::Passwd(name.to_string());
        self.ask(self.answers.passwd.get(name), q)
            .map(|(name, gecos)| (name, full_name(&gecos).to_string()))
    }
}

/// The full name in a GECOS field, as Samba's passdb takes it: the whole field, unless it
/// has the four comma-separated parts chfn(1) writes, then the first.
pub(crate) fn full_name(gecos: &str) -> &str {
    if gecos.matches(',').count() == 3 {
        gecos.split(',').next().unwrap_or_default()
    } else {
        gecos
    }
}

/// An account of the user database, as the account domain shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Local {
    pub name: String,
    /// Its algorithmic RID ([`localsam::user_rid`] of the uid NSS gives its name).
    pub rid: u32,
    pub disabled: bool,
    /// Its full name (filled in where samr shows it: OpenUser, QueryDisplayInformation; empty
    /// elsewhere).
    pub full_name: String,
    /// The guest account (RID 501): no home or profile, as Samba shows it.
    pub guest: bool,
}

/// The accounts of the user database that have a Unix account, in its order; None while NSS
/// has not answered for all of them (the call then asks, [`Resolver::finish`]).
pub(crate) fn locals(facts: &ServerFacts, names: &mut Resolver<'_>) -> Option<Vec<Local>> {
    let mut out = Vec::with_capacity(facts.users.len());
    for u in &facts.users {
        if let Some(rid) = names.user(&u.name).and_then(localsam::user_rid) {
            out.push(Local {
                name: u.name.clone(),
                rid,
                disabled: u.disabled,
                full_name: String::new(),
                guest: false,
            });
        }
    }
    (!names.pending()).then_some(out)
}

/// RID 501 of the account domain: the guest account (DOMAIN_USER_RID_GUEST).
pub(crate) const RID_GUEST: u32 = 501;

/// The guest account ([`ServerFacts::guest_account`]) when NSS knows it: Samba's passdb
/// answers for RID 501 with it, by the name NSS gives, though it lists it nowhere. The outer
/// None while NSS has not answered (the call then asks, [`Resolver::finish`]).
pub(crate) fn guest(facts: &ServerFacts, names: &mut Resolver<'_>) -> Option<Option<Local>> {
    if facts.guest_account.is_empty() {
        return Some(None);
    }
    let found = names.passwd(&facts.guest_account);
    if names.pending() {
        return None;
    }
    Some(found.map(|(name, full_name)| Local {
        name,
        rid: RID_GUEST,
        disabled: false,
        full_name,
        guest: true,
    }))
}
