package linux

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// CreateWatch reports the entries created in, moved into, or written and closed in
// directories of one file system, the moment the kernel does it: a fanotify group with
// a file-system mark (FAN_CREATE, FAN_MOVED_TO, FAN_CLOSE_WRITE, directories included)
// reporting each event's directory and name. It needs CAP_SYS_ADMIN. Only names a filter accepts are resolved to
// paths, so the cost of the rest of the file system's activity is one read and one
// comparison per event.
type CreateWatch struct {
	fd      int    // the fanotify group
	mountFD int    // a directory on the watched file system, for open_by_handle_at
	wake    [2]int // a pipe: Close and Changes write to it to wake the reader's poll at once
	keep    func(name string, movedDir bool) bool
	events  chan Created
	stop    chan struct{}
	drain   chan chan struct{} // Changes' requests to read the queue to its end
	once    sync.Once
	done    sync.WaitGroup
	log     *changeLog // nil unless the watch records changes (WatchChanges)
	sent    atomic.Uint64
}

// Created is one entry made in the watched file system: Dir is its directory's path as
// this process sees it, Name the entry's name. Overflow means events were lost.
type Created struct {
	Dir, Name string
	Overflow  bool
}

// WatchCreates watches the file system holding dir for new entries that keep accepts,
// given their name and whether the entry is a directory moved into place. Close stops
// it.
func WatchCreates(dir string, keep func(name string, movedDir bool) bool) (*CreateWatch, error) {
	return watch(dir, keep, 0)
}

// WatchChanges is WatchCreates that also records every change the kernel reports
// below dir, for [CreateWatch.Changes]: one group does both. Past maxPaths paths
// changed (or 262,144, or 16 MiB of their names) it stops recording, and the change
// set is not to be trusted: its memory stays bounded whatever the command does.
func WatchChanges(dir string, keep func(name string, movedDir bool) bool, maxPaths int) (*CreateWatch, error) {
	return watch(dir, keep, max(1, min(maxPaths, maxChangedPaths)))
}

// createMask is what WatchCreates asks for. CLOSE_WRITE too: a file is empty when
// it is created, and its content is what tells (a HEAD naming a ref).
const createMask = unix.FAN_CREATE | unix.FAN_MOVED_TO | unix.FAN_CLOSE_WRITE | unix.FAN_ONDIR

// watch starts a watch; with maxPaths > 0 it records changes (WatchChanges).
func watch(dir string, keep func(name string, movedDir bool) bool, maxPaths int) (*CreateWatch, error) {
	record := maxPaths > 0
	flags := uint(unix.FAN_CLASS_NOTIF | unix.FAN_CLOEXEC | unix.FAN_NONBLOCK | unix.FAN_REPORT_DFID_NAME)
	mask := uint64(createMask)
	var untrusted string
	if record {
		flags |= unix.FAN_REPORT_FID
		mask |= changeMask
	}
	fd, err := unix.FanotifyInit(flags, unix.O_RDONLY|unix.O_CLOEXEC)
	if err != nil && record {
		// An older kernel: the creates alone, and no change set.
		untrusted = fmt.Sprintf("fanotify_init with FAN_REPORT_FID: %v", err)
		flags, mask = flags&^unix.FAN_REPORT_FID, createMask
		fd, err = unix.FanotifyInit(flags, unix.O_RDONLY|unix.O_CLOEXEC)
	}
	if err != nil {
		return nil, fmt.Errorf("fanotify_init: %w", err)
	}
	if err := unix.FanotifyMark(fd, unix.FAN_MARK_ADD|unix.FAN_MARK_FILESYSTEM, mask, unix.AT_FDCWD, dir); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("fanotify_mark %s: %w", dir, err)
	}
	// open_by_handle_at wants a real descriptor here, not an O_PATH one (EBADF).
	mfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	w := &CreateWatch{fd: fd, mountFD: mfd, keep: keep, events: make(chan Created, 64), stop: make(chan struct{}), drain: make(chan chan struct{}, 1)}
	if record {
		if w.log, err = newChangeLog(mfd, untrusted, maxPaths); err != nil {
			unix.Close(fd)
			unix.Close(mfd)
			return nil, err
		}
	}
	if err := unix.Pipe2(w.wake[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		unix.Close(fd)
		unix.Close(mfd)
		return nil, err
	}
	w.done.Add(1)
	go w.loop()
	return w, nil
}

// Events delivers what was created, in order; it is closed after Close.
func (w *CreateWatch) Events() <-chan Created { return w.events }

// Unmark stops the kernel from reporting anything more: it removes the group's
// file-system mark. Events already queued are still delivered until Close. It must
// not be called once Close has begun. The kernel retires the mark in the background,
// after a grace period of SRCU: a Close a millisecond or more later finds nothing left
// to wait for, where the Close of a group still marked (or unmarked just before) waits
// for that grace period itself (5-16 ms on the 2-core VM of the benchmarks).
func (w *CreateWatch) Unmark() error {
	if err := unix.FanotifyMark(w.fd, unix.FAN_MARK_FLUSH|unix.FAN_MARK_FILESYSTEM, 0, unix.AT_FDCWD, "/"); err != nil {
		return fmt.Errorf("fanotify_mark flush: %w", err)
	}
	return nil
}

// Close stops the watch and waits for its reader. It is idempotent.
func (w *CreateWatch) Close() {
	w.once.Do(func() {
		close(w.stop)
		_, _ = unix.Write(w.wake[1], []byte{0})
		w.done.Wait()
		closeInKernel(w.fd)
		for _, fd := range []int{w.mountFD, w.wake[0], w.wake[1]} {
			unix.Close(fd)
		}
	})
}

