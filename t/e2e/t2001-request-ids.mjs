// Request ids come back with the same type, value and raw text; id null is an
// invalid request (-32600).
import { t, preflight, rawServer, rawId } from '../lib/sg.mjs';

t.run(async () => {
  await preflight({ docker: false });
  const srv = await rawServer();
  await srv.initialize();

  // raw request texts, so nothing in our JSON encoder can change the id
  const ids = ['42', '"req-abc"', '0', '-1', '9007199254740991'];
  for (const text of ids) {
    const value = JSON.parse(text);
    srv.send(`{"jsonrpc":"2.0","id":${text},"method":"ping"}`);
    const rec = await srv.response(value, 10000);
    if (!t.ok(rec, `ping with id ${text} is answered`)) continue;
    t.is(typeof rec.msg.id, typeof value, `id ${text}: same JSON type (${typeof value})`);
    t.is(rec.msg.id, value, `id ${text}: same value`);
    t.is(rawId(rec.text), text, `id ${text}: same raw text in the response line`);
    t.deepEqual(rec.msg.result, {}, `id ${text}: ping result is {}`);
  }

  // the same ids on a method with a real result
  for (const text of ['"req-abc"', '0', '9007199254740991']) {
    const value = JSON.parse(text);
    srv.send(`{"jsonrpc":"2.0","id":${text},"method":"tools/list"}`);
    const rec = await srv.response(value, 10000);
    if (!t.ok(rec, `tools/list with id ${text} is answered`)) continue;
    t.is(rawId(rec.text), text, `tools/list id ${text}: same raw text`);
    t.ok(Array.isArray(rec.msg.result?.tools), `tools/list id ${text}: has a result`);
  }

  // a string id that looks like a number stays a string
  srv.send('{"jsonrpc":"2.0","id":"7","method":"ping"}');
  const s7 = await srv.response('7', 10000);
  t.ok(s7 && rawId(s7.text) === '"7"', 'string id "7" comes back as the string "7"', { line: s7?.text });
  const n7 = await srv.response(7, 500);
  t.ok(!n7, 'no response with the number 7 for the string id "7"');

  // id null: -32600 with id null
  srv.send('{"jsonrpc":"2.0","id":null,"method":"ping"}');
  const nul = await srv.next((m) => 'error' in m || 'result' in m, 10000);
  t.ok(nul, 'a request with id null gets a response');
  t.is(nul?.msg.error?.code, -32600, 'id null: error -32600 (invalid request)');
  t.is(nul?.msg.id, null, 'id null: the error carries id null');
  t.is(nul && rawId(nul.text), 'null', 'id null: raw id text is null');

  const after = await srv.request('ping', undefined, { id: 'after-null', timeout: 10000 });
  t.deepEqual(after.result, {}, 'the server keeps serving after the invalid request');

  await srv.close();
}, { timeout: 60 });
