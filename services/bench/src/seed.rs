//! The users the benches' load speaks as, written before a fleet starts.

use anyhow::Context;
use futures_util::{StreamExt, TryStreamExt, stream};
use hermes_config::Config;
use hermes_db::{Db, budgets, users};
use hermes_types::ids::UserId;
use hermes_types::model::{Platform, Tier};

use crate::faults::load;

/// Users written at once, each on a pooled connection of its own: one at a time, 500 users of
/// nine statements each took seconds of round trips before every fleet's start.
const AT_ONCE: usize = 4;

/// Give `count` senders (each a member of every chat platform, `crate::platforms::member`) a
/// user with ample credits each, and the capped senders a free-tier user whose token budget
/// for today is already spent.
pub(crate) async fn users(db: &Db, count: usize, config: &Config) -> anyhow::Result<()> {
    let daily = config
        .llm
        .budgets
        .get(&Tier::Free)
        .map(|b| b.daily_tokens)
        .context("the free tier has no token budget")?;
    let senders = (0..count)
        .map(|u| (load::sender(u, count), Tier::Pro))
        .chain((0..load::CAPPED_USERS).map(|u| (load::capped_sender(u), Tier::Free)));
    stream::iter(senders)
        .map(|(sender, tier)| one(db, sender.to_string(), tier, daily))
        .buffer_unordered(AT_ONCE)
        .try_collect::<()>()
        .await
}

/// One sender's user, its budget when capped, and its membership of every chat platform.
async fn one(db: &Db, sender: String, tier: Tier, daily: u64) -> anyhow::Result<()> {
    let n: i64 = sender.parse()?;
    let channels: Vec<(Platform, String)> = crate::platforms::CHAT
        .into_iter()
        .filter_map(|p| Some((p, crate::platforms::member(p, n)?)))
        .collect();
    let user = user(db, &sender, tier, &channels).await?;
    if tier == Tier::Free {
        let mut client = db.get().await?;
        let tx = client.transaction().await?;
        let today = chrono::Utc::now().date_naive();
        budgets::add_tokens(&tx, user, today, daily).await?;
        tx.commit().await?;
    }
    Ok(())
}

/// A user named `name` in the default workspace with ample credits, linked (activated) to
/// each of `channels` as the sender given.
pub(crate) async fn user(
    db: &Db,
    name: &str,
    tier: Tier,
    channels: &[(Platform, String)],
) -> anyhow::Result<UserId> {
    let mut client = db.get().await?;
    let tx = client.transaction().await?;
    let user = users::create(
        &tx,
        &users::NewUser {
            workspace: "default",
            display_name: Some(name),
            tier,
            credits: 1_000_000,
        },
    )
    .await?;
    tx.commit().await?;
    for (platform, sender) in channels {
        let scope = users::ChannelScope {
            platform: *platform,
            api_key: None,
        };
        users::link_channel(&client, user.id, scope, sender, true, None).await?;
    }
    Ok(user.id)
}
