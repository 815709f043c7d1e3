//! Bounds-checked reading and appending of little-endian wire data.
//!
//! # Conventions used by every message module
//!
//! * **Decoding.** A request or response decoder takes `msg`: the whole SMB2
//!   message of that command, starting at its 64-byte SMB2 header (in a
//!   compound, sliced to its `NextCommand`). SMB2 offsets count from the start
//!   of the header, so they index `msg` directly; buffers are followed with
//!   [`slice_at`] whose `min_offset` is `64 + fixed body size`, so no buffer can
//!   point into the header or the fixed part. The decoded struct borrows from
//!   `msg` (`Foo<'a>`) and owns only small parts.
//! * **Encoding.** An encoder appends the *body* (not the header) to
//!   `out: &mut Vec<u8>`. The caller has already written the header at
//!   `out[out.len() - 64..]`, so the header start is `out.len() - 64` when the
//!   encoder is called; offsets written into the body are computed relative to
//!   that header start. Encoders never panic when called this way; if fewer
//!   than 64 bytes precede the body, offsets are computed from 0.
//! * **Errors.** Every decoder returns [`WireError`]; nothing panics, and no
//!   allocation is sized by an unchecked length field.

use crate::NtStatus;

/// Size of the SMB2 header that precedes every message body.
pub const HEADER_LEN: usize = 64;

/// Why a message could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// Needed `needed` more bytes at `at` but the buffer ended.
    Truncated { at: usize, needed: usize },
    /// A field had a value the spec does not allow; the str names the field.
    Invalid(&'static str),
    /// An offset/length pair points outside the message or into the fixed part.
    BadOffset(&'static str),
    /// A name is not valid UTF-16 / has a forbidden character.
    BadName,
}

impl WireError {
    /// The NTSTATUS a server answers with when a request fails to decode this way.
    pub fn status(&self) -> NtStatus {
        match self {
            WireError::BadName => NtStatus::OBJECT_NAME_INVALID,
            _ => NtStatus::INVALID_PARAMETER,
        }
    }
}

impl core::fmt::Display for WireError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            WireError::Truncated { at, needed } => {
                write!(f, "truncated: needed {needed} more bytes at offset {at}")
            }
            WireError::Invalid(field) => write!(f, "invalid value in {field}"),
            WireError::BadOffset(field) => write!(f, "offset/length out of range in {field}"),
            WireError::BadName => f.write_str("invalid UTF-16 name"),
        }
    }
}

impl std::error::Error for WireError {}

/// A cursor over a byte slice; every read is bounds-checked.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader positioned at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// True when everything has been consumed.
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// Consume `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let rem = self.remaining();
        if n > rem {
            return Err(WireError::Truncated {
                at: self.pos,
                needed: n - rem,
            });
        }
        let b = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(b)
    }

    /// Consume exactly `N` bytes as an array.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let b = self.bytes(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(b);
        Ok(a)
    }

    pub fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.array::<1>()?[0])
    }

    /// Little-endian u16.
    pub fn u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    /// Little-endian u32.
    pub fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// Little-endian u64.
    pub fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// Little-endian i64.
    pub fn i64(&mut self) -> Result<i64, WireError> {
        Ok(i64::from_le_bytes(self.array()?))
    }

    /// Big-endian u16.
    pub fn u16_be(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    /// Big-endian u32.
    pub fn u32_be(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    /// Skip `n` bytes.
    pub fn skip(&mut self, n: usize) -> Result<(), WireError> {
        self.bytes(n).map(|_| ())
    }

    /// Consume and return everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        let b = &self.buf[self.pos..];
        self.pos = self.buf.len();
        b
    }

    /// Consume `n` bytes as a new reader: the only way to follow a length.
    pub fn sub(&mut self, n: usize) -> Result<Reader<'a>, WireError> {
        Ok(Reader::new(self.bytes(n)?))
    }

    /// Skip padding until the position is a multiple of `n` (relative to the reader start).
    pub fn align(&mut self, n: usize) -> Result<(), WireError> {
        if n <= 1 {
            return Ok(());
        }
        let pad = (n - self.pos % n) % n;
        self.skip(pad)
    }
}

