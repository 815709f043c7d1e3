//! SMB over QUIC ([MS-SMB2] 2.1; RFC 9000/9001), sans-I/O.
//!
//! A [`Server`] is one QUIC server endpoint (quinn-proto) with TLS 1.3 from
//! rustls and its aws-lc-rs provider: ALPN `smb` only, no 0-RTT data. The
//! caller gives it datagrams and the time, and takes out datagrams to send
//! ([`Server::poll_transmit`]), the next deadline ([`Server::poll_timeout`])
//! and what happened to connections ([`Server::poll_event`]). Each connection
//! carries one client-initiated bidirectional stream, whose bytes are exactly
//! the Direct-TCP byte stream (a 4-byte header per SMB2 message):
//! [`Server::read`] and [`Server::write`] move them. Any other stream is
//! refused. It never touches a socket or a clock.
#![forbid(unsafe_code)]

pub mod access;
pub mod cert;
pub mod client;
pub mod steer;

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use quinn_proto::crypto::rustls::{HandshakeData, QuicServerConfig};
use quinn_proto::{
    ConnectionHandle, DatagramEvent, Dir, Event as QEvent, ReadError, StreamEvent, StreamId,
    TransportConfig, VarInt, WriteError,
};

pub use access::{Access, ClientCertificate};
pub use cert::Identity;
/// A thread's endpoint configuration ([`steer::Steering::endpoint_config`]).
pub use quinn_proto::EndpointConfig;
/// The endpoint configuration [`server_config`] builds.
pub use quinn_proto::ServerConfig;

/// The ALPN protocol id of SMB over QUIC.
pub const ALPN: &[u8] = b"smb";

/// Limits of one server endpoint.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Connections still in their handshake at once; more are refused
    /// (CONNECTION_REFUSED), and past half of it a client whose address is
    /// not validated is sent a Retry first.
    pub handshakes_max: usize,
    /// Bytes of the SMB stream the peer may send ahead of what was read.
    pub stream_window: u32,
    /// A connection with no packets for this long is closed.
    pub idle_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            handshakes_max: 1024,
            stream_window: 4 * 1024 * 1024,
            idle_timeout: Duration::from_secs(120),
        }
    }
}

impl Limits {
    /// The limits of one of `threads` endpoints that share these: the
    /// half-open handshakes divided among them (at least 16 each).
    pub fn per_thread(self, threads: usize) -> Limits {
        Limits {
            handshakes_max: (self.handshakes_max / threads.max(1)).max(16),
            ..self
        }
    }
}

/// Bytes an unaccepted connection attempt may buffer (0-RTT or reordered
/// packets before the server decides): attempts are decided at once, so
/// this only bounds what one Initial brings.
const INCOMING_BUFFER: u64 = 16 * 1024;

/// The application error code a refused stream or a closed connection gets.
const SMB_CLOSED: u32 = 0;

/// One connection, named by the endpoint (stable while it lives).
pub type ConnId = usize;

/// What happened to a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The client opened its SMB stream: an SMB connection begins.
    Opened { id: ConnId, remote: SocketAddr },
    /// More of the SMB stream can be read.
    Readable(ConnId),
    /// The SMB stream takes more bytes again.
    Writable(ConnId),
    /// The connection is over (after `Opened` only). `reason` for the log.
    Closed { id: ConnId, reason: String },
    /// A handshake the server ended: TLS refused it (a client certificate
    /// refused or missing, another ALPN). `reason` for the log (the caller
    /// rate-limits it per address).
    Refused { remote: SocketAddr, reason: String },
}

/// One datagram (or a GSO batch of `segment_size` each) to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    pub destination: SocketAddr,
    pub size: usize,
    pub segment_size: Option<usize>,
    pub src_ip: Option<IpAddr>,
}

