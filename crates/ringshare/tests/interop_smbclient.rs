//! End to end: Samba's `smbclient` against `ringshare serve` on loopback.
//!
//! Each dialect from SMB 2.0.2 to 3.1.1, signed and unsigned, goes through ls, mkdir, a 64 MiB
//! put and get (byte-identical, same SHA-256), ls, rename, allinfo, del and rmdir. Every step's
//! output is checked, not only the exit code: smbclient exits 0 after a failed command in `-c`
//! mode, so any `NT_STATUS_` in its output fails the step. Then log-in rules (wrong password,
//! guest with and without `guest ok`) and confinement (`..` and a symlink to /etc).
//!
//! Needs smbclient (`apt-get install -y smbclient`). Without it the tests print a loud note and
//! pass, except under CI (env `CI` set), where they fail.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use common::{smbclient_or_skip, Protection, Server, ServerConfig, SharedServer, USER};

/// Size of the file sent and fetched in every dialect × signing combination.
const BIG_FILE_LEN: usize = 64 * 1024 * 1024;
/// Limit for one 64 MiB transfer (a debug build signing every message is the slow case).
const TRANSFER_TIMEOUT: Duration = Duration::from_secs(120);

/// One server for all tests that use the default configuration; stopped when the last test that
/// holds it finishes.
static DEFAULT_SERVER: SharedServer = SharedServer::new();

fn default_server() -> Arc<Server> {
    DEFAULT_SERVER.get(|| Server::start(&ServerConfig::default(), |_| {}))
}

/// 64 MiB of pseudo-random bytes (xorshift64*), made once per test process.
fn big_data() -> &'static [u8] {
    static DATA: OnceLock<Vec<u8>> = OnceLock::new();
    DATA.get_or_init(|| {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1);
        let mut data = Vec::with_capacity(BIG_FILE_LEN);
        while data.len() < BIG_FILE_LEN {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            data.extend_from_slice(&x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
        }
        data
    })
}

/// `sha256sum FILE`'s digest.
fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("run sha256sum");
    assert!(out.status.success(), "sha256sum {}", path.display());
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Panics unless the file at `path` holds exactly `want`, naming the first differing offset.
fn assert_same_bytes(what: &str, path: &Path, want: &[u8]) {
    let got =
        std::fs::read(path).unwrap_or_else(|e| panic!("{what}: read {}: {e}", path.display()));
    if got != want {
        let first = got.iter().zip(want).position(|(a, b)| a != b);
        panic!(
            "{what}: {} differs: {} bytes, want {}; first differing offset {first:?}",
            path.display(),
            got.len(),
            want.len()
        );
    }
}

/// Lines where smbclient says it signed a message (printed at debug level 5).
fn signed_messages(output: &str) -> usize {
    output.matches("signed SMB2 message").count()
}

