//! A valid component that exports some other world, not toolcell's: served by its types.

wit_bindgen::generate!({
    inline: "
        package test:wrong;
        world wrong {
            export run: func() -> string;
        }
    ",
});

struct Wrong;

impl Guest for Wrong {
    fn run() -> String {
        "not a tool".to_owned()
    }
}

export!(Wrong);
