//! The free space a user is shown honours their quota (crate::quota, cmd/quota.rs): the share's
//! quota source is asked on a lookup, as the user, and FileFsSizeInformation and
//! FileFsFullSizeInformation show what Samba 4.22 shows.
use crate::support;

use std::sync::{Arc, Mutex};

use ringshare_core::quota::{DiskQuota, QuotaSource, QuotaType};
use ringshare_vfs::memory::MemShare;
use ringshare_vfs::Who;
use ringshare_wire::consts::Command;
use ringshare_wire::consts::CreateDisposition as D;
use ringshare_wire::create::CreateResponse;
use ringshare_wire::fscc::{
    FileFsControlInformation, FileFsFullSizeInformation, FileFsSizeInformation,
    FileQuotaInformation, FileTime, QueryQuotaInfo,
};
use ringshare_wire::security::Sid;
use ringshare_wire::NtStatus;
use ringshare_wire::WriteExt;
use support::*;

const DIR: u32 = 1;
const INFO_FS: u8 = 2;
const FS_SIZE: u8 = 3;
const FS_FULL_SIZE: u8 = 7;
const LIST: u32 = 0x0012_0089;

/// The file system enforces user quotas; every user used `used` of 100 (soft) / 200 (hard)
/// 1 KiB blocks. Keeps what it was asked: (uid asking, path, type, id).
#[derive(Debug, Default)]
struct Quotas {
    used: u64,
    asked: Mutex<Vec<(u32, String, u8, i64)>>,
    sets: Mutex<Vec<(u8, i64, DiskQuota)>>,
}

impl QuotaSource for Quotas {
    fn get(&self, who: &Who, path: &str, kind: QuotaType, id: i64) -> Result<DiskQuota, String> {
        let asked = (who.uid(), path.to_string(), kind as u8, id);
        self.asked.lock().unwrap().push(asked);
        Ok(match kind {
            QuotaType::UserFs => DiskQuota {
                flags: 2,
                soft: 50,
                hard: 60,
                bsize: 1024,
                ..Default::default()
            },
            QuotaType::User => DiskQuota {
                flags: 2,
                cur_blocks: self.used,
                soft: 100,
                hard: 200,
                bsize: 1024,
                ..Default::default()
            },
            _ => DiskQuota::default(),
        })
    }

    fn set(&self, path: &str, kind: QuotaType, id: i64, q: &DiskQuota) -> Result<(), String> {
        assert_eq!(path, ".");
        self.sets.lock().unwrap().push((kind as u8, id, *q));
        Ok(())
    }

    fn users(&self) -> Vec<u32> {
        vec![ALICE_UID, CAROL_UID, 4242]
    }
}

fn client_with(quotas: Option<Arc<Quotas>>) -> Client {
    client_of(quotas, false)
}

/// alice's client on a share with `quotas`; `admin`: she is in its `admin users`.
fn client_of(quotas: Option<Arc<Quotas>>, admin: bool) -> Client {
    let mem = MemShare::new();
    let server = server_with(&mem, |c| {
        let old = &c.shares[0];
        let mut share = old.with_backend(&old.name, old.backend.clone());
        share.quota = quotas.map(|q| q as Arc<dyn QuotaSource>);
        if admin {
            share.rules.admin_users = vec!["alice".into()];
        }
        c.shares[0] = Arc::new(share);
    });
    Client::on(server, mem, Options::default())
}

/// (total, caller available, actual available, sectors per unit, bytes per sector).
fn full_size(c: &mut Client, dir: &str) -> (u64, u64, u64, u32, u32) {
    let d = c.create(dir, LIST, D::OPEN, DIR).unwrap();
    let r = c.query_info(d, INFO_FS, FS_FULL_SIZE, 0, 64);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let f = FileFsFullSizeInformation::decode(&output_buffer(&r)).unwrap();
    let r = c.query_info(d, INFO_FS, FS_SIZE, 0, 64);
    let s = FileFsSizeInformation::decode(&output_buffer(&r)).unwrap();
    assert_eq!(
        (s.total_allocation_units, s.available_allocation_units),
        (
            f.total_allocation_units,
            f.caller_available_allocation_units
        ),
        "FileFsSizeInformation shows the same"
    );
    c.close(d);
    (
        f.total_allocation_units,
        f.caller_available_allocation_units,
        f.actual_available_allocation_units,
        f.sectors_per_allocation_unit,
        f.bytes_per_sector,
    )
}

