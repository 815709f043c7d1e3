//! The crate's own client ([`ringshare_quic::client`], what `ringshare bench
//! --transport quic` drives) against its server, datagrams handed across by
//! hand.

use crate::common;
use common::{server_with, Event, Instant, Limits, ReadState, Server, SocketAddr};
use ringshare_quic::client::{client_config, Client, ClientEvent, Trust};
use sha2::{Digest, Sha256};
use std::time::Duration;

const SERVER: &str = "127.0.0.1:4443";
const CLIENT: &str = "127.0.0.1:50001";

/// Moves datagrams both ways and fires due timers until nothing moves.
fn pump(s: &mut Server, c: &mut Client, now: &mut Instant, events: &mut Vec<Event>) {
    let (saddr, caddr): (SocketAddr, SocketAddr) =
        (SERVER.parse().unwrap(), CLIENT.parse().unwrap());
    let mut buf = Vec::new();
    for _ in 0..100_000 {
        let mut moved = false;
        while let Some(t) = c.poll_transmit(*now, 10, &mut buf) {
            moved = true;
            let seg = t.segment_size.unwrap_or(t.size);
            for d in buf[..t.size].chunks(seg) {
                s.handle(*now, caddr, None, d);
            }
        }
        while let Some(t) = s.poll_transmit(*now, 10, &mut buf) {
            moved = true;
            let seg = t.segment_size.unwrap_or(t.size);
            for d in buf[..t.size].chunks(seg) {
                c.handle(*now, saddr, d);
            }
        }
        while let Some(e) = s.poll_event() {
            events.push(e);
        }
        if !moved {
            let next = [s.poll_timeout(), c.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            match next {
                Some(t) if t <= *now + Duration::from_millis(50) => {
                    *now = t.max(*now);
                    s.handle_timeout(*now);
                    c.handle_timeout(*now);
                }
                _ => return,
            }
        }
    }
}

fn connect(trust: &Trust) -> (Server, Client, Instant, Vec<Event>) {
    let (s, _) = server_with(Limits::default());
    let now = Instant::now();
    let cfg = client_config(trust, 4 << 20).unwrap();
    let c = Client::connect(now, cfg, SERVER.parse().unwrap(), "localhost").unwrap();
    (s, c, now, Vec::new())
}

/// The server's certificate, from a first handshake's server (same key per server).
fn trust_pair() -> (Server, CertificateAndHash) {
    let (s, leaf) = server_with(Limits::default());
    let hash: [u8; 32] = Sha256::digest(leaf.as_ref()).into();
    (s, (leaf, hash))
}
type CertificateAndHash = (rustls::pki_types::CertificateDer<'static>, [u8; 32]);

fn client_for(trust: Trust) -> (Client, Instant) {
    let now = Instant::now();
    let cfg = client_config(&trust, 4 << 20).unwrap();
    (
        Client::connect(now, cfg, SERVER.parse().unwrap(), "localhost").unwrap(),
        now,
    )
}

#[test]
fn a_client_trusting_the_certificate_carries_a_megabyte_each_way() {
    for by_fingerprint in [false, true] {
        let (mut s, (leaf, hash)) = trust_pair();
        let trust = if by_fingerprint {
            Trust::Fingerprint(hash)
        } else {
            Trust::Root(leaf)
        };
        let (mut c, mut now) = client_for(trust);
        let mut events = Vec::new();
        pump(&mut s, &mut c, &mut now, &mut events);
        assert_eq!(c.poll_event(), Some(ClientEvent::Connected));
        assert!(c.is_open());
        let up: Vec<u8> = (0..1 << 20).map(|i| (i * 7 % 251) as u8).collect();
        let (mut sent, mut got, mut id) = (0, Vec::new(), None);
        for _ in 0..10_000 {
            if sent < up.len() {
                sent += c.write(&up[sent..]).expect("stream open");
            }
            pump(&mut s, &mut c, &mut now, &mut events);
            id = id.or_else(|| common::opened(&events));
            if let Some(id) = id {
                let _ = s.read(now, id, &mut got, 1 << 20);
            }
            if got.len() == up.len() {
                break;
            }
        }
        assert!(got == up, "the server read what the client wrote");
        let id = id.unwrap();
        let (mut back, mut at) = (Vec::new(), 0);
        for _ in 0..10_000 {
            if at < up.len() {
                at += s.write(now, id, &up[at..]).expect("open");
            }
            pump(&mut s, &mut c, &mut now, &mut events);
            assert!(matches!(c.read(&mut back, 1 << 20), ReadState::Open(_)));
            if back.len() == up.len() {
                break;
            }
        }
        assert!(back == up, "the client read what the server wrote");
    }
}

#[test]
fn a_client_refuses_a_server_whose_certificate_it_does_not_trust() {
    let (_, other) = trust_pair();
    for trust in [Trust::Root(other.0), Trust::Fingerprint([7; 32])] {
        let (mut s, mut c, mut now, mut events) = connect(&trust);
        pump(&mut s, &mut c, &mut now, &mut events);
        match c.poll_event() {
            Some(ClientEvent::Closed(reason)) => assert!(!reason.is_empty()),
            e => panic!("{trust:?}: {e:?}"),
        }
        assert!(!c.is_open());
        assert_eq!(c.write(b"x"), None);
        assert!(common::opened(&events).is_none());
    }
}

#[test]
fn a_trust_is_read_from_a_fingerprint_or_a_certificate_file() {
    let hex = "7F:01".to_string() + &":AA".repeat(30);
    assert!(
        matches!(Trust::parse(&format!("sha256:{hex}")), Ok(Trust::Fingerprint(f)) if f[0] == 0x7f && f[31] == 0xaa)
    );
    assert!(Trust::parse("sha256:7F01").is_err());
    let (c, _) = ringshare_quic::cert::self_signed(&["localhost".into()]).unwrap();
    let dir = std::env::temp_dir().join(format!("rs-quic-trust-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pem = dir.join("c.pem");
    std::fs::write(&pem, &c).unwrap();
    let der = ringshare_quic::cert::certificates_from_pem(c.as_bytes())
        .unwrap()
        .remove(0);
    assert!(matches!(Trust::parse(pem.to_str().unwrap()), Ok(Trust::Root(d)) if d == der));
    let der_file = dir.join("c.der");
    std::fs::write(&der_file, der.as_ref()).unwrap();
    assert!(matches!(Trust::parse(der_file.to_str().unwrap()), Ok(Trust::Root(d)) if d == der));
    assert!(Trust::parse(dir.join("none").to_str().unwrap()).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}
