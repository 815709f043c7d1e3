//! The accounts of the server's user database as the `lsarpc` and `samr` pipes show them,
//! and the NSS answers their calls wait for ([`Resolver`]).

use super::ServerFacts;
use crate::localsam;
use crate::lookup::{NameAnswers, NameQuery};

/// Why a call could not finish yet: NSS must be asked these first.
pub struct Needs(pub Vec<NameQuery>);

/// Answers from NSS, and the questions this call still has to ask.
pub(crate) struct Resolver<'a> {
    answers: &'a NameAnswers,
    last: bool,
    missing: Vec<NameQuery>,
}

impl<'a> Resolver<'a> {
    /// `answers` holds what was asked for this call; `last` says it was (so what it lacks
    /// is not found).
    pub(crate) fn new((answers, last): (&'a NameAnswers, bool)) -> Resolver<'a> {
        Resolver {
            answers,
            last,
            missing: Vec::new(),
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
                if !self.last && !self.missing.contains(&q) {
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
}

/// An account of the user database, as the account domain shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Local {
    pub name: String,
    /// Its algorithmic RID ([`localsam::user_rid`] of the uid NSS gives its name).
    pub rid: u32,
    pub disabled: bool,
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
            });
        }
    }
    (!names.pending()).then_some(out)
}
