/* SPDX-License-Identifier: (MIT OR GPL-2.0-only) */
/*
 * The few kernel types cordon's monitor reads, declared by hand with
 * preserve_access_index so that every field access is a CO-RE relocation resolved
 * against the running kernel's BTF at load time. Only the fields used are declared;
 * their order and offsets here do not matter. This replaces a vmlinux.h generated from
 * one machine's kernel, which would make the generated code depend on where it was
 * generated.
 */
#ifndef CORDON_KERNEL_H
#define CORDON_KERNEL_H

typedef signed char __s8;
typedef unsigned char __u8;
typedef short __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
#define true 1
#define false 0
#define NULL ((void *)0)

/* UAPI constants (stable ABI). */
enum {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_ARRAY_OF_MAPS = 12,
	BPF_MAP_TYPE_HASH_OF_MAPS = 13,
	BPF_MAP_TYPE_LPM_TRIE = 11,
	BPF_MAP_TYPE_RINGBUF = 27,
};
enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
	BPF_EXIST = 2,
};
#define EEXIST 17
#define EFAULT 14
enum {
	BPF_F_NO_PREALLOC = 1,
};
enum {
	BPF_RB_NO_WAKEUP = 1,
	BPF_RB_FORCE_WAKEUP = 2,
	BPF_RB_AVAIL_DATA = 0,
};
#define AT_FDCWD -100

/* The context of a syscalls:sys_enter_* tracepoint (its format file): 8 bytes of common
 * fields, the syscall number, then one 8-byte slot per argument. A program may only
 * read as many arguments as its syscall has. */
struct sys_enter {
	__u64 common;
	__s64 nr;
	__u64 args[6];
};

/* The context of a syscalls:sys_exit_* tracepoint: the common fields, the syscall
 * number, its return value. */
struct sys_exit {
	__u64 common;
	__s64 nr;
	__s64 ret;
};

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct qstr {
	union {
		struct {
			__u32 hash;
			__u32 len;
		};
		__u64 hash_len;
	};
	const unsigned char *name;
};

struct super_block {
	__u32 s_dev;
};

struct inode {
	unsigned long i_ino;
	struct super_block *i_sb;
	unsigned int i_nlink;
};

struct dentry {
	struct dentry *d_parent;
	struct qstr d_name;
};

struct vfsmount {
	struct dentry *mnt_root;
};

struct mount {
	struct mount *mnt_parent;
	struct dentry *mnt_mountpoint;
	struct vfsmount mnt;
};

struct path {
	struct vfsmount *mnt;
	struct dentry *dentry;
};

struct file {
	struct path f_path;
	struct inode *f_inode;
};

struct fdtable {
	unsigned int max_fds;
	struct file **fd;
};

struct files_struct {
	struct fdtable *fdt;
};

struct fs_struct {
	struct path pwd;
};

struct mm_struct {
	unsigned long arg_start;
	unsigned long arg_end;
};

struct ns_common {
	unsigned int inum;
};

struct pid_namespace {
	struct ns_common ns;
};

struct upid {
	int nr;
	struct pid_namespace *ns;
};

struct pid {
	unsigned int level;
	struct upid numbers[1];
};

struct task_struct {
	int pid;
	int tgid;
	struct task_struct *real_parent;
	struct task_struct *group_leader;
	struct pid *thread_pid;
	struct mm_struct *mm;
	struct fs_struct *fs;
	struct files_struct *files;
};

struct linux_binprm {
	struct file *file;
	const char *filename;
};


#pragma clang attribute pop

#endif
