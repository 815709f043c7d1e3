"""A durable handle through a connection cut from the server side, with python's smbprotocol.

Run (as root: it cuts the server's sockets with `ss -K`) by
crates/ringshare/tests/interop_smbprotocol.rs. Steps, each checked:

1. Open a file with DH2Q and an RWH lease; write 64 KiB chunks of random data in a loop while a
   second thread cuts the server's end of the TCP connection (`ss -K`) mid-workload.
2. While the handle waits for its client: the other user, and the same user with another
   ClientGuid, try DH2C with the right FileId and CreateGuid and are refused.
3. The same user and ClientGuid reconnect on a new connection with DH2C: the same FileId; the
   write that was cut is sent again and the loop goes on to the end; every byte is read back
   through the handle and from the server's disk.
4. A second file with DH2Q (3 s) and an RH lease holds a byte-range lock; its connection is cut.
   A durable handle that holds locks without write caching is not kept (as on Samba 4.22,
   smbtorture smb2.durable-v2-open.lock-noW-lease): another client's lock on that range is
   granted as soon as the server saw the cut, long before the 3 s, and a DH2C finds nothing.
The last line is OK or says what went wrong.
"""

import argparse
import os
import subprocess
import sys
import threading
import time
import uuid

from smbprotocol.connection import Connection
from create_ctx import dh2c_ctx, dh2q_ctx, lease_ctx
from smbprotocol.exceptions import SMBException, SMBResponseException
from smbprotocol.header import NtStatus
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
from smbprotocol import Dialects
from smbprotocol.open import LockFlags, SMB2LockElement as LockElement

CHUNK = 64 * 1024
CHUNKS = 96
LOCK_NOT_GRANTED = 0xC0000055


def check(cond, what):
    if not cond:
        raise AssertionError(what)


class Client:
    """One connection, session and tree of one user."""

    def __init__(self, args, user, password, guid):
        self.conn = Connection(guid, "127.0.0.1", args.port, require_signing=True)
        self.conn.connect(dialect=Dialects.SMB_3_1_1, timeout=10)
        self.session = Session(self.conn, user, password, require_encryption=False)
        self.session.connect()
        self.tree = TreeConnect(self.session, rf"\\127.0.0.1\{args.share}")
        self.tree.connect()

    def drop(self):
        try:
            self.conn.disconnect(close=False)
        except Exception:  # noqa: BLE001 - the socket may be gone already
            pass


def create(client, name, contexts, share=ShareAccess.FILE_SHARE_READ):
    f = Open(client.tree, name)
    resp = f.create(
        ImpersonationLevel.Impersonation,
        FilePipePrinterAccessMask.GENERIC_READ | FilePipePrinterAccessMask.GENERIC_WRITE,
        0,
        share,
        CreateDisposition.FILE_OPEN_IF,
        CreateOptions.FILE_NON_DIRECTORY_FILE,
        create_contexts=contexts,
        oplock_level=RequestedOplockLevel.SMB2_OPLOCK_LEVEL_LEASE,
    )
    return f, resp


def durable_timeout(resp):
    for c in resp or []:
        if hasattr(c, "fields") and "timeout" in c.fields and "flags" in c.fields:
            return c["timeout"].get_value()
    return None


def status_of(e):
    return getattr(e, "status", None)


def refused(client, name, file_id, create_guid, key, want, what):
    try:
        create(client, name, [lease_ctx(key, 7), dh2c_ctx(file_id, create_guid)])
    except SMBResponseException as e:
        check(e.status == want, f"{what}: status {e.status:#x}, wanted {want:#x}")
        print(f"{what}: refused with {e.status:#x}", flush=True)
        return
    raise AssertionError(f"{what}: reconnected a handle that is not theirs")


def cut_server_side(port):
    """Destroy the server's end of every connection to `port` (RST to the client)."""
    out = subprocess.run(
        ["ss", "-K", "-t", "state", "established", f"( sport = :{port} )"],
        capture_output=True,
        text=True,
    )
    check(out.returncode == 0, f"ss -K failed: {out.stderr}")
    killed = out.stdout.count("\n") - 1
    check(killed >= 1, f"ss -K closed no socket:\n{out.stdout}")
    return killed


