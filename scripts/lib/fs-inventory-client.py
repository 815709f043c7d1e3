"""Drive each SMB command family against a ringshare server, one step at a time, for
scripts/fs-syscalls-inventory.sh (issue 33: which file system calls an I/O thread makes itself).

One connection, one session, one tree. Each step prepares what it needs (unmeasured), then
sends its requests REPS times between two marks, then cleans up (unmeasured). Prints one JSON
object a line per step: {"step", "reps", "requests", "t0", "t1", "status"}: t0 and t1 are
CLOCK_REALTIME seconds, to be matched with `strace -tt` times; requests is how many SMB
requests the step sent in all (so the syscalls of the window divided by it is a per-request
figure); status is "ok" or the first NTSTATUS error seen.

  python fs-inventory-client.py --port P --user U --password W --share S [--reps N]
"""

import argparse
import json
import struct
import sys
import threading
import time
import uuid

from smbprotocol import Dialects
from smbprotocol.change_notify import CompletionFilter, FileSystemWatcher
from smbprotocol.connection import Connection
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.file_info import FileInformationClass
from smbprotocol.ioctl import SMB2IOCTLRequest, SMB2IOCTLResponse
from smbprotocol.open import (
    CreateDisposition,
    CreateOptions,
    ImpersonationLevel,
    LockFlags,
    Open,
    ShareAccess,
)
from smbprotocol.open import SMB2LockElement as LockElement
from smbprotocol.open import SMB2QueryInfoRequest, SMB2SetInfoRequest
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

GENERIC_ALL = 0x10000000
MAXIMUM_ALLOWED = 0x02000000
SHARE_ALL = ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE
FILE_ATTRIBUTE_NORMAL = 0x80
DELETE = 0x00010000

INFO_FILE, INFO_FS, INFO_SECURITY = 1, 2, 3

FSCTL_SRV_REQUEST_RESUME_KEY = 0x00140078
FSCTL_SRV_COPYCHUNK_WRITE = 0x001480F2
FSCTL_SET_SPARSE = 0x000900C4
FSCTL_SRV_ENUMERATE_SNAPSHOTS = 0x00144064
FSCTL_QUERY_ALLOCATED_RANGES = 0x000940CF
FSCTL_SET_ZERO_DATA = 0x000980C8


class Client:
    def __init__(self, args):
        self.conn = Connection(uuid.uuid4(), "127.0.0.1", args.port)
        self.conn.connect(Dialects.SMB_3_1_1)
        self.sess = Session(self.conn, args.user, args.password, require_encryption=False)
        self.sess.connect()
        self.tree = TreeConnect(self.sess, rf"\\127.0.0.1\{args.share}")
        self.tree.connect()

    def open(self, name, disp=CreateDisposition.FILE_OPEN, directory=False, access=GENERIC_ALL):
        o = Open(self.tree, name)
        opts = CreateOptions.FILE_DIRECTORY_FILE if directory else CreateOptions.FILE_NON_DIRECTORY_FILE
        o.create(ImpersonationLevel.Impersonation, access, FILE_ATTRIBUTE_NORMAL, SHARE_ALL, disp, opts)
        return o

    def call(self, req, o):
        r = self.conn.send(req, sid=self.sess.session_id, tid=self.tree.tree_connect_id)
        return self.conn.receive(r)

    def query(self, o, info_type, cls, extra=0):
        q = SMB2QueryInfoRequest()
        q["info_type"] = info_type
        q["file_info_class"] = cls
        q["file_id"] = o.file_id
        q["output_buffer_length"] = 65536
        q["additional_information"] = extra
        return self.call(q, o)

    def set(self, o, cls, buf, info_type=INFO_FILE, extra=0):
        s = SMB2SetInfoRequest()
        s["info_type"] = info_type
        s["file_info_class"] = cls
        s["file_id"] = o.file_id
        s["additional_information"] = extra
        s["buffer"] = buf
        return self.call(s, o)

    def ioctl(self, o, code, data=b"", out=65536):
        i = SMB2IOCTLRequest()
        i["ctl_code"] = code
        i["file_id"] = o.file_id
        i["max_output_response"] = out
        i["flags"] = 1  # SMB2_0_IOCTL_IS_FSCTL
        i["buffer"] = data
        resp = SMB2IOCTLResponse()
        resp.unpack(self.call(i, o)["data"].get_value())
        return resp["buffer"].get_value()


def filetime(unix):
    return int((unix + 11644473600) * 10_000_000)


