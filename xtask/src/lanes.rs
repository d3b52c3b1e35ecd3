//! Independent parts run side by side: one lane per CPU, each taking the next part when its
//! last is done, in the order given (longest first keeps the lanes even). The guests' boots use
//! it: a TCG guest keeps about one CPU busy.
use std::collections::VecDeque;
use std::sync::Mutex;

use crate::phases::Phases;

/// A part and the name it is timed under.
pub type Part<'a> = (String, Box<dyn FnOnce() -> anyhow::Result<()> + Send + 'a>);

/// The lanes this machine has room for: one per CPU it lets us use.
pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// Runs `parts` in `lanes` threads, each timed into `phases`; returns the errors of those that
/// failed, in the order they failed.
pub fn in_lanes(phases: &Phases, parts: Vec<Part>, lanes: usize) -> Vec<anyhow::Error> {
    let queue = Mutex::new(VecDeque::from(parts));
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..lanes.max(1) {
            scope.spawn(|| loop {
                let next = queue.lock().expect("a lane panicked").pop_front();
                let Some((name, part)) = next else {
                    return;
                };
                if let Err(e) = phases.time(&name, part) {
                    failures.lock().expect("a lane panicked").push(e);
                }
            });
        }
    });
    failures.into_inner().expect("a lane panicked")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;
    use std::time::Duration;

    #[test]
    fn parts_in_two_lanes_run_at_once_and_each_failure_comes_back() {
        let phases = Phases::new();
        // Each of a and b hears from the other only if both run at the same time.
        let (to_a, at_a) = channel();
        let (to_b, at_b) = channel();
        let meet = |to: std::sync::mpsc::Sender<()>, at: std::sync::mpsc::Receiver<()>| {
            move || {
                to.send(())?;
                Ok(at.recv_timeout(Duration::from_secs(20))?)
            }
        };
        let parts: Vec<Part> = vec![
            ("a".into(), Box::new(meet(to_b, at_a))),
            ("b".into(), Box::new(meet(to_a, at_b))),
            ("c".into(), Box::new(|| anyhow::bail!("c failed"))),
        ];
        let failures = in_lanes(&phases, parts, 2);
        let messages: Vec<String> = failures.iter().map(ToString::to_string).collect();
        assert_eq!(messages, ["c failed"]);
    }
}
