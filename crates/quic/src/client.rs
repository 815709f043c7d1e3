//! The client side of SMB over QUIC, sans-I/O like [`crate::Server`]: one
//! quinn-proto client connection (TLS 1.3 with rustls and aws-lc-rs, ALPN
//! `smb`) that opens the one bidirectional stream once the handshake is done
//! and moves its bytes, which are the Direct-TCP byte stream of an SMB
//! client ([MS-SMB2] 2.1). The caller gives it datagrams and the time and
//! sends what [`Client::poll_transmit`] writes: `ringshare bench
//! --transport quic` drives it from its ring.
//!
//! The server's certificate is trusted as [`Trust`] says: a certificate
//! taken as the only root (the server's own self-signed one, or its CA),
//! or the SHA-256 fingerprint of the server's certificate (any name, any
//! issuer: the handshake signature is still checked against it).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use quinn_proto::crypto::rustls::QuicClientConfig;
use quinn_proto::{
    ClientConfig, ConnectionHandle, DatagramEvent, Dir, EndpointConfig, Event as QEvent,
    StreamEvent, StreamId, TransportConfig, VarInt, WriteError,
};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use crate::{transmit, ReadState, Transmit, ALPN};

/// How the client trusts the server's certificate.
#[derive(Clone, Debug)]
pub enum Trust {
    /// This certificate is the only trust root (a self-signed server
    /// certificate, or the CA that issued it); the name is checked.
    Root(CertificateDer<'static>),
    /// The server's certificate must have this SHA-256 (32 bytes).
    Fingerprint([u8; 32]),
}

impl Trust {
    /// `sha256:HEX` (colons allowed) or a certificate file (PEM or DER).
    pub fn parse(s: &str) -> Result<Trust, String> {
        if let Some(hex) = s.strip_prefix("sha256:") {
            let h: String = hex.chars().filter(|c| *c != ':').collect();
            let bytes = hex::decode(&h).map_err(|_| format!("{s:?}: not hex"))?;
            let fp: [u8; 32] = bytes
                .try_into()
                .map_err(|_| format!("{s:?}: a SHA-256 has 32 bytes"))?;
            return Ok(Trust::Fingerprint(fp));
        }
        let data = std::fs::read(s).map_err(|e| format!("{s}: {e}"))?;
        let der = match crate::cert::certificates_from_pem(&data) {
            Ok(mut certs) => certs.swap_remove(0),
            Err(_) => CertificateDer::from(data),
        };
        Ok(Trust::Root(der))
    }
}

/// Accepts exactly the certificate whose SHA-256 it knows; checks the
/// handshake's signatures with it as rustls' own verifier does.
#[derive(Debug)]
struct Pinned {
    sha256: [u8; 32],
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        use sha2::{Digest, Sha256};
        if Sha256::digest(end_entity.as_ref()).as_slice() == self.sha256 {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(format!(
                "the server's certificate has SHA-256 {}, not the one trusted",
                crate::cert::fingerprint(end_entity)
            )))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The client's QUIC configuration: TLS 1.3, ALPN `smb`, the server
/// trusted as `trust` says, windows of `window` bytes for the stream (the
/// connection twice that): a client keeps several 1 MiB READs in flight.
pub fn client_config(trust: &Trust, window: u32) -> Result<ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| format!("TLS: {e}"))?;
    let mut tls = match trust {
        Trust::Root(der) => {
            let mut roots = rustls::RootCertStore::empty();
            roots
                .add(der.clone())
                .map_err(|e| format!("the trusted certificate: {e}"))?;
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        Trust::Fingerprint(sha256) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Pinned {
                sha256: *sha256,
                provider,
            }))
            .with_no_client_auth(),
    };
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = QuicClientConfig::try_from(tls).map_err(|e| format!("QUIC TLS: {e}"))?;
    let mut transport = TransportConfig::default();
    transport
        .stream_receive_window(VarInt::from_u32(window))
        .receive_window(VarInt::from_u32(window.saturating_mul(2)))
        .send_window(u64::from(window) * 2);
    let mut cfg = ClientConfig::new(Arc::new(crypto));
    cfg.transport_config(Arc::new(transport));
    Ok(cfg)
}

/// What happened to the client's connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientEvent {
    /// The handshake is done and the SMB stream open: bytes may be written.
    Connected,
    /// The connection is over; the reason.
    Closed(String),
}

