//! The PMI-1 requests a rank sends to its process manager, decoded into a typed [`Command`].
//!
//! The command set and the reply each command expects are those of MPICH's PMI-1 "simple"
//! protocol as Hydra and Slurm's `mpi/pmi2` plugin serve it. Server replies stay untyped
//! [`Message`]s: clients look at `cmd`, `rc` and one or two keys, and servers vary in what else
//! they add (Slurm adds `rc=0` everywhere, Hydra only where it must).

use crate::wire::{parse_message, Message, ParseError};

/// The PMI version this crate speaks.
pub const PMI_VERSION: i32 = 1;
/// The PMI subversion this crate speaks.
pub const PMI_SUBVERSION: i32 = 1;

/// One request from a rank to the process manager.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `cmd=init pmi_version= pmi_subversion=`; reply `response_to_init`.
    Init {
        /// Requested version (1 for PMI-1; PMI-2 clients ask for 2 on the same wire first).
        pmi_version: i32,
        /// Requested subversion.
        pmi_subversion: i32,
    },
    /// `cmd=initack pmiid=` (PMI_PORT connections identify themselves); reply `initack` then
    /// `set size=`, `set rank=`, `set debug=`.
    InitAck {
        /// The `PMI_ID` the launcher gave this rank.
        pmiid: i32,
    },
    /// `cmd=get_maxes`; reply `maxes kvsname_max= keylen_max= vallen_max=`.
    GetMaxes,
    /// `cmd=get_appnum`; reply `appnum appnum=`.
    GetAppnum,
    /// `cmd=get_my_kvsname`; reply `my_kvsname kvsname=`.
    GetMyKvsname,
    /// `cmd=get_universe_size`; reply `universe_size size=`.
    GetUniverseSize,
    /// `cmd=put kvsname= key= value=`; reply `put_result rc=`.
    Put {
        /// The key-value space (optional in PMI 1.1).
        kvsname: Option<String>,
        /// The key.
        key: String,
        /// The value (may be empty).
        value: String,
    },
    /// `cmd=get kvsname= key=`; reply `get_result rc= value=`.
    Get {
        /// The key-value space (optional in PMI 1.1).
        kvsname: Option<String>,
        /// The key.
        key: String,
    },
    /// `cmd=barrier_in`; reply `barrier_out` once every rank has entered.
    BarrierIn,
    /// `cmd=finalize`; reply `finalize_ack`.
    Finalize,
    /// `cmd=abort exitcode= message=`; no reply: the job is torn down.
    Abort {
        /// The exit code the job should end with (1 when absent, per PMI 1.1).
        exitcode: i32,
        /// Why, when the client said.
        message: Option<String>,
    },
    /// `cmd=publish_name service= port=`; reply `publish_result`.
    PublishName {
        /// Service name.
        service: String,
        /// Port string.
        port: String,
    },
    /// `cmd=unpublish_name service=`; reply `unpublish_result`.
    UnpublishName {
        /// Service name.
        service: String,
    },
    /// `cmd=lookup_name service=`; reply `lookup_result port=`.
    LookupName {
        /// Service name.
        service: String,
    },
    /// `cmd=madmpi_auth token=` (madmpi extension): the first line on a `PMI_PORT` connection
    /// to our `mpirun`, proving the connection comes from one of the job's ranks; reply
    /// `madmpi_auth_result rc=`. Sent by the client only when `MADMPI_PMI_TOKEN` is set.
    Auth {
        /// The job's PMI token, from `MADMPI_PMI_TOKEN`.
        token: String,
    },
    /// One `mcmd=spawn` block; a `spawn_result` is due after the last block of a request.
    Spawn {
        /// Number of blocks in this spawn request.
        totspawns: i32,
        /// Which block this is, from 1.
        spawnssofar: i32,
        /// What to start.
        block: Box<SpawnBlock>,
    },
}

