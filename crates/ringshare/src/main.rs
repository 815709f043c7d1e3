//! `ringshare`: serve directories over SMB 2/3, manage users.

use std::io::{self, IsTerminal};
use std::process::ExitCode;

use ringshare::cli::{self, ClusterCommand, Command, UserCommand};
use ringshare::testparm::TestparmError;
use ringshare::{serve, users};

/// What `log level` N shows (Samba's meaning: 0 errors and warnings, 1
/// notable events, 2 to 4 more detail, 5 and up everything).
fn level_filter(level: u32) -> &'static str {
    match level {
        0 => "warn",
        1 => "info",
        2..=4 => "debug",
        _ => "trace",
    }
}

/// Log to stderr at `level`; the returned function changes the level while
/// the process runs (a reload). `RINGSHARE_LOG` (a tracing filter), when
/// set, wins over both. Under systemd, stderr is the journal: each line
/// then says its level (`<4>` for a warning).
fn init_logging(level: u32) -> Box<dyn Fn(u32) + Send + Sync> {
    use tracing_subscriber::prelude::*;
    use tracing_subscriber::{fmt, reload, EnvFilter};
    let from_env = EnvFilter::try_from_env("RINGSHARE_LOG").ok();
    let fixed = from_env.is_some();
    let filter = from_env.unwrap_or_else(|| EnvFilter::new(level_filter(level)));
    let (filter, handle) = reload::Layer::new(filter);
    let set: Box<dyn Fn(u32) + Send + Sync> = Box::new(move |level| {
        if !fixed {
            let _ = handle.reload(EnvFilter::new(level_filter(level)));
        }
    });
    if ringshare::logging::stderr_is_journal() {
        tracing_subscriber::registry()
            .with(filter)
            .with(
                fmt::layer()
                    .with_writer(ringshare::logwriter::OneLineStderr)
                    .event_format(ringshare::logging::Journal),
            )
            .init();
        return set;
    }
    // Colours only for a terminal: a log file gets plain text. One line per
    // event, whatever names it holds (logwriter.rs), in the journal too.
    tracing_subscriber::registry()
        .with(filter)
        .with(
            fmt::layer()
                .with_writer(ringshare::logwriter::OneLineStderr)
                .with_ansi(io::stderr().is_terminal())
                .with_target(false),
        )
        .init();
    set
}

fn main() -> ExitCode {
    let cli = cli::parse_args();
    match cli.command {
        Command::Bench(args) => {
            let _ = init_logging(0);
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
        Command::Status(args) => ask_server(
            &args.target,
            if args.json { "status json" } else { "status" },
        ),
        Command::Reload(args) => ask_server(&args, "reload"),
        Command::ClusterHome { config, paths } => {
            match ringshare::cluster::print_homes(&config, &paths, &mut io::stdout()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("ringshare cluster-home: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Cluster(c) => {
            let (config, node, on) = match c {
                ClusterCommand::Drain { config, node } => (config, node, true),
                ClusterCommand::Undrain { config, node } => (config, node, false),
                ClusterCommand::Nodes { config } => {
                    return match ringshare::cluster::print_nodes(&config, &mut io::stdout()) {
                        Ok(()) => ExitCode::SUCCESS,
                        Err(e) => {
                            eprintln!("ringshare cluster nodes: {e}");
                            ExitCode::FAILURE
                        }
                    };
                }
            };
            match ringshare::cluster::set_drained(&config, node, on) {
                Ok(()) => {
                    let what = if on { "drained" } else { "no longer drained" };
                    println!("ringshare cluster: node {node} is {what}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("ringshare cluster: {e}");
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
        Command::Testparm { file } => {
            let Some(file) = file.or_else(ringshare::testparm::default_config_file) else {
                eprintln!("ringshare testparm: {}", TestparmError::NoConfigFile);
                return ExitCode::from(2);
            };
            let (mut out, mut err) = (io::stdout(), io::stderr());
            match ringshare::testparm::run(&file, &mut out, &mut err) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("ringshare testparm: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Serve(args) => {
            let cfg = match args.to_config() {
                Ok(c) => c,
                Err(e) => {
                    ringshare::logging::fatal(format_args!("ringshare: {e}"));
                    return ExitCode::from(2);
                }
            };
            let set_log_level = init_logging(cfg.global.log_level);
            raise_fd_limit();
            let mut out = io::stdout();
            let hooks = serve::Hooks {
                set_log_level,
                fixed: ringshare::reload::Fixed {
                    listen: !args.listen.is_empty(),
                    log_level: args.log_level.is_some(),
                },
            };
            match serve::serve(cfg, args.threads, hooks, &mut out) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    ringshare::logging::fatal(format_args!("ringshare: {e}"));
                    ExitCode::FAILURE
                }
            }
        }
        Command::User { command } => {
            let _ = init_logging(0);
            let (file, realm) = match command
                .smb_passwd_file()
                .and_then(|f| Ok((f, command.local_realm()?)))
            {
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
                    users::add_user(&file, name, source, needs_account, &realm, &mut out)
                }
                UserCommand::Del { name, .. } => users::del_user(&file, name, &mut out),
                UserCommand::List { .. } => users::list_users(&file, &mut out),
                UserCommand::Import { file: listing, .. } => users::read_listing(
                    listing,
                    &mut io::stdin().lock(),
                )
                .and_then(|(source, text)| {
                    let needs_account = rustix::process::geteuid().is_root();
                    let mut warn = io::stderr();
                    users::import_users(&file, &source, &text, needs_account, &mut out, &mut warn)
                }),
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

/// Send `request` to the running server's control socket and print its answer.
fn ask_server(target: &cli::ControlTarget, request: &str) -> ExitCode {
    let socket = match target.socket() {
        Ok(Some(s)) => s,
        Ok(None) => {
            eprintln!(
                "ringshare: the configuration has `control socket = no`: there is nothing to ask"
            );
            return ExitCode::from(2);
        }
        Err(e) => {
            // The file names the socket; one that does not load is not asked
            // about (a server would refuse it the same way).
            eprintln!(
                "ringshare: {e}\nringshare: nothing was sent to the server; it runs on as it was"
            );
            return ExitCode::from(2);
        }
    };
    match ringshare::control::request(&socket, request) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ringshare: {e}");
            ExitCode::FAILURE
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
