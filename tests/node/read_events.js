// Reads TensorBoard event files with a reader that shares no code with pstrain's writer:
// the TFRecord framing is checked with @aws-crypto/crc32c and the Event protos are
// decoded by protobufjs from the .proto given on the command line.
//
//   node read_events.js EVENT_PROTO LOGDIR
//
// Prints one JSON object: {"train": {"epoch_loss": [[step, value], ...], ...},
// "validation": {...}, "files": N}. Exits 1 with one line on stderr for a corrupt file.
'use strict';
const fs = require('fs');
const path = require('path');
const protobuf = require('protobufjs');
const { crc32c } = require('@aws-crypto/crc32c');

function maskedCrc(bytes) {
  const crc = crc32c(bytes) >>> 0;
  return ((((crc >>> 15) | (crc << 17)) >>> 0) + 0xa282ead8) >>> 0;
}

function readRecords(file) {
  const data = fs.readFileSync(file);
  const records = [];
  let at = 0;
  while (at < data.length) {
    if (at + 12 > data.length) throw new Error(`${file}: truncated header at byte ${at}`);
    const lengthBytes = data.subarray(at, at + 8);
    const length = Number(data.readBigUInt64LE(at));
    if (data.readUInt32LE(at + 8) !== maskedCrc(lengthBytes)) {
      throw new Error(`${file}: bad length CRC at byte ${at}`);
    }
    const body = data.subarray(at + 12, at + 12 + length);
    if (body.length !== length || at + 16 + length > data.length) {
      throw new Error(`${file}: truncated record at byte ${at}`);
    }
    if (data.readUInt32LE(at + 12 + length) !== maskedCrc(body)) {
      throw new Error(`${file}: bad data CRC at byte ${at}`);
    }
    records.push(body);
    at += 16 + length;
  }
  return records;
}

function main() {
  const [protoPath, logdir] = process.argv.slice(2);
  const Event = protobuf.loadSync(protoPath).lookupType('pstrain.tensorboard.Event');
  const out = { files: 0 };
  for (const run of ['train', 'validation']) {
    out[run] = {};
    const dir = path.join(logdir, run);
    if (!fs.existsSync(dir)) continue;
    for (const name of fs.readdirSync(dir).sort()) {
      if (!name.startsWith('events.out.tfevents.')) continue;
      out.files++;
      const records = readRecords(path.join(dir, name));
      const first = Event.decode(records[0]);
      if (first.fileVersion !== 'brain.Event:2') {
        throw new Error(`${name}: first record is not the brain.Event:2 version event`);
      }
      for (const record of records.slice(1)) {
        const event = Event.decode(record);
        for (const value of (event.summary && event.summary.value) || []) {
          (out[run][value.tag] = out[run][value.tag] || []).push(
              [Number(event.step), value.simpleValue]);
        }
      }
    }
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}

try {
  main();
} catch (e) {
  process.stderr.write(`read_events: ${e.message}\n`);
  process.exit(1);
}
