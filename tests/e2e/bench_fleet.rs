//! `hermes bench fleet` cannot rot: a short run at a fixed rate through the fleet as separate
//! processes must keep its ledger (every request answered as itself, once), whatever the
//! figures (docs/performance.md), and so must the floor it is compared with (`--with-floor`),
//! and it leaves no key in Redis. The figures themselves are never asserted.

use hermes_testkit::TestEnv;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_fixed_rate_run_keeps_its_ledger() {
    let env = TestEnv::new().await;
    let (code, stdout, stderr) = env
        .hermes(&[
            "bench",
            "fleet",
            "--rate",
            "10",
            "--duration",
            "3",
            "--rounds",
            "1",
            "--kind",
            "chat,chat-stream,responses,runs,telegram,whatsapp,instagram,slack,sms,messenger,teams,discord",
            "--with-floor",
            "--serial",
            "5",
        ])
        .await;
    assert_eq!(code, 0, "bench fleet failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("the ledger adds up"), "{stdout}");
    assert!(stdout.contains("Against the floor"), "no ratios:\n{stdout}");
    for kind in [
        "chat ",
        "chat-stream ",
        "responses ",
        "runs ",
        "telegram ",
        "whatsapp ",
        "instagram ",
        "slack ",
        "sms ",
        "messenger ",
        "teams ",
        "discord ",
        "floor ",
    ] {
        assert!(
            stdout.lines().any(|l| l.starts_with(kind)),
            "no figures for {kind}:\n{stdout}"
        );
        // The infrastructure's share is counted, not guessed: every answer went through the
        // broker and PostgreSQL at least once.
        let infra = stdout
            .lines()
            .find(|l| l.trim_start().starts_with(kind) && l.contains("broker publishes"))
            .unwrap_or_else(|| panic!("no infrastructure figures for {kind}:\n{stdout}"));
        let before = |unit: &str| -> f64 {
            let at = infra.find(unit).expect(unit);
            infra[..at]
                .split_whitespace()
                .last()
                .unwrap()
                .parse()
                .unwrap()
        };
        assert!(before(" broker publishes") >= 1.0, "{infra}");
        if kind == "floor " {
            // The floor publishes what an API chat completion does: to the router, the llm
            // stage and delivery.
            assert!(before(" broker publishes") >= 3.0, "{infra}");
        }
        assert!(before(" transactions") >= 1.0, "{infra}");
    }
    // Each chat platform's ingest cost is set against Telegram's from the same run.
    let against = stdout
        .lines()
        .find(|l| l.starts_with("Ingest CPU per webhook against Telegram's"))
        .unwrap_or_else(|| panic!("no ingest comparison:\n{stdout}"));
    for kind in [
        "whatsapp",
        "instagram",
        "slack",
        "sms",
        "messenger",
        "teams",
        "discord",
    ] {
        assert!(against.contains(&format!("{kind} ")), "{against}");
    }
    // The run leaves nothing in the shared Redis: its namespaces' keys went with their queues.
    let ns = stderr
        .split("namespace ")
        .nth(1)
        .and_then(|rest| rest.split([',', ' ', '\n']).next())
        .unwrap_or_else(|| panic!("no namespace named:\n{stderr}"));
    let mut redis = redis::Client::open(hermes_testkit::redis_url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    // The floor's namespace is the fleet's with an `f`.
    for ns in [ns.to_string(), format!("{ns}f")] {
        let left: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{ns}:*"))
            .query_async(&mut redis)
            .await
            .unwrap();
        assert!(left.is_empty(), "{} keys of {ns} left", left.len());
    }
}

/// `--soak` reports the idle memory, each step's latency and memory, the growth and the
/// targets, and its ledger adds up: a soak of a few seconds in steps of two, two kinds taking
/// turns. Whether a target is met is never asserted (the figures are the machine's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_brief_soak_reports_memory_and_keeps_its_ledger() {
    let env = TestEnv::new().await;
    let (code, stdout, stderr) = env
        .hermes(&[
            "bench",
            "fleet",
            "--soak",
            "0.1",
            "--soak-step-secs",
            "2",
            "--rate",
            "5",
            "--kind",
            "chat,telegram",
        ])
        .await;
    assert_eq!(code, 0, "bench fleet --soak failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("the ledger adds up"), "{stdout}");
    assert!(
        stderr.contains("bench fleet soak: step 3/3"),
        "progress per step:\n{stderr}"
    );
    let line = |prefix: &str| {
        stdout
            .lines()
            .find(|l| l.trim_start().starts_with(prefix))
            .unwrap_or_else(|| panic!("no line starting {prefix:?}:\n{stdout}"))
    };
    for service in ["ingest", "router", "llm", "tools", "delivery"] {
        assert!(
            line("idle RSS").contains(&format!("{service} ")),
            "{stdout}"
        );
        assert!(
            line("of which its own").contains(&format!("{service} ")),
            "each service's own idle memory (RssAnon) is shown:\n{stdout}"
        );
        assert!(line(service).contains("MiB/10 min"), "{stdout}");
    }
    for step in ["1 ", "2 ", "3 "] {
        let kind = if step == "2 " { "telegram" } else { "chat" };
        assert!(line(step).contains(kind), "kinds take turns:\n{stdout}");
    }
    line("target growth");
    line("target idle");
    // ledger: N sent, N answered, N failed with an answer, N refused, N wrong, N lost
    let numbers: Vec<usize> = line("ledger:")
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect();
    let [sent, answered, failed, refused, wrong, lost] = numbers[..] else {
        panic!("ledger line: {numbers:?}\n{stdout}");
    };
    assert_eq!(sent, 30, "three steps of 2 s at 5/s:\n{stdout}");
    assert_eq!((wrong, lost), (0, 0), "{stdout}");
    assert_eq!(answered + failed + refused, sent, "{stdout}");
}

/// `--tracing off,10,100` runs a fleet per setting, reports each setting's figures and its
/// ratio to tracing off, and the traced fleets export spans to the bench's sink, at 100 %
/// and 10 %. A short search (two steps, 20/s and 40/s, the most it may try) keeps it brief;
/// the figures are never asserted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tracing_settings_are_compared_and_the_traced_fleets_export_spans() {
    let env = TestEnv::new().await;
    let (code, stdout, stderr) = env
        .hermes(&[
            "bench",
            "fleet",
            "--kind",
            "chat",
            "--tracing",
            "off,10,100",
            "--rounds",
            "1",
            "--start-rate",
            "20",
            "--max-rate",
            "40",
            "--bisections",
            "0",
            "--step-secs",
            "2",
            "--duration",
            "2",
            "--serial",
            "0",
            // Each reading waits for the exports of the step just ended: exported every
            // 300 ms instead of every 5 s, the run ends in a fraction of the time.
            "--export-delay-ms",
            "300",
            // A debug build on a busy machine: every step holds, so the measurement runs
            // at 20/s and the spans per answer are those of many answers.
            "--p99-bound-ms",
            "20000",
        ])
        .await;
    assert_eq!(code, 0, "bench fleet --tracing failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("the ledger adds up"), "{stdout}");
    // Every fleet's search began with a step that warmed it and was not counted.
    for setting in ["off", "10%", "100%"] {
        let warmed = format!("bench: r0-chat/{setting} warm-up at 10/s (not counted)");
        assert!(
            stderr.contains(&warmed),
            "no warm-up for {setting}:\n{stderr}"
        );
    }
    assert!(
        stdout.contains("Tracing's cost"),
        "no comparison:\n{stdout}"
    );
    let row = |label: &str| {
        stdout
            .lines()
            // The comparison's row: the last of the label's (the medians' table is first).
            .rfind(|l| l.starts_with(&format!("{label} ")))
            .unwrap_or_else(|| panic!("no row for {label}:\n{stdout}"))
            .to_string()
    };
    for label in ["chat/off", "chat/10%", "chat/100%"] {
        row(label);
    }
    // "spans received in the whole run with tracing 10%: N"
    let received = |setting: &str| -> u64 {
        let prefix = format!("spans received in the whole run with tracing {setting}: ");
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no span count for {setting}:\n{stdout}"))
            .trim()
            .parse()
            .unwrap()
    };
    let (some, all) = (received("10%"), received("100%"));
    assert!(
        all > 0,
        "the fleet traced at 100 % exported nothing:\n{stdout}"
    );
    assert!(
        some > 0,
        "the fleet traced at 10 % exported nothing:\n{stdout}"
    );
    assert!(
        !stdout.contains("with tracing off:"),
        "the untraced fleet has no sink:\n{stdout}"
    );
    // At half the frontier the fully traced fleet exported spans for its answers.
    let spans_per_answer: f64 = row("chat/100%")
        .split_whitespace()
        .nth(8)
        .unwrap()
        .parse()
        .unwrap();
    assert!(spans_per_answer > 1.0, "{}", row("chat/100%"));
}
