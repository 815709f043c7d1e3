//! WS-Discovery: Windows' Network folder finds the server as it finds a Samba
//! server with wsdd beside it (Samba's smbd does no WS-Discovery itself).
//! With `wsd = yes` (ringshare's option, default yes like `multicast dns
//! register`), a thread of its own, away from the I/O threads, with plain
//! blocking sockets and `poll`:
//!
//! - joins 239.255.255.250:3702 (and [ff02::c]:3702 where the interface has
//!   IPv6) on the interfaces the server is reached on ([`links`]), when it
//!   listens on port 445 (the only port Windows' Network folder uses);
//! - multicasts Hello at start and Bye at stop (SIGTERM), twice each, as
//!   SOAP-over-UDP repeats multicast messages;
//! - answers a Probe for `wsdp:Device` / `pub:Computer` (or for no type) with
//!   ProbeMatches and a Resolve of its endpoint with ResolveMatches, unicast
//!   to the sender; a message id seen lately is dropped (SOAP-over-UDP's
//!   duplicate suppression);
//! - serves the metadata exchange on TCP 5357 ([`http`]): a WS-Transfer Get
//!   POSTed to `/<endpoint uuid>` gets ThisDevice, ThisModel and the host
//!   relationship whose `pub:Computer` is `NAME/Workgroup:WORKGROUP`.
//!
//! The endpoint is `urn:uuid:` and the name-based UUID of the NetBIOS name in
//! lower case (what wsdd derives from the host name, so a server moved from
//! Samba+wsdd keeps its identity); `InstanceId` is the start time in seconds.
//! A datagram longer than [`MAX_DATAGRAM`], or that is not a SOAP envelope
//! within the XML reader's bounds, is dropped with a log line at most every
//! [`LOG_EVERY`]. The configuration is read at start; a reload names `wsd`
//! among the options applied at the next restart.

mod http;
pub mod soap;
pub mod xml;

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6, TcpListener, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::net::{sockopt, AddressFamily, SocketType};

use crate::config::Config;
use soap::{Identity, Request, Sequence};

/// WS-Discovery's UDP port.
pub const UDP_PORT: u16 = 3702;
/// The metadata exchange's TCP port (what Windows and wsdd use).
pub const HTTP_PORT: u16 = 5357;
const GROUP_V4: Ipv4Addr = Ipv4Addr::new(239, 255, 255, 250);
const GROUP_V6: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0xc);
/// The longest datagram read (SOAP-over-UDP's limit, as wsdd's); longer ones are dropped.
pub const MAX_DATAGRAM: usize = 32_767;
/// How many message ids are remembered for duplicate suppression.
const KNOWN_MESSAGES: usize = 64;
/// At most one log line per kind of dropped input this often.
pub const LOG_EVERY: Duration = Duration::from_secs(10);
/// How often the thread looks at the stop flag.
const TICK: Duration = Duration::from_millis(200);
/// The pause between the two copies of a multicast message.
const REPEAT_DELAY: Duration = Duration::from_millis(100);

/// One network interface the server announces itself on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub name: String,
    pub index: u32,
    /// Its IPv4 address and prefix length.
    pub v4: Option<(Ipv4Addr, u8)>,
    /// Its IPv6 address (link-local preferred, as Windows uses) and prefix length.
    pub v6: Option<(Ipv6Addr, u8)>,
}

fn link_local(v6: &Ipv6Addr) -> bool {
    (v6.segments()[0] & 0xffc0) == 0xfe80
}

fn in_net(addr: IpAddr, net: IpAddr, prefix: u8) -> bool {
    match (addr, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let m = u32::MAX
                .checked_shl(32 - u32::from(prefix.min(32)))
                .unwrap_or(0);
            u32::from(a) & m == u32::from(n) & m
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let m = u128::MAX
                .checked_shl(128 - u32::from(prefix.min(128)))
                .unwrap_or(0);
            u128::from(a) & m == u128::from(n) & m
        }
        _ => false,
    }
}

