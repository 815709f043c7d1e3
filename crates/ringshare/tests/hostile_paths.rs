//! Hostile path names against the real binary: whatever a client puts in a CREATE name or a
//! QUERY_DIRECTORY pattern, nothing outside the share is ever read, listed or written, including
//! while a directory is swapped for a symlink to the outside between lookup and open.

use crate::common;
use crate::rig;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use ringshare_wire::consts::Command;
use ringshare_wire::NtStatus;

use common::TempDir;
use rig::*;

/// Bytes only the file outside the share holds.
const MARKER: &[u8] = b"OUTSIDE-THE-SHARE-5d1e";
/// A name only the directory outside the share holds.
const OUTSIDE_NAME: &str = "only-outside-7c2b.txt";

/// A temp dir with `outside/` (the secret) beside `share/` (with escape symlinks), and a rig on
/// the share.
fn rig_with_outside(tag: &str) -> (Rig, std::path::PathBuf) {
    let tmp = TempDir::new(tag);
    let outside = tmp.path().join("outside");
    let share = tmp.path().join("share");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(share.join("sub")).unwrap();
    std::fs::write(outside.join(OUTSIDE_NAME), MARKER).unwrap();
    std::fs::write(outside.join("passwd"), MARKER).unwrap();
    std::fs::write(share.join("sub").join("inside.txt"), b"inside").unwrap();
    std::os::unix::fs::symlink("../outside", share.join("rel-escape")).unwrap();
    std::os::unix::fs::symlink(&outside, share.join("abs-escape")).unwrap();
    std::os::unix::fs::symlink(outside.join(OUTSIDE_NAME), share.join("file-escape")).unwrap();
    std::os::unix::fs::symlink("/proc/self/root", share.join("magic-escape")).unwrap();
    let rig = Rig::start_on(tmp, share, "");
    (rig, outside)
}

/// Open `name` (UTF-16LE bytes) for reading; when that works, read it as a file and list it as a
/// directory, and panic if the outside's content or names come back. Returns the CREATE status.
fn probe(c: &mut Raw, what: &str, name: &[u8]) -> Option<NtStatus> {
    let body = create_body(name, GENERIC_READ | FILE_LIST_DIRECTORY, FILE_OPEN, 0);
    match c.create_raw(&body) {
        Ok(f) => {
            if let Ok(data) = c.read(f, 0, 65536) {
                assert!(
                    !data.windows(MARKER.len()).any(|w| w == MARKER),
                    "{what}: read the file outside the share"
                );
            }
            if let Ok(names) = c.list(f, "*") {
                assert!(
                    !names.iter().any(|n| n == OUTSIDE_NAME || n == "passwd"),
                    "{what}: listed the directory outside the share: {names:?}"
                );
            }
            let _ = c.close(f);
            Some(NtStatus::SUCCESS)
        }
        Err(Outcome::Reply(h, _)) => Some(h.status),
        Err(other) => {
            eprintln!("{what}: {other:?}");
            None
        }
    }
}

