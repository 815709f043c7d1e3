//! SMB 3.1.1 compression on the wire ([MS-SMB2] 3.3.5.2.1.2, 3.1.4.4): decompressing a
//! received COMPRESSION_TRANSFORM message into the normal request path, and compressing a READ
//! response the client asked to have compressed. What was agreed, and whether compressing pays,
//! is [`crate::exchange::compress`].

use ringshare_compress as codec;
use ringshare_wire::framing;

use super::Connection;
use crate::exchange::compress::{
    agreed, compress_if_it_pays, skip_after, CompressAsk, READ_PLAIN_PREFIX,
};
use crate::exchange::handles;
use crate::io::Frame;

impl Connection {
    /// A received message that starts `0xFC 'SMB'` (after decryption, if it
    /// came encrypted): decompressed with the receiver's checks of [MS-SMB2]
    /// 3.3.5.2.1.2, bounded by the connection's MaxRead/Write/TransactSize and
    /// by the largest frame it takes now (64 KiB before a logon). `None`: the
    /// connection is closing, with a log line saying why.
    pub(super) fn decompress_received(&mut self, msg: &[u8]) -> Option<Vec<u8>> {
        let Some(c) = agreed(&self.core) else {
            self.disconnect("compressed message without compression negotiated");
            return None;
        };
        let io = handles::io_sizes(&self.core);
        let limit = codec::size_limit(io.read, io.write, io.trans).min(self.frame_len_max());
        match codec::decompress_message(msg, &c.ids, limit) {
            Ok(out) => Some(out),
            Err(why) => {
                if self.core.log_ok(crate::loglimit::LogKind::ClosedConnection) {
                    tracing::info!(peer = %self.core.peer, "closing a connection: {why}");
                }
                self.disconnect(&format!("bad compressed message: {why}"));
                None
            }
        }
    }

    /// The frame of a finished job whose one reply answers a READ that asked
    /// for compression ([`crate::exchange::compress::read_asks`]): compressed in place of the
    /// plain one when it pays.
    /// `room` is the room for a transform header after the transport header
    /// (the frame is sealed after this, by `send_frame`: compress, then
    /// encrypt, as [MS-SMB2] 3.1.4.4 orders it).
    pub(super) fn compress_reply(&mut self, frame: Frame, room: usize, ask: &CompressAsk) -> Frame {
        let Some(c) = agreed(&self.core) else {
            return frame;
        };
        let bytes = frame.into_bytes();
        let msg = bytes.get(4 + room..).unwrap_or_default();
        // Too short to try (the end of a file): says nothing of the data.
        if msg.len() < READ_PLAIN_PREFIX + codec::message::COMPRESS_MIN {
            return Frame::One(bytes);
        }
        let packed = compress_if_it_pays(c, msg, READ_PLAIN_PREFIX, &ask.holes);
        {
            let mut st = crate::server::lock(&ask.open.state);
            st.compress_misses = match packed {
                Some(_) => 0,
                None => st.compress_misses.saturating_add(1),
            };
            st.compress_skip = match st.compress_misses {
                0 => 0,
                m => skip_after(m),
            };
        }
        let Some(packed) = packed else {
            return Frame::One(bytes);
        };
        let Ok(hdr) = framing::frame_header(room + packed.len()) else {
            return Frame::One(bytes);
        };
        let mut out = self.core.spare.take(4 + room + packed.len());
        out.extend_from_slice(&hdr);
        out.resize(4 + room, 0);
        out.extend_from_slice(&packed);
        self.core.spare.give(bytes);
        Frame::One(out)
    }
}
