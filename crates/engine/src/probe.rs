//! Start-up check: is io_uring usable here, and does the kernel know every
//! opcode ringshare relies on?
//!
//! Call [`probe`] once at start-up and print its error as is: it names the
//! kernel version, the `io_uring_disabled` sysctl and each missing opcode.

use std::fmt;
use std::io;

use io_uring::{opcode, IoUring, Probe};

/// Opcodes the engine uses now or is designed to use next (splice reads,
/// zero-copy sends). A kernel lacking any of them is refused at start-up.
pub const REQUIRED_OPCODES: &[(&str, u8)] = &[
    ("ACCEPT", opcode::Accept::CODE),
    ("RECV", opcode::Recv::CODE),
    ("SEND", opcode::Send::CODE),
    ("SENDMSG", opcode::SendMsg::CODE),
    ("READ", opcode::Read::CODE),
    ("WRITE", opcode::Write::CODE),
    ("FSYNC", opcode::Fsync::CODE),
    ("TIMEOUT", opcode::Timeout::CODE),
    ("ASYNC_CANCEL", opcode::AsyncCancel::CODE),
    ("CLOSE", opcode::Close::CODE),
    ("SPLICE", opcode::Splice::CODE),
    ("SEND_ZC", opcode::SendZc::CODE),
];

/// What the start-up probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeReport {
    /// `/proc/sys/kernel/osrelease`, or "unknown".
    pub kernel_release: String,
    /// `/proc/sys/kernel/io_uring_disabled` (0 enabled, 1 restricted, 2 disabled), if present.
    pub io_uring_disabled: Option<u8>,
    /// Names from [`REQUIRED_OPCODES`] the kernel does not support (empty when usable).
    pub missing_opcodes: Vec<&'static str>,
}

impl fmt::Display for ProbeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "kernel {}", self.kernel_release)?;
        if let Some(disabled) = self.io_uring_disabled {
            write!(f, ", kernel.io_uring_disabled={disabled}")?;
        }
        if !self.missing_opcodes.is_empty() {
            write!(
                f,
                ", missing io_uring opcodes: {}",
                self.missing_opcodes.join(", ")
            )?;
        }
        Ok(())
    }
}

/// Kernel release string, e.g. "6.18.44".
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".to_owned())
}

fn io_uring_disabled() -> Option<u8> {
    std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

/// Creates a small ring and checks [`REQUIRED_OPCODES`].
///
/// Errors are `io::Error`s whose message explains what is missing and why
/// (sysctl, seccomp, old kernel).
pub fn probe() -> io::Result<ProbeReport> {
    let ring = IoUring::new(2).map_err(setup_error)?;
    check_ring(&ring)
}

/// Checks the opcodes on an existing ring.
pub(crate) fn check_ring(ring: &IoUring) -> io::Result<ProbeReport> {
    let mut probe = Probe::new();
    ring.submitter().register_probe(&mut probe).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "io_uring opcode probe failed ({e}); {}",
                ProbeReport {
                    kernel_release: kernel_release(),
                    io_uring_disabled: io_uring_disabled(),
                    missing_opcodes: Vec::new(),
                }
            ),
        )
    })?;
    let report = ProbeReport {
        kernel_release: kernel_release(),
        io_uring_disabled: io_uring_disabled(),
        missing_opcodes: missing(|code| probe.is_supported(code)),
    };
    if report.missing_opcodes.is_empty() {
        Ok(report)
    } else {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("io_uring is too old for ringshare: {report} (Linux 6.1 or later is needed)"),
        ))
    }
}

fn missing(supported: impl Fn(u8) -> bool) -> Vec<&'static str> {
    REQUIRED_OPCODES
        .iter()
        .filter(|(_, code)| !supported(*code))
        .map(|(name, _)| *name)
        .collect()
}

/// Turns an `io_uring_setup` failure into an explanation.
pub(crate) fn setup_error(e: io::Error) -> io::Error {
    let report = ProbeReport {
        kernel_release: kernel_release(),
        io_uring_disabled: io_uring_disabled(),
        missing_opcodes: Vec::new(),
    };
    let why = match (e.raw_os_error(), report.io_uring_disabled) {
        (Some(libc::ENOSYS), _) => "the kernel was built without io_uring (CONFIG_IO_URING)",
        (Some(libc::EPERM), Some(2)) => "io_uring is disabled by the kernel.io_uring_disabled=2 sysctl",
        (Some(libc::EPERM), Some(1)) => {
            "io_uring is restricted by kernel.io_uring_disabled=1 to the io_uring_group / CAP_SYS_ADMIN"
        }
        (Some(libc::EPERM), _) => {
            "io_uring_setup was refused (a seccomp filter, e.g. a container's default profile?)"
        }
        (Some(libc::ENOMEM), _) => "not enough locked memory for the ring (RLIMIT_MEMLOCK on kernels before 5.12)",
        _ => "io_uring_setup failed",
    };
    io::Error::new(
        e.kind(),
        format!("io_uring unavailable: {why}: {e}; {report}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_accepts_this_kernel() {
        let report = probe().expect("io_uring usable on the test machine");
        assert!(report.missing_opcodes.is_empty());
        assert_ne!(report.kernel_release, "");
    }

    #[test]
    fn report_names_each_missing_opcode() {
        let names = missing(|code| code != opcode::SendZc::CODE && code != opcode::Splice::CODE);
        assert_eq!(names, vec!["SPLICE", "SEND_ZC"]);
        let report = ProbeReport {
            kernel_release: "5.4.0".into(),
            io_uring_disabled: None,
            missing_opcodes: names,
        };
        assert_eq!(
            report.to_string(),
            "kernel 5.4.0, missing io_uring opcodes: SPLICE, SEND_ZC"
        );
    }

    #[test]
    fn setup_error_explains_the_sysctl() {
        let e = setup_error(io::Error::from_raw_os_error(libc::ENOSYS));
        assert!(e.to_string().contains("without io_uring"), "{e}");
    }
}
