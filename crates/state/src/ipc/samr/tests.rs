use super::*;
use crate::ipc::UserEntry;
use crate::lookup::{NameAnswers, NameQuery};

fn facts() -> ServerFacts {
    let user = |name: &str, disabled| UserEntry {
        name: name.into(),
        disabled,
    };
    ServerFacts {
        netbios_name: "RS".into(),
        workgroup: "WORKGROUP".into(),
        comment: "ringshare".into(),
        shares: Vec::new(),
        users: vec![
            user("alice", false),
            user("bob", true),
            user("ghost", false),
        ],
        guest_account: "nobody".into(),
        member: None,
    }
}

/// NSS: alice is uid 1012 (full name "Alice Liddell", as chfn writes it), bob 1013, nobody
/// 65534 (GECOS "Kernel Overflow User"), ghost has no Unix account.
fn nss(queries: &[NameQuery]) -> NameAnswers {
    let mut a = NameAnswers::default();
    for q in queries {
        match q {
            NameQuery::User(n) => {
                let uid = match n.as_str() {
                    "alice" => Some(1012),
                    "bob" => Some(1013),
                    "nobody" => Some(65534),
                    _ => None,
                };
                a.user_ids.insert(n.clone(), uid);
            }
            NameQuery::Passwd(n) => {
                let gecos = match n.as_str() {
                    "alice" => Some("Alice Liddell,room 1,,"),
                    "bob" => Some(""),
                    "nobody" => Some("Kernel Overflow User"),
                    _ => None,
                };
                a.passwd
                    .insert(n.clone(), gecos.map(|g| (n.clone(), g.to_string())));
            }
            _ => {}
        }
    }
    a
}

/// A call as the pipe makes it: NSS asked when the call needs it, then the call again.
fn run(opnum: u16, stub: &[u8], state: &mut State) -> Result<Vec<u8>, u32> {
    run_with(&facts(), opnum, stub, state)
}

/// [`run`] on a server with these facts.
fn run_with(
    facts: &ServerFacts,
    opnum: u16,
    stub: &[u8],
    state: &mut State,
) -> Result<Vec<u8>, u32> {
    let none = NameAnswers::default();
    match call(opnum, stub, facts, state, (&none, false)) {
        Ok(reply) => reply,
        Err(Needs(q)) => {
            assert!(!q.is_empty());
            let answers = nss(&q);
            match call(opnum, stub, facts, state, (&answers, true)) {
                Ok(reply) => reply,
                Err(_) => panic!("a call asks NSS once"),
            }
        }
    }
}

fn status(out: &[u8]) -> u32 {
    u32::from_le_bytes(out[out.len() - 4..].try_into().unwrap())
}

fn account_sid() -> Sid {
    localsam::account_domain_sid("RS")
}

/// Connect2 with no system name, then OpenDomain of `sid`: the domain handle.
fn open_domain(state: &mut State, sid: &Sid) -> Vec<u8> {
    let mut w = NdrWriter::new();
    w.u32(0);
    w.u32(0x0200_0000);
    let out = run(57, &w.buf, state).unwrap();
    assert_eq!((out.len(), status(&out)), (24, 0));
    let mut w = NdrWriter::new();
    w.buf.extend_from_slice(&out[..20]);
    w.u32(0x0200_0000);
    lsa::put_sid(&mut w, sid);
    let out = run(7, &w.buf, state).unwrap();
    assert_eq!((out.len(), status(&out)), (24, 0));
    out[..20].to_vec()
}

/// (idx, name) of a samr_SamArray reply after its resume handle.
fn sam_entries(out: &[u8]) -> (u32, Vec<(u32, String)>) {
    let mut r = NdrReader::new(out);
    let resume = r.u32().unwrap();
    r.u32().unwrap();
    let n = r.u32().unwrap();
    let mut heads = Vec::new();
    if r.u32().unwrap() != 0 {
        assert_eq!(r.u32().unwrap(), n);
        for _ in 0..n {
            let idx = r.u32().unwrap();
            let len = r.u16().unwrap();
            r.u16().unwrap();
            r.u32().unwrap();
            heads.push((idx, len));
        }
    }
    let entries = heads
        .into_iter()
        .map(|(idx, len)| (idx, r.counted_chars(len).unwrap()))
        .collect();
    assert_eq!(r.u32().unwrap(), n, "num_entries");
    (resume, entries)
}

