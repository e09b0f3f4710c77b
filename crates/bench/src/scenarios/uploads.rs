//! Large template imports (issue 11): coderd's memory after many sequential imports of
//! templates near the upload limit. A fresh `coder server` on its own cluster (so nothing else
//! of the suite is in its memory) with one echo daemon; each import uploads a distinct archive
//! (`echo.json` plus incompressible padding, so every upload is a new file), creates a version
//! and waits for its import job, whose payload carries the archive to the daemon. Then
//! coderd's RSS and peak RSS are read.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::ensure;
use codersdk::provisioners::ProvisionerJobStatus;
use codersdk::templates::CreateTemplateVersionRequest;
use provisionerd::engines::echo::{self, EchoTemplate};

use crate::deploy::Deployment;
use crate::procs::{Cluster, Memory};

pub struct UploadsRun {
    pub imports: usize,
    pub archive_bytes: usize,
    /// Before the first upload, daemon connected.
    pub idle: Memory,
    pub after: Memory,
    pub elapsed: Duration,
}

/// Distinct incompressible bytes for import `seed` (xorshift64*; no crypto needed).
fn padding(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        out.extend_from_slice(&state.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

pub async fn run(
    coder_bin: &Path,
    work: &Path,
    imports: usize,
    archive_bytes: usize,
    timeout: Duration,
) -> anyhow::Result<UploadsRun> {
    let cluster = Cluster::start(&work.join("pg")).await?;
    let measured = measure(coder_bin, &cluster, work, imports, archive_bytes, timeout).await;
    let stopped = cluster.stop().await;
    let run = measured?;
    stopped?;
    Ok(run)
}

async fn measure(
    coder_bin: &Path,
    cluster: &Cluster,
    work: &Path,
    imports: usize,
    archive_bytes: usize,
    timeout: Duration,
) -> anyhow::Result<UploadsRun> {
    let mut deploy = Deployment::start(coder_bin, cluster, &work.join("server"), timeout).await?;
    deploy.start_daemons(coder_bin, 1).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = deploy.server.memory()?;
    let started = Instant::now();
    for i in 0..imports {
        let archive = echo::archive_with_files(
            &EchoTemplate::default(),
            &[("padding.bin", &padding(i as u64, archive_bytes))],
        );
        let file = deploy.owner.upload_tar(archive).await?;
        let version = deploy
            .owner
            .create_template_version(
                "default",
                &CreateTemplateVersionRequest {
                    file_id: file.hash,
                    provisioner: "echo".into(),
                    storage_method: "file".into(),
                    ..Default::default()
                },
            )
            .await?;
        deploy.completions.wait(version.job.id, timeout).await?;
        let job = deploy.owner.template_version(version.id).await?.job;
        ensure!(
            job.status == ProvisionerJobStatus::Succeeded,
            "import {i} failed: {}",
            job.error
        );
    }
    let elapsed = started.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = deploy.server.memory()?;
    deploy.stop().await?;
    Ok(UploadsRun {
        imports,
        archive_bytes,
        idle,
        after,
        elapsed,
    })
}