/// What a read of the SMB stream brought.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadState {
    /// Bytes were appended (0: nothing waiting now).
    Open(usize),
    /// The client ended or reset its stream, or the connection is gone:
    /// the SMB connection is over (after the bytes appended).
    Ended(usize),
}

/// Builds the rustls and QUIC configuration: TLS 1.3 only, ALPN `smb`,
/// no 0-RTT (early data size 0), one bidirectional stream per connection,
/// no unidirectional streams, no QUIC datagrams; client certificates as
/// `access` asks ([`access`]).
pub fn server_config(
    identity: Identity,
    limits: &Limits,
    access: Access,
) -> Result<Arc<quinn_proto::ServerConfig>, String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| format!("TLS: {e}"))?;
    let builder = match access.verifier(provider)? {
        Some(v) => builder.with_client_cert_verifier(v),
        None => builder.with_no_client_auth(),
    };
    let mut tls = builder
        .with_single_cert(identity.chain, identity.key)
        .map_err(|e| format!("certificate and key: {e}"))?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    tls.max_early_data_size = 0;
    let crypto = QuicServerConfig::try_from(tls).map_err(|e| format!("QUIC TLS: {e}"))?;
    let mut transport = TransportConfig::default();
    transport
        .max_concurrent_bidi_streams(VarInt::from_u32(1))
        .max_concurrent_uni_streams(VarInt::from_u32(0))
        .datagram_receive_buffer_size(None)
        .stream_receive_window(VarInt::from_u32(limits.stream_window))
        .receive_window(VarInt::from_u32(limits.stream_window.saturating_mul(2)))
        .send_window(u64::from(limits.stream_window) * 4)
        .max_idle_timeout(Some(
            limits
                .idle_timeout
                .try_into()
                .map_err(|_| "idle timeout too long".to_string())?,
        ));
    let mut cfg = quinn_proto::ServerConfig::with_crypto(Arc::new(crypto));
    cfg.transport_config(Arc::new(transport))
        .max_incoming(limits.handshakes_max)
        .incoming_buffer_size(INCOMING_BUFFER)
        .incoming_buffer_size_total(INCOMING_BUFFER * limits.handshakes_max as u64)
        .migration(true);
    Ok(Arc::new(cfg))
}

struct Conn {
    q: quinn_proto::Connection,
    /// The SMB stream, once the client opened it.
    stream: Option<StreamId>,
    /// Still in the handshake (counted against `handshakes_max`).
    handshaking: bool,
    /// `Closed` is owed when it ends (it was `Opened`).
    opened: bool,
    /// Listed in `dirty`.
    listed: bool,
}

/// A QUIC server endpoint for SMB (see the crate's documentation).
pub struct Server {
    endpoint: quinn_proto::Endpoint,
    config: Arc<quinn_proto::ServerConfig>,
    limits: Limits,
    conns: HashMap<ConnectionHandle, Conn>,
    handshaking: usize,
    events: VecDeque<Event>,
    /// Datagrams the endpoint itself answered with (refusals, retries,
    /// stateless resets, version negotiation), ready to go.
    responses: VecDeque<(Transmit, Vec<u8>)>,
    /// Connections that may have something to send.
    dirty: VecDeque<ConnectionHandle>,
}

impl Server {
    pub fn new(config: Arc<quinn_proto::ServerConfig>, limits: Limits) -> Server {
        Server::with_endpoint(config, limits, Arc::new(EndpointConfig::default()))
    }

    /// An endpoint with the endpoint configuration `endpoint`: one of
    /// several threads' ([`steer::Steering::endpoint_config`]).
    pub fn with_endpoint(
        config: Arc<quinn_proto::ServerConfig>,
        limits: Limits,
        endpoint: Arc<EndpointConfig>,
    ) -> Server {
        let endpoint = quinn_proto::Endpoint::new(endpoint, Some(config.clone()), true, None);
        Server {
            endpoint,
            config,
            limits,
            conns: HashMap::new(),
            handshaking: 0,
            events: VecDeque::new(),
            responses: VecDeque::new(),
            dirty: VecDeque::new(),
        }
    }

