"""Write a file and a named stream on it through a ringshare server with python's smbprotocol.

Run by crates/ringshare/tests/interop_streams.rs with the venv's python. Writes FILE with
--content, then the stream FILE:--stream with --stream-data through the high-level
`smbclient.open_file` (a CREATE of `FILE:STREAM`), reads both back and compares them, and checks
that `smbclient.liststreams` (FileStreamInformation) lists exactly `::$DATA` and
`:STREAM:$DATA` with their sizes. Any mismatch raises; the exit status is non-zero and the last
line says what went wrong. The caller then looks at the file with Samba's smbclient and on disk.
"""

import argparse
import sys
import uuid

import smbclient
from smbprotocol.connection import Connection


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--share", required=True)
    p.add_argument("--file", required=True, help="the file's name in the share's root")
    p.add_argument("--content", required=True, help="what the file's unnamed stream holds")
    p.add_argument("--stream", required=True, help="the named stream's name")
    p.add_argument("--stream-data", required=True, help="what the named stream holds")
    args = p.parse_args()

    server = "127.0.0.1"
    conn = Connection(uuid.uuid4(), server, args.port, require_signing=True)
    conn.connect(timeout=30)
    cache = {f"{server}:{args.port}": conn}
    kw = dict(port=args.port, connection_cache=cache)
    smbclient.register_session(
        server, username=args.user, password=args.password, connection_cache=cache, port=args.port
    )

    path = rf"\\{server}\{args.share}\{args.file}"
    stream = f"{path}:{args.stream}"
    content = args.content.encode()
    data = args.stream_data.encode()
    with smbclient.open_file(path, mode="wb", **kw) as f:
        f.write(content)
    with smbclient.open_file(stream, mode="wb", **kw) as f:
        f.write(data)
    print(f"wrote {len(content)} bytes to {args.file} and {len(data)} to its stream {args.stream}")

    with smbclient.open_file(stream, mode="rb", **kw) as f:
        got = f.read()
    check(got == data, f"the stream reads back {got!r}, wrote {data!r}")
    with smbclient.open_file(path, mode="rb", **kw) as f:
        got = f.read()
    check(got == content, f"the file reads back {got!r} after its stream was written, wrote {content!r}")

    listed = sorted((s.name, s.size) for s in smbclient.liststreams(path, **kw))
    want = sorted([("::$DATA", len(content)), (f":{args.stream}:$DATA", len(data))])
    check(listed == want, f"liststreams gives {listed}, wanted {want}")
    print(f"streams: {listed}", flush=True)

    conn.disconnect(close=False)
    print("OK", flush=True)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 - report any failure on the last line
        print(f"FAILED: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        raise
