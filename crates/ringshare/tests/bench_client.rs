//! ringshare's own client (`ringshare bench`) against the real server binary over
//! loopback: data verified byte for byte, signed and encrypted sessions in every
//! SMB 3 dialect, credits under pipelining, and server errors reported by name.

use crate::common;

use common::{bench, bench_as, Server, ServerConfig, PASSWORD, SHARE, USER};

fn errors_field(json: &str) -> Option<u64> {
    json_u64(json, "errors")
}

/// `bench` with `args` on `server`, which must succeed with no request in error: its JSON
/// (`what` says which run, in a failure's message).
fn bench_clean(server: &Server, args: &[&str], what: &str) -> String {
    let (ok, out) = bench(server, args);
    assert!(ok, "{what}: {out}");
    assert_eq!(errors_field(&out), Some(0), "{what}: {out}");
    out
}

/// The number of field `name` in the JSON `json`.
fn json_u64(json: &str, name: &str) -> Option<u64> {
    let i = json.find(&format!("\"{name}\""))?;
    json[i..].split([':', ',', '}']).nth(1)?.trim().parse().ok()
}

#[test]
fn written_data_reads_back_identical_with_deep_pipelining() {
    let server = Server::start(&ServerConfig::default(), |_| {});
    bench_clean(
        &server,
        &[
            "seq-write",
            "--io-size",
            "256k",
            "--queue-depth",
            "32",
            "--file-size",
            "16m",
            "--bytes",
            "32m",
            "--verify",
            "--json",
        ],
        "",
    );
    bench_clean(
        &server,
        &[
            "seq-read",
            "--io-size",
            "1m",
            "--file-size",
            "16m",
            "--bytes",
            "32m",
            "--verify",
            "--json",
        ],
        "",
    );
}

#[test]
fn an_io_size_above_the_servers_maximum_is_cut_to_it_and_reported_as_used() {
    let server = Server::start(&ServerConfig::default(), |_| {});
    // SMB 2.0.2 allows 64 KiB READs at most.
    let args = [
        "seq-read",
        "--dialect",
        "2.0.2",
        "--io-size",
        "1m",
        "--file-size",
        "4m",
        "--bytes",
        "4m",
    ];
    let out = bench_clean(&server, &[&args[..], &["--verify", "--json"]].concat(), "");
    assert!(out.contains("\"io_size\":65536,"), "{out}");
    let (ok, out) = bench(&server, &args);
    assert!(ok, "{out}");
    assert!(
        out.contains("io 65536 B (asked 1048576 B: the server allows no more)"),
        "{out}"
    );
}

#[test]
fn smb2_max_read_and_write_from_the_configuration_are_advertised() {
    let server = Server::start(
        &ServerConfig {
            extra_global: "smb2 max read = 128k\nsmb2 max write = 256K\n",
            ..ServerConfig::default()
        },
        |_| {},
    );
    // The bench uses the smaller of the two for its READs and WRITEs.
    let args = [
        "--io-size",
        "1m",
        "--file-size",
        "2m",
        "--bytes",
        "2m",
        "--verify",
    ];
    for workload in ["seq-write", "seq-read"] {
        let out = bench_clean(
            &server,
            &[&[workload][..], &args, &["--json"]].concat(),
            workload,
        );
        assert!(out.contains("\"io_size\":131072,"), "{workload}: {out}");
    }
}

#[test]
fn signed_and_encrypted_sessions_move_verified_data_in_every_smb3_dialect() {
    let server = Server::start(&ServerConfig::default(), |_| {});
    for dialect in ["3.0", "3.0.2", "3.1.1"] {
        for protection in ["--sign", "--encrypt"] {
            bench_clean(
                &server,
                &[
                    "rand-write",
                    "--dialect",
                    dialect,
                    protection,
                    "--io-size",
                    "64k",
                    "--file-size",
                    "4m",
                    "--bytes",
                    "8m",
                    "--verify",
                    "--json",
                ],
                &format!("{dialect} {protection}"),
            );
        }
    }
}

