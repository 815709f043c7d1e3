//! QUERY_DIRECTORY, QUERY_INFO and SET_INFO.
use crate::support;

use ringshare_vfs::{RelPath, Share};
use ringshare_wire::consts::CreateDisposition as D;
use ringshare_wire::consts::{AccessMask, SecurityInformation};
use ringshare_wire::create::{tag, CreateContext, CreateResponse};
use ringshare_wire::fscc::{
    decode_dir_entries, FileAllInformation, FileBasicInformation, FileFsAttributeInformation,
    FileInfoClass, FileRenameInformation, FileStandardInformation, FileStreamInformation, FileTime,
};
use ringshare_wire::security::{Ace, Acl, SecurityDescriptor, Sid};
use ringshare_wire::{FileId, NtStatus};
use support::*;

const DIR: u32 = 1;
const INFO_FILE: u8 = 1;
const INFO_FS: u8 = 2;
const INFO_SECURITY: u8 = 3;
const INFO_QUOTA: u8 = 4;
const LIST: u32 = 0x0012_0089;

fn names(r: &Resp, class: u8) -> Vec<String> {
    decode_dir_entries(FileInfoClass(class), &output_buffer(r))
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect()
}

fn rename_buf(name: &str, replace: bool) -> Vec<u8> {
    let mut b = Vec::new();
    FileRenameInformation {
        replace_if_exists: replace,
        root_directory: 0,
        file_name: name.into(),
    }
    .encode(&mut b);
    b
}

fn exists(c: &Client, name: &str) -> bool {
    c.mem
        .stat(
            &ringshare_vfs::server_who(),
            &RelPath::from_components(name.split('/')).unwrap(),
        )
        .is_ok()
}

#[test]
fn query_directory_lists_dot_entries_then_files_then_no_more_files() {
    let mut c = Client::new();
    c.put_file("a.txt", b"1");
    c.put_file("b.doc", b"22");
    let d = c.create("", LIST, D::OPEN, DIR).unwrap();
    let r = c.query_directory(d, 37, 0, "*", 65536);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let entries = decode_dir_entries(FileInfoClass(37), &output_buffer(&r)).unwrap();
    let got: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(got, [".", "..", "a.txt", "b.doc"]);
    assert_eq!(entries[0].file_attributes.0 & 0x10, 0x10);
    assert_eq!(entries[3].end_of_file, 2);
    assert_eq!(
        c.query_directory(d, 37, 0, "*", 65536).status(),
        NtStatus::NO_MORE_FILES
    );
    // RESTART_SCANS starts over.
    assert_eq!(names(&c.query_directory(d, 37, 1, "*", 65536), 37).len(), 4);
}

#[test]
fn a_directory_entry_larger_than_the_buffer_is_sent_cut_with_buffer_overflow_and_passed() {
    let mut c = Client::new();
    let long = "a-name-long-enough-to-pass-the-buffer.txt";
    c.put_file(long, b"1");
    let d = c.create("", LIST, D::OPEN, DIR).unwrap();
    // `.` and `..` first, one at a time (RETURN_SINGLE_ENTRY).
    for dot in [".", ".."] {
        assert_eq!(names(&c.query_directory(d, 37, 2, "*", 65536), 37), [dot]);
    }
    // FileIdBothDirectoryInformation: 104 bytes, then the name in UTF-16; 120 cut it.
    let r = c.query_directory(d, 37, 0, "*", 120);
    assert_eq!(r.status(), NtStatus::BUFFER_OVERFLOW);
    let buf = output_buffer(&r);
    assert_eq!(buf.len(), 120);
    let name_len = u32::from_le_bytes(buf[60..64].try_into().unwrap());
    assert_eq!(
        name_len as usize,
        long.len() * 2,
        "FileNameLength: the whole name's"
    );
    let utf16: Vec<u8> = long.encode_utf16().flat_map(u16::to_le_bytes).collect();
    assert_eq!(
        &buf[104..120],
        &utf16[..16],
        "the name's first 8 characters"
    );
    // The cut entry is passed: nothing is left.
    assert_eq!(
        c.query_directory(d, 37, 0, "*", 65536).status(),
        NtStatus::NO_MORE_FILES
    );
}

