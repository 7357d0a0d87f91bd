//! Where the ranks run: host lists (`--host`, `--hostfile`), which names mean this machine, and
//! the placement of ranks on hosts. Pure: names and numbers in, a [`Placement`] out.
//!
//! Placement is by blocks, as Hydra and Open MPI do by default: the first host gets as many
//! consecutive ranks as it has slots, then the next host, and so on; when every host is full and
//! ranks remain, the round starts again at the first host. `-ppn K` gives every host K slots.
//! A host listed twice (or two names for this machine) is one host with the slots added up.

use madmpi_pmi::ProcessMapping;

/// One host as the user named it, with its slot count when given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostEntry {
    /// The name handed to the remote-start command (`ssh`), or a name of this machine.
    pub name: String,
    /// `host:K` or `host slots=K`; `None` counts as one slot.
    pub slots: Option<u32>,
}

/// A host of the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// The first name it was given by.
    pub name: String,
    /// This machine: ranks start directly, without the remote-start command.
    pub local: bool,
    /// Its ranks, increasing.
    pub ranks: Vec<u32>,
}

/// Which host every rank runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The hosts that run at least one rank, in the order they were listed (this is the node
    /// id order of `PMI_process_mapping`).
    pub hosts: Vec<Host>,
    /// The index in `hosts` of every rank.
    pub host_of: Vec<usize>,
}

fn parse_slots(what: &str, s: &str) -> Result<u32, String> {
    s.trim()
        .parse::<u32>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("{what}: '{s}' is not a positive number of slots"))
}

fn check_name(what: &str, name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err(format!("{what}: empty host name"));
    }
    // The name becomes an argument of the remote-start command: keep it a plain word.
    if name.starts_with('-') || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("{what}: '{name}' is not a host name"));
    }
    Ok(())
}

/// `a,b:2,c` (`--host`, `--hosts`): each name with an optional `:slots`. A bare IPv6 address
/// has colons of its own; write it in brackets (`[fd00::1]:2`) to give it slots.
pub fn parse_host_list(list: &str) -> Result<Vec<HostEntry>, String> {
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        out.push(parse_host_item(item, &format!("host list '{list}'"))?);
    }
    if out.is_empty() {
        return Err(format!("host list '{list}' names no host"));
    }
    Ok(out)
}

fn parse_host_item(item: &str, what: &str) -> Result<HostEntry, String> {
    let (name, slots) = if let Some(rest) = item.strip_prefix('[') {
        let (addr, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("{what}: unclosed '[' in '{item}'"))?;
        match after.strip_prefix(':') {
            Some(n) => (addr, Some(parse_slots(what, n)?)),
            None if after.is_empty() => (addr, None),
            None => return Err(format!("{what}: unexpected '{after}' after '[{addr}]'")),
        }
    } else if item.matches(':').count() > 1 {
        // An IPv6 address without slots.
        (item, None)
    } else {
        match item.split_once(':') {
            Some((n, k)) => (n, Some(parse_slots(what, k)?)),
            None => (item, None),
        }
    };
    check_name(what, name)?;
    Ok(HostEntry {
        name: name.to_owned(),
        slots,
    })
}

/// A host file: one host per line, `host`, `host:slots` or `host slots=K` (also Open MPI's
/// `max_slots=`, ignored); `#` starts a comment; blank lines are skipped.
pub fn parse_hostfile(text: &str, path: &str) -> Result<Vec<HostEntry>, String> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let what = format!("{path}:{}", i + 1);
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or_default();
        let mut entry = parse_host_item(first, &what)?;
        for w in words {
            let (k, v) = w
                .split_once('=')
                .ok_or_else(|| format!("{what}: unexpected '{w}' (expected slots=K)"))?;
            match k {
                "slots" | "cpu" | "cpus" => {
                    if entry.slots.is_some() {
                        return Err(format!("{what}: slots given twice"));
                    }
                    entry.slots = Some(parse_slots(&what, v)?);
                }
                "max_slots" | "max-slots" => {}
                _ => return Err(format!("{what}: unknown attribute '{k}'")),
            }
        }
        out.push(entry);
    }
    if out.is_empty() {
        return Err(format!("{path}: no host in the file"));
    }
    Ok(out)
}

/// Whether `name` means this machine, whose host name is `hostname`: `localhost`, a loopback
/// address, the host name, or its first label.
pub fn is_local_name(name: &str, hostname: &str) -> bool {
    let name = name.trim().to_ascii_lowercase();
    let hostname = hostname.trim().to_ascii_lowercase();
    if name == "localhost" || name == "localhost.localdomain" || name == "::1" {
        return true;
    }
    if let Ok(std::net::IpAddr::V4(a)) = name.parse::<std::net::IpAddr>() {
        return a.is_loopback();
    }
    if hostname.is_empty() {
        return false;
    }
    let short = |s: &str| s.split('.').next().unwrap_or_default().to_owned();
    name == hostname
        || name == short(&hostname)
        || (!hostname.contains('.') && short(&name) == hostname)
}