    /// Connections alive, and those of them still in their handshake.
    pub fn counts(&self) -> (usize, usize) {
        (self.conns.len(), self.handshaking)
    }

    /// One datagram received from `remote` (on local address `local_ip`,
    /// when known). Anything may arrive: garbage is dropped.
    pub fn handle(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        local_ip: Option<IpAddr>,
        data: &[u8],
    ) {
        let mut buf = Vec::new();
        let ev = self
            .endpoint
            .handle(now, remote, local_ip, None, BytesMut::from(data), &mut buf);
        match ev {
            None => {}
            Some(DatagramEvent::ConnectionEvent(ch, ev)) => {
                if let Some(c) = self.conns.get_mut(&ch) {
                    c.q.handle_event(ev);
                    self.process(ch, now);
                }
            }
            Some(DatagramEvent::Response(t)) => self.respond(t, buf),
            Some(DatagramEvent::NewConnection(incoming)) => {
                if self.handshaking >= self.limits.handshakes_max {
                    tracing::debug!(%remote, "QUIC: too many handshakes; refused");
                    let t = self.endpoint.refuse(incoming, &mut buf);
                    self.respond(t, buf);
                    return;
                }
                if self.handshaking >= self.limits.handshakes_max / 2
                    && !incoming.remote_address_validated()
                    && incoming.may_retry()
                {
                    match self.endpoint.retry(incoming, &mut buf) {
                        Ok(t) => self.respond(t, buf),
                        Err(e) => self.endpoint.ignore(e.into_incoming()),
                    }
                    return;
                }
                match self
                    .endpoint
                    .accept(incoming, now, &mut buf, Some(self.config.clone()))
                {
                    Ok((ch, q)) => {
                        self.handshaking += 1;
                        self.conns.insert(
                            ch,
                            Conn {
                                q,
                                stream: None,
                                handshaking: true,
                                opened: false,
                                listed: false,
                            },
                        );
                        self.process(ch, now);
                    }
                    Err(e) => {
                        tracing::debug!(%remote, "QUIC: connection attempt failed: {}", e.cause);
                        // TLS refused the ClientHello (another ALPN).
                        if refused_by_tls(&e.cause) {
                            self.events.push_back(Event::Refused {
                                remote,
                                reason: e.cause.to_string(),
                            });
                        }
                        if let Some(t) = e.response {
                            self.respond(t, buf);
                        }
                    }
                }
            }
        }
    }

    fn respond(&mut self, t: quinn_proto::Transmit, buf: Vec<u8>) {
        let mut bytes = buf;
        bytes.truncate(t.size);
        self.responses.push_back((transmit(&t), bytes));
    }

    fn list(&mut self, ch: ConnectionHandle) {
        if let Some(c) = self.conns.get_mut(&ch) {
            if !c.listed {
                c.listed = true;
                self.dirty.push_back(ch);
            }
        }
    }

    /// Runs a connection's events after something happened to it, and
    /// lists it for sending.
    fn process(&mut self, ch: ConnectionHandle, now: Instant) {
        self.list(ch);
        self.run_events(ch, now);
    }

