use super::ndr::{NdrReader, NdrWriter};
use super::*;

fn facts() -> ServerFacts {
    ServerFacts {
        netbios_name: "RINGSHARE".into(),
        workgroup: "WORKGROUP".into(),
        comment: "ringshare".into(),
        shares: vec![
            ShareEntry {
                name: "data".into(),
                comment: "lab data".into(),
                kind: ShareKind::Disk,
            },
            ShareEntry {
                name: "IPC$".into(),
                comment: "IPC Service".into(),
                kind: ShareKind::Ipc,
            },
        ],
        users: Vec::new(),
        guest_account: "nobody".into(),
        member: None,
    }
}

pub fn pdu(ptype: u8, flags: u8, call_id: u32, body: &[u8]) -> Vec<u8> {
    let mut p = vec![5, 0, ptype, flags, 0x10, 0, 0, 0];
    p.extend_from_slice(&((16 + body.len()) as u16).to_le_bytes());
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(&call_id.to_le_bytes());
    p.extend_from_slice(body);
    p
}

pub(crate) fn bind_body(iface: [u8; 16], major: u16, syntax: [u8; 16], syntax_ver: u32) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&4280u16.to_le_bytes());
    b.extend_from_slice(&4280u16.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&[1, 0, 0, 0]);
    b.extend_from_slice(&0u16.to_le_bytes()); // context id
    b.extend_from_slice(&[1, 0]);
    b.extend_from_slice(&iface);
    b.extend_from_slice(&u32::from(major).to_le_bytes());
    b.extend_from_slice(&syntax);
    b.extend_from_slice(&syntax_ver.to_le_bytes());
    b
}

pub(crate) fn request_body(opnum: u16, stub: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&(stub.len() as u32).to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&opnum.to_le_bytes());
    b.extend_from_slice(stub);
    b
}

/// Split queued output into PDUs: (ptype, flags, body).
pub(crate) fn pdus(out: &[u8]) -> Vec<(u8, u8, Vec<u8>)> {
    let mut v = Vec::new();
    let mut rest = out;
    while rest.len() >= 16 {
        let len = u16::from_le_bytes([rest[8], rest[9]]) as usize;
        v.push((rest[2], rest[3], rest[16..len].to_vec()));
        rest = &rest[len..];
    }
    v
}

fn bound_srvsvc() -> Pipe {
    let mut p = Pipe::open("srvsvc").unwrap();
    let (iface, major) = Service::Srvsvc.interface();
    p.write(
        &pdu(PTYPE_BIND, 3, 1, &bind_body(iface, major, NDR20, 2)),
        &facts(),
    )
    .unwrap();
    let (out, more) = p.read(4096);
    assert!(!more);
    let replies = pdus(&out);
    assert_eq!(replies[0].0, PTYPE_BIND_ACK);
    p
}

#[test]
fn only_srvsvc_wkssvc_lsarpc_and_samr_pipes_open() {
    assert!(Pipe::open("srvsvc").is_some());
    assert!(Pipe::open("\\PIPE\\wkssvc").is_some());
    assert!(Pipe::open("lsarpc").is_some());
    assert!(Pipe::open("samr").is_some());
    assert!(Pipe::open("netlogon").is_none());
    assert!(Pipe::open("../etc").is_none());
}

#[test]
fn bind_accepts_srvsvc_with_ndr_and_names_the_pipe() {
    let mut p = Pipe::open("srvsvc").unwrap();
    let (iface, major) = Service::Srvsvc.interface();
    p.write(
        &pdu(PTYPE_BIND, 3, 7, &bind_body(iface, major, NDR20, 2)),
        &facts(),
    )
    .unwrap();
    let (out, _) = p.read(4096);
    let (ptype, _, body) = &pdus(&out)[0];
    assert_eq!(*ptype, PTYPE_BIND_ACK);
    let name_len = u16::from_le_bytes([body[8], body[9]]) as usize;
    assert_eq!(&body[10..10 + name_len - 1], b"\\PIPE\\srvsvc");
    // One result, acceptance, NDR 2.0.
    let results_at = (16 + 10 + name_len).next_multiple_of(4) - 16;
    assert_eq!(body[results_at], 1);
    assert_eq!(&body[results_at + 4..results_at + 6], &[0, 0]);
    assert_eq!(&body[results_at + 8..results_at + 24], &NDR20);
}

