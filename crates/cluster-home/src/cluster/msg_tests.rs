//! Round trips of every cluster message ([`super`]).
use super::*;
use crate::files::oplock::Caching;
use ringshare_wire::consts::{AccessMask, LeaseBreakFlags, LeaseFlags, LeaseState, ShareAccess};
use ringshare_wire::create::LeaseV2;
use ringshare_wire::misc::LeaseBreakNotification;

fn key(n: u64) -> FileKey {
    FileKey {
        dev: crate::link::CLUSTER_DEV,
        ino: n,
        stream: 0,
    }
}

/// One message of every kind, with every optional part present.
pub fn samples() -> Vec<Message> {
    let route = Route {
        conn_id: (1 << 48) | 7,
        session_id: 99,
    };
    let id = LeaseId {
        client_guid: [3; 16],
        key: [4; 16],
    };
    let lease_req = Lease {
        key: [4; 16],
        state: LeaseState(7),
        flags: LeaseFlags(4),
        duration: 0,
        v2: Some(LeaseV2 {
            parent_key: [5; 16],
            epoch: 2,
        }),
    };
    let ask = Ask {
        owner: (1 << 48) | 11,
        persistent_id: (1 << 48) | 12,
        route,
        wish: Wish {
            retry: true,
            access: 0x0012_019f,
            share_access: 3,
            truncate: false,
            delete_only: false,
            lease: Some(id),
        },
        requested: 0xFF,
        lease_req: Some(lease_req),
        share: "share".into(),
        path: RelPath::from_components(["dir", "f.txt"]).unwrap(),
        is_dir: false,
        conn_id: route.conn_id,
        now_ms: 1234,
        who: Some(ringshare_vfs::creds::intern(ringshare_vfs::Creds::new(
            1001,
            1002,
            vec![5, 7, 1002],
        ))),
        posix: false,
    };
    let l = ByteRangeLock {
        offset: 10,
        length: 20,
        exclusive: true,
        owner: ask.owner,
    };
    let record = Record {
        key: key(9),
        share: "share".into(),
        path: RelPath::from_components(["f.txt"]).unwrap(),
        is_dir: false,
        delete_pending: true,
        opens: vec![ShareEntry {
            owner: ask.owner,
            access: 3,
            share_access: 7,
            caching: Caching {
                level: 0xFF,
                breaking_to: Some(1),
                break_deadline_ms: 0,
                lease: Some(id),
                route,
                file_id: (1, 2),
            },
            who: ask.who.clone(),
            posix: false,
        }],
        locks: vec![l],
        leases: vec![oplock::Lease {
            id,
            state: 5,
            breaking_to: Some(1),
            required: 1,
            break_deadline_ms: 0,
            epoch: 3,
            v2: true,
            parent_key: Some([6; 16]),
            route,
        }],
    };
    let ask_who = ask.who.clone();
    let calls = vec![
        Call::Admit(key(1), Box::new(ask.clone())),
        Call::Admit(
            key(2),
            Box::new(Ask {
                posix: true,
                ..ask.clone()
            }),
        ),
        Call::Close {
            key: key(1),
            owner: ask.owner,
            delete_on_close: true,
        },
        Call::Lock {
            key: key(1),
            owner: ask.owner,
            asks: vec![(Ok(l), false), (Err(NtStatus::INVALID_LOCK_RANGE), true)],
            max: 100,
            now_ms: 5,
        },
        Call::RetryLock(key(1), l),
        Call::Unlock {
            key: key(1),
            owner: ask.owner,
            ranges: vec![Ok((1, 2)), Err(NtStatus::INVALID_PARAMETER)],
        },
        Call::Io {
            key: key(1),
            owner: ask.owner,
            offset: 0,
            length: 4096,
            write: true,
            change: true,
            now_ms: 6,
        },
        Call::Changed {
            key: key(1),
            owner: ask.owner,
            now_ms: 7,
        },
        Call::DeletePending(key(1), Some(true)),
        Call::Rename {
            key: key(1),
            owner: ask.owner,
            conn_id: route.conn_id,
            now_ms: 8,
        },
        Call::Moved(key(1), RelPath::from_components(["g.txt"]).unwrap()),
        Call::AckOplock {
            key: key(1),
            owner: ask.owner,
            level: 1,
        },
        Call::AckLease {
            key: key(1),
            id,
            state: 3,
            now_ms: 9,
        },
        Call::Revoke {
            key: key(1),
            clear: 1,
        },
        Call::Reclaim {
            parts: vec![1, 5, 200],
            after: Some(key(4)),
            posix: false,
        },
        Call::Reclaim {
            parts: vec![2],
            after: None,
            posix: true,
        },
        Call::GiveUp(Box::new(GiveUpAsk {
            file_id: FileId {
                persistent: (1 << 48) | 12,
                volatile: (1 << 48) | 11,
            },
            create_guid: Some([8; 16]),
            lease_key: Some([4; 16]),
            client_guid: [3; 16],
            name: "dir\\f.txt".into(),
            share: "share".into(),
            uid: 1001,
            user: "alice".into(),
            posix: false,
        })),
        Call::GiveUp(Box::new(GiveUpAsk {
            file_id: FileId {
                persistent: 1,
                volatile: 2,
            },
            create_guid: None,
            lease_key: None,
            client_guid: [3; 16],
            name: "f".into(),
            share: "share".into(),
            uid: 1001,
            user: "alice".into(),
            posix: true,
        })),
        Call::Transfer(
            key(9),
            Box::new(Moved {
                from: (1 << 48) | 11,
                to: (2 << 48) | 5,
                route,
                who: ask_who.clone(),
            }),
        ),
        Call::CloseParked(vec![((1 << 48) | 12, (1 << 48) | 11), (3, 4)]),
        Call::Interest { from: 3 },
        Call::Adopt(Box::new(CaRecord {
            keeper: 1,
            file_id: FileId {
                persistent: (1 << 48) | 12,
                volatile: (1 << 48) | 20,
            },
            share: "share".into(),
            uid: 1001,
            user: "alice".into(),
            who: ask_who.clone(),
            state: handover(false),
            lease: None,
            locks: Vec::new(),
        })),
    ];
    let moved_open = record.opens[0].clone();
    // A POSIX open beside a Windows one in a record, and a POSIX open's hand-over.
    let mut posix_record = record.clone();
    posix_record.opens.push(ShareEntry {
        owner: 77,
        posix: true,
        ..record.opens[0].clone()
    });
    let posix_handover = handover(true);
    let moved_lease = record.leases[0].clone();
    let answers = vec![
        Answer::Admitted(
            Grant {
                level: 0xFF,
                lease_state: 7,
                lease_breaking: false,
                epoch: 3,
                v2: true,
                parent_key: Some([5; 16]),
            },
            7,
        ),
        Answer::Wait,
        Answer::Refused(NtStatus::SHARING_VIOLATION),
        Answer::Done,
        Answer::Closed(
            Closed {
                remove: true,
                last_open: true,
                path: RelPath::from_components(["f.txt"]).unwrap(),
                is_dir: false,
                newly_pending: false,
            },
            Some(id),
        ),
        Answer::Flag(true),
        Answer::Io {
            conflict: false,
            writers: true,
            grant: 3,
        },
        Answer::Level(5),
        Answer::Pending {
            was: false,
            now: true,
        },
        Answer::Records {
            records: vec![record.clone()],
            next: Some(key(9)),
        },
        Answer::Records {
            records: vec![posix_record],
            next: None,
        },
        Answer::GivenUp(Box::new(posix_handover.clone())),
        Answer::GivenUp(Box::new(handover(false))),
        Answer::Transferred(Box::new(Transferred {
            open: moved_open,
            lease: Some(moved_lease),
            locks: vec![l],
            delete_pending: true,
            grant: 5,
        })),
    ];
    let posts = vec![
        Break::Oplock {
            session_id: 99,
            file_id: FileId {
                persistent: 1,
                volatile: 2,
            },
            level: 1,
        },
        Break::Lease {
            session_id: 99,
            notification: LeaseBreakNotification {
                new_epoch: 4,
                flags: LeaseBreakFlags(1),
                lease_key: [4; 16],
                current_lease_state: LeaseState(7),
                new_lease_state: LeaseState(3),
                break_reason: 0,
                access_mask_hint: AccessMask(0),
                share_mask_hint: ShareAccess(0),
            },
        },
        Break::Retry,
    ];
    calls
        .into_iter()
        .map(Message::Call)
        .chain(answers.into_iter().map(Message::Answer))
        .chain(
            posts
                .into_iter()
                .map(|notice| Message::Post(Post { route, notice })),
        )
        .chain([
            Message::Changes {
                share: "share".into(),
                changes: vec![
                    Change {
                        action: 1,
                        filter: 1,
                        path: RelPath::from_components(["d", "new.txt"]).unwrap(),
                        stream: None,
                    },
                    Change {
                        action: 3,
                        filter: 0x200,
                        path: RelPath::from_components(["f.txt"]).unwrap(),
                        stream: Some("s".into()),
                    },
                ],
            },
            Message::Interest {
                from: 2,
                watching: true,
            },
            Message::DirChanged {
                share: "share".into(),
                dir: RelPath::from_components(["d"]).unwrap(),
                except: Some([7; 16]),
            },
            Message::DirChanged {
                share: "share".into(),
                dir: RelPath::root(),
                except: None,
            },
        ])
        .collect()
}

