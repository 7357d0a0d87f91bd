//! The `PMI_process_mapping` job attribute: which node each rank runs on.
//!
//! Format (MPICH's, served by Hydra, Slurm and our `mpirun`):
//! `(vector,(start_node,num_nodes,ranks_per_node),...)`. Each block puts `ranks_per_node`
//! consecutive ranks on each of the nodes `start_node .. start_node+num_nodes`; the vector as a
//! whole repeats until every rank is placed. So `(vector,(0,2,2))` with 4 ranks is `0 0 1 1`, and
//! `(vector,(0,1,1))` with 3 ranks (what Hydra serves for one node by default) is `0 0 0`.

use std::fmt;

/// One `(start_node,num_nodes,ranks_per_node)` block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// First node id of the block.
    pub start_node: u32,
    /// How many consecutive nodes the block covers.
    pub num_nodes: u32,
    /// Consecutive ranks placed on each of those nodes.
    pub ranks_per_node: u32,
}

/// A decoded `PMI_process_mapping`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessMapping {
    /// The blocks, in order.
    pub blocks: Vec<Block>,
}

/// Why a mapping string was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappingError(pub String);

impl fmt::Display for MappingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad PMI_process_mapping: {}", self.0)
    }
}

impl std::error::Error for MappingError {}

impl ProcessMapping {
    /// All `size` ranks on node 0: `(vector,(0,1,size))`.
    pub fn single_node(size: u32) -> ProcessMapping {
        ProcessMapping {
            blocks: vec![Block {
                start_node: 0,
                num_nodes: 1,
                ranks_per_node: size,
            }],
        }
    }

    /// The shortest mapping this encoder finds that places rank `r` on `node_ids[r]`: runs of
    /// consecutive ranks on one node become blocks, blocks on consecutive nodes with as many
    /// ranks each merge, and a vector that repeats itself is written once (the format repeats
    /// it). So 2 hosts × 2 ranks by blocks is `(vector,(0,2,2))`, and 4 ranks dealt round-robin
    /// to 2 hosts is `(vector,(0,2,1))`.
    pub fn from_node_ids(node_ids: &[u32]) -> ProcessMapping {
        let mut blocks: Vec<Block> = Vec::new();
        let mut i = 0;
        while i < node_ids.len() {
            let node = node_ids[i];
            let run = node_ids[i..].iter().take_while(|&&n| n == node).count();
            i += run;
            let run = u32::try_from(run).unwrap_or(u32::MAX);
            match blocks.last_mut() {
                Some(b)
                    if b.ranks_per_node == run
                        && b.start_node.checked_add(b.num_nodes) == Some(node) =>
                {
                    b.num_nodes += 1
                }
                _ => blocks.push(Block {
                    start_node: node,
                    num_nodes: 1,
                    ranks_per_node: run,
                }),
            }
        }
        let size = u32::try_from(node_ids.len()).unwrap_or(u32::MAX);
        for period in 1..blocks.len() {
            // The last block may be a truncated repetition: the expansion decides.
            let last = blocks.len() - 1;
            if (period..last).all(|k| blocks[k] == blocks[k % period]) {
                let shorter = ProcessMapping {
                    blocks: blocks[..period].to_vec(),
                };
                if shorter.node_ids(size).ok().as_deref() == Some(node_ids) {
                    return shorter;
                }
            }
        }
        ProcessMapping { blocks }
    }

