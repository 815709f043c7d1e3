//! Windows extended attributes over SMB2: the ExtA create context, QUERY_INFO
//! and SET_INFO FileFullEaInformation, and EaSize in FileEaInformation and
//! FileAllInformation ([MS-SMB2] 2.2.13.2.1, 3.3.5.20.1, 3.3.5.21.1;
//! [MS-FSA] 2.1.5.12.12, 2.1.5.14.2; [MS-FSCC] 2.4.15).

use crate::support;

use ringshare_vfs::{OpenOptions, RelPath, Share};
use ringshare_wire::consts::{Command, CreateDisposition as D};
use ringshare_wire::create::{CreateContext, CreateResponse};
use ringshare_wire::fscc::{FileFullEaEntry, FileFullEaInformation};
use ringshare_wire::{FileId, NtStatus, WriteExt};
use support::*;

const INFO_FILE: u8 = 1;
const CLASS_EA: u8 = 7;
const CLASS_ALL: u8 = 18;
const CLASS_FULL_EA: u8 = 15;
const FILE_READ_EA: u32 = 0x08;
const FILE_WRITE_EA: u32 = 0x10;
const SL_RETURN_SINGLE_ENTRY: u32 = 2;
const SL_INDEX_SPECIFIED: u32 = 4;

fn ea_list(eas: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    FileFullEaInformation {
        entries: eas
            .iter()
            .map(|(n, v)| FileFullEaEntry {
                flags: 0,
                name: n.as_bytes().to_vec(),
                value: v.to_vec(),
            })
            .collect(),
    }
    .encode(&mut out);
    out
}

fn decoded(buf: &[u8]) -> Vec<(String, Vec<u8>)> {
    FileFullEaInformation::decode(buf)
        .expect("a FILE_FULL_EA_INFORMATION list")
        .entries
        .into_iter()
        .map(|e| (String::from_utf8(e.name).unwrap(), e.value))
        .collect()
}

fn pairs(eas: &[(&str, &[u8])]) -> Vec<(String, Vec<u8>)> {
    eas.iter()
        .map(|(n, v)| (n.to_string(), v.to_vec()))
        .collect()
}

/// CREATE with an ExtA context; the response's status and FileId.
fn create_with_eas(
    c: &mut Client,
    name: &str,
    access: u32,
    disposition: D,
    eas: Vec<u8>,
) -> Result<FileId, NtStatus> {
    let tree = c.tree_id;
    let mut m = c.create_msg_ctx(
        tree,
        name,
        access,
        SHARE_ALL,
        disposition,
        0,
        0,
        vec![CreateContext::new(b"ExtA", eas)],
    );
    c.sign(&mut m);
    let r = c.send_frame(m).remove(0);
    if r.status() != NtStatus::SUCCESS {
        return Err(r.status());
    }
    Ok(CreateResponse::decode(&r.msg).unwrap().file_id)
}

/// QUERY_INFO FileFullEaInformation with flags, index and a get-EA list.
fn query_eas(
    c: &mut Client,
    f: FileId,
    out_len: u32,
    flags: u32,
    index: u32,
    input: &[u8],
) -> Resp {
    let tree = c.tree_id;
    c.call(Command::QUERY_INFO, tree, |o| {
        o.put_u16(41);
        o.put_u8(INFO_FILE);
        o.put_u8(CLASS_FULL_EA);
        o.put_u32(out_len);
        o.put_u16(if input.is_empty() { 0 } else { 104 });
        o.put_u16(0);
        o.put_u32(input.len() as u32);
        o.put_u32(index);
        o.put_u32(flags);
        f.write(o);
        o.put_bytes(input);
        if input.is_empty() {
            o.put_u8(0);
        }
    })
}

fn all_eas(c: &mut Client, f: FileId) -> Vec<(String, Vec<u8>)> {
    let r = query_eas(c, f, 65536, 0, 0, &[]);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    decoded(&output_buffer(&r))
}

fn stored_eas(c: &Client, name: &str) -> Vec<(String, Vec<u8>)> {
    c.mem
        .open(
            &ringshare_vfs::server_who(),
            &RelPath::from_components([name]).unwrap(),
            &OpenOptions::read_existing(),
        )
        .unwrap()
        .node
        .list_eas()
        .unwrap()
}

