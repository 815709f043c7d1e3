//! `handshake timeout` and `deadtime`: parsed from the configuration and enforced by the
//! running server.

use std::io::Read;
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ringshare::config;

fn parse(global: &str) -> Result<config::Config, config::ConfigError> {
    let text = format!(
        "[global]\n{global}\n[s]\npath = {}\n",
        std::env::temp_dir().display()
    );
    config::parse_str(&text, Path::new("t.conf"))
}

#[test]
fn deadtime_and_handshake_timeout_have_defaults_and_parse() {
    let c = parse("").unwrap();
    assert_eq!(
        (c.global.deadtime_minutes, c.global.handshake_timeout_secs),
        (15, 30)
    );
    let c = parse("deadtime = 0\nhandshake timeout = 5").unwrap();
    assert_eq!(
        (c.global.deadtime_minutes, c.global.handshake_timeout_secs),
        (0, 5)
    );
}

#[test]
fn durable_handle_timeout_and_durable_handles_have_defaults_and_parse() {
    let c = parse("").unwrap();
    assert_eq!(c.global.durable_handle_timeout_secs, 960);
    assert!(c.shares[0].durable_handles);
    let text = format!(
        "[global]\ndurable handle timeout = 120\n[s]\npath = {}\ndurable handles = no\n",
        std::env::temp_dir().display()
    );
    let c = config::parse_str(&text, Path::new("t.conf")).unwrap();
    assert_eq!(c.global.durable_handle_timeout_secs, 120);
    assert!(!c.shares[0].durable_handles);
    assert!(!c.global.disable_lock_sequence_checking);
    let c = parse("smb2 disable lock sequence checking = yes").unwrap();
    assert!(c.global.disable_lock_sequence_checking);
    let e = parse("durable handle timeout = 0").unwrap_err();
    assert!(e.to_string().contains("1 to 3600"), "{e}");
}

#[test]
fn continuous_availability_is_off_by_default_and_set_per_share_or_in_global() {
    let c = parse("").unwrap();
    assert!(!c.shares[0].continuous_availability);
    let c = parse("continuous availability = yes").unwrap();
    assert!(c.shares[0].continuous_availability, "a [global] default");
    let text = format!(
        "[global]\n[s]\npath = {}\ncontinuous availability = yes\n",
        std::env::temp_dir().display()
    );
    let c = config::parse_str(&text, Path::new("t.conf")).unwrap();
    assert!(c.shares[0].continuous_availability);
    let e = parse("continuous availability = sometimes").unwrap_err();
    assert_eq!(e.line, 2, "{e}");
}

#[test]
fn bad_timeout_values_stop_start_up_with_the_line() {
    let e = parse("handshake timeout = 0").unwrap_err();
    assert_eq!(e.line, 2, "{e}");
    assert!(e.to_string().contains("1 to 3600"), "{e}");
    let e = parse("deadtime = soon").unwrap_err();
    assert!(e.to_string().contains("minutes"), "{e}");
}

#[test]
fn the_server_closes_a_connection_that_does_not_log_on_in_time() {
    let dir = std::env::temp_dir().join(format!("ringshare-handshake-{}", std::process::id()));
    let share = dir.join("share");
    std::fs::create_dir_all(&share).unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let conf = dir.join("smb.conf");
    std::fs::write(
        &conf,
        format!(
            "[global]\nlisten = 127.0.0.1:{port}\nsmb passwd file = {}\nhandshake timeout = 1\n[share]\npath = {}\nguest ok = yes\nmap to guest = bad user\n",
            dir.join("smbpasswd").display(),
            share.display()
        ),
    )
    .unwrap();
    let mut server = Command::new(env!("CARGO_BIN_EXE_ringshare"))
        .args(["serve", "--config"])
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut sock = loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => break s,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("server did not listen: {e}"),
        }
    };
    let t0 = Instant::now();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = [0u8; 16];
    let n = sock.read(&mut buf).unwrap_or(usize::MAX);
    let waited = t0.elapsed();
    let _ = server.kill();
    let _ = server.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(n, 0, "the server closed the silent connection");
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
}

#[test]
fn smb_encrypt_in_global_is_the_server_policy_and_a_share_may_set_its_own() {
    use ringshare::config::EncryptPolicy;
    let text = format!(
        "[global]\nserver smb encrypt = required\n[a]\npath = {0}\n[b]\npath = {0}\nsmb encrypt = desired\n",
        std::env::temp_dir().display()
    );
    let c = config::parse_str(&text, Path::new("t.conf")).unwrap();
    assert_eq!(c.global.smb_encrypt, EncryptPolicy::Required);
    assert_eq!(c.shares[0].smb_encrypt, None);
    assert_eq!(c.shares[1].smb_encrypt, Some(EncryptPolicy::Desired));
    let e =
        config::parse_str("[global]\nsmb encrypt = sometimes\n", Path::new("t.conf")).unwrap_err();
    assert!(
        e.to_string()
            .contains("off, if_required, desired or required"),
        "{e}"
    );
}
