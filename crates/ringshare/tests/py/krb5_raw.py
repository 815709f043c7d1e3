"""A bare SMB 2.1 client that logs on with a Kerberos token made by MIT GSS (python3-gssapi,
SPNEGO mechanism), for what smbclient cannot be made to do: send the same AP-REQ twice, and keep
a session past its ticket's end.

usage: krb5_raw.py HOST PORT SERVICE@HOST [--replay] [--wait SECONDS]

Prints one line per step: "setup1 STATUS", with --replay "setup2 STATUS" (the same token on a
second connection), with --wait "tree STATUS" (a TREE_CONNECT to IPC$ on the first session
after waiting). STATUS is the NTSTATUS in hex.
"""

import socket
import struct
import sys
import time

import gssapi

NEGOTIATE, SESSION_SETUP, TREE_CONNECT = 0, 1, 3


class Conn:
    def __init__(self, host, port):
        self.s = socket.create_connection((host, port), timeout=20)
        self.mid = 0
        self.session = 0

    def request(self, command, body):
        hdr = struct.pack(
            "<4sHHIHHIIQIIQ16s",
            b"\xfeSMB", 64, 0, 0, command, 64, 0, 0, self.mid, 0, 0, self.session, b"\0" * 16,
        )
        self.mid += 1
        msg = hdr + body
        self.s.sendall(struct.pack(">I", len(msg)) + msg)
        n = struct.unpack(">I", self.recv(4))[0] & 0xFFFFFF
        reply = self.recv(n)
        status = struct.unpack_from("<I", reply, 8)[0]
        if status == 0x103:  # STATUS_PENDING: the real answer follows
            n = struct.unpack(">I", self.recv(4))[0] & 0xFFFFFF
            reply = self.recv(n)
            status = struct.unpack_from("<I", reply, 8)[0]
        return status, reply

    def recv(self, n):
        out = b""
        while len(out) < n:
            part = self.s.recv(n - len(out))
            if not part:
                raise ConnectionError("connection closed")
            out += part
        return out

    def negotiate(self):
        body = struct.pack("<HHHHI16sQ", 36, 2, 1, 0, 0, b"\x11" * 16, 0) + struct.pack(
            "<HH", 0x0202, 0x0210
        )
        status, _ = self.request(NEGOTIATE, body)
        assert status == 0, hex(status)

    def session_setup(self, token):
        body = struct.pack("<HBBIIHHQ", 25, 0, 1, 0, 0, 64 + 24, len(token), 0) + token
        status, reply = self.request(SESSION_SETUP, body)
        self.session = struct.unpack_from("<Q", reply, 40)[0]
        return status

    def tree_connect(self, path):
        name = path.encode("utf-16-le")
        body = struct.pack("<HHHH", 9, 0, 64 + 8, len(name)) + name
        status, _ = self.request(TREE_CONNECT, body)
        return status


def main():
    host, port, spn = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    replay = "--replay" in sys.argv
    wait = float(sys.argv[sys.argv.index("--wait") + 1]) if "--wait" in sys.argv else None
    name = gssapi.Name(spn, gssapi.NameType.hostbased_service)
    spnego = gssapi.OID.from_int_seq("1.3.6.1.5.5.2")
    flags = gssapi.RequirementFlag.mutual_authentication | gssapi.RequirementFlag.integrity
    ctx = gssapi.SecurityContext(name=name, mech=spnego, usage="initiate", flags=flags)
    token = ctx.step()
    first = Conn(host, port)
    first.negotiate()
    print("setup1 %08x" % first.session_setup(token), flush=True)
    if replay:
        second = Conn(host, port)
        second.negotiate()
        print("setup2 %08x" % second.session_setup(token), flush=True)
    if wait is not None:
        time.sleep(wait)
        print("tree %08x" % first.tree_connect("\\\\%s\\IPC$" % spn.split("@")[1]), flush=True)


if __name__ == "__main__":
    main()
