//! Three `ringshare serve` nodes of one cluster (issue 18) on loopback:
//! three etcd members (Debian's etcd-server) for membership and partition
//! ownership, one shared directory standing in for the cluster file
//! system, raw SMB2 clients on different nodes. Every per-file decision
//! about a file homed on another node crosses the nodes' authenticated
//! private connections. Without `etcd`: a SKIPPED line, or a failure when
//! `CI` is set.

mod cluster_dirlease;
mod cluster_kill;
mod cluster_stall;
mod cluster_stop;
mod cluster_upgrade;
mod cluster_witness;
mod common;
#[path = "../../cluster/tests/support/etcd_cluster.rs"]
mod etcd_cluster;
mod rig;

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{chown_tree, free_port, TempDir};
use etcd_cluster::{etcd_available, owners, wait_placed, EtcdCluster};
use rig::*;
use ringshare_core::cluster::{partition_of, CLUSTER_DEV};
use ringshare_core::server::FileKey;
use ringshare_wire::codec::HEADER_LEN;
use ringshare_wire::consts::{
    AccessMask, Command, CreateDisposition, CreateOptions, FileAttributes, ImpersonationLevel,
    LeaseFlags, LeaseState, OplockLevel, ShareAccess,
};
use ringshare_wire::consts::{Fsctl, IoctlFlags};
use ringshare_wire::create::{tag, ContextTag, CreateContext, CreateRequest, CreateResponse};
use ringshare_wire::create::{Lease, LeaseV2};
use ringshare_wire::header::Header;
use ringshare_wire::ioctl::{IoctlRequest, IoctlResponse, NetworkInterfaceInfo};
use ringshare_wire::misc::OplockBreak;
use ringshare_wire::{FileId, NtStatus};

const NODES: u16 = 3;
const R: u32 = 1;
const H: u32 = 2;
const W: u32 = 4;
const READ: u32 = 0x0012_0089;
const WRITE: u32 = 0x0012_0116;
/// Read, write and delete (not WRITE_DAC or WRITE_OWNER, which a user who is not root lacks).
const ALL: u32 = 0x0013_019F;

/// Each partition's owner (its node's number) and its lease, as etcd has them.
type Owners = std::collections::BTreeMap<u32, (String, i64)>;

/// etcd, three nodes over one share directory, and which node is the home
/// of a file.
struct Cluster {
    name: String,
    etcd: EtcdCluster,
    nodes: Vec<Rig>,
    /// Each node's cluster (private) port.
    cluster_ports: Vec<u16>,
    share: PathBuf,
    /// Where the test's takeover command writes the nodes it ran for.
    takeovers: PathBuf,
    /// Each node's network namespace (scripts/cluster-ceph.sh), if any.
    netns: Option<Vec<String>>,
    /// Each node's Witness port and endpoint mapper port.
    witness_ports: Vec<(u16, u16)>,
    _tmp: TempDir,
    /// Its turn beside the other tests' clusters (`cluster_stall::Turn`), let go last.
    _turn: cluster_stall::Turn,
}

impl Cluster {
    fn start(name: &str) -> Cluster {
        Cluster::start_with(name, "")
    }

    /// [`Cluster::start`] with more `[global]` lines (share defaults too).
    fn start_with(name: &str, more: &str) -> Cluster {
        Cluster::start_on(name, more, None, None, 1)
    }

    /// [`Cluster::start_with`] with node n on `hosts[n - 1]` (all on 127.0.0.1 when `None`),
    /// every node running the binary `old` (another release's, which knows no Witness options)
    /// when given, each node with `threads` I/O threads.
    fn start_on(
        name: &str,
        more: &str,
        hosts: Option<Vec<String>>,
        old: Option<&std::path::Path>,
        threads: u32,
    ) -> Cluster {
        let turn = cluster_stall::Turn::take();
        // The server acts as the user: the user needs a Unix account.
        common::ensure_unix_account(USER_A.0);
        let etcd = EtcdCluster::start(name);
        let tmp = TempDir::new(&format!("cluster-{name}"));
        // One directory stands in for the cluster file system, or (by
        // scripts/cluster-ceph.sh) each node has its own mount of a CephFS.
        let mounts: Vec<PathBuf> = match std::env::var("RINGSHARE_CLUSTER_MOUNTS") {
            Ok(m) => m.split(':').map(PathBuf::from).collect(),
            Err(_) => vec![tmp.path().to_path_buf(); usize::from(NODES)],
        };
        assert_eq!(mounts.len(), usize::from(NODES), "RINGSHARE_CLUSTER_MOUNTS");
        let sub = format!("share-{name}-{}", std::process::id());
        let share = mounts[0].join(&sub);
        let _ = std::fs::remove_dir_all(&share);
        std::fs::create_dir_all(&share).unwrap();
        // Survivors run this with a dead node's number before they take
        // its files over (on CephFS: the eviction of its session).
        let takeovers = tmp.path().join("takeovers");
        let takeover = match std::env::var("RINGSHARE_CLUSTER_TAKEOVER") {
            Ok(cmd) => PathBuf::from(cmd),
            Err(_) => {
                // In a directory only root may enter, as an administrator's (the eviction's
                // keyring is root's): a node that runs it as anyone else fails to.
                let dir = tmp.path().join("root-only");
                std::fs::create_dir(&dir).unwrap();
                std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
                    .unwrap();
                let script = dir.join("takeover");
                std::fs::write(
                    &script,
                    format!("#!/bin/sh\necho \"$1\" >> {}\n", takeovers.display()),
                )
                .unwrap();
                std::fs::set_permissions(
                    &script,
                    std::os::unix::fs::PermissionsExt::from_mode(0o755),
                )
                .unwrap();
                script
            }
        };
        let secret = tmp.path().join("secret");
        std::fs::write(
            &secret,
            "c2VjcmV0LW9mLXRoZS10ZXN0LWNsdXN0ZXItbm90LXNob3J0Cg==\n",
        )
        .unwrap();
        // Each node in its own network namespace with its own address
        // (scripts/cluster-ceph.sh), or all on loopback.
        let list = |var: &str| -> Option<Vec<String>> {
            let v: Vec<String> = std::env::var(var)
                .ok()?
                .split(',')
                .map(str::to_string)
                .collect();
            assert_eq!(v.len(), usize::from(NODES), "{var}");
            Some(v)
        };
        let hosts = list("RINGSHARE_CLUSTER_ADDRESSES")
            .or(hosts)
            .unwrap_or_else(|| vec!["127.0.0.1".into(); usize::from(NODES)]);
        let netns = list("RINGSHARE_CLUSTER_NETNS");
        let mut nodes = Vec::new();
        let mut cluster_ports = Vec::new();
        let mut witness_ports = Vec::new();
        for n in 1..=NODES {
            let i = usize::from(n) - 1;
            let port = free_port();
            cluster_ports.push(port);
            let (wport, eport) = (free_port(), free_port());
            witness_ports.push((wport, eport));
            let mount = &mounts[i];
            let host = &hosts[i];
            let extra = format!(
                "\tcluster name = {name}\n\tcluster node = {n}\n\
                 \tcluster address = {host}:{port}\n\tcluster etcd = {etcd}\n\
                 \tcluster secret file = {secret}\n\tcluster filesystem = {fs}\n\
                 \tcluster takeover command = {takeover}\n{witness}\
                 \tcontrol socket = no\n\tlog level = 2\n\tkernel change notify = no\n{more}",
                witness = if old.is_some() {
                    String::new()
                } else {
                    witness_lines(wport, eport)
                },
                etcd = etcd.urls.join(", "),
                secret = secret.display(),
                fs = mount.display(),
                takeover = takeover.display(),
            );
            // RINGSHARE_CLUSTER_EXTRA: more `[global]` lines for this build's nodes (an A/B
            // of a setting, e.g. `cluster ring calls = no`), "\n" between lines.
            let extra = match (std::env::var("RINGSHARE_CLUSTER_EXTRA"), old) {
                (Ok(more), None) => format!("{extra}\n\t{}\n", more.replace("\\n", "\n\t")),
                _ => extra,
            };
            let dir = TempDir::new(&format!("cluster-{name}-n{n}"));
            nodes.push(Rig::start_at(
                dir,
                mount.join(&sub),
                &extra,
                &["--threads", &threads.to_string()],
                (host, netns.as_ref().map(|ns: &Vec<String>| ns[i].as_str())),
                old,
            ));
        }
        let c = Cluster {
            name: name.to_string(),
            etcd,
            nodes,
            cluster_ports,
            share,
            takeovers,
            netns,
            witness_ports,
            _tmp: tmp,
            _turn: turn,
        };
        let t = Instant::now();
        let mut e = c.etcd.client();
        wait_placed(&mut e, name, &["1", "2", "3"], Duration::from_secs(30));
        // Each node reads the table every 100 ms (and etcd every 500 ms).
        std::thread::sleep(Duration::from_millis(1_200));
        eprintln!(
            "[{name}] 3 nodes placed all partitions in {:?}",
            t.elapsed()
        );
        c
    }

