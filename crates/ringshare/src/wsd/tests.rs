use super::*;
use std::io::{Read, Write};
use std::net::TcpStream;

use ringshare_engine::net::InterfaceAddr;

fn addr(name: &str, index: u32, a: &str, prefix: u8, loopback: bool) -> InterfaceAddr {
    InterfaceAddr {
        name: name.into(),
        index,
        addr: a.parse().unwrap(),
        prefix_len: prefix,
        up: true,
        loopback,
        speed_mbps: None,
    }
}

fn machine() -> Vec<InterfaceAddr> {
    vec![
        addr("lo", 1, "127.0.0.1", 8, true),
        addr("eth0", 2, "192.168.1.5", 24, false),
        addr("eth0", 2, "2001:db8::5", 64, false),
        addr("eth0", 2, "fe80::5", 64, false),
        addr("eth1", 3, "10.0.0.5", 8, false),
    ]
}

#[test]
fn the_server_is_announced_on_the_interfaces_it_is_reached_on() {
    let all = machine();
    let wild: Vec<SocketAddr> = vec!["0.0.0.0:445".parse().unwrap()];
    let every = links(&all, &[], &wild);
    assert_eq!(
        every.iter().map(|l| l.name.as_str()).collect::<Vec<_>>(),
        ["eth0", "eth1"]
    );
    assert_eq!(every[0].v4, Some(("192.168.1.5".parse().unwrap(), 24)));
    assert_eq!(
        every[0].v6,
        Some(("fe80::5".parse().unwrap(), 64)),
        "link-local preferred"
    );
    let named = links(&all, &["eth1".into()], &wild);
    assert_eq!(named.len(), 1);
    assert_eq!(named[0].name, "eth1");
    let by_net = links(&all, &["192.168.1.0/24".into()], &wild);
    assert_eq!(by_net[0].name, "eth0");
    let by_addr = links(&all, &["10.0.0.5".into()], &wild);
    assert_eq!(by_addr[0].name, "eth1");
    // A server listening on loopback only is not announced; on one address, there only.
    assert!(links(&all, &[], &["127.0.0.1:445".parse().unwrap()]).is_empty());
    let one = links(&all, &[], &["10.0.0.5:445".parse().unwrap()]);
    assert_eq!((one.len(), one[0].name.as_str()), (1, "eth1"));
    assert_eq!(
        link_of(&every, "10.9.9.9:3702".parse().unwrap())
            .unwrap()
            .name,
        "eth1"
    );
    assert_eq!(
        link_of(&every, "[fe80::99%2]:3702".parse().unwrap())
            .unwrap()
            .name,
        "eth0"
    );
}

/// A state answering on a loopback socket, and a client socket.
fn loopback_state() -> (State, UdpSocket) {
    let me = Identity::new("RSUNIT", "LAB", None, 42);
    let lo = Link {
        name: "lo".into(),
        index: 1,
        v4: Some(("127.0.0.1".parse().unwrap(), 8)),
        v6: None,
    };
    let server = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut st = open(me, Vec::new());
    st.links = vec![lo];
    st.v4 = Some(server);
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    (st, client)
}

fn probe(id: &str) -> String {
    format!(
        "<s:Envelope xmlns:s=\"{}\" xmlns:a=\"{}\" xmlns:d=\"{}\" xmlns:p=\"{}\"><s:Header>\
         <a:Action>{}</a:Action><a:MessageID>{id}</a:MessageID></s:Header><s:Body><d:Probe>\
         <d:Types>p:Device</d:Types></d:Probe></s:Body></s:Envelope>",
        soap::NS_SOAP,
        soap::NS_WSA,
        soap::NS_WSD,
        soap::NS_WSDP,
        soap::ACTION_PROBE
    )
}

