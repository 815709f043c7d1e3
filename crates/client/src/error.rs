//! Errors: a failed request ([`SmbError`]: the NTSTATUS and the request that
//! caused it) and a failed connection ([`ClientError`]).

use std::fmt;

use ringshare_auth::AuthError;
use ringshare_wire::consts::Command;
use ringshare_wire::{NtStatus, WireError};

/// The server answered a request with an error status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmbError {
    pub status: NtStatus,
    pub command: Command,
    pub message_id: u64,
}

impl fmt::Display for SmbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} in reply to {:?} (message id {})",
            self.status, self.command, self.message_id
        )
    }
}

impl std::error::Error for SmbError {}

/// Why the connection cannot go on, or why a request could not be sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientError {
    /// A handshake request (NEGOTIATE, SESSION_SETUP, TREE_CONNECT) failed.
    Handshake(SmbError),
    /// Authentication failed on the client side (bad token, MIC mismatch).
    Auth(AuthError),
    /// A response that should be signed was not, or its signature is wrong.
    BadSignature { command: Command, message_id: u64 },
    /// An encrypted response did not decrypt.
    Decrypt,
    /// The server sent something that is not a well-formed response.
    Malformed(String),
    /// The server chose something we did not offer.
    Unsupported(String),
    /// Not enough credits for the request's charge: wait for responses.
    NoCredits { needed: u16, available: u32 },
    /// The connection is not (or no longer) ready for requests.
    NotReady,
    /// An I/O size past what the server negotiated.
    TooLarge { len: usize, max: u32 },
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Handshake(e) => write!(f, "{e}"),
            ClientError::Auth(e) => write!(f, "authentication: {e}"),
            ClientError::BadSignature {
                command,
                message_id,
            } => write!(
                f,
                "bad or missing signature on the {command:?} response (message id {message_id})"
            ),
            ClientError::Decrypt => f.write_str("an encrypted response failed to decrypt"),
            ClientError::Malformed(w) => write!(f, "malformed response: {w}"),
            ClientError::Unsupported(w) => write!(f, "unsupported: {w}"),
            ClientError::NoCredits { needed, available } => {
                write!(f, "needs {needed} credits, {available} available")
            }
            ClientError::NotReady => f.write_str("connection not ready"),
            ClientError::TooLarge { len, max } => {
                write!(f, "I/O of {len} bytes exceeds the server's maximum {max}")
            }
        }
    }
}

impl std::error::Error for ClientError {}

impl From<WireError> for ClientError {
    fn from(e: WireError) -> Self {
        ClientError::Malformed(e.to_string())
    }
}
