//! Multichannel from the client: a second connection binds to the first
//! one's session ([MS-SMB2] 3.2.4.1.7, 3.2.5.3.3) against the real server
//! core, in process, and carries I/O on the session's opens.

use crate::support;

use ringshare_client::{ClientConn, Event, Reply, SmbError};
use ringshare_core::SigningPolicy;
use ringshare_wire::consts::{CreateDisposition, Dialect};
use ringshare_wire::FileId;
use support::{options, server, Pair};

fn result(p: &mut Pair, tag: u64) -> Result<Reply, SmbError> {
    let events = p.take_events();
    events
        .into_iter()
        .find_map(|e| match e {
            Event::Done { tag: t, result, .. } if t == tag => Some(result),
            _ => None,
        })
        .expect("a reply for the tag")
}

/// A first channel (ready) and a second bound to its session (ready).
fn two_channels(dialect: Dialect, sign: bool, encrypt: bool) -> (Pair, Pair) {
    let state = server(SigningPolicy::IfRequired);
    let mut opts = options(dialect);
    opts.sign = sign;
    opts.encrypt = encrypt;
    let mut a = Pair::on(state.clone(), opts.clone());
    a.pump().expect("first channel handshake");
    assert!(a.client.is_ready());
    a.take_events();
    let binding = a
        .client
        .channel_binding()
        .expect("a signing 3.x session can be bound");
    let mut b = Pair::on(state, opts.clone());
    opts.seed ^= 0xB1D;
    b.client = ClientConn::bind(opts, binding);
    b.pump().expect("binding handshake");
    assert!(b.client.is_ready(), "bound: {:?}", b.events);
    assert!(b.take_events().contains(&Event::Ready));
    assert!(b.client.is_bound_channel());
    assert_eq!(b.client.session_id(), a.client.session_id());
    (a, b)
}

fn create(p: &mut Pair, name: &str) -> FileId {
    p.client
        .create(1, name, 0xC000_0000, CreateDisposition::OPEN_IF, 0x40)
        .unwrap();
    p.pump().unwrap();
    match result(p, 1) {
        Ok(Reply::Create { file_id, .. }) => file_id,
        other => panic!("create: {other:?}"),
    }
}

#[test]
fn a_bound_channel_writes_to_an_open_of_the_first_and_the_first_reads_it_back() {
    for (dialect, sign, encrypt) in [
        (Dialect::SMB3_1_1, false, false),
        (Dialect::SMB3_1_1, true, false),
        (Dialect::SMB3_1_1, false, true),
        (Dialect::SMB3_0_2, true, false),
        (Dialect::SMB3_0, false, true),
    ] {
        let (mut a, mut b) = two_channels(dialect, sign, encrypt);
        assert_eq!(b.client.is_encrypting(), encrypt, "{dialect:?}");
        let f = create(&mut a, "both");
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        b.client.write(2, f, 0, &data).unwrap();
        b.pump().unwrap();
        assert!(
            matches!(result(&mut b, 2), Ok(Reply::Write { count }) if count as usize == data.len()),
            "{dialect:?} sign={sign} encrypt={encrypt}"
        );
        a.client.read(3, f, 0, data.len() as u32).unwrap();
        a.pump().unwrap();
        assert!(matches!(result(&mut a, 3), Ok(Reply::Read { .. })));
        assert_eq!(a.payloads.remove(&3).unwrap(), data);
        b.client.read(4, f, 50_000, 10).unwrap();
        b.pump().unwrap();
        assert!(matches!(result(&mut b, 4), Ok(Reply::Read { .. })));
        assert_eq!(b.payloads.remove(&4).unwrap(), &data[50_000..50_010]);
    }
}

#[test]
fn a_2x_session_has_no_channel_binding() {
    let mut a = Pair::ready(options(Dialect::SMB2_1), SigningPolicy::IfRequired);
    assert!(a.client.channel_binding().is_none());
}

#[test]
fn after_logoff_on_the_bound_channel_the_first_sees_the_session_gone() {
    let (mut a, mut b) = two_channels(Dialect::SMB3_1_1, true, false);
    let f = create(&mut a, "x");
    b.client.logoff(9).unwrap();
    b.pump().unwrap();
    assert!(matches!(result(&mut b, 9), Ok(Reply::Logoff)));
    a.client.read(5, f, 0, 1).unwrap();
    a.pump().unwrap();
    let err = result(&mut a, 5).unwrap_err();
    assert_eq!(err.status, ringshare_wire::NtStatus::USER_SESSION_DELETED);
}
