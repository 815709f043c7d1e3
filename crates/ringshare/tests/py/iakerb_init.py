"""MIT krb5's IAKERB initiator (GSS mechanism 1.3.6.1.5.2.5) with a password and no ticket,
driven over standard input and output, one hex token a line.

usage: iakerb_init.py PRINCIPAL PASSWORD SERVICE@HOST

Writes the first token, then for each line read (the acceptor's token in hex) writes the next
token; once the context is established (after the token that finishes it, if any) "done" and
"key HEX" (the context's session key, GSS_C_INQ_SSPI_SESSION_KEY: what SMB signs with); on an
error "error MAJOR MINOR MESSAGE", and exits 1.

libgssapi_krb5 is called through ctypes rather than python3-gssapi: krb5 1.20's IAKERB
initiator refuses an empty first input buffer (fixed in 1.22, MIT ticket 9126), and
python3-gssapi always passes one.
"""

import ctypes
import sys

lib = ctypes.CDLL("libgssapi_krb5.so.2")


class Buf(ctypes.Structure):
    _fields_ = [("length", ctypes.c_size_t), ("value", ctypes.c_void_p)]


class Oid(ctypes.Structure):
    _fields_ = [("length", ctypes.c_uint32), ("elements", ctypes.c_void_p)]


class BufSet(ctypes.Structure):
    _fields_ = [("count", ctypes.c_size_t), ("elements", ctypes.POINTER(Buf))]


class OidSet(ctypes.Structure):
    _fields_ = [("count", ctypes.c_size_t), ("elements", ctypes.POINTER(Oid))]


def oid(der):
    b = ctypes.create_string_buffer(der, len(der))
    o = Oid(len(der), ctypes.cast(b, ctypes.c_void_p))
    o._keep = b
    return o


IAKERB = oid(b"\x2b\x06\x01\x05\x02\x05")
NT_KRB5_PRINCIPAL = oid(b"\x2a\x86\x48\x86\xf7\x12\x01\x02\x02\x01")
NT_HOSTBASED = oid(b"\x2a\x86\x48\x86\xf7\x12\x01\x02\x01\x04")
INQ_SESSION_KEY = oid(b"\x2a\x86\x48\x86\xf7\x12\x01\x02\x02\x05\x05")
GSS_C_INITIATE = 1
GSS_C_MUTUAL_FLAG, GSS_C_INTEG_FLAG = 2, 32
CONTINUE_NEEDED = 1
U32 = ctypes.c_uint32
minor = U32()


def name(text, kind):
    b = text.encode()
    buf = Buf(len(b), ctypes.cast(ctypes.c_char_p(b), ctypes.c_void_p))
    out = ctypes.c_void_p()
    major = lib.gss_import_name(ctypes.byref(minor), ctypes.byref(buf), ctypes.byref(kind),
                                ctypes.byref(out))
    check(major, "gss_import_name")
    return out


def message(code, kind):
    ctx = U32(0)
    out = Buf()
    m = U32()
    lib.gss_display_status(ctypes.byref(m), U32(code), kind, None, ctypes.byref(ctx),
                           ctypes.byref(out))
    text = ctypes.string_at(out.value, out.length).decode(errors="replace")
    lib.gss_release_buffer(ctypes.byref(m), ctypes.byref(out))
    return text


def check(major, what):
    if major & 0xFFFF0000:
        print(f"error {major:#x} {minor.value:#x} {what}: {message(major, 1)}; "
              f"{message(minor.value, 2)}", flush=True)
        sys.exit(1)


def main():
    principal, password, service = sys.argv[1:4]
    user = name(principal, NT_KRB5_PRINCIPAL)
    target = name(service, NT_HOSTBASED)
    pw = password.encode()
    pwbuf = Buf(len(pw), ctypes.cast(ctypes.c_char_p(pw), ctypes.c_void_p))
    mechs = OidSet(1, ctypes.pointer(IAKERB))
    cred = ctypes.c_void_p()
    major = lib.gss_acquire_cred_with_password(
        ctypes.byref(minor), user, ctypes.byref(pwbuf), U32(0), ctypes.byref(mechs),
        GSS_C_INITIATE, ctypes.byref(cred), None, None)
    check(major, "gss_acquire_cred_with_password")
    ctx = ctypes.c_void_p()
    inbuf = None
    while True:
        out = Buf()
        flags = U32()
        major = lib.gss_init_sec_context(
            ctypes.byref(minor), cred, ctypes.byref(ctx), target, ctypes.byref(IAKERB),
            U32(GSS_C_MUTUAL_FLAG | GSS_C_INTEG_FLAG), U32(0), None,
            ctypes.byref(inbuf) if inbuf is not None else None, None, ctypes.byref(out),
            ctypes.byref(flags), None)
        check(major, "gss_init_sec_context")
        if out.length:
            print(ctypes.string_at(out.value, out.length).hex(), flush=True)
            m = U32()
            lib.gss_release_buffer(ctypes.byref(m), ctypes.byref(out))
        if major != CONTINUE_NEEDED:
            print("done", flush=True)
            keys = ctypes.POINTER(BufSet)()
            major = lib.gss_inquire_sec_context_by_oid(
                ctypes.byref(minor), ctx, ctypes.byref(INQ_SESSION_KEY), ctypes.byref(keys))
            check(major, "gss_inquire_sec_context_by_oid")
            key = keys.contents.elements[0]
            print("key", ctypes.string_at(key.value, key.length).hex(), flush=True)
            return
        line = sys.stdin.readline().strip()
        if not line:
            print("error 0 0 no answer from the acceptor", flush=True)
            sys.exit(1)
        data = bytes.fromhex(line)
        keep = ctypes.create_string_buffer(data, len(data))
        inbuf = Buf(len(data), ctypes.cast(keep, ctypes.c_void_p))


if __name__ == "__main__":
    main()
