#!/usr/bin/env python3
"""Cut captured SMB2 traffic (a pcap of `tcpdump -i lo -w`) into seed corpora.

    python3 fuzz/pcap_to_corpus.py capture.pcap fuzz/corpus [--server-port 445]

Reads a classic libpcap file (Ethernet or Linux cooked link types, IPv4, TCP),
reassembles each direction of each TCP connection, splits it into direct-TCP
frames ([MS-SMB2] 2.1: a zero byte and a 24-bit big-endian length) and writes
one seed per interesting piece under <corpus>/<target>/. Seeds are named by
the SHA-1 of their content, as libFuzzer names them, so re-running the script
adds nothing twice.

The whole-core target (`core_connection`) gets one seed per client connection:
a flags byte, then each client frame as [u16 LE length][frame]. Ids the server
chose at random are replaced with placeholders the target substitutes back:
the SessionId with b"~SESSID~" and every FileId the server handed out with
b"~FILEID~" + the index (u64 LE) of the CREATE response that returned it
(counting failed CREATEs too, not interim responses).
"""

import hashlib
import os
import struct
import sys

STATUS_PENDING = 0x00000103
SESSION_MAGIC = b"~SESSID~"
FILEID_MAGIC = b"~FILEID~"
HEADER_LEN = 64
FRAME_MAX = 0xFFFF  # the core target's 2-byte length prefix

# SMB2 command codes ([MS-SMB2] 2.2.1.2).
NEGOTIATE, SESSION_SETUP, CREATE, QUERY_DIRECTORY, QUERY_INFO, SET_INFO, IOCTL = (
    0, 1, 5, 14, 16, 17, 11)


def read_pcap(path):
    """Yield (src, sport, dst, dport, seq, payload) for each TCP segment."""
    data = open(path, "rb").read()
    if len(data) < 24:
        raise SystemExit("not a pcap file")
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        endian = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        endian = ">"
    else:
        raise SystemExit("not a classic pcap file (pcapng is not supported)")
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    pos = 24
    while pos + 16 <= len(data):
        _, _, incl, _ = struct.unpack(endian + "IIII", data[pos:pos + 16])
        pkt = data[pos + 16:pos + 16 + incl]
        pos += 16 + incl
        if linktype == 1:  # Ethernet
            if len(pkt) < 14 or pkt[12:14] != b"\x08\x00":
                continue
            ip = pkt[14:]
        elif linktype == 113:  # Linux cooked (SLL)
            if len(pkt) < 16 or pkt[14:16] != b"\x08\x00":
                continue
            ip = pkt[16:]
        elif linktype == 276:  # Linux cooked v2 (SLL2)
            if len(pkt) < 20 or pkt[0:2] != b"\x08\x00":
                continue
            ip = pkt[20:]
        elif linktype in (0, 12, 101):  # raw IP / null
            ip = pkt[4:] if linktype == 0 else pkt
        else:
            raise SystemExit(f"unsupported link type {linktype}")
        if len(ip) < 20 or ip[0] >> 4 != 4 or ip[9] != 6:
            continue
        ihl = (ip[0] & 15) * 4
        total = struct.unpack(">H", ip[2:4])[0]
        tcp = ip[ihl:total]
        if len(tcp) < 20:
            continue
        sport, dport, seq = struct.unpack(">HHI", tcp[:8])
        off = (tcp[12] >> 4) * 4
        payload = tcp[off:]
        if payload:
            yield ip[12:16], sport, ip[16:20], dport, seq, payload


def reassemble(segments):
    """Concatenate the segments of one direction in sequence order, once each."""
    out = bytearray()
    base = None
    for seq, payload in sorted(segments, key=lambda s: s[0]):
        if base is None:
            base = seq
        start = seq - base
        if start + len(payload) <= len(out):
            continue  # retransmission
        out += payload[max(0, len(out) - start):]
    return bytes(out)


def frames(stream):
    """Split a direct-TCP byte stream into frames (with their 4-byte headers)."""
    pos = 0
    while pos + 4 <= len(stream):
        n = struct.unpack(">I", stream[pos:pos + 4])[0] & 0xFFFFFF
        if pos + 4 + n > len(stream):
            break
        yield stream[pos:pos + 4 + n]
        pos += 4 + n


def messages(payload):
    """Split an SMB2 frame payload into its compound members."""
    pos = 0
    while pos + HEADER_LEN <= len(payload) and payload[pos:pos + 4] == b"\xfeSMB":
        nxt = struct.unpack("<I", payload[pos + 20:pos + 24])[0]
        if nxt == 0 or pos + nxt > len(payload):
            yield pos, payload[pos:]
            return
        yield pos, payload[pos:pos + nxt]
        pos += nxt


def u16(b, at):
    return struct.unpack("<H", b[at:at + 2])[0] if at + 2 <= len(b) else 0


def u32(b, at):
    return struct.unpack("<I", b[at:at + 4])[0] if at + 4 <= len(b) else 0


def u64(b, at):
    return struct.unpack("<Q", b[at:at + 8])[0] if at + 8 <= len(b) else 0