/// The number of ranks when `-n` is not given: the total of the slots (`-ppn` slots per host).
pub fn default_np(entries: &[HostEntry], ppn: Option<u32>, is_local: &dyn Fn(&str) -> bool) -> u32 {
    merge(entries, is_local)
        .iter()
        .map(|(_, _, slots)| ppn.unwrap_or(*slots))
        .fold(0u32, u32::saturating_add)
}

/// Merges entries naming the same host: (name, local, slots). Every name of this machine is
/// one host.
fn merge(entries: &[HostEntry], is_local: &dyn Fn(&str) -> bool) -> Vec<(String, bool, u32)> {
    let mut out: Vec<(String, bool, u32)> = Vec::new();
    for e in entries {
        let local = is_local(&e.name);
        let slots = e.slots.unwrap_or(1);
        let same = out
            .iter_mut()
            .find(|(n, l, _)| (local && *l) || n.eq_ignore_ascii_case(&e.name));
        match same {
            Some(h) => h.2 = h.2.saturating_add(slots),
            None => out.push((e.name.clone(), local, slots)),
        }
    }
    out
}

impl Placement {
    /// Every rank on this machine.
    pub fn single(np: u32) -> Placement {
        Placement {
            hosts: vec![Host {
                name: "localhost".into(),
                local: true,
                ranks: (0..np).collect(),
            }],
            host_of: vec![0; np as usize],
        }
    }

