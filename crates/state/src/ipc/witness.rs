//! The Witness service's calls ([MS-SWN] 3.1.4; interface
//! ccd8c074-d0e5-4a40-92b4-d074faa6ba28 v1.1): what a client of a clustered
//! share asks another node so as to be told when the node serving it goes
//! down or should be left.
//!
//! Sans I/O: the caller keeps one [`Registrations`] per association (a TCP
//! connection; its context handles end with it, as [MS-RPCE]'s rundown
//! does), gives each call the cluster's [`View`] of now, and holds an
//! AsyncNotify ([`Outcome::Hold`]) until [`Registrations::notify`] has an
//! answer for it or its timeout passes ([`timeout_answer`]).

use std::net::IpAddr;

use super::ndr::{NdrReader, NdrWriter};
use super::FAULT_OP_RANGE;

pub const OP_GET_INTERFACE_LIST: u16 = 0;
pub const OP_REGISTER: u16 = 1;
pub const OP_UNREGISTER: u16 = 2;
pub const OP_ASYNC_NOTIFY: u16 = 3;
pub const OP_REGISTER_EX: u16 = 4;

const WITNESS_V1: u32 = 0x0001_0001;
const WITNESS_V2: u32 = 0x0002_0000;

const WERR_OK: u32 = 0;
const WERR_INVALID_PARAMETER: u32 = 87;
const WERR_REVISION_MISMATCH: u32 = 1306;
const WERR_NOT_FOUND: u32 = 1168;
const WERR_NO_SYSTEM_RESOURCES: u32 = 1450;
const WERR_TIMEOUT: u32 = 1460;
const WERR_INVALID_STATE: u32 = 5023;

const INFO_IPV4_VALID: u32 = 0x01;
const INFO_IPV6_VALID: u32 = 0x02;
const INFO_WITNESS_IF: u32 = 0x04;
const STATE_AVAILABLE: u16 = 0x01;
const STATE_UNAVAILABLE: u16 = 0xff;

const NOTIFY_RESOURCE_CHANGE: u32 = 1;
const NOTIFY_CLIENT_MOVE: u32 = 2;
const RESOURCE_AVAILABLE: u32 = 0x01;
const RESOURCE_UNAVAILABLE: u32 = 0xff;
const IPADDR_V4: u32 = 0x01;
const IPADDR_V6: u32 = 0x02;
const IPADDR_ONLINE: u32 = 0x08;

/// Registrations one association may hold.
pub const REGISTRATIONS_MAX: usize = 64;

/// What a node is to the Witness service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeState {
    /// A live member of the cluster.
    Available,
    /// Gone from the membership (its lease lapsed, or it stopped).
    Unavailable,
    /// Live, but drained (`ringshare cluster drain`): its clients should move.
    Drained,
}

/// One public address of a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    pub node: u16,
    pub ip: IpAddr,
    pub state: NodeState,
}

/// The cluster as the Witness service answers it now.
#[derive(Debug, Clone, Default)]
pub struct View {
    /// ServerGlobalName: the name clients connect to (the NetBIOS name).
    pub name: String,
    /// This node: its interfaces are not offered as witnesses.
    pub local_node: u16,
    /// Every node's public addresses, dead nodes' too (as Unavailable).
    pub interfaces: Vec<Interface>,
    /// The shares (RegisterEx's ShareName must be one of them).
    pub shares: Vec<String>,
}

impl View {
    fn state_of(&self, node: u16) -> NodeState {
        self.interfaces
            .iter()
            .find(|i| i.node == node)
            .map_or(NodeState::Unavailable, |i| i.state)
    }
}

/// What to do with a call.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Answer with this stub now.
    Reply(Vec<u8>),
    /// An AsyncNotify with nothing to say yet: hold it until
    /// [`Registrations::notify`] answers, or for `timeout_secs` (0: no
    /// limit), then answer [`timeout_answer`].
    Hold { handle: [u8; 20], timeout_secs: u32 },
}

struct Reg {
    handle: [u8; 20],
    node: u16,
    ip: IpAddr,
    timeout_secs: u32,
    /// The node's state the client was last told (or found at registration).
    told: NodeState,
}

/// One association's registrations.
pub struct Registrations {
    regs: Vec<Reg>,
    /// Makes handles of different associations differ.
    salt: [u8; 12],
    next: u32,
}

impl Registrations {
    /// `salt`: random bytes, so that one association cannot name another's handles.
    pub fn new(salt: [u8; 12]) -> Registrations {
        Registrations {
            regs: Vec::new(),
            salt,
            next: 1,
        }
    }

    /// How many registrations are held.
    pub fn len(&self) -> usize {
        self.regs.len()
    }

    /// Whether none are.
    pub fn is_empty(&self) -> bool {
        self.regs.is_empty()
    }

