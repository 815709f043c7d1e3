//! Asking the id source before a descriptor is mapped ([`crate::sidcache`]): a SET_INFO
//! security or a CREATE whose descriptor names a domain SID that no rid range and no kept
//! answer places, or a QUERY_INFO security whose POSIX ACL holds ids of the other idmap
//! backends' ranges not asked about yet, parks for a lookup ([`crate::lookup::Lookup::Ids`]);
//! the answer goes into the server's [`crate::domain::SidMap`] and the request runs again.
//!
//! A command says so by returning [`ASK_IDS`] with [`ConnCore::ids_wanted`] set; [`parked`]
//! turns that into the lookup. When the request runs again it asks nothing more and goes on
//! with what is known (a SID the source maps to nothing gets no POSIX entry, as on Samba).

use ringshare_wire::security::SecurityDescriptor;
use ringshare_wire::NtStatus;

use crate::cmd::{Asked, Handled, LookupCont};
use crate::exchange::ConnCore;
use crate::lookup::DomainAnswer;
use crate::lookup::Lookup;
use crate::sidcache::Xid;

/// Never on the wire: the request waits for the id source ([`parked`]).
pub(crate) const ASK_IDS: NtStatus = NtStatus(0xE1D5_0001);

/// What a request answered after the id source could not answer: a descriptor whose domain
/// SIDs could not be translated ("none of the information to be translated has been
/// translated").
pub(crate) const NO_ANSWER: NtStatus = NtStatus::NONE_MAPPED;

/// A command's result, with [`ASK_IDS`] made the lookup it stands for.
pub(crate) fn parked(
    core: &mut ConnCore,
    r: Result<Handled, NtStatus>,
) -> Result<Handled, NtStatus> {
    match r {
        Err(ASK_IDS) => match core.ids_wanted.take() {
            Some(ask) => {
                // A QUERY_INFO asks a share's quota source the same way (cmd/quota.rs).
                let asked = match ask {
                    Lookup::Quota { .. } => Asked::Quota,
                    // A read of a file's home (cmd/pending.rs), or one of several
                    // (cmd/io_check.rs).
                    Lookup::Home(_) => match core.home_kept.take() {
                        Some((tag, kept)) => Asked::Homes(tag, kept),
                        None => Asked::Home,
                    },
                    // A READ's or WRITE's checks on a share whose calls may wait on a network
                    // (cmd/io_check.rs).
                    Lookup::Fs(_) => Asked::Fs(core.fs_kept.take().map(Box::new)),
                    _ => Asked::Ids,
                };
                core.home_kept = None;
                core.fs_kept = None;
                Ok(Handled::lookup(ask, LookupCont::Again(asked)))
            }
            None => Err(NtStatus::INTERNAL_ERROR),
        },
        r => {
            core.ids_wanted = None;
            core.home_kept = None;
            core.fs_kept = None;
            // The answers kept for this request are not another's.
            if let Some(DomainAnswer::Homes(_) | DomainAnswer::Fs(..)) = core.domain_answer {
                crate::cmd::drop_answer(core);
            }
            r
        }
    }
}

/// The id source's answer for this request, if it asked and runs again: Some(Ok) answered
/// (in the cache now), Some(Err) the source failed. Taken: later members of a compound ask
/// for themselves.
fn answered(core: &mut ConnCore) -> Option<Result<(), String>> {
    match core.domain_answer.take() {
        Some(DomainAnswer::Ids(a)) => Some(a),
        other => {
            core.domain_answer = other;
            None
        }
    }
}

/// Whether the id source's answer for this request is here (it asked and runs again), not
/// taken.
pub(crate) fn answer_here(core: &ConnCore) -> bool {
    matches!(core.domain_answer, Some(DomainAnswer::Ids(_)))
}

/// The id source's answer for this request taken, if it is here: whether the source failed
/// (a CREATE whose job asked a new file's inherited SIDs then fails [`NO_ANSWER`], as
/// [`before_inherit`] makes it on the I/O thread).
pub(crate) fn took_failed_answer(core: &mut ConnCore) -> bool {
    matches!(answered(core), Some(Err(_)))
}

