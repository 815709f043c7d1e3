//! The id source of an sssd member (joined with `realm join` or `adcli join`, no winbindd):
//! sssd's NSS responder asked which Unix id a domain SID has (SSS_NSS_GETIDBYSID) and which SID
//! a uid or gid has (SSS_NSS_GETSIDBYUID, SSS_NSS_GETSIDBYGID), the calls libsss_nss_idmap's
//! `sss_nss_getidbysid`, `sss_nss_getsidbyuid` and `sss_nss_getsidbygid` make. So POSIX ACLs
//! are mapped through the same ids sssd's NSS module gives the domain's users and groups
//! (`ldap_id_mapping = True`'s slices, or the POSIX attributes in AD). ringshare stores no
//! mapping of its own ([`ringshare_core::sidcache`] keeps the answers for a while).
//!
//! The protocol, as sssd 2.8 speaks it on its NSS pipe (`/var/lib/sss/pipes/nss`; bytes
//! libsss_nss_idmap exchanged with sssd in the AD rig kept in tests/ad/sssd-*): every packet is a
//! 16-byte header (its whole length, the command, a status that is an errno, a reserved word;
//! host byte order) and a body. A connection starts with SSS_GET_VERSION (body: the protocol
//! version, 1; the answer carries the same). GETIDBYSID's body is the SID as text with a NUL;
//! GETSIDBYUID's and GETSIDBYGID's the id (4 bytes). An answer's body is the number of results
//! (0: sssd knows no such object; at most 1 here) and a reserved word, then per result the
//! object's type (1 uid, 2 gid, 3 both) and the id (4 bytes) or the SID as text with a NUL.
//!
//! Called from the lookup threads only. Each question has a deadline ([`ANSWER_TIMEOUT`]); a
//! short, malformed or late answer is an error for the request that asked, never a panic.

use std::io::{self, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ringshare_core::sidcache::{IdSource, Xid};
use ringshare_wire::security::Sid;

use crate::winbind_ids::read_exact_by;

/// sssd's NSS pipe (fixed at build time: `--with-pipe-path`, /var/lib/sss/pipes on Debian and
/// Red Hat).
pub const DEFAULT_PIPE: &str = "/var/lib/sss/pipes/nss";
/// How long one question may take (sssd may ask a domain controller).
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// The header of every packet.
pub const HEADER_LEN: usize = 16;
/// The longest answer accepted (one SID is under 200 bytes).
const ANSWER_MAX: usize = 64 * 1024;

/// `enum sss_cli_command` values (sss_cli.h).
pub const SSS_GET_VERSION: u32 = 0x0001;
pub const SSS_NSS_GETIDBYSID: u32 = 0x0114;
pub const SSS_NSS_GETSIDBYUID: u32 = 0x0118;
pub const SSS_NSS_GETSIDBYGID: u32 = 0x0119;
/// SSS_NSS_PROTOCOL_VERSION.
pub const PROTOCOL_VERSION: u32 = 1;
/// An errno sssd may put in the status for "no such object".
const ENOENT: u32 = 2;

/// `enum sss_id_type`.
const ID_TYPE_UID: u32 = 1;
const ID_TYPE_GID: u32 = 2;
const ID_TYPE_BOTH: u32 = 3;

/// sssd's NSS responder asked over its pipe.
pub struct SssdIds {
    pipe: PathBuf,
    timeout: Duration,
}

impl SssdIds {
    /// Ask the sssd listening on `pipe`.
    pub fn new(pipe: &Path) -> SssdIds {
        SssdIds {
            pipe: pipe.to_path_buf(),
            timeout: ANSWER_TIMEOUT,
        }
    }

    /// The same, with another deadline per question (tests).
    pub fn with_timeout(mut self, t: Duration) -> SssdIds {
        self.timeout = t;
        self
    }

    /// A connection that has passed the version check.
    fn connect(&self) -> Result<UnixStream, String> {
        let mut s = UnixStream::connect(&self.pipe)
            .map_err(|e| format!("cannot reach sssd at {}: {e}", self.pipe.display()))?;
        let body = round_trip(
            &mut s,
            SSS_GET_VERSION,
            &PROTOCOL_VERSION.to_le_bytes(),
            Instant::now() + self.timeout,
        )
        .map_err(|e| format!("sssd's version check: {e}"))?;
        match body.get(..4) {
            Some(v) if v == PROTOCOL_VERSION.to_le_bytes() => Ok(s),
            _ => Err(format!(
                "sssd answered the version check with {body:02x?}; ringshare speaks NSS \
                 protocol version {PROTOCOL_VERSION}"
            )),
        }
    }

    /// Ask `cmd` with `body` on `s`: the answer's body (an errno status is an error, except
    /// ENOENT: no results).
    fn ask(&self, s: &mut UnixStream, cmd: u32, body: &[u8]) -> Result<Vec<u8>, String> {
        round_trip(s, cmd, body, Instant::now() + self.timeout).map_err(|e| format!("sssd: {e}"))
    }
}

/// The member's id source when it is sssd ([`crate::config::member::MemberOptions::sssd`]).
pub fn id_source(m: &crate::config::member::MemberOptions) -> Option<std::sync::Arc<dyn IdSource>> {
    m.sssd()?;
    let pipe = Path::new(DEFAULT_PIPE);
    if !pipe.exists() {
        tracing::warn!(
            "sssd's NSS pipe {} is not there (yet): domain SIDs get POSIX ACL entries once sssd \
             runs",
            pipe.display()
        );
    } else {
        tracing::info!(
            "domain SIDs get their Unix ids from sssd ({})",
            pipe.display()
        );
    }
    Some(std::sync::Arc::new(SssdIds::new(pipe)))
}

impl IdSource for SssdIds {
    fn ids_of(&self, sids: &[Sid]) -> Result<Vec<Option<Xid>>, String> {
        let mut s = self.connect()?;
        sids.iter()
            .map(|sid| parse_id(&self.ask(&mut s, SSS_NSS_GETIDBYSID, &sid_body(sid))?))
            .collect()
    }

    fn sids_of(&self, ids: &[Xid]) -> Result<Vec<Option<Sid>>, String> {
        let mut s = self.connect()?;
        ids.iter()
            .map(|id| {
                let (cmd, body) = id_question(*id);
                parse_sid(&self.ask(&mut s, cmd, &body)?)
            })
            .collect()
    }
}

/// A packet: the header for `cmd` and `body`.
pub fn packet(cmd: u32, body: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(HEADER_LEN + body.len());
    p.extend_from_slice(&((HEADER_LEN + body.len()) as u32).to_le_bytes());
    p.extend_from_slice(&cmd.to_le_bytes());
    p.extend_from_slice(&[0; 8]);
    p.extend_from_slice(body);
    p
}

/// GETIDBYSID's body.
pub fn sid_body(sid: &Sid) -> Vec<u8> {
    let mut b = sid.to_string().into_bytes();
    b.push(0);
    b
}

/// The command and body that ask for the SID of `id`. An id that serves as both is asked as a
/// group (what a POSIX ACL's group entry is).
pub fn id_question(id: Xid) -> (u32, Vec<u8>) {
    match id {
        Xid::Uid(u) => (SSS_NSS_GETSIDBYUID, u.to_le_bytes().to_vec()),
        Xid::Gid(g) | Xid::Both(g) => (SSS_NSS_GETSIDBYGID, g.to_le_bytes().to_vec()),
    }
}

/// An answer's results after the count: the type of its one result and what follows it, or
/// None when sssd knows no such object.
fn one_result(body: &[u8]) -> Result<Option<(u32, &[u8])>, String> {
    let word = |at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(body.get(at..at + 4)?.try_into().ok()?))
    };
    match word(0) {
        Some(0) => Ok(None),
        Some(1) => {
            let kind = word(8).ok_or("an answer cut short in its result")?;
            Ok(Some((kind, &body[12..])))
        }
        Some(n) => Err(format!("{n} results for one question")),
        None => Err("an answer without its count of results".into()),
    }
}