def reconnect(args, guid, name, file_id, create_guid, key):
    """DH2C on a new connection, tried for up to 5 s while the server notices the cut."""
    deadline = time.monotonic() + 5
    while True:
        c = Client(args, args.user, args.password, guid)
        try:
            f, resp = create(c, name, [lease_ctx(key, 7), dh2c_ctx(file_id, create_guid)])
            return c, f
        except SMBResponseException as e:
            c.drop()
            if e.status != NtStatus.STATUS_OBJECT_NAME_NOT_FOUND or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--other-user", required=True)
    p.add_argument("--other-password", required=True)
    p.add_argument("--share", required=True)
    p.add_argument("--share-dir", required=True)
    args = p.parse_args()

    guid = uuid.uuid4()
    key = os.urandom(16)
    create_guid = uuid.uuid4()
    name = "durable-" + uuid.uuid4().hex[:8] + ".bin"
    data = os.urandom(CHUNK * CHUNKS)

    # 1. Open durable with an RWH lease and write while the connection is cut.
    a = Client(args, args.user, args.password, guid)
    f, resp = create(a, name, [lease_ctx(key, 7), dh2q_ctx(create_guid, 60_000)])
    check(durable_timeout(resp) == 60_000, f"no durable grant in {resp}")
    file_id = f.file_id
    cut_at = CHUNKS // 3
    written = 0
    cutter = None
    cuts = 0
    while written < CHUNKS:
        if written == cut_at and cutter is None:
            # Cut while writes are in flight: from another thread, soon.
            cutter = threading.Thread(target=lambda: (time.sleep(0.01), cut_server_side(args.port)))
            cutter.start()
        if written == CHUNKS - 1 and cutter is not None and cuts == 0:
            # The writes outran the cut: the last chunk goes after it, so one write meets it.
            cutter.join()
        off = written * CHUNK
        try:
            f.write(data[off : off + CHUNK], off)
            written += 1
            continue
        except (SMBException, OSError, ValueError) as e:
            check(cutter is not None, f"write {written} failed before the cut: {e}")
            cutter.join()
            cuts += 1
            check(cuts == 1, "more than one write failed")
            print(f"write of chunk {written} failed after the cut ({type(e).__name__}); reconnecting", flush=True)
        a.drop()
        # 2. Nobody else gets the handle.
        other = Client(args, args.other_user, args.other_password, guid)
        refused(other, name, file_id, create_guid, key, NtStatus.STATUS_ACCESS_DENIED, "another user")
        other.drop()
        stranger = Client(args, args.user, args.password, uuid.uuid4())
        refused(
            stranger,
            name,
            file_id,
            create_guid,
            key,
            NtStatus.STATUS_OBJECT_NAME_NOT_FOUND,
            "the same user with another ClientGuid",
        )
        stranger.drop()
        # 3. Back with DH2C: same FileId; the cut write is sent again.
        a, f = reconnect(args, guid, name, file_id, create_guid, key)
        check(f.file_id == file_id, "reconnected under another FileId")
        print(f"reconnected after {written} acknowledged chunks", flush=True)
    if cutter is not None:
        cutter.join()
    check(cuts == 1, "the cut never broke a write (workload too short?)")
    got = b""
    while len(got) < len(data):
        got += f.read(len(got), min(len(data) - len(got), CHUNK))
    check(got == data, "read back through the reconnected handle differs")
    f.close()
    with open(os.path.join(args.share_dir, name), "rb") as disk:
        check(disk.read() == data, "the server's file on disk differs from what was written")
    print(f"all {len(data)} bytes written through the cut and read back", flush=True)
    a.drop()

    # 4. A lock held by a handle without write caching: not kept through the cut.
    a = Client(args, args.user, args.password, guid)
    name2 = name + ".lock"
    key2, guid2 = os.urandom(16), uuid.uuid4()
    share_rw = ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE
    g, resp = create(a, name2, [lease_ctx(key2, 3), dh2q_ctx(guid2, 3000)], share=share_rw)
    check(durable_timeout(resp) == 3000, f"no 3 s durable grant in {resp}")

    def lock_elem():
        e = LockElement()
        e["offset"] = 0
        e["length"] = 100
        e["flags"] = LockFlags.SMB2_LOCKFLAG_EXCLUSIVE_LOCK | LockFlags.SMB2_LOCKFLAG_FAIL_IMMEDIATELY
        return e

    g.lock([lock_elem()])
    cut_server_side(args.port)
    a.drop()
    b = Client(args, args.user, args.password, uuid.uuid4())
    h = Open(b.tree, name2)
    h.create(
        ImpersonationLevel.Impersonation,
        FilePipePrinterAccessMask.GENERIC_READ | FilePipePrinterAccessMask.GENERIC_WRITE,
        0,
        share_rw,
        CreateDisposition.FILE_OPEN,
        CreateOptions.FILE_NON_DIRECTORY_FILE,
    )
    t0 = time.monotonic()
    granted = None
    while time.monotonic() - t0 < 10:
        try:
            h.lock([lock_elem()])
            granted = time.monotonic() - t0
            break
        except SMBResponseException as e:
            check(e.status == LOCK_NOT_GRANTED, f"lock status {e.status:#x}")
        time.sleep(0.05)
    check(granted is not None, "the lock was still held 10 s after the handle was cut")
    check(granted < 2.0, f"the lock was kept {granted:.2f} s: the handle was kept with it")
    print(f"lock free {granted:.2f} s after the cut (durable timeout 3 s, not kept)", flush=True)
    late = Client(args, args.user, args.password, guid)
    try:
        create(late, name2, [lease_ctx(key2, 3), dh2c_ctx(g.file_id, guid2)], share=share_rw)
        raise AssertionError("a durable handle kept with locks and no write caching reconnected")
    except SMBResponseException as e:
        check(e.status == NtStatus.STATUS_OBJECT_NAME_NOT_FOUND, f"status {e.status:#x}")
    late.drop()
    h.close()
    b.drop()
    print("OK", flush=True)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 - report any failure on the last line
        print(f"FAILED: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        raise
