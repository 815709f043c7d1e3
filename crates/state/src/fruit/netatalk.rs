//! Netatalk's `org.netatalk.Metadata` xattr, where Samba's vfs_fruit keeps
//! `AFP_AfpInfo` by default (`fruit:metadata = netatalk`): an AppleDouble
//! version 2 blob of exactly 402 bytes, big-endian, with 8 entries (read
//! from Samba 4.17's behaviour and its measured output, not copied):
//!
//! | offset | bytes | what |
//! |---|---|---|
//! | 0 | 4 | magic 0x00051607 |
//! | 4 | 4 | version 0x00020000 |
//! | 8 | 16 | filler (zeros) |
//! | 24 | 2 | entry count (8) |
//! | 26 | 8 × 12 | entries: id, offset, length |
//! | 122 | 32 | Finder info (id 9) |
//! | 154 | 200 | comment (id 4, length 0) |
//! | 354 | 16 | dates (id 8): create, modify, backup, access; seconds since 2000 |
//! | 370 | 4 | AFP file info (id 14) |
//! | 374 | 28 | Netatalk's private dev, ino, syn, id (lengths 0 when Samba made it) |

/// Bytes of the blob.
pub const SIZE: usize = 402;
const MAGIC: u32 = 0x0005_1607;
const VERSION: u32 = 0x0002_0000;
const ENTRIES: usize = 8;
const ID_COMMENT: u32 = 4;
const ID_DATES: u32 = 8;
const ID_FINDER: u32 = 9;
const ID_AFP_FILE_INFO: u32 = 14;
const ID_PRIV_DEV: u32 = 0x8044_4556;
const ID_PRIV_INO: u32 = 0x8049_4E4F;
const ID_PRIV_SYN: u32 = 0x8053_594E;
const ID_PRIV_ID: u32 = 0x8053_567E;
/// Entries as Samba lays out a new blob: id, offset, length.
const LAYOUT: [(u32, usize, usize); ENTRIES] = [
    (ID_COMMENT, 154, 0),
    (ID_DATES, 354, 16),
    (ID_FINDER, 122, 32),
    (ID_AFP_FILE_INFO, 370, 4),
    (ID_PRIV_DEV, 374, 0),
    (ID_PRIV_INO, 382, 0),
    (ID_PRIV_SYN, 390, 0),
    (ID_PRIV_ID, 398, 0),
];

fn be32(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4)
        .map(|x| u32::from_be_bytes([x[0], x[1], x[2], x[3]]))
}

/// The entries of a valid blob as (id, offset, length); `None` for
/// anything Samba would not read (treated as no metadata).
fn entries(b: &[u8]) -> Option<Vec<(u32, usize, usize)>> {
    if b.len() != SIZE || be32(b, 0)? != MAGIC || be32(b, 4)? != VERSION {
        return None;
    }
    let count = u16::from_be_bytes([*b.get(24)?, *b.get(25)?]) as usize;
    if count != ENTRIES {
        return None;
    }
    let mut out = Vec::with_capacity(ENTRIES);
    for i in 0..count {
        let at = 26 + 12 * i;
        let (id, off, len) = (
            be32(b, at)?,
            be32(b, at + 4)? as usize,
            be32(b, at + 8)? as usize,
        );
        if off.checked_add(len)? > SIZE {
            return None;
        }
        let ok = match id {
            ID_FINDER => len >= 32,
            ID_COMMENT => len <= 200,
            ID_DATES => len == 0 || len == 16,
            ID_AFP_FILE_INFO | ID_PRIV_ID => len == 0 || len == 4,
            ID_PRIV_DEV | ID_PRIV_INO | ID_PRIV_SYN => len == 0 || len == 8,
            _ => false,
        };
        if !ok {
            return None;
        }
        out.push((id, off, len));
    }
    let mut ids: Vec<u32> = out.iter().map(|e| e.0).collect();
    ids.sort_unstable();
    let mut want: Vec<u32> = LAYOUT.iter().map(|e| e.0).collect();
    want.sort_unstable();
    (ids == want).then_some(out)
}

