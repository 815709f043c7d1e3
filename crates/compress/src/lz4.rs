//! LZ4 block format (no frame), through `lz4_flex` (safe encoder and decoder).

use crate::{output_end, Error};

/// Decompress one LZ4 block, appending exactly `expected` bytes to `out`.
/// The output buffer is sized to `expected` first; the decoder never writes
/// past it.
pub fn decompress(input: &[u8], expected: usize, out: &mut Vec<u8>) -> Result<(), Error> {
    let start = out.len();
    let end = output_end(out, expected)?;
    out.resize(end, 0);
    match lz4_flex::block::decompress_into(input, &mut out[start..]) {
        Ok(n) if n == expected => Ok(()),
        Ok(n) => {
            out.truncate(start + n);
            Err(Error::Short { expected, got: n })
        }
        Err(lz4_flex::block::DecompressError::OutputTooSmall { .. }) => {
            out.truncate(start);
            Err(Error::Overflow)
        }
        Err(_) => {
            out.truncate(start);
            Err(Error::Corrupt("LZ4 block"))
        }
    }
}

/// Compress `input` as one LZ4 block, appending it to `out`.
pub fn compress(input: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(
        start + lz4_flex::block::get_maximum_output_size(input.len()),
        0,
    );
    match lz4_flex::block::compress_into(input, &mut out[start..]) {
        Ok(n) => out.truncate(start + n),
        // The buffer is the documented maximum: cannot happen; send nothing
        // smaller rather than panic.
        Err(_) => out.truncate(start),
    }
}
