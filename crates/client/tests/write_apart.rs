//! WRITEs whose data the caller sends apart from the request
//! (`ClientConn::write_apart`), against the real server core, in process.

use crate::support;

use ringshare_client::{ClientError, Event, Reply};
use ringshare_core::SigningPolicy;
use ringshare_wire::consts::{Command, Dialect};
use ringshare_wire::FileId;
use support::{options, Pair, ALL_DIALECTS};

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(29) ^ seed)
        .collect()
}

fn read_back(p: &mut Pair, f: FileId, len: usize) -> Vec<u8> {
    p.client.read(9, f, 0, len as u32).unwrap();
    p.pump().unwrap();
    assert!(matches!(p.result(9), Ok(Reply::Read { .. })));
    p.payloads.remove(&9).unwrap()
}

#[test]
fn a_write_with_its_data_apart_goes_out_byte_for_byte_like_a_copied_write() {
    for d in ALL_DIALECTS {
        let len = if d == Dialect::SMB2_0_2 {
            65536
        } else {
            200_000
        };
        let data = pattern(len, 3);
        let mut copied = Pair::ready(options(d), SigningPolicy::IfRequired);
        let mut apart = Pair::ready(options(d), SigningPolicy::IfRequired);
        let fc = copied.open("a.bin");
        let fa = apart.open("a.bin");
        assert_eq!(fc, fa, "both servers hand out the same id");
        assert!(apart.client.can_write_apart(), "{d:?}");
        copied.client.write(2, fc, 0, &data).unwrap();
        apart.write_apart(2, fa, 0, &data).unwrap();
        copied.pump().unwrap();
        apart.pump().unwrap();
        assert_eq!(copied.sent.last(), apart.sent.last(), "{d:?}");
        assert_eq!(apart.result(2), Ok(Reply::Write { count: len as u32 }));
        assert_eq!(read_back(&mut apart, fa, len), data, "{d:?}");
    }
}

#[test]
fn writes_apart_between_other_requests_keep_the_stream_in_order() {
    let mut p = Pair::ready(options(Dialect::SMB3_1_1), SigningPolicy::IfRequired);
    let f = p.open("b.bin");
    let d1 = pattern(70_000, 1);
    let d2 = pattern(50_000, 2);
    p.write_apart(2, f, 0, &d1).unwrap();
    p.client.echo(3).unwrap();
    p.write_apart(4, f, d1.len() as u64, &d2).unwrap();
    p.client.flush(5, f).unwrap();
    p.pump().unwrap();
    let gaps = p.gaps_seen.clone();
    assert_eq!(gaps.len(), 2);
    assert_eq!((gaps[0].tag, gaps[0].len), (2, d1.len()));
    assert_eq!((gaps[1].tag, gaps[1].len), (4, d2.len()));
    assert!(gaps[0].at < gaps[1].at, "in stream order");
    let sent: Vec<u16> = p.sent[p.sent.len() - 4..]
        .iter()
        .map(|f| u16::from_le_bytes([f[12], f[13]]))
        .collect();
    let order = [
        Command::WRITE,
        Command::ECHO,
        Command::WRITE,
        Command::FLUSH,
    ];
    assert_eq!(sent, order.map(|c| c.0), "the server got them in order");
    let events = p.take_events();
    let mut done: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::Done {
                tag,
                command,
                result: Ok(_),
            } => Some((*tag, *command)),
            _ => None,
        })
        .collect();
    done.sort();
    assert_eq!(
        done,
        [
            (2, Command::WRITE),
            (3, Command::ECHO),
            (4, Command::WRITE),
            (5, Command::FLUSH)
        ]
    );
    let mut both = d1.clone();
    both.extend_from_slice(&d2);
    assert_eq!(read_back(&mut p, f, both.len()), both);
}

#[test]
fn signed_and_sealed_sessions_refuse_writes_apart_and_queue_nothing() {
    let mut signed = options(Dialect::SMB3_1_1);
    signed.sign = true;
    let mut sealed = options(Dialect::SMB3_1_1);
    sealed.encrypt = true;
    for opts in [signed, sealed] {
        let mut p = Pair::ready(opts, SigningPolicy::IfRequired);
        let f = p.open("c.bin");
        assert!(!p.client.can_write_apart());
        let credits = p.client.credits_available();
        let r = p.client.write_apart(2, f, 0, 4096);
        assert!(matches!(r, Err(ClientError::Unsupported(_))), "{r:?}");
        assert!(!p.client.has_output());
        assert_eq!(p.client.credits_available(), credits);
        assert_eq!(p.client.requests_in_flight(), 0);
    }
}

#[test]
fn take_output_hands_over_nothing_while_data_apart_is_queued() {
    let mut p = Pair::ready(options(Dialect::SMB3_0_2), SigningPolicy::IfRequired);
    let f = p.open("d.bin");
    p.client.write_apart(2, f, 0, 1000).unwrap();
    let mut buf = vec![1, 2, 3];
    assert!(!p.client.take_output(&mut buf));
    assert!(buf.is_empty());
    assert!(p.client.has_output());
    let mut gaps = Vec::new();
    p.client.take_output_with_gaps(&mut buf, &mut gaps);
    assert_eq!(gaps.len(), 1);
    assert_eq!((gaps[0].at, gaps[0].len, gaps[0].tag), (buf.len(), 1000, 2));
    // The frame header counts the data that follows the WRITE header.
    let frame = u32::from_be_bytes([0, buf[1], buf[2], buf[3]]) as usize;
    assert_eq!(frame, buf.len() - 4 + 1000);
    assert!(!p.client.has_output());
}

#[test]
fn a_write_apart_longer_than_max_write_is_refused() {
    let mut p = Pair::ready(options(Dialect::SMB2_0_2), SigningPolicy::IfRequired);
    let f = p.open("e.bin");
    let max = p.client.max_write_size() as usize;
    assert_eq!(
        p.client.write_apart(2, f, 0, max + 1),
        Err(ClientError::TooLarge {
            len: max + 1,
            max: max as u32
        })
    );
    assert!(!p.client.has_output());
}
