//! Laying replies out as frames: transport header, 8-byte aligned compound
//! members, signatures, room for a transform header.

use ringshare_crypto::sign::{NonceInfo, SigningKey};
use ringshare_wire::consts::HeaderFlags;
use ringshare_wire::framing;
use ringshare_wire::header;
use ringshare_wire::transform::TRANSFORM_HEADER_LEN;
use ringshare_wire::NtStatus;

use super::{BuiltReply, FileRange};
use crate::io::Frame;
use crate::spare::SpareBufs;

/// Prefix a single message with the transport header.
pub(super) fn frame_bytes(msg: Vec<u8>) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + msg.len());
    framing::put_frame_header(&mut out, msg.len());
    out.extend_from_slice(&msg);
    out
}

/// Lay out a chain of replies as one frame: 8-byte aligned members with
/// NextCommand set, each signed over its own bytes (padding included), the
/// data of a READ kept in its own part.
/// Frames the replies of a job: the parts to send back to back, and the file
/// range that follows them when the last reply's data comes from a file.
///
/// `room` bytes (see [`seal_room`]) are left after the transport header for a
/// transform header.
pub(super) fn build_frame(
    replies: &mut Vec<BuiltReply>,
    room: usize,
    spare: &mut SpareBufs,
) -> (Frame, Option<FileRange>) {
    if let [r] = replies.as_slice() {
        if r.data.is_some()
            && r.data_headroom > 0
            && r.data_headroom == 4 + room + 64 + r.body.len()
        {
            if let Some(r) = replies.pop() {
                return (Frame::One(build_in_place(r, room, spare)), None);
            }
        }
    }
    if let [r] = replies.as_slice() {
        if r.data.is_none() && r.file.is_none() {
            if let Some(r) = replies.pop() {
                return (Frame::One(build_alone(r, room, spare)), None);
            }
        }
    }
    let n = replies.len();
    // A list only when some READ data stays in its own buffer.
    let mut parts: Vec<Vec<u8>> = Vec::new();
    let bodies: usize = replies.iter().map(|r| r.body.len()).sum();
    let mut cur = spare.take(4 + room + 72 * n + bodies);
    cur.resize(4 + room, 0);
    let mut total = 0usize;
    let mut file = None;
    for (i, r) in replies.drain(..).enumerate() {
        let last = i + 1 == n;
        let data_len = match (&r.data, &r.file) {
            (Some(d), _) => d.len(),
            (None, Some((_, _, len))) if last => *len,
            _ => 0,
        };
        if last {
            file = r.file;
        }
        let len = 64 + r.body.len() + data_len;
        // Every reply of a compound is padded to 8 bytes, the last too, as
        // Windows and Samba do (smbtorture smb2.compound.compound-padding);
        // not a reply alone, nor one whose data follows from a file.
        let padded = if last && (n == 1 || file.is_some()) {
            len
        } else {
            len.next_multiple_of(8)
        };
        let mut hdr = r.hdr;
        hdr.next_command = if last { 0 } else { padded as u32 };
        if r.sign_key.is_some() {
            hdr.flags.insert(HeaderFlags::SIGNED);
        }
        let start = cur.len();
        hdr.encode(&mut cur);
        cur.extend_from_slice(&r.body);
        spare.give(r.body);
        let pad = padded - len;
        let mut data = r.data;
        if let Some(d) = data.as_mut().filter(|_| r.data_headroom > 0) {
            // Room for an in-place build that this frame could not use.
            d.drain(..r.data_headroom.min(d.len()));
        }
        if let Some(key) = r.sign_key {
            let nonce = NonceInfo {
                message_id: hdr.message_id,
                server_to_client: true,
                cancel: false,
            };
            let padding = vec![0u8; pad];
            let sig = match &data {
                Some(d) => key.sign(&[&cur[start..], d, &padding], nonce),
                None => key.sign(&[&cur[start..], &padding], nonce),
            };
            header::patch_signature(&mut cur, start, &sig);
        }
        match data {
            Some(d) => {
                parts.push(std::mem::take(&mut cur));
                parts.push(d);
                cur = vec![0u8; pad];
            }
            None => cur.resize(cur.len() + pad, 0),
        }
        total += padded;
    }
    let hdr = framing::frame_header(room + total).unwrap_or([0, 0xff, 0xff, 0xff]);
    if parts.is_empty() {
        cur[..4].copy_from_slice(&hdr);
        return (Frame::One(cur), file);
    }
    if !cur.is_empty() {
        parts.push(cur);
    }
    parts[0][..4].copy_from_slice(&hdr);
    parts.retain(|p| !p.is_empty());
    (Frame::Parts(parts), file)
}

