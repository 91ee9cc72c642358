// The wire between the engine and its JavaScript driver (src/io.js), generated from
// edge/core/src/wire.rs: do not edit. `UNDERSTUDY_BLESS=1 cargo test -p understudy-core
// wire` writes it; a test fails when the two differ.
export const FETCHED = 1;
export const KV = 2;
export const LIMITED = 3;
export const TIMER = 4;
export const HEARD = 5;
export const ASKED = 6;
export const LIVE = 256;
export const START_FETCH = 1;
export const START_KV = 2;
export const START_LIMIT = 3;
export const ABORT = 5;
export const HEAR = 6;
export const EVENTS = 7;
export const RESPOND = 8;
export const ASK = 9;
export const FETCH_FAILED = -1;
export const FETCH_TOO_LARGE = -2;
export const REPORT_PATH = "/report";
export const WATCH_PATH = "/watch";
export const PROBE_EVERY_MS = 10;
// Called once by the Worker (so that the bundle carries this module).
export function us_wire() { return RESPOND; }
