//! The compound chain walk ([MS-SMB2] 3.3.5.2.7): every member is a slice of
//! the input, the walk ends, and every member it yields has a header.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringshare_wire::header::{split_compound, Header};

fuzz_target!(|data: &[u8]| {
    let mut total = 0usize;
    for (i, m) in split_compound(data).enumerate() {
        assert!(
            i <= data.len() / 64,
            "more members than 64-byte headers fit"
        );
        let Ok(m) = m else { break };
        let h = Header::decode(m).expect("a member the walk yields has a header");
        if h.next_command != 0 {
            assert_eq!(m.len(), h.next_command as usize);
        }
        total += m.len();
    }
    assert!(total <= data.len());
});
