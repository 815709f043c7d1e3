//! A POSIX basic regular expression (what `regcomp` reads without
//! `REG_EXTENDED`, as Samba compiles `shadow:snapprefix`) rewritten in the
//! syntax of the `regex-lite` crate, so that a prefix written for Samba
//! (zfs-auto-snapshot's `^zfs-auto-snap_\(hourly\)\{0,1\}…`) matches the same
//! names here.
//!
//! In a BRE, `\(` `\)` group, `\{m,n\}` bounds a repeat and GNU adds `\|`,
//! `\+` and `\?`; `(`, `)`, `{`, `}`, `|`, `+` and `?` alone are plain
//! characters; `*` repeats, except first in the expression or a group, where
//! it is plain; `^` anchors only first and `$` only last (in the expression
//! or a group); inside a bracket expression a backslash is plain.

/// The expression in `regex-lite` syntax; the error says what is wrong.
pub(super) fn to_regex(bre: &str) -> Result<String, String> {
    let mut out = String::with_capacity(bre.len() + 8);
    let chars: Vec<char> = bre.chars().collect();
    let mut i = 0;
    // At the start of the expression or of a group: `*` is plain and `^` anchors.
    let mut at_start = true;
    while i < chars.len() {
        let c = chars[i];
        let start_here = at_start;
        at_start = false;
        match c {
            '\\' => {
                let Some(&n) = chars.get(i + 1) else {
                    return Err("ends with a lone backslash".to_string());
                };
                i += 1;
                match n {
                    '(' => {
                        out.push('(');
                        at_start = true;
                    }
                    '{' => i = bound(&chars, i, &mut out)?,
                    ')' | '|' | '+' | '?' => out.push(n),
                    // Back-references are not offered by regex-lite.
                    '1'..='9' => return Err(format!("back-reference \\{n} is not supported")),
                    'w' | 'W' | 's' | 'S' | 'b' | 'B' => {
                        out.push('\\');
                        out.push(n);
                    }
                    _ => push_plain(&mut out, n),
                }
            }
            '*' if start_here => push_plain(&mut out, '*'),
            '^' if start_here => out.push('^'),
            '$' if i + 1 == chars.len() || is_group_end(&chars, i + 1) => out.push('$'),
            '[' => i = bracket(&chars, i, &mut out)?,
            '.' | '*' => out.push(c),
            _ => push_plain(&mut out, c),
        }
        i += 1;
    }
    Ok(out)
}

/// Copies the bound opening at `chars[open]` (the `{` of `\{`), returning the index of
/// the `}` of its `\}`: digits and at most one comma.
fn bound(chars: &[char], open: usize, out: &mut String) -> Result<usize, String> {
    out.push('{');
    let mut i = open + 1;
    while let Some(&c) = chars.get(i) {
        match c {
            '0'..='9' | ',' => out.push(c),
            '\\' if chars.get(i + 1) == Some(&'}') => {
                out.push('}');
                return Ok(i + 1);
            }
            _ => return Err(format!("'{c}' in a bound \\{{m,n\\}}")),
        }
        i += 1;
    }
    Err("a bound \\{ is not closed".to_string())
}

/// Whether a group ends at `i` (`\)`).
fn is_group_end(chars: &[char], i: usize) -> bool {
    chars.get(i) == Some(&'\\') && chars.get(i + 1) == Some(&')')
}

/// `c` matching itself.
fn push_plain(out: &mut String, c: char) {
    if "\\.+*?()|[]{}^$#&-~".contains(c) {
        out.push('\\');
    }
    out.push(c);
}

/// Copies the bracket expression opening at `chars[open]` (`[`), returning the
/// index of its closing `]`: a `]` first (after `^`) is a member, `[:class:]`
/// is kept, a backslash and a `[` elsewhere are members.
fn bracket(chars: &[char], open: usize, out: &mut String) -> Result<usize, String> {
    let mut i = open + 1;
    out.push('[');
    if chars.get(i) == Some(&'^') {
        out.push('^');
        i += 1;
    }
    let first = i;
    while i < chars.len() {
        let c = chars[i];
        if c == ']' && i > first {
            out.push(']');
            return Ok(i);
        }
        if c == '[' && chars.get(i + 1) == Some(&':') {
            let rest: String = chars[i..].iter().collect();
            if let Some(end) = rest.find(":]") {
                out.push_str(&rest[..end + 2]);
                i += rest[..end + 2].chars().count();
                continue;
            }
        }
        match c {
            '\\' | '[' | ']' | '&' | '~' => {
                out.push('\\');
                out.push(c);
            }
            // `--` would be a set difference in regex-lite; a range's `-` stays.
            '-' if chars.get(i + 1) == Some(&'-') => out.push_str("\\-"),
            _ => out.push(c),
        }
        i += 1;
    }
    Err("a bracket expression is not closed".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(bre: &str, s: &str) -> bool {
        regex_lite::Regex::new(&to_regex(bre).unwrap())
            .unwrap()
            .is_match(s)
    }

    #[test]
    fn the_zfs_auto_snapshot_prefix_reads_as_samba_reads_it() {
        let zfs = r"^zfs-auto-snap_\(frequent\)\{0,1\}\(hourly\)\{0,1\}\(daily\)\{0,1\}\(monthly\)\{0,1\}";
        for yes in [
            "zfs-auto-snap_hourly",
            "zfs-auto-snap_daily",
            "zfs-auto-snap_",
        ] {
            assert!(matches(zfs, yes), "{yes}");
        }
        assert!(!matches(zfs, "x-zfs-auto-snap_hourly"));
    }

    #[test]
    fn characters_that_are_operators_only_in_extended_expressions_are_plain() {
        assert!(matches("a(b)+c?{1}|d", "a(b)+c?{1}|d"));
        assert!(!matches("a(b)+", "abb"));
        assert!(matches(r"a\(b\)\+", "abb"));
        assert!(matches(r"day\|week", "week"));
    }

    #[test]
    fn a_star_first_and_anchors_inside_are_plain() {
        assert!(matches("*snap", "x*snap"));
        assert!(matches("a^b$c", "a^b$c"));
        assert!(matches(r"^\(^a\)b$", "ab"));
        assert!(!matches("snap$", "snapx"));
    }

    #[test]
    fn bracket_expressions_keep_their_members_and_classes() {
        assert!(matches(r"^[]a]$", "]"));
        assert!(matches(r"^[\]$", "\\"));
        assert!(matches(r"^[[:digit:]]\{2\}$", "42"));
        assert!(matches(r"^[^a-c]$", "d"));
        assert!(!matches(r"^[^a-c]$", "b"));
        assert!(to_regex("[abc").is_err());
    }

    #[test]
    fn what_regex_lite_cannot_do_is_refused() {
        assert!(to_regex(r"\(a\)\1").is_err());
        assert!(to_regex("a\\").is_err());
        assert!(to_regex(r"a\{1,x\}").is_err());
        assert!(to_regex(r"a\{1").is_err());
    }
}
