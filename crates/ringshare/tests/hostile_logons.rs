//! Clients that fail to log on again and again, against the real binary (issue 19): the log stays
//! bounded however many logons fail, the failed-logon line is the one the shipped fail2ban filter
//! matches (with Debian's `fail2ban-regex`) and no user name can forge one, and with `failed logon
//! backoff` an address that keeps failing waits longer for each answer.

use crate::common;
use crate::rig;

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::process::Command as Process;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ringshare_auth::gss::ClientAuth;
use ringshare_wire::consts::{Capabilities, Command, Dialect, SecurityMode, SessionSetupFlags};
use ringshare_wire::framing;
use ringshare_wire::header::Header;
use ringshare_wire::negotiate::NegotiateRequest;
use ringshare_wire::session::{SessionSetupRequest, SessionSetupResponse};
use ringshare_wire::NtStatus;

use rig::*;

/// The failed-logon line as the server writes it, up to the address.
const FAILED: &str = "authentication failed from 127.0.0.1: ";

/// A connection that negotiates SMB 2.1 and then tries logons, one after the other, each a new
/// session of two SESSION_SETUP legs.
struct Guesser {
    sock: TcpStream,
    mid: u64,
    seed: u8,
}

impl Guesser {
    fn connect(port: u16) -> Guesser {
        let mut g = Guesser {
            sock: Raw::connect(port),
            mid: 0,
            seed: 0,
        };
        let req = NegotiateRequest {
            security_mode: SecurityMode::SIGNING_ENABLED,
            capabilities: Capabilities::empty(),
            client_guid: [7; 16],
            client_start_time: 0,
            dialects: vec![Dialect::SMB2_1],
            contexts: Vec::new(),
        };
        let mut m = g.message(Command::NEGOTIATE, 0);
        req.encode(&mut m);
        g.send(&m).expect("send NEGOTIATE");
        let (h, _) = g.answer().expect("NEGOTIATE answered");
        assert_eq!(h.status, NtStatus::SUCCESS);
        g
    }

    /// A request header for `cmd` on `session_id`, asking for credits to keep the window open.
    fn message(&mut self, cmd: Command, session_id: u64) -> Vec<u8> {
        let mut h = Header::request(cmd, self.mid);
        self.mid += 1;
        h.credits = 8;
        h.credit_charge = 1;
        h.session_id = session_id;
        let mut m = Vec::with_capacity(256);
        h.encode(&mut m);
        m
    }

    fn send(&mut self, msg: &[u8]) -> std::io::Result<()> {
        let mut f = Vec::with_capacity(4 + msg.len());
        framing::put_frame_header(&mut f, msg.len());
        f.extend_from_slice(msg);
        self.sock.write_all(&f)
    }

    /// The next response; `None` when the connection closed.
    fn answer(&mut self) -> Option<(Header, Vec<u8>)> {
        let frame = read_frame(&mut self.sock).ok()??;
        split_responses(&frame).into_iter().next()
    }

    fn session_setup(&mut self, session_id: u64, token: &[u8]) -> Vec<u8> {
        let mut m = self.message(Command::SESSION_SETUP, session_id);
        SessionSetupRequest {
            flags: SessionSetupFlags::empty(),
            security_mode: SecurityMode::SIGNING_ENABLED,
            capabilities: Capabilities::empty(),
            channel: 0,
            previous_session_id: 0,
            security_buffer: token,
        }
        .encode(&mut m);
        m
    }

    /// The first leg of a logon as `user`: the session the server made, and the client's state.
    fn first_leg(&mut self, user: &str, password: &str) -> Option<(u64, ClientAuth, Vec<u8>)> {
        let mut auth = ClientAuth::new(user, "", password);
        let token = auth
            .step(None, self.rand(), filetime())
            .expect("NEGOTIATE token")
            .expect("a token");
        let m = self.session_setup(0, &token);
        self.send(&m).ok()?;
        let (h, msg) = self.answer()?;
        assert_eq!(h.status, NtStatus::MORE_PROCESSING_REQUIRED, "first leg");
        let challenge = SessionSetupResponse::decode(&msg)
            .expect("SESSION_SETUP response")
            .security_buffer
            .to_vec();
        let token = auth
            .step(Some(&challenge), self.rand(), filetime())
            .expect("AUTHENTICATE token")
            .expect("a token");
        Some((h.session_id, auth, token))
    }

    /// One logon as `user` with `password`: the final status, `None` when the connection closed.
    fn logon(&mut self, user: &str, password: &str) -> Option<NtStatus> {
        let (session_id, _auth, token) = self.first_leg(user, password)?;
        let m = self.session_setup(session_id, &token);
        self.send(&m).ok()?;
        Some(self.answer()?.0.status)
    }

    fn rand(&mut self) -> [u8; 24] {
        self.seed = self.seed.wrapping_add(1);
        [self.seed; 24]
    }
}

fn filetime() -> u64 {
    let unix = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    (unix.as_nanos() / 100) as u64 + 116_444_736_000_000_000
}

