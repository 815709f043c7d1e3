//! The built-in KDC (ringshare_auth::krb5::kdc): `[flags][request]`, the request answered by a
//! KDC of realm FS with fixed keys at a fixed time (those of the crate's kdc tests, so that the
//! seeds from `write_local_kdc_fuzz_corpus` go deep: a TGT they carry opens). Flag bit 0 allows
//! RC4-HMAC. Beyond "no panic": an answer is a KDC reply of bounded size, and a ticket is only
//! ever issued for krbtgt/FS, cifs/ or host/ of realm FS (realm names without case).
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringshare_auth::krb5::iakerb::KDC_REPLY_MAX;
use ringshare_auth::krb5::kdc::{
    answer, salt, string_to_key, Fresh, KdcKeys, LocalKdc, Principals, UserKey,
};
use std::sync::OnceLock;

/// The crate's kdc tests' clock (testkdc::NOW).
const NOW: i64 = 1_795_000_000;

struct Users;

fn alice() -> &'static Vec<UserKey> {
    static K: OnceLock<Vec<UserKey>> = OnceLock::new();
    K.get_or_init(|| {
        [18, 17]
            .iter()
            .map(|e| UserKey {
                etype: *e,
                key: string_to_key(*e, "correct horse", &salt("FS", "alice")).unwrap(),
                salt: salt("FS", "alice"),
                kvno: 1,
            })
            .collect()
    })
}

impl Principals for Users {
    fn keys(&self, name: &str) -> Option<Vec<UserKey>> {
        match name {
            "alice" => Some(alice().clone()),
            "bob" => Some(vec![UserKey {
                etype: 23,
                key: vec![0x0b; 16],
                salt: String::new(),
                kvno: 1,
            }]),
            _ => None,
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((flags, request)) = data.split_first() else {
        return;
    };
    let kdc = LocalKdc {
        realm: "FS".into(),
        keys: KdcKeys {
            krbtgt: vec![0x71; 32],
            service: vec![0x72; 32],
            kvno: 1,
        },
        allow_rc4: flags & 1 != 0,
        skew_secs: 300,
        ticket_life_secs: 36000,
    };
    let fresh = Fresh {
        session_key: [0x5e; 32],
    };
    let Ok(reply) = answer(&kdc, &Users, request, NOW, &fresh) else {
        return;
    };
    assert!(reply.len() <= KDC_REPLY_MAX);
    assert!(matches!(reply.first(), Some(0x6b | 0x6d | 0x7e)));
    if reply[0] != 0x7e {
        let rep: picky_krb::messages::KdcRep = match reply[0] {
            0x6b => {
                picky_asn1_der::from_bytes::<picky_krb::messages::AsRep>(&reply)
                    .unwrap()
                    .0
            }
            _ => {
                picky_asn1_der::from_bytes::<picky_krb::messages::TgsRep>(&reply)
                    .unwrap()
                    .0
            }
        };
        let t = &rep.ticket.0 .0;
        // Realms are compared as the IAKerb layer compares them: without case.
        assert!(t.realm.0 .0.as_bytes().eq_ignore_ascii_case(b"FS"));
        let sname: Vec<&[u8]> = t
            .sname
            .0
            .name_string
            .0
             .0
            .iter()
            .map(|s| s.0.as_bytes())
            .collect();
        assert!(
            matches!(sname.as_slice(), [k, r] if *k == b"krbtgt" && r.eq_ignore_ascii_case(b"FS"))
                || matches!(sname.first(), Some(s) if s.eq_ignore_ascii_case(b"cifs") || s.eq_ignore_ascii_case(b"host")),
            "{sname:?}"
        );
    }
});
