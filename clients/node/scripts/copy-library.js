// Copies the repository's function library (scripts/swl.lua) into the
// package, as it is installed for development and as it is packed, so a
// packed package carries exactly the library of the commit it was packed
// from. Outside the repository (an unpacked tarball) the copy it carries
// stays.
'use strict';

const fs = require('node:fs');
const path = require('node:path');

const source = path.join(__dirname, '..', '..', '..', 'scripts', 'swl.lua');
const target = path.join(__dirname, '..', 'swl.lua');

if (fs.existsSync(source)) {
  fs.copyFileSync(source, target);
} else if (!fs.existsSync(target)) {
  console.error(`redis-swl: no function library: neither ${source} nor ${target}`);
  process.exit(1);
}

// The repository's LICENSE as well: npm packs a LICENSE whatever "files"
// says, but only from the package's own folder.
const license = path.join(__dirname, '..', '..', '..', 'LICENSE');
if (fs.existsSync(license)) {
  fs.copyFileSync(license, path.join(__dirname, '..', 'LICENSE'));
}
