//! SMB path names to share-relative paths ([MS-SMB2] 3.3.5.9, [MS-FSCC] 2.1.5).
//!
//! A CREATE name is relative to the share root, `\`-separated, and must not
//! start with a separator. Every component is checked here, before the backend
//! sees it: no `.`/`..`, no empty component, none of the characters NTFS
//! forbids, no stream names (`:`), no wildcards, at most 255 characters. The
//! backend then resolves the result beneath the share root (openat2
//! RESOLVE_BENEATH), so even a name that slipped past these checks cannot
//! leave the share.

use ringshare_vfs::RelPath;
use ringshare_wire::NtStatus;

use crate::limits;

/// Characters [MS-FSCC] 2.1.5.2 forbids in a file name component (besides
/// control characters). `\` is the separator and never reaches a component.
const FORBIDDEN: &[char] = &['"', '*', '/', ':', '<', '>', '?', '|'];

/// Turn a decoded CREATE/rename name into a share-relative path.
pub fn parse_smb_path(name: &str) -> Result<RelPath, NtStatus> {
    if name.is_empty() {
        return Ok(RelPath::root());
    }
    if name.chars().count() > limits::PATH_CHARS_MAX {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    if name.starts_with('\\') {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // One trailing separator names the same object ("dir\").
    let trimmed = name.strip_suffix('\\').unwrap_or(name);
    let mut parts = Vec::new();
    for comp in trimmed.split('\\') {
        parts.push(check_component(comp)?);
    }
    RelPath::from_components(parts).map_err(|_| NtStatus::OBJECT_NAME_INVALID)
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
    if comp.chars().count() > limits::NAME_CHARS_MAX {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    if comp
        .chars()
        .any(|c| (c as u32) < 0x20 || FORBIDDEN.contains(&c))
    {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    Ok(comp)
}

#[cfg(test)]
mod tests {
    use super::*;

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
            "a/b",
            "../etc",
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

    #[test]
    fn rejects_overlong_components_and_paths() {
        let long = "x".repeat(256);
        assert_eq!(parse_smb_path(&long), Err(NtStatus::OBJECT_NAME_INVALID));
        assert!(parse_smb_path(&"x".repeat(255)).is_ok());
        let deep = vec!["d"; 20000].join("\\");
        assert_eq!(parse_smb_path(&deep), Err(NtStatus::OBJECT_NAME_INVALID));
    }
}
