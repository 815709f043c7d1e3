//! Samba's `get quota command` and `set quota command`: programs that read and set quotas where
//! the server has no other way (these machines' kernels have no quota format on ext4 or xfs:
//! docs/limits.md). Same arguments and output as Samba 4.22's (measured against its smbd):
//!
//! - get: `CMD PATH TYPE ID`, PATH relative to the share's directory (`.` for it, the command
//!   runs there), TYPE Samba's quota type (1 the file system's user quota state and defaults,
//!   id -1; 2 a user's quota; 3 and 4 the same for groups), ID the uid or gid. It prints one
//!   line: flags (0 none, 1 on, 2 enforced), used blocks, soft and hard block limits, used
//!   inodes, soft and hard inode limits, and optionally the block size (default 1024).
//! - set: `CMD PATH TYPE ID FLAGS BSOFT BHARD ISOFT IHARD BSIZE`, PATH the share's directory;
//!   any output is success, none failure.
//!
//! Asked as the user the answer is for (a user's own free space), like Samba, whose smbd runs
//! them as the user it then is (primary group only here: the supplementary groups are dropped);
//! as root for an administrator. They run on the driver's lookup threads
//! ([`ringshare_core::lookup`]), never on an I/O thread, and are given [`COMMAND_TIMEOUT`]:
//! then killed, logged, and taken as no answer.
//!
//! Without a `get quota command` a share's quotas come from the kernel ([`kernel`]), as on Samba.

pub mod kernel;

use std::io::Read as _;
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringshare_core::quota::{DiskQuota, QuotaSource, QuotaType};
use ringshare_vfs::Who;

use crate::config::{Global, ShareConfig};

/// How long a quota command may run.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);
/// errno: the program file is open for writing.
const ETXTBSY: i32 = 26;
/// The most of a command's output read.
const OUTPUT_MAX: u64 = 64 * 1024;

/// A share's quotas through `get quota command` and `set quota command`.
#[derive(Debug)]
pub struct CommandQuotas {
    get: Option<String>,
    set: Option<String>,
    /// The share's directory: the commands run there.
    root: PathBuf,
    /// How long a command may run ([`COMMAND_TIMEOUT`]).
    timeout: Duration,
}

/// The quota source of share `s`: its `get quota command`, else the kernel's quotas of its file
/// system (None for shares made per user, whose directory is known only at a tree connect, and
/// when the share's directory cannot be opened: logged).
pub fn source(g: &Global, s: &ShareConfig) -> Option<Arc<dyn QuotaSource>> {
    if s.templated {
        return None;
    }
    if g.get_quota_command.is_none() {
        return match kernel::KernelQuotas::open(&s.path) {
            Ok(k) => Some(Arc::new(k)),
            Err(e) => {
                tracing::warn!(share = %s.name, "no quotas: cannot open {}: {e}", s.path.display());
                None
            }
        };
    }
    Some(Arc::new(CommandQuotas {
        get: g.get_quota_command.clone(),
        set: g.set_quota_command.clone(),
        root: s.path.clone(),
        timeout: COMMAND_TIMEOUT,
    }))
}

/// The uids of /etc/passwd, each once (Samba walks NSS's password database; accounts NSS
/// has only from a directory are not listed here, but are found by name).
pub fn passwd_uids() -> Vec<u32> {
    let text = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let mut uids: Vec<u32> = Vec::new();
    for uid in text
        .lines()
        .filter_map(|l| l.split(':').nth(2)?.parse().ok())
    {
        if !uids.contains(&uid) {
            uids.push(uid);
        }
    }
    uids
}

