//! Changes other programs make on the disk, for CHANGE_NOTIFY: one inotify
//! descriptor for the server, watched by worker 0's ring (a one-shot poll,
//! then non-blocking reads until the queue is empty, again every 20 ms while
//! changes keep coming, and a poll again once it is found empty), its events handed to
//! the core ([`ringshare_core::notify_kernel`]), which decides what they
//! mean. `kernel change notify = no` (Samba's option) leaves it out.

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ringshare_core::notify_kernel::{mask, KernelEvent, KernelWatch};
use ringshare_engine::SharedFd;
use rustix::fs::inotify;

/// Bytes of events read per wake-up at most (the rest on the next one).
const READ_PER_WAKE_MAX: usize = 1024 * 1024;
/// While changes keep coming, how often worker 0 reads them (the core holds
/// them 100 ms anyway).
pub const READ_EVERY_MS: u64 = 20;

pub struct Inotify {
    fd: SharedFd,
    /// A refused watch was logged (once).
    warned: AtomicBool,
}

impl Inotify {
    pub fn new() -> io::Result<Arc<Inotify>> {
        let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)?;
        Ok(Arc::new(Inotify {
            fd: Arc::new(fd),
            warned: AtomicBool::new(false),
        }))
    }

    pub fn fd(&self) -> &SharedFd {
        &self.fd
    }

    /// Read what is queued (up to [`READ_PER_WAKE_MAX`]).
    pub fn read_events(&self) -> Vec<KernelEvent> {
        let mut out = Vec::new();
        let mut got = 0usize;
        let read = ringshare_vfs::posix::read_inotify(self.fd.as_fd(), |e| {
            let name = e.name.map(|n| n.to_string_lossy().into_owned());
            got += 16 + name.as_ref().map_or(0, |n| n.len());
            out.push(KernelEvent {
                wd: e.wd,
                mask: e.mask,
                cookie: e.cookie,
                name,
            });
            got < READ_PER_WAKE_MAX
        });
        if let Err(e) = read {
            tracing::warn!("reading disk change events: {e}");
        }
        out
    }
}

impl Inotify {
    /// Read what is queued and hand it to the core. While changes keep
    /// coming, the answer is when to read again ([`READ_EVERY_MS`] later:
    /// one read per batch, not a wake-up per change); once the queue is
    /// found empty, a poll (completing with `poll_token`) waits for the next.
    pub fn read_into(
        &self,
        ring: &mut ringshare_engine::Ring,
        server: &ringshare_core::server::ServerState,
        now_ms: u64,
        poll_token: u64,
    ) -> Option<u64> {
        let events = self.read_events();
        if events.is_empty() {
            ring.poll_readable(self.fd(), poll_token);
            None
        } else {
            server.kernel_events(now_ms, events);
            Some(now_ms + READ_EVERY_MS)
        }
    }
}

impl KernelWatch for Inotify {
    fn add(&self, dir: &dyn ringshare_vfs::Node) -> Option<i32> {
        let dir = dir.fd()?;
        let path = format!("/proc/self/fd/{}", dir.as_raw_fd());
        let flags =
            inotify::WatchFlags::from_bits_retain(mask::WATCHED) | inotify::WatchFlags::ONLYDIR;
        match inotify::add_watch(&*self.fd, path, flags) {
            Ok(wd) => Some(wd),
            Err(e) => {
                if !self.warned.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "cannot watch a directory for changes by other programs ({e}); \
                         see fs.inotify.max_user_watches. Changes through ringshare are still reported"
                    );
                }
                None
            }
        }
    }

    fn remove(&self, wd: i32) {
        let _ = inotify::remove_watch(&*self.fd, wd);
    }
}
