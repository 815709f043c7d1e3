//! The ring's registered-file table (`IORING_REGISTER_FILES`, sparse).
//!
//! An op whose fd is registered names the fd's slot in its SQEs, so the
//! kernel takes no file reference per SQE. A slot is handed to another fd
//! only once it was unregistered and no op that names it is left (`users`):
//! an op's continuations name the slot too, and an SQE naming a reused slot
//! would reach the wrong file.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use io_uring::Submitter;

use crate::op::Fixed;
use crate::SharedFd;

pub(crate) struct FileTable {
    slots: Vec<FileSlot>,
    free: Vec<u32>,
    by_fd: HashMap<RawFd, u32>,
}

#[derive(Default)]
struct FileSlot {
    /// Keeps the fd open (so its number cannot be reused) while registered.
    _fd: Option<SharedFd>,
    users: u32,
    /// Unregistered: emptied once `users` is 0.
    retired: bool,
}

impl FileTable {
    /// A table of `slots` empty slots, if the kernel takes it.
    pub(crate) fn new(sub: &Submitter<'_>, slots: u32) -> Option<FileTable> {
        sub.register_files_sparse(slots).ok()?;
        Some(FileTable {
            slots: (0..slots).map(|_| FileSlot::default()).collect(),
            free: (0..slots).rev().collect(),
            by_fd: HashMap::new(),
        })
    }

    /// Puts `fd` in a free slot; false when none is free or the kernel refuses.
    pub(crate) fn register(&mut self, sub: &Submitter<'_>, fd: &SharedFd) -> bool {
        let raw = fd.as_raw_fd();
        if self.by_fd.contains_key(&raw) {
            return true;
        }
        let Some(slot) = self.free.pop() else {
            return false;
        };
        if sub.register_files_update(slot, &[raw]).is_err() {
            self.free.push(slot);
            return false;
        }
        self.slots[slot as usize] = FileSlot {
            _fd: Some(Arc::clone(fd)),
            users: 0,
            retired: false,
        };
        self.by_fd.insert(raw, slot);
        true
    }

    /// New ops on `raw` use the fd; its slot is emptied once no op names it.
    pub(crate) fn unregister(&mut self, sub: &Submitter<'_>, raw: RawFd) {
        if let Some(slot) = self.by_fd.remove(&raw) {
            self.slots[slot as usize].retired = true;
            self.release_if_unused(sub, slot);
        }
    }

    /// The registered slot an op with these fds names, counted as a user.
    pub(crate) fn use_for(&mut self, fds: [Option<RawFd>; 2]) -> Fixed {
        let (raw, slot) = fds
            .into_iter()
            .flatten()
            .find_map(|raw| self.by_fd.get(&raw).map(|&slot| (raw, slot)))?;
        self.slots[slot as usize].users += 1;
        Some((raw, slot))
    }

    /// An op that named `slot` has left the slab.
    pub(crate) fn done_with(&mut self, sub: &Submitter<'_>, slot: u32) {
        let s = &mut self.slots[slot as usize];
        s.users = s.users.saturating_sub(1);
        self.release_if_unused(sub, slot);
    }

    fn release_if_unused(&mut self, sub: &Submitter<'_>, slot: u32) {
        let s = &mut self.slots[slot as usize];
        if !s.retired || s.users > 0 {
            return;
        }
        // -1 empties the slot; the kernel drops its reference once the
        // requests that used it are done. On failure the slot stays retired
        // and is never handed out again.
        if sub.register_files_update(slot, &[-1]).is_ok() {
            *s = FileSlot::default();
            self.free.push(slot);
        }
    }
}