#[test]
fn many_connections_and_metadata_storms_see_no_errors() {
    let server = Server::start(&ServerConfig::default(), |_| {});
    bench_clean(
        &server,
        &[
            "metadata",
            "--connections",
            "4",
            "--threads",
            "2",
            "--duration",
            "1s",
            "--json",
        ],
        "",
    );
    let (ok, out) = bench(
        &server,
        &["echo", "--queue-depth", "64", "--duration", "1s", "--json"],
    );
    assert!(ok, "{out}");
}

#[test]
fn a_list_of_files_gives_each_metadata_connection_its_own() {
    let server = Server::start(&ServerConfig::default(), |_| {});
    bench_clean(
        &server,
        &[
            "metadata",
            "--file",
            "one,two,three",
            "--connections",
            "3",
            "--duration",
            "300ms",
            "--json",
        ],
        "",
    );
    let mut names: Vec<String> = std::fs::read_dir(&server.share_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["one", "three", "two"],
        "one file per connection, by the list"
    );
}

#[test]
fn clients_caching_a_listing_under_a_directory_lease_list_again_once_per_change() {
    let server = Server::start(&ServerConfig::default(), |dir| {
        std::fs::create_dir(dir.join("many")).unwrap();
        for i in 0..300 {
            std::fs::write(dir.join(format!("many/f{i}")), b"").unwrap();
        }
    });
    // Two clients hold RH leases on `many` and list it only after a break; a third
    // connection adds a file to it 5 times a second.
    let args = [
        "list",
        "--dir",
        "many",
        "--duration",
        "2s",
        "--json",
        "--dir-lease",
        "--dir-changes",
        "5",
        "--connections",
        "2",
    ];
    let (ok, out, status) = std::thread::scope(|s| {
        let run = s.spawn(|| bench(&server, &args));
        // Meanwhile the server shows the directory's opens and their leases.
        std::thread::sleep(std::time::Duration::from_millis(1000));
        let socket = server.control_socket();
        let o = std::process::Command::new(common::ringshare_bin())
            .args(["status", "--json", "--socket", socket.to_str().unwrap()])
            .output()
            .expect("ringshare status");
        let (ok, out) = run.join().unwrap();
        (ok, out, String::from_utf8_lossy(&o.stdout).into_owned())
    });
    assert!(ok, "{out}");
    let st: serde_json::Value = serde_json::from_str(&status).expect("status --json");
    let open = st["opens"]
        .as_array()
        .and_then(|a| a.iter().find(|o| o["path"] == "many"))
        .unwrap_or_else(|| panic!("the listed directory is open: {st:#}"));
    assert_eq!(open["oplock"], "lease", "{open:#}");
    assert_eq!(open["lease"]["state"], "RH", "{open:#}");
    assert_eq!(errors_field(&out), Some(0), "{out}");
    let changes = json_u64(&out, "dir_changes").expect("dir_changes");
    let breaks = json_u64(&out, "dir_breaks").expect("dir_breaks");
    let listings = json_u64(&out, "listings").expect("listings");
    assert!(changes >= 5, "the changer ran: {out}");
    // Each change breaks each client's lease once (a change made while a client lists
    // again, before its new lease, breaks nothing of its).
    assert!(breaks >= changes && breaks <= 2 * changes, "{out}");
    // Each client lists once at the start and once per break: no listing is asked while
    // its lease holds.
    assert!(listings >= changes && listings <= 2 + breaks, "{out}");
    // The changer removed its files afterwards.
    let left: Vec<_> = std::fs::read_dir(server.share_dir.join("many"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("rschange-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_server_error_is_reported_by_name_with_the_request_and_fails_the_run() {
    let server = Server::start(&ServerConfig::default(), |_| {});
    let credentials = format!("{USER}%{PASSWORD}");
    let (ok, text) = bench_as(
        &server,
        "no-such-share",
        &credentials,
        &["echo", "--duration", "1s"],
    );
    assert!(!ok, "{text}");
    assert!(
        text.contains("BAD_NETWORK_NAME") && text.to_uppercase().contains("TREE_CONNECT"),
        "{text}"
    );
    let wrong = format!("{USER}%wrong-password");
    let (ok, text) = bench_as(&server, SHARE, &wrong, &["echo", "--duration", "1s"]);
    assert!(!ok, "{text}");
    assert!(text.contains("LOGON_FAILURE"), "{text}");
}

/// io_uring worker threads (`iou-wrk-*`) of the server process. A worker
/// lingers for seconds after its last job, so a count taken right after a
/// run sees every worker the run needed.
fn io_uring_workers(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                .filter(|name| name.starts_with("iou-wrk"))
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn small_reads_and_writes_on_tmpfs_are_done_in_place_and_verified() {
    let shm = std::path::Path::new("/dev/shm");
    if !shm.is_dir() {
        eprintln!("SKIPPED: no /dev/shm");
        return;
    }
    let server = Server::start(
        &ServerConfig {
            base_dir: Some("/dev/shm"),
            ..ServerConfig::default()
        },
        |_| {},
    );
    let pid = server.pid().expect("server pid");
    // WRITEs of 16 KiB and 128 KiB, then READs of 16 KiB (below the READ
    // splice threshold) and signed READs of 128 KiB (signed: read into memory).
    let runs: [&[&str]; 4] = [
        &["seq-write", "--io-size", "16k"],
        &["seq-write", "--io-size", "128k"],
        &["seq-read", "--io-size", "16k"],
        &["seq-read", "--io-size", "128k", "--sign"],
    ];
    for run in runs {
        let mut args = run.to_vec();
        args.extend([
            "--file-size",
            "8m",
            "--bytes",
            "16m",
            "--queue-depth",
            "16",
            "--verify",
            "--json",
        ]);
        bench_clean(&server, &args, &format!("{run:?}"));
    }
    // Done in the ring's own thread: io_uring never needed a worker (it
    // would have for every READ and WRITE of a tmpfs file).
    assert_eq!(io_uring_workers(pid), 0, "{}", server.log());
}

#[test]
fn large_writes_from_memory_on_tmpfs_are_done_in_place_within_the_file_and_by_a_worker_past_it() {
    let shm = std::path::Path::new("/dev/shm");
    if !shm.is_dir() {
        eprintln!("SKIPPED: no /dev/shm");
        return;
    }
    // `use sendfile = no`: WRITE payloads are received into pooled buffers
    // (not spliced), and written from there.
    let server = Server::start(
        &ServerConfig {
            base_dir: Some("/dev/shm"),
            extra_global: "\tuse sendfile = no\n",
            ..ServerConfig::default()
        },
        |_| {},
    );
    let pid = server.pid().expect("server pid");
    // A 16 MiB file made with 128 KiB WRITEs (small: in place), then written
    // over with 1 MiB and 4 MiB WRITEs, all within its size.
    for (io_size, depth, bytes) in [
        ("128k", "16", "16m"),
        ("1m", "16", "32m"),
        ("4m", "4", "32m"),
    ] {
        let args = [
            "seq-write",
            "--file",
            "over.bin",
            "--file-size",
            "16m",
            "--io-size",
            io_size,
            "--queue-depth",
            depth,
            "--bytes",
            bytes,
            "--json",
        ];
        bench_clean(&server, &args, io_size);
    }
    // No io_uring worker was needed (one would have copied every WRITE).
    assert_eq!(io_uring_workers(pid), 0, "{}", server.log());
    // 1 MiB WRITEs that extend a new file go to a worker.
    bench_clean(
        &server,
        &[
            "seq-write",
            "--file",
            "new.bin",
            "--io-size",
            "1m",
            "--file-size",
            "8m",
            "--bytes",
            "8m",
            "--json",
        ],
        "",
    );
    assert!(io_uring_workers(pid) > 0, "{}", server.log());
    // What 1 MiB WRITEs within the file wrote reads back as written
    // (`--verify` fills the file first).
    bench_clean(
        &server,
        &[
            "seq-read",
            "--file",
            "new.bin",
            "--io-size",
            "1m",
            "--file-size",
            "8m",
            "--bytes",
            "16m",
            "--verify",
            "--json",
        ],
        "",
    );
}

#[test]
fn multishot_receive_moves_verified_data_in_small_and_large_frames() {
    let mut server = Server::start(
        &ServerConfig {
            extra_global: "\tmultishot receive = yes\n",
            ..ServerConfig::default()
        },
        |_| {},
    );
    // Large WRITE frames after small ones (the multishot receive is ended
    // for each stream of them), small READs at depth, signed 64 KiB WRITEs
    // and READs, and 4 KiB READs from 8 connections.
    let runs: [&[&str]; 5] = [
        &["seq-write", "--io-size", "1m", "--queue-depth", "8"],
        &["seq-write", "--io-size", "256k", "--queue-depth", "32"],
        &["rand-read", "--io-size", "4k", "--queue-depth", "32"],
        &["seq-write", "--io-size", "64k", "--sign"],
        &["rand-read", "--io-size", "4k", "--connections", "8"],
    ];
    for run in runs {
        let mut args = run.to_vec();
        args.extend(["--file-size", "8m", "--bytes", "24m", "--verify", "--json"]);
        bench_clean(&server, &args, &format!("{run:?}"));
    }
    server.stop();
    let log = server.log();
    assert!(log.contains("multishot receives: "), "{log}");
}

/// Signed and encrypted 1 MiB READs (replies built in memory), verified.
fn signed_and_encrypted_reads(server: &Server) {
    for protection in ["--sign", "--encrypt"] {
        let args = [
            "seq-read",
            protection,
            "--io-size",
            "1m",
            "--file-size",
            "16m",
            "--bytes",
            "48m",
            "--verify",
            "--json",
        ];
        bench_clean(server, &args, protection);
    }
}

#[test]
fn zerocopy_sends_deliver_verified_data_and_auto_skips_them_on_loopback() {
    let mut forced = Server::start(
        &ServerConfig {
            extra_global: "\tzerocopy send = yes\n",
            ..ServerConfig::default()
        },
        |_| {},
    );
    signed_and_encrypted_reads(&forced);
    forced.stop();
    let log = forced.log();
    assert!(log.contains("zero-copy sends: "), "{log}");
    // Loopback: the kernel reports that it copied every one.
    assert!(!log.contains("copied by the kernel: 0"), "{log}");

    let mut auto = Server::start(&ServerConfig::default(), |_| {});
    signed_and_encrypted_reads(&auto);
    auto.stop();
    let log = auto.log();
    assert!(!log.contains("zero-copy sends: "), "{log}");
}

/// The figure after `label` in the reconnect report (e.g. "drops ").
fn count_after(out: &str, label: &str) -> Option<u64> {
    let i = out.find(label)? + label.len();
    out[i..].split([' ', ',', '\n']).next()?.parse().ok()
}

#[test]
fn the_reconnect_workload_drops_connections_takes_its_durable_opens_back_and_loses_nothing() {
    let server = Server::start(&ServerConfig::default(), |_| {});
    let pid = server.pid().expect("server pid").to_string();
    let (ok, out) = bench(
        &server,
        &[
            "reconnect",
            "--connections",
            "2",
            "--io-size",
            "64k",
            "--file-size",
            "4m",
            "--queue-depth",
            "8",
            "--duration",
            "3s",
            "--drop-every",
            "100ms",
            "--server-pid",
            &pid,
        ],
    );
    assert!(ok, "{out}\n--- server log ---\n{}", server.log());
    assert!(out.contains("result: clean"), "{out}");
    let drops = count_after(&out, "drops ").expect("drops figure");
    assert!(drops >= 10, "only {drops} drops in 3 s at ~100 ms: {out}");
    assert_eq!(count_after(&out, "reconnects "), Some(drops), "{out}");
    assert_eq!(count_after(&out, "mismatched reads "), Some(0), "{out}");
    assert_eq!(
        count_after(&out, "lost acknowledged writes "),
        Some(0),
        "{out}"
    );
    assert!(out.contains("server RSS"), "{out}");
    eprintln!("{out}");
}
