//! `ringshare bench ... logon`: how many logons a server takes per second, and its CPU per
//! logon. Each connection, again and again: connect over TCP, NEGOTIATE, SESSION_SETUP (NTLMv2,
//! or with `--kerberos` the service ticket for `cifs/HOST` from the credential cache), TREE_CONNECT,
//! then close the socket. What a site feels at 9 o'clock, when every desktop logs on.
//!
//! Blocking sockets, one thread per connection; the figures are logons per second, the client's
//! and (with `--server-pid`) the server's CPU per logon, the process tree included (Samba forks
//! a process per connection).

use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringshare_auth::krb5::ccache::{self, Credential};

use super::reconnect::Link;
use super::report::CpuSample;
use super::{worker, Shared};

/// The service ticket for `cifs/host` in the credential cache KRB5CCNAME (a FILE: cache).
pub(crate) fn service_ticket(host: &str) -> Result<Credential, String> {
    let name = std::env::var("KRB5CCNAME")
        .map_err(|_| "--kerberos reads the credential cache KRB5CCNAME; it is not set")?;
    let path = name.strip_prefix("FILE:").unwrap_or(&name);
    let data = std::fs::read(path).map_err(|e| format!("cannot read the ccache {path}: {e}"))?;
    let (_, creds) = ccache::parse(&data).map_err(|e| format!("ccache {path}: {e}"))?;
    let want = |c: &&Credential| {
        c.server.0.len() == 2
            && c.server.0[0].eq_ignore_ascii_case("cifs")
            && c.server.0[1].eq_ignore_ascii_case(host)
    };
    creds.iter().find(want).cloned().ok_or_else(|| {
        format!("no ticket for cifs/{host} in {path} (get one with `kvno cifs/{host}`)")
    })
}

/// One connection's logons and failures.
fn run_one(sh: &Shared, idx: usize, ticket: Option<&Credential>) -> (u64, Vec<String>) {
    sh.ready.fetch_add(1, Ordering::AcqRel);
    while !sh.go.load(Ordering::Acquire) {
        if sh.failed.load(Ordering::Acquire) {
            return (0, Vec::new());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let (mut n, mut errors) = (0u64, Vec::new());
    while !sh.stop.load(Ordering::Acquire) {
        let mut opts = worker::client_options(sh, idx);
        opts.seed ^= n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        opts.kerberos = ticket.cloned();
        match Link::open(sh, &opts) {
            Ok(link) => {
                drop(link);
                n += 1;
            }
            Err(e) => {
                sh.errors.fetch_add(1, Ordering::Relaxed);
                if errors.len() < 4 {
                    errors.push(e);
                }
                if errors.len() >= 4 && n == 0 {
                    break;
                }
            }
        }
    }
    (n, errors)
}

/// The whole `logon` run; the report to `out`. Clean when no logon failed.
pub(crate) fn run_all(sh: Arc<Shared>, out: &mut dyn Write) -> Result<bool, String> {
    let ticket = if sh.args.kerberos {
        Some(service_ticket(&sh.host)?)
    } else {
        None
    };
    let n = sh.args.connections as usize;
    let mut handles = Vec::new();
    for idx in 0..n {
        let s = Arc::clone(&sh);
        let t = ticket.clone();
        handles.push(
            std::thread::Builder::new()
                .name(format!("logon-{idx}"))
                .spawn(move || run_one(&s, idx, t.as_ref()))
                .map_err(|e| format!("cannot start a thread: {e}"))?,
        );
    }
    while sh.ready.load(Ordering::Acquire) < n {
        std::thread::sleep(Duration::from_millis(5));
    }
    let cpu0 = CpuSample::take(sh.args.server_pid);
    let start = Instant::now();
    sh.go.store(true, Ordering::Release);
    std::thread::sleep(Duration::from_millis(sh.args.duration));
    sh.stop.store(true, Ordering::Release);
    let (mut logons, mut errors) = (0u64, Vec::new());
    for h in handles {
        let (k, e) = h
            .join()
            .map_err(|_| "a logon thread panicked".to_string())?;
        logons += k;
        errors.extend(e);
    }
    let secs = start.elapsed().as_secs_f64().max(1e-9);
    let cpu1 = CpuSample::take(sh.args.server_pid);
    let per = |s: f64| s / logons.max(1) as f64 * 1e6;
    let how = match &ticket {
        Some(t) => format!("Kerberos (ticket for {})", t.server.0.join("/")),
        None => "NTLMv2".to_string(),
    };
    let failures = sh.errors.load(Ordering::Relaxed);
    let client_us = per(cpu1.client_s - cpu0.client_s);
    let server_us = cpu1.server_s.zip(cpu0.server_s).map(|(b, a)| per(b - a));
    let text = if sh.args.json {
        format!(
            "{{\"workload\":\"logon\",\"auth\":\"{}\",\"connections\":{n},\"seconds\":{secs:.3},\
             \"logons\":{logons},\"logons_per_s\":{:.1},\"client_cpu_us_per_logon\":{client_us:.1},\
             \"server_cpu_us_per_logon\":{},\"errors\":{failures}}}\n",
            if ticket.is_some() { "kerberos" } else { "ntlm" },
            logons as f64 / secs,
            server_us.map_or("null".to_string(), |v| format!("{v:.1}"))
        )
    } else {
        let mut t = format!(
            "workload logon: {n} connection(s), {secs:.1} s, {how}\n\
             logons {logons} ({:.0}/s), client CPU {client_us:.0} µs per logon\n",
            logons as f64 / secs
        );
        if let Some(s) = server_us {
            t.push_str(&format!("server CPU {s:.0} µs per logon\n"));
        }
        t.push_str(&format!("errors {failures}\n"));
        for e in &errors {
            t.push_str(&format!("  {e}\n"));
        }
        t
    };
    out.write_all(text.as_bytes())
        .map_err(|e| format!("cannot write the report: {e}"))?;
    Ok(failures == 0 && logons > 0)
}
