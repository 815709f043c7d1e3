//! The handshake's level between builds ([`super`]): real sockets on the loopback.
use super::*;

/// Node 2 speaking `level`, answering every call with the call's bytes reversed; its address.
fn acceptor(level: u16) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let me = Identity {
        node: 2,
        secret: Arc::from(&b"the cluster secret"[..]),
        level,
    };
    let handler: Arc<Handler> = Arc::new(|m: &[u8]| Ok(Some(m.iter().rev().copied().collect())));
    serve(
        listener,
        me,
        Arc::new(|n| n == 1),
        handler,
        Arc::new(Stats::default()),
        Arc::new(|_| false),
    )
    .expect("serve");
    addr
}

/// Node 1 speaking `level`, which reads in etcd that node 2 speaks `advertised`.
fn initiator(level: u16, to: SocketAddr, advertised: u16) -> Arc<Peers> {
    let me = Identity {
        node: 1,
        secret: Arc::from(&b"the cluster secret"[..]),
        level,
    };
    Peers::new(
        me,
        Box::new(move |n| (n == 2).then_some((to, advertised))),
        Arc::new(Stats::default()),
    )
}

#[test]
fn nodes_of_either_level_call_each_other_at_the_lower_one() {
    // (initiator, acceptor): new and new, new and a level-1 node, a level-1 node and new.
    for (i, a) in [(2, 2), (2, 1), (1, 2), (1, 1)] {
        let addr = acceptor(a);
        let peers = initiator(i, addr, a);
        assert_eq!(peers.call(2, b"abc"), Ok(b"cba".to_vec()), "{i} to {a}");
    }
}

#[test]
fn a_node_answering_below_the_level_etcd_gives_it_is_refused() {
    let addr = acceptor(1);
    let peers = initiator(2, addr, 2);
    assert_eq!(peers.call(2, b"abc"), Err(NtStatus::FILE_NOT_AVAILABLE));
}

#[test]
fn a_level_one_hello_gets_the_proofs_the_builds_before_levels_compute() {
    // The hello and proofs as e9524d6 wrote them, by hand: version 1, MACs over the nonces
    // and the node numbers only.
    let addr = acceptor(2);
    let secret = b"the cluster secret";
    let mut s = TcpStream::connect(addr).expect("connect");
    let ni = [7u8; 16];
    let mut h = b"RSCL".to_vec();
    h.extend_from_slice(&1u16.to_le_bytes());
    h.extend_from_slice(&1u16.to_le_bytes());
    h.extend_from_slice(&ni);
    s.write_all(&h).expect("hello");
    let mut back = [0u8; HELLO_LEN + MAC_LEN];
    s.read_exact(&mut back).expect("answer");
    assert_eq!(&back[..8], b"RSCL\x01\x00\x02\x00", "version 1, node 2");
    let na: [u8; 16] = back[8..24].try_into().expect("nonce");
    let (one, two) = (1u16.to_le_bytes(), 2u16.to_le_bytes());
    let want = hmac_sha256(secret, &[b"accept", &ni, &na, &one, &two]);
    assert_eq!(&back[24..], &want[..]);
}

/// A call read after its caller closed the connection (its 2 s went while this node was
/// stopped: the call's bytes and the close wait in the socket together) is seen as such; one
/// whose caller still waits is not.
#[test]
fn a_call_whose_caller_went_is_seen_before_it_is_carried_out() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let mut caller = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
    let (mut callee, _) = listener.accept().expect("accept");
    caller.write_all(b"call").expect("send");
    let mut got = [0u8; 4];
    callee.read_exact(&mut got).expect("read");
    assert!(!caller_went(&callee), "the caller waits");
    caller.write_all(b"late").expect("send");
    drop(caller);
    std::thread::sleep(Duration::from_millis(50));
    callee.read_exact(&mut got).expect("read the call");
    assert!(caller_went(&callee), "the caller went");
}
