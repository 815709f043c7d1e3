//! Per-PDU protection of a DCE/RPC association authenticated with DCE-style Kerberos
//! ([MS-RPCE] 3.3.1.5.2.2, [MS-KILE] 3.4.5.4-3.4.5.5, RFC 4121 4.2.6): at packet integrity a
//! MIC token ([`super::mic`]) over what is signed; at privacy a Wrap token whose encrypted
//! payload (the stub and its padding) stays in place in the PDU.
//!
//! A DCE-style Wrap token is the token's header, the rest "rotated" so that everything but the
//! payload comes first: `header(16) | E(filler | header copy) | checksum(12) | E(confounder)`,
//! its RRC field 28 (the header copy and the checksum) while the rotation also moves the EC
//! filler bytes ([MS-KILE] 3.4.5.4.1: "rotated by RRC+EC bytes"). The ciphertext is AES-CTS over
//! `confounder | payload | filler | header copy`; the checksum (HMAC-SHA1-96 with Ki) covers the
//! confounder, the bytes signed only (the PDU's header before the payload and its sec_trailer
//! after, when header signing was negotiated), the payload, the filler and the header copy, in
//! that order.
//!
//! RC4-HMAC session keys are not served here (the caller refuses them at the bind).

use picky_krb::crypto::CipherSuite;

use super::mic;
use crate::AuthError;

/// One side's key usages (RFC 4121 2) and the flag its tokens carry.
#[derive(Clone, Copy)]
struct Side {
    seal: i32,
    sign: i32,
    sent_by: u8,
}

const ACCEPTOR: Side = Side {
    seal: 22,
    sign: mic::USAGE_ACCEPTOR_SIGN,
    sent_by: mic::FLAG_SENT_BY_ACCEPTOR,
};
const INITIATOR: Side = Side {
    seal: 24,
    sign: mic::USAGE_INITIATOR_SIGN,
    sent_by: 0,
};

const TOK_WRAP: [u8; 2] = [0x05, 0x04];
const FLAG_SEALED: u8 = 0x02;
/// The header's length; also the confounder's and the header copy's.
const HDR: usize = 16;
/// HMAC-SHA1-96.
const CHECKSUM: usize = 12;
/// The filler (EC) this acceptor puts in its tokens: one AES block, as Windows, MIT and Heimdal
/// do in DCE style.
const EC: usize = 16;
/// RRC: the header copy and the checksum.
const RRC: usize = HDR + CHECKSUM;
/// A MIC token's length (RFC 4121, AES).
pub const MIC_LEN: usize = 28;
/// A Wrap token's length as this acceptor makes them.
pub const WRAP_LEN: usize = HDR + EC + RRC + HDR;

/// The keys and sequence numbers of one association.
pub struct DceSecurity {
    /// The acceptor subkey (the GSS session key).
    key: Vec<u8>,
    etype: i32,
    /// The initiator's own key, for tokens whose flags say they were not made with ours.
    initiator_key: (Vec<u8>, i32),
    /// The next sequence number of our tokens, and of the client's.
    send_seq: u64,
    recv_seq: u64,
    /// Who we are, and who the peer is (the acceptor and the client but in tests).
    me: Side,
    peer: Side,
}

impl std::fmt::Debug for DceSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DceSecurity")
            .field("etype", &self.etype)
            .finish_non_exhaustive()
    }
}

/// The AES cipher of an encryption type.
fn suite(etype: i32) -> Result<CipherSuite, AuthError> {
    match super::cipher(i64::from(etype))? {
        super::Cipher::Aes(s) => Ok(s),
        super::Cipher::Rc4 => Err(super::refused(
            "RC4-HMAC session keys are not served for DCE/RPC (AES only)",
        )),
    }
}

fn bad(why: &str) -> AuthError {
    super::refused(format!("a DCE/RPC Kerberos token: {why}"))
}

impl DceSecurity {
    /// The protection of an association accepted as `acc` says (AES only).
    pub fn new(acc: &super::acceptor::Accepted) -> Result<DceSecurity, AuthError> {
        suite(acc.key_etype)?;
        Ok(DceSecurity {
            key: acc.session_key.clone(),
            etype: acc.key_etype,
            initiator_key: acc.initiator_key.clone(),
            send_seq: u64::from(acc.seq),
            recv_seq: u64::from(acc.initiator_seq.unwrap_or(0)),
            me: ACCEPTOR,
            peer: INITIATOR,
        })
    }

    /// The client's side of an association on `key` (tests and fuzz seeds: what a client
    /// sends), its first sequence number `send_seq`, the acceptor's `recv_seq`.
    #[cfg(test)]
    pub(crate) fn initiator(key: &[u8], etype: i32, send_seq: u64, recv_seq: u64) -> Self {
        DceSecurity {
            key: key.to_vec(),
            etype,
            initiator_key: (key.to_vec(), etype),
            send_seq,
            recv_seq,
            me: INITIATOR,
            peer: ACCEPTOR,
        }
    }

    /// The key a client's token with these flags was made with.
    fn client_key(&self, flags: u8) -> Result<(&[u8], i32), AuthError> {
        if flags & mic::FLAG_SENT_BY_ACCEPTOR != self.peer.sent_by {
            return Err(bad("a token of the wrong direction"));
        }
        Ok(if flags & mic::FLAG_ACCEPTOR_SUBKEY != 0 {
            (&self.key, self.etype)
        } else {
            (&self.initiator_key.0, self.initiator_key.1)
        })
    }

