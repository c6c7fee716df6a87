//! The modals over the screen, as a stack: the top one takes the keys and is
//! drawn last; closing it shows the one under it again.

use std::mem::discriminant;

use super::delivery::RunRef;
use crate::tui::keymap::Context;

/// A scrollable text shown over the panes (full tool or check output).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pager {
    pub title: String,
    pub lines: Vec<String>,
    pub scroll: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Overlay {
    /// The keys of a context, scrolled by this many lines.
    Help(Context, usize),
    ConfirmCancel,
    /// `q` in the review: leaving now drops the chosen hunks.
    ConfirmDiscard,
    Pager(Pager),
    /// An apply or undo going on, or its result.
    Delivery,
    /// Apply what did not pass verification? Asked before it is done.
    ConfirmUnverified,
    ConfirmUndo(RunRef),
    /// Undo files changed since the apply too.
    ConfirmForceUndo(RunRef),
    /// A run of this repository was interrupted: resume it?
    ConfirmResume {
        run_id: String,
        task: String,
    },
}

/// The open popups, bottom first. A kind of popup is open at most once.
#[derive(Debug, Default)]
pub struct Popups {
    stack: Vec<Overlay>,
}

impl Popups {
    /// The popup that takes the keys.
    pub fn top(&self) -> Option<&Overlay> {
        self.stack.last()
    }

    pub fn top_mut(&mut self) -> Option<&mut Overlay> {
        self.stack.last_mut()
    }

    /// Takes the top popup off to answer a key; the answer raises it again to keep it.
    pub fn pop(&mut self) -> Option<Overlay> {
        self.stack.pop()
    }

    /// Shows `popup` on top; one of its kind already open is taken off first.
    pub fn raise(&mut self, popup: Overlay) {
        self.stack
            .retain(|open| discriminant(open) != discriminant(&popup));
        self.stack.push(popup);
    }

    /// Closes every popup `which` picks.
    pub fn close(&mut self, which: impl Fn(&Overlay) -> bool) {
        self.stack.retain(|open| !which(open));
    }

    pub fn is_empty(&self) -> bool {
        self.stack.is_empty()
    }

    /// Bottom first, the order they are drawn in.
    pub fn iter(&self) -> impl Iterator<Item = &Overlay> {
        self.stack.iter()
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Overlay> {
        self.stack.iter_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closing_the_top_popup_shows_the_one_under_it() {
        let mut popups = Popups::default();
        popups.raise(Overlay::Delivery);
        popups.raise(Overlay::ConfirmCancel);
        assert!(matches!(popups.top(), Some(Overlay::ConfirmCancel)));
        popups.pop();
        assert!(matches!(popups.top(), Some(Overlay::Delivery)));
        popups.pop();
        assert!(popups.is_empty());
    }

    #[test]
    fn a_kind_of_popup_is_open_once_and_raised_to_the_top() {
        let mut popups = Popups::default();
        popups.raise(Overlay::Delivery);
        popups.raise(Overlay::Help(Context::Stream, 0));
        popups.raise(Overlay::Delivery);
        assert_eq!(popups.iter().count(), 2);
        assert!(matches!(popups.top(), Some(Overlay::Delivery)));
        popups.close(|p| matches!(p, Overlay::Help(..)));
        assert_eq!(popups.iter().count(), 1);
    }
}
