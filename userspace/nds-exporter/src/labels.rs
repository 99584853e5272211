//! Label sets of the Prometheus exposition, rendered once into their text form.

/// Label names with their values, as a family's sample carries them.
pub type Labels<'a> = Vec<(&'a str, String)>;

/// `labels` extended with `more`.
#[must_use]
pub fn with<'a>(labels: &Labels<'a>, more: &[(&'a str, &str)]) -> Labels<'a> {
    let mut all = labels.clone();
    all.extend(more.iter().map(|&(name, value)| (name, value.to_owned())));
    all
}

/// Escapes a label value: backslash, double quote and line feed.
#[must_use]
pub fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// `a="1",b="2"`, sorted by name (so one label set has one text).
#[must_use]
pub fn render(labels: &Labels<'_>) -> String {
    let mut sorted: Vec<&(&str, String)> = labels.iter().collect();
    sorted.sort_by_key(|(name, _)| *name);
    sorted
        .iter()
        .map(|(name, value)| format!("{name}=\"{}\"", escape(value)))
        .collect::<Vec<_>>()
        .join(",")
}

/// Two rendered label sets as one (either may be empty).
#[must_use]
pub fn join(first: &str, second: &str) -> String {
    match (first.is_empty(), second.is_empty()) {
        (true, _) => second.to_owned(),
        (_, true) => first.to_owned(),
        _ => format!("{first},{second}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_escaped_and_joined() {
        let labels: Labels<'_> = vec![("b", "x\"y\\\n".to_owned()), ("a", "1".to_owned())];
        assert_eq!(render(&labels), r#"a="1",b="x\"y\\\n""#);
        assert_eq!(join("", "a=\"1\""), "a=\"1\"");
        assert_eq!(join("a=\"1\"", ""), "a=\"1\"");
        assert_eq!(join("a=\"1\"", "b=\"2\""), "a=\"1\",b=\"2\"");
        assert_eq!(render(&with(&Vec::new(), &[("z", "0")])), "z=\"0\"");
    }
}
