//! Samba's `user.DOSATTRIB` extended attribute (`store dos attributes =
//! yes`, Samba's default): a file's DOS attributes and creation time, so a
//! share keeps both when it moves between Samba and ringshare.
//!
//! The value is an NDR `xattr_DOSATTRIB` (Samba's librpc/idl/xattr.idl): a
//! NUL-terminated ASCII `attrib_hex` ("0x20", empty from version 4 on),
//! then, unless the value ends there, padding to 2, the version (u16), the
//! union level (u16, the same), padding to 4, and the version's fields, little
//! endian. Read here: the hex-only form (Samba 3), versions 1 to 5. Written:
//! version 5, as Samba 4.17 and later write it (valid flags ATTRIB |
//! CREATE_TIME, attributes, creation time as a FILETIME).

use crate::UnixNanos;

/// The attribute's name.
pub const XATTR: &str = "user.DOSATTRIB";
/// The most bytes read (Samba reads at most 256).
pub const READ_MAX: usize = 256;

const VALID_ATTRIB: u32 = 0x01;
const VALID_CREATE_TIME: u32 = 0x10;
/// READONLY, HIDDEN, SYSTEM, DIRECTORY, ARCHIVE, SPARSE, REPARSE_POINT, OFFLINE: what
/// Samba takes from a stored value.
const KEPT: u32 = 0x01 | 0x02 | 0x04 | 0x10 | 0x20 | 0x200 | 0x400 | 0x1000;
/// FILETIME of the Unix epoch.
const EPOCH_FILETIME: i128 = 116_444_736_000_000_000;

/// What a stored value says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DosInfo {
    pub attributes: u32,
    /// The creation time a client set or the server recorded.
    pub create_time: Option<UnixNanos>,
}

/// A FILETIME as nanoseconds since the Unix epoch.
pub fn filetime_to_unix_nanos(ft: u64) -> UnixNanos {
    (i128::from(ft) - EPOCH_FILETIME) * 100
}

/// Nanoseconds since the Unix epoch as a FILETIME (100 ns steps, rounded
/// down; clamped to the FILETIME range).
pub fn unix_nanos_to_filetime(t: UnixNanos) -> u64 {
    let ft = t.div_euclid(100) + EPOCH_FILETIME;
    ft.clamp(0, i128::from(i64::MAX)) as u64
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn parse_hex(s: &[u8]) -> Option<u32> {
    let s = std::str::from_utf8(s).ok()?;
    let h = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))?;
    u32::from_str_radix(h, 16).ok()
}

/// Decode a stored value; `None` when it is not one Samba would read.
pub fn decode(b: &[u8]) -> Option<DosInfo> {
    let nul = b.iter().position(|&c| c == 0)?;
    let hex = parse_hex(&b[..nul]);
    let mut off = nul + 1;
    if off >= b.len() {
        return hex.map(|a| DosInfo {
            attributes: a & KEPT,
            create_time: None,
        });
    }
    off = off.next_multiple_of(2);
    let version = u16_at(b, off)?;
    let level = u16_at(b, off + 2)?;
    if level != version {
        return None;
    }
    off = (off + 4).next_multiple_of(4);
    let time = |ft: u64| (ft != 0).then(|| filetime_to_unix_nanos(ft));
    let (attributes, create_time) = match version {
        1 => (Some(u32_at(b, off)?), time(u64_at(b, off + 24)?)),
        2 => (Some(u32_at(b, off + 4)?), None),
        3..=5 => {
            let valid = u32_at(b, off)?;
            let attrib = u32_at(b, off + 4)?;
            let at = match version {
                3 => off + 28,
                4 => off + 16,
                _ => off + 8,
            };
            let create = u64_at(b, at)?;
            (
                (valid & VALID_ATTRIB != 0).then_some(attrib).or(hex),
                (valid & VALID_CREATE_TIME != 0)
                    .then(|| time(create))
                    .flatten(),
            )
        }
        _ => return None,
    };
    Some(DosInfo {
        attributes: attributes? & KEPT,
        create_time,
    })
}