/// One SMB-over-QUIC client connection (see the module's documentation).
pub struct Client {
    endpoint: quinn_proto::Endpoint,
    handle: ConnectionHandle,
    q: quinn_proto::Connection,
    stream: Option<StreamId>,
    events: Vec<ClientEvent>,
    closed: bool,
}

impl Client {
    /// Starts a connection to `server`, asking for `server_name` (SNI and
    /// the name checked against a [`Trust::Root`] certificate).
    pub fn connect(
        now: Instant,
        config: ClientConfig,
        server: SocketAddr,
        server_name: &str,
    ) -> Result<Client, String> {
        let mut endpoint =
            quinn_proto::Endpoint::new(Arc::new(EndpointConfig::default()), None, true, None);
        let (handle, q) = endpoint
            .connect(now, config, server, server_name)
            .map_err(|e| format!("QUIC connect to {server}: {e}"))?;
        Ok(Client {
            endpoint,
            handle,
            q,
            stream: None,
            events: Vec::new(),
            closed: false,
        })
    }

    /// One datagram received from `from`.
    pub fn handle(&mut self, now: Instant, from: SocketAddr, data: &[u8]) {
        let mut buf = Vec::new();
        if let Some(DatagramEvent::ConnectionEvent(h, ev)) =
            self.endpoint
                .handle(now, from, None, None, BytesMut::from(data), &mut buf)
        {
            if h == self.handle {
                self.q.handle_event(ev);
            }
        }
        self.run_events();
    }

    fn run_events(&mut self) {
        while let Some(ev) = self.q.poll_endpoint_events() {
            if let Some(back) = self.endpoint.handle_event(self.handle, ev) {
                self.q.handle_event(back);
            }
        }
        while let Some(ev) = self.q.poll() {
            match ev {
                QEvent::Connected => {
                    self.stream = self.q.streams().open(Dir::Bi);
                    if self.stream.is_some() {
                        self.events.push(ClientEvent::Connected);
                    }
                }
                QEvent::ConnectionLost { reason } => {
                    self.closed = true;
                    self.events.push(ClientEvent::Closed(reason.to_string()));
                }
                QEvent::Stream(StreamEvent::Stopped { .. }) => {
                    self.closed = true;
                    self.events
                        .push(ClientEvent::Closed("the server stopped the stream".into()));
                }
                _ => {}
            }
        }
    }

    /// What happened since the last call.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        (!self.events.is_empty()).then(|| self.events.remove(0))
    }

    /// The stream is open (the handshake done) and the connection alive.
    pub fn is_open(&self) -> bool {
        self.stream.is_some() && !self.closed
    }

    /// The next datagram(s) to send into `buf` (cleared first): up to
    /// `max_datagrams` (a GSO batch when `segment_size` is set).
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        max_datagrams: usize,
        buf: &mut Vec<u8>,
    ) -> Option<Transmit> {
        buf.clear();
        let t = self.q.poll_transmit(now, max_datagrams.max(1), buf)?;
        Some(transmit(&t))
    }

    /// When [`Client::handle_timeout`] is next due.
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        self.q.poll_timeout()
    }

    /// Runs the connection's timers due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.q.poll_timeout().is_some_and(|d| d <= now) {
            self.q.handle_timeout(now);
            self.run_events();
        }
    }

    /// Appends up to `max` bytes of the SMB stream to `out`.
    pub fn read(&mut self, out: &mut Vec<u8>, max: usize) -> ReadState {
        let Some(sid) = self.stream.filter(|_| !self.closed) else {
            return if self.closed {
                ReadState::Ended(0)
            } else {
                ReadState::Open(0)
            };
        };
        let r = crate::read_stream(&mut self.q, sid, out, max);
        self.run_events();
        r
    }

    /// Queues bytes on the SMB stream; how many were taken (0: flow control
    /// is full or the handshake not done), `None` when the stream is gone.
    pub fn write(&mut self, data: &[u8]) -> Option<usize> {
        if self.closed {
            return None;
        }
        let Some(sid) = self.stream else {
            return Some(0);
        };
        let n = match self.q.send_stream(sid).write(data) {
            Ok(n) => Some(n),
            Err(WriteError::Blocked) => Some(0),
            Err(_) => None,
        };
        self.run_events();
        n
    }

    /// Closes the connection.
    pub fn close(&mut self, now: Instant) {
        self.q
            .close(now, VarInt::from_u32(crate::SMB_CLOSED), "done".into());
        self.run_events();
    }
}
