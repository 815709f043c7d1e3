"""What a client of the SMB3 POSIX extensions sees, through Samba's own python bindings
(python3-samba's libsmb, as Samba's python/samba/tests/smb3unix.py uses them): the negotiate
context, the POSIX create context (mode in, the open's POSIX information out),
FILE_POSIX_INFORMATION and the POSIX listing class, case-sensitive POSIX opens, and delete-on-close
with POSIX and Windows opens together. One line per
answer, times and inode numbers left out, so that two servers' outputs compare line by line
(crates/ringshare/tests/posix.rs).

Usage: samba_posix.py HOST PORT SHARE USER PASSWORD CLIENT_CONF
"""
import subprocess
from samba.samba3 import libsmb_samba_internal as libsmb
from samba import NTSTATUSError
from samba.dcerpc import security, smb3posix
from samba.ndr import ndr_unpack
from samba_probe import host, port, share, user, pw, conf, lp, creds, out, status, ctx

c = libsmb.Conn(host, share, lp, creds, posix=True)
out("have_posix", c.have_posix())
try:
    libsmb.Conn(host, share, lp, creds, negotiate_contexts=[(0x100, b'01234')])
    out("bad negotiate length: OK")
except NTSTATUSError as e:
    out("bad negotiate length:", status(e))
c2 = libsmb.Conn(host, share, lp, creds, negotiate_contexts=[(0x100, b'0123456789012345')])
out("unknown variant have_posix", c2.have_posix())


def show_cc(what, cc_out):
    for name, data in cc_out:
        if name == libsmb.SMB2_CREATE_TAG_POSIX:
            cc = ndr_unpack(smb3posix.smb3_posix_cc_info, data)
            out(what, "cc nlinks=%d tag=%d mode=0%o owner=%s group=%s" % (
                cc.nlinks, cc.reparse_tag, cc.posix_mode, cc.owner, cc.group))

try:
    c.create_ex("", CreateContexts=[(libsmb.SMB2_CREATE_TAG_POSIX, b'00000')])
    out("bad create context length: OK")
except NTSTATUSError as e:
    out("bad create context length:", status(e))

for name, mode, opts in [("pf640", 0o640, 0), ("pf4777", 0o4777, 0), ("pd750", 0o750, libsmb.FILE_DIRECTORY_FILE), ("pd3777", 0o3777, libsmb.FILE_DIRECTORY_FILE)]:
    f, _, cc_out = c.create_ex(name, DesiredAccess=security.SEC_STD_ALL | security.SEC_FILE_ALL,
                               CreateDisposition=libsmb.FILE_CREATE, CreateOptions=opts,
                               CreateContexts=ctx(mode))
    show_cc("create %s 0%o" % (name, mode), cc_out)
    info = c.qfileinfo(f, libsmb.FSCC_FILE_POSIX_INFORMATION)
    keep = {k: v for k, v in info.items() if k not in ("ino", "dev", "atime", "btime", "ctime", "mtime")}
    out("qfileinfo %s" % name, sorted(keep.items()))
    c.close(f)

# An existing file, opened with a POSIX context of mode 0.
f, _, cc_out = c.create_ex("File.txt", CreateContexts=ctx(0))
show_cc("open File.txt", cc_out)
c.close(f)
# FILE_POSIX_INFORMATION on a non-POSIX open.
f = c.create("File.txt")
try:
    c.qfileinfo(f, libsmb.FSCC_FILE_POSIX_INFORMATION)
    out("qfileinfo on a non-POSIX open: OK")
except NTSTATUSError as e:
    out("qfileinfo on a non-POSIX open:", status(e))
c.close(f)
# Case: a POSIX open by another case.
try:
    f, _, _ = c.create_ex("file.TXT", CreateContexts=ctx(0))
    out("POSIX open by another case: OK")
    c.close(f)
except NTSTATUSError as e:
    out("POSIX open by another case:", status(e))
