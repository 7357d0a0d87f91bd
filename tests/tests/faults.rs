//! Faults while ranks talk: a rank killed with SIGKILL in the middle of traffic, `mpirun`
//! interrupted (SIGINT, SIGTERM), and foreign clients on the PMI port.
//!
//! The program is `tests/c/faults/traffic.c` (ring traffic with eager and rendezvous sizes on
//! every rank, forever or for N rounds), built with `bin/mpicc`, under `mpirun-test` (this
//! crate's build of the `mpirun` code). After a fault, `mpirun` must end within 5 seconds with
//! a message naming the dead rank, and leave no rank process, no listening socket of a rank,
//! and no `/dev/shm/madmpi-<kvsname>*` file. The same across hosts: `tests/multihost.rs`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

#[path = "../progs/launch_helpers.rs"]
mod helpers;

use helpers::{
    alive, assert_gone, listening_ports, program, shm_leftovers, start, start_held, traffic_field,
    traffic_pids, Finished, Running,
};

const MPIRUN: &str = env!("CARGO_BIN_EXE_mpirun-test");
const TRAFFIC: &str = "tests/c/faults/traffic.c";
/// How long `mpirun` may take to end the job after a fault.
const REACTION: Duration = Duration::from_secs(5);

/// One job at a time: four busy ranks already outnumber the cores.
fn serial() -> MutexGuard<'static, ()> {
    static L: Mutex<()> = Mutex::new(());
    L.lock().unwrap_or_else(|e| e.into_inner())
}

fn traffic_job(transports: Option<&str>, args: &[&str], prog_args: &[&str]) -> Running {
    let exe = program(TRAFFIC);
    let mut cmd = Command::new(MPIRUN);
    cmd.args(args).arg(exe).args(prog_args);
    match transports {
        Some(t) => cmd.env("MADMPI_TRANSPORTS", t),
        None => cmd.env_remove("MADMPI_TRANSPORTS"),
    };
    start(cmd)
}

/// Waits until all four ranks exchanged messages; returns their (rank, pid) and the kvsname.
fn wait_traffic(job: &mut Running) -> (Vec<(u32, i32)>, String) {
    let out = job.wait_output(Duration::from_secs(60), |s| {
        (0..4).all(|r| s.contains(&format!("traffic {r}\n")))
    });
    let pids = traffic_pids(&out);
    assert_eq!(pids.len(), 4, "{out}");
    let kvs = traffic_field(&out, 0, "jobid").expect("jobid line");
    assert!(kvs.starts_with("kvs_"), "{out}");
    (pids, kvs)
}

/// Nothing of the job is left: processes, listening sockets, shared memory.
fn assert_clean(pids: &[(u32, i32)], kvs: &str, o: &Finished, what: &str) {
    let all: Vec<i32> = pids.iter().map(|p| p.1).collect();
    assert_gone(&all, what);
    for &(r, pid) in pids {
        if let Some(ports) = listening_ports(pid) {
            assert!(
                ports.is_empty(),
                "{what}: rank {r} still listens on {ports:?}"
            );
        }
    }
    let shm = shm_leftovers(kvs);
    assert!(
        shm.is_empty(),
        "{what}: left {shm:?} in /dev/shm\n{}",
        o.dump()
    );
}

fn killed_rank_ends_the_job(transports: Option<&str>, victim: u32) {
    let _one = serial();
    let what = format!("rank {victim} killed ({})", transports.unwrap_or("shm"));
    let mut job = traffic_job(transports, &["-n", "4"], &[]);
    let (pids, kvs) = wait_traffic(&mut job);
    let pid = pids.iter().find(|p| p.0 == victim).expect("victim").1;
    let t = Instant::now();
    // SAFETY: kill has no memory-safety preconditions; the pid is a live rank of our job.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let o = job.finish(Duration::from_secs(30));
    let took = t.elapsed();
    println!("{what}: mpirun ended in {took:.2?}");
    assert!(
        o.code.is_some_and(|c| c != 0),
        "{what}: mpirun must fail\n{}",
        o.dump()
    );
    assert!(took < REACTION, "{what}: took {took:?}\n{}", o.dump());
    let line = format!("mpirun: rank {victim} (pid {pid}) killed by signal 9");
    assert!(
        o.stderr.contains(&line),
        "{what}: no '{line}' first\n{}",
        o.dump()
    );
    assert_eq!(o.code, Some(137), "{what}\n{}", o.dump());
    assert_clean(&pids, &kvs, &o, &what);
}

