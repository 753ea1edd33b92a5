//! Sampling decided once per message (docs/tracing.md, "Sampling"). The sampler's verdict is
//! known as soon as a message's first span in a process is made (ingest's server span, a
//! stage's consumer span). A span the sampler dropped is marked here, and the trace layer's
//! filter then refuses every span and event made under it: an unsampled message builds
//! none of its children's spans, so it costs no attribute, allocation or sampler call
//! beyond that first span. Every supported sampler gives a child the verdict of a local
//! parent that was dropped: the parent-based ones by rule, `traceidratio` because parent and
//! child share the trace id it decides on, `always_off` always; `always_on` drops nothing.
//! A stage's message under a remote parent that was not sampled is known dropped before any
//! span of it is made, when the sampler follows its parent ([`follows_unsampled`]): then it
//! gets no span at all, and the stage runs it inside [`untraced`], which the filter reads
//! instead of a mark. A span the OpenTelemetry layer holds costs a lock and a clock read at
//! every poll of the future it instruments, and its making a sampler call and four
//! allocations: a fleet that drops nine messages in ten paid that in every stage.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};

use tracing::subscriber::Interest;
use tracing::{Metadata, Span, Subscriber};
use tracing_subscriber::Registry;
use tracing_subscriber::layer::{Context, Filter};
use tracing_subscriber::registry::LookupSpan;

use hermes_config::Sampler;
use hermes_types::trace::{TARGET, TraceParent};

/// Whether the process's sampler follows a remote parent's `sampled` flag, set by `init`.
static PARENT_BASED: AtomicBool = AtomicBool::new(false);

/// Record the process's sampler.
pub(super) fn set_sampler(sampler: Option<Sampler>) {
    let parent_based = matches!(
        sampler,
        Some(
            Sampler::ParentBasedAlwaysOn
                | Sampler::ParentBasedAlwaysOff
                | Sampler::ParentBasedTraceIdRatio
        )
    );
    PARENT_BASED.store(parent_based, Ordering::Relaxed);
}

/// Whether a span whose parent is `parent` will be dropped whatever it holds: the sampler
/// follows its parent, and the parent was not sampled.
pub fn follows_unsampled(parent: Option<&TraceParent>) -> bool {
    PARENT_BASED.load(Ordering::Relaxed) && parent.is_some_and(|p| !p.sampled())
}

tokio::task_local! {
    /// Set while a stage handles a message whose trace is not sampled ([`untraced`]).
    static UNTRACED: ();
}

/// Run `work` (a message's handling in a stage) with nothing made in it traced when
/// `dropped`: the sampler would drop every span of it ([`follows_unsampled`]). The mark is
/// the task's, so work the stage spawns onto other tasks is not covered; no stage makes a
/// trace span there (docs/tracing.md, "Sampling").
pub async fn untraced<F: Future>(dropped: bool, work: F) -> F::Output {
    if dropped {
        UNTRACED.scope((), work).await
    } else {
        work.await
    }
}

/// Whether the running task handles a message that is not traced.
fn in_untraced() -> bool {
    UNTRACED.try_with(|_| ()).is_ok()
}

/// The mark of a span the sampler dropped, kept with the span in the registry.
struct Unsampled;

/// Mark `span` dropped, so that nothing under it is traced.
pub(super) fn mark_unsampled(span: &Span) {
    span.with_subscriber(|(id, dispatch)| {
        if let Some(data) = dispatch
            .downcast_ref::<Registry>()
            .and_then(|registry| registry.span(id))
        {
            data.extensions_mut().replace(Unsampled);
        }
    });
}

/// What the OpenTelemetry layer sees: Hermes's trace spans and events ([`TARGET`]), except
/// those made under a span the sampler dropped or inside [`untraced`].
///
/// Interest is decided per callsite, not per call, for every other crate's: a filter that
/// answered "sometimes" for them would have each `trace!` in hyper, h2, lapin and
/// tokio-postgres asked at run time, on every hit, whether some layer wants it, which cost a
/// traced fleet a quarter more CPU per answer at 10 % sampling (docs/performance.md,
/// "Tracing's cost"). Only Hermes's own few callsites are asked each time.
pub(super) struct Traced;

impl<S> Filter<S> for Traced
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn enabled(&self, meta: &Metadata<'_>, cx: &Context<'_, S>) -> bool {
        // The context is this filter's: its current span is the innermost traced one.
        meta.target() == TARGET
            && !in_untraced()
            && cx
                .lookup_current()
                .is_none_or(|span| span.extensions().get::<Unsampled>().is_none())
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        if meta.target() == TARGET {
            Interest::sometimes()
        } else {
            Interest::never()
        }
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::TRACE)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing::span::{Attributes, Id};
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    /// The names of the spans a layer behind [`Traced`] is given.
    #[derive(Clone, Default)]
    struct Seen(Arc<Mutex<Vec<&'static str>>>);

    impl<S: Subscriber> Layer<S> for Seen {
        fn on_new_span(&self, attrs: &Attributes<'_>, _: &Id, _: Context<'_, S>) {
            self.0.lock().unwrap().push(attrs.metadata().name());
        }
    }

    fn seen_under(mark: bool) -> Vec<&'static str> {
        let seen = Seen::default();
        let subscriber = Registry::default().with(seen.clone().with_filter(Traced));
        tracing::subscriber::with_default(subscriber, || {
            let root = tracing::info_span!(target: TARGET, "root");
            if mark {
                mark_unsampled(&root);
            }
            let _in_root = root.enter();
            // A log span between them is not traced and hides nothing.
            let log = tracing::info_span!("message");
            let _in_log = log.enter();
            let child = tracing::info_span!(target: TARGET, "child");
            let _in_child = child.enter();
            let _grandchild = tracing::info_span!(target: TARGET, "grandchild");
            let _untraced = tracing::info_span!("logged only");
        });
        seen.0.lock().unwrap().clone()
    }

    #[test]
    fn nothing_under_a_dropped_span_is_traced() {
        assert_eq!(seen_under(false), ["root", "child", "grandchild"]);
        assert_eq!(seen_under(true), ["root"]);
    }

    #[test]
    fn nothing_made_inside_untraced_is_traced() {
        let seen = Seen::default();
        let subscriber = Registry::default().with(seen.clone().with_filter(Traced));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        tracing::subscriber::with_default(subscriber, || {
            runtime.block_on(async {
                let made = |name: &'static str| async move {
                    tokio::task::yield_now().await;
                    let _child = match name {
                        "traced" => tracing::info_span!(target: TARGET, "traced"),
                        _ => tracing::info_span!(target: TARGET, "dropped"),
                    };
                };
                untraced(true, made("dropped")).await;
                untraced(false, made("traced")).await;
            });
        });
        assert_eq!(*seen.0.lock().unwrap(), ["traced"]);
    }

    #[test]
    fn only_a_parent_based_sampler_drops_a_span_before_it_is_made() {
        let unsampled =
            TraceParent::parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00").unwrap();
        let sampled =
            TraceParent::parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").unwrap();
        for sampler in Sampler::ALL {
            set_sampler(Some(*sampler));
            let parent_based = sampler.as_str().starts_with("parentbased");
            assert_eq!(
                follows_unsampled(Some(&unsampled)),
                parent_based,
                "{sampler:?}"
            );
            assert!(!follows_unsampled(Some(&sampled)));
            assert!(!follows_unsampled(None));
        }
        set_sampler(None);
        assert!(!follows_unsampled(Some(&unsampled)));
    }
}
