//! `ringshare status`: the running server's connections, sessions, tree
//! connects, open files and locks ([`ringshare_core::status::Status`]),
//! as text to read at a glance (like Samba's `smbstatus`) or as JSON.

use std::fmt::Write as _;

use ringshare_core::status::{access_letters, OpenStatus, Status};
use ringshare_wire::consts::Dialect;
use ringshare_wire::fscc::FileTime;
use serde_json::{json, Value};

/// A cluster node's protocol levels (docs/cluster.md "Upgrading a cluster"): its own, each
/// live member's as etcd advertises it, and the cluster's (the lowest, as `ringshare cluster
/// nodes` computes it), as this node sees them now.
pub struct Levels {
    pub node: u16,
    pub own: u16,
    pub cluster: u16,
    /// (node, level) of each live member, this node included, by node number.
    pub members: Vec<(u16, u16)>,
}

impl Levels {
    /// What `link` (a cluster node's view of its members) says.
    pub fn of(link: &dyn ringshare_core::cluster::ClusterLink) -> Levels {
        let mut members: Vec<(u16, u16)> = link
            .members()
            .into_iter()
            .map(|n| (n, link.level_of(n)))
            .collect();
        members.sort_unstable();
        Levels {
            node: link.node(),
            own: link.level_of(link.node()),
            cluster: ringshare_core::cluster::cluster_level(link),
            members,
        }
    }

    /// The line `ringshare status` starts with on a cluster node.
    pub fn text(&self) -> String {
        let each: Vec<String> = self
            .members
            .iter()
            .map(|(n, l)| format!("node {n} level {l}"))
            .collect();
        format!(
            "cluster node {}: level {}; cluster level {} (the lowest of {})\n",
            self.node,
            self.own,
            self.cluster,
            each.join(", ")
        )
    }

    pub fn json(&self) -> Value {
        json!({
            "node": self.node,
            "level": self.own,
            "cluster_level": self.cluster,
            "members": self.members.iter().map(|(n, l)| json!({"node": n, "level": l})).collect::<Vec<_>>(),
        })
    }
}

/// A dialect as people write it (`3.1.1`); `-` before NEGOTIATE.
fn dialect(d: u16) -> String {
    match Dialect(d).version() {
        Some(v) => v.to_string(),
        None if d == 0 => "-".to_string(),
        None => format!("{d:#06x}"),
    }
}

/// A FILETIME as UTC `YYYY-MM-DD HH:MM:SS`.
fn time(filetime: u64) -> String {
    let nanos = FileTime(filetime).to_unix_nanos();
    if nanos < 0 {
        return "-".to_string();
    }
    let (y, m, d, hh, mm, ss) =
        ringshare_wire::fscc::civil_from_unix((nanos / 1_000_000_000) as i64);
    format!("{y:04}-{m:02}-{d:02} {hh:02}:{mm:02}:{ss:02}")
}

/// What other opens may do, as `RWD` letters (FILE_SHARE_READ, _WRITE, _DELETE).
fn share_letters(share: u32) -> String {
    let mut s = String::new();
    for (bit, c) in [(1, 'R'), (2, 'W'), (4, 'D')] {
        s.push(if share & bit != 0 { c } else { '-' });
    }
    s
}

fn caching(o: &OpenStatus) -> String {
    match &o.lease {
        Some(l) => {
            let mut s = format!("lease {} {}", l.state, l.key);
            if let Some(to) = &l.breaking_to {
                let _ = write!(s, " (breaking to {to})");
            }
            s
        }
        None => match o.oplock_breaking_to {
            Some(to) => format!("{} (breaking to {to})", o.oplock),
            None => o.oplock.to_string(),
        },
    }
}

