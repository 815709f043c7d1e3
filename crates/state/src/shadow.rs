//! Previous Versions as Samba's `vfs_shadow_copy2` offers them: a share's
//! snapshots, directories of its snapshot directory named after their time
//! (`shadow:format`), shown to clients as `@GMT-…` tokens
//! ([`ringshare_wire::snapshot`]). This module holds a share's settings and
//! the mapping between snapshot directory names and tokens; the commands use
//! it (FSCTL_SRV_ENUMERATE_SNAPSHOTS in cmd/ioctl.rs, a CREATE of a snapshot's
//! file in cmd/create/snapshot.rs).

use ringshare_vfs::RelPath;
use ringshare_wire::snapshot::GmtToken;

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

/// A `shadow:format`: strftime's `%Y`, `%m`, `%d`, `%H`, `%M`, `%S` (each
/// once) and `%%`, with literal text around them; names are read back with
/// each field at its full width (as strftime writes them).
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
        if seen.len() != 6 {
            return Err("needs each of %Y %m %d %H %M %S".to_string());
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

    /// The directory name of the snapshot taken at `t`.
    pub fn name_of(&self, t: GmtToken) -> String {
        let token = t.to_string();
        let mut out = String::new();
        for p in &self.parts {
            match p {
                Part::Text(s) => out.push_str(s),
                Part::Field(at, len) => out.push_str(&token[*at..*at + len]),
            }
        }
        out
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
/// share (docs/limits.md says which of Samba's layouts that covers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShadowCopy {
    /// `shadow:snapdir` (default `.snapshots`), relative to the share's root.
    pub snapdir: RelPath,
    /// `shadow:format`.
    pub format: SnapFormat,
    /// `shadow:sort`.
    pub sort: SnapSort,
    /// `shadow:snapdirseverywhere`: the snapshot directory need not be at
    /// the file system's mount point; ringshare looks for it at the share's
    /// root only (not in the directories below it, as Samba also does).
    pub everywhere: bool,
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
        }
    }
}

impl ShadowCopy {
    /// The snapshots among the snapshot directory's entry `names` (those
    /// the format reads a time from), in `shadow:sort`'s order.
    pub fn snapshots<I: IntoIterator<Item = String>>(&self, names: I) -> Vec<GmtToken> {
        let mut found: Vec<GmtToken> = names
            .into_iter()
            .filter_map(|n| self.format.time_of(&n))
            .collect();
        match self.sort {
            SnapSort::Desc => found.sort_by(|a, b| b.cmp(a)),
            SnapSort::Asc => found.sort(),
            SnapSort::Unsorted => {}
        }
        found
    }

    /// The share-relative directory of the snapshot taken at `t`.
    pub fn snapshot_dir(&self, t: GmtToken) -> Option<RelPath> {
        self.snapdir.join(&self.format.name_of(t)).ok()
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
        assert_eq!(f.name_of(t), "@GMT-2026.11.01-10.00.00");
        assert_eq!(f.time_of("@GMT-2026.11.01-10.00.00"), Some(t));
    }

    #[test]
    fn a_format_of_our_own_reads_back_the_time_it_writes() {
        let f = SnapFormat::parse("daily_%Y-%m-%d_%H%M%S%%").unwrap();
        let t = tok("@GMT-2026.02.28-23.05.09");
        assert_eq!(f.name_of(t), "daily_2026-02-28_230509%");
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
    fn a_format_without_a_whole_time_or_with_other_conversions_is_refused() {
        for bad in [
            "%Y.%m.%d",
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
        let dir = s.snapshot_dir(tok("@GMT-2026.11.01-10.00.00")).unwrap();
        assert_eq!(dir.to_slash_path(), ".snapshots/@GMT-2026.11.01-10.00.00");
    }
}
