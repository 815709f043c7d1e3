//! Who a file operation runs as: per-thread Unix credentials.
//!
//! A server running as root acts as each SMB user by switching the
//! credentials of the one thread doing the work, never the process's: Linux
//! keeps uids, gids, supplementary groups and capabilities per thread, and
//! the raw system calls change only the caller (glibc's `setresuid` wrappers
//! would change every thread). [`act_as`] switches lazily: nothing happens
//! when the thread already acts as those credentials, so a thread serving one
//! user pays nothing per request.
//!
//! What a switch does (thread acting as the server, saved uid 0):
//! - the **effective** uid and gid (and so the filesystem ones) become the
//!   user's, the supplementary groups the user's list;
//! - the **real and saved** uid and gid stay the server's (0). The way back
//!   to root is `setresuid(-1, 0, -1)`, and a local user whose uid matches
//!   cannot signal or ptrace the thread (the kernel compares the target's
//!   real and saved uids, never its effective one). Nothing here uses
//!   `access(2)` without `AT_EACCESS`, the one call that looks at the real uid;
//! - the kernel clears the effective capabilities when the effective uid
//!   leaves 0 (CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_CHOWN, CAP_FSETID,
//!   CAP_SYS_RESOURCE…), so a user's operation gets no privilege; they come
//!   back when the effective uid returns to 0.
//!
//! Switching is off until [`enable`] is called (by a server running as root);
//! then and only then [`act_as`] changes anything. Without it every call is a
//! no-op and everything runs as the process.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt;
use std::io;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use rustix::process::{Gid, Uid};

/// Unix credentials to act as: an effective uid and gid and the
/// supplementary groups (sorted, without duplicates).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Creds {
    uid: u32,
    gid: u32,
    groups: Box<[u32]>,
}

/// The most supplementary groups a [`Creds`] keeps (the kernel's NGROUPS_MAX).
pub const GROUPS_MAX: usize = 65536;

impl Creds {
    /// Credentials of `uid` with primary group `gid` and supplementary
    /// `groups` (sorted and deduplicated here; more than [`GROUPS_MAX`] are cut).
    pub fn new(uid: u32, gid: u32, groups: impl Into<Vec<u32>>) -> Creds {
        let mut groups = groups.into();
        groups.sort_unstable();
        groups.dedup();
        groups.truncate(GROUPS_MAX);
        Creds {
            uid,
            gid,
            groups: groups.into_boxed_slice(),
        }
    }

    pub fn uid(&self) -> u32 {
        self.uid
    }

    pub fn gid(&self) -> u32 {
        self.gid
    }

    pub fn groups(&self) -> &[u32] {
        &self.groups
    }

    /// True when `gid` is the primary group or one of the supplementary ones.
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.binary_search(&gid).is_ok()
    }

    /// The credentials the calling thread runs with (its effective ids and
    /// groups): the process's, unless the thread acts as someone.
    pub fn of_process() -> Creds {
        Creds::new(
            rustix::process::geteuid().as_raw(),
            rustix::process::getegid().as_raw(),
            rustix::process::getgroups()
                .unwrap_or_default()
                .into_iter()
                .map(Gid::as_raw)
                .collect::<Vec<_>>(),
        )
    }
}

impl fmt::Debug for Creds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "uid {} gid {} groups {:?}",
            self.uid, self.gid, self.groups
        )
    }
}

/// Process-wide table behind [`intern`].
fn interned() -> &'static Mutex<HashMap<Creds, Weak<Creds>>> {
    static TABLE: OnceLock<Mutex<HashMap<Creds, Weak<Creds>>>> = OnceLock::new();
    TABLE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The one shared `Arc` for these credentials while any is alive: sessions of
/// the same user share it, so a ring registers one io_uring personality for
/// all of them ([`crate::Ring::personality`]).
pub fn intern(c: Creds) -> Arc<Creds> {
    let mut t = interned().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(a) = t.get(&c).and_then(Weak::upgrade) {
        return a;
    }
    if t.len() >= 1024 {
        t.retain(|_, w| w.strong_count() > 0);
    }
    let a = Arc::new(c.clone());
    t.insert(c, Arc::downgrade(&a));
    a
}

/// The server's own credentials, captured by [`enable`].
struct Baseline {
    egid: u32,
    groups: Vec<Gid>,
    /// The same as credentials: acting as these is acting as the server.
    creds: Creds,
    /// And shared ([`server`]).
    shared: Arc<Creds>,
}

static BASELINE: OnceLock<Baseline> = OnceLock::new();

/// Turns switching on for the whole process. Call once at start, before any
/// thread acts as a user. Refused (`PermissionDenied`) unless the process runs
/// as root with real and effective uid 0: a thread keeps the real uid while
/// it acts as a user, and a real uid that some user owns would let that user
/// signal it. Idempotent.
pub fn enable() -> io::Result<()> {
    if BASELINE.get().is_some() {
        return Ok(());
    }
    if !rustix::process::geteuid().is_root() || !rustix::process::getuid().is_root() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "acting as users needs a server running as root",
        ));
    }
    let creds = Creds::of_process();
    let _ = BASELINE.set(Baseline {
        egid: rustix::process::getegid().as_raw(),
        groups: rustix::process::getgroups()?,
        shared: intern(creds.clone()),
        creds,
    });
    Ok(())
}

/// The server's own credentials, shared: those [`enable`] captured, or while
/// switching is off the process's (every thread then has them).
pub fn server() -> Arc<Creds> {
    static SERVER: OnceLock<Arc<Creds>> = OnceLock::new();
    if let Some(b) = BASELINE.get() {
        return Arc::clone(&b.shared);
    }
    Arc::clone(SERVER.get_or_init(|| intern(Creds::of_process())))
}