f = c.create("file.TXT")
out("non-POSIX open by another case: OK")
c.close(f)
for e in sorted(c.list("", info_level=libsmb.SMB2_FIND_POSIX_INFORMATION), key=lambda e: e['name']):
    keep = {k: v for k, v in e.items() if k not in ("ino", "dev", "atime", "btime", "ctime", "mtime", "allocation_size", "short_name", "name")}
    out("list", e['name'], sorted(keep.items()))
    if e['name'] == '..':
        out("list .. ino=%d dev=%d" % (e['ino'], e['dev']))
# Names Windows refuses, fine on a POSIX open (Samba's test_posix_reserved_char), each made
# and removed by delete-on-close.
for fname in ['a ', 'a  ', '. ', '.  ', 'a.', '.a', ' \\ ', '>', '<?', 'x:y']:
    try:
        f, _, _ = c.create_ex(fname, CreateDisposition=libsmb.FILE_CREATE,
                              DesiredAccess=security.SEC_STD_DELETE, CreateContexts=ctx(0o744))
        c.delete_on_close(f, True)
        c.close(f)
        out("POSIX name %r: OK" % fname)
    except NTSTATUSError as e:
        out("POSIX name %r:" % fname, status(e))
# A Windows open and a POSIX open both set delete-on-close; the Windows close removes the
# file (Samba's test_delete_on_close).
w = libsmb.Conn(host, share, lp, creds)
fw = w.create("doc", DesiredAccess=security.SEC_FILE_WRITE_ATTRIBUTE | security.SEC_STD_DELETE,
              ShareAccess=7, CreateDisposition=libsmb.FILE_CREATE)
fp, _, _ = c.create_ex("doc", DesiredAccess=security.SEC_FILE_WRITE_ATTRIBUTE | security.SEC_STD_DELETE,
                       ShareAccess=7, CreateDisposition=libsmb.FILE_OPEN, CreateContexts=ctx(0o600))
w.delete_on_close(fw, 1)
c.delete_on_close(fp, 1)
w.close(fw)
out("after the Windows close, listed:", [e['name'] for e in w.list('', mask='doc')])
# The name is free again while the POSIX open of the removed file remains: a new file takes it,
# and the POSIX open's close leaves the new file alone.
fn = w.create("doc", DesiredAccess=security.SEC_FILE_WRITE_ATTRIBUTE, CreateDisposition=libsmb.FILE_CREATE)
w.close(fn)
c.close(fp)
out("the POSIX open closed, new doc listed:", [e['name'] for e in w.list('', mask='doc')])
w.unlink("doc")
# Two POSIX opens: the one that set delete-on-close closes first; the file goes at once.
def pxopen(name, disp):
    f, _, _ = c.create_ex(name, DesiredAccess=security.SEC_FILE_WRITE_ATTRIBUTE | security.SEC_STD_DELETE,
                          ShareAccess=7, CreateDisposition=disp, CreateContexts=ctx(0o600))
    return f
p1 = pxopen("pdoc", libsmb.FILE_CREATE)
p2 = pxopen("pdoc", libsmb.FILE_OPEN)
c.delete_on_close(p1, 1)
c.close(p1)
out("POSIX deleter closed, a POSIX open left, listed:", [e['name'] for e in w.list('', mask='pdoc')])
c.close(p2)
out("both POSIX opens closed, listed:", [e['name'] for e in w.list('', mask='pdoc')])
# A POSIX open sets delete-on-close and closes while a Windows open remains: the file stays
# until the Windows open closes.
p1 = pxopen("wdoc", libsmb.FILE_CREATE)
fw = w.create("wdoc", DesiredAccess=security.SEC_FILE_READ_ATTRIBUTE, ShareAccess=7)
c.delete_on_close(p1, 1)
c.close(p1)
out("POSIX deleter closed, a Windows open left, listed:", [e['name'] for e in w.list('', mask='wdoc')])
try:
    f = w.create("wdoc", DesiredAccess=security.SEC_FILE_READ_ATTRIBUTE, ShareAccess=7)
    out("open of it meanwhile: OK")
    w.close(f)
except NTSTATUSError as e:
    out("open of it meanwhile:", status(e))