#[test]
fn query_directory_filters_with_the_pattern_and_a_miss_is_no_such_file() {
    let mut c = Client::new();
    c.put_file("a.txt", b"");
    c.put_file("b.doc", b"");
    let d = c.create("", LIST, D::OPEN, DIR).unwrap();
    assert_eq!(
        names(&c.query_directory(d, 1, 0, "*.TXT", 65536), 1),
        ["a.txt"]
    );
    let d2 = c.create("", LIST, D::OPEN, DIR).unwrap();
    assert_eq!(
        c.query_directory(d2, 3, 0, "nothing*", 65536).status(),
        NtStatus::NO_SUCH_FILE
    );
}

#[test]
fn query_directory_pages_by_buffer_size_and_single_entry() {
    let mut c = Client::new();
    for i in 0..5 {
        c.put_file(&format!("f{i}"), b"");
    }
    let d = c.create("", LIST, D::OPEN, DIR).unwrap();
    assert_eq!(names(&c.query_directory(d, 12, 2, "*", 65536), 12), ["."]);
    // FileNamesInformation: 12 + 4 bytes per 2-char name: 3 entries need 48 bytes, 47 holds 2.
    assert_eq!(
        names(&c.query_directory(d, 12, 0, "*", 47), 12),
        ["..", "f0"]
    );
    assert_eq!(
        names(&c.query_directory(d, 12, 0, "*", 48), 12),
        ["f1", "f2", "f3"]
    );
    assert_eq!(names(&c.query_directory(d, 12, 0, "*", 65536), 12), ["f4"]);
    assert_eq!(
        c.query_directory(d, 12, 0, "*", 65536).status(),
        NtStatus::NO_MORE_FILES
    );
}

#[test]
fn query_directory_with_a_buffer_below_one_entry_is_info_length_mismatch_and_bad_class_invalid_info_class(
) {
    let mut c = Client::new();
    let d = c.create("", LIST, D::OPEN, DIR).unwrap();
    assert_eq!(
        c.query_directory(d, 37, 0, "*", 8).status(),
        NtStatus::INFO_LENGTH_MISMATCH
    );
    assert_eq!(
        c.query_directory(d, 4, 0, "*", 4096).status(),
        NtStatus::INVALID_INFO_CLASS
    );
    c.put_file("f", b"");
    let f = c.create("f", GENERIC_READ, D::OPEN, 0).unwrap();
    assert_eq!(
        c.query_directory(f, 37, 0, "*", 4096).status(),
        NtStatus::INVALID_PARAMETER
    );
}

#[test]
fn query_info_basic_standard_and_all_describe_the_file() {
    let mut c = Client::new();
    let dd = c.create("dir", GENERIC_ALL, D::CREATE, DIR).unwrap();
    c.close(dd);
    c.put_file("dir\\f.bin", b"12345");
    let f = c.create("dir\\f.bin", GENERIC_READ, D::OPEN, 0).unwrap();
    let b = FileBasicInformation::decode(&output_buffer(&c.query_info(f, INFO_FILE, 4, 0, 1024)))
        .unwrap();
    assert_eq!(b.file_attributes.0, 0x20);
    assert!(b.last_write_time.0 > FileTime::UNIX_EPOCH.0);
    let s =
        FileStandardInformation::decode(&output_buffer(&c.query_info(f, INFO_FILE, 5, 0, 1024)))
            .unwrap();
    assert_eq!(
        (s.end_of_file, s.directory, s.delete_pending),
        (5, false, false)
    );
    let all = FileAllInformation::decode(&output_buffer(&c.query_info(f, INFO_FILE, 18, 0, 1024)))
        .unwrap();
    assert_eq!(all.name.file_name, "\\dir\\f.bin");
    assert_eq!(all.standard.end_of_file, 5);
    let streams =
        FileStreamInformation::decode(&output_buffer(&c.query_info(f, INFO_FILE, 22, 0, 1024)))
            .unwrap();
    assert_eq!(streams.entries.len(), 1);
    assert_eq!(streams.entries[0].stream_name, "::$DATA");
}

