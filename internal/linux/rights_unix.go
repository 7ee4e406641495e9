//go:build unix

package linux

import "golang.org/x/sys/unix"

// RightsSpace is the size of a control-message buffer that holds n descriptors
// (SCM_RIGHTS).
func RightsSpace(n int) int { return unix.CmsgSpace(n * 4) }

// UnixRights encodes fds as the control message that passes them over a unix socket.
func UnixRights(fds ...int) []byte { return unix.UnixRights(fds...) }

// ParseRights decodes the descriptors that the control messages in oob carry and marks
// each close-on-exec. A message that carries no descriptors is skipped.
func ParseRights(oob []byte) ([]int, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			unix.CloseOnExec(fd)
		}
		out = append(out, fds...)
	}
	return out, nil
}
