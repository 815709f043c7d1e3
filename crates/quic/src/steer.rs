//! QUIC connections spread over several I/O threads, each with its own
//! endpoint on its own `SO_REUSEPORT` socket of the same port.
//!
//! The kernel hands a datagram to one of the sockets by a hash of its
//! addresses, so a connection's packets reach the same thread while the
//! client keeps its address and port. When it does not (a NAT rebinding, a
//! client moving to another network: QUIC's connection migration), the
//! datagram may arrive at another thread's socket. The connection ids the
//! server gives out say which thread holds the connection, so that thread
//! can be handed the datagram ([`Steering::worker_of`]).
//!
//! The thread is not written into the id: an id is 8 random bytes, drawn
//! until a keyed hash of them (SipHash with a key drawn at start, shared
//! by the threads) modulo the number of threads names the issuing thread.
//! An observer without the key learns nothing from an id about the thread
//! or about the connection's other ids (RFC 9000 5.1), and a thread costs
//! an issue about as many draws as there are threads.
//!
//! Only packets whose destination id the server chose are steered: short
//! header packets, and long-header Handshake packets of QUIC version 1.
//! An Initial (or 0-RTT) packet names an id the client made up: it stays
//! with the socket that received it, which is where the connection was
//! created (the client's address cannot change during the handshake).

use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::time::Duration;

use quinn_proto::{ConnectionId, ConnectionIdGenerator, EndpointConfig, InvalidCid};

/// Length of the connection ids the server issues.
pub const CID_LEN: usize = 8;

/// QUIC version 1 (RFC 9000), whose long-header types steering reads.
const QUIC_V1: u32 = 1;
/// The long-header packet type of a Handshake packet in version 1.
const LONG_HANDSHAKE: u8 = 2;

/// How connection ids map to threads; one per server, cloned to each thread.
#[derive(Clone)]
pub struct Steering {
    spread: Spread,
    endpoint: EndpointConfig,
}

/// The keyed hash that names a connection id's thread.
#[derive(Clone)]
struct Spread {
    workers: usize,
    key: RandomState,
}

impl Spread {
    /// The thread `cid` names.
    fn thread_of(&self, cid: &[u8]) -> usize {
        (self.key.hash_one(cid) % self.workers as u64) as usize
    }
}

impl Steering {
    /// Steering over `workers` threads (at least 1), with fresh keys: the
    /// id hash's and the stateless-reset key, which every thread's endpoint
    /// shares (a reset made by one thread is recognised by all).
    pub fn new(workers: usize) -> Steering {
        Steering {
            spread: Spread {
                workers: workers.max(1),
                key: RandomState::new(),
            },
            endpoint: EndpointConfig::default(),
        }
    }

    /// The endpoint configuration of thread `worker`: the shared reset key,
    /// and ids that name `worker`.
    pub fn endpoint_config(&self, worker: usize) -> Arc<EndpointConfig> {
        let mut cfg = self.endpoint.clone();
        if self.spread.workers > 1 {
            let spread = self.spread.clone();
            cfg.cid_generator(move || Box::new(WorkerIds::new(&spread, worker)));
        }
        Arc::new(cfg)
    }

    /// The thread that holds the connection `datagram` belongs to, when its
    /// destination id is one the server issued; `None` for a datagram any
    /// thread may take (an Initial, 0-RTT, version negotiation, garbage).
    pub fn worker_of(&self, datagram: &[u8]) -> Option<usize> {
        if self.spread.workers < 2 {
            return None;
        }
        let first = *datagram.first()?;
        let cid = if first & 0x80 == 0 {
            datagram.get(1..1 + CID_LEN)?
        } else {
            let version = u32::from_be_bytes(datagram.get(1..5)?.try_into().ok()?);
            let kind = (first >> 4) & 0x03;
            let len = usize::from(*datagram.get(5)?);
            if version != QUIC_V1 || kind != LONG_HANDSHAKE || len != CID_LEN {
                return None;
            }
            datagram.get(6..6 + CID_LEN)?
        };
        Some(self.spread.thread_of(cid))
    }
}

