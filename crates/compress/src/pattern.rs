//! Pattern_V1 ([MS-SMB2] 2.2.42.2.2): a run of one byte value, sent as an
//! 8-byte payload in a chained message.

use ringshare_wire::compression::PatternV1;

use crate::Error;

/// A run is worth a Pattern_V1 payload (16 bytes with its header) when it
/// is at least this long.
pub const MIN_RUN: usize = 64;

/// The byte `data` starts with and how many times it repeats (compared 8
/// bytes at a time: a 1 MiB run of zeros is a READ of a sparse file).
pub fn leading_run(data: &[u8]) -> (u8, usize) {
    let Some(&b) = data.first() else {
        return (0, 0);
    };
    let word = u64::from_ne_bytes([b; 8]);
    let whole = data
        .chunks_exact(8)
        .take_while(|c| {
            u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]) == word
        })
        .count()
        * 8;
    (
        b,
        whole + data[whole..].iter().take_while(|&&x| x == b).count(),
    )
}

/// The byte `data` ends with and how many times it repeats.
pub fn trailing_run(data: &[u8]) -> (u8, usize) {
    let Some(&b) = data.last() else {
        return (0, 0);
    };
    let word = u64::from_ne_bytes([b; 8]);
    let whole = data
        .rchunks_exact(8)
        .take_while(|c| {
            u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]) == word
        })
        .count()
        * 8;
    let rest = &data[..data.len() - whole];
    (
        b,
        whole + rest.iter().rev().take_while(|&&x| x == b).count(),
    )
}

/// The Pattern_V1 payload of a run, when it fits one (at most u32::MAX).
pub fn encode(pattern: u8, repetitions: usize) -> Option<[u8; 8]> {
    let repetitions = u32::try_from(repetitions).ok()?;
    Some(
        PatternV1 {
            pattern,
            repetitions,
        }
        .encode(),
    )
}

/// Expand a Pattern_V1 payload, appending its run to `out`; the run may not
/// take more than `room` bytes.
pub fn decompress(payload: &[u8], room: usize, out: &mut Vec<u8>) -> Result<(), Error> {
    let p = PatternV1::decode(payload).map_err(|_| Error::Corrupt("Pattern_V1 payload"))?;
    let n = p.repetitions as usize;
    if n > room {
        return Err(Error::Overflow);
    }
    out.resize(out.len() + n, p.pattern);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_v1_finds_runs_and_round_trips_its_payload() {
        let data = [7u8, 7, 7, 1, 2, 0, 0];
        assert_eq!(leading_run(&data), (7, 3));
        assert_eq!(trailing_run(&data), (0, 2));
        assert_eq!(leading_run(&[]), (0, 0));
        let p = encode(0xAB, 5000).unwrap();
        assert_eq!(p, [0xAB, 0, 0, 0, 0x88, 0x13, 0, 0]);
        let mut out = Vec::new();
        decompress(&p, 5000, &mut out).unwrap();
        assert_eq!(out, vec![0xAB; 5000]);
        assert_eq!(decompress(&p, 4999, &mut Vec::new()), Err(Error::Overflow));
        assert!(decompress(&p[..7], 5000, &mut Vec::new()).is_err());
    }

    #[test]
    fn runs_found_a_word_at_a_time_match_the_byte_by_byte_count_at_every_length() {
        for len in 0..40 {
            for run in 0..=len {
                let mut data = vec![5u8; len];
                data[..run].fill(9);
                let (b, n) = leading_run(&data);
                let want = data
                    .iter()
                    .take_while(|&&x| Some(&x) == data.first())
                    .count();
                assert_eq!(
                    (b, n),
                    (data.first().copied().unwrap_or(0), want),
                    "{len} {run}"
                );
                data.reverse();
                let (b, n) = trailing_run(&data);
                let want = data
                    .iter()
                    .rev()
                    .take_while(|&&x| Some(&x) == data.last())
                    .count();
                assert_eq!(
                    (b, n),
                    (data.last().copied().unwrap_or(0), want),
                    "{len} {run}"
                );
            }
        }
    }
}
