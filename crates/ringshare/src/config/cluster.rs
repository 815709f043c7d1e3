//! `cluster …` options in [global] (ringshare extension, issue 18): this
//! node's place in a cluster of ringshare nodes serving one cluster file
//! system, coordinated by etcd (docs/cluster.md).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The cluster this node is part of; `name` unset: none (a single server).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterOptions {
    /// `cluster name`: the etcd key prefix `/ringshare/<name>/`; the same on every node.
    pub name: Option<String>,
    /// `cluster node`: this node's number, 1..65535, unique in the cluster.
    pub node: u16,
    /// `cluster address`: where other nodes reach this one (the private network).
    pub address: Option<SocketAddr>,
    /// `cluster etcd`: etcd client URLs (`http://host:port`, comma separated).
    pub etcd: Vec<String>,
    /// `cluster secret file`: a file holding the secret every node shares
    /// (at least 32 bytes); messages between nodes are authenticated with it.
    pub secret_file: Option<PathBuf>,
    /// `cluster filesystem`: the mount of the cluster file system; every
    /// share's path must be on it.
    pub filesystem: Option<PathBuf>,
    /// `cluster takeover command` (optional): a program the survivors run
    /// with a dead node's number as its argument before they decide for its
    /// files again: on CephFS it evicts that node's session (docs/cluster.md).
    pub takeover_command: Option<PathBuf>,
    /// `cluster witness = no` turns the Witness service ([MS-SWN],
    /// crate::witness) off; it runs on every cluster node otherwise.
    pub witness_off: bool,
    /// `cluster witness anonymous = yes` lets Witness calls in without DCE/RPC authentication
    /// (tests, clients that cannot authenticate); by default a call needs NTLMSSP at packet
    /// integrity or privacy, as Samba's rpcd_witness asks ([MS-SWN] section 7).
    pub witness_anonymous: bool,
    /// `cluster witness port`: the TCP port of the Witness service (default
    /// [`WITNESS_PORT`]).
    pub witness_port: Option<u16>,
    /// `cluster endpoint mapper port`: where the endpoint mapper answers
    /// which port Witness is on (default 135; 0: none).
    pub endpoint_mapper_port: Option<u16>,
    /// `cluster ring calls = no` (hidden, for measuring): calls to files' homes on other
    /// nodes are carried by the lookup pool's threads, not on the I/O threads' rings.
    pub ring_calls_off: bool,
    /// `cluster lease ttl`: the time-to-live of this node's etcd lease, whole seconds (what
    /// applies: [`ClusterOptions::lease_ttl_or_default`]). The node renews it every third of it
    /// and fences itself one second before it runs out; the others take its files over only
    /// when it has.
    pub lease_ttl: Option<std::time::Duration>,
}

/// The range `cluster lease ttl` takes: at least 3 s (the fence comes 1 s before the end, and
/// the margin must be less than half of it), at most a minute (the others wait that long
/// before they take a dead node's files over).
const LEASE_TTL_RANGE: std::ops::RangeInclusive<u64> = 3..=60;

/// The Witness service's TCP port unless `cluster witness port` says another.
pub const WITNESS_PORT: u16 = 5040;

impl ClusterOptions {
    /// Whether this node is part of a cluster.
    pub fn enabled(&self) -> bool {
        self.name.is_some()
    }

    /// This node's etcd lease TTL: `cluster lease ttl`, else the cluster crate's default.
    pub fn lease_ttl_or_default(&self) -> std::time::Duration {
        self.lease_ttl.unwrap_or(ringshare_cluster::DEFAULT_TTL)
    }
}

