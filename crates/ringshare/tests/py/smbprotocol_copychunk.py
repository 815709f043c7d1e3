"""Server-side copy with python smbprotocol's high-level API (`smbclient.copyfile`).

Run by crates/ringshare/tests/interop_smbprotocol.rs. Writes SIZE pseudo-random bytes to
`src` over SMB, then `smbclient.copyfile(src, dst)`, which asks for the source's resume key
(FSCTL_SRV_REQUEST_RESUME_KEY) and sends FSCTL_SRV_COPYCHUNK_WRITE requests of at most 16
chunks of 1 MiB each on `dst`. Counts the bytes that cross the socket both ways during the
copy, reads `dst` back over SMB and compares it with what was written (and with the server's
file on disk, under --share-dir). Prints

  write <bytes> sent <n>
  copy <bytes> sent <n> received <n> seconds <s>
  OK

and fails (non-zero exit) when the copy differs.
"""

import argparse
import hashlib
import os
import sys
import time

import smbclient
from smbprotocol import transport


class Wire:
    """Bytes through every smbprotocol TCP transport (wraps Tcp.send and Tcp._recv)."""

    sent = 0
    received = 0

    @classmethod
    def install(cls):
        send, recv = transport.Tcp.send, transport.Tcp._recv

        def counted_send(self, header):
            cls.sent += 4 + len(header)  # the Direct TCP header and the message
            return send(self, header)

        def counted_recv(self, length, timeout):
            got = recv(self, length, timeout)
            if got and got[0]:
                cls.received += len(got[0])
            return got

        transport.Tcp.send, transport.Tcp._recv = counted_send, counted_recv


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--share", required=True)
    p.add_argument("--share-dir", required=True)
    p.add_argument("--size", type=int, required=True)
    args = p.parse_args()

    Wire.install()
    kw = {"username": args.user, "password": args.password, "port": args.port}
    smbclient.register_session("127.0.0.1", **kw)
    root = rf"\\127.0.0.1\{args.share}"
    data = os.urandom(args.size)
    before = Wire.sent
    with smbclient.open_file(rf"{root}\src", mode="wb", **kw) as f:
        f.write(data)
    # The counter sees the data when it does cross the wire.
    print(f"write {args.size} sent {Wire.sent - before}", flush=True)

    sent, received = Wire.sent, Wire.received
    t0 = time.monotonic()
    smbclient.copyfile(rf"{root}\src", rf"{root}\dst", **kw)
    secs = time.monotonic() - t0
    sent, received = Wire.sent - sent, Wire.received - received
    print(f"copy {args.size} sent {sent} received {received} seconds {secs:.3f}", flush=True)

    with smbclient.open_file(rf"{root}\dst", mode="rb", **kw) as f:
        back = f.read()
    want = hashlib.sha256(data).hexdigest()
    if hashlib.sha256(back).hexdigest() != want:
        sys.exit(f"the copy read over SMB differs ({len(back)} bytes of {len(data)})")
    with open(os.path.join(args.share_dir, "dst"), "rb") as f:
        if hashlib.sha256(f.read()).hexdigest() != want:
            sys.exit("the copy on the server's disk differs")
    smbclient.remove(rf"{root}\src", **kw)
    smbclient.remove(rf"{root}\dst", **kw)
    smbclient.reset_connection_cache()
    print("OK", flush=True)


if __name__ == "__main__":
    main()
