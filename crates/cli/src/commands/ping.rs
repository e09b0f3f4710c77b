//! `coder ping <workspace>`: round trips through the whole path (this machine → coderd → the
//! agent and back, on one relay stream the agent echoes), beside round trips to coderd alone,
//! so the difference is the coderd → agent hop.

use std::time::{Duration, Instant};

use anyhow::Context;
use codersdk::relay::Target;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::GlobalArgs;
use crate::reach::{self, Wait};

#[derive(Debug, clap::Args)]
pub struct PingArgs {
    /// The workspace: `[owner/]workspace[.agent]`.
    pub workspace: String,
    /// How many round trips (0: until interrupted).
    #[arg(short = 'n', long, env = "CODER_PING_NUM", default_value_t = 10)]
    pub num: u32,
    /// How long one round trip may take.
    #[arg(short, long, env = "CODER_PING_TIMEOUT", default_value = "5s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
}

fn ms(d: Duration) -> String {
    format!("{:.2}ms", d.as_secs_f64() * 1000.0)
}

pub async fn run(global: &GlobalArgs, args: PingArgs) -> anyhow::Result<()> {
    let client = global.client()?;
    let reached = reach::reach(&client, &args.workspace, false, Wait::No).await?;
    let opening = Instant::now();
    let stream = client
        .connect_agent(reached.agent.id, Target::Ping)
        .await
        .context("opening a stream to the agent")?;
    println!(
        "Opened a stream to agent {} of {} in {}",
        reached.agent.name,
        reached.workspace.name,
        ms(opening.elapsed())
    );
    let (mut r, mut w) = tokio::io::split(stream);
    let mut totals = Vec::new();
    let mut round = 0u32;
    let mut buf = [0u8; 8];
    loop {
        round += 1;
        // coderd alone: an API round trip on the client's kept-alive connection.
        let started = Instant::now();
        tokio::time::timeout(args.timeout, client.build_info())
            .await
            .context("coderd did not answer in time")??;
        let coderd = started.elapsed();
        // The whole path: 8 bytes the agent echoes.
        let started = Instant::now();
        let probe = round.to_be_bytes();
        let trip = async {
            w.write_all(&[probe[0], probe[1], probe[2], probe[3], 0, 0, 0, 0])
                .await?;
            r.read_exact(&mut buf).await?;
            anyhow::Ok(())
        };
        tokio::time::timeout(args.timeout, trip)
            .await
            .with_context(|| format!("no answer from the agent within {:?}", args.timeout))??;
        let total = started.elapsed();
        totals.push(total);
        println!(
            "pong from {} in {} (client ↔ coderd {}, coderd ↔ agent ~{})",
            reached.workspace.name,
            ms(total),
            ms(coderd),
            ms(total.saturating_sub(coderd))
        );
        if args.num != 0 && round >= args.num {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    totals.sort();
    if let (Some(min), Some(max)) = (totals.first(), totals.last()) {
        println!(
            "{} round trips: min {}, median {}, max {}",
            totals.len(),
            ms(*min),
            ms(totals[totals.len() / 2]),
            ms(*max)
        );
    }
    Ok(())
}
