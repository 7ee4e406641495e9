package ctl

// Network is the control socket's type: SOCK_SEQPACKET, one message a packet.
const Network = "unixpacket"
