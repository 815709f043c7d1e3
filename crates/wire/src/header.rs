//! The 64-byte SMB2 packet header ([MS-SMB2] 2.2.1), sync and async forms,
//! and splitting a compound chain at `NextCommand` ([MS-SMB2] 3.3.5.2.7).

use crate::codec::{Reader, HEADER_LEN};
use crate::consts::{Command, HeaderFlags};
use crate::{NtStatus, WireError};

/// ProtocolId of an SMB2 message.
pub const SMB2_MAGIC: [u8; 4] = [0xFE, b'S', b'M', b'B'];
/// ProtocolId of an SMB2 TRANSFORM_HEADER (encrypted message).
pub const TRANSFORM_MAGIC: [u8; 4] = [0xFD, b'S', b'M', b'B'];
/// ProtocolId of an SMB2 COMPRESSION_TRANSFORM_HEADER.
pub const COMPRESSION_MAGIC: [u8; 4] = [0xFC, b'S', b'M', b'B'];
/// ProtocolId of an SMB1 message.
pub const SMB1_MAGIC: [u8; 4] = [0xFF, b'S', b'M', b'B'];

/// Byte range of the Signature field within the header.
pub const SIGNATURE_RANGE: core::ops::Range<usize> = 48..64;

/// Which protocol a message starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Smb2,
    Transform,
    Compressed,
    Smb1,
    Unknown,
}

/// Classify a message by its first four bytes.
pub fn protocol_of(msg: &[u8]) -> Protocol {
    match msg.get(..4) {
        Some(m) if m == SMB2_MAGIC => Protocol::Smb2,
        Some(m) if m == TRANSFORM_MAGIC => Protocol::Transform,
        Some(m) if m == COMPRESSION_MAGIC => Protocol::Compressed,
        Some(m) if m == SMB1_MAGIC => Protocol::Smb1,
        _ => Protocol::Unknown,
    }
}

/// Bytes 32..40: AsyncId in the async form, ProcessId + TreeId in the sync form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderId {
    Async { async_id: u64 },
    Sync { process_id: u32, tree_id: u32 },
}

/// An SMB2 header.
///
/// `status` holds the Status of a response. In a request the same four bytes
/// are ChannelSequence (low 16 bits) + Reserved (3.x); see
/// [`Header::channel_sequence`]. The form of bytes 32..40 is the [`HeaderId`];
/// [`Header::encode`] sets or clears `ASYNC_COMMAND` to match it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub credit_charge: u16,
    pub status: NtStatus,
    pub command: Command,
    /// CreditRequest in a request, CreditResponse in a response.
    pub credits: u16,
    pub flags: HeaderFlags,
    pub next_command: u32,
    pub message_id: u64,
    pub id: HeaderId,
    pub session_id: u64,
    pub signature: [u8; 16],
}

impl Default for Header {
    fn default() -> Self {
        Header {
            credit_charge: 0,
            status: NtStatus::SUCCESS,
            command: Command::NEGOTIATE,
            credits: 0,
            flags: HeaderFlags::empty(),
            next_command: 0,
            message_id: 0,
            id: HeaderId::Sync {
                process_id: 0,
                tree_id: 0,
            },
            session_id: 0,
            signature: [0; 16],
        }
    }
}

impl Header {
    /// A request header for `command` (sync form, everything else zero).
    pub fn request(command: Command, message_id: u64) -> Self {
        Header {
            command,
            message_id,
            ..Header::default()
        }
    }

    /// The response header skeleton for a request: same command, message id,
    /// session and tree/async id; SERVER_TO_REDIR set; no signature.
    pub fn response_to(req: &Header, status: NtStatus) -> Self {
        let mut flags = HeaderFlags::SERVER_TO_REDIR;
        if req.is_async() {
            flags.insert(HeaderFlags::ASYNC_COMMAND);
        }
        flags.insert(req.flags & (HeaderFlags::RELATED_OPERATIONS | HeaderFlags::PRIORITY_MASK));
        Header {
            credit_charge: req.credit_charge,
            status,
            command: req.command,
            credits: 0,
            flags,
            next_command: 0,
            message_id: req.message_id,
            id: req.id,
            session_id: req.session_id,
            signature: [0; 16],
        }
    }

    /// Decode the header at the start of `msg` (which must be at least 64 bytes).
    pub fn decode(msg: &[u8]) -> Result<Header, WireError> {
        match msg.first_chunk::<64>() {
            Some(h) => Header::decode_fixed(h),
            // Short: the field-by-field reader says where it ends.
            None => Header::decode_read(msg),
        }
    }