#[test]
fn query_info_sizes_follow_the_spec() {
    let mut c = Client::new();
    c.put_file("a-rather-long-name.txt", b"");
    let f = c
        .create("a-rather-long-name.txt", GENERIC_READ, D::OPEN, 0)
        .unwrap();
    assert_eq!(
        c.query_info(f, INFO_FILE, 4, 0, 39).status(),
        NtStatus::INFO_LENGTH_MISMATCH
    );
    let r = c.query_info(f, INFO_FILE, 18, 0, 104);
    assert_eq!(r.status(), NtStatus::BUFFER_OVERFLOW);
    assert_eq!(output_buffer(&r).len(), 104);
    assert_eq!(
        c.query_info(f, INFO_FILE, 200, 0, 1024).status(),
        NtStatus::INVALID_INFO_CLASS
    );
    // Quotas are asked of the quota file ($Extend\$Quota), not of a
    // file's handle: Samba 4.22 answers INVALID_HANDLE (crates/core/tests/quotas.rs).
    assert_eq!(
        c.query_info(f, INFO_QUOTA, 0, 0, 1024).status(),
        NtStatus::INVALID_HANDLE
    );
}

#[test]
fn query_info_filesystem_attribute_names_the_file_system() {
    let mut c = Client::new();
    let d = c.create("", LIST, D::OPEN, DIR).unwrap();
    let a =
        FileFsAttributeInformation::decode(&output_buffer(&c.query_info(d, INFO_FS, 5, 0, 1024)))
            .unwrap();
    assert_eq!(a.file_system_name, "NTFS");
    assert_eq!(a.maximum_component_name_length, 255);
    assert_ne!(a.file_system_attributes & 0x2, 0, "case-preserved names");
    for class in [1u8, 3, 4, 7, 11] {
        assert_eq!(
            c.query_info(d, INFO_FS, class, 0, 1024).status(),
            NtStatus::SUCCESS,
            "fs class {class}"
        );
    }
}

/// FileFsObjectIdInformation ([MS-FSCC] 2.5.6): the object id of the share's volume, the same
/// from every handle of the share and from a server started again, another for another share,
/// the one FSCTL_CREATE_OR_GET_OBJECT_ID gives as a file's BirthVolumeId (as Samba 4.22 does);
/// no extended information (48 zero bytes); below 64 bytes INFO_LENGTH_MISMATCH ([MS-FSA]
/// 2.1.5.13.8). smbtorture smb2.getinfo.fsinfo asks it.
#[test]
fn the_file_system_object_id_names_the_share_and_carries_no_extended_information() {
    const OBJECT_ID: u8 = 8;
    const CREATE_OR_GET_OBJECT_ID: u32 = 0x0009_00C0;
    let volume_id = |c: &mut Client, f: FileId| {
        let r = c.query_info(f, INFO_FS, OBJECT_ID, 0, 1024);
        assert_eq!(r.status(), NtStatus::SUCCESS);
        let out = output_buffer(&r);
        assert_eq!(out.len(), 64);
        assert_eq!(out[16..], [0u8; 48], "no extended information");
        out[..16].to_vec()
    };
    let mut c = Client::new();
    c.put_file("a", b"");
    let root = c.create("", LIST, D::OPEN, DIR).unwrap();
    let file = c.create("a", GENERIC_READ, D::OPEN, 0).unwrap();
    let id = volume_id(&mut c, root);
    assert_ne!(id, [0u8; 16]);
    assert_eq!(volume_id(&mut c, file), id, "every handle of the share");
    let r = c.ioctl(file, CREATE_OR_GET_OBJECT_ID, &[], 64, 1);
    let fsctl = ringshare_wire::ioctl::IoctlResponse::decode(&r.msg)
        .unwrap()
        .output
        .to_vec();
    assert_eq!(fsctl[16..32], id[..], "a file's BirthVolumeId");
    for len in [0u32, 16, 63] {
        assert_eq!(
            c.query_info(root, INFO_FS, OBJECT_ID, 0, len).status(),
            NtStatus::INFO_LENGTH_MISMATCH,
            "{len} bytes"
        );
    }
    let mut again = Client::new();
    let root_again = again.create("", LIST, D::OPEN, DIR).unwrap();
    assert_eq!(
        volume_id(&mut again, root_again),
        id,
        "a server started again"
    );
    again.tree_id = again.ro_tree_id;
    let other = again.create("", LIST, D::OPEN, DIR).unwrap();
    assert_ne!(volume_id(&mut again, other), id, "another share");
}

