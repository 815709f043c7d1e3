//! Windows security descriptors over Unix permissions.
//!
//! **Invariant:** this crate knows nothing about SMB requests, connections or open files:
//! descriptors and the xattrs they map to, nothing else (below it only wire).
//!
//! - [`posix`]: the kernel's POSIX ACL xattrs (`system.posix_acl_access`,
//!   `system.posix_acl_default`) and the mapping between an NT security
//!   descriptor and a file's owner, group, mode and POSIX ACLs, with the
//!   meaning Samba's default (`vfs_posixacl`) gives it.
//! - [`ntacl`]: Samba's `security.NTACL` xattr (`vfs objects = acl_xattr`),
//!   so a share moved from Samba keeps its ACLs.
//!
//! Pure functions: no system calls here; the filesystem backend reads and
//! writes the xattrs.
#![forbid(unsafe_code)]

pub mod inherit;
pub mod ntacl;
pub mod posix;
