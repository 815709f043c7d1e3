//! Expected descriptors from smbtorture's `smb2.acls` suite (Samba 4.17,
//! source4/torture/smb2/acls.c, which encodes what Windows returns) and from
//! the rules in the module documentation.

use super::*;
use ringshare_wire::security::SE_DACL_AUTO_INHERIT_REQ;

// Rights as smbtorture names them (librpc/idl/security.idl).
const SEC_FILE_WRITE_DATA: u32 = 0x0000_0002;
const SEC_FILE_EXECUTE: u32 = 0x0000_0020;
const SEC_FILE_READ_ATTRIBUTE: u32 = 0x0000_0080;
const SEC_FILE_ALL: u32 = 0x0000_01FF;
const SEC_STD_DELETE: u32 = 0x0001_0000;
const SEC_STD_WRITE_DAC: u32 = 0x0004_0000;
const SEC_STD_ALL: u32 = 0x001F_0000;
const SEC_RIGHTS_FILE_READ: u32 = 0x0012_0089;

const OI: u8 = OBJECT_INHERIT_ACE;
const CI: u8 = CONTAINER_INHERIT_ACE;
const NP: u8 = NO_PROPAGATE_INHERIT_ACE;
const IO: u8 = INHERIT_ONLY_ACE;
const ID: u8 = INHERITED_ACE;

fn sid(s: &str) -> Sid {
    s.parse().unwrap()
}

/// The creating user (`owner_sid` in smbtorture).
fn owner() -> Sid {
    sid("S-1-5-21-1004336348-1177238915-682003330-1001")
}

/// The creating user's primary group.
fn group() -> Sid {
    sid("S-1-5-21-1004336348-1177238915-682003330-513")
}

fn m(bits: u32) -> AccessMask {
    AccessMask(bits)
}

/// A stored parent descriptor with this extra control and these ACEs.
fn parent(control: u16, aces: Vec<Ace>) -> SecurityDescriptor {
    SecurityDescriptor {
        control: SE_SELF_RELATIVE | SE_DACL_PRESENT | control,
        owner: Some(owner()),
        group: Some(group()),
        dacl: Some(Acl::new(aces)),
        ..Default::default()
    }
}

fn child(p: &SecurityDescriptor, is_dir: bool) -> Option<SecurityDescriptor> {
    child_descriptor(p, None, is_dir, &owner(), &group())
}

fn dacl_of(sd: &SecurityDescriptor) -> Vec<Ace> {
    sd.dacl.as_ref().map(|a| a.aces.clone()).unwrap_or_default()
}

fn world_all() -> Ace {
    Ace::allow(Sid::everyone(), m(SEC_FILE_ALL | SEC_STD_ALL), 0)
}

// ---------------------------------------------------------------------------
// smb2.acls.INHERITANCE

/// `test_flags` of smbtorture's test_inheritance: parent flags of a
/// CREATOR OWNER ACE, the flags a new file's ACE gets, the flags a new
/// directory's CREATOR OWNER ACE gets.
const INHERITANCE_TABLE: [(u8, u8, u8); 16] = [
    (0, 0, 0),
    (OI, 0, OI | IO),
    (CI, 0, CI),
    (OI | CI, 0, OI | CI),
    (NP, 0, 0),
    (NP | OI, 0, 0),
    (NP | CI, 0, 0),
    (NP | CI | OI, 0, 0),
    (IO, 0, 0),
    (IO | OI, 0, OI | IO),
    (IO | CI, 0, CI),
    (IO | CI | OI, 0, CI | OI),
    (IO | NP, 0, 0),
    (IO | NP | OI, 0, 0),
    (IO | NP | CI, 0, 0),
    (IO | NP | CI | OI, 0, 0),
];

#[test]
fn every_row_of_smbtorture_inheritance_gives_what_windows_gives() {
    let co = Sid::creator_owner();
    let wd = m(SEC_FILE_WRITE_DATA);
    for (i, (parent_flags, file_flags, dir_flags)) in INHERITANCE_TABLE.into_iter().enumerate() {
        // The parent's DACL as smbtorture sets it: no AUTO_INHERITED.
        let p = parent(
            0,
            vec![Ace::allow(co.clone(), wd, parent_flags), world_all()],
        );

        let file = child(&p, false);
        if parent_flags & OI == 0 {
            assert_eq!(file, None, "file, row {i}: Windows' default ACL");
        } else {
            let file = file.unwrap();
            assert_eq!(file.owner, Some(owner()), "row {i}");
            assert_eq!(
                dacl_of(&file),
                [Ace::allow(owner(), wd, file_flags)],
                "file, row {i}"
            );
        }

        let dir = child(&p, true);
        let ci = parent_flags & CI != 0;
        let np = parent_flags & NP != 0;
        let expected = if !ci && (parent_flags & OI == 0 || np) {
            None
        } else if ci && np {
            Some(vec![Ace::allow(owner(), wd, dir_flags)])
        } else if ci {
            Some(vec![
                Ace::allow(owner(), wd, 0),
                Ace::allow(co.clone(), wd, dir_flags | IO),
            ])
        } else {
            Some(vec![Ace::allow(co.clone(), wd, dir_flags)])
        };
        assert_eq!(dir.as_ref().map(dacl_of), expected, "directory, row {i}");
    }
}

