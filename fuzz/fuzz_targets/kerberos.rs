//! Kerberos ([MS-KILE], RFC 4120/4121, RFC 4757): the keytab parser, the PAC directory, its
//! server signature (AES and RC4-HMAC keys), its NDR logon info, its UPN/DNS info and the domain
//! user made of them, the GSS framing and the MIC tokens (RFC 4121, RFC 4757), and the whole
//! acceptor fed an AP-REQ with a fixed keytab (AES and RC4 keys, RC4 allowed) and a shared
//! replay cache. The first byte picks the parser; the rest is its input.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use ringshare_auth::krb5::acceptor::{accept, AcceptorConfig, Fresh};
use ringshare_auth::krb5::domain::{domain_logon, UpnDnsInfo};
use ringshare_auth::krb5::keytab::{Keytab, KeytabEntry};
use ringshare_auth::krb5::logon_info::LogonInfo;
use ringshare_auth::krb5::mic;
use ringshare_auth::krb5::pac::{buffer, Pac};
use ringshare_auth::krb5::replay::ReplayCache;
use ringshare_auth::krb5::{gss_unwrap, TOKEN_SIZE_MAX};

fn config() -> &'static (AcceptorConfig, ReplayCache) {
    static C: OnceLock<(AcceptorConfig, ReplayCache)> = OnceLock::new();
    C.get_or_init(|| {
        let entry = |kvno: u32, enctype: i32, n: usize| KeytabEntry {
            components: vec!["cifs".into(), "fs.rs.test".into()],
            realm: "RS.TEST".into(),
            kvno,
            enctype,
            key: vec![0x42; n],
        };
        let keytab = Keytab {
            entries: vec![
                entry(2, 18, 32),
                entry(2, 17, 16),
                entry(3, 18, 32),
                entry(4, 23, 16),
            ],
        };
        (
            AcceptorConfig {
                keytab: Arc::new(keytab),
                realm: "RS.TEST".into(),
                skew_secs: 300,
                allow_rc4: true,
            },
            ReplayCache::new(),
        )
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, input)) = data.split_first() else {
        return;
    };
    match which % 4 {
        0 => {
            if let Ok(k) = Keytab::parse(input) {
                assert_eq!(Keytab::parse(&k.encode()), Ok(k), "keytab round trip");
            }
        }
        1 => {
            if let Ok(p) = Pac::parse(input) {
                let _ = p.verify_server_signature(&[0x42; 32], 18);
                let _ = p.verify_server_signature(&[0x42; 16], 23);
                let _ = p.check_client_info("alice", 1_795_000_000);
                if let Some(Ok(info)) = p.buffer(buffer::LOGON_INFO).map(LogonInfo::decode) {
                    let _ = info.sids();
                }
                if let Ok(Some(d)) = domain_logon(&p) {
                    assert!(!d.sids.is_empty(), "a domain user has a SID");
                }
            }
            // The logon-info and UPN/DNS buffers alone.
            if let Ok(info) = LogonInfo::decode(input) {
                let _ = info.sids();
            }
            let _ = UpnDnsInfo::decode(input);
        }
        2 => {
            if let Ok((_, msg)) = gss_unwrap(input) {
                assert!(msg.len() <= TOKEN_SIZE_MAX);
            }
            let key = [0x42u8; 16];
            let _ = mic::verify(&[0x42; 32], 18, mic::USAGE_INITIATOR_SIGN, b"mechs", input);
            if let Ok(seq) = mic::verify_rc4(&key, mic::Sender::Initiator, b"mechs", input) {
                let again = mic::make_rc4(&key, mic::Sender::Initiator, seq, b"mechs");
                assert_eq!(
                    gss_unwrap(&again).map(|(_, m)| m.to_vec()),
                    gss_unwrap(input).map(|(_, m)| m.to_vec()),
                    "an RC4 MIC that verifies is the one made again"
                );
            }
        }
        _ => {
            let (cfg, replay) = config();
            let fresh = Fresh {
                subkey: [0xa5; 32],
                seq: 1,
            };
            let _ = accept(cfg, input, 1_795_000_000, &fresh, replay);
        }
    }
});
