package audit

import (
	"encoding/json"
	"fmt"
	"net"
	"path"
	"strconv"
	"strings"

	"github.com/cordonhq/cordon/internal/event"
)

// OCSFVersion is the version of the OCSF schema the ocsf export follows.
const OCSFVersion = "1.3.0"

// ocsfClass is where one event type goes in OCSF: docs/audit.md has this table.
type ocsfClass struct {
	uid      int // class_uid; its category is uid/1000
	name     string
	activity int // activity_id
	act      string
}

// ocsfClasses maps every event type to its OCSF class and activity. fs.diff is
// per change (see fileActivity); a type not here becomes a Base Event (class 0).
var ocsfClasses = map[event.Type]ocsfClass{
	event.RunStart: {6002, "Application Lifecycle", 3, "Start"},
	event.RunEnd:   {6002, "Application Lifecycle", 4, "Stop"},
	event.CmdStart: {1007, "Process Activity", 1, "Launch"},
	event.CmdEnd:   {1007, "Process Activity", 2, "Terminate"},
	event.GateExec: {1007, "Process Activity", 2, "Terminate"},
	event.FSDiff:   {1001, "File System Activity", 99, "Other"},
	event.NetAllow: {4001, "Network Activity", 1, "Open"},
	event.NetDeny:  {4001, "Network Activity", 5, "Refuse"},
	// Denials counted, not itemized: one event with count and start and end times.
	event.NetDenySummary: {4001, "Network Activity", 5, "Refuse"},
	// Allowed attempts counted, not itemized: likewise, with the bytes summed.
	event.NetAllowSummary: {4001, "Network Activity", 1, "Open"},
	event.CredIssue:       {3001, "Account Change", 1, "Create"},
	event.CredRevoke:      {3001, "Account Change", 6, "Delete"},
	event.SyscallAlert:    {2004, "Detection Finding", 1, "Create"},
	event.GateRequest:     {0, "Base Event", 99, "Other"},
	event.GateApprove:     {0, "Base Event", 99, "Other"},
	event.GateDeny:        {0, "Base Event", 99, "Other"},
}

var ocsfCategories = map[int]string{0: "Uncategorized", 1: "System Activity", 2: "Findings",
	3: "Identity & Access Management", 4: "Network Activity", 6: "Application Activity"}

// fileActivity maps a FileChange op to a File System Activity activity.
var fileActivity = map[string]ocsfClass{
	"added": {1001, "File System Activity", 1, "Create"}, "modified": {1001, "File System Activity", 3, "Update"},
	"deleted": {1001, "File System Activity", 4, "Delete"}, "renamed": {1001, "File System Activity", 5, "Rename"},
	"touched": {1001, "File System Activity", 6, "Set Attributes"},
}

// OCSF severity and status ids.
const (
	sevInfo, sevLow, sevMedium, sevHigh = 1, 2, 3, 4
	statusSuccess, statusFailure        = 1, 2
)

var severityNames = map[int]string{sevInfo: "Informational", sevLow: "Low", sevMedium: "Medium", sevHigh: "High"}

