use super::*;
use crate::ipc::ShareEntry;
use crate::lookup::NameQuery;
use crate::sidcache::Xid;

fn facts() -> ServerFacts {
    ServerFacts {
        netbios_name: "RS".into(),
        workgroup: "WORKGROUP".into(),
        comment: String::new(),
        shares: Vec::<ShareEntry>::new(),
        users: Vec::new(),
        guest_account: "nobody".into(),
        member: None,
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

/// The member's domain in these tests: RSAD, S-1-5-21-1-2-3, its RIDs at 100000 + RID (as
/// winbind's rid backend gives them: one id serving as uid and gid).
const DOM: &str = "S-1-5-21-1-2-3";

fn member_facts() -> ServerFacts {
    ServerFacts {
        member: Some(crate::ipc::MemberFacts {
            naming: crate::domain::DomainMember {
                workgroup: "RSAD".into(),
                separator: '\\',
                default_domain: false,
                rid_ranges: Vec::new(),
                id_ranges: Vec::new(),
            },
            domains: vec![("RSAD".into(), sid(DOM))],
        }),
        ..facts()
    }
}

/// winbind's answers for RSAD: rsalice (RID 1103) a user, rsproj (1106) a group; a local
/// Unix user rsalice (uid 1003) has no domain SID; `fail` makes the source answer nothing.
struct Winbind {
    fail: bool,
}

/// winbind asked for names itself (LOOKUPSIDS, LOOKUPNAME): the domain's spelling and types,
/// which NSS does not give (winbind's NSS module lower-cases names and answers a group's id
/// as a user too).
struct WinbindNames;

impl crate::sidcache::IdSource for WinbindNames {
    fn ids_of(&self, _: &[Sid]) -> Result<Vec<Option<Xid>>, String> {
        Err("not asked: the names come from the source".into())
    }

    fn sids_of(&self, _: &[Xid]) -> Result<Vec<Option<Sid>>, String> {
        Err("not asked: the names come from the source".into())
    }

    fn names_of(
        &self,
        sids: &[Sid],
    ) -> Option<Result<Vec<Option<crate::sidcache::SidName>>, String>> {
        let dom = sid(DOM);
        let named = |rid| {
            let (name, kind) = match rid {
                513 => ("Domain Users", USE_GROUP),
                571 => ("Allowed RODC Password Replication Group", USE_ALIAS),
                _ => return None,
            };
            Some(crate::sidcache::SidName {
                domain: "RSAD".into(),
                name: name.into(),
                kind,
            })
        };
        let got = sids
            .iter()
            .map(|s| crate::localsam::rid_in(&dom, s).and_then(named))
            .collect();
        Some(Ok(got))
    }

    fn sids_of_names(
        &self,
        names: &[String],
    ) -> Option<Result<Vec<Option<crate::sidcache::NamedSid>>, String>> {
        let got = names
            .iter()
            .map(|n| {
                (n == "RSAD\\Domain Users").then(|| {
                    let s = sid(&format!("{DOM}-513"));
                    let name = self.names_of(std::slice::from_ref(&s))?.ok()?.pop()??;
                    Some((s, name))
                })?
            })
            .collect();
        Some(Ok(got))
    }
}

impl crate::sidcache::IdSource for Winbind {
    fn ids_of(&self, sids: &[Sid]) -> Result<Vec<Option<Xid>>, String> {
        if self.fail {
            return Err("winbindd is not running".into());
        }
        let dom = sid(DOM);
        Ok(sids
            .iter()
            .map(|s| match crate::localsam::rid_in(&dom, s) {
                Some(rid @ (1103 | 1106)) => Some(Xid::Both(100_000 + rid)),
                _ => None,
            })
            .collect())
    }

    fn sids_of(&self, ids: &[Xid]) -> Result<Vec<Option<Sid>>, String> {
        Ok(ids
            .iter()
            .map(|x| match x {
                Xid::Uid(101_103) | Xid::Gid(101_106) => {
                    let rid = match x {
                        Xid::Uid(u) | Xid::Gid(u) | Xid::Both(u) => u - 100_000,
                    };
                    Some(sid(&format!("{DOM}-{rid}")))
                }
                _ => None,
            })
            .collect())
    }
}

/// NSS with winbind's module: the domain's accounts spelt `RSAD\name` (and rsalice's UPN),
/// and a local Unix user rsalice.
struct Nss;

impl crate::identity::Accounts for Nss {
    fn user(&self, _: &str) -> Result<crate::identity::Account, crate::identity::AccountError> {
        Err(crate::identity::AccountError::NoSuchUser)
    }

    fn group(&self, name: &str) -> Option<u32> {
        (name == "RSAD\\rsproj").then_some(101_106)
    }

    fn group_name(&self, gid: u32) -> Option<String> {
        (gid == 101_106).then(|| "RSAD\\rsproj".into())
    }

    fn user_name(&self, uid: u32) -> Option<String> {
        match uid {
            101_103 => Some("RSAD\\rsalice".into()),
            1003 => Some("rsalice".into()),
            _ => None,
        }
    }

    fn unix_user(&self, name: &str) -> Option<u32> {
        match name {
            "RSAD\\rsalice" | "rsalice@AD.RS.TEST" => Some(101_103),
            "rsalice" => Some(1003),
            _ => None,
        }
    }
}

/// A call on a member as the pipe makes it: the questions it asks, answered on the lookup
/// threads by NSS and `source` ([`NameAnswers::ask`]), then the call again.
fn on_member(
    opnum: u16,
    req: &[u8],
    state: &mut State,
    source: &dyn crate::sidcache::IdSource,
) -> Vec<u8> {
    let none = NameAnswers::default();
    let Err(Needs(q)) = call(opnum, req, &member_facts(), state, (&none, false)) else {
        panic!("the domain's accounts must be asked first")
    };
    assert!(
        q.iter()
            .any(|q| matches!(q, NameQuery::DomainSid(_) | NameQuery::DomainName(_))),
        "{q:?}"
    );
    let a = NameAnswers::ask(&Nss, Some(source), &q);
    call(opnum, req, &member_facts(), state, (&a, true))
        .ok()
        .and_then(Result::ok)
        .unwrap()
}

/// A referenced domain list: (name, SID) each.
fn read_domains(r: &mut NdrReader<'_>) -> Vec<(String, String)> {
    if r.u32().unwrap() == 0 {
        return Vec::new();
    }
    let n = r.u32().unwrap();
    let p = r.u32().unwrap();
    let _max = r.u32().unwrap();
    if p == 0 {
        return Vec::new();
    }
    assert_eq!(r.u32().unwrap(), n);
    let heads: Vec<u16> = (0..n)
        .map(|_| {
            let len = r.u16().unwrap();
            r.u16().unwrap();
            r.u32().unwrap();
            r.u32().unwrap(); // the SID's pointer
            len
        })
        .collect();
    heads
        .into_iter()
        .map(|len| {
            let name = r.counted_chars(len).unwrap();
            (name, get_sid(r).unwrap().to_string())
        })
        .collect()
}

/// A LookupSids2 answer: the referenced domains, each name's (type, name, domain index;
/// None for a NULL name), MappedCount and the status.
type SidsAnswer = (
    Vec<(String, String)>,
    Vec<(u16, Option<String>, i32)>,
    u32,
    u32,
);

fn read_sids2(out: &[u8]) -> SidsAnswer {
    let mut r = NdrReader::new(out);
    let domains = read_domains(&mut r);
    let n = r.u32().unwrap();
    r.u32().unwrap();
    assert_eq!(r.u32().unwrap(), n);
    let heads: Vec<(u16, u16, bool, i32)> = (0..n)
        .map(|_| {
            let kind = r.u16().unwrap();
            r.align4().unwrap();
            let len = r.u16().unwrap();
            r.u16().unwrap();
            let p = r.u32().unwrap() != 0;
            let i = r.u32().unwrap() as i32;
            r.u32().unwrap(); // Flags
            (kind, len, p, i)
        })
        .collect();
    let names = heads
        .into_iter()
        .map(|(kind, len, p, i)| (kind, p.then(|| r.counted_chars(len).unwrap()), i))
        .collect();
    (domains, names, r.u32().unwrap(), r.u32().unwrap())
}

/// A LookupNames3 answer: the referenced domains, each name's (type, SID, domain index),
/// MappedCount and the status.
type NamesAnswer = (
    Vec<(String, String)>,
    Vec<(u16, Option<String>, i32)>,
    u32,
    u32,
);

fn read_names3(out: &[u8]) -> NamesAnswer {
    let mut r = NdrReader::new(out);
    let domains = read_domains(&mut r);
    let n = r.u32().unwrap();
    r.u32().unwrap();
    assert_eq!(r.u32().unwrap(), n);
    let heads: Vec<(u16, bool, i32)> = (0..n)
        .map(|_| {
            let kind = r.u16().unwrap();
            let p = r.u32().unwrap() != 0;
            let i = r.u32().unwrap() as i32;
            r.u32().unwrap(); // Flags
            (kind, p, i)
        })
        .collect();
    let sids = heads
        .into_iter()
        .map(|(kind, p, i)| (kind, p.then(|| get_sid(&mut r).unwrap().to_string()), i))
        .collect();
    (domains, sids, r.u32().unwrap(), r.u32().unwrap())
}

fn some(s: &str) -> Option<String> {
    Some(s.to_string())
}

#[test]
fn a_member_names_a_domain_user_and_group_as_samba_does_and_leaves_an_unknown_rid_unmapped() {
    let mut state = State::default();
    let h = open(&mut state);
    let asked = [
        sid(&format!("{DOM}-1103")),
        sid(&format!("{DOM}-1106")),
        sid(&format!("{DOM}-9999")),
        Sid::everyone(),
    ];
    let out = on_member(
        57,
        &lookup_sids2(&h, &asked),
        &mut state,
        &Winbind { fail: false },
    );
    let (domains, names, mapped, status) = read_sids2(&out);
    assert_eq!(
        domains,
        [
            ("RSAD".to_string(), DOM.to_string()),
            (String::new(), "S-1-1".into())
        ]
    );
    // Samba 4.22 on the same member: `rsalice` (user) and `rsproj` (domain group) in domain
    // RSAD; the unknown RID is its SID, type unknown, in no domain.
    assert_eq!(
        names,
        [
            (USE_USER, some("rsalice"), 0),
            (USE_GROUP, some("rsproj"), 0),
            (USE_UNKNOWN, some(&format!("{DOM}-9999")), -1),
            (USE_WELL_KNOWN, some("Everyone"), 1),
        ]
    );
    assert_eq!((mapped, status), (3, SOME_NOT_MAPPED.0));
}

#[test]
fn a_members_own_domain_sid_is_the_domain_with_a_null_name() {
    let mut state = State::default();
    let h = open(&mut state);
    let none = NameAnswers::default();
    let req = lookup_sids2(&h, &[sid(DOM)]);
    let out = call(57, &req, &member_facts(), &mut state, (&none, false))
        .ok()
        .and_then(Result::ok)
        .expect("a domain a logon stated needs no question");
    let (domains, names, mapped, status) = read_sids2(&out);
    assert_eq!(domains, [("RSAD".to_string(), DOM.to_string())]);
    assert_eq!(names, [(USE_DOMAIN, None, 0)]);
    assert_eq!((mapped, status), (1, 0));
}

#[test]
fn a_member_finds_domain_names_qualified_bare_and_by_upn_before_a_unix_user_of_that_name() {
    let mut state = State::default();
    let h = open(&mut state);
    let asked = [
        "RSAD\\rsalice",
        "RSAD\\rsproj",
        "rsalice",
        "rsalice@AD.RS.TEST",
        "RSAD\\nosuch",
        "RSAD",
        "RS\\rsalice",
    ];
    let out = on_member(
        68,
        &lookup_names3(&h, &asked),
        &mut state,
        &Winbind { fail: false },
    );
    let (domains, sids, mapped, status) = read_names3(&out);
    assert_eq!(domains, [("RSAD".to_string(), DOM.to_string())]);
    let alice = some(&format!("{DOM}-1103"));
    assert_eq!(
        sids,
        [
            (USE_USER, alice.clone(), 0),
            (USE_GROUP, some(&format!("{DOM}-1106")), 0),
            (USE_USER, alice.clone(), 0),
            (USE_USER, alice, 0),
            (USE_UNKNOWN, None, -1),
            (USE_DOMAIN, some(DOM), 0),
            // Under the server's own name a domain account is nothing (Samba: UNKNOWN).
            (USE_UNKNOWN, None, -1),
        ]
    );
    assert_eq!((mapped, status), (5, SOME_NOT_MAPPED.0));
}

#[test]
fn a_member_whose_id_source_fails_leaves_domain_sids_unmapped() {
    let mut state = State::default();
    let h = open(&mut state);
    let req = lookup_sids2(&h, &[sid(&format!("{DOM}-1103"))]);
    let out = on_member(57, &req, &mut state, &Winbind { fail: true });
    let (domains, names, mapped, status) = read_sids2(&out);
    assert!(domains.is_empty());
    assert_eq!(names, [(USE_UNKNOWN, some(&format!("{DOM}-1103")), -1)]);
    assert_eq!((mapped, status), (0, NtStatus::NONE_MAPPED.0));
}

#[test]
fn a_server_that_is_no_member_asks_nothing_about_domain_sids() {
    let mut state = State::default();
    let h = open(&mut state);
    let none = NameAnswers::default();
    let req = lookup_sids2(&h, &[sid(&format!("{DOM}-1103"))]);
    let out = call(57, &req, &facts(), &mut state, (&none, false))
        .ok()
        .and_then(Result::ok)
        .expect("no question on a standalone server");
    assert_eq!(read_sids2(&out).2, 0);
}

#[test]
fn a_source_that_names_sids_gives_the_domains_spelling_and_types_not_nss() {
    let mut state = State::default();
    let h = open(&mut state);
    let asked = [sid(&format!("{DOM}-513")), sid(&format!("{DOM}-571"))];
    let out = on_member(57, &lookup_sids2(&h, &asked), &mut state, &WinbindNames);
    let (domains, names, mapped, _) = read_sids2(&out);
    assert_eq!(domains, [("RSAD".to_string(), DOM.to_string())]);
    assert_eq!(
        names,
        [
            (USE_GROUP, some("Domain Users"), 0),
            (
                USE_ALIAS,
                some("Allowed RODC Password Replication Group"),
                0
            ),
        ]
    );
    assert_eq!(mapped, 2);
    let req = lookup_names3(&h, &["RSAD\\Domain Users"]);
    let (_, sids, mapped, _) = read_names3(&on_member(68, &req, &mut state, &WinbindNames));
    assert_eq!(sids, [(USE_GROUP, some(&format!("{DOM}-513")), 0)]);
    assert_eq!(mapped, 1);
}

#[test]
fn the_most_domain_sids_one_call_may_hold_are_asked_in_one_round_and_one_more_is_refused() {
    let mut state = State::default();
    let h = open(&mut state);
    let many: Vec<Sid> = (0..LOOKUP_MAX)
        .map(|rid| sid(&format!("{DOM}-{}", 1000 + rid)))
        .collect();
    let req = lookup_sids2(&h, &many);
    let none = NameAnswers::default();
    let Err(Needs(q)) = call(57, &req, &member_facts(), &mut state, (&none, false)) else {
        panic!("the domain must be asked first")
    };
    assert_eq!(
        q.len(),
        LOOKUP_MAX as usize,
        "one question per SID, in one round"
    );
    let a = NameAnswers::ask(&Nss, Some(&Winbind { fail: false }), &q);
    let out = call(57, &req, &member_facts(), &mut state, (&a, true))
        .ok()
        .and_then(Result::ok)
        .unwrap();
    let (_, names, mapped, _) = read_sids2(&out);
    assert_eq!((names.len(), mapped), (LOOKUP_MAX as usize, 2));
    let mut more = many;
    more.push(sid(&format!("{DOM}-1")));
    let out = call(
        57,
        &lookup_sids2(&h, &more),
        &member_facts(),
        &mut state,
        (&none, false),
    )
    .ok()
    .and_then(Result::ok)
    .expect("refused without a question");
    assert_eq!(
        &out[out.len() - 4..],
        &NtStatus::INVALID_PARAMETER.0.to_le_bytes()
    );
}
