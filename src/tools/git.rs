//! `git`: read-only status, diff, log and show on the workspace repository,
//! through libgit2 (never the `git` program).

use std::fmt::Write as _;

use git2::{
    Commit, Diff, DiffFormat, DiffOptions, DiffStatsFormat, ObjectType, Repository, Status,
    StatusOptions,
};

use super::git_guard::open_workspace_repo;
use super::paths;
use super::read_file::is_binary;
use super::{GitArgs, GitSubcommand, ToolError, ToolOutput};
use crate::workspace::WorkspaceRoot;

const DEFAULT_LOG_COUNT: usize = 20;
const MAX_LOG_COUNT: usize = 500;

pub fn git_tool(args: &GitArgs, root: &WorkspaceRoot) -> Result<ToolOutput, ToolError> {
    let repo = open_workspace_repo(root)?;
    match args.subcommand {
        GitSubcommand::Status => status(&repo, &args.args),
        GitSubcommand::Diff => diff(&repo, &args.args),
        GitSubcommand::Log => log(&repo, &args.args),
        GitSubcommand::Show => show(&repo, &args.args),
    }
}

fn git_error(context: &str) -> impl FnOnce(git2::Error) -> ToolError + '_ {
    move |e| ToolError::refused(format!("git {context}: {}", e.message()))
}

fn unknown_flag(subcommand: &str, flag: &str, allowed: &str) -> ToolError {
    ToolError::refused(format!(
        "git {subcommand}: `{flag}` is not supported; allowed: {allowed}"
    ))
}

/// Non-flag arguments as workspace-relative pathspecs.
fn pathspec(arg: &str) -> Result<String, ToolError> {
    Ok(paths::display(&paths::relative(arg)?))
}

fn status(repo: &Repository, args: &[String]) -> Result<ToolOutput, ToolError> {
    let mut options = StatusOptions::new();
    options
        .include_untracked(true)
        .recurse_untracked_dirs(true)
        .exclude_submodules(true);
    for arg in args {
        match arg.as_str() {
            "-s" | "--short" | "--porcelain" | "-u" | "--untracked-files=all" | "--" => {}
            flag if flag.starts_with('-') => {
                return Err(unknown_flag("status", flag, "--short, --porcelain, paths"));
            }
            path => {
                options.pathspec(pathspec(path)?);
            }
        }
    }
    let statuses = repo
        .statuses(Some(&mut options))
        .map_err(git_error("status"))?;
    let mut full = String::new();
    if let Ok(head) = repo.head().and_then(|h| h.peel_to_commit()) {
        let _ = writeln!(full, "## HEAD {} {}", short_id(&head), summary(&head));
    }
    let mut count = 0;
    for entry in statuses.iter() {
        let status = entry.status();
        if status.is_ignored() {
            continue;
        }
        let path = entry.path().unwrap_or("?");
        let _ = writeln!(full, "{} {path}", status_code(status));
        count += 1;
    }
    if count == 0 {
        full.push_str("nothing changed since HEAD (working tree clean)\n");
    }
    Ok(ToolOutput::success(full, format!("{count} changed paths")))
}

