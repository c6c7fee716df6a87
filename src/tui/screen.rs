//! What the session shows, as data: which screen is up, the popups over it,
//! and the state each pane and modal owns.
//!
//! These types know nothing of [`crate::tui::app::App`]: the app's
//! transitions change them, and the widgets draw from them and the
//! [`crate::tui::run_view::RunView`], so neither needs the other.
//!
//! | module     | holds                                                          |
//! |------------|----------------------------------------------------------------|
//! | `panes`    | the focused pane, the panes' scrolls, the task box and history |
//! | `popups`   | the stack of modals over the screen (help, confirmations, pager) |
//! | `approval` | the edit waiting for an answer, and those queued behind it     |
//! | `review`   | the final review of the verified patch                          |
//! | `runs`     | the runs browser and the run opened in it                      |
//! | `delivery` | an apply or undo: what is asked, and its state on screen       |

pub mod approval;
pub mod delivery;
pub mod panes;
pub mod popups;
pub mod review;
pub mod runs;

use std::time::Duration;

use runs::Browser;

pub use review::Review;

use super::keymap::Keymap;
use super::theme::Theme;
use crate::protocol::ApprovalMode;

/// What the session is doing: the panes of the run (idle or running, as the
/// run's phase says), the final review, or the runs browser. Popups and the
/// approval modal come and go over any of them.
#[derive(Debug, Default)]
pub enum Screen {
    #[default]
    Panes,
    Review(Box<Review>),
    /// The browser; the review it was opened over comes back when it closes.
    Runs {
        browser: Box<Browser>,
        under: Option<Box<Review>>,
    },
}

impl Screen {
    /// The review on screen, or under the browser.
    pub fn review(&self) -> Option<&Review> {
        match self {
            Screen::Review(review) => Some(review),
            Screen::Runs { under, .. } => under.as_deref(),
            Screen::Panes => None,
        }
    }

    pub fn review_mut(&mut self) -> Option<&mut Review> {
        match self {
            Screen::Review(review) => Some(review),
            Screen::Runs { under, .. } => under.as_deref_mut(),
            Screen::Panes => None,
        }
    }

    pub fn browser(&self) -> Option<&Browser> {
        match self {
            Screen::Runs { browser, .. } => Some(browser),
            _ => None,
        }
    }

    pub fn browser_mut(&mut self) -> Option<&mut Browser> {
        match self {
            Screen::Runs { browser, .. } => Some(browser),
            _ => None,
        }
    }

    /// Shows `review`; with the browser up, it waits under it.
    pub fn show_review(&mut self, review: Review) {
        match self {
            Screen::Runs { under, .. } => *under = Some(Box::new(review)),
            _ => *self = Screen::Review(Box::new(review)),
        }
    }

    /// The review is over; the browser, if up, stays.
    pub fn close_review(&mut self) {
        match self {
            Screen::Review(_) => *self = Screen::Panes,
            Screen::Runs { under, .. } => *under = None,
            Screen::Panes => {}
        }
    }

    /// Opens `browser` over the panes or the review (a browser already up is replaced).
    pub fn open_runs(&mut self, browser: Browser) {
        let under = match std::mem::take(self) {
            Screen::Panes => None,
            Screen::Review(review) => Some(review),
            Screen::Runs { under, .. } => under,
        };
        *self = Screen::Runs {
            browser: Box::new(browser),
            under,
        };
    }

    /// Closes the browser: back to the review it was opened over, else the panes.
    pub fn close_runs(&mut self) {
        if let Screen::Runs { under, .. } = self {
            *self = under.take().map_or(Screen::Panes, Screen::Review);
        }
    }
}

/// The elapsed clock: real, or fixed for snapshots.
#[derive(Debug, Clone, Copy)]
pub enum Clock {
    Real,
    Fixed(Duration),
}

/// What the session was started with and does not change by itself.
pub struct Settings {
    pub keymap: Keymap,
    pub theme: Theme,
    pub approval_mode: ApprovalMode,
    pub clock: Clock,
}

#[cfg(test)]
mod tests {
    use super::delivery::RunRef;
    use super::*;
    use crate::tui::diff::{DiffModel, DiffViewState, ReviewSelection};

    fn review(id: &str) -> Review {
        let model = DiffModel::default();
        Review {
            run: RunRef {
                id: id.into(),
                dir: String::new(),
                task: String::new(),
            },
            patch: String::new(),
            selection: ReviewSelection::new(&model),
            model,
            state: DiffViewState::default(),
            artifact_dir: String::new(),
            saved: None,
        }
    }

    #[test]
    fn the_browser_opens_over_the_review_and_gives_it_back() {
        let mut screen = Screen::Panes;
        screen.show_review(review("r1"));
        screen.open_runs(Browser::default());
        assert!(screen.browser().is_some());
        assert_eq!(screen.review().map(|r| r.run.id.as_str()), Some("r1"));
        screen.close_runs();
        assert!(matches!(screen, Screen::Review(_)));
        screen.close_review();
        assert!(matches!(screen, Screen::Panes));
    }

    #[test]
    fn a_review_that_opens_under_the_browser_waits_there() {
        let mut screen = Screen::Panes;
        screen.open_runs(Browser::default());
        screen.show_review(review("r2"));
        assert!(screen.browser().is_some(), "the browser stays on top");
        screen.close_runs();
        assert_eq!(screen.review().map(|r| r.run.id.as_str()), Some("r2"));
    }

    #[test]
    fn closing_what_is_not_open_changes_nothing() {
        let mut screen = Screen::Review(Box::new(review("r3")));
        screen.close_runs();
        assert!(matches!(screen, Screen::Review(_)));
        let mut screen = Screen::Panes;
        screen.close_review();
        screen.close_runs();
        assert!(matches!(screen, Screen::Panes));
    }
}
