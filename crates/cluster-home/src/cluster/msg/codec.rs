//! Encoding and decoding of [`super::Message`] and of a persistent open's
//! record: little-endian, fixed fields, every length checked. A message is
//! network input: decoding it never panics.

use ringshare_vfs::RelPath;
use ringshare_wire::codec::HEADER_LEN;
use ringshare_wire::consts::{LeaseFlags, LeaseState};
use ringshare_wire::create::{Lease, LeaseV2};
use ringshare_wire::misc::OplockBreak;
use ringshare_wire::{FileId, NtStatus, Reader, WireError, WriteExt};

use super::{
    Answer, Ask, CaRecord, Call, Change, Closed, GiveUpAsk, HandOver, Message, Moved, Post, Record,
    Transferred, MESSAGE_MAX, UNKNOWN_KIND, WHO_GROUPS_MAX,
};
use crate::files::locks::ByteRangeLock;
use crate::files::oplock::Break;
use crate::files::oplock::{self, Caching, Grant, LeaseId, Route, Wish};
use crate::files::{FileKey, ShareEntry};

const CALL: u8 = 1;
const ANSWER: u8 = 2;
const POST: u8 = 3;
const CHANGES: u8 = 4;
const INTEREST: u8 = 5;
const DIR_CHANGED: u8 = 6;

impl Message {
    pub fn encode(&self) -> Vec<u8> {
        let mut o = Vec::with_capacity(128);
        match self {
            Message::Call(c) => {
                o.put_u8(CALL);
                put_call(&mut o, c);
            }
            Message::Answer(a) => {
                o.put_u8(ANSWER);
                put_answer(&mut o, a);
            }
            Message::Post(p) => {
                o.put_u8(POST);
                put_route(&mut o, p.route);
                put_notice(&mut o, &p.notice);
            }
            Message::Changes { share, changes } => {
                o.put_u8(CHANGES);
                put_str(&mut o, share);
                o.put_u16(changes.len().min(u16::MAX as usize) as u16);
                for c in changes.iter().take(u16::MAX as usize) {
                    o.put_u32(c.action);
                    o.put_u32(c.filter);
                    put_path(&mut o, &c.path);
                    match &c.stream {
                        None => o.put_u8(0),
                        Some(s) => {
                            o.put_u8(1);
                            put_str(&mut o, s);
                        }
                    }
                }
            }
            Message::Interest { from, watching } => {
                o.put_u8(INTEREST);
                o.put_u16(*from);
                put_bool(&mut o, *watching);
            }
            Message::DirChanged { share, dir, except } => {
                o.put_u8(DIR_CHANGED);
                put_str(&mut o, share);
                put_path(&mut o, dir);
                put_opt(&mut o, *except, |o, k| o.put_bytes(&k));
            }
        }
        o
    }

    pub fn decode(b: &[u8]) -> Result<Message, WireError> {
        if b.len() > MESSAGE_MAX {
            return Err(WireError::Invalid("cluster message too long"));
        }
        let mut r = Reader::new(b);
        let m = match r.u8()? {
            CALL => Message::Call(get_call(&mut r)?),
            ANSWER => Message::Answer(get_answer(&mut r)?),
            POST => Message::Post(Post {
                route: get_route(&mut r)?,
                notice: get_notice(&mut r)?,
            }),
            CHANGES => {
                let share = get_str(&mut r)?;
                let n = get_count(&mut r, 4 + 4 + 2 + 1)?;
                let mut changes = Vec::with_capacity(n);
                for _ in 0..n {
                    changes.push(Change {
                        action: r.u32()?,
                        filter: r.u32()?,
                        path: get_path(&mut r)?,
                        stream: get_opt(&mut r, get_str)?,
                    });
                }
                Message::Changes { share, changes }
            }
            INTEREST => Message::Interest {
                from: r.u16()?,
                watching: get_bool(&mut r)?,
            },
            DIR_CHANGED => Message::DirChanged {
                share: get_str(&mut r)?,
                dir: get_path(&mut r)?,
                except: get_opt(&mut r, |r| r.array())?,
            },
            _ => return Err(UNKNOWN_KIND),
        };
        if !r.is_empty() {
            return Err(WireError::Invalid("cluster message has trailing bytes"));
        }
        Ok(m)
    }
}

fn put_key(o: &mut Vec<u8>, k: FileKey) {
    o.put_u64(k.dev);
    o.put_u64(k.ino);
    o.put_u64(k.stream);
}

fn get_key(r: &mut Reader<'_>) -> Result<FileKey, WireError> {
    Ok(FileKey {
        dev: r.u64()?,
        ino: r.u64()?,
        stream: r.u64()?,
    })
}

fn put_route(o: &mut Vec<u8>, route: Route) {
    o.put_u64(route.conn_id);
    o.put_u64(route.session_id);
}

fn get_route(r: &mut Reader<'_>) -> Result<Route, WireError> {
    Ok(Route {
        conn_id: r.u64()?,
        session_id: r.u64()?,
    })
}

fn put_bool(o: &mut Vec<u8>, v: bool) {
    o.put_u8(u8::from(v));
}

fn get_bool(r: &mut Reader<'_>) -> Result<bool, WireError> {
    match r.u8()? {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(WireError::Invalid("bad boolean")),
    }
}

