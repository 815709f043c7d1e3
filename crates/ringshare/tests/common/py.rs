//! Python's `smbprotocol` (PyPI) for the interop tests: a venv under the target directory
//! (`target/pyenv`, made with `python3 -m venv`: Debian's `python3-venv`) with smbprotocol
//! installed on first use, and a bounded runner for the scripts in `tests/py/`. When it cannot
//! be installed (no network, no python3-venv) the tests fail and say why; set
//! `RINGSHARE_SKIP_PY=1` to skip them instead.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// The smbprotocol release the tests are written against.
pub const SMBPROTOCOL: &str = "smbprotocol==1.17.0";
/// Limit for creating the venv and installing smbprotocol into it.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(300);

/// Whether the tests should be skipped on request (`RINGSHARE_SKIP_PY=1`).
pub fn skipped(test: &str) -> bool {
    if std::env::var("RINGSHARE_SKIP_PY").is_ok_and(|v| v == "1") {
        eprintln!("\n!!!!!!!! SKIPPED {test}: RINGSHARE_SKIP_PY=1 !!!!!!!!\n");
        return true;
    }
    false
}

/// `tests/py/NAME`.
pub fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("py")
        .join(name)
}

/// The cargo target directory: the test binary is `<target>/<profile>/deps/<name>`.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    exe.ancestors()
        .nth(3)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target")))
}

/// Runs `cmd` to completion within `limit`; returns (success, stdout + stderr).
pub fn run_bounded(cmd: &mut Command, limit: Duration) -> (bool, String) {
    let dir = std::env::temp_dir().join(format!(
        "ringshare-py-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir).expect("create output dir");
    let out_path = dir.join("out");
    let out = std::fs::File::create(&out_path).expect("create output file");
    let err = out.try_clone().expect("clone output file");
    let mut child = match cmd.stdin(Stdio::null()).stdout(out).stderr(err).spawn() {
        Ok(c) => c,
        Err(e) => return (false, format!("could not start {cmd:?}: {e}")),
    };
    let status = super::wait_within(&mut child, limit);
    let mut text = std::fs::read_to_string(&out_path).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    if status.is_none() {
        text.push_str(&format!("\n(killed after {limit:?})"));
    }
    (status.is_some_and(|s| s.success()), text)
}

/// What one venv is made of.
struct Venv {
    /// Its directory under the target directory.
    dir: &'static str,
    /// The python that makes it, and its extra `venv` arguments.
    base: &'static str,
    venv_args: &'static [&'static str],
    /// What `pip install` installs, and what must import afterwards.
    packages: &'static [&'static str],
    imports: &'static str,
    /// Limit for the `pip install`.
    install_timeout: Duration,
    /// Said when it cannot be made.
    hint: &'static str,
}

/// The venv's python, made and filled on first use.
fn make_venv(v: &Venv) -> Result<PathBuf, String> {
    let venv = target_dir().join(v.dir);
    let py = venv.join("bin").join("python");
    let importable = |py: &Path| {
        run_bounded(
            Command::new(py).args(["-c", &format!("import {}", v.imports)]),
            Duration::from_secs(60),
        )
        .0
    };
    if py.exists() && importable(&py) {
        return Ok(py);
    }
    let (ok, out) = run_bounded(
        Command::new(v.base)
            .args(["-m", "venv"])
            .args(v.venv_args)
            .arg(&venv),
        INSTALL_TIMEOUT,
    );
    if !ok {
        return Err(format!(
            "`{} -m venv {}` failed (Debian: apt-get install -y python3-venv):\n{out}",
            v.base,
            venv.display()
        ));
    }
    let (ok, out) = run_bounded(
        Command::new(&py)
            .args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--quiet",
            ])
            .args(v.packages),
        v.install_timeout,
    );
    if !ok || !importable(&py) {
        return Err(format!(
            "could not install {:?} into {} ({}):\n{out}",
            v.packages,
            venv.display(),
            v.hint
        ));
    }
    Ok(py)
}

fn got_or_panic(got: &'static Result<PathBuf, String>) -> &'static Path {
    match got {
        Ok(p) => p,
        Err(why) => panic!("{why}\nSet RINGSHARE_SKIP_PY=1 to skip the smbprotocol tests."),
    }
}

/// The venv's python with smbprotocol importable, installed on first use. Panics with the
/// reason when it cannot be had.
pub fn python() -> &'static Path {
    static PY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    got_or_panic(PY.get_or_init(|| {
        make_venv(&Venv {
            dir: "pyenv",
            base: "python3",
            venv_args: &[],
            packages: &[SMBPROTOCOL],
            imports: "smbprotocol, smbclient",
            install_timeout: INSTALL_TIMEOUT,
            hint: "no network?",
        })
    }))
}

/// The aioquic release the SMB-over-QUIC test with an independent client is written against
/// (tests/quic.rs; wheels on PyPI, with `cryptography` for its TLS).
pub const AIOQUIC: &str = "aioquic==1.7.2";

/// A python with smbprotocol and aioquic importable (`target/pyenv-quic`), installed on first
/// use. Panics with the reason when it cannot be had.
pub fn python_with_aioquic() -> &'static Path {
    static PY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    got_or_panic(PY.get_or_init(|| {
        make_venv(&Venv {
            dir: "pyenv-quic",
            base: "python3",
            venv_args: &[],
            packages: &[SMBPROTOCOL, AIOQUIC],
            imports: "smbprotocol, smbclient, aioquic, cryptography",
            install_timeout: INSTALL_TIMEOUT,
            hint: "no network?",
        })
    }))
}

/// The `krb5` (pykrb5) release pyspnego's Kerberos needs beside gssapi; PyPI has no wheel of it
/// for Linux, so pip builds it (about 2 minutes; needs libkrb5-dev and python3-dev).
pub const PYKRB5: &str = "krb5==0.10.0";

/// A python with smbprotocol and MIT GSS bindings importable, for Kerberos: a venv of Debian's
/// python (`/usr/bin/python3`) that sees its packages (`--system-site-packages`: Debian's
/// python3-gssapi, which would otherwise have to be compiled too), with smbprotocol and
/// [`PYKRB5`] installed on first use. Panics with the reason when it cannot be had.
pub fn python_with_gssapi() -> &'static Path {
    static PY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    got_or_panic(PY.get_or_init(|| {
        make_venv(&Venv {
            dir: "pyenv-gssapi",
            base: "/usr/bin/python3",
            venv_args: &["--system-site-packages"],
            packages: &[SMBPROTOCOL, PYKRB5],
            imports: "smbprotocol, smbclient, gssapi, krb5",
            // pykrb5 is compiled, perhaps beside other tests.
            install_timeout: INSTALL_TIMEOUT * 3,
            hint: "python3-gssapi, libkrb5-dev or python3-dev missing? no network?",
        })
    }))
}
