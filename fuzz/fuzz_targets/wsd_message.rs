//! WS-Discovery's reader (crates/ringshare/src/wsd/xml.rs and soap.rs, compiled here from
//! their files: the `ringshare` crate itself is not a dependency of the fuzz crate): what a
//! datagram on UDP 3702 or a POST body on TCP 5357 holds.
//!
//! Input: the bytes of one message. Seeds in fuzz/corpus/wsd_message/: a Probe as wsdd and
//! Windows send it, a Probe for `pub:Computer` with other prefixes, a Resolve, a Get.
//!
//! Invariants: no panic; a document has at most 512 elements; an answer to a Probe, Resolve or
//! Get is well-formed XML whose `wsa:RelatesTo` reads back as the request's message id.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/ringshare/src/wsd/xml.rs"]
#[allow(dead_code)]
mod xml;

#[path = "../../crates/ringshare/src/wsd/soap.rs"]
#[allow(dead_code)]
mod soap;

fuzz_target!(|data: &[u8]| {
    if let Some(doc) = xml::parse(data) {
        assert!(doc.elements.len() <= xml::MAX_ELEMENTS);
    }
    let me = soap::Identity::new("FUZZ", "WORKGROUP", None, 1);
    let Some(msg) = soap::read(data, &me) else {
        return;
    };
    let seq = soap::Sequence {
        instance_id: 1,
        message_number: 1,
    };
    let answer = match msg.request {
        soap::Request::Probe { matches: true } => soap::probe_matches(&me, seq, &msg.id),
        soap::Request::Resolve { ours: true } => {
            soap::resolve_matches(&me, seq, &msg.id, &["http://10.0.0.1:5357/x".into()])
        }
        soap::Request::Get => soap::get_response(&me, &msg.id),
        _ => return,
    };
    let doc = xml::parse(answer.as_bytes()).expect("an answer is well-formed");
    let header = doc
        .child(doc.root(), soap::NS_SOAP, "Header")
        .expect("a header");
    let relates = doc
        .child(header, soap::NS_WSA, "RelatesTo")
        .expect("RelatesTo");
    assert_eq!(relates.text, msg.id.trim());
});
