//! The trace file: the recorded events, sorted by time and formatted as Chrome trace-event
//! JSON, with the tracks' names and the clock used (`otherData`).

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};

use super::{
    instant, kind_name, kind_of, mono, Args, Buf, ChunkInfo, INSTANT, NONE, REALTIME_BASE_NS,
    TID_MPI, TID_RDV, TID_SCHED, TID_TRANSPORT,
};
use crate::wire::{self, Kind};

// ------------------------------------------------------------------------------ JSON output

pub(super) fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn chunk_json(out: &mut String, c: &ChunkInfo) {
    let _ = write!(out, "{{\"kind\":\"{}\"", kind_name(c.kind));
    match kind_of(c.kind) {
        Some(Kind::Eager | Kind::Rts) => {
            let _ = write!(
                out,
                ",\"ctx\":{},\"src\":{},\"tag\":{},\"seq\":{},\"len\":{},\"msg_len\":{},\"sreq\":{}",
                c.ctx, c.src, c.tag, c.seq, c.len, c.msg_len, c.sreq
            );
            if c.flags & wire::FLAG_SYNC != 0 {
                out.push_str(",\"sync\":true");
            }
            if c.flags & wire::FLAG_PIECES != 0 {
                out.push_str(",\"zero_copy_blocks\":true");
            }
        }
        Some(Kind::Data) => {
            let _ = write!(
                out,
                ",\"len\":{},\"offset\":{},\"sreq\":{}",
                c.len, c.msg_len, c.sreq
            );
        }
        _ => {
            let _ = write!(out, ",\"len\":{},\"sreq\":{}", c.len, c.sreq);
            if c.flags & wire::FLAG_CANCELLED != 0 {
                out.push_str(",\"cancelled\":true");
            }
        }
    }
    out.push('}');
}

fn chunks_json(out: &mut String, chunks: &[ChunkInfo]) {
    out.push('[');
    for (i, c) in chunks.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        chunk_json(out, c);
    }
    out.push(']');
}

fn args_json(out: &mut String, a: &Args) {
    match a {
        Args::None => return,
        Args::Call { peer, tag } => {
            out.push_str(",\"args\":{");
            let mut sep = "";
            if *peer != NONE {
                let _ = write!(out, "\"peer\":{peer}");
                sep = ",";
            }
            if *tag != NONE {
                let _ = write!(out, "{sep}\"tag\":{tag}");
            }
        }
        Args::Queued { peer, chunk } => {
            let _ = write!(out, ",\"args\":{{\"peer\":{peer},\"chunk\":");
            chunk_json(out, chunk);
        }
        Args::Packet {
            peer,
            driver,
            path,
            bytes,
            refused,
            chunks,
        } => {
            let _ = write!(
                out,
                ",\"args\":{{\"peer\":{peer},\"driver\":\"{driver}\",\"built_by\":\"{path}\",\
                 \"bytes\":{bytes},\"refused_before\":{refused},\"nchunks\":{},\"chunks\":",
                chunks.len()
            );
            chunks_json(out, chunks);
        }
        Args::Post {
            peer,
            driver,
            bytes,
            outcome,
            error,
        } => {
            let _ = write!(
                out,
                ",\"args\":{{\"peer\":{peer},\"driver\":\"{driver}\",\"bytes\":{bytes},\
                 \"outcome\":\"{outcome}\""
            );
            if let Some(e) = error {
                out.push_str(",\"error\":");
                json_str(out, e);
            }
        }
        Args::Recv {
            peer,
            bytes,
            placed,
            chunks,
        } => {
            let _ = write!(
                out,
                ",\"args\":{{\"peer\":{peer},\"bytes\":{bytes},\"placed_in_user_buffer\":{placed},\
                 \"nchunks\":{},\"chunks\":",
                chunks.len()
            );
            chunks_json(out, chunks);
        }
        Args::Ctrl { peer, chunk } => {
            let _ = write!(out, ",\"args\":{{\"peer\":{peer},\"sreq\":{}", chunk.sreq);
            if chunk.kind == Kind::Rts as u8 {
                let _ = write!(
                    out,
                    ",\"msg_len\":{},\"ctx\":{},\"tag\":{}",
                    chunk.msg_len, chunk.ctx, chunk.tag
                );
            }
        }
        Args::Get {
            peer,
            sreq,
            bytes,
            blocks,
            result,
        } => {
            let _ = write!(
                out,
                ",\"args\":{{\"peer\":{peer},\"sreq\":{sreq},\"bytes\":{bytes},\"blocks\":{blocks},\
                 \"result\":"
            );
            json_str(out, result);
        }
        Args::Peer { peer } => {
            let _ = write!(out, ",\"args\":{{\"peer\":{peer}");
        }
        Args::Counters { driver, values } => {
            let _ = write!(out, ",\"args\":{{\"driver\":\"{driver}\"");
            for (k, v) in values {
                let _ = write!(out, ",\"{k}\":{v}");
            }
        }
        Args::Aborted { why } => {
            out.push_str(",\"args\":{\"why\":");
            json_str(out, why);
        }
        Args::Truncated { max } => {
            let _ = write!(
                out,
                ",\"args\":{{\"max_events\":{max},\"why\":\"MADMPI_TRACE_MAX_EVENTS reached; \
                 later events were not recorded\""
            );
        }
    }
    out.push('}');
}

