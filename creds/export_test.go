package creds

import "time"

// FastRetry shortens a Config's retry waits for tests (test-only knobs stay
// unexported; this file exports them to creds_test only).
func FastRetry(c *Config) {
	c.retry = retryPolicy{attempts: 4, backoff: time.Millisecond, attempt: 2 * time.Second, total: 10 * time.Second, issue: 2 * time.Second}
}

// ExpiryGrace exposes expiryGrace.
const ExpiryGrace = expiryGrace
