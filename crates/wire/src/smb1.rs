//! The SMB1 NEGOTIATE a client may open with ([MS-SMB2] 3.3.5.3.1, [MS-CIFS]
//! 2.2.4.52.1): detect it and list its dialect strings, so the server can
//! answer with an SMB2 NEGOTIATE response (dialect 0x0202 or 0x02FF).

use crate::codec::Reader;
use crate::header::SMB1_MAGIC;
use crate::WireError;

/// SMB_COM_NEGOTIATE.
pub const SMB_COM_NEGOTIATE: u8 = 0x72;
/// Dialect string meaning "SMB 2.0.2".
pub const DIALECT_SMB2_002: &[u8] = b"SMB 2.002";
/// Dialect string meaning "SMB 2.1 or later".
pub const DIALECT_SMB2_WILDCARD: &[u8] = b"SMB 2.???";

/// An SMB1 NEGOTIATE request: the dialect strings, without the 0x02 buffer
/// format byte and without the terminating NUL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Smb1Negotiate<'a> {
    pub dialects: Vec<&'a [u8]>,
}

impl<'a> Smb1Negotiate<'a> {
    /// Decode an SMB1 message that must be an SMB_COM_NEGOTIATE.
    pub fn decode(msg: &'a [u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(msg);
        if r.array::<4>()? != SMB1_MAGIC {
            return Err(WireError::Invalid("ProtocolId"));
        }
        if r.u8()? != SMB_COM_NEGOTIATE {
            return Err(WireError::Invalid("Command"));
        }
        // Status(4) Flags(1) Flags2(2) PIDHigh(2) SecurityFeatures(8)
        // Reserved(2) TID(2) PIDLow(2) UID(2) MID(2): 27 bytes.
        r.skip(27)?;
        let word_count = r.u8()?;
        r.skip(usize::from(word_count) * 2)?;
        let byte_count = usize::from(r.u16()?);
        let mut b = r.sub(byte_count)?;
        let mut dialects = Vec::new();
        while !b.is_empty() {
            if b.u8()? != 0x02 {
                return Err(WireError::Invalid("BufferFormat"));
            }
            let rest = b.rest();
            let nul = rest
                .iter()
                .position(|&c| c == 0)
                .ok_or(WireError::Invalid("DialectString"))?;
            let (name, after) = rest.split_at(nul);
            dialects.push(name);
            b = Reader::new(after.get(1..).unwrap_or(&[]));
        }
        Ok(Smb1Negotiate { dialects })
    }

    /// The client offered "SMB 2.002".
    pub fn offers_smb2_002(&self) -> bool {
        self.dialects.contains(&DIALECT_SMB2_002)
    }

    /// The client offered "SMB 2.???" (2.1 or later; answer with the 0x02FF wildcard).
    pub fn offers_smb2_wildcard(&self) -> bool {
        self.dialects.contains(&DIALECT_SMB2_WILDCARD)
    }
}

/// True when `msg` looks like an SMB1 NEGOTIATE (magic + command byte).
pub fn is_smb1_negotiate(msg: &[u8]) -> bool {
    msg.get(..4) == Some(&SMB1_MAGIC[..]) && msg.get(4) == Some(&SMB_COM_NEGOTIATE)
}

/// Build an SMB1 NEGOTIATE request offering `dialects` (for the client and tests).
pub fn encode_negotiate(dialects: &[&[u8]], out: &mut Vec<u8>) {
    out.extend_from_slice(&SMB1_MAGIC);
    out.push(SMB_COM_NEGOTIATE);
    out.extend_from_slice(&[0; 4]); // Status
    out.push(0x18); // Flags: case-insensitive, canonical paths
    out.extend_from_slice(&0xC853u16.to_le_bytes()); // Flags2: unicode, NT status, ext security...
    out.extend_from_slice(&[0; 2 + 8 + 2 + 2 + 2 + 2 + 2]);
    out.push(0); // WordCount
    let bc: usize = dialects.iter().map(|d| d.len() + 2).sum();
    out.extend_from_slice(&u16::try_from(bc).unwrap_or(u16::MAX).to_le_bytes());
    for d in dialects {
        out.push(0x02);
        out.extend_from_slice(d);
        out.push(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extracts_dialects_from_a_multi_protocol_negotiate() {
        let mut v = Vec::new();
        encode_negotiate(
            &[b"NT LM 0.12", DIALECT_SMB2_002, DIALECT_SMB2_WILDCARD],
            &mut v,
        );
        assert!(is_smb1_negotiate(&v));
        let n = Smb1Negotiate::decode(&v).unwrap();
        assert_eq!(n.dialects.len(), 3);
        assert_eq!(n.dialects[0], b"NT LM 0.12");
        assert!(n.offers_smb2_002() && n.offers_smb2_wildcard());
    }

    #[test]
    fn decodes_captured_style_bytes() {
        // Header (32 bytes) as an old client sends it, WordCount 0, two dialects.
        let mut v = vec![0xff, b'S', b'M', b'B', 0x72];
        v.extend_from_slice(&[0; 27]);
        v.push(0);
        let body = b"\x02NT LM 0.12\x00\x02SMB 2.002\x00";
        v.extend_from_slice(&(body.len() as u16).to_le_bytes());
        v.extend_from_slice(body);
        let n = Smb1Negotiate::decode(&v).unwrap();
        assert!(n.offers_smb2_002());
        assert!(!n.offers_smb2_wildcard());
    }

    #[test]
    fn rejects_missing_nul_bad_format_and_overlong_byte_count() {
        let mut v = Vec::new();
        encode_negotiate(&[DIALECT_SMB2_002], &mut v);
        let mut no_nul = v.clone();
        *no_nul.last_mut().unwrap() = b'x';
        assert!(Smb1Negotiate::decode(&no_nul).is_err());
        let mut bad_fmt = v.clone();
        bad_fmt[35] = 0x03;
        assert_eq!(
            Smb1Negotiate::decode(&bad_fmt),
            Err(WireError::Invalid("BufferFormat"))
        );
        let mut long = v.clone();
        long[33] = 0xFF;
        assert!(matches!(
            Smb1Negotiate::decode(&long),
            Err(WireError::Truncated { .. })
        ));
        assert!(Smb1Negotiate::decode(&v[..20]).is_err());
        let mut other_cmd = v.clone();
        other_cmd[4] = 0x73;
        assert!(!is_smb1_negotiate(&other_cmd));
        assert!(Smb1Negotiate::decode(&other_cmd).is_err());
    }
}