class Corpus:
    """Seeds by target; at most PER_KEY seeds for one (target, key)."""

    PER_KEY = 2

    def __init__(self, root):
        self.root = root
        self.count = {}
        self.keys = {}

    def add(self, target, data, key=None):
        if not data:
            return
        if key is not None:
            n = self.keys.get((target, key), 0)
            if n >= self.PER_KEY:
                return
            self.keys[(target, key)] = n + 1
        d = os.path.join(self.root, target)
        os.makedirs(d, exist_ok=True)
        name = hashlib.sha1(data).hexdigest()
        p = os.path.join(d, name)
        if not os.path.exists(p):
            with open(p, "wb") as f:
                f.write(data)
            self.count[target] = self.count.get(target, 0) + 1


def create_contexts(msg, request):
    """The CreateContexts chain of a CREATE request or response message."""
    if request:
        off, length = u32(msg, HEADER_LEN + 48), u32(msg, HEADER_LEN + 52)
    else:
        off, length = u32(msg, HEADER_LEN + 80), u32(msg, HEADER_LEN + 84)
    if off and length and off + length <= len(msg):
        return msg[off:off + length]
    return b""


def harvest(client_frames, server_frames, corpus):
    """Per-decoder seeds from one connection."""
    requests = {}
    for f in client_frames:
        corpus.add("frame_header", f[:4 + HEADER_LEN], ("c", u16(f, 16), u32(f, 20)))
        payload = f[4:]
        if payload[:4] == b"\xfdSMB":
            corpus.add("transform", payload)
            continue
        corpus.add("compound", payload, tuple(u16(m, 12) for _, m in messages(payload)))
        for _, m in messages(payload):
            cmd = u16(m, 12)
            requests[u64(m, 24)] = m
            corpus.add("request", bytes([cmd]) + m, (cmd, m[HEADER_LEN + 2:HEADER_LEN + 4]))
            if cmd == NEGOTIATE:
                count, off = u16(m, HEADER_LEN + 32), u32(m, HEADER_LEN + 28)
                if count and off < len(m):
                    corpus.add("negotiate_contexts", struct.pack("<H", count) + m[off:])
            elif cmd == SESSION_SETUP:
                off, length = u16(m, HEADER_LEN + 12), u16(m, HEADER_LEN + 14)
                token = m[off:off + length]
                corpus.add("spnego", struct.pack("<H", len(token)) + token)
                at = token.find(b"NTLMSSP\x00")
                if at >= 0:
                    corpus.add("ntlmssp", token[at:])
            elif cmd == CREATE:
                corpus.add("create_contexts", create_contexts(m, True))
            elif cmd == SET_INFO:
                info_type, cls = m[HEADER_LEN + 2], m[HEADER_LEN + 3]
                length, off = u32(m, HEADER_LEN + 4), u16(m, HEADER_LEN + 8)
                buf = m[off:off + length]
                if info_type == 3:
                    corpus.add("security_descriptor", buf)
                else:
                    corpus.add("fscc", bytes([info_type, cls]) + buf)
            elif cmd == IOCTL:
                ctl = u32(m, HEADER_LEN + 4)
                off, length = u32(m, HEADER_LEN + 24), u32(m, HEADER_LEN + 28)
                corpus.add("ioctl", struct.pack("<I", ctl) + m[off:off + length])
    for f in server_frames:
        corpus.add("frame_header", f[:4 + HEADER_LEN], ("s", u16(f, 16), u32(f, 20)))
        payload = f[4:]
        if payload[:4] != b"\xfeSMB":
            continue
        for _, m in messages(payload):
            cmd, status = u16(m, 12), u32(m, 8)
            req = requests.get(u64(m, 24))
            corpus.add("request", bytes([0x80 | cmd]) + m, (0x80 | cmd, status, u16(m, HEADER_LEN)))
            if cmd == NEGOTIATE and status == 0:
                count, off = u16(m, HEADER_LEN + 6), u32(m, HEADER_LEN + 60)
                if count and off < len(m):
                    corpus.add("negotiate_contexts", struct.pack("<H", count) + m[off:])
            elif cmd == SESSION_SETUP:
                off, length = u16(m, HEADER_LEN + 4), u16(m, HEADER_LEN + 6)
                token = m[off:off + length]
                at = token.find(b"NTLMSSP\x00")
                if at >= 0:
                    corpus.add("ntlmssp", token[at:])
            elif cmd == CREATE and status == 0:
                corpus.add("create_contexts", create_contexts(m, False))
            elif cmd in (QUERY_INFO, QUERY_DIRECTORY) and status == 0 and req:
                off, length = u16(m, HEADER_LEN + 2), u32(m, HEADER_LEN + 4)
                buf = m[off:off + length]
                if cmd == QUERY_DIRECTORY:
                    corpus.add("fscc", bytes([0x80, req[HEADER_LEN + 2]]) + buf,
                               (0x80, req[HEADER_LEN + 2]))
                elif req[HEADER_LEN + 2] == 3:
                    corpus.add("security_descriptor", buf)
                else:
                    key = (req[HEADER_LEN + 2], req[HEADER_LEN + 3])
                    corpus.add("fscc", bytes(key) + buf, key)


