//! `list --dir-lease`: a client that trusts its directory lease, as Windows
//! does with the listings it caches. Each connection opens `--dir` asking for
//! an RH lease, lists it to the end, and while the lease holds answers from
//! what it listed (it sends nothing); when the server breaks the lease it
//! acknowledges the break if asked, closes, opens again with a new lease and
//! lists again. A server that grants no lease gets the listing asked again at
//! once (a client cannot cache without one).
//!
//! `--dir-changes N`: one more connection creates a new, empty file in `--dir`
//! N times a second while the run measures (and removes them afterwards), so
//! that leases are broken and listed again. The report says how many
//! listings the clients made, how many breaks came, and how long after a
//! change was sent its break reached a client.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ringshare_client::Reply;
use ringshare_wire::consts::CreateDisposition;

use super::hist::Histogram;
use super::reconnect::Link;
use super::Shared;

/// FILE_READ_ATTRIBUTES: enough to create a file and nothing more.
const CHANGER_ACCESS: u32 = 0x0000_0080;
/// DELETE | FILE_READ_ATTRIBUTES, to remove the changer's files.
const DELETE_ACCESS: u32 = 0x0001_0080;
const NON_DIRECTORY_FILE: u32 = 0x40;
const DELETE_ON_CLOSE: u32 = 0x1000;

/// What the lease-holding clients and the changer count, shared by the
/// threads.
pub(crate) struct Counters {
    /// Times are nanoseconds since this.
    start: Instant,
    /// When the last change's CREATE was sent (0: none yet).
    changed_at: AtomicU64,
    changes: AtomicU64,
    breaks: AtomicU64,
    listings: AtomicU64,
    /// From a change's CREATE sent to a break's arrival at a client.
    break_after: Mutex<Histogram>,
}

/// What a run saw.
#[derive(Debug, Clone, Copy, Default)]
pub struct Seen {
    /// Listings made to the end (QUERY_DIRECTORY until STATUS_NO_MORE_FILES).
    pub listings: u64,
    /// Directory changes the changer made.
    pub changes: u64,
    /// Lease breaks the clients were sent.
    pub breaks: u64,
    /// A break's arrival after the change's CREATE was sent: p50, p99 (ns).
    pub break_after_ns: (u64, u64),
}

impl Counters {
    pub(crate) fn new() -> Counters {
        Counters {
            start: Instant::now(),
            changed_at: AtomicU64::new(0),
            changes: AtomicU64::new(0),
            breaks: AtomicU64::new(0),
            listings: AtomicU64::new(0),
            break_after: Mutex::new(Histogram::new()),
        }
    }

    fn now_ns(&self) -> u64 {
        (self.start.elapsed().as_nanos() as u64).max(1)
    }

    /// A client listed the directory to its end.
    pub(crate) fn listed(&self) {
        self.listings.fetch_add(1, Ordering::Relaxed);
    }

    /// A client's lease was broken.
    pub(crate) fn broken(&self) {
        self.breaks.fetch_add(1, Ordering::Relaxed);
        let at = self.changed_at.load(Ordering::Acquire);
        if at > 0 {
            let after = self.now_ns().saturating_sub(at);
            crate::lock(&self.break_after).record(after);
        }
    }

    pub(crate) fn seen(&self) -> Seen {
        let h = crate::lock(&self.break_after);
        Seen {
            listings: self.listings.load(Ordering::Relaxed),
            changes: self.changes.load(Ordering::Relaxed),
            breaks: self.breaks.load(Ordering::Relaxed),
            break_after_ns: if h.count() > 0 {
                (h.quantile(0.5), h.quantile(0.99))
            } else {
                (0, 0)
            },
        }
    }
}

/// Start the changer of `--dir-changes` (connected, its thread waiting for the
/// measurement to begin), or nothing when none is asked for.
pub(crate) fn start_changer(
    sh: &Arc<Shared>,
) -> Result<Option<JoinHandle<Result<(), String>>>, String> {
    let rate = sh.args.dir_changes;
    if rate == 0 {
        return Ok(None);
    }
    let opts = super::worker::client_options(sh, 20_000);
    let link = Link::open(sh, &opts)?;
    let sh2 = Arc::clone(sh);
    std::thread::Builder::new()
        .name("bench-dir-changer".into())
        .spawn(move || change(&sh2, link, Duration::from_secs_f64(1.0 / f64::from(rate))))
        .map(Some)
        .map_err(|e| format!("cannot start a thread: {e}"))
}

/// A file of the changer's, inside `--dir`.
fn name(sh: &Shared, k: u64) -> String {
    let dir = sh.args.dir.trim_end_matches(['\\', '/']);
    let file = format!("rschange-{}-{k}", std::process::id());
    if dir.is_empty() {
        file
    } else {
        format!("{dir}\\{file}")
    }
}

/// Create a file every `every` while the run measures; then remove them.
fn change(sh: &Shared, mut link: Link, every: Duration) -> Result<(), String> {
    let c = &sh.dir;
    let mut made = 0u64;
    while !sh.go.load(Ordering::Acquire) {
        if sh.stop.load(Ordering::Acquire) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut next = Instant::now();
    let result = (|| {
        while !sh.stop.load(Ordering::Acquire) {
            let now = Instant::now();
            if now < next {
                std::thread::sleep((next - now).min(Duration::from_millis(20)));
                continue;
            }
            next += every;
            c.changed_at.store(c.now_ns(), Ordering::Release);
            let file = open(
                &mut link,
                &name(sh, made),
                CHANGER_ACCESS,
                0,
                CreateDisposition::CREATE,
            )?;
            made += 1;
            c.changes.fetch_add(1, Ordering::Relaxed);
            close(&mut link, file)?;
        }
        Ok(())
    })();
    for k in 0..made {
        let removed = open(
            &mut link,
            &name(sh, k),
            DELETE_ACCESS,
            DELETE_ON_CLOSE,
            CreateDisposition::OPEN,
        )
        .and_then(|f| close(&mut link, f));
        if let Err(e) = removed {
            sh.error(format!("removing the changer's file {}: {e}", name(sh, k)));
        }
    }
    result
}

fn open(
    link: &mut Link,
    name: &str,
    access: u32,
    options: u32,
    disposition: CreateDisposition,
) -> Result<ringshare_wire::FileId, String> {
    link.smb
        .create(1, name, access, disposition, NON_DIRECTORY_FILE | options)
        .map_err(|e| e.to_string())?;
    match link.call(1)? {
        Ok(Reply::Create { file_id, .. }) => Ok(file_id),
        Ok(other) => Err(format!("creating {name}: unexpected {other:?}")),
        Err(s) => Err(format!("creating {name}: {s:?}")),
    }
}

fn close(link: &mut Link, file: ringshare_wire::FileId) -> Result<(), String> {
    link.smb.close(2, file).map_err(|e| e.to_string())?;
    match link.call(2)? {
        Ok(_) => Ok(()),
        Err(s) => Err(format!("CLOSE: {s:?}")),
    }
}