#[test]
fn a_users_free_space_is_their_quota_less_what_they_use_in_samba_units() {
    let quotas = Arc::new(Quotas {
        used: 10,
        ..Default::default()
    });
    let mut c = client_with(Some(quotas.clone()));
    c.create("sub", LIST, D::CREATE, DIR)
        .map(|f| c.close(f))
        .unwrap();
    // Samba 4.22.6 with the same quota: "100 blocks of size 1024. 90 blocks available".
    assert_eq!(full_size(&mut c, ""), (100, 90, 90, 2, 512));
    assert_eq!(full_size(&mut c, "sub"), (100, 90, 90, 2, 512));
    let asked = quotas.asked.lock().unwrap().clone();
    let uid = asked[0].0;
    assert!(asked.contains(&(uid, ".".into(), 1, -1)), "{asked:?}");
    assert!(asked.contains(&(uid, ".".into(), 2, i64::from(uid))));
    assert!(asked.contains(&(uid, "sub".into(), 2, i64::from(uid))));
}

#[test]
fn a_user_past_their_quota_has_no_free_space_left() {
    let quotas = Arc::new(Quotas {
        used: 150,
        ..Default::default()
    });
    let mut c = client_with(Some(quotas));
    assert_eq!(full_size(&mut c, ""), (150, 0, 0, 2, 512));
}

#[test]
fn without_a_quota_source_the_file_systems_space_is_shown() {
    let mut c = client_with(None);
    let (total, caller, actual, _, _) = full_size(&mut c, "");
    assert!(
        total > 100 && caller == actual && caller > 90,
        "{total} {caller}"
    );
}

const FS_CONTROL: u8 = 6;

#[test]
fn file_system_quota_control_is_shown_to_administrators_only_as_on_samba() {
    let quotas = Arc::new(Quotas {
        used: 10,
        ..Default::default()
    });
    let mut c = client_of(Some(quotas.clone()), true);
    let d = c.create("", LIST, D::OPEN, DIR).unwrap();
    let r = c.query_info(d, INFO_FS, FS_CONTROL, 0, 64);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let f = FileFsControlInformation::decode(&output_buffer(&r)).unwrap();
    // Samba 4.22.6 (smbcquotas -F) with "2 0 50 60 0 0 0": 51200 / 61440 bytes, enforced.
    assert_eq!(
        (f.default_quota_threshold, f.default_quota_limit),
        (51200, 61440)
    );
    assert_eq!(f.file_system_control_flags, 2);
    assert_eq!(
        quotas.asked.lock().unwrap().last(),
        Some(&(0, ".".to_string(), 1, -1)),
        "asked as root"
    );
    let r = c.query_info(d, INFO_FS, FS_CONTROL, 0, 47);
    assert_eq!(r.status(), NtStatus::INFO_LENGTH_MISMATCH);

    let mut c = client_with(Some(quotas));
    let d = c.create("", LIST, D::OPEN, DIR).unwrap();
    let r = c.query_info(d, INFO_FS, FS_CONTROL, 0, 64);
    assert_eq!(r.status(), NtStatus::ACCESS_DENIED);
}

const QUOTA_FILE: &str = "$Extend\\$Quota:$Q:$INDEX_ALLOCATION";
const INFO_QUOTA: u8 = 4;
const READ: u32 = 0x0012_0089;

/// The quota handle's CREATE response (status, attributes, the four times), and its id.
fn open_quota_file(c: &mut Client) -> (NtStatus, u32, [u64; 4], Option<ringshare_wire::FileId>) {
    let tree = c.tree_id;
    let mut m = c.create_msg(tree, QUOTA_FILE, READ, 7, D::OPEN, 0);
    c.sign(&mut m);
    let r = c.send_frame(m).remove(0);
    if r.status() != NtStatus::SUCCESS {
        return (r.status(), 0, [0; 4], None);
    }
    let cr = CreateResponse::decode(&r.msg).unwrap();
    let times = [
        cr.creation_time,
        cr.last_access_time,
        cr.last_write_time,
        cr.change_time,
    ];
    (r.status(), cr.file_attributes.0, times, Some(cr.file_id))
}