#[test]
fn an_oi_ci_ace_on_a_directory_is_inherited_by_a_file_as_effective_only() {
    let p = parent(0, vec![Ace::allow(Sid::everyone(), m(0x1200A9), OI | CI)]);
    let file = child(&p, false).unwrap();
    assert_eq!(
        dacl_of(&file),
        [Ace::allow(Sid::everyone(), m(0x1200A9), 0)]
    );
}

#[test]
fn an_oi_ci_ace_without_creator_sids_or_generic_rights_is_one_effective_and_inheritable_ace_on_a_directory(
) {
    let p = parent(
        0,
        vec![Ace::allow(Sid::everyone(), m(0x1200A9), OI | CI | IO)],
    );
    let dir = child(&p, true).unwrap();
    assert_eq!(
        dacl_of(&dir),
        [Ace::allow(Sid::everyone(), m(0x1200A9), OI | CI)]
    );
}

#[test]
fn an_oi_only_ace_on_a_directory_becomes_inherit_only_for_the_subdirectory_and_is_not_mapped() {
    let p = parent(
        0,
        vec![Ace::allow(
            Sid::creator_owner(),
            AccessMask::GENERIC_ALL,
            OI,
        )],
    );
    let dir = child(&p, true).unwrap();
    assert_eq!(
        dacl_of(&dir),
        [Ace::allow(
            Sid::creator_owner(),
            AccessMask::GENERIC_ALL,
            OI | IO
        )]
    );
}

#[test]
fn a_ci_ace_naming_creator_owner_gives_a_directory_an_effective_owner_ace_then_an_inherit_only_creator_owner_ace(
) {
    let wd = m(SEC_FILE_WRITE_DATA);
    let p = parent(0, vec![Ace::allow(Sid::creator_owner(), wd, CI)]);
    let dir = child(&p, true).unwrap();
    assert_eq!(
        dacl_of(&dir),
        [
            Ace::allow(owner(), wd, 0),
            Ace::allow(Sid::creator_owner(), wd, CI | IO),
        ]
    );
}

#[test]
fn no_propagate_clears_the_inheritance_flags_on_the_child() {
    let wd = m(SEC_FILE_WRITE_DATA);
    let p = parent(0, vec![Ace::allow(Sid::everyone(), wd, NP | OI | CI)]);
    assert_eq!(
        dacl_of(&child(&p, true).unwrap()),
        [Ace::allow(Sid::everyone(), wd, 0)]
    );
    assert_eq!(
        dacl_of(&child(&p, false).unwrap()),
        [Ace::allow(Sid::everyone(), wd, 0)]
    );
    // NP|OI reaches files only; NP|CI directories only.
    let p = parent(0, vec![Ace::allow(Sid::everyone(), wd, NP | OI)]);
    assert_eq!(child(&p, true), None);
    assert!(child(&p, false).is_some());
    let p = parent(0, vec![Ace::allow(Sid::everyone(), wd, NP | CI)]);
    assert!(child(&p, true).is_some());
    assert_eq!(child(&p, false), None);
}

#[test]
fn a_parent_with_nothing_inheritable_for_this_kind_of_child_gives_none() {
    let wd = m(SEC_FILE_WRITE_DATA);
    let only_dirs = parent(0, vec![Ace::allow(owner(), wd, CI), world_all()]);
    assert_eq!(child(&only_dirs, false), None);
    assert!(!has_inheritable_aces(&only_dirs, false));
    assert!(has_inheritable_aces(&only_dirs, true));
    let nothing = parent(SE_DACL_AUTO_INHERITED, vec![world_all()]);
    assert_eq!(child(&nothing, true), None);
    assert_eq!(child(&nothing, false), None);
    assert!(inherited_aces(&nothing, true, &owner(), &group()).is_empty());
}

#[test]
fn a_parent_without_a_dacl_or_with_a_null_dacl_gives_none() {
    let mut p = parent(0, vec![]);
    p.dacl = None;
    assert_eq!(child(&p, false), None);
    p.control &= !SE_DACL_PRESENT;
    assert_eq!(child(&p, true), None);
    assert_eq!(child(&parent(0, vec![]), true), None);
}

#[test]
fn a_file_inherits_an_object_inherit_ace_for_the_owner_as_is() {
    // The second half of test_inheritance ("access checks on inherited
    // create"): the file gets exactly the owner's ACE, flags 0.
    let rights = m(SEC_FILE_WRITE_DATA | SEC_STD_WRITE_DAC);
    let p = parent(0, vec![Ace::allow(owner(), rights, OI), world_all()]);
    let file = child(&p, false).unwrap();
    assert_eq!(file.owner, Some(owner()));
    assert_eq!(file.group, Some(group()));
    assert_eq!(dacl_of(&file), [Ace::allow(owner(), rights, 0)]);
    assert_eq!(file.control, SE_SELF_RELATIVE | SE_DACL_PRESENT);
}

// ---------------------------------------------------------------------------
// smb2.acls.INHERITFLAGS and smb2.acls.DYNAMIC

