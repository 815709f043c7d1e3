use super::*;

fn me() -> Identity {
    Identity::new("RSTEST", "lab", None, 1_764_000_000)
}

/// A Probe as wsdd's discovery mode and Windows send it (prefixes as they write them).
const PROBE_DEVICE: &str = r#"<?xml version="1.0" encoding="utf-8"?><soap:Envelope xmlns:soap="http://www.w3.org/2003/05/soap-envelope" xmlns:wsa="http://schemas.xmlsoap.org/ws/2004/08/addressing" xmlns:wsd="http://schemas.xmlsoap.org/ws/2005/04/discovery" xmlns:wsx="http://schemas.xmlsoap.org/ws/2004/09/mex" xmlns:wsdp="http://schemas.xmlsoap.org/ws/2006/02/devprof" xmlns:pnpx="http://schemas.microsoft.com/windows/pnpx/2005/10" xmlns:pub="http://schemas.microsoft.com/windows/pub/2005/07"><soap:Header><wsa:To>urn:schemas-xmlsoap-org:ws:2005:04:discovery</wsa:To><wsa:Action>http://schemas.xmlsoap.org/ws/2005/04/discovery/Probe</wsa:Action><wsa:MessageID>urn:uuid:0a6dc791-2be6-11ef-8e58-0242ac110002</wsa:MessageID></soap:Header><soap:Body><wsd:Probe><wsd:Types>wsdp:Device</wsd:Types></wsd:Probe></soap:Body></soap:Envelope>"#;

/// The same Probe with other prefixes, and asking for `pub:Computer` declared on the element.
const PROBE_COMPUTER: &str = r#"<s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope" xmlns:a="http://schemas.xmlsoap.org/ws/2004/08/addressing">
  <s:Header>
    <a:To>urn:schemas-xmlsoap-org:ws:2005:04:discovery</a:To>
    <a:Action>http://schemas.xmlsoap.org/ws/2005/04/discovery/Probe</a:Action>
    <a:MessageID>urn:uuid:7c9e1a4e-0000-4000-8000-000000000001</a:MessageID>
  </s:Header>
  <s:Body><d:Probe xmlns:d="http://schemas.xmlsoap.org/ws/2005/04/discovery"><d:Types xmlns:p="http://schemas.microsoft.com/windows/pub/2005/07">p:Computer</d:Types></d:Probe></s:Body>
</s:Envelope>"#;

fn probe_with_body(body: &str) -> String {
    format!(
        "<soap:Envelope xmlns:soap=\"{NS_SOAP}\" xmlns:wsa=\"{NS_WSA}\" xmlns:wsd=\"{NS_WSD}\" \
         xmlns:wsdp=\"{NS_WSDP}\" xmlns:x=\"urn:other\"><soap:Header>\
         <wsa:Action>{ACTION_PROBE}</wsa:Action><wsa:MessageID>urn:uuid:1</wsa:MessageID>\
         </soap:Header><soap:Body>{body}</soap:Body></soap:Envelope>"
    )
}

fn resolve_for(address: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><soap:Envelope xmlns:soap=\"{NS_SOAP}\" \
         xmlns:wsa=\"{NS_WSA}\" xmlns:wsd=\"{NS_WSD}\"><soap:Header>\
         <wsa:To>{TO_DISCOVERY}</wsa:To><wsa:Action>{ACTION_RESOLVE}</wsa:Action>\
         <wsa:MessageID>urn:uuid:2b0c3f52-2be6-11ef-8e58-0242ac110002</wsa:MessageID>\
         </soap:Header><soap:Body><wsd:Resolve><wsa:EndpointReference>\
         <wsa:Address>{address}</wsa:Address></wsa:EndpointReference></wsd:Resolve>\
         </soap:Body></soap:Envelope>"
    )
}

/// A metadata Get as wsdd sends it over HTTP (an empty body).
fn get_for(endpoint: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><soap:Envelope xmlns:soap=\"{NS_SOAP}\" \
         xmlns:wsa=\"{NS_WSA}\"><soap:Header><wsa:To>{endpoint}</wsa:To>\
         <wsa:Action>{ACTION_GET}</wsa:Action>\
         <wsa:MessageID>urn:uuid:3c1d4a63-2be6-11ef-8e58-0242ac110002</wsa:MessageID>\
         <wsa:ReplyTo><wsa:Address>{TO_ANONYMOUS}</wsa:Address></wsa:ReplyTo>\
         <wsa:From><wsa:Address>urn:uuid:00000000-0000-0000-0000-000000000001</wsa:Address>\
         </wsa:From></soap:Header><soap:Body/></soap:Envelope>"
    )
}

