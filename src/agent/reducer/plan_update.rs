//! `update_plan`: the whole plan replaced, validated first; a change of
//! statuses is a plan transition, and a checkpoint is taken at each.

use super::{Agent, Effect};
use crate::agent::plan::Plan;
use crate::model::types::ToolCall;
use crate::protocol::{PlanItem, PlanStatus, RunEvent};

impl Agent {
    pub(super) fn update_plan(&mut self, call: &ToolCall, fx: &mut Vec<Effect>) {
        #[derive(serde::Deserialize)]
        struct Args {
            items: Vec<PlanItem>,
        }
        let parsed = serde_json::from_str::<Args>(&call.arguments)
            .map_err(|e| {
                format!(
                    "update_plan needs {{\"items\": [{{\"id\", \"content\", \"status\": \"pending\"|\"in_progress\"|\"done\", \"notes\"?}}]}}: {e}"
                )
            })
            .and_then(|a| Plan::validate(&a.items).map(|_| a.items).map_err(|e| e.to_string()));
        match parsed {
            Err(reason) => self.answer(
                call,
                false,
                "invalid plan",
                format!("Plan not updated: {reason}"),
                fx,
            ),
            Ok(items) => {
                let transition = statuses(&items) != statuses(&self.plan.items);
                self.plan = Plan { items };
                fx.push(Effect::Emit(RunEvent::PlanUpdated {
                    items: self.plan.items.clone(),
                }));
                if transition {
                    self.checkpoint("plan transition", false, fx);
                }
                let done = self.plan.items.len() - self.plan.unfinished().len();
                let summary = format!("{done}/{} done", self.plan.items.len());
                let current = self
                    .plan
                    .in_progress()
                    .map(|i| format!(" In progress: {} {}.", i.id, i.content))
                    .unwrap_or_default();
                self.answer(
                    call,
                    true,
                    &summary,
                    format!("Plan updated: {summary}.{current}"),
                    fx,
                );
            }
        }
    }
}

fn statuses(items: &[PlanItem]) -> Vec<(&str, PlanStatus)> {
    items.iter().map(|i| (i.id.as_str(), i.status)).collect()
}