/// Whether acting as `c` is acting as the server itself (always true while
/// switching is off: everything then runs as the process).
pub fn is_server(c: &Creds) -> bool {
    BASELINE.get().is_none_or(|b| b.creds == *c)
}

/// Whether [`enable`] turned switching on.
pub fn enabled() -> bool {
    BASELINE.get().is_some()
}

/// What this thread acts as now.
#[derive(Clone, PartialEq, Eq)]
enum Acting {
    /// The server's own credentials.
    Server,
    /// A user's.
    User(Creds),
    /// A switch failed half-way: the next call redoes everything.
    Unknown,
}

thread_local! {
    static ACTING: RefCell<Acting> = const { RefCell::new(Acting::Server) };
    static SWITCHES: Cell<u64> = const { Cell::new(0) };
}

/// How many times this thread changed its credentials (for reports of
/// switches per request).
pub fn thread_switches() -> u64 {
    SWITCHES.with(Cell::get)
}

/// Whether this thread acts as `c` now (always false while switching is off).
pub fn acting_as(c: &Creds) -> bool {
    enabled() && ACTING.with(|a| matches!(&*a.borrow(), Acting::User(u) if u == c))
}

/// Makes this thread act as `c` for what follows: file system calls, and the
/// io_uring personality registered now. Nothing happens when it already does,
/// or when switching is off. On an error the thread is left acting as the
/// server, or refusing to act until a later call succeeds: never as a third
/// identity.
///
/// From another user the thread goes straight to `c` without passing through
/// the server's gid and groups, and a gid or group list that is already right
/// is not set again: every credential system call costs the kernel a new
/// credential structure (docs/benchmarks.md, "Acting as users").
pub fn act_as(c: &Creds) -> io::Result<()> {
    let Some(base) = BASELINE.get() else {
        return Ok(());
    };
    if *c == base.creds {
        return act_as_server();
    }
    ACTING
        .with(|a| {
            let mut a = a.borrow_mut();
            let (same_gid, same_groups) = match &*a {
                Acting::User(u) if u == c => return Ok(()),
                Acting::User(u) => (u.gid == c.gid, u.groups == c.groups),
                Acting::Server => (base.creds.gid == c.gid, base.creds.groups == c.groups),
                Acting::Unknown => (false, false),
            };
            let was = std::mem::replace(&mut *a, Acting::Unknown);
            match was {
                Acting::Server => {}
                // Effective uid 0 first: it brings back the capabilities
                // the calls below need.
                Acting::User(_) => rustix::thread::set_thread_res_uid(None, Uid::ROOT, None)?,
                Acting::Unknown => to_server(base)?,
            }
            to_user(c, same_gid, same_groups)?;
            *a = Acting::User(c.clone());
            SWITCHES.with(|s| s.set(s.get() + 1));
            Ok(())
        })
        .inspect_err(|_| {
            let _ = act_as_server();
        })
}

/// Makes this thread act as the server again (for the server's own files,
/// pipes and sockets). Nothing happens when it already does or when switching
/// is off.
pub fn act_as_server() -> io::Result<()> {
    let Some(base) = BASELINE.get() else {
        return Ok(());
    };
    ACTING.with(|a| {
        let mut a = a.borrow_mut();
        let was = std::mem::replace(&mut *a, Acting::Unknown);
        match &was {
            Acting::Server => {
                *a = Acting::Server;
                return Ok(());
            }
            Acting::User(u) => {
                rustix::thread::set_thread_res_uid(None, Uid::ROOT, None)?;
                if u.gid != base.creds.gid {
                    rustix::thread::set_thread_res_gid(None, Gid::from_raw(base.egid), None)?;
                }
                if u.groups != base.creds.groups {
                    rustix::thread::set_thread_groups(&base.groups)?;
                }
            }
            Acting::Unknown => to_server(base)?,
        }
        *a = Acting::Server;
        SWITCHES.with(|s| s.set(s.get() + 1));
        Ok(())
    })
}

/// From any state to the server's credentials: effective uid 0 first (it
/// restores the capabilities the next calls need), then gid and groups.
fn to_server(base: &Baseline) -> io::Result<()> {
    rustix::thread::set_thread_res_uid(None, Uid::ROOT, None)?;
    rustix::thread::set_thread_res_gid(None, Gid::from_raw(base.egid), None)?;
    rustix::thread::set_thread_groups(&base.groups)?;
    Ok(())
}

/// From effective uid 0 to `c`'s credentials: groups and gid (unless the
/// thread has them already) while still privileged, the effective uid last
/// (that drops the capabilities).
fn to_user(c: &Creds, same_gid: bool, same_groups: bool) -> io::Result<()> {
    if !same_groups {
        let groups: Vec<Gid> = c.groups.iter().map(|g| Gid::from_raw(*g)).collect();
        rustix::thread::set_thread_groups(&groups)?;
    }
    if !same_gid {
        rustix::thread::set_thread_res_gid(None, Gid::from_raw(c.gid), None)?;
    }
    rustix::thread::set_thread_res_uid(None, Uid::from_raw(c.uid), None)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_kept_sorted_without_duplicates() {
        let c = Creds::new(1000, 100, vec![27, 100, 4, 27]);
        assert_eq!(c.groups(), &[4, 27, 100]);
        assert!(c.in_group(27) && c.in_group(100) && !c.in_group(5));
    }

    #[test]
    fn interning_equal_credentials_gives_one_arc_while_it_lives() {
        let a = intern(Creds::new(4242, 4242, vec![1, 2]));
        let b = intern(Creds::new(4242, 4242, vec![2, 1]));
        assert!(Arc::ptr_eq(&a, &b));
        let c = intern(Creds::new(4242, 4243, vec![1, 2]));
        assert!(!Arc::ptr_eq(&a, &c));
    }
}
