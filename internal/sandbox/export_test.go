package sandbox

import "testing"

// For the external tests (package sandbox_test), which may import testenv:
// testenv imports sandbox, so the package's own tests cannot.

func FakeBinary() string { return fakeBinary }

func DockerDown() string { return dockerDown }

func FakeJob(t *testing.T, mode string) []byte { return fakeJob(t, mode) }

func LimitsForTests() Limits { return testLimits() }
