//! `ringshare`: serve directories over SMB 2/3, manage users.

use std::io::{self, IsTerminal};
use std::process::ExitCode;

use ringshare::cli::{self, Command, UserCommand};
use ringshare::{serve, users};

fn init_logging(level: u32) {
    let default = match level {
        0 => "warn",
        1 => "info",
        2..=4 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("RINGSHARE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Under systemd, stderr is the journal: each line says its level (`<4>` for a warning).
    if ringshare::logging::stderr_is_journal() {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(io::stderr)
            .event_format(ringshare::logging::Journal)
            .init();
        return;
    }
    // Colours only for a terminal: a log file or the journal gets plain text.
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(io::stderr)
        .with_ansi(io::stderr().is_terminal())
        .with_target(false)
        .init();
}

fn main() -> ExitCode {
    let cli = cli::parse_args();
    match cli.command {
        Command::Bench(args) => {
            init_logging(0);
            let mut out = io::stdout();
            match ringshare::bench::run(args, &mut out) {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => {
                    eprintln!("ringshare bench: the run saw errors");
                    ExitCode::FAILURE
                }
                Err(e) => {
                    eprintln!("ringshare bench: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Limit(args) => match ringshare::limit::run(args, &mut io::stdout()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("ringshare limit: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Serve(args) => {
            let cfg = match args.to_config() {
                Ok(c) => c,
                Err(e) => {
                    ringshare::logging::fatal(format_args!("ringshare: {e}"));
                    return ExitCode::from(2);
                }
            };
            init_logging(cfg.global.log_level);
            raise_fd_limit();
            let mut out = io::stdout();
            match serve::serve(cfg, args.threads, &mut out) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    ringshare::logging::fatal(format_args!("ringshare: {e}"));
                    ExitCode::FAILURE
                }
            }
        }
        Command::User { command } => {
            init_logging(0);
            let file = match command.smb_passwd_file() {
                Ok(f) => f,
                Err(e) => {
                    eprintln!("ringshare: {e}");
                    return ExitCode::from(2);
                }
            };
            let mut out = io::stdout();
            let result = match &command {
                UserCommand::Add {
                    name,
                    password_stdin,
                    ..
                } => {
                    let stdin = io::stdin();
                    let mut locked = stdin.lock();
                    let source = if *password_stdin {
                        users::PasswordSource::Stdin(&mut locked)
                    } else if io::stdin().is_terminal() {
                        users::PasswordSource::Prompt
                    } else {
                        eprintln!(
                            "ringshare: standard input is not a terminal; use --password-stdin"
                        );
                        return ExitCode::from(2);
                    };
                    // A server run as root acts as each user's Unix account.
                    let needs_account = rustix::process::geteuid().is_root();
                    users::add_user(&file, name, source, needs_account, &mut out)
                }
                UserCommand::Del { name, .. } => users::del_user(&file, name, &mut out),
                UserCommand::List { .. } => users::list_users(&file, &mut out),
            };
            match result {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("ringshare: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// Every connection and open file is a descriptor: lift the soft limit to the
/// hard one (as Samba does), so a default soft limit of 1024 does not cap the
/// server far below its own per-session limits.
fn raise_fd_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut lim = getrlimit(Resource::Nofile);
    if lim.current < lim.maximum {
        lim.current = lim.maximum;
        if let Err(e) = setrlimit(Resource::Nofile, lim) {
            tracing::warn!("cannot raise the open-file limit: {e}");
        }
    }
    let now = getrlimit(Resource::Nofile).current;
    tracing::info!(
        "open-file limit: {}",
        now.map_or_else(|| "unlimited".to_string(), |n| n.to_string())
    );
}