    /// [`Header::decode`] of a whole 64-byte header: every field at its
    /// offset, no bounds checks left to do (every request passes here).
    fn decode_fixed(h: &[u8; 64]) -> Result<Header, WireError> {
        fn at<const N: usize>(h: &[u8; 64], off: usize) -> [u8; N] {
            let mut a = [0u8; N];
            a.copy_from_slice(&h[off..off + N]);
            a
        }
        let u16_at = |off| u16::from_le_bytes(at(h, off));
        let u32_at = |off| u32::from_le_bytes(at(h, off));
        let u64_at = |off| u64::from_le_bytes(at(h, off));
        if at::<4>(h, 0) != SMB2_MAGIC {
            return Err(WireError::Invalid("ProtocolId"));
        }
        if u16_at(4) != 64 {
            return Err(WireError::Invalid("StructureSize"));
        }
        let flags = HeaderFlags(u32_at(16));
        let id = if flags.contains(HeaderFlags::ASYNC_COMMAND) {
            HeaderId::Async {
                async_id: u64_at(32),
            }
        } else {
            HeaderId::Sync {
                process_id: u32_at(32),
                tree_id: u32_at(36),
            }
        };
        Ok(Header {
            credit_charge: u16_at(6),
            status: NtStatus(u32_at(8)),
            command: Command(u16_at(12)),
            credits: u16_at(14),
            flags,
            next_command: u32_at(20),
            message_id: u64_at(24),
            id,
            session_id: u64_at(40),
            signature: at(h, 48),
        })
    }

    /// [`Header::decode`] field by field (a message shorter than a header).
    fn decode_read(msg: &[u8]) -> Result<Header, WireError> {
        let mut r = Reader::new(msg);
        if r.array::<4>()? != SMB2_MAGIC {
            return Err(WireError::Invalid("ProtocolId"));
        }
        if r.u16()? != 64 {
            return Err(WireError::Invalid("StructureSize"));
        }
        let credit_charge = r.u16()?;
        let status = NtStatus(r.u32()?);
        let command = Command(r.u16()?);
        let credits = r.u16()?;
        let flags = HeaderFlags(r.u32()?);
        let next_command = r.u32()?;
        let message_id = r.u64()?;
        let id = if flags.contains(HeaderFlags::ASYNC_COMMAND) {
            HeaderId::Async { async_id: r.u64()? }
        } else {
            HeaderId::Sync {
                process_id: r.u32()?,
                tree_id: r.u32()?,
            }
        };
        let session_id = r.u64()?;
        let signature = r.array::<16>()?;
        Ok(Header {
            credit_charge,
            status,
            command,
            credits,
            flags,
            next_command,
            message_id,
            id,
            session_id,
            signature,
        })
    }

    /// Append the 64-byte header.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_bytes());
    }

    /// The header's 64 bytes, laid out in one array (one copy into a frame, not a length check
    /// per field).
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        fn put<const N: usize>(h: &mut [u8; HEADER_LEN], off: usize, v: [u8; N]) {
            h[off..off + N].copy_from_slice(&v);
        }
        let mut flags = self.flags;
        let mut h = [0u8; HEADER_LEN];
        put(&mut h, 0, SMB2_MAGIC);
        put(&mut h, 4, 64u16.to_le_bytes());
        put(&mut h, 6, self.credit_charge.to_le_bytes());
        put(&mut h, 8, self.status.0.to_le_bytes());
        put(&mut h, 12, self.command.0.to_le_bytes());
        put(&mut h, 14, self.credits.to_le_bytes());
        put(&mut h, 20, self.next_command.to_le_bytes());
        put(&mut h, 24, self.message_id.to_le_bytes());
        match self.id {
            HeaderId::Async { async_id } => {
                flags.insert(HeaderFlags::ASYNC_COMMAND);
                put(&mut h, 32, async_id.to_le_bytes());
            }
            HeaderId::Sync {
                process_id,
                tree_id,
            } => {
                flags.remove(HeaderFlags::ASYNC_COMMAND);
                put(&mut h, 32, process_id.to_le_bytes());
                put(&mut h, 36, tree_id.to_le_bytes());
            }
        }
        put(&mut h, 16, flags.0.to_le_bytes());
        put(&mut h, 40, self.session_id.to_le_bytes());
        put(&mut h, 48, self.signature);
        h
    }

    /// SERVER_TO_REDIR is set.
    pub fn is_response(&self) -> bool {
        self.flags.contains(HeaderFlags::SERVER_TO_REDIR)
    }
    /// ASYNC_COMMAND is set.
    pub fn is_async(&self) -> bool {
        self.flags.contains(HeaderFlags::ASYNC_COMMAND)
    }
    /// RELATED_OPERATIONS is set (a related compound member).
    pub fn is_related(&self) -> bool {
        self.flags.contains(HeaderFlags::RELATED_OPERATIONS)
    }
    /// SIGNED is set.
    pub fn is_signed(&self) -> bool {
        self.flags.contains(HeaderFlags::SIGNED)
    }
    /// REPLAY_OPERATION is set.
    pub fn is_replay(&self) -> bool {
        self.flags.contains(HeaderFlags::REPLAY_OPERATION)
    }
    /// ChannelSequence of a 3.x request (low 16 bits of the Status field).
    pub fn channel_sequence(&self) -> u16 {
        (self.status.0 & 0xFFFF) as u16
    }
    /// Set ChannelSequence (request side); Reserved is zeroed.
    pub fn set_channel_sequence(&mut self, seq: u16) {
        self.status = NtStatus(u32::from(seq));
    }
    /// TreeId in the sync form.
    pub fn tree_id(&self) -> Option<u32> {
        match self.id {
            HeaderId::Sync { tree_id, .. } => Some(tree_id),
            HeaderId::Async { .. } => None,
        }
    }
    /// AsyncId in the async form.
    pub fn async_id(&self) -> Option<u64> {
        match self.id {
            HeaderId::Async { async_id } => Some(async_id),
            HeaderId::Sync { .. } => None,
        }
    }
}

