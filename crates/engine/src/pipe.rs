//! The pipes a ring splices through: as large as asked where the kernel allows, else as
//! large as it allows, never quietly the kernel's 64 KiB default.

use std::io;
use std::os::fd::AsFd;

use crate::op::Pipe;

/// Where the kernel says how large a process without `CAP_SYS_RESOURCE` may make a pipe.
const PIPE_MAX_SIZE: &str = "/proc/sys/fs/pipe-max-size";

/// A close-on-exec pipe sized for `chunk` bytes ([`size_pipe`]).
/// A pipe is the server's own: made with its credentials, so that a user's limits on pipe
/// memory do not apply to it.
pub(crate) fn new_pipe(chunk: usize) -> io::Result<Pipe> {
    crate::creds::act_as_server()?;
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    let capacity = size_pipe(&write, chunk)?;
    Ok(Pipe {
        read,
        write,
        capacity,
    })
}

/// Sizes the pipe of `fd` (either end) for `bytes` where the kernel allows, and returns what
/// it holds. A process without `CAP_SYS_RESOURCE` (a container's root is often one) may not
/// size a pipe past `/proc/sys/fs/pipe-max-size` (1 MiB by default); asked for more, the pipe
/// is made that large instead of staying at the kernel's default 64 KiB, which would cut every
/// spliced READ into 64 KiB fills and drains (2-6x the server CPU per GiB: docs/benchmarks.md,
/// session 63).
pub fn size_pipe(fd: impl AsFd, bytes: usize) -> io::Result<usize> {
    use rustix::pipe::{fcntl_getpipe_size, fcntl_setpipe_size};
    if let Ok(n) = fcntl_setpipe_size(&fd, bytes) {
        return Ok(n);
    }
    let limited = pipe_max_size()
        .filter(|&max| max < bytes)
        .map(|max| fcntl_setpipe_size(&fd, max));
    match limited {
        Some(Ok(n)) => Ok(n),
        _ => Ok(fcntl_getpipe_size(&fd)?),
    }
}

/// `/proc/sys/fs/pipe-max-size`, if it can be read.
fn pipe_max_size() -> Option<usize> {
    std::fs::read_to_string(PIPE_MAX_SIZE)
        .ok()?
        .trim()
        .parse()
        .ok()
}