#[test]
fn the_account_domain_lists_the_user_database_with_samba_algorithmic_rids() {
    let mut state = State::default();
    let dom = open_domain(&mut state, &account_sid());
    let mut w = NdrWriter::new();
    w.buf.extend_from_slice(&dom);
    w.u32(0); // resume
    w.u32(0); // acct_flags
    w.u32(0xffff);
    let out = run(13, &w.buf, &mut state).unwrap();
    assert_eq!(status(&out), 0);
    let (resume, entries) = sam_entries(&out);
    // uid × 2 + 1000; ghost has no Unix account and is not listed.
    assert_eq!(
        entries,
        vec![(3024, "alice".to_string()), (3026, "bob".to_string())]
    );
    assert_eq!(resume, 2);
    // Only the disabled ones (ACB_DISABLED).
    let mut w = NdrWriter::new();
    w.buf.extend_from_slice(&dom);
    w.u32(0);
    w.u32(ACB_DISABLED);
    w.u32(0xffff);
    let (_, entries) = sam_entries(&run(13, &w.buf, &mut state).unwrap());
    assert_eq!(entries, vec![(3026, "bob".to_string())]);
}

#[test]
fn builtin_and_the_account_domain_are_the_two_domains() {
    let mut state = State::default();
    let mut w = NdrWriter::new();
    w.u32(0);
    w.u32(0x0200_0000);
    let out = run(57, &w.buf, &mut state).unwrap();
    let connect = out[..20].to_vec();
    let mut w = NdrWriter::new();
    w.buf.extend_from_slice(&connect);
    w.u32(0);
    w.u32(0xffff);
    let (_, entries) = sam_entries(&run(6, &w.buf, &mut state).unwrap());
    assert_eq!(
        entries,
        vec![(0, "RS".to_string()), (1, "Builtin".to_string())]
    );
    for (name, sid) in [
        ("rs", Some(account_sid())),
        ("BUILTIN", Some("S-1-5-32".parse().unwrap())),
        ("WORKGROUP", None),
    ] {
        let mut w = NdrWriter::new();
        w.buf.extend_from_slice(&connect);
        lsa::unicode_head(&mut w, name);
        w.counted_chars(name, 0);
        let out = run(5, &w.buf, &mut state).unwrap();
        match sid {
            Some(sid) => {
                let mut r = NdrReader::new(&out[4..]);
                assert_eq!(lsa::get_sid(&mut r).unwrap(), sid);
                assert_eq!(status(&out), 0);
            }
            None => assert_eq!((out.len(), status(&out)), (8, NO_SUCH_DOMAIN.0)),
        }
    }
    // A name without a buffer.
    let mut w = NdrWriter::new();
    w.buf.extend_from_slice(&connect);
    w.u32(0);
    w.u32(0);
    let out = run(5, &w.buf, &mut state).unwrap();
    assert_eq!(status(&out), NtStatus::INVALID_PARAMETER.0);
}

fn lookup_names_stub(dom: &[u8], names: &[&str]) -> Vec<u8> {
    let mut w = NdrWriter::new();
    w.buf.extend_from_slice(dom);
    w.u32(names.len() as u32);
    w.u32(1000);
    w.u32(0);
    w.u32(names.len() as u32);
    for n in names {
        lsa::unicode_head(&mut w, n);
    }
    for n in names {
        w.counted_chars(n, 0);
    }
    w.buf
}

fn samr_ids(r: &mut NdrReader<'_>) -> Vec<u32> {
    let n = r.u32().unwrap();
    if r.u32().unwrap() == 0 {
        return Vec::new();
    }
    assert_eq!(r.u32().unwrap(), n);
    (0..n).map(|_| r.u32().unwrap()).collect()
}

