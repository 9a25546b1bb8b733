//! The smallest component of plain typed exports: `echo: func(text: string) -> string`, built
//! with wit-bindgen against a world of its own. The `calls` bench serves this very file from
//! toolcell and from Wassette, so the two are compared on the same component.

wit_bindgen::generate!({ world: "echo", path: "wit" });

struct Echo;

impl Guest for Echo {
    fn echo(text: String) -> String {
        text
    }
}

export!(Echo);
