//! The Witness service of a cluster node ([MS-SWN], issue 33): clients of a
//! clustered share register here, on a node other than the one serving
//! their SMB connection, and hold a WitnessrAsyncNotify call that is
//! answered when that node goes (RESOURCE_CHANGE), comes back, or is drained
//! (CLIENT_MOVE to another node's address).
//!
//! DCE/RPC over TCP (ncacn_ip_tcp) with the PDU handling of IPC$'s pipes
//! ([`ringshare_core::rpc::Pipe`]) and the calls of
//! [`ringshare_core::rpc::witness`]; an endpoint mapper on TCP 135 tells
//! clients the Witness port. These calls are few and not on the data path:
//! one thread per listener and one per connection (at most
//! [`CONNECTIONS_MAX`]), each waking every [`TICK`] to answer held calls from
//! the membership a feed thread reads from the coordinator every [`TICK`].
//! Witness calls need NTLMSSP or Kerberos at packet integrity or privacy (the PDU layer's
//! [`ringshare_core::rpc::rpcauth`], the accounts and keytab SMB logons use) unless `cluster
//! witness anonymous = yes`; the endpoint mapper is anonymous (docs/cluster.md, Witness).

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use ringshare_auth::gss::Kerberos;
use ringshare_auth::krb5::acceptor::{AcceptorConfig, Fresh};
use ringshare_auth::krb5::replay::ReplayCache;
use ringshare_auth::ntlm::ServerConfig;
use ringshare_auth::UserLookup;
use ringshare_core::rpc::rpcauth::{Acceptor, LEVEL_PKT};
use ringshare_core::rpc::witness::{
    timeout_answer, Interface, NodeState, Outcome, Registrations, View,
};
use ringshare_core::rpc::{epm, Call, Pipe, ServerFacts, Service};

use crate::cluster::Membership;
use crate::config::{Config, WITNESS_PORT};

/// How often held calls look at the membership, and the membership is read.
const TICK: Duration = Duration::from_millis(100);
/// Connections served at once, per listener; more are closed at once.
pub const CONNECTIONS_MAX: usize = 64;
/// AsyncNotify calls one connection may hold.
const HELD_MAX: usize = 64;
/// A connection that holds no call and sends nothing for this long is closed.
const IDLE: Duration = Duration::from_secs(120);

struct Ctx {
    view: RwLock<Arc<View>>,
    witness_port: u16,
    connections: AtomicUsize,
    /// When a refused connection was last logged (seconds since `base`).
    last_refusal_log: AtomicU64,
    base: Instant,
    /// The accounts SMB logons use now (a reload may change them).
    users: Users,
    /// The Kerberos acceptor SMB logons use now.
    keytab: Keytab,
    /// The names an NTLMSSP CHALLENGE gives (workgroup, NetBIOS name).
    names: ServerConfig,
    /// `cluster witness anonymous = yes`: Witness calls need no authentication.
    anonymous: bool,
}

/// Where a connection finds the accounts when it starts.
pub type Users = Box<dyn Fn() -> Arc<dyn UserLookup + Send + Sync> + Send + Sync>;

/// Where a connection finds the Kerberos acceptor (keytab, realm) and the process's replay
/// cache when it starts: those of SMB logons; None when Kerberos is off.
pub type Keytab = Box<dyn Fn() -> Option<(Arc<AcceptorConfig>, Arc<ReplayCache>)> + Send + Sync>;

