//! `interfaces` / `bind interfaces only` decide where `serve` listens.

use std::path::Path;

use ringshare::config;
use ringshare::serve::listen_addrs;

fn cfg(text: &str) -> config::Config {
    let dir = std::env::temp_dir();
    let full = format!("{text}\n[s]\npath = {}\n", dir.display());
    config::parse_str(&full, Path::new("test.conf")).expect("valid config")
}

#[test]
fn without_bind_interfaces_only_the_listen_addresses_are_used() {
    let c = cfg("[global]\nlisten = 127.0.0.1:4455\ninterfaces = lo");
    assert_eq!(
        listen_addrs(&c).unwrap(),
        ["127.0.0.1:4455".parse().unwrap()]
    );
}

#[test]
fn bind_interfaces_only_listens_on_the_named_interfaces_addresses_at_the_listen_port() {
    let c = cfg("[global]\nlisten = 0.0.0.0:4456\ninterfaces = lo\nbind interfaces only = yes");
    let addrs = listen_addrs(&c).unwrap();
    assert!(
        addrs.contains(&"127.0.0.1:4456".parse().unwrap()),
        "{addrs:?}"
    );
    assert!(
        addrs
            .iter()
            .all(|a| a.port() == 4456 && a.ip().is_loopback()),
        "{addrs:?}"
    );
}

#[test]
fn bind_interfaces_only_accepts_addresses_with_a_prefix() {
    let c = cfg(
        "[global]\nlisten = 0.0.0.0:4457\ninterfaces = 127.0.0.1/8\nbind interfaces only = yes",
    );
    assert_eq!(
        listen_addrs(&c).unwrap(),
        ["127.0.0.1:4457".parse().unwrap()]
    );
}

#[test]
fn an_unknown_interface_name_stops_start_up_with_a_clear_message() {
    let c = cfg("[global]\ninterfaces = nosuchif0\nbind interfaces only = yes");
    let e = listen_addrs(&c).unwrap_err().to_string();
    assert!(
        e.contains("nosuchif0") && e.contains("neither an address nor an interface"),
        "{e}"
    );
}
