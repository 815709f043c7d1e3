//! `metrics listen`: a real Prometheus (Debian's `prometheus`) scrapes the
//! server during a `ringshare bench` run, and the test reads a request rate
//! and a latency quantile back through Prometheus's HTTP API.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{bench, free_port, Server, ServerConfig, TempDir};

/// A GET on 127.0.0.1:`port`: (status code, body).
fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let code = text.split(' ').nth(1)?.parse().ok()?;
    let (_, body) = text.split_once("\r\n\r\n")?;
    Some((code, body.to_string()))
}

/// `%`-encoding for a query string.
fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// An instant query through Prometheus's HTTP API: the first sample's value.
fn query(port: u16, q: &str) -> Option<f64> {
    let (code, body) = http_get(port, &format!("/api/v1/query?query={}", encode(q)))?;
    if code != 200 {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

struct Prometheus {
    child: Child,
    port: u16,
    _dir: TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_prometheus(target_port: u16) -> Prometheus {
    let dir = TempDir::new("prometheus");
    let conf = dir.path().join("prometheus.yml");
    std::fs::write(
        &conf,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: ringshare\n    static_configs:\n\
             \x20     - targets: ['127.0.0.1:{target_port}']\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", conf.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start prometheus");
    let p = Prometheus {
        child,
        port,
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while http_get(port, "/-/ready").map(|r| r.0) != Some(200) {
        assert!(
            Instant::now() < deadline,
            "prometheus did not get ready: {}",
            std::fs::read_to_string(p._dir.path().join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    p
}

#[test]
fn prometheus_scrapes_a_request_rate_and_a_latency_quantile_during_a_bench_run() {
    let test = "prometheus scrapes ringshare";
    if !Path::new("/usr/bin/prometheus").exists() {
        // scripts/install-deps.sh --test installs it; CI must not skip.
        assert!(
            std::env::var("CI").is_err(),
            "{test}: prometheus is not installed (apt-get install prometheus)"
        );
        eprintln!("\n!!!!!!!! SKIPPED {test}: apt-get install prometheus !!!!!!!!\n");
        return;
    }
    let metrics_port = free_port();
    let extra: &'static str =
        Box::leak(format!("\tmetrics listen = 127.0.0.1:{metrics_port}\n").into_boxed_str());
    let server = Server::start(
        &ServerConfig {
            extra_global: extra,
            ..ServerConfig::default()
        },
        |_| {},
    );
    let (code, text) = http_get(metrics_port, "/metrics").expect("scrape by hand");
    assert_eq!(code, 200, "{text}");
    assert!(
        text.contains("# TYPE ringshare_requests_total counter"),
        "{text}"
    );
    let prom = start_prometheus(metrics_port);
    // Load for a while, with reads of 64 KiB so there are many requests.
    let (ok, out) = bench(
        &server,
        &[
            "seq-read",
            "--io-size",
            "64k",
            "--file-size",
            "64m",
            "--duration",
            "6s",
        ],
    );
    assert!(ok, "bench failed: {out}");
    // Prometheus has scraped during the run: a READ rate and a p99.
    let rate_q =
        r#"sum(rate(ringshare_requests_total{command="READ",status="STATUS_SUCCESS"}[5s]))"#;
    let p99_q = r#"histogram_quantile(0.99, sum by (le) (rate(ringshare_request_duration_seconds_bucket{command="READ"}[5s])))"#;
    // The query window must still overlap the run: ask at once, retrying
    // while Prometheus has fewer than two samples in the window.
    let deadline = Instant::now() + Duration::from_secs(10);
    let (mut rate, mut p99) = (None, None);
    while Instant::now() < deadline && (rate.is_none() || p99.is_none()) {
        rate = query(prom.port, rate_q).filter(|r| *r > 0.0).or(rate);
        p99 = query(prom.port, p99_q)
            .filter(|v| v.is_finite() && *v > 0.0)
            .or(p99);
        std::thread::sleep(Duration::from_millis(300));
    }
    let up = query(prom.port, r#"up{job="ringshare"}"#);
    assert_eq!(up, Some(1.0), "the target is not up in Prometheus");
    let rate = rate.expect("no READ rate through Prometheus");
    let p99 = p99.expect("no READ latency quantile through Prometheus");
    eprintln!(
        "through Prometheus: READ {rate:.0} requests/s, p99 {:.3} ms",
        p99 * 1e3
    );
    assert!(
        p99 < 10.0,
        "a p99 READ latency of {p99} s is not plausible on loopback"
    );
    // And the bytes bench read were counted.
    let read_bytes = query(prom.port, "ringshare_read_bytes_total").unwrap_or(0.0);
    assert!(
        read_bytes >= 64.0 * 1024.0 * 1024.0,
        "read bytes: {read_bytes}"
    );
}
