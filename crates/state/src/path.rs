//! SMB path names to share-relative paths ([MS-SMB2] 3.3.5.9, [MS-FSCC] 2.1.5).
//!
//! A CREATE name is relative to the share root, `\`- (or `/`-) separated, and must not
//! start with a separator. Every component is checked here, before the backend
//! sees it: `..` takes back the component before it (never above the
//! root: OBJECT_PATH_SYNTAX_BAD, as Samba), no `.`, no empty component, none of the characters NTFS
//! forbids, no `:`, no wildcards, at most 255 characters. A stream name
//! (`file:stream:$DATA`, [MS-FSCC] 2.1.5.4) is split off first by
//! [`parse_create_name`]. The
//! backend then resolves the result beneath the share root (openat2
//! RESOLVE_BENEATH), so even a name that slipped past these checks cannot
//! leave the share.

use ringshare_vfs::RelPath;
use ringshare_wire::NtStatus;

use crate::limits;

/// Characters [MS-FSCC] 2.1.5.2 forbids in a file name component (besides
/// control characters). `\` is the separator and never reaches a component.
const FORBIDDEN: &[char] = &['"', '*', '/', ':', '<', '>', '?', '|'];

/// The bytes of a component's UTF-8 that are refused: control characters and
/// [`FORBIDDEN`]. All are ASCII, and no byte of a character beyond ASCII is
/// below 0x80, so a component is checked byte by byte.
const REFUSED_BYTE: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        t[b] = true;
        b += 1;
    }
    let mut i = 0;
    while i < FORBIDDEN.len() {
        t[FORBIDDEN[i] as usize] = true;
        i += 1;
    }
    t
};