fn answer(client: &UdpSocket) -> Option<String> {
    let mut buf = [0u8; 65_536];
    let n = client.recv(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

#[test]
fn a_probe_is_answered_once_and_hostile_datagrams_are_dropped() {
    let (mut st, client) = loopback_state();
    let from = client.local_addr().unwrap();
    let p = probe("urn:uuid:p1");
    st.datagram(p.as_bytes(), from, false);
    let a = answer(&client).expect("ProbeMatches");
    assert!(a.contains(soap::ACTION_PROBE_MATCHES) && a.contains("urn:uuid:p1"));
    assert!(a.contains("MessageNumber=\"1\""));
    st.datagram(p.as_bytes(), from, false);
    assert!(
        answer(&client).is_none(),
        "a repeated message id is dropped"
    );
    for junk in [
        vec![0u8; MAX_DATAGRAM + 1],
        b"\x00\x01garbage".to_vec(),
        p.as_bytes()[..p.len() / 2].to_vec(),
        format!("<a>{}</a>", "<b>".repeat(10_000)).into_bytes(),
        Vec::new(),
    ] {
        st.datagram(&junk, from, false);
    }
    assert!(answer(&client).is_none());
    st.datagram(probe("urn:uuid:p2").as_bytes(), from, false);
    assert!(answer(&client).is_some_and(|a| a.contains("MessageNumber=\"2\"")));
    let resolve = probe("urn:uuid:r1")
        .replace(soap::ACTION_PROBE, soap::ACTION_RESOLVE)
        .replace(
            "<d:Probe><d:Types>p:Device</d:Types></d:Probe>",
            &format!(
                "<d:Resolve><a:EndpointReference><a:Address>{}</a:Address>\
                 </a:EndpointReference></d:Resolve>",
                st.me.endpoint
            ),
        );
    st.datagram(resolve.as_bytes(), from, false);
    let r = answer(&client).expect("ResolveMatches");
    assert!(r.contains(&format!(
        "<wsd:XAddrs>http://127.0.0.1:5357/{}</wsd:XAddrs>",
        st.me.uuid
    )));
}

/// `request` sent to a metadata server on loopback: the status line and the body.
fn http_exchange(request: &[u8]) -> (String, String) {
    let me = Identity::new("RSUNIT", "LAB", None, 42);
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (conn, peer) = l.accept().unwrap();
    http::serve(conn, peer, &me, &Arc::new(http::Limits::default()));
    let _ = c.write_all(request);
    let _ = c.shutdown(std::net::Shutdown::Write);
    let mut out = String::new();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = c.read_to_string(&mut out);
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    (
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    )
}

fn get_request(path: &str, content_type: &str) -> Vec<u8> {
    let body = format!(
        "<soap:Envelope xmlns:soap=\"{}\" xmlns:wsa=\"{}\"><soap:Header>\
         <wsa:Action>{}</wsa:Action><wsa:MessageID>urn:uuid:g1</wsa:MessageID></soap:Header>\
         <soap:Body/></soap:Envelope>",
        soap::NS_SOAP,
        soap::NS_WSA,
        soap::ACTION_GET
    );
    format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[test]
fn the_metadata_is_served_only_for_a_get_posted_to_the_endpoint_path() {
    let uuid = Identity::new("RSUNIT", "LAB", None, 42).uuid;
    let path = format!("/{uuid}");
    let (status, body) = http_exchange(&get_request(&path, "application/soap+xml; charset=utf-8"));
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(body.contains("<pub:Computer>RSUNIT/Workgroup:LAB</pub:Computer>"));
    assert!(body.contains("<wsa:RelatesTo>urn:uuid:g1</wsa:RelatesTo>"));
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (get_request("/other", "application/soap+xml"), "404"),
        (format!("GET {path} HTTP/1.1\r\n\r\n").into_bytes(), "400"),
        (get_request(&path, "text/xml"), "400"),
        (
            format!("POST {path} HTTP/1.1\r\nContent-Type: application/soap+xml\r\n\r\n")
                .into_bytes(),
            "400",
        ),
        (
            format!(
                "POST {path} HTTP/1.1\r\nContent-Type: application/soap+xml\r\n\
                 Content-Length: 999999999\r\n\r\n"
            )
            .into_bytes(),
            "400",
        ),
        (
            format!(
                "POST {path} HTTP/1.1\r\nContent-Type: application/soap+xml\r\n\
                 Content-Length: 5\r\n\r\njunk!"
            )
            .into_bytes(),
            "400",
        ),
        (vec![b'x'; http::MAX_HEADERS + 100], "400"),
        (b"\x16\x03\x01 binary".to_vec(), "400"),
    ];
    for (req, want) in cases {
        let (status, _) = http_exchange(&req);
        assert!(
            status.starts_with(&format!("HTTP/1.1 {want}")),
            "{:?}: {status}",
            String::from_utf8_lossy(&req[..req.len().min(60)])
        );
    }
}

#[test]
fn a_server_not_on_port_445_or_with_wsd_no_is_not_announced() {
    let on =
        crate::config::parse_str("[s]\npath = /tmp\n", std::path::Path::new("t.conf")).unwrap();
    assert!(start(&on, &["0.0.0.0:4450".parse().unwrap()]).is_none());
    assert!(start(&on, &["127.0.0.1:445".parse().unwrap()]).is_none());
    let off = crate::config::parse_str(
        "[global]\nwsd = no\n[s]\npath = /tmp\n",
        std::path::Path::new("t.conf"),
    )
    .unwrap();
    assert!(start(&off, &["0.0.0.0:445".parse().unwrap()]).is_none());
}