#[test]
fn bind_rejects_another_interface_and_ndr64() {
    let mut p = Pipe::open("srvsvc").unwrap();
    let (wks, _) = Service::Wkssvc.interface();
    p.write(
        &pdu(PTYPE_BIND, 3, 1, &bind_body(wks, 1, NDR20, 2)),
        &facts(),
    )
    .unwrap();
    let (srv, major) = Service::Srvsvc.interface();
    let ndr64 = uuid([0x7171_0533, 0xbeba_4937, 0x8319_b5db, 0xef9c_cc36]);
    p.write(
        &pdu(PTYPE_ALTER_CONTEXT, 3, 2, &bind_body(srv, major, ndr64, 1)),
        &facts(),
    )
    .unwrap();
    let (out, _) = p.read(4096);
    let r = pdus(&out);
    let result_of = |body: &[u8]| {
        let at = body.len() - 24;
        (
            u16::from_le_bytes([body[at], body[at + 1]]),
            u16::from_le_bytes([body[at + 2], body[at + 3]]),
        )
    };
    assert_eq!(result_of(&r[0].2), (2, 1), "abstract syntax not supported");
    assert_eq!(result_of(&r[1].2), (2, 2), "transfer syntax not supported");
}

fn share_enum_stub(level: u32) -> Vec<u8> {
    let mut w = NdrWriter::new();
    w.ptr();
    w.string("\\\\127.0.0.1");
    w.u32(level);
    w.u32(level);
    w.ptr(); // container
    w.u32(0);
    w.u32(0); // null buffer
    w.u32(u32::MAX);
    w.ptr();
    w.u32(0); // resume handle
    w.buf
}

#[test]
fn share_enum_level_1_lists_every_share_with_type_and_comment() {
    let mut p = bound_srvsvc();
    p.write(
        &pdu(PTYPE_REQUEST, 3, 2, &request_body(15, &share_enum_stub(1))),
        &facts(),
    )
    .unwrap();
    let (out, _) = p.read(65536);
    let (ptype, flags, body) = &pdus(&out)[0];
    assert_eq!((*ptype, *flags), (PTYPE_RESPONSE, 3));
    let mut r = NdrReader::new(&body[8..]);
    assert_eq!(r.u32().unwrap(), 1); // level
    assert_eq!(r.u32().unwrap(), 1); // union tag
    assert_ne!(r.u32().unwrap(), 0); // container
    assert_eq!(r.u32().unwrap(), 2); // entries
    assert_ne!(r.u32().unwrap(), 0); // array
    assert_eq!(r.u32().unwrap(), 2); // max_count
    let mut types = Vec::new();
    for _ in 0..2 {
        r.u32().unwrap();
        types.push(r.u32().unwrap());
        r.u32().unwrap();
    }
    assert_eq!(types, [0, 0x8000_0003]);
    assert_eq!(r.string().unwrap(), "data");
    assert_eq!(r.string().unwrap(), "lab data");
    assert_eq!(r.string().unwrap(), "IPC$");
    assert_eq!(r.string().unwrap(), "IPC Service");
    assert_eq!(r.u32().unwrap(), 2); // total
    assert_ne!(r.u32().unwrap(), 0); // resume handle pointer
    assert_eq!(r.u32().unwrap(), 0);
    assert_eq!(r.u32().unwrap(), 0); // WERR_OK
}

#[test]
fn share_enum_with_an_unknown_level_is_invalid_level_not_a_fault() {
    let mut p = bound_srvsvc();
    p.write(
        &pdu(PTYPE_REQUEST, 3, 2, &request_body(15, &share_enum_stub(7))),
        &facts(),
    )
    .unwrap();
    let (out, _) = p.read(65536);
    let (ptype, _, body) = &pdus(&out)[0];
    assert_eq!(*ptype, PTYPE_RESPONSE);
    assert_eq!(&body[body.len() - 4..], &124u32.to_le_bytes());
}

#[test]
fn unknown_operations_and_unbound_contexts_get_a_fault() {
    let mut p = bound_srvsvc();
    p.write(&pdu(PTYPE_REQUEST, 3, 3, &request_body(99, &[])), &facts())
        .unwrap();
    let mut unbound = Pipe::open("srvsvc").unwrap();
    unbound
        .write(
            &pdu(PTYPE_REQUEST, 3, 3, &request_body(15, &share_enum_stub(1))),
            &facts(),
        )
        .unwrap();
    let fault_of = |p: &mut Pipe| {
        let (out, _) = p.read(4096);
        let (ptype, _, body) = pdus(&out).remove(0);
        (
            ptype,
            u32::from_le_bytes([body[8], body[9], body[10], body[11]]),
        )
    };
    assert_eq!(fault_of(&mut p), (PTYPE_FAULT, FAULT_OP_RANGE));
    assert_eq!(fault_of(&mut unbound), (PTYPE_FAULT, FAULT_PROTO));
}