#[test]
fn names_and_rids_translate_both_ways_and_unknown_ones_are_not_mapped() {
    let mut state = State::default();
    let dom = open_domain(&mut state, &account_sid());
    let out = run(
        17,
        &lookup_names_stub(&dom, &["ALICE", "None", "ghost", "x"]),
        &mut state,
    )
    .unwrap();
    let mut r = NdrReader::new(&out);
    assert_eq!(samr_ids(&mut r), vec![3024, 513, 0, 0]);
    assert_eq!(samr_ids(&mut r), vec![1, 2, 8, 8]);
    assert_eq!(status(&out), SOME_NOT_MAPPED.0);
    let out = run(17, &lookup_names_stub(&dom, &["x"]), &mut state).unwrap();
    assert_eq!(status(&out), NtStatus::NONE_MAPPED.0);

    let mut w = NdrWriter::new();
    w.buf.extend_from_slice(&dom);
    for v in [3, 1000, 0, 3] {
        w.u32(v);
    }
    for rid in [3026, 513, 3025] {
        w.u32(rid);
    }
    let out = run(18, &w.buf, &mut state).unwrap();
    let mut r = NdrReader::new(&out);
    assert_eq!(r.u32().unwrap(), 3);
    r.u32().unwrap();
    assert_eq!(r.u32().unwrap(), 3);
    let mut lens = Vec::new();
    for _ in 0..3 {
        let len = r.u16().unwrap();
        r.u16().unwrap();
        let p = r.u32().unwrap();
        lens.push((len, p != 0));
    }
    assert_eq!(lens[2], (0, false), "an unknown RID has no name");
    assert_eq!(r.counted_chars(lens[0].0).unwrap(), "bob");
    assert_eq!(r.counted_chars(lens[1].0).unwrap(), "None");
    assert_eq!(samr_ids(&mut r), vec![1, 2, 8]);
    assert_eq!(status(&out), SOME_NOT_MAPPED.0);

    // Builtin's aliases by name.
    let builtin = open_domain(&mut state, &"S-1-5-32".parse().unwrap());
    let out = run(
        17,
        &lookup_names_stub(&builtin, &["administrators"]),
        &mut state,
    )
    .unwrap();
    let mut r = NdrReader::new(&out);
    assert_eq!((samr_ids(&mut r), samr_ids(&mut r)), (vec![544], vec![4]));
}

#[test]
fn user_information_shows_the_account_its_rid_and_group() {
    let mut state = State::default();
    let dom = open_domain(&mut state, &account_sid());
    let mut w = NdrWriter::new();
    w.buf.extend_from_slice(&dom);
    w.u32(0x0002_011b);
    w.u32(3026);
    let out = run(34, &w.buf, &mut state).unwrap();
    assert_eq!(status(&out), 0);
    let user = out[..20].to_vec();
    let mut w = NdrWriter::new();
    w.buf.extend_from_slice(&user);
    w.u16(21);
    let out = run(36, &w.buf, &mut state).unwrap();
    assert_eq!(status(&out), 0);
    // UserAllInformation ([MS-SAMR] 2.2.6.6) at offset 8: six times, nine strings, three
    // binary strings, one string, buf_count, buffer; then rid, primary group, flags.
    let at = |o: usize| u32::from_le_bytes(out[o..o + 4].try_into().unwrap());
    assert_eq!(u16::from_le_bytes([out[4], out[5]]), 21);
    assert_eq!(
        (at(168), at(172), at(176)),
        (3026, 513, ACB_NORMAL | ACB_DISABLED)
    );
    let name: Vec<u8> = "bob".encode_utf16().flat_map(u16::to_le_bytes).collect();
    assert!(out.windows(name.len()).any(|w| w == name));
    // Level 18 (password hashes) is refused.
    let mut w = NdrWriter::new();
    w.buf.extend_from_slice(&user);
    w.u16(18);
    let out = run(36, &w.buf, &mut state).unwrap();
    assert_eq!(status(&out), NtStatus::ACCESS_DENIED.0);
    // A RID that is no account.
    let mut w = NdrWriter::new();
    w.buf.extend_from_slice(&dom);
    w.u32(0x0002_011b);
    w.u32(3028);
    assert_eq!(
        status(&run(34, &w.buf, &mut state).unwrap()),
        NO_SUCH_USER.0
    );
}

#[test]
fn calls_that_change_accounts_are_refused_with_their_out_parameters() {
    let mut state = State::default();
    let dom = open_domain(&mut state, &account_sid());
    let mut w = NdrWriter::new();
    w.buf.extend_from_slice(&dom);
    lsa::unicode_head(&mut w, "eve");
    w.counted_chars("eve", 0);
    w.u32(0x000f_07ff);
    // CreateUser: a handle and a RID, zero; CreateUser2 also the access granted.
    for (opnum, len) in [
        (12u16, 28usize),
        (50, 32),
        (9, 4),
        (37, 4),
        (35, 24),
        (55, 4),
    ] {
        let out = run(opnum, &w.buf, &mut state).unwrap();
        assert_eq!((opnum, out.len()), (opnum, len));
        assert_eq!(status(&out), NtStatus::ACCESS_DENIED.0, "opnum {opnum}");
    }
    assert_eq!(
        run(200, &w.buf, &mut state),
        Err(crate::ipc::FAULT_OP_RANGE)
    );
}

