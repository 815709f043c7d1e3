#!/usr/bin/python3
# usage: pyset.py FILE SECINFO 'ACES' [ctrl_extra] [owner] [group]
#   ACES: python list of (type, flags, mask, sid) tuples, or the word NULL (NULL DACL), or NONE (no DACL)
import sys
from samba import param, credentials, security, ntstatus, NTSTATUSError
from samba.samba3 import libsmb_samba_internal as libsmb
from samba.dcerpc import security as sec
fname, secinfo, aces = sys.argv[1], int(sys.argv[2], 0), sys.argv[3]
ctrl = int(sys.argv[4], 0) if len(sys.argv) > 4 else 0
owner = sys.argv[5] if len(sys.argv) > 5 and sys.argv[5] else None
group = sys.argv[6] if len(sys.argv) > 6 and sys.argv[6] else None
from samba.samba3 import param as s3param
lp = s3param.get_context(); lp.load("/tmp/rsacl/client/smb.conf")
creds = credentials.Credentials(); creds.guess(lp)
creds.set_username('rsaclt1', credentials.SPECIFIED); creds.set_password('Pw1!rsacl', credentials.SPECIFIED); creds.set_domain('WORKGROUP', credentials.SPECIFIED)
c = libsmb.Conn('127.0.0.1', 'acl', lp, creds)
sd = sec.descriptor()
sd.revision = 1
sd.type = sec.SEC_DESC_SELF_RELATIVE | ctrl
if owner: sd.owner_sid = sec.dom_sid(owner)
if group: sd.group_sid = sec.dom_sid(group)
if aces == 'NULL':
    sd.type |= sec.SEC_DESC_DACL_PRESENT
    sd.dacl = None
elif aces == 'NONE':
    pass
else:
    acl = sec.acl(); acl.revision = 2
    lst = []
    for (t, f, m, s) in eval(aces):
        a = sec.ace(); a.type = t; a.flags = f; a.access_mask = m; a.trustee = sec.dom_sid(s)
        lst.append(a)
    acl.aces = lst; acl.num_aces = len(lst)
    sd.dacl = acl
    sd.type |= sec.SEC_DESC_DACL_PRESENT
fnum = c.create(fname, DesiredAccess=sec.SEC_STD_WRITE_DAC | sec.SEC_STD_WRITE_OWNER | sec.SEC_STD_READ_CONTROL,
                ShareAccess=7, CreateDisposition=1)
try:
    c.set_sd(fnum, sd, secinfo)
    print("status: NT_STATUS_OK")
except NTSTATUSError as e:
    print("status: 0x%08x %s" % (e.args[0] & 0xffffffff, e.args[1]))
c.close(fnum)
