#!/usr/bin/env python3
"""bench/semantics.py: what an SMB server does on the metadata row's path beyond opening the file,
asked over the wire (python smbprotocol). One line per check, `name: answer (expected)`, so that
the servers bench/rows compares can be told apart by the work they do per open (issue 34: a row
still behind is named with what the peer skips). Usage: semantics.py PORT USER PASS. Run by
bench/semantics, which starts the servers."""
import struct
import sys
import threading
import time
import uuid
from collections import OrderedDict

import smbprotocol.transport as transport
from smbprotocol.connection import Connection
from smbprotocol.create_contexts import (CreateContextName, SMB2CreateContextRequest,
                                         SMB2CreateDurableHandleRequest,
                                         SMB2CreateDurableHandleRequestV2,
                                         SMB2CreateRequestLeaseV2)
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.header import Commands
from smbprotocol.open import (CreateDisposition, CreateOptions, FileAttributes,
                              FilePipePrinterAccessMask as A, ImpersonationLevel, Open,
                              RequestedOplockLevel, SMB2SetInfoRequest, ShareAccess)
from smbprotocol.query_info import InfoType
from smbprotocol.session import Session
from smbprotocol.structure import BytesField, IntField, Structure
from smbprotocol.tree import TreeConnect

PORT, USER, PASSWORD = int(sys.argv[1]), sys.argv[2], sys.argv[3]
SHARE_ALL = ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE
RW = A.FILE_READ_DATA | A.FILE_WRITE_DATA | A.FILE_READ_ATTRIBUTES
LEASE = 0xFF
BREAKS = []
CONNS = {}


class LeaseBreakAck(Structure):
    COMMAND = Commands.SMB2_OPLOCK_BREAK

    def __init__(self):
        self.fields = OrderedDict([("structure_size", IntField(size=2, default=36)),
                                   ("reserved", IntField(size=2)), ("flags", IntField(size=4)),
                                   ("lease_key", BytesField(size=16)),
                                   ("lease_state", IntField(size=4)),
                                   ("lease_duration", IntField(size=8))])
        super().__init__()


def lease_letters(s):
    return "".join(c for c, bit in (("R", 1), ("H", 2), ("W", 4)) if s & bit) or "none"


def acknowledge(conn, session, tree, msg):
    try:
        conn.receive(conn.send(msg, sid=session.session_id, tid=tree.tree_connect_id))
    except Exception as e:  # the ack's own answer is not what is checked
        BREAKS.append("ack failed: %r" % e)


# smbprotocol's receiver does not take unsolicited lease breaks: they are caught here, noted
# and acknowledged when the server asks for it.
_recv = transport.Tcp.recv


def recv(self, timeout):
    while True:
        b = _recv(self, timeout)
        if b and b[:4] == b"\xfeSMB" and len(b) >= 108:
            cmd = struct.unpack_from("<H", b, 12)[0]
            mid = struct.unpack_from("<Q", b, 24)[0]
            body = b[64:]
            if (cmd == Commands.SMB2_OPLOCK_BREAK and mid == 0xFFFFFFFFFFFFFFFF
                    and struct.unpack_from("<H", body, 0)[0] == 44):
                flags = struct.unpack_from("<I", body, 4)[0]
                cur, new = struct.unpack_from("<II", body, 24)
                BREAKS.append("%s->%s%s" % (lease_letters(cur), lease_letters(new),
                                            " (ack asked)" if flags & 1 else ""))
                if flags & 1 and id(self) in CONNS:
                    ack = LeaseBreakAck()
                    ack["lease_key"] = body[8:24]
                    ack["lease_state"] = new
                    threading.Thread(target=acknowledge, args=(*CONNS[id(self)], ack)).start()
                continue
        return b


transport.Tcp.recv = recv


def connect():
    c = Connection(uuid.uuid4(), "127.0.0.1", PORT)
    c.connect()
    s = Session(c, USER, PASSWORD, require_encryption=False, auth_protocol="ntlm")
    s.connect()
    t = TreeConnect(s, r"\\127.0.0.1\share")
    t.connect()
    CONNS[id(c.transport)] = (c, s, t)
    return c, s, t


def create(tree, name, desired=RW, share=SHARE_ALL, disp=CreateDisposition.FILE_OPEN_IF,
           ctxs=None, oplock=RequestedOplockLevel.SMB2_OPLOCK_LEVEL_NONE):
    o = Open(tree, name)
    try:
        r = o.create(ImpersonationLevel.Impersonation, desired,
                     FileAttributes.FILE_ATTRIBUTE_NORMAL, share, disp,
                     CreateOptions.FILE_NON_DIRECTORY_FILE, ctxs, oplock)
        return o, r, "SUCCESS"
    except SMBResponseException as e:
        return None, None, "0x%08X" % e.status


