//! Quotas on the wire: the SMB2_QUERY_QUOTA_INFO a QUERY_INFO of
//! SMB2_0_INFO_QUOTA carries ([MS-SMB2] 2.2.37.1), the SID list in it
//! (FILE_GET_QUOTA_INFORMATION, [MS-FSCC] 2.4.41.1), and the
//! FILE_QUOTA_INFORMATION entries a server answers and a SET_INFO sends
//! ([MS-FSCC] 2.4.41).
//!
//! Lists are chained by NextEntryOffset (0 ends them); each offset must move
//! forward past the entry's fixed part and SID, and stay inside the buffer, so a
//! list never holds more entries than its buffer has room for and decoding
//! always ends.

use crate::codec::Reader;
use crate::security::Sid;
use crate::WireError;

use super::FileTime;

/// SMB2_QUERY_QUOTA_INFO ([MS-SMB2] 2.2.37.1): the input buffer of a quota query.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueryQuotaInfo {
    pub return_single: bool,
    pub restart_scan: bool,
    /// The SIDs asked about (SidListLength nonzero); empty: the whole list.
    pub sids: Vec<Sid>,
    /// The SID to start a scan at (StartSidLength nonzero, no SID list).
    pub start_sid: Option<Sid>,
}

/// NextEntryOffset and SidLength.
const GET_ENTRY_FIXED: usize = 8;

impl QueryQuotaInfo {
    /// Bytes of the fixed part.
    pub const FIXED_SIZE: usize = 16;

    /// Decode the whole input buffer. Errors are INVALID_PARAMETER material
    /// ([MS-SMB2] 3.3.5.20.4): shorter than the fixed part, a SID list that is
    /// not a chain of FILE_GET_QUOTA_INFORMATION inside the buffer, a start SID
    /// outside it.
    pub fn decode(buf: &[u8]) -> Result<QueryQuotaInfo, WireError> {
        let mut r = Reader::new(buf);
        let return_single = r.u8()? != 0;
        let restart_scan = r.u8()? != 0;
        r.u16()?;
        let sid_list_length = r.u32()? as usize;
        let start_sid_length = r.u32()? as usize;
        let start_sid_offset = r.u32()? as usize;
        let sid_buffer = r.rest();
        let mut q = QueryQuotaInfo {
            return_single,
            restart_scan,
            ..Default::default()
        };
        if sid_list_length != 0 {
            let list = sid_buffer
                .get(..sid_list_length)
                .ok_or(WireError::BadOffset("SidListLength"))?;
            q.sids = decode_get_quota_list(list)?;
        } else if start_sid_length != 0 {
            let end = start_sid_offset
                .checked_add(start_sid_length)
                .ok_or(WireError::BadOffset("StartSidOffset"))?;
            let sid = sid_buffer
                .get(start_sid_offset..end)
                .ok_or(WireError::BadOffset("StartSidOffset"))?;
            q.start_sid = Some(whole_sid(sid)?);
        }
        Ok(q)
    }

    /// The buffer as a client sends it: the SIDs as a FILE_GET_QUOTA_INFORMATION
    /// list, or the start SID right after the fixed part.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut sid_buffer = Vec::new();
        let (list_len, start_len) = if !self.sids.is_empty() {
            encode_get_quota_list(&self.sids, &mut sid_buffer);
            (sid_buffer.len(), 0)
        } else if let Some(s) = &self.start_sid {
            s.encode(&mut sid_buffer);
            (0, sid_buffer.len())
        } else {
            (0, 0)
        };
        out.push(u8::from(self.return_single));
        out.push(u8::from(self.restart_scan));
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&crate::codec::to_u32(list_len).to_le_bytes());
        out.extend_from_slice(&crate::codec::to_u32(start_len).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&sid_buffer);
    }
}

/// A SID that fills `buf` exactly (its SidLength).
fn whole_sid(buf: &[u8]) -> Result<Sid, WireError> {
    let sid = Sid::decode(buf)?;
    if sid.encoded_len() != buf.len() {
        return Err(WireError::Invalid("SidLength"));
    }
    Ok(sid)
}

