use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::*;

fn press(code: KeyCode, modifiers: KeyModifiers) -> KeyEvent {
    KeyEvent::new(code, modifiers)
}

fn char_press(character: char) -> KeyEvent {
    press(KeyCode::Char(character), KeyModifiers::NONE)
}

#[test]
fn key_text_parses_to_crossterm_events() {
    let cases = [
        ("ctrl-c", KeyCode::Char('c'), KeyModifiers::CONTROL),
        ("Ctrl-C", KeyCode::Char('C'), KeyModifiers::CONTROL),
        ("?", KeyCode::Char('?'), KeyModifiers::NONE),
        ("shift-tab", KeyCode::BackTab, KeyModifiers::NONE),
        ("pageup", KeyCode::PageUp, KeyModifiers::NONE),
        ("a", KeyCode::Char('a'), KeyModifiers::NONE),
        ("A", KeyCode::Char('A'), KeyModifiers::NONE),
        ("shift-a", KeyCode::Char('A'), KeyModifiers::NONE),
        ("space", KeyCode::Char(' '), KeyModifiers::NONE),
        ("esc", KeyCode::Esc, KeyModifiers::NONE),
        ("enter", KeyCode::Enter, KeyModifiers::NONE),
        ("up", KeyCode::Up, KeyModifiers::NONE),
        ("-", KeyCode::Char('-'), KeyModifiers::NONE),
        ("ctrl--", KeyCode::Char('-'), KeyModifiers::CONTROL),
        (
            "alt-shift-up",
            KeyCode::Up,
            KeyModifiers::ALT | KeyModifiers::SHIFT,
        ),
        ("f5", KeyCode::F(5), KeyModifiers::NONE),
    ];
    for (text, code, modifiers) in cases {
        let event = parse_key_event(text).expect(text);
        assert_eq!((event.code, event.modifiers), (code, modifiers), "{text}");
    }
}

#[test]
fn key_text_round_trips_through_display() {
    for text in [
        "ctrl-c",
        "?",
        "shift-tab",
        "pageup",
        "pagedown",
        "a",
        "A",
        "space",
        "esc",
        "enter",
        "up",
        "down",
        "left",
        "right",
        "home",
        "end",
        "-",
        "ctrl--",
        "alt-x",
        "ctrl-alt-shift-up",
        "f12",
        "backspace",
        "]",
        "{",
        "ctrl-shift-tab",
    ] {
        let key = Key::parse(text).expect(text);
        assert_eq!(key.to_string(), text);
        assert_eq!(Key::parse(&key.to_string()).expect(text), key);
    }
    assert_eq!(Key::parse("SHIFT-A").expect("parses").to_string(), "A");
    assert_eq!(Key::parse("Esc").expect("parses").to_string(), "esc");
}

#[test]
fn bad_key_text_is_rejected_with_the_text() {
    for text in ["", "ctrl-", "pgup", "f99", "hyper-x"] {
        let error = Key::parse(text).expect_err(text);
        assert!(error.to_string().contains(&format!("`{text}`")), "{error}");
    }
}

