//! The simulator's one error type: an API error, before it is put in its envelope.
//!
//! Every handler returns `Result<_, ApiError>`; the router turns an error into the HTTP
//! response `{"error":{message,type,param,code}}` ([`ApiError::into_response`]), the
//! WebSocket mode into its `{"type":"error",…}` event ([`ApiError::ws_envelope`]).

use http::{HeaderValue, Response, StatusCode};
use serde_json::json;

use super::{Body, Ctx};

/// An API error: status, message and the provider's `param`/`code` fields.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub param: Option<String>,
    pub code: Option<String>,
    /// A `retry-after` header (seconds) on the HTTP response.
    pub retry_after: Option<&'static str>,
}

impl ApiError {
    pub fn new(
        status: StatusCode,
        message: impl Into<String>,
        param: Option<&str>,
        code: Option<&str>,
    ) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            param: param.map(str::to_string),
            code: code.map(str::to_string),
            retry_after: None,
        }
    }

    /// A 400 `invalid_request_error`.
    pub fn bad(message: impl Into<String>, param: Option<&str>, code: Option<&str>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message, param, code)
    }

    pub fn prev_not_found(id: &str) -> ApiError {
        ApiError::bad(
            format!("Previous response with id '{id}' not found."),
            Some("previous_response_id"),
            Some("previous_response_not_found"),
        )
    }

    /// A non-streamed request whose run ended without completing (an injected fault broke it).
    pub fn simulated_failure() -> ApiError {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Simulated failure.",
            None,
            Some("server_error"),
        )
    }

    /// The error of an injected `status=` fault over HTTP (429 with `Retry-After: 1`).
    pub fn injected_http(status: u16) -> ApiError {
        if status == 429 {
            let mut e = ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "Rate limit reached (simulated by x-sim-fault). Please try again in 1s.",
                None,
                Some("rate_limit_exceeded"),
            );
            e.retry_after = Some("1");
            e
        } else {
            ApiError::server_fault(status)
        }
    }

    /// The error of an injected `status=` fault on a WebSocket (an error event, no header).
    pub fn injected_ws(status: u16) -> ApiError {
        if status == 429 {
            ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "Rate limit reached (simulated). Please try again in 1s.",
                None,
                Some("rate_limit_exceeded"),
            )
        } else {
            ApiError::server_fault(status)
        }
    }

    fn server_fault(status: u16) -> ApiError {
        ApiError::new(
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            "The server had an error while processing your request (simulated).",
            None,
            Some("server_error"),
        )
    }

    /// The provider's error `type` for the status.
    fn kind(&self) -> &'static str {
        match self.status.as_u16() {
            429 => "rate_limit_exceeded",
            401 => "authentication_error",
            404 => "not_found_error",
            s if s >= 500 => "server_error",
            _ => "invalid_request_error",
        }
    }

    /// The HTTP response: `{"error":{message,type,param,code}}` with the common headers.
    pub fn into_response(self, ctx: &Ctx) -> Response<Body> {
        let kind = self.kind();
        let mut r = ctx.json(
            self.status,
            &json!({"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}),
        );
        if let Some(secs) = self.retry_after {
            r.headers_mut()
                .insert("retry-after", HeaderValue::from_static(secs));
        }
        r
    }

    /// The WebSocket mode's error event.
    pub fn ws_envelope(&self) -> String {
        json!({"type": "error", "status": self.status.as_u16(),
            "error": {"type": self.kind(), "code": self.code, "message": self.message, "param": self.param}})
        .to_string()
    }
}
