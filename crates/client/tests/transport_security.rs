//! SMB over QUIC's SMB2_TRANSPORT_CAPABILITIES ([MS-SMB2] 2.2.3.1.5) from
//! the client's side, against the server core: a client offering
//! ACCEPT_TRANSPORT_LEVEL_SECURITY on a QUIC connection is answered with it
//! and not asked to encrypt, even where the server requires encryption;
//! over TCP the offer changes nothing: a client that cannot encrypt is
//! refused there.

use crate::support;

use ringshare_core::{EncryptPolicy, SigningPolicy, Transport};
use ringshare_wire::consts::Dialect;
use support::*;

/// A client that offers no cipher, on a server requiring encryption.
fn pair(transport: Transport, offer: bool) -> Pair {
    let mut cfg = server_config(SigningPolicy::IfRequired, Vec::new());
    cfg.encrypt = EncryptPolicy::Required;
    let mut opts = options(Dialect::SMB3_1_1);
    opts.transport_security = offer;
    let mut p = Pair::on(state(cfg), opts);
    p.server.set_transport(transport);
    p
}

#[test]
fn over_quic_a_client_offering_transport_security_is_not_asked_to_encrypt() {
    let mut p = pair(Transport::Quic, true);
    p.pump().expect("handshake");
    assert!(p.client.is_ready(), "{:?}", p.events);
    assert!(p.client.transport_security());
    assert!(!p.client.is_encrypting());
    let f = p.open("plain.bin");
    p.client.write(2, f, 0, b"over quic").unwrap();
    p.pump().unwrap();
    assert!(p.result(2).is_ok());
}

#[test]
fn over_tcp_or_without_the_offer_a_client_that_cannot_encrypt_is_refused() {
    for (transport, offer) in [(Transport::Tcp, true), (Transport::Quic, false)] {
        let mut p = pair(transport, offer);
        let e = p.pump().expect_err("refused");
        assert!(
            e.to_string().contains("ACCESS_DENIED"),
            "{transport:?} {offer}: {e}"
        );
        assert!(!p.client.transport_security());
    }
}
