#!/usr/bin/env python3
"""A Witness ([MS-SWN]) client over DCE/RPC on TCP, NDR built by hand: it
asks the endpoint mapper of HOST (at EPM_PORT, anonymous) for the Witness
port, lists the interfaces, registers (RegisterEx) for each IP given and holds
an AsyncNotify per registration, each on a connection of its own. Witness
connections are anonymous (hand-built PDUs, the standard library only), or,
with --user USER%PASSWORD, python impacket's DCE/RPC bound with NTLMSSP at
RPC_C_AUTHN_LEVEL_PKT_PRIVACY (every PDU signed, every stub sealed), or with
--krb NAME bound with Kerberos (in SPNEGO) for host/NAME from the ticket cache
KRB5CCNAME names. It prints
one line per event as it arrives:

  LIST <ip> <state> <flags>            (GetInterfaceList, once)
  REGISTERED <ip>
  EVENT <ip> RESOURCE_CHANGE <state> <name>
  EVENT <ip> CLIENT_MOVE <ip>,<ip>...

  REFUSED <why>                        (the first Witness call failed)

usage: witness_client.py [--user USER%PASSWORD | --krb NAME] HOST EPM_PORT NETNAME IP [IP...]
"""

import socket
import struct
import sys
import threading

NDR = bytes.fromhex("045d888aeb1cc9119fe808002b104860")
WITNESS = (bytes.fromhex("74c0d8cce5d0404a92b4d074faa6ba28"), 1, 1)
EPM = (bytes.fromhex("0883afe11f5dc91191a408002b14a0fa"), 3, 0)
out_lock = threading.Lock()


def say(line):
    with out_lock:
        print(line, flush=True)


class Rpc:
    def __init__(self, host, port, iface):
        self.s = socket.create_connection((host, port), timeout=None)
        self.call_id = 1
        uuid, major, minor = iface
        ctx = struct.pack("<HBB", 0, 1, 0) + uuid + struct.pack("<HH", major, minor) + NDR + struct.pack("<I", 2)
        body = struct.pack("<HHIB3x", 4280, 4280, 0, 1) + ctx
        self.send(11, body)
        ptype, _ = self.recv()
        assert ptype == 12, "bind refused (%d)" % ptype

    def send(self, ptype, body):
        hdr = struct.pack("<BBBB4sHHI", 5, 0, ptype, 3, b"\x10\0\0\0", 16 + len(body), 0, self.call_id)
        self.s.sendall(hdr + body)

    def recv_exact(self, n):
        b = b""
        while len(b) < n:
            c = self.s.recv(n - len(b))
            if not c:
                raise EOFError("connection closed")
            b += c
        return b

    def recv(self):
        """One whole answer (fragments joined): its type and stub."""
        stub = b""
        while True:
            hdr = self.recv_exact(16)
            ptype, flags = hdr[2], hdr[3]
            frag_len = struct.unpack("<H", hdr[8:10])[0]
            body = self.recv_exact(frag_len - 16)
            if ptype != 2:
                return ptype, body
            stub += body[8:]
            if flags & 2:
                return ptype, stub

    def call(self, opnum, stub):
        self.call_id += 1
        self.send(0, struct.pack("<IHH", len(stub), 0, opnum) + stub)
        ptype, out = self.recv()
        if ptype == 3:
            raise RuntimeError("fault 0x%08x" % struct.unpack("<I", out[8:12])[0])
        return out


class SealedRpc:
    """A Witness association through impacket at packet privacy: NTLMSSP, or with --krb NAME
    Kerberos in SPNEGO (impacket's only Kerberos binding: auth type 9, DCE style) with a ticket
    for host/NAME from the credential cache KRB5CCNAME names (no KDC is asked)."""

    def __init__(self, host, port, user, password):
        from impacket.dcerpc.v5 import rpcrt, transport
        from impacket.uuid import uuidtup_to_bin

        t = transport.DCERPCTransportFactory("ncacn_ip_tcp:%s[%d]" % (host, port))
        # The socket's timeout is the connect timeout: AsyncNotify is held for long.
        t.set_connect_timeout(600)
        if KRB_NAME is not None:
            t.set_credentials("", "", "", "", "")
            t.setRemoteName(KRB_NAME)
            t.set_kerberos(True)
            kind = rpcrt.RPC_C_AUTHN_GSS_NEGOTIATE
        else:
            t.set_credentials(user, password, "", "", "")
            kind = rpcrt.RPC_C_AUTHN_WINNT
        self.dce = t.get_dce_rpc()
        self.dce.set_auth_type(kind)
        self.dce.set_auth_level(rpcrt.RPC_C_AUTHN_LEVEL_PKT_PRIVACY)
        self.dce.connect()
        self.dce.bind(uuidtup_to_bin(("ccd8c074-d0e5-4a40-92b4-d074faa6ba28", "1.1")))

    def call(self, opnum, stub):
        self.dce.call(opnum, stub)
        return self.dce.recv()


