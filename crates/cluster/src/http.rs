//! A minimal blocking HTTP/1.1 client for etcd's JSON gateway: one POST per TCP connection
//! (`Connection: close`), every step bounded by a deadline, the response size capped.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::Error;

/// One etcd client URL, parsed once: `http://host:port` (or `host:port`).
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    pub(crate) host: String,
    pub(crate) addrs: Vec<SocketAddr>,
}

impl Endpoint {
    pub(crate) fn parse(url: &str) -> Result<Self, Error> {
        let rest = if let Some(r) = url.strip_prefix("http://") {
            r
        } else if url.starts_with("https://") {
            return Err(Error::Config(format!(
                "{url}: TLS endpoints are not supported yet"
            )));
        } else {
            url
        };
        let host = rest.trim_end_matches('/');
        if host.is_empty() || host.contains('/') {
            return Err(Error::Config(format!("{url}: expected http://host:port")));
        }
        let addrs: Vec<SocketAddr> = host
            .to_socket_addrs()
            .map_err(|e| Error::Config(format!("{url}: {e}")))?
            .collect();
        if addrs.is_empty() {
            return Err(Error::Config(format!("{url}: no address")));
        }
        Ok(Endpoint {
            host: host.to_string(),
            addrs,
        })
    }
}

/// POSTs `body` to `path` and returns (status, body). Fails with `Error::Unavailable` when the
/// deadline passes, the connection fails or the answer is not well-formed HTTP, and with
/// `Error::BadResponse` when the answer is larger than `cap` bytes.
pub(crate) fn post(
    ep: &Endpoint,
    path: &str,
    body: &[u8],
    deadline: Instant,
    cap: usize,
) -> Result<(u16, Vec<u8>), Error> {
    let remaining = |what: &str| -> Result<Duration, Error> {
        let now = Instant::now();
        if now >= deadline {
            return Err(Error::Unavailable(format!(
                "{}: timed out ({what})",
                ep.host
            )));
        }
        Ok((deadline - now).max(Duration::from_millis(1)))
    };
    let mut last = None;
    let mut stream = None;
    for a in &ep.addrs {
        match TcpStream::connect_timeout(a, remaining("connect")?) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let mut s = stream.ok_or_else(|| {
        Error::Unavailable(format!(
            "{}: connect: {}",
            ep.host,
            last.map(|e| e.to_string()).unwrap_or_default()
        ))
    })?;
    let _ = s.set_nodelay(true);
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        ep.host,
        body.len()
    );
    let io = |e: std::io::Error| Error::Unavailable(format!("{}: {e}", ep.host));
    s.set_write_timeout(Some(remaining("write")?)).map_err(io)?;
    s.write_all(head.as_bytes()).map_err(io)?;
    s.write_all(body).map_err(io)?;
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 16384];
    loop {
        if let Some(done) = parse_response(&buf)? {
            return Ok(done);
        }
        s.set_read_timeout(Some(remaining("read")?)).map_err(io)?;
        let n = match s.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io(e)),
        };
        if n == 0 {
            // Closed: the answer must be complete now (or was cut short).
            return match parse_response(&buf)? {
                Some(done) => Ok(done),
                None => Err(Error::Unavailable(format!(
                    "{}: connection closed early",
                    ep.host
                ))),
            };
        }
        if buf.len() + n > cap {
            return Err(Error::BadResponse(format!(
                "{}: answer over {cap} bytes",
                ep.host
            )));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Parses a complete HTTP/1.1 response from `buf`; `Ok(None)` while more bytes are needed.
pub(crate) fn parse_response(buf: &[u8]) -> Result<Option<(u16, Vec<u8>)>, Error> {
    let Some(hend) = find(buf, b"\r\n\r\n") else {
        if buf.len() > 64 * 1024 {
            return Err(Error::BadResponse("HTTP header over 64 KiB".into()));
        }
        return Ok(None);
    };
    let head = std::str::from_utf8(&buf[..hend])
        .map_err(|_| Error::BadResponse("HTTP header not UTF-8".into()))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let mut parts = status_line.split(' ');
    let (Some(ver), Some(code)) = (parts.next(), parts.next()) else {
        return Err(Error::BadResponse(format!(
            "bad status line {status_line:?}"
        )));
    };
    if !ver.starts_with("HTTP/1.") {
        return Err(Error::BadResponse(format!(
            "bad status line {status_line:?}"
        )));
    }
    let status: u16 = code
        .parse()
        .map_err(|_| Error::BadResponse(format!("bad status line {status_line:?}")))?;
    let mut length = None;
    let mut chunked = false;
    for l in lines {
        let Some((k, v)) = l.split_once(':') else {
            return Err(Error::BadResponse(format!("bad header line {l:?}")));
        };
        let v = v.trim();
        if k.eq_ignore_ascii_case("content-length") {
            length = Some(
                v.parse::<usize>()
                    .map_err(|_| Error::BadResponse(format!("bad Content-Length {v:?}")))?,
            );
        } else if k.eq_ignore_ascii_case("transfer-encoding") {
            chunked = v.eq_ignore_ascii_case("chunked");
        }
    }
    let body = &buf[hend + 4..];
    if chunked {
        return dechunk(body).map(|o| o.map(|b| (status, b)));
    }
    match length {
        Some(n) if body.len() >= n => Ok(Some((status, body[..n].to_vec()))),
        Some(_) => Ok(None),
        // Neither: the body runs to the end of the connection; the caller decides at EOF.
        None => Ok(None),
    }
}

fn dechunk(mut b: &[u8]) -> Result<Option<Vec<u8>>, Error> {
    let mut out = Vec::new();
    loop {
        let Some(le) = find(b, b"\r\n") else {
            return Ok(None);
        };
        let size_txt = std::str::from_utf8(&b[..le])
            .map_err(|_| Error::BadResponse("bad chunk size".into()))?;
        let size_txt = size_txt.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_txt, 16)
            .map_err(|_| Error::BadResponse(format!("bad chunk size {size_txt:?}")))?;
        b = &b[le + 2..];
        if size == 0 {
            return Ok(Some(out));
        }
        if b.len() < size + 2 {
            return Ok(None);
        }
        if &b[size..size + 2] != b"\r\n" {
            return Err(Error::BadResponse("chunk not followed by CRLF".into()));
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_content_length_answer_is_complete_only_when_all_bytes_arrived() {
        let full = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        assert_eq!(parse_response(&full[..full.len() - 1]).unwrap(), None);
        assert_eq!(
            parse_response(full).unwrap(),
            Some((200, b"hello".to_vec()))
        );
    }

    #[test]
    fn a_chunked_answer_is_joined_and_ends_at_the_zero_chunk() {
        let full = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        assert_eq!(parse_response(&full[..30]).unwrap(), None);
        assert_eq!(
            parse_response(full).unwrap(),
            Some((200, b"abcde".to_vec()))
        );
    }

    #[test]
    fn garbage_answers_are_errors_not_panics() {
        for bad in [
            &b"SSH-2.0-x\r\n\r\n"[..],
            b"HTTP/1.1 abc OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nabc\r\n",
            b"HTTP/1.1 200 OK\r\nnocolon\r\n\r\n",
        ] {
            assert!(
                parse_response(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn endpoints_take_a_plain_http_url_and_refuse_tls_and_paths() {
        assert_eq!(
            Endpoint::parse("http://127.0.0.1:2379")
                .unwrap()
                .addrs
                .len(),
            1
        );
        assert!(Endpoint::parse("https://127.0.0.1:2379").is_err());
        assert!(Endpoint::parse("http://127.0.0.1:2379/v3").is_err());
        assert!(Endpoint::parse("http://").is_err());
    }
}