    /// A client logged on to node `n` (1-based).
    fn client(&self, n: u16) -> Raw {
        self.nodes[usize::from(n) - 1].login(USER_A)
    }

    /// The node that is the home of `name` now.
    fn home_of(&self, name: &str) -> u16 {
        self.home_by(&self.owners(), name)
    }

    /// Each partition's owner now (one read of etcd).
    fn owners(&self) -> Owners {
        owners(&mut self.etcd.client(), &self.name)
    }

    /// The node that is the home of `name` by the partitions' `owners`.
    fn home_by(&self, owners: &Owners, name: &str) -> u16 {
        let ino = std::fs::metadata(self.share.join(name)).unwrap().ino();
        let key = FileKey {
            dev: CLUSTER_DEV,
            ino,
            stream: 0,
        };
        owners[&partition_of(key, 256)].0.parse().unwrap()
    }

    /// A file (made now) in a directory of user B's that others may not
    /// write (0755), readable by all, whose home is node `n`.
    fn file_of_b_homed_on(&self, n: u16) -> String {
        let b = nix::unistd::User::from_name(USER_B.0).unwrap().unwrap();
        let dir = self.share.join("bobs");
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::chown(&dir, Some(b.uid.as_raw()), Some(b.gid.as_raw())).unwrap();
        for i in 0..400 {
            let name = format!("bobs/kept-{i}.txt");
            std::fs::write(self.share.join(&name), b"kept").unwrap();
            let p = self.share.join(&name);
            std::os::unix::fs::chown(&p, Some(b.uid.as_raw()), Some(b.gid.as_raw())).unwrap();
            if self.home_of(&name) == n {
                return name;
            }
        }
        panic!("no file homed on node {n}");
    }

    /// A file (made now) whose home is each node: `[on 1, on 2, on 3]`.
    fn files_homed_on_each(&self, tag: &str) -> Vec<String> {
        let mut found: Vec<Option<String>> = vec![None; usize::from(NODES)];
        for i in 0..200 {
            let name = format!("{tag}-{i}.txt");
            std::fs::write(self.share.join(&name), b"").unwrap();
            let h = usize::from(self.home_of(&name)) - 1;
            if found[h].is_none() {
                found[h] = Some(name);
            }
            if found.iter().all(Option::is_some) {
                break;
            }
        }
        if let Ok(Some(a)) = nix::unistd::User::from_name(USER_A.0) {
            chown_tree(&self.share, a.uid.as_raw());
        }
        found
            .into_iter()
            .map(|f| f.expect("a file homed on every node"))
            .collect()
    }
}

/// The `[global]` lines of a node's Witness ports (options the builds before Witness refuse).
fn witness_lines(port: u16, mapper: u16) -> String {
    format!("\tcluster witness port = {port}\n\tcluster endpoint mapper port = {mapper}\n")
}

fn lease(key: u8, state: u32) -> Lease {
    Lease {
        key: [key; 16],
        state: LeaseState(state),
        flags: LeaseFlags::empty(),
        duration: 0,
        v2: Some(LeaseV2 {
            parent_key: [0; 16],
            epoch: 0,
        }),
    }
}

impl Drop for Cluster {
    /// Keeps the nodes' logs in `RINGSHARE_CLUSTER_LOGS` when set
    /// (scripts/cluster-ceph.sh with KEEP=1), as `<test>-node<N>.log`, and the etcd members'
    /// as `<test>-etcd<I>.log`.
    fn drop(&mut self) {
        let Some(dir) = std::env::var_os("RINGSHARE_CLUSTER_LOGS") else {
            return;
        };
        let dir = PathBuf::from(dir);
        let _ = std::fs::create_dir_all(&dir);
        for (i, node) in self.nodes.iter().enumerate() {
            let to = dir.join(format!("{}-node{}.log", self.name, i + 1));
            let _ = std::fs::copy(node.log_path(), to);
        }
        for i in 0..self.etcd.urls.len() {
            let to = dir.join(format!("{}-etcd{i}.log", self.name));
            let _ = std::fs::copy(self.etcd.log_path(i), to);
        }
    }
}

/// A CREATE body (OPEN_IF) with a lease request when `lease` is set.
fn create(name: &str, access: u32, share: u32, lease: Option<Lease>) -> Vec<u8> {
    let contexts = lease
        .map(|l| vec![CreateContext::new(tag::REQUEST_LEASE, l.encode())])
        .unwrap_or_default();
    let req = CreateRequest {
        security_flags: 0,
        requested_oplock_level: OplockLevel(if contexts.is_empty() { 0 } else { 0xFF }),
        impersonation_level: ImpersonationLevel::IMPERSONATION,
        smb_create_flags: 0,
        desired_access: AccessMask(access),
        file_attributes: FileAttributes(0),
        share_access: ShareAccess(share),
        create_disposition: CreateDisposition::OPEN_IF,
        create_options: CreateOptions(0),
        name: name.to_string(),
        contexts,
    };
    let mut m = vec![0u8; HEADER_LEN];
    req.encode(&mut m);
    m.split_off(HEADER_LEN)
}

