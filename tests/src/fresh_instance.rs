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

/// Nothing a call writes to linear memory survives into the next call that gets the same
/// slot: not in the part a slot keeps resident (reset), not beyond it (given back and faulted
/// in fresh), and not when a slot keeps more. One slot, so the second call surely reuses it.
#[test]
fn linear_memory_carries_nothing_from_one_call_to_the_next() {
    use toolcell::{CallOptions, ToolPort as _, ToolRequest};
    for keep_resident in [toolcell::limits::KEEP_RESIDENT_BYTES, 64 << 20] {
        let port = crate::support::builder()
            .builtin_tools(false)
            .component("test:hostile", crate::guests::HOSTILE)
            .pool_slots(1)
            .keep_resident_bytes(keep_resident)
            .build()
            .expect("port");
        let attack = |what: &str| {
            let request = ToolRequest::new("t", "hostile", format!(r#"{{"do":"{what}"}}"#));
            result_text(port.call_with(&request, &CallOptions::default()))
        };
        // The control: within one instance the scan finds every planted word.
        let words = ((64 << 10) + (16 << 20)) / 8;
        let found: usize = attack("plant_and_scan").parse().expect("a count");
        assert!(
            found >= words,
            "the scan found {found} of {words} planted words"
        );
        for round in 0..3 {
            assert_eq!(attack("plant"), "planted");
            assert_eq!(
                attack("scan"),
                "0",
                "markers left over (round {round}, {keep_resident} bytes kept resident)"
            );
        }
    }
}