    /// Answers one call. `Err`: a DCE/RPC fault (an opnum not served, a stub
    /// that does not parse).
    pub fn call(&mut self, opnum: u16, stub: &[u8], view: &View) -> Result<Outcome, u32> {
        const BAD_STUB: u32 = super::FAULT_PROTO;
        let mut r = NdrReader::new(stub);
        match opnum {
            OP_GET_INTERFACE_LIST => Ok(Outcome::Reply(interface_list(view))),
            OP_REGISTER | OP_REGISTER_EX => {
                let ex = opnum == OP_REGISTER_EX;
                let version = r.u32().map_err(|_| BAD_STUB)?;
                let net_name = r.unique_string().map_err(|_| BAD_STUB)?;
                let share = if ex {
                    r.unique_string().map_err(|_| BAD_STUB)?
                } else {
                    None
                };
                let ip = r.unique_string().map_err(|_| BAD_STUB)?;
                let client = r.unique_string().map_err(|_| BAD_STUB)?;
                let timeout_secs = if ex {
                    let _flags = r.u32().map_err(|_| BAD_STUB)?;
                    r.u32().map_err(|_| BAD_STUB)?
                } else {
                    0
                };
                let want = if ex { WITNESS_V2 } else { WITNESS_V1 };
                let (handle, werr) = if version != want {
                    ([0; 20], WERR_REVISION_MISMATCH)
                } else {
                    self.register(net_name, share, ip, client, timeout_secs, view)
                };
                let mut w = NdrWriter::new();
                w.buf.extend_from_slice(&handle);
                w.u32(werr);
                Ok(Outcome::Reply(w.buf))
            }
            OP_UNREGISTER => {
                let handle: [u8; 20] = read_handle(&mut r).ok_or(BAD_STUB)?;
                let before = self.regs.len();
                self.regs.retain(|g| g.handle != handle);
                // Windows answers ERROR_INVALID_PARAMETER for a handle it
                // does not have (smbtorture's rpc.witness expects it).
                let werr = if self.regs.len() < before {
                    WERR_OK
                } else {
                    WERR_INVALID_PARAMETER
                };
                let mut w = NdrWriter::new();
                w.u32(werr);
                Ok(Outcome::Reply(w.buf))
            }
            OP_ASYNC_NOTIFY => {
                let handle: [u8; 20] = read_handle(&mut r).ok_or(BAD_STUB)?;
                let Some(reg) = self.regs.iter().find(|g| g.handle == handle) else {
                    return Ok(Outcome::Reply(no_response(WERR_NOT_FOUND)));
                };
                let timeout_secs = reg.timeout_secs;
                Ok(match self.notify(&handle, view) {
                    Some(stub) => Outcome::Reply(stub),
                    None => Outcome::Hold {
                        handle,
                        timeout_secs,
                    },
                })
            }
            _ => Err(FAULT_OP_RANGE),
        }
    }

    fn register(
        &mut self,
        net_name: Option<String>,
        share: Option<String>,
        ip: Option<String>,
        client: Option<String>,
        timeout_secs: u32,
        view: &View,
    ) -> ([u8; 20], u32) {
        let (Some(net_name), Some(ip), Some(_client)) = (net_name, ip, client) else {
            return ([0; 20], WERR_INVALID_PARAMETER);
        };
        let short = net_name.split('.').next().unwrap_or_default();
        if !short.eq_ignore_ascii_case(&view.name) {
            return ([0; 20], WERR_INVALID_PARAMETER);
        }
        let Some(iface) = ip
            .parse::<IpAddr>()
            .ok()
            .and_then(|a| view.interfaces.iter().find(|i| i.ip == a))
        else {
            return ([0; 20], WERR_INVALID_STATE);
        };
        if let Some(s) = share {
            if !view.shares.iter().any(|x| x.eq_ignore_ascii_case(&s)) {
                return ([0; 20], WERR_INVALID_STATE);
            }
        }
        if self.regs.len() >= REGISTRATIONS_MAX {
            return ([0; 20], WERR_NO_SYSTEM_RESOURCES);
        }
        let mut handle = [0u8; 20];
        handle[4..8].copy_from_slice(&self.next.to_le_bytes());
        handle[8..20].copy_from_slice(&self.salt);
        self.next = self.next.wrapping_add(1);
        self.regs.push(Reg {
            handle,
            node: iface.node,
            ip: iface.ip,
            timeout_secs,
            told: view.state_of(iface.node),
        });
        (handle, WERR_OK)
    }