/// A CREATE body (OPEN_IF, sharing everything) with a batch oplock and a
/// DH2Q (`reconnect`: a DH2C of that FileId instead), CreateGuid `guid`.
fn durable_create(name: &str, guid: u8, reconnect: Option<FileId>) -> Vec<u8> {
    durable_create_as(name, guid, reconnect, false)
}

/// [`durable_create`]; `persistent`: asking for a persistent handle (and
/// no oplock) instead.
fn durable_create_as(name: &str, guid: u8, reconnect: Option<FileId>, persistent: bool) -> Vec<u8> {
    let flags = if persistent { 2 } else { 0 };
    use ringshare_wire::create::{DurableHandleReconnectV2, DurableHandleRequestV2};
    let ctx = match reconnect {
        None => CreateContext::new(
            tag::DURABLE_HANDLE_REQUEST_V2,
            DurableHandleRequestV2 {
                timeout: 0,
                flags,
                create_guid: [guid; 16],
            }
            .encode(),
        ),
        Some(file_id) => CreateContext::new(
            tag::DURABLE_HANDLE_RECONNECT_V2,
            DurableHandleReconnectV2 {
                file_id,
                create_guid: [guid; 16],
                flags,
            }
            .encode(),
        ),
    };
    let req = CreateRequest {
        security_flags: 0,
        requested_oplock_level: OplockLevel(if persistent { 0 } else { 9 }),
        impersonation_level: ImpersonationLevel::IMPERSONATION,
        smb_create_flags: 0,
        desired_access: AccessMask(ALL),
        file_attributes: FileAttributes(0),
        share_access: ShareAccess(7),
        create_disposition: CreateDisposition::OPEN_IF,
        create_options: CreateOptions(0),
        name: name.to_string(),
        contexts: vec![ctx],
    };
    let mut m = vec![0u8; HEADER_LEN];
    req.encode(&mut m);
    m.split_off(HEADER_LEN)
}

/// A client of node 1 leaves a durable open (batch oplock, data written,
/// bytes 0..10 locked) of a file homed on each node; it comes back
/// through node 2, which has node 1 hand the open over: the same
/// persistent FileId, its data, its lock (refusing node 3's client until
/// it is unlocked).
fn durable_opens_move_between_nodes(cl: &Cluster) {
    for (i, f) in cl.files_homed_on_each("durable").iter().enumerate() {
        let (home, guid) = (i + 1, 40 + i as u8);
        let mut a = cl.client(1);
        let (fa, _) = opened(a.call(Command::CREATE, &durable_create(f, guid, None))).unwrap();
        a.write(fa, 0, format!("kept on node 1, home {home}").as_bytes())
            .unwrap();
        assert_eq!(
            status(a.call(Command::LOCK, &lock_body(fa, 0, 10, 0x12))),
            NtStatus::SUCCESS
        );
        drop(a);
        let mut b = cl.client(2);
        let (back, t) = within(Duration::from_secs(5), || {
            match opened(b.call(Command::CREATE, &durable_create(f, guid, Some(fa)))) {
                Ok((back, _)) => Some(back),
                // Node 1 has not seen the connection go yet.
                Err(NtStatus::OBJECT_NAME_NOT_FOUND) => None,
                Err(s) => panic!("home {home}: {s:?}"),
            }
        })
        .expect("the open reconnected through node 2");
        assert_eq!(back.persistent, fa.persistent, "home {home}");
        eprintln!(
            "[{}] durable open moved from node 1 to node 2 in {t:?} (home {home})",
            cl.name
        );
        let data = b.read(back, 0, 64).unwrap();
        assert_eq!(data, format!("kept on node 1, home {home}").as_bytes());
        // Node 3's client opens it too: the batch oplock's break reaches
        // the client through node 2 now, and its acknowledgment lets the
        // open go on.
        let mut c = cl.client(3);
        let mid = send(&mut c, Command::CREATE, &create(f, READ, 7, None));
        match next_break(&mut b) {
            OplockBreak::Oplock { file_id, .. } => assert_eq!(file_id, back, "home {home}"),
            other => panic!("home {home}: {other:?}"),
        }
        let mut ack = Vec::new();
        OplockBreak::Oplock {
            oplock_level: OplockLevel(1),
            file_id: back,
        }
        .encode(&mut ack);
        assert_eq!(
            status(b.call(Command::OPLOCK_BREAK, &ack)),
            NtStatus::SUCCESS
        );
        let (fc, _) = opened(c.wait_for(mid)).unwrap();
        lock_refused_until_closed(&mut b, back, &mut c, fc, &format!("home {home}"));
    }
}

fn open(c: &mut Raw, name: &str, access: u32, share: u32) -> Result<FileId, NtStatus> {
    opened(c.call(Command::CREATE, &create(name, access, share, None))).map(|(f, _)| f)
}

/// The FileId and granted lease state of a CREATE's outcome.
fn opened(o: Outcome) -> Result<(FileId, u32), NtStatus> {
    match o {
        Outcome::Reply(h, m) if h.status == NtStatus::SUCCESS => {
            let r = CreateResponse::decode(&m).expect("create response");
            let state = r
                .contexts
                .iter()
                .find(|c| c.tag() == ContextTag::RequestLease)
                .map_or(0, |c| Lease::decode(&c.data).expect("lease").state.0);
            Ok((r.file_id, state))
        }
        Outcome::Reply(h, _) => Err(h.status),
        other => panic!("no answer to a CREATE: {other:?}"),
    }
}

fn status(o: Outcome) -> NtStatus {
    o.status().unwrap_or_else(|| panic!("no answer: {o:?}"))
}

fn lock_body(f: FileId, offset: u64, length: u64, flags: u32) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&48u16.to_le_bytes());
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    put_file_id(&mut b, f);
    b.extend_from_slice(&offset.to_le_bytes());
    b.extend_from_slice(&length.to_le_bytes());
    b.extend_from_slice(&flags.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b
}

fn set_info_body(f: FileId, class: u8, buf: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&33u16.to_le_bytes());
    b.push(1);
    b.push(class);
    b.extend_from_slice(&(buf.len() as u32).to_le_bytes());
    b.extend_from_slice(&((HEADER_LEN + 32) as u16).to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    put_file_id(&mut b, f);
    b.extend_from_slice(buf);
    b
}

/// A QUERY_INFO of file class `class` (SMB2_0_INFO_FILE), its answer at most 4096 bytes.
fn query_info_body(f: FileId, class: u8) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&41u16.to_le_bytes());
    b.push(1);
    b.push(class);
    b.extend_from_slice(&4096u32.to_le_bytes());
    b.extend_from_slice(&[0; 16]);
    put_file_id(&mut b, f);
    b.push(0);
    b
}

fn rename_info(to: &str) -> Vec<u8> {
    let name = utf16(to);
    let mut b = vec![0u8; 16];
    b.extend_from_slice(&(name.len() as u32).to_le_bytes());
    b.extend_from_slice(&name);
    b
}