w.close(fw)
out("the Windows open closed, listed:", [e['name'] for e in w.list('', mask='wdoc')])
# POSIX renames (smbclient's `posix` mode sends the POSIX context with the rename's open of the
# source; libsmb's rename does not), while other opens of the file or below it are held here.
def smbc(cmd):
    r = subprocess.run(["smbclient", "//%s/%s" % (host, share), "-p", port, "-s", conf,
                        "--use-kerberos=off", "-U", "%s%%%s" % (user, pw), "-c", "posix; " + cmd],
                       capture_output=True, text=True)
    failed = [l for l in (r.stdout + r.stderr).splitlines() if "NT_STATUS" in l]
    return failed[-1] if failed else "OK"
def names(*keep):
    return sorted(e['name'] for e in w.list('') if e['name'] in keep)
for n in ["rc", "other"]:
    w.close(w.create(n, CreateDisposition=libsmb.FILE_CREATE))
out("POSIX rename onto another case of an existing name:", smbc("rename other RC"))
out("  listed:", names("rc", "RC", "other"))
w.mkdir("pdir")
w.close(w.create("pdir\\f", CreateDisposition=libsmb.FILE_CREATE))
fw = w.create("pdir\\f", DesiredAccess=security.SEC_FILE_READ_ATTRIBUTE, ShareAccess=7)
out("POSIX rename of a directory, a Windows open below:", smbc("rename pdir pdir2"))
w.close(fw)
fp, _, _ = c.create_ex("pdir/f", DesiredAccess=security.SEC_FILE_READ_ATTRIBUTE | security.SEC_STD_DELETE,
                       ShareAccess=7, CreateContexts=ctx(0))
out("POSIX rename of a directory, a POSIX open below:", smbc("rename pdir pdir2"))
out("  listed:", names("pdir", "pdir2"))
# (Samba 4.22 keeps that open's old name: a delete-on-close set on it fails at its close with
# OBJECT_NAME_NOT_FOUND; not compared, ringshare removes the file where it is now:
# crates/core/tests/posix.rs.)
c.close(fp)
for n in ["src3", "dst3"]:
    w.close(w.create(n, CreateDisposition=libsmb.FILE_CREATE))
fp, _, _ = c.create_ex("dst3", DesiredAccess=security.SEC_FILE_READ_ATTRIBUTE, ShareAccess=7,
                       CreateContexts=ctx(0))
out("POSIX rename replacing a file a POSIX open holds:", smbc("rename src3 dst3 -f"))
c.close(fp)
out("  listed:", names("src3", "dst3"))
w.close(w.create("src3", CreateDisposition=libsmb.FILE_CREATE))
fw = w.create("dst3", DesiredAccess=security.SEC_FILE_READ_ATTRIBUTE, ShareAccess=7)
out("POSIX rename replacing a file a Windows open holds:", smbc("rename src3 dst3 -f"))
w.close(fw)
for n in ["rc", "RC", "other", "src3", "dst3"]:
    try:
        w.unlink(n)
    except NTSTATUSError:
        pass
for d in ["pdir", "pdir2"]:
    for rm, n in [(w.unlink, d + "\\f"), (w.rmdir, d)]:
        try:
            rm(n)
        except NTSTATUSError:
            pass
# FSCC_FS_POSIX_INFORMATION (Samba's test_posix_fs_info): the figures that do not move while
# the test runs (both shares are on one file system), and on a connection without POSIX.
fs = c.get_posix_fs_info()
out("posix fs info:", sorted((k, v) for k, v in fs.items()
                             if not k.startswith(("free", "blocks_avail", "user_blocks"))))
out("posix fs info free figures:", sorted((k, v > 0) for k, v in fs.items()
                                          if k.startswith(("free", "blocks_avail", "user_blocks"))))
try:
    c2.get_posix_fs_info()
    out("posix fs info without POSIX: OK")
except NTSTATUSError as e:
    out("posix fs info without POSIX:", status(e))
try:
    c2.list("", info_level=libsmb.SMB2_FIND_POSIX_INFORMATION)
    out("posix listing without POSIX: OK")
except NTSTATUSError as e:
    out("posix listing without POSIX:", status(e))
for name in ["pf640", "pf4777"]:
    c.unlink(name)
for name in ["pd750", "pd3777"]:
    c.rmdir(name)
