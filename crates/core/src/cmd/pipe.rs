//! Named pipes on IPC$ ([MS-SMB2] 3.3.5.9 for pipe opens, 3.3.5.12/13 for
//! pipe READ/WRITE, 3.3.5.15.4 FSCTL_PIPE_TRANSCEIVE). The RPC services behind
//! the pipes live in `crate::ipc`.

use std::sync::{Arc, Mutex};

use ringshare_wire::consts::{CreateAction, FileAttributes, Fsctl, OplockLevel};
use ringshare_wire::create::{CloseRequest, CloseResponse, CreateRequest, CreateResponse};
use ringshare_wire::file::{ReadRequest, ReadResponse, WriteRequest, WriteResponse};
use ringshare_wire::ioctl::{IoctlRequest, IoctlResponse};
use ringshare_wire::{FileId, NtStatus};

use crate::cmd::{Asked, Handled, LookupCont};
use crate::exchange::handles;
use crate::exchange::{ConnCore, Reply, Req};
use crate::ipc::rpcauth::Acceptor;
use crate::ipc::{Pipe, Progress, ServerFacts, ShareEntry, ShareKind, UserEntry};
use crate::limits;
use crate::lookup::DomainAnswer;
use crate::lookup::Lookup;
use crate::server::lock;
use crate::state::PipeOpen;

/// What the RPC services may tell a client about this server.
fn facts(core: &ConnCore) -> ServerFacts {
    let c = &core.server.config;
    let mut shares: Vec<ShareEntry> = core
        .server
        .shares()
        .shares
        .iter()
        .map(|s| ShareEntry {
            name: s.name.clone(),
            comment: s.comment.clone(),
            kind: ShareKind::Disk,
        })
        .collect();
    shares.push(ShareEntry {
        name: "IPC$".into(),
        comment: "IPC Service".into(),
        kind: ShareKind::Ipc,
    });
    ServerFacts {
        netbios_name: c.netbios_name.clone(),
        workgroup: c.workgroup.clone(),
        comment: "ringshare".into(),
        shares,
        users: core
            .server
            .logons
            .users()
            .accounts()
            .into_iter()
            .map(|(name, disabled)| UserEntry { name, disabled })
            .collect(),
        guest_account: c.guest_account.clone(),
        member: member(core),
    }
}

/// On a domain member with an id source, how lsarpc names the domain's accounts.
fn member(core: &ConnCore) -> Option<crate::ipc::MemberFacts> {
    let logons = &core.server.logons;
    logons.id_source()?;
    Some(crate::ipc::MemberFacts {
        naming: logons.domain()?.as_ref().clone(),
        domains: logons.sid_map.domains(),
    })
}

/// Does this request on IPC$ concern a pipe (rather than, say, a
/// VALIDATE_NEGOTIATE_INFO ioctl, which clients also send on IPC$)?
pub(crate) fn wants(req: &Req<'_>) -> bool {
    use ringshare_wire::consts::Command as C;
    match req.hdr.command {
        C::IOCTL => {
            IoctlRequest::decode(req.msg).is_ok_and(|i| i.ctl_code == Fsctl::PIPE_TRANSCEIVE)
        }
        _ => true,
    }
}

/// The pipe open a request names (the caller locks it; the session's lock
/// is held only for the lookup).
fn pipe_of(
    core: &mut ConnCore,
    req: &Req<'_>,
    fid: FileId,
) -> Result<Arc<Mutex<PipeOpen>>, NtStatus> {
    let (persistent, volatile) = handles::resolve(req, fid)?;
    let sref = core.session_or_deleted(req.session_id)?;
    let session = lock(&sref);
    let p = session.pipes.get(&volatile).ok_or(NtStatus::FILE_CLOSED)?;
    {
        let g = lock(p);
        if g.persistent_id != persistent || g.tree_id != req.tree_id {
            return Err(NtStatus::FILE_CLOSED);
        }
    }
    Ok(Arc::clone(p))
}

pub(crate) fn handle(core: &mut ConnCore, req: &Req<'_>) -> Result<Handled, NtStatus> {
    use ringshare_wire::consts::Command as C;
    match req.hdr.command {
        C::CREATE => create(core, req).map(Handled::Reply),
        C::CLOSE => close(core, req).map(Handled::Reply),
        C::READ => read(core, req).map(Handled::Reply),
        C::WRITE => write(core, req),
        C::IOCTL => transceive(core, req),
        C::FLUSH => {
            let mut b = Vec::with_capacity(4);
            b.extend_from_slice(&[4, 0, 0, 0]);
            Ok(Handled::Reply(Reply::ok(b)))
        }
        _ => Err(NtStatus::NOT_SUPPORTED),
    }
}

/// Give `data` to the pipe, or NSS's answers to the call that waited for them
/// (this request asked, and runs again); a call that needs NSS parks the
/// request for the driver's lookup threads (Err holds the lookup to ask).
fn feed(
    core: &mut ConnCore,
    pipe: &mut Pipe,
    data: &[u8],
    facts: &ServerFacts,
) -> Result<Result<(), Handled>, NtStatus> {
    let answers = match core.domain_answer.take() {
        Some(DomainAnswer::Names(a)) => Some(a),
        other => {
            core.domain_answer = other;
            None
        }
    };
    let progress = match answers {
        Some(a) if pipe.waits() => pipe.resume(facts, &a)?,
        _ => pipe.write(data, facts)?,
    };
    match progress {
        Progress::Done => Ok(Ok(())),
        Progress::Needs(queries) => Ok(Err(Handled::lookup(
            Lookup::Names {
                accounts: core.server.logons.accounts.clone(),
                ids: core.server.logons.id_source(),
                queries,
            },
            LookupCont::Again(Asked::Names),
        ))),
    }
}

