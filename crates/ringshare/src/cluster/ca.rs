//! The records of persistent opens (continuously available shares) in
//! etcd, under `/ringshare/<cluster>/ca/<persistent id in hex>`
//! (docs/cluster-internals.md, "Persistent opens: the record and the
//! takeover"). Each call makes its
//! own short-lived etcd client (as every thread of the coordinator does),
//! bounded to [`DEADLINE`]; etcd acknowledges a put once a majority of
//! members has it on disk.

use std::time::{Duration, Instant};

use ringshare_cluster::etcd::{Etcd, Op};
use ringshare_wire::NtStatus;

/// The longest a record's read or write waits for etcd.
const DEADLINE: Duration = Duration::from_secs(2);

/// Where the records live and how to reach etcd.
pub(super) struct Store {
    prefix: Vec<u8>,
    endpoints: Vec<String>,
}

impl Store {
    pub fn new(cluster: &str, endpoints: &[String]) -> Store {
        Store {
            prefix: format!("/ringshare/{cluster}/ca/").into_bytes(),
            endpoints: endpoints.to_vec(),
        }
    }

    fn key(&self, persistent_id: u64) -> Vec<u8> {
        let mut k = self.prefix.clone();
        k.extend_from_slice(format!("{persistent_id:016x}").as_bytes());
        k
    }

    fn etcd(&self) -> Result<Etcd, NtStatus> {
        Etcd::new(&self.endpoints, DEADLINE).map_err(|e| {
            tracing::warn!("cluster: etcd for persistent opens: {e}");
            NtStatus::FILE_NOT_AVAILABLE
        })
    }

    fn failed(what: &str, e: impl std::fmt::Display) -> NtStatus {
        tracing::warn!("cluster: {what} a persistent open's record: {e}");
        NtStatus::FILE_NOT_AVAILABLE
    }

    pub fn put(&self, persistent_id: u64, record: &[u8]) -> Result<(), NtStatus> {
        self.etcd()?
            .put(&self.key(persistent_id), record, Instant::now() + DEADLINE)
            .map(|_| ())
            .map_err(|e| Store::failed("storing", e))
    }

    pub fn delete(&self, persistent_id: u64) {
        let del = [Op::Delete {
            key: self.key(persistent_id),
        }];
        // One left behind (logged) names a closed open: a takeover that
        // reads it finds no file entry waiting for it and reopens the file
        // for a client that will not come (until its timeout).
        let _ = self.etcd().and_then(|mut c| {
            c.txn(&[], &del, &[], Instant::now() + DEADLINE)
                .map_err(|e| Store::failed("removing", e))
        });
    }

    pub fn get(&self, persistent_id: u64) -> Result<Option<Vec<u8>>, NtStatus> {
        self.etcd()?
            .get(&self.key(persistent_id), Instant::now() + DEADLINE)
            .map(|kv| kv.map(|kv| kv.value))
            .map_err(|e| Store::failed("reading", e))
    }

    pub fn all(&self) -> Result<Vec<Vec<u8>>, NtStatus> {
        self.etcd()?
            .range_prefix(&self.prefix, Instant::now() + DEADLINE)
            .map(|(_, kvs)| kvs.into_iter().map(|kv| kv.value).collect())
            .map_err(|e| Store::failed("listing", e))
    }
}
