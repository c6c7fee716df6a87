use super::*;

fn file_ok(path: &[u8]) -> bool {
    verify_path(path, false)
}

#[test]
fn ordinary_and_awkward_names_are_accepted() {
    for path in [
        &b"a"[..],
        b"src/main.rs",
        b".gitignore",
        b".gitmodules",
        b".github/workflows/ci.yml",
        b".gitx/y",
        b".git-credentials",
        b"x.git",
        b"git",
        b"git~2",
        b"gi",
        b"back\\slash",
        b"\\.git",
        b"tab\tname",
        b"new\nline",
        b"esc\x1b[2J",
        b"\xff\xfe invalid utf-8",
        "\u{202e}txt.exe".as_bytes(),
        "caf\u{e9}/na\u{ef}ve".as_bytes(),
        b"-leading dash",
        b"sp ace/ a b ",
        b"...",
        b".a",
        b"C:/x",
    ] {
        assert!(
            file_ok(path),
            "refused: {:?}",
            String::from_utf8_lossy(path)
        );
    }
}

#[test]
fn git_dirs_in_any_case_or_alias_are_refused() {
    for path in [
        &b".git"[..],
        b".git/config",
        b".GIT/hooks/x",
        b".Git/HEAD",
        b"sub/.git/config",
        b"a/b/.gIt",
        b".git./config",
        b".git../config",
        b".git /config",
        b".git . ./x",
        b"git~1/config",
        b"GIT~1",
        b"sub/Git~1.. /x",
        b".git::$INDEX_ALLOCATION/x",
        b".git:stream",
        b"a\\.git",
        b"a\\.git\\hooks\\x",
        b"a\\git~1",
        b".git\\x",
        b".git\xff",
        "\u{feff}.git/x".as_bytes(),
        ".g\u{200c}it/config".as_bytes(),
        ".gi\u{200d}t".as_bytes(),
        ".\u{202e}git/x".as_bytes(),
        ".GI\u{206a}T/x".as_bytes(),
        "sub/.git\u{200f}/config".as_bytes(),
    ] {
        assert!(
            !file_ok(path),
            "accepted: {:?}",
            String::from_utf8_lossy(path)
        );
    }
}

#[test]
fn malformed_paths_are_refused() {
    for path in [
        &b""[..],
        b"/",
        b"/abs",
        b"a/",
        b"a//b",
        b".",
        b"..",
        b"./a",
        b"a/./b",
        b"a/../b",
        b"a/..",
        b"nul\0byte",
    ] {
        assert!(
            !file_ok(path),
            "accepted: {:?}",
            String::from_utf8_lossy(path)
        );
    }
}

#[test]
fn gitmodules_is_refused_only_as_a_symlink() {
    for path in [
        &b".gitmodules"[..],
        b".GITMODULES",
        b"sub/.gitmodules",
        b".gitmodules.",
        b".gitmodules :x",
        b"gitmod~1",
        b"GITMOD~4",
        b"gi7eba~1",
        b"gi7eb~12",
    ] {
        assert!(
            file_ok(path),
            "file refused: {:?}",
            String::from_utf8_lossy(path)
        );
        assert!(
            !verify_path(path, true),
            "symlink accepted: {:?}",
            String::from_utf8_lossy(path)
        );
    }
    for path in [
        &b".gitmodulesx"[..],
        b"gitmod~5",
        b"gi7eba~0",
        b"gitmodules",
    ] {
        assert!(
            verify_path(path, true),
            "symlink refused: {:?}",
            String::from_utf8_lossy(path)
        );
    }
}

#[test]
fn one_component_never_holds_a_slash() {
    assert!(verify_component(b".gitignore", false));
    assert!(!verify_component(b"a/b", false));
    assert!(!verify_component(b".GIT", false));
    assert!(!verify_component(b"git~1", false));
}

#[test]
fn quoting_is_gits() {
    assert_eq!(quote(b"src/a.py"), "src/a.py");
    assert!(matches!(quote(b"a b/c-d"), Cow::Borrowed(_)));
    assert_eq!(quote(b"a\tb"), r#""a\tb""#);
    assert_eq!(quote(b"new\nline"), r#""new\nline""#);
    assert_eq!(quote(b"q\"uote"), r#""q\"uote""#);
    assert_eq!(quote(b"back\\slash"), r#""back\\slash""#);
    assert_eq!(quote(b"esc\x1b"), r#""esc\033""#);
    assert_eq!(quote(b"del\x7f"), r#""del\177""#);
    assert_eq!(quote("caf\u{e9}".as_bytes()), r#""caf\303\251""#);
    assert_eq!(quote(b"\xff"), r#""\377""#);
    assert_eq!(quote(b"\x07\x08\x0b\x0c\r"), r#""\a\b\v\f\r""#);
}

#[test]
fn every_byte_survives_quoting() {
    let all: Vec<u8> = (1..=255u8).collect();
    let quoted = quote(&all);
    assert!(
        quoted.bytes().all(|b| (0x20..0x7f).contains(&b)),
        "{quoted}"
    );
    assert_eq!(unquote(&quoted).as_deref(), Some(all.as_slice()));
    for name in [&b"plain"[..], b"a\"b", b"\\", "\u{202e}x".as_bytes(), b"\n"] {
        assert_eq!(unquote(&quote(name)).as_deref(), Some(name));
    }
}

#[test]
fn malformed_quoted_names_are_rejected() {
    for text in [
        r#""open"#,
        r#""bad\q""#,
        r#""short\12""#,
        r#""oct\8xx""#,
        r#""a"b""#,
    ] {
        assert_eq!(unquote(text), None, "{text}");
    }
}
