//! The SOAP messages of WS-Discovery 1.0 (2005/04, the version Windows
//! speaks) and of the DPWS metadata exchange (WS-Transfer Get): reading a
//! Probe, a Resolve or a Get, and writing Hello, Bye, ProbeMatches,
//! ResolveMatches and GetResponse. No sockets here.

use super::xml::{self, escape, Doc};

pub const NS_SOAP: &str = "http://www.w3.org/2003/05/soap-envelope";
pub const NS_WSA: &str = "http://schemas.xmlsoap.org/ws/2004/08/addressing";
pub const NS_WSD: &str = "http://schemas.xmlsoap.org/ws/2005/04/discovery";
pub const NS_WSX: &str = "http://schemas.xmlsoap.org/ws/2004/09/mex";
pub const NS_WSDP: &str = "http://schemas.xmlsoap.org/ws/2006/02/devprof";
pub const NS_PUB: &str = "http://schemas.microsoft.com/windows/pub/2005/07";
pub const NS_PNPX: &str = "http://schemas.microsoft.com/windows/pnpx/2005/10";

/// Where multicast discovery messages are addressed (`wsa:To`).
pub const TO_DISCOVERY: &str = "urn:schemas-xmlsoap-org:ws:2005:04:discovery";
/// `wsa:To` of a reply.
pub const TO_ANONYMOUS: &str = "http://schemas.xmlsoap.org/ws/2004/08/addressing/role/anonymous";

pub const ACTION_HELLO: &str = "http://schemas.xmlsoap.org/ws/2005/04/discovery/Hello";
pub const ACTION_BYE: &str = "http://schemas.xmlsoap.org/ws/2005/04/discovery/Bye";
pub const ACTION_PROBE: &str = "http://schemas.xmlsoap.org/ws/2005/04/discovery/Probe";
pub const ACTION_PROBE_MATCHES: &str =
    "http://schemas.xmlsoap.org/ws/2005/04/discovery/ProbeMatches";
pub const ACTION_RESOLVE: &str = "http://schemas.xmlsoap.org/ws/2005/04/discovery/Resolve";
pub const ACTION_RESOLVE_MATCHES: &str =
    "http://schemas.xmlsoap.org/ws/2005/04/discovery/ResolveMatches";
pub const ACTION_GET: &str = "http://schemas.xmlsoap.org/ws/2004/09/transfer/Get";
pub const ACTION_GET_RESPONSE: &str = "http://schemas.xmlsoap.org/ws/2004/09/transfer/GetResponse";

/// The types the server is (`wsd:Types`): a DPWS device that is a computer.
const TYPES: &str = "wsdp:Device pub:Computer";
const TYPE_NAMES: [(&str, &str); 2] = [(NS_WSDP, "Device"), (NS_PUB, "Computer")];

/// Who the server is on the network.
#[derive(Debug, Clone)]
pub struct Identity {
    /// The endpoint UUID, `xxxxxxxx-xxxx-…` (also the HTTP path).
    pub uuid: String,
    /// `urn:uuid:` and the UUID: the endpoint reference's address.
    pub endpoint: String,
    /// The NetBIOS name.
    pub name: String,
    /// `pub:Computer`: `NAME/Workgroup:WORKGROUP`, or `name/Domain:DOMAIN` for a domain member.
    pub computer: String,
    /// `AppSequence/@InstanceId`: grows with every start (the start time in seconds).
    pub instance_id: u64,
}

impl Identity {
    /// The identity of server `name` (NetBIOS) in `workgroup`, or in `domain` when it is a
    /// domain member; `instance_id` as above.
    pub fn new(name: &str, workgroup: &str, domain: Option<&str>, instance_id: u64) -> Identity {
        let uuid = uuid_v5_dns(&name.to_ascii_lowercase());
        let computer = match domain {
            Some(d) => format!("{}/Domain:{}", name.to_ascii_lowercase(), d),
            None => format!(
                "{}/Workgroup:{}",
                name.to_ascii_uppercase(),
                workgroup.to_ascii_uppercase()
            ),
        };
        Identity {
            endpoint: format!("urn:uuid:{uuid}"),
            uuid,
            name: name.to_string(),
            computer,
            instance_id,
        }
    }

    /// The transport address for the metadata exchange at `ip` (`XAddrs`).
    pub fn xaddr(&self, ip: std::net::IpAddr, port: u16) -> String {
        match ip {
            std::net::IpAddr::V4(v4) => format!("http://{v4}:{port}/{}", self.uuid),
            std::net::IpAddr::V6(v6) => format!("http://[{v6}]:{port}/{}", self.uuid),
        }
    }
}

fn format_uuid(b: &[u8; 16]) -> String {
    let mut s = String::with_capacity(36);
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push_str(&format!("{byte:02x}"));
    }
    s
}

