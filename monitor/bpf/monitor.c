// SPDX-License-Identifier: (MIT OR GPL-2.0-only)
//go:build ignore

/*
 * cordon's syscall monitor. The programs are loaded and attached once and shared by
 * every monitored run on the host (pinned in bpffs; docs/monitor.md): a run registers
 * its cgroup v2 in `runs` and its own ring buffer in `rings`. Every program first asks
 * whether the current task belongs to a registered run (its cgroup, or a cgroup below
 * it, and, for nested sandboxes, not the sandbox's own machinery); nothing about any
 * other task is read or sent, and a run's events go only to its own ring buffer. An
 * event that does not fit is counted in its run's `lost`.
 *
 * The programs record; they decide nothing. User space compares what they send with
 * the run's profile. Execs are read after the new program is in place
 * (sched_process_exec), everything else at its syscall tracepoint.
 */

#include "kernel.h"
#include "bpf_helpers.h"
#include "bpf_core_read.h"
#include "bpf_tracing.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

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
	char data[3 * SLOT];
};

struct walkbuf {
	char b[2 * SLOT];
};

#define MAX_LEVEL 16  /* cgroup depths a run's cgroup may have: 1..MAX_LEVEL-1 */
#define MAX_RUNS 1024 /* runs monitored at once on the host */

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

/* Each run's own ring buffer, keyed by its cgroup id: a run that floods its buffer
 * loses its own events, never another run's. The size is the run's choice. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, MAX_RUNS);
	__type(key, __u64);
	__array(values, struct {
		__uint(type, BPF_MAP_TYPE_RINGBUF);
		__uint(max_entries, 4 << 20);
	});
} rings SEC(".maps");

/*
 * Each run's path filter, keyed by its cgroup id: an LPM trie whose keys are the
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
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, MAX_RUNS);
	__type(key, __u64);
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
const struct pathkey *unused_pathkey __attribute__((unused)); /* the filter's key, in full */

/* watching is the run a task belongs to: its cgroup id and the run's entry. */
struct watching {
	__u64 cgroup;
	struct run *run;
};

/* nested_machinery reports whether t, in a run of a nested sandbox, is the sandbox's
 * machinery: what runs in cordon's own pid namespace (bwrap building the sandbox) and
 * process 1 of the nested one (cordon's init), every thread of it: the pid compared is
 * the thread group leader's, since a Go init makes its calls (the control socket's
 * connect among them) from whichever thread runs the goroutine. */
static __always_inline bool nested_machinery(struct task_struct *t, __u32 host_pidns)
{
	struct pid *p = BPF_CORE_READ(t, group_leader, thread_pid);
	unsigned int level = BPF_CORE_READ(p, level);
	struct upid *u = (void *)p + bpf_core_field_offset(struct pid, numbers) +
			 (level & 31) * sizeof(struct upid);
	if (BPF_CORE_READ(u, nr) == 1)
		return true;
	return BPF_CORE_READ(u, ns, ns.inum) == host_pidns;
}

/* watched finds the run task t (the current task) is a workload process of: the
 * deepest registered cgroup among its ancestors. */
static __always_inline bool watched(struct task_struct *t, struct watching *w)
{
	__u32 zero = 0;
	__u64 *mask = bpf_map_lookup_elem(&levels, &zero);
	if (!mask || !*mask)
		return false;
	__u64 m = *mask;
	for (int l = MAX_LEVEL - 1; l > 0; l--) {
		if (!(m & (1ULL << l)))
			continue;
		__u64 id = bpf_get_current_ancestor_cgroup_id(l);
		if (!id)
			continue;
		struct run *r = bpf_map_lookup_elem(&runs, &id);
		if (!r || r->level != l)
			continue;
		if (r->host_pidns && nested_machinery(t, r->host_pidns))
			return false;
		w->cgroup = id;
		w->run = r;
		return true;
	}
	return false;
}

/* begin returns the scratch event for a call by the current task when the task is
 * watched (w is then its run), NULL otherwise. The header naming the task is filled
 * only by submit: an open the filter drops never reads it. */
static __always_inline struct event *begin(__u16 sc, struct watching *w)
{
	struct task_struct *t = (void *)bpf_get_current_task();
	if (!watched(t, w))
		return NULL;
	__u32 zero = 0;
	struct event *e = bpf_map_lookup_elem(&scratch, &zero);
	if (!e)
		return NULL;
	e->sc = sc;
	e->flags = 0;
	e->len[0] = e->len[1] = e->len[2] = 0;
	for (int i = 0; i < 6; i++)
		e->args[i] = 0;
	return e;
}