#[test]
fn every_row_of_smbtorture_inheritflags_gives_what_windows_gives() {
    let rights = m(SEC_FILE_WRITE_DATA | SEC_STD_WRITE_DAC);
    for i in 0..16u16 {
        // What a GET of the parent returns after the SET of pass i: AUTO_INHERITED
        // survives only when the SET had AUTO_INHERITED|AUTO_INHERIT_REQ, the
        // request bit never, PROTECTED always.
        let mut stored = 0;
        if i & 3 == 3 {
            stored |= SE_DACL_AUTO_INHERITED;
        }
        if i & 4 != 0 {
            stored |= SE_DACL_PROTECTED;
        }
        let ace_inherited = if i & 8 != 0 { ID } else { 0 };
        let p = parent(
            stored,
            vec![
                Ace::allow(owner(), rights, OI | CI | ace_inherited),
                world_all(),
            ],
        );

        let parent_ai = stored & SE_DACL_AUTO_INHERITED != 0;
        let file = child(&p, false).unwrap();
        let want_control =
            SE_SELF_RELATIVE | SE_DACL_PRESENT | if parent_ai { SE_DACL_AUTO_INHERITED } else { 0 };
        assert_eq!(file.control, want_control, "pass {i}");
        assert_eq!(file.owner, Some(owner()), "pass {i}");
        let want_flags = if parent_ai { ID } else { 0 };
        assert_eq!(
            dacl_of(&file),
            [Ace::allow(owner(), rights, want_flags)],
            "pass {i}"
        );
    }
}

#[test]
fn auto_inherit_req_alone_on_a_parent_does_not_make_the_child_auto_inherited() {
    let p = parent(
        SE_DACL_AUTO_INHERIT_REQ,
        vec![Ace::allow(owner(), m(SEC_FILE_WRITE_DATA), OI)],
    );
    let file = child(&p, false).unwrap();
    assert_eq!(file.control & SE_DACL_AUTO_INHERITED, 0);
    assert_eq!(dacl_of(&file)[0].flags, 0);
}

#[test]
fn an_auto_inherited_parent_marks_every_inherited_ace_including_both_halves_of_a_split() {
    let wd = m(SEC_FILE_WRITE_DATA);
    let p = parent(
        SE_DACL_AUTO_INHERITED,
        vec![
            Ace::allow(Sid::creator_owner(), wd, OI | CI | IO),
            Ace::allow(Sid::everyone(), wd, OI),
        ],
    );
    assert_eq!(
        dacl_of(&child(&p, true).unwrap()),
        [
            Ace::allow(owner(), wd, ID),
            Ace::allow(Sid::creator_owner(), wd, OI | CI | IO | ID),
            Ace::allow(Sid::everyone(), wd, OI | IO | ID),
        ]
    );
}

#[test]
fn a_file_created_under_smbtorture_dynamic_gets_the_owner_ace_marked_inherited() {
    let rights = m(SEC_FILE_WRITE_DATA | SEC_STD_DELETE | SEC_FILE_READ_ATTRIBUTE);
    let p = parent(
        SE_DACL_AUTO_INHERITED,
        vec![Ace::allow(owner(), rights, OI)],
    );
    let file = child(&p, false).unwrap();
    assert_eq!(
        file.control,
        SE_SELF_RELATIVE | SE_DACL_PRESENT | SE_DACL_AUTO_INHERITED
    );
    assert_eq!(dacl_of(&file), [Ace::allow(owner(), rights, ID)]);
    // Write is in it, execute is not (the test's access checks).
    let mask = dacl_of(&file)[0].mask().unwrap();
    assert!(mask.contains(m(SEC_FILE_WRITE_DATA)));
    assert!(!mask.intersects(m(SEC_FILE_EXECUTE)));
}

#[test]
fn the_parents_own_inherited_flags_and_protection_do_not_carry_over() {
    let wd = m(SEC_FILE_WRITE_DATA);
    let p = parent(
        SE_DACL_PROTECTED,
        vec![Ace::allow(Sid::everyone(), wd, OI | CI | ID)],
    );
    let dir = child(&p, true).unwrap();
    assert_eq!(dir.control, SE_SELF_RELATIVE | SE_DACL_PRESENT);
    assert_eq!(dacl_of(&dir), [Ace::allow(Sid::everyone(), wd, OI | CI)]);
}

// ---------------------------------------------------------------------------
// CREATOR SIDs and generic rights

#[test]
fn the_windows_volume_default_acl_gives_files_and_directories_what_windows_shows() {
    // C:\ on Windows: SYSTEM and Administrators full control, CREATOR OWNER
    // GENERIC_ALL inherit-only, Users read & execute.
    let users = Sid::builtin_users();
    let admins = Sid::builtin_administrators();
    let system = Sid::local_system();
    let rx = m(0x1200A9);
    let fa = AccessMask::FILE_ALL_ACCESS;
    let p = parent(
        SE_DACL_AUTO_INHERITED,
        vec![
            Ace::allow(system.clone(), fa, OI | CI),
            Ace::allow(admins.clone(), fa, OI | CI),
            Ace::allow(Sid::creator_owner(), AccessMask::GENERIC_ALL, OI | CI | IO),
            Ace::allow(users.clone(), rx, OI | CI),
        ],
    );
    assert_eq!(
        dacl_of(&child(&p, false).unwrap()),
        [
            Ace::allow(system.clone(), fa, ID),
            Ace::allow(admins.clone(), fa, ID),
            Ace::allow(owner(), fa, ID),
            Ace::allow(users.clone(), rx, ID),
        ]
    );
    assert_eq!(
        dacl_of(&child(&p, true).unwrap()),
        [
            Ace::allow(system, fa, OI | CI | ID),
            Ace::allow(admins, fa, OI | CI | ID),
            Ace::allow(owner(), fa, ID),
            Ace::allow(
                Sid::creator_owner(),
                AccessMask::GENERIC_ALL,
                OI | CI | IO | ID
            ),
            Ace::allow(users, rx, OI | CI | ID),
        ]
    );
}

