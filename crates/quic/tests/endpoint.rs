//! The server endpoint against a quinn-proto client in the same process.

use crate::common;
use common::*;

#[test]
fn the_smb_stream_carries_direct_tcp_bytes_both_ways() {
    let (mut s, root) = server_with(Limits::default());
    let mut c = Client::new(50000);
    let mut now = Instant::now();
    let i = c.connect(now, client_config(&root, ALPN));
    pump(&mut s, &mut c, &mut now);
    assert_eq!(s.counts(), (1, 0), "one connection, handshake done");
    let sid = c.conn(i).streams().open(Dir::Bi).unwrap();
    // A NEGOTIATE as the smb crate frames it: 0x00 + 24-bit length, then SMB2.
    let mut msg = vec![0, 0, 0, 8];
    msg.extend_from_slice(b"\xfeSMB@\0\0\0");
    assert_eq!(c.conn(i).send_stream(sid).write(&msg).unwrap(), msg.len());
    let events = pump(&mut s, &mut c, &mut now);
    let id = opened(&events).expect("the stream opens an SMB connection");
    assert!(events.contains(&Event::Opened {
        id,
        remote: CLIENT.parse().unwrap()
    }));
    assert_eq!(s.server_name(id).as_deref(), Some("localhost"));
    let got = server_reads(&mut s, &mut c, &mut now, id, msg.len());
    assert_eq!(got, msg);
    // The reply goes back on the same stream.
    let reply = b"\0\0\0\x04\xfeSMB";
    assert_eq!(s.write(now, id, reply), Some(reply.len()));
    pump(&mut s, &mut c, &mut now);
    let mut back = Vec::new();
    let mut r = c.conn(i).recv_stream(sid);
    let mut chunks = r.read(true).unwrap();
    while let Ok(Some(ch)) = chunks.next(usize::MAX) {
        back.extend_from_slice(&ch.bytes);
    }
    let _ = chunks.finalize();
    assert_eq!(back, reply);
    // The client closes: the server says so once.
    c.conn(i).close(now, VarInt::from_u32(0), "bye".into());
    let events = pump(&mut s, &mut c, &mut now);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Closed { id: x, .. } if *x == id)),
        "{events:?}"
    );
}

#[test]
fn eight_mib_cross_the_stream_in_order_under_flow_control() {
    let limits = Limits {
        stream_window: 256 * 1024,
        ..Limits::default()
    };
    let (mut s, root) = server_with(limits);
    let mut c = Client::new(50000);
    let mut now = Instant::now();
    let i = c.connect(now, client_config(&root, ALPN));
    pump(&mut s, &mut c, &mut now);
    let sid = c.conn(i).streams().open(Dir::Bi).unwrap();
    let data: Vec<u8> = (0..8 * 1024 * 1024u32)
        .map(|n| (n * 7 + n / 4096) as u8)
        .collect();
    let mut sent = 0;
    let mut got = Vec::new();
    let mut id = None;
    for _ in 0..100_000 {
        if sent < data.len() {
            sent += c.conn(i).send_stream(sid).write(&data[sent..]).unwrap_or(0);
        }
        let events = pump(&mut s, &mut c, &mut now);
        id = id.or(opened(&events));
        if let Some(id) = id {
            let _ = s.read(now, id, &mut got, 1 << 20);
            // The window holds the client back: never more buffered than it.
            assert!(sent - got.len() <= 256 * 1024 + 64 * 1024);
        }
        if got.len() == data.len() {
            break;
        }
    }
    assert_eq!(got.len(), data.len());
    assert!(got == data, "bytes arrive in order, unchanged");
}

#[test]
fn a_second_stream_and_any_unidirectional_stream_are_refused() {
    let (mut s, root) = server_with(Limits::default());
    let mut c = Client::new(50000);
    let mut now = Instant::now();
    let i = c.connect(now, client_config(&root, ALPN));
    pump(&mut s, &mut c, &mut now);
    let first = c.conn(i).streams().open(Dir::Bi);
    assert!(first.is_some());
    c.conn(i)
        .send_stream(first.unwrap())
        .write(b"\0\0\0\0")
        .unwrap();
    assert_eq!(
        c.conn(i).streams().open(Dir::Bi),
        None,
        "only one bidirectional stream"
    );
    assert_eq!(
        c.conn(i).streams().open(Dir::Uni),
        None,
        "no unidirectional stream"
    );
    let events = pump(&mut s, &mut c, &mut now);
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Event::Opened { .. }))
            .count(),
        1
    );
}

