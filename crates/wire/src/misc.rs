//! ECHO ([MS-SMB2] 2.2.28, 2.2.29), CANCEL (2.2.30), OPLOCK_BREAK
//! notification/acknowledgment/response (2.2.23, 2.2.24, 2.2.25, oplock and
//! lease forms), CHANGE_NOTIFY (2.2.35, 2.2.36) and the ERROR response (2.2.2).

use crate::codec::{
    body_reader, decode_empty_body, decode_output_buffer_response, encode_empty_body,
    expect_structure_size, to_u16, to_u32, Reader, WriteExt, OUTPUT_BUFFER_RESPONSE_AT,
};
use crate::consts::{
    AccessMask, ChangeNotifyFlags, CompletionFilter, LeaseBreakFlags, LeaseState, OplockLevel,
    ShareAccess,
};
use crate::{FileId, WireError};

/// SMB2 ECHO request or response ([MS-SMB2] 2.2.28, 2.2.29).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Echo;

impl Echo {
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        decode_empty_body(msg, 4).map(|()| Echo)
    }
    pub fn encode(&self, out: &mut Vec<u8>) {
        encode_empty_body(out, 4);
    }
}

/// SMB2 CANCEL request ([MS-SMB2] 2.2.30). The request to cancel is named by
/// the header (MessageId, or AsyncId in the async form).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CancelRequest;

impl CancelRequest {
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        decode_empty_body(msg, 4).map(|()| CancelRequest)
    }
    pub fn encode(&self, out: &mut Vec<u8>) {
        encode_empty_body(out, 4);
    }
}

/// An OPLOCK_BREAK message in any of its forms, told apart by StructureSize.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OplockBreak {
    /// Oplock break notification, acknowledgment or response (StructureSize 24;
    /// [MS-SMB2] 2.2.23.1, 2.2.24.1, 2.2.25.1).
    Oplock {
        oplock_level: OplockLevel,
        file_id: FileId,
    },
    /// Lease break notification (StructureSize 44; 2.2.23.2).
    LeaseBreakNotification(LeaseBreakNotification),
    /// Lease break acknowledgment or response (StructureSize 36; 2.2.24.2, 2.2.25.2).
    LeaseAck {
        flags: u32,
        lease_key: [u8; 16],
        lease_state: LeaseState,
        lease_duration: u64,
    },
}

/// Lease break notification body ([MS-SMB2] 2.2.23.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseBreakNotification {
    pub new_epoch: u16,
    pub flags: LeaseBreakFlags,
    pub lease_key: [u8; 16],
    pub current_lease_state: LeaseState,
    pub new_lease_state: LeaseState,
    pub break_reason: u32,
    pub access_mask_hint: AccessMask,
    pub share_mask_hint: ShareAccess,
}

impl OplockBreak {
    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = body_reader(msg)?;
        match r.u16()? {
            24 => {
                let oplock_level = OplockLevel(r.u8()?);
                r.skip(5)?;
                Ok(OplockBreak::Oplock {
                    oplock_level,
                    file_id: FileId::read(&mut r)?,
                })
            }
            44 => Ok(OplockBreak::LeaseBreakNotification(
                LeaseBreakNotification {
                    new_epoch: r.u16()?,
                    flags: LeaseBreakFlags(r.u32()?),
                    lease_key: r.array()?,
                    current_lease_state: LeaseState(r.u32()?),
                    new_lease_state: LeaseState(r.u32()?),
                    break_reason: r.u32()?,
                    access_mask_hint: AccessMask(r.u32()?),
                    share_mask_hint: ShareAccess(r.u32()?),
                },
            )),
            36 => {
                r.skip(2)?;
                Ok(OplockBreak::LeaseAck {
                    flags: r.u32()?,
                    lease_key: r.array()?,
                    lease_state: LeaseState(r.u32()?),
                    lease_duration: r.u64()?,
                })
            }
            _ => Err(WireError::Invalid("StructureSize")),
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            OplockBreak::Oplock {
                oplock_level,
                file_id,
            } => {
                out.put_u16(24);
                out.put_u8(oplock_level.0);
                out.put_zeros(5);
                file_id.write(out);
            }
            OplockBreak::LeaseBreakNotification(n) => {
                out.put_u16(44);
                out.put_u16(n.new_epoch);
                out.put_u32(n.flags.0);
                out.put_bytes(&n.lease_key);
                out.put_u32(n.current_lease_state.0);
                out.put_u32(n.new_lease_state.0);
                out.put_u32(n.break_reason);
                out.put_u32(n.access_mask_hint.0);
                out.put_u32(n.share_mask_hint.0);
            }
            OplockBreak::LeaseAck {
                flags,
                lease_key,
                lease_state,
                lease_duration,
            } => {
                out.put_u16(36);
                out.put_u16(0);
                out.put_u32(*flags);
                out.put_bytes(lease_key);
                out.put_u32(lease_state.0);
                out.put_u64(*lease_duration);
            }
        }
    }
}