/// Follow an (offset, length) pair where offset counts from the start of `msg`
/// (SMB2 offsets count from the start of the SMB2 header). `min_offset` is the first byte
/// a buffer may start at (usually 64 + the fixed body size). length 0 => empty slice, any offset.
pub fn slice_at<'a>(
    msg: &'a [u8],
    offset: usize,
    len: usize,
    min_offset: usize,
    field: &'static str,
) -> Result<&'a [u8], WireError> {
    if len == 0 {
        return Ok(&[]);
    }
    if offset < min_offset {
        return Err(WireError::BadOffset(field));
    }
    let end = offset.checked_add(len).ok_or(WireError::BadOffset(field))?;
    if end > msg.len() {
        return Err(WireError::BadOffset(field));
    }
    Ok(&msg[offset..end])
}

/// Encoding helpers on `Vec<u8>` (little-endian unless the name says `_be`).
pub trait WriteExt {
    fn put_u8(&mut self, v: u8);
    fn put_u16(&mut self, v: u16);
    fn put_u32(&mut self, v: u32);
    fn put_u64(&mut self, v: u64);
    fn put_i64(&mut self, v: i64);
    fn put_u16_be(&mut self, v: u16);
    fn put_u32_be(&mut self, v: u32);
    fn put_bytes(&mut self, b: &[u8]);
    fn put_zeros(&mut self, n: usize);
    /// Zero-pad until `(len - base) % align == 0`.
    fn pad_to(&mut self, align: usize, base: usize);
    /// Overwrite a u16 written earlier; out-of-range `at` is ignored.
    fn patch_u16(&mut self, at: usize, v: u16);
    /// Overwrite a u32 written earlier; out-of-range `at` is ignored.
    fn patch_u32(&mut self, at: usize, v: u32);
}

impl WriteExt for Vec<u8> {
    fn put_u8(&mut self, v: u8) {
        self.push(v);
    }
    fn put_u16(&mut self, v: u16) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_i64(&mut self, v: i64) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_u16_be(&mut self, v: u16) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    fn put_u32_be(&mut self, v: u32) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    fn put_bytes(&mut self, b: &[u8]) {
        self.extend_from_slice(b);
    }
    fn put_zeros(&mut self, n: usize) {
        self.resize(self.len() + n, 0);
    }
    fn pad_to(&mut self, align: usize, base: usize) {
        if align <= 1 {
            return;
        }
        let used = self.len().saturating_sub(base);
        let pad = (align - used % align) % align;
        self.put_zeros(pad);
    }
    fn patch_u16(&mut self, at: usize, v: u16) {
        if let Some(s) = self.get_mut(at..at.saturating_add(2)) {
            s.copy_from_slice(&v.to_le_bytes());
        }
    }
    fn patch_u32(&mut self, at: usize, v: u32) {
        if let Some(s) = self.get_mut(at..at.saturating_add(4)) {
            s.copy_from_slice(&v.to_le_bytes());
        }
    }
}

/// Start of the SMB2 header for an encoder called with `out` per the module
/// convention (header already written, body about to be appended).
pub fn header_start(out: &[u8]) -> usize {
    out.len().saturating_sub(HEADER_LEN)
}

/// Convert an in-message offset or length to the u16 a field holds, saturating.
pub fn to_u16(v: usize) -> u16 {
    u16::try_from(v).unwrap_or(u16::MAX)
}

/// Convert an in-message offset or length to the u32 a field holds, saturating.
pub fn to_u32(v: usize) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// Check the StructureSize that starts every SMB2 body.
pub fn expect_structure_size(r: &mut Reader<'_>, want: u16) -> Result<(), WireError> {
    if r.u16()? != want {
        return Err(WireError::Invalid("StructureSize"));
    }
    Ok(())
}

/// A reader over the body of `msg` (everything after the 64-byte header).
pub fn body_reader(msg: &[u8]) -> Result<Reader<'_>, WireError> {
    let mut r = Reader::new(msg);
    r.skip(HEADER_LEN)?;
    Ok(Reader::new(r.rest()))
}

/// Where the buffer of an output-buffer response starts, counted from the header.
pub const OUTPUT_BUFFER_RESPONSE_AT: usize = HEADER_LEN + 8;