/// A disconnected open's state as handed over; `posix`: of a POSIX open.
fn handover(posix: bool) -> HandOver {
    HandOver {
        key: key(9),
        path: RelPath::from_components(["dir", "f.txt"]).unwrap(),
        is_dir: false,
        access: 0x0012_019f,
        share_access: 3,
        create_options: 0x40,
        position: 77,
        mode: 2,
        kind: 2,
        timeout_ms: 60_000,
        durable_create_guid: [8; 16],
        durable_client_guid: [3; 16],
        persistent: true,
        create_guid: Some(([3; 16], [8; 16])),
        create_action: 2,
        lock_sequences: Some([0xFF; 64]),
        notify_on_close: 0x10,
        posix_rename: true,
        posix,
    }
}

#[test]
fn every_message_decodes_to_what_was_encoded() {
    for m in samples() {
        let bytes = m.encode();
        assert_eq!(Message::decode(&bytes), Ok(m.clone()), "{m:?}");
        // Cut short anywhere, it is refused, not misread.
        for n in 0..bytes.len() {
            assert!(Message::decode(&bytes[..n]).is_err(), "{m:?} cut at {n}");
        }
    }
}

#[test]
fn a_user_with_more_groups_than_a_message_carries_is_sent_as_unknown() {
    let many: Vec<u32> = (0..=WHO_GROUPS_MAX as u32).collect();
    let mut ask = match samples().remove(0) {
        Message::Call(Call::Admit(_, a)) => *a,
        m => panic!("the first sample is an admit: {m:?}"),
    };
    ask.who = Some(ringshare_vfs::creds::intern(ringshare_vfs::Creds::new(
        1, 1, many,
    )));
    let m = Message::Call(Call::Admit(key(1), Box::new(ask.clone())));
    match Message::decode(&m.encode()) {
        Ok(Message::Call(Call::Admit(_, a))) => {
            assert_eq!(a.who, None);
            assert_eq!(a.path, ask.path);
        }
        other => panic!("{other:?}"),
    }
}