#[test]
fn generic_rights_are_mapped_in_the_effective_copy_and_kept_in_the_inherit_only_copy() {
    let gr_gx = AccessMask::GENERIC_READ | AccessMask::GENERIC_EXECUTE;
    let p = parent(0, vec![Ace::deny(Sid::everyone(), gr_gx, OI | CI)]);
    let mapped = FILE_GENERIC_READ | FILE_GENERIC_EXECUTE;
    assert_eq!(
        dacl_of(&child(&p, false).unwrap()),
        [Ace::deny(Sid::everyone(), mapped, 0)]
    );
    assert_eq!(
        dacl_of(&child(&p, true).unwrap()),
        [
            Ace::deny(Sid::everyone(), mapped, 0),
            Ace::deny(Sid::everyone(), gr_gx, OI | CI | IO),
        ]
    );
}

#[test]
fn creator_group_is_replaced_by_the_primary_group() {
    let p = parent(
        0,
        vec![Ace::allow(
            Sid::creator_group(),
            FILE_GENERIC_READ,
            OI | CI | IO,
        )],
    );
    assert_eq!(
        dacl_of(&child(&p, false).unwrap()),
        [Ace::allow(group(), FILE_GENERIC_READ, 0)]
    );
    assert_eq!(
        dacl_of(&child(&p, true).unwrap()),
        [
            Ace::allow(group(), FILE_GENERIC_READ, 0),
            Ace::allow(Sid::creator_group(), FILE_GENERIC_READ, OI | CI | IO),
        ]
    );
}

#[test]
fn a_no_propagate_ace_naming_creator_owner_is_one_mapped_ace_on_a_directory() {
    let p = parent(
        0,
        vec![Ace::allow(
            Sid::creator_owner(),
            AccessMask::GENERIC_WRITE,
            CI | NP,
        )],
    );
    assert_eq!(
        dacl_of(&child(&p, true).unwrap()),
        [Ace::allow(owner(), FILE_GENERIC_WRITE, 0)]
    );
}

#[test]
fn exact_duplicates_are_dropped_keeping_the_first() {
    let fa = AccessMask::FILE_ALL_ACCESS;
    let p = parent(
        0,
        vec![
            Ace::allow(owner(), fa, OI | CI),
            Ace::allow(Sid::creator_owner(), fa, OI | CI | IO),
            Ace::allow(Sid::everyone(), FILE_GENERIC_READ, OI),
            Ace::allow(Sid::everyone(), FILE_GENERIC_READ, OI),
        ],
    );
    assert_eq!(
        dacl_of(&child(&p, false).unwrap()),
        [
            Ace::allow(owner(), fa, 0),
            Ace::allow(Sid::everyone(), FILE_GENERIC_READ, 0),
        ]
    );
    assert_eq!(
        dacl_of(&child(&p, true).unwrap()),
        [
            Ace::allow(owner(), fa, OI | CI),
            Ace::allow(owner(), fa, 0),
            Ace::allow(Sid::creator_owner(), fa, OI | CI | IO),
            Ace::allow(Sid::everyone(), FILE_GENERIC_READ, OI | IO),
        ]
    );
}

#[test]
fn map_generic_file_rights_uses_the_file_mapping_and_keeps_other_bits() {
    let cases = [
        (0, 0),
        (0x8000_0000, 0x0012_0089),
        (0x4000_0000, 0x0012_0116),
        (0x2000_0000, 0x0012_00A0),
        (0x1000_0000, 0x001F_01FF),
        (0xA000_0000, 0x0012_00A9),
        (0x8000_0040, 0x0012_00C9),
        (0x0300_0001, 0x0300_0001),
        (0xF000_0000, 0x001F_01FF),
    ];
    for (generic, specific) in cases {
        assert_eq!(
            map_generic_file_rights(m(generic)),
            m(specific),
            "{generic:#x}"
        );
    }
}

#[test]
fn is_inheritable_matches_sambas_rule_for_every_flag_combination() {
    for flags in 0..=u8::MAX {
        let ace = Ace::allow(Sid::everyone(), m(1), flags);
        let oi = flags & OI != 0;
        let ci = flags & CI != 0;
        let np = flags & NP != 0;
        assert_eq!(is_inheritable(&ace, false), oi, "{flags:#x}");
        assert_eq!(is_inheritable(&ace, true), ci || (oi && !np), "{flags:#x}");
    }
}

#[test]
fn audit_flags_and_callback_data_are_kept_in_inherited_aces() {
    let ace = Ace {
        ace_type: AceType::ACCESS_ALLOWED_CALLBACK,
        flags: OI | CI | 0x40,
        body: AceBody::MaskSid {
            mask: AccessMask::GENERIC_READ,
            sid: Sid::creator_owner(),
            trailer: b"artx".to_vec(),
        },
    };
    let p = parent(0, vec![ace]);
    let got = dacl_of(&child(&p, true).unwrap());
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].flags, 0x40);
    assert_eq!(
        got[0].body,
        AceBody::MaskSid {
            mask: FILE_GENERIC_READ,
            sid: owner(),
            trailer: b"artx".to_vec(),
        }
    );
    assert_eq!(got[1].flags, OI | CI | IO | 0x40);
    assert_eq!(got[1].sid(), Some(&Sid::creator_owner()));
}

