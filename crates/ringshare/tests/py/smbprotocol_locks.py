"""Take and release byte-range locks with python's smbprotocol, one command a line.

Run by crates/ringshare/tests/posix_locking.rs. Opens NAME (read and write, sharing all;
with --lease asking an RWH lease), prints `OPEN` (`OPEN <lease state>` with --lease), then for each line of standard input:

    lock OFFSET LENGTH x|s     an exclusive or shared lock, FAIL_IMMEDIATELY
    unlock OFFSET LENGTH       an unlock
    wait OFFSET LENGTH x|s     a blocking lock, sent: answers `SENT <status>` with the
                               status of the first response (0x00000103: STATUS_PENDING)
    result                     waits for the blocking lock's final answer
    cancel                     sends a CANCEL for the blocking lock
    read OFFSET LENGTH         a READ
    write OFFSET LENGTH        a WRITE of that many bytes
    close                      closes the file

answers `OK` or `ERR <NTSTATUS in hex>`, and exits when standard input closes.
"""

import argparse
import sys
import uuid

from create_ctx import lease_ctx
from smbprotocol import Dialects
from smbprotocol.connection import Connection
from smbprotocol.create_contexts import SMB2CreateResponseLeaseV2
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.open import (
    CreateDisposition,
    CreateOptions,
    FilePipePrinterAccessMask,
    ImpersonationLevel,
    LockFlags,
    Open,
    RequestedOplockLevel,
    ShareAccess,
)
from smbprotocol.open import SMB2LockElement as LockElement
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect


def element(offset, length, flags):
    e = LockElement()
    e["offset"] = offset
    e["length"] = length
    e["flags"] = flags
    return e


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--share", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--lease", action="store_true", help="ask an RWH lease")
    args = p.parse_args()

    conn = Connection(uuid.uuid4(), "127.0.0.1", args.port, require_signing=True)
    conn.connect(dialect=Dialects.SMB_3_1_1, timeout=10)
    session = Session(conn, args.user, args.password, require_encryption=False)
    session.connect()
    tree = TreeConnect(session, rf"\\127.0.0.1\{args.share}")
    tree.connect()
    f = Open(tree, args.name)
    lease = dict(
        create_contexts=[lease_ctx(uuid.uuid4().bytes, 7)],
        oplock_level=RequestedOplockLevel.SMB2_OPLOCK_LEVEL_LEASE,
    )
    response = f.create(
        ImpersonationLevel.Impersonation,
        FilePipePrinterAccessMask.GENERIC_READ | FilePipePrinterAccessMask.GENERIC_WRITE,
        0,
        ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE,
        CreateDisposition.FILE_OPEN_IF,
        CreateOptions.FILE_NON_DIRECTORY_FILE,
        **(lease if args.lease else {}),
    )
    if args.lease:
        state = next(
            (c["lease_state"].get_value() for c in response or [] if isinstance(c, SMB2CreateResponseLeaseV2)),
            0,
        )
        print(f"OPEN {int(state)}", flush=True)
    else:
        print("OPEN", flush=True)
    pending = None
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        try:
            if words[0] == "wait":
                kind = (
                    LockFlags.SMB2_LOCKFLAG_EXCLUSIVE_LOCK
                    if words[3] == "x"
                    else LockFlags.SMB2_LOCKFLAG_SHARED_LOCK
                )
                req, receive = f.lock([element(int(words[1]), int(words[2]), kind)], send=False)
                sent = conn.send(req, session.session_id, tree.tree_connect_id)
                pending = (sent, receive)
                # The interim response (STATUS_PENDING), or the final one if none.
                sent.response_event.wait(timeout=10)
                status = sent.response["status"].get_value() if sent.response else 0
                print(f"SENT {status:#010x}", flush=True)
                continue
            elif words[0] == "result":
                sent, receive = pending
                receive(sent, wait=True)
            elif words[0] == "cancel":
                pending[0].cancel()
            elif words[0] == "lock":
                kind = (
                    LockFlags.SMB2_LOCKFLAG_EXCLUSIVE_LOCK
                    if words[3] == "x"
                    else LockFlags.SMB2_LOCKFLAG_SHARED_LOCK
                )
                flags = kind | LockFlags.SMB2_LOCKFLAG_FAIL_IMMEDIATELY
                f.lock([element(int(words[1]), int(words[2]), flags)])
            elif words[0] == "unlock":
                f.lock([element(int(words[1]), int(words[2]), LockFlags.SMB2_LOCKFLAG_UNLOCK)])
            elif words[0] == "read":
                f.read(int(words[1]), int(words[2]))
            elif words[0] == "write":
                f.write(b"w" * int(words[2]), int(words[1]))
            elif words[0] == "close":
                f.close()
            print("OK", flush=True)
        except SMBResponseException as e:
            print(f"ERR {e.status:#010x}", flush=True)
    session.disconnect()
    conn.disconnect()


if __name__ == "__main__":
    main()
