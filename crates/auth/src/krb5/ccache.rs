//! MIT's file credential cache (`FILE:` ccaches, format version 0x0504, big-endian), as `kinit`
//! and `kvno` write it: the service tickets a client holds, with their session keys. Read by
//! ringshare's own client to log on with Kerberos.
//!
//! Bounded like the keytab parser: no length may run past the file, and the counts are capped.

use super::BeReader;
use crate::AuthError;

/// The largest ccache read.
pub const CCACHE_SIZE_MAX: usize = 4 << 20;
/// The most credentials kept.
pub const CREDENTIALS_MAX: usize = 4096;

/// A principal: its name components and realm.
pub type Principal = (Vec<String>, String);

/// One credential: a ticket and what the client needs to use it.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    /// The client's principal components and realm.
    pub client: Principal,
    /// The service's principal components and realm.
    pub server: Principal,
    /// The ticket's session key and its enctype.
    pub key: (i32, Vec<u8>),
    /// Auth, start and end time (Unix seconds).
    pub times: (i64, i64, i64),
    /// The ticket, DER (`Ticket ::= [APPLICATION 1] ...`).
    pub ticket: Vec<u8>,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Credential({}@{} for {}@{}, enctype {}, ends {})",
            self.client.0.join("/"),
            self.client.1,
            self.server.0.join("/"),
            self.server.1,
            self.key.0,
            self.times.2
        )
    }
}

fn bad(what: &'static str) -> AuthError {
    AuthError::Malformed(what)
}

/// The ccache's counted data (32-bit lengths), principals and lists.
impl<'a> BeReader<'a> {
    fn ccache_data(&mut self) -> Result<&'a [u8], AuthError> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn ccache_string(&mut self) -> Result<String, AuthError> {
        let n = self.u32()? as usize;
        self.utf8(n, "ccache name is not UTF-8")
    }
    fn ccache_principal(&mut self) -> Result<Principal, AuthError> {
        let _name_type = self.u32()?;
        let count = self.u32()? as usize;
        if count > 8 {
            return Err(bad("ccache principal with too many components"));
        }
        let realm = self.ccache_string()?;
        let mut parts = Vec::with_capacity(count);
        for _ in 0..count {
            parts.push(self.ccache_string()?);
        }
        Ok((parts, realm))
    }
    /// Skip a counted list of (u16 type, data) entries (addresses, authorization data).
    fn skip_list(&mut self) -> Result<(), AuthError> {
        let n = self.u32()? as usize;
        if n > CREDENTIALS_MAX {
            return Err(bad("ccache list too long"));
        }
        for _ in 0..n {
            self.u16()?;
            self.ccache_data()?;
        }
        Ok(())
    }
}

/// Parse a ccache file: its default principal and its credentials (configuration entries, whose
/// service realm is `X-CACHECONF:`, left out).
pub fn parse(data: &[u8]) -> Result<(Principal, Vec<Credential>), AuthError> {
    if data.len() > CCACHE_SIZE_MAX {
        return Err(bad("ccache too large"));
    }
    let mut r = BeReader::new(data, "ccache truncated");
    if r.u16()? != 0x0504 {
        return Err(AuthError::Unsupported("ccache format other than 0x0504"));
    }
    let header_len = r.u16()? as usize;
    r.take(header_len)?;
    let default = r.ccache_principal()?;
    let mut creds = Vec::new();
    while !r.buf.is_empty() {
        if creds.len() >= CREDENTIALS_MAX {
            return Err(bad("ccache has too many credentials"));
        }
        let client = r.ccache_principal()?;
        let server = r.ccache_principal()?;
        let enctype = r.u16()? as i16 as i32;
        let key = r.ccache_data()?.to_vec();
        let auth = r.u32()? as i64;
        let start = r.u32()? as i64;
        let end = r.u32()? as i64;
        let _renew_till = r.u32()?;
        let _is_skey = r.u8()?;
        let _flags = r.u32()?;
        r.skip_list()?; // addresses
        r.skip_list()?; // authorization data
        let ticket = r.ccache_data()?.to_vec();
        let _second_ticket = r.ccache_data()?;
        if server.1 == "X-CACHECONF:" {
            continue;
        }
        creds.push(Credential {
            client,
            server,
            key: (enctype, key),
            times: (auth, start, end),
            ticket,
        });
    }
    Ok((default, creds))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(out: &mut Vec<u8>, parts: &[&str], realm: &str) {
        out.extend(1u32.to_be_bytes());
        out.extend((parts.len() as u32).to_be_bytes());
        for s in std::iter::once(&realm).chain(parts) {
            out.extend((s.len() as u32).to_be_bytes());
            out.extend(s.as_bytes());
        }
    }

    /// A ccache as MIT writes one: a header tag, the default principal, a configuration entry and
    /// one service ticket.
    fn sample() -> Vec<u8> {
        let mut c = vec![0x05, 0x04, 0x00, 0x0c, 0x00, 0x01, 0x00, 0x08];
        c.extend([0u8; 8]); // KDC time offset tag
        principal(&mut c, &["alice"], "RS.TEST");
        for (server, realm, ticket) in [
            (
                vec!["krb5_ccache_conf_data", "pa_type"],
                "X-CACHECONF:",
                &b"2"[..],
            ),
            (vec!["cifs", "fs.rs.test"], "RS.TEST", &b"\x61\x03TKT"[..]),
        ] {
            principal(&mut c, &["alice"], "RS.TEST");
            principal(&mut c, &server, realm);
            c.extend(18u16.to_be_bytes());
            c.extend(32u32.to_be_bytes());
            c.extend([7u8; 32]);
            for t in [100u32, 100, 3700, 0] {
                c.extend(t.to_be_bytes());
            }
            c.push(0);
            c.extend(0x0050_0000u32.to_be_bytes());
            c.extend(0u32.to_be_bytes());
            c.extend(0u32.to_be_bytes());
            c.extend((ticket.len() as u32).to_be_bytes());
            c.extend(ticket);
            c.extend(0u32.to_be_bytes());
        }
        c
    }

    #[test]
    fn a_ccache_gives_its_service_tickets_and_leaves_out_configuration_entries() {
        let (default, creds) = parse(&sample()).unwrap();
        assert_eq!(default, (vec!["alice".to_string()], "RS.TEST".to_string()));
        assert_eq!(creds.len(), 1);
        let c = &creds[0];
        assert_eq!(c.server.0, ["cifs", "fs.rs.test"]);
        assert_eq!(c.key, (18, vec![7; 32]));
        assert_eq!(c.times, (100, 100, 3700));
        assert_eq!(c.ticket, b"\x61\x03TKT");
    }

    #[test]
    fn truncated_or_corrupt_ccaches_are_refused_without_panicking() {
        let c = sample();
        for n in 0..c.len() {
            let _ = parse(&c[..n]);
        }
        assert!(parse(&c[..c.len() - 1]).is_err());
        for i in 0..c.len() {
            for x in [0u8, 0x7f, 0xff] {
                let mut m = c.clone();
                m[i] = x;
                let _ = parse(&m);
            }
        }
    }
}
