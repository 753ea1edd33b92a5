//! `hermes cron` (the same command as `hermes jobs`), as the source document's CLI spells it:
//! an operator lists, creates, pauses, resumes, runs and deletes jobs, the changes going through
//! a running ingest's `/api/jobs`, so its rules apply to them (docs/operations.md, scheduled
//! jobs).

use hermes::Service;
use hermes_testkit::TestEnv;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hermes_cron_manages_the_operators_jobs_through_the_api() {
    let env = TestEnv::new().await;
    // Ingest alone: runs are queued, never taken, so the test sees them as they were made.
    let fleet = env.start(&[Service::Ingest]).await;
    let url = fleet.url("");
    let (code, out, err) = cron(
        &env,
        &url,
        &[
            "create",
            "--name",
            "digest",
            "--prompt",
            "summarize the day",
            "--schedule",
            "every 2h",
        ],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let job: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(job["schedule"], json!({"every_seconds": 7200}), "{job}");
    assert_eq!(job["target"]["type"], "stored");
    let id = job["id"].as_str().unwrap().to_string();

    // The API's own rules answer through the CLI: too frequent for HERMES_JOB_MIN_INTERVAL_SECS.
    let (code, _, err) = cron(
        &env,
        &url,
        &[
            "create",
            "--name",
            "x",
            "--prompt",
            "p",
            "--schedule",
            "every 5s",
        ],
    )
    .await;
    assert_ne!(code, 0);
    assert!(
        err.contains("invalid_schedule") && err.contains("HERMES_JOB_MIN_INTERVAL_SECS"),
        "{err}"
    );

    let (code, out, err) = cron(&env, &url, &["pause", &id]).await;
    assert_eq!(code, 0, "{err}");
    let paused: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (&paused["paused"], &paused["next_run_at"]),
        (&json!(true), &Value::Null)
    );
    let (code, out, err) = cron(&env, &url, &["resume", &id]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["paused"],
        false
    );
    let (code, out, err) = cron(&env, &url, &["run", &id]).await;
    assert_eq!(code, 0, "{err}");
    let run: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(run["status"], "queued", "{run}");

    // Listed from the database, with its last run.
    let (code, out, err) = env.hermes(&["cron", "list", "--json"]).await;
    assert_eq!(code, 0, "{err}");
    let listed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(listed[0]["id"], id.as_str());
    assert_eq!(listed[0]["last_run"]["run_id"], run["run_id"]);

    let (code, _, err) = cron(&env, &url, &["delete", &id]).await;
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = cron(&env, &url, &["pause", &id]).await;
    assert_ne!(code, 0);
    assert!(err.contains("404"), "{err}");
    fleet.stop().await.unwrap();
}

/// `hermes cron <args> --url <url>`: (exit code, stdout, stderr).
async fn cron(env: &TestEnv, url: &str, args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["cron"];
    all.extend(args);
    all.extend(["--url", url]);
    env.hermes(&all).await
}
