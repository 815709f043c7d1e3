"""Clients of scripts/fuse-stall-demo.sh: N busy clients, one that touches a stalled file.

Each busy client (its own connection) loops CREATE+WRITE 4 KiB+READ 4 KiB+CLOSE of its own file
and records each loop's latency. After WARM seconds the stalling client, on a connection of its
own, does ACTION on a file under `stall/` while FLAG exists (the file system then holds every
request about it until FLAG is removed, HOLD seconds later), then the busy clients go on for
WARM more seconds. Prints, per phase (ended before the stall began / ended during it or
started before it ended / started after it), the busy clients' loop latencies (p50, p99, max, count) and how long the stalling client's request took.

  python fuse-stall-clients.py --port P --user U --password W --share S --flag FLAG
      --action create|read|query|list|close|write-close|disconnect|setinfo|flush|rename|lock|copychunk|security|stream|stream-create|delete|stream-rename
      [--clients 4] [--warm 2] [--hold 3]

ACTION: create (a new file under stall/), read (4 KiB of stall/cold, opened before), query
(QUERY_INFO FileAllInformation of stall/cold), list (QUERY_DIRECTORY of stall/, opened before),
close (CLOSE of stall/cold), write-close (a WRITE of 4 KiB to stall/cold, opened before, and its
CLOSE sent right behind it, before the WRITE's answer; both answers are then read), disconnect
(a TREE_DISCONNECT of the tree with stall/cold open: the server closes it), setinfo (SET_INFO
FileEndOfFileInformation of stall/cold, opened before: a FUSE setattr of its size), flush (FLUSH
of stall/cold, opened and written before: the write time it shows now, a FUSE setattr of its
times, then the fsync), rename (SET_INFO FileRenameInformation of stall/cold, opened before
with DELETE, to stall/renamed: the target's case-insensitive search, a FUSE opendir and readdir
of stall/, then the FUSE rename), lock (LOCK of 4 KiB of stall/cold, exclusive, fail-immediately,
opened before: with `posix locking` its POSIX lock, a FUSE setlk on a mount that takes them, as
ceph-fuse's), copychunk (FSCTL_SRV_COPYCHUNK_WRITE of 1 MiB, one chunk, from stall/cold, opened
and its resume key asked before, into stall/copy, opened before: the kernel's copy_file_range,
FUSE reads and writes), security (QUERY_INFO of stall/cold's security descriptor, owner, group
and DACL, opened before: a FUSE getattr and getxattr), stream (READ of 1 KiB of stall/cold's
named stream `s`, opened and written before: a FUSE getxattr, the stream's data being an xattr),
stream-create (a CREATE of a new named stream `stall/cold:new`: the file's lookup and open, its
xattrs listed, the empty stream's setxattr),
delete (CLOSE of stall/cold, opened before with DELETE and delete on close: the descriptor's
flush, then the FUSE unlink), stream-rename (SET_INFO FileRenameInformation of
that stream, opened with DELETE and written before, to `:renamed`: the target's look-up, a FUSE
listxattr, and the rename, a getxattr, setxattr and removexattr).
"""

import argparse
import os
import threading
import time
import uuid

from smbprotocol import Dialects
from smbprotocol.connection import Connection
from smbprotocol.file_info import FileEndOfFileInformation, FileInformationClass
from smbprotocol.ioctl import (
    CtlCode,
    IOCTLFlags,
    SMB2IOCTLRequest,
    SMB2IOCTLResponse,
    SMB2SrvCopyChunk,
    SMB2SrvCopyChunkCopy,
    SMB2SrvCopyChunkResponse,
    SMB2SrvRequestResumeKey,
)
from smbprotocol.open import (
    CreateDisposition,
    CreateOptions,
    ImpersonationLevel,
    Open,
    ShareAccess,
    SMB2CloseRequest,
    SMB2FlushRequest,
    SMB2LockElement,
    SMB2LockRequest,
    SMB2QueryInfoRequest,
    SMB2SetInfoRequest,
    SMB2WriteRequest,
)
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

