//! The independent Rust SMB client `smb` (smb-rs 0.12.1) against ringshare
//! with SMB 3.1.1 compression on: it writes a compressible file (text-like,
//! then zeros), reads it back and checks every byte. Between the two runs a
//! relay that counts the frames each way and how many are
//! COMPRESSION_TRANSFORM messages (`0xFC 'SMB'`), so the run shows that
//! compression was used on the wire, not only that the bytes came back.
//!
//! Usage: ringshare-interop-smb-rs HOST:PORT SHARE USER PASSWORD
//! (scripts/interop-smb-rs.sh starts a server and runs it).

use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use smb::{
    Client, ClientConfig, ConnectionConfig, FileAccessMask, FileCreateArgs, ReadAt, UncPath,
    WriteAt,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const MIB: usize = 1 << 20;

/// Frames and compressed frames seen one way, and their bytes.
#[derive(Default)]
struct Seen {
    frames: AtomicU64,
    compressed: AtomicU64,
    bytes: AtomicU64,
}

/// Copy direct-TCP frames from `from` to `to`, counting them.
async fn relay(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    seen: Arc<Seen>,
) -> std::io::Result<()> {
    loop {
        let mut h = [0u8; 4];
        if from.read_exact(&mut h).await.is_err() {
            return Ok(());
        }
        let len = u32::from_be_bytes([0, h[1], h[2], h[3]]) as usize;
        let mut frame = vec![0u8; len];
        from.read_exact(&mut frame).await?;
        seen.frames.fetch_add(1, Ordering::Relaxed);
        seen.bytes.fetch_add(4 + len as u64, Ordering::Relaxed);
        if frame.starts_with(b"\xfcSMB") {
            seen.compressed.fetch_add(1, Ordering::Relaxed);
        }
        to.write_all(&h).await?;
        to.write_all(&frame).await?;
    }
}

/// Text-like data: numbered lines from a few sentences.
fn text(len: usize) -> Vec<u8> {
    const LINES: [&str; 4] = [
        "The quick brown fox jumps over the lazy dog.",
        "Pack my box with five dozen liquor jugs, said the clerk.",
        "How vexingly quick daft zebras jump!",
        "Sphinx of black quartz, judge my vow; then file the report.",
    ];
    let mut out = Vec::with_capacity(len + 80);
    let mut x = 7u32;
    let mut n = 0u32;
    while out.len() < len {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        n += 1;
        out.extend_from_slice(format!("{n:>8} {}\n", LINES[(x >> 16) as usize % 4]).as_bytes());
    }
    out.truncate(len);
    out
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, server, share, user, password] = args.as_slice() else {
        return Err("usage: ringshare-interop-smb-rs HOST:PORT SHARE USER PASSWORD".into());
    };
    // The relay between the client and the server.
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let (up, down) = (Arc::new(Seen::default()), Arc::new(Seen::default()));
    let (u, d, target) = (up.clone(), down.clone(), server.clone());
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = TcpStream::connect(&target).await else {
                return;
            };
            let (cr, cw) = client.into_split();
            let (sr, sw) = server.into_split();
            tokio::spawn(relay(cr, sw, u.clone()));
            tokio::spawn(relay(sr, cw, d.clone()));
        }
    });

    let client = Client::new(ClientConfig {
        connection: ConnectionConfig {
            port: Some(port),
            compression_enabled: true,
            smb2_only_negotiate: true,
            ..Default::default()
        },
        ..Default::default()
    });
    let unc = UncPath::from_str(&format!(r"\\127.0.0.1\{share}"))?;
    client
        .share_connect(&unc, user, password.to_string())
        .await?;
    let mut data = text(4 * MIB);
    data.extend(std::iter::repeat_n(0u8, 2 * MIB));
    let path = unc.with_path("interop-compress.txt");
    let file = client
        .create_file(
            &path,
            &FileCreateArgs::make_overwrite(Default::default(), Default::default()),
        )
        .await?
        .unwrap_file();
    let sent_before = up.bytes.load(Ordering::Relaxed);
    for (i, chunk) in data.chunks(MIB).enumerate() {
        let n = file.write_at(chunk, (i * MIB) as u64).await?;
        assert_eq!(n, chunk.len(), "short write");
    }
    let sent = up.bytes.load(Ordering::Relaxed) - sent_before;
    // smb-rs reads no further than the size the file had when opened.
    file.close().await?;
    let read_only = FileCreateArgs::make_open_existing(FileAccessMask::new().with_generic_read(true));
    let file = client.create_file(&path, &read_only).await?.unwrap_file();
    let got_before = down.bytes.load(Ordering::Relaxed);
    let mut back = vec![0u8; data.len()];
    for (i, chunk) in back.chunks_mut(MIB).enumerate() {
        let mut at = 0;
        while at < chunk.len() {
            let n = file
                .read_at(&mut chunk[at..], (i * MIB + at) as u64)
                .await?;
            if n == 0 {
                return Err(format!("end of file at {}", i * MIB + at).into());
            }
            at += n;
        }
    }
    let got = down.bytes.load(Ordering::Relaxed) - got_before;
    file.close().await?;
    if back != data {
        let at = back.iter().zip(&data).position(|(a, b)| a != b);
        return Err(format!("read back differs from what was written, first at {at:?}").into());
    }
    let (up_c, down_c) = (
        up.compressed.load(Ordering::Relaxed),
        down.compressed.load(Ordering::Relaxed),
    );
    println!(
        "smb-rs 0.12.1 -> ringshare: wrote and read back {} bytes identical; \
         client sent {} compressed frame(s) of {}, {sent} bytes for the writes ({:.3} per data byte); \
         server sent {} compressed frame(s) of {}, {got} bytes for the reads ({:.3} per data byte)",
        data.len(),
        up_c,
        up.frames.load(Ordering::Relaxed),
        sent as f64 / data.len() as f64,
        down_c,
        down.frames.load(Ordering::Relaxed),
        got as f64 / data.len() as f64,
    );
    if up_c == 0 || down_c == 0 {
        return Err("no compressed frame went one way: compression was not used".into());
    }
    Ok(())
}
