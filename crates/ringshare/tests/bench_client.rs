//! ringshare's own client (`ringshare bench`) against the real server binary over
//! loopback: data verified byte for byte, signed and encrypted sessions in every
//! SMB 3 dialect, credits under pipelining, and server errors reported by name.

mod common;

use common::{bench, bench_as, Server, ServerConfig, PASSWORD, SHARE, USER};

fn errors_field(json: &str) -> Option<u64> {
    let i = json.find("\"errors\"")?;
    json[i..].split([':', ',', '}']).nth(1)?.trim().parse().ok()
}

#[test]
fn written_data_reads_back_identical_with_deep_pipelining() {
    let server = Server::start(&ServerConfig::default(), |_| {});
    let (ok, out) = bench(
        &server,
        &[
            "seq-write",
            "--io-size",
            "256k",
            "--queue-depth",
            "32",
            "--file-size",
            "16m",
            "--bytes",
            "32m",
            "--verify",
            "--json",
        ],
    );
    assert!(ok, "{out}");
    assert_eq!(errors_field(&out), Some(0), "{out}");
    let (ok, out) = bench(
        &server,
        &[
            "seq-read",
            "--io-size",
            "1m",
            "--file-size",
            "16m",
            "--bytes",
            "32m",
            "--verify",
            "--json",
        ],
    );
    assert!(ok, "{out}");
    assert_eq!(errors_field(&out), Some(0), "{out}");
}

#[test]
fn signed_and_encrypted_sessions_move_verified_data_in_every_smb3_dialect() {
    let server = Server::start(&ServerConfig::default(), |_| {});
    for dialect in ["3.0", "3.0.2", "3.1.1"] {
        for protection in ["--sign", "--encrypt"] {
            let (ok, out) = bench(
                &server,
                &[
                    "rand-write",
                    "--dialect",
                    dialect,
                    protection,
                    "--io-size",
                    "64k",
                    "--file-size",
                    "4m",
                    "--bytes",
                    "8m",
                    "--verify",
                    "--json",
                ],
            );
            assert!(ok, "{dialect} {protection}: {out}");
            assert_eq!(errors_field(&out), Some(0), "{dialect} {protection}: {out}");
        }
    }
}

#[test]
fn many_connections_and_metadata_storms_see_no_errors() {
    let server = Server::start(&ServerConfig::default(), |_| {});
    let (ok, out) = bench(
        &server,
        &[
            "metadata",
            "--connections",
            "4",
            "--threads",
            "2",
            "--duration",
            "1s",
            "--json",
        ],
    );
    assert!(ok, "{out}");
    assert_eq!(errors_field(&out), Some(0), "{out}");
    let (ok, out) = bench(
        &server,
        &["echo", "--queue-depth", "64", "--duration", "1s", "--json"],
    );
    assert!(ok, "{out}");
}

#[test]
fn a_server_error_is_reported_by_name_with_the_request_and_fails_the_run() {
    let server = Server::start(&ServerConfig::default(), |_| {});
    let credentials = format!("{USER}%{PASSWORD}");
    let (ok, text) = bench_as(
        &server,
        "no-such-share",
        &credentials,
        &["echo", "--duration", "1s"],
    );
    assert!(!ok, "{text}");
    assert!(
        text.contains("BAD_NETWORK_NAME") && text.to_uppercase().contains("TREE_CONNECT"),
        "{text}"
    );
    let wrong = format!("{USER}%wrong-password");
    let (ok, text) = bench_as(&server, SHARE, &wrong, &["echo", "--duration", "1s"]);
    assert!(!ok, "{text}");
    assert!(text.contains("LOGON_FAILURE"), "{text}");
}
