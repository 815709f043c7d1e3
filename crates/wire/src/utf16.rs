//! UTF-16LE names as SMB2 carries them (no terminator, byte length on the wire).

use crate::WireError;

/// Decode little-endian UTF-16. Odd length or an unpaired surrogate => [`WireError::BadName`].
pub fn decode_utf16le(b: &[u8]) -> Result<String, WireError> {
    if !b.len().is_multiple_of(2) {
        return Err(WireError::BadName);
    }
    let units = b.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]]));
    let mut s = String::with_capacity(b.len() / 2);
    for ch in char::decode_utf16(units) {
        s.push(ch.map_err(|_| WireError::BadName)?);
    }
    Ok(s)
}

/// Append `s` as little-endian UTF-16 (no terminator).
pub fn encode_utf16le(s: &str, out: &mut Vec<u8>) {
    out.reserve(utf16_len(s));
    for u in s.encode_utf16() {
        out.extend_from_slice(&u.to_le_bytes());
    }
}

/// Bytes `s` takes when encoded as UTF-16LE.
pub fn utf16_len(s: &str) -> usize {
    s.chars().map(|c| c.len_utf16() * 2).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_bmp_and_supplementary_characters() {
        let s = "dir\\fïle-😀.txt";
        let mut v = Vec::new();
        encode_utf16le(s, &mut v);
        assert_eq!(v.len(), utf16_len(s));
        assert_eq!(&v[..4], &[b'd', 0, b'i', 0]);
        assert_eq!(decode_utf16le(&v).unwrap(), s);
    }

    #[test]
    fn rejects_odd_length() {
        assert_eq!(decode_utf16le(&[b'a', 0, b'b']), Err(WireError::BadName));
    }

    #[test]
    fn rejects_unpaired_surrogates() {
        assert_eq!(decode_utf16le(&[0x00, 0xD8]), Err(WireError::BadName));
        assert_eq!(
            decode_utf16le(&[0x00, 0xDC, b'a', 0]),
            Err(WireError::BadName)
        );
    }

    #[test]
    fn empty_is_empty() {
        assert_eq!(decode_utf16le(&[]).unwrap(), "");
        assert_eq!(utf16_len(""), 0);
    }
}
