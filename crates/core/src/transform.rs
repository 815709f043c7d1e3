//! SMB 3.x encryption: the TRANSFORM_HEADER ([MS-SMB2] 2.2.41, 3.1.4.3,
//! 3.3.5.2.1.1, 3.3.4.1.4).
//!
//! A request that arrives encrypted is decrypted in place with the session's
//! client-to-server key; every response to it is encrypted with the
//! server-to-client key. Each key's nonces come from a per-session counter,
//! so no nonce repeats under a key.

use ringshare_crypto::encrypt::CipherKey;
use ringshare_wire::consts::TransformFlags;
use ringshare_wire::transform::{
    split_encrypted, TransformHeader, AAD_RANGE, TRANSFORM_HEADER_LEN,
};

/// Why an encrypted frame was refused; every case closes the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TransformError {
    Malformed,
    UnknownSession,
    NoKey,
    BadFlags,
    AuthenticationFailed,
}

/// The session id a transform frame names, if the header decodes.
pub(crate) fn session_of(frame: &[u8]) -> Result<u64, TransformError> {
    split_encrypted(frame)
        .map(|(h, _, _)| h.session_id)
        .map_err(|_| TransformError::Malformed)
}

/// Decrypt a transform frame with its session's client-to-server key
/// (`None`: no such session; `Some(None)`: the session has no key); returns
/// the plaintext SMB2 message (chain).
pub(crate) fn decrypt(
    key: Option<Option<&CipherKey>>,
    mut frame: Vec<u8>,
) -> Result<Vec<u8>, TransformError> {
    let (hdr, _, _) = split_encrypted(&frame).map_err(|_| TransformError::Malformed)?;
    let key = key.ok_or(TransformError::UnknownSession)?;
    let key = key.ok_or(TransformError::NoKey)?;
    if hdr.flags != TransformFlags::ENCRYPTED {
        return Err(TransformError::BadFlags);
    }
    let mut aad = [0u8; 32];
    aad.copy_from_slice(&frame[AAD_RANGE]);
    let mut body = frame.split_off(TRANSFORM_HEADER_LEN);
    let nonce = &hdr.nonce[..key.cipher().nonce_len()];
    key.decrypt_in_place(nonce, &aad, &mut body, &hdr.signature)
        .map_err(|_| TransformError::AuthenticationFailed)?;
    Ok(body)
}

/// Encrypt a plaintext SMB2 message (chain) for session `session_id` with
/// its server-to-client key and the session's next nonce `counter` (taken
/// under the session's lock; the work here runs without it): the transform
/// header followed by the ciphertext, without the transport header.
pub(crate) fn encrypt(
    key: &CipherKey,
    session_id: u64,
    counter: u64,
    mut plain: Vec<u8>,
) -> Option<Vec<u8>> {
    let mut nonce = [0u8; 16];
    nonce[..8].copy_from_slice(&counter.to_le_bytes());
    let mut hdr = TransformHeader {
        signature: [0; 16],
        nonce,
        original_message_size: u32::try_from(plain.len()).ok()?,
        flags: TransformFlags::ENCRYPTED,
        session_id,
    };
    let aad = hdr.aad();
    let tag = key
        .encrypt_in_place(&nonce[..key.cipher().nonce_len()], &aad, &mut plain)
        .ok()?;
    hdr.signature = tag;
    let mut out = Vec::with_capacity(TRANSFORM_HEADER_LEN + plain.len());
    hdr.encode(&mut out);
    out.extend_from_slice(&plain);
    Some(out)
}
