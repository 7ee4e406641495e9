package api

// Media types of the workspace routes' bodies.
const (
	Tar   = "application/x-tar"
	Patch = "text/x-diff"
)

// workspaceRoutes: the workspaces the server owns for the tenant, under its
// workspace root. {name} is a workspace's name (as StartRequest.Workspace); another
// tenant's is 404.
var workspaceRoutes = []Route{
	{Method: "GET", Path: "/v1/workspaces", Role: RoleAgent, Summary: "the tenant's workspaces", Response: WorkspaceList{}},
	{Method: "PUT", Path: "/v1/workspaces/{name}", Role: RoleAgent, Summary: "make a workspace from a tar (new or empty; bounded, no links out, no special files)", RawRequest: Tar, Response: Workspace{}, Held: true},
	{Method: "GET", Path: "/v1/workspaces/{name}", Role: RoleAgent, Summary: "the workspace as a tar, streamed (links as links, special files left out); 409 while a session runs in it", RawResponse: Tar, Held: true},
	{Method: "DELETE", Path: "/v1/workspaces/{name}", Role: RoleAgent, Summary: "delete a workspace no session runs in", Response: Workspace{}, Held: true},
	{Method: "GET", Path: "/v1/sessions/{id}/patch", Role: RoleAgent, Summary: "the session's changes to its workspace, command by command, as its audit log recorded them (a unified diff)", RawResponse: Patch, Held: true},
}

// Workspace is one workspace of the tenant. Entries and Bytes are what an upload
// unpacked (0 elsewhere).
type Workspace struct {
	Name    string `json:"name"`
	Session string `json:"session,omitempty"` // the running session in it, if any
	Entries int    `json:"entries,omitempty"`
	Bytes   int64  `json:"bytes,omitempty"`
}

// WorkspaceList is GET /v1/workspaces.
type WorkspaceList struct {
	Workspaces []Workspace `json:"workspaces"`
	Quota      int         `json:"quota"` // how many the tenant may keep
}

// GitSource is a start's git repository: cloned into the new session's (empty)
// workspace by the session's first command, through its egress rules and in its audit
// log, and checked out at Commit (HEAD verified to be it).
type GitSource struct {
	URL    string `json:"url"`    // https:// (or http://: the commit pins the content)
	Commit string `json:"commit"` // a full commit id: 40 or 64 lowercase hex digits
}
