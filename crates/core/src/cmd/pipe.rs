//! Named pipes on IPC$ ([MS-SMB2] 3.3.5.9 for pipe opens, 3.3.5.12/13 for
//! pipe READ/WRITE, 3.3.5.15.4 FSCTL_PIPE_TRANSCEIVE). The RPC services behind
//! the pipes live in `crate::ipc`.

use ringshare_wire::consts::{CreateAction, FileAttributes, Fsctl, OplockLevel};
use ringshare_wire::create::{CloseRequest, CloseResponse, CreateRequest, CreateResponse};
use ringshare_wire::file::{ReadRequest, ReadResponse, WriteRequest, WriteResponse};
use ringshare_wire::ioctl::{IoctlRequest, IoctlResponse};
use ringshare_wire::{FileId, NtStatus};

use crate::conn::{ConnCore, Reply, Req};
use crate::ipc::{Pipe, ServerFacts, ShareEntry, ShareKind};
use crate::limits;
use crate::opens;
use crate::state::PipeOpen;

/// What the RPC services may tell a client about this server.
fn facts(core: &ConnCore) -> ServerFacts {
    let c = &core.server.config;
    let mut shares: Vec<ShareEntry> = c
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
    }
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

fn pipe_mut<'a>(
    core: &'a mut ConnCore,
    req: &Req<'_>,
    fid: FileId,
) -> Result<&'a mut PipeOpen, NtStatus> {
    let (persistent, volatile) = opens::resolve(req, fid)?;
    let session = core
        .sessions
        .get_mut(&req.session_id)
        .ok_or(NtStatus::USER_SESSION_DELETED)?;
    let p = session
        .pipes
        .get_mut(&volatile)
        .ok_or(NtStatus::FILE_CLOSED)?;
    if p.persistent_id != persistent || p.tree_id != req.tree_id {
        return Err(NtStatus::FILE_CLOSED);
    }
    Ok(p)
}

pub(crate) fn handle(core: &mut ConnCore, req: &Req<'_>) -> Result<Reply, NtStatus> {
    use ringshare_wire::consts::Command as C;
    match req.hdr.command {
        C::CREATE => create(core, req),
        C::CLOSE => close(core, req),
        C::READ => read(core, req),
        C::WRITE => write(core, req),
        C::IOCTL => transceive(core, req),
        C::FLUSH => {
            let mut b = Vec::with_capacity(4);
            b.extend_from_slice(&[4, 0, 0, 0]);
            Ok(Reply::ok(b))
        }
        _ => Err(NtStatus::NOT_SUPPORTED),
    }
}

fn create(core: &mut ConnCore, req: &Req<'_>) -> Result<Reply, NtStatus> {
    let c = CreateRequest::decode(req.msg).map_err(|e| e.status())?;
    let pipe = Pipe::open(&c.name).ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?;
    let id = core.server.new_owner_id();
    let session = core
        .sessions
        .get_mut(&req.session_id)
        .ok_or(NtStatus::USER_SESSION_DELETED)?;
    if session.pipes.len() >= limits::PIPES_PER_SESSION_MAX {
        return Err(NtStatus::INSUFFICIENT_RESOURCES);
    }
    session.pipes.insert(
        id,
        PipeOpen {
            pipe,
            persistent_id: id,
            tree_id: req.tree_id,
        },
    );
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
        let p = pipe_mut(core, req, c.file_id)?;
        p.persistent_id
    };
    if let Some(s) = core.sessions.get_mut(&req.session_id) {
        s.pipes.remove(&volatile);
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

fn write(core: &mut ConnCore, req: &Req<'_>) -> Result<Reply, NtStatus> {
    let w = WriteRequest::decode(req.msg).map_err(|e| e.status())?;
    let facts = facts(core);
    let p = pipe_mut(core, req, w.file_id)?;
    let n = p.pipe.write(w.data, &facts)?;
    let mut out = Vec::with_capacity(16);
    WriteResponse {
        count: n as u32,
        remaining: 0,
    }
    .encode(&mut out);
    Ok(Reply::ok(out))
}

fn read(core: &mut ConnCore, req: &Req<'_>) -> Result<Reply, NtStatus> {
    let r = ReadRequest::decode(req.msg).map_err(|e| e.status())?;
    let p = pipe_mut(core, req, r.file_id)?;
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

fn transceive(core: &mut ConnCore, req: &Req<'_>) -> Result<Reply, NtStatus> {
    let i = IoctlRequest::decode(req.msg).map_err(|e| e.status())?;
    let facts = facts(core);
    let p = pipe_mut(core, req, i.file_id)?;
    let max = (i.max_output_response as usize).min(limits::IO_SIZE_MAX as usize);
    let (out, more) = p.pipe.transceive(i.input, max, &facts)?;
    let resp = IoctlResponse {
        ctl_code: i.ctl_code,
        file_id: i.file_id,
        input: &[],
        output: &out,
        flags: 0,
    };
    let mut body = vec![0u8; 64];
    resp.encode(&mut body);
    Ok(Reply::with_status(
        if more {
            NtStatus::BUFFER_OVERFLOW
        } else {
            NtStatus::SUCCESS
        },
        body.split_off(64),
    ))
}
