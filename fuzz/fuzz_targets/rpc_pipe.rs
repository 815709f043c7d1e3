//! The named pipes' DCE/RPC layer and the services behind them (lsarpc, srvsvc,
//! samr, wkssvc): what a client writes to a pipe on IPC$, without a connection
//! (`ringshare_core::FuzzPipe`).
//!
//! Input: `[service][u16 LE read size][u16 len][bytes]...`: service 0 lsarpc, 1
//! srvsvc, 2 samr, else wkssvc (each taking NTLMSSP and SPNEGO binds, user u1, as IPC$'s
//! pipes do: the auth trailer and the signed and sealed PDUs are parsed); each piece is one write, NSS's questions answered by a
//! fixed rule, then the output read in pieces of the read size (0 means 4280).
//! Seeds (a BIND and each lsarpc call; a BIND and the samr calls): `cargo test -p
//! ringshare-state -- --ignored write_rpc_pipe_fuzz_corpus write_samr_fuzz_corpus`.
//!
//! Invariants: no panic; a call that asks NSS waits until answered; no read
//! returns more than asked.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringshare_core::FuzzPipe;
use ringshare_fuzz::length_prefixed;

fuzz_target!(|data: &[u8]| {
    let Some((head, rest)) = data.split_first_chunk::<3>() else {
        return;
    };
    let max = match usize::from(u16::from_le_bytes([head[1], head[2]])) {
        0 => 4280,
        n => n,
    };
    let mut pipe = FuzzPipe::new(head[0]);
    for piece in length_prefixed(rest) {
        pipe.write(piece, max);
    }
});
