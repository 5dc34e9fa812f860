/* The MCP conformance suite's fixture tools (t/conformance/fixtures.c), for
 * the test build t/conformance/sandgate-conformance only. */
#ifndef SG_T_CONFORMANCE_FIXTURES_H
#define SG_T_CONFORMANCE_FIXTURES_H

/* Adds the fixture tools to the tool registry, after sg_tools_init(). */
void sg_fixtures_register(void);

#endif
