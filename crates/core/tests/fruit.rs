//! Apple's AAPL create context on a `fruit` share (Samba's vfs_fruit
//! behaviour): the server query's answer, once per connection, and file ids
//! of 0 afterwards with `fruit:zero_file_id`.

use crate::support;

use std::sync::Arc;

use ringshare_core::fruit::{Fruit, Metadata, Resource};
use ringshare_vfs::memory::MemShare;
use ringshare_wire::consts::CreateDisposition as D;
use ringshare_wire::create::{tag, CreateContext, CreateResponse};
use ringshare_wire::fscc::{decode_dir_entries, FileInfoClass};
use ringshare_wire::NtStatus;
use support::*;

fn fruit_client(fruit: Fruit) -> Client {
    let mem = MemShare::new();
    let server = server_with(&mem, |cfg| {
        for s in &mut cfg.shares {
            Arc::get_mut(s).unwrap().fruit = Some(Arc::new(fruit.clone()));
        }
    });
    Client::on(server, mem, Options::default())
}

/// kAAPL_SERVER_QUERY for server caps, volume caps and the model, from a
/// client that takes readdir attributes.
fn aapl_query() -> CreateContext<'static> {
    let mut q = Vec::new();
    q.extend_from_slice(&1u32.to_le_bytes());
    q.extend_from_slice(&0u32.to_le_bytes());
    q.extend_from_slice(&7u64.to_le_bytes());
    q.extend_from_slice(&1u64.to_le_bytes());
    CreateContext::new(tag::AAPL, q)
}

/// CREATE (open or make) `name` with `ctx`; the response's contexts as
/// (name, data).
fn create_with(
    c: &mut Client,
    name: &str,
    ctx: Vec<CreateContext<'static>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let tree = c.tree_id;
    let mut m = c.create_msg_ctx(tree, name, GENERIC_READ, SHARE_ALL, D::OPEN_IF, 0, 0, ctx);
    c.sign(&mut m);
    let r = c.send_frame(m).remove(0);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let cr = CreateResponse::decode(&r.msg).unwrap();
    cr.contexts
        .iter()
        .map(|c| (c.name.to_vec(), c.data.to_vec()))
        .collect()
}

fn context(cs: &[(Vec<u8>, Vec<u8>)], name: &[u8]) -> Option<Vec<u8>> {
    cs.iter().find(|(n, _)| n == name).map(|(_, d)| d.clone())
}

fn on_disk_id(cs: &[(Vec<u8>, Vec<u8>)]) -> u64 {
    let d = context(cs, tag::QUERY_ON_DISK_ID).expect("a QFid answer");
    u64::from_le_bytes(d[..8].try_into().unwrap())
}