/* header names the current task in e. */
static __always_inline void header(struct event *e)
{
	struct task_struct *t = (void *)bpf_get_current_task();
	__u64 id = bpf_get_current_pid_tgid();
	e->cgroup = bpf_get_current_cgroup_id();
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->ppid = BPF_CORE_READ(t, real_parent, tgid);
	e->uid = (__u32)bpf_get_current_uid_gid();
	bpf_get_current_comm(e->comm, sizeof(e->comm));
}

/*
 * Waking the reader for every event costs a context switch per open. Opens and connects
 * wake it when WAKE_BYTES are waiting, or when the run's last wakeup is wake_ns old;
 * execs and the high-signal syscalls at once. An open sent without a wakeup follows a
 * wakeup less than wake_ns before it, and the reader, after reading what a wakeup
 * announced, polls again within twice wake_ns (monitor_linux.go, read): every event is
 * read within that bound, and a reader with nothing to read sleeps until woken.
 */
#define WAKE_BYTES (64 << 10)

static __always_inline int submit(struct event *e, __u32 off, struct watching *w)
{
	__u64 size = offsetof(struct event, data) + off;
	if (size > sizeof(*e))
		size = sizeof(*e);
	void *ring = bpf_map_lookup_elem(&rings, &w->cgroup);
	if (!ring) { /* the run is unregistering */
		__sync_fetch_and_add(&w->run->lost, 1);
		return 0;
	}
	header(e);
	__u64 now = bpf_ktime_get_ns();
	__u64 wake = BPF_RB_FORCE_WAKEUP;
	if ((e->sc >= SC_OPEN && e->sc <= SC_CONNECT) && now - w->run->woken < w->run->wake_ns &&
	    bpf_ringbuf_query(ring, BPF_RB_AVAIL_DATA) < WAKE_BYTES)
		wake = BPF_RB_NO_WAKEUP;
	else
		w->run->woken = now;
	if (bpf_ringbuf_output(ring, e, size, wake) < 0)
		__sync_fetch_and_add(&w->run->lost, 1);
	return 0;
}

/* put_str copies the NUL-terminated string src (user or kernel memory) into str[i],
 * which starts at off, and returns the offset after it. */
static __always_inline __u32 put_str(struct event *e, int i, __u32 off, const void *src, bool user)
{
	if (off > 2 * SLOT)
		return off;
	long n = user ? bpf_probe_read_user_str(&e->data[off], SLOT, src)
		      : bpf_probe_read_kernel_str(&e->data[off], SLOT, src);
	if (n <= 0) {
		e->flags |= EF_FAULT;
		return off;
	}
	if (n == SLOT)
		e->flags |= EF_TRUNC;
	e->len[i] = n - 1;
	return off + n - 1;
}

/* put_user_bytes copies n bytes of user memory into str[i]. */
static __always_inline __u32 put_user_bytes(struct event *e, int i, __u32 off, const void *src, __u64 n)
{
	if (off > 2 * SLOT)
		return off;
	if (n > SLOT) {
		n = SLOT;
		e->flags |= EF_TRUNC;
	}
	if (bpf_probe_read_user(&e->data[off], n, src) < 0) {
		e->flags |= EF_FAULT;
		return off;
	}
	e->len[i] = n;
	return off + n;
}

struct walk_ctx {
	struct dentry *d;
	struct vfsmount *vm;
	struct mount *mnt;
	struct walkbuf *w;
	__u32 pos; /* the path so far is w->b[pos:SLOT] */
	bool done;
};

/* walk_step prepends one component of the path to c->w, crossing to the parent mount at
 * a mount's root. It returns 1 to stop the loop. */
