//! DCE-style tokens between an acceptor and an initiator context of one key: what one side
//! makes the other opens, and every change to a token, the payload or what is signed only is
//! refused, as is a token seen twice.

use super::*;

/// An acceptor and the initiator's mirror of it, on an AES-256 key.
fn pair() -> (DceSecurity, DceSecurity) {
    let acceptor = DceSecurity {
        key: vec![7; 32],
        etype: super::super::etype::AES256,
        initiator_key: (vec![9; 32], super::super::etype::AES256),
        send_seq: 100,
        recv_seq: 5,
        me: ACCEPTOR,
        peer: INITIATOR,
    };
    let initiator = DceSecurity {
        send_seq: 5,
        recv_seq: 100,
        me: INITIATOR,
        peer: ACCEPTOR,
        key: acceptor.key.clone(),
        initiator_key: acceptor.initiator_key.clone(),
        ..acceptor
    };
    (acceptor, initiator)
}

#[test]
fn a_sealed_payload_opens_on_the_other_side_and_any_change_is_refused() {
    let (mut server, mut client) = pair();
    let stub = b"a stub of 32 bytes, padded......".to_vec();
    let mut sealed = stub.clone();
    let token = client.wrap(b"header", &mut sealed, b"trailer").unwrap();
    assert_eq!(token.len(), WRAP_LEN);
    assert_ne!(sealed, stub);
    // RRC 28, EC 16, not sent by the acceptor, sealed, acceptor subkey.
    assert_eq!(token[..8], [5, 4, 6, 0xff, 0, 16, 0, 28]);
    for i in 0..token.len() {
        let mut t = token.clone();
        t[i] ^= 1;
        let mut p = sealed.clone();
        assert!(
            server.unwrap(b"header", &mut p, b"trailer", &t).is_err(),
            "byte {i}"
        );
    }
    let mut p = sealed.clone();
    p[3] ^= 1;
    assert!(server
        .unwrap(b"header", &mut p, b"trailer", &token)
        .is_err());
    let mut p = sealed.clone();
    assert!(server
        .unwrap(b"headeR", &mut p, b"trailer", &token)
        .is_err());
    assert!(server
        .unwrap(b"header", &mut p, b"trailer", &token[..60])
        .is_err());
    let mut p = sealed.clone();
    server
        .unwrap(b"header", &mut p, b"trailer", &token)
        .unwrap();
    assert_eq!(p, stub);
    // Seen twice: its sequence number is behind.
    let mut p = sealed.clone();
    assert!(server
        .unwrap(b"header", &mut p, b"trailer", &token)
        .is_err());
    // And back.
    let mut reply = b"an answer".to_vec();
    let token = server.wrap(b"h", &mut reply, b"t").unwrap();
    client.unwrap(b"h", &mut reply, b"t", &token).unwrap();
    assert_eq!(reply, b"an answer");
}

#[test]
fn a_mic_verifies_once_in_sequence_and_not_over_other_bytes() {
    let (mut server, mut client) = pair();
    let m1 = client.make_mic(b"pdu one").unwrap();
    let m2 = client.make_mic(b"pdu two").unwrap();
    assert_eq!(m1.len(), MIC_LEN);
    assert!(server.verify_mic(b"pdu two", &m2).is_err(), "out of order");
    assert!(server.verify_mic(b"pdu 0ne", &m1).is_err());
    server.verify_mic(b"pdu one", &m1).unwrap();
    assert!(server.verify_mic(b"pdu one", &m1).is_err(), "replayed");
    server.verify_mic(b"pdu two", &m2).unwrap();
    let back = server.make_mic(b"answer").unwrap();
    assert!(
        server.verify_mic(b"answer", &back).is_err(),
        "our own direction"
    );
    client.verify_mic(b"answer", &back).unwrap();
}