/// Overwrite the NextCommand field of the header starting at `out[hdr_start..]`.
pub fn patch_next_command(out: &mut [u8], hdr_start: usize, next: u32) {
    if let Some(s) = out.get_mut(hdr_start + 20..hdr_start + 24) {
        s.copy_from_slice(&next.to_le_bytes());
    }
}

/// Overwrite the Signature of the header starting at `out[hdr_start..]`.
pub fn patch_signature(out: &mut [u8], hdr_start: usize, sig: &[u8; 16]) {
    if let Some(s) = out.get_mut(hdr_start + 48..hdr_start + 64) {
        s.copy_from_slice(sig);
    }
}

/// Iterator over the messages of a compound chain ([MS-SMB2] 3.3.5.2.7).
///
/// Each item is one message sliced to its NextCommand (the last one runs to the
/// end). NextCommand must be 8-byte aligned, at least 64 and inside the buffer;
/// otherwise the iterator yields one error and stops.
pub struct Compound<'a> {
    rest: &'a [u8],
    done: bool,
}

/// Split a decrypted/unframed buffer into its compound members.
pub fn split_compound(buf: &[u8]) -> Compound<'_> {
    Compound {
        rest: buf,
        done: false,
    }
}

impl<'a> Iterator for Compound<'a> {
    type Item = Result<&'a [u8], WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let hdr = match Header::decode(self.rest) {
            Ok(h) => h,
            Err(e) => {
                self.done = true;
                return Some(Err(e));
            }
        };
        let next = hdr.next_command as usize;
        if next == 0 {
            self.done = true;
            return Some(Ok(self.rest));
        }
        if next < HEADER_LEN || !next.is_multiple_of(8) || next >= self.rest.len() {
            self.done = true;
            return Some(Err(WireError::BadOffset("NextCommand")));
        }
        let (this, rest) = self.rest.split_at(next);
        self.rest = rest;
        Some(Ok(this))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_header_decodes_as_the_field_by_field_reader_decodes_it() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for i in 0..20_000 {
            let mut h = [0u8; 64];
            for c in h.chunks_mut(8) {
                c.copy_from_slice(&next().to_le_bytes());
            }
            // Most with a valid start, some with a wrong magic or size.
            if i % 10 != 0 {
                h[..4].copy_from_slice(&SMB2_MAGIC);
            }
            if i % 7 != 0 {
                h[4..6].copy_from_slice(&64u16.to_le_bytes());
            }
            assert_eq!(
                Header::decode_fixed(&h),
                Header::decode_read(&h),
                "{h:02x?}"
            );
            assert_eq!(Header::decode(&h), Header::decode_read(&h));
        }
        let mut h = Vec::new();
        sample().encode(&mut h);
        for n in 0..h.len() {
            assert_eq!(Header::decode(&h[..n]), Header::decode_read(&h[..n]));
            assert!(
                Header::decode(&h[..n]).is_err(),
                "{n} bytes are not a header"
            );
        }
    }

    fn sample() -> Header {
        Header {
            credit_charge: 1,
            status: NtStatus::PENDING,
            command: Command::CREATE,
            credits: 31,
            flags: HeaderFlags::SERVER_TO_REDIR | HeaderFlags::SIGNED,
            next_command: 0,
            message_id: 0x1122_3344_5566_7788,
            id: HeaderId::Sync {
                process_id: 0xFEFF,
                tree_id: 5,
            },
            session_id: 0x0000_0400_0000_0011,
            signature: [0xAB; 16],
        }
    }

    #[test]
    fn sync_header_round_trips() {
        let h = sample();
        let mut v = Vec::new();
        h.encode(&mut v);
        assert_eq!(v.len(), 64);
        assert_eq!(&v[..4], b"\xfeSMB");
        assert_eq!(Header::decode(&v).unwrap(), h);
        assert!(h.is_response() && h.is_signed() && !h.is_async() && !h.is_related());
        assert_eq!(h.tree_id(), Some(5));
    }

    #[test]
    fn async_header_round_trips_and_sets_async_flag() {
        let mut h = sample();
        h.id = HeaderId::Async { async_id: 77 };
        let mut v = Vec::new();
        h.encode(&mut v);
        let d = Header::decode(&v).unwrap();
        assert!(d.is_async());
        assert_eq!(d.async_id(), Some(77));
        assert_eq!(d.tree_id(), None);
    }

    #[test]
    fn decodes_known_header_bytes() {
        // A NEGOTIATE request header as Windows sends it: credit charge 0,
        // credits requested 31 (0x1f), message id 0.
        let mut b = vec![
            0xfe, 0x53, 0x4d, 0x42, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x1f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        ];
        b.resize(64, 0);
        let h = Header::decode(&b).unwrap();
        assert_eq!(h.command, Command::NEGOTIATE);
        assert_eq!(h.credits, 31);
        assert!(!h.is_response());
    }

    #[test]
    fn rejects_wrong_protocol_id_and_structure_size() {
        let mut v = Vec::new();
        sample().encode(&mut v);
        let mut bad = v.clone();
        bad[0] = 0xFF;
        assert_eq!(Header::decode(&bad), Err(WireError::Invalid("ProtocolId")));
        let mut bad = v.clone();
        bad[4] = 65;
        assert_eq!(
            Header::decode(&bad),
            Err(WireError::Invalid("StructureSize"))
        );
        assert!(matches!(
            Header::decode(&v[..63]),
            Err(WireError::Truncated { .. })
        ));
    }

    #[test]
    fn classifies_protocol_ids() {
        assert_eq!(protocol_of(b"\xfeSMB...."), Protocol::Smb2);
        assert_eq!(protocol_of(b"\xfdSMB"), Protocol::Transform);
        assert_eq!(protocol_of(b"\xfcSMB"), Protocol::Compressed);
        assert_eq!(protocol_of(b"\xffSMBr"), Protocol::Smb1);
        assert_eq!(protocol_of(b"\xfeSM"), Protocol::Unknown);
    }

    #[test]
    fn response_to_copies_identity_and_sets_server_flag() {
        let mut req = sample();
        req.flags = HeaderFlags::RELATED_OPERATIONS | HeaderFlags::SIGNED;
        let resp = Header::response_to(&req, NtStatus::ACCESS_DENIED);
        assert!(resp.is_response() && resp.is_related() && !resp.is_signed());
        assert_eq!(resp.message_id, req.message_id);
        assert_eq!(resp.tree_id(), Some(5));
        let mut r2 = Header::request(Command::WRITE, 9);
        r2.set_channel_sequence(3);
        assert_eq!(r2.channel_sequence(), 3);
    }

    fn msg(next: u32, body: usize) -> Vec<u8> {
        let mut h = sample();
        h.next_command = next;
        let mut v = Vec::new();
        h.encode(&mut v);
        v.resize(64 + body, 0);
        v
    }

    #[test]
    fn splits_a_compound_at_next_command() {
        let mut buf = msg(72, 8);
        buf.extend(msg(0, 3));
        let parts: Vec<_> = split_compound(&buf).collect::<Result<_, _>>().unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].len(), 72);
        assert_eq!(parts[1].len(), 67);
    }

    #[test]
    fn rejects_misaligned_short_or_overrunning_next_command() {
        for next in [70u32, 32, 4096, 0xFFFF_FFF8] {
            let mut buf = msg(next, 8);
            buf.extend(msg(0, 0));
            let parts: Vec<_> = split_compound(&buf).collect();
            assert_eq!(parts.len(), 1, "next={next}");
            assert!(parts[0].is_err());
        }
    }

    #[test]
    fn patches_next_command_and_signature() {
        let mut v = msg(0, 0);
        patch_next_command(&mut v, 0, 128);
        patch_signature(&mut v, 0, &[7; 16]);
        let h = Header::decode(&v).unwrap();
        assert_eq!(h.next_command, 128);
        assert_eq!(h.signature, [7; 16]);
        patch_signature(&mut v, 10, &[7; 16]); // out of range: ignored
    }
}
