//! The command line: `ringshare serve`, `ringshare user add|del|list|import`, `ringshare testparm`.
//!
//! This module only parses; what the commands do lives elsewhere. [`Cli`] implements
//! [`clap::Parser`], so `Cli::try_parse_from` and `Cli::parse` both check the rule clap cannot
//! express with the message we want: `serve` needs a directory or `--config FILE`, not both.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::error::ErrorKind;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::config::{self, Config, ConfigError, MapToGuest, SHARE_NAME_LEN_MAX};

/// The parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cli {
    /// What to do.
    pub command: Command,
}

/// Parses the process arguments; prints help or an error and exits on bad input.
pub fn parse_args() -> Cli {
    Cli::parse()
}

/// The clap-derived shape of the command line; [`Cli`] adds the checks on top.
#[derive(Parser, Debug)]
#[command(
    name = "ringshare",
    version,
    about = "An SMB 2/3 file server for Linux on io_uring",
    propagate_version = true
)]
struct RawCli {
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Share a directory, or the shares of a configuration file.
    Serve(ServeArgs),
    /// Manage the users of the smbpasswd file.
    User {
        /// What to do with users.
        #[command(subcommand)]
        command: UserCommand,
    },
    /// Check a configuration: print what ringshare ignores or refuses, and the effective
    /// settings with their defaults. FILE defaults to /etc/ringshare/smb.conf if it exists,
    /// else /etc/samba/smb.conf.
    Testparm {
        /// The smb.conf-style file to check.
        #[arg(value_name = "FILE")]
        file: Option<PathBuf>,
    },
    /// Measure an SMB server: //HOST[:PORT]/SHARE -U USER%PASS [WORKLOAD] [options].
    Bench(crate::bench::BenchArgs),
    /// Show the running server's connections, sessions, open files and locks.
    Status(StatusArgs),
    /// Make the running server read its configuration and users again.
    Reload(ControlTarget),
    /// Which cluster node is the home of each file (decides its share modes, leases
    /// and locks), as etcd has it now.
    ClusterHome {
        /// The configuration of a cluster node.
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// Files on the cluster file system.
        #[arg(value_name = "PATH", required = true)]
        paths: Vec<PathBuf>,
    },
    /// Drain a cluster node (its clients are told by Witness to move to another node) or
    /// undrain it; list the nodes with their protocol levels.
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// Measure the plain file-to-socket sender (the floor for a file server's CPU per GiB).
    #[command(hide = true)]
    Limit(crate::limit::LimitArgs),
}

/// `ringshare cluster drain|undrain NODE --config FILE`
#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum ClusterCommand {
    /// Mark node NODE drained in etcd: every node's Witness service sends its registered
    /// clients CLIENT_MOVE to a live node, and stops offering it as available. It keeps
    /// serving the clients it has.
    Drain {
        /// The configuration of a cluster node.
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// The node's number (`cluster node`).
        #[arg(value_name = "NODE")]
        node: u16,
    },
    /// Undo `drain`.
    Undrain {
        /// The configuration of a cluster node.
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// The node's number (`cluster node`).
        #[arg(value_name = "NODE")]
        node: u16,
    },
    /// The live nodes with the protocol level each speaks, and the cluster's level (the
    /// lowest), as etcd has them now.
    Nodes {
        /// The configuration of a cluster node.
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
    },
}

/// `ringshare serve [PATH] [--config FILE] ...`
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct ServeArgs {
    /// The directory to share (a single share named after it).
    #[arg(value_name = "PATH", conflicts_with = "config")]
    pub path: Option<PathBuf>,

    /// An smb.conf-style configuration file.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Address to listen on; repeat for several. Overrides the configuration's `listen`.
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Vec<SocketAddr>,

    /// Let clients in without a password (guest access), mapping unknown users to the guest.
    #[arg(long, conflicts_with = "config")]
    pub guest: bool,

    /// Name of the share (default: the directory's name).
    #[arg(long, value_name = "NAME", value_parser = parse_share_name, conflicts_with = "config")]
    pub share_name: Option<String>,

    /// Share the directory read-only.
    #[arg(long, conflicts_with = "config")]
    pub read_only: bool,

    /// Number of I/O threads (default: one per CPU).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,

    /// Pin I/O thread N to CPU N (`pin cpus = yes` in the configuration).
    #[arg(long)]
    pub pin_cpus: bool,

    /// Log level, 0 (errors) to 10 (everything). Overrides the configuration's `log level`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=10))]
    pub log_level: Option<u32>,
}