#[test]
fn killed_rank_ends_the_job_on_shm() {
    killed_rank_ends_the_job(None, 2);
}

#[test]
fn killed_rank_ends_the_job_on_tcp() {
    killed_rank_ends_the_job(Some("tcp"), 1);
}

/// Over libfabric (`ofi`, its default provider here: `tcp;ofi_rxm`). Skipped when libfabric's
/// development files are missing, as the library is then built without the transport.
#[test]
fn killed_rank_ends_the_job_on_ofi() {
    let found = Command::new("pkg-config")
        .args(["--exists", "libfabric"])
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        eprintln!("SKIP: no libfabric (pkg-config), the library has no ofi transport");
        return;
    }
    killed_rank_ends_the_job(Some("ofi"), 1);
}

#[test]
fn killed_rank_zero_ends_the_job_on_tcp() {
    // Rank 0 leads the ranks' process group: the rest must still be found and ended.
    killed_rank_ends_the_job(Some("tcp"), 0);
}

#[test]
fn interrupted_mpirun_stops_every_rank() {
    let _one = serial();
    for (transports, sig, code) in [
        (None, libc::SIGINT, 130),
        (None, libc::SIGTERM, 143),
        (Some("tcp"), libc::SIGINT, 130),
        (Some("tcp"), libc::SIGTERM, 143),
    ] {
        let what = format!("signal {sig} ({})", transports.unwrap_or("shm"));
        let mut job = traffic_job(transports, &["-n", "4"], &[]);
        let (pids, kvs) = wait_traffic(&mut job);
        let t = Instant::now();
        // SAFETY: kill has no memory-safety preconditions; the child is our live mpirun.
        unsafe { libc::kill(job.child.id() as i32, sig) };
        let o = job.finish(Duration::from_secs(30));
        let took = t.elapsed();
        println!("{what}: mpirun ended in {took:.2?}");
        assert_eq!(o.code, Some(code), "{what}\n{}", o.dump());
        assert!(took < REACTION, "{what}: took {took:?}");
        assert!(
            o.stderr.contains(&format!("caught signal {sig}")),
            "{what}\n{}",
            o.dump()
        );
        assert_clean(&pids, &kvs, &o, &what);
    }
}

