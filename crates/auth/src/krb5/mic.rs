//! RFC 4121 4.2.6.1 MIC tokens, for SPNEGO's mechListMIC when the server picked Kerberos although
//! the client listed another mechanism first ([MS-SPNG] 3.2.5.1, RFC 4178 5).
//!
//! A token is `04 04 | flags | FF FF FF FF FF | SND_SEQ (8 bytes, big-endian) | checksum`, the
//! checksum being the enctype's get_mic (HMAC-SHA1-96 with a key derived for the usage) over the
//! message followed by the token's first 16 bytes.

use super::{checksum_suite, refused};
use crate::AuthError;

/// Key usages (RFC 4121 2).
pub const USAGE_ACCEPTOR_SIGN: i32 = 23;
/// The initiator's signing usage.
pub const USAGE_INITIATOR_SIGN: i32 = 25;

/// Flags: sent by the acceptor; the acceptor's subkey was used.
pub const FLAG_SENT_BY_ACCEPTOR: u8 = 0x01;
/// The key is the acceptor subkey.
pub const FLAG_ACCEPTOR_SUBKEY: u8 = 0x04;

const TOK_MIC: [u8; 2] = [0x04, 0x04];
const CHECKSUM_LEN: usize = 12;

fn header(flags: u8, seq: u64) -> [u8; 16] {
    let mut h = [0xffu8; 16];
    h[..2].copy_from_slice(&TOK_MIC);
    h[2] = flags;
    h[8..].copy_from_slice(&seq.to_be_bytes());
    h
}

fn checksum(
    key: &[u8],
    key_etype: i32,
    usage: i32,
    msg: &[u8],
    hdr: &[u8; 16],
) -> Result<Vec<u8>, AuthError> {
    let mut data = msg.to_vec();
    data.extend_from_slice(hdr);
    let mut sum = checksum_suite(key_etype)?
        .hasher()
        .checksum(key, usage, &data)
        .map_err(|e| refused(format!("MIC: {e}")))?;
    sum.truncate(CHECKSUM_LEN);
    Ok(sum)
}

/// A MIC token over `msg`.
pub fn make(
    key: &[u8],
    key_etype: i32,
    usage: i32,
    flags: u8,
    seq: u64,
    msg: &[u8],
) -> Result<Vec<u8>, AuthError> {
    let hdr = header(flags, seq);
    let mut out = hdr.to_vec();
    out.extend(checksum(key, key_etype, usage, msg, &hdr)?);
    Ok(out)
}

/// The flags of a MIC token, after checking its shape.
pub fn flags_of(token: &[u8]) -> Result<u8, AuthError> {
    if token.len() != 16 + CHECKSUM_LEN || token[..2] != TOK_MIC || token[3..8] != [0xff; 5] {
        return Err(AuthError::BadMic);
    }
    Ok(token[2])
}

/// Verify a MIC token over `msg` made with `key` for `usage` (constant-time compare).
pub fn verify(
    key: &[u8],
    key_etype: i32,
    usage: i32,
    msg: &[u8],
    token: &[u8],
) -> Result<(), AuthError> {
    flags_of(token)?;
    let hdr: [u8; 16] = token[..16].try_into().map_err(|_| AuthError::BadMic)?;
    let want = checksum(key, key_etype, usage, msg, &hdr)?;
    if !ringshare_crypto::ct_eq(&want, &token[16..]) {
        return Err(AuthError::BadMic);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mic_verifies_with_its_key_and_usage_only() {
        let key = [7u8; 32];
        let t = make(
            &key,
            18,
            USAGE_INITIATOR_SIGN,
            FLAG_ACCEPTOR_SUBKEY,
            5,
            b"mechs",
        )
        .unwrap();
        assert_eq!(t.len(), 28);
        assert_eq!(flags_of(&t).unwrap(), FLAG_ACCEPTOR_SUBKEY);
        verify(&key, 18, USAGE_INITIATOR_SIGN, b"mechs", &t).unwrap();
        assert!(verify(&key, 18, USAGE_ACCEPTOR_SIGN, b"mechs", &t).is_err());
        assert!(verify(&[8u8; 32], 18, USAGE_INITIATOR_SIGN, b"mechs", &t).is_err());
        assert!(verify(&key, 18, USAGE_INITIATOR_SIGN, b"other", &t).is_err());
        let mut flipped = t.clone();
        flipped[9] ^= 1; // the sequence number is covered too
        assert!(verify(&key, 18, USAGE_INITIATOR_SIGN, b"mechs", &flipped).is_err());
        assert!(verify(&key, 18, USAGE_INITIATOR_SIGN, b"mechs", &t[..20]).is_err());
    }

    /// MIC tokens MIT krb5 1.20 made (python3-gssapi, an initiator and an acceptor context of
    /// one AES-256 ticket; the key read with GSS_C_INQ_SSPI_SESSION_KEY) over a MechTypeList.
    #[test]
    fn mics_made_by_mit_krb5_verify_and_are_made_byte_for_byte() {
        let key = crate::unhex("24ea1eb8ea7783e02c58cb6964179c360463683522b15391bab5fae5ab2a1c32");
        let msg = crate::unhex("300b06092a864886f712010202");
        let initiator = crate::unhex("040404ffffffffff000000000ec4014759970edc581b6d040ee581d6");
        let acceptor = crate::unhex("040405ffffffffff000000003b56eb64424a59c29bd2b5e95d0d8b32");
        verify(&key, 18, USAGE_INITIATOR_SIGN, &msg, &initiator).unwrap();
        verify(&key, 18, USAGE_ACCEPTOR_SIGN, &msg, &acceptor).unwrap();
        let flags = FLAG_SENT_BY_ACCEPTOR | FLAG_ACCEPTOR_SUBKEY;
        let ours = make(&key, 18, USAGE_ACCEPTOR_SIGN, flags, 0x3b56eb64, &msg).unwrap();
        assert_eq!(ours, acceptor);
        let ours = make(
            &key,
            18,
            USAGE_INITIATOR_SIGN,
            FLAG_ACCEPTOR_SUBKEY,
            0x0ec40147,
            &msg,
        );
        assert_eq!(ours.unwrap(), initiator);
    }
}