fn query_quota(c: &mut Client, f: ringshare_wire::FileId, q: &QueryQuotaInfo, max: u32) -> Resp {
    let mut input = Vec::new();
    q.encode(&mut input);
    let tree = c.tree_id;
    c.call(Command::QUERY_INFO, tree, |o| {
        o.put_u16(41);
        o.put_u8(INFO_QUOTA);
        o.put_u8(0);
        o.put_u32(max);
        o.put_u16(104);
        o.put_u16(0);
        o.put_u32(input.len() as u32);
        o.put_u32(0);
        o.put_u32(0);
        f.write(o);
        o.extend_from_slice(&input);
    })
}

/// (uid, used, threshold, limit) of each entry of a quota reply.
fn entries(r: &Resp) -> Vec<(u32, u64, u64, u64)> {
    FileQuotaInformation::decode_list(&output_buffer(r))
        .unwrap()
        .into_iter()
        .map(|e| {
            (
                e.sid.unix_uid().unwrap(),
                e.quota_used,
                e.quota_threshold,
                e.quota_limit,
            )
        })
        .collect()
}

#[test]
fn only_an_administrator_opens_the_quota_file_and_it_looks_as_on_samba() {
    let quotas = Arc::new(Quotas::default());
    let mut c = client_of(Some(quotas.clone()), false);
    assert_eq!(open_quota_file(&mut c).0, NtStatus::ACCESS_DENIED);
    let mut c = client_of(Some(quotas), true);
    let (status, attrs, times, _) = open_quota_file(&mut c);
    assert_eq!(status, NtStatus::SUCCESS);
    // smbtorture smb2.create.quota-fake-file: hidden, system, directory, archive; no times.
    assert_eq!(attrs, 0x36);
    assert_eq!(times, [0; 4]);
}

#[test]
fn quotas_are_listed_and_asked_by_sid_on_the_quota_handle_only() {
    let quotas = Arc::new(Quotas {
        used: 10,
        ..Default::default()
    });
    let mut c = client_of(Some(quotas.clone()), true);
    let (_, _, _, f) = open_quota_file(&mut c);
    let f = f.unwrap();
    let by_sid = QueryQuotaInfo {
        sids: vec![Sid::unix_user(CAROL_UID)],
        ..Default::default()
    };
    let r = query_quota(&mut c, f, &by_sid, 4096);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert_eq!(entries(&r), [(CAROL_UID, 10240, 102_400, 204_800)]);
    // A listing: every user with a limit, page by page, then no more.
    let restart = QueryQuotaInfo {
        restart_scan: true,
        ..Default::default()
    };
    let r = query_quota(&mut c, f, &restart, 60);
    assert_eq!(entries(&r).len(), 1, "one entry fits in 60 bytes");
    let next = QueryQuotaInfo::default();
    let r2 = query_quota(&mut c, f, &next, 4096);
    assert_eq!(entries(&r2).len(), 2);
    let r3 = query_quota(&mut c, f, &next, 4096);
    assert_eq!(r3.status(), NtStatus::NO_MORE_ENTRIES);
    // Not on another handle; not with a start SID.
    let d = c.create("", LIST, D::OPEN, DIR).unwrap();
    assert_eq!(
        query_quota(&mut c, d, &by_sid, 4096).status(),
        NtStatus::INVALID_HANDLE
    );
    let start = QueryQuotaInfo {
        start_sid: Some(Sid::unix_user(ALICE_UID)),
        ..Default::default()
    };
    assert_eq!(
        query_quota(&mut c, f, &start, 4096).status(),
        NtStatus::INVALID_PARAMETER
    );
}