/// GETIDBYSID's answer body.
pub fn parse_id(body: &[u8]) -> Result<Option<Xid>, String> {
    let Some((kind, rest)) = one_result(body)? else {
        return Ok(None);
    };
    let id = rest
        .get(..4)
        .ok_or("an answer cut short in its id")?
        .try_into()
        .map(u32::from_le_bytes)
        .map_err(|_| "an answer cut short in its id")?;
    match kind {
        ID_TYPE_UID => Ok(Some(Xid::Uid(id))),
        ID_TYPE_GID => Ok(Some(Xid::Gid(id))),
        ID_TYPE_BOTH => Ok(Some(Xid::Both(id))),
        k => Err(format!("an id of type {k}")),
    }
}

/// GETSIDBYUID's and GETSIDBYGID's answer body.
pub fn parse_sid(body: &[u8]) -> Result<Option<Sid>, String> {
    let Some((kind, rest)) = one_result(body)? else {
        return Ok(None);
    };
    if !matches!(kind, ID_TYPE_UID | ID_TYPE_GID | ID_TYPE_BOTH) {
        return Err(format!("a SID of type {kind}"));
    }
    let end = rest
        .iter()
        .position(|&b| b == 0)
        .ok_or("a SID without its NUL")?;
    let text = std::str::from_utf8(&rest[..end]).map_err(|_| "a SID that is not text")?;
    text.parse::<Sid>()
        .map(Some)
        .map_err(|_| format!("a SID {text:?}"))
}

/// Send `cmd` with `body`, read the answer's header and body before `deadline`: the body. The
/// answer must be to `cmd`; a status of ENOENT is an answer without results.
fn round_trip(s: &mut UnixStream, cmd: u32, body: &[u8], deadline: Instant) -> io::Result<Vec<u8>> {
    crate::winbind_ids::timed(s, deadline)?;
    s.write_all(&packet(cmd, body))?;
    let mut header = [0u8; HEADER_LEN];
    read_exact_by(s, &mut header, deadline)?;
    let (len, answered, status) = decode_header(&header);
    if answered != cmd {
        return Err(io::Error::other(format!(
            "an answer to command {answered:#x} for {cmd:#x}"
        )));
    }
    if !(HEADER_LEN..=ANSWER_MAX).contains(&len) {
        return Err(io::Error::other(format!("an answer of length {len}")));
    }
    let mut more = vec![0u8; len - HEADER_LEN];
    read_exact_by(s, &mut more, deadline)?;
    match status {
        0 => Ok(more),
        ENOENT => Ok(vec![0; 8]),
        e => Err(io::Error::other(format!("sssd answered with errno {e}"))),
    }
}

/// A header's length, command and status.
fn decode_header(h: &[u8; HEADER_LEN]) -> (usize, u32, u32) {
    let w = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    (w(0) as usize, w(4), w(8))
}

#[cfg(test)]
#[path = "sssd_ids_tests.rs"]
mod tests;