/// Where `serve` takes its shares from.
/// Which running server `status` and `reload` ask: the one whose control
/// socket is `--socket`, or the one `--config FILE` sets up, or the default.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct ControlTarget {
    /// The server's control socket.
    #[arg(long, value_name = "PATH", conflicts_with = "config")]
    pub socket: Option<PathBuf>,
    /// The configuration the server runs with (its `control socket`).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

impl ControlTarget {
    /// The socket to ask; `None` when the configuration turns it off.
    pub fn socket(&self) -> Result<Option<PathBuf>, ConfigError> {
        if let Some(s) = &self.socket {
            return Ok(Some(s.clone()));
        }
        match &self.config {
            Some(file) => Ok(config::load(file)?.global.control_socket),
            None => Ok(Some(PathBuf::from(config::DEFAULT_CONTROL_SOCKET))),
        }
    }
}

#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct StatusArgs {
    /// Print JSON for scripts.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub target: ControlTarget,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServeSource<'a> {
    /// `ringshare serve PATH`.
    Dir(&'a Path),
    /// `ringshare serve --config FILE`.
    ConfigFile(&'a Path),
}

impl ServeArgs {
    /// The directory or the configuration file; exactly one is present once parsing succeeded.
    pub fn source(&self) -> ServeSource<'_> {
        match (&self.path, &self.config) {
            (_, Some(file)) => ServeSource::ConfigFile(file),
            (Some(dir), None) => ServeSource::Dir(dir),
            // Parsing refuses this; an empty path then fails loudly when it is used.
            (None, None) => ServeSource::Dir(Path::new("")),
        }
    }

    /// The configuration these arguments describe: the file given with `--config`, or a single
    /// share of PATH shaped by `--share-name`, `--read-only` and `--guest`; then `--listen` and
    /// `--log-level` override what the file says.
    ///
    /// For PATH, the directory must exist. `--guest` makes the share `guest ok` and sets
    /// `map to guest = bad user`, so that clients that send any user name get in.
    pub fn to_config(&self) -> Result<Config, ConfigError> {
        let mut cfg = match self.source() {
            ServeSource::ConfigFile(file) => config::load(file)?,
            ServeSource::Dir(dir) => {
                let fail = |message: String| ConfigError {
                    file: dir.to_path_buf(),
                    line: 0,
                    message,
                };
                match std::fs::metadata(dir) {
                    Ok(m) if m.is_dir() => {}
                    Ok(_) => return Err(fail("not a directory".to_string())),
                    Err(e) => return Err(fail(format!("cannot share this directory: {e}"))),
                }
                let mut cfg = Config::single_share(dir);
                if let Some(share) = cfg.shares.first_mut() {
                    if let Some(name) = &self.share_name {
                        share.name = name.clone();
                    }
                    share.read_only = self.read_only;
                    share.guest_ok = self.guest;
                }
                if self.guest {
                    cfg.global.map_to_guest = MapToGuest::BadUser;
                }
                cfg
            }
        };
        if !self.listen.is_empty() {
            cfg.global.listen = self.listen.clone();
        }
        if let Some(level) = self.log_level {
            cfg.global.log_level = level;
        }
        if self.pin_cpus {
            cfg.global.pin_cpus = crate::config::PinCpus::Yes;
        }
        Ok(cfg)
    }
}

