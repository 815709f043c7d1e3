use super::*;

fn view(states: [NodeState; 3]) -> View {
    View {
        name: "CLUSTER".into(),
        local_node: 1,
        interfaces: (1..=3u16)
            .map(|n| Interface {
                node: n,
                ip: format!("10.0.0.{n}").parse().unwrap(),
                state: states[usize::from(n) - 1],
            })
            .collect(),
        shares: vec!["data".into()],
    }
}

fn register(
    version: u32,
    net: Option<&str>,
    share: Option<&str>,
    ip: Option<&str>,
    ex: bool,
) -> Vec<u8> {
    let mut w = NdrWriter::new();
    w.u32(version);
    let mut s = |v: Option<&str>| match v {
        Some(t) => {
            w.ptr();
            w.string(t);
        }
        None => w.u32(0),
    };
    s(net);
    if ex {
        s(share);
    }
    s(ip);
    s(Some("CLIENT"));
    if ex {
        w.u32(0);
        w.u32(7);
    }
    w.buf
}

fn reply(o: Outcome) -> Vec<u8> {
    match o {
        Outcome::Reply(b) => b,
        h => panic!("{h:?}"),
    }
}

fn werr(b: &[u8]) -> u32 {
    u32::from_le_bytes(b[b.len() - 4..].try_into().unwrap())
}

const UP: NodeState = NodeState::Available;

#[test]
fn register_answers_as_smbtorture_expects_and_unregister_refuses_a_handle_twice() {
    let v = view([UP; 3]);
    let mut regs = Registrations::new([9; 12]);
    let mut ask = |op, stub: Vec<u8>| werr(&reply(regs.call(op, &stub, &v).unwrap()));
    for bad in [0, 1, 123456, u32::MAX, WITNESS_V2] {
        assert_eq!(
            ask(OP_REGISTER, register(bad, None, None, None, false)),
            WERR_REVISION_MISMATCH
        );
    }
    assert_eq!(
        ask(OP_REGISTER_EX, register(WITNESS_V1, None, None, None, true)),
        WERR_REVISION_MISMATCH
    );
    assert_eq!(
        ask(
            OP_REGISTER,
            register(WITNESS_V1, Some(""), None, Some(""), false)
        ),
        WERR_INVALID_PARAMETER
    );
    assert_eq!(
        ask(OP_REGISTER, register(WITNESS_V1, None, None, None, false)),
        WERR_INVALID_PARAMETER
    );
    assert_eq!(
        ask(
            OP_REGISTER,
            register(WITNESS_V1, Some("cluster"), None, None, false)
        ),
        WERR_INVALID_PARAMETER
    );
    assert_eq!(
        ask(
            OP_REGISTER,
            register(WITNESS_V1, Some("cluster"), None, Some("10.9.9.9"), false)
        ),
        WERR_INVALID_STATE
    );
    assert_eq!(
        ask(
            OP_REGISTER_EX,
            register(
                WITNESS_V2,
                Some("cluster.lab"),
                Some("any_invalid_share_name"),
                Some("10.0.0.2"),
                true
            )
        ),
        WERR_INVALID_STATE
    );
    let out = reply(
        regs.call(
            OP_REGISTER_EX,
            &register(WITNESS_V2, Some("cluster"), None, Some("10.0.0.2"), true),
            &v,
        )
        .unwrap(),
    );
    assert_eq!(werr(&out), WERR_OK);
    let handle = &out[..20];
    assert_eq!(
        werr(&reply(regs.call(OP_UNREGISTER, handle, &v).unwrap())),
        WERR_OK
    );
    assert_eq!(
        werr(&reply(regs.call(OP_UNREGISTER, handle, &v).unwrap())),
        WERR_INVALID_PARAMETER
    );
    assert_eq!(
        werr(&reply(regs.call(OP_ASYNC_NOTIFY, handle, &v).unwrap())),
        WERR_NOT_FOUND
    );
    assert_eq!(regs.call(5, &[], &v), Err(FAULT_OP_RANGE));
    assert!(regs.call(OP_REGISTER, &[1, 0], &v).is_err());
}

