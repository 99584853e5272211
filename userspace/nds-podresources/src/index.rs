//! Device and NeuronCore indexes as the kubelet's lists spell them.

/// `id` as an index: ASCII digits only (`str::parse` would also take a sign).
pub(crate) fn index<T: std::str::FromStr>(id: &str) -> Option<T> {
    if id.is_empty() || !id.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    id.parse().ok()
}
