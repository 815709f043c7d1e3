//! CREATE's request checked before the file system is asked anything: its
//! fields ([MS-SMB2] 2.2.13, 3.3.5.9), its name and stream ("Path Name
//! Validation"), and its contexts (3.3.5.9.1-3.3.5.9.3, 3.3.5.9.8,
//! 3.3.5.9.11, AAPL).

use ringshare_vfs::RelPath;
use ringshare_wire::consts::CreateDisposition;
use ringshare_wire::create::{ContextTag, CreateRequest, Lease};
use ringshare_wire::security::SecurityDescriptor;
use ringshare_wire::NtStatus;

use super::durable;
use super::TreeView;
use crate::exchange::ConnCore;
use crate::fileinfo::SETTABLE_ATTRIBUTES;
use crate::files::access::{self, DELETE};
use crate::files::oplock::{self, LeaseId};
use crate::fruit::{Aapl, Fruit};
use crate::path::{parse_create_name, StreamPart};

const OPT_DIRECTORY_FILE: u32 = 0x0000_0001;
const OPT_NON_DIRECTORY_FILE: u32 = 0x0000_0040;
const OPT_DELETE_ON_CLOSE: u32 = 0x0000_1000;
const OPT_OPEN_BY_FILE_ID: u32 = 0x0000_2000;
const OPT_RESERVE_OPFILTER: u32 = 0x0010_0000;
/// Options with bits 24-31 set are invalid ([MS-SMB2] 2.2.13: reserved).
const OPT_INVALID: u32 = 0xFF00_0000;

/// What a CREATE asks for, checked: everything later steps take from the
/// request.
#[derive(Clone)]
pub(super) struct Asked {
    pub disposition: CreateDisposition,
    /// CreateOptions.
    pub options: u32,
    pub share_access: u32,
    pub want_dir: bool,
    pub want_file: bool,
    /// The name as parsed (not yet resolved on the share).
    pub path: RelPath,
    /// `file:stream`: the stream's name as given.
    pub named: Option<String>,
    /// The AAPL answer and what it turns on, on a `fruit` share.
    /// (Boxed, as the SecD: rare, and an `Asked` moves several times per CREATE.)
    pub aapl: Option<Box<(Vec<u8>, Aapl)>>,
    /// SecD: the descriptor a new file gets.
    pub sd_given: Option<Box<SecurityDescriptor>>,
    /// DesiredAccess granted against the tree's MaximalAccess.
    pub granted: u32,
    /// DesiredAccess with generic rights mapped, MAXIMUM_ALLOWED left out.
    pub explicit: u32,
    /// MAXIMUM_ALLOWED was asked.
    pub maximum: bool,
    /// The MxAc context was sent.
    pub mxac: bool,
    pub delete_on_close: bool,
    /// ExtA: the EAs a new or overwritten file gets.
    pub eas_given: Option<Vec<(String, Vec<u8>)>>,
    /// AlSi: the allocation a new or overwritten file starts with.
    pub alloc_given: Option<u64>,
    /// The oplock level asked for (none when a lease was asked without RqLs).
    pub requested: u8,
    pub lease_req: Option<Lease>,
    pub lease_id: Option<LeaseId>,
    /// SUPERSEDE, OVERWRITE or OVERWRITE_IF.
    pub truncate: bool,
    /// FileAttributes a new or overwritten file gets.
    pub attrs_asked: u32,
    /// What the durable-handle contexts ask.
    pub durable: durable::Ask,
    /// The POSIX context's wire mode: a POSIX open ([`crate::cmd::posix`]).
    pub posix: Option<u32>,
}