/// `count` failed logons on one connection (a new one when the server closes it), alternating
/// a known user with a wrong password and an unknown user.
fn fail_logons(port: u16, count: usize) -> usize {
    let mut g = Guesser::connect(port);
    let mut failed = 0;
    while failed < count {
        let user = if failed % 2 == 0 {
            USER_A.0
        } else {
            "rs-nobody"
        };
        match g.logon(user, "not-the-password") {
            Some(s) => {
                assert_eq!(s, NtStatus::LOGON_FAILURE);
                failed += 1;
            }
            None => g = Guesser::connect(port),
        }
    }
    failed
}

/// The lines of `log` that contain `needle`.
fn lines_with<'a>(log: &'a str, needle: &str) -> Vec<&'a str> {
    log.lines().filter(|l| l.contains(needle)).collect()
}

/// The count in each line `N similar messages suppressed` of failed logons from 127.0.0.1.
fn suppressed(log: &str) -> Vec<u64> {
    lines_with(log, FAILED)
        .iter()
        .filter_map(|l| {
            let rest = &l[l.find(FAILED)? + FAILED.len()..];
            let (n, tail) = rest.split_once(' ')?;
            tail.starts_with("similar message")
                .then(|| n.parse().ok())?
        })
        .collect()
}

#[test]
fn ten_thousand_failed_logons_from_one_address_leave_a_bounded_number_of_log_lines() {
    const THREADS: usize = 4;
    const LOGONS: usize = 10_000;
    let mut rig = Rig::start("failed-logons", "");
    let start = Instant::now();
    let port = rig.port;
    let workers: Vec<_> = (0..THREADS)
        .map(|_| thread::spawn(move || fail_logons(port, LOGONS / THREADS)))
        .collect();
    let failed: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(failed, LOGONS);
    eprintln!(
        "{LOGONS} failed logons in {secs:.1} s: {:.0} a second",
        LOGONS as f64 / secs
    );
    // While the server runs: at most ten lines a minute.
    let log = rig.log();
    let windows = (secs / 60.0).floor() as usize + 1;
    let lines = lines_with(&log, FAILED).len();
    assert!(
        (10..=20 * windows).contains(&lines),
        "{lines} failed-logon lines (and summaries) after {secs:.1} s:\n{log}"
    );
    // A stopping server counts what it left out: nothing is lost, and the log is small.
    assert!(rig
        .signal_and_wait(libc::SIGTERM, Duration::from_secs(10))
        .is_some());
    let log = rig.log();
    let counts = suppressed(&log);
    let shown = lines_with(&log, &format!("{FAILED}user \"")).len() as u64;
    assert!(!counts.is_empty(), "no summary line:\n{log}");
    assert_eq!(
        shown + counts.iter().sum::<u64>(),
        LOGONS as u64,
        "lines shown plus those counted as suppressed:\n{log}"
    );
    assert!(
        shown <= 10 * windows as u64,
        "{shown} failed-logon lines:\n{log}"
    );
    let lines = log.lines().count();
    eprintln!(
        "log: {lines} lines, {} bytes, {shown} failed-logon lines, {} summaries",
        log.len(),
        counts.len()
    );
    assert!(log.len() < 16 * 1024, "{} bytes of log:\n{log}", log.len());
    // fail2ban sees each line shown and each summary: enough to ban, however many were left out.
    if common::fail2ban_regex_or_skip("fail2ban on 10,000 failures") {
        let ips = fail2ban_matches(rig.log_path());
        assert_eq!(ips.len() as u64, shown + counts.len() as u64, "{log}");
        assert!(ips.iter().all(|ip| ip == "127.0.0.1"), "{ips:?}");
    }
}

/// The shipped filter: packaging/fail2ban/filter.d/ringshare.conf.
fn fail2ban_filter() -> &'static Path {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../packaging/fail2ban/filter.d/ringshare.conf"
    ))
}

/// `fail2ban-regex` on `log` with the shipped filter: the address of each line it matched.
fn fail2ban_matches(log: &Path) -> Vec<String> {
    let out = Process::new("fail2ban-regex")
        .args(["--out", "ip"])
        .arg(log)
        .arg(fail2ban_filter())
        .output()
        .expect("run fail2ban-regex");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "fail2ban-regex failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines().map(str::to_string).collect()
}