static long walk_step(__u32 k, struct walk_ctx *c)
{
	/* Locals only: a CO-RE read through c would relocate walk_ctx, a local type. */
	struct dentry *d = c->d;
	struct vfsmount *vm = c->vm;
	struct mount *mnt = c->mnt;
	if (d == BPF_CORE_READ(vm, mnt_root)) {
		struct mount *up = BPF_CORE_READ(mnt, mnt_parent);
		if (up == mnt) {
			c->done = true;
			return 1;
		}
		c->d = BPF_CORE_READ(mnt, mnt_mountpoint);
		c->mnt = up;
		c->vm = (void *)up + bpf_core_field_offset(struct mount, mnt);
		return 0;
	}
	struct dentry *parent = BPF_CORE_READ(d, d_parent);
	if (d == parent) {
		c->done = true;
		return 1;
	}
	__u32 len = BPF_CORE_READ(d, d_name.len) & NAME_MASK;
	__u32 pos = c->pos;
	if (len + 1 > pos)
		return 1;
	pos = (pos - len - 1) & SLOT_MASK;
	struct walkbuf *w = c->w;
	w->b[pos] = '/';
	bpf_probe_read_kernel(&w->b[pos + 1], len, BPF_CORE_READ(d, d_name.name));
	c->pos = pos;
	c->d = parent;
	return 0;
}

/* put_path writes the path of p as the task sees it (walking dentries and mounts up to
 * its mount namespace's root) into str[i]. */
static __always_inline __u32 put_path(struct event *e, int i, __u32 off, const struct path *p)
{
	__u32 zero = 0;
	struct walkbuf *w = bpf_map_lookup_elem(&walk, &zero);
	if (!w || off > 2 * SLOT)
		return off;
	struct walk_ctx c = {.d = BPF_CORE_READ(p, dentry), .vm = BPF_CORE_READ(p, mnt), .w = w, .pos = SLOT};
	c.mnt = (void *)c.vm - bpf_core_field_offset(struct mount, mnt);
	bpf_loop(MAX_DEPTH, walk_step, &c, 0);
	if (!c.done)
		e->flags |= EF_TRUNC;
	__u32 pos = c.pos;
	if (pos >= SLOT) {
		pos = SLOT - 1;
		w->b[pos] = '/';
	}
	__u32 n = SLOT - pos;
	if (n > SLOT)
		n = SLOT;
	bpf_probe_read_kernel(&e->data[off], n, &w->b[pos & SLOT_MASK]);
	e->len[i] = n;
	return off + n;
}

/* dir_of returns the directory a relative path given with dfd is resolved in. */
static __always_inline const struct path *dir_of(long dfd)
{
	struct task_struct *t = (void *)bpf_get_current_task();
	if (dfd == AT_FDCWD) {
		struct fs_struct *fs = BPF_CORE_READ(t, fs);
		return __builtin_preserve_access_index(&fs->pwd);
	}
	if (dfd < 0)
		return NULL;
	struct fdtable *fdt = BPF_CORE_READ(t, files, fdt);
	if ((unsigned long)dfd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	struct file **fds = BPF_CORE_READ(fdt, fd);
	struct file *f = NULL;
	bpf_probe_read_kernel(&f, sizeof(f), &fds[dfd]);
	if (!f)
		return NULL;
	return __builtin_preserve_access_index(&f->f_path);
}

/*
 * Opens and connects are read at syscall entry, from the process's memory. A string on
 * a page that is not faulted in yet cannot be read there (BPF may not fault); such a
 * call is kept in `pending` and read again at syscall exit, after the kernel itself
 * copied it in.
 */
struct pending {
	__u64 args[4];
	__u16 sc;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct pending);
} pending SEC(".maps");

/* npending[0] counts the entries of pending: the exit program, which runs at the exit
 * of every open and connect on the host, looks one up only when there is one. A count
 * is added after its entry and taken off only by the delete that removed it, so it is
 * never below the entries there are. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} npending SEC(".maps");

/* keep_pending keeps the call p of thread tid for its syscall exit. */
static __always_inline bool keep_pending(__u32 tid, struct pending *p)
{
	long err = bpf_map_update_elem(&pending, &tid, p, BPF_NOEXIST);
	if (err == 0) {
		__u32 zero = 0;
		__u64 *n = bpf_map_lookup_elem(&npending, &zero);
		if (n)
			__sync_fetch_and_add(n, 1);
		return true;
	}
	/* an entry the thread left (its exit was not seen) is already counted */
	return err == -EEXIST && bpf_map_update_elem(&pending, &tid, p, BPF_EXIST) == 0;
}

#define RESOLVE_IN_ROOT 0x10 /* openat2: resolve as if the directory were the root */

