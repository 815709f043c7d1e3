//! A request that may ask a file's home more than one question before it changes anything (a
//! rename asks whether it waits of the parent directory's home, of the file's and of the
//! replaced file's): each question parks the request ([`crate::lookup::Lookup::Home`]) and it
//! runs again with every answer it was given so far, kept by the question's tag
//! ([`crate::cmd::Asked::Homes`]), so that each question is asked once. A rename run again
//! after it waited for breaks parks the same way ([`crate::cmd::create::retry`]).

use std::sync::Mutex;

use ringshare_wire::NtStatus;

use crate::arbiter::{self, Decision};
use crate::cmd::ids::ASK_IDS;
use crate::exchange::ConnCore;
use crate::lookup::{DomainAnswer, HomeAnswers, HomeAsk, Lookup};
use crate::server::{FileEntry, FileKey, ServerState};

/// The home's answers a request was given, and the question it asks next.
pub(crate) struct HomeAsks {
    kept: HomeAnswers,
    wanted: Option<(u64, HomeAsk)>,
    posts: Vec<Lookup>,
    /// A file system job the request asks before it decides (a rename's look at its target on
    /// a share whose calls may wait on a network: cmd/set_info/moves.rs); the answers kept
    /// ride with it ([`ConnCore::fs_kept`]).
    fs_wanted: Option<Lookup>,
}

impl HomeAsks {
    /// The answers kept for the request `core` runs (none the first time).
    pub(crate) fn of(core: &mut ConnCore) -> HomeAsks {
        let kept = match core.domain_answer.take() {
            Some(DomainAnswer::Homes(kept)) => kept,
            // Run again after a file system job asked with answers kept: the job's answer
            // stays for the request to take.
            Some(DomainAnswer::Fs(done, Some(kept))) if matches!(*kept, DomainAnswer::Homes(_)) => {
                core.domain_answer = Some(DomainAnswer::Fs(done, None));
                match *kept {
                    DomainAnswer::Homes(kept) => kept,
                    _ => Vec::new(),
                }
            }
            other => {
                core.domain_answer = other;
                Vec::new()
            }
        };
        HomeAsks {
            kept,
            wanted: None,
            posts: Vec::new(),
            fs_wanted: None,
        }
    }

    /// Whether a rename by open `owner` waits for breaks of `key`'s handle caching
    /// ([`arbiter::rename_waits_or_ask`]): the kept answer, or Err([`ASK_IDS`]) with the question.
    pub(crate) fn rename_waits(
        &mut self,
        server: &ServerState,
        key: FileKey,
        entry: &Mutex<FileEntry>,
        owner: u64,
        (conn_id, now_ms): (u64, u64),
    ) -> Result<bool, NtStatus> {
        let tag = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            ("rename", key, owner).hash(&mut h);
            h.finish()
        };
        if let Some((_, answer)) = self.kept.iter().find(|(t, _)| *t == tag) {
            return arbiter::rename_waits_answered(answer.clone());
        }
        match arbiter::rename_waits_or_ask(server, key, entry, owner, conn_id, now_ms) {
            Decision::Made(r) => r,
            Decision::Ask(ask, ()) => {
                self.wanted = Some((tag, ask));
                Err(ASK_IDS)
            }
        }
    }

    /// The request asks file system job `job` first (Err([`ASK_IDS`]) follows): it runs again
    /// with its answer and the home's answers kept so far.
    pub(crate) fn want_fs(&mut self, job: crate::fsjob::FsJob) {
        self.fs_wanted = Some(Lookup::Fs(job));
    }

    /// The file of `key` now lives at `to` ([`arbiter::moved_posted`]): the home is told by a call
    /// nobody waits for (posted after the request).
    pub(crate) fn moved(
        &mut self,
        server: &ServerState,
        key: FileKey,
        entry: &Mutex<FileEntry>,
        to: &ringshare_vfs::RelPath,
    ) {
        if let Some(ask) = arbiter::moved_posted(&server.node, key, entry, to) {
            self.posts.push(Lookup::Home(ask));
        }
    }

    /// Open `owner` changed the file of `key` (its size; [`arbiter::changed_posted`]): other
    /// opens' read caching breaks, at once here or by a call to the file's home nobody waits
    /// for (posted after the request).
    pub(crate) fn changed(
        &mut self,
        server: &ServerState,
        key: FileKey,
        entry: &Mutex<FileEntry>,
        (owner, now_ms): (u64, u64),
    ) {
        if let Some(ask) = arbiter::changed_posted(server, key, entry, owner, now_ms) {
            self.posts.push(Lookup::Home(ask));
        }
    }

    /// The request ran: its question, if it asks one, goes to `core` with the answers kept
    /// (the request parks: [`crate::cmd::ids::parked`]); its posts are posted.
    pub(crate) fn done(self, core: &mut ConnCore) {
        if let Some((tag, ask)) = self.wanted {
            core.ids_wanted = Some(Lookup::Home(ask));
            core.home_kept = Some((tag, self.kept));
        } else if let Some(job) = self.fs_wanted {
            core.ids_wanted = Some(job);
            if !self.kept.is_empty() {
                core.fs_kept = Some(DomainAnswer::Homes(self.kept));
            }
        }
        core.cluster_posts.extend(self.posts);
    }
}