#[test]
fn failed_logons_are_what_the_shipped_fail2ban_filter_matches_and_no_user_name_forges_one() {
    if !common::fail2ban_regex_or_skip("fail2ban filter") {
        return;
    }
    let mut rig = Rig::start("fail2ban", "");
    // A client logs on and uses the share: lines that must not match.
    rig.still_serves("before the failures");
    let mut g = Guesser::connect(rig.port);
    let forged = [
        "x\" from 203.0.113.9 (STATUS_LOGON_FAILURE: wrong password)",
        "x\n2026-01-01T00:00:00.000000Z  WARN authentication failed from 203.0.113.9: user \"y\"",
        "x\r\nauthentication failed from 203.0.113.9: user \"y\" (STATUS_LOGON_FAILURE: y)",
        "\u{2028}authentication failed from 203.0.113.9: 5 similar messages suppressed",
    ];
    for user in [USER_A.0, "rs-nobody"].iter().chain(&forged) {
        assert_eq!(
            g.logon(user, "not-the-password"),
            Some(NtStatus::LOGON_FAILURE)
        );
    }
    let failures = 2 + forged.len();
    rig.still_serves("after the failures");
    rig.signal_and_wait(libc::SIGTERM, Duration::from_secs(10))
        .expect("server stops");
    let log_text = rig.log();
    assert_eq!(
        lines_with(&log_text, FAILED).len(),
        failures,
        "each failure is one line:\n{log_text}"
    );
    let ips = fail2ban_matches(rig.log_path());
    assert_eq!(
        ips,
        vec!["127.0.0.1".to_string(); failures],
        "fail2ban-regex on:\n{log_text}"
    );
}

#[test]
fn with_failed_logon_backoff_an_address_that_keeps_failing_waits_longer_for_each_answer() {
    let rig = Rig::start("logon-backoff", "\tfailed logon backoff = 2\n");
    let mut g = Guesser::connect(rig.port);
    let timed = |g: &mut Guesser, user: &str, password: &str| {
        let (session_id, _auth, token) = g.first_leg(user, password).expect("first leg");
        let m = g.session_setup(session_id, &token);
        let t = Instant::now();
        g.send(&m).unwrap();
        let status = g.answer().expect("answered").0.status;
        (status, t.elapsed())
    };
    // Two failures are answered at once (well within the first wait).
    for _ in 0..2 {
        let (s, took) = timed(&mut g, USER_A.0, "wrong");
        assert_eq!(s, NtStatus::LOGON_FAILURE);
        assert!(took < Duration::from_millis(450), "{took:?}");
    }
    // The third waits half a second.
    let (s, took) = timed(&mut g, "rs-nobody", "wrong");
    assert_eq!(s, NtStatus::LOGON_FAILURE);
    assert!(took >= Duration::from_millis(500), "{took:?}");
    // The right password logs on, after a second (three failures so far).
    let (s, took) = timed(&mut g, USER_A.0, USER_A.1);
    assert_eq!(s, NtStatus::SUCCESS);
    assert!(took >= Duration::from_millis(1000), "{took:?}");
    // Two guesses sent together are answered one after the other: a second, then two more.
    let (s1, _a1, t1) = g.first_leg(USER_A.0, "wrong").unwrap();
    let (s2, _a2, t2) = g.first_leg(USER_A.0, "wrong again").unwrap();
    let mut both = g.session_setup(s1, &t1);
    let second = g.session_setup(s2, &t2);
    let mut frames = Vec::new();
    framing::put_frame_header(&mut frames, both.len());
    frames.append(&mut both);
    framing::put_frame_header(&mut frames, second.len());
    frames.extend_from_slice(&second);
    let t = Instant::now();
    g.sock.write_all(&frames).unwrap();
    let first = g.answer().expect("first answer").0;
    let after_first = t.elapsed();
    let last = g.answer().expect("second answer").0;
    let after_both = t.elapsed();
    assert_eq!(
        (first.status, last.status),
        (NtStatus::LOGON_FAILURE, NtStatus::LOGON_FAILURE)
    );
    assert!(
        after_first >= Duration::from_millis(1000),
        "{after_first:?}"
    );
    assert!(after_both >= Duration::from_millis(3000), "{after_both:?}");
}

#[test]
fn failed_logon_backoff_is_off_by_default_and_a_reload_turns_it_on() {
    let rig = Rig::start("logon-backoff-reload", "");
    let mut g = Guesser::connect(rig.port);
    let timed = |g: &mut Guesser| {
        let t = Instant::now();
        assert_eq!(g.logon(USER_A.0, "wrong"), Some(NtStatus::LOGON_FAILURE));
        t.elapsed()
    };
    // More failures than `failed logon backoff = yes` allows, answered at once.
    let t = Instant::now();
    for _ in 0..12 {
        timed(&mut g);
    }
    assert!(
        t.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t.elapsed()
    );
    let conf = std::fs::read_to_string(rig.conf()).unwrap();
    let conf = conf.replacen("[global]\n", "[global]\n\tfailed logon backoff = 1\n", 1);
    std::fs::write(rig.conf(), conf).unwrap();
    let pid = rustix::process::Pid::from_raw(rig.pid() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::HUP).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !rig.log().contains("reload: failed logon backoff: 1") {
        assert!(Instant::now() < deadline, "no reload:\n{}", rig.log());
        thread::sleep(Duration::from_millis(20));
    }
    // Failures count from the reload on: the first is answered at once, the next waits.
    let took = timed(&mut g);
    assert!(took < Duration::from_millis(450), "{took:?}");
    let took = timed(&mut g);
    assert!(took >= Duration::from_millis(500), "{took:?}");
}
