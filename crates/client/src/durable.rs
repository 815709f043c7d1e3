//! Durable opens from the client side ([MS-SMB2] 3.2.4.3.4, 3.2.4.4): a
//! CREATE with DH2Q and a read-write-handle lease, and the DH2C that takes
//! the open back on a new connection after the old one went.

use ringshare_wire::consts::{
    Command, CreateDisposition, LeaseBreakFlags, LeaseFlags, LeaseState, OplockLevel,
};
use ringshare_wire::create::{
    tag, ContextTag, CreateContext, DurableHandleReconnectV2, DurableHandleRequestV2, Lease,
    LeaseV2,
};
use ringshare_wire::misc::OplockBreak;
use ringshare_wire::FileId;

use crate::conn::{create_request, ClientConn, Event};
use crate::error::ClientError;

/// What makes an open durable and lets it be taken back: the lease key
/// and the CreateGuid (both the client's choice, unique per open).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Durable {
    pub lease_key: [u8; 16],
    pub create_guid: [u8; 16],
    /// How long the server should keep the open once disconnected (ms;
    /// 0: the server's default).
    pub timeout_ms: u32,
}

const RWH: u32 = 7;

/// A version 2 lease request of key `key` for `state` (R 1, H 2, W 4).
pub(crate) fn lease_context(key: [u8; 16], state: u32) -> CreateContext<'static> {
    let lease = Lease {
        key,
        state: LeaseState(state),
        flags: LeaseFlags::empty(),
        duration: 0,
        v2: Some(LeaseV2 {
            parent_key: [0; 16],
            epoch: 0,
        }),
    };
    CreateContext::new(tag::REQUEST_LEASE, lease.encode())
}

/// The lease state a CREATE response grants (its RqLs context), if any.
pub(crate) fn lease_granted(contexts: &[CreateContext<'_>]) -> Option<u32> {
    let c = contexts
        .iter()
        .find(|c| c.tag() == ContextTag::RequestLease)?;
    Lease::decode(&c.data).ok().map(|l| l.state.0)
}

/// An unsolicited OPLOCK_BREAK: a lease break notification becomes an
/// [`Event::LeaseBreak`]; an oplock break (this client asks for none) or an
/// undecodable one is dropped.
pub(crate) fn lease_break(msg: &[u8], events: &mut Vec<Event>) -> Result<(), ClientError> {
    if let Ok(OplockBreak::LeaseBreakNotification(n)) = OplockBreak::decode(msg) {
        events.push(Event::LeaseBreak {
            lease_key: n.lease_key,
            new_state: n.new_lease_state.0,
            ack_required: n.flags.0 & LeaseBreakFlags::ACK_REQUIRED.0 != 0,
        });
    }
    Ok(())
}

impl ClientConn {
    /// Acknowledge a lease break ([MS-SMB2] 2.2.24.2): the lease of
    /// `lease_key` is now `state`.
    pub fn lease_break_ack(
        &mut self,
        tag: u64,
        lease_key: [u8; 16],
        state: u32,
    ) -> Result<u64, ClientError> {
        let ack = OplockBreak::LeaseAck {
            flags: 0,
            lease_key,
            lease_state: LeaseState(state),
            lease_duration: 0,
        };
        self.request(tag, Command::OPLOCK_BREAK, 1, |o| ack.encode(o))
    }

    /// CREATE `name` asking for a version 2 lease of key `lease_key` and
    /// `state` (on a directory: R or RH, granted when the server offered
    /// directory leasing; this client offers it).
    pub fn create_leased(
        &mut self,
        tag: u64,
        name: &str,
        access: u32,
        disposition: CreateDisposition,
        options: u32,
        (lease_key, state): ([u8; 16], u32),
    ) -> Result<u64, ClientError> {
        let contexts = vec![lease_context(lease_key, state)];
        let req = create_request(
            name,
            access,
            disposition,
            options,
            OplockLevel(0xFF),
            contexts,
        );
        self.request(tag, Command::CREATE, 1, |o| req.encode(o))
    }

    /// CREATE `name` (a file) with a read-write-handle lease and DH2Q
    /// (SMB 3.x). Whether the server made it durable is in the reply
    /// ([`crate::Reply::Create`]'s `durable`).
    pub fn create_durable(
        &mut self,
        tag: u64,
        name: &str,
        access: u32,
        disposition: CreateDisposition,
        d: &Durable,
    ) -> Result<u64, ClientError> {
        let dh2q = DurableHandleRequestV2 {
            timeout: d.timeout_ms,
            flags: 0,
            create_guid: d.create_guid,
        };
        let contexts = vec![
            lease_context(d.lease_key, RWH),
            CreateContext::new(tag::DURABLE_HANDLE_REQUEST_V2, dh2q.encode()),
        ];
        let req = create_request(name, access, disposition, 0x40, OplockLevel(0xFF), contexts);
        self.request(tag, Command::CREATE, 1, |o| req.encode(o))
    }

    /// DH2C: take back the durable open `file_id` of `name` made with `d`,
    /// on this connection (its ClientGuid and user must be the open's).
    pub fn reconnect_durable(
        &mut self,
        tag: u64,
        name: &str,
        file_id: FileId,
        d: &Durable,
    ) -> Result<u64, ClientError> {
        let dh2c = DurableHandleReconnectV2 {
            file_id,
            create_guid: d.create_guid,
            flags: 0,
        };
        let contexts = vec![
            lease_context(d.lease_key, RWH),
            CreateContext::new(tag::DURABLE_HANDLE_RECONNECT_V2, dh2c.encode()),
        ];
        let req = create_request(
            name,
            0,
            CreateDisposition::OPEN,
            0x40,
            OplockLevel(0xFF),
            contexts,
        );
        self.request(tag, Command::CREATE, 1, |o| req.encode(o))
    }
}