/// The interfaces to announce on, from the machine's addresses `all`: those carrying a
/// specific `listen` address (loopback never), else those `interfaces` names (a name, an
/// address, or an address/prefix naming the interface with an address in it), else every up
/// interface but loopback.
pub fn links(
    all: &[ringshare_engine::net::InterfaceAddr],
    interfaces: &[String],
    listen: &[SocketAddr],
) -> Vec<Link> {
    let specific: Vec<IpAddr> = listen
        .iter()
        .map(SocketAddr::ip)
        .filter(|ip| !ip.is_unspecified())
        .collect();
    let chosen = |a: &ringshare_engine::net::InterfaceAddr| {
        if !specific.is_empty() {
            return !a.loopback && specific.contains(&a.addr);
        }
        if interfaces.is_empty() {
            return !a.loopback;
        }
        interfaces.iter().any(|entry| {
            let (addr, prefix) = match entry.split_once('/') {
                Some((a, p)) => (a, p.parse::<u8>().ok()),
                None => (entry.as_str(), None),
            };
            match addr.parse::<IpAddr>() {
                Ok(ip) => match prefix {
                    Some(p) => all
                        .iter()
                        .any(|b| b.index == a.index && in_net(b.addr, ip, p)),
                    None => all.iter().any(|b| b.index == a.index && b.addr == ip),
                },
                Err(_) => a.name == *entry,
            }
        })
    };
    let mut out: Vec<Link> = Vec::new();
    for a in all.iter().filter(|a| a.up && chosen(a)) {
        let i = match out.iter().position(|l| l.index == a.index) {
            Some(i) => i,
            None => {
                out.push(Link {
                    name: a.name.clone(),
                    index: a.index,
                    v4: None,
                    v6: None,
                });
                out.len() - 1
            }
        };
        let l = &mut out[i];
        match a.addr {
            IpAddr::V4(v4) if l.v4.is_none() => l.v4 = Some((v4, a.prefix_len)),
            IpAddr::V6(v6)
                if l.v6
                    .is_none_or(|(cur, _)| !link_local(&cur) && link_local(&v6)) =>
            {
                l.v6 = Some((v6, a.prefix_len))
            }
            _ => {}
        }
    }
    out
}

/// The link a datagram from `from` came in on: by scope for IPv6 link-local senders, by
/// network otherwise, else the first link of that family.
fn link_of(links: &[Link], from: SocketAddr) -> Option<&Link> {
    let by_net = links.iter().find(|l| match from.ip() {
        IpAddr::V4(_) => {
            l.v4.is_some_and(|(a, p)| in_net(from.ip(), IpAddr::V4(a), p))
        }
        IpAddr::V6(_) => {
            l.v6.is_some_and(|(a, p)| in_net(from.ip(), IpAddr::V6(a), p))
        }
    });
    let by_scope = match from {
        SocketAddr::V6(v6) if v6.scope_id() != 0 => links
            .iter()
            .find(|l| l.index == v6.scope_id() && l.v6.is_some()),
        _ => None,
    };
    by_scope.or(by_net).or_else(|| {
        links.iter().find(|l| match from {
            SocketAddr::V4(_) => l.v4.is_some(),
            SocketAddr::V6(_) => l.v6.is_some(),
        })
    })
}

/// The metadata addresses of `link` for a message sent over `v6` or IPv4.
fn xaddrs(me: &Identity, link: &Link, v6: bool) -> Vec<String> {
    let ip = if v6 {
        link.v6.map(|(a, _)| IpAddr::V6(a))
    } else {
        link.v4.map(|(a, _)| IpAddr::V4(a))
    };
    ip.map(|ip| vec![me.xaddr(ip, HTTP_PORT)])
        .unwrap_or_default()
}

/// A log line at most every [`LOG_EVERY`] for one kind of event, with the count since.
#[derive(Debug)]
pub(crate) struct LogLimit {
    last: Option<Instant>,
    skipped: u64,
}

impl LogLimit {
    pub(crate) const fn new() -> LogLimit {
        LogLimit {
            last: None,
            skipped: 0,
        }
    }

    pub(crate) fn warn(&mut self, what: std::fmt::Arguments) {
        let now = Instant::now();
        if self.last.is_some_and(|t| now.duration_since(t) < LOG_EVERY) {
            self.skipped += 1;
            return;
        }
        if self.skipped > 0 {
            tracing::warn!("WS-Discovery: {what} (and {} more since)", self.skipped);
        } else {
            tracing::warn!("WS-Discovery: {what}");
        }
        self.last = Some(now);
        self.skipped = 0;
    }
}

/// The running service; dropping it sends Bye and ends the thread.
#[derive(Debug)]
pub struct Service {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Service {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn udp_socket(v6: bool) -> std::io::Result<UdpSocket> {
    let family = if v6 {
        AddressFamily::INET6
    } else {
        AddressFamily::INET
    };
    let fd = rustix::net::socket(family, SocketType::DGRAM, None)?;
    // wsdd or another server on the same machine may hold the port too.
    sockopt::set_socket_reuseaddr(&fd, true)?;
    let addr: SocketAddr = if v6 {
        sockopt::set_ipv6_v6only(&fd, true)?;
        (Ipv6Addr::UNSPECIFIED, UDP_PORT).into()
    } else {
        (Ipv4Addr::UNSPECIFIED, UDP_PORT).into()
    };
    rustix::net::bind(&fd, &addr)?;
    Ok(UdpSocket::from(fd))
}

/// What the thread works with.
struct State {
    me: Identity,
    links: Vec<Link>,
    v4: Option<UdpSocket>,
    v6: Option<UdpSocket>,
    http: Vec<TcpListener>,
    message_number: u64,
    known: VecDeque<String>,
    dropped: LogLimit,
    http_limits: Arc<http::Limits>,
}

impl State {
    fn sequence(&mut self) -> Sequence {
        self.message_number += 1;
        Sequence {
            instance_id: self.me.instance_id,
            message_number: self.message_number,
        }
    }