/// Check a CREATE's fields, name and contexts, in the order their errors
/// win ([MS-SMB2] 3.3.5.9, [MS-FSA] 2.1.5.1): options, AAPL, the name and
/// its stream, then SecD, the access asked, ExtA, AlSi and RqLs.
pub(super) fn check(
    core: &ConnCore,
    cr: &CreateRequest<'_>,
    tree: &TreeView,
    durable: durable::Ask,
) -> Result<Asked, NtStatus> {
    let (want_dir, want_file) = check_fields(cr)?;
    let share = &tree.share;
    // AAPL (Apple's context, on a `fruit` share): every CREATE carrying it
    // is answered, as Samba does ([`crate::fruit`]).
    let aapl = match (&share.fruit, cr.context(ContextTag::Aapl)) {
        (Some(f), Some(c)) if f.aapl => Some(Box::new(crate::fruit::server_query(
            f,
            &c.data,
            share.has_streams(),
        )?)),
        _ => None,
    };
    let fruit = share.fruit.as_deref();
    // The POSIX context counts on a connection that negotiated the extensions, on a share
    // with `smb3 unix extensions` (as Samba); 4 bytes exactly, else INVALID_PARAMETER.
    let posix = match cr.context(ContextTag::Posix) {
        Some(c)
            if share.smb3_unix_extensions && core.negotiated.as_ref().is_some_and(|n| n.posix) =>
        {
            Some(
                ringshare_wire::posix::decode_create_mode(&c.data)
                    .map_err(|_| NtStatus::INVALID_PARAMETER)?,
            )
        }
        _ => None,
    };
    let name = match posix {
        // A POSIX name: any character but `/` and NUL, no stream part.
        Some(_) => {
            dir_disposition(cr, want_dir)?;
            Name {
                path: crate::path::parse_posix_path(&cr.name)?,
                stream: None,
                want_file,
            }
        }
        None => parse_name(cr, share.has_streams(), fruit, want_dir, want_file)?,
    };
    // SecD: the security descriptor a new file gets ([MS-SMB2] 2.2.13.2.2).
    let sd_given = cr
        .context(ContextTag::SdBuffer)
        .map(|c| SecurityDescriptor::decode(&c.data).map(Box::new))
        .transpose()
        .map_err(|_| NtStatus::INVALID_SECURITY_DESCR)?;
    let granted = access::granted_access(cr.desired_access.0, tree.maximal)?;
    let explicit = access::map_generic(cr.desired_access.0 & !access::MAXIMUM_ALLOWED);
    let options = cr.create_options.0;
    let delete_on_close = options & OPT_DELETE_ON_CLOSE != 0;
    if delete_on_close && granted & DELETE == 0 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // ExtA: the extended attributes a new or overwritten file gets ([MS-SMB2]
    // 2.2.13.2.1), checked before anything changes.
    let eas_given = cr
        .context(ContextTag::EaBuffer)
        .map(|c| crate::cmd::query_info::parse_eas(&c.data))
        .transpose()?;
    // AlSi: the allocation a new or overwritten file starts with ([MS-SMB2] 2.2.13.2.6).
    let alloc_given = cr
        .context(ContextTag::AllocationSize)
        .map(|c| ringshare_wire::create::decode_u64_context(&c.data))
        .transpose()
        .map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let (requested, lease_req) = lease_asked(cr, core.dialect().map_or(0, |d| d.0))?;
    let lease_id = lease_req.as_ref().map(|l| LeaseId {
        client_guid: super::client_guid(core),
        key: l.key,
    });
    let disposition = cr.create_disposition;
    Ok(Asked {
        disposition,
        options,
        share_access: cr.share_access.0,
        want_dir,
        want_file: name.want_file,
        path: name.path,
        named: name.stream,
        aapl,
        sd_given,
        granted,
        explicit,
        maximum: cr.desired_access.0 & access::MAXIMUM_ALLOWED != 0,
        mxac: cr.context(ContextTag::QueryMaximalAccess).is_some(),
        delete_on_close,
        eas_given,
        alloc_given,
        requested,
        lease_req,
        lease_id,
        truncate: matches!(
            disposition,
            CreateDisposition::SUPERSEDE
                | CreateDisposition::OVERWRITE
                | CreateDisposition::OVERWRITE_IF
        ),
        attrs_asked: cr.file_attributes.0 & SETTABLE_ATTRIBUTES,
        durable,
        posix,
    })
}