def context(name, data):
    c = SMB2CreateContextRequest()
    c["buffer_name"] = name
    c["buffer_data"] = data
    return c


def lease(state):
    lv2 = SMB2CreateRequestLeaseV2()
    lv2["lease_key"] = uuid.uuid4().bytes
    lv2["lease_state"] = state
    lv2["parent_lease_key"] = b"\0" * 16
    lv2["epoch"] = b"\0\0"
    return context(CreateContextName.SMB2_CREATE_REQUEST_LEASE_V2, lv2)


def contexts(r):
    out = []
    for x in r or []:
        if hasattr(x, "fields") and "lease_state" in x.fields:
            out.append("lease " + lease_letters(x["lease_state"].get_value()))
        elif hasattr(x, "fields"):
            out.append(type(x).__name__.replace("SMB2Create", "").replace("Response", ""))
    return ", ".join(out) or "none"


def breaks():
    global BREAKS
    time.sleep(1.0)
    b, BREAKS = BREAKS, []
    return ", ".join(b) or "none"


def say(check, answer, expected):
    print("%-58s %-34s (%s)" % (check + ":", answer, expected), flush=True)


ca, sa, ta = connect()
cb, sb, tb = connect()
tag = uuid.uuid4().hex[:8]

# Share modes ([MS-SMB2] 3.3.5.9, [MS-FSA] 2.1.5.1.2): a second open that the first open's
# ShareAccess does not allow.
held, _, st = create(ta, "share-%s.txt" % tag, share=0)
_, _, st = create(tb, "share-%s.txt" % tag, desired=A.FILE_READ_DATA)
say("share modes: a 2nd open against share access 0", st, "0xC0000043 SHARING_VIOLATION")
held.close()

# Leases: what is granted, and whether a conflicting open breaks them.
o, _, _ = create(ta, "oplock-%s.txt" % tag, oplock=RequestedOplockLevel.SMB2_OPLOCK_LEVEL_BATCH)
say("oplocks: BATCH asked, level granted", "0x%X" % o.oplock_level, "0x9 BATCH")
o.close()
leased, r, _ = create(ta, "lease-%s.txt" % tag, ctxs=[lease(7)], oplock=LEASE)
say("leases: RWH asked, granted", contexts(r), "lease RHW")
other, _, st = create(tb, "lease-%s.txt" % tag, share=0)
say("leases: a conflicting open: breaks, then its answer", "%s; %s" % (breaks(), st),
    "RHW->RW (ack asked); 0xC0000043")
other and other.close()
leased.close()

# Durable handles ([MS-SMB2] 3.3.5.9.6, 3.3.5.9.10).
o, r, _ = create(ta, "dur-%s.txt" % tag, oplock=RequestedOplockLevel.SMB2_OPLOCK_LEVEL_BATCH,
                 ctxs=[context(CreateContextName.SMB2_CREATE_DURABLE_HANDLE_REQUEST,
                               SMB2CreateDurableHandleRequest())])
say("durable handles: DHnQ with BATCH, contexts answered", contexts(r), "DurableHandle")
o.close()
d2 = SMB2CreateDurableHandleRequestV2()
d2["timeout"] = 0
d2["create_guid"] = uuid.uuid4()
o, r, _ = create(ta, "dur2-%s.txt" % tag, oplock=LEASE,
                 ctxs=[lease(7), context(CreateContextName.SMB2_CREATE_DURABLE_HANDLE_REQUEST_V2,
                                         d2)])
say("durable handles: DH2Q with a lease, contexts answered", contexts(r),
    "lease RHW, DurableHandleV2")
o.close()

# Names in another case are the same file ([MS-FSA] 2.1.5.1.1 on a case-insensitive share).
o, _, _ = create(ta, "CaseTest-%s.txt" % tag)
o.close()
o, _, st = create(ta, "casetest-%s.TXT" % tag, disp=CreateDisposition.FILE_OPEN)
say("names: the file opened in another case", st, "SUCCESS")
o and o.close()

# Delete pending ([MS-FSA] 2.1.5.1.2.1): no new open of a file whose delete is pending.
o, _, _ = create(ta, "del-%s.txt" % tag, desired=RW | A.DELETE)
req = SMB2SetInfoRequest()
req["info_type"] = InfoType.SMB2_0_INFO_FILE
req["file_info_class"] = 13  # FileDispositionInformation
req["file_id"] = o.file_id
req["buffer"] = b"\x01"
ca.receive(ca.send(req, sid=sa.session_id, tid=ta.tree_connect_id))
o2, _, st = create(tb, "del-%s.txt" % tag, desired=A.FILE_READ_DATA)
say("delete pending: another open of the file", st, "0xC0000056 DELETE_PENDING")
o2 and o2.close()
o.close()
for c in (ca, cb):
    try:
        c.disconnect(True)
    except Exception:
        pass