/* fill reads the arguments of an open or a connect into e; it returns the data size. */
static __always_inline __u32 fill(struct event *e, __u16 sc, const __u64 *a)
{
	if (sc == SC_CONNECT) {
		e->args[0] = a[0];
		e->args[1] = a[2];
		__u64 n = a[2];
		if (n > SOCKADDR_MAX)
			n = SOCKADDR_MAX;
		return put_user_bytes(e, 0, 0, (const void *)a[1], n);
	}
	/* a = {dfd, path, flags or struct open_how *, mode} */
	__u64 flags = a[2], resolve = 0;
	if (sc == SC_OPENAT2) {
		/* struct open_how: {__u64 flags, mode, resolve}, 24 bytes at least */
		__u64 how[3] = {};
		if (bpf_probe_read_user(how, sizeof(how), (void *)a[2]) < 0)
			e->flags |= EF_FAULT;
		flags = how[0];
		resolve = how[2];
	}
	long dfd = (int)a[0]; /* an int: the tracepoint zero-extends it */
	e->args[0] = flags;
	e->args[1] = dfd;
	e->args[2] = a[3];
	e->args[3] = resolve;
	__u32 off = put_str(e, 0, 0, (const char *)a[1], true);
	/* RESOLVE_IN_ROOT resolves even an absolute path below the directory: it is
	 * sent with it (joined, "dir" "/" "/x" is not clean: never filtered) */
	if (e->len[0] > 0 && (e->data[0] != '/' || (resolve & RESOLVE_IN_ROOT))) {
		const struct path *dir = dir_of(dfd);
		if (dir) {
			off = put_path(e, 1, off, dir);
			e->flags |= EF_RELATIVE;
		}
	}
	return off;
}

/* Open flags that make an open a write, as monitor/check.go counts them. */
#define WRITE_FLAGS (03 | 0100 | 01000 | 020000000) /* O_ACCMODE O_CREAT O_TRUNC __O_TMPFILE */

/* clean reports whether the n bytes of d (the path with a '/' appended) are what
 * filepath.Clean leaves alone: no "//", "/./" or "/../" (the appended '/' makes a
 * trailing "/." or "/.." one of them). A bounded loop, not bpf_loop: a callback per
 * byte cost more than the rest of the filter. */
static __always_inline bool clean(const char *d, __u32 n)
{
	for (__u32 i = 0; i < KEY_DATA - 1; i++) {
		if (i + 1 >= n)
			return true;
		if (d[i] != '/')
			continue;
		char c1 = d[(i + 1) & (KEY_DATA - 1)];
		if (c1 == '/')
			return false;
		if (c1 != '.' || i + 2 >= n)
			continue;
		char c2 = d[(i + 2) & (KEY_DATA - 1)];
		if (c2 == '/' || (c2 == '.' && i + 3 < n && d[(i + 3) & (KEY_DATA - 1)] == '/'))
			return false;
	}
	return true;
}

/*
 * filtered reports whether user space would find that the open in e deviates from
 * nothing: its path (a relative one joined to its directory, as user space joins them)
 * is absolute, whole (not cut, not faulted), clean, short enough to be a key, and the
 * run's filter has an entry above it allowing the access. Anything else is sent: the
 * filter only ever drops what the profile allows.
 */
static __always_inline bool filtered(struct event *e, struct watching *w)
{
	if (e->flags & (EF_TRUNC | EF_FAULT | EF_UNWATCHED))
		return false;
	__u32 n = e->len[0], dl = 0;
	if (n == 0)
		return false;
	if (e->flags & EF_RELATIVE) {
		/* str[1], the directory, follows str[0]; "/" is joined without a second '/' */
		dl = e->len[1];
		if (dl == 0 || dl >= KEY_DATA - 1 || e->data[n & SLOT_MASK] != '/')
			return false;
		if (dl > 1)
			dl++;
	} else if (e->data[0] != '/') {
		return false;
	}
	if (n >= KEY_DATA - 1 || dl + n >= KEY_DATA - 1)
		return false;
	void *trie = bpf_map_lookup_elem(&filters, &w->cgroup);
	if (!trie)
		return false;
	__u32 zero = 0;
	struct keyscratch *ks = bpf_map_lookup_elem(&keybuf, &zero);
	if (!ks)
		return false;
	struct pathkey *k = &ks->k;
	if (dl) {
		if (bpf_probe_read_kernel(k->data, e->len[1] & (KEY_DATA - 1), &e->data[n & SLOT_MASK]) < 0)
			return false;
		k->data[(dl - 1) & (KEY_DATA - 1)] = '/';
	}
	if (bpf_probe_read_kernel(&k->data[dl & (KEY_DATA - 1)], n & (KEY_DATA - 1), e->data) < 0)
		return false;
	n = (dl + n) & (KEY_DATA - 1);
	k->data[n] = '/';
	if (!clean(k->data, n + 1))
		return false;
	k->prefixlen = (n + 1) * 8;
	__u8 *v = bpf_map_lookup_elem(trie, k);
	if (!v)
		return false;
	__u8 need = (e->args[0] & WRITE_FLAGS) ? FILTER_WRITE : FILTER_READ;
	if (!(*v & need))
		return false;
	__sync_fetch_and_add(&w->run->filtered, 1);
	return true;
}

