//! Self-relative security descriptors ([MS-DTYP] 2.4.6), as SET_INFO and the
//! SecD create context carry them, with SIDs and ACLs on their own; what
//! decodes must re-encode and decode to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringshare_wire::consts::SecurityInformation;
use ringshare_wire::security::{Acl, SecurityDescriptor, Sid};

fuzz_target!(|data: &[u8]| {
    if let Ok(sd) = SecurityDescriptor::decode(data) {
        let mut out = Vec::new();
        if sd.encode(SecurityInformation(0xF), &mut out).is_ok() {
            let again = SecurityDescriptor::decode(&out).expect("re-encoded descriptor decodes");
            assert_eq!(sd, again, "security descriptor round trip");
        }
    }
    if let Ok(acl) = Acl::decode(data) {
        let mut out = Vec::new();
        if acl.encode(&mut out).is_ok() {
            assert_eq!(Acl::decode(&out).as_ref(), Ok(&acl), "ACL round trip");
        }
    }
    if let Ok(sid) = Sid::decode(data) {
        let mut out = Vec::new();
        sid.encode(&mut out);
        assert_eq!(out.len(), sid.encoded_len());
        assert_eq!(Sid::decode(&out).as_ref(), Ok(&sid), "SID round trip");
    }
});
