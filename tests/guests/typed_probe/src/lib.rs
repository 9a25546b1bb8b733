//! A component of plain typed exports, built with wit-bindgen against a world of its own (no
//! toolcell crate, no toolcell WIT), as any component of the ecosystem is: every WIT type in
//! and out, an `err`, a trap, nothing returned, a large list, and a resource whose functions
//! cannot be served.

wit_bindgen::generate!({ world: "probe", path: "wit" });

use exports::probe::typed::counters::{Counter, Guest as Counters, GuestCounter};
use exports::probe::typed::shapes::{Everything, Guest as Shapes, Wide};
use std::cell::Cell;

struct Probe;

impl Guest for Probe {
    fn echo(text: String) -> String {
        text
    }

    fn add(a: u8, b: u8) -> u16 {
        u16::from(a) + u16::from(b)
    }

    fn divide(a: f64, b: f64) -> Result<f64, String> {
        if b == 0.0 {
            return Err(format!("cannot divide {a} by zero"));
        }
        Ok(a / b)
    }

    fn fail(why: String) -> Result<String, String> {
        Err(why)
    }

    fn code_point(c: char) -> u32 {
        u32::from(c)
    }

    fn nothing() {}

    fn crash() {
        panic!("the probe was asked to crash");
    }

    fn bytes(count: u32) -> Vec<u8> {
        vec![7; count as usize]
    }
}

impl Shapes for Probe {
    fn identity(value: Everything) -> Everything {
        value
    }

    fn wide_identity(value: Wide) -> Wide {
        value
    }
}

struct Count(Cell<u32>);

impl GuestCounter for Count {
    fn new(start: u32) -> Count {
        Count(Cell::new(start))
    }

    fn next(&self) -> u32 {
        let next = self.0.get() + 1;
        self.0.set(next);
        next
    }
}

impl Counters for Probe {
    type Counter = Count;

    fn peek(c: exports::probe::typed::counters::CounterBorrow<'_>) -> u32 {
        c.get::<Count>().0.get()
    }

    fn make(start: u32) -> Counter {
        Counter::new(Count(Cell::new(start)))
    }
}

export!(Probe);