/// SMB2 CHANGE_NOTIFY request ([MS-SMB2] 2.2.35).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangeNotifyRequest {
    pub flags: ChangeNotifyFlags,
    pub output_buffer_length: u32,
    pub file_id: FileId,
    pub completion_filter: CompletionFilter,
}

impl ChangeNotifyRequest {
    pub const STRUCTURE_SIZE: u16 = 32;

    pub fn decode(msg: &[u8]) -> Result<Self, WireError> {
        let mut r = body_reader(msg)?;
        expect_structure_size(&mut r, Self::STRUCTURE_SIZE)?;
        let flags = ChangeNotifyFlags(r.u16()?);
        let output_buffer_length = r.u32()?;
        let file_id = FileId::read(&mut r)?;
        let completion_filter = CompletionFilter(r.u32()?);
        r.skip(4)?;
        Ok(ChangeNotifyRequest {
            flags,
            output_buffer_length,
            file_id,
            completion_filter,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u16(self.flags.0);
        out.put_u32(self.output_buffer_length);
        self.file_id.write(out);
        out.put_u32(self.completion_filter.0);
        out.put_u32(0);
    }
}

/// Where the CHANGE_NOTIFY response buffer starts, counted from the header.
pub const CHANGE_NOTIFY_BUFFER_OFFSET: usize = OUTPUT_BUFFER_RESPONSE_AT;

/// SMB2 CHANGE_NOTIFY response ([MS-SMB2] 2.2.36): a FILE_NOTIFY_INFORMATION
/// chain ([MS-FSCC] 2.7.1) built by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeNotifyResponse<'a> {
    pub buffer: &'a [u8],
}

impl<'a> ChangeNotifyResponse<'a> {
    pub const STRUCTURE_SIZE: u16 = 9;

    pub fn decode(msg: &'a [u8]) -> Result<Self, WireError> {
        Ok(ChangeNotifyResponse {
            buffer: decode_output_buffer_response(msg)?,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u16(if self.buffer.is_empty() {
            0
        } else {
            to_u16(CHANGE_NOTIFY_BUFFER_OFFSET)
        });
        out.put_u32(to_u32(self.buffer.len()));
        out.put_bytes(self.buffer);
        if self.buffer.is_empty() {
            out.put_u8(0);
        }
    }
}

/// SMB2 ERROR response ([MS-SMB2] 2.2.2). For 3.1.1 with a nonzero
/// `error_context_count` the data is a list of SMB2 ERROR Context structures
/// (2.2.2.1); see [`ErrorContext`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorResponse<'a> {
    pub error_context_count: u8,
    pub error_data: &'a [u8],
}

impl<'a> ErrorResponse<'a> {
    pub const STRUCTURE_SIZE: u16 = 9;

    /// An error response with no data (the usual case).
    pub const EMPTY: ErrorResponse<'static> = ErrorResponse {
        error_context_count: 0,
        error_data: &[],
    };

    pub fn decode(msg: &'a [u8]) -> Result<Self, WireError> {
        let mut r = body_reader(msg)?;
        expect_structure_size(&mut r, Self::STRUCTURE_SIZE)?;
        let error_context_count = r.u8()?;
        r.skip(1)?;
        let len = r.u32()? as usize;
        Ok(ErrorResponse {
            error_context_count,
            error_data: r.bytes(len)?,
        })
    }

    /// Append the body; with no data a single zero byte stands for ErrorData.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u8(self.error_context_count);
        out.put_u8(0);
        out.put_u32(to_u32(self.error_data.len()));
        if self.error_data.is_empty() {
            out.put_u8(0);
        } else {
            out.put_bytes(self.error_data);
        }
    }
}

/// One SMB2 ERROR Context ([MS-SMB2] 2.2.2.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorContext<'a> {
    /// 0 = default, 0x72727473 = SHARE_REDIRECT.
    pub error_id: u32,
    pub data: &'a [u8],
}

impl<'a> ErrorContext<'a> {
    /// Parse `count` contexts, each 8-byte aligned from the start of `data`.
    pub fn decode_list(data: &'a [u8], count: u8) -> Result<Vec<Self>, WireError> {
        let mut r = Reader::new(data);
        let mut out = Vec::new();
        for i in 0..count {
            if i > 0 {
                r.align(8)?;
            }
            let len = r.u32()? as usize;
            let error_id = r.u32()?;
            out.push(ErrorContext {
                error_id,
                data: r.bytes(len)?,
            });
        }
        Ok(out)
    }

