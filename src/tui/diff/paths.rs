//! File names in diff headers: git's C-style quoting, `a/`/`b/` prefixes, `/dev/null`.

/// The path of a `--- ` or `+++ ` line's value, without its `a/` or `b/` prefix;
/// `None` for `/dev/null`. A tab ends an unquoted name (git adds one after names
/// with spaces, other tools a timestamp).
pub(super) fn side_path(value: &str, prefix: &str) -> Option<String> {
    let name = if value.starts_with('"') {
        unquote(value).map(|(name, _)| name)?
    } else {
        value.split('\t').next().unwrap_or(value).to_string()
    };
    if name == "/dev/null" {
        return None;
    }
    Some(strip_prefix(name, prefix))
}

/// The old and new paths of a `diff --git a/x b/y` line's remainder.
pub(super) fn git_line_paths(rest: &str) -> Option<(String, String)> {
    let (old, new) = if rest.starts_with('"') {
        let (old, after) = unquote(rest)?;
        let after = after.strip_prefix(' ').unwrap_or(after);
        let new = if after.starts_with('"') {
            unquote(after)?.0
        } else {
            after.to_string()
        };
        (old, new)
    } else if rest.ends_with('"') {
        let at = rest.rfind(" \"")?;
        (rest[..at].to_string(), unquote(&rest[at + 1..])?.0)
    } else {
        let (old, new) = split_unquoted(rest)?;
        (old.to_string(), new.to_string())
    };
    Some((strip_prefix(old, "a/"), strip_prefix(new, "b/")))
}

/// Splits `a/P b/Q`; when names have spaces, prefers the split where both sides match.
fn split_unquoted(rest: &str) -> Option<(&str, &str)> {
    let splits: Vec<usize> = rest.match_indices(" b/").map(|(at, _)| at).collect();
    let same = splits.iter().copied().find(|&at| {
        let old = &rest[..at];
        let new = &rest[at + 1..];
        old.strip_prefix("a/") == new.strip_prefix("b/")
    });
    let at = same
        .or_else(|| splits.first().copied())
        .or_else(|| rest.find(' '))?;
    Some((&rest[..at], &rest[at + 1..]))
}

fn strip_prefix(name: String, prefix: &str) -> String {
    match name.strip_prefix(prefix) {
        Some(stripped) => stripped.to_string(),
        None => name,
    }
}

/// Reads a C-style quoted string at the start of `text`; returns it and what follows.
/// Octal escapes are bytes (UTF-8 names arrive that way); invalid UTF-8 is replaced.
pub(super) fn unquote(text: &str) -> Option<(String, &str)> {
    let (bytes, rest) = crate::workspace::unquote_path_prefix(text)?;
    Some((String::from_utf8_lossy(&bytes).into_owned(), rest))
}
