//! Previous Versions on the wire: the `@GMT-YYYY.MM.DD-HH.MM.SS` token that names a snapshot
//! in a path component ([MS-SMB2] 3.3.5.9) and in SRV_SNAPSHOT_ARRAY ([MS-SMB2] 2.2.32.2), its
//! FILETIME as the TWrp create context carries it ([MS-SMB2] 2.2.13.2.7), and the answer to
//! FSCTL_SRV_ENUMERATE_SNAPSHOTS ([MS-SMB2] 3.3.5.15.1) sized as Samba 4.22 sizes it.

use crate::fscc::{civil_from_unix, unix_from_civil};
use crate::status::NtStatus;
use crate::utf16::encode_utf16le;

/// FILETIME (100 ns since 1601-01-01) of the Unix epoch.
const UNIX_EPOCH_FILETIME: u64 = 116_444_736_000_000_000;
const TICKS_PER_SEC: u64 = 10_000_000;
/// `@GMT-YYYY.MM.DD-HH.MM.SS`: 24 characters.
pub const GMT_TOKEN_LEN: usize = 24;
/// One name in SRV_SNAPSHOT_ARRAY: the token in UTF-16 and its NUL.
const NAME_BYTES: usize = (GMT_TOKEN_LEN + 1) * 2;
/// NumberOfSnapShots, NumberOfSnapShotsReturned, SnapShotArraySize.
const ARRAY_HEADER: usize = 12;
/// The smallest MaxOutputResponse answered ([MS-SMB2] 3.3.5.15.1): the counts alone.
pub const SNAPSHOT_ARRAY_MIN_OUTPUT: u32 = 16;

/// A snapshot's time, to the second, in UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GmtToken {
    /// Seconds since the Unix epoch.
    pub unix_secs: i64,
}

impl GmtToken {
    /// Parses exactly `@GMT-YYYY.MM.DD-HH.MM.SS` (a valid date and time); anything else is None.
    pub fn parse(s: &str) -> Option<GmtToken> {
        let b = s.as_bytes();
        if b.len() != GMT_TOKEN_LEN || !s.starts_with("@GMT-") {
            return None;
        }
        let seps = [(9, b'.'), (12, b'.'), (15, b'-'), (18, b'.'), (21, b'.')];
        if seps.iter().any(|&(i, c)| b[i] != c) {
            return None;
        }
        let num = |from: usize, len: usize| -> Option<i64> {
            let d = &b[from..from + len];
            d.iter().all(u8::is_ascii_digit).then(|| {
                d.iter()
                    .fold(0i64, |acc, &c| acc * 10 + i64::from(c - b'0'))
            })
        };
        let (y, mo, d) = (num(5, 4)?, num(10, 2)?, num(13, 2)?);
        let (h, mi, se) = (num(16, 2)?, num(19, 2)?, num(22, 2)?);
        let valid = (1..=12).contains(&mo)
            && d >= 1
            && d <= days_in_month(y, mo)
            && h < 24
            && mi < 60
            && se < 60;
        valid.then(|| GmtToken {
            unix_secs: unix_from_civil(y, mo as u32, d as u32, h as u32, mi as u32, se as u32),
        })
    }

    /// The token of a TWrp context's timestamp (FILETIME, UTC), to the second; None before
    /// 1970 or past year 9999.
    pub fn from_filetime(ft: u64) -> Option<GmtToken> {
        let secs = ft.checked_sub(UNIX_EPOCH_FILETIME)? / TICKS_PER_SEC;
        let unix_secs = i64::try_from(secs).ok()?;
        (unix_secs < 253_402_300_800).then_some(GmtToken { unix_secs })
    }

    /// The FILETIME of the token (the TWrp context's form).
    pub fn to_filetime(self) -> u64 {
        (self.unix_secs as u64) * TICKS_PER_SEC + UNIX_EPOCH_FILETIME
    }
}

