//! Plain aligned text tables for `smbq status`.

/// Renders `rows` under `headers`, columns padded to their widest cell, two spaces apart.
pub fn render(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut s = String::new();
        for (i, (cell, w)) in cells.zip(&widths).enumerate() {
            if i > 0 {
                s.push_str("  ");
            }
            s.push_str(cell);
            s.extend(std::iter::repeat_n(' ', w - cell.chars().count()));
        }
        s.truncate(s.trim_end().len());
        s.push('\n');
        s
    };
    let mut out = line(&mut headers.iter().copied());
    for row in rows {
        out.push_str(&line(&mut row.iter().map(String::as_str)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_and_lines_have_no_trailing_blanks() {
        let t = render(
            &["ID", "USER"],
            &[
                vec!["1".into(), "alice".into()],
                vec!["1234".into(), "b".into()],
            ],
        );
        assert_eq!(t, "ID    USER\n1     alice\n1234  b\n");
    }
}
