//! What a request must pass before it is dispatched, beyond the session and
//! tree lookups: the channel sequence of a 3.x open ([MS-SMB2] 3.3.5.2.10)
//! and the signature ([MS-SMB2] 3.3.5.2.4).

use super::handles;
use super::*;

impl Connection {
    /// [MS-SMB2] 3.3.5.2.10: a WRITE, SET_INFO or IOCTL on a 3.x open
    /// carries the client's ChannelSequence; one older than the open's
    /// (a request from before a channel failover) fails with
    /// STATUS_FILE_NOT_AVAILABLE, a newer one becomes the open's. Requests
    /// whose FileId names no open are left to the command to refuse.
    pub(super) fn check_channel_sequence(&mut self, req: &Req<'_>) -> Result<(), NtStatus> {
        let fid_offset = match req.hdr.command {
            Command::WRITE | Command::SET_INFO => 16,
            Command::IOCTL => 8,
            _ => return Ok(()),
        };
        if self.core.dialect().is_none_or(|d| d.0 < Dialect::SMB3_0.0) {
            return Ok(());
        }
        let start = 64 + fid_offset;
        let Some(b) = req.msg.get(start..start + 16) else {
            return Ok(());
        };
        let mut p = [0u8; 8];
        let mut v = [0u8; 8];
        p.copy_from_slice(&b[..8]);
        v.copy_from_slice(&b[8..]);
        let fid = ringshare_wire::FileId {
            persistent: u64::from_le_bytes(p),
            volatile: u64::from_le_bytes(v),
        };
        let Ok((_, volatile)) = handles::resolve(req, fid) else {
            return Ok(());
        };
        let Some(open) = handles::by_id(&self.core, req.session_id, volatile) else {
            return Ok(());
        };
        let seq = req.hdr.channel_sequence();
        let mut st = lock(&open.state);
        // Sequence numbers wrap: "older" is a negative 16-bit difference.
        let diff = seq.wrapping_sub(st.channel_sequence) as i16;
        if diff < 0 {
            return Err(NtStatus::FILE_NOT_AVAILABLE);
        }
        st.channel_sequence = seq;
        Ok(())
    }

    /// [MS-SMB2] 3.3.5.2.4: verify a signed request; refuse an unsigned one on
    /// a session that requires signing.
    /// `required`: whether the session requires signing, when the caller read it under the
    /// session's lock for a valid session on a channel that is not a binding (an unsigned
    /// request then needs no second look at the session).
    pub(super) fn verify_signature(
        &self,
        req: &Req<'_>,
        setup: bool,
        required: Option<bool>,
    ) -> Result<(), NtStatus> {
        if req.encrypted {
            // Authenticated by the cipher; encrypted messages carry no signature.
            return Ok(());
        }
        if let (false, false, Some(required)) = (req.hdr.is_signed(), setup, required) {
            return if required {
                Err(NtStatus::ACCESS_DENIED)
            } else {
                Ok(())
            };
        }
        let Some(ch) = self.core.sessions.get(&req.session_id) else {
            return Ok(());
        };
        if ch.binding {
            // The legs of a binding are signed with Session.SigningKey and
            // checked by SESSION_SETUP itself ([MS-SMB2] 3.3.5.5.2).
            return Ok(());
        }
        let signed = req.hdr.is_signed();
        if !signed {
            let (required, valid) = {
                let s = lock(&ch.session);
                (s.signing_required, s.is_valid())
            };
            // A SESSION_SETUP may come unsigned before the channel has a key
            // (the first logon, a binding); after that, on a session that
            // requires signing, it may not (an unsigned re-authentication).
            if required && valid && (!setup || ch.signing_key.is_some()) {
                return Err(NtStatus::ACCESS_DENIED);
            }
            return Ok(());
        }
        // Channel.SigningKey ([MS-SMB2] 3.3.5.2.4).
        let Some(key) = ch.signing_key.as_ref() else {
            // Signed before a key exists (first SESSION_SETUP legs): nothing to check.
            return if setup {
                Ok(())
            } else {
                Err(NtStatus::ACCESS_DENIED)
            };
        };
        if signature_ok(key, req) {
            Ok(())
        } else {
            tracing::debug!(peer = %self.core.peer, mid = req.hdr.message_id, "bad signature");
            Err(NtStatus::ACCESS_DENIED)
        }
    }
}