fn put_str(o: &mut Vec<u8>, s: &str) {
    // Every string is bounded by MESSAGE_MAX when decoded; a longer one
    // fails there.
    put_str_bytes(o, s.as_bytes());
}

fn put_str_bytes(o: &mut Vec<u8>, b: &[u8]) {
    o.put_u32(b.len().min(u32::MAX as usize) as u32);
    o.put_bytes(b);
}

fn get_str(r: &mut Reader<'_>) -> Result<String, WireError> {
    let n = r.u32()? as usize;
    let b = r.bytes(n)?;
    String::from_utf8(b.to_vec()).map_err(|_| WireError::Invalid("string not UTF-8"))
}

fn put_path(o: &mut Vec<u8>, p: &RelPath) {
    o.put_u16(p.components().len().min(u16::MAX as usize) as u16);
    for c in p.components() {
        put_str(o, c);
    }
}

fn get_path(r: &mut Reader<'_>) -> Result<RelPath, WireError> {
    let n = r.u16()? as usize;
    let mut parts = Vec::with_capacity(n.min(64));
    for _ in 0..n {
        parts.push(get_str(r)?);
    }
    RelPath::from_components(parts).map_err(|_| WireError::Invalid("bad path"))
}

fn put_status(o: &mut Vec<u8>, s: NtStatus) {
    o.put_u32(s.0);
}

fn get_status(r: &mut Reader<'_>) -> Result<NtStatus, WireError> {
    Ok(NtStatus(r.u32()?))
}

fn put_lease_id(o: &mut Vec<u8>, id: LeaseId) {
    o.put_bytes(&id.client_guid);
    o.put_bytes(&id.key);
}

fn get_lease_id(r: &mut Reader<'_>) -> Result<LeaseId, WireError> {
    Ok(LeaseId {
        client_guid: r.array()?,
        key: r.array()?,
    })
}

fn put_opt<T: Copy>(o: &mut Vec<u8>, v: Option<T>, put: impl FnOnce(&mut Vec<u8>, T)) {
    match v {
        None => o.put_u8(0),
        Some(v) => {
            o.put_u8(1);
            put(o, v);
        }
    }
}

