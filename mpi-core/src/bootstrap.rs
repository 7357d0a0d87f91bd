//! Start-up of the drivers through the launcher (PMI): which drivers reach which peers, the
//! three phases of the registry ([`madmpi_transports::registry`]) between two barriers, and the
//! address cards. Loops over the registry: no driver is named here.
//!
//! Every rank makes the same PMI calls in the same order, whatever its drivers — in particular
//! exactly two barriers — so that ranks alone on their host and ranks sharing one agree:
//! 1. each driver's phase 1 (the node leader creates the shared segment); rank 0 draws a job
//!    secret if the launcher gave none (foreign launchers: Hydra, Slurm);
//! 2. barrier; phase 2 (the others attach, listeners open); a rank whose drivers have cards
//!    publishes them in one key, `madmpi-cards-<rank>` = `host;name=card;…`;
//! 3. barrier; phase 3 (cards of the peers read, segment names removed so that nothing
//!    outlives the job).

use std::collections::HashMap;

use madmpi_pmi::Client;
use madmpi_transports::registry::{self, Job, Scope, Starting};

use crate::engine::Drivers;
use crate::error::{err, Error, ErrorClass, Result};

/// What the drivers' start-up gives the engine.
pub(crate) struct Started {
    pub drivers: Drivers,
    /// The host of every rank.
    pub hosts: Vec<String>,
    /// The drivers `MADMPI_RAILS` lets carry traffic beside the best one.
    pub rails: Vec<&'static str>,
}

/// The drivers `var` allows (every one when unset), checked against the registry.
fn env_list(var: &str) -> Result<Option<Vec<&'static str>>> {
    match std::env::var(var) {
        Ok(v) => Ok(Some(
            registry::parse_list(var, &v)
                .map_err(|e| Error::new(ErrorClass::Arg, e.to_string()))?,
        )),
        Err(_) => Ok(None),
    }
}

/// The drivers of a process without a launcher (a singleton): `self` alone.
pub(crate) fn singleton() -> Result<Drivers> {
    let job = Job {
        me: 0,
        n: 1,
        local: &[0],
        shm_prefix: "madmpi-singleton",
        multi_host: false,
        secret: None,
        engine_version: crate::wire::VERSION,
    };
    let mut s = registry::start("self", 0, &job)?;
    s.open(&job)?;
    Ok(Drivers {
        list: vec![s.finish(&job, &[], &mut |_| unreachable!("self has no peers"))?],
        families: vec!["self"],
    })
}

