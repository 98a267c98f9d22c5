//! `zaguan demo seed`: loads the demo portfolio ([`crate::realestate::demo`]) into the
//! configured real-estate store, so the assistants can be tried on believable listings, slots,
//! visits and offers. Seeding is idempotent: run it again (say, the next day) and the same ids
//! are replaced, with the slots moved to the next three weeks.

use anyhow::Context as _;
use chrono::Utc;

use crate::config::Config;
use crate::realestate::demo::{self, DEMO_CUSTOMERS, DemoSet, SeedCounts};
use crate::startup::{open_pool, open_realestate};

#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    #[command(subcommand)]
    pub command: DemoCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum DemoCommand {
    /// Load the demo properties, owners, visit slots, visits and offers (idempotent).
    Seed,
}

pub async fn run(args: DemoArgs, config: Config) -> anyhow::Result<()> {
    match args.command {
        DemoCommand::Seed => seed(&config).await,
    }
}

async fn seed(config: &Config) -> anyhow::Result<()> {
    let target = match &config.mongodb {
        Some(mongo) => format!("MongoDB {}", mongo.database),
        None => "in-memory store: nothing is kept after this command exits".to_owned(),
    };
    let pool = open_pool(config).await?;
    let store = open_realestate(config, pool.as_ref())
        .await
        .with_context(|| format!("cannot open the real-estate store ({target})"))?;
    let today = Utc::now()
        .with_timezone(&config.engine.timezone)
        .date_naive();
    let set = demo::demo_set(today, config.engine.timezone);
    let counts = demo::seed(store.as_ref(), &set)
        .await
        .with_context(|| match &config.mongodb {
            Some(mongo) => format!(
                "cannot load the demo data into MongoDB database `{}`: is the server up and \
                 MONGODB_URI right?",
                mongo.database
            ),
            None => "cannot load the demo data into the in-memory store".to_owned(),
        })?;
    println!("{}", summary(&set, &counts, &target));
    for line in chat_hints(&set) {
        println!("{line}");
    }
    Ok(())
}

/// `demo data loaded: 64 properties in 4 cities, 12 owners, 812 slots, 18 visits, 9 offers
/// (MongoDB zaguan)`.
fn summary(set: &DemoSet, counts: &SeedCounts, target: &str) -> String {
    format!(
        "demo data loaded: {} properties in {} cities, {} owners, {} agents, {} slots, {} visits, \
         {} offers ({target})",
        counts.properties,
        set.cities().len(),
        counts.owners,
        counts.staff,
        counts.slots,
        counts.visits,
        counts.offers,
    )
}

/// "1 offer", "2 offers".
fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("{n} {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// How to chat as a demo owner or customer.
fn chat_hints(set: &DemoSet) -> Vec<String> {
    let mut lines = vec!["chat as an owner:".to_owned()];
    for owner in set.owners_on_whatsapp() {
        let listings: Vec<_> = set.properties_of(&owner.id).collect();
        let cities: std::collections::BTreeSet<&str> =
            listings.iter().map(|p| p.city.as_str()).collect();
        let wa_id = owner.wa_id.as_ref().map_or("", |w| w.as_str());
        lines.push(format!(
            "  zaguan chat --wa-id {wa_id}   # {} {}, {} in {}",
            owner.id,
            owner.name,
            if listings.len() == 1 {
                "1 property".to_owned()
            } else {
                format!("{} properties", listings.len())
            },
            cities.into_iter().collect::<Vec<_>>().join(", "),
        ));
    }
    lines.push("chat as one of the agency's agents:".to_owned());
    for agent in &set.staff {
        let wa_id = agent.wa_id.as_ref().map_or("", |w| w.as_str());
        lines.push(format!(
            "  zaguan chat --wa-id {wa_id}   # {} {}",
            agent.id, agent.name
        ));
    }
    lines.push("chat as a customer with past visits and offers:".to_owned());
    for customer in DEMO_CUSTOMERS {
        let visits = set
            .visits
            .iter()
            .filter(|v| v.wa_id.as_str() == customer)
            .count();
        let offers = set
            .offers
            .iter()
            .filter(|o| o.wa_id.as_str() == customer)
            .count();
        lines.push(format!(
            "  zaguan chat --wa-id {customer}   # {}, {}",
            plural(visits, "visit"),
            plural(offers, "offer"),
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_counts_cities_and_where_the_data_went() {
        let set = demo::demo_set(
            chrono::NaiveDate::from_ymd_opt(2026, 11, 26).unwrap(),
            chrono_tz::Europe::Madrid,
        );
        let counts = set.counts();
        let line = summary(&set, &counts, "MongoDB zaguan");
        assert!(line.starts_with(&format!(
            "demo data loaded: {} properties in 4 cities, 12 owners, ",
            set.properties.len()
        )));
        assert!(line.ends_with("offers (MongoDB zaguan)"), "{line}");
        let hints = chat_hints(&set).join("\n");
        for wa_id in ["34600000001", "34600000005", "34600000010", "34611000001"] {
            assert!(hints.contains(wa_id), "{hints}");
        }
    }
}