/// Whether the id source's answer for this request is here (it asked and runs again), taken:
/// a request that reads a file's descriptor again in a file system job before it answers
/// (a QUERY_INFO security on a share whose calls may wait on a network) asks nothing more.
pub(crate) fn took_answer(core: &mut ConnCore) -> bool {
    answered(core).is_some()
}

/// Before a CREATE makes a file at `path` whose NT ACL its parent's inheritable ACEs give
/// ([`crate::ntsd::inherit`]): Err([`ASK_IDS`]) when those ACEs name domain SIDs to ask about
/// first (after a restart or once the kept answers expired, a Windows admin's ACE for
/// `DOMAIN\Sales` on a folder would otherwise give new files no POSIX entry for Sales).
/// Nothing is read on a server without an id source.
pub(crate) fn before_inherit(
    core: &mut ConnCore,
    share: &crate::config::ShareDef,
    who: &ringshare_vfs::Who,
    path: &ringshare_vfs::RelPath,
) -> Result<(), NtStatus> {
    if core.server.logons.id_source().is_none() || core.server.logons.domain().is_none() {
        return Ok(());
    }
    let server = core.server.clone();
    let ids = server.logons.ids(core.now.mono_ms);
    // A parent that cannot be read is the inheritance's to report, after the file is made.
    let Ok(Some(parent_sd)) = crate::ntsd::parent_descriptor(share, who, path, &ids) else {
        return Ok(());
    };
    before_set(core, &parent_sd, &[])
}

/// Before `sd`, given by a client, becomes a POSIX ACL: Err([`ASK_IDS`]) when its domain SIDs,
/// or the SIDs of `ids` (the file's owner and group, which the stored descriptor shows), must
/// be asked about first; Err([`NO_ANSWER`]) when they were and the id source failed.
pub(crate) fn before_set(
    core: &mut ConnCore,
    sd: &SecurityDescriptor,
    ids: &[Xid],
) -> Result<(), NtStatus> {
    match answered(core) {
        Some(Ok(())) => return Ok(()),
        Some(Err(_)) => return Err(NO_ANSWER),
        None => {}
    }
    let Some(source) = core.server.logons.id_source() else {
        return Ok(());
    };
    if core.server.logons.domain().is_none() {
        return Ok(());
    }
    let now = core.now.mono_ms;
    let sids = core.server.logons.sid_map.unknown_sids(sd, now);
    let ids = core.server.logons.sid_map.unknown_of(ids, now);
    if sids.is_empty() && ids.is_empty() {
        return Ok(());
    }
    core.ids_wanted = Some(Lookup::Ids { source, sids, ids });
    Err(ASK_IDS)
}

/// The Unix ids a descriptor names (as Unix SIDs).
pub(crate) fn unix_ids(sd: &SecurityDescriptor) -> Vec<Xid> {
    crate::sidcache::sids_in(sd)
        .into_iter()
        .filter_map(|s| match (s.unix_uid(), s.unix_gid()) {
            (Some(u), _) => Some(Xid::Uid(u)),
            (_, Some(g)) => Some(Xid::Gid(g)),
            _ => None,
        })
        .collect()
}

/// Before `sd`, read from a file, is answered: Err([`ASK_IDS`]) when it holds ids of the other
/// idmap backends' ranges not asked about yet. When the id source failed the ids show as Unix
/// SIDs (logged when the answer came).
pub(crate) fn before_read(core: &mut ConnCore, sd: &SecurityDescriptor) -> Result<(), NtStatus> {
    if answered(core).is_some() {
        return Ok(());
    }
    let Some(source) = core.server.logons.id_source() else {
        return Ok(());
    };
    let ids: Vec<Xid> = core.server.logons.sid_map.unknown_ids(sd, core.now.mono_ms);
    if ids.is_empty() {
        return Ok(());
    }
    core.ids_wanted = Some(Lookup::Ids {
        source,
        sids: Vec::new(),
        ids,
    });
    Err(ASK_IDS)
}
