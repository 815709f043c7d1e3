//! A quinn-proto client endpoint in the same process, datagrams handed
//! across by hand (no sockets).
#![allow(dead_code, unused_imports)]

pub use bytes::BytesMut;
pub use quinn_proto::crypto::rustls::QuicClientConfig;
pub use quinn_proto::{
    ClientConfig, Connection, ConnectionHandle, DatagramEvent, Dir, Endpoint, EndpointConfig,
    Event as QEvent, VarInt,
};
pub use ringshare_quic::*;
pub use rustls::pki_types::{CertificateDer, PrivateKeyDer};
pub use std::net::SocketAddr;
pub use std::sync::Arc;
pub use std::time::{Duration, Instant};

pub const SERVER: &str = "127.0.0.1:4443";
pub const CLIENT: &str = "127.0.0.1:50000";

pub fn server_with(limits: Limits) -> (Server, CertificateDer<'static>) {
    server_with_access(limits, Access::default())
}

/// A server asking for client certificates as `access` says.
pub fn server_with_access(limits: Limits, access: Access) -> (Server, CertificateDer<'static>) {
    let (c, k) = cert::self_signed(&["localhost".into(), "127.0.0.1".into()]).unwrap();
    let id = Identity::from_pem(c.as_bytes(), k.as_bytes()).unwrap();
    let leaf = id.chain[0].clone();
    let cfg = server_config(id, &limits, access).unwrap();
    (Server::new(cfg, limits), leaf)
}

pub fn client_config(root: &CertificateDer<'static>, alpn: &[u8]) -> ClientConfig {
    client_config_as(root, alpn, None)
}

/// A client certificate (chain, leaf first) and its key.
pub struct ClientCert {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

/// A client configuration presenting `cert`, if any.
pub fn client_config_as(
    root: &CertificateDer<'static>,
    alpn: &[u8],
    cert: Option<&ClientCert>,
) -> ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(root.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots);
    let mut tls = match cert {
        Some(c) => builder
            .with_client_auth_cert(c.chain.clone(), c.key.clone_key())
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    tls.alpn_protocols = vec![alpn.to_vec()];
    ClientConfig::new(Arc::new(QuicClientConfig::try_from(tls).unwrap()))
}

/// A certificate authority that issues client certificates.
pub struct Ca {
    pub cert: rcgen::Certificate,
    key: rcgen::KeyPair,
}

impl Ca {
    pub fn new(name: &str) -> Ca {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        p.distinguished_name.push(rcgen::DnType::CommonName, name);
        p.distinguished_name
            .push(rcgen::DnType::OrganizationName, "Example");
        Ca {
            cert: p.self_signed(&key).unwrap(),
            key,
        }
    }

    pub fn der(&self) -> CertificateDer<'static> {
        self.cert.der().clone()
    }

    /// A client certificate (EKU client authentication) for `who`.
    pub fn issue(&self, who: &str) -> ClientCert {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(rcgen::DnType::CommonName, who);
        p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let cert = p.signed_by(&key, &self.cert, &self.key).unwrap();
        ClientCert {
            chain: vec![cert.der().clone()],
            key: PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
        }
    }
}

/// A client endpoint with its connections and a clock shared with the server.
pub struct Client {
    pub ep: Endpoint,
    pub conns: Vec<(ConnectionHandle, Connection)>,
    pub addr: SocketAddr,
}

impl Client {
    pub fn new(port: u16) -> Client {
        Client {
            ep: Endpoint::new(Arc::new(EndpointConfig::default()), None, true, None),
            conns: Vec::new(),
            addr: SocketAddr::new("127.0.0.1".parse().unwrap(), port),
        }
    }

    pub fn connect(&mut self, now: Instant, cfg: ClientConfig) -> usize {
        let (ch, c) = self
            .ep
            .connect(now, cfg, SERVER.parse().unwrap(), "localhost")
            .unwrap();
        self.conns.push((ch, c));
        self.conns.len() - 1
    }

    pub fn conn(&mut self, i: usize) -> &mut Connection {
        &mut self.conns[i].1
    }

    /// Every datagram the client has to send now.
    pub fn outgoing(&mut self, now: Instant) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for (_, c) in &mut self.conns {
            loop {
                let mut buf = Vec::new();
                let Some(t) = c.poll_transmit(now, 1, &mut buf) else {
                    break;
                };
                buf.truncate(t.size);
                out.push(buf);
            }
        }
        out
    }

    pub fn incoming(&mut self, now: Instant, data: &[u8]) {
        let mut buf = Vec::new();
        let ev = self.ep.handle(
            now,
            SERVER.parse().unwrap(),
            None,
            None,
            BytesMut::from(data),
            &mut buf,
        );
        if let Some(DatagramEvent::ConnectionEvent(ch, ev)) = ev {
            for (h, c) in &mut self.conns {
                if *h == ch {
                    c.handle_event(ev);
                    while let Some(e) = c.poll_endpoint_events() {
                        if let Some(back) = self.ep.handle_event(ch, e) {
                            c.handle_event(back);
                        }
                    }
                    break;
                }
            }
        }
    }
}

/// Hands datagrams both ways and fires timers until nothing moves;
/// returns the server's events.
pub fn pump(s: &mut Server, c: &mut Client, now: &mut Instant) -> Vec<Event> {
    let mut events = Vec::new();
    for _ in 0..10_000 {
        let mut moved = false;
        for d in c.outgoing(*now) {
            moved = true;
            s.handle(*now, c.addr, None, &d);
        }
        let mut buf = Vec::new();
        while let Some(t) = s.poll_transmit(*now, 10, &mut buf) {
            moved = true;
            assert_eq!(t.destination, c.addr);
            let seg = t.segment_size.unwrap_or(t.size);
            for d in buf[..t.size].chunks(seg) {
                c.incoming(*now, d);
            }
        }
        while let Some(e) = s.poll_event() {
            events.push(e);
        }
        if !moved {
            // Only timers left: let the nearest one due within 50 ms pass.
            let next = [s.poll_timeout()]
                .into_iter()
                .chain(c.conns.iter_mut().map(|(_, q)| q.poll_timeout()))
                .flatten()
                .min();
            match next {
                Some(t) if t <= *now + Duration::from_millis(50) => {
                    *now = t.max(*now);
                    s.handle_timeout(*now);
                    for (_, q) in &mut c.conns {
                        if q.poll_timeout().is_some_and(|d| d <= *now) {
                            q.handle_timeout(*now);
                        }
                    }
                }
                _ => break,
            }
        }
    }
    events
}

pub fn opened(events: &[Event]) -> Option<ConnId> {
    events.iter().find_map(|e| match e {
        Event::Opened { id, .. } => Some(*id),
        _ => None,
    })
}

/// Reads everything the server has of connection `id`'s stream, pumping.
pub fn server_reads(
    s: &mut Server,
    c: &mut Client,
    now: &mut Instant,
    id: ConnId,
    want: usize,
) -> Vec<u8> {
    let mut got = Vec::new();
    for _ in 0..10_000 {
        match s.read(*now, id, &mut got, 64 * 1024) {
            ReadState::Open(_) => {}
            ReadState::Ended(_) => break,
        }
        if got.len() >= want {
            break;
        }
        pump(s, c, now);
    }
    got
}
