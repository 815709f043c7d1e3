//! Client certificates over QUIC, as Windows Server 2025's "client access
//! control" has them: the server may ask for a certificate (`quic client
//! certificate = no | optional | required`), checks that it chains to a CA of
//! `tls cafile`, then looks it up in a deny list and an allow list, each entry
//! naming a certificate by its SHA-256 or by its issuer's name. A deny match
//! refuses; with allow entries, only a match is admitted; with none, every
//! certificate the CAs issued is. A refusal ends the TLS handshake (alert
//! handshake_failure) with a reason the caller logs.

use std::fmt;
use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{DigitallySignedStruct, DistinguishedName, OtherError};
use sha2::{Digest, Sha256};

use crate::cert::{colon_hex, fingerprint};

/// Whether the server asks the client for a certificate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ClientCertificate {
    /// Not asked for (the default).
    #[default]
    No,
    /// Asked for; a client without one is admitted, one with a certificate
    /// is checked.
    Optional,
    /// A client without an admitted certificate is refused.
    Required,
}

impl ClientCertificate {
    pub fn parse(value: &str) -> Option<ClientCertificate> {
        match value.trim().to_ascii_lowercase().as_str() {
            "no" | "off" | "false" | "0" => Some(ClientCertificate::No),
            "optional" => Some(ClientCertificate::Optional),
            "required" | "yes" | "on" | "true" | "1" => Some(ClientCertificate::Required),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ClientCertificate::No => "no",
            ClientCertificate::Optional => "optional",
            ClientCertificate::Required => "required",
        }
    }
}

/// One entry of an allow or deny list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    /// The certificate whose DER has this SHA-256.
    Sha256([u8; 32]),
    /// Certificates issued by the CA of this name: its attributes as
    /// `TYPE=value`, upper-case type, lower-case value, sorted (the order of
    /// a name's parts and their case do not matter).
    Issuer(Vec<String>),
}

impl Rule {
    /// `sha256:HEX` (64 hex digits, colons and spaces allowed, as `openssl
    /// x509 -fingerprint -sha256` prints it) or `issuer:NAME` (`CN=Example
    /// CA, O=Example`).
    pub fn parse(entry: &str) -> Result<Rule, String> {
        let entry = entry.trim();
        let (kind, value) = entry
            .split_once(':')
            .ok_or_else(|| format!("'{entry}': expected sha256:HEX or issuer:NAME"))?;
        match kind.trim().to_ascii_lowercase().as_str() {
            "sha256" => {
                let digits: String = value
                    .chars()
                    .filter(|c| *c != ':' && !c.is_whitespace())
                    .collect();
                let bytes = hex::decode(&digits)
                    .ok()
                    .and_then(|b| <[u8; 32]>::try_from(b).ok())
                    .ok_or_else(|| format!("'{entry}': a SHA-256 is 64 hex digits"))?;
                Ok(Rule::Sha256(bytes))
            }
            "issuer" => {
                let mut parts = Vec::new();
                for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                    let (t, v) = part
                        .split_once('=')
                        .ok_or_else(|| format!("'{entry}': '{part}' is not TYPE=value"))?;
                    parts.push(name_part(&t.trim().to_ascii_uppercase(), v));
                }
                if parts.is_empty() {
                    return Err(format!("'{entry}': an issuer's name is TYPE=value, …"));
                }
                parts.sort();
                Ok(Rule::Issuer(parts))
            }
            _ => Err(format!("'{entry}': expected sha256:HEX or issuer:NAME")),
        }
    }

    fn matches(&self, sha256: &[u8; 32], issuer: Option<&[String]>) -> bool {
        match self {
            Rule::Sha256(h) => h == sha256,
            Rule::Issuer(name) => issuer == Some(name.as_slice()),
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::Sha256(h) => write!(f, "sha256:{}", colon_hex(h)),
            Rule::Issuer(name) => write!(f, "issuer:{}", name.join(", ")),
        }
    }
}

fn name_part(t: &str, v: &str) -> String {
    format!("{t}={}", v.trim().to_lowercase())
}

/// Parses a `;`-separated list of [`Rule`]s (an issuer's name has commas).
pub fn parse_rules(value: &str) -> Result<Vec<Rule>, String> {
    value
        .split(';')
        .filter(|e| !e.trim().is_empty())
        .map(Rule::parse)
        .collect()
}