    /// Append contexts, padding each to 8 bytes from the start of the list at `base`.
    pub fn encode_list(list: &[ErrorContext<'_>], out: &mut Vec<u8>, base: usize) {
        for (i, c) in list.iter().enumerate() {
            if i > 0 {
                out.pad_to(8, base);
            }
            out.put_u32(to_u32(c.data.len()));
            out.put_u32(c.error_id);
            out.put_bytes(c.data);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{assert_prefixes_fail, test_msg};
    use crate::consts::Command;

    #[test]
    fn echo_and_cancel_round_trip() {
        let msg = test_msg(Command::ECHO, |v| Echo.encode(v));
        assert_eq!(Echo::decode(&msg), Ok(Echo));
        assert_eq!(CancelRequest::decode(&msg), Ok(CancelRequest));
        let mut bad = msg;
        bad[64] = 0;
        assert!(Echo::decode(&bad).is_err());
    }

    #[test]
    fn oplock_break_forms_round_trip_and_unknown_size_is_rejected() {
        let forms = [
            OplockBreak::Oplock {
                oplock_level: OplockLevel::II,
                file_id: FileId {
                    persistent: 1,
                    volatile: 2,
                },
            },
            OplockBreak::LeaseBreakNotification(LeaseBreakNotification {
                new_epoch: 2,
                flags: LeaseBreakFlags::ACK_REQUIRED,
                lease_key: [9; 16],
                current_lease_state: LeaseState::READ_CACHING | LeaseState::WRITE_CACHING,
                new_lease_state: LeaseState::READ_CACHING,
                break_reason: 0,
                access_mask_hint: AccessMask::empty(),
                share_mask_hint: ShareAccess::empty(),
            }),
            OplockBreak::LeaseAck {
                flags: 0,
                lease_key: [9; 16],
                lease_state: LeaseState::READ_CACHING,
                lease_duration: 0,
            },
        ];
        for (f, size) in forms.iter().zip([24usize, 44, 36]) {
            let msg = test_msg(Command::OPLOCK_BREAK, |v| f.encode(v));
            assert_eq!(msg.len(), 64 + size);
            assert_eq!(&OplockBreak::decode(&msg).unwrap(), f);
            assert_prefixes_fail(&msg, msg.len(), |m| OplockBreak::decode(m).is_ok());
        }
        let mut bad = test_msg(Command::OPLOCK_BREAK, |v| forms[0].encode(v));
        bad[64] = 25;
        assert_eq!(
            OplockBreak::decode(&bad),
            Err(WireError::Invalid("StructureSize"))
        );
    }

    #[test]
    fn change_notify_round_trips() {
        let q = ChangeNotifyRequest {
            flags: ChangeNotifyFlags::WATCH_TREE,
            output_buffer_length: 2048,
            file_id: FileId::ANY,
            completion_filter: CompletionFilter::FILE_NAME | CompletionFilter::DIR_NAME,
        };
        let msg = test_msg(Command::CHANGE_NOTIFY, |v| q.encode(v));
        assert_eq!(msg.len(), 64 + 32);
        assert_eq!(ChangeNotifyRequest::decode(&msg).unwrap(), q);
        assert_prefixes_fail(&msg, msg.len(), |m| ChangeNotifyRequest::decode(m).is_ok());
        let buf = [1u8; 16];
        let r = ChangeNotifyResponse { buffer: &buf };
        let msg = test_msg(Command::CHANGE_NOTIFY, |v| r.encode(v));
        assert_eq!(ChangeNotifyResponse::decode(&msg).unwrap(), r);
        let empty = ChangeNotifyResponse { buffer: &[] };
        let msg = test_msg(Command::CHANGE_NOTIFY, |v| empty.encode(v));
        assert_eq!(ChangeNotifyResponse::decode(&msg).unwrap(), empty);
    }

    #[test]
    fn error_response_is_nine_bytes_when_empty_and_round_trips_with_data() {
        let msg = test_msg(Command::CREATE, |v| ErrorResponse::EMPTY.encode(v));
        assert_eq!(msg.len(), 64 + 9);
        assert_eq!(ErrorResponse::decode(&msg).unwrap(), ErrorResponse::EMPTY);
        // STATUS_BUFFER_TOO_SMALL carries the required size as 4 bytes of ErrorData.
        let need = 512u32.to_le_bytes();
        let e = ErrorResponse {
            error_context_count: 0,
            error_data: &need,
        };
        let msg = test_msg(Command::QUERY_INFO, |v| e.encode(v));
        assert_eq!(ErrorResponse::decode(&msg).unwrap(), e);
        let mut bad = msg;
        bad[68] = 200;
        assert!(ErrorResponse::decode(&bad).is_err());
    }

    #[test]
    fn error_contexts_round_trip_with_alignment() {
        let list = [
            ErrorContext {
                error_id: 0,
                data: b"abc",
            },
            ErrorContext {
                error_id: 0x7272_7473,
                data: b"12345678",
            },
        ];
        let mut b = Vec::new();
        ErrorContext::encode_list(&list, &mut b, 0);
        assert_eq!(b.len(), 16 + 8 + 8);
        assert_eq!(ErrorContext::decode_list(&b, 2).unwrap(), list);
        assert!(ErrorContext::decode_list(&b, 3).is_err());
    }
}