/* send submits e unless it is an open the run's filter drops. */
static __always_inline int send(struct event *e, __u32 off, struct watching *w)
{
	if (e->sc != SC_CONNECT && filtered(e, w))
		return 0;
	return submit(e, off, w);
}

static __always_inline int enter(__u16 sc, __u64 a0, __u64 a1, __u64 a2, __u64 a3)
{
	struct watching w;
	struct event *e = begin(sc, &w);
	if (!e)
		return 0;
	struct pending p = {.args = {a0, a1, a2, a3}, .sc = sc};
	__u32 off = fill(e, sc, p.args);
	if (e->flags & EF_FAULT) {
		__u32 tid = (__u32)bpf_get_current_pid_tgid();
		if (keep_pending(tid, &p))
			return 0;
		/* The table is shared by every run: when another filled it, this call is
		 * sent now, marked, and user space reports it instead of skipping it. */
		e->flags |= EF_UNWATCHED;
	}
	return send(e, off, &w);
}

SEC("tracepoint/syscalls/sys_enter_openat")
int tp_openat(struct sys_enter *ctx)
{
	return enter(SC_OPENAT, ctx->args[0], ctx->args[1], ctx->args[2], ctx->args[3]);
}

SEC("tracepoint/syscalls/sys_enter_openat2")
int tp_openat2(struct sys_enter *ctx)
{
	return enter(SC_OPENAT2, ctx->args[0], ctx->args[1], ctx->args[2], 0);
}

/* open(2) and creat(2) exist on some architectures only (x86-64 has them); the loader
 * skips a tracepoint the kernel does not have. */
SEC("tracepoint/syscalls/sys_enter_open")
int tp_open(struct sys_enter *ctx)
{
	return enter(SC_OPEN, (__u64)AT_FDCWD, ctx->args[0], ctx->args[1], ctx->args[2]);
}

SEC("tracepoint/syscalls/sys_enter_creat")
int tp_creat(struct sys_enter *ctx)
{
	/* O_CREAT|O_WRONLY|O_TRUNC */
	return enter(SC_CREAT, (__u64)AT_FDCWD, ctx->args[0], 01101, ctx->args[1]);
}

SEC("tracepoint/syscalls/sys_enter_connect")
int tp_connect(struct sys_enter *ctx)
{
	return enter(SC_CONNECT, ctx->args[0], ctx->args[1], ctx->args[2], 0);
}

/* One exit program for all of the above: it only acts on a call left pending. */
SEC("tracepoint/syscalls/sys_exit_openat")
int tp_exit(struct sys_exit *ctx)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&npending, &zero);
	if (!n || !*n)
		return 0;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct pending *pp = bpf_map_lookup_elem(&pending, &tid);
	if (!pp)
		return 0;
	struct pending p = *pp;
	if (bpf_map_delete_elem(&pending, &tid) == 0)
		__sync_fetch_and_sub(n, 1);
	struct watching w;
	struct event *e = begin(p.sc, &w);
	if (!e)
		return 0;
	__u32 off = fill(e, p.sc, p.args);
	/* Arguments unreadable at exit too: the kernel could not read them either (the
	 * call failed with EFAULT, nothing was opened or connected), or the workload
	 * dropped their memory after the kernel read them, which user space reports. */
	if ((e->flags & EF_FAULT) && ctx->ret == -EFAULT)
		return 0;
	return send(e, off, &w);
}

