//! What the engine's integration tests share.

use std::time::{Duration, Instant};

use ringshare_engine::{Completion, Ring};

/// How long a test waits for one completion before failing.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Drives the ring until a completion for `token` arrives; any other
/// completion is a test failure.
pub fn wait_for(ring: &mut Ring, token: u64) -> Completion {
    let deadline = Instant::now() + TEST_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "no completion for token {token}");
        ring.submit_and_wait(1, Some(left)).unwrap();
        if let Some(c) = ring.next_completion() {
            assert_eq!(c.user_data, token, "unexpected completion {c:?}");
            return c;
        }
    }
}
