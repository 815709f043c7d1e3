//! [MS-SMB2] 3.3.5.15 Receiving an SMB2 IOCTL Request.
//!
//! Served: FSCTL_VALIDATE_NEGOTIATE_INFO (3.3.5.15.12) and
//! FSCTL_GET_REPARSE_POINT (nothing is a reparse point). Not served:
//! FSCTL_QUERY_NETWORK_INTERFACE_INFO (no multichannel; the core cannot list
//! interfaces), FSCTL_PIPE_TRANSCEIVE (no named pipes yet) and the other
//! server FSCTLs (STATUS_NOT_SUPPORTED); file system FSCTLs we do not
//! implement are STATUS_INVALID_DEVICE_REQUEST, as an object store answers them.

use ringshare_wire::consts::{Dialect, Fsctl};
use ringshare_wire::NtStatus;

use crate::conn::{ConnCore, Reply, Req};
use crate::msgs::{
    ioctl_response_body, validate_negotiate_response, IoctlRequest, ValidateNegotiateInfo,
};
use crate::opens;

const IS_FSCTL: u32 = 0x0000_0001;
/// Device type of file system FSCTLs (FILE_DEVICE_FILE_SYSTEM).
const DEVICE_FILE_SYSTEM: u32 = 0x0009;
/// Dialects the server implements, highest first.
const DIALECTS: [u16; 5] = [0x0311, 0x0302, 0x0300, 0x0210, 0x0202];

pub(crate) fn handle(core: &mut ConnCore, req: &Req<'_>) -> Result<Reply, NtStatus> {
    let ir = IoctlRequest::decode(req.msg).map_err(|e| e.status())?;
    let max = opens::io_size_max(core);
    if ir.input.len() as u64 > u64::from(max) || ir.max_output_response > max {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if ir.flags != IS_FSCTL {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    match Fsctl(ir.ctl_code) {
        Fsctl::VALIDATE_NEGOTIATE_INFO => validate_negotiate(core, &ir),
        Fsctl::GET_REPARSE_POINT => {
            opens::find(core, req, ir.file_id)?;
            Err(NtStatus::NOT_A_REPARSE_POINT)
        }
        Fsctl::QUERY_NETWORK_INTERFACE_INFO
        | Fsctl::PIPE_TRANSCEIVE
        | Fsctl::PIPE_PEEK
        | Fsctl::PIPE_WAIT => Err(NtStatus::NOT_SUPPORTED),
        c if (c.0 >> 16) == DEVICE_FILE_SYSTEM => {
            opens::find(core, req, ir.file_id)?;
            Err(NtStatus::INVALID_DEVICE_REQUEST)
        }
        _ => Err(NtStatus::NOT_SUPPORTED),
    }
}

/// [MS-SMB2] 3.3.5.15.12: any mismatch ends the connection.
fn validate_negotiate(core: &mut ConnCore, ir: &IoctlRequest<'_>) -> Result<Reply, NtStatus> {
    let drop_connection = || {
        let mut r = Reply::with_status(NtStatus::ACCESS_DENIED, Vec::new());
        r.disconnect = true;
        Ok(r)
    };
    let Some(n) = core.negotiated.clone() else {
        return drop_connection();
    };
    if n.dialect == Dialect::SMB3_1_1 || ir.max_output_response < 24 {
        return drop_connection();
    }
    let Ok(v) = ValidateNegotiateInfo::decode(ir.input) else {
        return drop_connection();
    };
    let cfg = &core.server.config;
    let common = DIALECTS
        .iter()
        .copied()
        .filter(|d| *d >= cfg.dialect_min && *d <= cfg.dialect_max)
        .find(|d| v.dialects.contains(d));
    let ok = v.dialects == n.client_dialects
        && common == Some(n.dialect.0)
        && v.guid == n.client_guid
        && v.security_mode == n.client_security_mode
        && v.capabilities == n.client_capabilities;
    if !ok {
        tracing::info!(peer = %core.peer, "VALIDATE_NEGOTIATE_INFO mismatch: closing the connection");
        return drop_connection();
    }
    let out = validate_negotiate_response(
        n.server_capabilities,
        &cfg.server_guid,
        n.server_security_mode,
        n.dialect.0,
    );
    Ok(Reply::ok(ioctl_response_body(
        ir.ctl_code,
        ir.file_id,
        &out,
    )))
}