/// The id generator of one thread's endpoint.
struct WorkerIds {
    spread: Spread,
    worker: usize,
    /// The system's random source (aws-lc-rs's, as TLS uses).
    rng: &'static dyn rustls::crypto::SecureRandom,
}

impl WorkerIds {
    fn new(spread: &Spread, worker: usize) -> WorkerIds {
        WorkerIds {
            spread: spread.clone(),
            worker,
            rng: rustls::crypto::aws_lc_rs::default_provider().secure_random,
        }
    }
}

impl ConnectionIdGenerator for WorkerIds {
    fn generate_cid(&mut self) -> ConnectionId {
        let mut id = [0u8; CID_LEN];
        // Each draw names one of `workers` threads evenly: the loop ends after
        // about `workers` draws. A failing system random source has nothing
        // better to offer than another try; after 4,096 the id is used as it is.
        for _ in 0..4096 {
            if self.rng.fill(&mut id).is_ok() && self.spread.thread_of(&id) == self.worker {
                break;
            }
        }
        ConnectionId::new(&id)
    }

    fn validate(&self, cid: &ConnectionId) -> Result<(), InvalidCid> {
        if cid.len() == CID_LEN && self.spread.thread_of(cid) == self.worker {
            Ok(())
        } else {
            Err(InvalidCid)
        }
    }

    fn cid_len(&self) -> usize {
        CID_LEN
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn short_packet(cid: &[u8]) -> Vec<u8> {
        let mut p = vec![0x40];
        p.extend_from_slice(cid);
        p.extend_from_slice(&[0; 30]);
        p
    }

    fn long_packet(kind: u8, version: u32, cid: &[u8]) -> Vec<u8> {
        let mut p = vec![0xc0 | (kind << 4)];
        p.extend_from_slice(&version.to_be_bytes());
        p.push(cid.len() as u8);
        p.extend_from_slice(cid);
        p.extend_from_slice(&[0; 30]);
        p
    }

    #[test]
    fn the_ids_a_thread_issues_steer_its_packets_back_to_it() {
        let s = Steering::new(3);
        for worker in 0..3 {
            let mut g = WorkerIds::new(&s.spread, worker);
            for _ in 0..50 {
                let cid = g.generate_cid();
                assert_eq!(cid.len(), CID_LEN);
                assert!(g.validate(&cid).is_ok());
                assert_eq!(s.worker_of(&short_packet(&cid)), Some(worker));
                let hs = long_packet(LONG_HANDSHAKE, QUIC_V1, &cid);
                assert_eq!(s.worker_of(&hs), Some(worker));
            }
        }
    }

    #[test]
    fn ids_of_one_thread_are_spread_over_every_byte_value() {
        // The thread is not a field of the id: the first bytes of one thread's ids vary.
        let s = Steering::new(2);
        let mut g = WorkerIds::new(&s.spread, 1);
        let firsts: std::collections::HashSet<u8> = (0..200).map(|_| g.generate_cid()[0]).collect();
        assert!(firsts.len() > 100, "{} distinct first bytes", firsts.len());
    }

    #[test]
    fn initials_version_negotiation_and_garbage_stay_where_they_arrive() {
        let s = Steering::new(4);
        let cid = [7u8; CID_LEN];
        assert_eq!(s.worker_of(&long_packet(0, QUIC_V1, &cid)), None);
        assert_eq!(s.worker_of(&long_packet(1, QUIC_V1, &cid)), None);
        assert_eq!(s.worker_of(&long_packet(LONG_HANDSHAKE, 0, &cid)), None);
        assert_eq!(
            s.worker_of(&long_packet(LONG_HANDSHAKE, QUIC_V1, &[7; 5])),
            None
        );
        assert_eq!(s.worker_of(&[]), None);
        assert_eq!(s.worker_of(&[0x40, 1, 2]), None);
        assert_eq!(s.worker_of(&[0xc0, 0, 0]), None);
        // One thread: nothing is steered.
        assert_eq!(Steering::new(1).worker_of(&short_packet(&cid)), None);
    }
}
