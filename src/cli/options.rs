//! What `run` and the session share: run options from the flags and the
//! environment, and the exit code of an outcome.

use std::collections::HashMap;

use super::{Approval, Network, RunArgs};
use crate::protocol::Outcome;
use crate::runtime::{ApprovalMode, Limits, RunOptions};

pub fn exit_code(outcome: Outcome) -> u8 {
    match outcome {
        Outcome::Success => 0,
        Outcome::Failure => super::EXIT_FAILURE,
        Outcome::Cancelled => super::EXIT_CANCELLED,
    }
}

pub(crate) fn approval_mode(approval: Approval) -> ApprovalMode {
    match approval {
        Approval::Each => ApprovalMode::Each,
        Approval::Final => ApprovalMode::Final,
        Approval::Never => ApprovalMode::Never,
    }
}

/// Turns the flags and the environment into run options; `Err` is a usage error.
pub(crate) fn options(args: &RunArgs, env: &HashMap<String, String>) -> Result<RunOptions, String> {
    let mut limits = Limits::from_env(env)?;
    if let Some(n) = args.max_turns {
        limits.max_turns = n;
    }
    if let Some(s) = args.timeout {
        limits.timeout_ms = s.saturating_mul(1000);
    }
    if limits.max_turns == 0 || limits.timeout_ms == 0 {
        return Err("--max-turns and --timeout must be positive".into());
    }
    let mut opts = RunOptions::new(&args.repo, &args.task);
    opts.limits = limits;
    opts.network = args.network == Network::Enabled;
    opts.artifact_dir = args.artifact_dir.clone();
    opts.checks = args
        .check
        .chunks(2)
        .map(|c| (c[0].clone(), c.get(1).cloned().unwrap_or_default()))
        .collect();
    opts.approval = approval_mode(args.approval);
    opts.allow_zero_tests = args.allow_zero_tests;
    opts.bootstrap_network = crate::verify::bootstrap_network(
        env.get(crate::verify::BOOTSTRAP_NETWORK_ENV)
            .map(String::as_str),
    );
    Ok(opts)
}
