//! An optional JSON request body (issue 18: the admin cancel's `{"when": "now"}`).
//!
//! poem-openapi's `Json<Option<T>>` documents a body that is not required, but still refuses a
//! request without a `Content-Type` (415) before the handler runs, and its `ApiRequest` derive
//! marks the body required. [`OptionalJson`] is described in the OpenAPI document as an
//! `application/json` body of `T`'s schema with `required: false`, and reads an absent or blank
//! body as `None` whatever its content type, so clients that send nothing keep working. A body
//! that is not `T` is handed to the handler as an error, which answers it with its own problem
//! (after its own checks, such as who is calling).

use poem::{FromRequest, Request, RequestBody};
use poem_openapi::registry::{MetaMediaType, MetaRequest, Registry};
use poem_openapi::types::ParseFromJSON;
use poem_openapi::{ApiExtractor, ApiExtractorType, ExtractParamOptions};

/// The request body, if one was sent: `Ok(None)` for none, `Err` (why) for one that is not a
/// `T`.
#[derive(Debug)]
pub(crate) struct OptionalJson<T>(pub(crate) Result<Option<T>, String>);

/// Read `body` as an optional `T`.
fn parse<T: ParseFromJSON>(body: &[u8]) -> Result<Option<T>, String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let value: serde_json::Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    T::parse_from_json(Some(value))
        .map(Some)
        .map_err(|e| e.into_message())
}

impl<'a, T: ParseFromJSON> ApiExtractor<'a> for OptionalJson<T> {
    const TYPES: &'static [ApiExtractorType] = &[ApiExtractorType::RequestObject];

    type ParamType = ();
    type ParamRawType = ();

    fn register(registry: &mut Registry) {
        T::register(registry);
    }

    fn request_meta() -> Option<MetaRequest> {
        Some(MetaRequest {
            description: None,
            content: vec![MetaMediaType {
                content_type: "application/json",
                schema: T::schema_ref(),
            }],
            required: false,
        })
    }

    async fn from_request(
        request: &'a Request,
        body: &mut RequestBody,
        _: ExtractParamOptions<Self::ParamType>,
    ) -> poem::Result<Self> {
        let bytes = <Vec<u8> as FromRequest>::from_request(request, body).await?;
        Ok(Self(parse(&bytes)))
    }
}

#[cfg(test)]
mod tests {
    use poem_openapi::{Enum, Object};

    use super::parse;

    #[derive(Debug, PartialEq, Enum)]
    #[oai(rename_all = "snake_case")]
    enum When {
        Now,
        Later,
    }

    #[derive(Debug, PartialEq, Object)]
    struct Body {
        when: When,
    }

    #[test]
    fn an_absent_or_blank_body_is_none_and_anything_but_the_object_is_refused() {
        assert_eq!(parse::<Body>(b""), Ok(None));
        assert_eq!(parse::<Body>(b" \n"), Ok(None));
        assert_eq!(
            parse::<Body>(br#"{"when":"now"}"#),
            Ok(Some(Body { when: When::Now }))
        );
        assert!(parse::<Body>(b"{").is_err());
        assert!(parse::<Body>(b"[]").is_err());
        assert!(parse::<Body>(br#"{"when":"tomorrow"}"#).is_err());
        assert!(parse::<Body>(br#"{"when":3}"#).is_err());
    }
}