/// `ringshare user ...`
#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum UserCommand {
    /// Add a user, or set the password of an existing one.
    Add {
        /// The user name.
        name: String,
        /// Read the password twice (password, then confirmation) from standard input.
        #[arg(long)]
        password_stdin: bool,
        /// Configuration file naming the `smb passwd file`.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Delete a user.
    Del {
        /// The user name.
        name: String,
        /// Configuration file naming the `smb passwd file`.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// List the users.
    List {
        /// Configuration file naming the `smb passwd file`.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Add or replace users, with their passwords, from Samba's `pdbedit -L -w` output.
    Import {
        /// The listing (smbpasswd format); `-` reads standard input.
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// Configuration file naming the `smb passwd file`.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
}

impl UserCommand {
    /// The `--config` given to this command, if any.
    pub fn config(&self) -> Option<&Path> {
        match self {
            UserCommand::Add { config, .. }
            | UserCommand::Del { config, .. }
            | UserCommand::List { config }
            | UserCommand::Import { config, .. } => config.as_deref(),
        }
    }

    /// The smbpasswd file this command works on: the configuration's `smb passwd file` when
    /// `--config` is given, otherwise [`config::default_smb_passwd_file`].
    /// The realm of the built-in KDC ([`config::Global::local_realm`]) for this command's
    /// configuration: users' AES keys are salted with it.
    pub fn local_realm(&self) -> Result<String, ConfigError> {
        match self.config() {
            Some(file) => Ok(config::load(file)?.global.local_realm()),
            None => Ok(config::Global::default().local_realm()),
        }
    }

    pub fn smb_passwd_file(&self) -> Result<PathBuf, ConfigError> {
        match self.config() {
            Some(file) => Ok(config::load(file)?.global.smb_passwd_file),
            None => Ok(config::default_smb_passwd_file()),
        }
    }
}

fn parse_share_name(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Err("the share name is empty".to_string());
    }
    if s.chars().count() > SHARE_NAME_LEN_MAX {
        return Err(format!("longer than {SHARE_NAME_LEN_MAX} characters"));
    }
    if let Some(bad) = s
        .chars()
        .find(|c| c.is_control() || "\\/:*?\"<>|[]".contains(*c))
    {
        return Err(format!(
            "contains {bad:?}, which SMB forbids in share names"
        ));
    }
    if s.eq_ignore_ascii_case("ipc$") {
        return Err("IPC$ is reserved".to_string());
    }
    Ok(s.to_string())
}

impl Cli {
    fn check(raw: RawCli) -> Result<Cli, clap::Error> {
        if let Command::Serve(args) = &raw.command {
            if args.path.is_none() && args.config.is_none() {
                let mut cmd = RawCli::command();
                let serve = cmd
                    .find_subcommand_mut("serve")
                    .map(|c| c.clone().bin_name("ringshare serve"));
                let mut target = serve.unwrap_or(cmd);
                return Err(target.error(
                    ErrorKind::MissingRequiredArgument,
                    "give a directory to share or --config FILE",
                ));
            }
        }
        Ok(Cli {
            command: raw.command,
        })
    }
}

impl FromArgMatches for Cli {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        Cli::check(RawCli::from_arg_matches(matches)?)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        let mut raw = RawCli {
            command: self.command.clone(),
        };
        raw.update_from_arg_matches(matches)?;
        *self = Cli::check(raw)?;
        Ok(())
    }
}

impl CommandFactory for Cli {
    fn command() -> clap::Command {
        RawCli::command()
    }

    fn command_for_update() -> clap::Command {
        RawCli::command_for_update()
    }
}

impl Parser for Cli {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn share_names_with_forbidden_characters_are_refused() {
        assert!(parse_share_name("ok-name_1").is_ok());
        assert!(parse_share_name("a/b").is_err());
        assert!(parse_share_name("IPC$").is_err());
        assert!(parse_share_name("").is_err());
        assert!(parse_share_name(&"x".repeat(81)).is_err());
    }
}
