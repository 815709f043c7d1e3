//! The pipes a ring splices through: as large as asked where the kernel allows, else as
//! large as it allows, never quietly the kernel's 64 KiB default.

use std::io;

use crate::op::Pipe;

/// Where the kernel says how large a process without `CAP_SYS_RESOURCE` may make a pipe.
const PIPE_MAX_SIZE: &str = "/proc/sys/fs/pipe-max-size";

/// A close-on-exec pipe sized for `chunk` bytes where the kernel allows. A process without
/// `CAP_SYS_RESOURCE` (a container's root is often one) may not size a pipe past
/// `/proc/sys/fs/pipe-max-size` (1 MiB by default); asked for more, it gets a pipe of that
/// size instead of the kernel's default 64 KiB, which would cut every spliced READ into 64 KiB
/// fills and drains (twice the server CPU per GiB: docs/benchmarks.md, session 63).
/// A pipe is the server's own: made with its credentials, so that a user's limits on pipe
/// memory do not apply to it.
pub(crate) fn new_pipe(chunk: usize) -> io::Result<Pipe> {
    crate::creds::act_as_server()?;
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    let capacity = match rustix::pipe::fcntl_setpipe_size(&write, chunk) {
        Ok(n) => n,
        Err(_) => match pipe_max_size().filter(|&max| max < chunk) {
            Some(max) => match rustix::pipe::fcntl_setpipe_size(&write, max) {
                Ok(n) => n,
                Err(_) => rustix::pipe::fcntl_getpipe_size(&write)?,
            },
            None => rustix::pipe::fcntl_getpipe_size(&write)?,
        },
    };
    Ok(Pipe {
        read,
        write,
        capacity,
    })
}

/// `/proc/sys/fs/pipe-max-size`, if it can be read.
fn pipe_max_size() -> Option<usize> {
    std::fs::read_to_string(PIPE_MAX_SIZE)
        .ok()?
        .trim()
        .parse()
        .ok()
}
