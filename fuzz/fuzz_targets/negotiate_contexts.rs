//! NEGOTIATE contexts ([MS-SMB2] 2.2.3.1, 2.2.4.1): the context list walk and
//! each context's Data, with their round trip. Input: [u16 LE count][list].
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringshare_wire::negotiate::{decode_contexts, encode_contexts, NegotiateContext};

fuzz_target!(|data: &[u8]| {
    let Some((count, list)) = data.split_first_chunk::<2>() else {
        return;
    };
    let count = u16::from_le_bytes(*count);
    if let Ok(first) = decode_contexts(list, 0, count, 0) {
        let mut out = Vec::new();
        let off = encode_contexts(&mut out, 0, &first);
        let second = decode_contexts(&out, off, count, 0).expect("re-encoded contexts decode");
        assert_eq!(first, second, "negotiate contexts round trip");
    }
    // One context's Data on its own, typed by the first two bytes.
    if let Some((ty, rest)) = list.split_first_chunk::<2>() {
        let ty = ringshare_wire::consts::NegotiateContextType(u16::from_le_bytes(*ty));
        // The SMB3 POSIX extensions' context: a list of 16-byte ids, or invalid.
        let _ = ringshare_wire::posix::negotiate_offers_posix(rest);
        if let Ok(c) = NegotiateContext::decode_data(ty, rest) {
            let mut out = Vec::new();
            c.encode_data(&mut out);
            assert_eq!(NegotiateContext::decode_data(ty, &out).as_ref(), Ok(&c));
        }
    }
});
