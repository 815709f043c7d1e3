//! Backend errors to NTSTATUS, in one place.

use ringshare_vfs::FsError;
use ringshare_wire::NtStatus;

/// errno values of descriptor exhaustion: the process's limit (EMFILE), the system's (ENFILE).
const EMFILE: i32 = 24;
const ENFILE: i32 = 23;

pub fn status_of(e: FsError) -> NtStatus {
    match e {
        FsError::NotFound => NtStatus::OBJECT_NAME_NOT_FOUND,
        FsError::PathNotFound => NtStatus::OBJECT_PATH_NOT_FOUND,
        FsError::Exists => NtStatus::OBJECT_NAME_COLLISION,
        FsError::NotADirectory => NtStatus::NOT_A_DIRECTORY,
        FsError::IsADirectory => NtStatus::FILE_IS_A_DIRECTORY,
        FsError::NotEmpty => NtStatus::DIRECTORY_NOT_EMPTY,
        FsError::AccessDenied => NtStatus::ACCESS_DENIED,
        // Something that resolves outside the share does not exist as far as
        // the client can tell.
        FsError::Escapes => NtStatus::OBJECT_NAME_NOT_FOUND,
        FsError::NoSpace => NtStatus::DISK_FULL,
        FsError::ReadOnly => NtStatus::MEDIA_WRITE_PROTECTED,
        FsError::NameTooLong => NtStatus::OBJECT_NAME_INVALID,
        FsError::InvalidName => NtStatus::OBJECT_NAME_INVALID,
        FsError::Busy => NtStatus::SHARING_VIOLATION,
        // (a CREATE waits for it first: crates/core/src/cmd/create.rs, `lease_wait`)
        FsError::LeaseHeld => NtStatus::SHARING_VIOLATION,
        FsError::CrossDevice => NtStatus::NOT_SAME_DEVICE,
        FsError::TooManyLinks => NtStatus::FILE_SYSTEM_LIMITATION,
        FsError::TooBig => NtStatus::FILE_SYSTEM_LIMITATION,
        FsError::Io => NtStatus::IO_DEVICE_ERROR,
        // Out of file descriptors: what Windows answers when its handle table is full, so a
        // client knows the server is out of a resource rather than that the file is bad.
        FsError::Other(EMFILE | ENFILE) => NtStatus::TOO_MANY_OPENED_FILES,
        FsError::Other(_) => NtStatus::UNSUCCESSFUL,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_out_of_file_descriptors_is_too_many_opened_files() {
        assert_eq!(
            status_of(FsError::from_errno(24)),
            NtStatus::TOO_MANY_OPENED_FILES
        );
        assert_eq!(
            status_of(FsError::from_errno(23)),
            NtStatus::TOO_MANY_OPENED_FILES
        );
        assert_eq!(status_of(FsError::Other(95)), NtStatus::UNSUCCESSFUL);
    }

    #[test]
    fn a_full_disk_is_disk_full_and_an_escape_looks_like_a_missing_name() {
        assert_eq!(status_of(FsError::NoSpace), NtStatus::DISK_FULL);
        assert_eq!(status_of(FsError::Escapes), NtStatus::OBJECT_NAME_NOT_FOUND);
        assert_eq!(
            status_of(FsError::PathNotFound),
            NtStatus::OBJECT_PATH_NOT_FOUND
        );
    }
}