CREDS = None
KRB_NAME = None


def witness(host, port):
    if CREDS is None:
        return Rpc(host, port, WITNESS)
    return SealedRpc(host, port, CREDS[0], CREDS[1])


def pad4(b):
    return b + b"\0" * (-len(b) % 4)


def ndr_string(s, ref):
    u = (s + "\0").encode("utf-16-le")
    n = len(u) // 2
    return pad4(struct.pack("<IIII", ref, n, 0, n) + u)


def witness_port(host, epm_port):
    c = Rpc(host, epm_port, EPM)
    uuid, major, minor = WITNESS
    floors = [
        (b"\x0d" + uuid + struct.pack("<H", major), struct.pack("<H", minor)),
        (b"\x0d" + NDR + struct.pack("<H", 2), struct.pack("<H", 0)),
        (b"\x0b", b"\0\0"),
        (b"\x07", b"\0\0"),
        (b"\x09", b"\0\0\0\0"),
    ]
    tower = struct.pack("<H", len(floors))
    for lhs, rhs in floors:
        tower += struct.pack("<H", len(lhs)) + lhs + struct.pack("<H", len(rhs)) + rhs
    stub = struct.pack("<III", 0, 2, len(tower)) + struct.pack("<I", len(tower)) + pad4(tower)
    stub += b"\0" * 20 + struct.pack("<I", 4)
    out = c.call(3, stub)
    num = struct.unpack("<I", out[20:24])[0]
    assert num >= 1, "the endpoint mapper does not know Witness"
    t = out[20 + 4 + 12 + 4 + 8:]
    # floor 4 (TCP): lhs len 1, 0x07, rhs len 2, port big-endian
    at = 2
    for _ in range(3):
        lhs = struct.unpack("<H", t[at:at + 2])[0]
        at += 2 + lhs
        rhs = struct.unpack("<H", t[at:at + 2])[0]
        at += 2 + rhs
    return struct.unpack(">H", t[at + 5:at + 7])[0]


def interface_list(c):
    out = c.call(0, b"")
    n = struct.unpack("<I", out[4:8])[0]
    at = 16
    for _ in range(n):
        e = out[at:at + 552]
        state = struct.unpack("<H", e[524:526])[0]
        ip = socket.inet_ntoa(e[528:532])
        flags = struct.unpack("<I", e[548:552])[0]
        say("LIST %s %d %d" % (ip, state, flags))
        at += 552
    assert struct.unpack("<I", out[-4:])[0] == 0


def watch(host, port, netname, ip):
    c = witness(host, port)
    stub = struct.pack("<I", 0x00020000) + ndr_string(netname, 0x20000) + struct.pack("<I", 0)
    stub += ndr_string(ip, 0x20004) + ndr_string("PYCLIENT", 0x20008) + struct.pack("<II", 0, 0)
    out = c.call(4, stub)
    werr = struct.unpack("<I", out[20:24])[0]
    assert werr == 0, "RegisterEx %s: WERROR %d" % (ip, werr)
    handle = out[:20]
    say("REGISTERED %s" % ip)
    while True:
        out = c.call(3, handle)
        if struct.unpack("<I", out[:4])[0] == 0:
            say("EVENT %s NONE %d" % (ip, struct.unpack("<I", out[-4:])[0]))
            return
        kind, length, num = struct.unpack("<III", out[4:16])
        msg = out[24:24 + length]
        if kind == 1:
            state = struct.unpack("<I", msg[4:8])[0]
            name = msg[8:].decode("utf-16-le").rstrip("\0")
            say("EVENT %s RESOURCE_CHANGE %d %s" % (ip, state, name))
        elif kind == 2:
            n = struct.unpack("<I", msg[8:12])[0]
            ips = [socket.inet_ntoa(msg[12 + 24 * i + 4:12 + 24 * i + 8]) for i in range(n)]
            say("EVENT %s CLIENT_MOVE %s" % (ip, ",".join(ips)))
        else:
            say("EVENT %s TYPE %d" % (ip, kind))


def main():
    global CREDS, KRB_NAME
    args = sys.argv[1:]
    if args[0] == "--user":
        CREDS = args[1].split("%", 1)
        args = args[2:]
    elif args[0] == "--krb":
        CREDS, KRB_NAME = ("", ""), args[1]
        args = args[2:]
    host, epm_port, netname = args[0], int(args[1]), args[2]
    port = witness_port(host, epm_port)
    say("PORT %d" % port)
    try:
        interface_list(witness(host, port))
    except Exception as e:  # noqa: BLE001 - any refusal is reported as such
        say("REFUSED %s" % str(e).replace("\n", " "))
        return
    threads = [threading.Thread(target=watch, args=(host, port, netname, ip), daemon=True) for ip in args[3:]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
