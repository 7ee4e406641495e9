package api

// MCP is the Model Context Protocol endpoint: the streamable HTTP transport of `cordon
// mcp`'s server (docs/mcp.md), each MCP session one session of the caller's tenant.
// Its bodies are MCP's JSON-RPC messages, not this API's types; its errors before
// the MCP server has the request (authentication, a session of another tenant, a
// quota) are [Error]s like every route's.
const MCP = Prefix + "/mcp"

// Media types of the MCP endpoint's answers: a JSON-RPC message, or a stream of them
// as server-sent events.
const (
	MCPStream = "text/event-stream"
)

var mcpRoutes = []Route{
	{Method: "POST", Path: MCP, Role: RoleAgent, Summary: "MCP (streamable HTTP): a JSON-RPC message; an initialize without Mcp-Session-Id starts a session of the tenant (query: workspace, pool, backend, stage)",
		RawRequest: JSON, RawResponse: MCPStream, Held: true},
	{Method: "GET", Path: MCP, Role: RoleAgent, Summary: "MCP (streamable HTTP): the stream of the server's messages for the Mcp-Session-Id session",
		RawResponse: MCPStream, Held: true},
	{Method: "DELETE", Path: MCP, Role: RoleAgent, Summary: "MCP (streamable HTTP): end the Mcp-Session-Id session; its session is stopped and its log sealed",
		Held: true},
}