fn status_code(status: Status) -> String {
    if status.is_wt_new() && !status.intersects(Status::INDEX_NEW | Status::INDEX_MODIFIED) {
        return "??".into();
    }
    if status.is_conflicted() {
        return "UU".into();
    }
    let index = if status.is_index_new() {
        'A'
    } else if status.is_index_modified() {
        'M'
    } else if status.is_index_deleted() {
        'D'
    } else if status.is_index_renamed() {
        'R'
    } else if status.is_index_typechange() {
        'T'
    } else {
        ' '
    };
    let worktree = if status.is_wt_modified() {
        'M'
    } else if status.is_wt_deleted() {
        'D'
    } else if status.is_wt_renamed() {
        'R'
    } else if status.is_wt_typechange() {
        'T'
    } else if status.is_wt_new() {
        '?'
    } else {
        ' '
    };
    format!("{index}{worktree}")
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum DiffView {
    Patch,
    Stat,
    NameOnly,
}

fn diff(repo: &Repository, args: &[String]) -> Result<ToolOutput, ToolError> {
    let mut view = DiffView::Patch;
    let mut options = DiffOptions::new();
    options
        .include_untracked(true)
        .recurse_untracked_dirs(true)
        .show_untracked_content(true);
    for arg in args {
        match arg.as_str() {
            "--stat" => view = DiffView::Stat,
            "--name-only" => view = DiffView::NameOnly,
            "HEAD" | "--" => {}
            flag if flag.starts_with('-') => {
                return Err(unknown_flag(
                    "diff",
                    flag,
                    "--stat, --name-only, paths (the diff is always against HEAD)",
                ));
            }
            path => {
                options.pathspec(pathspec(path)?);
            }
        }
    }
    let head = repo
        .head()
        .and_then(|h| h.peel_to_tree())
        .map_err(git_error("diff"))?;
    let diff = repo
        .diff_tree_to_workdir_with_index(Some(&head), Some(&mut options))
        .map_err(git_error("diff"))?;
    let files = diff.deltas().len();
    let mut full = render_diff(&diff, view)?;
    if files == 0 {
        full.push_str("no changes against HEAD\n");
    }
    Ok(ToolOutput::success(full, format!("{files} files changed")))
}

fn render_diff(diff: &Diff<'_>, view: DiffView) -> Result<String, ToolError> {
    match view {
        DiffView::Stat => {
            let stats = diff.stats().map_err(git_error("diff --stat"))?;
            let buf = stats
                .to_buf(DiffStatsFormat::FULL, 100)
                .map_err(git_error("diff --stat"))?;
            Ok(String::from_utf8_lossy(&buf).into_owned())
        }
        DiffView::NameOnly => Ok(diff
            .deltas()
            .filter_map(|d| d.new_file().path().or(d.old_file().path()))
            .map(|p| format!("{}\n", p.display()))
            .collect()),
        DiffView::Patch => {
            let mut out = String::new();
            diff.print(DiffFormat::Patch, |_, _, line| {
                let content = String::from_utf8_lossy(line.content());
                match line.origin() {
                    origin @ ('+' | '-' | ' ') => {
                        out.push(origin);
                        out.push_str(&content);
                    }
                    _ => out.push_str(&content),
                }
                true
            })
            .map_err(git_error("diff"))?;
            Ok(out)
        }
    }
}

fn log(repo: &Repository, args: &[String]) -> Result<ToolOutput, ToolError> {
    let mut count = DEFAULT_LOG_COUNT;
    let mut oneline = false;
    let mut start: Option<&str> = None;
    let mut iter = args.iter().map(String::as_str);
    while let Some(arg) = iter.next() {
        let number = if arg == "-n" || arg == "--max-count" {
            Some(iter.next().unwrap_or(""))
        } else if let Some(n) = arg.strip_prefix("--max-count=") {
            Some(n)
        } else if let Some(n) = arg.strip_prefix("-n") {
            Some(n)
        } else if arg.len() > 1
            && arg.starts_with('-')
            && arg[1..].bytes().all(|b| b.is_ascii_digit())
        {
            Some(&arg[1..])
        } else {
            None
        };
        if let Some(n) = number {
            count = n
                .parse::<usize>()
                .map_err(|_| {
                    ToolError::refused(format!("git log: `{n}` is not a number of commits"))
                })?
                .min(MAX_LOG_COUNT);
            continue;
        }
        match arg {
            "--oneline" => oneline = true,
            flag if flag.starts_with('-') => {
                return Err(unknown_flag(
                    "log",
                    flag,
                    "-n N, --max-count=N, --oneline, one revision",
                ));
            }
            rev => start = Some(rev),
        }
    }
    let mut walk = repo.revwalk().map_err(git_error("log"))?;
    match start {
        Some(rev) => {
            let commit = resolve(repo, rev)?
                .peel_to_commit()
                .map_err(git_error("log"))?;
            walk.push(commit.id()).map_err(git_error("log"))?;
        }
        None => walk.push_head().map_err(git_error("log"))?,
    }
    walk.set_sorting(git2::Sort::TIME)
        .map_err(git_error("log"))?;
    let mut full = String::new();
    let mut shown = 0;
    for id in walk.take(count) {
        let commit = id
            .and_then(|id| repo.find_commit(id))
            .map_err(git_error("log"))?;
        if oneline {
            let _ = writeln!(full, "{} {}", short_id(&commit), summary(&commit));
        } else {
            full.push_str(&commit_header(&commit));
            full.push('\n');
        }
        shown += 1;
    }
    Ok(ToolOutput::success(full, format!("{shown} commits")))
}

fn show(repo: &Repository, args: &[String]) -> Result<ToolOutput, ToolError> {
    let mut view = DiffView::Patch;
    let mut target: Option<&str> = None;
    for arg in args {
        match arg.as_str() {
            "--stat" => view = DiffView::Stat,
            "--name-only" => view = DiffView::NameOnly,
            flag if flag.starts_with('-') => {
                return Err(unknown_flag(
                    "show",
                    flag,
                    "--stat, --name-only, one REV or REV:PATH",
                ));
            }
            rev if target.is_none() => target = Some(rev),
            extra => {
                return Err(ToolError::refused(format!(
                    "git show takes one revision; `{extra}` is extra"
                )));
            }
        }
    }
    let target = target.unwrap_or("HEAD");
    if let Some((_, path)) = target.split_once(':') {
        paths::relative(path)?;
    }
    let object = resolve(repo, target)?;
    match object.kind() {
        Some(ObjectType::Blob) => {
            let blob = object.peel_to_blob().map_err(git_error("show"))?;
            if is_binary(blob.content()) {
                return Err(ToolError::refused(format!(
                    "`{target}` is a binary file and is not shown"
                )));
            }
            let text = String::from_utf8_lossy(blob.content()).into_owned();
            let lines = text.lines().count();
            Ok(ToolOutput::success(
                text,
                format!("{target}: {lines} lines"),
            ))
        }
        Some(ObjectType::Tree) => {
            let tree = object.peel_to_tree().map_err(git_error("show"))?;
            let mut full = format!("tree {target}\n\n");
            for entry in tree.iter() {
                let slash = if entry.kind() == Some(ObjectType::Tree) {
                    "/"
                } else {
                    ""
                };
                let _ = writeln!(full, "{}{slash}", entry.name().unwrap_or("?"));
            }
            Ok(ToolOutput::success(
                full,
                format!("tree of {} entries", tree.len()),
            ))
        }
        _ => {
            let commit = object.peel_to_commit().map_err(git_error("show"))?;
            let parent_tree = match commit.parent(0) {
                Ok(parent) => Some(parent.tree().map_err(git_error("show"))?),
                Err(_) => None,
            };
            let tree = commit.tree().map_err(git_error("show"))?;
            let diff = repo
                .diff_tree_to_tree(parent_tree.as_ref(), Some(&tree), None)
                .map_err(git_error("show"))?;
            let mut full = commit_header(&commit);
            full.push('\n');
            full.push_str(&render_diff(&diff, view)?);
            let summary = format!(
                "commit {} ({} files)",
                short_id(&commit),
                diff.deltas().len()
            );
            Ok(ToolOutput::success(full, summary))
        }
    }
}

fn resolve<'r>(repo: &'r Repository, rev: &str) -> Result<git2::Object<'r>, ToolError> {
    if rev.starts_with('-') {
        return Err(ToolError::refused(format!("`{rev}` is not a revision")));
    }
    repo.revparse_single(rev).map_err(|e| {
        ToolError::refused(format!(
            "git: unknown revision or path `{rev}` ({}); try `HEAD`, a commit id from git log, or `HEAD:path/to/file`",
            e.message()
        ))
    })
}

fn summary(commit: &Commit<'_>) -> String {
    String::from_utf8_lossy(commit.summary_bytes().unwrap_or_default()).into_owned()
}

fn short_id(commit: &Commit<'_>) -> String {
    commit.id().to_string().chars().take(10).collect()
}

fn commit_header(commit: &Commit<'_>) -> String {
    let author = commit.author();
    let when = author.when();
    let date = chrono::DateTime::from_timestamp(when.seconds(), 0)
        .zip(chrono::FixedOffset::east_opt(when.offset_minutes() * 60))
        .map(|(utc, offset)| {
            utc.with_timezone(&offset)
                .format("%a %b %e %H:%M:%S %Y %z")
                .to_string()
        })
        .unwrap_or_else(|| when.seconds().to_string());
    let mut out = format!(
        "commit {}\nAuthor: {} <{}>\nDate:   {date}\n\n",
        commit.id(),
        String::from_utf8_lossy(author.name_bytes()),
        String::from_utf8_lossy(author.email_bytes()),
    );
    for line in String::from_utf8_lossy(commit.message_bytes()).lines() {
        let _ = writeln!(out, "    {line}");
    }
    out
}
