//! What a run spends: tokens (input, output, cached) and, where the person
//! priced the model in `config.toml`, money. A token or cost budget stops
//! the run as `budget` before a request that would start past it; the model
//! is warned once when 80 % of either is used, so it can finish the
//! essential part and ask for completion first.

use super::{Agent, Effect};
use crate::model::types::{ChatMessage, ModelReply};
use crate::protocol::{Outcome, RunEvent, format_usd};

/// The share of a budget at which the model is warned, in percent.
pub(crate) const WARN_AT_PERCENT: u64 = 80;

impl Agent {
    /// Counts a reply's tokens and, when its model has a price, its cost.
    pub(super) fn spend(&mut self, reply: &ModelReply) {
        // (A provider's counts are believed, never allowed to overflow.)
        let s = &mut self.stats;
        s.input_tokens = s.input_tokens.saturating_add(reply.usage.input);
        s.output_tokens = s.output_tokens.saturating_add(reply.usage.output);
        s.cached_tokens = s
            .cached_tokens
            .saturating_add(reply.usage.cached.min(reply.usage.input));
        if reply.usage.estimated {
            s.estimated_replies = s.estimated_replies.saturating_add(1);
        }
        match self.config.prices.get(&reply.model) {
            Some(price) => {
                self.stats.cost_micros = self
                    .stats
                    .cost_micros
                    .saturating_add(price.cost_micros(&reply.usage));
            }
            None if self.unpriced_model.is_none() => {
                self.unpriced_model =
                    Some(format!("{}:{}", reply.model.provider, reply.model.model));
            }
            None => {}
        }
    }

    /// What the run has cost, when every reply's model had a price.
    pub fn cost_micros(&self) -> Option<u64> {
        (self.unpriced_model.is_none() && !self.config.prices.is_empty())
            .then_some(self.stats.cost_micros)
    }

    /// Why the next request may not be sent: a budget is used up, or a cost
    /// budget cannot be kept because a model has no price.
    pub(super) fn budget_stop(&self) -> Option<(Outcome, String)> {
        let used = self
            .stats
            .input_tokens
            .saturating_add(self.stats.output_tokens);
        if used >= self.config.max_tokens {
            return Some((
                Outcome::Budget,
                format!(
                    "the token budget is used up: {used} of {} tokens ({} input, {} of them cached, {} output); `minicoder resume RUN --max-tokens N` goes on with a larger one",
                    self.config.max_tokens,
                    self.stats.input_tokens,
                    self.stats.cached_tokens,
                    self.stats.output_tokens
                ),
            ));
        }
        let max_cost = self.config.max_cost_micros?;
        if let Some(model) = &self.unpriced_model {
            return Some((
                Outcome::Failure,
                format!(
                    "{model} has no price in config.toml's [prices], so the cost budget ({}) cannot be kept; add one, or run without --max-cost",
                    format_usd(max_cost)
                ),
            ));
        }
        (self.stats.cost_micros >= max_cost).then(|| {
            (
                Outcome::Budget,
                format!(
                    "the cost budget is used up: {} of {} ({used} tokens); `minicoder resume RUN --max-cost USD` goes on with a larger one",
                    format_usd(self.stats.cost_micros),
                    format_usd(max_cost)
                ),
            )
        })
    }

    /// Tells the model, once per budget, that 80 % of it is used.
    pub(super) fn warn_of_budget(&mut self, fx: &mut Vec<Effect>) {
        let used = self
            .stats
            .input_tokens
            .saturating_add(self.stats.output_tokens);
        let mut notes = Vec::new();
        if !self.budget_warned.tokens && reached(used, self.config.max_tokens) {
            self.budget_warned.tokens = true;
            notes.push(format!(
                "{used} of the {} tokens of the token budget",
                self.config.max_tokens
            ));
        }
        if let Some(max) = self.config.max_cost_micros
            && !self.budget_warned.cost
            && reached(self.stats.cost_micros, max)
        {
            self.budget_warned.cost = true;
            notes.push(format!(
                "{} of the {} cost budget",
                format_usd(self.stats.cost_micros),
                format_usd(max)
            ));
        }
        if notes.is_empty() {
            return;
        }
        let message = format!(
            "Budget warning: {} are used (over {WARN_AT_PERCENT} %). The run stops when a budget is used up: finish the essential part of the task now, run the checks and request completion.",
            notes.join(" and ")
        );
        self.context
            .history
            .push(ChatMessage::user(message.clone()));
        fx.push(Effect::Emit(RunEvent::AgentCorrection {
            turn: self.stats.turns,
            message,
        }));
    }

    /// A resumed run's prices as they are now, and its budgets as the
    /// person set them now (never lower than what it had): a raised budget
    /// is warned of again at 80 %.
    pub(crate) fn resume_budgets(
        &mut self,
        prices: crate::protocol::PriceTable,
        max_tokens: Option<u64>,
        max_cost_micros: Option<u64>,
    ) {
        self.config.prices = prices;
        if let Some(n) = max_tokens.filter(|n| *n > self.config.max_tokens) {
            self.config.max_tokens = n;
            self.budget_warned.tokens = false;
        }
        if let Some(n) = max_cost_micros
            && self.config.max_cost_micros.is_none_or(|old| n > old)
        {
            self.config.max_cost_micros = Some(n);
            self.budget_warned.cost = false;
        }
    }
}

fn reached(used: u64, max: u64) -> bool {
    max > 0 && u128::from(used) * 100 >= u128::from(max) * u128::from(WARN_AT_PERCENT)
}

/// Which budgets the model was warned of.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct BudgetWarned {
    pub tokens: bool,
    pub cost: bool,
}