#[test]
fn default_lookups_per_context() {
    let keymap = Keymap::defaults();
    let shift = KeyModifiers::SHIFT;
    let cases = [
        (Context::Approval, char_press('y'), Action::Approve),
        (Context::Approval, char_press('n'), Action::Refuse),
        (Context::Approval, char_press('a'), Action::ApproveAll),
        (
            Context::Approval,
            press(KeyCode::Esc, KeyModifiers::NONE),
            Action::Dismiss,
        ),
        (Context::Review, char_press(' '), Action::ToggleHunk),
        (
            Context::Review,
            press(KeyCode::Char('A'), shift),
            Action::ToggleAll,
        ),
        (Context::Review, char_press(']'), Action::NextHunk),
        (Context::Diff, char_press('['), Action::PrevHunk),
        (Context::Diff, char_press('}'), Action::NextFile),
        (Context::Diff, char_press('{'), Action::PrevFile),
        (Context::Diff, char_press('j'), Action::ScrollDown),
        (
            Context::Stream,
            press(KeyCode::Up, KeyModifiers::NONE),
            Action::ScrollUp,
        ),
        (
            Context::Stream,
            press(KeyCode::Enter, KeyModifiers::NONE),
            Action::Expand,
        ),
        (Context::Plan, char_press('z'), Action::Zoom),
        (Context::Matrix, char_press('?'), Action::Help),
        (Context::Matrix, char_press('q'), Action::Quit),
        (
            Context::Matrix,
            press(KeyCode::BackTab, shift),
            Action::FocusPrev,
        ),
        (
            Context::Stream,
            press(KeyCode::Tab, shift),
            Action::FocusPrev,
        ),
        (
            Context::Plan,
            press(KeyCode::Tab, KeyModifiers::NONE),
            Action::FocusNext,
        ),
        (
            Context::Input,
            press(KeyCode::Char('c'), KeyModifiers::CONTROL),
            Action::Cancel,
        ),
        (
            Context::Input,
            press(KeyCode::Enter, KeyModifiers::NONE),
            Action::Submit,
        ),
        (Context::Help, char_press('q'), Action::Dismiss),
    ];
    for (context, event, action) in cases {
        assert_eq!(
            keymap.lookup(context, &event),
            Some(action),
            "{context:?} {event:?}"
        );
    }
}

#[test]
fn typing_in_the_input_box_does_not_trigger_global_keys() {
    let keymap = Keymap::defaults();
    for character in ['q', '?', 'j', 'z'] {
        assert_eq!(keymap.lookup(Context::Input, &char_press(character)), None);
    }
    assert_eq!(keymap.lookup(Context::Stream, &char_press('y')), None);
}

#[test]
fn key_releases_mean_nothing() {
    let keymap = Keymap::defaults();
    let mut release = char_press('q');
    release.kind = KeyEventKind::Release;
    assert_eq!(keymap.lookup(Context::Global, &release), None);
}

#[test]
fn bindings_list_keys_actions_and_descriptions() {
    let keymap = Keymap::defaults();
    let approval = keymap.bindings(Context::Approval);
    assert!(approval.contains(&(
        "y".to_string(),
        Action::Approve,
        Action::Approve.description()
    )));
    assert_eq!(approval.len(), 4);
    let global = keymap.bindings(Context::Global);
    assert!(
        global
            .iter()
            .any(|(key, action, _)| key == "ctrl-c" && *action == Action::Cancel)
    );
    assert!(
        global
            .iter()
            .all(|(_, _, description)| !description.is_empty())
    );
}

#[test]
fn overrides_merge_over_the_defaults() {
    let keymap = Keymap::defaults()
        .with_overrides(
            "[global]\n\"ctrl-q\" = \"quit\"\n\"z\" = \"none\"\n[review]\n\"x\" = \"toggle-hunk\"\n\"space\" = \"apply\"\n",
        )
        .expect("merges");
    let ctrl_q = press(KeyCode::Char('q'), KeyModifiers::CONTROL);
    assert_eq!(keymap.lookup(Context::Diff, &ctrl_q), Some(Action::Quit));
    assert_eq!(
        keymap.lookup(Context::Diff, &char_press('q')),
        Some(Action::Quit)
    );
    assert_eq!(keymap.lookup(Context::Plan, &char_press('z')), None);
    assert_eq!(
        keymap.lookup(Context::Review, &char_press('x')),
        Some(Action::ToggleHunk)
    );
    assert_eq!(
        keymap.lookup(Context::Review, &char_press(' ')),
        Some(Action::Apply)
    );
    assert_eq!(
        keymap.lookup(Context::Review, &char_press('A')),
        Some(Action::ToggleAll)
    );
}

#[test]
fn the_same_key_twice_in_one_context_is_rejected_naming_both() {
    let error = Keymap::defaults()
        .with_overrides("[review]\n\"A\" = \"toggle-all\"\n\"shift-a\" = \"apply\"\n")
        .expect_err("conflict");
    assert!(
        matches!(error, KeymapError::ConflictInContext { .. }),
        "{error}"
    );
    let message = error.to_string();
    assert!(message.contains("\"A\" = \"toggle-all\""), "{message}");
    assert!(message.contains("\"shift-a\" = \"apply\""), "{message}");
}

