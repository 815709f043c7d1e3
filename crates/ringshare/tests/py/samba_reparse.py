"""Reparse points and POSIX chmod as a client sees them, through Samba's own python bindings
(python3-samba's libsmb): FSCTL_SET/GET/DELETE_REPARSE_POINT on a regular file (the length
checks, a tag that may not change, the attribute and tag the file then shows in its open, its
FILE_ATTRIBUTE_TAG_INFORMATION and a listing), FSCTL_GET_REPARSE_POINT on POSIX opens of
symlinks and special files, and a POSIX open's chmod by a security descriptor holding one ACE
for S-1-5-88-3-MODE. One line per answer, so that two servers' outputs compare line by line
(crates/ringshare/tests/posix.rs).

Usage: samba_reparse.py HOST PORT SHARE USER PASSWORD CLIENT_CONF
"""
import faulthandler
faulthandler.enable()
from samba.samba3 import libsmb_samba_internal as libsmb
from samba import NTSTATUSError, reparse_symlink
from samba.dcerpc import security
from samba_probe import host, share, lp, creds, out, status, ctx

def attempt(what, f):
    """`what`: OK (and what `f` gave, if anything) or the status it failed with."""
    try:
        r = f()
        out(what + ":", "OK" if r is None else r)
    except NTSTATUSError as e:
        out(what + ":", status(e))


w = libsmb.Conn(host, share, lp, creds)
p = libsmb.Conn(host, share, lp, creds, posix=True)
RW = security.SEC_FILE_READ_ATTRIBUTE | security.SEC_FILE_WRITE_ATTRIBUTE | security.SEC_STD_DELETE
GET, SET, DEL = (libsmb.FSCTL_GET_REPARSE_POINT, libsmb.FSCTL_SET_REPARSE_POINT,
                 libsmb.FSCTL_DELETE_REPARSE_POINT)

# A regular file: not a reparse point, then one.
f = w.create("rp", DesiredAccess=RW | security.SEC_FILE_WRITE_DATA,
             CreateDisposition=libsmb.FILE_CREATE)
attempt("get on a plain file", lambda: w.fsctl(f, GET, b'', 1024))
out("tag of a plain file:", w.qfileinfo(f, libsmb.FSCC_FILE_ATTRIBUTE_TAG_INFORMATION))
attempt("set, nothing", lambda: w.fsctl(f, SET, b'', 0))
for n in (1, 7, 8, 14):
    attempt("set, %d bytes" % n, lambda: w.fsctl(f, SET, n * b'0', 0))
b = reparse_symlink.put(0x80000025, 0, b'payload of twenty-four b')
attempt("set, one byte more", lambda: w.fsctl(f, SET, b + b'0', 0))
attempt("set, one byte less", lambda: w.fsctl(f, SET, b[:-1], 0))
attempt("set, a length past the data", lambda: w.fsctl(f, SET, b[:4] + b'\xff\x00' + b[6:], 0))
attempt("set", lambda: w.fsctl(f, SET, b, 0))
attempt("get", lambda: w.fsctl(f, GET, b'', 1024).hex())
attempt("get into 8 bytes", lambda: w.fsctl(f, GET, b'', 8).hex())
attempt("set, another tag", lambda: w.fsctl(f, SET, reparse_symlink.put(0x80000026, 0, b'x'), 0))
b2 = reparse_symlink.put(0x80000025, 0, b'new')
attempt("set, the same tag again", lambda: w.fsctl(f, SET, b2, 0))
attempt("get after it", lambda: w.fsctl(f, GET, b'', 1024).hex())
out("tag:", w.qfileinfo(f, libsmb.FSCC_FILE_ATTRIBUTE_TAG_INFORMATION))
w.close(f)
out("listed:", [(e['name'], e['attrib'], e['reparse_tag']) for e in w.list('', mask='rp')])
out("POSIX listed:", [(e['name'], e['attrib'], e['reparse_tag'], oct(e['perms'] >> 12))
                      for e in p.list('', mask='rp', info_level=libsmb.SMB2_FIND_POSIX_INFORMATION)])
f, cr, _ = w.create_ex("rp", DesiredAccess=RW | security.SEC_FILE_WRITE_DATA,
                       CreateOptions=libsmb.FILE_OPEN_REPARSE_POINT,
                       CreateDisposition=libsmb.FILE_OPEN)
