// envd's files (ref. 4): GET and POST /files, and filesystem.Filesystem's
// unary RPCs (ref. 5.5).

import fs from 'node:fs';
import path from 'node:path';
import { opts, MAX_UPLOAD } from './state.mjs';
import { send, apiError, readBody, rpcError } from './http.mjs';
import { resolvePath, entryInfo } from './paths.mjs';

export function filesRead(sbx, req, res, url) {
  const { abs, host } = resolvePath(sbx, url.searchParams.get('path'));
  let st;
  try { st = fs.statSync(host); } catch { apiError(res, 404, `path '${abs}' does not exist`); return 404; }
  if (st.isDirectory()) { apiError(res, 400, `path '${abs}' is a directory`); return 400; }
  const data = fs.readFileSync(host);
  send(res, 200, data, 'application/octet-stream', { 'Content-Disposition': `attachment; filename=${JSON.stringify(path.basename(abs))}` });
  return 200;
}

// Minimal multipart/form-data parser: the parts' headers and bytes.
function parseMultipart(buf, boundary) {
  const delim = Buffer.from(`--${boundary}`);
  const parts = [];
  let pos = buf.indexOf(delim);
  while (pos >= 0) {
    pos += delim.length;
    if (buf.subarray(pos, pos + 2).toString() === '--') break;
    if (buf.subarray(pos, pos + 2).toString() === '\r\n') pos += 2;
    const headEnd = buf.indexOf('\r\n\r\n', pos);
    if (headEnd < 0) return null;
    const headers = {};
    for (const line of buf.subarray(pos, headEnd).toString('utf8').split('\r\n')) {
      const i = line.indexOf(':');
      if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
    }
    const next = buf.indexOf(Buffer.concat([Buffer.from('\r\n'), delim]), headEnd + 4);
    if (next < 0) return null;
    parts.push({ headers, data: buf.subarray(headEnd + 4, next) });
    pos = next + 2;
  }
  return parts;
}

function dispositionParam(disp, name) {
  const m = new RegExp(`(?:^|;)\\s*${name}="((?:[^"\\\\]|\\\\.)*)"`).exec(disp || '');
  return m ? m[1].replace(/\\(.)/g, '$1') : undefined;
}

export async function filesWrite(sbx, req, res, url) {
  const ctype = req.headers['content-type'] || '';
  const bm = /^multipart\/form-data;.*boundary=("?)([^";]+)\1/i.exec(ctype);
  if (!bm) {
    // ref. 4.2: envd 0.5.2 (FC) takes multipart only
    req.resume();
    apiError(res, 400, `unsupported content type '${ctype.split(';')[0]}': expected multipart/form-data`);
    return 400;
  }
  const body = await readBody(req, MAX_UPLOAD);
  const parts = parseMultipart(body, bm[2]);
  const part = parts?.find((p) => dispositionParam(p.headers['content-disposition'], 'name') === 'file');
  if (!part) { apiError(res, 400, 'no multipart part named "file"'); return 400; }
  const target = url.searchParams.get('path') || dispositionParam(part.headers['content-disposition'], 'filename');
  if (!target) { apiError(res, 400, 'no path and no filename'); return 400; }
  const { abs, host } = resolvePath(sbx, target);
  if (fs.existsSync(host) && fs.statSync(host).isDirectory()) { apiError(res, 400, `path '${abs}' is a directory`); return 400; }
  fs.mkdirSync(path.dirname(host), { recursive: true });
  try {
    fs.writeFileSync(host, part.data); // like envd: O_TRUNC in place, mode kept
  } catch (e) {
    // ref. 4.2: a full disk is 507 (E2B's SDK: NotEnoughDiskSpaceError); like
    // envd, what was written before the error stays (the file is not removed)
    if (e.code !== 'ENOSPC' && e.code !== 'EDQUOT') throw e;
    apiError(res, 507, `not enough disk space: write ${abs}: ${e.code === 'ENOSPC' ? 'no space left on device' : 'disk quota exceeded'}`);
    return 507;
  }
  send(res, opts.uploadStatus, [{ name: path.posix.basename(abs), path: abs, type: 'file' }]);
  return opts.uploadStatus;
}

// ---- filesystem.Filesystem (ref. 5.5) ------------------------------------------------------------------

function listDir(sbx, abs, host, depth, out) {
  for (const name of fs.readdirSync(host).sort()) {
    const ha = path.join(host, name);
    const aa = path.posix.join(abs, name);
    out.push(entryInfo(ha, aa));
    if (depth > 1 && fs.lstatSync(ha).isDirectory()) listDir(sbx, aa, ha, depth - 1, out);
  }
}

// The answer to the unary RPC op (listdir, stat, mkdir, remove, move) with
// the request body, or undefined when op is not a filesystem one; throws
// rpcError's errors.
export function filesystemRpc(op, sbx, body) {
  let out = {};
  switch (op) {
    case 'listdir': {
      const { abs, host } = resolvePath(sbx, body.path);
      if (!fs.existsSync(host)) throw rpcError(404, 'not_found', `directory '${abs}' does not exist`);
      if (!fs.statSync(host).isDirectory()) throw rpcError(400, 'invalid_argument', `path '${abs}' is not a directory`);
      const entries = [];
      listDir(sbx, abs, host, Math.max(1, Number(body.depth) || 1), entries);
      out = { entries };
      break;
    }
    case 'stat': {
      const { abs, host } = resolvePath(sbx, body.path);
      try { fs.lstatSync(host); } catch { throw rpcError(404, 'not_found', `path '${abs}' does not exist`); }
      out = { entry: entryInfo(host, abs) };
      break;
    }
    case 'mkdir': {
      const { abs, host } = resolvePath(sbx, body.path);
      if (fs.existsSync(host)) throw rpcError(409, 'already_exists', `path '${abs}' already exists`);
      fs.mkdirSync(host, { recursive: true });
      out = { entry: entryInfo(host, abs) };
      break;
    }
    case 'remove': {
      const { abs, host } = resolvePath(sbx, body.path);
      try { fs.lstatSync(host); } catch { throw rpcError(404, 'not_found', `path '${abs}' does not exist`); }
      fs.rmSync(host, { recursive: true, force: true });
      break;
    }
    case 'move': {
      const src = resolvePath(sbx, body.source);
      const dst = resolvePath(sbx, body.destination);
      try { fs.lstatSync(src.host); } catch { throw rpcError(404, 'not_found', `path '${src.abs}' does not exist`); }
      fs.mkdirSync(path.dirname(dst.host), { recursive: true });
      fs.renameSync(src.host, dst.host);
      out = { entry: entryInfo(dst.host, dst.abs) };
      break;
    }
    default:
      return undefined;
  }
  return out;
}
