//! Previous Versions as Samba's `vfs_shadow_copy2` offers them: a share's
//! snapshots, directories of its snapshot directory named after their time
//! (`shadow:format`), shown to clients as `@GMT-…` tokens
//! ([`ringshare_wire::snapshot`]). This module holds a share's settings and
//! the mapping between snapshot directory names and tokens; the commands use
//! it (FSCTL_SRV_ENUMERATE_SNAPSHOTS in cmd/ioctl.rs, a CREATE of a snapshot's
//! file in cmd/create/snapshot.rs).

use ringshare_vfs::RelPath;
use ringshare_wire::snapshot::GmtToken;

mod bre;
mod nearest;

pub use nearest::{list_dir, NearestSnapshot};

/// The order snapshots are listed in (`shadow:sort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapSort {
    /// Newest first (`desc`, Samba's default).
    Desc,
    /// Oldest first (`asc`).
    Asc,
    /// As the directory lists them (any other value).
    Unsorted,
}

/// One piece of a `shadow:format`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    /// A field of the time: its offset in the `@GMT-YYYY.MM.DD-HH.MM.SS`
    /// token and its width.
    Field(usize, usize),
}

/// A `shadow:format`: strftime's `%Y`, `%m`, `%d` and any of `%H`, `%M`, `%S`
/// (each at most once) and `%%`, with literal text around them; names are
/// read back with each field at its full width (as strftime writes them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapFormat {
    written: String,
    parts: Vec<Part>,
}

/// Samba's default `shadow:format`.
pub(crate) const DEFAULT_FORMAT: &str = "@GMT-%Y.%m.%d-%H.%M.%S";

impl SnapFormat {
    /// Parses a format; the error says what is wrong with it.
    pub fn parse(format: &str) -> Result<SnapFormat, String> {
        let mut parts = Vec::new();
        let mut text = String::new();
        let mut seen = Vec::new();
        let mut chars = format.chars();
        while let Some(c) = chars.next() {
            if c != '%' {
                text.push(c);
                continue;
            }
            let field = match chars.next() {
                Some('%') => {
                    text.push('%');
                    continue;
                }
                Some('Y') => (5, 4),
                Some('m') => (10, 2),
                Some('d') => (13, 2),
                Some('H') => (16, 2),
                Some('M') => (19, 2),
                Some('S') => (22, 2),
                Some(o) => {
                    return Err(format!(
                        "'%{o}' is not supported (only %Y %m %d %H %M %S and %%)"
                    ))
                }
                None => return Err("ends with a lone '%'".to_string()),
            };
            if seen.contains(&field) {
                return Err("names a field twice".to_string());
            }
            seen.push(field);
            if !text.is_empty() {
                parts.push(Part::Text(std::mem::take(&mut text)));
            }
            parts.push(Part::Field(field.0, field.1));
        }
        if !text.is_empty() {
            parts.push(Part::Text(text));
        }
        // As strptime leaves them, the fields a format does not name are 0 (a daily snapshot's
        // `%Y-%m-%d`, zfs-auto-snapshot's `%Y-%m-%d-%H%M`); the date is always needed.
        if [(5, 4), (10, 2), (13, 2)].iter().any(|f| !seen.contains(f)) {
            return Err("needs each of %Y %m %d".to_string());
        }
        if parts
            .iter()
            .any(|p| matches!(p, Part::Text(t) if t.contains('/')))
        {
            return Err("names one directory: it cannot hold '/'".to_string());
        }
        Ok(SnapFormat {
            written: format.to_string(),
            parts,
        })
    }

    /// The format as configured.
    pub fn as_str(&self) -> &str {
        &self.written
    }

    /// The directory name of the snapshot taken at `t` (a UTC time), or None when no name
    /// of this format reads back as `t` (a time with seconds, for a format without `%S`).
    pub fn name_of(&self, t: GmtToken) -> Option<String> {
        let token = t.to_string();
        let mut out = String::new();
        for p in &self.parts {
            match p {
                Part::Text(s) => out.push_str(s),
                Part::Field(at, len) => out.push_str(&token[*at..*at + len]),
            }
        }
        (self.time_of(&out) == Some(t)).then_some(out)
    }