fn create(core: &mut ConnCore, req: &Req<'_>) -> Result<Reply, NtStatus> {
    let c = CreateRequest::decode(req.msg).map_err(|e| e.status())?;
    // A BIND may carry NTLMSSP or Kerberos (smbtorture's `sign`/`seal` bindings do): taken with
    // the accounts and keytab SMB logons use, though the pipe needs none (its SMB session is
    // authenticated).
    let pipe = Pipe::open(&c.name)
        .ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?
        .with_auth(Acceptor {
            users: core.server.logons.users(),
            names: crate::cmd::session_setup::ntlm_config(core),
            min_level: 0,
            challenge: core.random_bytes(),
            now_filetime: core.now.filetime,
            kerberos: crate::cmd::session_setup::kerberos(core),
        });
    let id = core.server.files.new_owner_id();
    let sref = core.session_or_deleted(req.session_id)?;
    let mut session = lock(&sref);
    if session.pipes.len() >= limits::PIPES_PER_SESSION_MAX {
        return Err(NtStatus::INSUFFICIENT_RESOURCES);
    }
    // samr's rights depend on who opens it (root is granted everything, as on Samba).
    let uid = session.trees.get(&req.tree_id).map(|t| t.who.uid());
    let pipe = match uid {
        Some(uid) => pipe.opened_by(uid),
        None => pipe,
    };
    session.pipes.insert(
        id,
        Arc::new(Mutex::new(PipeOpen {
            pipe,
            persistent_id: id,
            tree_id: req.tree_id,
        })),
    );
    drop(session);
    let file_id = FileId {
        persistent: id,
        volatile: id,
    };
    let resp = CreateResponse {
        oplock_level: OplockLevel::NONE,
        flags: 0,
        create_action: CreateAction::OPENED,
        creation_time: 0,
        last_access_time: 0,
        last_write_time: 0,
        change_time: 0,
        allocation_size: 4096,
        end_of_file: 0,
        file_attributes: FileAttributes::NORMAL,
        file_id,
        contexts: Vec::new(),
    };
    let mut out = vec![0u8; 64];
    resp.encode(&mut out);
    let mut r = Reply::ok(out.split_off(64));
    r.file_id = Some((id, id));
    Ok(r)
}

fn close(core: &mut ConnCore, req: &Req<'_>) -> Result<Reply, NtStatus> {
    let c = CloseRequest::decode(req.msg).map_err(|e| e.status())?;
    let volatile = {
        let p = pipe_of(core, req, c.file_id)?;
        let id = lock(&p).persistent_id;
        id
    };
    if let Some(s) = core.session(req.session_id) {
        lock(&s).pipes.remove(&volatile);
    }
    let resp = CloseResponse {
        flags: c.flags & ringshare_wire::consts::CloseFlags(0),
        creation_time: 0,
        last_access_time: 0,
        last_write_time: 0,
        change_time: 0,
        allocation_size: 0,
        end_of_file: 0,
        file_attributes: FileAttributes::empty(),
    };
    let mut out = Vec::with_capacity(60);
    resp.encode(&mut out);
    Ok(Reply::ok(out))
}

fn write(core: &mut ConnCore, req: &Req<'_>) -> Result<Handled, NtStatus> {
    let w = WriteRequest::decode(req.msg).map_err(|e| e.status())?;
    let facts = facts(core);
    let p = pipe_of(core, req, w.file_id)?;
    let mut p = lock(&p);
    if let Err(parked) = feed(core, &mut p.pipe, w.data, &facts)? {
        return Ok(parked);
    }
    let mut out = Vec::with_capacity(16);
    WriteResponse {
        count: w.data.len() as u32,
        remaining: 0,
    }
    .encode(&mut out);
    Ok(Handled::Reply(Reply::ok(out)))
}

fn read(core: &mut ConnCore, req: &Req<'_>) -> Result<Reply, NtStatus> {
    let r = ReadRequest::decode(req.msg).map_err(|e| e.status())?;
    let p = pipe_of(core, req, r.file_id)?;
    let mut p = lock(&p);
    if p.pipe.available() == 0 {
        // Nothing was asked for yet: an empty message-mode pipe.
        return Err(NtStatus::PIPE_EMPTY);
    }
    let (data, more) = p.pipe.read(r.length as usize);
    let mut body = Vec::with_capacity(16);
    ReadResponse::encode_head(&mut body, data.len(), 0, 0);
    let mut reply = Reply::with_status(
        if more {
            NtStatus::BUFFER_OVERFLOW
        } else {
            NtStatus::SUCCESS
        },
        body,
    );
    reply.data = Some(data);
    Ok(reply)
}

fn transceive(core: &mut ConnCore, req: &Req<'_>) -> Result<Handled, NtStatus> {
    let i = IoctlRequest::decode(req.msg).map_err(|e| e.status())?;
    let facts = facts(core);
    let p = pipe_of(core, req, i.file_id)?;
    let mut p = lock(&p);
    let max = (i.max_output_response as usize).min(limits::IO_SIZE_MAX as usize);
    if let Err(parked) = feed(core, &mut p.pipe, i.input, &facts)? {
        return Ok(parked);
    }
    let (out, more) = p.pipe.read(max);
    let resp = IoctlResponse {
        ctl_code: i.ctl_code,
        file_id: i.file_id,
        input: &[],
        output: &out,
        flags: 0,
    };
    let mut body = vec![0u8; 64];
    resp.encode(&mut body);
    Ok(Handled::Reply(Reply::with_status(
        if more {
            NtStatus::BUFFER_OVERFLOW
        } else {
            NtStatus::SUCCESS
        },
        body.split_off(64),
    )))
}
