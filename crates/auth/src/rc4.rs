//! RC4, for NTLM key exchange and NTLMSSP signature sealing ([MS-NLMP] 3.4.3) and for Kerberos
//! RC4-HMAC tickets (RFC 4757, crate::krb5::rc4hmac).

#[derive(Clone)]
pub(crate) struct Rc4 {
    s: [u8; 256],
    i: u8,
    j: u8,
}

impl Rc4 {
    /// A keystream for `key` (1..=256 bytes; an empty key is treated as one zero byte).
    pub(crate) fn new(key: &[u8]) -> Self {
        let key: &[u8] = if key.is_empty() { &[0] } else { key };
        let mut s = [0u8; 256];
        for (i, b) in s.iter_mut().enumerate() {
            *b = i as u8;
        }
        let mut j = 0u8;
        for i in 0..256 {
            j = j.wrapping_add(s[i]).wrapping_add(key[i % key.len()]);
            s.swap(i, j as usize);
        }
        Rc4 { s, i: 0, j: 0 }
    }

    pub(crate) fn apply(&mut self, data: &mut [u8]) {
        for b in data {
            self.i = self.i.wrapping_add(1);
            self.j = self.j.wrapping_add(self.s[self.i as usize]);
            self.s.swap(self.i as usize, self.j as usize);
            let k =
                self.s[(self.s[self.i as usize].wrapping_add(self.s[self.j as usize])) as usize];
            *b ^= k;
        }
    }
}

/// One-shot RC4 of a 16-byte block.
pub(crate) fn rc4_16(key: &[u8], data: &[u8; 16]) -> [u8; 16] {
    let mut out = *data;
    Rc4::new(key).apply(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unhex;

    #[test]
    fn matches_rfc6229_key_0102030405() {
        // RFC 6229 section 2, 40-bit key 0x0102030405, keystream offset 0.
        let mut buf = [0u8; 16];
        Rc4::new(&[1, 2, 3, 4, 5]).apply(&mut buf);
        assert_eq!(buf.to_vec(), unhex("b2396305f03dc027ccc3524a0a1118a8"));
    }

    #[test]
    fn keystream_continues_across_calls() {
        let mut whole = [0u8; 32];
        Rc4::new(b"Key").apply(&mut whole);
        let mut r = Rc4::new(b"Key");
        let mut a = [0u8; 10];
        let mut b = [0u8; 22];
        r.apply(&mut a);
        r.apply(&mut b);
        assert_eq!(&whole[..10], &a);
        assert_eq!(&whole[10..], &b);
        // "Key" / "Plaintext" from the classic RC4 examples.
        let mut p = *b"Plaintext";
        Rc4::new(b"Key").apply(&mut p);
        assert_eq!(p.to_vec(), unhex("bbf316e8d940af0ad3"));
    }
}