/// Apply `cluster <name> = value` (the key normalized) to `c`; relative
/// paths are taken from `base`. `Err` names what is wrong with the value.
pub(super) fn apply(
    c: &mut ClusterOptions,
    key: &str,
    value: &str,
    base: &Path,
) -> Result<(), String> {
    let name = key.strip_prefix("cluster ").unwrap_or(key);
    match name {
        "name" => {
            let ok = !value.is_empty()
                && value.len() <= 64
                && value
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
            if !ok {
                return Err(format!(
                    "'{key}' expects 1 to 64 letters, digits, '.', '_' or '-', got '{value}'"
                ));
            }
            c.name = Some(value.to_string());
        }
        "node" => {
            c.node = value
                .parse::<u16>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| {
                    format!("'{key}' expects a number from 1 to 65535, got '{value}'")
                })?;
        }
        "address" => {
            let a = value.parse::<SocketAddr>().map_err(|_| {
                format!("'{key}' expects ADDRESS:PORT, like 10.0.0.1:4460, got '{value}'")
            })?;
            if a.ip().is_unspecified() || a.port() == 0 {
                return Err(format!(
                    "'{key}' must name the address and port other nodes reach this one on, \
                     not '{value}'"
                ));
            }
            c.address = Some(a);
        }
        "etcd" => {
            let urls: Vec<String> = value
                .split([',', ' '])
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            if urls.is_empty() || urls.iter().any(|u| !u.starts_with("http://")) {
                return Err(format!(
                    "'{key}' expects etcd client URLs like http://10.0.0.1:2379 \
                     (TLS endpoints are not supported yet), got '{value}'"
                ));
            }
            c.etcd = urls;
        }
        "secret file" => c.secret_file = Some(base.join(value)),
        "filesystem" => c.filesystem = Some(base.join(value)),
        "takeover command" => c.takeover_command = Some(base.join(value)),
        "ring calls" => c.ring_calls_off = !yes_no(key, value)?,
        "lease ttl" => {
            let secs = value
                .trim_end_matches('s')
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|s| LEASE_TTL_RANGE.contains(s))
                .ok_or_else(|| {
                    format!(
                        "'{key}' expects whole seconds from {} to {}, got '{value}'",
                        LEASE_TTL_RANGE.start(),
                        LEASE_TTL_RANGE.end()
                    )
                })?;
            c.lease_ttl = Some(std::time::Duration::from_secs(secs));
        }
        "witness" | "witness anonymous" => {
            let yes = yes_no(key, value)?;
            if name == "witness" {
                c.witness_off = !yes;
            } else {
                c.witness_anonymous = yes;
            }
        }
        "witness port" | "endpoint mapper port" => {
            let port = value
                .parse::<u16>()
                .map_err(|_| format!("'{key}' expects a port number, got '{value}'"))?;
            if name == "witness port" {
                if port == 0 {
                    return Err(format!("'{key}' expects a port from 1 to 65535"));
                }
                c.witness_port = Some(port);
            } else {
                c.endpoint_mapper_port = Some(port);
            }
        }
        _ => return Err(format!("unknown option '{key}'")),
    }
    Ok(())
}

/// What a cluster section needs that it lacks (`None`: complete, or no
/// cluster at all).
pub(super) fn missing(c: &ClusterOptions) -> Option<String> {
    let set = c.name.is_some()
        || c.node != 0
        || c.address.is_some()
        || !c.etcd.is_empty()
        || c.secret_file.is_some()
        || c.filesystem.is_some();
    if !set {
        return None;
    }
    let mut lacks = Vec::new();
    if c.name.is_none() {
        lacks.push("cluster name");
    }
    if c.node == 0 {
        lacks.push("cluster node");
    }
    if c.address.is_none() {
        lacks.push("cluster address");
    }
    if c.etcd.is_empty() {
        lacks.push("cluster etcd");
    }
    if c.secret_file.is_none() {
        lacks.push("cluster secret file");
    }
    if c.filesystem.is_none() {
        lacks.push("cluster filesystem");
    }
    (!lacks.is_empty()).then(|| format!("a cluster node needs {} too", lacks.join(", ")))
}

/// A cluster option's yes or no, read as every other boolean of the file is (yes, true, 1, on /
/// no, false, 0, off, as Samba's), or why not.
fn yes_no(key: &str, value: &str) -> Result<bool, String> {
    super::parse::parse_bool(value)
        .ok_or_else(|| format!("'{key}' expects yes or no, got '{value}'"))
}
