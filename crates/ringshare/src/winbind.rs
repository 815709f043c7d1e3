//! NTLM for domain users through winbind: a domain member hands a domain user's NTLMv2
//! response to Samba's `ntlm_auth --helper-protocol=ntlm-server-1`, which asks winbindd, which
//! asks a domain controller over its NETLOGON secure channel; the answer is the NTLMv2 session
//! base key, from which the NTLM code goes on as for a local user (key exchange, MIC). ringshare
//! has no NETLOGON client of its own.
//!
//! Helpers are kept running and reused, one request at a time each, at most [`HELPERS_MAX`]; a
//! helper that does not answer within [`ANSWER_TIMEOUT`] is killed and the logon refused. The
//! caller (a SESSION_SETUP on an I/O thread) waits for the answer.

use std::io::{self, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ringshare_auth::DomainNtlm;
use ringshare_cluster::etcd::b64;
use ringshare_core::domain::DomainLogons;

/// Helpers kept between logons.
pub const HELPERS_MAX: usize = 8;
/// How long a helper may take to answer (winbind asking a domain controller).
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest answer line taken from a helper.
const LINE_MAX: usize = 4096;

/// How a member with smb.conf `config` asks its domain: through winbind's `ntlm_auth` when it
/// is installed (else domain users log on with Kerberos only, and a line says so).
pub fn domain_logons(config: Option<&Path>) -> Option<std::sync::Arc<dyn DomainLogons>> {
    match find_ntlm_auth() {
        Some(p) => {
            tracing::info!(
                "NTLM logons of domain users are checked by the domain through winbind ({})",
                p.display()
            );
            Some(std::sync::Arc::new(NtlmAuth::new(&p, config)))
        }
        None => {
            tracing::warn!(
                "ntlm_auth not found (apt-get install winbind): domain users can log on with \
                 Kerberos tickets only, not with NTLM (by address or alias)"
            );
            None
        }
    }
}

/// `ntlm_auth` in one of the usual places.
pub fn find_ntlm_auth() -> Option<PathBuf> {
    [
        "/usr/bin/ntlm_auth",
        "/usr/local/bin/ntlm_auth",
        "/usr/local/samba/bin/ntlm_auth",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.is_file())
}

/// Domain users' NTLM logons through `ntlm_auth`.
pub struct NtlmAuth {
    program: PathBuf,
    config: Option<PathBuf>,
    idle: Mutex<Vec<Helper>>,
}

struct Helper {
    child: Child,
    stdin: ChildStdin,
    stdout: ChildStdout,
    buf: Vec<u8>,
}

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl NtlmAuth {
    /// Helpers running `program`, reading smb.conf `config` (winbind's separator and socket).
    pub fn new(program: &Path, config: Option<&Path>) -> NtlmAuth {
        NtlmAuth {
            program: program.to_path_buf(),
            config: config.map(Path::to_path_buf),
            idle: Mutex::new(Vec::new()),
        }
    }

    fn spawn(&self) -> io::Result<Helper> {
        // The I/O thread that asks may be acting as the last user it served; the helper runs as
        // the server (winbind's privileged pipe is root's), and the thread switches back to a
        // user when it next acts for one.
        ringshare_engine::creds::act_as_server()?;
        let mut cmd = Command::new(&self.program);
        cmd.arg("--helper-protocol=ntlm-server-1");
        if let Some(c) = &self.config {
            cmd.arg(format!("--configfile={}", c.display()));
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(io::Error::other("ntlm_auth without pipes"));
        };
        Ok(Helper {
            child,
            stdin,
            stdout,
            buf: Vec::new(),
        })
    }
}

impl DomainLogons for NtlmAuth {
    fn ntlm(&self, r: &DomainNtlm<'_>) -> Result<[u8; 16], String> {
        match self.ask_once(r) {
            // ntlm_auth could not reach winbindd (busy, restarting): not the domain's answer,
            // so asked once more.
            Err(why) if why.to_ascii_lowercase().contains("winbind") => {
                tracing::debug!("asking winbind again after: {why}");
                self.ask_once(r)
            }
            other => other,
        }
    }
}

impl NtlmAuth {
    fn ask_once(&self, r: &DomainNtlm<'_>) -> Result<[u8; 16], String> {
        let idle = crate::lock(&self.idle).pop();
        let mut helper = match idle {
            Some(h) => h,
            None => self
                .spawn()
                .map_err(|e| format!("cannot run {}: {e}", self.program.display()))?,
        };
        match helper.ask(r) {
            Ok(answer) => {
                let mut idle = crate::lock(&self.idle);
                if idle.len() < HELPERS_MAX {
                    idle.push(helper);
                }
                answer
            }
            // A helper that broke or hung is dropped (killed).
            Err(e) => Err(format!("ntlm_auth: {e}")),
        }
    }
}

impl Helper {
    /// One request: Ok(the domain's answer), Err when the helper failed.
    fn ask(&mut self, r: &DomainNtlm<'_>) -> io::Result<Result<[u8; 16], String>> {
        self.stdin.write_all(request(r).as_bytes())?;
        self.stdin.flush()?;
        let deadline = Instant::now() + ANSWER_TIMEOUT;
        let mut lines = Vec::new();
        loop {
            let line = self.read_line(deadline)?;
            if line == "." {
                // ntlm_auth ends a refusal with two: the second ends nothing.
                if lines.is_empty() {
                    continue;
                }
                break;
            }
            if lines.len() > 64 {
                return Err(io::Error::other("answer too long"));
            }
            lines.push(line);
        }
        Ok(answer(&lines))
    }

    fn read_line(&mut self, deadline: Instant) -> io::Result<String> {
        loop {
            if let Some(n) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=n).collect();
                return Ok(String::from_utf8_lossy(&line[..n]).trim_end().to_string());
            }
            if self.buf.len() > LINE_MAX {
                return Err(io::Error::other("answer line too long"));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "no answer in time"));
            }
            let mut fds = [rustix::event::PollFd::new(
                &self.stdout,
                rustix::event::PollFlags::IN,
            )];
            let ts = rustix::event::Timespec::try_from(left).unwrap_or(rustix::event::Timespec {
                tv_sec: 10,
                tv_nsec: 0,
            });
            match rustix::event::poll(&mut fds, Some(&ts)) {
                Ok(0) => continue,
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
            let mut chunk = [0u8; 1024];
            let n = rustix::io::read(self.stdout.as_fd(), &mut chunk)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "helper exited",
                ));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// The request lines; names base64-encoded (`Name:: …`) so no client-chosen byte can end a