def basic(times=0, attrs=0):
    t = filetime(time.time()) if times else 0
    return struct.pack("<QQQQII", 0, 0, t, 0, attrs, 0)


def rename_buf(to):
    n = to.encode("utf-16-le")
    return struct.pack("<B7xQI", 1, 0, len(n)) + n


def steps(c, reps):
    """(name, requests per rep, prepare, run, cleanup) for every step."""
    state = {}
    out = []

    def add(name, per, run, prepare=None, cleanup=None):
        out.append((name, per, prepare, run, cleanup))

    def prep_file(name="inv-file", size=0):
        def p():
            o = c.open(name, CreateDisposition.FILE_OVERWRITE_IF)
            if size:
                o.write(b"x" * size, 0)
            state["f"] = o

        return p

    def close_f():
        state.pop("f").close()

    # CREATE of a new file and its CLOSE, apart.
    def create_new(i):
        state.setdefault("new", []).append(c.open(f"inv-new-{i}", CreateDisposition.FILE_CREATE))

    add("CREATE new file", 1, create_new)

    def close_new(i):
        state["new"].pop().close()

    add("CLOSE", 1, close_new)

    def create_existing(i):
        state.setdefault("ex", []).append(c.open(f"inv-new-{i}", CreateDisposition.FILE_OPEN))

    add("CREATE existing file", 1, create_existing, cleanup=lambda: [o.close() for o in state.pop("ex")])

    def create_missing(i):
        try:
            c.open(f"inv-missing-{i}", CreateDisposition.FILE_OPEN)
        except SMBResponseException:
            pass

    add("CREATE of a missing name (OBJECT_NAME_NOT_FOUND)", 1, create_missing)

    def mkdir(i):
        c.open(f"inv-dir-{i}", CreateDisposition.FILE_CREATE, directory=True).close()

    add("CREATE new directory + CLOSE", 2, mkdir)

    qi = [
        ("FileBasicInformation", INFO_FILE, FileInformationClass.FILE_BASIC_INFORMATION, 0),
        ("FileStandardInformation", INFO_FILE, FileInformationClass.FILE_STANDARD_INFORMATION, 0),
        ("FileInternalInformation", INFO_FILE, FileInformationClass.FILE_INTERNAL_INFORMATION, 0),
        ("FileEaInformation", INFO_FILE, FileInformationClass.FILE_EA_INFORMATION, 0),
        ("FileAllInformation", INFO_FILE, FileInformationClass.FILE_ALL_INFORMATION, 0),
        ("FileNetworkOpenInformation", INFO_FILE, FileInformationClass.FILE_NETWORK_OPEN_INFORMATION, 0),
        ("FileAttributeTagInformation", INFO_FILE, FileInformationClass.FILE_ATTRIBUTE_TAG_INFORMATION, 0),
        ("FileStreamInformation", INFO_FILE, FileInformationClass.FILE_STREAM_INFORMATION, 0),
        ("FileFsVolumeInformation", INFO_FS, 1, 0),
        ("FileFsSizeInformation", INFO_FS, 3, 0),
        ("FileFsAttributeInformation", INFO_FS, 5, 0),
        ("FileFsFullSizeInformation", INFO_FS, 7, 0),
        ("security (owner, group, DACL)", INFO_SECURITY, 0, 0x7),
    ]
    for label, itype, cls, extra in qi:
        add(
            f"QUERY_INFO {label}",
            1,
            lambda i, itype=itype, cls=cls, extra=extra: c.query(state["f"], itype, cls, extra),
            prepare=prep_file(size=4096),
            cleanup=close_f,
        )

    add(
        "SET_INFO FileBasicInformation (times)",
        1,
        lambda i: c.set(state["f"], FileInformationClass.FILE_BASIC_INFORMATION, basic(times=1)),
        prepare=prep_file(),
        cleanup=close_f,
    )
    add(
        "SET_INFO FileBasicInformation (DOS attributes)",
        1,
        lambda i: c.set(
            state["f"], FileInformationClass.FILE_BASIC_INFORMATION, basic(attrs=0x20 | (2 if i % 2 == 0 else 0))
        ),
        prepare=prep_file(),
        cleanup=close_f,
    )
    add(
        "SET_INFO FileEndOfFileInformation",
        1,
        lambda i: c.set(state["f"], FileInformationClass.FILE_END_OF_FILE_INFORMATION, struct.pack("<Q", 8192 * (i + 1))),
        prepare=prep_file(),
        cleanup=close_f,
    )
    add(
        "SET_INFO FileAllocationInformation",
        1,
        lambda i: c.set(state["f"], FileInformationClass.FILE_ALLOCATION_INFORMATION, struct.pack("<Q", 65536 * (i + 1))),
        prepare=prep_file(),
        cleanup=close_f,
    )

    def prep_rename():
        state["f"] = c.open("inv-ren-0", CreateDisposition.FILE_OVERWRITE_IF, access=GENERIC_ALL)

    add(
        "SET_INFO FileRenameInformation",
        1,
        lambda i: c.set(state["f"], FileInformationClass.FILE_RENAME_INFORMATION, rename_buf(f"inv-ren-{i + 1}")),
        prepare=prep_rename,
        cleanup=close_f,
    )

    def prep_delete():
        state["del"] = [c.open(f"inv-del-{i}", CreateDisposition.FILE_OVERWRITE_IF) for i in range(reps)]

    add(
        "SET_INFO FileDispositionInformation (delete pending)",
        1,
        lambda i: c.set(state["del"][i], FileInformationClass.FILE_DISPOSITION_INFORMATION, b"\x01"),
        prepare=prep_delete,
    )
    add("CLOSE of a delete-pending file (the unlink)", 1, lambda i: state["del"][i].close())

    def prep_dir():
        d = c.open("inv-list", CreateDisposition.FILE_OPEN_IF, directory=True)
        d.close()
        for n in range(20):
            c.open(f"inv-list\\e{n:02}", CreateDisposition.FILE_OVERWRITE_IF).close()
        state["d"] = [c.open("inv-list", directory=True, access=0x00120089) for _ in range(reps)]

    add(
        "QUERY_DIRECTORY 20 entries, FileIdBothDirectoryInformation (first call on a handle)",
        1,
        lambda i: state["d"][i].query_directory("*", FileInformationClass.FILE_ID_BOTH_DIRECTORY_INFORMATION),
        prepare=prep_dir,
        cleanup=lambda: [d.close() for d in state.pop("d")],
    )

    add("WRITE 4 KiB", 1, lambda i: state["f"].write(b"w" * 4096, 4096 * i), prepare=prep_file(), cleanup=close_f)
    add("WRITE 1 MiB", 1, lambda i: state["f"].write(b"W" * (1 << 20), (1 << 20) * i), prepare=prep_file(), cleanup=close_f)
    add("READ 4 KiB", 1, lambda i: state["f"].read(4096 * i, 4096), prepare=prep_file(size=1 << 20), cleanup=close_f)
    add("READ 1 MiB", 1, lambda i: state["f"].read(0, 1 << 20), prepare=prep_file(size=1 << 20), cleanup=close_f)
    add(
        "WRITE 4 KiB write-through",
        1,
        lambda i: state["f"].write(b"t" * 4096, 4096 * i, write_through=True),
        prepare=prep_file(),
        cleanup=close_f,
    )
    add("FLUSH", 1, lambda i: state["f"].flush(), prepare=prep_file(size=4096), cleanup=close_f)

    def lock(i):
        e = LockElement()
        e["offset"], e["length"] = 100 * i, 10
        e["flags"] = LockFlags.SMB2_LOCKFLAG_EXCLUSIVE_LOCK | LockFlags.SMB2_LOCKFLAG_FAIL_IMMEDIATELY
        state["f"].lock([e])
        u = LockElement()
        u["offset"], u["length"], u["flags"] = 100 * i, 10, LockFlags.SMB2_LOCKFLAG_UNLOCK
        state["f"].lock([u])

    add("LOCK + UNLOCK", 2, lock, prepare=prep_file(size=4096), cleanup=close_f)

    def prep_copy():
        src = c.open("inv-src", CreateDisposition.FILE_OVERWRITE_IF)
        src.write(b"c" * (1 << 20), 0)
        state["src"] = src
        state["dst"] = c.open("inv-dst", CreateDisposition.FILE_OVERWRITE_IF)
        state["key"] = c.ioctl(src, FSCTL_SRV_REQUEST_RESUME_KEY, out=32)[:24]

    def copy(i):
        chunk = struct.pack("<QQII", 0, (1 << 20) * i, 1 << 20, 0)
        c.ioctl(state["dst"], FSCTL_SRV_COPYCHUNK_WRITE, state["key"] + struct.pack("<II", 1, 0) + chunk, out=12)

    def close_copy():
        state.pop("src").close()
        state.pop("dst").close()

    add("IOCTL FSCTL_SRV_COPYCHUNK_WRITE 1 MiB", 1, copy, prepare=prep_copy, cleanup=close_copy)
    add(
        "IOCTL FSCTL_SRV_REQUEST_RESUME_KEY",
        1,
        lambda i: c.ioctl(state["f"], FSCTL_SRV_REQUEST_RESUME_KEY, out=32),
        prepare=prep_file(),
        cleanup=close_f,
    )
    add(
        "IOCTL FSCTL_SET_SPARSE",
        1,
        lambda i: c.ioctl(state["f"], FSCTL_SET_SPARSE, b"\x01", out=0),
        prepare=prep_file(size=1 << 20),
        cleanup=close_f,
    )
    add(
        "IOCTL FSCTL_QUERY_ALLOCATED_RANGES",
        1,
        lambda i: c.ioctl(state["f"], FSCTL_QUERY_ALLOCATED_RANGES, struct.pack("<QQ", 0, 1 << 20), out=4096),
        prepare=prep_file(size=1 << 20),
        cleanup=close_f,
    )
    add(
        "IOCTL FSCTL_SET_ZERO_DATA 64 KiB",
        1,
        lambda i: c.ioctl(state["f"], FSCTL_SET_ZERO_DATA, struct.pack("<QQ", 65536 * i, 65536 * (i + 1)), out=0),
        prepare=prep_file(size=1 << 20),
        cleanup=close_f,
    )

    def snapshots(i):
        try:
            c.ioctl(state["f"], FSCTL_SRV_ENUMERATE_SNAPSHOTS, out=65536)
        except SMBResponseException:
            pass

    def prep_root():
        state["f"] = c.open("", directory=True, access=0x00120089)

    add("IOCTL FSCTL_SRV_ENUMERATE_SNAPSHOTS (share root)", 1, snapshots, prepare=prep_root, cleanup=close_f)

    def prep_notify():
        c.open("inv-watch", CreateDisposition.FILE_OPEN_IF, directory=True).close()
        state["w"] = c.open("inv-watch", directory=True, access=0x00120089)

    def notify(i):
        w = FileSystemWatcher(state["w"])
        w.start(CompletionFilter.FILE_NOTIFY_CHANGE_FILE_NAME)
        time.sleep(0.05)
        c.open(f"inv-watch\\n{i}", CreateDisposition.FILE_OVERWRITE_IF).close()
        w.wait()

    add("CHANGE_NOTIFY armed, then fired by a CREATE+CLOSE in the directory", 3, notify, prepare=prep_notify)

    # A named stream's WRITE, READ and rename (the POSIX backend keeps a stream's data in an
    # extended attribute: its I/O is xattr calls, not the ring's).
    add(
        "WRITE 4 KiB of a named stream",
        1,
        lambda i: state["f"].write(b"s" * 4096, 4096 * i),
        prepare=prep_file("inv-file:s"),
        cleanup=close_f,
    )
    add(
        "READ 4 KiB of a named stream",
        1,
        lambda i: state["f"].read(4096 * i, 4096),
        prepare=prep_file("inv-file:s", size=16384),
        cleanup=close_f,
    )

    def prep_stream_rename():
        state["f"] = c.open("inv-file:r0", CreateDisposition.FILE_OVERWRITE_IF, access=GENERIC_ALL)

    add(
        "SET_INFO FileRenameInformation of a named stream",
        1,
        lambda i: c.set(state["f"], FileInformationClass.FILE_RENAME_INFORMATION, rename_buf(f":r{i + 1}")),
        prepare=prep_stream_rename,
        cleanup=close_f,
    )
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--share", required=True)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--gap", type=float, default=0.3, help="seconds between steps")
    args = p.parse_args()
    c = Client(args)
    for name, per, prepare, run, cleanup in steps(c, args.reps):
        status = "ok"
        if prepare:
            prepare()
        time.sleep(args.gap)
        t0 = time.time()
        for i in range(args.reps):
            try:
                run(i)
            except SMBResponseException as e:
                status = f"0x{e.status:08x}"
        t1 = time.time()
        time.sleep(args.gap)
        if cleanup:
            cleanup()
        print(json.dumps({"step": name, "reps": args.reps, "requests": per * args.reps, "t0": t0, "t1": t1, "status": status}), flush=True)
    threading.Event().wait(0.1)
    sys.exit(0)


if __name__ == "__main__":
    main()
