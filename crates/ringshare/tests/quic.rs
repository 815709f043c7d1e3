//! SMB over QUIC with a real, independent client: the Rust `smb` crate
//! (smb-rs 0.12.1, feature `quic`, its own quinn and rustls) in the harness
//! interop/smb-rs (a cargo workspace of its own: smb needs Rust 1.89 and
//! tokio). The server makes its self-signed certificate at start; the
//! client trusts exactly that certificate (DER, a custom root), logs on with
//! NTLM, puts, lists and gets a file. Garbage and truncated datagrams sent
//! to the QUIC port before and in between change nothing, and TCP serves on.
//!
//! The harness is built by scripts/install-deps.sh --test (and on the
//! first run here otherwise; cached in target/interop-smb-rs, or
//! $INTEROP_TARGET); without it (no registry access) the test prints
//! SKIPPED.

mod common;

use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use common::*;

/// The harness binary, built now if needed (quick when it is up to date).
fn harness_or_skip() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var_os("INTEROP_TARGET")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/interop-smb-rs"));
    let started = Instant::now();
    let built = Command::new("cargo")
        .args(["build", "--release", "--quiet"])
        .current_dir(root.join("interop/smb-rs"))
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        .status()
        .is_ok_and(|s| s.success());
    let bin = target.join("release/ringshare-interop-smb-rs");
    if !built || !bin.exists() {
        eprintln!(
            "SKIPPED: SMB over QUIC interop: the smb-rs harness (interop/smb-rs) did not build \
             (no registry access?); run scripts/install-deps.sh --test"
        );
        return None;
    }
    eprintln!(
        "smb-rs harness ready in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Some(bin)
}

/// Datagrams no QUIC server should act on: empty, short, random, long
/// headers with nonsense, and a version nobody speaks.
fn send_garbage(port: u16) {
    let s = UdpSocket::bind("127.0.0.1:0").expect("udp socket");
    let mut x: u32 = 0x1234_5678;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x as u8
    };
    for len in [0usize, 1, 7, 21, 64, 1199, 1200, 1350, 1500, 9000] {
        let mut d: Vec<u8> = (0..len).map(|_| next()).collect();
        let _ = s.send_to(&d, ("127.0.0.1", port));
        if let Some(b) = d.first_mut() {
            *b = 0xc0; // a long header: Initial
        }
        if d.len() > 5 {
            d[1..5].copy_from_slice(&1u32.to_be_bytes()); // QUIC v1
        }
        let _ = s.send_to(&d, ("127.0.0.1", port));
        if d.len() > 5 {
            d[1..5].copy_from_slice(&0x0a0a_0a0au32.to_be_bytes()); // an unknown version
            let _ = s.send_to(&d, ("127.0.0.1", port));
        }
    }
}

#[test]
fn a_client_over_quic_puts_lists_and_gets_a_file_byte_identical() {
    if !smbclient_or_skip("a_client_over_quic_puts_lists_and_gets_a_file_byte_identical") {
        return;
    }
    let Some(harness) = harness_or_skip() else {
        return;
    };
    let srv = Server::start(
        &ServerConfig {
            quic: true,
            ..Default::default()
        },
        |_| {},
    );
    // The certificate the server made, as the client's only trust root (DER).
    let tls = srv.passwd_file().parent().unwrap().join("tls");
    let id = ringshare_quic::Identity::from_pem(
        &std::fs::read(tls.join("cert.pem")).expect("the server made a certificate"),
        &std::fs::read(tls.join("key.pem")).expect("and its key"),
    )
    .expect("a PEM certificate and key");
    let der = srv.scratch.join("server.der");
    std::fs::write(&der, &id.chain[0]).unwrap();
    let fp = id.fingerprint();
    assert!(
        srv.log().contains(&fp),
        "the log names the certificate's SHA-256 {fp}:\n{}",
        srv.log()
    );
    send_garbage(srv.port);
    let run = |mib: &str| {
        let started = Instant::now();
        let out = Command::new(&harness)
            .arg("--quic")
            .arg(&der)
            .arg(format!("127.0.0.1:{}", srv.port))
            .args([SHARE, USER, PASSWORD, mib])
            .output()
            .expect("run the harness");
        let text = output_text(&out);
        assert!(
            out.status.success(),
            "harness failed:\n{text}\n--- server log\n{}",
            srv.log()
        );
        eprintln!("{} ({:.1} s)", text.trim(), started.elapsed().as_secs_f64());
    };
    run("16");
    send_garbage(srv.port);
    run("1");
    // TCP serves on beside it.
    srv.client()
        .run("ls")
        .expect_contains("ls over TCP", "over-quic.bin");
}
