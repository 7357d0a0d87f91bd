//! `fake-ssh COMMAND [ARGS...]`: runs a command the way `ssh host command` runs it remotely, for
//! the launcher's multi-host tests (no ssh server needed):
//!
//! - the command runs in a session of its own, so signals sent to `fake-ssh` or to its process
//!   group (as `mpirun` does) never reach it, as they never cross an ssh connection;
//! - its stdin is a pipe fed from `fake-ssh`'s stdin: when `fake-ssh` dies (however), the
//!   command sees end-of-file, as the remote side sees the connection close;
//! - its stdout and stderr are `fake-ssh`'s;
//! - `fake-ssh` exits with the command's exit code, or 255 when it was killed by a signal
//!   (what OpenSSH reports).

use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        eprintln!("usage: fake-ssh COMMAND [ARGS...]");
        std::process::exit(255);
    }
    let mut cmd = Command::new(&args[0]);
    cmd.args(&args[1..]).stdin(Stdio::piped());
    // SAFETY: setsid is async-signal-safe and needs no arguments.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("fake-ssh: cannot run {}: {e}", args[0]);
            std::process::exit(255);
        }
    };
    let mut to_child = child.stdin.take().expect("piped");
    std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        let mut input = std::io::stdin().lock();
        loop {
            match input.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if to_child.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            }
        }
    });
    let status = child.wait().expect("wait");
    std::process::exit(match (status.code(), status.signal()) {
        (Some(c), _) => c,
        _ => 255,
    });
}
