//! st5-serve's errors: [`ServeError`], what starting the server can fail with, and
//! [`ApiError`], what a request gets back, written in the shape its API's clients parse
//! (text-embeddings-inference's `{"error", "error_type"}` or OpenAI's
//! `{"error": {"message", "type", "param", "code"}}`) with text-embeddings-inference's status
//! codes.

use std::fmt;

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::api::{OpenAiError, OpenAiErrorDetail, TeiError};

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the server's runtime failed")]
    Runtime(#[source] std::io::Error),
    /// The model did not load (the loader's message: the file, tensor or hub id it names).
    #[error("loading the model failed: {0}")]
    Load(String),
    #[error(transparent)]
    Model(#[from] st5_core::Error),
}

/// The closed set of request failures; each has one status code and one `error_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The body is not JSON, or not UTF-8 (400).
    Malformed,
    /// Nothing to embed: an empty list or an empty text (400).
    Empty,
    /// Valid JSON that breaks a rule: wrong types, too many inputs, too long, unknown prompt (422).
    Validation,
    /// Token ids outside the model's vocabulary (422).
    Tokenizer,
    /// The body is over the payload limit (413).
    PayloadTooLarge,
    /// No bearer token, or the wrong one (401).
    Unauthorized,
    /// More requests in flight than `--max-concurrent-requests` (429, with `Retry-After`).
    Overloaded,
    /// The model is still loading (503).
    Unhealthy,
    /// The model failed on this batch (500); the server goes on serving.
    Backend,
}

impl ErrorKind {
    pub fn status(self) -> StatusCode {
        match self {
            ErrorKind::Malformed | ErrorKind::Empty => StatusCode::BAD_REQUEST,
            ErrorKind::Validation | ErrorKind::Tokenizer => StatusCode::UNPROCESSABLE_ENTITY,
            ErrorKind::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorKind::Unauthorized => StatusCode::UNAUTHORIZED,
            ErrorKind::Overloaded => StatusCode::TOO_MANY_REQUESTS,
            ErrorKind::Unhealthy => StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::Backend => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The `error_type` text-embeddings-inference writes (and the metrics' `err` label).
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Malformed => "Malformed",
            ErrorKind::Empty => "Empty",
            ErrorKind::Validation => "Validation",
            ErrorKind::Tokenizer => "Tokenizer",
            ErrorKind::PayloadTooLarge => "PayloadTooLarge",
            ErrorKind::Unauthorized => "Unauthorized",
            ErrorKind::Overloaded => "Overloaded",
            ErrorKind::Unhealthy => "Unhealthy",
            ErrorKind::Backend => "Backend",
        }
    }

    /// OpenAI's `type` for the same failure.
    fn openai_type(self) -> &'static str {
        match self {
            ErrorKind::Unauthorized => "authentication_error",
            ErrorKind::Overloaded => "rate_limit_error",
            ErrorKind::Unhealthy | ErrorKind::Backend => "server_error",
            _ => "invalid_request_error",
        }
    }
}

/// Which API's error shape a route answers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Tei,
    OpenAi,
}

impl Api {
    /// The API a path belongs to: OpenAI's routes are under `/v1/`.
    pub fn of_path(path: &str) -> Self {
        if path.starts_with("/v1/") { Api::OpenAi } else { Api::Tei }
    }
}

/// A failed request: what went wrong, the message, the field it concerns, and the API shape.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub kind: ErrorKind,
    pub message: String,
    pub param: Option<&'static str>,
    pub api: Api,
}

impl ApiError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into(), param: None, api: Api::Tei }
    }
    pub fn param(mut self, param: &'static str) -> Self {
        self.param = Some(param);
        self
    }
    pub fn api(mut self, api: Api) -> Self {
        self.api = api;
        self
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.name(), self.message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.kind.status();
        let mut response = match self.api {
            Api::Tei => (
                status,
                Json(TeiError { error: self.message, error_type: self.kind.name().into() }),
            )
                .into_response(),
            Api::OpenAi => (
                status,
                Json(OpenAiError {
                    error: OpenAiErrorDetail {
                        message: self.message,
                        kind: self.kind.openai_type().into(),
                        param: self.param.map(Into::into),
                        code: Some(self.kind.name().into()),
                    },
                }),
            )
                .into_response(),
        };
        if self.kind == ErrorKind::Overloaded {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_status_and_shape() {
        let cases = [
            (ErrorKind::Malformed, 400),
            (ErrorKind::Empty, 400),
            (ErrorKind::Validation, 422),
            (ErrorKind::Tokenizer, 422),
            (ErrorKind::PayloadTooLarge, 413),
            (ErrorKind::Unauthorized, 401),
            (ErrorKind::Overloaded, 429),
            (ErrorKind::Unhealthy, 503),
            (ErrorKind::Backend, 500),
        ];
        for (kind, status) in cases {
            for api in [Api::Tei, Api::OpenAi] {
                let r = ApiError::new(kind, "m").api(api).into_response();
                assert_eq!(r.status().as_u16(), status, "{kind:?} {api:?}");
                assert_eq!(
                    r.headers().contains_key(header::RETRY_AFTER),
                    kind == ErrorKind::Overloaded,
                    "{kind:?}"
                );
            }
        }
        assert_eq!(Api::of_path("/v1/embeddings"), Api::OpenAi);
        assert_eq!(Api::of_path("/embed"), Api::Tei);
    }
}
