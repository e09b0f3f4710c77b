//! Knowing the moment a job completes without polling coderd: the bench LISTENs on the same
//! channel coderd announces completions on (`pg_notify` in the completing transaction), so a
//! notification means the result is committed. Waiting this way adds no load to the server
//! under test.
//!
//! A job handed back to the queue (its daemon went away before it ran) is announced on the
//! same channel, right after its requeue notice in the same commit; that one is not a
//! completion, so the listener hears the requeue channel too and skips the update that follows.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use coderd_store::pubsub::channels;
use sqlx::postgres::PgListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use uuid::Uuid;

enum Slot {
    Done(Instant),
    Waiting(oneshot::Sender<Instant>),
}

/// Completion times of jobs, as heard from the database.
#[derive(Clone)]
pub struct Completions {
    slots: Arc<Mutex<HashMap<Uuid, Slot>>>,
    task: Arc<JoinHandle<()>>,
}

impl Completions {
    pub async fn listen(pool: &sqlx::PgPool) -> anyhow::Result<Self> {
        let mut listener = PgListener::connect_with(pool).await?;
        listener
            .listen_all([channels::JOB_UPDATED, channels::JOB_REQUEUED])
            .await?;
        let slots: Arc<Mutex<HashMap<Uuid, Slot>>> = Arc::default();
        let for_task = slots.clone();
        let task = tokio::spawn(async move {
            let mut requeued: HashSet<Uuid> = HashSet::new();
            while let Ok(note) = listener.recv().await {
                let at = Instant::now();
                if note.channel() == channels::JOB_REQUEUED {
                    // Payload `<organization>:<job>:<provisioner>:<tags key>`.
                    if let Some(Ok(job)) = note.payload().split(':').nth(1).map(str::parse) {
                        requeued.insert(job);
                    }
                    continue;
                }
                // Payload `<job id>` (coderd's pubsub allows `<key>:<data>`; the key is the id).
                let key = note.payload().split(':').next().unwrap_or_default();
                let Ok(job) = key.parse::<Uuid>() else {
                    continue;
                };
                if requeued.remove(&job) {
                    continue;
                }
                let mut slots = lock(&for_task);
                match slots.remove(&job) {
                    Some(Slot::Waiting(tx)) => {
                        let _ = tx.send(at);
                        slots.insert(job, Slot::Done(at));
                    }
                    Some(done @ Slot::Done(_)) => {
                        slots.insert(job, done);
                    }
                    None => {
                        slots.insert(job, Slot::Done(at));
                    }
                }
            }
        });
        Ok(Self {
            slots,
            task: Arc::new(task),
        })
    }

    /// When `job` completed, waiting up to `timeout` for it.
    pub async fn wait(&self, job: Uuid, timeout: Duration) -> anyhow::Result<Instant> {
        let rx = {
            let mut slots = lock(&self.slots);
            if let Some(Slot::Done(at)) = slots.get(&job) {
                return Ok(*at);
            }
            let (tx, rx) = oneshot::channel();
            slots.insert(job, Slot::Waiting(tx));
            rx
        };
        tokio::time::timeout(timeout, rx)
            .await
            .with_context(|| format!("job {job} did not complete within {timeout:?}"))?
            .context("the completion listener stopped")
    }

    /// Forgets finished jobs so a long run does not accumulate them.
    pub fn forget(&self, jobs: &[Uuid]) {
        let mut slots = lock(&self.slots);
        for job in jobs {
            if matches!(slots.get(job), Some(Slot::Done(_))) {
                slots.remove(job);
            }
        }
    }
}

impl Drop for Completions {
    fn drop(&mut self) {
        if Arc::strong_count(&self.task) == 1 {
            self.task.abort();
        }
    }
}

fn lock(slots: &Mutex<HashMap<Uuid, Slot>>) -> std::sync::MutexGuard<'_, HashMap<Uuid, Slot>> {
    slots.lock().unwrap_or_else(|e| e.into_inner())
}
