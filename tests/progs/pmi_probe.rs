//! A rank that speaks PMI-1 through `madmpi_pmi::Client`, scripted from its command line, for
//! the launcher tests (it needs no MPI library).
//!
//! `pmi-probe ACTION...`; each action is `[@R[,R...]:]name[=args]` and runs only on the listed
//! ranks when a rank list is given:
//!
//! - `info`: init if needed, print `info rank= size= kvsname= appnum= usize= pid= jobid=`
//! - `allgather`: put `k<rank>`, barrier, get every rank's key and check it
//! - `local`: print `local=<ranks sharing this node>`
//! - `put=K,V`, `get=K`, `barrier`, `finalize`, `nofinalize` (skip the final finalize)
//! - `bigput`: a value one byte over the limit must be refused before reaching the wire
//! - `raw=TEXT`, `rawbin`, `rawlong`: write a line straight to PMI_FD, print the reply line
//! - `env=NAME`: print `env NAME=value` (or `unset`)
//! - `cat`: copy stdin lines as `stdin[rank]: line`, then `stdin[rank] eof`
//! - `lines=N,LEN`: N lines of LEN bytes, each written in three pieces (interleaving test)
//! - `pieces=N,LEN,K,FD`: N lines `rank R fd FD line I xxx...` (LEN x's) on FD (1 or 2), each
//!   written in K pieces, yielding in between (untagged interleaving test)
//! - `shm`: create `/dev/shm/madmpi-<kvsname>-probe-<rank>` and print `shm <path>`
//! - `sleep=SECONDS`, `exit=CODE`, `signal=SIG`, `abort=CODE,MESSAGE`, `stderr=TEXT`
//!
//! Ends with `finalize` (unless told otherwise) and exit code 0; any PMI error exits 1.

use std::io::{BufRead, Write};

use madmpi_pmi::{Client, Error};

