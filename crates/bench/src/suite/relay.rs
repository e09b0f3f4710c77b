//! The relay's rows (issue 12): P9 and P10 against their direct baselines, keystroke echo,
//! connect time and coderd's memory per idle stream, from one run of `scenarios::relay`.

use std::path::Path;

use anyhow::Context;

use super::Progress;
use crate::config::Config;
use crate::report::{Check, Report, Row};
use crate::scenarios::relay::{self, Figures};

pub(super) async fn relay_rows(
    config: &Config,
    work: &Path,
    report: &mut Report,
    progress: &Progress,
) -> anyhow::Result<()> {
    let sizes = &config.sizes;
    let plan = relay::Plan {
        bytes: sizes.relay_bytes,
        runs: sizes.runs,
        warmup: sizes.warmup,
        connects: sizes.relay_connects,
        keystrokes: sizes.relay_keystrokes,
        streams: sizes.relay_streams,
        timeout: sizes.timeout,
    };
    let run = relay::run(&config.coder_bin, &work.join("relay"), &plan, &|what| {
        progress.step(what)
    })
    .await
    .context("measuring the relay")?;
    let mib = plan.bytes >> 20;
    let ssh = &run.ssh;

    report.rows.push(
        Row::new(
            "P10",
            &format!("TCP throughput, coder port-forward ({mib} MiB)"),
            "MB/s",
            &run.port_forward,
        )
        .baseline("loopback TCP", Ok(&run.direct_tcp))
        .goal("≥ 0.8× loopback", Check::ratio_min(0.8))
        .note("into a sink in the workspace: CLI → WebSocket → coderd → yamux → agent"),
    );
    report.rows.push(
        Row::new(
            "-",
            &format!("TCP throughput, relay stream without the CLI ({mib} MiB)"),
            "MB/s",
            &run.relay_stream,
        )
        .baseline("loopback TCP", Ok(&run.direct_tcp))
        .note("codersdk's stream in the bench process: the path minus port-forward's hop"),
    );
    for (metric, figures) in [
        ("SSH throughput, coder ssh", &ssh.coder_ssh),
        (
            "SSH throughput, OpenSSH via config-ssh",
            &ssh.openssh_via_coder,
        ),
    ] {
        report.rows.push(
            with_figures(
                "P9",
                &format!("{metric} ({mib} MiB into cat)"),
                "MB/s",
                figures,
            )
            .baseline("OpenSSH sshd, loopback", baseline(&ssh.sshd))
            .goal("≥ 0.5× sshd", Check::ratio_min(0.5)),
        );
    }
    // Each keystroke is a sample; the row's median is the p50, its range the fastest and
    // slowest keystroke.
    let local = ssh.keystroke_local.as_deref().ok().and_then(median);
    let mut keys = with_figures(
        "-",
        "keystroke echo p50, ssh -tt via config-ssh",
        "ms",
        &ssh.keystroke_via_coder,
    )
    .baseline("local PTY (script)", baseline(&ssh.keystroke_local));
    if let Some(local) = local {
        keys = keys.goal("≤ local + 1 ms", Check::max(local + 1.0));
    }
    report.rows.push(keys);
    report.rows.push(
        with_figures(
            "-",
            "connect time, ssh coder.<ws> true (config-ssh, coder ssh --stdio)",
            "ms",
            &ssh.connect_via_coder,
        )
        .baseline("ssh to sshd, loopback", baseline(&ssh.connect_sshd))
        .goal("≤ 500 ms p50", Check::max(500.0)),
    );
    report.rows.push(
        with_figures(
            "-",
            "connect time, coder ssh <ws> -- true",
            "ms",
            &ssh.connect_coder_ssh,
        )
        .baseline("ssh to sshd, loopback", baseline(&ssh.connect_sshd)),
    );
    report.rows.push(
        with_figures(
            "-",
            "coder ssh --stdio, start to the SSH banner's first byte",
            "ms",
            &ssh.first_byte_stdio,
        )
        .goal("≤ 50 ms p50", Check::max(50.0)),
    );
    report.rows.push(
        with_figures(
            "-",
            "the same with the VS Code extension's flags (network info, log file, usage)",
            "ms",
            &ssh.first_byte_stdio_ide,
        )
        .baseline("plain coder ssh --stdio", baseline(&ssh.first_byte_stdio))
        .goal(
            "≤ 50 ms p50 and ≤ 1.2× plain",
            Check::max(50.0).and_ratio_max(1.2),
        ),
    );
    let per_stream_kib =
        (run.rss_after_mib - run.rss_before_mib) * 1024.0 / run.idle_streams.max(1) as f64;
    report.rows.push(
        Row::new(
            "-",
            &format!("coderd memory per idle relay stream ({})", run.idle_streams),
            "KiB",
            &[per_stream_kib],
        )
        .note(format!(
            "ping streams held open; coderd RSS {:.1} → {:.1} MiB",
            run.rss_before_mib, run.rss_after_mib
        )),
    );
    report
        .counts
        .insert("relay_transfers".into(), run.port_forward.len());
    report
        .counts
        .insert("relay_idle_streams".into(), run.idle_streams);
    Ok(())
}

fn median(values: &[f64]) -> Option<f64> {
    crate::stats::Summary::of(values).map(|s| s.median)
}

fn baseline(figures: &Figures) -> Result<&[f64], &str> {
    figures.as_deref().map_err(String::as_str)
}

/// A row of `figures`, or an empty one whose note says why they are missing.
fn with_figures(id: &str, metric: &str, unit: &str, figures: &Figures) -> Row {
    match figures {
        Ok(values) => Row::new(id, metric, unit, values),
        Err(why) => Row::new(id, metric, unit, &[]).note(format!("failed: {why}")),
    }
}
