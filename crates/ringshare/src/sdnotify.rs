//! Telling systemd how the server is doing (the `sd_notify(3)` protocol), for a unit of
//! `Type=notify`: one datagram per state change to the Unix socket named by `$NOTIFY_SOCKET`
//! (a path, or an abstract-namespace name when it starts with `@`), newline-separated
//! `KEY=VALUE` assignments.
//!
//! Every function is a no-op when `NOTIFY_SOCKET` is unset (not started by systemd) and never
//! fails the server: a message that cannot be sent is logged at debug level and dropped.
//! The variable is left in the environment, as later state changes need it.

use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// The server is up: its sockets are bound and it serves. Also sent when a reload finished.
/// `status` is a one-line description `systemctl status` shows.
pub fn ready(status: &str) {
    notify(&format!("READY=1\nSTATUS={}", one_line(status)));
}

/// A reload of the configuration begins; [`ready`] must follow when it is done. Carries
/// `MONOTONIC_USEC`, which `Type=notify-reload` (systemd 253 and later) requires and plain
/// `Type=notify` accepts.
pub fn reloading() {
    notify(&reloading_message(monotonic_usec()));
}

/// The server is stopping (a stop signal arrived).
pub fn stopping() {
    notify("STOPPING=1\nSTATUS=stopping");
}

/// Sends `state` to `$NOTIFY_SOCKET`, when it is set.
pub fn notify(state: &str) {
    let Some(socket) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let Some(socket) = socket.to_str() else {
        tracing::debug!("NOTIFY_SOCKET is not UTF-8: not telling systemd {state:?}");
        return;
    };
    if let Err(e) = send_to(socket, state) {
        tracing::debug!("cannot tell systemd {state:?} through {socket}: {e}");
    }
}

/// Sends `state` as one datagram to the notification socket `socket` (a path, or `@name` for
/// an abstract one).
pub fn send_to(socket: &str, state: &str) -> io::Result<()> {
    let addr = notify_addr(socket)?;
    let sock = UnixDatagram::unbound()?;
    // systemd reads these at once; a full queue must not hold a stopping server for long.
    sock.set_write_timeout(Some(Duration::from_secs(1)))?;
    let sent = sock.send_to_addr(state.as_bytes(), &addr)?;
    if sent != state.len() {
        return Err(io::Error::other("short write"));
    }
    Ok(())
}

fn notify_addr(socket: &str) -> io::Result<SocketAddr> {
    if let Some(name) = socket.strip_prefix('@') {
        use std::os::linux::net::SocketAddrExt;
        SocketAddr::from_abstract_name(name.as_bytes())
    } else if socket.starts_with('/') {
        SocketAddr::from_pathname(socket)
    } else {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "not an absolute path nor an abstract name (@...)",
        ))
    }
}

fn reloading_message(monotonic_usec: u64) -> String {
    format!("RELOADING=1\nMONOTONIC_USEC={monotonic_usec}\nSTATUS=reloading the configuration")
}

/// CLOCK_MONOTONIC in microseconds, the clock systemd compares `MONOTONIC_USEC` with.
fn monotonic_usec() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64) * 1_000_000 + (t.tv_nsec as u64) / 1_000
}

/// A status must stay one assignment: newlines would start new ones.
fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A datagram socket bound in a fresh directory, standing in for systemd's.
    struct Listener {
        dir: PathBuf,
        sock: UnixDatagram,
        path: PathBuf,
    }

    impl Listener {
        fn new(tag: &str) -> Listener {
            let dir = std::env::temp_dir()
                .join(format!("ringshare-sdnotify-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("create temp dir");
            let path = dir.join("notify.sock");
            let sock = UnixDatagram::bind(&path).expect("bind notify socket");
            sock.set_read_timeout(Some(Duration::from_secs(5)))
                .expect("read timeout");
            Listener { dir, sock, path }
        }

        fn receive(&self) -> String {
            let mut buf = [0u8; 4096];
            let n = self.sock.recv(&mut buf).expect("a datagram arrives");
            String::from_utf8(buf[..n].to_vec()).expect("UTF-8")
        }
    }

    impl Drop for Listener {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    #[test]
    fn a_state_reaches_a_socket_named_by_its_path_as_one_datagram() {
        let l = Listener::new("path");
        send_to(l.path.to_str().unwrap(), "READY=1\nSTATUS=serving").expect("sent");
        assert_eq!(l.receive(), "READY=1\nSTATUS=serving");
    }

    #[test]
    fn a_state_reaches_an_abstract_socket_named_with_an_at_sign() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("ringshare-sdnotify-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let sock = UnixDatagram::bind_addr(&addr).expect("bind abstract socket");
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        send_to(&format!("@{name}"), "STOPPING=1").expect("sent");
        let mut buf = [0u8; 64];
        let n = sock.recv(&mut buf).expect("a datagram arrives");
        assert_eq!(&buf[..n], b"STOPPING=1");
    }

    #[test]
    fn a_relative_or_missing_socket_is_an_error_not_a_panic() {
        assert!(send_to("relative/notify.sock", "READY=1").is_err());
        assert!(send_to("/nonexistent/ringshare/notify.sock", "READY=1").is_err());
    }

    #[test]
    fn reloading_carries_the_monotonic_time_in_microseconds() {
        let msg = reloading_message(monotonic_usec());
        let mut lines = msg.lines();
        assert_eq!(lines.next(), Some("RELOADING=1"));
        let usec: u64 = lines
            .next()
            .and_then(|l| l.strip_prefix("MONOTONIC_USEC="))
            .and_then(|v| v.parse().ok())
            .expect("MONOTONIC_USEC=<number>");
        // CLOCK_MONOTONIC never runs ahead of the time since boot (it stops during suspend)...
        let uptime: f64 = std::fs::read_to_string("/proc/uptime")
            .expect("/proc/uptime")
            .split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .expect("uptime seconds");
        assert!(
            usec as f64 <= (uptime + 1.0) * 1e6,
            "{usec} µs > {uptime} s up"
        );
        // ...and counts microseconds.
        let t0 = monotonic_usec();
        std::thread::sleep(Duration::from_millis(200));
        let elapsed = monotonic_usec() - t0;
        assert!((200_000..2_000_000).contains(&elapsed), "{elapsed}");
    }

    #[test]
    fn a_status_with_newlines_stays_one_assignment() {
        assert_eq!(one_line("a\nREADY=0\r"), "a READY=0 ");
    }
}
