//! `hermes bench floor`: the infrastructure's own limit for one API chat completion with
//! today's design. It does only what PostgreSQL, RabbitMQ and Redis must do for one message
//! (the same quorum-queue publishes with confirms, consumes and acks, the same transactions
//! with the same statements, the run's final event), with none of Hermes's logic, in this
//! process, and measures it like `hermes bench fleet` measures the fleet: the throughput
//! frontier, the latency at half of it, requests one at a time, and the infrastructure's
//! cost per message. `hermes bench fleet --with-floor` runs it in the same run, alternated
//! with the fleet, and prints the fleet's figures as ratios to it (docs/performance.md).

mod pipeline;

use std::collections::BTreeMap;
use std::sync::Arc;

use clap::Args;
use hermes_config::{Config, Namespace};
use hermes_db::scratch::ScratchDb;

use crate::fleet::load::Requests;
use crate::fleet::search::SearchArgs;
use crate::fleet::{FLOOR, Meter, infra, measure};
pub use pipeline::Floor;

#[derive(Args, Debug)]
pub struct FloorBench {
    #[command(flatten)]
    search: SearchArgs,
}

/// The floor with a scratch database of its own (migrated, dropped at the end).
pub struct Standalone {
    pub floor: Arc<Floor>,
    pub scratch: ScratchDb,
    /// Where its namespace's Redis keys (the runs' events) are deleted at the end.
    redis_url: secrecy::SecretString,
    ns: String,
}

impl Standalone {
    /// A scratch database and the floor on it, its queues under namespace `ns`.
    pub async fn start(config: &Config, ns: &str) -> anyhow::Result<Self> {
        let scratch = ScratchDb::create(&config.database_url, "hermes_floor").await?;
        let (redis_url, name) = (config.redis_url.clone(), ns.to_string());
        let ns = Namespace::parse(ns).map_err(anyhow::Error::msg)?;
        let mut config = config.clone();
        // The floor's queues expire if this process dies before deleting them.
        config.bus.queue_expires = Some(std::time::Duration::from_secs(600));
        // A pool as large as one stage's (the scratch database's own is small).
        let db = hermes_db::Db::new(&scratch.url, config.db_pool_size)?;
        match Floor::start(&config, db, ns).await {
            Ok(floor) => Ok(Self {
                floor,
                scratch,
                redis_url,
                ns: name,
            }),
            Err(e) => {
                let _ = scratch.drop_now().await;
                Err(e)
            }
        }
    }

    /// Stop the floor, delete its queues and Redis keys, and drop its database.
    pub async fn finish(self) {
        self.floor.stop().await;
        if let Err(e) = crate::delete_keys(&self.redis_url, &self.ns).await {
            eprintln!(
                "bench floor: cannot delete the Redis keys of {} (they expire): {e}",
                self.ns
            );
        }
        if let Err(e) = self.scratch.drop_now().await {
            eprintln!("bench floor: could not drop the scratch database: {e}");
        }
    }
}

pub async fn floor(config: Config, args: FloorBench) -> anyhow::Result<()> {
    let id = &uuid::Uuid::now_v7().simple().to_string()[20..];
    let standalone = Standalone::start(&config, &format!("floor{id}")).await?;
    eprintln!(
        "bench floor: database {}, namespace floor{id}",
        standalone.scratch.name()
    );
    let client = reqwest::Client::new();
    let machine = infra::Machine::now(&[]);
    println!(
        "machine at the start: load average {} (1, 5, 15 min)",
        machine.load()
    );
    let mut results = BTreeMap::new();
    let mut void = Vec::new();
    let outcome = tokio::select! {
        r = async {
            let requests: Arc<dyn Requests> = standalone.floor.clone();
            let meter = Meter::Floor {
                floor: &standalone.floor,
                db: &standalone.scratch.db,
                client: &client,
            };
            for round in 0..args.search.rounds.max(1) {
                let tag = format!("r{round}-floor");
                let line = measure(&requests, &meter, &args.search, &tag, &mut void, &|| 0).await?;
                results.entry(FLOOR.to_string()).or_insert_with(Vec::new).push(line);
            }
            anyhow::Ok(())
        } => r,
        signal = crate::interrupted() => Err(anyhow::anyhow!("interrupted by {signal}")),
    };
    println!(
        "machine at the end: {}",
        infra::Machine::now(&[]).since(&machine)
    );
    standalone.finish().await;
    outcome?;
    crate::fleet::report(&results);
    if !void.is_empty() {
        anyhow::bail!(
            "the ledger does not add up, the run is void: {}",
            void.join("; ")
        );
    }
    println!("bench floor: the ledger adds up");
    Ok(())
}
