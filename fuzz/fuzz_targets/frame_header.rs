//! The direct-TCP frame header ([MS-SMB2] 2.1) and the SMB2 header (sync and
//! async forms, [MS-SMB2] 2.2.1), with the header's round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringshare_wire::framing::{frame_header, frame_len};
use ringshare_wire::header::{protocol_of, Header};

fuzz_target!(|data: &[u8]| {
    if let Some(h) = data.get(..4) {
        if let Ok(n) = frame_len([h[0], h[1], h[2], h[3]]) {
            assert_eq!(frame_header(n).ok(), Some([h[0], h[1], h[2], h[3]]));
        }
    }
    let msg = data.get(4..).unwrap_or_default();
    let _ = protocol_of(msg);
    if let Ok(first) = Header::decode(msg) {
        let mut out = Vec::new();
        first.encode(&mut out);
        assert_eq!(out.len(), 64, "an SMB2 header is 64 bytes");
        assert_eq!(
            Header::decode(&out).as_ref(),
            Ok(&first),
            "header round trip"
        );
    }
});
