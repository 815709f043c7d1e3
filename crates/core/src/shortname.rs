//! 8.3 alternate names ([MS-FSCC] 2.1.5.2.1, FileAlternateNameInformation).
//!
//! ringshare stores no short names. It derives one deterministically: a name
//! that is already a valid 8.3 name is its own short name (upper-cased);
//! otherwise up to four characters of the base name, `~`, three characters
//! from a hash of the whole name, and up to three characters of the extension.
//! Two long names can share a short name; clients only show it.

/// Characters allowed in an 8.3 name besides letters and digits.
const SPECIAL: &str = "!#$%&'()-@^_`{}~";

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || SPECIAL.contains(c)
}

fn is_valid_83(name: &str) -> bool {
    let (base, ext) = match name.rfind('.') {
        Some(i) => (&name[..i], Some(&name[i + 1..])),
        None => (name, None),
    };
    let ok = |s: &str, max: usize| !s.is_empty() && s.len() <= max && s.chars().all(allowed);
    ok(base, 8) && ext.is_none_or(|e| ok(e, 3))
}

/// Could `name` be a short name this server made for a longer one (a valid
/// 8.3 name with the `~` the derivation puts in)? Only then is a name that
/// was not found looked for among the directory's short names.
pub fn may_be_derived(name: &str) -> bool {
    name.contains('~') && is_valid_83(name)
}

/// The short name of a long name.
pub fn short_name(name: &str) -> String {
    if name == "." || name == ".." || name.is_empty() {
        return name.to_string();
    }
    if is_valid_83(name) {
        return name.to_ascii_uppercase();
    }
    let (base, ext) = match name.rfind('.') {
        Some(i) if i > 0 => (&name[..i], &name[i + 1..]),
        _ => (name, ""),
    };
    let clean = |s: &str, max: usize| -> String {
        s.chars()
            .filter(|c| allowed(*c) && *c != '~')
            .map(|c| c.to_ascii_uppercase())
            .take(max)
            .collect()
    };
    // FNV-1a over the name's UTF-8 bytes.
    let mut h: u32 = 0x811c_9dc5;
    for b in name.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    const DIGITS: &[u8; 36] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let mut tag = String::with_capacity(3);
    for _ in 0..3 {
        tag.push(DIGITS[(h % 36) as usize] as char);
        h /= 36;
    }
    let mut prefix = clean(base, 4);
    if prefix.is_empty() {
        prefix.push('_');
    }
    let ext = clean(ext, 3);
    if ext.is_empty() {
        format!("{prefix}~{tag}")
    } else {
        format!("{prefix}~{tag}.{ext}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_8_3_name_is_its_own_short_name_upper_cased() {
        assert_eq!(short_name("g.bin"), "G.BIN");
        assert_eq!(short_name("README"), "README");
    }

    #[test]
    fn long_names_get_a_hashed_8_3_name() {
        let s = short_name("renamed file with spaces.tar.gz");
        assert!(is_valid_83(&s), "{s}");
        assert!(s.starts_with("RENA~") && s.ends_with(".GZ"), "{s}");
        assert_eq!(s, short_name("renamed file with spaces.tar.gz"));
        assert_ne!(
            short_name("a long name one.txt"),
            short_name("a long name two.txt")
        );
    }

    #[test]
    fn only_valid_8_3_names_with_a_tilde_may_be_derived_short_names() {
        let s = short_name("a very long name.document");
        assert!(may_be_derived(&s), "{s}");
        assert!(may_be_derived(&s.to_lowercase()));
        assert!(!may_be_derived("README.TXT"));
        assert!(!may_be_derived("a very long name~1.document"));
    }

    #[test]
    fn names_without_usable_characters_still_get_a_valid_short_name() {
        for n in ["ééééééééé", ".hidden-config", "日本語のファイル名.テキスト"]
        {
            let s = short_name(n);
            assert!(is_valid_83(&s), "{n} -> {s}");
        }
    }
}