/// What the server asks of client certificates.
#[derive(Debug, Clone, Default)]
pub struct Access {
    pub mode: ClientCertificate,
    /// The CAs a client certificate must chain to (`tls cafile`).
    pub roots: Vec<CertificateDer<'static>>,
    pub allow: Vec<Rule>,
    pub deny: Vec<Rule>,
}

impl Access {
    /// Whether the lists admit the certificate `der` (already found to chain
    /// to a CA); the reason when they do not.
    pub fn admits(&self, der: &[u8]) -> Result<(), String> {
        let sha: [u8; 32] = Sha256::digest(der).into();
        let issuer = issuer_name(der);
        let who = || {
            format!(
                "client certificate SHA-256 {} (issuer {})",
                colon_hex(&sha),
                issuer
                    .as_ref()
                    .map_or("unreadable".into(), |n| n.join(", "))
            )
        };
        if let Some(r) = self
            .deny
            .iter()
            .find(|r| r.matches(&sha, issuer.as_deref()))
        {
            return Err(format!(
                "{} is denied by 'quic client certificate deny' ({r})",
                who()
            ));
        }
        if !self.allow.is_empty()
            && !self
                .allow
                .iter()
                .any(|r| r.matches(&sha, issuer.as_deref()))
        {
            return Err(format!(
                "{} is not in 'quic client certificate allow'",
                who()
            ));
        }
        Ok(())
    }

    /// The rustls verifier for this policy; `None` when no certificate is asked for.
    pub(crate) fn verifier(
        self,
        provider: Arc<rustls::crypto::CryptoProvider>,
    ) -> Result<Option<Arc<dyn ClientCertVerifier>>, String> {
        if self.mode == ClientCertificate::No {
            return Ok(None);
        }
        let mut store = rustls::RootCertStore::empty();
        for c in &self.roots {
            store
                .add(c.clone())
                .map_err(|e| format!("tls cafile: a CA certificate is not usable: {e}"))?;
        }
        if store.is_empty() {
            return Err("'quic client certificate' needs the CAs of 'tls cafile'".into());
        }
        let mut b = WebPkiClientVerifier::builder_with_provider(Arc::new(store), provider);
        if self.mode == ClientCertificate::Optional {
            b = b.allow_unauthenticated();
        }
        let inner = b.build().map_err(|e| format!("client certificates: {e}"))?;
        Ok(Some(Arc::new(Verifier {
            inner,
            access: self,
        })))
    }
}

/// The chain check of rustls, then the lists.
#[derive(Debug)]
struct Verifier {
    inner: Arc<dyn ClientCertVerifier>,
    access: Access,
}

/// Why a certificate was refused: the text of the handshake's error.
#[derive(Debug)]
struct Refused(String);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

impl ClientCertVerifier for Verifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        self.inner.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        // A handshake_failure alert; the reason stays readable in the error.
        let refuse = |why: String| rustls::Error::Other(OtherError(Arc::new(Refused(why))));
        self.inner
            .verify_client_cert(end_entity, intermediates, now)
            .map_err(|e| {
                refuse(format!(
                    "client certificate SHA-256 {}: {e} (the CAs are those of 'tls cafile')",
                    fingerprint(end_entity)
                ))
            })?;
        self.access.admits(end_entity).map_err(refuse)?;
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// One DER element: (tag, contents, what follows).
fn tlv(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = b.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, &x| (acc << 8) | usize::from(x));
        (len, &rest[n..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;

/// The issuer's name of a DER certificate, as [`Rule::Issuer`] keeps names.
pub fn issuer_name(der: &[u8]) -> Option<Vec<String>> {
    let (SEQUENCE, cert, _) = tlv(der)? else {
        return None;
    };
    let (SEQUENCE, tbs, _) = tlv(cert)? else {
        return None;
    };
    // [0] version (optional), serialNumber, signature, then the issuer.
    let (tag, _, after) = tlv(tbs)?;
    let rest = if tag == 0xa0 { after } else { tbs };
    let (_, _, rest) = tlv(rest)?; // serialNumber
    let (_, _, rest) = tlv(rest)?; // signature AlgorithmIdentifier
    let (SEQUENCE, mut rdns, _) = tlv(rest)? else {
        return None;
    };
    let mut parts = Vec::new();
    while !rdns.is_empty() {
        let (SET, mut set, r) = tlv(rdns)? else {
            return None;
        };
        rdns = r;
        while !set.is_empty() {
            let (SEQUENCE, atv, r) = tlv(set)? else {
                return None;
            };
            set = r;
            let (OID, oid, r) = tlv(atv)? else {
                return None;
            };
            let (vtag, value, _) = tlv(r)?;
            let text = if vtag == 0x1e {
                // BMPString: UTF-16BE.
                let units: Vec<u16> = value
                    .chunks(2)
                    .map(|c| u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)]))
                    .collect();
                String::from_utf16_lossy(&units)
            } else {
                String::from_utf8_lossy(value).into_owned()
            };
            parts.push(name_part(&attribute_type(oid), &text));
        }
    }
    parts.sort();
    Some(parts)
}