impl CommandQuotas {
    /// Run `program args` in the share's directory (as `who` unless root), for at most
    /// its timeout: its output, or why there is none (logged).
    fn run(&self, program: &str, args: &[String], who: Option<&Who>) -> Result<String, String> {
        let mut c = Command::new(program);
        c.args(args)
            .current_dir(&self.root)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some(w) = who.filter(|w| w.uid() != 0) {
            c.uid(w.uid()).gid(w.gid());
        }
        let line = format!("{program} {}", args.join(" "));
        let fail = |why: String| {
            tracing::warn!("quota command '{line}': {why}");
            why
        };
        // A script just written may be held open for writing by a process forked meanwhile
        // (until it execs): ETXTBSY for a moment.
        let mut tries = 0;
        let mut child = loop {
            match c.spawn() {
                Err(e) if e.raw_os_error() == Some(ETXTBSY) && tries < 5 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
                r => break r.map_err(|e| fail(format!("cannot run it: {e}")))?,
            }
        };
        let out = child.stdout.take();
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(o) = out {
                let _ = o.take(OUTPUT_MAX).read_to_string(&mut text);
            }
            text
        });
        let deadline = Instant::now() + self.timeout;
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    let secs = self.timeout.as_secs_f64();
                    return Err(fail(format!("no answer within {secs} s: killed")));
                }
                Err(e) => return Err(fail(format!("cannot wait for it: {e}"))),
            }
        };
        let text = reader.join().unwrap_or_default();
        tracing::debug!("quota command '{line}' ({status}): {text:?}");
        Ok(text)
    }
}

impl QuotaSource for CommandQuotas {
    fn get(&self, who: &Who, path: &str, kind: QuotaType, id: i64) -> Result<DiskQuota, String> {
        let Some(program) = &self.get else {
            return Err("no 'get quota command'".into());
        };
        let args = [path.to_string(), (kind as u8).to_string(), id.to_string()];
        let text = self.run(program, &args, Some(who))?;
        let first = text.lines().next().unwrap_or("");
        DiskQuota::parse(first).ok_or_else(|| {
            tracing::warn!("quota command '{program}': its output {first:?} is not a quota");
            format!("output {first:?} is not a quota")
        })
    }

    fn set(&self, path: &str, kind: QuotaType, id: i64, q: &DiskQuota) -> Result<(), String> {
        let Some(program) = &self.set else {
            return Err("no 'set quota command'".into());
        };
        let full = match path {
            "." => self.root.display().to_string(),
            p => self.root.join(p).display().to_string(),
        };
        let args = [
            full,
            (kind as u8).to_string(),
            id.to_string(),
            q.flags.to_string(),
            q.soft.to_string(),
            q.hard.to_string(),
            q.isoft.to_string(),
            q.ihard.to_string(),
            q.bsize.to_string(),
        ];
        let text = self.run(program, &args, None)?;
        if text.trim().is_empty() {
            return Err("it printed nothing (failure)".into());
        }
        Ok(())
    }

    fn users(&self) -> Vec<u32> {
        passwd_uids()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &std::path::Path, name: &str, body: &str) -> String {
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p.display().to_string()
    }

    fn root() -> Who {
        Arc::new(ringshare_engine::creds::Creds::new(0, 0, vec![]))
    }

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rs-quota-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_get_quota_command_gets_samba_arguments_in_the_share_and_its_line_is_read() {
        let d = dir("get");
        let get = script(
            &d,
            "get.sh",
            r#"echo "$(pwd) $*" > args; echo "2 10 100 200 1 0 0""#,
        );
        let q = CommandQuotas {
            get: Some(get),
            set: None,
            root: d.clone(),
            timeout: COMMAND_TIMEOUT,
        };
        let got = q.get(&root(), "sub", QuotaType::User, 1012).unwrap();
        assert_eq!(
            (got.flags, got.cur_blocks, got.soft, got.hard),
            (2, 10, 100, 200)
        );
        assert_eq!(got.bsize, 1024);
        let args = std::fs::read_to_string(d.join("args")).unwrap();
        assert_eq!(args.trim(), format!("{} sub 2 1012", d.display()));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_quota_command_that_hangs_is_killed_and_gives_no_answer() {
        let d = dir("hang");
        let q = CommandQuotas {
            get: Some(script(&d, "get.sh", "exec sleep 60")),
            set: Some(script(&d, "set.sh", "true")),
            root: d.clone(),
            timeout: Duration::from_millis(300),
        };
        let started = Instant::now();
        assert!(q.get(&root(), ".", QuotaType::UserFs, -1).is_err());
        let took = started.elapsed();
        assert!(
            took >= q.timeout && took < Duration::from_secs(5),
            "{took:?}"
        );
        // A set that prints nothing failed.
        assert!(q
            .set(".", QuotaType::User, 1, &DiskQuota::default())
            .is_err());
        let _ = std::fs::remove_dir_all(&d);
    }
}
