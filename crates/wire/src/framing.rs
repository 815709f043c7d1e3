//! Direct TCP transport framing ([MS-SMB2] 2.1): every SMB2 message (or
//! compound, or transform) is preceded by a 4-byte header: a zero byte and a
//! 24-bit big-endian length of what follows.

use crate::WireError;

/// Bytes of the Direct TCP header.
pub const FRAME_HEADER_LEN: usize = 4;

/// Largest length the 24-bit field can carry.
pub const MAX_FRAME_LEN: usize = 0x00FF_FFFF;

/// Length of the message that follows a Direct TCP header.
/// A nonzero first byte (a NetBIOS session-service packet type other than
/// "session message") is rejected.
pub fn frame_len(header: [u8; 4]) -> Result<usize, WireError> {
    if header[0] != 0 {
        return Err(WireError::Invalid("DirectTcpHeader"));
    }
    Ok(usize::from(header[1]) << 16 | usize::from(header[2]) << 8 | usize::from(header[3]))
}

/// The 4-byte Direct TCP header for a message of `len` bytes.
pub fn frame_header(len: usize) -> Result<[u8; 4], WireError> {
    if len > MAX_FRAME_LEN {
        return Err(WireError::Invalid("StreamProtocolLength"));
    }
    // len fits in 24 bits, so the truncating casts keep every bit.
    Ok([0, (len >> 16) as u8, (len >> 8) as u8, len as u8])
}

/// Append the Direct TCP header for a message of `len` bytes.
///
/// `len` must not exceed [`MAX_FRAME_LEN`]; the caller bounds message sizes
/// well below it. A larger value is clamped (a caller bug, caught in debug builds).
pub fn put_frame_header(out: &mut Vec<u8>, len: usize) {
    debug_assert!(len <= MAX_FRAME_LEN, "frame too long: {len}");
    let h = frame_header(len.min(MAX_FRAME_LEN)).unwrap_or([0; 4]);
    out.extend_from_slice(&h);
}

/// Fill in the Direct TCP header at `out[at..at + 4]` with the length of
/// everything after it (for a header reserved before the message was built).
pub fn patch_frame_header(out: &mut [u8], at: usize) -> Result<(), WireError> {
    let body = out
        .len()
        .checked_sub(at.saturating_add(FRAME_HEADER_LEN))
        .ok_or(WireError::Invalid("frame header position"))?;
    let h = frame_header(body)?;
    out[at..at + FRAME_HEADER_LEN].copy_from_slice(&h);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_24_bit_big_endian_length() {
        assert_eq!(frame_len([0, 0x01, 0x02, 0x03]).unwrap(), 0x010203);
        assert_eq!(frame_len([0, 0xFF, 0xFF, 0xFF]).unwrap(), MAX_FRAME_LEN);
        assert_eq!(frame_len([0, 0, 0, 0]).unwrap(), 0);
    }

    #[test]
    fn rejects_nonzero_first_byte() {
        assert!(frame_len([0x85, 0, 0, 0]).is_err());
        assert!(frame_len([0x01, 0, 0, 4]).is_err());
    }

    #[test]
    fn writes_and_patches_header() {
        let mut v = Vec::new();
        put_frame_header(&mut v, 0x1234);
        assert_eq!(v, [0, 0, 0x12, 0x34]);
        let mut m = vec![9, 9, 9, 9, 1, 2, 3];
        patch_frame_header(&mut m, 0).unwrap();
        assert_eq!(m, [0, 0, 0, 3, 1, 2, 3]);
        assert!(patch_frame_header(&mut m, 5).is_err());
        assert!(frame_header(MAX_FRAME_LEN + 1).is_err());
    }
}