    /// The time a snapshot directory's name gives, or None when the name
    /// does not have the format.
    pub fn time_of(&self, name: &str) -> Option<GmtToken> {
        let mut token = *b"@GMT-0000.00.00-00.00.00";
        let mut rest = name.as_bytes();
        for p in &self.parts {
            match p {
                Part::Text(s) => rest = rest.strip_prefix(s.as_bytes())?,
                Part::Field(at, len) => {
                    let digits = rest.get(..*len)?;
                    if !digits.iter().all(u8::is_ascii_digit) {
                        return None;
                    }
                    token[*at..*at + len].copy_from_slice(digits);
                    rest = &rest[*len..];
                }
            }
        }
        if !rest.is_empty() {
            return None;
        }
        GmtToken::parse(std::str::from_utf8(&token).ok()?)
    }
}

/// A share's `vfs objects = shadow_copy2` settings, as ringshare applies
/// them: the snapshots are the directories of `snapdir`, a directory of the
/// share, or of [`SnapBase`]'s directory outside it (docs/limits.md says which
/// of Samba's layouts that covers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShadowCopy {
    /// `shadow:snapdir` (default `.snapshots`), relative to the share's root.
    pub snapdir: RelPath,
    /// `shadow:format`.
    pub format: SnapFormat,
    /// `shadow:sort`.
    pub sort: SnapSort,
    /// `shadow:snapdirseverywhere`: any directory of the share may hold a
    /// snapshot directory; a path is found in the nearest one's snapshot
    /// ([`NearestSnapshot`]), from the path up to the share's root.
    pub everywhere: bool,
    /// `shadow:snapprefix`: a snapshot's name is this prefix (a POSIX basic regular
    /// expression, as Samba reads it), then `delimiter`, where the format starts.
    pub prefix: Option<SnapPrefix>,
    /// `shadow:delimiter` (default `_GMT`): where, in a name with a prefix, the time begins.
    pub delimiter: String,
    /// `shadow:localtime`: names give the time in this zone (the server's), not UTC.
    pub localtime: Option<LocalZone>,
    /// The snapshots lie outside the share (an absolute `shadow:snapdir`, a mount point or
    /// `shadow:basedir` above the share's root, `shadow:snapsharepath`): set by the server
    /// with the directory opened. None: `snapdir` is a directory of the share.
    pub base: Option<SnapBase>,
    /// `shadow:snapdirseverywhere`: the snapshot directories found at start in the directories
    /// above the share's root, nearest first, up to the file system's mount point (or `/` with
    /// `shadow:crossmountpoints`), each an image of its directory (the share at `within`);
    /// looked at after the share's own directories. Opened by the server.
    pub outer: Vec<SnapBase>,
    /// `shadow:crossmountpoints`: `outer` went on past the file system's mount point.
    pub crossmountpoints: bool,
}

impl Default for ShadowCopy {
    fn default() -> ShadowCopy {
        ShadowCopy {
            snapdir: RelPath::from_components([".snapshots"]).unwrap_or_default(),
            format: SnapFormat::parse(DEFAULT_FORMAT).unwrap_or(SnapFormat {
                written: String::new(),
                parts: Vec::new(),
            }),
            sort: SnapSort::Desc,
            everywhere: false,
            prefix: None,
            delimiter: DEFAULT_DELIMITER.to_string(),
            localtime: None,
            base: None,
            outer: Vec::new(),
            crossmountpoints: false,
        }
    }
}

/// Samba's default `shadow:delimiter`.
pub const DEFAULT_DELIMITER: &str = "_GMT";

/// A `shadow:snapprefix`, compiled (compared by what was configured).
#[derive(Debug, Clone)]
pub struct SnapPrefix {
    written: String,
    re: regex_lite::Regex,
}

impl SnapPrefix {
    /// Compiles a POSIX basic regular expression (Samba's `regcomp` without flags: `\(…\)`
    /// groups, `\{m,n\}` bounds, GNU's `\|`, `\+`, `\?`; `(`, `{`, `|`, `+`, `?` are plain
    /// characters); the error says what is wrong.
    pub fn parse(bre: &str) -> Result<SnapPrefix, String> {
        let re = regex_lite::Regex::new(&bre::to_regex(bre)?).map_err(|e| e.to_string())?;
        Ok(SnapPrefix {
            written: bre.to_string(),
            re,
        })
    }

    /// The expression as configured.
    pub fn as_str(&self) -> &str {
        &self.written
    }
}

impl PartialEq for SnapPrefix {
    fn eq(&self, other: &SnapPrefix) -> bool {
        self.written == other.written
    }
}

impl Eq for SnapPrefix {}

/// The zone snapshot names are written in (`shadow:localtime`): the server's, read once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalZone(pub jiff::tz::TimeZone);

