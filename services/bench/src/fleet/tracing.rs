//! `hermes bench fleet --tracing off,10,100`: what exporting spans costs the fleet
//! (docs/performance.md, "Tracing's cost"). One fleet per setting, each with its own scratch
//! database, namespace and HTTP port (fleets sharing a database would publish each other's
//! outbox rows into their own namespaces), taking turns round by round like the kinds. Each
//! traced fleet exports over OTLP/HTTP to a sink this process serves on loopback: it answers
//! every export 200 and counts requests, bytes and spans without decoding the spans, so the
//! cost measured is the fleet's, not a collector's. The report gives each setting's frontier
//! and latency at half of it as ratios to the fleet with tracing off, and what was exported
//! per answer.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::Path;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::post;
use hermes_config::Config;
use hermes_db::scratch::ScratchDb;
use prost::Message;
use secrecy::ExposeSecret;

use super::Round;
use super::search::ms;
use crate::fleet_process::{Fleet, free_port};
use crate::stats::median;

/// How one fleet is traced: not at all, or exporting the given percentage of new traces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// No endpoint set: tracing off (docs/tracing.md, "Turning it on").
    Off,
    /// Exporting, with `parentbased_traceidratio` at this percentage (1–100).
    Percent(u8),
}

impl FromStr for Setting {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("off") {
            return Ok(Setting::Off);
        }
        match s.trim_end_matches('%').parse::<u8>() {
            Ok(p @ 1..=100) => Ok(Setting::Percent(p)),
            _ => Err(format!(
                "{s:?}: a tracing setting is `off` or a sampling percentage from 1 to 100"
            )),
        }
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Setting::Off => f.write_str("off"),
            Setting::Percent(p) => write!(f, "{p}%"),
        }
    }
}

impl Setting {
    /// The name a kind's figures under this setting are reported by: `chat/10%`.
    pub fn label(self, kind: &str) -> String {
        format!("{kind}/{self}")
    }

    /// The environment that traces a fleet this way into `sink`. A caller's `traceparent`
    /// would decide for the sampler; the bench sends none, so the ratio is what is kept.
    fn env(self, sink: Option<&Sink>) -> Vec<(String, String)> {
        let (Setting::Percent(p), Some(sink)) = (self, sink) else {
            return Vec::new();
        };
        [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", sink.endpoint()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf".into()),
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio".into()),
            (
                "OTEL_TRACES_SAMPLER_ARG",
                format!("{}", f64::from(p) / 100.0),
            ),
            (
                "OTEL_BSP_SCHEDULE_DELAY",
                sink.delay.as_millis().to_string(),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// The target of a traced setting's frontier against tracing off (issue 39): at most
    /// 3 % lower at 10 %, at most 10 % lower at 100 %; none for other settings.
    fn target(self) -> Option<f64> {
        match self {
            Setting::Percent(10) => Some(0.97),
            Setting::Percent(100) => Some(0.90),
            _ => None,
        }
    }
}

/// The environment variables that would trace every fleet alike: the bench sets each fleet's
/// own, so it refuses to start with them set.
pub const INHERITED: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
];

/// What a sink has received.
#[derive(Default)]
struct Counts {
    requests: AtomicU64,
    bytes: AtomicU64,
    spans: AtomicU64,
    last: Mutex<Option<Instant>>,
}

/// An OTLP/HTTP endpoint on loopback that answers every export and counts it.
pub struct Sink {
    addr: SocketAddr,
    /// The traced fleet's time between two exports (`OTEL_BSP_SCHEDULE_DELAY`).
    delay: Duration,
    counts: Arc<Counts>,
    task: tokio::task::JoinHandle<()>,
}

/// How long the sink must have received nothing, counted from the later of its last export
/// and the reading's start (the end of a step), before a reading: a little more than the
/// fleet's time between two exports (`--export-delay-ms`, `OTEL_BSP_SCHEDULE_DELAY`), so the
/// spans of the step just ended have been exported, and its exporter's work is in the CPU
/// read next. An untraced fleet is read after the same wait, so both are read alike.
pub(crate) fn quiet(delay: Duration) -> Duration {
    delay + Duration::from_millis(500)
}

/// The longest wait for that quiet, in quiet times (a fleet that keeps exporting when idle
/// is read anyway).
const QUIET_AT_MOST: u32 = 4;

impl Sink {
    /// Serve `POST /v1/traces` on a free loopback port, for a fleet exporting every `delay`.
    pub async fn start(delay: Duration) -> anyhow::Result<Self> {
        let counts = Arc::new(Counts::default());
        let app = Router::new()
            .route("/v1/traces", post(export))
            .with_state(counts.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            addr,
            delay,
            counts,
            task,
        })
    }