#[test]
fn object_aces_follow_the_flag_rules_untouched_and_make_a_revision_4_acl() {
    let raw = Ace {
        ace_type: AceType::ACCESS_ALLOWED_OBJECT,
        flags: OI | CI | IO,
        body: AceBody::Raw(vec![
            0, 0, 0, 0x10, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0,
        ]),
    };
    let p = parent(0, vec![raw.clone()]);
    let dir = child(&p, true).unwrap();
    let acl = dir.dacl.unwrap();
    assert_eq!(acl.revision, Acl::REVISION_DS);
    assert_eq!(
        acl.aces,
        [Ace {
            flags: OI | CI,
            ..raw.clone()
        }]
    );
    let file = child(&p, false).unwrap();
    assert_eq!(file.dacl.unwrap().aces, [Ace { flags: 0, ..raw }]);
    // Without object ACEs the child's ACL is revision 2, whatever the parent's.
    let mut p = parent(0, vec![Ace::allow(Sid::everyone(), m(1), OI)]);
    if let Some(acl) = p.dacl.as_mut() {
        acl.revision = 4;
    }
    assert_eq!(
        child(&p, false).unwrap().dacl.unwrap().revision,
        Acl::REVISION
    );
}

#[test]
fn the_child_descriptor_encodes_and_decodes_to_itself() {
    let p = parent(
        SE_DACL_AUTO_INHERITED,
        vec![
            Ace::allow(Sid::creator_owner(), AccessMask::GENERIC_ALL, OI | CI | IO),
            Ace::allow(Sid::everyone(), FILE_GENERIC_READ, OI | CI),
        ],
    );
    for is_dir in [false, true] {
        let sd = child(&p, is_dir).unwrap();
        let bytes = sd.to_bytes(SecurityDescriptor::all_parts()).unwrap();
        assert_eq!(SecurityDescriptor::decode(&bytes).unwrap(), sd);
    }
}

// ---------------------------------------------------------------------------
// A descriptor supplied by the creator

fn creator(control: u16, aces: Option<Vec<Ace>>) -> SecurityDescriptor {
    SecurityDescriptor {
        control: SE_SELF_RELATIVE | control,
        dacl: aces.map(Acl::new),
        ..Default::default()
    }
}

fn with_creator(
    p: &SecurityDescriptor,
    c: &SecurityDescriptor,
    is_dir: bool,
) -> Option<SecurityDescriptor> {
    child_descriptor(p, Some(c), is_dir, &owner(), &group())
}

fn read_everyone(flags: u8) -> Ace {
    Ace::allow(Sid::everyone(), FILE_GENERIC_READ, flags)
}

#[test]
fn a_creator_dacl_comes_first_and_the_inherited_aces_follow() {
    let p = parent(SE_DACL_AUTO_INHERITED, vec![read_everyone(OI | CI)]);
    let auth = Ace::allow(Sid::authenticated_users(), m(SEC_STD_ALL), 0);
    // What a client sends after reading a file's descriptor and adding an
    // ACE (smb2.create.aclfile): the old inherited ACE, then its own.
    let c = creator(
        SE_DACL_PRESENT | SE_DACL_AUTO_INHERITED,
        Some(vec![read_everyone(ID), auth.clone()]),
    );
    let file = with_creator(&p, &c, false).unwrap();
    assert_eq!(dacl_of(&file), [auth, read_everyone(ID)]);
    assert_eq!(
        file.control,
        SE_SELF_RELATIVE | SE_DACL_PRESENT | SE_DACL_AUTO_INHERITED
    );
}

#[test]
fn a_protected_creator_dacl_is_used_alone_with_its_inherited_flags_cleared() {
    let p = parent(SE_DACL_AUTO_INHERITED, vec![read_everyone(OI | CI)]);
    let auth = Ace::allow(Sid::authenticated_users(), m(SEC_STD_ALL), 0);
    let c = creator(
        SE_DACL_PRESENT | SE_DACL_PROTECTED,
        Some(vec![read_everyone(ID), auth.clone()]),
    );
    let dir = with_creator(&p, &c, true).unwrap();
    assert_eq!(dacl_of(&dir), [read_everyone(0), auth]);
    assert_eq!(
        dir.control,
        SE_SELF_RELATIVE | SE_DACL_PRESENT | SE_DACL_AUTO_INHERITED | SE_DACL_PROTECTED
    );
    // An empty protected DACL gives an empty DACL: no access for anyone.
    let c = creator(SE_DACL_PRESENT | SE_DACL_PROTECTED, Some(vec![]));
    let dir = with_creator(&p, &c, true).unwrap();
    assert_eq!(dir.dacl, Some(Acl::new(vec![])));
}

