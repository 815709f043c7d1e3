//! Active Directory member options in [global], in Samba's words: `security = ads` (with
//! `realm`, `workgroup` and a keytab), `idmap config DOMAIN : …` (read only to know how winbind
//! turns a domain's RIDs into ids), `winbind use default domain` and `winbind separator` (how
//! NSS spells domain accounts). winbind's and sssd's own options in the same file are theirs:
//! ringshare leaves them to the daemon that reads them.

use ringshare_core::domain::{DomainMember, RidRange};

/// `security`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Security {
    /// `user` (and `auto` outside a domain): smbpasswd users, and Kerberos of an MIT realm when
    /// a keytab is configured.
    #[default]
    User,
    /// `ads`: a member of an Active Directory domain.
    Ads,
}

/// One `idmap config DOMAIN : …` domain.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IdmapDomain {
    /// The domain (upper case), or `*` for the default.
    pub domain: String,
    /// `backend` (rid, ad, autorid, tdb, …).
    pub backend: String,
    /// `range = low - high`.
    pub range: Option<(u32, u32)>,
    /// `base_rid` (rid backend).
    pub base_rid: u32,
}

/// `id source`: who gives domain SIDs their Unix ids (ringshare's own option; Samba has none,
/// as its smbd always asks winbindd).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IdSourceChoice {
    /// `auto`: winbindd when there are `idmap config` lines (a winbind member), sssd's NSS
    /// responder when `security = ads` has none (an sssd member).
    #[default]
    Auto,
    /// `winbind`: winbindd's socket.
    Winbind,
    /// `sssd`: sssd's NSS responder (/var/lib/sss/pipes/nss).
    Sssd,
    /// `none`: no source; domain SIDs that no rid range maps get no POSIX ACL entries.
    None,
}

impl IdSourceChoice {
    /// The value as smb.conf spells it.
    pub fn name(self) -> &'static str {
        match self {
            IdSourceChoice::Auto => "auto",
            IdSourceChoice::Winbind => "winbind",
            IdSourceChoice::Sssd => "sssd",
            IdSourceChoice::None => "none",
        }
    }
}

/// sssd's default id range with `ldap_id_mapping = True` (`ldap_idmap_range_min` to
/// `ldap_idmap_range_max`, sssd-ad(5) and sssd-ldap(5)).
pub const SSSD_DEFAULT_RANGE: (u32, u32) = (200_000, 2_000_200_000);

/// What the member options hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberOptions {
    pub security: Security,
    pub idmap: Vec<IdmapDomain>,
    /// `winbind use default domain`.
    pub use_default_domain: bool,
    /// `winbind separator`.
    pub separator: char,
    /// `winbindd socket directory`: where winbindd's socket is (the id source).
    pub winbindd_socket_dir: Option<String>,
    /// `id source`.
    pub id_source: IdSourceChoice,
    /// `sssd id range`: the ids sssd gives domain SIDs (its `ldap_idmap_range_min` -
    /// `ldap_idmap_range_max`): a file's ids in it are asked of sssd when its ACL is read.
    pub sssd_range: (u32, u32),
}

impl Default for MemberOptions {
    fn default() -> MemberOptions {
        MemberOptions {
            security: Security::User,
            idmap: Vec::new(),
            use_default_domain: false,
            separator: '\\',
            winbindd_socket_dir: None,
            id_source: IdSourceChoice::Auto,
            sssd_range: SSSD_DEFAULT_RANGE,
        }
    }
}

/// Options winbind (or sssd) reads from the same smb.conf: ringshare has no use for them.
pub(super) fn is_winbinds(key: &str) -> bool {
    key.starts_with("winbind ")
        || key.starts_with("template ")
        || key.starts_with("idmap ")
        || matches!(
            key,
            "sync machine password to keytab"
                | "machine password timeout"
                | "password server"
                | "allow trusted domains"
                | "client signing"
                | "client ipc signing"
                | "client use kerberos"
        )
}

