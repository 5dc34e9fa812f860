// The audit writer never wedges.  A flush (sandbox_audit_query) that came
// while a batch was being written once left the writer's wake-up flag set
// on an empty queue: every later kick was swallowed, the next query waited
// forever, and the server could not be stopped.  The sequence that showed
// it, three times in a row, each reply awaited: help, query, help, query;
// then many queries from concurrent sessions; stdin EOF still ends the
// server at once.
import { t, sdkClient } from '../lib/sg.mjs';

const SECOND = { timeout: 1000 };

t.run(async () => {
  for (let round = 1; round <= 3; round++) {
    const srv = await sdkClient([], {}, { name: `round ${round}` });
    await srv.tool('sandbox_env', { action: 'help' }, SECOND);
    const q1 = await srv.tool('sandbox_audit_query', { tail: 1 }, SECOND);
    t.is(q1.records.length, 1, `round ${round}: the first query answers within a second, with the help row`);
    await srv.tool('sandbox_env', { action: 'help' }, SECOND);
    const q2 = await srv.tool('sandbox_audit_query', { tail: 1 }, SECOND);
    t.is(q2.records[0]?.tool, 'sandbox_env', `round ${round}: the second query answers within a second too, with the second help row`);
    const q3 = await srv.tool('sandbox_audit_query', { tail: 10 }, SECOND);
    // the rounds share one audit database: two more help rows each round
    t.deepEqual(q3.records.map((r) => r.action), Array(2 * round).fill('help'),
      `round ${round}: every row was written (queries are not rows of their own)`);
    await srv.close(2000);
  }

  // Queries and rows from several clients at once for a while.
  const servers = await Promise.all([1, 2, 3, 4].map((i) => sdkClient([], {}, { name: `busy ${i}` })));
  const until = Date.now() + 8000;
  let queries = 0;
  await Promise.all(servers.flatMap((srv) => [0, 1, 2, 3].map(async () => {
    while (Date.now() < until) {
      await srv.tool('sandbox_env', { action: 'help' }, { timeout: 5000 });
      await srv.tool('sandbox_audit_query', { tail: 3 }, { timeout: 5000 });
      queries++;
    }
  })));
  t.cmp(queries, '>', 50, `${queries} queries from 16 concurrent callers all answered`);
  const t0 = Date.now();
  for (const srv of servers) await srv.close(2000);
  t.cmp(Date.now() - t0, '<', 8000, 'and stdin EOF still ends every server within 2 s');
}, { timeout: 120 });