fn ea_size(c: &mut Client, f: FileId) -> u32 {
    let r = c.query_info(f, INFO_FILE, CLASS_EA, 0, 4);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    u32::from_le_bytes(output_buffer(&r)[..4].try_into().unwrap())
}

/// Two EAs as smbtorture's "complex" files carry them.
fn complex_eas() -> Vec<u8> {
    ea_list(&[("EAONE", b"VALUE1"), ("SECONDEA", b"ValueTwo")])
}

#[test]
fn create_with_an_exta_context_stores_the_eas_and_full_ea_query_returns_them() {
    let mut c = Client::new();
    let eas = ea_list(&[("eaOne", b"VALUE1"), ("SecondEA", b"ValueTwo")]);
    let f = create_with_eas(&mut c, "f", GENERIC_ALL, D::OVERWRITE_IF, eas).unwrap();
    let want = pairs(&[("EAONE", b"VALUE1"), ("SECONDEA", b"ValueTwo")]);
    assert_eq!(all_eas(&mut c, f), want);
    assert_eq!(stored_eas(&c, "f"), want);
}

#[test]
fn create_of_a_directory_with_an_exta_context_stores_the_eas() {
    let mut c = Client::new();
    let tree = c.tree_id;
    let mut m = c.create_msg_ctx(
        tree,
        "d",
        GENERIC_ALL,
        SHARE_ALL,
        D::CREATE,
        1,
        0,
        vec![CreateContext::new(b"ExtA", complex_eas())],
    );
    c.sign(&mut m);
    let r = c.send_frame(m).remove(0);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert_eq!(stored_eas(&c, "d").len(), 2);
}

#[test]
fn full_ea_query_on_a_file_without_eas_is_no_eas_on_file() {
    let mut c = Client::new();
    let f = c.create("plain", GENERIC_ALL, D::CREATE, 0).unwrap();
    assert_eq!(
        query_eas(&mut c, f, 1024, 0, 0, &[]).status(),
        NtStatus::NO_EAS_ON_FILE
    );
}

#[test]
fn full_ea_query_without_file_read_ea_is_access_denied() {
    let mut c = Client::new();
    let f = create_with_eas(&mut c, "f", GENERIC_ALL, D::CREATE, complex_eas()).unwrap();
    c.close(f);
    let f = c.create("f", FILE_READ_ATTRIBUTES, D::OPEN, 0).unwrap();
    assert_eq!(
        query_eas(&mut c, f, 1024, 0, 0, &[]).status(),
        NtStatus::ACCESS_DENIED
    );
    let f = c.create("f", FILE_READ_EA, D::OPEN, 0).unwrap();
    assert_eq!(
        query_eas(&mut c, f, 1024, 0, 0, &[]).status(),
        NtStatus::SUCCESS
    );
}

#[test]
fn full_ea_query_returns_whole_entries_with_buffer_overflow_or_buffer_too_small() {
    let mut c = Client::new();
    let f = create_with_eas(&mut c, "f", GENERIC_ALL, D::CREATE, complex_eas()).unwrap();
    // EAONE takes 8 + 5 + 1 + 6 = 20 bytes; SECONDEA 8 + 8 + 1 + 8 = 25.
    let r = query_eas(&mut c, f, 19, 0, 0, &[]);
    assert_eq!(r.status(), NtStatus::BUFFER_TOO_SMALL);
    for len in [20, 44] {
        let r = query_eas(&mut c, f, len, 0, 0, &[]);
        assert_eq!(r.status(), NtStatus::BUFFER_OVERFLOW, "{len}");
        let out = output_buffer(&r);
        assert_eq!(out.len(), 20);
        assert_eq!(decoded(&out), pairs(&[("EAONE", b"VALUE1")]));
    }
    let r = query_eas(&mut c, f, 45, 0, 0, &[]);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert_eq!(output_buffer(&r).len(), 45);
}