/// Send a request without waiting; its message id.
fn send(c: &mut Raw, cmd: Command, body: &[u8]) -> u64 {
    let h = c.header(cmd);
    c.send_frame(&Raw::message(&h, body)).expect("send");
    h.message_id
}

/// The next frames' messages on `c` until one is a break notification.
fn next_break(c: &mut Raw) -> OplockBreak {
    loop {
        let frame = read_frame(&mut c.sock)
            .expect("connection open")
            .expect("a break within the read timeout");
        for (h, m) in split_responses(&frame) {
            if h.message_id == u64::MAX && h.command == Command::OPLOCK_BREAK {
                return OplockBreak::decode(&m).expect("break body");
            }
        }
    }
}

/// The interim answer to `mid`: the request went async (it waits).
fn interim(c: &mut Raw, mid: u64) {
    let frame = read_frame(&mut c.sock)
        .expect("open")
        .expect("an interim answer");
    let (h, _) = split_responses(&frame).remove(0);
    assert_eq!((h.message_id, h.status), (mid, NtStatus::PENDING), "{h:?}");
}

fn ack_lease(c: &mut Raw, key: u8, state: u32) -> NtStatus {
    let body = OplockBreak::LeaseAck {
        flags: 0,
        lease_key: [key; 16],
        lease_state: LeaseState(state),
        lease_duration: 0,
    };
    let mut m = vec![0u8; HEADER_LEN];
    body.encode(&mut m);
    status(c.call(Command::OPLOCK_BREAK, &m[HEADER_LEN..]))
}

/// The addresses FSCTL_QUERY_NETWORK_INTERFACE_INFO names.
fn interfaces(c: &mut Raw) -> Vec<std::net::IpAddr> {
    let req = IoctlRequest {
        ctl_code: Fsctl::QUERY_NETWORK_INTERFACE_INFO,
        file_id: FileId::ANY,
        input: &[],
        max_input_response: 0,
        output: &[],
        max_output_response: 64 * 1024,
        flags: IoctlFlags::IS_FSCTL,
    };
    let mut m = vec![0u8; HEADER_LEN];
    req.encode(&mut m);
    match c.call(Command::IOCTL, &m[HEADER_LEN..]) {
        Outcome::Reply(h, msg) if h.status.is_success() => {
            let r = IoctlResponse::decode(&msg).expect("an IOCTL response");
            NetworkInterfaceInfo::decode_list(r.output)
                .expect("an interface list")
                .iter()
                .map(|i| i.addr.ip())
                .collect()
        }
        other => panic!("QUERY_NETWORK_INTERFACE_INFO: {other:?}"),
    }
}

#[test]
fn three_nodes_decide_share_modes_leases_locks_delete_and_rename_together() {
    let name = "semantics";
    if !etcd_available(name) {
        return;
    }
    let cl = Cluster::start(name);
    let (mut a, mut b) = (cl.client(1), cl.client(2));

    // Each node names only its own address: a session's channels stay on
    // its node.
    for n in 1..=NODES {
        let node = &cl.nodes[usize::from(n) - 1];
        let mut c = node.login(USER_A);
        let own: std::net::IpAddr = node.host.parse().unwrap();
        assert_eq!(interfaces(&mut c), vec![own], "node {n}");
    }

    // Share modes, for a file homed on each node: clients on nodes 1 and 2.
    for (i, f) in cl.files_homed_on_each("share").iter().enumerate() {
        let home = i + 1;
        let fa = open(&mut a, f, READ, 1).expect("a opens sharing read");
        assert_eq!(
            open(&mut b, f, WRITE, 7),
            Err(NtStatus::SHARING_VIOLATION),
            "{f} (home {home})"
        );
        let fb = open(&mut b, f, READ, 7).expect("a reader is let in");
        b.close(fb).unwrap();
        a.close(fa).unwrap();
        let fb = open(&mut b, f, WRITE, 7).expect("after a's close");
        b.close(fb).unwrap();
    }

    // A lease break reaches the holder on node 1 before node 2's CREATE completes.
    for (i, f) in cl.files_homed_on_each("lease").iter().enumerate() {
        let key = 10 + i as u8;
        let (fa, state) = opened(a.call(
            Command::CREATE,
            &create(f, ALL, 7, Some(lease(key, R | W | H))),
        ))
        .expect("a takes a lease");
        assert_eq!(state, R | W | H);
        let mid = send(&mut b, Command::CREATE, &create(f, WRITE, 7, None));
        interim(&mut b, mid);
        let OplockBreak::LeaseBreakNotification(n) = next_break(&mut a) else {
            panic!("a lease break");
        };
        assert_eq!(n.lease_key, [key; 16]);
        assert_eq!(n.new_lease_state.0, R | H, "home {}", i + 1);
        assert_eq!(ack_lease(&mut a, key, R | H), NtStatus::SUCCESS);
        let (fb, _) = opened(b.wait_for(mid)).expect("b's CREATE completes after the ack");
        b.close(fb).unwrap();
        a.close(fa).unwrap();
    }

    // Byte-range locks conflict across nodes; a waiting lock is granted on unlock.
    for f in cl.files_homed_on_each("lock") {
        let fa = open(&mut a, &f, ALL, 7).unwrap();
        let fb = open(&mut b, &f, ALL, 7).unwrap();
        a.write(fa, 0, &[1; 200]).unwrap();
        assert_eq!(
            status(a.call(Command::LOCK, &lock_body(fa, 0, 100, 2 | 0x10))),
            NtStatus::SUCCESS
        );
        assert_eq!(
            b.write(fb, 50, b"x").unwrap_err().status(),
            Some(NtStatus::FILE_LOCK_CONFLICT),
            "{f}"
        );
        if let Err(e) = b.read(fb, 100, 10) {
            panic!("{f}: a read outside the range: {e:?}");
        }
        let mid = send(&mut b, Command::LOCK, &lock_body(fb, 10, 1, 2));
        interim(&mut b, mid);
        assert_eq!(
            status(a.call(Command::LOCK, &lock_body(fa, 0, 100, 4))),
            NtStatus::SUCCESS
        );
        assert_eq!(
            status(b.wait_for(mid)),
            NtStatus::SUCCESS,
            "granted on unlock"
        );
        assert_eq!(
            a.write(fa, 10, b"y").unwrap_err().status(),
            Some(NtStatus::FILE_LOCK_CONFLICT)
        );
        b.close(fb).unwrap();
        a.write(fa, 10, b"y").expect("b's close freed its lock");
        a.close(fa).unwrap();
    }

    // Delete-on-close set on node 2 waits for node 1's open; then the file goes.
    for f in cl.files_homed_on_each("gone") {
        let fa = open(&mut a, &f, ALL, 7).unwrap();
        let fb = open(&mut b, &f, ALL, 7).unwrap();
        assert_eq!(
            status(b.call(Command::SET_INFO, &set_info_body(fb, 13, &[1]))),
            NtStatus::SUCCESS
        );
        assert_eq!(open(&mut a, &f, READ, 7), Err(NtStatus::DELETE_PENDING));
        b.close(fb).unwrap();
        assert!(cl.share.join(&f).exists(), "{f}: node 1 still holds it");
        a.close(fa).unwrap();
        assert!(!cl.share.join(&f).exists(), "{f}: gone with the last open");
    }

    // A rename on node 2 waits until node 1's handle lease is given up.
    for (i, f) in cl.files_homed_on_each("rename").iter().enumerate() {
        let key = 20 + i as u8;
        let (fa, state) = opened(a.call(
            Command::CREATE,
            &create(f, READ, 7, Some(lease(key, R | H))),
        ))
        .unwrap();
        assert_eq!(state, R | H);
        let fb = open(&mut b, f, ALL, 7).unwrap();
        let to = format!("renamed-{f}");
        let mid = send(
            &mut b,
            Command::SET_INFO,
            &set_info_body(fb, 10, &rename_info(&to)),
        );
        interim(&mut b, mid);
        let OplockBreak::LeaseBreakNotification(n) = next_break(&mut a) else {
            panic!("a lease break");
        };
        assert_eq!(n.new_lease_state.0, R);
        assert_eq!(ack_lease(&mut a, key, R), NtStatus::SUCCESS);
        assert_eq!(status(b.wait_for(mid)), NtStatus::SUCCESS);
        assert!(cl.share.join(&to).exists() && !cl.share.join(f).exists());
        b.close(fb).unwrap();
        a.close(fa).unwrap();
    }
    // A file made through node 2 is reported to a watcher on node 1 (the
    // nodes' kernel change notify is off: the report crossed the nodes).
    std::fs::create_dir(cl.share.join("watched")).unwrap();
    if let Ok(Some(u)) = nix::unistd::User::from_name(USER_A.0) {
        chown_tree(&cl.share, u.uid.as_raw());
    }
    let dir = a
        .create("watched", READ, FILE_OPEN, FILE_DIRECTORY_FILE)
        .expect("a opens the directory");
    let mut body = Vec::new();
    body.extend_from_slice(&32u16.to_le_bytes());
    body.extend_from_slice(&0u16.to_le_bytes());
    body.extend_from_slice(&4096u32.to_le_bytes());
    put_file_id(&mut body, dir);
    body.extend_from_slice(&0x17u32.to_le_bytes());
    body.extend_from_slice(&0u32.to_le_bytes());
    let mid = send(&mut a, Command::CHANGE_NOTIFY, &body);
    interim(&mut a, mid);
    let f = open(&mut b, "watched\\made-on-node-2.txt", ALL, 7).unwrap();
    b.close(f).unwrap();
    let Outcome::Reply(h, m) = a.wait_for(mid) else {
        panic!("no answer to node 1's CHANGE_NOTIFY");
    };
    assert_eq!(h.status, NtStatus::SUCCESS);
    let off = usize::from(u16::from_le_bytes([m[HEADER_LEN + 2], m[HEADER_LEN + 3]]));
    let len = le32(&m[HEADER_LEN + 4..]) as usize;
    let changes = ringshare_wire::fscc::decode_notify_chain(&m[off..off + len]).unwrap();
    assert_eq!(changes[0].action, 1, "ADDED");
    assert_eq!(changes[0].file_name, "made-on-node-2.txt");

    cluster_dirlease::directory_leases_break_across_nodes(&cl, &mut a, &mut b);
    durable_opens_move_between_nodes(&cl);
    // No node dropped another's connection for a bad frame (a node that
    // joined a moment ago is refused until the others see it in etcd).
    for n in &cl.nodes {
        let log = n.log();
        let dropped: Vec<&str> = log
            .lines()
            .filter(|l| {
                l.contains("cluster: closing a connection from")
                    && !l.contains("is not a member of the cluster")
            })
            .collect();
        assert!(dropped.is_empty(), "a node dropped a peer: {dropped:?}");
    }
}

