//! The server's certificate: loaded from PEM files (`tls certfile`,
//! `tls keyfile`), or made once, self-signed, when none is configured (as
//! Samba 4.23 does), and its SHA-256 fingerprint for the log.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest, Sha256};

/// A certificate chain (leaf first) and its private key.
pub struct Identity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("certificates", &self.chain.len())
            .finish_non_exhaustive()
    }
}

impl Identity {
    /// Reads a PEM certificate chain and a PEM private key (PKCS#8, PKCS#1
    /// or SEC1).
    pub fn from_pem(cert_pem: &[u8], key_pem: &[u8]) -> Result<Identity, String> {
        let chain = certificates_from_pem(cert_pem)?;
        let key = PrivateKeyDer::from_pem_slice(key_pem)
            .map_err(|e| format!("not a PEM private key: {e}"))?;
        Ok(Identity { chain, key })
    }

    /// The SHA-256 fingerprint of the leaf certificate (what `openssl x509
    /// -fingerprint -sha256` prints, and what Windows' client access lists name).
    pub fn fingerprint(&self) -> String {
        fingerprint(&self.chain[0])
    }
}

/// The certificates of a PEM file (at least one).
pub fn certificates_from_pem(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not a PEM certificate: {e}"))?;
    if certs.is_empty() {
        return Err("no CERTIFICATE block in the file".into());
    }
    Ok(certs)
}

/// SHA-256 of a DER certificate as colon-separated upper-case hex.
pub fn fingerprint(der: &[u8]) -> String {
    colon_hex(&Sha256::digest(der))
}

/// Bytes as colon-separated upper-case hex (`7F:01:…`).
pub fn colon_hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// A new self-signed server certificate (ECDSA P-256, EKU server
/// authentication, not a CA) for `names` (each an IP address or a DNS name,
/// as subject alternative names), as PEM: (certificate, private key).
pub fn self_signed(names: &[String]) -> Result<(String, String), String> {
    let mut params = rcgen::CertificateParams::new(names.to_vec())
        .map_err(|e| format!("certificate names {names:?}: {e}"))?;
    params.is_ca = rcgen::IsCa::NoCa;
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
    if let Some(first) = names.first() {
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, first.as_str());
    }
    // Valid from yesterday (clocks differ) for ten years.
    let now = std::time::SystemTime::now();
    params.not_before = (now - std::time::Duration::from_secs(86_400)).into();
    params.not_after = (now + std::time::Duration::from_secs(10 * 365 * 86_400)).into();
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
        .map_err(|e| format!("key generation: {e}"))?;
    let cert = params
        .self_signed(&key)
        .map_err(|e| format!("self-signing: {e}"))?;
    Ok((cert.pem(), key.serialize_pem()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_signed_certificate_loads_back_and_has_a_sha256_fingerprint() {
        let (c, k) = self_signed(&["localhost".into(), "127.0.0.1".into()]).unwrap();
        let id = Identity::from_pem(c.as_bytes(), k.as_bytes()).unwrap();
        assert_eq!(id.chain.len(), 1);
        let fp = id.fingerprint();
        assert_eq!(fp.len(), 32 * 3 - 1);
        assert_eq!(fp, fingerprint(&id.chain[0]));
    }

    #[test]
    fn a_file_without_a_certificate_is_refused_with_a_reason() {
        let e = Identity::from_pem(b"hello", b"world").unwrap_err();
        assert!(e.contains("CERTIFICATE"), "{e}");
        let (c, _) = self_signed(&["localhost".into()]).unwrap();
        let e = Identity::from_pem(c.as_bytes(), b"not a key").unwrap_err();
        assert!(e.contains("private key"), "{e}");
    }
}