/// A POSIX open's name (the SMB3 POSIX extensions), as Samba's POSIX pathnames take it: `/`
/// separates (repeated ones count once, a trailing one is dropped, a leading one is
/// INVALID_PARAMETER), `..` takes back a component, and a component may hold any character but
/// NUL (`a `, `.a`, `<`, `?`, `\`, `:`: no stream part).
pub fn parse_posix_path(name: &str) -> Result<RelPath, NtStatus> {
    if name.starts_with('/') {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if name.chars().count() > limits::PATH_CHARS_MAX {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    let comps = name.split('/').filter(|c| !c.is_empty());
    path_of(comps, check_posix_component)
}

/// The path of components `comps`, each checked by `check`: `..` takes back the component
/// before it, by name (as Samba; the backend then resolves the result beneath the share root).
/// Above the root it is a syntax error.
fn path_of<'a>(
    comps: impl Iterator<Item = &'a str>,
    check: fn(&str) -> Result<&str, NtStatus>,
) -> Result<RelPath, NtStatus> {
    let mut parts = Vec::with_capacity(4);
    for comp in comps {
        if comp == ".." {
            if parts.pop().is_none() {
                return Err(NtStatus::OBJECT_PATH_SYNTAX_BAD);
            }
            continue;
        }
        parts.push(check(comp)?);
    }
    RelPath::from_strs(&parts).map_err(|_| NtStatus::OBJECT_NAME_INVALID)
}

/// Turn a decoded CREATE/rename name into a share-relative path.
pub fn parse_smb_path(name: &str) -> Result<RelPath, NtStatus> {
    if name.is_empty() {
        return Ok(RelPath::root());
    }
    // No more characters than bytes: counted only when it could matter.
    if name.len() > limits::PATH_CHARS_MAX && name.chars().count() > limits::PATH_CHARS_MAX {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    // `/` separates components as `\` does (as Samba takes it; Windows
    // refuses it, and no client puts it in a name since no file may hold it).
    let slashed;
    let name = if name.contains('/') {
        slashed = name.replace('/', "\\");
        slashed.as_str()
    } else {
        name
    };
    if name.starts_with('\\') {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // One trailing separator names the same object ("dir\").
    let trimmed = name.strip_suffix('\\').unwrap_or(name);
    if !trimmed.contains('\\') {
        // One component (most names): no list of components to build first.
        let comp = check_component(trimmed)?;
        return RelPath::from_strs(&[comp]).map_err(|_| NtStatus::OBJECT_NAME_INVALID);
    }
    path_of(trimmed.split('\\'), check_component)
}

/// The stream part of a name ([MS-FSCC] 2.1.5.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamPart {
    /// No `:` at all: the file or directory itself.
    None,
    /// `file::$DATA`: the file's default (unnamed) data stream, which is the
    /// file itself; a directory has none.
    Default,
    /// `file:name` or `file:name:$DATA`: a named data stream, the name as
    /// given (matched ignoring case against the stored ones).
    Named(String),
}

/// Split a CREATE (or rename target) name into the file's path and its
/// stream part. `streams`: the share has named streams; without them any
/// `:` is OBJECT_NAME_INVALID (as Samba's shares without `streams_xattr`,
/// smbtorture smb2.create_no_streams). A stream name may hold any
/// character but `\`, `/`, `:` and NUL (control characters and wildcards
/// are fine); the only type is `$DATA`, in any case; `f:` and `f:s:` are
/// invalid. An empty file part names the share root (`:s`).
pub fn parse_create_name(name: &str, streams: bool) -> Result<(RelPath, StreamPart), NtStatus> {
    let Some((file, stream)) = name.split_once(':') else {
        return Ok((parse_smb_path(name)?, StreamPart::None));
    };
    if !streams || stream.contains(['\\', '/', '\0']) {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    let (sname, stype) = match stream.split_once(':') {
        Some((n, t)) => (n, Some(t)),
        None => (stream, None),
    };
    match stype {
        Some(t) if !t.eq_ignore_ascii_case("$DATA") => return Err(NtStatus::OBJECT_NAME_INVALID),
        None if sname.is_empty() => return Err(NtStatus::OBJECT_NAME_INVALID),
        _ => {}
    }
    let path = parse_smb_path(file)?;
    if sname.is_empty() {
        return Ok((path, StreamPart::Default));
    }
    if sname.chars().count() > limits::NAME_CHARS_MAX || !ringshare_vfs::stream_name_is_valid(sname)
    {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    Ok((path, StreamPart::Named(sname.to_string())))
}

/// Check one component of a POSIX open's name (also its listings' names): not empty, not `.`,
/// at most 255 characters, no NUL (a `/` is a separator).
pub fn check_posix_component(comp: &str) -> Result<&str, NtStatus> {
    if comp.is_empty() || comp == "." || comp.contains('\0') {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    if comp == ".." {
        return Err(NtStatus::OBJECT_PATH_SYNTAX_BAD);
    }
    if comp.chars().count() > limits::NAME_CHARS_MAX {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    Ok(comp)
}

/// Check one name component (also used for QUERY_DIRECTORY results and rename targets).
pub fn check_component(comp: &str) -> Result<&str, NtStatus> {
    if comp.is_empty() {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    if comp == ".." {
        return Err(NtStatus::OBJECT_PATH_SYNTAX_BAD);
    }
    if comp == "." {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    if comp.len() > limits::NAME_CHARS_MAX && comp.chars().count() > limits::NAME_CHARS_MAX {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    if comp.bytes().any(|b| REFUSED_BYTE[usize::from(b)]) {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    Ok(comp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_component_is_refused_exactly_for_control_and_forbidden_characters() {
        for c in (0u32..0x300).filter_map(char::from_u32) {
            let comp = format!("a{c}b");
            let refused = (c as u32) < 0x20 || FORBIDDEN.contains(&c);
            match c {
                '\\' => continue, // the separator
                _ => assert_eq!(check_component(&comp).is_err(), refused, "{c:?}"),
            }
        }
        assert!(check_component("名前ü\u{1F600}").is_ok());
        // 255 characters of two bytes each: 510 bytes, one name too many for the backend.
        let long = "é".repeat(255);
        assert!(check_component(&long).is_ok());
        assert!(parse_smb_path(&long).is_err());
        assert!(check_component(&"é".repeat(256)).is_err());
    }

    #[test]
    fn a_posix_name_may_hold_what_windows_names_may_not() {
        for n in ["a ", "a.", ".a", "<", "a?b", "x:y", "a|b\\c*"] {
            assert!(
                parse_smb_path(n).is_err() || n == "a " || n == "a." || n == ".a",
                "{n}"
            );
            assert!(parse_posix_path(n).is_ok(), "{n}");
        }
        assert_eq!(
            parse_posix_path("d//x:y/").unwrap().components(),
            ["d", "x:y"]
        );
        // A backslash is a character of the name.
        assert_eq!(parse_posix_path(" \\ ").unwrap().components(), [" \\ "]);
        assert_eq!(
            parse_posix_path("d/e/../f").unwrap().components(),
            ["d", "f"]
        );
        assert!(parse_posix_path("a\0b").is_err());
        assert!(parse_posix_path("..").is_err());
        assert_eq!(parse_posix_path("/a"), Err(NtStatus::INVALID_PARAMETER));
    }

    #[test]
    fn empty_name_is_the_share_root() {
        assert!(parse_smb_path("").unwrap().is_root());
    }

    #[test]
    fn backslash_separated_names_become_components() {
        let p = parse_smb_path("a\\b c\\d.txt").unwrap();
        assert_eq!(p.components(), ["a", "b c", "d.txt"]);
    }

    #[test]
    fn dotdot_takes_back_the_component_before_it() {
        assert_eq!(parse_smb_path("d\\zqy\\..").unwrap().components(), ["d"]);
        assert_eq!(
            parse_smb_path("a\\b\\..\\c").unwrap().components(),
            ["a", "c"]
        );
        assert!(parse_smb_path("a\\..").unwrap().is_root());
        assert_eq!(parse_smb_path(".."), Err(NtStatus::OBJECT_PATH_SYNTAX_BAD));
    }

    #[test]
    fn a_slash_separates_components_as_a_backslash_does() {
        assert_eq!(parse_smb_path("a/b").unwrap().components(), ["a", "b"]);
        assert_eq!(parse_smb_path("d/._f").unwrap().components(), ["d", "._f"]);
        assert_eq!(
            parse_smb_path("../etc"),
            Err(NtStatus::OBJECT_PATH_SYNTAX_BAD)
        );
        assert_eq!(
            parse_smb_path("/etc/passwd"),
            Err(NtStatus::INVALID_PARAMETER)
        );
    }

    #[test]
    fn a_single_trailing_separator_is_ignored() {
        assert_eq!(parse_smb_path("dir\\").unwrap().components(), ["dir"]);
    }

    #[test]
    fn rejects_leading_separator_dotdot_and_empty_components() {
        assert_eq!(
            parse_smb_path("\\etc\\passwd"),
            Err(NtStatus::INVALID_PARAMETER)
        );
        assert_eq!(
            parse_smb_path("..\\..\\etc\\passwd"),
            Err(NtStatus::OBJECT_PATH_SYNTAX_BAD)
        );
        assert_eq!(
            parse_smb_path("a\\..\\..\\x"),
            Err(NtStatus::OBJECT_PATH_SYNTAX_BAD)
        );
        assert_eq!(parse_smb_path("a\\\\b"), Err(NtStatus::OBJECT_NAME_INVALID));
        assert_eq!(
            parse_smb_path("a\\.\\b"),
            Err(NtStatus::OBJECT_NAME_INVALID)
        );
    }

    #[test]
    fn rejects_forward_slashes_streams_wildcards_and_control_characters() {
        for bad in [
            "file:stream",
            "x*",
            "what?",
            "a<b",
            "a>b",
            "a\"b",
            "a|b",
            "nul\u{0}byte",
            "tab\tname",
        ] {
            assert_eq!(
                parse_smb_path(bad),
                Err(NtStatus::OBJECT_NAME_INVALID),
                "{bad:?}"
            );
        }
    }

    fn stream(name: &str) -> Result<(Vec<String>, StreamPart), NtStatus> {
        parse_create_name(name, true).map(|(p, s)| (p.components().to_vec(), s))
    }

    #[test]
    fn stream_names_are_split_off_with_or_without_their_type_in_any_case() {
        for n in ["f:s", "f:s:$DATA", "f:s:$data", "f:s:$DaTa"] {
            assert_eq!(
                stream(n),
                Ok((vec!["f".into()], StreamPart::Named("s".into()))),
                "{n}"
            );
        }
        assert_eq!(
            stream("d\\f:Second Stream:$DATA"),
            Ok((
                vec!["d".into(), "f".into()],
                StreamPart::Named("Second Stream".into())
            ))
        );
    }

    #[test]
    fn the_default_stream_is_the_file_itself() {
        assert_eq!(
            stream("f::$DATA"),
            Ok((vec!["f".into()], StreamPart::Default))
        );
        assert_eq!(
            stream("f::$data"),
            Ok((vec!["f".into()], StreamPart::Default))
        );
    }

    #[test]
    fn a_stream_of_the_share_root_has_an_empty_file_part() {
        let (p, s) = parse_create_name(":s", true).unwrap();
        assert!(p.is_root());
        assert_eq!(s, StreamPart::Named("s".into()));
    }

    #[test]
    fn stream_names_may_hold_control_characters_and_wildcards() {
        for n in ["\u{5}Stream\n One", "?Stream*", "a<b>c|\"d", "$DATA"] {
            assert_eq!(
                stream(&format!("f:{n}:$DATA")),
                Ok((vec!["f".into()], StreamPart::Named(n.into()))),
                "{n:?}"
            );
        }
    }

    #[test]
    fn malformed_stream_names_are_invalid() {
        for bad in [
            "f:",
            "f:s:",
            "f:s:$FOO",
            "f:s:?D*a",
            "f::foo",
            "f:a:b:c",
            "f:a\\b",
            "f:a/b",
            "f:a\u{0}b",
            "d*\\f:x",
            "f*:x",
        ] {
            assert_eq!(
                parse_create_name(bad, true),
                Err(NtStatus::OBJECT_NAME_INVALID),
                "{bad:?}"
            );
        }
        let long = format!("f:{}", "s".repeat(256));
        assert_eq!(
            parse_create_name(&long, true),
            Err(NtStatus::OBJECT_NAME_INVALID)
        );
    }

    #[test]
    fn any_colon_is_invalid_on_a_share_without_streams() {
        for n in ["x::$DATA", "x::foooooooooooo", "x:stream", "x:stream:$DATA"] {
            assert_eq!(
                parse_create_name(n, false),
                Err(NtStatus::OBJECT_NAME_INVALID),
                "{n}"
            );
        }
        assert_eq!(
            parse_create_name("x", false).map(|(_, s)| s),
            Ok(StreamPart::None)
        );
    }

    #[test]
    fn rejects_overlong_components_and_paths() {
        let long = "x".repeat(256);
        assert_eq!(parse_smb_path(&long), Err(NtStatus::OBJECT_NAME_INVALID));
        assert!(parse_smb_path(&"x".repeat(255)).is_ok());
        let deep = vec!["d"; 20000].join("\\");
        assert_eq!(parse_smb_path(&deep), Err(NtStatus::OBJECT_NAME_INVALID));
    }
}