/// `mpirun` killed with SIGKILL while its ranks run behind a wrapper (a shell that is mpirun's
/// child, the rank its grandchild): the kernel's parent-death signal reaches only the shell, and
/// the ranks, still talking to each other, must notice on their own that the launcher's
/// connection hung up, and end.
#[test]
fn sigkill_to_mpirun_ends_ranks_behind_a_wrapper() {
    let _one = serial();
    // The orphaned ranks come to us rather than to a pid 1 that may never reap them.
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    let exe = program(TRAFFIC);
    let mut cmd = Command::new(MPIRUN);
    cmd.args(["-n", "4", "sh", "-c", "\"$0\"; exit 0"])
        .arg(exe)
        .env_remove("MADMPI_TRANSPORTS");
    let mut job = start(cmd);
    let (pids, kvs) = wait_traffic(&mut job);
    job.child.kill().expect("SIGKILL mpirun");
    let t = Instant::now();
    let o = job.finish(Duration::from_secs(30));
    let all: Vec<i32> = pids.iter().map(|p| p.1).collect();
    while all.iter().any(|&p| alive(p)) && t.elapsed() < REACTION {
        std::thread::sleep(Duration::from_millis(20));
    }
    println!("ranks gone {:.2?} after mpirun", t.elapsed());
    let left: Vec<i32> = all.iter().copied().filter(|&p| alive(p)).collect();
    for &p in &left {
        // SAFETY: kill has no memory-safety preconditions; `p` is a rank of this test's job.
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
    // Reap what came to us (the ranks, and the shells if they were slower to go).
    std::thread::sleep(Duration::from_millis(100));
    // SAFETY: waitpid with a valid pointer to a local int.
    while unsafe { libc::waitpid(-1, &mut 0, libc::WNOHANG) } > 0 {}
    assert!(
        left.is_empty(),
        "ranks {left:?} outlived mpirun by {REACTION:?}"
    );
    let shm = shm_leftovers(&kvs);
    assert!(shm.is_empty(), "left {shm:?} in /dev/shm\n{}", o.dump());
}

/// Connects to the PMI port, sends `bytes`, and returns everything the server said until it
/// closed the connection (or 5 s passed).
fn foreign_client(port: &str, bytes: &[u8]) -> String {
    let mut s = TcpStream::connect(port).unwrap_or_else(|e| panic!("connect {port}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let _ = s.write_all(bytes);
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    String::from_utf8_lossy(&got).into_owned()
}

fn attack(port: &str) -> Vec<String> {
    let attempts: [&[u8]; 6] = [
        b"\x00\xff\xfe garbage\n",
        b"cmd=madmpi_auth token=00000000000000000000000000000000\n",
        b"cmd=initack pmiid=0\ncmd=init pmi_version=1 pmi_subversion=1\n",
        b"cmd=get kvsname=x key=madmpi_secret\n",
        b"cmd=barrier_in\n",
        b"cmd=abort exitcode=9\n",
    ];
    attempts
        .iter()
        .map(|a| {
            let reply = foreign_client(port, a);
            assert!(
                reply.starts_with("cmd=madmpi_auth_result rc=-1"),
                "{:?} got {reply:?}",
                String::from_utf8_lossy(a)
            );
            assert!(
                !reply.contains("value=") && !reply.contains("initack\n"),
                "leak: {reply:?}"
            );
            reply
        })
        .collect()
}

#[test]
fn foreign_pmi_clients_do_not_disturb_the_job() {
    let _one = serial();
    // The ranks wait 1.5 s before MPI_Init, so the first attack comes before any of them has
    // connected (and might have claimed a rank's place, without authentication). They hold
    // after their 20th round until the test closes rank 0's stdin, so the second attack comes
    // while the job runs (a job that had finished meanwhile let the kernel take a connection
    // its launcher would never read: an empty reply).
    let mut cmd = Command::new(MPIRUN);
    cmd.args(["--pmi-port", "-n", "4"])
        .arg(program(TRAFFIC))
        .args(["300", "1500", "hold"])
        .env_remove("MADMPI_TRANSPORTS");
    let mut job = start_held(cmd);
    let mpirun_pid = job.child.id() as i32;
    let t = Instant::now();
    let port = loop {
        match listening_ports(mpirun_pid) {
            None => {
                println!(
                    "SKIP foreign_pmi_clients_do_not_disturb_the_job: no `ss` to find the PMI port"
                );
                return;
            }
            Some(p) if !p.is_empty() => break p[0].clone(),
            Some(_) => {}
        }
        assert!(t.elapsed() < Duration::from_secs(10), "no PMI port");
        std::thread::sleep(Duration::from_millis(10));
    };
    // Held open, silent, for the whole job.
    let _silent = TcpStream::connect(&port).expect("connect");
    attack(&port);
    let (pids, kvs) = wait_traffic(&mut job);
    assert_eq!(
        traffic_field(&job.stdout(), 0, "pmi_port").as_deref(),
        Some(port.as_str())
    );
    attack(&port);
    drop(job.child.stdin.take());
    let o = job.finish(Duration::from_secs(60));
    assert_eq!(o.code, Some(0), "{}", o.dump());
    assert!(o.stdout.lines().any(|l| l == "OK traffic"), "{}", o.dump());
    assert_eq!(
        o.stderr.matches("refused a PMI connection").count(),
        12,
        "{}",
        o.dump()
    );
    assert_clean(&pids, &kvs, &o, "after the attacks");
}
