//! Where log lines go: standard error, one line per event, always. A line
//! break inside an event (a file, share or user name a client chose can hold
//! one, and tracing writes names as they are) is written as `\n` (and `\r` as
//! `\r`), so that nothing a client sends can start a line of its own in the
//! log: a line that looks like a failed logon is one the server wrote
//! (docs/security.md, "Logs"; fail2ban relies on it).

use std::io::{self, Write};

/// A [`tracing_subscriber::fmt::MakeWriter`] for standard error that keeps
/// each event on one line.
#[derive(Clone, Copy, Debug, Default)]
pub struct OneLineStderr;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for OneLineStderr {
    type Writer = OneLine<io::Stderr>;

    fn make_writer(&'a self) -> Self::Writer {
        OneLine(io::stderr())
    }
}

/// A writer that gets one formatted event per `write` (as tracing's fmt
/// layer writes them) and passes it on with its inner line breaks escaped.
pub struct OneLine<W: Write>(pub W);

impl<W: Write> Write for OneLine<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let (body, end) = match buf.strip_suffix(b"\n") {
            Some(b) => (b, &b"\n"[..]),
            None => (buf, &b""[..]),
        };
        if !body.iter().any(|&b| b == b'\n' || b == b'\r') {
            self.0.write_all(buf)?;
            return Ok(buf.len());
        }
        let mut out = Vec::with_capacity(buf.len() + 16);
        for &b in body {
            match b {
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                _ => out.push(b),
            }
        }
        out.extend_from_slice(end);
        self.0.write_all(&out)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn through(events: &[&str]) -> String {
        let mut w = OneLine(Vec::new());
        for e in events {
            w.write_all(e.as_bytes()).unwrap();
        }
        String::from_utf8(w.0).unwrap()
    }

    #[test]
    fn a_line_break_inside_an_event_is_written_escaped_and_each_event_stays_one_line() {
        assert_eq!(
            through(&[
                "a plain line\n",
                "share=x\n2026-01-01T00:00:00Z  WARN forged\r\n"
            ]),
            "a plain line\nshare=x\\n2026-01-01T00:00:00Z  WARN forged\\r\n"
        );
        assert_eq!(through(&["no end"]), "no end");
    }
}
