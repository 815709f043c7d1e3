//! Stopping a process for a test (SIGSTOP) so that it is really stopped when the test goes on;
//! shared by the cluster tests of crates/cluster and crates/ringshare.

use std::thread;
use std::time::{Duration, Instant};

/// Stop process `pid` (SIGSTOP) and return once every thread of it is stopped. A stop takes
/// effect when each thread next runs: on a busy machine a thread of it could still answer a
/// request sent just after the signal (a CI run saw a "stopped" node hand an open over, session
/// 54). Panics when it has not stopped within 10 s.
pub fn stop_process(pid: u32) {
    let p = rustix::process::Pid::from_raw(pid as i32).expect("a pid");
    rustix::process::kill_process(p, rustix::process::Signal::STOP).expect("SIGSTOP");
    let t = Instant::now();
    while !all_threads_stopped(pid) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "process {pid} not stopped 10 s after SIGSTOP"
        );
        thread::sleep(Duration::from_millis(2));
    }
}

/// Let process `pid` go on (SIGCONT) after [`stop_process`].
pub fn continue_process(pid: u32) {
    let p = rustix::process::Pid::from_raw(pid as i32).expect("a pid");
    rustix::process::kill_process(p, rustix::process::Signal::CONT).expect("SIGCONT");
}

/// Every thread of `pid` is in state T (stopped) or t (traced), per /proc/PID/task/*/stat.
fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|t| {
        std::fs::read_to_string(t.path().join("stat"))
            .ok()
            .and_then(|s| {
                let state = s.rsplit(')').next()?.trim_start().chars().next()?;
                Some(state == 'T' || state == 't')
            })
            .unwrap_or(false)
    })
}