#[test]
fn a_creator_descriptor_without_a_dacl_inherits_and_its_owner_replaces_creator_owner() {
    let fa = AccessMask::FILE_ALL_ACCESS;
    let p = parent(0, vec![Ace::allow(Sid::creator_owner(), fa, OI | CI | IO)]);
    let someone = sid("S-1-5-21-1004336348-1177238915-682003330-1105");
    let c = SecurityDescriptor {
        control: SE_SELF_RELATIVE,
        owner: Some(someone.clone()),
        ..Default::default()
    };
    let file = with_creator(&p, &c, false).unwrap();
    assert_eq!(file.owner, Some(someone.clone()));
    assert_eq!(file.group, Some(group()));
    assert_eq!(dacl_of(&file), [Ace::allow(someone, fa, 0)]);
    // With nothing to inherit there is nothing to compute.
    let p = parent(0, vec![world_all()]);
    assert_eq!(with_creator(&p, &c, false), None);
    // A DACL pointer without SE_DACL_PRESENT is no DACL.
    let c = creator(0, Some(vec![world_all()]));
    assert_eq!(with_creator(&p, &c, false), None);
}

#[test]
fn a_creator_dacl_owner_and_group_are_kept_when_the_parent_has_nothing_to_inherit() {
    // raw.acls.create_owner_file / smb2.create.aclfile "creating with
    // attributes, ACL and owner".
    let p = parent(0, vec![world_all()]);
    let acl = vec![Ace::allow(
        Sid::everyone(),
        m(SEC_RIGHTS_FILE_READ | SEC_STD_ALL),
        0,
    )];
    let c = SecurityDescriptor {
        control: SE_SELF_RELATIVE | SE_DACL_PRESENT,
        owner: Some(Sid::everyone()),
        group: Some(Sid::builtin_users()),
        dacl: Some(Acl::new(acl.clone())),
        ..Default::default()
    };
    for is_dir in [false, true] {
        let sd = with_creator(&p, &c, is_dir).unwrap();
        assert_eq!(sd.owner, Some(Sid::everyone()));
        assert_eq!(sd.group, Some(Sid::builtin_users()));
        assert_eq!(dacl_of(&sd), acl);
        assert_eq!(sd.control, SE_SELF_RELATIVE | SE_DACL_PRESENT);
    }
}

#[test]
fn a_creator_null_dacl_stays_a_null_dacl() {
    let p = parent(SE_DACL_AUTO_INHERITED, vec![read_everyone(OI | CI)]);
    let c = creator(SE_DACL_PRESENT, None);
    let sd = with_creator(&p, &c, false).unwrap();
    assert!(sd.has_null_dacl());
}

#[test]
fn creator_aces_that_apply_to_nothing_are_dropped() {
    let p = parent(0, vec![]);
    let c = creator(
        SE_DACL_PRESENT,
        Some(vec![
            Ace::allow(Sid::everyone(), m(1), IO),
            Ace::allow(Sid::everyone(), m(2), IO | NP),
            Ace::allow(Sid::everyone(), m(4), IO | OI),
        ]),
    );
    assert_eq!(
        dacl_of(&with_creator(&p, &c, true).unwrap()),
        [Ace::allow(Sid::everyone(), m(4), IO | OI)]
    );
}

#[test]
fn a_creator_ace_with_generic_information_is_mapped_on_a_file_and_split_on_a_directory() {
    let p = parent(0, vec![]);
    let ga = AccessMask::GENERIC_ALL;
    let fa = AccessMask::FILE_ALL_ACCESS;
    let c = creator(
        SE_DACL_PRESENT,
        Some(vec![
            Ace::allow(Sid::creator_owner(), ga, OI | CI),
            Ace::allow(Sid::everyone(), AccessMask::GENERIC_READ, 0),
            Ace::allow(Sid::creator_group(), ga, IO | OI),
        ]),
    );
    assert_eq!(
        dacl_of(&with_creator(&p, &c, false).unwrap()),
        [
            Ace::allow(owner(), fa, 0),
            Ace::allow(Sid::everyone(), FILE_GENERIC_READ, 0),
            Ace::allow(Sid::creator_group(), ga, IO | OI),
        ]
    );
    assert_eq!(
        dacl_of(&with_creator(&p, &c, true).unwrap()),
        [
            Ace::allow(Sid::creator_owner(), ga, OI | CI | IO),
            Ace::allow(owner(), fa, 0),
            Ace::allow(Sid::everyone(), FILE_GENERIC_READ, 0),
            Ace::allow(Sid::creator_group(), ga, IO | OI),
        ]
    );
}

#[test]
fn a_creator_sacl_is_kept_as_given() {
    let p = parent(0, vec![read_everyone(OI)]);
    let audit = Ace {
        ace_type: AceType::SYSTEM_AUDIT,
        flags: 0x80,
        body: AceBody::MaskSid {
            mask: AccessMask::DELETE,
            sid: Sid::everyone(),
            trailer: Vec::new(),
        },
    };
    let c = SecurityDescriptor {
        control: SE_SELF_RELATIVE | SE_SACL_PRESENT | SE_SACL_PROTECTED,
        sacl: Some(Acl::new(vec![audit.clone()])),
        ..Default::default()
    };
    let sd = with_creator(&p, &c, false).unwrap();
    assert_eq!(sd.sacl, Some(Acl::new(vec![audit])));
    assert_eq!(
        sd.control,
        SE_SELF_RELATIVE | SE_DACL_PRESENT | SE_SACL_PRESENT | SE_SACL_PROTECTED
    );
    assert_eq!(dacl_of(&sd), [read_everyone(0)]);
}

