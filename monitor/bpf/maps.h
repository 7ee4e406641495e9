// SPDX-License-Identifier: (MIT OR GPL-2.0-only)
/*
 * What the monitor's programs share with user space: the sizes, the event layout and
 * the maps (runs, claims, rings, filters). Included once, by monitor.c.
 */
#pragma once

#define SLOT 4096             /* bytes per string, NUL included */
#define SLOT_MASK (SLOT - 1)
#define NAME_MASK 255         /* NAME_MAX */
#define MAX_DEPTH 48          /* path components walked */
#define SOCKADDR_MAX 128      /* sizeof(struct sockaddr_storage) */

/* Syscalls, as user space names them (monitor/syscalls.go). */
enum sc {
	SC_EXECVE = 1,
	SC_EXECVEAT,
	SC_OPEN,
	SC_OPENAT,
	SC_OPENAT2,
	SC_CREAT,
	SC_CONNECT,
	SC_PTRACE,
	SC_MOUNT,
	SC_UMOUNT,
	SC_FSOPEN,
	SC_FSMOUNT,
	SC_MOVE_MOUNT,
	SC_OPEN_TREE,
	SC_PIVOT_ROOT,
	SC_UNSHARE,
	SC_SETNS,
	SC_BPF,
	SC_INIT_MODULE,
	SC_FINIT_MODULE,
	SC_KEXEC_LOAD,
	SC_KEXEC_FILE_LOAD,
	SC_KEYCTL,
	SC_ADD_KEY,
	SC_REQUEST_KEY,
	SC_OPEN_BY_HANDLE_AT,
	SC_MAX,
};

/* Event flags. */
enum ef {
	EF_TRUNC = 1,    /* a string was cut at SLOT bytes, or a path at MAX_DEPTH */
	EF_FAULT = 2,    /* a string could not be read */
	EF_RELATIVE = 4, /* open: str[1] is the directory a relative str[0] is resolved in */
	EF_UNWATCHED = 8, /* unreadable, and no room to read it at exit: reported, not dropped */
};

/*
 * One event: a fixed header and up to three strings packed one after the other in
 * data (str[i] is len[i] bytes, no NUL). Only the header and the used part of data
 * go into the ring buffer. Layout mirrored in monitor/record.go.
 *
 *   exec:    args = {inode, kernel dev, nlink}; str = {filename, argv (NUL-separated), resolved path}
 *   open*:   args = {flags, dfd, mode, resolve}; str = {path, directory of a relative path}
 *   connect: args = {fd, addrlen};              str = {raw sockaddr}
 *   others:  args = the syscall's arguments;    str = its string arguments
 */
struct event {
	__u64 cgroup;
	__u64 args[6];
	__u32 pid;  /* thread group id, host pid namespace */
	__u32 tid;
	__u32 ppid;
	__u32 uid;
	__u16 sc;   /* enum sc */
	__u16 flags;
	__u16 len[3];
	__u16 pad;
	char comm[16];
	__u32 pad2;
	__u64 ticket; /* the run's ticket (struct run): user space drops a record not its own */
	__u64 run;    /* the run's cgroup id, as the task's own ancestry matched it (watching):
		       * never read from the run's entry, which the kernel may hand to the
		       * next run while a program still holds it; user space drops a record
		       * whose run is not its own */
	char data[3 * SLOT];
};

struct walkbuf {
	char b[2 * SLOT];
};

#define MAX_LEVEL 16  /* cgroup depths a run's cgroup may have: 1..MAX_LEVEL-1 */
#define MAX_RUNS 1024 /* runs monitored at once on the host */
#define MAX_SLOTS MAX_RUNS /* ring buffer and filter pairs (slots) kept for them */

/* One registered run, keyed by its cgroup v2 id in `runs`. Written by user space at
 * registration; the programs only add to lost. Layout mirrored in monitor/pin_linux.go. */
struct run {
	__u64 lost;        /* events dropped: the run's ring buffer was full */
	__u64 filtered;    /* opens not sent: the run's path filter says they deviate from nothing */
	__u32 level;       /* depth of the cgroup below the v2 root */
	__u32 host_pidns;  /* nested: inode of cordon's pid namespace, else 0 */
	__u64 owner_start; /* owner: the cordon reading the ring buffer (internal/owner.Process) */
	__u32 owner_pid;
	__u32 owner_pidns;
	__u64 wake_ns;     /* opens and connects wake the reader at most once per wake_ns (0: always) */
	__u64 woken;       /* bpf_ktime_get_ns of the last wakeup the programs sent */
	__u64 ticket;      /* chosen by user space at each claim, copied into every event */
	__u32 slot;        /* the run's ring buffer and filter: rings[slot], filters[slot] */
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_RUNS);
	__type(key, __u64);
	__type(value, struct run);
} runs SEC(".maps");

/* levels[0] has bit l set when some registered run's cgroup is at depth l: the
 * programs look up only those ancestors, and nothing at all when no run is on. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} levels SEC(".maps");

/*
 * The slots: a ring buffer and a path filter each, made once and kept for the runs that
 * follow (adding or removing an entry of a map of maps waits for a grace period of RCU
 * in the kernel; a run that claims a slot already there changes neither map). A run
 * claims a free slot in `claims` (user space, BPF_NOEXIST) and names it in its entry
 * of `runs`. A run that floods its buffer loses its own events, never another run's.
 */
struct claim {
	__u64 owner_start; /* owner: the cordon holding the slot (internal/owner.Process) */
	__u32 owner_pid;
	__u32 owner_pidns;
	__u64 cgroup;      /* the run it holds the slot for */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SLOTS);
	__type(key, __u32);
	__type(value, struct claim);
} claims SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, MAX_SLOTS);
	__type(key, __u32);
	__array(values, struct {
		__uint(type, BPF_MAP_TYPE_RINGBUF);
		__uint(max_entries, 4 << 20);
	});
} rings SEC(".maps");

/*
 * Each slot's path filter, filled by the run that claims the slot: an LPM trie whose keys are the
 * profile's rule paths with a '/' appended ("/usr/"), and whose value says which
 * accesses under that path deviate from nothing (FILTER_READ, FILTER_WRITE). The
 * longest prefix is the rule user space would pick, so an open whose clean absolute
 * path matches an entry allowing its access is one the profile would not alert on and
 * is not sent. Built by user space from the profile (monitor/filter.go); a run
 * without one has every open sent.
 */
#define KEY_DATA 256
struct pathkey {
	__u32 prefixlen; /* bits of data compared */
	char data[KEY_DATA];
};

/* Where a key is built: a relative path is copied after its directory, at an offset
 * the verifier only knows to be below KEY_DATA, hence the spill. */
struct keyscratch {
	struct pathkey k;
	char spill[KEY_DATA];
};

enum filter_bits {
	FILTER_READ = 1,
	FILTER_WRITE = 2,
};

struct filter {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 4096);
	__type(key, struct pathkey);
	__type(value, __u8);
	__uint(map_flags, BPF_F_NO_PREALLOC);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, MAX_SLOTS);
	__type(key, __u32);
	__array(values, struct filter);
} filters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct keyscratch);
} keybuf SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct event);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct walkbuf);
} walk SEC(".maps");

/* Force bpf2go to emit Go types for these. */
const struct event *unused_event __attribute__((unused));
const enum sc *unused_sc __attribute__((unused));
const struct run *unused_run __attribute__((unused));
const struct claim *unused_claim __attribute__((unused));
const struct pathkey *unused_pathkey __attribute__((unused)); /* the filter's key, in full */

/* watching is the run a task belongs to: its cgroup id and the run's entry. */
