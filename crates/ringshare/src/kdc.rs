//! The KDC round trips of IAKerb logons ([`ringshare_core::Kdcs`]): a client that cannot reach
//! its KDC sends its AS-REQ and TGS-REQ through the server, which sends them to a KDC of its own
//! realm and hands the reply back. Asked on the lookup threads (crates/ringshare/src/driver/
//! lookups.rs), never on an I/O thread.
//!
//! The KDCs are the `kdc =` lines of the realm in krb5.conf, read at each exchange: the files
//! `KRB5_CONFIG` names (colon-separated), else /etc/krb5.conf. A request goes over UDP when it
//! is small (as MIT's library does, up to 1,465 bytes) and again over TCP when the KDC answers
//! KRB_ERR_RESPONSE_TOO_BIG; larger ones over TCP. Each KDC gets [`ANSWER_TIMEOUT`]; the first
//! that answers wins.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::path::PathBuf;
use std::time::Duration;

use ringshare_auth::krb5::iakerb::{krb_error_code, KDC_REPLY_MAX};

/// How long one KDC may take to answer.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(3);
/// Requests up to this size go over UDP first (MIT's `udp_preference_limit`).
const UDP_LIMIT: usize = 1465;
/// KRB_ERR_RESPONSE_TOO_BIG.
const RESPONSE_TOO_BIG: i64 = 52;
/// The most KDCs of a realm tried for one request.
const KDCS_TRIED_MAX: usize = 3;

/// The realm's KDCs from krb5.conf.
pub struct Krb5ConfKdcs {
    files: Vec<PathBuf>,
}

impl Krb5ConfKdcs {
    /// The files of `KRB5_CONFIG` (else /etc/krb5.conf).
    pub fn from_env() -> Krb5ConfKdcs {
        let files = std::env::var_os("KRB5_CONFIG")
            .map(|v| std::env::split_paths(&v).collect())
            .unwrap_or_else(|| vec![PathBuf::from("/etc/krb5.conf")]);
        Krb5ConfKdcs { files }
    }

    /// The `kdc =` entries of `realm`, in the order of the files and lines.
    fn kdcs_of(&self, realm: &str) -> Vec<String> {
        let mut out = Vec::new();
        for f in &self.files {
            if let Ok(text) = std::fs::read_to_string(f) {
                out.extend(kdcs_in(&text, realm));
            }
        }
        out
    }
}

/// The `kdc =` values of `realm` in the `[realms]` section of a krb5.conf.
fn kdcs_in(text: &str, realm: &str) -> Vec<String> {
    let mut out = Vec::new();
    let (mut in_realms, mut depth, mut ours) = (false, 0usize, false);
    for line in text.lines() {
        let line = line.split(['#', ';']).next().unwrap_or("").trim();
        if line.starts_with('[') && depth == 0 {
            in_realms = line == "[realms]";
            continue;
        }
        if !in_realms {
            continue;
        }
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => (k.trim(), v.trim()),
            None => ("", line),
        };
        if value.ends_with('{') {
            depth += 1;
            if depth == 1 {
                ours = key.eq_ignore_ascii_case(realm);
            }
        } else if line == "}" {
            depth = depth.saturating_sub(1);
        } else if depth == 1 && ours && key == "kdc" && !value.is_empty() {
            out.push(value.to_string());
        }
    }
    out
}

/// `host[:port]` or `[v6]:port` with port 88 by default.
fn addresses(kdc: &str) -> Result<Vec<SocketAddr>, String> {
    let kdc = kdc
        .trim_start_matches("tcp/")
        .trim_start_matches("udp/")
        .trim();
    let with_port = if kdc.ends_with(']') || !kdc.contains(':') {
        format!("{kdc}:88")
    } else {
        kdc.to_string()
    };
    with_port
        .to_socket_addrs()
        .map(|a| a.collect())
        .map_err(|e| format!("{kdc}: {e}"))
}

fn udp(addr: SocketAddr, request: &[u8]) -> std::io::Result<Vec<u8>> {
    let local: SocketAddr = if addr.is_ipv4() {
        "0.0.0.0:0".parse().expect("an address")
    } else {
        "[::]:0".parse().expect("an address")
    };
    let s = UdpSocket::bind(local)?;
    s.set_read_timeout(Some(ANSWER_TIMEOUT))?;
    s.connect(addr)?;
    s.send(request)?;
    let mut buf = vec![0u8; KDC_REPLY_MAX];
    let n = s.recv(&mut buf)?;
    buf.truncate(n);
    Ok(buf)
}

