//! 8.3 alternate names (MS-FSCC 2.1.5.2.1): clients such as smbclient's `allinfo` and old
//! applications ask for them. A name that is already a valid 8.3 name is its own short name;
//! any other gets a stable hashed one (as Samba's hash mangling does), so no table is kept.

/// Characters allowed in an 8.3 component besides ASCII letters and digits.
const EXTRA: &str = "!#$%&'()-@^_`{}~";

fn valid_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || EXTRA.contains(c)
}

/// Whether `name` is already a valid 8.3 name (case is ignored, as FAT does).
pub fn is_8_3(name: &str) -> bool {
    if name == "." || name == ".." {
        return true;
    }
    let (base, ext) = match name.rsplit_once('.') {
        Some((b, e)) => (b, Some(e)),
        None => (name, None),
    };
    let ok = |s: &str, max: usize| !s.is_empty() && s.len() <= max && s.chars().all(valid_char);
    ok(base, 8) && ext.is_none_or(|e| ok(e, 3))
}

/// The short name for `name`: `name` itself when it is 8.3-valid, else `XXHHHH~1.EXT` where
/// `HHHH` is a hash of the full name (stable across calls and restarts).
pub fn short_name(name: &str) -> String {
    if is_8_3(name) {
        return name.to_ascii_uppercase();
    }
    let clean = |s: &str| -> String {
        s.chars()
            .filter(|c| valid_char(*c))
            .map(|c| c.to_ascii_uppercase())
            .collect()
    };
    let (base, ext) = match name.rsplit_once('.') {
        Some((b, e)) if !b.is_empty() => (clean(b), clean(e)),
        _ => (clean(name), String::new()),
    };
    // FNV-1a over the exact name: different long names rarely share a short name.
    let hash = name.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    let prefix: String = base.chars().take(2).collect();
    let mut out = format!("{prefix}{:04X}~1", hash & 0xFFFF);
    if !ext.is_empty() {
        out.push('.');
        out.extend(ext.chars().take(3));
    }
    out
}

/// Whether `name` has exactly the shape of a short name [`short_name`] makes for a longer one
/// (`XXHHHH~1.EXT`: up to two name characters, four hex digits, `~1`, an extension of up to
/// three), so a lookup that finds no such entry should look for the long name. Names people
/// give files (`~WRL0001.tmp`) do not have it, so their CREATEs never scan the directory.
pub fn looks_generated(name: &str) -> bool {
    let (base, ext) = match name.split_once('.') {
        Some((b, e)) => (b, Some(e)),
        None => (name, None),
    };
    let Some(stem) = base.strip_suffix("~1") else {
        return false;
    };
    let hex_at = stem.len().saturating_sub(4);
    let (prefix, hex) = stem.split_at_checked(hex_at).unwrap_or(("", ""));
    hex.len() == 4
        && hex
            .chars()
            .all(|c| c.is_ascii_digit() || ('A'..='F').contains(&c.to_ascii_uppercase()))
        && prefix.len() <= 2
        && prefix.chars().all(valid_char)
        && ext.is_none_or(|e| (1..=3).contains(&e.len()) && e.chars().all(valid_char))
}

/// The entry of `names` whose short name is `short` (case-insensitive), when exactly one has
/// it and it is not `short` itself.
pub fn long_name_of<'a>(names: impl Iterator<Item = &'a str>, short: &str) -> Option<&'a str> {
    let mut found = None;
    for n in names {
        if !is_8_3(n) && short_name(n).eq_ignore_ascii_case(short) {
            if found.is_some() {
                return None; // Two long names share it: neither is meant.
            }
            found = Some(n);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_short_name_leads_back_to_its_long_name() {
        let long = "GY_FWEJyiipu3B";
        let short = short_name(long);
        assert!(looks_generated(&short));
        assert!(looks_generated(&short.to_ascii_lowercase()));
        assert!(looks_generated(&short_name("a very long name.document")));
        for name in [
            "a.txt",
            "~WRL0001.tmp",
            "~$report.docx",
            "ABCD~2",
            "ABC1234~1",
            "AB12~1.LONG",
        ] {
            assert!(!looks_generated(name), "{name}");
        }
        let names = ["a.txt", long, "other long name.docx"];
        assert_eq!(long_name_of(names.into_iter(), &short), Some(long));
        assert_eq!(
            long_name_of(names.into_iter(), &short.to_ascii_lowercase()),
            Some(long)
        );
        assert_eq!(long_name_of(["a.txt"].into_iter(), &short), None);
    }

    #[test]
    fn valid_names_are_their_own_short_name() {
        assert!(is_8_3("a.txt"));
        assert!(is_8_3("README"));
        assert!(is_8_3("ABCDEFGH.ABC"));
        assert_eq!(short_name("a.txt"), "A.TXT");
    }

    #[test]
    fn long_names_get_a_stable_8_3_name() {
        for n in [
            "a long file name.docx",
            "ABCDEFGHI.txt",
            "x.jpeg",
            "über.txt",
            ".bashrc",
            "a.b.c",
        ] {
            assert!(!is_8_3(n), "{n}");
            let s = short_name(n);
            assert!(is_8_3(&s), "{n} -> {s}");
            assert!(s.contains("~1"), "{s}");
            assert_eq!(s, short_name(n));
        }
        assert_ne!(
            short_name("report 2024.docx"),
            short_name("report 2025.docx")
        );
    }
}