// closeInKernel closes fd so that the file's release runs in a kernel worker rather
// than in this process. Releasing a fanotify group waits for its marks to be retired,
// a grace period of SRCU (under 1 ms when the host's file systems are idle, 10-15 ms
// once anything on them is busy, as the diff that ends a run keeps them), and a close
// in this process, or its exit, would wait for it. fd is sent, with the receiving end
// of a socket pair, into that very pair, and both ends are closed: the descriptors in
// flight form a cycle that only the kernel's collector of in-flight descriptors frees,
// which since Linux 6.10 runs as a work item; on an older kernel it runs in the thread
// that closes the last end, and this costs what a close does. Either way nothing is
// left open: the collector is scheduled by the close of a socket while descriptors are
// in flight. On any failure fd is closed as usual.
func closeInKernel(fd int) {
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		unix.Close(fd)
		return
	}
	err = unix.Sendmsg(sp[0], []byte{0}, unix.UnixRights(fd, sp[1]), nil, 0)
	unix.Close(fd) // the last reference, unless the message holds one
	unix.Close(sp[1])
	unix.Close(sp[0])
	_ = err
}

// loop reads events until Close, which wakes its poll through the pipe.
func (w *CreateWatch) loop() {
	defer w.done.Done()
	defer close(w.events)
	buf := make([]byte, 64<<10)
	pfd := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}, {Fd: int32(w.wake[0]), Events: unix.POLLIN}}
	for {
		select {
		case <-w.stop:
			return
		case ack := <-w.drain:
			w.readAll(buf)
			close(ack)
			continue
		default:
		}
		if n, _ := unix.Poll(pfd, -1); n <= 0 || pfd[0].Revents&unix.POLLIN == 0 { // EINTR, or the wake
			if pfd[1].Revents&unix.POLLIN != 0 {
				var b [16]byte
				_, _ = unix.Read(w.wake[0], b[:])
			}
			continue
		}
		w.readOnce(buf)
	}
}

// readOnce reads and handles what the queue holds, up to len(buf) bytes; false when
// it is empty.
func (w *CreateWatch) readOnce(buf []byte) bool {
	n, err := unix.Read(w.fd, buf)
	switch {
	case err == unix.EAGAIN || err == unix.EINTR:
		return err == unix.EINTR
	case err != nil:
		// The events of this read are lost: nothing it recorded can be trusted.
		if w.log != nil {
			w.log.distrust(fmt.Sprintf("reading the fanotify queue: %v", err))
		}
		return false
	case n <= 0:
		return false
	}
	w.parse(buf[:n])
	return true
}

// readAll reads the queue to its end.
func (w *CreateWatch) readAll(buf []byte) {
	for w.readOnce(buf) {
	}
}

// parse handles one read's worth of events.
func (w *CreateWatch) parse(b []byte) {
	const metaLen = int(unsafe.Sizeof(unix.FanotifyEventMetadata{}))
	for len(b) >= metaLen {
		evLen := int(binary.NativeEndian.Uint32(b[0:4]))
		if evLen < metaLen || evLen > len(b) {
			return
		}
		mask := binary.NativeEndian.Uint64(b[8:16])
		if w.log != nil {
			if w.log.countIdle() {
				// Idle past its bound: the set is untrusted already (countIdle).
				_ = unix.FanotifyMark(w.fd, unix.FAN_MARK_REMOVE|unix.FAN_MARK_FILESYSTEM, changeMask, w.mountFD, "")
			}
			w.log.event(mask, b[metaLen:evLen])
		}
		if mask&unix.FAN_Q_OVERFLOW != 0 {
			w.send(Created{Overflow: true})
		} else if mask&createMask&^unix.FAN_ONDIR == 0 {
			// Not a creation: recorded above, if at all.
		} else if c, ok := w.event(b[metaLen:evLen], mask&unix.FAN_MOVED_TO != 0 && mask&unix.FAN_ONDIR != 0); ok {
			w.send(c)
		}
		b = b[evLen:]
	}
}

// event decodes a DFID_NAME info record: header, fsid, file handle, then the name.
func (w *CreateWatch) event(info []byte, movedDir bool) (Created, bool) {
	const hdr, fsid = 4, 8
	if len(info) < hdr+fsid+8 || info[0] != unix.FAN_EVENT_INFO_TYPE_DFID_NAME {
		return Created{}, false
	}
	rec := info[:min(int(binary.NativeEndian.Uint16(info[2:4])), len(info))]
	fh := rec[hdr+fsid:]
	size := int(binary.NativeEndian.Uint32(fh[0:4]))
	typ := int32(binary.NativeEndian.Uint32(fh[4:8]))
	if 8+size > len(fh) {
		return Created{}, false
	}
	name := fh[8+size:]
	for i, c := range name {
		if c == 0 {
			name = name[:i]
			break
		}
	}
	if !w.keep(string(name), movedDir) {
		return Created{}, false
	}
	dfd, err := unix.OpenByHandleAt(w.mountFD, unix.NewFileHandle(typ, fh[8:8+size]), unix.O_PATH|unix.O_CLOEXEC)
	if err != nil {
		return Created{}, false // gone already, or another file system's
	}
	defer unix.Close(dfd)
	dir, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(dfd))
	if err != nil || !filepath.IsAbs(dir) {
		return Created{}, false
	}
	return Created{Dir: dir, Name: string(name)}, true
}

func (w *CreateWatch) send(c Created) {
	select {
	case w.events <- c:
		w.sent.Add(1)
	case <-w.stop:
	}
}

// Sent is how many events Events has delivered so far (or holds, buffered).
func (w *CreateWatch) Sent() uint64 { return w.sent.Load() }
