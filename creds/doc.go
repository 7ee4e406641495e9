// Package creds issues the task-scoped credentials a contract declares and revokes them
// when the run ends (clause three): a [Broker] the runner calls at start
// ([Broker.IssueAll]) and on every exit path ([Broker.RevokeAll]), providers behind the
// small [Provider] interface (creds/local, creds/command, creds/github, creds/vault), and
// a durable ledger of outstanding grants that [Broker.Reconcile] settles after a crash.
//
// Secret values travel only as [Secret], which redacts itself when printed or logged
// and refuses to be marshalled; the broker registers every value with the audit
// redactor before anyone sees it. See docs/credentials.md.
//
// The API is unstable until v1.
package creds
