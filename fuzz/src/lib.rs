//! Helpers shared by the fuzz targets in `fuzz_targets/`.
#![forbid(unsafe_code)]

/// Split `data` into pieces, each `[u16 LE length][bytes]`; a length past the
/// end takes what is left.
pub fn length_prefixed(mut data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while data.len() >= 2 {
        let n = usize::from(u16::from_le_bytes([data[0], data[1]]));
        let rest = &data[2..];
        let n = n.min(rest.len());
        out.push(&rest[..n]);
        data = &rest[n..];
    }
    out
}

/// The message's first 64 bytes (the SMB2 header), or all of it when shorter:
/// what an encoder that appends a body is given to append to.
pub fn header_of(msg: &[u8]) -> Vec<u8> {
    msg[..msg.len().min(64)].to_vec()
}

/// decode(encode(decode(x))) == decode(x) for a message body type: `decode`
/// takes the whole message (header + body), `encode` appends the body.
/// With a third argument, a closure that clears in the first decode what the
/// encoder documents it does not write.
#[macro_export]
macro_rules! round_trip_msg {
    ($ty:ty, $msg:expr) => {
        $crate::round_trip_msg!($ty, $msg, |_: &mut $ty| {})
    };
    ($ty:ty, $msg:expr, $not_encoded:expr) => {{
        let msg: &[u8] = $msg;
        if let Ok(mut first) = <$ty>::decode(msg) {
            ($not_encoded)(&mut first);
            let mut out = $crate::header_of(msg);
            first.encode(&mut out);
            let second = <$ty>::decode(&out)
                .unwrap_or_else(|e| panic!("{} re-encoded does not decode: {e}", stringify!($ty)));
            assert_eq!(first, second, "{} does not round-trip", stringify!($ty));
        }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_prefixed_splits_and_truncates_the_last_piece() {
        let data = [2, 0, b'a', b'b', 5, 0, b'c'];
        assert_eq!(length_prefixed(&data), vec![&b"ab"[..], &b"c"[..]]);
    }
}
