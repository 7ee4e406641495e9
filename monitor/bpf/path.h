// SPDX-License-Identifier: (MIT OR GPL-2.0-only)
/*
 * Reading strings and paths into an event: user and kernel strings, socket addresses,
 * and a struct path walked up to the task's root (bpf_loop). Included once, by monitor.c.
 */
#pragma once


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