#[test]
fn a_context_binding_hiding_a_global_one_is_rejected_naming_both() {
    let error = Keymap::defaults()
        .with_overrides("[diff]\n\"q\" = \"next-file\"\n")
        .expect_err("shadow");
    assert!(
        matches!(error, KeymapError::ShadowsGlobal { .. }),
        "{error}"
    );
    let message = error.to_string();
    assert!(
        message.contains("[diff] \"q\" = \"next-file\""),
        "{message}"
    );
    assert!(message.contains("[global] \"q\" = \"quit\""), "{message}");
}

#[test]
fn a_global_binding_hidden_by_a_context_is_rejected_naming_both() {
    let error = Keymap::defaults()
        .with_overrides("[global]\n\"y\" = \"zoom\"\n")
        .expect_err("shadow");
    let message = error.to_string();
    assert!(
        message.contains("[approval] \"y\" = \"approve\""),
        "{message}"
    );
    assert!(message.contains("[global] \"y\" = \"zoom\""), "{message}");
}

#[test]
fn shadows_are_allowed_when_the_global_binding_moves_or_the_defaults_have_them() {
    let keymap = Keymap::defaults()
        .with_overrides(
            "[global]\n\"q\" = \"none\"\n\"ctrl-q\" = \"quit\"\n[diff]\n\"q\" = \"next-file\"\n",
        )
        .expect("no shadow once q is unbound globally");
    assert_eq!(
        keymap.lookup(Context::Diff, &char_press('q')),
        Some(Action::NextFile)
    );
    let keymap = Keymap::defaults()
        .with_overrides("[input]\n\"q\" = \"submit\"\n")
        .expect("plain characters never reach global in the input box");
    assert_eq!(
        keymap.lookup(Context::Input, &char_press('q')),
        Some(Action::Submit)
    );
}

#[test]
fn unknown_contexts_actions_and_bad_files_are_rejected() {
    let cases = [
        ("[sidebar]\n\"x\" = \"quit\"\n", "sidebar"),
        ("[diff]\n\"x\" = \"explode\"\n", "explode"),
        ("[diff]\n\"pgup\" = \"top\"\n", "pgup"),
        ("[diff]\n\"x\" = 3\n", "\"x\""),
        ("diff = 1\n", "[diff]"),
        ("[diff\n", "TOML"),
    ];
    for (text, expected) in cases {
        let error = Keymap::defaults().with_overrides(text).expect_err(text);
        assert!(error.to_string().contains(expected), "{text}: {error}");
    }
}

#[test]
fn load_reads_a_file_and_reports_a_missing_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("keys.toml");
    std::fs::write(&path, "[stream]\n\"O\" = \"show-output\"\n").expect("write");
    let keymap = Keymap::load(Some(&path)).expect("loads");
    assert_eq!(
        keymap.lookup(Context::Stream, &char_press('O')),
        Some(Action::ShowOutput)
    );
    assert_eq!(Keymap::load(None).expect("defaults"), Keymap::defaults());
    let missing = Keymap::load(Some(&dir.path().join("absent.toml"))).expect_err("missing");
    assert!(missing.to_string().contains("absent.toml"), "{missing}");
}

#[test]
fn every_action_name_round_trips() {
    for name in Action::names() {
        let action = Action::from_name(name).expect(name);
        assert_eq!(action.name(), name);
        assert!(!action.description().is_empty());
    }
    for context in Context::ALL {
        assert_eq!(Context::from_name(context.name()), Some(context));
    }
}

#[test]
fn defaults_bind_each_key_once_per_context_and_shadow_only_in_help() {
    let keymap = Keymap::defaults();
    for context in Context::ALL {
        let keys: Vec<String> = keymap
            .bindings(context)
            .into_iter()
            .map(|(key, _, _)| key)
            .collect();
        let unique: std::collections::HashSet<&String> = keys.iter().collect();
        assert_eq!(unique.len(), keys.len(), "{context:?}: {keys:?}");
    }
    let shadows = keymap.shadows();
    assert_eq!(shadows.len(), 2);
    assert!(
        shadows
            .iter()
            .all(|(context, ..)| *context == Context::Help)
    );
}
