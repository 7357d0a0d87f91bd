//! A byte stream from three "ranks" through the framer into the server: no panic, bounded memory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use madmpi_pmi::{LineFramer, Server, ServerConfig};

fuzz_target!(|data: &[u8]| {
    let mut server = Server::new(ServerConfig::single_node(3, "kvs_fuzz"));
    let conns: Vec<_> = (0..3).map(|r| server.handle_connect(Some(r))).collect();
    let mut framers: Vec<LineFramer> = (0..3).map(|_| LineFramer::new(4096)).collect();
    // The first byte of each chunk picks the connection.
    for chunk in data.chunks(64) {
        let Some((&who, bytes)) = chunk.split_first() else {
            continue;
        };
        let i = who as usize % 3;
        framers[i].handle_bytes(bytes);
        while let Some(frame) = framers[i].poll_frame() {
            server.handle_frame(conns[i], &frame);
        }
        while server.poll_transmit().is_some() {}
        while server.poll_event().is_some() {}
    }
});