    /// What `OTEL_EXPORTER_OTLP_ENDPOINT` is set to (the exporter appends `/v1/traces`).
    fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Wait until nothing was received for [`quiet`] (at most [`QUIET_AT_MOST`] times it), then read
    /// the counts, and the spans the fleet dropped (`hermes_trace_spans_dropped_total`).
    pub async fn reading(&self, client: &reqwest::Client, admin_ports: &[u16]) -> Exported {
        let started = Instant::now();
        let mut poll = tokio::time::interval(Duration::from_millis(250));
        loop {
            poll.tick().await;
            let last = *self.counts.last.lock().unwrap_or_else(|e| e.into_inner());
            // Spans that ended just before the reading may not have left yet: the quiet
            // counts from the reading's start at the earliest.
            let since = last.map_or(started, |t| t.max(started));
            let wait = quiet(self.delay);
            if since.elapsed() >= wait || started.elapsed() >= wait * QUIET_AT_MOST {
                break;
            }
        }
        let c = &self.counts;
        Exported {
            requests: c.requests.load(Ordering::Relaxed) as f64,
            bytes: c.bytes.load(Ordering::Relaxed) as f64,
            spans: c.spans.load(Ordering::Relaxed) as f64,
            dropped: super::infra::metric_sum(
                client,
                admin_ports,
                "hermes_trace_spans_dropped_total",
            )
            .await,
        }
    }

