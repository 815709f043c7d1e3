//! SPNEGO and its DER ([MS-SPNG], RFC 4178): the token decoder, a full walk
//! of the TLV tree, negTokenResp round trips, and the server side of a whole
//! SESSION_SETUP exchange fed one token after another.
//! Input: tokens, each [u16 LE length][token].
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringshare_auth::gss::ServerAuth;
use ringshare_auth::ntlm::ServerConfig;
use ringshare_auth::spnego::{self, Der, NegToken};
use ringshare_auth::UserLookup;
use ringshare_fuzz::length_prefixed;

struct Users;

impl UserLookup for Users {
    fn nt_hash(&self, user: &str) -> Option<[u8; 16]> {
        user.eq_ignore_ascii_case("alice")
            .then(|| ringshare_auth::nt_hash("secret"))
    }
}

/// Visit every TLV; constructed values (bit 0x20) are entered.
fn walk(mut d: Der<'_>, seen: &mut usize) {
    while !d.is_empty() {
        let Ok(t) = d.read() else { return };
        *seen += 1;
        assert!(*seen <= spnego::TOKEN_SIZE_MAX / 2, "more TLVs than bytes");
        if t.tag & 0x20 != 0 {
            if let Ok(inner) = d.enter(&t) {
                walk(inner, seen);
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let tokens = length_prefixed(data);
    let cfg = ServerConfig::default();
    let mut auth = ServerAuth::new(&cfg, [0x22; 8], 133_500_000_000_000_000);
    for token in tokens {
        if let Ok(d) = Der::new(token) {
            walk(d, &mut 0);
        }
        if let Ok(NegToken::Resp(r)) = spnego::decode(token) {
            let again = spnego::decode(&spnego::encode_resp(&r));
            assert_eq!(again, Ok(NegToken::Resp(r)), "negTokenResp round trip");
        }
        if auth.step(token, &Users).is_err() {
            break;
        }
    }
});
