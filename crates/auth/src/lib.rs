//! Authentication for ringshare: NTLMSSP ([MS-NLMP]), Kerberos 5 ([MS-KILE], RFC 4120/4121), SPNEGO
//! ([MS-SPNG], RFC 4178) and Samba's smbpasswd user file.
//!
//! **Invariant:** this crate knows nothing about connections, shares or open files: a logon step
//! is bytes in, bytes and a user out (below it only wire and crypto).
//!
//! Sans-I/O: challenges, client randomness and the time are parameters; only
//! [`smbpasswd::SmbPasswd::load`] and [`smbpasswd::SmbPasswd::save`] touch the filesystem.
#![forbid(unsafe_code)]

pub mod gss;
pub mod krb5;
pub mod ntlm;
mod rc4;
pub mod smbpasswd;
pub mod spnego;

use md4::{Digest, Md4};

/// Where NTLM finds account secrets.
pub trait UserLookup {
    /// NT hash (MD4 of UTF-16LE password) of an enabled account, matched case-insensitively.
    fn nt_hash(&self, user: &str) -> Option<[u8; 16]>;
    /// The Unix uid of an account, when the user database records one.
    fn uid(&self, _user: &str) -> Option<u32> {
        None
    }
    /// The accounts of the user database in its order, each with whether it is disabled (the
    /// `samr` pipe lists them); trust accounts are left out. The default lists none.
    fn accounts(&self) -> Vec<(String, bool)> {
        Vec::new()
    }
    /// A domain member's check of an NTLMv2 response by the domain (winbind asks a domain
    /// controller): None when `request.domain` is not a domain this lookup answers for (the user
    /// is then one of the local accounts); otherwise the NTLMv2 session base key when the domain
    /// accepts the response, or why it does not.
    fn domain_ntlm(&self, _request: &DomainNtlm<'_>) -> Option<Result<[u8; 16], String>> {
        None
    }
}

/// An NTLMv2 response for the domain to check ([`UserLookup::domain_ntlm`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DomainNtlm<'a> {
    pub user: &'a str,
    pub domain: &'a str,
    pub workstation: &'a str,
    /// The server challenge the response answers.
    pub challenge: &'a [u8; 8],
    pub nt_response: &'a [u8],
    pub lm_response: &'a [u8],
}

/// [`DomainNtlm`] with the message's bytes copied: what a domain member hands to the domain
/// before the exchange goes on ([`gss::ServerAuth::domain_request`]), so the check can run
/// apart from the exchange and its answer be given back with [`UserLookup::domain_ntlm`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainNtlmRequest {
    pub user: String,
    pub domain: String,
    pub workstation: String,
    pub challenge: [u8; 8],
    pub nt_response: Vec<u8>,
    pub lm_response: Vec<u8>,
}

impl DomainNtlmRequest {
    /// The borrowed form.
    pub fn as_request(&self) -> DomainNtlm<'_> {
        DomainNtlm {
            user: &self.user,
            domain: &self.domain,
            workstation: &self.workstation,
            challenge: &self.challenge,
            nt_response: &self.nt_response,
            lm_response: &self.lm_response,
        }
    }

    /// Whether `r` is this very request.
    pub fn is(&self, r: &DomainNtlm<'_>) -> bool {
        self.as_request() == *r
    }
}

/// The NT one-way function: MD4 of the UTF-16LE password ([MS-NLMP] 3.3.1).
pub fn nt_hash(password: &str) -> [u8; 16] {
    let mut h = Md4::new();
    for u in password.encode_utf16() {
        h.update(u.to_le_bytes());
    }
    h.finalize().into()
}

/// Why authentication failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthError {
    /// The token could not be decoded; the text says which part.
    Malformed(&'static str),
    /// The account does not exist or is disabled.
    NoSuchUser(String),
    /// The response did not match the account's password.
    WrongPassword(String),
    /// A well-formed request for something not implemented (NTLMv1, another mechanism, ...).
    Unsupported(&'static str),
    /// A message integrity code (NTLM MIC or SPNEGO mechListMIC) did not verify.
    BadMic,
    /// A Kerberos ticket or authenticator was refused; the text says why.
    Kerberos(String),
    /// The domain refused a domain user's NTLM response (user, why).
    Domain(String, String),
}

impl std::fmt::Display for AuthError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuthError::Malformed(what) => write!(f, "malformed authentication token: {what}"),
            AuthError::NoSuchUser(u) => write!(f, "no such user: {u}"),
            AuthError::WrongPassword(u) => write!(f, "wrong password for user {u}"),
            AuthError::Unsupported(what) => write!(f, "unsupported: {what}"),
            AuthError::BadMic => f.write_str("message integrity check failed"),
            AuthError::Kerberos(why) => write!(f, "Kerberos ticket refused: {why}"),
            AuthError::Domain(user, why) => write!(f, "the domain refused {user}: {why}"),
        }
    }
}

impl std::error::Error for AuthError {}

#[cfg(test)]
pub(crate) fn unhex(s: &str) -> Vec<u8> {
    let clean: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    hex::decode(clean).expect("test hex")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nt_hash_matches_ms_nlmp_example_password() {
        // [MS-NLMP] 4.2.1: Password "Password" gives NTOWFv1 a4f49c406510bdcab6824ee7c30fd852.
        assert_eq!(
            nt_hash("Password").to_vec(),
            unhex("a4f49c406510bdcab6824ee7c30fd852")
        );
        // Microsoft's SMB 3.1.1 key example uses "Password01!".
        assert_eq!(
            nt_hash("Password01!").to_vec(),
            unhex("7C4FE5EADA682714A036E39378362BAB")
        );
    }
}
