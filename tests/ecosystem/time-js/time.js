// A clock as the ecosystem writes one: a world exporting `get-current-time`, built with
// componentize-js, no toolcell module. `Date` reads `wasi:clocks/wall-clock`, which the host
// gives only when the policy grants the clock.
export function getCurrentTime() {
  return new Date().toISOString();
}
