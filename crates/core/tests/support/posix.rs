//! SMB3 POSIX clients of the test servers (crates/core/tests/posix.rs, and the cluster's in
//! cluster_posix.rs): the negotiate context offered, a POSIX open, and the few requests their
//! tests repeat.

use std::sync::Arc;

use ringshare_core::ServerState;
use ringshare_vfs::memory::MemShare;
use ringshare_wire::consts::{CreateDisposition as D, Dialect, NegotiateContextType};
use ringshare_wire::create::{tag, CreateContext, CreateResponse};
use ringshare_wire::negotiate::{NegotiateContext, NegotiateResponse};
use ringshare_wire::NtStatus;

use super::{rename_info, Client};

/// The POSIX extensions' negotiate context carrying `data`.
pub fn posix_offer(data: &[u8]) -> NegotiateContext {
    NegotiateContext::Unknown {
        context_type: NegotiateContextType::POSIX_EXTENSIONS_AVAILABLE,
        data: data.to_vec(),
    }
}

/// A 3.1.1 client (client guid `guid` repeated) of `server` that offered the extensions and
/// connected to `share`; whether the server answered their context.
pub fn offering(server: Arc<ServerState>, mem: MemShare, guid: u8) -> (Client, bool) {
    let mut c = Client::fresh(server, mem, Dialect::SMB3_1_1, [guid; 16]);
    let r = c.negotiate_adding(Dialect::SMB3_1_1, vec![posix_offer(tag::POSIX)]);
    let answered = NegotiateResponse::decode(&r.msg)
        .expect("negotiate")
        .contexts
        .iter()
        .any(|x| x == &posix_offer(tag::POSIX));
    c.session_setup();
    c.tree_id = c.tree_connect("share");
    (c, answered)
}

/// A POSIX open of `name` with DELETE, sharing everything.
pub fn posix_open(c: &mut Client, name: &str, disposition: D) -> ringshare_wire::FileId {
    let tree = c.tree_id;
    let ctx = vec![CreateContext::new(
        tag::POSIX,
        0o600u32.to_le_bytes().to_vec(),
    )];
    let mut m = c.create_msg_ctx(tree, name, 0x110080, 7, disposition, 0, 0, ctx);
    c.sign(&mut m);
    let r = c.send_frame(m).remove(0);
    assert_eq!(r.status(), NtStatus::SUCCESS, "{name}");
    CreateResponse::decode(&r.msg).unwrap().file_id
}

/// `f`'s delete-on-close set (FileDispositionInformation).
pub fn set_delete_on_close(c: &mut Client, f: ringshare_wire::FileId) {
    const FILE_DISPOSITION_INFORMATION: u8 = 13;
    let r = c.set_info(f, 1, FILE_DISPOSITION_INFORMATION, &[1]);
    assert_eq!(r.status(), NtStatus::SUCCESS);
}

/// Whether a Windows open finds `name`.
pub fn listed(c: &mut Client, name: &str) -> bool {
    match c.create(name, 0x80, D::OPEN, 0) {
        Ok(f) => {
            c.close(f);
            true
        }
        Err(s) => {
            assert_eq!(s, NtStatus::OBJECT_NAME_NOT_FOUND);
            false
        }
    }
}

/// `f` renamed to `to` (FileRenameInformation): its status.
pub fn rename(c: &mut Client, f: ringshare_wire::FileId, to: &str, replace: bool) -> NtStatus {
    const FILE_RENAME_INFORMATION: u8 = 10;
    c.set_info(f, 1, FILE_RENAME_INFORMATION, &rename_info(to, replace))
        .status()
}
