//! Previous Versions on a `shadow_copy2` share (Samba's vfs_shadow_copy2):
//! FSCTL_SRV_ENUMERATE_SNAPSHOTS, a CREATE naming a snapshot by an `@GMT-…`
//! path component or by the TWrp context, and what such an open may do;
//! the snapshots are plain directories of the in-memory share's
//! `.snapshots`, as snapper lays them out.

use crate::support;

use std::sync::Arc;

use ringshare_core::shadow::{ShadowCopy, SnapSort};
use ringshare_vfs::memory::MemShare;
use ringshare_vfs::RelPath;
use ringshare_wire::consts::CreateDisposition as D;
use ringshare_wire::create::{tag, CreateContext, CreateResponse};
use ringshare_wire::fscc::{decode_dir_entries, FileInfoClass};
use ringshare_wire::ioctl::IoctlResponse;
use ringshare_wire::snapshot::GmtToken;
use ringshare_wire::NtStatus;
use support::*;

const FSCTL_SRV_ENUMERATE_SNAPSHOTS: u32 = 0x0014_4064;
const IS_FSCTL: u32 = 1;
const DIRECTORY_FILE: u32 = 0x1;
const FILE_READ_DATA: u32 = 0x1;
const OLD: &str = "@GMT-2026.11.01-10.00.00";
const NEWER: &str = "@GMT-2026.11.02-10.00.00";

/// A client of a share whose `.snapshots` holds two snapshots of `f.txt`
/// (and a directory that is no snapshot), with `shadow` as its settings
/// (none: the share has no `shadow_copy2`).
fn client_with(shadow: Option<ShadowCopy>) -> Client {
    let mem = MemShare::new();
    make_file(&mem, "f.txt", b"now");
    make_file(&mem, "only-now.txt", b"new");
    make_file(&mem, &format!(".snapshots/{OLD}/f.txt"), b"old one");
    make_file(&mem, &format!(".snapshots/{OLD}/sub/g.txt"), b"gee");
    make_file(&mem, &format!(".snapshots/{NEWER}/f.txt"), b"newer one");
    make_file(&mem, ".snapshots/not-a-snapshot/f.txt", b"x");
    let server = server_with(&mem, |cfg| {
        for s in &mut cfg.shares {
            Arc::get_mut(s).unwrap().shadow = shadow.clone().map(Arc::new);
        }
    });
    Client::on(server, mem, Options::default())
}

fn client() -> Client {
    client_with(Some(ShadowCopy::default()))
}

fn enumerate(c: &mut Client, max_out: u32) -> Result<Vec<u8>, NtStatus> {
    let root = c.create("", GENERIC_READ, D::OPEN, DIRECTORY_FILE).unwrap();
    let r = c.ioctl(root, FSCTL_SRV_ENUMERATE_SNAPSHOTS, &[], max_out, IS_FSCTL);
    c.close(root);
    if r.status() != NtStatus::SUCCESS {
        return Err(r.status());
    }
    Ok(IoctlResponse::decode(&r.msg).unwrap().output.to_vec())
}

