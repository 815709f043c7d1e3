//! Quotas, as Samba 4.22 shows them: the free space a user is shown honours their quota
//! (crate::quota), FileFsControlInformation shows the file system's quota state and default
//! limits to administrators, and the quota handle (`$Extend\$Quota:$Q:$INDEX_ALLOCATION`,
//! administrators only) takes QUERY_INFO and SET_INFO of SMB2_0_INFO_QUOTA
//! ([MS-SMB2] 3.3.5.20.4, 3.3.5.21) and a SET_INFO of FileFsControlInformation.
//!
//! Every answer comes from the share's quota source, asked on the lookup threads: the request
//! parks as [`crate::lookup::Lookup::Quota`] (cmd/ids.rs turns [`ASK_IDS`] into the lookup) and
//! runs again with the answer.

use std::sync::Arc;

use ringshare_wire::consts::{CreateDisposition, CreateOptions};
use ringshare_wire::create::CreateRequest;
use ringshare_wire::fscc::{FileFsControlInformation, FileQuotaInformation, QueryQuotaInfo};
use ringshare_wire::info::QueryInfoRequest;
use ringshare_wire::info::QueryInfoResponse;
use ringshare_wire::NtStatus;

use crate::cmd::ids::ASK_IDS;
use crate::exchange::{ConnCore, Reply};
use crate::lookup::{DomainAnswer, Lookup};
use crate::quota::{
    entry_of, limit_in_blocks, DiskQuota, QuotaAsk, QuotaDone, QuotaSource, QuotaType,
};
use crate::server::lock;
use crate::state::Open;

/// The space the quota of the user of `open` leaves them (block size, free and total blocks:
/// [`crate::quota::shown`] makes what is shown of it with the file system's sizes, where they
/// are read), None when no quota limits it (or the share has no quota source, or it gave no
/// answer: logged). Err([`ASK_IDS`]) when the source must be asked first.
pub(crate) fn limited_space(
    core: &mut ConnCore,
    open: &Open,
) -> Result<Option<(u64, u64, u64)>, NtStatus> {
    let Some(source) = open.share.quota.clone() else {
        return Ok(None);
    };
    let path = lock(&open.state).path.components().join("/");
    let path = if path.is_empty() {
        ".".to_string()
    } else {
        path
    };
    let who = open.who.clone();
    let space = match asked(core, source, || QuotaAsk::Space { who, path })? {
        Ok(QuotaDone::Space(space)) => space,
        Ok(_) => None,
        Err(why) => {
            tracing::warn!(share = %open.share.name, "no quota answer: {why}");
            None
        }
    };
    Ok(space)
}

/// FileFsControlInformation ([MS-FSCC] 2.5.2) of a share with a quota source, as Samba 4.22
/// answers it: only to root and `admin users` (ACCESS_DENIED for others), from the file
/// system's user quota state and default limits (type 1, id -1) in bytes; ACCESS_DENIED when
/// the source gives none (as Samba when its `get quota command` fails).
/// Err([`ASK_IDS`]) when the source must be asked first.
pub(crate) fn fs_control(
    core: &mut ConnCore,
    open: &Open,
    source: Arc<dyn QuotaSource>,
) -> Result<FileFsControlInformation, NtStatus> {
    if open.who.uid() != 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let who = open.who.clone();
    let ask = || QuotaAsk::Get {
        who,
        path: ".".to_string(),
        kind: QuotaType::UserFs,
        id: -1,
    };
    match asked(core, source, ask)? {
        Ok(QuotaDone::Got(Ok(q))) => Ok(FileFsControlInformation {
            default_quota_threshold: q.soft.saturating_mul(q.bsize),
            default_quota_limit: q.hard.saturating_mul(q.bsize),
            file_system_control_flags: q.flags,
            ..Default::default()
        }),
        _ => Err(NtStatus::ACCESS_DENIED),
    }
}

/// The quota source's answer to what this request asked, or Err([`ASK_IDS`]) once `ask` is
/// put to it (the request runs again with the answer).
fn asked(
    core: &mut ConnCore,
    source: Arc<dyn QuotaSource>,
    ask: impl FnOnce() -> QuotaAsk,
) -> Result<Result<QuotaDone, String>, NtStatus> {
    match core.domain_answer.take() {
        Some(DomainAnswer::Quota(answer)) => Ok(answer),
        other => {
            core.domain_answer = other;
            core.ids_wanted = Some(Lookup::Quota { source, ask: ask() });
            Err(ASK_IDS)
        }
    }
}