#[test]
fn an_administrator_sets_quotas_in_samba_blocks_on_the_quota_handle() {
    let quotas = Arc::new(Quotas::default());
    let mut c = client_of(Some(quotas.clone()), true);
    let (_, _, _, f) = open_quota_file(&mut c);
    let f = f.unwrap();
    let mut buf = Vec::new();
    FileQuotaInformation::encode_list(
        &[FileQuotaInformation {
            change_time: FileTime(0),
            quota_used: 0,
            quota_threshold: 1000,
            quota_limit: 2048,
            sid: Sid::unix_user(CAROL_UID),
        }],
        &mut buf,
    );
    assert_eq!(
        c.set_info(f, INFO_QUOTA, 0, &buf).status(),
        NtStatus::SUCCESS
    );
    let mut fs = Vec::new();
    FileFsControlInformation {
        default_quota_threshold: 300,
        default_quota_limit: u64::MAX,
        file_system_control_flags: 2,
        ..Default::default()
    }
    .encode(&mut fs);
    assert_eq!(
        c.set_info(f, INFO_FS, FS_CONTROL, &fs).status(),
        NtStatus::SUCCESS
    );
    let sets: Vec<_> = quotas
        .sets
        .lock()
        .unwrap()
        .iter()
        .map(|(k, id, q)| (*k, *id, q.flags, q.soft, q.hard, q.bsize))
        .collect();
    // Samba 4.22.6's set quota command arguments for the same requests: 1000 bytes is 1 block.
    assert_eq!(
        sets,
        [
            (2, i64::from(CAROL_UID), 0, 1, 2, 1024),
            (1, -1, 2, 1, 0, 1024)
        ]
    );
    // Not on another handle.
    let d = c.create("", LIST, D::OPEN, DIR).unwrap();
    assert_eq!(
        c.set_info(d, INFO_QUOTA, 0, &buf).status(),
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(
        c.set_info(d, INFO_FS, FS_CONTROL, &fs).status(),
        NtStatus::INVALID_HANDLE
    );
}

/// Issue 33: on a share whose calls may wait on a network (FUSE, CephFS) the quota source is
/// asked on a lookup thread as anywhere, and the file system's sizes the quota's space is
/// shown within are read in the QUERY_INFO's file system job: no statfs on the I/O thread.
/// The answer is a local share's.
#[test]
fn on_a_share_that_may_wait_on_a_network_the_space_a_quota_leaves_is_read_in_a_job() {
    use support::fuse::*;
    let quotas = Arc::new(Quotas {
        used: 10,
        ..Default::default()
    });
    let source = quotas.clone() as Arc<dyn QuotaSource>;
    let (mut c, calls) = fuse_client_on(MemShare::new(), true, move |share| {
        let mut config = config_on(share, ringshare_core::SigningPolicy::IfRequired);
        let old = &config.shares[0];
        let mut s = old.with_backend(&old.name, old.backend.clone());
        s.quota = Some(source);
        config.shares[0] = Arc::new(s);
        server_from(config)
    });
    let d = c.create("", LIST, D::OPEN, DIR).unwrap();
    c.hold_lookups = true;
    let m = c.query_info_msg(d, INFO_FS, FS_FULL_SIZE, 64);
    let statfs = || calls.statfs.load(std::sync::atomic::Ordering::SeqCst);
    let before = statfs();
    let (_, mut out) = send_signed(&mut c, m);
    let (mut on_io_thread, mut in_jobs, mut rounds) = (statfs() - before, 0, 0);
    while out.is_empty() {
        let held = std::mem::take(&mut c.held_lookups);
        assert!(!held.is_empty() && rounds < 4, "answered after its lookups");
        rounds += 1;
        let (jobs, io_thread) = run_counting(&mut c, held, &statfs);
        in_jobs += jobs;
        on_io_thread += io_thread;
        let before = statfs();
        out = c.pump();
        on_io_thread += statfs() - before;
    }
    c.hold_lookups = false;
    assert_eq!(on_io_thread, 0, "no statfs on the I/O thread");
    assert_eq!(in_jobs, 1, "the file system's sizes read in the job");
    assert_eq!(rounds, 2, "the quota's lookup, then the job");
    assert_eq!(out[0].status(), NtStatus::SUCCESS);
    let f = FileFsFullSizeInformation::decode(&output_buffer(&out[0])).unwrap();
    // As on a local share (above): the quota's 100 blocks, 90 of them free.
    assert_eq!(
        (
            f.total_allocation_units,
            f.caller_available_allocation_units,
            f.actual_available_allocation_units
        ),
        (100, 90, 90)
    );
}