/// line early.
fn request(r: &DomainNtlm<'_>) -> String {
    let mut s = String::new();
    s.push_str(&format!("Username:: {}\n", b64(r.user.as_bytes())));
    s.push_str(&format!("NT-Domain:: {}\n", b64(r.domain.as_bytes())));
    s.push_str(&format!("LANMAN-Challenge: {}\n", hex::encode(r.challenge)));
    s.push_str(&format!("NT-Response: {}\n", hex::encode(r.nt_response)));
    if r.lm_response.len() == 24 {
        s.push_str(&format!(
            "LANMAN-Response: {}\n",
            hex::encode(r.lm_response)
        ));
    }
    s.push_str("Request-User-Session-Key: Yes\n.\n");
    s
}

/// What the answer lines say: the user session key, or why the domain refused.
fn answer(lines: &[String]) -> Result<[u8; 16], String> {
    let field = |name: &str| {
        lines.iter().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.trim_start_matches(':').trim().to_string())
        })
    };
    if field("Authenticated").as_deref() != Some("Yes") {
        return Err(field("Authentication-Error").unwrap_or_else(|| "not authenticated".into()));
    }
    let key = field("User-Session-Key").ok_or("no user session key in the answer")?;
    let bytes = hex::decode(&key).map_err(|_| format!("user session key {key:?}"))?;
    <[u8; 16]>::try_from(bytes.as_slice()).map_err(|_| format!("user session key {key:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in for ntlm_auth: refuses the first request as ntlm_auth does (with its doubled
    /// terminator), accepts the second.
    fn fake_helper(dir: &Path) -> PathBuf {
        let p = dir.join("fake-ntlm-auth");
        std::fs::write(
            &p,
            "#!/bin/sh\nn=0\nwhile read -r line; do\n  [ \"$line\" = . ] || continue\n  \
             n=$((n+1))\n  if [ $n = 1 ]; then printf 'Authenticated: No\\nAuthentication-Error: \
             NT_STATUS_WRONG_PASSWORD\\n.\\n.\\n'; else printf 'Authenticated: Yes\\n\
             User-Session-Key: 000102030405060708090A0B0C0D0E0F\\n.\\n'; fi\ndone\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    #[test]
    fn a_refusal_then_an_acceptance_come_back_in_order_from_one_helper() {
        let dir = std::env::temp_dir().join(format!("rs-winbind-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let auth = NtlmAuth::new(&fake_helper(&dir), None);
        let r = DomainNtlm {
            user: "alice",
            domain: "RSAD",
            workstation: "WS",
            challenge: &[1; 8],
            nt_response: &[2; 48],
            lm_response: &[],
        };
        assert_eq!(auth.ntlm(&r).unwrap_err(), "NT_STATUS_WRONG_PASSWORD");
        assert_eq!(auth.ntlm(&r).unwrap()[15], 15);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn answers_give_the_key_or_the_domains_reason() {
        let ok = [
            "Authenticated: Yes",
            "User-Session-Key: 000102030405060708090A0B0C0D0E0F",
        ]
        .map(String::from);
        assert_eq!(answer(&ok).unwrap()[15], 15);
        let no = [
            "Authenticated: No",
            "Authentication-Error: NT_STATUS_WRONG_PASSWORD",
        ]
        .map(String::from);
        assert_eq!(answer(&no).unwrap_err(), "NT_STATUS_WRONG_PASSWORD");
        let short = ["Authenticated: Yes", "User-Session-Key: 0001"].map(String::from);
        assert!(answer(&short).is_err());
    }
}