    /// Places `np` ranks on `entries` by blocks (see the module documentation).
    pub fn plan(
        entries: &[HostEntry],
        np: u32,
        ppn: Option<u32>,
        is_local: &dyn Fn(&str) -> bool,
    ) -> Result<Placement, String> {
        if ppn == Some(0) {
            return Err("-ppn must be positive".into());
        }
        let merged = merge(entries, is_local);
        if merged.is_empty() {
            return Err("no host to run on".into());
        }
        let mut assigned: Vec<Vec<u32>> = vec![Vec::new(); merged.len()];
        let mut host_of = Vec::with_capacity(np as usize);
        let mut next = 0u32;
        'fill: loop {
            for (h, (_, _, slots)) in merged.iter().enumerate() {
                for _ in 0..ppn.unwrap_or(*slots) {
                    if next == np {
                        break 'fill;
                    }
                    assigned[h].push(next);
                    host_of.push(h);
                    next += 1;
                }
            }
        }
        // Hosts that got no rank are dropped (node ids count only the used ones).
        let mut renumber = vec![usize::MAX; merged.len()];
        let mut hosts = Vec::new();
        for (h, ((name, local, _), ranks)) in merged.into_iter().zip(assigned).enumerate() {
            if !ranks.is_empty() {
                renumber[h] = hosts.len();
                hosts.push(Host { name, local, ranks });
            }
        }
        let host_of = host_of.into_iter().map(|h| renumber[h]).collect();
        Ok(Placement { hosts, host_of })
    }

    /// Number of ranks.
    pub fn np(&self) -> u32 {
        self.host_of.len() as u32
    }

    /// The host of `rank`.
    pub fn host(&self, rank: u32) -> &Host {
        &self.hosts[self.host_of[rank as usize]]
    }

    /// Whether some rank runs on another machine.
    pub fn any_remote(&self) -> bool {
        self.hosts.iter().any(|h| !h.local)
    }

    /// (index of `rank` among its host's ranks, number of ranks on its host): the values of
    /// `MPI_LOCALRANKID` and `MPI_LOCALNRANKS`.
    pub fn local_index(&self, rank: u32) -> (u32, u32) {
        let h = self.host(rank);
        let i = h.ranks.iter().position(|&r| r == rank).unwrap_or(0);
        (i as u32, h.ranks.len() as u32)
    }

    /// The `PMI_process_mapping` attribute of this placement.
    pub fn mapping(&self) -> ProcessMapping {
        let ids: Vec<u32> = self.host_of.iter().map(|&h| h as u32).collect();
        ProcessMapping::from_node_ids(&ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(name: &str, slots: Option<u32>) -> HostEntry {
        HostEntry {
            name: name.into(),
            slots,
        }
    }

    fn local(n: &str) -> bool {
        is_local_name(n, "head.cluster")
    }

    #[test]
    fn host_lists() {
        assert_eq!(
            parse_host_list("a, b:2,[fd00::1]:3,fd00::2,c").unwrap(),
            vec![
                e("a", None),
                e("b", Some(2)),
                e("fd00::1", Some(3)),
                e("fd00::2", None),
                e("c", None)
            ]
        );
        for bad in ["", ",", "a:0", "a:x", "[fd00::1", "-oProxyCommand=x", "a b"] {
            assert!(parse_host_list(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn hostfiles() {
        let text = "# the nodes\n\nn1 slots=4  # big\nn2:2\n  n3\nn4 slots=2 max_slots=8\n";
        assert_eq!(
            parse_hostfile(text, "hf").unwrap(),
            vec![
                e("n1", Some(4)),
                e("n2", Some(2)),
                e("n3", None),
                e("n4", Some(2))
            ]
        );
        let err = parse_hostfile("n1\nn2 slots=0\n", "hf").unwrap_err();
        assert!(err.starts_with("hf:2:"), "{err}");
        assert!(parse_hostfile("n1 foo=1", "hf").is_err());
        assert!(parse_hostfile("n1:2 slots=2", "hf").is_err());
        assert!(parse_hostfile("# nothing\n", "hf").is_err());
    }

    #[test]
    fn local_names() {
        for n in [
            "localhost",
            "127.0.0.1",
            "127.1.2.3",
            "::1",
            "head",
            "HEAD.cluster",
        ] {
            assert!(local(n), "{n}");
        }
        for n in [
            "head2",
            "other.cluster",
            "10.0.0.1",
            "headx.cluster",
            "nodea",
        ] {
            assert!(!local(n), "{n}");
        }
        assert!(is_local_name("n1.example", "n1"));
        assert!(!is_local_name("x", ""));
    }

    #[test]
    fn blocks_fill_slots_in_order() {
        let p = Placement::plan(&[e("a", Some(2)), e("b", Some(2))], 4, None, &local).unwrap();
        assert_eq!(p.host_of, vec![0, 0, 1, 1]);
        assert_eq!(p.mapping().to_string(), "(vector,(0,2,2))");
        assert_eq!(p.local_index(3), (1, 2));
        assert!(p.any_remote());
        // One slot each by default: round robin.
        let p = Placement::plan(&[e("a", None), e("b", None)], 4, None, &local).unwrap();
        assert_eq!(p.host_of, vec![0, 1, 0, 1]);
        assert_eq!(p.mapping().to_string(), "(vector,(0,2,1))");
        assert_eq!(p.hosts[0].ranks, vec![0, 2]);
        // More ranks than slots: the round starts again.
        let p = Placement::plan(&[e("a", Some(2)), e("b", Some(1))], 5, None, &local).unwrap();
        assert_eq!(p.host_of, vec![0, 0, 1, 0, 0]);
        // -ppn overrides slots.
        let p = Placement::plan(&[e("a", Some(8)), e("b", None)], 4, Some(2), &local).unwrap();
        assert_eq!(p.host_of, vec![0, 0, 1, 1]);
        // Fewer ranks than hosts: unused hosts are dropped.
        let p = Placement::plan(&[e("a", Some(2)), e("b", Some(2))], 2, None, &local).unwrap();
        assert_eq!(p.hosts.len(), 1);
        assert_eq!(p.mapping().to_string(), "(vector,(0,1,2))");
        assert!(Placement::plan(&[e("a", None)], 2, Some(0), &local).is_err());
    }

    #[test]
    fn duplicates_and_local_aliases_merge() {
        let p = Placement::plan(
            &[
                e("localhost", None),
                e("b", None),
                e("head", None),
                e("B", None),
            ],
            4,
            None,
            &local,
        )
        .unwrap();
        assert_eq!(p.hosts.len(), 2);
        assert!(p.hosts[0].local && !p.hosts[1].local);
        assert_eq!(p.hosts[0].name, "localhost");
        assert_eq!(p.host_of, vec![0, 0, 1, 1]);
        assert!(!Placement::single(3).any_remote());
        assert_eq!(Placement::single(3).local_index(2), (2, 3));
    }

    #[test]
    fn default_counts() {
        assert_eq!(
            default_np(&[e("a", Some(2)), e("b", None)], None, &local),
            3
        );
        assert_eq!(
            default_np(&[e("a", Some(2)), e("b", None)], Some(4), &local),
            8
        );
        assert_eq!(
            default_np(&[e("a", None), e("a", None)], Some(4), &local),
            4
        );
        assert_eq!(
            default_np(&[e("localhost", None), e("head", None)], None, &local),
            2
        );
        assert_eq!(
            default_np(&[e("localhost", None), e("head", None)], Some(3), &local),
            3
        );
    }
}