fn category(tid: u32) -> &'static str {
    match tid {
        TID_SCHED => "scheduler",
        TID_TRANSPORT => "transport",
        TID_RDV => "rendezvous",
        _ => "mpi",
    }
}

pub(super) fn write_json(
    b: &mut Buf,
    file: File,
    aborted: Option<&'static str>,
) -> std::io::Result<()> {
    let mut w = BufWriter::with_capacity(1 << 20, file);
    if let Some(why) = aborted {
        let ts = b.events.last().map_or(0, |e| e.ts).max(mono());
        b.events
            .push(instant(ts, TID_MPI, "aborted", Args::Aborted { why }));
    }
    // Chrome's format does not need sorted events, but per-track order makes the file easy to
    // read and check; longer slices first at equal times, so that parents precede children.
    b.events.sort_by_key(|e| {
        (
            e.ts,
            std::cmp::Reverse(if e.dur == INSTANT { 0 } else { e.dur }),
        )
    });
    let (realtime, offset) = (b.realtime, b.offset);
    let ts = |out: &mut String, ns: u64| {
        let t = if realtime {
            ns as i64 + offset - REALTIME_BASE_NS
        } else {
            ns as i64
        };
        let (sign, t) = if t < 0 { ("-", -t) } else { ("", t) };
        let _ = write!(out, "{sign}{}.{:03}", t / 1000, t % 1000);
    };
    let pid = b.rank;
    let mut out = String::with_capacity(1 << 16);
    out.push_str("{\"traceEvents\":[\n");
    let _ = write!(
        out,
        "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":0,\"args\":{{\"name\":\"rank {pid}\"}}}},\n\
         {{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":{pid},\"tid\":0,\"args\":{{\"sort_index\":{pid}}}}},\n\
         {{\"name\":\"process_labels\",\"ph\":\"M\",\"pid\":{pid},\"tid\":0,\"args\":{{\"labels\":"
    );
    json_str(&mut out, &b.host);
    out.push_str("}},\n");
    let mut tracks: Vec<(u32, String)> = vec![
        (TID_MPI, "MPI calls".into()),
        (TID_SCHED, "scheduler (strategy)".into()),
        (TID_TRANSPORT, "transport".into()),
        (TID_RDV, "rendezvous".into()),
    ];
    tracks.append(&mut b.threads);
    for (tid, name) in &tracks {
        let _ = write!(
            out,
            "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"name\":"
        );
        json_str(&mut out, name);
        let _ = writeln!(
            out,
            "}}}},\n{{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\
             \"args\":{{\"sort_index\":{tid}}}}},"
        );
    }
    w.write_all(out.as_bytes())?;
    let n = b.events.len();
    for (i, e) in b.events.iter().enumerate() {
        out.clear();
        out.push('{');
        out.push_str("\"name\":");
        json_str(&mut out, e.name);
        let _ = write!(out, ",\"cat\":\"{}\"", category(e.tid));
        if e.dur == INSTANT {
            out.push_str(",\"ph\":\"i\",\"s\":\"t\"");
        } else {
            out.push_str(",\"ph\":\"X\"");
        }
        let _ = write!(out, ",\"pid\":{pid},\"tid\":{},\"ts\":", e.tid);
        ts(&mut out, e.ts);
        if e.dur != INSTANT {
            let _ = write!(out, ",\"dur\":{}.{:03}", e.dur / 1000, e.dur % 1000);
        }
        args_json(&mut out, &e.args);
        out.push('}');
        if i + 1 < n {
            out.push(',');
        }
        out.push('\n');
        w.write_all(out.as_bytes())?;
    }
    out.clear();
    let _ = write!(
        out,
        "],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{{\"producer\":\"madmpi {}\",\"rank\":{pid},\
         \"size\":{},\"host\":",
        env!("CARGO_PKG_VERSION"),
        b.size
    );
    json_str(&mut out, &b.host);
    let _ = writeln!(
        out,
        ",\"clock\":\"{}\",\"realtime_minus_monotonic_ns\":{},\"events\":{n},\"max_events\":{},\
         \"truncated\":{},\"aborted\":{}}}}}",
        if realtime {
            "CLOCK_REALTIME, microseconds since 2024-01-01T00:00:00Z"
        } else {
            "CLOCK_MONOTONIC, microseconds"
        },
        offset,
        b.max,
        b.truncated,
        aborted.is_some()
    );
    w.write_all(out.as_bytes())?;
    w.flush()
}
