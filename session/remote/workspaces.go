package remote

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/session"
)

// The tenant's workspaces on the server (docs/serve.md, "Workspaces"): listed, filled
// from a tar, read back as one, deleted.

func workspaceCall(method, name string) call {
	return call{method: method, path: api.Prefix + "/workspaces/" + url.PathEscape(name)}
}

// Workspaces lists the tenant's workspaces (GET /v1/workspaces).
func (c *Client) Workspaces(ctx context.Context) ([]api.Workspace, error) {
	var l api.WorkspaceList
	if err := c.do(ctx, call{method: "GET", path: api.Prefix + "/workspaces"}, nil, &l); err != nil {
		return nil, err
	}
	return l.Workspaces, nil
}

// PutWorkspace makes workspace name (new or empty) from the tar archive read from r
// (PUT /v1/workspaces/{name}). A read error of r ends the request without the
// archive's end, so the server never takes part of an archive for the whole.
func (c *Client) PutWorkspace(ctx context.Context, name string, r io.Reader) (api.Workspace, error) {
	var w api.Workspace
	resp, err := c.send(ctx, workspaceCall("PUT", name), r, api.Tar, api.JSON)
	if err != nil {
		return w, err
	}
	defer resp.Body.Close()
	data, err := readAnswer(resp.Body)
	if err == nil {
		err = json.Unmarshal(data, &w)
	}
	if err != nil {
		return w, &session.Error{Code: errdefs.ExitCannotRun, Msg: fmt.Sprintf("server %s: the answer to PUT %s: %v", c.host, name, err)}
	}
	return w, nil
}

// OpenWorkspace opens workspace name as a tar archive, streamed (GET
// /v1/workspaces/{name}); the server answers 409 while a session runs in it. The
// caller closes it; a stream cut short is an error of its reads.
func (c *Client) OpenWorkspace(ctx context.Context, name string) (io.ReadCloser, error) {
	resp, err := c.send(ctx, workspaceCall("GET", name), nil, "", api.Tar)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// DeleteWorkspace deletes workspace name, in which no session may run (DELETE
// /v1/workspaces/{name}).
func (c *Client) DeleteWorkspace(ctx context.Context, name string) (api.Workspace, error) {
	var w api.Workspace
	err := c.do(ctx, workspaceCall("DELETE", name), nil, &w)
	return w, err
}