#[test]
fn the_endpoint_uuid_is_the_name_based_uuid_python_derives() {
    // python3 -c "import uuid; print(uuid.uuid5(uuid.NAMESPACE_DNS, 'rstest'))"
    assert_eq!(
        uuid_v5_dns("www.example.com"),
        "2ed6657d-e927-568b-95e1-2665a8aea6a2"
    );
    assert_eq!(me().uuid, "46f4fbbc-f74e-55f9-866a-86d9ea2d53c0");
    assert_eq!(
        me().endpoint,
        "urn:uuid:46f4fbbc-f74e-55f9-866a-86d9ea2d53c0"
    );
    assert_eq!(me().computer, "RSTEST/Workgroup:LAB");
    let member = Identity::new("RSTEST", "AD", Some("ad.example.com"), 1);
    assert_eq!(member.computer, "rstest/Domain:ad.example.com");
    let a = new_message_id();
    assert!(a.starts_with("urn:uuid:") && a.len() == 45 && a != new_message_id());
}

#[test]
fn a_probe_for_a_device_or_a_computer_matches_whatever_the_prefixes() {
    let m = read(PROBE_DEVICE.as_bytes(), &me()).unwrap();
    assert_eq!(m.id, "urn:uuid:0a6dc791-2be6-11ef-8e58-0242ac110002");
    assert_eq!(m.action, ACTION_PROBE);
    assert_eq!(m.request, Request::Probe { matches: true });
    let m = read(PROBE_COMPUTER.as_bytes(), &me()).unwrap();
    assert_eq!(m.request, Request::Probe { matches: true });
    // No types: any device matches.
    let any = probe_with_body("<wsd:Probe/>");
    assert_eq!(
        read(any.as_bytes(), &me()).unwrap().request,
        Request::Probe { matches: true }
    );
}

#[test]
fn a_probe_for_other_types_or_with_scopes_does_not_match() {
    for body in [
        "<wsd:Probe><wsd:Types>x:Printer</wsd:Types></wsd:Probe>",
        "<wsd:Probe><wsd:Types>wsdp:Device x:Printer</wsd:Types></wsd:Probe>",
        "<wsd:Probe><wsd:Types>unbound:Device</wsd:Types></wsd:Probe>",
        "<wsd:Probe><wsd:Types>wsdp:Device</wsd:Types><wsd:Scopes>ldap:///ou=x</wsd:Scopes></wsd:Probe>",
        "<x:Probe/>",
    ] {
        let m = read(probe_with_body(body).as_bytes(), &me()).unwrap();
        assert_eq!(m.request, Request::Probe { matches: false }, "{body}");
    }
}

#[test]
fn a_resolve_is_ours_only_for_our_endpoint() {
    let me = me();
    let m = read(resolve_for(&me.endpoint).as_bytes(), &me).unwrap();
    assert_eq!(m.request, Request::Resolve { ours: true });
    let other = resolve_for("urn:uuid:46f4fbbc-f74e-55f9-866a-000000000000");
    assert_eq!(
        read(other.as_bytes(), &me).unwrap().request,
        Request::Resolve { ours: false }
    );
}

#[test]
fn a_get_is_read_and_its_response_names_the_computer_and_workgroup() {
    let me = me();
    let m = read(get_for(&me.endpoint).as_bytes(), &me).unwrap();
    assert_eq!(m.request, Request::Get);
    let answer = get_response(&me, &m.id);
    let doc = xml::parse(answer.as_bytes()).expect("well-formed");
    let env = doc.root();
    let header = doc.child(env, NS_SOAP, "Header").unwrap();
    assert_eq!(
        doc.child(header, NS_WSA, "Action").unwrap().text,
        ACTION_GET_RESPONSE
    );
    assert_eq!(doc.child(header, NS_WSA, "RelatesTo").unwrap().text, m.id);
    let body = doc.child(env, NS_SOAP, "Body").unwrap();
    let meta = doc.child(body, NS_WSX, "Metadata").unwrap();
    let dialects: Vec<&str> = meta
        .children
        .iter()
        .map(|&i| doc.elements[i].attrs[0].1.as_str())
        .collect();
    assert_eq!(
        dialects,
        [
            format!("{NS_WSDP}/ThisDevice"),
            format!("{NS_WSDP}/ThisModel"),
            format!("{NS_WSDP}/Relationship")
        ]
    );
    let rel = doc.elements[meta.children[2]].clone();
    let host = doc
        .path(&rel, &[(NS_WSDP, "Relationship"), (NS_WSDP, "Host")])
        .unwrap();
    assert_eq!(
        doc.child(host, NS_PUB, "Computer").unwrap().text,
        "RSTEST/Workgroup:LAB"
    );
    assert_eq!(
        doc.child(host, NS_WSDP, "Types").unwrap().qnames(),
        [(NS_PUB.to_string(), "Computer".to_string())]
    );
    assert_eq!(
        doc.child(host, NS_WSDP, "ServiceId").unwrap().text,
        me.endpoint
    );
}