/// Starts the Witness service (and the endpoint mapper) of this cluster
/// node on the addresses `listen` names, unless `cluster witness = no`. A
/// port that cannot be bound is a WARN, not a failure to serve.
pub fn start(
    cfg: &Config,
    listen: &[SocketAddr],
    membership: impl Fn() -> Option<Membership> + Send + 'static,
    users: Users,
    keytab: Keytab,
) {
    let opts = &cfg.global.cluster;
    if opts.witness_off {
        return;
    }
    let ctx = Arc::new(Ctx {
        view: RwLock::new(Arc::new(View {
            name: cfg.global.netbios_name.to_ascii_uppercase(),
            local_node: opts.node,
            interfaces: Vec::new(),
            shares: cfg.shares.iter().map(|s| s.name.clone()).collect(),
        })),
        witness_port: opts.witness_port.unwrap_or(WITNESS_PORT),
        connections: AtomicUsize::new(0),
        last_refusal_log: AtomicU64::new(0),
        base: Instant::now(),
        users,
        keytab,
        names: ServerConfig {
            netbios_domain: cfg.global.workgroup.to_ascii_uppercase(),
            netbios_computer: cfg.global.netbios_name.to_ascii_uppercase(),
            ..ServerConfig::default()
        },
        anonymous: opts.witness_anonymous,
    });
    let feed = ctx.clone();
    if let Err(e) = std::thread::Builder::new()
        .name("witness-feed".into())
        .spawn(move || feed_loop(&feed, membership))
    {
        tracing::warn!("witness: cannot start ({e}); the Witness service is off");
        return;
    }
    let mut ips: Vec<IpAddr> = listen.iter().map(SocketAddr::ip).collect();
    ips.dedup();
    let epm_port = opts.endpoint_mapper_port.unwrap_or(135);
    for ip in ips {
        listener(
            &ctx,
            Service::Witness,
            SocketAddr::new(ip, ctx.witness_port),
        );
        if epm_port != 0 {
            listener(&ctx, Service::Epmapper, SocketAddr::new(ip, epm_port));
        }
    }
}

/// Reads the membership every [`TICK`] into the view the calls answer from;
/// a node seen once stays in it (as unavailable when it is gone).
fn feed_loop(ctx: &Ctx, membership: impl Fn() -> Option<Membership>) {
    let mut known: BTreeMap<u16, Vec<IpAddr>> = BTreeMap::new();
    loop {
        std::thread::sleep(TICK);
        // Fenced, or not joined yet: the last view stands.
        let Some((live, drained)) = membership() else {
            continue;
        };
        if live.is_empty() {
            continue;
        }
        for (n, ips) in &live {
            known.insert(*n, ips.clone());
        }
        let mut interfaces = Vec::new();
        for (n, ips) in &known {
            let state = if !live.iter().any(|(l, _)| l == n) {
                NodeState::Unavailable
            } else if drained.contains(n) {
                NodeState::Drained
            } else {
                NodeState::Available
            };
            interfaces.extend(ips.iter().map(|ip| Interface {
                node: *n,
                ip: *ip,
                state,
            }));
        }
        let mut view = ctx.view.write().unwrap_or_else(|e| e.into_inner());
        if view.interfaces != interfaces {
            let mut next = View::clone(&view);
            next.interfaces = interfaces;
            *view = Arc::new(next);
        }
    }
}

fn listener(ctx: &Arc<Ctx>, service: Service, addr: SocketAddr) {
    let what = match service {
        Service::Epmapper => "endpoint mapper",
        _ => "Witness",
    };
    let l = match TcpListener::bind(addr) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!("witness: the {what} cannot listen on {addr} ({e}); not served there");
            return;
        }
    };
    tracing::info!("witness: the {what} listens on {addr}");
    let ctx = ctx.clone();
    let spawned = std::thread::Builder::new()
        .name("witness-listen".into())
        .spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { continue };
                accept(&ctx, service, s);
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("witness: cannot start the {what} on {addr} ({e})");
    }
}

