"""What the python probes of crates/ringshare/tests/posix.rs share: the connection's
parameters and credentials from their command line (HOST PORT SHARE USER PASSWORD
CLIENT_CONF), one line per answer, and a status as hex."""
import sys
from samba.samba3 import libsmb_samba_internal as libsmb
from samba.samba3 import param as s3param
from samba import credentials

host, port, share, user, pw, conf = sys.argv[1:7]
lp = s3param.get_context()
lp.load(conf)
lp.set("smb ports", port)
lp.set("client min protocol", "SMB3_11")
creds = credentials.Credentials()
creds.guess(lp)
creds.set_username(user)
creds.set_password(pw)


def out(*a):
    print(*a, flush=True)


def status(e):
    return "0x%08x" % (e.args[0] & 0xffffffff)


def ctx(mode):
    """The POSIX create context asking `mode`."""
    return [(libsmb.SMB2_CREATE_TAG_POSIX, mode.to_bytes(4, 'little'))]