/// The tokens of an SRV_SNAPSHOT_ARRAY, in its order.
fn tokens(out: &[u8]) -> Vec<String> {
    let units: Vec<u16> = out[12..]
        .chunks(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    String::from_utf16(&units)
        .unwrap()
        .split('\0')
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

fn read_file(c: &mut Client, name: &str) -> Result<Vec<u8>, NtStatus> {
    let f = c.create(name, GENERIC_READ, D::OPEN, 0)?;
    let r = c.read(f, 0, 100);
    c.close(f);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    Ok(read_data(&r))
}

#[test]
fn the_snapshots_are_enumerated_newest_first_sized_as_samba_answers() {
    let mut c = client();
    let full = enumerate(&mut c, 65536).unwrap();
    assert_eq!(tokens(&full), [NEWER, OLD]);
    assert_eq!(full.len(), 12 + 2 * 50 + 2);
    assert_eq!(&full[..8], &[2, 0, 0, 0, 2, 0, 0, 0]);
    let counts = enumerate(&mut c, 16).unwrap();
    assert_eq!(counts, [2, 0, 0, 0, 0, 0, 0, 0, 102, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(enumerate(&mut c, 40), Err(NtStatus::BUFFER_TOO_SMALL));
    assert_eq!(enumerate(&mut c, 12), Err(NtStatus::INVALID_PARAMETER));
}

#[test]
fn shadow_sort_asc_lists_the_oldest_first() {
    let mut c = client_with(Some(ShadowCopy {
        sort: SnapSort::Asc,
        ..ShadowCopy::default()
    }));
    assert_eq!(tokens(&enumerate(&mut c, 65536).unwrap()), [OLD, NEWER]);
}

#[test]
fn a_share_without_shadow_copy2_has_no_snapshots_to_enumerate() {
    let mut c = client_with(None);
    assert_eq!(
        enumerate(&mut c, 65536),
        Err(NtStatus::INVALID_DEVICE_REQUEST)
    );
}

#[test]
fn a_share_whose_snapshot_directory_is_missing_has_none() {
    let mut c = client_with(Some(ShadowCopy {
        snapdir: RelPath::from_components(["nowhere"]).unwrap(),
        ..ShadowCopy::default()
    }));
    let out = enumerate(&mut c, 65536).unwrap();
    assert_eq!(out, [0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0]);
}

#[test]
fn a_gmt_path_reads_the_file_as_it_was_in_that_snapshot() {
    let mut c = client();
    assert_eq!(
        read_file(&mut c, &format!("{OLD}\\f.txt")).unwrap(),
        b"old one"
    );
    assert_eq!(
        read_file(&mut c, &format!("{NEWER}\\f.txt")).unwrap(),
        b"newer one"
    );
    assert_eq!(
        read_file(&mut c, &format!("sub\\{OLD}\\g.txt")).unwrap(),
        b"gee"
    );
    assert_eq!(read_file(&mut c, "f.txt").unwrap(), b"now");
}

#[test]
fn a_twrp_context_reads_the_file_as_it_was_and_wins_over_a_gmt_path() {
    let mut c = client();
    let t = GmtToken::parse(OLD).unwrap().to_filetime();
    let ctx = CreateContext::new(tag::TIMEWARP_TOKEN, t.to_le_bytes().to_vec());
    for name in ["f.txt".to_string(), format!("{NEWER}\\f.txt")] {
        let tree = c.tree_id;
        let mut m = c.create_msg_ctx(
            tree,
            &name,
            GENERIC_READ,
            SHARE_ALL,
            D::OPEN,
            0,
            0,
            vec![ctx.clone()],
        );
        c.sign(&mut m);
        let r = c.send_frame(m).remove(0);
        assert_eq!(r.status(), NtStatus::SUCCESS, "{name}");
        let f = CreateResponse::decode(&r.msg).unwrap().file_id;
        let data = read_data(&c.read(f, 0, 100));
        assert_eq!(data, b"old one", "{name}");
        c.close(f);
    }
}

#[test]
fn a_snapshot_directory_lists_the_snapshot_entries() {
    let mut c = client();
    let d = c
        .create(OLD, GENERIC_READ, D::OPEN, DIRECTORY_FILE)
        .unwrap();
    let r = c.query_directory(d, 37, 0, "*", 4096);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let mut names: Vec<String> = decode_dir_entries(FileInfoClass(37), &output_buffer(&r))
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    names.sort();
    assert_eq!(names, [".", "..", "f.txt", "sub"]);
    c.close(d);
}

#[test]
fn a_snapshot_is_read_only_over_smb() {
    let mut c = client();
    let f = format!("{OLD}\\f.txt");
    for (name, disposition) in [
        (f.as_str(), D::OVERWRITE),
        (f.as_str(), D::OVERWRITE_IF),
        (f.as_str(), D::SUPERSEDE),
        (&format!("{OLD}\\new.txt"), D::CREATE),
        (&format!("{OLD}\\new.txt"), D::OPEN_IF),
    ] {
        assert_eq!(
            c.create(name, GENERIC_READ | GENERIC_WRITE, disposition, 0),
            Err(NtStatus::MEDIA_WRITE_PROTECTED),
            "{name} {disposition:?}"
        );
    }
    assert_eq!(
        c.create(
            &format!("{OLD}\\newdir"),
            GENERIC_READ,
            D::CREATE,
            DIRECTORY_FILE
        ),
        Err(NtStatus::MEDIA_WRITE_PROTECTED)
    );
    // A delete-on-close open is refused as Samba 4.22 refuses it.
    assert_eq!(
        c.create(&f, FILE_READ_DATA | DELETE, D::OPEN, 0x1000),
        Err(NtStatus::MEDIA_WRITE_PROTECTED)
    );
    assert_eq!(read_file(&mut c, &f).unwrap(), b"old one");
    assert!(c.server_sees(&[".snapshots", OLD, "f.txt"]));
    assert!(!c.server_sees(&[".snapshots", OLD, "new.txt"]));
}

/// As on Samba 4.22: a snapshot's file opened for writing is granted, and each change through
/// the open is refused (the POSIX backend, with Samba beside it:
/// crates/ringshare/tests/previous_versions.rs).
#[test]
fn a_snapshot_file_opened_for_writing_is_granted_and_nothing_changes_it() {
    let mut c = client();
    let f = format!("{OLD}\\f.txt");
    let h = c
        .create(&f, GENERIC_READ | GENERIC_WRITE, D::OPEN, 0)
        .unwrap();
    assert_eq!(
        c.write(h, 0, b"xyz").status(),
        NtStatus::MEDIA_WRITE_PROTECTED
    );
    let (file, security) = (1, 3);
    let eof = FileInfoClass::END_OF_FILE.0;
    for (what, info_type, class, buf, want) in [
        (
            "end of file",
            file,
            eof,
            &0u64.to_le_bytes()[..],
            NtStatus::MEDIA_WRITE_PROTECTED,
        ),
        (
            "rename",
            file,
            FileInfoClass::RENAME.0,
            &rename_to("g.txt")[..],
            NtStatus::NOT_SAME_DEVICE,
        ),
        (
            "link",
            file,
            FileInfoClass::LINK.0,
            &rename_to("h.txt")[..],
            NtStatus::NOT_SAME_DEVICE,
        ),
        (
            "disposition",
            file,
            FileInfoClass::DISPOSITION.0,
            &[1u8][..],
            NtStatus::MEDIA_WRITE_PROTECTED,
        ),
        (
            "security",
            security,
            0,
            &[
                1u8, 0, 4, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            ][..],
            NtStatus::MEDIA_WRITE_PROTECTED,
        ),
    ] {
        assert_eq!(
            c.set_info(h, info_type, class, buf).status(),
            want,
            "{what}"
        );
    }
    // FSCTL_SET_SPARSE and FSCTL_SET_ZERO_DATA.
    for ctl in [0x0009_00C4, 0x0009_80C8] {
        let input = [0u8; 16];
        assert_eq!(
            c.ioctl(h, ctl, &input, 0, IS_FSCTL).status(),
            NtStatus::MEDIA_WRITE_PROTECTED,
            "{ctl:#x}"
        );
    }
    c.close(h);
    assert_eq!(read_file(&mut c, &f).unwrap(), b"old one");
    assert!(!c.server_sees(&[".snapshots", OLD, "g.txt"]));
    assert!(!c.server_sees(&[".snapshots", OLD, "h.txt"]));
    // A name not in the snapshot is not made by an open for writing.
    assert_eq!(
        c.create(&format!("{OLD}\\new.txt"), GENERIC_WRITE, D::OPEN_IF, 0),
        Err(NtStatus::MEDIA_WRITE_PROTECTED)
    );
}

/// FILE_RENAME_INFORMATION (and FILE_LINK_INFORMATION) of SMB2: ReplaceIfExists, reserved,
/// RootDirectory, FileNameLength, FileName.
fn rename_to(name: &str) -> Vec<u8> {
    let n: Vec<u8> = name.encode_utf16().flat_map(u16::to_le_bytes).collect();
    let mut b = vec![0u8; 16];
    b.extend_from_slice(&(n.len() as u32).to_le_bytes());
    b.extend_from_slice(&n);
    b
}

#[test]
fn nothing_outside_the_snapshot_is_reached_through_it() {
    let mut c = client();
    for name in [
        format!("{OLD}\\..\\f.txt"),
        format!("{OLD}\\..\\..\\f.txt"),
        format!("{OLD}\\sub\\..\\..\\only-now.txt"),
    ] {
        assert_eq!(
            read_file(&mut c, &name),
            Err(NtStatus::OBJECT_PATH_NOT_FOUND),
            "{name}"
        );
    }
    // A file that exists now but not in the snapshot is not found in it.
    assert_eq!(
        read_file(&mut c, &format!("{OLD}\\only-now.txt")),
        Err(NtStatus::OBJECT_NAME_NOT_FOUND)
    );
    // A snapshot that was never taken.
    assert_eq!(
        read_file(&mut c, "@GMT-2020.01.01-00.00.00\\f.txt"),
        Err(NtStatus::OBJECT_PATH_NOT_FOUND)
    );
}

#[test]
fn without_shadow_copy2_a_gmt_name_is_an_ordinary_name() {
    let mut c = client_with(None);
    assert_eq!(
        read_file(&mut c, &format!("{OLD}\\f.txt")),
        Err(NtStatus::OBJECT_PATH_NOT_FOUND)
    );
}

/// A share with `shadow:snapdirseverywhere`: the root's `.snapshots` holds OLD and NEWER of
/// everything, and `vol` (a subvolume with snapshots of its own, as snapper makes them) holds
/// OLD of itself in `vol/.snapshots`.
fn nested_client() -> Client {
    let mem = MemShare::new();
    make_file(&mem, "f.txt", b"now");
    make_file(&mem, "vol/v.txt", b"vol now");
    make_file(&mem, "vol/deep/d.txt", b"deep now");
    make_file(&mem, &format!(".snapshots/{OLD}/f.txt"), b"root old");
    make_file(
        &mem,
        &format!(".snapshots/{OLD}/vol/v.txt"),
        b"root's copy of vol",
    );
    make_file(
        &mem,
        &format!(".snapshots/{OLD}/vol/only-in-root.txt"),
        b"root only",
    );
    make_file(
        &mem,
        &format!(".snapshots/{NEWER}/vol/v.txt"),
        b"root newer",
    );
    make_file(&mem, &format!("vol/.snapshots/{OLD}/v.txt"), b"vol old");
    make_file(
        &mem,
        &format!("vol/.snapshots/{OLD}/deep/d.txt"),
        b"deep old",
    );
    let server = server_with(&mem, |cfg| {
        for s in &mut cfg.shares {
            Arc::get_mut(s).unwrap().shadow = Some(Arc::new(ShadowCopy {
                everywhere: true,
                ..ShadowCopy::default()
            }));
        }
    });
    Client::on(server, mem, Options::default())
}

#[test]
fn with_snapdirseverywhere_a_path_is_found_in_its_nearest_directorys_snapshot_as_samba_finds_it() {
    let mut c = nested_client();
    // vol has OLD of its own: its files come from there, by the name the client gave.
    assert_eq!(
        read_file(&mut c, &format!("{OLD}\\vol\\v.txt")).unwrap(),
        b"vol old"
    );
    assert_eq!(
        read_file(&mut c, &format!("{OLD}\\vol\\deep\\d.txt")).unwrap(),
        b"deep old"
    );
    // What vol's snapshot lacks is looked for further up, as Samba's shadow_copy2 does.
    assert_eq!(
        read_file(&mut c, &format!("{OLD}\\vol\\only-in-root.txt")).unwrap(),
        b"root only"
    );
    // vol has no NEWER: the root's.
    assert_eq!(
        read_file(&mut c, &format!("{NEWER}\\vol\\v.txt")).unwrap(),
        b"root newer"
    );
    assert_eq!(
        read_file(&mut c, &format!("{OLD}\\f.txt")).unwrap(),
        b"root old"
    );
    assert_eq!(
        c.create(
            &format!("{OLD}\\vol\\nothing.txt"),
            GENERIC_READ,
            D::OPEN,
            0
        ),
        Err(NtStatus::OBJECT_NAME_NOT_FOUND)
    );
    let none = "@GMT-2020.01.01-00.00.00";
    assert_eq!(
        c.create(&format!("{none}\\f.txt"), GENERIC_READ, D::OPEN, 0),
        Err(NtStatus::OBJECT_NAME_NOT_FOUND)
    );
    // Read-only as every snapshot.
    assert_eq!(
        c.create(&format!("{OLD}\\vol\\new.txt"), GENERIC_READ, D::CREATE, 0),
        Err(NtStatus::MEDIA_WRITE_PROTECTED)
    );
    // The live files are untouched.
    assert_eq!(
        read_file(&mut c, "vol/v.txt".replace('/', "\\").as_str()).unwrap(),
        b"vol now"
    );
}

#[test]
fn with_snapdirseverywhere_a_directory_enumerates_the_snapshots_nearest_to_it() {
    let mut c = nested_client();
    let snaps_of = |c: &mut Client, name: &str| {
        let d = c
            .create(name, GENERIC_READ, D::OPEN, DIRECTORY_FILE)
            .unwrap();
        let r = c.ioctl(d, FSCTL_SRV_ENUMERATE_SNAPSHOTS, &[], 65536, IS_FSCTL);
        c.close(d);
        assert_eq!(r.status(), NtStatus::SUCCESS, "{name}");
        tokens(IoctlResponse::decode(&r.msg).unwrap().output)
    };
    assert_eq!(snaps_of(&mut c, ""), [NEWER, OLD]);
    assert_eq!(snaps_of(&mut c, "vol"), [OLD]);
    assert_eq!(snaps_of(&mut c, "vol\\deep"), [OLD]);
    let f = c.create("f.txt", GENERIC_READ, D::OPEN, 0).unwrap();
    let r = c.ioctl(f, FSCTL_SRV_ENUMERATE_SNAPSHOTS, &[], 65536, IS_FSCTL);
    c.close(f);
    assert_eq!(
        tokens(IoctlResponse::decode(&r.msg).unwrap().output),
        [NEWER, OLD]
    );
}