#[test]
fn large_responses_are_fragmented_and_a_short_read_says_more_remains() {
    let mut f = facts();
    for i in 0..200 {
        f.shares.push(ShareEntry {
            name: format!("share{i:03}"),
            comment: "x".repeat(40),
            kind: ShareKind::Disk,
        });
    }
    let mut p = bound_srvsvc();
    let (out, more) = p
        .transceive(
            &pdu(PTYPE_REQUEST, 3, 2, &request_body(15, &share_enum_stub(1))),
            1024,
            &f,
        )
        .unwrap();
    assert_eq!(out.len(), 1024);
    assert!(more);
    let (rest, more) = p.read(1 << 20);
    assert!(!more);
    let all: Vec<u8> = out.into_iter().chain(rest).collect();
    let frags = pdus(&all);
    assert!(frags.len() > 1);
    assert_eq!(frags[0].1 & PFC_FIRST_FRAG, PFC_FIRST_FRAG);
    assert_eq!(frags.last().unwrap().1 & PFC_LAST_FRAG, PFC_LAST_FRAG);
    assert!(frags
        .iter()
        .all(|(t, _, b)| *t == PTYPE_RESPONSE && b.len() + 16 <= 4280));
}

#[test]
fn share_get_info_finds_a_share_case_insensitively_or_says_not_found() {
    let mut p = bound_srvsvc();
    let stub = |name: &str| {
        let mut w = NdrWriter::new();
        w.u32(0); // null server name
        w.string(name);
        w.u32(1);
        w.buf
    };
    p.write(
        &pdu(PTYPE_REQUEST, 3, 2, &request_body(16, &stub("DATA"))),
        &facts(),
    )
    .unwrap();
    p.write(
        &pdu(PTYPE_REQUEST, 3, 3, &request_body(16, &stub("nope"))),
        &facts(),
    )
    .unwrap();
    let (out, _) = p.read(65536);
    let r = pdus(&out);
    assert_eq!(&r[0].2[r[0].2.len() - 4..], &0u32.to_le_bytes());
    assert_eq!(&r[1].2[r[1].2.len() - 4..], &2310u32.to_le_bytes());
}

#[test]
fn hostile_pdus_never_panic() {
    let f = facts();
    for len in [0usize, 1, 15, 16, 17, 40, 100] {
        for seed in 0..64u32 {
            let mut p = Pipe::open("srvsvc").unwrap();
            let mut x = seed.wrapping_mul(2_654_435_761);
            let mut bytes: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            if bytes.len() >= 10 {
                bytes[0] = 5;
                bytes[1] = 0;
                bytes[8..10].copy_from_slice(&(len as u16).to_le_bytes());
            }
            let _ = p.write(&bytes, &f);
            let _ = p.read(1 << 16);
        }
    }
}

/// Write the `rpc_pipe` fuzz target's seeds `NAME-calls` (each PDU of `writes` one write) and
/// `NAME-one-write` (all in one) for pipe `service` into fuzz/corpus/rpc_pipe, then play each
/// as the target does: the PDU types each answered.
pub(crate) fn write_seeds(service: u8, name: &str, writes: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let seed = |pieces: &[Vec<u8>]| {
        let mut s = vec![service];
        s.extend_from_slice(&4280u16.to_le_bytes());
        for p in pieces {
            s.extend_from_slice(&(p.len() as u16).to_le_bytes());
            s.extend_from_slice(p);
        }
        s
    };
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/rpc_pipe");
    std::fs::create_dir_all(&dir).unwrap();
    let files = [format!("{name}-calls"), format!("{name}-one-write")];
    std::fs::write(dir.join(&files[0]), seed(writes)).unwrap();
    std::fs::write(dir.join(&files[1]), seed(&[writes.concat()])).unwrap();
    let mut played = Vec::new();
    for f in &files {
        let bytes = std::fs::read(dir.join(f)).unwrap();
        let mut p = crate::ipc::FuzzPipe::new(bytes[0]);
        let mut rest = &bytes[3..];
        let mut out = Vec::new();
        while rest.len() >= 2 {
            let n = usize::from(u16::from_le_bytes([rest[0], rest[1]]));
            out.extend(p.write(&rest[2..2 + n], 4280));
            rest = &rest[2 + n..];
        }
        played.push(pdus(&out).iter().map(|p| p.0).collect());
    }
    played
}
