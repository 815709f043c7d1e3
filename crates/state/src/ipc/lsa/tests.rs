use super::*;
use crate::ipc::ShareEntry;
use crate::lookup::NameQuery;

fn facts() -> ServerFacts {
    ServerFacts {
        netbios_name: "RS".into(),
        workgroup: "WORKGROUP".into(),
        comment: String::new(),
        shares: Vec::<ShareEntry>::new(),
        users: Vec::new(),
        guest_account: "nobody".into(),
    }
}

fn open(state: &mut State) -> [u8; 20] {
    let none = NameAnswers::default();
    let out = call(44, &[], &facts(), state, (&none, false))
        .ok()
        .and_then(Result::ok)
        .unwrap();
    assert_eq!(out.len(), 24);
    assert_eq!(&out[20..], &[0; 4], "STATUS_SUCCESS");
    out[..20].try_into().unwrap()
}

/// A LookupSids2 request for `sids` on handle `h`.
fn lookup_sids2(h: &[u8; 20], sids: &[Sid]) -> Vec<u8> {
    let mut w = NdrWriter::new();
    w.buf.extend_from_slice(h);
    w.u32(sids.len() as u32);
    w.ptr();
    w.u32(sids.len() as u32);
    for _ in sids {
        w.ptr();
    }
    for s in sids {
        put_sid(&mut w, s);
    }
    lookup_tail(w) // TranslatedNames: no entries
}