/// The version 5 value for `attributes` and `create_time` (24 bytes).
pub fn encode(attributes: u32, create_time: UnixNanos) -> [u8; 24] {
    let mut v = [0u8; 24];
    v[2..4].copy_from_slice(&5u16.to_le_bytes());
    v[4..6].copy_from_slice(&5u16.to_le_bytes());
    v[8..12].copy_from_slice(&(VALID_ATTRIB | VALID_CREATE_TIME).to_le_bytes());
    v[12..16].copy_from_slice(&(attributes & KEPT).to_le_bytes());
    v[16..24].copy_from_slice(&unix_nanos_to_filetime(create_time).to_le_bytes());
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    // Values Samba 4.17.12 writes, checked with its `ndrdump xattr
    // xattr_DOSATTRIB struct`: ARCHIVE, created 1970-01-01T00:16:40Z.
    const V5: [u8; 24] = [
        0, 0, 5, 0, 5, 0, 0, 0, 0x11, 0, 0, 0, 0x20, 0, 0, 0, 0, 0x64, 0x4a, 0x29, 0xe1, 0xb1,
        0x9d, 0x01,
    ];
    const V4: [u8; 32] = [
        0, 0, 4, 0, 4, 0, 0, 0, 0x11, 0, 0, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x64,
        0x4a, 0x29, 0xe1, 0xb1, 0x9d, 0x01,
    ];
    const CREATED: UnixNanos = 1_000_000_000_000;

    fn v3() -> Vec<u8> {
        let mut v = b"0x20\0\0".to_vec();
        v.extend_from_slice(&[3, 0, 3, 0, 0, 0]);
        v.extend_from_slice(&0x11u32.to_le_bytes());
        v.extend_from_slice(&0x20u32.to_le_bytes());
        v.extend_from_slice(&[0; 4 + 8 + 8]);
        v.extend_from_slice(&[0, 0x64, 0x4a, 0x29, 0xe1, 0xb1, 0x9d, 0x01]);
        v.extend_from_slice(&[0; 8]);
        v
    }

    #[test]
    fn samba_4_17_values_decode_and_version_5_encodes_byte_for_byte() {
        let want = Some(DosInfo {
            attributes: 0x20,
            create_time: Some(CREATED),
        });
        assert_eq!(decode(&V5), want);
        assert_eq!(decode(&V4), want);
        assert_eq!(v3().len(), 56);
        assert_eq!(decode(&v3()), want);
        assert_eq!(
            decode(b"0x22\0"),
            Some(DosInfo {
                attributes: 0x22,
                create_time: None
            })
        );
        assert_eq!(encode(0x20, CREATED), V5);
    }

    #[test]
    fn malformed_or_unknown_values_are_not_read() {
        assert_eq!(decode(&[]), None);
        assert_eq!(decode(b"0x2"), None, "no NUL");
        assert_eq!(decode(&V5[..20]), None, "truncated");
        let mut bad = V5;
        bad[2] = 9;
        bad[4] = 9;
        assert_eq!(decode(&bad), None, "unknown version");
        bad = V5;
        bad[4] = 4;
        assert_eq!(decode(&bad), None, "level differs from version");
        // ringshare's own former value (four bytes of attributes) is not
        // a DOSATTRIB.
        assert_eq!(decode(&0x21u32.to_le_bytes()), None);
    }

    #[test]
    fn creation_times_round_trip_across_the_epoch_and_at_the_end_of_time() {
        for t in [
            0,
            -1_000_000_000,
            -58_000_000_000_000_000, // 1968
            1_700_000_000_123_456_700,
            filetime_to_unix_nanos(i64::MAX as u64),
        ] {
            let d = decode(&encode(0x21, t)).unwrap();
            assert_eq!(d.create_time, Some(t), "{t}");
            assert_eq!(d.attributes, 0x21);
        }
        // A FILETIME of 0 means "none" on read.
        let mut zero = V5;
        zero[16..].fill(0);
        assert_eq!(decode(&zero).unwrap().create_time, None);
    }
}
