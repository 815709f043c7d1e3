//! [MS-SRVS] NetrShareEnum (opnum 15), NetrShareGetInfo (16),
//! NetrServerGetInfo (21) and [MS-WKST] NetrWkstaGetInfo (0), NDR-encoded.

use super::ndr::{NdrReader, NdrWriter};
use super::ServerFacts;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareKind {
    Disk,
    Ipc,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareEntry {
    pub name: String,
    pub comment: String,
    pub kind: ShareKind,
}

impl ShareEntry {
    /// shi1_type: STYPE_DISKTREE, or STYPE_IPC | STYPE_SPECIAL for IPC$.
    fn stype(&self) -> u32 {
        match self.kind {
            ShareKind::Disk => 0,
            ShareKind::Ipc => 0x8000_0003,
        }
    }
}

const WERR_OK: u32 = 0;
const WERR_INVALID_LEVEL: u32 = 124;
const WERR_NET_NAME_NOT_FOUND: u32 = 2310;
/// PLATFORM_ID_NT.
const PLATFORM_NT: u32 = 500;
/// SV_TYPE_WORKSTATION | SV_TYPE_SERVER | SV_TYPE_SERVER_UNIX | SV_TYPE_SERVER_NT.
const SERVER_TYPE: u32 = 0x0000_0001 | 0x0000_0002 | 0x0000_0800 | 0x0000_8000;

/// The fixed part of one SHARE_INFO_x entry; its strings follow later.
fn share_fixed(w: &mut NdrWriter, level: u32, s: &ShareEntry) {
    w.ptr(); // netname
    if level == 0 {
        return;
    }
    w.u32(s.stype());
    w.ptr(); // remark
    match level {
        2 | 502 => {
            w.u32(0); // permissions
            w.u32(u32::MAX); // max_uses: unlimited
            w.u32(0); // current_uses
            w.ptr(); // path
            w.u32(0); // passwd: null
            if level == 502 {
                w.u32(0); // shi502_reserved: security descriptor length
                w.u32(0); // no security descriptor
            }
        }
        501 => w.u32(0), // flags
        _ => {}
    }
}

fn share_strings(w: &mut NdrWriter, level: u32, s: &ShareEntry) {
    w.string(&s.name);
    if level == 0 {
        return;
    }
    w.string(&s.comment);
    if level == 2 || level == 502 {
        // Clients show this; the real path is the server's business.
        w.string(if s.kind == ShareKind::Ipc { "" } else { "C:\\" });
    }
}

fn level_supported(level: u32) -> bool {
    matches!(level, 0 | 1 | 2 | 501 | 502)
}

/// One srvsvc call: the NDR reply stub, or `None` for an unknown opnum.
pub fn call(opnum: u16, stub: &[u8], facts: &ServerFacts) -> Option<Vec<u8>> {
    match opnum {
        // NetrShareEnum and NetrShareEnumSticky share one signature.
        15 | 36 => Some(share_enum(stub, facts)),
        16 => Some(share_get_info(stub, facts)),
        21 => Some(server_get_info(stub, facts)),
        _ => None,
    }
}

/// One wkssvc call.
pub(crate) fn wkssvc_call(opnum: u16, stub: &[u8], facts: &ServerFacts) -> Option<Vec<u8>> {
    match opnum {
        0 => Some(wksta_get_info(stub, facts)),
        _ => None,
    }
}

/// An encoded WERROR-only failure for calls whose out parameters are a union:
/// tag + null pointer + status.
fn union_failure(level: u32, werr: u32) -> Vec<u8> {
    let mut w = NdrWriter::new();
    w.u32(level);
    w.u32(0);
    w.u32(werr);
    w.buf
}

fn share_enum(stub: &[u8], facts: &ServerFacts) -> Vec<u8> {
    let parsed = (|| {
        let mut r = NdrReader::new(stub);
        r.unique_string()?; // ServerName
        let level = r.u32()?;
        let _tag = r.u32()?;
        if r.u32()? != 0 {
            // The container the client sends: EntriesRead and a buffer pointer
            // (clients send an empty one).
            let _entries = r.u32()?;
            if r.u32()? != 0 {
                let _max_count = r.u32()?;
            }
        }
        let _preferred_max = r.u32()?;
        let resume = if r.u32()? != 0 { Some(r.u32()?) } else { None };
        Ok::<_, ringshare_wire::WireError>((level, resume))
    })();
    let Ok((level, resume)) = parsed else {
        return union_failure(0, 87); // WERR_INVALID_PARAMETER
    };
    let mut w = NdrWriter::new();
    w.u32(level);
    w.u32(level);
    if !level_supported(level) {
        w.u32(0); // null container
        w.u32(0); // TotalEntries
        match resume {
            Some(v) => {
                w.ptr();
                w.u32(v);
            }
            None => w.u32(0),
        }
        w.u32(WERR_INVALID_LEVEL);
        return w.buf;
    }
    let shares = &facts.shares;
    w.ptr(); // the container
    w.u32(shares.len() as u32);
    if shares.is_empty() {
        w.u32(0);
    } else {
        w.ptr(); // the array
        w.u32(shares.len() as u32);
        for s in shares {
            share_fixed(&mut w, level, s);
        }
        for s in shares {
            share_strings(&mut w, level, s);
        }
    }
    w.u32(shares.len() as u32); // TotalEntries
    match resume {
        Some(_) => {
            w.ptr();
            w.u32(0);
        }
        None => w.u32(0),
    }
    w.u32(WERR_OK);
    w.buf
}

fn share_get_info(stub: &[u8], facts: &ServerFacts) -> Vec<u8> {
    let parsed = (|| {
        let mut r = NdrReader::new(stub);
        r.unique_string()?;
        let name = r.string()?;
        let level = r.u32()?;
        Ok::<_, ringshare_wire::WireError>((name, level))
    })();
    let Ok((name, level)) = parsed else {
        return union_failure(0, 87);
    };
    if !level_supported(level) {
        return union_failure(level, WERR_INVALID_LEVEL);
    }
    let Some(share) = facts
        .shares
        .iter()
        .find(|s| s.name.eq_ignore_ascii_case(&name))
    else {
        return union_failure(level, WERR_NET_NAME_NOT_FOUND);
    };
    let mut w = NdrWriter::new();
    w.u32(level);
    w.ptr();
    share_fixed(&mut w, level, share);
    share_strings(&mut w, level, share);
    w.u32(WERR_OK);
    w.buf
}

fn server_get_info(stub: &[u8], facts: &ServerFacts) -> Vec<u8> {
    let level = (|| {
        let mut r = NdrReader::new(stub);
        r.unique_string()?;
        r.u32()
    })();
    let Ok(level) = level else {
        return union_failure(0, 87);
    };
    if level != 100 && level != 101 {
        return union_failure(level, WERR_INVALID_LEVEL);
    }
    let mut w = NdrWriter::new();
    w.u32(level);
    w.ptr();
    w.u32(PLATFORM_NT);
    w.ptr(); // name
    if level == 101 {
        w.u32(10); // version major
        w.u32(0); // version minor
        w.u32(SERVER_TYPE);
        w.ptr(); // comment
    }
    w.string(&facts.netbios_name);
    if level == 101 {
        w.string(&facts.comment);
    }
    w.u32(WERR_OK);
    w.buf
}

fn wksta_get_info(stub: &[u8], facts: &ServerFacts) -> Vec<u8> {
    let level = (|| {
        let mut r = NdrReader::new(stub);
        r.unique_string()?;
        r.u32()
    })();
    let Ok(level) = level else {
        return union_failure(0, 87);
    };
    if level != 100 {
        return union_failure(level, WERR_INVALID_LEVEL);
    }
    let mut w = NdrWriter::new();
    w.u32(level);
    w.ptr();
    w.u32(PLATFORM_NT);
    w.ptr(); // computer name
    w.ptr(); // domain (workgroup)
    w.u32(10);
    w.u32(0);
    w.string(&facts.netbios_name);
    w.string(&facts.workgroup);
    w.u32(WERR_OK);
    w.buf
}
