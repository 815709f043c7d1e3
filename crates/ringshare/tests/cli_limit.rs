//! `ringshare limit`: the sink receives every byte the sender moves, in every mode; the plain-QUIC
//! pair moves every byte unaltered.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_ringshare");

/// The value of `key=` in a report line.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

/// Starts a listening end (`args`); returns it, its standard error and the line it announces
/// its address with.
fn start_listener(
    args: &[&str],
) -> (
    std::process::Child,
    BufReader<std::process::ChildStderr>,
    String,
) {
    let mut child = Command::new(BIN)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {args:?}: {e}"));
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut announce = String::new();
    err.read_line(&mut announce)
        .unwrap_or_else(|e| panic!("{args:?} announces its address: {e}"));
    (child, err, announce)
}

/// Runs a sink and a sender of `file` in `mode`; returns (sink line, send line).
fn run_pair(
    mode: &str,
    file: &std::path::Path,
    chunk: &str,
    nonblocking: bool,
) -> (String, String) {
    let (mut sink, _err, announce) =
        start_listener(&["limit", "sink", "--listen", "127.0.0.1:0", "--buf", "64k"]);
    let addr = announce
        .trim()
        .rsplit(' ')
        .next()
        .expect("address")
        .to_string();
    let mut send = Command::new(BIN);
    send.args(["limit", "send", "--mode", mode, "--chunk", chunk]);
    if nonblocking {
        send.arg("--nonblocking");
    }
    let send = send.arg(file).arg(&addr).output().expect("run sender");
    assert!(
        send.status.success(),
        "sender ({mode}) failed: {}",
        String::from_utf8_lossy(&send.stderr)
    );
    let status = sink.wait().expect("sink exits");
    let mut out = String::new();
    sink.stdout
        .take()
        .expect("sink stdout")
        .read_to_string(&mut out)
        .expect("sink output");
    assert!(status.success(), "sink failed in mode {mode}");
    (
        out.trim().to_string(),
        String::from_utf8_lossy(&send.stdout).trim().to_string(),
    )
}

#[test]
fn sink_receives_exactly_the_file_in_every_mode_blocking_or_not() {
    let dir = std::env::temp_dir().join(format!("rs-limit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("data");
    // Not a multiple of any chunk size, so the last call is a short one.
    let len: usize = 3 * (1 << 20) + 12_345;
    let data: Vec<u8> = (0..len).map(|i| (i * 7 + i / 4096) as u8).collect();
    std::fs::File::create(&file)
        .unwrap()
        .write_all(&data)
        .unwrap();

    for (mode, nonblocking) in [
        ("sendfile", false),
        ("splice", false),
        ("rw", false),
        ("sendfile", true),
        ("splice", true),
        ("rw", true),
    ] {
        let (sink, send) = run_pair(mode, &file, "256k", nonblocking);
        assert_eq!(field(&sink, "role"), Some("sink"), "{sink}");
        assert_eq!(field(&send, "role"), Some("send"), "{send}");
        assert_eq!(field(&send, "mode"), Some(mode), "{send}");
        assert_eq!(
            field(&sink, "bytes"),
            Some(len.to_string().as_str()),
            "{mode}: {sink}"
        );
        assert_eq!(
            field(&send, "bytes"),
            Some(len.to_string().as_str()),
            "{mode}: {send}"
        );
        for line in [&sink, &send] {
            for key in ["wall_s", "cpu_s", "gbps"] {
                let v: f64 = field(line, key)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| panic!("{key} missing in {line}"));
                assert!(v >= 0.0, "{key} negative in {line}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_plain_quic_receiver_gets_every_byte_the_sender_sends_unaltered() {
    let (mut sender, mut err, announce) =
        start_listener(&["limit", "quic-send", "--listen", "127.0.0.1:0"]);
    let mut words = announce.split_whitespace().rev();
    let trust = words.next().expect("fingerprint").to_string();
    let addr = words.next().expect("address").to_string();
    assert!(trust.starts_with("sha256:"), "{announce}");
    // 64 MiB and a piece: the sender's 1 MiB buffer wraps 64 times and ends mid-way.
    let len: u64 = (64 << 20) + 12_345;
    let recv = Command::new(BIN)
        .args(["limit", "quic-recv", "--verify", "--trust", &trust])
        .args(["--bytes", &len.to_string(), &addr])
        .output()
        .expect("run quic-recv");
    assert!(
        recv.status.success(),
        "quic-recv failed: {}",
        String::from_utf8_lossy(&recv.stderr)
    );
    let status = sender.wait().expect("quic-send exits");
    let mut out = String::new();
    sender
        .stdout
        .take()
        .expect("quic-send stdout")
        .read_to_string(&mut out)
        .expect("quic-send output");
    let mut rest = String::new();
    let _ = err.read_to_string(&mut rest);
    assert!(status.success(), "quic-send failed: {rest}");
    let recv = String::from_utf8_lossy(&recv.stdout).trim().to_string();
    for (line, role) in [(out.trim(), "quic-send"), (recv.as_str(), "quic-recv")] {
        assert_eq!(field(line, "role"), Some(role), "{line}");
        assert_eq!(
            field(line, "bytes"),
            Some(len.to_string().as_str()),
            "{line}"
        );
        let cpu: f64 = field(line, "cpu_s_per_gib")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("cpu_s_per_gib missing in {line}"));
        assert!(cpu > 0.0, "{line}");
    }
}
