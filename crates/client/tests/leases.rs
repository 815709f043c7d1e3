//! Leases from the client side: what a directory lease's grant and break
//! look like to a client that caches a listing under it.

use crate::support;

use ringshare_client::{Event, Reply};
use ringshare_core::SigningPolicy;
use ringshare_wire::consts::{CreateDisposition, Dialect};
use support::{options, server, Pair, GENERIC_READ_WRITE, NON_DIRECTORY};

/// FILE_LIST_DIRECTORY | FILE_READ_ATTRIBUTES | SYNCHRONIZE.
const LIST: u32 = 0x0010_0081;
const DIRECTORY: u32 = 0x1;
const RH: u32 = 3;

#[test]
fn a_directory_lease_is_granted_broken_by_a_new_file_and_acknowledged() {
    let state = server(SigningPolicy::IfRequired);
    let mut a = Pair::on(state.clone(), options(Dialect::SMB3_1_1));
    a.pump().unwrap();
    let mut b = Pair::on(state, options(Dialect::SMB3_1_1));
    b.pump().unwrap();
    a.take_events();
    b.take_events();
    b.client
        .create(1, "d", 0x0010_0081, CreateDisposition::CREATE, DIRECTORY)
        .unwrap();
    b.pump().unwrap();
    let Ok(Reply::Create { file_id: d, .. }) = b.result(1) else {
        panic!("mkdir d");
    };
    b.client.close(2, d).unwrap();
    b.pump().unwrap();
    b.take_events();

    let key = [9u8; 16];
    a.client
        .create_leased(3, "d", LIST, CreateDisposition::OPEN, DIRECTORY, (key, RH))
        .unwrap();
    a.pump().unwrap();
    let Ok(Reply::Create { lease, .. }) = a.result(3) else {
        panic!("open d leased");
    };
    assert_eq!(lease, Some(RH), "the RH lease asked for is granted");

    b.client
        .create(
            4,
            "d\\new.txt",
            GENERIC_READ_WRITE,
            CreateDisposition::CREATE,
            NON_DIRECTORY,
        )
        .unwrap();
    b.pump().unwrap();
    assert!(matches!(b.result(4), Ok(Reply::Create { lease: None, .. })));
    a.pump().unwrap();
    let breaks: Vec<Event> = a
        .take_events()
        .into_iter()
        .filter(|e| matches!(e, Event::LeaseBreak { .. }))
        .collect();
    let [Event::LeaseBreak {
        lease_key,
        new_state,
        ack_required,
    }] = breaks[..]
    else {
        panic!("one break of the directory's lease, got {breaks:?}");
    };
    assert_eq!(lease_key, key);
    assert_eq!(new_state & 1, 0, "the read caching is broken");
    if ack_required {
        a.client.lease_break_ack(5, lease_key, new_state).unwrap();
        a.pump().unwrap();
        assert_eq!(a.result(5), Ok(Reply::LeaseBreakAck));
    }
}
