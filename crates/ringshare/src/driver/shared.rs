//! What every worker of the driver shares: the server, its listeners' addresses, the counts and
//! switches they all read, the rings' wakers and the lookup pool.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ringshare_core::metrics::Metrics;
use ringshare_core::ServerState;
use ringshare_engine::Waker;

use super::{kernel_notify, LookupPool};
use crate::config::ZerocopySend;

/// What every worker shares.
pub struct Shared {
    pub server: Arc<ServerState>,
    pub listen: Vec<SocketAddr>,
    pub max_connections: usize,
    pub connections: AtomicUsize,
    pub stopping: AtomicBool,
    pub wakers: Mutex<Vec<Waker>>,
    pub started: Instant,
    /// `use sendfile`: unsigned READ data is spliced from the file.
    pub send_file: bool,
    /// `multishot receive`: small frames come through one multishot receive
    /// per connection, into the ring's provided buffers.
    pub multishot_receive: bool,
    /// `zerocopy send`: large in-memory replies go out with `SEND_ZC`.
    pub zerocopy_send: ZerocopySend,
    /// `pin cpus = auto`: each I/O thread keeps to its CPU while it sends spliced READ data.
    pub keep_cpus: bool,
    /// Bytes per splice through the pipe (`RingConfig::splice_chunk`).
    pub splice_chunk: usize,
    /// Each ring's request counters (`metrics listen`), when on: a worker
    /// adds its own at start.
    pub ring_metrics: Option<Arc<Mutex<Vec<Arc<Metrics>>>>>,
    /// `send timeout`: a connection whose peer has not taken a reply for this
    /// long is closed, so a peer that stops reading cannot hold a send (or the
    /// io_uring worker blocked in a splice to its socket) forever.
    pub send_stall_ms: u64,
    /// Changes by other programs (`kernel change notify`), read by worker 0.
    pub inotify: Option<Arc<kernel_notify::Inotify>>,
    /// Where logons' NSS and winbind questions are asked.
    pub lookups: Arc<LookupPool>,
    /// SMB over QUIC (`server smb transports`): a socket and endpoint per worker.
    pub quic: Option<super::QuicShared>,
    /// A cluster node's connections to the others, when calls to files' homes go on the
    /// rings (`cluster ring calls`, yes by default); `None`: the lookup pool carries them.
    pub peers: Option<Arc<crate::cluster::peer::Peers>>,
    /// Connections each ring keeps to each other node at most (K = max(2, 8 / workers)).
    pub home_calls_per_peer: usize,
}

impl Shared {
    /// `Mail::wake_drivers` (a disconnected durable open's timeout to look at) wakes every
    /// worker. Notices for a connection ring its own worker's bell instead
    /// (`Worker::deliver_mail`); only a mailbox without a bell wakes them all.
    pub fn wake_on_mail(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        let wake: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
            if let Some(s) = weak.upgrade() {
                for w in crate::lock(&s.wakers).iter() {
                    let _ = w.wake();
                }
            }
        });
        self.server.mail.set_waker(Arc::clone(&wake));
        // A kernel watch's job queued off the workers' threads: worker 0 posts it when woken.
        self.server.set_kernel_jobs_waker(wake);
    }

    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        for w in crate::lock(&self.wakers).iter() {
            let _ = w.wake();
        }
    }
}
