// Drops the `name` custom section from a WebAssembly module, in place: what wasm-bindgen
// leaves of it after `strip = "symbols"` (the names of the module's imports and exports) is
// read by no runtime, only by a debugger's stack traces, and is 1.5 KB of the Worker's
// gzipped module (docs/size.md). Every other section is kept byte for byte.
//
//   node scripts/strip-names.mjs FILE.wasm
import { readFileSync, writeFileSync } from "node:fs";

const file = process.argv[2];
if (!file) {
  console.error("usage: node scripts/strip-names.mjs FILE.wasm");
  process.exit(2);
}
const b = readFileSync(file);
if (b.length < 8 || b.readUInt32LE(0) !== 0x6d736100) {
  console.error(`strip-names: ${file} is not a WebAssembly module`);
  process.exit(1);
}
const leb = (i) => {
  let v = 0, shift = 0, x;
  do { x = b[i++]; v += (x & 0x7f) * 2 ** shift; shift += 7; } while (x & 0x80);
  return [v, i];
};
const keep = [b.subarray(0, 8)];
let dropped = 0;
for (let i = 8; i < b.length; ) {
  const start = i;
  const id = b[i++];
  const [size, body] = leb(i);
  const end = body + size;
  if (end > b.length) {
    console.error(`strip-names: ${file}: a section runs past the end of the file`);
    process.exit(1);
  }
  let name = null;
  if (id === 0) {
    const [len, at] = leb(body);
    name = b.subarray(at, at + len).toString("utf8");
  }
  if (name === "name") dropped += end - start;
  else keep.push(b.subarray(start, end));
  i = end;
}
writeFileSync(file, Buffer.concat(keep));
console.error(`strip-names: ${file}: ${dropped} bytes of names dropped`);