/// One command of a PMI-1 spawn request (one `mcmd=spawn` block): `nprocs=`, `execname=`,
/// `argcnt=` and `arg1=`…, `preput_num=` and `preput_key_0=`/`preput_val_0=`…, `info_num=`
/// and `info_key_0=`/`info_val_0=`….
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpawnBlock {
    /// Processes to start.
    pub nprocs: i32,
    /// The program.
    pub execname: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Keys the children find in their KVS (`PARENT_ROOT_PORT_NAME`: the parent's port).
    pub preput: Vec<(String, String)>,
    /// The info keys of the command (`host`, `wdir`, `path`, ...).
    pub info: Vec<(String, String)>,
}

impl Command {
    /// The wire name (`put`, `barrier_in`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Command::Init { .. } => "init",
            Command::InitAck { .. } => "initack",
            Command::GetMaxes => "get_maxes",
            Command::GetAppnum => "get_appnum",
            Command::GetMyKvsname => "get_my_kvsname",
            Command::GetUniverseSize => "get_universe_size",
            Command::Put { .. } => "put",
            Command::Get { .. } => "get",
            Command::BarrierIn => "barrier_in",
            Command::Finalize => "finalize",
            Command::Abort { .. } => "abort",
            Command::PublishName { .. } => "publish_name",
            Command::UnpublishName { .. } => "unpublish_name",
            Command::LookupName { .. } => "lookup_name",
            Command::Auth { .. } => "madmpi_auth",
            Command::Spawn { .. } => "spawn",
        }
    }

    /// The `cmd=` of the reply a client waits for (`None` for `abort`, which gets none).
    pub fn reply_name(&self) -> Option<&'static str> {
        reply_name_for(self.name())
    }

    /// The request as a message, ready to [`encode`](Message::encode).
    pub fn to_message(&self) -> Message {
        let m = Message::new(self.name());
        match self {
            Command::Init {
                pmi_version,
                pmi_subversion,
            } => m
                .arg("pmi_version", pmi_version)
                .arg("pmi_subversion", pmi_subversion),
            Command::InitAck { pmiid } => m.arg("pmiid", pmiid),
            Command::Auth { token } => m.arg("token", token),
            Command::GetMaxes
            | Command::GetAppnum
            | Command::GetMyKvsname
            | Command::GetUniverseSize
            | Command::BarrierIn
            | Command::Finalize => m,
            Command::Put {
                kvsname,
                key,
                value,
            } => {
                let m = match kvsname {
                    Some(k) => m.arg("kvsname", k),
                    None => m,
                };
                m.arg("key", key).arg("value", value)
            }
            Command::Get { kvsname, key } => {
                let m = match kvsname {
                    Some(k) => m.arg("kvsname", k),
                    None => m,
                };
                m.arg("key", key)
            }
            Command::Abort { exitcode, message } => {
                let m = m.arg("exitcode", exitcode);
                match message {
                    Some(msg) => m.arg("message", msg),
                    None => m,
                }
            }
            Command::PublishName { service, port } => m.arg("service", service).arg("port", port),
            Command::UnpublishName { service } | Command::LookupName { service } => {
                m.arg("service", service)
            }
            Command::Spawn {
                totspawns,
                spawnssofar,
                block,
            } => {
                let mut m = m
                    .arg("nprocs", block.nprocs)
                    .arg("execname", &block.execname)
                    .arg("totspawns", totspawns)
                    .arg("spawnssofar", spawnssofar)
                    .arg("argcnt", block.args.len());
                for (i, a) in block.args.iter().enumerate() {
                    m = m.arg(&format!("arg{}", i + 1), a);
                }
                m = m.arg("preput_num", block.preput.len());
                for (i, (k, v)) in block.preput.iter().enumerate() {
                    m = m
                        .arg(&format!("preput_key_{i}"), k)
                        .arg(&format!("preput_val_{i}"), v);
                }
                m = m.arg("info_num", block.info.len());
                for (i, (k, v)) in block.info.iter().enumerate() {
                    m = m
                        .arg(&format!("info_key_{i}"), k)
                        .arg(&format!("info_val_{i}"), v);
                }
                m.mcmd = true;
                m
            }
        }
    }

    /// The request as wire bytes, `\n` included.
    pub fn encode(&self) -> Vec<u8> {
        self.to_message().encode()
    }

    /// Decodes a message already split into tokens.
    pub fn from_message(m: &Message) -> Result<Command, ParseError> {
        let cmd = m.cmd.as_str();
        let req = |key: &'static str| -> Result<String, ParseError> {
            m.get(key).map(str::to_owned).ok_or(ParseError::MissingArg {
                cmd: cmd.to_owned(),
                key,
            })
        };
        let int = |key: &'static str, default: Option<i32>| -> Result<i32, ParseError> {
            match m.get(key) {
                Some(v) => v.trim().parse::<i32>().map_err(|_| ParseError::BadInteger {
                    cmd: cmd.to_owned(),
                    key,
                    value: v.to_owned(),
                }),
                None => default.ok_or(ParseError::MissingArg {
                    cmd: cmd.to_owned(),
                    key,
                }),
            }
        };
        if m.mcmd {
            return match cmd {
                "spawn" => {
                    let text = |k: &str| m.get(k).unwrap_or("").to_owned();
                    let count = |k: &str| -> Result<usize, ParseError> {
                        let v = m.get(k).unwrap_or("0").trim();
                        v.parse::<usize>()
                            .ok()
                            .filter(|&n| n <= 4096)
                            .ok_or_else(|| ParseError::BadInteger {
                                cmd: cmd.to_owned(),
                                key: "argcnt/preput_num/info_num",
                                value: v.to_owned(),
                            })
                    };
                    let pairs = |n: usize, key: &str, val: &str| {
                        (0..n)
                            .map(|i| (text(&format!("{key}{i}")), text(&format!("{val}{i}"))))
                            .collect::<Vec<_>>()
                    };
                    let block = SpawnBlock {
                        nprocs: int("nprocs", Some(1))?,
                        execname: text("execname"),
                        args: (1..=count("argcnt")?)
                            .map(|i| text(&format!("arg{i}")))
                            .collect(),
                        preput: pairs(count("preput_num")?, "preput_key_", "preput_val_"),
                        info: pairs(count("info_num")?, "info_key_", "info_val_"),
                    };
                    Ok(Command::Spawn {
                        totspawns: int("totspawns", Some(1))?,
                        spawnssofar: int("spawnssofar", Some(1))?,
                        block: Box::new(block),
                    })
                }
                _ => Err(ParseError::UnknownCommand(cmd.to_owned())),
            };
        }
        Ok(match cmd {
            "init" => Command::Init {
                pmi_version: int("pmi_version", None)?,
                pmi_subversion: int("pmi_subversion", Some(0))?,
            },
            "initack" => Command::InitAck {
                pmiid: int("pmiid", None)?,
            },
            "get_maxes" => Command::GetMaxes,
            "get_appnum" => Command::GetAppnum,
            "get_my_kvsname" => Command::GetMyKvsname,
            "get_universe_size" => Command::GetUniverseSize,
            "put" => Command::Put {
                kvsname: m.get("kvsname").map(str::to_owned),
                key: req("key")?,
                // `value=` with nothing after it is an empty value, not a missing one.
                value: req("value")?,
            },
            "get" => Command::Get {
                kvsname: m.get("kvsname").map(str::to_owned),
                key: req("key")?,
            },
            "barrier_in" => Command::BarrierIn,
            "finalize" => Command::Finalize,
            "abort" => Command::Abort {
                exitcode: int("exitcode", Some(1))?,
                message: m.get("message").map(str::to_owned),
            },
            "publish_name" => Command::PublishName {
                service: req("service")?,
                port: req("port")?,
            },
            "unpublish_name" => Command::UnpublishName {
                service: req("service")?,
            },
            "lookup_name" => Command::LookupName {
                service: req("service")?,
            },
            "madmpi_auth" => Command::Auth {
                token: req("token")?,
            },
            other => return Err(ParseError::UnknownCommand(other.to_owned())),
        })
    }
}

