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

#[test]
fn a_specific_listen_address_is_the_advertised_interface() {
    let list = ringshare::serve::advertised_interfaces(&["127.0.0.1:4450".parse().unwrap()]);
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0].addr.ip(), std::net::IpAddr::from([127, 0, 0, 1]));
    assert!(list[0].if_index > 0 && list[0].link_speed > 0);
}

#[test]
fn a_wildcard_listen_address_advertises_up_interfaces_and_never_link_local_ones() {
    let list = ringshare::serve::advertised_interfaces(&["0.0.0.0:445".parse().unwrap()]);
    assert!(!list.is_empty());
    assert!(list.iter().all(|i| !matches!(i.addr.ip(), std::net::IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80)));
}