/* Successful execs, after the new program is in place: the file name as given, the new
 * argv (read from the new process, so not racy) and the file actually executed. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, int old_pid, struct linux_binprm *bprm)
{
	struct watching w;
	struct event *e = begin(SC_EXECVE, &w);
	if (!e)
		return 0;
	__u32 off = put_str(e, 0, 0, BPF_CORE_READ(bprm, filename), false);
	/* execveat with a file descriptor runs "/dev/fd/N[/name]" */
	if (e->len[0] > 8 && e->data[0] == '/' && e->data[1] == 'd' && e->data[2] == 'e' &&
	    e->data[3] == 'v' && e->data[4] == '/' && e->data[5] == 'f' && e->data[6] == 'd' && e->data[7] == '/')
		e->sc = SC_EXECVEAT;
	struct mm_struct *mm = BPF_CORE_READ(p, mm);
	unsigned long start = BPF_CORE_READ(mm, arg_start), end = BPF_CORE_READ(mm, arg_end);
	if (end > start)
		off = put_user_bytes(e, 1, off, (const void *)start, end - start);
	struct file *f = BPF_CORE_READ(bprm, file);
	if (f) {
		off = put_path(e, 2, off, __builtin_preserve_access_index(&f->f_path));
		struct inode *ino = BPF_CORE_READ(f, f_inode);
		e->args[0] = BPF_CORE_READ(ino, i_ino);
		e->args[1] = BPF_CORE_READ(ino, i_sb, s_dev);
		e->args[2] = BPF_CORE_READ(ino, i_nlink);
	}
	return submit(e, off, &w);
}

/*
 * The high-signal rest: every call by the workload is recorded with its arguments and
 * up to three of them read as strings (s0..s2: argument indexes, -1 for none). nargs is
 * how many arguments the syscall has: a tracepoint program may not read past them.
 */
static __always_inline int on_other(struct sys_enter *ctx, __u16 sc, int nargs, int s0, int s1, int s2)
{
	struct watching w;
	struct event *e = begin(sc, &w);
	if (!e)
		return 0;
	if (nargs > 0)
		e->args[0] = ctx->args[0];
	if (nargs > 1)
		e->args[1] = ctx->args[1];
	if (nargs > 2)
		e->args[2] = ctx->args[2];
	if (nargs > 3)
		e->args[3] = ctx->args[3];
	if (nargs > 4)
		e->args[4] = ctx->args[4];
	if (nargs > 5)
		e->args[5] = ctx->args[5];
	__u32 off = 0;
	if (s0 >= 0)
		off = put_str(e, 0, off, (const char *)ctx->args[s0], true);
	if (s1 >= 0)
		off = put_str(e, 1, off, (const char *)ctx->args[s1], true);
	if (s2 >= 0)
		off = put_str(e, 2, off, (const char *)ctx->args[s2], true);
	return submit(e, off, &w);
}

#define OTHER(name, sc, nargs, s0, s1, s2)                        \
	SEC("tracepoint/syscalls/sys_enter_" #name)               \
	int tp_##name(struct sys_enter *ctx)                       \
	{                                                          \
		return on_other(ctx, sc, nargs, s0, s1, s2);       \
	}

OTHER(ptrace, SC_PTRACE, 4, -1, -1, -1)
OTHER(mount, SC_MOUNT, 5, 0, 1, 2)
OTHER(umount, SC_UMOUNT, 2, 0, -1, -1)
OTHER(fsopen, SC_FSOPEN, 2, 0, -1, -1)
OTHER(fsmount, SC_FSMOUNT, 3, -1, -1, -1)
OTHER(move_mount, SC_MOVE_MOUNT, 5, 1, 3, -1)
OTHER(open_tree, SC_OPEN_TREE, 3, 1, -1, -1)
OTHER(pivot_root, SC_PIVOT_ROOT, 2, 0, 1, -1)
OTHER(unshare, SC_UNSHARE, 1, -1, -1, -1)
OTHER(setns, SC_SETNS, 2, -1, -1, -1)
OTHER(bpf, SC_BPF, 3, -1, -1, -1)
OTHER(init_module, SC_INIT_MODULE, 3, 2, -1, -1)
OTHER(finit_module, SC_FINIT_MODULE, 3, 1, -1, -1)
OTHER(kexec_load, SC_KEXEC_LOAD, 4, -1, -1, -1)
OTHER(kexec_file_load, SC_KEXEC_FILE_LOAD, 5, 3, -1, -1)
OTHER(keyctl, SC_KEYCTL, 5, -1, -1, -1)
OTHER(add_key, SC_ADD_KEY, 5, 0, 1, -1)
OTHER(request_key, SC_REQUEST_KEY, 4, 0, 1, -1)
OTHER(open_by_handle_at, SC_OPEN_BY_HANDLE_AT, 3, -1, -1, -1)
