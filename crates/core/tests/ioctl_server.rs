//! Server-level FSCTLs: network interfaces and object ids.

use crate::support;

use ringshare_vfs::memory::MemShare;
use ringshare_wire::consts::CreateDisposition as D;
use ringshare_wire::ioctl::{IoctlResponse, NetworkInterfaceInfo};
use ringshare_wire::{FileId, NtStatus};
use support::*;

const QUERY_NETWORK_INTERFACE_INFO: u32 = 0x0014_01FC;
const CREATE_OR_GET_OBJECT_ID: u32 = 0x0009_00C0;

#[test]
fn network_interface_info_lists_what_the_driver_set_and_is_not_supported_before() {
    let mem = MemShare::new();
    let server = server(&mem, ringshare_core::SigningPolicy::IfRequired);
    let mut c = Client::on(server.clone(), mem.clone(), Options::default());
    assert_eq!(
        c.ioctl(FileId::ANY, QUERY_NETWORK_INTERFACE_INFO, &[], 65536, 1)
            .status(),
        NtStatus::NOT_SUPPORTED
    );
    let nic = NetworkInterfaceInfo {
        if_index: 3,
        capability: 0,
        link_speed: 10_000_000_000,
        addr: "192.0.2.7:0".parse().unwrap(),
    };
    server.set_interfaces(vec![nic]);
    let r = c.ioctl(FileId::ANY, QUERY_NETWORK_INTERFACE_INFO, &[], 65536, 1);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let out = IoctlResponse::decode(&r.msg).unwrap();
    assert_eq!(
        NetworkInterfaceInfo::decode_list(out.output).unwrap(),
        vec![nic]
    );
    assert_eq!(
        c.ioctl(FileId::ANY, QUERY_NETWORK_INTERFACE_INFO, &[], 100, 1)
            .status(),
        NtStatus::BUFFER_TOO_SMALL
    );
}

#[test]
fn object_ids_are_stable_per_file_and_differ_between_files() {
    let mut c = Client::new();
    c.put_file("a", b"");
    c.put_file("b", b"");
    let oid = |c: &mut Client, name: &str| {
        let f = c.create(name, GENERIC_READ, D::OPEN, 0).unwrap();
        let r = c.ioctl(f, CREATE_OR_GET_OBJECT_ID, &[], 64, 1);
        assert_eq!(r.status(), NtStatus::SUCCESS);
        let out = IoctlResponse::decode(&r.msg).unwrap().output.to_vec();
        assert_eq!(out.len(), 64);
        out[..16].to_vec()
    };
    let a1 = oid(&mut c, "a");
    let a2 = oid(&mut c, "a");
    let b = oid(&mut c, "b");
    assert_eq!(a1, a2);
    assert_ne!(a1, b);
}
