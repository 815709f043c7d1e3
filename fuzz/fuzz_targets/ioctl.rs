//! IOCTL/FSCTL payloads ([MS-SMB2] 2.2.31.x, [MS-FSCC] 2.3): the inputs the
//! server decodes and the outputs the client decodes, with round trips.
//! Input: [u32 LE CtlCode][payload]. Block cloning's
//! SMB2_DUPLICATE_EXTENTS_DATA(_EX) too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringshare_wire::dup_extents::DuplicateExtents;
use ringshare_wire::ioctl::{
    FileAllocatedRangeBuffer, FileZeroDataInformation, NetworkInterfaceInfo, SrvCopychunkCopy,
    SrvCopychunkResponse, SrvRequestResumeKeyResponse, ValidateNegotiateInfoRequest,
    ValidateNegotiateInfoResponse,
};

macro_rules! round_trip {
    ($ty:ty, $buf:expr) => {{
        if let Ok(first) = <$ty>::decode($buf) {
            let mut out = Vec::new();
            first.encode(&mut out);
            assert_eq!(
                <$ty>::decode(&out).as_ref(),
                Ok(&first),
                "{} round trip",
                stringify!($ty)
            );
        }
    }};
}

const FSCTL_VALIDATE_NEGOTIATE_INFO: u32 = 0x0014_0204;
const FSCTL_SRV_COPYCHUNK: u32 = 0x0014_40F2;
const FSCTL_SRV_COPYCHUNK_WRITE: u32 = 0x0014_80F2;
const FSCTL_SRV_REQUEST_RESUME_KEY: u32 = 0x0014_0078;
const FSCTL_QUERY_NETWORK_INTERFACE_INFO: u32 = 0x0014_01FC;
const FSCTL_QUERY_ALLOCATED_RANGES: u32 = 0x0009_40CF;
const FSCTL_SET_ZERO_DATA: u32 = 0x0009_80C8;
const FSCTL_DUPLICATE_EXTENTS_TO_FILE: u32 = 0x0009_8344;
const FSCTL_DUPLICATE_EXTENTS_TO_FILE_EX: u32 = 0x0009_83E8;

fuzz_target!(|data: &[u8]| {
    let Some((ctl, p)) = data.split_first_chunk::<4>() else {
        return;
    };
    match u32::from_le_bytes(*ctl) {
        FSCTL_VALIDATE_NEGOTIATE_INFO => {
            round_trip!(ValidateNegotiateInfoRequest, p);
            round_trip!(ValidateNegotiateInfoResponse, p);
        }
        FSCTL_SRV_COPYCHUNK | FSCTL_SRV_COPYCHUNK_WRITE => {
            if let Ok(c) = SrvCopychunkCopy::decode(p, 256) {
                assert!(c.chunks.len() <= 256, "chunk count past the limit");
                let mut out = Vec::new();
                c.encode(&mut out);
                assert_eq!(SrvCopychunkCopy::decode(&out, 256).as_ref(), Ok(&c));
            }
            round_trip!(SrvCopychunkResponse, p);
        }
        FSCTL_SRV_REQUEST_RESUME_KEY => round_trip!(SrvRequestResumeKeyResponse, p),
        FSCTL_QUERY_NETWORK_INTERFACE_INFO => {
            if let Ok(list) = NetworkInterfaceInfo::decode_list(p) {
                let mut out = Vec::new();
                NetworkInterfaceInfo::encode_list(&list, &mut out);
                assert_eq!(NetworkInterfaceInfo::decode_list(&out).as_ref(), Ok(&list));
            }
        }
        FSCTL_QUERY_ALLOCATED_RANGES => {
            round_trip!(FileAllocatedRangeBuffer, p);
            let _ = FileAllocatedRangeBuffer::decode_list(p);
        }
        FSCTL_SET_ZERO_DATA => round_trip!(FileZeroDataInformation, p),
        FSCTL_DUPLICATE_EXTENTS_TO_FILE => round_trip!(DuplicateExtents, p),
        FSCTL_DUPLICATE_EXTENTS_TO_FILE_EX => {
            if let Ok(d) = DuplicateExtents::decode_ex(p) {
                let mut out = Vec::new();
                d.encode_ex(&mut out);
                assert_eq!(DuplicateExtents::decode_ex(&out).as_ref(), Ok(&d));
            }
        }
        _ => {}
    }
});