struct Probe {
    client: Option<Client>,
    finalize_at_end: bool,
    finalized: bool,
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn die(rank: u32, what: &str, e: &dyn std::fmt::Display) -> ! {
    eprintln!("probe rank {rank}: {what}: {e}");
    std::process::exit(1);
}

fn env_rank() -> u32 {
    ["PMI_RANK", "PMI_ID"]
        .iter()
        .find_map(|k| std::env::var(k).ok().and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

impl Probe {
    fn rank(&self) -> u32 {
        self.client.as_ref().map_or_else(env_rank, Client::rank)
    }

    fn client(&mut self) -> &mut Client {
        if self.client.is_none() {
            match Client::from_env() {
                Ok(Some(c)) => self.client = Some(c),
                Ok(None) => die(
                    0,
                    "init",
                    &"no PMI_FD or PMI_PORT: not started by a launcher",
                ),
                Err(e) => die(env_rank(), "init", &e),
            }
        }
        self.client.as_mut().expect("initialized above")
    }

    fn raw(&mut self, bytes: &[u8]) {
        let rank = self.rank();
        let fd: i32 = match std::env::var("PMI_FD").ok().and_then(|v| v.parse().ok()) {
            Some(fd) => fd,
            None => die(rank, "raw", &"raw needs PMI_FD"),
        };
        write_fd(fd, bytes);
        // One reply line, read a byte at a time so nothing is taken from the client's stream.
        let mut line = Vec::new();
        let mut b = [0u8; 1];
        while read_fd(fd, &mut b) == 1 && b[0] != b'\n' {
            line.push(b[0]);
        }
        say(&format!(
            "raw reply[{rank}]: {}",
            String::from_utf8_lossy(&line)
        ));
    }

    fn act(&mut self, name: &str, arg: &str) {
        let rank = self.rank();
        let check = |r: Result<(), Error>, what: &str| {
            if let Err(e) = r {
                die(rank, what, &e)
            }
        };
        match name {
            "init" | "info" => {
                let c = self.client();
                let jobid = std::env::var("MADMPI_JOBID").unwrap_or_else(|_| "unset".into());
                let usize = c.universe_size().map_or("none".into(), |u| u.to_string());
                say(&format!(
                    "info rank={} size={} kvsname={} appnum={} usize={usize} pid={} jobid={jobid}",
                    c.rank(),
                    c.size(),
                    c.kvsname(),
                    c.appnum(),
                    std::process::id()
                ));
            }
            "allgather" => {
                let c = self.client();
                let (me, n) = (c.rank(), c.size());
                let kvs = c.kvsname().to_owned();
                check(c.put(&format!("k{me}"), &format!("v{me}-{kvs}")), "put");
                check(c.barrier(), "barrier");
                for r in 0..n {
                    match c.get(&format!("k{r}")) {
                        Ok(v) if v == format!("v{r}-{kvs}") => {}
                        Ok(v) => die(me, "allgather", &format!("k{r} = {v}")),
                        Err(e) => die(me, "allgather get", &e),
                    }
                }
                say(&format!("allgather ok rank={me} size={n}"));
            }
            "local" => {
                let c = self.client();
                match c.local_ranks() {
                    Ok(l) => {
                        let l: Vec<String> = l.iter().map(u32::to_string).collect();
                        say(&format!("local rank={rank} ranks={}", l.join(",")));
                    }
                    Err(e) => die(rank, "local_ranks", &e),
                }
            }
            "put" => {
                let (k, v) = arg.split_once(',').unwrap_or((arg, ""));
                check(self.client().put(k, v), "put");
            }
            "get" => match self.client().get(arg) {
                Ok(v) => say(&format!("get {arg}={v}")),
                Err(Error::NotFound(_)) => say(&format!("get {arg} notfound")),
                Err(e) => die(rank, "get", &e),
            },
            "barrier" => check(self.client().barrier(), "barrier"),
            "finalize" => {
                check(self.client().finalize(), "finalize");
                self.finalized = true;
            }
            "nofinalize" => self.finalize_at_end = false,
            "bigput" => {
                let c = self.client();
                let v = "x".repeat(c.max_value_len() + 1);
                match c.put("big", &v) {
                    Err(Error::Protocol(m)) => say(&format!("bigput rejected: {m}")),
                    other => die(rank, "bigput", &format!("not refused: {other:?}")),
                }
            }
            "raw" => self.raw(format!("{arg}\n").as_bytes()),
            "rawbin" => self.raw(b"\x00\xff\xfecmd=\x01put \x80key=\n"),
            "rawlong" => {
                let mut v = b"cmd=put key=long value=".to_vec();
                v.extend_from_slice(&[b'y'; 100_000]);
                v.push(b'\n');
                self.raw(&v);
            }
            "env" => {
                let v = std::env::var(arg).unwrap_or_else(|_| "unset".into());
                say(&format!("env[{rank}] {arg}={v}"));
            }
            "cat" => {
                for line in std::io::stdin().lock().lines() {
                    match line {
                        Ok(l) => say(&format!("stdin[{rank}]: {l}")),
                        Err(_) => break,
                    }
                }
                say(&format!("stdin[{rank}] eof"));
            }
            "lines" => {
                let (n, len) = arg.split_once(',').unwrap_or((arg, "40"));
                let n: usize = n.parse().unwrap_or(10);
                let len: usize = len.parse().unwrap_or(40);
                for i in 0..n {
                    let line = format!("rank {rank} line {i} {}\n", "x".repeat(len));
                    let b = line.as_bytes();
                    let third = b.len() / 3;
                    // Three write(2) calls per line, yielding in between, so that unprefixed
                    // output of several ranks would interleave mid-line.
                    for part in [&b[..third], &b[third..2 * third], &b[2 * third..]] {
                        write_fd(1, part);
                        std::thread::yield_now();
                    }
                }
            }
            "pieces" => {
                let num: Vec<usize> = arg.split(',').map(|v| v.parse().unwrap_or(1)).collect();
                let get = |i: usize, d: usize| num.get(i).copied().unwrap_or(d).max(1);
                let (n, len, k, fd) = (get(0, 10), get(1, 40), get(2, 3), get(3, 1));
                for i in 0..n {
                    let line = format!("rank {rank} fd {fd} line {i} {}\n", "x".repeat(len));
                    for part in line.as_bytes().chunks(line.len().div_ceil(k)) {
                        write_fd(fd as i32, part);
                        std::thread::yield_now();
                    }
                }
            }
            "shm" => {
                let kvs = self.client().kvsname().to_owned();
                let path = format!("/dev/shm/madmpi-{kvs}-probe-{rank}");
                if let Err(e) = std::fs::write(&path, b"segment") {
                    die(rank, "shm", &e);
                }
                say(&format!("shm {path}"));
            }
            "sleep" => std::thread::sleep(std::time::Duration::from_secs_f64(
                arg.parse().unwrap_or(1.0),
            )),
            "exit" => std::process::exit(arg.parse().unwrap_or(1)),
            "signal" => {
                let sig: i32 = arg.parse().unwrap_or(9);
                // SAFETY: raise has no memory-safety preconditions.
                unsafe { libc::raise(sig) };
                std::thread::sleep(std::time::Duration::from_secs(5));
            }
            "abort" => {
                let (code, msg) = arg.split_once(',').unwrap_or((arg, ""));
                let code: i32 = code.parse().unwrap_or(1);
                check(self.client().abort(code, msg), "abort");
                std::process::exit(code);
            }
            "stderr" => eprintln!("{arg}"),
            other => die(rank, "usage", &format!("unknown action '{other}'")),
        }
    }
}

fn write_fd(fd: i32, mut b: &[u8]) {
    while !b.is_empty() {
        // SAFETY: b is a valid slice; fd is ours (stdout or the PMI socket).
        let n = unsafe { libc::write(fd, b.as_ptr().cast(), b.len()) };
        if n <= 0 {
            return;
        }
        b = &b[n as usize..];
    }
}

fn read_fd(fd: i32, b: &mut [u8]) -> isize {
    // SAFETY: b is a valid mutable slice.
    unsafe { libc::read(fd, b.as_mut_ptr().cast(), b.len()) }
}

fn main() {
    let mut probe = Probe {
        client: None,
        finalize_at_end: true,
        finalized: false,
    };
    for action in std::env::args().skip(1) {
        let (ranks, body) = match action.strip_prefix('@').and_then(|a| a.split_once(':')) {
            Some((list, body)) => (
                Some(
                    list.split(',')
                        .filter_map(|r| r.parse::<u32>().ok())
                        .collect::<Vec<_>>(),
                ),
                body,
            ),
            None => (None, action.as_str()),
        };
        if ranks.is_some_and(|l| !l.contains(&probe.rank())) {
            continue;
        }
        let (name, arg) = body.split_once('=').unwrap_or((body, ""));
        probe.act(name, arg);
    }
    if probe.finalize_at_end && !probe.finalized {
        if let Some(c) = probe.client.as_mut() {
            if let Err(e) = c.finalize() {
                die(c.rank(), "finalize", &e);
            }
        }
    }
}