    /// Spans received so far.
    pub fn spans(&self) -> u64 {
        self.counts.spans.load(Ordering::Relaxed)
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One export: counted, never decoded beyond the nesting that holds the spans, answered with
/// an empty `ExportTraceServiceResponse` (full success).
async fn export(State(counts): State<Arc<Counts>>, body: Bytes) -> impl IntoResponse {
    counts.requests.fetch_add(1, Ordering::Relaxed);
    counts.bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
    counts.spans.fetch_add(span_count(body), Ordering::Relaxed);
    *counts.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/x-protobuf")],
    )
}

/// `ExportTraceServiceRequest` as far as the spans: field numbers of the protocol's
/// `trace_service.proto` and `trace.proto` (the `opentelemetry-proto` crate's types), each
/// span left as the bytes it is (no copy when read from `Bytes`), every other field skipped.
#[derive(Clone, PartialEq, prost::Message)]
struct ExportView {
    #[prost(message, repeated, tag = "1")]
    resource_spans: Vec<ResourceSpansView>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ResourceSpansView {
    #[prost(message, repeated, tag = "2")]
    scope_spans: Vec<ScopeSpansView>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ScopeSpansView {
    #[prost(bytes = "bytes", repeated, tag = "2")]
    spans: Vec<Bytes>,
}

/// The spans of one export (0 for a body that is not one).
fn span_count(body: Bytes) -> u64 {
    ExportView::decode(body).map_or(0, |e| {
        e.resource_spans
            .iter()
            .flat_map(|r| &r.scope_spans)
            .map(|s| s.spans.len() as u64)
            .sum()
    })
}

/// A sink's counts at one instant (and the fleet's dropped spans).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Exported {
    pub requests: f64,
    pub bytes: f64,
    pub spans: f64,
    pub dropped: f64,
}

impl Exported {
    /// What was exported per answer between two readings.
    pub fn per_answer(before: &Exported, after: &Exported, answers: usize) -> Exported {
        let n = answers.max(1) as f64;
        let per = |a: f64, b: f64| (a - b).max(0.0) / n;
        Exported {
            requests: per(after.requests, before.requests),
            bytes: per(after.bytes, before.bytes),
            spans: per(after.spans, before.spans),
            dropped: per(after.dropped, before.dropped),
        }
    }
}

/// A fleet of one setting beside the bench's main fleet: its own scratch database (with the
/// linked users seeded), namespace, HTTP port, processes and sink.
pub struct Other {
    pub setting: Setting,
    pub ns: String,
    pub base: String,
    /// Locked by the rounds for its turn: started, measured, stopped.
    pub fleet: tokio::sync::Mutex<Fleet>,
    pub scratch: ScratchDb,
    pub sink: Option<Sink>,
}

/// The namespace of the fleet of `settings[i]` for `i` ≥ 1 (the first is the main fleet's).
pub fn namespace(main: &str, i: usize) -> String {
    format!("{main}t{i}")
}

/// The sink of the main fleet's setting (if traced) and the environment it adds.
pub async fn main_fleet(
    setting: Setting,
    delay: Duration,
) -> anyhow::Result<(Option<Sink>, Vec<(String, String)>)> {
    let sink = match setting {
        Setting::Off => None,
        Setting::Percent(_) => Some(Sink::start(delay).await?),
    };
    let env = setting.env(sink.as_ref());
    Ok((sink, env))
}

/// What a fleet's environment depends on: its database URL, namespace and HTTP port.
pub type EnvOf<'a> = dyn Fn(&str, &str, u16) -> Vec<(String, String)> + 'a;

/// Start a fleet for each of `settings` after the first, each on its own scratch database;
/// on a failure, whatever was started is stopped and removed.
pub async fn start_others(
    config: &Config,
    settings: &[Setting],
    main_ns: &str,
    services: &[&'static str],
    env_of: &EnvOf<'_>,
    logs: &Path,
    delay: Duration,
) -> anyhow::Result<Vec<Other>> {
    let mut others = Vec::new();
    for (i, &setting) in settings.iter().enumerate().skip(1) {
        match start_one(
            config,
            setting,
            &namespace(main_ns, i),
            services,
            env_of,
            logs,
            delay,
        )
        .await
        {
            Ok(other) => others.push(other),
            Err(e) => {
                finish(config, others).await;
                return Err(e.context(format!("the fleet with tracing {setting}")));
            }
        }
    }
    Ok(others)
}

async fn start_one(
    config: &Config,
    setting: Setting,
    ns: &str,
    services: &[&'static str],
    env_of: &EnvOf<'_>,
    logs: &Path,
    delay: Duration,
) -> anyhow::Result<Other> {
    let scratch = ScratchDb::create(&config.database_url, "hermes_bench").await?;
    let started = async {
        crate::seed::users(&scratch.db, super::load::USERS, config).await?;
        let sink = match setting {
            Setting::Off => None,
            Setting::Percent(_) => Some(Sink::start(delay).await?),
        };
        let http = free_port()?;
        let mut env = env_of(scratch.url.expose_secret(), ns, http);
        env.extend(setting.env(sink.as_ref()));
        let logs = logs.join(ns);
        std::fs::create_dir_all(&logs)?;
        eprintln!(
            "bench fleet: tracing {setting}: database {}, namespace {ns}",
            scratch.name()
        );
        let fleet = Fleet::start(services, env, &logs).await?;
        anyhow::Ok((sink, http, fleet))
    }
    .await;
    match started {
        Ok((sink, http, fleet)) => Ok(Other {
            setting,
            ns: ns.to_string(),
            base: format!("http://127.0.0.1:{http}"),
            fleet: tokio::sync::Mutex::new(fleet),
            scratch,
            sink,
        }),
        Err(e) => {
            let _ = scratch.drop_now().await;
            Err(e)
        }
    }
}

/// Stop the other fleets, drop their databases and delete their queues.
pub async fn finish(config: &Config, others: Vec<Other>) {
    for mut other in others {
        other.fleet.get_mut().stop_all().await;
        if let Err(e) = other.scratch.drop_now().await {
            eprintln!("bench fleet: could not drop the scratch database: {e}");
        }
        super::delete_queues(config, &other.ns).await;
    }
}

/// Each kind's figures under each setting as ratios to tracing off, medians over the rounds
/// of each round's ratio (a round's settings ran back to back, so they share its drift),
/// and what was exported per answer at half the frontier.
pub fn report(
    results: &BTreeMap<String, Vec<Round>>,
    kinds: &[&'static str],
    settings: &[Setting],
) {
    println!(
        "Tracing's cost (ratios to tracing off: medians of each round's ratio; exports per \
         answer at half the frontier):"
    );
    println!(
        "{:<16} {:>10} {:>8} {:>8} {:>5} {:>8} {:>8} {:>9} {:>8} {:>9} {:>9} {:>8}",
        "kind/tracing",
        "frontier/s",
        "ratio",
        "target",
        "met",
        "p50 ms",
        "p99 ms",
        "CPU ms",
        "spans",
        "bytes",
        "exports",
        "dropped"
    );
    for kind in kinds {
        let off = results.get(&Setting::Off.label(kind));
        for &setting in settings {
            let Some(rounds) = results.get(&setting.label(kind)) else {
                continue;
            };
            let m = |f: &dyn Fn(&Round) -> f64| median(rounds.iter().map(f).collect());
            // No frontier was searched with `--rate`: then there is no ratio, and no verdict.
            let ratio = off.and_then(|off| {
                let ratios: Vec<f64> = rounds
                    .iter()
                    .zip(off)
                    .filter_map(|(r, o)| Some(r.frontier? / o.frontier?.max(1.0)))
                    .collect();
                (!ratios.is_empty()).then(|| median(ratios))
            });
            let (target, met) = setting.target().map_or(("-".into(), "-"), |t| {
                let met = ratio.map_or("-", |r| if r >= t { "yes" } else { "no" });
                (format!("≥{t:.2}"), met)
            });
            let exported = |f: &dyn Fn(&Exported) -> f64| match setting {
                Setting::Off => "-".to_string(),
                Setting::Percent(_) => format!("{:.1}", m(&|r| r.exported.as_ref().map_or(0.0, f))),
            };
            println!(
                "{:<16} {:>10.0} {:>8} {:>8} {:>5} {:>8.1} {:>8.1} {:>9.2} {:>8} {:>9} {:>9} {:>8}",
                setting.label(kind),
                m(&|r| r.frontier.unwrap_or(0.0)),
                ratio.map_or("-".to_string(), |r| format!("{r:.3}")),
                target,
                met,
                m(&|r| ms(r.figures.p50)),
                m(&|r| ms(r.figures.p99)),
                m(&|r| r.per_process.iter().map(|p| p.1).sum()),
                exported(&|e| e.spans),
                exported(&|e| e.bytes),
                exported(&|e| e.requests),
                exported(&|e| e.dropped),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue};
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};

    #[test]
    fn settings_are_off_or_a_percentage() {
        assert_eq!("off".parse(), Ok(Setting::Off));
        assert_eq!("10".parse(), Ok(Setting::Percent(10)));
        assert_eq!("100%".parse(), Ok(Setting::Percent(100)));
        for bad in ["0", "101", "ten", ""] {
            assert!(bad.parse::<Setting>().is_err(), "{bad}");
        }
        assert_eq!(Setting::Percent(10).label("chat"), "chat/10%");
        assert_eq!(Setting::Off.label("chat"), "chat/off");
        assert!(Setting::Off.env(None).is_empty());
    }

    /// The view counts what the protocol's own types encode: spans across resources and
    /// scopes, with the attributes and resources it skips.
    #[test]
    fn spans_are_counted_as_the_protocol_encodes_them() {
        let span = |name: &str| Span {
            name: name.into(),
            trace_id: vec![1; 16],
            span_id: vec![2; 8],
            attributes: vec![KeyValue {
                key: "k".into(),
                value: Some(AnyValue::default()),
                ..Default::default()
            }],
            ..Default::default()
        };
        let scope = |spans| ScopeSpans {
            scope: Some(InstrumentationScope {
                name: "hermes".into(),
                ..Default::default()
            }),
            spans,
            ..Default::default()
        };
        let request = ExportTraceServiceRequest {
            resource_spans: vec![
                ResourceSpans {
                    resource: Some(Resource::default()),
                    scope_spans: vec![scope(vec![span("a"), span("b")]), scope(vec![span("c")])],
                    ..Default::default()
                },
                ResourceSpans {
                    scope_spans: vec![scope(vec![span("d")])],
                    ..Default::default()
                },
            ],
        };
        assert_eq!(span_count(Bytes::from(request.encode_to_vec())), 4);
        assert_eq!(span_count(Bytes::new()), 0);
        assert_eq!(span_count(Bytes::from_static(b"\xff\xff")), 0);
    }

    #[test]
    fn exports_per_answer_divide_the_difference() {
        let at = |n: f64| Exported {
            requests: n,
            bytes: n * 100.0,
            spans: n * 10.0,
            dropped: 0.0,
        };
        let per = Exported::per_answer(&at(2.0), &at(12.0), 5);
        assert_eq!(per.requests, 2.0);
        assert_eq!(per.bytes, 200.0);
        assert_eq!(per.spans, 20.0);
        assert_eq!(per.dropped, 0.0);
    }
}
