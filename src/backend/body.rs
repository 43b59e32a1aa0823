//! The JSON bodies of Chat Completions and Responses requests, serialized straight from the
//! conversation.
//!
//! Owns: the shape of each body (which keys, which values) and its byte form. Every object's
//! keys are written in sorted order, the order `serde_json` gives a `json!` object, so a server
//! gets the same bytes it got when a body was built as a `Value`, without the `Value`'s maps,
//! strings and boxes (~40 allocations a request). The tests are `request`'s: each body against
//! the JSON it must be, with its keys in sorted order.
//! Does not own: headers, the path, or what a turn sends ([`super::request`]).

use serde::ser::{Serialize, SerializeSeq, Serializer};
use serde::Serialize as Derive;

use super::{Conversation, Item, RequestSpec, ToolChoice};
use crate::plan::Target;
use crate::vocab::RequestKind;

/// The Responses body: `ws` for the WebSocket mode's flat `response.create` (no `stream`),
/// else the HTTP body.
pub(super) fn responses(
    target: &Target,
    conv: &Conversation,
    spec: &RequestSpec,
    ws: bool,
) -> serde_json::Result<Vec<u8>> {
    let body = ResponsesBody {
        generate: (ws && spec.kind == RequestKind::Warmup).then_some(false),
        input: ResponsesInput(conv.items_to_send()),
        instructions: (!conv.system.is_empty()).then_some(conv.system.as_str()),
        max_output_tokens: limit(spec),
        model: &target.model,
        previous_response_id: conv.previous_response_id(),
        sim_fault: spec.fault.as_deref().filter(|_| ws),
        store: target.store,
        stream: (!ws).then_some(true),
        stream_options: (!ws).then_some(Obfuscation {
            include_obfuscation: false,
        }),
        tool_choice: Choice::offered(spec, false),
        tools: Tools::offered(spec, false),
        kind: ws.then_some("response.create"),
    };
    to_vec(&body)
}

/// The Chat Completions body.
pub(super) fn chat(
    target: &Target,
    conv: &Conversation,
    spec: &RequestSpec,
) -> serde_json::Result<Vec<u8>> {
    let body = ChatBody {
        ignore_eos: target.ignore_eos.then_some(true),
        max_tokens: limit(spec),
        messages: ChatMessages(conv),
        model: &target.model,
        stream: true,
        stream_options: ChatStreamOptions {
            continuous_usage_stats: spec.continuous_usage_stats.then_some(true),
            include_usage: true,
        },
        tool_choice: Choice::offered(spec, true),
        tools: Tools::offered(spec, true),
    };
    to_vec(&body)
}

/// The output limit, when the request sets one (0: the server's default).
fn limit(spec: &RequestSpec) -> Option<u32> {
    (spec.max_output_tokens > 0).then_some(spec.max_output_tokens)
}

fn to_vec(body: &impl Serialize) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(512);
    serde_json::to_writer(&mut out, body)?;
    Ok(out)
}

#[derive(Derive)]
struct ResponsesBody<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    generate: Option<bool>,
    input: ResponsesInput<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    instructions: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    previous_response_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sim_fault: Option<&'a str>,
    store: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<Obfuscation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Choice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Tools<'a>>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
}

#[derive(Derive)]
struct Obfuscation {
    include_obfuscation: bool,
}

/// The items a Responses request sends, each conversation item as one or more input items.
struct ResponsesInput<'a>(&'a [Item]);

impl Serialize for ResponsesInput<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(None)?;
        for item in self.0 {
            match item {
                Item::User(text) => seq.serialize_element(&InputItem::Message {
                    content: [InputText {
                        text,
                        kind: "input_text",
                    }],
                    role: "user",
                    kind: "message",
                })?,
                Item::Assistant { text, calls } => {
                    if !text.is_empty() {
                        // The EasyInputMessage form (string content): accepted by the API and
                        // by servers that do not model `output_text` parts in input (llmsim 0.6).
                        seq.serialize_element(&InputItem::AssistantMessage {
                            content: text,
                            role: "assistant",
                            kind: "message",
                        })?;
                    }
                    for c in calls {
                        seq.serialize_element(&InputItem::FunctionCall {
                            arguments: &c.arguments,
                            call_id: &c.call_id,
                            name: &c.name,
                            kind: "function_call",
                        })?;
                    }
                }
                Item::ToolOutput { call_id, output } => {
                    seq.serialize_element(&InputItem::FunctionCallOutput {
                        call_id,
                        output,
                        kind: "function_call_output",
                    })?
                }
            }
        }
        seq.end()
    }
}

