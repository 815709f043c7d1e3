//! A connection carried by QUIC negotiates dialect 3.1.1 only ([MS-SMB2]
//! 2.1), and `status` shows its transport.

mod support;

use ringshare_core::{SigningPolicy, Transport};
use ringshare_vfs::memory::MemShare;
use ringshare_wire::consts::Dialect;
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