/// Keep `share` in use from clients on every node for `d`: every open,
/// write and close must succeed.
fn busy(cl: &Cluster, clients: &mut [Raw], files: &[String], d: Duration) -> usize {
    let end = Instant::now() + d;
    let mut ops = 0;
    while Instant::now() < end {
        for (c, f) in clients.iter_mut().zip(files.iter().cycle()) {
            let h = open(c, f, ALL, 7).unwrap_or_else(|s| panic!("{f}: {s:?} after {ops} ops"));
            c.write(h, 0, b"busy").expect("write");
            c.close(h).expect("close");
            ops += 1;
        }
    }
    let _ = cl;
    ops
}

#[test]
fn killing_the_etcd_leader_fails_no_smb_request() {
    let name = "etcdleader";
    if !etcd_available(name) {
        return;
    }
    let mut cl = Cluster::start(name);
    let files = cl.files_homed_on_each("busy");
    let mut clients: Vec<Raw> = (1..=NODES).map(|n| cl.client(n)).collect();
    busy(&cl, &mut clients, &files, Duration::from_millis(500));
    let leader = cl.etcd.leader();
    cl.etcd.kill(leader);
    let t = Instant::now();
    let ops = busy(&cl, &mut clients, &files, Duration::from_secs(8));
    eprintln!(
        "[{name}] etcd member {leader} (the leader) killed: {ops} opens+writes+closes over \
         {:?} on 3 nodes, none failed",
        t.elapsed()
    );
}

/// [`Cluster::start`] with its share continuously available (persistent opens outlive their
/// node); `None` without etcd (a SKIPPED line).
fn ca_cluster(name: &str) -> Option<Cluster> {
    etcd_available(name).then(|| Cluster::start_with(name, "\tcontinuous availability = yes\n"))
}

/// A client of node 3 holds persistent opens of files (made now, named `tag`-…) homed on the
/// nodes `homes` ([`hold_persistent`], before node 3 is stopped).
fn node3_holds_persistent(
    cl: &Cluster,
    tag: &str,
    homes: &[u16],
    guid: u8,
) -> (Raw, Vec<(String, u8, FileId, String)>) {
    let homed = cl.files_homed_on_each(tag);
    let mut c = cl.client(3);
    let files = homes.iter().map(|n| &homed[usize::from(*n) - 1]);
    let held = hold_persistent(&mut c, files, guid, "stopped");
    (c, held)
}