#[test]
fn every_aapl_query_is_answered_with_the_model() {
    let mut c = fruit_client(Fruit {
        model: "Xserve".into(),
        ..Fruit::default()
    });
    let cs = create_with(&mut c, "", vec![aapl_query()]);
    let a = context(&cs, tag::AAPL).expect("an AAPL answer");
    assert_eq!(&a[0..4], &1u32.to_le_bytes());
    let model: Vec<u16> = a[40..]
        .chunks(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .collect();
    assert_eq!(String::from_utf16(&model).unwrap(), "Xserve");
    let again = create_with(&mut c, "", vec![aapl_query()]);
    assert_eq!(
        context(&again, tag::AAPL),
        Some(a),
        "Samba answers each one"
    );
}

#[test]
fn a_share_without_fruit_ignores_aapl() {
    let mut c = Client::new();
    assert!(create_with(&mut c, "", vec![aapl_query()]).is_empty());
}

#[test]
fn file_ids_are_zero_once_aapl_is_negotiated() {
    let mut c = fruit_client(Fruit::default());
    c.put_file("f", b"x");
    let qfid = || CreateContext::new(tag::QUERY_ON_DISK_ID, Vec::new());
    assert_ne!(on_disk_id(&create_with(&mut c, "f", vec![qfid()])), 0);
    create_with(&mut c, "", vec![aapl_query()]);
    assert_eq!(on_disk_id(&create_with(&mut c, "f", vec![qfid()])), 0);
    let d = c.create("", GENERIC_READ, D::OPEN, 1).unwrap();
    let r = c.query_directory(d, 37, 0, "f", 4096);
    let entries = decode_dir_entries(FileInfoClass(37), &output_buffer(&r)).unwrap();
    assert_eq!(entries[0].file_id, 0);
}

#[test]
fn without_zero_file_id_ids_stay_after_aapl() {
    let mut c = fruit_client(Fruit {
        zero_file_id: false,
        ..Fruit::default()
    });
    c.put_file("f", b"x");
    create_with(&mut c, "", vec![aapl_query()]);
    let qfid = CreateContext::new(tag::QUERY_ON_DISK_ID, Vec::new());
    assert_ne!(on_disk_id(&create_with(&mut c, "f", vec![qfid])), 0);
}

#[test]
fn a_malformed_aapl_context_is_invalid_parameter() {
    let mut c = fruit_client(Fruit::default());
    let tree = c.tree_id;
    let ctx = vec![CreateContext::new(tag::AAPL, vec![1, 0, 0, 0])];
    let mut m = c.create_msg_ctx(tree, "", GENERIC_READ, SHARE_ALL, D::OPEN, 0, 0, ctx);
    c.sign(&mut m);
    assert_eq!(
        c.send_frame(m).remove(0).status(),
        NtStatus::INVALID_PARAMETER
    );
}

#[test]
fn a_copy_of_no_chunks_after_aapl_with_copyfile_copies_the_file_and_its_streams() {
    use ringshare_wire::ioctl::{
        IoctlResponse, SrvCopychunkCopy, SrvCopychunkResponse, SrvRequestResumeKeyResponse,
    };
    const FSCTL_SRV_REQUEST_RESUME_KEY: u32 = 0x0014_0078;
    const FSCTL_SRV_COPYCHUNK: u32 = 0x0014_40F2;
    const IS_FSCTL: u32 = 1;
    let mut c = fruit_client(Fruit {
        copyfile: true,
        resource: Resource::Stream,
        ..Fruit::default()
    });
    c.put_file("src", &[7u8; 5000]);
    let s = c
        .create(
            "src:AFP_Resource",
            GENERIC_READ | GENERIC_WRITE,
            D::CREATE,
            0,
        )
        .unwrap();
    assert_eq!(c.write(s, 0, b"fork").status(), NtStatus::SUCCESS);
    c.close(s);
    c.put_file("dst", b"old contents");
    create_with(&mut c, "", vec![aapl_query()]);
    let src = c.create("src", GENERIC_READ, D::OPEN, 0).unwrap();
    let dst = c
        .create("dst", GENERIC_READ | GENERIC_WRITE, D::OPEN, 0)
        .unwrap();
    let r = c.ioctl(src, FSCTL_SRV_REQUEST_RESUME_KEY, &[], 32, IS_FSCTL);
    let key = SrvRequestResumeKeyResponse::decode(IoctlResponse::decode(&r.msg).unwrap().output)
        .unwrap()
        .resume_key;
    let mut input = Vec::new();
    SrvCopychunkCopy {
        source_key: key,
        chunks: Vec::new(),
    }
    .encode(&mut input);
    let r = c.ioctl(dst, FSCTL_SRV_COPYCHUNK, &input, 12, IS_FSCTL);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let out = SrvCopychunkResponse::decode(IoctlResponse::decode(&r.msg).unwrap().output).unwrap();
    assert_eq!(
        (
            out.chunks_written,
            out.chunk_bytes_written,
            out.total_bytes_written
        ),
        (0, 0, 5000)
    );
    assert_eq!(read_data(&c.read(dst, 0, 6000)), vec![7u8; 5000]);
    let fork = c
        .create("dst:AFP_Resource", GENERIC_READ, D::OPEN, 0)
        .unwrap();
    assert_eq!(read_data(&c.read(fork, 0, 100)), b"fork");
}

#[test]
fn a_resource_fork_is_refused_where_it_would_be_kept_in_netatalk_xattrs() {
    // fruit:resource = xattr: Netatalk's org.netatalk.ResourceFork (Solaris
    // only; Samba on Linux fails every open of it too).
    let mut c = fruit_client(Fruit {
        resource: Resource::Xattr,
        ..Fruit::default()
    });
    c.put_file("f", b"");
    for n in ["f:AFP_Resource", "f:afp_resource"] {
        assert_eq!(
            c.create(n, GENERIC_READ | GENERIC_WRITE, D::OPEN_IF, 0),
            Err(NtStatus::NOT_SUPPORTED),
            "{n}"
        );
    }
    assert!(c
        .create("f:other", GENERIC_READ | GENERIC_WRITE, D::OPEN_IF, 0)
        .is_ok());
}

#[test]
fn listings_after_aapl_carry_the_fork_length_finder_info_mode_and_max_access() {
    let mut c = fruit_client(Fruit {
        metadata: Metadata::Stream,
        resource: Resource::Stream,
        ..Fruit::default()
    });
    let d = c.create("d", GENERIC_READ, D::CREATE, 1).unwrap();
    c.close(d);
    c.put_file("d\\m", b"");
    let mut afp = [0u8; 60];
    afp[0..4].copy_from_slice(b"AFP\0");
    afp[4..8].copy_from_slice(&[0, 0, 1, 0]);
    afp[16..24].copy_from_slice(b"TEXTttxt");
    for (name, data) in [
        ("d\\m:AFP_AfpInfo", &afp[..]),
        ("d\\m:AFP_Resource", b"foo"),
    ] {
        let s = c
            .create(name, GENERIC_READ | GENERIC_WRITE, D::OPEN_IF, 0)
            .unwrap();
        assert_eq!(c.write(s, 0, data).status(), NtStatus::SUCCESS);
        c.close(s);
    }
    create_with(&mut c, "", vec![aapl_query()]);
    let d = c.create("d", GENERIC_READ, D::OPEN, 1).unwrap();
    let r = c.query_directory(d, 37, 0, "m", 4096);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let e = output_buffer(&r);
    let max_access = u32::from_le_bytes(e[64..68].try_into().unwrap());
    assert_ne!(
        max_access & 0x1,
        0,
        "max access includes FILE_READ_DATA: {max_access:#x}"
    );
    assert_eq!((e[68], e[69]), (24, 0), "a 24-byte short name field");
    assert_eq!(
        u64::from_le_bytes(e[70..78].try_into().unwrap()),
        3,
        "fork length"
    );
    assert_eq!(&e[78..86], b"TEXTttxt", "type and creator");
    let mode = u16::from_le_bytes([e[94], e[95]]);
    assert_eq!(mode & 0o170000, 0o100000, "a regular file's mode: {mode:o}");
    assert_eq!(&e[96..104], &[0; 8], "file id 0 after AAPL");
}

#[test]
fn after_aapl_an_empty_stream_is_neither_listed_nor_opened() {
    let mut c = fruit_client(Fruit::default());
    c.put_file("e", b"");
    let s = c
        .create("e:empty", GENERIC_READ | GENERIC_WRITE, D::CREATE, 0)
        .unwrap();
    c.close(s);
    assert!(
        c.create("e:empty", GENERIC_READ, D::OPEN, 0).is_ok(),
        "before AAPL"
    );
    create_with(&mut c, "", vec![aapl_query()]);
    assert_eq!(
        c.create("e:empty", GENERIC_READ, D::OPEN, 0),
        Err(NtStatus::OBJECT_NAME_NOT_FOUND)
    );
    assert!(c.create("e:empty", GENERIC_READ, D::OPEN_IF, 0).is_ok());
    let f = c.create("e", GENERIC_READ, D::OPEN, 0).unwrap();
    let r = c.query_info(f, 1, 22, 0, 4096);
    let list = ringshare_wire::fscc::FileStreamInformation::decode(&output_buffer(&r)).unwrap();
    let names: Vec<String> = list.entries.into_iter().map(|e| e.stream_name).collect();
    assert_eq!(names, ["::$DATA"]);
}

fn stream_fruit() -> Client {
    fruit_client(Fruit {
        metadata: Metadata::Stream,
        resource: Resource::Stream,
        ..Fruit::default()
    })
}

fn listed(c: &mut Client, name: &str) -> Vec<String> {
    let f = c.create(name, GENERIC_READ, D::OPEN, 0).unwrap();
    let r = c.query_info(f, 1, 22, 0, 4096);
    c.close(f);
    let list = ringshare_wire::fscc::FileStreamInformation::decode(&output_buffer(&r)).unwrap();
    let mut v: Vec<String> = list.entries.into_iter().map(|e| e.stream_name).collect();
    v.sort();
    v
}

#[test]
fn an_afpinfo_is_a_60_byte_blob_made_by_its_first_valid_write() {
    let mut c = stream_fruit();
    c.put_file("a", b"");
    assert_eq!(
        c.create("a:AFP_AfpInfo", GENERIC_READ, D::OPEN, 0),
        Err(NtStatus::OBJECT_NAME_NOT_FOUND)
    );
    let s = c
        .create("a:AFP_AfpInfo", GENERIC_READ | GENERIC_WRITE, D::OPEN_IF, 0)
        .unwrap();
    // A placeholder: the default blob, size 60, not listed, not found by others.
    let r = c.read(s, 16, 8);
    assert_eq!(read_data(&r), b"AFP\0\0\0\x01\0", "the offset is ignored");
    assert_eq!(listed(&mut c, "a"), ["::$DATA"]);
    assert_eq!(
        c.create("a:AFP_AfpInfo", GENERIC_READ, D::OPEN, 0),
        Err(NtStatus::OBJECT_NAME_NOT_FOUND)
    );
    assert_eq!(
        c.write(s, 0, &[0u8; 60]).status(),
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(
        c.write(s, 30, b"AFP\0").status(),
        NtStatus::INVALID_PARAMETER
    );
    let mut info = [0u8; 60];
    info[0..8].copy_from_slice(b"AFP\0\0\0\x01\0");
    info[16..24].copy_from_slice(b"TEXTttxt");
    assert_eq!(c.write(s, 0, &info).status(), NtStatus::SUCCESS);
    assert_eq!(listed(&mut c, "a"), ["::$DATA", ":AFP_AfpInfo:$DATA"]);
    // More than 60 bytes of end of file: ALLOTTED_SPACE_EXCEEDED; 60 or less: nothing.
    let eof = |n: u64| n.to_le_bytes().to_vec();
    assert_eq!(
        c.set_info(s, 1, 20, &eof(61)).status(),
        NtStatus::ALLOTTED_SPACE_EXCEEDED
    );
    assert_eq!(c.set_info(s, 1, 20, &eof(0)).status(), NtStatus::SUCCESS);
    c.close(s);
    let s = c.create("a:AFP_AfpInfo", GENERIC_READ, D::OPEN, 0).unwrap();
    assert_eq!(&read_data(&c.read(s, 0, 60))[16..24], b"TEXTttxt");
    c.close(s);
    // Zero FinderInfo: gone at close.
    let s = c
        .create("a:AFP_AfpInfo", GENERIC_READ | GENERIC_WRITE, D::OPEN, 0)
        .unwrap();
    info[16..24].copy_from_slice(&[0; 8]);
    assert_eq!(c.write(s, 0, &info).status(), NtStatus::SUCCESS);
    assert_eq!(listed(&mut c, "a"), ["::$DATA"]);
    c.close(s);
    assert_eq!(
        c.create("a:AFP_AfpInfo", GENERIC_READ, D::OPEN, 0),
        Err(NtStatus::OBJECT_NAME_NOT_FOUND)
    );
}

#[test]
fn a_resource_fork_with_data_is_not_deleted_and_an_empty_one_is_not_listed() {
    let mut c = stream_fruit();
    c.put_file("r", b"");
    let s = c
        .create("r:AFP_Resource", GENERIC_READ | GENERIC_WRITE, D::CREATE, 0)
        .unwrap();
    assert_eq!(listed(&mut c, "r"), ["::$DATA"], "empty: not listed");
    assert_eq!(c.write(s, 0, b"0123456789").status(), NtStatus::SUCCESS);
    c.close(s);
    let s = c
        .create("r:AFP_Resource", GENERIC_READ | DELETE, D::OPEN, 0x1000)
        .unwrap();
    c.close(s);
    assert_eq!(listed(&mut c, "r"), ["::$DATA", ":AFP_Resource:$DATA"]);
}

#[test]
fn an_afpinfo_is_kept_in_netatalk_metadata_by_default() {
    use ringshare_vfs::{OpenOptions, RelPath, Share};
    let mem = MemShare::new();
    let server = server_with(&mem, |cfg| {
        for s in &mut cfg.shares {
            Arc::get_mut(s).unwrap().fruit = Some(Arc::new(Fruit::default()));
        }
    });
    let mut c = Client::on(server, mem.clone(), Options::default());
    c.put_file("n", b"");
    assert_eq!(
        c.create("n:AFP_AfpInfo", GENERIC_READ, D::OPEN, 0),
        Err(NtStatus::OBJECT_NAME_NOT_FOUND)
    );
    let s = c
        .create("n:AFP_AfpInfo", GENERIC_READ | GENERIC_WRITE, D::OPEN_IF, 0)
        .unwrap();
    let mut info = [0u8; 60];
    info[0..8].copy_from_slice(b"AFP\0\0\0\x01\0");
    info[16..24].copy_from_slice(b"SMB,OLE!");
    assert_eq!(c.write(s, 0, &info).status(), NtStatus::SUCCESS);
    c.close(s);
    assert_eq!(listed(&mut c, "n"), ["::$DATA", ":AFP_AfpInfo:$DATA"]);
    // On disk: Netatalk's 402-byte blob with the Finder info at 122, no stream.
    let who = ringshare_vfs::server_who();
    let node = mem
        .open(
            &who,
            &RelPath::from_components(["n"]).unwrap(),
            &OpenOptions::read_existing(),
        )
        .unwrap()
        .node;
    let blob = node
        .netatalk_metadata()
        .unwrap()
        .expect("org.netatalk.Metadata");
    assert_eq!(blob.len(), 402);
    assert_eq!(&blob[122..130], b"SMB,OLE!");
    assert!(node.list_streams().unwrap().is_empty());
    let s = c.create("n:AFP_AfpInfo", GENERIC_READ, D::OPEN, 0).unwrap();
    assert_eq!(&read_data(&c.read(s, 0, 60))[16..24], b"SMB,OLE!");
    c.close(s);
    // Delete on close removes the metadata.
    let s = c
        .create("n:AFP_AfpInfo", GENERIC_READ | DELETE, D::OPEN, 0x1000)
        .unwrap();
    c.close(s);
    assert_eq!(node.netatalk_metadata().unwrap(), None);
    assert_eq!(listed(&mut c, "n"), ["::$DATA"]);
}

#[test]
fn a_resource_fork_lives_in_an_appledouble_file_that_follows_its_file() {
    use ringshare_vfs::{OpenOptions, RelPath, Share};
    let mem = MemShare::new();
    let server = server_with(&mem, |cfg| {
        for s in &mut cfg.shares {
            Arc::get_mut(s).unwrap().fruit = Some(Arc::new(Fruit::default()));
        }
    });
    let mut c = Client::on(server, mem.clone(), Options::default());
    let who = ringshare_vfs::server_who();
    let exists = |name: &str| {
        mem.open(
            &who,
            &RelPath::from_components([name]).unwrap(),
            &OpenOptions::read_existing(),
        )
        .is_ok()
    };
    c.put_file("doc", b"data");
    let s = c
        .create(
            "doc:AFP_Resource",
            GENERIC_READ | GENERIC_WRITE | DELETE,
            D::OPEN_IF,
            0,
        )
        .unwrap();
    assert_eq!(c.write(s, 10, b"0123456789").status(), NtStatus::SUCCESS);
    c.close(s);
    assert!(exists("._doc"), "the fork is in ._doc");
    assert_eq!(listed(&mut c, "doc"), ["::$DATA", ":AFP_Resource:$DATA"]);
    // `._` files are neither listed nor opened (fruit:veto_appledouble).
    let d = c.create("", GENERIC_READ, D::OPEN, 1).unwrap();
    let r = c.query_directory(d, 37, 0, "*", 4096);
    let names: Vec<String> = decode_dir_entries(FileInfoClass(37), &output_buffer(&r))
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert!(!names.iter().any(|n| n.starts_with("._")), "{names:?}");
    assert_eq!(
        c.create("._doc", GENERIC_READ, D::OPEN, 0),
        Err(NtStatus::OBJECT_NAME_NOT_FOUND)
    );
    // A delete of a fork with data is ignored.
    let s = c
        .create("doc:AFP_Resource", GENERIC_READ | DELETE, D::OPEN, 0x1000)
        .unwrap();
    c.close(s);
    assert!(exists("._doc"));
    // Renaming the file carries its ._ file; deleting it removes both.
    let f = c.create("doc", DELETE, D::OPEN, 0).unwrap();
    let mut rename = Vec::new();
    ringshare_wire::fscc::FileRenameInformation {
        replace_if_exists: false,
        root_directory: 0,
        file_name: "doc2".into(),
    }
    .encode(&mut rename);
    assert_eq!(c.set_info(f, 1, 10, &rename).status(), NtStatus::SUCCESS);
    c.close(f);
    assert!(!exists("._doc") && exists("._doc2"));
    let s = c
        .create("doc2:AFP_Resource", GENERIC_READ, D::OPEN, 0)
        .unwrap();
    assert_eq!(&read_data(&c.read(s, 0, 100))[10..], b"0123456789");
    c.close(s);
    let f = c.create("doc2", DELETE, D::OPEN, 0x1000).unwrap();
    c.close(f);
    assert!(!exists("doc2") && !exists("._doc2"));
}

#[test]
fn a_directory_with_an_open_file_below_is_renamed_only_by_macos() {
    let rename_to = |name: &str| {
        let mut b = Vec::new();
        ringshare_wire::fscc::FileRenameInformation {
            replace_if_exists: false,
            root_directory: 0,
            file_name: name.into(),
        }
        .encode(&mut b);
        b
    };
    let mut c = fruit_client(Fruit::default());
    let d = c
        .create("dir", GENERIC_READ | DELETE, D::CREATE, 1)
        .unwrap();
    let f = c
        .create("dir\\open.txt", GENERIC_READ | GENERIC_WRITE, D::CREATE, 0)
        .unwrap();
    assert_eq!(
        c.set_info(d, 1, 10, &rename_to("dir2")).status(),
        NtStatus::ACCESS_DENIED
    );
    c.close(d);
    create_with(&mut c, "", vec![aapl_query()]);
    let d = c.create("dir", GENERIC_READ | DELETE, D::OPEN, 1).unwrap();
    assert_eq!(
        c.set_info(d, 1, 10, &rename_to("dir2")).status(),
        NtStatus::SUCCESS
    );
    c.close(d);
    c.close(f);
}