    /// Runs a connection's events; forgets it once it is drained.
    fn run_events(&mut self, ch: ConnectionHandle, now: Instant) {
        let Some(c) = self.conns.get_mut(&ch) else {
            return;
        };
        while let Some(ev) = c.q.poll_endpoint_events() {
            if let Some(back) = self.endpoint.handle_event(ch, ev) {
                c.q.handle_event(back);
            }
        }
        while let Some(ev) = c.q.poll() {
            match ev {
                QEvent::Connected => {
                    if c.handshaking {
                        c.handshaking = false;
                        self.handshaking -= 1;
                    }
                    let alpn =
                        c.q.crypto_session()
                            .handshake_data()
                            .and_then(|d| d.downcast::<HandshakeData>().ok())
                            .and_then(|d| d.protocol);
                    if alpn.as_deref() != Some(ALPN) {
                        // rustls refuses other protocols already; kept as a belt.
                        c.q.close(now, VarInt::from_u32(SMB_CLOSED), "ALPN".into());
                    }
                }
                QEvent::Stream(StreamEvent::Opened { dir }) => {
                    while let Some(id) = c.q.streams().accept(dir) {
                        if dir == Dir::Bi && c.stream.is_none() && !c.handshaking {
                            c.stream = Some(id);
                            c.opened = true;
                            self.events.push_back(Event::Opened {
                                id: ch.0,
                                remote: c.q.remote_address(),
                            });
                            self.events.push_back(Event::Readable(ch.0));
                        } else {
                            tracing::debug!(stream = %id, "QUIC: a second stream refused");
                            let code = VarInt::from_u32(SMB_CLOSED);
                            let _ = c.q.recv_stream(id).stop(code);
                            if dir == Dir::Bi {
                                let _ = c.q.send_stream(id).reset(code);
                            }
                        }
                    }
                }
                QEvent::Stream(StreamEvent::Readable { id }) if Some(id) == c.stream => {
                    self.events.push_back(Event::Readable(ch.0));
                }
                QEvent::Stream(StreamEvent::Writable { id }) if Some(id) == c.stream => {
                    self.events.push_back(Event::Writable(ch.0));
                }
                QEvent::Stream(StreamEvent::Stopped { id, .. }) if Some(id) == c.stream => {
                    c.q.close(now, VarInt::from_u32(SMB_CLOSED), "stream stopped".into());
                }
                QEvent::ConnectionLost { reason } => {
                    if c.handshaking {
                        c.handshaking = false;
                        self.handshaking -= 1;
                        let remote = c.q.remote_address();
                        tracing::debug!(%remote, "QUIC handshake failed: {reason}");
                        if refused_by_tls(&reason) {
                            self.events.push_back(Event::Refused {
                                remote,
                                reason: reason.to_string(),
                            });
                        }
                    }
                    if std::mem::take(&mut c.opened) {
                        self.events.push_back(Event::Closed {
                            id: ch.0,
                            reason: reason.to_string(),
                        });
                    }
                }
                _ => {}
            }
        }
        if c.q.is_drained() {
            if c.handshaking {
                self.handshaking -= 1;
            }
            if c.opened {
                self.events.push_back(Event::Closed {
                    id: ch.0,
                    reason: "drained".into(),
                });
            }
            self.conns.remove(&ch);
        }
    }

