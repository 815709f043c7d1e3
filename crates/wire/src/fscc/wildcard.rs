//! QUERY_DIRECTORY name matching, [MS-FSA] 2.1.4.4 ("Algorithm for
//! Determining if a FileName Is in an Expression"), case-insensitive.
//!
//! Wildcards:
//! * `*` matches zero or more characters;
//! * `?` matches exactly one character;
//! * `<` (DOS_STAR) matches zero or more characters, but never the last `.`
//!   of the name;
//! * `>` (DOS_QM) matches one character, or nothing when the name is at a
//!   `.` or at its end (so `a>>` matches `a`, `ab`, `abc`);
//! * `"` (DOS_DOT) matches a `.`, or nothing at the end of the name.
//!
//! The matcher runs the pattern as a non-deterministic automaton over the
//! pattern positions: O(pattern × name) time and O(pattern) space, whatever
//! the pattern (`*a*a*a*a*b` against a long name is still linear per
//! character), with no recursion or backtracking.

/// Upper-case one character for comparison (simple one-to-one mapping;
/// characters whose upper case is several characters are kept as they are).
fn fold(c: char) -> char {
    let mut up = c.to_uppercase();
    match (up.next(), up.next()) {
        (Some(u), None) => u,
        _ => c,
    }
}

/// Whether `name` matches the QUERY_DIRECTORY `pattern`, case-insensitively.
///
/// Per [MS-FSA] 2.1.4.4: an empty pattern matches only an empty name (SMB2
/// servers substitute `*` for an empty FileName before calling this), and
/// `*` and `*.*` match every name.
pub fn name_matches(pattern: &str, name: &str) -> bool {
    if pattern.is_empty() || name.is_empty() {
        return pattern.is_empty() && name.is_empty();
    }
    if pattern == "*" || pattern == "*.*" {
        return true;
    }
    let p: Vec<char> = pattern.chars().map(fold).collect();
    let n: Vec<char> = name.chars().map(fold).collect();
    let last_dot = n.iter().rposition(|&c| c == '.');
    let m = p.len();

    // live[i]: the automaton can be at pattern position i (i == m: matched).
    let mut live = vec![false; m + 1];
    let mut next = vec![false; m + 1];
    live[0] = true;
    let mut j = 0;
    loop {
        let c = n.get(j).copied();
        // Moves that consume no name character. They only go forward, so one
        // ascending pass reaches the closure.
        for i in 0..m {
            if live[i] {
                let skip = match p[i] {
                    '*' | '<' => true,
                    '>' => matches!(c, None | Some('.')),
                    '"' => c.is_none(),
                    _ => false,
                };
                if skip {
                    live[i + 1] = true;
                }
            }
        }
        let Some(c) = c else {
            return live[m];
        };
        next.fill(false);
        let mut any = false;
        for i in 0..m {
            if !live[i] {
                continue;
            }
            let (stay, advance) = match p[i] {
                '*' => (true, false),
                '<' => (Some(j) != last_dot, false),
                '?' => (false, true),
                '>' => (false, c != '.'),
                '"' => (false, c == '.'),
                lit => (false, lit == c),
            };
            if stay {
                next[i] = true;
                any = true;
            }
            if advance {
                next[i + 1] = true;
                any = true;
            }
        }
        if !any {
            return false;
        }
        std::mem::swap(&mut live, &mut next);
        j += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::name_matches;

    #[test]
    fn star_and_star_dot_star_match_everything() {
        for name in ["a", "noext", "a.b.c", ".hidden", "x."] {
            assert!(name_matches("*", name), "{name}");
            assert!(name_matches("*.*", name), "{name}");
        }
    }

    #[test]
    fn empty_pattern_or_name_matches_only_both_empty() {
        assert!(name_matches("", ""));
        assert!(!name_matches("", "a"));
        assert!(!name_matches("*", ""));
    }

    #[test]
    fn literal_names_match_case_insensitively() {
        assert!(name_matches("README.TXT", "readme.txt"));
        assert!(name_matches("ÉTÉ", "été"));
        assert!(!name_matches("readme.txt", "readme.txt2"));
        assert!(!name_matches("readme.txt", "readme.tx"));
    }

    #[test]
    fn star_matches_any_run_including_dots() {
        assert!(name_matches("*.txt", "a.b.TXT"));
        assert!(!name_matches("*.txt", "a.txt.bak"));
        assert!(name_matches("a*b*c", "aXXbYYc"));
        assert!(name_matches("a*", "a"));
        assert!(!name_matches("a*b", "ab.c"));
    }

    #[test]
    fn question_mark_matches_exactly_one_character() {
        assert!(name_matches("a?c", "abc"));
        assert!(name_matches("a?c", "a.c"));
        assert!(!name_matches("a?c", "ac"));
        assert!(!name_matches("a?c", "abbc"));
        assert!(name_matches("??", "😀x"));
    }

    #[test]
    fn dos_star_stops_at_the_last_dot() {
        assert!(name_matches("<.txt", "a.b.txt"));
        assert!(!name_matches("<.txt", "a.txt.bak"));
        // `*.` from Win32 becomes `<"`: names without an extension.
        assert!(name_matches("<\"", "noext"));
        assert!(name_matches("<\"", "trailing."));
        assert!(!name_matches("<\"", "has.ext"));
        // `<` alone cannot swallow the final dot.
        assert!(name_matches("<", "noext"));
        assert!(!name_matches("<", "a.b"));
        assert!(name_matches("<.<", "a.b"));
    }

    #[test]
    fn dos_qm_matches_one_character_or_nothing_before_a_dot_or_the_end() {
        // Win32 `a??` becomes `a>>`.
        assert!(name_matches("a>>", "a"));
        assert!(name_matches("a>>", "ab"));
        assert!(name_matches("a>>", "abc"));
        assert!(!name_matches("a>>", "abcd"));
        // `>>>.>>>`: 8.3-style.
        assert!(name_matches(">>>\">>>", "ab.c"));
        assert!(name_matches(">>>\">>>", "abc.def"));
        assert!(!name_matches(">>>\">>>", "abcd.e"));
        assert!(!name_matches("a>", "a.b"));
    }

    #[test]
    fn dos_dot_matches_a_dot_or_nothing_at_the_end() {
        assert!(name_matches("abc\"", "abc"));
        assert!(name_matches("abc\"", "abc."));
        assert!(!name_matches("abc\"", "abcd"));
        assert!(name_matches("abc\"txt", "abc.txt"));
        assert!(!name_matches("abc\"txt", "abctxt"));
    }

    #[test]
    fn pathological_patterns_finish_quickly() {
        let name = "a".repeat(4000);
        let pattern = "*a".repeat(200) + "b";
        let start = std::time::Instant::now();
        assert!(!name_matches(&pattern, &name));
        assert!(!name_matches(
            &("<a".repeat(200) + "c"),
            &(name.clone() + ".b")
        ));
        let pattern2 = "*?".repeat(300) + "*b";
        assert!(!name_matches(&pattern2, &name));
        assert!(name_matches(&("*a".repeat(200) + "*"), &name));
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
    }
}