    /// Multicast Hello or Bye on every link, twice.
    fn announce(&mut self, hello: bool) {
        let mut msgs = Vec::new();
        for l in self.links.clone() {
            for v6 in [false, true] {
                if (v6 && l.v6.is_none()) || (!v6 && l.v4.is_none()) {
                    continue;
                }
                let seq = self.sequence();
                let text = if hello {
                    soap::hello(&self.me, seq, &xaddrs(&self.me, &l, v6))
                } else {
                    soap::bye(&self.me, seq)
                };
                msgs.push((l.clone(), v6, text));
            }
        }
        for round in 0..2 {
            if round > 0 {
                std::thread::sleep(REPEAT_DELAY);
            }
            for (l, v6, text) in &msgs {
                self.multicast(l, *v6, text.as_bytes());
            }
        }
    }

    fn multicast(&self, l: &Link, v6: bool, bytes: &[u8]) {
        let sent = match (v6, &self.v6, &self.v4, l.v4, l.v6) {
            (true, Some(s), _, _, Some(_)) => sockopt::set_ipv6_multicast_if(s.as_fd(), l.index)
                .map_err(std::io::Error::from)
                .and_then(|()| s.send_to(bytes, SocketAddrV6::new(GROUP_V6, UDP_PORT, 0, 0))),
            (false, _, Some(s), Some((a, _)), _) => sockopt::set_ip_multicast_if(s.as_fd(), &a)
                .map_err(std::io::Error::from)
                .and_then(|()| s.send_to(bytes, (GROUP_V4, UDP_PORT))),
            _ => return,
        };
        if let Err(e) = sent {
            tracing::debug!("WS-Discovery: multicast on {}: {e}", l.name);
        }
    }

    /// Answer one datagram `bytes` from `from` (on the IPv6 socket when `v6`).
    fn datagram(&mut self, bytes: &[u8], from: SocketAddr, v6: bool) {
        if bytes.len() > MAX_DATAGRAM {
            self.dropped.warn(format_args!(
                "dropped a datagram of {} bytes from {from} (more than {MAX_DATAGRAM})",
                bytes.len()
            ));
            return;
        }
        let Some(msg) = soap::read(bytes, &self.me) else {
            self.dropped.warn(format_args!(
                "dropped a datagram from {from} that is not a SOAP envelope"
            ));
            return;
        };
        if self.known.contains(&msg.id) {
            return;
        }
        if self.known.len() == KNOWN_MESSAGES {
            self.known.pop_front();
        }
        self.known.push_back(msg.id.clone());
        let reply = match msg.request {
            Request::Probe { matches: true } => {
                tracing::debug!("WS-Discovery: Probe {} from {from}", msg.id);
                let seq = self.sequence();
                soap::probe_matches(&self.me, seq, &msg.id)
            }
            Request::Resolve { ours: true } => {
                tracing::debug!("WS-Discovery: Resolve {} from {from}", msg.id);
                let Some(link) = link_of(&self.links, from).cloned() else {
                    return;
                };
                let seq = self.sequence();
                soap::resolve_matches(&self.me, seq, &msg.id, &xaddrs(&self.me, &link, v6))
            }
            _ => return,
        };
        let sock = if v6 { &self.v6 } else { &self.v4 };
        if let Some(s) = sock {
            if let Err(e) = s.send_to(reply.as_bytes(), from) {
                tracing::debug!("WS-Discovery: answer to {from}: {e}");
            }
        }
    }