/// The value of `{ns}local` under the body's first element.
fn body_field(text: &str, path: &[(&str, &str)]) -> Option<String> {
    let doc = xml::parse(text.as_bytes())?;
    let body = doc.child(doc.root(), NS_SOAP, "Body")?;
    doc.path(body, path).map(|e| e.text.clone())
}

#[test]
fn hello_bye_and_the_matches_carry_the_endpoint_sequence_and_addresses() {
    let me = me();
    let seq = Sequence {
        instance_id: me.instance_id,
        message_number: 7,
    };
    let xaddr = vec![me.xaddr("10.1.2.3".parse().unwrap(), 5357)];
    assert_eq!(
        xaddr[0],
        "http://10.1.2.3:5357/46f4fbbc-f74e-55f9-866a-86d9ea2d53c0"
    );
    assert_eq!(
        me.xaddr("fe80::1".parse().unwrap(), 5357),
        "http://[fe80::1]:5357/46f4fbbc-f74e-55f9-866a-86d9ea2d53c0"
    );
    let epr = [(NS_WSA, "EndpointReference"), (NS_WSA, "Address")];
    let h = hello(&me, seq, &xaddr);
    assert!(h.contains("<wsd:AppSequence InstanceId=\"1764000000\" MessageNumber=\"7\"/>"));
    assert!(h.contains(&format!("<wsa:To>{TO_DISCOVERY}</wsa:To>")));
    let hello_epr = [(NS_WSD, "Hello"), epr[0], epr[1]];
    assert_eq!(body_field(&h, &hello_epr).unwrap(), me.endpoint);
    assert_eq!(
        body_field(&h, &[(NS_WSD, "Hello"), (NS_WSD, "XAddrs")]).unwrap(),
        xaddr[0]
    );
    let b = bye(&me, seq);
    assert_eq!(
        body_field(&b, &[(NS_WSD, "Bye"), epr[0], epr[1]]).unwrap(),
        me.endpoint
    );
    let pm = probe_matches(&me, seq, "urn:uuid:probe");
    assert!(pm.contains("<wsa:RelatesTo>urn:uuid:probe</wsa:RelatesTo>"));
    let m = [(NS_WSD, "ProbeMatches"), (NS_WSD, "ProbeMatch")];
    assert_eq!(
        body_field(&pm, &[m[0], m[1], (NS_WSD, "Types")]).unwrap(),
        "wsdp:Device pub:Computer"
    );
    assert!(body_field(&pm, &[m[0], m[1], (NS_WSD, "XAddrs")]).is_none());
    let rm = resolve_matches(&me, seq, "urn:uuid:resolve", &xaddr);
    let r = [(NS_WSD, "ResolveMatches"), (NS_WSD, "ResolveMatch")];
    assert_eq!(
        body_field(&rm, &[r[0], r[1], (NS_WSD, "XAddrs")]).unwrap(),
        xaddr[0]
    );
    assert_eq!(
        body_field(&rm, &[r[0], r[1], epr[0], epr[1]]).unwrap(),
        me.endpoint
    );
    // Our own messages read back as messages (and are not requests).
    assert_eq!(read(h.as_bytes(), &me).unwrap().request, Request::Other);
}

#[test]
fn a_name_with_markup_is_escaped_in_the_answers() {
    let odd = Identity::new("A<B&C", "W>G", None, 1);
    let g = get_response(&odd, "urn:uuid:x");
    assert!(xml::parse(g.as_bytes()).is_some());
    assert!(g.contains("<pub:Computer>A&lt;B&amp;C/Workgroup:W&gt;G</pub:Computer>"));
}

#[test]
fn messages_that_are_not_soap_envelopes_are_refused() {
    let me = me();
    for bad in [
        "<a/>".to_string(),
        PROBE_DEVICE
            .replace("<wsa:MessageID>", "<wsa:Other>")
            .replace("</wsa:MessageID>", "</wsa:Other>"),
        PROBE_DEVICE.replace("http://www.w3.org/2003/05/soap-envelope", "urn:soap11"),
        PROBE_DEVICE[..PROBE_DEVICE.len() / 2].to_string(),
    ] {
        assert!(read(bad.as_bytes(), &me).is_none(), "{bad}");
    }
}