SHARE_ALL = ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE


def connect(a):
    c = Connection(uuid.uuid4(), "127.0.0.1", a.port)
    c.connect(Dialects.SMB_3_1_1)
    s = Session(c, a.user, a.password, require_encryption=False)
    s.connect()
    t = TreeConnect(s, rf"\\127.0.0.1\{a.share}")
    t.connect()
    return c, t


def open_(tree, name, disp=CreateDisposition.FILE_OVERWRITE_IF, access=0x10000000, directory=False, options=0):
    o = Open(tree, name)
    opts = CreateOptions.FILE_DIRECTORY_FILE if directory else CreateOptions.FILE_NON_DIRECTORY_FILE
    opts |= options
    o.create(ImpersonationLevel.Impersonation, access, 0x80, SHARE_ALL, disp, opts)
    return o


def query_all(conn, tree, o):
    q = SMB2QueryInfoRequest()
    q["info_type"] = 1
    q["file_info_class"] = FileInformationClass.FILE_ALL_INFORMATION
    q["file_id"] = o.file_id
    q["output_buffer_length"] = 65536
    r = conn.send(q, sid=tree.session.session_id, tid=tree.tree_connect_id)
    return conn.receive(r)


def set_end_of_file(conn, tree, o, size):
    """SET_INFO FileEndOfFileInformation of `o`: its size becomes `size`."""
    eof = FileEndOfFileInformation()
    eof["end_of_file"] = size
    s = SMB2SetInfoRequest()
    s["info_type"] = 1
    s["file_info_class"] = FileInformationClass.FILE_END_OF_FILE_INFORMATION
    s["file_id"] = o.file_id
    s["buffer"] = eof
    r = conn.send(s, sid=tree.session.session_id, tid=tree.tree_connect_id)
    return conn.receive(r)


def rename(conn, tree, o, to):
    """SET_INFO FileRenameInformation of `o` to share path `to`, not replacing."""
    name = to.encode("utf-16-le")
    buf = bytes(1) + bytes(7) + bytes(8) + len(name).to_bytes(4, "little") + name
    s = SMB2SetInfoRequest()
    s["info_type"] = 1
    s["file_info_class"] = FileInformationClass.FILE_RENAME_INFORMATION
    s["file_id"] = o.file_id
    s["buffer"] = buf
    r = conn.send(s, sid=tree.session.session_id, tid=tree.tree_connect_id)
    return conn.receive(r)


def flush(conn, tree, o):
    f = SMB2FlushRequest()
    f["file_id"] = o.file_id
    r = conn.send(f, sid=tree.session.session_id, tid=tree.tree_connect_id)
    return conn.receive(r)


def lock_range(conn, tree, o):
    """LOCK of `o`'s first 4 KiB, exclusive, fail-immediately."""
    e = SMB2LockElement()
    e["offset"] = 0
    e["length"] = 4096
    e["flags"] = 0x02 | 0x10
    lr = SMB2LockRequest()
    lr["lock_count"] = 1
    lr["file_id"] = o.file_id
    lr["locks"] = [e]
    r = conn.send(lr, sid=tree.session.session_id, tid=tree.tree_connect_id)
    return conn.receive(r)


def fsctl(conn, tree, o, code, data=b"", out=4096):
    """An FSCTL on `o`: its answer's output buffer."""
    i = SMB2IOCTLRequest()
    i["ctl_code"] = code
    i["file_id"] = o.file_id
    i["max_output_response"] = out
    i["flags"] = IOCTLFlags.SMB2_0_IOCTL_IS_FSCTL
    i["buffer"] = data
    r = conn.send(i, sid=tree.session.session_id, tid=tree.tree_connect_id)
    resp = SMB2IOCTLResponse()
    resp.unpack(conn.receive(r)["data"].get_value())
    return resp["buffer"].get_value()


def resume_key(conn, tree, o):
    r = fsctl(conn, tree, o, CtlCode.FSCTL_SRV_REQUEST_RESUME_KEY, out=32)
    key = SMB2SrvRequestResumeKey()
    key.unpack(r)
    return key["resume_key"].get_value()


