//! The endpoint mapper's ept_map ([C706] appendix O, [MS-RPCE] 2.2.1.2): a
//! client that knows an interface asks TCP port 135 on which port it is
//! served. Only ept_map (opnum 3) is answered; the towers are those of
//! [C706] appendix L (five floors: interface, NDR, connection-oriented RPC,
//! TCP port, IPv4 address).

use std::net::Ipv4Addr;

use super::ndr::{NdrReader, NdrWriter};
use super::{Service, FAULT_OP_RANGE, NDR20};

/// ept_map's operation number.
pub const OP_EPT_MAP: u16 = 3;
/// EPT_S_NOT_REGISTERED: no endpoint for that interface.
const EPT_S_NOT_REGISTERED: u32 = 0x16c9_a0d6;
/// A tower longer than this is not ours to parse.
const TOWER_MAX: u32 = 1024;

/// The interface a tower's first floor names: its UUID and major version.
fn tower_interface(tower: &[u8]) -> Option<([u8; 16], u16)> {
    let floors = u16::from_le_bytes([*tower.first()?, *tower.get(1)?]);
    if floors < 1 {
        return None;
    }
    let lhs_len = usize::from(u16::from_le_bytes([*tower.get(2)?, *tower.get(3)?]));
    let lhs = tower.get(4..4 + lhs_len)?;
    if lhs_len != 19 || lhs[0] != 0x0d {
        return None;
    }
    let mut uuid = [0u8; 16];
    uuid.copy_from_slice(&lhs[1..17]);
    Some((uuid, u16::from_le_bytes([lhs[17], lhs[18]])))
}

/// The tower that says `service` is on TCP `port` at `ip`.
pub fn tcp_tower(service: Service, ip: Ipv4Addr, port: u16) -> Vec<u8> {
    let (uuid, major) = service.interface();
    let minor: u16 = if service == Service::Witness { 1 } else { 0 };
    let mut t = Vec::new();
    t.extend_from_slice(&5u16.to_le_bytes());
    let mut floor = |lhs: &[u8], rhs: &[u8]| {
        t.extend_from_slice(&(lhs.len() as u16).to_le_bytes());
        t.extend_from_slice(lhs);
        t.extend_from_slice(&(rhs.len() as u16).to_le_bytes());
        t.extend_from_slice(rhs);
    };
    let mut iface = vec![0x0d];
    iface.extend_from_slice(&uuid);
    iface.extend_from_slice(&major.to_le_bytes());
    floor(&iface, &minor.to_le_bytes());
    let mut ndr = vec![0x0d];
    ndr.extend_from_slice(&NDR20);
    ndr.extend_from_slice(&2u16.to_le_bytes());
    floor(&ndr, &0u16.to_le_bytes());
    floor(&[0x0b], &0u16.to_le_bytes());
    floor(&[0x07], &port.to_be_bytes());
    floor(&[0x09], &ip.octets());
    t
}

/// Answers one endpoint mapper request: where `lookup` says the interface
/// the request's tower names is served, or "not registered". `Err`: a fault.
pub fn call(
    opnum: u16,
    stub: &[u8],
    lookup: impl Fn([u8; 16], u16) -> Option<Vec<u8>>,
) -> Result<Vec<u8>, u32> {
    if opnum != OP_EPT_MAP {
        return Err(FAULT_OP_RANGE);
    }
    let (max_towers, found) = ept_map(stub, lookup).ok_or(super::FAULT_PROTO)?;
    let mut w = NdrWriter::new();
    // entry_handle: the null context handle (no further lookups).
    w.buf.extend_from_slice(&[0u8; 20]);
    let found: Vec<Vec<u8>> = found.into_iter().take(max_towers as usize).collect();
    w.u32(found.len() as u32);
    // towers: a conformant varying array of pointers, then each tower.
    w.u32(max_towers);
    w.u32(0);
    w.u32(found.len() as u32);
    for _ in &found {
        w.ptr();
    }
    for t in &found {
        w.u32(t.len() as u32);
        w.u32(t.len() as u32);
        w.buf.extend_from_slice(t);
        w.align4();
    }
    w.u32(if found.is_empty() {
        EPT_S_NOT_REGISTERED
    } else {
        0
    });
    Ok(w.buf)
}

/// ept_map's input: the object (ignored), the tower, the entry handle and
/// max_towers; `lookup` of the tower's interface.
fn ept_map(
    stub: &[u8],
    lookup: impl Fn([u8; 16], u16) -> Option<Vec<u8>>,
) -> Option<(u32, Vec<Vec<u8>>)> {
    let mut r = NdrReader::new(stub);
    if r.u32().ok()? != 0 {
        r.bytes(16).ok()?;
    }
    let mut found = Vec::new();
    if r.u32().ok()? != 0 {
        let max = r.u32().ok()?;
        let len = r.u32().ok()?;
        if len > max || len > TOWER_MAX {
            return None;
        }
        let tower = r.bytes(len as usize).ok()?;
        if let Some((uuid, major)) = tower_interface(tower) {
            found.extend(lookup(uuid, major));
        }
    }
    r.align4().ok()?;
    r.bytes(20).ok()?;
    let max_towers = r.u32().ok()?;
    Some((max_towers, found))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(tower: &[u8], max_towers: u32) -> Vec<u8> {
        let mut w = NdrWriter::new();
        w.u32(0); // no object
        w.ptr();
        w.u32(tower.len() as u32);
        w.u32(tower.len() as u32);
        w.buf.extend_from_slice(tower);
        w.align4();
        w.buf.extend_from_slice(&[0u8; 20]);
        w.u32(max_towers);
        w.buf
    }

    #[test]
    fn ept_map_answers_the_witness_port_and_refuses_other_interfaces() {
        let ip = Ipv4Addr::new(10, 0, 0, 2);
        let asked = tcp_tower(Service::Witness, Ipv4Addr::UNSPECIFIED, 0);
        let lookup = |u: [u8; 16], major: u16| {
            let (w, wm) = Service::Witness.interface();
            (u == w && major == wm).then(|| tcp_tower(Service::Witness, ip, 5040))
        };
        let out = call(OP_EPT_MAP, &request(&asked, 4), lookup).unwrap();
        // handle, num_towers 1, max 4, offset 0, actual 1, a pointer, the tower.
        assert_eq!(u32::from_le_bytes(out[20..24].try_into().unwrap()), 1);
        let tower = tcp_tower(Service::Witness, ip, 5040);
        let at = 20 + 4 + 12 + 4 + 8;
        assert_eq!(&out[at..at + tower.len()], &tower[..]);
        // TCP floor: port 5040 big-endian; IP floor: the address.
        assert!(tower
            .ends_with(&[0x07, 0x02, 0x00, 0x13, 0xb0, 0x01, 0x00, 0x09, 0x04, 0x00, 10, 0, 0, 2]));
        assert_eq!(
            u32::from_le_bytes(out[out.len() - 4..].try_into().unwrap()),
            0
        );
        let other = tcp_tower(Service::Srvsvc, Ipv4Addr::UNSPECIFIED, 0);
        let out = call(OP_EPT_MAP, &request(&other, 4), lookup).unwrap();
        assert_eq!(u32::from_le_bytes(out[20..24].try_into().unwrap()), 0);
        assert_eq!(
            u32::from_le_bytes(out[out.len() - 4..].try_into().unwrap()),
            EPT_S_NOT_REGISTERED
        );
        assert!(call(OP_EPT_MAP, &[1, 2, 3], lookup).is_err());
        assert_eq!(call(2, &[], lookup), Err(FAULT_OP_RANGE));
    }
}
