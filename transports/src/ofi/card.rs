//! The `ofi` driver's address card: the provider's name and the endpoint's address in hex.

/// `b` in lower-case hex.
pub(super) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The bytes of hex text `s` (`None`: not hex).
pub(super) fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The provider's name as it travels in a card (no `;`, which separates the cards).
pub(super) fn card_provider(p: &str) -> String {
    p.replace(';', "+")
}
