package monitor

import (
	"reflect"
	"testing"

	"github.com/cordonhq/cordon/internal/event"
)

// alertOf is the Alert an event body carries (tests read alerts back from events).
func alertOf(b event.SyscallAlertBody) Alert {
	return Alert{
		PID: b.PID, PPID: b.PPID, UID: b.UID, Comm: b.Comm, Cgroup: b.Cgroup, Syscall: b.Syscall,
		Path: b.Path, Access: b.Access, Addr: b.Addr, Argv: b.Argv, Detail: b.Detail,
		Rule: Rule(b.Rule), Category: b.Category, Reason: b.Reason, Action: Action(b.Action),
	}
}

// TestAlertBodyCarriesEveryField: the syscall.alert body has a field for each of
// Alert's, in the same order, and Alert.Body fills every one of them.
func TestAlertBodyCarriesEveryField(t *testing.T) {
	at, bt := reflect.TypeFor[Alert](), reflect.TypeFor[event.SyscallAlertBody]()
	if at.NumField() != bt.NumField() {
		t.Fatalf("Alert has %d fields, its body %d", at.NumField(), bt.NumField())
	}
	var a Alert
	av := reflect.ValueOf(&a).Elem()
	for i := range at.NumField() {
		if at.Field(i).Name != bt.Field(i).Name {
			t.Errorf("field %d: Alert.%s, body.%s", i, at.Field(i).Name, bt.Field(i).Name)
		}
		fill(t, av.Field(i))
	}
	body := reflect.ValueOf(a.Body())
	for i := range bt.NumField() {
		if body.Field(i).IsZero() {
			t.Errorf("Alert.Body leaves %s empty", bt.Field(i).Name)
		}
	}
	if got := alertOf(a.Body()); !reflect.DeepEqual(got, a) {
		t.Errorf("round trip: got %+v; want %+v", got, a)
	}
}

// fill sets v to a non-zero value of its kind.
func fill(t *testing.T, v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Int:
		v.SetInt(1)
	case reflect.Uint64:
		v.SetUint(1)
	case reflect.Slice:
		v.Set(reflect.ValueOf([]string{"x"}))
	default:
		t.Fatalf("fill: no value for %s", v.Type())
	}
}
