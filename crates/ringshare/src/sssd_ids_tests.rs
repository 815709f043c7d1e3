use super::*;
use std::io::Read;

/// What libsss_nss_idmap of sssd 2.8.2 sent and sssd answered in the AD rig (sssd joined with
/// `adcli join`, `ldap_id_mapping = True`: RSAD's slice starts at 1194200000), captured with
/// `strace -yy -e trace=read,sendto -e read=all -e write=all python3 …` over ctypes calls of
/// `sss_nss_getidbysid` and `sss_nss_getsidby{id,uid,gid}`, sssd's memory cache hidden so that
/// every call went to the pipe. `.sent` is the version check and the question, `.received`
/// their answers.
macro_rules! capture {
    ($name:literal) => {
        (
            &include_bytes!(concat!("../tests/ad/sssd-", $name, ".sent"))[..],
            &include_bytes!(concat!("../tests/ad/sssd-", $name, ".received"))[..],
        )
    };
}

const DOM: &str = "S-1-5-21-685147720-3530623680-1324798153";
const SLICE: u32 = 1_194_200_000;

fn sid(rid: u32) -> Sid {
    format!("{DOM}-{rid}").parse().unwrap()
}

/// The version check every connection starts with.
fn version() -> Vec<u8> {
    packet(SSS_GET_VERSION, &PROTOCOL_VERSION.to_le_bytes())
}

/// The body of the second packet of `bytes` (the first is the version check's).
fn second_body(bytes: &[u8]) -> &[u8] {
    let first = u32::from_le_bytes(bytes[0..4].try_into().unwrap()) as usize;
    &bytes[first + HEADER_LEN..]
}

#[test]
fn questions_are_encoded_as_libsss_nss_idmap_sends_them() {
    let by_sid = [
        (capture!("getidbysid-group"), 1106),
        (capture!("getidbysid-user"), 1103),
        (capture!("getidbysid-unknown"), 9999),
    ];
    for ((sent, _), rid) in by_sid {
        let mut ours = version();
        ours.extend(packet(SSS_NSS_GETIDBYSID, &sid_body(&sid(rid))));
        assert_eq!(ours, sent, "GETIDBYSID {rid}");
    }
    let by_id = [
        (capture!("getsidbyuid-user"), Xid::Uid(SLICE + 1103)),
        (capture!("getsidbygid-group"), Xid::Gid(SLICE + 1106)),
        (capture!("getsidbyuid-a-groups-id"), Xid::Uid(SLICE + 1106)),
    ];
    for ((sent, _), id) in by_id {
        let (cmd, body) = id_question(id);
        let mut ours = version();
        ours.extend(packet(cmd, &body));
        assert_eq!(ours, sent, "{id:?}");
    }
    // The older GETSIDBYID (uid or gid alike), as libsss_nss_idmap sends it: only its command
    // differs; ringshare asks by kind.
    let (sent, _) = capture!("getsidbyid-group");
    assert_eq!(&sent[24..28], &0x112u32.to_le_bytes());
    assert_eq!(second_body(sent), (SLICE + 1106).to_le_bytes());
}

#[test]
fn sssds_answers_are_read_as_it_gave_them() {
    let answers = [
        (capture!("getidbysid-group"), Some(Xid::Gid(SLICE + 1106))),
        (capture!("getidbysid-user"), Some(Xid::Uid(SLICE + 1103))),
        (capture!("getidbysid-unknown"), None),
    ];
    for ((_, received), want) in answers {
        assert_eq!(received[..20], version()[..], "the version answer");
        assert_eq!(parse_id(second_body(received)).unwrap(), want);
    }
    let answers = [
        (capture!("getsidbyuid-user"), Some(sid(1103))),
        (capture!("getsidbygid-group"), Some(sid(1106))),
        (capture!("getsidbyid-group"), Some(sid(1106))),
        (capture!("getsidbyuid-a-groups-id"), None),
        (capture!("getsidbyid-unknown"), None),
    ];
    for ((_, received), want) in answers {
        assert_eq!(parse_sid(second_body(received)).unwrap(), want);
    }
}

