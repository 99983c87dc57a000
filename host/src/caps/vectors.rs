//! `vectors`: sentence vectors of a plugin's indexes (granted with
//! `index`, on the same indexes). The work is [`crate::vectors`]'s; this
//! converts at the WIT edge.

use crate::bindings::mcphost::plugin::index::Hit;
use crate::bindings::mcphost::plugin::vectors::{
    Host, Progress, SimilarAnswer, SimilarRequest, State,
};
use crate::bindings::{CapabilityError, Refusal};
use crate::store::CallState;
use crate::vectors;

type Answer<T> = Result<T, Refusal<CapabilityError>>;

impl Host for CallState {
    async fn embed(&mut self, name: String, field: String) -> Answer<State> {
        let opened = self.opened(&name)?;
        let state = vectors::embed(&opened, &field)
            .map_err(|why| CapabilityError::Invalid(format!("index `{name}`: {why}")))?;
        Ok(state_of(state))
    }

    async fn prepare(&mut self, text: String) -> wasmtime::Result<()> {
        // No index is named: the question is only embedded, nothing read.
        if self.grants.capabilities.iter().any(|c| c == "index") {
            vectors::prepare(&text);
        }
        Ok(())
    }

    async fn similar(&mut self, name: String, request: SimilarRequest) -> Answer<SimilarAnswer> {
        let opened = self.opened(&name)?;
        let filters: Vec<textindex::Filter> = request
            .filters
            .into_iter()
            .map(|f| textindex::Filter {
                field: f.field,
                any_of: f.any_of,
            })
            .collect();
        let (state, hits) = vectors::similar(
            &opened,
            &request.field,
            &request.text,
            &filters,
            request.limit as usize,
            &request.return_,
        )
        .await
        .map_err(|why| self.read_failed(&name, &opened, why))?;
        Ok(SimilarAnswer {
            state: state_of(state),
            hits: hits
                .into_iter()
                .map(|(score, fields)| Hit {
                    score,
                    fields,
                    snippet: None,
                })
                .collect(),
        })
    }
}

fn state_of(state: vectors::State) -> State {
    let progress = |p: vectors::Progress| Progress {
        done: p.done,
        total: p.total,
        model: p.model,
    };
    match state {
        vectors::State::Unavailable(why) => State::Unavailable(why),
        vectors::State::Building(p) => State::Building(progress(p)),
        vectors::State::Ready(p) => State::Ready(progress(p)),
        vectors::State::Failed(why) => State::Failed(why),
    }
}
