//! Announcing Time Machine shares on the local network the way Samba does
//! (Samba registers mDNS services through Avahi): with `multicast dns
//! register` (Samba's global option, default yes) and a share with
//! `fruit:time machine = yes`, ringshare writes an Avahi service file,
//! `/etc/avahi/services/ringshare.service` (the directory can be moved with
//! `RINGSHARE_AVAHI_SERVICES`), holding the records Samba registers:
//! `_smb._tcp` on the SMB port, `_device-info._tcp` with the `fruit:model`,
//! and `_adisk._tcp` with `sys=adVF=0x100` and one `dk<N>=adVN=<share>,adVF=0x82`
//! per Time Machine share. Avahi picks the file up by itself; it is removed
//! when the server stops. Without an Avahi service directory nothing is
//! written and the log says how to announce the shares by hand.

use std::path::{Path, PathBuf};

use crate::config::Config;
use crate::wsd::xml::escape as xml_escape;

/// Where Avahi reads service files.
const AVAHI_SERVICES: &str = "/etc/avahi/services";
/// The file ringshare writes there.
const FILE_NAME: &str = "ringshare.service";

/// An announcement on disk; removing it ends the announcement.
#[derive(Debug)]
pub struct Announcement {
    path: PathBuf,
}

impl Drop for Announcement {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The Avahi service group announcing `port` for SMB and the Time Machine
/// shares `shares`, with `model` for Finder's icon.
pub fn service_xml(port: u16, shares: &[&str], model: &str) -> String {
    let mut x = String::from(
        "<?xml version=\"1.0\" standalone='no'?>\n\
         <!DOCTYPE service-group SYSTEM \"avahi-service.dtd\">\n\
         <!-- written by ringshare for its Time Machine shares; removed when it stops -->\n\
         <service-group>\n  <name replace-wildcards=\"yes\">%h</name>\n",
    );
    x.push_str(&format!(
        "  <service>\n    <type>_smb._tcp</type>\n    <port>{port}</port>\n  </service>\n"
    ));
    x.push_str(&format!(
        "  <service>\n    <type>_device-info._tcp</type>\n    <port>0</port>\n    \
         <txt-record>model={}</txt-record>\n  </service>\n",
        xml_escape(model)
    ));
    x.push_str("  <service>\n    <type>_adisk._tcp</type>\n    <port>9</port>\n");
    x.push_str("    <txt-record>sys=adVF=0x100</txt-record>\n");
    for (i, s) in shares.iter().enumerate() {
        x.push_str(&format!(
            "    <txt-record>dk{i}=adVN={},adVF=0x82</txt-record>\n",
            xml_escape(s)
        ));
    }
    x.push_str("  </service>\n</service-group>\n");
    x
}

/// Announce `cfg`'s Time Machine shares in Avahi's service directory `dir`
/// (see the module): `None` when there are none, announcing is off, or the
/// directory is missing (logged).
pub fn announce_in(cfg: &Config, dir: &Path) -> Option<Announcement> {
    if !cfg.global.multicast_dns_register {
        return None;
    }
    let tm: Vec<&str> = cfg
        .shares
        .iter()
        .filter(|s| s.fruit.as_ref().is_some_and(|f| f.time_machine))
        .map(|s| s.name.as_str())
        .collect();
    if tm.is_empty() {
        return None;
    }
    let model = cfg
        .shares
        .iter()
        .find_map(|s| s.fruit.as_ref().map(|f| f.model.clone()))
        .unwrap_or_default();
    let port = cfg.global.listen.first().map_or(445, |a| a.port());
    if !dir.is_dir() {
        tracing::warn!(
            "Time Machine share(s) {} not announced: no Avahi service directory {} (install \
             avahi-daemon, or add the share in Time Machine as smb://host/SHARE)",
            tm.join(", "),
            dir.display()
        );
        return None;
    }
    let path = dir.join(FILE_NAME);
    match std::fs::write(&path, service_xml(port, &tm, &model)) {
        Ok(()) => {
            tracing::info!(
                "Time Machine share(s) {} announced through {}",
                tm.join(", "),
                path.display()
            );
            Some(Announcement { path })
        }
        Err(e) => {
            tracing::warn!("Time Machine shares not announced: {}: {e}", path.display());
            None
        }
    }
}

/// [`announce_in`] Avahi's directory (`RINGSHARE_AVAHI_SERVICES` or
/// `/etc/avahi/services`).
pub fn announce(cfg: &Config) -> Option<Announcement> {
    let dir = std::env::var_os("RINGSHARE_AVAHI_SERVICES")
        .map_or_else(|| PathBuf::from(AVAHI_SERVICES), PathBuf::from);
    announce_in(cfg, &dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_file_holds_the_records_samba_registers() {
        let x = service_xml(445, &["tm", "b&w"], "MacSamba");
        assert!(x.contains("<type>_smb._tcp</type>\n    <port>445</port>"));
        assert!(x.contains("<txt-record>model=MacSamba</txt-record>"));
        assert!(x.contains("<type>_adisk._tcp</type>\n    <port>9</port>"));
        assert!(x.contains("<txt-record>sys=adVF=0x100</txt-record>"));
        assert!(x.contains("<txt-record>dk0=adVN=tm,adVF=0x82</txt-record>"));
        assert!(x.contains("<txt-record>dk1=adVN=b&amp;w,adVF=0x82</txt-record>"));
    }

    #[test]
    fn a_time_machine_share_is_announced_while_the_server_runs() {
        let dir = std::env::temp_dir().join(format!("rs-avahi-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cfg = crate::config::parse_str(
            "[global]\nlisten = 127.0.0.1:4450\n[tm]\npath = /tmp\nvfs objects = fruit streams_xattr\n\
             fruit:time machine = yes\n",
            Path::new("t.conf"),
        )
        .unwrap();
        let a = announce_in(&cfg, &dir).expect("announced");
        let text = std::fs::read_to_string(dir.join(FILE_NAME)).unwrap();
        assert!(text.contains("<port>4450</port>") && text.contains("dk0=adVN=tm,"));
        drop(a);
        assert!(
            !dir.join(FILE_NAME).exists(),
            "removed when the server stops"
        );
        let off = crate::config::parse_str(
            "[global]\nmulticast dns register = no\n[tm]\npath = /tmp\nvfs objects = fruit\n\
             fruit:time machine = yes\n",
            Path::new("t.conf"),
        )
        .unwrap();
        assert!(announce_in(&off, &dir).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
