//! A connection carried by QUIC negotiates dialect 3.1.1 only ([MS-SMB2]
//! 2.1), and `status` shows its transport; over QUIC a client offering
//! SMB2_ACCEPT_TRANSPORT_LEVEL_SECURITY is not asked to encrypt (2.2.3.1.5,
//! 3.3.5.4), unless `server smb encryption over quic` says so.

use crate::support;

use ringshare_core::{EncryptPolicy, SigningPolicy, Transport};
use ringshare_vfs::memory::MemShare;
use ringshare_wire::consts::{CreateDisposition, Dialect, TransportCapabilityFlags};
use ringshare_wire::negotiate::{NegotiateContext, NegotiateResponse};
use ringshare_wire::NtStatus;
use support::*;

/// DialectRevision of a NEGOTIATE response (SMB2 header, StructureSize, SecurityMode).
fn dialect_of(r: &Resp) -> u16 {
    u16::from_le_bytes([r.msg[68], r.msg[69]])
}

fn fresh(transport: Option<Transport>) -> Client {
    let mem = MemShare::new();
    let server = server(&mem, SigningPolicy::IfRequired);
    let mut c = Client::fresh(server, mem, Dialect::SMB3_1_1, [7; 16]);
    if let Some(t) = transport {
        c.conn.set_transport(t);
    }
    c
}

#[test]
fn a_quic_connection_negotiates_3_1_1_even_when_older_dialects_are_offered_first() {
    let mut c = fresh(Some(Transport::Quic));
    let (_, r) = c.negotiate_offering(vec![Dialect::SMB2_1, Dialect::SMB3_0_2, Dialect::SMB3_1_1]);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert_eq!(dialect_of(&r), Dialect::SMB3_1_1.0);
    let facts = c.conn_server().status().connections;
    assert_eq!(facts.len(), 1);
    assert_eq!(facts[0].transport, Transport::Quic);
    assert_eq!(facts[0].transport.name(), "quic");
}

#[test]
fn a_quic_connection_offering_no_3_1_1_is_refused() {
    let mut c = fresh(Some(Transport::Quic));
    let (_, r) = c.negotiate_offering(vec![Dialect::SMB2_1, Dialect::SMB3_0_2]);
    assert_eq!(r.status(), NtStatus::NOT_SUPPORTED);
}

#[test]
fn a_tcp_connection_still_negotiates_older_dialects() {
    let mut c = fresh(None);
    let (_, r) = c.negotiate_offering(vec![Dialect::SMB2_1, Dialect::SMB3_0_2]);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert_eq!(dialect_of(&r), Dialect::SMB3_0_2.0);
    assert_eq!(
        c.conn_server().status().connections[0].transport,
        Transport::Tcp
    );
}

/// A connection to a server whose `server smb encrypt` is required (and
/// whose share `sealed` requires it too), over `transport`.
fn encryption_required(transport: Transport, over_quic_too: bool) -> Client {
    let mem = MemShare::new();
    let server = server_with(&mem, |c| {
        c.encrypt = EncryptPolicy::Required;
        c.smb_encryption_over_quic = over_quic_too;
    });
    let mut c = Client::fresh(server, mem, Dialect::SMB3_1_1, [7; 16]);
    c.conn.set_transport(transport);
    c
}

fn trust_the_transport() -> Vec<NegotiateContext> {
    vec![NegotiateContext::Transport {
        flags: TransportCapabilityFlags::ACCEPT_TRANSPORT_LEVEL_SECURITY,
    }]
}

/// The SMB2_TRANSPORT_CAPABILITIES context of a NEGOTIATE response.
fn transport_answer(r: &Resp) -> Option<TransportCapabilityFlags> {
    NegotiateResponse::decode(&r.msg)
        .expect("a NEGOTIATE response")
        .contexts
        .into_iter()
        .find_map(|c| match c {
            NegotiateContext::Transport { flags } => Some(flags),
            _ => None,
        })
}

#[test]
fn over_quic_a_client_trusting_the_transport_is_answered_and_not_asked_to_encrypt() {
    let mut c = encryption_required(Transport::Quic, false);
    let r = c.negotiate_adding(Dialect::SMB3_1_1, trust_the_transport());
    assert_eq!(
        transport_answer(&r),
        Some(TransportCapabilityFlags::ACCEPT_TRANSPORT_LEVEL_SECURITY)
    );
    // This client offers no cipher: it could not encrypt at all.
    assert_eq!(c.log_on("alice", "secret", 0), NtStatus::SUCCESS);
    c.tree_id = c.tree_connect("sealed");
    // Unencrypted requests on a share that requires encryption are served.
    c.put_file("inside-quic.txt", b"no double encryption");
    assert!(c
        .create("inside-quic.txt", GENERIC_READ, CreateDisposition::OPEN, 0)
        .is_ok());
}

#[test]
fn over_quic_without_the_offer_encryption_stays_required() {
    let mut c = encryption_required(Transport::Quic, false);
    let r = c.negotiate_adding(Dialect::SMB3_1_1, Vec::new());
    assert_eq!(transport_answer(&r), None);
    assert_eq!(c.log_on("alice", "secret", 0), NtStatus::ACCESS_DENIED);
}

#[test]
fn over_tcp_the_offer_to_trust_the_transport_is_not_taken() {
    let mut c = encryption_required(Transport::Tcp, false);
    let r = c.negotiate_adding(Dialect::SMB3_1_1, trust_the_transport());
    assert_eq!(transport_answer(&r), None, "never on TCP");
    assert_eq!(c.log_on("alice", "secret", 0), NtStatus::ACCESS_DENIED);
}

#[test]
fn server_smb_encryption_over_quic_keeps_encryption_required_inside_quic() {
    let mut c = encryption_required(Transport::Quic, true);
    let r = c.negotiate_adding(Dialect::SMB3_1_1, trust_the_transport());
    assert_eq!(transport_answer(&r), None);
    assert_eq!(c.log_on("alice", "secret", 0), NtStatus::ACCESS_DENIED);
}
