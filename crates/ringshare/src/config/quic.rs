//! `server smb transports` in Samba 4.23's words, and what SMB over QUIC
//! needs around it (`tls certfile`, `tls keyfile`, `tls cafile`, `server smb
//! encryption over quic`, `quic client certificate` and its lists).

use ringshare_quic::access::{parse_rules, Rule};
use ringshare_quic::ClientCertificate;

/// QUIC's options besides the transports and the `tls` files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QuicOptions {
    /// `server smb encryption over quic` (Samba 4.23's words): SMB
    /// encryption is asked for inside QUIC too. Default no here (Windows'
    /// default; Samba's is yes): a client offering to trust the transport
    /// (SMB2_TRANSPORT_CAPABILITIES) is not asked to encrypt twice.
    pub smb_encryption_over_quic: bool,
    /// `quic client certificate = no | optional | required` (ringshare
    /// extension, Windows Server 2025's client access control).
    pub client_certificate: ClientCertificate,
    /// `quic client certificate allow` / `deny`: `sha256:HEX` and
    /// `issuer:NAME` entries separated by `;`.
    pub allow: Vec<Rule>,
    pub deny: Vec<Rule>,
}

/// Which of [`QuicOptions`] a key sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuicOpt {
    EncryptionOverQuic,
    ClientCertificate,
    Allow,
    Deny,
}

impl QuicOpt {
    pub fn classify(key: &str) -> Option<QuicOpt> {
        Some(match key {
            "server smb encryption over quic" => QuicOpt::EncryptionOverQuic,
            "quic client certificate" => QuicOpt::ClientCertificate,
            "quic client certificate allow" => QuicOpt::Allow,
            "quic client certificate deny" => QuicOpt::Deny,
            _ => return None,
        })
    }
}

impl QuicOptions {
    /// Sets option `which` from its value; the reason when it is not one.
    pub fn set(&mut self, which: QuicOpt, key: &str, value: &str) -> Result<(), String> {
        match which {
            QuicOpt::EncryptionOverQuic => {
                self.smb_encryption_over_quic = super::parse_bool(value)
                    .ok_or_else(|| format!("'{key}' expects yes or no, got '{value}'"))?;
            }
            QuicOpt::ClientCertificate => {
                self.client_certificate = ClientCertificate::parse(value).ok_or_else(|| {
                    format!("'{key}' expects no, optional or required, got '{value}'")
                })?;
            }
            QuicOpt::Allow => {
                self.allow = parse_rules(value).map_err(|e| format!("'{key}': {e}"))?
            }
            QuicOpt::Deny => self.deny = parse_rules(value).map_err(|e| format!("'{key}': {e}"))?,
        }
        Ok(())
    }

    /// The options as `ringshare testparm` lists them.
    pub fn lines(&self) -> Vec<(&'static str, String)> {
        let list = |rules: &[Rule]| {
            rules
                .iter()
                .map(Rule::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        };
        vec![
            (
                "server smb encryption over quic",
                if self.smb_encryption_over_quic {
                    "yes"
                } else {
                    "no"
                }
                .into(),
            ),
            (
                "quic client certificate",
                self.client_certificate.name().into(),
            ),
            ("quic client certificate allow", list(&self.allow)),
            ("quic client certificate deny", list(&self.deny)),
        ]
    }
}

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
    fn quic_options_read_their_values_and_refuse_others_with_a_reason() {
        let mut o = QuicOptions::default();
        assert!(!o.smb_encryption_over_quic, "off by default, as on Windows");
        let set = |o: &mut QuicOptions, key: &str, value: &str| {
            o.set(QuicOpt::classify(key).unwrap(), key, value)
        };
        set(&mut o, "server smb encryption over quic", "yes").unwrap();
        set(&mut o, "quic client certificate", "Optional").unwrap();
        set(
            &mut o,
            "quic client certificate allow",
            "issuer:CN=Staff CA; sha256:",
        )
        .unwrap_err();
        let fp = "AB:".repeat(31) + "AB";
        set(
            &mut o,
            "quic client certificate deny",
            &format!("sha256:{fp}"),
        )
        .unwrap();
        set(
            &mut o,
            "quic client certificate allow",
            "issuer:CN=Staff CA, O=Example",
        )
        .unwrap();
        assert!(o.smb_encryption_over_quic);
        assert_eq!(o.client_certificate, ClientCertificate::Optional);
        assert_eq!((o.allow.len(), o.deny.len()), (1, 1));
        let e = set(&mut o, "quic client certificate", "maybe").unwrap_err();
        assert!(e.contains("optional"), "{e}");
        let e = set(&mut o, "quic client certificate deny", "sha1:00").unwrap_err();
        assert!(e.contains("sha256:HEX"), "{e}");
        assert_eq!(QuicOpt::classify("quic client certificates"), None);
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
