//! What the core needs of a cluster, as the server's tables hold it: the link to the other
//! nodes (the driver's or a test's), where each partition's home is, and the closes no home
//! took yet. Only data and the trait; what the cluster does with them is `crate::cluster` (crates/core).

use ringshare_vfs::RelPath;
use ringshare_wire::NtStatus;

use crate::files::FileKey;

/// A close no home took yet ([`crate::server::ServerState::resend_closes`]).
#[derive(Debug, Clone)]
pub struct UnsentClose {
    pub key: FileKey,
    pub owner: u64,
    pub delete_on_close: bool,
    /// The share the file is on, and the open's user: a late close that
    /// was the last of a delete-pending file removes it as that user.
    pub share: String,
    pub who: ringshare_vfs::Who,
}

/// A disconnected persistent open given up to another node's reconnect ([`GiveUp`], its answer
/// perhaps lost: the asker's 2 s went first): the ask and the answer as they went (encoded, the
/// cluster layer's messages), and until when the same ask is answered the same again.
///
/// [`GiveUp`]: crate::server::NodeState::given_up
#[derive(Debug, Clone)]
pub struct GivenUp {
    pub ask: Vec<u8>,
    pub answer: Vec<u8>,
    pub until: std::time::Instant,
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
    /// The protocol level `node` speaks, as it advertised it (etcd's membership record; 1
    /// for a node that advertises none, the builds before levels): messages above it are not
    /// sent to it (crates/cluster-home's `msg::Message::level`; docs/cluster-internals.md,
    /// "Protocol levels").
    fn level_of(&self, _node: u16) -> u16 {
        1
    }
    /// A call to `node` asked now, from this thread, would fail at once, unsent (the calls
    /// already waiting for it are as many as may wait): a new open of a file homed there is
    /// answered "try again" (FILE_NOT_AVAILABLE) before the file is opened, the answer the
    /// call would get, without the open's file system calls (docs/cluster-internals.md, "Step
    /// 6"). The implementation counts such refusals for its log.
    fn refuses_now(&self, _node: u16) -> bool {
        false
    }
    /// The nodes [`Self::refuses_now`] would refuse from this thread now, not counted: a file
    /// system job asked from this thread refuses an open of an existing file homed on one of
    /// them before it opens the file (`create::offload` (crates/core)); the I/O thread counts
    /// the refusal with [`Self::refuses_now`] when the job's answer comes back.
    fn refusing(&self) -> Vec<u16> {
        Vec::new()
    }
    /// Send `message` to `node` and wait for its answer (a bounded wait:
    /// an error status when the node does not answer).
    fn call(&self, node: u16, message: Vec<u8>) -> Result<Vec<u8>, NtStatus>;
    /// Send `message` to `node` without waiting (it may be lost with the node).
    fn post(&self, node: u16, message: Vec<u8>);
    /// Store durably (etcd) the record of a persistent open of a continuously
    /// available share under its persistent id (`crate::cluster::ca` (crates/core)); answered after it
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
    /// Whether this node serves the Witness service ([MS-SWN]): its shares then say
    /// SMB2_SHARE_CAP_CLUSTER.
    fn witness(&self) -> bool {
        false
    }
}

/// The device number of every file's key on a cluster node.
pub const CLUSTER_DEV: u64 = 0x5253_434c_5553_5452;

/// The partition of a file: a stable hash of its file system id and inode
/// (the same on every node and every build; a stream is homed with its file).
pub fn partition_of(key: FileKey, partitions: u32) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key
        .dev
        .to_le_bytes()
        .into_iter()
        .chain(key.ino.to_le_bytes())
    {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    // splitmix64's finaliser spreads neighbouring inodes over partitions.
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    (h % u64::from(partitions.max(1))) as u32
}

/// What a close leaves behind in its file's entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closed {
    /// The file's delete is pending and this was its last open: remove it.
    pub remove: bool,
    /// No open of the file is left.
    pub last_open: bool,
    /// Where the file is now, and whether it is a directory.
    pub path: RelPath,
    pub is_dir: bool,
    /// This close set delete-on-close and others still hold the file.
    pub newly_pending: bool,
}
