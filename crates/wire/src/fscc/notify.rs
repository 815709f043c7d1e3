//! [MS-FSCC] 2.7.1 FILE_NOTIFY_INFORMATION: the records a CHANGE_NOTIFY
//! response carries ([MS-SMB2] 2.2.36).
//!
//! Each record is NextEntryOffset (bytes from this record to the next, a
//! multiple of 4, 0 on the last), Action, FileNameLength (bytes), and the
//! name in UTF-16LE without a terminator, relative to the watched directory
//! and `\`-separated. Records are padded to 4 bytes; the last one is padded
//! too (clients accept either), so a chain's length is the sum of
//! [`notify_record_len`] of its records.

use super::file_info::walk_chain;
use crate::codec::{Reader, WriteExt};
use crate::utf16::{decode_utf16le, encode_utf16le, utf16_len};
use crate::WireError;

/// FILE_ACTION_ADDED: the name was created (or moved in from another directory).
pub const FILE_ACTION_ADDED: u32 = 1;
/// FILE_ACTION_REMOVED: the name was deleted (or moved out).
pub const FILE_ACTION_REMOVED: u32 = 2;
/// FILE_ACTION_MODIFIED: the file's data, attributes, times, EAs or security changed.
pub const FILE_ACTION_MODIFIED: u32 = 3;
/// FILE_ACTION_RENAMED_OLD_NAME: the name before a rename in one directory.
pub const FILE_ACTION_RENAMED_OLD_NAME: u32 = 4;
/// FILE_ACTION_RENAMED_NEW_NAME: the name after it.
pub const FILE_ACTION_RENAMED_NEW_NAME: u32 = 5;
/// FILE_ACTION_ADDED_STREAM: a named stream was created.
pub const FILE_ACTION_ADDED_STREAM: u32 = 6;
/// FILE_ACTION_REMOVED_STREAM: a named stream was deleted.
pub const FILE_ACTION_REMOVED_STREAM: u32 = 7;
/// FILE_ACTION_MODIFIED_STREAM: a named stream's data changed.
pub const FILE_ACTION_MODIFIED_STREAM: u32 = 8;

/// The fixed part of a record: NextEntryOffset, Action, FileNameLength.
const FIXED: usize = 12;

/// One change ([MS-FSCC] 2.7.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileNotifyInformation {
    pub action: u32,
    pub file_name: String,
}

/// Bytes one record for `name` takes in a chain, padding included.
pub fn notify_record_len(name: &str) -> usize {
    (FIXED + utf16_len(name)).next_multiple_of(4)
}

/// Append one record to a chain being built in `out` (which holds only the
/// chain): the previous record's NextEntryOffset, at `last`, is pointed at
/// this one. Returns where this record starts (the next call's `last`).
pub fn push_notify_record(
    out: &mut Vec<u8>,
    last: Option<usize>,
    action: u32,
    name: &str,
) -> usize {
    let at = out.len();
    if let Some(prev) = last {
        out.patch_u32(prev, (at - prev) as u32);
    }
    out.put_u32(0);
    out.put_u32(action);
    out.put_u32(utf16_len(name) as u32);
    encode_utf16le(name, out);
    out.pad_to(4, at);
    at
}

/// Decode a chain of records (a CHANGE_NOTIFY response's buffer).
pub fn decode_notify_chain(buf: &[u8]) -> Result<Vec<FileNotifyInformation>, WireError> {
    let mut out = Vec::new();
    walk_chain(buf, FIXED, |entry| {
        let mut r = Reader::new(entry);
        r.u32()?;
        let action = r.u32()?;
        let len = r.u32()? as usize;
        let file_name = decode_utf16le(r.bytes(len)?)?;
        out.push(FileNotifyInformation { action, file_name });
        Ok(FIXED + len)
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_round_trips_with_each_record_padded_to_four_bytes() {
        let mut out = Vec::new();
        let a = push_notify_record(&mut out, None, FILE_ACTION_ADDED, "a");
        let b = push_notify_record(&mut out, Some(a), FILE_ACTION_RENAMED_OLD_NAME, "dir\\bé");
        push_notify_record(&mut out, Some(b), FILE_ACTION_RENAMED_NEW_NAME, "x");
        assert_eq!(
            out.len(),
            notify_record_len("a") + notify_record_len("dir\\bé") + notify_record_len("x")
        );
        assert_eq!(notify_record_len("a"), 16);
        assert_eq!(u32::from_le_bytes(out[0..4].try_into().unwrap()), 16);
        let got = decode_notify_chain(&out).unwrap();
        assert_eq!(
            got,
            vec![
                FileNotifyInformation {
                    action: FILE_ACTION_ADDED,
                    file_name: "a".into()
                },
                FileNotifyInformation {
                    action: FILE_ACTION_RENAMED_OLD_NAME,
                    file_name: "dir\\bé".into()
                },
                FileNotifyInformation {
                    action: FILE_ACTION_RENAMED_NEW_NAME,
                    file_name: "x".into()
                },
            ]
        );
        assert_eq!(decode_notify_chain(&[]).unwrap(), vec![]);
    }

    #[test]
    fn a_record_whose_name_runs_past_the_buffer_is_refused() {
        let mut out = Vec::new();
        push_notify_record(&mut out, None, FILE_ACTION_ADDED, "abcdef");
        out.patch_u32(8, 400);
        assert!(decode_notify_chain(&out).is_err());
        let mut loop_ = Vec::new();
        push_notify_record(&mut loop_, None, FILE_ACTION_ADDED, "a");
        loop_.patch_u32(0, 4);
        assert!(decode_notify_chain(&loop_).is_err());
    }
}