#[test]
fn full_ea_query_honours_return_single_entry_and_a_one_based_index() {
    let mut c = Client::new();
    let f = create_with_eas(&mut c, "f", GENERIC_ALL, D::CREATE, complex_eas()).unwrap();
    let r = query_eas(&mut c, f, 1024, SL_RETURN_SINGLE_ENTRY, 0, &[]);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert_eq!(decoded(&output_buffer(&r)), pairs(&[("EAONE", b"VALUE1")]));
    let r = query_eas(&mut c, f, 1024, SL_INDEX_SPECIFIED, 2, &[]);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert_eq!(
        decoded(&output_buffer(&r)),
        pairs(&[("SECONDEA", b"ValueTwo")])
    );
    let r = query_eas(&mut c, f, 1024, SL_INDEX_SPECIFIED, 3, &[]);
    assert_eq!(r.status(), NtStatus::NO_MORE_EAS);
    let r = query_eas(&mut c, f, 1024, SL_INDEX_SPECIFIED, 0, &[]);
    assert_eq!(r.status(), NtStatus::NONEXISTENT_EA_ENTRY);
}

/// A FILE_GET_EA_INFORMATION list ([MS-FSCC] 2.4.15.1).
fn get_list(names: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let start = out.len();
        let size = 4 + 1 + n.len() + 1;
        let padded = size.next_multiple_of(4);
        let last = i + 1 == names.len();
        out.put_u32(if last { 0 } else { padded as u32 });
        out.put_u8(n.len() as u8);
        out.put_bytes(n.as_bytes());
        out.put_u8(0);
        if !last {
            out.resize(start + padded, 0);
        }
    }
    out
}

#[test]
fn full_ea_query_with_a_name_list_returns_those_eas_and_empty_values_for_missing_ones() {
    let mut c = Client::new();
    let f = create_with_eas(&mut c, "f", GENERIC_ALL, D::CREATE, complex_eas()).unwrap();
    let r = query_eas(&mut c, f, 1024, 0, 0, &get_list(&["secondea", "NOPE"]));
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert_eq!(
        decoded(&output_buffer(&r)),
        pairs(&[("SECONDEA", b"ValueTwo"), ("NOPE", b"")])
    );
    let r = query_eas(&mut c, f, 1024, 0, 0, &get_list(&["a*"]));
    assert_eq!(r.status(), NtStatus::INVALID_EA_NAME);
    let r = query_eas(&mut c, f, 1024, 0, 0, &[0, 0, 0, 0, 9, b'A']);
    assert_eq!(r.status(), NtStatus::EA_LIST_INCONSISTENT);
}

#[test]
fn ea_size_is_the_size_of_the_full_ea_list_in_ea_and_all_information() {
    let mut c = Client::new();
    let f = c.create("plain", GENERIC_ALL, D::CREATE, 0).unwrap();
    assert_eq!(ea_size(&mut c, f), 0);
    let f = create_with_eas(&mut c, "f", GENERIC_ALL, D::CREATE, complex_eas()).unwrap();
    // 20 + padding 0 + 25: what the FULL_EA query returns.
    assert_eq!(ea_size(&mut c, f), 45);
    let r = c.query_info(f, INFO_FILE, CLASS_ALL, 0, 4096);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let all = output_buffer(&r);
    // Basic (40) + Standard (24) + Internal (8), then EaSize.
    assert_eq!(u32::from_le_bytes(all[72..76].try_into().unwrap()), 45);
}

#[test]
fn set_info_full_ea_sets_replaces_and_an_empty_value_deletes() {
    let mut c = Client::new();
    let f = create_with_eas(&mut c, "f", GENERIC_ALL, D::CREATE, complex_eas()).unwrap();
    let r = c.set_info(
        f,
        INFO_FILE,
        CLASS_FULL_EA,
        &ea_list(&[("new", b"n"), ("eaone", b"1")]),
    );
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert_eq!(
        all_eas(&mut c, f),
        pairs(&[("EAONE", b"1"), ("SECONDEA", b"ValueTwo"), ("NEW", b"n")])
    );
    let r = c.set_info(
        f,
        INFO_FILE,
        CLASS_FULL_EA,
        &ea_list(&[("EAONE", b""), ("SecondEA", b"")]),
    );
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert_eq!(all_eas(&mut c, f), pairs(&[("NEW", b"n")]));
    let r = c.set_info(f, INFO_FILE, CLASS_FULL_EA, &ea_list(&[("NEW", b"")]));
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert_eq!(
        query_eas(&mut c, f, 1024, 0, 0, &[]).status(),
        NtStatus::NO_EAS_ON_FILE
    );
}

