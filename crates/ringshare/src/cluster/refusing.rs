//! The nodes whose calls this I/O thread fails at once now, unsent, because as many calls wait
//! for them as may (the worker's queue of calls to each node: crate::driver's `home_calls`,
//! `QUEUED_MAX`), and how many opens were refused before they opened anything because of it
//! ([`ClusterLink::refuses_now`](ringshare_core::cluster::ClusterLink::refuses_now)). Kept per
//! thread: each worker has its own queues and asks only for its own connections. The worker
//! marks its crowded nodes after each batch of its calls' work and takes the counts for its
//! log every loop turn.

use std::cell::RefCell;

thread_local! {
    /// (node, opens refused since the worker last took the count).
    static REFUSING: RefCell<Vec<(u16, u64)>> = const { RefCell::new(Vec::new()) };
}

/// Whether calls to `node` from this thread fail at once now; when they do, the refusal is
/// counted.
pub(crate) fn refuses(node: u16) -> bool {
    REFUSING.with(|r| {
        let mut r = r.borrow_mut();
        match r.iter_mut().find(|(n, _)| *n == node) {
            Some((_, count)) => {
                *count += 1;
                true
            }
            None => false,
        }
    })
}

/// The nodes whose calls from this thread fail at once now (no refusal counted).
pub(crate) fn nodes() -> Vec<u16> {
    REFUSING.with(|r| r.borrow().iter().map(|(n, _)| *n).collect())
}

/// Calls to `node` from this thread fail at once (`crowded`) or not, from now on. Unmarking
/// gives back the refusals not yet taken.
pub(crate) fn mark(node: u16, crowded: bool) -> u64 {
    REFUSING.with(|r| {
        let mut r = r.borrow_mut();
        let at = r.iter().position(|(n, _)| *n == node);
        match (at, crowded) {
            (None, true) => {
                r.push((node, 0));
                0
            }
            (Some(i), false) => r.swap_remove(i).1,
            _ => 0,
        }
    })
}

/// The refusals counted since the last take, per node (those with none left out).
pub(crate) fn take_counts(out: &mut Vec<(u16, u64)>) {
    REFUSING.with(|r| {
        for (node, count) in r.borrow_mut().iter_mut() {
            if *count > 0 {
                out.push((*node, std::mem::take(count)));
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_marked_node_is_refused_and_its_refusals_are_counted_once() {
        assert!(!refuses(2), "nothing marked");
        assert_eq!(mark(2, true), 0);
        assert!(refuses(2) && refuses(2) && !refuses(3));
        let mut got = Vec::new();
        take_counts(&mut got);
        assert_eq!(got, [(2, 2)]);
        got.clear();
        take_counts(&mut got);
        assert!(got.is_empty(), "taken once");
        assert!(refuses(2));
        assert_eq!(
            mark(2, false),
            1,
            "the count not taken comes back on unmarking"
        );
        assert!(!refuses(2));
        let other = std::thread::spawn(|| {
            mark(5, true);
            refuses(5)
        });
        assert!(other.join().unwrap() && !refuses(5), "each thread its own");
    }
}