/// The body QUERY_DIRECTORY, QUERY_INFO and CHANGE_NOTIFY responses share
/// ([MS-SMB2] 2.2.34, 2.2.38, 2.2.36): StructureSize 9, OutputBufferOffset
/// (u16), OutputBufferLength (u32), then the buffer. Returns the buffer.
pub fn decode_output_buffer_response(msg: &[u8]) -> Result<&[u8], WireError> {
    let mut r = body_reader(msg)?;
    expect_structure_size(&mut r, 9)?;
    let off = usize::from(r.u16()?);
    let len = r.u32()? as usize;
    slice_at(msg, off, len, OUTPUT_BUFFER_RESPONSE_AT, "OutputBuffer")
}

/// Append the fixed part of an output-buffer response whose `buffer_len`
/// bytes follow it (at [`OUTPUT_BUFFER_RESPONSE_AT`]).
pub fn encode_output_buffer_response_head(out: &mut Vec<u8>, buffer_len: usize) {
    out.put_u16(9);
    out.put_u16(to_u16(OUTPUT_BUFFER_RESPONSE_AT));
    out.put_u32(to_u32(buffer_len));
}

/// Check a body that is only `StructureSize` + a reserved u16 (LOGOFF, ECHO, ...).
/// `structure_size` is 4 for those (2 for the SET_INFO response, which has no Reserved).
pub fn decode_empty_body(msg: &[u8], structure_size: u16) -> Result<(), WireError> {
    let mut r = body_reader(msg)?;
    expect_structure_size(&mut r, structure_size)?;
    if structure_size >= 4 {
        r.skip(2)?;
    }
    Ok(())
}

/// Append a body that is only `StructureSize` (+ a zero Reserved u16 when it is 4).
pub fn encode_empty_body(out: &mut Vec<u8>, structure_size: u16) {
    out.put_u16(structure_size);
    if structure_size >= 4 {
        out.put_u16(0);
    }
}

/// Test helper: a message with a request header for `cmd` and the body `f` appends.
#[cfg(test)]
pub(crate) fn test_msg(cmd: crate::consts::Command, f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut v = Vec::new();
    crate::header::Header::request(cmd, 1).encode(&mut v);
    f(&mut v);
    v
}