// ocsfEvent is one exported OCSF event: the base attributes, the objects cordon fills
// (each only for the classes that have it), and the cordon record in unmapped.
type ocsfEvent struct {
	ClassUID      int    `json:"class_uid"`
	ClassName     string `json:"class_name"`
	CategoryUID   int    `json:"category_uid"`
	CategoryName  string `json:"category_name"`
	ActivityID    int    `json:"activity_id"`
	ActivityName  string `json:"activity_name"`
	TypeUID       int    `json:"type_uid"`
	Time          int64  `json:"time"` // ms since the epoch
	SeverityID    int    `json:"severity_id"`
	Severity      string `json:"severity"`
	StatusID      int    `json:"status_id,omitempty"`
	Status        string `json:"status,omitempty"`
	Message       string `json:"message,omitempty"`
	ActionID      int    `json:"action_id,omitempty"`      // network: 1 Allowed, 2 Denied
	DispositionID int    `json:"disposition_id,omitempty"` // network: 1 Allowed, 2 Blocked
	ExitCode      *int   `json:"exit_code,omitempty"`
	// Count, StartTime and EndTime describe an aggregated event (net.deny.summary,
	// net.allow.summary):
	// how many it stands for and when the first and the last happened (ms).
	Count     int64 `json:"count,omitempty"`
	StartTime int64 `json:"start_time,omitempty"`
	EndTime   int64 `json:"end_time,omitempty"`

	Metadata    ocsfMetadata  `json:"metadata"`
	Device      *ocsfDevice   `json:"device,omitempty"`
	Actor       *ocsfActor    `json:"actor,omitempty"`
	App         *ocsfProduct  `json:"app,omitempty"`
	Process     *ocsfProcess  `json:"process,omitempty"`
	DstEndpoint *ocsfEndpoint `json:"dst_endpoint,omitempty"`
	Traffic     *ocsfTraffic  `json:"traffic,omitempty"`
	File        *ocsfFile     `json:"file,omitempty"`
	User        *ocsfUser     `json:"user,omitempty"`
	FindingInfo *ocsfFinding  `json:"finding_info,omitempty"`
	Unmapped    ocsfUnmapped  `json:"unmapped"`
}

type ocsfMetadata struct {
	Version        string      `json:"version"`
	Product        ocsfProduct `json:"product"`
	UID            string      `json:"uid"`             // RUN:SEQ
	CorrelationUID string      `json:"correlation_uid"` // the run id
	Sequence       int64       `json:"sequence"`
	LogName        string      `json:"log_name"`
}

type ocsfProduct struct {
	Name       string `json:"name"`
	VendorName string `json:"vendor_name,omitempty"`
	Version    string `json:"version,omitempty"`
}

type ocsfDevice struct {
	Hostname string `json:"hostname"`
	TypeID   int    `json:"type_id"` // 0 Unknown
}

type ocsfActor struct {
	User *ocsfUser `json:"user,omitempty"`
}

type ocsfUser struct {
	Name          string `json:"name,omitempty"`
	UID           string `json:"uid,omitempty"`
	CredentialUID string `json:"credential_uid,omitempty"`
}

type ocsfProcess struct {
	UID     string `json:"uid,omitempty"` // RUN:CMD, the command's cmd.start
	PID     int    `json:"pid,omitempty"`
	Name    string `json:"name,omitempty"`
	CmdLine string `json:"cmd_line,omitempty"`
}

type ocsfEndpoint struct {
	Hostname string `json:"hostname,omitempty"`
	IP       string `json:"ip,omitempty"`
	Port     int    `json:"port,omitempty"`
}

type ocsfTraffic struct {
	BytesIn  int64 `json:"bytes_in"`
	BytesOut int64 `json:"bytes_out"`
}

type ocsfFile struct {
	Path   string     `json:"path"`
	Name   string     `json:"name"`
	TypeID int        `json:"type_id"` // 0 Unknown, 1 Regular File, 4 Symbolic Link, 99 Other
	Size   int64      `json:"size,omitempty"`
	Hashes []ocsfHash `json:"hashes,omitempty"`
}

type ocsfHash struct {
	AlgorithmID int    `json:"algorithm_id"` // 3 SHA-256
	Algorithm   string `json:"algorithm"`
	Value       string `json:"value"`
}

type ocsfFinding struct {
	UID   string   `json:"uid"`
	Title string   `json:"title"`
	Desc  string   `json:"desc,omitempty"`
	Types []string `json:"types,omitempty"`
}

// ocsfUnmapped keeps the whole cordon record (its body already redacted), so nothing
// the mapping leaves out is lost.
type ocsfUnmapped struct {
	Cordon struct {
		Type event.Type      `json:"type"`
		Seq  int64           `json:"seq"`
		Cmd  string          `json:"cmd,omitempty"`
		Hash string          `json:"hash"`
		Body json.RawMessage `json:"body"`
	} `json:"cordon"`
}

// ocsfMapper turns records into OCSF events, remembering what later records need:
// who ran the run and where (run.start), and each command's argv (cmd.start).
type ocsfMapper struct {
	start event.RunStartBody
	argv  map[string][]string // by cmd.start seq
}

