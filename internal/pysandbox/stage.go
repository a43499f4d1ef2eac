package pysandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/docker/docker/api/types/mount"

	"github.com/wmrl/wmrl/internal/diskspace"
	"github.com/wmrl/wmrl/internal/tasks"
)

// stage is the host side of one execution's read-only files:
//
//	<dir>/data/description.md   the task's, copied
//	<dir>/data/task.json        the task's Spec (TaskJSON)
//	<dir>/data/public/          empty: the mount point of the task's public/
//	<dir>/code/solution.py      the source
//
// Everything is readable by the container's user (0755 directories, 0444
// files). The task's own directory is mounted only for public/.
type stage struct {
	dir    string
	public string // the task's public/ directory
}

// TaskJSON is /data/task.json: the task's Spec as JSON, as a solution
// reads it (kind, metric, labels, id_column, target, ...).
func TaskJSON(t *tasks.Task) ([]byte, error) {
	b, err := json.MarshalIndent(t.Spec, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("task %s: task.json: %w", t.Spec.ID, err)
	}
	return append(b, '\n'), nil
}

// stagePrefix begins the name of every staging directory.
const stagePrefix = "wmrl-py-"

func newStage(base string, t *tasks.Task, source string) (st *stage, err error) {
	public := t.Path(tasks.DirPublic)
	if fi, err := os.Lstat(public); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("task %s: %s is not a directory (%v)", t.Spec.ID, public, err)
	}
	public, err = filepath.Abs(public)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", t.Spec.ID, err)
	}
	descr, err := os.ReadFile(t.Path(tasks.FileDescription))
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", t.Spec.ID, err)
	}
	spec, err := TaskJSON(t)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(base, stagePrefix)
	if err != nil {
		return nil, fmt.Errorf("python sandbox: staging: %w", diskspace.Annotate(err, base))
	}
	st = &stage{dir: dir, public: public}
	defer func() {
		if err != nil {
			st.remove()
			st = nil
		}
	}()
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("python sandbox: staging: %w", err)
	}
	st.dir = dir
	for _, d := range []string{"", "data", "data/public", "code"} {
		p := filepath.Join(dir, d)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return nil, fmt.Errorf("python sandbox: staging: %w", err)
		}
		if err := os.Chmod(p, 0o755); err != nil { // MkdirTemp made 0700; umask
			return nil, fmt.Errorf("python sandbox: staging: %w", err)
		}
	}
	for name, b := range map[string][]byte{
		"data/" + descrFileName: descr,
		"data/" + taskJSONName:  spec,
		"code/" + solutionName:  []byte(source),
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o444); err != nil {
			return nil, fmt.Errorf("python sandbox: staging: %w", diskspace.Annotate(err, p))
		}
		if err := os.Chmod(p, 0o444); err != nil {
			return nil, fmt.Errorf("python sandbox: staging: %w", err)
		}
	}
	return st, nil
}

// mounts are the execution's bind mounts, all read-only and private.
func (st *stage) mounts() []mount.Mount {
	bind := func(src, dst string) mount.Mount {
		return mount.Mount{Type: mount.TypeBind, Source: src, Target: dst, ReadOnly: true,
			BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate}}
	}
	return []mount.Mount{
		bind(filepath.Join(st.dir, "data"), dirData),
		bind(st.public, dirData+"/"+tasks.DirPublic),
		bind(filepath.Join(st.dir, "code"), dirCode),
	}
}

func (st *stage) remove() {
	// The files are read-only; their directories are not.
	_ = os.RemoveAll(st.dir)
}