out("reopened, attributes 0x%x" % cr['file_attributes'])
attempt("write to it", lambda: w.write(f, b'x', 1))
attempt("delete, another tag", lambda: w.fsctl(f, DEL, reparse_symlink.put(0x80000026, 0, b''), 0))
attempt("delete, with data", lambda: w.fsctl(f, DEL, reparse_symlink.put(0x80000025, 0, b' '), 0))
attempt("delete", lambda: w.fsctl(f, DEL, reparse_symlink.put(0x80000025, 0, b''), 0))
attempt("delete again", lambda: w.fsctl(f, DEL, reparse_symlink.put(0x80000025, 0, b''), 0))
w.close(f)
f, cr, _ = w.create_ex("rp", DesiredAccess=RW, CreateDisposition=libsmb.FILE_OPEN)
out("after the delete, attributes 0x%x" % cr['file_attributes'])
attempt("get after the delete", lambda: w.fsctl(f, GET, b'', 1024))
w.delete_on_close(f, 1)
w.close(f)

# A symlink's reparse data set on a new file through a POSIX open.
f, _, _ = p.create_ex("rps", DesiredAccess=RW, CreateDisposition=libsmb.FILE_CREATE,
                      CreateContexts=ctx(0o600))
attempt("set a symlink's data", lambda: p.fsctl(f, SET, reparse_symlink.symlink_put("y", "y", 0, 0), 0))
p.close(f)
out("POSIX listed:", [(e['name'], e['attrib'], e['reparse_tag'], oct(e['perms'] >> 12))
                      for e in p.list('', mask='rps', info_level=libsmb.SMB2_FIND_POSIX_INFORMATION)])
w.unlink("rps")

# Not on a directory.
w.mkdir("rpd")
f = w.create("rpd", DesiredAccess=RW, CreateOptions=libsmb.FILE_DIRECTORY_FILE)
attempt("set on a directory", lambda: w.fsctl(f, SET, b, 0))
attempt("get on a directory", lambda: w.fsctl(f, GET, b'', 1024))
w.close(f)
w.rmdir("rpd")

# What a POSIX client reads of the layout's symlinks and special files.
for n in ["lnk", "dangle", "out", "fifo", "sock", "chr", "blk", "File.txt", "Dir"]:
    try:
        f, _, _ = p.create_ex(n, DesiredAccess=security.SEC_FILE_READ_ATTRIBUTE,
                              CreateOptions=libsmb.FILE_OPEN_REPARSE_POINT,
                              CreateDisposition=libsmb.FILE_OPEN, ShareAccess=7,
                              CreateContexts=ctx(0))
    except NTSTATUSError as e:
        out("POSIX open of %s:" % n, status(e))
        continue
    out("tag of %s:" % n, p.qfileinfo(f, libsmb.FSCC_FILE_ATTRIBUTE_TAG_INFORMATION))
    attempt("get of %s" % n, lambda: p.fsctl(f, GET, b'', 1024).hex())
    attempt("get of %s into 8 bytes" % n, lambda: p.fsctl(f, GET, b'', 8).hex())
    p.close(f)


# chmod by a security descriptor with one ACE for S-1-5-88-3-MODE (smbclient's `posix; chmod`).
def mode_sd(mode, aces=1):
    acl = security.acl()
    acl.revision = security.SECURITY_ACL_REVISION_NT4
    ace = security.ace()
    ace.type = security.SEC_ACE_TYPE_ACCESS_ALLOWED
    ace.trustee = security.dom_sid("S-1-5-88-3-%d" % mode)
    acl.aces = [ace] * aces
    acl.num_aces = aces
    sd = security.descriptor()
    sd.type = security.SEC_DESC_SELF_RELATIVE | security.SEC_DESC_DACL_PRESENT
    sd.dacl = acl
    return sd


def perms(name):
    f, _, _ = p.create_ex(name, DesiredAccess=security.SEC_FILE_READ_ATTRIBUTE, CreateContexts=ctx(0))
    m = p.qfileinfo(f, libsmb.FSCC_FILE_POSIX_INFORMATION)['perms']
    p.close(f)
    return oct(m)


ALL = security.SEC_STD_ALL | security.SEC_FILE_ALL
f, _, _ = p.create_ex("pcm", DesiredAccess=ALL, CreateDisposition=libsmb.FILE_CREATE,
                      CreateContexts=ctx(0o644))
for mode in (0o600, 0o4750, 0o7777, 0o1000000 | 0o640):
    attempt("POSIX chmod 0%o" % mode, lambda: p.set_sd(f, mode_sd(mode), security.SECINFO_DACL))
    out("  perms now", perms("pcm"))
attempt("POSIX chmod, two ACEs", lambda: p.set_sd(f, mode_sd(0o611, 2), security.SECINFO_DACL))
out("  perms now", perms("pcm"))
p.close(f)
p.unlink("pcm")
