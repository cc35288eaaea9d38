//! QUERY_DIRECTORY search patterns (MS-SMB2 3.3.5.18 FileName, matched as MS-FSA 2.1.4.4
//! IsNameInExpression / FsRtlIsNameInExpression does), case-insensitively:
//!
//! - `*` any run of characters, `?` exactly one character;
//! - `<` DOS_STAR: any run of characters that does not consume the name's final `.`;
//! - `>` DOS_QM: one character other than `.`, or nothing when the name is at a `.` or its end;
//! - `"` DOS_DOT: a `.`, or nothing at the end of the name.
//!
//! The matcher runs the pattern as an NFA over the name (a set of pattern positions, advanced one
//! name character at a time), so the work is at most pattern length x name length whatever the
//! pattern; there is no backtracking and no recursion.

/// A compiled pattern; compile once per QUERY_DIRECTORY and match every name against it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern {
    tokens: Vec<Token>,
    match_all: bool,
    /// Name characters the pattern consumes at least (literals and `?`).
    min_len: usize,
    /// Literals compare as they are ([`Pattern::case_sensitive`]), not upper-cased.
    exact_case: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token {
    Lit(char),
    Any,
    Star,
    DosStar,
    DosQm,
    DosDot,
}

/// Simple (one-to-one) uppercase, which is what the Windows upcase table does; characters
/// whose uppercase is several characters (like `ß`) compare as themselves.
fn upcase(c: char) -> char {
    let mut up = c.to_uppercase();
    match (up.next(), up.next()) {
        (Some(u), None) => u,
        _ => c,
    }
}

impl Pattern {
    pub fn new(pattern: &str) -> Self {
        Self::build(pattern, false)
    }

    /// The same wildcards, with literals compared case-sensitively: a POSIX directory open's
    /// listing (the SMB3 POSIX extensions, crate::posix).
    pub fn case_sensitive(pattern: &str) -> Self {
        Self::build(pattern, true)
    }

    fn build(pattern: &str, exact_case: bool) -> Self {
        let fold = |c: char| if exact_case { c } else { upcase(c) };
        let mut tokens: Vec<Token> = Vec::with_capacity(pattern.len());
        for c in pattern.chars() {
            let t = match c {
                '*' => Token::Star,
                '?' => Token::Any,
                '<' => Token::DosStar,
                '>' => Token::DosQm,
                '"' => Token::DosDot,
                c => Token::Lit(fold(c)),
            };
            // "**" matches exactly what "*" does; collapsing keeps hostile star runs cheap.
            if t == Token::Star && tokens.last() == Some(&Token::Star) {
                continue;
            }
            tokens.push(t);
        }
        let min_len = tokens
            .iter()
            .filter(|t| matches!(t, Token::Lit(_) | Token::Any))
            .count();
        // Clients send "*" for "everything", and "*.*" means the same to them (it would otherwise
        // skip names without a dot).
        let match_all = pattern == "*" || pattern == "*.*";
        Self {
            tokens,
            match_all,
            min_len,
            exact_case,
        }
    }

    /// Whether the pattern matches every name.
    pub fn is_match_all(&self) -> bool {
        self.match_all
    }

    /// Case-insensitive match of `name` against the pattern. An empty name matches only an
    /// empty pattern (FsRtlIsNameInExpression: "*" does not match an empty string).
    pub fn matches(&self, name: &str) -> bool {
        if name.is_empty() {
            return self.tokens.is_empty();
        }
        if self.match_all {
            return true;
        }
        let name: Vec<char> = if self.exact_case {
            name.chars().collect()
        } else {
            name.chars().map(upcase).collect()
        };
        if name.len() < self.min_len {
            return false;
        }
        let last_dot = name.iter().rposition(|&c| c == '.');
        let n = self.tokens.len();
        let mut cur = vec![false; n + 1];
        let mut next = vec![false; n + 1];
        set(&mut cur, 0);
        self.close(&mut cur, name.first().copied());
        for (i, &c) in name.iter().enumerate() {
            next.fill(false);
            let mut any = false;
            for (p, t) in self.tokens.iter().enumerate() {
                if !cur.get(p).copied().unwrap_or(false) {
                    continue;
                }
                let target = match *t {
                    Token::Lit(l) if l == c => Some(p + 1),
                    Token::Lit(_) => None,
                    Token::Any => Some(p + 1),
                    Token::Star => Some(p),
                    Token::DosStar if c == '.' && last_dot == Some(i) => None,
                    Token::DosStar => Some(p),
                    Token::DosQm if c == '.' => None,
                    Token::DosQm => Some(p + 1),
                    Token::DosDot if c == '.' => Some(p + 1),
                    Token::DosDot => None,
                };
                if let Some(q) = target {
                    set(&mut next, q);
                    any = true;
                }
            }
            if !any {
                return false;
            }
            std::mem::swap(&mut cur, &mut next);
            self.close(&mut cur, name.get(i + 1).copied());
        }
        cur.get(n).copied().unwrap_or(false)
    }

    /// Adds the positions reachable without consuming a character, given the next name
    /// character (`None` at the end). Epsilon moves only go forward, so one pass suffices.
    fn close(&self, set_: &mut [bool], next: Option<char>) {
        for (p, t) in self.tokens.iter().enumerate() {
            if !set_.get(p).copied().unwrap_or(false) {
                continue;
            }
            let skip = match t {
                Token::Star | Token::DosStar => true,
                Token::DosQm => matches!(next, None | Some('.')),
                Token::DosDot => next.is_none(),
                Token::Lit(_) | Token::Any => false,
            };
            if skip {
                set(set_, p + 1);
            }
        }
    }
}

