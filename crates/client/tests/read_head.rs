//! READ replies taken from their head, the data left to the caller
//! (`ClientConn::receive_read_head`), against the real server core.

use crate::support;

use ringshare_client::{ClientError, Reply, READ_HEAD_LEN};
use ringshare_core::SigningPolicy;
use ringshare_wire::consts::Dialect;
use ringshare_wire::{FileId, NtStatus};
use support::{options, Pair, ALL_DIALECTS};

/// A file holding `len` pattern bytes, and the bytes.
fn file_with(p: &mut Pair, len: usize) -> (FileId, Vec<u8>) {
    let file_id = p.open("r.bin");
    let data: Vec<u8> = (0..len)
        .map(|i| (i as u8).wrapping_mul(13) ^ 0x5A)
        .collect();
    p.client.write(2, file_id, 0, &data).unwrap();
    p.pump().unwrap();
    assert!(matches!(p.result(2), Ok(Reply::Write { .. })));
    (file_id, data)
}

#[test]
fn an_unsigned_read_reply_is_taken_from_its_head_in_every_dialect() {
    for d in ALL_DIALECTS {
        let mut p = Pair::ready(options(d), SigningPolicy::IfRequired);
        let (f, data) = file_with(&mut p, 60_000);
        p.read_heads = Some(READ_HEAD_LEN);
        let credits = p.client.credits_available();
        p.client.read(3, f, 0, 60_000).unwrap();
        p.client.read(4, f, 1000, 5000).unwrap();
        p.pump().unwrap();
        assert_eq!(p.heads_taken, 2, "{d:?}");
        assert!(matches!(p.result(3), Ok(Reply::Read { .. })));
        assert_eq!(p.payloads[&3], data);
        assert_eq!(p.payloads[&4], data[1000..6000]);
        assert_eq!(p.client.requests_in_flight(), 0);
        assert!(
            p.client.credits_available() >= credits,
            "credits granted back"
        );
    }
}

#[test]
fn signed_sealed_and_failed_read_replies_go_whole() {
    let mut signed = options(Dialect::SMB3_1_1);
    signed.sign = true;
    let mut sealed = options(Dialect::SMB3_1_1);
    sealed.encrypt = true;
    for opts in [signed, sealed, options(Dialect::SMB3_1_1)] {
        let mut p = Pair::ready(opts, SigningPolicy::IfRequired);
        let (f, data) = file_with(&mut p, 70_000);
        p.read_heads = Some(READ_HEAD_LEN);
        let plain = !p.client.is_signing() && !p.client.is_encrypting();
        p.client.read(3, f, 0, 70_000).unwrap();
        p.pump().unwrap();
        assert_eq!(p.payloads[&3], data);
        assert!(matches!(p.result(3), Ok(Reply::Read { .. })));
        p.client.read(4, f, 1 << 20, 100).unwrap();
        p.pump().unwrap();
        assert_eq!(
            p.result(4).map_err(|e| e.status),
            Err(NtStatus::END_OF_FILE)
        );
        assert_eq!(p.heads_taken, usize::from(plain));
    }
}

#[test]
fn a_read_head_whose_data_runs_past_the_frame_is_left_to_receive_which_refuses_it() {
    let mut p = Pair::ready(options(Dialect::SMB3_0_2), SigningPolicy::IfRequired);
    let (f, _) = file_with(&mut p, 4096);
    p.read_heads = Some(READ_HEAD_LEN);
    p.tamper = Some(Box::new(|frame: &mut Vec<u8>| {
        // DataLength one byte past the frame's end.
        let len = (frame.len() - 80 + 1) as u32;
        frame[68..72].copy_from_slice(&len.to_le_bytes());
    }));
    p.client.read(3, f, 0, 4096).unwrap();
    assert!(matches!(p.pump(), Err(ClientError::Malformed(_))));
    assert_eq!(p.heads_taken, 0);
}

#[test]
fn a_head_shorter_than_the_fixed_part_is_not_taken_and_the_reply_goes_whole() {
    let mut p = Pair::ready(options(Dialect::SMB3_1_1), SigningPolicy::IfRequired);
    let (f, data) = file_with(&mut p, 4096);
    p.read_heads = Some(READ_HEAD_LEN - 1);
    p.client.read(3, f, 0, 4096).unwrap();
    p.pump().unwrap();
    assert_eq!(p.heads_taken, 0);
    assert_eq!(p.payloads[&3], data);
    p.read_heads = Some(READ_HEAD_LEN);
    p.client.read(4, f, 0, 4096).unwrap();
    p.pump().unwrap();
    assert_eq!(p.heads_taken, 1);
    assert_eq!(p.payloads[&4], data);
}
