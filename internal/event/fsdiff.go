package event

// FSDiffBody is the body of fs.diff: what one command changed in the workspace.
type FSDiffBody struct {
	Files      int `json:"files"`      // number of changed paths
	Insertions int `json:"insertions"` // added lines over all text files
	Deletions  int `json:"deletions"`  // deleted lines over all text files
	// Changes has one entry per changed path, sorted by path: the first ones only
	// when there are more than the line may itemize (Gap.ChangesOmitted counts the
	// rest; Files is the total).
	Changes []FileChange `json:"changes"`
	// Patch is the unified diff (redacted). When longer than the writer's inline limit it
	// is cut at a line boundary, PatchTruncated is set and the whole patch is in
	// PatchFile, a file next to events.jsonl whose SHA-256 is PatchSHA256.
	Patch          string   `json:"patch"`
	PatchBytes     int      `json:"patch_bytes"` // length of the whole (redacted) patch
	PatchTruncated bool     `json:"patch_truncated,omitempty"`
	PatchFile      string   `json:"patch_file,omitempty"`
	PatchSHA256    string   `json:"patch_sha256,omitempty"`
	Scan           ScanInfo `json:"scan"`
	// Problems lists entries that could not be scanned, one "path: reason" each.
	Problems []string `json:"problems,omitempty"`
	// Between marks a session's changes made outside any command's diff: when no
	// command ran (a background process of an earlier one, the host), or, with
	// During, while the commands named there ran. Such an event names no command.
	Between bool     `json:"between_commands,omitempty"`
	During  []string `json:"during,omitempty"`
	// Quarantined are nested git repositories the change created, renamed by cordon
	// to PATH.cordon-quarantine so that no git on the host obeys their config and
	// hooks (the change itself, the added .git, is in Changes).
	Quarantined []string `json:"quarantined,omitempty"`
	// Gap, when present, says what cordon did not do for this diff because one of
	// the contract's limits.diff bounds stopped it; a reviewer reads it as "this
	// diff is not the whole change".
	Gap *DiffGap `json:"gap,omitempty"`
}

// DiffGap is what a bounded diff left out. Path lists hold the first few only (in
// path order); the counts are the totals.
type DiffGap struct {
	// Unlisted counts workspace entries not recorded, past limits.diff.entries or the
	// deadline (at least this many: a directory not scanned counts as one).
	Unlisted int `json:"unlisted,omitempty"`
	// IncompleteDirs counts directories whose entries were not all recorded, before
	// or after the command; IncompletePaths names the first ones. No path below one
	// is reported added or deleted.
	IncompleteDirs  int      `json:"incomplete_dirs,omitempty"`
	IncompletePaths []string `json:"incomplete_paths,omitempty"`
	// NotCompared counts paths below an incomplete directory seen on one side only.
	NotCompared int `json:"not_compared,omitempty"`
	// NotHashed counts changed files compared by stat data only (size, mtime,
	// inode), not read (limits.diff.hash_file, hash_total or the deadline);
	// NotHashedPaths names the first ones.
	NotHashed      int      `json:"not_hashed,omitempty"`
	NotHashedPaths []string `json:"not_hashed_paths,omitempty"`
	// PatchOmitted counts changes whose patch was left out (limits.diff.patch or the
	// deadline).
	PatchOmitted int `json:"patch_omitted,omitempty"`
	// PatchNotStored is the bytes of patch not stored next to the log because the
	// run's patch storage (limits.diff.patch_run) was spent, or, with NoSpace, because
	// the disk had no room for the patch file.
	PatchNotStored int  `json:"patch_not_stored,omitempty"`
	NoSpace        bool `json:"no_space,omitempty"`
	// ChangesOmitted, ProblemsOmitted and QuarantinedOmitted count the changes,
	// problems and quarantined paths this line does not itemize.
	ChangesOmitted     int `json:"changes_omitted,omitempty"`
	ProblemsOmitted    int `json:"problems_omitted,omitempty"`
	QuarantinedOmitted int `json:"quarantined_omitted,omitempty"`
	// TimedOut says that limits.diff.time passed during the diff.
	TimedOut bool `json:"timed_out,omitempty"`
}

// FileChange is one changed path in an [FSDiffBody].
type FileChange struct {
	Op        string `json:"op"`                   // "added", "deleted", "modified", "renamed" or "touched"
	Path      string `json:"path"`                 // slash-separated, relative to the workspace
	OldPath   string `json:"old_path,omitempty"`   // for "renamed"
	Kind      string `json:"kind"`                 // "text", "binary", "large", "symlink", "special", "unreadable" or "dir"
	OldMode   string `json:"old_mode,omitempty"`   // octal st_mode, such as "100644"
	NewMode   string `json:"new_mode,omitempty"`   // octal st_mode
	OldSize   int64  `json:"old_size"`             // bytes
	NewSize   int64  `json:"new_size"`             // bytes
	OldSHA256 string `json:"old_sha256,omitempty"` // hex digest of the old content
	NewSHA256 string `json:"new_sha256,omitempty"` // hex digest of the new content
	Added     int    `json:"added"`                // lines, text only
	Deleted   int    `json:"deleted"`              // lines, text only
	// OldMtime and NewMtime are the modification times (RFC 3339, UTC) when they
	// differ, on a path present on both sides (never for a directory).
	OldMtime string `json:"old_mtime,omitempty"`
	NewMtime string `json:"new_mtime,omitempty"`
	// Xattrs are the extended attributes added, changed or removed (all of an added
	// path's); their values are never recorded.
	Xattrs []XattrChange `json:"xattrs,omitempty"`
}

// XattrChange is one extended attribute of a [FileChange]. Name "*" with op
// "modified" means the path holds more attributes than are itemized and some changed.
type XattrChange struct {
	Op        string `json:"op"`                   // "added", "deleted" or "modified"
	Name      string `json:"name"`                 // such as "user.comment"
	OldSize   int    `json:"old_size,omitempty"`   // bytes of the old value
	NewSize   int    `json:"new_size,omitempty"`   // bytes of the new value
	OldSHA256 string `json:"old_sha256,omitempty"` // hex digest of the old value
	NewSHA256 string `json:"new_sha256,omitempty"` // hex digest of the new value
}

// ScanInfo says what the snapshot behind an [FSDiffBody] cost.
type ScanInfo struct {
	Files      int   `json:"files"`       // entries in the workspace
	Read       int   `json:"read"`        // entries whose content was (re)read
	DurationMS int64 `json:"duration_ms"` // snapshot wall time
	// Watched: the diff read only the paths the kernel reported changed while the
	// command ran; Walked, when set, says why a run that could have done so walked.
	Watched bool   `json:"watched,omitempty"`
	Walked  string `json:"walked,omitempty"`
	// Unread: the change set showed that nothing changed, and the diff is empty
	// without the workspace read to its end (a direct run with a barrier): Files,
	// Read and DurationMS are unknown, not zero.
	Unread bool `json:"unread,omitempty"`
}
