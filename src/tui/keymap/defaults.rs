//! The key bindings minicoder ships with.

use crossterm::event::KeyCode;

use super::{Action, Context, Key};

/// Every default binding, in the order the help overlay lists them.
pub(crate) fn default_bindings() -> Vec<(Context, Key, Action)> {
    use Action::*;
    use Context::*;
    let scrolling = [
        (Key::char('k'), ScrollUp),
        (Key::code(KeyCode::Up), ScrollUp),
        (Key::char('j'), ScrollDown),
        (Key::code(KeyCode::Down), ScrollDown),
        (Key::code(KeyCode::PageUp), PageUp),
        (Key::code(KeyCode::PageDown), PageDown),
        (Key::char('g'), Top),
        (Key::code(KeyCode::Home), Top),
        (Key::char('G'), Bottom),
        (Key::code(KeyCode::End), Bottom),
    ];
    let mut bindings = vec![
        (Global, Key::ctrl('c'), Cancel),
        (Global, Key::char('q'), Quit),
        (Global, Key::char('?'), Action::Help),
        (Global, Key::code(KeyCode::Tab), FocusNext),
        (Global, Key::code(KeyCode::BackTab), FocusPrev),
        (Global, Key::char('z'), Zoom),
        (Global, Key::char('i'), FocusInput),
        (Global, Key::char('p'), ShowApproval),
        (Global, Key::ctrl('r'), ListRuns),
        (Global, Key::char('u'), Undo),
    ];
    bindings.extend(scrolling.map(|(key, action)| (Global, key, action)));
    bindings.extend([
        (Input, Key::code(KeyCode::Enter), Submit),
        (Input, Key::code(KeyCode::Esc), Dismiss),
        (Stream, Key::code(KeyCode::Enter), Expand),
        (Stream, Key::char('o'), ShowOutput),
        (Diff, Key::code(KeyCode::Enter), Expand),
        (Diff, Key::char(']'), NextHunk),
        (Diff, Key::char('['), PrevHunk),
        (Diff, Key::char('}'), NextFile),
        (Diff, Key::char('{'), PrevFile),
        (Diff, Key::char('h'), ScrollLeft),
        (Diff, Key::code(KeyCode::Left), ScrollLeft),
        (Diff, Key::char('l'), ScrollRight),
        (Diff, Key::code(KeyCode::Right), ScrollRight),
        (Matrix, Key::code(KeyCode::Enter), ShowOutput),
        (Plan, Key::code(KeyCode::Enter), Expand),
        (Approval, Key::char('y'), Approve),
        (Approval, Key::char('n'), Refuse),
        (Approval, Key::char('a'), ApproveAll),
        (Approval, Key::code(KeyCode::Esc), Dismiss),
        (Review, Key::char(' '), ToggleHunk),
        (Review, Key::char('A'), ToggleAll),
        (Review, Key::char(']'), NextHunk),
        (Review, Key::char('['), PrevHunk),
        (Review, Key::char('}'), NextFile),
        (Review, Key::char('{'), PrevFile),
        (Review, Key::char('h'), ScrollLeft),
        (Review, Key::code(KeyCode::Left), ScrollLeft),
        (Review, Key::char('l'), ScrollRight),
        (Review, Key::code(KeyCode::Right), ScrollRight),
        (Review, Key::code(KeyCode::Enter), Apply),
        (Review, Key::char('s'), SavePatch),
        (Review, Key::code(KeyCode::Esc), Dismiss),
        (Context::Runs, Key::code(KeyCode::Enter), Open),
        (Context::Runs, Key::char('a'), Apply),
        (Context::Runs, Key::char('r'), Resume),
        (Context::Runs, Key::code(KeyCode::Esc), Dismiss),
        (Show, Key::char(']'), NextHunk),
        (Show, Key::char('['), PrevHunk),
        (Show, Key::char('}'), NextFile),
        (Show, Key::char('{'), PrevFile),
        (Show, Key::char('h'), ScrollLeft),
        (Show, Key::code(KeyCode::Left), ScrollLeft),
        (Show, Key::char('l'), ScrollRight),
        (Show, Key::code(KeyCode::Right), ScrollRight),
        (Show, Key::char('a'), Apply),
        (Show, Key::char('r'), Resume),
        (Show, Key::code(KeyCode::Esc), Dismiss),
        // Deliberate shadows: in the help overlay `q` and `?` close it instead of quitting
        // or reopening it.
        (Context::Help, Key::code(KeyCode::Esc), Dismiss),
        (Context::Help, Key::char('q'), Dismiss),
        (Context::Help, Key::char('?'), Dismiss),
    ]);
    bindings
}
