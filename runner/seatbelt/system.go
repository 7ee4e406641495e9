package seatbelt

// What macOS programs need beyond the contract's paths. Each entry says why it is here;
// the profile prints that beside it. None is measured on a Mac yet (docs/backends.md):
// the macOS CI job (deploy/github/seatbelt.yml) is where a missing one shows.

// sysPath is a host path with the reason the profile grants it.
type sysPath struct {
	path string
	why  string
}

// systemRead are read (and executed, and mapped executable) by the dynamic loader, the
// system frameworks and the shims in /usr/bin, whatever the contract says.
var systemRead = []sysPath{
	{"/usr/lib", "libSystem and the other system libraries; dyld itself is /usr/lib/dyld"},
	{"/System/Library", "the system frameworks (and, before macOS 13, the dyld shared cache)"},
	{"/System/Volumes/Preboot/Cryptexes/OS", "the dyld shared cache from macOS 13 on"},
	{"/System/Cryptexes/OS", "the same cryptex as the kernel may name it"},
	{"/private/var/db/dyld", "the dyld shared cache up to macOS 10.15"},
	{"/private/var/db/timezone", "time zone data (/usr/share/zoneinfo links here)"},
	{"/private/etc/localtime", "the host's time zone, read by libc, Go and Python"},
	{"/private/var/select/sh", "/bin/sh is a shim that runs the shell this link names"},
	{"/private/var/db/xcode_select_link", "xcode-select's choice, which the /usr/bin shims (cc, make, git) follow"},
	{"/Library/Developer/CommandLineTools", "the real cc, make and git the /usr/bin shims run"},
	{"/Applications/Xcode.app/Contents/Developer", "the same tools when Xcode is selected"},
}

// devRead and devReadWrite are the device files programs open.
var (
	devRead = []sysPath{
		{"/dev/random", "random numbers"},
		{"/dev/urandom", "random numbers"},
	}
	devReadWrite = []sysPath{
		{"/dev/null", "the null device"},
		{"/dev/zero", "zeros"},
		{"/dev/tty", "the controlling terminal"},
		{"/dev/dtracehelper", "dyld registers DTrace probes here at every start"},
		{"/dev/fd", "the process's own open files (bash process substitution)"},
	}
)

// sysctls are read by the runtimes of the common tools: CPU count and features (Go, node,
// make -j, Python's os.cpu_count), memory and page size (every allocator), the OS
// version (uname, Python's platform, Go's runtime), and a process's own arguments.
var sysctls = []string{
	"hw.activecpu", "hw.byteorder", "hw.cachelinesize", "hw.cpufamily", "hw.cpusubtype",
	"hw.cputype", "hw.l1dcachesize", "hw.l2cachesize", "hw.logicalcpu", "hw.logicalcpu_max",
	"hw.machine", "hw.memsize", "hw.model", "hw.ncpu", "hw.nperflevels", "hw.pagesize",
	"hw.physicalcpu", "hw.physicalcpu_max", "hw.tbfrequency",
	"kern.argmax", "kern.hostname", "kern.maxfilesperproc", "kern.maxproc", "kern.osproductversion",
	"kern.osrelease", "kern.ostype", "kern.osvariant_status", "kern.osversion", "kern.secure_kernel",
	"kern.usrstack64", "kern.version", "machdep.cpu.brand_string", "sysctl.proc_cputype",
	"vm.loadavg",
}

// sysctlPrefixes are sysctl families read the same way.
var sysctlPrefixes = []string{
	"hw.optional.",   // CPU features: Go's runtime and node's V8 pick code paths with them
	"hw.perflevel",   // performance and efficiency core counts
	"kern.proc.pid.", // a process's own information (ps, Go's os.Executable)
	"kern.procargs2", // a process's arguments (ps, node's process.title)
}

// machServices are the Mach services the common tools look up.
var machServices = []sysPath{
	{"com.apple.system.opendirectoryd.libinfo", "user and group lookups (getpwuid: git, ssh, Python's expanduser)"},
	{"com.apple.system.notification_center", "libc notifications (time zone changes)"},
	{"com.apple.trustd.agent", "TLS certificate verification (Go's crypto/x509, curl, Python through the proxy)"},
	{"com.apple.SecurityServer", "the same, for the Security framework's keychain of roots"},
	{"com.apple.bsd.dirhelper", "the per-user temporary directory (confstr, used by cc and xcrun)"},
	{"com.apple.PowerManagement.control", "node's libuv asks whether the system may sleep"},
}

// macSecrets are macOS's own credential stores and secrets, denied like the contract's
// mandatory ones. Relative entries are under the home directory.
var macSecrets = []string{
	"Library/Keychains", // the login keychain: passwords, tokens, keys
	"Library/Cookies",
	"Library/Application Support/com.apple.TCC", // privacy grants
	"/Library/Keychains",                        // the system keychain
	"/private/var/db/dslocal",                   // local accounts and password hashes
	"/private/var/root",
	"/private/etc/master.passwd",
	"/private/etc/sudoers",
	"/private/etc/sudoers.d",
	"/private/var/run/docker.sock", // Docker Desktop's engine, root on its VM
	"/private/var/run/com.docker.vmnetd.sock",
}
