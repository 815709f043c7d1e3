//! Stored security descriptors are enforced; the creator owns new files.

use crate::support;

use ringshare_vfs::{RelPath, Share};
use ringshare_wire::consts::{AccessMask, CreateDisposition as D};
use ringshare_wire::security::{Ace, Acl, SecurityDescriptor, Sid, SE_DACL_PRESENT};
use ringshare_wire::NtStatus;
use support::*;

const READ_CONTROL: u32 = 0x0002_0000;
const WRITE_DAC: u32 = 0x0004_0000;
const FILE_READ_DATA: u32 = 0x1;
const FILE_WRITE_DATA: u32 = 0x2;
const INFO_SECURITY: u8 = 3;
const DACL_SECURITY_INFORMATION: u32 = 4;

fn dacl(aces: Vec<Ace>) -> Vec<u8> {
    SecurityDescriptor {
        control: SE_DACL_PRESENT,
        rm_control: 0,
        owner: None,
        group: None,
        sacl: None,
        dacl: Some(Acl { revision: 2, aces }),
    }
    .to_bytes(ringshare_wire::consts::SecurityInformation::DACL)
    .unwrap()
}

#[test]
fn a_file_created_over_smb_is_owned_by_the_creating_user() {
    let mut c = Client::new();
    c.create("mine", GENERIC_READ | GENERIC_WRITE, D::CREATE, 0)
        .unwrap();
    let attr = c
        .mem
        .stat(
            &ringshare_vfs::server_who(),
            &RelPath::from_components(["mine"]).unwrap(),
        )
        .unwrap();
    assert_eq!(attr.uid, ALICE_UID);
}

#[test]
fn an_empty_dacl_denies_data_access_but_leaves_the_owner_read_control() {
    let mut c = Client::new();
    let f = c
        .create("locked", READ_CONTROL | WRITE_DAC, D::CREATE, 0)
        .unwrap();
    let r = c.set_info_additional(f, INFO_SECURITY, DACL_SECURITY_INFORMATION, &dacl(vec![]));
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert_eq!(
        c.create("locked", FILE_READ_DATA, D::OPEN, 0).err(),
        Some(NtStatus::ACCESS_DENIED)
    );
    assert_eq!(
        c.create("locked", FILE_WRITE_DATA, D::OPEN, 0).err(),
        Some(NtStatus::ACCESS_DENIED)
    );
    assert!(
        c.create("locked", READ_CONTROL, D::OPEN, 0).is_ok(),
        "alice created it, so she owns it"
    );
}

#[test]
fn an_allow_ace_for_everyone_grants_exactly_its_rights() {
    let mut c = Client::new();
    let f = c
        .create("ro", READ_CONTROL | WRITE_DAC, D::CREATE, 0)
        .unwrap();
    let sd = dacl(vec![Ace::allow(
        Sid::everyone(),
        AccessMask(0x0012_0089),
        0,
    )]);
    assert_eq!(
        c.set_info_additional(f, INFO_SECURITY, DACL_SECURITY_INFORMATION, &sd)
            .status(),
        NtStatus::SUCCESS
    );
    assert!(c.create("ro", FILE_READ_DATA, D::OPEN, 0).is_ok());
    assert_eq!(
        c.create("ro", FILE_WRITE_DATA, D::OPEN, 0).err(),
        Some(NtStatus::ACCESS_DENIED)
    );
}

#[test]
fn files_without_a_stored_descriptor_are_not_restricted_by_acls() {
    let mut c = Client::new();
    c.put_file("plain", b"x");
    assert!(c
        .create("plain", GENERIC_READ | GENERIC_WRITE, D::OPEN, 0)
        .is_ok());
}

#[test]
fn a_dacl_denying_delete_still_lets_a_user_delete_through_the_parent_directory() {
    const DELETE_ON_CLOSE: u32 = 0x1000;
    let mut c = Client::new();
    let f = c
        .create("victim", READ_CONTROL | WRITE_DAC, D::CREATE, 0)
        .unwrap();
    assert_eq!(
        c.set_info_additional(f, INFO_SECURITY, DACL_SECURITY_INFORMATION, &dacl(vec![]))
            .status(),
        NtStatus::SUCCESS
    );
    c.close(f);
    let d = c
        .create("victim", DELETE, D::OPEN, DELETE_ON_CLOSE)
        .expect("DELETE comes from the parent");
    c.close(d);
    assert!(!c.server_sees(&["victim"]), "deleted");
}
