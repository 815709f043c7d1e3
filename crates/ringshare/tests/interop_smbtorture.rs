//! Oplocks, leases and session setup against the real binary, driven by
//! Debian's smbtorture (samba-testsuite). These tests open the same file from
//! two connections, which the kernel may hand to different I/O threads: the
//! break notifications then travel through the connection mailboxes and the
//! workers' wake-up, which crates/core/tests/oplocks.rs (one thread, no
//! driver) cannot show. scripts/conformance.sh runs the whole suites against
//! ringshare and Samba; this is the part CI runs every time.

mod common;

use std::process::{Command, Stdio};

use common::{smbtorture_or_skip, Server, ServerConfig, PASSWORD, SHARE, USER};

/// Runs each smbtorture test against its own fresh server and fails with
/// the output of those that did not report success.
fn run_all(tests: &[&str]) {
    run_all_on(&ServerConfig::default(), tests);
}

/// [`run_all`] against a server configured by `cfg`.
fn run_all_on(cfg: &ServerConfig, tests: &[&str]) {
    let server = Server::start(cfg, |_| {});
    let mut failed = Vec::new();
    for test in tests {
        let out = Command::new("timeout")
            .arg("120")
            .arg("smbtorture")
            .arg("-s")
            .arg(server.client_conf())
            .arg(format!("//127.0.0.1/{SHARE}"))
            .arg("-p")
            .arg(server.port.to_string())
            .arg("-U")
            .arg(format!("{USER}%{PASSWORD}"))
            .arg("--fullname")
            .arg("--target=samba3")
            .arg(test)
            .stdin(Stdio::null())
            .output()
            .expect("run smbtorture");
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        if !text.lines().any(|l| l.trim() == format!("success: {test}")) {
            failed.push(format!("--- {test} ---\n{text}"));
        }
    }
    assert!(
        failed.is_empty(),
        "{} smbtorture test(s) failed:\n{}\n--- server log ---\n{}",
        failed.len(),
        failed.join("\n"),
        server.log()
    );
}

// Quick tests (none waits for the 35 s break timeout), each needing what
// session 5 built. Three groups, so they run side by side.

#[test]
fn smbtorture_oplock_breaks_are_sent_acknowledged_and_waited_for() {
    if smbtorture_or_skip("smbtorture_oplock_breaks_are_sent_acknowledged_and_waited_for") {
        run_all(&[
            "smb2.oplock.batch1",
            "smb2.oplock.batch3",
            "smb2.oplock.exclusive2",
            "smb2.oplock.levelii500",
            "smb2.oplock.brl1",
        ]);
    }
}

#[test]
fn smbtorture_leases_break_step_by_step_and_a_rename_waits_for_them() {
    if smbtorture_or_skip("smbtorture_leases_break_step_by_step_and_a_rename_waits_for_them") {
        run_all(&[
            "smb2.lease.breaking1",
            "smb2.lease.breaking3",
            "smb2.lease.oplock",
            "smb2.lease.rename_wait",
        ]);
    }
}

#[test]
fn smbtorture_reauthentication_binding_and_encryption_pass() {
    if smbtorture_or_skip("smbtorture_reauthentication_binding_and_encryption_pass") {
        run_all(&[
            "smb2.session.reauth1",
            "smb2.session.bind1",
            "smb2.session.encryption-aes-128-gcm",
        ]);
    }
}

#[test]
fn smbtorture_persistent_handles_and_their_replay_pass_on_a_continuously_available_share() {
    if smbtorture_or_skip(
        "smbtorture_persistent_handles_and_their_replay_pass_on_a_continuously_available_share",
    ) {
        run_all_on(
            &ServerConfig {
                extra_global: "\tcontinuous availability = yes\n",
                ..ServerConfig::default()
            },
            &[
                "smb2.durable-v2-open.persistent-open-oplock",
                "smb2.durable-v2-open.persistent-open-lease",
                "smb2.replay.replay5",
            ],
        );
    }
}
