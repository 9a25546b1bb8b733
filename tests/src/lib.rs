//! toolcell's integration tests, one module per area, in one test binary.