impl LocalZone {
    /// The UTC time of `t` read as a time of this zone (what mktime does with tm_isdst
    /// unknown: a time a clock change skips or repeats is taken as before the change).
    fn to_utc(&self, t: GmtToken) -> Option<GmtToken> {
        let at = jiff::Timestamp::from_second(t.unix_secs).ok()?;
        let civil = jiff::tz::TimeZone::UTC.to_datetime(at);
        let zoned = civil.to_zoned_datetime(self.0.clone()).ok()?;
        Some(GmtToken {
            unix_secs: zoned.timestamp().as_second(),
        })
    }
}

/// Where the snapshots are when they are not in the share: `dir` holds one directory per
/// snapshot, and the share's root is `within` each of them.
#[derive(Clone)]
pub struct SnapBase {
    /// The snapshot directory, as configured or found (for logs and testparm).
    pub dir: std::path::PathBuf,
    /// The share's root inside each snapshot (empty: the snapshot's root).
    pub within: RelPath,
    /// The snapshot directory opened as a read-only share of its own (each snapshot's view
    /// is found beneath it as the user), None until the server opens it.
    pub opened: Option<std::sync::Arc<dyn ringshare_vfs::Share>>,
}

impl std::fmt::Debug for SnapBase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapBase")
            .field("dir", &self.dir)
            .field("within", &self.within)
            .field("opened", &self.opened.is_some())
            .finish()
    }
}

impl PartialEq for SnapBase {
    fn eq(&self, other: &SnapBase) -> bool {
        self.dir == other.dir && self.within == other.within
    }
}

impl Eq for SnapBase {}

impl ShadowCopy {
    /// The time a snapshot directory's name gives (UTC), or None when the name is not a
    /// snapshot's: with a prefix, the part before the first `delimiter` must match it and
    /// the format reads the rest from the delimiter on, as Samba's shadow_copy2 does.
    pub fn time_of(&self, name: &str) -> Option<GmtToken> {
        let timed = match &self.prefix {
            Some(p) => {
                let at = name.find(self.delimiter.as_str())?;
                if !p.re.is_match(&name[..at]) {
                    return None;
                }
                &name[at..]
            }
            None => name,
        };
        let t = self.format.time_of(timed)?;
        match &self.localtime {
            Some(zone) => zone.to_utc(t),
            None => Some(t),
        }
    }

    /// The snapshots among the snapshot directory's entry `names` (those
    /// the format reads a time from), in `shadow:sort`'s order.
    pub fn snapshots<I: IntoIterator<Item = String>>(&self, names: I) -> Vec<GmtToken> {
        let mut found: Vec<GmtToken> = names.into_iter().filter_map(|n| self.time_of(&n)).collect();
        match self.sort {
            SnapSort::Desc => found.sort_by(|a, b| b.cmp(a)),
            SnapSort::Asc => found.sort(),
            SnapSort::Unsorted => {}
        }
        found
    }

    /// Whether the directory of a snapshot is found by listing the snapshot directory: its
    /// name is not made from the time alone (a prefix, a local time).
    pub fn found_by_listing(&self) -> bool {
        self.prefix.is_some() || self.localtime.is_some()
    }

    /// The name of the snapshot taken at `t`: made from the format, or, when
    /// [`Self::found_by_listing`], the first of `names` (the snapshot directory's
    /// entries, asked only then) that reads as `t`.
    pub fn name_of<I: IntoIterator<Item = String>>(
        &self,
        t: GmtToken,
        names: impl FnOnce() -> Option<I>,
    ) -> Option<String> {
        if !self.found_by_listing() {
            return self.format.name_of(t);
        }
        names()?.into_iter().find(|n| self.time_of(n) == Some(t))
    }

    /// Where the view of the snapshot named `name` is rooted: beneath the share's root
    /// (`snapdir/name`), or beneath [`SnapBase`]'s directory (`name/within`).
    pub fn snapshot_dir(&self, name: &str) -> Option<RelPath> {
        match &self.base {
            Some(b) => RelPath::from_components(
                std::iter::once(name).chain(b.within.components().iter().map(String::as_str)),
            )
            .ok(),
            None => self.snapdir.join(name).ok(),
        }
    }
}