#[test]
fn a_client_asking_for_another_alpn_is_refused_and_the_server_serves_on() {
    let (mut s, root) = server_with(Limits::default());
    let mut c = Client::new(50000);
    let mut now = Instant::now();
    let bad = c.connect(now, client_config(&root, b"h3"));
    let events = pump(&mut s, &mut c, &mut now);
    assert!(opened(&events).is_none());
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Refused { remote, .. } if *remote == c.addr)),
        "the refusal is reported for the log: {events:?}"
    );
    assert!(c.conn(bad).is_closed(), "the handshake failed");
    assert_eq!(s.counts().1, 0, "no handshake left counted");
    let good = c.connect(now, client_config(&root, ALPN));
    pump(&mut s, &mut c, &mut now);
    let sid = c.conn(good).streams().open(Dir::Bi).unwrap();
    c.conn(good).send_stream(sid).write(b"\0\0\0\0").unwrap();
    assert!(opened(&pump(&mut s, &mut c, &mut now)).is_some());
}

#[test]
fn garbage_and_truncated_datagrams_are_dropped_and_the_server_serves_on() {
    let (mut s, root) = server_with(Limits::default());
    let mut c = Client::new(50000);
    let mut now = Instant::now();
    let from: SocketAddr = "127.0.0.1:40000".parse().unwrap();
    let mut x: u32 = 12345;
    for len in [0usize, 1, 5, 20, 1200, 1500, 65_000] {
        let junk: Vec<u8> = (0..len)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                (x >> 16) as u8
            })
            .collect();
        s.handle(now, from, None, &junk);
        // A long-header-looking start.
        let mut long = junk.clone();
        if let Some(b) = long.first_mut() {
            *b = 0xc3;
        }
        s.handle(now, from, None, &long);
    }
    // A real client's first datagram, cut short at every length.
    let mut probe = Client::new(50001);
    probe.connect(now, client_config(&root, ALPN));
    let first = probe.outgoing(now).remove(0);
    for cut in (0..first.len()).step_by(37) {
        s.handle(now, probe.addr, None, &first[..cut]);
    }
    let mut buf = Vec::new();
    while s.poll_transmit(now, 10, &mut buf).is_some() {}
    assert_eq!(s.counts(), (0, 0), "nothing half-open kept from garbage");
    let i = c.connect(now, client_config(&root, ALPN));
    pump(&mut s, &mut c, &mut now);
    let sid = c.conn(i).streams().open(Dir::Bi).unwrap();
    c.conn(i).send_stream(sid).write(b"\0\0\0\0").unwrap();
    assert!(opened(&pump(&mut s, &mut c, &mut now)).is_some());
}

#[test]
fn handshakes_past_the_limit_are_refused_and_the_count_stays_bounded() {
    let limits = Limits {
        handshakes_max: 4,
        ..Limits::default()
    };
    let (mut s, root) = server_with(limits);
    let now = Instant::now();
    // Twenty clients send their Initial (and answer a Retry), then never
    // finish their handshake.
    let mut clients = Vec::new();
    let mut buf = Vec::new();
    for port in 0..20 {
        let mut c = Client::new(51000 + port);
        c.connect(now, client_config(&root, ALPN));
        for _round in 0..2 {
            let before = s.counts().1;
            let out = c.outgoing(now);
            if out.is_empty() {
                break;
            }
            for d in out {
                s.handle(now, c.addr, None, &d);
            }
            let half_open = s.counts().1 > before;
            let mut answered = false;
            while let Some(t) = s.poll_transmit(now, 10, &mut buf) {
                assert_eq!(t.destination, c.addr);
                answered = true;
                let seg = t.segment_size.unwrap_or(t.size);
                // A half-open client hears nothing more (it never finishes).
                for d in buf[..t.size].chunks(seg).filter(|_| !half_open) {
                    c.incoming(now, d);
                }
            }
            assert!(answered, "every client gets an answer");
            assert!(s.counts().1 <= 4, "{:?}", s.counts());
            if half_open {
                break;
            }
        }
        clients.push(c);
    }
    // Two came in at once; past half the limit a client had to show its
    // address with a Retry first; past the limit the rest were refused.
    assert_eq!(s.counts(), (4, 4));
    let refused = clients
        .iter_mut()
        .filter_map(|c| c.conns[0].1.poll())
        .filter(|e| matches!(e, QEvent::ConnectionLost { .. }))
        .count();
    assert_eq!(
        refused, 16,
        "the other sixteen were told CONNECTION_REFUSED"
    );
    // The half-open ones time out (the idle timeout) and are forgotten.
    let mut t = now;
    for _ in 0..30 {
        t += Duration::from_secs(10);
        s.handle_timeout(t);
        while s.poll_transmit(t, 10, &mut buf).is_some() {}
    }
    assert_eq!(s.counts(), (0, 0));
}
