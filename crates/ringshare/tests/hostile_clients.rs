//! Hostile peers on the network: the server closes them and keeps serving everyone else.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{smbclient_or_skip, Server, ServerConfig};

fn connect(server: &Server) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

/// Send `bytes` and report whether the server closed the connection (read returns 0 or
/// the connection is reset) rather than answering.
fn closed_after(server: &Server, bytes: &[u8]) -> bool {
    let mut s = connect(server);
    let _ = s.write_all(bytes);
    let mut buf = [0u8; 256];
    matches!(s.read(&mut buf), Ok(0) | Err(_))
}

fn still_serves(server: &Server, step: &str) {
    server.client().dialect("SMB3_11").run("ls").expect_ok(step);
}

#[test]
fn garbage_oversized_and_truncated_frames_close_the_connection_and_the_server_keeps_serving() {
    if !smbclient_or_skip("hostile frames") {
        return;
    }
    let server = Server::start(&ServerConfig::default(), |_| {});
    // A direct-TCP header whose first byte is not zero.
    assert!(closed_after(&server, &[0x85, 0, 0, 4, 1, 2, 3, 4]));
    // 16 MiB announced before any session: far above the unauthenticated limit.
    assert!(closed_after(&server, &[0, 0xFF, 0xFF, 0xFF]));
    // A frame that is not SMB at all.
    assert!(closed_after(
        &server,
        &[0, 0, 0, 8, b'G', b'E', b'T', b' ', b'/', b' ', b'H', b'T']
    ));
    // An SMB2 header cut short.
    let mut short = vec![0, 0, 0, 20];
    short.extend_from_slice(b"\xfeSMB");
    short.extend_from_slice(&[64, 0, 0, 0]);
    short.extend_from_slice(&[0u8; 12]);
    assert!(closed_after(&server, &short));
    // A request that is not NEGOTIATE before NEGOTIATE.
    let mut early = vec![0, 0, 0, 64 + 4];
    let mut hdr = vec![0u8; 64];
    hdr[..4].copy_from_slice(b"\xfeSMB");
    hdr[4] = 64;
    hdr[12] = 0x0D; // ECHO
    early.extend_from_slice(&hdr);
    early.extend_from_slice(&[4, 0, 0, 0]);
    assert!(closed_after(&server, &early));
    still_serves(&server, "ls after hostile frames");
}

#[test]
fn hundreds_of_connections_that_never_negotiate_do_not_stop_a_real_client() {
    if !smbclient_or_skip("silent connections") {
        return;
    }
    let server = Server::start(&ServerConfig::default(), |_| {});
    let idle: Vec<TcpStream> = (0..300).map(|_| connect(&server)).collect();
    still_serves(&server, "ls with 300 silent connections open");
    // Half of them send a partial frame header and stall.
    for s in idle.iter().take(150) {
        let mut s = s;
        let _ = s.write_all(&[0, 0]);
    }
    still_serves(&server, "ls with 150 stalled senders");
    drop(idle);
    still_serves(&server, "ls after they went away");
}