/// The whole file round trip over one dialect, signed or not, on the shared default server.
fn round_trip(dialect: &'static str, protection: Protection) {
    let test = format!("round trip over {dialect} {protection:?}");
    if !smbclient_or_skip(&test) {
        return;
    }
    let server = default_server();
    let client = || server.client().dialect(dialect).protection(protection);
    let tag = format!(
        "rt-{}-{}",
        dialect.to_lowercase(),
        if protection == Protection::Sign {
            "signed"
        } else {
            "unsigned"
        }
    );
    let data = big_data();
    let src = server.scratch.join(format!("{tag}-src.bin"));
    let back = server.scratch.join(format!("{tag}-back.bin"));
    std::fs::write(&src, data).expect("write source file");
    let dir_on_disk = server.share_dir.join(&tag);

    // ls, at debug level 5, which also shows the dialect and the signing.
    let ls = client().debug_level(5).run("ls");
    ls.expect_ok("ls");
    ls.expect_contains("ls", &format!("negotiated dialect[{dialect}]"));
    let signed = signed_messages(&ls.all());
    // Against Samba 4.17, smbclient's `ls` signs 12 to 14 messages when signing is on, and 2
    // (3.1.1) or 4 (older dialects: the session setup, tree connect and the validate-negotiate
    // ioctl, which are signed whatever the client asks) when it is off.
    match protection {
        Protection::Sign => assert!(
            signed >= 8,
            "ls with --client-protection=sign signed only {signed} messages\n{ls}"
        ),
        _ => assert!(
            signed <= 4,
            "ls with --client-protection=off signed {signed} messages: the server forced \
             signing although `server signing = auto`\n{ls}"
        ),
    }

    client().run(&format!("mkdir {tag}")).expect_ok("mkdir");
    assert!(
        dir_on_disk.is_dir(),
        "mkdir did not create {}",
        dir_on_disk.display()
    );

    client()
        .timeout(TRANSFER_TIMEOUT)
        .run(&format!("put {tag}-src.bin {tag}\\big.bin"))
        .expect_ok("put")
        .expect_contains("put", "putting file");
    assert_same_bytes("put", &dir_on_disk.join("big.bin"), data);

    client()
        .timeout(TRANSFER_TIMEOUT)
        .run(&format!("get {tag}\\big.bin {tag}-back.bin"))
        .expect_ok("get")
        .expect_contains("get", "getting file");
    assert_same_bytes("get", &back, data);
    assert_eq!(
        sha256(&back),
        sha256(&src),
        "sha256 of the file fetched back"
    );
    std::fs::remove_file(&back).expect("remove fetched file");

    client()
        .run(&format!("ls {tag}\\*"))
        .expect_ok("ls of the new directory")
        .expect_contains("ls of the new directory", "big.bin")
        .expect_contains("ls of the new directory", &BIG_FILE_LEN.to_string());

    client()
        .run(&format!("rename {tag}\\big.bin {tag}\\renamed.bin"))
        .expect_ok("rename");
    assert!(
        !dir_on_disk.join("big.bin").exists(),
        "rename left the old name"
    );
    assert_same_bytes("rename", &dir_on_disk.join("renamed.bin"), data);

    client()
        .run(&format!("allinfo {tag}\\renamed.bin"))
        // [MS-FSCC] 2.4.5: a file without an 8.3 name answers FileAlternateNameInformation with
        // STATUS_OBJECT_NAME_NOT_FOUND; smbclient prints that and goes on.
        .expect_ok_allowing(
            "allinfo",
            &["NT_STATUS_OBJECT_NAME_NOT_FOUND getting alt name for"],
        )
        .expect_contains("allinfo", "create_time:")
        .expect_contains("allinfo", "write_time:")
        .expect_contains("allinfo", "attributes:")
        .expect_contains(
            "allinfo",
            &format!("stream: [::$DATA], {BIG_FILE_LEN} bytes"),
        );

    client()
        .run(&format!("del {tag}\\renamed.bin"))
        .expect_ok("del");
    assert!(
        !dir_on_disk.join("renamed.bin").exists(),
        "del left the file"
    );

    client().run(&format!("rmdir {tag}")).expect_ok("rmdir");
    assert!(!dir_on_disk.exists(), "rmdir left the directory");
    std::fs::remove_file(&src).expect("remove source file");
}

#[test]
fn put_and_get_of_64_mib_round_trips_byte_identical_over_smb2_02_signed() {
    round_trip("SMB2_02", Protection::Sign);
}

#[test]
fn put_and_get_of_64_mib_round_trips_byte_identical_over_smb2_02_unsigned() {
    round_trip("SMB2_02", Protection::Off);
}

#[test]
fn put_and_get_of_64_mib_round_trips_byte_identical_over_smb2_10_signed() {
    round_trip("SMB2_10", Protection::Sign);
}

#[test]
fn put_and_get_of_64_mib_round_trips_byte_identical_over_smb2_10_unsigned() {
    round_trip("SMB2_10", Protection::Off);
}

#[test]
fn put_and_get_of_64_mib_round_trips_byte_identical_over_smb3_00_signed() {
    round_trip("SMB3_00", Protection::Sign);
}

#[test]
fn put_and_get_of_64_mib_round_trips_byte_identical_over_smb3_00_unsigned() {
    round_trip("SMB3_00", Protection::Off);
}

#[test]
fn put_and_get_of_64_mib_round_trips_byte_identical_over_smb3_02_signed() {
    round_trip("SMB3_02", Protection::Sign);
}

#[test]
fn put_and_get_of_64_mib_round_trips_byte_identical_over_smb3_02_unsigned() {
    round_trip("SMB3_02", Protection::Off);
}

#[test]
fn put_and_get_of_64_mib_round_trips_byte_identical_over_smb3_11_signed() {
    round_trip("SMB3_11", Protection::Sign);
}

#[test]
fn put_and_get_of_64_mib_round_trips_byte_identical_over_smb3_11_unsigned() {
    round_trip("SMB3_11", Protection::Off);
}

// ---- logging in ----