/// The reply name a client waits for after sending command `cmd`, for the commands of PMI-1
/// (including those this crate does not decode, so that a server can refuse them properly).
pub fn reply_name_for(cmd: &str) -> Option<&'static str> {
    Some(match cmd {
        "init" => "response_to_init",
        "initack" => "initack",
        "get_maxes" => "maxes",
        "get_appnum" => "appnum",
        "get_my_kvsname" => "my_kvsname",
        "get_universe_size" => "universe_size",
        "put" => "put_result",
        "get" => "get_result",
        "barrier_in" => "barrier_out",
        "finalize" => "finalize_ack",
        "publish_name" => "publish_result",
        "unpublish_name" => "unpublish_result",
        "lookup_name" => "lookup_result",
        "spawn" => "spawn_result",
        "singinit" => "singinit_info",
        "create_kvs" => "newkvs",
        "destroy_kvs" => "kvs_destroyed",
        "getbyidx" => "getbyidx_results",
        "madmpi_auth" => "madmpi_auth_result",
        _ => return None,
    })
}

/// Decodes one request line (or `mcmd` block) from a rank. Never panics, whatever the bytes.
pub fn parse_line(line: &[u8]) -> Result<Command, ParseError> {
    Command::from_message(&parse_message(line)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::tests::XorShift;

    #[test]
    fn decodes_every_command() {
        let cases: &[(&[u8], Command)] = &[
            (
                b"cmd=init pmi_version=1 pmi_subversion=1\n",
                Command::Init {
                    pmi_version: 1,
                    pmi_subversion: 1,
                },
            ),
            (b"cmd=initack pmiid=3", Command::InitAck { pmiid: 3 }),
            (b"cmd=get_maxes", Command::GetMaxes),
            (b"cmd=get_appnum", Command::GetAppnum),
            (b"cmd=get_my_kvsname", Command::GetMyKvsname),
            (b"cmd=get_universe_size", Command::GetUniverseSize),
            (
                b"cmd=put kvsname=k key=a value=b",
                Command::Put {
                    kvsname: Some("k".into()),
                    key: "a".into(),
                    value: "b".into(),
                },
            ),
            (
                b"cmd=put key=a value=",
                Command::Put {
                    kvsname: None,
                    key: "a".into(),
                    value: "".into(),
                },
            ),
            (
                b"cmd=get kvsname=k key=a",
                Command::Get {
                    kvsname: Some("k".into()),
                    key: "a".into(),
                },
            ),
            (b"cmd=barrier_in", Command::BarrierIn),
            (b"cmd=finalize", Command::Finalize),
            (
                b"cmd=abort exitcode=7",
                Command::Abort {
                    exitcode: 7,
                    message: None,
                },
            ),
            (
                b"cmd=abort",
                Command::Abort {
                    exitcode: 1,
                    message: None,
                },
            ),
            (
                b"cmd=abort exitcode=-2 message=it\\ broke",
                Command::Abort {
                    exitcode: -2,
                    message: Some("it broke".into()),
                },
            ),
            (
                b"cmd=publish_name service=s port=p",
                Command::PublishName {
                    service: "s".into(),
                    port: "p".into(),
                },
            ),
            (
                b"cmd=unpublish_name service=s",
                Command::UnpublishName {
                    service: "s".into(),
                },
            ),
            (
                b"cmd=lookup_name service=s",
                Command::LookupName {
                    service: "s".into(),
                },
            ),
            (
                b"cmd=madmpi_auth token=0a1b",
                Command::Auth {
                    token: "0a1b".into(),
                },
            ),
            (
                b"mcmd=spawn\nnprocs=1\nexecname=a\ntotspawns=2\nspawnssofar=1\nendcmd\n",
                Command::Spawn {
                    totspawns: 2,
                    spawnssofar: 1,
                    block: Box::new(SpawnBlock {
                        nprocs: 1,
                        execname: "a".into(),
                        ..Default::default()
                    }),
                },
            ),
            (
                b"mcmd=spawn\nnprocs=3\nexecname=/bin/p q\ntotspawns=1\nspawnssofar=1\n\
                  argcnt=2\narg1=x y\narg2=-z\npreput_num=1\npreput_key_0=PARENT_ROOT_PORT_NAME\n\
                  preput_val_0=madmpi-port:1.2.3.4:5/ab\ninfo_num=1\ninfo_key_0=wdir\n\
                  info_val_0=/tmp\nendcmd\n",
                Command::Spawn {
                    totspawns: 1,
                    spawnssofar: 1,
                    block: Box::new(SpawnBlock {
                        nprocs: 3,
                        execname: "/bin/p q".into(),
                        args: vec!["x y".into(), "-z".into()],
                        preput: vec![(
                            "PARENT_ROOT_PORT_NAME".into(),
                            "madmpi-port:1.2.3.4:5/ab".into(),
                        )],
                        info: vec![("wdir".into(), "/tmp".into())],
                    }),
                },
            ),
        ];
        for (line, want) in cases {
            let got = parse_line(line)
                .unwrap_or_else(|e| panic!("{}: {e}", String::from_utf8_lossy(line)));
            assert_eq!(&got, want);
            assert_eq!(parse_line(&want.encode()).as_ref(), Ok(want));
        }
    }

    #[test]
    fn rejects_bad_commands() {
        assert_eq!(
            parse_line(b"cmd=bogus a=b"),
            Err(ParseError::UnknownCommand("bogus".into()))
        );
        assert_eq!(
            parse_line(b"cmd=put key=a"),
            Err(ParseError::MissingArg {
                cmd: "put".into(),
                key: "value"
            })
        );
        assert_eq!(
            parse_line(b"cmd=init pmi_version=x"),
            Err(ParseError::BadInteger {
                cmd: "init".into(),
                key: "pmi_version",
                value: "x".into()
            })
        );
        assert_eq!(
            parse_line(b"cmd=abort exitcode=99999999999"),
            Err(ParseError::BadInteger {
                cmd: "abort".into(),
                key: "exitcode",
                value: "99999999999".into()
            })
        );
        assert_eq!(
            parse_line(b"mcmd=frobnicate\nendcmd\n"),
            Err(ParseError::UnknownCommand("frobnicate".into()))
        );
        assert_eq!(
            parse_line(b"cmd=get_maxes").unwrap().reply_name(),
            Some("maxes")
        );
        assert_eq!(parse_line(b"cmd=abort").unwrap().reply_name(), None);
    }

    #[test]
    fn property_parse_line_never_panics() {
        let alphabet: &[u8] =
            b"cmd=mcmd=put get key=value=kvsname=exitcode=-0123456789 \\\n\tendcmd";
        let mut rng = XorShift(0xdead_beef_cafe_f00d);
        for _ in 0..50_000 {
            let input = rng.bytes(200, alphabet);
            let _ = parse_line(&input);
        }
        // And mutations of valid lines.
        let seeds: &[&[u8]] = &[
            b"cmd=put kvsname=kvs_1_2 key=business-card-0 value=tcp:127.0.0.1:4567",
            b"cmd=init pmi_version=1 pmi_subversion=1",
            b"mcmd=spawn\nnprocs=1\nexecname=a\nendcmd\n",
        ];
        for seed in seeds {
            for _ in 0..10_000 {
                let mut v = seed.to_vec();
                for _ in 0..(rng.next() % 4 + 1) {
                    let r = rng.next() as usize;
                    match r % 3 {
                        0 if !v.is_empty() => {
                            let i = (r >> 2) % v.len();
                            v[i] = (r >> 12) as u8;
                        }
                        1 if !v.is_empty() => {
                            v.remove((r >> 2) % v.len());
                        }
                        _ => v.insert((r >> 2) % (v.len() + 1), (r >> 12) as u8),
                    }
                }
                let _ = parse_line(&v);
            }
        }
    }
}