/// Test helper: every strict prefix of `msg` that still holds the header must fail to decode.
#[cfg(test)]
pub(crate) fn assert_prefixes_fail(msg: &[u8], min_len: usize, decodes: impl Fn(&[u8]) -> bool) {
    for n in 0..min_len.min(msg.len()) {
        assert!(!decodes(&msg[..n]), "decoded from a {n}-byte prefix");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_little_and_big_endian_integers() {
        let b = [1, 2, 3, 4, 5, 6, 7, 8, 0xAA, 0xBB];
        let mut r = Reader::new(&b);
        assert_eq!(r.u16().unwrap(), 0x0201);
        assert_eq!(r.u16_be().unwrap(), 0x0304);
        assert_eq!(r.u32().unwrap(), 0x0807_0605);
        assert_eq!(r.position(), 8);
        assert_eq!(r.remaining(), 2);
        assert_eq!(r.rest(), &[0xAA, 0xBB]);
        assert!(r.is_empty());
    }

    #[test]
    fn reports_truncation_position_and_shortfall() {
        let mut r = Reader::new(&[1, 2, 3]);
        r.u8().unwrap();
        assert_eq!(r.u32(), Err(WireError::Truncated { at: 1, needed: 2 }));
        // A failed read consumes nothing.
        assert_eq!(r.position(), 1);
        assert_eq!(r.u16().unwrap(), 0x0302);
    }

    #[test]
    fn sub_reader_is_confined_to_its_length() {
        let b = [1, 2, 3, 4, 5];
        let mut r = Reader::new(&b);
        let mut s = r.sub(2).unwrap();
        assert_eq!(s.u16().unwrap(), 0x0201);
        assert!(s.u8().is_err());
        assert_eq!(r.u8().unwrap(), 3);
        assert!(r.sub(usize::MAX).is_err());
    }

    #[test]
    fn align_skips_to_multiple_relative_to_reader_start() {
        let b = [0u8; 16];
        let mut r = Reader::new(&b[3..]);
        r.u8().unwrap();
        r.align(8).unwrap();
        assert_eq!(r.position(), 8);
        r.align(8).unwrap();
        assert_eq!(r.position(), 8);
        let mut short = Reader::new(&b[..3]);
        short.u8().unwrap();
        assert!(short.align(8).is_err());
    }

    #[test]
    fn slice_at_rejects_offsets_into_fixed_part_past_end_and_overflowing() {
        let msg = [0u8; 100];
        assert_eq!(slice_at(&msg, 72, 28, 72, "f").unwrap().len(), 28);
        assert_eq!(
            slice_at(&msg, 71, 4, 72, "f"),
            Err(WireError::BadOffset("f"))
        );
        assert_eq!(
            slice_at(&msg, 72, 29, 72, "f"),
            Err(WireError::BadOffset("f"))
        );
        assert_eq!(
            slice_at(&msg, usize::MAX, 2, 72, "f"),
            Err(WireError::BadOffset("f"))
        );
        // Zero length is always an empty slice, wherever it points.
        assert_eq!(slice_at(&msg, 5000, 0, 72, "f").unwrap(), &[] as &[u8]);
    }

    #[test]
    fn writer_pads_and_patches() {
        let mut v = vec![9u8; 3];
        v.put_u16(0x1234);
        v.pad_to(8, 0);
        assert_eq!(v.len(), 8);
        v.pad_to(8, 1);
        assert_eq!(v.len(), 9);
        v.patch_u16(3, 0xBEEF);
        assert_eq!(&v[3..5], &[0xEF, 0xBE]);
        v.patch_u32(7, 1); // out of range: ignored, no panic
        assert_eq!(v.len(), 9);
        v.put_u32_be(1);
        assert_eq!(&v[9..], &[0, 0, 0, 1]);
    }

    #[test]
    fn errors_map_to_statuses() {
        assert_eq!(WireError::BadName.status(), NtStatus::OBJECT_NAME_INVALID);
        assert_eq!(
            WireError::Invalid("StructureSize").status(),
            NtStatus::INVALID_PARAMETER
        );
    }

    /// Run every decoder over `msg`; only checks that none panics.
    fn decode_all(msg: &[u8]) {
        use crate::*;
        let _ = header::Header::decode(msg);
        let _ = header::split_compound(msg).count();
        let _ = smb1::Smb1Negotiate::decode(msg);
        let _ = negotiate::NegotiateRequest::decode(msg);
        let _ = negotiate::NegotiateResponse::decode(msg);
        let _ = session::SessionSetupRequest::decode(msg);
        let _ = session::SessionSetupResponse::decode(msg);
        let _ = tree::TreeConnectRequest::decode(msg);
        let _ = tree::TreeConnectResponse::decode(msg);
        let _ = create::CreateRequest::decode(msg);
        let _ = create::CreateResponse::decode(msg);
        let _ = create::decode_contexts(msg.get(64..).unwrap_or(&[]));
        let _ = create::CloseRequest::decode(msg);
        let _ = create::CloseResponse::decode(msg);
        let _ = file::ReadRequest::decode(msg);
        let _ = file::ReadResponse::decode(msg);
        let _ = file::WriteRequest::decode(msg);
        let _ = file::WriteResponse::decode(msg);
        let _ = dir::QueryDirectoryRequest::decode(msg);
        let _ = dir::QueryDirectoryResponse::decode(msg);
        let _ = info::QueryInfoRequest::decode(msg);
        let _ = info::QueryInfoResponse::decode(msg);
        let _ = info::SetInfoRequest::decode(msg);
        let _ = lock::LockRequest::decode(msg);
        let _ = ioctl::IoctlRequest::decode(msg);
        let _ = ioctl::IoctlResponse::decode(msg);
        let _ = ioctl::ValidateNegotiateInfoRequest::decode(msg);
        let _ = ioctl::NetworkInterfaceInfo::decode_list(msg);
        let _ = misc::OplockBreak::decode(msg);
        let _ = misc::ChangeNotifyRequest::decode(msg);
        let _ = misc::ChangeNotifyResponse::decode(msg);
        let _ = misc::ErrorResponse::decode(msg);
        let _ = misc::ErrorContext::decode_list(msg, 255);
        let _ = transform::TransformHeader::decode(msg);
        let _ = transform::split_encrypted(msg);
    }

    #[test]
    fn no_decoder_panics_on_random_or_mutated_messages() {
        // Deterministic xorshift so a failure reproduces.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut seeds: Vec<Vec<u8>> = Vec::new();
        let mut hdr = Vec::new();
        crate::header::Header::request(crate::consts::Command::CREATE, 1).encode(&mut hdr);
        seeds.push(hdr.clone());
        for body_len in [0usize, 8, 24, 48, 56, 120, 300] {
            let mut m = hdr.clone();
            m.resize(64 + body_len, 0);
            seeds.push(m);
        }
        {
            use crate::consts::*;
            use crate::*;
            let fid = FileId::ANY;
            let enc = |cmd: Command, f: &dyn Fn(&mut Vec<u8>)| test_msg(cmd, f);
            seeds.push(enc(Command::NEGOTIATE, &|v| {
                negotiate::NegotiateRequest {
                    security_mode: SecurityMode::SIGNING_ENABLED,
                    capabilities: Capabilities::empty(),
                    client_guid: [1; 16],
                    client_start_time: 0,
                    dialects: vec![Dialect::SMB3_0, Dialect::SMB3_1_1],
                    contexts: vec![
                        negotiate::NegotiateContext::PreauthIntegrity {
                            hash_algorithms: vec![HashAlgorithm::SHA_512],
                            salt: vec![1; 32],
                        },
                        negotiate::NegotiateContext::Encryption {
                            ciphers: vec![CipherId::AES_128_GCM],
                        },
                    ],
                }
                .encode(v)
            }));
            seeds.push(enc(Command::CREATE, &|v| {
                create::CreateRequest {
                    security_flags: 0,
                    requested_oplock_level: OplockLevel::NONE,
                    impersonation_level: ImpersonationLevel::IMPERSONATION,
                    smb_create_flags: 0,
                    desired_access: AccessMask::GENERIC_READ,
                    file_attributes: FileAttributes::empty(),
                    share_access: ShareAccess::READ,
                    create_disposition: CreateDisposition::OPEN,
                    create_options: CreateOptions::empty(),
                    name: "a\\b".into(),
                    contexts: vec![
                        create::CreateContext::new(create::tag::QUERY_MAXIMAL_ACCESS, vec![]),
                        create::CreateContext::new(create::tag::REQUEST_LEASE, vec![0; 52]),
                    ],
                }
                .encode(v)
            }));
            seeds.push(enc(Command::WRITE, &|v| {
                file::WriteRequest {
                    offset: 0,
                    file_id: fid,
                    channel: Channel::NONE,
                    remaining_bytes: 0,
                    flags: WriteFlags::empty(),
                    channel_info: &[],
                    data: b"0123456789",
                }
                .encode(v)
            }));
            seeds.push(enc(Command::IOCTL, &|v| {
                ioctl::IoctlRequest {
                    ctl_code: Fsctl::VALIDATE_NEGOTIATE_INFO,
                    file_id: fid,
                    input: &[0; 28],
                    max_input_response: 0,
                    output: &[],
                    max_output_response: 24,
                    flags: IoctlFlags::IS_FSCTL,
                }
                .encode(v)
            }));
            seeds.push(enc(Command::TREE_CONNECT, &|v| {
                tree::TreeConnectRequest {
                    flags: TreeConnectFlags::empty(),
                    path: "\\\\s\\x".into(),
                    extension: None,
                }
                .encode(v)
            }));
        }
        for _ in 0..6000 {
            let mut m = seeds[(rnd() % seeds.len() as u64) as usize].clone();
            // Plant plausible small values and random bytes at random places.
            for _ in 0..(rnd() % 12) {
                if m.is_empty() {
                    break;
                }
                let at = (rnd() % m.len() as u64) as usize;
                m[at] = match rnd() % 4 {
                    0 => 0,
                    1 => 0xFF,
                    2 => (rnd() % 160) as u8,
                    _ => rnd() as u8,
                };
            }
            if rnd() % 3 == 0 {
                let n = (rnd() % (m.len() as u64 + 1)) as usize;
                m.truncate(n);
            }
            decode_all(&m);
        }
        for len in 0..200 {
            let m: Vec<u8> = (0..len).map(|_| rnd() as u8).collect();
            decode_all(&m);
        }
    }
}
