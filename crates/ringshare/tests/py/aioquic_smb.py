"""SMB over QUIC with a second, independent client: aioquic (QUIC and TLS 1.3 written in
Python) carries one bidirectional stream, and smbprotocol speaks SMB 3.1.1 over it through a
local TCP relay (each byte of the Direct-TCP stream goes into the QUIC stream as it is). The
client certificates are made here too, with `cryptography`, so nothing on the client side
comes from ringshare's own QUIC or TLS code.

  aioquic_smb.py certs DIR
      makes a private CA (DIR/ca.pem), two client certificates it issued (DIR/alice.pem and
      .key, DIR/mallory.pem and .key) and a server certificate for localhost and 127.0.0.1
      (DIR/server.pem and .key); prints "mallory sha256:HEX" for the server's deny list
  aioquic_smb.py run HOST PORT TRUST USER PASSWORD SHARE NAME EXPECT
      connects to HOST:PORT over QUIC (ALPN smb, name localhost), trusting TRUST (PEM: the
      CA, or the server's own self-signed certificate) alone and
      presenting NAME.pem with its key NAME.key (NAME: a path without the suffix); EXPECT is
        ok       log on with NTLM, write 4 MiB, list, read them back byte-identical
        refused  the server ends the connection at the handshake: no SMB answer comes
"""
import asyncio
import datetime
import hashlib
import ipaddress
import os
import sys
import threading

from aioquic.asyncio.client import connect
from aioquic.quic.configuration import QuicConfiguration
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def issue(subject, issuer, key, signer, kind):
    """A certificate for `key` named `subject`, issued by `issuer` (signed with `signer`):
    `kind` "ca", "client", or "server" (for localhost and 127.0.0.1)."""
    ca = kind == "ca"
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        usage = x509.KeyUsage(False, False, False, False, False, True, True, False, False)
        b = b.add_extension(usage, critical=True)
    elif kind == "client":
        usage = x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH])
        b = b.add_extension(usage, critical=False)
    else:
        usage = x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH])
        names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        b = b.add_extension(usage, critical=False)
        b = b.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return b.sign(signer, hashes.SHA256())


def make_certs(d):
    os.makedirs(d, exist_ok=True)
    ca_name = "aioquic test CA"
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = issue(ca_name, ca_name, ca_key, ca_key, "ca")
    with open(os.path.join(d, "ca.pem"), "wb") as f:
        f.write(ca.public_bytes(serialization.Encoding.PEM))
    for who in ("alice", "mallory", "server"):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = issue(who, ca_name, key, ca_key, "server" if who == "server" else "client")
        with open(os.path.join(d, who + ".pem"), "wb") as f:
            f.write(cert.public_bytes(serialization.Encoding.PEM))
        with open(os.path.join(d, who + ".key"), "wb") as f:
            f.write(
                key.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                )
            )
        if who == "mallory":
            der = cert.public_bytes(serialization.Encoding.DER)
            print("mallory sha256:" + hashlib.sha256(der).hexdigest())


async def relay(reader, writer):
    try:
        while True:
            data = await reader.read(1 << 20)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


def smb_work(port, user, password, share, outcome):
    """Runs in a thread: smbprotocol against the relay on 127.0.0.1:port."""
    try:
        import smbclient

        server = "127.0.0.1"
        smbclient.register_session(
            server, username=user, password=password, port=port,
            auth_protocol="ntlm", connection_timeout=10,
        )
        path = "\\\\%s\\%s\\over-aioquic.bin" % (server, share)
        data = os.urandom(4 << 20)
        with smbclient.open_file(path, mode="wb", port=port) as f:
            f.write(data)
        names = smbclient.listdir("\\\\%s\\%s" % (server, share), port=port)
        with smbclient.open_file(path, mode="rb", port=port) as f:
            back = f.read()
        smbclient.remove(path, port=port)
        outcome["listed"] = "over-aioquic.bin" in names
        outcome["same"] = back == data
        outcome["ok"] = outcome["listed"] and outcome["same"]
    except Exception as e:  # reported, judged by the caller
        outcome["error"] = "%s: %s" % (type(e).__name__, e)
    finally:
        try:
            import smbclient

            smbclient.reset_connection_cache()
        except Exception:
            pass


async def run(host, port, trust, user, password, share, name, expect):
    cfg = QuicConfiguration(is_client=True, alpn_protocols=["smb"], server_name="localhost")
    cfg.idle_timeout = 20.0
    cfg.load_verify_locations(cafile=trust)
    cfg.load_cert_chain(name + ".pem", name + ".key")
    outcome = {}
    try:
        async with connect(host, port, configuration=cfg, wait_connected=True) as quic:
            sreader, swriter = await quic.create_stream()

            async def on_tcp(treader, twriter):
                try:
                    await asyncio.gather(relay(treader, swriter), relay(sreader, twriter))
                except asyncio.CancelledError:
                    pass

            tcp = await asyncio.start_server(on_tcp, "127.0.0.1", 0)
            relay_port = tcp.sockets[0].getsockname()[1]
            t = threading.Thread(
                target=smb_work, args=(relay_port, user, password, share, outcome)
            )
            t.start()
            while t.is_alive():
                await asyncio.sleep(0.05)
            tcp.close()
    except Exception as e:
        outcome.setdefault("error", "%s: %s" % (type(e).__name__, e))
    if expect == "ok":
        if not outcome.get("ok"):
            print("FAILED: %r" % outcome)
            return 1
        print("ok: logged on over aioquic, wrote, listed and read back 4 MiB byte-identical")
        return 0
    if outcome.get("ok") or outcome.get("listed"):
        print("FAILED: a refused certificate was served: %r" % outcome)
        return 1
    print("refused: %s" % outcome.get("error", "no SMB answer"))
    return 0


def main():
    if sys.argv[1] == "certs":
        make_certs(sys.argv[2])
        return 0
    host, port, trust, user, password, share, name, expect = sys.argv[2:10]
    return asyncio.run(run(host, int(port), trust, user, password, share, name, expect))


if __name__ == "__main__":
    sys.exit(main())
