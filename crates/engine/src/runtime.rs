//! Thread-per-core start-up: one named thread per ring, optionally pinned.

use std::io;
use std::thread;

use rustix::thread::{sched_getaffinity, sched_setaffinity};

/// Cores this process may run on (affinity mask and cgroup quota respected), at least 1.
pub fn available_cores() -> usize {
    thread::available_parallelism().map_or(1, |n| n.get())
}

/// Runs `f(0)`, `f(1)`, … `f(threads - 1)`, each on its own thread named
/// `ringshare-ring-N`, waits for all of them and returns the first error in
/// thread order (a panic becomes an error too).
///
/// With `pin_cpus`, thread N is pinned to the N-th CPU of the process's
/// affinity mask (wrapping around when there are more threads than CPUs).
/// A thread that cannot be pinned reports the error instead of running `f`.
pub fn run_per_core<F>(threads: usize, pin_cpus: bool, f: F) -> io::Result<()>
where
    F: Fn(usize) -> io::Result<()> + Send + Sync,
{
    if threads == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "run_per_core needs at least one thread",
        ));
    }
    let cpus: Vec<usize> = if pin_cpus {
        crate::keep::allowed(&sched_getaffinity(None)?)
    } else {
        Vec::new()
    };
    let f = &f;
    let cpus = &cpus;
    thread::scope(|scope| {
        let mut handles = Vec::with_capacity(threads);
        for index in 0..threads {
            let handle = thread::Builder::new()
                .name(format!("ringshare-ring-{index}"))
                .spawn_scoped(scope, move || {
                    if !cpus.is_empty() {
                        let home = crate::keep::home_cpu(cpus, index);
                        sched_setaffinity(None, &crate::keep::set_of(&[home]))?;
                    }
                    f(index)
                });
            match handle {
                Ok(handle) => handles.push(handle),
                // Threads already started are joined when the scope ends.
                Err(e) => return Err(e),
            }
        }
        let mut first_error = None;
        for (index, handle) in handles.into_iter().enumerate() {
            let result = handle.join().unwrap_or_else(|_| {
                Err(io::Error::other(format!("ringshare-ring-{index} panicked")))
            });
            if let Err(e) = result {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn runs_one_closure_per_thread_with_its_name() {
        let seen = Mutex::new(Vec::new());
        run_per_core(3, true, |index| {
            let name = thread::current().name().unwrap().to_owned();
            seen.lock().unwrap().push((index, name));
            Ok(())
        })
        .unwrap();
        let mut seen = seen.into_inner().unwrap();
        seen.sort();
        assert_eq!(
            seen,
            (0..3)
                .map(|i| (i, format!("ringshare-ring-{i}")))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn pinned_threads_run_on_exactly_one_cpu() {
        run_per_core(2, true, |_| {
            let set = sched_getaffinity(None)?;
            assert_eq!(set.count(), 1);
            Ok(())
        })
        .unwrap();
    }

    #[test]
    fn zero_threads_is_refused() {
        assert!(run_per_core(0, false, |_| Ok(())).is_err());
    }

    #[test]
    fn returns_the_first_error_in_thread_order() {
        let err = run_per_core(4, false, |index| match index {
            1 => Err(io::Error::other("one")),
            3 => Err(io::Error::other("three")),
            _ => Ok(()),
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "one");
    }

    #[test]
    fn a_panicking_thread_becomes_an_error() {
        let err = run_per_core(2, false, |index| {
            assert_ne!(index, 1, "boom");
            Ok(())
        })
        .unwrap_err();
        assert!(err.to_string().contains("ringshare-ring-1 panicked"));
    }

    #[test]
    fn available_cores_is_at_least_one() {
        assert!(available_cores() >= 1);
    }
}
