package backend

import (
	"fmt"
	"slices"
)

// Kind is the port a backend serves, named by the run-config field that
// picks a backend of it.
type Kind string

// The kinds of backend.
const (
	KindPolicy     Kind = "policy.backend"
	KindWorldModel Kind = "world_model.backend"
	KindGrader     Kind = "sandbox.kind"
	KindTasks      Kind = "tasks"
	// KindProgramGrader is a grader by sandbox.kind for runs of the
	// built-in policy, which writes programs of the built-in pipeline
	// language: it renders a program into the sandbox's language before
	// running it. Such a run takes its sandbox.kind's program grader when
	// the worker has one, else its grader.
	KindProgramGrader Kind = "sandbox.kind (programs)"
)

// Registry holds a worker's named backends: one adapter per kind and name,
// added once, in main, from the worker's registrations; the activities
// and the preflight look a run's backends up in it. The built-in adapters
// are the activities' own fields, not entries. A nil *Registry is empty.
// It is not safe for concurrent Add; lookups after the last Add are.
type Registry struct {
	adapters map[Kind]map[string]any
}

// Add registers adapter as the backend name of kind. The adapter must
// satisfy the kind's port, and a name is registered once per kind.
func (r *Registry) Add(kind Kind, name string, adapter any) error {
	var ok bool
	switch kind {
	case KindPolicy:
		_, ok = adapter.(Policy)
	case KindWorldModel:
		_, ok = adapter.(WorldModel)
	case KindGrader, KindProgramGrader:
		_, ok = adapter.(Grader)
	case KindTasks:
		_, ok = adapter.(TaskSource)
	default:
		return fmt.Errorf("backend %q: unknown kind %q", name, kind)
	}
	if !ok {
		return fmt.Errorf("%s: %q: %T does not serve the port", kind, name, adapter)
	}
	if name == "" || name == Builtin {
		return fmt.Errorf("%s: %q is the built-in backend's name", kind, name)
	}
	if r.adapters == nil {
		r.adapters = map[Kind]map[string]any{}
	}
	if _, dup := r.adapters[kind][name]; dup {
		return fmt.Errorf("%s: %q registered twice", kind, name)
	}
	if r.adapters[kind] == nil {
		r.adapters[kind] = map[string]any{}
	}
	r.adapters[kind][name] = adapter
	return nil
}

// Lookup returns the adapter registered as name of kind, as its port T.
func Lookup[T any](r *Registry, kind Kind, name string) (T, bool) {
	var zero T
	if r == nil {
		return zero, false
	}
	x, ok := r.adapters[kind][name].(T)
	if !ok {
		return zero, false
	}
	return x, true
}

// Names lists the registered backends for messages and the preflight,
// "policy.backend: tinker" and the like, sorted (program graders go with
// their graders and are not listed).
func (r *Registry) Names() []string {
	if r == nil {
		return nil
	}
	var out []string
	for kind, byName := range r.adapters {
		if kind == KindProgramGrader {
			continue
		}
		for name := range byName {
			out = append(out, string(kind)+": "+name)
		}
	}
	slices.Sort(out)
	return out
}

// Entry is one backend of a registry: its kind, its name and its adapter.
type Entry struct {
	Kind    Kind
	Name    string
	Adapter any
}

// NewRegistry returns a registry of entries, in order; the error is Add's
// first.
func NewRegistry(entries ...Entry) (*Registry, error) {
	r := &Registry{}
	for _, e := range entries {
		if err := r.Add(e.Kind, e.Name, e.Adapter); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// MustRegistry is NewRegistry for entries known to be valid (tests, fixed
// wiring): it panics on an error.
func MustRegistry(entries ...Entry) *Registry {
	r, err := NewRegistry(entries...)
	if err != nil {
		panic(err)
	}
	return r
}
