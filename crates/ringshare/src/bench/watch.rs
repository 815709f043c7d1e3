//! `--watchers N`: besides the workload, N connections each keep a
//! CHANGE_NOTIFY waiting on `--watch-dir` (every change, WATCH_TREE), send
//! the next one as soon as one is answered, and count the changes they are
//! told of and the NOTIFY_ENUM_DIR answers. With `metadata
//! --delete-on-close` (each pass creates and deletes its files) this is how
//! many changes per second reach a watcher; with other workloads, what
//! watchers present cost the workload.

use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

use ringshare_client::{Event, Reply};
use ringshare_wire::consts::CreateDisposition;
use ringshare_wire::fscc::decode_notify_chain;
use ringshare_wire::FileId;

use super::reconnect::Link;
use super::Shared;

/// FILE_LIST_DIRECTORY | FILE_READ_ATTRIBUTES | SYNCHRONIZE.
const WATCH_ACCESS: u32 = 0x0010_0081;
const DIRECTORY_FILE: u32 = 0x1;
/// Every CompletionFilter bit.
const ALL_CHANGES: u32 = 0xFFF;
/// The output buffer each request offers.
const BUFFER: u32 = 64 * 1024;

/// What the watchers saw.
#[derive(Debug, Default, Clone, Copy)]
pub struct Seen {
    pub watchers: u32,
    /// Changes reported (FILE_NOTIFY_INFORMATION records).
    pub changes: u64,
    /// Answers that were NOTIFY_ENUM_DIR (changes lost: read again).
    pub enum_dirs: u64,
}

/// Running watchers: their threads and sockets (shut down to stop them).
pub(crate) struct Watchers {
    threads: Vec<JoinHandle<Result<Seen, String>>>,
    socks: Vec<TcpStream>,
}

/// Connect `n` watchers; each has its first request waiting when this returns.
pub(crate) fn start(sh: &Arc<Shared>, n: u32) -> Result<Watchers, String> {
    let mut w = Watchers {
        threads: Vec::new(),
        socks: Vec::new(),
    };
    for i in 0..n {
        let opts = super::worker::client_options(sh, 10_000 + i as usize);
        let mut link = Link::open(sh, &opts)?;
        let dir = open_dir(&mut link, &sh.args.watch_dir)?;
        // The ECHO's answer comes after the server took the CHANGE_NOTIFY.
        link.smb
            .change_notify(1, dir, ALL_CHANGES, true, BUFFER)
            .map_err(|e| e.to_string())?;
        link.smb.echo(2).map_err(|e| e.to_string())?;
        if let Err(s) = link.call(2)? {
            return Err(format!("watcher ECHO: {s:?}"));
        }
        w.socks.push(
            link.sock
                .try_clone()
                .map_err(|e| format!("watcher socket: {e}"))?,
        );
        let sh2 = Arc::clone(sh);
        let t = std::thread::Builder::new()
            .name(format!("bench-watch-{i}"))
            .spawn(move || watch(&sh2, link, dir))
            .map_err(|e| format!("cannot start a thread: {e}"))?;
        w.threads.push(t);
    }
    Ok(w)
}

fn open_dir(link: &mut Link, name: &str) -> Result<FileId, String> {
    link.smb
        .create(
            3,
            name,
            WATCH_ACCESS,
            CreateDisposition::OPEN,
            DIRECTORY_FILE,
        )
        .map_err(|e| e.to_string())?;
    match link.call(3)? {
        Ok(Reply::Create { file_id, .. }) => Ok(file_id),
        Ok(_) => Err("unexpected reply to CREATE".into()),
        Err(s) => Err(format!("opening the watched directory {name:?}: {s:?}")),
    }
}

/// Answer after answer until the run stops (its socket is shut down).
fn watch(sh: &Shared, mut link: Link, dir: FileId) -> Result<Seen, String> {
    let mut seen = Seen::default();
    let mut events = Vec::new();
    let mut tag = 10u64;
    loop {
        if let Err(e) = link.receive(&mut events) {
            if sh.stop.load(Ordering::Acquire) {
                return Ok(seen);
            }
            return Err(format!("watcher: {e}"));
        }
        for ev in events.drain(..) {
            let Event::Done { tag: t, result, .. } = ev else {
                continue;
            };
            if t != 1 && t < 10 {
                continue;
            }
            match result {
                Ok(Reply::ChangeNotify { buffer, enum_dir }) => {
                    if enum_dir {
                        seen.enum_dirs += 1;
                    } else if sh.go.load(Ordering::Acquire) {
                        let n = decode_notify_chain(&link.frame()[buffer])
                            .map_err(|e| format!("a malformed FILE_NOTIFY_INFORMATION: {e}"))?;
                        seen.changes += n.len() as u64;
                    }
                }
                Ok(_) => {}
                Err(e) => return Err(format!("CHANGE_NOTIFY: {e}")),
            }
            tag += 1;
            let asked = link
                .smb
                .change_notify(tag, dir, ALL_CHANGES, true, BUFFER)
                .map_err(|e| e.to_string())
                .and_then(|_| link.flush());
            if let Err(e) = asked {
                // An answer that came as the run stopped: its socket is shut down under the
                // next request (`send: Broken pipe`), which is the end, not a failure.
                if sh.stop.load(Ordering::Acquire) {
                    return Ok(seen);
                }
                return Err(e);
            }
        }
    }
}

/// Stop the watchers and add up what they saw.
pub(crate) fn finish(w: Watchers) -> Result<Seen, String> {
    for s in &w.socks {
        let _ = s.shutdown(Shutdown::Both);
    }
    let mut total = Seen {
        watchers: w.threads.len() as u32,
        ..Seen::default()
    };
    for t in w.threads {
        let s = t
            .join()
            .map_err(|_| "a watcher thread panicked".to_string())??;
        total.changes += s.changes;
        total.enum_dirs += s.enum_dirs;
    }
    Ok(total)
}
