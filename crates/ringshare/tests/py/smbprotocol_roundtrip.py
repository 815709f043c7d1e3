"""Round-trip files through a ringshare server with python's smbprotocol.

Run by crates/ringshare/tests/interop_smbprotocol.rs with the venv's python. Negotiates exactly
the dialect, cipher and signing algorithm it is told to, then writes files of several sizes with
random content, reads them back, compares them byte for byte (and with the server's copy on
disk), lists the directory, renames one file and deletes them all; with --logoff it then logs
off and waits for the replies. Any mismatch raises; the exit status is non-zero and the last line
says what went wrong.
"""

import argparse
import os
import sys
import uuid

import smbclient
from smbprotocol import Dialects
from smbprotocol.connection import Ciphers, Connection, SigningAlgorithms
from smbprotocol.header import Commands, NtStatus, Smb2Flags

DIALECTS = {"3.1.1": Dialects.SMB_3_1_1, "3.0.2": Dialects.SMB_3_0_2, "2.1": Dialects.SMB_2_1_0}
CIPHERS = {
    "aes-128-ccm": Ciphers.AES_128_CCM,
    "aes-128-gcm": Ciphers.AES_128_GCM,
    "aes-256-ccm": Ciphers.AES_256_CCM,
    "aes-256-gcm": Ciphers.AES_256_GCM,
}
SIGNING = {
    "hmac-sha256": SigningAlgorithms.HMAC_SHA256,
    "aes-cmac": SigningAlgorithms.AES_CMAC,
    "aes-gmac": SigningAlgorithms.AES_GMAC,
}
SIZES = [0, 1, 64 * 1024 + 1, 8 * 1024 * 1024]


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--share", required=True)
    p.add_argument("--share-dir", required=True, help="the share's directory on the server's disk")
    p.add_argument("--dialect", choices=DIALECTS, required=True)
    p.add_argument("--cipher", choices=CIPHERS, help="encrypt with this cipher (omit: sign only)")
    p.add_argument("--signing", choices=SIGNING, help="signing algorithm to offer (3.1.1)")
    p.add_argument("--server", default="127.0.0.1", help="name (and SPN host) to connect to")
    p.add_argument(
        "--kerberos",
        action="store_true",
        help="log on with the Kerberos ticket of the credential cache (user and password unused)",
    )
    p.add_argument(
        "--logoff",
        action="store_true",
        help="end with TREE_DISCONNECT and LOGOFF, each answered within 10 s (default: close the socket)",
    )
    args = p.parse_args()

    server = args.server
    dialect = DIALECTS[args.dialect]
    encrypt = args.cipher is not None
    enc_algos = [CIPHERS[args.cipher]] if encrypt else None
    if args.signing is not None:
        sign_algos = [SIGNING[args.signing]]
    elif dialect < Dialects.SMB_3_0_0:
        sign_algos = [SigningAlgorithms.HMAC_SHA256]
    else:
        sign_algos = [SigningAlgorithms.AES_CMAC]
    if dialect < Dialects.SMB_3_1_1:
        # Below 3.1.1 there is nothing to negotiate: CCM and CMAC (3.0.x) or HMAC (2.x).
        enc_algos, sign_algos = None, None

    # Connect with exactly our choices and put the connection in a private cache, so that the
    # high-level smbclient functions below use it.
    conn = Connection(uuid.uuid4(), server, args.port, require_signing=True)
    conn.connect(
        dialect=dialect,
        timeout=30,
        preferred_encryption_algos=enc_algos,
        preferred_signing_algos=sign_algos,
    )
    # smbprotocol checks a response's signature only when its SIGNED flag is set, and calls
    # verify_signature only for responses that did not come in a TRANSFORM header: record the
    # responses that should have been signed (signed session) or encrypted (encrypted session)
    # and were not.
    unsigned, plain = [], []
    verify = conn.verify_signature

    def verify_and_count(header, session_id, force=False):
        command = header["command"].get_value()
        if command != Commands.SMB2_SESSION_SETUP and session_id != 0:
            plain.append(command)
            if (
                not header["flags"].has_flag(Smb2Flags.SMB2_FLAGS_SIGNED)
                and header["status"].get_value() != NtStatus.STATUS_PENDING
                and header["message_id"].get_value() != 0xFFFFFFFFFFFFFFFF
            ):
                unsigned.append(command)
        return verify(header, session_id, force)

    conn.verify_signature = verify_and_count
    cache = {f"{server}:{args.port}": conn}
    kw = dict(port=args.port, connection_cache=cache)
    session = smbclient.register_session(
        server,
        username=None if args.kerberos else args.user,
        password=None if args.kerberos else args.password,
        encrypt=encrypt,
        connection_cache=cache,
        port=args.port,
        auth_protocol="kerberos" if args.kerberos else "negotiate",
    )

    check(conn.dialect == dialect, f"negotiated dialect {conn.dialect:#06x}, wanted {dialect:#06x}")
    if encrypt:
        check(session.encrypt_data, "session is not encrypted")
        if dialect == Dialects.SMB_3_1_1:
            check(
                conn.cipher_id == CIPHERS[args.cipher],
                f"negotiated cipher {conn.cipher_id}, wanted {CIPHERS[args.cipher]}",
            )
    else:
        check(not session.encrypt_data, "session is encrypted, wanted signing only")
        check(session.signing_required, "session is not signed")
        if dialect == Dialects.SMB_3_1_1 and args.signing is not None:
            check(
                conn.signing_algorithm_id == SIGNING[args.signing],
                f"negotiated signing algorithm {conn.signing_algorithm_id}, wanted {args.signing}",
            )
    print(
        f"negotiated dialect={conn.dialect:#06x} cipher={conn.cipher_id} "
        f"signing={conn.signing_algorithm_id} encrypted={session.encrypt_data} "
        f"signed={session.signing_required}",
        flush=True,
    )

    root = rf"\\{server}\{args.share}"
    folder = "rt-" + uuid.uuid4().hex[:8]
    smbclient.mkdir(rf"{root}\{folder}", **kw)
    contents = {}
    for size in SIZES:
        name = f"file-{size}.bin"
        data = os.urandom(size)
        contents[name] = data
        with smbclient.open_file(rf"{root}\{folder}\{name}", mode="wb", **kw) as f:
            f.write(data)
    for name, data in contents.items():
        with smbclient.open_file(rf"{root}\{folder}\{name}", mode="rb", **kw) as f:
            got = f.read()
        check(len(got) == len(data), f"{name}: read {len(got)} bytes, wrote {len(data)}")
        check(got == data, f"{name}: read-back differs from what was written")
        with open(os.path.join(args.share_dir, folder, name), "rb") as f:
            check(f.read() == data, f"{name}: the server's file on disk differs from what was written")
    print(f"wrote and read back {sorted(len(d) for d in contents.values())} bytes", flush=True)

    listed = set(smbclient.listdir(rf"{root}\{folder}", **kw))
    check(listed == set(contents), f"listing {sorted(listed)} != written {sorted(contents)}")

    old, new = "file-65537.bin", "renamed-65537.bin"
    smbclient.rename(rf"{root}\{folder}\{old}", rf"{root}\{folder}\{new}", **kw)
    contents[new] = contents.pop(old)
    listed = set(smbclient.listdir(rf"{root}\{folder}", **kw))
    check(listed == set(contents), f"after rename, listing {sorted(listed)} != {sorted(contents)}")
    with smbclient.open_file(rf"{root}\{folder}\{new}", mode="rb", **kw) as f:
        check(f.read() == contents[new], "renamed file's content changed")

    for name in contents:
        smbclient.remove(rf"{root}\{folder}\{name}", **kw)
    listed = smbclient.listdir(rf"{root}\{folder}", **kw)
    check(listed == [], f"after delete, listing {listed} is not empty")
    smbclient.rmdir(rf"{root}\{folder}", **kw)
    check(not os.path.exists(os.path.join(args.share_dir, folder)), "folder still on disk after rmdir")
    print("listed, renamed and deleted", flush=True)

    if args.logoff:
        # Tree disconnects and LOGOFF, each waiting for its (encrypted or signed) reply.
        session.disconnect(True, timeout=10)
        print("logged off", flush=True)
    if encrypt:
        check(not plain, f"unencrypted responses on an encrypted session, commands {plain}")
    else:
        check(not unsigned, f"unsigned responses on a signed session, commands {unsigned}")
    conn.disconnect(close=False)
    print("OK", flush=True)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 - report any failure on the last line
        print(f"FAILED: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        raise