/// Apply a member option (the key normalized). `Ok(false)`: not one of ours (winbind's).
pub(super) fn apply(m: &mut MemberOptions, key: &str, value: &str) -> Result<bool, String> {
    if let Some(rest) = key.strip_prefix("idmap config ") {
        let Some((domain, param)) = rest.split_once(':') else {
            return Err(format!(
                "'{key}': expected 'idmap config DOMAIN : parameter'"
            ));
        };
        let domain = domain.trim().to_ascii_uppercase();
        let d = match m.idmap.iter_mut().position(|d| d.domain == domain) {
            Some(i) => &mut m.idmap[i],
            None => {
                m.idmap.push(IdmapDomain {
                    domain,
                    ..IdmapDomain::default()
                });
                m.idmap.last_mut().expect("just pushed")
            }
        };
        match param.trim() {
            "backend" => d.backend = value.trim().to_ascii_lowercase(),
            "range" => {
                d.range = Some(parse_range(value).ok_or_else(|| {
                    format!("'{key}' expects 'low - high' (two ids, low ≤ high), got '{value}'")
                })?)
            }
            "base rid" => {
                d.base_rid = value
                    .trim()
                    .parse()
                    .map_err(|_| format!("'{key}' expects a number, got '{value}'"))?
            }
            _ => {}
        }
        return Ok(true);
    }
    match key {
        "winbind use default domain" => {
            m.use_default_domain = super::parse::parse_bool(value)
                .ok_or_else(|| format!("'{key}' expects yes or no, got '{value}'"))?;
        }
        "winbindd socket directory" => m.winbindd_socket_dir = Some(value.trim().to_string()),
        "id source" => {
            m.id_source = match value.trim().to_ascii_lowercase().as_str() {
                "auto" => IdSourceChoice::Auto,
                "winbind" => IdSourceChoice::Winbind,
                "sssd" => IdSourceChoice::Sssd,
                "none" => IdSourceChoice::None,
                _ => {
                    return Err(format!(
                        "'{key}' expects auto, winbind, sssd or none, got '{value}'"
                    ))
                }
            }
        }
        "sssd id range" => {
            m.sssd_range = parse_range(value).ok_or_else(|| {
                format!("'{key}' expects 'low - high' (two ids, low ≤ high), got '{value}'")
            })?
        }
        "winbind separator" => {
            let mut c = value.trim().chars();
            match (c.next(), c.next()) {
                (Some(ch), None) => m.separator = ch,
                _ => return Err(format!("'{key}' expects one character, got '{value}'")),
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// `security = …`.
pub(super) fn security(value: &str) -> Result<Security, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "user" | "auto" => Ok(Security::User),
        "ads" => Ok(Security::Ads),
        other => Err(format!(
            "'security = {other}' is not supported; 'security = user' (standalone) and \
             'security = ads' (Active Directory member) are"
        )),
    }
}

fn parse_range(value: &str) -> Option<(u32, u32)> {
    let (a, b) = value.split_once('-')?;
    let (a, b) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
    (a <= b).then_some((a, b))
}

impl MemberOptions {
    /// The member rules the core acts on, when `security = ads`.
    pub fn member(&self, workgroup: &str) -> Option<DomainMember> {
        if self.security != Security::Ads {
            return None;
        }
        let rid_ranges = self
            .idmap
            .iter()
            .filter(|d| d.domain != "*" && d.backend == "rid")
            .filter_map(|d| {
                let (low, high) = d.range?;
                Some(RidRange {
                    domain: d.domain.clone(),
                    low,
                    high,
                    base_rid: d.base_rid,
                })
            })
            .collect();
        let id_ranges = if self.sssd().is_some() {
            vec![self.sssd_range]
        } else {
            self.idmap
                .iter()
                .filter(|d| d.backend != "rid")
                .filter_map(|d| d.range)
                .collect()
        };
        Some(DomainMember {
            workgroup: workgroup.to_ascii_uppercase(),
            separator: self.separator,
            default_domain: self.use_default_domain,
            rid_ranges,
            id_ranges,
        })
    }

    /// Where winbindd listens, when it is the member's id source: `security = ads` with
    /// `idmap config` lines (winbind's; an sssd member has none and maps ids its own way).
    /// `id source = winbind` says so whatever the rest.
    pub fn winbindd_socket(&self) -> Option<std::path::PathBuf> {
        let winbind = match self.id_source {
            IdSourceChoice::Winbind => true,
            IdSourceChoice::Auto => self.security == Security::Ads && !self.idmap.is_empty(),
            IdSourceChoice::Sssd | IdSourceChoice::None => false,
        };
        if !winbind {
            return None;
        }
        let dir = self
            .winbindd_socket_dir
            .as_deref()
            .unwrap_or(crate::winbind_ids::DEFAULT_SOCKET_DIR);
        Some(std::path::PathBuf::from(dir))
    }
}

impl MemberOptions {
    /// Whether sssd's NSS responder is the member's id source: `id source = sssd`, or `auto`
    /// with `security = ads` and no `idmap config` line (an sssd member, joined with `realm
    /// join` or `adcli join`; sssd maps ids its own way).
    pub fn sssd(&self) -> Option<()> {
        let sssd = match self.id_source {
            IdSourceChoice::Sssd => true,
            IdSourceChoice::Auto => self.security == Security::Ads && self.idmap.is_empty(),
            IdSourceChoice::Winbind | IdSourceChoice::None => false,
        };
        sssd.then_some(())
    }

    /// The id source testparm names: `winbind`, `sssd` or `none`.
    pub fn id_source_in_use(&self) -> &'static str {
        if self.winbindd_socket().is_some() {
            "winbind"
        } else if self.sssd().is_some() {
            "sssd"
        } else {
            "none"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_samba_members_idmap_and_winbind_lines_give_the_member_rules() {
        let mut m = MemberOptions::default();
        for (k, v) in [
            ("idmap config * : backend", "tdb"),
            ("idmap config * : range", "3000-7999"),
            ("idmap config rsad : backend", "rid"),
            ("idmap config rsad : range", "100000 - 199999"),
            ("idmap config rsad : base rid", "0"),
            ("winbind use default domain", "yes"),
            ("winbind separator", "+"),
        ] {
            assert!(apply(&mut m, k, v).unwrap(), "{k}");
        }
        assert!(!apply(&mut m, "winbind enum users", "yes").unwrap());
        assert_eq!(m.member("rsad"), None, "security = user");
        m.security = security("ADS").unwrap();
        let d = m.member("rsad").unwrap();
        assert_eq!(d.workgroup, "RSAD");
        assert_eq!((d.separator, d.default_domain), ('+', true));
        assert_eq!(
            d.rid_ranges,
            [RidRange {
                domain: "RSAD".into(),
                low: 100_000,
                high: 199_999,
                base_rid: 0
            }]
        );
        assert_eq!(d.id_ranges, [(3000, 7999)], "the other backends' ranges");
        assert_eq!(
            m.winbindd_socket().unwrap(),
            std::path::Path::new("/run/samba/winbindd")
        );
    }

    #[test]
    fn an_autorid_member_asks_winbind_for_every_domain_id() {
        let mut m = MemberOptions {
            security: Security::Ads,
            ..MemberOptions::default()
        };
        assert_eq!(m.winbindd_socket(), None, "no idmap config: sssd's member");
        assert_eq!(m.id_source_in_use(), "sssd");
        assert_eq!(m.member("rsad").unwrap().id_ranges, [SSSD_DEFAULT_RANGE]);
        for (k, v) in [
            ("idmap config * : backend", "autorid"),
            ("idmap config * : range", "200000-2999999"),
            ("winbindd socket directory", "/srv/wb"),
        ] {
            assert!(apply(&mut m, k, v).unwrap(), "{k}");
        }
        let d = m.member("rsad").unwrap();
        assert!(d.rid_ranges.is_empty());
        assert_eq!(d.id_ranges, [(200_000, 2_999_999)]);
        assert_eq!(
            m.winbindd_socket().unwrap(),
            std::path::Path::new("/srv/wb")
        );
    }

    #[test]
    fn the_id_source_is_winbind_with_idmap_lines_sssd_without_or_what_id_source_says() {
        let mut m = MemberOptions::default();
        assert_eq!(m.id_source_in_use(), "none", "security = user");
        m.security = Security::Ads;
        assert_eq!(m.id_source_in_use(), "sssd");
        assert!(apply(&mut m, "sssd id range", "10000 - 99999").unwrap());
        assert_eq!(m.member("rsad").unwrap().id_ranges, [(10_000, 99_999)]);
        assert!(apply(&mut m, "idmap config * : backend", "tdb").unwrap());
        assert!(apply(&mut m, "idmap config * : range", "3000-7999").unwrap());
        assert_eq!(m.id_source_in_use(), "winbind");
        assert_eq!(m.member("rsad").unwrap().id_ranges, [(3000, 7999)]);
        assert!(apply(&mut m, "id source", "SSSD").unwrap());
        assert_eq!(m.id_source_in_use(), "sssd");
        assert_eq!(m.winbindd_socket(), None);
        assert!(apply(&mut m, "id source", "none").unwrap());
        assert_eq!(m.id_source_in_use(), "none");
        assert!(apply(&mut m, "id source", "winbind").unwrap());
        assert_eq!(m.id_source_in_use(), "winbind");
    }

    #[test]
    fn bad_member_values_are_refused_with_what_was_expected() {
        let mut m = MemberOptions::default();
        assert!(apply(&mut m, "idmap config rsad : range", "9-1").is_err());
        assert!(apply(&mut m, "idmap config rsad", "x").is_err());
        assert!(apply(&mut m, "winbind separator", "ab").is_err());
        assert!(security("domain").unwrap_err().contains("not supported"));
        assert!(apply(&mut m, "id source", "ldap").is_err());
        assert!(apply(&mut m, "sssd id range", "2-1").is_err());
    }
}
