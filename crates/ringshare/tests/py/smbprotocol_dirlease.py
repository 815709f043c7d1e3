"""Hold directory leases with python's smbprotocol, driven line by line.

Run by crates/ringshare/tests/interop_smbprotocol.rs. Negotiates directory
leasing (SMB2_GLOBAL_CAP_DIRECTORY_LEASING) and answers each command read
from standard input with one line:

  lease K       close the directory handle held, if any, and open DIR with
                an RH lease of key K repeated (a version 2 lease):
                `LEASED <granted state>`
  create NAME   make DIR\\NAME (and close it), naming the directory's lease
                as its ParentLeaseKey: `CREATED`
  stream NAME   add the stream NAME (`FILE:STREAM`) to an entry of DIR, write
                a byte into it and close it, with no lease (so with no
                ParentLeaseKey): `STREAM`
  breaks MS     wait MS milliseconds, then list the lease breaks received
                since the last `breaks`: `BREAKS K:FROM:TO ...` (K the key's
                first byte; nothing after BREAKS when none came)

smbprotocol takes no lease breaks itself (a message with MessageId
0xFFFFFFFFFFFFFFFF has no request to go to): the table of outstanding
requests hands such messages to a collector instead.
"""

import argparse
import sys
import threading
import time
import uuid

from create_ctx import lease_ctx
from smbprotocol.create_contexts import SMB2CreateResponseLeaseV2
from smbprotocol import Dialects
from smbprotocol.connection import Capabilities, Connection
from smbprotocol.open import (
    CreateDisposition,
    CreateOptions,
    FilePipePrinterAccessMask,
    ImpersonationLevel,
    Open,
    RequestedOplockLevel,
    ShareAccess,
)
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

NOTIFICATION = 0xFFFFFFFFFFFFFFFF


class _Reserved:
    @staticmethod
    def get_value():
        return 0


class _Break:
    """Stands in for a request where a lease break lands."""

    def __init__(self, got):
        self.session_id = None
        self.async_id = None
        self.message = {"reserved": _Reserved()}
        self.response_event = threading.Event()
        self.response_event_lock = threading.Lock()
        self._got = got

    @property
    def response(self):
        return None

    @response.setter
    def response(self, header):
        data = header["data"].get_value()
        if len(data) >= 32 and data[0] == 44:  # LEASE_BREAK_NOTIFICATION
            key = data[8]
            cur = int.from_bytes(data[24:28], "little")
            new = int.from_bytes(data[28:32], "little")
            self._got.append(f"{key}:{cur}:{new}")


class _Requests(dict):
    def __init__(self, got):
        super().__init__()
        self._got = got

    def __getitem__(self, message_id):
        if message_id == NOTIFICATION:
            return _Break(self._got)
        return super().__getitem__(message_id)


def lease_state(contexts):
    """The lease state of the create's response contexts (as smbprotocol decoded them)."""
    for c in contexts or []:
        if isinstance(c, SMB2CreateResponseLeaseV2):
            return c["lease_state"].get_value()
    return 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--share", required=True)
    p.add_argument("--dir", required=True)
    args = p.parse_args()

    got = []
    conn = Connection(uuid.uuid4(), "127.0.0.1", args.port, require_signing=True)
    conn.outstanding_requests = _Requests(got)
    conn.client_capabilities |= Capabilities.SMB2_GLOBAL_CAP_LEASING
    conn.client_capabilities |= Capabilities.SMB2_GLOBAL_CAP_DIRECTORY_LEASING
    conn.connect(dialect=Dialects.SMB_3_1_1, timeout=10)
    session = Session(conn, args.user, args.password, require_encryption=False)
    session.connect()
    tree = TreeConnect(session, rf"\\127.0.0.1\{args.share}")
    tree.connect()

    held = None
    key = 0
    for line in sys.stdin:
        cmd, _, arg = line.strip().partition(" ")
        if cmd == "lease":
            if held is not None:
                held.close()
            key = int(arg)
            held = Open(tree, args.dir)
            ctxs = held.create(
                ImpersonationLevel.Impersonation,
                FilePipePrinterAccessMask.GENERIC_READ,
                0,
                ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE,
                CreateDisposition.FILE_OPEN,
                CreateOptions.FILE_DIRECTORY_FILE,
                create_contexts=[lease_ctx(bytes([key] * 16), 3)],  # R | H
                oplock_level=RequestedOplockLevel.SMB2_OPLOCK_LEVEL_LEASE,
            )
            print(f"LEASED {lease_state(ctxs)}", flush=True)
        elif cmd == "create":
            f = Open(tree, f"{args.dir}\\{arg}")
            f.create(
                ImpersonationLevel.Impersonation,
                FilePipePrinterAccessMask.GENERIC_READ | FilePipePrinterAccessMask.GENERIC_WRITE,
                0,
                ShareAccess.FILE_SHARE_READ,
                CreateDisposition.FILE_CREATE,
                CreateOptions.FILE_NON_DIRECTORY_FILE,
                create_contexts=[lease_ctx(bytes([key + 100] * 16), 1, parent=bytes([key] * 16))],
                oplock_level=RequestedOplockLevel.SMB2_OPLOCK_LEVEL_LEASE,
            )
            f.close()
            print("CREATED", flush=True)
        elif cmd == "stream":
            f = Open(tree, f"{args.dir}\\{arg}")
            f.create(
                ImpersonationLevel.Impersonation,
                FilePipePrinterAccessMask.GENERIC_READ | FilePipePrinterAccessMask.GENERIC_WRITE,
                0,
                ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE,
                CreateDisposition.FILE_CREATE,
                CreateOptions.FILE_NON_DIRECTORY_FILE,
            )
            f.write(b"s", 0)
            f.close()
            print("STREAM", flush=True)
        elif cmd == "breaks":
            time.sleep(int(arg) / 1000)
            print(" ".join(["BREAKS"] + got), flush=True)
            got.clear()
        else:
            break
    if held is not None:
        held.close()
    session.disconnect()
    conn.disconnect()


if __name__ == "__main__":
    main()
