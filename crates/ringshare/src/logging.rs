//! Log lines for the systemd journal: when standard error is the journal's stream, each line
//! starts with its syslog priority (`<3>` error, `<4>` warning, `<6>` info, `<7>` debug and
//! trace: sd-daemon(3)'s `SD_ERR`...), which journald takes as the entry's level and strips.
//! The journal keeps its own timestamps, so none is written.

use std::fmt;
use std::os::fd::AsFd;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Whether standard error is connected to the journal: systemd then sets `JOURNAL_STREAM` to
/// the `DEVICE:INODE` of that stream. A mere variable is not enough (a program started from a
/// service inherits it with its standard error sent elsewhere): it must name our stderr.
pub fn stderr_is_journal() -> bool {
    let Some(value) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Some(named) = value.to_str().and_then(parse_journal_stream) else {
        return false;
    };
    match rustix::fs::fstat(std::io::stderr().as_fd()) {
        Ok(st) => named == (st.st_dev, st.st_ino),
        Err(_) => false,
    }
}

/// Prints the error that ends the process on stderr: under the journal as an error
/// (`<3>`), else as it is.
pub fn fatal(message: impl fmt::Display) {
    if stderr_is_journal() {
        eprintln!("<3>{message}");
    } else {
        eprintln!("{message}");
    }
}

/// `DEVICE:INODE`, both decimal.
fn parse_journal_stream(value: &str) -> Option<(u64, u64)> {
    let (dev, ino) = value.split_once(':')?;
    Some((dev.parse().ok()?, ino.parse().ok()?))
}

/// The syslog priority of a level, as journald reads it from a `<N>` prefix.
pub fn syslog_priority(level: Level) -> u8 {
    match level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        Level::DEBUG | Level::TRACE => 7,
    }
}

/// A line per event, `<PRIORITY>LEVEL message fields`, for the journal.
pub struct Journal;

impl<S, N> FormatEvent<S, N> for Journal
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let level = *event.metadata().level();
        write!(writer, "<{}>{level} ", syslog_priority(level))?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_stream_is_device_and_inode_in_decimal() {
        assert_eq!(parse_journal_stream("8:123456"), Some((8, 123456)));
        assert_eq!(parse_journal_stream("8"), None);
        assert_eq!(parse_journal_stream("x:1"), None);
        assert_eq!(parse_journal_stream("1:"), None);
    }

    #[test]
    fn levels_map_to_the_syslog_priorities_of_sd_daemon() {
        assert_eq!(syslog_priority(Level::ERROR), 3);
        assert_eq!(syslog_priority(Level::WARN), 4);
        assert_eq!(syslog_priority(Level::INFO), 6);
        assert_eq!(syslog_priority(Level::DEBUG), 7);
        assert_eq!(syslog_priority(Level::TRACE), 7);
    }
}
