//! The session draws hostile text (escape sequences, C1 controls, a
//! right-to-left override) from the model and a command as harmless
//! replacement characters, never as raw controls; snapshot in `snapshots/`.

use crate::support;

use std::time::Duration;

use minicoder::protocol::RunEvent;
use minicoder::runtime::ApprovalMode;
use minicoder::tui::app::{App, AppEvent, Clock};
use minicoder::tui::keymap::Keymap;
use minicoder::tui::theme::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use support::run_events as ev;

const HOSTILE: &str = "notes\u{1b}]52;c;aGVsbG8=\u{7}\u{1b}[2J\u{202e}txt.exe\u{9b}1m";

fn screen(width: u16, height: u16) -> String {
    let theme = Theme::load_coloured("default", None).expect("default theme");
    let mut app = App::new(
        "/home/ada/src/pagination",
        Keymap::defaults(),
        theme,
        ApprovalMode::Final,
    );
    app.settings.clock = Clock::Fixed(Duration::from_secs(42));
    app.start("read the notes");
    let events = [
        ev::started(),
        RunEvent::ModelDelta {
            turn: 1,
            text: format!("Reading {HOSTILE} first."),
        },
        RunEvent::ToolStarted {
            call_id: "call_1".into(),
            name: "read_file".into(),
            arguments: serde_json::json!({ "path": HOSTILE }).to_string(),
        },
        RunEvent::ToolFinished {
            call_id: "call_1".into(),
            name: "read_file".into(),
            ok: false,
            summary: format!("`{HOSTILE}` does not exist"),
            result: format!("`{HOSTILE}` does not exist in the workspace"),
            output_file: None,
            duration_ms: 2,
            changed_files: Vec::new(),
        },
    ];
    for event in events {
        app.update(AppEvent::Run(event));
    }
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("terminal");
    terminal.draw(|frame| app.draw(frame)).expect("draw");
    terminal.backend().to_string()
}

#[test]
fn hostile_text_is_drawn_without_its_controls() {
    let shown = screen(120, 30);
    let raw: Vec<String> = shown
        .chars()
        .filter(|&c| c != '\n' && minicoder::terminal_text::is_unsafe(c))
        .map(|c| format!("U+{:04X}", c as u32))
        .collect();
    assert!(raw.is_empty(), "raw controls on screen: {raw:?}\n{shown}");
    // Escape sequences go whole, single controls become U+FFFD, in the
    // model's text and in the tool's arguments alike.
    assert!(
        shown.contains("Reading notes\u{fffd}txt.exe\u{fffd}1m first."),
        "{shown}"
    );
    assert!(
        shown.contains("read_file notes\u{fffd}txt.exe\u{fffd}1m "),
        "{shown}"
    );
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../../snapshots");
    settings.set_prepend_module_to_snapshot(false);
    settings.add_filter(r"\b\d{2}:\d{2}(/\d{2}:\d{2})?\b", "[CLOCK]");
    settings.bind(|| insta::assert_snapshot!("hostile_text_120x30", shown));
}