/// Columns padded to their widest cell.
fn table(out: &mut String, head: &[&str], rows: &[Vec<String>]) {
    if rows.is_empty() {
        out.push_str("  (none)\n");
        return;
    }
    let mut w: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |out: &mut String, cells: Vec<&str>| {
        let mut l = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                l.push_str(c);
            } else {
                let _ = write!(l, "{c:<width$}  ", width = w[i]);
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(out, head.to_vec());
    for r in rows {
        line(out, r.iter().map(String::as_str).collect());
    }
}

/// `status` as text.
pub fn text(st: &Status) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} connection(s), {} session(s), {} open file(s), {} byte-range lock(s), {} disconnected durable open(s)",
        st.connections.len(),
        st.sessions.len(),
        st.opens.len(),
        st.locks.len(),
        st.disconnected_durable_opens
    );
    out.push_str("\nConnections\n");
    let rows: Vec<Vec<String>> = st
        .connections
        .iter()
        .map(|c| {
            vec![
                c.id.to_string(),
                c.peer.clone(),
                c.transport.name().to_string(),
                dialect(c.dialect),
                if c.signing.is_empty() { "-" } else { c.signing }.to_string(),
                c.cipher.unwrap_or("-").to_string(),
                time(c.since),
            ]
        })
        .collect();
    table(
        &mut out,
        &[
            "ID",
            "Client",
            "Transport",
            "Dialect",
            "Signing",
            "Cipher",
            "Since (UTC)",
        ],
        &rows,
    );
    out.push_str("\nSessions\n");
    let rows: Vec<Vec<String>> = st
        .sessions
        .iter()
        .map(|s| {
            let user = if s.in_progress {
                "(logging on)".to_string()
            } else if s.anonymous {
                "(anonymous)".to_string()
            } else if s.guest {
                format!("{} (guest)", s.user)
            } else {
                s.user.clone()
            };
            vec![
                format!("{:#x}", s.id),
                user,
                s.uid.map_or("-".to_string(), |u| u.to_string()),
                dialect(s.dialect),
                s.channels
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
                if s.signing_required { "yes" } else { "no" }.to_string(),
                match (s.encryption_required, s.encryption) {
                    (true, _) => "required",
                    (false, true) => "possible",
                    (false, false) => "no",
                }
                .to_string(),
            ]
        })
        .collect();
    table(
        &mut out,
        &[
            "Session",
            "User",
            "UID",
            "Dialect",
            "Connections",
            "Signed",
            "Encrypted",
        ],
        &rows,
    );
    out.push_str("\nTree connects\n");
    let rows: Vec<Vec<String>> = st
        .trees
        .iter()
        .map(|t| {
            vec![
                format!("{:#x}", t.session_id),
                t.tree_id.to_string(),
                t.share.clone(),
                match (t.refused, t.read_only) {
                    (true, _) => "refused",
                    (false, true) => "read-only",
                    (false, false) => "read-write",
                }
                .to_string(),
            ]
        })
        .collect();
    table(&mut out, &["Session", "Tree", "Share", "Mode"], &rows);
    out.push_str("\nOpen files\n");
    let rows: Vec<Vec<String>> = st
        .opens
        .iter()
        .map(|o| {
            vec![
                format!("{:#x}", o.session_id),
                o.uid.to_string(),
                o.share.clone(),
                format!("{:#010x} {}", o.access, access_letters(o.access)),
                share_letters(o.share_access),
                caching(o),
                o.durable.unwrap_or("no").to_string(),
                if o.is_dir {
                    format!("{}/", o.path)
                } else {
                    o.path.clone()
                },
            ]
        })
        .collect();
    table(
        &mut out,
        &[
            "Session", "UID", "Share", "Access", "Sharing", "Caching", "Durable", "Path",
        ],
        &rows,
    );
    out.push_str("\nByte-range locks\n");
    let rows: Vec<Vec<String>> = st
        .locks
        .iter()
        .map(|l| {
            vec![
                l.share.clone(),
                l.open_id.to_string(),
                if l.exclusive { "exclusive" } else { "shared" }.to_string(),
                l.offset.to_string(),
                l.length.to_string(),
                l.path.clone(),
            ]
        })
        .collect();
    table(
        &mut out,
        &["Share", "Open", "Kind", "Offset", "Length", "Path"],
        &rows,
    );
    out
}

/// `status --json`: the same, for scripts.
pub fn json(st: &Status) -> Value {
    json!({
        "connections": st.connections.iter().map(|c| json!({
            "id": c.id,
            "client": c.peer,
            "transport": c.transport.name(),
            "dialect": dialect(c.dialect),
            "signing": (!c.signing.is_empty()).then_some(c.signing),
            "cipher": c.cipher,
            "since": time(c.since),
        })).collect::<Vec<_>>(),
        "sessions": st.sessions.iter().map(|s| json!({
            "id": s.id,
            "user": s.user,
            "uid": s.uid,
            "guest": s.guest,
            "anonymous": s.anonymous,
            "logging_on": s.in_progress,
            "dialect": dialect(s.dialect),
            "connections": s.channels,
            "signing_required": s.signing_required,
            "encryption": s.encryption,
            "encryption_required": s.encryption_required,
        })).collect::<Vec<_>>(),
        "tree_connects": st.trees.iter().map(|t| json!({
            "session": t.session_id,
            "tree": t.tree_id,
            "share": t.share,
            "read_only": t.read_only,
            "refused": t.refused,
        })).collect::<Vec<_>>(),
        "opens": st.opens.iter().map(|o| json!({
            "session": o.session_id,
            "tree": o.tree_id,
            "file_id": [o.file_id.0, o.file_id.1],
            "share": o.share,
            "path": o.path,
            "directory": o.is_dir,
            "uid": o.uid,
            "access": o.access,
            "share_access": o.share_access,
            "oplock": o.oplock,
            "oplock_breaking_to": o.oplock_breaking_to,
            "lease": o.lease.as_ref().map(|l| json!({
                "key": l.key,
                "state": l.state,
                "breaking_to": l.breaking_to,
                "epoch": l.epoch,
                "v2": l.v2,
            })),
            "durable": o.durable,
            "delete_on_close": o.delete_on_close,
        })).collect::<Vec<_>>(),
        "locks": st.locks.iter().map(|l| json!({
            "share": l.share,
            "path": l.path,
            "open": l.open_id,
            "offset": l.offset,
            "length": l.length,
            "exclusive": l.exclusive,
        })).collect::<Vec<_>>(),
        "disconnected_durable_opens": st.disconnected_durable_opens,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filetime_reads_as_its_utc_date() {
        // 2026-11-26 05:17:28 UTC = unix 1795670248.
        let ft = 1_795_670_248u64 * 10_000_000 + 116_444_736_000_000_000;
        assert_eq!(time(ft), "2026-11-26 05:17:28");
        assert_eq!(time(116_444_736_000_000_000), "1970-01-01 00:00:00");
        assert_eq!(time(0), "-");
    }

    #[test]
    fn access_and_sharing_read_as_letters() {
        assert_eq!(access_letters(0x0012_0089), "R--");
        assert_eq!(access_letters(0x0012_019f), "RW-");
        assert_eq!(access_letters(0x001f_01ff), "RWD");
        assert_eq!(share_letters(7), "RWD");
        assert_eq!(share_letters(1), "R--");
    }
}