// base fills the attributes every event has.
func (m *ocsfMapper) base(rec Record, c ocsfClass, sev int) ocsfEvent {
	e := ocsfEvent{ClassUID: c.uid, ClassName: c.name, CategoryUID: c.uid / 1000, CategoryName: ocsfCategories[c.uid/1000],
		ActivityID: c.activity, ActivityName: c.act, TypeUID: c.uid*100 + c.activity, Time: rec.TS.UnixMilli(),
		SeverityID: sev, Severity: severityNames[sev]}
	e.Metadata = ocsfMetadata{Version: OCSFVersion, Product: ocsfProduct{Name: "cordon", VendorName: "cordon", Version: m.start.CordonVersion},
		UID: rec.Run + ":" + strconv.FormatInt(rec.Seq, 10), CorrelationUID: rec.Run, Sequence: rec.Seq, LogName: EventsFile}
	if m.start.Host != "" {
		e.Device = &ocsfDevice{Hostname: m.start.Host}
	}
	if m.start.User != "" {
		e.Actor = &ocsfActor{User: &ocsfUser{Name: m.start.User}}
	}
	e.Unmapped.Cordon.Type, e.Unmapped.Cordon.Seq, e.Unmapped.Cordon.Cmd = rec.Type, rec.Seq, rec.Cmd
	e.Unmapped.Cordon.Hash, e.Unmapped.Cordon.Body = rec.Hash, rec.Body
	return e
}

func (e *ocsfEvent) status(ok bool) {
	e.StatusID, e.Status = statusFailure, "Failure"
	if ok {
		e.StatusID, e.Status = statusSuccess, "Success"
	}
}

// events maps one record: one OCSF event, or one per changed file for fs.diff.
func (m *ocsfMapper) events(rec Record) []ocsfEvent {
	c, ok := ocsfClasses[rec.Type]
	body, err := event.DecodeBody(rec.Type, rec.Body)
	if !ok || err != nil {
		return []ocsfEvent{m.base(rec, ocsfClass{0, "Base Event", 99, "Other"}, sevInfo)}
	}
	e := m.base(rec, c, sevInfo)
	switch b := body.(type) {
	case event.RunStartBody:
		m.start = b
		e = m.base(rec, c, sevInfo) // now with the device and actor
		e.App = &ocsfProduct{Name: "cordon", Version: b.CordonVersion}
		e.Message = "run started: backend " + b.Backend + ", contract " + orBuiltin(b.ContractPath) + ", workspace " + b.Workspace
	case event.RunEndBody:
		e.App = &ocsfProduct{Name: "cordon", Version: m.start.CordonVersion}
		e.ExitCode, e.Message = &b.ExitCode, strings.TrimSpace("run ended: "+b.Reason+" "+b.Detail)
		e.status(b.ExitCode == 0)
	case event.CmdStartBody:
		seq := strconv.FormatInt(rec.Seq, 10)
		m.argv[seq] = b.Argv
		e.Process = m.process(rec.Run+":"+seq, b.Argv)
	case event.CmdEndBody:
		e.Process, e.ExitCode = m.process(m.cmdUID(rec), m.argv[rec.Cmd]), &b.ExitCode
		e.status(b.ExitCode == 0)
	case event.GateExecBody:
		e.Process, e.ExitCode = &ocsfProcess{CmdLine: strings.Join(b.Argv, " ")}, &b.ExitCode
		e.Message = "gate " + b.Gate + " ran on the host"
		e.status(b.ExitCode == 0)
	case event.NetBody:
		m.network(&e, rec.Type, b)
	case event.NetDenySummaryBody:
		e.ActionID, e.DispositionID = 2, 2
		e.SeverityID, e.Severity = sevLow, severityNames[sevLow]
		e.Count, e.StartTime, e.EndTime = b.Denied, b.First.UnixMilli(), b.Last.UnixMilli()
		e.Message = fmt.Sprintf("denied %d more times, not itemized: %s", b.Denied, denySummaryWhy(b))
		e.status(false)
	case event.NetAllowSummaryBody:
		e.ActionID, e.DispositionID = 1, 1
		e.Count, e.StartTime, e.EndTime = b.Allowed, b.First.UnixMilli(), b.Last.UnixMilli()
		e.Traffic = &ocsfTraffic{BytesIn: b.BytesDown, BytesOut: b.BytesUp}
		e.Message = "allowed " + allowSummaryWhat(b)
		e.status(true)
	case event.CredIssueBody:
		e.User, e.Message = &ocsfUser{Name: b.Name, CredentialUID: b.ID}, "credential issued by "+b.Provider
		e.status(true)
	case event.CredRevokeBody:
		e.User, e.Message = &ocsfUser{Name: b.Name, CredentialUID: b.ID}, "credential "+b.Outcome
		e.status(b.Outcome != "failed")
		if b.Alert {
			e.SeverityID, e.Severity = sevHigh, severityNames[sevHigh]
		}
	case event.SyscallAlertBody:
		e.SeverityID, e.Severity = sevMedium, severityNames[sevMedium]
		e.Process = &ocsfProcess{UID: m.cmdUID(rec), PID: b.PID, Name: b.Comm, CmdLine: strings.Join(b.Argv, " ")}
		e.FindingInfo = &ocsfFinding{UID: e.Metadata.UID, Title: b.Syscall + " broke the " + b.Rule + " profile", Desc: b.Reason, Types: []string{b.Rule}}
		e.Message = b.Reason
	case event.FSDiffBody:
		return m.files(rec, b)
	default: // gate.request, gate.approve, gate.deny
		e.Message = string(rec.Type)
		if rec.Type != event.GateRequest {
			e.status(rec.Type == event.GateApprove)
		}
	}
	return []ocsfEvent{e}
}

