//! Logging: `tracing` with JSON or human-readable lines, filtered by `RUST_LOG` (default `info`);
//! and, for operators who run a collector, the same spans exported over OTLP
//! (`[telemetry] otlpEndpoint` or `OTEL_EXPORTER_OTLP_ENDPOINT`: HTTP/protobuf to
//! `{endpoint}/v1/traces`, batched on a thread of its own, so a slow or absent collector never
//! holds a request up).

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracerProvider, Tracer};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use crate::settings::LogFormat;

/// How long one export to the collector may take before it is given up.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(3);

/// The OTLP span pipeline; export stops (after a last flush) when it is shut down.
pub struct Otlp {
    provider: SdkTracerProvider,
}

impl Otlp {
    /// A pipeline exporting to the collector at `endpoint` (its base URL, such as
    /// `http://localhost:4318`). Nothing is sent until spans end; a collector that cannot be
    /// reached costs a failed export per batch, logged by the exporter, never a request.
    ///
    /// # Errors
    /// The exporter cannot be built (an unusable URL).
    pub fn start(endpoint: &str) -> anyhow::Result<Self> {
        // The exporter's HTTP client is built here, before any gateway's.
        gateways::install_crypto_provider();
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(format!("{}/v1/traces", endpoint.trim_end_matches('/')))
            .with_timeout(EXPORT_TIMEOUT)
            .build()?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(Resource::builder().with_service_name("tally").build())
            .build();
        Ok(Self { provider })
    }

    /// The tracer the `tracing` layer hands spans to.
    #[must_use]
    pub fn tracer(&self) -> Tracer {
        self.provider.tracer("tally")
    }

    /// Flush what is batched and stop exporting.
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!(error = %e, "the OTLP exporter did not shut down cleanly");
        }
    }
}

/// Install the global subscriber once; later calls do nothing. With `otlp_endpoint`, spans
/// are exported too; the returned pipeline must be shut down at exit to flush the last batch.
/// An exporter that cannot be built is reported on stderr and serving goes on without it.
pub fn init(format: LogFormat, otlp_endpoint: Option<&str>) -> Option<Otlp> {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,sea_orm=warn"));
    let lines = tracing_subscriber::fmt::layer().with_target(true);
    let lines: Box<dyn Layer<Registry> + Send + Sync> = match format {
        LogFormat::Json => lines.json().flatten_event(true).boxed(),
        LogFormat::Pretty => lines.compact().boxed(),
    };
    let otlp = otlp_endpoint.and_then(|endpoint| match Otlp::start(endpoint) {
        Ok(otlp) => Some(otlp),
        Err(e) => {
            eprintln!("OTLP export is off: {e}");
            None
        }
    });
    let spans = otlp
        .as_ref()
        .map(|o| tracing_opentelemetry::layer().with_tracer(o.tracer()));
    // An error means a subscriber is installed already (tests start many apps).
    let _ = tracing_subscriber::registry()
        .with(lines)
        .with(spans)
        .with(filter)
        .try_init();
    otlp
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    #[test]
    fn an_unreachable_collector_costs_nothing_but_failed_exports() {
        // Port 9 (discard) on the loopback: nothing listens, every export is refused.
        let otlp = Otlp::start("http://127.0.0.1:9").expect("the exporter builds");
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(otlp.tracer()));
        let started = Instant::now();
        tracing::subscriber::with_default(subscriber, || {
            for order in 0..100 {
                let span = tracing::info_span!("initiate_payment", order_id = order);
                let _entered = span.enter();
                tracing::info!("work inside the span");
            }
        });
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "spans are handed off, never exported on the caller's thread"
        );
        let stopping = Instant::now();
        otlp.shutdown();
        assert!(
            stopping.elapsed() < EXPORT_TIMEOUT * 3,
            "shutdown is bounded by the export timeout"
        );
    }

    #[test]
    fn an_unusable_endpoint_is_refused_when_the_exporter_is_built() {
        assert!(Otlp::start("not a url").is_err());
    }
}