fn units(u: &[u16]) -> Vec<u8> {
    u.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn dot_dot_absolute_mixed_separator_stream_and_escape_symlink_names_never_reach_outside() {
    let (rig, outside) = rig_with_outside("hpath-names");
    let out = outside.display().to_string();
    let out_bs = out.replace('/', "\\");
    let names: Vec<String> = vec![
        "..".into(),
        "..\\outside\\passwd".into(),
        "sub\\..\\..\\outside\\passwd".into(),
        "sub/../../outside/passwd".into(),
        "sub\\../..\\outside/passwd".into(),
        "../outside".into(),
        ".\\..\\outside".into(),
        "sub\\..\\..".into(),
        format!("\\{out_bs}\\passwd"),
        format!("{out}/passwd"),
        format!("\\\\?\\{out_bs}\\passwd"),
        "C:\\outside\\passwd".into(),
        "\\..\\outside".into(),
        "rel-escape".into(),
        "rel-escape\\passwd".into(),
        format!("rel-escape\\{OUTSIDE_NAME}"),
        "abs-escape".into(),
        "abs-escape\\passwd".into(),
        "file-escape".into(),
        "magic-escape".into(),
        format!("magic-escape\\{out_bs}\\passwd"),
        "sub\\inside.txt:stream".into(),
        "sub\\inside.txt::$DATA".into(),
        "rel-escape:$DATA".into(),
        "sub\\*".into(),
        "sub\\?nside.txt".into(),
        "sub\\inside.txt\\..\\..\\outside".into(),
    ];
    let mut c = rig.login(USER_A);
    for name in &names {
        let st = probe(&mut c, name, &utf16(name));
        eprintln!("{name:?}: {st:?}");
        if st.is_none() {
            c = rig.login(USER_A);
        }
    }
    // Creating through the same names writes nothing outside either.
    for name in &names {
        let target = format!("{name}\\new-file");
        let body = create_body(&utf16(&target), GENERIC_WRITE, FILE_CREATE, 0);
        if let Ok(f) = c.create_raw(&body) {
            let _ = c.write(f, 0, b"written");
            let _ = c.close(f);
        }
        let body = create_body(&utf16(name), GENERIC_WRITE, FILE_OVERWRITE_IF, 0);
        if let Ok(f) = c.create_raw(&body) {
            let _ = c.write(f, 0, b"overwritten");
            let _ = c.close(f);
        }
    }
    let listed: Vec<_> = std::fs::read_dir(&outside)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        listed.len(),
        2,
        "something was created outside the share: {listed:?}"
    );
    assert_eq!(std::fs::read(outside.join("passwd")).unwrap(), MARKER);
    assert_eq!(std::fs::read(outside.join(OUTSIDE_NAME)).unwrap(), MARKER);
    rig.still_serves("after hostile names");
}

#[test]
fn reserved_overlong_invalid_utf16_and_nul_names_are_refused_or_stay_inside() {
    let (rig, outside) = rig_with_outside("hpath-odd");
    let mut c = rig.login(USER_A);
    // Reserved DOS device names: never a device; if created, a plain file inside the share.
    for name in [
        "CON", "NUL", "AUX", "PRN", "COM1", "LPT1", "con.txt", "sub\\NUL",
    ] {
        let body = create_body(&utf16(name), GENERIC_READ | GENERIC_WRITE, FILE_OPEN_IF, 0);
        match c.create_raw(&body) {
            Ok(f) => {
                c.write(f, 0, b"plain")
                    .expect("write to a reserved-name file");
                assert_eq!(c.read(f, 0, 16).expect("read back"), b"plain", "{name}");
                c.close(f).expect("close");
                let on_disk = rig.share_dir.join(name.replace('\\', "/"));
                assert!(on_disk.is_file(), "{name}: not a plain file in the share");
            }
            Err(o) => eprintln!("{name}: {:?}", o.status()),
        }
    }
    let expect_invalid = |c: &mut Raw, what: &str, name: &[u8]| {
        let st = probe(c, what, name);
        eprintln!("{what}: {st:?}");
        assert!(
            st.is_some_and(|s| !s.is_success()),
            "{what}: expected an error status, got {st:?}"
        );
    };
    // One component of 256 characters (255 is the NTFS limit).
    let long = "a".repeat(256);
    let body = create_body(&utf16(&long), GENERIC_WRITE, FILE_CREATE, 0);
    c.create_raw(&body)
        .expect_err("a 256-character component was created")
        .expect_refused("256-character component");
    // 255 is fine.
    let ok = "b".repeat(255);
    let f = c
        .create(&ok, GENERIC_WRITE, FILE_CREATE, 0)
        .expect("a 255-character component");
    c.close(f).unwrap();
    // More than 32 KiB of path: 16 000 components of one character.
    let deep = vec!["d"; 16_000].join("\\");
    expect_invalid(&mut c, "a 32 000-byte path", &utf16(&deep));
    // Lone surrogates.
    expect_invalid(
        &mut c,
        "a lone high surrogate",
        &units(&[0x61, 0xD800, 0x62]),
    );
    expect_invalid(&mut c, "a lone low surrogate", &units(&[0xDC00]));
    expect_invalid(
        &mut c,
        "a reversed surrogate pair",
        &units(&[0xDC00, 0xD800]),
    );
    // NUL inside a name.
    expect_invalid(
        &mut c,
        "a NUL inside a name",
        &units(&[0x73, 0x75, 0x62, 0, 0x2E, 0x2E]),
    );
    expect_invalid(
        &mut c,
        "a NUL between components",
        &units(&[0x73, 0x75, 0x62, 0x5C, 0, 0x5C]),
    );
    // The same names as QUERY_DIRECTORY patterns list nothing outside.
    let dir = c
        .create("sub", FILE_LIST_DIRECTORY, FILE_OPEN, FILE_DIRECTORY_FILE)
        .expect("open sub");
    for pattern in ["..", "..\\*", "../outside/*", "\\*", "*\\..\\*"] {
        if let Ok(names) = c.list(dir, pattern) {
            assert!(
                !names.iter().any(|n| n == OUTSIDE_NAME || n == "outside"),
                "pattern {pattern:?} listed {names:?}"
            );
        }
    }
    let body = query_directory_body(dir, 0x0C, true, &units(&[0xD800]), 4096);
    c.call(Command::QUERY_DIRECTORY, &body)
        .expect_refused("a lone surrogate as a pattern");
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 2);
    rig.still_serves("after odd names");
}