#[test]
fn set_info_full_ea_without_file_write_ea_is_access_denied() {
    let mut c = Client::new();
    c.put_file("f", b"x");
    let f = c
        .create("f", GENERIC_READ | FILE_READ_EA, D::OPEN, 0)
        .unwrap();
    let r = c.set_info(f, INFO_FILE, CLASS_FULL_EA, &complex_eas());
    assert_eq!(r.status(), NtStatus::ACCESS_DENIED);
    let f = c.create("f", FILE_WRITE_EA, D::OPEN, 0).unwrap();
    let r = c.set_info(f, INFO_FILE, CLASS_FULL_EA, &complex_eas());
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert_eq!(stored_eas(&c, "f").len(), 2);
}

#[test]
fn set_info_with_a_bad_ea_name_is_invalid_ea_name_and_stores_nothing() {
    let mut c = Client::new();
    let f = c.create("f", GENERIC_ALL, D::CREATE, 0).unwrap();
    for bad in ["a\"b", "a:b", "a?b", "a|b", "tab\t"] {
        let list = ea_list(&[("GOOD", b"1"), (bad, b"v")]);
        let r = c.set_info(f, INFO_FILE, CLASS_FULL_EA, &list);
        assert_eq!(r.status(), NtStatus::INVALID_EA_NAME, "{bad:?}");
    }
    assert_eq!(stored_eas(&c, "f"), vec![]);
}

#[test]
fn ringshare_internal_names_cannot_be_set_as_eas() {
    let mut c = Client::new();
    let f = c.create("f", GENERIC_ALL, D::CREATE, 0).unwrap();
    for name in ["ringshare.dosattrib", "RINGSHARE.NTACL"] {
        let r = c.set_info(
            f,
            INFO_FILE,
            CLASS_FULL_EA,
            &ea_list(&[(name, b"\x01\0\0\0")]),
        );
        assert_eq!(r.status(), NtStatus::ACCESS_DENIED, "{name}");
    }
    assert_eq!(
        create_with_eas(
            &mut c,
            "g",
            GENERIC_ALL,
            D::CREATE,
            ea_list(&[("ringshare.ntacl", b"x")])
        ),
        Err(NtStatus::ACCESS_DENIED)
    );
    assert_eq!(stored_eas(&c, "f"), vec![]);
}

#[test]
fn create_with_a_bad_ea_list_fails_and_creates_nothing() {
    let mut c = Client::new();
    let bad = ea_list(&[("a*b", b"v")]);
    assert_eq!(
        create_with_eas(&mut c, "f", GENERIC_ALL, D::CREATE, bad),
        Err(NtStatus::INVALID_EA_NAME)
    );
    let mut cut = complex_eas();
    cut.truncate(cut.len() - 3);
    assert_eq!(
        create_with_eas(&mut c, "f", GENERIC_ALL, D::CREATE, cut),
        Err(NtStatus::EA_LIST_INCONSISTENT)
    );
    assert!(c
        .mem
        .stat(
            &ringshare_vfs::server_who(),
            &RelPath::from_components(["f"]).unwrap()
        )
        .is_err());
}

#[test]
fn overwrite_with_exta_replaces_the_eas_and_a_plain_open_ignores_exta() {
    let mut c = Client::new();
    let f = create_with_eas(&mut c, "f", GENERIC_ALL, D::CREATE, complex_eas()).unwrap();
    c.close(f);
    let f = create_with_eas(&mut c, "f", GENERIC_ALL, D::OPEN, ea_list(&[("X", b"1")])).unwrap();
    assert_eq!(all_eas(&mut c, f).len(), 2);
    c.close(f);
    let f = create_with_eas(
        &mut c,
        "f",
        GENERIC_ALL,
        D::OVERWRITE_IF,
        ea_list(&[("X", b"1")]),
    )
    .unwrap();
    assert_eq!(all_eas(&mut c, f), pairs(&[("X", b"1")]));
    c.close(f);
    // Overwriting without ExtA leaves them.
    let f = c.create("f", GENERIC_ALL, D::OVERWRITE, 0).unwrap();
    assert_eq!(all_eas(&mut c, f), pairs(&[("X", b"1")]));
}
