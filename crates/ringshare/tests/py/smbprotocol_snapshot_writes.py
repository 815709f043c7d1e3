"""Every way a client could change a snapshot's file, tried through python's smbprotocol on an open
of FILE in the snapshot made for writing, as Samba 4.22 grants it (the TWrp create context names
the snapshot, as Samba's own client sends an `@GMT-…` component): one line per request, `what STATUS`,
so that two servers' outputs compare line by line (crates/ringshare/tests/previous_versions.rs,
which also checks on disk that the snapshot did not change).

Usage: smbprotocol_snapshot_writes.py PORT USER PASSWORD SHARE SNAPSHOT FILE STREAM LIVE
  SNAPSHOT  the @GMT-… token; FILE a file in it (and in the share), STREAM a named stream of
            it; LIVE a file of the live share the copychunk and duplicate-extents requests read
"""

import calendar
import struct
import sys
import time
import uuid

from create_ctx import ctx

from smbprotocol.connection import Connection
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.ioctl import SMB2IOCTLRequest, SMB2IOCTLResponse
from smbprotocol.open import (
    CreateDisposition,
    CreateOptions,
    FilePipePrinterAccessMask,
    ImpersonationLevel,
    Open,
    ShareAccess,
    SMB2SetInfoRequest,
)
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

port, user, password, share, snapshot, name, stream, live = sys.argv[1:9]
conn = Connection(uuid.uuid4(), "127.0.0.1", int(port))
conn.connect(timeout=30)
session = Session(conn, user, password, require_encryption=False)
session.connect()
tree = TreeConnect(session, rf"\\127.0.0.1\{share}")
tree.connect()

A = FilePipePrinterAccessMask
# What smb2.twrp.write asks: all but EXECUTE and DELETE_CHILD.
WRITE_ALL = 0x1F019F
SHARE_ALL = ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE


def status(call):
    try:
        call()
        return "SUCCESS"
    except SMBResponseException as e:
        return "0x%08x" % e.status


def out(what, st):
    print(f"{what} {st}", flush=True)


# The TWrp context: the snapshot's time as a FILETIME.
unix = calendar.timegm(time.strptime(snapshot, "@GMT-%Y.%m.%d-%H.%M.%S"))
TWRP = ctx(b"TWrp", struct.pack("<Q", (unix + 11644473600) * 10**7))


def opened(path, access=WRITE_ALL, disposition=CreateDisposition.FILE_OPEN, options=0, twrp=True):
    f = Open(tree, path)
    f.create(
        ImpersonationLevel.Impersonation,
        access,
        0,
        SHARE_ALL,
        disposition,
        options,
        create_contexts=[TWRP] if twrp else None,
    )
    return f


def open_status(what, path, **kw):
    f = None

    def go():
        nonlocal f
        f = opened(path, **kw)

    out(what, status(go))
    if f is not None:
        f.close()


def set_info(f, info_type, cls, buf, additional=0):
    req = SMB2SetInfoRequest()
    req["info_type"] = info_type
    req["file_info_class"].enum_strict = False  # FileDispositionInformationEx (64) is not in it
    req["file_info_class"] = cls
    req["additional_information"] = additional
    req["file_id"] = f.file_id
    req["buffer"] = buf
    r = conn.send(req, sid=session.session_id, tid=tree.tree_connect_id)
    return status(lambda: conn.receive(r))


def ioctl(f, code, buf, max_out=0):
    req = SMB2IOCTLRequest()
    req["ctl_code"].enum_strict = False
    req["ctl_code"] = code
    req["file_id"] = f.file_id
    req["max_output_response"] = max_out
    req["flags"] = 1  # SMB2_0_IOCTL_IS_FSCTL
    req["buffer"] = buf
    r = conn.send(req, sid=session.session_id, tid=tree.tree_connect_id)
    got = {}

    def go():
        resp = SMB2IOCTLResponse()
        resp.unpack(conn.receive(r)["data"].get_value())
        got["out"] = resp["buffer"].get_value()

    return status(go), got.get("out")


def utf16(s):
    return s.encode("utf-16-le")


def rename_buf(new):
    # FILE_RENAME_INFORMATION / FILE_LINK_INFORMATION (SMB2 form): ReplaceIfExists, 7 reserved,
    # RootDirectory (8), FileNameLength, FileName.
    n = utf16(new)
    return struct.pack("<B7xQI", 0, 0, len(n)) + n


snap = name
FILE = 1
SECURITY = 3

# The open itself (as Samba grants it), then each change on it.
open_status("open for writing", snap)