/// The name of NTFS's quota file, which Samba opens as a handle for quota queries and sets
/// (`$Extend\$Quota:$Q:$INDEX_ALLOCATION`; compared as Samba does, case and all).
const QUOTA_FILE: &str = "$Extend\\$Quota:$Q:$INDEX_ALLOCATION";

/// A CREATE of the quota file: refused (ACCESS_DENIED) unless the tree acts as root (root
/// or `admin users`, as Samba, whose smbd must then be root), else made an open of the share's
/// directory that [`fake_file_opened`] marks. Ok(false): another name.
pub(crate) fn fake_file(cr: &mut CreateRequest<'_>, uid: u32) -> Result<bool, NtStatus> {
    if !cr.name.trim_start_matches('\\').starts_with(QUOTA_FILE) {
        return Ok(false);
    }
    if uid != 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    cr.name = String::new();
    cr.create_disposition = CreateDisposition::OPEN;
    cr.create_options.remove(CreateOptions::NON_DIRECTORY_FILE);
    cr.create_options.remove(CreateOptions::DELETE_ON_CLOSE);
    Ok(true)
}

/// The CREATE reply of the quota file, as Samba (and Windows) answer it: hidden, system,
/// directory and archive, no times, no size; its open becomes a quota handle.
pub(crate) fn fake_file_opened(core: &mut ConnCore, mut r: Reply) -> Reply {
    const ATTRIBUTES: u32 = 0x02 | 0x04 | 0x10 | 0x20;
    if let Some(head) = r.body.get_mut(..80) {
        head[8..56].fill(0);
        head[56..60].copy_from_slice(&ATTRIBUTES.to_le_bytes());
        let volatile = u64::from_le_bytes(head[72..80].try_into().unwrap_or([0; 8]));
        core.quota_handles.add(volatile);
    }
    r
}

/// The entries of a listing that fit in `max` bytes (each but the last padded to 8), taken
/// from the front of `left`; `single`: at most one. NO_MORE_ENTRIES when none are left.
fn fill(left: &mut Vec<FileQuotaInformation>, single: bool, max: usize) -> Result<Reply, NtStatus> {
    if left.is_empty() {
        return Err(NtStatus::NO_MORE_ENTRIES);
    }
    let mut used = 0usize;
    let mut n = 0usize;
    for e in left.iter() {
        let start = used.next_multiple_of(8);
        if start + e.encoded_len() > max || (single && n == 1) {
            break;
        }
        used = start + e.encoded_len();
        n += 1;
    }
    let mut bytes = Vec::with_capacity(used);
    FileQuotaInformation::encode_list(&left[..n], &mut bytes);
    left.drain(..n);
    let mut body = Vec::with_capacity(9 + bytes.len());
    QueryInfoResponse { buffer: &bytes }.encode(&mut body);
    if bytes.is_empty() {
        body.push(0);
    }
    Ok(Reply::ok(body))
}