// ---------------------------------------------------------------------------
// Any input

/// xorshift64: reproducible pseudo-random input without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn random_ace(r: &mut Rng) -> Ace {
    let sids = [
        Sid::creator_owner(),
        Sid::creator_group(),
        Sid::everyone(),
        owner(),
        Sid::unix_user(7),
    ];
    let flags = r.next() as u8;
    match r.below(6) {
        0 => Ace {
            ace_type: AceType::ACCESS_ALLOWED_OBJECT,
            flags,
            body: AceBody::Raw(vec![r.next() as u8; 4 * r.below(10) as usize]),
        },
        t => {
            let mask = AccessMask(r.next() as u32);
            let sid = sids[r.below(sids.len() as u64) as usize].clone();
            let mut ace = Ace::allow(sid, mask, flags);
            if t == 1 {
                ace.ace_type = AceType::ACCESS_DENIED;
            }
            ace
        }
    }
}

fn random_sd(r: &mut Rng) -> SecurityDescriptor {
    let n = r.below(12) as usize;
    let aces = (0..n).map(|_| random_ace(r)).collect();
    SecurityDescriptor {
        control: r.next() as u16,
        owner: (r.below(2) == 0).then(|| Sid::unix_user(r.next() as u32)),
        group: (r.below(2) == 0).then(|| Sid::unix_group(r.next() as u32)),
        dacl: (r.below(4) != 0).then(|| Acl::new(aces)),
        sacl: (r.below(4) == 0).then(|| Acl::new(vec![random_ace(r)])),
        rm_control: 0,
    }
}

#[test]
fn any_parent_and_creator_give_a_descriptor_that_keeps_the_rules() {
    let mut r = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..5000 {
        let p = random_sd(&mut r);
        let c = random_sd(&mut r);
        let creator = (r.below(2) == 0).then_some(&c);
        for is_dir in [false, true] {
            let got = child_descriptor(&p, creator, is_dir, &owner(), &group());
            let creator_dacl = creator.is_some_and(|c| c.control & SE_DACL_PRESENT != 0);
            if !creator_dacl {
                assert_eq!(got.is_some(), has_inheritable_aces(&p, is_dir));
            }
            let Some(sd) = got else { continue };
            assert!(sd.owner.is_some() && sd.group.is_some());
            assert_eq!(
                sd.control & SE_DACL_AUTO_INHERITED,
                p.control & SE_DACL_AUTO_INHERITED
            );
            let bytes = sd.to_bytes(SecurityDescriptor::all_parts()).unwrap();
            assert_eq!(SecurityDescriptor::decode(&bytes).unwrap(), sd);
            if creator_dacl {
                continue;
            }
            let mark = if p.control & SE_DACL_AUTO_INHERITED != 0 {
                ID
            } else {
                0
            };
            for ace in dacl_of(&sd) {
                assert_eq!(ace.flags & ID, mark);
                if !is_dir {
                    assert_eq!(ace.flags & (OI | CI | NP | IO), 0);
                }
                let effective = ace.flags & IO == 0;
                if let (true, AceBody::MaskSid { mask, sid, .. }) = (effective, &ace.body) {
                    assert!(!mask.intersects(AccessMask::GENERIC_MASK));
                    assert!(*sid != Sid::creator_owner() && *sid != Sid::creator_group());
                }
            }
        }
    }
}

#[test]
fn decoded_garbage_never_makes_child_descriptor_panic() {
    let mut r = Rng(42);
    let good = parent(
        SE_DACL_AUTO_INHERITED,
        vec![
            Ace::allow(Sid::creator_owner(), AccessMask::GENERIC_ALL, OI | CI | IO),
            read_everyone(OI | CI),
        ],
    )
    .to_bytes(SecurityDescriptor::all_parts())
    .unwrap();
    for _ in 0..20_000 {
        let mut bytes = good.clone();
        for _ in 0..=r.below(4) {
            let i = r.below(bytes.len() as u64) as usize;
            bytes[i] = r.next() as u8;
        }
        if let Ok(sd) = SecurityDescriptor::decode(&bytes) {
            for is_dir in [false, true] {
                let _ = child_descriptor(&sd, Some(&sd), is_dir, &owner(), &group());
                let _ = child_descriptor(&sd, None, is_dir, &owner(), &group());
            }
        }
    }
}

// ---------------------------------------------------------------------------
// What Debian's Samba 4.17.12 (`vfs objects = acl_xattr`) stored for a new
// directory and file, read back with `smbcacls --numeric`. The owner and
// group are the creating user's SIDs in Samba's passdb.

/// Parses `SID:0/FLAGS/MASK` lines as smbcacls prints allow ACEs.
fn smbcacls_aces(lines: &[&str]) -> Vec<Ace> {
    lines
        .iter()
        .map(|l| {
            let (sid_part, rest) = l.split_once(':').unwrap();
            let mut f = rest.split('/');
            assert_eq!(f.next(), Some("0"), "allow ACEs only");
            let flags = u8::from_str_radix(f.next().unwrap().trim_start_matches("0x"), 16).unwrap();
            let mask = u32::from_str_radix(f.next().unwrap().trim_start_matches("0x"), 16).unwrap();
            Ace::allow(sid(sid_part), m(mask), flags)
        })
        .collect()
}

