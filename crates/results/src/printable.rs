//! Text from outside (matrix.yaml, a peer, a file name, the environment) on its way to a
//! terminal or a report: its control characters are shown as escapes, so that none of
//! them moves the cursor, rings a bell or colours what follows.

use std::borrow::Cow;

/// `text` with every control character but newline and tab written as its escape
/// (`\u{1b}`); borrowed when there is none.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .map(|c| match needs_escape(c) {
                true => c.escape_unicode().to_string(),
                false => c.to_string(),
            })
            .collect(),
    )
}

/// Control characters (C0, DEL, C1) other than newline and tab. C1 controls include
/// U+009B, which some terminals take as the start of an escape sequence.
fn needs_escape(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_lines_kept() {
        assert_eq!(
            printable("peer \u{1b}[31mred\u{7}"),
            "peer \\u{1b}[31mred\\u{7}"
        );
        assert_eq!(printable("a\u{9b}b\u{7f}"), "a\\u{9b}b\\u{7f}");
        assert!(matches!(
            printable("two\nlines\tand a tab"),
            Cow::Borrowed(_)
        ));
    }
}
