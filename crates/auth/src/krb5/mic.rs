//! RFC 4121 4.2.6.1 MIC tokens, for SPNEGO's mechListMIC when the server picked Kerberos although
//! the client listed another mechanism first ([MS-SPNG] 3.2.5.1, RFC 4178 5).
//!
//! A token is `04 04 | flags | FF FF FF FF FF | SND_SEQ (8 bytes, big-endian) | checksum`, the
//! checksum being the enctype's get_mic (HMAC-SHA1-96 with a key derived for the usage) over the
//! message followed by the token's first 16 bytes.
//!
//! An RC4-HMAC session key signs with RFC 4757 7.2's tokens instead (the RFC 1964 format, as MIT
//! and Heimdal do for enctype 23): [`make_rc4`], [`verify_rc4`].

use super::{checksum_suite, gss_unwrap, gss_wrap, rc4hmac, refused};
use crate::rc4::Rc4;
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

/// RFC 4757 7.2: TOK_ID 01 01, SGN_ALG 11 00 (HMAC-MD5), filler FF FF FF FF.
const RC4_HEADER: [u8; 8] = [0x01, 0x01, 0x11, 0x00, 0xff, 0xff, 0xff, 0xff];
/// The key usage ("salt") of the RC4 MIC checksum.
const RC4_USAGE_MIC: i32 = 15;

/// Who sent an RFC 4757 token: the last 4 bytes of its sequence field say it, as RFC 1964
/// 1.2.1.2 has them (RFC 4757 7.2's sample code swaps them; MIT krb5 and the tokens it made in
/// the test below follow RFC 1964).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sender {
    /// The client (`00 00 00 00`).
    Initiator,
    /// The server (`FF FF FF FF`).
    Acceptor,
}

impl Sender {
    fn direction(self) -> [u8; 4] {
        match self {
            Sender::Initiator => [0; 4],
            Sender::Acceptor => [0xff; 4],
        }
    }
}

/// SGN_CKSUM: the first 8 bytes of HMAC-MD5 (usage 15) over the header and the message.
fn rc4_checksum(key: &[u8], msg: &[u8]) -> [u8; 8] {
    let mut data = RC4_HEADER.to_vec();
    data.extend_from_slice(msg);
    let sum = rc4hmac::checksum(key, RC4_USAGE_MIC, &data);
    sum[..8].try_into().expect("8 of 16 bytes")
}

/// The key that encrypts SND_SEQ: HMAC-MD5(HMAC-MD5(key, 0 as 4 bytes), SGN_CKSUM).
fn rc4_seq_cipher(key: &[u8], checksum: &[u8; 8]) -> Rc4 {
    let k = crate::ntlm::hmac_md5(key, &[&0u32.to_le_bytes()]);
    Rc4::new(&crate::ntlm::hmac_md5(&k, &[checksum]))
}

/// An RFC 4757 MIC token over `msg` with the RC4-HMAC session key `key`, GSS-framed.
pub fn make_rc4(key: &[u8], sender: Sender, seq: u32, msg: &[u8]) -> Vec<u8> {
    let checksum = rc4_checksum(key, msg);
    let mut snd_seq = [0u8; 8];
    snd_seq[..4].copy_from_slice(&seq.to_be_bytes());
    snd_seq[4..].copy_from_slice(&sender.direction());
    rc4_seq_cipher(key, &checksum).apply(&mut snd_seq);
    let mut body = RC4_HEADER[2..].to_vec();
    body.extend(snd_seq);
    body.extend(checksum);
    gss_wrap([RC4_HEADER[0], RC4_HEADER[1]], &body)
}

/// Verify an RFC 4757 MIC token over `msg` made with `key` by `sender`; its sequence number.
pub fn verify_rc4(key: &[u8], sender: Sender, msg: &[u8], token: &[u8]) -> Result<u32, AuthError> {
    let (tok_id, body) = gss_unwrap(token).map_err(|_| AuthError::BadMic)?;
    if tok_id != [RC4_HEADER[0], RC4_HEADER[1]] || body.len() != 22 || body[..6] != RC4_HEADER[2..]
    {
        return Err(AuthError::BadMic);
    }
    let checksum = rc4_checksum(key, msg);
    if !ringshare_crypto::ct_eq(&checksum, &body[14..]) {
        return Err(AuthError::BadMic);
    }
    let mut snd_seq: [u8; 8] = body[6..14].try_into().expect("8 bytes");
    rc4_seq_cipher(key, &checksum).apply(&mut snd_seq);
    if snd_seq[4..] != sender.direction() {
        return Err(AuthError::BadMic);
    }
    Ok(u32::from_be_bytes(
        snd_seq[..4].try_into().expect("4 bytes"),
    ))
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

    /// RFC 4757 MIC tokens MIT krb5 1.20 made with an RC4-HMAC session key (both contexts of
    /// testdata/mit-1.20-rc4-ap-req.txt) verify, and are made again byte for byte.
    #[test]
    fn rc4_mics_made_by_mit_krb5_verify_and_are_made_byte_for_byte() {
        use crate::krb5::acceptor_rc4_tests::mit_capture;
        let key = crate::unhex(&mit_capture("ikey"));
        let msg = crate::unhex("300b06092a864886f712010202");
        let (imic, imic2, amic) = (
            crate::unhex(&mit_capture("imic")),
            crate::unhex(&mit_capture("imic2")),
            crate::unhex(&mit_capture("amic")),
        );
        let seq = verify_rc4(&key, Sender::Initiator, &msg, &imic).unwrap();
        assert_eq!(
            verify_rc4(&key, Sender::Initiator, &msg, &imic2),
            Ok(seq + 1)
        );
        assert_eq!(make_rc4(&key, Sender::Initiator, seq, &msg), imic);
        let aseq = verify_rc4(&key, Sender::Acceptor, &msg, &amic).unwrap();
        assert_eq!(make_rc4(&key, Sender::Acceptor, aseq, &msg), amic);
        // The other direction, another key, another message, a changed byte: refused.
        assert!(verify_rc4(&key, Sender::Acceptor, &msg, &imic).is_err());
        assert!(verify_rc4(&key, Sender::Initiator, &msg, &amic).is_err());
        assert!(verify_rc4(&[7u8; 16], Sender::Initiator, &msg, &imic).is_err());
        assert!(verify_rc4(&key, Sender::Initiator, b"other", &imic).is_err());
        // A changed byte fails, or (in the encrypted sequence number, which only RC4 protects)
        // reads as another sequence number.
        for i in 0..imic.len() {
            let mut m = imic.clone();
            m[i] ^= 0x01;
            assert_ne!(
                verify_rc4(&key, Sender::Initiator, &msg, &m),
                Ok(seq),
                "byte {i}"
            );
        }
        for n in 0..imic.len() {
            assert!(verify_rc4(&key, Sender::Initiator, &msg, &imic[..n]).is_err());
        }
    }
}
