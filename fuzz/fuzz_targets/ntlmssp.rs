//! NTLMSSP messages ([MS-NLMP] 2.2.1): NEGOTIATE as the first message of an
//! exchange, and AUTHENTICATE after a well-formed NEGOTIATE. A fuzzer cannot
//! produce a valid NTLMv2 response, so AUTHENTICATE must never succeed for a
//! named account.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringshare_auth::ntlm::{AuthKind, NtlmServer, ServerConfig};
use ringshare_auth::UserLookup;

struct Users;

impl UserLookup for Users {
    fn nt_hash(&self, user: &str) -> Option<[u8; 16]> {
        user.eq_ignore_ascii_case("alice")
            .then(|| ringshare_auth::nt_hash("secret"))
    }
}

/// NEGOTIATE_MESSAGE with NTLMSSP_NEGOTIATE_UNICODE | NTLM | ALWAYS_SIGN |
/// EXTENDED_SESSIONSECURITY | KEY_EXCH | 128 | 56 and no domain/workstation.
const NEGOTIATE: [u8; 32] = [
    b'N', b'T', b'L', b'M', b'S', b'S', b'P', 0, 1, 0, 0, 0, 0x05, 0x82, 0x08, 0xa2, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
];

fn server() -> NtlmServer {
    let cfg = ServerConfig {
        netbios_domain: "WORKGROUP".into(),
        netbios_computer: "RINGSHARE".into(),
        dns_domain: "ringshare.test".into(),
        dns_computer: "ringshare.test".into(),
    };
    NtlmServer::new(&cfg, [0x11; 8], 133_500_000_000_000_000)
}

fuzz_target!(|data: &[u8]| {
    let _ = server().challenge(data);

    let mut s = server();
    s.challenge(&NEGOTIATE)
        .expect("the fixed NEGOTIATE is accepted");
    if let Ok(r) = s.authenticate(data, &Users) {
        assert_eq!(
            r.kind,
            AuthKind::Anonymous,
            "a forged AUTHENTICATE logged on {r:?}"
        );
    }
});