#[test]
fn query_info_security_returns_the_asked_parts_or_the_size_needed() {
    let mut c = Client::new();
    c.put_file("sec", b"");
    let f = c.create("sec", GENERIC_READ, D::OPEN, 0).unwrap();
    let r = c.query_info(f, INFO_SECURITY, 0, 0x7, 4096);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let sd = SecurityDescriptor::decode(&output_buffer(&r)).unwrap();
    assert!(sd.owner.is_some() && sd.group.is_some() && sd.dacl.is_some());
    let small = c.query_info(f, INFO_SECURITY, 0, 0x7, 8);
    assert_eq!(small.status(), NtStatus::BUFFER_TOO_SMALL);
    let needed = u32::from_le_bytes(small.body()[8..12].try_into().unwrap()) as usize;
    assert_eq!(needed, output_buffer(&r).len());
    let noacc = c.create("sec", FILE_READ_ATTRIBUTES, D::OPEN, 0).unwrap();
    assert_eq!(
        c.query_info(noacc, INFO_SECURITY, 0, 0x4, 4096).status(),
        NtStatus::ACCESS_DENIED
    );
}

#[test]
fn set_info_basic_sets_times_and_the_read_only_attribute() {
    let mut c = Client::new();
    c.put_file("b", b"");
    let f = c.create("b", GENERIC_ALL, D::OPEN, 0).unwrap();
    let when = FileTime(FileTime::UNIX_EPOCH.0 + 10_000_000 * 86_400);
    let mut buf = Vec::new();
    FileBasicInformation {
        last_write_time: when,
        file_attributes: ringshare_wire::fscc::FileAttributes(0x1),
        ..Default::default()
    }
    .encode(&mut buf);
    assert_eq!(
        c.set_info(f, INFO_FILE, 4, &buf).status(),
        NtStatus::SUCCESS
    );
    let b = FileBasicInformation::decode(&output_buffer(&c.query_info(f, INFO_FILE, 4, 0, 1024)))
        .unwrap();
    assert_eq!(b.last_write_time, when);
    assert_eq!(b.file_attributes.0 & 1, 1);
    let mut dir_attr = Vec::new();
    FileBasicInformation {
        file_attributes: ringshare_wire::fscc::FileAttributes(0x10),
        ..Default::default()
    }
    .encode(&mut dir_attr);
    assert_eq!(
        c.set_info(f, INFO_FILE, 4, &dir_attr).status(),
        NtStatus::INVALID_PARAMETER
    );
}

#[test]
fn set_info_end_of_file_resizes_and_needs_write_access() {
    let mut c = Client::new();
    c.put_file("e", b"0123456789");
    let f = c
        .create("e", GENERIC_READ | GENERIC_WRITE, D::OPEN, 0)
        .unwrap();
    assert_eq!(
        c.set_info(f, INFO_FILE, 20, &4u64.to_le_bytes()).status(),
        NtStatus::SUCCESS
    );
    assert_eq!(read_data(&c.read(f, 0, 100)), b"0123");
    let r = c.create("e", GENERIC_READ, D::OPEN, 0).unwrap();
    assert_eq!(
        c.set_info(r, INFO_FILE, 20, &1u64.to_le_bytes()).status(),
        NtStatus::ACCESS_DENIED
    );
}

#[test]
fn rename_moves_the_file_and_an_open_handle_follows() {
    let mut c = Client::new();
    let d = c.create("sub", GENERIC_ALL, D::CREATE, DIR).unwrap();
    c.close(d);
    c.put_file("old", b"x");
    let f = c.create("old", GENERIC_READ | DELETE, D::OPEN, 0).unwrap();
    assert_eq!(
        c.set_info(f, INFO_FILE, 10, &rename_buf("SUB\\new", false))
            .status(),
        NtStatus::SUCCESS
    );
    assert!(!exists(&c, "old"));
    assert!(exists(&c, "sub/new"));
    let all = FileAllInformation::decode(&output_buffer(&c.query_info(f, INFO_FILE, 18, 0, 1024)))
        .unwrap();
    assert_eq!(all.name.file_name, "\\sub\\new");
}

