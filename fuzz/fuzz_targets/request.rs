//! Every command's request decoder ([MS-SMB2] 2.2.3 - 2.2.39), the response
//! decoders the client side uses, and the SMB1 NEGOTIATE a client opens with.
//! The first input byte picks the decoder (the command code; 0x80 | code for
//! the response; 0x20 for SMB1; anything else: the message header's own
//! command); the rest is the whole message, header included. Every request
//! and response must round-trip (the server encodes what the client decodes).
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringshare_fuzz::round_trip_msg;
use ringshare_wire::create::{CloseRequest, CloseResponse, CreateRequest, CreateResponse};
use ringshare_wire::dir::{QueryDirectoryRequest, QueryDirectoryResponse};
use ringshare_wire::file::{
    FlushRequest, FlushResponse, ReadRequest, ReadResponse, WriteRequest, WriteResponse,
};
use ringshare_wire::header::Header;
use ringshare_wire::info::{QueryInfoRequest, QueryInfoResponse, SetInfoRequest, SetInfoResponse};
use ringshare_wire::ioctl::{IoctlRequest, IoctlResponse};
use ringshare_wire::lock::{LockRequest, LockResponse};
use ringshare_wire::misc::{
    CancelRequest, ChangeNotifyRequest, ChangeNotifyResponse, Echo, ErrorResponse, OplockBreak,
};
use ringshare_wire::negotiate::{NegotiateRequest, NegotiateResponse};
use ringshare_wire::session::{
    LogoffRequest, LogoffResponse, SessionSetupRequest, SessionSetupResponse,
};
use ringshare_wire::smb1::{is_smb1_negotiate, Smb1Negotiate};
use ringshare_wire::tree::{
    TreeConnectRequest, TreeConnectResponse, TreeDisconnectRequest, TreeDisconnectResponse,
};

fn request(cmd: u8, msg: &[u8]) {
    match cmd {
        0 => round_trip_msg!(NegotiateRequest, msg),
        1 => round_trip_msg!(SessionSetupRequest, msg),
        2 => round_trip_msg!(LogoffRequest, msg),
        3 => round_trip_msg!(TreeConnectRequest, msg),
        4 => round_trip_msg!(TreeDisconnectRequest, msg),
        5 => round_trip_msg!(CreateRequest, msg),
        6 => round_trip_msg!(CloseRequest, msg),
        7 => round_trip_msg!(FlushRequest, msg),
        8 => round_trip_msg!(ReadRequest, msg),
        // The encoder does not write WriteChannelInfo (no RDMA channels).
        9 => round_trip_msg!(WriteRequest, msg, |w: &mut WriteRequest| w.channel_info =
            &[]),
        10 => round_trip_msg!(LockRequest, msg),
        11 => round_trip_msg!(IoctlRequest, msg),
        12 => round_trip_msg!(CancelRequest, msg),
        13 => round_trip_msg!(Echo, msg),
        14 => round_trip_msg!(QueryDirectoryRequest, msg),
        15 => round_trip_msg!(ChangeNotifyRequest, msg),
        16 => round_trip_msg!(QueryInfoRequest, msg),
        17 => round_trip_msg!(SetInfoRequest, msg),
        18 => round_trip_msg!(OplockBreak, msg),
        _ => {}
    }
}

fn response(cmd: u8, msg: &[u8]) {
    match cmd {
        0 => round_trip_msg!(NegotiateResponse, msg),
        1 => round_trip_msg!(SessionSetupResponse, msg),
        2 => round_trip_msg!(LogoffResponse, msg),
        3 => round_trip_msg!(TreeConnectResponse, msg),
        4 => round_trip_msg!(TreeDisconnectResponse, msg),
        5 => round_trip_msg!(CreateResponse, msg),
        6 => round_trip_msg!(CloseResponse, msg),
        7 => round_trip_msg!(FlushResponse, msg),
        8 => round_trip_msg!(ReadResponse, msg),
        9 => round_trip_msg!(WriteResponse, msg),
        10 => round_trip_msg!(LockResponse, msg),
        11 => round_trip_msg!(IoctlResponse, msg),
        14 => round_trip_msg!(QueryDirectoryResponse, msg),
        15 => round_trip_msg!(ChangeNotifyResponse, msg),
        16 => round_trip_msg!(QueryInfoResponse, msg),
        17 => round_trip_msg!(SetInfoResponse, msg),
        _ => round_trip_msg!(ErrorResponse, msg),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, msg)) = data.split_first() else {
        return;
    };
    match sel {
        0..=18 => request(sel, msg),
        0x80..=0x92 => response(sel & 0x7f, msg),
        0x20 => {
            let _ = is_smb1_negotiate(msg);
            let _ = Smb1Negotiate::decode(msg);
        }
        _ => {
            if let Ok(h) = Header::decode(msg) {
                let cmd = u8::try_from(h.command.0).unwrap_or(0xff);
                if h.flags
                    .contains(ringshare_wire::consts::HeaderFlags::SERVER_TO_REDIR)
                {
                    response(cmd, msg);
                } else {
                    request(cmd, msg);
                }
            }
        }
    }
});