#[test]
fn wrong_password_is_refused_with_logon_failure() {
    if !smbclient_or_skip("wrong_password_is_refused_with_logon_failure") {
        return;
    }
    let server = default_server();
    let out = server.client().user(USER, "not-the-password").run("ls");
    out.expect_status("wrong password", "NT_STATUS_LOGON_FAILURE");
    assert!(
        !out.status.success(),
        "smbclient exited 0 after a refused login\n{out}"
    );
    assert!(
        !out.stdout.contains("blocks of size"),
        "listed the share\n{out}"
    );
}

/// Whether the output says the login or the tree connect was refused.
fn refused(out: &common::SmbOutput) -> bool {
    let all = out.all();
    (all.contains("NT_STATUS_LOGON_FAILURE") || all.contains("NT_STATUS_ACCESS_DENIED"))
        && !all.contains("blocks of size")
}

#[test]
fn guest_is_refused_when_the_share_is_not_guest_ok() {
    if !smbclient_or_skip("guest_is_refused_when_the_share_is_not_guest_ok") {
        return;
    }
    let server = default_server();
    let named_guest = server.client().user("guest", "").run("ls");
    assert!(refused(&named_guest), "-U guest% got in\n{named_guest}");
    let anonymous = server.client().anonymous().run("ls");
    assert!(refused(&anonymous), "-N got in\n{anonymous}");
    let unknown = server.client().user("no-such-user", "whatever").run("ls");
    assert!(refused(&unknown), "an unknown user got in\n{unknown}");
}

fn with_hello(dir: &Path) {
    std::fs::write(dir.join("hello.txt"), b"hello from ringshare\n").expect("write hello.txt");
}

fn guest_config() -> ServerConfig {
    ServerConfig {
        guest_ok: true,
        map_to_guest: "bad user",
        ..ServerConfig::default()
    }
}

#[test]
fn guest_lists_a_guest_ok_share_when_unknown_users_map_to_guest() {
    if !smbclient_or_skip("guest_lists_a_guest_ok_share_when_unknown_users_map_to_guest") {
        return;
    }
    let server = Server::start(&guest_config(), with_hello);
    server
        .client()
        .user("guest", "")
        .run("ls")
        .expect_ok("ls as guest")
        .expect_contains("ls as guest", "hello.txt");
    server
        .client()
        .user("no-such-user", "whatever")
        .run("ls")
        .expect_ok("ls as an unknown user")
        .expect_contains("ls as an unknown user", "hello.txt");
    server
        .client()
        .run("get hello.txt hello-back.txt")
        .expect_ok("get as the real user");
    assert_eq!(
        std::fs::read(server.scratch.join("hello-back.txt")).expect("fetched hello.txt"),
        b"hello from ringshare\n"
    );
}

#[test]
fn anonymous_login_lists_a_guest_ok_share_when_unknown_users_map_to_guest() {
    if !smbclient_or_skip("anonymous_login_lists_a_guest_ok_share_when_unknown_users_map_to_guest")
    {
        return;
    }
    let server = Server::start(&guest_config(), with_hello);
    server
        .client()
        .anonymous()
        .run("ls")
        .expect_ok("ls with -N")
        .expect_contains("ls with -N", "hello.txt");
}

#[test]
fn known_user_with_wrong_password_is_refused_even_when_guests_are_allowed() {
    if !smbclient_or_skip("known_user_with_wrong_password_is_refused_even_when_guests_are_allowed")
    {
        return;
    }
    let server = Server::start(&guest_config(), with_hello);
    let out = server.client().user(USER, "not-the-password").run("ls");
    out.expect_status("wrong password", "NT_STATUS_LOGON_FAILURE");
    assert!(!out.stdout.contains("hello.txt"), "listed the share\n{out}");
}

#[test]
fn quick_serve_with_guest_flag_lets_a_guest_list_and_read_the_directory() {
    if !smbclient_or_skip("quick_serve_with_guest_flag_lets_a_guest_list_and_read_the_directory") {
        return;
    }
    let server = Server::start_quick_guest("public", with_hello);
    server
        .client()
        .user("guest", "")
        .run("ls")
        .expect_ok("ls as guest")
        .expect_contains("ls as guest", "hello.txt");
    server
        .client()
        .user("guest", "")
        .run("get hello.txt hello-back.txt")
        .expect_ok("get as guest");
    assert_eq!(
        std::fs::read(server.scratch.join("hello-back.txt")).expect("fetched hello.txt"),
        b"hello from ringshare\n"
    );
}

