//! Paths as git sees them: which paths git accepts in a tree, and how git
//! writes a path in a patch or a `--name-only` list.
//!
//! [`verify_path`] mirrors `verify_path()` of git's `read-cache.c` with both
//! `core.protectHFS` and `core.protectNTFS` on, so a path it refuses can
//! never reach a checkpoint or `final.patch` (where `git apply` would refuse
//! the whole patch), and no path that a checkout on macOS or Windows would
//! turn into `.git` gets through: `.git` in any case, `.git` behind HFS+
//! ignorable code points (`.g\u{200c}it`), NTFS aliases (`.git.`, `.git `,
//! `git~1`, `.git::$INDEX_ALLOCATION`), a backslash before any of those, and,
//! for symlinks, `.gitmodules` and its aliases. Empty, `.` and `..`
//! components are refused as git does; NUL can never be part of a path.
//!
//! [`quote`] is git's `quote_c_style` with `core.quotePath` on (the default):
//! a name that needs it is put in double quotes with C escapes and octal
//! bytes, so every name, whatever its bytes, is one printable ASCII string
//! that [`unquote`] turns back into the same bytes.

use std::borrow::Cow;

/// Whether git accepts `path` (relative, `/`-separated) for a file or, with
/// `symlink`, a symbolic link.
pub fn verify_path(path: &[u8], symlink: bool) -> bool {
    if path.contains(&0) {
        return false;
    }
    let mut start = 0;
    loop {
        let rest = &path[start..];
        if is_hfs_dot(rest, b"git") || (symlink && is_hfs_dot(rest, b"gitmodules")) {
            return false;
        }
        if is_ntfs_dotgit(rest) || (symlink && is_ntfs_dot_generic(rest, b"gitmodules", b"gi7eba"))
        {
            return false;
        }
        match rest.first() {
            // An empty path, an empty component or a trailing slash.
            None | Some(b'/') => return false,
            Some(b'.') if !verify_dotfile(&rest[1..], symlink) => return false,
            _ => {}
        }
        // The rest of the component. (As in git, a backslash that starts a
        // component is not looked at: the NTFS check above saw it.)
        let mut i = start + 1;
        loop {
            match path.get(i) {
                None => return true,
                Some(b'/') => break,
                Some(b'\\') => {
                    let after = &path[i + 1..];
                    if is_ntfs_dotgit(after)
                        || (symlink && is_ntfs_dot_generic(after, b"gitmodules", b"gi7eba"))
                    {
                        return false;
                    }
                }
                Some(_) => {}
            }
            i += 1;
        }
        start = i + 1;
    }
}

/// Whether git accepts `name` as one component (no `/` in it) of a path.
pub fn verify_component(name: &[u8], symlink: bool) -> bool {
    !name.contains(&b'/') && verify_path(name, symlink)
}

/// `rest` follows a `.` that starts a component: refuses `.`, `..`, `.git`
/// in any case and, for symlinks, `.gitmodules`.
fn verify_dotfile(rest: &[u8], symlink: bool) -> bool {
    let at = |i: usize| rest.get(i).copied().unwrap_or(0);
    let ends = |c: u8| c == 0 || c == b'/';
    if ends(at(0)) {
        return false;
    }
    match at(0) {
        b'g' | b'G' => {
            if !at(1).eq_ignore_ascii_case(&b'i') || !at(2).eq_ignore_ascii_case(&b't') {
                return true;
            }
            if ends(at(3)) {
                return false;
            }
            if symlink
                && rest.len() >= 10
                && rest[3..10].eq_ignore_ascii_case(b"modules")
                && ends(at(10))
            {
                return false;
            }
            true
        }
        b'.' => !ends(at(1)),
        _ => true,
    }
}

/// The next character of `s` for HFS+, which ignores some code points
/// entirely; `None` at the end or at malformed UTF-8 (git reads both as the
/// end of the name).
fn next_hfs_char(s: &mut &[u8]) -> Option<char> {
    loop {
        let first = *s.first()?;
        let len = match first {
            0x00..=0x7f => 1,
            0xc0..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf7 => 4,
            _ => return None,
        };
        let c = std::str::from_utf8(s.get(..len)?).ok()?.chars().next()?;
        *s = &s[len..];
        match c {
            '\u{200c}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{206a}'..='\u{206f}'
            | '\u{feff}' => continue,
            c => return Some(c),
        }
    }
}

/// Whether the component at the start of `path` reads as `.` + `needle` on
/// HFS+ (case-insensitive, ignorable code points skipped).
fn is_hfs_dot(mut path: &[u8], needle: &[u8]) -> bool {
    if next_hfs_char(&mut path) != Some('.') {
        return false;
    }
    for &want in needle {
        match next_hfs_char(&mut path) {
            Some(c) if c.is_ascii() && (c as u8).to_ascii_lowercase() == want => {}
            _ => return false,
        }
    }
    matches!(next_hfs_char(&mut path), None | Some('/'))
}

