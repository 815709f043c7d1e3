//! Unit tests of ring.rs's helpers (a send's progress, which accept errors re-arm).
use super::*;

#[test]
fn advance_resubmits_until_the_end_then_reports_the_total() {
    let (mut pos, mut done) = (10, 0);
    assert!(advance(30, &mut pos, &mut done, 100).is_none());
    assert_eq!((pos, done), (40, 30));
    assert_eq!(advance(60, &mut pos, &mut done, 100).unwrap().unwrap(), 90);
}

#[test]
fn advance_turns_zero_progress_into_write_zero() {
    let (mut pos, mut done) = (0, 0);
    let err = advance(0, &mut pos, &mut done, 5).unwrap().unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::WriteZero);
}

#[test]
fn advance_reports_the_kernel_error() {
    let (mut pos, mut done) = (0, 0);
    let err = advance(-libc::EPIPE, &mut pos, &mut done, 5)
        .unwrap()
        .unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EPIPE));
}

#[test]
fn network_errors_rearm_accept_but_fd_exhaustion_does_not() {
    assert!(accept_error_is_transient(libc::ECONNABORTED));
    assert!(!accept_error_is_transient(libc::EMFILE));
    assert!(!accept_error_is_transient(libc::ECANCELED));
}
