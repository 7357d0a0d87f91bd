//! Tokens and frames of the PMI-1 "simple" wire protocol.
//!
//! A PMI-1 message is one line: `cmd=<name>` followed by `key=value` tokens separated by spaces,
//! ended by `\n`. Values cannot contain an unescaped space; newer MPICH escapes a space or a
//! backslash with a backslash, older peers never escape, so this module unescapes on input and
//! escapes only the two characters that would otherwise break a token. A token without `=` is kept
//! as a bare key (Hydra ignores them; so do the command decoders here).
//!
//! The one multi-line form is `mcmd=spawn`: one `key=value` per line (values may contain
//! spaces) until a line `endcmd`. [`LineFramer`] cuts a byte stream into such frames.
//!
//! This module owns framing and tokenizing only: no I/O, no knowledge of what commands mean.
//! Everything here runs on bytes that a peer controls, so nothing may panic on any input.

use std::fmt;

/// The longest frame (line or `mcmd` block) either side accepts, in bytes.
///
/// The longest legitimate PMI-1 line is a `put` with a 256-byte kvsname, a 64-byte key and a
/// 1024-byte value; Hydra and Slurm read lines into buffers of a few kilobytes.
pub const MAX_FRAME: usize = 64 * 1024;

/// Why a line could not be decoded. Every variant says enough to be sent back to the peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// The line is empty (or only spaces).
    Empty,
    /// The line is longer than [`MAX_FRAME`].
    TooLong {
        /// Its length in bytes, as far as it was seen.
        len: usize,
    },
    /// The line is not UTF-8 text.
    NotUtf8,
    /// A control byte (NUL, an inner newline, ...) appeared at this offset.
    ControlByte {
        /// The byte.
        byte: u8,
        /// Its offset in the line.
        pos: usize,
    },
    /// The first token is not `cmd=<name>` (or `mcmd=<name>`).
    MissingCmd,
    /// A token starts with `=`.
    EmptyKey {
        /// Offset of the `=` in the line.
        pos: usize,
    },
    /// An `mcmd` block is malformed (no `endcmd`, or a line without `=`).
    BadMcmd(String),
    /// The command name is not one this implementation knows.
    UnknownCommand(String),
    /// A required argument is missing.
    MissingArg {
        /// The command.
        cmd: String,
        /// The missing key.
        key: &'static str,
    },
    /// An argument that must be an integer is not one.
    BadInteger {
        /// The command.
        cmd: String,
        /// The key.
        key: &'static str,
        /// The value received.
        value: String,
    },
}

impl ParseError {
    /// The command name the line carried, when it got that far: the server then answers with
    /// that command's reply name and `rc=-1`, which is what a waiting client expects.
    pub fn cmd(&self) -> Option<&str> {
        match self {
            ParseError::MissingArg { cmd, .. } | ParseError::BadInteger { cmd, .. } => Some(cmd),
            ParseError::UnknownCommand(cmd) => Some(cmd),
            _ => None,
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Empty => write!(f, "empty PMI line"),
            ParseError::TooLong { len } => {
                write!(
                    f,
                    "PMI line of {len} bytes is longer than the limit of {MAX_FRAME}"
                )
            }
            ParseError::NotUtf8 => write!(f, "PMI line is not UTF-8 text"),
            ParseError::ControlByte { byte, pos } => {
                write!(f, "control byte 0x{byte:02x} at offset {pos} of PMI line")
            }
            ParseError::MissingCmd => write!(f, "PMI line does not start with cmd=<name>"),
            ParseError::EmptyKey { pos } => write!(f, "empty key before '=' at offset {pos}"),
            ParseError::BadMcmd(why) => write!(f, "malformed mcmd block: {why}"),
            ParseError::UnknownCommand(cmd) => write!(f, "unknown PMI command '{cmd}'"),
            ParseError::MissingArg { cmd, key } => write!(f, "PMI command '{cmd}' lacks '{key}='"),
            ParseError::BadInteger { cmd, key, value } => {
                write!(f, "PMI command '{cmd}': '{key}={value}' is not an integer")
            }
        }
    }
}

impl std::error::Error for ParseError {}