impl std::fmt::Display for GmtToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (y, mo, d, h, mi, s) = civil_from_unix(self.unix_secs);
        write!(f, "@GMT-{y:04}.{mo:02}.{d:02}-{h:02}.{mi:02}.{s:02}")
    }
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// The FSCTL_SRV_ENUMERATE_SNAPSHOTS output for `snapshots` (in the order to list them) and
/// the request's MaxOutputResponse, as Samba 4.22 answers (measured, docs/conformance.md):
/// below 16 bytes INVALID_PARAMETER; exactly 16 the counts alone (none returned, the size the
/// whole array needs) padded to 16; more but too small for the array BUFFER_TOO_SMALL; else the
/// array: the header, each token NUL-terminated in UTF-16, a final NUL.
pub fn encode_snapshot_array(snapshots: &[GmtToken], max_output: u32) -> Result<Vec<u8>, NtStatus> {
    if max_output < SNAPSHOT_ARRAY_MIN_OUTPUT {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let array_size = snapshots.len() * NAME_BYTES + 2;
    let total = u32::try_from(snapshots.len()).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let mut out = Vec::with_capacity(ARRAY_HEADER + array_size);
    out.extend_from_slice(&total.to_le_bytes());
    let counts_only = max_output == SNAPSHOT_ARRAY_MIN_OUTPUT;
    if !counts_only && (max_output as usize) < ARRAY_HEADER + array_size {
        return Err(NtStatus::BUFFER_TOO_SMALL);
    }
    let returned = if counts_only { 0 } else { total };
    out.extend_from_slice(&returned.to_le_bytes());
    out.extend_from_slice(&(array_size as u32).to_le_bytes());
    if counts_only {
        out.extend_from_slice(&[0; 4]);
        return Ok(out);
    }
    for s in snapshots {
        encode_utf16le(&s.to_string(), &mut out);
        out.extend_from_slice(&[0, 0]);
    }
    out.extend_from_slice(&[0, 0]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tok(s: &str) -> GmtToken {
        GmtToken::parse(s).unwrap()
    }

    #[test]
    fn a_gmt_token_reads_back_as_written_across_leap_days_and_centuries() {
        for s in [
            "@GMT-1970.01.01-00.00.00",
            "@GMT-2000.02.29-23.59.59",
            "@GMT-2026.11.01-10.00.00",
            "@GMT-2100.03.01-00.00.01",
            "@GMT-9999.12.31-23.59.59",
        ] {
            assert_eq!(tok(s).to_string(), s);
        }
        assert_eq!(tok("@GMT-2026.11.01-10.00.00").unix_secs, 1_793_527_200);
    }

    #[test]
    fn a_name_that_is_not_exactly_a_valid_gmt_token_is_not_one() {
        for s in [
            "",
            "@GMT-2026.11.01-10.00.0",
            "@GMT-2026.11.01-10.00.000",
            "@gmt-2026.11.01-10.00.00",
            "@GMT-2026-11-01-10.00.00",
            "@GMT-2026.13.01-10.00.00",
            "@GMT-2026.02.29-10.00.00",
            "@GMT-2026.11.00-10.00.00",
            "@GMT-2026.11.01-24.00.00",
            "@GMT-2026.11.01-10.60.00",
            "@GMT-2026.11.01-10.00.60",
            "@GMT-+026.11.01-10.00.00",
            "@GMT-2026.11.01-10.00.0\u{e9}",
        ] {
            assert_eq!(GmtToken::parse(s), None, "{s}");
        }
    }

    #[test]
    fn a_twrp_timestamp_names_the_snapshot_of_its_second() {
        let t = tok("@GMT-2026.11.01-10.00.00");
        assert_eq!(GmtToken::from_filetime(t.to_filetime()), Some(t));
        assert_eq!(
            GmtToken::from_filetime(t.to_filetime() + 9_999_999),
            Some(t)
        );
        assert_eq!(GmtToken::from_filetime(0), None);
        assert_eq!(GmtToken::from_filetime(u64::MAX), None);
    }

    #[test]
    fn the_snapshot_array_is_sized_as_samba_4_22_sizes_it() {
        let two = [
            tok("@GMT-2026.11.02-10.00.00"),
            tok("@GMT-2026.11.01-10.00.00"),
        ];
        for max in [0, 12, 15] {
            assert_eq!(
                encode_snapshot_array(&two, max),
                Err(NtStatus::INVALID_PARAMETER)
            );
        }
        let counts = encode_snapshot_array(&two, 16).unwrap();
        assert_eq!(hex(&counts), "02000000000000006600000000000000");
        for max in [17, 40, 113] {
            assert_eq!(
                encode_snapshot_array(&two, max),
                Err(NtStatus::BUFFER_TOO_SMALL)
            );
        }
        let full = encode_snapshot_array(&two, 114).unwrap();
        assert_eq!(full.len(), 114);
        assert_eq!(hex(&full[..16]), "02000000020000006600000040004700");
        let names: Vec<u16> = full[12..]
            .chunks(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        let text = String::from_utf16(&names).unwrap();
        assert_eq!(
            text,
            "@GMT-2026.11.02-10.00.00\0@GMT-2026.11.01-10.00.00\0\0"
        );
        assert_eq!(encode_snapshot_array(&two, 65536).unwrap(), full);
    }

    #[test]
    fn no_snapshots_is_an_empty_array_as_samba_4_22_answers() {
        assert_eq!(
            hex(&encode_snapshot_array(&[], 16).unwrap()),
            "00000000000000000200000000000000"
        );
        assert_eq!(
            hex(&encode_snapshot_array(&[], 65536).unwrap()),
            "0000000000000000020000000000"
        );
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }
}