    /// The answer to `handle`'s AsyncNotify when its node's state changed
    /// since the client was last told: RESOURCE_CHANGE when it went or came
    /// back, CLIENT_MOVE (to an available node's addresses) when it was
    /// drained. A registration that is gone answers ERROR_NOT_FOUND.
    pub fn notify(&mut self, handle: &[u8; 20], view: &View) -> Option<Vec<u8>> {
        let Some(reg) = self.regs.iter_mut().find(|g| g.handle == *handle) else {
            return Some(no_response(WERR_NOT_FOUND));
        };
        let now = view.state_of(reg.node);
        if now == reg.told {
            return None;
        }
        let before = std::mem::replace(&mut reg.told, now);
        let name = reg.ip.to_string();
        match (before, now) {
            (_, NodeState::Unavailable) => Some(resource_change(&name, RESOURCE_UNAVAILABLE)),
            (NodeState::Unavailable, NodeState::Available) => {
                Some(resource_change(&name, RESOURCE_AVAILABLE))
            }
            (_, NodeState::Drained) => {
                let to: Vec<IpAddr> = view
                    .interfaces
                    .iter()
                    .filter(|i| i.node != reg.node && i.state == NodeState::Available)
                    .map(|i| i.ip)
                    .collect();
                let first = to.iter().find(|a| a.is_ipv4() == reg.ip.is_ipv4());
                let first = first.or(to.first())?;
                let node = view.interfaces.iter().find(|i| i.ip == *first)?.node;
                let ips: Vec<IpAddr> = to
                    .iter()
                    .copied()
                    .filter(|a| view.interfaces.iter().any(|i| i.ip == *a && i.node == node))
                    .collect();
                Some(client_move(&ips))
            }
            // Undrained: nothing to say.
            _ => None,
        }
    }
}

fn read_handle(r: &mut NdrReader) -> Option<[u8; 20]> {
    r.bytes(20).ok()?.try_into().ok()
}

/// AsyncNotify's answer when its registration's timeout passed.
pub fn timeout_answer() -> Vec<u8> {
    no_response(WERR_TIMEOUT)
}

/// AsyncNotify's answer without a response: a null pointer and `werr`.
fn no_response(werr: u32) -> Vec<u8> {
    let mut w = NdrWriter::new();
    w.u32(0);
    w.u32(werr);
    w.buf
}

/// WitnessrGetInterfaceList's answer ([MS-SWN] 2.2.2.5).
fn interface_list(view: &View) -> Vec<u8> {
    let mut w = NdrWriter::new();
    w.ptr();
    w.u32(view.interfaces.len() as u32);
    w.ptr();
    w.u32(view.interfaces.len() as u32);
    let name: Vec<u16> = view.name.encode_utf16().take(259).collect();
    for i in &view.interfaces {
        w.align4();
        let mut group = [0u16; 260];
        group[..name.len()].copy_from_slice(&name);
        for u in group {
            w.buf.extend_from_slice(&u.to_le_bytes());
        }
        w.u32(WITNESS_V2);
        w.u16(if i.state == NodeState::Available {
            STATE_AVAILABLE
        } else {
            STATE_UNAVAILABLE
        });
        let mut flags = if i.node == view.local_node {
            0
        } else {
            INFO_WITNESS_IF
        };
        match i.ip {
            IpAddr::V4(a) => {
                flags |= INFO_IPV4_VALID;
                w.align4();
                w.buf.extend_from_slice(&a.octets());
                w.buf.extend_from_slice(&[0; 16]);
            }
            IpAddr::V6(a) => {
                flags |= INFO_IPV6_VALID;
                w.align4();
                w.buf.extend_from_slice(&[0; 4]);
                w.buf.extend_from_slice(&a.octets());
            }
        }
        w.u32(flags);
    }
    w.u32(WERR_OK);
    w.buf
}

/// An AsyncNotify answer carrying one message of `kind`.
fn notify_response(kind: u32, message: &[u8]) -> Vec<u8> {
    let mut w = NdrWriter::new();
    w.ptr();
    w.u32(kind);
    w.u32(message.len() as u32);
    w.u32(1);
    w.ptr();
    w.u32(message.len() as u32);
    w.buf.extend_from_slice(message);
    w.u32(WERR_OK);
    w.buf
}

/// RESOURCE_CHANGE ([MS-SWN] 2.2.2.1).
fn resource_change(name: &str, state: u32) -> Vec<u8> {
    let units: Vec<u16> = name.encode_utf16().chain(std::iter::once(0)).collect();
    let len = 8 + units.len() * 2;
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_le_bytes());
    m.extend_from_slice(&state.to_le_bytes());
    for u in units {
        m.extend_from_slice(&u.to_le_bytes());
    }
    notify_response(NOTIFY_RESOURCE_CHANGE, &m)
}

/// CLIENT_MOVE: an IPADDR_INFO_LIST ([MS-SWN] 2.2.2.2, 2.2.2.3).
fn client_move(ips: &[IpAddr]) -> Vec<u8> {
    let len = 12 + 24 * ips.len();
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_le_bytes());
    m.extend_from_slice(&0u32.to_le_bytes());
    m.extend_from_slice(&(ips.len() as u32).to_le_bytes());
    for ip in ips {
        match ip {
            IpAddr::V4(a) => {
                m.extend_from_slice(&(IPADDR_V4 | IPADDR_ONLINE).to_le_bytes());
                m.extend_from_slice(&a.octets());
                m.extend_from_slice(&[0; 16]);
            }
            IpAddr::V6(a) => {
                m.extend_from_slice(&(IPADDR_V6 | IPADDR_ONLINE).to_le_bytes());
                m.extend_from_slice(&[0; 4]);
                m.extend_from_slice(&a.octets());
            }
        }
    }
    notify_response(NOTIFY_CLIENT_MOVE, &m)
}

#[cfg(test)]
mod tests;
