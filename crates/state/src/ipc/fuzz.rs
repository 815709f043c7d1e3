//! The `rpc_pipe` fuzz target's way in (fuzz/fuzz_targets/rpc_pipe.rs): the named
//! pipes' DCE/RPC layer and the services behind it, without a connection.

use std::sync::Arc;

use super::rpcauth::Acceptor;
use super::{Pipe, Progress, ServerFacts, ShareEntry, ShareKind, UserEntry};
use crate::lookup::{NameAnswers, NameQuery};

/// One pipe of a service, fed what a client writes.
#[doc(hidden)]
pub struct FuzzPipe {
    pipe: Pipe,
    facts: ServerFacts,
}

impl FuzzPipe {
    /// A pipe of `lsarpc` (`which` 0), `srvsvc` (1), `samr` (2) or `wkssvc` (else).
    pub fn new(which: u8) -> FuzzPipe {
        let name = match which {
            0 => "lsarpc",
            1 => "srvsvc",
            2 => "samr",
            _ => "wkssvc",
        };
        let share = |name: &str, kind| ShareEntry {
            name: name.into(),
            comment: "a share".into(),
            kind,
        };
        FuzzPipe {
            // As IPC$'s pipes are opened: NTLMSSP binds taken (user u1, password u1), and
            // Kerberos ones (host/fs.rs.test's key fixed, [`kerberos`]), none needed; the
            // challenge, time and fresh keys fixed, so a recorded exchange replays.
            pipe: Pipe::open(name)
                .expect("a served pipe")
                .with_auth(Acceptor {
                    users: Arc::new(FuzzUser),
                    names: Default::default(),
                    min_level: 0,
                    challenge: [7; 8],
                    now_filetime: 133_000_000_000_000_000,
                    kerberos: Some(kerberos()),
                }),
            facts: ServerFacts {
                netbios_name: "RS".into(),
                workgroup: "WORKGROUP".into(),
                comment: "ringshare".into(),
                shares: vec![
                    share("data", ShareKind::Disk),
                    share("IPC$", ShareKind::Ipc),
                ],
                users: ["u1", "u22", "nobody", "uDisabled"]
                    .iter()
                    .map(|n| UserEntry {
                        name: n.to_string(),
                        disabled: n.ends_with("Disabled"),
                    })
                    .collect(),
                guest_account: "uGuest".into(),
                member: None,
            },
        }
    }

    /// Write `data` as a client does; NSS's questions are answered (even ids and names
    /// starting with `u` are known, the rest not), as often as calls ask; then everything
    /// queued is read in pieces of at most `max` bytes (returned). The pipe's errors are
    /// statuses.
    pub fn write(&mut self, data: &[u8], max: usize) -> Vec<u8> {
        let mut progress = self.pipe.write(data, &self.facts);
        while let Ok(Progress::Needs(queries)) = progress {
            assert!(self.pipe.waits(), "a call that needs NSS waits");
            progress = self.pipe.resume(&self.facts, &answers(&queries));
        }
        let max = max.max(1);
        let mut read = Vec::new();
        loop {
            let (out, more) = self.pipe.read(max);
            assert!(out.len() <= max, "a read returns at most what was asked");
            read.extend_from_slice(&out);
            if !more {
                return read;
            }
        }
    }
}

/// NSS as the harness has it.
fn answers(queries: &[NameQuery]) -> NameAnswers {
    let mut a = NameAnswers::default();
    let known = |id: u32| id.is_multiple_of(2).then(|| format!("u{id}"));
    let id_of = |n: &str| n.starts_with('u').then(|| 1000 + n.len() as u32);
    for q in queries {
        match q {
            NameQuery::Uid(u) => {
                a.users.insert(*u, known(*u));
            }
            NameQuery::Gid(g) => {
                a.groups.insert(*g, known(*g));
            }
            NameQuery::User(n) => {
                a.user_ids.insert(n.clone(), id_of(n));
            }
            NameQuery::Group(n) => {
                a.group_ids.insert(n.clone(), id_of(n));
            }
            NameQuery::Passwd(n) => {
                let entry = id_of(n).map(|_| (n.clone(), format!("{n} U,,,")));
                a.passwd.insert(n.clone(), entry);
            }
            // The harness is no domain member.
            NameQuery::DomainSid(_) | NameQuery::DomainName(_) => {}
        }
    }
    a
}

/// One account, u1 with password u1.
struct FuzzUser;

impl ringshare_auth::UserLookup for FuzzUser {
    fn nt_hash(&self, user: &str) -> Option<[u8; 16]> {
        (user == "u1").then(|| ringshare_auth::nt_hash("u1"))
    }
}

/// The Kerberos acceptor of the harness: host/fs.rs.test@RS.TEST's AES-256 key is 32 bytes of
/// 0x42, now is 1_795_000_000, the acceptor subkey 32 bytes of 0xa5 and its sequence number 9
/// (the auth crate's test tickets: its ignored test `write_rpc_pipe_kerberos_fuzz_seed` writes
/// fuzz/corpus/rpc_pipe/srvsvc-kerberos-sealed with them); a new replay cache each pipe.
fn kerberos() -> ringshare_auth::gss::Kerberos {
    use ringshare_auth::krb5::acceptor::{AcceptorConfig, Fresh};
    use ringshare_auth::krb5::keytab::Keytab;
    ringshare_auth::gss::Kerberos {
        config: Arc::new(AcceptorConfig {
            keytab: Arc::new(Keytab::one_aes256(
                &["host", "fs.rs.test"],
                "RS.TEST",
                &[0x42; 32],
            )),
            realm: "RS.TEST".into(),
            skew_secs: 300,
            allow_rc4: false,
        }),
        replay: Default::default(),
        now_unix: 1_795_000_000,
        fresh: Fresh {
            subkey: [0xa5; 32],
            seq: 9,
        },
    }
}
