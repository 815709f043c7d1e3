#!/usr/bin/env python3
"""Server-side block clone vs copychunk vs read+write over SMB, with python smbprotocol.

Usage: clone.py HOST PORT USER PASS SHARE SIZE_MIB [METHOD ...]
  METHOD: clone (FSCTL_DUPLICATE_EXTENTS_TO_FILE), copychunk (FSCTL_SRV_COPYCHUNK_WRITE,
  16 MiB per request), readwrite (READ then WRITE of 1 MiB pieces through the client).
Writes "src" of SIZE_MIB pseudo-random MiB, then for each METHOD copies it to "dst-METHOD"
and prints: method, seconds, bytes the client sent and received during the copy, and
whether dst equals src (compared by SHA-256 on the server's file, read back over SMB).
Prints the CPU model first.
"""
import hashlib
import os
import struct
import sys
import time
import uuid

from smbprotocol.connection import Connection
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect
from smbprotocol.open import (Open, CreateDisposition, CreateOptions, FilePipePrinterAccessMask,
                              ImpersonationLevel, ShareAccess)
from smbprotocol.ioctl import CtlCode, SMB2IOCTLRequest, SMB2IOCTLResponse, IOCTLFlags
from smbprotocol.file_info import FileEndOfFileInformation, FileInformationClass, InfoType

MIB = 1 << 20
DUP = 0x00098344
RESUME_KEY = 0x00140078
COPYCHUNK_WRITE = 0x001480F2
# smbprotocol's CtlCode enum has no FSCTL_DUPLICATE_EXTENTS_TO_FILE; its field takes only members.
CtlCode.FSCTL_DUPLICATE_EXTENTS_TO_FILE = DUP


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


class Counter:
    """Bytes through the connection's socket (wraps its send and recv)."""

    def __init__(self, conn):
        self.sent = 0
        self.received = 0
        t = conn.transport
        orig_send, orig_recv = t.send, t._recv

        def send(msg):
            self.sent += 4 + len(msg)  # the Direct TCP header and the message
            return orig_send(msg)

        def recv(length, timeout):
            r = orig_recv(length, timeout)
            if r and r[0]:
                self.received += len(r[0])
            return r

        t.send, t._recv = send, recv


def open_file(tree, name, create):
    f = Open(tree, name)
    f.create(ImpersonationLevel.Impersonation,
             FilePipePrinterAccessMask.GENERIC_READ | FilePipePrinterAccessMask.GENERIC_WRITE,
             0, ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE,
             CreateDisposition.FILE_OVERWRITE_IF if create else CreateDisposition.FILE_OPEN,
             CreateOptions.FILE_NON_DIRECTORY_FILE)
    return f


def ioctl(tree, fid, code, buf, max_out):
    req = SMB2IOCTLRequest()
    req["ctl_code"] = code
    req["file_id"] = fid
    req["buffer"] = buf
    req["max_output_response"] = max_out
    req["flags"] = IOCTLFlags.SMB2_0_IOCTL_IS_FSCTL
    conn = tree.session.connection
    r = conn.send(req, sid=tree.session.session_id, tid=tree.tree_connect_id)
    return conn.receive(r)


def sha(f, size):
    h = hashlib.sha256()
    off = 0
    while off < size:
        n = min(MIB, size - off)
        h.update(f.read(off, n))
        off += n
    return h.hexdigest()


def main():
    host, port, user, pw, share, size_mib = sys.argv[1:7]
    methods = sys.argv[7:] or ["clone", "copychunk", "readwrite"]
    size = int(size_mib) * MIB
    print(f"cpu: {cpu_model()}")
    conn = Connection(uuid.uuid4(), host, int(port))
    conn.connect()
    sess = Session(conn, user, pw, require_encryption=False)
    sess.connect()
    tree = TreeConnect(sess, rf"\\{host}\{share}")
    tree.connect()
    count = Counter(conn)
    src = open_file(tree, "src", True)
    piece = os.urandom(MIB)
    for off in range(0, size, len(piece)):
        src.write(piece[: min(len(piece), size - off)], off)
    want = sha(src, size)
    for m in methods:
        dst = open_file(tree, f"dst-{m}", True)
        s0, r0 = count.sent, count.received
        t0 = time.monotonic()
        if m == "clone":
            _set_eof(dst, size)
            buf = src.file_id + struct.pack("<QQQ", 0, 0, size)
            ioctl(tree, dst.file_id, DUP, buf, 0)
        elif m == "copychunk":
            out = ioctl(tree, src.file_id, RESUME_KEY, b"", 32)
            resp = SMB2IOCTLResponse()
            resp.unpack(out["data"].get_value())
            key = resp["buffer"].get_value()[:24]
            chunk, per_req = MIB, 16
            off = 0
            while off < size:
                chunks = []
                for _ in range(per_req):
                    if off >= size:
                        break
                    n = min(chunk, size - off)
                    chunks.append(struct.pack("<QQII", off, off, n, 0))
                    off += n
                buf = key + struct.pack("<II", len(chunks), 0) + b"".join(chunks)
                ioctl(tree, dst.file_id, COPYCHUNK_WRITE, buf, 12)
        else:
            off = 0
            while off < size:
                n = min(MIB, size - off)
                dst.write(src.read(off, n), off)
                off += n
        secs = time.monotonic() - t0
        sent, recvd = count.sent - s0, count.received - r0
        same = sha(dst, size) == want
        print(f"{m}\t{secs:.3f} s\tsent {sent} B\treceived {recvd} B\tidentical {same}")
        dst.close()
    src.close()
    conn.disconnect()


def _set_eof(f, size):
    """SET_INFO FileEndOfFileInformation: a clone does not grow its target."""
    from smbprotocol.open import SMB2SetInfoRequest
    info = FileEndOfFileInformation()
    info["end_of_file"] = size
    req = SMB2SetInfoRequest()
    req["info_type"] = InfoType.SMB2_0_INFO_FILE
    req["file_info_class"] = FileInformationClass.FILE_END_OF_FILE_INFORMATION
    req["file_id"] = f.file_id
    req["buffer"] = info
    conn = f.connection
    r = conn.send(req, sid=f.tree_connect.session.session_id, tid=f.tree_connect.tree_connect_id)
    conn.receive(r)


if __name__ == "__main__":
    main()
