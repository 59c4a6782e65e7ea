// The function library this package ships (swl.lua, the repository's
// scripts/swl.lua copied in by scripts/copy-library.js), for servers
// without the module.
'use strict';

const fs = require('node:fs');
const path = require('node:path');

// A sorted set, a compact log (the newest format the library writes), or a
// compact log of format version 1, which redis-swl 0.3 reads too (for a
// fleet part way through an upgrade).
const ENCODINGS = Object.freeze(['zset', 'compact', 'compact1']);
const ENCODING_LINE = "\nlocal ENCODING = 'compact'\n";
const VERSION_LINE = /\nlocal VERSION = '([^'\n]*)'\n/;
const LIBRARY_FILE = path.join(__dirname, '..', 'swl.lua');

const sources = new Map();

function checkEncoding(encoding) {
  if (!ENCODINGS.includes(encoding)) {
    throw new TypeError(`encoding must be one of ${ENCODINGS.join(', ')}, not ${JSON.stringify(encoding)}`);
  }
}

// The library's source, creating new logs in `encoding`: 'compact' (a
// compact log, the default), 'compact1' (one of format version 1) or
// 'zset' (a sorted set). Read once per encoding.
function librarySource(encoding = 'compact') {
  checkEncoding(encoding);
  let source = sources.get(encoding);
  if (source === undefined) {
    const text = fs.readFileSync(LIBRARY_FILE, 'utf8');
    if (!text.includes(ENCODING_LINE)) throw new Error(`${LIBRARY_FILE} has no ENCODING line`);
    source = text.replace(ENCODING_LINE, `\nlocal ENCODING = '${encoding}'\n`);
    sources.set(encoding, source);
  }
  return source;
}

// The release of the library this package carries: its VERSION line, which
// FCALL_RO swl_version 0 replies.
function libraryVersion() {
  const found = VERSION_LINE.exec(librarySource());
  if (!found) throw new Error(`${LIBRARY_FILE} has no VERSION line`);
  return found[1];
}

// A release's [major, minor, patch], from the start of `version` ('0.4.0',
// '1.2', '0.5.0-rc.1'); null where it does not start with a number.
function release(version) {
  const found = /^(\d+)(?:\.(\d+))?(?:\.(\d+))?/.exec(String(version).trim());
  return found ? found.slice(1).map((part) => Number(part || 0)) : null;
}

// Whether the loaded library's release is newer than `own`, comparing
// major, minor and patch as numbers. A version that does not start with a
// number is older than any.
function isNewer(loaded, own) {
  const theirs = release(loaded);
  const ours = release(own);
  if (!theirs || !ours) return false;
  const differs = theirs.findIndex((part, i) => part !== ours[i]);
  return differs >= 0 && theirs[differs] > ours[differs];
}

module.exports = {
  ENCODINGS, LIBRARY_FILE, checkEncoding, librarySource, libraryVersion, release, isNewer,
};