/// One chained entry: its bytes from `at` (fixed part and SID) and where the next
/// one starts (None: the last).
fn chained(buf: &[u8], at: usize, fixed: usize) -> Result<(&[u8], Option<usize>), WireError> {
    let entry = buf
        .get(at..)
        .ok_or(WireError::BadOffset("NextEntryOffset"))?;
    let mut r = Reader::new(entry);
    let next = r.u32()? as usize;
    let sid_len = r.u32()? as usize;
    let len = fixed
        .checked_add(sid_len)
        .ok_or(WireError::Invalid("SidLength"))?;
    let bytes = entry.get(..len).ok_or(WireError::BadOffset("SidLength"))?;
    if next == 0 {
        return Ok((bytes, None));
    }
    if next < len {
        return Err(WireError::BadOffset("NextEntryOffset"));
    }
    let next_at = at
        .checked_add(next)
        .filter(|&n| n < buf.len())
        .ok_or(WireError::BadOffset("NextEntryOffset"))?;
    Ok((bytes, Some(next_at)))
}

/// A FILE_GET_QUOTA_INFORMATION list ([MS-FSCC] 2.4.41.1): its SIDs in order.
pub fn decode_get_quota_list(buf: &[u8]) -> Result<Vec<Sid>, WireError> {
    let mut sids = Vec::new();
    let mut at = Some(0usize);
    while let Some(here) = at {
        let (entry, next) = chained(buf, here, GET_ENTRY_FIXED)?;
        sids.push(whole_sid(&entry[GET_ENTRY_FIXED..])?);
        at = next;
    }
    Ok(sids)
}

/// Append a FILE_GET_QUOTA_INFORMATION list of `sids` (entries 8-byte aligned).
pub fn encode_get_quota_list(sids: &[Sid], out: &mut Vec<u8>) {
    for (i, sid) in sids.iter().enumerate() {
        let start = out.len();
        let len = GET_ENTRY_FIXED + sid.encoded_len();
        let last = i + 1 == sids.len();
        let next = if last { 0 } else { len.next_multiple_of(8) };
        out.extend_from_slice(&crate::codec::to_u32(next).to_le_bytes());
        out.extend_from_slice(&crate::codec::to_u32(sid.encoded_len()).to_le_bytes());
        sid.encode(out);
        if !last {
            out.resize(start + next, 0);
        }
    }
}

/// One FILE_QUOTA_INFORMATION entry ([MS-FSCC] 2.4.41): a SID's use and
/// limits in bytes (`u64::MAX`: no limit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileQuotaInformation {
    pub change_time: FileTime,
    pub quota_used: u64,
    pub quota_threshold: u64,
    pub quota_limit: u64,
    pub sid: Sid,
}

impl FileQuotaInformation {
    /// NextEntryOffset, SidLength, ChangeTime, QuotaUsed, QuotaThreshold, QuotaLimit.
    pub const FIXED_SIZE: usize = 40;

    /// Bytes of this entry without the padding after it.
    pub fn encoded_len(&self) -> usize {
        Self::FIXED_SIZE + self.sid.encoded_len()
    }

    /// A list of entries ([MS-FSCC] 2.4.41), chained by NextEntryOffset.
    pub fn decode_list(buf: &[u8]) -> Result<Vec<FileQuotaInformation>, WireError> {
        let mut list = Vec::new();
        let mut at = Some(0usize);
        while let Some(here) = at {
            let (entry, next) = chained(buf, here, Self::FIXED_SIZE)?;
            let mut r = Reader::new(&entry[8..]);
            list.push(FileQuotaInformation {
                change_time: FileTime(r.u64()?),
                quota_used: r.u64()?,
                quota_threshold: r.u64()?,
                quota_limit: r.u64()?,
                sid: whole_sid(r.rest())?,
            });
            at = next;
        }
        Ok(list)
    }

