//! CSV exports of the admin console (issue 18): orders and a customer's ledger, streamed page by
//! page of the same cursor the JSON lists use, with the same filters, so an export of a million
//! rows holds one page in memory at a time.
//!
//! A response is CSV when the request says `?format=csv` or accepts `text/csv`. The first page is
//! read before the response starts, so a bad cursor, filter or user is still a problem JSON; a
//! failure later cuts the stream short (the status is already sent), and is logged.

use std::future::Future;

use application::use_cases::admin_console::{AdminListError, CursorPage, PageAfter};
use futures_util::stream::{self, Stream};
use poem::http::header;
use poem::{Body, IntoResponse, Request, Response};
use poem_openapi::ApiResponse;
use poem_openapi::registry::{MetaMediaType, MetaResponses, MetaSchema, MetaSchemaRef, Registry};

/// The most pages one export reads (100 rows each): a bound on one request's work.
pub(crate) const MAX_EXPORT_PAGES: u32 = 100_000;

/// Whether the request asks for CSV (`?format=csv`, or `Accept: text/csv`).
///
/// # Errors
/// A `format` other than `json` or `csv`, as the 422 problem's message.
pub(crate) fn wants_csv(format: Option<&str>, request: &Request) -> Result<bool, String> {
    match format.map(str::trim) {
        Some("csv") => Ok(true),
        Some("json") => Ok(false),
        Some(_) => Err("format must be json or csv".to_owned()),
        None => Ok(request
            .headers()
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|accept| {
                accept
                    .split(',')
                    .any(|range| range.split(';').next().map(str::trim) == Some("text/csv"))
            })),
    }
}

/// A cell safe to open in a spreadsheet: text starting with `=`, `+`, `-`, `@`, a tab or a
/// carriage return is prefixed with `'`, so it is never read as a formula (CSV injection).
pub(crate) fn text_cell(value: &str) -> String {
    match value.chars().next() {
        Some('=' | '+' | '-' | '@' | '\t' | '\r') => format!("'{value}"),
        _ => value.to_owned(),
    }
}

/// The CSV bytes of `rows` (with `header` first when given).
fn csv_chunk<T>(
    header: Option<&[&str]>,
    rows: &[T],
    cells: fn(&T) -> Vec<String>,
) -> Result<Vec<u8>, std::io::Error> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    if let Some(header) = header {
        writer.write_record(header)?;
    }
    for row in rows {
        writer.write_record(cells(row))?;
    }
    writer.into_inner().map_err(|e| e.into_error())
}

/// What the stream of an export keeps between pages.
struct ExportState<T, F> {
    fetch: F,
    page: Option<CursorPage<T>>,
    pages: u32,
    header: Option<&'static [&'static str]>,
}

/// The CSV body of a list: `first` (already read), then every page `fetch` reads after it.
pub(crate) fn csv_body<T, F, Fut>(
    header: &'static [&'static str],
    first: CursorPage<T>,
    cells: fn(&T) -> Vec<String>,
    fetch: F,
) -> Body
where
    T: Send + 'static,
    F: FnMut(PageAfter) -> Fut + Send + 'static,
    Fut: Future<Output = Result<CursorPage<T>, AdminListError>> + Send + 'static,
{
    let state = ExportState {
        fetch,
        page: Some(first),
        pages: 1,
        header: Some(header),
    };
    Body::from_bytes_stream(chunks(state, cells))
}

fn chunks<T, F, Fut>(
    state: ExportState<T, F>,
    cells: fn(&T) -> Vec<String>,
) -> impl Stream<Item = Result<Vec<u8>, std::io::Error>> + Send + 'static
where
    T: Send + 'static,
    F: FnMut(PageAfter) -> Fut + Send + 'static,
    Fut: Future<Output = Result<CursorPage<T>, AdminListError>> + Send + 'static,
{
    stream::unfold(state, move |mut state| async move {
        let page = state.page.take()?;
        let chunk = csv_chunk(state.header.take(), &page.items, cells);
        if let Some(cursor) = page.next_cursor.filter(|_| state.pages < MAX_EXPORT_PAGES) {
            let after = PageAfter {
                cursor: Some(cursor),
                limit: Some(i64::from(application::pagination::MAX_LIMIT)),
            };
            match (state.fetch)(after).await {
                Ok(next) => {
                    state.page = Some(next);
                    state.pages += 1;
                }
                Err(e) => {
                    tracing::error!(error = %e, "a CSV export stopped early");
                    let cut = std::io::Error::other("export stopped early");
                    return Some((chunk.and(Err(cut)), state));
                }
            }
        }
        Some((chunk, state))
    })
}

/// An endpoint's JSON responses (`R`, problems included), or the list as a CSV download.
pub(crate) enum Exported<R> {
    /// The JSON answer or a problem.
    Json(R),
    /// `text/csv`, downloaded as `filename`.
    Csv {
        /// The streamed rows.
        body: Body,
        /// The download's file name.
        filename: &'static str,
    },
}

impl<R: ApiResponse> ApiResponse for Exported<R> {
    fn meta() -> MetaResponses {
        let mut meta = R::meta();
        if let Some(ok) = meta.responses.iter_mut().find(|r| r.status == Some(200)) {
            ok.content.push(MetaMediaType {
                content_type: "text/csv",
                schema: MetaSchemaRef::Inline(Box::new(MetaSchema::new_with_format(
                    "string", "binary",
                ))),
            });
        }
        meta
    }

    fn register(registry: &mut Registry) {
        R::register(registry);
    }
}

impl<R: IntoResponse> IntoResponse for Exported<R> {
    fn into_response(self) -> Response {
        match self {
            Exported::Json(inner) => inner.into_response(),
            Exported::Csv { body, filename } => Response::builder()
                .content_type("text/csv; charset=utf-8")
                .header(
                    header::CONTENT_DISPOSITION,
                    format!("attachment; filename=\"{filename}\""),
                )
                .body(body),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formulas_are_defused_and_plain_text_is_kept() {
        assert_eq!(text_cell("=HYPERLINK(1)"), "'=HYPERLINK(1)");
        assert_eq!(text_cell("@sum"), "'@sum");
        assert_eq!(text_cell("ana@example.com"), "ana@example.com");
        assert_eq!(text_cell(""), "");
    }

    #[test]
    fn a_chunk_quotes_what_csv_must_quote() {
        let rows = vec![vec!["a,b".to_owned(), "say \"hi\"".to_owned()]];
        let bytes = csv_chunk(Some(&["x", "y"]), &rows, Clone::clone).unwrap();
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            "x,y\n\"a,b\",\"say \"\"hi\"\"\"\n"
        );
    }
}