/// Run as root, `ringshare serve DIR` makes its first user without a Unix account; that user
/// acts as the owner of DIR, not as root: what it writes belongs to the owner, and a file only
/// root may read stays unreadable.
#[test]
fn quick_serve_as_root_lets_its_first_user_act_as_the_owner_of_the_directory() {
    let test = "quick_serve_as_root_lets_its_first_user_act_as_the_owner_of_the_directory";
    if !smbclient_or_skip(test) {
        return;
    }
    if !rustix::process::geteuid().is_root() {
        eprintln!("{test}: skipped, needs root to act as users");
        return;
    }
    let owner = "rsquickowner";
    common::ensure_unix_account(owner);
    let uid = uid_of(owner);
    let server = Server::start_quick("quick", false, |dir| {
        with_hello(dir);
        std::fs::write(dir.join("root-only.txt"), b"secret\n").expect("write root-only.txt");
        std::fs::set_permissions(
            dir.join("root-only.txt"),
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .expect("chmod root-only.txt");
        std::os::unix::fs::chown(dir, Some(uid), None).expect("chown share");
        std::os::unix::fs::chown(dir.join("hello.txt"), Some(uid), None).expect("chown hello");
    });
    assert!(
        server.log().contains("acts as the owner of"),
        "the server did not say who users act as\n{}",
        server.log()
    );
    let password = server
        .first_user_password()
        .unwrap_or_else(|| panic!("no first user's password in\n{}", server.log()));
    std::fs::write(server.scratch.join("up.txt"), b"uploaded\n").expect("write up.txt");
    server
        .client()
        .user("ringshare", &password)
        .run("get hello.txt hello-back.txt; put up.txt new.txt")
        .expect_ok("get and put as the first user");
    let made = std::fs::metadata(server.share_dir.join("new.txt")).expect("new.txt was made");
    assert_eq!(
        std::os::unix::fs::MetadataExt::uid(&made),
        uid,
        "new.txt should belong to the owner of the directory"
    );
    server
        .client()
        .user("ringshare", &password)
        .run("get root-only.txt")
        .expect_status("get a 0600 file of root", "NT_STATUS_ACCESS_DENIED");
}

/// A server that is not root cannot switch credentials: it says so at start, and everyone acts
/// as the account it runs as (here `nobody`): what a user writes belongs to that account.
#[test]
fn a_server_not_run_as_root_says_so_and_everyone_acts_as_its_account() {
    let test = "a_server_not_run_as_root_says_so_and_everyone_acts_as_its_account";
    if !smbclient_or_skip(test) {
        return;
    }
    if !rustix::process::geteuid().is_root() {
        eprintln!("{test}: skipped, needs root to start the server as nobody");
        return;
    }
    let server = Server::start_quick_as_nobody("plain", with_hello);
    let log = server.log();
    assert!(
        log.contains("running as nobody (uid 65534), not root: every user acts as nobody"),
        "the server did not say it acts as nobody for everyone\n{log}"
    );
    let password = server
        .first_user_password()
        .unwrap_or_else(|| panic!("no first user's password in\n{log}"));
    std::fs::write(server.scratch.join("up.txt"), b"uploaded\n").expect("write up.txt");
    server
        .client()
        .user("ringshare", &password)
        .run("get hello.txt hello-back.txt; put up.txt new.txt")
        .expect_ok("get and put as the first user");
    let made = std::fs::metadata(server.share_dir.join("new.txt")).expect("new.txt was made");
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&made), common::NOBODY);
}

/// The uid of the Unix account `name` (`id -u`).
fn uid_of(name: &str) -> u32 {
    let out = Command::new("id")
        .args(["-u", name])
        .output()
        .expect("run id");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("no uid for {name}"))
}

// ---- confinement ----

/// A share holding `etclink -> /etc` and `passwdlink -> /etc/passwd`, made before the server
/// starts.
static CONFINED_SERVER: SharedServer = SharedServer::new();

fn confined_server() -> Arc<Server> {
    CONFINED_SERVER.get(|| {
        Server::start(&ServerConfig::default(), |dir| {
            with_hello(dir);
            std::os::unix::fs::symlink("/etc", dir.join("etclink")).expect("symlink etclink");
            std::os::unix::fs::symlink("/etc/passwd", dir.join("passwdlink"))
                .expect("symlink passwdlink");
        })
    })
}