#[test]
fn closed_and_foreign_handles_are_invalid() {
    let mut state = State::default();
    let dom = open_domain(&mut state, &account_sid());
    // The same id with another handle type is no handle of the pipe (Samba's policy handles
    // hold their type: smbtorture rpc.samr.handletype): the fault context mismatch.
    let mut as_user = dom.clone();
    as_user[0] = 2;
    assert_eq!(
        run(
            34,
            &[&as_user[..], &[0, 0, 0, 2, 0xd0, 0x0b, 0, 0][..]].concat(),
            &mut state
        ),
        Err(crate::ipc::FAULT_CONTEXT_MISMATCH)
    );
    // A domain handle where a user handle belongs: STATUS_INVALID_HANDLE.
    let mut w = NdrWriter::new();
    w.buf.extend_from_slice(&dom);
    w.u16(21);
    assert_eq!(
        status(&run(36, &w.buf, &mut state).unwrap()),
        NtStatus::INVALID_HANDLE.0
    );
    let out = run(1, &dom, &mut state).unwrap();
    assert_eq!(out, vec![0; 24]);
    assert_eq!(
        run(1, &dom, &mut state),
        Err(crate::ipc::FAULT_CONTEXT_MISMATCH)
    );
    let mut w = NdrWriter::new();
    w.buf.extend_from_slice(&dom);
    w.u32(0);
    w.u32(0);
    w.u32(0xffff);
    assert_eq!(
        run(13, &w.buf, &mut state),
        Err(crate::ipc::FAULT_CONTEXT_MISMATCH)
    );
    // A stub cut short is a fault, not a panic.
    assert_eq!(
        run(7, &dom[..10], &mut state).map(|o| status(&o)),
        Ok(NtStatus::INVALID_PARAMETER.0)
    );
}

/// The `rpc_pipe` fuzz target's samr seeds (fuzz/corpus/rpc_pipe/samr-*): a BIND to samr,
/// then Connect2, OpenDomain, EnumerateUsers, LookupNames, LookupIds, OpenUser,
/// QueryUserInfo 21, QueryDomainInfo 2, QueryDisplayInfo 1, CreateUser (refused) and
/// CloseHandle. Written by `cargo test -p ringshare-state -- --ignored
/// write_samr_fuzz_corpus`.
#[test]
#[ignore]
fn write_samr_fuzz_corpus() {
    use crate::ipc::tests::{bind_body, pdu, request_body, write_seeds};
    // The handles a fresh pipe gives: the server's, the domain's, the user's.
    let mut ids = State::default();
    let [connect, dom, user, group] = [0; 4].map(|_| ids.open(Handle::Connect, 0).unwrap());
    // A handle as given: its type (server 0, domain 1, user 2, group 3), then its id.
    let handle = |id: [u8; 16]| {
        let kind = [connect, dom, user, group]
            .iter()
            .position(|h| *h == id)
            .unwrap_or(0);
        let mut w = NdrWriter::new();
        w.u32(kind as u32);
        w.buf.extend_from_slice(&id);
        w
    };
    let mut open = handle(connect);
    open.u32(0x0200_0000);
    lsa::put_sid(&mut open, &account_sid());
    let mut enum_users = handle(dom);
    for v in [0, 0, 0xffff] {
        enum_users.u32(v);
    }
    let mut rids = handle(dom);
    for v in [2, 1000, 0, 2, 3004, 513] {
        rids.u32(v);
    }
    // The harness's NSS: `u1` is uid 1002, RID 3004.
    let mut open_user = handle(dom);
    open_user.u32(0x0002_011b);
    open_user.u32(3004);
    let mut user_info = handle(user);
    user_info.u16(21);
    let mut dom_info = handle(dom);
    dom_info.u16(2);
    let mut display = handle(dom);
    display.u16(1);
    for v in [0, 100, 0xffff] {
        display.u32(v);
    }
    let mut create = handle(dom);
    lsa::unicode_head(&mut create, "eve");
    create.counted_chars("eve", 0);
    create.u32(0x000f_07ff);
    let mut connect2 = NdrWriter::new();
    connect2.u32(0);
    connect2.u32(0x0200_0000);
    // Connect2 asking for SAMR_ACCESS_SHUTDOWN_SERVER: refused.
    let mut shutdown = NdrWriter::new();
    shutdown.u32(0);
    shutdown.u32(2);
    let mut security = handle(user);
    security.u32(4);
    let mut open_group = handle(dom);
    open_group.u32(0x0200_0000);
    open_group.u32(513);
    let mut group_info = handle(group);
    group_info.u16(1);
    let mut open_alias = handle(dom);
    open_alias.u32(0x0200_0000);
    open_alias.u32(544);
    let mut alias_info = handle(group);
    alias_info.u16(1);
    let calls: Vec<(u16, Vec<u8>)> = vec![
        (57, connect2.buf),
        (57, shutdown.buf),
        (7, open.buf),
        (13, enum_users.buf),
        (
            17,
            lookup_names_stub(&handle(dom).buf, &["u1", "None", "x"]),
        ),
        (18, rids.buf),
        (34, open_user.buf),
        (36, user_info.buf),
        (8, dom_info.buf),
        (40, display.buf),
        (12, create.buf),
        (3, security.buf),
        (19, open_group.buf),
        (20, group_info.buf),
        (25, handle(group).buf),
        (27, open_alias.buf),
        (28, alias_info.buf),
        (33, handle(group).buf),
        (1, handle(user).buf),
    ];
    let (iface, major) = crate::ipc::Service::Samr.interface();
    let mut writes = vec![pdu(
        11,
        3,
        1,
        &bind_body(iface, major, crate::ipc::NDR20, 2),
    )];
    for (i, (opnum, stub)) in calls.into_iter().enumerate() {
        writes.push(pdu(0, 3, 2 + i as u32, &request_body(opnum, &stub)));
    }
    for types in write_seeds(2, "samr", &writes) {
        assert_eq!(types[0], 12);
        assert_eq!(types[1..], [2; 19]);
    }
}