    /// Parses the attribute. Whitespace is ignored; an empty vector is accepted here and refused
    /// by [`node_ids`](Self::node_ids), which cannot place anyone with it.
    pub fn parse(text: &str) -> Result<ProcessMapping, MappingError> {
        let s: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        let inner = s
            .strip_prefix('(')
            .and_then(|s| s.strip_suffix(')'))
            .ok_or_else(|| MappingError(format!("'{text}' is not parenthesized")))?;
        let rest = inner
            .strip_prefix("vector")
            .ok_or_else(|| MappingError(format!("'{text}' is not a vector mapping")))?;
        let mut blocks = Vec::new();
        let mut rest = rest;
        while !rest.is_empty() {
            let after_comma = rest
                .strip_prefix(",(")
                .ok_or_else(|| MappingError(format!("expected ',(' at '{rest}'")))?;
            let close = after_comma
                .find(')')
                .ok_or_else(|| MappingError(format!("unclosed block at '{rest}'")))?;
            let nums: Vec<&str> = after_comma[..close].split(',').collect();
            if nums.len() != 3 {
                return Err(MappingError(format!(
                    "block '({})' needs 3 numbers",
                    &after_comma[..close]
                )));
            }
            let num = |s: &str| {
                s.parse::<u32>()
                    .map_err(|_| MappingError(format!("'{s}' is not a node or rank count")))
            };
            blocks.push(Block {
                start_node: num(nums[0])?,
                num_nodes: num(nums[1])?,
                ranks_per_node: num(nums[2])?,
            });
            rest = &after_comma[close + 1..];
        }
        Ok(ProcessMapping { blocks })
    }

    /// The node id of every rank of a job of `size` ranks.
    pub fn node_ids(&self, size: u32) -> Result<Vec<u32>, MappingError> {
        // Blocks that place nobody are skipped, so each step below places at least one rank
        // and the loop ends after at most `size` steps whatever the numbers say.
        let useful: Vec<&Block> = self
            .blocks
            .iter()
            .filter(|b| b.num_nodes > 0 && b.ranks_per_node > 0)
            .collect();
        if useful.is_empty() && size > 0 {
            return Err(MappingError(format!("'{self}' places no rank")));
        }
        let size = size as usize;
        let mut out = Vec::with_capacity(size);
        'outer: while out.len() < size {
            for b in &useful {
                for n in 0..b.num_nodes {
                    let node = b
                        .start_node
                        .checked_add(n)
                        .ok_or_else(|| MappingError(format!("node id overflows in '{self}'")))?;
                    for _ in 0..b.ranks_per_node {
                        if out.len() == size {
                            break 'outer;
                        }
                        out.push(node);
                    }
                }
            }
        }
        Ok(out)
    }

    /// The ranks on the same node as `rank`, increasing (`None` when `rank >= size`).
    pub fn local_ranks(&self, size: u32, rank: u32) -> Result<Option<Vec<u32>>, MappingError> {
        let ids = self.node_ids(size)?;
        let Some(&mine) = ids.get(rank as usize) else {
            return Ok(None);
        };
        Ok(Some(
            (0..size).filter(|&r| ids[r as usize] == mine).collect(),
        ))
    }
}

