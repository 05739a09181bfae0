#!/usr/bin/env node
// The reference for our C++ GPT-2 encoder (data/bpe.h): OpenAI's tiktoken (the
// npm package, its Rust code compiled to WebAssembly), encoding "gpt2" with
// encode_ordinary (special tokens such as "<|endoftext|>" are plain text, as in
// our encoder and in llm.c's data scripts).
//
// usage:
//   node dev/encode_tiktoken.js [--tiktoken-dir DIR] --out OUT FILE...
//       encodes each FILE (its bytes decoded as UTF-8 the way node does: each
//       maximal invalid sequence becomes one U+FFFD, like Python's
//       errors="replace") and writes one record per file to OUT.
//   node dev/encode_tiktoken.js [--tiktoken-dir DIR] --out OUT --hex-lines FILE
//       FILE holds one test string per line as hex of its bytes (an empty line is
//       the empty string); writes one record per line.
// A record is little-endian uint32s: the token count, then the tokens.
// DIR is the unpacked package (default data/npm/tiktoken/package, fetched by
// `sh data/fetch_npm.sh test`).
'use strict';
const fs = require('fs');
const path = require('path');

function die(msg) {
  process.stderr.write(`error: ${msg}\n`);
  process.exit(1);
}

function parseArgs(argv) {
  const opts = { dir: 'data/npm/tiktoken/package', out: null, hexLines: false, inputs: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--tiktoken-dir') opts.dir = argv[++i];
    else if (a === '--out') opts.out = argv[++i];
    else if (a === '--hex-lines') opts.hexLines = true;
    else if (a.startsWith('--')) die(`unknown option ${a}`);
    else opts.inputs.push(a);
  }
  if (!opts.out || !opts.inputs.length) die('usage: node dev/encode_tiktoken.js [--tiktoken-dir DIR] --out OUT [--hex-lines] FILE...');
  if (opts.hexLines && opts.inputs.length !== 1) die('--hex-lines takes one FILE');
  return opts;
}

function main() {
  const opts = parseArgs(process.argv.slice(2));
  const entry = path.resolve(opts.dir, 'tiktoken.cjs');
  if (!fs.existsSync(entry)) die(`${entry} not found (run \`sh data/fetch_npm.sh test\`)`);
  const { get_encoding } = require(entry);
  const enc = get_encoding('gpt2');

  let texts;
  if (opts.hexLines) {
    const lines = fs.readFileSync(opts.inputs[0], 'latin1').split('\n');
    if (lines.length && lines[lines.length - 1] === '') lines.pop();  // the file's final newline
    texts = lines.map((h) => Buffer.from(h, 'hex').toString('utf8'));
  } else {
    texts = opts.inputs.map((f) => fs.readFileSync(f).toString('utf8'));
  }
  const records = [];
  for (const text of texts) {
    const ids = enc.encode_ordinary(text);
    records.push(Uint32Array.of(ids.length), ids);
  }
  enc.free();
  fs.writeFileSync(opts.out, Buffer.concat(records.map((r) => Buffer.from(r.buffer, r.byteOffset, r.byteLength))));
}

main();