#[test]
fn display_information_lists_users_at_levels_1_and_4_and_finds_their_index() {
    let mut state = State::default();
    let dom = open_domain(&mut state, &account_sid());
    let display = |state: &mut State, level: u16, start: u32| {
        let mut w = NdrWriter::new();
        w.buf.extend_from_slice(&dom);
        w.u16(level);
        for v in [start, 100, 0xffff] {
            w.u32(v);
        }
        run(40, &w.buf, state).unwrap()
    };
    // Level 4: idx, then lsa_AsciiStringLarge; the names' bytes follow.
    let out = display(&mut state, 4, 0);
    assert_eq!(status(&out), 0);
    let mut r = NdrReader::new(&out[8..]);
    assert_eq!((r.u16().unwrap(), r.u32().unwrap()), (4, 2));
    assert!(out.windows(5).any(|w| w == b"alice"));
    // Level 3 (groups): none, with its union arm; past the end: NO_MORE_ENTRIES.
    let out = display(&mut state, 3, 0);
    assert_eq!((out.len(), status(&out)), (24, 0));
    let out = display(&mut state, 1, 5);
    assert_eq!(status(&out), NtStatus::NO_MORE_ENTRIES.0);
    assert_eq!(display_status(&mut state, &dom, "BOB"), (1, 0));
    assert_eq!(
        display_status(&mut state, &dom, "zzzzzzzz"),
        (0, NtStatus::NO_MORE_ENTRIES.0)
    );
}

/// GetDisplayEnumerationIndex level 1 of `name`: (idx, status).
fn display_status(state: &mut State, dom: &[u8], name: &str) -> (u32, u32) {
    let mut w = NdrWriter::new();
    w.buf.extend_from_slice(dom);
    w.u16(1);
    lsa::unicode_head(&mut w, name);
    w.counted_chars(name, 0);
    let out = run(41, &w.buf, state).unwrap();
    (
        u32::from_le_bytes(out[..4].try_into().unwrap()),
        status(&out),
    )
}

/// Connect2 asking for `access`: the status and the handle.
fn connect2(state: &mut State, access: u32) -> (u32, Vec<u8>) {
    let mut w = NdrWriter::new();
    w.u32(0);
    w.u32(access);
    let out = run(57, &w.buf, state).unwrap();
    (status(&out), out[..20].to_vec())
}

/// The status of a call of `opnum` on `handle` followed by `args`.
fn on(state: &mut State, opnum: u16, handle: &[u8], args: &[u32]) -> (u32, Vec<u8>) {
    let mut w = NdrWriter::new();
    w.buf.extend_from_slice(handle);
    for a in args {
        w.u32(*a);
    }
    let out = run(opnum, &w.buf, state).unwrap();
    (status(&out), out)
}

