#!/bin/bash
# Records how Debian's Samba 4.17 (vfs_posixacl, default settings) maps POSIX ACLs to NT ACLs and back.
# Needs: the private smbd of this directory running (its PID in smbd.pid, inside its own network namespace),
# share [acl] at /tmp/rsacl/share, users rsaclt1 (connects; "admin users"), rsaclt2 (uid 1002), rsaclt3
# (uid 1003, member of rsaclg2), groups rsaclg1 (gid 1004), rsaclg2 (gid 1005).
SH=/tmp/rsacl/share
NS="nsenter -t $(cat /tmp/rsacl/smbd.pid) -n"
cacls() { local f=$1; shift; $NS smbcacls -s /tmp/rsacl/client/smb.conf //127.0.0.1/acl "$f" -U 'rsaclt1%Pw1!rsacl' --numeric "$@" 2>&1 | grep -v "failed to lookup domain sid\|RPC fault"; return ${PIPESTATUS[0]}; }
facl() { getfacl -n -p -c -E "$1" 2>/dev/null | grep . | tr '\n' ' ' | sed 's/ $//'; }
nt() { cacls "$1" | grep -v REVISION | sed 's/^ACL://' | tr '\n' ' ' | sed 's/ $//'; }
# mk NAME f|d MODE ["setfacl args"...] (one string per setfacl call): fresh object owned by rsaclt2:rsaclg1 (1002:1004)
mk() { local n=$1 k=$2 m=$3; shift 3; rm -rf "$SH/$n"; if [ "$k" = d ]; then mkdir "$SH/$n"; else touch "$SH/$n"; fi
       chown ${MKOWN:-1002:1004} "$SH/$n"; chmod "$m" "$SH/$n"; for a in "$@"; do setfacl $a "$SH/$n" || echo "SETFACL FAILED: $a"; done; }
get() { local n=$1 k=$2 m=$3; shift 3; mk "$n" "$k" "$m" "$@"; cd $SH
        echo "GET $n $k mode=$(stat -c %a $n) owner=$(stat -c %u:%g $n)"
        echo "  posix: $(facl $n)"; echo "  nt:    $(nt $n)"; cd - >/dev/null; }
# set NAME f|d MODE "setfacl args" smbcacls-args...
set_() { local n=$1 k=$2 m=$3 pre=$4; shift 4; if [ -n "$pre" ]; then mk "$n" "$k" "$m" "$pre"; else mk "$n" "$k" "$m"; fi; cd $SH
        echo "SET $n $k mode=$(stat -c %a $n) owner=$(stat -c %u:%g $n)"
        echo "  before: $(facl $n)"; echo "  cmd:    smbcacls $*"
        out=$(cacls "$n" "$@"); rc=$?; [ -n "$out" ] && echo "  output: $out"; echo "  rc:     $rc"
        echo "  after:  mode=$(stat -c %a $n) owner=$(stat -c %u:%g $n) $(facl $n)"; echo "  nt:     $(nt $n)"; cd - >/dev/null; }
# pset NAME f|d MODE "setfacl args" SECINFO ACES [CONTROL] [OWNER] [GROUP]   (python3-samba client; no ACE sorting)
pset() { local n=$1 k=$2 m=$3 pre=$4; shift 4; if [ -n "$pre" ]; then mk "$n" "$k" "$m" "$pre"; else mk "$n" "$k" "$m"; fi; cd $SH
        echo "PSET $n $k mode=$(stat -c %a $n) owner=$(stat -c %u:%g $n)"
        echo "  before: $(facl $n)"; echo "  set_sd: secinfo=$1 dacl=$2 ${3:+control=$3} ${4:+owner=$4} ${5:+group=$5}"
        echo "  $($NS /usr/bin/python3 /tmp/rsacl/pyset.py "$n" "$@" 2>&1 | grep -m1 status)"
        echo "  after:  mode=$(stat -c %a $n) owner=$(stat -c %u:%g $n) $(facl $n)"; echo "  nt:     $(nt $n)"; cd - >/dev/null; }

echo "# smbd --version: $(smbd --version); smbcacls $($NS smbcacls --version 2>/dev/null)"
echo "# id rsaclt3: $(id rsaclt3)"
for m in 0000 0100 0200 0300 0400 0500 0600 0700 0070 0007 0640 0644 0755 0777 4755 2755 1755; do get f$m f $m; done
for m in 0000 0100 0200 0300 0400 0500 0600 0700 0750 0755 2770 1777; do get d$m d $m; done
get a1 f 0640 "-m u:1003:r,g:1005:rw"
get a2 f 0644 "-m u:1003:rwx,g:1005:rwx,m::r"
get a3 f 0600 "-m u:1003:rw,g:1005:r,u:1001:x,g:1004:-" "-m m::rw"
get a4 f 0640 "-m u:1003:---,m::rwx"
get a7 f 0640 "-m u:1003:rw,u:1002:r,g:1004:rwx,m::---"
get e1 d 0750 "-d -m u::rwx,g::rx,o::-"
get e2 d 2770 "-m g:1005:rx" "-d -m u::rwx,g::rwx,g:1005:rx,o::-"
get e3 d 0755 "-d -m u::rw,g::r,o::r,u:1003:rwx,m::rx"
get e4 d 0700 "-d -m u::rwx,g::-,o::-"
get e5 d 0755 "-m u:1003:rwx" "-d -m u::rwx,g::rx,o::rx,u:1003:rwx,u:1002:rwx"
# root-owned and passdb-user-owned files (SID mapping differences)
rm -f $SH/a5 $SH/a6; touch $SH/a5 $SH/a6; chown 0:0 $SH/a5; chown 1001:1001 $SH/a6; chmod 644 $SH/a5 $SH/a6
cd $SH; for n in a5 a6; do echo "GET $n f mode=644 owner=$(stat -c %u:%g $n)"; echo "  posix: $(facl $n)"; echo "  nt:    $(nt $n)"; done; cd - >/dev/null

set_ F1 f 0644 "" --set "ACL:S-1-22-1-1002:ALLOWED/0x0/0x0012019f,ACL:S-1-22-2-1004:ALLOWED/0x0/0x00120089,ACL:S-1-1-0:ALLOWED/0x0/0x0"
set_ F2 f 0644 "" --set "ACL:S-1-22-1-1003:ALLOWED/0x0/0x00120089"
set_ F3 f 0644 "" --set "ACL:S-1-1-0:ALLOWED/0x0/0x001200a9"
set_ F3b f 0000 "" --set "ACL:S-1-1-0:ALLOWED/0x0/0x001200a9"
set_ F4 f 0644 "" --set "ACL:S-1-22-1-1003:DENIED/0x0/0x001f01ff,ACL:S-1-1-0:ALLOWED/0x0/0x00120089"
set_ F5 f 0644 "" --set "ACL:S-1-22-1-1003:DENIED/0x0/0x00000116,ACL:S-1-22-2-1005:ALLOWED/0x0/0x0012019f,ACL:S-1-1-0:ALLOWED/0x0/0x00120089"
set_ F7 f 0644 "" --set "ACL:S-1-22-1-1002:ALLOWED/0x0/0x001f01ff,ACL:S-1-5-21-1-2-3-4:ALLOWED/0x0/0x00120089"
set_ F8 f 0644 "" --set "ACL:S-1-22-1-1002:ALLOWED/0x0/0x001f01ff,ACL:S-1-5-11:ALLOWED/0x0/0x00120089,ACL:S-1-5-32-545:ALLOWED/0x0/0x00120089"
set_ F9 f 0644 "" --set "ACL:S-1-22-1-1002:ALLOWED/0x3/0x001f01ff,ACL:S-1-22-1-1003:ALLOWED/0xb/0x00120089,ACL:S-1-22-2-1005:ALLOWED/0x10/0x00120089"
set_ F10 f 0644 "" --set "ACL:S-1-22-1-1002:ALLOWED/0x0/0x10000000,ACL:S-1-22-1-1003:ALLOWED/0x0/0x80000000,ACL:S-1-22-2-1005:ALLOWED/0x0/0x40000000,ACL:S-1-1-0:ALLOWED/0x0/0x20000000"
set_ F11 f 0644 "" --set "ACL:S-1-22-1-1002:ALLOWED/0x0/0x00100080,ACL:S-1-22-1-1003:ALLOWED/0x0/0x00000001,ACL:S-1-22-2-1005:ALLOWED/0x0/0x00000004,ACL:S-1-1-0:ALLOWED/0x0/0x00000008,ACL:S-1-22-2-1004:ALLOWED/0x0/0x000d0000"
set_ F12 f 0644 "" --set "ACL:S-1-1-0:DENIED/0x0/0x00000116,ACL:S-1-22-1-1002:ALLOWED/0x0/0x001f01ff,ACL:S-1-22-2-1004:ALLOWED/0x0/0x0012019f,ACL:S-1-1-0:ALLOWED/0x0/0x0012019f"
set_ F13 f 0640 "" --set "ACL:S-1-1-0:DENIED/0x0/0x001f01ff,ACL:S-1-22-1-1002:ALLOWED/0x0/0x001f01ff,ACL:S-1-22-2-1004:ALLOWED/0x0/0x0012019f"
set_ F14 f 0644 "" --set "ACL:S-1-22-2-1005:DENIED/0x0/0x00000116,ACL:S-1-22-1-1003:ALLOWED/0x0/0x0012019f,ACL:S-1-22-1-1001:ALLOWED/0x0/0x0012019f,ACL:S-1-1-0:ALLOWED/0x0/0x001200a9"
set_ F17 f 0644 "" --set "ACL:S-1-22-1-1003:ALLOWED/0x0/0x00000001,ACL:S-1-22-1-1003:ALLOWED/0x0/0x00000002,ACL:S-1-22-1-1002:ALLOWED/0x0/0x001f01ff"
set_ F18 f 0644 "" --set "ACL:S-1-22-1-1003:DENIED/0x0/0x00000002,ACL:S-1-22-1-1003:ALLOWED/0x0/0x0012019f,ACL:S-1-22-2-1005:DENIED/0x0/0x00000001,ACL:S-1-22-2-1005:ALLOWED/0x0/0x00000001"
set_ F19 f 0644 "" --set "ACL:S-1-1-0:ALLOWED/0x10/0x00120089,ACL:S-1-22-1-1003:DENIED/0x10/0x001f01ff"
set_ F20 f 0644 "" --set "ACL:S-1-22-1-1003:DENIED/0x10/0x001f01ff,ACL:S-1-1-0:ALLOWED/0x10/0x00120089"
set_ O1 f 0644 "" -C S-1-22-1-1003
set_ O2 f 0644 "" -G S-1-22-2-1005
set_ O3 f 0644 "" -C S-1-22-2-1005
set_ O4 f 0644 "" -G S-1-22-1-1003
set_ O5 f 0644 "" -C S-1-1-0
set_ O6 f 0644 "" -C S-1-5-32-544
set_ O7 f 0644 "" -C S-1-5-21-1-2-3-4
set_ O8 f 0640 "-m u:1003:rwx,g:1005:r" -C S-1-22-1-1003
set_ O9 f 0644 "" --set "OWNER:S-1-22-1-1003,GROUP:S-1-22-2-1005,ACL:S-1-22-1-1003:ALLOWED/0x0/0x001f01ff,ACL:S-1-22-1-1002:ALLOWED/0x0/0x00120089,ACL:S-1-22-2-1005:ALLOWED/0x0/0x001200a9"
set_ O10 f 0644 "" --set "OWNER:S-1-5-21-1-2-3-4,ACL:S-1-22-1-1003:ALLOWED/0x0/0x001f01ff"
set_ D1 d 0755 "" --set "ACL:S-1-22-1-1002:ALLOWED/0x3/0x001f01ff,ACL:S-1-22-2-1004:ALLOWED/0x3/0x001200a9,ACL:S-1-1-0:ALLOWED/0x3/0x001200a9"
set_ D2 d 0755 "" --set "ACL:S-1-22-1-1002:ALLOWED/0x0/0x001f01ff,ACL:S-1-3-0:ALLOWED/0xb/0x001f01ff,ACL:S-1-3-1:ALLOWED/0xb/0x001200a9,ACL:S-1-1-0:ALLOWED/0x3/0x001200a9"
set_ D3 d 0755 "" --set "ACL:S-1-22-1-1002:ALLOWED/0x0/0x001f01ff,ACL:S-1-3-0:ALLOWED/0x1/0x001f01ff,ACL:S-1-22-1-1003:ALLOWED/0x2/0x001200a9,ACL:S-1-22-2-1005:ALLOWED/0xa/0x001200a9"
set_ D4 d 0750 "-d -m u::rwx,g::rx,o::-" --set "ACL:S-1-3-0:ALLOWED/0xb/0x001f01ff,ACL:S-1-22-1-1003:ALLOWED/0xb/0x001200a9"
set_ D5 d 0750 "-d -m u::rwx,g::rx,o::-" --set "ACL:S-1-22-1-1002:ALLOWED/0x0/0x001f01ff,ACL:S-1-22-2-1004:ALLOWED/0x0/0x001200a9"
set_ D6 d 0755 "" --set "ACL:S-1-22-1-1002:ALLOWED/0x0/0x001200a9,ACL:S-1-3-0:ALLOWED/0xb/0x00120089"
set_ D7 d 0755 "" --set "ACL:S-1-22-1-1003:ALLOWED/0x9/0x001200a9,ACL:S-1-22-1-1003:ALLOWED/0x2/0x001200a9,ACL:S-1-22-1-1002:ALLOWED/0x0/0x001f01ff"
set_ D8 d 0750 "" --set "ACL:S-1-22-1-1002:ALLOWED/0x3/0x001200a9,ACL:S-1-22-2-1005:ALLOWED/0x3/0x00120089"
set_ E1 f 0644 "" -D "ACL:S-1-22-1-1002:ALLOWED/0x0/0x0012019f,ACL:S-1-22-2-1004:ALLOWED/0x0/0x00120089,ACL:S-1-1-0:ALLOWED/0x0/0x00120089"
set_ M1 d 0755 "-d -m u::rw,g::r,o::r,u:1003:rwx,m::rx" --add "ACL:S-1-22-2-1005:ALLOWED/0x3/0x001200a9"
set_ M2 f 0640 "-m u:1003:rwx,g:1005:r,m::rx" --modify "ACL:S-1-22-1-1003:ALLOWED/0x0/0x0012019f"
set_ M3 f 0640 "-m u:1003:rwx,g:1005:r,m::rx" --delete "ACL:S-1-22-2-1005:ALLOWED/0x0/0x00120089"
pset N1 f 0640 "" 4 NULL
pset N2 d 0700 "" 4 NULL
pset N3 d 0750 "-d -m u::rwx,g::rx,o::-" 4 NULL
pset P1 f 0640 "" 4 '[]'
pset P2 d 0750 "-d -m u::rwx,g::rx,o::-" 4 '[]'
pset P3 f 0644 "" 4 '[(0,0,0x1f01ff,"S-1-22-1-1002"),(1,0,0x1f01ff,"S-1-22-1-1003")]'
pset P4 f 0644 "" 4 '[(0,0,0x1f01ff,"S-1-22-1-1002"),(2,0x80,0x1f01ff,"S-1-22-1-1003")]'
pset P6 f 0644 "" 0 '[(0,0,0x1f01ff,"S-1-22-1-1002")]'
pset P7 f 0644 "" 5 NONE 0 S-1-22-1-1003
pset P9 f 0644 "" 4 '[(1,0,0x2,"S-1-22-1-1003"),(1,0,0x1f01ff,"S-1-1-0"),(0,0,0x1f01ff,"S-1-22-1-1002")]'
pset P11 d 0755 "" 4 '[(0,0xb,0x1200a9,"S-1-22-1-1003"),(1,0xb,0x1f01ff,"S-1-22-2-1005"),(0,0,0x1f01ff,"S-1-22-1-1002")]'
pset P12 f 0644 "" 4 '[(0,0,0x1f01ff,"S-1-3-0"),(0,0,0x120089,"S-1-22-1-1002"),(0,3,0x120089,"S-1-3-1")]'
pset P15 d 0755 "" 5 '[(0,0xb,0x1f01ff,"S-1-3-0"),(0,0,0x1f01ff,"S-1-22-1-1003")]' 0 S-1-22-1-1003
pset P16 f 0600 "" 4 '[(0,0,0x1f01ff,"S-1-22-2-1005")]'
MKOWN=1003:1004 pset P16b f 0600 "" 4 '[(0,0,0x1f01ff,"S-1-22-2-1005")]'
pset P17 f 0644 "" 4 '[(1,0,0x116,"S-1-22-1-1002"),(0,0,0x12019f,"S-1-1-0")]'
pset P18 f 0644 "" 4 '[(1,0,0x116,"S-1-22-2-1004"),(0,0,0x12019f,"S-1-22-1-1003"),(0,0,0x1f01ff,"S-1-1-0")]'
pset P19 d 0755 "" 4 '[(0,3,0x120089,"S-1-22-1-1003"),(0,0,0x120116,"S-1-22-1-1003")]'
pset P20 d 2770 "" 4 '[(0,3,0x1f01ff,"S-1-22-1-1002"),(0,3,0x1f01ff,"S-1-22-2-1004")]'
pset P21 f 0644 "" 4 '[(0,0,0x1f01ff,"S-1-22-1-1002"),(0,0,0x120089,"S-1-0-0")]'
pset P22 f 0644 "" 4 '[(1,0,0x1f01ff,"S-1-1-0"),(0,0,0x1f01ff,"S-1-22-1-1002")]'
pset P23 d 0755 "" 4 '[(1,0xb,0x1f01ff,"S-1-1-0"),(0,0xb,0x1f01ff,"S-1-3-0"),(0,0,0x1f01ff,"S-1-22-1-1002")]'