/// Try `f` every 50 ms until it gives `Some`, within `limit`.
fn within<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<(T, Duration)> {
    let t = Instant::now();
    while t.elapsed() < limit {
        if let Some(v) = f() {
            return Some((v, t.elapsed()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

/// Try `f` while it answers FILE_NOT_AVAILABLE (a partition still moving), at most 10 s.
fn when_available<T>(what: &str, mut f: impl FnMut() -> Result<T, NtStatus>) -> T {
    let (v, _) = within(Duration::from_secs(10), || match f() {
        Err(NtStatus::FILE_NOT_AVAILABLE) => None,
        other => Some(other),
    })
    .unwrap_or_else(|| panic!("{what}: FILE_NOT_AVAILABLE for 10 s"));
    v.unwrap_or_else(|s| panic!("{what}: {s:?}"))
}

#[test]
fn after_a_node_is_killed_the_survivors_decide_within_ten_seconds_and_keep_their_own_state() {
    let name = "nodekill";
    // Its share is continuously available: persistent opens outlive node 3.
    let Some(mut cl) = ca_cluster(name) else {
        return;
    };
    let homed = cl.files_homed_on_each("k");
    let (on1, on3) = (&homed[0], &homed[2]);
    let (mut a, mut b, mut c) = (cl.client(1), cl.client(2), cl.client(3));
    // Node 3's client holds a file homed on node 1 and one homed on node 3
    // alone; node 1's client shares a file homed on node 3 for reading only.
    let _c1 = open(&mut c, on1, ALL, 0).unwrap();
    let _c3 = open(&mut c, on3, ALL, 0).unwrap();
    let shared = &cl.files_homed_on_each("kshared")[2];
    let fa = open(&mut a, shared, READ, 1).unwrap();
    a.write(fa, 0, b"").ok();
    assert_eq!(open(&mut b, on1, READ, 7), Err(NtStatus::SHARING_VIOLATION));
    assert_eq!(open(&mut b, on3, READ, 7), Err(NtStatus::SHARING_VIOLATION));
    // A delete pending on a file homed on node 1 whose last open is node
    // 3's client (user A, who may not remove it: the directory is B's): when
    // node 3 dies, the file's home removes it as A, so it stays, as on a
    // single server when A's connection ends.
    // (Files made before B's directory: making them gives the share to A.)
    let ca_files = cl.files_homed_on_each("kca");
    let kept = cl.file_of_b_homed_on(1);
    let fk = open(&mut c, &kept, READ, 7).unwrap();
    let mut bob = cl.nodes[1].login(USER_B);
    let fbob = open(&mut bob, &kept, READ | DELETE, 7).unwrap();
    assert_eq!(
        status(bob.call(Command::SET_INFO, &set_info_body(fbob, 13, &[1]))),
        NtStatus::SUCCESS
    );
    bob.close(fbob).unwrap();
    assert_eq!(open(&mut b, &kept, READ, 7), Err(NtStatus::DELETE_PENDING));
    let _ = fk;
    // Persistent opens of node 3's client, of a file homed on node 1 and of
    // one homed on node 3, each with acknowledged data and a lock.
    let persistent = hold_persistent(&mut c, [&ca_files[0], &ca_files[2]], 60, "died");

    cl.nodes[2]
        .signal_and_wait(libc::SIGKILL, Duration::from_secs(5))
        .expect("node 3 died");
    // Survivors decide again: the dead node's opens are gone, a's share
    // mode on a file whose home died is rebuilt on the new home.
    let decided = |b: &mut Raw, f: &str| {
        within(Duration::from_secs(15), || match open(b, f, READ, 7) {
            Ok(h) => {
                b.close(h).unwrap();
                Some(())
            }
            Err(NtStatus::SHARING_VIOLATION | NtStatus::FILE_NOT_AVAILABLE) => None,
            Err(s) => panic!("{f}: {s:?}"),
        })
        .map(|(_, t)| t)
    };
    let t1 = decided(&mut b, on1).expect("the open of a file homed on a survivor");
    let t3 = decided(&mut b, on3).expect("the open of a file whose home died");
    eprintln!(
        "[{name}] kill -9 of node 3: a conflicting open decided after {t1:?} (home survived) \
         and {:?} (home died)",
        t1 + t3
    );
    assert!(t1 + t3 < Duration::from_secs(10), "{t1:?} + {t3:?}");
    if std::env::var_os("RINGSHARE_CLUSTER_TAKEOVER").is_none() {
        // Both survivors ran the takeover command for node 3, before
        // deciding for its files.
        let ran = std::fs::read_to_string(&cl.takeovers).unwrap_or_default();
        assert_eq!(ran, "3\n3\n", "takeover commands run");
    }
    // Node 1 forgot node 3's opens (the open of on1 above was decided):
    // the delete A's open was the last of failed as A, as it does on a
    // single server; the file is there and no longer delete-pending.
    assert!(
        cl.share.join(&kept).exists(),
        "removed as someone else than A"
    );
    let fk = open(&mut b, &kept, READ, 7).expect("no delete pending any more");
    b.close(fk).unwrap();
    // Another partition of the dead node may still be taken over (its new
    // home rebuilding): FILE_NOT_AVAILABLE until then, never a wrong yes.
    let (refused, ts) = within(Duration::from_secs(10), || {
        match open(&mut b, shared, WRITE, 7) {
            Err(NtStatus::FILE_NOT_AVAILABLE) => None,
            other => Some(other),
        }
    })
    .expect("the new home of a's file decides");
    assert_eq!(
        refused,
        Err(NtStatus::SHARING_VIOLATION),
        "a's share mode, rebuilt at the new home (after {:?} more)",
        ts
    );
    assert!(t1 + t3 + ts < Duration::from_secs(10), "{:?}", t1 + t3 + ts);
    a.close(fa).unwrap();
    // A close node 1 sent while it still saw the dead home is sent again
    // (every 100 ms) until the new home takes it.
    let (fb, t) = within(Duration::from_secs(3), || {
        open(&mut b, shared, WRITE, 7).ok()
    })
    .expect("after a's close, at the new home");
    eprintln!("[{name}] a's close reached the new home within {t:?}");
    b.close(fb).unwrap();

    // Node 3's client comes back through node 2 (DH2C, persistent): the
    // same open, its lock, every acknowledged byte.
    for (f, guid, fid, data) in persistent {
        let mut back_client = cl.client(2);
        let (back, t) = within(Duration::from_secs(10), || {
            let body = durable_create_as(&f, guid, Some(fid), true);
            match opened(back_client.call(Command::CREATE, &body)) {
                Ok((h, _)) => Some(h),
                Err(NtStatus::OBJECT_NAME_NOT_FOUND | NtStatus::FILE_NOT_AVAILABLE) => None,
                Err(s) => panic!("{f}: {s:?}"),
            }
        })
        .unwrap_or_else(|| {
            panic!(
                "the persistent open of {f} did not reconnect on a survivor; node 1's log:\n{}\n\
                 node 2's log:\n{}",
                cl.nodes[0].log(),
                cl.nodes[1].log()
            )
        });
        eprintln!("[{name}] persistent open of {f} reconnected through node 2 after {t:?}");
        its_data_and_lock_are_back(&mut back_client, back, &mut a, (&f, fid, &data));
    }
}

/// Issue 33, item 1, short: two kills of a random node at a random moment while clients of
/// every node hold persistent opens (data, locks, writes and locks going on) of files homed on
/// every node; every open comes back through a survivor with its data and locks, and no answer
/// on the way is anything but SUCCESS or FILE_NOT_AVAILABLE (crates/ringshare/tests/cluster_kill;
/// 50 runs: scripts/cluster-kill-loop.sh).
#[test]
fn a_node_killed_at_a_random_moment_gives_every_persistent_handle_back_and_never_says_gone() {
    let runs = std::env::var("RINGSHARE_KILL_LOOP_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(2);
    cluster_kill::run("killloop", runs);
}

/// A cluster of the previous release's binary is upgraded one node at a time with clients
/// writing throughout: nothing lost, no answer but success or try-again, level 1 until the
/// last old node is gone and 2 then (cluster_upgrade's notes; scripts/cluster-upgrade.sh).
#[test]
#[ignore = "needs the previous release's binary: scripts/cluster-upgrade.sh (about 40 s)"]
fn a_cluster_of_the_previous_release_upgraded_one_node_at_a_time_loses_nothing() {
    let old = std::env::var_os("RINGSHARE_OLD_BIN")
        .expect("RINGSHARE_OLD_BIN: the previous release's ringshare (scripts/cluster-upgrade.sh)");
    // "this": a control run, this build upgraded to itself.
    let old = (old != "this").then_some(std::path::Path::new(&old));
    cluster_upgrade::run("upgrade", old, NODES, cluster_upgrade::BETWEEN);
}

/// Persistent opens (DH2Q, CreateGuids from `guid`) of `files` by client `c`, each with
/// acknowledged data and bytes 0..10 locked: (name, CreateGuid, FileId, data) of each.
fn hold_persistent<'a>(
    c: &mut Raw,
    files: impl IntoIterator<Item = &'a String>,
    guid: u8,
    before: &str,
) -> Vec<(String, u8, FileId, String)> {
    let mut held = Vec::new();
    for (i, f) in files.into_iter().enumerate() {
        let guid = guid + i as u8;
        // (A partition may still be moving to a node started again: FILE_NOT_AVAILABLE.)
        let (fid, _) = when_available(f, || {
            opened(c.call(Command::CREATE, &durable_create_as(f, guid, None, true)))
        });
        let data = format!("acknowledged before its node {before}: {f}");
        when_available(f, || c.write(fid, 0, data.as_bytes()).map_err(status));
        when_available(f, || {
            match status(c.call(Command::LOCK, &lock_body(fid, 0, 10, 0x12))) {
                NtStatus::SUCCESS => Ok(()),
                s => Err(s),
            }
        });
        held.push((f.clone(), guid, fid, data));
    }
    held
}

/// A persistent open of [`hold_persistent`]'s, reconnected by `back_client` as `back`, is the
/// same open with its data, and its lock refuses client `a` until it is closed.
fn its_data_and_lock_are_back(
    back_client: &mut Raw,
    back: FileId,
    a: &mut Raw,
    (f, fid, data): (&str, FileId, &str),
) {
    assert_eq!(back.persistent, fid.persistent);
    assert_eq!(back_client.read(back, 0, 128).unwrap(), data.as_bytes());
    // (Node 1 may still see node 3 as the home of a partition node 2
    // took over: FILE_NOT_AVAILABLE for a moment.)
    let (fa, _) = within(Duration::from_secs(5), || match open(a, f, READ, 7) {
        Err(NtStatus::FILE_NOT_AVAILABLE) => None,
        other => Some(other.unwrap()),
    })
    .expect("node 1 knows the new home");
    lock_refused_until_closed(back_client, back, a, fa, f);
}

/// `holder`'s open `held` keeps bytes 0..10 locked: `other`'s open `fo` may not lock them
/// until `held` is closed, then may (and is closed).
fn lock_refused_until_closed(
    holder: &mut Raw,
    held: FileId,
    other: &mut Raw,
    fo: FileId,
    what: &str,
) {
    assert_eq!(
        status(other.call(Command::LOCK, &lock_body(fo, 0, 10, 0x12))),
        NtStatus::LOCK_NOT_GRANTED,
        "{what}: the lock is the open's still"
    );
    holder.close(held).unwrap();
    assert_eq!(
        status(other.call(Command::LOCK, &lock_body(fo, 0, 10, 0x12))),
        NtStatus::SUCCESS,
        "{what}: after its close"
    );
    other.close(fo).unwrap();
}

/// Node 3's client opens a file homed on node 1 and one homed on node 3
/// (made now, named `tag`-…), each for itself alone, and writes to each.
fn node3_writes_two_files(cl: &Cluster, tag: &str) -> (Raw, Vec<(String, FileId)>) {
    let homed = cl.files_homed_on_each(tag);
    let mut c = cl.client(3);
    let files = [&homed[0], &homed[2]]
        .into_iter()
        .map(|f| {
            let h = open(&mut c, f, ALL, 0).unwrap();
            c.write(h, 0, b"before").unwrap();
            (f.clone(), h)
        })
        .collect();
    (c, files)
}

/// A WRITE of `LATE!!` on each open, sent without waiting for an answer.
fn send_late_writes(c: &mut Raw, files: &[(String, FileId)]) {
    for (_, h) in files {
        let hdr = c.header(Command::WRITE);
        c.send_frame(&Raw::message(&hdr, &write_body(*h, 0, b"LATE!!")))
            .unwrap();
    }
}

/// Node 2's client opens each file for itself as soon as the survivors
/// have taken over from node 3 (`since` node 3 stopped answering), and
/// writes `AFTER!` over what node 3's client wrote.
fn survivors_take_over(cl: &Cluster, files: &[(String, FileId)], since: Instant, what: &str) {
    let mut b = cl.client(2);
    // On CephFS node 2's first look at a file node 3 holds open for writing
    // waits at the MDS for node 3's capabilities, until the eviction.
    b.sock
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    for (f, _) in files {
        let (h, took) = within(Duration::from_secs(15), || open(&mut b, f, ALL, 0).ok())
            .unwrap_or_else(|| panic!("the survivors take over after {what}"));
        b.write(h, 0, b"AFTER!").unwrap();
        b.close(h).unwrap();
        eprintln!(
            "[{}] {f}: taken over {:?} after {what} ({took:?} after the first try)",
            cl.name,
            since.elapsed()
        );
    }
}

/// None of node 3's late writes landed (each file holds the survivors'
/// `AFTER!`), and node 3 logged that it was fenced.
fn no_late_write_landed(cl: &Cluster, files: &[(String, FileId)], what: &str) {
    for (f, _) in files {
        let got = std::fs::read(cl.share.join(f)).unwrap();
        assert_eq!(
            &got[..],
            b"AFTER!",
            "{f}: a write of {what} landed; its log:\n{}",
            cl.nodes[2].log()
        );
    }
    let log = cl.nodes[2].log();
    assert!(log.contains("this node is fenced"), "{log}");
}

#[test]
fn a_hung_node_is_fenced_and_none_of_its_writes_land_after_the_takeover() {
    let name = "nodestop";
    if !etcd_available(name) {
        return;
    }
    let cl = Cluster::start(name);
    // Node 3's client writes two files, one homed on node 1, one on node 3.
    let (mut c, files) = node3_writes_two_files(&cl, "s");
    // Every thread stopped before the writes go out (a busy machine's I/O thread could
    // still take a request sent just after the signal).
    stop_process(cl.nodes[2].pid());
    // Writes sent to the stopped node wait in its socket.
    send_late_writes(&mut c, &files);
    survivors_take_over(&cl, &files, Instant::now(), "SIGSTOP");
    continue_process(cl.nodes[2].pid());
    std::thread::sleep(Duration::from_secs(2));
    no_late_write_landed(&cl, &files, "the stopped node");
}

#[test]
fn a_stranger_on_the_cluster_port_gets_nothing_and_cannot_flood_the_log() {
    let name = "stranger";
    if !etcd_available(name) {
        return;
    }
    let cl = Cluster::start(name);
    use std::io::{Read, Write};
    for i in 0..200u32 {
        let mut s =
            std::net::TcpStream::connect((cl.nodes[0].host.as_str(), cl.cluster_ports[0])).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        // A hello that claims node 2 without the secret, or plain junk.
        let hello: Vec<u8> = if i % 2 == 0 {
            [
                &b"RSCL"[..],
                &1u16.to_le_bytes(),
                &2u16.to_le_bytes(),
                &[7u8; 16],
            ]
            .concat()
        } else {
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()
        };
        let _ = s.write_all(&hello);
        let mut answer = [0u8; 64];
        let mut got = 0;
        if i % 2 == 0 {
            // The node answers a hello with its own and a MAC, then wants ours.
            let _ = s.write_all(&[0u8; 32]);
        }
        while let Ok(n) = s.read(&mut answer[got..]) {
            if n == 0 || got + n == answer.len() {
                break;
            }
            got += n;
        }
        assert!(got <= 24 + 32, "the node sent nothing beyond its hello");
    }
    let log = cl.nodes[0].log();
    let lines = log
        .lines()
        .filter(|l| {
            l.contains("cluster: closing a connection from") && !l.contains("is not a member")
        })
        .count();
    assert!(
        (1..=12).contains(&lines),
        "{lines} lines for 200 strangers:\n{log}"
    );
    // Node 1 still decides.
    let mut a = cl.client(1);
    let f = open(&mut a, "after.txt", ALL, 7).expect("node 1 still serves");
    a.close(f).unwrap();
}

/// Nothing the node in network namespace `ns` sends to these addresses
/// leaves it (blackhole routes), until [`Cut::heal`] or the drop.
struct Cut {
    ns: String,
    addrs: Vec<String>,
}

impl Cut {
    fn new(ns: &str, addrs: Vec<String>) -> Cut {
        let cut = Cut {
            ns: ns.to_string(),
            addrs,
        };
        assert!(cut.routes("add"), "ip -n {ns} route add blackhole");
        cut
    }

    /// Whether every route was changed (each is tried).
    fn routes(&self, action: &str) -> bool {
        let done: Vec<bool> = self
            .addrs
            .iter()
            .map(|a| {
                std::process::Command::new("ip")
                    .args([
                        "-n",
                        &self.ns,
                        "route",
                        action,
                        "blackhole",
                        &format!("{a}/32"),
                    ])
                    .status()
                    .map(|s| s.success())
                    .unwrap_or(false)
            })
            .collect();
        done.iter().all(|d| *d)
    }

    fn heal(self) {}
}

impl Drop for Cut {
    fn drop(&mut self) {
        self.routes("del");
    }
}

#[test]
#[ignore = "needs each node in its own network namespace: scripts/cluster-ceph.sh runs it"]
fn a_node_cut_off_from_etcd_its_peers_and_the_file_system_fences_itself_and_none_of_its_writes_land(
) {
    let name = "nodecut";
    if !etcd_available(name) {
        return;
    }
    assert!(
        std::env::var_os("RINGSHARE_CLUSTER_NETNS").is_some(),
        "{name}: cutting one node off takes each node in its own network namespace: \
         run scripts/cluster-ceph.sh"
    );
    let mut cl = Cluster::start(name);
    let ns3 = cl.netns.as_ref().expect("namespaces")[2].clone();
    // Node 3 loses etcd and the file system (both on the host's address)
    // and its peers, but not its client (the tests' clients reach the nodes
    // from another address of the host).
    let cut = vec![
        etcd_cluster::etcd_host(),
        cl.nodes[0].host.clone(),
        cl.nodes[1].host.clone(),
    ];
    let (mut c, files) = node3_writes_two_files(&cl, "cut");
    let cut = Cut::new(&ns3, cut);
    let t = Instant::now();
    // Writes node 3 takes while cut off: none may land after the takeover.
    send_late_writes(&mut c, &files);
    survivors_take_over(&cl, &files, t, "the cut");
    // Node 3 fenced itself: its client was dropped.
    c.sock
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut answers = Vec::new();
    let dropped = within(Duration::from_secs(10), || loop {
        match read_frame(&mut c.sock) {
            Ok(Some(f)) => answers.push(Header::decode(&f).map(|h| h.status)),
            Ok(None) => return None,
            Err(()) => return Some(()),
        }
    });
    eprintln!("[{name}] node 3's answers to the writes sent after the cut: {answers:?}");
    assert!(
        dropped.is_some(),
        "node 3's client still connected; its log:\n{}",
        cl.nodes[2].log()
    );
    cut.heal();
    eprintln!(
        "[{name}] node 3 reconnected to the network {:?} after the cut",
        t.elapsed()
    );
    std::thread::sleep(Duration::from_secs(5));
    no_late_write_landed(&cl, &files, "the node cut off");
    // Its CephFS session was evicted by the takeover: node 3 does not join
    // again to serve errors, until its mount is made again and it restarts.
    let mut e = cl.etcd.client();
    let refused = within(Duration::from_secs(10), || {
        cl.nodes[2]
            .log()
            .contains("not joining again")
            .then_some(())
    });
    assert!(refused.is_some(), "{}", cl.nodes[2].log());
    let held: Vec<u32> = owners(&mut e, &cl.name)
        .into_iter()
        .filter(|(_, (n, _))| n == "3")
        .map(|(p, _)| p)
        .collect();
    assert!(
        held.is_empty(),
        "node 3 joined again over an evicted mount: {held:?}"
    );
    eprintln!("[{name}] node 3, evicted, stays out of the cluster");
    let Ok(remount) = std::env::var("RINGSHARE_CLUSTER_REMOUNT") else {
        return;
    };
    let ok = std::process::Command::new(&remount)
        .arg("3")
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "{remount} 3");
    if cl.nodes[2]
        .signal_and_wait(libc::SIGTERM, Duration::from_secs(10))
        .is_none()
    {
        cl.nodes[2].signal_and_wait(libc::SIGKILL, Duration::from_secs(5));
    }
    cl.nodes[2].spawn();
    wait_placed(&mut e, &cl.name, &["1", "2", "3"], Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(1_200));
    let mut c = cl.client(3);
    for (f, _) in &files {
        let h = open(&mut c, f, READ, 7).unwrap();
        assert_eq!(c.read(h, 0, 64).unwrap(), b"AFTER!", "{f} through node 3");
        c.close(h).unwrap();
    }
    eprintln!(
        "[{name}] node 3 remounted and restarted: serving again {:?} after the cut",
        t.elapsed()
    );
}