/// LookupDomain of `name` on a server handle: its status.
fn lookup_domain_status(state: &mut State, connect: &[u8], name: &str) -> u32 {
    let mut w = NdrWriter::new();
    w.buf.extend_from_slice(connect);
    lsa::unicode_head(&mut w, name);
    w.counted_chars(name, 0);
    status(&run(5, &w.buf, state).unwrap())
}

#[test]
fn an_open_asking_for_more_than_everyone_may_is_refused_except_to_root() {
    const DENIED: u32 = NtStatus::ACCESS_DENIED.0;
    let mut state = State::default();
    // SAMR_ACCESS_CONNECT_TO_SERVER and ENUM_DOMAINS are Everyone's; SHUTDOWN_SERVER, GENERIC_ALL
    // and an undefined bit are not (smbtorture rpc.samr.accessmask against Samba).
    assert_eq!(connect2(&mut state, 1).0, 0);
    assert_eq!(connect2(&mut state, 0x10).0, 0);
    for refused in [2, 0x40, 0x1000_0000, 0x0004_0000] {
        assert_eq!(connect2(&mut state, refused).0, DENIED, "{refused:#x}");
    }
    let mut root = State {
        caller: Caller {
            root: true,
            rid: None,
        },
        ..State::default()
    };
    for mask in [2, 0x40, 0x1000_0000] {
        assert_eq!(connect2(&mut root, mask).0, 0, "{mask:#x}");
    }
    // A domain opened for all its rights: refused to a user, granted to root.
    for (st, want) in [(&mut state, DENIED), (&mut root, 0)] {
        let (_, connect) = connect2(st, 0x0200_0000);
        let mut w = NdrWriter::new();
        w.buf.extend_from_slice(&connect);
        w.u32(0x000f_07ff);
        lsa::put_sid(&mut w, &account_sid());
        assert_eq!(status(&run(7, &w.buf, st).unwrap()), want);
    }
}

#[test]
fn a_call_its_handle_was_not_opened_for_is_access_denied_except_to_root() {
    const DENIED: u32 = NtStatus::ACCESS_DENIED.0;
    let mut state = State::default();
    // Opened for SAMR_ACCESS_ENUM_DOMAINS only: EnumDomains yes, LookupDomain no.
    let (_, enum_only) = connect2(&mut state, 0x10);
    assert_eq!(on(&mut state, 6, &enum_only, &[0, 0xffff]).0, 0);
    assert_eq!(lookup_domain_status(&mut state, &enum_only, "RS"), DENIED);
    let (_, lookup_only) = connect2(&mut state, 0x20);
    assert_eq!(lookup_domain_status(&mut state, &lookup_only, "RS"), 0);
    assert_eq!(on(&mut state, 6, &lookup_only, &[0, 0xffff]).0, DENIED);
    // A domain opened for DOMAIN_LOOKUP_INFO_2 alone: class 2 yes, enumerating users no.
    let (_, connect) = connect2(&mut state, 0x0200_0000);
    let mut w = NdrWriter::new();
    w.buf.extend_from_slice(&connect);
    w.u32(4);
    lsa::put_sid(&mut w, &account_sid());
    let dom = run(7, &w.buf, &mut state).unwrap()[..20].to_vec();
    let mut w = NdrWriter::new();
    w.buf.extend_from_slice(&dom);
    w.u16(2);
    assert_eq!(status(&run(8, &w.buf, &mut state).unwrap()), 0);
    assert_eq!(on(&mut state, 13, &dom, &[0, 0, 0xffff]).0, DENIED);
    // Root is not held to its handle's rights (Samba's root_mode()).
    state.caller.root = true;
    assert_eq!(lookup_domain_status(&mut state, &enum_only, "RS"), 0);
    assert_eq!(on(&mut state, 13, &dom, &[0, 0, 0xffff]).0, 0);
}