/// A reply alone in its frame, its body its only part (most replies): the frame is the
/// transport header, `room`, the SMB2 header and the body, signed as it lies (no padding, no
/// NextCommand).
fn build_alone(r: BuiltReply, room: usize, spare: &mut SpareBufs) -> Vec<u8> {
    let len = 64 + r.body.len();
    let mut buf = spare.take(4 + room + len);
    buf.extend_from_slice(&framing::frame_header(room + len).unwrap_or([0, 0xff, 0xff, 0xff]));
    buf.resize(4 + room, 0);
    let mut hdr = r.hdr;
    hdr.next_command = 0;
    if r.sign_key.is_some() {
        hdr.flags.insert(HeaderFlags::SIGNED);
    }
    buf.extend_from_slice(&hdr.to_bytes());
    buf.extend_from_slice(&r.body);
    spare.give(r.body);
    if let Some(key) = r.sign_key {
        sign_whole(&mut buf, room, hdr.message_id, &key);
    }
    buf
}

/// Sign the one message of a frame laid out as one piece, after its transport header and
/// `room`.
fn sign_whole(buf: &mut [u8], room: usize, message_id: u64, key: &SigningKey) {
    let nonce = NonceInfo {
        message_id,
        server_to_client: true,
        cancel: false,
    };
    let sig = key.sign(&[&buf[4 + room..]], nonce);
    header::patch_signature(buf, 4 + room, &sig);
}

/// Bytes a frame leaves after its transport header for the transform header
/// of an encrypted reply (sealed in place by `send_frame`).
pub(super) fn seal_room(encrypted: Option<u64>) -> usize {
    if encrypted.is_some() {
        TRANSFORM_HEADER_LEN
    } else {
        0
    }
}

/// A reply alone in its frame whose data buffer starts with exactly enough
/// room for the transport header, `room` bytes for a transform header, the
/// SMB2 header and body: those are written in front of the data, and the frame
/// is signed (or sealed, by `send_frame`) and sent as one piece (no scattered
/// input, no second iovec, no copy).
fn build_in_place(r: BuiltReply, room: usize, spare: &mut SpareBufs) -> Vec<u8> {
    let mut buf = r.data.unwrap_or_default();
    let h = r.data_headroom;
    let mut hdr = r.hdr;
    hdr.next_command = 0;
    if r.sign_key.is_some() {
        hdr.flags.insert(HeaderFlags::SIGNED);
    }
    let mut front = spare.take(h);
    let frame = framing::frame_header(buf.len() - 4).unwrap_or([0, 0xff, 0xff, 0xff]);
    front.extend_from_slice(&frame);
    front.resize(4 + room, 0);
    hdr.encode(&mut front);
    front.extend_from_slice(&r.body);
    buf[..h].copy_from_slice(&front);
    spare.give(front);
    spare.give(r.body);
    if let Some(key) = r.sign_key {
        sign_whole(&mut buf, room, hdr.message_id, &key);
    }
    buf
}

/// Count a final reply: its command and status, its latency, and a READ's
/// bytes (spliced from the file or sent from memory).
pub(super) fn reply_sent(
    m: &crate::metrics::Metrics,
    command: ringshare_wire::consts::Command,
    reply: &super::Reply,
    arrived_us: u64,
) {
    m.answered(command.0, reply.status, arrived_us);
    if command == ringshare_wire::consts::Command::READ && reply.status == NtStatus::SUCCESS {
        match (&reply.file, &reply.data) {
            (Some((_, _, len)), _) => m.read(*len as u64, true),
            (None, Some(d)) => m.read(
                d.len().saturating_sub(reply.data_headroom as usize) as u64,
                false,
            ),
            (None, None) => {}
        }
    }
}