impl fmt::Display for ProcessMapping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(vector")?;
        for b in &self.blocks {
            write!(
                f,
                ",({},{},{})",
                b.start_node, b.num_nodes, b.ranks_per_node
            )?;
        }
        f.write_str(")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::tests::XorShift;

    #[test]
    fn single_node() {
        let m = ProcessMapping::single_node(4);
        assert_eq!(m.to_string(), "(vector,(0,1,4))");
        assert_eq!(ProcessMapping::parse("(vector,(0,1,4))").unwrap(), m);
        assert_eq!(m.node_ids(4).unwrap(), vec![0, 0, 0, 0]);
        assert_eq!(m.local_ranks(4, 2).unwrap(), Some(vec![0, 1, 2, 3]));
        assert_eq!(m.local_ranks(4, 4).unwrap(), None);
    }

    #[test]
    fn hydra_default_wraps() {
        // What Hydra 4.0 serves for `-n 3` on one host.
        let m = ProcessMapping::parse("(vector,(0,1,1))").unwrap();
        assert_eq!(m.node_ids(3).unwrap(), vec![0, 0, 0]);
    }

    #[test]
    fn block_and_cyclic_layouts() {
        let block = ProcessMapping::parse(" ( vector , (0,2,2) ) ").unwrap();
        assert_eq!(block.node_ids(4).unwrap(), vec![0, 0, 1, 1]);
        assert_eq!(block.local_ranks(4, 3).unwrap(), Some(vec![2, 3]));
        let cyclic = ProcessMapping::parse("(vector,(0,3,1))").unwrap();
        assert_eq!(cyclic.node_ids(7).unwrap(), vec![0, 1, 2, 0, 1, 2, 0]);
        assert_eq!(cyclic.local_ranks(7, 1).unwrap(), Some(vec![1, 4]));
        let mixed = ProcessMapping::parse("(vector,(0,2,3),(2,1,1))").unwrap();
        assert_eq!(mixed.node_ids(8).unwrap(), vec![0, 0, 0, 1, 1, 1, 2, 0]);
    }

    #[test]
    fn encodes_placements() {
        let cases: &[(&[u32], &str)] = &[
            (&[0, 0, 1, 1], "(vector,(0,2,2))"),
            (&[0, 1, 0, 1], "(vector,(0,2,1))"),
            (&[0, 1, 0], "(vector,(0,2,1))"),
            (&[0, 0, 0, 1], "(vector,(0,1,3),(1,1,1))"),
            (&[0, 0, 0, 0], "(vector,(0,1,4))"),
            (&[0, 0, 1, 1, 2, 0, 0, 1, 1, 2], "(vector,(0,2,2),(2,1,1))"),
            (&[1, 0], "(vector,(1,1,1),(0,1,1))"),
            (&[], "(vector)"),
        ];
        for &(ids, want) in cases {
            let m = ProcessMapping::from_node_ids(ids);
            assert_eq!(m.to_string(), want, "{ids:?}");
            if !ids.is_empty() {
                assert_eq!(m.node_ids(ids.len() as u32).unwrap(), ids);
            }
        }
        let mut rng = XorShift(5);
        for _ in 0..2000 {
            let n = 1 + (rng.next() % 40) as usize;
            let hosts = 1 + rng.next() % 5;
            let mut ids: Vec<u32> = (0..n).map(|_| (rng.next() % hosts) as u32).collect();
            if rng.next() & 1 == 0 {
                ids.sort_unstable();
            }
            let m = ProcessMapping::from_node_ids(&ids);
            assert_eq!(m.node_ids(n as u32).unwrap(), ids, "{m}");
        }
    }

    #[test]
    fn refuses_malformed() {
        for bad in [
            "",
            "vector,(0,1,1)",
            "(vector,(0,1))",
            "(vector,(0,1,1,1))",
            "(vector,(a,1,1))",
            "(vector,(0,1,1)",
            "(vector(0,1,1))",
            "(vectorx)",
            "(vector,(0,1,-1))",
            "(list,(0,1,1))",
        ] {
            assert!(ProcessMapping::parse(bad).is_err(), "{bad}");
        }
        assert!(ProcessMapping::parse("(vector)")
            .unwrap()
            .node_ids(2)
            .is_err());
        assert!(ProcessMapping::parse("(vector,(0,0,5),(1,3,0))")
            .unwrap()
            .node_ids(2)
            .is_err());
        assert_eq!(
            ProcessMapping::parse("(vector)")
                .unwrap()
                .node_ids(0)
                .unwrap(),
            Vec::<u32>::new()
        );
    }

    #[test]
    fn huge_numbers_terminate() {
        let m = ProcessMapping::parse("(vector,(4294967295,4294967295,4294967295))").unwrap();
        assert_eq!(m.node_ids(3).unwrap(), vec![u32::MAX; 3]);
        let m = ProcessMapping::parse("(vector,(4294967295,2,1))").unwrap();
        assert!(m.node_ids(2).is_err());
    }

    #[test]
    fn property_random_text_never_panics() {
        let mut rng = XorShift(77);
        for _ in 0..20_000 {
            let bytes = rng.bytes(40, b"(vector,0123456789) ");
            let text = String::from_utf8_lossy(&bytes);
            if let Ok(m) = ProcessMapping::parse(&text) {
                let size = (rng.next() % 64) as u32;
                if let Ok(ids) = m.node_ids(size) {
                    assert_eq!(ids.len(), size as usize);
                    assert_eq!(ProcessMapping::parse(&m.to_string()).as_ref(), Ok(&m));
                }
            }
        }
    }
}
