//! Directory leases across real nodes (issue 31: "broken by any change inside the directory …
//! made through another node of a cluster"): a client of node 1 holds an RH lease on a
//! directory homed on each node in turn; a client of node 2 creates a file in it, sets its
//! attributes and removes it, and node 1's client is told each time (the lease broken to
//! none), while node 2's own directory lease, named as the changes' parent lease, is not
//! broken. Run inside `three_nodes_decide_share_modes_leases_locks_delete_and_rename_together`
//! (its cluster, with `smb3 directory leases` at its default: on).

use super::*;

/// A directory (made now) whose home is each node: `[on 1, on 2, on 3]`.
fn dirs_homed_on_each(cl: &Cluster, tag: &str) -> Vec<String> {
    let mut found: Vec<Option<String>> = vec![None; usize::from(NODES)];
    for i in 0..200 {
        let name = format!("{tag}-{i}");
        std::fs::create_dir(cl.share.join(&name)).unwrap();
        let h = usize::from(cl.home_of(&name)) - 1;
        if found[h].is_none() {
            found[h] = Some(name);
        }
        if found.iter().all(Option::is_some) {
            break;
        }
    }
    if let Ok(Some(a)) = nix::unistd::User::from_name(USER_A.0) {
        chown_tree(&cl.share, a.uid.as_raw());
    }
    found
        .into_iter()
        .map(|f| f.expect("a directory homed on every node"))
        .collect()
}

/// A CREATE body opening directory `name` (or, with `dir` false, making or opening file
/// `name`) with `lease`.
fn create_with(name: &str, dir: bool, lease: Lease) -> Vec<u8> {
    let req = CreateRequest {
        security_flags: 0,
        requested_oplock_level: OplockLevel(0xFF),
        impersonation_level: ImpersonationLevel::IMPERSONATION,
        smb_create_flags: 0,
        desired_access: AccessMask(if dir { READ } else { ALL }),
        file_attributes: FileAttributes(0),
        share_access: ShareAccess(7),
        create_disposition: CreateDisposition::OPEN_IF,
        create_options: CreateOptions(if dir { FILE_DIRECTORY_FILE } else { 0 }),
        name: name.to_string(),
        contexts: vec![CreateContext::new(tag::REQUEST_LEASE, lease.encode())],
    };
    let mut m = vec![0u8; HEADER_LEN];
    req.encode(&mut m);
    m.split_off(HEADER_LEN)
}

/// A lease of `key` asking `state`, under the directory lease `parent`.
fn lease_under(key: u8, state: u32, parent: u8) -> Lease {
    let mut l = lease(key, state);
    if let Some(v2) = l.v2.as_mut() {
        v2.parent_key = [parent; 16];
    }
    l.flags = LeaseFlags::PARENT_LEASE_KEY_SET;
    l
}

/// `c`'s RH lease of directory `d` (key `key`); its open.
fn lease_dir(c: &mut Raw, d: &str, key: u8) -> FileId {
    let (f, state) = opened(c.call(Command::CREATE, &create_with(d, true, lease(key, R | H))))
        .unwrap_or_else(|s| panic!("{d}: directory lease: {s:?}"));
    assert_eq!(state, R | H, "{d}: an RH directory lease");
    f
}

/// The break `c` gets for its directory lease `key`: RH to none; acknowledged.
fn broken_to_none(c: &mut Raw, key: u8, what: &str) {
    let OplockBreak::LeaseBreakNotification(n) = next_break(c) else {
        panic!("{what}: a lease break");
    };
    assert_eq!(
        (n.lease_key, n.current_lease_state.0, n.new_lease_state.0),
        ([key; 16], R | H, 0),
        "{what}"
    );
    assert_eq!(ack_lease(c, key, 0), NtStatus::SUCCESS, "{what}");
}

/// A change node 2's client makes inside the directory.
type Step<'a> = dyn Fn(&mut Raw) + 'a;

/// Nothing arrives on `c` for 200 ms (a break would have come sooner: the breaks above took
/// under 1 ms).
fn nothing_arrives(c: &mut Raw) -> bool {
    let old = c.sock.read_timeout().ok().flatten();
    c.sock
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let got = read_frame(&mut c.sock);
    c.sock.set_read_timeout(old).unwrap();
    matches!(got, Ok(None))
}

pub(super) fn directory_leases_break_across_nodes(cl: &Cluster, a: &mut Raw, b: &mut Raw) {
    for (i, d) in dirs_homed_on_each(cl, "leased").iter().enumerate() {
        let home = i + 1;
        let (ka, kb) = (40 + 2 * i as u8, 41 + 2 * i as u8);
        let da = lease_dir(a, d, ka);
        let db = lease_dir(b, d, kb);
        let inside = format!("{d}\\made-on-node-2.txt");
        let steps: [(&str, &Step<'_>); 3] = [
            ("a create", &|b: &mut Raw| {
                let m = create_with(&inside, false, lease_under(60, R, kb));
                let (f, _) = opened(b.call(Command::CREATE, &m)).expect("create inside");
                b.close(f).unwrap();
            }),
            ("attributes set", &|b: &mut Raw| {
                let m = create_with(&inside, false, lease_under(60, R, kb));
                let (f, _) = opened(b.call(Command::CREATE, &m)).expect("open inside");
                let mut info = vec![0u8; 32];
                info.extend_from_slice(&2u32.to_le_bytes());
                info.extend_from_slice(&[0; 4]);
                let body = set_info_body(f, 4, &info);
                assert_eq!(status(b.call(Command::SET_INFO, &body)), NtStatus::SUCCESS);
                b.close(f).unwrap();
            }),
            ("a removal", &|b: &mut Raw| {
                let m = create_with(&inside, false, lease_under(60, R, kb));
                let (f, _) = opened(b.call(Command::CREATE, &m)).expect("open inside");
                let body = set_info_body(f, 13, &[1]);
                assert_eq!(status(b.call(Command::SET_INFO, &body)), NtStatus::SUCCESS);
                b.close(f).unwrap();
            }),
        ];
        for (what, step) in steps {
            let what = format!("{what} through node 2 in {d} (home {home})");
            let t = Instant::now();
            step(b);
            broken_to_none(a, ka, &what);
            eprintln!("{what}: node 1's client told in {:?}", t.elapsed());
            assert!(
                nothing_arrives(b),
                "{what}: the changer's own directory lease, named as the parent, is not broken"
            );
            // The leases come back on another open of the directory.
            let f = lease_dir(a, d, ka);
            a.close(f).unwrap();
            let f = lease_dir(b, d, kb);
            b.close(f).unwrap();
        }
        a.close(da).unwrap();
        b.close(db).unwrap();
    }
}