fn set(v: &mut [bool], i: usize) {
    if let Some(x) = v.get_mut(i) {
        *x = true;
    }
}

/// One-shot form of [`Pattern::matches`].
pub fn matches(pattern: &str, name: &str) -> bool {
    Pattern::new(pattern).matches(name)
}

/// Whether `pattern` contains any wildcard; a pattern without one names a single entry, which
/// lets the server look it up directly instead of enumerating.
pub fn has_wildcards(pattern: &str) -> bool {
    pattern.contains(['*', '?', '<', '>', '"'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_sensitive_patterns_keep_the_wildcards() {
        let p = Pattern::case_sensitive("a*.TXT");
        assert!(p.matches("abc.TXT"));
        assert!(!p.matches("abc.txt"));
        assert!(!p.matches("Abc.TXT"));
        assert!(Pattern::case_sensitive("*").matches("X"));
        assert!(Pattern::case_sensitive("x?").matches("xY"));
        assert!(!Pattern::case_sensitive("x").matches("X"));
        assert!(Pattern::new("x").matches("X"));
    }

    #[test]
    fn plain_wildcards() {
        let table: &[(&str, &str, bool)] = &[
            ("*", "anything.txt", true),
            ("*", "noext", true),
            ("*.*", "noext", true),
            ("*.txt", "a.txt", true),
            ("*.txt", "A.TXT", true),
            ("*.TXT", "a.txt", true),
            ("*.txt", "a.txt.bak", false),
            ("*.txt", ".txt", true),
            ("a*", "abc", true),
            ("a*", "bac", false),
            ("*c", "abc", true),
            ("a*c", "ac", true),
            ("a*c", "abd", false),
            ("?", "a", true),
            ("?", "ab", false),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("??.txt", "ab.txt", true),
            ("file.txt", "FILE.TXT", true),
            ("file.txt", "file.tx", false),
            ("*a*b", "xaxxb", true),
            ("*a*b", "xbxa", false),
            ("\u{e9}t\u{e9}", "\u{c9}T\u{c9}", true),
            ("", "", true),
            ("", "a", false),
            ("*", "", false),
        ];
        for &(p, n, want) in table {
            assert_eq!(matches(p, n), want, "pattern {p:?} name {n:?}");
        }
    }

    #[test]
    fn dos_wildcards() {
        // Derived from the FsRtlIsNameInExpression definitions quoted in the module docs.
        let table: &[(&str, &str, bool)] = &[
            // DOS_STAR stops before the final dot, so "<.txt" needs a final ".txt".
            ("<.txt", "a.txt", true),
            ("<.txt", "a.b.txt", true),
            ("<.txt", "atxt", false),
            ("<", "abc", true),
            // ...which also means "<" alone only matches names without a dot (Win32 "*.").
            ("<", "a.b", false),
            // "<" alone may not consume the final dot, so "<." needs one to match it.
            ("<.", "abc", false),
            ("<.", "abc.", true),
            ("a<", "a.b.c", false),
            ("a<", "abc", true),
            ("<.<", "a.b.c", true),
            // DOS_QM: one non-dot character, or nothing at a dot / end of name.
            (">>>.txt", "a.txt", true),
            (">>>.txt", "abc.txt", true),
            (">>>.txt", "abcd.txt", false),
            (">", "a", true),
            (">", "ab", false),
            (">", ".", false),
            ("a>>", "a", true),
            ("a>>", "abc", true),
            ("a>>", "abcd", false),
            // DOS_DOT: a dot, or nothing at the end.
            ("foo\"", "foo", true),
            ("foo\"", "foo.", true),
            ("foo\"", "foox", false),
            ("foo\">>>", "foo", true),
            ("foo\">>>", "foo.c", true),
            ("foo\">>>", "foo.abc", true),
            ("foo\">>>", "foo.abcd", false),
            // Win32 "*.*" is sent as '<"*' by some clients: everything, with or without a dot.
            ("<\"*", "noext", true),
            ("<\"*", "a.b.c", true),
        ];
        for &(p, n, want) in table {
            assert_eq!(matches(p, n), want, "pattern {p:?} name {n:?}");
        }
    }

    #[test]
    fn hostile_patterns_finish_fast() {
        let start = std::time::Instant::now();
        let name = "a".repeat(20_000);
        assert!(!matches("*a*a*a*a*a*a*a*a*a*a*a*a*a*b", &name));
        assert!(matches("*a*a*a*a*a*a*a*a*a*a*a*a*a*a", &name));
        let stars = "*".repeat(50_000) + "b";
        assert!(!matches(&stars, &name));
        let p = Pattern::new(&"<>".repeat(1_000));
        assert!(!p.matches(&("a.".repeat(1_000) + "b.")));
        assert!(!matches(&"?".repeat(30_000), "short"));
        // Debug builds do this in well under a second; exponential backtracking would not end.
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn has_wildcards_detects_dos_forms() {
        assert!(!has_wildcards("file.txt"));
        assert!(has_wildcards("file.tx?"));
        assert!(has_wildcards("<.txt"));
        assert!(has_wildcards("a\"b"));
    }
}