/// The request's fixed fields ([MS-SMB2] 2.2.13, 3.3.5.9; [MS-FSA]
/// 2.1.5.1): ImpersonationLevel, CreateDisposition, ShareAccess and
/// CreateOptions. Returns whether the options ask for a directory and for a
/// non-directory.
fn check_fields(cr: &CreateRequest<'_>) -> Result<(bool, bool), NtStatus> {
    let options = cr.create_options.0;
    if cr.impersonation_level.0 > 3 {
        return Err(NtStatus::BAD_IMPERSONATION_LEVEL);
    }
    if cr.create_disposition.0 > CreateDisposition::OVERWRITE_IF.0
        || cr.share_access.0 & !7 != 0
        || options & OPT_INVALID != 0
    {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if options & (OPT_RESERVE_OPFILTER | OPT_OPEN_BY_FILE_ID) != 0 {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    let want_dir = options & OPT_DIRECTORY_FILE != 0;
    let want_file = options & OPT_NON_DIRECTORY_FILE != 0;
    if want_dir && want_file {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    Ok((want_dir, want_file))
}

/// A CREATE's name, parsed.
struct Name {
    path: RelPath,
    /// The named stream, if the name has one.
    stream: Option<String>,
    /// The open must be of a non-directory (asked, or `name::$DATA`).
    want_file: bool,
}

/// Parse the name and its stream part ([MS-SMB2] 3.3.5.9 "Path Name
/// Validation", [MS-FSA] 2.1.5.1): `file:stream` opens (or makes) the file
/// first and the stream in it; a directory has no data streams, and is only
/// opened or created.
fn parse_name(
    cr: &CreateRequest<'_>,
    has_streams: bool,
    fruit: Option<&Fruit>,
    want_dir: bool,
    mut want_file: bool,
) -> Result<Name, NtStatus> {
    let (path, stream) = parse_create_name(&cr.name, has_streams)?;
    let named = match stream {
        StreamPart::Named(n) => Some(n),
        // `name::$DATA` is the file itself, never a directory ([MS-FSA]
        // 2.1.5.1: a directory has no default data stream).
        StreamPart::Default if want_dir => return Err(NtStatus::NOT_A_DIRECTORY),
        StreamPart::Default => {
            want_file = true;
            None
        }
        StreamPart::None => None,
    };
    if named.is_some() && want_dir {
        return Err(NtStatus::NOT_A_DIRECTORY);
    }
    if let (Some(n), Some(f)) = (&named, fruit) {
        crate::fruit::check_afp_stream(f, n)?;
    }
    dir_disposition(cr, want_dir)?;
    Ok(Name {
        path,
        stream: named,
        want_file,
    })
}

/// A directory is only opened or created ([MS-FSA] 2.1.5.1).
fn dir_disposition(cr: &CreateRequest<'_>, want_dir: bool) -> Result<(), NtStatus> {
    if want_dir
        && !matches!(
            cr.create_disposition,
            CreateDisposition::OPEN | CreateDisposition::CREATE | CreateDisposition::OPEN_IF
        )
    {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    Ok(())
}

/// The oplock level and lease a CREATE asks for ([MS-SMB2] 3.3.5.9.8,
/// 3.3.5.9.11): leases from 2.1 on, version 2 from 3.0 on; a lease level
/// without a lease context (or before 2.1) asks for no oplock.
fn lease_asked(cr: &CreateRequest<'_>, dialect: u16) -> Result<(u8, Option<Lease>), NtStatus> {
    let mut requested = cr.requested_oplock_level.0;
    let lease_req = if requested == oplock::LEVEL_LEASE {
        match cr.context(ContextTag::RequestLease) {
            Some(c) if dialect >= 0x0210 => {
                let mut l = Lease::decode(&c.data).map_err(|_| NtStatus::INVALID_PARAMETER)?;
                if dialect < 0x0300 {
                    l.v2 = None;
                }
                Some(l)
            }
            _ => None,
        }
    } else {
        None
    };
    if requested == oplock::LEVEL_LEASE && lease_req.is_none() {
        requested = oplock::LEVEL_NONE;
    }
    Ok((requested, lease_req))
}

impl Asked {
    /// The CREATE gives the new file a DACL of its own (a SecD context with
    /// SE_DACL_PRESENT): it inherits none from its parent.
    pub(super) fn dacl_given(&self) -> bool {
        self.sd_given
            .as_ref()
            .is_some_and(|sd| sd.control & ringshare_wire::security::SE_DACL_PRESENT != 0)
    }
}

#[cfg(test)]
impl Asked {
    /// A request for `explicit` access and nothing else, for tests of the
    /// later steps.
    pub(super) fn plain(disposition: CreateDisposition, explicit: u32) -> Asked {
        Asked {
            disposition,
            options: 0,
            share_access: 7,
            want_dir: false,
            want_file: false,
            path: RelPath::root(),
            named: None,
            aapl: None,
            sd_given: None,
            granted: explicit,
            explicit,
            maximum: false,
            mxac: false,
            delete_on_close: false,
            eas_given: None,
            alloc_given: None,
            requested: 0,
            lease_req: None,
            lease_id: None,
            truncate: false,
            attrs_asked: 0,
            durable: durable::Ask::None,
            posix: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringshare_wire::consts::{
        AccessMask, CreateOptions, FileAttributes, ImpersonationLevel, LeaseFlags, LeaseState,
        OplockLevel, ShareAccess,
    };
    use ringshare_wire::create::{tag, CreateContext, LeaseV2};

    fn request(name: &str, disposition: CreateDisposition, options: u32) -> CreateRequest<'static> {
        CreateRequest {
            security_flags: 0,
            requested_oplock_level: OplockLevel(0),
            impersonation_level: ImpersonationLevel::IMPERSONATION,
            smb_create_flags: 0,
            desired_access: AccessMask(access::FILE_READ_ATTRIBUTES),
            file_attributes: FileAttributes(0),
            share_access: ShareAccess(7),
            create_disposition: disposition,
            create_options: CreateOptions(options),
            name: name.to_string(),
            contexts: Vec::new(),
        }
    }

    fn with_lease(dialect: u16) -> Result<(u8, Option<Lease>), NtStatus> {
        let mut cr = request("f", CreateDisposition::OPEN, 0);
        cr.requested_oplock_level = OplockLevel(oplock::LEVEL_LEASE);
        let lease = Lease {
            key: [7; 16],
            state: LeaseState(7),
            flags: LeaseFlags(0),
            duration: 0,
            v2: Some(LeaseV2 {
                parent_key: [0; 16],
                epoch: 1,
            }),
        };
        cr.contexts
            .push(CreateContext::new(tag::REQUEST_LEASE, lease.encode()));
        lease_asked(&cr, dialect)
    }

    #[test]
    fn a_bad_impersonation_level_wins_over_a_bad_disposition() {
        let mut cr = request("f", CreateDisposition(9), 0);
        cr.impersonation_level = ImpersonationLevel(4);
        assert_eq!(check_fields(&cr), Err(NtStatus::BAD_IMPERSONATION_LEVEL));
    }

    #[test]
    fn opening_by_file_id_is_not_supported() {
        let cr = request("f", CreateDisposition::OPEN, OPT_OPEN_BY_FILE_ID);
        assert_eq!(check_fields(&cr), Err(NtStatus::NOT_SUPPORTED));
    }

    #[test]
    fn asking_for_a_directory_and_a_non_directory_at_once_is_invalid() {
        let both = OPT_DIRECTORY_FILE | OPT_NON_DIRECTORY_FILE;
        let cr = request("f", CreateDisposition::OPEN, both);
        assert_eq!(check_fields(&cr), Err(NtStatus::INVALID_PARAMETER));
    }

    #[test]
    fn the_default_data_stream_of_a_name_is_never_a_directory() {
        let cr = request("f::$DATA", CreateDisposition::OPEN, OPT_DIRECTORY_FILE);
        let r = parse_name(&cr, true, None, true, false);
        assert_eq!(r.err(), Some(NtStatus::NOT_A_DIRECTORY));
        let cr = request("f::$DATA", CreateDisposition::OPEN, 0);
        assert!(parse_name(&cr, true, None, false, false).is_ok_and(|n| n.want_file));
    }

    #[test]
    fn a_named_stream_is_not_a_directory() {
        let cr = request("f:s", CreateDisposition::OPEN, OPT_DIRECTORY_FILE);
        let r = parse_name(&cr, true, None, true, false);
        assert_eq!(r.err(), Some(NtStatus::NOT_A_DIRECTORY));
    }

    #[test]
    fn a_directory_is_only_opened_or_created() {
        let cr = request("d", CreateDisposition::OVERWRITE_IF, OPT_DIRECTORY_FILE);
        let r = parse_name(&cr, true, None, true, false);
        assert_eq!(r.err(), Some(NtStatus::INVALID_PARAMETER));
        let cr = request("d", CreateDisposition::OPEN_IF, OPT_DIRECTORY_FILE);
        assert!(parse_name(&cr, true, None, true, false).is_ok());
    }

    #[test]
    fn a_lease_asked_before_smb_2_1_asks_for_no_oplock() {
        assert_eq!(with_lease(0x0202), Ok((oplock::LEVEL_NONE, None)));
    }

    #[test]
    fn a_version_2_lease_on_smb_2_1_is_read_as_version_1() {
        let (level, lease) = with_lease(0x0210).unwrap();
        assert_eq!(level, oplock::LEVEL_LEASE);
        assert!(lease.is_some_and(|l| l.v2.is_none() && l.key == [7; 16]));
        let (_, lease) = with_lease(0x0311).unwrap();
        assert!(lease.is_some_and(|l| l.v2.is_some()));
    }
}
