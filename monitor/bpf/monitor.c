// SPDX-License-Identifier: (MIT OR GPL-2.0-only)
//go:build ignore

/*
 * cordon's syscall monitor. The programs are loaded and attached once and shared by
 * every monitored run on the host (pinned in bpffs; docs/monitor.md): a run claims a
 * slot (a ring buffer and a path filter kept between runs) and registers its cgroup v2
 * in `runs`, naming the slot. Every program first asks
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
#include "maps.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

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
	__u32 slot = w->run->slot;
	void *ring = bpf_map_lookup_elem(&rings, &slot);
	if (!ring) { /* not a slot user space made: never so for a registered run */
		__sync_fetch_and_add(&w->run->lost, 1);
		return 0;
	}
	header(e);
	e->ticket = w->run->ticket;
	e->run = w->cgroup;
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
#include "path.h"
#include "filter.h"


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