fn utf16(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(|u| u.to_le_bytes()).collect()
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn a_unix_user_sid_is_named_after_nss_answers_and_everyone_at_once() {
    let mut state = State::default();
    let h = open(&mut state);
    let req = lookup_sids2(&h, &[Sid::unix_user(1001), Sid::everyone()]);
    let none = NameAnswers::default();
    let Err(Needs(q)) = call(57, &req, &facts(), &mut state, (&none, false)) else {
        panic!("NSS must be asked first")
    };
    assert_eq!(q, vec![NameQuery::Uid(1001)]);
    let mut a = NameAnswers::default();
    a.users.insert(1001, Some("alice".into()));
    let out = call(57, &req, &facts(), &mut state, (&a, true))
        .ok()
        .and_then(Result::ok)
        .unwrap();
    assert!(contains(&out, &utf16("Unix User")));
    assert!(contains(&out, &utf16("alice")));
    assert!(contains(&out, &utf16("Everyone")));
    assert_eq!(
        &out[out.len() - 8..],
        &[2, 0, 0, 0, 0, 0, 0, 0],
        "2 mapped, SUCCESS"
    );
}

#[test]
fn rid_501_of_the_account_domain_is_named_by_the_guest_account() {
    let mut state = State::default();
    let h = open(&mut state);
    let mut guest = localsam::account_domain_sid("RS");
    guest.sub_authorities.push(501);
    let req = lookup_sids2(&h, &[guest]);
    let none = NameAnswers::default();
    let Err(Needs(q)) = call(57, &req, &facts(), &mut state, (&none, false)) else {
        panic!("NSS must be asked first")
    };
    assert_eq!(q, vec![NameQuery::Passwd("nobody".into())]);
    let mut a = NameAnswers::default();
    a.passwd
        .insert("nobody".into(), Some(("nobody".into(), "nobody".into())));
    let out = call(57, &req, &facts(), &mut state, (&a, true))
        .ok()
        .and_then(Result::ok)
        .unwrap();
    assert!(contains(&out, &utf16("nobody")));
    assert_eq!(&out[out.len() - 8..], &[1, 0, 0, 0, 0, 0, 0, 0], "1 mapped");
    // Unknown to NSS: not mapped.
    a.passwd.insert("nobody".into(), None);
    let out = call(57, &req, &facts(), &mut state, (&a, true))
        .ok()
        .and_then(Result::ok)
        .unwrap();
    assert!(!contains(&out, &utf16("nobody")));
}

#[test]
fn a_lookup_on_a_handle_the_pipe_did_not_open_is_invalid_handle() {
    let mut state = State::default();
    let req = lookup_sids2(&[7; 20], &[Sid::everyone()]);
    let none = NameAnswers::default();
    let out = call(57, &req, &facts(), &mut state, (&none, false))
        .ok()
        .and_then(Result::ok)
        .unwrap();
    assert_eq!(
        &out[out.len() - 4..],
        &NtStatus::INVALID_HANDLE.0.to_le_bytes()
    );
}

#[test]
fn truncated_or_hostile_requests_get_a_status_never_a_panic() {
    let mut state = State::default();
    let h = open(&mut state);
    let good = lookup_sids2(&h, &[Sid::unix_group(5), Sid::builtin_administrators()]);
    let none = NameAnswers::default();
    for op in [0u16, 7, 14, 15, 46, 57, 58, 68, 76, 77] {
        for n in 0..good.len() {
            let _ = call(op, &good[..n], &facts(), &mut state, (&none, true));
        }
    }
    // The loop's truncated Close took the handle: open another.
    let h = open(&mut state);
    let mut bad = lookup_sids2(&h, &[Sid::unix_group(5)]);
    bad[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
    let out = call(57, &bad, &facts(), &mut state, (&none, true))
        .ok()
        .and_then(Result::ok)
        .unwrap();
    assert_eq!(
        &out[out.len() - 4..],
        &NtStatus::INVALID_PARAMETER.0.to_le_bytes()
    );
    assert!(matches!(
        call(99, &good, &facts(), &mut state, (&none, true)),
        Ok(Err(crate::ipc::FAULT_OP_RANGE))
    ));
}

#[test]
fn closing_a_handle_twice_is_the_context_mismatch_fault() {
    let mut state = State::default();
    let h = open(&mut state);
    let none = NameAnswers::default();
    let first = call(0, &h, &facts(), &mut state, (&none, true));
    assert!(matches!(first, Ok(Ok(_))));
    let again = call(0, &h, &facts(), &mut state, (&none, true));
    assert!(matches!(again, Ok(Err(crate::ipc::FAULT_CONTEXT_MISMATCH))));
}

#[test]
fn builtin_with_an_empty_account_and_an_empty_name_are_the_builtin_domain() {
    let none = NameAnswers::default();
    let mut names = Resolver::new((&none, true));
    for asked in ["BUILTIN\\", "", "BUILTIN", "builtin\\"] {
        let (s, n) = sid_of(asked, &facts(), &mut names).expect(asked);
        assert_eq!(
            (s.to_string(), n.kind),
            ("S-1-5-32".to_string(), USE_DOMAIN),
            "{asked:?}"
        );
    }
    assert!(sid_of("NOSUCH\\", &facts(), &mut names).is_none());
}

#[test]
fn a_unix_group_name_bare_or_qualified_is_a_domain_group_as_its_sid_is() {
    let mut a = NameAnswers::default();
    a.user_ids.insert("staff".into(), None);
    a.group_ids.insert("staff".into(), Some(50));
    a.groups.insert(50, Some("staff".into()));
    let mut names = Resolver::new((&a, true));
    for asked in ["staff", "Unix Group\\staff", "unix group\\staff"] {
        let (s, n) = sid_of(asked, &facts(), &mut names).expect(asked);
        assert_eq!(
            (s.to_string(), n.domain.as_str(), n.kind),
            ("S-1-22-2-50".to_string(), "Unix Group", USE_GROUP),
            "{asked:?}"
        );
    }
    // LookupSids names the SID with the same type.
    let named = name_of(&Sid::unix_group(50), &facts(), &mut names).unwrap();
    assert_eq!((named.name.as_str(), named.kind), ("staff", USE_GROUP));
    // Under the server's own name it is no account (Samba: UNKNOWN).
    assert!(sid_of("RS\\staff", &facts(), &mut names).is_none());
}

/// A LookupNames3 request for `names` on handle `h`.
fn lookup_names3(h: &[u8; 20], names: &[&str]) -> Vec<u8> {
    let mut w = NdrWriter::new();
    w.buf.extend_from_slice(h);
    w.u32(names.len() as u32);
    w.u32(names.len() as u32);
    for n in names {
        unicode_head(&mut w, n);
    }
    for n in names {
        w.counted_chars(n, 0);
    }
    lookup_tail(w) // TranslatedSids: no entries
}

/// What LookupSids2 and LookupNames3 requests end with: an empty translated
/// list, LookupLevel 1, MappedCount 0, LookupOptions 0, ClientRevision 2.
fn lookup_tail(mut w: NdrWriter) -> Vec<u8> {
    w.u32(0); // the translated list: no entries
    w.u32(0);
    w.u16(1); // LookupLevel
    w.u32(0); // MappedCount
    w.u32(0); // LookupOptions
    w.u32(2); // ClientRevision
    w.buf
}

/// The `rpc_pipe` fuzz target's seeds (fuzz/corpus/rpc_pipe): a BIND to lsarpc, then
/// OpenPolicy2, QueryInformationPolicy class 5, LookupSids2, LookupNames3 and Close twice,
/// each write a piece of `[service 0][u16 read size][u16 len][bytes]...`; and the same
/// calls in one write. Written by `cargo test -p ringshare-core -- --ignored
/// write_rpc_pipe_fuzz_corpus`.
#[test]
#[ignore]
fn write_rpc_pipe_fuzz_corpus() {
    use crate::ipc::tests::{bind_body, pdu, request_body};
    let mut state = State::default();
    let h = open(&mut state);
    let (iface, major) = super::super::Service::Lsarpc.interface();
    let mut query5 = h.to_vec();
    query5.extend_from_slice(&5u16.to_le_bytes());
    let sids = [
        Sid::unix_user(1000),
        Sid::unix_group(1001),
        Sid::everyone(),
        sid("S-1-5-32-544"),
    ];
    let calls: Vec<(u16, Vec<u8>)> = vec![
        (44, Vec::new()),
        (46, query5),
        (57, lookup_sids2(&h, &sids)),
        (
            68,
            lookup_names3(&h, &["u1", "BUILTIN\\Administrators", "", "BUILTIN\\"]),
        ),
        (0, h.to_vec()),
        (0, h.to_vec()),
    ];
    let mut writes = vec![pdu(
        11,
        3,
        1,
        &bind_body(iface, major, super::super::NDR20, 2),
    )];
    for (i, (opnum, stub)) in calls.into_iter().enumerate() {
        writes.push(pdu(0, 3, 2 + i as u32, &request_body(opnum, &stub)));
    }
    // Each seed, played as the target plays it, gets the BIND_ACK and six answers, the
    // last a fault (the second Close).
    for types in crate::ipc::tests::write_seeds(0, "lsarpc", &writes) {
        assert_eq!(types, [12, 2, 2, 2, 2, 2, 3]);
    }
}
