//! A job executor that awaits host futures instead of polling them in a loop.
//!
//! Boa's default executor re-polls pending futures after yielding; in a Web
//! Worker that yield is a microtask, so a future waiting on a real event (a
//! timer, `fetch`, `postMessage`) starves the event loop that would complete it.
//! Here microtasks run to exhaustion, then the executor parks on the set of
//! pending host futures until one completes.
//!
//! Those two moments, starting and stopping, are when the guest starts and stops
//! running JavaScript: the executor tells the [`RunClock`] (which spends the CPU
//! budget and keeps the person-wait time) and the [`ToolHost`] (which, in a
//! worker, sends the calls made so far and tells the page the guest is idle).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::mem;
use std::rc::Rc;

use boa_engine::job::{GenericJob, Job, JobExecutor, NativeAsyncJob, PromiseJob};
use boa_engine::{Context, JsResult};
use futures::StreamExt;
use futures::future::{Either, select};
use futures::stream::FuturesUnordered;

use crate::clock::RunClock;
use crate::console::ConsoleBuffer;
use crate::tools::ToolHost;

#[derive(Default)]
pub(crate) struct HostJobExecutor {
    promise_jobs: RefCell<VecDeque<PromiseJob>>,
    generic_jobs: RefCell<VecDeque<GenericJob>>,
    async_jobs: RefCell<VecDeque<NativeAsyncJob>>,
    /// The run's clock and host, attached when the run starts (the context is
    /// built before the run is known). Once the clock records a budget stop, no
    /// further job runs and pending host futures are dropped.
    run: RefCell<Option<Attached>>,
    /// The run's console, whose count of dropped lines the host is told at
    /// each idle point (its kept lines go as they are printed).
    console: RefCell<Option<ConsoleBuffer>>,
}

/// What a run attaches to the executor.
type Attached = (Rc<RunClock>, Rc<dyn ToolHost>);

impl HostJobExecutor {
    pub(crate) fn attach(
        &self,
        clock: Rc<RunClock>,
        host: Rc<dyn ToolHost>,
        console: ConsoleBuffer,
    ) {
        *self.run.borrow_mut() = Some((clock, host));
        *self.console.borrow_mut() = Some(console);
    }

    fn halted(&self) -> bool {
        self.run
            .borrow()
            .as_ref()
            .is_some_and(|(clock, _)| clock.stopped().is_some())
    }

    /// Runs promise and generic jobs until none is left. Async jobs stay queued.
    fn drain_microtasks(&self, context: &mut Context) -> JsResult<()> {
        loop {
            if self.halted() {
                return Ok(());
            }
            let next = self.promise_jobs.borrow_mut().pop_front();
            if let Some(job) = next {
                job.call(context)?;
                continue;
            }
            let next = self.generic_jobs.borrow_mut().pop_front();
            match next {
                Some(job) => job.call(context)?,
                None => return Ok(()),
            };
        }
    }

    fn has_microtasks(&self) -> bool {
        !self.promise_jobs.borrow().is_empty() || !self.generic_jobs.borrow().is_empty()
    }
}

impl JobExecutor for HostJobExecutor {
    fn enqueue_job(self: Rc<Self>, job: Job, _context: &mut Context) {
        match job {
            Job::PromiseJob(job) => self.promise_jobs.borrow_mut().push_back(job),
            Job::GenericJob(job) => self.generic_jobs.borrow_mut().push_back(job),
            Job::AsyncJob(job) => self.async_jobs.borrow_mut().push_back(job),
            // The guest has no timers (only the host-driven `sleep`), and a
            // FinalizationRegistry callback is never promised to run: dropping
            // these keeps a run from outliving its program.
            Job::TimeoutJob(_) | Job::IntervalJob(_) | Job::FinalizationRegistryCleanupJob(_) => {}
            _ => {}
        }
    }

    fn run_jobs(self: Rc<Self>, context: &mut Context) -> JsResult<()> {
        self.drain_microtasks(context)
    }

    async fn run_jobs_async(self: Rc<Self>, context: &RefCell<&mut Context>) -> JsResult<()> {
        let mut pending = FuturesUnordered::new();
        loop {
            self.drain_microtasks(&mut context.borrow_mut())?;
            if self.halted() {
                return Ok(());
            }
            context.borrow_mut().clear_kept_objects();
            for job in mem::take(&mut *self.async_jobs.borrow_mut()) {
                pending.push(job.call(context));
            }
            if self.has_microtasks() {
                continue;
            }
            if pending.is_empty() {
                return Ok(());
            }
            let Some((clock, host)) = self.run.borrow().clone() else {
                return Ok(());
            };
            let idle = clock.idle();
            if self.halted() {
                return Ok(());
            }
            if let Some(console) = self.console.borrow().as_ref() {
                console.catch_up();
            }
            host.idle(idle);
            let next = loop {
                match select(pending.next(), Box::pin(clock.watch())).await {
                    Either::Left((next, _)) => break next,
                    Either::Right(_) if self.halted() => return Ok(()),
                    Either::Right(_) => {}
                }
            };
            clock.busy();
            match next {
                None => return Ok(()),
                Some(result) => {
                    result?;
                }
            }
            if self.halted() {
                return Ok(());
            }
        }
    }
}
