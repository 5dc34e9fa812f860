-- wrk script for sandgate's Streamable HTTP endpoint: POSTs one JSON-RPC
-- request per HTTP request over keep-alive connections, rotating over
-- pre-initialised sessions (MCP_SESSIONS: a file of Mcp-Session-Id values,
-- one a line).  MCP_METHOD: ping (default) or tools/list.
local ids = {}
local bodies = {}
local n = 0

function init(args)
  for line in io.lines(os.getenv("MCP_SESSIONS")) do
    if #line > 0 then ids[#ids + 1] = line end
  end
  local method = os.getenv("MCP_METHOD") or "ping"
  -- a thread-unique id prefix keeps request ids distinct
  for i = 1, 64 do
    bodies[i] = string.format('{"jsonrpc":"2.0","id":%d,"method":"%s"}', i, method)
  end
end

function request()
  n = n + 1
  local sid = ids[(n % #ids) + 1]
  return wrk.format("POST", "/mcp", {
    ["Content-Type"] = "application/json",
    ["Accept"] = "application/json, text/event-stream",
    ["Mcp-Session-Id"] = sid,
    ["MCP-Protocol-Version"] = "2025-11-25",
  }, bodies[(n % 64) + 1])
end
