//! The MIT keytab file format (version 0x0502), as `ktutil`, `kadmin ktadd`, `net ads keytab
//! create` and `adcli join` write it.
//!
//! A file is the two bytes 05 02 and then records, each a big-endian signed 32-bit length and
//! that many bytes; a negative length is a hole left by a deleted entry. An entry is a principal
//! (component count, realm, components, name type), a timestamp, an 8-bit key version, a key
//! (enctype, bytes) and, when room is left, a 32-bit key version that replaces the 8-bit one.
//! Parsing is bounded: no length may run past its record, and the file and entry counts are
//! capped. Every entry is kept, so keys of earlier versions still open tickets issued before a
//! machine password changed.

use super::BeReader;
use crate::AuthError;

/// The largest keytab read.
pub const KEYTAB_SIZE_MAX: usize = 4 << 20;
/// The most entries kept.
pub const ENTRIES_MAX: usize = 4096;

/// One key of a keytab.
#[derive(Clone, PartialEq, Eq)]
pub struct KeytabEntry {
    /// The principal's components (`cifs`, `host.example.com`).
    pub components: Vec<String>,
    /// The principal's realm.
    pub realm: String,
    /// Key version number.
    pub kvno: u32,
    /// Encryption type (18 aes256-cts-hmac-sha1-96, 17 aes128, 23 rc4-hmac).
    pub enctype: i32,
    /// The key itself.
    pub key: Vec<u8>,
}

impl KeytabEntry {
    /// `comp/comp@REALM`.
    pub fn principal(&self) -> String {
        format!("{}@{}", self.components.join("/"), self.realm)
    }
}

impl std::fmt::Debug for KeytabEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "KeytabEntry({} kvno {} enctype {})",
            self.principal(),
            self.kvno,
            self.enctype
        )
    }
}

/// A parsed keytab.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Keytab {
    /// Every entry, in file order.
    pub entries: Vec<KeytabEntry>,
}

impl Keytab {
    /// A keytab of one AES-256 key (kvno 2) of `components` (`["host", "fs.rs.test"]`) in
    /// `realm`: the DCE-style tests' and the rpc_pipe fuzz harness's.
    #[doc(hidden)]
    pub fn one_aes256(components: &[&str], realm: &str, key: &[u8]) -> Keytab {
        Keytab {
            entries: vec![KeytabEntry {
                components: components.iter().map(|c| c.to_string()).collect(),
                realm: realm.into(),
                kvno: 2,
                enctype: 18,
                key: key.to_vec(),
            }],
        }
    }
}

fn bad(what: &'static str) -> AuthError {
    AuthError::Malformed(what)
}

/// A keytab's counted string: a 16-bit length, then UTF-8.
fn string(r: &mut BeReader<'_>) -> Result<String, AuthError> {
    let n = r.u16()? as usize;
    r.utf8(n, "keytab name is not UTF-8")
}

impl Keytab {
    /// Parse a keytab file's bytes.
    pub fn parse(data: &[u8]) -> Result<Keytab, AuthError> {
        if data.len() > KEYTAB_SIZE_MAX {
            return Err(bad("keytab too large"));
        }
        match data {
            [0x05, 0x02, ..] => {}
            [0x05, 0x01, ..] => return Err(AuthError::Unsupported("keytab version 0x0501")),
            _ => return Err(bad("not a keytab (no 05 02 header)")),
        }
        let mut r = BeReader::new(&data[2..], "keytab entry truncated");
        let mut entries = Vec::new();
        while !r.buf.is_empty() {
            let len = r.u32()? as i32;
            if len == 0 {
                break; // the rest of the file is unused
            }
            let size = len.unsigned_abs() as usize;
            let record = r.take(size)?;
            if len < 0 {
                continue; // a hole
            }
            if entries.len() >= ENTRIES_MAX {
                return Err(bad("keytab has too many entries"));
            }
            entries.push(Self::entry(record)?);
        }
        Ok(Keytab { entries })
    }

    fn entry(record: &[u8]) -> Result<KeytabEntry, AuthError> {
        let mut r = BeReader::new(record, "keytab entry truncated");
        let count = r.u16()? as usize;
        if count == 0 || count > 8 {
            return Err(bad("keytab principal with a bad component count"));
        }
        let realm = string(&mut r)?;
        let mut components = Vec::with_capacity(count);
        for _ in 0..count {
            components.push(string(&mut r)?);
        }
        let _name_type = r.u32()?;
        let _timestamp = r.u32()?;
        let kvno8 = r.u8()?;
        let enctype = r.u16()? as i16 as i32;
        let klen = r.u16()? as usize;
        let key = r.take(klen)?.to_vec();
        let kvno = if r.buf.len() >= 4 {
            match r.u32()? {
                0 => kvno8 as u32,
                v => v,
            }
        } else {
            kvno8 as u32
        };
        Ok(KeytabEntry {
            components,
            realm,
            kvno,
            enctype,
            key,
        })
    }