#[test]
fn rename_without_replace_onto_existing_is_object_name_collision() {
    let mut c = Client::new();
    c.put_file("one", b"1");
    c.put_file("two", b"2");
    let f = c.create("one", GENERIC_READ | DELETE, D::OPEN, 0).unwrap();
    assert_eq!(
        c.set_info(f, INFO_FILE, 10, &rename_buf("two", false))
            .status(),
        NtStatus::OBJECT_NAME_COLLISION
    );
    // Replacing a file someone has open is refused too.
    let _t = c.create("two", GENERIC_READ, D::OPEN, 0).unwrap();
    assert_eq!(
        c.set_info(f, INFO_FILE, 10, &rename_buf("two", true))
            .status(),
        NtStatus::ACCESS_DENIED
    );
}

#[test]
fn rename_with_replace_replaces_the_target() {
    let mut c = Client::new();
    c.put_file("one", b"1");
    c.put_file("two", b"2");
    let f = c.create("one", GENERIC_READ | DELETE, D::OPEN, 0).unwrap();
    assert_eq!(
        c.set_info(f, INFO_FILE, 10, &rename_buf("two", true))
            .status(),
        NtStatus::SUCCESS
    );
    assert_eq!(read_data(&c.read(f, 0, 1)), b"1");
    assert!(!exists(&c, "one"));
}

#[test]
fn disposition_deletes_at_close_and_refuses_non_empty_directories() {
    let mut c = Client::new();
    c.put_file("del", b"");
    let f = c.create("del", GENERIC_READ | DELETE, D::OPEN, 0).unwrap();
    assert_eq!(
        c.set_info(f, INFO_FILE, 13, &[1]).status(),
        NtStatus::SUCCESS
    );
    let s =
        FileStandardInformation::decode(&output_buffer(&c.query_info(f, INFO_FILE, 5, 0, 1024)))
            .unwrap();
    assert!(s.delete_pending);
    c.close(f);
    assert!(!exists(&c, "del"));
    let d = c.create("full", GENERIC_ALL, D::CREATE, DIR).unwrap();
    c.put_file("full\\x", b"");
    assert_eq!(
        c.set_info(d, INFO_FILE, 13, &[1]).status(),
        NtStatus::DIRECTORY_NOT_EMPTY
    );
    let nodelete = c.create("full\\x", GENERIC_READ, D::OPEN, 0).unwrap();
    assert_eq!(
        c.set_info(nodelete, INFO_FILE, 13, &[1]).status(),
        NtStatus::ACCESS_DENIED
    );
}

#[test]
fn set_info_on_a_read_only_share_is_access_denied_and_security_is_refused() {
    let mut c = Client::new();
    c.put_file("r", b"");
    let ro = c.ro_tree_id;
    let f = c
        .create_on(ro, "r", GENERIC_READ, SHARE_ALL, D::OPEN, 0)
        .unwrap();
    let tree = c.tree_id;
    c.tree_id = ro;
    assert_eq!(
        c.set_info(f, INFO_FILE, 20, &0u64.to_le_bytes()).status(),
        NtStatus::ACCESS_DENIED
    );
    c.tree_id = tree;
    let w = c.create("r", GENERIC_ALL, D::OPEN, 0).unwrap();
    assert_eq!(
        c.set_info_additional(w, INFO_SECURITY, 0x4, &[0; 20])
            .status(),
        NtStatus::INVALID_SECURITY_DESCR
    );
    let _ = FileId::ANY;
}