fn tcp(addr: SocketAddr, request: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut s = TcpStream::connect_timeout(&addr, ANSWER_TIMEOUT)?;
    s.set_read_timeout(Some(ANSWER_TIMEOUT))?;
    s.set_write_timeout(Some(ANSWER_TIMEOUT))?;
    let len = u32::try_from(request.len()).map_err(std::io::Error::other)?;
    s.write_all(&[&len.to_be_bytes()[..], request].concat())?;
    let mut head = [0u8; 4];
    s.read_exact(&mut head)?;
    let n = u32::from_be_bytes(head) as usize;
    if n > KDC_REPLY_MAX {
        return Err(std::io::Error::other(format!(
            "a reply of {n} bytes (at most {KDC_REPLY_MAX} are taken)"
        )));
    }
    let mut reply = vec![0u8; n];
    s.read_exact(&mut reply)?;
    Ok(reply)
}

/// One KDC's answer: UDP first for a small request, TCP when it is too big for UDP.
fn ask(addr: SocketAddr, request: &[u8]) -> std::io::Result<Vec<u8>> {
    if request.len() <= UDP_LIMIT {
        if let Ok(reply) = udp(addr, request) {
            if krb_error_code(&reply) != Some(RESPONSE_TOO_BIG) {
                return Ok(reply);
            }
        }
    }
    tcp(addr, request)
}

impl ringshare_core::Kdcs for Krb5ConfKdcs {
    fn exchange(&self, realm: &str, request: &[u8]) -> Result<Vec<u8>, String> {
        let kdcs = self.kdcs_of(realm);
        if kdcs.is_empty() {
            let files: Vec<_> = self.files.iter().map(|f| f.display().to_string()).collect();
            return Err(format!(
                "no 'kdc =' line for realm {realm} in {}",
                files.join(", ")
            ));
        }
        let mut why = Vec::new();
        for kdc in kdcs.iter().take(KDCS_TRIED_MAX) {
            let addrs = match addresses(kdc) {
                Ok(a) => a,
                Err(e) => {
                    why.push(e);
                    continue;
                }
            };
            for addr in addrs.into_iter().take(KDCS_TRIED_MAX) {
                match ask(addr, request) {
                    Ok(reply) => return Ok(reply),
                    Err(e) => why.push(format!("{addr}: {e}")),
                }
            }
        }
        Err(format!("no KDC of {realm} answered ({})", why.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringshare_core::Kdcs;

    #[test]
    fn the_kdcs_of_a_realm_are_read_from_its_realms_section() {
        let conf = "[libdefaults]\n default_realm = RS.TEST\n kdc = not.this\n\
                    [realms]\n OTHER.TEST = {\n  kdc = other:88\n }\n RS.TEST = {\n  \
                    kdc = 127.0.0.1:7088  # the first\n  admin_server = adm\n  \
                    kdc = kdc2.rs.test\n  auth_to_local = {\n   kdc = nested\n  }\n }\n\
                    [domain_realm]\n kdc = nope\n";
        assert_eq!(
            kdcs_in(conf, "RS.TEST"),
            vec!["127.0.0.1:7088", "kdc2.rs.test"]
        );
        assert_eq!(kdcs_in(conf, "other.test"), vec!["other:88"]);
        assert!(kdcs_in(conf, "NONE.TEST").is_empty());
    }

    #[test]
    fn a_kdc_without_a_port_is_asked_on_port_88() {
        assert_eq!(
            addresses("127.0.0.1").unwrap(),
            vec!["127.0.0.1:88".parse().unwrap()]
        );
        assert_eq!(
            addresses("[::1]").unwrap(),
            vec!["[::1]:88".parse().unwrap()]
        );
        assert_eq!(
            addresses("tcp/127.0.0.1:750").unwrap(),
            vec!["127.0.0.1:750".parse().unwrap()]
        );
    }

    #[test]
    fn a_realm_without_kdcs_or_a_kdc_that_does_not_answer_is_an_error_that_says_so() {
        let dir = std::env::temp_dir().join(format!("rs-kdc-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A TCP port that refuses at once (nothing listens on it).
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let conf = dir.join("krb5.conf");
        std::fs::write(
            &conf,
            format!("[realms]\n RS.TEST = {{\n  kdc = 127.0.0.1:{port}\n }}\n"),
        )
        .unwrap();
        let k = Krb5ConfKdcs { files: vec![conf] };
        let e = k.exchange("ELSEWHERE.TEST", &[0x6a; 2000]).unwrap_err();
        assert!(
            e.contains("no 'kdc =' line for realm ELSEWHERE.TEST"),
            "{e}"
        );
        // Over TCP (a large request): refused at once.
        let e = k.exchange("RS.TEST", &[0x6a; 2000]).unwrap_err();
        assert!(e.contains("no KDC of RS.TEST answered"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
