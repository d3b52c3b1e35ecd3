//! Text that leaves the program is made harmless where it lands: a name or label from a
//! results file may hold anything, and an ESC or OSC sequence written raw to a terminal
//! recolours it or retitles it, a control character makes a JUnit file ill-formed XML (a CI
//! system then rejects the whole report), and `<script>` in markdown is HTML to GitHub. Bidi
//! controls and zero-width characters are as bad where nothing executes: U+202E or U+2066 in a
//! label makes a report read "v6.1" where the file says "v6.12", and U+200B makes two names
//! that look alike differ. The rules live here, one predicate for what is never printed as it
//! is ([`hidden`]), applied once to each document as a whole per format (`output::render`).
use std::{borrow::Cow, fmt::Write};

/// True for a character no output shows as it is, whatever the format: C0 and C1 controls,
/// the bidi controls (embeddings, overrides, isolates and marks: U+202A-U+202E, U+2066-U+2069,
/// U+200E, U+200F, U+061C), the zero-width and invisible characters (U+200B-U+200D, U+2060-
/// U+2064, U+FEFF, U+180E, U+00AD) and the line and paragraph separators U+2028, U+2029, which
/// end a line where a reader sees none.
pub fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{061c}'
                | '\u{180e}'
                | '\u{feff}'
                | '\u{00ad}'
        )
}

/// `s` with every [`hidden`] character but newline and tab shown as `\xNN` (`\u{NNNN}` above
/// 0xff): what a terminal or a log shows is what the file holds, and nothing acts on it.
pub fn escaped_lines(s: &str) -> Cow<'_, str> {
    escape_where(s, |c| hidden(c) && c != '\n' && c != '\t')
}

/// `s` with every [`hidden`] character shown as `\xNN`: for one-line messages and names.
pub fn escaped(s: &str) -> Cow<'_, str> {
    escape_where(s, hidden)
}

/// Escapes text for HTML element content and attribute values.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `s` with the characters XML 1.0 forbids (controls but tab, newline and carriage return, and
/// the non-characters U+FFFE, U+FFFF) and the other [`hidden`] ones shown as `\xNN`, which XML
/// takes as plain text. No character reference would do: `&#x1b;` is forbidden as well, and
/// `&#x202e;` is the override itself once parsed.
pub fn xml_safe(s: &str) -> Cow<'_, str> {
    escape_where(s, |c| {
        (hidden(c) && !matches!(c, '\t' | '\n' | '\r')) || matches!(c, '\u{fffe}' | '\u{ffff}')
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

/// For clap: a `--label` or `--meta` value with a [`hidden`] character is refused, so none
/// reaches a results file or a store from the command line (where it comes from a file, the
/// output escapes it).
pub fn no_controls(what: &str, s: &str) -> Result<(), String> {
    match s.chars().find(|&c| hidden(c)) {
        Some(c) if c.is_control() => Err(format!(
            "{what} holds the control character {}: use printable text",
            escaped(&c.to_string())
        )),
        Some(c) => Err(format!(
            "{what} holds the invisible character {} (a bidi control or zero-width): use \
             printable text",
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

    #[test]
    fn bidi_and_zero_width_characters_are_shown_in_every_format() {
        // "v6.1" followed by an override that would show "21" reversed after it.
        let label = "v6.1\u{202e}21\u{202c} \u{2066}x\u{2069}\u{200b}\u{feff}\u{61c}\u{200f}";
        let shown =
            "v6.1\\u{202e}21\\u{202c} \\u{2066}x\\u{2069}\\u{200b}\\u{feff}\\u{061c}\\u{200f}";
        assert_eq!(escaped(label), shown);
        assert_eq!(escaped_lines(label), shown);
        assert_eq!(xml_safe(label), shown);
        assert_eq!(markdown_safe(label), shown);
        // Letters of other scripts are text, not controls.
        assert!(matches!(escaped("Ünïcødé ключ 键 שלום"), Cow::Borrowed(_)));
    }

    #[test]
    fn an_invisible_character_on_the_command_line_is_refused_and_named() {
        let err = no_controls("--label", "v6.1\u{202e}2").unwrap_err();
        assert_eq!(
            err,
            "--label holds the invisible character \\u{202e} (a bidi control or zero-width): \
             use printable text"
        );
        for c in ['\u{200b}', '\u{2066}', '\u{feff}', '\u{200e}'] {
            assert!(no_controls("--meta", &format!("k=a{c}b")).is_err(), "{c:?}");
        }
    }

    /// Strings with many of the characters that must never reach an output as they are.
    fn hostile_text() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let hostile = prop_oneof![
            (0u32..0x20).prop_map(|c| char::from_u32(c).unwrap()),
            (0x7fu32..0xa0).prop_map(|c| char::from_u32(c).unwrap()),
            proptest::sample::select(vec![
                '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}', '\u{202e}', '\u{2066}', '\u{2067}',
                '\u{2068}', '\u{2069}', '\u{200e}', '\u{200f}', '\u{061c}', '\u{200b}', '\u{200c}',
                '\u{200d}', '\u{2060}', '\u{feff}', '\u{2028}', '\u{fffe}', '<', '&', '`',
            ]),
            any::<char>(),
        ];
        proptest::collection::vec(hostile, 0..40).prop_map(|cs| cs.into_iter().collect())
    }

    proptest::proptest! {
        #[test]
        fn no_hidden_character_survives_any_format(s in hostile_text()) {
            let left = |out: &str, allowed: &[char]| {
                out.chars().find(|&c| hidden(c) && !allowed.contains(&c))
            };
            proptest::prop_assert_eq!(left(&escaped(&s), &[]), None);
            proptest::prop_assert_eq!(left(&escaped_lines(&s), &['\n', '\t']), None);
            proptest::prop_assert_eq!(left(&markdown_safe(&s), &['\n', '\t']), None);
            let xml = xml_safe(&s);
            proptest::prop_assert_eq!(left(&xml, &['\n', '\t', '\r']), None);
            proptest::prop_assert!(!xml.contains(['\u{fffe}', '\u{ffff}']), "{:?}", xml);
            // Nothing visible is lost: the input's visible characters are all there, in order.
            let mut shown = escaped(&s).into_owned().into_bytes().into_iter();
            for c in s.chars().filter(|&c| !hidden(c)) {
                let mut buf = [0; 4];
                let bytes = c.encode_utf8(&mut buf).as_bytes();
                proptest::prop_assert!(
                    bytes.iter().all(|b| shown.any(|x| x == *b)),
                    "{c:?} lost from {s:?}"
                );
            }
        }
    }
}