#[test]
fn short_or_garbled_answer_bodies_are_errors() {
    let (_, group) = capture!("getidbysid-group");
    let body = second_body(group);
    for cut in 0..body.len() {
        assert!(parse_id(&body[..cut]).is_err(), "cut at {cut}");
    }
    let mut two = body.to_vec();
    two[0] = 2;
    assert!(parse_id(&two).is_err(), "two results");
    let mut kind = body.to_vec();
    kind[8] = 7;
    assert!(parse_id(&kind).is_err(), "type 7");
    let (_, user) = capture!("getsidbyuid-user");
    let body = second_body(user);
    assert!(parse_sid(&body[..body.len() - 1]).is_err(), "no NUL");
    let mut bad = body.to_vec();
    bad[12] = b'X';
    assert!(parse_sid(&bad).is_err(), "not a SID");
    let mut bad = body.to_vec();
    bad[14] = 0xff;
    assert!(parse_sid(&bad).is_err(), "not text");
    assert_eq!(parse_sid(&[0; 8]).unwrap(), None);
}

/// A stand-in sssd on a pipe of its own: on each connection it reads a packet and answers it
/// with the next of `answers`, then holds the connection open without a word.
fn fake_sssd(pipe: PathBuf, answers: Vec<Vec<u8>>) {
    let l = std::os::unix::net::UnixListener::bind(pipe).unwrap();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { return };
            for a in &answers {
                let mut h = [0u8; HEADER_LEN];
                if c.read_exact(&mut h).is_err() {
                    break;
                }
                let len = u32::from_le_bytes(h[0..4].try_into().unwrap()) as usize;
                let mut body = vec![0u8; len.saturating_sub(HEADER_LEN)];
                if c.read_exact(&mut body).is_err() || c.write_all(a).is_err() {
                    break;
                }
            }
            std::thread::sleep(Duration::from_secs(3));
        }
    });
}

#[test]
fn a_short_garbled_silent_or_other_version_sssd_is_an_error_not_a_hang() {
    let base = std::env::temp_dir().join(format!("rs-sssdids-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let (_, group) = capture!("getidbysid-group");
    let (v, answer) = group.split_at(20);
    let (v, answer) = (v.to_vec(), answer.to_vec());
    let mut other_version = v.clone();
    other_version[16] = 2;
    let mut huge = answer.clone();
    huge[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
    let mut tiny = answer.clone();
    tiny[0..4].copy_from_slice(&4u32.to_le_bytes());
    let mut failed = answer.clone();
    failed[8] = 5; // EIO
    let mut not_found = packet(SSS_NSS_GETIDBYSID, &[]);
    not_found[8] = ENOENT as u8;
    let mut other_command = answer.clone();
    other_command[4] = 0x18;
    let mut garbled = answer.clone();
    garbled[24] = 9;
    // (name, what the fake answers, the answer expected or None for an error)
    type Case = (&'static str, Vec<Vec<u8>>, Option<Option<Xid>>);
    let cases: Vec<Case> = vec![
        (
            "answered",
            vec![v.clone(), answer.clone()],
            Some(Some(Xid::Gid(SLICE + 1106))),
        ),
        ("not found", vec![v.clone(), not_found], Some(None)),
        ("short", vec![v.clone(), answer[..10].to_vec()], None),
        (
            "cut",
            vec![v.clone(), answer[..HEADER_LEN + 3].to_vec()],
            None,
        ),
        ("huge", vec![v.clone(), huge], None),
        ("tiny", vec![v.clone(), tiny], None),
        ("failed", vec![v.clone(), failed], None),
        ("other command", vec![v.clone(), other_command], None),
        ("garbled", vec![v.clone(), garbled], None),
        ("silent", vec![v.clone()], None),
        ("silent at once", vec![], None),
        ("other version", vec![other_version], None),
    ];
    for (name, answers, want) in cases {
        let dir = base.join(name.replace(' ', "-"));
        std::fs::create_dir_all(&dir).unwrap();
        fake_sssd(dir.join("nss"), answers);
        let ids = SssdIds::new(&dir.join("nss")).with_timeout(Duration::from_millis(300));
        let started = Instant::now();
        let r = ids.ids_of(&[sid(1106)]);
        assert!(started.elapsed() < Duration::from_secs(2), "{name}: waited");
        match want {
            Some(w) => assert_eq!(r.unwrap(), [w], "{name}"),
            None => assert!(r.is_err(), "{name}: {r:?}"),
        }
    }
    let nowhere = SssdIds::new(&base.join("none")).sids_of(&[Xid::Uid(1)]);
    assert!(nowhere.unwrap_err().contains("cannot reach sssd"));
    let _ = std::fs::remove_dir_all(&base);
}