def changes_on_the_open():
    f = opened(snap)
    out("write", status(lambda: f.write(b"123", 0)))
    out("set end of file", set_info(f, FILE, 20, struct.pack("<Q", 0x100000)))
    out("set allocation", set_info(f, FILE, 19, struct.pack("<Q", 0x100000)))
    # FILE_BASIC_INFORMATION: four times (0: unchanged) and HIDDEN.
    out("set attributes", set_info(f, FILE, 4, struct.pack("<qqqqI4x", 0, 0, 0, 0, 2)))
    out("set times", set_info(f, FILE, 4, struct.pack("<qqqqI4x", 0, 0, 132000000000000000, 0, 0)))
    out("set delete pending", set_info(f, FILE, 13, b"\x01"))
    out("set delete pending (ex, POSIX)", set_info(f, FILE, 64, struct.pack("<I", 3)))
    out("rename", set_info(f, FILE, 10, rename_buf("renamed")))
    out("hard link", set_info(f, FILE, 11, rename_buf("hardlink2")))
    # FILE_FULL_EA_INFORMATION: one EA "RSTEST" = "x".
    ea = struct.pack("<IBBH", 0, 0, 6, 1) + b"RSTEST\x00" + b"x"
    out("set EA", set_info(f, FILE, 15, ea))
    out("set short name", set_info(f, FILE, 40, struct.pack("<I", 4) + utf16("AB~1")))
    out("set valid data length", set_info(f, FILE, 39, struct.pack("<q", 1)))
    # A self-relative descriptor with only an empty DACL (everyone denied).
    sd = struct.pack("<BBHIIII", 1, 0, 0x8004, 0, 0, 0, 20) + struct.pack("<BBHHH", 2, 0, 8, 0, 0)
    out("set security (empty DACL)", set_info(f, SECURITY, 0, sd, additional=4))
    out("fsctl set sparse", ioctl(f, 0x000900C4, b"\x01")[0])
    out("fsctl set zero data", ioctl(f, 0x000980C8, struct.pack("<qq", 0, 3))[0])
    out("fsctl set compression", ioctl(f, 0x0009C040, struct.pack("<H", 1))[0])
    out("fsctl set object id", ioctl(f, 0x00090098, b"\x11" * 64)[0])
    out("fsctl delete object id", ioctl(f, 0x000900A0, b"")[0])
    # Into the snapshot's file from a live one: copychunk (its resume key first).
    src = opened(live, access=A.FILE_READ_DATA | A.FILE_READ_ATTRIBUTES, twrp=False)
    st, key = ioctl(src, 0x00140078, b"", 32)
    if st == "SUCCESS":
        chunks = struct.pack("<24sII", key[:24], 1, 0) + struct.pack("<QQII", 0, 0, 3, 0)
        out("fsctl copychunk into it", ioctl(f, 0x001480F2, chunks, 12)[0])
    else:
        out("fsctl copychunk into it (resume key)", st)
    # FSCTL_DUPLICATE_EXTENTS_TO_FILE from the live file.
    dup = src.file_id + struct.pack("<qqq", 0, 0, 4096)
    out("fsctl duplicate extents into it", ioctl(f, 0x00098344, dup)[0])
    src.close()
    f.close()


try:
    changes_on_the_open()
except SMBResponseException as e:
    out("(the open for writing failed; changes through it not tried)", "0x%08x" % e.status)

# Its named stream, opened for writing and written.
def stream_write():
    f = opened(f"{snap}:{stream}")
    out("write to its stream", status(lambda: f.write(b"xyz", 0)))
    f.close()


try:
    stream_write()
except SMBResponseException as e:
    out("(the stream's open for writing failed)", "0x%08x" % e.status)

# Opens that would change it or add to the snapshot.
open_status("open delete-on-close", snap, options=CreateOptions.FILE_DELETE_ON_CLOSE)
open_status("open overwrite", snap, disposition=CreateDisposition.FILE_OVERWRITE)
open_status("open overwrite-if", snap, disposition=CreateDisposition.FILE_OVERWRITE_IF)
open_status("open supersede", snap, disposition=CreateDisposition.FILE_SUPERSEDE)
open_status("open new stream", f"{snap}:newstream", disposition=CreateDisposition.FILE_OPEN_IF)
open_status("create new file", "newfile", disposition=CreateDisposition.FILE_CREATE)
open_status(
    "create new directory",
    "newdir",
    disposition=CreateDisposition.FILE_CREATE,
    options=CreateOptions.FILE_DIRECTORY_FILE,
)
conn.disconnect(close=True)
print("DONE", flush=True)
