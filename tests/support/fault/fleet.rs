//! A fleet of worker processes running at once: one [`Children`] per
//! member, so that each member can be killed with SIGKILL and replaced on
//! its own while the others work on.
//!
//! Every process of the fleet gets a ledger file of its own (a member's
//! replacement starts a new one), read back with [`Fleet::ledgers`].

use std::path::PathBuf;

use super::child::Children;

/// The ledger a process of the fleet wrote.
#[derive(Debug, Clone)]
pub(crate) struct ProcessLedger {
    /// The member it ran as (`0..size`).
    pub(crate) member: usize,
    /// Which of the member's processes it was (1 for the first).
    pub(crate) generation: u32,
    /// Whether the test killed it before the end of the run.
    pub(crate) killed: bool,
    /// What it wrote.
    pub(crate) text: String,
}

/// Worker processes of one run, `size` of them alive at a time.
pub(crate) struct Fleet {
    members: Vec<Children>,
}

impl Fleet {
    /// Starts `size` processes of `program args`, each with the broker URL,
    /// the queue, a ledger file and `env` in its environment.
    pub(crate) fn start(
        size: usize,
        program: PathBuf,
        args: &[String],
        url: &str,
        queue: &str,
        env: &[(&str, &str)],
    ) -> Fleet {
        let members = (0..size)
            .map(|_| {
                let mut member = Children::new(program.clone(), args.to_vec(), url, queue);
                for (key, value) in env {
                    member.env(key, value);
                }
                member.spawn();
                member
            })
            .collect();
        Fleet { members }
    }

    /// How many members the fleet has.
    pub(crate) fn size(&self) -> usize {
        self.members.len()
    }

    /// Kills member `member`'s process with SIGKILL and reaps it.
    pub(crate) fn kill(&mut self, member: usize) {
        self.members[member].kill();
    }

    /// Starts a new process for member `member` (after [`Self::kill`]).
    pub(crate) fn replace(&mut self, member: usize) {
        self.members[member].spawn();
    }

    /// Kills every process of the fleet (the end of a run).
    pub(crate) fn kill_all(&mut self) {
        for member in &mut self.members {
            member.kill();
        }
    }

    /// The members whose process ended by itself (each reaped).
    pub(crate) fn exited(&mut self) -> Vec<usize> {
        (0..self.members.len())
            .filter(|&i| self.members[i].exited())
            .collect()
    }

    /// The ledger of member `member`'s current (latest) process; empty
    /// until that process has opened it.
    pub(crate) fn current_ledger(&self, member: usize) -> String {
        let children = &self.members[member];
        let mut ledgers = children.ledgers();
        match ledgers.len() == children.started() as usize {
            true => ledgers.pop().unwrap_or_default(),
            false => String::new(),
        }
    }

    /// Every process's ledger so far (a process opens its own first thing);
    /// all but each member's latest process were killed by the test.
    pub(crate) fn ledgers(&self) -> Vec<ProcessLedger> {
        let mut all = Vec::new();
        for (member, children) in self.members.iter().enumerate() {
            let started = children.started();
            for (generation, text) in (1..).zip(children.ledgers()) {
                all.push(ProcessLedger {
                    member,
                    generation,
                    killed: generation < started,
                    text,
                });
            }
        }
        all
    }

    /// What the processes wrote to stdout and stderr, each under a header.
    pub(crate) fn logs(&self) -> String {
        let mut out = String::new();
        for (member, children) in self.members.iter().enumerate() {
            for (generation, log) in (1..).zip(children.logs()) {
                out.push_str(&format!(
                    "--- worker {member}, process {generation} ---\n{log}\n"
                ));
            }
        }
        out
    }
}
