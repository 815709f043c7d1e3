//! What a CREATE admitted and not yet answered was granted: its lease key, or its FileId when
//! it holds an oplock. A break of it waits for the CREATE's answer
//! (crates/core/src/conn/break_order.rs): its client would ignore a break of a lease or open it
//! has not heard of ([MS-SMB2] 3.2.5.19.2).

use ringshare_wire::codec::HEADER_LEN;
use ringshare_wire::consts::{Command, OplockLevel};
use ringshare_wire::create::{decode_contexts, ContextTag, Lease};
use ringshare_wire::{FileId, NtStatus};

use super::{Changing, Installing};
use crate::files::oplock::LEVEL_LEASE;
use crate::server::Notice;

/// A lease by its key, or an oplock by its open's FileId.
#[derive(Debug, PartialEq)]
pub(crate) enum Granted {
    Lease([u8; 16]),
    Oplock(FileId),
}

impl Granted {
    /// Whether `notice` breaks it.
    pub(crate) fn broken_by(&self, notice: &Notice) -> bool {
        match (self, notice) {
            (Granted::Lease(k), Notice::LeaseBreak { notification, .. }) => {
                *k == notification.lease_key
            }
            (Granted::Oplock(f), Notice::OplockBreak { file_id, .. }) => f == file_id,
            _ => false,
        }
    }
}

/// What a CREATE response body (`body`, after the SMB2 header) grants: an oplock of its FileId,
/// or the lease of its RqLs context.
pub(crate) fn in_response(command: Command, status: NtStatus, body: &[u8]) -> Option<Granted> {
    if command != Command::CREATE || status != NtStatus::SUCCESS {
        return None;
    }
    let level = OplockLevel(*body.get(2)?);
    if level == OplockLevel::NONE {
        return None;
    }
    let u64_at = |at: usize| Some(u64::from_le_bytes(body.get(at..at + 8)?.try_into().ok()?));
    let u32_at = |at: usize| Some(u32::from_le_bytes(body.get(at..at + 4)?.try_into().ok()?));
    if level != OplockLevel::LEASE {
        let (persistent, volatile) = (u64_at(64)?, u64_at(72)?);
        return Some(Granted::Oplock(FileId {
            persistent,
            volatile,
        }));
    }
    // CreateContextsOffset counts from the SMB2 header's start.
    let off = (u32_at(80)? as usize).checked_sub(HEADER_LEN)?;
    let len = u32_at(84)? as usize;
    let contexts = decode_contexts(body.get(off..off.checked_add(len)?)?).ok()?;
    let lease = contexts
        .iter()
        .find(|c| c.tag() == ContextTag::RequestLease)?;
    Lease::decode(&lease.data)
        .ok()
        .map(|l| Granted::Lease(l.key))
}

impl Changing {
    /// What its open was granted at admission (its answer waits for its overwrite's job).
    pub(crate) fn granted(&self) -> Option<Granted> {
        let g = &self.adm.grant;
        match g.level {
            0 => None,
            LEVEL_LEASE => self
                .opening
                .asked
                .lease_req
                .as_ref()
                .map(|l| Granted::Lease(l.key)),
            _ => Some(Granted::Oplock(FileId {
                persistent: self.adm.persistent_id,
                volatile: self.adm.id,
            })),
        }
    }
}

impl Installing {
    /// What its answer, built and waiting for its persistent open's record, grants.
    pub(crate) fn granted(&self) -> Option<Granted> {
        in_response(Command::CREATE, NtStatus::SUCCESS, &self.body)
    }
}