def core_seed(client_frames, server_frames):
    """The core target's seed: client frames with the server's ids replaced by placeholders."""
    session_ids = set()
    file_ids = []
    for f in server_frames:
        for _, m in messages(f[4:]):
            if u64(m, 40):
                session_ids.add(m[40:48])
            if u16(m, 12) == CREATE and u32(m, 8) != STATUS_PENDING:
                file_ids.append(m[HEADER_LEN + 64:HEADER_LEN + 80] if u32(m, 8) == 0 else None)
    out = bytearray([0])
    for f in client_frames:
        payload = bytearray(f[4:])
        if payload[:4] != b"\xfeSMB":
            continue  # encrypted frames cannot be replayed with other keys
        for pos, m in list(messages(bytes(payload))):
            if bytes(payload[pos + 40:pos + 48]) in session_ids:
                payload[pos + 40:pos + 48] = SESSION_MAGIC
        for k, fid in enumerate(file_ids):
            if fid is None:
                continue
            at = payload.find(fid)
            while at >= 0:
                payload[at:at + 16] = FILEID_MAGIC + struct.pack("<Q", k)
                at = payload.find(fid, at + 16)
        if len(payload) > FRAME_MAX:
            break
        out += struct.pack("<H", len(payload)) + payload
    return bytes(out)


def synthetic(corpus):
    """Seeds for structures the captured clients did not send, built from the specs."""
    def sid(rev_auth, *subs):
        return bytes([1, len(subs)]) + rev_auth.to_bytes(6, "big") + b"".join(
            struct.pack("<I", x) for x in subs)

    def ace(kind, flags, mask, s):
        return struct.pack("<BBHI", kind, flags, 8 + len(s), mask) + s

    owner, group = sid(5, 21, 1, 2, 3, 1000), sid(5, 32, 544)
    aces = ace(0, 0x03, 0x001F01FF, owner) + ace(1, 0, 0x00000002, sid(1, 0))
    dacl = struct.pack("<BBHHH", 2, 0, 8 + len(aces), 2, 0) + aces
    # [MS-DTYP] 2.4.6: owner, group, DACL present, self-relative.
    sd = struct.pack("<BBHIIII", 1, 0, 0x8004, 20, 20 + len(owner), 0,
                     20 + len(owner) + len(group)) + owner + group + dacl
    corpus.add("security_descriptor", sd)
    corpus.add("security_descriptor", dacl)
    corpus.add("security_descriptor", owner)

    def ctx(name, data, last=False):
        body = struct.pack("<HHHHI", 16, len(name), 0, 24 if data else 0, len(data))
        c = body + name + bytes(8 - len(name) % 8 if len(name) % 8 else 0)
        c += data
        c += bytes(-len(c) % 8)
        return struct.pack("<I", 0 if last else len(c) + 4) + c

    def chain(*items):
        out = b""
        for i, (n, d) in enumerate(items):
            out += ctx(n, d, i == len(items) - 1)
        return out

    ea = struct.pack("<IBBH", 0, 0, 4, 3) + b"user\x00abc"
    lease_v2 = bytes(16) + struct.pack("<IIQ", 7, 4, 0) + bytes(16) + struct.pack("<HH", 1, 0)
    dh2q = struct.pack("<II", 60000, 2) + bytes(8) + bytes(range(16))
    corpus.add("create_contexts", chain((b"MxAc", b""), (b"QFid", b"")))
    corpus.add("create_contexts", chain((b"RqLs", lease_v2), (b"DH2Q", dh2q)))
    corpus.add("create_contexts", chain((b"ExtA", ea), (b"SecD", sd), (b"AlSi", struct.pack("<Q", 4096))))
    corpus.add("create_contexts", chain((b"DHnC", bytes(16)), (b"TWrp", struct.pack("<Q", 1))))
    corpus.add("create_contexts", chain((b"DH2C", bytes(16) + bytes(range(16)) + struct.pack("<I", 2)),))


def main():
    args = sys.argv[1:]
    port = 445
    if "--server-port" in args:
        i = args.index("--server-port")
        port = int(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2:
        raise SystemExit(__doc__)
    pcap, root = args
    streams = {}
    for src, sport, dst, dport, seq, payload in read_pcap(pcap):
        streams.setdefault((src, sport, dst, dport), []).append((seq, payload))
    corpus = Corpus(root)
    synthetic(corpus)
    for (src, sport, dst, dport), segs in sorted(streams.items()):
        if dport != port:
            continue
        client = list(frames(reassemble(segs)))
        server = list(frames(reassemble(streams.get((dst, dport, src, sport), []))))
        harvest(client, server, corpus)
        corpus.add("core_connection", core_seed(client, server))
    for t, n in sorted(corpus.count.items()):
        print(f"{t}: {n} new seeds")


if __name__ == "__main__":
    main()
