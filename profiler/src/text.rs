//! Text that leaves the program is made harmless where it lands: a name or label from a
//! results file may hold anything, and an ESC or OSC sequence written raw to a terminal
//! recolours it or retitles it, a control character makes a JUnit file ill-formed XML (a CI
//! system then rejects the whole report), and `<script>` in markdown is HTML to GitHub. The
//! rules live here, applied once to each document as a whole (`output::render`).
use std::{borrow::Cow, fmt::Write};

/// `s` with every control character but newline and tab shown as `\xNN` (`\u{NNNN}` above
/// 0xff): what a terminal or a log shows is what the file holds, and nothing acts on it.
pub fn escaped_lines(s: &str) -> Cow<'_, str> {
    escape_where(s, |c| c.is_control() && c != '\n' && c != '\t')
}

/// `s` with every control character shown as `\xNN`: for one-line messages and names.
pub fn escaped(s: &str) -> Cow<'_, str> {
    escape_where(s, char::is_control)
}

/// Escapes text for HTML element content and attribute values.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `s` with the characters XML 1.0 forbids (controls but tab, newline and carriage return, and
/// the non-characters U+FFFE, U+FFFF) shown as `\xNN`, which XML takes as plain text. No
/// character reference would do: `&#x1b;` is forbidden as well.
pub fn xml_safe(s: &str) -> Cow<'_, str> {
    escape_where(s, |c| {
        (c.is_control() && !matches!(c, '\t' | '\n' | '\r')) || matches!(c, '\u{fffe}' | '\u{ffff}')
    })
}

/// Markdown whose text cannot be taken as HTML: outside code spans `<`, `>` and `&` become
/// entities (rendered as the characters themselves); inside them (`` `name` ``) nothing is
/// HTML and they stay. Controls are escaped as in [`escaped_lines`].
pub fn markdown_safe(s: &str) -> String {
    let s = escaped_lines(s);
    let mut out = String::with_capacity(s.len());
    for line in s.split_inclusive('\n') {
        let mut in_code = false;
        for c in line.chars() {
            match c {
                '`' => {
                    in_code = !in_code;
                    out.push(c);
                }
                '<' if !in_code => out.push_str("&lt;"),
                '>' if !in_code => out.push_str("&gt;"),
                '&' if !in_code => out.push_str("&amp;"),
                c => out.push(c),
            }
        }
    }
    out
}

fn escape_where(s: &str, escape: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(&escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !escape(c) {
            out.push(c);
        } else if (c as u32) <= 0xff {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:04x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

/// For clap: a `--label` or `--meta` value with a control character is refused, so none
/// reaches a results file or a store from the command line.
pub fn no_controls(what: &str, s: &str) -> Result<(), String> {
    match s.chars().find(|c| c.is_control()) {
        Some(c) => Err(format!(
            "{what} holds the control character {}: use printable text",
            escaped(&c.to_string())
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_and_osc_sequences_are_shown_not_sent() {
        assert_eq!(
            escaped_lines("a\x1b]0;pwned\x07b\tc\nd\r\u{9b}"),
            "a\\x1b]0;pwned\\x07b\tc\nd\\x0d\\x9b"
        );
        assert!(matches!(escaped_lines("plain\n"), Cow::Borrowed(_)));
        assert_eq!(escaped("a\nb"), "a\\x0ab");
    }

    #[test]
    fn xml_keeps_its_whitespace_and_loses_what_it_forbids() {
        assert_eq!(xml_safe("a\x1b\t\r\n\u{fffe}"), "a\\x1b\t\r\n\\u{fffe}");
    }

    #[test]
    fn markdown_text_is_not_html_but_code_spans_stay_as_written() {
        assert_eq!(
            markdown_safe("| <script>x</script> | `a<b` | p < 0.05 & more\n"),
            "| &lt;script&gt;x&lt;/script&gt; | `a<b` | p &lt; 0.05 &amp; more\n"
        );
    }

    #[test]
    fn a_control_character_on_the_command_line_is_refused_and_named() {
        let err = no_controls("--label", "ok\x1b[31m").unwrap_err();
        assert_eq!(
            err,
            "--label holds the control character \\x1b: use printable text"
        );
        assert!(no_controls("--label", "6.1.0 (patched) ü").is_ok());
    }
}