#[test]
fn get_of_dot_dot_path_is_refused_and_writes_nothing() {
    if !smbclient_or_skip("get_of_dot_dot_path_is_refused_and_writes_nothing") {
        return;
    }
    let server = confined_server();
    for (i, path) in [
        "../../etc/passwd",
        "..\\..\\etc\\passwd",
        "../passwdlink/../../etc/passwd",
    ]
    .iter()
    .enumerate()
    {
        let local = format!("stolen-{i}.txt");
        let out = server.client().run(&format!("get {path} {local}"));
        assert!(out.nt_status().is_some(), "get {path} did not fail\n{out}");
        let written = server.scratch.join(&local);
        assert!(
            !written.exists() || std::fs::metadata(&written).map(|m| m.len()).unwrap_or(0) == 0,
            "get {path} wrote {}\n{out}",
            written.display()
        );
        let _ = std::fs::remove_file(&written);
    }
    // And a put aimed above the share lands nowhere outside it.
    std::fs::write(server.scratch.join("escape.txt"), b"escape").expect("write escape.txt");
    let above = server.share_dir.parent().expect("share has a parent");
    let outside = [
        above.join("escape.txt"),
        above.parent().expect("two levels up").join("escape.txt"),
    ];
    let existed: Vec<bool> = outside.iter().map(|p| p.exists()).collect();
    let out = server.client().run("put escape.txt ..\\..\\escape.txt");
    for (path, existed) in outside.iter().zip(existed) {
        assert!(
            existed || !path.exists(),
            "put escaped the share to {}\n{out}",
            path.display()
        );
    }
    let _ = std::fs::remove_file(server.share_dir.join("escape.txt"));
}

#[test]
fn symlink_to_etc_inside_the_share_cannot_be_listed_or_read_through() {
    if !smbclient_or_skip("symlink_to_etc_inside_the_share_cannot_be_listed_or_read_through") {
        return;
    }
    let server = confined_server();
    let ls = server.client().run("ls etclink\\*");
    assert!(
        ls.nt_status().is_some(),
        "ls through etclink did not fail\n{ls}"
    );
    for leaked in ["passwd", "hostname", "fstab"] {
        assert!(
            !ls.stdout.contains(leaked),
            "ls through etclink showed {leaked}\n{ls}"
        );
    }
    for (local, remote) in [
        ("via-dir.txt", "etclink\\passwd"),
        ("via-file.txt", "passwdlink"),
    ] {
        let out = server.client().run(&format!("get {remote} {local}"));
        assert!(
            out.nt_status().is_some(),
            "get {remote} did not fail\n{out}"
        );
        let written = server.scratch.join(local);
        let content = std::fs::read_to_string(&written).unwrap_or_default();
        assert!(
            !content.contains("root:"),
            "get {remote} read /etc/passwd\n{out}"
        );
        let _ = std::fs::remove_file(&written);
    }
    // The rest of the share still works.
    server
        .client()
        .run("ls hello.txt")
        .expect_ok("ls of a plain file next to the links")
        .expect_contains("ls of a plain file next to the links", "hello.txt");
}

/// put and get of an 8 MiB random file with every message encrypted.
fn encrypted_round_trip(dialect: &'static str, cipher: &'static str) {
    let test = format!("encrypted round trip over {dialect} {cipher}");
    if !smbclient_or_skip(&test) {
        return;
    }
    let server = default_server();
    let tag = format!("enc-{}-{}", dialect.to_lowercase(), cipher.to_lowercase());
    let data: Vec<u8> = big_data()[..8 << 20].to_vec();
    let src = server.scratch.join(format!("{tag}-src.bin"));
    let back = server.scratch.join(format!("{tag}-back.bin"));
    std::fs::write(&src, &data).expect("write source file");
    let out = server
        .client()
        .dialect(dialect)
        .protection(Protection::Encrypt(cipher))
        .run(&format!(
            "put {} {tag}.bin; get {tag}.bin {}; del {tag}.bin",
            src.display(),
            back.display()
        ));
    out.expect_ok("encrypted put/get/del");
    let got = std::fs::read(&back).expect("the file came back");
    assert!(
        got == data,
        "{test}: the file came back different ({} bytes)",
        got.len()
    );
    assert!(
        !server.share_dir.join(format!("{tag}.bin")).exists(),
        "del removed it"
    );
}

#[test]
fn encrypted_put_and_get_round_trip_over_smb3_11_aes_128_gcm() {
    encrypted_round_trip("SMB3_11", "AES-128-GCM");
}

#[test]
fn encrypted_put_and_get_round_trip_over_smb3_11_aes_128_ccm() {
    encrypted_round_trip("SMB3_11", "AES-128-CCM");
}

