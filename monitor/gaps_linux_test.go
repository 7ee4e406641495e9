package monitor

import (
	"strconv"
	"strings"
	"testing"
)

// TestLostEventsAlert (red team): a workload that floods its ring buffer makes the
// kernel drop events, a deviation among them; the loss must be an alert in the log,
// not only a counter.
func TestLostEventsAlert(t *testing.T) {
	h := newHarness(t, hostProfile(), Options{ringSize: 4096})
	h.helper("rate", "20000", "0") // opens outside the profile: each one is sent
	h.helper("open", "r:/etc/shadow")
	if h.m.Stats().Lost == 0 {
		t.Fatal("a 4 KiB ring buffer lost nothing of 20,000 events: the test proves nothing")
	}
	if _, ok := h.find(func(a Alert) bool { return a.Category == CatGap && strings.Contains(a.Reason, "lost") }); !ok {
		t.Errorf("events were lost (stats %+v) and no alert says so", h.m.Stats())
	}
	// The log says how many were lost in all, not only how many when the loss was
	// first seen (it said 683 of a flood that lost 18,359): a second flood after the
	// first alert.
	first := h.m.Stats().Lost
	h.helper("rate", "20000", "0")
	h.m.Close()
	if h.m.Stats().Lost == first {
		t.Fatal("the second flood lost nothing: the test proves nothing")
	}
	lost := strconv.FormatUint(h.m.Stats().Lost, 10)
	if _, ok := h.find(func(a Alert) bool {
		return a.Category == CatGap && strings.Contains(a.Reason, ": "+lost+" events were lost")
	}); !ok {
		alerts, _ := h.got()
		t.Errorf("%s events were lost in all and no alert says so: %+v", lost, alerts)
	}
}

// TestAlertCapAlerts (red team): past maxAlerts distinct alerts the rest are counted,
// not logged; a workload that raises that many first must leave an alert saying so.
func TestAlertCapAlerts(t *testing.T) {
	h := newHarness(t, hostProfile(), Options{})
	h.helper("distinct", strconv.Itoa(maxAlerts))
	h.helper("open", "r:/etc/shadow")
	alerts, _ := h.got()
	var capped bool
	for _, a := range alerts {
		capped = capped || (a.Category == CatGap && strings.Contains(a.Reason, "distinct alerts"))
	}
	if !capped || len(alerts) != maxAlerts+1 {
		t.Errorf("%d alerts, cap alert %v; want %d and the cap alert", len(alerts), capped, maxAlerts+1)
	}
}

// TestUnfaultedPathIsRead: a path on a page not faulted in yet cannot be read at
// syscall entry; the call is kept and read at its exit, so the open of a hidden path
// still alerts with its path.
func TestUnfaultedPathIsRead(t *testing.T) {
	h := newHarness(t, hostProfile(), Options{})
	h.helper("unfaulted", "/etc/shadow", "/etc/passwd")
	if _, ok := h.find(func(a Alert) bool { return a.Path == "/etc/shadow" && a.Category == CatReadHidden }); !ok {
		alerts, _ := h.got()
		t.Errorf("an open of /etc/shadow from an unfaulted page: no alert naming it (alerts %+v)", alerts)
	}
}
