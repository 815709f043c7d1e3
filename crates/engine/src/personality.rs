//! A ring's io_uring personalities: registered credentials that an SQE names
//! (`sqe->personality`) to run as someone else.
//!
//! `IORING_REGISTER_PERSONALITY` records the credentials of the thread that
//! calls it, so registering user U means: this thread acts as U
//! ([`crate::creds::act_as`]), then registers. An SQE carrying the id runs
//! with U's credentials inline and in an io_uring worker alike, whatever the
//! ring thread's own credentials are at that moment.
//!
//! Rules kept here:
//! - every SQE names a personality while switching is on: a user's for file
//!   operations made for a user, the ring's own (the server's credentials,
//!   registered at start) for everything else, so no SQE ever runs with
//!   whatever credentials the thread happens to have;
//! - one id per credentials ([`crate::creds::intern`] shares the `Arc`), made
//!   on first use and kept while those credentials are alive somewhere (a
//!   session holds them) or an op names the id;
//! - an id is unregistered only when no op of the ring names it: ids are
//!   reused by the kernel, and an SQE queued with a reused id would run as
//!   someone else. (A submitted request holds its own reference to its
//!   credentials; only unsubmitted and continued SQEs read the id again.)
//! - at most [`PERSONALITIES_MAX`] per ring: when full, dead entries go
//!   first, then the least recently used one that no op names.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Weak};

use io_uring::Submitter;

use crate::creds::{self, Creds};

/// The most personalities one ring keeps (the kernel allows 65535).
pub const PERSONALITIES_MAX: usize = 1024;

struct Entry {
    who: Weak<Creds>,
    id: u16,
    /// Ops in the ring's slab that carry this id.
    ops: u32,
    /// When it was last asked for ([`Personalities::tick`]).
    used: u64,
}

/// The table of one ring.
pub(crate) struct Personalities {
    /// The server's own id (0 when switching is off: SQEs then carry none).
    own: u16,
    /// By the address of the credentials' `Arc`.
    entries: HashMap<usize, Entry>,
    /// Id -> key in `entries`.
    by_id: HashMap<u16, usize>,
    tick: u64,
}

fn key_of(who: &Arc<Creds>) -> usize {
    Arc::as_ptr(who) as usize
}

impl Personalities {
    /// The table of a new ring: with switching on, the server's own
    /// credentials are registered as the default for every SQE.
    pub(crate) fn new(submitter: &Submitter<'_>) -> io::Result<Personalities> {
        let own = if creds::enabled() {
            creds::act_as_server()?;
            submitter.register_personality()?
        } else {
            0
        };
        Ok(Personalities {
            own,
            entries: HashMap::new(),
            by_id: HashMap::new(),
            tick: 0,
        })
    }

    /// The id SQEs made for the server itself carry.
    pub(crate) fn own(&self) -> u16 {
        self.own
    }

    /// How many user personalities are registered.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The id for `who`, registered now if needed (the thread then acts as
    /// `who`). With switching off, the server's (0).
    pub(crate) fn id_for(
        &mut self,
        submitter: &Submitter<'_>,
        who: &Arc<Creds>,
    ) -> io::Result<u16> {
        if creds::is_server(who) {
            return Ok(self.own);
        }
        self.tick += 1;
        let key = key_of(who);
        if let Some(e) = self.entries.get_mut(&key) {
            e.used = self.tick;
            return Ok(e.id);
        }
        if self.entries.len() >= PERSONALITIES_MAX {
            self.sweep(submitter);
        }
        if self.entries.len() >= PERSONALITIES_MAX {
            let victim = self
                .entries
                .iter()
                .filter(|(_, e)| e.ops == 0)
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| *k);
            match victim {
                Some(k) => self.drop_entry(submitter, k),
                None => {
                    return Err(io::Error::new(
                        io::ErrorKind::ResourceBusy,
                        "every io_uring personality of this ring is in use",
                    ))
                }
            }
        }
        creds::act_as(who)?;
        let id = submitter.register_personality()?;
        self.entries.insert(
            key,
            Entry {
                who: Arc::downgrade(who),
                id,
                ops: 0,
                used: self.tick,
            },
        );
        self.by_id.insert(id, key);
        Ok(id)
    }

    /// An op carrying `id` was put in the ring's slab.
    pub(crate) fn hold(&mut self, id: u16) {
        if let Some(e) = self.by_id.get(&id).and_then(|k| self.entries.get_mut(k)) {
            e.ops += 1;
        }
    }

    /// An op carrying `id` left the slab.
    pub(crate) fn release(&mut self, id: u16) {
        if let Some(e) = self.by_id.get(&id).and_then(|k| self.entries.get_mut(k)) {
            e.ops = e.ops.saturating_sub(1);
        }
    }

    /// Unregisters the personalities of credentials nobody holds any more
    /// and no op names.
    pub(crate) fn sweep(&mut self, submitter: &Submitter<'_>) {
        let dead: Vec<usize> = self
            .entries
            .iter()
            .filter(|(_, e)| e.ops == 0 && e.who.strong_count() == 0)
            .map(|(k, _)| *k)
            .collect();
        for k in dead {
            self.drop_entry(submitter, k);
        }
    }

    fn drop_entry(&mut self, submitter: &Submitter<'_>, key: usize) {
        if let Some(e) = self.entries.remove(&key) {
            self.by_id.remove(&e.id);
            // EINVAL would mean the kernel has no such id: nothing to undo.
            let _ = submitter.unregister_personality(e.id);
        }
    }
}
