package workflows

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

// faultParallel is how many fault tests (faultSetup) run at once: each
// waits out timeouts and outages far more than it computes, so all seven
// overlap, where go test's default (-parallel GOMAXPROCS) would run two
// at a time on a 2-core machine.
const faultParallel = 8

// TestMain raises -parallel to faultParallel unless it was given, and
// removes the binaries the fault tests shared. Only the fault tests call
// t.Parallel in this package.
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if p := flag.Lookup("test.parallel"); p != nil && !given {
		if n, err := strconv.Atoi(p.Value.String()); err == nil && n < faultParallel {
			p.Value.Set(strconv.Itoa(faultParallel))
		}
	}
	code := m.Run()
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}
