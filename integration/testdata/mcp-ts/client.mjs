// The reference TypeScript SDK's MCP client, driving `cordon mcp` over stdio for
// integration/mcp_ts_test.go. It makes the calls an agent makes, then hostile ones, and
// prints one JSON line: the tools listed and, per call, what came back. It judges
// nothing: the Go test asserts the summary.
//
// Usage: node client.mjs OUTSIDE_DIR COMMAND [ARG...]
// COMMAND ARG... is the server (cordon mcp); it runs in this process's directory (the
// workspace) with this process's environment. OUTSIDE_DIR is a host directory out of
// the workspace that holds secret.txt.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [outside, command, ...args] = process.argv.slice(2);
if (!outside || !command) {
  console.error("usage: node client.mjs OUTSIDE_DIR COMMAND [ARG...]");
  process.exit(2);
}

// Nothing may hang: the whole run is bounded, each call too.
const deadline = setTimeout(() => {
  console.error("client: the run took over 4 minutes");
  process.exit(3);
}, 4 * 60 * 1000);
const callTimeout = 60 * 1000;

// keep is the part of a result the summary holds: long strings are cut, their lengths kept.
function keep(res) {
  const text = (res.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("");
  const sc = res.structuredContent ?? {};
  const out = { isError: res.isError === true, text: text.slice(0, 600), textLength: text.length };
  for (const k of ["session", "exit_code", "timed_out", "truncated", "spill_path", "content", "start_line", "end_line"]) {
    if (k in sc) out[k] = typeof sc[k] === "string" ? sc[k].slice(0, 300) : sc[k];
  }
  if (typeof sc.stdout === "string") {
    out.stdout = sc.stdout.slice(0, 300);
    out.stdoutLength = sc.stdout.length;
  }
  if (Array.isArray(sc.entries)) out.entries = sc.entries.map((e) => e.path);
  if (Array.isArray(sc.changed)) out.changed = sc.changed;
  return out;
}

const transport = new StdioClientTransport({
  command,
  args,
  cwd: process.cwd(),
  env: Object.fromEntries(Object.entries(process.env).filter(([, v]) => v !== undefined)),
  stderr: "inherit",
});
const client = new Client({ name: "cordon-ts-test", version: "1" });
const summary = { tools: [], calls: {} };

// call records one call: its result, or the protocol error it threw.
async function call(label, name, args) {
  try {
    const res = await client.callTool({ name, arguments: args }, undefined, { timeout: callTimeout });
    summary.calls[label] = keep(res);
  } catch (err) {
    summary.calls[label] = { threw: String(err?.message ?? err).slice(0, 600) };
  }
  return summary.calls[label];
}

await client.connect(transport);
const listed = await client.listTools(undefined, { timeout: callTimeout });
summary.tools = listed.tools.map((t) => ({
  name: t.name,
  readOnly: t.annotations?.readOnlyHint === true,
  outputSchema: t.outputSchema !== undefined,
}));

// What an agent does.
await call("exec", "exec", { command: "echo hi" });
await call("write_file", "write_file", { path: "ts/a.txt", content: "from the ts client\n" });
await call("read_file", "read_file", { path: "ts/a.txt" });
await call("list_files", "list_files", { recursive: true });
await call("changes", "changes", {});

// Out of the workspace: through .., through links the agent makes itself.
await call("dotdot", "read_file", { path: "../home/.ssh/id_rsa" });
await call("mklinks", "exec", {
  command: `ln -s '${outside}' outlink && ln -s "$HOME/.ssh/id_rsa" keylink && ln -s / rootlink && echo made`,
});
await call("outlink", "read_file", { path: "outlink/secret.txt" });
await call("keylink", "read_file", { path: "keylink" });
await call("rootlink", "read_file", { path: `rootlink${outside}/secret.txt` });
await call("outlink_write", "write_file", { path: "outlink/evil.txt", content: "evil\n" });
await call("abs_write", "write_file", { path: `${outside}/evil2.txt`, content: "evil\n" });
await call("keylink_edit", "edit_file", { path: "keylink", old_text: "secret", new_text: "x" });
// The host's credentials are not in the sandbox's environment.
await call("env", "exec", { command: "env | grep -e aws-secret -e ghp_ -e SSH_AUTH_SOCK; echo done" });
await call("environ", "read_file", { path: "/proc/self/environ" });

// Arguments no schema allows, NUL, binary, a write over the cap, an output over it.
await call("bad_type", "exec", { command: 42 });
await call("no_tool", "no_such_tool", {});
await call("nul", "read_file", { path: "a\u0000b" });
await call("nul_exec", "exec", { command: "echo a\u0000b" });
await call("binary", "read_file", { path: "bin.dat" });
await call("huge_write", "write_file", { path: "huge", content: "h".repeat(9 << 20) });
await call("long_path", "read_file", { path: "a".repeat(5000) });
await call("hang", "exec", { command: "sleep 600", timeout_seconds: 1 });
// Calls at once, as an agent that does not wait: each gets its own answer.
await Promise.all([0, 1, 2, 3].map((i) => call(`parallel${i}`, "exec", { command: `echo p${i}` })));
const big = await call("huge_exec", "exec", { command: "yes cordon | head -c 3000000", max_output_chars: 1000 });
if (big.spill_path) {
  await call("spill_read", "read_file", { path: big.spill_path, offset: 100000, limit: 2 });
}
// The connection still answers after all that.
await call("after", "exec", { command: "echo still" });

await client.close();
clearTimeout(deadline);
process.stdout.write(JSON.stringify(summary) + "\n");
