//! Many threads call one port at once, benign and hostile calls mixed, and every answer is the
//! right one.

use crate::support::{attack, call, exclusive, port};
use std::time::Duration;
use toolcell::{CallOptions, FailureKind, Runtime, ToolResponse};

const THREADS: usize = 8;
const CALLS_PER_THREAD: usize = 500;

#[test]
fn the_port_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Runtime>();
}

#[test]
fn eight_threads_of_mixed_calls_all_get_the_right_answer() {
    let _guard = exclusive();
    let spin = CallOptions {
        timeout: Some(Duration::from_millis(20)),
        ..CallOptions::default()
    };
    let small = CallOptions {
        memory_bytes: Some(16 << 20),
        ..CallOptions::default()
    };
    let port = port();
    let answered: usize = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..THREADS)
            .map(|thread| {
                let (spin, small) = (&spin, &small);
                scope.spawn(move || {
                    for i in 0..CALLS_PER_THREAD {
                        let what = format!("thread {thread} call {i}");
                        match i % 20 {
                            0 => assert!(
                                matches!(
                                    attack("panic", &CallOptions::default()).response,
                                    ToolResponse::Failed {
                                        kind: FailureKind::Trap,
                                        ..
                                    }
                                ),
                                "{what}"
                            ),
                            1 => assert_eq!(
                                attack("spin", spin).response,
                                ToolResponse::TimedOut { limit_ms: 20 },
                                "{what}"
                            ),
                            2 => assert!(
                                matches!(
                                    attack("alloc", small).response,
                                    ToolResponse::Failed {
                                        kind: FailureKind::OutOfMemory,
                                        ..
                                    }
                                ),
                                "{what}"
                            ),
                            3 => {
                                assert_eq!(call("counter", "{}"), ToolResponse::text("1"), "{what}")
                            }
                            _ => {
                                let arguments = serde_json::json!({ "text": what }).to_string();
                                assert_eq!(
                                    call("echo", &arguments),
                                    ToolResponse::text(what.clone()),
                                    "{what}"
                                );
                            }
                        }
                    }
                    CALLS_PER_THREAD
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|thread| thread.join().expect("no thread panicked"))
            .sum()
    });
    assert_eq!(answered, THREADS * CALLS_PER_THREAD);
    assert_eq!(port.load_errors(), &[]);
}