/// The short name of an attribute type (as Windows and OpenSSL print
/// names), or `OID.` and its dotted form.
fn attribute_type(oid: &[u8]) -> String {
    let short = match oid {
        [0x55, 0x04, 0x03] => "CN",
        [0x55, 0x04, 0x06] => "C",
        [0x55, 0x04, 0x07] => "L",
        [0x55, 0x04, 0x08] => "ST",
        [0x55, 0x04, 0x0a] => "O",
        [0x55, 0x04, 0x0b] => "OU",
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19] => "DC",
        [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01] => "E",
        _ => "",
    };
    if !short.is_empty() {
        return short.into();
    }
    let mut arcs: Vec<u64> = Vec::new();
    let mut n = 0u64;
    for &b in oid {
        n = (n << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            if arcs.is_empty() {
                let first = (n / 40).min(2);
                arcs.push(first);
                arcs.push(n - 40 * first);
            } else {
                arcs.push(n);
            }
            n = 0;
        }
    }
    let dotted: Vec<String> = arcs.iter().map(u64::to_string).collect();
    format!("OID.{}", dotted.join("."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_read_a_sha256_in_openssl_form_and_an_issuer_in_any_order_and_case() {
        let hex64 = "AB".repeat(32);
        let colons: Vec<String> = (0..32).map(|_| "ab".to_string()).collect();
        assert_eq!(
            Rule::parse(&format!("sha256:{hex64}")),
            Rule::parse(&format!("SHA256: {}", colons.join(":")))
        );
        assert_eq!(
            Rule::parse("issuer:CN=Example CA, O=Example"),
            Rule::parse("issuer: o=EXAMPLE,cn=example ca")
        );
        for bad in [
            "sha256:abcd",
            "cn=x",
            "subject:CN=x",
            "issuer:",
            "issuer:CN",
        ] {
            assert!(Rule::parse(bad).is_err(), "{bad}");
        }
        let list = parse_rules(&format!("issuer:CN=A, O=B; sha256:{hex64}")).unwrap();
        assert_eq!(list.len(), 2);
    }

    #[test]
    fn the_issuer_of_a_ca_signed_certificate_is_read_from_its_der() {
        let ca_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, "Example Client CA");
        ca.distinguished_name
            .push(rcgen::DnType::OrganizationName, "Example");
        let ca = ca.self_signed(&ca_key).unwrap();
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let leaf = rcgen::CertificateParams::new(vec!["client".to_string()])
            .unwrap()
            .signed_by(&key, &ca, &ca_key)
            .unwrap();
        assert_eq!(
            issuer_name(leaf.der()),
            Some(vec!["CN=example client ca".into(), "O=example".into()])
        );
        let rule = Rule::parse("issuer:O=Example, CN=Example Client CA").unwrap();
        let access = Access {
            allow: vec![rule.clone()],
            ..Access::default()
        };
        assert_eq!(access.admits(leaf.der()), Ok(()));
        let deny = Access {
            deny: vec![rule],
            ..Access::default()
        };
        let why = deny.admits(leaf.der()).unwrap_err();
        assert!(
            why.contains("denied") && why.contains(&fingerprint(leaf.der())),
            "{why}"
        );
        assert_eq!(issuer_name(b"\x30\x03\x02\x01"), None, "truncated DER");
        assert_eq!(attribute_type(&[0x2b, 0x06, 0x01]), "OID.1.3.6.1");
    }
}