/// The name-based UUID (version 5, RFC 4122) of `name` in the DNS name space, as
/// Python's `uuid.uuid5(uuid.NAMESPACE_DNS, name)` (what wsdd derives from the host name).
pub fn uuid_v5_dns(name: &str) -> String {
    use sha1::{Digest, Sha1};
    const NAMESPACE_DNS: [u8; 16] = [
        0x6b, 0xa7, 0xb8, 0x10, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30,
        0xc8,
    ];
    let mut h = Sha1::new();
    h.update(NAMESPACE_DNS);
    h.update(name.as_bytes());
    let d = h.finalize();
    let mut b = [0u8; 16];
    b.copy_from_slice(&d[..16]);
    b[6] = (b[6] & 0x0f) | 0x50;
    b[8] = (b[8] & 0x3f) | 0x80;
    format_uuid(&b)
}

/// A fresh `urn:uuid:` message id (random, version 4).
pub fn new_message_id() -> String {
    let mut b = [0u8; 16];
    if getrandom::fill(&mut b).is_err() {
        // Not expected on Linux; a clock-based value still differs between messages.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        b = t.to_le_bytes();
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    format!("urn:uuid:{}", format_uuid(&b))
}

/// What a received message asks.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    /// A Probe; `matches`: its types and scopes select this server.
    Probe { matches: bool },
    /// A Resolve; `ours`: it names this server's endpoint.
    Resolve { ours: bool },
    /// A WS-Transfer Get (the metadata exchange).
    Get,
    /// Anything else (Hello and Bye of other devices, matches, unknown actions).
    Other,
}

/// A received message: its `wsa:MessageID`, `wsa:Action` and what it asks.
#[derive(Debug)]
pub struct Message {
    pub id: String,
    pub action: String,
    pub request: Request,
}

/// Read a SOAP envelope; `None` when it is not well-formed XML within the reader's bounds,
/// or not a SOAP 1.2 envelope with a header holding a message id and an action.
pub fn read(bytes: &[u8], me: &Identity) -> Option<Message> {
    let doc = xml::parse(bytes)?;
    let env = doc.root();
    if env.ns != NS_SOAP || env.local != "Envelope" {
        return None;
    }
    let header = doc.child(env, NS_SOAP, "Header")?;
    let body = doc.child(env, NS_SOAP, "Body")?;
    let id = doc.child(header, NS_WSA, "MessageID")?.text.clone();
    let action = doc.child(header, NS_WSA, "Action")?.text.clone();
    if id.is_empty() || action.is_empty() {
        return None;
    }
    let request = match action.as_str() {
        ACTION_PROBE => Request::Probe {
            matches: probe_selects_us(&doc, body),
        },
        ACTION_RESOLVE => {
            let addr = doc.path(
                body,
                &[
                    (NS_WSD, "Resolve"),
                    (NS_WSA, "EndpointReference"),
                    (NS_WSA, "Address"),
                ],
            );
            Request::Resolve {
                ours: addr.is_some_and(|a| a.text.eq_ignore_ascii_case(&me.endpoint)),
            }
        }
        ACTION_GET => Request::Get,
        _ => Request::Other,
    };
    Some(Message {
        id,
        action,
        request,
    })
}

/// Whether a Probe's body selects this server: every type it names is one of ours
/// (none: any), and it names no scope (the server has none).
fn probe_selects_us(doc: &Doc, body: &xml::Element) -> bool {
    let Some(probe) = doc.child(body, NS_WSD, "Probe") else {
        return false;
    };
    if doc
        .child(probe, NS_WSD, "Scopes")
        .is_some_and(|s| !s.text.is_empty())
    {
        return false;
    }
    match doc.child(probe, NS_WSD, "Types") {
        None => true,
        Some(t) => t
            .qnames()
            .iter()
            .all(|(ns, local)| TYPE_NAMES.contains(&(ns.as_str(), local.as_str()))),
    }
}

/// The header's `wsd:AppSequence` of a message the server sends over UDP.
#[derive(Debug, Clone, Copy)]
pub struct Sequence {
    pub instance_id: u64,
    pub message_number: u64,
}

fn envelope(
    to: &str,
    action: &str,
    relates_to: Option<&str>,
    seq: Option<Sequence>,
    body: &str,
) -> String {
    let mut x = format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?>\
         <soap:Envelope xmlns:soap=\"{NS_SOAP}\" xmlns:wsa=\"{NS_WSA}\" xmlns:wsd=\"{NS_WSD}\" \
         xmlns:wsx=\"{NS_WSX}\" xmlns:wsdp=\"{NS_WSDP}\" xmlns:pnpx=\"{NS_PNPX}\" \
         xmlns:pub=\"{NS_PUB}\"><soap:Header><wsa:To>{}</wsa:To><wsa:Action>{action}</wsa:Action>\
         <wsa:MessageID>{}</wsa:MessageID>",
        escape(to),
        new_message_id()
    );
    if let Some(r) = relates_to {
        x.push_str(&format!("<wsa:RelatesTo>{}</wsa:RelatesTo>", escape(r)));
    }
    if let Some(s) = seq {
        x.push_str(&format!(
            "<wsd:AppSequence InstanceId=\"{}\" MessageNumber=\"{}\"/>",
            s.instance_id, s.message_number
        ));
    }
    x.push_str("</soap:Header><soap:Body>");
    x.push_str(body);
    x.push_str("</soap:Body></soap:Envelope>");
    x
}