/// Takes the snapshot token out of a CREATE's name, as Samba does: the
/// first path component that is an `@GMT-…` token names the snapshot and is
/// removed (`@GMT-…\dir\file` is `dir\file` in that snapshot). None when no
/// component is one.
pub fn split_token(name: &str) -> Option<(GmtToken, String)> {
    let sep = |c: char| c == '\\' || c == '/';
    let mut start = 0;
    for comp in name.split(sep) {
        let end = start + comp.len();
        if comp.starts_with("@GMT-") {
            let token = GmtToken::parse(comp)?;
            let rest = name.get(end + 1..).unwrap_or("");
            let mut out = name[..start].to_string();
            if rest.is_empty() {
                // `dir\@GMT-…` is `dir`.
                while out.ends_with(sep) {
                    out.pop();
                }
            }
            out.push_str(rest);
            return Some((token, out));
        }
        start = end + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tok(s: &str) -> GmtToken {
        GmtToken::parse(s).unwrap()
    }

    #[test]
    fn the_default_format_names_a_snapshot_by_its_token() {
        let f = SnapFormat::parse(DEFAULT_FORMAT).unwrap();
        let t = tok("@GMT-2026.11.01-10.00.00");
        assert_eq!(f.name_of(t).as_deref(), Some("@GMT-2026.11.01-10.00.00"));
        assert_eq!(f.time_of("@GMT-2026.11.01-10.00.00"), Some(t));
    }

    #[test]
    fn a_format_of_our_own_reads_back_the_time_it_writes() {
        let f = SnapFormat::parse("daily_%Y-%m-%d_%H%M%S%%").unwrap();
        let t = tok("@GMT-2026.02.28-23.05.09");
        assert_eq!(f.name_of(t).as_deref(), Some("daily_2026-02-28_230509%"));
        assert_eq!(f.time_of("daily_2026-02-28_230509%"), Some(t));
        for other in [
            "daily_2026-02-28_230509",
            "daily_2026-02-28_230509%x",
            "weekly_2026-02-28_230509%",
            "daily_2026-02-30_230509%",
            "daily_2026-2-28_230509%",
        ] {
            assert_eq!(f.time_of(other), None, "{other}");
        }
    }

    #[test]
    fn a_format_without_a_date_or_with_other_conversions_is_refused() {
        for bad in [
            "%H.%M.%S",
            "%Y.%m-%H.%M.%S",
            "@GMT-%Y.%m.%d-%H.%M.%S.%Y",
            "%s",
            "%Y.%m.%d-%H.%M.%S-%Z",
            "%Y/%m.%d-%H.%M.%S",
            "%Y.%m.%d-%H.%M.%S%",
        ] {
            assert!(SnapFormat::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn snapshots_are_listed_newest_first_unless_sort_says_otherwise() {
        let names = || {
            [
                "@GMT-2026.11.01-10.00.00",
                "not-a-snapshot",
                "@GMT-2026.11.03-10.00.00",
                "@GMT-2026.11.02-10.00.00",
            ]
            .map(String::from)
        };
        let mut s = ShadowCopy::default();
        let days = |v: Vec<GmtToken>| {
            v.iter()
                .map(|t| t.to_string()[13..15].to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(days(s.snapshots(names())), ["03", "02", "01"]);
        s.sort = SnapSort::Asc;
        assert_eq!(days(s.snapshots(names())), ["01", "02", "03"]);
        s.sort = SnapSort::Unsorted;
        assert_eq!(days(s.snapshots(names())), ["01", "03", "02"]);
    }

    #[test]
    fn the_token_is_taken_out_of_the_name_wherever_it_is_a_component() {
        let t = tok("@GMT-2026.11.01-10.00.00");
        let cases = [
            ("@GMT-2026.11.01-10.00.00", ""),
            ("@GMT-2026.11.01-10.00.00\\a\\b.txt", "a\\b.txt"),
            ("a\\@GMT-2026.11.01-10.00.00\\b.txt", "a\\b.txt"),
            ("a\\@GMT-2026.11.01-10.00.00", "a"),
            ("@GMT-2026.11.01-10.00.00\\..\\..\\etc", "..\\..\\etc"),
        ];
        for (name, rest) in cases {
            assert_eq!(split_token(name), Some((t, rest.to_string())), "{name}");
        }
        for none in [
            "a\\b",
            "x@GMT-2026.11.01-10.00.00\\b",
            "@GMT-2026.11.01-10.00.00x\\b",
            "@GMT-2026.13.01-10.00.00\\b",
        ] {
            assert_eq!(split_token(none), None, "{none}");
        }
    }

    #[test]
    fn a_snapshot_lives_in_the_snapshot_directory_under_its_formatted_name() {
        let s = ShadowCopy::default();
        let t = tok("@GMT-2026.11.01-10.00.00");
        let name = s.name_of(t, || None::<Vec<String>>).unwrap();
        let dir = s.snapshot_dir(&name).unwrap();
        assert_eq!(dir.to_slash_path(), ".snapshots/@GMT-2026.11.01-10.00.00");
    }

    #[test]
    fn a_format_without_hours_minutes_or_seconds_reads_them_as_zero() {
        let f = SnapFormat::parse("daily-%Y-%m-%d").unwrap();
        let t = tok("@GMT-2026.03.04-00.00.00");
        assert_eq!(f.time_of("daily-2026-03-04"), Some(t));
        assert_eq!(f.name_of(t).as_deref(), Some("daily-2026-03-04"));
        // No name of this format is that time.
        assert_eq!(f.name_of(tok("@GMT-2026.03.04-00.00.01")), None);
        let zfs = SnapFormat::parse("-%Y-%m-%d-%H%M").unwrap();
        assert_eq!(
            zfs.time_of("-2026-03-04-1315"),
            Some(tok("@GMT-2026.03.04-13.15.00"))
        );
    }

    fn zfs_auto_snapshot() -> ShadowCopy {
        ShadowCopy {
            prefix: Some(
                SnapPrefix::parse(r"^zfs-auto-snap_\(hourly\)\{0,1\}\(daily\)\{0,1\}").unwrap(),
            ),
            delimiter: "-20".to_string(),
            format: SnapFormat::parse("-%Y-%m-%d-%H%M").unwrap(),
            ..ShadowCopy::default()
        }
    }

    #[test]
    fn a_name_with_a_prefix_is_a_snapshot_when_the_prefix_matches_before_the_delimiter() {
        let s = zfs_auto_snapshot();
        let t = tok("@GMT-2026.03.04-13.15.00");
        assert_eq!(s.time_of("zfs-auto-snap_hourly-2026-03-04-1315"), Some(t));
        assert_eq!(s.time_of("zfs-auto-snap_daily-2026-03-04-1315"), Some(t));
        // The expression need only match somewhere (regexec): unanchored at its end, this
        // one matches `zfs-auto-snap_weekly` too, as on Samba.
        assert_eq!(s.time_of("zfs-auto-snap_weekly-2026-03-04-1315"), Some(t));
        for not in [
            "manual-2026-03-04-1315",
            "zfs-auto-snap_hourly",
            "zfs-auto-snap_hourly-2026-03-04-13",
        ] {
            assert_eq!(s.time_of(not), None, "{not}");
        }
        assert!(s.found_by_listing());
        let names = || {
            Some(
                [
                    "zfs-auto-snap_daily-2026-03-03-0000",
                    "zfs-auto-snap_hourly-2026-03-04-1315",
                ]
                .map(String::from),
            )
        };
        assert_eq!(
            s.name_of(t, names).as_deref(),
            Some("zfs-auto-snap_hourly-2026-03-04-1315")
        );
        assert_eq!(s.name_of(tok("@GMT-2026.03.05-00.00.00"), names), None);
    }

    #[test]
    fn names_in_local_time_are_turned_into_utc_tokens() {
        let berlin = jiff::tz::TimeZone::posix("CET-1CEST,M3.5.0,M10.5.0/3").unwrap();
        let s = ShadowCopy {
            localtime: Some(LocalZone(berlin)),
            ..ShadowCopy::default()
        };
        // Winter: UTC+1; summer: UTC+2.
        assert_eq!(
            s.time_of("@GMT-2026.01.15-12.00.00"),
            Some(tok("@GMT-2026.01.15-11.00.00"))
        );
        assert_eq!(
            s.time_of("@GMT-2026.07.15-12.00.00"),
            Some(tok("@GMT-2026.07.15-10.00.00"))
        );
        let names = || Some(["@GMT-2026.07.15-12.00.00".to_string()]);
        assert_eq!(
            s.name_of(tok("@GMT-2026.07.15-10.00.00"), names).as_deref(),
            Some("@GMT-2026.07.15-12.00.00")
        );
    }

    #[test]
    fn a_snapshot_outside_the_share_holds_the_share_below_its_root() {
        let s = ShadowCopy {
            base: Some(SnapBase {
                dir: "/tank/.zfs/snapshot".into(),
                within: RelPath::from_strs(&["projects", "share"]).unwrap(),
                opened: None,
            }),
            ..ShadowCopy::default()
        };
        let dir = s.snapshot_dir("@GMT-2026.11.01-10.00.00").unwrap();
        assert_eq!(
            dir.to_slash_path(),
            "@GMT-2026.11.01-10.00.00/projects/share"
        );
        assert_eq!(s.snapshot_dir(".."), None);
    }
}
