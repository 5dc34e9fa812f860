// initialize: the SDK client connects; capabilities tools + logging; every
// supported protocol version is answered with itself; the seven cloud tools
// are listed with descriptions and object input schemas.
import { t, preflight, rawServer, sdkClient, CLOUD_TOOLS } from '../lib/sg.mjs';

const VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'];

t.run(async () => {
  await preflight({ docker: false });
  const c = await sdkClient();
  const info = c.client.getServerVersion();
  t.like(info?.name, /\S/, 'serverInfo.name is set');
  t.like(info?.version, /\S/, 'serverInfo.version is set');
  const caps = c.client.getServerCapabilities();
  t.ok(caps?.tools && typeof caps.tools === 'object', 'capabilities.tools is declared', caps);
  t.ok(caps?.logging && typeof caps.logging === 'object', 'capabilities.logging is declared', caps);
  t.deepEqual(await c.client.ping(), {}, 'ping returns {}');
  const tools = [];
  let cursor;
  do {
    const page = await c.client.listTools(cursor ? { cursor } : undefined);
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  const names = tools.map((x) => x.name);
  for (const n of CLOUD_TOOLS) t.ok(names.includes(n), `tools/list has ${n}`, { names });
  t.is(new Set(names).size, names.length, 'tool names are unique');
  for (const tool of tools) {
    t.ok(typeof tool.description === 'string' && tool.description.length > 10, `${tool.name}: has a description`);
    t.is(tool.inputSchema?.type, 'object', `${tool.name}: inputSchema.type is object`);
  }
  const req = Object.fromEntries(tools.map((x) => [x.name, x.inputSchema?.required ?? []]));
  t.deepEqual([...(req.run_command ?? [])].sort(), ['command'], 'run_command requires command');
  t.deepEqual([...(req.run_code ?? [])].sort(), ['code'], 'run_code requires code');
  t.deepEqual([...(req.read_file ?? [])].sort(), ['path'], 'read_file requires path');
  t.deepEqual([...(req.write_file ?? [])].sort(), ['content', 'path'], 'write_file requires path and content');
  t.deepEqual(req.create_sandbox ?? [], [], 'create_sandbox requires nothing');
  t.deepEqual(req.kill_sandbox ?? [], [], 'kill_sandbox requires nothing');
  t.deepEqual(req.list_files ?? [], [], 'list_files requires nothing');
  await c.close();

  for (const v of VERSIONS) {
    const r = await rawServer([], {}, { name: `initialize ${v}` });
    const res = await r.initialize(v);
    t.is(res.protocolVersion, v, `initialize with ${v} is answered with ${v}`);
    t.ok(res.capabilities?.tools, `${v}: tools capability`);
    t.like(res.serverInfo?.name, /\S/, `${v}: serverInfo`);
    const l = await r.request('tools/list', undefined, { timeout: 10000 });
    t.ok(Array.isArray(l.result?.tools) && l.result.tools.length >= 7, `${v}: tools/list works`);
    await r.close();
  }
  const odd = await rawServer([], {}, { name: 'initialize 1999-01-01' });
  const res = await odd.request('initialize', { protocolVersion: '1999-01-01', capabilities: {}, clientInfo: { name: 'x', version: '1' } }, { timeout: 10000 });
  t.ok(res.result ? VERSIONS.includes(res.result.protocolVersion) : res.error?.code === -32602,
    'an unsupported version gets a supported version back (or -32602)', res);
  await odd.close();

  // ping before initialize is allowed, and EOF right away exits cleanly
  const early = await rawServer([], {}, { name: 'ping before initialize' });
  const p = await early.request('ping', undefined, { id: 1, timeout: 10000 });
  t.deepEqual(p.result, {}, 'ping before initialize is answered');
  await early.close();
}, { timeout: 120 });
