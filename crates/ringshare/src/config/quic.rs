//! `server smb transports` in Samba 4.23's words, and what SMB over QUIC
//! needs around it (`tls certfile`, `tls keyfile`, `tls cafile`).

/// The UDP port QUIC listens on when `quic` is named without one (Samba's
/// and Windows' default).
pub const QUIC_DEFAULT_PORT: u16 = 443;

/// Parses `server smb transports`: a list of `tcp`, `nbt`, `quic` and
/// `quic:PORT`. As in Samba, items with a `+` or `-` in front change the
/// default list (`tcp, nbt`), and a list without them replaces it. Returns
/// QUIC's UDP port, when QUIC is on. ringshare always serves TCP (where
/// `listen` says) and has no NetBIOS session service, so `nbt` is accepted
/// and means nothing, and a list without `tcp` is refused.
pub fn parse_transports(value: &str) -> Result<Option<u16>, String> {
    let items: Vec<&str> = value
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .collect();
    if items.is_empty() {
        return Err("'server smb transports' needs at least tcp".into());
    }
    let modifies = items.iter().all(|i| i.starts_with(['+', '-']));
    let (mut tcp, mut quic) = (modifies, None);
    for item in items {
        let (on, name) = match item.as_bytes()[0] {
            b'+' => (true, &item[1..]),
            b'-' => (false, &item[1..]),
            _ if modifies => unreachable!("every item has a sign"),
            _ => (true, item),
        };
        let lower = name.to_ascii_lowercase();
        let (kind, port) = match lower.split_once(':') {
            Some((k, p)) => (k, Some(p)),
            None => (lower.as_str(), None),
        };
        match (kind, port) {
            ("tcp", None) => tcp = on,
            ("nbt", None) => {}
            ("quic", p) => {
                quic = match (on, p) {
                    (false, _) => None,
                    (true, None) => Some(QUIC_DEFAULT_PORT),
                    (true, Some(p)) => Some(match p.parse::<u16>() {
                        Ok(n) if n > 0 => n,
                        _ => return Err(format!("'{item}': the port must be 1 to 65535")),
                    }),
                };
            }
            ("tcp" | "nbt", Some(_)) => {
                return Err(format!(
                    "'{item}': ringshare's TCP port is set with `listen`, not here"
                ))
            }
            _ => {
                return Err(format!(
                    "'{item}' is not a transport: expected tcp, nbt, quic or quic:PORT"
                ))
            }
        }
    }
    if !tcp {
        return Err(
            "ringshare always serves TCP (where `listen` says): keep tcp in the list".into(),
        );
    }
    Ok(quic)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_smb_transports_reads_samba_423s_forms() {
        assert_eq!(parse_transports("tcp"), Ok(None));
        assert_eq!(parse_transports("tcp, nbt"), Ok(None));
        assert_eq!(parse_transports("tcp, quic"), Ok(Some(443)));
        assert_eq!(parse_transports("tcp quic:4443"), Ok(Some(4443)));
        assert_eq!(parse_transports("+quic"), Ok(Some(443)));
        assert_eq!(parse_transports("+quic:1443, -nbt"), Ok(Some(1443)));
        assert_eq!(parse_transports("+QUIC"), Ok(Some(443)));
        assert_eq!(parse_transports("tcp, quic, -quic"), Ok(None));
    }

    #[test]
    fn server_smb_transports_refuses_what_it_cannot_do_with_a_reason() {
        for (value, why) in [
            ("quic", "keep tcp"),
            ("-tcp", "keep tcp"),
            ("tcp, quic:0", "1 to 65535"),
            ("tcp, quic:70000", "1 to 65535"),
            ("tcp, quic:x", "1 to 65535"),
            ("tcp:1445", "listen"),
            ("tcp, udp", "not a transport"),
            ("", "at least tcp"),
        ] {
            let e = parse_transports(value).unwrap_err();
            assert!(e.contains(why), "{value}: {e}");
        }
    }
}