#[derive(Derive)]
#[serde(untagged)]
enum InputItem<'a> {
    Message {
        content: [InputText<'a>; 1],
        role: &'static str,
        #[serde(rename = "type")]
        kind: &'static str,
    },
    AssistantMessage {
        content: &'a str,
        role: &'static str,
        #[serde(rename = "type")]
        kind: &'static str,
    },
    FunctionCall {
        arguments: &'a str,
        call_id: &'a str,
        name: &'a str,
        #[serde(rename = "type")]
        kind: &'static str,
    },
    FunctionCallOutput {
        call_id: &'a str,
        output: &'a str,
        #[serde(rename = "type")]
        kind: &'static str,
    },
}

#[derive(Derive)]
struct InputText<'a> {
    text: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
}

/// The function tools offered, in the Responses (flat) or Chat (`function`-wrapped) form.
struct Tools<'a> {
    names: &'a [String],
    chat: bool,
}

impl<'a> Tools<'a> {
    /// The tools `spec` offers, if any.
    fn offered(spec: &'a RequestSpec, chat: bool) -> Option<Self> {
        (!spec.tools.is_empty()).then_some(Tools {
            names: &spec.tools,
            chat,
        })
    }
}

impl Serialize for Tools<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.names.len()))?;
        for name in self.names {
            let def = FunctionDef {
                description: Description(name),
                name,
                parameters: Parameters {
                    properties: Properties {
                        input: TypeOnly { kind: "string" },
                    },
                    kind: "object",
                },
            };
            if self.chat {
                seq.serialize_element(&ChatTool {
                    function: def,
                    kind: "function",
                })?;
            } else {
                seq.serialize_element(&ResponsesTool {
                    def,
                    kind: "function",
                })?;
            }
        }
        seq.end()
    }
}

#[derive(Derive)]
struct FunctionDef<'a> {
    description: Description<'a>,
    name: &'a str,
    parameters: Parameters,
}

/// `The {name} tool.`, written without an intermediate `String`.
struct Description<'a>(&'a str);

impl Serialize for Description<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("The {} tool.", self.0))
    }
}

#[derive(Derive)]
struct Parameters {
    properties: Properties,
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Derive)]
struct Properties {
    input: TypeOnly,
}

#[derive(Derive)]
struct TypeOnly {
    #[serde(rename = "type")]
    kind: &'static str,
}

/// A Responses tool: the definition's keys and `type` in one object (sorted: description,
/// name, parameters, type).
#[derive(Derive)]
struct ResponsesTool<'a> {
    #[serde(flatten)]
    def: FunctionDef<'a>,
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Derive)]
struct ChatTool<'a> {
    function: FunctionDef<'a>,
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Derive)]
struct ChatBody<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    ignore_eos: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    messages: ChatMessages<'a>,
    model: &'a str,
    stream: bool,
    stream_options: ChatStreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Choice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Tools<'a>>,
}

#[derive(Derive)]
struct ChatStreamOptions {
    #[serde(skip_serializing_if = "Option::is_none")]
    continuous_usage_stats: Option<bool>,
    include_usage: bool,
}

/// The system prompt, then the whole history as chat messages.
struct ChatMessages<'a>(&'a Conversation);

impl Serialize for ChatMessages<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let conv = self.0;
        let mut seq = s.serialize_seq(None)?;
        if !conv.system.is_empty() {
            seq.serialize_element(&ChatMessage::Text {
                content: &conv.system,
                role: "system",
            })?;
        }
        for item in conv.items() {
            match item {
                Item::User(t) => seq.serialize_element(&ChatMessage::Text {
                    content: t,
                    role: "user",
                })?,
                Item::Assistant { text, calls } if calls.is_empty() => {
                    seq.serialize_element(&ChatMessage::Text {
                        content: text,
                        role: "assistant",
                    })?
                }
                Item::Assistant { text, calls } => seq.serialize_element(&ChatMessage::Calls {
                    content: (!text.is_empty()).then_some(text.as_str()),
                    role: "assistant",
                    tool_calls: ChatCalls(calls),
                })?,
                Item::ToolOutput { call_id, output } => {
                    seq.serialize_element(&ChatMessage::ToolResult {
                        content: output,
                        role: "tool",
                        tool_call_id: call_id,
                    })?
                }
            }
        }
        seq.end()
    }
}

