//! The command line, parsed with `Cli::try_parse_from`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::error::ErrorKind;
use clap::Parser;
use ringshare::cli::{Cli, Command, ServeArgs, ServeSource, UserCommand};
use ringshare::config::MapToGuest;

fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(std::iter::once("ringshare").chain(args.iter().copied()))
}

fn serve(args: &[&str]) -> ServeArgs {
    match parse(args).unwrap().command {
        Command::Serve(s) => s,
        other => panic!("expected serve, got {other:?}"),
    }
}

fn user(args: &[&str]) -> UserCommand {
    match parse(args).unwrap().command {
        Command::User { command } => command,
        other => panic!("expected user, got {other:?}"),
    }
}

#[test]
fn serve_takes_a_directory_with_every_option() {
    let s = serve(&[
        "serve",
        "./data",
        "--listen",
        "127.0.0.1:4450",
        "--listen",
        "[::1]:4450",
        "--guest",
        "--share-name",
        "media",
        "--read-only",
        "--threads",
        "4",
        "--log-level",
        "3",
    ]);
    assert_eq!(s.source(), ServeSource::Dir(Path::new("./data")));
    assert_eq!(
        s.listen,
        [
            "127.0.0.1:4450".parse::<SocketAddr>().unwrap(),
            "[::1]:4450".parse::<SocketAddr>().unwrap()
        ]
    );
    assert!(s.guest);
    assert!(s.read_only);
    assert_eq!(s.share_name.as_deref(), Some("media"));
    assert_eq!(s.threads, Some(4));
    assert_eq!(s.log_level, Some(3));
}

#[test]
fn serve_takes_a_config_file() {
    let s = serve(&["serve", "--config", "/etc/ringshare.conf"]);
    assert_eq!(
        s.source(),
        ServeSource::ConfigFile(Path::new("/etc/ringshare.conf"))
    );
    assert!(s.path.is_none());
    assert!(s.listen.is_empty());
    assert!(!s.guest && !s.read_only);
    assert_eq!(s.threads, None);
}

#[test]
fn serve_without_directory_or_config_is_refused_with_a_clear_message() {
    let e = parse(&["serve"]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::MissingRequiredArgument);
    assert!(
        e.to_string()
            .contains("give a directory to share or --config FILE"),
        "{e}"
    );
}

#[test]
fn serve_refuses_a_directory_and_a_config_together() {
    let e = parse(&["serve", "./data", "--config", "x.conf"]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ArgumentConflict);
}

#[test]
fn serve_refuses_single_share_options_with_a_config() {
    for opt in [&["--guest"][..], &["--read-only"], &["--share-name", "x"]] {
        let mut args = vec!["serve", "--config", "x.conf"];
        args.extend_from_slice(opt);
        let e = parse(&args).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ArgumentConflict, "{opt:?}");
    }
}

#[test]
fn serve_refuses_bad_values() {
    for args in [
        &["serve", "d", "--listen", "127.0.0.1"][..],
        &["serve", "d", "--threads", "0"],
        &["serve", "d", "--threads", "many"],
        &["serve", "d", "--log-level", "11"],
        &["serve", "d", "--share-name", "a\\b"],
        &["serve", "d", "--share-name", "IPC$"],
    ] {
        let e = parse(args).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ValueValidation, "{args:?}: {e}");
    }
}

#[test]
fn user_add_reads_name_password_stdin_and_config() {
    assert_eq!(
        user(&[
            "user",
            "add",
            "alice",
            "--password-stdin",
            "--config",
            "r.conf"
        ]),
        UserCommand::Add {
            name: "alice".to_string(),
            password_stdin: true,
            config: Some(PathBuf::from("r.conf")),
        }
    );
    assert_eq!(
        user(&["user", "add", "bob"]),
        UserCommand::Add {
            name: "bob".to_string(),
            password_stdin: false,
            config: None,
        }
    );
}

#[test]
fn user_del_and_list_parse() {
    assert_eq!(
        user(&["user", "del", "alice"]),
        UserCommand::Del {
            name: "alice".to_string(),
            config: None
        }
    );
    let list = user(&["user", "list", "--config", "r.conf"]);
    assert_eq!(
        list,
        UserCommand::List {
            config: Some(PathBuf::from("r.conf"))
        }
    );
    assert_eq!(list.config(), Some(Path::new("r.conf")));
}

#[test]
fn user_commands_need_their_arguments() {
    assert_eq!(
        parse(&["user", "add"]).unwrap_err().kind(),
        ErrorKind::MissingRequiredArgument
    );
    assert!(parse(&["user"]).is_err());
    assert!(parse(&[]).is_err());
    assert!(parse(&["bench"]).is_err(), "there is no bench subcommand");
}

#[test]
fn user_commands_use_the_passwd_file_named_by_the_config() {
    let dir = std::env::temp_dir().join(format!("ringshare-cli-args-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("r.conf");
    std::fs::write(&conf, "[global]\nsmb passwd file = pw/smbpasswd\n").unwrap();
    let cmd = user(&["user", "list", "--config", conf.to_str().unwrap()]);
    let file = cmd.smb_passwd_file();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(file.unwrap(), dir.join("pw/smbpasswd"));
}

#[test]
fn serve_args_build_a_single_share_config_with_overrides() {
    let dir = std::env::temp_dir().join(format!("ringshare-cli-serve-{}", std::process::id()));
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let s = serve(&[
        "serve",
        data.to_str().unwrap(),
        "--share-name",
        "stuff",
        "--read-only",
        "--guest",
        "--listen",
        "127.0.0.1:4450",
        "--log-level",
        "5",
    ]);
    let cfg = s.to_config();
    let missing = serve(&["serve", dir.join("nope").to_str().unwrap()]).to_config();
    let _ = std::fs::remove_dir_all(&dir);
    let cfg = cfg.unwrap();
    assert_eq!(cfg.shares.len(), 1);
    assert_eq!(cfg.shares[0].name, "stuff");
    assert!(cfg.shares[0].read_only);
    assert!(cfg.shares[0].guest_ok);
    assert_eq!(cfg.global.map_to_guest, MapToGuest::BadUser);
    assert_eq!(
        cfg.global.listen,
        ["127.0.0.1:4450".parse::<SocketAddr>().unwrap()]
    );
    assert_eq!(cfg.global.log_level, 5);
    assert!(missing.is_err());
}