func orBuiltin(p string) string {
	if p == "" {
		return "(built-in)"
	}
	return p
}

func (m *ocsfMapper) cmdUID(rec Record) string {
	if rec.Cmd == "" {
		return ""
	}
	return rec.Run + ":" + rec.Cmd
}

func (m *ocsfMapper) process(uid string, argv []string) *ocsfProcess {
	p := &ocsfProcess{UID: uid, CmdLine: strings.Join(argv, " ")}
	if len(argv) > 0 {
		p.Name = path.Base(argv[0])
	}
	return p
}

func (m *ocsfMapper) network(e *ocsfEvent, t event.Type, b event.NetBody) {
	e.DstEndpoint = &ocsfEndpoint{Hostname: b.Host, Port: int(b.Port)}
	if host, _, err := net.SplitHostPort(b.Addr); err == nil {
		e.DstEndpoint.IP = host
	}
	e.Traffic = &ocsfTraffic{BytesIn: b.BytesDown, BytesOut: b.BytesUp}
	if t == event.NetDeny {
		e.ActionID, e.DispositionID = 2, 2
		e.SeverityID, e.Severity, e.Message = sevLow, severityNames[sevLow], "denied: "+b.Reason
		e.status(false)
		return
	}
	e.ActionID, e.DispositionID, e.Message = 1, 1, "allowed by "+b.Rule
	e.status(b.Error == "")
}

// files maps an fs.diff to one File System Activity per changed path.
func (m *ocsfMapper) files(rec Record, b event.FSDiffBody) []ocsfEvent {
	var out []ocsfEvent
	for _, ch := range b.Changes {
		c, ok := fileActivity[ch.Op]
		if !ok {
			c = ocsfClasses[event.FSDiff]
		}
		e := m.base(rec, c, sevInfo)
		f := &ocsfFile{Path: ch.Path, Name: path.Base(ch.Path), TypeID: fileType(ch.Kind), Size: ch.NewSize}
		if ch.NewSHA256 != "" {
			f.Hashes = []ocsfHash{{AlgorithmID: 3, Algorithm: "SHA-256", Value: ch.NewSHA256}}
		}
		e.File, e.Process = f, &ocsfProcess{UID: m.cmdUID(rec)}
		if rec.Cmd == "" {
			e.Process = nil
		}
		e.Message = ch.Op + " " + ch.Path
		out = append(out, e)
	}
	return out
}

func fileType(kind string) int {
	switch kind {
	case "text", "binary", "large":
		return 1
	case "dir":
		return 2
	case "symlink":
		return 4
	case "special":
		return 99
	}
	return 0
}