/// The Finder info of a valid blob.
pub fn finder_info(b: &[u8]) -> Option<[u8; 32]> {
    let (_, off, _) = entries(b)?.into_iter().find(|e| e.0 == ID_FINDER)?;
    b.get(off..off + 32)?.try_into().ok()
}

/// A blob holding `finder`: `old` with its Finder info replaced when it is
/// valid (Netatalk's entries kept), else a new one as Samba writes it, its
/// create, modify and access dates `born` (seconds since the Unix epoch).
pub(crate) fn with_finder_info(old: Option<&[u8]>, finder: &[u8; 32], born: i64) -> Vec<u8> {
    if let Some((b, off)) = old.and_then(|b| {
        let (_, off, _) = entries(b)?.into_iter().find(|e| e.0 == ID_FINDER)?;
        Some((b, off))
    }) {
        let mut b = b.to_vec();
        b[off..off + 32].copy_from_slice(finder);
        return b;
    }
    let mut b = vec![0u8; SIZE];
    b[0..4].copy_from_slice(&MAGIC.to_be_bytes());
    b[4..8].copy_from_slice(&VERSION.to_be_bytes());
    b[24..26].copy_from_slice(&(ENTRIES as u16).to_be_bytes());
    for (i, (id, off, len)) in LAYOUT.iter().enumerate() {
        let at = 26 + 12 * i;
        b[at..at + 4].copy_from_slice(&id.to_be_bytes());
        b[at + 4..at + 8].copy_from_slice(&(*off as u32).to_be_bytes());
        b[at + 8..at + 12].copy_from_slice(&(*len as u32).to_be_bytes());
    }
    b[122..154].copy_from_slice(finder);
    let date = u32::try_from(born - super::AD_DATE_DELTA)
        .unwrap_or(0)
        .to_be_bytes();
    b[354..358].copy_from_slice(&date);
    b[358..362].copy_from_slice(&date);
    b[362..366].copy_from_slice(&super::AD_DATE_START.to_be_bytes());
    b[366..370].copy_from_slice(&date);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_blob_is_laid_out_as_samba_writes_it() {
        let mut finder = [0u8; 32];
        finder[0..8].copy_from_slice(b"TEXTttxt");
        finder[8] = 0x40;
        let b = with_finder_info(None, &finder, 946_684_800 + 0x329A_5D1A);
        assert_eq!(b.len(), 402);
        assert_eq!(&b[0..8], &[0, 5, 0x16, 7, 0, 2, 0, 0]);
        assert_eq!(&b[24..26], &[0, 8]);
        // The first entry: the comment at 154, length 0; Finder info third, at 122.
        assert_eq!(&b[26..38], &[0, 0, 0, 4, 0, 0, 0, 154, 0, 0, 0, 0]);
        assert_eq!(&b[50..62], &[0, 0, 0, 9, 0, 0, 0, 122, 0, 0, 0, 32]);
        assert_eq!(&b[122..130], b"TEXTttxt");
        assert_eq!(&b[354..358], &[0x32, 0x9A, 0x5D, 0x1A]);
        assert_eq!(&b[362..366], &[0x80, 0, 0, 0]);
        assert_eq!(finder_info(&b), Some(finder));
    }

    #[test]
    fn replacing_the_finder_info_keeps_the_rest() {
        let mut b = with_finder_info(None, &[1; 32], 946_684_800);
        b[374] = 7; // private data a Netatalk server wrote
        let again = with_finder_info(Some(&b), &[2; 32], 0);
        assert_eq!(finder_info(&again), Some([2; 32]));
        assert_eq!(again[374], 7);
        assert_eq!(&again[354..358], &b[354..358]);
    }

    #[test]
    fn invalid_blobs_are_no_metadata() {
        let good = with_finder_info(None, &[1; 32], 946_684_800);
        assert!(finder_info(&good[..401]).is_none(), "short");
        let mut bad = good.clone();
        bad[3] = 8;
        assert!(finder_info(&bad).is_none(), "magic");
        let mut bad = good.clone();
        bad[25] = 7;
        assert!(finder_info(&bad).is_none(), "entry count");
        let mut bad = good;
        bad[26 + 12 + 11] = 15; // dates of 15 bytes
        assert!(finder_info(&bad).is_none(), "entry length");
    }
}
