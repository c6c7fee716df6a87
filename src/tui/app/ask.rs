//! Ask mode in the session: `/ask` switches to questions answered
//! read-only (no run, no container, no edits), `/code` back to tasks — and
//! a task given in ask mode (or with `/code TASK`) starts a run that keeps
//! what the answers taught. Every decision here; the loop performs the ops.

use super::{App, Op};
use crate::runtime::ask::{Answer, AskUpdate};
use crate::tui::run_view::NoteKind;
use crate::tui::screen::panes::InputMode;

impl App {
    /// What Enter does with `text` when no run is going.
    pub(super) fn submit_idle(&mut self, text: &str) {
        let (command, rest) = match text.split_once(char::is_whitespace) {
            Some((head, rest)) => (head, rest.trim()),
            None => (text, ""),
        };
        match command {
            "/ask" => {
                self.composer.mode = InputMode::Ask;
                if rest.is_empty() {
                    self.view.note(
                        NoteKind::Info,
                        "ask mode: questions are answered from a read-only look at a private copy; /code TASK starts a run that keeps the answers",
                    );
                    self.reset_input();
                } else {
                    self.ask(rest);
                }
            }
            "/code" => {
                let asked = self.composer.mode == InputMode::Ask;
                self.composer.mode = InputMode::Code;
                if rest.is_empty() {
                    self.view
                        .note(NoteKind::Info, "code mode: a task starts a run");
                    self.reset_input();
                } else if asked {
                    self.code(rest);
                } else {
                    self.start(rest);
                }
            }
            _ if self.composer.mode == InputMode::Ask => self.ask(text),
            _ => self.start(text),
        }
    }

    fn ask(&mut self, question: &str) {
        if self.composer.asking {
            self.flash = Some("still answering the last question".into());
            return;
        }
        self.composer.asking = true;
        self.view
            .note(NoteKind::User, format!("you asked: {question}"));
        self.effects.ops.push(Op::Ask(question.to_string()));
        self.reset_input();
    }

    /// A run of `task` that starts from what ask mode learnt.
    fn code(&mut self, task: &str) {
        if self.composer.asking {
            self.composer.mode = InputMode::Ask;
            self.flash = Some("still answering: the run starts once the answer is in".into());
            return;
        }
        self.reset_for_run(task);
        self.view.note(
            NoteKind::Info,
            "the run starts from what ask mode learnt (the questions, the answers, the files read)",
        );
        self.effects.ops.push(Op::Code(task.to_string()));
    }

    pub(super) fn ask_update(&mut self, update: AskUpdate) {
        self.view
            .note(NoteKind::Info, format!("  {}", update.line()));
    }

    pub(super) fn asked(&mut self, result: Result<Box<Answer>, String>) {
        self.composer.asking = false;
        match result {
            Ok(answer) => {
                self.view.answer(&answer.answer);
                for c in answer.citations.iter().filter(|c| !c.found) {
                    self.view.note(
                        NoteKind::Warning,
                        format!("{}:{} is not a line of the repository", c.path, c.line),
                    );
                }
                self.view.note(
                    NoteKind::Info,
                    format!(
                        "answered read-only: {} tool calls, tokens {}",
                        answer.tool_calls,
                        answer.tokens.describe()
                    ),
                );
            }
            Err(e) => self.view.note(NoteKind::Error, format!("no answer: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{ApprovalMode, TokenTotals};
    use crate::runtime::ask::Citation;
    use crate::tui::app::{AppEvent, Keymap, Theme};
    use crate::tui::keymap::parse_key_event;
    use crate::tui::run_view::StreamEntry;

    fn app() -> App {
        let theme = Theme::load_coloured("default", None).expect("theme");
        App::new("/src/repo", Keymap::defaults(), theme, ApprovalMode::Final)
    }

    fn submit(app: &mut App, text: &str) -> Vec<Op> {
        for c in text.chars() {
            let key = if c == ' ' {
                "space".to_string()
            } else {
                c.to_string()
            };
            app.update(AppEvent::Key(parse_key_event(&key).expect("key")));
        }
        app.update(AppEvent::Key(parse_key_event("enter").expect("enter")));
        app.take_ops()
    }

    fn answer(text: &str, citations: Vec<Citation>) -> AppEvent {
        AppEvent::Asked(Ok(Box::new(Answer {
            answer: text.into(),
            citations,
            model: None,
            tokens: TokenTotals {
                input: 1200,
                output: 80,
                ..TokenTotals::default()
            },
            tool_calls: 2,
            refused_calls: 0,
        })))
    }

    #[test]
    fn ask_switches_mode_and_questions_go_out_until_code_starts_a_run_that_keeps_them() {
        let mut a = app();
        assert_eq!(submit(&mut a, "/ask"), []);
        assert_eq!(a.composer.mode, InputMode::Ask);
        assert_eq!(
            submit(&mut a, "what rounds?"),
            [Op::Ask("what rounds?".into())]
        );
        assert!(a.composer.asking);
        assert_eq!(submit(&mut a, "and then?"), [], "one question at a time");
        assert!(a.flash.is_some());
        a.update(answer("page_count floors (pagination.py:3)", Vec::new()));
        assert!(!a.composer.asking);
        // The refused question was kept in the box: Enter asks it now.
        assert_eq!(submit(&mut a, ""), [Op::Ask("and then?".into())]);
        a.update(answer("then it returns", Vec::new()));
        assert!(a.view.stream.iter().any(
            |e| matches!(e, StreamEntry::Answer { text } if text.contains("page_count floors"))
        ));
        assert_eq!(submit(&mut a, "/code fix it"), [Op::Code("fix it".into())]);
        assert_eq!(a.composer.mode, InputMode::Code);
        assert!(a.view.is_running() || a.view.task == "fix it");
    }

    #[test]
    fn a_task_in_code_mode_is_a_plain_run_and_ask_with_a_question_asks_at_once() {
        let mut a = app();
        assert_eq!(submit(&mut a, "/code fix it"), [Op::Start("fix it".into())]);
        let mut b = app();
        assert_eq!(
            submit(&mut b, "/ask why?"),
            [Op::Ask("why?".into())],
            "the question after /ask is asked"
        );
        let mut c = app();
        assert_eq!(submit(&mut c, "fix it"), [Op::Start("fix it".into())]);
    }

    #[test]
    fn a_citation_that_names_no_line_is_flagged_and_a_failure_said() {
        let mut a = app();
        submit(&mut a, "/ask q");
        a.update(answer(
            "see x.py:99",
            vec![Citation {
                path: "x.py".into(),
                line: 99,
                found: false,
            }],
        ));
        let notes: Vec<String> = a
            .view
            .stream
            .iter()
            .filter_map(|e| match e {
                StreamEntry::Note { text, .. } => Some(text.clone()),
                _ => None,
            })
            .collect();
        assert!(
            notes.iter().any(|n| n.contains("x.py:99 is not a line")),
            "{notes:?}"
        );
        submit(&mut a, "again");
        a.update(AppEvent::Asked(Err("the provider said no".into())));
        assert!(!a.composer.asking);
        assert!(a.view.stream.iter().any(
            |e| matches!(e, StreamEntry::Note { text, .. } if text.contains("no answer: the provider said no"))
        ));
    }
}
