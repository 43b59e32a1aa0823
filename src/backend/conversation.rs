//! One session's conversation and the chaining rule.
//!
//! Owns: the history (user messages, assistant turns with their function calls, tool
//! outputs), the last `previous_response_id`, and which items the server has already seen.
//! Chaining:
//! * WebSocket: `previous_response_id` + only the new items, continuing from the last
//!   response *on that socket*. After a failed turn (the server evicts it from its
//!   connection-local cache) or on a new socket, the full history without an id.
//! * HTTP + Responses + `store`: `store:true` + `previous_response_id` (the server persisted
//!   it, so a failure or a new connection does not break the chain).
//! * Otherwise: the full history every turn.
//!
//! Does not own: JSON (see [`super::request`]) or I/O.

use crate::vocab::{ApiFlavour, Chaining, TransportKind};

use super::ToolCall;

/// One history item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// A user message.
    User(String),
    /// An assistant turn: its text (possibly empty) and the function calls it made.
    Assistant {
        /// Answer text.
        text: String,
        /// Function calls.
        calls: Vec<ToolCall>,
    },
    /// A tool result sent back for `call_id`.
    ToolOutput {
        /// The call answered.
        call_id: String,
        /// The tool's output.
        output: String,
    },
}

/// The reply of one request, as the session needs it to continue.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reply {
    /// The request completed successfully.
    pub ok: bool,
    /// The server's response id.
    pub response_id: Option<String>,
    /// Function calls the model made.
    pub tool_calls: Vec<ToolCall>,
    /// Answer text.
    pub text: String,
    /// The reply of a `generate:false` warm-up: its response id is a chain head with no
    /// output behind it, which a server may not keep (llmsim 0.6 does not).
    pub warmup: bool,
}

/// Per-session conversation state.
#[derive(Debug, Clone)]
pub struct Conversation {
    /// System prompt (chat) / `instructions` (responses).
    pub system: String,
    items: Vec<Item>,
    previous_response_id: Option<String>,
    /// Items `[..seen]` are known to the server through `previous_response_id`.
    seen: usize,
    /// `previous_response_id` is a warm-up's ([`Reply::warmup`]).
    head_is_warmup: bool,
    ws: bool,
    store_chaining: bool,
}

impl Conversation {
    /// A new conversation for `api` over `transport`; `store` is the target's `store` flag.
    pub fn new(system: &str, api: ApiFlavour, transport: TransportKind, store: bool) -> Self {
        let responses = api == ApiFlavour::Responses;
        Conversation {
            system: system.to_string(),
            items: Vec::new(),
            previous_response_id: None,
            seen: 0,
            head_is_warmup: false,
            ws: responses && transport == TransportKind::Ws,
            store_chaining: responses && transport != TransportKind::Ws && store,
        }
    }

    /// Appends a user message.
    pub fn add_user_message(&mut self, text: &str) {
        self.items.push(Item::User(text.to_string()));
    }

    /// Appends a tool output.
    pub fn add_tool_output(&mut self, call_id: &str, output: &str) {
        self.items.push(Item::ToolOutput {
            call_id: call_id.to_string(),
            output: output.to_string(),
        });
    }

    /// Records a reply. A successful one extends the history with the assistant turn and
    /// becomes the chain head; a failed one is handled like [`Self::on_failure`].
    pub fn on_reply(&mut self, reply: &Reply) {
        if !reply.ok {
            self.on_failure();
            return;
        }
        if !reply.text.is_empty() || !reply.tool_calls.is_empty() {
            self.items.push(Item::Assistant {
                text: reply.text.clone(),
                calls: reply.tool_calls.clone(),
            });
        }
        if let Some(id) = &reply.response_id {
            self.previous_response_id = Some(id.clone());
            self.seen = self.items.len();
            self.head_is_warmup = reply.warmup;
        }
    }

    /// Puts `text` (a recorded answer) in place of the last reply's answer text, so the
    /// history later requests resend is the recorded conversation. Items the server already
    /// holds through `previous_response_id` are not sent again, so chaining is unaffected.
    pub fn replace_last_answer(&mut self, text: &str) {
        match self.items.last_mut() {
            Some(Item::Assistant { text: t, .. }) => *t = text.to_string(),
            _ => {
                let all_seen = self.seen >= self.items.len();
                self.items.push(Item::Assistant {
                    text: text.to_string(),
                    calls: Vec::new(),
                });
                if all_seen {
                    self.seen = self.items.len();
                }
            }
        }
    }

    /// A turn failed. On a WebSocket the server evicted the chain head: send everything next.
    pub fn on_failure(&mut self) {
        if self.ws {
            self.previous_response_id = None;
            self.seen = 0;
            self.head_is_warmup = false;
        }
    }

    /// A new WebSocket: its connection-local cache is empty.
    pub fn on_new_socket(&mut self) {
        if self.ws {
            self.previous_response_id = None;
            self.seen = 0;
            self.head_is_warmup = false;
        }
    }

    /// How the next request sends history.
    pub fn chaining(&self) -> Chaining {
        if (self.ws || self.store_chaining) && self.previous_response_id.is_some() {
            Chaining::PreviousResponseId
        } else {
            Chaining::FullHistory
        }
    }