#[test]
fn a_directory_swapped_for_a_symlink_to_outside_while_clients_open_under_it_never_leaks() {
    let (rig, outside) = rig_with_outside("hpath-race");
    std::fs::write(outside.join("f.txt"), MARKER).unwrap();
    let share = rig.share_dir.clone();
    std::fs::create_dir(share.join("d")).unwrap();
    std::fs::write(share.join("d").join("f.txt"), b"inside the share").unwrap();
    std::os::unix::fs::symlink(&outside, share.join("swap")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let stop = stop.clone();
        let share = share.clone();
        thread::spawn(move || swap_loop(&share, &stop))
    };
    let mut c = rig.login(USER_A);
    let (mut opened, mut refused, mut listed) = (0u32, 0u32, 0u32);
    let until = Instant::now() + Duration::from_secs(4);
    while Instant::now() < until {
        match c.create("d\\f.txt", GENERIC_READ, FILE_OPEN, 0) {
            Ok(f) => {
                opened += 1;
                let data = c.read(f, 0, 4096).unwrap_or_default();
                assert!(
                    !data.windows(MARKER.len()).any(|w| w == MARKER),
                    "read outside the share through a swapped directory"
                );
                let _ = c.close(f);
            }
            Err(Outcome::Reply(..)) => refused += 1,
            Err(o) => panic!("the server went away: {o:?}"),
        }
        if let Ok(dir) = c.create("d", FILE_LIST_DIRECTORY, FILE_OPEN, FILE_DIRECTORY_FILE) {
            if let Ok(names) = c.list(dir, "*") {
                listed += 1;
                assert!(
                    !names.iter().any(|n| n == OUTSIDE_NAME),
                    "listed outside the share through a swapped directory: {names:?}"
                );
            }
            let _ = c.close(dir);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().expect("swapper");
    eprintln!("{swaps} swaps; {opened} opens of d\\f.txt, {refused} refused, {listed} listings");
    assert!(swaps > 100, "the swapper barely ran ({swaps} swaps)");
    assert!(
        opened > 0,
        "the file was never opened: the test did not exercise the race"
    );
    assert!(
        refused > 0,
        "the open never met the symlink: the test did not exercise the race"
    );
    rig.still_serves("after the symlink race");
}

/// Exchange `d` (a directory) and `swap` (a symlink to the outside) atomically, over and over.
fn swap_loop(share: &Path, stop: &AtomicBool) -> u64 {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    let (a, b) = (share.join("d"), share.join("swap"));
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        renameat_with(CWD, &a, CWD, &b, RenameFlags::EXCHANGE).expect("RENAME_EXCHANGE");
        n += 1;
        if n % 64 == 0 {
            thread::yield_now();
        }
    }
    if std::fs::symlink_metadata(&a)
        .map(|m| m.is_symlink())
        .unwrap_or(false)
    {
        let _ = renameat_with(CWD, &a, CWD, &b, RenameFlags::EXCHANGE);
    }
    n
}
