//! Every call gets a fresh instance: nothing one call leaves behind is seen by the next.

use crate::support::{call, result_text};
use std::thread;

/// The `counter` guest counts calls in a global. Had any instance been reused, some call would
/// see 2 or more.
#[test]
pub(crate) fn counter() {
    for _ in 0..20 {
        assert_eq!(result_text(call("counter", "{}")), "1");
    }
    let answers: Vec<String> = thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    (0..10)
                        .map(|_| result_text(call("counter", "{}")))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|handle| handle.join().expect("thread"))
            .collect()
    });
    assert_eq!(answers.len(), 40);
    assert!(answers.iter().all(|answer| answer == "1"), "{answers:?}");
}