/// The ACEs of a QuerySecurity reply: (SID, mask) each.
fn descriptor_aces(out: &[u8]) -> Vec<(String, u32)> {
    let mut r = NdrReader::new(out);
    assert_ne!(r.u32().unwrap(), 0);
    let len = r.u32().unwrap() as usize;
    assert_ne!(r.u32().unwrap(), 0);
    assert_eq!(r.u32().unwrap() as usize, len);
    let sd = ringshare_wire::security::SecurityDescriptor::decode(r.bytes(len).unwrap()).unwrap();
    assert_eq!((sd.owner.clone(), sd.group.clone()), (None, None));
    assert_eq!(sd.control, 0x8004, "DACL present, self-relative");
    sd.dacl
        .unwrap()
        .aces
        .iter()
        .map(|a| (a.sid().unwrap().to_string(), a.mask().unwrap().0))
        .collect()
}

#[test]
fn query_security_answers_samba_default_descriptors() {
    let mut state = State::default();
    let (_, connect) = connect2(&mut state, 0x0200_0000);
    let (st, out) = on(&mut state, 3, &connect, &[4]);
    assert_eq!(st, 0);
    let admins = |m| {
        vec![
            ("S-1-5-32-544".to_string(), m),
            ("S-1-5-32-548".to_string(), m),
        ]
    };
    let mut want = vec![("S-1-1-0".to_string(), 0x20031)];
    want.extend(admins(0xf003f));
    assert_eq!(descriptor_aces(&out), want);
    let dom = open_domain(&mut state, &account_sid());
    let mut want = vec![("S-1-1-0".to_string(), 0x20385)];
    want.extend(admins(0xf07ff));
    assert_eq!(descriptor_aces(&on(&mut state, 3, &dom, &[4]).1), want);
    // A user's: its own SID may change its password (rpcclient samquerysecobj on Samba 4.22).
    let (st, user) = on(&mut state, 34, &dom, &[0x0200_0000, 3024]);
    assert_eq!(st, 0);
    let mut want = vec![("S-1-1-0".to_string(), 0x2035b)];
    want.extend(admins(0xf07ff));
    want.push((format!("{}-3024", account_sid()), 0x20044));
    assert_eq!(
        descriptor_aces(&on(&mut state, 3, &user[..20], &[4]).1),
        want
    );
    // Without READ_CONTROL: refused, with a NULL descriptor.
    let (_, no_read) = connect2(&mut state, 0x10);
    assert_eq!(
        on(&mut state, 3, &no_read, &[4]),
        (
            NtStatus::ACCESS_DENIED.0,
            vec![0, 0, 0, 0, 0x22, 0, 0, 0xc0]
        )
    );
}

#[test]
fn none_is_the_only_group_it_has_no_members_and_no_alias_opens() {
    let mut state = State::default();
    let dom = open_domain(&mut state, &account_sid());
    assert_eq!(
        on(&mut state, 19, &dom, &[0x0200_0000, 512]).0,
        NO_SUCH_GROUP.0
    );
    let (st, group) = on(&mut state, 19, &dom, &[0x0200_0000, 513]);
    assert_eq!(st, 0);
    let group = group[..20].to_vec();
    // Class 4: the description; class 3: the attributes.
    let mut w = NdrWriter::new();
    w.buf.extend_from_slice(&group);
    w.u16(4);
    let out = run(20, &w.buf, &mut state).unwrap();
    let mut r = NdrReader::new(&out);
    r.u32().unwrap();
    assert_eq!(r.u16().unwrap(), 4);
    r.align4().unwrap();
    let len = r.u16().unwrap();
    r.u16().unwrap();
    r.u32().unwrap();
    assert_eq!(r.counted_chars(len).unwrap(), "Ordinary Users");
    let mut w = NdrWriter::new();
    w.buf.extend_from_slice(&group);
    w.u16(6);
    assert_eq!(
        status(&run(20, &w.buf, &mut state).unwrap()),
        NtStatus::INVALID_INFO_CLASS.0
    );
    // QueryGroupMember: count 0, no arrays.
    let (st, members) = on(&mut state, 25, &group, &[]);
    assert_eq!((st, &members[4..16]), (0, &[0u8; 12][..]));
    // Builtin has no groups (ACCESS_DENIED, as Samba); its aliases do not open.
    let builtin = open_domain(&mut state, &Sid::from_parts(5, &[32]).unwrap());
    assert_eq!(
        on(&mut state, 19, &builtin, &[0x0200_0000, 513]).0,
        NtStatus::ACCESS_DENIED.0
    );
    assert_eq!(
        on(&mut state, 27, &builtin, &[0x0200_0000, 544]).0,
        0xC000_0151
    );
    // A group handle is no alias handle.
    let mut w = NdrWriter::new();
    w.buf.extend_from_slice(&group);
    w.u16(1);
    assert_eq!(
        status(&run(28, &w.buf, &mut state).unwrap()),
        NtStatus::INVALID_HANDLE.0
    );
    assert_eq!(
        on(&mut state, 33, &group, &[]).0,
        NtStatus::INVALID_HANDLE.0
    );
}