fn endpoint_reference(me: &Identity) -> String {
    format!(
        "<wsa:EndpointReference><wsa:Address>{}</wsa:Address></wsa:EndpointReference>",
        escape(&me.endpoint)
    )
}

fn xaddrs(list: &[String]) -> String {
    if list.is_empty() {
        return String::new();
    }
    format!("<wsd:XAddrs>{}</wsd:XAddrs>", escape(&list.join(" ")))
}

/// Hello (multicast at start): the endpoint, its types and where its metadata is.
pub fn hello(me: &Identity, seq: Sequence, xaddr: &[String]) -> String {
    let body = format!(
        "<wsd:Hello>{}<wsd:Types>{TYPES}</wsd:Types>{}\
         <wsd:MetadataVersion>1</wsd:MetadataVersion></wsd:Hello>",
        endpoint_reference(me),
        xaddrs(xaddr)
    );
    envelope(TO_DISCOVERY, ACTION_HELLO, None, Some(seq), &body)
}

/// Bye (multicast at stop).
pub fn bye(me: &Identity, seq: Sequence) -> String {
    let body = format!("<wsd:Bye>{}</wsd:Bye>", endpoint_reference(me));
    envelope(TO_DISCOVERY, ACTION_BYE, None, Some(seq), &body)
}

/// ProbeMatches answering Probe `relates_to`: without XAddrs, as wsdd and Windows answer
/// (the client then Resolves the endpoint).
pub fn probe_matches(me: &Identity, seq: Sequence, relates_to: &str) -> String {
    let body = format!(
        "<wsd:ProbeMatches><wsd:ProbeMatch>{}<wsd:Types>{TYPES}</wsd:Types>\
         <wsd:MetadataVersion>1</wsd:MetadataVersion></wsd:ProbeMatch></wsd:ProbeMatches>",
        endpoint_reference(me)
    );
    envelope(
        TO_ANONYMOUS,
        ACTION_PROBE_MATCHES,
        Some(relates_to),
        Some(seq),
        &body,
    )
}

/// ResolveMatches answering Resolve `relates_to`, with the metadata address `xaddr`.
pub fn resolve_matches(me: &Identity, seq: Sequence, relates_to: &str, xaddr: &[String]) -> String {
    let body = format!(
        "<wsd:ResolveMatches><wsd:ResolveMatch>{}<wsd:Types>{TYPES}</wsd:Types>{}\
         <wsd:MetadataVersion>1</wsd:MetadataVersion></wsd:ResolveMatch></wsd:ResolveMatches>",
        endpoint_reference(me),
        xaddrs(xaddr)
    );
    envelope(
        TO_ANONYMOUS,
        ACTION_RESOLVE_MATCHES,
        Some(relates_to),
        Some(seq),
        &body,
    )
}

/// The GetResponse of the metadata exchange: ThisDevice, ThisModel, and the Relationship
/// whose host is a `pub:Computer` named `NAME/Workgroup:WORKGROUP` (what Explorer shows).
pub fn get_response(me: &Identity, relates_to: &str) -> String {
    let dev = format!("{NS_WSDP}/ThisDevice");
    let model = format!("{NS_WSDP}/ThisModel");
    let rel = format!("{NS_WSDP}/Relationship");
    let body = format!(
        "<wsx:Metadata>\
         <wsx:MetadataSection Dialect=\"{dev}\"><wsdp:ThisDevice>\
         <wsdp:FriendlyName>WSD Device {name}</wsdp:FriendlyName>\
         <wsdp:FirmwareVersion>{version}</wsdp:FirmwareVersion>\
         <wsdp:SerialNumber>1</wsdp:SerialNumber></wsdp:ThisDevice></wsx:MetadataSection>\
         <wsx:MetadataSection Dialect=\"{model}\"><wsdp:ThisModel>\
         <wsdp:Manufacturer>ringshare</wsdp:Manufacturer>\
         <wsdp:ModelName>ringshare</wsdp:ModelName>\
         <pnpx:DeviceCategory>Computers</pnpx:DeviceCategory></wsdp:ThisModel></wsx:MetadataSection>\
         <wsx:MetadataSection Dialect=\"{rel}\">\
         <wsdp:Relationship Type=\"{NS_WSDP}/host\"><wsdp:Host>{epr}\
         <wsdp:Types>pub:Computer</wsdp:Types><wsdp:ServiceId>{endpoint}</wsdp:ServiceId>\
         <pub:Computer>{computer}</pub:Computer></wsdp:Host></wsdp:Relationship>\
         </wsx:MetadataSection></wsx:Metadata>",
        name = escape(&me.name),
        version = env!("CARGO_PKG_VERSION"),
        epr = endpoint_reference(me),
        endpoint = escape(&me.endpoint),
        computer = escape(&me.computer),
    );
    envelope(
        TO_ANONYMOUS,
        ACTION_GET_RESPONSE,
        Some(relates_to),
        None,
        &body,
    )
}

#[cfg(test)]
#[path = "soap_tests.rs"]
mod tests;