    /// The next request chains on a warm-up's response id.
    pub fn chains_on_warmup(&self) -> bool {
        self.head_is_warmup && self.chaining() == Chaining::PreviousResponseId
    }

    /// The id to chain from, when chaining.
    pub fn previous_response_id(&self) -> Option<&str> {
        match self.chaining() {
            Chaining::PreviousResponseId => self.previous_response_id.as_deref(),
            Chaining::FullHistory => None,
        }
    }

    /// The items the next request must carry.
    pub fn items_to_send(&self) -> &[Item] {
        match self.chaining() {
            Chaining::PreviousResponseId => &self.items[self.seen.min(self.items.len())..],
            Chaining::FullHistory => &self.items,
        }
    }

    /// The whole history.
    pub fn items(&self) -> &[Item] {
        &self.items
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(id: &str, text: &str) -> Reply {
        Reply {
            ok: true,
            response_id: Some(id.into()),
            tool_calls: vec![],
            text: text.into(),
            warmup: false,
        }
    }

    #[test]
    fn a_recorded_answer_replaces_the_replays_own_in_the_history_sent() {
        let mut c = Conversation::new(
            "sys",
            ApiFlavour::ChatCompletions,
            TransportKind::Http,
            false,
        );
        c.add_user_message("a");
        c.on_reply(&reply("r1", "the replay's own words"));
        c.replace_last_answer("as recorded");
        c.add_user_message("b");
        let want = [
            Item::User("a".into()),
            Item::Assistant {
                text: "as recorded".into(),
                calls: vec![],
            },
            Item::User("b".into()),
        ];
        assert_eq!(c.items_to_send(), &want);
        // Chained over a WebSocket: the server holds the answer; nothing extra is sent.
        let mut w = Conversation::new("sys", ApiFlavour::Responses, TransportKind::Ws, false);
        w.add_user_message("a");
        w.on_reply(&reply("r1", ""));
        w.replace_last_answer("as recorded");
        w.add_user_message("b");
        assert_eq!(w.items_to_send(), &[Item::User("b".into())]);
    }

    #[test]
    fn ws_chains_incrementally_and_resets_on_failure_and_new_socket() {
        let mut c = Conversation::new("sys", ApiFlavour::Responses, TransportKind::Ws, false);
        c.add_user_message("a");
        assert_eq!(c.chaining(), Chaining::FullHistory);
        c.on_reply(&reply("resp_1", "A"));
        c.add_user_message("b");
        assert_eq!(c.chaining(), Chaining::PreviousResponseId);
        assert_eq!(c.previous_response_id(), Some("resp_1"));
        assert_eq!(c.items_to_send(), &[Item::User("b".into())]);
        c.on_failure();
        assert_eq!(c.chaining(), Chaining::FullHistory);
        assert_eq!(c.items_to_send().len(), 3);
        c.on_reply(&reply("resp_2", "B"));
        c.on_new_socket();
        assert_eq!(c.chaining(), Chaining::FullHistory);
    }

    #[test]
    fn a_warm_up_is_the_chain_head_until_the_next_reply_or_failure() {
        let mut c = Conversation::new("sys", ApiFlavour::Responses, TransportKind::Ws, false);
        let warm = Reply {
            warmup: true,
            ..reply("resp_w", "")
        };
        c.on_reply(&warm);
        c.add_user_message("a");
        assert!(c.chains_on_warmup());
        assert_eq!(c.previous_response_id(), Some("resp_w"));
        c.on_reply(&reply("resp_1", "A"));
        assert!(!c.chains_on_warmup());
        c.on_reply(&warm);
        c.on_failure();
        assert!(!c.chains_on_warmup());
        c.on_reply(&warm);
        c.on_new_socket();
        assert!(!c.chains_on_warmup());
        // Without a WebSocket nothing chains, on a warm-up or otherwise.
        let mut h = Conversation::new(
            "sys",
            ApiFlavour::Responses,
            TransportKind::HttpPooled,
            false,
        );
        h.on_reply(&warm);
        assert!(!h.chains_on_warmup());
    }

    #[test]
    fn http_store_chains_and_survives_failures_chat_never_chains() {
        let mut c = Conversation::new(
            "sys",
            ApiFlavour::Responses,
            TransportKind::HttpPooled,
            true,
        );
        c.add_user_message("a");
        c.on_reply(&reply("resp_1", "A"));
        c.add_user_message("b");
        c.on_failure();
        c.add_user_message("c");
        assert_eq!(c.previous_response_id(), Some("resp_1"));
        assert_eq!(c.items_to_send().len(), 2);
        let mut chat = Conversation::new(
            "sys",
            ApiFlavour::ChatCompletions,
            TransportKind::Http,
            true,
        );
        chat.add_user_message("a");
        chat.on_reply(&reply("chatcmpl-1", "A"));
        chat.add_user_message("b");
        assert_eq!(chat.chaining(), Chaining::FullHistory);
        assert_eq!(chat.items_to_send().len(), 3);
        let mut nostore =
            Conversation::new("sys", ApiFlavour::Responses, TransportKind::Http2, false);
        nostore.add_user_message("a");
        nostore.on_reply(&reply("resp_1", "A"));
        assert_eq!(nostore.chaining(), Chaining::FullHistory);
    }
}