    /// A client token's sequence number must be the next one.
    fn check_seq(&mut self, token: &[u8]) -> Result<(), AuthError> {
        let seq = u64::from_be_bytes(token[8..16].try_into().expect("8 bytes"));
        if seq != self.recv_seq {
            return Err(bad(&format!(
                "sequence number {seq}, {} expected (replayed or reordered)",
                self.recv_seq
            )));
        }
        self.recv_seq = self.recv_seq.wrapping_add(1) & 0xffff_ffff;
        Ok(())
    }

    fn next_send(&mut self) -> u64 {
        let s = self.send_seq;
        self.send_seq = (s + 1) & 0xffff_ffff;
        s
    }

    /// Check a client's MIC token over `msg`.
    pub fn verify_mic(&mut self, msg: &[u8], token: &[u8]) -> Result<(), AuthError> {
        let flags = mic::flags_of(token)?;
        let (key, etype) = self.client_key(flags)?;
        mic::verify(key, etype, self.peer.sign, msg, token)?;
        self.check_seq(token)
    }

    /// Our MIC token over `msg` ([`MIC_LEN`] bytes).
    pub fn make_mic(&mut self, msg: &[u8]) -> Result<Vec<u8>, AuthError> {
        let seq = self.next_send();
        let flags = self.me.sent_by | mic::FLAG_ACCEPTOR_SUBKEY;
        mic::make(&self.key, self.etype, self.me.sign, flags, seq, msg)
    }

    /// Open a client's Wrap token: `payload` (encrypted in place in the PDU) decrypted in
    /// place, once the checksum over `before`, the payload and `after` (signed only) verifies.
    pub fn unwrap(
        &mut self,
        before: &[u8],
        payload: &mut [u8],
        after: &[u8],
        token: &[u8],
    ) -> Result<(), AuthError> {
        if token.len() < HDR || token[..2] != TOK_WRAP || token[3] != 0xff {
            return Err(bad("not a Wrap token"));
        }
        let flags = token[2];
        if flags & FLAG_SEALED == 0 {
            return Err(bad("a Wrap token not sealed at packet privacy"));
        }
        let ec = usize::from(u16::from_be_bytes([token[4], token[5]]));
        let rrc = usize::from(u16::from_be_bytes([token[6], token[7]]));
        if rrc != RRC || token.len() != HDR + ec + RRC + HDR {
            return Err(bad(&format!(
                "a Wrap token of {} bytes with EC {ec} and RRC {rrc} (DCE style has RRC {RRC} \
                 and the whole trailer in the token)",
                token.len()
            )));
        }
        let (key, etype) = self.client_key(flags)?;
        let cipher = suite(etype)?.cipher();
        // Unrotated: E(confounder) | E(payload) | E(filler | header copy) | checksum.
        let tail = &token[HDR..HDR + ec + HDR];
        let checksum = &token[HDR + ec + HDR..HDR + ec + RRC];
        let mut ct = token[HDR + ec + RRC..].to_vec();
        ct.extend_from_slice(payload);
        ct.extend_from_slice(tail);
        ct.extend_from_slice(checksum);
        let d = cipher
            .decrypt_no_checksum(key, self.peer.seal, &ct)
            .map_err(|_| bad("a Wrap token that does not decrypt"))?;
        let n = payload.len();
        let (plain, rest) = d.plaintext.split_at(n);
        let copy = &rest[ec..];
        if copy[..6] != token[..6] || copy[8..] != token[8..HDR] {
            return Err(bad(
                "a Wrap token whose encrypted header differs from its header",
            ));
        }
        let signed = [&d.confounder[..], before, plain, after, rest].concat();
        let want = cipher
            .encryption_checksum(key, self.peer.seal, &signed)
            .map_err(|_| bad("checksum"))?;
        if !ringshare_crypto::ct_eq(&want, checksum) {
            return Err(bad("a Wrap token whose checksum does not verify"));
        }
        self.check_seq(token)?;
        payload.copy_from_slice(plain);
        Ok(())
    }

    /// Seal `payload` in place and give the Wrap token ([`WRAP_LEN`] bytes) whose checksum also
    /// covers `before` and `after`.
    pub fn wrap(
        &mut self,
        before: &[u8],
        payload: &mut [u8],
        after: &[u8],
    ) -> Result<Vec<u8>, AuthError> {
        let seq = self.next_send();
        let mut hdr = [0u8; HDR];
        hdr[..2].copy_from_slice(&TOK_WRAP);
        hdr[2] = self.me.sent_by | FLAG_SEALED | mic::FLAG_ACCEPTOR_SUBKEY;
        hdr[3] = 0xff;
        hdr[4..6].copy_from_slice(&(EC as u16).to_be_bytes());
        hdr[8..].copy_from_slice(&seq.to_be_bytes());
        let mut tail = vec![0xffu8; EC];
        tail.extend_from_slice(&hdr);
        let cipher = suite(self.etype)?.cipher();
        let plain = [&payload[..], &tail].concat();
        let e = cipher
            .encrypt_no_checksum(&self.key, self.me.seal, &plain)
            .map_err(|_| bad("encrypting"))?;
        let signed = [&e.confounder[..], before, payload, after, &tail].concat();
        let checksum = cipher
            .encryption_checksum(&self.key, self.me.seal, &signed)
            .map_err(|_| bad("checksum"))?;
        let n = payload.len();
        payload.copy_from_slice(&e.encrypted[HDR..HDR + n]);
        hdr[6..8].copy_from_slice(&(RRC as u16).to_be_bytes());
        let mut token = hdr.to_vec();
        token.extend_from_slice(&e.encrypted[HDR + n..]);
        token.extend_from_slice(&checksum);
        token.extend_from_slice(&e.encrypted[..HDR]);
        Ok(token)
    }
}

#[cfg(test)]
mod tests;