/// Every OutputBufferLength from 0 to the full answer: below `min` is
/// INFO_LENGTH_MISMATCH, then BUFFER_OVERFLOW with that many bytes, then SUCCESS.
fn check_buffer_sizes(c: &mut Client, f: FileId, info_type: u8, class: u8, min: usize) {
    let full = c.query_info(f, info_type, class, 0, 4096);
    assert_eq!(full.status(), NtStatus::SUCCESS, "class {class}");
    let full = output_buffer(&full).len();
    assert!(full > min, "class {class} has a variable part past {min}");
    for len in 0..=full {
        let r = c.query_info(f, info_type, class, 0, len as u32);
        let want = if len < min {
            NtStatus::INFO_LENGTH_MISMATCH
        } else if len < full {
            NtStatus::BUFFER_OVERFLOW
        } else {
            NtStatus::SUCCESS
        };
        assert_eq!(r.status(), want, "class {class}, {len} bytes");
        if want != NtStatus::INFO_LENGTH_MISMATCH {
            assert_eq!(output_buffer(&r).len(), len, "class {class}, {len} bytes");
        }
    }
}

#[test]
fn a_buffer_below_the_declared_structure_size_is_info_length_mismatch_and_a_cut_name_buffer_overflow(
) {
    let mut c = Client::new();
    c.put_file("bufsize.txt", b"x");
    let f = c.create("bufsize.txt", GENERIC_READ, D::OPEN, 0).unwrap();
    // FileAll 104, FileAlternateName 8, FileStream 32.
    for (class, min) in [(18u8, 104usize), (21, 8), (22, 32)] {
        check_buffer_sizes(&mut c, f, INFO_FILE, class, min);
    }
    let d = c.create("", LIST, D::OPEN, DIR).unwrap();
    // FileFsVolume 24, FileFsAttribute 16.
    for (class, min) in [(1u8, 24usize), (5, 16)] {
        check_buffer_sizes(&mut c, d, INFO_FS, class, min);
    }
}

#[test]
fn full_ea_information_needs_read_ea_and_a_file_without_eas_says_so() {
    const FILE_READ_EA: u32 = 0x8;
    let mut c = Client::new();
    c.put_file("ea", b"");
    let no_ea = c.create("ea", FILE_READ_ATTRIBUTES, D::OPEN, 0).unwrap();
    assert_eq!(
        c.query_info(no_ea, INFO_FILE, 15, 0, 4096).status(),
        NtStatus::ACCESS_DENIED
    );
    let ea = c.create("ea", FILE_READ_EA, D::OPEN, 0).unwrap();
    assert_eq!(
        c.query_info(ea, INFO_FILE, 15, 0, 4096).status(),
        NtStatus::NO_EAS_ON_FILE
    );
    // FileBasicInformation still needs FILE_READ_ATTRIBUTES.
    assert_eq!(
        c.query_info(ea, INFO_FILE, 4, 0, 4096).status(),
        NtStatus::ACCESS_DENIED
    );
}

#[test]
fn a_listing_in_progress_leaves_out_entries_removed_since_it_started() {
    let mut c = Client::new();
    for i in 0..4 {
        c.put_file(&format!("f{i}"), b"");
    }
    c.put_file("grows", b"");
    let d = c.create("", LIST, D::OPEN, DIR).unwrap();
    assert_eq!(names(&c.query_directory(d, 12, 2, "*", 65536), 12), ["."]);
    for i in [0, 2, 3] {
        c.mem
            .unlink(
                &ringshare_vfs::server_who(),
                &RelPath::from_components([format!("f{i}")]).unwrap(),
            )
            .unwrap();
    }
    c.put_file("grows", b"12345");
    let r = c.query_directory(d, 37, 0, "*", 65536);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let entries = decode_dir_entries(FileInfoClass(37), &output_buffer(&r)).unwrap();
    let got: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(got, ["..", "f1", "grows"]);
    assert_eq!(entries[2].end_of_file, 5, "described as it is now");
    // Only removed entries left: NO_MORE_FILES, not an empty success.
    let d2 = c.create("", LIST, D::OPEN, DIR).unwrap();
    assert_eq!(
        names(&c.query_directory(d2, 12, 0, "*", 47), 12),
        [".", ".."]
    );
    for name in ["f1", "grows"] {
        c.mem
            .unlink(
                &ringshare_vfs::server_who(),
                &RelPath::from_components([name]).unwrap(),
            )
            .unwrap();
    }
    assert_eq!(
        c.query_directory(d2, 12, 0, "*", 65536).status(),
        NtStatus::NO_MORE_FILES
    );
}