fn samba_case(control: u16, parent_aces: &[&str], user: &str, dir: &[&str], file: &[&str]) {
    let p = SecurityDescriptor {
        control,
        owner: Some(Sid::unix_user(1008)),
        group: Some(Sid::unix_group(1008)),
        dacl: Some(Acl::new(smbcacls_aces(parent_aces))),
        ..Default::default()
    };
    let owner = sid(&format!("{user}-1000"));
    let group = sid(&format!("{user}-513"));
    for (is_dir, want) in [(true, dir), (false, file)] {
        let got = child_descriptor(&p, None, is_dir, &owner, &group).unwrap();
        assert_eq!(got.control, control, "is_dir {is_dir}");
        assert_eq!(got.owner.as_ref(), Some(&owner));
        assert_eq!(got.group.as_ref(), Some(&group));
        assert_eq!(dacl_of(&got), smbcacls_aces(want), "is_dir {is_dir}");
    }
}

#[test]
fn samba_4_17_gives_the_same_children_of_a_parent_without_auto_inherit() {
    let u = "S-1-5-21-373269135-4113033292-2337866486";
    samba_case(
        0x8004,
        &[
            "S-1-1-0:0/0x3/0x001200a9",
            "S-1-3-0:0/0xb/0x001f01ff",
            "S-1-22-1-1008:0/0x3/0x001f01ff",
        ],
        u,
        &[
            "S-1-1-0:0/0x3/0x001200a9",
            &format!("{u}-1000:0/0x0/0x001f01ff"),
            "S-1-3-0:0/0xb/0x001f01ff",
            "S-1-22-1-1008:0/0x3/0x001f01ff",
        ],
        &[
            "S-1-1-0:0/0x0/0x001200a9",
            &format!("{u}-1000:0/0x0/0x001f01ff"),
            "S-1-22-1-1008:0/0x0/0x001f01ff",
        ],
    );
}

#[test]
fn samba_4_17_gives_the_same_children_of_a_directory_showing_its_posix_permissions() {
    // A directory without a stored descriptor: Samba shows its mode plus the
    // CREATOR OWNER / CREATOR GROUP / Everyone ACEs acl_xattr adds.
    let u = "S-1-5-21-373269135-4113033292-2337866486";
    let owner_fa = format!("{u}-1000:0/0x0/0x001f01ff");
    let group_rx = format!("{u}-513:0/0x0/0x001200a9");
    samba_case(
        0x8004,
        &[
            &owner_fa,
            "S-1-3-0:0/0xb/0x001f01ff",
            &group_rx,
            "S-1-3-1:0/0xb/0x001200a9",
            "S-1-1-0:0/0x3/0x001200a9",
        ],
        u,
        &[
            &owner_fa,
            "S-1-3-0:0/0xb/0x001f01ff",
            &group_rx,
            "S-1-3-1:0/0xb/0x001200a9",
            "S-1-1-0:0/0x3/0x001200a9",
        ],
        &[&owner_fa, &group_rx, "S-1-1-0:0/0x0/0x001200a9"],
    );
}

#[test]
fn samba_4_17_gives_the_same_children_of_an_auto_inherited_parent_and_drops_the_duplicate() {
    // Set as SDDL D:ARAI(A;;FA;;;S-1-22-1-1008)(A;OICIIO;GA;;;CO)(A;OI;0x2;;;WD)
    // (A;CI;FR;;;CG)(A;OICIID;0x1200a9;;;BU)(A;OICI;0x1200a9;;;BU); Samba
    // stored it mapped and reordered as below, with control 0x8404.
    let u = "S-1-5-21-4131634663-1799446567-4026406417";
    let dir = [
        "S-1-1-0:0/0x19/0x00000002",
        &format!("{u}-1000:0/0x10/0x001f01ff"),
        "S-1-3-0:0/0x1b/0x001f01ff",
        &format!("{u}-513:0/0x10/0x00120089"),
        "S-1-3-1:0/0x1a/0x00120089",
        "S-1-5-32-545:0/0x13/0x001200a9",
    ];
    samba_case(
        0x8404,
        &[
            "S-1-1-0:0/0x1/0x00000002",
            "S-1-3-0:0/0xb/0x001f01ff",
            "S-1-3-1:0/0x2/0x00120089",
            "S-1-5-32-545:0/0x3/0x001200a9",
            "S-1-22-1-1008:0/0x0/0x000001ff",
            "S-1-5-32-545:0/0x13/0x001200a9",
        ],
        u,
        &dir,
        &[
            "S-1-1-0:0/0x10/0x00000002",
            &format!("{u}-1000:0/0x10/0x001f01ff"),
            "S-1-5-32-545:0/0x10/0x001200a9",
        ],
    );
    // A grandchild directory gets the same again.
    let p = SecurityDescriptor {
        control: 0x8404,
        dacl: Some(Acl::new(smbcacls_aces(&dir))),
        ..Default::default()
    };
    let (owner, group) = (sid(&format!("{u}-1000")), sid(&format!("{u}-513")));
    let got = child_descriptor(&p, None, true, &owner, &group).unwrap();
    assert_eq!(dacl_of(&got), smbcacls_aces(&dir));
}
