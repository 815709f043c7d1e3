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

/// Decrypt a transform frame in place with its session's client-to-server
/// key (`None`: no such session; `Some(None)`: the session has no key): the
/// plaintext SMB2 message (chain) is left at `frame[TRANSFORM_HEADER_LEN..]`,
/// where the ciphertext arrived. Nothing is copied.
pub(crate) fn decrypt_in_place(
    key: Option<Option<&CipherKey>>,
    frame: &mut [u8],
) -> Result<(), TransformError> {
    let (hdr, _, _) = split_encrypted(frame).map_err(|_| TransformError::Malformed)?;
    let key = key.ok_or(TransformError::UnknownSession)?;
    let key = key.ok_or(TransformError::NoKey)?;
    if hdr.flags != TransformFlags::ENCRYPTED {
        return Err(TransformError::BadFlags);
    }
    let mut aad = [0u8; 32];
    aad.copy_from_slice(&frame[AAD_RANGE]);
    let nonce = &hdr.nonce[..key.cipher().nonce_len()];
    key.decrypt_in_place(
        nonce,
        &aad,
        &mut frame[TRANSFORM_HEADER_LEN..],
        &hdr.signature,
    )
    .map_err(|_| TransformError::AuthenticationFailed)
}

/// Seal a message in place for session `session_id` with its server-to-client
/// key and the session's next nonce `counter` (taken under the session's lock;
/// the work here runs without it). `msg` is `TRANSFORM_HEADER_LEN` bytes of room
/// followed by the plaintext SMB2 message (chain): the plaintext is encrypted
/// where it lies and the transform header written into the room. `None` when
/// `msg` has no room or is too long for the header's size field.
pub(crate) fn seal_in_place(
    key: &CipherKey,
    session_id: u64,
    counter: u64,
    msg: &mut [u8],
) -> Option<()> {
    let plain_len = msg.len().checked_sub(TRANSFORM_HEADER_LEN)?;
    let mut nonce = [0u8; 16];
    nonce[..8].copy_from_slice(&counter.to_le_bytes());
    let mut hdr = TransformHeader {
        signature: [0; 16],
        nonce,
        original_message_size: u32::try_from(plain_len).ok()?,
        flags: TransformFlags::ENCRYPTED,
        session_id,
    };
    let aad = hdr.aad();
    let (room, plain) = msg.split_at_mut(TRANSFORM_HEADER_LEN);
    hdr.signature = key
        .encrypt_in_place(&nonce[..key.cipher().nonce_len()], &aad, plain)
        .ok()?;
    room.copy_from_slice(&hdr.to_bytes());
    Some(())
}