fn get_opt<T>(
    r: &mut Reader<'_>,
    get: impl FnOnce(&mut Reader<'_>) -> Result<T, WireError>,
) -> Result<Option<T>, WireError> {
    Ok(if get_bool(r)? { Some(get(r)?) } else { None })
}

fn put_lock(o: &mut Vec<u8>, l: ByteRangeLock) {
    o.put_u64(l.offset);
    o.put_u64(l.length);
    put_bool(o, l.exclusive);
    o.put_u64(l.owner);
}

fn get_lock(r: &mut Reader<'_>) -> Result<ByteRangeLock, WireError> {
    Ok(ByteRangeLock {
        offset: r.u64()?,
        length: r.u64()?,
        exclusive: get_bool(r)?,
        owner: r.u64()?,
    })
}

/// A count of list items, each at least `item_min` bytes long, bounded by
/// what is left of the message.
fn get_count(r: &mut Reader<'_>, item_min: usize) -> Result<usize, WireError> {
    let n = r.u16()? as usize;
    if n * item_min > r.remaining() {
        return Err(WireError::Invalid("list longer than its message"));
    }
    Ok(n)
}

fn put_lease_req(o: &mut Vec<u8>, l: &Lease) {
    o.put_bytes(&l.key);
    o.put_u32(l.state.0);
    o.put_u32(l.flags.0);
    o.put_u64(l.duration);
    put_opt(o, l.v2, |o, v| {
        o.put_bytes(&v.parent_key);
        o.put_u16(v.epoch);
    });
}

fn get_lease_req(r: &mut Reader<'_>) -> Result<Lease, WireError> {
    Ok(Lease {
        key: r.array()?,
        state: LeaseState(r.u32()?),
        flags: LeaseFlags(r.u32()?),
        duration: r.u64()?,
        v2: get_opt(r, |r| {
            Ok(LeaseV2 {
                parent_key: r.array()?,
                epoch: r.u16()?,
            })
        })?,
    })
}

fn put_ask(o: &mut Vec<u8>, a: &Ask) {
    o.put_u64(a.owner);
    o.put_u64(a.persistent_id);
    put_route(o, a.route);
    put_bool(o, a.wish.retry);
    o.put_u32(a.wish.access);
    o.put_u32(a.wish.share_access);
    put_bool(o, a.wish.truncate);
    put_bool(o, a.wish.delete_only);
    put_opt(o, a.wish.lease, put_lease_id);
    o.put_u8(a.requested);
    match &a.lease_req {
        None => o.put_u8(0),
        Some(l) => {
            o.put_u8(1);
            put_lease_req(o, l);
        }
    }
    put_str(o, &a.share);
    put_path(o, &a.path);
    put_bool(o, a.is_dir);
    o.put_u64(a.conn_id);
    o.put_u64(a.now_ms);
    put_who(o, a.who.as_ref());
}

/// A user: uid, gid and groups, or nothing (unknown, or too many groups).
fn put_who(o: &mut Vec<u8>, who: Option<&ringshare_vfs::Who>) {
    match who.filter(|w| w.groups().len() <= WHO_GROUPS_MAX) {
        None => o.put_u8(0),
        Some(w) => {
            o.put_u8(1);
            o.put_u32(w.uid());
            o.put_u32(w.gid());
            o.put_u16(w.groups().len() as u16);
            for g in w.groups() {
                o.put_u32(*g);
            }
        }
    }
}

fn get_who(r: &mut Reader<'_>) -> Result<Option<ringshare_vfs::Who>, WireError> {
    get_opt(r, |r| {
        let (uid, gid) = (r.u32()?, r.u32()?);
        let n = get_count(r, 4)?;
        if n > WHO_GROUPS_MAX {
            return Err(WireError::Invalid("a user with too many groups"));
        }
        let mut groups = Vec::with_capacity(n);
        for _ in 0..n {
            groups.push(r.u32()?);
        }
        let c = ringshare_vfs::Creds::new(uid, gid, groups);
        Ok(ringshare_vfs::creds::intern(c))
    })
}

fn get_ask(r: &mut Reader<'_>, posix: bool) -> Result<Ask, WireError> {
    Ok(Ask {
        owner: r.u64()?,
        persistent_id: r.u64()?,
        route: get_route(r)?,
        wish: Wish {
            retry: get_bool(r)?,
            access: r.u32()?,
            share_access: r.u32()?,
            truncate: get_bool(r)?,
            delete_only: get_bool(r)?,
            lease: get_opt(r, get_lease_id)?,
        },
        requested: r.u8()?,
        lease_req: get_opt(r, get_lease_req)?,
        share: get_str(r)?,
        path: get_path(r)?,
        is_dir: get_bool(r)?,
        conn_id: r.u64()?,
        now_ms: r.u64()?,
        who: get_who(r)?,
        posix,
    })
}

mod tag {
    pub(crate) const ADMIT: u8 = 1;
    pub const CLOSE: u8 = 2;
    pub const LOCK: u8 = 3;
    pub(crate) const RETRY_LOCK: u8 = 4;
    pub const UNLOCK: u8 = 5;
    pub const IO: u8 = 6;
    pub(crate) const CHANGED: u8 = 7;
    pub const DELETE_PENDING: u8 = 8;
    pub const RENAME: u8 = 9;
    pub(crate) const MOVED: u8 = 10;
    pub(crate) const ACK_OPLOCK: u8 = 11;
    pub(crate) const ACK_LEASE: u8 = 12;
    pub(crate) const RECLAIM: u8 = 13;
    pub(crate) const REVOKE: u8 = 14;
    pub(crate) const GIVE_UP: u8 = 15;
    pub(crate) const TRANSFER: u8 = 16;
    pub(crate) const CLOSE_PARKED: u8 = 17;
    pub(crate) const INTEREST: u8 = 18;
    /// [`super::Call::Admit`] of a POSIX open (level 3; the same fields as ADMIT).
    pub(crate) const ADMIT_POSIX: u8 = 19;
    /// [`super::Call::GiveUp`] by a node that reads a POSIX open's hand-over (level 3).
    pub(crate) const GIVE_UP_POSIX: u8 = 20;
    /// [`super::Call::Reclaim`] by a node that reads the opens' POSIX flags (level 3).
    pub(crate) const RECLAIM_POSIX: u8 = 21;
    /// [`super::Call::Adopt`] (level 5): a persistent open's record, as etcd holds one.
    pub(crate) const ADOPT: u8 = 22;
}

fn put_call(o: &mut Vec<u8>, c: &Call) {
    match c {
        Call::Admit(key, ask) => {
            o.put_u8(if ask.posix {
                tag::ADMIT_POSIX
            } else {
                tag::ADMIT
            });
            put_key(o, *key);
            put_ask(o, ask);
        }
        Call::Close {
            key,
            owner,
            delete_on_close,
        } => {
            o.put_u8(tag::CLOSE);
            put_key(o, *key);
            o.put_u64(*owner);
            put_bool(o, *delete_on_close);
        }
        Call::Lock {
            key,
            owner,
            asks,
            max,
            now_ms,
        } => {
            o.put_u8(tag::LOCK);
            put_key(o, *key);
            o.put_u64(*owner);
            o.put_u16(asks.len().min(u16::MAX as usize) as u16);
            for (l, fail_immediately) in asks.iter().take(u16::MAX as usize) {
                match l {
                    Ok(l) => {
                        o.put_u8(1);
                        put_lock(o, *l);
                    }
                    Err(s) => {
                        o.put_u8(0);
                        put_status(o, *s);
                    }
                }
                put_bool(o, *fail_immediately);
            }
            o.put_u32(*max);
            o.put_u64(*now_ms);
        }
        Call::RetryLock(key, l) => {
            o.put_u8(tag::RETRY_LOCK);
            put_key(o, *key);
            put_lock(o, *l);
        }
        Call::Unlock { key, owner, ranges } => {
            o.put_u8(tag::UNLOCK);
            put_key(o, *key);
            o.put_u64(*owner);
            o.put_u16(ranges.len().min(u16::MAX as usize) as u16);
            for r in ranges.iter().take(u16::MAX as usize) {
                match r {
                    Ok((off, len)) => {
                        o.put_u8(1);
                        o.put_u64(*off);
                        o.put_u64(*len);
                    }
                    Err(s) => {
                        o.put_u8(0);
                        put_status(o, *s);
                    }
                }
            }
        }
        Call::Io {
            key,
            owner,
            offset,
            length,
            write,
            change,
            now_ms,
        } => {
            o.put_u8(tag::IO);
            put_key(o, *key);
            o.put_u64(*owner);
            o.put_u64(*offset);
            o.put_u64(*length);
            put_bool(o, *write);
            put_bool(o, *change);
            o.put_u64(*now_ms);
        }
        Call::Changed { key, owner, now_ms } => {
            o.put_u8(tag::CHANGED);
            put_key(o, *key);
            o.put_u64(*owner);
            o.put_u64(*now_ms);
        }
        Call::DeletePending(key, set) => {
            o.put_u8(tag::DELETE_PENDING);
            put_key(o, *key);
            put_opt(o, *set, put_bool);
        }
        Call::Rename {
            key,
            owner,
            conn_id,
            now_ms,
        } => {
            o.put_u8(tag::RENAME);
            put_key(o, *key);
            o.put_u64(*owner);
            o.put_u64(*conn_id);
            o.put_u64(*now_ms);
        }
        Call::Moved(key, to) => {
            o.put_u8(tag::MOVED);
            put_key(o, *key);
            put_path(o, to);
        }
        Call::AckOplock { key, owner, level } => {
            o.put_u8(tag::ACK_OPLOCK);
            put_key(o, *key);
            o.put_u64(*owner);
            o.put_u8(*level);
        }
        Call::AckLease {
            key,
            id,
            state,
            now_ms,
        } => {
            o.put_u8(tag::ACK_LEASE);
            put_key(o, *key);
            put_lease_id(o, *id);
            o.put_u32(*state);
            o.put_u64(*now_ms);
        }
        Call::Revoke { key, clear } => {
            o.put_u8(tag::REVOKE);
            put_key(o, *key);
            o.put_u8(*clear);
        }
        Call::Reclaim {
            parts,
            after,
            posix,
        } => {
            o.put_u8(if *posix {
                tag::RECLAIM_POSIX
            } else {
                tag::RECLAIM
            });
            o.put_u16(parts.len().min(u16::MAX as usize) as u16);
            for p in parts.iter().take(u16::MAX as usize) {
                o.put_u32(*p);
            }
            put_opt(o, *after, put_key);
        }
        Call::Interest { from } => {
            o.put_u8(tag::INTEREST);
            o.put_u16(*from);
        }
        Call::GiveUp(a) => {
            o.put_u8(if a.posix {
                tag::GIVE_UP_POSIX
            } else {
                tag::GIVE_UP
            });
            o.put_u64(a.file_id.persistent);
            o.put_u64(a.file_id.volatile);
            put_opt(o, a.create_guid, |o, g| o.put_bytes(&g));
            put_opt(o, a.lease_key, |o, g| o.put_bytes(&g));
            o.put_bytes(&a.client_guid);
            put_str(o, &a.name);
            put_str(o, &a.share);
            o.put_u32(a.uid);
            put_str(o, &a.user);
        }
        Call::Transfer(key, m) => {
            o.put_u8(tag::TRANSFER);
            put_key(o, *key);
            o.put_u64(m.from);
            o.put_u64(m.to);
            put_route(o, m.route);
            put_who(o, m.who.as_ref());
        }
        Call::Adopt(rec) => {
            o.put_u8(tag::ADOPT);
            put_ca(o, rec);
        }
        Call::CloseParked(ids) => {
            o.put_u8(tag::CLOSE_PARKED);
            o.put_u16(ids.len().min(u16::MAX as usize) as u16);
            for (p, v) in ids.iter().take(u16::MAX as usize) {
                o.put_u64(*p);
                o.put_u64(*v);
            }
        }
    }
}

fn get_call(r: &mut Reader<'_>) -> Result<Call, WireError> {
    let kind = r.u8()?;
    Ok(match kind {
        tag::ADMIT => Call::Admit(get_key(r)?, Box::new(get_ask(r, false)?)),
        tag::ADMIT_POSIX => Call::Admit(get_key(r)?, Box::new(get_ask(r, true)?)),
        tag::CLOSE => Call::Close {
            key: get_key(r)?,
            owner: r.u64()?,
            delete_on_close: get_bool(r)?,
        },
        tag::LOCK => {
            let key = get_key(r)?;
            let owner = r.u64()?;
            let n = get_count(r, 6)?;
            let mut asks = Vec::with_capacity(n);
            for _ in 0..n {
                let l = if get_bool(r)? {
                    Ok(get_lock(r)?)
                } else {
                    Err(get_status(r)?)
                };
                asks.push((l, get_bool(r)?));
            }
            Call::Lock {
                key,
                owner,
                asks,
                max: r.u32()?,
                now_ms: r.u64()?,
            }
        }
        tag::RETRY_LOCK => Call::RetryLock(get_key(r)?, get_lock(r)?),
        tag::UNLOCK => {
            let key = get_key(r)?;
            let owner = r.u64()?;
            let n = get_count(r, 5)?;
            let mut ranges = Vec::with_capacity(n);
            for _ in 0..n {
                ranges.push(if get_bool(r)? {
                    Ok((r.u64()?, r.u64()?))
                } else {
                    Err(get_status(r)?)
                });
            }
            Call::Unlock { key, owner, ranges }
        }
        tag::IO => Call::Io {
            key: get_key(r)?,
            owner: r.u64()?,
            offset: r.u64()?,
            length: r.u64()?,
            write: get_bool(r)?,
            change: get_bool(r)?,
            now_ms: r.u64()?,
        },
        tag::CHANGED => Call::Changed {
            key: get_key(r)?,
            owner: r.u64()?,
            now_ms: r.u64()?,
        },
        tag::DELETE_PENDING => Call::DeletePending(get_key(r)?, get_opt(r, get_bool)?),
        tag::RENAME => Call::Rename {
            key: get_key(r)?,
            owner: r.u64()?,
            conn_id: r.u64()?,
            now_ms: r.u64()?,
        },
        tag::MOVED => Call::Moved(get_key(r)?, get_path(r)?),
        tag::ACK_OPLOCK => Call::AckOplock {
            key: get_key(r)?,
            owner: r.u64()?,
            level: r.u8()?,
        },
        tag::ACK_LEASE => Call::AckLease {
            key: get_key(r)?,
            id: get_lease_id(r)?,
            state: r.u32()?,
            now_ms: r.u64()?,
        },
        tag::REVOKE => Call::Revoke {
            key: get_key(r)?,
            clear: r.u8()?,
        },
        tag::RECLAIM | tag::RECLAIM_POSIX => {
            let n = get_count(r, 4)?;
            let mut parts = Vec::with_capacity(n);
            for _ in 0..n {
                parts.push(r.u32()?);
            }
            Call::Reclaim {
                parts,
                after: get_opt(r, get_key)?,
                posix: kind == tag::RECLAIM_POSIX,
            }
        }
        tag::INTEREST => Call::Interest { from: r.u16()? },
        tag::GIVE_UP | tag::GIVE_UP_POSIX => Call::GiveUp(Box::new(GiveUpAsk {
            file_id: FileId {
                persistent: r.u64()?,
                volatile: r.u64()?,
            },
            create_guid: get_opt(r, |r| r.array())?,
            lease_key: get_opt(r, |r| r.array())?,
            client_guid: r.array()?,
            name: get_str(r)?,
            share: get_str(r)?,
            uid: r.u32()?,
            user: get_str(r)?,
            posix: kind == tag::GIVE_UP_POSIX,
        })),
        tag::TRANSFER => Call::Transfer(
            get_key(r)?,
            Box::new(Moved {
                from: r.u64()?,
                to: r.u64()?,
                route: get_route(r)?,
                who: get_who(r)?,
            }),
        ),
        tag::CLOSE_PARKED => {
            let n = get_count(r, 16)?;
            let mut ids = Vec::with_capacity(n);
            for _ in 0..n {
                ids.push((r.u64()?, r.u64()?));
            }
            Call::CloseParked(ids)
        }
        tag::ADOPT => Call::Adopt(Box::new(get_ca(r)?)),
        _ => return Err(UNKNOWN_KIND),
    })
}

mod answer {
    pub(crate) const ADMITTED: u8 = 1;
    pub const WAIT: u8 = 2;
    pub(crate) const REFUSED: u8 = 3;
    pub(crate) const DONE: u8 = 4;
    pub(crate) const CLOSED: u8 = 5;
    pub(crate) const FLAG: u8 = 6;
    pub const IO: u8 = 7;
    pub const LEVEL: u8 = 8;
    pub const PENDING: u8 = 9;
    pub(crate) const RECORDS: u8 = 10;
    pub(crate) const GIVEN_UP: u8 = 11;
    pub(crate) const TRANSFERRED: u8 = 12;
    /// [`super::Answer::Records`] whose opens each carry their POSIX flag (level 3).
    pub(crate) const RECORDS_POSIX: u8 = 13;
    /// [`super::Answer::GivenUp`] of a POSIX open (level 3; the same fields as GIVEN_UP).
    pub(crate) const GIVEN_UP_POSIX: u8 = 14;
}

fn put_answer(o: &mut Vec<u8>, a: &Answer) {
    match a {
        Answer::Admitted(g, io) => {
            o.put_u8(answer::ADMITTED);
            o.put_u8(*io);
            o.put_u8(g.level);
            o.put_u32(g.lease_state);
            put_bool(o, g.lease_breaking);
            o.put_u16(g.epoch);
            put_bool(o, g.v2);
            put_opt(o, g.parent_key, |o, k| o.put_bytes(&k));
        }
        Answer::Wait => o.put_u8(answer::WAIT),
        Answer::Refused(s) => {
            o.put_u8(answer::REFUSED);
            put_status(o, *s);
        }
        Answer::Done => o.put_u8(answer::DONE),
        Answer::Closed(c, lease_gone) => {
            o.put_u8(answer::CLOSED);
            put_bool(o, c.remove);
            put_bool(o, c.last_open);
            put_path(o, &c.path);
            put_bool(o, c.is_dir);
            put_bool(o, c.newly_pending);
            put_opt(o, *lease_gone, put_lease_id);
        }
        Answer::Flag(v) => {
            o.put_u8(answer::FLAG);
            put_bool(o, *v);
        }
        Answer::Io {
            conflict,
            writers,
            grant,
        } => {
            o.put_u8(answer::IO);
            put_bool(o, *conflict);
            put_bool(o, *writers);
            o.put_u8(*grant);
        }
        Answer::Level(v) => {
            o.put_u8(answer::LEVEL);
            o.put_u32(*v);
        }
        Answer::Pending { was, now } => {
            o.put_u8(answer::PENDING);
            put_bool(o, *was);
            put_bool(o, *now);
        }
        Answer::Records { records, next } => {
            let posix = super::any_posix(records);
            o.put_u8(if posix {
                answer::RECORDS_POSIX
            } else {
                answer::RECORDS
            });
            o.put_u16(records.len().min(u16::MAX as usize) as u16);
            for rec in records.iter().take(u16::MAX as usize) {
                put_record(o, rec, posix);
            }
            put_opt(o, *next, put_key);
        }
        Answer::GivenUp(h) => {
            o.put_u8(if h.posix {
                answer::GIVEN_UP_POSIX
            } else {
                answer::GIVEN_UP
            });
            put_handover(o, h);
        }
        Answer::Transferred(t) => {
            o.put_u8(answer::TRANSFERRED);
            put_share_entry(o, &t.open);
            put_opt(o, t.lease.as_ref(), put_lease);
            o.put_u16(t.locks.len().min(u16::MAX as usize) as u16);
            for l in t.locks.iter().take(u16::MAX as usize) {
                put_lock(o, *l);
            }
            put_bool(o, t.delete_pending);
            o.put_u8(t.grant);
        }
    }
}

fn get_answer(r: &mut Reader<'_>) -> Result<Answer, WireError> {
    Ok(match r.u8()? {
        answer::ADMITTED => {
            let io = r.u8()?;
            let g = Grant {
                level: r.u8()?,
                lease_state: r.u32()?,
                lease_breaking: get_bool(r)?,
                epoch: r.u16()?,
                v2: get_bool(r)?,
                parent_key: get_opt(r, |r| r.array())?,
            };
            Answer::Admitted(g, io)
        }
        answer::WAIT => Answer::Wait,
        answer::REFUSED => Answer::Refused(get_status(r)?),
        answer::DONE => Answer::Done,
        answer::CLOSED => Answer::Closed(
            Closed {
                remove: get_bool(r)?,
                last_open: get_bool(r)?,
                path: get_path(r)?,
                is_dir: get_bool(r)?,
                newly_pending: get_bool(r)?,
            },
            get_opt(r, get_lease_id)?,
        ),
        answer::FLAG => Answer::Flag(get_bool(r)?),
        answer::IO => Answer::Io {
            conflict: get_bool(r)?,
            writers: get_bool(r)?,
            grant: r.u8()?,
        },
        answer::LEVEL => Answer::Level(r.u32()?),
        answer::PENDING => Answer::Pending {
            was: get_bool(r)?,
            now: get_bool(r)?,
        },
        kind @ (answer::RECORDS | answer::RECORDS_POSIX) => {
            let n = get_count(r, 24)?;
            let mut records = Vec::with_capacity(n);
            for _ in 0..n {
                records.push(get_record(r, kind == answer::RECORDS_POSIX)?);
            }
            Answer::Records {
                records,
                next: get_opt(r, get_key)?,
            }
        }
        answer::GIVEN_UP => Answer::GivenUp(Box::new(get_handover(r, false)?)),
        answer::GIVEN_UP_POSIX => Answer::GivenUp(Box::new(get_handover(r, true)?)),
        answer::TRANSFERRED => {
            let open = get_share_entry(r)?;
            let lease = get_opt(r, get_lease)?;
            let n = get_count(r, 25)?;
            let mut locks = Vec::with_capacity(n);
            for _ in 0..n {
                locks.push(get_lock(r)?);
            }
            Answer::Transferred(Box::new(Transferred {
                open,
                lease,
                locks,
                delete_pending: get_bool(r)?,
                grant: r.u8()?,
            }))
        }
        _ => return Err(UNKNOWN_KIND),
    })
}

mod notice {
    pub const OPLOCK_BREAK: u8 = 1;
    pub(crate) const LEASE_BREAK: u8 = 2;
    pub const RETRY: u8 = 3;
}

/// What one node sends another for a connection: breaks and retries.
fn put_notice(o: &mut Vec<u8>, n: &Break) {
    match n {
        Break::Oplock {
            session_id,
            file_id,
            level,
        } => {
            o.put_u8(notice::OPLOCK_BREAK);
            o.put_u64(*session_id);
            o.put_u64(file_id.persistent);
            o.put_u64(file_id.volatile);
            o.put_u8(*level);
        }
        Break::Lease {
            session_id,
            notification,
        } => {
            o.put_u8(notice::LEASE_BREAK);
            o.put_u64(*session_id);
            // The body as the wire crate writes it to the client.
            let mut m = vec![0u8; HEADER_LEN];
            OplockBreak::LeaseBreakNotification(notification.clone()).encode(&mut m);
            put_str_bytes(o, &m[HEADER_LEN..]);
        }
        Break::Retry => o.put_u8(notice::RETRY),
    }
}

fn get_notice(r: &mut Reader<'_>) -> Result<Break, WireError> {
    Ok(match r.u8()? {
        notice::OPLOCK_BREAK => Break::Oplock {
            session_id: r.u64()?,
            file_id: FileId {
                persistent: r.u64()?,
                volatile: r.u64()?,
            },
            level: r.u8()?,
        },
        notice::LEASE_BREAK => {
            let session_id = r.u64()?;
            let n = r.u32()? as usize;
            let mut m = vec![0u8; HEADER_LEN];
            m.extend_from_slice(r.bytes(n)?);
            match OplockBreak::decode(&m)? {
                OplockBreak::LeaseBreakNotification(notification) => Break::Lease {
                    session_id,
                    notification,
                },
                _ => return Err(WireError::Invalid("not a lease break notification")),
            }
        }
        notice::RETRY => Break::Retry,
        _ => return Err(UNKNOWN_KIND),
    })
}

/// How many bytes `rec` takes in a message.
pub fn record_len(rec: &Record) -> usize {
    let mut o = Vec::new();
    put_record(&mut o, rec, true);
    o.len()
}

/// A record; `posix`: each open followed by its POSIX flag (RECORDS_POSIX).
fn put_record(o: &mut Vec<u8>, rec: &Record, posix: bool) {
    put_key(o, rec.key);
    put_str(o, &rec.share);
    put_path(o, &rec.path);
    put_bool(o, rec.is_dir);
    put_bool(o, rec.delete_pending);
    o.put_u16(rec.opens.len().min(u16::MAX as usize) as u16);
    for s in rec.opens.iter().take(u16::MAX as usize) {
        put_share_entry(o, s);
        if posix {
            put_bool(o, s.posix);
        }
    }
    o.put_u16(rec.locks.len().min(u16::MAX as usize) as u16);
    for l in rec.locks.iter().take(u16::MAX as usize) {
        put_lock(o, *l);
    }
    o.put_u16(rec.leases.len().min(u16::MAX as usize) as u16);
    for l in rec.leases.iter().take(u16::MAX as usize) {
        put_lease(o, l);
    }
}

fn put_share_entry(o: &mut Vec<u8>, s: &ShareEntry) {
    o.put_u64(s.owner);
    o.put_u32(s.access);
    o.put_u32(s.share_access);
    let c = &s.caching;
    o.put_u8(c.level);
    put_opt(o, c.breaking_to, |o, v| o.put_u8(v));
    put_opt(o, c.lease, put_lease_id);
    put_route(o, c.route);
    o.put_u64(c.file_id.0);
    o.put_u64(c.file_id.1);
    put_who(o, s.who.as_ref());
}

fn get_share_entry(r: &mut Reader<'_>) -> Result<ShareEntry, WireError> {
    Ok(ShareEntry {
        owner: r.u64()?,
        access: r.u32()?,
        share_access: r.u32()?,
        caching: Caching {
            level: r.u8()?,
            breaking_to: get_opt(r, |r| r.u8())?,
            break_deadline_ms: 0,
            lease: get_opt(r, get_lease_id)?,
            route: get_route(r)?,
            file_id: (r.u64()?, r.u64()?),
        },
        who: get_who(r)?,
        posix: false,
    })
}

/// A lease's state at its file (a break in flight is not sent: the
/// receiver takes it as ended at its target).
fn put_lease(o: &mut Vec<u8>, l: &oplock::Lease) {
    put_lease_id(o, l.id);
    o.put_u32(l.state);
    put_opt(o, l.breaking_to, |o, v| o.put_u32(v));
    o.put_u32(l.required);
    o.put_u16(l.epoch);
    put_bool(o, l.v2);
    put_opt(o, l.parent_key, |o, k| o.put_bytes(&k));
    put_route(o, l.route);
}

fn get_lease(r: &mut Reader<'_>) -> Result<oplock::Lease, WireError> {
    Ok(oplock::Lease {
        id: get_lease_id(r)?,
        state: r.u32()?,
        breaking_to: get_opt(r, |r| r.u32())?,
        required: r.u32()?,
        break_deadline_ms: 0,
        epoch: r.u16()?,
        v2: get_bool(r)?,
        parent_key: get_opt(r, |r| r.array())?,
        route: get_route(r)?,
    })
}

fn get_record(r: &mut Reader<'_>, posix: bool) -> Result<Record, WireError> {
    let key = get_key(r)?;
    let share = get_str(r)?;
    let path = get_path(r)?;
    let is_dir = get_bool(r)?;
    let delete_pending = get_bool(r)?;
    // Each list's items are at least this many bytes (bounds the counts).
    let n = get_count(r, 8 + 4 + 4 + 1 + 1 + 1 + 16 + 16 + 1)?;
    let mut opens = Vec::with_capacity(n);
    for _ in 0..n {
        let mut s = get_share_entry(r)?;
        s.posix = posix && get_bool(r)?;
        opens.push(s);
    }
    let n = get_count(r, 25)?;
    let mut locks = Vec::with_capacity(n);
    for _ in 0..n {
        locks.push(get_lock(r)?);
    }
    let n = get_count(r, 32 + 4 + 1 + 4 + 2 + 1 + 1 + 16)?;
    let mut leases = Vec::with_capacity(n);
    for _ in 0..n {
        leases.push(get_lease(r)?);
    }
    Ok(Record {
        key,
        share,
        path,
        is_dir,
        delete_pending,
        opens,
        locks,
        leases,
    })
}

fn put_handover(o: &mut Vec<u8>, h: &HandOver) {
    put_key(o, h.key);
    put_path(o, &h.path);
    put_bool(o, h.is_dir);
    o.put_u32(h.access);
    o.put_u32(h.share_access);
    o.put_u32(h.create_options);
    o.put_u64(h.position);
    o.put_u32(h.mode);
    o.put_u8(h.kind);
    o.put_u64(h.timeout_ms);
    o.put_bytes(&h.durable_create_guid);
    o.put_bytes(&h.durable_client_guid);
    put_bool(o, h.persistent);
    put_opt(o, h.create_guid, |o, (a, b)| {
        o.put_bytes(&a);
        o.put_bytes(&b);
    });
    o.put_u32(h.create_action);
    put_opt(o, h.lock_sequences, |o, s| o.put_bytes(&s));
    o.put_u32(h.notify_on_close);
    put_bool(o, h.posix_rename);
}

/// A hand-over; `posix`: of a POSIX open (told by its answer kind or record version).
fn get_handover(r: &mut Reader<'_>, posix: bool) -> Result<HandOver, WireError> {
    Ok(HandOver {
        key: get_key(r)?,
        path: get_path(r)?,
        is_dir: get_bool(r)?,
        access: r.u32()?,
        share_access: r.u32()?,
        create_options: r.u32()?,
        position: r.u64()?,
        mode: r.u32()?,
        kind: r.u8()?,
        timeout_ms: r.u64()?,
        durable_create_guid: r.array()?,
        durable_client_guid: r.array()?,
        persistent: get_bool(r)?,
        create_guid: get_opt(r, |r| Ok((r.array()?, r.array()?)))?,
        create_action: r.u32()?,
        lock_sequences: get_opt(r, |r| r.array())?,
        notify_on_close: r.u32()?,
        posix_rename: get_bool(r)?,
        posix,
    })
}

/// A persistent open's record in etcd ([`super::ca`]).
pub fn encode_ca(rec: &CaRecord) -> Vec<u8> {
    let mut o = Vec::with_capacity(256);
    put_ca(&mut o, rec);
    o
}

/// [`encode_ca`] into `o` (also the body of a [`Call::Adopt`]).
fn put_ca(o: &mut Vec<u8>, rec: &CaRecord) {
    o.put_u8(if rec.state.posix {
        CA_RECORD_VERSION_POSIX
    } else {
        CA_RECORD_VERSION
    });
    o.put_u16(rec.keeper);
    o.put_u64(rec.file_id.persistent);
    o.put_u64(rec.file_id.volatile);
    put_str(o, &rec.share);
    o.put_u32(rec.uid);
    put_str(o, &rec.user);
    put_who(o, rec.who.as_ref());
    put_handover(o, &rec.state);
    put_opt(o, rec.lease.as_ref(), put_lease);
    o.put_u16(rec.locks.len().min(u16::MAX as usize) as u16);
    for l in rec.locks.iter().take(u16::MAX as usize) {
        put_lock(o, *l);
    }
}

/// [`encode_ca`]'s inverse; anything else (another version, a cut) is refused.
pub fn decode_ca(b: &[u8]) -> Result<CaRecord, WireError> {
    if b.len() > MESSAGE_MAX {
        return Err(WireError::Invalid("CA record too long"));
    }
    let mut r = Reader::new(b);
    let rec = get_ca(&mut r)?;
    if r.remaining() != 0 {
        return Err(WireError::Invalid("bytes after a CA record"));
    }
    Ok(rec)
}

/// A record [`put_ca`] wrote, read from `r`.
fn get_ca(r: &mut Reader<'_>) -> Result<CaRecord, WireError> {
    let posix = match r.u8()? {
        CA_RECORD_VERSION => false,
        CA_RECORD_VERSION_POSIX => true,
        _ => return Err(WireError::Invalid("CA record of another version")),
    };
    let keeper = r.u16()?;
    let file_id = FileId {
        persistent: r.u64()?,
        volatile: r.u64()?,
    };
    let share = get_str(r)?;
    let uid = r.u32()?;
    let user = get_str(r)?;
    let who = get_who(r)?;
    let state = get_handover(r, posix)?;
    let lease = get_opt(r, get_lease)?;
    let n = get_count(r, 25)?;
    let mut locks = Vec::with_capacity(n);
    for _ in 0..n {
        locks.push(get_lock(r)?);
    }
    Ok(CaRecord {
        keeper,
        file_id,
        share,
        uid,
        user,
        who,
        state,
        lease,
        locks,
    })
}

const CA_RECORD_VERSION: u8 = 1;
/// A POSIX open's record: the same fields (written only at a cluster level of 3 or more, whose
/// nodes all read it; an older node skips it as a record of another version).
const CA_RECORD_VERSION_POSIX: u8 = 2;