/// QUERY_INFO of SMB2_0_INFO_QUOTA ([MS-SMB2] 3.3.5.20.4) as Samba 4.22 answers it: only on a
/// quota handle (INVALID_HANDLE otherwise); a SID list asks those users' quotas, a scan
/// restarted lists every user with a limit, and a scan not restarted goes on from where the
/// last stopped; a start SID is INVALID_PARAMETER (Samba does not take one). Users are the
/// Unix SIDs S-1-22-1-uid (what lsarpc names); other SIDs are left out.
pub(crate) fn query(
    core: &mut ConnCore,
    open: &Open,
    q: &QueryInfoRequest<'_>,
) -> Result<Reply, NtStatus> {
    if core.quota_handles.scan(open.id).is_none() {
        return Err(NtStatus::INVALID_HANDLE);
    }
    let Some(source) = open.share.quota.clone() else {
        return Err(NtStatus::NOT_SUPPORTED);
    };
    let input = QueryQuotaInfo::decode(q.input).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    if input.start_sid.is_some() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let max = q.output_buffer_length as usize;
    if input.sids.is_empty() && !input.restart_scan {
        let left = core
            .quota_handles
            .scan(open.id)
            .ok_or(NtStatus::INVALID_HANDLE)?;
        return fill(left, input.return_single, max);
    }
    let who = open.who.clone();
    let (map, now_ms) = (&core.server.logons.sid_map, core.now.mono_ms);
    let uids = (!input.sids.is_empty()).then(|| {
        input
            .sids
            .iter()
            .filter_map(|s| map.uid_of(s, now_ms))
            .collect()
    });
    let found = match asked(core, source, || QuotaAsk::Users { who, uids })? {
        Ok(QuotaDone::Users(found)) => found,
        _ => Vec::new(),
    };
    let left = core
        .quota_handles
        .scan(open.id)
        .ok_or(NtStatus::INVALID_HANDLE)?;
    *left = found.iter().map(|(uid, q)| entry_of(*uid, q)).collect();
    fill(left, input.return_single, max)
}

/// SET_INFO of SMB2_0_INFO_QUOTA as Samba 4.22 answers it: only on a quota handle
/// (INVALID_PARAMETER otherwise), the first FILE_QUOTA_INFORMATION's limits set for its user
/// (UNSUCCESSFUL when the list is malformed), in 1024-byte blocks; ACCESS_DENIED when the
/// `set quota command` fails.
pub(crate) fn set_user(core: &mut ConnCore, open: &Open, buf: &[u8]) -> Result<(), NtStatus> {
    if core.quota_handles.scan(open.id).is_none() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let list = FileQuotaInformation::decode_list(buf).map_err(|_| NtStatus::UNSUCCESSFUL)?;
    let e = list.first().ok_or(NtStatus::UNSUCCESSFUL)?;
    // A SID that is no Unix user's is id -1, as Samba passes it.
    let map = &core.server.logons.sid_map;
    let id = map.uid_of(&e.sid, core.now.mono_ms).map_or(-1, i64::from);
    let quota = DiskQuota {
        soft: limit_in_blocks(e.quota_threshold, 1024),
        hard: limit_in_blocks(e.quota_limit, 1024),
        bsize: 1024,
        ..Default::default()
    };
    set(core, open, QuotaType::User, id, quota)
}

/// SET_INFO of FileFsControlInformation as Samba 4.22 answers it: root or `admin users` on a
/// writable share (ACCESS_DENIED otherwise), on a quota handle (INVALID_HANDLE otherwise), at
/// least 42 bytes (INVALID_PARAMETER): the default limits and the flags.
pub(crate) fn set_fs(
    core: &mut ConnCore,
    open: &Open,
    buf: &[u8],
    read_only: bool,
) -> Result<(), NtStatus> {
    if open.who.uid() != 0 || read_only {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if core.quota_handles.scan(open.id).is_none() {
        return Err(NtStatus::INVALID_HANDLE);
    }
    let (Some(soft), Some(hard), Some(flags)) = (buf.get(24..32), buf.get(32..40), buf.get(40..42))
    else {
        return Err(NtStatus::INVALID_PARAMETER);
    };
    let le = |b: &[u8]| b.iter().rev().fold(0u64, |n, &x| n << 8 | u64::from(x));
    let quota = DiskQuota {
        flags: le(flags) as u32,
        soft: limit_in_blocks(le(soft), 1024),
        hard: limit_in_blocks(le(hard), 1024),
        bsize: 1024,
        ..Default::default()
    };
    set(core, open, QuotaType::UserFs, -1, quota)
}

/// Ask the share's source to set `quota` (as root), or take its answer.
fn set(
    core: &mut ConnCore,
    open: &Open,
    kind: QuotaType,
    id: i64,
    quota: DiskQuota,
) -> Result<(), NtStatus> {
    let Some(source) = open.share.quota.clone() else {
        return Err(NtStatus::NOT_SUPPORTED);
    };
    match asked(core, source, || QuotaAsk::Set { kind, id, quota })? {
        Ok(QuotaDone::Set(Ok(()))) => Ok(()),
        _ => Err(NtStatus::ACCESS_DENIED),
    }
}