    /// Encode in the 0x0502 format (for tests and tools).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![0x05, 0x02];
        for e in &self.entries {
            let mut rec = Vec::new();
            rec.extend((e.components.len() as u16).to_be_bytes());
            let s = |v: &str, rec: &mut Vec<u8>| {
                rec.extend((v.len() as u16).to_be_bytes());
                rec.extend(v.as_bytes());
            };
            s(&e.realm, &mut rec);
            for c in &e.components {
                s(c, &mut rec);
            }
            rec.extend(1u32.to_be_bytes()); // KRB5_NT_PRINCIPAL
            rec.extend(0u32.to_be_bytes());
            rec.push(e.kvno as u8);
            rec.extend((e.enctype as u16).to_be_bytes());
            rec.extend((e.key.len() as u16).to_be_bytes());
            rec.extend(&e.key);
            rec.extend(e.kvno.to_be_bytes());
            out.extend((rec.len() as u32).to_be_bytes());
            out.extend(rec);
        }
        out
    }

    /// The entries whose key can open a ticket for a service of `realm` encrypted with
    /// `enctype` under key version `kvno` (any version when the ticket names none). Service
    /// names are not compared: Active Directory issues `cifs/` tickets under the `host/`
    /// keys of the computer account (its sPNMappings), and a keytab holds only the server's own
    /// principals, so every one of them is ours (MIT's acceptor behaves the same way).
    pub fn keys_for(&self, realm: &str, enctype: i32, kvno: Option<u32>) -> Vec<&KeytabEntry> {
        self.entries
            .iter()
            .filter(|e| {
                e.enctype == enctype
                    && e.realm.eq_ignore_ascii_case(realm)
                    && kvno.is_none_or(|v| v == e.kvno || (v & 0xff) == e.kvno)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Keytab {
        Keytab {
            entries: vec![
                KeytabEntry {
                    components: vec!["cifs".into(), "fs.rs.test".into()],
                    realm: "RS.TEST".into(),
                    kvno: 2,
                    enctype: 18,
                    key: vec![7; 32],
                },
                KeytabEntry {
                    components: vec!["host".into(), "fs".into()],
                    realm: "RS.TEST".into(),
                    kvno: 300,
                    enctype: 17,
                    key: vec![9; 16],
                },
            ],
        }
    }

    #[test]
    fn a_keytab_round_trips_with_every_entry_and_its_32_bit_kvno() {
        let k = sample();
        let back = Keytab::parse(&k.encode()).unwrap();
        assert_eq!(back, k);
        assert_eq!(back.entries[1].kvno, 300);
        assert_eq!(back.entries[0].principal(), "cifs/fs.rs.test@RS.TEST");
    }

    #[test]
    fn holes_left_by_deleted_entries_are_skipped() {
        let k = sample();
        let enc = k.encode();
        let mut with_hole = enc[..2].to_vec();
        with_hole.extend((-5i32).to_be_bytes());
        with_hole.extend([0; 5]);
        with_hole.extend(&enc[2..]);
        assert_eq!(Keytab::parse(&with_hole).unwrap(), k);
    }

    #[test]
    fn keys_are_chosen_by_enctype_realm_and_kvno_whatever_the_service_name() {
        let k = sample();
        assert_eq!(k.keys_for("rs.test", 18, Some(2)).len(), 1);
        assert_eq!(k.keys_for("RS.TEST", 18, Some(3)).len(), 0);
        assert_eq!(k.keys_for("RS.TEST", 18, None).len(), 1);
        assert_eq!(k.keys_for("OTHER", 18, Some(2)).len(), 0);
        assert_eq!(k.keys_for("RS.TEST", 17, Some(300)).len(), 1);
        // A keytab entry that kept only 8 bits of its kvno still matches the ticket's.
        let mut old = sample();
        old.entries[1].kvno = 300 & 0xff;
        assert_eq!(old.keys_for("RS.TEST", 17, Some(300)).len(), 1);
    }

    #[test]
    fn truncated_or_corrupt_keytabs_are_refused_without_panicking() {
        let enc = sample().encode();
        for n in 3..enc.len() {
            let _ = Keytab::parse(&enc[..n]);
        }
        assert!(Keytab::parse(&enc[..enc.len() - 1]).is_err());
        assert!(Keytab::parse(b"\x05\x01").is_err());
        assert!(Keytab::parse(b"garbage").is_err());
        for i in 2..enc.len() {
            for x in [0u8, 0x7f, 0x80, 0xff] {
                let mut m = enc.clone();
                m[i] = x;
                let _ = Keytab::parse(&m);
            }
        }
    }
}