def copychunk(conn, tree, key, dst, length):
    """FSCTL_SRV_COPYCHUNK_WRITE of `length` bytes (one chunk) from the source whose resume key is
    `key` into `dst`, both at offset 0: the chunks written."""
    chunk = SMB2SrvCopyChunk()
    chunk["source_offset"] = 0
    chunk["target_offset"] = 0
    chunk["length"] = length
    copy = SMB2SrvCopyChunkCopy()
    copy["source_key"] = key
    copy["chunks"] = [chunk]
    r = fsctl(conn, tree, dst, CtlCode.FSCTL_SRV_COPYCHUNK_WRITE, copy.pack(), out=12)
    done = SMB2SrvCopyChunkResponse()
    done.unpack(r)
    return done["chunks_written"].get_value()


def query_security(conn, tree, o):
    q = SMB2QueryInfoRequest()
    q["info_type"] = 3
    q["file_info_class"] = 0
    q["additional_information"] = 0x1 | 0x2 | 0x4
    q["file_id"] = o.file_id
    q["output_buffer_length"] = 65536
    r = conn.send(q, sid=tree.session.session_id, tid=tree.tree_connect_id)
    return conn.receive(r)


def write_then_close(conn, tree, o):
    """A WRITE and a CLOSE of `o` sent one after the other, before either is answered."""
    data = b"w" * 4096
    w = SMB2WriteRequest()
    w["length"] = len(data)
    w["offset"] = 0
    w["file_id"] = o.file_id
    w["buffer"] = data
    c = SMB2CloseRequest()
    c["file_id"] = o.file_id
    sid, tid = tree.session.session_id, tree.tree_connect_id
    rw = conn.send(w, sid=sid, tid=tid)
    rc = conn.send(c, sid=sid, tid=tid)
    conn.receive(rw)
    conn.receive(rc)


def busy(a, i, stop, out):
    _, tree = connect(a)
    while not stop.is_set():
        t0 = time.time()
        o = open_(tree, f"busy-{i}")
        o.write(b"b" * 4096, 0)
        o.read(0, 4096)
        o.close()
        out.append((t0, time.time() - t0))


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] if xs else float("nan")


