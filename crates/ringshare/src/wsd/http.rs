//! The metadata exchange over HTTP (TCP 5357): one POST of a WS-Transfer Get
//! to `/<endpoint uuid>` with `Content-Type: application/soap+xml` gets the
//! GetResponse; any other path is 404, anything else on the path 400. Every
//! connection answers one request and closes. Bounds: headers
//! [`MAX_HEADERS`] bytes, body [`MAX_BODY`] bytes, [`DEADLINE`] for the
//! whole request, at most [`MAX_CONNECTIONS`] connections served at once
//! (more are closed at once).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::soap::{self, Identity, Request};
use super::LogLimit;

/// The longest request head read.
pub const MAX_HEADERS: usize = 8 * 1024;
/// The longest request body read (a Get is well under 2 KiB).
pub const MAX_BODY: usize = 32 * 1024;
/// How long one request may take to arrive.
pub const DEADLINE: Duration = Duration::from_secs(5);
/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 4;

/// What the connections share: how many there are, and the log limit for bad requests.
#[derive(Debug)]
pub struct Limits {
    active: AtomicUsize,
    refused: Mutex<LogLimit>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            active: AtomicUsize::new(0),
            refused: Mutex::new(LogLimit::new()),
        }
    }
}

/// Serve `conn` from `peer` on a short-lived thread of its own, or close it when
/// [`MAX_CONNECTIONS`] are being served.
pub fn serve(conn: TcpStream, peer: SocketAddr, me: &Identity, limits: &Arc<Limits>) {
    if limits.active.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
        limits.active.fetch_sub(1, Ordering::AcqRel);
        return;
    }
    let me = me.clone();
    let l = limits.clone();
    let spawned = std::thread::Builder::new()
        .name("ws-discovery-http".into())
        .spawn(move || {
            let answer = respond(&conn, &me);
            if let Err(why) = &answer {
                crate::lock(&l.refused)
                    .warn(format_args!("HTTP request from {peer} refused: {why}"));
            }
            let _ = conn.shutdown(std::net::Shutdown::Both);
            l.active.fetch_sub(1, Ordering::AcqRel);
        });
    if spawned.is_err() {
        limits.active.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A status line and body for an answer other than the metadata.
fn error_response(code: u16, reason: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{reason}\n",
        reason.len() + 1
    )
    .into_bytes()
}

/// Read one request from `conn` and write its answer; the error says why it was refused.
fn respond(mut conn: &TcpStream, me: &Identity) -> Result<(), String> {
    let _ = conn.set_nonblocking(false);
    let (answer, result) = match read_request(conn, me) {
        Ok(body) => {
            let mut a = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/soap+xml\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            )
            .into_bytes();
            a.extend_from_slice(body.as_bytes());
            (a, Ok(()))
        }
        Err((code, why)) => {
            let reason = if code == 404 {
                "Not Found"
            } else {
                "Bad Request"
            };
            (error_response(code, reason), Err(why))
        }
    };
    let _ = conn.set_write_timeout(Some(DEADLINE));
    let _ = conn.write_all(&answer);
    result
}

/// The bytes of a request up to `limit`, read until `done` says they are complete or the
/// deadline passes.
fn read_until(
    mut conn: &TcpStream,
    buf: &mut Vec<u8>,
    limit: usize,
    deadline: Instant,
    done: impl Fn(&[u8]) -> bool,
) -> Result<(), (u16, String)> {
    let mut chunk = [0u8; 4096];
    while !done(buf) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err((400, "too slow".into()));
        }
        let _ = conn.set_read_timeout(Some(left));
        let n = conn
            .read(&mut chunk)
            .map_err(|e| (400, format!("read: {e}")))?;
        if n == 0 {
            return Err((400, "closed before the request was complete".into()));
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > limit {
            return Err((400, format!("request longer than {limit} bytes")));
        }
    }
    Ok(())
}

fn head_end(b: &[u8]) -> Option<usize> {
    b.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// The GetResponse for the request on `conn`, or the status and reason to refuse it.
fn read_request(conn: &TcpStream, me: &Identity) -> Result<String, (u16, String)> {
    let deadline = Instant::now() + DEADLINE;
    let mut buf = Vec::new();
    read_until(conn, &mut buf, MAX_HEADERS + MAX_BODY, deadline, |b| {
        head_end(b).is_some() || b.len() > MAX_HEADERS
    })?;
    let end = head_end(&buf).ok_or((400, "request head too long".to_string()))?;
    let head = std::str::from_utf8(&buf[..end]).map_err(|_| (400, "head not UTF-8".into()))?;
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let ours = format!("/{}", me.uuid);
    if path != ours {
        return Err((404, format!("{method} of {path:.80}")));
    }
    if method != "POST" {
        return Err((400, format!("method {method:.20}")));
    }
    let mut length = None;
    let mut soap_type = false;
    for l in lines {
        let Some((k, v)) = l.split_once(':') else {
            continue;
        };
        let v = v.trim();
        if k.eq_ignore_ascii_case("content-length") {
            length = v.parse::<usize>().ok();
        } else if k.eq_ignore_ascii_case("content-type") {
            soap_type = v.to_ascii_lowercase().starts_with("application/soap+xml");
        } else if k.eq_ignore_ascii_case("transfer-encoding") {
            return Err((400, "chunked bodies are not read".into()));
        }
    }
    if !soap_type {
        return Err((400, "Content-Type is not application/soap+xml".into()));
    }
    let length = length.ok_or((400, "no Content-Length".to_string()))?;
    if length > MAX_BODY {
        return Err((400, format!("body of {length} bytes")));
    }
    read_until(conn, &mut buf, end + length, deadline, |b| {
        b.len() >= end + length
    })?;
    let body = &buf[end..end + length];
    let msg = soap::read(body, me).ok_or((400, "body is not a SOAP envelope".to_string()))?;
    if msg.request != Request::Get {
        return Err((400, format!("action {:.120}", msg.action)));
    }
    Ok(soap::get_response(me, &msg.id))
}