    fn run(&mut self, stop: &AtomicBool) {
        self.announce(true);
        let mut buf = vec![0u8; 65_536];
        while !stop.load(Ordering::Relaxed) {
            let mut fds: Vec<rustix::event::PollFd> = Vec::new();
            for s in [&self.v4, &self.v6].into_iter().flatten() {
                fds.push(rustix::event::PollFd::new(s, rustix::event::PollFlags::IN));
            }
            for l in &self.http {
                fds.push(rustix::event::PollFd::new(l, rustix::event::PollFlags::IN));
            }
            let timeout = rustix::event::Timespec {
                tv_sec: 0,
                tv_nsec: TICK.as_nanos() as i64,
            };
            if rustix::event::poll(&mut fds, Some(&timeout)).unwrap_or(0) == 0 {
                continue;
            }
            drop(fds);
            for v6 in [false, true] {
                let got = match if v6 { &self.v6 } else { &self.v4 } {
                    Some(s) => s.recv_from(&mut buf).ok(),
                    None => None,
                };
                if let Some((n, from)) = got {
                    self.datagram(&buf[..n], from, v6);
                }
            }
            for l in &self.http {
                while let Ok((conn, peer)) = l.accept() {
                    http::serve(conn, peer, &self.me, &self.http_limits);
                }
            }
        }
        self.announce(false);
    }
}

/// Start WS-Discovery for `cfg` (see the module), listening where `listen` says the server
/// is reached; `None` when it is off, when no `listen` address is on port 445 (the only one
/// Windows' Network folder uses), or when there is nothing to announce on (logged).
pub fn start(cfg: &Config, listen: &[SocketAddr]) -> Option<Service> {
    let g = &cfg.global;
    if !g.wsd {
        return None;
    }
    if !listen.iter().any(|a| a.port() == 445) {
        tracing::info!(
            "WS-Discovery off: Windows reaches SMB on port 445 only, and the server does not \
             listen there"
        );
        return None;
    }
    let all = match ringshare_engine::net::interface_addrs() {
        Ok(a) => a,
        Err(e) => {
            tracing::warn!("WS-Discovery off: cannot list network interfaces: {e}");
            return None;
        }
    };
    let links = links(&all, &g.interfaces, listen);
    if links.is_empty() {
        tracing::info!(
            "WS-Discovery off: no interface to announce on (the server listens on loopback only)"
        );
        return None;
    }
    let domain = (g.member.security == crate::config::member::Security::Ads)
        .then(|| g.realm.to_ascii_lowercase());
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_secs());
    let me = Identity::new(&g.netbios_name, &g.workgroup, domain.as_deref(), started);
    let mut state = open(me, links);
    if state.v4.is_none() && state.v6.is_none() {
        return None;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let thread = std::thread::Builder::new()
        .name("ws-discovery".into())
        .spawn(move || state.run(&flag))
        .map_err(|e| tracing::warn!("WS-Discovery off: thread: {e}"))
        .ok()?;
    Some(Service {
        stop,
        thread: Some(thread),
    })
}

/// The sockets of `links`: each failure is logged and leaves that part out.
fn open(me: Identity, links: Vec<Link>) -> State {
    let join = |v6: bool| -> Option<UdpSocket> {
        if !links
            .iter()
            .any(|l| if v6 { l.v6.is_some() } else { l.v4.is_some() })
        {
            return None;
        }
        let s = udp_socket(v6)
            .map_err(|e| tracing::warn!("WS-Discovery: UDP port {UDP_PORT}: {e}"))
            .ok()?;
        for l in &links {
            let joined = match (v6, l.v4, l.v6) {
                (false, Some((a, _)), _) => sockopt::set_ip_add_membership(&s, &GROUP_V4, &a),
                (true, _, Some(_)) => sockopt::set_ipv6_add_membership(&s, &GROUP_V6, l.index),
                _ => continue,
            };
            if let Err(e) = joined {
                tracing::warn!("WS-Discovery: joining the group on {}: {e}", l.name);
            }
        }
        s.set_nonblocking(true).ok()?;
        Some(s)
    };
    let v4 = join(false);
    let v6 = join(true);
    let mut http = Vec::new();
    for l in &links {
        let addrs = [
            l.v4.map(|(a, _)| SocketAddr::from((a, HTTP_PORT))),
            l.v6.map(|(a, _)| {
                let scope = if link_local(&a) { l.index } else { 0 };
                SocketAddr::V6(SocketAddrV6::new(a, HTTP_PORT, 0, scope))
            }),
        ];
        for a in addrs.into_iter().flatten() {
            match TcpListener::bind(a).and_then(|t| t.set_nonblocking(true).map(|()| t)) {
                Ok(t) => http.push(t),
                Err(e) => tracing::warn!("WS-Discovery: metadata exchange on {a}: {e}"),
            }
        }
    }
    let names: Vec<&str> = links.iter().map(|l| l.name.as_str()).collect();
    tracing::info!(
        "WS-Discovery: announcing {} ({}) on {}",
        me.computer,
        me.endpoint,
        names.join(", ")
    );
    State {
        me,
        links,
        v4,
        v6,
        http,
        message_number: 0,
        known: VecDeque::with_capacity(KNOWN_MESSAGES),
        dropped: LogLimit::new(),
        http_limits: Arc::new(http::Limits::default()),
    }
}

#[cfg(test)]
#[path = "wsd/tests.rs"]
mod tests;