/// The drivers of a job started by a PMI launcher, rank `me` of `n` on host `host`, whose node
/// holds the ranks `local`.
pub(crate) fn start(p: &mut Client, me: u32, n: u32, host: &str, local: &[u32]) -> Result<Started> {
    let allowed = env_list("MADMPI_TRANSPORTS")?;
    let rails = env_list("MADMPI_RAILS")?.unwrap_or_default();
    let multi_host = local.len() < n as usize;
    // Unlisted, a driver starts if it does by default (ofi only across hosts, with a fast
    // provider) or MADMPI_RAILS names it.
    let allows = |e: &registry::Entry| {
        e.name == "self"
            || match &allowed {
                Some(a) => a.contains(&e.name),
                None => rails.contains(&e.name) || (e.by_default)(multi_host),
            }
    };
    let on_node = |r: u32| local.contains(&r);

    // Which peers each driver reaches: the best one that can, and those MADMPI_RAILS adds.
    let mut plan: Vec<(&'static str, Vec<u32>)> = Vec::new();
    let mut reached = vec![false; n as usize];
    for e in registry::ENTRIES.iter().filter(|e| allows(e)) {
        let can = |r: u32| match e.scope {
            Scope::Itself => r == me,
            Scope::Node => r != me && on_node(r) && local.len() >= 2,
            Scope::Any => r != me,
        };
        let peers: Vec<u32> = (0..n)
            .filter(|&r| can(r) && (!reached[r as usize] || rails.contains(&e.name)))
            .collect();
        for &r in &peers {
            reached[r as usize] = true;
        }
        if e.scope == Scope::Itself || !peers.is_empty() {
            plan.push((e.name, peers));
        }
    }
    if let Some(r) = reached.iter().position(|&x| !x) {
        return err(
            ErrorClass::Intern,
            format!(
                "no transport reaches rank {r} ({}): MADMPI_TRANSPORTS={} allows none that does",
                if on_node(r as u32) {
                    "on this host"
                } else {
                    "on another host"
                },
                std::env::var("MADMPI_TRANSPORTS").unwrap_or_default()
            ),
        );
    }
    let names: Vec<&str> = plan.iter().map(|(n, _)| *n).collect();
    tracing::debug!(%host, ?local, drivers = ?names, ?rails, "transports");

    let prefix = madmpi_pmi::shm_prefix(p.kvsname());
    let mut job = Job {
        me,
        n,
        local,
        shm_prefix: &prefix,
        multi_host,
        secret: None,
        engine_version: crate::wire::VERSION,
    };

    // Phase 1 (a driver may run several instances: one TCP driver per interface).
    let mut starting: Vec<(Starting, &'static str, &Vec<u32>)> = Vec::with_capacity(plan.len());
    for (name, peers) in &plan {
        for k in 0..registry::instances(name)? {
            starting.push((registry::start(name, k, &job)?, name, peers));
        }
    }
    let launcher_secret = match p.get("madmpi_secret") {
        Ok(s) => Some(s),
        Err(madmpi_pmi::Error::NotFound(_)) => None,
        Err(e) => return Err(e.into()),
    };
    if launcher_secret.is_none() && me == 0 {
        p.put("madmpi_secret_r0", &hex(&random_bytes::<32>()?))?;
    }
    p.barrier()?;

    // Phase 2.
    let needs_secret = plan
        .iter()
        .any(|(name, _)| registry::entry(name).is_some_and(|e| e.needs_secret));
    if needs_secret {
        let secret_hex = match launcher_secret {
            Some(s) => s,
            None => p.get("madmpi_secret_r0")?,
        };
        job.secret = Some(
            unhex32(&secret_hex)
                .ok_or_else(|| Error::new(ErrorClass::Intern, "PMI: malformed job secret"))?,
        );
    }
    let mut cards = String::new();
    for (s, _, _) in &mut starting {
        if let Some(card) = s.open(&job)? {
            cards.push_str(&format!(";{}={card}", s.name()));
        }
    }
    if !cards.is_empty() {
        p.put(&format!("madmpi-cards-{me}"), &format!("{host}{cards}"))?;
    }
    p.barrier()?;

    // Phase 3.
    let mut hosts = vec![String::new(); n as usize];
    for &r in local {
        hosts[r as usize] = host.to_owned();
    }
    let mut seen: HashMap<u32, String> = HashMap::new();
    let mut list = Vec::with_capacity(starting.len());
    let mut families = Vec::with_capacity(starting.len());
    for (s, family, peers) in starting {
        let name = s.name();
        let mut card_of = |peer: u32| -> madmpi_transports::Result<String> {
            let v = match seen.entry(peer) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => e.insert(
                    p.get(&format!("madmpi-cards-{peer}"))
                        .map_err(|e| madmpi_transports::Error::Invalid(e.to_string()))?,
                ),
            };
            let mut fields = v.split(';');
            let h = fields.next().unwrap_or_default();
            hosts[peer as usize] = h.to_owned();
            fields
                .find_map(|f| f.strip_prefix(name).and_then(|x| x.strip_prefix('=')))
                .map(str::to_owned)
                .ok_or_else(|| {
                    madmpi_transports::Error::Invalid(format!(
                        "PMI: rank {peer} published no {name} address: {v}"
                    ))
                })
        };
        list.push(s.finish(&job, peers, &mut card_of)?);
        families.push(family);
    }
    Ok(Started {
        drivers: Drivers { list, families },
        hosts,
        rails,
    })
}

fn random_bytes<const N: usize>() -> Result<[u8; N]> {
    let mut b = [0u8; N];
    let mut filled = 0;
    while filled < N {
        // SAFETY: getrandom writes at most N - filled bytes into the rest of `b`.
        let r = unsafe { libc::getrandom(b[filled..].as_mut_ptr().cast(), N - filled, 0) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return err(ErrorClass::Intern, format!("getrandom: {e}"));
            }
            continue;
        }
        filled += r as usize;
    }
    Ok(b)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex32(s: &str) -> Option<[u8; 32]> {
    let s = s.trim();
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}
