//! The control socket: a local Unix socket through which `ringshare status`
//! and `ringshare reload` talk to the running server.
//!
//! One request per connection: a line (`status`, `status json`, `reload`),
//! answered with `ok` or `error` on the first line and the text after it.
//! Only root, the account the server runs as and members of `control group`
//! may use it: the socket file is 0660 (0600 without a group) in a directory
//! of its own, and every peer's credentials (SO_PEERCRED) are checked again.
//! It runs on a plain thread of its own, away from the I/O rings.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Longest request line read.
const REQUEST_LEN_MAX: u64 = 256;
/// How long a peer may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How long `ringshare status|reload` waits for the answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// What the server does for one request: `Ok(text)` or `Err(reason)`.
pub type Handler = dyn Fn(&str) -> Result<String, String> + Send + Sync;

/// The listening socket; its file is removed when this is dropped.
pub struct ControlSocket {
    path: PathBuf,
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Who may use the socket besides root and the server's own account.
fn group_id(name: &str) -> Result<u32, String> {
    match nix::unistd::Group::from_name(name) {
        Ok(Some(g)) => Ok(g.gid.as_raw()),
        Ok(None) => Err(format!(
            "control group '{name}' is not a group of this machine"
        )),
        Err(e) => Err(format!("control group '{name}': {e}")),
    }
}

/// Listen on `path` and answer requests with `handler` on a thread of its
/// own. A socket file another running server answers on is left to it (the
/// server runs without one, and says so); a stale one is replaced.
pub fn start(
    path: &Path,
    group: Option<&str>,
    handler: Arc<Handler>,
) -> Result<Option<ControlSocket>, String> {
    let gid = group.map(group_id).transpose()?;
    if let Some(dir) = path.parent() {
        if !dir.exists() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            let mode = if gid.is_some() { 0o750 } else { 0o700 };
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode));
            if let Some(g) = gid {
                let _ = std::os::unix::fs::chown(dir, None, Some(g));
            }
        }
    }
    if UnixStream::connect(path).is_ok() {
        tracing::warn!(
            "control socket {} belongs to another running server: this one has none \
             (give it its own with `control socket` in [global])",
            path.display()
        );
        return Ok(None);
    }
    let _ = std::fs::remove_file(path);
    let mode = if gid.is_some() { 0o660 } else { 0o600 };
    // The socket is made with its mode (the server runs with umask 0): no
    // moment in which others could connect. The server has one thread here.
    let old = rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o777 & !mode));
    let bound = UnixListener::bind(path);
    rustix::process::umask(old);
    let listener = bound.map_err(|e| format!("cannot listen on {}: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if let Some(g) = gid {
        std::os::unix::fs::chown(path, None, Some(g))
            .map_err(|e| format!("{}: cannot give it to group {g}: {e}", path.display()))?;
    }
    let sock = ControlSocket {
        path: path.to_path_buf(),
    };
    std::thread::Builder::new()
        .name("ringshare-control".into())
        .spawn(move || {
            for conn in listener.incoming() {
                match conn {
                    Ok(c) => serve_one(c, gid, handler.as_ref()),
                    Err(e) => {
                        tracing::warn!("control socket: accept failed: {e}");
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            }
        })
        .map_err(|e| format!("cannot start the control thread: {e}"))?;
    Ok(Some(sock))
}

/// Whether the peer may use the socket: root, the server's own account, or
/// a member of the control group.
fn admitted(conn: &UnixStream, gid: Option<u32>) -> Result<(), String> {
    let cred = rustix::net::sockopt::socket_peercred(conn)
        .map_err(|e| format!("cannot read the peer's credentials: {e}"))?;
    let uid = cred.uid.as_raw();
    if uid == 0 || uid == rustix::process::geteuid().as_raw() {
        return Ok(());
    }
    if let Some(g) = gid {
        if cred.gid.as_raw() == g || member_of(uid, g) {
            return Ok(());
        }
    }
    Err(format!("uid {uid} may not use the control socket"))
}

/// Whether the account `uid` is in group `gid` (through NSS).
fn member_of(uid: u32, gid: u32) -> bool {
    let Ok(Some(user)) = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) else {
        return false;
    };
    crate::accounts::groups_of(&user.name, user.gid.as_raw()).is_some_and(|gs| gs.contains(&gid))
}

fn serve_one(mut conn: UnixStream, gid: Option<u32>, handler: &Handler) {
    if let Err(why) = admitted(&conn, gid) {
        tracing::warn!("control socket: refused: {why}");
        let _ = write!(conn, "error\n{why}\n");
        return;
    }
    let _ = conn.set_read_timeout(Some(REQUEST_TIMEOUT));
    let mut line = String::new();
    let read = BufReader::new((&conn).take(REQUEST_LEN_MAX)).read_line(&mut line);
    let answer = match read {
        Ok(_) if line.ends_with('\n') => handler(line.trim()),
        Ok(_) => Err("the request is not one line".to_string()),
        Err(e) => Err(format!("cannot read the request: {e}")),
    };
    let _ = match answer {
        Ok(text) => write!(conn, "ok\n{text}"),
        Err(why) => write!(conn, "error\n{why}\n"),
    };
}

/// Ask the server listening on `path`: its answer, or why there is none.
pub fn request(path: &Path, command: &str) -> Result<String, String> {
    let mut conn = UnixStream::connect(path).map_err(|e| {
        let hint = match e.kind() {
            io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => {
                " (is ringshare running? a server with `control socket` set elsewhere is \
                 reached with --socket PATH or --config FILE)"
            }
            io::ErrorKind::PermissionDenied => {
                " (only root, the server's account and members of `control group` may use it)"
            }
            _ => "",
        };
        format!("cannot reach the server at {}: {e}{hint}", path.display())
    })?;
    let _ = conn.set_read_timeout(Some(ANSWER_TIMEOUT));
    conn.write_all(format!("{command}\n").as_bytes())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut all = String::new();
    conn.read_to_string(&mut all)
        .map_err(|e| format!("{}: no answer: {e}", path.display()))?;
    match all.split_once('\n') {
        Some(("ok", text)) => Ok(text.to_string()),
        Some(("error", why)) => Err(why.trim_end().to_string()),
        _ => Err(format!(
            "{}: the server's answer makes no sense",
            path.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_socket(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "ringshare-control-test-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir.join("control.sock")
    }

    #[test]
    fn a_request_gets_the_handlers_answer_and_an_error_its_reason() {
        let path = temp_socket("answer");
        let h: Arc<Handler> = Arc::new(|cmd: &str| match cmd {
            "status" => Ok("all well\n".to_string()),
            other => Err(format!("unknown request '{other}'")),
        });
        let _sock = start(&path, None, h).unwrap().unwrap();
        assert_eq!(request(&path, "status").unwrap(), "all well\n");
        assert_eq!(
            request(&path, "frobnicate").unwrap_err(),
            "unknown request 'frobnicate'"
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            mode, 0o600,
            "without a control group only the owner may connect"
        );
    }

    #[test]
    fn a_second_server_leaves_a_live_socket_to_the_first() {
        let path = temp_socket("live");
        let first: Arc<Handler> = Arc::new(|_: &str| Ok("first\n".to_string()));
        let second: Arc<Handler> = Arc::new(|_: &str| Ok("second\n".to_string()));
        let _a = start(&path, None, first).unwrap().unwrap();
        assert!(start(&path, None, second).unwrap().is_none());
        assert_eq!(request(&path, "status").unwrap(), "first\n");
    }

    #[test]
    fn a_stale_socket_file_is_replaced() {
        let path = temp_socket("stale");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        drop(UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        let h: Arc<Handler> = Arc::new(|_: &str| Ok("new\n".to_string()));
        let _s = start(&path, None, h).unwrap().unwrap();
        assert_eq!(request(&path, "status").unwrap(), "new\n");
    }

    #[test]
    fn no_server_is_a_clear_error() {
        let path = temp_socket("none");
        let e = request(&path, "status").unwrap_err();
        assert!(e.contains("is ringshare running?"), "{e}");
    }
}
