//! Helpers shared by the fuzz targets in `fuzz_targets/`.
#![forbid(unsafe_code)]

use std::sync::Arc;

use ringshare_auth::UserLookup;
use ringshare_core::{EncryptPolicy, ServerConfig, ServerState, ShareDef, SigningPolicy};
use ringshare_vfs::memory::MemShare;

/// Split `data` into pieces, each `[u16 LE length][bytes]`; a length past the
/// end takes what is left.
pub fn length_prefixed(mut data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while data.len() >= 2 {
        let n = usize::from(u16::from_le_bytes([data[0], data[1]]));
        let rest = &data[2..];
        let n = n.min(rest.len());
        out.push(&rest[..n]);
        data = &rest[n..];
    }
    out
}

/// The message's first 64 bytes (the SMB2 header), or all of it when shorter:
/// what an encoder that appends a body is given to append to.
pub fn header_of(msg: &[u8]) -> Vec<u8> {
    msg[..msg.len().min(64)].to_vec()
}

/// decode(encode(decode(x))) == decode(x) for a message body type: `decode`
/// takes the whole message (header + body), `encode` appends the body.
/// With a third argument, a closure that clears in the first decode what the
/// encoder documents it does not write.
#[macro_export]
macro_rules! round_trip_msg {
    ($ty:ty, $msg:expr) => {
        $crate::round_trip_msg!($ty, $msg, |_: &mut $ty| {})
    };
    ($ty:ty, $msg:expr, $not_encoded:expr) => {{
        let msg: &[u8] = $msg;
        if let Ok(mut first) = <$ty>::decode(msg) {
            ($not_encoded)(&mut first);
            let mut out = $crate::header_of(msg);
            first.encode(&mut out);
            let second = <$ty>::decode(&out)
                .unwrap_or_else(|e| panic!("{} re-encoded does not decode: {e}", stringify!($ty)));
            assert_eq!(first, second, "{} does not round-trip", stringify!($ty));
        }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_prefixed_splits_and_truncates_the_last_piece() {
        let data = [2, 0, b'a', b'b', 5, 0, b'c'];
        assert_eq!(length_prefixed(&data), vec![&b"ab"[..], &b"c"[..]]);
    }
}

/// The one user of the fuzzed servers: alice, password `secret`.
pub struct Users;

impl UserLookup for Users {
    fn nt_hash(&self, user: &str) -> Option<[u8; 16]> {
        user.eq_ignore_ascii_case("alice")
            .then(|| ringshare_auth::nt_hash("secret"))
    }
}

/// A server over `mem` whose shares (`share`, read-only `ro`, `sealed`) are all guest ok,
/// so an anonymous logon reaches every command.
pub fn guest_server(mem: &MemShare) -> Arc<ServerState> {
    let share = |name: &str, read_only: bool, encrypt: EncryptPolicy| {
        Arc::new(ShareDef {
            name: name.to_string(),
            comment: String::new(),
            backend: Arc::new(mem.clone()),
            read_only,
            guest_ok: true,
            rules: Default::default(),
            template: None,
            nt_acl_xattr: true,
            durable_handles: true,
            continuous_availability: false,
            root_key: Default::default(),
            change_notify: true,
            smb3_unix_extensions: true,
            compress_data: false,
            posix_locking: true,
            fs_offload: None,
            strict_locking: None,
            streams: true,
            fruit: None,
            shadow: None,
            quota: None,
            encrypt,
        })
    };
    let config = ServerConfig {
        dialect_min: 0x0202,
        dialect_max: 0x0311,
        signing: SigningPolicy::IfRequired,
        encrypt: EncryptPolicy::IfRequired,
        server_guid: [7; 16],
        netbios_name: "RINGSHARE".into(),
        workgroup: "WORKGROUP".into(),
        dns_name: "ringshare.test".into(),
        map_bad_user_to_guest: true,
        guest_enabled: true,
        shares: vec![
            share("share", false, EncryptPolicy::IfRequired),
            share("ro", true, EncryptPolicy::IfRequired),
            share("sealed", false, EncryptPolicy::Required),
        ],
        start_filetime: 133_000_000_000_000_000,
        handshake_timeout_ms: 30_000,
        durable_v1_timeout_ms: 960_000,
        idle_timeout_ms: 15 * 60_000,
        multi_channel: true,
        lock_sequence_checking: true,
        io_sizes: Default::default(),
        guest_account: "nobody".into(),
        failed_logon_backoff: 0,
        smb_encryption_over_quic: false,
        directory_leases: true,
        posix_extensions: true,
        compression: ringshare_core::DEFAULT_COMPRESSION.to_vec(),
        homes: None,
    };
    ServerState::new(config, Arc::new(Users))
}