fn accept(ctx: &Arc<Ctx>, service: Service, s: TcpStream) {
    let peer = s.peer_addr().map_or_else(|_| "?".into(), |a| a.to_string());
    if ctx.connections.fetch_add(1, Ordering::AcqRel) >= CONNECTIONS_MAX {
        ctx.connections.fetch_sub(1, Ordering::AcqRel);
        let now = ctx.base.elapsed().as_secs() + 1;
        if ctx.last_refusal_log.swap(now, Ordering::AcqRel) != now {
            tracing::warn!(
                "witness: refusing a connection from {peer}: {CONNECTIONS_MAX} are served already"
            );
        }
        return;
    }
    let c = ctx.clone();
    let spawned = std::thread::Builder::new()
        .name("witness-conn".into())
        .spawn(move || {
            if let Err(why) = serve(&c, service, s) {
                tracing::info!("witness: closing the connection from {peer}: {why}");
            }
            c.connections.fetch_sub(1, Ordering::AcqRel);
        });
    if spawned.is_err() {
        ctx.connections.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One association: PDUs in, answers out; held AsyncNotify calls answered
/// when the view says something or their timeout passes.
fn serve(ctx: &Ctx, service: Service, mut s: TcpStream) -> Result<(), String> {
    s.set_read_timeout(Some(TICK)).map_err(|e| e.to_string())?;
    let local = s.local_addr().map_err(|e| e.to_string())?;
    let mut random = [0u8; 8 + 32 + 4];
    getrandom::fill(&mut random).map_err(|e| format!("no random challenge ({e})"))?;
    let (challenge, fresh) = random.split_at(8);
    let unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let kerberos = (ctx.keytab)().map(|(config, replay)| Kerberos {
        config,
        replay,
        now_unix: unix.as_secs() as i64,
        fresh: Fresh {
            subkey: fresh[..32].try_into().expect("32 bytes"),
            seq: u32::from_le_bytes(fresh[32..].try_into().expect("4 bytes")) & 0x7fff_ffff,
        },
    });
    let mut pipe = Pipe::tcp(service, local.port()).with_auth(Acceptor {
        users: (ctx.users)(),
        names: ctx.names.clone(),
        // The endpoint mapper is anonymous, as Samba's.
        min_level: match service {
            Service::Witness if !ctx.anonymous => LEVEL_PKT,
            _ => 0,
        },
        challenge: challenge.try_into().expect("8 bytes"),
        now_filetime: (unix.as_nanos() / 100) as u64 + 116_444_736_000_000_000,
        kerberos,
    });
    let facts = ServerFacts {
        netbios_name: String::new(),
        workgroup: String::new(),
        comment: String::new(),
        shares: Vec::new(),
        users: Vec::new(),
        guest_account: String::new(),
        member: None,
    };
    let mut salt = [0u8; 12];
    let _ = getrandom::fill(&mut salt);
    let mut regs = Registrations::new(salt);
    let mut held: Vec<(Call, [u8; 20], Option<Instant>)> = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    let mut last_input = Instant::now();
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                last_input = Instant::now();
                pipe.write(&buf[..n], &facts)
                    .map_err(|e| format!("a malformed PDU ({e:?})"))?;
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => return Err(e.to_string()),
        }
        let view = ctx.view.read().unwrap_or_else(|e| e.into_inner()).clone();
        while let Some(call) = pipe.take_call() {
            let answer = match service {
                Service::Epmapper => epm::call(call.opnum, &call.stub, |uuid, major| {
                    let (w, wm) = Service::Witness.interface();
                    let ip = match local.ip() {
                        IpAddr::V4(a) => a,
                        IpAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
                    };
                    (uuid == w && major == wm)
                        .then(|| epm::tcp_tower(Service::Witness, ip, ctx.witness_port))
                }),
                _ => match regs.call(call.opnum, &call.stub, &view) {
                    Ok(Outcome::Reply(stub)) => Ok(stub),
                    Ok(Outcome::Hold {
                        handle,
                        timeout_secs,
                    }) => {
                        if held.len() >= HELD_MAX {
                            return Err(format!("more than {HELD_MAX} AsyncNotify calls held"));
                        }
                        let deadline = (timeout_secs != 0)
                            .then(|| Instant::now() + Duration::from_secs(timeout_secs.into()));
                        held.push((call, handle, deadline));
                        continue;
                    }
                    Err(fault) => Err(fault),
                },
            };
            pipe.reply(&call, answer);
        }
        let now = Instant::now();
        held.retain(|(call, handle, deadline)| {
            if let Some(stub) = regs.notify(handle, &view) {
                pipe.reply(call, Ok(stub));
                false
            } else if deadline.is_some_and(|d| now >= d) {
                pipe.reply(call, Ok(timeout_answer()));
                false
            } else {
                true
            }
        });
        let (out, _) = pipe.read(usize::MAX);
        if !out.is_empty() {
            s.write_all(&out).map_err(|e| e.to_string())?;
        }
        if let Some(why) = pipe.closed() {
            return Err(why.to_string());
        }
        if held.is_empty() && last_input.elapsed() > IDLE {
            return Err(format!("idle for {IDLE:?}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server() -> (Arc<Ctx>, SocketAddr) {
        let ctx = Arc::new(Ctx {
            view: RwLock::new(Arc::new(View::default())),
            witness_port: 5040,
            connections: AtomicUsize::new(0),
            last_refusal_log: AtomicU64::new(0),
            base: Instant::now(),
            users: Box::new(|| Arc::new(ringshare_auth::smbpasswd::SmbPasswd::default())),
            keytab: Box::new(|| None),
            names: ServerConfig::default(),
            anonymous: true,
        });
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let c = ctx.clone();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                accept(&c, Service::Witness, s);
            }
        });
        (ctx, addr)
    }

    fn pdu(ptype: u8, call_id: u32, body: &[u8]) -> Vec<u8> {
        let mut p = vec![5, 0, ptype, 3, 0x10, 0, 0, 0];
        p.extend_from_slice(&((16 + body.len()) as u16).to_le_bytes());
        p.extend_from_slice(&[0, 0]);
        p.extend_from_slice(&call_id.to_le_bytes());
        p.extend_from_slice(body);
        p
    }

    fn read_pdu(s: &mut TcpStream) -> Option<Vec<u8>> {
        let mut hdr = [0u8; 16];
        s.read_exact(&mut hdr).ok()?;
        let len = usize::from(u16::from_le_bytes([hdr[8], hdr[9]]));
        let mut rest = vec![0u8; len - 16];
        s.read_exact(&mut rest).ok()?;
        Some([&hdr[..], &rest].concat())
    }

    fn closes(s: &mut TcpStream) -> bool {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        match s.read(&mut [0u8; 64]) {
            Ok(n) => n == 0,
            Err(e) => !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        }
    }

    #[test]
    fn bad_pdus_get_a_fault_or_a_closed_connection_and_connections_are_capped() {
        let (ctx, addr) = server();
        // A fragment length shorter than a header: the connection is closed.
        let mut s = TcpStream::connect(addr).unwrap();
        let mut bad = pdu(0, 1, &[]);
        bad[8] = 8;
        s.write_all(&bad).unwrap();
        assert!(closes(&mut s));
        // Bound, then an operation Witness does not have: a fault, and the connection stays.
        let mut s = TcpStream::connect(addr).unwrap();
        let (uuid, major) = Service::Witness.interface();
        let mut bind = Vec::new();
        bind.extend_from_slice(&[0xb8, 0x10, 0xb8, 0x10, 0, 0, 0, 0, 1, 0, 0, 0]);
        bind.extend_from_slice(&[0, 0, 1, 0]);
        bind.extend_from_slice(&uuid);
        bind.extend_from_slice(&u32::from(major).to_le_bytes());
        // NDR 2.0 transfer syntax 8a885d04-1ceb-11c9-9fe8-08002b104860.
        bind.extend_from_slice(&[
            0x04, 0x5d, 0x88, 0x8a, 0xeb, 0x1c, 0xc9, 0x11, 0x9f, 0xe8, 0x08, 0x00, 0x2b, 0x10,
            0x48, 0x60,
        ]);
        bind.extend_from_slice(&2u32.to_le_bytes());
        s.write_all(&pdu(11, 1, &bind)).unwrap();
        assert_eq!(read_pdu(&mut s).unwrap()[2], 12, "BIND_ACK");
        s.write_all(&pdu(0, 2, &[0, 0, 0, 0, 0, 0, 9, 0])).unwrap();
        let fault = read_pdu(&mut s).unwrap();
        assert_eq!(
            (fault[2], &fault[24..28]),
            (3, &0x1c01_0002u32.to_le_bytes()[..])
        );
        // More connections than the cap: the one past it is closed at once.
        let held: Vec<TcpStream> = (0..CONNECTIONS_MAX - 1)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        let t = Instant::now();
        while ctx.connections.load(Ordering::Acquire) < CONNECTIONS_MAX {
            assert!(
                t.elapsed() < Duration::from_secs(5),
                "connections not counted"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut over = TcpStream::connect(addr).unwrap();
        assert!(closes(&mut over));
        drop(held);
    }
}
