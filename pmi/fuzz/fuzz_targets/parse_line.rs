//! Any bytes: the decoders must not panic, and what decodes must re-encode to the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use madmpi_pmi::{parse_line, parse_message, ProcessMapping};

fuzz_target!(|data: &[u8]| {
    let _ = parse_line(data);
    if let Ok(m) = parse_message(data) {
        assert_eq!(parse_message(&m.encode()).as_ref(), Ok(&m));
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(map) = ProcessMapping::parse(text) {
            let _ = map.node_ids(64);
        }
    }
});