#[derive(Derive)]
#[serde(untagged)]
enum ChatMessage<'a> {
    Text {
        content: &'a str,
        role: &'static str,
    },
    Calls {
        /// `null` when the assistant said nothing beside its calls.
        content: Option<&'a str>,
        role: &'static str,
        tool_calls: ChatCalls<'a>,
    },
    ToolResult {
        content: &'a str,
        role: &'static str,
        tool_call_id: &'a str,
    },
}

/// `[{"function": {"arguments", "name"}, "id", "type": "function"}, …]`.
struct ChatCalls<'a>(&'a [super::ToolCall]);

impl Serialize for ChatCalls<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|c| ChatCall {
            function: CalledFunction {
                arguments: &c.arguments,
                name: &c.name,
            },
            id: &c.call_id,
            kind: "function",
        }))
    }
}

#[derive(Derive)]
struct ChatCall<'a> {
    function: CalledFunction<'a>,
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Derive)]
struct CalledFunction<'a> {
    arguments: &'a str,
    name: &'a str,
}

/// `tool_choice`, in the Responses (flat) or Chat (`function`-wrapped) form.
struct Choice<'a> {
    choice: &'a ToolChoice,
    chat: bool,
}

impl<'a> Choice<'a> {
    /// `spec`'s tool choice, when it offers tools.
    fn offered(spec: &'a RequestSpec, chat: bool) -> Option<Self> {
        (!spec.tools.is_empty()).then_some(Choice {
            choice: &spec.tool_choice,
            chat,
        })
    }
}

impl Serialize for Choice<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let chat = self.chat;
        match self.choice {
            ToolChoice::Auto => s.serialize_str("auto"),
            ToolChoice::None => s.serialize_str("none"),
            ToolChoice::Function(name) => FunctionRef { name, chat }.serialize(s),
            ToolChoice::Parallel(names) => {
                let list = AllowedList {
                    mode: "required",
                    tools: FunctionRefs { names, chat },
                };
                let kind = "allowed_tools";
                if chat {
                    ChatAllowed {
                        allowed_tools: list,
                        kind,
                    }
                    .serialize(s)
                } else {
                    ResponsesAllowed { list, kind }.serialize(s)
                }
            }
        }
    }
}

/// One function by name: `{"name": n, "type": "function"}`, or in Chat form
/// `{"function": {"name": n}, "type": "function"}`.
struct FunctionRef<'a> {
    name: &'a str,
    chat: bool,
}

impl Serialize for FunctionRef<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let name = self.name;
        let kind = "function";
        if self.chat {
            ChatNamed {
                function: NameOnly { name },
                kind,
            }
            .serialize(s)
        } else {
            Named { name, kind }.serialize(s)
        }
    }
}

struct FunctionRefs<'a> {
    names: &'a [String],
    chat: bool,
}

impl Serialize for FunctionRefs<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let chat = self.chat;
        s.collect_seq(self.names.iter().map(|name| FunctionRef { name, chat }))
    }
}

#[derive(Derive)]
struct Named<'a> {
    name: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Derive)]
struct ChatNamed<'a> {
    function: NameOnly<'a>,
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Derive)]
struct NameOnly<'a> {
    name: &'a str,
}

/// `{"mode": "required", "tools": […]}`: the list of an `allowed_tools` choice.
#[derive(Derive)]
struct AllowedList<'a> {
    mode: &'static str,
    tools: FunctionRefs<'a>,
}

/// Responses: the list's keys and `type` in one object (sorted: mode, tools, type).
#[derive(Derive)]
struct ResponsesAllowed<'a> {
    #[serde(flatten)]
    list: AllowedList<'a>,
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Derive)]
struct ChatAllowed<'a> {
    allowed_tools: AllowedList<'a>,
    #[serde(rename = "type")]
    kind: &'static str,
}
