//! Text that other processes wrote (tags and model names from slabs, command lines) on its
//! way to a terminal, for every tool that shows it (nds-monitor's messages, nds-top, nds-ls):
//! every control character (C0, DEL, C1) and every bidirectional-formatting character, which a
//! terminal would run or reorder what follows by, is printed as an escape, never as itself.
//! It owns only this escaping and imports nothing but `std`.

#![warn(missing_docs)]

/// Characters that change what a terminal shows rather than showing themselves: controls, and
/// the bidirectional marks, embeddings, overrides and isolates.
#[must_use]
pub fn is_unsafe(c: char) -> bool {
    let bidirectional = matches!(
        c,
        '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
    );
    c.is_control() || bidirectional
}

/// One character as a terminal is shown it: a backslash escape for [`is_unsafe`] characters and
/// for the backslash itself (so that an escape cannot be forged), the character otherwise.
fn escaped(c: char) -> String {
    match c {
        '\\' => "\\\\".to_owned(),
        '\n' => "\\n".to_owned(),
        '\r' => "\\r".to_owned(),
        '\t' => "\\t".to_owned(),
        c if is_unsafe(c) && u32::from(c) <= 0xff => format!("\\x{:02x}", u32::from(c)),
        c if is_unsafe(c) => format!("\\u{{{:04x}}}", u32::from(c)),
        c => c.to_string(),
    }
}

/// `text` with every [`is_unsafe`] character and backslash escaped.
#[must_use]
pub fn escape(text: &str) -> String {
    text.chars().map(escaped).collect()
}

/// `text` escaped as [`escape`] does, cut to at most `limit` characters (3 or more): when it
/// is longer, whole escapes are kept up to `limit - 3` characters and `...` follows (neuron-ls
/// cuts long commands the same way).
#[must_use]
pub fn escape_within(text: &str, limit: usize) -> String {
    let whole = escape(text);
    if whole.chars().count() <= limit {
        return whole;
    }
    let room = limit.saturating_sub(3);
    let mut cut = String::new();
    let mut width = 0;
    for piece in text.chars().map(escaped) {
        let piece_width = piece.chars().count();
        if width + piece_width > room {
            break;
        }
        width += piece_width;
        cut.push_str(&piece);
    }
    cut.push_str("...");
    cut
}

/// JSON text with the [`is_unsafe`] characters that a JSON serializer leaves as they are (DEL,
/// C1 and bidirectional formatting; it escapes only C0) written as `\uXXXX`. Outside strings
/// JSON has only ASCII punctuation and whitespace, so every such character is inside a string,
/// where the escape means the same character: the document parses to the same values.
#[must_use]
pub fn escape_json_text(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if is_unsafe(c) && u32::from(c) > 0x1f {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_and_reordering_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(
            escape("a\x1b[31mred\x07\u{7f}\u{9b}2J\ttab\nline"),
            "a\\x1b[31mred\\x07\\x7f\\x9b2J\\ttab\\nline"
        );
        assert_eq!(escape("x\u{202e}gpj.exe"), "x\\u{202e}gpj.exe");
        assert_eq!(
            escape("caf\u{e9} \u{4e2d} \u{fffd}"),
            "caf\u{e9} \u{4e2d} \u{fffd}"
        );
        // A backslash in the text cannot pass for an escape.
        assert_eq!(escape("\\x1b"), "\\\\x1b");
    }

    #[test]
    fn long_text_is_cut_between_escapes() {
        assert_eq!(escape_within("short", 10), "short");
        assert_eq!(escape_within("exactly ten", 11), "exactly ten");
        assert_eq!(escape_within("0123456789abcdef", 10), "0123456...");
        // The escape that would straddle the cut goes whole.
        assert_eq!(escape_within("012345\x1b789", 10), "012345...");
        assert_eq!(escape_within("abc", 2), "...");
    }

    #[test]
    fn json_text_keeps_its_values() {
        let tag = "t\x1b\u{7f}\u{85}\u{9b}\u{2067}\u{e9}\"\\";
        let json = serde_json::to_string_pretty(&serde_json::json!({ "tag": tag })).unwrap();
        let safe = escape_json_text(&json);
        assert!(!safe.chars().any(|c| is_unsafe(c) && c != '\n'), "{safe:?}");
        assert!(safe.contains("\\u007f") && safe.contains("\\u009b") && safe.contains("\\u2067"));
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back["tag"], tag);
    }
}
