//! Samba's `fruit:` options (vfs_fruit), read with its names and defaults
//! into [`ringshare_core::fruit::Fruit`].

use ringshare_core::fruit::{Fruit, Metadata, Resource};

use super::parse::parse_bool;

/// Apply `fruit:<name> = value` (the key normalized: lower case, `_` as a
/// space) to `f`. `Ok(Some(warning))` for an option ringshare reads but
/// does not act on, `Err` for a value Samba would refuse too.
pub(super) fn apply(f: &mut Fruit, key: &str, value: &str) -> Result<Option<String>, String> {
    let name = key.strip_prefix("fruit:").unwrap_or(key);
    let flag =
        |v: &str| parse_bool(v).ok_or_else(|| format!("'{key}' expects yes or no, got '{v}'"));
    match name {
        "aapl" => f.aapl = flag(value)?,
        "model" => f.model = value.to_string(),
        "nfs aces" => f.nfs_aces = flag(value)?,
        "copyfile" => f.copyfile = flag(value)?,
        "time machine" => f.time_machine = flag(value)?,
        "time machine max size" => {
            f.time_machine_max_size = size(value).ok_or_else(|| {
                format!("'{key}' expects a size such as 500G or 2T, got '{value}'")
            })?
        }
        "zero file id" => f.zero_file_id = flag(value)?,
        "metadata" => {
            f.metadata = match value.to_ascii_lowercase().as_str() {
                "netatalk" => Metadata::Netatalk,
                "stream" => Metadata::Stream,
                _ => return Err(format!("'{key}' expects netatalk or stream, got '{value}'")),
            }
        }
        // Samba before 4.7 read the misspelt "ressource" too.
        "resource" | "ressource" => {
            f.resource = match value.to_ascii_lowercase().as_str() {
                "file" => Resource::File,
                "xattr" => Resource::Xattr,
                "stream" => Resource::Stream,
                _ => {
                    return Err(format!(
                        "'{key}' expects file, xattr or stream, got '{value}'"
                    ))
                }
            }
        }
        "veto appledouble" => f.veto_appledouble = flag(value)?,
        "posix rename" => f.posix_rename = flag(value)?,
        "encoding"
        | "locking"
        | "convert adouble"
        | "wipe intentionally left blank rfork"
        | "delete empty adfiles" => {
            return Ok(Some(format!(
                "'{key}' is read but not acted on by ringshare yet"
            )))
        }
        _ => return Ok(Some(format!("unknown option '{key}' ignored"))),
    }
    Ok(None)
}

/// Samba's size syntax: a number with an optional K, M, G, T or P suffix
/// (powers of 1024).
fn size(v: &str) -> Option<u64> {
    let v = v.trim();
    let (num, unit) = match v.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => v.split_at(i),
        None => (v, ""),
    };
    let n: u64 = num.parse().ok()?;
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" => 10,
        "M" | "MB" => 20,
        "G" | "GB" => 30,
        "T" | "TB" => 40,
        "P" | "PB" => 50,
        _ => return None,
    };
    n.checked_mul(1u64 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_samba_suffixes() {
        assert_eq!(size("32K"), Some(32 * 1024));
        assert_eq!(size("2T"), Some(2 << 40));
        assert_eq!(size("1000"), Some(1000));
        assert_eq!(size("12X"), None);
    }

    #[test]
    fn fruit_options_set_their_fields_and_refuse_bad_values() {
        let mut f = Fruit::default();
        assert_eq!(apply(&mut f, "fruit:time machine", "yes"), Ok(None));
        assert_eq!(
            apply(&mut f, "fruit:time machine max size", "32K"),
            Ok(None)
        );
        assert_eq!(apply(&mut f, "fruit:metadata", "stream"), Ok(None));
        assert_eq!(apply(&mut f, "fruit:model", "Xserve"), Ok(None));
        assert!(f.time_machine && f.time_machine_max_size == 32768);
        assert_eq!((f.metadata, f.model.as_str()), (Metadata::Stream, "Xserve"));
        assert!(apply(&mut f, "fruit:resource", "fork").is_err());
        assert!(apply(&mut f, "fruit:locking", "netatalk")
            .unwrap()
            .is_some());
    }
}