    /// Append `list`, chained, each entry but the last padded to 8 bytes.
    pub fn encode_list(list: &[FileQuotaInformation], out: &mut Vec<u8>) {
        for (i, e) in list.iter().enumerate() {
            let start = out.len();
            let last = i + 1 == list.len();
            let next = if last {
                0
            } else {
                e.encoded_len().next_multiple_of(8)
            };
            out.extend_from_slice(&crate::codec::to_u32(next).to_le_bytes());
            out.extend_from_slice(&crate::codec::to_u32(e.sid.encoded_len()).to_le_bytes());
            out.extend_from_slice(&e.change_time.0.to_le_bytes());
            out.extend_from_slice(&e.quota_used.to_le_bytes());
            out.extend_from_slice(&e.quota_threshold.to_le_bytes());
            out.extend_from_slice(&e.quota_limit.to_le_bytes());
            e.sid.encode(out);
            if !last {
                out.resize(start + next, 0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sid(s: &str) -> Sid {
        s.parse().unwrap()
    }

    #[test]
    fn a_quota_query_with_a_sid_list_round_trips() {
        let q = QueryQuotaInfo {
            return_single: false,
            restart_scan: true,
            sids: vec![sid("S-1-22-1-1000"), sid("S-1-5-21-1-2-3-1104")],
            start_sid: None,
        };
        let mut b = Vec::new();
        q.encode(&mut b);
        // The first entry, 8 + 16 bytes, is padded to 24; the second is 8 + 28.
        assert_eq!(&b[4..8], &(24u32 + 36).to_le_bytes());
        assert_eq!(&b[16..20], &24u32.to_le_bytes());
        assert_eq!(QueryQuotaInfo::decode(&b).unwrap(), q);
    }

    #[test]
    fn a_quota_query_with_a_start_sid_or_nothing_round_trips() {
        let q = QueryQuotaInfo {
            return_single: true,
            restart_scan: false,
            sids: Vec::new(),
            start_sid: Some(sid("S-1-22-2-100")),
        };
        let mut b = Vec::new();
        q.encode(&mut b);
        assert_eq!(QueryQuotaInfo::decode(&b).unwrap(), q);
        let empty = QueryQuotaInfo::default();
        let mut b = Vec::new();
        empty.encode(&mut b);
        assert_eq!(b.len(), QueryQuotaInfo::FIXED_SIZE);
        assert_eq!(QueryQuotaInfo::decode(&b).unwrap(), empty);
    }

    #[test]
    fn a_bad_quota_query_is_refused_not_read_past_its_end() {
        let q = QueryQuotaInfo {
            sids: vec![sid("S-1-22-1-1000"), sid("S-1-22-1-1001")],
            ..Default::default()
        };
        let mut good = Vec::new();
        q.encode(&mut good);
        assert!(QueryQuotaInfo::decode(&good).is_ok());
        assert!(
            QueryQuotaInfo::decode(&good[..15]).is_err(),
            "fixed part cut"
        );
        assert!(QueryQuotaInfo::decode(&good[..good.len() - 1]).is_err());
        let mut into_itself = good.clone();
        into_itself[16..20].copy_from_slice(&4u32.to_le_bytes());
        assert!(
            QueryQuotaInfo::decode(&into_itself).is_err(),
            "offset into its own entry"
        );
        let mut long_sid = good.clone();
        long_sid[20..24].copy_from_slice(&1000u32.to_le_bytes());
        assert!(
            QueryQuotaInfo::decode(&long_sid).is_err(),
            "SidLength past the end"
        );
        let mut short_sid = good.clone();
        short_sid[20..24].copy_from_slice(&8u32.to_le_bytes());
        assert!(
            QueryQuotaInfo::decode(&short_sid).is_err(),
            "SidLength below the SID"
        );
        let mut start = vec![0u8; 16];
        start[8..12].copy_from_slice(&12u32.to_le_bytes());
        start[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(QueryQuotaInfo::decode(&start).is_err(), "start SID outside");
    }

    #[test]
    fn quota_entries_round_trip_aligned_to_8_bytes() {
        let list = vec![
            FileQuotaInformation {
                change_time: FileTime(0),
                quota_used: 10240,
                quota_threshold: 102_400,
                quota_limit: 204_800,
                sid: sid("S-1-22-1-1012"),
            },
            FileQuotaInformation {
                change_time: FileTime(7),
                quota_used: 0,
                quota_threshold: u64::MAX,
                quota_limit: u64::MAX,
                sid: sid("S-1-5-21-2095276164-1901114667-1919093957-1000"),
            },
        ];
        let mut b = Vec::new();
        FileQuotaInformation::encode_list(&list, &mut b);
        // 40 + 16 = 56 (already aligned), then 40 + 28.
        assert_eq!(&b[..4], &56u32.to_le_bytes());
        assert_eq!(b.len(), 56 + 68);
        assert_eq!(
            &b[56..60],
            &0u32.to_le_bytes(),
            "the last entry ends the list"
        );
        assert_eq!(FileQuotaInformation::decode_list(&b).unwrap(), list);
        assert!(FileQuotaInformation::decode_list(&b[..b.len() - 1]).is_err());
        assert!(FileQuotaInformation::decode_list(&b[..39]).is_err());
    }
}
