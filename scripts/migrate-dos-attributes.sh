#!/usr/bin/env bash
# Converts the DOS attributes ringshare kept before 2026-11-25 (`user.ringshare.dosattrib`, four
# bytes) into Samba's `user.DOSATTRIB` (version 5, attributes only: the creation time stays the
# file's own), which ringshare reads now, for every file and directory under DIR. A file that
# already has a `user.DOSATTRIB` keeps it. The old attribute is removed either way.
#
#   scripts/migrate-dos-attributes.sh DIR
#
# Run it as root (or as the owner of the files) while the share is not being served. Prints how
# many files it converted.
set -euo pipefail
[ $# -eq 1 ] && [ -d "$1" ] || { sed -n '2,9p' "$0"; exit 2; }
exec python3 - "$1" <<'PY'
import os, struct, sys

OLD, NEW = "user.ringshare.dosattrib", "user.DOSATTRIB"
KEPT = 0x01 | 0x02 | 0x04 | 0x10 | 0x20 | 0x200 | 0x1000
converted = 0
for root, dirs, files in os.walk(sys.argv[1]):
    for name in [root] + [os.path.join(root, f) for f in files]:
        try:
            old = os.getxattr(name, OLD, follow_symlinks=False)
        except OSError:
            continue
        try:
            os.getxattr(name, NEW, follow_symlinks=False)
            have_new = True
        except OSError:
            have_new = False
        if not have_new and len(old) == 4:
            attrs = struct.unpack("<I", old)[0] & KEPT
            # Version 5: empty attrib_hex, version 5, level 5, valid = ATTRIB, attributes,
            # creation time 0 (none).
            value = struct.pack("<HHHHIIQ", 0, 5, 5, 0, 0x01, attrs, 0)
            os.setxattr(name, NEW, value, follow_symlinks=False)
            converted += 1
        os.removexattr(name, OLD, follow_symlinks=False)
print(f"{converted} converted")
PY
