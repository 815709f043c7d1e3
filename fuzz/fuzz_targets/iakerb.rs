//! IAKerb (draft-ietf-kitten-iakerb, and MIT krb5 before 1.22's spelling): `[u16 len][token]...`
//! fed as the client's tokens of one SESSION_SETUP exchange to a server of realm RS.TEST that
//! accepts Kerberos; each KDC request the exchange asks for is answered with a fixed KRB-ERROR
//! (PREAUTH_REQUIRED, as MIT's KDC sent it). Each token also goes through the proxy-token parser
//! and the KRB-ERROR reader alone.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use ringshare_auth::gss::{Kerberos, ServerAuth, ServerStep};
use ringshare_auth::krb5::acceptor::{AcceptorConfig, Fresh};
use ringshare_auth::krb5::iakerb::{krb_error_code, parse_proxy, KDC_REPLY_MAX, LEGS_MAX};
use ringshare_auth::krb5::keytab::{Keytab, KeytabEntry};
use ringshare_auth::krb5::replay::ReplayCache;
use ringshare_auth::ntlm::ServerConfig;
use ringshare_auth::UserLookup;

/// MIT's KDC's answer to an AS-REQ without pre-authentication.
const PREAUTH_REQUIRED: &str = concat!(
    "7e81de3081dba003020105a10302011ea411180f32303236313132383133333232375aa5050203073669a603",
    "020119a7091b0752532e54455354a8163014a003020101a10d300b1b097273696e7465726f70a9091b075253",
    "2e54455354aa1c301aa003020102a11330111b066b72627467741b0752532e54455354ab101b0e4e45454445",
    "445f50524541555448ac520450304e300aa10402020088a20204003026a103020113a21f041d301b3019a003",
    "020112a1121b1052532e544553547273696e7465726f703009a103020102a2020400300da10402020085a205",
    "04034d4954",
);

struct NoUsers;
impl UserLookup for NoUsers {
    fn nt_hash(&self, _: &str) -> Option<[u8; 16]> {
        None
    }
}

fn kerberos() -> &'static Kerberos {
    static K: OnceLock<Kerberos> = OnceLock::new();
    K.get_or_init(|| {
        let entry = |enctype: i32, n: usize| KeytabEntry {
            components: vec!["cifs".into(), "fs.rs.test".into()],
            realm: "RS.TEST".into(),
            kvno: 2,
            enctype,
            key: vec![0x42; n],
        };
        Kerberos {
            config: Arc::new(AcceptorConfig {
                keytab: Arc::new(Keytab {
                    entries: vec![entry(18, 32), entry(17, 16)],
                }),
                realm: "RS.TEST".into(),
                skew_secs: 300,
                allow_rc4: false,
            }),
            replay: Arc::new(ReplayCache::new()),
            now_unix: 1_795_872_747,
            fresh: Fresh {
                subkey: [0xa5; 32],
                seq: 1,
            },
        }
    })
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .filter_map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok())
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let cfg = ServerConfig {
        netbios_domain: "RS".into(),
        netbios_computer: "FS".into(),
        dns_domain: String::new(),
        dns_computer: "fs.rs.test".into(),
    };
    let mut server = ServerAuth::new(&cfg, [1; 8], 0).with_kerberos(kerberos().clone());
    let reply = unhex(PREAUTH_REQUIRED);
    let mut rest = data;
    let mut asked = 0;
    while rest.len() >= 2 {
        let len = usize::from(u16::from_le_bytes([rest[0], rest[1]])).min(rest.len() - 2);
        let token = &rest[2..2 + len];
        rest = &rest[2 + len..];
        if let Ok(p) = parse_proxy(token) {
            assert!(p.message.len() <= token.len());
        }
        let _ = krb_error_code(token);
        if let Some(req) = server.kdc_request(token) {
            assert_eq!(req.realm, "RS.TEST", "only the own realm is relayed");
            asked += 1;
            assert!(asked <= LEGS_MAX, "more KDC round trips than the bound");
            server.kdc_answered(req, Ok(reply.clone()));
        }
        match server.step(token, &NoUsers) {
            Ok(ServerStep::Continue(t)) => assert!(t.len() <= KDC_REPLY_MAX + 1024),
            Ok(ServerStep::Done { .. }) | Err(_) => break,
        }
    }
});