#[test]
fn the_interface_list_offers_other_nodes_as_witnesses_with_their_state() {
    let v = view([UP, NodeState::Unavailable, NodeState::Drained]);
    let mut regs = Registrations::new([0; 12]);
    let out = reply(regs.call(OP_GET_INTERFACE_LIST, &[], &v).unwrap());
    // pointer, count, pointer, max count, 3 × 552 bytes, WERROR.
    assert_eq!(out.len(), 16 + 3 * 552 + 4);
    let entry = |i: usize| &out[16 + i * 552..16 + (i + 1) * 552];
    assert_eq!(
        &entry(0)[..14],
        "CLUSTER"
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect::<Vec<_>>()
            .as_slice()
    );
    let state = |i: usize| u16::from_le_bytes(entry(i)[524..526].try_into().unwrap());
    let flags = |i: usize| u32::from_le_bytes(entry(i)[548..552].try_into().unwrap());
    assert_eq!(
        (state(0), state(1), state(2)),
        (STATE_AVAILABLE, STATE_UNAVAILABLE, STATE_UNAVAILABLE)
    );
    assert_eq!(
        (flags(0), flags(1)),
        (INFO_IPV4_VALID, INFO_IPV4_VALID | INFO_WITNESS_IF)
    );
    assert_eq!(&entry(1)[528..532], &[10, 0, 0, 2]);
}

#[test]
fn a_held_notify_is_answered_when_the_node_goes_comes_back_and_is_drained() {
    let mut v = view([UP; 3]);
    let mut regs = Registrations::new([1; 12]);
    let out = reply(
        regs.call(
            OP_REGISTER,
            &register(WITNESS_V1, Some("CLUSTER"), None, Some("10.0.0.3"), false),
            &v,
        )
        .unwrap(),
    );
    let handle: [u8; 20] = out[..20].try_into().unwrap();
    assert_eq!(
        regs.call(OP_ASYNC_NOTIFY, &handle, &v).unwrap(),
        Outcome::Hold {
            handle,
            timeout_secs: 0
        }
    );
    assert_eq!(regs.notify(&handle, &v), None);
    v.interfaces[2].state = NodeState::Unavailable;
    let down = regs.notify(&handle, &v).unwrap();
    // type RESOURCE_CHANGE, one message: its length, UNAVAILABLE, "10.0.0.3\0".
    assert_eq!(&down[4..8], &NOTIFY_RESOURCE_CHANGE.to_le_bytes());
    assert_eq!(&down[24..28], &(8 + 18u32).to_le_bytes());
    assert_eq!(&down[28..32], &RESOURCE_UNAVAILABLE.to_le_bytes());
    assert_eq!(regs.notify(&handle, &v), None);
    v.interfaces[2].state = UP;
    let up = regs.notify(&handle, &v).unwrap();
    assert_eq!(&up[28..32], &RESOURCE_AVAILABLE.to_le_bytes());
    v.interfaces[2].state = NodeState::Drained;
    v.interfaces[1].state = NodeState::Unavailable;
    let mv = regs.notify(&handle, &v).unwrap();
    assert_eq!(&mv[4..8], &NOTIFY_CLIENT_MOVE.to_le_bytes());
    // One address: node 1's (node 2 is down), IPv4 and online.
    assert_eq!(&mv[24..36], &[36, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0]);
    assert_eq!(&mv[36..44], &[9, 0, 0, 0, 10, 0, 0, 1]);
    assert_eq!(werr(&timeout_answer()), WERR_TIMEOUT);
}

#[test]
fn an_association_holds_at_most_its_cap_of_registrations() {
    let v = view([UP; 3]);
    let mut regs = Registrations::new([2; 12]);
    let stub = register(WITNESS_V1, Some("CLUSTER"), None, Some("10.0.0.2"), false);
    for _ in 0..REGISTRATIONS_MAX {
        assert_eq!(
            werr(&reply(regs.call(OP_REGISTER, &stub, &v).unwrap())),
            WERR_OK
        );
    }
    assert_eq!(
        werr(&reply(regs.call(OP_REGISTER, &stub, &v).unwrap())),
        WERR_NO_SYSTEM_RESOURCES
    );
    assert_eq!(regs.len(), REGISTRATIONS_MAX);
}