/// Owner, group and DACL of a security query on `f`.
fn query_sd(c: &mut Client, f: FileId) -> SecurityDescriptor {
    let r = c.query_info(f, INFO_SECURITY, 0, 0x7, 4096);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    SecurityDescriptor::decode(&output_buffer(&r)).unwrap()
}

fn set_sd(c: &mut Client, f: FileId, info: u32, sd: &SecurityDescriptor) -> NtStatus {
    let bytes = sd.to_bytes(SecurityInformation(info)).unwrap();
    c.set_info_additional(f, INFO_SECURITY, info, &bytes)
        .status()
}

#[test]
fn a_dacl_set_with_set_info_is_stored_and_returned_as_set() {
    const WRITE_DAC: u32 = 0x0004_0000;
    const READ_CONTROL: u32 = 0x0002_0000;
    let mut c = Client::new();
    c.put_file("acl", b"");
    let f = c
        .create("acl", READ_CONTROL | WRITE_DAC, D::OPEN, 0)
        .unwrap();
    let mut sd = query_sd(&mut c, f);
    let owner = sd.owner.clone();
    let mut dacl = sd.dacl.clone().unwrap();
    dacl.aces.push(Ace::allow(
        Sid::authenticated_users(),
        AccessMask(0x001F_0000),
        0,
    ));
    sd.dacl = Some(dacl.clone());
    // Only the DACL is sent: the owner stays as it was.
    let mut dacl_only = sd.clone();
    dacl_only.owner = None;
    dacl_only.group = None;
    assert_eq!(set_sd(&mut c, f, 0x4, &dacl_only), NtStatus::SUCCESS);
    let got = query_sd(&mut c, f);
    assert_eq!(got.dacl, Some(dacl));
    assert_eq!(got.owner, owner);
    // A second open (and a reopen) sees it too.
    let g = c.create("acl", READ_CONTROL, D::OPEN, 0).unwrap();
    assert_eq!(query_sd(&mut c, g).dacl, got.dacl);
    // DACL selected but not present: a NULL DACL.
    let mut none = sd.clone();
    none.dacl = None;
    none.control = 0;
    assert_eq!(set_sd(&mut c, f, 0x4, &none), NtStatus::SUCCESS);
    let got = query_sd(&mut c, f);
    assert!(got.has_null_dacl(), "{got:?}");
    // An empty DACL (present, no ACEs) is not a NULL DACL.
    let mut empty = sd.clone();
    empty.dacl = Some(Acl::new(Vec::new()));
    assert_eq!(set_sd(&mut c, f, 0x4, &empty), NtStatus::SUCCESS);
    let got = query_sd(&mut c, f);
    assert_eq!(got.dacl, Some(Acl::new(Vec::new())), "{got:?}");
    // Without WRITE_DAC / WRITE_OWNER: ACCESS_DENIED; a SACL: PRIVILEGE_NOT_HELD.
    assert_eq!(set_sd(&mut c, g, 0x4, &sd), NtStatus::ACCESS_DENIED);
    assert_eq!(set_sd(&mut c, f, 0x1, &sd), NtStatus::ACCESS_DENIED);
    assert_eq!(set_sd(&mut c, f, 0x8, &sd), NtStatus::PRIVILEGE_NOT_HELD);
}