/// One decoded PMI-1 line (or `mcmd` block): the command name and its arguments in order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Message {
    /// The value of the leading `cmd=` (or `mcmd=`).
    pub cmd: String,
    /// True for the multi-line `mcmd=` form.
    pub mcmd: bool,
    /// The other tokens in order; `None` for a bare token without `=`.
    pub args: Vec<(String, Option<String>)>,
}

impl Message {
    /// A message with no arguments yet.
    pub fn new(cmd: &str) -> Message {
        Message {
            cmd: cmd.to_owned(),
            mcmd: false,
            args: Vec::new(),
        }
    }

    /// Appends `key=value` (builder style).
    pub fn arg(mut self, key: &str, value: impl fmt::Display) -> Message {
        self.args.push((key.to_owned(), Some(value.to_string())));
        self
    }

    /// The value of the first `key=` token, as Hydra looks keys up.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.args
            .iter()
            .find(|(k, v)| k == key && v.is_some())
            .and_then(|(_, v)| v.as_deref())
    }

    /// The `rc=` value when present and an integer.
    pub fn rc(&self) -> Option<i64> {
        self.get("rc").and_then(|v| v.trim().parse().ok())
    }

    /// Serializes to one line ending in `\n` (an `mcmd` block to several lines ending in
    /// `endcmd\n`). Spaces and backslashes in values are escaped; newline, carriage return and
    /// NUL, which no framing can carry, become escaped spaces.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + self.cmd.len() + self.args.len() * 16);
        let (lead, sep) = if self.mcmd {
            ("mcmd=", b'\n')
        } else {
            ("cmd=", b' ')
        };
        out.extend_from_slice(lead.as_bytes());
        push_escaped(&mut out, &self.cmd, !self.mcmd);
        for (k, v) in &self.args {
            out.push(sep);
            push_escaped(&mut out, k, true);
            if let Some(v) = v {
                out.push(b'=');
                push_escaped(&mut out, v, !self.mcmd);
            }
        }
        if self.mcmd {
            out.extend_from_slice(b"\nendcmd");
        }
        out.push(b'\n');
        out
    }
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = self.encode();
        let text = String::from_utf8_lossy(&bytes);
        f.write_str(text.trim_end_matches('\n'))
    }
}

fn push_escaped(out: &mut Vec<u8>, s: &str, escape_space: bool) {
    for &b in s.as_bytes() {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b' ' | b'\t' if escape_space => {
                out.push(b'\\');
                out.push(b);
            }
            b'\n' | b'\r' | 0 => out.extend_from_slice(if escape_space { b"\\ " } else { b" " }),
            _ => out.push(b),
        }
    }
}

/// Strips one trailing `\n` and then one `\r`.
fn strip_eol(mut line: &[u8]) -> &[u8] {
    if let [rest @ .., b'\n'] = line {
        line = rest;
    }
    if let [rest @ .., b'\r'] = line {
        line = rest;
    }
    line
}

/// Decodes one frame: a `cmd=` line (trailing `\n` optional) or an `mcmd=` block.
///
/// Never panics, whatever the bytes.
pub fn parse_message(frame: &[u8]) -> Result<Message, ParseError> {
    let frame = strip_eol(frame);
    if frame.len() > MAX_FRAME {
        return Err(ParseError::TooLong { len: frame.len() });
    }
    let text = std::str::from_utf8(frame).map_err(|_| ParseError::NotUtf8)?;
    if text.starts_with("mcmd=") {
        return parse_mcmd(text);
    }
    if let Some(pos) = text.bytes().position(|b| b < 0x20 && b != b'\t') {
        return Err(ParseError::ControlByte {
            byte: text.as_bytes()[pos],
            pos,
        });
    }
    let mut tokens = Tokens { text, pos: 0 };
    let first = match tokens.next_token()? {
        Some(t) => t,
        None => return Err(ParseError::Empty),
    };
    let cmd = match first {
        (k, Some(v)) if k == "cmd" && !v.is_empty() => v,
        _ => return Err(ParseError::MissingCmd),
    };
    let mut msg = Message {
        cmd,
        mcmd: false,
        args: Vec::new(),
    };
    while let Some(tok) = tokens.next_token()? {
        msg.args.push(tok);
    }
    Ok(msg)
}

struct Tokens<'a> {
    text: &'a str,
    pos: usize,
}

