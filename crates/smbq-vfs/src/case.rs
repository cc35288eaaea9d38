//! Case-insensitive name matching for Windows clients.

/// Unicode simple lowercase of one character. `char::to_lowercase` gives the full mapping,
/// which differs from the simple one only where it expands (U+0130 -> "i\u{307}"); the
/// simple mapping is its first character.
fn simple_lower(c: char) -> char {
    c.to_lowercase().next().unwrap_or(c)
}

/// Whether `a` and `b` are equal after Unicode simple lowercase, character by character
/// (no final-sigma context, no expansions such as "ß" -> "ss").
pub fn simple_lowercase_eq(a: &str, b: &str) -> bool {
    let mut ai = a.chars().map(simple_lower);
    let mut bi = b.chars().map(simple_lower);
    loop {
        match (ai.next(), bi.next()) {
            (None, None) => return true,
            (Some(x), Some(y)) if x == y => {}
            _ => return false,
        }
    }
}

/// The one name in `names` that matches `wanted` ignoring case, or `None` when none or
/// several do.
pub(crate) fn unique_match<'a, I>(names: I, wanted: &str) -> Option<String>
where
    I: IntoIterator<Item = &'a str>,
{
    let mut found: Option<&str> = None;
    for n in names {
        if simple_lowercase_eq(n, wanted) {
            if found.is_some() {
                return None;
            }
            found = Some(n);
        }
    }
    found.map(str::to_owned)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn matches_ignoring_case() {
        assert!(simple_lowercase_eq("ReadMe.TXT", "readme.txt"));
        assert!(simple_lowercase_eq("ÄÖÜ", "äöü"));
        assert!(simple_lowercase_eq("ΣΊΣΥΦΟΣ", "σίσυφοσ"));
        // Simple mapping of U+0130 is plain 'i', so lengths stay equal.
        assert!(simple_lowercase_eq("\u{130}", "i"));
        assert!(!simple_lowercase_eq("straße", "STRASSE"));
        assert!(!simple_lowercase_eq("abc", "abcd"));
        assert!(!simple_lowercase_eq("abcd", "abc"));
    }

    #[test]
    fn unique_match_refuses_ambiguity() {
        assert_eq!(
            unique_match(["a.txt", "B.txt"], "A.TXT"),
            Some("a.txt".to_owned())
        );
        assert_eq!(unique_match(["a.txt", "A.txt"], "a.TXT"), None);
        assert_eq!(unique_match(["x"], "y"), None);
    }
}
