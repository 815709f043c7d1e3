//! Connections that never log on, and idle ones, are closed; busy ones are not.

use crate::support;

use ringshare_core::{Connection, Entropy, Now, Output, SigningPolicy};
use ringshare_vfs::memory::MemShare;
use ringshare_wire::consts::CreateDisposition as D;
use support::*;

struct Zeros;
impl Entropy for Zeros {
    fn fill(&mut self, out: &mut [u8]) {
        out.fill(7);
    }
}

fn closes(conn: &mut Connection) -> bool {
    std::iter::from_fn(|| conn.poll_output()).any(|o| matches!(o, Output::Close))
}

#[test]
fn a_connection_that_never_logs_on_is_closed_after_the_handshake_timeout() {
    let mem = MemShare::new();
    let server = server(&mem, SigningPolicy::IfRequired);
    let mut conn = Connection::new(server, "silent".into(), Box::new(Zeros));
    let t0 = Now {
        mono_ms: 1_000,
        filetime: 0,
    };
    conn.accepted(t0);
    assert_eq!(conn.poll_timeout(), Some(1_000 + 30_000));
    conn.handle_timeout(Now {
        mono_ms: 30_999,
        ..t0
    });
    assert!(!closes(&mut conn), "not yet");
    conn.handle_timeout(Now {
        mono_ms: 31_000,
        ..t0
    });
    assert!(closes(&mut conn));
}

#[test]
fn a_logged_on_connection_with_nothing_open_is_closed_after_the_idle_time_but_not_with_an_open_file(
) {
    let mut c = Client::new();
    let start = c.now;
    c.conn.accepted(start);
    // Logged on: no handshake deadline, only the idle one (15 minutes here).
    assert_eq!(c.conn.poll_timeout(), Some(start.mono_ms + 15 * 60_000));
    let f = c
        .create("busy", GENERIC_READ | GENERIC_WRITE, D::CREATE, 0)
        .unwrap();
    assert_eq!(
        c.conn.poll_timeout(),
        None,
        "an open file keeps the connection"
    );
    c.now.mono_ms += 60 * 60_000;
    c.conn.handle_timeout(c.now);
    assert!(!closes(&mut c.conn));
    c.close(f);
    let idle_from = c.now.mono_ms;
    c.now.mono_ms = idle_from + 15 * 60_000 - 1;
    c.conn.handle_timeout(c.now);
    assert!(!closes(&mut c.conn), "one millisecond early");
    c.now.mono_ms = idle_from + 15 * 60_000;
    c.conn.handle_timeout(c.now);
    assert!(closes(&mut c.conn));
}

#[test]
fn a_request_before_negotiate_closes_the_connection_without_a_reply() {
    let mem = MemShare::new();
    let server = server(&mem, SigningPolicy::IfRequired);
    let mut conn = Connection::new(server, "early".into(), Box::new(Zeros));
    let mut msg = vec![0u8; 64];
    msg[..4].copy_from_slice(b"\xfeSMB");
    msg[4] = 64;
    msg[12] = 0x0D; // ECHO
    msg.extend_from_slice(&[4, 0, 0, 0]);
    conn.receive(Now::default(), msg);
    let outs: Vec<Output> = std::iter::from_fn(|| conn.poll_output()).collect();
    assert!(matches!(outs.as_slice(), [Output::Close]), "{outs:?}");
}
