//! What a cluster node receives from another: a server core joined to a
//! cluster of two nodes (the partitions alternate between this node and
//! the other, which never answers), fed arbitrary messages through
//! `ServerState::cluster_receive` — calls about files, notices for
//! connections, page requests of a rebuild, with the state the earlier
//! messages of the input left.
//!
//! Input: messages, each [u16 LE length][bytes].
//!
//! Invariants: no panic; every call is answered; every notice is taken
//! or refused, never answered, but for one of a kind this build does not
//! know (a newer node's), which gets a NOT_SUPPORTED answer whatever it is
//! (the transport drops the answer to a notice).
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use ringshare_core::cluster::msg::{Message, UNKNOWN_KIND};
use ringshare_core::cluster::{ClusterLink, ClusterNode, Home};
use ringshare_fuzz::{guest_server, length_prefixed};
use ringshare_vfs::memory::MemShare;
use ringshare_wire::NtStatus;

struct Link;

impl ClusterLink for Link {
    fn node(&self) -> u16 {
        1
    }
    fn partitions(&self) -> u32 {
        16
    }
    fn home(&self, p: u32) -> Home {
        if p % 2 == 0 {
            Home::Here
        } else {
            Home::Node(2)
        }
    }
    fn members(&self) -> Vec<u16> {
        vec![1, 2]
    }
    fn call(&self, _node: u16, _message: Vec<u8>) -> Result<Vec<u8>, NtStatus> {
        Err(NtStatus::FILE_NOT_AVAILABLE)
    }
    fn post(&self, _node: u16, _message: Vec<u8>) {}
}

fuzz_target!(|data: &[u8]| {
    let mem = MemShare::new();
    let server = guest_server(&mem);
    server.join_cluster(Arc::new(Link)).expect("join");
    for (i, m) in length_prefixed(data).into_iter().enumerate() {
        let is_call = m.first() == Some(&1);
        let unknown = Message::decode(m).err() == Some(UNKNOWN_KIND);
        match server.cluster_receive(m, i as u64 * 10_000) {
            Ok(Some(answer)) => assert!((is_call || unknown) && !answer.is_empty()),
            Ok(None) => assert!(!is_call),
            Err(_) => {}
        }
    }
});
