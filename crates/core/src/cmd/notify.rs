//! [MS-SMB2] 3.3.5.19 Receiving an SMB2 CHANGE_NOTIFY Request.
//!
//! ringshare does not watch directories yet. A valid CHANGE_NOTIFY goes async
//! (interim STATUS_PENDING) and stays pending until the client cancels it
//! (STATUS_CANCELLED) or closes the directory handle (STATUS_NOTIFY_CLEANUP),
//! which is what a server that saw no change would answer.

use ringshare_wire::misc::ChangeNotifyRequest;
use ringshare_wire::NtStatus;

use crate::cmd::AsyncWork;
use crate::conn::{ConnCore, Handled, Req};
use crate::opens;

/// FILE_LIST_DIRECTORY: the access CHANGE_NOTIFY needs on the directory.
const FILE_LIST_DIRECTORY: u32 = 0x0000_0001;

/// A CHANGE_NOTIFY waiting on one directory open.
pub(crate) struct PendingNotify {
    /// FileId.Volatile of the directory open.
    pub open_id: u64,
}

pub(crate) fn handle(core: &mut ConnCore, req: &Req<'_>) -> Result<Handled, NtStatus> {
    let n = ChangeNotifyRequest::decode(req.msg).map_err(|e| e.status())?;
    if n.output_buffer_length > opens::io_sizes(core).trans {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let open = opens::find(core, req, n.file_id)?;
    if !open.is_dir {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if open.access & FILE_LIST_DIRECTORY == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    Ok(Handled::Async(AsyncWork::Notify(PendingNotify {
        open_id: open.id,
    })))
}
