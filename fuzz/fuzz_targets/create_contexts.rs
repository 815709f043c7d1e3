//! CREATE contexts ([MS-SMB2] 2.2.13.2, 2.2.14.2): the chain walk and the
//! decoder of every context the server reads, with round trips where an
//! encoder exists. Input: the CreateContexts buffer of a CREATE message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringshare_wire::create::{
    decode_contexts, decode_durable_reconnect, decode_maximal_access_request,
    decode_maximal_access_response, decode_u64_context, encode_contexts, ContextTag,
    DurableHandleReconnectV2, DurableHandleRequestV2, Lease,
};
use ringshare_wire::fscc::FileFullEaInformation;
use ringshare_wire::security::SecurityDescriptor;

fuzz_target!(|data: &[u8]| {
    let Ok(contexts) = decode_contexts(data) else {
        return;
    };
    let mut out = Vec::new();
    encode_contexts(&mut out, 0, &contexts);
    let again = decode_contexts(&out).expect("re-encoded create contexts decode");
    assert_eq!(contexts, again, "create contexts round trip");
    for c in &contexts {
        let d: &[u8] = &c.data;
        match c.tag() {
            ContextTag::EaBuffer => {
                if let Ok(ea) = FileFullEaInformation::decode(d) {
                    let mut out = Vec::new();
                    ea.encode(&mut out);
                    assert_eq!(FileFullEaInformation::decode(&out).as_ref(), Ok(&ea));
                }
            }
            ContextTag::SdBuffer => drop(SecurityDescriptor::decode(d)),
            ContextTag::DurableHandleReconnect => drop(decode_durable_reconnect(d)),
            ContextTag::AllocationSize | ContextTag::TimewarpToken => drop(decode_u64_context(d)),
            ContextTag::QueryMaximalAccess => {
                let _ = decode_maximal_access_request(d);
                let _ = decode_maximal_access_response(d);
            }
            ContextTag::RequestLease => {
                if let Ok(l) = Lease::decode(d) {
                    assert_eq!(
                        Lease::decode(&l.encode()).as_ref(),
                        Ok(&l),
                        "lease round trip"
                    );
                }
            }
            ContextTag::DurableHandleRequestV2 => {
                if let Ok(v) = DurableHandleRequestV2::decode(d) {
                    assert_eq!(DurableHandleRequestV2::decode(&v.encode()).as_ref(), Ok(&v));
                }
            }
            ContextTag::DurableHandleReconnectV2 => drop(DurableHandleReconnectV2::decode(d)),
            // The POSIX context: its mode in, and (a client reads) the open's POSIX
            // information out, and FILE_POSIX_INFORMATION with a listing entry of its class.
            ContextTag::Posix => {
                let _ = ringshare_wire::posix::decode_create_mode(d);
                if let Ok(cc) = ringshare_wire::posix::PosixCc::decode(d) {
                    let mut out = Vec::new();
                    cc.encode(&mut out);
                    assert_eq!(
                        ringshare_wire::posix::PosixCc::decode(&out).as_ref(),
                        Ok(&cc)
                    );
                }
                if let Ok(i) = ringshare_wire::posix::FilePosixInfo::decode(d) {
                    let mut out = Vec::new();
                    i.encode(&mut out);
                    assert_eq!(
                        ringshare_wire::posix::FilePosixInfo::decode(&out).as_ref(),
                        Ok(&i)
                    );
                }
                let _ = ringshare_wire::posix::decode_dir_entry(d);
            }
            _ => {}
        }
    }
});
