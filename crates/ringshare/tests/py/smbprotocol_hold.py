"""Hold a file open with python's smbprotocol until standard input closes.

Run by crates/ringshare/tests/admin.rs, which then asks `ringshare status`
what the server sees. Opens NAME with an RWH lease (version 2, key
--lease-key) and a durable handle (DH2Q), takes an exclusive byte-range
lock on bytes 0..100, prints `HELD <persistent> <volatile>` and waits for
standard input to close; then closes the file and logs off.
"""

import argparse
import sys
import uuid

from create_ctx import dh2q_ctx, lease_ctx
from smbprotocol import Dialects
from smbprotocol.connection import Connection
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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--share", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--lease-key", required=True, help="32 hex digits")
    args = p.parse_args()

    conn = Connection(uuid.uuid4(), "127.0.0.1", args.port, require_signing=True)
    conn.connect(dialect=Dialects.SMB_3_1_1, timeout=10)
    session = Session(conn, args.user, args.password, require_encryption=False)
    session.connect()
    tree = TreeConnect(session, rf"\\127.0.0.1\{args.share}")
    tree.connect()

    f = Open(tree, args.name)
    f.create(
        ImpersonationLevel.Impersonation,
        FilePipePrinterAccessMask.GENERIC_READ | FilePipePrinterAccessMask.GENERIC_WRITE,
        0,
        ShareAccess.FILE_SHARE_READ,
        CreateDisposition.FILE_OPEN_IF,
        CreateOptions.FILE_NON_DIRECTORY_FILE,
        create_contexts=[
            lease_ctx(bytes.fromhex(args.lease_key), 7),  # R | H | W
            dh2q_ctx(uuid.uuid4(), 60_000),
        ],
        oplock_level=RequestedOplockLevel.SMB2_OPLOCK_LEVEL_LEASE,
    )
    f.write(b"held by smbprotocol\n", 0)
    e = LockElement()
    e["offset"] = 0
    e["length"] = 100
    e["flags"] = LockFlags.SMB2_LOCKFLAG_EXCLUSIVE_LOCK | LockFlags.SMB2_LOCKFLAG_FAIL_IMMEDIATELY
    f.lock([e])
    fid = f.file_id
    print(f"HELD {int.from_bytes(fid[:8], 'little')} {int.from_bytes(fid[8:], 'little')}", flush=True)
    sys.stdin.read()
    f.close()
    session.disconnect()
    conn.disconnect()
    print("OK", flush=True)


if __name__ == "__main__":
    main()