/// OpenUser of `rid` on domain handle `dom` (GENERIC_READ | USER_READ_*): its status and
/// the user handle.
fn open_user(facts: &ServerFacts, state: &mut State, dom: &[u8], rid: u32) -> (u32, Vec<u8>) {
    let mut w = NdrWriter::new();
    w.buf.extend_from_slice(dom);
    w.u32(0x0002_011b);
    w.u32(rid);
    let out = run_with(facts, 34, &w.buf, state).unwrap();
    (status(&out), out[..20].to_vec())
}

/// QueryInformationUser `level` of user handle `user`.
fn query_user(state: &mut State, user: &[u8], level: u16) -> Vec<u8> {
    let mut w = NdrWriter::new();
    w.buf.extend_from_slice(user);
    w.u16(level);
    run(36, &w.buf, state).unwrap()
}

fn has_utf16(out: &[u8], s: &str) -> bool {
    let s: Vec<u8> = s.encode_utf16().flat_map(u16::to_le_bytes).collect();
    out.windows(s.len()).any(|w| w == s)
}

#[test]
fn rid_501_is_the_guest_account_by_name_and_open_without_home_or_profile() {
    let mut state = State::default();
    let dom = open_domain(&mut state, &account_sid());
    let (st, user) = open_user(&facts(), &mut state, &dom, 501);
    assert_eq!(st, 0);
    let out = query_user(&mut state, &user, 21);
    assert_eq!(status(&out), 0);
    let at = |o: usize| u32::from_le_bytes(out[o..o + 4].try_into().unwrap());
    assert_eq!((at(168), at(172), at(176)), (501, 513, ACB_NORMAL));
    assert!(has_utf16(&out, "nobody") && has_utf16(&out, "Kernel Overflow User"));
    assert!(!has_utf16(&out, "\\\\RS\\"), "no logon home or profile");
    // UserFullNameInformation (8): the GECOS field.
    assert!(has_utf16(
        &query_user(&mut state, &user, 8),
        "Kernel Overflow User"
    ));
    // Named by RID, not found by name (Samba's passdb: NONE_MAPPED), listed nowhere.
    let mut w = NdrWriter::new();
    w.buf.extend_from_slice(&dom);
    for v in [2, 1000, 0, 2] {
        w.u32(v);
    }
    w.u32(501);
    w.u32(500);
    let out = run(18, &w.buf, &mut state).unwrap();
    assert!(has_utf16(&out, "nobody"));
    assert_eq!(status(&out), SOME_NOT_MAPPED.0);
    let out = run(17, &lookup_names_stub(&dom, &["nobody"]), &mut state).unwrap();
    assert_eq!(status(&out), NtStatus::NONE_MAPPED.0);
    let mut w = NdrWriter::new();
    w.buf.extend_from_slice(&dom);
    for v in [0, 0, 0xffff] {
        w.u32(v);
    }
    let (_, entries) = sam_entries(&run(13, &w.buf, &mut state).unwrap());
    assert!(entries.iter().all(|(rid, _)| *rid != 501));
    // A guest account NSS does not know: no such user, as Samba.
    let mut other = facts();
    other.guest_account = "no_such_guest".into();
    let (st, _) = open_user(&other, &mut state, &dom, 501);
    assert_eq!(st, NO_SUCH_USER.0);
}

#[test]
fn an_account_full_name_is_its_gecos_up_to_the_first_comma_of_a_chfn_field() {
    let mut state = State::default();
    let dom = open_domain(&mut state, &account_sid());
    let (st, alice) = open_user(&facts(), &mut state, &dom, 3024);
    assert_eq!(st, 0);
    for level in [1, 6, 8, 21] {
        let out = query_user(&mut state, &alice, level);
        assert_eq!(status(&out), 0, "level {level}");
        assert!(has_utf16(&out, "Alice Liddell"), "level {level}");
        assert!(!has_utf16(&out, "room 1"), "level {level}");
    }
    assert_eq!(local::full_name("A B,1,2,3"), "A B");
    assert_eq!(local::full_name("A, B"), "A, B");
}