#[test]
fn encrypted_put_and_get_round_trip_over_smb3_11_aes_256_gcm() {
    encrypted_round_trip("SMB3_11", "AES-256-GCM");
}

#[test]
fn encrypted_put_and_get_round_trip_over_smb3_11_aes_256_ccm() {
    encrypted_round_trip("SMB3_11", "AES-256-CCM");
}

#[test]
fn encrypted_put_and_get_round_trip_over_smb3_00_aes_128_ccm() {
    encrypted_round_trip("SMB3_00", "");
}

#[test]
fn encrypted_put_and_get_round_trip_over_smb3_02_aes_128_ccm() {
    encrypted_round_trip("SMB3_02", "");
}

#[test]
fn smbclient_lists_the_shares_with_their_comments_over_smb2_and_smb3() {
    if !smbclient_or_skip("smbclient -L") {
        return;
    }
    let server = default_server();
    for dialect in ["SMB2_02", "SMB3_11"] {
        let out = server.client().dialect(dialect).run("");
        out.expect_ok_allowing("smbclient -L", &[]);
        let text = out.all();
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(common::SHARE))
            .unwrap_or_else(|| {
                panic!("share {} not listed over {dialect}:\n{text}", common::SHARE)
            });
        assert!(
            line.contains("Disk") && line.contains("ringshare interop share"),
            "{line}"
        );
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with("IPC$") && l.contains("IPC")),
            "{text}"
        );
    }
}

#[test]
fn server_smb_encrypt_required_serves_smb3_clients_encrypted_and_refuses_the_others() {
    if !smbclient_or_skip("server smb encrypt = required") {
        return;
    }
    let server = Server::start(
        &ServerConfig {
            encrypt: "required",
            guest_ok: true,
            map_to_guest: "bad user",
            ..ServerConfig::default()
        },
        |dir| std::fs::write(dir.join("sealed.txt"), b"sealed").unwrap(),
    );
    // smbclient sees SMB2_SESSION_FLAG_ENCRYPT_DATA and encrypts without being told to.
    let out = server
        .client()
        .dialect("SMB3_11")
        .run("get sealed.txt /dev/null");
    out.expect_ok("get over an encrypted SMB 3.1.1 session");
    // SMB 2.1 cannot encrypt: the session is refused.
    let out = server.client().dialect("SMB2_10").run("ls");
    assert!(
        out.nt_status().is_some(),
        "an SMB 2.1 session must be refused:\n{}",
        out.all()
    );
    // Guests have no keys, so they cannot be encrypted either.
    let out = server.client().anonymous().dialect("SMB3_11").run("ls");
    assert!(
        out.nt_status().is_some(),
        "a guest session must be refused:\n{}",
        out.all()
    );
}

#[test]
fn smbclient_lists_3000_files_over_several_pages_with_sizes_and_a_hidden_attribute() {
    if !smbclient_or_skip(
        "smbclient_lists_3000_files_over_several_pages_with_sizes_and_a_hidden_attribute",
    ) {
        return;
    }
    const FILES: usize = 3000;
    let server = Server::start(&ServerConfig::default(), |dir| {
        let many = dir.join("many");
        std::fs::create_dir(&many).expect("mkdir many");
        for i in 0..FILES {
            std::fs::write(many.join(format!("f{i:05}.txt")), vec![b'x'; i % 7])
                .expect("write a file");
        }
    });
    server
        .client()
        .run("setmode many\\f01234.txt +h")
        .expect_ok("setmode +h");
    // About 450 entries fit a 64 KiB page: the listing takes several queries.
    let out = server.client().run("ls many\\*");
    out.expect_ok("ls many");
    let mut seen = 0;
    for line in out.stdout.lines() {
        let mut words = line.split_whitespace();
        let (Some(name), Some(second)) = (words.next(), words.next()) else {
            continue;
        };
        let Some(i) = name
            .strip_prefix('f')
            .and_then(|n| n.strip_suffix(".txt"))
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        seen += 1;
        // "NAME  ATTRS  SIZE  DATE": a file without attributes set has "A"
        // (or "N"); the one made hidden has an "H" among them.
        let (attrs, size) = if second.chars().all(|c| c.is_ascii_digit()) {
            ("", second)
        } else {
            (second, words.next().unwrap_or(""))
        };
        assert_eq!(size, (i % 7).to_string(), "{line}");
        assert_eq!(attrs.contains('H'), i == 1234, "{line}");
    }
    assert_eq!(seen, FILES, "{}", out.stdout);
}
