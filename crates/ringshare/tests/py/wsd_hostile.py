"""Hostile input for ringshare's WS-Discovery (tests/wsd.rs): junk datagrams to UDP 3702 and
junk HTTP requests to TCP 5357, then a proper Probe and a proper Get, which must still be
answered. Prints `udp ok` and `http` with the status of each request in order.

usage: wsd_hostile.py SERVER_IP ENDPOINT_UUID
"""
import socket
import sys
import uuid

server, endpoint = sys.argv[1], sys.argv[2]

SOAP = "http://www.w3.org/2003/05/soap-envelope"
WSA = "http://schemas.xmlsoap.org/ws/2004/08/addressing"
WSD = "http://schemas.xmlsoap.org/ws/2005/04/discovery"
WSDP = "http://schemas.xmlsoap.org/ws/2006/02/devprof"


def envelope(action, body, msg_id):
    return (
        f'<?xml version="1.0" encoding="utf-8"?><soap:Envelope xmlns:soap="{SOAP}" '
        f'xmlns:wsa="{WSA}" xmlns:wsd="{WSD}" xmlns:wsdp="{WSDP}"><soap:Header>'
        f"<wsa:To>urn:schemas-xmlsoap-org:ws:2005:04:discovery</wsa:To>"
        f"<wsa:Action>{action}</wsa:Action><wsa:MessageID>{msg_id}</wsa:MessageID>"
        f"</soap:Header><soap:Body>{body}</soap:Body></soap:Envelope>"
    ).encode()


probe_id = uuid.uuid4().urn
probe = envelope(WSD + "/Probe", "<wsd:Probe><wsd:Types>wsdp:Device</wsd:Types></wsd:Probe>", probe_id)

junk = [
    b"",
    b"\x00\xff\xfe garbage",
    probe[: len(probe) // 2],
    b"<a>" * 5000,
    b'<!DOCTYPE a [<!ENTITY x "xxxxxxxxxx"><!ENTITY y "&x;&x;&x;&x;">]><a>&y;</a>',
    b"x" * 60000,
    envelope(WSD + "/Probe", "<wsd:Probe><wsd:Types>zz:Unbound</wsd:Types></wsd:Probe>", "urn:x"),
    envelope(WSD + "/Resolve", "<wsd:Resolve/>", "urn:y"),
]
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.settimeout(3)
for j in junk:
    u.sendto(j, (server, 3702))
u.sendto(probe, (server, 3702))
while True:
    data, _ = u.recvfrom(65536)
    if probe_id.encode() in data and b"ProbeMatches" in data:
        print("udp ok")
        break

path = "/" + endpoint
get_id = uuid.uuid4().urn
get = (
    f'<soap:Envelope xmlns:soap="{SOAP}" xmlns:wsa="{WSA}"><soap:Header><wsa:To>urn:uuid:{endpoint}'
    f"</wsa:To><wsa:Action>http://schemas.xmlsoap.org/ws/2004/09/transfer/Get</wsa:Action>"
    f"<wsa:MessageID>{get_id}</wsa:MessageID></soap:Header><soap:Body/></soap:Envelope>"
).encode()


def post(body, ctype="application/soap+xml", length=None):
    length = len(body) if length is None else length
    return (
        f"POST {path} HTTP/1.1\r\nHost: {server}\r\nContent-Type: {ctype}\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode() + body


requests = [
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    f"GET {path} HTTP/1.1\r\n\r\n".encode(),
    post(get, ctype="text/html"),
    post(b"", length=10**9),
    post(b"<<<<not xml"),
    b"X" * 20000 + b"\r\n\r\n",
    post(get),
]

# One connection that sends nothing stays open while the others are served.
idle = socket.create_connection((server, 5357), timeout=3)
codes = []
for i, r in enumerate(requests):
    c = socket.create_connection((server, 5357), timeout=10)
    try:
        c.sendall(r)
    except OSError:
        pass
    answer = b""
    while True:
        try:
            chunk = c.recv(65536)
        except OSError:
            break
        if not chunk:
            break
        answer += chunk
    c.close()
    status = answer.split(b" ", 2)[1].decode() if answer.startswith(b"HTTP/1.1 ") else "none"
    codes.append(status)
    if i == len(requests) - 1 and b"/Workgroup:" not in answer:
        print("no pub:Computer in the GetResponse:", answer)
        sys.exit(1)
idle.close()
print("http", " ".join(codes))