/// Whether the component at the start of `name` is `.git` or `git~1` on
/// NTFS: trailing spaces and dots are trimmed there, and `:` starts an
/// alternate data stream.
fn is_ntfs_dotgit(name: &[u8]) -> bool {
    let at = |i: usize| name.get(i).copied().unwrap_or(0);
    let rest = if at(0) == b'.' {
        if !name
            .get(1..4)
            .is_some_and(|s| s.eq_ignore_ascii_case(b"git"))
        {
            return false;
        }
        4
    } else if at(0).eq_ignore_ascii_case(&b'g') {
        if !name
            .get(1..3)
            .is_some_and(|s| s.eq_ignore_ascii_case(b"it"))
            || at(3) != b'~'
            || at(4) != b'1'
        {
            return false;
        }
        5
    } else {
        return false;
    };
    for &c in name[rest..].iter().chain(std::iter::once(&0)) {
        match c {
            0 | b'/' | b'\\' | b':' => return true,
            b'.' | b' ' => {}
            _ => return false,
        }
    }
    true
}

/// git's `is_ntfs_dot_generic`: `.` + `dotgit_name`, its 6-character short
/// name `~1`..`~4`, or the hashed fall-back short name built on
/// `shortname_prefix`, each followed only by spaces and dots (or a stream).
fn is_ntfs_dot_generic(name: &[u8], dotgit_name: &[u8], shortname_prefix: &[u8]) -> bool {
    let at = |i: usize| name.get(i).copied().unwrap_or(0);
    let only_spaces_and_periods = |from: usize| {
        for i in from.. {
            match at(i) {
                0 | b':' => return true,
                b' ' | b'.' => {}
                _ => return false,
            }
        }
        false
    };
    let len = dotgit_name.len();
    if at(0) == b'.'
        && name
            .get(1..1 + len)
            .is_some_and(|s| s.eq_ignore_ascii_case(dotgit_name))
    {
        return only_spaces_and_periods(len + 1);
    }
    if name
        .get(..6)
        .is_some_and(|s| s.eq_ignore_ascii_case(&dotgit_name[..6]))
        && at(6) == b'~'
        && (b'1'..=b'4').contains(&at(7))
    {
        return only_spaces_and_periods(8);
    }
    let mut saw_tilde = false;
    let mut i = 0;
    while i < 8 {
        let c = at(i);
        if c == 0 {
            return false;
        } else if saw_tilde {
            if !c.is_ascii_digit() {
                return false;
            }
        } else if c == b'~' {
            i += 1;
            if !(b'1'..=b'9').contains(&at(i)) {
                return false;
            }
            saw_tilde = true;
        } else if i >= 6 || c & 0x80 != 0 || c.to_ascii_lowercase() != shortname_prefix[i] {
            return false;
        }
        i += 1;
    }
    only_spaces_and_periods(i)
}

/// `path` as git writes it in a patch header or a `--name-only` list:
/// unchanged when it is printable ASCII without `"` or `\`, else in double
/// quotes with `\t`, `\n`, `\"`, `\\`... and `\ooo` for other bytes.
pub fn quote(path: &[u8]) -> Cow<'_, str> {
    let needs = |b: u8| b < 0x20 || b == b'"' || b == b'\\' || b >= 0x7f;
    if !path.iter().any(|&b| needs(b)) {
        // Printable ASCII only, so valid UTF-8.
        return String::from_utf8_lossy(path);
    }
    let mut out = String::with_capacity(path.len() + 8);
    out.push('"');
    for &b in path {
        match b {
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            0x0b => out.push_str("\\v"),
            0x0c => out.push_str("\\f"),
            b'\r' => out.push_str("\\r"),
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b if needs(b) => out.push_str(&format!("\\{b:03o}")),
            b => out.push(b as char),
        }
    }
    out.push('"');
    Cow::Owned(out)
}

/// The bytes of a path written by [`quote`] (or by git); `None` when a
/// quoted name is malformed.
pub fn unquote(text: &str) -> Option<Vec<u8>> {
    if !text.starts_with('"') {
        return Some(text.as_bytes().to_vec());
    }
    match unquote_prefix(text)? {
        (bytes, "") => Some(bytes),
        _ => None,
    }
}

/// The quoted name (`"…"`, as git writes one) at the start of `text`: its
/// bytes and what follows it; `None` when it is malformed or unterminated.
pub fn unquote_prefix(text: &str) -> Option<(Vec<u8>, &str)> {
    let inner = text.strip_prefix('"')?;
    let bytes = inner.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        i += 1;
        if b == b'"' {
            return Some((out, &inner[i..]));
        }
        if b != b'\\' {
            out.push(b);
            continue;
        }
        let e = *bytes.get(i)?;
        i += 1;
        out.push(match e {
            b'a' => 0x07,
            b'b' => 0x08,
            b't' => b'\t',
            b'n' => b'\n',
            b'v' => 0x0b,
            b'f' => 0x0c,
            b'r' => b'\r',
            b'"' => b'"',
            b'\\' => b'\\',
            b'0'..=b'3' => {
                let digits = bytes.get(i..i + 2)?;
                if !digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
                    return None;
                }
                i += 2;
                ((e - b'0') << 6) | ((digits[0] - b'0') << 3) | (digits[1] - b'0')
            }
            _ => return None,
        });
    }
    None
}

#[cfg(test)]
#[path = "git_path_tests.rs"]
mod tests;