/// Not a test: writes the samples as seeds of the cluster_message fuzz
/// target (`cargo test -p ringshare-core -- --ignored
/// write_cluster_fuzz_corpus`; they are in fuzz/corpus/cluster_message).
#[test]
#[ignore]
fn write_cluster_fuzz_corpus() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/cluster_message");
    std::fs::create_dir_all(&dir).unwrap();
    for (i, m) in samples().into_iter().enumerate() {
        let b = m.encode();
        let mut framed = (b.len() as u16).to_le_bytes().to_vec();
        framed.extend_from_slice(&b);
        std::fs::write(dir.join(format!("sample-{i:02}")), framed).unwrap();
    }
}

#[test]
fn a_level_one_message_as_the_builds_before_levels_encode_it_decodes() {
    // Bytes as e9524d6 (the last build without levels) encodes them: an
    // Interest, a "try again" notice, a call to close parked opens.
    let interest = [5, 3, 0, 1];
    let retry = [3, 7, 0, 0, 0, 0, 0, 1, 0, 99, 0, 0, 0, 0, 0, 0, 0, 3];
    let mut close_parked = vec![1, 17, 1, 0];
    close_parked.extend_from_slice(&[8, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(
        Message::decode(&interest),
        Ok(Message::Interest {
            from: 3,
            watching: true
        })
    );
    let route = Route {
        conn_id: (1 << 48) | 7,
        session_id: 99,
    };
    assert_eq!(
        Message::decode(&retry),
        Ok(Message::Post(Post {
            route,
            notice: Break::Retry
        }))
    );
    assert_eq!(
        Message::decode(&close_parked),
        Ok(Message::Call(Call::CloseParked(vec![(8, 9)])))
    );
    for m in [&interest[..], &retry[..], &close_parked[..]] {
        assert_eq!(Message::decode(m).map(|m| m.level()), Ok(BASE_LEVEL));
    }
}

#[test]
fn a_message_of_a_kind_this_build_does_not_know_yields_unknown_kind() {
    let route = [7, 0, 0, 0, 0, 0, 1, 0, 99, 0, 0, 0, 0, 0, 0, 0];
    let mut notice = vec![3];
    notice.extend_from_slice(&route);
    notice.push(0xEE);
    for (what, m) in [
        ("a message", vec![0xEE, 1, 2, 3]),
        ("a call", vec![1, 0xEE, 0, 0]),
        ("an answer", vec![2, 0xEE]),
        ("a notice", notice),
    ] {
        assert_eq!(Message::decode(&m), Err(UNKNOWN_KIND), "{what}");
    }
    // A known kind cut short, or with a bad field, is malformed, not unknown.
    for m in [&[5u8, 3][..], &[5, 3, 0, 2], &[1, 17, 1]] {
        let e = Message::decode(m).expect_err("malformed");
        assert_ne!(e, UNKNOWN_KIND, "{m:?}");
    }
}

#[test]
fn each_message_needs_the_level_that_added_it_and_lowers_to_what_level_two_reads() {
    for m in samples() {
        let want = match &m {
            Message::DirChanged { .. } => 2,
            Message::Call(Call::Admit(_, a)) if a.posix => 3,
            Message::Call(Call::GiveUp(a)) if a.posix => 3,
            Message::Call(Call::Reclaim { posix: true, .. }) => 3,
            Message::Answer(Answer::GivenUp(h)) if h.posix => 3,
            Message::Answer(Answer::Records { records, .. })
                if records.iter().any(|r| r.opens.iter().any(|o| o.posix)) =>
            {
                3
            }
            Message::Call(Call::Adopt(_)) => 5,
            _ => BASE_LEVEL,
        };
        assert_eq!(m.level(), want, "{m:?}");
        assert!(m.level() <= LEVEL);
        // Lowered to a level that reads it, it is unchanged; to level 2, it is one a
        // level-2 node reads (a message of level 5 has no lower form: its sender skips
        // older nodes).
        assert_eq!(m.clone().lowered(m.level()), m);
        if want < 5 {
            assert!(m.clone().lowered(2).level() <= 2, "{m:?}");
        }
    }
}

#[test]
fn a_posix_open_s_persistent_record_is_version_two_and_a_windows_one_s_still_version_one() {
    let rec = |posix| CaRecord {
        keeper: 2,
        file_id: FileId {
            persistent: 1,
            volatile: 2,
        },
        share: "share".into(),
        uid: 1001,
        user: "alice".into(),
        who: None,
        state: handover(posix),
        lease: None,
        locks: Vec::new(),
    };
    let (w, p) = (encode_ca(&rec(false)), encode_ca(&rec(true)));
    assert_eq!((w[0], p[0]), (1, 2));
    assert_eq!(w[1..], p[1..], "the same fields");
    assert_eq!(decode_ca(&w), Ok(rec(false)));
    assert_eq!(decode_ca(&p), Ok(rec(true)));
    let mut other = p.clone();
    other[0] = 3;
    assert!(decode_ca(&other).is_err());
}

#[test]
fn a_posix_admit_lowered_below_level_three_is_the_admit_older_nodes_read() {
    let Some(Message::Call(Call::Admit(k, ask))) = samples()
        .into_iter()
        .find(|m| matches!(m, Message::Call(Call::Admit(_, a)) if a.posix))
    else {
        panic!("a POSIX admit among the samples");
    };
    let posix = Message::Call(Call::Admit(k, ask.clone()));
    let windows = Message::Call(Call::Admit(
        k,
        Box::new(Ask {
            posix: false,
            ..*ask
        }),
    ));
    // Level 3: a call kind of its own (19), the same fields after it.
    let (p, w) = (posix.encode(), windows.encode());
    assert_eq!((p[1], w[1]), (19, 1));
    assert_eq!(p[2..], w[2..]);
    // Below: byte for byte what a level-2 node has always read.
    for level in [BASE_LEVEL, 2] {
        let lowered = posix.clone().lowered(level);
        assert_eq!(lowered.encode(), w, "level {level}");
        assert!(lowered.level() <= level);
    }
    assert_eq!(posix.clone().lowered(3).encode(), p);
}
