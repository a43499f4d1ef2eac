// Package cmdline holds what wmrl's commands (wmrl, wmrl-worker) share
// about their command lines: the exit statuses (0 success, 1 failure, 2
// usage error), the usage error that selects status 2, errors printed as
// one line, and the version of the build.
package cmdline

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
)

// Exit statuses.
const (
	ExitOK      = 0
	ExitFailure = 1 // the command failed
	ExitUsage   = 2 // the command line is wrong
)

// UsageError is a wrong command line: an unknown command or flag, a wrong
// number of arguments, an invalid flag or argument value. A command exits
// with ExitUsage on it.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError with a formatted message.
func Usagef(format string, args ...any) error {
	return &UsageError{fmt.Errorf(format, args...)}
}

// cobraUsage are the prefixes of the usage errors cobra makes itself
// without a hook to mark them.
var cobraUsage = []string{"unknown command ", "required flag(s) ", "if any flags in the group ", "none of the flags in the group "}

// ExitStatus is the exit status for err.
func ExitStatus(err error) int {
	var ue *UsageError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ue):
		return ExitUsage
	}
	for _, p := range cobraUsage {
		if strings.HasPrefix(err.Error(), p) {
			return ExitUsage
		}
	}
	return ExitFailure
}

// OneLine makes a message one line: its lines are joined with "; ", or
// with " " after a line that ends in ":".
func OneLine(msg string) string {
	var b strings.Builder
	for _, l := range strings.Split(msg, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		if b.Len() > 0 {
			if strings.HasSuffix(b.String(), ":") {
				b.WriteString(" ")
			} else {
				b.WriteString("; ")
			}
		}
		b.WriteString(l)
	}
	return b.String()
}

// Version is set, else the version of the running build (see
// BuildVersion). A binary passes its version variable, set at build time
// with -ldflags "-X main.version=v1.2.3".
func Version(set string) string {
	if set != "" {
		return set
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	return BuildVersion(bi)
}

// BuildVersion is the version of a build: the module's version, the VCS
// revision (12 digits) and "(modified)" when the tree had changes.
func BuildVersion(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		v += " " + rev
	}
	if modified == "true" {
		v += " (modified)"
	}
	return v
}
