package runner

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestCleanupsReverseOrderAllStepsOnce(t *testing.T) {
	var c cleanups
	var order []string
	step := func(name string, err error) {
		c.add(name, func(context.Context) error { order = append(order, name); return err })
	}
	step("run directory", nil)
	step("egress proxy", errors.New("boom"))
	step("sandbox", nil)
	errs := c.release(context.Background())
	if got := strings.Join(order, ","); got != "sandbox,egress proxy,run directory" {
		t.Fatalf("undo order %s, want the reverse of acquisition", got)
	}
	if len(errs) != 1 || errs[0].Error() != "egress proxy: boom" {
		t.Fatalf("errors %v, want the one failed step named", errs)
	}
	if errs := c.release(context.Background()); len(errs) != 0 || len(order) != 3 {
		t.Fatalf("second release ran steps again: %v %v", order, errs)
	}
}
