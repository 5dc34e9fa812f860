// Paths inside a sandbox and their EntryInfo (ref. 4.1, 5.5).

import fs from 'node:fs';
import path from 'node:path';

// The sandbox path of p (relative paths are under the user's home, ref. 4.1)
// and its host path; throws {status, code} when it would leave the sandbox.
export function resolvePath(sbx, p) {
  if (typeof p !== 'string' || !p) throw Object.assign(new Error('path is required'), { status: 400, code: 'invalid_argument' });
  const abs = path.posix.resolve('/home/user', p);
  const host = path.join(sbx.root, abs);
  // symlinks may not lead out of the sandbox
  let probe = host;
  while (!fs.existsSync(probe)) probe = path.dirname(probe);
  const real = fs.realpathSync(probe);
  if (real !== sbx.root && !real.startsWith(sbx.root + path.sep)) {
    throw Object.assign(new Error(`path ${abs} leaves the sandbox`), { status: 403, code: 'permission_denied' });
  }
  return { abs, host };
}

function fileType(st) {
  if (st.isSymbolicLink()) return 'FILE_TYPE_SYMLINK';
  if (st.isDirectory()) return 'FILE_TYPE_DIRECTORY';
  if (st.isFile()) return 'FILE_TYPE_FILE';
  return 'FILE_TYPE_UNSPECIFIED';
}

function permString(st) {
  const t = st.isDirectory() ? 'd' : st.isSymbolicLink() ? 'l' : '-';
  const m = st.mode;
  const rwx = (s) => `${m & (4 << s) ? 'r' : '-'}${m & (2 << s) ? 'w' : '-'}${m & (1 << s) ? 'x' : '-'}`;
  return t + rwx(6) + rwx(3) + rwx(0);
}

// ref. 5.5 EntryInfo, proto3 JSON: int64 size as a string, enum names
export function entryInfo(host, abs) {
  const st = fs.lstatSync(host);
  const e = {
    name: path.posix.basename(abs) || '/',
    type: fileType(st),
    path: abs,
    size: String(st.size),
    mode: st.mode & 0o7777,
    permissions: permString(st),
    owner: st.uid === 0 ? 'root' : String(st.uid),
    group: st.gid === 0 ? 'root' : String(st.gid),
    modifiedTime: st.mtime.toISOString(),
  };
  if (st.isSymbolicLink()) e.symlinkTarget = fs.readlinkSync(host);
  return e;
}
