//! The smb.conf-style configuration file, through the public API.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use ringshare::config::{self, Config, Dialect, MapToGuest, SigningPolicy};

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "ringshare-cli-config-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }

    fn mkdir(&self, name: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::create_dir_all(&p).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn parse(dir: &TempDir, text: &str) -> Result<Config, config::ConfigError> {
    config::parse_str(text, &dir.path().join("smb.conf"))
}

fn error_of(dir: &TempDir, text: &str) -> (usize, String) {
    let e = parse(dir, text).expect_err("configuration should be refused");
    (e.line, e.message)
}

#[test]
fn parses_a_realistic_samba_file_to_the_right_values() {
    let dir = TempDir::new();
    let data = dir.mkdir("data");
    let public = dir.mkdir("public");
    let text = format!(
        "# ringshare configuration\n\
         ; converted from an old Samba box\n\
         [global]\n\
         \tworkgroup = office\n\
         \tnetbios name = fileserver\n\
         \tserver string = Office files\n\
         \tserver role = standalone server\n\
         \tsecurity = user\n\
         \tpassdb backend = tdbsam\n\
         \tlog file = /var/log/samba/log.%m\n\
         \tlog level = 2 auth:5\n\
         \tload printers = no\n\
         \tdisable netbios = yes\n\
         \tserver min protocol = SMB2_10\n\
         \tserver max protocol = SMB3\n\
         \tserver signing = mandatory\n\
         \tinterfaces = lo, eth0 192.168.1.0/24\n\
         \tbind interfaces only = yes\n\
         \tmax connections = 50\n\
         \tsmb passwd file = users/smbpasswd\n\
         \tlisten = 127.0.0.1:4450, [::1]:4450\n\
         \tmap to guest = Bad User\n\
         \tguest account = guest\n\
         \n\
         [data]\n\
         \tpath = {}\n\
         \tcomment = Team data\n\
         \twriteable = yes\n\
         \tvalid users = alice, bob\n\
         \tcreate mask = 0664\n\
         \tvfs objects = acl_xattr\n\
         \n\
         [Public]\n\
         \tpath = public\n\
         \tpublic = yes\n\
         \tbrowsable = no\n",
        data.display()
    );
    let cfg = parse(&dir, &text).unwrap();
    let g = &cfg.global;
    assert_eq!(g.workgroup, "OFFICE");
    assert_eq!(g.netbios_name, "FILESERVER");
    assert_eq!(g.server_string, "Office files");
    assert_eq!(g.log_level, 2);
    assert_eq!(g.server_min_protocol, Dialect::Smb2_10);
    assert_eq!(g.server_max_protocol, Dialect::Smb3_11);
    assert_eq!(g.server_signing, SigningPolicy::Mandatory);
    assert_eq!(g.interfaces, ["lo", "eth0", "192.168.1.0/24"]);
    assert!(g.bind_interfaces_only);
    assert_eq!(g.max_connections, 50);
    assert_eq!(g.smb_passwd_file, dir.path().join("users/smbpasswd"));
    assert_eq!(
        g.listen,
        [
            "127.0.0.1:4450".parse::<SocketAddr>().unwrap(),
            "[::1]:4450".parse::<SocketAddr>().unwrap()
        ]
    );
    assert_eq!(g.map_to_guest, MapToGuest::BadUser);
    assert_eq!(g.guest_account, "guest");

    assert_eq!(cfg.shares.len(), 2);
    let d = &cfg.shares[0];
    assert_eq!(d.name, "data");
    assert_eq!(d.path, data);
    assert_eq!(d.comment, "Team data");
    assert!(!d.read_only);
    assert!(!d.guest_ok);
    assert!(d.browseable);
    assert_eq!(d.rules.valid_users, ["alice", "bob"]);
    let p = &cfg.shares[1];
    assert_eq!(p.name, "Public");
    assert_eq!(
        p.path, public,
        "relative paths are taken from the file's directory"
    );
    assert!(p.read_only, "read only defaults to yes");
    assert!(p.guest_ok);
    assert!(!p.browseable);
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    assert_eq!(
        cfg.source.as_deref(),
        Some(dir.path().join("smb.conf").as_path())
    );
    assert_eq!(cfg.share("PUBLIC").map(|s| s.name.as_str()), Some("Public"));
}

#[test]
fn defaults_apply_when_the_file_says_nothing() {
    let dir = TempDir::new();
    dir.mkdir("d");
    let cfg = parse(&dir, "[d]\npath = d\n").unwrap();
    let g = &cfg.global;
    assert_eq!(g.server_min_protocol, Dialect::Smb2_02);
    assert_eq!(g.server_max_protocol, Dialect::Smb3_11);
    assert_eq!(g.server_signing, SigningPolicy::Default);
    assert_eq!(g.listen, ["0.0.0.0:445".parse::<SocketAddr>().unwrap()]);
    assert_eq!(g.max_connections, 0);
    assert_eq!(g.map_to_guest, MapToGuest::Never);
    assert_eq!(g.workgroup, "WORKGROUP");
    assert!(!g.netbios_name.is_empty() && g.netbios_name.len() <= 15);
    assert!(cfg.shares[0].read_only);
    assert!(cfg.shares[0].browseable);
}

#[test]
fn share_options_in_global_are_defaults_for_every_share() {
    let dir = TempDir::new();
    dir.mkdir("a");
    dir.mkdir("b");
    let cfg = parse(
        &dir,
        "[global]\nread only = no\nguest ok = yes\n[a]\npath = a\n[b]\npath = b\nread only = yes\n",
    )
    .unwrap();
    assert!(!cfg.shares[0].read_only);
    assert!(cfg.shares[0].guest_ok);
    assert!(cfg.shares[1].read_only);
    assert!(cfg.shares[1].guest_ok);
}

#[test]
fn keys_ignore_case_underscores_and_extra_blanks() {
    let dir = TempDir::new();
    dir.mkdir("d");
    let cfg = parse(
        &dir,
        "[GLOBAL]\nSERVER_MAX_PROTOCOL = smb3_02\n  Server   Min\tProtocol=SMB2\n\
         [d]\nPATH=d\nRead_Only = No\nGuest  OK = True\n",
    )
    .unwrap();
    assert_eq!(cfg.global.server_max_protocol, Dialect::Smb3_02);
    assert_eq!(cfg.global.server_min_protocol, Dialect::Smb2_02);
    assert!(!cfg.shares[0].read_only);
    assert!(cfg.shares[0].guest_ok);
}

#[test]
fn continuation_lines_join_and_errors_point_at_their_first_line() {
    let dir = TempDir::new();
    dir.mkdir("d");
    let cfg = parse(
        &dir,
        "[d]\npath = d\nvalid users = alice, \\\n      bob \\\n      carol\ncomment = x\n",
    )
    .unwrap();
    assert_eq!(cfg.shares[0].rules.valid_users, ["alice", "bob", "carol"]);
    assert_eq!(cfg.shares[0].comment, "x");

    let (line, msg) = error_of(&dir, "[d]\npath = d\nread only = \\\n  perhaps\n");
    assert_eq!(line, 3);
    assert!(msg.contains("perhaps"), "{msg}");
}

#[test]
fn unknown_option_warns_with_its_line_and_is_ignored() {
    let dir = TempDir::new();
    dir.mkdir("d");
    let cfg = parse(
        &dir,
        "[global]\nfrobnicate = 7\n[d]\npath = d\nshiny = yes\n",
    )
    .unwrap();
    let w: Vec<(usize, &str)> = cfg
        .warnings
        .iter()
        .map(|w| (w.line, w.message.as_str()))
        .collect();
    assert_eq!(
        w,
        [
            (2, "unknown option 'frobnicate' ignored"),
            (5, "unknown option 'shiny' ignored")
        ]
    );
    assert_eq!(cfg.warnings[0].file, dir.path().join("smb.conf"));
    assert_eq!(
        cfg.warnings[0].to_string(),
        format!(
            "{}:2: unknown option 'frobnicate' ignored",
            dir.path().join("smb.conf").display()
        )
    );
}

#[test]
fn global_option_in_a_share_and_repeated_keys_warn() {
    let dir = TempDir::new();
    dir.mkdir("d");
    let cfg = parse(
        &dir,
        "[d]\npath = d\nworkgroup = X\ncomment = a\ncomment = b\n",
    )
    .unwrap();
    assert_eq!(cfg.global.workgroup, "WORKGROUP");
    assert_eq!(cfg.shares[0].comment, "b");
    let lines: Vec<usize> = cfg.warnings.iter().map(|w| w.line).collect();
    assert_eq!(lines, [3, 5]);
}

#[test]
fn homes_is_a_share_per_user_and_printers_sections_are_skipped_with_a_warning() {
    let dir = TempDir::new();
    dir.mkdir("d");
    let cfg = parse(
        &dir,
        "[homes]\nbrowseable = no\nwhatever = 1\nvalid users = %S\n[printers]\npath = /nope\n\
         [d]\npath = d\n",
    )
    .unwrap();
    assert_eq!(cfg.shares.len(), 1);
    let homes = cfg.homes.expect("[homes] is kept");
    assert_eq!(homes.path, Path::new("%H"));
    assert!(homes.templated && !homes.browseable);
    assert_eq!(homes.rules.valid_users, ["%S"]);
    let lines: Vec<usize> = cfg.warnings.iter().map(|w| w.line).collect();
    assert_eq!(lines, [3, 5]);
}

#[test]
fn share_rules_are_read_with_samba_names_and_global_defaults() {
    let dir = TempDir::new();
    dir.mkdir("d");
    let cfg = parse(
        &dir,
        "[global]\ncreate mask = 0700\nhide unreadable = yes\n\
         [d]\npath = d\nforce user = svc\nforce group = +staff\ninvalid users = bob @guests\n\
         read list = carol\nwrite list = @editors\nadmin users = root\ndirectory mode = 2770\n\
         force create mode = 0060\nforce directory mode = 0\ninherit permissions = yes\n\
         inherit acls = yes\ninherit owner = unix only\nvfs objects = acl_xattr\n\
         [u]\npath = /srv/%U\n",
    )
    .unwrap();
    let r = &cfg.shares[0].rules;
    assert_eq!(r.force_user.as_deref(), Some("svc"));
    assert_eq!(r.force_group.as_deref(), Some("+staff"));
    assert_eq!(r.invalid_users, ["bob", "@guests"]);
    assert_eq!(r.read_list, ["carol"]);
    assert_eq!(r.write_list, ["@editors"]);
    assert_eq!(r.admin_users, ["root"]);
    assert_eq!((r.create_mask, r.directory_mask), (0o700, 0o2770));
    assert_eq!((r.force_create_mode, r.force_directory_mode), (0o060, 0));
    assert!(r.inherit_permissions && r.inherit_acls && r.hide_unreadable);
    assert_eq!(r.inherit_owner, ringshare_core::InheritOwner::UnixOnly);
    assert!(cfg.shares[0].acl_xattr);
    let u = &cfg.shares[1];
    assert!(u.templated && !u.acl_xattr);
    assert_eq!(u.path, Path::new("/srv/%U"));
    assert_eq!(u.rules.create_mask, 0o700, "from [global]");
}

#[test]
fn each_bad_value_is_refused_at_its_line() {
    let dir = TempDir::new();
    dir.mkdir("d");
    std::fs::write(dir.path().join("file"), b"x").unwrap();
    let cases: &[(&str, usize, &str)] = &[
        (
            "[d]\npath = d\n\nread only = maybe\n",
            4,
            "expects yes or no",
        ),
        (
            "[global]\nserver min protocol = SMB4\n",
            2,
            "unknown protocol 'SMB4'",
        ),
        (
            "[global]\nserver max protocol = NT1\n",
            2,
            "SMB1 is not supported",
        ),
        (
            "[global]\nmin protocol = LANMAN2\n",
            2,
            "SMB1 is not supported",
        ),
        (
            "[global]\nserver max protocol = SMB2\nserver min protocol = SMB3\n",
            3,
            "higher than",
        ),
        (
            "[global]\nserver min protocol = SMB3_02\nmax protocol = SMB3_00\n",
            3,
            "higher than",
        ),
        ("[global]\n\n[d]\ncomment = no path\n", 3, "has no 'path'"),
        ("[d]\npath = missing\n", 2, "does not exist"),
        ("[d]\npath = d\ncreate mask = 0999\n", 3, "octal mode"),
        ("[d]\npath = d\ninherit owner = maybe\n", 3, "unix only"),
        ("[d]\npath = file\n", 2, "not a directory"),
        (
            "[d]\npath = d\n[D]\npath = d\n",
            3,
            "duplicate share [D]: already defined on line 1",
        ),
        ("[ipc$]\npath = d\n", 1, "reserved"),
        ("workgroup = x\n[global]\n", 1, "outside any section"),
        ("[global]\n[broken\n", 2, "malformed section header"),
        ("[global]\n[]\n", 2, "empty section name"),
        ("[global]\n[a] b\n", 2, "unexpected text after ']'"),
        ("[global]\njust words\n", 2, "expected 'key = value'"),
        ("[global]\n = value\n", 2, "missing option name"),
        ("[global]\nmax connections = lots\n", 2, "whole number"),
        ("[global]\nlog level = verbose\n", 2, "log level"),
        ("[global]\nlisten = 127.0.0.1\n", 2, "ADDRESS:PORT"),
        (
            "[global]\nserver signing = sometimes\n",
            2,
            "server signing",
        ),
        (
            "[global]\nmap to guest = bad password\n",
            2,
            "not supported",
        ),
        ("[global]\nsecurity = domain\n", 2, "security = user"),
        ("[global]\nsecurity = ads\n", 2, "needs 'realm'"),
        (
            "[global]\nrealm = AD.TEST\nworkgroup = AD\nsecurity = ads\n",
            4,
            "needs a keytab",
        ),
        ("[global]\nhosts allow = 10.0.0.0/8\n", 2, "firewall"),
        ("[global]\ninclude = /etc/samba/other.conf\n", 2, "one file"),
        (
            "[global]\nserver smb encrypt = sometimes\n",
            2,
            "if_required",
        ),
        (
            "[global]\nnetbios name = waytoolongforanetbiosname\n",
            2,
            "15 characters",
        ),
        ("[a/b]\npath = d\n", 1, "forbids"),
    ];
    for (text, line, needle) in cases {
        let (got_line, msg) = error_of(&dir, text);
        assert_eq!(got_line, *line, "line for {text:?} (message: {msg})");
        assert!(msg.contains(needle), "message for {text:?} was {msg:?}");
    }
}

#[test]
fn error_display_names_file_and_line() {
    let dir = TempDir::new();
    let e = parse(&dir, "[global]\nbind interfaces only = sure\n").unwrap_err();
    let file = dir.path().join("smb.conf");
    assert_eq!(e.file, file);
    assert_eq!(
        e.to_string(),
        format!(
            "{}:2: 'bind interfaces only' expects yes or no (also true/false, 1/0, on/off), got 'sure'",
            file.display()
        )
    );
}

#[test]
fn comments_start_lines_but_not_values() {
    let dir = TempDir::new();
    dir.mkdir("d");
    let cfg = parse(
        &dir,
        "   ; indented comment\n# hash comment\n[d] ; trailing comment on a header\npath = d\ncomment = a;b #c\n",
    )
    .unwrap();
    assert_eq!(cfg.shares[0].comment, "a;b #c");
}

#[test]
fn load_reads_a_file_and_reports_missing_files_and_bad_encoding() {
    let dir = TempDir::new();
    dir.mkdir("d");
    let file = dir.path().join("ringshare.conf");
    std::fs::write(&file, "[d]\npath = d\n").unwrap();
    let cfg = config::load(&file).unwrap();
    assert_eq!(cfg.source.as_deref(), Some(file.as_path()));
    assert_eq!(cfg.shares[0].path, dir.path().join("d"));

    let missing = config::load(&dir.path().join("nope.conf")).unwrap_err();
    assert_eq!(missing.line, 0);
    assert!(
        missing.message.contains("cannot read"),
        "{}",
        missing.message
    );

    std::fs::write(&file, b"[global]\n\ncomment = caf\xe9\n").unwrap();
    let bad = config::load(&file).unwrap_err();
    assert_eq!(bad.line, 3);
    assert!(bad.message.contains("UTF-8"));
}

#[test]
fn single_share_names_the_share_after_the_directory() {
    let dir = TempDir::new();
    let data = dir.mkdir("Holiday Photos");
    let cfg = Config::single_share(&data);
    assert_eq!(cfg.shares.len(), 1);
    let s = &cfg.shares[0];
    assert_eq!(s.name, "Holiday_Photos");
    assert_eq!(s.path, std::fs::canonicalize(&data).unwrap());
    assert!(!s.read_only);
    assert!(!s.guest_ok);
    assert!(cfg.source.is_none());
    assert!(cfg.warnings.is_empty());

    // `ringshare serve .` from inside the directory still gets the directory's name.
    let dot = Config::single_share(&data.join("."));
    assert_eq!(dot.shares[0].name, "Holiday_Photos");
}

#[test]
fn a_log_written_to_a_file_has_no_colour_codes() {
    let dir = TempDir::new();
    let conf = dir.path().join("smb.conf");
    // An unknown option is warned about; an address no interface has (TEST-NET-1) then
    // stops start-up.
    let share = dir.mkdir("share");
    std::fs::write(
        &conf,
        format!(
            "[global]\nfrobnicate = yes\nlisten = 192.0.2.1:4450\nsmb passwd file = {}\n\
             [s]\npath = {}\n",
            dir.path().join("smbpasswd").display(),
            share.display()
        ),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringshare"))
        .args(["serve", "--config"])
        .arg(&conf)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("unknown option 'frobnicate' ignored"), "{log}");
    assert!(
        !log.contains('\u{1b}'),
        "ANSI escapes in a log that is not a terminal: {log:?}"
    );
}

#[test]
fn on_a_cluster_node_posix_locking_is_off_unless_a_share_or_global_asks_for_it() {
    let dir = TempDir::new();
    let share = dir.mkdir("share");
    let conf = |more: &str| {
        format!(
            "[global]\ncluster name = lab\ncluster node = 2\ncluster address = 10.0.0.2:4460\n\
             cluster etcd = http://10.0.0.1:2379\ncluster secret file = secret\n\
             cluster filesystem = {share}\n{more}[s]\npath = {share}\n\
             [t]\npath = {share}\nposix locking = yes\n",
            share = share.display()
        )
    };
    let c = parse(&dir, &conf("")).expect("a cluster node");
    assert!(
        !c.shares[0].posix_locking,
        "off by default on a cluster node"
    );
    assert!(c.shares[1].posix_locking, "a share asks for it");
    let c = parse(&dir, &conf("posix locking = yes\n")).expect("a cluster node");
    assert!(c.shares[0].posix_locking, "[global] asks for it");
}

#[test]
fn a_cluster_section_is_read_with_its_defaults_and_a_partial_one_names_what_it_lacks() {
    let dir = TempDir::new();
    let share = dir.mkdir("share");
    let c = parse(
        &dir,
        &format!(
            "[global]\ncluster name = lab\ncluster node = 2\ncluster address = 10.0.0.2:4460\n\
             cluster etcd = http://10.0.0.1:2379, http://10.0.0.3:2379\n\
             cluster secret file = secret\ncluster filesystem = {share}\n\
             cluster takeover command = /usr/local/bin/evict\n[s]\npath = {share}\n",
            share = share.display()
        ),
    )
    .expect("a complete cluster section");
    assert_eq!(
        c.global.cluster.takeover_command.as_deref(),
        Some(std::path::Path::new("/usr/local/bin/evict"))
    );
    let g = &c.global.cluster;
    assert_eq!(g.name.as_deref(), Some("lab"));
    assert_eq!(g.node, 2);
    assert_eq!(g.address, Some("10.0.0.2:4460".parse().unwrap()));
    assert_eq!(g.etcd, ["http://10.0.0.1:2379", "http://10.0.0.3:2379"]);
    assert_eq!(
        g.secret_file.as_deref(),
        Some(dir.path().join("secret").as_path())
    );
    assert!(
        !config::Global::default().cluster.enabled(),
        "no cluster unless named"
    );

    let (line, msg) = error_of(
        &dir,
        "[global]\ncluster name = lab\ncluster node = 1\n[s]\npath = share\n",
    );
    assert_eq!(line, 3, "{msg}");
    assert!(
        msg.contains("cluster address, cluster etcd, cluster secret file, cluster filesystem"),
        "{msg}"
    );
    for (bad, why) in [
        ("cluster node = 0", "from 1 to 65535"),
        ("cluster node = 70000", "from 1 to 65535"),
        ("cluster address = 0.0.0.0:4460", "other nodes reach"),
        (
            "cluster etcd = https://e:2379",
            "TLS endpoints are not supported",
        ),
        ("cluster name = a/b", "letters, digits"),
        ("cluster colour = blue", "unknown option"),
    ] {
        let (_, msg) = error_of(&dir, &format!("[global]\n{bad}\n[s]\npath = share\n"));
        assert!(msg.contains(why), "{bad}: {msg}");
    }
}
