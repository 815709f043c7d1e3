"""MIT's GSS acceptor (python3-gssapi) on a token ringshare's Kerberos initiator made: reads the
GSS token (hex) from standard input, accepts it with the keytab in KRB5_KTNAME, and prints the
AP-REP (hex), the client's name and the session key (hex, GSS_C_INQ_SSPI_SESSION_KEY), a line
each."""

import sys

import gssapi
import gssapi.raw as raw

token = bytes.fromhex(sys.stdin.read().strip())
ctx = gssapi.SecurityContext(usage="accept")
reply = ctx.step(token)
key = raw.inquire_sec_context_by_oid(ctx, gssapi.OID.from_int_seq("1.2.840.113554.1.2.2.5.5"))
print("ap-rep", (reply or b"").hex())
print("client", ctx.initiator_name)
print("key", key[0].hex())