impl Tokens<'_> {
    fn next_token(&mut self) -> Result<Option<(String, Option<String>)>, ParseError> {
        let bytes = self.text.as_bytes();
        while self.pos < bytes.len() && (bytes[self.pos] == b' ' || bytes[self.pos] == b'\t') {
            self.pos += 1;
        }
        if self.pos >= bytes.len() {
            return Ok(None);
        }
        let start = self.pos;
        while self.pos < bytes.len() && !matches!(bytes[self.pos], b' ' | b'\t' | b'=') {
            self.pos += 1;
        }
        let key = unescape(&self.text[start..self.pos]);
        if self.pos >= bytes.len() || bytes[self.pos] != b'=' {
            return Ok(Some((key, None)));
        }
        if self.pos == start {
            return Err(ParseError::EmptyKey { pos: start });
        }
        self.pos += 1; // '='
        let vstart = self.pos;
        while self.pos < bytes.len() && !matches!(bytes[self.pos], b' ' | b'\t') {
            // A backslash protects the next byte (a space, typically). Stepping over it by byte
            // is safe for UTF-8: only ASCII is ever escaped, and the slice below ends at an
            // ASCII space or the end of the text.
            if bytes[self.pos] == b'\\' && self.pos + 1 < bytes.len() {
                self.pos += 1;
            }
            self.pos += 1;
        }
        let raw = self.text.get(vstart..self.pos).unwrap_or("");
        Ok(Some((key, Some(unescape(raw)))))
    }
}

/// Removes backslash escapes: `\x` becomes `x`; a lone trailing backslash stays.
fn unescape(s: &str) -> String {
    if !s.contains('\\') {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(n) => out.push(n),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn parse_mcmd(text: &str) -> Result<Message, ParseError> {
    let mut msg = Message {
        mcmd: true,
        ..Message::default()
    };
    let mut ended = false;
    for (i, line) in text.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if ended {
            if line.trim().is_empty() {
                continue;
            }
            return Err(ParseError::BadMcmd("text after endcmd".into()));
        }
        if let Some(pos) = line.bytes().position(|b| b < 0x20 && b != b'\t') {
            return Err(ParseError::ControlByte {
                byte: line.as_bytes()[pos],
                pos,
            });
        }
        if line.trim().is_empty() {
            continue;
        }
        if line.trim() == "endcmd" {
            ended = true;
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            return Err(ParseError::BadMcmd(format!("line {} has no '='", i + 1)));
        };
        let k = k.trim();
        if k.is_empty() {
            return Err(ParseError::BadMcmd(format!(
                "line {} has an empty key",
                i + 1
            )));
        }
        if i == 0 {
            if v.is_empty() {
                return Err(ParseError::MissingCmd);
            }
            msg.cmd = unescape(v);
        } else {
            // `encode` escapes keys (a space or a backslash in one), in blocks too.
            msg.args.push((unescape(k), Some(unescape(v))));
        }
    }
    if !ended {
        return Err(ParseError::BadMcmd("no endcmd line".into()));
    }
    Ok(msg)
}

/// A frame cut by [`LineFramer`], or the report of bytes it had to drop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A complete line (without its `\n`) or a complete `mcmd` block.
    Data(Vec<u8>),
    /// A line longer than the framer's limit was dropped up to its end; `len` bytes were lost.
    Overlong {
        /// Number of bytes dropped.
        len: usize,
    },
}

/// Cuts a byte stream into PMI-1 frames: lines, and `mcmd=` blocks that run to a line `endcmd`.
///
/// Sans-IO: feed bytes with [`handle_bytes`](Self::handle_bytes), take frames with
/// [`poll_frame`](Self::poll_frame) until it answers `None` before feeding more. Memory is bounded
/// by the limit: an overlong line is dropped (and reported once) and the framer resynchronizes at
/// the next newline.
#[derive(Debug)]
pub struct LineFramer {
    buf: Vec<u8>,
    /// Bytes at the front of `buf` already returned as frames. They are dropped when more
    /// bytes come, not frame by frame: removing each frame from the front would move the rest
    /// every time, and a read full of short lines would cost its length squared.
    start: usize,
    /// Bytes of `buf` already searched for a terminator (from its beginning, `start` included).
    scanned: usize,
    limit: usize,
    /// Dropping bytes up to the next newline; counts them.
    discarding: Option<usize>,
    /// A finished drop, reported before any later frame.
    report: Option<usize>,
}

