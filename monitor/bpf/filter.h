// SPDX-License-Identifier: (MIT OR GPL-2.0-only)
/*
 * Filling an event from a syscall's arguments, the pending table for strings not yet
 * faulted in, and the in-kernel filter that drops opens the run's profile allows.
 * Included once, by monitor.c.
 */
#pragma once


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
	__u32 slot = w->run->slot;
	void *trie = bpf_map_lookup_elem(&filters, &slot);
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