    /// What happened since the last call, one at a time.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The next datagram(s) to send, written into `buf` (cleared first):
    /// up to `max_datagrams` of one connection's (a GSO batch when
    /// `segment_size` is set).
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        max_datagrams: usize,
        buf: &mut Vec<u8>,
    ) -> Option<Transmit> {
        if let Some((t, bytes)) = self.responses.pop_front() {
            buf.clear();
            buf.extend_from_slice(&bytes);
            return Some(t);
        }
        while let Some(&ch) = self.dirty.front() {
            let Some(c) = self.conns.get_mut(&ch) else {
                self.dirty.pop_front();
                continue;
            };
            buf.clear();
            if let Some(t) = c.q.poll_transmit(now, max_datagrams.max(1), buf) {
                return Some(transmit(&t));
            }
            c.listed = false;
            self.dirty.pop_front();
            // Sending may have changed its state (a close sent: draining).
            self.run_events(ch, now);
        }
        None
    }

    /// The earliest deadline of any connection.
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        self.conns
            .values_mut()
            .filter_map(|c| c.q.poll_timeout())
            .min()
    }

    /// Runs every connection's timers that are due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        let due: Vec<ConnectionHandle> = self
            .conns
            .iter_mut()
            .filter_map(|(h, c)| c.q.poll_timeout().is_some_and(|d| d <= now).then_some(*h))
            .collect();
        for ch in due {
            if let Some(c) = self.conns.get_mut(&ch) {
                c.q.handle_timeout(now);
            }
            self.process(ch, now);
        }
    }

    /// Appends up to `max` bytes of connection `id`'s SMB stream to `out`.
    pub fn read(&mut self, now: Instant, id: ConnId, out: &mut Vec<u8>, max: usize) -> ReadState {
        let ch = ConnectionHandle(id);
        let Some(c) = self.conns.get_mut(&ch) else {
            return ReadState::Ended(0);
        };
        let Some(sid) = c.stream else {
            return ReadState::Open(0);
        };
        let r = read_stream(&mut c.q, sid, out, max);
        self.process(ch, now);
        r
    }

    /// Queues bytes on connection `id`'s SMB stream; returns how many were
    /// taken (0: flow control is full, `Writable` comes later), or `None`
    /// when the stream or connection is gone.
    pub fn write(&mut self, now: Instant, id: ConnId, data: &[u8]) -> Option<usize> {
        let ch = ConnectionHandle(id);
        let c = self.conns.get_mut(&ch)?;
        let sid = c.stream?;
        let n = match c.q.send_stream(sid).write(data) {
            Ok(n) => Some(n),
            Err(WriteError::Blocked) => Some(0),
            Err(_) => None,
        };
        self.process(ch, now);
        n
    }

    /// Closes connection `id` (the SMB side is done with it).
    pub fn close(&mut self, now: Instant, id: ConnId) {
        let ch = ConnectionHandle(id);
        if let Some(c) = self.conns.get_mut(&ch) {
            // No `Closed` event for a close the caller asked for.
            c.opened = false;
            c.q.close(now, VarInt::from_u32(SMB_CLOSED), "closed".into());
            self.process(ch, now);
        }
    }

    /// The TLS server name the client asked for (SNI), if any.
    pub fn server_name(&self, id: ConnId) -> Option<String> {
        let c = self.conns.get(&ConnectionHandle(id))?;
        c.q.crypto_session()
            .handshake_data()?
            .downcast::<HandshakeData>()
            .ok()?
            .server_name
    }
}

/// Appends up to `max` bytes of stream `sid` to `out` (ended: finished or
/// reset by the peer, or gone).
fn read_stream(
    q: &mut quinn_proto::Connection,
    sid: StreamId,
    out: &mut Vec<u8>,
    max: usize,
) -> ReadState {
    let (mut got, mut ended) = (0, false);
    match q.recv_stream(sid).read(true) {
        Ok(mut chunks) => {
            while got < max {
                match chunks.next(max - got) {
                    Ok(Some(chunk)) => {
                        got += chunk.bytes.len();
                        out.extend_from_slice(&chunk.bytes);
                    }
                    Ok(None) | Err(ReadError::Reset(_)) => {
                        ended = true;
                        break;
                    }
                    Err(ReadError::Blocked) => break,
                }
            }
            let _ = chunks.finalize();
        }
        Err(_) => ended = true,
    }
    if ended {
        ReadState::Ended(got)
    } else {
        ReadState::Open(got)
    }
}

/// The server's TLS ended the handshake (a TLS alert it sent: a crypto
/// error code, 0x100 to 0x1ff, RFC 9001 4.8), not the client or a timeout.
fn refused_by_tls(reason: &quinn_proto::ConnectionError) -> bool {
    matches!(reason, quinn_proto::ConnectionError::TransportError(e)
        if (0x100..0x200).contains(&u64::from(e.code)))
}

fn transmit(t: &quinn_proto::Transmit) -> Transmit {
    Transmit {
        destination: t.destination,
        size: t.size,
        segment_size: t.segment_size,
        src_ip: t.src_ip,
    }
}
