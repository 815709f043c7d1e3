//! What the core needs of a cluster, as the server's tables hold it: the link to the other
//! nodes (the driver's or a test's), where each partition's home is, and the closes no home
//! took yet. Only data and the trait; what the cluster does with them is [`crate::cluster`].

use ringshare_wire::NtStatus;

use crate::files::FileKey;

/// A close no home took yet ([`crate::server::ServerState::resend_closes`]).
#[derive(Debug, Clone)]
pub(crate) struct UnsentClose {
    pub key: FileKey,
    pub owner: u64,
    pub delete_on_close: bool,
    /// The share the file is on, and the open's user: a late close that
    /// was the last of a delete-pending file removes it as that user.
    pub share: String,
    pub who: ringshare_vfs::Who,
}

/// Where a partition's home is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Home {
    /// This node.
    Here,
    /// Another live node.
    Node(u16),
    /// No node may decide for it now (its owner died and no one took it
    /// over yet, or this node is fenced): opens of its files are refused.
    Unavailable,
}

/// What the core needs of the cluster: this node's number, who owns each
/// partition, and a way to reach other nodes. Implemented by the driver
/// (etcd membership, node-to-node connections) and by tests (an in-memory
/// bus).
pub trait ClusterLink: Send + Sync {
    /// This node's number, 1..=65535 (it is the top 16 bits of every
    /// connection id and open id the node makes, so they are unique in
    /// the cluster and name the node that holds them).
    fn node(&self) -> u16;
    /// The number of partitions files are spread over (the same on every node).
    fn partitions(&self) -> u32;
    /// The home of partition `p` now.
    fn home(&self, p: u32) -> Home;
    /// The live nodes (this one included).
    fn members(&self) -> Vec<u16>;
    /// Where this incarnation's open and connection ids start (below
    /// 2^[`crate::files::NODE_SHIFT`]): a restarted node should not reuse the ids of its
    /// last life, which other nodes may not have forgotten yet.
    fn id_start(&self) -> u64 {
        1
    }
    /// Send `message` to `node` and wait for its answer (a bounded wait:
    /// an error status when the node does not answer).
    fn call(&self, node: u16, message: Vec<u8>) -> Result<Vec<u8>, NtStatus>;
    /// Send `message` to `node` without waiting (it may be lost with the node).
    fn post(&self, node: u16, message: Vec<u8>);
    /// Store durably (etcd) the record of a persistent open of a continuously
    /// available share under its persistent id ([`crate::cluster::ca`]); answered after it
    /// is stored. Without a store: NOT_SUPPORTED.
    fn ca_put(&self, _persistent_id: u64, _record: Vec<u8>) -> Result<(), NtStatus> {
        Err(NtStatus::NOT_SUPPORTED)
    }
    /// Remove the record of a persistent open that closed.
    fn ca_delete(&self, _persistent_id: u64) {}
    /// The record of one persistent open.
    fn ca_get(&self, _persistent_id: u64) -> Result<Option<Vec<u8>>, NtStatus> {
        Ok(None)
    }
    /// Every persistent open's record (a takeover looks for a dead node's).
    fn ca_all(&self) -> Result<Vec<Vec<u8>>, NtStatus> {
        Ok(Vec::new())
    }
}