impl Default for LineFramer {
    fn default() -> Self {
        LineFramer::new(MAX_FRAME)
    }
}

impl LineFramer {
    /// A framer that accepts frames up to `limit` bytes.
    pub fn new(limit: usize) -> LineFramer {
        LineFramer {
            buf: Vec::new(),
            start: 0,
            scanned: 0,
            limit: limit.max(16),
            discarding: None,
            report: None,
        }
    }

    /// Bytes received and not yet returned as frames.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Input: bytes read from the peer.
    pub fn handle_bytes(&mut self, mut data: &[u8]) {
        if let Some(dropped) = self.discarding {
            match data.iter().position(|&b| b == b'\n') {
                Some(nl) => {
                    self.discarding = None;
                    self.report = Some(dropped.saturating_add(nl + 1));
                    data = &data[nl + 1..];
                }
                None => {
                    self.discarding = Some(dropped.saturating_add(data.len()));
                    return;
                }
            }
        }
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.scanned -= self.start;
            self.start = 0;
        }
        self.buf.extend_from_slice(data);
    }

    /// Output: the next complete frame, if any.
    pub fn poll_frame(&mut self) -> Option<Frame> {
        if let Some(len) = self.report.take() {
            return Some(Frame::Overlong { len });
        }
        let start = self.start;
        let is_mcmd = self.buf[start..].starts_with(b"mcmd=");
        while let Some(off) = self
            .buf
            .get(self.scanned..)
            .and_then(|s| s.iter().position(|&b| b == b'\n'))
        {
            let nl = self.scanned + off;
            self.scanned = nl + 1;
            let end_of_frame = !is_mcmd || {
                // The block ends at the line `endcmd`.
                let line_start = self.buf[start..nl]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(start, |p| start + p + 1);
                strip_eol(&self.buf[line_start..=nl]) == b"endcmd"
            };
            if end_of_frame {
                let frame = self.buf[start..=nl].to_vec();
                self.start = nl + 1;
                if self.start == self.buf.len() {
                    self.buf.clear();
                    self.start = 0;
                }
                self.scanned = self.start;
                let frame = if is_mcmd {
                    frame
                } else {
                    strip_eol(&frame).to_vec()
                };
                return Some(Frame::Data(frame));
            }
        }
        self.scanned = self.buf.len();
        if self.pending() > self.limit {
            let dropped = self.pending();
            self.buf.clear();
            self.start = 0;
            self.scanned = 0;
            if is_mcmd {
                // A block spans lines: what was buffered goes, and that is all we can say.
                return Some(Frame::Overlong { len: dropped });
            }
            self.discarding = Some(dropped);
        }
        None
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn parses_simple_line() {
        let m = parse_message(b"cmd=put kvsname=kvs_1 key=a value=b\n").unwrap();
        assert_eq!(m.cmd, "put");
        assert_eq!(m.get("kvsname"), Some("kvs_1"));
        assert_eq!(m.get("key"), Some("a"));
        assert_eq!(m.get("value"), Some("b"));
        assert!(!m.mcmd);
    }

    #[test]
    fn spaces_tabs_crlf_and_bare_tokens() {
        let m = parse_message(b"  cmd=get_result   rc=0\tvalue=x extra\r\n").unwrap();
        assert_eq!(m.cmd, "get_result");
        assert_eq!(m.rc(), Some(0));
        assert_eq!(m.get("value"), Some("x"));
        assert_eq!(m.args.last().unwrap(), &("extra".to_owned(), None));
    }

    #[test]
    fn escapes_round_trip() {
        let m = Message::new("abort")
            .arg("exitcode", 3)
            .arg("message", "a b\\c\nd");
        let line = m.encode();
        assert_eq!(line, b"cmd=abort exitcode=3 message=a\\ b\\\\c\\ d\n");
        let back = parse_message(&line).unwrap();
        assert_eq!(back.get("message"), Some("a b\\c d"));
    }

    #[test]
    fn first_key_wins_and_values_may_hold_equals() {
        let m = parse_message(b"cmd=x key=a=b key=c").unwrap();
        assert_eq!(m.get("key"), Some("a=b"));
    }

    #[test]
    fn errors() {
        assert_eq!(parse_message(b""), Err(ParseError::Empty));
        assert_eq!(parse_message(b"   \n"), Err(ParseError::Empty));
        assert_eq!(parse_message(b"key=a cmd=put"), Err(ParseError::MissingCmd));
        assert_eq!(parse_message(b"cmd= x=1"), Err(ParseError::MissingCmd));
        assert_eq!(parse_message(b"cmd"), Err(ParseError::MissingCmd));
        assert_eq!(
            parse_message(b"cmd=a =b"),
            Err(ParseError::EmptyKey { pos: 6 })
        );
        assert_eq!(
            parse_message(b"cmd=a\0"),
            Err(ParseError::ControlByte { byte: 0, pos: 5 })
        );
        assert_eq!(
            parse_message(b"cmd=a\nb"),
            Err(ParseError::ControlByte {
                byte: b'\n',
                pos: 5
            })
        );
        assert_eq!(parse_message(b"cmd=\xff"), Err(ParseError::NotUtf8));
        assert!(matches!(
            parse_message(&vec![b'a'; MAX_FRAME + 1]),
            Err(ParseError::TooLong { .. })
        ));
    }

    #[test]
    fn trailing_backslash_and_multibyte() {
        let m = parse_message("cmd=x v=é\\ ü w=a\\".as_bytes()).unwrap();
        assert_eq!(m.get("v"), Some("é ü"));
        assert_eq!(m.get("w"), Some("a\\"));
    }

    #[test]
    fn mcmd_block() {
        let block =
            b"mcmd=spawn\nnprocs=2\nexecname=/bin/my prog\ntotspawns=1\nspawnssofar=1\nendcmd\n";
        let m = parse_message(block).unwrap();
        assert!(m.mcmd);
        assert_eq!(m.cmd, "spawn");
        assert_eq!(m.get("execname"), Some("/bin/my prog"));
        assert!(matches!(
            parse_message(b"mcmd=spawn\nnprocs=2\n"),
            Err(ParseError::BadMcmd(_))
        ));
        assert!(matches!(
            parse_message(b"mcmd=spawn\nnprocs\nendcmd\n"),
            Err(ParseError::BadMcmd(_))
        ));
        let again = parse_message(&m.encode()).unwrap();
        assert_eq!(again, m);
    }

    #[test]
    fn framer_lines_and_partial() {
        let mut f = LineFramer::default();
        f.handle_bytes(b"cmd=a\ncmd=b");
        assert_eq!(f.poll_frame(), Some(Frame::Data(b"cmd=a".to_vec())));
        assert_eq!(f.poll_frame(), None);
        f.handle_bytes(b" x=1\r\n");
        assert_eq!(f.poll_frame(), Some(Frame::Data(b"cmd=b x=1".to_vec())));
        assert_eq!(f.poll_frame(), None);
        assert_eq!(f.pending(), 0);
    }

    #[test]
    fn framer_mcmd_waits_for_endcmd() {
        let mut f = LineFramer::default();
        f.handle_bytes(b"mcmd=spawn\nnprocs=1\n");
        assert_eq!(f.poll_frame(), None);
        f.handle_bytes(b"endcmd\ncmd=barrier_in\n");
        match f.poll_frame() {
            Some(Frame::Data(d)) => assert!(d.ends_with(b"endcmd\n")),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            f.poll_frame(),
            Some(Frame::Data(b"cmd=barrier_in".to_vec()))
        );
    }

    #[test]
    fn framer_drops_overlong_and_resyncs() {
        let mut f = LineFramer::new(32);
        f.handle_bytes(&[b'x'; 40]);
        assert_eq!(f.poll_frame(), None);
        f.handle_bytes(&[b'y'; 100]);
        assert_eq!(f.poll_frame(), None);
        f.handle_bytes(b"zz\ncmd=ok\n");
        assert_eq!(f.poll_frame(), Some(Frame::Overlong { len: 143 }));
        assert_eq!(f.poll_frame(), Some(Frame::Data(b"cmd=ok".to_vec())));
        assert_eq!(f.poll_frame(), None);
    }

    /// Found by fuzzing (pmi/tests/fuzz_pmi.rs): each frame was drained from the front of the
    /// buffer, moving the rest, so one read full of empty lines cost its length squared (1 MiB
    /// of newlines: 42 s in a debug build).
    #[test]
    fn framer_work_is_linear_in_short_lines() {
        let mut f = LineFramer::default();
        let t = std::time::Instant::now();
        f.handle_bytes(&vec![b'\n'; 1 << 20]);
        let mut n = 0;
        while let Some(fr) = f.poll_frame() {
            assert_eq!(fr, Frame::Data(Vec::new()));
            n += 1;
        }
        assert_eq!((n, f.pending()), (1 << 20, 0));
        assert!(
            t.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            t.elapsed()
        );
        // Frames returned, then a partial line kept across reads.
        f.handle_bytes(b"cmd=a\ncmd=b\ncmd=");
        assert_eq!(f.poll_frame(), Some(Frame::Data(b"cmd=a".to_vec())));
        assert_eq!(f.poll_frame(), Some(Frame::Data(b"cmd=b".to_vec())));
        assert_eq!((f.poll_frame(), f.pending()), (None, 4));
        f.handle_bytes(b"c\nmcmd=spawn\nendcmd\n");
        assert_eq!(f.poll_frame(), Some(Frame::Data(b"cmd=c".to_vec())));
        assert_eq!(
            f.poll_frame(),
            Some(Frame::Data(b"mcmd=spawn\nendcmd\n".to_vec()))
        );
        assert_eq!((f.poll_frame(), f.pending()), (None, 0));
    }

    /// Found by fuzzing: `encode` escapes the keys of an `mcmd` block (`a b` as `a\ b`), but
    /// the block parser kept the backslashes, so a block did not decode to what was encoded.
    #[test]
    fn mcmd_keys_round_trip() {
        let mut m = Message::new("spawn");
        m.mcmd = true;
        m.args.push(("info key\\x".into(), Some("v a\\l".into())));
        assert_eq!(parse_message(&m.encode()), Ok(m));
    }

    /// A small deterministic generator, so the property tests need no extra crate.
    pub(crate) struct XorShift(pub u64);
    impl XorShift {
        pub(crate) fn next(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.0 = x;
            x
        }
        pub(crate) fn bytes(&mut self, max: usize, alphabet: &[u8]) -> Vec<u8> {
            let n = (self.next() as usize) % (max + 1);
            (0..n)
                .map(|_| {
                    let r = self.next();
                    if alphabet.is_empty() || r & 3 == 0 {
                        (r >> 8) as u8
                    } else {
                        alphabet[(r >> 8) as usize % alphabet.len()]
                    }
                })
                .collect()
        }
    }

    #[test]
    fn property_random_bytes_never_panic_and_encoding_round_trips() {
        let alphabet = b"cmd=mcdput key value \\\n\rendcmd\t=abc ";
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        let mut framer = LineFramer::new(256);
        for _ in 0..50_000 {
            let input = rng.bytes(300, alphabet);
            if let Ok(m) = parse_message(&input) {
                // Whatever decodes must re-encode to something that decodes to the same.
                let again = parse_message(&m.encode());
                assert_eq!(
                    again.as_ref(),
                    Ok(&m),
                    "input {:?}",
                    String::from_utf8_lossy(&input)
                );
            }
            framer.handle_bytes(&input);
            while framer.poll_frame().is_some() {}
            assert!(framer.pending() <= 256 + 300 + 32);
        }
    }

    #[test]
    fn property_built_messages_round_trip() {
        let mut rng = XorShift(12345);
        for _ in 0..20_000 {
            // Keys and command names are identifiers on the wire: no '=', space or control.
            let ident = |s: &str| {
                !s.is_empty()
                    && !s
                        .chars()
                        .any(|c| c == '=' || c.is_whitespace() || c.is_control())
            };
            let cmd = String::from_utf8_lossy(&rng.bytes(8, b"abcdefgh_")).into_owned();
            if !ident(&cmd) {
                continue;
            }
            let mut m = Message::new(&cmd);
            for _ in 0..(rng.next() % 5) {
                let k = String::from_utf8_lossy(&rng.bytes(6, b"abcxyz_-")).into_owned();
                if !ident(&k) {
                    continue;
                }
                let v = String::from_utf8_lossy(&rng.bytes(20, b"ab =\\\t,()z")).into_owned();
                // Control characters other than tab are not representable: skip them.
                if v.bytes().any(|b| b < 0x20 && b != b'\t') {
                    continue;
                }
                m = m.arg(&k, v);
            }
            assert_eq!(parse_message(&m.encode()), Ok(m.clone()), "{m:?}");
        }
    }
}
