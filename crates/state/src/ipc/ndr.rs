//! The little NDR (DCE 1.1 RPC, [C706] chapter 14; [MS-RPCE] 2.2.5) that the
//! share-listing calls need: 32-bit integers, unique pointers and
//! conformant varying UTF-16 strings, all little-endian, 4-byte aligned.

use ringshare_wire::codec::Reader;
use ringshare_wire::utf16::decode_utf16le;
use ringshare_wire::WireError;

/// Builds an NDR stub.
#[derive(Default)]
pub(crate) struct NdrWriter {
    pub buf: Vec<u8>,
    next_referent: u32,
}

impl NdrWriter {
    pub fn new() -> NdrWriter {
        NdrWriter {
            buf: Vec::new(),
            next_referent: 0x0002_0000,
        }
    }

    pub(crate) fn align4(&mut self) {
        while !self.buf.len().is_multiple_of(4) {
            self.buf.push(0);
        }
    }

    pub(crate) fn align8(&mut self) {
        while !self.buf.len().is_multiple_of(8) {
            self.buf.push(0);
        }
    }

    pub fn u32(&mut self, v: u32) {
        self.align4();
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// A non-null unique/full pointer: a fresh referent id.
    pub fn ptr(&mut self) {
        let r = self.next_referent;
        self.next_referent += 4;
        self.u32(r);
    }

    pub fn u16(&mut self, v: u16) {
        while !self.buf.len().is_multiple_of(2) {
            self.buf.push(0);
        }
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// A unique pointer: a fresh referent id, or null.
    pub(crate) fn opt_ptr(&mut self, present: bool) {
        if present {
            self.ptr();
        } else {
            self.u32(0);
        }
    }

    /// The varying UTF-16 buffer an RPC_UNICODE_STRING points to (no NUL), with `max` units
    /// of room.
    pub(crate) fn counted_chars(&mut self, s: &str, extra: u32) {
        let units: Vec<u16> = s.encode_utf16().collect();
        self.u32(units.len() as u32 + extra);
        self.u32(0);
        self.u32(units.len() as u32);
        for u in units {
            self.buf.extend_from_slice(&u.to_le_bytes());
        }
    }

    /// A conformant varying string with its terminating NUL.
    pub fn string(&mut self, s: &str) {
        let units: Vec<u16> = s.encode_utf16().chain(std::iter::once(0)).collect();
        self.u32(units.len() as u32);
        self.u32(0);
        self.u32(units.len() as u32);
        for u in units {
            self.buf.extend_from_slice(&u.to_le_bytes());
        }
        self.align4();
    }
}

/// Reads an NDR stub (request side).
pub(crate) struct NdrReader<'a> {
    r: Reader<'a>,
}

impl<'a> NdrReader<'a> {
    pub fn new(stub: &'a [u8]) -> NdrReader<'a> {
        NdrReader {
            r: Reader::new(stub),
        }
    }

    pub(crate) fn align4(&mut self) -> Result<(), WireError> {
        self.r.align(4)
    }

    pub fn u32(&mut self) -> Result<u32, WireError> {
        self.align4()?;
        self.r.u32()
    }

    pub fn u16(&mut self) -> Result<u16, WireError> {
        self.r.align(2)?;
        self.r.u16()
    }

    pub fn u8(&mut self) -> Result<u8, WireError> {
        self.r.u8()
    }

    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        self.r.bytes(n)
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.r.remaining()
    }

    /// The UTF-16 buffer of an RPC_UNICODE_STRING (its deferred part), `len` bytes long.
    pub(crate) fn counted_chars(&mut self, len: u16) -> Result<String, WireError> {
        let max = self.u32()?;
        let offset = self.u32()?;
        let actual = self.u32()?;
        if offset != 0 || actual > max || actual != u32::from(len / 2) {
            return Err(WireError::Invalid("NDR counted string"));
        }
        let bytes = self.r.bytes(actual as usize * 2)?;
        decode_utf16le(bytes)
    }

    /// A conformant varying string (after its pointer, if any).
    pub fn string(&mut self) -> Result<String, WireError> {
        let max = self.u32()?;
        let offset = self.u32()?;
        let actual = self.u32()?;
        if offset != 0 || actual > max || actual > 4096 {
            return Err(WireError::Invalid("NDR string"));
        }
        let bytes = self.r.bytes(actual as usize * 2)?;
        let mut s = decode_utf16le(bytes)?;
        if s.ends_with('\0') {
            s.pop();
        }
        Ok(s)
    }

    /// A unique pointer to a string: `None` when null.
    pub(crate) fn unique_string(&mut self) -> Result<Option<String>, WireError> {
        match self.u32()? {
            0 => Ok(None),
            _ => self.string().map(Some),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_round_trip_with_their_nul_and_padding() {
        let mut w = NdrWriter::new();
        w.string("IPC$");
        w.u32(7);
        // 12 bytes of counts, 5 UTF-16 units (10 bytes), 2 bytes padding, then the u32.
        assert_eq!(w.buf.len(), 12 + 10 + 2 + 4);
        let mut r = NdrReader::new(&w.buf);
        assert_eq!(r.string().unwrap(), "IPC$");
        assert_eq!(r.u32().unwrap(), 7);
    }

    #[test]
    fn hostile_string_counts_are_refused() {
        let mut w = NdrWriter::new();
        w.u32(2);
        w.u32(0);
        w.u32(3); // actual > max
        assert!(NdrReader::new(&w.buf).string().is_err());
        let mut w = NdrWriter::new();
        w.u32(u32::MAX);
        w.u32(0);
        w.u32(u32::MAX);
        assert!(NdrReader::new(&w.buf).string().is_err());
    }
}
