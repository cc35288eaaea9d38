//! Walking NextEntryOffset-chained lists (FILE_FULL_EA_INFORMATION, FILE_STREAM_INFORMATION,
//! directory entries; MS-FSCC 2.4). Shared so every list gets the same hostile-input checks.

use crate::cursor::to_usize;
use crate::error::DecodeError;

/// Splits `buf` into entries. Each slice starts at an entry and runs to the next entry (or to
/// the end of `buf` for the last one), so the per-entry decoder cannot read into its neighbour.
///
/// Rejects: a NextEntryOffset that is not a multiple of `align`, that points backwards or inside
/// the entry's fixed part (`min_entry`), or past the buffer; more than `max_entries` entries.
/// Every step advances by at least `min_entry` (> 0), so the walk always terminates.
pub(crate) fn split(
    buf: &[u8],
    min_entry: usize,
    align: usize,
    max_entries: usize,
) -> Result<Vec<&[u8]>, DecodeError> {
    let min_entry = min_entry.max(4);
    let mut out = Vec::new();
    let mut pos = 0usize;
    loop {
        let rest = buf.get(pos..).unwrap_or_default();
        if rest.len() < min_entry {
            return Err(DecodeError::Truncated {
                need: pos + min_entry,
                have: buf.len(),
            });
        }
        if out.len() >= max_entries {
            return Err(DecodeError::TooLong {
                field: "entries",
                len: out.len() + 1,
                limit: max_entries,
            });
        }
        let next = match rest.get(..4) {
            Some(&[a, b, c, d]) => to_usize(u32::from_le_bytes([a, b, c, d])),
            _ => {
                return Err(DecodeError::Truncated {
                    need: pos + 4,
                    have: buf.len(),
                });
            }
        };
        if next == 0 {
            out.push(rest);
            return Ok(out);
        }
        if next < min_entry || next % align != 0 || next >= rest.len() {
            return Err(DecodeError::InvalidField {
                field: "NextEntryOffset",
            });
        }
        out.push(rest.get(..next).unwrap_or_default());
        pos += next;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn rejects_loops_overruns_and_misalignment() {
        // A self-pointing entry would loop forever if 0 < next < min were allowed.
        let mut b = vec![0u8; 16];
        b[0] = 4;
        assert!(split(&b, 8, 4, 100).is_err());
        b[0] = 16; // points exactly at the end: no room for the next entry
        assert!(split(&b, 8, 4, 100).is_err());
        b[0] = 10; // misaligned
        assert!(split(&b, 8, 4, 100).is_err());
        b[0] = 8;
        let e = split(&b, 8, 4, 100).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].len(), 8);
        assert_eq!(e[1].len(), 8);
        assert!(split(&b, 8, 4, 1).is_err());
        assert!(split(&b[..7], 8, 4, 100).is_err());
    }
}