def main():
    p = argparse.ArgumentParser()
    for k in ("--user", "--password", "--share", "--flag"):
        p.add_argument(k, required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--action", choices=("create", "read", "query", "list", "close", "write-close", "disconnect", "setinfo", "flush", "rename", "lock", "copychunk", "security", "stream", "stream-create", "delete", "stream-rename"), required=True)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--warm", type=float, default=2.0)
    p.add_argument("--hold", type=float, default=3.0)
    a = p.parse_args()

    conn, tree = connect(a)
    stalled = None
    if a.action in ("read", "query", "close", "disconnect", "security"):
        stalled = open_(tree, "stall\\cold", CreateDisposition.FILE_OPEN, 0x00120089)
    elif a.action == "copychunk":
        key = resume_key(conn, tree, open_(tree, "stall\\cold", CreateDisposition.FILE_OPEN, 0x00120089))
        stalled = open_(tree, "stall\\copy", CreateDisposition.FILE_OVERWRITE_IF, 0x0012019F)
    elif a.action in ("write-close", "setinfo", "flush", "lock"):
        stalled = open_(tree, "stall\\cold", CreateDisposition.FILE_OPEN, 0x0012019F)
        if a.action == "flush":
            # A written handle: its FLUSH shows (and writes) its write time now.
            stalled.write(b"f" * 4096, 0)
    elif a.action == "list":
        stalled = open_(tree, "stall", CreateDisposition.FILE_OPEN, 0x00120089, directory=True)
    elif a.action == "rename":
        # DELETE, FILE_READ_ATTRIBUTES, SYNCHRONIZE.
        stalled = open_(tree, "stall\\cold", CreateDisposition.FILE_OPEN, 0x00110080)
    elif a.action == "delete":
        # DELETE, FILE_READ_ATTRIBUTES, SYNCHRONIZE; deleted at its close.
        stalled = open_(tree, "stall\\cold", CreateDisposition.FILE_OPEN, 0x00110080,
                        options=CreateOptions.FILE_DELETE_ON_CLOSE)
    elif a.action == "stream":
        # A named stream of the file, written before the stall (its data in an xattr: 1 KiB, as
        # ext4 keeps an xattr's value within one block).
        stalled = open_(tree, "stall\\cold:s", CreateDisposition.FILE_OVERWRITE_IF, 0x0012019F)
        stalled.write(b"s" * 1024, 0)
    elif a.action == "stream-rename":
        # Read, write and DELETE: the stream is renamed during the stall.
        stalled = open_(tree, "stall\\cold:s", CreateDisposition.FILE_OVERWRITE_IF, 0x0013019F)
        stalled.write(b"s" * 1024, 0)
    stop, results = threading.Event(), [[] for _ in range(a.clients)]
    threads = [threading.Thread(target=busy, args=(a, i, stop, results[i]), daemon=True) for i in range(a.clients)]
    for t in threads:
        t.start()
    time.sleep(a.warm)
    open(a.flag, "w").close()
    s0 = time.time()
    with open(a.flag + "_on", "w") as f:
        f.write(f"{s0:.6f}")
    threading.Timer(a.hold, lambda: os.unlink(a.flag)).start()
    if a.action == "create":
        open_(tree, "stall\\new").close()
    elif a.action == "stream-create":
        open_(tree, "stall\\cold:new", CreateDisposition.FILE_CREATE, 0x0012019F).close()
    elif a.action == "read":
        stalled.read(0, 4096)
    elif a.action == "query":
        query_all(conn, tree, stalled)
    elif a.action == "list":
        stalled.query_directory("*", FileInformationClass.FILE_ID_BOTH_DIRECTORY_INFORMATION)
    elif a.action == "write-close":
        write_then_close(conn, tree, stalled)
    elif a.action == "disconnect":
        tree.disconnect()
    elif a.action == "setinfo":
        set_end_of_file(conn, tree, stalled, 4096)
    elif a.action == "flush":
        flush(conn, tree, stalled)
    elif a.action == "rename":
        r = rename(conn, tree, stalled, "stall\\renamed")
        print(f"stalling client: rename answered {r['status'].get_value():#010x}")
    elif a.action == "lock":
        lock_range(conn, tree, stalled)
    elif a.action == "copychunk":
        assert copychunk(conn, tree, key, stalled, 1 << 20) == 1, "one chunk copied"
    elif a.action == "security":
        query_security(conn, tree, stalled)
    elif a.action == "stream":
        assert len(stalled.read(0, 1024)) == 1024, "the stream's 1 KiB"
    elif a.action == "stream-rename":
        r = rename(conn, tree, stalled, ":renamed")
        print(f"stalling client: the stream's rename answered {r['status'].get_value():#010x}")
    else:
        stalled.close()
    s1 = time.time()
    time.sleep(a.warm)
    stop.set()
    for t in threads:
        t.join(timeout=10)
    loops = [x for r in results for x in r]
    print(f"stalling client: {a.action} of a file under stall/ took {s1 - s0:.3f} s (the file system held it {a.hold} s)")
    print(f"{a.clients} other clients, one connection each, CREATE+WRITE 4 KiB+READ 4 KiB+CLOSE of their own files:")
    for label, keep in (
        ("before the stall", lambda t, d: t + d < s0),
        ("during the stall", lambda t, d: t + d >= s0 and t < s1),
        ("after the stall", lambda t, d: t >= s1),
    ):
        xs = [d for t, d in loops if keep(t, d)]
        print(f"  {label:<17} loops {len(xs):4d}  p50 {pct(xs, 50) * 1000:8.1f} ms  p99 {pct(xs, 99) * 1000:8.1f} ms"
              f"  max {max(xs, default=float('nan')) * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