#[test]
fn a_security_descriptor_given_at_create_is_stored_with_the_new_file_only() {
    let mut c = Client::new();
    c.put_file("probe", b"");
    let p = c.create("probe", GENERIC_READ, D::OPEN, 0).unwrap();
    let mut sd = query_sd(&mut c, p);
    let dacl = Acl::new(vec![Ace::allow(
        Sid::everyone(),
        AccessMask(0x0012_0089),
        0,
    )]);
    sd.dacl = Some(dacl.clone());
    let bytes = sd.to_bytes(SecurityInformation(0x7)).unwrap();
    let ctx = || vec![CreateContext::new(tag::SD_BUFFER, bytes.clone())];
    let tree = c.tree_id;
    for (name, opts) in [("file", 0u32), ("dir", DIR)] {
        let mut m = c.create_msg_ctx(
            tree,
            name,
            GENERIC_ALL,
            SHARE_ALL,
            D::CREATE,
            opts,
            0,
            ctx(),
        );
        c.sign(&mut m);
        let r = c.send_frame(m).remove(0);
        assert_eq!(r.status(), NtStatus::SUCCESS, "{name}");
        let f = CreateResponse::decode(&r.msg).unwrap().file_id;
        assert_eq!(query_sd(&mut c, f).dacl, Some(dacl.clone()), "{name}");
    }
    // Without SE_DACL_PRESENT the new file keeps the DACL it would have had.
    let empty = SecurityDescriptor::default()
        .to_bytes(SecurityInformation(0x7))
        .unwrap();
    let ctx_empty = vec![CreateContext::new(tag::SD_BUFFER, empty)];
    let mut m = c.create_msg_ctx(
        tree,
        "plain",
        GENERIC_ALL,
        SHARE_ALL,
        D::CREATE,
        0,
        0,
        ctx_empty,
    );
    c.sign(&mut m);
    let r = c.send_frame(m).remove(0);
    let f = CreateResponse::decode(&r.msg).unwrap().file_id;
    let plain = query_sd(&mut c, f);
    assert!(
        plain.dacl.is_some_and(|d| !d.aces.is_empty()),
        "derived DACL"
    );
    // Opening an existing file ignores the context.
    let mut m = c.create_msg_ctx(tree, "probe", GENERIC_ALL, SHARE_ALL, D::OPEN, 0, 0, ctx());
    c.sign(&mut m);
    let r = c.send_frame(m).remove(0);
    let f = CreateResponse::decode(&r.msg).unwrap().file_id;
    assert_ne!(query_sd(&mut c, f).dacl, Some(dacl));
    // A descriptor that does not decode is refused before anything is created.
    let bad = vec![CreateContext::new(tag::SD_BUFFER, vec![1, 0, 0, 0])];
    let mut m = c.create_msg_ctx(tree, "never", GENERIC_ALL, SHARE_ALL, D::CREATE, 0, 0, bad);
    c.sign(&mut m);
    assert_eq!(
        c.send_frame(m).remove(0).status(),
        NtStatus::INVALID_SECURITY_DESCR
    );
    assert!(!exists(&c, "never"));
}

#[test]
fn a_file_renamed_into_a_directory_held_open_with_delete_is_a_sharing_violation_a_directory_is_not()
{
    let mut c = Client::new();
    let mut other = Client::on(c.server.clone(), c.mem.clone(), Options::default());
    let d = c.create("par", GENERIC_ALL, D::CREATE, DIR).unwrap();
    c.close(d);
    c.put_file("par\\a", b"x");
    let sub = c.create("par\\sub", GENERIC_ALL, D::CREATE, DIR).unwrap();
    c.close(sub);
    let held = other.create("par", GENERIC_ALL, D::OPEN, DIR).unwrap();
    let f = c
        .create("par\\a", GENERIC_READ | DELETE, D::OPEN, 0)
        .unwrap();
    assert_eq!(
        c.set_info(f, INFO_FILE, 10, &rename_buf("par\\b", false))
            .status(),
        NtStatus::SHARING_VIOLATION
    );
    c.close(f);
    let s = c
        .create("par\\sub", GENERIC_READ | DELETE, D::OPEN, DIR)
        .unwrap();
    assert_eq!(
        c.set_info(s, INFO_FILE, 10, &rename_buf("par\\sub-r", false))
            .status(),
        NtStatus::SUCCESS
    );
    c.close(s);
    other.close(held);
    let f = c
        .create("par\\a", GENERIC_READ | DELETE, D::OPEN, 0)
        .unwrap();
    assert_eq!(
        c.set_info(f, INFO_FILE, 10, &rename_buf("par\\b", false))
            .status(),
        NtStatus::SUCCESS,
        "free once the directory is closed"
    );
    c.close(f);
}
